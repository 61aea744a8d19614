//! Hash commands. Expected replies checked against redis-server 7.0.15 unless noted.

mod common;
use std::collections::{BTreeMap, HashSet};

use common::*;
use rediskv::{ColumnFamily, Metadata};
use rediskv::{Db, Reply};
use rediskv::{KvBackend, MemoryBackend, WriteBatch};

fn put_string(db: &mut Db<MemoryBackend>, key: &str) {
    let mut batch = WriteBatch::new();
    batch.put(
        ColumnFamily::Metadata,
        db.layout().metadata_key(key.as_bytes()),
        Metadata::string(b"v", 0).to_vec(),
    );
    db.backend_mut().write(batch).unwrap();
}

fn items(reply: Reply) -> Vec<Vec<u8>> {
    match reply {
        Reply::Array(items) => items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => b.to_vec(),
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn fields_of(pairs: &[Vec<u8>]) -> Vec<String> {
    pairs.chunks(2).map(|c| String::from_utf8(c[0].clone()).unwrap()).collect()
}

#[test]
fn hset_counts_new_fields_and_last_duplicate_wins() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "HSET h f1 v1 f2 v2 f1 v3"), int(2));
    assert_eq!(run(&mut db, "HGETALL h"), bulks(&["f1", "v3", "f2", "v2"]));
    assert_eq!(run(&mut db, "HSET h f1 x f3 y"), int(1));
    assert_eq!(run(&mut db, "HLEN h"), int(3));
    assert_eq!(run(&mut db, "HMSET h a 1"), Reply::OK);
    assert_eq!(run(&mut db, "HLEN h"), int(4));
}

#[test]
fn hset_arity_errors() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "HSET h a"), err("ERR wrong number of arguments for 'hset' command"));
    assert_eq!(run(&mut db, "HSET h a 1 b"), err("ERR wrong number of arguments for 'hset' command"));
    assert_eq!(run(&mut db, "HMSET h a"), err("ERR wrong number of arguments for 'hmset' command"));
    assert_eq!(run(&mut db, "HMSET h a 1 b"), err("ERR wrong number of arguments for 'hmset' command"));
    assert_eq!(run(&mut db, "HSETNX h a"), err("ERR wrong number of arguments for 'hsetnx' command"));
    assert_eq!(run(&mut db, "HGET h"), err("ERR wrong number of arguments for 'hget' command"));
    assert_eq!(run(&mut db, "HSCAN h"), err("ERR wrong number of arguments for 'hscan' command"));
    assert_eq!(run(&mut db, "EXISTS h"), int(0));
}

#[test]
fn point_reads() {
    let (mut db, _) = db();
    run(&mut db, "HSET h f1 v1 f2 v2");
    assert_eq!(run(&mut db, "HSETNX h f1 x"), int(0));
    assert_eq!(run(&mut db, "HSETNX h f9 x"), int(1));
    assert_eq!(run(&mut db, "HSETNX new f x"), int(1));
    assert_eq!(run(&mut db, "HLEN new"), int(1));
    assert_eq!(run(&mut db, "HGET h f9"), bulk("x"));
    assert_eq!(run(&mut db, "HGET h nof"), Reply::Nil);
    assert_eq!(run(&mut db, "HGET nokey f"), Reply::Nil);
    assert_eq!(run(&mut db, "HSTRLEN h f1"), int(2));
    assert_eq!(run(&mut db, "HSTRLEN h nof"), int(0));
    assert_eq!(run(&mut db, "HEXISTS h f1"), int(1));
    assert_eq!(run(&mut db, "HEXISTS h nof"), int(0));
    assert_eq!(run(&mut db, "HMGET h f1 nof f2"), Reply::Array(vec![bulk("v1"), Reply::Nil, bulk("v2")]));
    assert_eq!(run(&mut db, "HMGET nokey a b"), Reply::Array(vec![Reply::Nil, Reply::Nil]));
    assert_eq!(run(&mut db, "HKEYS h"), bulks(&["f1", "f2", "f9"]));
    assert_eq!(run(&mut db, "HVALS h"), bulks(&["v1", "v2", "x"]));
    assert_eq!(run(&mut db, "HKEYS nokey"), bulks(&[]));
    assert_eq!(run(&mut db, "HGETALL nokey"), bulks(&[]));
    assert_eq!(run(&mut db, "HLEN nokey"), int(0));
}

