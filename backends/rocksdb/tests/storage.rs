//! What the RocksDB engine keeps on disk and in memory: WAL files released once their writes
//! are in tables (after a flush, SAVE's operation, or a compaction), compressed tables, and
//! the usage figures INFO memory shows.

use rediskv::{ColumnFamily, KvBackend};
use rediskv_engine::DiskBackend;
use rediskv_engine::testkit::{self, TempDir};
use rediskv_rocksdb::Options;

/// Bytes written to the WAL files (`*.log`) in `dir` (their length: RocksDB allocates a WAL
/// file's blocks ahead of its writes).
fn wal_length(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("list the directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

#[test]
fn a_flush_releases_the_wal() {
    let dir = TempDir::new("rocksdb-wal");
    let backend = rediskv_rocksdb::open(dir.path(), Options::default()).expect("open");
    let raw = testkit::load_one_collection(&backend);
    // The version floor's record goes to the propagate family: its memtable holds a WAL
    // file too, unless the flush covers every family.
    assert!(wal_length(dir.path()) > raw / 2, "the writes are in the WAL first");
    assert!(backend.usage().memtables > raw / 2, "and in memtables: {:?}", backend.usage());
    backend.flush().expect("flush");
    let left = wal_length(dir.path());
    assert!(left < 64 << 10, "WAL bytes left after the flush: {left}");
    let usage = backend.usage();
    assert!(usage.tables > 0 && usage.memtables < 1 << 20, "{usage:?}");
    assert_eq!(usage.cache_capacity, Options::default().cache_bytes);
    drop(backend);
    let backend = rediskv_rocksdb::open(dir.path(), Options::default()).expect("reopen");
    let key = b"\x0b__namespace\0\0\0\x05bighash00190999-field";
    assert!(backend.get(ColumnFamily::Subkey, key).expect("get").is_some());
}

#[test]
fn tables_are_compressed() {
    let dir = TempDir::new("rocksdb-compressed");
    let backend = rediskv_rocksdb::open(dir.path(), Options::default()).expect("open");
    let raw = testkit::load_one_collection(&backend);
    // A flush, not a compaction: the collector would drop these records, which have no
    // metadata record.
    backend.flush().expect("flush");
    let stored = backend.disk_bytes(ColumnFamily::Subkey);
    assert!(stored > 0 && stored * 3 < raw, "{stored} bytes on disk for {raw} bytes of records");
}
