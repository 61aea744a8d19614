//! Set commands. Expected replies checked against redis-server 7.0.15 unless noted; member
//! order is compared as a set where Redis' order is its hash order.

mod common;
use std::collections::{BTreeSet, HashSet};

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

fn members(db: &mut Db<MemoryBackend>, key: &str) -> BTreeSet<String> {
    strings(run(db, &format!("SMEMBERS {key}"))).into_iter().collect()
}

fn set_of(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn sadd_srem_with_duplicates() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "SADD s a b a c"), int(3));
    assert_eq!(run(&mut db, "SADD s a d"), int(1));
    assert_eq!(run(&mut db, "SCARD s"), int(4));
    assert_eq!(run(&mut db, "SREM s a a z"), int(1));
    assert_eq!(run(&mut db, "SCARD s"), int(3));
    assert_eq!(run(&mut db, "SMEMBERS s"), bulks(&["b", "c", "d"]));
    assert_eq!(run(&mut db, "SISMEMBER s b"), int(1));
    assert_eq!(run(&mut db, "SISMEMBER s a"), int(0));
    assert_eq!(run(&mut db, "SISMEMBER nokey a"), int(0));
    assert_eq!(run(&mut db, "SMISMEMBER s b z"), Reply::Array(vec![int(1), int(0)]));
    assert_eq!(run(&mut db, "SMISMEMBER nokey b z"), Reply::Array(vec![int(0), int(0)]));
    assert_eq!(run(&mut db, "SMEMBERS nokey"), bulks(&[]));
    assert_eq!(run(&mut db, "SCARD nokey"), int(0));
    assert_eq!(run(&mut db, "SREM nokey a"), int(0));
    assert_eq!(run(&mut db, "SADD s"), err("ERR wrong number of arguments for 'sadd' command"));
    assert_eq!(run(&mut db, "SMISMEMBER s"), err("ERR wrong number of arguments for 'smismember' command"));
}

/// Past the sixteen members a linear search handles, repeated members count once.
#[test]
fn sadd_many_members_with_repeats() {
    let (mut db, _) = db();
    let members: String = (0..20).map(|i| format!(" m{i}")).collect();
    assert_eq!(run(&mut db, &format!("SADD s{members} m0 m5 m19")), int(20));
    assert_eq!(run(&mut db, "SCARD s"), int(20));
    let more: String = (10..30).map(|i| format!(" m{i}")).collect();
    assert_eq!(run(&mut db, &format!("SADD s{more} m29 m10")), int(10));
    assert_eq!(run(&mut db, "SCARD s"), int(30));
    assert_eq!(run(&mut db, "SADD s m1 m2 m1"), int(0));
}

#[test]
fn empty_set_disappears() {
    let (mut db, _) = db();
    run(&mut db, "SADD s a b");
    assert_eq!(run(&mut db, "SREM s a b"), int(2));
    assert_eq!(run(&mut db, "EXISTS s"), int(0));
    assert_eq!(run(&mut db, "TYPE s"), Reply::status("none"));
    assert_eq!(run(&mut db, "SADD s c"), int(1));
    assert_eq!(run(&mut db, "SMEMBERS s"), bulks(&["c"]));
    // SPOP of everything deletes the key.
    assert_eq!(run(&mut db, "SPOP s 5"), bulks(&["c"]));
    assert_eq!(run(&mut db, "EXISTS s"), int(0));
}

