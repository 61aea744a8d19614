//! OBJECT ENCODING and REFCOUNT on freshly built keys at every threshold Redis 7.0 switches
//! encodings, compared with a real redis-server (the answers depend only on the content for
//! keys built in one go); MOVE and SWAPDB. Skipped loudly without redis-server, a failure
//! under `CI=true`.

#[path = "differential/client.rs"]
#[allow(dead_code)]
mod client;

use client::{RedisServer, fold, fold_resp2};
use rediskv::MemoryBackend;
use rediskv::{Db, Engine, Protocol, Reply};

fn build() -> Vec<(String, Vec<String>)> {
    let n = |count: usize, f: &dyn Fn(usize) -> Vec<String>| (0..count).flat_map(f).collect::<Vec<_>>();
    let mut keys: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |key: &str, cmd: &str, args: Vec<String>| {
        keys.push((key.to_string(), [vec![cmd.to_string(), key.to_string()], args].concat()));
    };
    for (name, value) in [
        ("s_int", "123".to_string()),
        ("s_bigint", "9223372036854775807".into()),
        ("s_neg", "-1".into()),
        ("s_10000", "10000".into()),
        ("s_minus_zero", "-0".into()),
        ("s_lead_zero", "01".into()),
        ("s_float", "1.5".into()),
        ("s_44", "x".repeat(44)),
        ("s_45", "x".repeat(45)),
        ("s_empty", String::new()),
    ] {
        add(name, "SET", vec![value]);
    }
    add("h_512", "HSET", n(512, &|i| vec![format!("f{i}"), "v".into()]));
    add("h_513", "HSET", n(513, &|i| vec![format!("f{i}"), "v".into()]));
    add("h_value_64", "HSET", vec!["f".into(), "v".repeat(64)]);
    add("h_value_65", "HSET", vec!["f".into(), "v".repeat(65)]);
    add("h_field_65", "HSET", vec!["f".repeat(65), "v".into()]);
    add("set_512", "SADD", n(512, &|i| vec![i.to_string()]));
    add("set_513", "SADD", n(513, &|i| vec![i.to_string()]));
    add("set_str", "SADD", vec!["1".into(), "a".into()]);
    add("set_big_int", "SADD", vec!["-9223372036854775808".into()]);
    add("z_128", "ZADD", n(128, &|i| vec![i.to_string(), format!("m{i}")]));
    add("z_129", "ZADD", n(129, &|i| vec![i.to_string(), format!("m{i}")]));
    add("z_member_65", "ZADD", vec!["1".into(), "m".repeat(65)]);
    add("l", "RPUSH", vec!["a".into()]);
    keys
}

#[test]
fn object_encoding_and_refcount_match_redis_on_fresh_keys() {
    let Some(server) = RedisServer::start_or_skip("generic_commands") else { return };
    let mut redis = server.connect().expect("connect");
    let mut db = Db::new(MemoryBackend::new());
    for (key, argv) in build() {
        redis.call(&argv).unwrap();
        db.run(&argv);
        for sub in ["ENCODING", "REFCOUNT"] {
            let q = ["OBJECT", sub, &key];
            assert_eq!(fold_resp2(&db.run(&q)), redis.call(&q).unwrap(), "OBJECT {sub} {key}");
        }
    }
    for q in [["OBJECT", "ENCODING", "nokey"], ["OBJECT", "FREQ", "s_int"], ["OBJECT", "IDLETIME", "nokey"]] {
        assert_eq!(fold_resp2(&db.run(&q)), redis.call(&q).unwrap(), "{q:?}");
    }
    let help = ["OBJECT", "HELP"];
    assert_eq!(fold_resp2(&db.run(&help)), redis.call(&help).unwrap());
}

