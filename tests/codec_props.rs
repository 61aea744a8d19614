//! Property tests for the codec: round trips across random layouts, order preservation,
//! injectivity, range exclusivity and contiguity, no panics on arbitrary input, and
//! strictly increasing versions.

use md5::{Digest, Md5};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use rediskv::Error;
use rediskv::{
    Extra, Flags, KeyLayout, KeyOwner, Metadata, MetadataKey, RedisType, Version, VersionGenerator,
    decode_f64_slice, encode_f64, key_slot, peek_type_and_expire,
};

// ---------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------

/// Bytes biased towards 0x00 and 0xFF, the values that break naive prefix schemes.
fn edgy_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(prop_oneof![Just(0u8), Just(0xFF), Just(b'a'), any::<u8>()], 0..max)
}

/// Bytes from a tiny alphabet so that equal values and prefixes of each other are common.
fn tiny_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(select(vec![0u8, 1, b'a', 0xFE, 0xFF]), 0..max)
}

/// Versions around the edges as well as random ones.
/// A 64-bit version, as every layout but TiTea's writes (TiTea's 16-byte ids have their
/// own tests).
fn version() -> impl Strategy<Value = Version> {
    prop_oneof![select(vec![0u64, 1, 2, 0xFF, 0x100, u64::MAX - 1, u64::MAX]), any::<u64>()]
        .prop_map(Version::from)
}

#[derive(Debug, Clone)]
struct LayoutSpec {
    namespace: Vec<u8>,
    slots: bool,
    fixed_prefix: Vec<u8>,
    md5_len: usize,
}

impl LayoutSpec {
    fn build(&self) -> KeyLayout {
        KeyLayout::new(&self.namespace)
            .unwrap()
            .with_cluster_slots(self.slots)
            .with_fixed_prefix(&self.fixed_prefix)
            .with_hash_prefix(self.md5_len)
            .unwrap()
    }
}

fn layout_spec() -> impl Strategy<Value = LayoutSpec> {
    (edgy_bytes(12), any::<bool>(), edgy_bytes(7), 0usize..=16).prop_map(
        |(namespace, slots, fixed_prefix, md5_len)| LayoutSpec { namespace, slots, fixed_prefix, md5_len },
    )
}

/// Any f64 that is not NaN, with the special values made likely.
fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        select(vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
        ]),
        any::<f64>().prop_filter("not NaN", |x| !x.is_nan()),
        any::<i32>().prop_map(f64::from),
    ]
}

/// An owned, canonical metadata value (fields a type does not encode are zero).
#[derive(Debug, Clone)]
struct OwnedMeta {
    ty: RedisType,
    expire_ms: u64,
    version: Version,
    size: u64,
    head: u64,
    tail: u64,
    blind_write: bool,
    value: Vec<u8>,
}

impl OwnedMeta {
    fn as_meta(&self) -> Metadata<'_> {
        Metadata {
            ty: self.ty,
            expire_ms: self.expire_ms,
            version: self.version,
            size: self.size,
            head: self.head,
            tail: self.tail,
            blind_write: self.blind_write,
            value: &self.value,
            extra: Extra::None,
        }
    }
}

