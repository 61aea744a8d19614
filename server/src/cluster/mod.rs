//! Redis Cluster's client protocol (`cluster-enabled yes`): which node serves each of the
//! 16384 slots, the redirections a command gets when its keys are not this node's
//! (`-MOVED`, `-CROSSSLOT`, `-CLUSTERDOWN`, as Redis 7.0's `getNodeByQuery`), and the CLUSTER
//! subcommands that show the topology to clients.
//!
//! The topology is a [`Topology`]: the slot table (ranges → node) and its revision. Over etcd
//! (`membership`) the nodes keep it in etcd and share the slots among the live ones. Nodes
//! over fjall or RocksDB with `--cluster-etcd` keep the table in etcd and their slots' data
//! at home: a slot changes owner by moving its data (`moves`, `crate::slot_move`). On any other engine the one
//! node owns every slot. `setslot` maps redis-cli's CLUSTER SETSLOT onto those moves, and
//! `relay` carries PUBLISH to the other nodes.
//!
//! A node has a plaintext and a TLS port ([`Node`]); with `tls-cluster yes` a client
//! connected over TLS is told the nodes' TLS ports and the others their plaintext ports, as
//! Redis 7.0.

#[cfg(feature = "etcd")]
pub mod membership;
#[cfg(feature = "etcd")]
pub mod moves;
#[cfg(feature = "etcd")]
pub mod relay;
#[cfg(feature = "etcd")]
pub mod setslot;

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::table::{self, CommandInfo};
use rediskv::{SLOT_COUNT, key_slot};

/// A node of the cluster, as clients reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// 40 hex digits.
    pub id: String,
    /// The address clients connect to.
    pub host: String,
    /// Its plaintext client port (0: none).
    pub port: u16,
    /// Its TLS client port (0: none).
    pub tls_port: u16,
}

/// Which node serves each slot, at one revision of the table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// Slot ranges `start..=end` and their node, in slot order.
    pub ranges: Vec<(u16, u16, Node)>,
    /// Bumped by every change of the table.
    pub epoch: u64,
    /// The etcd `mod_revision` of the table this was read from (0: not from etcd); commits
    /// are fenced by it.
    pub revision: i64,
    /// Over etcd, the ids of the nodes the last rebalance shared the slots among: a live node
    /// not among them (nor owning slots) is joining and gets its share, while a node whose
    /// slots were moved away by hand keeps none.
    pub placed: Vec<String>,
}

impl Topology {
    /// The node serving `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&Node> {
        let at = self.ranges.partition_point(|r| r.1 < slot);
        self.ranges.get(at).filter(|r| r.0 <= slot).map(|r| &r.2)
    }

    /// The table from each slot's owner (`None`: unassigned), runs of one owner merged.
    pub fn from_owners(owners: &[Option<Node>], epoch: u64, revision: i64) -> Topology {
        let mut ranges: Vec<(u16, u16, Node)> = Vec::new();
        for (slot, owner) in owners.iter().enumerate() {
            let Some(node) = owner else { continue };
            let slot = slot as u16;
            match ranges.last_mut() {
                Some(last) if last.1 + 1 == slot && last.2 == *node => last.1 = slot,
                _ => ranges.push((slot, slot, node.clone())),
            }
        }
        Topology { ranges, epoch, revision, placed: Vec::new() }
    }

    /// Each slot's owner.
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub fn owners(&self) -> Vec<Option<Node>> {
        let mut owners = vec![None; usize::from(SLOT_COUNT)];
        for (start, end, node) in &self.ranges {
            for owner in &mut owners[usize::from(*start)..=usize::from(*end)] {
                *owner = Some(node.clone());
            }
        }
        owners
    }

    /// The next table: this one with `slot` served by `node`.
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub fn with_owner(&self, slot: u16, node: &Node) -> Topology {
        let mut owners = self.owners();
        owners[usize::from(slot)] = Some(node.clone());
        Topology {
            placed: self.placed.clone(),
            ..Topology::from_owners(&owners, self.epoch + 1, self.revision)
        }
    }

    /// Slots with an owner.
    pub fn assigned(&self) -> usize {
        self.ranges.iter().map(|r| usize::from(r.1 - r.0) + 1).sum()
    }

    /// The nodes owning slots, in id order, each once.
    pub fn nodes(&self) -> Vec<&Node> {
        let mut nodes: Vec<&Node> = self.ranges.iter().map(|r| &r.2).collect();
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        nodes.dedup_by(|a, b| a.id == b.id);
        nodes
    }

    /// The text kept in etcd: `epoch N`, `placed id…` when any, then a `start end id host
    /// port [tls-port]` line per range (the TLS port only when the node has one: a line
    /// without reads as before).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = format!("epoch {}\n", self.epoch);
        if !self.placed.is_empty() {
            out.push_str(&format!("placed {}\n", self.placed.join(" ")));
        }
        for (start, end, node) in &self.ranges {
            out.push_str(&format!("{start} {end} {} {}\n", node.id, node.address()));
        }
        out.into_bytes()
    }

    /// Reads [`Topology::encode`]'s text; lines it cannot read are left out.
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub fn decode(text: &[u8], revision: i64) -> Topology {
        let text = String::from_utf8_lossy(text);
        let mut lines = text.lines();
        let epoch =
            lines.next().and_then(|l| l.strip_prefix("epoch ")).and_then(|e| e.parse().ok()).unwrap_or(0);
        let mut placed = Vec::new();
        let mut ranges: Vec<(u16, u16, Node)> = lines
            .filter_map(|line| {
                if let Some(ids) = line.strip_prefix("placed ") {
                    placed = ids.split(' ').map(str::to_string).collect();
                    return None;
                }
                let mut f = line.splitn(4, ' ');
                let (start, end, id) = (f.next()?, f.next()?, f.next()?);
                let (start, end): (u16, u16) = (start.parse().ok()?, end.parse().ok()?);
                (start <= end && end < SLOT_COUNT).then_some(())?;
                Some((start, end, Node::at(id, f.next()?)?))
            })
            .collect();
        ranges.sort_by_key(|r| r.0);
        ranges.dedup_by(|later, earlier| later.0 <= earlier.1);
        Topology { ranges, epoch, revision, placed }
    }
}

