//! camellia-redis-proxy-kv writes a string with the time of the write as its version
//! (microseconds << 11 plus a counter). Versions come from the process-wide generator,
//! which never hands out one at or below the last it gave: other tests writing in the same
//! process would push the time bits past this test's clock, so it runs in a process of its
//! own.

mod common;

use common::*;
use std::sync::Arc;

use rediskv::{ColumnFamily, KvBackend, MemoryBackend};
use rediskv::{Db, Reply};
use rediskv::{KeyLayout, ManualClock};

fn layout() -> KeyLayout {
    KeyLayout::camellia(b"ns")
}

fn db_of(layout: KeyLayout) -> (Db<'static, MemoryBackend>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0_MS));
    (Db::with_layout(MemoryBackend::new(), layout).with_clock(clock.clone()).with_seed(7), clock)
}

/// camellia writes a new key version into a string at every write (`SetCommander`:
/// `new KeyMeta(…, System.currentTimeMillis(), …)`) and keeps it across EXPIRE
/// (`ExpireCommander`: `keyMeta.getKeyVersion()`); the engine writes its own versions there,
/// as for collections: `unix_us << 11` plus a counter.
#[test]
fn strings_get_a_version_at_every_write() {
    let (mut db, clock) = db_of(layout());
    let version = |db: &Db<'static, MemoryBackend>| {
        let raw = db.backend().get(ColumnFamily::Metadata, &layout().metadata_key(b"s")).unwrap().unwrap();
        u64::from_be_bytes(raw[2..10].try_into().unwrap())
    };
    assert_eq!(run(&mut db, "SET s a"), Reply::OK);
    let first = version(&db);
    assert_eq!(first >> 11, T0_MS * 1000, "the time of the write");
    clock.advance_ms(1);
    assert_eq!(run(&mut db, "SET s b"), Reply::OK);
    let second = version(&db);
    assert!(second >> 11 == (T0_MS + 1) * 1000 && second > first, "{first} then {second}");
    assert_eq!(run(&mut db, "PEXPIRE s 5000"), int(1));
    assert_eq!(version(&db), second, "EXPIRE keeps the version");
    assert_eq!(run(&mut db, "GET s"), Reply::bulk(b"b"));
}
