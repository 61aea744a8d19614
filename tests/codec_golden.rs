//! Golden byte vectors for the codec, written by hand from docs/layout.md (never captured from the
//! code). Every hex literal below was derived from the layout description:
//!
//! - `__namespace` = `0B 5F 5F 6E 61 6D 65 73 70 61 63 65` (length 11, then ASCII);
//! - `foo` = `66 6F 6F`, `bar` = `62 61 72`, `f1` = `66 31`, `m` = `6D`;
//! - slot("foo") = 12182 = `2F 96`, slot("bar") = 5061 = `13 C5` (CLUSTER KEYSLOT, Redis 7.0);
//! - md5("foo") = `acbd18db4cc2f85cedef654fccc4a4d8`, md5("bar") = `37b51d194a7513e45b56f6524f2d51f2`;
//! - 1700000000123 ms = `00 00 01 8B CF E5 68 7B`; 1700000000 s = `65 53 F1 00`.

use rediskv::Error;
use rediskv::{
    DEFAULT_NAMESPACE, Extra, FLAG_64BIT, FLAG_BLIND_WRITE, FLAG_RESERVED, Flags, KeyLayout, KeyOwner,
    KeyRange, LIST_INITIAL_INDEX, Metadata, MetadataKey, RedisType, SLOT_COUNT, TYPE_MASK, Version,
    VersionGenerator, decode_f64, decode_f64_slice, encode_f64, hash_tag, key_slot, peek_type_and_expire,
    prefix_successor,
};

/// Bytes from a hex string; whitespace is ignored.
fn h(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len().is_multiple_of(2), "odd hex literal {s:?}");
    digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap()).collect()
}

const NS: &str = "0B 5F5F6E616D657370616365";
const VERSION: Version = Version::Short(0x0102_0304_0506_0708);
const VERSION_HEX: &str = "0102030405060708";
const EXPIRE_MS: u64 = 1_700_000_000_123;
const EXPIRE_HEX: &str = "0000018BCFE5687B";

fn cat(parts: &[&str]) -> Vec<u8> {
    h(&parts.concat())
}

/// Decodes bytes the test no longer needs to own (keeps the assertions short).
fn decode_leaked(bytes: Vec<u8>) -> Metadata<'static> {
    Metadata::decode(Box::leak(bytes.into_boxed_slice())).unwrap()
}

fn is_truncated<T>(r: &Result<T, Error>) -> bool {
    matches!(r, Err(Error::Truncated { .. }))
}

// ---------------------------------------------------------------------------------------
// Metadata values
// ---------------------------------------------------------------------------------------

/// (description, struct, hand-written bytes) for every type, with and without expiry.
fn metadata_vectors() -> Vec<(&'static str, Metadata<'static>, Vec<u8>)> {
    let coll = |ty, expire_ms, size| Metadata {
        ty,
        expire_ms,
        version: VERSION,
        size,
        head: 0,
        tail: 0,
        blind_write: false,
        value: &[],
        extra: Extra::None,
    };
    let list = |expire_ms, size, head, tail| Metadata {
        ty: RedisType::List,
        expire_ms,
        version: VERSION,
        size,
        head,
        tail,
        blind_write: false,
        value: &[],
        extra: Extra::None,
    };
    vec![
        ("string", Metadata::string(b"bar", 0), h("81 0000000000000000 626172")),
        ("string+expire", Metadata::string(b"bar", EXPIRE_MS), cat(&["81", EXPIRE_HEX, "626172"])),
        ("empty string", Metadata::string(b"", 0), h("81 0000000000000000")),
        ("string with 0x00/0xFF", Metadata::string(b"\x00\xff\x81", 0), h("81 0000000000000000 00FF81")),
        ("hash", coll(RedisType::Hash, 0, 3), cat(&["82 0000000000000000", VERSION_HEX, "0000000000000003"])),
        (
            "hash+expire",
            coll(RedisType::Hash, EXPIRE_MS, 3),
            cat(&["82", EXPIRE_HEX, VERSION_HEX, "0000000000000003"]),
        ),
        ("set", coll(RedisType::Set, 0, 1), cat(&["84 0000000000000000", VERSION_HEX, "0000000000000001"])),
        (
            "set+expire",
            coll(RedisType::Set, EXPIRE_MS, 0x1_0000_0000),
            cat(&["84", EXPIRE_HEX, VERSION_HEX, "0000000100000000"]),
        ),
        ("zset", coll(RedisType::ZSet, 0, 2), cat(&["85 0000000000000000", VERSION_HEX, "0000000000000002"])),
        (
            "zset+expire",
            coll(RedisType::ZSet, EXPIRE_MS, 2),
            cat(&["85", EXPIRE_HEX, VERSION_HEX, "0000000000000002"]),
        ),
        (
            "list",
            list(0, 2, 0x7FFF_FFFF_FFFF_FFFE, 0x8000_0000_0000_0000),
            cat(&["83 0000000000000000", VERSION_HEX, "0000000000000002 7FFFFFFFFFFFFFFE 8000000000000000"]),
        ),
        (
            "list+expire",
            list(EXPIRE_MS, 1, 0x7FFF_FFFF_FFFF_FFFF, 0x8000_0000_0000_0000),
            cat(&["83", EXPIRE_HEX, VERSION_HEX, "0000000000000001 7FFFFFFFFFFFFFFF 8000000000000000"]),
        ),
        (
            "blind hash",
            Metadata { blind_write: true, ..coll(RedisType::Hash, 0, 0) },
            cat(&["C2 0000000000000000", VERSION_HEX, "0000000000000000"]),
        ),
        (
            "blind set+expire",
            Metadata { blind_write: true, ..coll(RedisType::Set, EXPIRE_MS, 0) },
            cat(&["C4", EXPIRE_HEX, VERSION_HEX, "0000000000000000"]),
        ),
    ]
}