impl Node {
    /// `host port`, then ` tls-port` when it has one: how its registration and the slot
    /// table write it.
    pub fn address(&self) -> String {
        match self.tls_port {
            0 => format!("{} {}", self.host, self.port),
            tls_port => format!("{} {} {tls_port}", self.host, self.port),
        }
    }

    /// Node `id` at an [`Node::address`] (`None`: not one).
    pub fn at(id: &str, address: &str) -> Option<Node> {
        let f: Vec<&str> = address.split(' ').collect();
        let (host, port, tls_port) = match f[..] {
            [host, port] => (host, port, "0"),
            [host, port, tls_port] => (host, port, tls_port),
            _ => return None,
        };
        let (port, tls_port) = (port.parse().ok()?, tls_port.parse().ok()?);
        Some(Node { id: id.into(), host: host.into(), port, tls_port })
    }
}

/// This node's view of the cluster.
pub struct Cluster {
    /// This node.
    pub myself: Node,
    topology: RwLock<Arc<Topology>>,
    /// The registered nodes, slots or not.
    members: RwLock<Vec<Node>>,
    /// Where the table is kept.
    #[cfg(feature = "etcd")]
    pub etcd: std::sync::OnceLock<Arc<rediskv_etcd::Backend>>,
    /// A node that keeps its slots' data: the slot moves it takes part in.
    #[cfg(feature = "etcd")]
    pub moves: std::sync::OnceLock<Arc<moves::Moves>>,
    /// Over the etcd engine: the clusters holding the data, whose fences follow the table.
    #[cfg(feature = "etcd")]
    pub fences: std::sync::OnceLock<Vec<Arc<rediskv_etcd::Backend>>>,
    /// The table revision the fences were raised to.
    #[cfg(feature = "etcd")]
    fenced_to: std::sync::atomic::AtomicI64,
    /// PUBLISH's links to the other nodes.
    #[cfg(feature = "etcd")]
    pub relay: relay::Relay,
    /// Slots marked by CLUSTER SETSLOT MIGRATING or IMPORTING.
    #[cfg(feature = "etcd")]
    pub marks: std::sync::Mutex<std::collections::BTreeMap<u16, setslot::Mark>>,
    /// Called after the table changes (the server retries its parked clients).
    on_change: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// `tls-cluster yes`: clients connected over TLS are told the nodes' TLS ports.
    tls_cluster: AtomicBool,
}

/// Where a command goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Served here: the slot of its keys (`None`: it has none) and the table revision it was
    /// routed by.
    Here(Option<u16>, i64),
    /// Refused with this redirection or error.
    Elsewhere(Reply),
    /// A write to a slot this node is handing over: it waits until the slot has moved.
    Wait,
}

