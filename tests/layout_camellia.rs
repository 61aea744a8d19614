//! camellia-redis-proxy-kv's layout: golden bytes written by hand from camellia's code
//! (`KeyDesign.java`, `KeyMeta.java`, `KeyType.java`, `BytesUtils.java`, `Utils.java`, the
//! ZADD/HSET/SADD commanders, the TiKV client's `prefixCache`), records written as camellia
//! writes them read back, sorted sets whose score keys do not sort by score, the types it
//! has no id for refused, and the consistency check and the collector on its records.
//!
//! - `m#` = `6D 23`, `s#` = `73 23`, `k#` = `6B 23`; namespace `ns` = `6E 73`;
//! - `foo` = `66 6F 6F`, key length 3 as an i32 = `00 00 00 03`;
//! - md5("foo") = `ACBD18DB4CC2F85C EDEF654FCCC4A4D8`; md5("12182") = `A36470CF1F8E5AAF …`
//!   (slot("foo") = 12182 = `2F 96`);
//! - IEEE bits: 1.5 = `3FF8000000000000`, −1.0 = `BFF0000000000000`, −2.5 = `C004000000000000`;
//! - 1700000000123 ms = `00 00 01 8B CF E5 68 7B`; no expiry = −1 = `FF FF FF FF FF FF FF FF`.

mod common;

use common::*;
use std::sync::Arc;

use rediskv::Error;
use rediskv::camellia::CamelliaRoute;
use rediskv::fsck::{self, Fsck};
use rediskv::{ColumnFamily, KvBackend, MemoryBackend, WriteBatch};
use rediskv::{Db, Reply};
use rediskv::{KeyLayout, LayoutKind, ManualClock, Metadata, RedisType, Version};

const FOO: &str = "00000003 666F6F";
const VERSION: Version = Version::Short(0x0102_0304_0506_0708);
const VERSION_HEX: &str = "0102030405060708";
const NONE: &str = "FFFFFFFFFFFFFFFF";

fn layout() -> KeyLayout {
    KeyLayout::camellia(b"ns")
}

fn db_of(layout: KeyLayout) -> (Db<'static, MemoryBackend>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0_MS));
    (Db::with_layout(MemoryBackend::new(), layout).with_clock(clock.clone()).with_seed(7), clock)
}

#[test]
fn record_keys_golden() {
    let l = layout();
    assert_eq!(l.kind(), LayoutKind::Camellia);
    assert_eq!(l.metadata_key(b"foo"), h("6D23 6E73 666F6F"));
    assert_eq!(l.metadata_key(b""), h("6D23 6E73"));
    assert_eq!(l.subkey(b"foo", VERSION, b"f1").unwrap(), h(&format!("7323 6E73 {FOO} {VERSION_HEX} 6631")));
    assert_eq!(
        l.score_key(b"foo", VERSION, 1.5, b"m").unwrap(),
        h(&format!("6B23 6E73 {FOO} {VERSION_HEX} 3FF8000000000000 6D"))
    );
    // Raw IEEE bits: a negative score keeps its sign bit set (sorts after the positives).
    assert_eq!(
        l.score_key(b"foo", VERSION, -1.0, b"").unwrap(),
        h(&format!("6B23 6E73 {FOO} {VERSION_HEX} BFF0000000000000"))
    );
    // -0.0 is written as +0.0.
    assert_eq!(
        l.score_key(b"foo", VERSION, -0.0, b"").unwrap(),
        h(&format!("6B23 6E73 {FOO} {VERSION_HEX} 0000000000000000"))
    );
    assert_eq!(l.score_prefix(b"foo", VERSION, 0).unwrap(), h(&format!("6B23 6E73 {FOO} {VERSION_HEX}")));
    assert_eq!(l.namespace_range().start, h("6D23 6E73"));
    assert!(l.routed(b"foo").is_metadata_key(&h("6D23 6E73 666F6F")));
    assert!(!l.routed(b"fo").is_metadata_key(&h("6D23 6E73 666F6F")));

    // Releases before September 2024 put md5(key)[0..8] after the namespace.
    let md5 = l.clone().with_hash_prefix(8).unwrap();
    assert_eq!(md5.metadata_key(b"foo"), h("6D23 6E73 ACBD18DB4CC2F85C 666F6F"));
    assert_eq!(
        md5.subkey(b"foo", VERSION, b"f1").unwrap(),
        h(&format!("7323 6E73 ACBD18DB4CC2F85C {FOO} {VERSION_HEX} 6631"))
    );

    // Database n is namespace "n:" + namespace (camellia's namespaces carry no length).
    assert_eq!(l.for_database(2).unwrap().metadata_key(b"foo"), h("6D23 323A6E73 666F6F"));
    assert!(KeyLayout::camellia(b"1:1").for_database(1).is_err(), "1:1:1 begins with 1:1");
    // Without a length, only decoding tells whose a key is.
    assert_eq!(l.holds_metadata_key(&l.metadata_key(b"foo")), None);

    // The storage clients' routing prefixes.
    assert_eq!(CamelliaRoute::SlotMd5.prefix(12182), h("A36470CF1F8E5AAF"));
    assert_eq!(CamelliaRoute::SlotInt.prefix(12182), h("00002F96"));
    assert_eq!(CamelliaRoute::None.prefix(12182), Vec::<u8>::new());
}

