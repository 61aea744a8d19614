//! What the fjall engine keeps on disk: journals released once their writes are in tables
//! (after a flush, SAVE's operation, or a compaction), and compressed tables.

use std::time::{Duration, Instant};

use rediskv::{ColumnFamily, KvBackend, WriteBatch};
use rediskv_engine::DiskBackend;
use rediskv_engine::testkit::{self, TempDir};
use rediskv_fjall::Options;

/// Bytes the journal files in `dir` take on disk (allocated blocks: fjall may size a fresh
/// journal file ahead without writing it).
fn journal_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .expect("list the directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "jnl"))
        .map(|e| e.metadata().map_or(0, |m| m.blocks() * 512))
        .sum()
}

#[test]
fn a_flush_releases_the_journals() {
    let dir = TempDir::new("fjall-journal");
    // Memtables of 128 MiB: nothing is flushed before the flush asked for.
    let options = Options { write_buffer_bytes: 1 << 30, ..Options::default() };
    let backend = rediskv_fjall::open(dir.path(), options).expect("open");
    // 80 MB of 1 KB values: past the 64 MB at which fjall starts a new journal file.
    let value = vec![b'v'; 1000];
    for chunk in 0..80 {
        let mut batch = WriteBatch::new();
        for i in 0..1000 {
            batch.put(ColumnFamily::Subkey, format!("big{chunk:03}{i:04}").into_bytes(), value.clone());
        }
        backend.write(batch).expect("write");
    }
    assert!(journal_bytes(dir.path()) > 64 << 20, "the writes are in the journal first");
    backend.flush().expect("flush");
    // The sealed journal (64 MB) is gone once its writes are in tables; the active one holds
    // what came after it (about 17 MB of the 80).
    let left = journal_bytes(dir.path());
    assert!(left < 32 << 20, "journals left after the flush: {left} bytes");
    drop(backend);
    let backend = rediskv_fjall::open(dir.path(), Options::default()).expect("reopen");
    assert_eq!(backend.get(ColumnFamily::Subkey, b"big0790999").expect("get").as_deref(), Some(&value[..]));
}

#[test]
fn tables_are_compressed() {
    let dir = TempDir::new("fjall-compressed");
    let backend = std::sync::Arc::new(rediskv_fjall::open(dir.path(), Options::default()).expect("open"));
    let mut db = rediskv::Db::new(backend.clone());
    testkit::fill_hash(&mut db, "h", 20_000);
    let all = rediskv::KeyRange { start: Vec::new(), end: None };
    let raw: u64 = backend
        .scan(ColumnFamily::Subkey, &all, rediskv::Direction::Forward)
        .expect("scan")
        .map(|record| record.map(|(k, v)| (k.len() + v.len()) as u64).expect("record"))
        .sum();
    // Flushed tables (the first levels) are left uncompressed; a compaction writes the
    // last level, compressed.
    backend.compact().expect("compact");
    let stored = backend.disk_bytes(ColumnFamily::Subkey);
    assert!(stored > 0 && stored * 3 < raw, "{stored} bytes on disk for {raw} bytes of records");
}

/// Bytes of every file under `dir`.
fn tree_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("list the directory")
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => tree_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[test]
fn a_compaction_leaves_only_live_tables() {
    let dir = TempDir::new("fjall-compact");
    let backend = rediskv_fjall::open(dir.path(), Options::default()).expect("open");
    testkit::load_one_collection(&backend);
    backend.flush().expect("flush");
    let flushed = tree_bytes(&dir.path().join("keyspaces"));
    // Records without metadata: the collector drops every one, and the tables that held
    // them are deleted, not left beside the (empty) result.
    backend.compact().expect("compact");
    assert_eq!(backend.disk_bytes(ColumnFamily::Subkey), 0);
    let left = tree_bytes(&dir.path().join("keyspaces"));
    assert!(left < flushed / 4, "{left} bytes under keyspaces/ after the compaction, {flushed} before");
}

/// Bytes of the blob files under `dir` (fjall's key-value separation).
fn blob_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("list").filter_map(|e| e.ok()) {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.parent().is_some_and(|p| p.ends_with("blobs")) {
                total += entry.metadata().map_or(0, |m| m.len());
            }
        }
    }
    total
}

