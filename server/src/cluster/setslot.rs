//! `CLUSTER SETSLOT`, as `redis-cli --cluster reshard` and `rebalance` send it, mapped onto
//! this cluster's own moves. redis-cli moves a slot by `SETSLOT slot IMPORTING source` on
//! the target, `SETSLOT slot MIGRATING target` on the source, then `GETKEYSINSLOT` and
//! `MIGRATE` on the source until it has no key of the slot, then `SETSLOT slot NODE target`
//! on the target, the source and every other primary.
//!
//! - Nodes keeping their data (fjall, RocksDB): MIGRATING starts the slot's move with its
//!   data (`CLUSTERX MIGRATE`); the source's GETKEYSINSLOT of that slot waits until the move
//!   ended, so it answers no key (the move deleted them) or the move's failure, and redis-cli
//!   sends no MIGRATE; NODE answers OK once the table names that node.
//! - Nodes over the etcd engine share the store: the slot's keys are already where the
//!   target reads them. GETKEYSINSLOT of a slot the node is migrating answers no key, and
//!   NODE gives the slot to the node in etcd's table (one `Txn` compared on the table's
//!   revision; commands routed by the old table are fenced).
//!
//! IMPORTING and STABLE only mark the slot (STABLE clears the marks), as in Redis.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rediskv::Reply;

use super::{Cluster, Node, membership};
use crate::sync::lock;

/// How long a command waits for a slot's move with its data to end.
const MOVE_WAIT: Duration = Duration::from_secs(120);

/// A slot's mark: which node it is migrating to or importing from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// `SETSLOT slot MIGRATING id`, on the owner.
    Migrating(String),
    /// `SETSLOT slot IMPORTING id`, on the target.
    Importing(String),
}

/// CLUSTER SETSLOT slot IMPORTING|MIGRATING|NODE id, or STABLE.
pub fn setslot(cluster: &Cluster, argv: &[Bytes]) -> Reply {
    let args = &argv[2..];
    if args.len() < 2 {
        return Reply::Error("ERR wrong number of arguments for 'cluster|setslot' command".into());
    }
    if cluster.moves.get().is_some_and(|m| m.primary().is_some()) {
        return Reply::Error("ERR Please use SETSLOT only with masters.".into());
    }
    let slot = match rediskv::server::args::parse_i64(&args[0]) {
        Some(slot) if (0..i64::from(rediskv::SLOT_COUNT)).contains(&slot) => slot as u16,
        _ => return Reply::Error("ERR Invalid or out of range slot".into()),
    };
    let action = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let id = args.get(2).map(|a| String::from_utf8_lossy(a).into_owned());
    let topology = cluster.topology();
    let node = id.as_ref().and_then(|id| cluster.known(&topology).into_iter().find(|n| n.id == *id));
    let mine = topology.owner(slot).is_some_and(|n| n.id == cluster.myself.id);
    match (action.as_str(), args.len(), node) {
        ("migrating", 3, _) if !mine => Reply::Error(format!("ERR I'm not the owner of hash slot {slot}")),
        ("importing", 3, _) if mine => Reply::Error(format!("ERR I'm already the owner of hash slot {slot}")),
        ("migrating" | "importing", 3, None) => {
            Reply::Error(format!("ERR I don't know about node {}", id.unwrap_or_default()))
        }
        ("migrating", 3, Some(node)) => {
            if let Some(moves) = cluster.moves.get() {
                let started = moves.start(slot, &node.id);
                if started.is_error() {
                    return started;
                }
            }
            lock(&cluster.marks).insert(slot, Mark::Migrating(node.id));
            Reply::OK
        }
        ("importing", 3, Some(node)) => {
            lock(&cluster.marks).insert(slot, Mark::Importing(node.id));
            Reply::OK
        }
        ("stable", 2, _) => {
            lock(&cluster.marks).remove(&slot);
            Reply::OK
        }
        ("node", 3, None) => Reply::Error(format!("ERR Unknown node {}", id.unwrap_or_default())),
        ("node", 3, Some(node)) => match assign(cluster, slot, &node) {
            Ok(()) => {
                lock(&cluster.marks).remove(&slot);
                Reply::OK
            }
            Err(e) => Reply::Error(format!("ERR {e}")),
        },
        _ => {
            Reply::Error("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP".into())
        }
    }
}