#[test]
fn hdel_counts_and_empty_hash_disappears() {
    let (mut db, _) = db();
    run(&mut db, "HSET h f1 v1 f2 v2 f9 x");
    assert_eq!(run(&mut db, "HDEL h f1 f1 nof"), int(1));
    assert_eq!(run(&mut db, "HLEN h"), int(2));
    assert_eq!(run(&mut db, "HDEL h f2 f9"), int(2));
    assert_eq!(run(&mut db, "EXISTS h"), int(0));
    assert_eq!(run(&mut db, "TYPE h"), Reply::status("none"));
    assert_eq!(run(&mut db, "HDEL h f2"), int(0));
    // Re-created hash does not see the old fields.
    run(&mut db, "HSET h f1 new");
    assert_eq!(run(&mut db, "HGETALL h"), bulks(&["f1", "new"]));
    // DEL then re-create: fresh version.
    run(&mut db, "HSET h f2 x");
    assert_eq!(run(&mut db, "DEL h"), int(1));
    assert_eq!(run(&mut db, "HSET h f3 y"), int(1));
    assert_eq!(run(&mut db, "HGETALL h"), bulks(&["f3", "y"]));
}

#[test]
fn hincrby_rules() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "HINCRBY h a 5"), int(5));
    assert_eq!(run(&mut db, "HINCRBY h a -7"), int(-2));
    assert_eq!(run(&mut db, "HGET h a"), bulk("-2"));
    run(&mut db, "HSET h n abc sp 1x big 9223372036854775807");
    assert_eq!(run(&mut db, "HINCRBY h n 1"), err("ERR hash value is not an integer"));
    assert_eq!(run(&mut db, "HINCRBY h sp 1"), err("ERR hash value is not an integer"));
    assert_eq!(run(&mut db, "HINCRBY h a x"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "HINCRBY h big 1"), err("ERR increment or decrement would overflow"));
    assert_eq!(run(&mut db, "HINCRBY h g -5"), int(-5));
    assert_eq!(run(&mut db, "HINCRBY h g -9223372036854775803"), int(i64::MIN));
    assert_eq!(run(&mut db, "HINCRBY h g -1"), err("ERR increment or decrement would overflow"));
    assert_eq!(run(&mut db, "HLEN h"), int(5));
}