#[test]
fn spop_and_srandmember() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "SPOP nokey"), Reply::Nil);
    assert_eq!(run(&mut db, "SPOP nokey 3"), bulks(&[]));
    assert_eq!(run(&mut db, "SPOP nokey 0"), bulks(&[]));
    assert_eq!(run(&mut db, "SRANDMEMBER nokey"), Reply::Nil);
    assert_eq!(run(&mut db, "SRANDMEMBER nokey 3"), bulks(&[]));
    assert_eq!(run(&mut db, "SRANDMEMBER nokey -3"), bulks(&[]));
    run(&mut db, "SADD s a b c d e");
    assert_eq!(run(&mut db, "SPOP s 0"), bulks(&[]));
    assert_eq!(run(&mut db, "SRANDMEMBER s 0"), bulks(&[]));
    let all = set_of(&["a", "b", "c", "d", "e"]);
    let r = strings(run(&mut db, "SRANDMEMBER s 3"));
    assert_eq!(r.len(), 3);
    assert_eq!(r.iter().collect::<HashSet<_>>().len(), 3);
    assert!(r.iter().all(|m| all.contains(m)));
    assert_eq!(strings(run(&mut db, "SRANDMEMBER s 100")).into_iter().collect::<BTreeSet<_>>(), all);
    let rep = strings(run(&mut db, "SRANDMEMBER s -12"));
    assert_eq!(rep.len(), 12);
    assert!(rep.iter().all(|m| all.contains(m)));
    assert_eq!(run(&mut db, "SCARD s"), int(5));
    let popped = strings(run(&mut db, "SPOP s 2"));
    assert_eq!(popped.iter().collect::<HashSet<_>>().len(), 2);
    assert_eq!(run(&mut db, "SCARD s"), int(3));
    let left = members(&mut db, "s");
    for p in &popped {
        assert!(!left.contains(p) && all.contains(p));
    }
    let Reply::Bulk(one) = run(&mut db, "SPOP s") else { panic!() };
    assert!(left.contains(std::str::from_utf8(&one).unwrap()));
    assert_eq!(run(&mut db, "SCARD s"), int(2));
    // Errors (redis-server 7.0.15).
    assert_eq!(run(&mut db, "SPOP s -1"), err("ERR value is out of range, must be positive"));
    assert_eq!(run(&mut db, "SPOP s x"), err("ERR value is out of range, must be positive"));
    assert_eq!(run(&mut db, "SPOP s 1 2"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "SRANDMEMBER s x"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "SRANDMEMBER s 1 2"), err("ERR syntax error"));
    assert_eq!(
        run(&mut db, "SRANDMEMBER s -9223372036854775808"),
        err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    );
}

#[test]
fn random_picks_on_a_large_set_are_distinct_members() {
    let (mut db, _) = db();
    let mut argv = vec!["SADD".to_string(), "s".to_string()];
    argv.extend((0..5000).map(|i| format!("m{i}")));
    assert_eq!(db.run(&argv), int(5000));
    let picked = strings(run(&mut db, "SRANDMEMBER s 30"));
    assert_eq!(picked.iter().collect::<HashSet<_>>().len(), 30);
    let popped = strings(run(&mut db, "SPOP s 40"));
    assert_eq!(popped.iter().collect::<HashSet<_>>().len(), 40);
    assert_eq!(run(&mut db, "SCARD s"), int(4960));
    for p in &popped {
        assert!(p.starts_with('m'));
        assert_eq!(run(&mut db, &format!("SISMEMBER s {p}")), int(0));
    }
    assert_eq!(strings(run(&mut db, "SRANDMEMBER s -100")).len(), 100);
}

#[test]
fn huge_negative_count_is_refused_not_aborted() {
    // Redis 7.0 tries to build such a reply and runs out of memory; we refuse (documented).
    let (mut db, _) = db();
    run(&mut db, "SADD s a");
    assert_eq!(run(&mut db, "SRANDMEMBER s -9223372036854775807"), err("ERR value is out of range"));
    assert_eq!(run(&mut db, "SRANDMEMBER nokey -9223372036854775807"), bulks(&[]));
    run(&mut db, "HSET h a 1");
    assert_eq!(
        run(&mut db, "HRANDFIELD h -4611686018427387903 WITHVALUES"),
        err("ERR value is out of range")
    );
}

