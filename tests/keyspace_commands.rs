//! Keyspace commands: expiry, rename, copy, scan, flush. Every expected reply was checked
//! against redis-server 7.0.15 (collections are written as raw records here).

mod common;
use std::collections::BTreeSet;

use bytes::Bytes;
use common::*;
use rediskv::{ColumnFamily, Metadata, RedisType, Version};
use rediskv::{Db, Reply};
use rediskv::{KvBackend, MemoryBackend, WriteBatch};

/// Writes a collection record with the given subkeys (and score records for a zset),
/// returning its version.
fn put_collection(db: &mut Db<MemoryBackend>, ty: RedisType, key: &str, subs: &[(&str, &str)]) -> Version {
    let version = db.new_version();
    let mut meta = Metadata::collection(ty, version);
    meta.size = subs.len() as u64;
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(key.as_bytes()), meta.to_vec());
    for (i, (sub, value)) in subs.iter().enumerate() {
        batch.put(
            ColumnFamily::Subkey,
            db.layout().subkey(key.as_bytes(), version, sub.as_bytes()).unwrap(),
            value.to_string(),
        );
        if ty == RedisType::ZSet {
            let score_key = db.layout().score_key(key.as_bytes(), version, i as f64, sub.as_bytes()).unwrap();
            batch.put(ColumnFamily::Score, score_key, Bytes::new());
        }
    }
    db.backend_mut().write(batch).unwrap();
    version
}

/// The version and size in `key`'s metadata record.
fn meta_of(db: &Db<MemoryBackend>, key: &str) -> (Version, u64) {
    let record = db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(key.as_bytes())).unwrap();
    let meta = Metadata::decode(record.as_deref().expect("key exists")).unwrap();
    (meta.version, meta.size)
}

/// The `(sub, value)` records under `key` at `version`.
fn subs_of(db: &Db<MemoryBackend>, key: &str, version: Version) -> Vec<(Bytes, Bytes)> {
    let prefix_len = db.layout().subkey_prefix(key.as_bytes(), version, 0).unwrap().len();
    let range = db.layout().subkey_range(key.as_bytes(), version).unwrap();
    db.backend()
        .scan(ColumnFamily::Subkey, &range, rediskv::Direction::Forward)
        .unwrap()
        .map(|item| {
            let (sub, value) = item.unwrap();
            (sub.slice(prefix_len..), value)
        })
        .collect()
}

#[test]
fn ttl_codes_and_rounding() {
    let (mut db, clock) = db();
    assert_eq!(run(&mut db, "TTL k"), int(-2));
    assert_eq!(run(&mut db, "PTTL k"), int(-2));
    assert_eq!(run(&mut db, "EXPIRETIME k"), int(-2));
    assert_eq!(run(&mut db, "PEXPIRETIME k"), int(-2));
    run(&mut db, "SET k v");
    assert_eq!(run(&mut db, "TTL k"), int(-1));
    assert_eq!(run(&mut db, "PTTL k"), int(-1));
    assert_eq!(run(&mut db, "EXPIRETIME k"), int(-1));
    assert_eq!(run(&mut db, "EXPIRE k 100"), int(1));
    assert_eq!(run(&mut db, "PTTL k"), int(100_000));
    clock.advance_ms(1400);
    // TTL rounds to the nearest second: 98.6 s -> 99.
    assert_eq!(run(&mut db, "TTL k"), int(99));
    assert_eq!(run(&mut db, "PTTL k"), int(98_600));
    let at = T0_MS + 100_000;
    assert_eq!(run(&mut db, "PEXPIRETIME k"), int(at as i64));
    assert_eq!(run(&mut db, "EXPIRETIME k"), int((at / 1000) as i64));
    // EXPIRETIME rounds too (redis: PEXPIREAT k 1999999999700 -> EXPIRETIME 2000000000).
    run(&mut db, "PEXPIREAT k 1999999999700");
    assert_eq!(run(&mut db, "EXPIRETIME k"), int(2_000_000_000));
    run(&mut db, "PEXPIREAT k 1999999999400");
    assert_eq!(run(&mut db, "EXPIRETIME k"), int(1_999_999_999));
}

