//! What the server does around the commands the blocked-client registry re-runs
//! ([`crate::blocking`]): keyspace events, the slow log, INFO's counters, client tracking,
//! and the answer's way back to the client's event loop.

use bytes::Bytes;
use rediskv::{Reply, Session};

use crate::blocking::{Host, Parked, send_answer};
use crate::state::State;
use crate::sync::lock;

impl Host for State {
    fn retried(&self, session: &Session) {
        crate::notify::command_events(self, self.dirty.shared_lane(), session.effects(), session.events());
    }

    fn served(&self, parked: Parked, reply: Reply, usec: u64) {
        // Redis logs a blocking command when it is served, not when it blocks.
        if self.slowlog.wants(usec) {
            let name = lock(&parked.info.name).clone();
            let now = crate::clock::unix_micros() / 1_000_000;
            self.slowlog.record(&parked.argv, usec, now, &parked.info.addr, name);
        }
        if let Reply::Error(text) = &reply {
            self.stats.error(text);
            let name = String::from_utf8_lossy(&parked.argv[0]).to_lowercase();
            self.stats.commands.count_failure(&name);
        }
        // What the served command wrote invalidates tracked keys, its own client's after
        // its answer (a BLMOVE's push to a list that client tracks).
        let mut pushes = Vec::new();
        if self.tracking.active() {
            let engine = &parked.engine;
            let written = engine.modified_keys(parked.session.touched());
            if !written.is_empty() {
                let mut to = crate::tracking::Delivery { me: Some(&parked.info), own: &mut pushes };
                self.tracking.invalidate(self.peers(), engine.layout().namespace(), &written, &mut to);
            }
        }
        send_answer(&self.loops, &parked.info, parked.session, &reply, &pushes);
    }

    fn rerun(&self, argv: &[Bytes], tls: bool, run: &mut dyn FnMut() -> Reply) -> Reply {
        match self.cluster.get() {
            Some(cluster) => cluster.run_routed(&self.store, argv, tls, run),
            None => run(),
        }
    }
}
