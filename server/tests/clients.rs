//! CLIENT KILL, timeout, maxclients, maxmemory, DEBUG and the INFO counters on the running server.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Value, rediskv};

fn field(info: &str, name: &str) -> String {
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .to_string()
}

#[test]
fn client_kill_and_list() {
    let server = rediskv(&[]);
    let (mut a, mut b) = (server.client(), server.client());
    let Value::Int(b_id) = b.cmd(&["CLIENT", "ID"]) else { panic!() };
    assert_eq!(b.cmd(&["CLIENT", "SETNAME", "victim"]), Value::Status("OK".into()));
    let list = a.cmd(&["CLIENT", "LIST"]).text();
    assert_eq!(list.lines().count(), 2, "{list}");
    let line = a.cmd(&["CLIENT", "LIST", "ID", &b_id.to_string()]).text();
    assert!(
        line.starts_with(&format!("id={b_id} addr=127.0.0.1:")) && line.contains(" name=victim "),
        "{line}"
    );
    assert!(line.contains(&format!(" laddr=127.0.0.1:{} ", server.port)), "{line}");
    assert_eq!(a.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]), Value::Bulk(Some(Vec::new())));
    let addr = line.split_whitespace().find_map(|f| f.strip_prefix("addr=")).unwrap().to_string();
    assert_eq!(a.cmd(&["CLIENT", "KILL", "ID", &b_id.to_string()]), Value::Int(1));
    assert_eq!(b.try_read(), None, "the killed client is closed");
    assert_eq!(a.cmd(&["CLIENT", "KILL", &addr]), Value::Error("ERR No such client".into()));
    // SKIPME yes (the default) spares the caller; SKIPME no does not.
    assert_eq!(a.cmd(&["CLIENT", "KILL", "LADDR", &format!("127.0.0.1:{}", server.port)]), Value::Int(0));
    a.send(&[b"CLIENT", b"KILL", b"USER", b"default", b"SKIPME", b"no"]);
    assert_eq!(a.read(), Value::Int(1));
    assert_eq!(a.try_read(), None);
}

#[test]
fn idle_clients_time_out() {
    let server = rediskv(&["--timeout", "1"]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["PING"]), Value::Status("PONG".into()));
    // Blocks until the server closes the idle connection (the read timeout is 10 s).
    assert_eq!(c.try_read(), None);
}

#[test]
fn maxclients_and_maxmemory() {
    let server = rediskv(&["--maxclients", "1"]);
    let mut first = server.client();
    let mut second = server.client();
    assert_eq!(second.read(), Value::Error("ERR max number of clients reached".into()));
    // maxmemory counts the store's bytes and the connections' buffers (this request's too).
    let Value::Bulk(Some(info)) = first.cmd(&["INFO", "memory"]) else { panic!("INFO") };
    let used: u64 = String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    let limit = (used + 3000).to_string();
    assert_eq!(first.cmd(&["CONFIG", "SET", "maxmemory", &limit]), Value::Status("OK".into()));
    let value = "v".repeat(2000);
    assert_eq!(first.cmd(&["SET", "k", &value]), Value::Status("OK".into()), "under the limit until written");
    assert_eq!(
        first.cmd(&["SET", "k2", &value]),
        Value::Error("OOM command not allowed when used memory > 'maxmemory'.".into())
    );
    assert_eq!(first.cmd(&["GET", "k2"]), Value::Bulk(None), "reads still work");
    assert_eq!(first.cmd(&["DEL", "k"]), Value::Int(1), "and deletes");
    assert_eq!(first.cmd(&["SET", "k2", "v"]), Value::Status("OK".into()));
}