#[test]
fn expire_in_the_past_deletes_the_key() {
    let (mut db, _) = db();
    run(&mut db, "SET k v");
    assert_eq!(run(&mut db, "EXPIRE k -1"), int(1));
    assert_eq!(run(&mut db, "EXISTS k"), int(0));
    run(&mut db, "SET k v");
    assert_eq!(run(&mut db, "PEXPIRE k 0"), int(1));
    assert_eq!(run(&mut db, "EXISTS k"), int(0));
    run(&mut db, "SET k v");
    assert_eq!(run(&mut db, "EXPIREAT k 1"), int(1));
    assert_eq!(run(&mut db, "EXISTS k"), int(0));
    run(&mut db, "SET k v");
    assert_eq!(run(&mut db, &format!("PEXPIREAT k {T0_MS}")), int(1));
    assert_eq!(run(&mut db, "EXISTS k"), int(0));
    assert_eq!(db.backend().len(ColumnFamily::Metadata), 0);
    assert_eq!(run(&mut db, "EXPIRE nope 10"), int(0));
    assert_eq!(run(&mut db, "EXPIRE nope -10"), int(0));
}

#[test]
fn expiry_passes_with_the_clock() {
    let (mut db, clock) = db();
    run(&mut db, "SET s v");
    put_collection(&mut db, RedisType::Hash, "h", &[("f", "v")]);
    assert_eq!(run(&mut db, "EXPIRE s 10"), int(1));
    assert_eq!(run(&mut db, "PEXPIRE h 10000"), int(1));
    clock.advance_ms(10_000);
    assert_eq!(run(&mut db, "EXISTS s h"), int(2));
    clock.advance_ms(1);
    assert_eq!(run(&mut db, "EXISTS s h"), int(0));
    assert_eq!(run(&mut db, "TTL h"), int(-2));
    assert_eq!(run(&mut db, "TYPE h"), Reply::status("none"));
    assert_eq!(run(&mut db, "DBSIZE"), int(0));
}

#[test]
fn expire_options() {
    let (mut db, _) = db();
    run(&mut db, "SET k v");
    assert_eq!(run(&mut db, "EXPIRE k 10 XX"), int(0));
    assert_eq!(run(&mut db, "EXPIRE k 10 GT"), int(0));
    // A persistent key has an infinite TTL: LT succeeds.
    assert_eq!(run(&mut db, "EXPIRE k 10 LT"), int(1));
    assert_eq!(run(&mut db, "TTL k"), int(10));
    assert_eq!(run(&mut db, "EXPIRE k 20 NX"), int(0));
    assert_eq!(run(&mut db, "EXPIRE k 20 LT"), int(0));
    assert_eq!(run(&mut db, "EXPIRE k 5 GT"), int(0));
    assert_eq!(run(&mut db, "EXPIRE k 10 GT"), int(0));
    assert_eq!(run(&mut db, "EXPIRE k 20 GT"), int(1));
    assert_eq!(run(&mut db, "EXPIRE k 30 xx gt"), int(1));
    assert_eq!(run(&mut db, "TTL k"), int(30));
    run(&mut db, "PERSIST k");
    assert_eq!(run(&mut db, "EXPIRE k 20 NX"), int(1));
    assert_eq!(
        run(&mut db, "EXPIRE k 10 NX XX"),
        err("ERR NX and XX, GT or LT options at the same time are not compatible")
    );
    assert_eq!(
        run(&mut db, "EXPIRE k 10 NX GT"),
        err("ERR NX and XX, GT or LT options at the same time are not compatible")
    );
    assert_eq!(
        run(&mut db, "EXPIRE k 10 GT LT"),
        err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(run(&mut db, "EXPIRE k 10 foo"), err("ERR Unsupported option foo"));
    // Options are checked before the number.
    assert_eq!(run(&mut db, "EXPIRE k abc foo"), err("ERR Unsupported option foo"));
    assert_eq!(run(&mut db, "EXPIRE k abc"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "TTL k"), int(20));
}

#[test]
fn expire_overflow_errors() {
    let (mut db, _) = db();
    run(&mut db, "SET k v");
    for (line, cmd) in [
        ("EXPIRE k 9223372036854775807", "expire"),
        ("EXPIRE k 9223372036854775", "expire"),
        ("EXPIRE k -9223372036854776", "expire"),
        ("PEXPIRE k 9223372036854775807", "pexpire"),
        ("EXPIREAT k 9223372036854775807", "expireat"),
    ] {
        assert_eq!(run(&mut db, line), err(&format!("ERR invalid expire time in '{cmd}' command")), "{line}");
    }
    assert_eq!(run(&mut db, "TTL k"), int(-1));
    assert_eq!(run(&mut db, "PEXPIREAT k 9223372036854775807"), int(1));
    assert_eq!(run(&mut db, "PEXPIRETIME k"), int(i64::MAX));
    assert_eq!(run(&mut db, "PTTL k"), int(i64::MAX - T0_MS as i64));
}

#[test]
fn persist() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "PERSIST nope"), int(0));
    run(&mut db, "SET k v");
    assert_eq!(run(&mut db, "PERSIST k"), int(0));
    run(&mut db, "EXPIRE k 100");
    assert_eq!(run(&mut db, "PERSIST k"), int(1));
    assert_eq!(run(&mut db, "TTL k"), int(-1));
    assert_eq!(run(&mut db, "GET k"), bulk("v"));
    let v = put_collection(&mut db, RedisType::Set, "s", &[("m", "")]);
    run(&mut db, "EXPIRE s 100");
    assert_eq!(run(&mut db, "PERSIST s"), int(1));
    assert_eq!(meta_of(&db, "s"), (v, 1));
}