#[test]
fn set_algebra_past_one_probe_chunk() {
    let (mut db, _) = db();
    let mut a = vec!["SADD".to_string(), "a".to_string()];
    a.extend((0..400).map(|i| format!("m{i:03}")));
    let mut b = vec!["SADD".to_string(), "b".to_string()];
    b.extend((0..400).filter(|i| i % 3 == 0).map(|i| format!("m{i:03}")));
    db.run(&a);
    db.run(&b);
    let common: Vec<String> = (0..400).filter(|i| i % 3 == 0).map(|i| format!("m{i:03}")).collect();
    let rest: Vec<String> = (0..400).filter(|i| i % 3 != 0).map(|i| format!("m{i:03}")).collect();
    assert_eq!(strings(run(&mut db, "SINTER a b")), common);
    assert_eq!(strings(run(&mut db, "SINTER b a")), common);
    assert_eq!(run(&mut db, "SINTERCARD 2 a b"), int(134));
    assert_eq!(run(&mut db, "SINTERCARD 2 a b LIMIT 130"), int(130));
    assert_eq!(strings(run(&mut db, "SDIFF a b")), rest);
    assert_eq!(run(&mut db, "SDIFFSTORE d a b"), int(266));
    assert_eq!(run(&mut db, "SCARD d"), int(266));
}

#[test]
fn smove_cases() {
    let (mut db, _) = db();
    run(&mut db, "SADD one x y");
    assert_eq!(run(&mut db, "SMOVE one two x"), int(1));
    assert_eq!(run(&mut db, "SMEMBERS one"), bulks(&["y"]));
    assert_eq!(run(&mut db, "SMEMBERS two"), bulks(&["x"]));
    assert_eq!(run(&mut db, "SMOVE one two nope"), int(0));
    // Same set: membership only, nothing changes.
    assert_eq!(run(&mut db, "SMOVE two two x"), int(1));
    assert_eq!(run(&mut db, "SMOVE two two zz"), int(0));
    assert_eq!(run(&mut db, "SCARD two"), int(1));
    // Member already in the destination: source loses it, destination size unchanged.
    run(&mut db, "SADD two y");
    assert_eq!(run(&mut db, "SMOVE one two y"), int(1));
    assert_eq!(run(&mut db, "EXISTS one"), int(0));
    assert_eq!(run(&mut db, "SCARD two"), int(2));
    // Missing source: 0 even when the destination has another type (Redis 7.0).
    put_string(&mut db, "str");
    assert_eq!(run(&mut db, "SMOVE nokey str zz"), int(0));
    assert_eq!(run(&mut db, "SMOVE two str x"), wrongtype());
    assert_eq!(run(&mut db, "SMOVE two str zz"), wrongtype());
    assert_eq!(run(&mut db, "SMOVE str two x"), wrongtype());
    assert_eq!(run(&mut db, "SCARD two"), int(2));
}

#[test]
fn set_algebra() {
    let (mut db, _) = db();
    run(&mut db, "SADD s1 a b c");
    run(&mut db, "SADD s2 b c d");
    run(&mut db, "SADD s3 c d e");
    assert_eq!(run(&mut db, "SINTER s1 s2 s3"), bulks(&["c"]));
    assert_eq!(run(&mut db, "SINTER s1 s1"), bulks(&["a", "b", "c"]));
    assert_eq!(run(&mut db, "SINTER s1 nokey"), bulks(&[]));
    assert_eq!(
        strings(run(&mut db, "SUNION s1 s2 nokey")).into_iter().collect::<BTreeSet<_>>(),
        set_of(&["a", "b", "c", "d"])
    );
    assert_eq!(run(&mut db, "SDIFF s1 s2 s3"), bulks(&["a"]));
    assert_eq!(run(&mut db, "SDIFF s1 nokey"), bulks(&["a", "b", "c"]));
    assert_eq!(run(&mut db, "SDIFF s1 s1"), bulks(&[]));
    assert_eq!(run(&mut db, "SDIFF nokey s1"), bulks(&[]));
    assert_eq!(run(&mut db, "SINTERCARD 2 s1 s2"), int(2));
    assert_eq!(run(&mut db, "SINTERCARD 2 s1 s2 LIMIT 1"), int(1));
    assert_eq!(run(&mut db, "SINTERCARD 2 s1 s2 LIMIT 0"), int(2));
    assert_eq!(run(&mut db, "SINTERCARD 1 nokey"), int(0));
    assert_eq!(run(&mut db, "SDIFFSTORE dd s1 s2"), int(1));
    assert_eq!(run(&mut db, "SMEMBERS dd"), bulks(&["a"]));
    // Destination may be a source.
    assert_eq!(run(&mut db, "SUNIONSTORE s1 s1 s3"), int(5));
    assert_eq!(members(&mut db, "s1"), set_of(&["a", "b", "c", "d", "e"]));
    assert_eq!(run(&mut db, "SINTERSTORE i s1 s2"), int(3));
    assert_eq!(members(&mut db, "i"), set_of(&["b", "c", "d"]));
    assert_eq!(run(&mut db, "SCARD i"), int(3));
}