#[test]
fn metadata_golden_encode_and_decode() {
    for (what, meta, bytes) in metadata_vectors() {
        assert_eq!(meta.to_vec(), bytes, "encode {what}");
        assert_eq!(meta.encoded_len(), bytes.len(), "encoded_len {what}");
        let mut reused = vec![0xAA; 3];
        reused.clear();
        meta.encode(&mut reused);
        assert_eq!(reused, bytes, "encode into Vec {what}");
        assert_eq!(Metadata::decode(&bytes), Ok(meta.clone()), "decode {what}");
        assert_eq!(peek_type_and_expire(&bytes), Ok((meta.ty, meta.expire_ms)), "peek {what}");
    }
}

#[test]
fn new_collection_metadata() {
    // A new list starts with head = tail = 0x7FFF_FFFF_FFFF_FFFF and size 0.
    let list = Metadata::collection(RedisType::List, VERSION);
    assert_eq!(
        list.to_vec(),
        cat(&["83 0000000000000000", VERSION_HEX, "0000000000000000 7FFFFFFFFFFFFFFF 7FFFFFFFFFFFFFFF"])
    );
    let hash = Metadata::collection(RedisType::Hash, VERSION);
    assert_eq!(hash.to_vec(), cat(&["82 0000000000000000", VERSION_HEX, "0000000000000000"]));
    assert_eq!(LIST_INITIAL_INDEX, 0x7FFF_FFFF_FFFF_FFFF);
}

#[test]
fn blind_write_size_is_written_as_zero_and_ignored() {
    let meta = Metadata { size: 42, blind_write: true, ..Metadata::collection(RedisType::Hash, VERSION) };
    assert_eq!(meta.to_vec(), cat(&["C2 0000000000000000", VERSION_HEX, "0000000000000000"]));
    // A non-zero size field in a blind record decodes as 0.
    let decoded = decode_leaked(cat(&["C2 0000000000000000", VERSION_HEX, "0000000000000007"]));
    assert!(decoded.blind_write);
    assert_eq!(decoded.size, 0);
    assert!(decoded.is_live(0), "a blind collection exists while its record does");
    // The blind list carries head and tail too.
    let list = decode_leaked(cat(&[
        "C3 0000000000000000",
        VERSION_HEX,
        "0000000000000000 7FFFFFFFFFFFFFFF 8000000000000001",
    ]));
    assert_eq!(
        (list.ty, list.blind_write, list.head, list.tail),
        (RedisType::List, true, i64::MAX as u64, 1 << 63 | 1)
    );
}

#[test]
fn string_with_blind_flag_is_never_written() {
    // The blind bit on a string is invalid, so the encoder must not produce it.
    let meta = Metadata { blind_write: true, ..Metadata::string(b"v", 0) };
    let bytes = meta.to_vec();
    assert_eq!(bytes, h("81 0000000000000000 76"));
    assert!(Metadata::decode(&bytes).is_ok());
}

#[test]
fn legacy_metadata_decodes_to_milliseconds() {
    // bit7 = 0: expire u32 seconds, size u32 (version stays u64).
    let hash = decode_leaked(cat(&["02 6553F100", VERSION_HEX, "00000003"]));
    assert_eq!(
        hash,
        Metadata {
            ty: RedisType::Hash,
            expire_ms: 1_700_000_000_000,
            version: VERSION,
            size: 3,
            head: 0,
            tail: 0,
            blind_write: false,
            value: &[],
            extra: Extra::None,
        }
    );
    let set = decode_leaked(cat(&["04 00000000", VERSION_HEX, "FFFFFFFF"]));
    assert_eq!((set.ty, set.expire_ms, set.size), (RedisType::Set, 0, 0xFFFF_FFFF));
    let zset = decode_leaked(cat(&["05 FFFFFFFF", VERSION_HEX, "00000001"]));
    assert_eq!((zset.ty, zset.expire_ms, zset.size), (RedisType::ZSet, 0xFFFF_FFFF * 1000, 1));
    let list =
        decode_leaked(cat(&["03 6553F100", VERSION_HEX, "00000002 7FFFFFFFFFFFFFFE 8000000000000000"]));
    assert_eq!(
        (list.ty, list.expire_ms, list.version, list.size, list.head, list.tail),
        (RedisType::List, 1_700_000_000_000, VERSION, 2, 0x7FFF_FFFF_FFFF_FFFE, 0x8000_0000_0000_0000)
    );
    let string = decode_leaked(h("01 6553F100 626172"));
    assert_eq!(string, Metadata::string(b"bar", 1_700_000_000_000));
    // Re-encoding writes the 64-bit form.
    assert_eq!(string.to_vec(), h("81 0000018BCFE56800 626172"));
    assert_eq!(hash.to_vec(), cat(&["82 0000018BCFE56800", VERSION_HEX, "0000000000000003"]));
    assert_eq!(peek_type_and_expire(&h("04 6553F100")), Ok((RedisType::Set, 1_700_000_000_000)));
    // Legacy blind-write hash (0x40 | 2).
    let blind = decode_leaked(cat(&["42 00000000", VERSION_HEX, "00000009"]));
    assert!(blind.blind_write);
    assert_eq!(blind.size, 0);
}

