//! Scenarios every on-disk backend's tests run: restart, versions across a clock set back,
//! garbage leaving the disk, corrupt records, a directory written with another layout.
//!
//! Each takes an `open` function (the crate's own `open`) and panics with a message when the
//! backend fails the scenario.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use rediskv::{ColumnFamily, Direction, KvBackend, WriteBatch};
use rediskv::{Db, Reply};
use rediskv::{KeyLayout, KeyRange, ManualClock, Metadata, Version};

use crate::{DiskBackend, Options, Sync, now_ms};

/// A fresh directory under the system temp dir, removed (with everything in it) on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `rediskv-<tag>-<pid>-<n>`.
    pub fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("rediskv-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A backend that owns its temp directory, for the conformance kit (which takes backends by
/// value): dropped, it closes the backend, then removes the directory.
pub struct InTempDir<B> {
    backend: Option<B>,
    _dir: TempDir,
}

impl<B> InTempDir<B> {
    /// Opens a backend in a fresh temp dir.
    pub fn open(tag: &str, open: impl FnOnce(&Path) -> rediskv::Result<B>) -> Self {
        let dir = TempDir::new(tag);
        let backend = open(dir.path()).expect("open in temp dir");
        InTempDir { backend: Some(backend), _dir: dir }
    }

    fn get(&self) -> &B {
        self.backend.as_ref().expect("backend open until drop")
    }
}

impl<B> Drop for InTempDir<B> {
    fn drop(&mut self) {
        self.backend = None;
    }
}

impl<B: KvBackend> KvBackend for InTempDir<B> {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> rediskv::Result<Option<Bytes>> {
        self.get().get(cf, key)
    }
    fn scan<'a>(
        &'a self,
        cf: ColumnFamily,
        range: &rediskv::KeyRange,
        direction: Direction,
    ) -> rediskv::Result<rediskv::ScanIter<'a>> {
        self.get().scan(cf, range, direction)
    }
    fn write(&self, batch: WriteBatch) -> rediskv::Result<()> {
        self.get().write(batch)
    }
    fn begin(&self) {
        self.get().begin()
    }
    fn finish(&self) -> bool {
        self.get().finish()
    }
    fn is_shared(&self) -> bool {
        self.get().is_shared()
    }
    fn snapshot(&self) -> rediskv::Result<Option<rediskv::Snapshot>> {
        self.get().snapshot()
    }
    fn retry_pause(&self, attempt: u32, elapsed: std::time::Duration) -> Option<std::time::Duration> {
        self.get().retry_pause(attempt, elapsed)
    }
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

/// The commands the restart scenario writes, one of each kind of record and TTL.
pub const WRITES: &[&[&str]] = &[
    &["SET", "str", "value"],
    &["SET", "ttl", "soon", "PX", "3600000"],
    &["HSET", "hash", "f1", "v1", "f2", "v2"],
    &["PEXPIRE", "hash", "7200000"],
    &["RPUSH", "list", "a", "b", "c"],
    &["LPUSH", "list", "z"],
    &["SADD", "set", "m1", "m2", "m3"],
    &["ZADD", "zset", "1.5", "a", "-2", "b", "inf", "c"],
    &["HSET", "gone", "f", "v"],
    &["DEL", "gone"],
];

/// The reads whose answers must survive a restart.
pub const READS: &[&[&str]] = &[
    &["GET", "str"],
    &["GET", "ttl"],
    &["PEXPIRETIME", "ttl"],
    &["PEXPIRETIME", "hash"],
    &["PEXPIRETIME", "str"],
    &["HGETALL", "hash"],
    &["LRANGE", "list", "0", "-1"],
    &["SMEMBERS", "set"],
    &["ZRANGE", "zset", "0", "-1", "WITHSCORES"],
    &["EXISTS", "gone"],
    &["DBSIZE"],
];

/// The largest collection version on disk.
pub fn max_version<B: KvBackend>(backend: &B) -> Version {
    let all = rediskv::KeyRange { start: Vec::new(), end: None };
    backend
        .scan(ColumnFamily::Metadata, &all, Direction::Forward)
        .expect("scan metadata")
        .map(|item| Metadata::decode(&item.expect("metadata record").1).map_or(Version::NONE, |m| m.version))
        .max()
        .unwrap_or(Version::NONE)
}

