//! A server's role in replication, changed: it follows a primary (REPLICAOF host port, a
//! failover's end, the `replicaof` setting at start) or stops following one (REPLICAOF NO
//! ONE, a promotion by FAILOVER or by its cluster).

use crate::replication::Sync;
use crate::state::State;

/// Stops replicating (REPLICAOF NO ONE, a promotion): a primary from now on, keeping its
/// primary's replication id as its second one.
pub fn stop_replicating(state: &State) {
    state.config_mut().set_replicaof("");
    if !state.link.is_replica() {
        return;
    }
    state.link.stop();
    // Its own writes from now on are not its primary's stream.
    state.store.stamp_writes(None);
    if let Err(e) = state.store.set_position(None) {
        crate::log::warning!("Cannot forget the replication position: {e}");
    }
    let (replid, offset) = state.replication.id_and_offset();
    state.replication.follow(&replid, offset, Sync::Promoted);
    crate::log::notice!("MASTER MODE enabled (the primary's id {replid} is valid up to offset {offset})");
}

/// Replicates `host:port` from now on (what CONFIG REWRITE writes as `replicaof`): its own
/// writes stop being propagated, its replicas are dropped (they sync again) and the link
/// thread starts.
pub fn become_replica(state: &State, host: &str, port: u16) {
    state.config_mut().set_replicaof(&format!("{host} {port}"));
    state.replication.set_proxying(true);
    state.replication.drop_replicas();
    crate::log::notice!("Connecting to MASTER {host}:{port}");
    state.link.start(host, port);
}
