//! Bitmap commands on both representations: the Kvrocks bitmap type's bytes (fragment
//! subkeys named by decimal byte offset, LSB-first bits, size in bytes) and strings, the
//! string view of a bitmap, and errors that write nothing. Reply semantics are also checked
//! against redis-server by the differential test (`gen_bit.rs`).

mod common;

use bytes::Bytes;
use common::*;
use rediskv::{ColumnFamily, KvBackend, MemoryBackend};
use rediskv::{Db, Reply};
use rediskv::{KeyLayout, Metadata, RedisType};

/// The bitmap's decoded metadata record.
fn meta_of(db: &Db<MemoryBackend>, key: &str) -> Metadata<'static> {
    let raw =
        db.backend().get(ColumnFamily::Metadata, &KeyLayout::default().metadata_key(key.as_bytes())).unwrap();
    let raw: &'static [u8] = Box::leak(raw.expect("metadata").to_vec().into_boxed_slice());
    Metadata::decode(raw).unwrap()
}

/// `(subkey name, value)` of every fragment of `key`.
fn fragments(db: &Db<MemoryBackend>, key: &str) -> Vec<(String, Vec<u8>)> {
    let version = meta_of(db, key).version;
    let layout = KeyLayout::default();
    let prefix = layout.subkey_prefix(key.as_bytes(), version, 0).unwrap();
    db.backend()
        .records(ColumnFamily::Subkey)
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(k, v)| (String::from_utf8(k[prefix.len()..].to_vec()).unwrap(), v.to_vec()))
        .collect()
}

#[test]
fn setbit_writes_kvrocks_fragments() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "SETBIT b 0 1"), int(0));
    assert_eq!(run(&mut db, "SETBIT b 9 1"), int(0));
    let m = meta_of(&db, "b");
    assert_eq!((m.ty, m.size), (RedisType::Bitmap, 2));
    // Bit 0 is the LSB of byte 0 in Kvrocks (0x80 in Redis); bit 9 is 0x02 of byte 1.
    assert_eq!(fragments(&db, "b"), [("0".to_string(), vec![0x01, 0x02])]);
    // A million-bit offset writes one more fragment, at byte 125000 / 1024 * 1024 = 124928.
    assert_eq!(run(&mut db, "SETBIT b 1000000 1"), int(0));
    let frags = fragments(&db, "b");
    assert_eq!(frags.len(), 2);
    let (name, far) = &frags[1];
    assert_eq!(name, "124928");
    // 1000000 / 8 = 125000, byte 72 of the fragment, bit 0: the fragment grows to 73 bytes.
    assert_eq!((far.len(), far[72]), (73, 0x01));
    assert_eq!(meta_of(&db, "b").size, 125_001);
    assert_eq!(run(&mut db, "TYPE b"), Reply::status("string"));
    assert_eq!(run(&mut db, "STRLEN b"), int(125_001));
    assert_eq!(run(&mut db, "BITCOUNT b"), int(3));
    assert_eq!(run(&mut db, "GETRANGE b 0 1"), Reply::Bulk(Bytes::from_static(b"\x80\x40")));
    assert_eq!(run(&mut db, "BITPOS b 1 2"), int(1_000_000));
    assert_eq!(run(&mut db, "GETBIT b 1000000"), int(1));
    assert_eq!(run(&mut db, "GETBIT b 4294967295"), int(0));
}

#[test]
fn fragment_growth_follows_kvrocks() {
    let (mut db, _) = db();
    run(&mut db, "SETBIT b 8 1"); // byte 1: 2 bytes
    run(&mut db, "SETBIT b 16 1"); // byte 2: doubles to 4
    assert_eq!(fragments(&db, "b")[0].1.len(), 4);
    run(&mut db, "SETBIT b 80 1"); // byte 10 > 2 * 4: exactly 11
    assert_eq!(fragments(&db, "b")[0].1.len(), 11);
    run(&mut db, "SETBIT b 8184 1"); // byte 1023: 1024
    assert_eq!(fragments(&db, "b")[0].1.len(), 1024);
}

#[test]
fn string_keys_stay_strings_and_the_option_makes_strings() {
    let (mut db, _) = db();
    run(&mut db, "SET s a");
    assert_eq!(run(&mut db, "SETBIT s 6 1"), int(0));
    assert_eq!(run(&mut db, "GET s"), bulk("c"));
    assert_eq!(meta_of(&db, "s").ty, RedisType::String);
    db.set_bitmap_strings(true);
    run(&mut db, "SETBIT n 9 1");
    assert_eq!(meta_of(&db, "n").ty, RedisType::String);
    assert_eq!(run(&mut db, "GET n"), Reply::Bulk(Bytes::from_static(b"\x00\x40")));
    run(&mut db, "BITOP NOT d n");
    assert_eq!(meta_of(&db, "d").ty, RedisType::String);
    db.set_bitmap_strings(false);
    run(&mut db, "BITOP NOT e n");
    assert_eq!(meta_of(&db, "e").ty, RedisType::Bitmap);
    assert_eq!(run(&mut db, "GET e"), Reply::Bulk(Bytes::from_static(b"\xff\xbf")));
}

