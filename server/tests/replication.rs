//! Redis' replication protocol against redis-server 7.0.15, both ways: the stream a replica
//! receives (compared command by command with redis-server's), redis-server as a replica of
//! rediskv-server (a full sync while writes go on, then a link break answered with
//! `+CONTINUE`), and rediskv-server as a replica of redis-server holding every type in every
//! encoding. Each test starts its servers on free ports and stops them.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Server, Value, redis, rediskv, rediskv_with_env};

/// Connects to `server` as a replica does (REPLCONF capa, PSYNC ? -1) and reads the full
/// sync: the link then carries the stream (a disk-based sync's at once; a diskless one's
/// only after an ACK, which this link does not send).
fn fake_replica(server: &Server) -> Client {
    let mut link = server.client();
    assert_eq!(link.cmd(&["REPLCONF", "capa", "eof", "capa", "psync2"]), Value::Status("OK".into()));
    link.send(&[b"PSYNC", b"?", b"-1"]);
    match link.read() {
        Value::Status(line) => assert!(line.starts_with("FULLRESYNC "), "{line}"),
        other => panic!("PSYNC answered {other:?}"),
    }
    let payload = link.read_rdb_payload();
    assert!(payload.starts_with(b"REDIS00"), "not an RDB file");
    link
}

/// The stream's commands up to `SET __end__ 1`, without PINGs, with absolute times and
/// stream ids masked.
fn stream_until_end(link: &mut Client) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    loop {
        let Some(reply) = link.try_read() else { panic!("the stream stopped after {commands:?}") };
        let command: Vec<String> = reply.texts();
        // The primary's keepalive (redis-server sends it in lower case).
        if command.len() == 1 && command[0].eq_ignore_ascii_case("ping") {
            continue;
        }
        if command == ["SET", "__end__", "1"] {
            return commands;
        }
        commands.push(command.into_iter().map(mask).collect());
    }
}

/// `<ms>` for a unix time in milliseconds, `<id>` for a stream id made of one.
fn mask(word: String) -> String {
    let digits = |s: &str| s.len() == 13 && s.bytes().all(|b| b.is_ascii_digit());
    match word.split_once('-') {
        Some((ms, seq)) if digits(ms) && seq.bytes().all(|b| b.is_ascii_digit()) => "<id>".into(),
        _ if digits(&word) => "<ms>".into(),
        _ => word,
    }
}

