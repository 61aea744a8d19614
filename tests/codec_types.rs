//! The Kvrocks record types beyond the five Redis collections: golden metadata vectors
//! written by hand from Kvrocks' layout (`redis_metadata.h/.cc`; see `src/codec/extra.rs`),
//! round trips, truncation, and what the garbage decision makes of each type.
//!
//! Hex notes: VERSION = `0102030405060708`; 1700000000123 ms = `0000018BCFE5687B`;
//! 0.01 = `3F847AE147AE147B` (ordered: sign bit set, `BF84…`); 0.925 = `3FED99999999999A`
//! (ordered `BFED…`); -2.5 = `C004000000000000` (ordered: all bits flipped, `3FFBFFFFFFFFFFFF`);
//! f64::MAX = `7FEFFFFFFFFFFFFF` (ordered `FFEF…`).

use proptest::prelude::*;
use rediskv::ColumnFamily;
use rediskv::Error;
use rediskv::gc::{Decision, decide};
use rediskv::{
    BloomFields, Extra, Float, KeyLayout, Metadata, RedisType, StreamFields, StreamId, TDigestFields,
    TimeSeriesFields, TopKFields, Version, peek_type_and_expire,
};

fn h(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap()).collect()
}

const VERSION: Version = Version::Short(0x0102_0304_0506_0708);
const EXPIRE_MS: u64 = 1_700_000_000_123;

fn meta(ty: RedisType, expire_ms: u64, size: u64, extra: Extra, value: &'static [u8]) -> Metadata<'static> {
    let version = if ty.is_single_kv() { Version::NONE } else { VERSION };
    Metadata { ty, expire_ms, version, size, head: 0, tail: 0, blind_write: false, value, extra }
}

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId { ms, seq }
}

fn stream(group_number: Option<u64>) -> Extra {
    Extra::Stream(Box::new(StreamFields {
        last_generated_id: id(5, 1),
        recorded_first_entry_id: id(1, 0),
        max_deleted_entry_id: id(0, 0),
        first_entry_id: id(1, 0),
        last_entry_id: id(5, 1),
        entries_added: 5,
        group_number,
    }))
}

const STREAM_BODY: &str = "0000000000000005 0000000000000001  0000000000000001 0000000000000000
    0000000000000000 0000000000000000  0000000000000001 0000000000000000
    0000000000000005 0000000000000001  0000000000000005";