#[test]
fn store_replaces_any_type_and_empty_result_deletes() {
    let (mut db, _) = db();
    run(&mut db, "SADD s a b");
    run(&mut db, "SADD d x");
    assert_eq!(run(&mut db, "SINTERSTORE d s nokey"), int(0));
    assert_eq!(run(&mut db, "EXISTS d"), int(0));
    run(&mut db, "SADD d x y z");
    assert_eq!(run(&mut db, "SINTERSTORE d s"), int(2));
    assert_eq!(run(&mut db, "SMEMBERS d"), bulks(&["a", "b"]));
    // Overwrite a string and a hash.
    put_string(&mut db, "str");
    assert_eq!(run(&mut db, "SUNIONSTORE str s"), int(2));
    assert_eq!(run(&mut db, "TYPE str"), Reply::status("set"));
    run(&mut db, "HSET h f v");
    assert_eq!(run(&mut db, "SDIFFSTORE h s nokey"), int(2));
    assert_eq!(run(&mut db, "SMEMBERS h"), bulks(&["a", "b"]));
    assert_eq!(run(&mut db, "SDIFFSTORE h nokey"), int(0));
    assert_eq!(run(&mut db, "EXISTS h"), int(0));
    assert_eq!(run(&mut db, "SUNIONSTORE u nokey"), int(0));
    assert_eq!(run(&mut db, "EXISTS u"), int(0));
}