#[test]
fn info_counts_commands_hits_and_errors() {
    let server = rediskv(&["--enable-debug-command", "yes"]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), Value::Status("OK".into()));
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["GET", "a"]);
    c.cmd(&["GET", "missing"]);
    c.cmd(&["MGET", "a", "missing", "missing2"]);
    c.cmd(&["HSET", "a", "f", "v"]);
    c.cmd(&["NOSUCH"]);
    c.cmd(&["CLIENT", "MADE-UP"]);
    assert_eq!(c.cmd(&["DEBUG", "ERROR", "CUSTOM oops"]), Value::Error("CUSTOM oops".into()));
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0"]), Value::Status("OK".into()));
    assert_eq!(c.cmd(&["DEBUG", "OBJECT", "nokey"]), Value::Error("ERR no such key".into()));
    assert!(c.cmd(&["DEBUG", "OBJECT", "a"]).text().starts_with("Value at:"));
    let info = c.cmd(&["INFO", "stats"]).text();
    // RESETSTAT, SET, GET, GET, MGET, HSET, 4×DEBUG counted; the unknown command and
    // subcommand are not.
    assert_eq!(field(&info, "total_commands_processed"), "10");
    assert_eq!(field(&info, "keyspace_hits"), "2");
    assert_eq!(field(&info, "keyspace_misses"), "3");
    assert_eq!(field(&info, "total_error_replies"), "5");
    let errors = c.cmd(&["INFO", "errorstats"]).text();
    assert_eq!(field(&errors, "errorstat_ERR"), "count=3");
    assert_eq!(field(&errors, "errorstat_WRONGTYPE"), "count=1");
    assert_eq!(field(&errors, "errorstat_CUSTOM"), "count=1");
    let commands = c.cmd(&["INFO", "commandstats"]).text();
    assert!(field(&commands, "cmdstat_get").starts_with("calls=2,"), "{commands}");
    assert!(field(&commands, "cmdstat_hset").ends_with(",rejected_calls=0,failed_calls=1"), "{commands}");
    assert!(field(&commands, "cmdstat_config|resetstat").starts_with("calls=1,"), "{commands}");
    assert!(!commands.contains("made-up"), "{commands}");
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), Value::Status("OK".into()));
    let info = c.cmd(&["INFO", "stats"]).text();
    assert_eq!(field(&info, "total_commands_processed"), "1");
    assert_eq!(field(&info, "keyspace_hits"), "0");
    let keyspace = c.cmd(&["INFO", "keyspace"]).text();
    assert_eq!(field(&keyspace, "db0"), "keys=1,expires=0,avg_ttl=0");
}

#[test]
fn transactions_and_watch_across_connections() {
    let server = rediskv(&[]);
    let (mut a, mut b) = (server.client(), server.client());
    assert_eq!(a.cmd(&["MULTI"]), Value::Status("OK".into()));
    assert_eq!(a.cmd(&["SET", "k", "1"]), Value::Status("QUEUED".into()));
    assert_eq!(a.cmd(&["INCR", "k"]), Value::Status("QUEUED".into()));
    assert_eq!(b.cmd(&["GET", "k"]), Value::Bulk(None), "nothing runs before EXEC");
    assert_eq!(a.cmd(&["EXEC"]), Value::Array(Some(vec![Value::Status("OK".into()), Value::Int(2)])));
    assert_eq!(a.cmd(&["WATCH", "k"]), Value::Status("OK".into()));
    assert_eq!(b.cmd(&["SET", "k", "other"]), Value::Status("OK".into()));
    assert_eq!(a.cmd(&["MULTI"]), Value::Status("OK".into()));
    assert_eq!(a.cmd(&["SET", "k", "mine"]), Value::Status("QUEUED".into()));
    assert_eq!(a.cmd(&["EXEC"]), Value::Array(None), "a watched key changed: EXEC aborts");
    assert_eq!(b.cmd(&["GET", "k"]), Value::Bulk(Some(b"other".to_vec())));
}

#[test]
fn client_pause_holds_writes_until_unpause() {
    let server = rediskv(&[]);
    let (mut admin, mut writer) = (server.client(), server.client());
    let Value::Int(writer_id) = writer.cmd(&["CLIENT", "ID"]) else { panic!() };
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), Value::Status("OK".into()));
    writer.send(&[b"SET", b"k", b"v"]);
    // Wait until the server holds the SET: the writer shows flag b, as in Redis.
    let held = (0..10_000)
        .any(|_| admin.cmd(&["CLIENT", "LIST", "ID", &writer_id.to_string()]).text().contains(" flags=b "));
    assert!(held, "the SET was never held");
    let info = admin.cmd(&["INFO", "clients"]).text();
    assert!(info.contains("blocked_clients:1\r\n"), "a held client counts as blocked, as in Redis: {info}");
    assert_eq!(admin.cmd(&["GET", "k"]), Value::Bulk(None), "reads go on, the write waits");
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), Value::Status("OK".into()));
    assert_eq!(writer.read(), Value::Status("OK".into()));
    assert_eq!(admin.cmd(&["GET", "k"]), Value::Bulk(Some(b"v".to_vec())));
}

