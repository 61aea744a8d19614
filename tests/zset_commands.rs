//! Sorted-set commands against replies of a real redis-server 7.0.15.
//!
//! The `golden` tests below were produced by sending each command line to redis-server
//! 7.0.15 (`--save '' --appendonly no`, after FLUSHALL) and recording its reply; `set`
//! and `sadd` lines create a string / a set directly through the backend here, because
//! those families are not part of this file. Random replies (ZRANDMEMBER, multi-page ZSCAN)
//! are checked by their properties further down.

mod common;
use common::*;

use bytes::Bytes;
use rediskv::{ColumnFamily, KvBackend, MemoryBackend, WriteBatch};
use rediskv::{Db, Reply};
use rediskv::{Metadata, RedisType};

/// Writes a string key directly (the string family is tested elsewhere).
fn set_string(db: &mut Db<MemoryBackend>, key: &str, value: &str) {
    let mut batch = WriteBatch::new();
    batch.put(
        ColumnFamily::Metadata,
        db.layout().metadata_key(key.as_bytes()),
        Metadata::string(value.as_bytes(), 0).to_vec(),
    );
    db.backend_mut().write(batch).unwrap();
}

/// Writes a plain set directly: metadata plus one empty-valued subkey per member.
fn sadd_raw(db: &mut Db<MemoryBackend>, key: &str, members: &[&str]) {
    let version = db.new_version();
    let mut meta = Metadata::collection(RedisType::Set, version);
    meta.size = members.len() as u64;
    let mut batch = WriteBatch::new();
    for m in members {
        batch.put(
            ColumnFamily::Subkey,
            db.layout().subkey(key.as_bytes(), version, m.as_bytes()).unwrap(),
            Bytes::new(),
        );
    }
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(key.as_bytes()), meta.to_vec());
    db.backend_mut().write(batch).unwrap();
}

// ---- golden tests (generated from redis-server 7.0.15) ----

#[test]
fn zadd_options_and_errors() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z nan a"), err("ERR value is not a valid float"), "zadd z nan a");
    assert_eq!(run(&mut db, "zadd z 1 a 2"), err("ERR syntax error"), "zadd z 1 a 2");
    assert_eq!(run(&mut db, "zadd z"), err("ERR wrong number of arguments for 'zadd' command"), "zadd z");
    assert_eq!(
        run(&mut db, "zadd z xx nx 1 a"),
        err("ERR XX and NX options at the same time are not compatible"),
        "zadd z xx nx 1 a"
    );
    assert_eq!(
        run(&mut db, "zadd z gt nx 1 a"),
        err("ERR GT, LT, and/or NX options at the same time are not compatible"),
        "zadd z gt nx 1 a"
    );
    assert_eq!(
        run(&mut db, "zadd z lt nx 1 a"),
        err("ERR GT, LT, and/or NX options at the same time are not compatible"),
        "zadd z lt nx 1 a"
    );
    assert_eq!(
        run(&mut db, "zadd z gt lt 1 a"),
        err("ERR GT, LT, and/or NX options at the same time are not compatible"),
        "zadd z gt lt 1 a"
    );
    assert_eq!(
        run(&mut db, "zadd z incr 1 a 2 b"),
        err("ERR INCR option supports a single increment-element pair"),
        "zadd z incr 1 a 2 b"
    );
    assert_eq!(run(&mut db, "zadd z nx incr 1 a"), bulk("1"), "zadd z nx incr 1 a");
    assert_eq!(run(&mut db, "zadd z incr 1 a"), bulk("2"), "zadd z incr 1 a");
    assert_eq!(run(&mut db, "zadd z nx incr 1 a"), Reply::Nil, "zadd z nx incr 1 a");
    assert_eq!(run(&mut db, "zadd z xx incr 1 zz"), Reply::Nil, "zadd z xx incr 1 zz");
    assert_eq!(run(&mut db, "zadd z gt incr -5 a"), Reply::Nil, "zadd z gt incr -5 a");
    assert_eq!(run(&mut db, "zadd z gt incr 5 a"), bulk("7"), "zadd z gt incr 5 a");
    assert_eq!(run(&mut db, "zadd z foo 1 a"), err("ERR syntax error"), "zadd z foo 1 a");
    assert_eq!(run(&mut db, "zadd z 1"), err("ERR wrong number of arguments for 'zadd' command"), "zadd z 1");
    assert_eq!(run(&mut db, "zadd z ch 1"), err("ERR syntax error"), "zadd z ch 1");
    assert_eq!(run(&mut db, "zadd z abc a"), err("ERR value is not a valid float"), "zadd z abc a");
    assert_eq!(run(&mut db, "zadd z 0x10 hex"), int(1), "zadd z 0x10 hex");
    assert_eq!(
        run(&mut db, "zadd z 1e-400 tiny"),
        err("ERR value is not a valid float"),
        "zadd z 1e-400 tiny"
    );
    assert_eq!(run(&mut db, "zadd z 1e400 big"), err("ERR value is not a valid float"), "zadd z 1e400 big");
    assert_eq!(run(&mut db, "zadd z 1. dot"), int(1), "zadd z 1. dot");
    assert_eq!(run(&mut db, "zadd z .5 half"), int(1), "zadd z .5 half");
    assert_eq!(
        run(&mut db, "zrange z 0 -1 withscores"),
        bulks(&["half", "0.5", "dot", "1", "a", "7", "hex", "16"]),
        "zrange z 0 -1 withscores"
    );
    assert_eq!(run(&mut db, "zadd z 1 a 2 a 3 a"), int(0), "zadd z 1 a 2 a 3 a");
    assert_eq!(run(&mut db, "zscore z a"), bulk("3"), "zscore z a");
    assert_eq!(run(&mut db, "zadd z 1 m1 1 m1"), int(1), "zadd z 1 m1 1 m1");
    assert_eq!(run(&mut db, "zcard z"), int(5), "zcard z");
    set_string(&mut db, "s", "x");
    assert_eq!(
        run(&mut db, "zadd s 1 a"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zadd s 1 a"
    );
    assert_eq!(
        run(&mut db, "zadd s xx nx 1 a"),
        err("ERR XX and NX options at the same time are not compatible"),
        "zadd s xx nx 1 a"
    );
    assert_eq!(run(&mut db, "zadd s nan a"), err("ERR value is not a valid float"), "zadd s nan a");
    assert_eq!(run(&mut db, "zadd s 1 a 2"), err("ERR syntax error"), "zadd s 1 a 2");
    assert_eq!(
        run(&mut db, "zadd s xx 1 a"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zadd s xx 1 a"
    );
}

#[test]
fn zadd_nx_xx_gt_lt_ch() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z xx 1 a"), int(0), "zadd z xx 1 a");
    assert_eq!(run(&mut db, "exists z"), int(0), "exists z");
    assert_eq!(run(&mut db, "zadd z xx incr 1 a"), Reply::Nil, "zadd z xx incr 1 a");
    assert_eq!(run(&mut db, "zadd z nx 1 a 2 b"), int(2), "zadd z nx 1 a 2 b");
    assert_eq!(run(&mut db, "zadd z nx ch 5 a 3 c"), int(1), "zadd z nx ch 5 a 3 c");
    assert_eq!(run(&mut db, "zadd z xx ch 5 a 3 zz"), int(1), "zadd z xx ch 5 a 3 zz");
    assert_eq!(run(&mut db, "zadd z gt ch 1 a 10 b 7 q"), int(2), "zadd z gt ch 1 a 10 b 7 q");
    assert_eq!(
        run(&mut db, "zrange z 0 -1 withscores"),
        bulks(&["c", "3", "a", "5", "q", "7", "b", "10"]),
        "zrange z 0 -1 withscores"
    );
    assert_eq!(run(&mut db, "zadd z lt 1 b"), int(0), "zadd z lt 1 b");
    assert_eq!(run(&mut db, "zadd z lt incr 1 b"), Reply::Nil, "zadd z lt incr 1 b");
    assert_eq!(run(&mut db, "zadd z lt incr -1 b"), bulk("0"), "zadd z lt incr -1 b");
    assert_eq!(run(&mut db, "zadd z gt xx incr 1 b"), bulk("1"), "zadd z gt xx incr 1 b");
    assert_eq!(run(&mut db, "zadd z incr 0 b"), bulk("1"), "zadd z incr 0 b");
    assert_eq!(run(&mut db, "zadd z ch 1 b"), int(0), "zadd z ch 1 b");
    assert_eq!(run(&mut db, "zadd z ch ch 1 b"), int(0), "zadd z ch ch 1 b");
    assert_eq!(run(&mut db, "zadd z gt gt 2 b"), int(0), "zadd z gt gt 2 b");
    assert_eq!(run(&mut db, "zadd z Incr 1 newm"), bulk("1"), "zadd z Incr 1 newm");
    assert_eq!(run(&mut db, "zadd z GT CH 3 b 3 b"), int(1), "zadd z GT CH 3 b 3 b");
    assert_eq!(run(&mut db, "zadd z LT XX CH 0 b 0 nope"), int(1), "zadd z LT XX CH 0 b 0 nope");
    assert_eq!(
        run(&mut db, "zrange z 0 -1 withscores"),
        bulks(&["b", "0", "newm", "1", "c", "3", "a", "5", "q", "7"]),
        "zrange z 0 -1 withscores"
    );
    assert_eq!(run(&mut db, "zcard z"), int(5), "zcard z");
}

/// Past the sixteen members a linear search handles, a repeated member keeps its last
/// score (ZADD, INCR and CH too) and counts once (ZREM).
#[test]
fn zadd_zrem_many_members_with_repeats() {
    let (mut db, _) = db();
    let pairs: String = (0..20).map(|i| format!(" {i} m{i}")).collect();
    assert_eq!(run(&mut db, &format!("ZADD z{pairs} 100 m3 200 m19")), int(20));
    assert_eq!(run(&mut db, "ZSCORE z m3"), bulk("100"));
    assert_eq!(run(&mut db, "ZSCORE z m19"), bulk("200"));
    assert_eq!(run(&mut db, "ZRANGE z -2 -1"), bulks(&["m3", "m19"]));
    // CH: m0..m16 change (to 1000 + i), m17..m19 keep their scores, m20 is added.
    let ch: String = (0..17).map(|i| format!(" {} m{i}", 1000 + i)).collect();
    assert_eq!(run(&mut db, &format!("ZADD z CH{ch} 17 m17 18 m18 200 m19 5 m20")), int(18));
    assert_eq!(run(&mut db, "ZCARD z"), int(21));
    let members: String = (0..21).map(|i| format!(" m{i}")).collect();
    assert_eq!(run(&mut db, &format!("ZREM z{members} m0 m20 nosuch")), int(21));
    assert_eq!(run(&mut db, "EXISTS z"), int(0));
}

