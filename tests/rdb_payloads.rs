//! DUMP payloads: what redis-server 7.0.15 sent for `DUMP` (copied byte for byte from its
//! replies) restores to the right values; what `dump` writes restores to itself; broken
//! payloads get the two errors Redis distinguishes, and no input panics.

use bytes::Bytes;
use proptest::prelude::*;
use rediskv::Error;
use rediskv::rdb::{RdbValue, dump, restore};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// `DUMP` replies of redis-server 7.0.15 (rdbcompression yes, default thresholds).
fn redis_dumps() -> Vec<(&'static [u8], RdbValue)> {
    vec![
        // SET s 12345: int16 encoding.
        (b"\x00\xc190\n\x00\x9d\x94\xea'\x93\xfc\x08\xb9", RdbValue::String(b("12345"))),
        // SET s2 hello: raw.
        (b"\x00\x05hello\n\x00cr\xdfve4 \n", RdbValue::String(b("hello"))),
        // SET s3 <40 a>: LZF.
        (b"\x00\xc3\t(\x01aa\xe0\x1b\x00\x01aa\n\x00\xcf\t/\xaa\xae%\x83\x1d", RdbValue::String(b(&"a".repeat(40)))),
        // RPUSH l a 1 b: quicklist 2, one packed listpack node.
        (
            b"\x12\x01\x02\x0f\x0f\x00\x00\x00\x03\x00\x81a\x02\x01\x01\x81b\x02\xff\n\x00\x90C\xa3L\xeb\x8e\x1b\x1c",
            RdbValue::List(vec![b("a"), b("1"), b("b")]),
        ),
        // SADD si 1 2 3: intset of int16.
        (
            b"\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00\n\x00\xa5\x02\\\xe2mnM\x1b",
            RdbValue::Set(vec![b("1"), b("2"), b("3")]),
        ),
        // SADD ss a b: hash table set.
        (b"\x02\x02\x01b\x01a\n\x00u\xd9\x9d\x83^\xf8_e", RdbValue::Set(vec![b("b"), b("a")])),
        // ZADD z 1.5 a 2 b: listpack, score 1.5 as text and 2 as an integer.
        (
            b"\x11\x14\x14\x00\x00\x00\x04\x00\x81a\x02\x831.5\x04\x81b\x02\x02\x01\xff\n\x00\xfa\x02\xb4%\xaf\x18\x87c",
            RdbValue::ZSet(vec![(b("a"), 1.5), (b("b"), 2.0)]),
        ),
        // HSET h f v: listpack.
        (
            b"\x10\r\r\x00\x00\x00\x02\x00\x81f\x02\x81v\x02\xff\n\x00 \xf1=D#T\x08\x9d",
            RdbValue::Hash(vec![(b("f"), b("v"))]),
        ),
    ]
}

#[test]
fn restores_what_redis_dumped() {
    for (payload, want) in redis_dumps() {
        assert_eq!(restore(payload).unwrap(), want, "{payload:?}");
    }
}

#[test]
fn dumps_strings_and_intsets_byte_for_byte_as_redis() {
    let dumps = redis_dumps();
    for i in [0, 1, 4] {
        assert_eq!(dump(&dumps[i].1), dumps[i].0, "{:?}", dumps[i].1);
    }
}

#[test]
fn broken_payloads() {
    let good = dump(&RdbValue::String(b("hello")));
    assert_eq!(restore(b"short"), Err(Error::DumpVersionOrChecksum));
    assert_eq!(restore(b""), Err(Error::DumpVersionOrChecksum));
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    assert_eq!(restore(&bad_crc), Err(Error::DumpVersionOrChecksum));
    // RDB version 11 with a correct CRC is still refused.
    let mut v11 = good[..good.len() - 10].to_vec();
    v11.extend_from_slice(&11u16.to_le_bytes());
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(&v11);
    v11.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(restore(&v11), Err(Error::DumpVersionOrChecksum));
    // Garbage inside a valid CRC.
    for body in [&b"\x07\x02ab"[..], b"\x00\x05hel", b"\x02\x00", b"\x02\x02\x01a\x01a", b"\x10\x03\x00\x00"]
    {
        assert!(matches!(restore(&seal(body)), Err(Error::DumpFormat(_))), "{body:?}");
    }
    // Bytes after the object are ignored, as Redis ignores them.
    assert_eq!(restore(&seal(b"\x00\x01ab")), Ok(RdbValue::String(b("a"))));
}

/// A body with the version-10 footer and its CRC.
fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn member() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        any::<i64>().prop_map(|v| Bytes::from(v.to_string())),
        (-5000i64..5000).prop_map(|v| Bytes::from(v.to_string())),
        prop::collection::vec(any::<u8>(), 0..80).prop_map(Bytes::from),
        prop::collection::vec(any::<u8>(), 4000..9000).prop_map(Bytes::from),
    ]
}

