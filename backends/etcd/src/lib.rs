//! rediskv's [`KvBackend`] over an [etcd](https://etcd.io) v3 cluster: several stateless
//! rediskv processes (each an [`rediskv::Engine`] over its own [`Backend`]) serve
//! the same data, and etcd's Raft log gives replication and failover.
//!
//! ```no_run
//! use rediskv::Engine;
//! use rediskv_etcd::Options;
//!
//! let options = Options::new(["http://127.0.0.1:2379", "http://127.0.0.1:22379"]);
//! let engine = Engine::new(rediskv_etcd::open(options)?);
//! let mut session = engine.session();
//! engine.run(&mut session, &["SET", "k", "v"]);
//! # Ok::<(), rediskv::Error>(())
//! ```
//!
//! # Records in etcd
//! Every record lives under [`Options::prefix`] (default `rediskv/`) followed by one byte per
//! column family: `m` metadata, `d` subkeys (Kvrocks' `default`), `z` scores, then the
//! record key unchanged; `r` holds the backend's own records (layout manifest, version floor,
//! the maintenance lease, a cluster's records: [`ClusterRecords`]). Byte order inside each
//! column family is etcd's key order.
//!
//! # Transactions
//! The engine calls [`KvBackend::begin`] and [`KvBackend::finish`] around each command and
//! each EXEC, on the command's thread. In between, that thread's reads all happen at one etcd
//! revision (the first read's), and the backend remembers what they saw:
//!
//! - every point read (`get`, `multi_get`): the key's `mod_revision` (0: absent);
//! - every scan page: the key range the page covered.
//!
//! The command's one batch is committed as one etcd `Txn` whose compares are: each point read
//! still has the `mod_revision` seen (`=`, so a deletion is noticed too), and each scanned
//! range holds no key modified after the read revision (`mod_revision < rev + 1`). A range
//! compare cannot see a key *deleted* from the range; that is enough because a live subkey or
//! score record is only ever deleted together with a rewrite of its owner's metadata (size,
//! list head/tail), which the command read by point and compares. Any compare failing, nothing
//! is applied and `write` fails with [`rediskv::Error::Conflict`]; the engine runs the command
//! again on a fresh revision, after a growing, jittered pause, until
//! [`Options::conflict_timeout`] (10 s by default) has passed. This is
//! optimistic concurrency with full read-set validation, so commands are serializable across
//! nodes, not only free of lost updates. A read-only command commits nothing and needs no
//! compare: one revision is one consistent snapshot.
//!
//! Versions: every batch that puts a collection's metadata with a version different from the
//! one the command read (a new collection) also compares that no Subkey or Score record of
//! that key and version exists yet. Two nodes' clock-based versions could in principle meet;
//! with this compare a new collection can never adopt a dead one's records. The persisted
//! version floor of [`rediskv_engine::VersionFloor`] keeps versions rising across restarts.
//!
//! WATCH works across nodes: [`KvBackend::stamp`] answers a record's `mod_revision`; WATCH
//! keeps the watched metadata's, and EXEC, inside its transaction, aborts when it changed
//! (a change after that check fails the `Txn`'s compare, and the rerun aborts). Blocking pops
//! and keyspace notifications are the server's and stay node-local for now: the server wakes
//! and notifies from the keys its own commands touched. [`Backend::metadata_changes`] is the
//! feed that makes them cross-node: every node's metadata puts and deletes, from an etcd
//! watch on the `m` range (the server does not consume it yet).
//!
//! Outside begin..finish (tools, [`rediskv::gc::Collector`], [`rediskv::Db::new`]),
//! each read sees the latest revision and each batch is one unconditional `Txn`.
//!
//! # Limits
//! etcd refuses a `Txn` with more than `--max-txn-ops` operations (or compares), 128 by
//! default, or over `--max-request-bytes` (1.5 MiB). A command's batch is atomic, so it is
//! never split: [`Options::max_txn_ops`] and [`Options::max_request_bytes`] state what the
//! cluster was started with, and a bigger batch is refused before sending with an error
//! naming the limit. Start etcd with limits fitting the largest command (the tests use
//! `--max-txn-ops 100000 --max-request-bytes 67108864`).
//!
//! # Failures
//! A request that fails for want of a member or a leader is sent again, after growing,
//! jittered pauses, until [`Options::unavailable_timeout`]; the client balances over every
//! endpoint. A commit whose answer was lost may have been applied: every `Txn` also writes
//! the sending thread's request record (a sequence number) and requires it unchanged since
//! that thread's last commit, so the same `Txn` sent again applies only if the first did
//! not, and reading the record after a refusal tells which happened. Each command therefore
//! applies exactly once. [`Backend::stats`] counts retries, lost answers and conflicts.
//!
//! # Garbage and expiry
//! etcd has no compaction filter: run [`Maintenance::step`] on a timer in every node. Only the
//! node holding the maintenance lease (a record in etcd, renewed by each step) sweeps, so
//! nodes do not all walk the same ranges; the library's [`rediskv::gc::Collector`] deletes dead
//! versions' records and [`rediskv::gc::expire_step`] deletes expired keys, each re-checked
//! in a guarded `Txn`.
//!
//! # In a server (`--engine etcd --etcd-endpoints a,b,c`)
//! [`open`] with [`Options::new`]`(endpoints)` (set the cluster's limits and a prefix, and
//! [`Options::tls`] for `https://` endpoints: the members' CA, a client certificate);
//! keep the `Arc<Backend>` and give the engine the same `Arc` as `Arc<dyn KvBackend + Send +
//! Sync>` (the hooks dispatch through it). On each maintenance tick call
//! [`Maintenance::step`]`(&backend, &engine, budget)` in place of the memory engine's sweep
//! and collector; to wake blocked clients and publish keyspace notifications for other
//! nodes' writes, drain [`Backend::metadata_changes`].
//!
//! # Several clusters
//! [`SlotStores`] is one [`KvBackend`] over several etcd clusters, each holding a contiguous
//! range of Redis Cluster slots (a cluster of server nodes whose commands each stay in one
//! slot): a command commits to one cluster; scans over many keys merge them.
//!
//! # Runtime
//! The backend owns a small tokio runtime and blocks the calling thread on each request: call
//! it from plain threads, never from inside an async task.
#![deny(missing_docs)]