#[test]
fn score_text_matches_redis_7_0() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z 0.1 p"), int(1), "zadd z 0.1 p");
    assert_eq!(run(&mut db, "zscore z p"), bulk("0.10000000000000001"), "zscore z p");
    assert_eq!(run(&mut db, "zadd z -0 m"), int(1), "zadd z -0 m");
    assert_eq!(run(&mut db, "zscore z m"), bulk("0"), "zscore z m");
    assert_eq!(
        run(&mut db, "zadd z 1e20 big 3.0e-5 small 123456789.123456789 mid -1.5 neg"),
        int(4),
        "zadd z 1e20 big 3.0e-5 small 123456789.123456789 mid -1.5 neg"
    );
    assert_eq!(run(&mut db, "zadd z inf pinf -inf ninf"), int(2), "zadd z inf pinf -inf ninf");
    assert_eq!(
        run(&mut db, "zrange z 0 -1 withscores"),
        bulks(&[
            "ninf",
            "-inf",
            "neg",
            "-1.5",
            "m",
            "0",
            "small",
            "3.0000000000000001e-05",
            "p",
            "0.10000000000000001",
            "mid",
            "123456789.12345679",
            "big",
            "1e+20",
            "pinf",
            "inf"
        ]),
        "zrange z 0 -1 withscores"
    );
    assert_eq!(run(&mut db, "zadd z incr -0 q"), bulk("-0"), "zadd z incr -0 q");
    assert_eq!(run(&mut db, "zscore z q"), bulk("0"), "zscore z q");
    assert_eq!(run(&mut db, "zincrby z -0 m"), bulk("0"), "zincrby z -0 m");
    assert_eq!(
        run(&mut db, "zadd z 1e16 e16 1e17 e17 0.0001 tiny"),
        int(3),
        "zadd z 1e16 e16 1e17 e17 0.0001 tiny"
    );
    assert_eq!(
        run(&mut db, "zmscore z e16 e17 tiny nosuch"),
        Reply::Array(vec![bulk("10000000000000000"), bulk("1e+17"), bulk("0.0001"), Reply::Nil]),
        "zmscore z e16 e17 tiny nosuch"
    );
}