#[test]
fn rename_rules() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "RENAME nope x"), err("ERR no such key"));
    assert_eq!(run(&mut db, "RENAME nope nope"), err("ERR no such key"));
    assert_eq!(run(&mut db, "RENAMENX nope y"), err("ERR no such key"));
    run(&mut db, "SET a 1");
    assert_eq!(run(&mut db, "RENAME a a"), Reply::OK);
    assert_eq!(run(&mut db, "RENAMENX a a"), int(0));
    run(&mut db, "SET b 2");
    assert_eq!(run(&mut db, "RENAMENX a b"), int(0));
    assert_eq!(run(&mut db, "EXPIRE a 100"), int(1));
    assert_eq!(run(&mut db, "RENAME a c"), Reply::OK);
    assert_eq!(run(&mut db, "TTL c"), int(100));
    assert_eq!(run(&mut db, "GET c"), bulk("1"));
    assert_eq!(run(&mut db, "EXISTS a"), int(0));
    assert_eq!(run(&mut db, "RENAME c b"), Reply::OK);
    assert_eq!(run(&mut db, "GET b"), bulk("1"));
    assert_eq!(run(&mut db, "TTL b"), int(100));
    assert_eq!(run(&mut db, "RENAMENX b fresh"), int(1));
    assert_eq!(run(&mut db, "DBSIZE"), int(1));
}

#[test]
fn rename_collection_copies_records_under_a_fresh_version() {
    let (mut db, _) = db();
    let old = put_collection(&mut db, RedisType::ZSet, "z", &[("a", "s1"), ("b", "s2")]);
    run(&mut db, "EXPIRE z 50");
    run(&mut db, "SET dst x");
    assert_eq!(run(&mut db, "RENAME z dst"), Reply::OK);
    assert_eq!(run(&mut db, "EXISTS z"), int(0));
    assert_eq!(run(&mut db, "TYPE dst"), Reply::status("zset"));
    assert_eq!(run(&mut db, "TTL dst"), int(50));
    let (version, size) = meta_of(&db, "dst");
    assert_ne!(version, old);
    assert_eq!(size, 2);
    assert_eq!(subs_of(&db, "dst", version), subs_of(&db, "z", old));
    // Two score records copied, the old ones left as garbage.
    assert_eq!(db.backend().len(ColumnFamily::Score), 4);
    let range = db.layout().score_range(b"dst", version, None).unwrap();
    let copied: Vec<_> =
        db.backend().scan(ColumnFamily::Score, &range, rediskv::Direction::Forward).unwrap().collect();
    assert_eq!(copied.len(), 2);
    // The old subkeys are still there (lazy deletion), under the old version.
    assert_eq!(subs_of(&db, "z", old).len(), 2);
}

