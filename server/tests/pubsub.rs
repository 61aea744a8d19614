//! Pub/sub against a real redis-server 7.0: the same script on both, every reply compared;
//! subscribers spread over event loops; a slow subscriber cut off by its output limit.

mod common;

use common::{Client, Server, Value, redis, rediskv, same_as_redis};

fn bulk(s: &str) -> Value {
    Value::Bulk(Some(s.as_bytes().to_vec()))
}

/// Runs the script on one server and returns every reply each client saw, in order.
fn script(server: &Server) -> Vec<Value> {
    let (mut sub, mut psub, mut shard, mut publisher) =
        (server.client(), server.client(), server.client(), server.client());
    let mut seen = Vec::new();
    let cmd = |c: &mut Client, args: &[&str], replies: usize, seen: &mut Vec<Value>| {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        c.send(&args);
        for _ in 0..replies {
            seen.push(c.read());
        }
    };
    let mut resp3 = server.client();
    let mut ignored = Vec::new();
    cmd(&mut resp3, &["HELLO", "3"], 1, &mut ignored);
    cmd(&mut resp3, &["SUBSCRIBE", "news"], 1, &mut seen);
    cmd(&mut sub, &["SUBSCRIBE", "news", "sport", "news"], 3, &mut seen);
    cmd(&mut psub, &["PSUBSCRIBE", "h?llo", "n*"], 2, &mut seen);
    cmd(&mut sub, &["PSUBSCRIBE", "[a-m]*"], 1, &mut seen);
    cmd(&mut shard, &["SSUBSCRIBE", "orders"], 1, &mut seen);
    // RESP2 subscribed mode: only the pub/sub commands, PING, QUIT and RESET.
    cmd(&mut sub, &["GET", "x"], 1, &mut seen);
    cmd(&mut sub, &["CLIENT", "ID"], 1, &mut seen);
    cmd(&mut sub, &["PING"], 1, &mut seen);
    cmd(&mut sub, &["PING", "hi"], 1, &mut seen);
    cmd(&mut publisher, &["PUBLISH", "news", "n1"], 1, &mut seen);
    seen.push(sub.read());
    seen.push(psub.read());
    seen.push(resp3.read());
    // RESP3 clients may run anything while subscribed.
    cmd(&mut resp3, &["SET", "k", "v"], 1, &mut seen);
    cmd(&mut resp3, &["PING"], 1, &mut seen);
    cmd(&mut resp3, &["UNSUBSCRIBE"], 1, &mut seen);
    cmd(&mut publisher, &["PUBLISH", "hello", "h1"], 1, &mut seen);
    seen.push(psub.read());
    seen.push(sub.read());
    cmd(&mut publisher, &["PUBLISH", "zzz", "nobody"], 1, &mut seen);
    cmd(&mut publisher, &["SPUBLISH", "orders", "o1"], 1, &mut seen);
    seen.push(shard.read());
    cmd(&mut publisher, &["SPUBLISH", "news", "not a shard channel"], 1, &mut seen);
    cmd(&mut publisher, &["PUBSUB", "NUMSUB", "news", "sport", "none"], 1, &mut seen);
    cmd(&mut publisher, &["PUBSUB", "NUMPAT"], 1, &mut seen);
    cmd(&mut publisher, &["PUBSUB", "SHARDNUMSUB", "orders", "news"], 1, &mut seen);
    cmd(&mut publisher, &["PUBSUB", "SHARDCHANNELS"], 1, &mut seen);
    cmd(&mut publisher, &["PUBSUB", "CHANNELS", "s*"], 1, &mut seen);
    cmd(&mut publisher, &["PUBSUB", "NOPE"], 1, &mut seen);
    cmd(&mut publisher, &["PUBSUB", "NUMPAT", "x"], 1, &mut seen);
    cmd(&mut publisher, &["SUBSCRIBE"], 1, &mut seen);
    cmd(&mut publisher, &["PUBLISH", "a"], 1, &mut seen);
    cmd(&mut sub, &["UNSUBSCRIBE", "sport"], 1, &mut seen);
    cmd(&mut sub, &["PUNSUBSCRIBE", "[a-m]*", "never"], 2, &mut seen);
    cmd(&mut sub, &["UNSUBSCRIBE"], 1, &mut seen);
    cmd(&mut sub, &["UNSUBSCRIBE"], 1, &mut seen);
    // Out of subscribed mode: commands work again.
    cmd(&mut sub, &["PING"], 1, &mut seen);
    cmd(&mut shard, &["SUNSUBSCRIBE"], 1, &mut seen);
    cmd(&mut psub, &["RESET"], 1, &mut seen);
    cmd(&mut publisher, &["PUBSUB", "NUMPAT"], 1, &mut seen);
    cmd(&mut publisher, &["PUBLISH", "news", "n2"], 1, &mut seen);
    // RESP3 pushes are not replies: CLIENT REPLY OFF still lets the subscribe confirmations
    // and the messages through (the OK of CLIENT REPLY OFF itself is never sent).
    let mut quiet = server.client();
    cmd(&mut quiet, &["HELLO", "3"], 1, &mut ignored);
    cmd(&mut quiet, &["CLIENT", "REPLY", "OFF"], 0, &mut seen);
    cmd(&mut quiet, &["SET", "k", "v"], 0, &mut seen);
    cmd(&mut quiet, &["SUBSCRIBE", "quiet", "news"], 2, &mut seen);
    cmd(&mut publisher, &["PUBLISH", "quiet", "q1"], 1, &mut seen);
    seen.push(quiet.read());
    cmd(&mut quiet, &["CLIENT", "REPLY", "ON"], 1, &mut seen);
    // In RESP2 as well: subscribe confirmations and messages are pushed past REPLY OFF/SKIP.
    let mut quiet2 = server.client();
    cmd(&mut quiet2, &["CLIENT", "REPLY", "OFF"], 0, &mut seen);
    cmd(&mut quiet2, &["PSUBSCRIBE", "q*"], 1, &mut seen);
    cmd(&mut publisher, &["PUBLISH", "quiet", "q2"], 1, &mut seen);
    seen.push(quiet2.read());
    let mut skip2 = server.client();
    cmd(&mut skip2, &["CLIENT", "REPLY", "SKIP"], 0, &mut seen);
    cmd(&mut skip2, &["SUBSCRIBE", "quiet"], 1, &mut seen);
    cmd(&mut publisher, &["PUBLISH", "quiet", "q3"], 1, &mut seen);
    seen.push(skip2.read());
    seen.push(quiet2.read());
    seen
}

