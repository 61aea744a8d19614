//! `cluster-enabled yes`: Redis Cluster's client protocol. One node over the memory engine
//! answers the protocol's replies as a one-node redis-server cluster does; three nodes over
//! etcd share the slots by themselves, serve redis-cli -c, `redis-cli --cluster check` and
//! `info` and redis-py's RedisCluster, give a killed node's slots to the live ones under an
//! INCR load with every acknowledged INCR applied once, give a joining node its share (a
//! client parked on a slot that moved gets MOVED), replace a node restarted on its address
//! at once, and a node paused past its lease commits nothing to the slots it lost (its
//! commit is fenced), over one etcd cluster and with the data over two (each key's records
//! in its slot's cluster; a node given the clusters in another order refused). Nodes over fjall keeping the slot table in etcd move a slot with its
//! data under an INCR load (exact totals, FSCK clean on both; on RocksDB too with the
//! `rocksdb` feature), and a replica takes its killed primary's slots. On both kinds of
//! cluster `redis-cli --cluster reshard` moves 100 slots under an INCR load, and PUBLISH
//! reaches every node's subscribers; over etcd each node's keyspace is its own slots' keys.
//! MIGRATE answers as redis-server's. A cluster node's store is in Kvrocks' cluster form,
//! which rediskv-inspect decodes and the library's fsck finds clean. Two nodes with `tls-cluster yes` and passwords, over
//! an etcd serving TLS, tell TLS clients the TLS ports and plaintext ones the plaintext
//! ports, and move a slot over the TLS, authenticated link. The etcd tests need the `etcd`
//! feature: `cargo test -p rediskv-server --features etcd --test cluster`.

#[cfg(feature = "etcd")]
#[path = "common/certs.rs"]
mod certs;
mod common;

use std::time::{Duration, Instant};

use common::{Value, redis, rediskv};

/// A script of cluster replies, the same on a one-node redis-server cluster holding every
/// slot and on one rediskv node.
fn one_node_script(server: &common::Server) -> Vec<Value> {
    let mut c = server.client();
    let mut other = server.client();
    let mut replies = Vec::new();
    let commands: &[&[&str]] = &[
        &["SET", "foo", "1"],
        &["GET", "{foo}x"],
        &["MSET", "a", "1", "b", "2"],
        &["MSET", "{a}1", "1", "{a}2", "2"],
        &["MGET", "{a}1", "{a}2"],
        &["SELECT", "1"],
        &["SELECT", "0"],
        &["CLUSTER", "KEYSLOT", "foo"],
        &["CLUSTER", "KEYSLOT", "{user1}:x"],
        &["CLUSTER", "COUNTKEYSINSLOT", "12182"],
        &["CLUSTER", "COUNTKEYSINSLOT", "99999"],
        &["CLUSTER", "COUNTKEYSINSLOT", "x"],
        &["CLUSTER", "GETKEYSINSLOT", "12182", "10"],
        &["CLUSTER", "GETKEYSINSLOT", "1", "-1"],
        &["CLUSTER", "GETKEYSINSLOT", "x", "1"],
        &["CLUSTER", "REPLICAS", "0000000000000000000000000000000000000000"],
        &["CLUSTER", "COUNT-FAILURE-REPORTS", "xx"],
        &["CLUSTER", "KEYSLOT"],
        &["CLUSTER", "MYID", "x"],
        &["CLUSTER", "FOO"],
        &["CLUSTER", "LINKS"],
        &["READONLY"],
        &["READWRITE"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["SET", "b", "1"],
        &["EXEC"],
        &["GET", "a"],
        &["MULTI"],
        &["SET", "{a}1", "x"],
        &["GET", "{a}2"],
        &["EXEC"],
        &["EVAL", "return 1", "2", "a", "b"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "foo"],
        &["PING"],
        &["INFO", "cluster"],
    ];
    for command in commands {
        replies.push(c.cmd(command));
    }
    // CLUSTER SETSLOT's checks (served by builds with the etcd feature).
    let nobody = "0000000000000000000000000000000000000000";
    let setslot: &[&[&str]] = &[
        &["CLUSTER", "SETSLOT", "99999", "STABLE"],
        &["CLUSTER", "SETSLOT", "x", "STABLE"],
        &["CLUSTER", "SETSLOT", "1"],
        &["CLUSTER", "SETSLOT", "1", "FOO"],
        &["CLUSTER", "SETSLOT", "1", "STABLE", "x"],
        &["CLUSTER", "SETSLOT", "1", "MIGRATING", nobody],
        &["CLUSTER", "SETSLOT", "1", "IMPORTING", nobody],
        &["CLUSTER", "SETSLOT", "1", "NODE", nobody],
        &["CLUSTER", "SETSLOT", "1", "STABLE"],
    ];
    for command in setslot.iter().filter(|_| cfg!(feature = "etcd")) {
        replies.push(c.cmd(command));
    }
    // Their shapes, not their ids and times: one range 0-16383 of this node.
    let myid = c.cmd(&["CLUSTER", "MYID"]).text();
    let slots = other.cmd(&["CLUSTER", "SLOTS"]);
    replies.push(slots.clone());
    let nodes = c.cmd(&["CLUSTER", "NODES"]).text();
    let fields: Vec<&str> = nodes.trim_end().split(' ').collect();
    assert_eq!(fields[0], myid);
    assert_eq!(fields[2], "myself,master");
    assert_eq!(fields[7..], ["connected", "0-16383"]);
    let info = c.cmd(&["CLUSTER", "INFO"]).text();
    for line in
        ["cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:1", "cluster_size:1"]
    {
        assert!(info.lines().any(|l| l == line), "{line} in {info}");
    }
    let Value::Array(Some(shards)) = c.cmd(&["CLUSTER", "SHARDS"]) else { panic!("shards") };
    assert_eq!(shards.len(), 1);
    replies
}

#[test]
fn one_node_answers_the_cluster_protocol_as_redis() {
    let Some(redis) = redis(&["--cluster-enabled", "yes"]) else { return };
    let mut admin = redis.client();
    assert_eq!(admin.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), Value::Status("OK".into()));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !admin.cmd(&["CLUSTER", "INFO"]).text().contains("cluster_state:ok") {
        assert!(Instant::now() < deadline, "redis-server's cluster never became ok");
        std::thread::sleep(Duration::from_millis(50));
    }
    let theirs = one_node_script(&redis);
    let ours = one_node_script(&rediskv(&["--cluster-enabled", "yes"]));
    let port_free = |v: &Value| format!("{v:?}").replace(&redis.port.to_string(), "PORT");
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        // CLUSTER SLOTS names the node's id and port: compare the shape.
        if i == ours.len() - 1 {
            let shape = |v: &Value| match v {
                Value::Array(Some(ranges)) => ranges.len(),
                _ => 0,
            };
            assert_eq!(shape(a), shape(b));
            continue;
        }
        assert_eq!(a, b, "reply {i}: ours {} theirs {}", port_free(a), port_free(b));
    }
    assert_eq!(ours.len(), theirs.len());
}

/// MIGRATE from `source` to `target` (a redis-server: the same answers for either source):
/// the replies and what the target holds after.
fn migrate_script(source: &common::Server, target: &common::Server) -> Vec<Value> {
    let mut c = source.client();
    let mut t = target.client();
    assert_eq!(t.cmd(&["FLUSHALL"]), Value::Status("OK".into()));
    let (host, port) = ("127.0.0.1", target.port.to_string());
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let mut replies = Vec::new();
    let commands: &[&[&str]] = &[
        &["MIGRATE", host, &port, "nokey", "0", "1000"],
        &["SET", "k", "v"],
        &["SET", "ttl", "x", "PX", "100000"],
        &["RPUSH", "list", "a", "b"],
        &["MIGRATE", host, &port, "k", "0", "1000"],
        &["EXISTS", "k"],
        &["MIGRATE", host, &port, "", "0", "0", "COPY", "KEYS", "ttl", "list", "nokey"],
        &["EXISTS", "ttl", "list"],
        &["MIGRATE", host, &port, "list", "0", "1000"],
        &["EXISTS", "list"],
        &["MIGRATE", host, &port, "list", "0", "1000", "REPLACE"],
        &["EXISTS", "list"],
        &["SET", "k2", "v"],
        &["MIGRATE", host, &port, "k2", "3", "1000", "AUTH", "nopass"],
        &["MIGRATE", host, &port, "k2", "3", "1000", "AUTH2", "nobody", "nopass"],
        &["MIGRATE", host, &closed, "k2", "0", "100"],
        &["MIGRATE", host, &port, "k2", "x", "1000"],
        &["MIGRATE", host, &port, "k2", "0", "1000", "KEYS", "k2"],
        &["MIGRATE", host, &port, "k2", "0", "1000", "AUTH"],
        &["MIGRATE", host, &port, "k2", "0", "1000", "FOO"],
        &["MIGRATE", host, &port, "k2", "3", "1000"],
        &["EXISTS", "k2"],
    ];
    for command in commands {
        replies.push(c.cmd(command));
    }
    for command in
        [&["GET", "k"][..], &["LRANGE", "list", "0", "-1"], &["GET", "ttl"], &["SELECT", "3"], &["GET", "k2"]]
    {
        replies.push(t.cmd(command));
    }
    t.cmd(&["SELECT", "0"]);
    let Value::Int(ttl) = t.cmd(&["PTTL", "ttl"]) else { panic!("PTTL") };
    assert!((90_000..=100_000).contains(&ttl), "{ttl}");
    replies
}

#[test]
fn migrate_moves_keys_as_redis_does() {
    let (Some(target), Some(source)) = (redis(&[]), redis(&[])) else { return };
    let theirs = migrate_script(&source, &target);
    let ours = migrate_script(&rediskv(&[]), &target);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "reply {i}");
    }
    assert_eq!(ours.len(), theirs.len());
}

