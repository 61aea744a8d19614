//! The converter and the record codec on real fjall stores: random data in each layout is
//! converted to every other layout and back, and every key's type, contents (its DUMP) and
//! TTL are compared through the engine; every record a dump shows encodes back to its bytes.

use std::path::Path;
use std::process::Command;

use rediskv::{ColumnFamily, KeyLayout, KeyRange, RedisType, Version};
use rediskv::{Engine, Reply};
use rediskv_engine::testkit::TempDir;
use rediskv_inspect::convert::convert;
use rediskv_inspect::record::{self, Record};
use rediskv_inspect::store::{self, Filter, Store};

// The library's test generator (a workspace file: this crate is not published alone).
#[path = "../../tests/common/rng.rs"]
mod rng;
use rng::Rng;

const DATABASES: [usize; 3] = [0, 1, 9];

fn layouts() -> Vec<(&'static str, KeyLayout)> {
    vec![
        ("kvrocks", KeyLayout::default()),
        ("kvrocks with slots", KeyLayout::new(b"ns").unwrap().with_cluster_slots(true)),
        ("neokv", KeyLayout::neokv(1, 1)),
        ("neokv region 9", KeyLayout::neokv(9, 40)),
        ("camellia", KeyLayout::camellia(b"default")),
        (
            "camellia uncounted, md5",
            KeyLayout::camellia(b"t")
                .with_encode_version(RedisType::Hash, 1)
                .unwrap()
                .with_encode_version(RedisType::Set, 1)
                .unwrap()
                .with_hash_prefix(8)
                .unwrap(),
        ),
        ("titea", KeyLayout::titea(b"default.default")),
    ]
}

/// Random keys of every type the layout holds (lists and streams only where it has them),
/// some with TTLs, in three databases. Returns the keys of types some layout cannot hold
/// (lists, streams) with their database and type.
fn load(store: &Store, layout: &KeyLayout, seed: u64) -> Vec<(usize, String, RedisType)> {
    let engine = Engine::with_layout(store.clone(), layout.clone());
    let mut session = engine.session();
    let mut rng = Rng(seed);
    let mut partial = Vec::new();
    let streams_ok = layout.stores(RedisType::Stream);
    let lists_ok = layout.stores(RedisType::List);
    for db in DATABASES {
        assert_eq!(engine.run(&mut session, &["SELECT", &db.to_string()]), Reply::OK);
        for i in 0..150 {
            let key = format!("k{i}:{}", rng.below(1000));
            let mut cmd: Vec<String> = match rng.below(8) {
                0 => vec!["SET".into(), key.clone(), format!("v{}", rng.below(100))],
                1 => ["HSET", &key, "a", "1", &format!("f{}", rng.below(9)), "x"].map(String::from).to_vec(),
                2 if lists_ok => {
                    partial.push((db, key.clone(), RedisType::List));
                    ["RPUSH", &key, "a", "b", &format!("c{}", rng.below(9))].map(String::from).to_vec()
                }
                3 => ["SADD", &key, "m1", &format!("m{}", rng.below(9))].map(String::from).to_vec(),
                4 => {
                    ["ZADD", &key, "1.5", "a", &format!("-{}", rng.below(9)), "b"].map(String::from).to_vec()
                }
                5 => ["SETBIT", &key, &rng.below(5000).to_string(), "1"].map(String::from).to_vec(),
                6 => ["PFADD", &key, "x", "y", &format!("z{}", rng.below(9))].map(String::from).to_vec(),
                7 if streams_ok => {
                    partial.push((db, key.clone(), RedisType::Stream));
                    ["XADD", &key, "*", "f", "v"].map(String::from).to_vec()
                }
                _ => vec!["SET".into(), key.clone(), "\u{0}binary\u{ff}".into()],
            };
            let reply = engine.run(&mut session, &cmd);
            assert!(!matches!(reply, Reply::Error(_)), "{cmd:?}: {reply:?}");
            if rng.below(4) == 0 {
                cmd = vec!["PEXPIRE".into(), key, (100_000_000 + rng.below(1000)).to_string()];
                engine.run(&mut session, &cmd);
            }
        }
    }
    store.flush().unwrap();
    partial
}

