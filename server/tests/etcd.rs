//! `rediskv-server --engine etcd`: two server processes over one 3-member etcd cluster serve
//! the same data. Commands spread over both nodes answer as redis-server does; a client
//! blocked on one node is served by a push through the other; concurrent clients on both
//! keep exact totals; keys expire actively with one node sweeping; members killed in turn
//! under load, a commit whose answer is lost, and one hot key written from both nodes leave
//! no client with an error and every command applied exactly once. Built with the `etcd`
//! feature: `cargo test -p rediskv-server --features etcd --test etcd`.
#![cfg(feature = "etcd")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use common::{Server, Value, redis};
use rediskv_etcd::testkit::{Cluster, CutProxy};

/// A server node over `cluster` under `prefix`.
fn node(cluster: &Cluster, prefix: &str) -> Server {
    node_at(&cluster.endpoints().join(","), prefix)
}

/// A server node over the etcd `endpoints` (comma-separated) under `prefix`.
fn node_at(endpoints: &str, prefix: &str) -> Server {
    common::rediskv_over_etcd(endpoints, prefix, &[])
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
                    // Conflicts are retried until a deadline: a healthy cluster answers them all.
                    assert!(matches!(moved, Value::Bulk(_)), "LMOVE answered {moved:?}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(acknowledged.load(Ordering::SeqCst), 160, "every INCR answered");
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

/// Clients on both nodes each INCR one counter and RPUSH their own numbered items until told
/// to stop; answers every client's (INCRs acknowledged, items pushed, longest round in each
/// `phase` the test sets, errors).
fn load(
    nodes: &[Server],
    clients: usize,
    stop: &Arc<AtomicBool>,
    phase: &Arc<AtomicI64>,
) -> Vec<std::thread::JoinHandle<Load>> {
    (0..clients)
        .map(|t| {
            let port = nodes[t % nodes.len()].port;
            let (stop, phase) = (stop.clone(), phase.clone());
            std::thread::spawn(move || {
                let mut c = common::Client::connect(port);
                c.set_read_timeout(Duration::from_secs(60));
                let mut load = Load::default();
                while !stop.load(Ordering::SeqCst) {
                    let started = Instant::now();
                    match c.cmd(&["INCR", "total"]) {
                        Value::Int(_) => load.incrs += 1,
                        other => load.errors.push(format!("INCR: {other:?}")),
                    }
                    match c.cmd(&["RPUSH", "log", &format!("{t}:{}", load.pushed)]) {
                        Value::Int(_) => load.pushed += 1,
                        other => load.errors.push(format!("RPUSH: {other:?}")),
                    }
                    let longest = &mut load.longest[phase.load(Ordering::SeqCst) as usize];
                    *longest = (*longest).max(started.elapsed());
                }
                load
            })
        })
        .collect()
}

#[derive(Debug, Default)]
struct Load {
    incrs: i64,
    pushed: usize,
    /// Per phase: 0 all members up, 1 and 2 a follower dead, 3 the leader dead.
    longest: [Duration; 4],
    errors: Vec<String>,
}

/// Every acknowledged INCR and RPUSH is in the store exactly once, seen from every node.
fn assert_applied_once(nodes: &[Server], loads: &[Load]) {
    let incrs: i64 = loads.iter().map(|l| l.incrs).sum();
    for server in nodes {
        let mut c = server.client();
        assert_eq!(int(&c.cmd(&["GET", "total"])), incrs, "INCR total against acknowledged INCRs");
        let log = c.cmd(&["LRANGE", "log", "0", "-1"]).texts();
        for (t, l) in loads.iter().enumerate() {
            let mine: Vec<&String> = log.iter().filter(|e| e.starts_with(&format!("{t}:"))).collect();
            let expected: Vec<String> = (0..l.pushed).map(|i| format!("{t}:{i}")).collect();
            assert_eq!(mine, expected.iter().collect::<Vec<_>>(), "client {t}'s pushes, each once, in order");
        }
        assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])));
    }
}

