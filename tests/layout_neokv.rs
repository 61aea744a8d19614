//! NeoKV's layout: golden bytes written by hand from NeoKV's code (`redis_metadata.cpp`,
//! `redis_codec.cpp`, `key_encoder.h`), its first encoding's strings read and moved on write,
//! types it has no id for refused, and the consistency check and the collector on its records.
//!
//! - region 1 = `80 00 00 00 00 00 00 01`, index 2 = `80 00 00 00 00 00 00 02` (big-endian,
//!   sign bit flipped: `KeyEncoder::encode_i64`); region −1 = `7F FF FF FF FF FF FF FF`;
//! - slot("foo") = 12182 = `2F 96`, slot("") = 0; `foo` = `66 6F 6F`, `f1` = `66 31`;
//! - 1.5 = `3FF8…` → `BF F8 00 00 00 00 00 00`; −1.0 = `BFF0…` → all bits flipped
//!   `40 0F FF FF FF FF FF FF`;
//! - 1700000000123 ms = `00 00 01 8B CF E5 68 7B`.

mod common;

use common::*;
use std::sync::Arc;

use rediskv::Error;
use rediskv::fsck::{self, Fsck, Problem};
use rediskv::{ColumnFamily, KvBackend, MemoryBackend, WriteBatch};
use rediskv::{Db, Reply};
use rediskv::{
    Extra, KeyLayout, LayoutKind, ManualClock, Metadata, RedisType, Version, decode_neokv_legacy,
    encode_neokv_legacy, neokv_ids, neokv_namespace,
};

const NS: &str = "8000000000000001 8000000000000002";
const FOO: &str = "2F96 00000003 666F6F";
const VERSION: Version = Version::Short(0x0102_0304_0506_0708);
const VERSION_HEX: &str = "0102030405060708";

fn layout() -> KeyLayout {
    KeyLayout::neokv(1, 2)
}

fn db() -> (Db<'static, MemoryBackend>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0_MS));
    (Db::with_layout(MemoryBackend::new(), layout()).with_clock(clock.clone()).with_seed(7), clock)
}

#[test]
fn namespace_golden() {
    assert_eq!(neokv_namespace(1, 2).to_vec(), h(NS));
    assert_eq!(neokv_namespace(-1, 0).to_vec(), h("7FFFFFFFFFFFFFFF 8000000000000000"));
    assert_eq!(neokv_namespace(i64::MIN, i64::MAX).to_vec(), h("0000000000000000 FFFFFFFFFFFFFFFF"));
    assert_eq!(neokv_ids(&h(NS)), Some((1, 2)));
    assert_eq!(neokv_ids(&h("80")), None);
    assert_eq!(layout().neokv_ids(), Some((1, 2)));
    assert_eq!(layout().kind(), LayoutKind::NeoKv);
    assert!(layout().cluster_slots(), "NeoKV always writes the slot");
    assert!(layout().with_cluster_slots(false).cluster_slots());
}

#[test]
fn record_keys_golden() {
    let l = layout();
    let meta_key = h(&format!("{NS} {FOO}"));
    assert_eq!(l.metadata_key(b"foo"), meta_key);
    assert_eq!(l.metadata_key(b""), h(&format!("{NS} 0000 00000000")));
    assert_eq!(l.subkey(b"foo", VERSION, b"f1").unwrap(), h(&format!("{NS} {FOO} {VERSION_HEX} 6631")));
    assert_eq!(
        l.score_key(b"foo", VERSION, 1.5, b"m").unwrap(),
        h(&format!("{NS} {FOO} {VERSION_HEX} BFF8000000000000 6D"))
    );
    assert_eq!(
        l.score_key(b"foo", VERSION, -1.0, b"").unwrap(),
        h(&format!("{NS} {FOO} {VERSION_HEX} 400FFFFFFFFFFFFF"))
    );
    assert_eq!(l.legacy_string_key(&meta_key).unwrap(), h(&format!("{NS} {FOO} 53")));
    assert_eq!(KeyLayout::default().legacy_string_key(&meta_key), None);
    // Database 1 is index id + 1.
    assert_eq!(
        l.for_database(1).unwrap().metadata_key(b"foo"),
        h(&format!("8000000000000001 8000000000000003 {FOO}"))
    );
    assert!(l.routed(b"foo").is_metadata_key(&meta_key));
    assert!(!l.routed(b"fo").is_metadata_key(&meta_key));
    // The fixed 16 bytes tell a namespace's keys apart without decoding.
    assert_eq!(l.holds_metadata_key(&meta_key), Some(true));
    assert_eq!(l.for_database(1).unwrap().holds_metadata_key(&meta_key), Some(false));
}

