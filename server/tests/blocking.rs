//! Blocking commands through the server, the same script on a real redis-server 7.0: clients
//! served in the order they blocked, wake-ups across event loops, BLMOVE chains, timeouts,
//! disconnects, CLIENT UNBLOCK, pipelines behind a blocked command, MULTI, RESP3.

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
