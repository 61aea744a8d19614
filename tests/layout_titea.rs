//! TiTea's layout: golden bytes written by hand from TiTea's code (`server/store/meta.go`,
//! `hash.go`, `list.go`, `zset.go`, `expire.go`, `gc.go`, `pkg/util/number`), records
//! written as TiTea writes them read back, its expire and GC index records kept by every
//! write, 16-byte object ids, and the collector and the consistency check on its records.
//!
//! - header = `kv` + namespace: `kva.b` = `6B 76 61 2E 62`; `m` = 6D, `d` = 64, `e` = 65,
//!   `g` = 67; `foo` = `66 6F 6F`;
//! - the object id used below: `00 01 02 … 0F`;
//! - ordered score (`Float64ToUint64`): 1.5 = `3FF8…` | sign bit = `BFF8000000000000`;
//! - list positions are signed: −1 = `'<' FF…FF`, 0 = `'>' 00…00`;
//! - 1700000000123 ms = `00 00 01 8B CF E5 68 7B`.

mod common;

use common::*;
use std::sync::Arc;

use rediskv::fsck::{self, Fsck};
use rediskv::titea;
use rediskv::{Clock, KeyLayout, LIST_INITIAL_INDEX, LayoutKind, ManualClock, Metadata, RedisType, Version};
use rediskv::{ColumnFamily, KvBackend, MemoryBackend, WriteBatch};
use rediskv::{Db, Engine, Reply};

