//! RDB files: SAVE, BGSAVE, `save` points, LASTSAVE's and INFO persistence's figures, the
//! `dump.rdb` an empty store loads at start, and the three steps a full sync is made of:
//! [`snapshot`], [`write_rdb`], [`load_rdb`].
//!
//! A save reads a [`Snapshot`]: the store's own point-in-time view
//! ([`rediskv::KvBackend::snapshot`]: O(1) on fjall, a copy under the store's lock in
//! memory) taken while no command of the default namespace runs, with the SWAPDB mapping and
//! the function libraries of that moment. BGSAVE takes it in the command and writes the file on
//! a thread of its own, so the event loops keep serving meanwhile. The file is written to
//! `temp-<pid>.rdb` in `dir`, synced, then renamed over `dbfilename`, as Redis does.
//!
//! Only the default namespace is saved (tenant namespaces have no place in an RDB file). A
//! disk engine's writes are durable by themselves: its server ignores `save` points, and SAVE
//! and BGSAVE flush its memtables besides writing the file.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use rediskv::Engine;
use rediskv::server::{RdbLoader, RdbSave, save_rdb};
use rediskv::{ColumnFamily, Direction, KvBackend, MemoryBackend, WriteBatch};
use rediskv::{KeyLayout, KeyRange, RdbFileOptions, RdbFileReader, RdbHeader, RdbItem, RdbReplication};

use crate::persistence::Persistence;
use crate::state::State;

/// After a failed BGSAVE, `save` points wait this long before trying again (Redis'
/// `CONFIG_BGSAVE_RETRY_DELAY`).
const RETRY_DELAY_SECS: u64 = 5;

/// The default namespace's data and function libraries at one moment, for reading at
/// leisure ([`write_rdb`]) while the server goes on.
pub struct Snapshot {
    store: rediskv::Snapshot,
    layout: KeyLayout,
    slots: Vec<usize>,
    databases: usize,
    functions: Vec<String>,
    /// Unix seconds when it was taken (the file's `ctime`).
    pub ctime: u64,
    /// The store's bytes then (the file's `used-mem`).
    pub used_mem: u64,
    /// The changes counter then.
    pub dirty: u64,
    /// Keys with and without a TTL, by database, then (RESIZEDB's figures).
    counts: Vec<(u64, u64)>,
    /// How the file is written (`rdbcompression`, `rdbchecksum`).
    pub options: RdbFileOptions,
    /// The replication fields for the file's header (a full sync's), if any.
    pub replication: Option<RdbReplication>,
}

impl Snapshot {
    /// An engine reading the snapshot, databases mapped as they were then.
    ///
    /// # Errors
    /// The snapshot's SWAPDB mapping is not a permutation.
    pub fn engine(&self) -> Result<Engine<rediskv::Snapshot>, String> {
        let engine = Engine::with_layout(self.store.clone(), self.layout.clone());
        if !engine.restore_db_slots(&self.slots) {
            return Err("the snapshot's SWAPDB mapping is not a permutation".into());
        }
        Ok(engine)
    }
}

/// What a save or a load did.
pub type RdbStats = rediskv::server::RdbCounts;

/// Takes a [`Snapshot`] of the default namespace: waits for the commands running to finish,
/// holds the next ones back while it takes the store's snapshot, the SWAPDB mapping and the
/// function libraries, and lets them go (O(1) on fjall; a copy of the data in memory, and
/// for the stores that take no snapshot of their own, RocksDB and etcd).
///
/// # Errors
/// The store failed.
pub fn snapshot(state: &State) -> Result<Snapshot, String> {
    snapshot_at(state, || ()).map(|(snapshot, ())| snapshot)
}

