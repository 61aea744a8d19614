//! DUMP/RESTORE both ways with a real redis-server 7.0: what Redis dumps (every encoding of
//! the five types: small and large collections, integers, long and compressed strings)
//! restores here to the same contents, and what this engine dumps restores in Redis to the
//! same contents. Bad payloads and options get the same replies on both sides.
//!
//! Without `redis-server` the test is skipped loudly, except under `CI=true`, where it fails.

#[path = "differential/client.rs"]
#[allow(dead_code)]
mod client;

use bytes::Bytes;
#[path = "support/rdb_fixtures.rs"]
mod rdb_fixtures;

use client::{Client, RedisServer, fold_resp2};
use rdb_fixtures::{fixtures, keys};
use rediskv::MemoryBackend;
use rediskv::{Db, Reply};

fn call<A: AsRef<[u8]>>(redis: &mut Client, argv: &[A]) -> Reply {
    redis.call(argv).expect("redis-server answers")
}

fn run<A: AsRef<[u8]>>(db: &mut Db<MemoryBackend>, argv: &[A]) -> Reply {
    fold_resp2(&db.run(argv))
}

/// Everything a client reads of `key`, with unordered collections sorted.
fn contents(mut read: impl FnMut(&[&[u8]]) -> Reply, key: &[u8]) -> Vec<Reply> {
    let ty = read(&[b"TYPE", key]);
    let sorted = |r: Reply, pairs: bool| match r {
        Reply::Array(items) if pairs => {
            let mut p: Vec<Vec<Reply>> = items.chunks(2).map(<[Reply]>::to_vec).collect();
            p.sort_by_key(|p| format!("{p:?}"));
            Reply::Array(p.concat())
        }
        Reply::Array(mut items) => {
            items.sort_by_key(|r| format!("{r:?}"));
            Reply::Array(items)
        }
        other => other,
    };
    let body = match &ty {
        Reply::Status(t) if t == "string" => read(&[b"GET", key]),
        Reply::Status(t) if t == "hash" => sorted(read(&[b"HGETALL", key]), true),
        Reply::Status(t) if t == "set" => sorted(read(&[b"SMEMBERS", key]), false),
        Reply::Status(t) if t == "list" => read(&[b"LRANGE", key, b"0", b"-1"]),
        Reply::Status(t) if t == "zset" => read(&[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"]),
        // Entries, groups (read counters and lag included), and who holds what.
        Reply::Status(t) if t == "stream" => Reply::Array(vec![
            read(&[b"XRANGE", key, b"-", b"+"]),
            read(&[b"XINFO", b"GROUPS", key]),
            read(&[b"XPENDING", key, b"g1"]),
            read(&[b"XLEN", key]),
        ]),
        _ => Reply::Nil,
    };
    vec![ty, body]
}

fn start() -> Option<(RedisServer, Client)> {
    if !RedisServer::available() {
        client::missing_redis("dump_restore");
        return None;
    }
    let server = RedisServer::start().expect("start redis-server");
    let client = server.connect().expect("connect");
    Some((server, client))
}

#[test]
fn redis_dumps_restore_here_and_our_dumps_restore_in_redis() {
    let Some((_server, mut redis)) = start() else { return };
    let mut db = Db::new(MemoryBackend::new());
    for argv in fixtures() {
        assert!(!call(&mut redis, &argv).is_error());
        assert!(!run(&mut db, &argv).is_error());
    }
    for key in keys() {
        let k = key.as_bytes();
        let want = contents(|a| call(&mut redis, a), k);

        // Redis → engine.
        let Reply::Bulk(payload) = call(&mut redis, &[&b"DUMP"[..], k]) else { panic!("DUMP {key}") };
        let copy = format!("from_redis_{key}");
        assert_eq!(run(&mut db, &[&b"RESTORE"[..], copy.as_bytes(), b"0", &payload]), Reply::OK, "{key}");
        assert_eq!(
            contents(|a| run(&mut db, a), copy.as_bytes())[1],
            want[1],
            "Redis' DUMP of {key} restored here"
        );

        // Engine → Redis.
        let Reply::Bulk(ours) = run(&mut db, &[&b"DUMP"[..], k]) else { panic!("our DUMP {key}") };
        let copy = format!("from_engine_{key}");
        assert_eq!(call(&mut redis, &[&b"RESTORE"[..], copy.as_bytes(), b"0", &ours]), Reply::OK, "{key}");
        assert_eq!(
            contents(|a| call(&mut redis, a), copy.as_bytes())[1],
            want[1],
            "our DUMP of {key} restored in Redis"
        );
    }
}

#[test]
fn restore_options_and_bad_payloads_answer_as_redis() {
    let Some((_server, mut redis)) = start() else { return };
    let mut db = Db::new(MemoryBackend::new());
    let set = [&b"SET"[..], b"k", b"v"];
    call(&mut redis, &set);
    run(&mut db, &set);
    let Reply::Bulk(good) = call(&mut redis, &[&b"DUMP"[..], b"k"]) else { panic!() };
    let mut bad_crc = good.to_vec();
    *bad_crc.last_mut().unwrap() ^= 0xFF;
    let mut garbage = vec![7u8, 2, b'a', b'b', 10, 0];
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(&garbage);
    garbage.extend_from_slice(&crc.to_le_bytes());
    let g = |s: &str| Bytes::copy_from_slice(s.as_bytes());
    let cases: Vec<Vec<Bytes>> = vec![
        vec![g("RESTORE"), g("k"), g("0"), good.clone()],
        vec![g("RESTORE"), g("k"), g("abc"), good.clone()],
        vec![g("RESTORE"), g("n"), g("abc"), good.clone()],
        vec![g("RESTORE"), g("n"), g("-5"), good.clone()],
        vec![g("RESTORE"), g("n"), g("0"), good.clone(), g("FOO")],
        vec![g("RESTORE"), g("n"), g("0"), good.clone(), g("IDLETIME")],
        vec![g("RESTORE"), g("n"), g("0"), good.clone(), g("IDLETIME"), g("-1")],
        vec![g("RESTORE"), g("n"), g("0"), good.clone(), g("IDLETIME"), g("x")],
        vec![g("RESTORE"), g("n"), g("0"), good.clone(), g("FREQ"), g("256")],
        vec![g("RESTORE"), g("n"), g("0"), good.clone(), g("IDLETIME"), g("1"), g("FREQ"), g("2")],
        vec![g("RESTORE"), g("n"), g("0"), Bytes::from(bad_crc)],
        vec![g("RESTORE"), g("n"), g("0"), g("short")],
        vec![g("RESTORE"), g("n"), g("0"), Bytes::from(garbage)],
        vec![g("RESTORE"), g("n"), g("0"), good.clone(), g("FREQ"), g("3"), g("ABSTTL")],
        vec![g("RESTORE"), g("k"), g("1"), good.clone(), g("REPLACE"), g("ABSTTL")],
        vec![g("EXISTS"), g("k"), g("n")],
        vec![g("RESTORE"), g("t"), g("100000"), good.clone()],
        vec![g("TTL"), g("t")],
        vec![g("DUMP"), g("nosuchkey")],
    ];
    for argv in cases {
        assert_eq!(run(&mut db, &argv), call(&mut redis, &argv), "{argv:?}");
    }
}