const HEAD: &str = "6B76 612E62";
const ID: Version = Version::Id([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
const ID_HEX: &str = "000102030405060708090A0B0C0D0E0F";
const EXP: &str = "0000018BCFE5687B";

/// The version in `key`'s metadata record, decoded as `db`'s layout reads it.
fn version_of<B: KvBackend>(db: &Db<'_, B>, key: &[u8]) -> Version {
    let record = db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(key)).unwrap();
    db.layout().decode_metadata(&record.expect("key exists")).unwrap().version
}

fn layout() -> KeyLayout {
    KeyLayout::titea(b"a.b")
}

fn db() -> (Db<'static, MemoryBackend>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0_MS));
    (Db::with_layout(MemoryBackend::new(), layout()).with_clock(clock.clone()).with_seed(7), clock)
}

fn get(db: &Db<'static, MemoryBackend>, cf: ColumnFamily, key: &[u8]) -> Option<Vec<u8>> {
    db.backend().get(cf, key).unwrap().map(|v| v.to_vec())
}

#[test]
fn record_keys_golden() {
    let l = layout();
    assert_eq!((l.kind(), l.version_len()), (LayoutKind::TiTea, 16));
    assert_eq!(l.metadata_key(b"foo"), h(&format!("{HEAD} 6D 666F6F")));
    // Element records name the collection by its id only: no key.
    assert_eq!(l.subkey(b"foo", ID, b"f1").unwrap(), h(&format!("{HEAD} 64 {ID_HEX} 6631")));
    assert_eq!(l.subkey(b"other", ID, b"f1").unwrap(), h(&format!("{HEAD} 64 {ID_HEX} 6631")));
    assert_eq!(l.member_key(b"foo", ID, b"m").unwrap(), h(&format!("{HEAD} 64 {ID_HEX} 00 6D")));
    assert_eq!(
        l.score_key(b"foo", ID, 1.5, b"m").unwrap(),
        h(&format!("{HEAD} 64 {ID_HEX} 01 BFF8000000000000 6D"))
    );
    // `list.go`: on a new list (head 0, tail −1) `RPush` writes at ++tail = 0, `LPush` at
    // --head = −1; the engine's first RPUSH and LPUSH write at its initial index and the one
    // before.
    assert_eq!(l.list_sub(LIST_INITIAL_INDEX), h("3E 0000000000000000"));
    assert_eq!(l.list_sub(LIST_INITIAL_INDEX - 1), h("3C FFFFFFFFFFFFFFFF"));
    assert_eq!(l.list_sub(LIST_INITIAL_INDEX + 1), h("3E 0000000000000001"));
    assert_eq!(l.decode_list_sub(&h("3C FFFFFFFFFFFFFFFE")), Some(LIST_INITIAL_INDEX - 2));
    assert_eq!(l.decode_list_sub(&h("3E FFFFFFFFFFFFFFFE")), None, "sign byte disagrees");
    assert_eq!(l.gc_record_key(b"a.b", ID).unwrap(), h(&format!("{HEAD} 67 {ID_HEX}")));
    assert_eq!(l.expire_record_key(1_700_000_000_123, b"foo"), h(&format!("{HEAD} 65 {EXP} 666F6F")));
    assert_eq!(l.namespace_range().start, h(&format!("{HEAD} 6D")));
    assert_eq!(l.index_record_tag(&h(&format!("{HEAD} 67 {ID_HEX}"))), Some(b'g'));
    assert_eq!(l.index_record_tag(&h(&format!("{HEAD} 6D 666F6F"))), None);
    // Database n is namespace + ":n", read by the base layout too.
    let db2 = l.for_database(2).unwrap();
    assert_eq!(db2.metadata_key(b"foo"), h("6B76 612E623A32 6D 666F6F"));
    assert_eq!(l.decode_metadata_key(&db2.metadata_key(b"foo")).unwrap().namespace, b"a.b:2");
    // "a.b" begins "a.b:2": only decoding tells whose a key is.
    assert_eq!(l.holds_metadata_key(&db2.metadata_key(b"foo")), None);
    assert_eq!(l.index_record_tag(&h("6B76 612E623A32 65")), Some(b'e'));
}

#[test]
fn record_keys_decode() {
    let l = layout();
    let sk_bytes = h(&format!("{HEAD} 64 {ID_HEX} 6631"));
    let sk = l.decode_subkey(&sk_bytes).unwrap();
    assert_eq!((sk.namespace, sk.version, sk.sub, sk.user_key), (&b"a.b"[..], ID, &b"f1"[..], &b""[..]));
    let score_bytes = h(&format!("{HEAD} 64 {ID_HEX} 01 BFF8000000000000 6D"));
    let score = l.decode_score_key(&score_bytes).unwrap();
    assert_eq!((score.score, score.member, score.version), (1.5, &b"m"[..], ID));
    assert!(l.decode_score_key(&h(&format!("{HEAD} 64 {ID_HEX} 00 BFF8000000000000 6D"))).is_err());
    assert!(l.decode_subkey(&h(&format!("{HEAD} 6D 666F6F"))).is_err(), "a metadata key is no element");
    assert!(l.decode_metadata_key(&h("6B76 612E63 6D 66")).is_err(), "another namespace");
    for full in [sk_bytes, score_bytes] {
        for cut in 0..full.len() {
            let _ = (l.decode_subkey(&full[..cut]), l.decode_score_key(&full[..cut]));
            let _ = l.decode_metadata_key(&full[..cut]);
        }
    }
}

#[test]
fn metadata_values_golden() {
    let l = layout();
    let hash =
        Metadata { size: 3, expire_ms: 1_700_000_000_123, ..Metadata::collection(RedisType::Hash, ID) };
    // type, id, count, created (filled at commit), expire.
    let bytes = h(&format!("68 {ID_HEX} 0000000000000003 0000000000000000 {EXP}"));
    assert_eq!(l.encode_metadata(&hash).unwrap(), bytes);
    let back = l.decode_metadata(&bytes).unwrap();
    assert_eq!(
        (back.ty, back.version, back.size, back.expire_ms),
        (RedisType::Hash, ID, 3, 1_700_000_000_123)
    );
    // A list's first and last position: one LPUSH and one RPUSH from the start.
    let list = Metadata {
        size: 2,
        head: LIST_INITIAL_INDEX - 1,
        tail: LIST_INITIAL_INDEX + 1,
        ..Metadata::collection(RedisType::List, ID)
    };
    let bytes = h(&format!(
        "6C {ID_HEX} 0000000000000002 0000000000000000 0000000000000000 FFFFFFFFFFFFFFFF 0000000000000000"
    ));
    assert_eq!(l.encode_metadata(&list).unwrap(), bytes);
    let back = l.decode_metadata(&bytes).unwrap();
    assert_eq!((back.head, back.tail, back.size), (LIST_INITIAL_INDEX - 1, LIST_INITIAL_INDEX + 1, 2));
    let string = Metadata::string(b"bar", 0);
    let bytes =
        h(&format!("72 {} 0000000000000000 0000000000000000 0000000000000000 626172", "00".repeat(16)));
    assert_eq!(l.encode_metadata(&string).unwrap(), bytes);
    assert_eq!(l.decode_metadata(&bytes).unwrap().value, b"bar");
    assert!(l.encode_metadata(&Metadata::collection(RedisType::Stream, Version::Short(1))).is_err());
    for bad in [format!("78 {ID_HEX} {}", "00".repeat(24)), format!("68 {ID_HEX} {} 00", "00".repeat(24))] {
        assert!(l.decode_metadata(&h(&bad)).is_err(), "{bad}");
    }
    let full = h(&format!("6C {ID_HEX} {} {}", "00".repeat(24), "00".repeat(16)));
    for cut in 0..full.len() {
        assert!(l.decode_metadata(&full[..cut]).is_err(), "{cut} bytes");
    }
    assert_eq!(layout().encode_member_score(1.5).unwrap(), b"1.5");
    assert_eq!(layout().encode_member_score(f64::NEG_INFINITY).unwrap(), b"-inf");
    assert_eq!(layout().decode_member_score(b"+Inf").unwrap(), f64::INFINITY);
    assert_eq!(layout().decode_member_score(b"1e3").unwrap(), 1000.0);
    assert!(layout().decode_member_score(b"NaN").is_err());
}

#[test]
fn records_titea_wrote_are_read() {
    let (mut db, _clock) = db();
    let mut batch = WriteBatch::new();
    let mut put = |cf, k: String, v: Vec<u8>| batch.put(cf, h(&k), v);
    let none = "0000000000000000";
    let created = "000000006553F100";
    // A hash `foo`: f1 → v1.
    put(
        ColumnFamily::Metadata,
        format!("{HEAD} 6D 666F6F"),
        h(&format!("68 {ID_HEX} 0000000000000001 {created} {none}")),
    );
    put(ColumnFamily::Subkey, format!("{HEAD} 64 {ID_HEX} 6631"), b"v1".to_vec());
    // A list `l` (6C) of another id: positions −1 and 0.
    let lid = "F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF";
    put(
        ColumnFamily::Metadata,
        format!("{HEAD} 6D 6C"),
        h(&format!("6C {lid} 0000000000000002 {created} {none} FFFFFFFFFFFFFFFF 0000000000000000")),
    );
    put(ColumnFamily::Subkey, format!("{HEAD} 64 {lid} 3C FFFFFFFFFFFFFFFF"), b"a".to_vec());
    put(ColumnFamily::Subkey, format!("{HEAD} 64 {lid} 3E 0000000000000000"), b"b".to_vec());
    // A sorted set `z` (7A): member m with score 1.5, as a client's text.
    let zid = "11111111111111111111111111111111";
    put(
        ColumnFamily::Metadata,
        format!("{HEAD} 6D 7A"),
        h(&format!("7A {zid} 0000000000000001 {created} {none}")),
    );
    put(ColumnFamily::Subkey, format!("{HEAD} 64 {zid} 00 6D"), b"1.50".to_vec());
    put(ColumnFamily::Score, format!("{HEAD} 64 {zid} 01 BFF8000000000000 6D"), b"1.50".to_vec());
    // A string `s` (73) expiring 100 s ahead, with its expire record.
    let at = format!("{:016X}", T0_MS + 100_000);
    let sid = "22222222222222222222222222222222";
    put(
        ColumnFamily::Metadata,
        format!("{HEAD} 6D 73"),
        h(&format!("72 {sid} {none} {created} {at} 626172")),
    );
    put(ColumnFamily::Metadata, format!("{HEAD} 65 {at} 73"), h(&format!("{sid} 72")));
    db.backend().write(batch).unwrap();

    assert_eq!(run(&mut db, "HGETALL foo"), bulks(&["f1", "v1"]));
    assert_eq!(run(&mut db, "LRANGE l 0 -1"), bulks(&["a", "b"]));
    assert_eq!(run(&mut db, "ZRANGE z 0 -1 WITHSCORES"), bulks(&["m", "1.5"]));
    assert_eq!(run(&mut db, "GET s"), bulk("bar"));
    assert_eq!(run(&mut db, "TTL s"), int(100));
    assert_eq!(run(&mut db, "DBSIZE"), int(4));
    assert!(fsck::check(db.backend(), &layout(), T0_MS).unwrap().is_empty());

    // Written back as TiTea writes: the count follows, created-at is kept, positions signed.
    assert_eq!(run(&mut db, "HSET foo f2 v2"), int(1));
    let meta = get(&db, ColumnFamily::Metadata, &h(&format!("{HEAD} 6D 666F6F"))).unwrap();
    assert_eq!(meta, h(&format!("68 {ID_HEX} 0000000000000002 {created} {none}")));
    assert_eq!(run(&mut db, "LPUSH l z"), int(3));
    assert_eq!(
        get(&db, ColumnFamily::Subkey, &h(&format!("{HEAD} 64 {lid} 3C FFFFFFFFFFFFFFFE"))),
        Some(b"z".to_vec())
    );
    assert_eq!(run(&mut db, "LRANGE l 0 -1"), bulks(&["z", "a", "b"]));
    // PERSIST drops the expire record; EXPIRE writes a new one.
    assert_eq!(run(&mut db, "PERSIST s"), int(1));
    assert_eq!(get(&db, ColumnFamily::Metadata, &h(&format!("{HEAD} 65 {at} 73"))), None);
    assert_eq!(run(&mut db, "PEXPIRE s 5000"), int(1));
    let at2 = format!("{:016X}", T0_MS + 5000);
    assert_eq!(
        get(&db, ColumnFamily::Metadata, &h(&format!("{HEAD} 65 {at2} 73"))),
        Some(h(&format!("{sid} 72")))
    );
    // DEL of a collection leaves its GC record, which TiTea's GC (and this crate's
    // collector) act on.
    assert_eq!(run(&mut db, "DEL foo"), int(1));
    assert_eq!(get(&db, ColumnFamily::Metadata, &h(&format!("{HEAD} 67 {ID_HEX}"))), Some(b"h".to_vec()));
    let report = rediskv::gc::compact(db.backend(), &layout(), T0_MS, 0).unwrap();
    assert_eq!(report.dropped_subkeys, 2, "both fields of the deleted hash");
    assert_eq!(run(&mut db, "LRANGE l 0 -1"), bulks(&["z", "a", "b"]));
    let garbage = Fsck::new(&layout()).report_garbage(true).run(db.backend(), T0_MS).unwrap();
    assert_eq!(garbage, vec![]);
}

#[test]
fn writes_keep_the_index_records() {
    let (mut db, clock) = db();
    assert_eq!(run(&mut db, "HSET h a 1"), int(1));
    let id = version_of(&db, b"h");
    assert!(matches!(id, Version::Id(b) if b[..8] != [0; 8]), "a 16-byte id");
    let meta = get(&db, ColumnFamily::Metadata, &layout().metadata_key(b"h")).unwrap();
    assert_eq!(meta[titea::CREATED_AT], (T0_MS / 1000).to_be_bytes(), "created-at in seconds");
    // Overwritten by a string with an expiry: the hash's GC record and the string's expire
    // record, in the same batch.
    assert_eq!(run(&mut db, "SET h x PX 2000"), Reply::OK);
    assert_eq!(
        get(&db, ColumnFamily::Metadata, &layout().gc_record_key(b"a.b", id).unwrap()),
        Some(b"h".to_vec())
    );
    let exp = layout().expire_record_key(T0_MS + 2000, b"h");
    let index = get(&db, ColumnFamily::Metadata, &exp).unwrap();
    assert_eq!(index[16], b'r');
    // Expired and swept: the expire record goes with the key.
    clock.advance_ms(5000);
    let swept = db.delete_expired(&[layout().metadata_key(b"h").into()], clock.now_ms()).unwrap();
    assert_eq!(swept.len(), 1);
    assert_eq!(get(&db, ColumnFamily::Metadata, &exp), None);
    // RENAME moves the collection to a new id and marks the old one.
    run(&mut db, "ZADD z 1 a 2 b");
    let old = version_of(&db, b"z");
    assert_eq!(run(&mut db, "RENAME z z2"), Reply::OK);
    assert!(get(&db, ColumnFamily::Metadata, &layout().gc_record_key(b"a.b", old).unwrap()).is_some());
    assert_eq!(run(&mut db, "ZRANGE z2 0 -1 WITHSCORES"), bulks(&["a", "1", "b", "2"]));
    // Databases.
    run(&mut db, "SELECT 3");
    run(&mut db, "SADD s m");
    assert!(get(&db, ColumnFamily::Metadata, &KeyLayout::titea(b"a.b:3").metadata_key(b"s")).is_some());
    assert_eq!(run(&mut db, "XADD x * f v"), err("ERR the titea layout cannot store a stream key"));
    assert!(fsck::check(db.backend(), &layout(), clock.now_ms()).unwrap().is_empty());
    let report = rediskv::gc::compact(db.backend(), &layout(), clock.now_ms(), 0).unwrap();
    assert_eq!((report.dropped_subkeys, report.dropped_scores), (3, 2), "the hash's field, the old zset's");
    let garbage = Fsck::new(&layout()).report_garbage(true).run(db.backend(), clock.now_ms()).unwrap();
    assert_eq!(garbage, vec![]);
}

/// A new list's first element lands where TiTea's own `RPush` and `LPush` put it (`list.go`:
/// position 0, or −1), and its metadata names it first and last.
#[test]
fn new_lists_start_at_titeas_positions() {
    let (mut db, _clock) = db();
    assert_eq!(run(&mut db, "RPUSH r a"), int(1));
    assert_eq!(run(&mut db, "LPUSH l a"), int(1));
    for (key, sub, ends) in [
        ("r", "3E 0000000000000000", "0000000000000000 0000000000000000"),
        ("l", "3C FFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFF FFFFFFFFFFFFFFFF"),
    ] {
        let id = version_of(&db, key.as_bytes()).to_string();
        let element = get(&db, ColumnFamily::Subkey, &h(&format!("{HEAD} 64 {id} {sub}")));
        assert_eq!(element, Some(b"a".to_vec()), "{key}");
        let meta = get(&db, ColumnFamily::Metadata, &layout().metadata_key(key.as_bytes())).unwrap();
        assert_eq!(meta[41..], h(ends), "{key}");
    }
}

/// TiTea gives a new string an object id (`NewMeta`: `util.UUID()`), keeps it and the
/// created-at time while the string lives (`existsForWrite` reuses the decoded meta), and
/// gives an expired one a new id (`Meta.Reset`). The expire record holds the id.
#[test]
fn strings_get_an_object_id_kept_while_they_live() {
    let (mut db, clock) = db();
    let mkey = layout().metadata_key(b"s");
    let record = |db: &Db<'static, MemoryBackend>| get(db, ColumnFamily::Metadata, &mkey).unwrap();
    let id_of = |raw: &[u8]| u128::from_be_bytes(raw[titea::OBJECT_ID].try_into().unwrap());
    assert_eq!(run(&mut db, "SET s a"), Reply::OK);
    let id = id_of(&record(&db));
    assert!(id > u128::from(u64::MAX), "a 16-byte id, as a collection's: {id:032x}");
    clock.advance_ms(3000);
    assert_eq!(run(&mut db, "SET s b PX 10000"), Reply::OK);
    assert_eq!(run(&mut db, "APPEND s c"), int(2));
    let raw = record(&db);
    assert_eq!(id_of(&raw), id, "kept by writes over the live string");
    assert_eq!(raw[titea::CREATED_AT], (T0_MS / 1000).to_be_bytes(), "created-at kept too");
    let expire = get(&db, ColumnFamily::Metadata, &layout().expire_record_key(T0_MS + 13_000, b"s"));
    assert_eq!(expire, Some([&id.to_be_bytes()[..], b"r"].concat()));
    clock.advance_ms(20_000);
    assert_eq!(run(&mut db, "SET s d"), Reply::OK);
    let raw = record(&db);
    assert_ne!(id_of(&raw), id, "an expired string's id is not reused");
    assert_eq!(raw[titea::CREATED_AT], ((T0_MS + 23_000) / 1000).to_be_bytes());
    let renewed = id_of(&raw);
    assert_eq!(run(&mut db, "DEL s"), int(1));
    assert_eq!(run(&mut db, "SET s e"), Reply::OK);
    assert_ne!(id_of(&record(&db)), renewed, "nor a deleted one's");
}

#[test]
fn watch_sees_an_element_write_without_a_metadata_write() {
    // TiTea's element records name no key: the engine finds the key by the id it looked up.
    let engine = Engine::with_layout(MemoryBackend::new(), layout());
    let (mut a, mut b) = (engine.session(), engine.session());
    let run_in = |s: &mut rediskv::Session, line: &str| engine.execute(s, &argv(line));
    run_in(&mut a, "HSET h f 1");
    run_in(&mut a, "ZADD z 1 m");
    for (change, key) in [("HSET h f 2", "h"), ("ZADD z 5 m", "z")] {
        assert_eq!(run_in(&mut a, &format!("WATCH {key}")), Reply::OK);
        run_in(&mut b, change);
        run_in(&mut a, "MULTI");
        run_in(&mut a, "PING");
        assert_eq!(run_in(&mut a, "EXEC"), Reply::NilArray, "{change}");
    }
}

/// A layout given the other layouts' version variant refuses it with an error: TiTea's a
/// 64-bit version, Kvrocks' (and NeoKV's, camellia's) a 16-byte id. Decoders give each
/// layout its own variant, and a fresh version is of the layout's variant.
#[test]
fn versions_of_the_other_variant_are_errors() {
    let short = Version::Short(7);
    let mismatch = |r: rediskv::Result<Vec<u8>>| matches!(r, Err(rediskv::Error::LayoutMismatch(_)));
    let titea = layout();
    assert!(mismatch(titea.subkey(b"h", short, b"f")));
    assert!(mismatch(titea.score_key(b"z", short, 1.5, b"m")));
    assert!(mismatch(titea.member_key(b"z", short, b"m")));
    assert!(mismatch(titea.gc_record_key(b"a.b", short)));
    assert!(mismatch(titea.encode_metadata(&Metadata::collection(RedisType::Hash, short))));
    for other in [KeyLayout::default(), KeyLayout::neokv(1, 2), KeyLayout::camellia(b"default")] {
        assert!(mismatch(other.subkey(b"h", ID, b"f")), "{:?}", other.kind());
        assert!(mismatch(other.score_key(b"z", ID, 1.5, b"m")), "{:?}", other.kind());
        assert!(mismatch(other.subkey_prefix(b"h", ID, 0)), "{:?}", other.kind());
        assert!(
            mismatch(other.encode_metadata(&Metadata::collection(RedisType::Hash, ID))),
            "{:?}",
            other.kind()
        );
        let sub = other.subkey(b"h", short, b"f").unwrap();
        assert_eq!(other.decode_subkey(&sub).unwrap().version, short);
        // A string carries no version: any layout writes it.
        assert!(other.encode_metadata(&Metadata::string(b"v", 0)).is_ok());
    }
    let sub = titea.subkey(b"h", ID, b"f").unwrap();
    assert_eq!(titea.decode_subkey(&sub).unwrap().version, ID);
    assert_eq!(ID.to_string(), ID_HEX.to_lowercase());
    let (mut db, _clock) = db();
    assert!(matches!(db.new_version(), Version::Id(_)));
    run(&mut db, "SET s v");
    assert!(matches!(version_of(&db, b"s"), Version::Id(_)), "strings get ids");
    let mut kvrocks = Db::new(MemoryBackend::new());
    assert!(matches!(kvrocks.new_version(), Version::Short(_)));
    run(&mut kvrocks, "SET s v");
    assert_eq!(version_of(&kvrocks, b"s"), Version::NONE);
}