/// SETSLOT NODE: makes `node` the slot's owner in the table (over the etcd engine), or waits
/// for the slot's move with its data to have made it so.
fn assign(cluster: &Cluster, slot: u16, node: &Node) -> Result<(), String> {
    let Some(etcd) = cluster.etcd.get() else {
        return if cluster.topology().owner(slot) == Some(node) {
            Ok(())
        } else {
            Err("slots are not moved on a node outside an etcd cluster".into())
        };
    };
    let owner = || cluster.topology().owner(slot).map(|n| n.id.clone());
    if cluster.keeps_data() {
        wait_for_move(cluster, slot)?;
        membership::follow(cluster, etcd).map_err(|e| e.to_string())?;
        return if owner().as_deref() == Some(node.id.as_str()) {
            Ok(())
        } else {
            Err(format!(
                "slot {slot} moves with its data: send CLUSTER SETSLOT {slot} MIGRATING {} to its owner",
                node.id
            ))
        };
    }
    if owner().as_deref() == Some(node.id.as_str()) {
        // Already so here (the watch brought the target's change): nothing to write.
        return Ok(());
    }
    // From this node's table, read again from etcd when it was not the latest.
    let mut current = cluster.topology().as_ref().clone();
    loop {
        if current.owner(slot).is_some_and(|n| n.id == node.id) {
            break;
        }
        let next = current.with_owner(slot, node);
        if etcd.cluster_swap_table(current.revision, &next.encode()).map_err(|e| e.to_string())? {
            crate::log::notice!("Slot {slot} given to {} (CLUSTER SETSLOT)", node.id);
            break;
        }
        let records = etcd.cluster_records().map_err(|e| e.to_string())?;
        current =
            super::Topology::decode(records.table.as_deref().unwrap_or_default(), records.table_revision);
    }
    membership::follow(cluster, etcd).map_err(|e| e.to_string())
}

/// Waits while this node moves `slot` away with its data; fails when that move failed.
fn wait_for_move(cluster: &Cluster, slot: u16) -> Result<(), String> {
    let Some(moves) = cluster.moves.get() else { return Ok(()) };
    let deadline = Instant::now() + MOVE_WAIT;
    loop {
        let (running, last) = moves.last_move();
        match last {
            Some((s, _, _)) if s == slot && running => {
                if Instant::now() > deadline {
                    return Err(format!("the move of slot {slot} is still running"));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Some((s, "fail", error)) if s == slot => {
                return Err(format!("the move of slot {slot} failed: {error}"));
            }
            _ => return Ok(()),
        }
    }
}

/// Before CLUSTER GETKEYSINSLOT or COUNTKEYSINSLOT on a node moving that slot with its
/// data: waits for the move to end (then the slot's keys are gone), or answers its failure.
pub fn before_keys_in_slot(cluster: &Cluster, argv: &[Bytes]) -> Option<Reply> {
    let sub = argv.get(1)?;
    if !(sub.eq_ignore_ascii_case(b"getkeysinslot") || sub.eq_ignore_ascii_case(b"countkeysinslot")) {
        return None;
    }
    let slot = u16::try_from(rediskv::server::args::parse_i64(argv.get(2)?)?).ok()?;
    if !matches!(lock(&cluster.marks).get(&slot), Some(Mark::Migrating(_))) {
        return None;
    }
    wait_for_move(cluster, slot).err().map(|e| Reply::Error(format!("ERR {e}")))
}