#[test]
fn members_killed_in_turn_under_load_cost_no_client_an_error() {
    let Some(mut cluster) = Cluster::start("members_killed_in_turn_under_load", 3) else { return };
    let nodes = [node(&cluster, "failover/"), node(&cluster, "failover/")];
    let stop = Arc::new(AtomicBool::new(false));
    let phase = Arc::new(AtomicI64::new(0));
    let threads = load(&nodes, 4, &stop, &phase);
    std::thread::sleep(Duration::from_secs(1));
    // Both followers, one after the other, then the leader: each killed under load and
    // brought back before the next, so two members always form a quorum.
    let leader = cluster.leader();
    let mut victims: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    victims.push(leader);
    for (i, victim) in victims.into_iter().enumerate() {
        phase.store(i as i64 + 1, Ordering::SeqCst);
        cluster.kill(victim);
        std::thread::sleep(Duration::from_secs(2));
        cluster.restart(victim);
        cluster.wait_ready();
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::SeqCst);
    let loads: Vec<Load> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let errors: Vec<&String> = loads.iter().flat_map(|l| &l.errors).collect();
    assert!(errors.is_empty(), "clients saw errors: {errors:?}");
    assert!(loads.iter().all(|l| l.incrs > 0), "every client made progress: {loads:?}");
    let longest: Vec<Duration> =
        (0..4).map(|p| loads.iter().map(|l| l.longest[p]).max().unwrap_or_default()).collect();
    eprintln!("failover: longest INCR+RPUSH round per phase (up, follower, follower, leader): {longest:?}");
    assert_applied_once(&nodes, &loads);
}

#[test]
fn a_commit_whose_answer_is_lost_applies_once() {
    let Some(cluster) = Cluster::start("a_commit_whose_answer_is_lost_applies_once", 3) else { return };
    let proxy = CutProxy::start(&cluster.endpoints()[0]);
    // The node reaches the cluster only through the proxy, so its retry goes the same way.
    let server = node_at(&proxy.endpoint(), "lost/");
    let mut c = server.client();
    assert_eq!(c.cmd(&["INCR", "lost-answer"]), Value::Int(1));
    for i in 2..=6 {
        // The next commit naming the key (its batch carries the node's request record) reaches
        // etcd, and the connection breaks before its answer comes back.
        proxy.arm(&[b"lost-answer", b"rediskv:request/"]);
        assert_eq!(c.cmd(&["INCR", "lost-answer"]), Value::Int(i));
    }
    assert_eq!(proxy.cuts(), 5, "every armed commit lost its answer");
    assert_eq!(int(&c.cmd(&["GET", "lost-answer"])), 6, "each INCR applied once");
    // Each lost answer was for a commit etcd had applied; the node found that out.
    assert_eq!(stat(&mut c, "rediskv_etcd_ambiguous_commits"), 5);
    assert_eq!(stat(&mut c, "rediskv_etcd_ambiguous_applied"), 5);
}

#[test]
fn a_hot_key_on_two_nodes_answers_every_client() {
    let Some(cluster) = Cluster::start("a_hot_key_on_two_nodes_answers_every_client", 3) else { return };
    let nodes = [node(&cluster, "hot/"), node(&cluster, "hot/")];
    let mut setup = nodes[0].client();
    let items: Vec<String> = (0..400).map(|i| format!("i{i}")).collect();
    let mut rpush = vec!["RPUSH", "queue"];
    rpush.extend(items.iter().map(String::as_str));
    assert_eq!(setup.cmd(&rpush), Value::Int(400));
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let port = nodes[t % 2].port;
            std::thread::spawn(move || {
                let mut c = common::Client::connect(port);
                c.set_read_timeout(Duration::from_secs(60));
                let mut popped = Vec::new();
                for _ in 0..25 {
                    match c.cmd(&["RPOP", "queue"]) {
                        Value::Bulk(Some(item)) => popped.push(String::from_utf8(item).unwrap()),
                        other => panic!("RPOP answered {other:?}"),
                    }
                    assert!(matches!(c.cmd(&["INCR", "pops"]), Value::Int(_)));
                }
                popped
            })
        })
        .collect();
    let mut popped: Vec<String> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    popped.sort();
    let mut expected = items.clone();
    expected.sort();
    assert_eq!(popped, expected, "each item popped exactly once");
    assert_eq!(int(&setup.cmd(&["GET", "pops"])), 400);
    assert_eq!(setup.cmd(&["LLEN", "queue"]), Value::Int(0));
    let retries = stat(&mut setup, "rediskv_etcd_conflict_retries")
        + stat(&mut nodes[1].client(), "rediskv_etcd_conflict_retries");
    eprintln!("hot key: {retries} conflict retries over both nodes");
}