#[test]
fn config_file_as_first_argument_and_rewrite() {
    let dir = std::env::temp_dir().join(format!("rediskv-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("redis.conf");
    std::fs::write(&file, "# mine\ntimeout 7\nproto-max-bulk-len 2mb\n").unwrap();
    let server = common::rediskv_with_file(file.to_str().unwrap());
    let mut c = server.client();
    assert_eq!(c.cmd(&["CONFIG", "GET", "timeout"]).texts(), ["timeout", "7"]);
    assert_eq!(c.cmd(&["CONFIG", "GET", "proto-max-bulk-len"]).texts(), ["proto-max-bulk-len", "2097152"]);
    let info = c.cmd(&["INFO", "server"]).text();
    assert!(field(&info, "config_file").ends_with("redis.conf"), "{info}");
    assert_eq!(c.cmd(&["CONFIG", "SET", "timeout", "9", "maxmemory", "1gb"]), Value::Status("OK".into()));
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), Value::Status("OK".into()));
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        text,
        format!(
            "# mine\ntimeout 9\nproto-max-bulk-len 2097152\nmaxmemory 1073741824\nport {}\n",
            server.port
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn client_pause_write_holds_what_may_replicate() {
    let server = rediskv(&[]);
    let (mut admin, mut held) = (server.client(), server.client());
    let Value::Int(held_id) = held.cmd(&["CLIENT", "ID"]) else { panic!() };
    assert_eq!(admin.cmd(&["PFADD", "hll", "a"]), Value::Int(1));
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), Value::Status("OK".into()));
    // PFCOUNT may write (it caches the cardinality): held, as in Redis.
    held.send(&[b"PFCOUNT", b"hll"]);
    let waits = (0..10_000)
        .any(|_| admin.cmd(&["CLIENT", "LIST", "ID", &held_id.to_string()]).text().contains(" flags=b "));
    assert!(waits, "PFCOUNT was not held");
    // A read-only script is not.
    assert_eq!(admin.cmd(&["EVAL_RO", "return redis.call('get', 'nosuch')", "0"]), Value::Bulk(None));
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), Value::Status("OK".into()));
    assert_eq!(held.read(), Value::Int(1));
}

#[test]
fn client_pause_write_lets_read_only_scripts_through() {
    let server = rediskv(&[]);
    let (mut admin, mut c) = (server.client(), server.client());
    let lib = "#!lua name=ro\nredis.register_function{function_name='ro', callback=function() return 'hello' end, flags={'no-writes'}}";
    assert_eq!(admin.cmd(&["FUNCTION", "LOAD", lib]), Value::Bulk(Some(b"ro".to_vec())));
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), Value::Status("OK".into()));
    assert_eq!(
        c.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 'ro'", "0"]),
        Value::Bulk(Some(b"ro".to_vec()))
    );
    assert_eq!(c.cmd(&["FCALL", "ro", "0"]), Value::Bulk(Some(b"hello".to_vec())));
    assert_eq!(c.cmd(&["EVAL_RO", "return 1", "0"]), Value::Int(1));
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), Value::Status("OK".into()));
}

#[test]
fn client_pause_write_and_scripts_queued_in_a_transaction() {
    let server = rediskv(&[]);
    let (mut admin, mut ro, mut rw) = (server.client(), server.client(), server.client());
    let Value::Int(rw_id) = rw.cmd(&["CLIENT", "ID"]) else { panic!() };
    let queued = Value::Status("QUEUED".into());
    assert_eq!(rw.cmd(&["MULTI"]), Value::Status("OK".into()));
    assert_eq!(rw.cmd(&["EVAL", "#!lua\nreturn 12", "0"]), queued);
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), Value::Status("OK".into()));
    // Read-only scripts in a transaction run, their replies in EXEC's.
    assert_eq!(ro.cmd(&["MULTI"]), Value::Status("OK".into()));
    assert_eq!(ro.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 12", "0"]), queued);
    assert_eq!(ro.cmd(&["EVAL_RO", "return 13", "0"]), queued);
    assert_eq!(ro.cmd(&["EXEC"]), Value::Array(Some(vec![Value::Int(12), Value::Int(13)])));
    // A script that may write holds its EXEC until the pause ends.
    rw.send(&[b"EXEC"]);
    let held = (0..10_000)
        .any(|_| admin.cmd(&["CLIENT", "LIST", "ID", &rw_id.to_string()]).text().contains(" flags=b "));
    assert!(held, "the EXEC was never held");
    // A wrong number of arguments is answered during the pause.
    assert_eq!(
        ro.cmd(&["SET", "foo"]),
        Value::Error("ERR wrong number of arguments for 'set' command".into())
    );
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), Value::Status("OK".into()));
    assert_eq!(rw.read(), Value::Array(Some(vec![Value::Int(12)])));
    assert_eq!(rw.cmd(&["PING"]), Value::Status("PONG".into()));
}

