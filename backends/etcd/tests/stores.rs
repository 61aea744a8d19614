//! One store over two etcd clusters ([`SlotStores`]): each key's records in its slot's
//! cluster, scans over all keys merged, a FLUSHALL clearing both; the fence of a cluster
//! refusing commits routed by an older slot table; the recorded list of data clusters.

use rediskv_etcd::testkit as common;

use std::sync::Arc;

use bytes::Bytes;
use rediskv::{ColumnFamily, KvBackend};
use rediskv::{Engine, Reply};
use rediskv::{KeyLayout, key_slot};
use rediskv_etcd::{FENCED, SlotStores, slot_store};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

/// A key named `name` (with a suffix) whose slot is in cluster `store` of two.
fn key_in(store: usize, name: &str) -> String {
    (0..).map(|i| format!("{name}{i}")).find(|k| slot_store(key_slot(k.as_bytes()), 2) == store).unwrap()
}

#[test]
fn each_key_s_records_live_in_its_slot_s_cluster_and_scans_merge() {
    let test = "each_key_s_records_live_in_its_slot_s_cluster";
    let (Some(one), Some(two)) = (common::Cluster::start(test, 1), common::Cluster::start(test, 1)) else {
        return;
    };
    let stores = vec![Arc::new(one.open("slots/")), Arc::new(two.open("slots/"))];
    assert_ne!(stores[0].cluster_id().unwrap(), stores[1].cluster_id().unwrap());
    let engine = Engine::new(SlotStores::new(stores.clone(), KeyLayout::default()).unwrap());
    let mut s = engine.session();
    let layout = KeyLayout::default();
    let mut keys = Vec::new();
    for store in 0..2 {
        let (string, hash, zset) = (key_in(store, "s"), key_in(store, "h"), key_in(store, "z"));
        assert_eq!(engine.run(&mut s, &["SET", &string, "v"]), Reply::OK);
        assert_eq!(engine.run(&mut s, &["HSET", &hash, "f", "1", "g", "2"]), Reply::Integer(2));
        assert_eq!(engine.run(&mut s, &["ZADD", &zset, "1", "a", "2", "b"]), Reply::Integer(2));
        for key in [&string, &hash, &zset] {
            let metadata = layout.metadata_key(key.as_bytes());
            assert!(stores[store].get(ColumnFamily::Metadata, &metadata).unwrap().is_some(), "{key}");
            assert!(stores[1 - store].get(ColumnFamily::Metadata, &metadata).unwrap().is_none(), "{key}");
        }
        assert_eq!(engine.run(&mut s, &["HGET", &hash, "g"]), bulk("2"));
        assert_eq!(
            engine.run(&mut s, &["ZRANGE", &zset, "0", "-1"]),
            Reply::Array(vec![bulk("a"), bulk("b")])
        );
        keys.extend([string, hash, zset]);
    }
    // KEYS and SCAN read both clusters, in key order.
    keys.sort();
    let Reply::Array(found) = engine.run(&mut s, &["KEYS", "*"]) else { panic!("KEYS") };
    let mut found: Vec<Reply> = found;
    found.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(found, keys.iter().map(|k| bulk(k)).collect::<Vec<_>>());
    assert_eq!(engine.run(&mut s, &["DBSIZE"]), Reply::Integer(6));
    // A scan over both clusters, either way, in key order.
    let walk = |direction| -> Vec<Bytes> {
        let scan = engine.backend().scan(ColumnFamily::Metadata, &layout.namespace_range(), direction);
        scan.unwrap().map(|r| r.unwrap().0).collect()
    };
    let forward = walk(rediskv::Direction::Forward);
    let mut reverse = walk(rediskv::Direction::Reverse);
    reverse.reverse();
    let mut sorted = forward.clone();
    sorted.sort();
    assert_eq!((forward.len(), &forward, &reverse), (6, &sorted, &sorted));
    let problems = rediskv::fsck::check(engine.backend(), &layout, engine.now_ms()).expect("fsck");
    assert!(problems.is_empty(), "fsck: {problems:?}");
    // FLUSHALL spans both.
    assert_eq!(engine.run(&mut s, &["FLUSHALL"]), Reply::OK);
    assert_eq!(engine.run(&mut s, &["DBSIZE"]), Reply::Integer(0));
    for store in &stores {
        let left = store.scan(ColumnFamily::Metadata, &layout.namespace_range(), rediskv::Direction::Forward);
        assert_eq!(left.unwrap().count(), 0);
    }
}

#[test]
fn a_commit_routed_by_an_older_table_than_its_cluster_s_fence_applies_nothing() {
    let Some(etcd) = common::Cluster::start("a_commit_routed_by_an_older_table", 1) else { return };
    let store = Arc::new(etcd.open("fence/"));
    let engine = Engine::new(store.clone());
    let mut s = engine.session();
    store.raise_fence(10).unwrap();
    store.fence(Some(10));
    assert_eq!(engine.run(&mut s, &["INCR", "n"]), Reply::Integer(1));
    // Another node read a newer table: commits routed by table 10 are refused.
    store.raise_fence(12).unwrap();
    match engine.run(&mut s, &["INCR", "n"]) {
        Reply::Error(e) => assert!(e.contains(FENCED), "{e}"),
        other => panic!("a fenced INCR answered {other:?}"),
    }
    // Routed by a table newer than the fence: it raises the fence and commits.
    store.fence(Some(14));
    assert_eq!(engine.run(&mut s, &["INCR", "n"]), Reply::Integer(2));
    store.raise_fence(13).unwrap();
    store.fence(Some(12));
    assert!(matches!(engine.run(&mut s, &["INCR", "n"]), Reply::Error(e) if e.contains(FENCED)));
    store.fence(None);
    assert_eq!(engine.run(&mut s, &["GET", "n"]), bulk("2"));
}

#[test]
fn the_first_node_records_the_data_clusters_and_another_list_is_refused() {
    let Some(etcd) = common::Cluster::start("the_first_node_records_the_data_clusters", 1) else { return };
    let topology = etcd.open("stores/");
    topology.cluster_check_stores(&[1, 2]).unwrap();
    topology.cluster_check_stores(&[1, 2]).unwrap();
    for other in [&[2, 1][..], &[1], &[1, 2, 3]] {
        let refused = topology.cluster_check_stores(other).unwrap_err().to_string();
        assert!(refused.contains("0000000000000001,0000000000000002"), "{refused}");
    }
}
