//! SETBIT at offset 2^32-1 on an empty key, then BITCOUNT of it: the Kvrocks bitmap type
//! (one 1024-byte fragment) against a Redis-style string (a 512 MB value), on
//! `MemoryBackend`. Prints the bytes each representation stores once, then times both
//! commands together from a fresh database per iteration.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rediskv::MemoryBackend;
use rediskv::{Db, Reply};

fn fresh(strings: bool) -> Db<'static, MemoryBackend> {
    let mut db = Db::new(MemoryBackend::new());
    db.set_bitmap_strings(strings);
    db
}

fn setbit_then_bitcount(db: &mut Db<'static, MemoryBackend>) {
    assert_eq!(db.run(&["SETBIT", "k", "4294967295", "1"]), Reply::Integer(0));
    assert_eq!(db.run(&["BITCOUNT", "k"]), Reply::Integer(1));
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("setbit_2^32-1_then_bitcount");
    group.sample_size(10);
    for (name, strings) in [("kvrocks_bitmap", false), ("redis_string", true)] {
        let mut db = fresh(strings);
        setbit_then_bitcount(&mut db);
        eprintln!("{name}: {} bytes stored (keys + values, every column family)", db.backend().bytes());
        drop(db);
        group.bench_function(name, |b| {
            b.iter_batched(|| fresh(strings), |mut db| setbit_then_bitcount(&mut db), BatchSize::PerIteration)
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
