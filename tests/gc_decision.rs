//! The garbage decision, the expiry sweep and the compaction pass on hand-built records.

use bytes::Bytes;
use rediskv::gc::{Collector, Decision, ExpirySweep, compact, decide, decide_with_metadata};
use rediskv::{ColumnFamily, KvBackend, MemoryBackend, WriteBatch};
use rediskv::{KeyLayout, Metadata, RedisType, Version};

const NOW: u64 = 1_000_000;
const GRACE: u64 = 300_000;

fn hash_meta(version: u64, size: u64, expire_ms: u64) -> Vec<u8> {
    Metadata { size, expire_ms, ..Metadata::collection(RedisType::Hash, Version::Short(version)) }.to_vec()
}

#[test]
fn decision_table() {
    let live = hash_meta(7, 1, 0);
    assert_eq!(
        decide_with_metadata(&KeyLayout::default(), &live, Version::Short(7), NOW, GRACE),
        Decision::Keep
    );
    assert_eq!(
        decide_with_metadata(&KeyLayout::default(), &live, Version::Short(6), NOW, GRACE),
        Decision::Drop,
        "older version"
    );
    assert_eq!(
        decide_with_metadata(&KeyLayout::default(), &live, Version::Short(8), NOW, GRACE),
        Decision::Drop,
        "other version"
    );
    assert_eq!(
        decide_with_metadata(
            &KeyLayout::default(),
            &Metadata::string(b"v", 0).to_vec(),
            Version::Short(7),
            NOW,
            GRACE
        ),
        Decision::Drop
    );
    assert_eq!(
        decide_with_metadata(&KeyLayout::default(), &hash_meta(7, 0, 0), Version::Short(7), NOW, GRACE),
        Decision::Drop,
        "empty"
    );
    // Expired, but still within the grace period: kept.
    assert_eq!(
        decide_with_metadata(&KeyLayout::default(), &hash_meta(7, 1, NOW - 1), Version::Short(7), NOW, GRACE),
        Decision::Keep
    );
    assert_eq!(
        decide_with_metadata(
            &KeyLayout::default(),
            &hash_meta(7, 1, NOW - GRACE),
            Version::Short(7),
            NOW,
            GRACE
        ),
        Decision::Keep
    );
    assert_eq!(
        decide_with_metadata(
            &KeyLayout::default(),
            &hash_meta(7, 1, NOW - GRACE - 1),
            Version::Short(7),
            NOW,
            GRACE
        ),
        Decision::Drop
    );
    assert_eq!(
        decide_with_metadata(&KeyLayout::default(), &hash_meta(7, 1, NOW - 1), Version::Short(7), NOW, 0),
        Decision::Drop
    );
    // Unreadable metadata (a Kvrocks bitmap, type 6): never drop what we cannot read.
    let bitmap = [0x86, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1];
    assert_eq!(
        decide_with_metadata(&KeyLayout::default(), &bitmap, Version::Short(7), NOW, GRACE),
        Decision::Keep
    );
}

#[test]
fn decide_looks_up_the_owner_metadata_key() {
    let layout = KeyLayout::default().with_cluster_slots(true).with_hash_prefix(4).unwrap();
    let sub = layout.subkey(b"user:1", Version::Short(7), b"field").unwrap();
    let want = layout.metadata_key(b"user:1");
    let mut asked = Vec::new();
    let d = decide(
        &layout,
        ColumnFamily::Subkey,
        &sub,
        |k: &[u8]| {
            asked.push(k.to_vec());
            Some(hash_meta(7, 1, 0))
        },
        NOW,
        GRACE,
    );
    assert_eq!(d, Decision::Keep);
    assert_eq!(asked, vec![want]);
    let score = layout.score_key(b"user:1", Version::Short(7), 1.5, b"m").unwrap();
    assert_eq!(
        decide(&layout, ColumnFamily::Score, &score, |_: &[u8]| None::<Vec<u8>>, NOW, GRACE),
        Decision::Drop
    );
    // Another namespace's record is looked up under its own namespace.
    let other = layout.clone().with_namespace(b"other").unwrap();
    let sub = other.subkey(b"k", Version::Short(1), b"f").unwrap();
    let mut asked = Vec::new();
    decide(
        &layout,
        ColumnFamily::Subkey,
        &sub,
        |k: &[u8]| {
            asked.push(k.to_vec());
            None::<Vec<u8>>
        },
        NOW,
        GRACE,
    );
    assert_eq!(asked, vec![other.metadata_key(b"k")]);
    // Garbage bytes: kept, never a panic.
    assert_eq!(
        decide(&layout, ColumnFamily::Subkey, b"\x0b__nam", |_: &[u8]| None::<Vec<u8>>, NOW, GRACE),
        Decision::Keep
    );
}

fn put_meta(b: &mut MemoryBackend, layout: &KeyLayout, key: &[u8], value: Vec<u8>) {
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Metadata, layout.metadata_key(key), value);
    b.write(batch).unwrap();
}