mod cluster;
mod stores;
pub mod testkit;

pub use cluster::{ClusterRecords, FENCED};
pub use stores::{SlotStores, slot_store};

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::ThreadId;
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KvClient, SortOrder, SortTarget, Txn, TxnOp,
    TxnOpResponse,
};
use rediskv::Engine;
use rediskv::gc::{self, CollectStep, Collector, ExpirySweep, SweepStep};
use rediskv::{BatchOp, ColumnFamily, Direction, KvBackend, ScanIter, WriteBatch};
use rediskv::{Error, Result};
use rediskv::{KeyLayout, KeyRange, Version, prefix_successor};
use rediskv_engine::{FLOOR_KEY, MANIFEST_KEY, VersionFloor, check_manifest, manifest};

/// How an etcd cluster is reached and used.
#[derive(Debug, Clone)]
pub struct Options {
    /// Client URLs of the cluster's members (`http://host:port`, or `https://host:port`
    /// with [`Options::tls`]).
    pub endpoints: Vec<String>,
    /// TLS to the members (`https://` endpoints); `None`: plain HTTP/2.
    pub tls: Option<Tls>,
    /// Every record's etcd key starts with this (several databases can share a cluster).
    pub prefix: Vec<u8>,
    /// The key layout; the cluster remembers it under the prefix and refuses another one.
    pub layout: KeyLayout,
    /// How long after expiry a collection's subkeys are kept ([`gc::DEFAULT_GRACE_MS`]).
    pub grace_ms: u64,
    /// The cluster's `--max-txn-ops`: a batch (or read set) needing more is refused.
    pub max_txn_ops: usize,
    /// The cluster's `--max-request-bytes`: a bigger `Txn` is refused.
    pub max_request_bytes: usize,
    /// Timeout of each request.
    pub timeout: Duration,
    /// How long a request keeps trying while no quorum answers (a member died, the cluster is
    /// electing a leader), moving between members, before it fails with an error saying so.
    pub unavailable_timeout: Duration,
    /// How long a command refused by write conflicts (several nodes writing one hot key) is
    /// run again, with growing, jittered pauses, before its client gets the conflict error.
    pub conflict_timeout: Duration,
}

impl Options {
    /// Defaults for a cluster at `endpoints`: prefix `rediskv/`, the default layout, etcd's
    /// own default limits (128 operations, 1.5 MiB), a 5 s timeout per request, 10 s of
    /// waiting for a quorum, 10 s of conflict retries.
    pub fn new<S: AsRef<str>>(endpoints: impl IntoIterator<Item = S>) -> Self {
        Options {
            endpoints: endpoints.into_iter().map(|e| e.as_ref().to_string()).collect(),
            tls: None,
            prefix: b"rediskv/".to_vec(),
            layout: KeyLayout::default(),
            grace_ms: gc::DEFAULT_GRACE_MS,
            max_txn_ops: 128,
            max_request_bytes: 1536 * 1024,
            timeout: Duration::from_secs(5),
            unavailable_timeout: Duration::from_secs(10),
            conflict_timeout: Duration::from_secs(10),
        }
    }
}

/// The PEM files of a TLS connection to etcd, as etcd's own flags name them: the CA that
/// signed the members' certificates (`--trusted-ca-file`), and the client's certificate
/// and key for members that check clients (`--client-cert-auth`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tls {
    /// The CA certificate(s) the members' certificates are checked against.
    pub ca_file: std::path::PathBuf,
    /// The client certificate and its private key, both or neither.
    pub identity: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl Tls {
    /// The client's TLS options, from the files.
    fn options(&self) -> Result<etcd_client::TlsOptions> {
        let read = |path: &std::path::Path| {
            std::fs::read(path).map_err(|e| Error::Backend(format!("cannot read {}: {e}", path.display())))
        };
        let mut options = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(read(&self.ca_file)?))
            .assume_http2(true);
        if let Some((cert, key)) = &self.identity {
            options = options.identity(etcd_client::Identity::from_pem(read(cert)?, read(key)?));
        }
        Ok(options)
    }
}

/// The tag byte after the prefix for each column family.
fn cf_tag(cf: ColumnFamily) -> u8 {
    match cf {
        ColumnFamily::Metadata => b'm',
        ColumnFamily::Subkey => b'd',
        ColumnFamily::Score => b'z',
        ColumnFamily::Stream => b's',
    }
}