/// (description, struct, hand-written bytes).
fn vectors() -> Vec<(&'static str, Metadata<'static>, Vec<u8>)> {
    let v = "0102030405060708";
    vec![
        (
            "bitmap",
            meta(RedisType::Bitmap, 0, 1024, Extra::None, b""),
            h(&format!("86 0000000000000000 {v} 0000000000000400")),
        ),
        (
            "sortedint+expire",
            meta(RedisType::Sortedint, EXPIRE_MS, 2, Extra::None, b""),
            h(&format!("87 0000018BCFE5687B {v} 0000000000000002")),
        ),
        (
            "stream",
            meta(RedisType::Stream, 0, 3, stream(Some(2)), b""),
            h(&format!("88 0000000000000000 {v} 0000000000000003 {STREAM_BODY} 0000000000000002")),
        ),
        (
            "stream without group_number (older writer)",
            meta(RedisType::Stream, 0, 3, stream(None), b""),
            h(&format!("88 0000000000000000 {v} 0000000000000003 {STREAM_BODY}")),
        ),
        (
            "bloom filter",
            meta(
                RedisType::BloomFilter,
                0,
                7,
                Extra::Bloom(Box::new(BloomFields {
                    n_filters: 1,
                    expansion: 2,
                    base_capacity: 100,
                    error_rate: Float::new(0.01),
                    bloom_bytes: 128,
                })),
                b"",
            ),
            h(&format!("89 0000000000000000 {v} 0000000000000007 0001 0002 00000064 BF847AE147AE147B 00000080")),
        ),
        ("json", meta(RedisType::Json, 0, 0, Extra::Json { format: 0 }, b"{}"), h("8A 0000000000000000 00 7B7D")),
        (
            "json cbor+expire",
            meta(RedisType::Json, EXPIRE_MS, 0, Extra::Json { format: 1 }, b"\xA0"),
            h("8A 0000018BCFE5687B 01 A0"),
        ),
        (
            "hyperloglog",
            meta(RedisType::HyperLogLog, 0, 0, Extra::HyperLogLog { encode_type: 0 }, b""),
            h(&format!("8B 0000000000000000 {v} 0000000000000000 00")),
        ),
        (
            "tdigest",
            meta(
                RedisType::TDigest,
                0,
                0,
                Extra::TDigest(Box::new(TDigestFields {
                    compression: 100,
                    capacity: 610,
                    unmerged_nodes: 1,
                    merged_nodes: 2,
                    total_weight: 3,
                    merged_weight: 2,
                    minimum: Float::new(-2.5),
                    maximum: Float::new(f64::MAX),
                    total_observations: 3,
                    merge_times: 1,
                })),
                b"",
            ),
            h(&format!(
                "8C 0000000000000000 {v} 0000000000000000 00000064 00000262 0000000000000001 0000000000000002
                 0000000000000003 0000000000000002 3FFBFFFFFFFFFFFF FFEFFFFFFFFFFFFF 0000000000000003 0000000000000001"
            )),
        ),
        (
            "timeseries",
            meta(
                RedisType::TimeSeries,
                0,
                4,
                Extra::TimeSeries(Box::new(TimeSeriesFields {
                    retention_time: 3_600_000,
                    chunk_size: 256,
                    chunk_type: 1,
                    duplicate_policy: 2,
                    last_timestamp: Some(EXPIRE_MS),
                })),
                b"src",
            ),
            h(&format!(
                "8D 0000000000000000 {v} 0000000000000004 000000000036EE80 0000000000000100 01 02 00000003 737263 0000018BCFE5687B"
            )),
        ),
        (
            "topk",
            meta(
                RedisType::TopK,
                0,
                0,
                Extra::TopK(Box::new(TopKFields { top_k: 50, width: 2000, depth: 7, decay: Float::new(0.925) })),
                b"",
            ),
            h(&format!("8E 0000000000000000 {v} 0000000000000000 00000032 07D0 00000007 BFED99999999999A")),
        ),
    ]
}

#[test]
fn golden_encode_and_decode() {
    for (what, m, bytes) in vectors() {
        assert_eq!(m.to_vec(), bytes, "encode {what}");
        assert_eq!(m.encoded_len(), bytes.len(), "encoded_len {what}");
        assert_eq!(Metadata::decode(&bytes), Ok(m.clone()), "decode {what}");
        assert_eq!(peek_type_and_expire(&bytes), Ok((m.ty, m.expire_ms)), "peek {what}");
    }
}

#[test]
fn legacy_forms_decode() {
    // bit 7 clear: u32 expire in seconds, u32 size; the extra fields are unchanged.
    let bitmap = h("06 6553F100 0102030405060708 00000400");
    let m = Metadata::decode(&bitmap).unwrap();
    assert_eq!((m.ty, m.expire_ms, m.version, m.size), (RedisType::Bitmap, 1_700_000_000_000, VERSION, 1024));
    let json = h("0A 00000000 00 5B5D");
    let m = Metadata::decode(&json).unwrap();
    assert_eq!((m.ty, m.extra, m.value), (RedisType::Json, Extra::Json { format: 0 }, &b"[]"[..]));
    let hll = h("0B 00000000 0102030405060708 00000000 00");
    assert_eq!(Metadata::decode(&hll).unwrap().extra, Extra::HyperLogLog { encode_type: 0 });
}

#[test]
fn truncation_and_trailing_bytes() {
    for (what, m, bytes) in vectors() {
        let optional_tail = matches!(
            &m.extra,
            Extra::Stream(f) if f.group_number.is_some()
        ) || matches!(&m.extra, Extra::TimeSeries(t) if t.last_timestamp.is_some());
        for len in 0..bytes.len() {
            let cut = Metadata::decode(&bytes[..len]);
            let fixed_end = if m.ty == RedisType::Json { 10 } else { bytes.len() };
            if len >= fixed_end || (optional_tail && len == bytes.len() - 8) {
                assert!(cut.is_ok(), "{what} cut to {len}: {cut:?}");
            } else {
                assert!(matches!(cut, Err(Error::Truncated { .. })), "{what} cut to {len}: {cut:?}");
            }
        }
        if !m.ty.is_single_kv() {
            let mut long = bytes.clone();
            long.extend_from_slice(&[0; 9]);
            assert!(matches!(Metadata::decode(&long), Err(Error::TrailingBytes { .. })), "{what}");
        }
    }
    // The only HyperLogLog encoding Kvrocks writes is 0 (dense).
    let hll = h("8B 0000000000000000 0102030405060708 0000000000000000 01");
    assert_eq!(
        Metadata::decode(&hll),
        Err(Error::InvalidField { what: "hyperloglog encode type", value: 1 })
    );
    // JSON cannot be blind-write (single KV).
    assert_eq!(Metadata::decode(&h("CA 0000000000000000 00")), Err(Error::InvalidFlags(0xCA)));
}

