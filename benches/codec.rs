//! Codec micro-benchmarks: encode and decode of each record kind, the ordered double and
//! version generation, next to a bare copy of the same number of bytes (the floor).
//!
//! Encoders write into a reused `Vec` (clear, then encode), so nothing allocates per op.
//! The user key is 16 bytes and the field/member 8 bytes. Goal: each op <= 15 ns and within
//! 3x of the copy of its size. Run: `cargo bench --bench codec`. The `info/` and `md5/`
//! groups time the optional layout features (not held to the goal). Record keys are timed for
//! each layout: Kvrocks' under `encode/…`, NeoKV's under `neokv/encode/…`.
//!
//! A closure's return value passes through criterion's `black_box`, a volatile read of the
//! whole value (criterion's `real_blackbox` feature needs a nightly compiler), and is then
//! dropped: a codec call's time includes copying and dropping its `Result` (40 bytes and up),
//! which the word-sized tags of `rediskv::Error` and `rediskv::Version` keep to word copies.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rediskv::{
    KeyLayout, Metadata, RedisType, Version, VersionGenerator, decode_f64, decode_neokv_legacy, encode_f64,
    encode_neokv_legacy,
};

const KEY: &[u8; 16] = b"user:0000012345:";
const FIELD: &[u8; 8] = b"field:07";
const VERSION_BITS: u64 = 0x0006_2A4F_1234_5678;
const VERSION: Version = Version::Short(VERSION_BITS);

fn copy_floor(c: &mut Criterion, name: &str, len: usize) {
    let src: Vec<u8> = (0..len as u8).collect();
    let mut buf = Vec::with_capacity(256);
    c.bench_function(&format!("copy/{name}_{len}B"), |b| {
        b.iter(|| {
            buf.clear();
            buf.extend_from_slice(black_box(&src));
            black_box(&buf);
        })
    });
}

/// The same parts copied with one `extend_from_slice` each: the floor for a record made of
/// several variable-length parts (each is a separate `memcpy`).
fn copy_parts<const N: usize>(c: &mut Criterion, name: &str, parts: [&[u8]; N]) {
    let mut buf = Vec::with_capacity(256);
    c.bench_function(&format!("copy_parts/{name}_{N}"), |b| {
        b.iter(|| {
            buf.clear();
            for part in parts {
                buf.extend_from_slice(black_box(part));
            }
            black_box(&buf);
        })
    });
}

fn metadata(c: &mut Criterion) {
    let meta =
        Metadata { size: 42, expire_ms: 1_700_000_000_123, ..Metadata::collection(RedisType::Hash, VERSION) };
    let bytes = meta.to_vec();
    copy_floor(c, "metadata", bytes.len());
    let mut buf = Vec::with_capacity(256);
    c.bench_function("encode/metadata_hash", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&meta).encode(&mut buf);
            black_box(&buf);
        })
    });
    c.bench_function("decode/metadata_hash", |b| b.iter(|| Metadata::decode(black_box(&bytes))));
}

fn keys(c: &mut Criterion) {
    layout_keys(c, "", &KeyLayout::default());
    layout_keys(c, "neokv/", &KeyLayout::neokv(1, 1));
    layout_keys(c, "camellia/", &KeyLayout::camellia(b"default"));
    layout_keys(c, "titea/", &KeyLayout::titea(b"default.default"));
    features(c);
}

