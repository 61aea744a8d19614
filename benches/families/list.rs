//! List command throughput on `MemoryBackend`: pushes, pops, LINDEX/LRANGE, LINDEX in the
//! middle of a 1K vs a 1M list (should be within ~2x: one point read either way), and
//! LINSERT/LREM in the middle of a 10K list (O(n/2) shifts).

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::Criterion;
use rediskv::Db;
use rediskv::{ColumnFamily, LIST_INITIAL_INDEX, Metadata, RedisType};
use rediskv::{KvBackend, MemoryBackend, WriteBatch};

fn argv(parts: &[&str]) -> Vec<Bytes> {
    parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
}

/// Writes a list of `n` elements `e0..e{n-1}` at `key` directly: every subkey and the
/// metadata in one batch (fresh version).
fn fill(db: &mut Db<MemoryBackend>, key: &[u8], n: u64) {
    let version = db.new_version();
    let mut meta = Metadata::collection(RedisType::List, version);
    let prefix = db.layout().subkey_prefix(key, version, 8).unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..n {
        let mut k = prefix.clone();
        k.extend_from_slice(&(LIST_INITIAL_INDEX + i).to_be_bytes());
        batch.put(ColumnFamily::Subkey, k, Bytes::from(format!("e{i}")));
    }
    meta.size = n;
    meta.tail = LIST_INITIAL_INDEX + n;
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(key), meta.to_vec());
    db.backend_mut().write(batch).unwrap();
}

fn db_with(n: u64) -> Db<'static, MemoryBackend> {
    let mut db = Db::new(MemoryBackend::new());
    fill(&mut db, b"l", n);
    db
}

/// Times `iters` runs of `cmd`, refilling the list (untimed) whenever it runs empty.
fn timed_pops(db: &mut Db<MemoryBackend>, cmd: &[Bytes], iters: u64) -> Duration {
    const CHUNK: u64 = 10_000;
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(CHUNK);
        fill(db, b"l", n);
        let start = Instant::now();
        for _ in 0..n {
            black_box(db.execute(cmd));
        }
        total += start.elapsed();
        left -= n;
    }
    total
}

pub fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("list");
    g.measurement_time(Duration::from_secs(2));
    g.warm_up_time(Duration::from_millis(500));
    g.sample_size(10);

    for name in ["LPUSH", "RPUSH"] {
        let mut db = db_with(1000);
        let cmd = argv(&[name, "l", "value"]);
        g.bench_function(name.to_lowercase(), |b| {
            b.iter_custom(|iters| {
                // Start over (untimed) every 100K pushes to bound memory.
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let n = left.min(100_000);
                    db = db_with(1000);
                    let start = Instant::now();
                    for _ in 0..n {
                        black_box(db.execute(&cmd));
                    }
                    total += start.elapsed();
                    left -= n;
                }
                total
            })
        });
    }

    for name in ["LPOP", "RPOP"] {
        let mut db = Db::new(MemoryBackend::new());
        let cmd = argv(&[name, "l"]);
        g.bench_function(name.to_lowercase(), |b| b.iter_custom(|iters| timed_pops(&mut db, &cmd, iters)));
    }

    {
        let mut db = db_with(1000);
        let cmd = argv(&["LINDEX", "l", "500"]);
        g.bench_function("lindex_500_of_1k", |b| b.iter(|| black_box(db.execute(&cmd))));
        let cmd = argv(&["LRANGE", "l", "0", "99"]);
        g.bench_function("lrange_0_99_of_1k", |b| b.iter(|| black_box(db.execute(&cmd))));
    }

    {
        let mut db = db_with(1_000_000);
        let cmd = argv(&["LINDEX", "l", "500000"]);
        g.bench_function("lindex_500k_of_1m", |b| b.iter(|| black_box(db.execute(&cmd))));
    }

    {
        // LINSERT before the middle element of a 10K list, the list restored (untimed)
        // by LREM after each insert.
        let mut db = db_with(10_000);
        let insert = argv(&["LINSERT", "l", "BEFORE", "e5000", "x"]);
        let remove = argv(&["LREM", "l", "1", "x"]);
        g.bench_function("linsert_middle_of_10k", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    black_box(db.execute(&insert));
                    total += start.elapsed();
                    db.execute(&remove);
                }
                total
            })
        });
        g.bench_function("lrem_middle_of_10k", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    db.execute(&insert);
                    let start = Instant::now();
                    black_box(db.execute(&remove));
                    total += start.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}