/// The answer to a write that reached a slot while it was being handed over, as Kvrocks.
pub const TRYAGAIN: &str = "TRYAGAIN Can't write to slot being migrated which is in write forbidden phase";

impl Cluster {
    /// A node with an empty slot table.
    pub fn new(myself: Node) -> Self {
        Cluster {
            myself,
            topology: RwLock::default(),
            members: RwLock::default(),
            #[cfg(feature = "etcd")]
            etcd: std::sync::OnceLock::new(),
            #[cfg(feature = "etcd")]
            moves: std::sync::OnceLock::new(),
            #[cfg(feature = "etcd")]
            fences: std::sync::OnceLock::new(),
            #[cfg(feature = "etcd")]
            fenced_to: std::sync::atomic::AtomicI64::new(0),
            #[cfg(feature = "etcd")]
            relay: relay::Relay::default(),
            #[cfg(feature = "etcd")]
            marks: std::sync::Mutex::default(),
            on_change: std::sync::OnceLock::new(),
            tls_cluster: AtomicBool::new(false),
        }
    }

    /// Follows `tls-cluster`.
    pub fn set_tls_cluster(&self, yes: bool) {
        self.tls_cluster.store(yes, Relaxed);
    }

    /// The port of `node` a client is told, as Redis 7.0: with `tls-cluster yes`, its TLS
    /// port to a client connected over TLS (`tls`) and its plaintext port to the others (a
    /// node with one port only: that one); its plaintext port otherwise.
    fn client_port(&self, node: &Node, tls: bool) -> u16 {
        let tls_cluster = self.tls_cluster.load(Relaxed);
        match (tls_cluster && tls, node.port, node.tls_port) {
            (true, _, tls_port) if tls_port != 0 => tls_port,
            (_, 0, tls_port) if tls_cluster => tls_port,
            (_, port, _) => port,
        }
    }

    /// `-MOVED <slot> <host>:<port>` (the port for a client over TLS or not), or
    /// `-CLUSTERDOWN` for a slot nobody serves.
    fn redirection(&self, slot: u16, owner: Option<&Node>, tls: bool) -> Reply {
        match owner {
            Some(node) => Reply::Error(format!("MOVED {slot} {}:{}", node.host, self.client_port(node, tls))),
            None => Reply::Error("CLUSTERDOWN Hash slot not served".into()),
        }
    }

