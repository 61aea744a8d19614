//! The key counts an `Engine` keeps for DBSIZE and INFO keyspace, against a scan.
//!
//! - Random command sequences (with short TTLs, a moving clock, expiry sweeps, RENAME,
//!   MOVE, SWAPDB, FLUSHDB/FLUSHALL, MULTI/EXEC, RESTORE, scripts through `atomically`):
//!   after every step each database's O(1) count equals a scan of its metadata records that
//!   counts expired-but-present keys too, and DBSIZE answers it.
//! - Real threads creating and deleting shared keys (one of them counting the database
//!   first while the others write): keys created minus keys deleted, as the replies
//!   acknowledged, is the final count.
//! - A batch the store refuses changes no count; a store shared by several processes keeps
//!   none.

use std::sync::Arc;
use std::thread;

use bytes::Bytes;
use proptest::prelude::*;
use rediskv::gc::{self, ExpirySweep};
use rediskv::server::KeyCount;
use rediskv::{Clock, ColumnFamily, ManualClock};
use rediskv::{Direction, FaultyBackend, KvBackend, MemoryBackend};
use rediskv::{Engine, Reply, Session};

const T0_MS: u64 = 1_767_225_600_000;
/// The databases the random sequences use.
const DBS: usize = 4;

/// Keys and keys with a TTL among the metadata records of database `index`, expired or
/// not: what the counts must say.
fn scanned<B: KvBackend>(engine: &Engine<B>, index: usize) -> (u64, u64) {
    let layout = engine.db_layout(index).unwrap().clone();
    let (mut keys, mut expires) = (0, 0);
    for item in
        engine.backend().scan(ColumnFamily::Metadata, &layout.namespace_range(), Direction::Forward).unwrap()
    {
        let (_, value) = item.unwrap();
        let Ok(meta) = layout.decode_metadata(&value) else { continue };
        // Live at time 0: not an empty collection, whatever its expiry.
        if meta.is_live(0) {
            keys += 1;
            expires += u64::from(meta.expire_ms != 0);
        }
    }
    (keys, expires)
}

fn counted<B: KvBackend>(engine: &Engine<B>, index: usize) -> (u64, u64) {
    let KeyCount { keys, expires, .. } = engine.key_count(index).unwrap().expect("counts kept");
    (keys, expires)
}

fn run<B: KvBackend, S: AsRef<[u8]>>(engine: &Engine<B>, s: &mut Session, argv: &[S]) -> Reply {
    engine.run(s, argv)
}

#[derive(Debug, Clone)]
enum Op {
    Set(u8, Option<u8>),
    Del(u8),
    Expire(u8, u8),
    Pexpire(u8, u8),
    Persist(u8),
    Get(u8),
    Rename(u8, u8),
    Move(u8, u8),
    Swapdb(u8, u8),
    Select(u8),
    Flushdb,
    Flushall,
    Hset(u8, u8),
    Hdel(u8, u8),
    Lpush(u8),
    Lpop(u8),
    Restore(u8, u8),
    Copy(u8, u8),
    Getdel(u8),
    Multi(Vec<Op>),
    Script(Vec<Op>),
    Advance(u8),
    Sweep,
}