#[test]
fn zincrby_and_nan() {
    let (mut db, _) = db();
    assert_eq!(
        run(&mut db, "zincrby z 1"),
        err("ERR wrong number of arguments for 'zincrby' command"),
        "zincrby z 1"
    );
    assert_eq!(run(&mut db, "zincrby z x a"), err("ERR value is not a valid float"), "zincrby z x a");
    assert_eq!(run(&mut db, "zincrby z 1 a"), bulk("1"), "zincrby z 1 a");
    assert_eq!(run(&mut db, "zincrby z 1.5 a"), bulk("2.5"), "zincrby z 1.5 a");
    assert_eq!(run(&mut db, "zincrby z -inf a"), bulk("-inf"), "zincrby z -inf a");
    assert_eq!(run(&mut db, "zadd z inf a"), int(0), "zadd z inf a");
    assert_eq!(
        run(&mut db, "zincrby z -inf a"),
        err("ERR resulting score is not a number (NaN)"),
        "zincrby z -inf a"
    );
    assert_eq!(
        run(&mut db, "zadd z incr -inf a"),
        err("ERR resulting score is not a number (NaN)"),
        "zadd z incr -inf a"
    );
    assert_eq!(run(&mut db, "zincrby z inf a"), bulk("inf"), "zincrby z inf a");
    assert_eq!(run(&mut db, "zscore z a"), bulk("inf"), "zscore z a");
    assert_eq!(
        run(&mut db, "zadd big 1.7976931348623157e308 m"),
        int(1),
        "zadd big 1.7976931348623157e308 m"
    );
    assert_eq!(
        run(&mut db, "zincrby big 1.7976931348623157e308 m"),
        bulk("inf"),
        "zincrby big 1.7976931348623157e308 m"
    );
    set_string(&mut db, "s", "x");
    assert_eq!(
        run(&mut db, "zincrby s 1 a"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zincrby s 1 a"
    );
    assert_eq!(run(&mut db, "zincrby s x a"), err("ERR value is not a valid float"), "zincrby s x a");
}

#[test]
fn zrem_zcard_zscore_zmscore() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c 4 d 5 e"), int(5), "zadd z 1 a 2 b 3 c 4 d 5 e");
    set_string(&mut db, "s", "x");
    assert_eq!(run(&mut db, "zrem z"), err("ERR wrong number of arguments for 'zrem' command"), "zrem z");
    assert_eq!(run(&mut db, "zrem nosuch a"), int(0), "zrem nosuch a");
    assert_eq!(
        run(&mut db, "zrem s a"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zrem s a"
    );
    assert_eq!(run(&mut db, "zrem z a a b zz"), int(2), "zrem z a a b zz");
    assert_eq!(run(&mut db, "zcard z"), int(3), "zcard z");
    assert_eq!(run(&mut db, "zscore z c"), bulk("3"), "zscore z c");
    assert_eq!(run(&mut db, "zscore z a"), Reply::Nil, "zscore z a");
    assert_eq!(run(&mut db, "zscore nosuch a"), Reply::Nil, "zscore nosuch a");
    assert_eq!(
        run(&mut db, "zscore s a"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zscore s a"
    );
    assert_eq!(
        run(&mut db, "zmscore z c a d"),
        Reply::Array(vec![bulk("3"), Reply::Nil, bulk("4")]),
        "zmscore z c a d"
    );
    assert_eq!(
        run(&mut db, "zmscore nosuch a b"),
        Reply::Array(vec![Reply::Nil, Reply::Nil]),
        "zmscore nosuch a b"
    );
    assert_eq!(
        run(&mut db, "zmscore s a"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zmscore s a"
    );
    assert_eq!(
        run(&mut db, "zmscore z"),
        err("ERR wrong number of arguments for 'zmscore' command"),
        "zmscore z"
    );
    assert_eq!(run(&mut db, "zcard nosuch"), int(0), "zcard nosuch");
    assert_eq!(
        run(&mut db, "zcard s"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zcard s"
    );
    assert_eq!(run(&mut db, "zrem z c d e"), int(3), "zrem z c d e");
    assert_eq!(run(&mut db, "exists z"), int(0), "exists z");
    assert_eq!(run(&mut db, "zcard z"), int(0), "zcard z");
}

#[test]
fn score_ranges() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c 4 d 5 e"), int(5), "zadd z 1 a 2 b 3 c 4 d 5 e");
    assert_eq!(run(&mut db, "zadd z 3 c2 3 c1"), int(2), "zadd z 3 c2 3 c1");
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 3"),
        bulks(&["a", "b", "c", "c1", "c2"]),
        "zrangebyscore z 1 3"
    );
    assert_eq!(run(&mut db, "zrangebyscore z (1 3"), bulks(&["b", "c", "c1", "c2"]), "zrangebyscore z (1 3");
    assert_eq!(run(&mut db, "zrangebyscore z (1 (3"), bulks(&["b"]), "zrangebyscore z (1 (3");
    assert_eq!(
        run(&mut db, "zrangebyscore z -inf +inf withscores"),
        bulks(&["a", "1", "b", "2", "c", "3", "c1", "3", "c2", "3", "d", "4", "e", "5"]),
        "zrangebyscore z -inf +inf withscores"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z ( 3"),
        bulks(&["a", "b", "c", "c1", "c2"]),
        "zrangebyscore z ( 3"
    );
    assert_eq!(run(&mut db, "zrangebyscore z 1e400 3"), Reply::Array(vec![]), "zrangebyscore z 1e400 3");
    assert_eq!(
        run(&mut db, "zrangebyscore z 0x2 3"),
        bulks(&["b", "c", "c1", "c2"]),
        "zrangebyscore z 0x2 3"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z nan 3"),
        err("ERR min or max is not a float"),
        "zrangebyscore z nan 3"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z (nan 3"),
        err("ERR min or max is not a float"),
        "zrangebyscore z (nan 3"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z a b"),
        err("ERR min or max is not a float"),
        "zrangebyscore z a b"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 3 limit -1 2"),
        Reply::Array(vec![]),
        "zrangebyscore z 1 3 limit -1 2"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 3 limit 1 -1"),
        bulks(&["b", "c", "c1", "c2"]),
        "zrangebyscore z 1 3 limit 1 -1"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 3 limit 1 -5"),
        bulks(&["b", "c", "c1", "c2"]),
        "zrangebyscore z 1 3 limit 1 -5"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 3 limit 0 0"),
        Reply::Array(vec![]),
        "zrangebyscore z 1 3 limit 0 0"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 3 limit 1"),
        err("ERR syntax error"),
        "zrangebyscore z 1 3 limit 1"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 3 limit 1 2 withscores"),
        bulks(&["b", "2", "c", "3"]),
        "zrangebyscore z 1 3 limit 1 2 withscores"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 3 limit x 2"),
        err("ERR value is not an integer or out of range"),
        "zrangebyscore z 1 3 limit x 2"
    );
    assert_eq!(run(&mut db, "zrangebyscore z 1 3 rev"), err("ERR syntax error"), "zrangebyscore z 1 3 rev");
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 3 withscores withscores"),
        bulks(&["a", "1", "b", "2", "c", "3", "c1", "3", "c2", "3"]),
        "zrangebyscore z 1 3 withscores withscores"
    );
    assert_eq!(run(&mut db, "zrangebyscore z 3 1"), Reply::Array(vec![]), "zrangebyscore z 3 1");
    assert_eq!(run(&mut db, "zrangebyscore z (3 3"), Reply::Array(vec![]), "zrangebyscore z (3 3");
    assert_eq!(run(&mut db, "zrangebyscore z 3 3"), bulks(&["c", "c1", "c2"]), "zrangebyscore z 3 3");
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 3 limit 10 5"),
        Reply::Array(vec![]),
        "zrangebyscore z 1 3 limit 10 5"
    );
    assert_eq!(
        run(&mut db, "zrevrangebyscore z 3 1"),
        bulks(&["c2", "c1", "c", "b", "a"]),
        "zrevrangebyscore z 3 1"
    );
    assert_eq!(
        run(&mut db, "zrevrangebyscore z (3 (1 withscores"),
        bulks(&["b", "2"]),
        "zrevrangebyscore z (3 (1 withscores"
    );
    assert_eq!(
        run(&mut db, "zrevrangebyscore z +inf -inf limit 1 3"),
        bulks(&["d", "c2", "c1"]),
        "zrevrangebyscore z +inf -inf limit 1 3"
    );
    assert_eq!(run(&mut db, "zrevrangebyscore z 1 3"), Reply::Array(vec![]), "zrevrangebyscore z 1 3");
    assert_eq!(
        run(&mut db, "zrange z 5 1 byscore rev"),
        bulks(&["e", "d", "c2", "c1", "c", "b", "a"]),
        "zrange z 5 1 byscore rev"
    );
    assert_eq!(
        run(&mut db, "zrange z 5 1 byscore rev limit 1 2 withscores"),
        bulks(&["d", "4", "c2", "3"]),
        "zrange z 5 1 byscore rev limit 1 2 withscores"
    );
    assert_eq!(
        run(&mut db, "zrange z (5 (1 byscore rev"),
        bulks(&["d", "c2", "c1", "c", "b"]),
        "zrange z (5 (1 byscore rev"
    );
    assert_eq!(
        run(&mut db, "zrange z -inf inf byscore limit 2 2"),
        bulks(&["c", "c1"]),
        "zrange z -inf inf byscore limit 2 2"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore nosuch a b"),
        err("ERR min or max is not a float"),
        "zrangebyscore nosuch a b"
    );
    assert_eq!(run(&mut db, "zrangebyscore nosuch 1 2"), Reply::Array(vec![]), "zrangebyscore nosuch 1 2");
    assert_eq!(run(&mut db, "zcount z a b"), err("ERR min or max is not a float"), "zcount z a b");
    assert_eq!(run(&mut db, "zcount z (1 3"), int(4), "zcount z (1 3");
    assert_eq!(run(&mut db, "zcount z -inf +inf"), int(7), "zcount z -inf +inf");
    assert_eq!(run(&mut db, "zcount z 3 3"), int(3), "zcount z 3 3");
    assert_eq!(run(&mut db, "zcount z (3 3"), int(0), "zcount z (3 3");
    assert_eq!(run(&mut db, "zcount z 5 1"), int(0), "zcount z 5 1");
    assert_eq!(run(&mut db, "zcount nosuch a b"), err("ERR min or max is not a float"), "zcount nosuch a b");
    assert_eq!(run(&mut db, "zcount nosuch 1 2"), int(0), "zcount nosuch 1 2");
}

#[test]
fn rank_ranges() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c 4 d 5 e"), int(5), "zadd z 1 a 2 b 3 c 4 d 5 e");
    assert_eq!(run(&mut db, "zrange z 0 -1"), bulks(&["a", "b", "c", "d", "e"]), "zrange z 0 -1");
    assert_eq!(
        run(&mut db, "zrange z 0 -1 withscores"),
        bulks(&["a", "1", "b", "2", "c", "3", "d", "4", "e", "5"]),
        "zrange z 0 -1 withscores"
    );
    assert_eq!(run(&mut db, "zrange z 1 2"), bulks(&["b", "c"]), "zrange z 1 2");
    assert_eq!(run(&mut db, "zrange z -2 -1"), bulks(&["d", "e"]), "zrange z -2 -1");
    assert_eq!(run(&mut db, "zrange z -100 1"), bulks(&["a", "b"]), "zrange z -100 1");
    assert_eq!(run(&mut db, "zrange z 3 100"), bulks(&["d", "e"]), "zrange z 3 100");
    assert_eq!(run(&mut db, "zrange z 5 10"), Reply::Array(vec![]), "zrange z 5 10");
    assert_eq!(run(&mut db, "zrange z 2 1"), Reply::Array(vec![]), "zrange z 2 1");
    assert_eq!(run(&mut db, "zrange z -1 -2"), Reply::Array(vec![]), "zrange z -1 -2");
    assert_eq!(
        run(&mut db, "zrange z x y"),
        err("ERR value is not an integer or out of range"),
        "zrange z x y"
    );
    assert_eq!(
        run(&mut db, "zrange z 1.5 2"),
        err("ERR value is not an integer or out of range"),
        "zrange z 1.5 2"
    );
    assert_eq!(
        run(&mut db, "zrange z 0 -1 limit 0 1"),
        err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"),
        "zrange z 0 -1 limit 0 1"
    );
    assert_eq!(
        run(&mut db, "zrange z 0 -1 limit 1 -1"),
        bulks(&["a", "b", "c", "d", "e"]),
        "zrange z 0 -1 limit 1 -1"
    );
    assert_eq!(run(&mut db, "zrange z 0 -1 rev"), bulks(&["e", "d", "c", "b", "a"]), "zrange z 0 -1 rev");
    assert_eq!(
        run(&mut db, "zrange z 0 1 rev withscores"),
        bulks(&["e", "5", "d", "4"]),
        "zrange z 0 1 rev withscores"
    );
    assert_eq!(run(&mut db, "zrange z 0 -1 rev rev"), err("ERR syntax error"), "zrange z 0 -1 rev rev");
    assert_eq!(
        run(&mut db, "zrange z 0 -1 byscore bylex"),
        err("ERR syntax error"),
        "zrange z 0 -1 byscore bylex"
    );
    assert_eq!(run(&mut db, "zrange z 0 -1 foo"), err("ERR syntax error"), "zrange z 0 -1 foo");
    assert_eq!(
        run(&mut db, "zrevrange z 0 1 withscores"),
        bulks(&["e", "5", "d", "4"]),
        "zrevrange z 0 1 withscores"
    );
    assert_eq!(
        run(&mut db, "zrevrange z 0 1 limit 0 1"),
        err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"),
        "zrevrange z 0 1 limit 0 1"
    );
    assert_eq!(run(&mut db, "zrevrange z -2 -1"), bulks(&["b", "a"]), "zrevrange z -2 -1");
    assert_eq!(run(&mut db, "zrevrange z 0 -1 rev"), err("ERR syntax error"), "zrevrange z 0 -1 rev");
    assert_eq!(
        run(&mut db, "zrange nosuch x y"),
        err("ERR value is not an integer or out of range"),
        "zrange nosuch x y"
    );
    assert_eq!(run(&mut db, "zrange nosuch 0 -1"), Reply::Array(vec![]), "zrange nosuch 0 -1");
    assert_eq!(run(&mut db, "zrevrange nosuch 0 -1"), Reply::Array(vec![]), "zrevrange nosuch 0 -1");
    set_string(&mut db, "s", "x");
    assert_eq!(
        run(&mut db, "zrange s 0 -1"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zrange s 0 -1"
    );
    assert_eq!(
        run(&mut db, "zrange s x y"),
        err("ERR value is not an integer or out of range"),
        "zrange s x y"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore s 1 2"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zrangebyscore s 1 2"
    );
    assert_eq!(
        run(&mut db, "zrangebylex s - +"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zrangebylex s - +"
    );
}

#[test]
fn lex_ranges() {
    let (mut db, _) = db();
    assert_eq!(
        run(&mut db, "zadd z 0 a 0 b 0 c 0 d 0 e 0 ab 0 é"),
        int(7),
        "zadd z 0 a 0 b 0 c 0 d 0 e 0 ab 0 é"
    );
    assert_eq!(
        run(&mut db, "zrangebylex z - +"),
        bulks(&["a", "ab", "b", "c", "d", "e", "é"]),
        "zrangebylex z - +"
    );
    assert_eq!(run(&mut db, "zrangebylex z [b [d"), bulks(&["b", "c", "d"]), "zrangebylex z [b [d");
    assert_eq!(run(&mut db, "zrangebylex z (b (d"), bulks(&["c"]), "zrangebylex z (b (d");
    assert_eq!(run(&mut db, "zrangebylex z [a (c"), bulks(&["a", "ab", "b"]), "zrangebylex z [a (c");
    assert_eq!(run(&mut db, "zrangebylex z (a [ab"), bulks(&["ab"]), "zrangebylex z (a [ab");
    assert_eq!(run(&mut db, "zrangebylex z - (c"), bulks(&["a", "ab", "b"]), "zrangebylex z - (c");
    assert_eq!(run(&mut db, "zrangebylex z [c +"), bulks(&["c", "d", "e", "é"]), "zrangebylex z [c +");
    assert_eq!(run(&mut db, "zrangebylex z + -"), Reply::Array(vec![]), "zrangebylex z + -");
    assert_eq!(run(&mut db, "zrangebylex z [d [b"), Reply::Array(vec![]), "zrangebylex z [d [b");
    assert_eq!(
        run(&mut db, "zrangebylex z a b"),
        err("ERR min or max not valid string range item"),
        "zrangebylex z a b"
    );
    assert_eq!(
        run(&mut db, "zrangebylex z - a"),
        err("ERR min or max not valid string range item"),
        "zrangebylex z - a"
    );
    assert_eq!(
        run(&mut db, "zrangebylex z -- +"),
        err("ERR min or max not valid string range item"),
        "zrangebylex z -- +"
    );
    assert_eq!(
        run(&mut db, "zrangebylex z - + limit 1 2"),
        bulks(&["ab", "b"]),
        "zrangebylex z - + limit 1 2"
    );
    assert_eq!(
        run(&mut db, "zrangebylex z - + limit -1 2"),
        Reply::Array(vec![]),
        "zrangebylex z - + limit -1 2"
    );
    assert_eq!(
        run(&mut db, "zrangebylex z - + withscores"),
        err("ERR syntax error, WITHSCORES not supported in combination with BYLEX"),
        "zrangebylex z - + withscores"
    );
    assert_eq!(
        run(&mut db, "zrevrangebylex z + -"),
        bulks(&["é", "e", "d", "c", "b", "ab", "a"]),
        "zrevrangebylex z + -"
    );
    assert_eq!(run(&mut db, "zrevrangebylex z [d [b"), bulks(&["d", "c", "b"]), "zrevrangebylex z [d [b");
    assert_eq!(
        run(&mut db, "zrevrangebylex z (d - limit 1 10"),
        bulks(&["b", "ab", "a"]),
        "zrevrangebylex z (d - limit 1 10"
    );
    assert_eq!(run(&mut db, "zrange z [b [d bylex"), bulks(&["b", "c", "d"]), "zrange z [b [d bylex");
    assert_eq!(
        run(&mut db, "zrange z + - bylex rev"),
        bulks(&["é", "e", "d", "c", "b", "ab", "a"]),
        "zrange z + - bylex rev"
    );
    assert_eq!(
        run(&mut db, "zrange z [d [b bylex rev limit 0 1"),
        bulks(&["d"]),
        "zrange z [d [b bylex rev limit 0 1"
    );
    assert_eq!(
        run(&mut db, "zrange z a b bylex withscores"),
        err("ERR syntax error, WITHSCORES not supported in combination with BYLEX"),
        "zrange z a b bylex withscores"
    );
    assert_eq!(
        run(&mut db, "zrange z 0 -1 bylex"),
        err("ERR min or max not valid string range item"),
        "zrange z 0 -1 bylex"
    );
    assert_eq!(run(&mut db, "zlexcount z - +"), int(7), "zlexcount z - +");
    assert_eq!(run(&mut db, "zlexcount z [b (e"), int(3), "zlexcount z [b (e");
    assert_eq!(run(&mut db, "zlexcount z (e [b"), int(0), "zlexcount z (e [b");
    assert_eq!(
        run(&mut db, "zlexcount z a b"),
        err("ERR min or max not valid string range item"),
        "zlexcount z a b"
    );
    assert_eq!(
        run(&mut db, "zlexcount nosuch a b"),
        err("ERR min or max not valid string range item"),
        "zlexcount nosuch a b"
    );
    assert_eq!(run(&mut db, "zlexcount nosuch - +"), int(0), "zlexcount nosuch - +");
    assert_eq!(
        run(&mut db, "zrangebylex z [ +"),
        bulks(&["a", "ab", "b", "c", "d", "e", "é"]),
        "zrangebylex z [ +"
    );
    assert_eq!(
        run(&mut db, "zrangebylex z ( +"),
        bulks(&["a", "ab", "b", "c", "d", "e", "é"]),
        "zrangebylex z ( +"
    );
    assert_eq!(
        run(&mut db, "zrangebylex nosuch a b"),
        err("ERR min or max not valid string range item"),
        "zrangebylex nosuch a b"
    );
}

#[test]
fn ranks() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c 4 d 5 e 3 c0"), int(6), "zadd z 1 a 2 b 3 c 4 d 5 e 3 c0");
    assert_eq!(run(&mut db, "zrank z a"), int(0), "zrank z a");
    assert_eq!(run(&mut db, "zrank z c0"), int(3), "zrank z c0");
    assert_eq!(run(&mut db, "zrank z c"), int(2), "zrank z c");
    assert_eq!(run(&mut db, "zrank z e"), int(5), "zrank z e");
    assert_eq!(run(&mut db, "zrevrank z e"), int(0), "zrevrank z e");
    assert_eq!(run(&mut db, "zrevrank z a"), int(5), "zrevrank z a");
    assert_eq!(run(&mut db, "zrevrank z c"), int(3), "zrevrank z c");
    assert_eq!(run(&mut db, "zrank z nosuch"), Reply::Nil, "zrank z nosuch");
    assert_eq!(run(&mut db, "zrank nosuch a"), Reply::Nil, "zrank nosuch a");
    assert_eq!(run(&mut db, "zrevrank nosuch a"), Reply::Nil, "zrevrank nosuch a");
    set_string(&mut db, "s", "x");
    assert_eq!(
        run(&mut db, "zrank s a"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zrank s a"
    );
    assert_eq!(
        run(&mut db, "zrank z c withscore"),
        err("ERR wrong number of arguments for 'zrank' command"),
        "zrank z c withscore"
    );
}

#[test]
fn zremrange_family() {
    let (mut db, _) = db();
    assert_eq!(
        run(&mut db, "zadd z 1 a 2 b 3 c 4 d 5 e 6 f 7 g"),
        int(7),
        "zadd z 1 a 2 b 3 c 4 d 5 e 6 f 7 g"
    );
    set_string(&mut db, "s", "x");
    assert_eq!(
        run(&mut db, "zremrangebyrank z x 1"),
        err("ERR value is not an integer or out of range"),
        "zremrangebyrank z x 1"
    );
    assert_eq!(run(&mut db, "zremrangebyrank nosuch 0 1"), int(0), "zremrangebyrank nosuch 0 1");
    assert_eq!(
        run(&mut db, "zremrangebyrank s 0 1"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zremrangebyrank s 0 1"
    );
    assert_eq!(
        run(&mut db, "zremrangebyscore s a b"),
        err("ERR min or max is not a float"),
        "zremrangebyscore s a b"
    );
    assert_eq!(
        run(&mut db, "zremrangebyscore nosuch a b"),
        err("ERR min or max is not a float"),
        "zremrangebyscore nosuch a b"
    );
    assert_eq!(
        run(&mut db, "zremrangebylex nosuch a b"),
        err("ERR min or max not valid string range item"),
        "zremrangebylex nosuch a b"
    );
    assert_eq!(run(&mut db, "zremrangebyrank z 5 2"), int(0), "zremrangebyrank z 5 2");
    assert_eq!(run(&mut db, "zremrangebyrank z -1 -1"), int(1), "zremrangebyrank z -1 -1");
    assert_eq!(run(&mut db, "zrange z 0 -1"), bulks(&["a", "b", "c", "d", "e", "f"]), "zrange z 0 -1");
    assert_eq!(run(&mut db, "zremrangebyrank z 0 1"), int(2), "zremrangebyrank z 0 1");
    assert_eq!(run(&mut db, "zrange z 0 -1"), bulks(&["c", "d", "e", "f"]), "zrange z 0 -1");
    assert_eq!(run(&mut db, "zremrangebyscore z (3 4"), int(1), "zremrangebyscore z (3 4");
    assert_eq!(run(&mut db, "zremrangebyscore z 10 20"), int(0), "zremrangebyscore z 10 20");
    assert_eq!(
        run(&mut db, "zrange z 0 -1 withscores"),
        bulks(&["c", "3", "e", "5", "f", "6"]),
        "zrange z 0 -1 withscores"
    );
    assert_eq!(
        run(&mut db, "zremrangebyscore z a 1"),
        err("ERR min or max is not a float"),
        "zremrangebyscore z a 1"
    );
    assert_eq!(run(&mut db, "zadd l 0 x 0 y 0 z 0 w"), int(4), "zadd l 0 x 0 y 0 z 0 w");
    assert_eq!(run(&mut db, "zremrangebylex l [x (z"), int(2), "zremrangebylex l [x (z");
    assert_eq!(run(&mut db, "zrange l 0 -1"), bulks(&["w", "z"]), "zrange l 0 -1");
    assert_eq!(
        run(&mut db, "zremrangebylex l a b"),
        err("ERR min or max not valid string range item"),
        "zremrangebylex l a b"
    );
    assert_eq!(run(&mut db, "zremrangebylex l (w +"), int(1), "zremrangebylex l (w +");
    assert_eq!(run(&mut db, "zremrangebylex l - +"), int(1), "zremrangebylex l - +");
    assert_eq!(run(&mut db, "exists l"), int(0), "exists l");
    assert_eq!(run(&mut db, "zremrangebyrank z 0 -1"), int(3), "zremrangebyrank z 0 -1");
    assert_eq!(run(&mut db, "exists z"), int(0), "exists z");
}

#[test]
fn pops() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c 4 d 5 e"), int(5), "zadd z 1 a 2 b 3 c 4 d 5 e");
    set_string(&mut db, "s", "x");
    assert_eq!(run(&mut db, "zpopmin z 0"), Reply::Array(vec![]), "zpopmin z 0");
    assert_eq!(
        run(&mut db, "zpopmin z -1"),
        err("ERR value is out of range, must be positive"),
        "zpopmin z -1"
    );
    assert_eq!(
        run(&mut db, "zpopmin z x"),
        err("ERR value is out of range, must be positive"),
        "zpopmin z x"
    );
    assert_eq!(run(&mut db, "zpopmin z 1 2"), err("ERR syntax error"), "zpopmin z 1 2");
    assert_eq!(run(&mut db, "zpopmin nosuch"), Reply::Array(vec![]), "zpopmin nosuch");
    assert_eq!(run(&mut db, "zpopmin nosuch 2"), Reply::Array(vec![]), "zpopmin nosuch 2");
    assert_eq!(run(&mut db, "zpopmin nosuch 0"), Reply::Array(vec![]), "zpopmin nosuch 0");
    assert_eq!(
        run(&mut db, "zpopmin s"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zpopmin s"
    );
    assert_eq!(
        run(&mut db, "zpopmin s 0"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zpopmin s 0"
    );
    assert_eq!(run(&mut db, "zpopmin z"), bulks(&["a", "1"]), "zpopmin z");
    assert_eq!(run(&mut db, "zpopmax z 2"), bulks(&["e", "5", "d", "4"]), "zpopmax z 2");
    assert_eq!(run(&mut db, "zpopmax z"), bulks(&["c", "3"]), "zpopmax z");
    assert_eq!(run(&mut db, "zpopmin z 100"), bulks(&["b", "2"]), "zpopmin z 100");
    assert_eq!(run(&mut db, "exists z"), int(0), "exists z");
    assert_eq!(run(&mut db, "zpopmax z"), Reply::Array(vec![]), "zpopmax z");
}

#[test]
fn mpop_and_blocking_forms() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c 4 d 5 e"), int(5), "zadd z 1 a 2 b 3 c 4 d 5 e");
    set_string(&mut db, "s", "x");
    assert_eq!(run(&mut db, "zmpop 0 z min"), err("ERR numkeys should be greater than 0"), "zmpop 0 z min");
    assert_eq!(run(&mut db, "zmpop -1 z min"), err("ERR numkeys should be greater than 0"), "zmpop -1 z min");
    assert_eq!(run(&mut db, "zmpop x z min"), err("ERR numkeys should be greater than 0"), "zmpop x z min");
    assert_eq!(
        run(&mut db, "zmpop 1 z"),
        err("ERR wrong number of arguments for 'zmpop' command"),
        "zmpop 1 z"
    );
    assert_eq!(run(&mut db, "zmpop 1 z foo"), err("ERR syntax error"), "zmpop 1 z foo");
    assert_eq!(
        run(&mut db, "zmpop 1 z min count 0"),
        err("ERR count should be greater than 0"),
        "zmpop 1 z min count 0"
    );
    assert_eq!(
        run(&mut db, "zmpop 1 z min count -1"),
        err("ERR count should be greater than 0"),
        "zmpop 1 z min count -1"
    );
    assert_eq!(
        run(&mut db, "zmpop 1 z min count x"),
        err("ERR count should be greater than 0"),
        "zmpop 1 z min count x"
    );
    assert_eq!(run(&mut db, "zmpop 1 z min count"), err("ERR syntax error"), "zmpop 1 z min count");
    assert_eq!(
        run(&mut db, "zmpop 1 z min count 1 count 2"),
        err("ERR syntax error"),
        "zmpop 1 z min count 1 count 2"
    );
    assert_eq!(run(&mut db, "zmpop 1 z min foo"), err("ERR syntax error"), "zmpop 1 z min foo");
    assert_eq!(run(&mut db, "zmpop 2 z min"), err("ERR syntax error"), "zmpop 2 z min");
    assert_eq!(run(&mut db, "zmpop 1 nosuch min"), Reply::NilArray, "zmpop 1 nosuch min");
    assert_eq!(
        run(&mut db, "zmpop 2 nosuch z max count 2"),
        Reply::Array(vec![bulk("z"), Reply::Array(vec![bulks(&["e", "5"]), bulks(&["d", "4"])])]),
        "zmpop 2 nosuch z max count 2"
    );
    assert_eq!(
        run(&mut db, "zmpop 2 nosuch s max"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zmpop 2 nosuch s max"
    );
    assert_eq!(
        run(&mut db, "zmpop 2 s z max"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zmpop 2 s z max"
    );
    assert_eq!(
        run(&mut db, "zmpop 1 z MIN COUNT 1"),
        Reply::Array(vec![bulk("z"), Reply::Array(vec![bulks(&["a", "1"])])]),
        "zmpop 1 z MIN COUNT 1"
    );
    assert_eq!(run(&mut db, "bzpopmin z -1"), err("ERR timeout is negative"), "bzpopmin z -1");
    assert_eq!(
        run(&mut db, "bzpopmin z x"),
        err("ERR timeout is not a float or out of range"),
        "bzpopmin z x"
    );
    assert_eq!(run(&mut db, "bzpopmin z 1e400"), err("ERR timeout is negative"), "bzpopmin z 1e400");
    assert_eq!(run(&mut db, "bzpopmin z 1e20"), err("ERR timeout is negative"), "bzpopmin z 1e20");
    assert_eq!(run(&mut db, "bzpopmin z inf"), err("ERR timeout is negative"), "bzpopmin z inf");
    assert_eq!(run(&mut db, "bzpopmin z 0"), bulks(&["z", "b", "2"]), "bzpopmin z 0");
    assert_eq!(run(&mut db, "bzpopmax nosuch z 0.5"), bulks(&["z", "c", "3"]), "bzpopmax nosuch z 0.5");
    assert_eq!(run(&mut db, "bzpopmin nosuch 0.01"), Reply::NilArray, "bzpopmin nosuch 0.01");
    assert_eq!(
        run(&mut db, "bzpopmin s 0.01"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "bzpopmin s 0.01"
    );
    assert_eq!(run(&mut db, "bzmpop 0.01 1 nosuch min"), Reply::NilArray, "bzmpop 0.01 1 nosuch min");
    assert_eq!(run(&mut db, "bzmpop -1 1 z min"), err("ERR timeout is negative"), "bzmpop -1 1 z min");
    assert_eq!(
        run(&mut db, "bzmpop x 1 z min"),
        err("ERR timeout is not a float or out of range"),
        "bzmpop x 1 z min"
    );
    assert_eq!(
        run(&mut db, "bzmpop 0 0 z min"),
        err("ERR numkeys should be greater than 0"),
        "bzmpop 0 0 z min"
    );
    assert_eq!(run(&mut db, "zadd z 1 a 2 b"), int(2), "zadd z 1 a 2 b");
    assert_eq!(
        run(&mut db, "bzmpop 0 1 z max count 5"),
        Reply::Array(vec![bulk("z"), Reply::Array(vec![bulks(&["b", "2"]), bulks(&["a", "1"])])]),
        "bzmpop 0 1 z max count 5"
    );
    assert_eq!(run(&mut db, "exists z"), int(0), "exists z");
    assert_eq!(run(&mut db, "bzmpop 0.01 1 z min count 5"), Reply::NilArray, "bzmpop 0.01 1 z min count 5");
}

#[test]
fn zrandmember_errors_and_edges() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c"), int(3), "zadd z 1 a 2 b 3 c");
    set_string(&mut db, "s", "x");
    assert_eq!(run(&mut db, "zrandmember nosuch"), Reply::Nil, "zrandmember nosuch");
    assert_eq!(run(&mut db, "zrandmember nosuch 2"), Reply::Array(vec![]), "zrandmember nosuch 2");
    assert_eq!(run(&mut db, "zrandmember nosuch 0"), Reply::Array(vec![]), "zrandmember nosuch 0");
    assert_eq!(run(&mut db, "zrandmember z 0"), Reply::Array(vec![]), "zrandmember z 0");
    assert_eq!(
        run(&mut db, "zrandmember z 0 withscores"),
        Reply::Array(vec![]),
        "zrandmember z 0 withscores"
    );
    assert_eq!(
        run(&mut db, "zrandmember z -5 withscoresx"),
        err("ERR syntax error"),
        "zrandmember z -5 withscoresx"
    );
    assert_eq!(
        run(&mut db, "zrandmember z 1 withscores x"),
        err("ERR syntax error"),
        "zrandmember z 1 withscores x"
    );
    assert_eq!(
        run(&mut db, "zrandmember z x"),
        err("ERR value is not an integer or out of range"),
        "zrandmember z x"
    );
    assert_eq!(
        run(&mut db, "zrandmember z -9223372036854775808"),
        err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"),
        "zrandmember z -9223372036854775808"
    );
    assert_eq!(
        run(&mut db, "zrandmember z -4611686018427387904 withscores"),
        err("ERR value is out of range"),
        "zrandmember z -4611686018427387904 withscores"
    );
    assert_eq!(
        run(&mut db, "zrandmember z 4611686018427387904 withscores"),
        err("ERR value is out of range"),
        "zrandmember z 4611686018427387904 withscores"
    );
    assert_eq!(
        run(&mut db, "zrandmember s"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zrandmember s"
    );
    assert_eq!(
        run(&mut db, "zrandmember s 0"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zrandmember s 0"
    );
}

#[test]
fn zscan_errors_and_small_sets() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c"), int(3), "zadd z 1 a 2 b 3 c");
    set_string(&mut db, "s", "x");
    assert_eq!(
        run(&mut db, "zscan z 0"),
        Reply::Array(vec![bulk("0"), bulks(&["a", "1", "b", "2", "c", "3"])]),
        "zscan z 0"
    );
    assert_eq!(run(&mut db, "zscan z x"), err("ERR invalid cursor"), "zscan z x");
    assert_eq!(
        run(&mut db, "zscan z -1"),
        Reply::Array(vec![bulk("0"), bulks(&["a", "1", "b", "2", "c", "3"])]),
        "zscan z -1"
    );
    assert_eq!(
        run(&mut db, "zscan z 18446744073709551615"),
        Reply::Array(vec![bulk("0"), bulks(&["a", "1", "b", "2", "c", "3"])]),
        "zscan z 18446744073709551615"
    );
    assert_eq!(
        run(&mut db, "zscan z 18446744073709551616"),
        err("ERR invalid cursor"),
        "zscan z 18446744073709551616"
    );
    assert_eq!(
        run(&mut db, "zscan nosuch 0 count 0"),
        Reply::Array(vec![bulk("0"), Reply::Array(vec![])]),
        "zscan nosuch 0 count 0"
    );
    assert_eq!(run(&mut db, "zscan z 0 count 0"), err("ERR syntax error"), "zscan z 0 count 0");
    assert_eq!(run(&mut db, "zscan z 0 count -1"), err("ERR syntax error"), "zscan z 0 count -1");
    assert_eq!(
        run(&mut db, "zscan z 0 count x"),
        err("ERR value is not an integer or out of range"),
        "zscan z 0 count x"
    );
    assert_eq!(run(&mut db, "zscan z 0 match"), err("ERR syntax error"), "zscan z 0 match");
    assert_eq!(
        run(&mut db, "zscan z 0 match a*"),
        Reply::Array(vec![bulk("0"), bulks(&["a", "1"])]),
        "zscan z 0 match a*"
    );
    assert_eq!(
        run(&mut db, "zscan z 0 match * count 10"),
        Reply::Array(vec![bulk("0"), bulks(&["a", "1", "b", "2", "c", "3"])]),
        "zscan z 0 match * count 10"
    );
    assert_eq!(run(&mut db, "zscan z 0 foo bar"), err("ERR syntax error"), "zscan z 0 foo bar");
    assert_eq!(
        run(&mut db, "zscan s 0"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zscan s 0"
    );
    assert_eq!(run(&mut db, "zscan s x"), err("ERR invalid cursor"), "zscan s x");
    assert_eq!(
        run(&mut db, "zscan z 0"),
        Reply::Array(vec![bulk("0"), bulks(&["a", "1", "b", "2", "c", "3"])]),
        "zscan z 0"
    );
}

#[test]
fn union_inter_diff() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd a 1 x 2 y 3 z"), int(3), "zadd a 1 x 2 y 3 z");
    assert_eq!(run(&mut db, "zadd b 10 y 20 z 30 w"), int(3), "zadd b 10 y 20 z 30 w");
    sadd_raw(&mut db, "st", &["y", "w", "q"]);
    set_string(&mut db, "s", "x");
    assert_eq!(
        run(&mut db, "zunion 0 a"),
        err("ERR at least 1 input key is needed for 'zunion' command"),
        "zunion 0 a"
    );
    assert_eq!(
        run(&mut db, "zunion -1 a"),
        err("ERR at least 1 input key is needed for 'zunion' command"),
        "zunion -1 a"
    );
    assert_eq!(run(&mut db, "zunion x a"), err("ERR value is not an integer or out of range"), "zunion x a");
    assert_eq!(run(&mut db, "zunion 3 a b"), err("ERR syntax error"), "zunion 3 a b");
    assert_eq!(run(&mut db, "zunion 2 a b"), bulks(&["x", "y", "z", "w"]), "zunion 2 a b");
    assert_eq!(
        run(&mut db, "zunion 2 a b withscores"),
        bulks(&["x", "1", "y", "12", "z", "23", "w", "30"]),
        "zunion 2 a b withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 2 a b weights 2 3 withscores"),
        bulks(&["x", "2", "y", "34", "z", "66", "w", "90"]),
        "zunion 2 a b weights 2 3 withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 2 a b weights 2 withscores"),
        err("ERR weight value is not a float"),
        "zunion 2 a b weights 2 withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 2 a b weights 2 x withscores"),
        err("ERR weight value is not a float"),
        "zunion 2 a b weights 2 x withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 2 a b aggregate max withscores"),
        bulks(&["x", "1", "y", "10", "z", "20", "w", "30"]),
        "zunion 2 a b aggregate max withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 2 a b aggregate foo withscores"),
        err("ERR syntax error"),
        "zunion 2 a b aggregate foo withscores"
    );
    assert_eq!(run(&mut db, "zunion 2 a b aggregate"), err("ERR syntax error"), "zunion 2 a b aggregate");
    assert_eq!(
        run(&mut db, "zunion 2 a b withscores withscores"),
        bulks(&["x", "1", "y", "12", "z", "23", "w", "30"]),
        "zunion 2 a b withscores withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 2 a st withscores"),
        bulks(&["q", "1", "w", "1", "x", "1", "y", "3", "z", "3"]),
        "zunion 2 a st withscores"
    );
    assert_eq!(run(&mut db, "zinter 2 a st withscores"), bulks(&["y", "3"]), "zinter 2 a st withscores");
    assert_eq!(
        run(&mut db, "zdiff 2 a st withscores"),
        bulks(&["x", "1", "z", "3"]),
        "zdiff 2 a st withscores"
    );
    assert_eq!(
        run(&mut db, "zdiff 2 st a withscores"),
        bulks(&["q", "1", "w", "1"]),
        "zdiff 2 st a withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 2 a s"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zunion 2 a s"
    );
    assert_eq!(
        run(&mut db, "zunion 2 s a foo"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zunion 2 s a foo"
    );
    assert_eq!(
        run(&mut db, "zunion 2 a nosuch withscores"),
        bulks(&["x", "1", "y", "2", "z", "3"]),
        "zunion 2 a nosuch withscores"
    );
    assert_eq!(
        run(&mut db, "zinter 2 a nosuch withscores"),
        Reply::Array(vec![]),
        "zinter 2 a nosuch withscores"
    );
    assert_eq!(
        run(&mut db, "zinter 2 a b withscores"),
        bulks(&["y", "12", "z", "23"]),
        "zinter 2 a b withscores"
    );
    assert_eq!(
        run(&mut db, "zinter 2 a b aggregate min withscores"),
        bulks(&["y", "2", "z", "3"]),
        "zinter 2 a b aggregate min withscores"
    );
    assert_eq!(
        run(&mut db, "zinter 2 a b weights 1 -1 aggregate min withscores"),
        bulks(&["z", "-20", "y", "-10"]),
        "zinter 2 a b weights 1 -1 aggregate min withscores"
    );
    assert_eq!(run(&mut db, "zdiff 2 a b withscores"), bulks(&["x", "1"]), "zdiff 2 a b withscores");
    assert_eq!(run(&mut db, "zdiff 2 a b weights 1 1"), err("ERR syntax error"), "zdiff 2 a b weights 1 1");
    assert_eq!(
        run(&mut db, "zdiff 2 a b aggregate sum"),
        err("ERR syntax error"),
        "zdiff 2 a b aggregate sum"
    );
    assert_eq!(
        run(&mut db, "zdiff 0 a"),
        err("ERR at least 1 input key is needed for 'zdiff' command"),
        "zdiff 0 a"
    );
    assert_eq!(run(&mut db, "zdiff 1 nosuch"), Reply::Array(vec![]), "zdiff 1 nosuch");
    assert_eq!(
        run(&mut db, "zunion 2 a b weights 1 inf withscores"),
        bulks(&["x", "1", "w", "inf", "y", "inf", "z", "inf"]),
        "zunion 2 a b weights 1 inf withscores"
    );
    assert_eq!(
        run(&mut db, "zinter 1 a weights -1 withscores"),
        bulks(&["z", "-3", "y", "-2", "x", "-1"]),
        "zinter 1 a weights -1 withscores"
    );
    assert_eq!(
        run(&mut db, "zinter 3 a b a withscores"),
        bulks(&["y", "14", "z", "26"]),
        "zinter 3 a b a withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 2 a a aggregate min withscores"),
        bulks(&["x", "1", "y", "2", "z", "3"]),
        "zunion 2 a a aggregate min withscores"
    );
}

#[test]
fn store_forms() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd a 1 x 2 y 3 z"), int(3), "zadd a 1 x 2 y 3 z");
    assert_eq!(run(&mut db, "zadd b 10 y 20 z 30 w"), int(3), "zadd b 10 y 20 z 30 w");
    set_string(&mut db, "s", "x");
    assert_eq!(
        run(&mut db, "zunionstore d 0 a"),
        err("ERR at least 1 input key is needed for 'zunionstore' command"),
        "zunionstore d 0 a"
    );
    assert_eq!(
        run(&mut db, "zinterstore d 0 a"),
        err("ERR at least 1 input key is needed for 'zinterstore' command"),
        "zinterstore d 0 a"
    );
    assert_eq!(
        run(&mut db, "zdiffstore d 0 a"),
        err("ERR at least 1 input key is needed for 'zdiffstore' command"),
        "zdiffstore d 0 a"
    );
    assert_eq!(
        run(&mut db, "zunionstore d 2 a b withscores"),
        err("ERR syntax error"),
        "zunionstore d 2 a b withscores"
    );
    assert_eq!(run(&mut db, "zunionstore d 2 a b"), int(4), "zunionstore d 2 a b");
    assert_eq!(
        run(&mut db, "zrange d 0 -1 withscores"),
        bulks(&["x", "1", "y", "12", "z", "23", "w", "30"]),
        "zrange d 0 -1 withscores"
    );
    assert_eq!(run(&mut db, "zunionstore s 2 a b"), int(4), "zunionstore s 2 a b");
    assert_eq!(run(&mut db, "type s"), Reply::status("zset"), "type s");
    assert_eq!(
        run(&mut db, "zrange s 0 -1 withscores"),
        bulks(&["x", "1", "y", "12", "z", "23", "w", "30"]),
        "zrange s 0 -1 withscores"
    );
    assert_eq!(run(&mut db, "zinterstore d 2 a nosuch"), int(0), "zinterstore d 2 a nosuch");
    assert_eq!(run(&mut db, "exists d"), int(0), "exists d");
    assert_eq!(run(&mut db, "zdiffstore d 1 a"), int(3), "zdiffstore d 1 a");
    assert_eq!(
        run(&mut db, "zrange d 0 -1 withscores"),
        bulks(&["x", "1", "y", "2", "z", "3"]),
        "zrange d 0 -1 withscores"
    );
    assert_eq!(
        run(&mut db, "zinterstore a 2 a b weights 2 1 aggregate max"),
        int(2),
        "zinterstore a 2 a b weights 2 1 aggregate max"
    );
    assert_eq!(
        run(&mut db, "zrange a 0 -1 withscores"),
        bulks(&["y", "10", "z", "20"]),
        "zrange a 0 -1 withscores"
    );
    set_string(&mut db, "s", "x");
    assert_eq!(run(&mut db, "zdiffstore s 2 nosuch a"), int(0), "zdiffstore s 2 nosuch a");
    assert_eq!(run(&mut db, "exists s"), int(0), "exists s");
    assert_eq!(run(&mut db, "zadd zz 0 m"), int(1), "zadd zz 0 m");
    assert_eq!(run(&mut db, "zunionstore zz 1 zz weights -1"), int(1), "zunionstore zz 1 zz weights -1");
    assert_eq!(run(&mut db, "zrange zz 0 -1 withscores"), bulks(&["m", "0"]), "zrange zz 0 -1 withscores");
    assert_eq!(run(&mut db, "zinterstore d 2 a s"), int(0), "zinterstore d 2 a s");
}