    /// The table now.
    pub fn topology(&self) -> Arc<Topology> {
        self.topology.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the table.
    pub fn set_topology(&self, topology: Topology) {
        let changed = {
            let mut current = self.topology.write().unwrap_or_else(|e| e.into_inner());
            let changed = current.ranges != topology.ranges;
            *current = Arc::new(topology);
            changed
        };
        if let (true, Some(on_change)) = (changed, self.on_change.get()) {
            on_change();
        }
    }

    /// The registered nodes now.
    pub fn members(&self) -> Vec<Node> {
        self.members.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the registered nodes.
    #[cfg(feature = "etcd")]
    pub fn set_members(&self, members: Vec<Node>) {
        *self.members.write().unwrap_or_else(|e| e.into_inner()) = members;
    }

    /// Whether this node keeps its slots' data (a slot moves with its data).
    pub fn keeps_data(&self) -> bool {
        #[cfg(feature = "etcd")]
        return self.moves.get().is_some();
        #[cfg(not(feature = "etcd"))]
        false
    }

    /// Relays a PUBLISH to every other registered node; false when there are none to know
    /// of (a node outside an etcd cluster).
    pub fn relay_publish(&self, channel: &[u8], message: &[u8]) -> bool {
        #[cfg(feature = "etcd")]
        if self.etcd.get().is_some() {
            let others: Vec<Node> = self.members().into_iter().filter(|n| n.id != self.myself.id).collect();
            self.relay.publish(&others, channel, message);
            return true;
        }
        let _ = (channel, message);
        false
    }

    /// Whether `host:port` is this node or another registered node of its cluster.
    pub fn serves_at(&self, host: &str, port: u16) -> bool {
        let at = |n: &Node| n.host == host && (n.port == port || (n.tls_port != 0 && n.tls_port == port));
        at(&self.myself) || self.members().iter().any(at)
    }

    /// Whether this node shares its store with the other nodes (the etcd engine): each
    /// node's keyspace is the keys of the slots it serves, as a Redis Cluster node's.
    pub fn shares_store(&self) -> bool {
        #[cfg(feature = "etcd")]
        return self.etcd.get().is_some() && !self.keeps_data();
        #[cfg(not(feature = "etcd"))]
        false
    }

    /// Whether `slot`'s keys are in this node's keyspace: over a shared store, the slots it
    /// serves and is not migrating away (that move moves no data); elsewhere every slot.
    pub fn holds(&self, topology: &Topology, slot: u16) -> bool {
        if !self.shares_store() {
            return true;
        }
        #[cfg(feature = "etcd")]
        if matches!(crate::sync::lock(&self.marks).get(&slot), Some(setslot::Mark::Migrating(_))) {
            return false;
        }
        topology.owner(slot).is_some_and(|n| n.id == self.myself.id)
    }

    /// Whether this node serves `slot`'s shard channels: it owns the slot or replicates its
    /// owner (Redis' replicas keep a slot's channels too).
    pub fn serves(&self, topology: &Topology, slot: u16) -> bool {
        topology.owner(slot).is_some_and(|n| n.id == self.myself.id || self.replicates(n))
    }

    /// The slot this node is closing to writes to hand it over, if any.
    fn closed(&self) -> Option<u16> {
        #[cfg(feature = "etcd")]
        return self.moves.get().and_then(|m| m.closed());
        #[cfg(not(feature = "etcd"))]
        None
    }

    /// Whether this node is a replica of `node`.
    fn replicates(&self, node: &Node) -> bool {
        #[cfg(feature = "etcd")]
        return self
            .moves
            .get()
            .and_then(|m| m.primary())
            .is_some_and(|(host, port)| host == node.host && port == node.port);
        #[cfg(not(feature = "etcd"))]
        {
            let _ = node;
            false
        }
    }

    /// The slot this node is receiving, if any.
    fn importing(&self) -> Option<u16> {
        #[cfg(feature = "etcd")]
        return self.moves.get().and_then(|m| m.importing());
        #[cfg(not(feature = "etcd"))]
        None
    }

    /// Sets what runs after each change of the table.
    pub fn on_change(&self, run: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_change.set(run);
    }

    /// Where the commands (one, or a transaction's queue at EXEC) of a client connected over
    /// TLS or not (`tls`: the ports it is redirected to) go, as Redis' `getNodeByQuery`:
    /// every key in one slot, that slot served, and served here.
    pub fn route<'a>(
        &self,
        commands: impl Iterator<Item = (&'static CommandInfo, &'a [Bytes])>,
        tls: bool,
    ) -> Route {
        self.route_client(commands, false, false, tls)
    }

    /// [`Cluster::route`] for a client that sent ASKING (`asking`: a slot this node is
    /// receiving is served, as Redis) and whose commands may write (`writes`: they wait while
    /// their slot is being handed over).
    pub fn route_client<'a>(
        &self,
        commands: impl Iterator<Item = (&'static CommandInfo, &'a [Bytes])>,
        asking: bool,
        writes: bool,
        tls: bool,
    ) -> Route {
        let topology = self.topology();
        let mut first: Option<u16> = None;
        // SSUBSCRIBE and SUNSUBSCRIBE are served by the slot's replicas too, as Redis.
        let mut shard_subscriptions = true;
        for (info, argv) in commands {
            shard_subscriptions &= matches!(info.name, "ssubscribe" | "sunsubscribe");
            let Ok(positions) = table::key_positions(info, argv) else { continue };
            for at in positions {
                let slot = key_slot(&argv[at]);
                match first {
                    None => {
                        if topology.owner(slot).is_none() {
                            return Route::Elsewhere(Reply::Error("CLUSTERDOWN Hash slot not served".into()));
                        }
                        first = Some(slot);
                    }
                    Some(first_slot) if first_slot != slot => {
                        return Route::Elsewhere(Reply::Error(
                            "CROSSSLOT Keys in request don't hash to the same slot".into(),
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        let Some(slot) = first else { return Route::Here(None, topology.revision) };
        if topology.assigned() < usize::from(SLOT_COUNT) {
            return Route::Elsewhere(Reply::Error("CLUSTERDOWN The cluster is down".into()));
        }
        match topology.owner(slot) {
            Some(node) if node.id == self.myself.id => {
                if writes && self.closed() == Some(slot) {
                    return Route::Wait;
                }
                Route::Here(Some(slot), topology.revision)
            }
            _ if asking && self.importing() == Some(slot) => Route::Here(Some(slot), topology.revision),
            Some(owner) if shard_subscriptions && self.replicates(owner) => {
                Route::Here(Some(slot), topology.revision)
            }
            owner => Route::Elsewhere(self.redirection(slot, owner, tls)),
        }
    }

    /// Runs `argv` through `run` if its keys are this node's, fenced by the table it was
    /// routed by (a fenced commit answers the redirection by the table now); otherwise
    /// answers the redirection (a parked client whose slot moved gets `-MOVED`, as Redis),
    /// to the ports of a client over TLS or not (`tls`).
    pub fn run_routed(
        &self,
        store: &crate::store::Store,
        argv: &[Bytes],
        tls: bool,
        run: &mut dyn FnMut() -> Reply,
    ) -> Reply {
        match self.route(resolve(argv).into_iter(), tls) {
            Route::Elsewhere(refusal) => refusal,
            Route::Wait => Reply::Error(TRYAGAIN.into()),
            Route::Here(slot, revision) => {
                self.fence(store, slot, revision);
                let reply = run();
                match slot {
                    Some(slot) if fenced(&reply) => self.after_fence(store, slot, tls),
                    _ => reply,
                }
            }
        }
    }

    /// Whether a script may run `argv` here, as Redis' `scriptVerifyClusterState`: its keys
    /// in one slot this node serves.
    pub fn script_command(&self, argv: &[Bytes]) -> Result<(), String> {
        match self.route(resolve(argv).into_iter(), false) {
            Route::Here(..) => Ok(()),
            Route::Wait => Err(TRYAGAIN.into()),
            Route::Elsewhere(Reply::Error(e)) if e == "CLUSTERDOWN The cluster is down" => {
                Err("Script attempted to execute a command while the cluster is down".into())
            }
            Route::Elsewhere(_) => Err("Script attempted to access a non local key in a cluster node".into()),
        }
    }

    /// The redirection for `slot` by the table now (after a fenced commit: the table moved),
    /// to the port of a client over TLS or not (`tls`).
    pub fn moved(&self, slot: u16, tls: bool) -> Reply {
        self.redirection(slot, self.topology().owner(slot), tls)
    }

    /// `cluster_state`: ok when every slot is served.
    fn state(&self) -> &'static str {
        if self.topology().assigned() == usize::from(SLOT_COUNT) { "ok" } else { "fail" }
    }

    /// CLUSTER and its subcommands, for a client over TLS or not (`tls`: the ports it is
    /// told); `keys_in_slot` answers a slot's keys (at most `count`).
    pub fn command(
        &self,
        argv: &[Bytes],
        tls: bool,
        keys_in_slot: &dyn Fn(u16, usize) -> Vec<Bytes>,
    ) -> Reply {
        let sub = String::from_utf8_lossy(argv.get(1).map_or(&[][..], |a| a)).to_ascii_lowercase();
        let args = &argv[2.min(argv.len())..];
        let wrong = || Reply::Error(format!("ERR wrong number of arguments for 'cluster|{sub}' command"));
        let topology = self.topology();
        match (sub.as_str(), args) {
            ("keyslot", [key]) => Reply::Integer(i64::from(key_slot(key))),
            ("countkeysinslot", [slot]) => match parse_slot(slot) {
                Ok(slot) => Reply::Integer(keys_in_slot(slot, usize::MAX).len() as i64),
                Err(e) => e,
            },
            ("getkeysinslot", [slot, count]) => {
                let count = rediskv::server::args::parse_i64(count);
                match (count, rediskv::server::args::parse_i64(slot)) {
                    (None, _) | (_, None) => {
                        Reply::Error("ERR value is not an integer or out of range".into())
                    }
                    (Some(count), Some(slot)) if count < 0 || !(0..i64::from(SLOT_COUNT)).contains(&slot) => {
                        Reply::Error("ERR Invalid slot or number of keys".into())
                    }
                    (Some(count), Some(slot)) => Reply::Array(
                        keys_in_slot(slot as u16, count as usize).into_iter().map(Reply::Bulk).collect(),
                    ),
                }
            }
            ("myid", []) => Reply::bulk(self.myself.id.as_bytes()),
            ("info", []) => Reply::Verbatim { format: *b"txt", text: Bytes::from(self.info_text(&topology)) },
            ("nodes", []) => {
                Reply::Verbatim { format: *b"txt", text: Bytes::from(self.nodes_text(&topology, tls)) }
            }
            ("slots", []) => Reply::Array(
                topology
                    .ranges
                    .iter()
                    .map(|(start, end, node)| {
                        Reply::Array(vec![
                            Reply::Integer(i64::from(*start)),
                            Reply::Integer(i64::from(*end)),
                            Reply::Array(vec![
                                Reply::bulk(node.host.as_bytes()),
                                Reply::Integer(i64::from(self.client_port(node, tls))),
                                Reply::bulk(node.id.as_bytes()),
                                Reply::Array(Vec::new()),
                            ]),
                        ])
                    })
                    .collect(),
            ),
            ("shards", []) => {
                let tls_cluster = self.tls_cluster.load(Relaxed);
                Reply::Array(topology.nodes().into_iter().map(|n| shard(&topology, n, tls_cluster)).collect())
            }
            ("replicas" | "slaves", [id]) | ("count-failure-reports", [id]) => {
                let id = String::from_utf8_lossy(id);
                if !self.known(&topology).iter().any(|n| n.id == id) {
                    return Reply::Error(format!("ERR Unknown node {id}"));
                }
                if sub == "count-failure-reports" { Reply::Integer(0) } else { Reply::Array(Vec::new()) }
            }
            // Nodes talk through etcd, not a cluster bus: no links.
            ("links", []) => Reply::Array(Vec::new()),
            ("meet", _) => Reply::Error(
                "ERR nodes join this cluster through etcd: a node started with the cluster's etcd endpoints \
                 and prefix registers by itself"
                    .into(),
            ),
            ("forget" | "reset", _) => Reply::Error(
                "ERR nodes leave this cluster through etcd: move the node's slots away, then stop it (its \
                 registration ends with its lease)"
                    .into(),
            ),
            (
                "addslots" | "addslotsrange" | "delslots" | "delslotsrange" | "flushslots" | "replicate"
                | "failover" | "set-config-epoch" | "bumpepoch" | "saveconfig",
                _,
            ) => Reply::Error(format!(
                "ERR CLUSTER {} is not served: the slot table is kept in etcd (CLUSTER SETSLOT moves a slot)",
                sub.to_ascii_uppercase()
            )),
            (
                "keyslot"
                | "countkeysinslot"
                | "getkeysinslot"
                | "myid"
                | "info"
                | "nodes"
                | "slots"
                | "shards"
                | "replicas"
                | "slaves"
                | "count-failure-reports"
                | "links",
                _,
            ) => wrong(),
            _ => Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try CLUSTER HELP.",
                String::from_utf8_lossy(argv.get(1).map_or(&[][..], |a| a))
            )),
        }
    }

    fn info_text(&self, topology: &Topology) -> String {
        let assigned = topology.assigned();
        let known = self.known(topology).len();
        let fields = [
            ("cluster_state", self.state().to_string()),
            ("cluster_slots_assigned", assigned.to_string()),
            ("cluster_slots_ok", assigned.to_string()),
            ("cluster_slots_pfail", "0".into()),
            ("cluster_slots_fail", "0".into()),
            ("cluster_known_nodes", known.to_string()),
            ("cluster_size", topology.nodes().len().to_string()),
            ("cluster_current_epoch", topology.epoch.to_string()),
            ("cluster_my_epoch", topology.epoch.to_string()),
            ("cluster_stats_messages_sent", "0".into()),
            ("cluster_stats_messages_received", "0".into()),
            ("total_cluster_links_buffer_limit_exceeded", "0".into()),
        ];
        let text: String = fields.iter().map(|(k, v)| format!("{k}:{v}\r\n")).collect();
        #[cfg(feature = "etcd")]
        if let Some(moves) = self.moves.get() {
            return text + &moves.info();
        }
        text
    }

    /// Every node: those owning slots, the registered ones, this one; in id order.
    fn known<'t>(&'t self, topology: &'t Topology) -> Vec<Node> {
        let mut nodes: Vec<Node> = topology.nodes().into_iter().cloned().collect();
        nodes.extend(self.members());
        nodes.push(self.myself.clone());
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        nodes.dedup_by(|a, b| a.id == b.id);
        nodes
    }

    fn nodes_text(&self, topology: &Topology, tls: bool) -> String {
        let now = crate::clock::unix_micros() / 1000;
        let mut out = String::new();
        for node in &self.known(topology) {
            let me = node.id == self.myself.id;
            let flags = if me { "myself,master" } else { "master" };
            // Redis' bus port is its announced port's (the TLS one under tls-cluster) + 10000,
            // whichever port the client is told.
            let bus = u32::from(self.client_port(node, true)) + 10000;
            out.push_str(&format!(
                "{} {}:{}@{bus} {flags} - 0 {now} {} connected",
                node.id,
                node.host,
                self.client_port(node, tls),
                topology.epoch
            ));
            for (start, end, _) in topology.ranges.iter().filter(|r| r.2.id == node.id) {
                if start == end {
                    out.push_str(&format!(" {start}"));
                } else {
                    out.push_str(&format!(" {start}-{end}"));
                }
            }
            // Slots CLUSTER SETSLOT marked, as Redis shows them (redis-cli's open slots).
            #[cfg(feature = "etcd")]
            for (slot, mark) in crate::sync::lock(&self.marks).iter().filter(|_| me) {
                match mark {
                    setslot::Mark::Migrating(to) => out.push_str(&format!(" [{slot}->-{to}]")),
                    setslot::Mark::Importing(from) => out.push_str(&format!(" [{slot}-<-{from}]")),
                }
            }
            out.push('\n');
        }
        out
    }
}

impl Cluster {
    /// Fences the calling thread's commits by the slot its command was routed to (`None`: a
    /// command without keys, not fenced) and the table revision it was routed by: over etcd
    /// they commit only while the table is unchanged, on a disk store only while the slot is
    /// not closed for a move and the node's lease surely holds.
    pub fn fence(&self, store: &crate::store::Store, slot: Option<u16>, revision: i64) {
        crate::store::route_writes(slot, revision);
        #[cfg(feature = "etcd")]
        for etcd in store.etcd_data() {
            etcd.fence(slot.map(|_| revision));
        }
        let _ = (store, revision);
    }

    /// Raises the data clusters' fences to the table at `revision` before this node routes
    /// by it, so that nodes routing by an older table commit nothing from then on. A fence
    /// that cannot be raised now is raised by the first commit routed by the table.
    #[cfg(feature = "etcd")]
    pub fn raise_fences(&self, revision: i64) {
        use std::sync::atomic::Ordering;
        let Some(stores) = self.fences.get() else { return };
        if self.fenced_to.load(Ordering::Acquire) >= revision {
            return;
        }
        match stores.iter().try_for_each(|etcd| etcd.raise_fence(revision)) {
            Ok(()) => {
                self.fenced_to.fetch_max(revision, Ordering::AcqRel);
            }
            Err(e) => crate::log::warning!("Cannot raise the slot fence of a data cluster: {e}"),
        }
    }

    /// The answer to a command whose commit was fenced: the table moved since it was
    /// routed, so it reads the table again and redirects to the slot's owner now (this node
    /// too: the client asks again).
    pub fn after_fence(&self, store: &crate::store::Store, slot: u16, tls: bool) -> Reply {
        // A disk store refused a write to a slot it is handing over: asked again, the client
        // waits for the move or is redirected.
        if self.keeps_data() {
            return match self.topology().owner(slot) {
                Some(node) if node.id == self.myself.id => Reply::Error(TRYAGAIN.into()),
                owner => self.redirection(slot, owner, tls),
            };
        }
        #[cfg(feature = "etcd")]
        if let Some(etcd) = store.etcd()
            && let Err(e) = membership::follow(self, etcd)
        {
            return Reply::Error(format!("CLUSTERDOWN The cluster is down ({e})"));
        }
        let _ = store;
        self.moved(slot, tls)
    }
}

/// A command's row and arguments, when it has a row.
pub fn resolve(argv: &[Bytes]) -> Option<(&'static CommandInfo, &[Bytes])> {
    table::find(argv).ok().map(|info| (info, argv))
}

/// Up to `count` keys of database 0 in `slot` (a scan of the slot's own range when the
/// layout writes slots into its keys, else a walk of every key); none when the slot is not in
/// this node's keyspace ([`Cluster::holds`]).
pub fn keys_in_slot(
    cluster: &Cluster,
    engine: &crate::store::SharedEngine,
    slot: u16,
    count: usize,
) -> Vec<Bytes> {
    let mut keys = Vec::new();
    if count == 0 || !cluster.holds(&cluster.topology(), slot) {
        return keys;
    }
    let session = rediskv::Session::new(0);
    // A store that fails mid-walk answers the keys found so far.
    let _ = engine.db(&session).walk_slot(slot, |key| {
        keys.push(Bytes::copy_from_slice(key));
        keys.len() < count
    });
    keys
}

/// A redirection or cluster error (its EXEC is not turned into EXECABORT, as in Redis).
pub fn is_redirection(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(e) if ["MOVED ", "ASK ", "CROSSSLOT ", "CLUSTERDOWN ", "TRYAGAIN "].iter().any(|p| e.starts_with(p)))
}

/// Whether a command failed because its commit was fenced (the slot table moved since it
/// was routed).
pub fn fenced(reply: &Reply) -> bool {
    let Reply::Error(e) = reply else { return false };
    #[cfg(feature = "etcd")]
    if e.contains(rediskv_etcd::FENCED) {
        return true;
    }
    e.contains(crate::store::SLOT_CLOSED)
}

fn parse_slot(arg: &[u8]) -> Result<u16, Reply> {
    match rediskv::server::args::parse_i64(arg) {
        None => Err(Reply::Error("ERR value is not an integer or out of range".into())),
        Some(slot) if (0..i64::from(SLOT_COUNT)).contains(&slot) => Ok(slot as u16),
        Some(_) => Err(Reply::Error("ERR Invalid slot".into())),
    }
}

/// One entry of CLUSTER SHARDS: the node's ranges and the node (a primary, no replicas);
/// its `tls-port` too under `tls-cluster yes`, as Redis 7.0.
fn shard(topology: &Topology, node: &Node, tls_cluster: bool) -> Reply {
    let slots = topology
        .ranges
        .iter()
        .filter(|r| r.2.id == node.id)
        .flat_map(|r| [Reply::Integer(i64::from(r.0)), Reply::Integer(i64::from(r.1))])
        .collect();
    let field = |k: &'static str, v: Reply| (Reply::bulk(k.as_bytes()), v);
    let port =
        |name: &'static str, port: u16| (port != 0).then(|| field(name, Reply::Integer(i64::from(port))));
    let mut about = vec![field("id", Reply::bulk(node.id.as_bytes()))];
    about.extend(port("port", node.port));
    about.extend(port("tls-port", node.tls_port).filter(|_| tls_cluster));
    about.extend([
        field("ip", Reply::bulk(node.host.as_bytes())),
        field("endpoint", Reply::bulk(node.host.as_bytes())),
        field("role", Reply::bulk(b"master")),
        field("replication-offset", Reply::Integer(0)),
        field("health", Reply::bulk(b"online")),
    ]);
    Reply::Map(vec![
        field("slots", Reply::Array(slots)),
        field("nodes", Reply::Array(vec![Reply::Map(about)])),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str) -> Node {
        Node { id: id.into(), host: "127.0.0.1".into(), port: 7000, tls_port: 0 }
    }

    #[test]
    fn the_table_text_reads_back_and_finds_owners() {
        let mut owners = vec![Some(node("a")); usize::from(SLOT_COUNT)];
        owners[100..200].fill(Some(node("b")));
        owners[300] = None;
        let mut topology = Topology::from_owners(&owners, 4, 9);
        topology.placed = vec!["a".into(), "b".into()];
        assert_eq!(topology.ranges.len(), 4);
        assert_eq!(topology.owner(150).map(|n| n.id.as_str()), Some("b"));
        assert_eq!(topology.owner(300), None);
        assert_eq!(topology.owner(16383).map(|n| n.id.as_str()), Some("a"));
        assert_eq!(topology.assigned(), usize::from(SLOT_COUNT) - 1);
        assert_eq!(Topology::decode(&topology.encode(), 9), topology);
        assert_eq!(topology.owners(), owners);
        // A node's TLS port is written when it has one; a line without reads as none.
        let tls = Node { tls_port: 7443, ..node("c") };
        assert_eq!(tls.address(), "127.0.0.1 7000 7443");
        let with_tls = Topology::from_owners(&vec![Some(tls.clone()); usize::from(SLOT_COUNT)], 1, 2);
        assert_eq!(Topology::decode(&with_tls.encode(), 2), with_tls);
        let old = Topology::decode(b"epoch 3\n0 16383 a 127.0.0.1 7000\n", 5);
        assert_eq!(old.owner(9), Some(&node("a")));
        assert_eq!(Node::at("x", "h 1 2 3"), None);
    }

    #[test]
    fn each_client_is_told_the_port_of_its_kind_under_tls_cluster() {
        let cluster = Cluster::new(node("me"));
        let both = Node { tls_port: 7443, ..node("a") };
        let tls_only = Node { port: 0, tls_port: 7443, ..node("b") };
        let plain_only = node("c");
        let told = |tls| [&both, &tls_only, &plain_only].map(|n| cluster.client_port(n, tls));
        // tls-cluster no: the plaintext port, whatever the client (as Redis).
        assert_eq!((told(false), told(true)), ([7000, 0, 7000], [7000, 0, 7000]));
        cluster.set_tls_cluster(true);
        assert_eq!((told(false), told(true)), ([7000, 7443, 7000], [7443, 7443, 7000]));
        assert_eq!(cluster.redirection(5, Some(&both), true), Reply::Error("MOVED 5 127.0.0.1:7443".into()));
    }
}
