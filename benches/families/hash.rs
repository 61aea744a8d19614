//! Hash commands on `MemoryBackend`: point commands, HGETALL of 100 fields, HLEN at 1K vs
//! 1M fields (one metadata read either way), and DEL of a 1M-field vs a 1-field hash (O(1)).

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::Criterion;
use rediskv::Db;
use rediskv::{ColumnFamily, KvBackend, MemoryBackend, WriteBatch};
use rediskv::{Metadata, RedisType};

fn argv(parts: &[&str]) -> Vec<Bytes> {
    parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
}

/// Writes a hash of `n` fields straight through the backend in one batch; returns its
/// metadata record so a bench can restore it after DEL.
fn build_hash(db: &mut Db<MemoryBackend>, key: &[u8], n: usize) -> Vec<u8> {
    let version = db.new_version();
    let mut meta = Metadata::collection(RedisType::Hash, version);
    meta.size = n as u64;
    let mut batch = WriteBatch::new();
    for i in 0..n {
        let sub = db.layout().subkey(key, version, format!("field:{i}").as_bytes()).unwrap();
        batch.put(ColumnFamily::Subkey, sub, Bytes::from(format!("value:{i}")));
    }
    let record = meta.to_vec();
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(key), record.clone());
    db.backend_mut().write(batch).unwrap();
    record
}

pub fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("hash");
    g.measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500)).sample_size(20);

    let mut db = Db::new(MemoryBackend::new());
    build_hash(&mut db, b"h100", 100);
    let hset = argv(&["HSET", "h100", "field:7", "new"]);
    g.bench_function("HSET existing field (100-field hash)", |b| b.iter(|| black_box(db.execute(&hset))));
    let hset_new = argv(&["HSET", "fresh", "f", "v"]);
    let del_fresh = argv(&["DEL", "fresh"]);
    g.bench_function("HSET new hash + DEL", |b| {
        b.iter(|| {
            black_box(db.execute(&hset_new));
            black_box(db.execute(&del_fresh))
        })
    });
    let hget = argv(&["HGET", "h100", "field:42"]);
    g.bench_function("HGET", |b| b.iter(|| black_box(db.execute(&hget))));
    let hlen = argv(&["HLEN", "h100"]);
    g.bench_function("HLEN 100", |b| b.iter(|| black_box(db.execute(&hlen))));
    let hgetall = argv(&["HGETALL", "h100"]);
    g.bench_function("HGETALL 100 fields", |b| b.iter(|| black_box(db.execute(&hgetall))));

    build_hash(&mut db, b"h1k", 1_000);
    let hlen1k = argv(&["HLEN", "h1k"]);
    g.bench_function("HLEN 1K", |b| b.iter(|| black_box(db.execute(&hlen1k))));
    let big = build_hash(&mut db, b"h1m", 1_000_000);
    let hlen1m = argv(&["HLEN", "h1m"]);
    g.bench_function("HLEN 1M", |b| b.iter(|| black_box(db.execute(&hlen1m))));

    let small = build_hash(&mut db, b"h1", 1);
    for (name, key, record) in [("DEL 1-field hash", "h1", small), ("DEL 1M-field hash", "h1m", big)] {
        let del = argv(&["DEL", key]);
        let meta_key = db.layout().metadata_key(key.as_bytes());
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Restore the metadata record only: the subkeys are still there (DEL is lazy).
                    let mut batch = WriteBatch::new();
                    batch.put(ColumnFamily::Metadata, meta_key.clone(), record.clone());
                    db.backend_mut().write(batch).unwrap();
                    let start = Instant::now();
                    black_box(db.execute(&del));
                    total += start.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}
