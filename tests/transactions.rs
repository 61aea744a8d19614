//! MULTI / EXEC / DISCARD / WATCH / UNWATCH through `Engine` and `Session`s: Redis 7.0's
//! replies and errors (checked against redis-server 7.0.15), WATCH aborts, EXEC seeing its
//! own writes, touched keys, and a failing commit writing nothing.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use common::{T0_MS, bulk, err, int};
use rediskv::server::{Listeners, Touch};
use rediskv::{ColumnFamily, Direction, KvBackend, MemoryBackend, ScanIter, WriteBatch};
use rediskv::{Engine, Reply, Session};
use rediskv::{KeyRange, ManualClock};

fn engine() -> (Engine<MemoryBackend>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0_MS));
    (Engine::new(MemoryBackend::new()).with_clock(clock.clone()).with_seed(1), clock)
}

fn run<B: KvBackend>(e: &Engine<B>, s: &mut Session, line: &str) -> Reply {
    e.run(s, &line.split(' ').collect::<Vec<_>>())
}

fn queued() -> Reply {
    Reply::status("QUEUED")
}

#[test]
fn queue_and_exec_see_their_own_writes() {
    let (e, _) = engine();
    let mut s = e.session();
    assert_eq!(run(&e, &mut s, "MULTI"), Reply::OK);
    assert!(s.in_multi());
    for line in ["SET a 1", "INCR a", "LPUSH a x", "GET a", "SELECT 2", "SET b 1"] {
        assert_eq!(run(&e, &mut s, line), queued(), "{line}");
    }
    let mut other = e.session();
    assert_eq!(run(&e, &mut other, "GET a"), Reply::Nil, "nothing is applied before EXEC");
    assert_eq!(
        run(&e, &mut s, "EXEC"),
        Reply::Array(vec![Reply::OK, int(2), common::wrongtype(), bulk("2"), Reply::OK, Reply::OK])
    );
    assert_eq!(s.db(), 2, "SELECT inside the transaction sticks");
    let touched: Vec<_> = s.touched().iter().map(|t| (e.touched_key(t).unwrap(), t.kind)).collect();
    assert_eq!(
        touched,
        [
            ((0, Bytes::from("a")), Touch::Written),
            ((0, Bytes::from("a")), Touch::Written),
            ((2, Bytes::from("b")), Touch::Written)
        ]
    );
    assert_eq!(run(&e, &mut other, "GET a"), bulk("2"));
    assert_eq!(run(&e, &mut s, "GET b"), bulk("1"));
}

#[test]
fn errors_match_redis() {
    let (e, _) = engine();
    let mut s = e.session();
    assert_eq!(run(&e, &mut s, "EXEC"), err("ERR EXEC without MULTI"));
    assert_eq!(run(&e, &mut s, "DISCARD"), err("ERR DISCARD without MULTI"));
    assert_eq!(run(&e, &mut s, "UNWATCH"), Reply::OK);
    assert_eq!(run(&e, &mut s, "WATCH"), err("ERR wrong number of arguments for 'watch' command"));
    assert_eq!(run(&e, &mut s, "MULTI"), Reply::OK);
    assert_eq!(run(&e, &mut s, "MULTI"), err("ERR MULTI calls can not be nested"));
    assert_eq!(run(&e, &mut s, "SET a 1"), queued());
    assert_eq!(run(&e, &mut s, "WATCH a"), err("ERR WATCH inside MULTI is not allowed"));
    assert_eq!(run(&e, &mut s, "UNWATCH"), queued());
    // Neither refusal above poisons the transaction.
    assert_eq!(run(&e, &mut s, "EXEC"), Reply::Array(vec![Reply::OK, Reply::OK]));

    assert_eq!(run(&e, &mut s, "MULTI"), Reply::OK);
    assert_eq!(run(&e, &mut s, "SET a"), err("ERR wrong number of arguments for 'set' command"));
    assert_eq!(run(&e, &mut s, "SET a 2"), queued());
    assert_eq!(run(&e, &mut s, "EXEC"), err("EXECABORT Transaction discarded because of previous errors."));
    assert!(!s.in_multi());
    assert_eq!(run(&e, &mut s, "GET a"), bulk("1"), "an aborted transaction writes nothing");

    assert_eq!(run(&e, &mut s, "MULTI"), Reply::OK);
    assert_eq!(run(&e, &mut s, "NOP x"), err("ERR unknown command 'NOP', with args beginning with: 'x' "));
    assert_eq!(run(&e, &mut s, "EXEC"), err("EXECABORT Transaction discarded because of previous errors."));

    assert_eq!(run(&e, &mut s, "MULTI"), Reply::OK);
    assert_eq!(run(&e, &mut s, "SET a 3"), queued());
    assert_eq!(run(&e, &mut s, "DISCARD"), Reply::OK);
    assert_eq!(run(&e, &mut s, "DISCARD"), err("ERR DISCARD without MULTI"));
    assert_eq!(run(&e, &mut s, "GET a"), bulk("1"));
    assert_eq!(run(&e, &mut s, "MULTI"), Reply::OK);
    assert_eq!(run(&e, &mut s, "EXEC"), Reply::Array(vec![]));
}