#[test]
fn type_classes_and_names() {
    let single: Vec<_> = RedisType::ALL.iter().filter(|t| t.is_single_kv()).collect();
    assert_eq!(single, [&RedisType::String, &RedisType::Json]);
    let not_emptyable: Vec<_> = RedisType::ALL.iter().filter(|t| !t.is_emptyable()).collect();
    assert_eq!(
        not_emptyable,
        [
            &RedisType::Hash,
            &RedisType::List,
            &RedisType::Set,
            &RedisType::ZSet,
            &RedisType::Bitmap,
            &RedisType::Sortedint
        ]
    );
    for (i, ty) in RedisType::ALL.iter().enumerate() {
        assert_eq!(usize::from(ty.id()), i + 1);
        assert_eq!(RedisType::from_id(ty.id()), Ok(*ty));
    }
    assert_eq!(RedisType::BloomFilter.name(), "MBbloom--");
    assert_eq!(RedisType::Json.name(), "ReJSON-RL");
    assert_eq!(RedisType::TDigest.name(), "TDIS-TYPE");
    assert_eq!((RedisType::Bitmap.name(), RedisType::Bitmap.reply_name()), ("bitmap", "string"));
}

#[test]
fn new_collections_carry_kvrocks_defaults() {
    let td = Metadata::collection(RedisType::TDigest, Version::Short(9));
    let Extra::TDigest(f) = td.extra else { panic!("{td:?}") };
    assert_eq!((f.minimum.get(), f.maximum.get()), (f64::MAX, f64::MIN));
    // A mismatched extra is replaced by the type's defaults when written.
    let odd = Metadata {
        extra: Extra::Json { format: 1 },
        ..Metadata::collection(RedisType::Bitmap, Version::Short(9))
    };
    assert_eq!(Metadata::decode(&odd.to_vec()).unwrap().extra, Extra::None);
    let hll =
        Metadata { extra: Extra::None, ..Metadata::collection(RedisType::HyperLogLog, Version::Short(9)) };
    assert_eq!(Metadata::decode(&hll.to_vec()).unwrap().extra, Extra::HyperLogLog { encode_type: 0 });
}

#[test]
fn liveness_and_gc_for_every_type() {
    let layout = KeyLayout::default();
    let sub = layout.subkey(b"k", VERSION, b"0").unwrap();
    for ty in RedisType::ALL {
        let m = Metadata { version: VERSION, ..Metadata::collection(ty, VERSION) };
        let empty = m.to_vec();
        let full = Metadata { size: 1, ..m.clone() }.to_vec();
        let verdict = |raw: &[u8]| decide(&layout, ColumnFamily::Subkey, &sub, |_| Some(raw.to_vec()), 0, 0);
        let expect_empty =
            if ty.is_single_kv() || !ty.is_emptyable() { Decision::Drop } else { Decision::Keep };
        assert_eq!(verdict(&empty), expect_empty, "{ty:?} size 0");
        let expect_full = if ty.is_single_kv() { Decision::Drop } else { Decision::Keep };
        assert_eq!(verdict(&full), expect_full, "{ty:?} size 1");
        assert_eq!(Metadata::decode(&empty).unwrap().is_live(0), ty.is_emptyable(), "{ty:?}");
        let other = Metadata { version: Version::Short(0x0102_0304_0506_0709), size: 1, ..m }.to_vec();
        assert_eq!(verdict(&other), Decision::Drop, "{ty:?} other version");
    }
}

fn float() -> impl Strategy<Value = Float> {
    prop_oneof![any::<u64>().prop_map(Float), any::<f64>().prop_map(Float::new)]
}

