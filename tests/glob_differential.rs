//! The glob matcher against a real redis-server 7.0: random keys (binary, with every glob
//! metacharacter, and the empty key) are SET on both, then random patterns go to `KEYS` on
//! both and to [`Glob`] directly; all three must pick the same keys. Without
//! `redis-server` the test is skipped loudly, or fails when `CI=true`.
//! `GLOB_ROUNDS=n` changes the number of key sets (default 20, 150 patterns each).

#[allow(dead_code)]
#[path = "differential/client.rs"]
mod client;

use std::collections::BTreeSet;

use client::RedisServer;
use rediskv::MemoryBackend;
use rediskv::server::args::Glob;
use rediskv::{Db, Reply};

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

/// Up to `max_len` bytes drawn from `alphabet`.
fn bytes(rng: &mut Rng, alphabet: &[u8], max_len: usize) -> Vec<u8> {
    (0..rng.below(max_len as u64 + 1)).map(|_| alphabet[rng.below(alphabet.len() as u64) as usize]).collect()
}

fn key_set(reply: &Reply) -> BTreeSet<Vec<u8>> {
    let Reply::Array(items) = reply else { panic!("KEYS answered {reply:?}") };
    items
        .iter()
        .map(|item| match item {
            Reply::Bulk(b) => b.to_vec(),
            other => panic!("KEYS item {other:?}"),
        })
        .collect()
}

fn show(set: &BTreeSet<Vec<u8>>) -> Vec<String> {
    set.iter().map(|k| k.escape_ascii().to_string()).collect()
}

#[test]
fn glob_matches_redis_keys() {
    let Some(server) = RedisServer::start_or_skip("glob differential test") else { return };
    let mut redis = server.connect().expect("connect");
    let rounds: usize =
        std::env::var("GLOB_ROUNDS").map_or(20, |v| v.parse().expect("GLOB_ROUNDS is a number"));
    let seed = 0x9E37_79B9_7F4A_7C15;
    let mut rng = Rng(seed);
    let key_bytes = b"abz-]\\[^*?\xff\x80";
    let pattern_bytes = b"aabbz**??[[]]^-\\\xff\x80";
    let mut compared = 0;
    for round in 0..rounds {
        assert_eq!(redis.call(&["FLUSHALL"]).unwrap(), Reply::OK);
        let mut db = Db::new(MemoryBackend::new());
        let mut keys = BTreeSet::new();
        keys.insert(Vec::new());
        for _ in 0..40 {
            keys.insert(bytes(&mut rng, key_bytes, 6));
        }
        for key in &keys {
            let argv = [&b"SET"[..], key, b"v"];
            assert_eq!(redis.call(&argv).unwrap(), Reply::OK);
            assert_eq!(db.run(&argv), Reply::OK);
        }
        for _ in 0..150 {
            let pattern = bytes(&mut rng, pattern_bytes, 9);
            let argv = [&b"KEYS"[..], &pattern];
            let want = key_set(&redis.call(&argv).unwrap());
            let ours: BTreeSet<Vec<u8>> =
                keys.iter().filter(|k| pattern == b"*" || Glob::new(&pattern).matches(k)).cloned().collect();
            let engine = key_set(&db.run(&argv));
            let p = pattern.escape_ascii();
            assert_eq!(show(&ours), show(&want), "glob_match, pattern {p} (round {round}, seed {seed:#x})");
            assert_eq!(show(&engine), show(&want), "engine KEYS, pattern {p} (round {round})");
            compared += 1;
        }
    }
    assert_eq!(compared, rounds * 150);
}
