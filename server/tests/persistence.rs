//! The server on a disk engine: data survives a restart, and a `kill -9` in the middle of a
//! write load leaves a consistent store (FSCK clean, no half transaction) in which every
//! acknowledged write is present, with `--appendfsync always` and with `everysec`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::{Client, Value, rediskv};

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("rediskv-server-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bulk(s: &str) -> Value {
    Value::Bulk(Some(s.as_bytes().to_vec()))
}

/// What the restart test compares: DUMP of every key, and whether it has a TTL.
fn snapshot(c: &mut Client) -> Vec<(String, Value, bool)> {
    let mut keys = c.cmd(&["KEYS", "*"]).texts();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let dump = c.cmd(&["DUMP", &k]);
            let ttl = matches!(c.cmd(&["PTTL", &k]), Value::Int(t) if t > 0);
            (k, dump, ttl)
        })
        .collect()
}

#[test]
fn every_key_ttl_and_collection_is_back_after_a_restart() {
    let dir = TempDir::new("restart");
    for engine in ["fjall"] {
        let before = {
            let server = rediskv(&["--engine", engine, "--dir", dir.path()]);
            let mut c = server.client();
            for args in [
                &["SET", "s", "value"][..],
                &["SET", "ttl", "soon", "EX", "1000"],
                &["HSET", "h", "a", "1", "b", "2"],
                &["PEXPIRE", "h", "5000000"],
                &["RPUSH", "l", "x", "y", "z"],
                &["SADD", "set", "m1", "m2"],
                &["ZADD", "z", "1.5", "a", "-2", "b"],
                &["SETBIT", "bits", "100000", "1"],
                &["PFADD", "hll", "a", "b", "c"],
                &["XADD", "stream", "1-1", "f", "v"],
                &["XADD", "stream", "2-0", "g", "w"],
                &["XGROUP", "CREATE", "stream", "group", "0"],
                &["XREADGROUP", "GROUP", "group", "alice", "COUNT", "1", "STREAMS", "stream", ">"],
                &["SELECT", "3"],
                &["SET", "in-db-3", "v"],
                &["SELECT", "5"],
                &["SET", "in-db-5", "v"],
                &["SWAPDB", "5", "6"],
            ] {
                assert!(!matches!(c.cmd(args), Value::Error(_)), "{args:?}");
            }
            c.cmd(&["SELECT", "0"]);
            let snap = snapshot(&mut c);
            assert_eq!(snap.len(), 9);
            c.send(&[b"SHUTDOWN"]);
            assert_eq!(c.try_read(), None, "SHUTDOWN closes the connection");
            snap
        };
        let server = rediskv(&["--engine", engine, "--dir", dir.path()]);
        let mut c = server.client();
        assert_eq!(snapshot(&mut c), before, "{engine}: every key, value and TTL is back");
        assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])));
        c.cmd(&["SELECT", "3"]);
        assert_eq!(c.cmd(&["GET", "in-db-3"]), bulk("v"));
        // SWAPDB survives the restart: the key written in 5 is in 6.
        c.cmd(&["SELECT", "6"]);
        assert_eq!(c.cmd(&["GET", "in-db-5"]), bulk("v"));
        c.cmd(&["SELECT", "5"]);
        assert_eq!(c.cmd(&["GET", "in-db-5"]), Value::Bulk(None));
        // A new collection after the restart does not see the old one's elements.
        c.cmd(&["SELECT", "0"]);
        assert_eq!(c.cmd(&["DEL", "h"]), Value::Int(1));
        assert_eq!(c.cmd(&["HSET", "h", "c", "3"]), Value::Int(1));
        assert_eq!(c.cmd(&["HGETALL", "h"]).texts(), ["c", "3"]);
    }
}