#[test]
fn record_keys_decode() {
    let l = layout();
    let (mk_bytes, sk_bytes) = (h(&format!("{NS} {FOO}")), h(&format!("{NS} {FOO} {VERSION_HEX} 6631")));
    let score_bytes = h(&format!("{NS} {FOO} {VERSION_HEX} BFF8000000000000 6D"));
    let mk = l.decode_metadata_key(&mk_bytes).unwrap();
    assert_eq!((mk.namespace, mk.slot, mk.user_key), (&h(NS)[..], Some(12182), &b"foo"[..]));
    let sk = l.decode_subkey(&sk_bytes).unwrap();
    assert_eq!((sk.user_key, sk.version, sk.sub), (&b"foo"[..], VERSION, &b"f1"[..]));
    assert_eq!(l.owner_metadata_key(&sk.owner()), h(&format!("{NS} {FOO}")));
    let score = l.decode_score_key(&score_bytes).unwrap();
    assert_eq!((score.score, score.member), (1.5, &b"m"[..]));
    // Another region's records decode too (a compaction filter sees every region).
    let other = h(&format!("7FFFFFFFFFFFFFFF 8000000000000000 {FOO}"));
    assert_eq!(l.decode_metadata_key(&other).unwrap().namespace, &h("7FFFFFFFFFFFFFFF 8000000000000000")[..]);
    // A metadata key ends with its key.
    assert!(matches!(l.decode_metadata_key(&h(&format!("{NS} {FOO} 00"))), Err(Error::TrailingBytes { .. })));
    // Legacy string keys are told from subkeys, also from one whose field ends in 'S'.
    assert_eq!(
        l.decode_legacy_string_key(&h(&format!("{NS} {FOO} 53"))),
        Some(&h(&format!("{NS} {FOO}"))[..])
    );
    assert_eq!(l.decode_legacy_string_key(&h(&format!("{NS} {FOO} {VERSION_HEX} 53"))), None);
    assert!(l.decode_subkey(&h(&format!("{NS} {FOO} 53"))).is_err());
}

#[test]
fn truncated_keys_are_errors() {
    let l = layout();
    for full in [h(&format!("{NS} {FOO}")), h(&format!("{NS} {FOO} {VERSION_HEX} BFF8000000000000 6D"))] {
        for cut in 0..full.len() {
            let bytes = &full[..cut];
            let _ = l.decode_subkey(bytes);
            let _ = l.decode_score_key(bytes);
            let _ = l.decode_legacy_string_key(bytes);
            if cut < 22 + 3 {
                assert!(l.decode_metadata_key(bytes).is_err(), "{cut} bytes decoded as a metadata key");
            }
        }
    }
}

#[test]
fn metadata_values_golden() {
    // NeoKV's values are Kvrocks' 64-bit ones: flags 0x80 | type, expire ms, version, size.
    let coll = |ty, size, head, tail| Metadata {
        ty,
        expire_ms: 1_700_000_000_123,
        version: VERSION,
        size,
        head,
        tail,
        blind_write: false,
        value: &[],
        extra: Extra::None,
    };
    let exp = "0000018BCFE5687B";
    assert_eq!(Metadata::string(b"bar", 0).to_vec(), h("81 0000000000000000 626172"));
    assert_eq!(
        coll(RedisType::Hash, 3, 0, 0).to_vec(),
        h(&format!("82 {exp} {VERSION_HEX} 0000000000000003"))
    );
    assert_eq!(
        coll(RedisType::Set, 1, 0, 0).to_vec(),
        h(&format!("84 {exp} {VERSION_HEX} 0000000000000001"))
    );
    assert_eq!(
        coll(RedisType::ZSet, 2, 0, 0).to_vec(),
        h(&format!("85 {exp} {VERSION_HEX} 0000000000000002"))
    );
    // UINT64_MAX / 2 = 7FFF…FF: LPUSH once from there, then RPUSH once.
    assert_eq!(
        coll(RedisType::List, 2, u64::MAX / 2 - 1, u64::MAX / 2 + 1).to_vec(),
        h(&format!("83 {exp} {VERSION_HEX} 0000000000000002 7FFFFFFFFFFFFFFE 8000000000000000"))
    );
}