#[test]
fn infinite_scores_in_set_ops() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd inf 1 x"), int(1), "zadd inf 1 x");
    assert_eq!(run(&mut db, "zadd inf inf x"), int(0), "zadd inf inf x");
    assert_eq!(run(&mut db, "zadd ninf -inf x"), int(1), "zadd ninf -inf x");
    assert_eq!(run(&mut db, "zadd a 1 x 2 y 3 z"), int(3), "zadd a 1 x 2 y 3 z");
    assert_eq!(
        run(&mut db, "zunion 2 inf ninf withscores"),
        bulks(&["x", "0"]),
        "zunion 2 inf ninf withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 2 inf a weights 0 1 withscores"),
        bulks(&["x", "1", "y", "2", "z", "3"]),
        "zunion 2 inf a weights 0 1 withscores"
    );
    assert_eq!(
        run(&mut db, "zinter 2 inf ninf withscores"),
        bulks(&["x", "0"]),
        "zinter 2 inf ninf withscores"
    );
    assert_eq!(
        run(&mut db, "zinter 2 inf ninf aggregate max withscores"),
        bulks(&["x", "inf"]),
        "zinter 2 inf ninf aggregate max withscores"
    );
    assert_eq!(
        run(&mut db, "zinter 2 inf ninf aggregate min withscores"),
        bulks(&["x", "-inf"]),
        "zinter 2 inf ninf aggregate min withscores"
    );
}

