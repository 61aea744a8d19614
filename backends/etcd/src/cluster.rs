//! The records a Redis Cluster of server nodes keeps in etcd, beside the data under the same
//! prefix: each node's registration (under an etcd lease, so it goes when the node stops
//! renewing it) and the one slot table. The server decides what they say; this module only
//! reads, writes, watches and fences them.
//!
//! Fencing: the slot table lives in one etcd cluster (the topology's), while the slots' data
//! may live in others ([`crate::SlotStores`]), and a `Txn` compares records of its own
//! cluster only. So every cluster holding data keeps a fence record: the `mod_revision` of
//! the newest slot table any node has read, only ever raised ([`Backend::raise_fence`]), by
//! each node when it takes a new table and before it routes by it. [`Backend::fence`] makes
//! every later commit of the calling thread also compare the fence with the table revision
//! the node routed the command by. A node that kept a stale table (paused past its lease
//! while others took its slots and wrote them) commits nothing: the commit fails with
//! [`FENCED`] in its message instead of being retried. A commit routed by a table newer
//! than the fence (no node raised it yet) raises it and runs again.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
use rediskv::prefix_successor;
use rediskv::{Error, Result};

use crate::{Backend, err};

/// Words in the error of a commit refused because the slot table changed since its command
/// was routed (the server answers a redirection instead).
pub const FENCED: &str = "fenced: the cluster's slot table changed since the command was routed";

const NODES: &[u8] = b"cluster/node/";
const TABLE: &[u8] = b"cluster/slots";
/// Outside `cluster/` (not watched): raising it wakes no node.
const FENCE: &[u8] = b"fence/slots";
/// The data clusters' ids, in slot order ([`Backend::cluster_check_stores`]).
const STORES: &[u8] = b"cluster-stores";

/// The cluster's records at one revision.
#[derive(Debug, Clone, Default)]
pub struct ClusterRecords {
    /// Each registered node's value and `create_revision` (when it registered), by node id.
    pub nodes: BTreeMap<String, (Vec<u8>, i64)>,
    /// The slot table's value, if any.
    pub table: Option<Vec<u8>>,
    /// The slot table's `mod_revision` (0: none yet).
    pub table_revision: i64,
}

impl Backend {
    fn node_key(&self, id: &str) -> Vec<u8> {
        let mut name = NODES.to_vec();
        name.extend_from_slice(id.as_bytes());
        self.own_key(&name)
    }

    /// Grants a lease of `ttl` (whole seconds, at least 1) and registers node `id` with
    /// `value` under it; answers the lease's id.
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd cannot be reached.
    pub fn cluster_register(&self, id: &str, value: &[u8], ttl: Duration) -> Result<i64> {
        let mut client = self.client.clone();
        let seconds = ttl.as_secs().max(1) as i64;
        let lease = self.runtime.block_on(client.lease_grant(seconds, None)).map_err(err)?.id();
        let key = self.node_key(id);
        let put = Some(PutOptions::new().with_lease(lease));
        self.runtime.block_on(self.kv.clone().put(key, value.to_vec(), put)).map_err(err)?;
        Ok(lease)
    }

    /// Renews lease `lease` once: `false` when etcd no longer has it (it ran out).
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd cannot be reached.
    pub fn cluster_keep_alive(&self, lease: i64) -> Result<bool> {
        let mut client = self.client.clone();
        self.runtime.block_on(async move {
            let (mut keeper, mut stream) = client.lease_keep_alive(lease).await.map_err(err)?;
            keeper.keep_alive().await.map_err(err)?;
            let answer = stream.message().await.map_err(err)?;
            Ok::<bool, Error>(answer.is_some_and(|a| a.ttl() > 0))
        })
    }

    /// The registered nodes and the slot table, read at one revision.
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd cannot be reached.
    pub fn cluster_records(&self) -> Result<ClusterRecords> {
        let start = self.own_key(b"cluster/");
        let end = prefix_successor(&start).unwrap_or_default();
        let response = self.request(true, |mut kv| {
            let (start, end) = (start.clone(), end.clone());
            async move { kv.get(start, Some(GetOptions::new().with_range(end))).await }
        })?;
        let (nodes_key, table_key) = (self.own_key(NODES), self.own_key(TABLE));
        let mut records = ClusterRecords::default();
        for kv in response.kvs() {
            if kv.key() == table_key.as_slice() {
                records.table = Some(kv.value().to_vec());
                records.table_revision = kv.mod_revision();
            } else if let Some(id) = kv.key().strip_prefix(nodes_key.as_slice()) {
                let node = (kv.value().to_vec(), kv.create_revision());
                records.nodes.insert(String::from_utf8_lossy(id).into_owned(), node);
            }
        }
        Ok(records)
    }

    /// Replaces the slot table with `table` if its `mod_revision` is still `expected` (0:
    /// there is none yet): `true` when it did. Two nodes computing a change from the same
    /// table never both apply it.
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd cannot be reached.
    pub fn cluster_swap_table(&self, expected: i64, table: &[u8]) -> Result<bool> {
        let key = self.own_key(TABLE);
        let txn = Txn::new()
            .when([Compare::mod_revision(key.clone(), CompareOp::Equal, expected)])
            .and_then([TxnOp::put(key, table.to_vec(), None)]);
        self.txn(txn)
    }