#[test]
fn bitop_writes_only_nonzero_fragments() {
    let (mut db, _) = db();
    run(&mut db, "SETBIT a 0 1");
    run(&mut db, "SETBIT a 80000 1");
    run(&mut db, "SETBIT c 80000 1");
    assert_eq!(run(&mut db, "BITOP AND d a c"), int(10_001));
    assert_eq!(fragments(&db, "d").iter().map(|f| f.0.clone()).collect::<Vec<_>>(), ["9216"]);
    assert_eq!(run(&mut db, "BITCOUNT d"), int(1));
    assert_eq!(run(&mut db, "BITOP OR d nothing"), int(0));
    assert_eq!(run(&mut db, "EXISTS d"), int(0));
}

#[test]
fn bitmap_answers_string_commands() {
    let (mut db, _) = db();
    run(&mut db, "SETBIT b 7 1");
    run(&mut db, "PEXPIRE b 100000");
    assert_eq!(run(&mut db, "APPEND b x"), int(2));
    assert_eq!(run(&mut db, "GET b"), Reply::Bulk(Bytes::from_static(b"\x01x")));
    assert_eq!(run(&mut db, "PTTL b"), int(100_000));
    run(&mut db, "SETBIT c 0 1");
    assert_eq!(run(&mut db, "INCR c"), err("ERR value is not an integer or out of range"));
    assert_eq!(run(&mut db, "MGET c"), Reply::Array(vec![Reply::Bulk(Bytes::from_static(b"\x80"))]));
    assert_eq!(run(&mut db, "LPUSH c x"), wrongtype());
    // "12", bit by bit: INCRBY, INCRBYFLOAT and SETRANGE read a bitmap as its string.
    for bit in [2, 3, 7, 10, 11, 14] {
        run(&mut db, &format!("SETBIT n {bit} 1"));
    }
    run(&mut db, "PEXPIRE n 100000");
    assert_eq!(run(&mut db, "INCRBY n 5"), int(17));
    assert_eq!(run(&mut db, "PTTL n"), int(100_000));
    assert_eq!(run(&mut db, "TYPE n"), Reply::Status("string".into()));
    for bit in [2, 3, 7] {
        run(&mut db, &format!("SETBIT f {bit} 1"));
    }
    assert_eq!(run(&mut db, "INCRBYFLOAT f 0.5"), Reply::Bulk(Bytes::from_static(b"1.5")));
    run(&mut db, "SETBIT s 1 1");
    assert_eq!(run(&mut db, "SETRANGE s 2 ab"), int(4));
    assert_eq!(run(&mut db, "GET s"), Reply::Bulk(Bytes::from_static(b"@\0ab")));
    assert_eq!(common::client::fold_resp2(&db.run(&["SETRANGE", "s", "0", ""])), int(4));
}

#[test]
fn bitfield_on_a_bitmap() {
    let (mut db, _) = db();
    let r = run(
        &mut db,
        "BITFIELD f OVERFLOW FAIL SET i8 0 200 GET i8 0 OVERFLOW SAT INCRBY i4 2 100 OVERFLOW WRAP INCRBY u2 0 7",
    );
    assert_eq!(r, Reply::Array(vec![Reply::Nil, int(0), int(7), int(3)]));
    assert_eq!(run(&mut db, "GET f"), Reply::Bulk(Bytes::from_static(b"\xdc")));
    // A failing write still grows the value, as Redis grows the string.
    assert_eq!(run(&mut db, "BITFIELD g OVERFLOW FAIL INCRBY u8 100 300"), Reply::Array(vec![Reply::Nil]));
    assert_eq!(run(&mut db, "STRLEN g"), int(14));
    assert_eq!(run(&mut db, "BITFIELD_RO nothing GET u8 0"), Reply::Array(vec![int(0)]));
    assert_eq!(run(&mut db, "EXISTS nothing"), int(0));
}

#[test]
fn bad_input_writes_nothing() {
    let (mut db, _) = db();
    run(&mut db, "HSET h f v");
    let before = db.backend().records(ColumnFamily::Metadata).count()
        + db.backend().records(ColumnFamily::Subkey).count();
    let cases = [
        ("SETBIT b 4294967296 1", "ERR bit offset is not an integer or out of range"),
        ("SETBIT b -1 1", "ERR bit offset is not an integer or out of range"),
        ("SETBIT b 1 2", "ERR bit is not an integer or out of range"),
        ("SETBIT h 1 1", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (
            "BITFIELD b SET u64 0 1",
            "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        ),
        ("BITFIELD b SET i8 #536870912 1", "ERR bit offset is not an integer or out of range"),
        ("BITFIELD b OVERFLOW NONE", "ERR Invalid OVERFLOW type specified"),
        ("BITFIELD b SET i8 0 x", "ERR value is not an integer or out of range"),
        ("BITFIELD_RO b SET i8 0 1", "ERR BITFIELD_RO only supports the GET subcommand"),
        ("BITOP NOT d a b", "ERR BITOP NOT must be called with a single source key."),
        ("BITOP AND d h", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("BITPOS b 2", "ERR The bit argument must be 1 or 0."),
    ];
    for (line, want) in cases {
        assert_eq!(run(&mut db, line), err(want), "{line}");
    }
    let after = db.backend().records(ColumnFamily::Metadata).count()
        + db.backend().records(ColumnFamily::Subkey).count();
    assert_eq!(before, after);
}
