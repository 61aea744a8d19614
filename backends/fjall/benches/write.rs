//! What a write costs on fjall at each layer, for the records of a SET (one: the string's
//! metadata record, overwritten) and of an LPUSH (two: the list's metadata record and a new
//! element before the others, in one batch):
//!
//! - `fjall`: the records straight into fjall's keyspaces (`Keyspace::insert`; a fjall
//!   batch for two), with the journal and memtable sizes and the manual journal persistence
//!   [`rediskv_fjall::open`] gives them by default: fjall's own floor;
//! - `backend`: the same records through [`KvBackend::write`] of a store opened with group
//!   commit, as the server opens it;
//! - `command`: the whole command through [`Db::execute`] (its arguments made once, as the
//!   server slices them from its read buffer) on that store behind the
//!   [`MetadataCache`] the server puts in front of it (lookups, encodings, key counts; not
//!   the server's key locks, statistics nor socket).
//!
//! The differences between the rows are each layer's share. Nothing is synced: the
//! journal's buffer goes to the OS when it fills. fjall's workers flush and compact meanwhile,
//! on the other cores, as under the server.

use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use fjall::{Database, KeyspaceCreateOptions};
use rediskv::{ColumnFamily, KvBackend, MetadataCache, WriteBatch};
use rediskv::{Db, Reply};
use rediskv::{KeyLayout, Metadata, RedisType, Version};
use rediskv_engine::testkit::TempDir;
use rediskv_fjall::{Options, Sync, open};

/// The SET's key and value, as `redis-benchmark -t set` sends them.
const KEY: &[u8] = b"key:__rand_int__";
const VALUE: &[u8] = b"xxx";
const LIST: &[u8] = b"mylist";

fn write(c: &mut Criterion) {
    let layout = KeyLayout::default();
    let string_key = layout.metadata_key(KEY);
    let string_record = Metadata::string(VALUE, 0).to_vec();
    let list_key = layout.metadata_key(LIST);
    let version = Version::Short(1 << 40);
    // The list's metadata after `pushed` LPUSHes, and the key of the element the next adds.
    let list_record = |pushed: u64| {
        let mut meta = Metadata::collection(RedisType::List, version);
        meta.head -= pushed;
        meta.size = pushed;
        meta.to_vec()
    };
    let initial_head = Metadata::collection(RedisType::List, version).head;
    let element_key = |pushed: u64| {
        layout.subkey(LIST, version, &(initial_head - pushed - 1).to_be_bytes()).expect("short key")
    };

    let raw_dir = TempDir::new("bench-write-fjall");
    let db = Database::builder(raw_dir.path())
        .max_journaling_size(64 << 20)
        .journal_compression(fjall::CompressionType::None)
        .open()
        .expect("open fjall");
    let keyspace = |name: &str| {
        let options =
            || KeyspaceCreateOptions::default().manual_journal_persist(true).max_memtable_size(16 << 20);
        db.keyspace(name, options).expect("keyspace")
    };
    let (metadata, subkeys) = (keyspace("metadata"), keyspace("default"));

    let dir = TempDir::new("bench-write-backend");
    let options = Options { sync: Sync::No, group_commit: true, ..Options::default() };
    let backend = open(dir.path(), options).expect("open");
    let cached = MetadataCache::new(&backend);

    let mut group = c.benchmark_group("fjall write");
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("SET: fjall", |b| {
        b.iter(|| metadata.insert(&string_key[..], &string_record[..]).expect("insert"));
    });
    group.bench_function("SET: backend", |b| {
        b.iter(|| {
            let mut batch = WriteBatch::new();
            batch.put(ColumnFamily::Metadata, string_key.clone(), string_record.clone());
            backend.write(batch).expect("write");
        });
    });
    let mut set = Db::new(&cached);
    let argv = [Bytes::from_static(b"SET"), Bytes::from_static(KEY), Bytes::from_static(VALUE)];
    group.bench_function("SET: command", |b| {
        b.iter(|| assert_eq!(set.execute(&argv), Reply::OK));
    });

    let mut pushed = 0;
    group.bench_function("LPUSH: fjall", |b| {
        b.iter(|| {
            let mut batch = db.batch();
            batch.insert(&subkeys, element_key(pushed), VALUE);
            batch.insert(&metadata, &list_key[..], list_record(pushed + 1));
            batch.commit().expect("commit");
            pushed += 1;
        });
    });
    let mut pushed = 0;
    group.bench_function("LPUSH: backend", |b| {
        b.iter(|| {
            let mut batch = WriteBatch::new();
            batch.put(ColumnFamily::Subkey, element_key(pushed), VALUE.to_vec());
            batch.put(ColumnFamily::Metadata, list_key.clone(), list_record(pushed + 1));
            backend.write(batch).expect("write");
            pushed += 1;
        });
    });
    let mut list = Db::new(&cached);
    let argv = [Bytes::from_static(b"LPUSH"), Bytes::from_static(LIST), Bytes::from_static(VALUE)];
    group.bench_function("LPUSH: command", |b| {
        b.iter(|| assert!(matches!(list.execute(&argv), Reply::Integer(_))));
    });
    group.finish();
}

criterion_group!(benches, write);
criterion_main!(benches);