/// Starting the server on `dir`'s store with each of `others` (another layout, or other
/// options of the same one) fails, naming the stored layout (`stored`).
fn refused_with_other_layouts(others: &[&[&str]], stored: &str) {
    for other in others {
        let out = Command::new(env!("CARGO_BIN_EXE_rediskv-server"))
            .args(["--port", "0"])
            .args(*other)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{log}");
        assert!(log.contains(stored), "{log}");
        assert!(log.contains("refusing to open it"), "{log}");
    }
}

#[test]
fn a_neokv_store_is_back_after_a_restart_and_refuses_another_layout() {
    let dir = TempDir::new("neokv");
    let neokv = ["--engine", "fjall", "--dir", dir.path(), "--layout", "neokv", "--neokv-region-id", "7"];
    let before = {
        let server = rediskv(&neokv);
        let mut c = server.client();
        for args in [
            &["SET", "s", "value", "EX", "1000"][..],
            &["HSET", "h", "a", "1"],
            &["RPUSH", "l", "x", "y"],
            &["SADD", "set", "m"],
            &["ZADD", "z", "2", "a"],
            &["SETBIT", "bits", "7", "1"],
            &["SELECT", "2"],
            &["SET", "in-db-2", "v"],
            &["SELECT", "0"],
        ] {
            assert!(!matches!(c.cmd(args), Value::Error(_)), "{args:?}");
        }
        assert_eq!(c.cmd(&["TYPE", "bits"]), Value::Status("string".into()), "bitmaps are strings in NeoKV");
        assert_eq!(
            c.cmd(&["XADD", "stream", "*", "f", "v"]),
            Value::Error("ERR the neokv layout cannot store a stream key".into())
        );
        assert_eq!(
            c.cmd(&["NAMESPACE", "ADD", "tenant", "token"]),
            Value::Error("ERR forbidden to add namespace when requirepass was empty".into())
        );
        c.cmd(&["CONFIG", "SET", "requirepass", "pw"]);
        c.cmd(&["AUTH", "pw"]);
        assert_eq!(
            c.cmd(&["NAMESPACE", "ADD", "tenant", "token"]),
            Value::Error("ERR the store's layout has no namespaces".into())
        );
        let snap = snapshot(&mut c);
        assert_eq!(snap.len(), 6);
        c.send(&[b"SHUTDOWN"]);
        assert_eq!(c.try_read(), None, "SHUTDOWN closes the connection");
        snap
    };
    {
        let server = rediskv(&neokv);
        let mut c = server.client();
        assert_eq!(snapshot(&mut c), before);
        assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])));
        c.cmd(&["SELECT", "2"]);
        assert_eq!(c.cmd(&["GET", "in-db-2"]), bulk("v"));
    }
    // Another layout, or another region, is refused with both named.
    refused_with_other_layouts(
        &[&["--engine", "fjall", "--dir", dir.path()][..], &neokv[..6]],
        "neokv region 7 index 1",
    );
}

#[test]
fn a_camellia_store_is_back_after_a_restart_and_refuses_another_layout() {
    let dir = TempDir::new("camellia");
    let camellia = [
        "--engine",
        "fjall",
        "--dir",
        dir.path(),
        "--layout",
        "camellia",
        "--camellia-namespace",
        "app",
        "--camellia-set-version",
        "1",
    ];
    let before = {
        let server = rediskv(&camellia);
        let mut c = server.client();
        for args in [
            &["SET", "s", "value", "EX", "1000"][..],
            &["HSET", "h", "a", "1"],
            &["SADD", "set", "m", "n"],
            &["ZADD", "z", "2", "a", "-3", "b"],
            &["SELECT", "2"],
            &["SET", "in-db-2", "v"],
            &["SELECT", "0"],
        ] {
            assert!(!matches!(c.cmd(args), Value::Error(_)), "{args:?}");
        }
        assert_eq!(
            c.cmd(&["RPUSH", "l", "x"]),
            Value::Error("ERR the camellia layout cannot store a list key".into())
        );
        assert_eq!(
            c.cmd(&["SREM", "set", "m", "absent"]),
            Value::Int(2),
            "encode version 1 answers as camellia"
        );
        let snap = snapshot(&mut c);
        assert_eq!(snap.len(), 4);
        c.send(&[b"SHUTDOWN"]);
        assert_eq!(c.try_read(), None, "SHUTDOWN closes the connection");
        snap
    };
    {
        let server = rediskv(&camellia);
        let mut c = server.client();
        assert_eq!(snapshot(&mut c), before);
        assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])));
        assert_eq!(c.cmd(&["ZRANGE", "z", "0", "-1"]).texts(), ["b", "a"]);
    }
    // Another layout, or another namespace, is refused with both named.
    refused_with_other_layouts(
        &[&["--engine", "fjall", "--dir", dir.path()][..], &camellia[..6]],
        "camellia namespace \"app\"; hash version 0; set version 1",
    );
}

