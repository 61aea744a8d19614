//! Lazy deletion end to end: after random commands with DEL, overwrites and expiries,
//! interleaved with incremental collector steps (and, in the threaded test, with a collector
//! running beside the writer), an expiry sweep and a compaction pass leave no Subkey/Score
//! record without its live key, and every live key reads exactly as before.

mod common;

use common::*;
use proptest::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rediskv::gc::{Collector, Decision, ExpirySweep, compact, decide};
use rediskv::{Clock, KeyLayout, ManualClock, Metadata, RedisType};
use rediskv::{ColumnFamily, KvBackend, MemoryBackend};
use rediskv::{Db, Reply};

const KEYS: [&str; 5] = ["a", "b", "c", "d", "e"];

fn op() -> impl Strategy<Value = Vec<String>> {
    let key = prop::sample::select(&KEYS[..]).prop_map(str::to_string);
    let word = prop::sample::select(&["x", "y", "z", "w"][..]).prop_map(str::to_string);
    prop_oneof![
        (key.clone(), word.clone()).prop_map(|(k, v)| vec!["SET".into(), k, v]),
        (key.clone(), word.clone(), word.clone()).prop_map(|(k, f, v)| vec!["HSET".into(), k, f, v]),
        (key.clone(), word.clone()).prop_map(|(k, f)| vec!["HDEL".into(), k, f]),
        (key.clone(), word.clone()).prop_map(|(k, m)| vec!["SADD".into(), k, m]),
        (key.clone(), word.clone()).prop_map(|(k, m)| vec!["SREM".into(), k, m]),
        (key.clone(), word.clone()).prop_map(|(k, v)| vec!["RPUSH".into(), k, v]),
        key.clone().prop_map(|k| vec!["LPOP".into(), k]),
        (key.clone(), -3i32..3, word.clone()).prop_map(|(k, s, m)| vec!["ZADD".into(), k, s.to_string(), m]),
        (key.clone(), word).prop_map(|(k, m)| vec!["ZREM".into(), k, m]),
        key.clone().prop_map(|k| vec!["DEL".into(), k]),
        (key.clone(), 1u32..50).prop_map(|(k, ms)| vec!["PEXPIRE".into(), k, ms.to_string()]),
        key.prop_map(|k| vec!["PERSIST".into(), k]),
        (1u32..40).prop_map(|ms| vec!["#advance".into(), ms.to_string()]),
        (1u32..8).prop_map(|n| vec!["#collect".into(), n.to_string()]),
    ]
}

/// Everything a client can read of the key pool.
fn contents<B: KvBackend>(db: &mut Db<B>) -> Vec<(String, Reply)> {
    let mut run = |line: String| db.run(&line.split_whitespace().collect::<Vec<_>>());
    KEYS.iter()
        .map(|k| {
            let Reply::Status(ty) = run(format!("TYPE {k}")) else { panic!("TYPE reply") };
            let read = match ty.as_ref() {
                "string" => run(format!("GET {k}")),
                "hash" => sorted(run(format!("HKEYS {k}"))),
                "set" => sorted(run(format!("SMEMBERS {k}"))),
                "list" => run(format!("LRANGE {k} 0 -1")),
                "zset" => run(format!("ZRANGE {k} 0 -1 WITHSCORES")),
                _ => Reply::Nil,
            };
            (ty.to_string(), read)
        })
        .collect()
}

fn sorted(reply: Reply) -> Reply {
    match reply {
        Reply::Array(mut items) => {
            items.sort_by_key(|r| format!("{r:?}"));
            Reply::Array(items)
        }
        other => other,
    }
}