/// Commands whose propagation differs from their arguments, or that propagate nothing.
const STREAM_SCRIPT: &[&[&str]] = &[
    &["SET", "a", "1"],
    &["SET", "a", "2", "EX", "100"],
    &["SET", "a", "3", "PXAT", "99999999999999", "GET"],
    &["SETEX", "b", "100", "v"],
    &["PSETEX", "b2", "100000", "v"],
    &["EXPIRE", "a", "200"],
    &["EXPIRE", "missing", "200"],
    &["PEXPIRE", "a", "300000", "GT"],
    &["EXPIREAT", "a", "99999999999"],
    &["EXPIRE", "gone", "-1"],
    &["GET", "a"],
    &["INCRBYFLOAT", "f", "1.5"],
    &["HINCRBYFLOAT", "h", "x", "2.5"],
    &["SADD", "s", "only"],
    &["SPOP", "s"],
    &["SADD", "s", "one"],
    &["SPOP", "s", "1"],
    &["DEL", "missing"],
    &["MULTI"],
    &["SET", "m", "1"],
    &["GET", "m"],
    &["EXEC"],
    &["MULTI"],
    &["SET", "m", "1"],
    &["INCR", "m"],
    &["EXEC"],
    &["MULTI"],
    &["GET", "m"],
    &["EXEC"],
    &["EVAL", "redis.call('set', 'e', '1') redis.call('incr', 'e')", "0"],
    &["EVAL", "return redis.call('get', 'e')", "0"],
    &["EVAL", "redis.call('select', '3') redis.call('set', 'e3', '1')", "0"],
    // A script's PUBLISH and SPUBLISH are replicated, inside its MULTI/EXEC when it wrote.
    &["EVAL", "redis.call('set', 'p', '1') redis.call('publish', 'ch', 'm1')", "0"],
    &["EVAL", "redis.call('publish', 'ch', 'm2')", "0"],
    &[
        "EVAL",
        "redis.call('select', '2') redis.call('spublish', 'ch', 'm3') redis.call('set', 'p2', '1')",
        "0",
    ],
    &["RPUSH", "l", "a", "b", "c", "d"],
    &["BLPOP", "l", "0"],
    &["BRPOPLPUSH", "l", "l2", "0"],
    &["LMPOP", "1", "l", "RIGHT", "COUNT", "2"],
    &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
    &["BZPOPMIN", "z", "0"],
    &["ZMPOP", "1", "z", "MAX", "COUNT", "5"],
    &["XADD", "x", "*", "f", "v"],
    &["XADD", "x", "MAXLEN", "100", "*", "f", "v"],
    &["XGROUP", "CREATE", "x", "g", "0"],
    &["XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "x", ">"],
    &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "x", ">"],
    &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "x", ">"],
    &["CONFIG", "SET", "stream-node-max-entries", "2"],
    &["XADD", "xt", "1-1", "f", "v"],
    &["XADD", "xt", "1-2", "f", "v"],
    &["XADD", "xt", "1-3", "f", "v"],
    &["XADD", "xt", "1-4", "f", "v"],
    &["XADD", "xt", "1-5", "f", "v"],
    &["XADD", "xt", "MAXLEN", "~", "2", "1-6", "f", "v"],
    &["XADD", "xt", "MAXLEN", "~", "1", "LIMIT", "1", "1-7", "f", "v"],
    &["XTRIM", "xt", "MAXLEN", "~", "1"],
    &["XTRIM", "xt", "MAXLEN", "~", "100"],
    &["XADD", "xt", "1-8", "f", "v"],
    &["XADD", "xt", "1-9", "f", "v"],
    &["XADD", "xt", "1-10", "f", "v"],
    &["XTRIM", "xt", "MINID", "~", "1-9"],
    &["XADD", "xt", "MINID", "~", "1-10", "1-11", "f", "v"],
    &["XTRIM", "xt", "MAXLEN", "=", "2"],
    &["XADD", "xs", "1-1", "a", "1"],
    &["XADD", "xs", "1-2", "a", "2"],
    &["XADD", "xs", "1-3", "a", "3"],
    &["XADD", "xs", "1-4", "a", "4"],
    &["XGROUP", "CREATE", "xs", "g", "0"],
    &["XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "xs", ">"],
    &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "xs", "0"],
    &["XREADGROUP", "GROUP", "g", "c2", "NOACK", "COUNT", "1", "STREAMS", "xs", ">"],
    &["XCLAIM", "xs", "g", "c3", "0", "1-1"],
    &["XCLAIM", "xs", "g", "c3", "0", "1-2", "JUSTID"],
    &["XCLAIM", "xs", "g", "c3", "0", "1-1", "RETRYCOUNT", "7", "TIME", "1700000000000"],
    &["XCLAIM", "xs", "g", "c3", "0", "1-4", "FORCE", "JUSTID", "LASTID", "1-9"],
    &["XCLAIM", "xs", "g", "c3", "0", "1-5", "LASTID", "2-0"],
    &["XCLAIM", "xs", "g", "c3", "100000", "1-1"],
    &["XAUTOCLAIM", "xs", "g", "c4", "0", "0", "COUNT", "1"],
    &["XAUTOCLAIM", "xs", "g", "c4", "0", "0", "JUSTID"],
    &["XDEL", "xs", "1-2"],
    &["XAUTOCLAIM", "xs", "g", "c5", "0", "0"],
    &["XCLAIM", "xs", "g", "c5", "0", "1-2", "1-4"],
    &["SADD", "s", "a", "b", "c", "d", "e"],
    &["SPOP", "s", "0"],
    &["SPOP", "s", "10"],
    &[
        "EVAL",
        "redis.call('sadd','s3','a') redis.call('spop','s3') return redis.call('srandmember','s3', 2)",
        "0",
    ],
    &["SADD", "s7", "a", "b", "c"],
    &["SPOP", "s7", "3"],
    &["SADD", "s2", "a", "b"],
    &["EVAL", "redis.call('set','rk','1') return redis.call('randomkey')", "0"],
    &["SET", "g1", "v", "EX", "100"],
    &["GETEX", "g1"],
    &["GETEX", "g1", "EXAT", "99999999999"],
    &["GETEX", "g1", "PXAT", "99999999999999"],
    &["GETEX", "g1", "PX", "100000"],
    &["GETEX", "g1", "PERSIST"],
    &["GETEX", "g1", "PERSIST"],
    &["GETEX", "g1", "EX", "-1"],
    &["GETEX", "missing", "EX", "10"],
    &["GETDEL", "missing"],
    &["SET", "g2", "v"],
    &["GETDEL", "g2"],
    &["SET", "s4", "v", "GET"],
    &["SET", "s4", "w", "KEEPTTL"],
    &["SET", "s4", "x", "EXAT", "99999999999", "GET"],
    &["SET", "s4", "y", "KEEPTTL", "GET"],
    &["SET", "s4", "z", "NX", "GET"],
    &["SET", "s4", "z2", "XX", "PX", "100000", "GET"],
    &["SET", "s4", "v", "EXAT", "1"],
    &["SET", "s5", "v", "PXAT", "1", "GET"],
    &["SET", "s6", "v", "NX", "EX", "100"],
    &["SET", "s6", "v", "NX", "EX", "100"],
    // Stream effects from a script and a transaction, and a blocked read.
    &["XADD", "xe", "1-1", "a", "1"],
    &["XADD", "xe", "1-2", "a", "2"],
    &["XADD", "xe", "1-3", "a", "3"],
    &["XADD", "xe", "1-4", "a", "4"],
    &["XADD", "xe", "1-5", "a", "4"],
    &["XGROUP", "CREATE", "xe", "g", "0"],
    &[
        "EVAL",
        "redis.call('xreadgroup','group','g','c9','count','2','streams','xe','>') redis.call('xadd','xe','maxlen','~','2','2-1','f','v') return redis.call('xclaim','xe','g','c8','0','1-1')",
        "0",
    ],
    &["MULTI"],
    &["XREADGROUP", "GROUP", "g", "c7", "NOACK", "COUNT", "1", "STREAMS", "xe", ">"],
    &["XTRIM", "xe", "MAXLEN", "~", "1"],
    &["XAUTOCLAIM", "xe", "g", "c6", "0", "0"],
    &["EXEC"],
    &["XREADGROUP", "GROUP", "g", "c5", "BLOCK", "100", "STREAMS", "xe", ">"],
    &["XCLAIM", "xe", "g", "c4", "0", "1-1", "IDLE", "10"],
    &["GETDEL", "b"],
    &["GETEX", "b2", "PERSIST"],
    &["GETEX", "b2", "EX", "100"],
    &["SELECT", "2"],
    &["SET", "in2", "v"],
    &["SELECT", "0"],
    &["SET", "in0", "v"],
    &["SET", "short", "v", "PX", "1"],
    &["SET", "short2", "v", "PX", "1"],
    &["DEBUG", "SLEEP", "0.02"],
    &["GET", "short"],
    &["SET", "short2", "w"],
    &["PUBLISH", "ch", "m"],
    &["SWAPDB", "0", "1"],
    &["FLUSHDB"],
    &["FLUSHALL"],
    // Deletions as UNLINK where Redis frees them in the background.
    &["CONFIG", "SET", "lazyfree-lazy-expire", "yes"],
    &["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"],
    &["SET", "k", "v", "PX", "1"],
    &["SET", "k2", "v"],
    &["SET", "k3", "v"],
    &["SET", "k4", "v"],
    &["SET", "k5", "v"],
    &["DEBUG", "SLEEP", "0.02"],
    &["GET", "k"],
    &["EXPIRE", "k2", "-1"],
    &["GETEX", "k3", "PXAT", "1"],
    &["GETDEL", "k4"],
    &["DEL", "k5"],
    &["CONFIG", "SET", "lazyfree-lazy-expire", "no"],
    &["CONFIG", "SET", "lazyfree-lazy-user-del", "no"],
    &["SET", "k2", "v"],
    &["EXPIRE", "k2", "-1"],
    &["SET", "k4", "v"],
    &["GETDEL", "k4"],
    &["SET", "__end__", "1"],
];