#[test]
fn replies_match_redis() {
    same_as_redis(script);
}

#[test]
fn every_subscriber_on_every_loop_gets_every_message_in_order() {
    let server = rediskv(&["--threads", "3"]);
    let mut subs: Vec<Client> = (0..7).map(|_| server.client()).collect();
    for s in &mut subs {
        assert_eq!(
            s.cmd(&["SUBSCRIBE", "c"]),
            Value::Array(Some(vec![bulk("subscribe"), bulk("c"), Value::Int(1)]))
        );
    }
    let mut publisher = server.client();
    for i in 0..200 {
        assert_eq!(publisher.cmd(&["PUBLISH", "c", &i.to_string()]), Value::Int(7));
    }
    for s in &mut subs {
        for i in 0..200 {
            assert_eq!(s.read(), Value::Array(Some(vec![bulk("message"), bulk("c"), bulk(&i.to_string())])));
        }
    }
}

#[test]
fn a_subscriber_that_does_not_read_is_disconnected_at_its_output_limit() {
    let server = rediskv(&[]);
    let mut admin = server.client();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 256kb 60"]),
        Value::Status("OK".into())
    );
    let mut slow = server.client();
    assert_eq!(
        slow.cmd(&["SUBSCRIBE", "firehose"]),
        Value::Array(Some(vec![bulk("subscribe"), bulk("firehose"), Value::Int(1)]))
    );
    let payload = "x".repeat(64 * 1024);
    // 64 MB published; the slow client reads nothing. It must be dropped once its pending
    // output passes 1 MB (the socket buffers absorb a few MB first).
    let mut receivers = Vec::new();
    for _ in 0..1024 {
        receivers.push(admin.cmd(&["PUBLISH", "firehose", &payload]));
        if receivers.last() == Some(&Value::Int(0)) {
            break;
        }
    }
    assert_eq!(receivers.last(), Some(&Value::Int(0)), "the subscriber was never dropped");
    assert_eq!(
        admin.cmd(&["PUBSUB", "NUMSUB", "firehose"]),
        Value::Array(Some(vec![bulk("firehose"), Value::Int(0)]))
    );
}