#[test]
fn a_bitfield_whose_writes_all_fail_creates_or_grows_its_key_without_touching_it() {
    // Redis 7.0 makes room for every write of a BITFIELD, then signals the key only when a
    // write took place: a key created or grown by failed writes alone aborts no EXEC
    // (replies checked against redis-server 7.0.15).
    let (e, _) = engine();
    let mut s = e.session();
    let exec_after = |s: &mut Session, bitfield: &str| {
        assert_eq!(run(&e, s, "WATCH bf"), Reply::OK);
        let reply = run(&e, s, bitfield);
        assert_eq!(run(&e, s, "MULTI"), Reply::OK);
        assert_eq!(run(&e, s, "INCR n"), queued());
        (reply, run(&e, s, "EXEC"))
    };
    let (reply, exec) = exec_after(&mut s, "BITFIELD bf OVERFLOW FAIL SET u8 0 300");
    assert_eq!((reply, exec), (Reply::Array(vec![Reply::Nil]), Reply::Array(vec![int(1)])));
    assert_eq!(run(&e, &mut s, "STRLEN bf"), int(1), "created");
    let (reply, exec) = exec_after(&mut s, "BITFIELD bf OVERFLOW FAIL SET u8 100 300");
    assert_eq!((reply, exec), (Reply::Array(vec![Reply::Nil]), Reply::Array(vec![int(2)])));
    assert_eq!(run(&e, &mut s, "STRLEN bf"), int(14), "grown");
    let (reply, exec) = exec_after(&mut s, "BITFIELD bf SET u8 0 1");
    assert_eq!((reply, exec), (Reply::Array(vec![int(0)]), Reply::NilArray), "a write took place");
}

