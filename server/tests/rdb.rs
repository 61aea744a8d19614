//! RDB files with the server: SAVE writes a `dump.rdb` that redis-server 7.0 loads to the
//! same keys, and a `dump.rdb` redis-server saved loads here at start; a BGSAVE taken while a
//! client writes is one point in time, and a fresh server started on it holds exactly its
//! keys (FSCK clean); SHUTDOWN SAVE/NOSAVE, `save` points, INFO persistence; a corrupt file
//! stops the start with the offset.
//!
//! Without `redis-server` the comparisons with it are skipped loudly (failed under `CI=true`).

mod common;
#[path = "../../tests/support/rdb_fixtures.rs"]
mod rdb_fixtures;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Client, Value, rediskv};
use rdb_fixtures::normalized;
use rediskv::rdb::{RdbValue, restore};
use rediskv::{RdbFileReader, RdbItem};

const LIBRARY: &str =
    "#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return 1 end)";

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("rediskv-rdb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the directory");
        TempDir(dir)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 path")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ok(c: &mut Client, args: &[&str]) -> Value {
    let reply = c.cmd(args);
    assert!(!matches!(reply, Value::Error(_)), "{args:?}: {reply:?}");
    reply
}

fn bytes_cmd(c: &mut Client, args: &[&[u8]]) -> Value {
    c.send(args);
    c.read()
}

fn dir_of(c: &mut Client) -> PathBuf {
    PathBuf::from(ok(c, &["CONFIG", "GET", "dir"]).texts()[1].clone())
}

fn info_field(c: &mut Client, name: &str) -> String {
    let text = c.cmd(&["INFO", "persistence"]).text();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name}"))
        .trim()
        .to_string()
}

/// Fills db 0 with a key of every type in every encoding, db 3 and db 15 with a few keys
/// (some with a TTL), and loads a function library.
fn fill(c: &mut Client) {
    for argv in rdb_fixtures::fixtures() {
        let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let reply = bytes_cmd(c, &argv);
        assert!(!matches!(reply, Value::Error(_)), "{reply:?}");
    }
    ok(c, &["SET", "ttl_string", "v", "PX", "86400000"]);
    ok(c, &["SELECT", "3"]);
    ok(c, &["HSET", "h3", "f", "v"]);
    ok(c, &["PEXPIREAT", "h3", "4102444800000"]);
    ok(c, &["SELECT", "15"]);
    ok(c, &["SADD", "in_fifteen", "x", "y"]);
    ok(c, &["SELECT", "0"]);
    ok(c, &["FUNCTION", "LOAD", LIBRARY]);
}

type Keys = BTreeMap<(u64, Vec<u8>), (RdbValue, i64)>;

/// Every key of every database as a server answers: its value (from DUMP) and PEXPIRETIME.
fn keys_of(c: &mut Client) -> Keys {
    let mut all = BTreeMap::new();
    for db in 0..16u64 {
        ok(c, &["SELECT", &db.to_string()]);
        let Value::Array(Some(keys)) = ok(c, &["KEYS", "*"]) else { panic!("KEYS") };
        for key in keys {
            let Value::Bulk(Some(key)) = key else { panic!("a key") };
            let Value::Bulk(Some(payload)) = bytes_cmd(c, &[b"DUMP", &key]) else { panic!("DUMP") };
            let Value::Int(at) = bytes_cmd(c, &[b"PEXPIRETIME", &key]) else { panic!("PEXPIRETIME") };
            all.insert((db, key), (normalized(restore(&payload).expect("DUMP restores")), at));
        }
    }
    ok(c, &["SELECT", "0"]);
    all
}

fn assert_same(got: &Keys, want: &Keys, what: &str) {
    let keys: std::collections::BTreeSet<_> = want.keys().chain(got.keys()).collect();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|(db, key)| format!("db {db} {}", String::from_utf8_lossy(key)))
        .collect();
    assert!(differ.is_empty(), "{what}: these keys differ: {differ:?}");
}

fn library_code(c: &mut Client) -> Vec<String> {
    let Value::Array(Some(libs)) = ok(c, &["FUNCTION", "LIST", "WITHCODE"]) else { panic!() };
    libs.iter()
        .map(|lib| {
            let Value::Array(Some(fields)) = lib else { panic!() };
            fields[fields.len() - 1].text()
        })
        .collect()
}