#[test]
fn metadata_truncation_sweep() {
    // Collections are fixed-size: every strict prefix is Truncated.
    for (what, _, bytes) in metadata_vectors() {
        let header = 9; // flags + expire
        for len in 0..bytes.len() {
            let r = Metadata::decode(&bytes[..len]);
            if what.contains("string") && len >= header {
                // A string is the rest of the record: a shorter value, not an error.
                assert_eq!(r.unwrap().value, &bytes[header..len], "{what} len {len}");
            } else {
                assert!(is_truncated(&r), "{what} cut to {len}: {r:?}");
            }
            if len < header {
                assert!(is_truncated(&peek_type_and_expire(&bytes[..len])), "peek {what} {len}");
            }
        }
    }
    let legacy: [(&str, Vec<u8>); 4] = [
        ("hash", cat(&["02 6553F100", VERSION_HEX, "00000003"])),
        ("set", cat(&["04 6553F100", VERSION_HEX, "00000003"])),
        ("list", cat(&["03 6553F100", VERSION_HEX, "00000002 7FFFFFFFFFFFFFFE 8000000000000000"])),
        ("string", h("01 6553F100 626172")),
    ];
    for (what, bytes) in legacy {
        for len in 0..bytes.len() {
            let r = Metadata::decode(&bytes[..len]);
            if what == "string" && len >= 5 {
                assert!(r.is_ok(), "legacy string cut to {len}");
            } else {
                assert!(is_truncated(&r), "legacy {what} cut to {len}: {r:?}");
            }
        }
        assert!(Metadata::decode(&bytes).is_ok());
    }
}

#[test]
fn metadata_trailing_bytes() {
    for tail in ["00", "FF", "0000000000000000"] {
        for base in [
            cat(&["82 0000000000000000", VERSION_HEX, "0000000000000003"]),
            cat(&["83 0000000000000000", VERSION_HEX, "0000000000000002 7FFFFFFFFFFFFFFE 8000000000000000"]),
            cat(&["04 00000000", VERSION_HEX, "00000003"]),
        ] {
            let mut bytes = base.clone();
            bytes.extend(h(tail));
            assert!(
                matches!(Metadata::decode(&bytes), Err(Error::TrailingBytes { extra, .. }) if extra == tail.len() / 2),
                "{bytes:02X?}"
            );
        }
    }
}

#[test]
fn metadata_flag_errors() {
    let body = cat(&["0000000000000000", VERSION_HEX, "0000000000000003"]);
    let with_flags = |flags: u8| {
        let mut v = vec![flags];
        v.extend_from_slice(&body);
        v
    };
    // Reserved bits 4 and 5.
    for flags in [0x92u8, 0xA2, 0xB2, 0x12, 0x22, 0x91, 0xD4, 0x9C, 0xBF] {
        assert_eq!(Metadata::decode(&with_flags(flags)), Err(Error::InvalidFlags(flags)), "{flags:#04x}");
        assert_eq!(Flags::from_byte(flags), Err(Error::InvalidFlags(flags)));
        assert_eq!(peek_type_and_expire(&with_flags(flags)), Err(Error::InvalidFlags(flags)));
    }
    // Type 0 ("none") is never stored; 15 is no type at all.
    for flags in [0x80u8, 0x00] {
        assert_eq!(Metadata::decode(&with_flags(flags)), Err(Error::UnsupportedType { id: 0, name: "none" }));
    }
    assert_eq!(RedisType::from_id(0), Err(Error::UnsupportedType { id: 0, name: "none" }));
    for flags in [0x8Fu8, 0x0F, 0xCF] {
        assert_eq!(Metadata::decode(&with_flags(flags)), Err(Error::UnknownType(15)), "{flags:#04x}");
    }
    // A string with the blind-write bit.
    assert_eq!(Metadata::decode(&h("C1 0000000000000000 626172")), Err(Error::InvalidFlags(0xC1)));
    assert_eq!(Metadata::decode(&h("41 00000000 626172")), Err(Error::InvalidFlags(0x41)));
    assert_eq!(Flags::from_byte(0xC1), Err(Error::InvalidFlags(0xC1)));
    // Empty input.
    assert!(is_truncated(&Metadata::decode(&[])));
}

