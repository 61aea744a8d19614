//! The store under every namespace's engine: in memory, or a directory on disk (fjall by
//! default, RocksDB with the `rocksdb` feature), chosen at start by `--engine`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rediskv::{ColumnFamily, KeyLayout};
use rediskv::{KvBackend, MemoryBackend, MetadataCache};
use rediskv_engine::{DiskBackend, GroupCommit, Options, Sync, server_files};

/// Any backend, shared between threads. One vtable call per store access costs a few
/// nanoseconds beside a B-tree or LSM lookup, and lets one server binary serve every engine.
pub type Backend = Arc<dyn KvBackend + Send + std::marker::Sync>;

/// The engines `--engine` accepts.
pub const ENGINES: &[&str] = match (cfg!(feature = "rocksdb"), cfg!(feature = "etcd")) {
    (true, true) => &["memory", "fjall", "rocksdb", "etcd"],
    (true, false) => &["memory", "fjall", "rocksdb"],
    (false, true) => &["memory", "fjall", "etcd"],
    (false, false) => &["memory", "fjall"],
};

/// What a disk engine may keep in memory (`--cache-size`, `--write-buffer-size`, in bytes,
/// or with Redis' units: `64mb`).
#[derive(Debug, Clone, Copy)]
pub struct DiskMemory {
    /// The block cache's capacity ([`rediskv_engine::DEFAULT_CACHE_BYTES`]).
    pub cache_bytes: u64,
    /// The most all memtables together hold before they are flushed
    /// ([`rediskv_engine::DEFAULT_WRITE_BUFFER_BYTES`]).
    pub write_buffer_bytes: u64,
}

impl Default for DiskMemory {
    fn default() -> Self {
        DiskMemory {
            cache_bytes: rediskv_engine::DEFAULT_CACHE_BYTES,
            write_buffer_bytes: rediskv_engine::DEFAULT_WRITE_BUFFER_BYTES,
        }
    }
}

/// How to reach an etcd cluster (`--etcd-endpoints a,b,c`, `--etcd-prefix`, the limits the
/// cluster was started with: `--etcd-max-txn-ops`, `--etcd-max-request-bytes`, how long to
/// wait for it: `--etcd-quorum-timeout`, `--etcd-conflict-timeout`, in milliseconds, and TLS
/// to `https://` endpoints: `--etcd-ca-cert-file`, `--etcd-cert-file`, `--etcd-key-file`).
#[derive(Debug, Clone, Default)]
#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
pub struct EtcdFlags {
    /// Client URLs, comma-separated.
    pub endpoints: Option<String>,
    /// The key prefix every record goes under.
    pub prefix: Option<String>,
    /// The cluster's `--max-txn-ops`.
    pub max_txn_ops: Option<usize>,
    /// The cluster's `--max-request-bytes`.
    pub max_request_bytes: Option<usize>,
    /// Milliseconds a request waits for a quorum before the client gets an error.
    pub quorum_timeout_ms: Option<usize>,
    /// Milliseconds a command refused by write conflicts is retried before the client gets
    /// the conflict error.
    pub conflict_timeout_ms: Option<usize>,
    /// The CA of the members' certificates (PEM).
    pub ca_cert_file: Option<String>,
    /// The client certificate for members that check clients' (PEM).
    pub cert_file: Option<String>,
    /// Its private key (PEM).
    pub key_file: Option<String>,
    /// `--cluster-etcd-store a,b,c`, once per etcd cluster holding data (in slot order):
    /// a cluster node's data is spread over them by slot range (`rediskv_etcd::SlotStores`);
    /// none: the data is in the `endpoints` cluster with the slot table.
    pub stores: Vec<String>,
}

/// A disk store's metadata cache.
type DiskCache = MetadataCache<Arc<dyn DiskBackend + Send + std::marker::Sync>>;

/// A disk store's key filter is sized for twice the metadata records its engine counts
/// ([`DiskBackend::approximate_records`]; else one for every this many bytes of its metadata
/// tables, about what a record compresses to), and for at least [`KEY_FILTER_MIN_KEYS`]; it
/// grows with the store up to [`KEY_FILTER_MAX_BYTES`] in all.
const KEY_FILTER_TABLE_BYTES_PER_KEY: u64 = 16;
/// See [`KEY_FILTER_TABLE_BYTES_PER_KEY`].
const KEY_FILTER_MIN_KEYS: u64 = 1 << 20;
/// See [`KEY_FILTER_TABLE_BYTES_PER_KEY`].
const KEY_FILTER_MAX_BYTES: u64 = 64 << 20;