#[test]
fn record_keys_decode() {
    let l = layout();
    let mk_bytes = h("6D23 6E73 666F6F");
    let mk = l.decode_metadata_key(&mk_bytes).unwrap();
    assert_eq!((mk.namespace, mk.slot, mk.user_key), (&b"ns"[..], None, &b"foo"[..]));
    let sk_bytes = h(&format!("7323 6E73 {FOO} {VERSION_HEX} 6631"));
    let sk = l.decode_subkey(&sk_bytes).unwrap();
    assert_eq!((sk.user_key, sk.version, sk.sub), (&b"foo"[..], VERSION, &b"f1"[..]));
    assert_eq!(l.owner_metadata_key(&sk.owner()), h("6D23 6E73 666F6F"));
    let score_bytes = h(&format!("6B23 6E73 {FOO} {VERSION_HEX} C004000000000000 6D"));
    let score = l.decode_score_key(&score_bytes).unwrap();
    assert_eq!((score.score, score.member, score.version), (-2.5, &b"m"[..], VERSION));
    // Tags are not interchangeable; another namespace is not this layout's.
    assert!(l.decode_subkey(&h(&format!("6B23 6E73 {FOO} {VERSION_HEX} 6631"))).is_err());
    assert!(l.decode_metadata_key(&h("7323 6E73 666F6F")).is_err());
    assert!(l.decode_metadata_key(&h("6D23 6E74 666F6F")).is_err());
    assert!(matches!(
        l.decode_score_key(&h(&format!("6B23 6E73 {FOO} {VERSION_HEX} 7FF8000000000000"))),
        Err(Error::NanScore)
    ));
    for full in [sk_bytes, h(&format!("6B23 6E73 {FOO} {VERSION_HEX} 3FF8000000000000 6D"))] {
        for cut in 0..full.len() {
            let _ = l.decode_subkey(&full[..cut]);
            let _ = l.decode_score_key(&full[..cut]);
            let _ = l.decode_metadata_key(&full[..cut]);
        }
    }
}

