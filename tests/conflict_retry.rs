//! The transaction hooks of `KvBackend` (`begin`/`finish`, `Error::Conflict`): the engine
//! runs a refused command or EXEC again from the start, at most `CONFLICT_ATTEMPTS` times,
//! and a refused attempt leaves nothing behind; the memory backend's defaults change nothing.

use std::sync::Mutex;

use bytes::Bytes;
use rediskv::CONFLICT_ATTEMPTS;
use rediskv::gc::{ExpirySweep, expire_step};
use rediskv::{ColumnFamily, Direction, KvBackend, MemoryBackend, ScanIter, WriteBatch};
use rediskv::{Engine, Reply};
use rediskv::{Error, Result};
use rediskv::{KeyRange, ManualClock};

/// What the [`Refusing`] backend saw.
#[derive(Debug, Default)]
struct Log {
    /// Refusals still to give.
    refusals: u32,
    /// Inside begin..finish.
    open: bool,
    /// Whether the open transaction's write was refused.
    refused: bool,
    begins: u32,
    writes: u32,
}

/// A memory backend whose next `refusals` writes fail with `Error::Conflict` (applying
/// nothing), as a backend shared with other processes refuses a stale transaction.
#[derive(Default)]
struct Refusing {
    inner: MemoryBackend,
    log: Mutex<Log>,
}

impl Refusing {
    fn refuse(&self, n: u32) {
        self.log.lock().unwrap().refusals = n;
    }

    fn counts(&self) -> (u32, u32) {
        let log = self.log.lock().unwrap();
        (log.begins, log.writes)
    }
}

impl KvBackend for Refusing {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        self.inner.get(cf, key)
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        self.inner.scan(cf, range, direction)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut log = self.log.lock().unwrap();
        assert!(log.open, "every write of the engine is inside begin..finish");
        log.writes += 1;
        if log.refusals > 0 {
            log.refusals -= 1;
            log.refused = true;
            return Err(Error::Conflict("a key read was written since".into()));
        }
        self.inner.write(batch)
    }

    fn begin(&self) {
        let mut log = self.log.lock().unwrap();
        assert!(!log.open, "begin is not nested");
        (log.open, log.refused) = (true, false);
        log.begins += 1;
    }

    fn finish(&self) -> bool {
        let mut log = self.log.lock().unwrap();
        assert!(log.open, "finish follows begin");
        log.open = false;
        log.refused
    }
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn a_refused_command_runs_again_and_applies_once() {
    let engine = Engine::new(Refusing::default());
    let mut s = engine.session();
    engine.backend().refuse(3);
    assert_eq!(
        engine.run(&mut s, &["INCR", "n"]),
        Reply::Integer(1),
        "the reply of the attempt that committed"
    );
    assert_eq!(engine.backend().counts(), (4, 4));
    assert_eq!(engine.run(&mut s, &["GET", "n"]), bulk("1"), "applied once");
    assert_eq!(engine.backend().counts(), (5, 4), "a read-only command is a transaction without a write");
    engine.backend().refuse(2);
    assert_eq!(engine.run(&mut s, &["HINCRBY", "h", "f", "5"]), Reply::Integer(5));
    assert_eq!(engine.run(&mut s, &["HGETALL", "h"]), Reply::Map(vec![(bulk("f"), bulk("5"))]));
}

#[test]
fn a_refused_exec_runs_the_whole_queue_again() {
    let engine = Engine::new(Refusing::default());
    let mut s = engine.session();
    for argv in [&["MULTI"][..], &["INCR", "a"], &["RPUSH", "l", "x"], &["INCR", "a"]] {
        assert!(!matches!(engine.run(&mut s, argv), Reply::Error(_)));
    }
    engine.backend().refuse(2);
    let (begins, _) = engine.backend().counts();
    let reply = engine.run(&mut s, &["EXEC"]);
    assert_eq!(reply, Reply::Array(vec![Reply::Integer(1), Reply::Integer(1), Reply::Integer(2)]));
    assert_eq!(engine.backend().counts().0 - begins, 3, "two refused attempts, one that committed");
    assert_eq!(engine.run(&mut s, &["GET", "a"]), bulk("2"));
    assert_eq!(engine.run(&mut s, &["LRANGE", "l", "0", "-1"]), Reply::Array(vec![bulk("x")]));
}

#[test]
fn a_command_refused_every_time_is_an_error_and_writes_nothing() {
    let engine = Engine::new(Refusing::default());
    let mut s = engine.session();
    engine.backend().refuse(u32::MAX);
    match engine.run(&mut s, &["SET", "k", "v"]) {
        Reply::Error(e) => assert!(e.starts_with("ERR ") && e.contains("conflict"), "{e}"),
        other => panic!("a command refused every time answered {other:?}"),
    }
    assert_eq!(engine.backend().counts(), (CONFLICT_ATTEMPTS, CONFLICT_ATTEMPTS));
    engine.backend().refuse(0);
    assert_eq!(engine.run(&mut s, &["EXISTS", "k"]), Reply::Integer(0));
}

