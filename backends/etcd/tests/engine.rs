//! The etcd backend as a store: everything back after the whole cluster restarts, versions
//! above the stored floor, corrupt records named in errors, a prefix written with another
//! layout refused, batches over the cluster's limits refused whole.

use rediskv_etcd::testkit as common;

use bytes::Bytes;
use rediskv::KeyLayout;
use rediskv::{ColumnFamily, KvBackend, WriteBatch};
use rediskv::{Engine, Reply};
use rediskv_engine::testkit::{self, max_version};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn everything_is_back_after_the_whole_cluster_restarts() {
    let Some(mut cluster) = common::Cluster::start("everything_is_back_after_restart", 3) else { return };
    let engine = Engine::new(cluster.open("restart/"));
    let mut s = engine.session();
    for argv in testkit::WRITES {
        assert!(!matches!(engine.run(&mut s, argv), Reply::Error(_)), "{argv:?}");
    }
    let before: Vec<Reply> = testkit::READS.iter().map(|argv| engine.run(&mut s, argv)).collect();
    assert_eq!(before[0], bulk("value"));
    assert_eq!(before.last(), Some(&Reply::Integer(6)), "DBSIZE");
    let top = max_version(engine.backend());
    drop(engine);
    cluster.restart_all();
    let engine = Engine::new(cluster.open("restart/"));
    let mut s = engine.session();
    for (argv, b) in testkit::READS.iter().zip(&before) {
        assert_eq!(&engine.run(&mut s, argv), b, "{argv:?} after the restart");
    }
    assert_eq!(engine.run(&mut s, &["HSET", "new", "f", "v"]), Reply::Integer(1));
    assert!(max_version(engine.backend()) > top);
}

#[test]
fn corrupt_records_are_errors_naming_the_key() {
    let Some(cluster) = common::Cluster::start("corrupt_records_are_errors", 1) else { return };
    let backend = cluster.open("corrupt/");
    let layout = KeyLayout::default();
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Metadata, layout.metadata_key(b"garbage"), &b"\xff\x01"[..]);
    backend.write(batch).unwrap();
    let engine = Engine::new(backend);
    let mut s = engine.session();
    assert_eq!(engine.run(&mut s, &["SET", "fine", "1"]), Reply::OK);
    for argv in [&["GET", "garbage"][..], &["HGETALL", "garbage"], &["INCR", "garbage"]] {
        match engine.run(&mut s, argv) {
            Reply::Error(e) => assert!(e.contains("'garbage'"), "{argv:?}: {e}"),
            other => panic!("{argv:?} on a corrupt record answered {other:?}"),
        }
    }
    assert_eq!(engine.run(&mut s, &["GET", "fine"]), bulk("1"));
}

#[test]
fn a_prefix_written_with_another_layout_is_refused() {
    let Some(cluster) = common::Cluster::start("a_prefix_with_another_layout", 1) else { return };
    drop(cluster.open("layout/"));
    let mut options = cluster.options("layout/");
    options.layout = KeyLayout::new(b"tenant").unwrap();
    match rediskv_etcd::open(options) {
        Ok(_) => panic!("a prefix written with the default layout opened with namespace tenant"),
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("namespace \"tenant\"") && text.contains("namespace \"__namespace\""),
                "{text}"
            );
        }
    }
    let mut options = cluster.options("other/");
    options.layout = KeyLayout::new(b"tenant").unwrap();
    assert!(rediskv_etcd::open(options).is_ok(), "another prefix is another database");
}

#[test]
fn batches_over_the_limits_are_refused_whole() {
    let Some(cluster) = common::Cluster::start_with("batches_over_the_limits", 1, &[]) else { return };
    // Stated limits: refused before sending, naming the flag.
    let mut options = cluster.options("limits/");
    options.max_txn_ops = 128;
    options.max_request_bytes = 1536 * 1024;
    let engine = Engine::new(rediskv_etcd::open(options.clone()).unwrap());
    let mut s = engine.session();
    let mut argv = vec!["HSET".to_string(), "h".into()];
    argv.extend((0..200).flat_map(|i| [format!("f{i}"), "v".into()]));
    match engine.run(&mut s, &argv) {
        Reply::Error(e) => assert!(e.contains("--max-txn-ops 128") && e.contains("never split"), "{e}"),
        other => panic!("a 201-operation batch answered {other:?}"),
    }
    let big = "x".repeat(2 << 20);
    match engine.run(&mut s, &["SET", "k", &big]) {
        Reply::Error(e) => assert!(e.contains("--max-request-bytes"), "{e}"),
        other => panic!("a 2 MiB value answered {other:?}"),
    }
    assert_eq!(engine.run(&mut s, &["EXISTS", "h", "k"]), Reply::Integer(0), "nothing written");
    // Limits stated wrongly: etcd itself refuses (default --max-txn-ops 128), still whole.
    options.max_txn_ops = 100_000;
    let engine = Engine::new(rediskv_etcd::open(options).unwrap());
    match engine.run(&mut s, &argv) {
        Reply::Error(e) => assert!(e.contains("too many operations"), "{e}"),
        other => panic!("etcd accepted a 201-operation Txn: {other:?}"),
    }
    assert_eq!(engine.run(&mut s, &["HLEN", "h"]), Reply::Integer(0));
    assert_eq!(engine.run(&mut s, &["HSET", "h", "f", "v"]), Reply::Integer(1), "small batches pass");
}