#[test]
fn client_pause_holds_expiry() {
    let server = rediskv(&[]);
    let mut c = server.client();
    let expired = |c: &mut common::Client| field(&c.cmd(&["INFO", "stats"]).text(), "expired_keys");
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "foo", "bar", "PX", "10"]);
    c.cmd(&["SET", "bar", "foo", "PX", "10"]);
    c.cmd(&["CLIENT", "PAUSE", "50000", "WRITE"]);
    c.cmd(&["EXEC"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Past their TTL the keys are gone for commands, but neither the expire cycle nor a
    // lookup deletes them during the pause (Redis 7.0).
    assert_eq!(c.cmd(&["GET", "foo"]), Value::Bulk(None));
    assert_eq!(c.cmd(&["GET", "bar"]), Value::Bulk(None));
    assert_eq!(expired(&mut c), "0");
    assert_eq!(c.cmd(&["CLIENT", "UNPAUSE"]), Value::Status("OK".into()));
    // After it, a lookup deletes an expired key and counts it, as Redis' lazy expiry.
    c.cmd(&["GET", "foo"]);
    c.cmd(&["GET", "bar"]);
    assert_eq!(expired(&mut c), "2");
}

#[test]
fn lazyfree_counts_big_collections_left_for_the_collector() {
    let server = rediskv(&[]);
    let mut c = server.client();
    let members = |n: usize| (0..n).map(|i| format!("m{i}")).collect::<Vec<_>>();
    let sadd = |c: &mut common::Client, key: &str, n: usize| {
        let mut argv = vec!["SADD".to_string(), key.to_string()];
        argv.extend(members(n));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        assert_eq!(c.cmd(&argv), Value::Int(n as i64));
    };
    sadd(&mut c, "big", 100);
    sadd(&mut c, "small", 10);
    c.cmd(&["SET", "s", "v"]);
    // As Redis 7.0 (the 100 members in a hash table, over its lazyfree threshold of 64):
    // one lazily freed object, once the collector has reclaimed its records.
    assert_eq!(c.cmd(&["UNLINK", "big", "small", "s"]), Value::Int(3));
    let memory = |c: &mut common::Client| c.cmd(&["INFO", "memory"]).text();
    let done = (0..200).any(|_| {
        let info = memory(&mut c);
        std::thread::sleep(std::time::Duration::from_millis(50));
        field(&info, "lazyfree_pending_objects") == "0"
    });
    assert!(done, "{}", memory(&mut c));
    assert_eq!(field(&memory(&mut c), "lazyfreed_objects"), "1");
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), Value::Status("OK".into()));
    assert_eq!(field(&memory(&mut c), "lazyfreed_objects"), "0");
}

#[test]
fn rdb_changes_since_last_save_counts_changes_as_redis() {
    let server = rediskv(&[]);
    let mut c = server.client();
    let changes = |c: &mut common::Client| {
        field(&c.cmd(&["INFO", "persistence"]).text(), "rdb_changes_since_last_save")
    };
    // Figures of redis-server 7.0 for the same commands.
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["INCR", "a"]);
    c.cmd(&["MSET", "x", "1", "y", "2"]);
    c.cmd(&["DEL", "x", "y", "nosuch"]);
    c.cmd(&["RENAME", "a", "b"]);
    c.cmd(&["EXPIRE", "b", "100"]);
    c.cmd(&["SETBIT", "bits", "3", "0"]);
    assert_eq!(changes(&mut c), "9");
    // SETBIT and BITFIELD that change nothing count nothing.
    c.cmd(&["SETBIT", "bits", "3", "0"]);
    c.cmd(&["BITFIELD", "bits", "SET", "i5", "0", "0"]);
    c.cmd(&["GET", "b"]);
    assert_eq!(changes(&mut c), "9");
    c.cmd(&["BITFIELD", "bits", "SET", "i5", "0", "1"]);
    assert_eq!(changes(&mut c), "10");
    assert_eq!(c.cmd(&["SAVE"]), Value::Status("OK".into()));
    assert_eq!(changes(&mut c), "0");
}

