//! `rediskv-server --engine etcd`: two server processes over one 3-member etcd cluster serve
//! the same data. Commands spread over both nodes answer as redis-server does; a client
//! blocked on one node is served by a push through the other; concurrent clients on both
//! keep exact totals; keys expire actively with one node sweeping. Built with the `etcd`
//! feature: `cargo test -p rediskv-server --features etcd --test etcd`.
#![cfg(feature = "etcd")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use common::{Server, Value, redis, rediskv};
use rediskv_etcd::testkit::{Cluster, MAX_REQUEST_BYTES, MAX_TXN_OPS};

/// A server node over `cluster` under `prefix`.
fn node(cluster: &Cluster, prefix: &str) -> Server {
    let endpoints = cluster.endpoints().join(",");
    let (ops, bytes) = (MAX_TXN_OPS.to_string(), MAX_REQUEST_BYTES.to_string());
    rediskv(&[
        "--engine",
        "etcd",
        "--etcd-endpoints",
        &endpoints,
        "--etcd-prefix",
        prefix,
        "--etcd-max-txn-ops",
        &ops,
        "--etcd-max-request-bytes",
        &bytes,
        "--threads",
        "2",
    ])
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        Value::Bulk(Some(b)) => String::from_utf8_lossy(b).parse().unwrap(),
        other => panic!("not a number: {other:?}"),
    }
}

fn stat(c: &mut common::Client, name: &str) -> i64 {
    let text = c.cmd(&["INFO", "stats"]).text();
    let line = text.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).expect("INFO field");
    line.trim().parse().unwrap()
}

#[test]
fn commands_spread_over_two_nodes_answer_as_redis() {
    let Some(cluster) = Cluster::start("commands_spread_over_two_nodes_answer_as_redis", 3) else { return };
    let Some(redis) = redis(&[]) else { return };
    let (a, b) = (node(&cluster, "spread/"), node(&cluster, "spread/"));
    // (node, command): node 0 is A, 1 is B; redis gets the same split over two connections.
    let script: &[(usize, &[&str])] = &[
        (0, &["SET", "s", "1"]),
        (1, &["GET", "s"]),
        (0, &["INCRBY", "s", "5"]),
        (1, &["APPEND", "s", "x"]),
        (0, &["GET", "s"]),
        (0, &["HSET", "h", "f1", "a", "f2", "b"]),
        (1, &["HGETALL", "h"]),
        (1, &["HINCRBY", "h", "n", "3"]),
        (0, &["HGET", "h", "n"]),
        (0, &["RPUSH", "l", "a", "b", "c"]),
        (1, &["LPOP", "l"]),
        (0, &["LRANGE", "l", "0", "-1"]),
        (1, &["SADD", "st", "x", "y", "z"]),
        (0, &["SREM", "st", "y"]),
        (1, &["SCARD", "st"]),
        (1, &["ZADD", "z", "1", "a", "2", "b"]),
        (0, &["ZINCRBY", "z", "5", "a"]),
        (1, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        (1, &["EXPIRE", "s", "100"]),
        (0, &["TTL", "s"]),
        (1, &["MULTI"]),
        (1, &["INCR", "cnt"]),
        (1, &["RPUSH", "l", "d"]),
        (1, &["EXEC"]),
        (0, &["LLEN", "l"]),
        (0, &["GET", "cnt"]),
        (0, &["WATCH", "h"]),
        (1, &["HSET", "h", "f3", "c"]),
        (0, &["MULTI"]),
        (0, &["HGET", "h", "f1"]),
        (0, &["EXEC"]),
        (0, &["WATCH", "st"]),
        (0, &["MULTI"]),
        (0, &["SCARD", "st"]),
        (0, &["EXEC"]),
        (1, &["RENAME", "z", "z2"]),
        (0, &["ZSCORE", "z2", "a"]),
        (0, &["DEL", "h", "l"]),
        (1, &["EXISTS", "h", "l", "st"]),
        (1, &["TYPE", "z2"]),
        (0, &["SWAPDB", "0", "1"]),
    ];
    let mut ours = [a.client(), b.client()];
    let mut theirs = [redis.client(), redis.client()];
    for (i, (n, cmd)) in script.iter().enumerate() {
        let expected = theirs[*n].cmd(cmd);
        let got = ours[*n].cmd(cmd);
        if cmd[0] == "SWAPDB" {
            // Each node maps databases itself: refused over a shared store.
            assert_eq!(expected, Value::Status("OK".into()));
            assert!(matches!(&got, Value::Error(e) if e.contains("SWAPDB is not supported")), "{got:?}");
            continue;
        }
        assert_eq!(got, expected, "command {i} {cmd:?} on node {n}");
    }
    for c in &mut ours {
        assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])));
    }
}