fn owned_meta() -> impl Strategy<Value = OwnedMeta> {
    let expire = prop_oneof![Just(0u64), any::<u64>()];
    let string = (expire.clone(), edgy_bytes(40)).prop_map(|(expire_ms, value)| OwnedMeta {
        ty: RedisType::String,
        expire_ms,
        version: Version::Short(0),
        size: 0,
        head: 0,
        tail: 0,
        blind_write: false,
        value,
    });
    let collection = (
        select(vec![RedisType::Hash, RedisType::Set, RedisType::ZSet, RedisType::List]),
        expire,
        version(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(|(ty, expire_ms, version, size, head, tail, blind_write)| {
            let list = ty == RedisType::List;
            OwnedMeta {
                ty,
                expire_ms,
                version,
                size: if blind_write { 0 } else { size },
                head: if list { head } else { 0 },
                tail: if list { tail } else { 0 },
                blind_write,
                value: Vec::new(),
            }
        });
    prop_oneof![string, collection]
}

fn md5_prefix(key: &[u8], len: usize) -> Vec<u8> {
    Md5::digest(key)[..len].to_vec()
}

/// A record's identity in one layout configuration: namespace, key, version, sub.
type Tuple = (Vec<u8>, Vec<u8>, u64, Vec<u8>);

fn tuple() -> impl Strategy<Value = Tuple> {
    (
        select(vec![b"".to_vec(), b"a".to_vec(), b"ab".to_vec(), b"\x00".to_vec(), b"\xff".to_vec()]),
        tiny_bytes(4),
        select(vec![0u64, 1, 2, u64::MAX - 1, u64::MAX]),
        tiny_bytes(3),
    )
}

// ---------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------

proptest! {
    #[test]
    fn metadata_round_trip(m in owned_meta()) {
        let meta = m.as_meta();
        let bytes = meta.to_vec();
        prop_assert_eq!(bytes.len(), meta.encoded_len());
        prop_assert_eq!(bytes[0] & 0x80, 0x80, "always the 64-bit form");
        prop_assert_eq!(Metadata::decode(&bytes), Ok(meta.clone()));
        prop_assert_eq!(peek_type_and_expire(&bytes), Ok((meta.ty, meta.expire_ms)));
        let mut reused = vec![1, 2, 3];
        reused.clear();
        meta.encode(&mut reused);
        prop_assert_eq!(reused, bytes);
    }

    #[test]
    fn metadata_key_round_trip(spec in layout_spec(), key in edgy_bytes(24)) {
        let layout = spec.build();
        let bytes = layout.metadata_key(&key);
        let hash = md5_prefix(&key, spec.md5_len);
        let expected = MetadataKey {
            namespace: &spec.namespace,
            slot: spec.slots.then(|| key_slot(&key)),
            hash: &hash,
            user_key: &key,
        };
        prop_assert_eq!(layout.decode_metadata_key(&bytes), Ok(expected));
        prop_assert!(bytes.starts_with(&spec.fixed_prefix));
        prop_assert!(bytes.ends_with(&key));
        let owner = KeyOwner { namespace: &spec.namespace, slot: expected.slot, hash: &hash, user_key: &key };
        prop_assert_eq!(layout.owner_metadata_key(&owner), bytes.clone());
        prop_assert!(layout.namespace_range().contains(&bytes));
    }

    #[test]
    fn a_metadata_key_is_held_by_its_namespace_alone(
        spec in layout_spec(),
        other in edgy_bytes(12),
        same in any::<bool>(),
        key in edgy_bytes(24),
    ) {
        let layout = spec.build();
        let writer = if same { layout.clone() } else { layout.clone().with_namespace(&other).unwrap() };
        let bytes = writer.metadata_key(&key);
        let decoded = layout.decode_metadata_key(&bytes).map(|d| d.namespace == layout.namespace());
        prop_assert_eq!(layout.holds_metadata_key(&bytes), Some(decoded.unwrap_or(false)));
        prop_assert_eq!(layout.holds_metadata_key(&bytes), Some(same || other == spec.namespace));
    }

    #[test]
    fn subkey_round_trip(spec in layout_spec(), key in edgy_bytes(24), v in version(), sub in edgy_bytes(24)) {
        let layout = spec.build();
        let bytes = layout.subkey(&key, v, &sub).unwrap();
        let mut reused = Vec::new();
        layout.encode_subkey(&key, v, &sub, &mut reused).unwrap();
        prop_assert_eq!(&reused, &bytes);
        let d = layout.decode_subkey(&bytes).unwrap();
        let hash = md5_prefix(&key, spec.md5_len);
        prop_assert_eq!(d.namespace, &spec.namespace[..]);
        prop_assert_eq!(d.slot, spec.slots.then(|| key_slot(&key)));
        prop_assert_eq!(d.hash, &hash[..]);
        prop_assert_eq!(d.user_key, &key[..]);
        prop_assert_eq!(d.version, v);
        prop_assert_eq!(d.sub, &sub[..]);
        prop_assert_eq!(layout.owner_metadata_key(&d.owner()), layout.metadata_key(&key));
        prop_assert!(layout.subkey_range(&key, v).unwrap().contains(&bytes));
    }

    #[test]
    fn list_subkey_round_trip(spec in layout_spec(), key in edgy_bytes(16), v in version(), index in any::<u64>()) {
        let layout = spec.build();
        let bytes = layout.subkey(&key, v, &index.to_be_bytes()).unwrap();
        let d = layout.decode_subkey(&bytes).unwrap();
        prop_assert_eq!(d.sub, &index.to_be_bytes()[..]);
    }

    #[test]
    fn score_key_round_trip(
        spec in layout_spec(), key in edgy_bytes(24), v in version(), s in score(), member in edgy_bytes(24),
    ) {
        let layout = spec.build();
        let bytes = layout.score_key(&key, v, s, &member).unwrap();
        let mut reused = Vec::new();
        layout.encode_score_key(&key, v, s, &member, &mut reused).unwrap();
        prop_assert_eq!(&reused, &bytes);
        let d = layout.decode_score_key(&bytes).unwrap();
        let hash = md5_prefix(&key, spec.md5_len);
        prop_assert_eq!(
            d.owner,
            KeyOwner { namespace: &spec.namespace, slot: spec.slots.then(|| key_slot(&key)), hash: &hash, user_key: &key }
        );
        prop_assert_eq!(d.version, v);
        prop_assert_eq!(d.score, s);
        prop_assert!(d.score != 0.0 || d.score.is_sign_positive(), "-0.0 is stored as +0.0");
        prop_assert_eq!(d.member, &member[..]);
        prop_assert!(layout.score_range(&key, v, None).unwrap().contains(&bytes));
        prop_assert!(layout.score_range(&key, v, Some(s)).unwrap().contains(&bytes));
    }

    #[test]
    fn double_round_trip(s in score()) {
        let bytes = encode_f64(s).unwrap();
        let back = decode_f64_slice(&bytes).unwrap();
        prop_assert_eq!(back, s);
        prop_assert!(back != 0.0 || back.is_sign_positive());
    }
}

// ---------------------------------------------------------------------------------------
// Order
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn score_bytes_order_is_numeric_order(a in score(), b in score()) {
        let numeric = a.partial_cmp(&b).unwrap(); // -0.0 == +0.0
        prop_assert_eq!(encode_f64(a).unwrap().cmp(&encode_f64(b).unwrap()), numeric, "{} vs {}", a, b);
    }

    #[test]
    fn score_key_order_is_score_then_member(
        s1 in score(), s2 in score(), m1 in tiny_bytes(4), m2 in tiny_bytes(4),
    ) {
        let layout = KeyLayout::default();
        let k1 = layout.score_key(b"z", Version::Short(7), s1, &m1).unwrap();
        let k2 = layout.score_key(b"z", Version::Short(7), s2, &m2).unwrap();
        let expected = s1.partial_cmp(&s2).unwrap().then_with(|| m1.cmp(&m2));
        prop_assert_eq!(k1.cmp(&k2), expected);
    }
}

// ---------------------------------------------------------------------------------------
// Injectivity and range exclusivity
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn distinct_tuples_encode_distinctly(spec in layout_spec(), a in tuple(), b in tuple(), sa in score(), sb in score()) {
        let la = spec.build().with_namespace(&a.0).unwrap();
        let lb = spec.build().with_namespace(&b.0).unwrap();
        // Metadata keys: (namespace, key).
        let same_key = (&a.0, &a.1) == (&b.0, &b.1);
        prop_assert_eq!(la.metadata_key(&a.1) == lb.metadata_key(&b.1), same_key);
        // The builder-free check agrees with comparing the built keys, every layout feature on.
        prop_assert_eq!(la.routed(&a.1).is_metadata_key(&lb.metadata_key(&b.1)), same_key);
        prop_assert!(la.routed(&a.1).is_metadata_key(&la.metadata_key(&a.1)));
        // Subkeys: (namespace, key, version, sub).
        prop_assert_eq!(la.subkey(&a.1, a.2.into(), &a.3).unwrap() == lb.subkey(&b.1, b.2.into(), &b.3).unwrap(), a == b);
        // Score keys: (namespace, key, version, score, member); -0.0 and +0.0 are one score.
        let same_score = sa == sb;
        prop_assert_eq!(
            la.score_key(&a.1, a.2.into(), sa, &a.3).unwrap() == lb.score_key(&b.1, b.2.into(), sb, &b.3).unwrap(),
            a == b && same_score
        );
    }

    #[test]
    fn subkey_range_holds_exactly_its_records(
        spec in layout_spec(), target in tuple(), others in vec(tuple(), 1..40), s in score(), from in score(),
    ) {
        let base = spec.build();
        let lt = base.clone().with_namespace(&target.0).unwrap();
        let range = lt.subkey_range(&target.1, target.2.into()).unwrap();
        let score_range = lt.score_range(&target.1, target.2.into(), None).unwrap();
        let score_from = lt.score_range(&target.1, target.2.into(), Some(from)).unwrap();
        // The target's own records, plus neighbours: version +-1, u64::MAX, key extended.
        let mut candidates = others;
        candidates.push(target.clone());
        candidates.push((target.0.clone(), target.1.clone(), target.2.wrapping_add(1), target.3.clone()));
        candidates.push((target.0.clone(), target.1.clone(), target.2.wrapping_sub(1), target.3.clone()));
        candidates.push((target.0.clone(), target.1.clone(), u64::MAX, vec![0xFF; 9]));
        let mut longer = target.1.clone();
        longer.push(0);
        candidates.push((target.0.clone(), longer.clone(), target.2, vec![]));
        longer.pop();
        longer.push(0xFF);
        candidates.push((target.0.clone(), longer, target.2, vec![0xFF; 12]));
        if let Some((_, shorter)) = target.1.split_last() {
            candidates.push((target.0.clone(), shorter.to_vec(), target.2, target.1.clone()));
        }
        for c in &candidates {
            let lc = base.clone().with_namespace(&c.0).unwrap();
            let owned = (&c.0, &c.1, c.2) == (&target.0, &target.1, target.2);
            let sub = lc.subkey(&c.1, c.2.into(), &c.3).unwrap();
            prop_assert_eq!(range.contains(&sub), owned, "subkey {:?}", c);
            // A list-index sub (8 bytes, up to 0xFF..) stays inside too.
            let list_sub = lc.subkey(&c.1, c.2.into(), &[0xFF; 8]).unwrap();
            prop_assert_eq!(range.contains(&list_sub), owned, "list subkey {:?}", c);
            let score_key = lc.score_key(&c.1, c.2.into(), s, &c.3).unwrap();
            prop_assert_eq!(score_range.contains(&score_key), owned, "score key {:?}", c);
            prop_assert_eq!(score_from.contains(&score_key), owned && s >= from, "score from {} {:?}", from, c);
        }
    }

    #[test]
    fn namespace_and_slot_ranges_are_contiguous(
        spec in layout_spec(),
        keys in vec((select(vec![b"".to_vec(), b"a".to_vec(), b"ab".to_vec(), b"b".to_vec(), b"\xff".to_vec()]),
                     edgy_bytes(6)), 1..60),
        target_ns in select(vec![b"".to_vec(), b"a".to_vec(), b"ab".to_vec(), b"\xff".to_vec()]),
        pick in any::<prop::sample::Index>(),
    ) {
        let base = spec.build();
        let target = base.clone().with_namespace(&target_ns).unwrap();
        let ns_range = target.namespace_range();
        // One key's slot is the target slot, so the slot range is rarely empty.
        let slot = key_slot(&keys[pick.index(keys.len())].1);
        let slot_range = if spec.slots { Some(target.slot_range(slot).unwrap()) } else { None };
        let mut records: Vec<(Vec<u8>, bool, bool)> = keys
            .iter()
            .map(|(ns, key)| {
                let bytes = base.clone().with_namespace(ns).unwrap().metadata_key(key);
                let in_ns = *ns == target_ns;
                (bytes, in_ns, in_ns && key_slot(key) == slot)
            })
            .collect();
        records.sort();
        for (bytes, in_ns, in_slot) in &records {
            prop_assert_eq!(ns_range.contains(bytes), *in_ns);
            if let Some(r) = &slot_range {
                prop_assert_eq!(r.contains(bytes), *in_slot);
            }
        }
        // The in-range records form one run in key order.
        let contiguous = |flags: Vec<bool>| {
            let first = flags.iter().position(|&f| f);
            let last = flags.iter().rposition(|&f| f);
            match (first, last) {
                (Some(a), Some(b)) => flags[a..=b].iter().all(|&f| f),
                _ => true,
            }
        };
        prop_assert!(contiguous(records.iter().map(|r| r.1).collect()));
        if spec.slots {
            prop_assert!(contiguous(records.iter().map(|r| r.2).collect()));
        } else {
            prop_assert!(target.slot_range(slot).is_err());
        }
    }
}