/// Every key of every database: (db, key, DUMP payload, PEXPIRETIME).
fn contents(store: &Store, layout: &KeyLayout) -> Vec<(usize, Vec<u8>, Vec<u8>, i64)> {
    let engine = Engine::with_layout(store.clone(), layout.clone());
    let mut session = engine.session();
    let mut all = Vec::new();
    for db in DATABASES {
        engine.run(&mut session, &["SELECT", &db.to_string()]);
        let Reply::Array(keys) = engine.run(&mut session, &["KEYS", "*"]) else { panic!("KEYS") };
        for key in keys {
            let Reply::Bulk(key) = key else { panic!("a key") };
            let Reply::Bulk(dump) = engine.run(&mut session, &[b"DUMP".as_slice(), &key]) else {
                panic!("DUMP")
            };
            let Reply::Integer(ttl) = engine.run(&mut session, &[b"PEXPIRETIME".as_slice(), &key]) else {
                panic!("PEXPIRETIME")
            };
            all.push((db, key.to_vec(), dump.to_vec(), ttl));
        }
    }
    all.sort();
    all
}

/// `a` and `b` hold the same keys, contents and expiry times, to the millisecond.
fn assert_same(a: &[(usize, Vec<u8>, Vec<u8>, i64)], b: &[(usize, Vec<u8>, Vec<u8>, i64)], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: key counts");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x, y, "{what}: key {:?}", String::from_utf8_lossy(&x.1));
    }
}

fn open(dir: &Path, layout: &KeyLayout) -> Store {
    store::open("fjall", dir, layout).unwrap()
}

/// Converts a store of the `i`th layout to every layout and back, checking each copy key by
/// key and with FSCK. One test per source layout, so that they run side by side.
fn converts_to_every_layout_and_back(i: usize) {
    let mut pairs = 0;
    let (from_name, from) = layouts().swap_remove(i);
    {
        let dir = TempDir::new("convert-src");
        let source = open(dir.path(), &from);
        let partial = load(&source, &from, 0x9E37_79B9 + i as u64);
        let original = contents(&source, &from);
        assert!(original.len() > 400, "{from_name}: {} keys", original.len());
        for (to_name, to) in layouts() {
            let (there_dir, back_dir) = (TempDir::new("convert-there"), TempDir::new("convert-back"));
            let there = open(there_dir.path(), &to);
            let report = convert(&source, &from, &there, &to, &mut |_, _| {}).unwrap();
            // Streams cannot go to NeoKV, lists and streams to camellia: exactly those keys are
            // left out, with the reason.
            let out: Vec<&(usize, String, RedisType)> =
                partial.iter().filter(|(_, _, ty)| !to.stores(*ty)).collect();
            assert_eq!(report.skipped_count as usize, out.len(), "{from_name} → {to_name}: {report:?}");
            assert!(
                report.skipped.iter().all(|(key, why)| {
                    out.iter().any(|(_, k, ty)| {
                        k == key && why.contains(&format!("cannot store a {} key", ty.name()))
                    })
                }),
                "{report:?}"
            );
            assert_eq!(report.converted as usize, original.len() - out.len());
            let kept: Vec<_> = original
                .iter()
                .filter(|k| !out.iter().any(|(db, s, _)| *db == k.0 && s.as_bytes() == k.1))
                .cloned()
                .collect();
            assert_same(&kept, &contents(&there, &to), &format!("{from_name} → {to_name}"));
            assert_eq!(rediskv::fsck::check(&there, &to, now_ms()).unwrap(), vec![]);

            let back = open(back_dir.path(), &from);
            convert(&there, &to, &back, &from, &mut |_, _| {}).unwrap();
            assert_same(&kept, &contents(&back, &from), &format!("{from_name} → {to_name} → {from_name}"));
            pairs += 1;
        }
    }
    assert_eq!(pairs, layouts().len());
}

#[test]
fn kvrocks_converts_to_every_layout_and_back() {
    converts_to_every_layout_and_back(0);
}

#[test]
fn kvrocks_with_slots_converts_to_every_layout_and_back() {
    converts_to_every_layout_and_back(1);
}

#[test]
fn neokv_converts_to_every_layout_and_back() {
    converts_to_every_layout_and_back(2);
}

#[test]
fn neokv_region_9_converts_to_every_layout_and_back() {
    converts_to_every_layout_and_back(3);
}

#[test]
fn camellia_converts_to_every_layout_and_back() {
    converts_to_every_layout_and_back(4);
}

#[test]
fn camellia_uncounted_md5_converts_to_every_layout_and_back() {
    converts_to_every_layout_and_back(5);
}

#[test]
fn titea_converts_to_every_layout_and_back() {
    converts_to_every_layout_and_back(6);
}

