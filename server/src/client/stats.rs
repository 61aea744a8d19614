//! INFO commandstats, errorstats and keyspace hits for the commands a client runs.

use rediskv::Reply;
use rediskv::server::table::{CommandInfo, Family};

use super::Client;
use crate::counters::CommandStats;
use crate::state::State;

impl Client {
    /// INFO commandstats/errorstats and totals for one command of row `info`: `usec` of
    /// running, or `None` when refused before running; held back ([`Client::flush_counts`])
    /// with `batched`, its [`batched`] row when the client defers counts.
    #[inline]
    pub(super) fn count(
        &mut self,
        state: &State,
        info: &CommandInfo,
        batched: Option<usize>,
        usec: Option<u64>,
        reply: &Reply,
    ) {
        let stats = &state.stats;
        self.count_error(state, reply);
        // A made-up subcommand is refused before running, as in Redis: not counted, and
        // never an entry, so the table stays small whatever clients send.
        if matches!(reply, Reply::Error(e) if e.starts_with("ERR unknown subcommand")) {
            return;
        }
        let lane = self.info.loop_index;
        match (usec, batched) {
            (Some(usec), Some(row)) => {
                stats.commands.count_pending(lane, &mut self.pending, row, usec, reply.is_error());
            }
            _ => stats.commands.count(lane, info, usec, reply.is_error()),
        }
    }

    /// Adds the counts this client holds back ([`crate::counters::PendingCounts`]) to its
    /// event loop's lane, and publishes the command it ran last (CLIENT LIST `cmd`, `idle`).
    pub(super) fn flush_counts(&mut self, state: &State) {
        state.stats.commands.flush(self.info.loop_index, &mut self.pending);
        if let Some((info, ended)) = self.unpublished.take() {
            self.info.ran(ended, Some(info));
        }
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

/// The table row of a command whose counts a client may hold back until it
/// [`Client::flush_counts`]: a data type's own commands (none of them reads the counters);
/// `None` for the server's, session and keyspace commands, which run with the counters up to date.
pub(super) fn batched(info: &CommandInfo) -> Option<usize> {
    if matches!(info.family, Family::Server | Family::Session | Family::Keyspace | Family::Generic) {
        return None;
    }
    info.position()
}

/// Counts keyspace hits and misses from a read command's reply.
pub(super) fn keyspace_hits(client: &mut Client, state: &State, reply: &Reply) {
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
    if client.defers {
        CommandStats::keyspace_pending(&mut client.pending, hits, misses);
    } else {
        state.stats.commands.keyspace(client.info.loop_index, hits, misses);
    }
}