/// The tag of the backend's own records.
const OWN_TAG: u8 = b'r';
/// Key (under the own tag) of the maintenance lease.
const LEASE_KEY: &[u8] = b"rediskv:maintenance-lease";
/// Keys per scan request.
const PAGE: i64 = 512;
/// Key prefix (under the own tag) of the request records: one per node and thread, holding
/// the sequence number and time of that thread's last applied batch.
const REQUEST_KEY: &[u8] = b"rediskv:request/";
/// A request record not rewritten for this long belongs to a thread or node that is gone.
const REQUEST_RECORD_TTL_MS: u64 = 3_600_000;

/// The first pause before sending a request again while no quorum answers (an election
/// takes about a second).
const UNAVAILABLE_FIRST_PAUSE_US: u64 = 10_000;
/// The first pause before running a command again after a write conflict.
const CONFLICT_FIRST_PAUSE_US: u64 = 1_000;

/// How a request failed, for deciding whether to send it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// It never reached a member (no connection): sending it again is always safe.
    NotSent,
    /// No answer, or no leader to apply it: it may or may not have been applied.
    Unavailable,
    /// An answer that is final (a refused request, a compacted revision, a bad argument).
    Final,
}

fn failure(e: &etcd_client::Error) -> Failure {
    let text = e.to_string();
    if text.contains("tcp connect error") || text.contains("Connection refused") {
        return Failure::NotSent;
    }
    let unavailable = [
        "status: Unavailable",
        "status: Unknown",
        "status: DeadlineExceeded",
        "status: Cancelled",
        "Timeout expired",
        "transport error",
        "leader changed",
        "no leader",
        "request timed out",
        "timed out",
        "broken pipe",
        "connection reset",
    ];
    if unavailable.iter().any(|t| text.contains(t)) { Failure::Unavailable } else { Failure::Final }
}

/// The pause before the `attempt`-th retry (1-based): doubling from `first_us` to 64 times
/// that, with ±50% jitter so that nodes retrying the same key spread out.
fn backoff(attempt: u32, seed: u64, first_us: u64) -> Duration {
    let base = first_us << attempt.clamp(1, 7).saturating_sub(1);
    // splitmix64 of the seed and attempt: cheap, and different per node and thread.
    let mut z = seed.wrapping_add(u64::from(attempt).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    Duration::from_micros(base / 2 + z % base.max(1))
}

/// A seed for [`backoff`] that differs between threads and calls.
fn jitter_seed(node: u64) -> u64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    node ^ (nanos as u64)
        ^ std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 1u8)
}

/// What the backend met while reaching the cluster, since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests sent again because no quorum answered (a member died, an election).
    pub unavailable_retries: u64,
    /// Commits whose answer was lost (the connection broke after the request left).
    pub ambiguous_commits: u64,
    /// Of those, commits the request record showed applied (so not applied again).
    pub ambiguous_applied: u64,
    /// Commands run again after a write conflict.
    pub conflict_retries: u64,
}

