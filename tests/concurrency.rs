//! Many threads over one `Engine`: invariants under real contention, no sleeps.
//!
//! - 8 threads run seeded random commands over 20 hot keys of every type; afterwards every
//!   INCRBY/HINCRBY total is exact, every SADD/ZADD/LPUSH count matches what the replies
//!   acknowledged (minus acknowledged pops), and `fsck` finds no problem.
//! - MULTI/EXEC transfers between two accounts keep their sum constant for concurrent
//!   readers, whether they read in a transaction or with one MGET.
//!
//! - A command finding the keyspace held by another gets the answer the engine was given.
//!
//! `CONCURRENCY_OPS` sets the commands per thread (default 2,000).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use bytes::Bytes;
use rediskv::KeyLayout;
use rediskv::MemoryBackend;
use rediskv::{Engine, Reply};

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

const THREADS: usize = 8;

fn ops_per_thread() -> usize {
    std::env::var("CONCURRENCY_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
}

fn int(reply: &Reply) -> i64 {
    match reply {
        Reply::Integer(n) => *n,
        Reply::Bulk(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
        other => panic!("not an integer: {other:?}"),
    }
}

/// What one thread's acknowledged replies add up to, per hot key slot (4 keys per type).
#[derive(Default)]
struct Tally {
    incr: [i64; 4],
    hincr: [i64; 4],
    sadd: [i64; 4],
    zadd: [i64; 4],
    list: [i64; 4],
}

fn worker(engine: &Engine<MemoryBackend>, thread: usize, ops: usize) -> Tally {
    let mut rng = Rng(0x9E37_79B9 + thread as u64 * 7919);
    let mut s = engine.session();
    let mut t = Tally::default();
    for op in 0..ops {
        let k = rng.below(4) as usize;
        let member = format!("m{thread}:{op}");
        let n = rng.below(100) as i64 - 30;
        match rng.below(14) {
            0 | 1 => {
                int(&engine.run(&mut s, &["INCRBY", &format!("str{k}"), &n.to_string()]));
                t.incr[k] += n;
            }
            2 => {
                int(&engine.run(&mut s, &["HINCRBY", &format!("hash{k}"), "f", &n.to_string()]));
                t.hincr[k] += n;
            }
            3 => t.sadd[k] += int(&engine.run(&mut s, &["SADD", &format!("set{k}"), &member])),
            4 => {
                t.zadd[k] += int(&engine.run(&mut s, &["ZADD", &format!("zset{k}"), &n.to_string(), &member]))
            }
            5 => {
                int(&engine.run(&mut s, &["LPUSH", &format!("list{k}"), &member]));
                t.list[k] += 1;
            }
            6 => {
                if let Reply::Bulk(_) = engine.run(&mut s, &["RPOP", &format!("list{k}")]) {
                    t.list[k] -= 1;
                }
            }
            7 => {
                let r = engine.run(
                    &mut s,
                    &["SREM", &format!("set{k}"), &format!("m{thread}:{}", rng.below(op as u64 + 1))],
                );
                t.sadd[k] -= int(&r);
            }
            8 => {
                let r = engine.run(
                    &mut s,
                    &["ZREM", &format!("zset{k}"), &format!("m{thread}:{}", rng.below(op as u64 + 1))],
                );
                t.zadd[k] -= int(&r);
            }
            9 => {
                engine.run(&mut s, &["HGETALL", &format!("hash{k}")]);
                engine.run(&mut s, &["ZRANGE", &format!("zset{k}"), "0", "-1", "WITHSCORES"]);
            }
            10 => {
                engine.run(&mut s, &["LRANGE", &format!("list{k}"), "0", "-1"]);
                engine.run(&mut s, &["SMEMBERS", &format!("set{k}")]);
            }
            11 => {
                // A transaction over two types: both effects count, or neither.
                engine.run(&mut s, &["MULTI"]);
                engine.run(&mut s, &["INCRBY", &format!("str{k}"), &n.to_string()]);
                engine.run(&mut s, &["SADD", &format!("set{k}"), &format!("x{member}")]);
                match engine.run(&mut s, &["EXEC"]) {
                    Reply::Array(replies) => {
                        t.incr[k] += n;
                        t.sadd[k] += int(&replies[1]);
                    }
                    other => panic!("EXEC: {other:?}"),
                }
            }
            12 => {
                engine.run(&mut s, &["SCAN", "0", "COUNT", "5"]);
                engine.run(&mut s, &["EXISTS", "str0", "hash1", "set2", "zset3", "list0"]);
            }
            _ => {
                if let Reply::Integer(1) =
                    engine.run(&mut s, &["ZADD", &format!("zset{k}"), "NX", "0", "shared"])
                {
                    t.zadd[k] += 1;
                }
                engine.run(&mut s, &["ZINCRBY", &format!("zset{k}"), "1", "shared"]);
            }
        }
    }
    engine.close(&mut s);
    t
}

#[test]
fn hot_keys_keep_every_acknowledged_effect() {
    let engine = Arc::new(Engine::new(MemoryBackend::new()));
    let ops = ops_per_thread();
    let tallies: Vec<Tally> = (0..THREADS)
        .map(|i| {
            let engine = engine.clone();
            thread::spawn(move || worker(&engine, i, ops))
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    let sum = |f: fn(&Tally) -> [i64; 4], k: usize| tallies.iter().map(|t| f(t)[k]).sum::<i64>();
    let mut s = engine.session();
    for k in 0..4 {
        let get = |argv: &[&str], s: &mut _| engine.run(s, argv);
        let value = |r: Reply| if r == Reply::Nil { 0 } else { int(&r) };
        assert_eq!(value(get(&["GET", &format!("str{k}")], &mut s)), sum(|t| t.incr, k), "str{k}");
        assert_eq!(value(get(&["HGET", &format!("hash{k}"), "f"], &mut s)), sum(|t| t.hincr, k), "hash{k}");
        assert_eq!(int(&get(&["SCARD", &format!("set{k}")], &mut s)), sum(|t| t.sadd, k), "set{k}");
        assert_eq!(int(&get(&["ZCARD", &format!("zset{k}")], &mut s)), sum(|t| t.zadd, k), "zset{k}");
        assert_eq!(int(&get(&["LLEN", &format!("list{k}")], &mut s)), sum(|t| t.list, k), "list{k}");
    }
    let problems = rediskv::fsck::check(engine.backend(), &KeyLayout::default(), u64::MAX / 2).unwrap();
    assert!(problems.is_empty(), "fsck: {problems:?}");
}

#[test]
fn transfers_keep_the_sum_for_every_reader() {
    let engine = Arc::new(Engine::new(MemoryBackend::new()));
    let mut s = engine.session();
    engine.run(&mut s, &["MSET", "acct:a", "1000", "acct:b", "1000"]);
    let ops = ops_per_thread();
    let writers: Vec<_> = (0..4)
        .map(|i| {
            let engine = engine.clone();
            thread::spawn(move || {
                let mut rng = Rng(77 + i);
                let mut s = engine.session();
                for _ in 0..ops {
                    let x = (rng.below(50) + 1).to_string();
                    let (from, to) =
                        if rng.below(2) == 0 { ("acct:a", "acct:b") } else { ("acct:b", "acct:a") };
                    assert_eq!(engine.run(&mut s, &["MULTI"]), Reply::OK);
                    engine.run(&mut s, &["DECRBY", from, &x]);
                    engine.run(&mut s, &["INCRBY", to, &x]);
                    assert!(matches!(engine.run(&mut s, &["EXEC"]), Reply::Array(r) if r.len() == 2));
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let engine = engine.clone();
            thread::spawn(move || {
                let mut s = engine.session();
                for n in 0..ops {
                    let pair: Vec<Bytes> = if (n + i) % 2 == 0 {
                        engine.run(&mut s, &["MULTI"]);
                        engine.run(&mut s, &["GET", "acct:a"]);
                        engine.run(&mut s, &["GET", "acct:b"]);
                        match engine.run(&mut s, &["EXEC"]) {
                            Reply::Array(r) => r
                                .into_iter()
                                .map(|r| match r {
                                    Reply::Bulk(b) => b,
                                    other => panic!("{other:?}"),
                                })
                                .collect(),
                            other => panic!("{other:?}"),
                        }
                    } else {
                        match engine.run(&mut s, &["MGET", "acct:a", "acct:b"]) {
                            Reply::Array(r) => r
                                .into_iter()
                                .map(|r| match r {
                                    Reply::Bulk(b) => b,
                                    other => panic!("{other:?}"),
                                })
                                .collect(),
                            other => panic!("{other:?}"),
                        }
                    };
                    let total: i64 =
                        pair.iter().map(|b| std::str::from_utf8(b).unwrap().parse::<i64>().unwrap()).sum();
                    assert_eq!(total, 2000, "a reader saw half a transfer");
                }
            })
        })
        .collect();
    for h in writers.into_iter().chain(readers) {
        h.join().unwrap();
    }
}

/// Transfers between the same key in databases 0 and 1 while another thread swaps the two
/// databases: every reader's EXEC sees the sum whole, and no transfer is lost. A SWAPDB
/// that did not wait for the transactions in flight would let one read a namespace twice.
#[test]
fn swapdb_beside_cross_database_transfers_keeps_the_sum() {
    let engine = Arc::new(Engine::new(MemoryBackend::new()));
    let mut s = engine.session();
    engine.run(&mut s, &["SET", "n", "1000"]);
    engine.run(&mut s, &["SELECT", "1"]);
    engine.run(&mut s, &["SET", "n", "1000"]);
    let ops = ops_per_thread() / 2;
    let txn = |engine: &Engine<MemoryBackend>, s: &mut rediskv::Session, lines: &[&[&str]]| {
        assert_eq!(engine.run(s, &["MULTI"]), Reply::OK);
        for line in lines {
            engine.run(s, line);
        }
        match engine.run(s, &["EXEC"]) {
            Reply::Array(r) => r,
            other => panic!("EXEC: {other:?}"),
        }
    };
    let done = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (engine, done) = (engine.clone(), done.clone());
        thread::spawn(move || {
            let mut s = engine.session();
            while done.load(Ordering::SeqCst) < 4 {
                assert_eq!(engine.run(&mut s, &["SWAPDB", "0", "1"]), Reply::OK);
            }
        })
    };
    let moves: &[&[&str]] =
        &[&["DECRBY", "n", "3"], &["SELECT", "1"], &["INCRBY", "n", "3"], &["SELECT", "0"]];
    let reads: &[&[&str]] = &[&["GET", "n"], &["SELECT", "1"], &["GET", "n"], &["SELECT", "0"]];
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let (engine, done) = (engine.clone(), done.clone());
            thread::spawn(move || {
                let mut s = engine.session();
                for _ in 0..ops {
                    if i < 2 {
                        assert_eq!(txn(&engine, &mut s, moves).len(), 4);
                    } else {
                        let r = txn(&engine, &mut s, reads);
                        assert_eq!(int(&r[0]) + int(&r[2]), 2000, "a reader saw half a swap or a transfer");
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for h in workers.into_iter().chain([swapper]) {
        h.join().unwrap();
    }
    let mut s = engine.session();
    let a = int(&engine.run(&mut s, &["GET", "n"]));
    engine.run(&mut s, &["SELECT", "1"]);
    assert_eq!(a + int(&engine.run(&mut s, &["GET", "n"])), 2000);
}

#[test]
fn watch_retry_loops_lose_no_increment() {
    // The optimistic pattern clients use: WATCH, read, MULTI, write, EXEC, retry on nil.
    let engine = Arc::new(Engine::new(MemoryBackend::new()));
    let per_thread = ops_per_thread() / 10;
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let engine = engine.clone();
            thread::spawn(move || {
                let mut s = engine.session();
                let mut done = 0;
                while done < per_thread {
                    engine.run(&mut s, &["WATCH", "counter"]);
                    let now = match engine.run(&mut s, &["GET", "counter"]) {
                        Reply::Bulk(b) => std::str::from_utf8(&b).unwrap().parse::<i64>().unwrap(),
                        _ => 0,
                    };
                    engine.run(&mut s, &["MULTI"]);
                    engine.run(&mut s, &["SET", "counter", &(now + 1).to_string()]);
                    if let Reply::Array(_) = engine.run(&mut s, &["EXEC"]) {
                        done += 1;
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut s = engine.session();
    assert_eq!(
        engine.run(&mut s, &["GET", "counter"]),
        Reply::Bulk(Bytes::from((4 * per_thread).to_string()))
    );
}

/// With an answer installed, a command finding the keyspace held by another (a script's
/// `atomically`, here the test holding the lock) gets that answer and runs nothing; EXEC
/// ends its transaction with it; an eviction leaves the key. An answer of `None` keeps the
/// command waiting until the lock is free.
#[test]
fn a_held_keyspace_is_answered_not_waited_for() {
    let engine = Arc::new(Engine::new(MemoryBackend::new()));
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    engine.answer_while_held(Box::new(move |argv: &[Bytes]| {
        counter.fetch_add(1, Ordering::SeqCst);
        // GET waits; everything else is refused.
        (!argv[0].eq_ignore_ascii_case(b"get")).then(|| Reply::Error("BUSY held".into()))
    }));
    let mut s = engine.session();
    engine.run(&mut s, &["SET", "k", "1"]);
    let held = engine.locks().lock(true, std::iter::empty());
    assert_eq!(engine.run(&mut s, &["SET", "k", "2"]), Reply::Error("BUSY held".into()));
    assert_eq!(engine.run(&mut s, &["MULTI"]), Reply::OK);
    assert_eq!(engine.run(&mut s, &["SET", "k", "3"]), Reply::Status("QUEUED".into()));
    assert_eq!(
        engine.run(&mut s, &["EXEC"]),
        Reply::Error("EXECABORT Transaction discarded because of: BUSY held".into())
    );
    assert_eq!(engine.evict(0, b"k").unwrap(), None);
    // A GET polls until the holder lets go.
    let before = asked.load(Ordering::SeqCst);
    let reader = {
        let engine = engine.clone();
        thread::spawn(move || {
            let mut s = engine.session();
            engine.run(&mut s, &["GET", "k"])
        })
    };
    while asked.load(Ordering::SeqCst) < before + 2 {
        thread::yield_now();
    }
    drop(held);
    assert_eq!(reader.join().unwrap(), Reply::Bulk(Bytes::from_static(b"1")));
    // Nothing refused was written; the transaction is over.
    assert_eq!(engine.run(&mut s, &["GET", "k"]), Reply::Bulk(Bytes::from_static(b"1")));
    assert_eq!(engine.run(&mut s, &["EXEC"]), Reply::Error("ERR EXEC without MULTI".into()));
    assert!(engine.evict(0, b"k").unwrap().is_some());
}

#[test]
fn engine_is_send_and_sync() {
    fn assert_sync<T: Send + Sync>() {}
    assert_sync::<Engine<MemoryBackend>>();
    assert_sync::<Engine<Arc<dyn rediskv::KvBackend + Send + Sync>>>();
}

/// `atomically` runs no command a server answers (its caller has no server): PUBLISH gets
/// the error `Db::execute` gives it, and the commands beside it run.
#[test]
fn atomically_answers_a_server_command_that_it_needs_a_session() {
    let engine = Engine::new(MemoryBackend::new());
    let mut session = engine.session();
    let argv =
        |words: &[&str]| words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect::<Vec<_>>();
    let replies = engine
        .atomically(&mut session, |call| {
            [call(&argv(&["PUBLISH", "ch", "m"])), call(&argv(&["SET", "k", "v"]))]
        })
        .unwrap();
    assert_eq!(replies[0], Reply::Error("ERR PUBLISH needs a client session".into()));
    assert_eq!(replies[1], Reply::OK);
    assert_eq!(engine.execute(&mut session, &argv(&["GET", "k"])), Reply::Bulk(Bytes::from_static(b"v")));
}
