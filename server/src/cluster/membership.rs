//! Nodes over one etcd prefix find each other and share the slots, with no step of their
//! own: each registers under an etcd lease, watches the cluster's records and, whenever the
//! live nodes and the slot table disagree, computes the same deterministic rebalance and
//! applies it in one `Txn` guarded by the table's revision (so two nodes never both apply a
//! change; the loser reads the winner's table).
//!
//! A node that stops renewing its lease (killed, paused) loses its registration when the
//! lease runs out (`cluster-node-timeout`, whole seconds), and the live nodes take its slots
//! at their next look (at once, from the watch). A node whose lease ran out registers again
//! and gets a fair share back. Before a node routes by a new table it raises the fence of
//! every etcd cluster holding data to it ([`Cluster::raise_fences`]).
//!
//! Nodes that keep their slots' data (fjall, RocksDB) share the slots once, when the table
//! is empty and `--cluster-initial-nodes` have registered ([`settle`]); from then on a slot
//! changes owner only when its data moves (`migrate`), and the table only follows the
//! nodes' addresses.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rediskv::SLOT_COUNT;
use rediskv_etcd::Backend;

use super::{Cluster, Node, Topology};

/// The table the live nodes should have, when a node left (some slot has no live owner) or
/// joined (a live node not placed by the last rebalance nor owning slots): slots of nodes
/// that are gone are free; each live node (in id order) has a quota of `16384 / n` slots,
/// the first `16384 % n` one more; a node over its quota frees its highest slots; free slots
/// go, lowest first, to the nodes under theirs. `None` otherwise: slots moved by hand
/// (`CLUSTER SETSLOT`) stay where they were put.
pub fn rebalance(current: &Topology, live: &[Node]) -> Option<Topology> {
    if live.is_empty() {
        return None;
    }
    let index: BTreeMap<&str, usize> = live.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();
    let mut owners: Vec<Option<usize>> =
        current.owners().iter().map(|o| o.as_ref().and_then(|n| index.get(n.id.as_str()).copied())).collect();
    let placed =
        |node: &Node| current.placed.contains(&node.id) || current.ranges.iter().any(|r| r.2.id == node.id);
    if owners.iter().all(Option::is_some) && live.iter().all(placed) {
        return None;
    }
    let n = live.len();
    let total = usize::from(SLOT_COUNT);
    let quota = |i: usize| total / n + usize::from(i < total % n);
    let mut counts = vec![0; n];
    for owner in owners.iter().flatten() {
        counts[*owner] += 1;
    }
    for slot in (0..total).rev() {
        if let Some(owner) = owners[slot]
            && counts[owner] > quota(owner)
        {
            counts[owner] -= 1;
            owners[slot] = None;
        }
    }
    let mut taker = 0;
    for owner in owners.iter_mut().filter(|o| o.is_none()) {
        while counts[taker] >= quota(taker) {
            taker += 1;
        }
        counts[taker] += 1;
        *owner = Some(taker);
    }
    let owners: Vec<Option<Node>> = owners.into_iter().map(|o| o.map(|i| live[i].clone())).collect();
    let mut next = Topology::from_owners(&owners, current.epoch + 1, current.revision);
    next.placed = live.iter().map(|n| n.id.clone()).collect();
    (next.ranges != current.ranges || next.placed != current.placed).then_some(next)
}

/// The table nodes that keep their data should have: an empty table is shared among the
/// live nodes (as [`rebalance`]) once there are `initial` of them; otherwise every slot stays
/// with its owner, whose address follows its registration. `None` when `current` is that
/// table already.
pub fn settle(current: &Topology, live: &[Node], initial: usize) -> Option<Topology> {
    if current.assigned() == 0 {
        return if live.len() >= initial.max(1) { rebalance(current, live) } else { None };
    }
    let mut next = current.clone();
    for range in &mut next.ranges {
        if let Some(node) = live.iter().find(|n| n.id == range.2.id) {
            range.2 = node.clone();
        }
    }
    next.epoch += 1;
    (next.ranges != current.ranges).then_some(next)
}