#[test]
fn each_layout_has_its_conversion_test() {
    assert_eq!(layouts().len(), 7, "a new layout needs its own *_converts_to_every_layout_and_back test");
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Dumps every record of `store` and checks that each line encodes back to its record's
/// bytes; returns the lines.
fn assert_records_encode_back(name: &str, store: &Store, layout: &KeyLayout) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let n = store::dump(store.as_ref(), layout, &Filter::default(), &mut out).unwrap();
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len() as u64, n);
    let mut records = Vec::new();
    for cf in ColumnFamily::ALL {
        let scan = rediskv::KvBackend::scan(
            store.as_ref(),
            cf,
            &KeyRange::prefix(Vec::new()),
            rediskv::Direction::Forward,
        )
        .unwrap();
        records.extend(scan.map(|r| r.unwrap()).map(|(k, v)| Record {
            cf,
            key: k.to_vec(),
            value: v.to_vec(),
        }));
    }
    assert_eq!(records.len(), lines.len(), "{name}: one line per record");
    for (json, rec) in lines.iter().zip(&records) {
        assert!(json.get("error").is_none(), "{name}: {json}");
        assert_eq!(&record::encode(layout, json).unwrap(), rec, "{name}: {json}");
    }
    lines
}

#[test]
fn every_dumped_record_encodes_back_to_its_bytes() {
    for (name, layout) in layouts() {
        let dir = TempDir::new("inspect-records");
        let store = open(dir.path(), &layout);
        load(&store, &layout, 77);
        if layout.kind() == rediskv::LayoutKind::NeoKv {
            // A string of NeoKV's first encoding too.
            let mut batch = rediskv::WriteBatch::new();
            let key = layout.legacy_string_key(&layout.metadata_key(b"legacy")).unwrap();
            batch.put(ColumnFamily::Subkey, key, rediskv::encode_neokv_legacy(5, b"old"));
            rediskv::KvBackend::write(store.as_ref(), batch).unwrap();
        }
        let lines = assert_records_encode_back(name, &store, &layout);
        assert!(lines.len() > 800, "{name}: {} records", lines.len());
    }
}

