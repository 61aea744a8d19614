//! Blocking commands through the server, the same script on a real redis-server 7.0: clients
//! served in the order they blocked, wake-ups across event loops, BLMOVE chains, timeouts,
//! disconnects, CLIENT UNBLOCK, pipelines behind a blocked command, MULTI, RESP3, XREAD and
//! XREADGROUP.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Server, Value, rediskv, same_as_redis};

/// Waits (polling INFO, never guessing with a sleep) until `n` clients are blocked.
fn until_blocked(c: &mut Client, n: usize) {
    let start = Instant::now();
    loop {
        let info = c.cmd(&["INFO", "clients"]).text();
        let blocked: usize = info
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if blocked == n {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{blocked} blocked, waiting for {n}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn send(c: &mut Client, args: &[&str]) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&args);
}

/// The script; returns every reply in the order the script reads them.
fn script(server: &Server) -> Vec<Value> {
    let mut seen = Vec::new();
    let mut admin = server.client();
    let mut clients: Vec<Client> = (0..4).map(|_| server.client()).collect();

    // Three clients block on one list; two pushes serve the first two, in order.
    for (i, c) in clients.iter_mut().take(3).enumerate() {
        send(c, &["BLPOP", "q", "other", "0"]);
        until_blocked(&mut admin, i + 1);
    }
    seen.push(admin.cmd(&["RPUSH", "q", "a", "b"]));
    seen.push(clients[0].read());
    seen.push(clients[1].read());
    until_blocked(&mut admin, 1);
    // The third times out... no: it waits forever; a push to the other key serves it.
    seen.push(admin.cmd(&["LPUSH", "other", "x"]));
    seen.push(clients[2].read());
    until_blocked(&mut admin, 0);

    // A chain: BLMOVE waits on src, BLPOP waits on its destination.
    send(&mut clients[0], &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]);
    until_blocked(&mut admin, 1);
    send(&mut clients[1], &["BLPOP", "dst", "0"]);
    until_blocked(&mut admin, 2);
    seen.push(admin.cmd(&["RPUSH", "src", "moved"]));
    seen.push(clients[0].read());
    seen.push(clients[1].read());
    seen.push(admin.cmd(&["LLEN", "dst"]));

    // Sorted sets.
    send(&mut clients[2], &["BZPOPMIN", "z", "0"]);
    until_blocked(&mut admin, 1);
    seen.push(admin.cmd(&["ZADD", "z", "2", "b", "1", "a"]));
    seen.push(clients[2].read());

    // A timeout, then the pipeline behind the blocked command runs.
    send(&mut clients[3], &["BRPOP", "nothing", "0.2"]);
    send(&mut clients[3], &["PING"]);
    seen.push(clients[3].read());
    seen.push(clients[3].read());

    // A blocked client that goes away does not take the next push.
    {
        let mut gone = server.client();
        send(&mut gone, &["BLPOP", "q2", "0"]);
        until_blocked(&mut admin, 1);
    }
    until_blocked(&mut admin, 0);
    send(&mut clients[0], &["BLPOP", "q2", "0"]);
    until_blocked(&mut admin, 1);
    seen.push(admin.cmd(&["RPUSH", "q2", "v"]));
    seen.push(clients[0].read());

    // CLIENT UNBLOCK, both ways.
    let id = match clients[1].cmd(&["CLIENT", "ID"]) {
        Value::Int(id) => id.to_string(),
        other => panic!("{other:?}"),
    };
    send(&mut clients[1], &["BLPOP", "q3", "0"]);
    until_blocked(&mut admin, 1);
    seen.push(admin.cmd(&["CLIENT", "UNBLOCK", &id]));
    seen.push(clients[1].read());
    send(&mut clients[1], &["BLPOP", "q3", "0"]);
    until_blocked(&mut admin, 1);
    seen.push(admin.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]));
    seen.push(clients[1].read());
    seen.push(admin.cmd(&["CLIENT", "UNBLOCK", &id]));

    // SWAPDB serves a client blocked in either database.
    send(&mut clients[0], &["SELECT", "9"]);
    seen.push(clients[0].read());
    send(&mut clients[0], &["BLPOP", "swapped", "0"]);
    until_blocked(&mut admin, 1);
    seen.push(admin.cmd(&["SELECT", "8"]));
    seen.push(admin.cmd(&["RPUSH", "swapped", "from 8"]));
    seen.push(admin.cmd(&["SWAPDB", "8", "9"]));
    seen.push(clients[0].read());
    seen.push(admin.cmd(&["SELECT", "0"]));

    // Streams: XREAD `$` waits for entries after the last id when it blocked, whatever is
    // deleted or re-added meanwhile; XREADGROUP `>` is woken by XADD, and answers an error
    // when its group or its stream goes away.
    seen.push(admin.cmd(&["XADD", "s", "5-0", "f", "old"]));
    send(&mut clients[3], &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    until_blocked(&mut admin, 1);
    seen.push(admin.cmd(&["DEL", "s"]));
    seen.push(admin.cmd(&["XADD", "s", "3-0", "f", "older"]));
    seen.push(admin.cmd(&["XADD", "s", "6-0", "f", "new"]));
    seen.push(clients[3].read());
    seen.push(admin.cmd(&["XGROUP", "CREATE", "s", "g", "$"]));
    send(&mut clients[1], &["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    until_blocked(&mut admin, 1);
    send(&mut clients[2], &["XREADGROUP", "GROUP", "g", "c2", "BLOCK", "0", "STREAMS", "s", ">"]);
    until_blocked(&mut admin, 2);
    seen.push(admin.cmd(&["XADD", "s", "7-0", "f", "first"]));
    seen.push(clients[1].read());
    seen.push(admin.cmd(&["XADD", "s", "8-0", "f", "second"]));
    seen.push(clients[2].read());
    seen.push(admin.cmd(&["XPENDING", "s", "g"]));
    send(&mut clients[1], &["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    until_blocked(&mut admin, 1);
    seen.push(admin.cmd(&["XGROUP", "DESTROY", "s", "g"]));
    seen.push(clients[1].read());
    seen.push(admin.cmd(&["XGROUP", "CREATE", "s", "g", "$"]));
    send(&mut clients[1], &["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    until_blocked(&mut admin, 1);
    seen.push(admin.cmd(&["DEL", "s"]));
    seen.push(clients[1].read());
    send(&mut clients[3], &["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]);
    seen.push(clients[3].read());

    // Inside MULTI nothing blocks.
    seen.push(clients[2].cmd(&["MULTI"]));
    seen.push(clients[2].cmd(&["BLPOP", "empty", "0"]));
    seen.push(clients[2].cmd(&["EXEC"]));

    // RESP3: the timeout answer is a null.
    let mut resp3 = server.client();
    let _ = resp3.cmd(&["HELLO", "3"]);
    seen.push(resp3.cmd(&["BLPOP", "none", "0.05"]));
    // Bad arguments.
    seen.push(admin.cmd(&["BLPOP", "q", "-1"]));
    seen.push(admin.cmd(&["BLPOP", "q", "abc"]));
    seen
}

#[test]
fn blocking_matches_redis() {
    same_as_redis(script);
}

/// Many producers and consumers on several loops: every pushed value is popped exactly once.
#[test]
fn every_pushed_value_is_popped_once_across_threads() {
    let server = rediskv(&["--threads", "3"]);
    let port = server.port;
    let consumers: Vec<_> = (0..6)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::connect(port);
                let mut got = Vec::new();
                loop {
                    match c.cmd(&["BLPOP", "jobs", "2"]) {
                        Value::Array(Some(kv)) => got.push(kv[1].text()),
                        Value::Array(None) => return got,
                        other => panic!("{other:?}"),
                    }
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..3)
        .map(|p| {
            std::thread::spawn(move || {
                let mut c = Client::connect(port);
                for i in 0..300 {
                    assert!(matches!(c.cmd(&["RPUSH", "jobs", &format!("{p}:{i}")]), Value::Int(_)));
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let mut all: Vec<String> = consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
    all.sort();
    let mut expected: Vec<String> = (0..3).flat_map(|p| (0..300).map(move |i| format!("{p}:{i}"))).collect();
    expected.sort();
    assert_eq!(all, expected);
}

/// A consumer group on several loops: producers XADD while consumers XREADGROUP (blocking)
/// and XACK; every entry is delivered to exactly one consumer, and nothing stays pending.
#[test]
fn every_stream_entry_reaches_one_consumer_across_threads() {
    let server = rediskv(&["--threads", "3"]);
    let port = server.port;
    let mut admin = server.client();
    assert_eq!(
        admin.cmd(&["XGROUP", "CREATE", "events", "workers", "$", "MKSTREAM"]),
        Value::Status("OK".into())
    );
    let consumers: Vec<_> = (0..5)
        .map(|n| {
            std::thread::spawn(move || {
                let mut c = Client::connect(port);
                let name = format!("worker{n}");
                let mut got = Vec::new();
                loop {
                    let read =
                        ["XREADGROUP", "GROUP", "workers", &name, "COUNT", "7", "BLOCK", "1000", "STREAMS"];
                    let reply = c.cmd(&[&read[..], &["events", ">"]].concat());
                    let Value::Array(Some(streams)) = reply else { return got };
                    let Value::Array(Some(stream)) = &streams[0] else { panic!("{streams:?}") };
                    let Value::Array(Some(entries)) = &stream[1] else { panic!("{stream:?}") };
                    for entry in entries {
                        let Value::Array(Some(entry)) = entry else { panic!("{entry:?}") };
                        let Value::Array(Some(fields)) = &entry[1] else { panic!("{entry:?}") };
                        assert_eq!(c.cmd(&["XACK", "events", "workers", &entry[0].text()]), Value::Int(1));
                        got.push(fields[1].text());
                    }
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..3)
        .map(|p| {
            std::thread::spawn(move || {
                let mut c = Client::connect(port);
                for i in 0..200 {
                    assert!(matches!(
                        c.cmd(&["XADD", "events", "*", "job", &format!("{p}:{i}")]),
                        Value::Bulk(_)
                    ));
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let mut all: Vec<String> = consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
    all.sort();
    let mut expected: Vec<String> = (0..3).flat_map(|p| (0..200).map(move |i| format!("{p}:{i}"))).collect();
    expected.sort();
    assert_eq!(all, expected);
    let Value::Array(Some(summary)) = admin.cmd(&["XPENDING", "events", "workers"]) else { panic!() };
    assert_eq!(summary[0], Value::Int(0));
    assert_eq!(admin.cmd(&["XLEN", "events"]), Value::Int(600));
}
