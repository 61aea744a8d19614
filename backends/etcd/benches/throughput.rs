//! Commands through `Engine`s over a 3-member etcd cluster on loopback, beside the memory and
//! fjall engines: one client's latency (SET, GET, INCR) and the time per command of 8
//! concurrent clients (SET on their own keys; INCR on one hot key) through one node and
//! through two nodes (4 clients each). Criterion reports time per command; throughput is its
//! inverse. Without etcd the etcd groups are skipped.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rediskv::{Engine, Reply};
use rediskv::{KvBackend, MemoryBackend};
use rediskv_etcd::testkit as common;

const CLIENTS: usize = 8;

/// One client's latency of SET, GET and INCR.
fn single<B: KvBackend>(c: &mut Criterion, name: &str, engine: &Engine<B>) {
    let mut group = c.benchmark_group(format!("{name}/1 client"));
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    let mut s = engine.session();
    assert_eq!(engine.run(&mut s, &["SET", "k", "v"]), Reply::OK);
    group.bench_function("SET", |b| b.iter(|| engine.run(&mut s, &["SET", "k", "v"])));
    group.bench_function("GET", |b| b.iter(|| engine.run(&mut s, &["GET", "k"])));
    group.bench_function("INCR", |b| b.iter(|| engine.run(&mut s, &["INCR", "n"])));
    group.finish();
}

/// `CLIENTS` threads spread over `nodes`, each running `argv(client, i)`; time per command.
fn concurrent<B: KvBackend + Sync>(
    c: &mut Criterion,
    name: &str,
    nodes: &[&Engine<B>],
    command: &str,
    argv: fn(usize, u64) -> Vec<String>,
) {
    let mut group = c.benchmark_group(format!("{name}/{CLIENTS} clients/{} node(s)", nodes.len()));
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    group.bench_function(command, |b| {
        b.iter_custom(|iters| {
            let per_client = iters.div_ceil(CLIENTS as u64);
            let start = Instant::now();
            std::thread::scope(|s| {
                for client in 0..CLIENTS {
                    let engine = nodes[client % nodes.len()];
                    s.spawn(move || {
                        let mut session = engine.session();
                        for i in 0..per_client {
                            let reply = engine.run(&mut session, &argv(client, i));
                            assert!(!matches!(reply, Reply::Error(_)), "{reply:?}");
                        }
                    });
                }
            });
            // The clients ran `per_client * CLIENTS` commands; criterion asked for `iters`.
            start.elapsed().mul_f64(iters as f64 / (per_client * CLIENTS as u64) as f64)
        })
    });
    group.finish();
}

fn set_own(client: usize, i: u64) -> Vec<String> {
    vec!["SET".into(), format!("c{client}:{}", i % 1000), "value".into()]
}

fn incr_hot(_: usize, _: u64) -> Vec<String> {
    vec!["INCR".into(), "hot".into()]
}

fn engines<B: KvBackend + Sync>(c: &mut Criterion, name: &str, nodes: &[&Engine<B>]) {
    single(c, name, nodes[0]);
    concurrent(c, name, &nodes[..1], "SET", set_own);
    concurrent(c, name, &nodes[..1], "INCR hot", incr_hot);
    if nodes.len() > 1 {
        concurrent(c, name, nodes, "SET", set_own);
        concurrent(c, name, nodes, "INCR hot", incr_hot);
    }
}

fn benches(c: &mut Criterion) {
    let memory = Engine::new(MemoryBackend::new());
    engines(c, "memory", &[&memory]);
    let dir = rediskv_engine::testkit::TempDir::new("bench-fjall");
    let fjall =
        Engine::new(rediskv_fjall::open(dir.path(), rediskv_fjall::Options::default()).expect("fjall"));
    engines(c, "fjall", &[&fjall]);
    let Some(cluster) = common::Cluster::start("etcd throughput bench", 3) else { return };
    let (a, b) = (Engine::new(cluster.open("bench/")), Engine::new(cluster.open("bench/")));
    engines(c, "etcd", &[&a, &b]);
}

criterion_group!(throughput, benches);
criterion_main!(throughput);