/// A client of `node` parked in `BLPOP q 0`, and another client of it; returns once the
/// node counts the client as blocked (not a sleep: its own count).
fn park_blpop(node: &Server) -> (common::Client, common::Client) {
    let (mut waiter, mut watcher) = (node.client(), node.client());
    waiter.send(&[b"BLPOP", b"q", b"0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !watcher.cmd(&["INFO", "clients"]).text().contains("blocked_clients:1") {
        assert!(Instant::now() < deadline, "BLPOP never blocked");
        std::thread::sleep(Duration::from_millis(20));
    }
    (waiter, watcher)
}

#[test]
fn a_client_blocked_on_one_node_is_served_by_a_push_through_the_other() {
    let Some(cluster) = Cluster::start("a_client_blocked_on_one_node", 3) else { return };
    let (a, b) = (node(&cluster, "blocking/"), node(&cluster, "blocking/"));
    let (mut waiter, _watcher) = park_blpop(&a);
    assert_eq!(b.client().cmd(&["RPUSH", "q", "v"]), Value::Int(1));
    let served = waiter.read();
    assert_eq!(
        served,
        Value::Array(Some(vec![Value::Bulk(Some(b"q".to_vec())), Value::Bulk(Some(b"v".to_vec()))]))
    );
    assert_eq!(b.client().cmd(&["LLEN", "q"]), Value::Int(0));
}

#[test]
fn blocked_clients_hear_of_the_other_node_after_the_cluster_restarted() {
    let Some(mut cluster) = Cluster::start("blocked_clients_after_a_cluster_restart", 3) else { return };
    let (a, b) = (node(&cluster, "rewatch/"), node(&cluster, "rewatch/"));
    // Every member gone ends node A's watch of the change feed; it must watch again.
    cluster.restart_all();
    let (mut waiter, mut watcher) = park_blpop(&a);
    // Node A watches again within about a second; a push before that wakes nobody there, so
    // node B pushes until A's client is served.
    let mut pusher = b.client();
    let deadline = Instant::now() + Duration::from_secs(15);
    while watcher.cmd(&["INFO", "clients"]).text().contains("blocked_clients:1") {
        assert!(Instant::now() < deadline, "node A never heard of node B's pushes after the restart");
        assert!(matches!(pusher.cmd(&["RPUSH", "q", "v"]), Value::Int(_)));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        waiter.read(),
        Value::Array(Some(vec![Value::Bulk(Some(b"q".to_vec())), Value::Bulk(Some(b"v".to_vec()))]))
    );
}

#[test]
fn four_clients_on_two_nodes_keep_exact_totals() {
    let Some(cluster) = Cluster::start("four_clients_on_two_nodes", 3) else { return };
    let nodes = [node(&cluster, "totals/"), node(&cluster, "totals/")];
    let items: Vec<String> = (0..20).map(|i| format!("i{i}")).collect();
    let mut setup = nodes[0].client();
    let mut rpush = vec!["RPUSH", "src"];
    rpush.extend(items.iter().map(String::as_str));
    assert_eq!(setup.cmd(&rpush), Value::Int(20));
    let acknowledged = Arc::new(AtomicI64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let port = nodes[t % 2].port;
            let acknowledged = acknowledged.clone();
            std::thread::spawn(move || {
                let mut c = common::Client::connect(port);
                for i in 0..40 {
                    if let Value::Int(_) = c.cmd(&["INCR", "counter"]) {
                        acknowledged.fetch_add(1, Ordering::SeqCst);
                    }
                    let (from, to) = if (t + i) % 2 == 0 { ("src", "dst") } else { ("dst", "src") };
                    let moved = c.cmd(&["LMOVE", from, to, "LEFT", "RIGHT"]);
                    // A command that lost every conflict retry applies nothing and says so.
                    let lost = matches!(&moved, Value::Error(e) if e.contains("conflict"));
                    assert!(matches!(moved, Value::Bulk(_)) || lost, "LMOVE answered {moved:?}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let acknowledged_incrs = acknowledged.load(Ordering::SeqCst);
    assert!(acknowledged_incrs >= 120, "only {acknowledged_incrs} of 160 INCRs went through");
    for server in &nodes {
        let mut c = server.client();
        assert_eq!(int(&c.cmd(&["GET", "counter"])), acknowledged.load(Ordering::SeqCst), "INCR total");
        let sizes = int(&c.cmd(&["LLEN", "src"])) + int(&c.cmd(&["LLEN", "dst"]));
        assert_eq!(sizes, 20, "LMOVE conserves elements");
        assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])));
    }
}

#[test]
fn keys_expire_actively_with_one_node_sweeping() {
    let Some(cluster) = Cluster::start("keys_expire_actively_with_one_node_sweeping", 3) else { return };
    let nodes = [node(&cluster, "expiry/"), node(&cluster, "expiry/")];
    let mut a = nodes[0].client();
    for i in 0..20 {
        assert_eq!(a.cmd(&["SET", &format!("k{i}"), "v", "PX", "300"]), Value::Status("OK".into()));
    }
    let mut clients = [nodes[0].client(), nodes[1].client()];
    let deadline = Instant::now() + Duration::from_secs(20);
    let expired = loop {
        let counts: Vec<i64> = clients.iter_mut().map(|c| stat(c, "expired_keys")).collect();
        if counts.iter().sum::<i64>() >= 20 || Instant::now() > deadline {
            break counts;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Every key deleted exactly once, without a read, by whichever node held the lease.
    assert_eq!(expired.iter().sum::<i64>(), 20, "expired_keys per node: {expired:?}");
    // Each tick renews or checks the lease; one slow etcd answer can make a tick read 0, so
    // look a few times: with both nodes sweeping, every look would show 2.
    let mut leaders = Vec::new();
    for _ in 0..20 {
        leaders = clients.iter_mut().map(|c| stat(c, "rediskv_maintenance_leader")).collect();
        if leaders.iter().sum::<i64>() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(leaders.iter().sum::<i64>(), 1, "one node holds the maintenance lease: {leaders:?}");
    assert_eq!(clients[1].cmd(&["DBSIZE"]), Value::Int(0));
}
