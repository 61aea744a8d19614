//! The list commands, one test group per command. Expected replies and error texts come
//! from redis-server 7.0.15 (queried over RESP, so nil bulk `$-1` and nil array `*-1` are
//! told apart) or from reasoning about Redis' semantics.

mod common;
use bytes::Bytes;
use common::*;
use rediskv::{ColumnFamily, LIST_INITIAL_INDEX, Metadata, RedisType};
use rediskv::{Db, Reply};
use rediskv::{KvBackend, MemoryBackend, WriteBatch};

/// Makes `key` a string holding `v` by writing its metadata record directly.
fn set_string(db: &mut Db<MemoryBackend>, key: &str, v: &str) {
    let mut batch = WriteBatch::new();
    batch.put(
        ColumnFamily::Metadata,
        db.layout().metadata_key(key.as_bytes()),
        Metadata::string(v.as_bytes(), 0).to_vec(),
    );
    db.backend_mut().write(batch).unwrap();
}

fn meta(db: &Db<MemoryBackend>, key: &str) -> Option<Metadata<'static>> {
    let raw = db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(key.as_bytes())).unwrap()?;
    let m = Metadata::decode(&raw).unwrap();
    Some(Metadata { value: &[], ..m })
}

fn put_meta(db: &mut Db<MemoryBackend>, key: &str, m: &Metadata<'_>) {
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(key.as_bytes()), m.to_vec());
    db.backend_mut().write(batch).unwrap();
}

/// Number of subkey records under the key's live version.
fn live_subkeys(db: &Db<MemoryBackend>, key: &str) -> usize {
    let Some(m) = meta(db, key) else { return 0 };
    let range = db.layout().subkey_range(key.as_bytes(), m.version).unwrap();
    db.backend().scan(ColumnFamily::Subkey, &range, rediskv::Direction::Forward).unwrap().count()
}

fn ints(items: &[i64]) -> Reply {
    Reply::Array(items.iter().map(|&n| int(n)).collect())
}

fn all(db: &mut Db<MemoryBackend>, key: &str) -> Reply {
    run(db, &format!("LRANGE {key} 0 -1"))
}

const RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";

#[test]
fn push_and_len() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "LPUSH l a b c"), int(3));
    assert_eq!(all(&mut db, "l"), bulks(&["c", "b", "a"]));
    assert_eq!(run(&mut db, "RPUSH l x y"), int(5));
    assert_eq!(all(&mut db, "l"), bulks(&["c", "b", "a", "x", "y"]));
    assert_eq!(run(&mut db, "LLEN l"), int(5));
    assert_eq!(run(&mut db, "LLEN nokey"), int(0));
    let m = meta(&db, "l").unwrap();
    assert_eq!((m.head, m.tail, m.size), (LIST_INITIAL_INDEX - 3, LIST_INITIAL_INDEX + 2, 5));
    assert_eq!(live_subkeys(&db, "l"), 5);
    // Duplicates in one command are separate elements.
    assert_eq!(run(&mut db, "RPUSH d a a a"), int(3));
    assert_eq!(all(&mut db, "d"), bulks(&["a", "a", "a"]));
}

#[test]
fn pushx_only_on_existing() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "LPUSHX l a"), int(0));
    assert_eq!(run(&mut db, "RPUSHX l a"), int(0));
    assert_eq!(run(&mut db, "EXISTS l"), int(0));
    run(&mut db, "RPUSH l m");
    assert_eq!(run(&mut db, "LPUSHX l a b"), int(3));
    assert_eq!(run(&mut db, "RPUSHX l z"), int(4));
    assert_eq!(all(&mut db, "l"), bulks(&["b", "a", "m", "z"]));
}

