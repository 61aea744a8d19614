//! One command through [`Engine::execute_row`] on `MemoryBackend`, as a server runs it: the
//! command's row found once, the time given by the caller, keyspace events off, the key
//! counts kept (a DBSIZE counted them), modified keys recorded only for listeners (none). What the engine adds to a command beside the store —
//! key locks, the read memo, the key counts, touched keys, last-use times — shows here
//! without the network and parsing of `benches/redis_benchmark.sh`.
//!
//! The commands are redis-benchmark's `-t set,get,incr,lpush,rpop,sadd,hset,zadd`, on its
//! keys. The bench uses the system allocator; the server links mimalloc. RPOP pops from a list kept at 100,000 elements (each sample pushes back, untimed,
//! what it popped). Run: `cargo bench --bench engine`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use rediskv::MemoryBackend;
use rediskv::server::{Listeners, table};
use rediskv::{Engine, Session};

fn argv(line: &str) -> Vec<Bytes> {
    line.split_whitespace().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect()
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// `iters` runs of `line`, each with its row and a given time, as a server's event loop.
fn timed(engine: &Engine<MemoryBackend>, session: &mut Session, line: &str, iters: u64) -> Duration {
    let argv = argv(line);
    let Ok(info) = table::find(&argv) else { panic!("{line}: not in the table") };
    let now = unix_ms();
    let start = Instant::now();
    for _ in 0..iters {
        session.set_time(now);
        black_box(engine.execute_row(session, info, &argv));
    }
    start.elapsed()
}

fn engine(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine");
    group.measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_secs(1)).sample_size(20);
    let engine = Engine::new(MemoryBackend::new()).with_listeners(Listeners::default());
    engine.set_events(false);
    let mut session = engine.session();
    engine.execute(&mut session, &argv("DBSIZE"));
    for line in [
        "SET key:__rand_int__ xxx",
        "GET key:__rand_int__",
        "INCR counter:__rand_int__",
        "LPUSH mylist xxx",
        "SADD myset element:__rand_int__",
        "HSET myhash element:__rand_int__ xxx",
        "ZADD myzset 0 element:__rand_int__",
    ] {
        let name = line.split(' ').next().unwrap_or(line);
        group.bench_function(name, |b| b.iter_custom(|iters| timed(&engine, &mut session, line, iters)));
    }
    let fill = argv("RPUSH poplist xxx");
    for _ in 0..100_000 {
        engine.execute(&mut session, &fill);
    }
    group.bench_function("RPOP", |b| {
        b.iter_custom(|iters| {
            let spent = timed(&engine, &mut session, "RPOP poplist", iters);
            for _ in 0..iters {
                engine.execute(&mut session, &fill);
            }
            spent
        })
    });
    group.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
