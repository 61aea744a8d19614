//! A whole store to an RDB file and back ([`save_rdb`], [`RdbLoader`]), in each layout: every
//! type in every encoding, TTLs, a stream with a consumer group, several databases, and the
//! records a deleted or replaced collection leaves behind. The file holds each live key as
//! DUMP gives it, with its expiry, and nothing else; loading it, a few keys to a batch or
//! many, gives the same keys, expiries and key counts.

#[path = "support/rdb_fixtures.rs"]
mod rdb_fixtures;

use std::collections::BTreeMap;

use rdb_fixtures::normalized;
use rediskv::MemoryBackend;
use rediskv::rdb::{RdbValue, restore};
use rediskv::server::{RdbLoader, RdbSave, save_rdb};
use rediskv::{Engine, Reply, Session};
use rediskv::{KeyLayout, RdbFileOptions, RdbFileReader, RdbHeader, RdbItem};

const DATABASES: usize = 4;

fn layouts() -> Vec<KeyLayout> {
    vec![
        KeyLayout::default(),
        KeyLayout::default().with_cluster_slots(true),
        KeyLayout::neokv(1, 2),
        KeyLayout::camellia(b"ns"),
        KeyLayout::titea(b"ns"),
    ]
}

fn ok(engine: &Engine<MemoryBackend>, session: &mut Session, argv: &[&[u8]]) -> Reply {
    let reply = engine.run(session, argv);
    assert!(!matches!(reply, Reply::Error(_)), "{:?}: {reply:?}", String::from_utf8_lossy(argv[0]));
    reply
}

/// Every type and encoding the layout stores in database 0, a few keys with TTLs in 1 and
/// 3, and collections deleted, replaced by another type, or recreated (their old records
/// stay until the collector runs).
fn fill(engine: &Engine<MemoryBackend>) {
    let mut s = engine.session();
    for argv in rdb_fixtures::fixtures() {
        let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        // A layout refuses the types it cannot store (camellia's lists): left out.
        let _ = engine.run(&mut s, &argv);
    }
    for line in [
        "SET ttl_string v PX 86400000",
        "HSET recreated a 1 b 2",
        "DEL recreated",
        "HSET recreated c 3",
        "SADD deleted x y",
        "DEL deleted",
        "ZADD replaced 1 a 2 b",
        "SET replaced now-a-string",
        "SADD expired x",
        "PEXPIREAT expired 1",
        "SELECT 1",
        "HSET h1 f v",
        "PEXPIREAT h1 4102444800000",
        "ZADD z1 1 a",
        "SELECT 3",
        "SADD in_three x y",
        "SET s3 v EX 1000",
        "SELECT 0",
    ] {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        ok(engine, &mut s, &argv);
    }
}

type Keys = BTreeMap<(u64, Vec<u8>), (RdbValue, i64)>;

/// Every key of every database as the engine answers: its value (from DUMP) and PEXPIRETIME.
fn keys_of(engine: &Engine<MemoryBackend>) -> Keys {
    let mut s = engine.session();
    let mut all = BTreeMap::new();
    for db in 0..DATABASES {
        ok(engine, &mut s, &[b"SELECT", db.to_string().as_bytes()]);
        let Reply::Array(keys) = ok(engine, &mut s, &[b"KEYS", b"*"]) else { panic!("KEYS") };
        for key in keys {
            let Reply::Bulk(key) = key else { panic!("a key") };
            let Reply::Bulk(payload) = ok(engine, &mut s, &[b"DUMP", &key]) else { panic!("DUMP") };
            let Reply::Integer(at) = ok(engine, &mut s, &[b"PEXPIRETIME", &key]) else {
                panic!("PEXPIRETIME")
            };
            all.insert(
                (db as u64, key.to_vec()),
                (normalized(restore(&payload).expect("DUMP restores")), at),
            );
        }
    }
    all
}

fn assert_same(got: &Keys, want: &Keys, what: &str) {
    let keys: std::collections::BTreeSet<_> = want.keys().chain(got.keys()).collect();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|(db, key)| {
            format!(
                "db {db} {}: {}",
                String::from_utf8_lossy(key),
                if got.contains_key(&(*db, key.clone())) {
                    if want.contains_key(&(*db, key.clone())) { "differs" } else { "extra" }
                } else {
                    "missing"
                }
            )
        })
        .collect();
    assert!(differ.is_empty(), "{what}: {differ:?}");
}

fn dbsizes(engine: &Engine<MemoryBackend>) -> Vec<Reply> {
    let mut s = engine.session();
    (0..DATABASES)
        .map(|db| {
            ok(engine, &mut s, &[b"SELECT", db.to_string().as_bytes()]);
            ok(engine, &mut s, &[b"DBSIZE"])
        })
        .collect()
}

fn save(engine: &Engine<MemoryBackend>) -> Vec<u8> {
    let header = RdbHeader { redis_ver: "7.0.15".into(), ctime: 1, used_mem: 1, replication: None };
    let sizes = vec![(0, 0); DATABASES];
    let save = RdbSave {
        header,
        functions: &[],
        databases: DATABASES,
        sizes: &sizes,
        options: RdbFileOptions { compression: true, checksum: true },
    };
    let mut file = Vec::new();
    let mut emit = |b: &[u8]| {
        file.extend_from_slice(b);
        Ok(())
    };
    let counts = save_rdb(engine, &save, &mut emit, &mut |_| {}).expect("saved");
    assert_eq!(counts.bytes, file.len() as u64);
    file
}

#[test]
fn a_store_saves_its_live_keys_and_loads_back_the_same_in_every_layout() {
    for layout in layouts() {
        let name = format!("{:?}", layout.kind());
        let engine = Engine::with_layout(MemoryBackend::new(), layout.clone());
        fill(&engine);
        let want = keys_of(&engine);
        assert!(want.len() > 10, "{name}: {} keys", want.len());
        for gone in [&b"deleted"[..], b"expired"] {
            assert!(!want.contains_key(&(0, gone.to_vec())), "{name}");
        }
        let file = save(&engine);

        let mut in_file = Keys::new();
        for item in RdbFileReader::read_all(&file).expect("a valid file") {
            if let RdbItem::Entry(e) = item {
                let at = e.expire_at_ms.unwrap_or(-1);
                let fresh = in_file.insert((e.db, e.key.to_vec()), (normalized(e.value), at));
                assert!(fresh.is_none(), "{name}: {:?} written twice", e.key);
            }
        }
        assert_same(&in_file, &want, &format!("{name}: the file's keys"));

        for batch_ops in [1, 3, usize::MAX] {
            let copy = Engine::with_layout(MemoryBackend::new(), layout.clone());
            let mut loader = RdbLoader::new(&copy).with_batch_ops(batch_ops);
            RdbFileReader::read_from(&mut &file[..], &mut |item| loader.take(item)).expect("loaded");
            let (counts, _) = loader.finish().expect("finished");
            assert_eq!(counts.keys, want.len() as u64, "{name}");
            assert_same(&keys_of(&copy), &want, &format!("{name}: loaded {batch_ops} ops a batch"));
            assert_eq!(dbsizes(&copy), dbsizes(&engine), "{name}: key counts");
        }
    }
}