/// The opened store.
pub enum Store {
    /// Everything in one process' memory: gone at exit.
    Memory(Arc<MemoryBackend>),
    /// A directory written by an on-disk engine.
    Disk {
        /// `fjall` or `rocksdb`.
        engine: &'static str,
        /// The directory.
        dir: PathBuf,
        /// The backend, for its disk-only operations.
        disk: Arc<dyn DiskBackend + Send + std::marker::Sync>,
        /// The same backend as a [`KvBackend`].
        kv: Backend,
        /// `kv`'s metadata cache, for its key filter's figures.
        cache: Arc<DiskCache>,
        /// The `appendfsync` policy it was opened with.
        sync: Sync,
        /// The slot whose writes `kv` refuses (a cluster node handing it to another).
        #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
        closed: Arc<ClosedSlot>,
        /// The stream position the next writes stand at ([`Store::stamp_writes`]), for the
        /// files beside the data too.
        stamp: std::sync::Mutex<Option<String>>,
    },
    /// A prefix in an etcd cluster, shared with other server nodes.
    #[cfg(feature = "etcd")]
    Etcd {
        /// The cluster of `--etcd-endpoints`, for its leases and a cluster's slot table.
        etcd: Arc<rediskv_etcd::Backend>,
        /// The clusters holding the data, in slot order (`etcd` alone unless
        /// `--cluster-etcd-store` names others), for their fences and change feeds.
        data: Vec<Arc<rediskv_etcd::Backend>>,
        /// The data clusters as one [`KvBackend`].
        kv: Backend,
    },
}