#[derive(Debug, Default)]
struct Counters {
    unavailable_retries: AtomicU64,
    ambiguous_commits: AtomicU64,
    ambiguous_applied: AtomicU64,
    conflict_retries: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// One thread's request record: its etcd key, the sequence number of its last applied batch
/// and that record's `mod_revision` (0: absent).
#[derive(Debug, Clone)]
struct RequestRecord {
    key: Vec<u8>,
    seq: u64,
    mod_revision: i64,
}

fn err(e: impl std::fmt::Display) -> Error {
    rediskv_engine::backend_error("etcd", e)
}

/// An etcd key and value.
type RawPair = (Vec<u8>, Vec<u8>);

/// What one thread's open transaction has read.
#[derive(Debug, Default)]
struct View {
    /// The revision every read uses (the first read's).
    revision: Option<i64>,
    /// etcd key → `mod_revision` seen (0: absent).
    points: HashMap<Vec<u8>, i64>,
    /// Scanned etcd key ranges `[start, end)`.
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    /// Metadata versions seen, by etcd key (`None`: absent or not a collection).
    versions: HashMap<Vec<u8>, Option<Version>>,
    /// Whether etcd refused the transaction.
    refused: bool,
}

/// A connection to an etcd cluster: a [`KvBackend`] shareable between threads (`&self`
/// everywhere; wrap it in an `Arc`). See the crate docs for what it stores and guarantees.
pub struct Backend {
    runtime: tokio::runtime::Runtime,
    client: Client,
    kv: KvClient,
    options: Options,
    views: Mutex<HashMap<ThreadId, View>>,
    /// Each writing thread's request record (see [`Backend::commit`]).
    requests: Mutex<HashMap<ThreadId, RequestRecord>>,
    /// The next request-record slot to give a thread.
    slots: std::sync::atomic::AtomicU32,
    counters: Counters,
    floor: VersionFloor,
    node: u64,
    /// Each fenced thread's slot table revision ([`Backend::fence`]).
    fences: Mutex<HashMap<ThreadId, i64>>,
}

/// Connects to the cluster and checks (or, on a new prefix, records) the layout manifest.
///
/// # Errors
/// [`Error::Backend`] when no endpoint answers within the timeout, or when the prefix was
/// written with another layout (the message names both), or its version floor is corrupt.
pub fn open(options: Options) -> Result<Backend> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("rediskv-etcd")
        .enable_all()
        .build()
        .map_err(err)?;
    let mut connect =
        ConnectOptions::new().with_timeout(options.timeout).with_connect_timeout(options.timeout);
    if let Some(tls) = &options.tls {
        connect = connect.with_tls(tls.options()?);
    }
    let client = runtime.block_on(Client::connect(&options.endpoints, Some(connect))).map_err(err)?;
    let limit = options.max_request_bytes.max(4 << 20) * 2;
    let kv = client.kv_client().max_decoding_message_size(limit).max_encoding_message_size(limit);
    let node = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8);
    let mut backend = Backend {
        runtime,
        client,
        kv,
        options,
        views: Mutex::default(),
        requests: Mutex::default(),
        slots: Default::default(),
        counters: Counters::default(),
        floor: VersionFloor::restore(None)?,
        node,
        fences: Mutex::default(),
    };
    let manifest_key = backend.own_key(MANIFEST_KEY);
    let ours = manifest(&backend.options.layout);
    // Record our manifest unless one is there, then check whichever is there.
    let txn = Txn::new()
        .when([Compare::create_revision(manifest_key.clone(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(manifest_key.clone(), ours, None)]);
    backend.txn(txn)?;
    let stored = backend.get_raw(&manifest_key)?.map(|kv| kv.0).unwrap_or_default();
    let place = format!("etcd prefix {:?}", String::from_utf8_lossy(&backend.options.prefix));
    check_manifest(std::path::Path::new(&place), &stored, &backend.options.layout)?;
    let floor = backend.get_raw(&backend.own_key(FLOOR_KEY))?.map(|kv| kv.0);
    backend.floor = VersionFloor::restore(floor.as_deref())?;
    Ok(backend)
}

impl Backend {
    /// The options it was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// What the backend met while reaching the cluster (retries, lost answers, conflicts).
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        Stats {
            unavailable_retries: c.unavailable_retries.load(Ordering::Relaxed),
            ambiguous_commits: c.ambiguous_commits.load(Ordering::Relaxed),
            ambiguous_applied: c.ambiguous_applied.load(Ordering::Relaxed),
            conflict_retries: c.conflict_retries.load(Ordering::Relaxed),
        }
    }

    /// This process' random id (the maintenance lease's holder).
    pub fn node_id(&self) -> u64 {
        self.node
    }

    fn key(&self, cf: ColumnFamily, key: &[u8]) -> Vec<u8> {
        self.tagged(cf_tag(cf), key)
    }

    fn own_key(&self, key: &[u8]) -> Vec<u8> {
        self.tagged(OWN_TAG, key)
    }

    fn tagged(&self, tag: u8, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.options.prefix.len() + 1 + key.len());
        out.extend_from_slice(&self.options.prefix);
        out.push(tag);
        out.extend_from_slice(key);
        out
    }

    /// Runs `f` on the calling thread's open transaction, if any.
    fn with_view<T>(&self, f: impl FnOnce(&mut View) -> T) -> Option<T> {
        let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        views.get_mut(&std::thread::current().id()).map(f)
    }

    /// The revision reads use now: the open transaction's, or 0 (the latest).
    fn read_revision(&self) -> i64 {
        self.with_view(|v| v.revision).flatten().unwrap_or(0)
    }

    /// Pins the open transaction's revision to the first read's.
    fn pin(&self, revision: i64) {
        self.with_view(|v| {
            v.revision.get_or_insert(revision);
        });
    }

    /// Maps a client error; a read at a compacted revision refuses the transaction (run again
    /// on a fresh revision).
    fn map_err(&self, e: etcd_client::Error) -> Error {
        let text = e.to_string();
        if text.contains("compacted") {
            self.with_view(|v| v.refused = true);
            return Error::Conflict(format!("etcd: {text}"));
        }
        if failure(&e) != Failure::Final {
            return self.unavailable(&text);
        }
        err(text)
    }

    /// The error a client gets when no quorum answered within [`Options::unavailable_timeout`].
    fn unavailable(&self, last: &str) -> Error {
        err(format!(
            "no etcd quorum reachable within {:?} (endpoints {}); last error: {last}",
            self.options.unavailable_timeout,
            self.options.endpoints.join(",")
        ))
    }

    fn txn(&self, txn: Txn) -> Result<bool> {
        let response = self.request(false, |mut kv| {
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        })?;
        Ok(response.succeeded())
    }

    /// Runs `request` with a fresh client handle (the client balances over every endpoint and
    /// leaves a dead member's connection); again, after a growing pause, while it fails in a
    /// way another member or a new leader may not, until [`Options::unavailable_timeout`]: a
    /// read (`idempotent`) on any unavailability (no leader, a dead member, a broken
    /// connection), a write only when it never left (a write whose answer was lost may have
    /// been applied: [`Backend::commit`] handles those).
    fn request<T, F>(&self, idempotent: bool, mut request: impl FnMut(KvClient) -> F) -> Result<T>
    where
        F: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let start = std::time::Instant::now();
        let seed = jitter_seed(self.node);
        let mut attempt = 1;
        loop {
            match self.runtime.block_on(request(self.kv.clone())) {
                Ok(response) => return Ok(response),
                Err(e) => {
                    let retry = match failure(&e) {
                        Failure::NotSent => true,
                        Failure::Unavailable => idempotent,
                        Failure::Final => false,
                    };
                    if !retry || start.elapsed() >= self.options.unavailable_timeout {
                        return Err(self.map_err(e));
                    }
                    bump(&self.counters.unavailable_retries);
                    std::thread::sleep(backoff(attempt, seed, UNAVAILABLE_FIRST_PAUSE_US));
                    attempt += 1;
                }
            }
        }
    }

    /// The calling thread's request record, read from etcd on its first write.
    fn request_record(&self) -> Result<RequestRecord> {
        let thread = std::thread::current().id();
        if let Some(record) = self.requests.lock().unwrap_or_else(|e| e.into_inner()).get(&thread) {
            return Ok(record.clone());
        }
        let slot = self.slots.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut name = REQUEST_KEY.to_vec();
        name.extend_from_slice(&self.node.to_be_bytes());
        name.extend_from_slice(&slot.to_be_bytes());
        let key = self.own_key(&name);
        let found = self.get_latest(&key)?;
        let record = RequestRecord {
            seq: found.as_ref().and_then(|f| request_seq(&f.0)).unwrap_or(0),
            mod_revision: found.map_or(0, |f| f.1),
            key,
        };
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).insert(thread, record.clone());
        Ok(record)
    }

    fn set_request_record(&self, record: RequestRecord) {
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).insert(std::thread::current().id(), record);
    }

    /// A range request; pins the open transaction's revision to the first answer's.
    fn range(&self, key: &[u8], options: GetOptions) -> Result<etcd_client::GetResponse> {
        let response = self.request(true, |mut kv| {
            let options = options.clone();
            async move { kv.get(key, Some(options)).await }
        })?;
        if let Some(header) = response.header() {
            self.pin(header.revision());
        }
        Ok(response)
    }

    /// One key at the read revision: its value and `mod_revision`.
    fn get_raw(&self, key: &[u8]) -> Result<Option<(Vec<u8>, i64)>> {
        let mut response = self.range(key, GetOptions::new().with_revision(self.read_revision()))?;
        Ok(response.take_kvs().pop().map(value_and_revision))
    }

    /// One key at the latest revision, outside any open transaction's snapshot.
    fn get_latest(&self, key: &[u8]) -> Result<Option<(Vec<u8>, i64)>> {
        let mut response = self.request(true, |mut kv| async move { kv.get(key, None).await })?;
        Ok(response.take_kvs().pop().map(value_and_revision))
    }

    /// One page of `[start, end)` in `direction` at `revision` (0: the transaction's, or the
    /// latest, which is then written back so a scan's later pages read the same revision).
    fn page(
        &self,
        start: &[u8],
        end: &[u8],
        direction: Direction,
        revision: &mut i64,
    ) -> Result<(Vec<RawPair>, bool)> {
        let at = if *revision != 0 { *revision } else { self.read_revision() };
        let mut options = GetOptions::new().with_range(end.to_vec()).with_limit(PAGE).with_revision(at);
        if direction == Direction::Reverse {
            options = options.with_sort(SortTarget::Key, SortOrder::Descend);
        }
        let mut response = self.range(start, options)?;
        if let Some(header) = response.header() {
            *revision = if at != 0 { at } else { header.revision() };
        }
        let more = response.more();
        Ok((response.take_kvs().into_iter().map(|kv| kv.into_key_value()).collect(), more))
    }

    /// A feed of the metadata keys (record keys, as the library writes them) that any node
    /// puts or deletes from now on, for waking blocked clients and keyspace notifications on
    /// every node. Each event comes once per write; a burst may repeat a key. The feed ends
    /// (the receiver sees a disconnect) when the backend is dropped or etcd ends the watch.
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd refuses the watch.
    pub fn metadata_changes(&self) -> Result<std::sync::mpsc::Receiver<Bytes>> {
        let prefix = self.key(ColumnFamily::Metadata, b"");
        let options = etcd_client::WatchOptions::new().with_prefix();
        let mut client = self.client.clone();
        let (watcher, mut stream) =
            self.runtime.block_on(client.watch(prefix.clone(), Some(options))).map_err(err)?;
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let _watcher = watcher;
            while let Ok(Some(response)) = stream.message().await {
                for kv in response.events().iter().filter_map(|e| e.kv()) {
                    let key = Bytes::copy_from_slice(&kv.key()[prefix.len()..]);
                    if tx.send(key).is_err() {
                        return;
                    }
                }
            }
        });
        Ok(rx)
    }

    /// Remembers a point read in the open transaction (its `mod_revision`, and a metadata
    /// record's collection version); answers the value.
    fn record_point(
        &self,
        cf: ColumnFamily,
        etcd_key: Vec<u8>,
        found: Option<(Vec<u8>, i64)>,
    ) -> Option<Bytes> {
        self.with_view(|v| {
            v.points.insert(etcd_key.clone(), found.as_ref().map_or(0, |f| f.1));
            if cf == ColumnFamily::Metadata {
                v.versions.insert(
                    etcd_key,
                    found.as_ref().and_then(|f| collection_version(&self.options.layout, &f.0)),
                );
            }
        });
        found.map(|(value, _)| Bytes::from(value))
    }

    /// Holds or takes the maintenance lease for `ttl`: `true` when this node holds it now
    /// (it had it, or nobody held it, or the holder's lease ran out by this node's clock).
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd cannot be reached.
    pub fn hold_maintenance_lease(&self, now_ms: u64, ttl: Duration) -> Result<bool> {
        let key = self.own_key(LEASE_KEY);
        let current = self.get_raw(&key)?;
        let (holder, until, mod_revision) = match &current {
            Some((value, rev)) if value.len() == 16 => (
                u64::from_be_bytes(value[..8].try_into().unwrap_or_default()),
                u64::from_be_bytes(value[8..].try_into().unwrap_or_default()),
                *rev,
            ),
            Some((_, rev)) => (0, 0, *rev),
            None => (0, 0, 0),
        };
        if holder != self.node && until > now_ms {
            return Ok(false);
        }
        let mut value = self.node.to_be_bytes().to_vec();
        value.extend_from_slice(&(now_ms + ttl.as_millis() as u64).to_be_bytes());
        let txn = Txn::new()
            .when([Compare::mod_revision(key.clone(), CompareOp::Equal, mod_revision)])
            .and_then([TxnOp::put(key, value, None)]);
        self.txn(txn)
    }

    /// The compares guarding a batch committed by the open transaction.
    fn compares(&self, view: &View, ops: &BTreeMap<Vec<u8>, Option<Bytes>>) -> Vec<Compare> {
        let mut compares: Vec<Compare> = view
            .points
            .iter()
            .map(|(key, rev)| Compare::mod_revision(key.clone(), CompareOp::Equal, *rev))
            .collect();
        let after = view.revision.unwrap_or(0) + 1;
        compares.extend(view.ranges.iter().map(|(start, end)| {
            Compare::mod_revision(start.clone(), CompareOp::Less, after).with_range(end.clone())
        }));
        let metadata = self.key(ColumnFamily::Metadata, b"");
        for (key, value) in ops {
            let (Some(record_key), Some(value)) = (key.strip_prefix(metadata.as_slice()), value) else {
                continue;
            };
            let Some(version) = collection_version(&self.options.layout, value) else { continue };
            if view.versions.get(key).copied().flatten() == Some(version) {
                continue;
            }
            // A new collection: no record of its key and version may exist yet.
            for range in self.version_ranges(record_key, version) {
                compares.push(Compare::create_revision(range.0, CompareOp::Equal, 0).with_range(range.1));
            }
        }
        compares
    }

    /// The Subkey, Score and Stream etcd ranges of `version` of the key whose metadata key is
    /// `metadata_key` (none when it does not decode under the layout).
    fn version_ranges(&self, metadata_key: &[u8], version: Version) -> Vec<(Vec<u8>, Vec<u8>)> {
        let layout = &self.options.layout;
        let Ok(mk) = layout.decode_metadata_key(metadata_key) else { return Vec::new() };
        let Ok(ns_layout) = layout.clone().with_namespace(mk.namespace) else { return Vec::new() };
        let Ok(range) = ns_layout.subkey_range(mk.user_key, version) else { return Vec::new() };
        // Score keys have a prefix of their own in camellia's and TiTea's layouts.
        let Ok(scores) = ns_layout.score_prefix(mk.user_key, version, 0) else { return Vec::new() };
        vec![
            self.etcd_range(ColumnFamily::Subkey, &range),
            self.etcd_range(ColumnFamily::Score, &KeyRange::prefix(scores)),
            self.etcd_range(ColumnFamily::Stream, &range),
        ]
    }

    /// `range` of `cf` as etcd keys `[start, end)`.
    fn etcd_range(&self, cf: ColumnFamily, range: &KeyRange) -> (Vec<u8>, Vec<u8>) {
        let start = self.key(cf, &range.start);
        let end = match &range.end {
            Some(end) => self.key(cf, end),
            None => prefix_successor(&self.key(cf, b"")).unwrap_or_default(),
        };
        (start, end)
    }

    fn commit(&self, batch: WriteBatch, floor: Option<[u8; 8]>) -> Result<()> {
        // etcd refuses two operations on one key in a Txn: keep each key's last one.
        let mut ops: BTreeMap<Vec<u8>, Option<Bytes>> = BTreeMap::new();
        for op in batch.into_ops() {
            match op {
                BatchOp::Put { cf, key, value } => ops.insert(self.key(cf, &key), Some(value)),
                BatchOp::Delete { cf, key } => ops.insert(self.key(cf, &key), None),
            };
        }
        if let Some(floor) = floor {
            ops.insert(self.own_key(FLOOR_KEY), Some(Bytes::copy_from_slice(&floor)));
        }
        let compares = {
            let views = self.views.lock().unwrap_or_else(|e| e.into_inner());
            views.get(&std::thread::current().id()).map(|v| self.compares(v, &ops)).unwrap_or_default()
        };
        let bytes: usize =
            ops.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 8).sum::<usize>()
                + compares.len() * 64;
        // One more operation and compare each: the request record (below), and a compare for
        // a cluster node's fence.
        let limit = self.options.max_txn_ops.saturating_sub(2);
        if ops.len() > limit || compares.len() > limit {
            return Err(err(format!(
                "a batch of {} operations and {} compares (with the request record's) is over the cluster's \
                 --max-txn-ops {}; \
                 a command's batch is atomic and is never split: start etcd with a larger --max-txn-ops",
                ops.len() + 1,
                compares.len() + 1,
                self.options.max_txn_ops
            )));
        }
        if bytes > self.options.max_request_bytes {
            return Err(err(format!(
                "a batch of about {bytes} bytes is over the cluster's --max-request-bytes {}; \
                 a command's batch is atomic and is never split: start etcd with a larger --max-request-bytes",
                self.options.max_request_bytes
            )));
        }
        let mut ops: Vec<TxnOp> = ops
            .into_iter()
            .map(|(key, value)| match value {
                Some(value) => TxnOp::put(key, value.to_vec(), None),
                None => TxnOp::delete(key, None),
            })
            .collect();
        // Exactly once: the batch also writes this thread's request record (the next sequence
        // number) and requires it unchanged since this thread's last applied batch. Sent again
        // after a lost answer, the same Txn applies only if the first did not; and reading the
        // record tells which happened.
        let mut record = self.request_record()?;
        let seq = record.seq + 1;
        let mut compares = compares;
        compares.push(Compare::mod_revision(record.key.clone(), CompareOp::Equal, record.mod_revision));
        compares.extend(self.fence_compare());
        ops.push(TxnOp::put(record.key.clone(), request_value(seq, now_ms()), None));
        let txn = Txn::new().when(compares).and_then(ops);
        let start = std::time::Instant::now();
        let seed = jitter_seed(self.node);
        let mut attempt = 1;
        let mut lost_answer = false;
        loop {
            let sent = self.runtime.block_on({
                let mut kv = self.kv.clone();
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            });
            match sent {
                Ok(response) if response.succeeded() => {
                    let revision = response.header().map_or(0, |h| h.revision());
                    self.set_request_record(RequestRecord { seq, mod_revision: revision, ..record });
                    return Ok(());
                }
                Ok(_) => {
                    // Refused: by a changed read, or because an earlier send of this Txn
                    // applied (or the record was pruned). The record says which.
                    let found = self.get_latest(&record.key)?;
                    if found.as_ref().and_then(|f| request_seq(&f.0)) == Some(seq) {
                        if lost_answer {
                            bump(&self.counters.ambiguous_applied);
                        }
                        record.mod_revision = found.map_or(0, |f| f.1);
                        self.set_request_record(RequestRecord { seq, ..record });
                        return Ok(());
                    }
                    record.mod_revision = found.map_or(0, |f| f.1);
                    self.set_request_record(record);
                    if let Some(fenced) = self.fenced()? {
                        return Err(fenced);
                    }
                    self.with_view(|v| v.refused = true);
                    return Err(Error::Conflict(
                        "etcd: a record the command read changed after it read it".into(),
                    ));
                }
                Err(e)
                    if failure(&e) != Failure::Final
                        && start.elapsed() < self.options.unavailable_timeout =>
                {
                    if failure(&e) == Failure::Unavailable && !lost_answer {
                        lost_answer = true;
                        bump(&self.counters.ambiguous_commits);
                    }
                    bump(&self.counters.unavailable_retries);
                    std::thread::sleep(backoff(attempt, seed, UNAVAILABLE_FIRST_PAUSE_US));
                    attempt += 1;
                }
                Err(e) => return Err(self.map_err(e)),
            }
        }
    }

    /// Deletes request records not rewritten for an hour (threads and nodes that are gone),
    /// each guarded by its `mod_revision`; answers how many.
    ///
    /// # Errors
    /// [`Error::Backend`] when etcd cannot be reached.
    pub fn prune_request_records(&self, now_ms: u64) -> Result<usize> {
        let start = self.own_key(REQUEST_KEY);
        let end = prefix_successor(&start).unwrap_or_default();
        let response = self.request(true, |mut kv| {
            let (start, end) = (start.clone(), end.clone());
            async move { kv.get(start, Some(GetOptions::new().with_range(end))).await }
        })?;
        let mut pruned = 0;
        for kv in response.kvs() {
            let written =
                kv.value().get(8..16).map_or(0, |t| u64::from_be_bytes(t.try_into().unwrap_or_default()));
            if written + REQUEST_RECORD_TTL_MS < now_ms {
                let txn = Txn::new()
                    .when([Compare::mod_revision(kv.key().to_vec(), CompareOp::Equal, kv.mod_revision())])
                    .and_then([TxnOp::delete(kv.key().to_vec(), None)]);
                pruned += usize::from(self.txn(txn)?);
            }
        }
        Ok(pruned)
    }
}

