//! One command's path through the server, driven by its table row: the gate's checks in
//! Redis' order (the subcommand and arity before AUTH), the INFO commandstats entry each
//! command is counted under, and the subscribed-mode refusal naming the subcommand,
//! against a real redis-server 7.0.

mod common;

use common::{Client, Server, Value, redis, rediskv};

/// Unauthenticated commands, then AUTH and a few commands; the replies and the
/// `cmdstat_<name>:calls=…,rejected_calls=…,failed_calls=…` entries (times left out).
fn gate_script(server: &Server) -> (Vec<Value>, Vec<String>) {
    let mut c = server.client();
    let mut replies = Vec::new();
    for argv in [
        &["GET"][..],
        &["CLIENT"],
        &["CLIENT", "BOGUS"],
        &["NOPE", "x"],
        &["PING"],
        &["HELLO", "3", "x"],
        &["AUTH", "pw"],
        &["DEBUG", "SLEEP", "0"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "NOPE"],
        &["OBJECT", "ENCODING"],
        &["GET", "a", "b"],
        &["SET", "a", "1"],
        &["INCR", "a"],
        &["HGET", "a", "f"],
    ] {
        replies.push(c.cmd(argv));
    }
    let stats = c.cmd(&["INFO", "commandstats"]).text();
    let mut entries: Vec<String> = stats
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter(|l| !l.starts_with("info:"))
        .map(|l| {
            let (name, fields) = l.split_once(':').unwrap();
            let kept: Vec<&str> = fields
                .split(',')
                .filter(|f| !f.starts_with("usec") && !f.starts_with("usec_per_call"))
                .collect();
            format!("{name}:{}", kept.join(","))
        })
        .collect();
    entries.sort();
    (replies, entries)
}

#[test]
fn the_gate_checks_and_counts_as_redis_does() {
    let args = ["--requirepass", "pw", "--enable-debug-command", "yes"];
    let Some(redis) = redis(&args) else { return };
    let (their_replies, their_stats) = gate_script(&redis);
    let (our_replies, our_stats) = gate_script(&rediskv(&args));
    for (i, (ours, theirs)) in our_replies.iter().zip(&their_replies).enumerate() {
        assert_eq!(ours, theirs, "reply {i}");
    }
    assert_eq!(our_stats, their_stats);
}

/// A RESP2 client that subscribes may run only the subscribed-mode commands; the refusal
/// names the subcommand.
fn subscribed_script(server: &Server) -> Vec<Value> {
    let mut c: Client = server.client();
    let mut replies = vec![c.cmd(&["SUBSCRIBE", "ch"])];
    for argv in
        [&["CLIENT", "ID"][..], &["GET", "x"], &["PING"], &["CONFIG", "GET", "port"], &["UNSUBSCRIBE"]]
    {
        replies.push(c.cmd(argv));
    }
    replies.push(c.cmd(&["CLIENT", "GETNAME"]));
    replies
}

#[test]
fn subscribed_mode_refuses_as_redis_does() {
    let Some(redis) = redis(&[]) else { return };
    let theirs = subscribed_script(&redis);
    let ours = subscribed_script(&rediskv(&[]));
    assert_eq!(ours, theirs);
}