/// After a sweep and a compaction: every metadata record live, every live collection's
/// subkeys and score records counted exactly by its size, no record left that `decide` drops.
fn check_clean(backend: &MemoryBackend, layout: &KeyLayout, now: u64) -> Result<(), String> {
    for (key, value) in backend.records(ColumnFamily::Metadata) {
        let meta = Metadata::decode(&value).unwrap();
        if !meta.is_live(now) {
            return Err(format!("sweep left an expired or empty record {key:?}"));
        }
        if meta.ty == RedisType::String {
            continue;
        }
        let user_key = layout.decode_metadata_key(&key).unwrap().user_key.to_vec();
        let range = layout.subkey_range(&user_key, meta.version).unwrap();
        let subkeys = backend.records(ColumnFamily::Subkey).filter(|(k, _)| range.contains(k)).count();
        if subkeys as u64 != meta.size {
            return Err(format!("{subkeys} subkeys of live {user_key:?}, size {}", meta.size));
        }
        let scores = backend.records(ColumnFamily::Score).filter(|(k, _)| range.contains(k)).count();
        let want = if meta.ty == RedisType::ZSet { meta.size } else { 0 };
        if scores as u64 != want {
            return Err(format!("{scores} score records of live {user_key:?}, want {want}"));
        }
    }
    let metadata: Vec<_> = backend.records(ColumnFamily::Metadata).collect();
    for cf in [ColumnFamily::Subkey, ColumnFamily::Score] {
        for (key, _) in backend.records(cf) {
            let find = |k: &[u8]| metadata.iter().find(|(mk, _)| mk.as_ref() == k).map(|(_, v)| v.clone());
            if decide(layout, cf, &key, find, now, 0) != Decision::Keep {
                return Err(format!("orphan left in {cf:?}: {key:?}"));
            }
        }
    }
    Ok(())
}

/// Runs the expiry sweep and a compaction to the end.
fn sweep_and_compact(backend: &MemoryBackend, layout: &KeyLayout, now: u64) {
    let mut sweep = ExpirySweep::new(layout.namespace_range());
    while !sweep.is_done() {
        sweep.step(backend, now, 3).unwrap();
    }
    compact(backend, layout, now, 0).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn sweep_and_compaction_keep_live_data_and_drop_orphans(ops in prop::collection::vec(op(), 1..80)) {
        let (mut db, clock) = db();
        let mut collector = Collector::new(db.layout(), 0);
        for argv in &ops {
            if argv[0] == "#advance" {
                clock.advance_ms(argv[1].parse().unwrap());
            } else if argv[0] == "#collect" {
                let step = collector.step(db.backend(), db.now_ms(), argv[1].parse().unwrap()).unwrap();
                prop_assert!(step.examined <= argv[1].parse().unwrap());
            } else {
                let reply = db.run(argv);
                prop_assert!(!matches!(&reply, Reply::Error(e) if !e.starts_with("WRONGTYPE")), "{argv:?} -> {reply:?}");
            }
        }
        let before = contents(&mut db);
        let now = db.now_ms();
        let layout = db.layout().clone();
        sweep_and_compact(db.backend(), &layout, now);
        prop_assert_eq!(contents(&mut db), before);
        if let Err(problem) = check_clean(db.backend(), &layout, now) {
            prop_assert!(false, "{}", problem);
        }
    }
}

/// A writer thread recreates the same few keys over and over (DEL, overwrite with another
/// type, expiry) while a collector thread steps through the store beside it in small steps.
/// A collector that judged a new version by a stale metadata read would delete live records,
/// and the sizes would no longer match.
#[test]
fn collector_beside_a_writer_never_drops_live_records() {
    let backend = Arc::new(MemoryBackend::new());
    let clock = Arc::new(ManualClock::new(T0_MS));
    let mut db = Db::new(backend.clone()).with_clock(clock.clone()).with_seed(7);
    let layout = db.layout().clone();
    let done = Arc::new(AtomicBool::new(false));
    let collector = {
        let (backend, clock, done, layout) = (backend.clone(), clock.clone(), done.clone(), layout.clone());
        std::thread::spawn(move || {
            let mut collector = Collector::new(&layout, 0);
            let mut steps = 0u64;
            while !done.load(Ordering::Acquire) {
                collector.step(&*backend, clock.now_ms(), 1 + (steps % 7) as usize).unwrap();
                steps += 1;
            }
            collector.stats()
        })
    };
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for _ in 0..50_000 {
        let k = KEYS[next(3) as usize];
        let m = ["x", "y", "z", "w", "v"][next(5) as usize];
        let line = match next(10) {
            0 => format!("DEL {k}"),
            1 => format!("SET {k} {m}"),
            2 => format!("HSET {k} {m} 1"),
            3 => format!("SADD {k} {m}"),
            4 => format!("RPUSH {k} {m}"),
            5 => format!("ZADD {k} {} {m}", next(4)),
            6 => format!("PEXPIRE {k} {}", 1 + next(3)),
            7 => {
                clock.advance_ms(1);
                continue;
            }
            8 => format!("HDEL {k} {m}"),
            _ => format!("LPOP {k}"),
        };
        db.run(&line.split_whitespace().collect::<Vec<_>>());
    }
    done.store(true, Ordering::Release);
    let stats = collector.join().unwrap();
    assert!(stats.passes > 0 && stats.dropped > 0, "the collector ran and collected: {stats:?}");
    let before = contents(&mut db);
    let now = db.now_ms();
    sweep_and_compact(&backend, &layout, now);
    assert_eq!(contents(&mut db), before);
    check_clean(&backend, &layout, now).unwrap();
}