/// The table a replica of the node at `primary` (its plaintext or TLS port) writes when
/// that node owns slots but is no longer registered (its lease ran out): its slots are
/// `myself`'s; with the gone node's id. `None` otherwise.
pub fn take_over(
    current: &Topology,
    primary: &(String, u16),
    myself: &Node,
    registered: &BTreeMap<String, (Vec<u8>, i64)>,
) -> Option<(Topology, String)> {
    let owners = current.owners();
    let gone =
        owners.iter().flatten().find(|n| n.host == primary.0 && [n.port, n.tls_port].contains(&primary.1))?;
    if gone.id == myself.id || registered.contains_key(&gone.id) {
        return None;
    }
    let gone = gone.id.clone();
    let owners: Vec<Option<Node>> =
        owners.into_iter().map(|o| o.map(|n| if n.id == gone { myself.clone() } else { n })).collect();
    Some((Topology::from_owners(&owners, current.epoch + 1, current.revision), gone))
}

/// Registers this node and follows the cluster's records on a thread of its own, for as long
/// as the process lives; `ttl` is the lease's (`cluster-node-timeout`). Another thread
/// renews the lease, so that a slow look at the records (a take-over, a promotion) never
/// delays a renewal.
pub fn spawn(cluster: Arc<Cluster>, etcd: Arc<Backend>, ttl: Duration) {
    let lease = Arc::new(Lease {
        ttl,
        closed: cluster.moves.get().map(|m| m.guard().clone()),
        state: Mutex::new(LeaseState::default()),
    });
    let (keeper, keeper_etcd) = (lease.clone(), etcd.clone());
    let _ = std::thread::Builder::new().name("cluster-lease".into()).spawn(move || keeper.keep(&keeper_etcd));
    let _ = std::thread::Builder::new().name("cluster".into()).spawn(move || {
        // `host port [tls-port]`: a node without a TLS port writes what every version reads.
        let value = cluster.myself.address();
        let renew = ttl / 3;
        loop {
            lease.lost();
            let sent = Instant::now();
            let id = match etcd.cluster_register(&cluster.myself.id, value.as_bytes(), ttl) {
                Ok(id) => id,
                Err(e) => {
                    crate::log::warning!("Cannot register in the cluster ({e}): trying again in 1 s");
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
            };
            let changes = etcd.cluster_changes().ok();
            lease.registered(id);
            // Registered again: its commits wait until the table it routes by is read.
            let mut lease_sent = Some(sent);
            loop {
                match follow(&cluster, &etcd) {
                    Ok(()) => {
                        if let Some(sent) = lease_sent.take() {
                            lease.granted(id, sent, cluster.topology().revision);
                        }
                    }
                    Err(e) => crate::log::warning!("Cannot read the cluster's records: {e}"),
                }
                // The records again at each change and every `renew` anyway; the end of the
                // lease (or of the watch) is seen within a tenth of a second, and the node
                // registers again.
                let next_look = Instant::now() + renew;
                let register_again = loop {
                    if !lease.holds_lease(id) {
                        break true;
                    }
                    let wait =
                        next_look.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
                    if wait.is_zero() {
                        break false;
                    }
                    match &changes {
                        Some(changes) => match changes.recv_timeout(wait) {
                            Ok(()) => break false,
                            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break true,
                            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        },
                        None => std::thread::sleep(wait),
                    }
                };
                if register_again {
                    break;
                }
            }
        }
    });
}

/// The node's etcd lease, renewed by a thread of its own: what a node keeping its slots'
/// data may commit depends on it ([`crate::store::ClosedSlot`]).
struct Lease {
    ttl: Duration,
    /// A node keeping its slots' data: what refuses its commits.
    closed: Option<Arc<crate::store::ClosedSlot>>,
    state: Mutex<LeaseState>,
}

#[derive(Default)]
struct LeaseState {
    /// The lease the node is registered under (`None`: registering).
    id: Option<i64>,
    /// The table has been read under it: its renewals extend the node's commits.
    granted: bool,
}

impl Lease {
    /// A node keeping its slots' data commits to them only while its lease surely holds (no
    /// other node can have taken them): until a renewal sent at `sent`, to `sent` + the
    /// lease's whole seconds less a tenth for the clocks' drift.
    fn until(&self, sent: Instant) -> Instant {
        sent + Duration::from_secs(self.ttl.as_secs().max(1)) * 9 / 10
    }

    /// The lease may have run out: no commit until the node registered again and read the
    /// table.
    fn lost(&self) {
        self.forget(&mut crate::sync::lock(&self.state));
    }

    /// [`Lease::lost`], with the state's lock held.
    fn forget(&self, state: &mut LeaseState) {
        *state = LeaseState::default();
        if let Some(closed) = &self.closed {
            closed.lease_holds_until(None);
        }
    }

    /// Registered under lease `id`.
    fn registered(&self, id: i64) {
        *crate::sync::lock(&self.state) = LeaseState { id: Some(id), granted: false };
    }

    /// The table at `revision` was read under lease `id`, granted by a request sent at
    /// `sent`: commands routed by it (or a newer one) commit until the lease may run out.
    /// A command routed by the table of the lease that ran out (its slots may have gone
    /// meanwhile) commits nothing.
    fn granted(&self, id: i64, sent: Instant, revision: i64) {
        let mut state = crate::sync::lock(&self.state);
        if state.id != Some(id) {
            return;
        }
        state.granted = true;
        if let Some(closed) = &self.closed {
            closed.lease_granted(revision, self.until(sent));
        }
    }

    /// Whether the node is still registered under lease `id`.
    fn holds_lease(&self, id: i64) -> bool {
        crate::sync::lock(&self.state).id == Some(id)
    }

    /// Renews the lease every third of its time, for as long as the process lives; a lease
    /// that ran out (or cannot be renewed) is [`Lease::lost`], and the node registers again
    /// (harmless while the old one lives).
    fn keep(&self, etcd: &Backend) {
        let renew = self.ttl / 3;
        let mut renewed = Instant::now();
        loop {
            std::thread::sleep(renew.saturating_sub(renewed.elapsed()).max(Duration::from_millis(10)));
            let Some(id) = crate::sync::lock(&self.state).id else {
                // Registering: the registration grants the lease its whole time.
                renewed = Instant::now();
                continue;
            };
            let sent = Instant::now();
            let kept = etcd.cluster_keep_alive(id);
            let mut state = crate::sync::lock(&self.state);
            if state.id != Some(id) {
                continue;
            }
            match kept {
                Ok(true) => {
                    renewed = sent;
                    if let (true, Some(closed)) = (state.granted, &self.closed) {
                        closed.lease_holds_until(Some(self.until(sent)));
                    }
                }
                Ok(false) => self.forget(&mut state),
                Err(e) => {
                    crate::log::warning!("Cannot renew the cluster lease ({e}): registering again");
                    self.forget(&mut state);
                }
            }
        }
    }
}

/// Reads the records, applies the rebalance they call for, and takes the table.
pub fn follow(cluster: &Cluster, etcd: &Backend) -> rediskv::Result<()> {
    loop {
        let records = etcd.cluster_records()?;
        let current = records
            .table
            .as_deref()
            .map_or_else(Topology::default, |t| Topology::decode(t, records.table_revision));
        // Of registrations sharing an address, the latest: a node restarted on its address
        // replaces its old self at once, not when the old lease runs out.
        let mut by_address: BTreeMap<String, (i64, Node)> = BTreeMap::new();
        for (id, (value, registered)) in &records.nodes {
            let Some(node) = Node::at(id, &String::from_utf8_lossy(value)) else { continue };
            let entry = by_address.entry(node.address()).or_insert((*registered, node.clone()));
            if *registered > entry.0 {
                *entry = (*registered, node);
            }
        }
        let mut live: Vec<Node> = by_address.into_values().map(|(_, node)| node).collect();
        live.sort_by(|a, b| a.id.cmp(&b.id));
        cluster.set_members(live.clone());
        let next = match cluster.moves.get() {
            Some(moves) => settle(&current, &live, moves.initial_nodes),
            None => rebalance(&current, &live),
        };
        if next.is_none()
            && let Some(moves) = cluster.moves.get()
            && let Some(primary) = moves.successor_of()
            && let Some((next, gone)) = take_over(&current, &primary, &cluster.myself, &records.nodes)
        {
            // The primary's lease ran out: its replica takes its slots, while it stays gone.
            if etcd.cluster_take_over(records.table_revision, &next.encode(), &gone)? {
                crate::log::warning!("Primary {gone} is gone: this replica takes its slots");
                moves.promote();
            }
            continue;
        }
        match next {
            Some(next) => {
                // Lost to another node's change: read that one.
                etcd.cluster_swap_table(records.table_revision, &next.encode())?;
            }
            None => {
                cluster.raise_fences(current.revision);
                cluster.set_topology(current);
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str) -> Node {
        Node { id: id.into(), host: "127.0.0.1".into(), port: 7000, tls_port: 0 }
    }

    #[test]
    fn a_rebalance_shares_fairly_and_moves_only_what_it_must() {
        let (a, b, c) = (node("a"), node("b"), node("c"));
        let one = rebalance(&Topology::default(), std::slice::from_ref(&a)).unwrap();
        assert_eq!(one.ranges, vec![(0, 16383, a.clone())]);
        let two = rebalance(&one, &[a.clone(), b.clone()]).unwrap();
        assert_eq!(two.ranges, vec![(0, 8191, a.clone()), (8192, 16383, b.clone())]);
        let three = rebalance(&two, &[a.clone(), b.clone(), c.clone()]).unwrap();
        let share = |t: &Topology, n: &Node| {
            t.ranges.iter().filter(|r| r.2 == *n).map(|r| usize::from(r.1 - r.0) + 1).sum::<usize>()
        };
        assert_eq!((share(&three, &a), share(&three, &b), share(&three, &c)), (5462, 5461, 5461));
        // a keeps its lowest slots: only what it gives up moves.
        assert_eq!(three.owner(0), Some(&a));
        assert_eq!(rebalance(&three, &[a.clone(), b.clone(), c.clone()]), None);
        // b is gone: its slots go to a and c, nobody else's move.
        let after = rebalance(&three, &[a.clone(), c.clone()]).unwrap();
        assert_eq!((share(&after, &a), share(&after, &c)), (8192, 8192));
        assert!((0..SLOT_COUNT).all(|s| three.owner(s) != Some(&c) || after.owner(s) == Some(&c)));
        assert_eq!(after.epoch, three.epoch + 1);
        // Slots moved by hand stay, down to none on a node; a node joining gets its share.
        let by_hand = (0..100).fold(three.clone(), |t, slot| t.with_owner(slot, &c));
        assert_eq!(rebalance(&by_hand, &[a.clone(), b.clone(), c.clone()]), None);
        let all_a = vec![Some(a.clone()); usize::from(SLOT_COUNT)];
        let emptied = Topology { placed: by_hand.placed.clone(), ..Topology::from_owners(&all_a, 9, 0) };
        assert_eq!(rebalance(&emptied, &[a.clone(), b.clone(), c.clone()]), None);
        let d = node("d");
        let four = rebalance(&emptied, &[a.clone(), b.clone(), c.clone(), d.clone()]).unwrap();
        assert_eq!(share(&four, &d), 4096);
    }

    #[test]
    fn nodes_keeping_their_data_share_an_empty_table_once_and_then_keep_their_slots() {
        let (a, b, c) = (node("a"), node("b"), node("c"));
        let empty = Topology::default();
        assert_eq!(settle(&empty, std::slice::from_ref(&a), 2), None, "one node of two: wait");
        let two = settle(&empty, &[a.clone(), b.clone()], 2).unwrap();
        assert_eq!(two.ranges, vec![(0, 8191, a.clone()), (8192, 16383, b.clone())]);
        // A third node and a node gone move nothing.
        assert_eq!(settle(&two, &[a.clone(), b.clone(), c.clone()], 2), None);
        assert_eq!(settle(&two, std::slice::from_ref(&a), 2), None);
        // A node back on another port: its ranges follow.
        let moved = Node { port: 7001, ..b.clone() };
        let next = settle(&two, &[a.clone(), moved.clone()], 2).unwrap();
        assert_eq!(next.owner(9000), Some(&moved));
        assert_eq!(next.epoch, two.epoch + 1);
    }
}