/// Each event loop counts changes, its clients' bytes and the bytes it reads and writes in
/// its own lane, the other threads in a shared one: INFO and MEMORY STATS see their sums,
/// whichever loop serves the asking client.
#[test]
fn changes_and_client_bytes_are_summed_over_event_loops() {
    const WRITERS: usize = 6;
    const WRITES: usize = 200;
    let server = rediskv(&["--threads", "3"]);
    let mut c = server.client();
    let changes = |c: &mut common::Client| {
        field(&c.cmd(&["INFO", "persistence"]).text(), "rdb_changes_since_last_save")
            .parse::<usize>()
            .unwrap()
    };
    let client_bytes = |c: &mut common::Client| {
        let stats = pairs(c.cmd(&["MEMORY", "STATS"]));
        let Some((_, Value::Int(n))) = stats.into_iter().find(|(k, _)| k == "clients.normal") else {
            panic!("no clients.normal")
        };
        n
    };
    let alone = client_bytes(&mut c);
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), Value::Status("OK".into()));
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let mut writer = server.client();
            s.spawn(move || {
                for i in 0..WRITES {
                    assert_eq!(writer.cmd(&["SET", &format!("k{w}:{i}"), "v"]), Value::Status("OK".into()));
                }
            });
        }
    });
    // The bytes read and written, counted in the lanes of the loops that did it: the
    // writers' requests and this INFO's; the writers' replies and RESETSTAT's.
    let resp = |args: &[&str]| {
        let head = format!("*{}\r\n", args.len()).len();
        head + args.iter().map(|a| format!("${}\r\n", a.len()).len() + a.len() + 2).sum::<usize>()
    };
    let set_bytes: usize =
        (0..WRITERS).flat_map(|w| (0..WRITES).map(move |i| resp(&["SET", &format!("k{w}:{i}"), "v"]))).sum();
    // A loop adds the bytes of a reply once it is written: a writer may have read its last
    // reply before its loop counted it. Each INFO asked meanwhile adds its request and then
    // its reply.
    let replies = (WRITERS * WRITES + 1) * "+OK\r\n".len();
    let (mut infos, mut info_replies) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = c.cmd(&["INFO", "stats"]).text();
        infos += 1;
        let net = |name| field(&stats, name).parse::<usize>().unwrap();
        let output = net("total_net_output_bytes");
        assert!(output <= replies + info_replies, "{output} bytes written, {} sent", replies + info_replies);
        if output == replies + info_replies {
            assert_eq!(net("total_net_input_bytes"), set_bytes + infos * resp(&["INFO", "stats"]));
            break;
        }
        assert!(Instant::now() < deadline, "{output} bytes written, {} sent", replies + info_replies);
        info_replies += format!("${}\r\n", stats.len()).len() + stats.len() + 2;
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(changes(&mut c), WRITERS * WRITES);
    // A script runs on its own thread: the shared lane.
    assert_eq!(c.cmd(&["EVAL", "redis.call('SET', 's', '1') return 1", "0"]), Value::Int(1));
    assert_eq!(changes(&mut c), WRITERS * WRITES + 1);
    assert_eq!(c.cmd(&["SAVE"]), Value::Status("OK".into()));
    assert_eq!(changes(&mut c), 0);
    c.cmd(&["DEL", "k0:0", "k1:0"]);
    assert_eq!(changes(&mut c), 2);
    // The writers' connections, closed on their loops, leave no bytes behind.
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.cmd(&["CLIENT", "LIST"]).text().lines().count() > 1 {
        assert!(Instant::now() < deadline, "the writers' connections did not close");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(client_bytes(&mut c), alone);
    let others: Vec<_> = (0..WRITERS)
        .map(|_| {
            let mut other = server.client();
            assert_eq!(other.cmd(&["PING"]), Value::Status("PONG".into()));
            other
        })
        .collect();
    assert!(client_bytes(&mut c) > alone, "open clients count");
    drop(others);
}