/// Writes every kind of record with `sync`, closes, reopens: every key, TTL and collection
/// reads the same, and a new collection's version is above every version before.
pub fn restart<B: DiskBackend>(open: impl Fn(&Path, Options) -> rediskv::Result<B>, sync: Sync) {
    let dir = TempDir::new("restart");
    let options = Options { sync, ..Options::default() };
    let mut db = Db::new(open(dir.path(), options.clone()).expect("open"));
    for argv in WRITES {
        assert!(!matches!(db.run(argv), Reply::Error(_)), "{argv:?} failed");
    }
    let before: Vec<Reply> = READS.iter().map(|argv| db.run(argv)).collect();
    assert_eq!(before[0], bulk("value"));
    assert!(matches!(before[3], Reply::Integer(t) if t > 0), "hash has a TTL: {:?}", before[3]);
    let top = max_version(db.backend());
    assert!(top > Version::NONE, "collections have versions");
    drop(db);

    let mut db = Db::new(open(dir.path(), options).expect("reopen"));
    let after: Vec<Reply> = READS.iter().map(|argv| db.run(argv)).collect();
    for ((argv, b), a) in READS.iter().zip(&before).zip(&after) {
        assert_eq!(a, b, "{argv:?} differs after reopen");
    }
    assert!(matches!(db.run(&["HSET", "new", "f", "v"]), Reply::Integer(1)));
    assert!(max_version(db.backend()) > top, "a version after reopen is above every version before");
}

/// A replica's stream position ([`DiskBackend::set_position`]) goes in the same batch as
/// each later write, survives a reopen with the data, and stays removed once removed.
pub fn position_rides_with_each_batch<B: DiskBackend>(open: impl Fn(&Path, Options) -> rediskv::Result<B>) {
    let dir = TempDir::new("position");
    let backend = open(dir.path(), group_commit()).expect("open");
    assert_eq!(backend.position().expect("position"), None);
    backend.set_position(Some(b"at 10".to_vec())).expect("set");
    backend.stamp_writes(Some(b"at 20".to_vec()));
    assert_eq!(backend.position().expect("position").as_deref(), Some(&b"at 10"[..]), "not before a write");
    put(&backend, b"k", b"v");
    assert_eq!(backend.position().expect("position").as_deref(), Some(&b"at 20"[..]));
    backend.persist_written().expect("persist");
    drop(backend);
    let backend = open(dir.path(), group_commit()).expect("reopen");
    assert_eq!(backend.position().expect("position").as_deref(), Some(&b"at 20"[..]));
    assert_eq!(backend.get(ColumnFamily::Subkey, b"k").expect("get").as_deref(), Some(&b"v"[..]));
    backend.set_position(None).expect("forget");
    put(&backend, b"k2", b"v");
    backend.persist_written().expect("persist");
    drop(backend);
    let backend = open(dir.path(), group_commit()).expect("reopen");
    assert_eq!(backend.position().expect("position"), None);
}

/// A write the engine took after the last persist returned, then closed by a reopen, makes
/// the next persist fail (once): no reply acknowledges it. A write whose persist already
/// failed does not fail the reopened engine's persists again.
pub fn a_reopen_fails_the_persist_of_what_it_dropped<B: DiskBackend>(
    open: impl Fn(&Path, Options) -> rediskv::Result<B>,
) {
    let dir = TempDir::new("dropped-by-reopen");
    let backend = open(dir.path(), group_commit()).expect("open");
    put(&backend, b"kept", b"1");
    backend.persist_written().expect("persist");
    put(&backend, b"dropped", b"2");
    backend.reopen().expect("reopen");
    // Whether the closed engine wrote it out is its own affair: it must not be acknowledged.
    assert!(backend.persist_written().is_err(), "the dropped write must not be acknowledged");
    put(&backend, b"after", b"3");
    backend.persist_written().expect("a write of the reopened engine persists");
    backend.reopen().expect("reopen with nothing pending");
    backend.persist_written().expect("nothing was dropped");
    drop(backend);
    let backend = open(dir.path(), group_commit()).expect("open again");
    for (key, value) in [(&b"kept"[..], &b"1"[..]), (b"after", b"3")] {
        assert_eq!(backend.get(ColumnFamily::Subkey, key).expect("get").as_deref(), Some(value));
    }
}

/// Writes 5,000 metadata records and as many subkeys: [`DiskBackend::approximate_records`]
/// counts the metadata family's within a factor of two, before and after a full compaction.
pub fn approximate_records<B: DiskBackend>(open: impl Fn(&Path, Options) -> rediskv::Result<B>) {
    let dir = TempDir::new("approximate");
    let backend = open(dir.path(), Options::default()).expect("open");
    for chunk in 0..50 {
        let mut batch = WriteBatch::new();
        for i in chunk * 100..(chunk + 1) * 100 {
            batch.put(ColumnFamily::Metadata, format!("key{i:05}").into_bytes(), b"meta".to_vec());
            batch.put(ColumnFamily::Subkey, format!("sub{i:05}").into_bytes(), b"v".to_vec());
        }
        backend.write(batch).expect("write");
    }
    let written = backend.approximate_records(ColumnFamily::Metadata).expect("counted");
    assert!((5_000..=10_000).contains(&written), "{written} records counted after the writes");
    backend.compact().expect("compact");
    let compacted = backend.approximate_records(ColumnFamily::Metadata).expect("counted");
    assert!((5_000..=10_000).contains(&compacted), "{compacted} records counted after a compaction");
}

