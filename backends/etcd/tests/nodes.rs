//! Several stateless nodes (an `Engine` over its own etcd client each) over one 3-member etcd
//! cluster: the same data, serializable commands and EXECs across nodes, the Raft leader
//! killed during the load, garbage and expiry swept by one node at a time.
//!
//! `ETCD_OPS` sets the iterations per thread of the load tests (default 120).

use rediskv_etcd::testkit as common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use rediskv::{ColumnFamily, Direction, KvBackend, WriteBatch};
use rediskv::{Engine, Reply};
use rediskv::{KeyLayout, ManualClock, Metadata, RedisType, Version};
use rediskv_etcd::{Backend, Maintenance};

fn ops() -> usize {
    std::env::var("ETCD_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(120)
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

fn int(reply: &Reply) -> i64 {
    match reply {
        Reply::Integer(n) => *n,
        Reply::Bulk(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
        other => panic!("not an integer: {other:?}"),
    }
}

fn node(cluster: &common::Cluster, prefix: &str) -> Arc<Engine<Backend>> {
    Arc::new(Engine::new(cluster.open(prefix)))
}

fn fsck_clean(engine: &Engine<Backend>) {
    let problems =
        rediskv::fsck::check(engine.backend(), &KeyLayout::default(), engine.now_ms()).expect("fsck");
    assert!(problems.is_empty(), "fsck: {problems:?}");
}

#[test]
fn two_nodes_serve_the_same_data() {
    let Some(cluster) = common::Cluster::start("two_nodes_serve_the_same_data", 3) else { return };
    let (a, b) = (node(&cluster, "same/"), node(&cluster, "same/"));
    let (mut sa, mut sb) = (a.session(), b.session());
    assert_eq!(a.run(&mut sa, &["SET", "k", "v"]), Reply::OK);
    assert_eq!(b.run(&mut sb, &["GET", "k"]), bulk("v"));
    assert_eq!(b.run(&mut sb, &["HSET", "h", "f", "1", "g", "2"]), Reply::Integer(2));
    assert_eq!(
        a.run(&mut sa, &["HGETALL", "h"]),
        Reply::Map(vec![(bulk("f"), bulk("1")), (bulk("g"), bulk("2"))])
    );
    for argv in [&["MULTI"][..], &["RPUSH", "l", "x", "y"], &["DEL", "h"]] {
        assert!(!matches!(a.run(&mut sa, argv), Reply::Error(_)));
    }
    assert_eq!(a.run(&mut sa, &["EXEC"]), Reply::Array(vec![Reply::Integer(2), Reply::Integer(1)]));
    assert_eq!(b.run(&mut sb, &["LRANGE", "l", "0", "-1"]), Reply::Array(vec![bulk("x"), bulk("y")]));
    assert_eq!(b.run(&mut sb, &["EXISTS", "h"]), Reply::Integer(0));
    // A 2,000-field hash spans several scan pages, both ways.
    let mut argv = vec!["HSET".to_string(), "big".into()];
    argv.extend((0..2000).flat_map(|i| [format!("f{i:05}"), i.to_string()]));
    assert_eq!(b.run(&mut sb, &argv), Reply::Integer(2000));
    assert_eq!(a.run(&mut sa, &["HLEN", "big"]), Reply::Integer(2000));
    match a.run(&mut sa, &["HKEYS", "big"]) {
        Reply::Array(keys) => {
            let want: Vec<Reply> = (0..2000).map(|i| bulk(&format!("f{i:05}"))).collect();
            assert_eq!(keys, want);
        }
        other => panic!("HKEYS: {other:?}"),
    }
    let mut zadd = vec!["ZADD".to_string(), "z".into()];
    zadd.extend((0..1500).flat_map(|i| [i.to_string(), format!("m{i}")]));
    assert_eq!(a.run(&mut sa, &zadd), Reply::Integer(1500));
    let top = b.run(&mut sb, &["ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "0", "3"]);
    assert_eq!(top, Reply::Array(vec![bulk("m1499"), bulk("m1498"), bulk("m1497")]));
    fsck_clean(&a);
}

/// What one load thread saw acknowledged.
#[derive(Default)]
struct Tally {
    incr: i64,
    hincr: [i64; 4],
    sadd: i64,
    pushed: i64,
    popped: i64,
}

#[test]
fn four_threads_on_two_nodes_keep_every_invariant() {
    let Some(cluster) = common::Cluster::start("four_threads_on_two_nodes_keep_every_invariant", 3) else {
        return;
    };
    let nodes = [node(&cluster, "load/"), node(&cluster, "load/")];
    let stop = AtomicBool::new(false);
    let torn = AtomicU64::new(0);
    let tallies: Vec<Tally> = thread::scope(|s| {
        // A reader on node 1 checks that every MGET sees a sum of zero (one revision).
        let reader = s.spawn(|| {
            let mut session = nodes[1].session();
            while !stop.load(Ordering::SeqCst) {
                if let Reply::Array(v) = nodes[1].run(&mut session, &["MGET", "acct:a", "acct:b"]) {
                    let sum: i64 = v.iter().map(|r| if *r == Reply::Nil { 0 } else { int(r) }).sum();
                    if sum != 0 {
                        torn.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        });
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let engine = &nodes[t % 2];
                s.spawn(move || {
                    let mut s = engine.session();
                    let mut tally = Tally::default();
                    let mut run = |argv: &[&str]| {
                        let reply = engine.run(&mut s, argv);
                        assert!(!matches!(reply, Reply::Error(_)), "{argv:?}: {reply:?}");
                        reply
                    };
                    for i in 0..ops() {
                        tally.incr += i64::from(int(&run(&["INCR", "counter"])) > 0);
                        let field = format!("f{}", i % 4);
                        run(&["HINCRBY", "hash", &field, "1"]);
                        tally.hincr[i % 4] += 1;
                        tally.sadd += int(&run(&["SADD", "set", &format!("t{t}-{i}")]));
                        run(&["RPUSH", "list", &format!("t{t}-{i}")]);
                        tally.pushed += 1;
                        if i % 5 == 4 && run(&["LPOP", "list"]) != Reply::Nil {
                            tally.popped += 1;
                        }
                        run(&["MULTI"]);
                        run(&["DECRBY", "acct:a", "3"]);
                        run(&["INCRBY", "acct:b", "3"]);
                        assert!(matches!(run(&["EXEC"]), Reply::Array(v) if v.len() == 2));
                    }
                    tally
                })
            })
            .collect();
        let tallies = workers.into_iter().map(|w| w.join().expect("worker")).collect();
        stop.store(true, Ordering::SeqCst);
        reader.join().expect("reader");
        tallies
    });
    let (engine, mut s) = (&nodes[0], nodes[0].session());
    let sum = |f: fn(&Tally) -> i64| tallies.iter().map(f).sum::<i64>();
    let n = (4 * ops()) as i64;
    assert_eq!(int(&engine.run(&mut s, &["GET", "counter"])), sum(|t| t.incr));
    assert_eq!(sum(|t| t.incr), n, "every INCR acknowledged");
    for f in 0..4 {
        let total = int(&engine.run(&mut s, &["HGET", "hash", &format!("f{f}")]));
        assert_eq!(total, tallies.iter().map(|t| t.hincr[f]).sum::<i64>(), "hash field f{f}");
    }
    assert_eq!(int(&engine.run(&mut s, &["SCARD", "set"])), sum(|t| t.sadd));
    assert_eq!(int(&engine.run(&mut s, &["LLEN", "list"])), sum(|t| t.pushed) - sum(|t| t.popped));
    assert_eq!(int(&engine.run(&mut s, &["GET", "acct:b"])), 3 * n);
    assert_eq!(int(&engine.run(&mut s, &["GET", "acct:a"])), -3 * n);
    assert_eq!(torn.load(Ordering::SeqCst), 0, "an MGET saw half a transfer");
    fsck_clean(engine);
}

#[test]
fn the_leader_killed_during_the_load_loses_nothing_acknowledged() {
    let Some(mut cluster) = common::Cluster::start("the_leader_killed_during_the_load", 3) else { return };
    let nodes = [node(&cluster, "kill/"), node(&cluster, "kill/")];
    let acked = Mutex::new(Vec::new());
    let failed = Mutex::new(Vec::new());
    let mut victim = 0;
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        for t in 0..4 {
            let (engine, acked, failed, stop) = (&nodes[t % 2], &acked, &failed, &stop);
            s.spawn(move || {
                let mut session = engine.session();
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let value = format!("t{t}-{i}");
                    i += 1;
                    engine.run(&mut session, &["MULTI"]);
                    engine.run(&mut session, &["RPUSH", "log", &value]);
                    engine.run(&mut session, &["INCR", "n"]);
                    match engine.run(&mut session, &["EXEC"]) {
                        Reply::Array(replies) => {
                            assert!(replies.iter().all(|r| !matches!(r, Reply::Error(_))), "{replies:?}");
                            acked.lock().unwrap().push(value)
                        }
                        other => failed.lock().unwrap().push((value, format!("{other:?}"))),
                    }
                }
            });
        }
        let wait_for = |count: usize| {
            while acked.lock().unwrap().len() < count {
                thread::sleep(Duration::from_millis(10));
            }
        };
        wait_for(40);
        victim = cluster.leader();
        cluster.kill(victim);
        let at_kill = acked.lock().unwrap().len();
        wait_for(at_kill + 80);
        cluster.restart(victim);
        let at_restart = acked.lock().unwrap().len();
        wait_for(at_restart + 40);
        stop.store(true, Ordering::SeqCst);
    });
    let (acked, failed) = (acked.into_inner().unwrap(), failed.into_inner().unwrap());
    println!(
        "leader (member {victim}) killed: {} transactions acknowledged, {} failed",
        acked.len(),
        failed.len()
    );
    let mut errors: Vec<&str> = failed.iter().map(|(_, e)| e.as_str()).collect();
    errors.sort();
    errors.dedup();
    println!("their errors: {errors:?}");
    // Read through the restarted member alone: it has caught up.
    let mut options = cluster.options("kill/");
    options.endpoints = vec![cluster.endpoints()[victim].clone()];
    let engine = Engine::new(rediskv_etcd::open(options).expect("open on the restarted member"));
    let mut s = engine.session();
    let log: Vec<Bytes> = match engine.run(&mut s, &["LRANGE", "log", "0", "-1"]) {
        Reply::Array(items) => items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => b,
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("LRANGE: {other:?}"),
    };
    let n = int(&engine.run(&mut s, &["GET", "n"]));
    assert_eq!(n, log.len() as i64, "RPUSH and INCR of one EXEC are applied together or not at all");
    let mut seen = std::collections::HashSet::new();
    for v in &log {
        assert!(seen.insert(v.clone()), "{v:?} applied twice");
    }
    for v in &acked {
        assert!(seen.contains(v.as_bytes()), "acknowledged {v} is lost");
    }
    assert!(log.len() <= acked.len() + failed.len());
    fsck_clean(&engine);
}

#[test]
fn commands_spread_over_two_nodes_answer_as_the_memory_engine() {
    let Some(cluster) = common::Cluster::start("commands_spread_over_two_nodes", 3) else { return };
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let nodes = [
        Engine::new(cluster.open("diff/")).with_clock(clock.clone()),
        Engine::new(cluster.open("diff/")).with_clock(clock.clone()),
    ];
    let model = Engine::new(rediskv::MemoryBackend::new()).with_clock(clock.clone());
    let mut sessions = [nodes[0].session(), nodes[1].session()];
    let mut model_session = model.session();
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let commands = ops() * 3;
    for i in 0..commands {
        let key = format!("k{}", next(6));
        let other = format!("k{}", next(6));
        let (m, v) = (format!("m{}", next(8)), next(100).to_string());
        let argv: Vec<String> = match next(25) {
            0 => vec!["SET".into(), key, v],
            1 => vec!["GET".into(), key],
            2 => vec!["INCRBY".into(), key, v],
            3 => vec!["APPEND".into(), key, v],
            4 => vec!["DEL".into(), key, other],
            5 => vec!["HSET".into(), key, m, v],
            6 => vec!["HDEL".into(), key, m],
            7 => vec!["HGETALL".into(), key],
            8 => vec!["HINCRBY".into(), key, m, v],
            9 => vec!["RPUSH".into(), key, m, v],
            10 => vec!["LPOP".into(), key],
            11 => vec!["LRANGE".into(), key, "0".into(), "-1".into()],
            12 => vec!["SADD".into(), key, m],
            13 => vec!["SREM".into(), key, m],
            14 => vec!["SMEMBERS".into(), key],
            15 => vec!["ZADD".into(), key, v, m],
            16 => vec!["ZRANGE".into(), key, "0".into(), "-1".into(), "WITHSCORES".into()],
            17 => vec!["ZREM".into(), key, m],
            18 => vec!["TYPE".into(), key],
            19 => vec!["EXPIRE".into(), key, (1000 + next(1000)).to_string()],
            20 => vec!["TTL".into(), key],
            21 => vec!["RENAME".into(), key, other],
            22 => vec!["SUNIONSTORE".into(), key, other, format!("k{}", next(6))],
            23 => vec!["MGET".into(), key, other, "missing".into()],
            _ => vec!["KEYS".into(), "*".into()],
        };
        let on = i % 2;
        let got = nodes[on].run(&mut sessions[on], &argv);
        let want = model.run(&mut model_session, &argv);
        let sorted = |r: Reply| match r {
            Reply::Array(mut v) if matches!(argv[0].as_str(), "KEYS" | "SMEMBERS") => {
                v.sort_by_key(|x| format!("{x:?}"));
                Reply::Array(v)
            }
            other => other,
        };
        assert_eq!(sorted(got), sorted(want), "command {i} {argv:?} on node {on}");
    }
    fsck_clean(&nodes[0]);
}

#[test]
fn a_new_collection_never_adopts_records_of_an_equal_dead_version() {
    let Some(cluster) = common::Cluster::start("a_new_collection_never_adopts", 1) else { return };
    let backend = cluster.open("versions/");
    let layout = KeyLayout::default();
    let version = Version::Short(42 << 20);
    // A dead collection's leftover field of `version` (its metadata is gone).
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Subkey, layout.subkey(b"h", version, b"stale").unwrap(), &b"x"[..]);
    backend.write(batch).unwrap();
    // A command creating `h` at the same version, as a clashing node's clock could give.
    let create = |version: Version| {
        backend.begin();
        assert_eq!(backend.get(ColumnFamily::Metadata, &layout.metadata_key(b"h")).unwrap(), None);
        let mut meta = Metadata::collection(RedisType::Hash, version);
        meta.size = 1;
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Metadata, layout.metadata_key(b"h"), meta.to_vec());
        batch.put(ColumnFamily::Subkey, layout.subkey(b"h", version, b"f").unwrap(), &b"v"[..]);
        let result = backend.write(batch);
        (result, backend.finish())
    };
    let (result, refused) = create(version);
    assert!(matches!(result, Err(rediskv::Error::Conflict(_))) && refused, "{result:?}");
    assert_eq!(
        backend.get(ColumnFamily::Metadata, &layout.metadata_key(b"h")).unwrap(),
        None,
        "nothing applied"
    );
    let (result, refused) = create(Version::Short((42 << 20) + 1));
    assert!(result.is_ok() && !refused, "{result:?}");
    let range = layout.subkey_range(b"h", Version::Short((42 << 20) + 1)).unwrap();
    let fields: Vec<_> = backend
        .scan(ColumnFamily::Subkey, &range, Direction::Forward)
        .unwrap()
        .map(|i| i.unwrap().1)
        .collect();
    assert_eq!(fields, vec![Bytes::from_static(b"v")]);
}

#[test]
fn one_node_at_a_time_collects_garbage_and_expires_keys() {
    let Some(cluster) = common::Cluster::start("one_node_at_a_time_collects", 3) else { return };
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let nodes = [
        Engine::new(cluster.open("gc/")).with_clock(clock.clone()),
        Engine::new(cluster.open("gc/")).with_clock(clock.clone()),
    ];
    let mut s = nodes[0].session();
    let mut argv = vec!["HSET".to_string(), "big".into()];
    argv.extend((0..3000).flat_map(|i| [format!("f{i}"), "v".to_string()]));
    assert_eq!(nodes[0].run(&mut s, &argv), Reply::Integer(3000));
    assert_eq!(nodes[0].run(&mut s, &["ZADD", "z", "1", "a", "2", "b"]), Reply::Integer(2));
    assert_eq!(nodes[0].run(&mut s, &["HSET", "live", "f", "v"]), Reply::Integer(1));
    for i in 0..50 {
        assert_eq!(nodes[0].run(&mut s, &["SET", &format!("ttl{i}"), "v", "PX", "1000"]), Reply::OK);
    }
    assert_eq!(nodes[0].run(&mut s, &["DEL", "big", "z"]), Reply::Integer(2));
    clock.advance_ms(2000);
    let new =
        || Maintenance::new(&KeyLayout::default(), rediskv::gc::DEFAULT_GRACE_MS, Duration::from_secs(10));
    let mut maintenance = [new(), new()];
    let (mut expired, mut dropped, mut led) = (0, 0, [0, 0]);
    for _ in 0..20 {
        for (i, m) in maintenance.iter_mut().enumerate() {
            let step = m.step(nodes[i].backend(), &nodes[i], 500).expect("maintenance step");
            led[i] += usize::from(step.leader);
            expired += step.expired.removed.len();
            dropped += step.collected.dropped_subkeys + step.collected.dropped_scores;
        }
    }
    assert!(led.contains(&0) && led.contains(&20), "one node held the lease every time: {led:?}");
    assert_eq!(expired, 50);
    assert_eq!(dropped, 3004, "every field of the deleted hash, every member and score of the deleted zset");
    assert_eq!(
        nodes[1].run(&mut nodes[1].session(), &["HGETALL", "live"]),
        Reply::Map(vec![(bulk("f"), bulk("v"))])
    );
    assert_eq!(nodes[1].run(&mut nodes[1].session(), &["DBSIZE"]), Reply::Integer(1));
    // The lease ran out: the other node takes over.
    clock.advance_ms(11_000);
    let leader = usize::from(led[0] == 0);
    let follower = 1 - leader;
    assert!(
        maintenance[follower].step(nodes[follower].backend(), &nodes[follower], 10).unwrap().leader,
        "a lapsed lease is taken over"
    );
    assert!(!maintenance[leader].step(nodes[leader].backend(), &nodes[leader], 10).unwrap().leader);
    fsck_clean(&nodes[0]);
}

#[test]
fn watch_on_one_node_sees_writes_through_the_other() {
    let Some(cluster) = common::Cluster::start("watch_on_one_node", 3) else { return };
    // Node a as the server holds it: behind `Arc<dyn KvBackend>`, hooks through the vtable.
    let shared: Arc<dyn KvBackend + Send + Sync> = Arc::new(cluster.open("watch/"));
    let (a, b) = (Engine::new(shared), node(&cluster, "watch/"));
    let (mut sa, mut sb) = (a.session(), b.session());
    for (write, aborts) in
        [(Some(&["HSET", "h", "f", "v"][..]), true), (None, false), (Some(&["DEL", "h"]), true)]
    {
        assert_eq!(a.run(&mut sa, &["WATCH", "h"]), Reply::OK);
        if let Some(argv) = write {
            assert!(!matches!(b.run(&mut sb, argv), Reply::Error(_)));
        }
        assert_eq!(a.run(&mut sa, &["MULTI"]), Reply::OK);
        assert_eq!(a.run(&mut sa, &["INCR", "runs"]), Reply::status("QUEUED"));
        let exec = a.run(&mut sa, &["EXEC"]);
        assert_eq!(exec == Reply::NilArray, aborts, "after {write:?}: {exec:?}");
    }
    assert_eq!(b.run(&mut sb, &["GET", "runs"]), bulk("1"));
}

#[test]
fn every_node_hears_of_metadata_written_through_another() {
    let Some(cluster) = common::Cluster::start("every_node_hears_of_metadata", 1) else { return };
    let (a, b) = (node(&cluster, "feed/"), node(&cluster, "feed/"));
    let changes = a.backend().metadata_changes().expect("watch");
    let mut s = b.session();
    assert_eq!(b.run(&mut s, &["RPUSH", "queue", "job"]), Reply::Integer(1));
    assert_eq!(b.run(&mut s, &["SET", "other", "v"]), Reply::OK);
    assert_eq!(b.run(&mut s, &["DEL", "queue"]), Reply::Integer(1));
    let layout = KeyLayout::default();
    let want = [layout.metadata_key(b"queue"), layout.metadata_key(b"other"), layout.metadata_key(b"queue")];
    for key in want {
        let got = changes.recv_timeout(Duration::from_secs(10)).expect("a change within 10 s");
        assert_eq!(got.as_ref(), key.as_slice());
    }
}

#[test]
fn a_backend_can_be_shared_by_threads() {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<Backend>();
}