#[test]
fn large_strings_go_to_blob_files_and_small_records_do_not() {
    let dir = TempDir::new("fjall-blobs");
    let backend = rediskv_fjall::open(dir.path(), Options::default()).expect("open");
    // Incompressible values: what the blob files hold is the values themselves.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    };
    let mut batch = WriteBatch::new();
    for i in 0..1000 {
        batch.put(ColumnFamily::Metadata, format!("small{i:04}").into_bytes(), noise(100));
        batch.put(ColumnFamily::Subkey, format!("field{i:04}").into_bytes(), noise(100));
    }
    backend.write(batch).expect("write");
    backend.flush().expect("flush");
    assert_eq!(blob_bytes(dir.path()), 0, "small records stay in the tables");

    let large: Vec<Vec<u8>> = (0..20).map(|_| noise(100_000)).collect();
    for (i, value) in large.iter().enumerate() {
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Metadata, format!("large{i:02}").into_bytes(), value.clone());
        backend.write(batch).expect("write");
    }
    backend.flush().expect("flush");
    let blobs = blob_bytes(dir.path());
    assert!(blobs >= 20 * 100_000, "the large values are in blob files: {blobs} bytes");
    drop(backend);
    let backend = rediskv_fjall::open(dir.path(), Options::default()).expect("reopen");
    for (i, value) in large.iter().enumerate() {
        let got = backend.get(ColumnFamily::Metadata, format!("large{i:02}").as_bytes()).expect("get");
        assert_eq!(got.as_deref(), Some(&value[..]), "large{i:02}");
    }
}

#[test]
fn the_memtables_stay_within_an_eighth_of_the_write_buffer() {
    let dir = TempDir::new("fjall-memtables");
    // 16 MiB: each keyspace's memtable is sealed past 4 MiB, all together may hold 2 MiB.
    let options = Options { write_buffer_bytes: 16 << 20, ..Options::default() };
    let backend = rediskv_fjall::open(dir.path(), options).expect("open");
    let limit = 2 << 20;
    // Four keyspaces written evenly (about 6 MB as fjall counts it): their active memtables
    // alone would reach 16 MiB before fjall seals any of them, so only the bound across
    // keyspaces keeps them under 2 MiB.
    let value = vec![b'v'; 100];
    let mut most = 0;
    for chunk in 0..400 {
        let mut batch = WriteBatch::new();
        for i in 0..100 {
            let cf = ColumnFamily::ALL[i % 4];
            batch.put(cf, format!("key{chunk:04}{i:04}").into_bytes(), value.clone());
        }
        backend.write(batch).expect("write");
        most = most.max(backend.usage().memtables);
    }
    // One batch (about 20 KB as fjall counts it) may land past the bound before the next
    // write waits.
    assert!(most <= limit + (64 << 10), "memtables reached {most} bytes, the bound is {limit}");
    assert!(most > limit / 2, "the load filled the memtables: {most} bytes");
    assert_eq!(
        backend.get(ColumnFamily::Metadata, b"key00000000").expect("get").as_deref(),
        Some(&value[..])
    );
}

/// Large records take little more memory than fjall counts for them: their memtables may
/// hold more than an eighth of the write buffer by fjall's count, within a quarter of it.
#[test]
fn memtables_of_large_values_hold_more_within_a_quarter_of_the_write_buffer() {
    let dir = TempDir::new("fjall-memtables-large");
    // 16 MiB: memtables of small records may hold 2 MiB by fjall's count, any take 4 MiB.
    let options = Options { write_buffer_bytes: 16 << 20, ..Options::default() };
    let backend = rediskv_fjall::open(dir.path(), options).expect("open");
    let value = vec![b'v'; 100_000];
    let mut most = 0;
    for i in 0..200 {
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Metadata, format!("large{i:03}").into_bytes(), value.clone());
        backend.write(batch).expect("write");
        most = most.max(backend.usage().memtables);
    }
    // Small records would wait past 2 MiB; these are sealed past five eighths of 4 MiB in
    // memory, about 2.3 MB by fjall's count, and the write that sees it still lands.
    assert!(most > (9 << 20) / 4, "large values are held past the small records' bound: {most} bytes");
    assert!(most <= (4 << 20) + (128 << 10), "memtables reached {most} bytes, the bound is 4 MiB");
    assert_eq!(backend.get(ColumnFamily::Metadata, b"large000").expect("get").as_deref(), Some(&value[..]));
}