/// Keyspace notifications, both from commands and from active expiry, as redis-server
/// sends them: every message of a PSUBSCRIBE `__key*__:*` connection compared.
fn notifications(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut listener = server.client();
    assert_eq!(c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]), Value::Status("OK".into()));
    let mut seen = vec![c.cmd(&["CONFIG", "GET", "notify-keyspace-events"])];
    seen.push(listener.cmd(&["PSUBSCRIBE", "__key*__:*"]));
    for args in [
        &["SET", "s", "1"][..],
        &["INCRBY", "s", "5"],
        &["HSET", "h", "f", "v"],
        &["LPUSH", "l", "a", "b"],
        &["RPOP", "l"],
        &["RPOP", "l"],
        &["EXPIRE", "h", "100"],
        &["RENAME", "s", "t"],
        &["DEL", "t", "h"],
        &["SET", "short", "v", "PX", "50"],
    ] {
        c.cmd(args);
    }
    // One message per event: 2 (keyspace, keyevent) for each of set, incrby, hset, lpush,
    // rpop, rpop+del, expire, rename_from, rename_to, del, del, set, expire, then expired.
    for _ in 0..2 * 15 {
        seen.push(listener.read());
    }
    seen
}

#[test]
fn keyspace_notifications_match_redis() {
    let Some(redis) = redis(&[]) else { return };
    let theirs = notifications(&redis);
    let ours = notifications(&rediskv(&[]));
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "message {i}");
    }
}

/// 50 subscribers that keep up and one that never reads; one publisher sends
/// `PUBSUB_LOAD_MESSAGES` messages (10,000 by default to keep CI short; the 100,000
/// take 60 s in release on 2 cores: `PUBSUB_LOAD_MESSAGES=100000 cargo test --release -p
/// rediskv-server --test pubsub fifty`). Every reader gets all of them in order; the silent
/// one is dropped at its output limit instead of growing the server's memory.
#[test]
fn fifty_subscribers_get_every_message_and_a_silent_one_is_dropped() {
    let server = rediskv(&["--threads", "2"]);
    let mut admin = server.client();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 4mb 2mb 60"]),
        Value::Status("OK".into())
    );
    let messages: usize =
        std::env::var("PUBSUB_LOAD_MESSAGES").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000) / 1000
            * 1000;
    let big = "x".repeat(16_000_000 / (messages / 1000));
    let port = server.port;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let readers: Vec<_> = (0..50)
        .map(|_| {
            let ready = ready_tx.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(port);
                c.cmd(&["SUBSCRIBE", "fast"]);
                ready.send(()).unwrap();
                for i in 0..messages {
                    let Value::Array(Some(m)) = c.read() else { panic!("not a message") };
                    assert_eq!(m[2], bulk(&i.to_string()), "message {i} lost or out of order");
                }
            })
        })
        .collect();
    for _ in 0..50 {
        ready_rx.recv().unwrap();
    }
    let mut silent = server.client();
    silent.cmd(&["SUBSCRIBE", "slow"]);
    let mut publisher = server.client();
    for batch in 0..messages / 1000 {
        let mut buf = Vec::new();
        for i in batch * 1000..(batch + 1) * 1000 {
            let n = i.to_string();
            buf.extend_from_slice(
                format!("*3\r\n$7\r\nPUBLISH\r\n$4\r\nfast\r\n${}\r\n{n}\r\n", n.len()).as_bytes(),
            );
        }
        buf.extend_from_slice(
            format!("*3\r\n$7\r\nPUBLISH\r\n$4\r\nslow\r\n${}\r\n{big}\r\n", big.len()).as_bytes(),
        );
        publisher.send_raw(&buf);
        for _ in 0..1000 {
            assert_eq!(publisher.read(), Value::Int(50));
        }
        publisher.read();
    }
    for r in readers {
        r.join().unwrap();
    }
    // 16 MB went to the silent subscriber: past 4 MB pending (beyond what the sockets hold)
    // it was dropped.
    assert_eq!(admin.cmd(&["PUBLISH", "slow", "after"]), Value::Int(0), "the silent subscriber is gone");
}
