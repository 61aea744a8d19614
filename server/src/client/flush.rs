//! FLUSHALL and FLUSHDB, the server's part: FLUSHALL (not a tenant's) empties the whole
//! store, every namespace, in one batch; after the engine empties a database (FLUSHDB, a
//! tenant's FLUSHALL, an EXEC holding one) the collector, the tracking clients and the
//! blocked clients hear of it in [`Client::run_in_engine`].

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::table::CommandInfo;

use super::{Client, Next};
use crate::admin;
use crate::state::State;

/// FLUSHALL: of the whole store, then every blocked client is woken, the collector hinted
/// and every tracking client's table dropped; a tenant's runs in the engine (its own
/// keyspace).
pub(super) fn flushall(
    c: &mut Client,
    info: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    if c.tenant {
        return c.run_in_engine(info, argv, state);
    }
    if state.cluster.get().is_some_and(|cluster| cluster.shares_store()) {
        // A cluster node over a shared store flushes its own slots' keys.
        return super::keyspace::command(c, info, argv, state);
    }
    let reply = c.flush_everything(argv, state);
    if !reply.is_error() {
        state.blocked.wake_all(state);
        state.maint.garbage_hint.fetch_add(1, Relaxed);
        state.maint.flushes.fetch_add(1, Relaxed);
        // Also with no client tracking now: FLUSHALL frees the keys clients that turned
        // tracking off left in the table, as Redis does.
        let mut to = crate::tracking::Delivery { me: Some(&c.info), own: &mut c.pushes };
        state.tracking.flush(state.peers(), &mut to);
    }
    (reply, Next::Continue)
}

impl Client {
    /// FLUSHALL from the admin: every record of every namespace, in one batch. (Inside
    /// MULTI, and for a bad argument, the engine answers: it queues or refuses.)
    fn flush_everything(&mut self, argv: &[Bytes], state: &State) -> Reply {
        let mode_ok = match argv {
            [_] => true,
            [_, mode] => mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync"),
            _ => false,
        };
        if !mode_ok || self.session.in_multi() {
            return self.engine.execute(&mut self.session, argv);
        }
        // Every namespace's engine: no command runs meanwhile, and the WATCHes on keys that
        // exist are flagged before they go, as Redis' FLUSHALL does.
        let engines = state.engines();
        let _locks: Vec<_> = engines.iter().map(|e| e.locks().lock(true, std::iter::empty())).collect();
        for engine in &engines {
            engine.touch_all_watched();
            engine.forget_key_counts();
        }
        let reply = admin::flush_backend(state);
        if !reply.is_error() {
            state.replication.propagate_command(self.session.db(), argv);
        }
        reply
    }

    /// Whether the command about to run (or a command of the EXEC about to run) is FLUSHDB
    /// or FLUSHALL.
    /// Whether running `name` now empties databases: a FLUSHDB or FLUSHALL outside MULTI (one
    /// inside is only queued), or an EXEC whose queue holds one.
    /// (`name` is the row's: lowercase.)
    pub(super) fn flushes(&self, name: &str) -> bool {
        if self.session.in_multi() {
            let flush = |n: &[u8]| n.eq_ignore_ascii_case(b"flushdb") || n.eq_ignore_ascii_case(b"flushall");
            return name == "exec" && self.session.queued().any(|c| flush(&c[0]));
        }
        matches!(name, "flushdb" | "flushall")
    }

    /// After the engine ran `name` successfully: the clients blocked on the databases a
    /// FLUSHDB or FLUSHALL emptied are woken (to wait on, or fail).
    pub(super) fn wake_flushed(&self, name: &str, state: &State) {
        if matches!(name, "flushdb" | "flushall") {
            let db = (name == "flushdb").then(|| self.session.db());
            state.blocked.wake_flushed(state, &self.engine, db);
        }
    }
}