/// A request record's value: the sequence number and the time it was written.
fn request_value(seq: u64, now_ms: u64) -> Vec<u8> {
    let mut value = seq.to_be_bytes().to_vec();
    value.extend_from_slice(&now_ms.to_be_bytes());
    value
}

/// The sequence number in a request record's value.
fn request_seq(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.get(..8)?.try_into().ok()?))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A record's value and `mod_revision`.
fn value_and_revision(kv: etcd_client::KeyValue) -> (Vec<u8>, i64) {
    let mod_revision = kv.mod_revision();
    (kv.into_key_value().1, mod_revision)
}

/// The version of a collection's metadata value (`None` for single-KV types and undecodable
/// values: they own no subkeys).
fn collection_version(layout: &KeyLayout, value: &[u8]) -> Option<Version> {
    layout.decode_metadata(value).ok().filter(|m| !m.ty.is_single_kv()).map(|m| m.version)
}

impl KvBackend for Backend {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        let etcd_key = self.key(cf, key);
        let found = self.get_raw(&etcd_key)?;
        Ok(self.record_point(cf, etcd_key, found))
    }

    /// One read-only `Txn` of point reads per `max_txn_ops` keys, all at one revision.
    fn multi_get(&self, cf: ColumnFamily, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(self.options.max_txn_ops.max(1)) {
            let revision = self.read_revision();
            let etcd_keys: Vec<Vec<u8>> = chunk.iter().map(|k| self.key(cf, k)).collect();
            let reads = etcd_keys
                .iter()
                .map(|k| TxnOp::get(k.clone(), Some(GetOptions::new().with_revision(revision))));
            let txn = Txn::new().and_then(reads.collect::<Vec<_>>());
            let response = self.request(true, |mut kv| {
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            })?;
            if let Some(header) = response.header() {
                self.pin(header.revision());
            }
            for (etcd_key, op) in etcd_keys.into_iter().zip(response.op_responses()) {
                let found = match op {
                    TxnOpResponse::Get(mut get) => get.take_kvs().pop().map(value_and_revision),
                    _ => None,
                };
                out.push(self.record_point(cf, etcd_key, found));
            }
        }
        Ok(out)
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        let (mut start, mut end) = self.etcd_range(cf, range);
        let skip = self.options.prefix.len() + 1;
        let mut page: std::vec::IntoIter<RawPair> = Vec::new().into_iter();
        let mut done = start >= end;
        let mut revision = 0;
        Ok(Box::new(std::iter::from_fn(move || {
            loop {
                if let Some((k, v)) = page.next() {
                    return Some(Ok((Bytes::from(k).slice(skip..), Bytes::from(v))));
                }
                if done {
                    return None;
                }
                let (kvs, more) = match self.page(&start, &end, direction, &mut revision) {
                    Ok(p) => p,
                    Err(e) => {
                        done = true;
                        return Some(Err(e));
                    }
                };
                // The part of the range this page covered, then where the next one starts.
                let covered = match (more, kvs.last(), direction) {
                    (true, Some((last, _)), Direction::Forward) => {
                        let mut next = last.clone();
                        next.push(0);
                        (std::mem::replace(&mut start, next.clone()), next)
                    }
                    (true, Some((last, _)), Direction::Reverse) => {
                        (last.clone(), std::mem::replace(&mut end, last.clone()))
                    }
                    _ => {
                        done = true;
                        (start.clone(), end.clone())
                    }
                };
                self.with_view(|v| v.ranges.push(covered));
                page = kvs.into_iter();
            }
        })))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.floor.write(batch, |batch, floor| self.commit(batch, floor))
    }

    fn stamp(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<u64>> {
        let etcd_key = self.key(cf, key);
        let revision = self.get_raw(&etcd_key)?.map_or(0, |found| found.1);
        self.with_view(|v| v.points.insert(etcd_key, revision));
        Ok(Some(revision as u64))
    }

    fn begin(&self) {
        let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        views.insert(std::thread::current().id(), View::default());
    }

    /// Several server nodes write one etcd cluster.
    fn is_shared(&self) -> bool {
        true
    }

    fn finish(&self) -> bool {
        let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        views.remove(&std::thread::current().id()).is_some_and(|v| v.refused)
    }

    /// Conflicts (nodes writing one hot key) are retried until [`Options::conflict_timeout`],
    /// with growing, jittered pauses.
    fn retry_pause(&self, attempt: u32, elapsed: Duration) -> Option<Duration> {
        bump(&self.counters.conflict_retries);
        (elapsed < self.options.conflict_timeout)
            .then(|| backoff(attempt, jitter_seed(self.node), CONFLICT_FIRST_PAUSE_US))
    }
}