// ---------------------------------------------------------------------------------------
// No panics on arbitrary input
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn decoders_never_panic(spec in layout_spec(), bytes in edgy_bytes(80), prefixed in any::<bool>()) {
        let layout = spec.build();
        // Half the time, start with the layout's own head so decoding gets further.
        let input = if prefixed {
            let mut v = layout.fixed_prefix().to_vec();
            v.push(bytes.len().min(3) as u8);
            v.extend_from_slice(&bytes);
            v
        } else {
            bytes
        };
        let _ = Metadata::decode(&input);
        let _ = peek_type_and_expire(&input);
        let _ = layout.decode_metadata_key(&input);
        let _ = layout.decode_subkey(&input);
        if let Ok(k) = layout.decode_score_key(&input) {
            prop_assert!(!k.score.is_nan());
        }
        if let Ok(x) = decode_f64_slice(&input) {
            prop_assert!(!x.is_nan());
            prop_assert_eq!(input.len(), 8);
        }
        if let Some(&b) = input.first() {
            let _ = Flags::from_byte(b);
        }
        for len in 0..input.len().min(12) {
            let _ = decode_f64_slice(&input[..len]);
        }
    }

    #[test]
    fn metadata_decode_then_encode_is_stable(bytes in edgy_bytes(50), flags in any::<u8>()) {
        let mut input = vec![flags];
        input.extend_from_slice(&bytes);
        if let Ok(meta) = Metadata::decode(&input) {
            let again = meta.to_vec();
            prop_assert_eq!(Metadata::decode(&again), Ok(meta));
        }
    }
}

