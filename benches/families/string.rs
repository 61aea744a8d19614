//! String command throughput on `MemoryBackend`: SET, GET, INCR, MSET of 10 keys.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::Criterion;
use rediskv::Db;
use rediskv::MemoryBackend;

fn argv(parts: &[&str]) -> Vec<Bytes> {
    parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
}

pub fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("string");
    group.measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_secs(1)).sample_size(20);

    let mut db = Db::new(MemoryBackend::new());
    for i in 0..10_000 {
        db.run(&["SET", &format!("key:{i}"), "value-0123456789"]);
    }

    let keys: Vec<Bytes> = (0..10_000).map(|i| Bytes::from(format!("key:{i}"))).collect();
    let value = Bytes::from_static(b"value-0123456789");
    let mut i = 0usize;
    group.bench_function("SET", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            black_box(db.execute(&[Bytes::from_static(b"SET"), keys[i].clone(), value.clone()]))
        })
    });
    group.bench_function("GET", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            black_box(db.execute(&[Bytes::from_static(b"GET"), keys[i].clone()]))
        })
    });
    let incr = argv(&["INCR", "counter"]);
    group.bench_function("INCR", |b| b.iter(|| black_box(db.execute(&incr))));
    let mut mset = vec![Bytes::from_static(b"MSET")];
    for k in 0..10 {
        mset.push(Bytes::from(format!("mkey:{k}")));
        mset.push(value.clone());
    }
    group.bench_function("MSET 10 keys", |b| b.iter(|| black_box(db.execute(&mset))));
    group.finish();
}