/// The fields of a RESP2 map as (key, value) pairs.
fn pairs(v: Value) -> Vec<(String, Value)> {
    let Value::Array(Some(items)) = v else { panic!("not a map: {v:?}") };
    let key = |k: &Value| if let Value::Int(n) = k { n.to_string() } else { k.text() };
    items.chunks(2).map(|kv| (key(&kv[0]), kv[1].clone())).collect()
}

#[test]
fn latency_histograms_follow_the_commands_run() {
    let server = rediskv(&[]);
    let mut c = server.client();
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["SET", "a", "b"]);
    c.cmd(&["SET", "c", "d"]);
    c.cmd(&["CLIENT", "ID"]);
    c.cmd(&["CLIENT", "LIST"]);
    let all = pairs(c.cmd(&["LATENCY", "HISTOGRAM"]));
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["client|id", "client|list", "config|resetstat", "set"]);
    let set = pairs(all[3].1.clone());
    assert_eq!(set[0], ("calls".into(), Value::Int(2)));
    // Cumulative counts per bucket, ending at the number of calls.
    let buckets = pairs(set[1].1.clone());
    assert_eq!(set[1].0, "histogram_usec");
    assert_eq!(buckets.last().map(|(_, n)| n.clone()), Some(Value::Int(2)));
    // A container names its subcommands; unknown names are skipped.
    let client = pairs(c.cmd(&["LATENCY", "HISTOGRAM", "client", "blabla"]));
    assert_eq!(client.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["client|id", "client|list"]);
    assert_eq!(pairs(c.cmd(&["LATENCY", "HISTOGRAM", "blabla"])), vec![]);
    let info = c.cmd(&["INFO", "latencystats"]).text();
    assert!(info.contains("latency_percentiles_usec_set:p50="), "{info}");
    // latency-tracking no: calls still counted, no histogram grows.
    c.cmd(&["CONFIG", "SET", "latency-tracking", "no"]);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["SET", "a", "b"]);
    assert_eq!(pairs(c.cmd(&["LATENCY", "HISTOGRAM"])), vec![]);
}

#[test]
fn latency_monitor_records_slow_commands() {
    let server = rediskv(&["--enable-debug-command", "yes"]);
    let mut c = server.client();
    assert!(c.cmd(&["LATENCY", "DOCTOR"]).text().starts_with("I'm sorry, Dave, I can't do that."));
    // Off by default: a slow command leaves nothing.
    c.cmd(&["DEBUG", "SLEEP", "0.12"]);
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), Value::Array(Some(vec![])));
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "100"]);
    c.cmd(&["DEBUG", "SLEEP", "0.05"]);
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), Value::Array(Some(vec![])), "under the threshold");
    c.cmd(&["DEBUG", "SLEEP", "0.15"]);
    let Value::Array(Some(latest)) = c.cmd(&["LATENCY", "LATEST"]) else { panic!() };
    let Value::Array(Some(event)) = &latest[0] else { panic!("{latest:?}") };
    assert_eq!(event[0].text(), "command");
    let (Value::Int(time), Value::Int(ms), Value::Int(max)) = (&event[1], &event[2], &event[3]) else {
        panic!()
    };
    assert!((150..1500).contains(ms) && max == ms, "{event:?}");
    let Value::Array(Some(history)) = c.cmd(&["LATENCY", "HISTORY", "command"]) else { panic!() };
    assert_eq!(history, vec![Value::Array(Some(vec![Value::Int(*time), Value::Int(*ms)]))]);
    assert!(
        c.cmd(&["LATENCY", "GRAPH", "command"])
            .text()
            .starts_with(&format!("command - high {ms} ms, low {ms} ms"))
    );
    let doctor = c.cmd(&["LATENCY", "DOCTOR"]).text();
    assert!(doctor.contains("1. command: 1 latency spikes"), "{doctor}");
    assert!(doctor.contains("Check your Slow Log"), "{doctor}");
    assert_eq!(c.cmd(&["LATENCY", "RESET", "nope"]), Value::Int(0));
    assert_eq!(c.cmd(&["LATENCY", "RESET"]), Value::Int(1));
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), Value::Array(Some(vec![])));
}