#[test]
fn flags_byte_golden() {
    assert_eq!((FLAG_64BIT, FLAG_BLIND_WRITE, FLAG_RESERVED, TYPE_MASK), (0x80, 0x40, 0x30, 0x0F));
    let ids = [
        (RedisType::String, 1u8, "string"),
        (RedisType::Hash, 2, "hash"),
        (RedisType::List, 3, "list"),
        (RedisType::Set, 4, "set"),
        (RedisType::ZSet, 5, "zset"),
    ];
    for (ty, id, name) in ids {
        assert_eq!(ty.id(), id);
        assert_eq!(ty.name(), name);
        assert_eq!(Flags::new(ty, false).byte(), 0x80 | id);
        assert_eq!(Flags::from_byte(0x80 | id), Ok(Flags { ty, wide: true, blind_write: false }));
        assert_eq!(Flags::from_byte(id), Ok(Flags { ty, wide: false, blind_write: false }));
        if ty != RedisType::String {
            assert_eq!(Flags::new(ty, true).byte(), 0xC0 | id);
            assert_eq!(Flags::from_byte(0xC0 | id), Ok(Flags { ty, wide: true, blind_write: true }));
        }
    }
}

#[test]
fn expiry_rule() {
    let meta = Metadata::string(b"v", 1000);
    assert!(!meta.is_expired(999));
    assert!(!meta.is_expired(1000), "expire < now, not <=");
    assert!(meta.is_expired(1001));
    assert!(!Metadata::string(b"v", 0).is_expired(u64::MAX));
    let empty = Metadata::collection(RedisType::Set, Version::Short(1));
    assert!(!empty.is_live(0), "a collection of size 0 does not exist");
    assert!(Metadata { size: 1, ..empty }.is_live(0));
}

// ---------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------

/// The layouts under test with the hand-written route bytes (`[prefix][ns][slot]?[md5]?`) for
/// "foo" and "bar".
struct LayoutCase {
    name: &'static str,
    layout: KeyLayout,
    route_foo: Vec<u8>,
    route_bar: Vec<u8>,
}

fn layout_cases() -> Vec<LayoutCase> {
    vec![
        LayoutCase { name: "default", layout: KeyLayout::default(), route_foo: h(NS), route_bar: h(NS) },
        LayoutCase {
            name: "slots",
            layout: KeyLayout::default().with_cluster_slots(true),
            route_foo: cat(&[NS, "2F96"]),
            route_bar: cat(&[NS, "13C5"]),
        },
        LayoutCase {
            name: "fixed prefix",
            layout: KeyLayout::default().with_fixed_prefix(&h("000000070003")),
            route_foo: cat(&["000000070003", NS]),
            route_bar: cat(&["000000070003", NS]),
        },
        LayoutCase {
            name: "md5 4",
            layout: KeyLayout::default().with_hash_prefix(4).unwrap(),
            route_foo: cat(&[NS, "acbd18db"]),
            route_bar: cat(&[NS, "37b51d19"]),
        },
        LayoutCase {
            name: "md5 16",
            layout: KeyLayout::default().with_hash_prefix(16).unwrap(),
            route_foo: cat(&[NS, "acbd18db4cc2f85cedef654fccc4a4d8"]),
            route_bar: cat(&[NS, "37b51d194a7513e45b56f6524f2d51f2"]),
        },
        LayoutCase {
            name: "slots + md5 2",
            layout: KeyLayout::default().with_cluster_slots(true).with_hash_prefix(2).unwrap(),
            route_foo: cat(&[NS, "2F96 acbd"]),
            route_bar: cat(&[NS, "13C5 37b5"]),
        },
        LayoutCase {
            name: "everything, namespace ns1",
            // Namespace "ns1" = 03 6E 73 31. Order of calls must not matter.
            layout: KeyLayout::new(b"ns1")
                .unwrap()
                .with_hash_prefix(3)
                .unwrap()
                .with_fixed_prefix(&h("000000070003"))
                .with_cluster_slots(true),
            route_foo: h("000000070003 036E7331 2F96 acbd18"),
            route_bar: h("000000070003 036E7331 13C5 37b51d"),
        },
        LayoutCase {
            name: "empty namespace",
            layout: KeyLayout::new(b"").unwrap(),
            route_foo: h("00"),
            route_bar: h("00"),
        },
    ]
}

fn route_parts(case: &LayoutCase, route: &[u8]) -> (Vec<u8>, Option<u16>, Vec<u8>) {
    let prefix = case.layout.fixed_prefix().len();
    let ns_len = usize::from(route[prefix]);
    let after_ns = prefix + 1 + ns_len;
    let ns = route[prefix + 1..after_ns].to_vec();
    let (slot, hash_start) = if case.layout.cluster_slots() {
        (Some(u16::from_be_bytes([route[after_ns], route[after_ns + 1]])), after_ns + 2)
    } else {
        (None, after_ns)
    };
    (ns, slot, route[hash_start..].to_vec())
}