#[test]
fn wrongtype_everywhere() {
    let (mut db, _) = db();
    set_string(&mut db, "s", "v");
    run(&mut db, "RPUSH l a b");
    for line in [
        "LPUSH s a",
        "RPUSH s a",
        "LPUSHX s a",
        "RPUSHX s a",
        "LPOP s",
        "RPOP s 0",
        "LLEN s",
        "LINDEX s 0",
        "LINDEX s x",
        "LRANGE s 0 1",
        "LSET s 0 a",
        "LSET s x a",
        "LREM s 0 a",
        "LINSERT s BEFORE a b",
        "LTRIM s 0 1",
        "LPOS s a",
        "LMOVE s l LEFT LEFT",
        "LMOVE l s LEFT LEFT",
        "RPOPLPUSH s l",
        "RPOPLPUSH l s",
        "LMPOP 1 s LEFT",
        "LMPOP 2 s l LEFT",
        "BLPOP s 0",
        "BLPOP nokey s 0",
        "BLMOVE s x LEFT LEFT 0",
    ] {
        assert_eq!(run(&mut db, line), wrongtype(), "{line}");
    }
    // Nothing was written: l is intact, s still a string.
    assert_eq!(all(&mut db, "l"), bulks(&["a", "b"]));
    assert_eq!(meta(&db, "s").unwrap().ty, RedisType::String);
    // The first non-empty list wins before a later wrong type is seen.
    assert_eq!(run(&mut db, "LMPOP 2 l s LEFT"), Reply::Array(vec![bulk("l"), bulks(&["a"])]));
    assert_eq!(run(&mut db, "BLPOP l s 0"), bulks(&["l", "b"]));
}

#[test]
fn pop_with_and_without_count() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "LPOP nokey"), Reply::Nil);
    assert_eq!(run(&mut db, "LPOP nokey 0"), Reply::NilArray);
    assert_eq!(run(&mut db, "RPOP nokey 1"), Reply::NilArray);
    run(&mut db, "RPUSH l a b c d e");
    assert_eq!(run(&mut db, "LPOP l 0"), Reply::Array(vec![]));
    assert_eq!(run(&mut db, "LPOP l"), bulk("a"));
    assert_eq!(run(&mut db, "RPOP l"), bulk("e"));
    assert_eq!(run(&mut db, "LPOP l 1"), bulks(&["b"]));
    assert_eq!(live_subkeys(&db, "l"), 2);
    assert_eq!(run(&mut db, "RPOP l 10"), bulks(&["d", "c"]));
    assert_eq!(run(&mut db, "EXISTS l"), int(0));
    assert_eq!(meta(&db, "l"), None);
    run(&mut db, "RPUSH l a");
    for bad in ["-1", "abc", "-0", "9223372036854775808"] {
        assert_eq!(
            run(&mut db, &format!("LPOP l {bad}")),
            err("ERR value is out of range, must be positive")
        );
    }
    assert_eq!(run(&mut db, "LPOP l 1 2"), err("ERR wrong number of arguments for 'lpop' command"));
    assert_eq!(run(&mut db, "LPOP l 9223372036854775807"), bulks(&["a"]));
}

#[test]
fn lindex_positions() {
    let (mut db, _) = db();
    run(&mut db, "RPUSH l a b c");
    assert_eq!(run(&mut db, "LINDEX l 0"), bulk("a"));
    assert_eq!(run(&mut db, "LINDEX l 2"), bulk("c"));
    assert_eq!(run(&mut db, "LINDEX l -1"), bulk("c"));
    assert_eq!(run(&mut db, "LINDEX l -3"), bulk("a"));
    assert_eq!(run(&mut db, "LINDEX l -4"), Reply::Nil);
    assert_eq!(run(&mut db, "LINDEX l 3"), Reply::Nil);
    assert_eq!(run(&mut db, "LINDEX l -9223372036854775808"), Reply::Nil);
    assert_eq!(run(&mut db, "LINDEX l 9223372036854775807"), Reply::Nil);
    assert_eq!(run(&mut db, "LINDEX l x"), err("ERR value is not an integer or out of range"));
    // Redis looks the key up before parsing the index.
    assert_eq!(run(&mut db, "LINDEX nokey x"), Reply::Nil);
}