#[test]
fn zintercard_cmd() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd a 1 x 2 y 3 z"), int(3), "zadd a 1 x 2 y 3 z");
    assert_eq!(run(&mut db, "zadd b 10 y 20 z 30 w"), int(3), "zadd b 10 y 20 z 30 w");
    sadd_raw(&mut db, "st", &["y", "w", "q"]);
    set_string(&mut db, "s", "x");
    assert_eq!(
        run(&mut db, "zintercard 0 a"),
        err("ERR at least 1 input key is needed for 'zintercard' command"),
        "zintercard 0 a"
    );
    assert_eq!(
        run(&mut db, "zintercard -1 a"),
        err("ERR at least 1 input key is needed for 'zintercard' command"),
        "zintercard -1 a"
    );
    assert_eq!(
        run(&mut db, "zintercard x a"),
        err("ERR value is not an integer or out of range"),
        "zintercard x a"
    );
    assert_eq!(run(&mut db, "zintercard 2 a b"), int(2), "zintercard 2 a b");
    assert_eq!(run(&mut db, "zintercard 2 a b limit 1"), int(1), "zintercard 2 a b limit 1");
    assert_eq!(run(&mut db, "zintercard 2 a b limit 0"), int(2), "zintercard 2 a b limit 0");
    assert_eq!(
        run(&mut db, "zintercard 2 a b limit -1"),
        err("ERR LIMIT can't be negative"),
        "zintercard 2 a b limit -1"
    );
    assert_eq!(
        run(&mut db, "zintercard 2 a b limit x"),
        err("ERR LIMIT can't be negative"),
        "zintercard 2 a b limit x"
    );
    assert_eq!(run(&mut db, "zintercard 2 a b foo"), err("ERR syntax error"), "zintercard 2 a b foo");
    assert_eq!(run(&mut db, "zintercard 3 a b"), err("ERR syntax error"), "zintercard 3 a b");
    assert_eq!(run(&mut db, "zintercard 2 a st"), int(1), "zintercard 2 a st");
    assert_eq!(
        run(&mut db, "zintercard 2 a s"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zintercard 2 a s"
    );
    assert_eq!(
        run(&mut db, "zintercard 2 s a limit -1"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zintercard 2 s a limit -1"
    );
    assert_eq!(run(&mut db, "zintercard 1 nosuch"), int(0), "zintercard 1 nosuch");
    assert_eq!(run(&mut db, "zintercard 2 a b limit"), err("ERR syntax error"), "zintercard 2 a b limit");
    assert_eq!(run(&mut db, "zintercard 2 a a"), int(3), "zintercard 2 a a");
}

#[test]
fn zrangestore_cmd() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c 4 d 5 e"), int(5), "zadd z 1 a 2 b 3 c 4 d 5 e");
    set_string(&mut db, "s", "x");
    assert_eq!(run(&mut db, "zrangestore d z 0 -1"), int(5), "zrangestore d z 0 -1");
    assert_eq!(
        run(&mut db, "zrange d 0 -1 withscores"),
        bulks(&["a", "1", "b", "2", "c", "3", "d", "4", "e", "5"]),
        "zrange d 0 -1 withscores"
    );
    assert_eq!(
        run(&mut db, "zrangestore d z 0 1 withscores"),
        err("ERR syntax error"),
        "zrangestore d z 0 1 withscores"
    );
    assert_eq!(
        run(&mut db, "zrangestore d z 1 3 byscore limit 1 1"),
        int(1),
        "zrangestore d z 1 3 byscore limit 1 1"
    );
    assert_eq!(run(&mut db, "zrange d 0 -1 withscores"), bulks(&["b", "2"]), "zrange d 0 -1 withscores");
    assert_eq!(
        run(&mut db, "zrangestore d z 0 -1 bylex"),
        err("ERR min or max not valid string range item"),
        "zrangestore d z 0 -1 bylex"
    );
    assert_eq!(run(&mut db, "zrangestore d z [b [d bylex rev"), int(0), "zrangestore d z [b [d bylex rev");
    assert_eq!(run(&mut db, "zrangestore d z [d [b bylex rev"), int(3), "zrangestore d z [d [b bylex rev");
    assert_eq!(
        run(&mut db, "zrange d 0 -1 withscores"),
        bulks(&["b", "2", "c", "3", "d", "4"]),
        "zrange d 0 -1 withscores"
    );
    assert_eq!(run(&mut db, "zrangestore d nosuch 0 -1"), int(0), "zrangestore d nosuch 0 -1");
    assert_eq!(run(&mut db, "exists d"), int(0), "exists d");
    assert_eq!(run(&mut db, "zrangestore s z 0 0"), int(1), "zrangestore s z 0 0");
    assert_eq!(run(&mut db, "type s"), Reply::status("zset"), "type s");
    assert_eq!(run(&mut db, "zrange s 0 -1 withscores"), bulks(&["a", "1"]), "zrange s 0 -1 withscores");
    set_string(&mut db, "s", "x");
    assert_eq!(
        run(&mut db, "zrangestore d s 0 0"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        "zrangestore d s 0 0"
    );
    assert_eq!(run(&mut db, "zrangestore d z 10 20"), int(0), "zrangestore d z 10 20");
    assert_eq!(run(&mut db, "exists d"), int(0), "exists d");
    assert_eq!(run(&mut db, "zrangestore z z 1 2"), int(2), "zrangestore z z 1 2");
    assert_eq!(
        run(&mut db, "zrange z 0 -1 withscores"),
        bulks(&["b", "2", "c", "3"]),
        "zrange z 0 -1 withscores"
    );
    assert_eq!(
        run(&mut db, "zrangestore d z 0 -1 rev limit 0 1"),
        err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"),
        "zrangestore d z 0 -1 rev limit 0 1"
    );
}
// ---- behaviour checked by properties and by reading the records ----

/// Every (member, score) of `key` under its live version, read from the Subkey CF and from
/// the Score CF; the two must agree.
fn records(db: &Db<MemoryBackend>, key: &str) -> Vec<(Vec<u8>, f64)> {
    let raw = db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(key.as_bytes())).unwrap();
    let Some(raw) = raw else { return Vec::new() };
    let meta = Metadata::decode(&raw).unwrap();
    let layout = db.layout();
    let range = layout.subkey_range(key.as_bytes(), meta.version).unwrap();
    let mut by_member = Vec::new();
    for item in db.backend().scan(ColumnFamily::Subkey, &range, rediskv::Direction::Forward).unwrap() {
        let (k, v) = item.unwrap();
        let sk = layout.decode_subkey(&k).unwrap();
        by_member.push((sk.sub.to_vec(), rediskv::decode_f64_slice(&v).unwrap()));
    }
    let mut by_score = Vec::new();
    for item in db.backend().scan(ColumnFamily::Score, &range, rediskv::Direction::Forward).unwrap() {
        let (k, v) = item.unwrap();
        assert!(v.is_empty());
        let sk = layout.decode_score_key(&k).unwrap();
        by_score.push((sk.member.to_vec(), sk.score));
    }
    let mut sorted = by_score.clone();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(by_member, sorted, "Subkey and Score records of {key} disagree");
    assert_eq!(meta.size as usize, by_member.len(), "size of {key}");
    by_score
}