#[test]
fn sweep_deletes_expired_metadata_in_bounded_steps() {
    let layout = KeyLayout::default();
    let mut b = MemoryBackend::new();
    let mut expired = Vec::new();
    for i in 0..25u32 {
        let key = format!("k{i:02}");
        let expire = match i % 3 {
            0 => NOW - 1,
            1 => NOW + 100 - u64::from(i),
            _ => 0,
        };
        if i % 3 == 0 {
            expired.push(Bytes::from(layout.metadata_key(key.as_bytes())));
        }
        put_meta(&mut b, &layout, key.as_bytes(), Metadata::string(b"v", expire).to_vec());
    }
    // A key in another namespace, expired, outside the swept range.
    let other = layout.clone().with_namespace(b"x").unwrap();
    put_meta(&mut b, &other, b"k", Metadata::string(b"v", 1).to_vec());

    let mut sweep = ExpirySweep::new(layout.namespace_range());
    let mut removed = Vec::new();
    let mut steps = 0;
    let mut next = Vec::new();
    while !sweep.is_done() {
        let step = sweep.step(&b, NOW, 10).unwrap();
        assert!(step.scanned <= 10);
        removed.extend(step.removed);
        next.push(step.next_expiry_ms);
        steps += 1;
    }
    assert_eq!(steps, 3, "25 records in steps of 10");
    assert_eq!(removed, expired);
    // Each step names the earliest expiry still to come among its records (k01..k09,
    // k10..k19, k22: NOW + 100 - i for i % 3 == 1).
    assert_eq!(next, [Some(NOW + 93), Some(NOW + 81), Some(NOW + 78)]);
    assert_eq!(b.len(ColumnFamily::Metadata), 25 - expired.len() + 1);
    assert!(b.get(ColumnFamily::Metadata, &other.metadata_key(b"k")).unwrap().is_some());
}

/// Live hash `h` v7 (fields a, b) beside leftovers of its v6; deleted zset `z` v3; live zset
/// `z2` v9: 6 subkeys and 2 score records, of which 3 subkeys and 1 score record are garbage.
fn mixed_store(layout: &KeyLayout) -> MemoryBackend {
    let b = MemoryBackend::new();
    let mut batch = WriteBatch::new();
    // live hash v7 with 2 fields, plus leftovers of its old version 6
    batch.put(ColumnFamily::Metadata, layout.metadata_key(b"h"), hash_meta(7, 2, 0));
    for (v, f) in [(7, "a"), (7, "b"), (6, "a"), (6, "old")] {
        batch.put(
            ColumnFamily::Subkey,
            layout.subkey(b"h", Version::Short(v), f.as_bytes()).unwrap(),
            Bytes::from_static(b"x"),
        );
    }
    // deleted zset: records with no metadata
    batch.put(ColumnFamily::Subkey, layout.subkey(b"z", Version::Short(3), b"m").unwrap(), Bytes::new());
    batch.put(
        ColumnFamily::Score,
        layout.score_key(b"z", Version::Short(3), 2.0, b"m").unwrap(),
        Bytes::new(),
    );
    // zset that is live
    let zmeta = Metadata { size: 1, ..Metadata::collection(RedisType::ZSet, Version::Short(9)) }.to_vec();
    batch.put(ColumnFamily::Metadata, layout.metadata_key(b"z2"), zmeta);
    batch.put(ColumnFamily::Subkey, layout.subkey(b"z2", Version::Short(9), b"m").unwrap(), Bytes::new());
    batch.put(
        ColumnFamily::Score,
        layout.score_key(b"z2", Version::Short(9), 1.0, b"m").unwrap(),
        Bytes::new(),
    );
    b.write(batch).unwrap();
    b
}

#[test]
fn compaction_drops_exactly_the_orphans() {
    let layout = KeyLayout::default();
    let b = mixed_store(&layout);
    let report = compact(&b, &layout, NOW, GRACE).unwrap();
    assert_eq!(report.examined, 8);
    assert_eq!(report.dropped_subkeys, 3);
    assert_eq!(report.dropped_scores, 1);
    let left: Vec<_> = b.records(ColumnFamily::Subkey).map(|(k, _)| k.clone()).collect();
    assert_eq!(
        left,
        vec![
            Bytes::from(layout.subkey(b"h", Version::Short(7), b"a").unwrap()),
            Bytes::from(layout.subkey(b"h", Version::Short(7), b"b").unwrap()),
            Bytes::from(layout.subkey(b"z2", Version::Short(9), b"m").unwrap()),
        ]
    );
    assert_eq!(b.len(ColumnFamily::Score), 1);
    assert_eq!(compact(&b, &layout, NOW, GRACE).unwrap().dropped_subkeys, 0, "idempotent");
}

#[test]
fn collector_works_in_bounded_steps_and_reads_metadata_once_per_run() {
    let layout = KeyLayout::default();
    let b = mixed_store(&layout);
    let mut collector = Collector::new(&layout, GRACE);
    let mut steps = Vec::new();
    loop {
        let step = collector.step(&b, NOW, 3).unwrap();
        assert!(step.examined <= 3);
        steps.push(step);
        if step.pass_done {
            break;
        }
    }
    // 6 subkeys then 2 score records, three at a time.
    assert_eq!(steps.iter().map(|s| s.examined).collect::<Vec<_>>(), vec![3, 3, 2]);
    assert_eq!(steps.iter().map(|s| s.dropped_subkeys).sum::<usize>(), 3);
    assert_eq!(steps.iter().map(|s| s.dropped_scores).sum::<usize>(), 1);
    // Runs by (owner, version): [h6 h6 h7] [h7 z3 z2] [z-score z2-score].
    assert_eq!(steps.iter().map(|s| s.metadata_reads).collect::<Vec<_>>(), vec![2, 3, 2]);
    assert_eq!(collector.stats().passes, 1);
    assert_eq!(collector.position(), (ColumnFamily::Subkey, &b""[..]), "the next pass starts over");
    assert_eq!(b.len(ColumnFamily::Subkey), 3);
    assert_eq!(b.len(ColumnFamily::Score), 1);
    let again = collector.step(&b, NOW, 100).unwrap();
    assert_eq!((again.examined, again.dropped_subkeys + again.dropped_scores, again.pass_done), (4, 0, true));
}
