//! Command throughput on `MemoryBackend`, one criterion group per type family.

use criterion::{criterion_group, criterion_main};

#[path = "families/hash.rs"]
mod hash;
#[path = "families/keyspace.rs"]
mod keyspace;
#[path = "families/list.rs"]
mod list;
#[path = "families/set.rs"]
mod set;
#[path = "families/string.rs"]
mod string;
#[path = "families/zset.rs"]
mod zset;

criterion_group!(
    benches,
    string::benches,
    keyspace::benches,
    hash::benches,
    set::benches,
    list::benches,
    zset::benches
);
criterion_main!(benches);