#[test]
fn a_titea_store_is_back_after_a_restart_and_refuses_another_layout() {
    let dir = TempDir::new("titea");
    let titea =
        ["--engine", "fjall", "--dir", dir.path(), "--layout", "titea", "--titea-namespace", "shop.cart"];
    let before = {
        let server = rediskv(&titea);
        let mut c = server.client();
        for args in [
            &["SET", "s", "value", "EX", "1000"][..],
            &["HSET", "h", "a", "1"],
            &["RPUSH", "l", "x", "y"],
            &["LPUSH", "l", "w"],
            &["SADD", "set", "m"],
            &["ZADD", "z", "2", "a", "-3", "b"],
        ] {
            assert!(!matches!(c.cmd(args), Value::Error(_)), "{args:?}");
        }
        assert_eq!(
            c.cmd(&["XADD", "x", "*", "f", "v"]),
            Value::Error("ERR the titea layout cannot store a stream key".into())
        );
        let snap = snapshot(&mut c);
        assert_eq!(snap.len(), 5);
        c.send(&[b"SHUTDOWN"]);
        assert_eq!(c.try_read(), None, "SHUTDOWN closes the connection");
        snap
    };
    {
        let server = rediskv(&titea);
        let mut c = server.client();
        assert_eq!(snapshot(&mut c), before);
        assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])));
        assert_eq!(c.cmd(&["LRANGE", "l", "0", "-1"]).texts(), ["w", "x", "y"]);
    }
    refused_with_other_layouts(
        &[&["--engine", "fjall", "--dir", dir.path()][..], &titea[..6]],
        "titea namespace \"shop.cart\"",
    );
}

/// Finds redis-benchmark, failing under CI when it is missing.
fn redis_benchmark() -> Option<&'static str> {
    let found = Command::new("redis-benchmark").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        common::missing_tool(&common::test_name(), "redis-benchmark", "apt-get install redis-server");
    }
    found.then_some("redis-benchmark")
}

/// What the writer threads had acknowledged when the server died.
#[derive(Default)]
struct Acked {
    /// The last INCR reply.
    counter: i64,
    /// Every RPUSHed value that was acknowledged.
    pushed: Vec<String>,
    /// Transfers between `a` and `b` acknowledged by EXEC.
    transfers: i64,
}

/// Writes until the connection breaks, recording what was acknowledged.
fn writer(port: u16, acked: Arc<Mutex<Acked>>, stop: Arc<AtomicBool>) {
    let mut c = Client::connect(port);
    let mut i = 0i64;
    while !stop.load(Ordering::SeqCst) {
        i += 1;
        let Some(Value::Int(n)) = ({
            c.send(&[b"INCR", b"counter"]);
            c.try_read()
        }) else {
            return;
        };
        {
            let mut acked = acked.lock().unwrap();
            acked.counter = acked.counter.max(n);
        }
        let value = format!("v{i}");
        c.send(&[b"RPUSH", b"log", value.as_bytes()]);
        let Some(Value::Int(_)) = c.try_read() else { return };
        acked.lock().unwrap().pushed.push(value);
        // A transfer: a -= 1, b += 1 in one transaction; the sum stays 0.
        for args in [&[&b"MULTI"[..]][..], &[b"DECR", b"a"], &[b"INCR", b"b"]] {
            c.send(args);
            if c.try_read().is_none() {
                return;
            }
        }
        c.send(&[b"EXEC"]);
        let Some(Value::Array(Some(_))) = c.try_read() else { return };
        acked.lock().unwrap().transfers += 1;
    }
}