#[test]
fn lrange_bounds() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "LRANGE nokey 0 -1"), Reply::Array(vec![]));
    assert_eq!(run(&mut db, "LRANGE nokey x 1"), err("ERR value is not an integer or out of range"));
    run(&mut db, "RPUSH l a b c d e");
    assert_eq!(run(&mut db, "LRANGE l 1 3"), bulks(&["b", "c", "d"]));
    assert_eq!(run(&mut db, "LRANGE l -2 -1"), bulks(&["d", "e"]));
    assert_eq!(run(&mut db, "LRANGE l -100 100"), bulks(&["a", "b", "c", "d", "e"]));
    assert_eq!(run(&mut db, "LRANGE l 3 1"), Reply::Array(vec![]));
    assert_eq!(run(&mut db, "LRANGE l 5 10"), Reply::Array(vec![]));
    assert_eq!(run(&mut db, "LRANGE l 0 0"), bulks(&["a"]));
    assert_eq!(
        run(&mut db, "LRANGE l -9223372036854775808 9223372036854775807"),
        bulks(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(run(&mut db, "LRANGE l 0 -9223372036854775808"), Reply::Array(vec![]));
}

#[test]
fn lset_cases() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "LSET nokey 0 a"), err("ERR no such key"));
    assert_eq!(run(&mut db, "LSET nokey x a"), err("ERR no such key"));
    run(&mut db, "RPUSH l a b c");
    assert_eq!(run(&mut db, "LSET l 1 B"), Reply::OK);
    assert_eq!(run(&mut db, "LSET l -1 C"), Reply::OK);
    assert_eq!(run(&mut db, "LSET l -3 A"), Reply::OK);
    assert_eq!(all(&mut db, "l"), bulks(&["A", "B", "C"]));
    assert_eq!(run(&mut db, "LSET l 3 a"), err("ERR index out of range"));
    assert_eq!(run(&mut db, "LSET l -4 a"), err("ERR index out of range"));
    assert_eq!(run(&mut db, "LSET l -9223372036854775808 a"), err("ERR index out of range"));
    assert_eq!(run(&mut db, "LSET l x a"), err("ERR value is not an integer or out of range"));
    assert_eq!(live_subkeys(&db, "l"), 3);
}

#[test]
fn lrem_every_position_and_direction() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "LREM nokey 0 a"), int(0));
    assert_eq!(run(&mut db, "LREM nokey x a"), err("ERR value is not an integer or out of range"));
    // From the tail (Redis 7.0: RPUSH a b c a b c a; LREM -2 a -> a b c b c).
    run(&mut db, "RPUSH l a b c a b c a");
    assert_eq!(run(&mut db, "LREM l -2 a"), int(2));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "b", "c", "b", "c"]));
    assert_eq!(run(&mut db, "LREM l 0 zz"), int(0));
    // From the head, limited.
    assert_eq!(run(&mut db, "LREM l 1 b"), int(1));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "c", "b", "c"]));
    // All occurrences.
    assert_eq!(run(&mut db, "LREM l 0 c"), int(2));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "b"]));
    assert_eq!(live_subkeys(&db, "l"), 2);
    // Removing everything deletes the key.
    assert_eq!(run(&mut db, "LREM l 0 a"), int(1));
    assert_eq!(run(&mut db, "LREM l 5 b"), int(1));
    assert_eq!(run(&mut db, "EXISTS l"), int(0));

    // Every single position of a 7-element list, both directions of count.
    for count in [1i64, -1, 0] {
        for pos in 0..7 {
            let (mut db, _) = common::db();
            let mut items: Vec<String> = (0..7).map(|i| format!("e{i}")).collect();
            run(&mut db, &format!("RPUSH l {}", items.join(" ")));
            assert_eq!(run(&mut db, &format!("LREM l {count} e{pos}")), int(1));
            items.remove(pos);
            let want: Vec<&str> = items.iter().map(String::as_str).collect();
            assert_eq!(all(&mut db, "l"), bulks(&want), "count {count} pos {pos}");
            assert_eq!(live_subkeys(&db, "l"), 6);
        }
    }
}

#[test]
fn lrem_repeated_elements() {
    let (mut db, _) = db();
    run(&mut db, "RPUSH l x a x x b x c x");
    assert_eq!(run(&mut db, "LREM l 2 x"), int(2));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "x", "b", "x", "c", "x"]));
    assert_eq!(run(&mut db, "LREM l -2 x"), int(2));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "x", "b", "c"]));
    assert_eq!(run(&mut db, "LREM l -9223372036854775808 x"), int(1));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "b", "c"]));
    assert_eq!(live_subkeys(&db, "l"), 3);
    run(&mut db, "RPUSH m q q q q");
    assert_eq!(run(&mut db, "LREM m 3 q"), int(3));
    assert_eq!(all(&mut db, "m"), bulks(&["q"]));
    assert_eq!(live_subkeys(&db, "m"), 1);
}