fn stream_of(server: &Server) -> Vec<Vec<String>> {
    let mut link = fake_replica(server);
    let mut c = server.client();
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), Value::Status("OK".into()));
    for command in STREAM_SCRIPT {
        c.cmd(command);
    }
    stream_until_end(&mut link)
}

/// Every write reaches a replica as Redis 7.0 propagates it: by its effects (absolute
/// TTLs, the members a random pop took, the plain form of a blocking pop, XADD's id, the
/// DEL of a key found expired before the write that found it), a transaction or a script
/// as MULTI/EXEC when it wrote more than once, SELECT where the database changes, nothing
/// for a read or a write that changed nothing.
#[test]
fn stream_is_redis_effects() {
    let debug = ["--enable-debug-command", "yes", "--repl-diskless-sync", "no"];
    let Some(redis) = redis(&debug) else { return };
    let theirs = stream_of(&redis);
    for threads in ["1", "3"] {
        let ours = stream_of(&rediskv(&["--enable-debug-command", "yes", "--threads", threads]));
        assert_eq!(ours, theirs, "{threads} threads");
    }
}

/// Evictions and active expiry reach a replica as `UNLINK` under `lazyfree-lazy-eviction`
/// and `lazyfree-lazy-expire` (as `DEL` otherwise: [`stream_is_redis_effects`]), as from
/// redis-server: the names of the commands each stream carries are the same.
#[test]
fn lazy_deletions_reach_replicas_as_unlink() {
    let names = |server: &Server| -> std::collections::BTreeSet<String> {
        let mut link = fake_replica(server);
        let mut c = server.client();
        let value = "v".repeat(10_000);
        for i in 0..20 {
            c.cmd(&["SET", &format!("e{i}"), &value]);
        }
        let config = [
            ("lazyfree-lazy-eviction", "yes"),
            ("lazyfree-lazy-expire", "yes"),
            ("maxmemory-policy", "allkeys-random"),
            ("maxmemory", "1"),
        ];
        for (name, value) in config {
            c.cmd(&["CONFIG", "SET", name, value]);
        }
        c.cmd(&["SET", "x", "y"]);
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        c.cmd(&["SET", "short", "v", "PX", "1"]);
        let mut names = std::collections::BTreeSet::new();
        loop {
            let Some(reply) = link.try_read() else { panic!("the stream stopped after {names:?}") };
            let command = reply.texts();
            if command == ["UNLINK", "short"] {
                return names;
            }
            // The fill's SETs, and the primary's keepalive PING (sent whenever the stream
            // is idle for a while), are not what the test compares.
            let keepalive = command.len() == 1 && command[0].eq_ignore_ascii_case("ping");
            let fill = command[0] == "SET" && command[1].starts_with('e');
            if !(keepalive || fill) {
                names.insert(command[0].to_uppercase());
            }
        }
    };
    let Some(redis) = redis(&["--repl-diskless-sync", "no"]) else { return };
    let theirs = names(&redis);
    assert!(theirs.contains("UNLINK") && !theirs.contains("DEL"), "{theirs:?}");
    assert_eq!(names(&rediskv(&[])), theirs);
}

/// Fills database 0 and 3 of a primary with every type in each of Redis 7.0's encodings
/// (small: listpack or intset; large: quicklist, hashtable, skiplist), a stream with a
/// consumer group, consumers and pending entries, and keys with TTLs.
fn populate(c: &mut Client) {
    populate_types(c, true);
}

/// [`populate`], with the stream or without (a layout that has no streams).
fn populate_types(c: &mut Client, stream: bool) {
    let many = |prefix: &str, n: usize| -> Vec<String> { (0..n).map(|i| format!("{prefix}{i}")).collect() };
    let run = |c: &mut Client, args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = c.cmd(&args);
        assert!(!matches!(reply, Value::Error(_)), "{args:?}: {reply:?}");
    };
    let with = |head: &[&str], tail: Vec<String>| -> Vec<String> {
        head.iter().map(|s| s.to_string()).chain(tail).collect()
    };
    for db in ["3", "0"] {
        run(c, vec!["SELECT".into(), db.into()]);
        run(c, with(&["SET", "int"], vec!["12345".into()]));
        run(c, with(&["SET", "short"], vec!["abc".into()]));
        run(c, with(&["SET", "long"], vec!["x".repeat(20_000)]));
        run(c, with(&["SET", "ttl", "v", "PX"], vec!["900000".into()]));
        run(c, with(&["RPUSH", "list:small"], many("e", 5)));
        run(c, with(&["RPUSH", "list:large"], many("element-", 2_000)));
        run(c, with(&["SADD", "set:intset"], (0..20).map(|i| i.to_string()).collect()));
        run(c, with(&["SADD", "set:large-intset"], (0..600).map(|i| i.to_string()).collect()));
        run(c, with(&["SADD", "set:strings"], many("m", 50)));
        let pairs = |n: usize| (0..n).flat_map(|i| [format!("f{i}"), format!("v{i}")]).collect::<Vec<_>>();
        run(c, with(&["HSET", "hash:small"], pairs(5)));
        run(c, with(&["HSET", "hash:large"], pairs(600)));
        let scored =
            |n: usize| (0..n).flat_map(|i| [format!("{}.5", i), format!("m{i}")]).collect::<Vec<_>>();
        run(c, with(&["ZADD", "zset:small"], scored(5)));
        run(c, with(&["ZADD", "zset:large"], scored(300)));
        run(c, with(&["EXPIRE", "zset:large"], vec!["900".into()]));
        if !stream {
            continue;
        }
        for i in 0..150 {
            run(
                c,
                with(
                    &["XADD", "stream", &format!("{}-1", 1000 + i)],
                    vec!["field".into(), format!("value{i}")],
                ),
            );
        }
        run(c, with(&["XGROUP", "CREATE", "stream", "group", "0"], vec![]));
        run(c, with(&["XGROUP", "CREATE", "stream", "idle-group", "$"], vec![]));
        run(
            c,
            with(
                &["XREADGROUP", "GROUP", "group", "alice", "COUNT", "10", "STREAMS", "stream"],
                vec![">".into()],
            ),
        );
        run(
            c,
            with(
                &["XREADGROUP", "GROUP", "group", "bob", "COUNT", "5", "STREAMS", "stream"],
                vec![">".into()],
            ),
        );
        run(c, with(&["XACK", "stream", "group", "1000-1", "1001-1"], vec![]));
        run(c, with(&["XDEL", "stream", "1140-1"], vec![]));
    }
}

