//! DEL of a hash on fjall takes the same time at 1,000 and 1,000,000 fields: it writes one
//! metadata delete, whatever the size (the subkeys go later, in compaction).
//!
//! Each iteration first puts the hash's saved metadata record back (an O(1) write that
//! makes the same 1,000 or 1,000,000 fields live again), then times `DEL`.

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use rediskv::{ColumnFamily, KvBackend, WriteBatch};
use rediskv::{Db, Reply};
use rediskv_engine::testkit::{TempDir, fill_hash};
use rediskv_fjall::{Options, Sync, open};

fn del(c: &mut Criterion) {
    let dir = TempDir::new("bench-del");
    let backend = open(dir.path(), Options { sync: Sync::No, ..Options::default() }).expect("open");
    let mut db = Db::new(&backend);
    let mut group = c.benchmark_group("fjall DEL of a hash");
    for n in [1_000usize, 1_000_000] {
        let key = format!("hash-{n}");
        fill_hash(&mut db, &key, n);
        let meta_key = db.layout().metadata_key(key.as_bytes());
        let meta = backend.get(ColumnFamily::Metadata, &meta_key).expect("read").expect("hash exists");
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched(
                || {
                    let mut batch = WriteBatch::new();
                    batch.put(ColumnFamily::Metadata, meta_key.clone(), meta.clone());
                    backend.write(batch).expect("restore metadata");
                },
                |()| assert_eq!(db.run(&["DEL", key.as_str()]), Reply::Integer(1)),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, del);
criterion_main!(benches);