fn value() -> impl Strategy<Value = RdbValue> {
    let distinct = |v: Vec<Bytes>| {
        let mut seen = std::collections::HashSet::new();
        v.into_iter().filter(|m| seen.insert(m.clone())).collect::<Vec<_>>()
    };
    prop_oneof![
        member().prop_map(RdbValue::String),
        prop::collection::vec(member(), 1..40).prop_map(RdbValue::List),
        prop::collection::vec(member(), 1..40).prop_map(move |v| RdbValue::Set(distinct(v))),
        prop::collection::vec((member(), any::<f64>().prop_filter("no NaN", |x| !x.is_nan())), 1..40)
            .prop_map(|v| {
                let mut seen = std::collections::HashSet::new();
                RdbValue::ZSet(v.into_iter().filter(|(m, _)| seen.insert(m.clone())).collect())
            }),
        prop::collection::vec((member(), member()), 1..40).prop_map(|v| {
            let mut seen = std::collections::HashSet::new();
            RdbValue::Hash(v.into_iter().filter(|(f, _)| seen.insert(f.clone())).collect())
        }),
    ]
}

/// Compares ignoring the order of set members and zset pairs (DUMP writes an intset sorted
/// and a zset from its tail).
fn canonical(v: RdbValue) -> RdbValue {
    match v {
        RdbValue::Set(mut m) => {
            m.sort();
            RdbValue::Set(m)
        }
        RdbValue::ZSet(mut p) => {
            p.sort_by(|a, b| a.0.cmp(&b.0));
            RdbValue::ZSet(p)
        }
        other => other,
    }
}

proptest! {
    #[test]
    fn dump_then_restore_is_identity(v in value()) {
        prop_assert_eq!(canonical(restore(&dump(&v)).unwrap()), canonical(v));
    }

    #[test]
    fn restore_never_panics(body in prop::collection::vec(any::<u8>(), 0..200), type_byte in 0u8..20) {
        let mut with_type = vec![type_byte];
        with_type.extend_from_slice(&body);
        let _ = restore(&seal(&with_type));
        let _ = restore(&body);
        let mut function = vec![245];
        function.extend_from_slice(&body);
        let _ = rediskv::rdb::restore_functions(&seal(&function));
        let _ = rediskv::rdb::restore_functions(&body);
    }
}

/// FUNCTION DUMP of redis-server 7.0.15 for one library (opcode 245, the code as a
/// 14-bit-length string, version 10, CRC-64): read back, and written byte for byte the same.
#[test]
fn function_payloads_match_redis() {
    use rediskv::rdb::{dump_functions, restore_functions};
    let code: &[u8] = b"#!lua name=t\nredis.register_function('f', function() return 1 end)";
    let redis: &[u8] =
        b"\xf5@B#!lua name=t\nredis.register_function('f', function() return 1 end)\n\x00\xe6\xe6\x92\xdf\xfa\xa1\xad\xcf";
    assert_eq!(restore_functions(redis).unwrap(), vec![Bytes::copy_from_slice(code)]);
    assert_eq!(dump_functions([code]), redis);
    assert_eq!(restore_functions(&dump_functions([])).unwrap(), Vec::<Bytes>::new());
    let mut flipped = redis.to_vec();
    flipped[5] ^= 1;
    assert!(matches!(restore_functions(&flipped), Err(Error::DumpVersionOrChecksum)));
    // A key's payload is not a function's.
    let key = dump(&RdbValue::String(b("v")));
    assert!(matches!(restore_functions(&key), Err(Error::DumpFormat("given type is not a function"))));
}

/// One stream entry `1-1 f v`, no groups, as Redis 7.0 writes it (type 19), by hand from
/// the module table of `codec::rdb`.
#[test]
fn stream_payload_by_hand() {
    use rediskv::StreamId;
    use rediskv::rdb::RdbStream;
    let id = StreamId { ms: 1, seq: 1 };
    #[rustfmt::skip]
    let listpack: &[u8] = &[
        0x1d, 0, 0, 0, 10, 0,           // 29 bytes, 10 items
        0x01, 1, 0x00, 1, 0x01, 1,      // count 1, deleted 0, one master field
        0x81, b'f', 2, 0x00, 1,         // "f", the master terminator 0
        0x02, 1, 0x00, 1, 0x00, 1,      // flags: same fields; ms and seq differences 0
        0x81, b'v', 2, 0x04, 1,         // "v"; the entry used 4 items
        0xff,
    ];
    let mut body = vec![19, 1, 16];
    body.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
    body.push(29);
    body.extend_from_slice(listpack);
    // length 1, last id 1-1, first id 1-1, max deleted 0-0, entries added 1, no groups
    body.extend_from_slice(&[1, 1, 1, 1, 1, 0, 0, 1, 0]);
    let want = RdbValue::Stream(Box::new(RdbStream {
        entries: vec![(id, vec![b("f"), b("v")])],
        last_id: id,
        first_id: id,
        max_deleted_id: StreamId::MIN,
        entries_added: 1,
        groups: Vec::new(),
    }));
    assert_eq!(restore(&seal(&body)).unwrap(), want);
    assert_eq!(dump(&want), seal(&body));
    // A node whose count disagrees with its entries is refused.
    let mut bad = body.clone();
    bad[3 + 16 + 1 + 6] = 0x02;
    assert_eq!(restore(&seal(&bad)), Err(Error::DumpFormat("stream node counts")));
}
