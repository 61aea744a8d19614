//! Sorted-set commands on `MemoryBackend`, through the argv dispatcher.
//!
//! Run only this family: `cargo bench --bench commands -- zset/`.
//! Big sets are built by writing both records of every member directly in one WriteBatch.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use rediskv::{ColumnFamily, KvBackend, MemoryBackend, WriteBatch};
use rediskv::{Db, Reply};
use rediskv::{Metadata, RedisType, encode_f64};

fn argv(line: &str) -> Vec<Bytes> {
    line.split_whitespace().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect()
}

/// Writes a sorted set `key` with members `m0000000..` scored 0..n directly.
fn build(db: &mut Db<MemoryBackend>, key: &str, n: u64, stride: u64) {
    let version = db.new_version();
    let mut batch = WriteBatch::new();
    for i in 0..n {
        let member = format!("m{:07}", i * stride);
        let score = (i * stride) as f64;
        let layout = db.layout();
        batch.put(
            ColumnFamily::Subkey,
            layout.subkey(key.as_bytes(), version, member.as_bytes()).unwrap(),
            encode_f64(score).unwrap().to_vec(),
        );
        batch.put(
            ColumnFamily::Score,
            layout.score_key(key.as_bytes(), version, score, member.as_bytes()).unwrap(),
            Bytes::new(),
        );
    }
    let mut meta = Metadata::collection(RedisType::ZSet, version);
    meta.size = n;
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(key.as_bytes()), meta.to_vec());
    db.backend_mut().write(batch).unwrap();
}

fn bench(c: &mut BenchmarkGroup<'_, WallTime>, db: &mut Db<MemoryBackend>, name: &str, line: &str) {
    let args = argv(line);
    let r = db.execute(&args);
    assert!(!matches!(r, Reply::Error(_)), "{line}: {r:?}");
    c.bench_function(name, |b| b.iter(|| black_box(db.execute(black_box(&args)))));
}

pub fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("zset");
    group.measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500)).sample_size(10);
    let c = &mut group;
    let mut db = Db::new(MemoryBackend::new());
    build(&mut db, "k1k", 1_000, 1);
    build(&mut db, "k1m", 1_000_000, 1);
    build(&mut db, "u1", 1_000, 1);
    build(&mut db, "u2", 1_000, 2);

    // ZADD updating an existing member's score: a point read, the old score record
    // deleted, both records written.
    let (a, b) = (argv("zadd k1k 500.5 m0000500"), argv("zadd k1k 500 m0000500"));
    let mut flip = false;
    c.bench_function("zadd_update_1k", |bn| {
        bn.iter(|| {
            flip = !flip;
            black_box(db.execute(if flip { &a } else { &b }))
        })
    });
    let mut i = 0u64;
    c.bench_function("zadd_new_member", |bn| {
        bn.iter(|| {
            i += 1;
            let args = vec![
                Bytes::from_static(b"zadd"),
                Bytes::from_static(b"grow"),
                Bytes::from(i.to_string()),
                Bytes::from(format!("n{i}")),
            ];
            black_box(db.execute(&args))
        })
    });
    bench(c, &mut db, "zscore_1k", "zscore k1k m0000500");
    bench(c, &mut db, "zincrby_1k", "zincrby k1k 1 m0000400");
    bench(c, &mut db, "zrange_0_9_1k", "zrange k1k 0 9 withscores");
    bench(c, &mut db, "zrange_0_9_1m", "zrange k1m 0 9 withscores");
    bench(c, &mut db, "zrangebyscore_limit10_1k", "zrangebyscore k1k (500 +inf withscores limit 0 10");
    bench(c, &mut db, "zrangebyscore_limit10_1m", "zrangebyscore k1m (500000 +inf withscores limit 0 10");
    bench(c, &mut db, "zrank_mid_1k", "zrank k1k m0000500");
    bench(c, &mut db, "zrank_top10_1m", "zrevrank k1m m0999990");
    bench(c, &mut db, "zunionstore_2x1k", "zunionstore dst 2 u1 u2");
    group.finish();
}