#[test]
fn score_changes_move_the_score_record() {
    let (mut db, _) = db();
    run(&mut db, "zadd z 1 a 2 b 3 c");
    run(&mut db, "zadd z 10 a");
    run(&mut db, "zincrby z -5 b");
    run(&mut db, "zadd z 5 x 6 x 7 x");
    let recs = records(&db, "z");
    let names: Vec<&[u8]> = recs.iter().map(|(m, _)| m.as_slice()).collect();
    assert_eq!(names, [&b"b"[..], b"c", b"x", b"a"]);
    assert_eq!(recs.iter().map(|r| r.1).collect::<Vec<_>>(), [-3.0, 3.0, 7.0, 10.0]);
    run(&mut db, "zrem z c x");
    run(&mut db, "zpopmax z");
    assert_eq!(records(&db, "z"), vec![(b"b".to_vec(), -3.0)]);
    run(&mut db, "zpopmin z");
    assert_eq!(db.backend().len(ColumnFamily::Metadata), 0, "an empty sorted set no longer exists");
}

#[test]
fn negative_zero_is_stored_as_zero() {
    // redis-server 7.0.15: ZADD z -0 m; ZSCORE z m → "0"; ZADD z INCR -0 q → "-0" then ZSCORE → "0".
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z -0 m"), int(1));
    assert_eq!(run(&mut db, "zscore z m"), bulk("0"));
    assert_eq!(run(&mut db, "zadd z 0 n"), int(1));
    assert_eq!(run(&mut db, "zrangebyscore z 0 0"), bulks(&["m", "n"]));
    assert_eq!(run(&mut db, "zadd z -0 n"), int(0));
    assert_eq!(records(&db, "z").iter().filter(|(_, s)| s.is_sign_negative()).count(), 0);
}