#[test]
fn linsert_every_position() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "LINSERT nokey BEFORE a b"), int(0));
    assert_eq!(run(&mut db, "EXISTS nokey"), int(0));
    assert_eq!(run(&mut db, "LINSERT nokey MIDDLE a b"), err("ERR syntax error"));
    // Redis 7.0: a b c b c + LINSERT after c X, before c Y -> a b Y c X b c.
    run(&mut db, "RPUSH l a b c b c");
    assert_eq!(run(&mut db, "LINSERT l after c X"), int(6));
    assert_eq!(run(&mut db, "LINSERT l before c Y"), int(7));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "b", "Y", "c", "X", "b", "c"]));
    assert_eq!(run(&mut db, "LINSERT l BEFORE zz x"), int(-1));
    for before in [true, false] {
        for pos in 0..6 {
            let (mut db, _) = common::db();
            let mut items: Vec<String> = (0..6).map(|i| format!("e{i}")).collect();
            run(&mut db, &format!("RPUSH l {}", items.join(" ")));
            let word = if before { "BEFORE" } else { "AFTER" };
            assert_eq!(run(&mut db, &format!("LINSERT l {word} e{pos} new")), int(7));
            items.insert(if before { pos } else { pos + 1 }, "new".into());
            let want: Vec<&str> = items.iter().map(String::as_str).collect();
            assert_eq!(all(&mut db, "l"), bulks(&want), "{word} {pos}");
            assert_eq!(live_subkeys(&db, "l"), 7);
            assert_eq!(run(&mut db, "LINDEX l -1"), bulk(want[6]));
        }
    }
}

#[test]
fn ltrim_cases() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "LTRIM nokey 0 1"), Reply::OK);
    assert_eq!(run(&mut db, "LTRIM nokey x 1"), err("ERR value is not an integer or out of range"));
    run(&mut db, "RPUSH l a b c d e");
    assert_eq!(run(&mut db, "LTRIM l 1 -2"), Reply::OK);
    assert_eq!(all(&mut db, "l"), bulks(&["b", "c", "d"]));
    assert_eq!(live_subkeys(&db, "l"), 3);
    assert_eq!(run(&mut db, "LTRIM l -9223372036854775808 9223372036854775807"), Reply::OK);
    assert_eq!(all(&mut db, "l"), bulks(&["b", "c", "d"]));
    assert_eq!(run(&mut db, "LTRIM l 2 2"), Reply::OK);
    assert_eq!(all(&mut db, "l"), bulks(&["d"]));
    assert_eq!(live_subkeys(&db, "l"), 1);
    // Emptying deletes the key by its metadata alone.
    let version = meta(&db, "l").unwrap().version;
    assert_eq!(run(&mut db, "LTRIM l 1 -9223372036854775808"), Reply::OK);
    assert_eq!(run(&mut db, "EXISTS l"), int(0));
    assert_eq!(meta(&db, "l"), None);
    // The trimmed element's record is left for lazy deletion, under the dead version.
    let range = db.layout().subkey_range(b"l", version).unwrap();
    let left = db.backend().scan(ColumnFamily::Subkey, &range, rediskv::Direction::Forward).unwrap().count();
    assert_eq!(left, 1);
    // Pushing again starts a fresh version with fresh indices.
    assert_eq!(run(&mut db, "RPUSH l z"), int(1));
    let m = meta(&db, "l").unwrap();
    assert!(m.version > version);
    assert_eq!((m.head, m.tail), (LIST_INITIAL_INDEX, LIST_INITIAL_INDEX + 1));
    assert_eq!(all(&mut db, "l"), bulks(&["z"]));
}