impl Store {
    /// Opens `engine` (`memory`, `fjall` or `rocksdb`); a disk engine opens (creating it if
    /// needed) directory `dir` with the `appendfsync` policy and the `memory` bounds.
    ///
    /// # Errors
    /// An unknown engine, a directory that cannot be created, or the engine's refusal to
    /// open it (another layout, a corrupt record), as a message for the operator.
    pub fn open(
        engine: &str,
        dir: &Path,
        appendfsync: &str,
        memory: DiskMemory,
        etcd: &EtcdFlags,
        layout: &KeyLayout,
    ) -> Result<Store, String> {
        let sync = match appendfsync {
            "always" => Sync::Always,
            "no" => Sync::No,
            _ => Sync::Everysec,
        };
        // Group commit: the event loops hand the journal to the OS once per batch of replies,
        // and the batches of a round reach the engine as one ([`GroupCommit`]).
        let options = Options {
            sync,
            group_commit: true,
            layout: layout.clone(),
            cache_bytes: memory.cache_bytes,
            write_buffer_bytes: memory.write_buffer_bytes,
            ..Options::default()
        };
        let create =
            || std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()));
        let (engine, disk): (&'static str, Arc<dyn DiskBackend + Send + std::marker::Sync>) = match engine {
            "memory" => return Ok(Store::Memory(Arc::new(MemoryBackend::new()))),
            "fjall" => {
                create()?;
                (
                    "fjall",
                    Arc::new(GroupCommit::new(rediskv_fjall::open(dir, options).map_err(|e| e.to_string())?)),
                )
            }
            #[cfg(feature = "rocksdb")]
            "rocksdb" => {
                create()?;
                let rocksdb = rediskv_rocksdb::open(dir, options).map_err(|e| e.to_string())?;
                ("rocksdb", Arc::new(GroupCommit::new(rocksdb)))
            }
            #[cfg(feature = "etcd")]
            "etcd" => return open_etcd(etcd, layout),
            #[cfg(not(feature = "etcd"))]
            "etcd" => {
                return Err(format!(
                    "this build has no etcd engine: build with --features etcd ({etcd:?}, {:?})",
                    layout.kind()
                ));
            }
            other => {
                return Err(format!("unknown engine '{other}' (this build has: {})", ENGINES.join(", ")));
            }
        };
        // Every write goes through `kv`, and no other process writes the directory: its
        // metadata records can be kept in memory, and which keys it holds.
        let records = disk.approximate_records(ColumnFamily::Metadata);
        let keys =
            records.unwrap_or(disk.disk_bytes(ColumnFamily::Metadata) / KEY_FILTER_TABLE_BYTES_PER_KEY) * 2;
        let cache = Arc::new(MetadataCache::with_key_filter(
            disk.clone(),
            keys.max(KEY_FILTER_MIN_KEYS),
            KEY_FILTER_MAX_BYTES,
        ));
        let filling = cache.clone();
        let unfilled = |e: &dyn std::fmt::Display| {
            crate::log::warning!("Key filter not filled, every read of a key goes to the store: {e}");
        };
        let spawned = std::thread::Builder::new().name("key-filter".into()).spawn(move || {
            let started = std::time::Instant::now();
            match filling.fill_key_filter() {
                Ok(n) if started.elapsed() > std::time::Duration::from_secs(1) => {
                    crate::log::notice!(
                        "Key filter: {n} keys read in {:.1} s",
                        started.elapsed().as_secs_f64()
                    );
                }
                Ok(_) => {}
                Err(e) => unfilled(&e),
            }
        });
        if let Err(e) = spawned {
            unfilled(&e);
        }
        let closed = Arc::new(ClosedSlot::default());
        let kv: Backend = Arc::new(SlotGuard { inner: cache.clone(), closed: closed.clone() });
        Ok(Store::Disk {
            engine,
            dir: dir.to_path_buf(),
            disk,
            kv,
            cache,
            sync,
            closed,
            stamp: Default::default(),
        })
    }

    /// The key filter's size in bytes and whether it answers (see
    /// [`MetadataCache::with_key_filter`]); `None` without one.
    pub fn key_filter(&self) -> Option<(usize, bool)> {
        match self {
            Store::Disk { cache, .. } => cache.key_filter(),
            _ => None,
        }
    }

    /// The backend every engine of the server reads and writes.
    pub fn backend(&self) -> Backend {
        match self {
            Store::Memory(m) => m.clone(),
            Store::Disk { kv, .. } => kv.clone(),
            #[cfg(feature = "etcd")]
            Store::Etcd { kv, .. } => kv.clone(),
        }
    }

    /// The slot whose writes a disk store refuses while it is handed to another node
    /// (`None`: the store keeps no data of its own, or not on disk).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub fn closed_slot(&self) -> Option<&Arc<ClosedSlot>> {
        match self {
            Store::Disk { closed, .. } => Some(closed),
            _ => None,
        }
    }

    /// The etcd backend of `--etcd-endpoints`, when the store is over etcd.
    #[cfg(feature = "etcd")]
    pub fn etcd(&self) -> Option<&Arc<rediskv_etcd::Backend>> {
        match self {
            Store::Etcd { etcd, .. } => Some(etcd),
            _ => None,
        }
    }

    /// The etcd clusters holding the data, in slot order (none: not over etcd).
    #[cfg(feature = "etcd")]
    pub fn etcd_data(&self) -> &[Arc<rediskv_etcd::Backend>] {
        match self {
            Store::Etcd { data, .. } => data,
            _ => &[],
        }
    }

    /// Whether other server nodes share this store (SWAPDB's mapping is per node, so it is
    /// refused then).
    pub fn shared(&self) -> bool {
        !matches!(self, Store::Memory(_) | Store::Disk { .. })
    }

    /// The engine's name, for INFO.
    pub fn name(&self) -> &'static str {
        match self {
            Store::Memory(_) => "memory",
            Store::Disk { engine, .. } => engine,
            #[cfg(feature = "etcd")]
            Store::Etcd { .. } => "etcd",
        }
    }

    /// The data directory (`None` in memory).
    pub fn dir(&self) -> Option<&Path> {
        match self {
            Store::Disk { dir, .. } => Some(dir),
            _ => None,
        }
    }

    /// Whether the store keeps a replica's stream position with its data (the disk engines
    /// that implement [`DiskBackend::set_position`]).
    pub fn keeps_position(&self) -> bool {
        matches!(self, Store::Disk { .. })
    }

    /// Every later write also records `position` in its batch ([`DiskBackend::stamp_writes`]),
    /// and so does every file saved beside the data ([`Store::save_db_slots`],
    /// [`Store::save_functions`]), without its file changes.
    pub fn stamp_writes(&self, position: Option<&crate::replication::StreamPosition>) {
        if let Store::Disk { disk, stamp, .. } = self {
            disk.stamp_writes(position.map(|p| p.to_string().into_bytes()));
            *crate::sync::lock(stamp) = position.map(|p| p.plain().to_string());
        }
    }

    /// Records `position` now (`None`: forgets the stored one), and with every later write;
    /// the files beside the data forget theirs.
    ///
    /// # Errors
    /// The engine's write failed.
    pub fn set_position(&self, position: Option<&crate::replication::StreamPosition>) -> Result<(), String> {
        self.store_position(position)?;
        match self {
            Store::Disk { dir, .. } => server_files::forget_positions(dir).map_err(|e| e.to_string()),
            _ => Ok(()),
        }
    }

    /// Records `position` now (`None`: forgets the stored one), and with every later write;
    /// the files beside the data keep theirs.
    ///
    /// # Errors
    /// The engine's write failed.
    pub fn store_position(
        &self,
        position: Option<&crate::replication::StreamPosition>,
    ) -> Result<(), String> {
        if let Store::Disk { disk, .. } = self {
            disk.set_position(position.map(|p| p.to_string().into_bytes())).map_err(|e| e.to_string())?;
            self.stamp_writes(position);
        }
        Ok(())
    }

    /// The stream position the data stands at, if stored (and readable): the newest of the
    /// one in the store's batches and those of the files beside it (a SWAPDB or FUNCTION
    /// change the stream made after the store's last write).
    pub fn position(&self) -> Option<crate::replication::StreamPosition> {
        let Store::Disk { dir, .. } = self else { return None };
        let stored = self.stored_position()?;
        let parse = |text: &str| text.parse::<crate::replication::StreamPosition>().ok();
        std::iter::once(stored.plain())
            .chain(server_files::positions(dir).iter().filter_map(|p| parse(p)))
            .max_by_key(|p| p.offset)
    }

    /// The position the store's batches carry, with a transaction's file changes if its
    /// batch is the last one written.
    fn stored_position(&self) -> Option<crate::replication::StreamPosition> {
        let Store::Disk { disk, .. } = self else { return None };
        String::from_utf8(disk.position().ok()??).ok()?.parse().ok()
    }

    /// The position of a transaction whose keys' batch is stored while the files beside the
    /// data may not hold all its changes: the store's batches carry its file changes and no
    /// file was written after it (files are written in stream order, so one written later
    /// means the transaction's were all written).
    pub fn unsettled_position(&self) -> Option<crate::replication::StreamPosition> {
        let Store::Disk { dir, .. } = self else { return None };
        let stored = self.stored_position().filter(|p| p.file_changes.is_some())?;
        let parse = |text: &str| text.parse::<crate::replication::StreamPosition>().ok();
        let later_file =
            server_files::positions(dir).iter().filter_map(|p| parse(p)).any(|p| p.offset > stored.offset);
        (!later_file).then_some(stored)
    }

    /// The stream position of a file saved now: the stamp, once the writes before it are
    /// persisted (the file must not hold a position the store's data has not reached).
    fn file_position(&self) -> std::io::Result<Option<String>> {
        let Store::Disk { stamp, .. } = self else { return Ok(None) };
        let position = crate::sync::lock(stamp).clone();
        if position.is_some() {
            self.persist_written().map_err(std::io::Error::other)?;
            crash_point("REDISKV_CRASH_BEFORE_FILE");
        }
        Ok(position)
    }

    /// Saves a namespace's database → namespace mapping after a SWAPDB beside a disk
    /// store's data ([`rediskv_engine::server_files`]), with the stream position it stands
    /// at on a replica.
    ///
    /// # Errors
    /// The file could not be written.
    pub fn save_db_slots(&self, ns: &str, slots: &[usize]) -> std::io::Result<()> {
        let Some(dir) = self.dir() else { return Ok(()) };
        server_files::save_db_slots(dir, ns, slots, self.file_position()?.as_deref())
    }

    /// Saves the function libraries' code (FUNCTION LOAD/DELETE/FLUSH/RESTORE) beside a
    /// disk store's data ([`rediskv_engine::server_files`]), with the stream position it
    /// stands at on a replica; the memory store keeps nothing, as Redis without
    /// persistence. The file is synced first only under `appendfsync always`: otherwise it
    /// reaches the OS, as the engine's writes do.
    ///
    /// # Errors
    /// The file could not be written.
    pub fn save_functions(&self, codes: &[String]) -> std::io::Result<()> {
        let always = matches!(self, Store::Disk { sync: Sync::Always, .. });
        let Some(dir) = self.dir() else { return Ok(()) };
        server_files::save_functions(dir, codes, self.file_position()?.as_deref(), always)
    }

    /// The libraries [`Store::save_functions`] saved, if any.
    pub fn load_functions(&self) -> Option<Vec<String>> {
        server_files::load_functions(self.dir()?)
    }

    /// The mapping [`Store::save_db_slots`] saved, if any.
    pub fn load_db_slots(&self, ns: &str) -> Option<Vec<usize>> {
        server_files::load_db_slots(self.dir()?, ns)
    }

    /// Bytes the store holds in this process' memory (what `maxmemory` limits, with the
    /// connections' buffers): the memory backend's data; a disk engine's memtables, block
    /// cache in use and pinned blocks, and the metadata cache with its key filter (the
    /// table files on disk are not counted).
    pub fn used_bytes(&self) -> u64 {
        match self {
            Store::Memory(m) => m.bytes(),
            Store::Disk { disk, cache, .. } => disk.memory_bytes() + cache.bytes(),
            #[cfg(feature = "etcd")]
            Store::Etcd { .. } => 0,
        }
    }

    /// Where a disk engine's bytes are; `None` for the memory and etcd stores.
    pub fn disk_usage(&self) -> Option<rediskv_engine::Usage> {
        match self {
            Store::Disk { disk, .. } => Some(disk.usage()),
            _ => None,
        }
    }

    /// A handle that syncs the store from another thread (BGSAVE): the disk engines' flush.
    pub fn syncer(&self) -> impl FnOnce() -> Result<(), String> + Send + 'static {
        let disk = match self {
            Store::Disk { disk, .. } => Some(disk.clone()),
            _ => None,
        };
        move || disk.map_or(Ok(()), |d| d.flush().map_err(|e| e.to_string()))
    }

    /// Whether `maxmemory` applies: to the stores this process holds (not to etcd's, whose
    /// memory is the cluster's).
    pub fn limits_memory(&self) -> bool {
        matches!(self, Store::Memory(_) | Store::Disk { .. })
    }

    /// Whether the data lives only in this process (the memory store): `save` points and
    /// SHUTDOWN write a `dump.rdb` for it, as Redis does.
    pub fn in_memory(&self) -> bool {
        matches!(self, Store::Memory(_))
    }

    /// Whether the store drops garbage by itself (a compaction filter on `gc::decide`); the
    /// memory store needs the server's incremental collector.
    pub fn collects_itself(&self) -> bool {
        matches!(self, Store::Disk { .. })
    }

    /// Syncs every write to disk (SAVE, shutdown); nothing to do in memory.
    ///
    /// # Errors
    /// The engine's sync failed.
    pub fn sync(&self) -> Result<(), String> {
        match self {
            Store::Disk { disk, .. } => disk.flush().map_err(|e| e.to_string()),
            _ => Ok(()), // memory keeps nothing; etcd acknowledged every commit durably
        }
    }

    /// Starts (`true`) or ends a bulk load into the emptied store ([`DiskBackend::bulk_load`]):
    /// ending one syncs it.
    ///
    /// # Errors
    /// The engine's sync failed.
    pub fn bulk_load(&self, on: bool) -> Result<(), String> {
        match self {
            Store::Disk { disk, .. } => disk.bulk_load(on).map_err(|e| e.to_string()),
            _ => Ok(()),
        }
    }

    /// Hands every write so far to the OS (group commit): called before replies are written,
    /// so whatever a reply acknowledges or shows survives a killed process.
    ///
    /// # Errors
    /// The engine's write to the OS failed.
    pub fn persist_written(&self) -> Result<(), String> {
        match self {
            Store::Disk { disk, .. } => disk.persist_written().map_err(|e| e.to_string()),
            _ => Ok(()),
        }
    }

    /// Queues a [`Store::persist_written`] (see [`DiskBackend::persist_async`]): true when
    /// `done` will be called with the result, after [`Store::start_persist`] or
    /// [`Store::persist_queued`]; false (nothing called) when the caller must persist
    /// itself — no writer thread (memory, etcd), or nothing to wait for.
    pub fn persist_async(&self, done: impl FnOnce(Result<(), String>) + Send + 'static) -> bool {
        match self {
            Store::Disk { disk, .. } => {
                disk.persist_async(Box::new(move |result| done(result.map_err(|e| e.to_string())))).is_ok()
            }
            _ => false,
        }
    }

    /// Hands what [`Store::persist_async`] queued to the disk engine's writer thread.
    pub fn start_persist(&self) {
        if let Store::Disk { disk, .. } = self {
            disk.start_persist();
        }
    }

    /// Persists what [`Store::persist_async`] queued on this thread.
    pub fn persist_queued(&self) {
        if let Store::Disk { disk, .. } = self {
            disk.persist_queued();
        }
    }

    /// Brings a disk store back to what its directory holds after a failed write (see
    /// [`DiskBackend::reopen`]) and forgets the metadata records kept in memory; nothing to
    /// do in memory or over etcd. Call it while no command runs.
    ///
    /// # Errors
    /// The directory could not be opened again.
    pub fn reopen(&self) -> Result<(), String> {
        match self {
            Store::Disk { disk, cache, .. } => {
                let reopened = disk.reopen().map_err(|e| e.to_string());
                cache.forget();
                reopened
            }
            _ => Ok(()),
        }
    }

    /// Whether the OS takes writes in a disk store's directory: a file of [`PROBE_BYTES`]
    /// written and synced there, then deleted. `Ok` in memory and over etcd.
    ///
    /// # Errors
    /// The OS' error.
    pub fn probe_directory(&self) -> Result<(), String> {
        let Some(dir) = self.dir() else { return Ok(()) };
        let path = dir.join("rediskv-write-probe");
        let written = (|| {
            use std::io::Write;
            let mut file = std::fs::File::create(&path)?;
            file.write_all(&[0; PROBE_BYTES])?;
            file.sync_data()
        })();
        let _ = std::fs::remove_file(&path);
        written.map_err(|e| e.to_string())
    }

    /// Flushes memtables and compacts fully, the compaction filter dropping garbage (DEBUG
    /// COMPACT); nothing to do in memory.
    ///
    /// # Errors
    /// The engine's compaction failed.
    pub fn compact(&self) -> Result<(), String> {
        match self {
            Store::Disk { disk, .. } => disk.compact().map_err(|e| e.to_string()),
            _ => Ok(()),
        }
    }
}