#[test]
fn hincrbyfloat_formatting_and_errors() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "HINCRBYFLOAT h x 0.1"), bulk("0.1"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h x 0.2"), bulk("0.3"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h x -0.3"), bulk("0"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h k 10.5"), bulk("10.5"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h k 0.1"), bulk("10.6"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h k3 1.1"), bulk("1.1"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h k3 2.2"), bulk("3.3"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h z 5.0e3"), bulk("5000"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h z 1.5"), bulk("5001.5"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h y 1e20"), bulk("100000000000000000000"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h y 1e-20"), bulk("100000000000000000000"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h q 3.0e-5"), bulk("0.00003"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h t -1e-20"), bulk("0"));
    assert_eq!(run(&mut db, "HGET h z"), bulk("5001.5"));
    run(&mut db, "HSET h n abc sp1 1x inf inf");
    assert_eq!(run(&mut db, "HINCRBYFLOAT h n 1"), err("ERR hash value is not a float"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h sp1 1"), err("ERR hash value is not a float"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h x abc"), err("ERR value is not a valid float"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h x nan"), err("ERR value is not a valid float"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h x inf"), err("ERR value is NaN or Infinity"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h inf 1"), err("ERR increment would produce NaN or Infinity"));
    assert_eq!(run(&mut db, "HGET h inf"), bulk("inf"));
    // Leading/trailing space in the stored value is refused (Redis: "hash value is not a float").
    db.run(&["HSET", "h", "sp", " 1"]);
    assert_eq!(run(&mut db, "HINCRBYFLOAT h sp 1"), err("ERR hash value is not a float"));
    // Long double arithmetic, as redis-server 7.0.15: past f64::MAX, extra digits, hex.
    run(&mut db, "HSET h fl 1e308 a 1000 b 0x10");
    let Reply::Bulk(big) = run(&mut db, "HINCRBYFLOAT h fl 1e308") else { panic!("bulk") };
    assert!(big.starts_with(b"199999999999999999993371759311691291321120199694831134415594"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h a 0.1"), bulk("1000.09999999999999998"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h b 1"), bulk("17"));
    assert_eq!(run(&mut db, "HINCRBYFLOAT h c 123456.789"), bulk("123456.78900000000000148"));
}

#[test]
fn hrandfield_counts() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "HRANDFIELD nokey"), Reply::Nil);
    assert_eq!(run(&mut db, "HRANDFIELD nokey 3"), bulks(&[]));
    assert_eq!(run(&mut db, "HRANDFIELD nokey -5 WITHVALUES"), bulks(&[]));
    run(&mut db, "HSET h a 1 b 2 c 3");
    assert_eq!(run(&mut db, "HRANDFIELD h 0"), bulks(&[]));
    assert_eq!(run(&mut db, "HRANDFIELD h 0 WITHVALUES"), bulks(&[]));
    let one = items(Reply::Array(vec![run(&mut db, "HRANDFIELD h")]));
    assert!(["a", "b", "c"].contains(&std::str::from_utf8(&one[0]).unwrap()));
    // Positive count: distinct, capped at the size.
    let all = items(run(&mut db, "HRANDFIELD h 10"));
    let set: HashSet<_> = all.iter().cloned().collect();
    assert_eq!((all.len(), set.len()), (3, 3));
    let two = items(run(&mut db, "HRANDFIELD h 2"));
    assert_eq!(two.iter().collect::<HashSet<_>>().len(), 2);
    // Negative count: exactly |count| with repeats, WITHVALUES pairs field and value.
    let many = items(run(&mut db, "HRANDFIELD h -7 WITHVALUES"));
    assert_eq!(many.len(), 14);
    let expected: BTreeMap<&str, &str> = [("a", "1"), ("b", "2"), ("c", "3")].into();
    for pair in many.chunks(2) {
        let f = std::str::from_utf8(&pair[0]).unwrap();
        assert_eq!(expected[f].as_bytes(), pair[1].as_slice());
    }
    assert_eq!(items(run(&mut db, "HRANDFIELD h -2")).len(), 2);
    // Errors (redis-server 7.0.15).
    assert_eq!(run(&mut db, "HRANDFIELD h x"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "HRANDFIELD h 1 withvaluesx"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "HRANDFIELD h 1 withvalues x"), err("ERR syntax error"));
    assert_eq!(
        run(&mut db, "HRANDFIELD h -9223372036854775808"),
        err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    );
    assert_eq!(
        run(&mut db, "HRANDFIELD h -4611686018427387904 withvalues"),
        err("ERR value is out of range")
    );
    assert_eq!(run(&mut db, "HLEN h"), int(3));
}

#[test]
fn hrandfield_on_a_large_hash_returns_distinct_existing_fields() {
    let (mut db, _) = db();
    let mut argv = vec!["HSET".to_string(), "h".to_string()];
    for i in 0..3000 {
        argv.push(format!("f{i:05}"));
        argv.push(format!("v{i}"));
    }
    assert_eq!(db.run(&argv), int(3000));
    let picked = items(run(&mut db, "HRANDFIELD h 20 WITHVALUES"));
    assert_eq!(picked.len(), 40);
    let fields = fields_of(&picked);
    assert_eq!(fields.iter().collect::<HashSet<_>>().len(), 20);
    for pair in picked.chunks(2) {
        let i: usize = std::str::from_utf8(&pair[0][1..]).unwrap().parse().unwrap();
        assert_eq!(pair[1], format!("v{i}").into_bytes());
    }
    assert_eq!(items(run(&mut db, "HRANDFIELD h -50")).len(), 50);
}