fn int(v: Value) -> i64 {
    match v {
        Value::Int(n) => n,
        Value::Bulk(Some(b)) => String::from_utf8(b).unwrap().parse().unwrap(),
        Value::Bulk(None) => 0,
        other => panic!("not a number: {other:?}"),
    }
}

fn crash_under_load(dir: &Path, appendfsync: &str) {
    let Some(bench) = redis_benchmark() else { return };
    let dir = dir.to_str().unwrap();
    let mut server = rediskv(&["--engine", "fjall", "--dir", dir, "--appendfsync", appendfsync]);
    let acked = Arc::new(Mutex::new(Acked::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|_| {
            let (acked, stop, port) = (acked.clone(), stop.clone(), server.port);
            std::thread::spawn(move || writer(port, acked, stop))
        })
        .collect();
    let mut load = Command::new(bench)
        .args(["-p", &server.port.to_string(), "-q", "-n", "2000000", "-P", "16", "-c", "20", "-r", "5000"])
        .args(["-t", "set,incr,lpush,rpop,sadd,hset,zadd,spop"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-benchmark");
    // Let the load run until the writers have some acknowledged history, then kill -9.
    let mut c = server.client();
    loop {
        if acked.lock().unwrap().transfers >= 50 {
            break;
        }
        assert_eq!(c.cmd(&["PING"]), Value::Status("PONG".into()));
    }
    server.kill();
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.join().unwrap();
    }
    let _ = load.kill();
    let _ = load.wait();
    let acked = std::mem::take(&mut *acked.lock().unwrap());

    let server = rediskv(&["--engine", "fjall", "--dir", dir, "--appendfsync", appendfsync]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])), "the store is consistent after kill -9");
    let (a, b) = (int(c.cmd(&["GET", "a"])), int(c.cmd(&["GET", "b"])));
    assert_eq!(a + b, 0, "no transaction is half-applied (a={a}, b={b})");
    let counter = int(c.cmd(&["GET", "counter"]));
    let log = c.cmd(&["LRANGE", "log", "0", "-1"]).texts();
    // Everything present was written in order: the log is a prefix-closed history.
    assert!(log.len() as i64 <= counter + 3 && -a <= counter + 3, "more effects than requests");
    // A killed process loses nothing acknowledged in either mode (group commit hands the
    // journal to the OS before the replies); `always` also survives power loss.
    assert!(counter >= acked.counter, "acknowledged INCR lost: {counter} < {}", acked.counter);
    for v in &acked.pushed {
        assert!(log.contains(v), "acknowledged RPUSH {v} lost");
    }
    assert!(b >= acked.transfers, "acknowledged EXEC lost: {b} < {}", acked.transfers);
}

#[test]
fn kill_9_under_load_keeps_the_store_consistent() {
    let dir = TempDir::new("crash-everysec");
    crash_under_load(&dir.0, "everysec");
}

#[test]
fn kill_9_with_appendfsync_always_keeps_every_acknowledged_write() {
    let dir = TempDir::new("crash-always");
    crash_under_load(&dir.0, "always");
}

fn info_field(c: &mut Client, section: &str, name: &str) -> u64 {
    let text = c.cmd(&["INFO", section]).text();
    let line =
        text.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or_else(|| panic!("no {name}"));
    line.trim().parse().unwrap()
}

#[test]
fn cache_size_sets_the_block_cache_and_a_size_under_1mb_is_refused() {
    let dir = TempDir::new("cache-size");
    let server = rediskv(&["--engine", "fjall", "--dir", dir.path(), "--cache-size", "8mb"]);
    assert_eq!(info_field(&mut server.client(), "memory", "rediskv_block_cache_capacity"), 8 << 20);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rediskv-server"))
        .args(["--engine", "fjall", "--dir", dir.path(), "--write-buffer-size", "64kb", "--port", "0"])
        .output()
        .expect("run the server");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--write-buffer-size must be a size of at least 1mb")
    );
}