/// A node with `cluster-enabled yes` over fjall (one node serving every slot) writes Kvrocks'
/// cluster form: its FSCK is clean, a slot's count reads its keys, and once it is stopped its
/// directory opens with the layout its manifest records (slots on), rediskv-inspect's dump
/// decodes every record with the slot its key hashes to, and the library's fsck finds
/// nothing wrong.
#[test]
fn a_cluster_node_s_store_is_in_kvrocks_cluster_form_for_inspect_and_fsck() {
    let mut node = common::rediskv_on_disk("fjall", &["--cluster-enabled", "yes"]);
    let mut c = node.client();
    let writes: &[&[&str]] = &[
        &["SET", "{user1}:name", "alice"],
        &["HSET", "{user1}:profile", "city", "Oslo", "age", "41"],
        &["SADD", "set", "x", "y", "z"],
        &["ZADD", "zset", "1.5", "m", "2", "n"],
        &["RPUSH", "list", "a", "b", "c"],
        &["XADD", "stream", "1-1", "f", "v"],
        &["SET", "ttl", "v", "PX", "100000"],
    ];
    for command in writes {
        assert!(!matches!(c.cmd(command), Value::Error(_)), "{command:?}");
    }
    assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])));
    // slot("user1") = 8106: both {user1} keys, read from the slot's range.
    assert_eq!(c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "8106"]), Value::Int(2));
    c.send(&[b"SHUTDOWN"]);
    assert_eq!(c.try_read(), None, "SHUTDOWN closes the connection");
    node.wait_exit();

    let dir = node.dir().expect("a directory of its own");
    let (store, layout) = rediskv_inspect::store::open_existing("fjall", dir).unwrap();
    assert!(layout.cluster_slots(), "the manifest records the cluster form");
    let now_ms = u64::try_from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis(),
    )
    .unwrap();
    assert_eq!(::rediskv::fsck::check(&store, &layout, now_ms).unwrap(), vec![]);
    let mut out = Vec::new();
    let filter = rediskv_inspect::store::Filter::default();
    let written = rediskv_inspect::store::dump(&*store, &layout, &filter, &mut out).unwrap();
    let records: Vec<serde_json::Value> =
        String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len() as u64, written);
    let mut keys = Vec::new();
    for record in &records {
        assert!(record.get("error").is_none(), "{record}");
        let key = record["key"].as_str().unwrap_or_else(|| panic!("a key: {record}"));
        let slot = ::rediskv::key_slot(key.as_bytes());
        assert_eq!(record["slot"].as_u64(), Some(u64::from(slot)), "{record}");
        if record["cf"] == "metadata" {
            keys.push(key.to_string());
        }
    }
    keys.sort();
    let mut expected: Vec<String> = writes.iter().map(|w| w[1].to_string()).collect();
    expected.sort();
    assert_eq!(keys, expected);
    // The subkeys are there too, each with its owner's slot (checked above).
    assert!(
        records.iter().any(|r| r["cf"] == "subkey" && r["key"] == "{user1}:profile" && r["field"] == "city")
    );
    assert!(records.iter().any(|r| r["cf"] == "score" && r["key"] == "zset" && r["member"] == "m"));
    assert!(records.iter().any(|r| r["cf"] == "stream" && r["key"] == "stream"));
}

#[cfg(feature = "etcd")]
mod over_etcd {
    use std::collections::HashMap;
    use std::process::Command;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use super::common::{self, Server, Value};
    use rediskv_etcd::testkit::{Cluster, MemberTls};

    /// The lease of a cluster node, in milliseconds (`cluster-node-timeout`).
    const NODE_TIMEOUT_MS: u64 = 2000;

    fn node(etcd: &Cluster, prefix: &str) -> Server {
        node_with(etcd, prefix, NODE_TIMEOUT_MS, &[])
    }

    fn node_with(etcd: &Cluster, prefix: &str, timeout_ms: u64, more: &[&str]) -> Server {
        let timeout = timeout_ms.to_string();
        let mut extra = vec!["--cluster-enabled", "yes", "--cluster-node-timeout", &timeout];
        extra.extend_from_slice(more);
        common::rediskv_over_etcd(&etcd.endpoints().join(","), prefix, &extra)
    }

    /// Each range of CLUSTER SLOTS as (start, end, port).
    fn slots(port: u16) -> Vec<(i64, i64, i64)> {
        slots_of(&mut common::Client::connect(port))
    }

    /// [`slots`], asked on a connection of the caller's.
    fn slots_of(client: &mut common::Client) -> Vec<(i64, i64, i64)> {
        let Value::Array(Some(ranges)) = client.cmd(&["CLUSTER", "SLOTS"]) else { panic!("CLUSTER SLOTS") };
        ranges
            .iter()
            .map(|r| match r {
                Value::Array(Some(f)) => match (&f[0], &f[1], &f[2]) {
                    (Value::Int(s), Value::Int(e), Value::Array(Some(n))) => match n[1] {
                        Value::Int(p) => (*s, *e, p),
                        _ => panic!("{r:?}"),
                    },
                    _ => panic!("{r:?}"),
                },
                _ => panic!("{r:?}"),
            })
            .collect()
    }

    /// Waits until every node in `ports` shows the same table, covering every slot, shared
    /// by exactly `ports`; answers how long that took.
    fn wait_shared(ports: &[u16], within: Duration) -> Duration {
        wait_shared_by(ports, within, common::Client::connect)
    }