fn leaf() -> impl Strategy<Value = Op> {
    let k = || 0u8..6;
    prop_oneof![
        4 => (k(), proptest::option::of(1u8..6)).prop_map(|(k, t)| Op::Set(k, t)),
        2 => k().prop_map(Op::Del),
        1 => (k(), 0u8..3).prop_map(|(k, t)| Op::Expire(k, t)),
        2 => (k(), 0u8..6).prop_map(|(k, t)| Op::Pexpire(k, t)),
        1 => k().prop_map(Op::Persist),
        2 => k().prop_map(Op::Get),
        1 => (k(), k()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (k(), 0u8..DBS as u8).prop_map(|(k, d)| Op::Move(k, d)),
        1 => (0u8..DBS as u8, 0u8..DBS as u8).prop_map(|(a, b)| Op::Swapdb(a, b)),
        1 => (0u8..DBS as u8).prop_map(Op::Select),
        1 => Just(Op::Flushdb),
        1 => Just(Op::Flushall),
        2 => (k(), 0u8..3).prop_map(|(k, f)| Op::Hset(k, f)),
        2 => (k(), 0u8..3).prop_map(|(k, f)| Op::Hdel(k, f)),
        1 => k().prop_map(Op::Lpush),
        2 => k().prop_map(Op::Lpop),
        1 => (k(), k()).prop_map(|(a, b)| Op::Restore(a, b)),
        1 => (k(), k()).prop_map(|(a, b)| Op::Copy(a, b)),
        1 => k().prop_map(Op::Getdel),
        2 => (1u8..6).prop_map(Op::Advance),
        1 => Just(Op::Sweep),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => leaf(),
        1 => prop::collection::vec(leaf(), 1..6).prop_map(Op::Multi),
        1 => prop::collection::vec(leaf(), 1..6).prop_map(Op::Script),
    ]
}

/// The command lines of `op` (none for the clock and the sweep).
fn lines(op: &Op) -> Vec<Vec<String>> {
    let k = |k: &u8| format!("k{k}");
    let v = |parts: &[&str]| vec![parts.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    match op {
        Op::Set(key, None) => v(&["SET", &k(key), "v"]),
        Op::Set(key, Some(ms)) => v(&["SET", &k(key), "v", "PX", &ms.to_string()]),
        Op::Del(key) => v(&["DEL", &k(key)]),
        Op::Expire(key, s) => v(&["EXPIRE", &k(key), &s.to_string()]),
        Op::Pexpire(key, ms) => v(&["PEXPIRE", &k(key), &ms.to_string()]),
        Op::Persist(key) => v(&["PERSIST", &k(key)]),
        Op::Get(key) => v(&["TYPE", &k(key)]),
        Op::Rename(a, b) => v(&["RENAME", &k(a), &k(b)]),
        Op::Move(key, db) => v(&["MOVE", &k(key), &db.to_string()]),
        Op::Swapdb(a, b) => v(&["SWAPDB", &a.to_string(), &b.to_string()]),
        Op::Select(db) => v(&["SELECT", &db.to_string()]),
        Op::Flushdb => v(&["FLUSHDB"]),
        Op::Flushall => v(&["FLUSHALL"]),
        Op::Hset(key, f) => v(&["HSET", &k(key), &format!("f{f}"), "x"]),
        Op::Hdel(key, f) => v(&["HDEL", &k(key), &format!("f{f}")]),
        Op::Lpush(key) => v(&["LPUSH", &k(key), "e"]),
        Op::Lpop(key) => v(&["LPOP", &k(key)]),
        Op::Copy(a, b) => v(&["COPY", &k(a), &k(b), "REPLACE"]),
        Op::Getdel(key) => v(&["GETDEL", &k(key)]),
        Op::Restore(..) | Op::Multi(_) | Op::Script(_) | Op::Advance(_) | Op::Sweep => Vec::new(),
    }
}

/// RESTORE `b` from a DUMP of `a` (nothing when `a` is missing), with `a`'s TTL if any.
fn restore(engine: &Engine<MemoryBackend>, s: &mut Session, a: u8, b: u8) {
    let (a, b) = (format!("k{a}"), format!("k{b}"));
    let Reply::Bulk(payload) = run(engine, s, &["DUMP", &a]) else { return };
    let ttl = match run(engine, s, &["PTTL", &a]) {
        Reply::Integer(ms) if ms > 0 => ms.to_string(),
        _ => "0".into(),
    };
    let argv =
        [Bytes::from_static(b"RESTORE"), b.into(), ttl.into(), payload, Bytes::from_static(b"REPLACE")];
    engine.execute(s, &argv);
}

fn apply(
    engine: &Engine<MemoryBackend>,
    clock: &ManualClock,
    sweeps: &mut [ExpirySweep],
    s: &mut Session,
    op: &Op,
) {
    match op {
        Op::Advance(ms) => clock.advance_ms(u64::from(*ms)),
        Op::Sweep => {
            for (i, sweep) in sweeps.iter_mut().enumerate() {
                if sweep.is_done() {
                    *sweep = ExpirySweep::of(engine.db_layout(i).unwrap());
                }
                gc::expire_step(engine, sweep, clock.now_ms(), 3).unwrap();
            }
        }
        Op::Restore(a, b) => restore(engine, s, *a, *b),
        Op::Multi(ops) => {
            run(engine, s, &["MULTI"]);
            for op in ops {
                for line in lines(op) {
                    run(engine, s, &line);
                }
            }
            run(engine, s, &["EXEC"]);
        }
        Op::Script(ops) => {
            let lines: Vec<Vec<Bytes>> = ops
                .iter()
                .flat_map(lines)
                .map(|l| l.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect())
                .collect();
            engine
                .atomically(s, |call| {
                    for line in &lines {
                        call(line);
                    }
                })
                .unwrap();
        }
        _ => {
            for line in lines(op) {
                run(engine, s, &line);
            }
        }
    }
}

fn check(engine: &Engine<MemoryBackend>, s: &mut Session, step: usize) {
    for db in 0..DBS {
        assert_eq!(counted(engine, db), scanned(engine, db), "database {db} after step {step}");
    }
    let Reply::Integer(dbsize) = run(engine, s, &["DBSIZE"]) else { panic!("DBSIZE") };
    assert_eq!(dbsize as u64, scanned(engine, s.db()).0, "DBSIZE of {} after step {step}", s.db());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// `count_first`: the databases are counted before the commands run (every change is
    /// then a delta), else at the first check (a scan over what the commands left).
    #[test]
    fn counts_match_a_scan(ops in prop::collection::vec(op(), 1..40), count_first in any::<bool>()) {
        let clock = Arc::new(ManualClock::new(T0_MS));
        let engine = Engine::new(MemoryBackend::new()).with_clock(clock.clone()).with_seed(7);
        let mut s = engine.session();
        let mut sweeps: Vec<ExpirySweep> = (0..DBS).map(|i| ExpirySweep::of(engine.db_layout(i).unwrap())).collect();
        if count_first {
            check(&engine, &mut s, 0);
        }
        for (step, op) in ops.iter().enumerate() {
            apply(&engine, &clock, &mut sweeps, &mut s, op);
            if count_first || step + 1 == ops.len() {
                check(&engine, &mut s, step + 1);
            }
        }
    }
}

/// INFO keyspace's figures: expiries, and the mean TTL of the keys that have one.
#[test]
fn expires_and_mean_ttl() {
    let clock = Arc::new(ManualClock::new(T0_MS));
    let engine = Engine::new(MemoryBackend::new()).with_clock(clock.clone());
    let mut s = engine.session();
    run(&engine, &mut s, &["SET", "a", "1", "PX", "1000"]);
    run(&engine, &mut s, &["SET", "b", "1", "PX", "3000"]);
    run(&engine, &mut s, &["SET", "c", "1"]);
    let count = engine.key_count(0).unwrap().unwrap();
    assert_eq!((count.keys, count.expires, count.avg_ttl(T0_MS)), (3, 2, 2000));
    run(&engine, &mut s, &["PERSIST", "b"]);
    let count = engine.key_count(0).unwrap().unwrap();
    assert_eq!((count.keys, count.expires, count.avg_ttl(T0_MS)), (3, 1, 1000));
    // Expired, not yet deleted: still a key, as in Redis; its negative remainder counts as 0.
    clock.advance_ms(2000);
    let count = engine.key_count(0).unwrap().unwrap();
    assert_eq!((count.keys, count.expires, count.avg_ttl(clock.now_ms())), (3, 1, 0));
    // Found expired: deleted, and uncounted.
    assert_eq!(run(&engine, &mut s, &["GET", "a"]), Reply::Nil);
    assert_eq!(run(&engine, &mut s, &["DBSIZE"]), Reply::Integer(2));
    assert_eq!(engine.key_count(0).unwrap().unwrap().expires, 0);
}

/// A batch the store refuses leaves the counts as they were.
#[test]
fn refused_write_counts_nothing() {
    let engine = Engine::new(FaultyBackend::new(MemoryBackend::new()));
    let mut s = engine.session();
    engine.run(&mut s, &["SET", "a", "1"]);
    assert_eq!(engine.key_count(0).unwrap().unwrap().keys, 1);
    engine.backend().fail_write(0);
    assert!(matches!(engine.run(&mut s, &["SET", "b", "1"]), Reply::Error(_)));
    engine.backend().fail_write(0);
    engine.run(&mut s, &["MULTI"]);
    engine.run(&mut s, &["SET", "c", "1"]);
    engine.run(&mut s, &["DEL", "a"]);
    assert!(matches!(engine.run(&mut s, &["EXEC"]), Reply::Error(_)));
    engine.backend().disarm();
    assert_eq!(engine.key_count(0).unwrap().unwrap().keys, 1);
    assert_eq!(engine.run(&mut s, &["DBSIZE"]), Reply::Integer(1));
}

/// A store other processes write keeps no counts: DBSIZE scans.
#[test]
fn shared_store_scans() {
    struct Shared(MemoryBackend);
    impl KvBackend for Shared {
        fn get(&self, cf: ColumnFamily, key: &[u8]) -> rediskv::Result<Option<Bytes>> {
            self.0.get(cf, key)
        }
        fn scan<'a>(
            &'a self,
            cf: ColumnFamily,
            range: &rediskv::KeyRange,
            direction: Direction,
        ) -> rediskv::Result<rediskv::ScanIter<'a>> {
            self.0.scan(cf, range, direction)
        }
        fn write(&self, batch: rediskv::WriteBatch) -> rediskv::Result<()> {
            self.0.write(batch)
        }
        fn is_shared(&self) -> bool {
            true
        }
    }
    let engine = Engine::new(Shared(MemoryBackend::new()));
    let mut s = engine.session();
    engine.run(&mut s, &["SET", "a", "1"]);
    assert_eq!(engine.key_count(0).unwrap(), None);
    assert_eq!(engine.run(&mut s, &["DBSIZE"]), Reply::Integer(1));
}