#[test]
fn memtables_past_five_eighths_of_their_bound_are_flushed_before_it() {
    let dir = TempDir::new("fjall-seal-early");
    // 16 MiB: all memtables together may hold 2 MiB, one keyspace's alone 4 MiB.
    let options = Options { write_buffer_bytes: 16 << 20, ..Options::default() };
    let backend = rediskv_fjall::open(dir.path(), options).expect("open");
    let limit = 2 << 20;
    let value = vec![b'v'; 100];
    let put = |i: usize| {
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Subkey, format!("key{i:08}").into_bytes(), value.clone());
        backend.write(batch).expect("write");
    };
    // One keyspace, one record a write, until the memtables hold more than five eighths of
    // the bound, then enough writes for the backend to look at them once more.
    let mut written = 0;
    while backend.usage().memtables <= limit / 8 * 5 {
        put(written);
        written += 1;
    }
    for _ in 0..16 {
        put(written);
        written += 1;
    }
    // Far from the bound, nothing waits for a flush, yet the memtable was sealed: with no
    // further write, its flush brings the memtables down.
    let deadline = Instant::now() + Duration::from_secs(10);
    while backend.usage().memtables > limit / 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let memtables = backend.usage().memtables;
    assert!(memtables <= limit / 4, "the memtables still hold {memtables} bytes after {written} writes");
    let last = format!("key{:08}", written - 1);
    assert_eq!(backend.get(ColumnFamily::Subkey, last.as_bytes()).expect("get").as_deref(), Some(&value[..]));
}

#[test]
fn pinned_blocks_are_reported() {
    let dir = TempDir::new("fjall-pinned");
    let backend = rediskv_fjall::open(dir.path(), Options::default()).expect("open");
    assert_eq!(backend.usage().pinned, 0, "no table, nothing pinned");
    testkit::load_one_collection(&backend);
    backend.flush().expect("flush");
    // The flushed table is in the first level, whose index and filter fjall keeps in memory.
    let usage = backend.usage();
    assert!(usage.pinned > 0, "{usage:?}");
    assert!(usage.pinned < usage.tables, "{usage:?}");
}

#[test]
fn what_stays_in_memory_per_table_does_not_grow_with_its_records() {
    let dir = TempDir::new("fjall-partitioned");
    let backend = rediskv_fjall::open(dir.path(), Options::default()).expect("open");
    // 200,000 small records in one table of the first level: whole filter and index blocks
    // pinned there would take about 3 bytes a record.
    for chunk in 0..200 {
        let mut batch = WriteBatch::new();
        for i in 0..1000 {
            batch.put(
                ColumnFamily::Subkey,
                format!("field{chunk:04}{i:04}").into_bytes(),
                b"0123456789".to_vec(),
            );
        }
        backend.write(batch).expect("write");
    }
    backend.flush().expect("flush");
    let usage = backend.usage();
    assert!(usage.tables > 256 << 10, "the records are in tables: {usage:?}");
    // Partitioned, only each table's top-level indexes stay: a few entries per MB of table.
    assert!(usage.pinned < 64 << 10, "{usage:?}");
    for key in ["field00000000", "field01990999"] {
        assert_eq!(
            backend.get(ColumnFamily::Subkey, key.as_bytes()).expect("get").as_deref(),
            Some(&b"0123456789"[..])
        );
    }
}

#[test]
fn a_live_snapshot_keeps_what_the_collector_would_drop() {
    let dir = TempDir::new("fjall-snapshot-gc");
    let backend = rediskv_fjall::open(dir.path(), Options::default()).expect("open");
    testkit::load_one_collection(&backend);
    backend.flush().expect("flush");
    let all = rediskv::KeyRange { start: Vec::new(), end: None };
    let count = |b: &dyn KvBackend| {
        b.scan(ColumnFamily::Subkey, &all, rediskv::Direction::Forward).expect("scan").count()
    };
    let records = count(&backend);
    assert!(records > 0);
    // Garbage now (no metadata record): a compaction while the snapshot lives keeps it.
    let snapshot = backend.snapshot().expect("snapshot").expect("fjall takes snapshots");
    backend.compact().expect("compact");
    assert_eq!(count(&*snapshot), records);
    drop(snapshot);
    backend.compact().expect("compact");
    assert_eq!(count(&backend), 0);
}