/// Environment variable naming the directory a [`clock_set_back_child`] opens.
pub const CHILD_DIR_ENV: &str = "REDISKV_ENGINE_CHILD_DIR";

/// `1` when the group-commit child opens its directory with [`Sync::Always`].
pub const CHILD_ALWAYS_ENV: &str = "REDISKV_ENGINE_CHILD_ALWAYS";

/// The parent half of the version-floor check: writes a collection under a clock a day
/// ahead, closes, then runs `child` (a fresh process, so a fresh version generator) which
/// must call [`clock_set_back_child`] on the directory and succeed.
pub fn clock_set_back_parent<B: DiskBackend>(
    open: impl Fn(&Path, Options) -> rediskv::Result<B>,
    mut child: std::process::Command,
) {
    let dir = TempDir::new("floor");
    let clock = Arc::new(ManualClock::new(now_ms() + 24 * 3600 * 1000));
    let mut db = Db::new(open(dir.path(), Options::default()).expect("open")).with_clock(clock);
    assert!(matches!(db.run(&["SADD", "future", "m"]), Reply::Integer(1)));
    drop(db);
    let out = child.env(CHILD_DIR_ENV, dir.path()).output().expect("run the child test process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the child test failed or did not run: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The child half: in a process whose clock is a day behind the versions on disk, a new
/// collection still gets a version above all of them. Does nothing without
/// [`CHILD_DIR_ENV`].
pub fn clock_set_back_child<B: DiskBackend>(open: impl Fn(&Path, Options) -> rediskv::Result<B>) {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else { return };
    let mut db = Db::new(open(Path::new(&dir), Options::default()).expect("open in child"));
    let top = max_version(db.backend());
    assert!(matches!(db.run(&["HSET", "now", "f", "v"]), Reply::Integer(1)));
    let record = db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(b"now")).expect("get");
    let ours = Metadata::decode(&record.expect("exists")).expect("metadata").version;
    assert!(ours > top, "version {ours} after reopen is not above {top} written before");
}

/// The parent half of the group-commit check: runs `child` (which must call
/// [`group_commit_child`] on a fresh directory and die there, as `kill -9` would) with
/// durability `sync` (`No` or `Always`), then reopens the directory: what the child persisted
/// with [`DiskBackend::persist_written`] is there, the batch it wrote after that is not (it
/// was still waiting in the process: with `Always` too, each batch is not synced on its own).
pub fn group_commit_parent<B: DiskBackend>(
    open: impl Fn(&Path, Options) -> rediskv::Result<B>,
    mut child: std::process::Command,
    sync: Sync,
) {
    let dir = TempDir::new("group-commit");
    let always = if sync == Sync::Always { "1" } else { "0" };
    let out = child
        .env(CHILD_DIR_ENV, dir.path())
        .env(CHILD_ALWAYS_ENV, always)
        .output()
        .expect("run the child test process");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("group commit child: dying"),
        "the child should have died after its writes: {}\n{stderr}",
        out.status
    );
    let mut db = Db::new(open(dir.path(), Options::default()).expect("reopen"));
    assert_eq!(db.run(&["GET", "persisted"]), bulk("yes"), "a persisted batch survives the process");
    assert_eq!(db.run(&["GET", "pending"]), Reply::Nil, "a batch not yet persisted waited in the process");
}

/// Runs this test binary's child test `test` alone (see [`crate::engine_scenarios!`]).
pub fn group_commit_child_command(test: &str) -> std::process::Command {
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"));
    child.args(["--exact", test, "--include-ignored", "--test-threads=1", "--nocapture"]);
    child
}

/// The child half: with [`Options::group_commit`], writes one key, persists, writes another,
/// then aborts (no destructor runs). Does nothing without [`CHILD_DIR_ENV`].
pub fn group_commit_child<B: DiskBackend>(open: impl Fn(&Path, Options) -> rediskv::Result<B>) {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else { return };
    // `No` or `Always`: no syncer thread that could write the pending batch out by itself.
    let always = std::env::var_os(CHILD_ALWAYS_ENV).is_some_and(|v| v == "1");
    let sync = if always { Sync::Always } else { Sync::No };
    let options = Options { sync, group_commit: true, ..Options::default() };
    let mut db = Db::new(open(Path::new(&dir), options).expect("open in child"));
    assert_eq!(db.run(&["SET", "persisted", "yes"]), Reply::Status("OK".into()));
    db.backend().persist_written().expect("persist");
    assert_eq!(db.run(&["SET", "pending", "yes"]), Reply::Status("OK".into()));
    eprintln!("group commit child: dying");
    std::process::abort();
}

