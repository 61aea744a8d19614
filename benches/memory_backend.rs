//! `MemoryBackend` point operations on one big collection: 1,000,000 records whose keys
//! share a 24-byte prefix and end in an 8-byte big-endian index (a list's or hash's
//! elements), with 10-byte values.
//!
//! - `get`: a point read of a random existing key;
//! - `push_end`: a one-put batch of a new key past the last one (RPUSH);
//! - `pop_last`: the first item of a reverse scan, then a one-delete batch of it (RPOP);
//! - `overwrite`: a one-put batch over a random existing key (HSET of an existing field);
//! - `push_front`: a one-put batch of a new key before the first one (LPUSH).
//!
//! `push_end` and `pop_last` undo their work untimed after each sample, and `push_front`
//! makes room for its keys untimed before, so the store stays at 1M records. Run: `cargo bench --bench memory_backend`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use rediskv::KeyRange;
use rediskv::{ColumnFamily, Direction, KvBackend, MemoryBackend, WriteBatch};

#[path = "../tests/common/rng.rs"]
mod rng;
use rng::Rng;

const RECORDS: u64 = 1_000_000;
const PREFIX: &[u8; 24] = b"\x00\x00ns\x00\x00\x07biglist\x00\x00\x01\x8f\x2a\x4e\x11\x22\x33\x44";
const CF: ColumnFamily = ColumnFamily::Subkey;

fn key(i: u64) -> [u8; 32] {
    let mut k = [0u8; 32];
    k[..24].copy_from_slice(PREFIX);
    k[24..].copy_from_slice(&i.to_be_bytes());
    k
}

fn value(i: u64) -> Bytes {
    Bytes::copy_from_slice(&(i as u16 as u128 * 0x0101_0101_0101_0101_0101).to_be_bytes()[6..])
}

fn put(store: &MemoryBackend, i: u64) {
    let mut batch = WriteBatch::new();
    batch.put(CF, Bytes::copy_from_slice(&key(i)), value(i));
    store.write(batch).unwrap();
}

fn delete(store: &MemoryBackend, i: u64) {
    let mut batch = WriteBatch::new();
    batch.delete(CF, Bytes::copy_from_slice(&key(i)));
    store.write(batch).unwrap();
}

fn filled() -> MemoryBackend {
    let store = MemoryBackend::new();
    for start in (0..RECORDS).step_by(10_000) {
        let mut batch = WriteBatch::new();
        for i in start..start + 10_000 {
            batch.put(CF, Bytes::copy_from_slice(&key(i)), value(i));
        }
        store.write(batch).unwrap();
    }
    store
}

/// Runs `iters` operations in rounds of at most 100K, so that a round's untimed set-up keeps
/// the store near its size; sums what each round answers it took.
fn in_rounds(iters: u64, mut round: impl FnMut(u64) -> Duration) -> Duration {
    let mut took = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(100_000);
        took += round(n);
        left -= n;
    }
    took
}

fn benches(c: &mut Criterion) {
    let store = filled();
    let mut g = c.benchmark_group("memory_backend");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    g.bench_function("get", |b| b.iter(|| black_box(store.get(CF, &key(rng.below(RECORDS))).unwrap())));

    g.bench_function("push_end", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in RECORDS..RECORDS + iters {
                put(&store, i);
            }
            let took = start.elapsed();
            for i in RECORDS..RECORDS + iters {
                delete(&store, i);
            }
            took
        })
    });

    let whole = KeyRange { start: PREFIX.to_vec(), end: Some(key(u64::MAX).to_vec()) };
    g.bench_function("pop_last", |b| {
        // The store is refilled (untimed) after each round of pops.
        b.iter_custom(|iters| {
            in_rounds(iters, |n| {
                let start = Instant::now();
                for _ in 0..n {
                    let (last, _) =
                        store.scan(CF, &whole, Direction::Reverse).unwrap().next().unwrap().unwrap();
                    let mut batch = WriteBatch::new();
                    batch.delete(CF, last);
                    store.write(batch).unwrap();
                }
                let took = start.elapsed();
                for i in RECORDS - n..RECORDS {
                    put(&store, i);
                }
                took
            })
        })
    });

    g.bench_function("overwrite", |b| b.iter(|| put(&store, rng.below(RECORDS))));

    // Last, so that the other cases see the store as it was before this one was added.
    g.bench_function("push_front", |b| {
        // Each round's first keys are deleted (untimed), then put back last first.
        b.iter_custom(|iters| {
            in_rounds(iters, |n| {
                for i in 0..n {
                    delete(&store, i);
                }
                let start = Instant::now();
                for i in (0..n).rev() {
                    put(&store, i);
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

criterion_group!(memory, benches);
criterion_main!(memory);