/// Active expiry beside a writer: the writer gives a key a 1 ms TTL, lets it expire, then
/// overwrites it with a persistent value; an expiry thread sweeps all the while. A sweep
/// that deleted what it had found expired without re-checking under the key's lock would
/// now and then delete the fresh value.
#[test]
fn active_expiry_never_deletes_a_key_rewritten_since_it_was_found() {
    use rediskv::Engine;
    use rediskv::gc::expire_step;

    let clock = Arc::new(ManualClock::new(T0_MS));
    let engine = Arc::new(Engine::new(MemoryBackend::new()).with_clock(clock.clone()));
    let done = Arc::new(AtomicBool::new(false));
    let sweeper = {
        let (engine, done) = (engine.clone(), done.clone());
        std::thread::spawn(move || {
            let mut expired = 0usize;
            let mut sweep = ExpirySweep::new(rediskv::KeyRange::prefix(Vec::new()));
            while !done.load(Ordering::Acquire) {
                let step = expire_step(&*engine, &mut sweep, engine.now_ms(), 4).unwrap();
                expired += step.removed.len();
                if step.done {
                    sweep = ExpirySweep::new(rediskv::KeyRange::prefix(Vec::new()));
                }
            }
            expired
        })
    };
    let mut session = engine.session();
    let mut want = std::collections::HashMap::new();
    for round in 0..20_000 {
        let key = format!("k{}", round % 8);
        engine.run(&mut session, &["SET", &key, "short-lived", "PX", "1"]);
        clock.advance_ms(2);
        let value = format!("live-{round}");
        assert_eq!(engine.run(&mut session, &["SET", &key, &value]), Reply::OK);
        want.insert(key, value);
    }
    done.store(true, Ordering::Release);
    let expired = sweeper.join().unwrap();
    for (key, value) in want {
        assert_eq!(engine.run(&mut session, &["GET", &key]), Reply::Bulk(value.into()), "{key}");
    }
    eprintln!("active expiry deleted {expired} expired keys beside the writer");
}

