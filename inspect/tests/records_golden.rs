//! Golden records for `rediskv-inspect`'s JSON, written by hand from each system's own code
//! (never captured from this crate): each is decoded, checked field by field, and encoded
//! back to its own bytes.
//!
//! - Kvrocks: `__namespace` = `0B 5F5F6E616D657370616365`, then the key length u32 and the
//!   key; a score in order-preserving form (`-inf` = `000FFFFFFFFFFFFF`, `+inf` =
//!   `FFF0000000000000`, 1.5 = `BFF8000000000000`).
//! - TiTea (`server/store/list.go`, `zset.go`, `meta.go`, `pkg/util/number`): header `kv` +
//!   `a.b` = `6B76 612E62`; `d` = 64, `m` = 6D; the object id `00 01 … 0F`; list positions
//!   `'<'` (3C) or `'>'` (3E) then the i64 (`LPush` on a new list writes −1, `RPush` 0); a
//!   zset member `00` + member → the score's text as the client sent it; a score `01` +
//!   `Float64ToUint64` (the order-preserving form above; Go's NaN `7FF8000000000001` becomes
//!   `8007FFFFFFFFFFFE`) + member → the same text.
//! - camellia (`ZAddCommander`, `Utils.doubleToBytes`, `BytesUtils.toBytes(double)`,
//!   `KeyMeta.toBytes`): `s#` = `7323`, `k#` = `6B23`, `m#` = `6D23`, `ns` = `6E73`; the
//!   member's value `String.valueOf(score)` (`"-Infinity"`, `"NaN"`, `"-0.0"`), the score
//!   key's `doubleToRawLongBits` big-endian (NaN `7FF8000000000000`, `-0.0`
//!   `8000000000000000`), no expiry −1.
//! - `z` = 7A, `m` = 6D, `s` = 73, `bar` = `626172`; version `0102030405060708` =
//!   72623859790382856.

use rediskv::{ColumnFamily, KeyLayout, LIST_INITIAL_INDEX, RedisType};
use rediskv_inspect::record::{self, Record, json_score, score_json, unhex};
use serde_json::{Value, json};

const KVROCKS: &str = "0B 5F5F6E616D657370616365";
const TITEA: &str = "6B76 612E62";
const ID: &str = "000102030405060708090A0B0C0D0E0F";
const VERSION: &str = "0102030405060708";

fn h(text: &str) -> Vec<u8> {
    unhex(text).unwrap()
}

/// Decodes the record (`owner` the type its metadata names), checks every field of
/// `expected`, and checks that the JSON encodes back to the same bytes.
fn round_trip(
    layout: &KeyLayout,
    cf: ColumnFamily,
    key: &str,
    value: &[u8],
    owner: Option<RedisType>,
) -> Value {
    let json = record::decode(layout, cf, &h(key), Some(value), owner).unwrap();
    let back = record::encode(layout, &json).unwrap();
    assert_eq!(back, Record { cf, key: h(key), value: value.to_vec() }, "{json}");
    json
}

/// `json` holds every field of `expected` with its value, and none of `absent`.
fn assert_fields(json: &Value, expected: Value, absent: &[&str]) {
    for (name, value) in expected.as_object().unwrap() {
        assert_eq!(&json[name], value, "{name} in {json}");
    }
    for name in absent {
        assert!(json.get(name).is_none(), "{name} in {json}");
    }
}

#[test]
fn titea_list_elements_keep_their_sign_byte() {
    let l = KeyLayout::titea(b"a.b");
    let list = Some(RedisType::List);
    let first_lpush =
        round_trip(&l, ColumnFamily::Subkey, &format!("{TITEA} 64 {ID} 3C FFFFFFFFFFFFFFFF"), b"a", list);
    let id = json!("000102030405060708090a0b0c0d0e0f");
    assert_fields(&first_lpush, json!({"index": LIST_INITIAL_INDEX - 1, "value": "a", "version": id}), &[]);
    let first_rpush =
        round_trip(&l, ColumnFamily::Subkey, &format!("{TITEA} 64 {ID} 3E 0000000000000000"), b"b", list);
    assert_fields(&first_rpush, json!({"index": LIST_INITIAL_INDEX}), &[]);
    let third =
        round_trip(&l, ColumnFamily::Subkey, &format!("{TITEA} 64 {ID} 3E 0000000000000002"), b"c", list);
    assert_fields(&third, json!({"index": LIST_INITIAL_INDEX + 2}), &[]);
    // A sign byte that disagrees with the position is not a list element.
    let bad = h(&format!("{TITEA} 64 {ID} 3E FFFFFFFFFFFFFFFF"));
    assert!(record::decode(&l, ColumnFamily::Subkey, &bad, Some(b"x"), list).is_err());
}

