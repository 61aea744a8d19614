//! The slot moves of a node that keeps its data (fjall, RocksDB): which slot it closes,
//! which it imports, what CLUSTER INFO reports of them, and the capture of its replication
//! stream a move forwards. The moves themselves run in [`crate::slot_move`].

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use rediskv::Reply;
use rediskv::key_slot;
use rediskv::server::{Propagated, Propagation};

use crate::replication::Replication;
use crate::store::ClosedSlot;
use crate::sync::lock;

/// The slot moves of a node that keeps its data: the one it sends, the one it receives,
/// and the capture of the replication stream a move forwards.
pub struct Moves {
    /// `--cluster-initial-nodes`: how many nodes share an empty table.
    pub initial_nodes: usize,
    pub(crate) replication: Arc<Replication>,
    pub(crate) closed: Arc<ClosedSlot>,
    pub(crate) capturing: AtomicBool,
    /// The slot whose units are captured, and its units since the snapshot.
    captured: Mutex<Option<(u16, Vec<Vec<Propagated>>)>>,
    pub(crate) importing: Mutex<Option<u16>>,
    pub(crate) running: AtomicBool,
    pub(crate) report: Mutex<Report>,
    /// What the node's replication says: the primary it follows, if any.
    primary: OnceLock<RoleHook<Option<(String, u16)>>>,
    /// Whether its data holds its primary's stream up to an offset.
    synced: OnceLock<RoleHook<bool>>,
    /// Makes the node a primary (REPLICAOF NO ONE).
    promote: OnceLock<RoleHook<()>>,
    /// Starts moving a slot to a node (CLUSTERX MIGRATE's start, run by `crate::slot_move`).
    start: OnceLock<StartHook>,
}

/// Starts the move of a slot to the node of this id; answers what CLUSTERX MIGRATE would.
type StartHook = Box<dyn Fn(u16, &str) -> Reply + Send + Sync>;

/// A question or an order to the server, set at start (the cluster module does not reach
/// the server's state).
type RoleHook<T> = Box<dyn Fn() -> T + Send + Sync>;

/// What CLUSTER INFO shows of the last moves.
#[derive(Debug, Default, Clone)]
pub(crate) struct Report {
    pub(crate) out: Option<Outgoing>,
    /// The slot imported last and how it went.
    pub(crate) import: Option<(u16, &'static str)>,
}

/// The last move out of this node.
#[derive(Debug, Default, Clone)]
pub(crate) struct Outgoing {
    pub(crate) slot: u16,
    pub(crate) to: String,
    pub(crate) state: &'static str,
    pub(crate) keys: u64,
    pub(crate) writes: u64,
    pub(crate) deleted: u64,
    pub(crate) total_ms: u64,
    pub(crate) closed_ms: u64,
    pub(crate) error: String,
}

impl Moves {
    /// The moves of a node over `closed` (its store's), in front of its replication stream.
    pub fn new(replication: Arc<Replication>, closed: Arc<ClosedSlot>, initial_nodes: usize) -> Self {
        Moves {
            initial_nodes,
            replication,
            closed,
            capturing: AtomicBool::new(false),
            captured: Mutex::new(None),
            importing: Mutex::new(None),
            running: AtomicBool::new(false),
            report: Mutex::new(Report::default()),
            primary: OnceLock::new(),
            synced: OnceLock::new(),
            promote: OnceLock::new(),
            start: OnceLock::new(),
        }
    }

    /// Tells the moves how to ask for the primary this node follows, whether its data holds
    /// that primary's stream, and how to make the node a primary.
    pub fn set_role(
        &self,
        primary: impl Fn() -> Option<(String, u16)> + Send + Sync + 'static,
        synced: impl Fn() -> bool + Send + Sync + 'static,
        promote: impl Fn() + Send + Sync + 'static,
    ) {
        let _ = self.primary.set(Box::new(primary));
        let _ = self.synced.set(Box::new(synced));
        let _ = self.promote.set(Box::new(promote));
    }

    /// Tells the moves how to start one (CLUSTER SETSLOT MIGRATING starts it as CLUSTERX
    /// MIGRATE does).
    pub fn set_start(&self, start: impl Fn(u16, &str) -> Reply + Send + Sync + 'static) {
        let _ = self.start.set(Box::new(start));
    }

    /// Starts moving `slot` to node `to`, through the hook set at start.
    pub fn start(&self, slot: u16, to: &str) -> Reply {
        match self.start.get() {
            Some(start) => start(slot, to),
            None => Reply::Error("ERR slot moves are not ready yet".into()),
        }
    }

    /// What refuses the store's commits: the closed slot, the lease.
    pub fn guard(&self) -> &Arc<ClosedSlot> {
        &self.closed
    }