#[test]
fn metadata_values_golden() {
    let exp = "0000018BCFE5687B";
    let l = layout();
    let counted =
        |ty, size| Metadata { expire_ms: 1_700_000_000_123, size, ..Metadata::collection(ty, VERSION) };
    assert_eq!(
        l.encode_metadata(&counted(RedisType::Hash, 3)).unwrap(),
        h(&format!("00 02 {VERSION_HEX} {exp} 00000003"))
    );
    assert_eq!(
        l.encode_metadata(&counted(RedisType::ZSet, 2)).unwrap(),
        h(&format!("00 03 {VERSION_HEX} {exp} 00000002"))
    );
    assert_eq!(
        l.encode_metadata(&counted(RedisType::Set, 1)).unwrap(),
        h(&format!("00 05 {VERSION_HEX} {exp} 00000001"))
    );
    let uncounted = Metadata { blind_write: true, ..Metadata::collection(RedisType::Set, VERSION) };
    assert_eq!(l.encode_metadata(&uncounted).unwrap(), h(&format!("01 05 {VERSION_HEX} {NONE}")));
    let string = Metadata { version: VERSION, ..Metadata::string(b"bar", 0) };
    assert_eq!(l.encode_metadata(&string).unwrap(), h(&format!("00 01 {VERSION_HEX} {NONE} 626172")));
    assert!(matches!(
        l.encode_metadata(&Metadata::collection(RedisType::List, Version::Short(1))),
        Err(Error::UnsupportedType { .. })
    ));

    // What camellia writes reads back.
    let bytes = h(&format!("00 01 {VERSION_HEX} {exp} 626172"));
    let m = l.decode_metadata(&bytes).unwrap();
    assert_eq!(
        (m.ty, m.expire_ms, m.value, m.version),
        (RedisType::String, 1_700_000_000_123, &b"bar"[..], VERSION)
    );
    let bytes = h(&format!("00 02 {VERSION_HEX} {NONE} 00000007"));
    let m = l.decode_metadata(&bytes).unwrap();
    assert_eq!((m.ty, m.expire_ms, m.size, m.blind_write), (RedisType::Hash, 0, 7, false));
    let bytes = h(&format!("01 02 {VERSION_HEX} {NONE}"));
    let m = l.decode_metadata(&bytes).unwrap();
    assert_eq!((m.ty, m.size, m.blind_write), (RedisType::Hash, 0, true));
    // camellia counts a key expired when expire <= now: 0 is long gone.
    let bytes = h(&format!("00 01 {VERSION_HEX} 0000000000000000 61"));
    let m = l.decode_metadata(&bytes).unwrap();
    assert!(m.is_expired(T0_MS));
    // What camellia keeps elsewhere, or never writes.
    for bad in [
        format!("01 03 {VERSION_HEX} {NONE}"), // zset v1: index in a Redis cache
        format!("00 04 {VERSION_HEX} {NONE} 00000001"), // list
        format!("00 09 {VERSION_HEX} {NONE}"), // unknown type
        format!("02 02 {VERSION_HEX} {NONE}"), // encode version 2
        format!("01 01 {VERSION_HEX} {NONE} 61"), // string v1
        format!("00 02 {VERSION_HEX} {NONE} 0000000100"), // trailing byte
    ] {
        assert!(l.decode_metadata(&h(&bad)).is_err(), "{bad}");
    }
    let full = h(&format!("00 02 {VERSION_HEX} {exp} 00000003"));
    for cut in 0..full.len() {
        assert!(l.decode_metadata(&full[..cut]).is_err(), "{cut} bytes");
    }
}

