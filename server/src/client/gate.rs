//! The gate: whether a resolved command may run now for this client (AUTH, ACL, MULTI,
//! a busy script, subscribed mode, tenants, CLIENT PAUSE, maxmemory, a store that cannot
//! write), read from its table
//! row.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::table::{self, CommandInfo, Family, attr, flag};

use super::Client;
use crate::acl;
use crate::cluster;
use crate::scripting;
use crate::state::State;

impl Client {
    /// Why the command of row `info` may not run now: `Some(Some(error))` to answer,
    /// `Some(None)` to wait for a CLIENT PAUSE, `None` to run it. Keys evicted on the way
    /// leave this client's own invalidations in `early`, for before the reply. Checked in Redis' order:
    /// the subcommand and arity first, then AUTH, ACL, MULTI, a busy script, subscribed
    /// mode, tenants, CLIENT PAUSE, maxmemory, a store that cannot write.
    pub(super) fn refusal(
        &self,
        info: &'static CommandInfo,
        argv: &[Bytes],
        state: &State,
        early: &mut Vec<u8>,
    ) -> Option<Option<Reply>> {
        if let Err(refusal) = rediskv::server::check_row(info, argv) {
            return Some(Some(refusal));
        }
        let name = info.container();
        if !self.authenticated && !info.has(flag::NO_AUTH) {
            return Some(Some(Reply::Error("NOAUTH Authentication required.".into())));
        }
        if self.restricted
            && let Some(denied) = self.acl_refusal(argv, state)
        {
            return Some(Some(denied));
        }
        // The primary's stream is applied whatever the slots, as Redis.
        if let Some(cluster) = state.cluster.get().filter(|_| !self.master)
            && let Some(redirection) = self.cluster_refusal(cluster, info, argv, state)
        {
            return Some(redirection);
        }
        // Redis' no-multi commands (the server's SAVE and SHUTDOWN among them).
        if self.session.in_multi() && info.has(flag::NO_MULTI) {
            return Some(Some(Reply::Error("ERR Command not allowed inside a transaction".into())));
        }
        if state.scripts.active() {
            let threshold = state.config().number("busy-reply-threshold").max(0) as u64;
            // A script queues behind the running one on the script thread: it holds up no
            // event loop, and only past the threshold gets BUSY.
            let refusal = if scripting::runs_script(info) {
                state.scripts.busy(threshold, argv)
            } else {
                state.scripts.wait_or_busy(threshold, argv)
            };
            if let Some(busy) = refusal {
                return Some(Some(busy));
            }
        }
        if self.subs.any() && self.session.resp() == 2 && !info.is(attr::SUBSCRIBED) {
            return Some(Some(Reply::Error(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                info.name
            ))));
        }
        if self.tenant && info.is(attr::TENANT_DENIED) {
            return Some(Some(Reply::Error("ERR admin permission required to perform the command".into())));
        }
        if name == "swapdb" && state.store.shared() {
            // Each node keeps its own database mapping: a swap on one would not reach the others.
            return Some(Some(Reply::Error(
                "ERR SWAPDB is not supported when several server nodes share the store".into(),
            )));
        }
        if state.pause_active.load(Relaxed) {
            // CLIENT PAUSE WRITE holds what may write or replicate (an EXEC whose queue
            // does too); a script only when its flags let it write.
            let may_write = |info: &CommandInfo| info.has(flag::WRITE | flag::MAY_REPLICATE);
            // A script queued in the transaction counts by its flags too.
            let queued_write = |c: &[Bytes]| {
                scripting::script_may_write(&state.scripts, c)
                    .unwrap_or_else(|| table::find(c).is_ok_and(may_write))
            };
            let write = scripting::script_may_write(&state.scripts, argv).unwrap_or_else(|| may_write(info))
                || (name == "exec"
                    && (self.session.queued().any(queued_write)
                        || self.multi_server.iter().any(|(_, c)| queued_write(c))));
            let data = info.family != Family::Server;
            if (data || write) && state.paused(write).is_some() {
                return Some(None);
            }
        }
        // Nothing to look at without a maxmemory (the usual case).
        if state.maxmemory.load(Relaxed) > 0
            && let Some(oom) = self.oom_refusal(info, argv, state, early)
        {
            return Some(Some(oom));
        }
        // As Redis 7.0 while its AOF cannot be written: what may write is refused (by its
        // flags, a script's declared flags, an EXEC's queue), and PING, so that a monitor
        // sees it; reads run.
        if state.writes.failing() && (self.writes(info, argv, state) || name == "ping") {
            return Some(Some(Reply::Error(state.writes.refusal())));
        }
        if !self.master
            && let Some(refusal) = self.replication_refusal(info, argv, state)
        {
            return Some(Some(refusal));
        }
        None
    }

    /// Under a `maxmemory`: evicts keys, as Redis before any command runs; the OOM error
    /// when that cannot bring memory under the limit and the command is refused then.
    #[cold]
    #[inline(never)]
    fn oom_refusal(
        &self,
        info: &'static CommandInfo,
        argv: &[Bytes],
        state: &State,
        early: &mut Vec<u8>,
    ) -> Option<Reply> {
        let name = info.container();
        // As Redis 7.0: EXEC is checked for the queued commands (memory may have run out
        // since they were queued), and inside MULTI every command but EXEC, DISCARD, QUIT and
        // RESET is, since queueing takes memory too.
        let in_multi = self.session.in_multi();
        let denyoom = |c: &[Bytes]| table::find(c).is_ok_and(|i| i.has(flag::DENYOOM));
        // A container's subcommand has its own flags (FUNCTION LOAD is deny-oom, FUNCTION
        // LIST is not); a script command's come from the script's declared flags.
        let checked = || {
            info.has(flag::DENYOOM)
                || scripting::denies_oom(&state.scripts, name, argv)
                || (in_multi && !matches!(name, "exec" | "discard" | "quit" | "reset"))
                || (in_multi && name == "exec" && self.session.queued().any(denyoom))
        };
        // Only deny-oom commands are refused when eviction cannot bring memory under the
        // limit.
        (crate::evict::perform(state, Some(&self.info), early)
            && checked()
            && !self.info.no_evict.load(Relaxed))
        .then(|| Reply::Error("OOM command not allowed when used memory > 'maxmemory'.".into()))
    }

    /// Whether the command counts as a write, as Redis' `is_write_command`: by its flags, a
    /// script's declared flags, or, for EXEC, any queued command's.
    fn writes(&self, info: &CommandInfo, argv: &[Bytes], state: &State) -> bool {
        // Only script commands (server rows) declare flags, and EXEC is a session row: the
        // names are compared for those families alone.
        let write = |info: &CommandInfo, c: &[Bytes]| {
            info.has(flag::WRITE)
                || (info.family == Family::Server
                    && scripting::declares_writes(&state.scripts, info.container(), c))
        };
        let queued_write = |c: &[Bytes]| table::find(c).is_ok_and(|i| write(i, c));
        write(info, argv)
            || (info.family == Family::Session
                && info.container() == "exec"
                && (self.session.queued().any(queued_write)
                    || self.multi_server.iter().any(|(_, c)| queued_write(c))))
    }

    /// Redis' replication refusals, in its order: too few good replicas to write
    /// (`min-replicas-to-write`), a write to a read-only replica, a command that needs data
    /// while the link is down and `replica-serve-stale-data` is off.
    #[inline(always)]
    fn replication_refusal(
        &self,
        info: &'static CommandInfo,
        argv: &[Bytes],
        state: &State,
    ) -> Option<Reply> {
        // A primary with enough replicas (or no `min-replicas-to-write`) refuses nothing:
        // told here, without a call.
        if !state.link.is_replica() && !state.replication.too_few_replicas() {
            return None;
        }
        self.replication_refusal_checked(info, argv, state)
    }

    #[cold]
    #[inline(never)]
    fn replication_refusal_checked(
        &self,
        info: &'static CommandInfo,
        argv: &[Bytes],
        state: &State,
    ) -> Option<Reply> {
        let replica = state.link.is_replica();
        let writes = || self.writes(info, argv, state);
        if !replica && state.replication.too_few_replicas() && writes() {
            return Some(Reply::Error(crate::replication::NOREPLICAS.into()));
        }
        if !replica {
            return None;
        }
        let config = state.config();
        if writes() && config.get("replica-read-only") == "yes" {
            return Some(Reply::Error("READONLY You can't write against a read only replica.".into()));
        }
        if !state.link.is_up() && config.get("replica-serve-stale-data") == "no" && !info.has(flag::STALE) {
            return Some(Reply::Error(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.".into(),
            ));
        }
        None
    }

    /// The redirection when the command's keys are not this node's (as Redis, after ACL),
    /// or `Some(None)` for a write that waits while its slot is handed to another node;
    /// otherwise remembers the slot it was routed to and fences its commits by it.
    fn cluster_refusal(
        &self,
        cluster: &cluster::Cluster,
        info: &'static CommandInfo,
        argv: &[Bytes],
        state: &State,
    ) -> Option<Option<Reply>> {
        self.routed.set(None);
        if info.name == "select" && argv.get(1).is_some_and(|db| db[..] != *b"0") {
            return Some(Some(Reply::Error("ERR SELECT is not allowed in cluster mode".into())));
        }
        // ASKING counts for the next command, or for a whole transaction, as Redis.
        let asking = self.asking.get();
        let queueing = self.session.in_multi() && !matches!(info.name, "exec" | "discard");
        if !(queueing || matches!(info.name, "asking" | "multi")) {
            self.asking.set(false);
        }
        let tls = self.info.tls.load(Relaxed);
        let route = if info.name == "exec" && self.session.in_multi() {
            let queued = self.session.queued().chain(self.multi_server.iter().map(|(_, c)| &c[..]));
            cluster.route_client(
                queued.filter_map(cluster::resolve),
                asking,
                self.writes(info, argv, state),
                tls,
            )
        } else {
            cluster.route_client(
                std::iter::once((info, argv)),
                asking,
                !queueing && self.writes(info, argv, state),
                tls,
            )
        };
        match route {
            cluster::Route::Here(slot, revision) => {
                self.routed.set(slot);
                cluster.fence(&state.store, slot, revision);
                None
            }
            cluster::Route::Elsewhere(refusal) => Some(Some(refusal)),
            cluster::Route::Wait => Some(None),
        }
    }

    /// The NOPERM error when the client's user may not run `argv` (logged in the ACL log).
    fn acl_refusal(&self, argv: &[Bytes], state: &State) -> Option<Reply> {
        // An unknown subcommand is refused as unknown, before any ACL check (as in Redis).
        let id = acl::resolve(argv).ok()?;
        let denied = self.user.check(id, argv).err()?;
        let (reason, object) = match denied {
            acl::Denied::Command => ("command", acl::command_name(id).as_bytes()),
            acl::Denied::Key(at) => ("key", &argv[at][..]),
            acl::Denied::Channel(at) => ("channel", &argv[at][..]),
        };
        let max = state.config().number("acllog-max-len").max(0) as usize;
        state.acl.log(reason, self.session.in_multi(), object, self.user.name(), self.info.line(), max);
        Some(denied.error(id))
    }
}