/// Threads create and delete shared keys (SET NX, DEL, GETDEL, RENAMENX, EXEC of both) while
/// one counts the database first; the final count is what the replies add up to.
#[test]
fn threads_conserve_the_count() {
    const THREADS: u64 = 4;
    const OPS: u64 = 3_000;
    let engine = Arc::new(Engine::new(MemoryBackend::new()));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let engine = Arc::clone(&engine);
            thread::spawn(move || {
                let mut s = engine.session();
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
                let mut next = |n: u64| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng % n
                };
                let mut net = 0i64;
                for i in 0..OPS {
                    let key = format!("k{}", next(32));
                    let other = format!("k{}", next(32));
                    if t == 0 && i == OPS / 10 {
                        // The first count, in the middle of the writes.
                        engine.key_count(0).unwrap();
                    }
                    net += match next(6) {
                        0 | 1 => match engine.run(&mut s, &["SET", &key, "v", "NX"]) {
                            Reply::Nil => 0,
                            _ => 1,
                        },
                        2 => match engine.run(&mut s, &["DEL", &key, &other]) {
                            Reply::Integer(n) => -n,
                            r => panic!("{r:?}"),
                        },
                        3 => match engine.run(&mut s, &["GETDEL", &key]) {
                            Reply::Nil => 0,
                            _ => -1,
                        },
                        // RENAME over an existing key removes one (`key` and `other` are
                        // locked together: EXISTS then RENAME would race).
                        4 => match engine.run(&mut s, &["RENAMENX", &key, &other]) {
                            Reply::Integer(_) | Reply::Error(_) => 0,
                            r => panic!("{r:?}"),
                        },
                        _ => {
                            engine.run(&mut s, &["MULTI"]);
                            engine.run(&mut s, &["SET", &key, "v", "NX"]);
                            engine.run(&mut s, &["DEL", &other]);
                            match engine.run(&mut s, &["EXEC"]) {
                                Reply::Array(r) => {
                                    let created = i64::from(r[0] != Reply::Nil);
                                    let Reply::Integer(deleted) = r[1] else { panic!("{r:?}") };
                                    created - deleted
                                }
                                r => panic!("{r:?}"),
                            }
                        }
                    };
                }
                net
            })
        })
        .collect();
    let net: i64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(counted(&engine, 0), scanned(&engine, 0));
    assert_eq!(counted(&engine, 0).0 as i64, net);
}