#[test]
fn member_scores_are_java_decimal_text() {
    for (x, text) in [
        (1.5, "1.5"),
        (100.0, "100.0"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (1e10, "1.0E10"),
        (-2.5, "-2.5"),
        (0.1, "0.1"),
        (1.0 / 3.0, "0.3333333333333333"),
        (0.0, "0.0"),
        (f64::INFINITY, "Infinity"),
        (f64::NEG_INFINITY, "-Infinity"),
        (f64::MAX, "1.7976931348623157E308"),
        (5e-324, "4.9E-324"),
    ] {
        assert_eq!(layout().encode_member_score(x).unwrap(), text.as_bytes(), "{x}");
        assert_eq!(layout().decode_member_score(text.as_bytes()).unwrap().to_bits(), x.to_bits(), "{text}");
    }
    assert_eq!(layout().encode_member_score(-0.0).unwrap(), b"0.0");
    assert_eq!(layout().decode_member_score(b"-0.0").unwrap().to_bits(), 0);
    // Other forms Java's parseDouble reads.
    assert_eq!(layout().decode_member_score(b"1e3").unwrap(), 1000.0);
    assert_eq!(layout().decode_member_score(b" +2.5d ").unwrap(), 2.5);
    for bad in [&b"NaN"[..], b"", b"x", b"inf", b"1.2.3", b"\xff"] {
        assert!(layout().decode_member_score(bad).is_err(), "{:?}", bad.escape_ascii().to_string());
    }
}

#[test]
fn records_camellia_wrote_are_read() {
    let (mut db, _clock) = db_of(layout());
    let mut batch = WriteBatch::new();
    let mut put = |cf, k: String, v: Vec<u8>| batch.put(cf, h(&k), v);
    // A string with an expiry 100 s ahead: T0_MS + 100000.
    let at = format!("{:016X}", T0_MS + 100_000);
    put(ColumnFamily::Metadata, "6D23 6E73 73".into(), h(&format!("00 01 {VERSION_HEX} {at} 626172")));
    // A counted hash `foo` of 2 fields.
    put(
        ColumnFamily::Metadata,
        "6D23 6E73 666F6F".into(),
        h(&format!("00 02 {VERSION_HEX} {NONE} 00000002")),
    );
    put(ColumnFamily::Subkey, format!("7323 6E73 {FOO} {VERSION_HEX} 6631"), b"v1".to_vec());
    put(ColumnFamily::Subkey, format!("7323 6E73 {FOO} {VERSION_HEX} 6632"), b"v2".to_vec());
    // A sorted set `z` of 3: a 1.0E10, b -1.0, c -2.5 (`z` = 7A, length 1).
    put(ColumnFamily::Metadata, "6D23 6E73 7A".into(), h(&format!("00 03 {VERSION_HEX} {NONE} 00000003")));
    for (member, text, bits) in [
        ("61", "1.0E10", "4202A05F20000000"),
        ("62", "-1.0", "BFF0000000000000"),
        ("63", "-2.5", "C004000000000000"),
    ] {
        put(
            ColumnFamily::Subkey,
            format!("7323 6E73 00000001 7A {VERSION_HEX} {member}"),
            text.as_bytes().to_vec(),
        );
        put(ColumnFamily::Score, format!("6B23 6E73 00000001 7A {VERSION_HEX} {bits} {member}"), vec![]);
    }
    // An uncounted set `u` (encode version 1).
    put(ColumnFamily::Metadata, "6D23 6E73 75".into(), h(&format!("01 05 {VERSION_HEX} {NONE}")));
    put(ColumnFamily::Subkey, format!("7323 6E73 00000001 75 {VERSION_HEX} 78"), vec![]);
    db.backend().write(batch).unwrap();

    assert_eq!(run(&mut db, "GET s"), bulk("bar"));
    assert_eq!(run(&mut db, "TTL s"), int(100));
    assert_eq!(run(&mut db, "HGETALL foo"), bulks(&["f1", "v1", "f2", "v2"]));
    assert_eq!(run(&mut db, "HLEN foo"), int(2));
    assert_eq!(
        run(&mut db, "ZRANGE z 0 -1 WITHSCORES"),
        bulks(&["c", "-2.5", "b", "-1", "a", "10000000000"])
    );
    assert_eq!(run(&mut db, "ZSCORE z a"), bulk("10000000000"));
    assert_eq!(run(&mut db, "SMEMBERS u"), bulks(&["x"]));
    assert_eq!(run(&mut db, "SCARD u"), int(1));
    assert_eq!(run(&mut db, "DBSIZE"), int(4));
    assert!(fsck::check(db.backend(), &layout(), T0_MS).unwrap().is_empty());

    // Written back as camellia writes it: the count follows, the member's score is text.
    assert_eq!(run(&mut db, "HSET foo f3 v3"), int(1));
    let raw = db.backend().get(ColumnFamily::Metadata, &h("6D23 6E73 666F6F")).unwrap().unwrap();
    assert_eq!(raw[..], h(&format!("00 02 {VERSION_HEX} {NONE} 00000003"))[..]);
    assert_eq!(run(&mut db, "ZINCRBY z 0.5 b"), bulk("-0.5"));
    let member = db
        .backend()
        .get(ColumnFamily::Subkey, &h(&format!("7323 6E73 00000001 7A {VERSION_HEX} 62")))
        .unwrap();
    assert_eq!(member.as_deref(), Some(&b"-0.5"[..]));
    let score = h(&format!("6B23 6E73 00000001 7A {VERSION_HEX} BFE0000000000000 62"));
    assert!(db.backend().get(ColumnFamily::Score, &score).unwrap().is_some());
    assert!(fsck::check(db.backend(), &layout(), T0_MS).unwrap().is_empty());
}

#[test]
fn sorted_sets_keep_redis_order_over_raw_scores() {
    let (mut db, _clock) = db_of(layout());
    run(&mut db, "ZADD z -1 b -1 a -1 c -2 x 0 zero 3 p -inf ni 2 q +inf pi -0.5 h 3 o");
    let all = ["ni", "x", "a", "b", "c", "h", "zero", "q", "o", "p", "pi"];
    assert_eq!(run(&mut db, "ZRANGE z 0 -1"), bulks(&all));
    let rev: Vec<&str> = all.iter().rev().copied().collect();
    assert_eq!(run(&mut db, "ZREVRANGE z 0 -1"), bulks(&rev));
    assert_eq!(run(&mut db, "ZRANGEBYSCORE z -1 0"), bulks(&["a", "b", "c", "h", "zero"]));
    assert_eq!(run(&mut db, "ZRANGEBYSCORE z (-2 (-0.5 LIMIT 1 2"), bulks(&["b", "c"]));
    assert_eq!(run(&mut db, "ZREVRANGEBYSCORE z 2 -1"), bulks(&["q", "zero", "h", "c", "b", "a"]));
    assert_eq!(run(&mut db, "ZRANGEBYSCORE z -inf -1.5"), bulks(&["ni", "x"]));
    assert_eq!(run(&mut db, "ZCOUNT z -1 -1"), int(3));
    for (i, m) in all.iter().enumerate() {
        assert_eq!(run(&mut db, &format!("ZRANK z {m}")), int(i as i64), "{m}");
        assert_eq!(run(&mut db, &format!("ZREVRANK z {m}")), int((all.len() - 1 - i) as i64), "{m}");
    }
    assert_eq!(run(&mut db, "ZRANGE z 2 4"), bulks(&["a", "b", "c"]));
    assert_eq!(run(&mut db, "ZRANGE z -3 -2"), bulks(&["o", "p"]));
    assert_eq!(run(&mut db, "ZPOPMIN z 2"), bulks(&["ni", "-inf", "x", "-2"]));
    assert_eq!(run(&mut db, "ZREMRANGEBYSCORE z -1 -1"), int(3));
    assert_eq!(run(&mut db, "ZRANGE z 0 -1"), bulks(&["h", "zero", "q", "o", "p", "pi"]));
    assert!(fsck::check(db.backend(), &layout(), T0_MS).unwrap().is_empty());
}

#[test]
fn types_camellia_has_no_id_for_are_refused() {
    let (mut db, _clock) = db_of(layout());
    assert_eq!(run(&mut db, "LPUSH l a"), err("ERR the camellia layout cannot store a list key"));
    assert_eq!(run(&mut db, "XADD s * f v"), err("ERR the camellia layout cannot store a stream key"));
    assert!(db.backend().is_empty(), "nothing written");
    assert_eq!(run(&mut db, "SETBIT b 7 1"), int(0));
    assert_eq!(run(&mut db, "TYPE b"), Reply::Status("string".into()));
    // A zset of encode version 1 (its index is in camellia's Redis cache) is an error to read.
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Metadata, h("6D23 6E73 7631"), h(&format!("01 03 {VERSION_HEX} {NONE}")));
    db.backend().write(batch).unwrap();
    assert!(
        matches!(run(&mut db, "ZCARD v1"), Reply::Error(e) if e.contains("camellia zset encode version"))
    );

    assert_refused_in_exec(layout(), "RPUSH l x", "ERR the camellia layout cannot store a list key");
}

