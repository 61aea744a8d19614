//! DEL, EXISTS, TYPE, SELECT, PING and the dispatcher's errors.

mod common;
use common::*;
use std::sync::Arc;

use rediskv::{Db, ManualClock, MemoryBackend, Reply};

#[test]
fn unknown_command_and_arity_errors_match_redis() {
    let (mut db, _) = db();
    // Texts from redis-server 7.0.15.
    assert_eq!(run(&mut db, "foo a b"), err("ERR unknown command 'foo', with args beginning with: 'a' 'b' "));
    assert_eq!(run(&mut db, "GeT"), err("ERR wrong number of arguments for 'get' command"));
    assert_eq!(run(&mut db, "ping a b"), err("ERR wrong number of arguments for 'ping' command"));
    assert_eq!(run(&mut db, "select 16"), err("ERR DB index is out of range"));
    assert_eq!(run(&mut db, "select x"), err("ERR value is not an integer or out of range"));
}

#[test]
fn ping_echo_type_of_missing() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "PING"), Reply::status("PONG"));
    assert_eq!(run(&mut db, "ping hi"), bulk("hi"));
    assert_eq!(run(&mut db, "echo x"), bulk("x"));
    assert_eq!(run(&mut db, "type nosuch"), Reply::status("none"));
    assert_eq!(run(&mut db, "exists a b"), int(0));
    assert_eq!(run(&mut db, "del a b"), int(0));
}

#[test]
fn undecodable_metadata_is_an_error_naming_the_user_key() {
    use rediskv::ColumnFamily;
    use rediskv::{KvBackend, WriteBatch};
    let (mut db, _) = db();
    let mut batch = WriteBatch::new();
    // Flags byte 0x3F: reserved bits set, which no writer produces.
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(b"bad"), vec![0x3F]);
    db.backend().write(batch).unwrap();
    let Reply::Error(text) = run(&mut db, "lpop bad") else { panic!("expected an error") };
    assert!(text.contains("undecodable metadata of key 'bad'"), "{text}");
}

/// A cluster slot's live keys: from the slot's own range when the layout writes slots (Kvrocks'
/// cluster form), else from a walk of every key; the same keys either way, expired ones left
/// out, and the walk stops when told.
#[test]
fn walk_slot_lists_a_slot_s_live_keys_in_both_forms() {
    use rediskv::{KeyLayout, key_slot};
    let slot = key_slot(b"tag");
    let keys_of = |layout: KeyLayout| {
        let clock = Arc::new(ManualClock::new(T0_MS));
        let mut db = Db::with_layout(MemoryBackend::new(), layout).with_clock(clock.clone());
        for line in
            ["MSET {tag}:a 1 {tag}:b 2 other 3 {tag2}:c 4", "HSET {tag}:h f v", "SET {tag}:gone x PX 1"]
        {
            assert_ne!(run(&mut db, line), Reply::Nil);
        }
        clock.advance_ms(2);
        let mut found = Vec::new();
        db.walk_slot(slot, |key| {
            found.push(String::from_utf8(key.to_vec()).unwrap());
            true
        })
        .unwrap();
        let mut first = Vec::new();
        db.walk_slot(slot, |key| {
            first.push(key.to_vec());
            false
        })
        .unwrap();
        assert_eq!(first.len(), 1);
        // Over a run of slots: those slots' keys (here every slot's).
        let mut all = Vec::new();
        db.walk_slots(0, 16383, |key| {
            all.push(String::from_utf8(key.to_vec()).unwrap());
            true
        })
        .unwrap();
        all.sort();
        assert_eq!(all, ["other", "{tag2}:c", "{tag}:a", "{tag}:b", "{tag}:h"]);
        let mut none = Vec::new();
        db.walk_slots(slot + 1, 16383, |key| {
            none.push(key.to_vec());
            true
        })
        .unwrap();
        assert!(none.iter().all(|k| key_slot(k) > slot), "{none:?}");
        (found, db)
    };
    let walked = keys_of(KeyLayout::default()).0;
    assert_eq!(walked, ["{tag}:a", "{tag}:b", "{tag}:h"]);
    let (ranged, db) = keys_of(KeyLayout::default().with_cluster_slots(true));
    assert_eq!(ranged, walked);
    // The cluster form reads the slot's range only: a record stored under the slot's prefix
    // is listed (a walk would check its key's slot).
    let mut stray = db.layout().slot_range(slot).unwrap().start;
    stray.extend_from_slice(b"elsewhere");
    let value = db.layout().encode_metadata(&rediskv::Metadata::string(b"v", 0)).unwrap();
    let mut batch = rediskv::WriteBatch::new();
    batch.put(rediskv::ColumnFamily::Metadata, stray, value);
    rediskv::KvBackend::write(db.backend(), batch).unwrap();
    let mut listed = Vec::new();
    db.walk_slot(slot, |key| {
        listed.push(key.to_vec());
        true
    })
    .unwrap();
    assert!(listed.contains(&b"elsewhere".to_vec()), "{listed:?}");
}