#[test]
fn legacy_values_golden() {
    let (bytes, zero) = (h("0000018BCFE5687B 626172"), h("0000000000000000"));
    let m = decode_neokv_legacy(&bytes).unwrap();
    assert_eq!((m.ty, m.expire_ms, m.value), (RedisType::String, 1_700_000_000_123, &b"bar"[..]));
    assert_eq!(encode_neokv_legacy(1_700_000_000_123, b"bar"), h("0000018BCFE5687B 626172"));
    let none = decode_neokv_legacy(&zero).unwrap();
    assert_eq!((none.expire_ms, none.value), (0, &b""[..]));
    // A negative time (never written by NeoKV) is no expiry, not an instant one.
    assert_eq!(decode_neokv_legacy(&h("FFFFFFFFFFFFFFFF 61")).unwrap().expire_ms, 0);
    for cut in 0..8 {
        assert!(matches!(decode_neokv_legacy(&h("0000000000000000")[..cut]), Err(Error::Truncated { .. })));
    }
}

/// Writes a string of NeoKV's first encoding straight into the store.
fn put_legacy(db: &Db<'static, MemoryBackend>, key: &str, expire_ms: u64, value: &str) {
    let l = layout();
    let mut batch = WriteBatch::new();
    let legacy = l.legacy_string_key(&l.metadata_key(key.as_bytes())).unwrap();
    batch.put(ColumnFamily::Subkey, legacy, encode_neokv_legacy(expire_ms, value.as_bytes()));
    db.backend().write(batch).unwrap();
}

fn legacy_record(db: &Db<'static, MemoryBackend>, key: &str) -> Option<bytes::Bytes> {
    let l = layout();
    db.backend()
        .get(ColumnFamily::Subkey, &l.legacy_string_key(&l.metadata_key(key.as_bytes())).unwrap())
        .unwrap()
}

fn metadata_record(db: &Db<'static, MemoryBackend>, key: &str) -> Option<bytes::Bytes> {
    db.backend().get(ColumnFamily::Metadata, &layout().metadata_key(key.as_bytes())).unwrap()
}

#[test]
fn legacy_strings_are_read_and_moved_when_written() {
    let (mut db, _clock) = db();
    put_legacy(&db, "old", 0, "v1");
    assert_eq!(run(&mut db, "GET old"), bulk("v1"));
    assert_eq!(run(&mut db, "TYPE old"), Reply::Status("string".into()));
    assert_eq!(run(&mut db, "TTL old"), int(-1));
    assert_eq!(run(&mut db, "EXISTS old"), int(1));
    assert_eq!(run(&mut db, "HSET old f v"), wrongtype());
    assert!(legacy_record(&db, "old").is_some(), "a read moves nothing");
    // The first write moves it: one metadata record, the legacy one deleted in the same batch.
    assert_eq!(run(&mut db, "APPEND old x"), int(3));
    assert!(legacy_record(&db, "old").is_none());
    assert_eq!(metadata_record(&db, "old").as_deref(), Some(&h("81 0000000000000000 763178")[..]));
    assert_eq!(run(&mut db, "GET old"), bulk("v1x"));

    // DEL of a key only the first encoding has.
    put_legacy(&db, "gone", 0, "v");
    assert_eq!(run(&mut db, "DEL gone"), int(1));
    assert!(legacy_record(&db, "gone").is_none());
    assert_eq!(run(&mut db, "GET gone"), Reply::Nil);

    // Expiry: a live one keeps its TTL when moved; an expired one reads as absent.
    put_legacy(&db, "ttl", T0_MS + 100_000, "v");
    assert_eq!(run(&mut db, "TTL ttl"), int(100));
    assert_eq!(run(&mut db, "EXPIRE ttl 500"), int(1));
    assert!(legacy_record(&db, "ttl").is_none());
    assert_eq!(run(&mut db, "TTL ttl"), int(500));
    put_legacy(&db, "dead", T0_MS - 1, "v");
    assert_eq!(run(&mut db, "GET dead"), Reply::Nil);
    assert_eq!(run(&mut db, "EXISTS dead"), int(0));

    // The new encoding wins over a leftover of the old one.
    run(&mut db, "SET both new");
    put_legacy(&db, "both", 0, "old");
    assert_eq!(run(&mut db, "GET both"), bulk("new"));

    // Overwritten by another type: the legacy record goes with the first write.
    put_legacy(&db, "h", 0, "v");
    assert_eq!(run(&mut db, "SET h x"), Reply::OK);
    assert_eq!(run(&mut db, "HSET h f v"), wrongtype());
    assert_eq!(run(&mut db, "DEL h"), int(1));
    assert_eq!(run(&mut db, "HSET h f v"), int(1));
    assert!(legacy_record(&db, "h").is_none());
    assert!(fsck::check(db.backend(), &layout(), T0_MS).unwrap().is_empty());

    // FLUSHDB and FLUSHALL take the first encoding's strings too.
    put_legacy(&db, "f1", 0, "v");
    assert_eq!(run(&mut db, "FLUSHDB"), Reply::OK);
    assert!(legacy_record(&db, "f1").is_none());
    assert_eq!(run(&mut db, "GET f1"), Reply::Nil);
    put_legacy(&db, "f2", 0, "v");
    assert_eq!(run(&mut db, "FLUSHALL"), Reply::OK);
    assert_eq!(run(&mut db, "GET f2"), Reply::Nil);
    assert!(legacy_record(&db, "f2").is_none());
    assert_eq!(db.backend().len(ColumnFamily::Metadata), 0);
}