#[test]
fn our_dump_loads_in_redis_and_redis_dump_loads_here() {
    let Some(redis) = common::redis(&["--enable-debug-command", "local"]) else { return };
    let ours = rediskv(&[]);
    let mut c = ours.client();
    fill(&mut c);
    let want = keys_of(&mut c);
    assert!(want.len() > 20);
    assert_eq!(ok(&mut c, &["SAVE"]), Value::Status("OK".into()));
    let file = std::fs::read(dir_of(&mut c).join("dump.rdb")).expect("SAVE wrote dump.rdb");

    // Ours → redis-server (DEBUG RELOAD NOSAVE runs its start-up loader on the file).
    let mut r = redis.client();
    std::fs::write(dir_of(&mut r).join("dump.rdb"), &file).expect("copy");
    assert_eq!(ok(&mut r, &["DEBUG", "RELOAD", "NOSAVE"]), Value::Status("OK".into()));
    assert_same(&keys_of(&mut r), &want, "our dump.rdb loaded in redis-server");
    assert_eq!(library_code(&mut r), vec![LIBRARY.to_string()]);

    // redis-server's own file → a fresh server started on it.
    ok(&mut r, &["SET", "from_redis", "1"]);
    ok(&mut r, &["SAVE"]);
    let want = keys_of(&mut r);
    let dir = TempDir::new("from-redis");
    std::fs::copy(dir_of(&mut r).join("dump.rdb"), dir.0.join("dump.rdb")).expect("copy");
    let loaded = rediskv(&["--dir", dir.path()]);
    let mut c = loaded.client();
    assert_same(&keys_of(&mut c), &want, "redis-server's dump.rdb loaded at start");
    assert_eq!(library_code(&mut c), vec![LIBRARY.to_string()]);
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_loaded"), want.len().to_string());
}

/// The keys of an RDB file, by database.
fn file_keys(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let items = RdbFileReader::read_all(&std::fs::read(path).expect("read the file")).expect("a valid file");
    items
        .into_iter()
        .filter_map(|i| match i {
            RdbItem::Entry(e) => Some((e.db, e.key.to_vec())),
            _ => None,
        })
        .collect()
}

fn wait_for_bgsave(c: &mut Client) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(c, "rdb_bgsave_in_progress") == "1" {
        assert!(Instant::now() < deadline, "BGSAVE never finished");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A BGSAVE taken while a client writes `a:0 z:0`, `a:1 z:1`, … (one MSET each) is a point
/// in time: the file holds exactly `a:0` to `a:N-1` and `z:0` to `z:N-1` for some N (a walk
/// of the live store, which reaches the `z:` keys after the 20,000 `m:` keys, would find more
/// of them than of the `a:` keys), and a fresh server started on a copy of it holds exactly
/// those keys, FSCK clean.
fn backup_under_load(engine: &str) {
    let dir = TempDir::new(&format!("backup-{engine}"));
    let server = rediskv(&["--engine", engine, "--dir", dir.path()]);
    let mut c = server.client();
    for i in 0..3000 {
        ok(&mut c, &["RPUSH", &format!("list:{}", i % 10), &i.to_string()]);
    }
    for chunk in 0..20 {
        let mut mset = vec!["MSET".to_string()];
        mset.extend((0..1000).flat_map(|i| [format!("m:{chunk}:{i}"), "v".into()]));
        ok(&mut c, &mset.iter().map(String::as_str).collect::<Vec<_>>());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut writer = server.client();
    let writing = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && n < 1_000_000 {
                let (a, z) = (format!("a:{n}"), format!("z:{n}"));
                assert_eq!(writer.cmd(&["MSET", &a, "v", &z, "v"]), Value::Status("OK".into()));
                n += 1;
            }
            n
        })
    };
    // Some writes before the snapshot, and more during and after it.
    while c.cmd(&["EXISTS", "a:500"]) != Value::Int(1) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(ok(&mut c, &["BGSAVE"]), Value::Status("Background saving started".into()));
    wait_for_bgsave(&mut c);
    stop.store(true, Ordering::Relaxed);
    let written = writing.join().expect("the writer");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "rdb_saves"), "1");

    let keys = file_keys(&dir.0.join("dump.rdb"));
    let numbers = |prefix: &str| {
        let mut seq: Vec<u64> = keys
            .iter()
            .filter_map(|(_, k)| std::str::from_utf8(k).ok()?.strip_prefix(prefix)?.parse().ok())
            .collect();
        seq.sort_unstable();
        seq
    };
    let (a, z) = (numbers("a:"), numbers("z:"));
    let n = a.len() as u64;
    assert!(n > 500 && n < written, "{n} of {written} writes in the file");
    assert_eq!(a, (0..n).collect::<Vec<_>>(), "the file holds a prefix of the writes");
    assert_eq!(z, a, "and each write whole");

    let restored_dir = TempDir::new(&format!("restored-{engine}"));
    std::fs::copy(dir.0.join("dump.rdb"), restored_dir.0.join("dump.rdb")).expect("copy the backup");
    let restored = rediskv(&["--engine", engine, "--dir", restored_dir.path()]);
    let mut r = restored.client();
    assert_eq!(r.cmd(&["DBSIZE"]), Value::Int(keys.len() as i64));
    assert_eq!(r.cmd(&["EXISTS", &format!("z:{}", n - 1)]), Value::Int(1));
    assert_eq!(r.cmd(&["EXISTS", &format!("a:{n}")]), Value::Int(0));
    assert_eq!(r.cmd(&["LLEN", "list:3"]), Value::Int(300));
    assert_eq!(r.cmd(&["FSCK"]), Value::Array(Some(vec![])));
}