#[test]
fn latency_errors_and_reports_are_redis_words() {
    common::same_as_redis(|server| {
        let mut c = server.client();
        let mut replies = Vec::new();
        for args in [
            &["LATENCY", "DOCTOR"][..],
            &["CONFIG", "SET", "latency-monitor-threshold", "1000"],
            &["LATENCY", "DOCTOR"],
            &["LATENCY", "LATEST"],
            &["LATENCY", "HISTORY", "command"],
            &["LATENCY", "GRAPH", "command"],
            &["LATENCY", "RESET", "command", "other"],
            &["LATENCY", "HELP"],
            &["LATENCY", "HELP", "x"],
            &["LATENCY", "LATEST", "x"],
            &["LATENCY", "NOPE"],
            &["LATENCY"],
        ] {
            replies.push(c.cmd(args));
        }
        replies
    });
}

/// MEMORY STATS names Redis' fields in Redis' order (the figures are this server's); DOCTOR
/// on a small instance, MALLOC-STATS without jemalloc, PURGE and the errors are Redis' words.
#[test]
fn memory_stats_and_doctor_speak_as_redis() {
    common::same_as_redis(|server| {
        let mut c = server.client();
        c.cmd(&["SET", "a", "b"]);
        let Value::Array(Some(stats)) = c.cmd(&["MEMORY", "STATS"]) else { panic!("MEMORY STATS") };
        let names: Vec<Value> = stats.iter().step_by(2).cloned().collect();
        let at = stats.iter().position(|v| matches!(v, Value::Bulk(Some(b)) if b == b"db.0")).expect("db.0");
        let db0 = match &stats[at + 1] {
            Value::Array(Some(fields)) => fields.iter().step_by(2).cloned().collect(),
            other => panic!("{other:?}"),
        };
        let mut replies = vec![Value::Array(Some(names)), Value::Array(Some(db0))];
        for args in [
            &["MEMORY", "DOCTOR"][..],
            &["MEMORY", "PURGE"],
            &["MEMORY", "STATS", "x"],
            &["MEMORY", "DOCTOR", "x"],
            &["MEMORY", "NOPE"],
        ] {
            replies.push(c.cmd(args));
        }
        replies
    });
}

/// CONFIG SET port moves the listener (connections already open stay); a port in use is
/// refused with Redis' error and nothing of the CONFIG SET is applied.
#[test]
fn config_set_port_moves_the_listener() {
    let server = rediskv(&[]);
    let mut c = server.client();
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    assert_eq!(c.cmd(&["CONFIG", "SET", "port", &free.to_string()]), Value::Status("OK".into()));
    assert_eq!(c.cmd(&["CONFIG", "GET", "port"]).texts(), ["port", &free.to_string()]);
    let mut moved = common::Client::connect(free);
    assert_eq!(moved.cmd(&["PING"]), Value::Status("PONG".into()));
    assert_eq!(c.cmd(&["PING"]), Value::Status("PONG".into()), "open connections stay");
    // The same value again changes nothing.
    assert_eq!(c.cmd(&["CONFIG", "SET", "port", &free.to_string()]), Value::Status("OK".into()));

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().port().to_string();
    let before = c.cmd(&["CONFIG", "GET", "maxmemory"]);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "10000001", "port", &busy]),
        Value::Error(
            "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."
                .into()
        )
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "maxmemory"]), before, "rolled back");
    assert_eq!(c.cmd(&["CONFIG", "GET", "port"]).texts(), ["port", &free.to_string()]);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "bind", "203.0.113.7"]),
        Value::Error(
            "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses."
                .into()
        )
    );
    assert_eq!(common::Client::connect(free).cmd(&["PING"]), Value::Status("PONG".into()));
}