#[test]
fn titea_zset_members_keep_their_marker_and_the_clients_text() {
    let l = KeyLayout::titea(b"a.b");
    let zset = Some(RedisType::ZSet);
    let member = format!("{TITEA} 64 {ID} 00 6D");
    let sent = round_trip(&l, ColumnFamily::Subkey, &member, b"1.50", zset);
    assert_fields(&sent, json!({"member": "m", "score": 1.5, "value": "1.50"}), &[]);
    let shortest = round_trip(&l, ColumnFamily::Subkey, &member, b"1.5", zset);
    assert_fields(&shortest, json!({"member": "m", "score": 1.5}), &["value"]);
    // Without a value, the shortest text is written, after the marker.
    let json =
        json!({"cf": "subkey", "namespace": "a.b", "key": "", "version": ID, "member": "m", "score": 1.5});
    let encoded = record::encode(&l, &json).unwrap();
    assert_eq!((encoded.key, encoded.value), (h(&member), b"1.5".to_vec()));

    let score = round_trip(
        &l,
        ColumnFamily::Score,
        &format!("{TITEA} 64 {ID} 01 BFF8000000000000 6D"),
        b"1.50",
        None,
    );
    assert_fields(
        &score,
        json!({"cf": "score", "member": "m", "score": 1.5, "value": "1.50"}),
        &["score_bytes"],
    );
    let low = round_trip(
        &l,
        ColumnFamily::Score,
        &format!("{TITEA} 64 {ID} 01 000FFFFFFFFFFFFF 6D"),
        b"-inf",
        None,
    );
    assert_fields(&low, json!({"score": "-inf"}), &["value"]);
    let high = round_trip(
        &l,
        ColumnFamily::Score,
        &format!("{TITEA} 64 {ID} 01 FFF0000000000000 6D"),
        b"+inf",
        None,
    );
    assert_fields(&high, json!({"score": "inf", "value": "+inf"}), &[]);
    // ZADD z nan m: the member's text is "nan", and TiTea's score key reads back (as
    // TiTea's own Uint64ToFloat64 does) as a tiny positive number.
    let nan = round_trip(&l, ColumnFamily::Subkey, &member, b"nan", zset);
    assert_fields(&nan, json!({"member": "m", "score": "nan", "value": "nan"}), &[]);
    let nan_key =
        round_trip(&l, ColumnFamily::Score, &format!("{TITEA} 64 {ID} 01 8007FFFFFFFFFFFE 6D"), b"nan", None);
    assert_fields(&nan_key, json!({"score": f64::from_bits(0x0007_FFFF_FFFF_FFFE), "value": "nan"}), &[]);
}

#[test]
fn infinite_scores_are_strings_in_every_layout() {
    let kvrocks = KeyLayout::default();
    let zset = Some(RedisType::ZSet);
    for (ordered, name) in [("000FFFFFFFFFFFFF", "-inf"), ("FFF0000000000000", "inf")] {
        let member = round_trip(
            &kvrocks,
            ColumnFamily::Subkey,
            &format!("{KVROCKS} 00000001 7A {VERSION} 6D"),
            &h(ordered),
            zset,
        );
        assert_fields(
            &member,
            json!({"member": "m", "score": name, "version": 72_623_859_790_382_856u64}),
            &["value"],
        );
        let score = round_trip(
            &kvrocks,
            ColumnFamily::Score,
            &format!("{KVROCKS} 00000001 7A {VERSION} {ordered} 6D"),
            b"",
            None,
        );
        assert_fields(&score, json!({"member": "m", "score": name}), &["value", "score_bytes"]);
    }
    let camellia = KeyLayout::camellia(b"ns");
    for (bits, text, name) in
        [("FFF0000000000000", "-Infinity", "-inf"), ("7FF0000000000000", "Infinity", "inf")]
    {
        let member = round_trip(
            &camellia,
            ColumnFamily::Subkey,
            &format!("7323 6E73 00000001 7A {VERSION} 6D"),
            text.as_bytes(),
            zset,
        );
        assert_fields(&member, json!({"member": "m", "score": name}), &["value"]);
        let score = round_trip(
            &camellia,
            ColumnFamily::Score,
            &format!("6B23 6E73 00000001 7A {VERSION} {bits} 6D"),
            b"",
            None,
        );
        assert_fields(&score, json!({"member": "m", "score": name}), &["score_bytes"]);
    }
    assert_eq!((score_json(f64::INFINITY), score_json(f64::NEG_INFINITY)), (json!("inf"), json!("-inf")));
    assert_eq!((score_json(f64::NAN), score_json(-2.5)), (json!("nan"), json!(-2.5)));
    assert_eq!(json_score(&json!("-inf")).unwrap(), f64::NEG_INFINITY);
    assert_eq!(json_score(&json!("+inf")).unwrap(), f64::INFINITY);
    assert!(json_score(&json!("nan")).unwrap().is_nan());
    assert!(json_score(&json!("many")).is_err());
    // Kvrocks and NeoKV never store NaN (ZADD refuses it): encoding one is an error.
    let json = json!({"cf": "score", "key": "z", "version": 5, "member": "m", "score": "nan"});
    assert!(record::encode(&kvrocks, &json).unwrap_err().contains("NaN"));
}