#[test]
fn copy_rules() {
    let (mut db, _) = db();
    run(&mut db, "SET c 1");
    run(&mut db, "EXPIRE c 100");
    let same = err("ERR source and destination objects are the same");
    assert_eq!(run(&mut db, "COPY c c"), same);
    assert_eq!(run(&mut db, "COPY c c DB 0"), same);
    assert_eq!(run(&mut db, "COPY nope d"), int(0));
    assert_eq!(run(&mut db, "COPY c d DB 16"), err("ERR DB index is out of range"));
    assert_eq!(run(&mut db, "COPY c d DB -1"), err("ERR DB index is out of range"));
    assert_eq!(
        run(&mut db, "COPY c d DB 4294967296"),
        err("ERR value is out of range, value must between -2147483648 and 2147483647")
    );
    assert_eq!(run(&mut db, "COPY c d DB x"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "COPY c d foo"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "COPY c d DB"), err("ERR syntax error"));
    run(&mut db, "SET b 2");
    assert_eq!(run(&mut db, "COPY c b"), int(0));
    assert_eq!(run(&mut db, "COPY c b REPLACE"), int(1));
    assert_eq!(run(&mut db, "GET b"), bulk("1"));
    assert_eq!(run(&mut db, "TTL b"), int(100));
    assert_eq!(run(&mut db, "COPY c c DB 1"), int(1));
    assert_eq!(run(&mut db, "COPY c c DB 1"), int(0));
    assert_eq!(run(&mut db, "SELECT 1"), Reply::OK);
    assert_eq!(run(&mut db, "GET c"), bulk("1"));
    assert_eq!(run(&mut db, "TTL c"), int(100));
    assert_eq!(run(&mut db, "DBSIZE"), int(1));
}

#[test]
fn copy_collection_to_another_db() {
    let (mut db, _) = db();
    let old = put_collection(&mut db, RedisType::Hash, "h", &[("f1", "v1"), ("f2", "v2")]);
    assert_eq!(run(&mut db, "COPY h h2 DB 3"), int(1));
    assert_eq!(run(&mut db, "TYPE h"), Reply::status("hash"));
    let src = subs_of(&db, "h", old);
    run(&mut db, "SELECT 3");
    let (version, _) = meta_of(&db, "h2");
    assert_ne!(version, old);
    assert_eq!(subs_of(&db, "h2", version), src);
    assert_eq!(run(&mut db, "KEYS *"), bulks(&["h2"]));
}

#[test]
fn del_is_lazy_for_collections() {
    let (mut db, _) = db();
    let v = put_collection(&mut db, RedisType::Hash, "h", &[("f", "v"), ("g", "w")]);
    assert_eq!(run(&mut db, "DEL h h"), int(1));
    assert_eq!(run(&mut db, "EXISTS h"), int(0));
    assert_eq!(run(&mut db, "TYPE h"), Reply::status("none"));
    // The subkeys are left for the garbage collector.
    assert_eq!(db.backend().len(ColumnFamily::Subkey), 2);
    assert_eq!(subs_of(&db, "h", v).len(), 2);
    assert_eq!(run(&mut db, "UNLINK h"), int(0));
    // Overwriting a collection with a string is O(1) too.
    put_collection(&mut db, RedisType::List, "l", &[("0", "x")]);
    assert_eq!(run(&mut db, "SET l v"), Reply::OK);
    assert_eq!(run(&mut db, "TYPE l"), Reply::status("string"));
    assert_eq!(db.backend().len(ColumnFamily::Subkey), 3);
}

#[test]
fn del_counts_each_key_once_past_the_linear_search() {
    let (mut db, _) = db();
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let pairs: Vec<String> = keys.iter().map(|k| format!("{k} v")).collect();
    assert_eq!(run(&mut db, &format!("MSET {}", pairs.join(" "))), Reply::OK);
    // Twenty keys, three of them again after the sixteenth, and one missing.
    assert_eq!(run(&mut db, &format!("DEL {} k3 k18 k0 zz", keys.join(" "))), int(20));
    assert_eq!(run(&mut db, "DBSIZE"), int(0));
}

#[test]
fn scan_returns_every_key_once() {
    let (mut db, _) = db();
    let mut want = BTreeSet::new();
    for i in 0..103 {
        run(&mut db, &format!("SET key:{i} v"));
        want.insert(format!("key:{i}"));
    }
    for count in [1, 3, 10, 1000] {
        let mut seen = Vec::new();
        let mut cursor = "0".to_string();
        let mut calls = 0;
        loop {
            let Reply::Array(parts) = run(&mut db, &format!("SCAN {cursor} COUNT {count}")) else { panic!() };
            let [Reply::Bulk(next), Reply::Array(keys)] = parts.as_slice() else { panic!() };
            assert!(keys.len() <= count);
            for k in keys {
                let Reply::Bulk(k) = k else { panic!() };
                seen.push(String::from_utf8(k.to_vec()).unwrap());
            }
            cursor = String::from_utf8(next.to_vec()).unwrap();
            calls += 1;
            if cursor == "0" {
                break;
            }
            assert!(calls < 1000);
        }
        assert_eq!(seen.len(), want.len(), "count {count}");
        assert_eq!(seen.iter().cloned().collect::<BTreeSet<_>>(), want);
    }
    // Without COUNT: 10 per call.
    let Reply::Array(parts) = run(&mut db, "SCAN 0") else { panic!() };
    let Reply::Array(keys) = &parts[1] else { panic!() };
    assert_eq!(keys.len(), 10);
}

