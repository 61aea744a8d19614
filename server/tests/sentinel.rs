//! Failover with Redis Sentinel: three redis-sentinel 7.0 processes monitor a rediskv-server
//! primary on fjall and its two replicas; a writer through redis-py's Sentinel client
//! (`sentinel_writer.py`) writes, and waits for a replica's acknowledgement, while the
//! primary is killed with SIGKILL. Sentinel promotes a replica and points the other at it,
//! the writer carries on against the new primary, and every write a replica acknowledged
//! is there. Needs redis-sentinel and python3 with redis-py: a loud skip without them, a
//! failure under `CI=true`.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::{Client, Server, Value, rediskv_with_config, sentinel};

const NAME: &str = "mymaster";

/// A field of INFO's `section`.
fn info_field(c: &mut Client, section: &str, field: &str) -> Option<String> {
    let text = c.cmd(&["INFO", section]).text();
    text.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}

/// Polls `check` every 100 ms until it holds; panics with `what` after a minute.
fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The number of entries of `SENTINEL <what> mymaster` whose flags are exactly `flags`.
fn sentinel_entries(c: &mut Client, what: &str, flags: &str) -> usize {
    let Value::Array(Some(entries)) = c.cmd(&["SENTINEL", what, NAME]) else { return 0 };
    entries
        .iter()
        .filter(|e| {
            let fields = e.texts();
            fields.chunks(2).any(|kv| kv[0] == "flags" && kv[1] == flags)
        })
        .count()
}

/// The primary's port as `sentinel` names it.
fn primary_port(sentinel: &Server) -> u16 {
    sentinel.client().cmd(&["SENTINEL", "get-master-addr-by-name", NAME]).texts()[1].parse().unwrap()
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64()
}

/// Every string key of database 0 with its value.
fn strings(c: &mut Client) -> std::collections::BTreeMap<String, String> {
    let keys = c.cmd(&["KEYS", "*"]).texts();
    keys.into_iter().map(|k| (k.clone(), c.cmd(&["GET", &k]).text())).collect()
}

#[test]
fn sentinel_fails_over_to_a_replica() {
    let has_redis_py =
        Command::new("python3").args(["-c", "import redis"]).status().is_ok_and(|s| s.success());
    if !has_redis_py {
        common::missing_tool(&common::test_name(), "python3 -c 'import redis'", "pip install redis");
        return;
    }
    // Config files, which Sentinel has rewritten (CONFIG REWRITE) when it reconfigures one.
    let args = ["--engine", "fjall", "--threads", "2"];
    let mut primary = rediskv_with_config("", &args);
    let of_primary = format!("replicaof 127.0.0.1 {}\n", primary.port);
    let replicas = [0, 1].map(|_| rediskv_with_config(&of_primary, &args));
    let config = format!(
        "sentinel monitor {NAME} 127.0.0.1 {} 2\n\
         sentinel down-after-milliseconds {NAME} 1000\n\
         sentinel failover-timeout {NAME} 5000\n\
         sentinel parallel-syncs {NAME} 2",
        primary.port
    );
    let mut sentinels = Vec::new();
    for _ in 0..3 {
        let Some(s) = sentinel(&config) else { return };
        sentinels.push(s);
    }
    // Each Sentinel found both replicas (INFO replication) and the two other Sentinels
    // (`__sentinel__:hello` on the monitored servers).
    for s in &sentinels {
        let mut c = s.client();
        wait_for("Sentinel to discover the replicas and the other Sentinels", || {
            sentinel_entries(&mut c, "replicas", "slave") == 2
                && sentinel_entries(&mut c, "sentinels", "sentinel") == 2
        });
    }

    let ports: Vec<String> = sentinels.iter().map(|s| s.port.to_string()).collect();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sentinel_writer.py");
    let mut writer = Command::new("python3")
        .args([script, &ports.join(","), NAME, "200"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    let mut lines = BufReader::new(writer.stdout.take().unwrap()).lines();
    let mut acked = Vec::new();
    let (mut failed_at, mut recovered_at, mut killed_at) = (None, None, None);
    for line in lines.by_ref() {
        let line = line.expect("the writer's output");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["ack", i, counter] => acked.push((i.to_string(), counter.parse::<i64>().unwrap())),
            ["failed", at] => failed_at = Some(at.parse::<f64>().unwrap()),
            ["recovered", at] => recovered_at = Some(at.parse::<f64>().unwrap()),
            ["done"] => break,
            _ => panic!("the writer said {line:?}"),
        }
        if killed_at.is_none() && acked.len() == 300 {
            killed_at = Some(unix_now());
            primary.kill();
        }
    }
    assert!(writer.wait().unwrap().success(), "the writer failed");
    let killed_at = killed_at.expect("the primary was killed");
    assert!(failed_at.expect("a write failed") >= killed_at - 0.01, "a write failed before the kill");
    let recovered_at = recovered_at.expect("writes were accepted again");
    println!(
        "Sentinel failover: writes accepted again {:.2} s after the primary was killed ({} writes acknowledged by a replica)",
        recovered_at - killed_at,
        acked.len()
    );

    // Sentinel promoted a replica; the other follows it.
    let new_port = primary_port(&sentinels[0]);
    let (promoted, other) = match replicas.iter().position(|r| r.port == new_port) {
        Some(0) => (&replicas[0], &replicas[1]),
        Some(_) => (&replicas[1], &replicas[0]),
        None => panic!("Sentinel names {new_port}, not a replica"),
    };
    let mut p = promoted.client();
    assert_eq!(info_field(&mut p, "replication", "role").as_deref(), Some("master"));
    for (i, _) in &acked {
        assert_eq!(
            p.cmd(&["GET", &format!("w:{i}")]),
            Value::Bulk(Some(i.clone().into_bytes())),
            "write {i}"
        );
    }
    let counter: i64 = p.cmd(&["GET", "counter"]).text().parse().unwrap();
    assert!(acked.iter().all(|(_, c)| *c <= counter), "an acknowledged INCR is missing");

    let mut o = other.client();
    wait_for("the other replica to follow the new primary", || {
        info_field(&mut o, "replication", "master_port") == Some(new_port.to_string())
            && info_field(&mut o, "replication", "master_link_status").as_deref() == Some("up")
            && info_field(&mut o, "replication", "slave_repl_offset")
                == info_field(&mut p, "replication", "master_repl_offset")
    });
    assert_eq!(strings(&mut o), strings(&mut p));
    // Sentinel rewrote their config files: a restart keeps the new roles.
    let replicaof_lines = |server: &Server| -> Vec<String> {
        let text = std::fs::read_to_string(server.dir().unwrap().join("redis.conf")).unwrap();
        text.lines()
            .filter(|l| l.starts_with("replicaof") || l.starts_with("slaveof"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(replicaof_lines(promoted), Vec::<String>::new());
    assert_eq!(replicaof_lines(other), [format!("replicaof 127.0.0.1 {new_port}")]);
    // It continued from its offset: the new primary served no full sync.
    assert_eq!(info_field(&mut p, "stats", "sync_full").as_deref(), Some("0"));
}