#[test]
fn lpos_options() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "LPOS nokey a"), Reply::Nil);
    assert_eq!(run(&mut db, "LPOS nokey a COUNT 0"), Reply::Array(vec![]));
    assert_eq!(run(&mut db, "LPOS nokey a RANK 0"), err(RANK_ZERO));
    run(&mut db, "RPUSH l a b c a b c a");
    // Texts and values from redis-server 7.0.15.
    assert_eq!(run(&mut db, "LPOS l a"), int(0));
    assert_eq!(run(&mut db, "LPOS l zz"), Reply::Nil);
    assert_eq!(run(&mut db, "LPOS l zz COUNT 0"), Reply::Array(vec![]));
    assert_eq!(run(&mut db, "LPOS l a RANK 1 RANK 2"), int(3));
    assert_eq!(run(&mut db, "LPOS l a RANK 2 RANK 1"), int(0));
    assert_eq!(run(&mut db, "LPOS l c MAXLEN 2"), Reply::Nil);
    assert_eq!(run(&mut db, "LPOS l c MAXLEN 3"), int(2));
    assert_eq!(run(&mut db, "LPOS l a RANK -1 MAXLEN 1"), int(6));
    assert_eq!(run(&mut db, "LPOS l a RANK -2 MAXLEN 4"), int(3));
    assert_eq!(run(&mut db, "LPOS l a COUNT 2 RANK 2"), ints(&[3, 6]));
    assert_eq!(run(&mut db, "LPOS l a COUNT 0 RANK -1"), ints(&[6, 3, 0]));
    assert_eq!(run(&mut db, "LPOS l a COUNT 5 MAXLEN 4"), ints(&[0, 3]));
    assert_eq!(run(&mut db, "LPOS l a RANK 9"), Reply::Nil);
    assert_eq!(run(&mut db, "LPOS l a RANK 9 COUNT 0"), Reply::Array(vec![]));
    assert_eq!(run(&mut db, "LPOS l a count 1"), ints(&[0]));
    assert_eq!(run(&mut db, "LPOS l a RANK -9223372036854775808"), int(6));
    assert_eq!(run(&mut db, "LPOS l a RANK -9223372036854775808 COUNT 0"), ints(&[6, 3, 0]));
    // Redis 7.0.15 ignores COUNT with this rank (its arithmetic overflows); MAXLEN holds.
    assert_eq!(run(&mut db, "LPOS l a COUNT 1 RANK -9223372036854775808"), ints(&[6, 3, 0]));
    assert_eq!(run(&mut db, "LPOS l a COUNT 1 RANK -9223372036854775808 MAXLEN 4"), ints(&[6, 3]));
    assert_eq!(run(&mut db, "LPOS l a RANK 0"), err(RANK_ZERO));
    assert_eq!(run(&mut db, "LPOS l a COUNT -1"), err("ERR COUNT can't be negative"));
    assert_eq!(run(&mut db, "LPOS l a COUNT x"), err("ERR COUNT can't be negative"));
    assert_eq!(run(&mut db, "LPOS l a COUNT 9223372036854775808"), err("ERR COUNT can't be negative"));
    assert_eq!(run(&mut db, "LPOS l a MAXLEN -1"), err("ERR MAXLEN can't be negative"));
    assert_eq!(run(&mut db, "LPOS l a MAXLEN x"), err("ERR MAXLEN can't be negative"));
    assert_eq!(run(&mut db, "LPOS l a RANK x"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "LPOS l a FOO 1"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "LPOS l a RANK"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "LPOS l a COUNT"), err("ERR syntax error"));
}

#[test]
fn lmove_between_keys_and_rotation() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "LMOVE nokey x LEFT LEFT"), Reply::Nil);
    assert_eq!(run(&mut db, "RPOPLPUSH nokey x"), Reply::Nil);
    assert_eq!(run(&mut db, "LMOVE l l2 UP LEFT"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "LMOVE nokey l2 LEFT up"), err("ERR syntax error"));
    // A missing source never looks at the destination (Redis: nil, not WRONGTYPE).
    set_string(&mut db, "s", "v");
    assert_eq!(run(&mut db, "LMOVE nokey s LEFT LEFT"), Reply::Nil);
    run(&mut db, "RPUSH l a b c");
    // Rotation on one key, as redis-server 7.0.15 does it.
    assert_eq!(run(&mut db, "LMOVE l l RIGHT LEFT"), bulk("c"));
    assert_eq!(all(&mut db, "l"), bulks(&["c", "a", "b"]));
    assert_eq!(run(&mut db, "LMOVE l l LEFT RIGHT"), bulk("c"));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "b", "c"]));
    assert_eq!(run(&mut db, "LMOVE l l LEFT LEFT"), bulk("a"));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "b", "c"]));
    assert_eq!(run(&mut db, "LMOVE l l right right"), bulk("c"));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "b", "c"]));
    assert_eq!(run(&mut db, "RPOPLPUSH l l"), bulk("c"));
    assert_eq!(all(&mut db, "l"), bulks(&["c", "a", "b"]));
    assert_eq!(live_subkeys(&db, "l"), 3);
    // Single element onto itself.
    run(&mut db, "RPUSH one x");
    assert_eq!(run(&mut db, "LMOVE one one LEFT RIGHT"), bulk("x"));
    assert_eq!(all(&mut db, "one"), bulks(&["x"]));
    assert_eq!(live_subkeys(&db, "one"), 1);
    // Between keys; the source disappears when emptied.
    assert_eq!(run(&mut db, "LMOVE l d LEFT RIGHT"), bulk("c"));
    assert_eq!(run(&mut db, "RPOPLPUSH l d"), bulk("b"));
    assert_eq!(run(&mut db, "LMOVE l d RIGHT RIGHT"), bulk("a"));
    assert_eq!(all(&mut db, "d"), bulks(&["b", "c", "a"]));
    assert_eq!(run(&mut db, "EXISTS l"), int(0));
    // WRONGTYPE destination writes nothing.
    let before = db.backend().len(ColumnFamily::Subkey);
    assert_eq!(run(&mut db, "LMOVE d s LEFT LEFT"), wrongtype());
    assert_eq!(run(&mut db, "RPOPLPUSH d s"), wrongtype());
    assert_eq!(db.backend().len(ColumnFamily::Subkey), before);
    assert_eq!(all(&mut db, "d"), bulks(&["b", "c", "a"]));
}