/// The same race, made certain: a backend whose Metadata scans let a "client" overwrite
/// `k` with a persistent value right after the sweep read it as expired. The sweep must
/// leave the new value alone.
#[test]
fn active_expiry_rechecks_a_key_recreated_right_after_the_sweep_read_it() {
    use std::sync::Mutex;

    use rediskv::Engine;
    use rediskv::KeyRange;
    use rediskv::gc::expire_step;
    use rediskv::{Direction, ScanIter, WriteBatch};

    type Hook = Box<dyn FnOnce(&MemoryBackend) + Send>;
    struct Racy {
        inner: MemoryBackend,
        after_metadata_scan: Mutex<Option<Hook>>,
    }
    impl KvBackend for Racy {
        fn get(&self, cf: ColumnFamily, key: &[u8]) -> rediskv::Result<Option<bytes::Bytes>> {
            self.inner.get(cf, key)
        }
        fn scan<'a>(
            &'a self,
            cf: ColumnFamily,
            range: &KeyRange,
            dir: Direction,
        ) -> rediskv::Result<ScanIter<'a>> {
            let items: Vec<_> = self.inner.scan(cf, range, dir)?.collect();
            if cf == ColumnFamily::Metadata
                && let Some(hook) = self.after_metadata_scan.lock().unwrap().take()
            {
                hook(&self.inner);
            }
            Ok(Box::new(items.into_iter()))
        }
        fn write(&self, batch: WriteBatch) -> rediskv::Result<()> {
            self.inner.write(batch)
        }
    }

    let clock = Arc::new(ManualClock::new(T0_MS));
    let engine = Engine::new(Racy { inner: MemoryBackend::new(), after_metadata_scan: Mutex::new(None) })
        .with_clock(clock.clone());
    let mut session = engine.session();
    engine.run(&mut session, &["SET", "k", "old", "PX", "1"]);
    clock.advance_ms(5);
    let fresh = Metadata::string(b"fresh", 0).to_vec();
    let meta_key = engine.layout().metadata_key(b"k");
    *engine.backend().after_metadata_scan.lock().unwrap() = Some(Box::new(move |inner| {
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Metadata, meta_key, fresh);
        inner.write(batch).unwrap();
    }));
    let mut sweep = ExpirySweep::new(KeyRange::prefix(Vec::new()));
    let step = expire_step(&engine, &mut sweep, engine.now_ms(), 10).unwrap();
    assert!(step.removed.is_empty(), "deleted {:?}", step.removed);
    assert_eq!(engine.run(&mut session, &["GET", "k"]), Reply::Bulk("fresh".into()));

    // Without the race, the expired key goes.
    engine.run(&mut session, &["SET", "k", "old", "PX", "1"]);
    clock.advance_ms(5);
    let mut sweep = ExpirySweep::new(KeyRange::prefix(Vec::new()));
    assert_eq!(expire_step(&engine, &mut sweep, engine.now_ms(), 10).unwrap().removed.len(), 1);
    assert_eq!(engine.backend().inner.len(ColumnFamily::Metadata), 0);
}

/// Expiry held (Redis during CLIENT PAUSE): a key past its TTL reads as gone but is neither
/// deleted nor reported; after the hold, the next lookup deletes it with its `expired` event.
#[test]
fn held_expiry_leaves_expired_keys_in_place_until_the_hold_ends() {
    use rediskv::Engine;

    let clock = Arc::new(ManualClock::new(T0_MS));
    let engine = Engine::new(MemoryBackend::new()).with_clock(clock.clone());
    let mut session = engine.session();
    engine.run(&mut session, &["SET", "k", "v", "PX", "10"]);
    engine.hold_expiry_until(T0_MS + 1_000);
    clock.advance_ms(20);
    assert_eq!(engine.run(&mut session, &["GET", "k"]), Reply::Nil);
    assert!(session.events().is_empty(), "{:?}", session.events());
    assert_eq!(engine.backend().records(ColumnFamily::Metadata).count(), 1);
    clock.advance_ms(1_000);
    assert_eq!(engine.run(&mut session, &["GET", "k"]), Reply::Nil);
    assert_eq!(session.events().iter().map(|e| e.name).collect::<Vec<_>>(), ["expired"]);
    assert_eq!(engine.backend().records(ColumnFamily::Metadata).count(), 0);
}

/// DEL, UNLINK and expiry leave a deleted collection's records for the collector; those of
/// more than 64 records (Redis' lazyfree threshold) count as deferred frees.
#[test]
fn deleted_big_collections_count_as_deferred_frees() {
    use rediskv::Engine;

    let clock = Arc::new(ManualClock::new(T0_MS));
    let engine = Engine::new(MemoryBackend::new()).with_clock(clock.clone());
    let mut session = engine.session();
    let fill = |session: &mut _, key: &str, n: usize| {
        let mut argv = vec!["RPUSH".to_string(), key.to_string()];
        argv.extend((0..n).map(|i| i.to_string()));
        engine.run(session, &argv);
    };
    fill(&mut session, "at-threshold", 64);
    fill(&mut session, "over", 65);
    fill(&mut session, "expiring", 100);
    engine.run(&mut session, &["SET", "s", "v"]);
    engine.run(&mut session, &["DEL", "at-threshold", "s"]);
    assert_eq!(engine.deferred_frees(), 0);
    engine.run(&mut session, &["UNLINK", "over"]);
    assert_eq!(engine.deferred_frees(), 1);
    engine.run(&mut session, &["PEXPIRE", "expiring", "10"]);
    clock.advance_ms(20);
    assert_eq!(engine.run(&mut session, &["LLEN", "expiring"]), Reply::Integer(0));
    assert_eq!(engine.deferred_frees(), 2);
}