fn extra_for(ty: RedisType) -> BoxedStrategy<Extra> {
    let sid = || (any::<u64>(), any::<u64>()).prop_map(|(ms, seq)| StreamId { ms, seq });
    match ty {
        RedisType::Stream => (sid(), sid(), sid(), sid(), sid(), any::<u64>(), any::<Option<u64>>())
            .prop_map(|(a, b, c, d, e, n, g)| {
                Extra::Stream(Box::new(StreamFields {
                    last_generated_id: a,
                    recorded_first_entry_id: b,
                    max_deleted_entry_id: c,
                    first_entry_id: d,
                    last_entry_id: e,
                    entries_added: n,
                    group_number: g,
                }))
            })
            .boxed(),
        RedisType::BloomFilter => (any::<u16>(), any::<u16>(), any::<u32>(), float(), any::<u32>())
            .prop_map(|(n_filters, expansion, base_capacity, error_rate, bloom_bytes)| {
                Extra::Bloom(Box::new(BloomFields {
                    n_filters,
                    expansion,
                    base_capacity,
                    error_rate,
                    bloom_bytes,
                }))
            })
            .boxed(),
        RedisType::Json => any::<u8>().prop_map(|format| Extra::Json { format }).boxed(),
        RedisType::HyperLogLog => Just(Extra::HyperLogLog { encode_type: 0 }).boxed(),
        RedisType::TDigest => (any::<[u32; 2]>(), any::<[u64; 6]>(), float(), float())
            .prop_map(|(c, n, minimum, maximum)| {
                Extra::TDigest(Box::new(TDigestFields {
                    compression: c[0],
                    capacity: c[1],
                    unmerged_nodes: n[0],
                    merged_nodes: n[1],
                    total_weight: n[2],
                    merged_weight: n[3],
                    minimum,
                    maximum,
                    total_observations: n[4],
                    merge_times: n[5],
                }))
            })
            .boxed(),
        RedisType::TimeSeries => (any::<u64>(), any::<u64>(), any::<u8>(), any::<u8>(), any::<Option<u64>>())
            .prop_map(|(retention_time, chunk_size, chunk_type, duplicate_policy, last_timestamp)| {
                Extra::TimeSeries(Box::new(TimeSeriesFields {
                    retention_time,
                    chunk_size,
                    chunk_type,
                    duplicate_policy,
                    last_timestamp,
                }))
            })
            .boxed(),
        RedisType::TopK => (any::<u32>(), any::<u16>(), any::<u32>(), float())
            .prop_map(|(top_k, width, depth, decay)| {
                Extra::TopK(Box::new(TopKFields { top_k, width, depth, decay }))
            })
            .boxed(),
        _ => Just(Extra::None).boxed(),
    }
}

fn any_type() -> impl Strategy<Value = RedisType> {
    (1u8..=14).prop_map(|id| RedisType::from_id(id).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn every_type_round_trips(
        (ty, extra) in any_type().prop_flat_map(|ty| (Just(ty), extra_for(ty))),
        expire_ms in any::<u64>(),
        version in any::<u64>(),
        size in any::<u64>(),
        value in proptest::collection::vec(any::<u8>(), 0..20),
    ) {
        let keeps_value = matches!(ty, RedisType::String | RedisType::Json | RedisType::TimeSeries);
        let value = if keeps_value { &value[..] } else { &[][..] };
        let (version, size) = if ty.is_single_kv() { (Version::NONE, 0) } else { (Version::Short(version), size) };
        let (head, tail) = if ty == RedisType::List { (size ^ 1, size ^ 2) } else { (0, 0) };
        let m = Metadata { ty, expire_ms, version, size, head, tail, blind_write: false, value, extra };
        let bytes = m.to_vec();
        prop_assert_eq!(bytes.len(), m.encoded_len());
        prop_assert_eq!(Metadata::decode(&bytes), Ok(m));
    }

    #[test]
    fn typed_prefixes_never_panic(id in 0u8..16, wide in any::<bool>(), body in proptest::collection::vec(any::<u8>(), 0..140)) {
        let mut input = vec![id | if wide { 0x80 } else { 0 }];
        input.extend_from_slice(&body);
        if let Ok(m) = Metadata::decode(&input) {
            let again = m.to_vec();
            prop_assert_eq!(Metadata::decode(&again), Ok(m));
        }
    }
}