#[test]
fn metadata_key_golden() {
    for case in layout_cases() {
        for (key, route) in [(&b"foo"[..], &case.route_foo), (&b"bar"[..], &case.route_bar)] {
            let mut expected = route.clone();
            expected.extend_from_slice(key);
            assert_eq!(case.layout.metadata_key(key), expected, "{} {key:?}", case.name);
            let mut reused = b"junk".to_vec();
            reused.clear();
            case.layout.encode_metadata_key(key, &mut reused);
            assert_eq!(reused, expected);

            let (ns, slot, hash) = route_parts(&case, route);
            let decoded = case.layout.decode_metadata_key(&expected).unwrap();
            assert_eq!(
                decoded,
                MetadataKey { namespace: &ns, slot, hash: &hash, user_key: key },
                "{}",
                case.name
            );
            // Truncation sweep: inside the route it is Truncated (or a prefix mismatch inside
            // the fixed prefix); inside the user key it is a shorter key.
            for len in 0..expected.len() {
                let r = case.layout.decode_metadata_key(&expected[..len]);
                if len < case.layout.fixed_prefix().len() {
                    assert!(r.is_err(), "{} {len}", case.name);
                } else if len < route.len() {
                    assert!(is_truncated(&r), "{} cut to {len}: {r:?}", case.name);
                } else {
                    assert_eq!(r.unwrap().user_key, &key[..len - route.len()]);
                }
            }
        }
    }
    // The default layout in full, no helpers.
    assert_eq!(KeyLayout::default().metadata_key(b"foo"), h("0B 5F5F6E616D657370616365 666F6F"));
    assert_eq!(KeyLayout::default().metadata_key(b""), h("0B 5F5F6E616D657370616365"));
    assert_eq!(DEFAULT_NAMESPACE, b"__namespace");
}