/// [`crate::GroupCommit`]'s [`DiskBackend::persist_async`]: a round handed to the writer
/// thread is read back at once, a later write over it too, and the callback comes once the
/// engine holds it; one persisted on the caller's thread is called back there, in the order
/// written; with nothing held, the callback comes back to the caller.
pub fn group_commit_persists_on_its_thread<B: DiskBackend + Send + std::marker::Sync + 'static>(
    open: impl Fn(&Path, Options) -> rediskv::Result<B>,
) {
    let dir = TempDir::new("group-commit-thread");
    let held = crate::GroupCommit::new(open(dir.path(), group_commit()).expect("open"));
    let (sent, done) = std::sync::mpsc::channel();
    let persist_async = |held: &crate::GroupCommit<B>| {
        let sent = sent.clone();
        held.persist_async(Box::new(move |persisted| sent.send(persisted).expect("send"))).is_ok()
    };
    let value = |backend: &dyn KvBackend| backend.get(ColumnFamily::Subkey, b"k").expect("get");
    put(&held, b"k", b"1");
    assert!(persist_async(&held), "a held write is queued");
    held.start_persist();
    assert_eq!(value(&held).as_deref(), Some(&b"1"[..]), "read while it is written");
    put(&held, b"k", b"2");
    assert_eq!(value(&held).as_deref(), Some(&b"2"[..]), "the later write over it");
    done.recv().expect("called back").expect("persisted");
    assert!(value(held.inner()).is_some(), "the engine holds the round once it is called back");
    // Unless the writer took it with the first round.
    if persist_async(&held) {
        held.persist_queued();
        assert!(done.try_recv().expect("called back on this thread").is_ok());
    }
    assert_eq!(value(held.inner()).as_deref(), Some(&b"2"[..]), "in the order written");
    assert!(!persist_async(&held), "nothing held: the caller persists itself");
    drop(held);
    let backend = open(dir.path(), Options::default()).expect("reopen");
    assert_eq!(value(&backend).as_deref(), Some(&b"2"[..]));
}

/// Options with group commit: writes wait for [`DiskBackend::persist_written`].
pub fn group_commit() -> Options {
    Options { group_commit: true, ..Options::default() }
}

/// Writes one Subkey record `key` = `value`, as one batch.
pub fn put<B: KvBackend>(backend: &B, key: &[u8], value: &[u8]) {
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Subkey, key.to_vec(), value.to_vec());
    backend.write(batch).expect("write");
}

/// Writes 20,000 records of one hash-like key straight into `backend`: long shared prefixes
/// and repetitive values, as the subkeys of one collection are (about 2.4 MB raw). Returns
/// their raw size in bytes.
pub fn load_one_collection<B: KvBackend>(backend: &B) -> u64 {
    let mut raw = 0;
    for chunk in 0..20 {
        let mut batch = rediskv::WriteBatch::new();
        for i in 0..1000 {
            let key = format!("\x0b__namespace\0\0\0\x05bighash{chunk:04}{i:04}-field");
            let value = format!("value-{:08}-0123456789-0123456789-0123456789", chunk * 1000 + i);
            raw += (key.len() + value.len()) as u64;
            batch.put(ColumnFamily::Subkey, key.into_bytes(), value.into_bytes());
        }
        backend.write(batch).expect("write");
    }
    raw
}

/// Writes `n` new fields into hash `key`, 10,000 per HSET.
pub fn fill_hash<B: KvBackend>(db: &mut Db<B>, key: &str, n: usize) {
    fill(db, "HSET", key, n, |i| [format!("field:{i:08}"), format!("value-{i}-{}", i * 7919)]);
}

/// Writes `n` new members into zset `key`, 10,000 per ZADD.
pub fn fill_zset<B: KvBackend>(db: &mut Db<B>, key: &str, n: usize) {
    fill(db, "ZADD", key, n, |i| [format!("{}", i as f64 * 0.5), format!("member:{i:08}")]);
}

fn fill<B: KvBackend>(
    db: &mut Db<B>,
    command: &str,
    key: &str,
    n: usize,
    pair: impl Fn(usize) -> [String; 2],
) {
    for start in (0..n).step_by(10_000) {
        let end = (start + 10_000).min(n);
        let mut argv = vec![command.to_string(), key.to_string()];
        argv.extend((start..end).flat_map(&pair));
        assert_eq!(db.run(&argv), Reply::Integer((end - start) as i64), "{command} {key} {start}..{end}");
    }
}

/// What [`gc_on_disk`] measured, in bytes of the engine's size figure.
#[derive(Debug, Clone, Copy)]
pub struct GcFigures {
    /// Subkey CF: before the big keys were written, with them, after DEL and compaction.
    pub subkey: [u64; 3],
    /// Score CF, likewise.
    pub score: [u64; 3],
}

impl GcFigures {
    /// Share of what the keys occupied that left the disk, per CF, in percent.
    pub fn shrink_percent(&self) -> [f64; 2] {
        let pct = |[base, full, after]: [u64; 3]| {
            100.0 * full.saturating_sub(after) as f64 / full.saturating_sub(base).max(1) as f64
        };
        [pct(self.subkey), pct(self.score)]
    }
}