#[test]
fn info_memory_says_where_a_disk_engines_bytes_are() {
    let dir = TempDir::new("usage");
    let server = rediskv(&["--engine", "fjall", "--dir", dir.path()]);
    let mut c = server.client();
    let mut rpush = vec!["RPUSH".to_string(), "list".to_string()];
    rpush.extend((0..5000).map(|i| format!("element-{i}")));
    let rpush: Vec<&str> = rpush.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&rpush), Value::Int(5000));
    // Written, not yet flushed: in a memtable, and in the journal.
    assert!(info_field(&mut c, "memory", "rediskv_memtables_bytes") > 50_000);
    assert!(info_field(&mut c, "memory", "rediskv_disk_journals_bytes") > 50_000);
    assert!(info_field(&mut c, "memory", "rediskv_block_cache_capacity") > 0);
    // SAVE flushes the memtables to tables.
    assert_eq!(c.cmd(&["SAVE"]), Value::Status("OK".into()));
    assert!(info_field(&mut c, "memory", "rediskv_disk_tables_bytes") > 10_000);
    // fjall's worker takes a flushed memtable off its count just after the flush.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while info_field(&mut c, "memory", "rediskv_memtables_bytes") > 0 && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut c, "memory", "rediskv_memtables_bytes"), 0);
    // BGSAVE does the same on a thread of its own.
    assert_eq!(c.cmd(&["SET", "after", "save"]), Value::Status("OK".into()));
    assert!(info_field(&mut c, "memory", "rediskv_memtables_bytes") > 0);
    assert_eq!(c.cmd(&["BGSAVE"]), Value::Status("Background saving started".into()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while info_field(&mut c, "persistence", "rdb_bgsave_in_progress") == 1 {
        assert!(std::time::Instant::now() < deadline, "BGSAVE never finished");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut c, "memory", "rediskv_memtables_bytes"), 0);
}

/// A disk store's key filter fills from the store at start and then answers: every key
/// written before the restart and since is found, and each new key counts once.
#[test]
fn the_key_filter_fills_from_the_store_and_misses_no_key() {
    let dir = TempDir::new("key-filter");
    {
        let server = rediskv(&["--engine", "fjall", "--dir", dir.path()]);
        let mut c = server.client();
        for i in 0..2000 {
            assert_eq!(c.cmd(&["SET", &format!("old{i}"), "v"]), Value::Status("OK".into()));
        }
        assert_eq!(c.cmd(&["SAVE"]), Value::Status("OK".into()));
    }
    let server = rediskv(&["--engine", "fjall", "--dir", dir.path()]);
    let mut c = server.client();
    // Sized for at least a million keys: 12 bits each, rounded up to a power of two.
    assert_eq!(info_field(&mut c, "memory", "rediskv_key_filter_bytes"), 2 << 20);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while info_field(&mut c, "memory", "rediskv_key_filter_active") == 0 {
        assert!(std::time::Instant::now() < deadline, "the key filter was never filled");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for i in 0..2000 {
        assert_eq!(c.cmd(&["GET", &format!("old{i}")]), bulk("v"), "old{i}");
        assert_eq!(c.cmd(&["SET", &format!("new{i}"), "w"]), Value::Status("OK".into()));
    }
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Int(4000));
    for i in 0..2000 {
        assert_eq!(c.cmd(&["GET", &format!("new{i}")]), bulk("w"), "new{i}");
        assert_eq!(c.cmd(&["GET", &format!("absent{i}")]), Value::Bulk(None));
        assert_eq!(c.cmd(&["EXISTS", &format!("old{i}"), &format!("absent{i}")]), Value::Int(1));
    }
}