/// A session restricted to some cluster slots (a cluster node's keyspace over a shared
/// store): in Kvrocks' cluster form KEYS, SCAN, DBSIZE and RANDOMKEY read only those slots'
/// ranges; under a layout without slots they read every key (the server filters them).
#[test]
fn keyspace_commands_read_only_the_session_s_slots_in_the_cluster_form() {
    use rediskv::{Engine, Session};
    use rediskv::{KeyLayout, key_slot};
    let words =
        |line: &str| line.split(' ').map(|w| bytes::Bytes::copy_from_slice(w.as_bytes())).collect::<Vec<_>>();
    let texts = |reply: Reply| -> Vec<String> {
        let Reply::Array(items) = reply else { panic!("{reply:?}") };
        let mut texts: Vec<String> = items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        texts.sort();
        texts
    };
    let all = ["{a}:1", "{a}:2", "{b}:1", "{c}:1"];
    for cluster_form in [false, true] {
        let engine =
            Engine::with_layout(MemoryBackend::new(), KeyLayout::default().with_cluster_slots(cluster_form));
        let mut s = Session::new(1);
        assert_eq!(engine.execute(&mut s, &words("MSET {a}:1 1 {a}:2 2 {b}:1 3 {c}:1 4")), Reply::OK);
        let (a, c) = (key_slot(b"a"), key_slot(b"c"));
        s.set_key_slots(Some(vec![(c, c), (a, a)]));
        let seen: &[&str] = if cluster_form { &["{a}:1", "{a}:2", "{c}:1"] } else { &all };
        assert_eq!(texts(engine.execute(&mut s, &words("KEYS *"))), seen);
        assert_eq!(texts(engine.execute(&mut s, &words("KEYS {a}*"))), ["{a}:1", "{a}:2"]);
        assert_eq!(engine.execute(&mut s, &words("DBSIZE")), Reply::Integer(seen.len() as i64));
        let mut scanned = Vec::new();
        let mut cursor = "0".to_string();
        loop {
            let Reply::Array(mut page) = engine.execute(&mut s, &words(&format!("SCAN {cursor} COUNT 1")))
            else {
                panic!("SCAN")
            };
            scanned.extend(texts(page.pop().unwrap()));
            let Some(Reply::Bulk(next)) = page.pop() else { panic!("cursor") };
            cursor = String::from_utf8(next.to_vec()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        scanned.sort();
        assert_eq!(scanned, seen);
        for _ in 0..20 {
            let Reply::Bulk(key) = engine.execute(&mut s, &words("RANDOMKEY")) else { panic!("RANDOMKEY") };
            assert!(seen.contains(&std::str::from_utf8(&key).unwrap()), "{key:?}");
        }
        s.set_key_slots(None);
        assert_eq!(texts(engine.execute(&mut s, &words("KEYS *"))), all);
        assert_eq!(engine.execute(&mut s, &words("DBSIZE")), Reply::Integer(4));
    }
}