/// What a client reads of every key of databases 0 to 3: its type, its contents (orders
/// Redis leaves free sorted), its expiry time, its stream groups and pending entries.
fn dataset(c: &mut Client) -> std::collections::BTreeMap<(usize, Vec<u8>), Vec<Value>> {
    let mut all = std::collections::BTreeMap::new();
    for db in 0..4 {
        c.cmd(&["SELECT", &db.to_string()]);
        let Value::Array(Some(keys)) = c.cmd(&["KEYS", "*"]) else { panic!("KEYS") };
        for key in keys {
            let Value::Bulk(Some(key)) = key else { continue };
            let k = String::from_utf8_lossy(&key).into_owned();
            let ty = c.cmd(&["TYPE", &k]);
            let sorted = |v: Value| match v {
                Value::Array(Some(mut items)) => {
                    items.sort_by_key(|i| format!("{i:?}"));
                    Value::Array(Some(items))
                }
                other => other,
            };
            let mut facts = vec![ty.clone(), c.cmd(&["PEXPIRETIME", &k])];
            match ty {
                Value::Status(t) if t == "string" => facts.push(c.cmd(&["GET", &k])),
                Value::Status(t) if t == "list" => facts.push(c.cmd(&["LRANGE", &k, "0", "-1"])),
                Value::Status(t) if t == "set" => facts.push(sorted(c.cmd(&["SMEMBERS", &k]))),
                Value::Status(t) if t == "zset" => {
                    facts.push(c.cmd(&["ZRANGE", &k, "0", "-1", "WITHSCORES"]))
                }
                Value::Status(t) if t == "hash" => {
                    let Value::Array(Some(flat)) = c.cmd(&["HGETALL", &k]) else { panic!("HGETALL") };
                    let mut pairs: Vec<Value> =
                        flat.chunks(2).map(|p| Value::Array(Some(p.to_vec()))).collect();
                    pairs.sort_by_key(|p| format!("{p:?}"));
                    facts.push(Value::Array(Some(pairs)));
                }
                Value::Status(t) if t == "stream" => {
                    facts.push(c.cmd(&["XRANGE", &k, "-", "+"]));
                    let Value::Array(Some(groups)) = c.cmd(&["XINFO", "GROUPS", &k]) else { panic!("XINFO") };
                    for group in groups {
                        let Value::Array(Some(fields)) = group else { continue };
                        let name = fields[1].text();
                        // Name, consumers, pending, last delivered id.
                        facts.extend(fields.iter().skip(1).step_by(2).take(4).cloned());
                        // Each pending entry's id, consumer and delivery count (not its idle time).
                        let Value::Array(Some(pending)) = c.cmd(&["XPENDING", &k, &name, "-", "+", "1000"])
                        else {
                            panic!("XPENDING")
                        };
                        for entry in pending {
                            let Value::Array(Some(e)) = entry else { continue };
                            facts.extend([e[0].clone(), e[1].clone(), e[3].clone()]);
                        }
                    }
                }
                other => panic!("type {other:?}"),
            }
            all.insert((db, key), facts);
        }
    }
    c.cmd(&["SELECT", "0"]);
    all
}

/// The writes a primary takes while a replica syncs and streams: every family, relative
/// TTLs, random pops, XADD *, consumer group reads, transactions and scripts, from a thread
/// until [`Load::finish`].
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    writer: std::thread::JoinHandle<u64>,
}

impl Load {
    fn start(port: u16) -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = write_load(port, stop.clone());
        Load { stop, writer }
    }

    /// Stops the writes after `time`; returns how many rounds were written.
    fn finish_after(self, time: Duration) -> u64 {
        std::thread::sleep(time);
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.writer.join().unwrap()
    }
}

fn write_load(
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut c = Client::connect(port);
        let mut n = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let i = n.to_string();
            let commands: [&[&str]; 14] = [
                &["INCR", "counter"],
                &["RPUSH", "list:large", &i],
                &["LPOP", "list:small"],
                &["HSET", "hash:large", &format!("w{i}"), &i],
                &["SADD", "set:strings", &format!("w{i}")],
                &["SPOP", "set:intset"],
                &["ZINCRBY", "zset:large", "1.5", "m7"],
                &["SET", &format!("k{i}"), &i, "EX", "1000"],
                &["EXPIRE", "short", "5000"],
                &["INCRBYFLOAT", "float", "0.25"],
                &["XADD", "stream", "*", "w", &i],
                &["XREADGROUP", "GROUP", "group", "carol", "COUNT", "1", "STREAMS", "stream", ">"],
                &[
                    "EVAL",
                    "redis.call('incr', KEYS[1]) return redis.call('hincrby', 'hash:small', 'n', 1)",
                    "1",
                    "counter",
                ],
                &["SET", "__marker__", &i],
            ];
            for command in commands {
                let reply = c.cmd(command);
                assert!(!matches!(reply, Value::Error(_)), "{command:?}: {reply:?}");
            }
            c.cmd(&["MULTI"]);
            c.cmd(&["LPUSH", "list:tx", &i]);
            c.cmd(&["INCR", "counter"]);
            c.cmd(&["EXEC"]);
            n += 1;
        }
        n
    })
}