#[test]
fn subkey_golden() {
    let subs: [(&str, &[u8], &str); 4] = [
        ("hash field", b"f1", "6631"),
        ("set member", b"m", "6D"),
        ("zset member", b"\x00\xff", "00FF"),
        ("list index", &0x7FFF_FFFF_FFFF_FFFEu64.to_be_bytes(), "7FFFFFFFFFFFFFFE"),
    ];
    for case in layout_cases() {
        for (what, sub, sub_hex) in subs {
            let expected = cat(&[&hex(&case.route_foo), "00000003 666F6F", VERSION_HEX, sub_hex]);
            assert_eq!(case.layout.subkey(b"foo", VERSION, sub).unwrap(), expected, "{} {what}", case.name);
            let mut reused = Vec::new();
            case.layout.encode_subkey(b"foo", VERSION, sub, &mut reused).unwrap();
            assert_eq!(reused, expected);

            let prefix_len = expected.len() - sub.len();
            assert_eq!(case.layout.subkey_prefix(b"foo", VERSION, 0).unwrap(), &expected[..prefix_len]);

            let (ns, slot, hash) = route_parts(&case, &case.route_foo);
            let decoded = case.layout.decode_subkey(&expected).unwrap();
            assert_eq!(
                (
                    decoded.namespace,
                    decoded.slot,
                    decoded.hash,
                    decoded.user_key,
                    decoded.version,
                    decoded.sub
                ),
                (&ns[..], slot, &hash[..], &b"foo"[..], VERSION, sub),
                "{} {what}",
                case.name
            );
            assert_eq!(decoded.owner(), KeyOwner { namespace: &ns, slot, hash: &hash, user_key: b"foo" });
            // The owner's metadata key is the metadata key of "foo".
            assert_eq!(case.layout.owner_metadata_key(&decoded.owner()), case.layout.metadata_key(b"foo"));

            for len in 0..expected.len() {
                let r = case.layout.decode_subkey(&expected[..len]);
                if len < case.layout.fixed_prefix().len() {
                    assert!(r.is_err());
                } else if len < prefix_len {
                    assert!(is_truncated(&r), "{} {what} cut to {len}: {r:?}", case.name);
                } else {
                    assert_eq!(r.unwrap().sub, &sub[..len - prefix_len]);
                }
            }
        }
    }
    // Default layout in full, list element.
    assert_eq!(
        KeyLayout::default().subkey(b"bar", Version::Short(7), &LIST_INITIAL_INDEX.to_be_bytes()).unwrap(),
        h("0B 5F5F6E616D657370616365 00000003 626172 0000000000000007 7FFFFFFFFFFFFFFF")
    );
    // An empty user key still has its length.
    assert_eq!(
        KeyLayout::default().subkey(b"", Version::Short(1), b"").unwrap(),
        h("0B 5F5F6E616D657370616365 00000000 0000000000000001")
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

#[test]
fn score_key_golden() {
    let scores = [
        (2.5, "C004000000000000"),
        (-2.5, "3FFBFFFFFFFFFFFF"),
        (0.0, "8000000000000000"),
        (-0.0, "8000000000000000"),
        (f64::INFINITY, "FFF0000000000000"),
        (f64::NEG_INFINITY, "000FFFFFFFFFFFFF"),
    ];
    for case in layout_cases() {
        for (score, score_hex) in scores {
            let prefix = cat(&[&hex(&case.route_bar), "00000003 626172", VERSION_HEX]);
            let expected = cat(&[&hex(&prefix), score_hex, "6D"]);
            assert_eq!(
                case.layout.score_key(b"bar", VERSION, score, b"m").unwrap(),
                expected,
                "{} {score}",
                case.name
            );
            let mut reused = Vec::new();
            case.layout.encode_score_key(b"bar", VERSION, score, b"m", &mut reused).unwrap();
            assert_eq!(reused, expected);

            let decoded = case.layout.decode_score_key(&expected).unwrap();
            let (ns, slot, hash) = route_parts(&case, &case.route_bar);
            assert_eq!(decoded.owner, KeyOwner { namespace: &ns, slot, hash: &hash, user_key: b"bar" });
            assert_eq!(decoded.version, VERSION);
            assert_eq!(decoded.score, score);
            assert!(decoded.score.is_sign_positive() || score < 0.0, "-0.0 decodes as +0.0");
            assert_eq!(decoded.member, b"m");

            for len in 0..expected.len() {
                let r = case.layout.decode_score_key(&expected[..len]);
                if len < case.layout.fixed_prefix().len() {
                    assert!(r.is_err());
                } else if len < prefix.len() + 8 {
                    assert!(is_truncated(&r), "{} cut to {len}: {r:?}", case.name);
                } else {
                    assert_eq!(r.unwrap().member, &b"m"[..len - prefix.len() - 8]);
                }
            }
        }
        assert_eq!(case.layout.score_key(b"bar", VERSION, f64::NAN, b"m"), Err(Error::NanScore));
        let mut out = Vec::new();
        assert_eq!(
            case.layout.encode_score_key(b"bar", VERSION, f64::NAN, b"m", &mut out),
            Err(Error::NanScore)
        );
        assert!(out.is_empty(), "nothing written for NaN");
    }
    // A stored NaN score is rejected by the decoder (FFF8... = +NaN in score order).
    let nan_key = cat(&[NS, "00000003 626172", VERSION_HEX, "FFF8000000000000 6D"]);
    assert_eq!(KeyLayout::default().decode_score_key(&nan_key), Err(Error::NanScore));
    // Empty member.
    assert_eq!(
        KeyLayout::default().score_key(b"bar", Version::Short(1), 1.0, b"").unwrap(),
        cat(&[NS, "00000003 626172 0000000000000001 BFF0000000000000"])
    );
}

#[test]
fn fixed_prefix_mismatch() {
    let layout = KeyLayout::default().with_fixed_prefix(&h("000000070003"));
    let other = cat(&["000000070004", NS, "666F6F"]);
    assert!(matches!(layout.decode_metadata_key(&other), Err(Error::LayoutMismatch(_))));
    let sub = cat(&["000000080003", NS, "00000003 666F6F", VERSION_HEX, "6631"]);
    assert!(matches!(layout.decode_subkey(&sub), Err(Error::LayoutMismatch(_))));
}

#[test]
fn decoders_read_any_namespace() {
    // A default layout decodes records of namespace "ns1" (what a compaction filter needs).
    let layout = KeyLayout::default();
    let key = h("036E7331 666F6F");
    let decoded = layout.decode_metadata_key(&key).unwrap();
    assert_eq!((decoded.namespace, decoded.user_key), (&b"ns1"[..], &b"foo"[..]));
    let sub = cat(&["036E7331 00000003 666F6F", VERSION_HEX, "6631"]);
    let decoded = layout.decode_subkey(&sub).unwrap();
    assert_eq!((decoded.namespace, decoded.user_key, decoded.sub), (&b"ns1"[..], &b"foo"[..], &b"f1"[..]));
    // A key length pointing past the end is Truncated.
    let bad = cat(&[NS, "00000004 666F6F", VERSION_HEX]);
    assert!(is_truncated(&layout.decode_subkey(&bad)));
    let huge = cat(&[NS, "FFFFFFFF 666F6F"]);
    assert!(is_truncated(&layout.decode_subkey(&huge)));
}

#[test]
fn layout_limits() {
    assert!(KeyLayout::new(&[b'n'; 255]).is_ok());
    assert_eq!(KeyLayout::new(&[b'n'; 256]), Err(Error::NamespaceTooLong(256)));
    assert_eq!(KeyLayout::default().with_namespace(&[0; 300]), Err(Error::NamespaceTooLong(300)));
    assert!(KeyLayout::default().with_hash_prefix(16).is_ok());
    assert_eq!(KeyLayout::default().with_hash_prefix(17), Err(Error::HashPrefixTooLong(17)));
    // A 255-byte namespace starts with FF.
    let ns = [b'n'; 255];
    let key = KeyLayout::new(&ns).unwrap().metadata_key(b"k");
    assert_eq!(key[0], 0xFF);
    assert_eq!(&key[1..256], &ns[..]);
    assert_eq!(&key[256..], b"k");
}

// ---------------------------------------------------------------------------------------
// Ranges
// ---------------------------------------------------------------------------------------

#[test]
fn ranges_golden() {
    let layout = KeyLayout::default();
    assert_eq!(
        layout.subkey_range(b"foo", VERSION).unwrap(),
        KeyRange {
            start: cat(&[NS, "00000003 666F6F", VERSION_HEX]),
            end: Some(cat(&[NS, "00000003 666F6F 0102030405060709"])),
        }
    );
    // A version ending in FF carries into the byte before; trailing FFs are dropped.
    assert_eq!(
        layout.subkey_range(b"foo", Version::Short(0xFF)).unwrap(),
        KeyRange {
            start: cat(&[NS, "00000003 666F6F 00000000000000FF"]),
            end: Some(cat(&[NS, "00000003 666F6F 00000000000001"])),
        }
    );
    // Version u64::MAX: the end is past the key itself ("foo" -> "fop").
    assert_eq!(
        layout.subkey_range(b"foo", u64::MAX.into()).unwrap(),
        KeyRange {
            start: cat(&[NS, "00000003 666F6F FFFFFFFFFFFFFFFF"]),
            end: Some(cat(&[NS, "00000003 666F70"])),
        }
    );
    assert_eq!(
        layout.score_range(b"foo", VERSION, Some(1.0)).unwrap(),
        KeyRange {
            start: cat(&[NS, "00000003 666F6F", VERSION_HEX, "BFF0000000000000"]),
            end: Some(cat(&[NS, "00000003 666F6F 0102030405060709"])),
        }
    );
    assert_eq!(
        layout.score_range(b"foo", VERSION, None).unwrap(),
        layout.subkey_range(b"foo", VERSION).unwrap()
    );
    assert_eq!(layout.score_range(b"foo", VERSION, Some(f64::NAN)), Err(Error::NanScore));
    assert_eq!(
        layout.namespace_range(),
        KeyRange { start: h(NS), end: Some(h("0B 5F5F6E616D657370616366")) }
    );
    assert!(matches!(layout.slot_range(1), Err(Error::LayoutMismatch(_))));
    let slots = KeyLayout::default().with_cluster_slots(true);
    assert_eq!(
        slots.slot_range(12182).unwrap(),
        KeyRange { start: cat(&[NS, "2F96"]), end: Some(cat(&[NS, "2F97"])) }
    );
    assert!(slots.slot_range(12182).unwrap().contains(&slots.metadata_key(b"foo")));
    assert!(!slots.slot_range(12182).unwrap().contains(&slots.metadata_key(b"bar")));
    assert_eq!(
        slots.slot_range(0x3FFF).unwrap(),
        // Trailing FF dropped, 3F incremented.
        KeyRange { start: cat(&[NS, "3FFF"]), end: Some(cat(&[NS, "40"])) }
    );
    let prefixed = KeyLayout::default().with_fixed_prefix(&h("000000070003"));
    assert_eq!(
        prefixed.namespace_range(),
        KeyRange {
            start: cat(&["000000070003", NS]),
            end: Some(cat(&["000000070003 0B 5F5F6E616D657370616366"]))
        }
    );
}

#[test]
fn prefix_successor_golden() {
    assert_eq!(prefix_successor(&h("0102")), Some(h("0103")));
    assert_eq!(prefix_successor(&h("01FF")), Some(h("02")));
    assert_eq!(prefix_successor(&h("00FFFF")), Some(h("01")));
    assert_eq!(prefix_successor(&h("FFFF")), None);
    assert_eq!(prefix_successor(&[]), None);
    let all = KeyRange::prefix(h("FF"));
    assert_eq!(all.end, None);
    assert!(all.contains(&h("FFFFFFFF")));
    assert!(!all.contains(&h("FE")));
    let r = KeyRange::prefix(h("0102"));
    assert!(r.contains(&h("0102")));
    assert!(r.contains(&h("0102FFFF")));
    assert!(!r.contains(&h("0103")));
    assert!(!r.contains(&h("01")));
}

// ---------------------------------------------------------------------------------------
// Ordered double
// ---------------------------------------------------------------------------------------

#[test]
fn ordered_double_golden() {
    let vectors = [
        (0.0, "8000000000000000"),
        (1.0, "BFF0000000000000"),
        (-1.0, "400FFFFFFFFFFFFF"),
        (2.5, "C004000000000000"),
        (-2.5, "3FFBFFFFFFFFFFFF"),
        (f64::INFINITY, "FFF0000000000000"),
        (f64::NEG_INFINITY, "000FFFFFFFFFFFFF"),
        (f64::MAX, "FFEFFFFFFFFFFFFF"),
        (f64::MIN, "0010000000000000"),
        (5e-324, "8000000000000001"),
        (-5e-324, "7FFFFFFFFFFFFFFE"),
    ];
    for (x, hx) in vectors {
        let bytes: [u8; 8] = h(hx).try_into().unwrap();
        assert_eq!(encode_f64(x), Ok(bytes), "{x}");
        assert_eq!(decode_f64(bytes), Ok(x), "{x}");
        assert_eq!(decode_f64_slice(&bytes), Ok(x), "{x}");
    }
    // -0.0 is stored as +0.0.
    assert_eq!(encode_f64(-0.0), Ok(h("8000000000000000").try_into().unwrap()));
    let zero = decode_f64(h("8000000000000000").try_into().unwrap()).unwrap();
    assert!(zero == 0.0 && zero.is_sign_positive());
    // The bytes the formula would give -0.0 (7FFF...FF) are never written; they decode to
    // +0.0 so a decoded score is never -0.0.
    let odd = decode_f64(h("7FFFFFFFFFFFFFFF").try_into().unwrap()).unwrap();
    assert!(odd == 0.0 && odd.is_sign_positive(), "{odd:?}");
    // NaN.
    assert_eq!(encode_f64(f64::NAN), Err(Error::NanScore));
    assert_eq!(encode_f64(-f64::NAN), Err(Error::NanScore));
    assert_eq!(encode_f64(f64::from_bits(0x7FF0_0000_0000_0001)), Err(Error::NanScore));
    for nan in
        ["FFF8000000000000", "FFFFFFFFFFFFFFFF", "FFF0000000000001", "000FFFFFFFFFFFFE", "0000000000000000"]
    {
        assert_eq!(decode_f64(h(nan).try_into().unwrap()), Err(Error::NanScore), "{nan}");
    }
    // Wrong lengths.
    for len in 0..8 {
        assert!(is_truncated(&decode_f64_slice(&vec![0x80; len])), "{len}");
    }
    assert!(matches!(decode_f64_slice(&[0x80; 9]), Err(Error::TrailingBytes { extra: 1, .. })));
    // Byte order is numeric order.
    let ordered = [f64::NEG_INFINITY, f64::MIN, -1.0, -5e-324, 0.0, 5e-324, 1.0, f64::MAX, f64::INFINITY];
    for w in ordered.windows(2) {
        assert!(encode_f64(w[0]).unwrap() < encode_f64(w[1]).unwrap(), "{} < {}", w[0], w[1]);
    }
}

// ---------------------------------------------------------------------------------------
// Cluster slots
// ---------------------------------------------------------------------------------------

#[test]
fn cluster_slot_golden() {
    // Values from Redis 7.0 CLUSTER KEYSLOT.
    assert_eq!(key_slot(b"foo"), 12182);
    assert_eq!(key_slot(b"bar"), 5061);
    assert_eq!(key_slot(b"{user1000}.following"), 3443);
    assert_eq!(key_slot(b"{user1000}.followers"), 3443);
    assert_eq!(key_slot(b"user1000"), 3443);
    assert_eq!(key_slot(b"foo{}{bar}"), 8363, "empty tag: the whole key is hashed");
    assert_eq!(key_slot(b"foo{{bar}}zap"), 4015, "hashes \"{{bar\"");
    assert_eq!(key_slot(b"{bar"), 4015);
    assert_eq!(key_slot(b""), 0);
    assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
    assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
    assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
    assert_eq!(hash_tag(b"foo{bar"), b"foo{bar");
    assert_eq!(hash_tag(b"foo}bar{"), b"foo}bar{");
    assert_eq!(SLOT_COUNT, 16384);
    for key in [&b"\xff\xff\xff"[..], b"a", b"{a}", b"\x00"] {
        assert!(key_slot(key) < SLOT_COUNT);
    }
}

// ---------------------------------------------------------------------------------------
// List indices and versions
// ---------------------------------------------------------------------------------------

#[test]
fn version_golden() {
    let g = VersionGenerator::new(5);
    assert_eq!(g.next(1000), (1000 << 11) + 5);
    assert_eq!(g.next(1000), (1000 << 11) + 6);
    // The clock steps back: still one more than the last.
    assert_eq!(g.next(500), (1000 << 11) + 7);
    assert_eq!(g.next(2000), (2000 << 11) + 8);
    // The counter is taken mod 2048.
    let g = VersionGenerator::new(2047);
    assert_eq!(g.next(1), 2048 + 2047);
    assert_eq!(g.next(3), 3 * 2048);
    let g = VersionGenerator::new(u64::MAX);
    assert_eq!(g.next(10), 10 * 2048 + 2047);
    assert_eq!(g.next(11), 11 * 2048);
    // Today's microseconds fit: 2026 is about 1.8e15 us < 2^53, shifted < 2^64.
    let now_us = 1_790_000_000_000_000u64;
    let v = VersionGenerator::new(0).next(now_us);
    assert_eq!(v >> 11, now_us);
}

/// Kvrocks' cluster form (`cluster-enabled yes`, `slot_id_encoded`), bytes written by hand
/// from its `redis_metadata.cc`: `ComposeNamespaceKey` puts the big-endian slot (`PutFixed16`
/// of `GetSlotIdFromKey`, CRC16 of the hash tag) between the namespace and the key;
/// `InternalKey::Encode` puts it in the same place before the key length of a subkey;
/// `ComposeSlotKeyPrefix` is `[ns_len][ns][slot]`, every metadata key of the slot.
#[test]
fn kvrocks_cluster_form_golden() {
    let layout = KeyLayout::default().with_cluster_slots(true);
    // slot("{user1}:name") = slot("user1") = 8106 = 1F AA.
    let meta = cat(&[NS, "1FAA 7B75736572317D3A6E616D65"]);
    assert_eq!(layout.metadata_key(b"{user1}:name"), meta);
    let decoded = layout.decode_metadata_key(&meta).unwrap();
    assert_eq!((decoded.slot, decoded.user_key), (Some(8106), &b"{user1}:name"[..]));
    let sub = cat(&[NS, "1FAA 0000000C 7B75736572317D3A6E616D65", VERSION_HEX, "6631"]);
    assert_eq!(layout.subkey(b"{user1}:name", VERSION, b"f1").unwrap(), sub);
    let sk = layout.decode_subkey(&sub).unwrap();
    assert_eq!((sk.slot, sk.user_key, sk.sub), (Some(8106), &b"{user1}:name"[..], &b"f1"[..]));
    // Score 1.5 = 3FF8… with its sign bit flipped.
    assert_eq!(
        layout.score_key(b"foo", VERSION, 1.5, b"m").unwrap(),
        cat(&[NS, "2F96 00000003 666F6F", VERSION_HEX, "BFF8000000000000 6D"])
    );
    assert_eq!(layout.slot_range(8106).unwrap(), KeyRange::prefix(cat(&[NS, "1FAA"])));
    assert!(layout.slot_range(8106).unwrap().contains(&sub), "a slot's subkeys share its prefix");
    assert_eq!(layout.owner_metadata_key(&sk.owner()), meta);
}