#[test]
fn sintercard_errors() {
    let (mut db, _) = db();
    run(&mut db, "SADD s1 a b c");
    run(&mut db, "SADD s2 b c d");
    put_string(&mut db, "str");
    assert_eq!(run(&mut db, "SINTERCARD 0 s1"), err("ERR numkeys should be greater than 0"));
    assert_eq!(run(&mut db, "SINTERCARD -1 s1"), err("ERR numkeys should be greater than 0"));
    assert_eq!(run(&mut db, "SINTERCARD x s1"), err("ERR numkeys should be greater than 0"));
    assert_eq!(
        run(&mut db, "SINTERCARD 3 s1 s2"),
        err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(run(&mut db, "SINTERCARD 2 s1 s2 LIMIT -1"), err("ERR LIMIT can't be negative"));
    assert_eq!(run(&mut db, "SINTERCARD 2 s1 s2 LIMIT x"), err("ERR LIMIT can't be negative"));
    assert_eq!(run(&mut db, "SINTERCARD 2 s1 s2 foo 1"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "SINTERCARD 2 s1 s2 LIMIT"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "SINTERCARD 1 s1 s2"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "SINTERCARD 2 s1 str"), wrongtype());
    assert_eq!(run(&mut db, "SINTERCARD 2 nokey str"), wrongtype());
}

#[test]
fn wrongtype_on_every_set_command() {
    let (mut db, _) = db();
    put_string(&mut db, "str");
    run(&mut db, "SADD s a");
    for line in [
        "SADD str a",
        "SREM str a",
        "SCARD str",
        "SISMEMBER str a",
        "SMISMEMBER str a",
        "SMEMBERS str",
        "SPOP str",
        "SPOP str 0",
        "SPOP str 2",
        "SRANDMEMBER str",
        "SRANDMEMBER str 0",
        "SRANDMEMBER str -2",
        "SMOVE str s a",
        "SMOVE s str a",
        "SINTER s str",
        "SINTER nokey str",
        "SINTERCARD 1 str",
        "SINTERSTORE d nokey str",
        "SUNION nokey str",
        "SUNIONSTORE d s str",
        "SDIFF s str",
        "SDIFF nokey str",
        "SDIFFSTORE d s str",
        "SSCAN str 0",
    ] {
        assert_eq!(run(&mut db, line), wrongtype(), "{line}");
    }
    assert_eq!(run(&mut db, "EXISTS d"), int(0));
    assert_eq!(run(&mut db, "SCARD s"), int(1));
}

#[test]
fn sscan_pages_and_errors() {
    let (mut db, _) = db();
    let mut argv = vec!["SADD".to_string(), "s".to_string()];
    argv.extend((0..23).map(|i| format!("m{i:02}")));
    db.run(&argv);
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    loop {
        let Reply::Array(parts) = run(&mut db, &format!("SSCAN s {cursor} COUNT 5")) else { panic!() };
        let Reply::Bulk(next) = &parts[0] else { panic!() };
        seen.extend(strings(parts[1].clone()));
        cursor = String::from_utf8(next.to_vec()).unwrap();
        if cursor == "0" {
            break;
        }
        // Removing an already-returned member does not disturb the walk.
        run(&mut db, &format!("SREM s {}", seen[0]));
    }
    assert_eq!(seen, (0..23).map(|i| format!("m{i:02}")).collect::<Vec<_>>());
    assert_eq!(
        run(&mut db, "SSCAN s 0 MATCH m2* COUNT 100"),
        Reply::Array(vec![bulk("0"), bulks(&["m20", "m21", "m22"])])
    );
    assert_eq!(run(&mut db, "SSCAN nokey 0"), Reply::Array(vec![bulk("0"), bulks(&[])]));
    assert_eq!(run(&mut db, "SSCAN s x"), err("ERR invalid cursor"));
    assert_eq!(run(&mut db, "SSCAN s 0 COUNT 0"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "SSCAN s 0 COUNT x"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "SSCAN s 0 MATCH"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "SSCAN s 0 foo 1"), err("ERR syntax error"));
}

#[test]
fn blind_write_sets() {
    let (mut db, _) = db();
    db.set_blind_write(true);
    assert_eq!(run(&mut db, "SADD s a b a"), int(3));
    assert_eq!(run(&mut db, "SADD s a"), int(1));
    assert_eq!(run(&mut db, "SCARD s"), int(2));
    assert_eq!(run(&mut db, "SMEMBERS s"), bulks(&["a", "b"]));
    assert_eq!(run(&mut db, "SREM s a nosuch"), int(2));
    assert_eq!(run(&mut db, "SCARD s"), int(1));
    let raw = db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(b"s")).unwrap().unwrap();
    let meta = Metadata::decode(&raw).unwrap();
    assert!(meta.blind_write);
    assert_eq!(meta.size, 0);
    // SMOVE is exact in both modes.
    assert_eq!(run(&mut db, "SMOVE s t zz"), int(0));
    assert_eq!(run(&mut db, "SMOVE s t b"), int(1));
    assert_eq!(run(&mut db, "SCARD t"), int(1));
    // The emptied source still exists (documented): blind collections live while their
    // metadata does.
    assert_eq!(run(&mut db, "SCARD s"), int(0));
    assert_eq!(run(&mut db, "EXISTS s"), int(1));
    assert_eq!(run(&mut db, "SPOP s"), Reply::Nil);
    assert_eq!(run(&mut db, "DEL s"), int(1));
    assert_eq!(run(&mut db, "EXISTS s"), int(0));
    run(&mut db, "SADD u a b c");
    assert_eq!(strings(run(&mut db, "SPOP u 2")).len(), 2);
    assert_eq!(run(&mut db, "SCARD u"), int(1));
    assert_eq!(run(&mut db, "SINTERSTORE v u t"), int(0));
    assert_eq!(run(&mut db, "SUNIONSTORE v u t"), int(2));
    assert_eq!(run(&mut db, "SCARD v"), int(2));
}