/// A field of INFO replication (or any section).
fn info_field(c: &mut Client, section: &str, field: &str) -> Option<String> {
    let text = c.cmd(&["INFO", section]).text();
    text.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}

/// INFO stats' `sync_full` and `sync_partial_ok` of a primary.
fn sync_counts(c: &mut Client) -> [String; 2] {
    ["sync_full", "sync_partial_ok"].map(|f| info_field(c, "stats", f).unwrap())
}

/// Waits until `replica` applied everything `primary` streamed (their offsets equal).
fn wait_caught_up(primary: &Server, replica: &Server) {
    let (mut p, mut r) = (primary.client(), replica.client());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let up = info_field(&mut r, "replication", "master_link_status").as_deref() == Some("up");
        let theirs = info_field(&mut r, "replication", "slave_repl_offset");
        let ours = info_field(&mut p, "replication", "master_repl_offset");
        if up && theirs.is_some() && theirs == ours {
            return;
        }
        assert!(Instant::now() < deadline, "the replica did not catch up: {theirs:?} of {ours:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_same_data(primary: &Server, replica: &Server) {
    let (ours, theirs) = (dataset(&mut primary.client()), dataset(&mut replica.client()));
    assert_eq!(ours.len(), theirs.len(), "key counts");
    for (key, facts) in &ours {
        let name = String::from_utf8_lossy(&key.1);
        let Some(other) = theirs.get(key) else { panic!("key {name:?} of database {} is missing", key.0) };
        // The first fact that differs, for a readable failure.
        for (i, (a, b)) in facts.iter().zip(other).enumerate() {
            assert_eq!(a, b, "fact {i} of key {name:?} of database {}", key.0);
        }
        assert_eq!(facts.len(), other.len(), "facts of key {name:?} of database {}", key.0);
    }
}

/// rediskv-server as a replica of redis-server (the live migration path): a full sync of
/// every type in every encoding while redis-server keeps writing, then the stream; both
/// end with the same keys, values and TTLs. The replica refuses writes as Redis does.
#[test]
fn rediskv_replicates_redis() {
    // A backlog that holds what the write load sends while the link is down; a diskless
    // sync that starts after the newlines that keep the link alive meanwhile.
    let Some(primary) = redis(&["--repl-diskless-sync-delay", "2", "--repl-backlog-size", "256mb"]) else {
        return;
    };
    populate(&mut primary.client());
    let replica = rediskv(&["--threads", "2"]);
    let load = Load::start(primary.port);
    let mut r = replica.client();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]), Value::Status("OK".into()));
    assert!(load.finish_after(Duration::from_millis(1500)) > 0);
    wait_caught_up(&primary, &replica);
    assert_same_data(&primary, &replica);
    assert_eq!(
        r.cmd(&["SET", "k", "v"]),
        Value::Error("READONLY You can't write against a read only replica.".into())
    );
    let offset = info_field(&mut r, "replication", "slave_repl_offset").unwrap().parse().unwrap();
    let bulk = |s: &str| Value::Bulk(Some(s.as_bytes().to_vec()));
    let role = vec![
        bulk("slave"),
        bulk("127.0.0.1"),
        Value::Int(primary.port.into()),
        bulk("connected"),
        Value::Int(offset),
    ];
    assert_eq!(r.cmd(&["ROLE"]), Value::Array(Some(role)));

    // A broken link continues where it stopped (the command in flight is not lost).
    assert_eq!(r.cmd(&["CLIENT", "KILL", "TYPE", "master"]), Value::Int(1));
    Load::start(primary.port).finish_after(Duration::from_millis(1500));
    wait_caught_up(&primary, &replica);
    assert_same_data(&primary, &replica);
    let mut p = primary.client();
    assert_eq!(sync_counts(&mut p), ["1", "1"], "one full sync, then one partial");

    // Promoted, it writes, and keeps the primary's id as its second one.
    let replid = info_field(&mut p, "replication", "master_replid");
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), Value::Status("OK".into()));
    assert_eq!(r.cmd(&["SET", "k", "v"]), Value::Status("OK".into()));
    assert_eq!(info_field(&mut r, "replication", "role").as_deref(), Some("master"));
    assert_eq!(info_field(&mut r, "replication", "master_replid2"), replid);
}

/// redis-server as a replica of rediskv-server: it loads rediskv's RDB payload and applies
/// its stream while rediskv keeps writing; after a 5-second link break (the replica's process
/// stopped, its connection killed, writes going on) it continues with `+CONTINUE`, no second
/// full sync; both end with the same data.
#[test]
fn redis_replicates_rediskv() {
    let primary = rediskv(&["--threads", "2", "--repl-backlog-size", "256mb"]);
    populate(&mut primary.client());
    let load = Load::start(primary.port);
    let Some(replica) = redis(&["--replicaof", "127.0.0.1", &primary.port.to_string()]) else { return };
    load.finish_after(Duration::from_millis(1500));
    wait_caught_up(&primary, &replica);
    assert_same_data(&primary, &replica);
    let mut p = primary.client();
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Value::Int(1));

    // The link breaks for 5 seconds while the primary keeps writing.
    replica.pause();
    assert_eq!(p.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), Value::Int(1));
    Load::start(primary.port).finish_after(Duration::from_secs(5));
    replica.resume();
    wait_caught_up(&primary, &replica);
    assert_same_data(&primary, &replica);
    assert_eq!(sync_counts(&mut p), ["1", "1"], "one full sync, then one partial");
}