/// Writes an `n`-field hash and an `n`-member zset (10,000 per command), compacts, DELs
/// both, compacts again: both CFs must shed at least 90% of what the keys occupied, and a
/// live hash and zset written beside them must read the same after.
pub fn gc_on_disk<B: DiskBackend>(
    open: impl Fn(&Path, Options) -> rediskv::Result<B>,
    n: usize,
) -> GcFigures {
    let dir = TempDir::new("gc");
    let backend = open(dir.path(), Options::default()).expect("open");
    let mut db = Db::new(&backend);
    assert!(matches!(db.run(&["HSET", "live", "f", "v"]), Reply::Integer(1)));
    assert!(matches!(db.run(&["ZADD", "zlive", "1", "m"]), Reply::Integer(1)));
    backend.compact().expect("compact");
    let base = [backend.disk_bytes(ColumnFamily::Subkey), backend.disk_bytes(ColumnFamily::Score)];
    fill_hash(&mut db, "big", n);
    fill_zset(&mut db, "zbig", n);
    backend.compact().expect("compact");
    let full = [backend.disk_bytes(ColumnFamily::Subkey), backend.disk_bytes(ColumnFamily::Score)];
    assert_eq!(db.run(&["DEL", "big", "zbig"]), Reply::Integer(2));
    backend.compact().expect("compact");
    let after = [backend.disk_bytes(ColumnFamily::Subkey), backend.disk_bytes(ColumnFamily::Score)];
    let figures = GcFigures { subkey: [base[0], full[0], after[0]], score: [base[1], full[1], after[1]] };
    for (name, pct) in ["subkey", "score"].iter().zip(figures.shrink_percent()) {
        assert!(pct >= 90.0, "{name} CF shed only {pct:.1}% of the deleted keys' bytes: {figures:?}");
    }
    assert_eq!(db.run(&["HGETALL", "live"]), Reply::Map(vec![(bulk("f"), bulk("v"))]), "live hash kept");
    assert_eq!(db.run(&["ZRANGE", "zlive", "0", "-1"]), Reply::Array(vec![bulk("m")]), "live zset kept");
    assert_eq!(db.run(&["HLEN", "big"]), Reply::Integer(0));
    figures
}

/// A metadata record that does not decode (garbage bytes; a Kvrocks stream, a type this
/// crate lacks) gives every command touching it an error naming the key; neighbours still
/// read; nothing panics.
pub fn corrupt_records<B: DiskBackend>(open: impl Fn(&Path, Options) -> rediskv::Result<B>) {
    let dir = TempDir::new("corrupt");
    let backend = open(dir.path(), Options::default()).expect("open");
    let layout = KeyLayout::default();
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Metadata, layout.metadata_key(b"garbage"), &b"\xff\x01"[..]);
    // flags 0x80 | 15, expire 0, version, size: well-formed, but a type id no writer uses.
    let mut stream = vec![0x8F];
    stream.extend_from_slice(&[0; 8]);
    stream.extend_from_slice(&7u64.to_be_bytes());
    stream.extend_from_slice(&1u64.to_be_bytes());
    batch.put(ColumnFamily::Metadata, layout.metadata_key(b"stream"), stream);
    backend.write(batch).expect("write raw records");
    backend.compact().expect("compact");
    let mut db = Db::new(&backend);
    assert_eq!(db.run(&["SET", "fine", "1"]), Reply::OK);
    for key in ["garbage", "stream"] {
        for argv in [vec!["GET", key], vec!["TYPE", key], vec!["HGETALL", key], vec!["EXISTS", key]] {
            match db.run(&argv) {
                Reply::Error(e) => {
                    assert!(e.contains(&format!("'{key}'")), "{argv:?}: error does not name the key: {e}")
                }
                other => panic!("{argv:?} on a corrupt record answered {other:?}"),
            }
        }
    }
    // Listing commands skip what they cannot read (the library's choice); they must not fail.
    assert_eq!(db.run(&["KEYS", "*"]), Reply::Array(vec![bulk("fine")]));
    assert_eq!(db.run(&["GET", "fine"]), bulk("1"));
}

/// A directory written with one layout refuses to open with another (namespace, cluster
/// slots, hash prefix), naming both, and still opens with its own.
pub fn other_layout_refused<B: DiskBackend>(open: impl Fn(&Path, Options) -> rediskv::Result<B>) {
    let dir = TempDir::new("layout");
    let mut db = Db::new(open(dir.path(), Options::default()).expect("open"));
    assert_eq!(db.run(&["SET", "k", "v"]), Reply::OK);
    drop(db);
    let others = [
        ("namespace \"tenant\"", KeyLayout::new(b"tenant").expect("layout")),
        ("cluster slots on", KeyLayout::default().with_cluster_slots(true)),
        ("hash prefix 4", KeyLayout::default().with_hash_prefix(4).expect("layout")),
    ];
    for (what, layout) in others {
        match open(dir.path(), Options { layout, ..Options::default() }) {
            Ok(_) => panic!("a directory written with the default layout opened with {what}"),
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains(what), "the refusal names {what}: {text}");
                assert!(
                    text.contains("namespace \"__namespace\"; cluster slots off; hash prefix 0"),
                    "the refusal names the stored layout: {text}"
                );
            }
        }
    }
    let mut db = Db::new(open(dir.path(), Options::default()).expect("reopen with its own layout"));
    assert_eq!(db.run(&["GET", "k"]), bulk("v"));
}