#[test]
fn uncounted_collections_answer_as_camellia_does() {
    let l = layout()
        .with_encode_version(RedisType::Hash, 1)
        .unwrap()
        .with_encode_version(RedisType::Set, 1)
        .unwrap();
    assert_eq!((l.encode_version(RedisType::Hash), l.encode_version(RedisType::ZSet)), (1, 0));
    assert!(layout().with_encode_version(RedisType::ZSet, 1).is_err(), "zset v1 lives in a Redis cache");
    assert!(KeyLayout::default().with_encode_version(RedisType::Hash, 1).is_err());
    let (mut db, _clock) = db_of(l);
    assert_eq!(run(&mut db, "HSET h a 1 b 2"), int(2));
    let raw = db.backend().get(ColumnFamily::Metadata, &h("6D23 6E73 68")).unwrap().unwrap();
    assert_eq!(&raw[..2], &h("01 02")[..]);
    assert_eq!(raw.len(), 18, "no count");
    assert_eq!(run(&mut db, "HLEN h"), int(2));
    // camellia's HDEL of an uncounted hash answers how many fields it was given.
    assert_eq!(run(&mut db, "HDEL h a zz"), int(2));
    assert_eq!(run(&mut db, "HGETALL h"), bulks(&["b", "2"]));
    assert_eq!(run(&mut db, "SADD s x y"), int(2));
    assert_eq!(run(&mut db, "SCARD s"), int(2));
    assert!(fsck::check(db.backend(), &layout(), T0_MS).unwrap().is_empty());
}