/// WAIT counts a replica once it has acknowledged: not while its full sync is under way,
/// even when the writes WAIT waits for came before the sync (the stream's offset is still 0,
/// which the replica's first acknowledgement will reach).
#[test]
fn wait_counts_no_replica_before_its_first_acknowledgement() {
    let primary = rediskv(&["--threads", "2"]);
    let mut p = primary.client();
    assert_eq!(p.cmd(&["SET", "before", "1"]), Value::Status("OK".into()));
    let mut link = primary.client();
    link.send(&[b"PSYNC", b"?", b"-1"]);
    match link.read() {
        Value::Status(line) => assert!(line.starts_with("FULLRESYNC ") && line.ends_with(" 0"), "{line}"),
        other => panic!("PSYNC answered {other:?}"),
    }
    // The payload is not read, nor acknowledged: the replica holds nothing yet.
    assert_eq!(p.cmd(&["WAIT", "1", "100"]), Value::Int(0));
    // Acknowledged up to the stream's end now (past that WAIT's GETACK): counted.
    let Value::Array(Some(role)) = p.cmd(&["ROLE"]) else { panic!("ROLE") };
    let Value::Int(offset) = role[1] else { panic!("{role:?}") };
    assert!(offset > 0, "{role:?}");
    link.send(&[b"REPLCONF", b"ACK", offset.to_string().as_bytes()]);
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Value::Int(1));
}

/// Without replicas: WAIT (waiting out its timeout), ROLE, REPLCONF and REPLICAOF's
/// refusals, and INFO replication's fields, as redis-server answers them.
#[test]
fn primary_without_replicas_answers_as_redis() {
    common::same_as_redis(|server| {
        let mut c = server.client();
        let mut replies: Vec<Value> = [
            &["WAIT", "0", "0"][..],
            &["WAIT", "1", "50"],
            &["WAIT", "1", "-1"],
            &["WAIT", "x", "0"],
            &["ROLE"],
            &["REPLCONF", "listening-port"],
            &["REPLCONF", "nonsense", "1"],
            &["REPLCONF", "listening-port", "7000"],
            &["REPLICAOF", "127.0.0.1", "notaport"],
            &["REPLICAOF", "NO", "ONE"],
            &["MULTI"],
            &["PSYNC", "?", "-1"],
            &["DISCARD"],
        ]
        .iter()
        .map(|command| c.cmd(command))
        .collect();
        // The fields and the values that are not ids.
        let info = c.cmd(&["INFO", "replication"]).text();
        for line in info.lines().filter(|l| l.contains(':')) {
            let (field, value) = line.split_once(':').unwrap();
            let value = if field == "master_replid" { "<id>" } else { value };
            replies.push(Value::Status(format!("{field}:{value}")));
        }
        replies
    });
}

/// rediskv-server replicating rediskv-server across engines and layouts: a Kvrocks-layout
/// primary on fjall, a TiTea-layout replica on fjall; the replica's writes reach its disk
/// before it acknowledges them.
#[test]
fn rediskv_replicates_rediskv_across_layouts() {
    let primary = rediskv(&["--engine", "fjall", "--threads", "2"]);
    let mut p = primary.client();
    populate_types(&mut p, false);
    let replica = rediskv(&["--engine", "fjall", "--layout", "titea", "--threads", "2"]);
    let mut r = replica.client();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]), Value::Status("OK".into()));
    for i in 0..200 {
        let i = i.to_string();
        p.cmd(&["INCR", "counter"]);
        p.cmd(&["HSET", "hash:large", "w", &i]);
        p.cmd(&["SET", &format!("k{i}"), &i, "EX", "1000"]);
        p.cmd(&["SPOP", "set:intset"]);
    }
    assert_eq!(p.cmd(&["WAIT", "1", "10000"]), Value::Int(1));
    wait_caught_up(&primary, &replica);
    assert_same_data(&primary, &replica);
}

