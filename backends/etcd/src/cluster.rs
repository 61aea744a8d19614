//! The records a Redis Cluster of server nodes keeps in etcd, beside the data under the same
//! prefix: each node's registration (under an etcd lease, so it goes when the node stops
//! renewing it) and the one slot table. The server decides what they say; this module only
//! reads, writes, watches and fences them.
//!
//! Fencing: [`Backend::fence`] makes every later commit of the calling thread also compare the
//! slot table's `mod_revision` with the one the node routed the command by. A node that kept
//! a stale table (paused past its lease while others took its slots) commits nothing: the
//! commit fails with [`FENCED`] in its message instead of being retried.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
use rediskv::codec::prefix_successor;
use rediskv::{Error, Result};

use crate::{Backend, err};

/// Words in the error of a commit refused because the slot table changed since its command
/// was routed (the server answers a redirection instead).
pub const FENCED: &str = "fenced: the cluster's slot table changed since the command was routed";

const NODES: &[u8] = b"cluster/node/";
const TABLE: &[u8] = b"cluster/slots";

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
    /// `revision` (`None`: no fence): each commit also requires the table unchanged since.
    pub fn fence(&self, revision: Option<i64>) {
        let mut fences = self.fences.lock().unwrap_or_else(|e| e.into_inner());
        let thread = std::thread::current().id();
        match revision {
            Some(revision) => fences.insert(thread, revision),
            None => fences.remove(&thread),
        };
    }

    /// The compare of the calling thread's fence, if it has one.
    pub(crate) fn fence_compare(&self) -> Option<Compare> {
        let fences = self.fences.lock().unwrap_or_else(|e| e.into_inner());
        let revision = *fences.get(&std::thread::current().id())?;
        Some(Compare::mod_revision(self.own_key(TABLE), CompareOp::Equal, revision))
    }

    /// After a refused commit: the error to answer when the calling thread's fence is what
    /// refused it (the table changed since), `None` otherwise.
    pub(crate) fn fenced(&self) -> Result<Option<Error>> {
        let fenced =
            self.fences.lock().unwrap_or_else(|e| e.into_inner()).get(&std::thread::current().id()).copied();
        let Some(revision) = fenced else { return Ok(None) };
        let now = self.get_latest(&self.own_key(TABLE))?.map_or(0, |found| found.1);
        Ok((now != revision).then(|| err(FENCED)))
    }
}