/// [`snapshot`], running `at` at the snapshot's instant, while no command runs: a full sync
/// reads there the replication offset its stream starts from.
///
/// # Errors
/// As [`snapshot`].
pub fn snapshot_at<T>(state: &State, at: impl FnOnce() -> T) -> Result<(Snapshot, T), String> {
    let engine = &state.engine;
    let databases = state.config().number("databases").clamp(1, rediskv::DATABASES as i64) as usize;
    let options = {
        let config = state.config();
        RdbFileOptions {
            compression: config.get("rdbcompression") == "yes",
            checksum: config.get("rdbchecksum") == "yes",
        }
    };
    let _alone = engine.locks().lock(true, std::iter::empty());
    let backend = state.store.backend();
    let store = match backend.snapshot().map_err(|e| e.to_string())? {
        Some(store) => store,
        None => copy_of(&backend).map_err(|e| e.to_string())?,
    };
    let counts = (0..databases)
        .map(|i| engine.key_count(i).map(|c| c.map_or((0, 0), |c| (c.keys, c.expires))))
        .collect::<rediskv::Result<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    let at = at();
    let snapshot = Snapshot {
        store,
        layout: engine.layout().clone(),
        slots: engine.db_slots(),
        databases,
        functions: state.scripts.dump_codes(),
        ctime: crate::clock::unix_secs(),
        used_mem: state.store.used_bytes(),
        dirty: state.dirty.sum(),
        counts,
        options,
        replication: None,
    };
    Ok((snapshot, at))
}

/// A copy in memory of every record of a store that takes no snapshot of its own (RocksDB,
/// etcd): O(data) in time and memory, while no command runs.
fn copy_of(backend: &dyn KvBackend) -> rediskv::Result<rediskv::Snapshot> {
    let copy = MemoryBackend::new();
    let all = KeyRange { start: Vec::new(), end: None };
    for cf in ColumnFamily::ALL {
        let mut batch = WriteBatch::new();
        for record in backend.scan(cf, &all, Direction::Forward)? {
            let (key, value) = record?;
            batch.put(cf, key, value);
            if batch.len() >= 1024 {
                copy.write(std::mem::take(&mut batch))?;
            }
        }
        copy.write(batch)?;
    }
    Ok(Arc::new(copy))
}

/// Writes `snapshot` as an RDB file to `out`, in pieces of about 64 KiB; memory holds one
/// key at a time. Keys of types an RDB file cannot hold are left out (counted in
/// [`RdbStats::skipped`]).
///
/// # Errors
/// The store's read failed, or the output's write.
pub fn write_rdb(snapshot: &Snapshot, out: &mut dyn Write) -> Result<RdbStats, String> {
    write_rdb_counting(snapshot, out, &mut |_| {})
}