#[test]
fn a_backup_under_writes_is_one_point_in_time_memory() {
    backup_under_load("memory");
}

#[test]
fn a_backup_under_writes_is_one_point_in_time_fjall() {
    backup_under_load("fjall");
}

#[test]
fn shutdown_save_and_nosave_and_save_points() {
    let dir = TempDir::new("shutdown");
    let path = dir.0.join("dump.rdb");
    {
        let server = rediskv(&["--dir", dir.path(), "--save", ""]);
        let mut c = server.client();
        ok(&mut c, &["SET", "k", "1"]);
        c.send(&[b"SHUTDOWN", b"NOSAVE"]);
        let _ = c.try_read();
    }
    assert!(!path.exists(), "SHUTDOWN NOSAVE wrote nothing");
    {
        let server = rediskv(&["--dir", dir.path(), "--save", ""]);
        let mut c = server.client();
        ok(&mut c, &["SET", "k", "2"]);
        c.send(&[b"SHUTDOWN", b"SAVE"]);
        let _ = c.try_read();
    }
    assert_eq!(file_keys(&path), vec![(0, b"k".to_vec())]);
    // The file loads at the next start; a `save` point then saves by itself.
    let server = rediskv(&["--dir", dir.path(), "--save", "1 1"]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["GET", "k"]), Value::Bulk(Some(b"2".to_vec())));
    let before: u64 = ok(&mut c, &["LASTSAVE"]).clone().as_int();
    ok(&mut c, &["SET", "new", "1"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !file_keys(&path).contains(&(0, b"new".to_vec())) {
        assert!(Instant::now() < deadline, "the save point never saved");
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for_bgsave(&mut c);
    assert!(ok(&mut c, &["LASTSAVE"]).as_int() >= before);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
}

trait AsInt {
    fn as_int(&self) -> u64;
}

impl AsInt for Value {
    fn as_int(&self) -> u64 {
        match self {
            Value::Int(n) => *n as u64,
            other => panic!("not an integer: {other:?}"),
        }
    }
}

#[test]
fn a_corrupt_dump_stops_the_start_and_names_the_offset() {
    let dir = TempDir::new("corrupt");
    {
        let server = rediskv(&["--dir", dir.path()]);
        let mut c = server.client();
        ok(&mut c, &["SET", "k", "v"]);
        ok(&mut c, &["SAVE"]);
    }
    let path = dir.0.join("dump.rdb");
    let mut file = std::fs::read(&path).expect("dump.rdb");
    file.truncate(file.len() - 12);
    std::fs::write(&path, &file).expect("cut the file");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rediskv-server"))
        .args(["--engine", "memory", "--port", "0", "--dir", dir.path()])
        .output()
        .expect("run the server");
    // The refusal is in the server's log (standard output without a logfile, as Redis').
    let log = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("unexpected end of file at byte"), "{log}");
}