/// The bytes [`Store::probe_directory`] writes: room for a few commands' batches.
const PROBE_BYTES: usize = 64 * 1024;

/// The OS' words for the error an engine's `message` carries (`No space left on device` of
/// `… No space left on device (os error 28)` or of `Io(Os { code: 28, … })`), as C's
/// `strerror` gives them; `None` when it carries no OS error.
pub fn os_words(message: &str) -> Option<String> {
    let code = |marker: &str, end: char| -> Option<i32> {
        let (_, rest) = message.rsplit_once(marker)?;
        rest.split_once(end)?.0.parse().ok()
    };
    let code = code("(os error ", ')').or_else(|| code("Os { code: ", ','))?;
    let text = std::io::Error::from_raw_os_error(code).to_string();
    Some(text.strip_suffix(&format!(" (os error {code})")).unwrap_or(&text).to_string())
}

/// Whether the store takes writes: Redis' `aof_last_write_status`. A failed persist of a
/// round's writes sets it, the retry that finds writing works again clears it; each failure
/// counts, so that a round that began before one does not acknowledge what ran in it.
#[derive(Debug, Default)]
pub struct WriteStatus {
    failing: std::sync::atomic::AtomicBool,
    failures: std::sync::atomic::AtomicU64,
    /// The refusal written commands get while it fails, and whether the engine still needs
    /// reopening.
    state: std::sync::Mutex<(String, bool)>,
}