    /// The slot closed to writes now, if any.
    pub fn closed(&self) -> Option<u16> {
        self.closed.get()
    }

    /// The slot this node imports now, if any.
    pub fn importing(&self) -> Option<u16> {
        *lock(&self.importing)
    }

    /// The address of the primary this node replicates, if it is a replica.
    pub fn primary(&self) -> Option<(String, u16)> {
        self.primary.get().and_then(|primary| primary())
    }

    /// The address of the primary this node may take the slots of when that primary is
    /// gone: the one it replicates, once its data holds that primary's stream (a replica
    /// that never synced, or that is loading a full sync, would serve the slots without
    /// their data).
    pub fn successor_of(&self) -> Option<(String, u16)> {
        self.primary().filter(|_| self.synced.get().is_some_and(|synced| synced()))
    }

    /// Makes this replica a primary (REPLICAOF NO ONE): it took its primary's slots.
    pub fn promote(&self) {
        if let Some(promote) = self.promote.get() {
            promote();
        }
    }

    /// CLUSTER INFO's lines of the last moves (after Kvrocks' names).
    pub fn info(&self) -> String {
        let report = lock(&self.report).clone();
        let mut out = String::new();
        if let Some(o) = report.out {
            out.push_str(&format!(
                "migrating_slot:{}\r\ndestination_node:{}\r\nmigrating_state:{}\r\nmigrating_keys:{}\r\n\
                 migrating_writes:{}\r\nmigrating_deleted_keys:{}\r\nmigrating_time_ms:{}\r\n\
                 migrating_closed_ms:{}\r\n",
                o.slot, o.to, o.state, o.keys, o.writes, o.deleted, o.total_ms, o.closed_ms
            ));
            if !o.error.is_empty() {
                out.push_str(&format!("migrating_error:{}\r\n", o.error.replace(['\r', '\n'], " ")));
            }
        }
        if let Some((slot, state)) = report.import {
            out.push_str(&format!("importing_slot:{slot}\r\nimport_state:{state}\r\n"));
        }
        out
    }

    /// Whether a move out of this node runs now, and the last one's slot, state and error.
    pub fn last_move(&self) -> (bool, Option<(u16, &'static str, String)>) {
        let report = lock(&self.report);
        let last = report.out.as_ref().map(|o| (o.slot, o.state, o.error.clone()));
        (self.running.load(SeqCst), last)
    }

    pub(crate) fn progress(&self, change: impl FnOnce(&mut Outgoing)) {
        if let Some(out) = lock(&self.report).out.as_mut() {
            change(out);
        }
    }

    /// Starts capturing the units that touch `slot` (call it at the snapshot's instant).
    pub(crate) fn capture(&self, slot: u16) {
        *lock(&self.captured) = Some((slot, Vec::new()));
        self.capturing.store(true, SeqCst);
    }

    /// The units captured since the last call.
    pub(crate) fn take(&self) -> Vec<Vec<Propagated>> {
        lock(&self.captured).as_mut().map(|(_, units)| std::mem::take(units)).unwrap_or_default()
    }

    /// Stops capturing; answers the units not taken yet.
    pub(crate) fn stop_capture(&self) -> Vec<Vec<Propagated>> {
        self.capturing.store(false, SeqCst);
        lock(&self.captured).take().map(|(_, units)| units).unwrap_or_default()
    }
}

impl Propagation for Moves {
    fn active(&self) -> bool {
        self.replication.active() || self.capturing.load(SeqCst)
    }

    fn propagate(&self, unit: Vec<Propagated>) {
        if self.capturing.load(SeqCst) {
            let mut captured = lock(&self.captured);
            if let Some((slot, units)) = captured.as_mut()
                && unit.iter().any(|c| touches(&c.argv, *slot))
            {
                units.push(unit.clone());
            }
        }
        if self.replication.active() {
            self.replication.propagate(unit);
        }
    }
}

/// Whether a command has a key in `slot`.
fn touches(argv: &[Bytes], slot: u16) -> bool {
    super::resolve(argv)
        .and_then(|(info, argv)| rediskv::server::table::key_positions(info, argv).ok())
        .is_some_and(|at| at.into_iter().any(|i| key_slot(&argv[i]) == slot))
}

/// The id of the node whose slots' data is in `dir`: the one kept in its
/// `cluster-node-id` file, or `fresh`, then kept there.
///
/// # Errors
/// The file cannot be written.
pub fn node_id(dir: &std::path::Path, fresh: &str) -> Result<String, String> {
    let path = dir.join("cluster-node-id");
    if let Ok(kept) = std::fs::read_to_string(&path) {
        let kept = kept.trim();
        if kept.len() == 40 && kept.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(kept.to_string());
        }
    }
    std::fs::write(&path, format!("{fresh}\n"))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(fresh.to_string())
}