#[test]
fn store_replaces_any_type_under_a_fresh_version() {
    let (mut db, _) = db();
    set_string(&mut db, "d", "text");
    run(&mut db, "zadd a 1 x 2 y");
    assert_eq!(run(&mut db, "zunionstore d 1 a"), int(2));
    assert_eq!(run(&mut db, "type d"), Reply::status("zset"));
    let v1 = Metadata::decode(
        &db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(b"d")).unwrap().unwrap(),
    )
    .unwrap()
    .version;
    assert_eq!(run(&mut db, "zrangestore d a 0 0"), int(1));
    let v2 = Metadata::decode(
        &db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(b"d")).unwrap().unwrap(),
    )
    .unwrap()
    .version;
    assert!(v2 > v1);
    assert_eq!(records(&db, "d"), vec![(b"x".to_vec(), 1.0)]);
    // The destination may be a source.
    assert_eq!(run(&mut db, "zunionstore a 2 a a"), int(2));
    assert_eq!(run(&mut db, "zrange a 0 -1 withscores"), bulks(&["x", "2", "y", "4"]));
    records(&db, "a");
}

#[test]
fn expired_zset_starts_over() {
    let (mut db, clock) = db();
    run(&mut db, "zadd z 1 a 2 b");
    let key = db.layout().metadata_key(b"z");
    let raw = db.backend().get(ColumnFamily::Metadata, &key).unwrap().unwrap();
    let meta = Metadata::decode(&raw).unwrap();
    let expiring = Metadata { expire_ms: T0_MS + 10, ..meta };
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Metadata, key.clone(), expiring.to_vec());
    db.backend_mut().write(batch).unwrap();
    assert_eq!(run(&mut db, "zcard z"), int(2));
    clock.advance_ms(11);
    assert_eq!(run(&mut db, "zcard z"), int(0));
    assert_eq!(run(&mut db, "zscore z a"), Reply::Nil);
    assert_eq!(run(&mut db, "zadd z 5 c"), int(1));
    assert_eq!(run(&mut db, "zrange z 0 -1 withscores"), bulks(&["c", "5"]));
    assert_eq!(records(&db, "z"), vec![(b"c".to_vec(), 5.0)]);
}

#[test]
fn wrongtype_for_every_command() {
    let (mut db, _) = db();
    set_string(&mut db, "s", "x");
    for line in [
        "zadd s 1 a",
        "zincrby s 1 a",
        "zrem s a",
        "zcard s",
        "zscore s a",
        "zmscore s a",
        "zcount s 0 1",
        "zlexcount s - +",
        "zrange s 0 1",
        "zrangestore d s 0 1",
        "zrangebyscore s 0 1",
        "zrevrangebyscore s 1 0",
        "zrangebylex s - +",
        "zrevrangebylex s + -",
        "zrevrange s 0 1",
        "zrank s a",
        "zrevrank s a",
        "zremrangebyscore s 0 1",
        "zremrangebyrank s 0 1",
        "zremrangebylex s - +",
        "zpopmin s",
        "zpopmax s",
        "zmpop 1 s min",
        "bzpopmin s 0",
        "bzpopmax s 0",
        "bzmpop 0 1 s max",
        "zrandmember s",
        "zunion 1 s",
        "zinter 1 s",
        "zdiff 1 s",
        "zunionstore d 1 s",
        "zinterstore d 1 s",
        "zdiffstore d 1 s",
        "zintercard 1 s",
        "zscan s 0",
    ] {
        assert_eq!(run(&mut db, line), wrongtype(), "{line}");
    }
    assert_eq!(run(&mut db, "exists d"), int(0));
}

#[test]
fn ranks_and_rank_ranges_on_a_larger_set() {
    let (mut db, _) = db();
    let mut line = String::from("zadd z");
    for i in 0..200 {
        line.push_str(&format!(" {} m{i:03}", i / 2));
    }
    assert_eq!(run(&mut db, &line), int(200));
    for i in [0, 1, 57, 99, 100, 150, 198, 199] {
        assert_eq!(run(&mut db, &format!("zrank z m{i:03}")), int(i));
        assert_eq!(run(&mut db, &format!("zrevrank z m{i:03}")), int(199 - i));
    }
    assert_eq!(run(&mut db, "zrange z 195 -3"), bulks(&["m195", "m196", "m197"]));
    assert_eq!(run(&mut db, "zrange z -3 -1 rev"), bulks(&["m002", "m001", "m000"]));
    assert_eq!(run(&mut db, "zrange z 2 3 rev withscores"), bulks(&["m197", "98", "m196", "98"]));
    assert_eq!(run(&mut db, "zrangebyscore z (97 +inf limit 1 2"), bulks(&["m197", "m198"]));
    assert_eq!(run(&mut db, "zrevrangebyscore z 1 -inf limit 1 10"), bulks(&["m002", "m001", "m000"]));
    assert_eq!(run(&mut db, "zcount z 10 (20"), int(20));
    assert_eq!(run(&mut db, "zremrangebyrank z 190 -1"), int(10));
    assert_eq!(run(&mut db, "zcard z"), int(190));
    assert_eq!(records(&db, "z").len(), 190);
}

#[test]
fn zrandmember_properties() {
    let (mut db, _) = db();
    run(&mut db, "zadd z 1 a 2 b 3 c 4 d 5 e");
    let all = ["a", "b", "c", "d", "e"];
    for _ in 0..20 {
        let one = match run(&mut db, "zrandmember z") {
            Reply::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
            other => panic!("{other:?}"),
        };
        assert!(all.contains(&one.as_str()));
        let mut three = strings(run(&mut db, "zrandmember z 3"));
        assert_eq!(three.len(), 3);
        three.sort();
        three.dedup();
        assert_eq!(three.len(), 3, "positive count gives distinct members");
        let many = strings(run(&mut db, "zrandmember z -12"));
        assert_eq!(many.len(), 12, "negative count gives exactly |count| members");
        assert!(many.iter().all(|m| all.contains(&m.as_str())));
        let ws = strings(run(&mut db, "zrandmember z -3 withscores"));
        for pair in ws.chunks(2) {
            let expect = (all.iter().position(|m| *m == pair[0]).unwrap() + 1).to_string();
            assert_eq!(pair[1], expect);
        }
    }
    assert_eq!(strings(run(&mut db, "zrandmember z 10")).len(), 5);
    // Over many draws every member shows up.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        seen.extend(strings(run(&mut db, "zrandmember z 1")));
    }
    assert_eq!(seen.len(), 5);
}

#[test]
fn zscan_pages_cover_every_member_once() {
    let (mut db, _) = db();
    let mut line = String::from("zadd z");
    for i in 0..25 {
        line.push_str(&format!(" {i} k{i:02}"));
    }
    run(&mut db, &line);
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    let mut calls = 0;
    loop {
        let reply = run(&mut db, &format!("zscan z {cursor} count 4"));
        let Reply::Array(parts) = reply else { panic!() };
        let Reply::Bulk(next) = &parts[0] else { panic!() };
        let items = strings(parts[1].clone());
        for pair in items.chunks(2) {
            let i: usize = pair[0][1..].parse().unwrap();
            assert_eq!(pair[1], i.to_string());
            seen.push(pair[0].clone());
        }
        calls += 1;
        cursor = String::from_utf8(next.to_vec()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(calls, 7);
    let expect: Vec<String> = (0..25).map(|i| format!("k{i:02}")).collect();
    assert_eq!(seen, expect);
    // MATCH filters after COUNT, as in Redis.
    let Reply::Array(parts) = run(&mut db, "zscan z 0 match k1* count 100") else { panic!() };
    assert_eq!(strings(parts[1].clone()).len(), 20);
    // Deviation: ZSCAN walks member order (Redis' small listpack sets come in score order).
    run(&mut db, "zadd y 2 a 1 b");
    assert_eq!(run(&mut db, "zscan y 0"), Reply::Array(vec![bulk("0"), bulks(&["a", "2", "b", "1"])]));
}

#[test]
fn zmpop_reply_shape() {
    let (mut db, _) = db();
    run(&mut db, "zadd z 1 a 2 b 3 c");
    // redis-server 7.0.15: ZMPOP 1 z MIN COUNT 2 → [z, [[a, 1], [b, 2]]].
    assert_eq!(
        run(&mut db, "zmpop 1 z min count 2"),
        Reply::Array(vec![bulk("z"), Reply::Array(vec![bulks(&["a", "1"]), bulks(&["b", "2"])])])
    );
    assert_eq!(run(&mut db, "zscore z c"), bulk("3"));
    assert_eq!(run(&mut db, "zcard z"), int(1));
    assert_eq!(run(&mut db, "zrank z c"), int(0));
}

/// A backend that counts write batches, to check one batch per command.
struct Counting {
    inner: MemoryBackend,
    writes: std::sync::atomic::AtomicUsize,
}

impl KvBackend for Counting {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> rediskv::Result<Option<Bytes>> {
        self.inner.get(cf, key)
    }
    fn scan<'a>(
        &'a self,
        cf: ColumnFamily,
        range: &rediskv::KeyRange,
        direction: rediskv::Direction,
    ) -> rediskv::Result<rediskv::ScanIter<'a>> {
        self.inner.scan(cf, range, direction)
    }
    fn write(&self, batch: WriteBatch) -> rediskv::Result<()> {
        self.writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.write(batch)
    }
}