/// Encode and decode of each record key under `layout`, named `<prefix>encode/…`.
fn layout_keys(c: &mut Criterion, prefix: &str, layout: &KeyLayout) {
    let mut buf = Vec::with_capacity(256);

    let mkey = layout.metadata_key(KEY);
    copy_floor(c, &format!("{prefix}metadata_key"), mkey.len());
    c.bench_function(&format!("{prefix}encode/metadata_key"), |b| {
        b.iter(|| {
            buf.clear();
            layout.encode_metadata_key(black_box(KEY), &mut buf);
            black_box(&buf);
        })
    });
    c.bench_function(&format!("{prefix}decode/metadata_key"), |b| {
        b.iter(|| layout.decode_metadata_key(black_box(&mkey)))
    });

    // TiTea names a collection by a 16-byte id: the same bits, widened.
    let version = if layout.version_len() == 16 {
        Version::Id(u128::from(VERSION_BITS).to_be_bytes())
    } else {
        VERSION
    };
    let sub = layout.subkey(KEY, version, FIELD).unwrap();
    copy_floor(c, &format!("{prefix}subkey"), sub.len());
    let head = &sub[..sub.len() - KEY.len() - 12 - FIELD.len()];
    copy_parts(
        c,
        &format!("{prefix}subkey"),
        [head, &16u32.to_be_bytes(), KEY, &u128::from(VERSION_BITS).to_be_bytes(), FIELD],
    );
    c.bench_function(&format!("{prefix}encode/subkey"), |b| {
        b.iter(|| {
            buf.clear();
            layout.encode_subkey(black_box(KEY), black_box(version), black_box(FIELD), &mut buf).unwrap();
            black_box(&buf);
        })
    });
    c.bench_function(&format!("{prefix}decode/subkey"), |b| b.iter(|| layout.decode_subkey(black_box(&sub))));
    // A command routes its key once (slot, md5) and builds each of its records from that.
    let routed = layout.routed(KEY);
    c.bench_function(&format!("{prefix}encode/subkey_routed"), |b| {
        b.iter(|| {
            buf.clear();
            black_box(&routed).encode_subkey(black_box(version), black_box(FIELD), &mut buf).unwrap();
            black_box(&buf);
        })
    });

    let score = layout.score_key(KEY, version, 1.5, FIELD).unwrap();
    copy_floor(c, &format!("{prefix}score_key"), score.len());
    let score_bytes = encode_f64(1.5).unwrap();
    copy_parts(
        c,
        &format!("{prefix}score_key"),
        [head, &16u32.to_be_bytes(), KEY, &u128::from(VERSION_BITS).to_be_bytes(), &score_bytes, FIELD],
    );
    c.bench_function(&format!("{prefix}encode/score_key"), |b| {
        b.iter(|| {
            buf.clear();
            layout
                .encode_score_key(
                    black_box(KEY),
                    black_box(version),
                    black_box(1.5),
                    black_box(FIELD),
                    &mut buf,
                )
                .unwrap();
            black_box(&buf);
        })
    });
    c.bench_function(&format!("{prefix}decode/score_key"), |b| {
        b.iter(|| layout.decode_score_key(black_box(&score)))
    });
    // Values: a hash's metadata through the layout (camellia's are its own bytes), and a
    // zset member's score (camellia: decimal text).
    let meta =
        Metadata { size: 42, expire_ms: 1_700_000_000_123, ..Metadata::collection(RedisType::Hash, version) };
    let value = layout.encode_metadata(&meta).unwrap();
    c.bench_function(&format!("{prefix}encode/metadata_value"), |b| {
        b.iter(|| layout.encode_metadata(black_box(&meta)))
    });
    c.bench_function(&format!("{prefix}decode/metadata_value"), |b| {
        b.iter(|| layout.decode_metadata(black_box(&value)))
    });
    let member = layout.encode_member_score(1234.5).unwrap();
    c.bench_function(&format!("{prefix}encode/member_score"), |b| {
        b.iter(|| layout.encode_member_score(black_box(1234.5)))
    });
    c.bench_function(&format!("{prefix}decode/member_score"), |b| {
        b.iter(|| layout.decode_member_score(black_box(&member)))
    });
    if let Some(legacy) = layout.legacy_string_key(&mkey) {
        let value = encode_neokv_legacy(1_700_000_000_000, b"value:0123456789");
        c.bench_function(&format!("{prefix}decode/legacy_string"), |b| {
            b.iter(|| {
                let owner = layout.decode_legacy_string_key(black_box(&legacy));
                (owner.map(|m| layout.decode_metadata_key(m)), decode_neokv_legacy(black_box(&value)))
            })
        });
    }
}

/// The optional Kvrocks layout features, for information.
fn features(c: &mut Criterion) {
    let mut buf = Vec::with_capacity(256);
    // For information: the optional layout features (not held to the goal).
    let slots = KeyLayout::default().with_cluster_slots(true);
    c.bench_function("info/encode_subkey_slots", |b| {
        b.iter(|| {
            buf.clear();
            slots.encode_subkey(black_box(KEY), black_box(VERSION), black_box(FIELD), &mut buf).unwrap();
            black_box(&buf);
        })
    });
    // The md5 spread prefix: the hash of the user key dominates a record built from
    // scratch; a command hashes once (`KeyLayout::routed`) and builds every record from it.
    let md5 = KeyLayout::default().with_hash_prefix(4).unwrap();
    c.bench_function("md5/routed_key", |b| b.iter(|| md5.routed(black_box(KEY))));
    c.bench_function("md5/encode_subkey_md5_4", |b| {
        b.iter(|| {
            buf.clear();
            md5.encode_subkey(black_box(KEY), black_box(VERSION), black_box(FIELD), &mut buf).unwrap();
            black_box(&buf);
        })
    });
    let routed = md5.routed(KEY);
    c.bench_function("md5/encode_subkey_md5_4_routed", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&routed).encode_subkey(black_box(VERSION), black_box(FIELD), &mut buf).unwrap();
            black_box(&buf);
        })
    });
}

fn double_and_version(c: &mut Criterion) {
    copy_floor(c, "double", 8);
    c.bench_function("encode/double", |b| b.iter(|| encode_f64(black_box(-1234.5678))));
    let bytes = encode_f64(-1234.5678).unwrap();
    c.bench_function("decode/double", |b| b.iter(|| decode_f64(black_box(bytes))));
    let generator = VersionGenerator::new(7);
    let mut now = 1_790_000_000_000_000u64;
    c.bench_function("version/next", |b| {
        b.iter(|| {
            now += 1;
            generator.next(black_box(now))
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = metadata, keys, double_and_version
}
criterion_main!(benches);