#[test]
fn lmpop_parsing_and_results() {
    let (mut db, _) = db();
    for (line, want) in [
        ("LMPOP 0 l LEFT", "ERR numkeys should be greater than 0"),
        ("LMPOP -1 l LEFT", "ERR numkeys should be greater than 0"),
        ("LMPOP x l LEFT", "ERR numkeys should be greater than 0"),
        ("LMPOP 9223372036854775808 l LEFT", "ERR numkeys should be greater than 0"),
        ("LMPOP 1 l LEFT COUNT 0", "ERR count should be greater than 0"),
        ("LMPOP 1 l LEFT COUNT -1", "ERR count should be greater than 0"),
        ("LMPOP 1 l LEFT COUNT x", "ERR count should be greater than 0"),
        ("LMPOP 1 l LEFT COUNT 9223372036854775808", "ERR count should be greater than 0"),
        ("LMPOP 1 l LEFT COUNT 0 COUNT 1", "ERR count should be greater than 0"),
        ("LMPOP 1 l LEFT COUNT 1 COUNT 0", "ERR syntax error"),
        ("LMPOP 2 l LEFT", "ERR syntax error"),
        ("LMPOP 3 l LEFT", "ERR syntax error"),
        ("LMPOP 9223372036854775807 l LEFT", "ERR syntax error"),
        ("LMPOP 1 l UP", "ERR syntax error"),
        ("LMPOP 1 l LEFT COUNT", "ERR syntax error"),
        ("LMPOP 1 l LEFT FOO", "ERR syntax error"),
        ("LMPOP 1", "ERR wrong number of arguments for 'lmpop' command"),
    ] {
        assert_eq!(run(&mut db, line), err(want), "{line}");
    }
    assert_eq!(run(&mut db, "LMPOP 1 nokey LEFT"), Reply::NilArray);
    run(&mut db, "RPUSH l a b c");
    assert_eq!(
        run(&mut db, "LMPOP 2 nokey l RIGHT COUNT 2"),
        Reply::Array(vec![bulk("l"), bulks(&["c", "b"])])
    );
    assert_eq!(
        run(&mut db, "LMPOP 1 l left count 9223372036854775807"),
        Reply::Array(vec![bulk("l"), bulks(&["a"])])
    );
    assert_eq!(run(&mut db, "EXISTS l"), int(0));
}

#[test]
fn blocking_forms_behave_as_in_multi() {
    let (mut db, _) = db();
    // Replies from redis-server 7.0.15 inside MULTI/EXEC.
    assert_eq!(run(&mut db, "BLPOP nokey 0"), Reply::NilArray);
    assert_eq!(run(&mut db, "BRPOP nokey other 0"), Reply::NilArray);
    assert_eq!(run(&mut db, "BLMOVE nokey x LEFT LEFT 0"), Reply::Nil);
    assert_eq!(run(&mut db, "BRPOPLPUSH nokey x 0"), Reply::Nil);
    assert_eq!(run(&mut db, "BLMPOP 0 1 nokey LEFT"), Reply::NilArray);
    run(&mut db, "RPUSH l a b c d");
    assert_eq!(run(&mut db, "BLPOP nokey l 0"), bulks(&["l", "a"]));
    assert_eq!(run(&mut db, "BRPOP l 1.5"), bulks(&["l", "d"]));
    assert_eq!(run(&mut db, "BLMOVE l m RIGHT LEFT 0"), bulk("c"));
    assert_eq!(run(&mut db, "BRPOPLPUSH m l 0"), bulk("c"));
    assert_eq!(all(&mut db, "l"), bulks(&["c", "b"]));
    assert_eq!(run(&mut db, "BLMPOP 0 1 l LEFT COUNT 5"), Reply::Array(vec![bulk("l"), bulks(&["c", "b"])]));
    // Argument errors, in Redis' order (redis-server 7.0.15: numkeys, the end and COUNT
    // before the timeout).
    assert_eq!(run(&mut db, "BLMPOP -1 0 nokey LEFT"), err("ERR numkeys should be greater than 0"));
    assert_eq!(run(&mut db, "BLMPOP -1 1 nokey UP"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "BLMPOP -1 1 nokey LEFT"), err("ERR timeout is negative"));
    assert_eq!(run(&mut db, "BLMPOP x 1 nokey LEFT"), err("ERR timeout is not a float or out of range"));
    assert_eq!(run(&mut db, "BLMPOP 0 0 nokey LEFT"), err("ERR numkeys should be greater than 0"));
    assert_eq!(run(&mut db, "BLMPOP 0 1 nokey UP"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "BLMOVE nokey x UP LEFT -1"), err("ERR syntax error"));
    assert_eq!(run(&mut db, "BRPOPLPUSH nokey x -1"), err("ERR timeout is negative"));
}