/// A store of another system's layout on disk (NeoKV's, camellia's): every family it holds
/// written, a deleted hash and zset dropped by the compaction filter (decoding that system's
/// keys and values), the rest read back after a reopen, the consistency check clean, and
/// `stored_layout` naming the layout without opening it for writes.
pub fn foreign_layout_on_disk<B: DiskBackend>(
    layout: KeyLayout,
    open: impl Fn(&Path, Options) -> rediskv::Result<B>,
    stored_layout: impl Fn(&Path) -> rediskv::Result<Option<KeyLayout>>,
) {
    let dir = TempDir::new(layout.kind().name());
    let lists = layout.stores(rediskv::RedisType::List);
    let options = || Options { layout: layout.clone(), ..Options::default() };
    assert_eq!(stored_layout(dir.path()).expect("no store yet"), None);
    {
        let backend = open(dir.path(), options()).expect("open");
        let mut db = Db::with_layout(&backend, layout.clone());
        for argv in [
            &["SET", "s", "v"][..],
            &["HSET", "h", "f", "v"],
            if lists { &["RPUSH", "l", "a", "b"] } else { &["SET", "l", "ab"] },
            &["SADD", "set", "m"],
            &["ZADD", "z", "1", "m"],
            &["SETBIT", "bits", "9", "1"],
        ] {
            assert!(!matches!(db.run(argv), Reply::Error(_)), "{argv:?}");
        }
        fill_hash(&mut db, "big", 2_000);
        fill_zset(&mut db, "zbig", 2_000);
        assert_eq!(db.run(&["DEL", "big", "zbig"]), Reply::Integer(2));
        backend.compact().expect("compact");
        let left: usize = [ColumnFamily::Subkey, ColumnFamily::Score]
            .iter()
            .map(|cf| {
                backend.scan(*cf, &KeyRange::prefix(Vec::new()), Direction::Forward).expect("scan").count()
            })
            .sum();
        let list = if lists { 2 } else { 0 };
        assert_eq!(left, 1 + list + 1 + 2, "only the live hash, list, set and zset records stay");
    }
    assert_eq!(stored_layout(dir.path()).expect("read the manifest"), Some(layout.clone()));
    let backend = open(dir.path(), options()).expect("reopen");
    let mut db = Db::with_layout(&backend, layout.clone());
    assert_eq!(db.run(&["GET", "s"]), bulk("v"));
    if lists {
        assert_eq!(db.run(&["LRANGE", "l", "0", "-1"]), Reply::Array(vec![bulk("a"), bulk("b")]));
    }
    assert_eq!(db.run(&["ZSCORE", "z", "m"]), Reply::Double(1.0));
    assert_eq!(db.run(&["TYPE", "bits"]), Reply::Status("string".into()));
    assert_eq!(rediskv::fsck::check(&backend, &layout, now_ms()).expect("fsck"), vec![]);
    let key = layout.metadata_key(b"s");
    assert!(backend.get(ColumnFamily::Metadata, &key).expect("get").is_some(), "the system's metadata key");
}