/// MOVE and SWAPDB: a script over two connections (`@1` runs a line on the second), run on
/// redis-server and on the engine in both protocols, every reply compared. Covers every
/// type with and without TTL, the errors, a target that holds the key, WATCH aborted by a
/// SWAPDB from another connection, and a SWAPDB inside MULTI.
#[test]
fn move_and_swapdb_match_redis() {
    let Some(server) = RedisServer::start_or_skip("generic_commands") else { return };
    let script = [
        "SET s v",
        "EXPIREAT s 4102444800",
        "HSET h f v g w",
        "RPUSH l a b c",
        "SADD st 1 2 x",
        "ZADD z 1 a 2.5 b",
        "PFADD p a b",
        "MOVE s 0",
        "MOVE s 16",
        "MOVE s -1",
        "MOVE s x",
        "MOVE s 1.5",
        "MOVE s 4294967296",
        "MOVE nokey 1",
        "MOVE s 1",
        "MOVE s 1",
        "MOVE h 1",
        "MOVE l 2",
        "MOVE st 15",
        "MOVE z 1",
        "MOVE p 1",
        "EXISTS s h l st z p",
        "SELECT 1",
        "GET s",
        "EXPIRETIME s",
        "HGETALL h",
        "ZRANGE z 0 -1 WITHSCORES",
        "PFCOUNT p",
        "SET h again",
        "SELECT 0",
        "HSET h f v",
        "MOVE h 1",
        "SELECT 2",
        "LRANGE l 0 -1",
        "SELECT 15",
        "SCARD st",
        "SMISMEMBER st 1 2 x y",
        "SELECT 0",
        "SWAPDB 0 x",
        "SWAPDB x 0",
        "SWAPDB 1.5 0",
        "SWAPDB 0 16",
        "SWAPDB -1 0",
        "SWAPDB 4294967296 0",
        "SWAPDB 0 0",
        "DBSIZE",
        "SWAPDB 0 1",
        "DBSIZE",
        "GET s",
        "HGETALL h",
        "EXPIRETIME s",
        "SELECT 1",
        "HGETALL h",
        "SWAPDB 1 0",
        "GET h",
        "SELECT 0",
        "WATCH s",
        "@1 SWAPDB 0 2",
        "MULTI",
        "GET s",
        "EXEC",
        "LRANGE l 0 -1",
        "SWAPDB 0 2",
        "WATCH s",
        "@1 SET unrelated 1",
        "MULTI",
        "GET s",
        "EXEC",
        "SET w 1",
        "WATCH w",
        "@1 SWAPDB 0 4",
        "MULTI",
        "GET w",
        "EXEC",
        "@1 SWAPDB 0 4",
        "WATCH nowhere",
        "@1 SWAPDB 0 5",
        "@1 SET nowhere x",
        "MULTI",
        "GET nowhere",
        "EXEC",
        "@1 SWAPDB 0 5",
        "MULTI",
        "SET t 1",
        "SWAPDB 0 3",
        "GET t",
        "MOVE s 3",
        "EXEC",
        "GET t",
        "GET s",
        "SELECT 3",
        "GET t",
        "GET s",
    ];
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let mut redis: Vec<client::Client> = (0..2).map(|_| server.connect().expect("connect")).collect();
        if protocol == Protocol::Resp3 {
            redis.iter_mut().for_each(|c| c.hello3().unwrap());
        }
        redis[0].call(&["FLUSHALL"]).unwrap();
        let engine = Engine::new(MemoryBackend::new());
        let mut sessions = [engine.session(), engine.session()];
        for line in script {
            let (conn, line) = line.strip_prefix("@1 ").map_or((0, line), |l| (1, l));
            let argv: Vec<&str> = line.split(' ').collect();
            let ours = fold(&engine.run(&mut sessions[conn], &argv), protocol);
            assert_eq!(ours, redis[conn].call(&argv).unwrap(), "{line} in {protocol:?}");
        }
    }
}

/// A SCAN cursor handed out before a SWAPDB continues over the keys the database holds
/// after it; every key is listed once.
#[test]
fn scan_continues_across_swapdb() {
    let engine = Engine::new(MemoryBackend::new());
    let mut s = engine.session();
    for i in 0..20 {
        engine.run(&mut s, &["SET", &format!("a{i:02}"), "x"]);
    }
    engine.run(&mut s, &["SELECT", "1"]);
    for i in 0..20 {
        engine.run(&mut s, &["SET", &format!("b{i:02}"), "x"]);
    }
    engine.run(&mut s, &["SELECT", "0"]);
    let page = |reply: Reply| -> (String, Vec<String>) {
        let Reply::Array(parts) = fold_resp2(&reply) else { panic!("not a page") };
        let [Reply::Bulk(cursor), Reply::Array(keys)] = parts.as_slice() else { panic!("not a page") };
        let keys = keys.iter().map(|k| format!("{k:?}")).collect();
        (String::from_utf8_lossy(cursor).into_owned(), keys)
    };
    let (cursor, first) = page(engine.run(&mut s, &["SCAN", "0", "COUNT", "5"]));
    assert_eq!(first.len(), 5);
    assert_eq!(engine.run(&mut s, &["SWAPDB", "0", "1"]), Reply::OK);
    let mut rest = Vec::new();
    let mut cursor = cursor;
    while cursor != "0" {
        let (next, keys) = page(engine.run(&mut s, &["SCAN", &cursor, "COUNT", "5"]));
        rest.extend(keys);
        cursor = next;
    }
    // The cursor stood after "a04": database 0 now holds b00..b19, all after it.
    assert_eq!(rest.len(), 20, "{rest:?}");
    assert!(rest.iter().all(|k| k.contains("b")), "{rest:?}");
}