#[test]
fn expire_step_deletes_under_a_transaction_and_a_refusal_deletes_nothing() {
    let clock = std::sync::Arc::new(ManualClock::new(1_000_000));
    let engine = Engine::new(Refusing::default()).with_clock(clock.clone());
    let mut s = engine.session();
    assert_eq!(engine.run(&mut s, &["SET", "k", "v", "PX", "10"]), Reply::OK);
    let range = engine.layout().namespace_range();
    let now = 1_000_100;
    engine.backend().refuse(1);
    let refused = expire_step(&engine, &mut ExpirySweep::new(range.clone()), now, 10);
    assert!(matches!(refused, Err(Error::Conflict(_))), "{refused:?}");
    let metadata_key = engine.layout().metadata_key(b"k");
    assert!(
        engine.backend().get(ColumnFamily::Metadata, &metadata_key).unwrap().is_some(),
        "nothing deleted"
    );
    let step = expire_step(&engine, &mut ExpirySweep::new(range), now, 10).expect("second step");
    assert_eq!(step.removed, vec![Bytes::from(metadata_key.clone())]);
    assert!(engine.backend().get(ColumnFamily::Metadata, &metadata_key).unwrap().is_none());
}

#[test]
fn the_memory_backend_keeps_the_defaults() {
    let backend = MemoryBackend::new();
    backend.begin();
    assert!(!backend.finish(), "a backend without transactions never refuses");
    let engine = Engine::new(backend);
    let mut s = engine.session();
    assert_eq!(engine.run(&mut s, &["INCR", "n"]), Reply::Integer(1));
    assert_eq!(engine.run(&mut s, &["GET", "n"]), bulk("1"));
}

#[test]
fn a_failed_read_inside_exec_commits_nothing() {
    use rediskv::FaultyBackend;
    let mut failures = 0;
    for n in 0..12 {
        let engine = Engine::new(FaultyBackend::new(MemoryBackend::new()));
        let mut s = engine.session();
        assert_eq!(engine.run(&mut s, &["SET", "b", "10"]), Reply::OK);
        for argv in [&["MULTI"][..], &["RPUSH", "l", "x"], &["INCR", "b"], &["SET", "a", "1"]] {
            assert!(!matches!(engine.run(&mut s, argv), Reply::Error(_)));
        }
        engine.backend().fail_read(n);
        let reply = engine.run(&mut s, &["EXEC"]);
        engine.backend().disarm();
        match reply {
            Reply::Error(e) => {
                assert!(e.contains("injected fault"), "{e}");
                failures += 1;
                assert_eq!(
                    engine.run(&mut s, &["EXISTS", "l", "a"]),
                    Reply::Integer(0),
                    "read {n}: nothing applied"
                );
                assert_eq!(engine.run(&mut s, &["GET", "b"]), bulk("10"));
            }
            Reply::Array(replies) => {
                assert_eq!(replies, vec![Reply::Integer(1), Reply::Integer(11), Reply::OK], "read {n}");
                assert_eq!(engine.run(&mut s, &["GET", "b"]), bulk("11"));
            }
            other => panic!("EXEC answered {other:?}"),
        }
    }
    assert!(failures >= 2, "the fault hit reads of the queued commands ({failures})");
}

/// A memory backend with stamps: how many writes each record has had.
#[derive(Default)]
struct Stamped {
    inner: MemoryBackend,
    stamps: Mutex<std::collections::HashMap<(ColumnFamily, Vec<u8>), u64>>,
}

impl KvBackend for Stamped {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        self.inner.get(cf, key)
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        self.inner.scan(cf, range, direction)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut stamps = self.stamps.lock().unwrap();
        for op in batch.ops() {
            let (rediskv::BatchOp::Put { cf, key, .. } | rediskv::BatchOp::Delete { cf, key }) = op;
            *stamps.entry((*cf, key.to_vec())).or_default() += 1;
        }
        self.inner.write(batch)
    }

    fn stamp(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<u64>> {
        Ok(Some(self.stamps.lock().unwrap().get(&(cf, key.to_vec())).copied().unwrap_or(0)))
    }
}

/// Two engines over one store, as two processes over a shared one: WATCH on the first,
/// a write of the watched key through the second, EXEC on the first.
fn watch_across_engines<B: KvBackend>(store: std::sync::Arc<B>) -> (Reply, Reply) {
    let (a, b) = (Engine::new(std::sync::Arc::clone(&store)), Engine::new(store));
    let (mut sa, mut sb) = (a.session(), b.session());
    assert_eq!(a.run(&mut sa, &["WATCH", "k"]), Reply::OK);
    assert_eq!(b.run(&mut sb, &["SET", "k", "theirs"]), Reply::OK);
    assert_eq!(a.run(&mut sa, &["MULTI"]), Reply::OK);
    assert_eq!(a.run(&mut sa, &["SET", "k", "mine"]), Reply::status("QUEUED"));
    let exec = a.run(&mut sa, &["EXEC"]);
    // Without interference the transaction runs.
    for argv in [&["WATCH", "k"][..], &["MULTI"], &["INCR", "c"]] {
        assert!(!matches!(a.run(&mut sa, argv), Reply::Error(_)));
    }
    assert_eq!(a.run(&mut sa, &["EXEC"]), Reply::Array(vec![Reply::Integer(1)]));
    (exec, b.run(&mut sb, &["GET", "k"]))
}

#[test]
fn watch_sees_another_engines_write_through_stamps() {
    let (exec, value) = watch_across_engines(std::sync::Arc::new(Stamped::default()));
    assert_eq!(exec, Reply::NilArray, "EXEC aborts: the watched key was written elsewhere");
    assert_eq!(value, bulk("theirs"));
}

#[test]
fn without_stamps_watch_sees_only_its_own_engine() {
    let (exec, value) = watch_across_engines(std::sync::Arc::new(MemoryBackend::new()));
    assert_eq!(exec, Reply::Array(vec![Reply::OK]), "node-local WATCH: the other engine's write is unseen");
    assert_eq!(value, bulk("mine"));
}