#[test]
fn watch_aborts_on_touch_delete_flush_and_expiry() {
    let (e, clock) = engine();
    let mut a = e.session();
    let mut b = e.session();
    let attempt = |a: &mut Session, watch: &str, b_line: Option<&str>, b: &mut Session| {
        assert_eq!(run(&e, a, &format!("WATCH {watch}")), Reply::OK);
        if let Some(line) = b_line {
            run(&e, b, line);
        }
        assert_eq!(run(&e, a, "MULTI"), Reply::OK);
        assert_eq!(run(&e, a, "INCR n"), queued());
        run(&e, a, "EXEC")
    };
    run(&e, &mut b, "SET k v");
    assert_eq!(attempt(&mut a, "k", None, &mut b), Reply::Array(vec![int(1)]));
    assert_eq!(attempt(&mut a, "k", Some("SET k w"), &mut b), Reply::NilArray);
    assert_eq!(attempt(&mut a, "k", Some("DEL k"), &mut b), Reply::NilArray);
    assert_eq!(
        attempt(&mut a, "k", Some("DEL k"), &mut b),
        Reply::Array(vec![int(2)]),
        "deleting nothing touches nothing"
    );
    assert_eq!(attempt(&mut a, "k", Some("SET other 1"), &mut b), Reply::Array(vec![int(3)]));
    run(&e, &mut b, "SET k v");
    assert_eq!(attempt(&mut a, "k", Some("FLUSHALL"), &mut b), Reply::NilArray);
    assert_eq!(run(&e, &mut a, "GET n"), Reply::Nil);
    // Another database's k is another key.
    run(&e, &mut b, "SET k v");
    run(&e, &mut b, "SELECT 1");
    assert_eq!(attempt(&mut a, "k", Some("SET k w"), &mut b), Reply::Array(vec![int(1)]));
    // Expiry: a live watched key that expires before EXEC aborts it; one already expired
    // when watched does not.
    run(&e, &mut a, "SET t v PX 100");
    assert_eq!(run(&e, &mut a, "WATCH t"), Reply::OK);
    clock.advance_ms(200);
    assert_eq!(run(&e, &mut a, "MULTI"), Reply::OK);
    run(&e, &mut a, "INCR n");
    assert_eq!(run(&e, &mut a, "EXEC"), Reply::NilArray);
    assert_eq!(attempt(&mut a, "t", Some("GET t"), &mut b), Reply::Array(vec![int(2)]));
    // UNWATCH forgets; so does EXEC, so a later write does not matter.
    run(&e, &mut a, "WATCH k");
    run(&e, &mut a, "UNWATCH");
    run(&e, &mut b, "SELECT 0");
    run(&e, &mut b, "SET k x");
    assert_eq!(run(&e, &mut a, "MULTI"), Reply::OK);
    run(&e, &mut a, "INCR n");
    assert_eq!(run(&e, &mut a, "EXEC"), Reply::Array(vec![int(3)]));
    // A client touching its own watched key aborts its transaction too.
    run(&e, &mut a, "WATCH k");
    run(&e, &mut a, "SET k y");
    run(&e, &mut a, "MULTI");
    run(&e, &mut a, "INCR n");
    assert_eq!(run(&e, &mut a, "EXEC"), Reply::NilArray);
    assert_eq!(a.watched_count(), 0);
}

#[test]
fn lazily_expired_keys_are_reported_as_touched() {
    let (e, clock) = engine();
    let mut s = e.session();
    run(&e, &mut s, "SET t v PX 10");
    clock.advance_ms(20);
    assert_eq!(run(&e, &mut s, "GET t"), Reply::Nil);
    let touched: Vec<_> = s.touched().iter().map(|t| (e.touched_key(t).unwrap(), t.kind)).collect();
    assert_eq!(touched, [((0, Bytes::from("t")), Touch::Expired)]);
    assert_eq!(run(&e, &mut s, "GET missing"), Reply::Nil);
    assert!(s.touched().is_empty());
}

/// A backend whose writes fail while `fail` is set.
struct Flaky {
    inner: MemoryBackend,
    fail: AtomicBool,
}

impl KvBackend for Flaky {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> rediskv::Result<Option<Bytes>> {
        self.inner.get(cf, key)
    }
    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, d: Direction) -> rediskv::Result<ScanIter<'a>> {
        self.inner.scan(cf, range, d)
    }
    fn write(&self, batch: WriteBatch) -> rediskv::Result<()> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(rediskv::Error::Backend("disk on fire".into()));
        }
        self.inner.write(batch)
    }
}

