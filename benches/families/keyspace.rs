//! Keyspace command throughput on `MemoryBackend`: EXPIRE and DEL.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::Criterion;
use rediskv::Db;
use rediskv::MemoryBackend;

pub fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("keyspace");
    group.measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_secs(1)).sample_size(20);

    let mut db = Db::new(MemoryBackend::new());
    let keys: Vec<Bytes> = (0..10_000).map(|i| Bytes::from(format!("key:{i}"))).collect();
    for k in &keys {
        db.execute(&[Bytes::from_static(b"SET"), k.clone(), Bytes::from_static(b"v")]);
    }
    let mut i = 0usize;
    group.bench_function("EXPIRE", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            black_box(db.execute(&[
                Bytes::from_static(b"EXPIRE"),
                keys[i].clone(),
                Bytes::from_static(b"1000"),
            ]))
        })
    });
    // DEL of a key that exists: each iteration re-creates it first, measured together.
    group.bench_function("SET+DEL", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            db.execute(&[Bytes::from_static(b"SET"), keys[i].clone(), Bytes::from_static(b"v")]);
            black_box(db.execute(&[Bytes::from_static(b"DEL"), keys[i].clone()]))
        })
    });
    group.bench_function("DEL missing", |b| {
        b.iter(|| black_box(db.execute(&[Bytes::from_static(b"DEL"), Bytes::from_static(b"nokey")])))
    });
    group.finish();
}