#[test]
fn timeout_validation_matches_redis() {
    let (mut db, _) = db();
    // Each verdict from redis-server 7.0.15 (BLPOP nokey <timeout> inside MULTI).
    let ok = [
        "0",
        "1",
        "0x10",
        "-0",
        "1e-400",
        "-1e-400",
        "9223372036854775",
        "0.0001",
        "-0.0001",
        "-0.001",
        "-0.0009",
        "0.001",
        "+1",
        "1.",
        ".5",
        "0x1p3",
        "0X1.8P1",
        "9223372036854775.807",
    ];
    let negative = [
        "-1",
        "inf",
        "+inf",
        "INF",
        "infinity",
        "1e400",
        "1e4000",
        "-1e4000",
        "1e20",
        "9223372036854776",
        "-0x1p3",
    ];
    let not_float = [
        "abc",
        "nan",
        "NaN",
        "1e5000",
        "1e-5000",
        " 1",
        "1 ",
        "",
        "1e",
        "0x",
        "1e-4951",
        "1.8e-4951",
        "1.2e4932",
    ];
    for t in ok {
        assert_eq!(db.run(&["BLPOP", "nokey", t]), Reply::NilArray, "{t:?}");
    }
    for t in negative {
        assert_eq!(db.run(&["BLPOP", "nokey", t]), err("ERR timeout is negative"), "{t:?}");
    }
    for t in not_float {
        assert_eq!(
            db.run(&["BLPOP", "nokey", t]),
            err("ERR timeout is not a float or out of range"),
            "{t:?}"
        );
    }
    // Probed on redis-server 7.0.15 inside MULTI: Redis rounds the milliseconds up (ceill).
    assert_eq!(db.run(&["BLPOP", "nokey", "9223372036854775.807"]), Reply::NilArray);
    assert_eq!(db.run(&["BLPOP", "nokey", "-0.0011"]), err("ERR timeout is negative"));
    assert_eq!(
        db.run(&["BLPOP", "nokey", "9223372036854775.808"]),
        err("ERR timeout is negative"),
        "the first value whose milliseconds leave i64"
    );
}

#[test]
fn expired_list_restarts_fresh() {
    let (mut db, clock) = db();
    run(&mut db, "RPUSH l a b c");
    let mut m = meta(&db, "l").unwrap();
    let old_version = m.version;
    m.expire_ms = T0_MS + 1000;
    put_meta(&mut db, "l", &m);
    assert_eq!(run(&mut db, "LLEN l"), int(3));
    clock.advance_ms(2000);
    assert_eq!(run(&mut db, "LLEN l"), int(0));
    assert_eq!(run(&mut db, "LPOP l"), Reply::Nil);
    assert_eq!(run(&mut db, "LPUSHX l z"), int(0));
    assert_eq!(run(&mut db, "LSET l 0 z"), err("ERR no such key"));
    assert_eq!(run(&mut db, "LPUSH l z"), int(1));
    let m = meta(&db, "l").unwrap();
    assert!(m.version > old_version);
    assert_eq!(m.expire_ms, 0);
    assert_eq!((m.head, m.tail), (LIST_INITIAL_INDEX - 1, LIST_INITIAL_INDEX));
    assert_eq!(all(&mut db, "l"), bulks(&["z"]));
    // After DEL too.
    let v = m.version;
    run(&mut db, "DEL l");
    run(&mut db, "RPUSH l y");
    assert!(meta(&db, "l").unwrap().version > v);
    assert_eq!(all(&mut db, "l"), bulks(&["y"]));
}