#[test]
fn flags_from_every_byte() {
    for byte in 0..=255u8 {
        let got = Flags::from_byte(byte);
        let ty = byte & 0x0F;
        let expected = if byte & 0x30 != 0 {
            Err(Error::InvalidFlags(byte))
        } else if ty == 0 {
            Err(Error::UnsupportedType { id: ty, name: "" })
        } else if ty == 15 {
            Err(Error::UnknownType(ty))
        } else if (ty == 1 || ty == 10) && byte & 0x40 != 0 {
            Err(Error::InvalidFlags(byte))
        } else {
            Ok((ty, byte & 0x80 != 0, byte & 0x40 != 0))
        };
        match (got, expected) {
            (Ok(f), Ok((ty, wide, blind))) => {
                assert_eq!((f.ty.id(), f.wide, f.blind_write), (ty, wide, blind), "{byte:#04x}");
                assert_eq!(f.byte(), byte, "{byte:#04x} re-encodes");
            }
            (Err(Error::UnsupportedType { id, .. }), Err(Error::UnsupportedType { id: want, .. })) => {
                assert_eq!(id, want)
            }
            (got, want) => assert_eq!(got.map(|_| ()), want.map(|_| ()), "{byte:#04x}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------------------

proptest! {
    #[test]
    fn versions_strictly_increase(
        seed in any::<u64>(),
        start in 0u64..(1 << 52),
        steps in vec(prop_oneof![Just(0i64), -5_000_000i64..5_000_000, select(vec![-1i64, 1, -(1 << 40)])], 1..300),
    ) {
        let generator = VersionGenerator::new(seed);
        let mut now = start;
        let mut last: Option<u64> = None;
        for step in steps {
            now = now.saturating_add_signed(step).min((1 << 52) - 1);
            let v = generator.next(now);
            prop_assert!(v >= now << 11, "never below the clock's candidate");
            if let Some(prev) = last {
                prop_assert!(v > prev, "{} then {} at now {}", prev, v, now);
            }
            last = Some(v);
        }
    }
}

#[test]
fn versions_strictly_increase_across_threads() {
    use std::sync::Arc;
    let generator = Arc::new(VersionGenerator::new(12345));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let g = Arc::clone(&generator);
            // Every thread uses a clock that goes backwards.
            std::thread::spawn(move || {
                (0..2000u64).map(|i| g.next(1_000_000 - i * (t + 1))).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all = Vec::new();
    for h in handles {
        let versions = h.join().unwrap();
        assert!(versions.windows(2).all(|w| w[0] < w[1]), "each thread sees increasing versions");
        all.extend(versions);
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "no version is handed out twice");
}

// ---------------------------------------------------------------------------------------
// The other systems' layouts: no panics, and round trips with their own versions
// ---------------------------------------------------------------------------------------

/// NeoKV's, camellia's (with or without its md5 spread prefix) or TiTea's layout.
fn foreign_layout() -> impl Strategy<Value = KeyLayout> {
    prop_oneof![
        (any::<i64>(), any::<i64>()).prop_map(|(r, i)| KeyLayout::neokv(r, i)),
        (tiny_bytes(6), any::<bool>()).prop_map(|(ns, md5)| {
            KeyLayout::camellia(&ns).with_hash_prefix(if md5 { 8 } else { 0 }).unwrap()
        }),
        tiny_bytes(6).prop_map(|ns| KeyLayout::titea(&ns)),
    ]
}

/// The bytes every record of `layout` starts with, so decoding gets past the head.
fn heads(layout: &KeyLayout) -> Vec<Vec<u8>> {
    let ns = layout.namespace().to_vec();
    vec![
        [b"m#".as_slice(), &ns].concat(),
        [b"s#".as_slice(), &ns].concat(),
        [b"k#".as_slice(), &ns].concat(),
        [b"kv".as_slice(), &ns, b"m"].concat(),
        [b"kv".as_slice(), &ns, b"d"].concat(),
        [b"kv".as_slice(), &ns, b":1g"].concat(),
        ns,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn foreign_decoders_never_panic(layout in foreign_layout(), bytes in edgy_bytes(80), head in 0usize..8) {
        let input = match heads(&layout).get(head) {
            Some(h) => [h.as_slice(), &bytes].concat(),
            None => bytes,
        };
        let _ = layout.decode_metadata_key(&input);
        let _ = layout.decode_subkey(&input);
        if let Ok(k) = layout.decode_score_key(&input) {
            prop_assert!(!k.score.is_nan());
        }
        let _ = layout.decode_metadata(&input);
        let _ = layout.peek_type_and_expire(&input);
        if let Ok(x) = layout.decode_member_score(&input) {
            prop_assert!(!x.is_nan());
        }
        let _ = layout.decode_list_sub(&input);
        let _ = layout.index_record_tag(&input);
        let _ = layout.decode_legacy_string_key(&input);
    }

    #[test]
    fn foreign_records_round_trip(
        layout in foreign_layout(),
        key in edgy_bytes(24),
        wide in any::<[u8; 16]>(),
        narrow in any::<u64>(),
        sub in edgy_bytes(24),
        s in score(),
        index in any::<u64>(),
    ) {
        // TiTea's versions are 16-byte ids; the others' 64-bit.
        let v = if layout.version_len() == 16 { Version::Id(wide) } else { Version::Short(narrow) };
        let mk = layout.metadata_key(&key);
        prop_assert_eq!(layout.decode_metadata_key(&mk).unwrap().user_key, &key[..]);
        let sk = layout.subkey(&key, v, &sub).unwrap();
        let d = layout.decode_subkey(&sk).unwrap();
        prop_assert_eq!((d.version, d.sub), (v, &sub[..]));
        if layout.version_len() == 8 {
            prop_assert_eq!(layout.owner_metadata_key(&d.owner()), mk.clone());
        }
        prop_assert!(layout.subkey_range(&key, v).unwrap().contains(&sk));
        let score_key = layout.score_key(&key, v, s, &sub).unwrap();
        let d = layout.decode_score_key(&score_key).unwrap();
        prop_assert_eq!((d.version, d.member), (v, &sub[..]));
        prop_assert_eq!(d.score.to_bits(), (s + 0.0).to_bits());
        let member = layout.encode_member_score(s).unwrap();
        prop_assert_eq!(layout.decode_member_score(&member).unwrap().to_bits(), (s + 0.0).to_bits());
        prop_assert_eq!(layout.decode_list_sub(&layout.list_sub(index)), Some(index));
    }
}