    /// [`wait_shared`], asking on the connections `connect` makes.
    fn wait_shared_by(ports: &[u16], within: Duration, connect: impl Fn(u16) -> common::Client) -> Duration {
        let start = Instant::now();
        loop {
            let tables: Vec<_> = ports.iter().map(|p| slots_of(&mut connect(*p))).collect();
            let covered = tables[0].iter().map(|r| r.1 - r.0 + 1).sum::<i64>() == 16384;
            let mut owners: Vec<i64> = tables[0].iter().map(|r| r.2).collect();
            owners.sort();
            owners.dedup();
            let mut expected: Vec<i64> = ports.iter().map(|p| i64::from(*p)).collect();
            expected.sort();
            if covered && owners == expected && tables.iter().all(|t| *t == tables[0]) {
                return start.elapsed();
            }
            assert!(start.elapsed() < within, "the nodes never shared the slots: {tables:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A client that follows MOVED (and retries a refused connection at another node).
    struct Router {
        ports: Vec<u16>,
        conns: HashMap<u16, common::Client>,
        at: u16,
    }

    impl Router {
        fn new(ports: &[u16]) -> Router {
            Router { ports: ports.to_vec(), conns: HashMap::new(), at: ports[0] }
        }

        /// The reply, after redirections; `Err` when the connection broke with the command
        /// sent (it may or may not have been applied).
        fn cmd(&mut self, args: &[&str]) -> Result<Value, ()> {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                assert!(Instant::now() < deadline, "{args:?} never served");
                let port = self.at;
                if let std::collections::hash_map::Entry::Vacant(slot) = self.conns.entry(port) {
                    // A node that refuses connections is dead: ask another.
                    let Some(mut c) = common::Client::try_connect(port) else {
                        self.ports.retain(|p| *p != port);
                        self.at = self.ports[0];
                        continue;
                    };
                    c.set_read_timeout(Duration::from_secs(20));
                    slot.insert(c);
                }
                let conn = self.conns.get_mut(&port).unwrap();
                let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
                if conn.try_send_raw(&encode(&args)).is_err() {
                    self.conns.remove(&port);
                    return Err(());
                }
                match conn.try_read() {
                    None => {
                        self.conns.remove(&port);
                        return Err(());
                    }
                    Some(Value::Error(e)) if e.starts_with("MOVED ") => {
                        let to = e.rsplit(':').next().unwrap().parse().unwrap();
                        self.at = to;
                        // A MOVED to a dead node: the table has not caught up yet.
                        if !self.ports.contains(&to) {
                            std::thread::sleep(Duration::from_millis(20));
                            self.at = self.ports[0];
                        }
                    }
                    // TRYAGAIN: refused while its slot was being handed over, not applied.
                    Some(Value::Error(e)) if e.starts_with("CLUSTERDOWN") || e.starts_with("TRYAGAIN") => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Some(reply) => return Ok(reply),
                }
            }
        }
    }

    fn encode(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    /// A key whose slot node `port` serves.
    fn key_of(port: u16, name: &str) -> String {
        let table = slots(port);
        (0..)
            .map(|i| format!("{name}:{i}"))
            .find(|k| {
                let slot = i64::from(::rediskv::key_slot(k.as_bytes()));
                table.iter().any(|r| r.0 <= slot && slot <= r.1 && r.2 == i64::from(port))
            })
            .unwrap()
    }

    fn tool(program: &str, args: &[&str]) -> String {
        let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }

    #[test]
    fn three_nodes_share_the_slots_and_serve_cluster_clients() {
        let Some(etcd) = Cluster::start("three_nodes_share_the_slots_and_serve_cluster_clients", 1) else {
            return;
        };
        // Longer leases than the failure tests': a lease lost on a loaded machine would
        // rebalance the slots in the middle of the reshard.
        let nodes: Vec<Server> = (0..3).map(|_| node_with(&etcd, "share/", 5000, &[])).collect();
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        wait_shared(&ports, Duration::from_secs(20));
        // Each node serves its keys and redirects the others' to their owner.
        for &owner in &ports {
            let key = key_of(owner, "k");
            let slot = ::rediskv::key_slot(key.as_bytes());
            for &asked in &ports {
                let mut c = common::Client::connect(asked);
                let reply = c.cmd(&["SET", &key, "v"]);
                let script = c.cmd(&["EVAL", "return redis.call('append', KEYS[1], 'w')", "1", &key]);
                // A shard channel is routed by its slot too.
                let shard = c.cmd(&["SPUBLISH", &key, "m"]);
                if asked == owner {
                    assert_eq!(
                        (reply, script, shard),
                        (Value::Status("OK".into()), Value::Int(2), Value::Int(0))
                    );
                } else {
                    let moved = Value::Error(format!("MOVED {slot} 127.0.0.1:{owner}"));
                    assert_eq!((reply, script, shard), (moved.clone(), moved.clone(), moved));
                }
            }
        }
        // A script's command on a key another node serves, as redis-server 7.0.15 refuses it
        // (the sha is its script's).
        let slot_a = ::rediskv::key_slot(b"a");
        let table = slots(ports[0]);
        let elsewhere = ports
            .iter()
            .find(|p| {
                !table
                    .iter()
                    .any(|r| r.0 <= i64::from(slot_a) && i64::from(slot_a) <= r.1 && r.2 == i64::from(**p))
            })
            .unwrap();
        assert_eq!(
            common::Client::connect(*elsewhere).cmd(&["EVAL", "return redis.call('get','a')", "0"]),
            Value::Error(
                "ERR Script attempted to access a non local key in a cluster node script: \
                 eaeaa27fd219f13108fd9dea9f5ef7513173e803, on @user_script:1."
                    .into()
            )
        );
        let info = common::Client::connect(ports[1]).cmd(&["CLUSTER", "INFO"]).text();
        assert!(
            info.contains("cluster_state:ok\r\n") && info.contains("cluster_known_nodes:3\r\n"),
            "{info}"
        );
        assert!(
            common::Client::connect(ports[2]).cmd(&["INFO", "cluster"]).text().contains("cluster_enabled:1")
        );
        // redis-cli -c follows the redirections; --cluster check reads the table.
        let (p0, p2) = (ports[0].to_string(), ports[2].to_string());
        for i in 0..20 {
            let key = format!("cli:{i}");
            assert_eq!(tool("redis-cli", &["-c", "-p", &p0, "SET", &key, &i.to_string()]).trim(), "OK");
            assert_eq!(tool("redis-cli", &["-c", "-p", &p2, "GET", &key]).trim(), i.to_string());
        }
        let check = tool("redis-cli", &["--cluster", "check", &format!("127.0.0.1:{p2}")]);
        assert!(check.contains("[OK] All nodes agree about slots configuration."), "{check}");
        assert!(check.contains("[OK] All 16384 slots covered."), "{check}");
        let info = tool("redis-cli", &["--cluster", "info", &format!("127.0.0.1:{p0}")]);
        assert!(info.contains("| 5462 slots | 0 slaves.") && info.contains(" in 3 masters."), "{info}");
        // redis-py's RedisCluster: its slot map from CLUSTER SLOTS, keys spread on every node.
        let script = format!(
            "import redis\n\
             c = redis.RedisCluster(host='127.0.0.1', port={p0})\n\
             for i in range(200): c.incr('py:%d' % i)\n\
             for i in range(200): c.incr('py:%d' % i)\n\
             print(sum(int(c.get('py:%d' % i)) for i in range(200)), len(c.get_nodes()))\n"
        );
        let out = tool("python3", &["-c", &script]);
        assert_eq!(out.trim(), "400 3", "{out}");
        pubsub_across_nodes(&ports);
        own_keyspaces(&ports);
        reshard_under_load(&ports);
        // CLUSTER NODES shows a slot SETSLOT marked, as redis-cli's check reads it.
        let mut c = common::Client::connect(ports[0]);
        let before = c.cmd(&["CLUSTER", "NODES"]).text();
        let slot = slots(ports[0]).iter().find(|r| r.2 == i64::from(ports[0])).unwrap().0;
        let id = common::Client::connect(ports[1]).cmd(&["CLUSTER", "MYID"]).text();
        assert_eq!(
            c.cmd(&["CLUSTER", "SETSLOT", &slot.to_string(), "MIGRATING", &id]),
            Value::Status("OK".into())
        );
        let mark = format!(" [{slot}->-{id}]");
        assert!(c.cmd(&["CLUSTER", "NODES"]).text().contains(&mark) && !before.contains(&mark));
        let check = tool("redis-cli", &["--cluster", "check", &format!("127.0.0.1:{}", ports[0])]);
        assert!(check.contains("has slots in migrating state"), "{check}");
        assert_eq!(c.cmd(&["CLUSTER", "SETSLOT", &slot.to_string(), "STABLE"]), Value::Status("OK".into()));
        assert!(!c.cmd(&["CLUSTER", "NODES"]).text().contains(&mark));
        // Nodes join and leave through etcd: add-node and del-node stop with a clear word.
        let (to, at) = (format!("127.0.0.1:{}", ports[2]), format!("127.0.0.1:{}", ports[0]));
        let added = tool("redis-cli", &["--cluster", "add-node", &to, &at]);
        assert!(
            added.contains("[ERR] Node 127.0.0.1:") && added.contains("already knows other nodes"),
            "{added}"
        );
        let id = common::Client::connect(ports[2]).cmd(&["CLUSTER", "MYID"]).text();
        let deleted = tool("redis-cli", &["--cluster", "del-node", &at, &id]);
        assert!(deleted.contains("is not empty! Reshard data away"), "{deleted}");
        assert_eq!(
            common::Client::connect(ports[0]).cmd(&["CLUSTER", "FORGET", &id]),
            Value::Error(
                "ERR nodes leave this cluster through etcd: move the node's slots away, then stop it (its \
                 registration ends with its lease)"
                    .into()
            )
        );
    }

    /// PUBLISH on one node reaches the subscribers of every node (a plain SUBSCRIBE client
    /// and redis-py's `RedisCluster` pubsub), its reply counting the node's own; SPUBLISH
    /// reaches the slot owner's SSUBSCRIBE clients, and SSUBSCRIBE elsewhere gets MOVED.
    /// Prints the latency of a PUBLISH to a subscriber on another node.
    fn pubsub_across_nodes(ports: &[u16]) {
        let script = format!(
            "import sys, redis\n\
             c = redis.RedisCluster(host='127.0.0.1', port={})\n\
             p = c.pubsub()\n\
             p.subscribe('news')\n\
             p.get_message(timeout=5)\n\
             print('ready', flush=True)\n\
             m = p.get_message(timeout=30)\n\
             print(m['data'].decode() if m else None, flush=True)\n",
            ports[1]
        );
        let mut python = Command::new("python3")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(python.stdout.take().unwrap()));
        assert_eq!(lines.next().unwrap().unwrap(), "ready");
        let mut subscribers: Vec<common::Client> =
            ports[1..].iter().map(|p| common::Client::connect(*p)).collect();
        for s in &mut subscribers {
            assert_eq!(words(&s.cmd(&["SUBSCRIBE", "news"])), ["subscribe", "news", "1"]);
        }
        let mut publisher = common::Client::connect(ports[0]);
        // The reply counts the publishing node's subscribers only (redis-py's, if its
        // connection is there).
        let local = words(&publisher.cmd(&["PUBSUB", "NUMSUB", "news"]))[1].clone();
        assert_eq!(publisher.cmd(&["PUBLISH", "news", "hello"]), Value::Int(local.parse().unwrap()));
        for s in &mut subscribers {
            assert_eq!(words(&s.read()), ["message", "news", "hello"]);
        }
        assert_eq!(lines.next().unwrap().unwrap(), "hello");
        assert!(python.wait().unwrap().success());
        let mut local = common::Client::connect(ports[1]);
        let here = words(&local.cmd(&["PUBSUB", "NUMSUB", "news"]))[1].clone();
        assert_eq!(local.cmd(&["PUBLISH", "news", "local"]), Value::Int(here.parse().unwrap()));
        assert_eq!(words(&subscribers[0].read()), ["message", "news", "local"]);
        assert_eq!(words(&subscribers[1].read()), ["message", "news", "local"]);
        let rounds = 200;
        let started = Instant::now();
        for i in 0..rounds {
            publisher.cmd(&["PUBLISH", "news", &i.to_string()]);
            assert_eq!(words(&subscribers[0].read()), ["message", "news", &i.to_string()]);
        }
        eprintln!(
            "pubsub: PUBLISH to a subscriber on another node, {:?} a round trip",
            started.elapsed() / rounds
        );
        // A script's PUBLISH too.
        publisher.cmd(&["EVAL", "return redis.call('publish', 'news', 'lua')", "0"]);
        assert_eq!(words(&subscribers[0].read()), ["message", "news", "lua"]);
        // Sharded: the slot's owner serves its SSUBSCRIBE clients, the others redirect.
        let channel = key_of(ports[2], "shard");
        let slot = ::rediskv::key_slot(channel.as_bytes());
        let moved = Value::Error(format!("MOVED {slot} 127.0.0.1:{}", ports[2]));
        assert_eq!(common::Client::connect(ports[0]).cmd(&["SSUBSCRIBE", &channel]), moved);
        let mut shard = common::Client::connect(ports[2]);
        assert_eq!(words(&shard.cmd(&["SSUBSCRIBE", &channel])), ["ssubscribe", &channel, "1"]);
        assert_eq!(common::Client::connect(ports[2]).cmd(&["SPUBLISH", &channel, "s"]), Value::Int(1));
        assert_eq!(words(&shard.read()), ["smessage", &channel, "s"]);
    }

    /// An array's items as text (integers too).
    fn words(v: &Value) -> Vec<String> {
        match v {
            Value::Array(Some(items)) | Value::Push(items) => items
                .iter()
                .map(|i| match i {
                    Value::Int(n) => n.to_string(),
                    other => other.text(),
                })
                .collect(),
            other => panic!("not an array: {other:?}"),
        }
    }

    /// Each node's keyspace is the keys of its slots, though the store is shared: the
    /// nodes' DBSIZEs add up to the store's keys, KEYS, SCAN, RANDOMKEY, COUNTKEYSINSLOT and
    /// INFO keyspace agree with it, and FLUSHALL on one node deletes only its keys.
    fn own_keyspaces(ports: &[u16]) {
        let keys_of = |port: u16| {
            let mut keys = common::Client::connect(port).cmd(&["KEYS", "*"]).texts();
            keys.sort();
            keys
        };
        let mut all = Vec::new();
        for &port in ports {
            let mut c = common::Client::connect(port);
            let keys = keys_of(port);
            assert!(!keys.is_empty(), "node {port} holds keys");
            let table = slots(port);
            let mine = |k: &str| {
                let slot = i64::from(::rediskv::key_slot(k.as_bytes()));
                table.iter().any(|r| r.0 <= slot && slot <= r.1 && r.2 == i64::from(port))
            };
            assert!(keys.iter().all(|k| mine(k)), "node {port}: {keys:?}");
            assert_eq!(c.cmd(&["DBSIZE"]), Value::Int(keys.len() as i64));
            let info = c.cmd(&["INFO", "keyspace"]).text();
            assert!(info.contains(&format!("db0:keys={},", keys.len())), "{info}");
            let mut scanned = Vec::new();
            let mut cursor = "0".to_string();
            loop {
                let Value::Array(Some(page)) = c.cmd(&["SCAN", &cursor, "COUNT", "7"]) else {
                    panic!("SCAN")
                };
                cursor = page[0].text();
                scanned.extend(page[1].texts());
                if cursor == "0" {
                    break;
                }
            }
            scanned.sort();
            assert_eq!(scanned, keys);
            assert!(mine(&c.cmd(&["RANDOMKEY"]).text()));
            let slot = ::rediskv::key_slot(keys[0].as_bytes()).to_string();
            let Value::Int(in_slot) = c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]) else { panic!() };
            assert!(in_slot >= 1);
            for &other in ports.iter().filter(|p| **p != port) {
                let mut o = common::Client::connect(other);
                assert_eq!(o.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]), Value::Int(0));
                assert_eq!(o.cmd(&["CLUSTER", "GETKEYSINSLOT", &slot, "10"]), Value::Array(Some(vec![])));
            }
            all.extend(keys);
        }
        // MIGRATE to a node sharing the store moves nothing and deletes nothing.
        let mut c = common::Client::connect(ports[0]);
        let key = keys_of(ports[0])[0].clone();
        let target = ports[1].to_string();
        assert_eq!(c.cmd(&["MIGRATE", "127.0.0.1", &target, &key, "0", "1000"]), Value::Status("OK".into()));
        assert_eq!(c.cmd(&["EXISTS", &key]), Value::Int(1));
        let flushed = ports[2];
        let gone = keys_of(flushed);
        assert_eq!(common::Client::connect(flushed).cmd(&["FLUSHALL"]), Value::Status("OK".into()));
        assert_eq!(common::Client::connect(flushed).cmd(&["DBSIZE"]), Value::Int(0));
        let mut kept = [keys_of(ports[0]), keys_of(ports[1])].concat();
        kept.sort();
        all.retain(|k| !gone.contains(k));
        all.sort();
        assert_eq!(kept, all);
    }

    /// `redis-cli --cluster reshard` moves 100 slots from the first node to the second
    /// while clients INCR keys of every node: exact totals, the table keeps the slots
    /// where reshard put them, and `--cluster check` is clean.
    fn reshard_under_load(ports: &[u16]) {
        let ids: Vec<String> =
            ports.iter().map(|p| common::Client::connect(*p).cmd(&["CLUSTER", "MYID"]).text()).collect();
        let share = |port: u16, of: u16| {
            slots(port).iter().filter(|r| r.2 == i64::from(of)).map(|r| r.1 - r.0 + 1).sum::<i64>()
        };
        let before = share(ports[0], ports[0]);
        // Three keys in the slots that move (the source's lowest 100), one elsewhere.
        let owned: Vec<i64> = slots(ports[0])
            .iter()
            .filter(|r| r.2 == i64::from(ports[0]))
            .flat_map(|r| r.0..=r.1)
            .take(100)
            .collect();
        let moving = |k: &String| owned.contains(&i64::from(::rediskv::key_slot(k.as_bytes())));
        let mut keys: Vec<String> = (0..).map(|i| format!("reshard:{i}")).filter(moving).take(3).collect();
        keys.push(key_of(*ports.last().unwrap(), "reshard"));
        let stop = Arc::new(AtomicBool::new(false));
        let workers = incr_load(ports, keys, &stop);
        std::thread::sleep(Duration::from_millis(200));
        let from = format!("127.0.0.1:{}", ports[0]);
        let started = Instant::now();
        let out = tool(
            "redis-cli",
            &[
                "--cluster",
                "reshard",
                &from,
                "--cluster-from",
                &ids[0],
                "--cluster-to",
                &ids[1],
                "--cluster-slots",
                "100",
                "--cluster-yes",
            ],
        );
        assert!(out.contains("Moving slot ") && !out.contains("ERR"), "{out}");
        eprintln!("reshard: 100 slots moved in {:?} under an INCR load", started.elapsed());
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        let keys = check_totals(ports, workers);
        for &port in ports {
            assert_eq!(share(port, ports[0]), before - 100, "node {port}'s table");
        }
        // A renewal later, the nodes have not moved them back.
        std::thread::sleep(Duration::from_millis(NODE_TIMEOUT_MS));
        assert_eq!(share(*ports.last().unwrap(), ports[0]), before - 100);
        let check = tool("redis-cli", &["--cluster", "check", &from]);
        assert!(check.contains("[OK] All 16384 slots covered.") && !check.contains("[WARNING]"), "{check}");
        for &port in ports {
            assert_eq!(
                common::Client::connect(port).cmd(&["FSCK"]),
                Value::Array(Some(vec![])),
                "node {port}"
            );
        }
        let mut router = Router::new(ports);
        for key in keys {
            assert_eq!(router.cmd(&["DEL", &key]), Ok(Value::Int(1)));
        }
    }

    /// A thread per key INCRing it through a [`Router`] until `stop`, a millisecond apart (on
    /// fjall every slot move walks each version a hot key left in the memtable: an unpaced
    /// load makes each move of the reshard cost up to a second); each answer must be one
    /// more than the last.
    fn incr_load(
        ports: &[u16],
        keys: Vec<String>,
        stop: &Arc<AtomicBool>,
    ) -> Vec<std::thread::JoinHandle<(String, i64)>> {
        keys.into_iter()
            .map(|key| {
                let (ports, stop) = (ports.to_vec(), stop.clone());
                std::thread::spawn(move || {
                    let mut router = Router::new(&ports);
                    let mut last = 0;
                    while !stop.load(Ordering::Relaxed) {
                        match router.cmd(&["INCR", &key]) {
                            Ok(Value::Int(n)) => {
                                assert_eq!(n, last + 1, "{key}");
                                last = n;
                            }
                            other => panic!("{key}: {other:?}"),
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    (key, last)
                })
            })
            .collect()
    }

    /// Each worker's key holds the last value it saw acknowledged; answers the keys.
    fn check_totals(ports: &[u16], workers: Vec<std::thread::JoinHandle<(String, i64)>>) -> Vec<String> {
        let mut router = Router::new(ports);
        let mut keys = Vec::new();
        for worker in workers {
            let (key, last) = worker.join().unwrap();
            assert!(last > 0, "{key} never INCRed");
            assert_eq!(
                router.cmd(&["GET", &key]),
                Ok(Value::Bulk(Some(last.to_string().into_bytes()))),
                "{key}"
            );
            keys.push(key);
        }
        keys
    }

    #[test]
    fn a_killed_node_s_slots_go_to_the_live_nodes_and_no_acknowledged_incr_is_lost() {
        let Some(etcd) = Cluster::start("a_killed_node_s_slots_go_to_the_live_nodes", 3) else { return };
        let mut nodes: Vec<Server> = (0..3).map(|_| node(&etcd, "kill/")).collect();
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        wait_shared(&ports, Duration::from_secs(20));
        let stop = Arc::new(AtomicBool::new(false));
        // Each client INCRs its own key (spread over the nodes) and checks every answer is
        // one more than the last it saw acknowledged, or two when the one before was lost
        // with the killed node's connection (applied or not: it was not acknowledged).
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let (ports, stop) = (ports.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut router = Router::new(&ports);
                    let key = format!("counter:{w}");
                    let (mut last, mut acked, mut unknown) = (0, 0, 0);
                    while !stop.load(Ordering::Relaxed) {
                        match router.cmd(&["INCR", &key]) {
                            Ok(Value::Int(n)) => {
                                assert!(n > last && n <= last + 1 + unknown, "{key}: {n} after {last}");
                                (last, unknown) = (n, 0);
                                acked += 1;
                            }
                            Ok(other) => panic!("{key}: {other:?}"),
                            Err(()) => unknown += 1,
                        }
                    }
                    (key, last, acked)
                })
            })
            .collect();
        // And redis-py's RedisCluster on a key of the node to kill: it retries a command whose
        // connection broke on its own, so an answer may count one lost attempt too; what it
        // last saw acknowledged must be what is stored.
        let stop_file = std::env::temp_dir().join(format!("rediskv-cluster-stop-{}", std::process::id()));
        let killed_file = stop_file.with_extension("killed");
        let _ = std::fs::remove_file(&stop_file);
        let _ = std::fs::remove_file(&killed_file);
        let py_key = key_of(ports[0], "py");
        let script = format!(
            "import os, time, redis\n\
             from redis.exceptions import ConnectionError, TimeoutError, ClusterDownError, ClusterError\n\
             c = redis.RedisCluster(host='127.0.0.1', port={})\n\
             last = acked = after = 0\n\
             while not os.path.exists({:?}):\n\
             \x20   try: n = c.incr('{py_key}')\n\
             \x20   except (ConnectionError, TimeoutError, ClusterDownError, ClusterError): time.sleep(0.05); continue\n\
             \x20   assert n > last, (n, last)\n\
             \x20   last, acked = n, acked + 1\n\
             \x20   after += os.path.exists({:?})\n\
             print(last, acked, after)\n",
            ports[1],
            stop_file.display().to_string(),
            killed_file.display().to_string()
        );
        let python = Command::new("python3")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Killed once redis-py is under way (its first INCR stored).
        let mut watcher = Router::new(&ports);
        let deadline = Instant::now() + Duration::from_secs(30);
        while watcher.cmd(&["GET", &py_key]) == Ok(Value::Bulk(None)) {
            assert!(Instant::now() < deadline, "redis-py never INCRed");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(watcher);
        std::thread::sleep(Duration::from_millis(500));
        nodes[0].kill();
        let failover = wait_shared(&ports[1..], Duration::from_secs(20));
        std::fs::write(&killed_file, b"").unwrap();
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::Relaxed);
        std::fs::write(&stop_file, b"").unwrap();
        let out = python.wait_with_output().unwrap();
        let _ = (std::fs::remove_file(&stop_file), std::fs::remove_file(&killed_file));
        let out = String::from_utf8_lossy(&out.stdout).into_owned();
        let [py_last, py_acked, py_after] = out.split_whitespace().collect::<Vec<_>>()[..] else {
            panic!("redis-py: {out:?}")
        };
        // It went on through the slot's new owner.
        assert!(py_after.parse::<i64>().unwrap() > 0, "redis-py: {out:?}");
        let mut router = Router::new(&ports[1..]);
        assert_eq!(router.cmd(&["GET", &py_key]), Ok(Value::Bulk(Some(py_last.as_bytes().to_vec()))));
        for worker in workers {
            let (key, last, acked) = worker.join().unwrap();
            assert!(acked > 0);
            let Ok(stored) = router.cmd(&["GET", &key]) else { panic!("GET {key}") };
            assert_eq!(stored, Value::Bulk(Some(last.to_string().into_bytes())), "{key}");
        }
        eprintln!(
            "failover: the live nodes shared the killed node's slots {failover:?} after kill -9 (lease {NODE_TIMEOUT_MS} ms); \
             redis-py saw {py_acked} INCRs acknowledged ({py_after} after the failover), the last {py_last}"
        );
    }

    #[test]
    fn a_joining_node_takes_its_share_and_a_client_parked_on_a_moved_slot_is_redirected() {
        let Some(etcd) = Cluster::start("a_joining_node_takes_its_share", 1) else { return };
        let mut nodes: Vec<Server> = (0..3).map(|_| node(&etcd, "join/")).collect();
        let mut ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        wait_shared(&ports, Duration::from_secs(20));
        // A node over its quota gives up its highest slots: a key in node 0's last one moves.
        let table = slots(ports[0]);
        let last = table.iter().filter(|r| r.2 == i64::from(ports[0])).map(|r| r.1).max().unwrap();
        let key = (0..)
            .map(|i| format!("parked:{i}"))
            .find(|k| i64::from(::rediskv::key_slot(k.as_bytes())) == last)
            .unwrap();
        let mut parked = common::Client::connect(ports[0]);
        parked.set_read_timeout(Duration::from_secs(30));
        parked.send_raw(&encode(&[b"BLPOP", key.as_bytes(), b"0"]));
        std::thread::sleep(Duration::from_millis(300));
        nodes.push(node(&etcd, "join/"));
        let fourth = nodes[3].port;
        ports.push(fourth);
        let took = wait_shared(&ports, Duration::from_secs(20));
        assert_eq!(parked.read(), Value::Error(format!("MOVED {last} 127.0.0.1:{fourth}")));
        for port in &ports {
            let share: i64 =
                slots(*port).iter().filter(|r| r.2 == i64::from(*port)).map(|r| r.1 - r.0 + 1).sum();
            assert_eq!(share, 4096, "node {port}");
        }
        eprintln!("join: the four nodes shared the slots {took:?} after the fourth started");
    }

    #[test]
    fn a_node_restarted_on_its_address_replaces_its_old_self_at_once() {
        let Some(etcd) = Cluster::start("a_node_restarted_on_its_address", 1) else { return };
        // Leases of a minute: only the replacement, not a lease running out, can end the old
        // registration within the test.
        let mut nodes: Vec<Server> = (0..3).map(|_| node_with(&etcd, "restart/", 60_000, &[])).collect();
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        wait_shared(&ports, Duration::from_secs(20));
        let old_id = common::Client::connect(ports[0]).cmd(&["CLUSTER", "MYID"]).text();
        let key = key_of(ports[0], "restarted");
        nodes[0].kill();
        let port = ports[0].to_string();
        nodes[0] = node_with(&etcd, "restart/", 60_000, &["--port", &port]);
        let new_id = common::Client::connect(ports[0]).cmd(&["CLUSTER", "MYID"]).text();
        assert_ne!(new_id, old_id);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let nodes_text = common::Client::connect(ports[1]).cmd(&["CLUSTER", "NODES"]).text();
            let served = common::Client::connect(ports[0]).cmd(&["SET", &key, "v"]);
            if !nodes_text.contains(&old_id)
                && nodes_text.contains(&new_id)
                && served == Value::Status("OK".into())
            {
                break;
            }
            assert!(Instant::now() < deadline, "{nodes_text} {served:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        wait_shared(&ports, Duration::from_secs(20));
    }

    #[test]
    fn a_node_paused_past_its_lease_commits_nothing_to_the_slots_it_lost() {
        let Some(etcd) = Cluster::start("a_node_paused_past_its_lease_commits_nothing", 1) else { return };
        let nodes: Vec<Server> = (0..3).map(|_| node(&etcd, "fence/")).collect();
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        wait_shared(&ports, Duration::from_secs(20));
        let key = key_of(ports[0], "fenced");
        paused_node_commits_nothing(&nodes, 0, &key);
    }

    /// Node `paused` of `nodes` (sharing the slots), owning `key`'s slot, is paused past its
    /// lease with an INCR of `key` sent to it; the others take its slots and INCR the key;
    /// resumed, its INCR applies nothing and is answered MOVED: exact totals.
    fn paused_node_commits_nothing(nodes: &[Server], paused: usize, key: &str) {
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        let others: Vec<u16> = ports.iter().copied().filter(|p| *p != ports[paused]).collect();
        let mut client = common::Client::connect(ports[paused]);
        client.set_read_timeout(Duration::from_secs(30));
        assert_eq!(client.cmd(&["INCR", key]), Value::Int(1));
        nodes[paused].pause();
        // Sent while it is paused: read and run the moment it resumes, by its old table.
        client.send_raw(&encode(&[b"INCR", key.as_bytes()]));
        wait_shared(&others, Duration::from_secs(20));
        let mut router = Router::new(&others);
        for n in 2..=6 {
            assert_eq!(router.cmd(&["INCR", key]), Ok(Value::Int(n)));
        }
        nodes[paused].resume();
        // Its commit compared the table it routed by, which changed: nothing applied, and
        // the client is sent to the slot's owner now.
        let reply = client.read();
        let slot = ::rediskv::key_slot(key.as_bytes());
        assert!(matches!(&reply, Value::Error(e) if e.starts_with(&format!("MOVED {slot} "))), "{reply:?}");
        let mut router = Router::new(&ports);
        assert_eq!(router.cmd(&["GET", key]), Ok(Value::Bulk(Some(b"6".to_vec()))));
        // Back from its pause it registers again and gets a share of the slots.
        wait_shared(&ports, Duration::from_secs(20));
        assert_eq!(router.cmd(&["INCR", key]), Ok(Value::Int(7)));
    }

    /// Over the etcd engine, a slot given away by CLUSTER SETSLOT … NODE takes its shard
    /// channels: the subscriber is sent `sunsubscribe`, as by a redis-server 7.0.15 node.
    #[test]
    fn a_slot_given_away_by_setslot_unsubscribes_its_shard_channels() {
        let Some(etcd) = Cluster::start("a_slot_given_away_by_setslot_unsubscribes", 1) else { return };
        let nodes: Vec<Server> = (0..2).map(|_| node(&etcd, "setslot/")).collect();
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        wait_shared(&ports, Duration::from_secs(20));
        let channel = key_of(ports[0], "news");
        let slot = ::rediskv::key_slot(channel.as_bytes()).to_string();
        let mut subscriber = common::Client::connect(ports[0]);
        assert_eq!(words(&subscriber.cmd(&["SSUBSCRIBE", &channel])), ["ssubscribe", &channel, "1"]);
        let target = common::Client::connect(ports[1]).cmd(&["CLUSTER", "MYID"]).text();
        let mut admin = common::Client::connect(ports[0]);
        assert_eq!(admin.cmd(&["CLUSTER", "SETSLOT", &slot, "NODE", &target]), Value::Status("OK".into()));
        assert_eq!(words(&subscriber.read()), ["sunsubscribe", &channel, "0"]);
        // Out of subscribed mode: a RESP2 PING answers PONG.
        assert_eq!(subscriber.cmd(&["PING"]), Value::Status("PONG".into()));
        assert_eq!(words(&admin.cmd(&["PUBSUB", "SHARDNUMSUB", &channel])), [channel.as_str(), "0"]);
    }

    #[test]
    fn over_two_data_clusters_each_slot_s_keys_live_in_its_cluster_and_fencing_holds() {
        let test = "over_two_data_clusters_each_slot_s_keys_live_in_its_cluster";
        let (Some(first), Some(second)) = (Cluster::start(test, 1), Cluster::start(test, 1)) else { return };
        let (a, b) = (first.endpoints().join(","), second.endpoints().join(","));
        let stores = ["--cluster-etcd-store", &a, "--cluster-etcd-store", &b];
        let nodes: Vec<Server> =
            (0..3).map(|_| node_with(&first, "two/", NODE_TIMEOUT_MS, &stores)).collect();
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        wait_shared(&ports, Duration::from_secs(20));
        // Slots 0-8191 in the first cluster, 8192-16383 in the second, each key in Kvrocks'
        // cluster form (its slot after the namespace).
        let layout = ::rediskv::KeyLayout::default().with_cluster_slots(true);
        let open = |etcd: &Cluster| {
            let options = rediskv_etcd::Options { layout: layout.clone(), ..etcd.options("two/") };
            rediskv_etcd::open(options).expect("open etcd backend")
        };
        let data = [open(&first), open(&second)];
        let mut router = Router::new(&ports);
        for i in 0..40 {
            let key = format!("spread:{i}");
            assert_eq!(router.cmd(&["SET", &key, "v"]), Ok(Value::Status("OK".into())));
            let store = usize::from(::rediskv::key_slot(key.as_bytes()) >= 8192);
            let metadata = layout.metadata_key(key.as_bytes());
            let found: Vec<bool> = data
                .iter()
                .map(|d| {
                    use ::rediskv::KvBackend;
                    d.get(::rediskv::ColumnFamily::Metadata, &metadata).unwrap().is_some()
                })
                .collect();
            assert_eq!(found, [store == 0, store == 1], "{key}");
        }
        // A node given the clusters in another order is refused: its slots' data would be
        // elsewhere.
        let refused = Command::new(env!("CARGO_BIN_EXE_rediskv-server"))
            .args(["--port", "0", "--engine", "etcd", "--etcd-endpoints", &a, "--etcd-prefix", "two/"])
            .args(["--cluster-enabled", "yes", "--cluster-etcd-store", &b, "--cluster-etcd-store", &a])
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&refused.stdout);
        assert!(!refused.status.success() && log.contains("Cannot join the cluster: "), "{log}");
        // The owner of the last slot, whose data is in the second cluster, paused past its
        // lease: its commit fails on the second cluster's fence.
        let table = slots(ports[0]);
        let (_, end, owner) = *table.last().unwrap();
        let paused = ports.iter().position(|p| i64::from(*p) == owner).unwrap();
        let key = (0..)
            .map(|i| format!("fenced:{i}"))
            .find(|k| {
                let slot = i64::from(::rediskv::key_slot(k.as_bytes()));
                slot >= 8192 && table.iter().any(|r| r.0 <= slot && slot <= r.1 && r.2 == owner)
            })
            .unwrap();
        assert_eq!(end, 16383);
        paused_node_commits_nothing(&nodes, paused, &key);
    }

    /// A node over fjall in a temporary directory of its own, keeping the slot table in
    /// `etcd` under `prefix`; the first `initial` nodes share the slots.
    fn disk_node(etcd: &Cluster, prefix: &str, initial: usize, more: &[&str]) -> Server {
        engine_node("fjall", etcd, prefix, initial, more)
    }

    /// [`disk_node`] over `engine`.
    fn engine_node(engine: &str, etcd: &Cluster, prefix: &str, initial: usize, more: &[&str]) -> Server {
        let endpoints = etcd.endpoints().join(",");
        let (timeout, initial) = (NODE_TIMEOUT_MS.to_string(), initial.to_string());
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-etcd",
            &endpoints,
            "--etcd-prefix",
            prefix,
            "--cluster-initial-nodes",
            &initial,
            "--cluster-node-timeout",
            &timeout,
            "--threads",
            "2",
        ];
        args.extend_from_slice(more);
        common::rediskv_on_disk(engine, &args)
    }

    /// CLUSTER INFO's `name:value` field.
    fn info_field(port: u16, name: &str) -> Option<String> {
        let info = common::Client::connect(port).cmd(&["CLUSTER", "INFO"]).text();
        info.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
    }

    #[test]
    fn a_slot_moves_with_its_data_under_an_incr_load_and_no_acknowledged_incr_is_lost() {
        slot_move_under_load("fjall");
    }

    /// The same over RocksDB (`--features etcd,rocksdb`): its snapshot is a copy in memory.
    #[cfg(feature = "rocksdb")]
    #[test]
    fn a_slot_moves_with_its_data_on_rocksdb_under_an_incr_load() {
        slot_move_under_load("rocksdb");
    }

    fn slot_move_under_load(engine: &str) {
        let Some(etcd) = Cluster::start(&format!("a_slot_moves_with_its_data_{engine}"), 1) else { return };
        let nodes: Vec<Server> = (0..2).map(|_| engine_node(engine, &etcd, "move/", 2, &[])).collect();
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        wait_shared(&ports, Duration::from_secs(20));
        // redis-cli's reshard moves slots with their data the same way (each move walks
        // both nodes' keys: done while they hold few).
        reshard_under_load(&ports);
        let (from, to) = (ports[0], ports[1]);
        // A slot of the first node, filled with keys of its hash tag.
        let tag = key_of(from, "tag");
        let slot = ::rediskv::key_slot(tag.as_bytes());
        const FILLED: usize = 5000;
        let mut c = common::Client::connect(from);
        for chunk in (0..FILLED).collect::<Vec<_>>().chunks(500) {
            let mut argv = vec!["MSET".to_string()];
            for i in chunk {
                argv.extend([format!("{{{tag}}}:fill:{i}"), format!("v{i}")]);
            }
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            assert_eq!(c.cmd(&argv), Value::Status("OK".into()));
        }
        assert_eq!(c.cmd(&["SET", &format!("{{{tag}}}:ttl"), "x", "EX", "1000"]), Value::Status("OK".into()));
        let stop = Arc::new(AtomicBool::new(false));
        // Every INCR is acknowledged (no node dies): each answer is one more than the last.
        let workers = incr_load(&ports, (0..4).map(|w| format!("{{{tag}}}:counter:{w}")).collect(), &stop);
        // redis-py's RedisCluster INCRs a key of the slot too (it follows MOVED and retries
        // TRYAGAIN by itself).
        // Its own file: the fjall and RocksDB variants run at once in one process.
        let stop_file =
            std::env::temp_dir().join(format!("rediskv-move-stop-{engine}-{}", std::process::id()));
        let _ = std::fs::remove_file(&stop_file);
        let py_key = format!("{{{tag}}}:py");
        let script = format!(
            "import os, redis\n\
             c = redis.RedisCluster(host='127.0.0.1', port={from})\n\
             last = 0\n\
             while not os.path.exists({:?}):\n\
             \x20   n = c.incr('{py_key}')\n\
             \x20   assert n == last + 1, (n, last)\n\
             \x20   last = n\n\
             print(last)\n",
            stop_file.display().to_string()
        );
        let mut python = Command::new("python3")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Moved once redis-py is under way (its first INCR stored).
        let deadline = Instant::now() + Duration::from_secs(30);
        while common::Client::connect(from).cmd(&["GET", &py_key]) == Value::Bulk(None) {
            if python.try_wait().unwrap().is_some() {
                let out = python.wait_with_output().unwrap();
                panic!("redis-py exited ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
            }
            assert!(Instant::now() < deadline, "redis-py never INCRed");
            std::thread::sleep(Duration::from_millis(20));
        }
        let target = common::Client::connect(to).cmd(&["CLUSTER", "MYID"]).text();
        let mut admin = common::Client::connect(from);
        assert_eq!(
            admin.cmd(&["CLUSTERX", "MIGRATE", &slot.to_string(), &target]),
            Value::Status("OK".into())
        );
        assert_eq!(
            admin.cmd(&["CLUSTERX", "MIGRATE", &slot.to_string(), &target]),
            Value::Error("ERR There is already a migrating job".into())
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while info_field(from, "migrating_state").as_deref() != Some("success") {
            assert_ne!(
                info_field(from, "migrating_state").as_deref(),
                Some("fail"),
                "{:?}",
                info_field(from, "migrating_error")
            );
            assert!(Instant::now() < deadline, "the move never ended");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
        std::fs::write(&stop_file, b"").unwrap();
        let out = python.wait_with_output().unwrap();
        let _ = std::fs::remove_file(&stop_file);
        let py_last = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            out.status.success() && py_last.parse::<i64>().unwrap() > 0,
            "redis-py: {py_last:?} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Both nodes name the target the slot's owner, which holds every key and every INCR.
        for port in &ports {
            let table = slots(*port);
            assert!(
                table
                    .iter()
                    .any(|r| r.0 <= i64::from(slot) && i64::from(slot) <= r.1 && r.2 == i64::from(to))
            );
        }
        let mut router = Router::new(&ports);
        assert_eq!(router.cmd(&["GET", &py_key]), Ok(Value::Bulk(Some(py_last.into_bytes()))));
        for worker in workers {
            let (key, last) = worker.join().unwrap();
            assert!(last > 0);
            assert_eq!(
                router.cmd(&["GET", &key]),
                Ok(Value::Bulk(Some(last.to_string().into_bytes()))),
                "{key}"
            );
        }
        let mut target_client = common::Client::connect(to);
        assert_eq!(
            target_client.cmd(&["GET", &format!("{{{tag}}}:fill:4321")]),
            Value::Bulk(Some(b"v4321".to_vec()))
        );
        let Value::Int(ttl) = target_client.cmd(&["TTL", &format!("{{{tag}}}:ttl")]) else { panic!("TTL") };
        assert!((900..=1000).contains(&ttl), "{ttl}");
        let in_slot = FILLED as i64 + 4 + 2;
        assert_eq!(
            target_client.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]),
            Value::Int(in_slot)
        );
        assert_eq!(target_client.cmd(&["DBSIZE"]), Value::Int(in_slot));
        // The source's copy is gone; it redirects the slot's clients.
        assert_eq!(admin.cmd(&["DBSIZE"]), Value::Int(0));
        assert_eq!(admin.cmd(&["GET", &py_key]), Value::Error(format!("MOVED {slot} 127.0.0.1:{to}")));
        let copied: i64 = info_field(from, "migrating_keys").unwrap().parse().unwrap();
        let forwarded: i64 = info_field(from, "migrating_writes").unwrap().parse().unwrap();
        assert!(copied > FILLED as i64, "{copied}");
        assert!(forwarded > 0, "writes made during the copy were forwarded");
        assert_eq!(info_field(from, "migrating_deleted_keys"), Some(in_slot.to_string()));
        assert_eq!(info_field(to, "import_state").as_deref(), Some("success"));
        for port in &ports {
            assert_eq!(
                common::Client::connect(*port).cmd(&["FSCK"]),
                Value::Array(Some(vec![])),
                "node {port}"
            );
        }
        eprintln!(
            "move: slot {slot}, {copied} keys copied, {forwarded} writes forwarded, {} ms in all, closed to writes {} ms",
            info_field(from, "migrating_time_ms").unwrap(),
            info_field(from, "migrating_closed_ms").unwrap()
        );
    }

    /// A fjall node of a cluster writes Kvrocks' cluster form (the slot in every key): its
    /// slots' keys are counted and listed from the slot's own range, and its store refuses a
    /// start without `cluster-enabled`. A slot that moves away takes its shard channels: each
    /// subscriber is sent `sunsubscribe` for each, counting its shard channels left, as a
    /// redis-server 7.0.15 cluster node that loses the slot does (RESP2 and RESP3).
    #[test]
    fn a_slot_that_moves_away_takes_its_keys_range_and_unsubscribes_its_shard_channels() {
        let Some(etcd) = Cluster::start("a_slot_that_moves_away_takes_its_shard_channels", 1) else {
            return;
        };
        let mut nodes: Vec<Server> = (0..2).map(|_| disk_node(&etcd, "channels/", 2, &[])).collect();
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        wait_shared(&ports, Duration::from_secs(20));
        let (from, to) = (ports[0], ports[1]);
        let tag = key_of(from, "moving");
        let slot = ::rediskv::key_slot(tag.as_bytes());
        let stays = key_of(from, "staying");
        let stays_slot = ::rediskv::key_slot(stays.as_bytes());
        assert_ne!(slot, stays_slot);
        let mut c = common::Client::connect(from);
        for (name, n) in [(&tag, 300), (&stays, 200)] {
            let mut argv = vec!["MSET".to_string()];
            for i in 0..n {
                argv.extend([format!("{{{name}}}:{i}"), i.to_string()]);
            }
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            assert_eq!(c.cmd(&argv), Value::Status("OK".into()));
        }
        assert_eq!(c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]), Value::Int(300));
        assert_eq!(c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &stays_slot.to_string()]), Value::Int(200));
        let listed = c.cmd(&["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "7"]).texts();
        assert_eq!(listed.len(), 7);
        assert!(listed.iter().all(|k| k.starts_with(&format!("{{{tag}}}:"))), "{listed:?}");

        let (a, b) = (format!("{{{tag}}}a"), format!("{{{tag}}}b"));
        let mut resp2 = common::Client::connect(from);
        assert_eq!(words(&resp2.cmd(&["SSUBSCRIBE", &a, &b])), ["ssubscribe", &a, "1"]);
        assert_eq!(words(&resp2.read()), ["ssubscribe", &b, "2"]);
        assert_eq!(words(&resp2.cmd(&["SSUBSCRIBE", &stays])), ["ssubscribe", &stays, "3"]);
        let mut resp3 = common::Client::connect(from);
        resp3.cmd(&["HELLO", "3"]);
        assert_eq!(
            resp3.cmd(&["SSUBSCRIBE", &a]),
            Value::Push(vec![
                Value::Bulk(Some(b"ssubscribe".to_vec())),
                Value::Bulk(Some(a.clone().into_bytes())),
                Value::Int(1)
            ])
        );

        let target = common::Client::connect(to).cmd(&["CLUSTER", "MYID"]).text();
        assert_eq!(c.cmd(&["CLUSTERX", "MIGRATE", &slot.to_string(), &target]), Value::Status("OK".into()));
        let deadline = Instant::now() + Duration::from_secs(60);
        while info_field(from, "migrating_state").as_deref() != Some("success") {
            assert_ne!(info_field(from, "migrating_state").as_deref(), Some("fail"));
            assert!(Instant::now() < deadline, "the move never ended");
            std::thread::sleep(Duration::from_millis(50));
        }
        // Redis: one message per channel, in channel order, the count going down; a RESP2
        // client still subscribed to a shard channel stays in subscribed mode.
        assert_eq!(words(&resp2.read()), ["sunsubscribe", &a, "2"]);
        assert_eq!(words(&resp2.read()), ["sunsubscribe", &b, "1"]);
        assert_eq!(words(&resp2.cmd(&["PING"])), ["pong", ""]);
        assert_eq!(
            resp3.read(),
            Value::Push(vec![
                Value::Bulk(Some(b"sunsubscribe".to_vec())),
                Value::Bulk(Some(a.clone().into_bytes())),
                Value::Int(0)
            ])
        );
        assert_eq!(resp3.cmd(&["PING"]), Value::Status("PONG".into()));
        assert_eq!(c.cmd(&["PUBSUB", "SHARDCHANNELS"]).texts(), vec![stays]);
        assert_eq!(c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]), Value::Int(0));
        assert_eq!(c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &stays_slot.to_string()]), Value::Int(200));
        let mut there = common::Client::connect(to);
        assert_eq!(there.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]), Value::Int(300));
        assert_eq!(there.cmd(&["DBSIZE"]), Value::Int(300));
        // Both stores decode and check clean in the cluster form (each key under its slot).
        assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])));
        assert_eq!(there.cmd(&["FSCK"]), Value::Array(Some(vec![])));

        // The store holds the cluster form: a start without cluster-enabled is refused.
        nodes[0].kill();
        let dir = nodes[0].dir().unwrap().to_str().unwrap().to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_rediskv-server"))
            .args(["--engine", "fjall", "--dir", &dir, "--port", "0"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            text.contains("cluster slots on")
                && text.contains("refusing to open it with")
                && text.contains("cluster slots off"),
            "{text}"
        );
    }

    /// The password of the TLS cluster's nodes (`requirepass`, `masterauth`).
    const PASSWORD: &str = "cluster-secret";

    /// A plaintext connection to `port`, authenticated.
    fn authed(port: u16) -> common::Client {
        let mut client = common::Client::connect(port);
        assert_eq!(client.cmd(&["AUTH", PASSWORD]), Value::Status("OK".into()));
        client
    }

    /// `n` distinct free loopback ports (all held until every one is chosen).
    fn free_ports(n: usize) -> Vec<u16> {
        let held: Vec<_> = (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        held.iter().map(|l| l.local_addr().unwrap().port()).collect()
    }

    /// A field of a RESP2 map (a flat array of names and values).
    fn field<'v>(map: &'v Value, name: &str) -> Option<&'v Value> {
        let Value::Array(Some(items)) = map else { panic!("not a map: {map:?}") };
        items.chunks(2).find(|kv| kv[0].text() == name).map(|kv| &kv[1])
    }

    /// Two nodes over fjall with `tls-port`, `tls-cluster yes`, `requirepass` and
    /// `masterauth`, keeping their slot table in an etcd that serves TLS and checks client
    /// certificates: a client over TLS is told the TLS ports (CLUSTER SLOTS, NODES, MOVED;
    /// redis-cli --tls -c and redis-py's RedisCluster(ssl=True) write and read across the
    /// nodes), a plaintext client the plaintext ones; a slot moves over the TLS link,
    /// authenticated, with every key exactly as it was, and a link the target refuses fails
    /// CLUSTERX MIGRATE with the target's answer.
    #[test]
    fn a_tls_cluster_tells_each_client_its_ports_and_moves_a_slot_over_tls() {
        let certs = super::certs::Certs::new();
        let file = |name: &str| certs.path(name);
        let etcd_tls = rediskv_etcd::Tls {
            ca_file: file("ca.crt").into(),
            identity: Some((file("client.crt").into(), file("client.key").into())),
        };
        let member = MemberTls {
            cert_file: file("server.crt").into(),
            key_file: file("server.key").into(),
            client: etcd_tls,
        };
        let Some(etcd) = Cluster::start_tls("a_tls_cluster_tells_each_client_its_ports", 1, member) else {
            return;
        };
        assert!(etcd.endpoints()[0].starts_with("https://"));
        let free = free_ports(4);
        let (plain_ports, tls_ports) = free.split_at(2);
        let nodes: Vec<Server> = (0..2)
            .map(|i| {
                let mut args = certs.server_args(tls_ports[i]);
                args.extend(
                    [
                        // A plaintext port too (with a TLS one, port 0 is none).
                        ("--port", plain_ports[i].to_string()),
                        ("--tls-cluster", "yes".to_string()),
                        ("--requirepass", PASSWORD.to_string()),
                        ("--masterauth", PASSWORD.to_string()),
                        ("--etcd-ca-cert-file", file("ca.crt")),
                        ("--etcd-cert-file", file("client.crt")),
                        ("--etcd-key-file", file("client.key")),
                    ]
                    .into_iter()
                    .flat_map(|(flag, value)| [flag.to_string(), value]),
                );
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                disk_node(&etcd, "tls/", 2, &args)
            })
            .collect();
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        wait_shared_by(&ports, Duration::from_secs(20), authed);
        let table = slots_of(&mut authed(ports[0]));
        // A key of each node, by the plaintext table.
        let key_on = |i: usize, name: &str| {
            (0..)
                .map(|n| format!("{name}:{n}"))
                .find(|k| {
                    let slot = i64::from(::rediskv::key_slot(k.as_bytes()));
                    table.iter().any(|r| r.0 <= slot && slot <= r.1 && r.2 == i64::from(ports[i]))
                })
                .unwrap()
        };
        let slot_of = |key: &str| ::rediskv::key_slot(key.as_bytes());
        let (key0, key1) = (key_on(0, "k"), key_on(1, "k"));

        // A plaintext client: the plaintext ports, and the bus port of the TLS one (Redis').
        let mut plain = authed(ports[0]);
        assert_eq!(
            plain.cmd(&["SET", &key1, "x"]),
            Value::Error(format!("MOVED {} 127.0.0.1:{}", slot_of(&key1), ports[1]))
        );
        let nodes_text = plain.cmd(&["CLUSTER", "NODES"]).text();
        for i in 0..2 {
            let address = format!(" 127.0.0.1:{}@{} ", ports[i], u32::from(tls_ports[i]) + 10000);
            assert!(nodes_text.contains(&address), "{address} in {nodes_text}");
        }
        let Value::Array(Some(shards)) = plain.cmd(&["CLUSTER", "SHARDS"]) else { panic!("SHARDS") };
        let mut shown: Vec<(Value, Value)> = shards
            .iter()
            .map(|shard| {
                let Some(Value::Array(Some(nodes))) = field(shard, "nodes") else { panic!("{shard:?}") };
                (field(&nodes[0], "port").unwrap().clone(), field(&nodes[0], "tls-port").unwrap().clone())
            })
            .collect();
        shown.sort_by_key(|(port, _)| format!("{port:?}"));
        let mut expected: Vec<(Value, Value)> =
            (0..2).map(|i| (Value::Int(i64::from(ports[i])), Value::Int(i64::from(tls_ports[i])))).collect();
        expected.sort_by_key(|(port, _)| format!("{port:?}"));
        assert_eq!(shown, expected, "SHARDS shows both ports to any client");

        // redis-cli over TLS: the TLS ports; with -c it writes and reads across the nodes.
        let (ca, cert, key) = (file("ca.crt"), file("client.crt"), file("client.key"));
        let cli = |port: u16, args: &[&str]| {
            let port = port.to_string();
            let options = [
                "--tls",
                "--cacert",
                &ca,
                "--cert",
                &cert,
                "--key",
                &key,
                "-a",
                PASSWORD,
                "--no-auth-warning",
            ];
            tool("redis-cli", &[&options[..], &["-p", &port], args].concat())
        };
        assert_eq!(
            cli(tls_ports[0], &["SET", &key1, "x"]).trim(),
            format!("MOVED {} 127.0.0.1:{}", slot_of(&key1), tls_ports[1])
        );
        let tls_slots = cli(tls_ports[1], &["CLUSTER", "SLOTS"]);
        let tls_nodes = cli(tls_ports[1], &["CLUSTER", "NODES"]);
        for i in 0..2 {
            assert!(tls_slots.lines().any(|l| l == tls_ports[i].to_string()), "{tls_slots}");
            assert!(!tls_slots.lines().any(|l| l == ports[i].to_string()), "{tls_slots}");
            let address = format!(" 127.0.0.1:{}@{} ", tls_ports[i], u32::from(tls_ports[i]) + 10000);
            assert!(tls_nodes.contains(&address), "{address} in {tls_nodes}");
        }
        for (at, key) in [(0, &key0), (0, &key1), (1, &key0)] {
            assert_eq!(cli(tls_ports[at], &["-c", "SET", key, &format!("v-{key}")]).trim(), "OK");
        }
        for key in [&key0, &key1] {
            assert_eq!(cli(tls_ports[1], &["-c", "GET", key]).trim(), format!("v-{key}"));
        }
        assert_eq!(
            authed(ports[1]).cmd(&["GET", &key1]),
            Value::Bulk(Some(format!("v-{key1}").into_bytes()))
        );
        // PUBLISH reaches the other node over the relay's TLS, authenticated link.
        let mut subscriber = authed(ports[1]);
        assert_eq!(words(&subscriber.cmd(&["SUBSCRIBE", "news"])), ["subscribe", "news", "1"]);
        assert_eq!(plain.cmd(&["PUBLISH", "news", "over tls"]), Value::Int(0));
        assert_eq!(words(&subscriber.read()), ["message", "news", "over tls"]);
        let relayed = authed(ports[1]).cmd(&["CLIENT", "LIST"]).text();
        let on_tls = format!("laddr=127.0.0.1:{} ", tls_ports[1]);
        assert!(relayed.lines().any(|l| l.contains(&on_tls)), "the relay's link on the TLS port: {relayed}");

        // redis-py's RedisCluster over TLS finds the TLS ports, over plaintext the others.
        let script = format!(
            "import redis\n\
             tls = redis.RedisCluster(host='127.0.0.1', port={}, password='{PASSWORD}', ssl=True,\n\
             \x20   ssl_ca_certs='{ca}', ssl_certfile='{cert}', ssl_keyfile='{key}')\n\
             for i in range(100):\n\
             \x20   tls.set(f'py:{{i}}', i)\n\
             assert [int(tls.get(f'py:{{i}}')) for i in range(100)] == list(range(100))\n\
             plain = redis.RedisCluster(host='127.0.0.1', port={}, password='{PASSWORD}')\n\
             assert [int(plain.get(f'py:{{i}}')) for i in range(100)] == list(range(100))\n\
             print(sorted(n.port for n in tls.get_nodes()), sorted(n.port for n in plain.get_nodes()))\n",
            tls_ports[0], ports[0]
        );
        let out = Command::new("python3").args(["-c", &script]).output().unwrap();
        let mut by_port = [tls_ports.to_vec(), ports.clone()];
        by_port.iter_mut().for_each(|p| p.sort());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("{:?} {:?}", by_port[0], by_port[1]),
            "redis-py: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for port in &ports {
            let Value::Int(keys) = authed(*port).cmd(&["DBSIZE"]) else { panic!("DBSIZE") };
            assert!(keys > 10, "redis-py wrote to both nodes: {keys} on {port}");
        }

        // A slot of node 0 moves to node 1 over the TLS link, authenticated.
        let tag = key_on(0, "tag");
        let slot = slot_of(&tag);
        let mut keys: Vec<String> = (0..300).map(|i| format!("{{{tag}}}:s:{i}")).collect();
        for chunk in keys.chunks(100) {
            let mut argv = vec!["MSET".to_string()];
            argv.extend(chunk.iter().flat_map(|k| [k.clone(), format!("value of {k}")]));
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            assert_eq!(plain.cmd(&argv), Value::Status("OK".into()));
        }
        let more = [
            (["HSET", "{TAG}:h", "f1", "a", "f2", "b"].as_slice(), Value::Int(2)),
            (&["RPUSH", "{TAG}:l", "x", "y", "z"], Value::Int(3)),
            (&["ZADD", "{TAG}:z", "1", "m1", "2.5", "m2"], Value::Int(2)),
            (&["SET", "{TAG}:ttl", "t", "EX", "1000"], Value::Status("OK".into())),
        ];
        for (argv, reply) in more {
            let argv: Vec<String> = argv.iter().map(|a| a.replace("TAG", &tag)).collect();
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            assert_eq!(plain.cmd(&argv), reply, "{argv:?}");
            keys.push(argv[1].to_string());
        }
        let dump = |client: &mut common::Client| -> Vec<Value> {
            keys.iter().map(|k| client.cmd(&["DUMP", k])).collect()
        };
        let before = dump(&mut plain);
        let target = authed(ports[1]).cmd(&["CLUSTER", "MYID"]).text();
        // A target refusing the link's AUTH: the command fails at once, with its answer.
        assert_eq!(plain.cmd(&["CONFIG", "SET", "masterauth", "wrong"]), Value::Status("OK".into()));
        let Value::Error(refused) = plain.cmd(&["CLUSTERX", "MIGRATE", &slot.to_string(), &target]) else {
            panic!("CLUSTERX MIGRATE with a wrong masterauth")
        };
        assert!(
            refused.starts_with(&format!(
                "ERR Can't migrate slot {slot} to {target}: the target answered AUTH with WRONGPASS"
            )),
            "{refused}"
        );
        // That AUTH came to the target's TLS port.
        let Value::Array(Some(log)) = authed(ports[1]).cmd(&["ACL", "LOG", "1"]) else { panic!("ACL LOG") };
        let client = field(&log[0], "client-info").unwrap().text();
        assert!(client.contains(&format!(" laddr=127.0.0.1:{} ", tls_ports[1])), "{client}");
        assert_eq!(plain.cmd(&["CONFIG", "SET", "masterauth", PASSWORD]), Value::Status("OK".into()));
        assert_eq!(
            plain.cmd(&["CLUSTERX", "MIGRATE", &slot.to_string(), &target]),
            Value::Status("OK".into())
        );
        let state = |port: u16, name: &str| {
            let info = authed(port).cmd(&["CLUSTER", "INFO"]).text();
            info.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while state(ports[0], "migrating_state").as_deref() != Some("success") {
            assert_ne!(
                state(ports[0], "migrating_state").as_deref(),
                Some("fail"),
                "{:?}",
                state(ports[0], "migrating_error")
            );
            assert!(Instant::now() < deadline, "the move never ended");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut on_target = authed(ports[1]);
        assert_eq!(dump(&mut on_target), before, "every key of the slot, exactly");
        let Value::Int(ttl) = on_target.cmd(&["TTL", &format!("{{{tag}}}:ttl")]) else { panic!("TTL") };
        assert!((900..=1000).contains(&ttl), "{ttl}");
        assert_eq!(
            on_target.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]),
            Value::Int(keys.len() as i64)
        );
        assert_eq!(plain.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]), Value::Int(0));
        // Each client is sent to the slot's new owner on its own kind of port.
        assert_eq!(
            plain.cmd(&["GET", &keys[0]]),
            Value::Error(format!("MOVED {slot} 127.0.0.1:{}", ports[1]))
        );
        assert_eq!(
            cli(tls_ports[0], &["GET", &keys[0]]).trim(),
            format!("MOVED {slot} 127.0.0.1:{}", tls_ports[1])
        );
        assert_eq!(cli(tls_ports[0], &["-c", "GET", &keys[0]]).trim(), format!("value of {}", keys[0]));
        drop(nodes);
    }

    #[test]
    fn a_replica_takes_its_primary_s_slots_when_the_primary_s_lease_runs_out() {
        let Some(etcd) = Cluster::start("a_replica_takes_its_primary_s_slots", 1) else { return };
        let mut primary = disk_node(&etcd, "promote/", 1, &[]);
        wait_shared(&[primary.port], Duration::from_secs(20));
        let port = primary.port.to_string();
        let replica = disk_node(&etcd, "promote/", 1, &["--replicaof", &format!("127.0.0.1 {port}")]);
        let mut c = primary.client();
        for n in 1..=200 {
            assert_eq!(c.cmd(&["INCR", "promoted"]), Value::Int(n));
        }
        // Acknowledged by the replica too: the failover keeps them.
        let deadline = Instant::now() + Duration::from_secs(20);
        while c.cmd(&["WAIT", "1", "100"]) != Value::Int(1) {
            assert!(Instant::now() < deadline, "the replica never caught up");
        }
        // The replica has read the table (it registered after the primary).
        let deadline = Instant::now() + Duration::from_secs(20);
        while slots(replica.port).is_empty() {
            assert!(Instant::now() < deadline, "the replica never read the table");
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut r = replica.client();
        assert_eq!(
            r.cmd(&["GET", "promoted"]),
            Value::Error(format!("MOVED {} 127.0.0.1:{port}", ::rediskv::key_slot(b"promoted")))
        );
        // PUBLISH reaches the replica's subscribers once; SPUBLISH its SSUBSCRIBE clients
        // (the slot's shard is its owner and the owner's replicas).
        let mut subscriber = replica.client();
        assert_eq!(words(&subscriber.cmd(&["SUBSCRIBE", "news"])), ["subscribe", "news", "1"]);
        let mut shard = replica.client();
        assert_eq!(words(&shard.cmd(&["SSUBSCRIBE", "promoted"])), ["ssubscribe", "promoted", "1"]);
        for m in ["one", "two"] {
            assert_eq!(c.cmd(&["PUBLISH", "news", m]), Value::Int(0));
            assert_eq!(c.cmd(&["SPUBLISH", "promoted", m]), Value::Int(0));
        }
        for m in ["one", "two"] {
            assert_eq!(words(&subscriber.read()), ["message", "news", m]);
            assert_eq!(words(&shard.read()), ["smessage", "promoted", m]);
        }
        primary.kill();
        let took = wait_shared(&[replica.port], Duration::from_secs(20));
        let Value::Array(Some(role)) = r.cmd(&["ROLE"]) else { panic!("ROLE") };
        assert_eq!(role[0], Value::Bulk(Some(b"master".to_vec())));
        assert_eq!(r.cmd(&["GET", "promoted"]), Value::Bulk(Some(b"200".to_vec())));
        assert_eq!(r.cmd(&["INCR", "promoted"]), Value::Int(201));
        assert_eq!(r.cmd(&["FSCK"]), Value::Array(Some(vec![])));
        eprintln!(
            "failover: the replica served the slots {took:?} after the primary's kill -9 (lease {NODE_TIMEOUT_MS} ms)"
        );
    }

    #[test]
    fn a_primary_paused_while_its_replica_took_its_slots_acknowledges_no_write() {
        let Some(etcd) = Cluster::start("a_primary_paused_while_its_replica_took", 1) else { return };
        let primary = disk_node(&etcd, "paused-primary/", 1, &[]);
        wait_shared(&[primary.port], Duration::from_secs(20));
        let port = primary.port.to_string();
        let replica = disk_node(&etcd, "paused-primary/", 1, &["--replicaof", &format!("127.0.0.1 {port}")]);
        let mut paused = primary.client();
        paused.set_read_timeout(Duration::from_secs(30));
        for n in 1..=100 {
            assert_eq!(paused.cmd(&["INCR", "fenced"]), Value::Int(n));
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while paused.cmd(&["WAIT", "1", "100"]) != Value::Int(1) {
            assert!(Instant::now() < deadline, "the replica never caught up");
        }
        // Acknowledged: the replica holds the key (not still loading its full sync).
        assert_eq!(replica.client().cmd(&["DBSIZE"]), Value::Int(1));
        // A RESP3 subscriber of the slot's shard channel on the primary.
        let mut subscriber = primary.client();
        subscriber.set_read_timeout(Duration::from_secs(30));
        subscriber.cmd(&["HELLO", "3"]);
        assert_eq!(words(&subscriber.cmd(&["SSUBSCRIBE", "fenced"])), ["ssubscribe", "fenced", "1"]);
        primary.pause();
        // Sent while it is paused: read and run the moment it resumes, by the table it had.
        paused.send_raw(&encode(&[b"INCR", b"fenced"]));
        // The test means a primary stopped all along: one resumed by a SIGCONT from elsewhere
        // (the kernel's, to an orphaned process group) keeps or loses its lease at random.
        let resumed = "the primary was resumed by a SIGCONT from elsewhere";
        let deadline = Instant::now() + Duration::from_secs(20);
        let whole = vec![(0, 16383, i64::from(replica.port))];
        while slots(replica.port) != whole {
            assert!(primary.stopped(), "{resumed}");
            assert!(Instant::now() < deadline, "the replica never took the slots: {:?}", slots(replica.port));
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut r = replica.client();
        let incr = r.cmd(&["INCR", "fenced"]);
        assert!(primary.stopped(), "{resumed}; the replica answered {incr:?}");
        assert_eq!(incr, Value::Int(101));
        primary.resume();
        // Its lease may have run out: the write is refused, never acknowledged, and the
        // client asks again (TRYAGAIN) or is sent to the slots' owner now (MOVED).
        let reply = paused.read();
        assert!(
            matches!(&reply, Value::Error(e) if e.starts_with("TRYAGAIN ") || e.starts_with("MOVED ")),
            "{reply:?}"
        );
        assert_eq!(r.cmd(&["GET", "fenced"]), Value::Bulk(Some(b"101".to_vec())));
        // Back, it reads the table and sends the slots' clients to their new owner.
        let slot = ::rediskv::key_slot(b"fenced");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match paused.cmd(&["INCR", "fenced"]) {
                Value::Error(e) if e.starts_with(&format!("MOVED {slot} ")) => break,
                Value::Error(e) if e.starts_with("TRYAGAIN ") => {}
                other => panic!("{other:?}"),
            }
            assert!(Instant::now() < deadline, "never redirected");
            std::thread::sleep(Duration::from_millis(50));
        }
        // The slot left it with its lease, and so did the slot's shard channel.
        let lost = subscriber.read();
        assert!(matches!(lost, Value::Push(_)), "{lost:?}");
        assert_eq!(words(&lost), ["sunsubscribe", "fenced", "0"]);
    }
}