#[test]
fn hscan_walks_everything_once_with_cursor_between_calls() {
    let (mut db, _) = db();
    let mut argv = vec!["HSET".to_string(), "h".to_string()];
    for i in 0..25 {
        argv.push(format!("f{i:02}"));
        argv.push(format!("{i}"));
    }
    db.run(&argv);
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    let mut rounds = 0;
    loop {
        let Reply::Array(parts) = run(&mut db, &format!("HSCAN h {cursor} COUNT 7")) else { panic!() };
        let Reply::Bulk(next) = &parts[0] else { panic!() };
        seen.extend(fields_of(&items(parts[1].clone())));
        cursor = String::from_utf8(next.to_vec()).unwrap();
        rounds += 1;
        if rounds == 1 {
            // A write between calls does not break the scan.
            run(&mut db, "HSET h zz 1");
        }
        if cursor == "0" {
            break;
        }
    }
    let mut expected: Vec<String> = (0..25).map(|i| format!("f{i:02}")).collect();
    expected.push("zz".into());
    assert_eq!(seen, expected);
    assert_eq!(rounds, 4);
    assert_eq!(
        run(&mut db, "HSCAN h 0 MATCH f1* COUNT 100"),
        Reply::Array(vec![
            bulk("0"),
            bulks(&[
                "f10", "10", "f11", "11", "f12", "12", "f13", "13", "f14", "14", "f15", "15", "f16", "16",
                "f17", "17", "f18", "18", "f19", "19"
            ])
        ])
    );
    assert_eq!(run(&mut db, "HSCAN nokey 0"), Reply::Array(vec![bulk("0"), bulks(&[])]));
    // A missing key is answered before the options are looked at (Redis 7.0).
    assert_eq!(run(&mut db, "HSCAN nokey 0 COUNT 0"), Reply::Array(vec![bulk("0"), bulks(&[])]));
    assert_eq!(run(&mut db, "HSCAN h x"), err("ERR invalid cursor"));
    assert_eq!(run(&mut db, "HSCAN h 18446744073709551616"), err("ERR invalid cursor"));
    assert_eq!(run(&mut db, "HSCAN h 0 COUNT 0"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "HSCAN h 0 COUNT -1"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "HSCAN h 0 COUNT x"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "HSCAN h 0 MATCH"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "HSCAN h 0 NOVALUES"), err("ERR syntax error"));
    // An unknown cursor starts over (-1 wraps like strtoul).
    let Reply::Array(parts) = run(&mut db, "HSCAN h -1 COUNT 1000") else { panic!() };
    assert_eq!(items(parts[1].clone()).len(), 52);
}

#[test]
fn wrongtype_on_every_hash_command() {
    let (mut db, _) = db();
    put_string(&mut db, "s");
    for line in [
        "HSET s a 1",
        "HMSET s a 1",
        "HSETNX s a 1",
        "HGET s a",
        "HMGET s a",
        "HDEL s a",
        "HLEN s",
        "HSTRLEN s a",
        "HEXISTS s a",
        "HKEYS s",
        "HVALS s",
        "HGETALL s",
        "HINCRBY s a 1",
        "HINCRBYFLOAT s a 1",
        "HRANDFIELD s",
        "HRANDFIELD s 2",
        "HRANDFIELD s 0",
        "HSCAN s 0",
    ] {
        assert_eq!(run(&mut db, line), wrongtype(), "{line}");
    }
    // Argument errors come before the type check (Redis 7.0).
    assert_eq!(run(&mut db, "HRANDFIELD s x"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "HSCAN s x"), err("ERR invalid cursor"));
    assert_eq!(run(&mut db, "HINCRBY s a x"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "TYPE s"), Reply::status("string"));
}

#[test]
fn expired_hash_is_recreated_empty() {
    let (mut db, clock) = db();
    run(&mut db, "HSET h a 1 b 2");
    // Give it an expiry by rewriting its metadata record.
    let raw = db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(b"h")).unwrap().unwrap();
    let mut meta = Metadata::decode(&raw).unwrap();
    meta.expire_ms = T0_MS + 10;
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(b"h"), meta.to_vec());
    db.backend_mut().write(batch).unwrap();
    clock.advance_ms(11);
    assert_eq!(run(&mut db, "HLEN h"), int(0));
    assert_eq!(run(&mut db, "HSET h c 3"), int(1));
    assert_eq!(run(&mut db, "HGETALL h"), bulks(&["c", "3"]));
}