#[test]
fn a_failing_commit_is_an_error_and_writes_nothing() {
    let e = Engine::new(Flaky { inner: MemoryBackend::new(), fail: AtomicBool::new(false) });
    let mut s = e.session();
    run(&e, &mut s, "SET a 1");
    run(&e, &mut s, "MULTI");
    run(&e, &mut s, "INCR a");
    run(&e, &mut s, "SADD s x");
    e.backend().fail.store(true, Ordering::SeqCst);
    match run(&e, &mut s, "EXEC") {
        Reply::Error(text) => assert!(text.contains("disk on fire"), "{text}"),
        other => panic!("EXEC over a failing backend: {other:?}"),
    }
    e.backend().fail.store(false, Ordering::SeqCst);
    assert_eq!(run(&e, &mut s, "GET a"), bulk("1"));
    assert_eq!(run(&e, &mut s, "EXISTS s"), int(0));
    assert!(s.touched().is_empty());
    // A SWAPDB in a transaction whose commit fails is undone with the writes.
    run(&e, &mut s, "MULTI");
    run(&e, &mut s, "INCR a");
    run(&e, &mut s, "SWAPDB 0 1");
    e.backend().fail.store(true, Ordering::SeqCst);
    assert!(run(&e, &mut s, "EXEC").is_error());
    e.backend().fail.store(false, Ordering::SeqCst);
    assert_eq!(run(&e, &mut s, "GET a"), bulk("1"));
    assert!(s.swapped_dbs().is_empty());
    run(&e, &mut s, "MULTI");
    run(&e, &mut s, "SWAPDB 0 1");
    assert_eq!(run(&e, &mut s, "EXEC"), Reply::Array(vec![Reply::OK]));
    assert_eq!(s.swapped_dbs(), [(0, 1)]);
    assert_eq!(run(&e, &mut s, "GET a"), Reply::Nil);
}

/// The user keys `s`'s last command recorded as modified.
fn modified(e: &Engine<MemoryBackend>, s: &Session) -> Vec<Bytes> {
    e.modified_keys(s.touched())
}

#[test]
fn with_listeners_modified_keys_are_recorded_only_while_someone_listens() {
    let listeners = Listeners::default();
    let e = Engine::new(MemoryBackend::new()).with_listeners(listeners.clone());
    let (mut writer, mut watcher) = (e.session(), e.session());
    for line in ["SET k 1", "LPUSH l a b", "DEL k"] {
        run(&e, &mut writer, line);
        assert_eq!(modified(&e, &writer), Vec::<Bytes>::new(), "{line}: nobody listens");
    }

    // A WATCH listens until EXEC: a write after it is recorded and aborts the EXEC.
    assert_eq!(run(&e, &mut watcher, "WATCH l"), Reply::OK);
    assert!(listeners.any(), "a WATCH counts as a listener");
    run(&e, &mut writer, "RPOP l");
    assert_eq!(modified(&e, &writer), vec![Bytes::from("l")]);
    assert_eq!(run(&e, &mut watcher, "MULTI"), Reply::OK);
    assert_eq!(run(&e, &mut watcher, "GET l"), queued());
    assert_eq!(run(&e, &mut watcher, "EXEC"), Reply::NilArray);
    run(&e, &mut writer, "RPOP l");
    assert_eq!(modified(&e, &writer), Vec::<Bytes>::new(), "EXEC ended the watch");

    // A listener of the server's count (a parked or tracking client).
    let listening = listeners.listen();
    run(&e, &mut writer, "SET k 2");
    assert_eq!(modified(&e, &writer), vec![Bytes::from("k")]);
    drop(listening);
    run(&e, &mut writer, "SET k 3");
    assert_eq!(modified(&e, &writer), Vec::<Bytes>::new());

    // A client that disconnects while watching stops listening.
    assert_eq!(run(&e, &mut watcher, "WATCH k"), Reply::OK);
    run(&e, &mut writer, "SET k 4");
    assert_eq!(modified(&e, &writer), vec![Bytes::from("k")]);
    e.close(&mut watcher);
    run(&e, &mut writer, "SET k 5");
    assert_eq!(modified(&e, &writer), Vec::<Bytes>::new());
}