#[test]
fn every_command_writes_one_batch_or_none() {
    let mut db = Db::new(Counting { inner: MemoryBackend::new(), writes: Default::default() });
    let mut check = |line: &str, batches: usize| {
        let writes = |db: &Db<Counting>| db.backend().writes.load(std::sync::atomic::Ordering::SeqCst);
        let before = writes(&db);
        let reply = db.run(&line.split_whitespace().collect::<Vec<_>>());
        assert_eq!(writes(&db) - before, batches, "{line} → {reply:?}");
    };
    check("zadd z 1 a 2 b 3 c 4 d 5 e 6 f", 1);
    check("zadd z 9 a 9 b 1 a", 1);
    check("zadd z nx 1 a", 0);
    check("zadd z 1 a nan b", 0);
    check("zadd z incr 1 a", 1);
    check("zincrby z 1 zz", 1);
    check("zrem z zz nosuch", 1);
    check("zrem z nosuch", 0);
    check("zremrangebyrank z 0 1", 1);
    check("zremrangebyscore z 100 200", 0);
    check("zpopmin z 2", 1);
    check("zmpop 1 z max count 5", 1);
    check("zadd a 1 x 2 y", 1);
    check("zunionstore d 2 a a", 1);
    check("zinterstore d 2 a nosuch", 1);
    check("zrangestore d a 0 -1", 1);
    check("zrange a 0 -1", 0);
    check("zunionstore d 2 a", 0);
}

// ---- more golden edge cases (generated from redis-server 7.0.15) ----

#[test]
fn extra_edges() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "zadd z gt ch 5 new"), int(1), "zadd z gt ch 5 new");
    assert_eq!(run(&mut db, "zadd z lt ch 5 new2"), int(1), "zadd z lt ch 5 new2");
    assert_eq!(run(&mut db, "zadd z xx gt ch 6 new 7 nope"), int(1), "zadd z xx gt ch 6 new 7 nope");
    assert_eq!(
        run(&mut db, "zrange z 0 -1 withscores"),
        bulks(&["new2", "5", "new", "6"]),
        "zrange z 0 -1 withscores"
    );
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c 4 d 5 e"), int(5), "zadd z 1 a 2 b 3 c 4 d 5 e");
    assert_eq!(
        run(&mut db, "zrangestore d z 5 1 byscore rev limit 1 2"),
        int(2),
        "zrangestore d z 5 1 byscore rev limit 1 2"
    );
    assert_eq!(
        run(&mut db, "zrange d 0 -1 withscores"),
        bulks(&["d", "4", "e", "5"]),
        "zrange d 0 -1 withscores"
    );
    assert_eq!(
        run(&mut db, "zrangestore d z (1 5 byscore limit 0 -1"),
        int(5),
        "zrangestore d z (1 5 byscore limit 0 -1"
    );
    assert_eq!(run(&mut db, "zrange d 0 -1"), bulks(&["b", "c", "d", "e", "new2"]), "zrange d 0 -1");
    sadd_raw(&mut db, "st", &["a", "b", "x"]);
    assert_eq!(
        run(&mut db, "zinterstore d 3 z st z weights 2 10 1 aggregate sum"),
        int(2),
        "zinterstore d 3 z st z weights 2 10 1 aggregate sum"
    );
    assert_eq!(
        run(&mut db, "zrange d 0 -1 withscores"),
        bulks(&["a", "13", "b", "16"]),
        "zrange d 0 -1 withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 1 z weights 3 withscores"),
        bulks(&["a", "3", "b", "6", "c", "9", "d", "12", "e", "15", "new2", "15", "new", "18"]),
        "zunion 1 z weights 3 withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 1 z weights 3 2 withscores"),
        err("ERR syntax error"),
        "zunion 1 z weights 3 2 withscores"
    );
    assert_eq!(
        run(&mut db, "zrange z 9223372036854775807 -9223372036854775808"),
        Reply::Array(vec![]),
        "zrange z 9223372036854775807 -9223372036854775808"
    );
    assert_eq!(
        run(&mut db, "zrange z -9223372036854775808 9223372036854775807"),
        bulks(&["a", "b", "c", "d", "e", "new2", "new"]),
        "zrange z -9223372036854775808 9223372036854775807"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z -9223372036854775808 9223372036854775807 limit 9223372036854775807 1"),
        Reply::Array(vec![]),
        "zrangebyscore z -9223372036854775808 9223372036854775807 limit 9223372036854775807 1"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z 1 5 limit 2 9223372036854775807"),
        bulks(&["c", "d", "e", "new2"]),
        "zrangebyscore z 1 5 limit 2 9223372036854775807"
    );
    assert_eq!(run(&mut db, "zcount z 1.0 2.00"), int(2), "zcount z 1.0 2.00");
    assert_eq!(run(&mut db, "zcount z +1 +2"), int(2), "zcount z +1 +2");
    assert_eq!(run(&mut db, "zcount z -inf (-inf"), int(0), "zcount z -inf (-inf");
    assert_eq!(run(&mut db, "zcount z +inf +inf"), int(0), "zcount z +inf +inf");
    assert_eq!(
        run(&mut db, "zrangebyscore z (-inf (+inf"),
        bulks(&["a", "b", "c", "d", "e", "new2", "new"]),
        "zrangebyscore z (-inf (+inf"
    );
    assert_eq!(
        run(&mut db, "zrangebyscore z -INF +Infinity"),
        bulks(&["a", "b", "c", "d", "e", "new2", "new"]),
        "zrangebyscore z -INF +Infinity"
    );
    assert_eq!(
        run(&mut db, "zremrangebyrank z -9223372036854775808 9223372036854775807"),
        int(7),
        "zremrangebyrank z -9223372036854775808 9223372036854775807"
    );
    assert_eq!(run(&mut db, "exists z"), int(0), "exists z");
    assert_eq!(run(&mut db, "zadd z 1 a"), int(1), "zadd z 1 a");
    assert_eq!(run(&mut db, "zinter 2 z nosuch"), Reply::Array(vec![]), "zinter 2 z nosuch");
    assert_eq!(run(&mut db, "zdiff 2 nosuch z"), Reply::Array(vec![]), "zdiff 2 nosuch z");
    assert_eq!(run(&mut db, "zunion 1 nosuch"), Reply::Array(vec![]), "zunion 1 nosuch");
    assert_eq!(run(&mut db, "zunionstore d 1 nosuch"), int(0), "zunionstore d 1 nosuch");
    assert_eq!(run(&mut db, "exists d"), int(0), "exists d");
    assert_eq!(run(&mut db, "zdiff 3 z z z withscores"), Reply::Array(vec![]), "zdiff 3 z z z withscores");
    assert_eq!(
        run(&mut db, "zinter 1 z aggregate min aggregate max withscores"),
        bulks(&["a", "1"]),
        "zinter 1 z aggregate min aggregate max withscores"
    );
    assert_eq!(
        run(&mut db, "zunion 1 z weights 1 weights 2 withscores"),
        bulks(&["a", "2"]),
        "zunion 1 z weights 1 weights 2 withscores"
    );
    assert_eq!(run(&mut db, "zadd z 2 b"), int(1), "zadd z 2 b");
    assert_eq!(
        run(&mut db, "zunion 1 z withscores aggregate max weights -1"),
        bulks(&["b", "-2", "a", "-1"]),
        "zunion 1 z withscores aggregate max weights -1"
    );
    assert_eq!(run(&mut db, "zpopmax z 0"), Reply::Array(vec![]), "zpopmax z 0");
    assert_eq!(
        run(&mut db, "zpopmax z 9223372036854775807"),
        bulks(&["b", "2", "a", "1"]),
        "zpopmax z 9223372036854775807"
    );
    assert_eq!(run(&mut db, "zadd z 1 a"), int(1), "zadd z 1 a");
    assert_eq!(
        run(&mut db, "zmpop 1 z max count 9223372036854775807"),
        Reply::Array(vec![bulk("z"), Reply::Array(vec![bulks(&["a", "1"])])]),
        "zmpop 1 z max count 9223372036854775807"
    );
    assert_eq!(run(&mut db, "zadd z 1 a"), int(1), "zadd z 1 a");
    assert_eq!(
        run(&mut db, "zmpop 9223372036854775807 z max"),
        err("ERR syntax error"),
        "zmpop 9223372036854775807 z max"
    );
    assert_eq!(run(&mut db, "zadd z 1 a 2 b 3 c"), int(2), "zadd z 1 a 2 b 3 c");
    assert_eq!(
        run(&mut db, "bzpopmin z 922337203685477"),
        bulks(&["z", "a", "1"]),
        "bzpopmin z 922337203685477"
    );
    assert_eq!(run(&mut db, "bzpopmin z 0x0.1p-10"), bulks(&["z", "b", "2"]), "bzpopmin z 0x0.1p-10");
    assert_eq!(
        run(&mut db, "bzmpop 0 1 z min count 1 count 1"),
        err("ERR syntax error"),
        "bzmpop 0 1 z min count 1 count 1"
    );
    assert_eq!(
        run(&mut db, "zscan z 0 count 9223372036854775807"),
        Reply::Array(vec![bulk("0"), bulks(&["c", "3"])]),
        "zscan z 0 count 9223372036854775807"
    );
    assert_eq!(
        run(&mut db, "zscan z 0 match * match a"),
        Reply::Array(vec![bulk("0"), Reply::Array(vec![])]),
        "zscan z 0 match * match a"
    );
    assert_eq!(run(&mut db, "zscan z +5"), Reply::Array(vec![bulk("0"), bulks(&["c", "3"])]), "zscan z +5");
    assert_eq!(run(&mut db, "zrangebylex z [a [a"), Reply::Array(vec![]), "zrangebylex z [a [a");
    assert_eq!(run(&mut db, "zrangebylex z (a [a"), Reply::Array(vec![]), "zrangebylex z (a [a");
    assert_eq!(run(&mut db, "zlexcount z [a (a"), int(0), "zlexcount z [a (a");
    assert_eq!(run(&mut db, "zrangebylex z - + limit 0 -1"), bulks(&["c"]), "zrangebylex z - + limit 0 -1");
    assert_eq!(run(&mut db, "zrandmember z 1 WITHSCORES"), bulks(&["c", "3"]), "zrandmember z 1 WITHSCORES");
    assert_eq!(
        run(&mut db, "zrandmember z -1 withscores"),
        bulks(&["c", "3"]),
        "zrandmember z -1 withscores"
    );
    assert_eq!(
        run(&mut db, "zrandmember z 9223372036854775807"),
        bulks(&["c"]),
        "zrandmember z 9223372036854775807"
    );
    assert_eq!(run(&mut db, "zincrby z 1e308 a"), bulk("1e+308"), "zincrby z 1e308 a");
    assert_eq!(run(&mut db, "zincrby z 1e308 a"), bulk("inf"), "zincrby z 1e308 a");
    assert_eq!(
        run(&mut db, "zincrby z -inf a"),
        err("ERR resulting score is not a number (NaN)"),
        "zincrby z -inf a"
    );
    assert_eq!(run(&mut db, "zscore z a"), bulk("inf"), "zscore z a");
    assert_eq!(
        run(&mut db, "zintercard 1 z limit 9223372036854775807"),
        int(2),
        "zintercard 1 z limit 9223372036854775807"
    );
    assert_eq!(run(&mut db, "zintercard 2 z z limit 1 limit 2"), int(2), "zintercard 2 z z limit 1 limit 2");
}

#[test]
fn library_limits() {
    let (mut db, _) = db();
    run(&mut db, "zadd z 1 a 2 b 3 c");
    // A negative ZRANDMEMBER count builds its whole reply in memory: the library caps it.
    assert_eq!(run(&mut db, "zrandmember z -16777217"), err("ERR value is out of range"));
    assert_eq!(strings(run(&mut db, "zrandmember z -1000")).len(), 1000);
}