#[test]
fn index_overflow_is_an_error_not_a_wrap() {
    let (mut db, _) = db();
    run(&mut db, "RPUSH l a");
    // Move the list to the very top of the index space.
    let mut m = meta(&db, "l").unwrap();
    let keys_old = db.layout().subkey(b"l", m.version, &m.head.to_be_bytes()).unwrap();
    let keys_new = db.layout().subkey(b"l", m.version, &(u64::MAX - 1).to_be_bytes()).unwrap();
    let mut batch = WriteBatch::new();
    batch.delete(ColumnFamily::Subkey, keys_old);
    batch.put(ColumnFamily::Subkey, keys_new, Bytes::from_static(b"a"));
    m.head = u64::MAX - 1;
    m.tail = u64::MAX;
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(b"l"), m.to_vec());
    db.backend_mut().write(batch).unwrap();
    assert_eq!(all(&mut db, "l"), bulks(&["a"]));
    let r = run(&mut db, "RPUSH l b");
    assert!(r.is_error(), "{r:?}");
    assert_eq!(all(&mut db, "l"), bulks(&["a"]));
    // LINSERT after the last element shifts the head side instead.
    assert_eq!(run(&mut db, "LINSERT l AFTER a b"), int(2));
    assert_eq!(all(&mut db, "l"), bulks(&["a", "b"]));
    assert_eq!(run(&mut db, "LPUSH l z"), int(3));
    assert_eq!(run(&mut db, "LINDEX l -1"), bulk("b"));

    // And at the bottom.
    let (mut db, _) = common::db();
    run(&mut db, "RPUSH l a");
    let mut m = meta(&db, "l").unwrap();
    let mut batch = WriteBatch::new();
    batch.delete(ColumnFamily::Subkey, db.layout().subkey(b"l", m.version, &m.head.to_be_bytes()).unwrap());
    batch.put(
        ColumnFamily::Subkey,
        db.layout().subkey(b"l", m.version, &0u64.to_be_bytes()).unwrap(),
        Bytes::from_static(b"a"),
    );
    m.head = 0;
    m.tail = 1;
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(b"l"), m.to_vec());
    db.backend_mut().write(batch).unwrap();
    assert!(run(&mut db, "LPUSH l b").is_error());
    assert!(run(&mut db, "LMOVE l l RIGHT LEFT").is_error());
    assert_eq!(all(&mut db, "l"), bulks(&["a"]));
    assert_eq!(run(&mut db, "RPUSH l b"), int(2));
    assert_eq!(run(&mut db, "LINSERT l BEFORE a z"), int(3));
    assert_eq!(all(&mut db, "l"), bulks(&["z", "a", "b"]));
}

#[test]
fn arity_errors() {
    let (mut db, _) = db();
    for (line, name) in [
        ("LPUSH l", "lpush"),
        ("LLEN", "llen"),
        ("LINDEX l", "lindex"),
        ("LRANGE l 0", "lrange"),
        ("LINSERT l BEFORE a", "linsert"),
        ("LMOVE a b LEFT", "lmove"),
        ("BLPOP l", "blpop"),
        ("BLMPOP 0 1 l", "blmpop"),
        ("RPOPLPUSH a", "rpoplpush"),
    ] {
        assert_eq!(
            run(&mut db, line),
            err(&format!("ERR wrong number of arguments for '{name}' command")),
            "{line}"
        );
    }
}

#[test]
fn inconsistent_metadata_is_an_error_not_a_panic() {
    let (mut db, _) = db();
    run(&mut db, "RPUSH l a b");
    let mut m = meta(&db, "l").unwrap();
    m.size = 5;
    put_meta(&mut db, "l", &m);
    for line in [
        "LPOP l",
        "RPOP l 3",
        "LINDEX l 4",
        "LRANGE l 0 -1",
        "LTRIM l 1 3",
        "LMOVE l x LEFT LEFT",
        "RPUSH l c",
        "LREM l 0 a",
    ] {
        assert!(run(&mut db, line).is_error(), "{line}");
    }
    m.size = 2;
    m.tail = m.head; // head/tail claim an empty list
    put_meta(&mut db, "l", &m);
    assert!(run(&mut db, "LPOP l").is_error());
    // A corrupt destination fails the move and writes nothing.
    run(&mut db, "RPUSH x q");
    assert!(run(&mut db, "LMOVE x l LEFT LEFT").is_error());
    assert_eq!(all(&mut db, "x"), bulks(&["q"]));
}