/// One node's share of garbage collection and active expiry over etcd (which has no
/// compaction filter): call [`Maintenance::step`] on a timer (e.g. every 100 ms).
#[derive(Debug)]
pub struct Maintenance {
    collector: Collector,
    sweep: ExpirySweep,
    lease: Duration,
}

/// What one [`Maintenance::step`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MaintenanceStep {
    /// Whether this node held the lease (otherwise it did nothing).
    pub leader: bool,
    /// The expiry sweep's step.
    pub expired: SweepStep,
    /// The collector's step.
    pub collected: CollectStep,
}

impl Maintenance {
    /// A collector and expiry sweep over every namespace under `layout`'s fixed prefix, with
    /// the collector's grace period after expiry; the lease lasts `lease` past each step (a
    /// node that stops stepping hands over after that).
    pub fn new(layout: &KeyLayout, grace_ms: u64, lease: Duration) -> Self {
        Maintenance {
            collector: Collector::new(layout, grace_ms),
            sweep: ExpirySweep::new(KeyRange::prefix(layout.fixed_prefix().to_vec())),
            lease,
        }
    }

    /// If this node holds (or can take) the maintenance lease in `etcd`: one expiry step over
    /// at most `budget` metadata records (expired keys deleted under their key locks,
    /// re-checked in a guarded `Txn`), then one collector step over at most `budget`
    /// Subkey/Score records. `engine` runs over `etcd` (directly, or as the server's shared
    /// `Arc<dyn KvBackend>`).
    ///
    /// # Errors
    /// etcd errors and conflicts; nothing half-done: each step deleted all it found or nothing.
    pub fn step<B: KvBackend>(
        &mut self,
        etcd: &Backend,
        engine: &Engine<B>,
        budget: usize,
    ) -> Result<MaintenanceStep> {
        let now = engine.now_ms();
        if !etcd.hold_maintenance_lease(now, self.lease)? {
            return Ok(MaintenanceStep::default());
        }
        if self.sweep.is_done() {
            // Once per pass over the keyspace: drop request records of threads that are gone.
            etcd.prune_request_records(now)?;
            self.sweep = ExpirySweep::new(KeyRange::prefix(engine.layout().fixed_prefix().to_vec()));
        }
        let expired = gc::expire_step(engine, &mut self.sweep, now, budget)?;
        let collected = self.collector.step(engine.backend(), now, budget)?;
        Ok(MaintenanceStep { leader: true, expired, collected })
    }
}