#[test]
fn scan_filters_and_errors() {
    let (mut db, clock) = db();
    run(&mut db, "MSET a1 1 a2 2 b1 3");
    put_collection(&mut db, RedisType::Set, "a3", &[("m", "")]);
    run(&mut db, "SET gone x PX 5");
    clock.advance_ms(6);
    let scan = |db: &mut Db<MemoryBackend>, line: &str| match run(db, line) {
        Reply::Array(parts) => parts[1].clone(),
        other => other,
    };
    assert_eq!(scan(&mut db, "SCAN 0 COUNT 100"), bulks(&["a1", "a2", "a3", "b1"]));
    assert_eq!(scan(&mut db, "SCAN 0 MATCH a* COUNT 100"), bulks(&["a1", "a2", "a3"]));
    assert_eq!(scan(&mut db, "SCAN 0 MATCH a* TYPE string COUNT 100"), bulks(&["a1", "a2"]));
    assert_eq!(scan(&mut db, "SCAN 0 TYPE SET"), bulks(&["a3"]));
    assert_eq!(scan(&mut db, "SCAN 0 TYPE nosuchtype"), bulks(&[]));
    assert_eq!(scan(&mut db, "SCAN 0 MATCH *1"), bulks(&["a1", "b1"]));
    assert_eq!(run(&mut db, "SCAN x"), err("ERR invalid cursor"));
    assert_eq!(run(&mut db, "SCAN 18446744073709551616"), err("ERR invalid cursor"));
    assert_eq!(db.run(&["SCAN", " 0"]), err("ERR invalid cursor"));
    assert_eq!(run(&mut db, "SCAN 0 COUNT 0"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "SCAN 0 COUNT -1"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "SCAN 0 COUNT x"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "SCAN 0 MATCH"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "SCAN 0 foo bar"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "SCAN +0"), Reply::Array(vec![bulk("0"), bulks(&["a1", "a2", "a3", "b1"])]));
}

#[test]
fn keys_dbsize_randomkey() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "DBSIZE"), int(0));
    assert_eq!(run(&mut db, "RANDOMKEY"), Reply::Nil);
    assert_eq!(run(&mut db, "KEYS *"), bulks(&[]));
    run(&mut db, "MSET hello 1 hallo 2 hxllo 3 hllo 4 heeeello 5");
    assert_eq!(run(&mut db, "DBSIZE"), int(5));
    assert_eq!(run(&mut db, "KEYS h?llo"), bulks(&["hallo", "hello", "hxllo"]));
    assert_eq!(run(&mut db, "KEYS h*llo"), bulks(&["hallo", "heeeello", "hello", "hllo", "hxllo"]));
    assert_eq!(run(&mut db, "KEYS h[ae]llo"), bulks(&["hallo", "hello"]));
    assert_eq!(run(&mut db, "KEYS h[^e]llo"), bulks(&["hallo", "hxllo"]));
    assert_eq!(run(&mut db, "KEYS h[a-b]llo"), bulks(&["hallo"]));
    let mut seen = BTreeSet::new();
    for _ in 0..200 {
        let Reply::Bulk(k) = run(&mut db, "RANDOMKEY") else { panic!() };
        seen.insert(k);
    }
    assert_eq!(seen.len(), 5);
    assert_eq!(run(&mut db, "DBSIZE x"), err("ERR wrong number of arguments for 'dbsize' command"));
}