impl WriteStatus {
    /// Whether writes are refused (Redis' `aof_last_write_status:err`).
    pub fn failing(&self) -> bool {
        self.failing.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Failures so far: a round whose persist succeeded acknowledges its replies only if no
    /// failure came since it began.
    pub fn failures(&self) -> u64 {
        self.failures.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The error write commands get while [`WriteStatus::failing`]: Redis' words for its AOF,
    /// which our engine's journal is.
    pub fn refusal(&self) -> String {
        format!("MISCONF Errors writing to the AOF file: {}", self.lock().0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (String, bool)> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a failure with the OS' words for it (`reason`); logs it when writes were
    /// taken until now. The engine then needs reopening ([`WriteStatus::reopened`]).
    pub fn failed(&self, reason: String) {
        let mut state = self.lock();
        self.failures.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        if !self.failing.swap(true, std::sync::atomic::Ordering::AcqRel) {
            crate::log::warning!(
                "Error writing to the store's journal (the AOF): {reason}; write commands are refused until it takes writes again"
            );
        }
        *state = (reason, true);
    }

    /// A retry failed for `reason`: the refusal names it.
    pub fn still_failing(&self, reason: String) {
        self.lock().0 = reason;
    }

    /// Whether the engine waits to be reopened after a failure.
    pub fn needs_reopen(&self) -> bool {
        self.lock().1
    }

    /// The engine was reopened.
    pub fn reopened(&self) {
        self.lock().1 = false;
    }

    /// Writing works again: logs it once.
    pub fn recovered(&self) {
        let _state = self.lock();
        if self.failing.swap(false, std::sync::atomic::Ordering::AcqRel) {
            crate::log::warning!("AOF write error looks solved: the store's journal takes writes again.");
        }
    }
}

/// Connects to the etcd cluster `flags` name to keep a cluster's slot table there (the
/// data is elsewhere).
///
/// # Errors
/// etcd cannot be reached, or its prefix holds another store's layout.
#[cfg(feature = "etcd")]
pub fn open_topology(flags: &EtcdFlags) -> Result<Arc<rediskv_etcd::Backend>, String> {
    connect_etcd(flags, endpoints(flags)?, &KeyLayout::default())
}

/// `--etcd-endpoints`.
#[cfg(feature = "etcd")]
fn endpoints(flags: &EtcdFlags) -> Result<&str, String> {
    Ok(flags.endpoints.as_deref().ok_or("--engine etcd needs --etcd-endpoints http://host:port,…")?)
}

/// Connects to the etcd cluster `flags` name and to the data clusters they list.
#[cfg(feature = "etcd")]
fn open_etcd(flags: &EtcdFlags, layout: &KeyLayout) -> Result<Store, String> {
    let etcd = connect_etcd(flags, endpoints(flags)?, layout)?;
    if flags.stores.is_empty() {
        let kv: Backend = etcd.clone();
        return Ok(Store::Etcd { data: vec![etcd.clone()], etcd, kv });
    }
    let data = flags
        .stores
        .iter()
        .map(|endpoints| connect_etcd(flags, endpoints, layout))
        .collect::<Result<Vec<_>, _>>()?;
    let kv: Backend = match &data[..] {
        [one] => one.clone(),
        _ => {
            Arc::new(rediskv_etcd::SlotStores::new(data.clone(), layout.clone()).map_err(|e| e.to_string())?)
        }
    };
    Ok(Store::Etcd { etcd, data, kv })
}

/// Connects to the etcd cluster at `endpoints` (comma-separated) with the other `flags`.
#[cfg(feature = "etcd")]
fn connect_etcd(
    flags: &EtcdFlags,
    endpoints: &str,
    layout: &KeyLayout,
) -> Result<Arc<rediskv_etcd::Backend>, String> {
    let mut options =
        rediskv_etcd::Options::new(endpoints.split(',').map(str::trim).filter(|e| !e.is_empty()));
    options.layout = layout.clone();
    if let Some(prefix) = &flags.prefix {
        options.prefix = prefix.as_bytes().to_vec();
    }
    if let Some(n) = flags.max_txn_ops {
        options.max_txn_ops = n;
    }
    if let Some(n) = flags.max_request_bytes {
        options.max_request_bytes = n;
    }
    if let Some(ms) = flags.quorum_timeout_ms {
        options.unavailable_timeout = std::time::Duration::from_millis(ms as u64);
    }
    if let Some(ms) = flags.conflict_timeout_ms {
        options.conflict_timeout = std::time::Duration::from_millis(ms as u64);
    }
    options.tls = etcd_tls(flags, &options.endpoints)?;
    Ok(Arc::new(rediskv_etcd::open(options).map_err(|e| format!("etcd at {endpoints}: {e}"))?))
}

/// TLS to the members: needed by `https://` endpoints, refused with `http://` ones.
#[cfg(feature = "etcd")]
fn etcd_tls(flags: &EtcdFlags, endpoints: &[String]) -> Result<Option<rediskv_etcd::Tls>, String> {
    let https = endpoints.iter().filter(|e| e.starts_with("https://")).count();
    let identity = match (&flags.cert_file, &flags.key_file) {
        (Some(cert), Some(key)) => Some((cert.into(), key.into())),
        (None, None) => None,
        _ => return Err("--etcd-cert-file and --etcd-key-file go together".into()),
    };
    match &flags.ca_cert_file {
        None if https > 0 => Err("https:// etcd endpoints need --etcd-ca-cert-file".into()),
        None if identity.is_some() => Err("--etcd-cert-file needs --etcd-ca-cert-file".into()),
        None => Ok(None),
        Some(_) if https < endpoints.len() => {
            Err("with --etcd-ca-cert-file every etcd endpoint is https://".into())
        }
        Some(ca) => Ok(Some(rediskv_etcd::Tls { ca_file: ca.into(), identity })),
    }
}

/// What keeps a cluster node over a disk engine from committing to slots that may no longer
/// be its own: the slot it is handing to another node (from the moment the node closes it
/// until the new owner takes it, commands routed to it commit nothing), and its etcd lease
/// (once the lease may have run out, another node may hold its slots: commands routed to
/// any slot commit nothing until the node has registered again and read the table, and
/// from then on only commands routed by that table or a newer one).
#[derive(Debug)]
pub struct ClosedSlot {
    /// `u32::MAX`: none.
    slot: std::sync::atomic::AtomicU32,
    /// Milliseconds since [`lease_clock`]'s start until which the lease surely holds;
    /// `u64::MAX`: no lease to keep (a node alone, or over the etcd engine).
    lease_until_ms: std::sync::atomic::AtomicU64,
    /// The revision of the table the node read under its current lease: a command routed
    /// by an older table (read under a lease that may have run out) commits nothing.
    table_floor: std::sync::atomic::AtomicI64,
}

impl Default for ClosedSlot {
    fn default() -> Self {
        ClosedSlot {
            slot: std::sync::atomic::AtomicU32::new(u32::MAX),
            lease_until_ms: std::sync::atomic::AtomicU64::new(u64::MAX),
            table_floor: std::sync::atomic::AtomicI64::new(0),
        }
    }
}

/// Milliseconds on a monotonic clock (it keeps counting while the process is stopped).
fn lease_clock() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_millis() as u64
}

impl ClosedSlot {
    /// The slot closed now, if any.
    pub fn get(&self) -> Option<u16> {
        u16::try_from(self.slot.load(std::sync::atomic::Ordering::SeqCst)).ok()
    }

    /// Closes `slot` (`None`: opens every slot).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub fn set(&self, slot: Option<u16>) {
        self.slot.store(slot.map_or(u32::MAX, u32::from), std::sync::atomic::Ordering::SeqCst);
    }

    /// The node's lease holds until `until` (`None`: it may have run out already).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub fn lease_holds_until(&self, until: Option<std::time::Instant>) {
        let now = std::time::Instant::now();
        let ms = until.map_or(0, |u| lease_clock() + u.saturating_duration_since(now).as_millis() as u64);
        self.lease_until_ms.store(ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// The node's new lease holds until `until`, and the table it read under it is at
    /// revision `table`: commands routed by an older table still commit nothing.
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub fn lease_granted(&self, table: i64, until: std::time::Instant) {
        // The floor first: a commit that sees the new lease sees it too.
        self.table_floor.fetch_max(table, std::sync::atomic::Ordering::SeqCst);
        self.lease_holds_until(Some(until));
    }

    /// Whether a commit routed to `slot` by the table at `revision` must be refused.
    fn refuses(&self, slot: u16, revision: i64) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        // The lease before the floor (stored in the other order by `lease_granted`).
        self.get() == Some(slot)
            || lease_clock() >= self.lease_until_ms.load(SeqCst)
            || revision < self.table_floor.load(SeqCst)
    }
}

thread_local! {
    /// The slot of the command the calling thread runs (cluster mode) and the revision of
    /// the table it was routed by, set when it is routed.
    static ROUTED: std::cell::Cell<Option<(u16, i64)>> = const { std::cell::Cell::new(None) };
}

/// Records the slot the calling thread's next commits belong to (`None`: no slot's) and the
/// revision of the table they were routed by.
pub fn route_writes(slot: Option<u16>, revision: i64) {
    ROUTED.with(|r| r.set(slot.map(|slot| (slot, revision))));
}

/// Words in the error of a commit refused because its slot was closed (it is being handed
/// to another node) or the node's lease may have run out.
pub const SLOT_CLOSED: &str = "the slot is being handed to another node";

/// A disk store that refuses the commits of commands routed to its [`ClosedSlot`], or to any
/// slot while the node's lease may have run out or by a table read under an earlier lease.
/// A commit runs under its keys' locks, so once a node closed the slot and waited for the
/// keyspace lock, no commit of the slot can follow.
struct SlotGuard {
    inner: Arc<DiskCache>,
    closed: Arc<ClosedSlot>,
}

impl KvBackend for SlotGuard {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> rediskv::Result<Option<bytes::Bytes>> {
        self.inner.get(cf, key)
    }
    fn get_with(
        &self,
        cf: ColumnFamily,
        key: &[u8],
        read: &mut dyn FnMut(Option<&[u8]>),
    ) -> rediskv::Result<()> {
        self.inner.get_with(cf, key, read)
    }
    fn multi_get(&self, cf: ColumnFamily, keys: &[&[u8]]) -> rediskv::Result<Vec<Option<bytes::Bytes>>> {
        self.inner.multi_get(cf, keys)
    }
    fn get_ahead(
        &self,
        cf: ColumnFamily,
        key: &[u8],
        bound: &[u8],
        direction: rediskv::Direction,
    ) -> rediskv::Result<Option<bytes::Bytes>> {
        self.inner.get_ahead(cf, key, bound, direction)
    }
    fn reads_ahead(&self) -> bool {
        self.inner.reads_ahead()
    }
    fn scan<'a>(
        &'a self,
        cf: ColumnFamily,
        range: &rediskv::KeyRange,
        direction: rediskv::Direction,
    ) -> rediskv::Result<rediskv::ScanIter<'a>> {
        self.inner.scan(cf, range, direction)
    }
    fn write(&self, batch: rediskv::WriteBatch) -> rediskv::Result<()> {
        if let Some((slot, revision)) = ROUTED.with(|r| r.get())
            && self.closed.refuses(slot, revision)
        {
            return Err(rediskv::Error::Backend(SLOT_CLOSED.into()));
        }
        self.inner.write(batch)
    }
    fn begin(&self) {
        self.inner.begin()
    }
    fn finish(&self) -> bool {
        self.inner.finish()
    }
    fn retry_pause(&self, attempt: u32, elapsed: std::time::Duration) -> Option<std::time::Duration> {
        self.inner.retry_pause(attempt, elapsed)
    }
    fn stamp(&self, cf: ColumnFamily, key: &[u8]) -> rediskv::Result<Option<u64>> {
        self.inner.stamp(cf, key)
    }
    fn is_shared(&self) -> bool {
        self.inner.is_shared()
    }
    fn snapshot(&self) -> rediskv::Result<Option<rediskv::Snapshot>> {
        self.inner.snapshot()
    }
}