/// [`write_rdb`], calling `progress(keys written)` after each key.
fn write_rdb_counting(
    snapshot: &Snapshot,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<RdbStats, String> {
    let engine = snapshot.engine()?;
    let save = RdbSave {
        header: RdbHeader {
            redis_ver: "7.0.15".into(),
            ctime: snapshot.ctime,
            used_mem: snapshot.used_mem,
            replication: snapshot.replication.clone(),
        },
        functions: &snapshot.functions,
        databases: snapshot.databases,
        sizes: &snapshot.counts,
        options: snapshot.options,
    };
    let mut emit = |bytes: &[u8]| out.write_all(bytes).map_err(|e| format!("cannot write: {e}"));
    let stats = save_rdb(&engine, &save, &mut emit, progress)?;
    out.flush().map_err(|e| format!("cannot write: {e}"))?;
    Ok(stats)
}

/// Replaces the default namespace's data and function libraries with an RDB file read from
/// `input` (no command of the namespace runs meanwhile). Keys already expired are not stored.
/// A corrupt or cut input leaves the namespace empty, never half loaded, and the error names
/// the byte offset.
///
/// # Errors
/// The input is not a valid RDB file, a read failed, or the store refused a write.
pub fn load_rdb(state: &State, input: &mut (dyn Read + Send)) -> Result<RdbStats, String> {
    let engine = &state.engine;
    let _alone = engine.locks().lock(true, std::iter::empty());
    let flush = || match engine.db(&engine.session()).run(&["FLUSHALL"]) {
        rediskv::Reply::Error(e) => Err(format!("cannot flush: {e}")),
        _ => Ok(()),
    };
    flush()?;
    // Counted again at their next use: a write to an uncounted database reads nothing of
    // what it replaces, where a counted one reads each key's record first.
    engine.forget_key_counts();
    let mut loader = RdbLoader::new(&**engine);
    if state.store.name() == "etcd" {
        // etcd refuses a transaction of more than `--max-txn-ops` operations: a key a batch.
        loader = loader.with_batch_ops(1);
    }
    state.store.bulk_load(true)?;
    let read = read_beside(input, &mut |item| loader.take(item));
    let loaded = read.and_then(|bytes| {
        let (mut stats, codes) = loader.finish()?;
        state.store.bulk_load(false)?;
        stats.bytes = bytes;
        let codes: Vec<String> = codes.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
        state.scripts.replace_codes(&codes).map_err(|e| format!("a function library does not load: {e}"))?;
        Ok(stats)
    });
    let stats = match loaded {
        Ok(stats) => stats,
        Err(e) => {
            let _ = state.store.bulk_load(false);
            let _ = flush();
            return Err(e);
        }
    };
    if let Err(e) = state.store.save_functions(&state.scripts.dump_codes()) {
        crate::log::warning!("Cannot save the function libraries: {e}");
    }
    state.rdb.loaded.store(stats.keys, Relaxed);
    state.rdb.load_expired.store(stats.skipped, Relaxed);
    Ok(stats)
}

/// Items of an RDB file parsed from this many at a time on the parsing thread.
const PARSED_ITEMS: usize = 256;

/// [`RdbFileReader::read_from`] on a thread of its own, handing its items to `take` on this
/// one: the file is parsed while the store writes.
///
/// # Errors
/// As [`RdbFileReader::read_from`].
fn read_beside(
    input: &mut (dyn Read + Send),
    take: &mut dyn FnMut(RdbItem) -> Result<(), String>,
) -> Result<u64, String> {
    std::thread::scope(|scope| {
        let (sender, items) = std::sync::mpsc::sync_channel::<Vec<RdbItem>>(8);
        let parser = scope.spawn(move || {
            let mut parsed = Vec::with_capacity(PARSED_ITEMS);
            let hand_on = |parsed: &mut Vec<RdbItem>| {
                let full = std::mem::replace(parsed, Vec::with_capacity(PARSED_ITEMS));
                // Refused once `take` failed: its error is the one reported.
                sender.send(full).map_err(|_| String::new())
            };
            let bytes = RdbFileReader::read_from(input, &mut |item| {
                parsed.push(item);
                if parsed.len() < PARSED_ITEMS { Ok(()) } else { hand_on(&mut parsed) }
            })?;
            hand_on(&mut parsed)?;
            Ok(bytes)
        });
        let taken = items.iter().flatten().try_for_each(&mut *take);
        drop(items);
        let read = parser.join().unwrap_or_else(|_| Err("the RDB parser failed".into()));
        taken.and(read)
    })
}

/// `dir`/`dbfilename`.
pub fn rdb_path(state: &State) -> PathBuf {
    let config = state.config();
    PathBuf::from(config.get("dir")).join(config.get("dbfilename"))
}

/// Writes `snapshot` to `path` as Redis does: a temporary file in the same directory,
/// synced, renamed over `path`.
fn write_file(
    snapshot: &Snapshot,
    path: &std::path::Path,
    persistence: &Persistence,
) -> Result<RdbStats, String> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let tmp = dir.join(format!("temp-{}.rdb", std::process::id()));
    let written = (|| {
        let file =
            std::fs::File::create(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
        let mut out = std::io::BufWriter::new(file);
        persistence.keys_total.store(snapshot.counts.iter().map(|c| c.0).sum(), Relaxed);
        let stats =
            write_rdb_counting(snapshot, &mut out, &mut |n| persistence.keys_processed.store(n, Relaxed))?;
        let file = out.into_inner().map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        file.sync_all().map_err(|e| format!("cannot sync {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("cannot rename to {}: {e}", path.display()))?;
        Ok(stats)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    persistence.keys_processed.store(0, Relaxed);
    persistence.keys_total.store(0, Relaxed);
    written
}

/// SAVE: a snapshot written to `dbfilename` on the calling thread, and a disk engine's
/// memtables flushed.
///
/// # Errors
/// A BGSAVE is running ("Background save already in progress"), or the save failed.
pub fn save(state: &State) -> Result<RdbStats, String> {
    if state.rdb.in_progress.load(Relaxed) {
        return Err("Background save already in progress".into());
    }
    let snapshot = snapshot(state)?;
    let stats = write_file(&snapshot, &rdb_path(state), &state.rdb)?;
    state.store.sync()?;
    state.rdb.saved(snapshot.dirty);
    Ok(stats)
}

/// BGSAVE: takes the snapshot now and writes it on a thread of its own; `Ok(false)` when one
/// is running already.
///
/// # Errors
/// The snapshot could not be taken.
pub fn background_save(state: &State) -> Result<bool, String> {
    let rdb = state.rdb.clone();
    if rdb.in_progress.swap(true, Relaxed) {
        return Ok(false);
    }
    rdb.scheduled.store(false, Relaxed);
    rdb.last_try.store(crate::clock::unix_secs(), Relaxed);
    let snapshot = match snapshot(state) {
        Ok(s) => s,
        Err(e) => {
            rdb.last_ok.store(false, Relaxed);
            rdb.in_progress.store(false, Relaxed);
            return Err(e);
        }
    };
    let (path, sync) = (rdb_path(state), state.store.syncer());
    rdb.started.store(crate::clock::unix_secs(), Relaxed);
    let spawned = std::thread::Builder::new().name("bgsave".into()).spawn(move || {
        let started = Instant::now();
        let done = write_file(&snapshot, &path, &rdb).and_then(|stats| sync().map(|()| stats));
        match done {
            Ok(stats) => {
                crate::log::notice!(
                    "Background saving terminated with success ({} keys in {:.1} s)",
                    stats.keys,
                    started.elapsed().as_secs_f64()
                );
                rdb.saved(snapshot.dirty);
                rdb.last_ok.store(true, Relaxed);
            }
            Err(e) => {
                crate::log::warning!("Background saving error: {e}");
                rdb.last_ok.store(false, Relaxed);
            }
        }
        drop(snapshot);
        rdb.last_secs.store(started.elapsed().as_secs() as i64, Relaxed);
        rdb.in_progress.store(false, Relaxed);
    });
    if let Err(e) = spawned {
        state.rdb.in_progress.store(false, Relaxed);
        return Err(format!("cannot start the background save: {e}"));
    }
    Ok(true)
}

/// The `save` parameter's points: (seconds, changes) pairs.
fn save_points(state: &State) -> Vec<(u64, u64)> {
    let text = state.config().get("save").to_string();
    let numbers: Vec<u64> = text.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    numbers.chunks_exact(2).map(|p| (p[0], p[1])).collect()
}

/// Whether SHUTDOWN without SAVE or NOSAVE saves: `save` points are set and apply (the
/// memory store).
pub fn saves_on_shutdown(state: &State) -> bool {
    state.store.in_memory() && !save_points(state).is_empty()
}

/// Once a second: starts the BGSAVE that BGSAVE SCHEDULE asked for, and, for the memory
/// store, the one a `save` point calls for (at least `changes` changes and `seconds` since
/// the last save; after a failure, not before [`RETRY_DELAY_SECS`]).
pub fn spawn_cron(state: Arc<State>) {
    let _ = std::thread::Builder::new().name("save-points".into()).spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let rdb = &state.rdb;
            if rdb.in_progress.load(Relaxed) {
                continue;
            }
            let now = crate::clock::unix_secs();
            let due = rdb.scheduled.load(Relaxed)
                || (state.store.in_memory() && {
                    let changes = state.changes_since_save();
                    let since = now.saturating_sub(rdb.last_save.load(Relaxed));
                    let may_retry = rdb.last_ok.load(Relaxed)
                        || now.saturating_sub(rdb.last_try.load(Relaxed)) >= RETRY_DELAY_SECS;
                    may_retry && save_points(&state).iter().any(|&(secs, n)| changes >= n && since >= secs)
                });
            if due && let Err(e) = background_save(&state) {
                crate::log::warning!("Background saving error: {e}");
            }
        }
    });
}

/// At start: an empty store with a `dbfilename` in `dir` loads it, as Redis does.
///
/// # Errors
/// The file exists but does not load (the server then stops, as Redis does).
pub fn load_at_start(state: &State) -> Result<(), String> {
    let path = rdb_path(state);
    let Ok(file) = std::fs::File::open(&path) else { return Ok(()) };
    if !store_is_empty(state)? {
        return Ok(());
    }
    let started = Instant::now();
    let stats = load_rdb(state, &mut std::io::BufReader::new(file))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    crate::log::notice!(
        "DB loaded from {}: {} keys loaded, {} expired, in {:.3} seconds",
        path.display(),
        stats.keys,
        stats.skipped,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Whether the default namespace holds no key in any database.
fn store_is_empty(state: &State) -> Result<bool, String> {
    let engine = &state.engine;
    for i in 0..rediskv::DATABASES {
        match engine.key_count(i).map_err(|e| e.to_string())? {
            Some(c) if c.keys > 0 => return Ok(false),
            Some(_) => {}
            None => {
                let session = engine.session();
                let mut db = engine.db(&session);
                db.select(i).map_err(|e| e.to_string())?;
                match db.run(&["DBSIZE"]) {
                    rediskv::Reply::Integer(0) => {}
                    rediskv::Reply::Error(e) => return Err(e),
                    _ => return Ok(false),
                }
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn a_copy_holds_every_record_of_every_column_family() {
        let store = MemoryBackend::new();
        let mut batch = WriteBatch::new();
        for cf in ColumnFamily::ALL {
            for i in 0..3000u32 {
                batch.put(cf, i.to_be_bytes().to_vec(), format!("{cf:?}{i}").into_bytes());
            }
        }
        store.write(batch).expect("written");
        let copy = copy_of(&store).expect("copied");
        let all = KeyRange { start: Vec::new(), end: None };
        for cf in ColumnFamily::ALL {
            let records = |b: &dyn KvBackend| -> Vec<_> {
                b.scan(cf, &all, Direction::Forward).expect("scan").map(|r| r.expect("record")).collect()
            };
            assert_eq!(records(&*copy), records(&store), "{cf:?}");
        }
    }

    #[test]
    fn an_empty_snapshot_writes_a_file_of_its_functions_only() {
        let store: rediskv::Snapshot = Arc::new(rediskv::MemoryBackend::new());
        let snapshot = Snapshot {
            store,
            layout: KeyLayout::default(),
            slots: (0..rediskv::DATABASES).collect(),
            databases: 16,
            functions: vec!["#!lua name=x\n".into()],
            ctime: 1,
            used_mem: 2,
            dirty: 0,
            counts: vec![(0, 0); 16],
            options: RdbFileOptions::default(),
            replication: None,
        };
        let mut out = Vec::new();
        let stats = write_rdb(&snapshot, &mut out).expect("written");
        assert_eq!((stats.keys, stats.functions, stats.bytes), (0, 1, out.len() as u64));
        let items = RdbFileReader::read_all(&out).expect("a valid file");
        assert!(items.contains(&RdbItem::Function(Bytes::from_static(b"#!lua name=x\n"))));
        assert!(!items.iter().any(|i| matches!(i, RdbItem::SelectDb(_))));
    }
}