#[test]
fn databases_gc_and_fsck_on_camellia_records() {
    let (mut db, clock) = db_of(layout());
    for line in [
        "SET s v",
        "HSET h a 1 b 2",
        "SADD set x y z",
        "ZADD z 1 a -2.5 b",
        "PFADD hll a b c",
        "SELECT 3",
        "HSET h3 f v",
        "SELECT 0",
        "HSET gone f v",
        "DEL gone",
        "ZADD exp 1 a",
        "PEXPIRE exp 10",
        "RENAME z z2",
    ] {
        assert!(!matches!(run(&mut db, line), Reply::Error(_)), "{line}");
    }
    let db3 = KeyLayout::camellia(b"3:ns");
    assert!(db.backend().get(ColumnFamily::Metadata, &db3.metadata_key(b"h3")).unwrap().is_some());
    // The base layout reads its databases' records too (what a compaction filter needs).
    assert_eq!(fsck::check(db.backend(), &layout(), T0_MS).unwrap(), vec![]);
    assert_eq!(layout().decode_metadata_key(&db3.metadata_key(b"h3")).unwrap().namespace, b"3:ns");
    assert!(layout().decode_metadata_key(b"m#3:nx").is_err());
    assert!(layout().decode_metadata_key(b"m#:ns").is_err());
    clock.set_ms(T0_MS + 60_000);
    let report = rediskv::gc::compact(db.backend(), &layout(), T0_MS + 60_000, 0).unwrap();
    assert_eq!(report.dropped_subkeys, 4, "the deleted hash's field, the expired and renamed zsets' members");
    assert_eq!(report.dropped_scores, 3, "the expired and renamed zsets' scores");
    let garbage = Fsck::new(&layout()).report_garbage(true).run(db.backend(), T0_MS + 60_000).unwrap();
    assert_eq!(garbage, vec![]);
    assert_eq!(run(&mut db, "ZRANGE z2 0 -1 WITHSCORES"), bulks(&["b", "-2.5", "a", "1"]));
    assert_eq!(run(&mut db, "HGETALL h"), bulks(&["a", "1", "b", "2"]));
    assert_eq!(run(&mut db, "FLUSHDB"), Reply::OK);
    assert_eq!(run(&mut db, "DBSIZE"), int(0));
    run(&mut db, "SELECT 3");
    assert_eq!(run(&mut db, "HGET h3 f"), bulk("v"));
}