    /// Replaces the slot table with `table` if its `mod_revision` is still `expected` and
    /// node `gone` is not registered: a replica takes its primary's slots only while the
    /// primary's lease has run out.
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd cannot be reached.
    pub fn cluster_take_over(&self, expected: i64, table: &[u8], gone: &str) -> Result<bool> {
        let key = self.own_key(TABLE);
        let txn = Txn::new()
            .when([
                Compare::mod_revision(key.clone(), CompareOp::Equal, expected),
                Compare::create_revision(self.node_key(gone), CompareOp::Equal, 0),
            ])
            .and_then([TxnOp::put(key, table.to_vec(), None)]);
        self.txn(txn)
    }

    /// A feed with one message per change to the cluster's records (a node registered or
    /// gone, the slot table replaced). It ends when etcd ends the watch.
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd refuses the watch.
    pub fn cluster_changes(&self) -> Result<std::sync::mpsc::Receiver<()>> {
        let prefix = self.own_key(b"cluster/");
        let options = etcd_client::WatchOptions::new().with_prefix();
        let mut client = self.client.clone();
        let (watcher, mut stream) =
            self.runtime.block_on(client.watch(prefix, Some(options))).map_err(err)?;
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let _watcher = watcher;
            while let Ok(Some(_)) = stream.message().await {
                if tx.send(()).is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }

    /// Fences the calling thread's commits from now on by the slot table's `mod_revision`
    /// `revision` (`None`: no fence): each commit also requires the fence record to be it.
    pub fn fence(&self, revision: Option<i64>) {
        let mut fences = self.fences.lock().unwrap_or_else(|e| e.into_inner());
        let thread = std::thread::current().id();
        match revision {
            Some(revision) => fences.insert(thread, revision),
            None => fences.remove(&thread),
        };
    }

    /// Raises this cluster's fence record to table revision `revision` (kept when it is
    /// higher already): from then on commits routed by an older table fail.
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd cannot be reached.
    pub fn raise_fence(&self, revision: i64) -> Result<()> {
        let key = self.own_key(FENCE);
        loop {
            let found = self.get_latest(&key)?;
            if found.as_ref().and_then(|f| fence_revision(&f.0)).is_some_and(|now| now >= revision) {
                return Ok(());
            }
            let txn = Txn::new()
                .when([Compare::mod_revision(key.clone(), CompareOp::Equal, found.map_or(0, |f| f.1))])
                .and_then([TxnOp::put(key.clone(), revision.to_be_bytes().to_vec(), None)]);
            if self.txn(txn)? {
                return Ok(());
            }
        }
    }

    /// The compare of the calling thread's fence, if it has one.
    pub(crate) fn fence_compare(&self) -> Option<Compare> {
        let fences = self.fences.lock().unwrap_or_else(|e| e.into_inner());
        let revision = *fences.get(&std::thread::current().id())?;
        Some(Compare::value(self.own_key(FENCE), CompareOp::Equal, revision.to_be_bytes().to_vec()))
    }

    /// After a refused commit: the error to answer when the calling thread's fence is what
    /// refused it (a newer table was read since), `None` otherwise. A fence behind the
    /// command's table is raised (the command runs again and passes it).
    pub(crate) fn fenced(&self) -> Result<Option<Error>> {
        let fenced =
            self.fences.lock().unwrap_or_else(|e| e.into_inner()).get(&std::thread::current().id()).copied();
        let Some(revision) = fenced else { return Ok(None) };
        let now = self.get_latest(&self.own_key(FENCE))?.and_then(|f| fence_revision(&f.0)).unwrap_or(0);
        if now < revision {
            self.raise_fence(revision)?;
        }
        Ok((now > revision).then(|| err(FENCED)))
    }

    /// This etcd cluster's id (every member answers with it).
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd cannot be reached.
    pub fn cluster_id(&self) -> Result<u64> {
        let key = self.own_key(STORES);
        let response = self.request(true, |mut kv| {
            let key = key.clone();
            async move { kv.get(key, Some(GetOptions::new().with_count_only())).await }
        })?;
        response.header().map(|h| h.cluster_id()).ok_or_else(|| err("etcd answered without a header"))
    }

    /// Records `stores` (the data clusters' ids, in slot order) as the cluster's, unless a
    /// list is recorded already; then checks it is the same: every node must map the slots
    /// to the same etcd clusters.
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd cannot be reached, or when the recorded list differs
    /// (the message shows both).
    pub fn cluster_check_stores(&self, stores: &[u64]) -> Result<()> {
        let key = self.own_key(STORES);
        let ours = stores.iter().map(|id| format!("{id:016x}")).collect::<Vec<_>>().join(",");
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), ours.clone().into_bytes(), None)]);
        self.txn(txn)?;
        let recorded = self.get_latest(&key)?.map(|f| String::from_utf8_lossy(&f.0).into_owned());
        match recorded {
            Some(recorded) if recorded == ours => Ok(()),
            recorded => Err(err(format!(
                "this cluster keeps its data in the etcd clusters {} (ids, in slot order), this node was \
                 given {ours}: start it with the same data clusters, in the same order",
                recorded.unwrap_or_default()
            ))),
        }
    }
}

/// The table revision a fence record holds.
fn fence_revision(value: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(value.try_into().ok()?))
}