#[test]
fn types_neokv_has_no_id_for_are_refused() {
    let (mut db, _clock) = db();
    assert_eq!(run(&mut db, "XADD s * f v"), err("ERR the neokv layout cannot store a stream key"));
    assert!(db.backend().is_empty(), "nothing written");
    // Bitmaps are strings here, as in Redis.
    assert_eq!(run(&mut db, "SETBIT b 7 1"), int(0));
    assert_eq!(run(&mut db, "TYPE b"), Reply::Status("string".into()));
    assert_eq!(run(&mut db, "GET b"), bulk("\u{1}"));
    // In MULTI the refused command answers its error and the others are applied, as an
    // EXEC with a failing command is.
    let (engine, mut session) =
        assert_refused_in_exec(layout(), "XADD s * f v", "ERR the neokv layout cannot store a stream key");
    assert_eq!(engine.execute(&mut session, &argv("EXISTS s")), int(0));
}

#[test]
fn databases_and_all_families_pass_the_checks() {
    let (mut db, clock) = db();
    for line in [
        "SET s v",
        "HSET h a 1 b 2",
        "SADD set x y z",
        "RPUSH l a b c",
        "LPUSH l z",
        "ZADD z 1 a -2.5 b",
        "PFADD hll a b c",
        "SELECT 3",
        "HSET h3 f v",
        "SELECT 0",
        "HSET gone f v",
        "DEL gone",
        "RPUSH exp a",
        "PEXPIRE exp 10",
    ] {
        assert!(!matches!(run(&mut db, line), Reply::Error(_)), "{line}");
    }
    put_legacy(&db, "legacy", 0, "v");
    // Database 3 is index id 2 + 3.
    let db3 = KeyLayout::neokv(1, 5);
    assert!(db.backend().get(ColumnFamily::Metadata, &db3.metadata_key(b"h3")).unwrap().is_some());
    assert_eq!(fsck::check(db.backend(), &layout(), T0_MS).unwrap(), vec![]);
    assert_eq!(fsck::check(db.backend(), &db3, T0_MS).unwrap(), vec![]);
    // DEL and expiry left garbage; past the grace the collector drops it all.
    clock.set_ms(T0_MS + 60_000);
    let report = rediskv::gc::compact(db.backend(), &layout(), T0_MS + 60_000, 0).unwrap();
    assert_eq!(report.dropped_subkeys, 2, "the deleted hash's field and the expired list's element");
    let garbage = Fsck::new(&layout()).report_garbage(true).run(db.backend(), T0_MS + 60_000).unwrap();
    assert_eq!(garbage, vec![]);
    assert!(legacy_record(&db, "legacy").is_some(), "the collector keeps legacy strings");
    assert_eq!(run(&mut db, "GET legacy"), bulk("v"));
    assert_eq!(run(&mut db, "LRANGE l 0 -1"), bulks(&["z", "a", "b", "c"]));
    assert_eq!(run(&mut db, "ZRANGE z 0 -1 WITHSCORES"), bulks(&["b", "-2.5", "a", "1"]));

    // A legacy record whose value does not decode is reported.
    let mut batch = WriteBatch::new();
    batch.put(
        ColumnFamily::Subkey,
        layout().legacy_string_key(&layout().metadata_key(b"bad")).unwrap(),
        h("0102"),
    );
    db.backend().write(batch).unwrap();
    let found = fsck::check(db.backend(), &layout(), T0_MS + 60_000).unwrap();
    assert!(
        matches!(&found[..], [Problem::UndecodableMetadata { key, .. }] if key[..] == layout().metadata_key(b"bad")[..]),
        "{found:?}"
    );
    assert!(
        matches!(run(&mut db, "GET bad"), Reply::Error(_)),
        "an unreadable record is an error, not a miss"
    );
}
