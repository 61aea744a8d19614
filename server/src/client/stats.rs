//! INFO commandstats, errorstats and keyspace hits for the commands a client runs.

use rediskv::Reply;
use rediskv::server::table::CommandInfo;

use super::Client;
use crate::state::State;

impl Client {
    /// INFO commandstats/errorstats and totals for one command of row `info`: `usec` of
    /// running, or `None` when refused before running.
    pub(super) fn count(&self, state: &State, info: &CommandInfo, usec: Option<u64>, reply: &Reply) {
        let stats = &state.stats;
        self.count_error(state, reply);
        // A made-up subcommand is refused before running, as in Redis: not counted, and
        // never an entry, so the table stays small whatever clients send.
        if matches!(reply, Reply::Error(e) if e.starts_with("ERR unknown subcommand")) {
            return;
        }
        stats.commands.count(self.info.loop_index, info, usec, reply.is_error());
    }

    /// INFO errorstats for a reply (an unknown command's has no commandstats entry).
    pub(super) fn count_error(&self, state: &State, reply: &Reply) {
        if let Reply::Error(text) = reply
            && !self.error_counted.take()
        {
            state.stats.error(text);
        }
    }
}

/// Counts keyspace hits and misses from a read command's reply.
pub(super) fn keyspace_hits(state: &State, lane: usize, reply: &Reply) {
    let (hits, misses) = match reply {
        Reply::Error(_) => (0, 0),
        Reply::Nil => (0, 1),
        Reply::Array(items) | Reply::Set(items) if items.is_empty() => (0, 1),
        Reply::Map(pairs) if pairs.is_empty() => (0, 1),
        Reply::Array(items) if items.iter().any(|r| matches!(r, Reply::Nil)) => {
            let misses = items.iter().filter(|r| matches!(r, Reply::Nil)).count() as u64;
            (items.len() as u64 - misses, misses)
        }
        Reply::Integer(0) => (0, 1),
        _ => (1, 0),
    };
    state.stats.commands.keyspace(lane, hits, misses);
}