/// A replica on fjall that restarts continues from the position stored with its data:
/// after SHUTDOWN, and after SIGKILL under `appendfsync always` while the primary writes,
/// it asks `PSYNC <replid> <offset+1>` and gets `+CONTINUE` (the primary counts no second
/// full sync), in the database the stream had selected; it ends with the primary's data,
/// no command applied twice nor skipped.
#[test]
fn a_restarted_disk_replica_continues() {
    let primary = rediskv(&["--threads", "2", "--repl-backlog-size", "256mb"]);
    populate(&mut primary.client());
    let dir = std::env::temp_dir().join(format!("rediskv-test-restarted-replica-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let of_primary = format!("127.0.0.1 {}", primary.port);
    let start_replica = || {
        let dir = dir.to_str().unwrap();
        let args = ["--engine", "fjall", "--dir", dir, "--threads", "2", "--appendfsync", "always"];
        rediskv(&[&args[..], &["--replicaof", &of_primary]].concat())
    };
    let mut replica = start_replica();
    Load::start(primary.port).finish_after(Duration::from_millis(1000));
    wait_caught_up(&primary, &replica);
    let mut p = primary.client();

    // SHUTDOWN with the stream in database 3; the primary writes there meanwhile, with no
    // SELECT of its own (its stream selected 3 already).
    p.cmd(&["SELECT", "3"]);
    p.cmd(&["SET", "before-shutdown", "1"]);
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Value::Int(1));
    assert_eq!(replica.client().cmd_or_none(&["SHUTDOWN"]), None);
    assert!(replica.wait_exit().success());
    p.cmd(&["INCR", "while-down"]);
    replica = start_replica();
    wait_caught_up(&primary, &replica);
    assert_same_data(&primary, &replica);
    assert_eq!(sync_counts(&mut p), ["1", "1"], "one full sync, then one partial");

    // SIGKILL while the primary writes.
    let load = Load::start(primary.port);
    std::thread::sleep(Duration::from_millis(700));
    replica.kill();
    replica = start_replica();
    load.finish_after(Duration::from_millis(700));
    wait_caught_up(&primary, &replica);
    assert_same_data(&primary, &replica);
    assert_eq!(sync_counts(&mut p), ["1", "2"], "no second full sync");
    drop(replica);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The effects a replica keeps beside the store's batches (SWAPDB's mapping, the function
/// libraries) carry the stream position with them: a replica killed with SIGKILL right
/// after one continues after it, neither swapping the databases back nor loading a library
/// twice.
#[test]
fn a_replica_killed_after_swapdb_or_function_continues_after_it() {
    let primary = rediskv(&[]);
    let dir = std::env::temp_dir().join(format!("rediskv-test-killed-after-swapdb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let of_primary = format!("127.0.0.1 {}", primary.port);
    let start_replica = || {
        let dir = dir.to_str().unwrap();
        rediskv(&["--engine", "fjall", "--dir", dir, "--replicaof", &of_primary])
    };
    let mut replica = start_replica();
    let mut p = primary.client();
    p.cmd(&["SET", "in0", "a"]);
    p.cmd(&["SELECT", "1"]);
    p.cmd(&["SET", "in1", "b"]);
    let library = "#!lua name=lib\nredis.register_function('f', function() return 1 end)";
    let rounds: [&[&[&str]]; 2] =
        [&[&["SWAPDB", "0", "1"]], &[&["SWAPDB", "0", "1"], &["FUNCTION", "LOAD", library]]];
    for (round, commands) in rounds.into_iter().enumerate() {
        wait_caught_up(&primary, &replica);
        for command in commands {
            assert!(!matches!(p.cmd(command), Value::Error(_)), "{command:?}");
        }
        assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Value::Int(1));
        replica.kill();
        replica = start_replica();
        wait_caught_up(&primary, &replica);
        assert_same_data(&primary, &replica);
        let functions = |s: &Server| s.client().cmd(&["FUNCTION", "LIST"]);
        assert_eq!(functions(&replica), functions(&primary));
        assert_eq!(sync_counts(&mut p), ["1".to_string(), (round + 1).to_string()], "no second full sync");
    }
    drop(replica);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A transaction from the primary that writes keys and swaps databases or changes the
/// functions: a replica killed between the batch of its keys and the file of its SWAPDB
/// mapping or function libraries (`REDISKV_CRASH_BEFORE_FILE`, a debug build's kill point)
/// restarts with the whole transaction — the primary's data and functions — and continues
/// after it with `+CONTINUE`.
#[test]
fn a_replica_killed_between_a_transactions_keys_and_its_files_has_all_of_it() {
    let primary = rediskv(&[]);
    let dir = std::env::temp_dir().join(format!("rediskv-test-killed-in-exec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let of_primary = format!("127.0.0.1 {}", primary.port);
    let start_replica = |crash: bool| {
        let env: &[(&str, &str)] = if crash { &[("REDISKV_CRASH_BEFORE_FILE", "1")] } else { &[] };
        rediskv_with_env(
            env,
            &["--engine", "fjall", "--dir", dir.to_str().unwrap(), "--replicaof", &of_primary],
        )
    };
    let mut replica = start_replica(false);
    let mut p = primary.client();
    p.cmd(&["SET", "in0", "a"]);
    p.cmd(&["SELECT", "1"]);
    p.cmd(&["SET", "in1", "b"]);
    let library = "#!lua name=lib\nredis.register_function('f', function() return 1 end)";
    let again = "#!lua name=lib\nredis.register_function('g', function() return 2 end)";
    let rounds: [&[&[&str]]; 2] = [
        &[&["SET", "k1", "x"], &["SWAPDB", "0", "1"], &["INCR", "n"]],
        &[
            &["INCR", "n"],
            &["FUNCTION", "LOAD", library],
            &["SWAPDB", "1", "2"],
            &["FUNCTION", "LOAD", "REPLACE", again],
        ],
    ];
    for (round, commands) in rounds.into_iter().enumerate() {
        wait_caught_up(&primary, &replica);
        replica.kill();
        replica = start_replica(true);
        wait_caught_up(&primary, &replica);
        assert_eq!(p.cmd(&["MULTI"]), Value::Status("OK".into()));
        for command in commands {
            assert_eq!(p.cmd(command), Value::Status("QUEUED".into()), "{command:?}");
        }
        assert!(matches!(p.cmd(&["EXEC"]), Value::Array(_)));
        assert!(!replica.wait_exit().success(), "killed before the files");
        replica = start_replica(false);
        wait_caught_up(&primary, &replica);
        assert_same_data(&primary, &replica);
        let functions = |s: &Server| s.client().cmd(&["FUNCTION", "LIST"]);
        assert_eq!(functions(&replica), functions(&primary));
        let partial = (2 * round + 2).to_string();
        assert_eq!(sync_counts(&mut p), ["1".to_string(), partial], "no second full sync");
    }
    drop(replica);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `client-output-buffer-limit replica`: a replica that stops reading (held by CLIENT
/// PAUSE) has its output grow on the primary (CLIENT LIST's `omem`, INFO's
/// `mem_clients_slaves`) until the hard limit drops its link; it connects again and, its
/// offset gone from the backlog, syncs in full, ending with the primary's data.
#[test]
fn a_replica_past_its_output_limit_is_dropped_and_syncs_again() {
    let primary = rediskv(&[]);
    let mut p = primary.client();
    for (name, value) in [("repl-backlog-size", "16kb"), ("client-output-buffer-limit", "replica 1mb 0 0")] {
        assert_eq!(p.cmd(&["CONFIG", "SET", name, value]), Value::Status("OK".into()));
    }
    let replica = rediskv(&["--replicaof", &format!("127.0.0.1 {}", primary.port)]);
    wait_caught_up(&primary, &replica);
    let mut r = replica.client();
    assert_eq!(r.cmd(&["CLIENT", "PAUSE", "60000", "WRITE"]), Value::Status("OK".into()));
    let value = "v".repeat(128 << 10);
    let (mut most_omem, mut most_in_info) = (0u64, 0u64);
    for i in 0..400 {
        p.cmd(&["SET", &format!("big{i}"), &value]);
        if info_field(&mut p, "replication", "connected_slaves").as_deref() == Some("0") {
            break;
        }
        let list = p.cmd(&["CLIENT", "LIST", "TYPE", "replica"]).text();
        let omem = list.split(' ').find_map(|f| f.strip_prefix("omem=")).and_then(|n| n.parse().ok());
        most_omem = most_omem.max(omem.unwrap_or(0));
        let in_info = info_field(&mut p, "memory", "mem_clients_slaves").and_then(|n| n.parse().ok());
        most_in_info = most_in_info.max(in_info.unwrap_or(0));
    }
    assert_eq!(info_field(&mut p, "replication", "connected_slaves").as_deref(), Some("0"), "not dropped");
    assert!(most_omem > 0, "omem");
    assert!(most_in_info > 0, "mem_clients_slaves");
    assert_eq!(r.cmd(&["CLIENT", "UNPAUSE"]), Value::Status("OK".into()));
    wait_caught_up(&primary, &replica);
    assert_same_data(&primary, &replica);
    assert_eq!(sync_counts(&mut p)[0], "2", "a second full sync");
}

/// A full sync's payload is not the replica's output: a data set whose RDB file is larger
/// than `client-output-buffer-limit replica` still syncs, as with Redis (which sends the
/// file outside the output buffer).
#[test]
fn a_payload_larger_than_the_output_limit_syncs() {
    let primary = rediskv(&[]);
    let mut p = primary.client();
    for (name, value) in [("repl-backlog-size", "16kb"), ("client-output-buffer-limit", "replica 1mb 0 0")] {
        assert_eq!(p.cmd(&["CONFIG", "SET", name, value]), Value::Status("OK".into()));
    }
    // A value LZF cannot shrink (its window is 8 KB, so each copy stays whole): 8 MB of file.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let value: String = (0..128 << 10)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            char::from(b'a' + (seed >> 59) as u8)
        })
        .collect();
    for i in 0..64 {
        p.cmd(&["SET", &format!("big{i}"), &value]);
    }
    let replica = rediskv(&["--replicaof", &format!("127.0.0.1 {}", primary.port)]);
    wait_caught_up(&primary, &replica);
    assert_eq!(sync_counts(&mut p)[0], "1", "one full sync, its link kept");
    assert_eq!(
        info_field(&mut replica.client(), "keyspace", "db0").as_deref(),
        Some("keys=64,expires=0,avg_ttl=0")
    );
}

/// FAILOVER's checks, and a failover to the replica named, as on a redis-server pair: the
/// same replies, then the two servers have swapped roles, the new replica continuing
/// (`+CONTINUE`, no full sync) and holding every write. Between two rediskv-servers, and
/// each way with redis-server (which sends or answers `PSYNC … FAILOVER`).
#[test]
fn failover_swaps_roles_as_redis() {
    let run = |primary: &Server, replica: &Server| -> Vec<Value> {
        let mut p = primary.client();
        let mut r = replica.client();
        let mut replies: Vec<Value> = [
            &["FAILOVER", "ABORT"][..],
            &["FAILOVER", "TIMEOUT", "0"],
            &["FAILOVER", "TIMEOUT", "x"],
            &["FAILOVER", "TO", "127.0.0.1"],
            &["FAILOVER", "TO", "127.0.0.1", "notaport"],
            &["FAILOVER", "TIMEOUT", "10", "TIMEOUT", "10"],
            &["FAILOVER", "NONSENSE"],
            &["FAILOVER"],
        ]
        .iter()
        .map(|c| p.cmd(c))
        .collect();
        let port = replica.port.to_string();
        assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]), Value::Status("OK".into()));
        for i in 0..50 {
            p.cmd(&["SET", &format!("k{i}"), &i.to_string()]);
        }
        p.cmd(&["INCR", "counter"]);
        assert_eq!(p.cmd(&["WAIT", "1", "10000"]), Value::Int(1));
        replies.push(r.cmd(&["FAILOVER"]));
        replies.extend(
            [
                &["FAILOVER", "FORCE"][..],
                &["FAILOVER", "TO", "127.0.0.1", &port, "FORCE"],
                &["FAILOVER", "TO", "127.0.0.1", "1"],
                &["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "60000"],
            ]
            .iter()
            .map(|c| p.cmd(c)),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let role = info_field(&mut p, "replication", "role");
            let state = info_field(&mut p, "replication", "master_failover_state");
            let link = info_field(&mut p, "replication", "master_link_status");
            if role.as_deref() == Some("slave")
                && state.as_deref() == Some("no-failover")
                && link.as_deref() == Some("up")
            {
                break;
            }
            assert!(Instant::now() < deadline, "no failover: {role:?} {state:?} {link:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        replies.push(Value::Status(info_field(&mut r, "replication", "role").unwrap()));
        replies.push(Value::Status(
            info_field(&mut p, "replication", "master_port").unwrap().replace(&port, "<replica>"),
        ));
        replies.push(p.cmd(&["SET", "k", "v"]));
        replies.push(r.cmd(&["INCR", "counter"]));
        replies.push(r.cmd(&["WAIT", "1", "10000"]));
        replies.push(p.cmd(&["GET", "counter"]));
        replies.push(p.cmd(&["GET", "k49"]));
        // The replica continued: it served no full sync.
        replies.push(Value::Status(info_field(&mut r, "stats", "sync_full").unwrap()));
        replies
    };
    let Some(redis_primary) = redis(&[]) else { return };
    let Some(redis_replica) = redis(&[]) else { return };
    let theirs = run(&redis_primary, &redis_replica);
    let ours = || rediskv(&["--threads", "2"]);
    let check = |replies: Vec<Value>, pair: &str| {
        for (i, (a, b)) in replies.iter().zip(&theirs).enumerate() {
            assert_eq!(a, b, "reply {i}, {pair}");
        }
        assert_eq!(replies.len(), theirs.len(), "{pair}");
    };
    check(run(&ours(), &ours()), "rediskv to rediskv");
    let (Some(redis_replica), Some(redis_primary)) = (redis(&[]), redis(&[])) else { return };
    check(run(&ours(), &redis_replica), "rediskv to redis-server");
    check(run(&redis_primary, &ours()), "redis-server to rediskv");
}