#[test]
fn blind_write_hashes() {
    let (mut db, _) = db();
    db.set_blind_write(true);
    // Replies count the arguments, not the effect (documented inexactness).
    assert_eq!(run(&mut db, "HSET h a 1 b 2 a 3"), int(3));
    assert_eq!(run(&mut db, "HSET h a 4"), int(1));
    assert_eq!(run(&mut db, "HLEN h"), int(2));
    assert_eq!(run(&mut db, "HGETALL h"), bulks(&["a", "4", "b", "2"]));
    assert_eq!(run(&mut db, "HDEL h a nosuch"), int(2));
    assert_eq!(run(&mut db, "HLEN h"), int(1));
    // Exact commands stay exact.
    assert_eq!(run(&mut db, "HSETNX h b 9"), int(0));
    assert_eq!(run(&mut db, "HINCRBY h c 2"), int(2));
    assert_eq!(run(&mut db, "HLEN h"), int(2));
    assert_eq!(items(run(&mut db, "HRANDFIELD h 5")).len(), 2);
    // The record carries the blind-write flag and size 0.
    let raw = db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(b"h")).unwrap().unwrap();
    let meta = Metadata::decode(&raw).unwrap();
    assert!(meta.blind_write);
    assert_eq!(meta.size, 0);
    // Deleting every field leaves the (empty) hash in existence until DEL.
    assert_eq!(run(&mut db, "HDEL h b c"), int(2));
    assert_eq!(run(&mut db, "HLEN h"), int(0));
    assert_eq!(run(&mut db, "EXISTS h"), int(1));
    assert_eq!(run(&mut db, "HGETALL h"), bulks(&[]));
    assert_eq!(run(&mut db, "DEL h"), int(1));
    assert_eq!(run(&mut db, "EXISTS h"), int(0));
    // A hash created before the mode was switched on keeps exact counting.
    db.set_blind_write(false);
    run(&mut db, "HSET exact a 1");
    db.set_blind_write(true);
    assert_eq!(run(&mut db, "HSET exact a 2 b 3"), int(1));
    assert_eq!(run(&mut db, "HDEL exact a zz"), int(1));
}

#[test]
fn hrandfield_withvalues_refuses_counts_whose_reply_would_overflow() {
    // redis-server 7.0.15, on a missing key: the guard comes before the lookup.
    let (mut db, _) = db();
    for count in ["4611686018427387904", "-4611686018427387904", "9223372036854775807"] {
        assert_eq!(db.run(&["HRANDFIELD", "nokey", count, "WITHVALUES"]), err("ERR value is out of range"));
        assert_eq!(db.run(&["ZRANDMEMBER", "nokey", count, "WITHSCORES"]), err("ERR value is out of range"));
        assert_eq!(db.run(&["HRANDFIELD", "nokey", count]), bulks(&[]));
    }
    assert_eq!(db.run(&["HRANDFIELD", "nokey", "4611686018427387903", "WITHVALUES"]), Reply::Pairs(vec![]));
    assert_eq!(
        db.run(&["SRANDMEMBER", "nokey", "-9223372036854775808"]),
        err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    );
}

#[test]
fn hset_with_many_pairs_counts_each_field_once_and_keeps_the_last_value() {
    let (mut db, _) = db();
    run(&mut db, "HSET h f0 old");
    // 30 pairs over 10 distinct fields, f0 already present: 9 added.
    let mut argv = vec!["HSET".to_string(), "h".to_string()];
    for i in 0..30 {
        argv.push(format!("f{}", i % 10));
        argv.push(format!("v{i}"));
    }
    assert_eq!(db.run(&argv), int(9));
    assert_eq!(run(&mut db, "HLEN h"), int(10));
    assert_eq!(run(&mut db, "HGET h f0"), bulk("v20"));
    assert_eq!(run(&mut db, "HGET h f9"), bulk("v29"));
}