/// INFO keyspace and DBSIZE from the engine's counts: first counted inside a script (which
/// holds the whole keyspace), kept through SWAPDB, and recounted after the admin's FLUSHALL.
#[test]
fn keyspace_counts() {
    let server = rediskv(&[]);
    let mut c = server.client();
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["SET", "b", "1", "EX", "100"]);
    let script = c.cmd(&["EVAL", "return redis.call('INFO', 'keyspace')", "0"]).text();
    assert!(field(&script, "db0").starts_with("keys=2,expires=1,avg_ttl="), "{script}");
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Int(2));
    c.cmd(&["SELECT", "1"]);
    c.cmd(&["RPUSH", "l", "x"]);
    c.cmd(&["SWAPDB", "0", "1"]);
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Int(2));
    let keyspace = c.cmd(&["INFO", "keyspace"]).text();
    assert_eq!(field(&keyspace, "db0"), "keys=1,expires=0,avg_ttl=0");
    assert!(field(&keyspace, "db1").starts_with("keys=2,expires=1,avg_ttl="), "{keyspace}");
    assert_eq!(c.cmd(&["FLUSHALL"]), Value::Status("OK".into()));
    assert_eq!(c.cmd(&["INFO", "keyspace"]).text().lines().count(), 1);
    c.cmd(&["SET", "c", "1"]);
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Int(1));
    assert_eq!(field(&c.cmd(&["INFO", "keyspace"]).text(), "db1"), "keys=1,expires=0,avg_ttl=0");
}

#[test]
fn cluster_commands_answer_as_redis_without_cluster_mode() {
    common::same_as_redis(|server| {
        let mut c = server.client();
        [
            &["CLUSTER", "INFO"][..],
            &["CLUSTER", "HELP"],
            &["CLUSTER", "NOPE"],
            &["CLUSTER"],
            &["ASKING"],
            &["READONLY"],
            &["READWRITE"],
            &["COMMAND", "INFO", "CLUSTER|RESET", "ASKING"],
            // Not COMMAND INFO MIGRATE: the table has no command tips (Redis gives MIGRATE's).
            &["COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "10", "KEYS", "a", "b"],
            &["COMMAND", "LIST", "FILTERBY", "PATTERN", "cl*help"],
            &["EVAL", "return redis.call('cluster', 'reset', 'hard')", "0"],
        ]
        .iter()
        .map(|args| match c.cmd(args) {
            // COMMAND LIST's order is Redis' hash table's.
            Value::Array(Some(mut names)) if args[0] == "COMMAND" && args[1] == "LIST" => {
                names.sort_by_key(Value::text);
                Value::Array(Some(names))
            }
            reply => reply,
        })
        .collect()
    });
}

/// `qbuf` + `qbuf-free` of the client named `name` in CLIENT LIST: its query buffer's size.
fn query_buffer(c: &mut Client, name: &str) -> usize {
    let list = c.cmd(&["CLIENT", "LIST"]).text();
    let line = list.lines().find(|l| l.contains(&format!(" name={name} "))).expect("client listed");
    let get = |key: &str| -> usize {
        let at = line.find(&format!(" {key}=")).expect(key) + key.len() + 2;
        line[at..].split(' ').next().unwrap().parse().unwrap()
    };
    get("qbuf") + get("qbuf-free")
}

/// A big request grows the query buffer; the loop's tick shrinks it to its recent peak while
/// the client keeps sending small ones, and gives its room back once the client is idle
/// (the shape of Redis' unit/querybuf).
#[test]
fn the_query_buffer_grows_shrinks_and_is_given_back() {
    let server = rediskv(&[]);
    let mut watcher = server.client();
    let mut c = server.client();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "q"]), Value::Status("OK".into()));
    let value = "A".repeat(400_000);
    assert_eq!(c.cmd(&["SET", "x", &value]), Value::Status("OK".into()));
    let big = query_buffer(&mut watcher, "q");
    assert!(big > 32 * 1024, "{big}");
    let deadline = Instant::now() + Duration::from_secs(5);
    let shrunk = loop {
        assert_eq!(c.cmd(&["SET", "x", &"A".repeat(100)]), Value::Status("OK".into()));
        let now = query_buffer(&mut watcher, "q");
        if now < 32 * 1024 {
            break now;
        }
        assert!(Instant::now() < deadline, "never shrank from {big}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(shrunk > 0, "room for the last request is kept while the client is busy");
    // Room of more than 4 KiB is given back once the client is idle.
    assert_eq!(c.cmd(&["SET", "x", &"A".repeat(10_000)]), Value::Status("OK".into()));
    assert!(query_buffer(&mut watcher, "q") >= 10_000);
    let deadline = Instant::now() + Duration::from_secs(5);
    while query_buffer(&mut watcher, "q") != 0 {
        assert!(Instant::now() < deadline, "an idle client kept its query buffer");
        std::thread::sleep(Duration::from_millis(50));
    }
}