/// Lists used as queues and stacks on the store behind the server's `MetadataCache`, whose
/// pops read list elements ahead: a seeded random mix of pushes, pops from both ends (one
/// element, several, between lists), LSET, LINSERT, LREM, LTRIM, DEL and flushes, on two
/// lists of up to a few thousand elements, every reply compared with the same commands on
/// the memory store, in the Kvrocks and the TiTea layouts (whose list indexes differ), then
/// `fsck` clean.
pub fn list_walks_behind_the_cache<B: DiskBackend>(open: impl Fn(&Path, Options) -> rediskv::Result<B>) {
    for layout in [KeyLayout::default(), KeyLayout::titea(b"default.default")] {
        let dir = TempDir::new("list-walks");
        let options = Options { layout: layout.clone(), ..Options::default() };
        let store = rediskv::MetadataCache::new(open(dir.path(), options).expect("open"));
        let mut db = Db::with_layout(&store, layout.clone());
        let mut model = Db::with_layout(rediskv::MemoryBackend::new(), layout.clone());
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for step in 0..8_000u64 {
            let list = ["q", "r"][next(2) as usize].to_string();
            let other = if list == "q" { "r" } else { "q" }.to_string();
            let element = format!("e{step}");
            let end = ["LEFT", "RIGHT"][next(2) as usize].to_string();
            let index = (next(40) as i64 - 20).to_string();
            let argv: Vec<String> = match next(100) {
                0..=24 => {
                    let push = ["LPUSH", "RPUSH"][next(2) as usize];
                    let mut argv = vec![push.to_string(), list];
                    argv.extend((0..=next(8)).map(|i| format!("{element}.{i}")));
                    argv
                }
                25..=59 => vec![["LPOP", "RPOP"][next(2) as usize].into(), list],
                60..=64 => vec![["LPOP", "RPOP"][next(2) as usize].into(), list, (1 + next(5)).to_string()],
                65..=69 => vec!["LMOVE".into(), list, other, end.clone(), end],
                70..=72 => vec!["LSET".into(), list, index, element],
                73..=74 => {
                    vec!["LINSERT".into(), list, "BEFORE".into(), format!("e{}.0", next(step + 1)), element]
                }
                75..=76 => vec!["LREM".into(), list, "0".into(), format!("e{}.1", next(step + 1))],
                77 => vec!["LTRIM".into(), list, "3".into(), "-4".into()],
                78 if next(20) == 0 => vec!["DEL".into(), list],
                79..=85 => vec!["LINDEX".into(), list, index],
                86 => vec!["LRANGE".into(), list, "0".into(), "-1".into()],
                87 if next(10) == 0 => {
                    store.inner().flush().expect("flush");
                    continue;
                }
                _ => vec!["LLEN".into(), list],
            };
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            assert_eq!(db.run(&argv), model.run(&argv), "step {step}: {argv:?} ({:?} layout)", layout.kind());
        }
        assert_eq!(rediskv::fsck::check(&store, &layout, now_ms()).expect("fsck"), vec![]);
    }
}

/// Three writers create, grow and delete hashes and zsets on their own keys while a fourth
/// thread compacts in a loop (the compaction filter judging records as they are written):
/// afterwards every key reads as its writer's model says and `fsck` finds nothing.
pub fn compaction_beside_writers<B: DiskBackend + std::marker::Sync>(
    open: impl Fn(&Path, Options) -> rediskv::Result<B>,
) {
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;
    let dir = TempDir::new("concurrent");
    let backend = open(dir.path(), Options { sync: Sync::No, ..Options::default() }).expect("open");
    let stop = AtomicBool::new(false);
    let (backend, stop) = (&backend, &stop);
    let (passes, models) = std::thread::scope(|s| {
        let compactor = s.spawn(move || {
            let mut passes = 0;
            loop {
                backend.compact().expect("compact");
                passes += 1;
                if stop.load(Ordering::SeqCst) {
                    return passes;
                }
            }
        });
        let writers: Vec<_> = (0..3)
            .map(|t| {
                s.spawn(move || {
                    let mut db = Db::new(backend);
                    let mut model: BTreeMap<String, Vec<String>> = BTreeMap::new();
                    for round in 0..400 {
                        let key = format!("w{t}-k{}", round % 5);
                        let zkey = format!("z{key}");
                        if round % 7 == 6 {
                            assert!(matches!(
                                db.run(&["DEL", key.as_str(), zkey.as_str()]),
                                Reply::Integer(_)
                            ));
                            model.remove(&key);
                        } else {
                            let (field, score) = (format!("f{round:04}"), round.to_string());
                            assert_eq!(
                                db.run(&["HSET", key.as_str(), field.as_str(), "v"]),
                                Reply::Integer(1)
                            );
                            assert_eq!(
                                db.run(&["ZADD", zkey.as_str(), score.as_str(), field.as_str()]),
                                Reply::Integer(1)
                            );
                            model.entry(key).or_default().push(field);
                        }
                    }
                    model
                })
            })
            .collect();
        let models: Vec<_> = writers.into_iter().map(|w| w.join().expect("writer")).collect();
        stop.store(true, Ordering::SeqCst);
        (compactor.join().expect("compactor"), models)
    });
    assert!(passes >= 1);
    let mut db = Db::new(backend);
    for (t, model) in models.iter().enumerate() {
        for k in 0..5 {
            let key = format!("w{t}-k{k}");
            let fields = model.get(&key).cloned().unwrap_or_default();
            let expect_hash = fields.iter().map(|f| (bulk(f), bulk("v"))).collect();
            assert_eq!(db.run(&["HGETALL", key.as_str()]), Reply::Map(expect_hash), "{key}");
            let expect_zset: Vec<Reply> = fields.iter().map(|f| bulk(f)).collect();
            assert_eq!(
                db.run(&["ZRANGE", format!("z{key}").as_str(), "0", "-1"]),
                Reply::Array(expect_zset),
                "z{key}"
            );
        }
    }
    let problems = rediskv::fsck::check(backend, &KeyLayout::default(), now_ms()).expect("fsck");
    assert!(problems.is_empty(), "fsck: {problems:?}");
}

