//! The features a command pays for only while someone uses them (keyspace notifications,
//! MONITOR, client tracking, WATCH, blocked clients, the slow log, the latency monitor)
//! each work when turned on while other clients write: a writer thread runs SET and LPUSH
//! the whole time, and each feature is switched on mid-run and must see a write made after.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Value, rediskv};

/// `SET`s and `LPUSH`es to their own keys until `stop`.
fn writer(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut c = common::Client::connect(port);
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let i = n.to_string();
            assert_eq!(c.cmd(&["SET", "load:s", &i]), Value::Status("OK".into()));
            assert!(matches!(c.cmd(&["LPUSH", "load:l", &i]), Value::Int(_)));
            n += 1;
        }
        n
    })
}

#[test]
fn features_switched_on_mid_run_work() {
    let server = rediskv(&["--threads", "2", "--enable-debug-command", "yes"]);
    let stop = Arc::new(AtomicBool::new(false));
    let load = writer(server.port, stop.clone());
    let mut admin = server.client();
    let mut other = server.client();
    std::thread::sleep(Duration::from_millis(50));

    // Keyspace notifications.
    let mut sub = server.client();
    assert_eq!(admin.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KE$"]), Value::Status("OK".into()));
    sub.cmd(&["SUBSCRIBE", "__keyspace@0__:n"]);
    other.cmd(&["SET", "n", "1"]);
    let message = sub.read();
    assert_eq!(message.texts(), ["message", "__keyspace@0__:n", "set"]);
    assert_eq!(admin.cmd(&["CONFIG", "SET", "notify-keyspace-events", ""]), Value::Status("OK".into()));

    // MONITOR.
    let mut monitor = server.client();
    assert_eq!(monitor.cmd(&["MONITOR"]), Value::Status("OK".into()));
    other.cmd(&["GET", "monitored"]);
    let seen = (0..1000).map(|_| monitor.read().text()).find(|line| line.contains("\"monitored\""));
    assert!(seen.as_ref().is_some_and(|l| l.ends_with("\"GET\" \"monitored\"")), "{seen:?}");

    // Client tracking: a read is remembered, another client's write invalidates it.
    let mut tracked = server.client();
    tracked.cmd(&["HELLO", "3"]);
    assert_eq!(tracked.cmd(&["CLIENT", "TRACKING", "ON"]), Value::Status("OK".into()));
    tracked.cmd(&["GET", "t"]);
    other.cmd(&["SET", "t", "1"]);
    let Value::Push(push) = tracked.read() else { panic!("no invalidation push") };
    assert_eq!((push[0].text(), push[1].texts()), ("invalidate".to_string(), vec!["t".to_string()]));

    // WATCH: another client's write aborts the transaction.
    let mut watcher = server.client();
    watcher.cmd(&["WATCH", "w"]);
    other.cmd(&["SET", "w", "1"]);
    watcher.cmd(&["MULTI"]);
    watcher.cmd(&["SET", "w", "2"]);
    assert_eq!(watcher.cmd(&["EXEC"]), Value::Array(None));

    // A blocked client is served by a push made after it blocked.
    let mut blocked = server.client();
    blocked.send(&[b"BLPOP", b"b", b"10"]);
    let waiting = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(5));
        admin.cmd(&["CLIENT", "LIST"]).text().contains("cmd=blpop")
    });
    assert!(waiting, "the client never blocked");
    other.cmd(&["RPUSH", "b", "x"]);
    assert_eq!(blocked.read().texts(), ["b", "x"]);

    // The slow log and the latency monitor, from a threshold of 0.
    assert_eq!(admin.cmd(&["SLOWLOG", "RESET"]), Value::Status("OK".into()));
    admin.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    other.cmd(&["GET", "slow"]);
    let Value::Array(Some(log)) = admin.cmd(&["SLOWLOG", "GET", "128"]) else { panic!("no slow log") };
    let logged = |e: &Value| matches!(e, Value::Array(Some(f)) if f[3].texts() == ["GET", "slow"]);
    assert!(log.iter().any(logged), "{log:?}");
    admin.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    other.cmd(&["DEBUG", "SLEEP", "0.01"]);
    let Value::Array(Some(latest)) = admin.cmd(&["LATENCY", "LATEST"]) else { panic!("no latency events") };
    assert!(
        latest.iter().any(|e| matches!(e, Value::Array(Some(f)) if f[0].text() == "command")),
        "{latest:?}"
    );

    stop.store(true, Ordering::Relaxed);
    assert!(load.join().unwrap() > 0);
}