/// The database-to-namespace slots survive a restart through `db_slots`/`restore_db_slots`:
/// a new engine over the same store sees the swapped databases.
#[test]
fn swapdb_slots_restore_over_the_same_store() {
    let backend = std::sync::Arc::new(MemoryBackend::new());
    let engine = Engine::new(backend.clone());
    let mut s = engine.session();
    engine.run(&mut s, &["SET", "k", "zero"]);
    assert_eq!(engine.run(&mut s, &["SWAPDB", "0", "3"]), Reply::OK);
    let slots = engine.db_slots();
    assert_eq!(&slots[..4], [3, 1, 2, 0]);
    assert_eq!(
        engine.db_layout(3).map(|l| l.namespace().to_vec()),
        engine.db_layout(0).map(|_| b"__namespace".to_vec())
    );
    let restarted = Engine::new(backend.clone());
    let mut s = restarted.session();
    assert_eq!(
        restarted.run(&mut s, &["GET", "k"]),
        Reply::bulk(b"zero"),
        "a restart without the slots undoes SWAPDB"
    );
    let restored = Engine::new(backend);
    assert!(restored.restore_db_slots(&slots));
    let mut s = restored.session();
    assert_eq!(restored.run(&mut s, &["GET", "k"]), Reply::Nil);
    restored.run(&mut s, &["SELECT", "3"]);
    assert_eq!(restored.run(&mut s, &["GET", "k"]), Reply::bulk(b"zero"));
    assert!(!restored.restore_db_slots(&[0, 0]));
    assert!(!restored.restore_db_slots(&[1; 16]));
}

/// MEMORY USAGE: nil for a missing key, an estimate that grows with the elements (sampled:
/// the first five by default, all with SAMPLES 0), Redis 7.0's errors.
#[test]
fn memory_usage_estimates_by_element_count() {
    let mut db = Db::new(MemoryBackend::new());
    assert_eq!(db.run(&["MEMORY", "USAGE", "missing"]), Reply::Nil);
    let usage = |db: &mut Db<MemoryBackend>, args: &[&str]| match db.run(args) {
        Reply::Integer(n) => n,
        other => panic!("{args:?} answered {other:?}"),
    };
    db.run(&["SET", "s", "0123456789"]);
    let string = usage(&mut db, &["MEMORY", "USAGE", "s"]);
    assert!((20..200).contains(&string), "a 10-byte string: {string}");
    for (key, n) in [("h100", 100), ("h1000", 1000)] {
        for i in 0..n {
            db.run(&["HSET", key, &format!("field:{i:06}"), "0123456789"]);
        }
    }
    let (small, big) =
        (usage(&mut db, &["MEMORY", "USAGE", "h100"]), usage(&mut db, &["MEMORY", "USAGE", "h1000"]));
    assert!(big > small * 9 && big < small * 11, "100 fields: {small}, 1000 fields: {big}");
    let all = usage(&mut db, &["MEMORY", "USAGE", "h1000", "SAMPLES", "0"]);
    assert!(all > big * 9 / 10 && all < big * 11 / 10, "sampled {big}, all {all}");
    db.run(&["ZADD", "z", "1", "field:000001"]);
    db.run(&["HSET", "h1", "field:000001", ""]);
    assert!(
        usage(&mut db, &["MEMORY", "USAGE", "z"]) > usage(&mut db, &["MEMORY", "USAGE", "h1"]),
        "a zset member has two records"
    );
    let err = |s: &str| Reply::Error(s.into());
    assert_eq!(
        db.run(&["MEMORY", "USAGE", "s", "SAMPLES", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(db.run(&["MEMORY", "USAGE", "s", "SAMPLES", "-1"]), err("ERR syntax error"));
    assert_eq!(db.run(&["MEMORY", "USAGE", "s", "FOO"]), err("ERR syntax error"));
    assert_eq!(db.run(&["MEMORY", "USAGE"]), err("ERR wrong number of arguments for 'memory|usage' command"));
    assert_eq!(db.run(&["MEMORY", "NOPE"]), err("ERR unknown subcommand 'NOPE'. Try MEMORY HELP."));
}