/// camellia parses a score with Java's `Double.parseDouble`, which takes "NaN" and "-0.0":
/// it stores what it parsed, bits and text.
#[test]
fn camellias_nan_and_negative_zero_keep_their_bytes() {
    let l = KeyLayout::camellia(b"ns");
    let zset = Some(RedisType::ZSet);
    let member = format!("7323 6E73 00000001 7A {VERSION} 6D");
    let nan = round_trip(&l, ColumnFamily::Subkey, &member, b"NaN", zset);
    assert_fields(&nan, json!({"score": "nan", "value": "NaN"}), &[]);
    let nan_key = round_trip(
        &l,
        ColumnFamily::Score,
        &format!("6B23 6E73 00000001 7A {VERSION} 7FF8000000000000 6D"),
        b"",
        None,
    );
    assert_fields(&nan_key, json!({"score": "nan", "score_bytes": "7ff8000000000000", "member": "m"}), &[]);
    let zero = round_trip(&l, ColumnFamily::Subkey, &member, b"-0.0", zset);
    assert_fields(&zero, json!({"score": 0.0, "value": "-0.0"}), &[]);
    let zero_key = round_trip(
        &l,
        ColumnFamily::Score,
        &format!("6B23 6E73 00000001 7A {VERSION} 8000000000000000 6D"),
        b"",
        None,
    );
    assert_fields(&zero_key, json!({"score": 0.0, "score_bytes": "8000000000000000"}), &[]);
}

#[test]
fn strings_show_the_version_their_system_writes() {
    // TiTea (`meta.go` EncodeMetaValue): type 'r', id, count 0, created-at s, expire-at ms, value.
    let titea = KeyLayout::titea(b"a.b");
    let value = h(&format!("72 {ID} 0000000000000000 000000006553F100 0000000000000000 626172"));
    let json = round_trip(&titea, ColumnFamily::Metadata, &format!("{TITEA} 6D 73"), &value, None);
    let id = json!("000102030405060708090a0b0c0d0e0f");
    assert_fields(
        &json,
        json!({"type": "string", "version": id, "created_s": 1_700_000_000u64, "value": "bar"}),
        &[],
    );
    // camellia (`KeyMeta.toBytes`): encode version 0, type 1, key version, expire −1, value.
    let camellia = KeyLayout::camellia(b"ns");
    let value = h(&format!("00 01 {VERSION} FFFFFFFFFFFFFFFF 626172"));
    let json = round_trip(&camellia, ColumnFamily::Metadata, "6D23 6E73 73", &value, None);
    assert_fields(
        &json,
        json!({"type": "string", "version": 72_623_859_790_382_856u64, "expire_ms": 0, "value": "bar"}),
        &[],
    );
    // Kvrocks' strings carry none.
    let kvrocks = KeyLayout::default();
    let json = round_trip(
        &kvrocks,
        ColumnFamily::Metadata,
        &format!("{KVROCKS} 73"),
        &h("81 0000000000000000 626172"),
        None,
    );
    assert_fields(&json, json!({"type": "string", "value": "bar"}), &["version"]);
}
