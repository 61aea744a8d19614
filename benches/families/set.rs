//! Set commands on `MemoryBackend`: SADD, SISMEMBER, SINTER of two 1K sets, and SCARD at 1K
//! vs 1M members (one metadata read either way).

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::Criterion;
use rediskv::Db;
use rediskv::{ColumnFamily, KvBackend, MemoryBackend, WriteBatch};
use rediskv::{Metadata, RedisType};

fn argv(parts: &[&str]) -> Vec<Bytes> {
    parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
}

/// Writes a set of the members `member:{start}..member:{start+n}` in one batch.
fn build_set(db: &mut Db<MemoryBackend>, key: &[u8], start: usize, n: usize) {
    let version = db.new_version();
    let mut meta = Metadata::collection(RedisType::Set, version);
    meta.size = n as u64;
    let mut batch = WriteBatch::new();
    for i in start..start + n {
        let sub = db.layout().subkey(key, version, format!("member:{i}").as_bytes()).unwrap();
        batch.put(ColumnFamily::Subkey, sub, Bytes::new());
    }
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(key), meta.to_vec());
    db.backend_mut().write(batch).unwrap();
}

pub fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("set");
    g.measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500)).sample_size(20);

    let mut db = Db::new(MemoryBackend::new());
    build_set(&mut db, b"a", 0, 1_000);
    build_set(&mut db, b"b", 500, 1_000);
    let sadd = argv(&["SADD", "a", "member:7"]);
    g.bench_function("SADD existing member (1K set)", |b| b.iter(|| black_box(db.execute(&sadd))));
    let sadd_new = argv(&["SADD", "fresh", "m"]);
    let del_fresh = argv(&["DEL", "fresh"]);
    g.bench_function("SADD new set + DEL", |b| {
        b.iter(|| {
            black_box(db.execute(&sadd_new));
            black_box(db.execute(&del_fresh))
        })
    });
    let sismember = argv(&["SISMEMBER", "a", "member:42"]);
    g.bench_function("SISMEMBER", |b| b.iter(|| black_box(db.execute(&sismember))));
    let sinter = argv(&["SINTER", "a", "b"]);
    g.bench_function("SINTER two 1K sets (500 common)", |b| b.iter(|| black_box(db.execute(&sinter))));
    let scard1k = argv(&["SCARD", "a"]);
    g.bench_function("SCARD 1K", |b| b.iter(|| black_box(db.execute(&scard1k))));
    build_set(&mut db, b"big", 0, 1_000_000);
    let scard1m = argv(&["SCARD", "big"]);
    g.bench_function("SCARD 1M", |b| b.iter(|| black_box(db.execute(&scard1m))));
    let srand = argv(&["SRANDMEMBER", "big", "10"]);
    g.bench_function("SRANDMEMBER 10 of 1M", |b| b.iter(|| black_box(db.execute(&srand))));
    g.finish();
}