/// The engine type: the library's thread-safe `Engine` over the shared store.
pub type SharedEngine = rediskv::Engine<Backend>;

/// Debug builds: kills the process (`kill -9`) when the environment variable `name` is set,
/// the tests' way to stop a replica between two durable steps.
fn crash_point(name: &str) {
    if cfg!(debug_assertions) && std::env::var_os(name).is_some() {
        let _ = std::process::Command::new("kill").args(["-9", &std::process::id().to_string()]).status();
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::{WriteStatus, os_words};

    #[test]
    fn a_write_failure_refuses_writes_until_they_work_again() {
        let status = WriteStatus::default();
        assert!(!status.failing());
        status.failed("No space left on device".into());
        assert!(status.failing() && status.needs_reopen());
        assert_eq!(status.refusal(), "MISCONF Errors writing to the AOF file: No space left on device");
        status.failed("Input/output error".into());
        assert_eq!(status.failures(), 2, "each failure counts, so no round straddling one is acknowledged");
        status.reopened();
        status.still_failing("Disk quota exceeded".into());
        assert!(status.failing() && !status.needs_reopen());
        assert_eq!(status.refusal(), "MISCONF Errors writing to the AOF file: Disk quota exceeded");
        status.recovered();
        assert!(!status.failing());
        assert_eq!(status.failures(), 2);
    }

    #[test]
    fn a_new_lease_commits_only_commands_routed_by_the_table_read_under_it() {
        let closed = super::ClosedSlot::default();
        assert!(!closed.refuses(5, 0), "no lease to keep");
        let later = std::time::Instant::now() + std::time::Duration::from_secs(600);
        closed.lease_holds_until(Some(later));
        assert!(!closed.refuses(5, 3));
        closed.lease_holds_until(Some(std::time::Instant::now()));
        assert!(closed.refuses(5, 3), "the lease may have run out");
        // Registered again, the table read at revision 9: a command routed by the table of
        // the lease that ran out commits nothing, even while the new lease holds.
        closed.lease_granted(9, later);
        assert!(closed.refuses(5, 3));
        assert!(!closed.refuses(5, 9) && !closed.refuses(5, 10));
        closed.lease_holds_until(Some(later));
        assert!(closed.refuses(5, 3), "renewals keep the floor");
        closed.set(Some(5));
        assert!(closed.refuses(5, 9) && !closed.refuses(6, 9));
    }

    #[test]
    fn the_os_words_of_an_engine_error_are_strerror_s() {
        let full = "No space left on device";
        assert_eq!(os_words("backend: fjall: No space left on device (os error 28)").as_deref(), Some(full));
        let debug = r#"backend: fjall: FjallError: Io(Os { code: 28, kind: StorageFull, message: "No space left on device" })"#;
        assert_eq!(os_words(debug).as_deref(), Some(full));
        assert_eq!(os_words("backend: fjall: FjallError: Poisoned"), None);
    }

    #[cfg(feature = "etcd")]
    #[test]
    fn tls_to_etcd_needs_https_endpoints_and_a_ca() {
        use super::{EtcdFlags, etcd_tls};
        let flags = |ca: Option<&str>, cert: Option<&str>, key: Option<&str>| EtcdFlags {
            ca_cert_file: ca.map(Into::into),
            cert_file: cert.map(Into::into),
            key_file: key.map(Into::into),
            ..EtcdFlags::default()
        };
        let (https, http) = (vec!["https://h:1".to_string()], vec!["http://h:1".to_string()]);
        assert_eq!(etcd_tls(&flags(None, None, None), &http), Ok(None));
        let tls = etcd_tls(&flags(Some("ca"), Some("c"), Some("k")), &https).unwrap().unwrap();
        assert_eq!((tls.ca_file, tls.identity), ("ca".into(), Some(("c".into(), "k".into()))));
        let refused = [
            (flags(None, None, None), &https, "https:// etcd endpoints need --etcd-ca-cert-file"),
            (
                flags(Some("ca"), None, None),
                &http,
                "with --etcd-ca-cert-file every etcd endpoint is https://",
            ),
            (flags(Some("ca"), Some("c"), None), &https, "--etcd-cert-file and --etcd-key-file go together"),
            (flags(None, Some("c"), Some("k")), &http, "--etcd-cert-file needs --etcd-ca-cert-file"),
        ];
        for (flags, endpoints, why) in refused {
            assert_eq!(etcd_tls(&flags, endpoints), Err(why.to_string()));
        }
    }
}