/// Every scenario above as `#[test]`s for one engine: `engine_scenarios!("fjall", rediskv_fjall)`
/// in the engine's `tests/engine.rs` (the crate must export `open`, `Backend`, `Options`, `Sync`).
#[macro_export]
macro_rules! engine_scenarios {
    ($name:literal, $krate:ident) => {
        use $crate::testkit;
        use $krate::{Backend, Options, Sync};

        /// The engine's `open` at one path type, as the scenarios take it.
        fn open(path: &std::path::Path, options: Options) -> rediskv::Result<Backend> {
            $krate::open(path, options)
        }

        #[test]
        fn restart_keeps_everything_sync_always() {
            testkit::restart(open, Sync::Always);
        }

        #[test]
        fn restart_keeps_everything_sync_everysec() {
            testkit::restart(open, Sync::Everysec);
        }

        #[test]
        fn restart_keeps_everything_sync_no() {
            testkit::restart(open, Sync::No);
        }

        #[test]
        fn versions_stay_above_the_floor_when_the_clock_is_set_back() {
            let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"));
            child.args(["--exact", "clock_set_back_child", "--include-ignored", "--test-threads=1"]);
            testkit::clock_set_back_parent(open, child);
        }

        #[test]
        #[ignore = "the child half of versions_stay_above_the_floor_when_the_clock_is_set_back"]
        fn clock_set_back_child() {
            testkit::clock_set_back_child(open);
        }

        #[test]
        fn group_commit_persists_on_request_and_not_before() {
            testkit::group_commit_parent(
                open,
                testkit::group_commit_child_command("group_commit_child"),
                Sync::No,
            );
        }

        #[test]
        fn group_commit_with_always_syncs_on_request_and_not_before() {
            testkit::group_commit_parent(
                open,
                testkit::group_commit_child_command("group_commit_child"),
                Sync::Always,
            );
        }

        /// As the server opens a store: a round held in memory (`GroupCommit`) until the
        /// persist, which writes and syncs it.
        #[test]
        fn group_commit_holds_a_round_until_persisted() {
            let child = testkit::group_commit_child_command("group_commit_held_child");
            testkit::group_commit_parent(open, child, Sync::Always);
        }

        #[test]
        fn group_commit_persists_on_its_thread() {
            testkit::group_commit_persists_on_its_thread(open);
        }

        #[test]
        #[ignore = "the child half of group_commit_holds_a_round_until_persisted"]
        fn group_commit_held_child() {
            testkit::group_commit_child(|path, options| open(path, options).map($crate::GroupCommit::new));
        }

        #[test]
        #[ignore = "the child half of group_commit_persists_on_request_and_not_before"]
        fn group_commit_child() {
            testkit::group_commit_child(open);
        }

        #[test]
        fn deleted_collections_leave_the_disk() {
            let figures = testkit::gc_on_disk(open, 200_000);
            let [subkey, score] = figures.shrink_percent();
            println!("{} GC on disk: subkey CF shed {subkey:.1}%, score CF {score:.1}%: {figures:?}", $name);
        }

        #[test]
        fn a_replica_position_rides_with_each_batch() {
            testkit::position_rides_with_each_batch(open);
        }

        #[test]
        fn a_reopen_fails_the_persist_of_what_it_dropped() {
            testkit::a_reopen_fails_the_persist_of_what_it_dropped(open);
        }

        #[test]
        fn approximate_records_counts_the_records() {
            testkit::approximate_records(open);
        }

        #[test]
        fn corrupt_records_are_errors_naming_the_key() {
            testkit::corrupt_records(open);
        }

        #[test]
        fn a_directory_with_another_layout_is_refused() {
            testkit::other_layout_refused(open);
        }

        #[test]
        fn a_neokv_store_collects_its_garbage_and_reopens() {
            let layout = rediskv::KeyLayout::neokv(3, 5);
            testkit::foreign_layout_on_disk(layout, open, |path: &std::path::Path| {
                $krate::stored_layout(path)
            });
        }

        #[test]
        fn a_titea_store_collects_its_garbage_and_reopens() {
            let layout = rediskv::KeyLayout::titea(b"default.default");
            testkit::foreign_layout_on_disk(layout, open, |path: &std::path::Path| {
                $krate::stored_layout(path)
            });
        }

        #[test]
        fn a_camellia_store_collects_its_garbage_and_reopens() {
            let layout = rediskv::KeyLayout::camellia(b"ns");
            testkit::foreign_layout_on_disk(layout, open, |path: &std::path::Path| {
                $krate::stored_layout(path)
            });
        }

        #[test]
        fn lists_popped_behind_the_metadata_cache_answer_as_the_memory_store() {
            testkit::list_walks_behind_the_cache(open);
        }

        #[test]
        fn compaction_beside_writers_keeps_every_live_record() {
            testkit::compaction_beside_writers(open);
        }
    };
}