/// Keys of every type the layout stores, small and big, some with TTLs, in two databases:
/// lists grown both ways, scores of ±inf, a stream with a group, a consumer and pending
/// entries, bitmaps over many fragments, sparse and dense HyperLogLogs.
fn load_every_kind(store: &Store, layout: &KeyLayout) {
    let engine = Engine::with_layout(store.clone(), layout.clone());
    let mut session = engine.session();
    let big: Vec<String> = (0..300).map(|i| format!("e{i}")).collect();
    let words = |cmd: &[&str], key: &str, tail: &[String]| -> Vec<String> {
        let mut out: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        out.insert(1, key.to_string());
        out.extend(tail.iter().cloned());
        out
    };
    let pairs = |f: &dyn Fn(usize, &String) -> [String; 2]| -> Vec<String> {
        big.iter().enumerate().flat_map(|(i, e)| f(i, e)).collect()
    };
    for db in [0, 2] {
        assert_eq!(engine.run(&mut session, &["SELECT", &db.to_string()]), Reply::OK);
        let mut cmds: Vec<Vec<String>> = vec![
            words(&["SET"], "str", &["v".into()]),
            words(&["SET"], "str-big", &["x".repeat(100_000)]),
            words(&["SET"], "str-bin", &["\u{0}\u{ff}".into()]),
            words(&["HSET"], "hash", &["f".into(), "v".into()]),
            words(&["HSET"], "hash-big", &pairs(&|i, e| [e.clone(), "v".repeat(i * 7)])),
            words(&["SADD"], "set", &["m".into()]),
            words(&["SADD"], "set-big", &big),
            words(
                &["ZADD"],
                "zset",
                &["-inf".into(), "a".into(), "+inf".into(), "b".into(), "-2.5".into(), "c".into()],
            ),
            words(&["ZADD"], "zset-big", &pairs(&|i, e| [format!("{}", i as f64 / 3.0 - 50.0), e.clone()])),
            words(&["SETBIT"], "bits", &["7".into(), "1".into()]),
            words(&["SETBIT"], "bits-big", &["9000000".into(), "1".into()]),
            words(&["PFADD"], "hll", &["a".into(), "b".into()]),
            words(&["PFADD"], "hll-big", &(0..5000).map(|i| format!("x{i}")).collect::<Vec<_>>()),
        ];
        if layout.stores(RedisType::List) {
            cmds.push(words(&["RPUSH"], "list", &["a".into()]));
            cmds.push(words(&["RPUSH"], "list-big", &big));
            cmds.push(words(&["LPUSH"], "list-big", &big));
        }
        if layout.stores(RedisType::Stream) {
            for i in 1..=5 {
                cmds.push(words(&["XADD"], "stream", &[format!("{i}-1"), "f".into(), "v".repeat(i)]));
            }
            cmds.push(["XGROUP", "CREATE", "stream", "g", "0"].map(String::from).to_vec());
            cmds.push(
                ["XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "stream", ">"]
                    .map(String::from)
                    .to_vec(),
            );
        }
        for cmd in &cmds {
            let reply = engine.run(&mut session, cmd);
            assert!(!matches!(reply, Reply::Error(_)), "{cmd:?}: {reply:?}");
        }
        for key in ["str", "hash-big", "set", "zset", "bits-big", "hll-big", "list-big", "stream"] {
            engine.run(&mut session, &["PEXPIRE", key, "100000000"]);
        }
    }
    store.flush().unwrap();
}

/// Counts `json` lines of a dump that name a subkey's part `part` (`index`, `field`, …), and
/// for members whether a `score` is there.
fn count(lines: &[serde_json::Value], cf: &str, part: &str, with_score: Option<bool>) -> usize {
    lines
        .iter()
        .filter(|l| l["cf"] == cf && l.get(part).is_some())
        .filter(|l| with_score.is_none_or(|s| l.get("score").is_some() == s))
        .count()
}

#[test]
fn every_record_kind_of_every_layout_encodes_back_to_its_bytes() {
    for (name, layout) in layouts() {
        let dir = TempDir::new("inspect-kinds");
        let store = open(dir.path(), &layout);
        load_every_kind(&store, &layout);
        let lines = assert_records_encode_back(name, &store, &layout);
        // Every element is decoded as its type's: the owner's type was found (TiTea's by the
        // object id), lists by index, sorted sets' members without a marker byte.
        let lists = if layout.stores(RedisType::List) { 2 * (1 + 600) } else { 0 };
        assert_eq!(count(&lines, "subkey", "index", None), lists, "{name}");
        assert_eq!(count(&lines, "subkey", "member", Some(true)), 2 * 303, "{name}: zset members");
        assert_eq!(count(&lines, "score", "member", None), 2 * 303, "{name}: zset scores");
        assert_eq!(count(&lines, "subkey", "member", Some(false)), 2 * 301, "{name}: set members");
        assert_eq!(count(&lines, "subkey", "field", None), 2 * 301, "{name}: hash fields");
        assert!(lines.iter().all(|l| l["key"] != ""), "{name}: every record names its key");
        let members: Vec<&str> = lines.iter().filter_map(|l| l["member"].as_str()).collect();
        assert!(members.contains(&"a") && members.contains(&"e299"), "{name}: {members:?}");
        for (member, score) in [("a", "-inf"), ("b", "inf")] {
            assert!(lines.iter().any(|l| l["member"] == member && l["score"] == score), "{name}: {member}");
        }
        if layout.stores(RedisType::Stream) {
            for part in ["entry", "group", "consumer", "pending_entry"] {
                assert!(count(&lines, "stream", part, None) > 0, "{name}: a stream {part}");
            }
        }
    }
}

#[test]
fn the_tool_dumps_with_filters_and_converts_with_a_progress_bar() {
    let layout = KeyLayout::default();
    let (dir, out_dir) = (TempDir::new("inspect-cli"), TempDir::new("inspect-cli-out"));
    {
        let store = open(dir.path(), &layout);
        let engine = Engine::with_layout(store.clone(), layout.clone());
        let mut s = engine.session();
        for cmd in [&["HSET", "h", "f1", "v1", "f2", "v2"][..], &["SET", "s", "x"], &["RPUSH", "l", "a"]] {
            engine.run(&mut s, cmd);
        }
        store.flush().unwrap();
    }
    let inspect = env!("CARGO_BIN_EXE_rediskv-inspect");
    let dump = Command::new(inspect)
        .args(["dump", "--dir", dir.path().to_str().unwrap(), "--type", "hash"])
        .output()
        .unwrap();
    assert!(dump.status.success(), "{}", String::from_utf8_lossy(&dump.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8(dump.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3, "the hash's metadata and two fields: {lines:?}");
    assert!(lines.iter().all(|l| l["key"] == "h"));
    assert_eq!(lines[1]["field"], "f1");
    assert_eq!(lines[1]["value"], "v1");

    let target = out_dir.path().join("neokv");
    let (from, to) = (dir.path().to_str().unwrap(), target.to_str().unwrap());
    let convert = || {
        Command::new(inspect)
            .args(["convert", "--dir", from, "--out", to, "--layout", "neokv"])
            .output()
            .unwrap()
    };
    let run = convert();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("100% 3/3 keys"), "{stderr}");
    assert!(stderr.contains("3 keys converted from kvrocks to neokv, 0 left out"), "{stderr}");
    assert_eq!(store::stored_layout("fjall", &target).unwrap(), Some(KeyLayout::neokv(1, 1)));
    // A second run refuses to write over the store.
    let again = convert();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("holds a store already"));
}

#[test]
fn decoding_random_bytes_never_panics() {
    let mut rng = Rng(12345);
    let types =
        [None, Some("hash"), Some("list"), Some("set"), Some("zset"), Some("bitmap"), Some("sortedint")];
    for (_, layout) in layouts() {
        // Real prefixes with random tails, and random bytes.
        let version =
            if layout.version_len() == 16 { Version::Id(7u128.to_be_bytes()) } else { Version::Short(7) };
        let seeds = [layout.metadata_key(b"k"), layout.subkey(b"k", version, b"").unwrap(), Vec::new()];
        for i in 0..20_000 {
            let mut key = seeds[i % 3].clone();
            key.extend((0..rng.below(40)).map(|_| rng.below(256) as u8));
            let value: Vec<u8> = (0..rng.below(60)).map(|_| rng.below(256) as u8).collect();
            let cf = ColumnFamily::ALL[rng.below(4) as usize];
            let ty = types[rng.below(types.len() as u64) as usize].map(|t| record::redis_type(t).unwrap());
            let _ = record::decode(&layout, cf, &key, Some(&value), ty);
        }
    }
}

#[test]
fn strings_of_neokvs_first_encoding_are_converted() {
    let from = KeyLayout::neokv(1, 1);
    let (dir, out) = (TempDir::new("convert-legacy"), TempDir::new("convert-legacy-out"));
    let source = open(dir.path(), &from);
    let mut batch = rediskv::WriteBatch::new();
    for (key, expire) in [(&b"old"[..], 0), (b"old-ttl", now_ms() + 100_000_000)] {
        let legacy = from.legacy_string_key(&from.metadata_key(key)).unwrap();
        batch.put(ColumnFamily::Subkey, legacy, rediskv::encode_neokv_legacy(expire, b"v"));
    }
    rediskv::KvBackend::write(source.as_ref(), batch).unwrap();
    let target = open(out.path(), &KeyLayout::default());
    let report = convert(&source, &from, &target, &KeyLayout::default(), &mut |_, _| {}).unwrap();
    assert_eq!((report.converted, report.skipped_count), (2, 0));
    let engine = Engine::with_layout(target.clone(), KeyLayout::default());
    let mut s = engine.session();
    assert_eq!(engine.run(&mut s, &["GET", "old"]), Reply::bulk(b"v"));
    assert_eq!(engine.run(&mut s, &["TTL", "old"]), Reply::Integer(-1));
    assert!(matches!(engine.run(&mut s, &["TTL", "old-ttl"]), Reply::Integer(t) if t > 99_000));
}

/// camellia's TiKV/HBase route (md5 of the decimal slot, first 8 bytes; slot("foo") = 12182,
/// md5("12182") = a36470cf1f8e5aaf…) is added by `encode` and stripped by `decode`.
#[test]
fn the_tool_adds_and_strips_camellia_routes() {
    let inspect = env!("CARGO_BIN_EXE_rediskv-inspect");
    let run = |args: &[&str]| {
        let out = Command::new(inspect).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let layout = ["--layout", "camellia", "--namespace", "ns"];
    let json = r#"{"cf":"metadata","key":"foo","type":"hash","version":5,"size":2}"#;
    let encoded = run(&[&["encode"][..], &layout, &["--camellia-route", "md5", json]].concat());
    assert_eq!(encoded["key"], "a36470cf1f8e5aaf6d236e73666f6f");
    assert_eq!(encoded["value"], "00020000000000000005ffffffffffffffff00000002");
    let int = run(&[&["encode"][..], &layout, &["--camellia-route", "int", json]].concat());
    assert_eq!(int["key"], "00002f966d236e73666f6f");
    let decoded = run(&[
        &["decode"][..],
        &layout,
        &["--camellia-route", "md5", "--cf", "metadata", "a36470cf1f8e5aaf6d236e73666f6f"],
        &["00020000000000000005ffffffffffffffff00000002"],
    ]
    .concat());
    assert_eq!((decoded["key"].as_str(), decoded["size"].as_u64()), (Some("foo"), Some(2)));
    assert_eq!(decoded["route"], "a36470cf1f8e5aaf");
}