#[test]
fn flushdb_and_flushall() {
    let (mut db, _) = db();
    run(&mut db, "SET a 1");
    put_collection(&mut db, RedisType::Hash, "h", &[("f", "v")]);
    run(&mut db, "SELECT 1");
    run(&mut db, "SET b 1");
    assert_eq!(run(&mut db, "FLUSHDB foo"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "FLUSHDB ASYNC"), Reply::OK);
    assert_eq!(run(&mut db, "DBSIZE"), int(0));
    run(&mut db, "SELECT 0");
    assert_eq!(run(&mut db, "DBSIZE"), int(2));
    run(&mut db, "SELECT 15");
    run(&mut db, "SET c 1");
    assert_eq!(run(&mut db, "FLUSHALL SYNC"), Reply::OK);
    assert_eq!(db.backend().len(ColumnFamily::Metadata), 0);
    run(&mut db, "SELECT 0");
    assert_eq!(run(&mut db, "EXISTS a h"), int(0));
}

#[test]
fn scan_bounds_the_expired_records_it_skips() {
    let (mut db, clock) = db();
    for i in 0..100 {
        run(&mut db, &format!("SET dead:{i:03} v PX 1"));
    }
    run(&mut db, "MSET live:1 a live:2 b");
    clock.advance_ms(2);
    // COUNT 2 visits at most 20 records: the first call stops among the expired ones.
    let Reply::Array(parts) = run(&mut db, "SCAN 0 COUNT 2") else { panic!() };
    assert_eq!(parts[1], bulks(&[]));
    assert_ne!(parts[0], bulk("0"));
    let mut cursor = parts[0].clone();
    let mut seen = Vec::new();
    for _ in 0..100 {
        let Reply::Bulk(c) = &cursor else { panic!() };
        let Reply::Array(parts) = db.run(&[&b"SCAN"[..], c, b"COUNT", b"2"]) else { panic!() };
        let Reply::Array(keys) = &parts[1] else { panic!() };
        seen.extend(keys.iter().cloned());
        cursor = parts[0].clone();
        if cursor == bulk("0") {
            break;
        }
    }
    assert_eq!(cursor, bulk("0"));
    assert_eq!(Reply::Array(seen), bulks(&["live:1", "live:2"]));
}

/// OBJECT IDLETIME: the seconds since a command last used the key, as Redis' LRU clock;
/// EXISTS, TYPE, TTL and OBJECT itself leave it alone, TOUCH, reads and writes reset it,
/// RESTORE … IDLETIME sets it.
#[test]
fn object_idletime_follows_the_commands_that_touch_the_key() {
    let (mut db, clock) = db();
    let idle = |db: &mut Db<MemoryBackend>| run(db, "OBJECT IDLETIME foo");
    assert_eq!(run(&mut db, "SET foo bar"), Reply::status("OK"));
    assert_eq!(idle(&mut db), Reply::Integer(0));
    clock.advance_ms(3_000);
    for line in ["TTL foo", "PTTL foo", "TYPE foo", "EXISTS foo", "OBJECT ENCODING foo", "EXPIRETIME foo"] {
        run(&mut db, line);
    }
    assert_eq!(idle(&mut db), Reply::Integer(3));
    run(&mut db, "TOUCH foo");
    assert_eq!(idle(&mut db), Reply::Integer(0));
    clock.advance_ms(2_000);
    run(&mut db, "GET foo");
    assert_eq!(idle(&mut db), Reply::Integer(0));
    clock.advance_ms(2_000);
    run(&mut db, "APPEND foo x");
    assert_eq!(idle(&mut db), Reply::Integer(0));
    let Reply::Bulk(payload) = db.run(&["DUMP", "foo"]) else { panic!() };
    assert_eq!(
        db.run(&[&b"RESTORE"[..], b"copy", b"0", &payload, b"IDLETIME", b"1000"]),
        Reply::status("OK")
    );
    assert_eq!(run(&mut db, "OBJECT IDLETIME copy"), Reply::Integer(1000));
    assert_eq!(run(&mut db, "OBJECT IDLETIME nokey"), Reply::Nil);
}

/// FLUSHDB deletes every metadata record in one batch: its commit lists each deleted key
/// once without comparing it with all the others (100,000 keys took minutes when it did).
#[test]
fn flushdb_of_many_keys_commits_in_linear_time() {
    let (mut db, _clock) = db();
    let n = 100_000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut argv = vec!["MSET".to_string()];
        for i in chunk {
            argv.push(format!("key:{i}"));
            argv.push("v".to_string());
        }
        assert_eq!(db.run(&argv), Reply::status("OK"));
    }
    let started = std::time::Instant::now();
    assert_eq!(run(&mut db, "FLUSHDB"), Reply::status("OK"));
    assert_eq!(run(&mut db, "DBSIZE"), Reply::Integer(0));
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
}
