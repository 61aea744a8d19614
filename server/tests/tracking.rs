//! Client-side caching (CLIENT TRACKING) compared with redis-server 7.0: the invalidation
//! pushes a RESP3 client receives in default, NOLOOP, OPTIN and BCAST modes, after FLUSHALL,
//! the RESP2 redirection to a `__redis__:invalidate` subscriber, a served blocked command's
//! own writes, and the errors.

mod common;

use common::{Client, Server, Value, same_as_redis};

/// A RESP3 connection (HELLO 3; its reply, which holds the client id, is not compared).
fn resp3(server: &Server) -> Client {
    let mut c = server.client();
    c.cmd(&["HELLO", "3"]);
    c
}

fn info_field(c: &mut Client, section: &str, field: &str) -> Value {
    let text = match c.cmd(&["INFO", section]) {
        Value::Bulk(Some(b)) | Value::Verbatim(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO {other:?}"),
    };
    let line = text.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap_or("").to_string();
    Value::Status(line)
}

fn tracking_script(server: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let mut a = resp3(server);
    let mut b = server.client();
    // Default mode: each key read is invalidated once, by its next write.
    out.push(a.cmd(&["CLIENT", "TRACKING", "on"]));
    out.push(a.cmd(&["GET", "k1"]));
    out.push(a.cmd(&["MGET", "k2", "k3"]));
    out.push(info_field(&mut b, "clients", "tracking_clients"));
    out.push(info_field(&mut b, "stats", "tracking_total_keys"));
    out.push(b.cmd(&["SET", "k1", "v"]));
    out.push(a.read());
    out.push(b.cmd(&["MSET", "k2", "1", "k3", "2"]));
    out.push(a.read());
    out.push(a.read());
    out.push(b.cmd(&["SET", "k1", "again"]));
    out.push(a.cmd(&["PING"])); // PONG, not a second invalidation of k1
    // The client's own write: the reply first, then the push.
    out.push(a.cmd(&["GET", "k1"]));
    out.push(a.cmd(&["SET", "k1", "mine"]));
    out.push(a.read());
    out.push(a.cmd(&["CLIENT", "GETREDIR"]));
    out.push(a.cmd(&["CLIENT", "TRACKINGINFO"]));
    // NOLOOP: no invalidation for its own writes; others' still come.
    out.push(a.cmd(&["CLIENT", "TRACKING", "on", "NOLOOP"]));
    out.push(a.cmd(&["GET", "k1"]));
    out.push(a.cmd(&["SET", "k1", "w"]));
    out.push(a.cmd(&["GET", "k1"]));
    out.push(b.cmd(&["DEL", "k1"]));
    out.push(a.read());
    out.push(a.cmd(&["CLIENT", "TRACKINGINFO"]));
    // Errors.
    for cmd in [
        &["CLIENT", "TRACKING", "on", "PREFIX", "a"][..],
        &["CLIENT", "TRACKING", "on", "BCAST"],
        &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"],
        &["CLIENT", "TRACKING", "on", "REDIRECT", "999999"],
        &["CLIENT", "TRACKING", "on", "REDIRECT", "x"],
        &["CLIENT", "TRACKING", "maybe"],
        &["CLIENT", "TRACKING", "on", "NOSUCH"],
        &["CLIENT", "TRACKING"],
        &["CLIENT", "CACHING", "yes"],
    ] {
        out.push(a.cmd(cmd));
    }
    // OPTIN: only the read after CLIENT CACHING yes is tracked.
    out.push(a.cmd(&["CLIENT", "TRACKING", "off"]));
    out.push(a.cmd(&["CLIENT", "CACHING", "yes"]));
    out.push(a.cmd(&["CLIENT", "TRACKING", "on", "OPTIN"]));
    out.push(a.cmd(&["CLIENT", "TRACKING", "on", "OPTOUT"]));
    out.push(a.cmd(&["CLIENT", "CACHING", "no"]));
    out.push(a.cmd(&["GET", "k4"]));
    out.push(a.cmd(&["CLIENT", "CACHING", "yes"]));
    out.push(a.cmd(&["CLIENT", "TRACKINGINFO"]));
    out.push(a.cmd(&["GET", "k5"]));
    out.push(a.cmd(&["GET", "k6"]));
    out.push(b.cmd(&["MSET", "k4", "1", "k5", "1", "k6", "1"]));
    out.push(a.read());
    out.push(a.cmd(&["PING"]));
    // BCAST: every write under a prefix, read or not.
    out.push(a.cmd(&["CLIENT", "TRACKING", "off"]));
    out.push(a.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:", "PREFIX", "obj:"]));
    out.push(a.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "us"]));
    out.push(a.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x", "PREFIX", "xy"]));
    out.push(a.cmd(&["CLIENT", "TRACKING", "on"]));
    out.push(info_field(&mut b, "stats", "tracking_total_prefixes"));
    out.push(b.cmd(&["SET", "user:1", "x"]));
    out.push(a.read());
    out.push(b.cmd(&["SET", "other", "x"]));
    out.push(b.cmd(&["HSET", "obj:7", "f", "v"]));
    out.push(a.read());
    out.push(a.cmd(&["CLIENT", "TRACKINGINFO"]));
    // FLUSHALL: everything is invalid.
    out.push(b.cmd(&["FLUSHALL"]));
    out.push(a.read());
    out.push(a.cmd(&["CLIENT", "TRACKING", "off"]));
    // RESP2: invalidations go to a subscriber of __redis__:invalidate.
    let mut sub = server.client();
    let id = match sub.cmd(&["CLIENT", "ID"]) {
        Value::Int(id) => id.to_string(),
        other => panic!("CLIENT ID {other:?}"),
    };
    out.push(sub.cmd(&["SUBSCRIBE", "__redis__:invalidate"]));
    let mut reader = server.client();
    out.push(reader.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &id]));
    out.push(reader.cmd(&["GET", "r1"]));
    out.push(b.cmd(&["SET", "r1", "1"]));
    out.push(sub.read());
    out.push(reader.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &id, "REDIRECT", &id]));
    out.push(b.cmd(&["FLUSHALL"]));
    out.push(sub.read());
    out.push(reader.cmd(&["RESET"]));
    out.push(reader.cmd(&["CLIENT", "TRACKINGINFO"]));
    out.push(info_field(&mut b, "clients", "tracking_clients"));
    // A script that runs a read-only command tracks the keys it declares; one that only
    // writes tracks nothing.
    let mut s3 = resp3(server);
    out.push(s3.cmd(&["CLIENT", "TRACKING", "on"]));
    out.push(s3.cmd(&["EVAL", "redis.call('set', 'key3', 'bar')", "2", "key1", "key2"]));
    out.push(b.cmd(&["MSET", "key2", "1", "key1", "1"]));
    out.push(s3.cmd(&["EVAL", "redis.call('get', 'key3')", "2", "key1", "key2"]));
    out.push(b.cmd(&["MSET", "key2", "2", "key1", "2"]));
    out.push(s3.read());
    out.push(s3.read());
    out.push(s3.cmd(&["PING"]));
    // A key that expires in the background is invalidated too (the writer's NOLOOP does not
    // hide it: the server removed it).
    let mut e = resp3(server);
    out.push(e.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "exp:", "NOLOOP"]));
    out.push(e.cmd(&["SET", "exp:1", "v", "PX", "1"]));
    e.set_read_timeout(std::time::Duration::from_secs(5));
    out.push(e.read());
    // A blocked BLMOVE served by another client's push: its answer, then the invalidation of
    // the list it tracks and wrote.
    let mut m = resp3(server);
    out.push(b.cmd(&["RPUSH", "list2", "a"]));
    out.push(m.cmd(&["CLIENT", "TRACKING", "on"]));
    out.push(m.cmd(&["LRANGE", "list2", "0", "-1"]));
    m.send(&[b"BLMOVE", b"list1", b"list2", b"LEFT", b"LEFT", b"0"]);
    while info_field(&mut b, "clients", "blocked_clients") != Value::Status("blocked_clients:1".into()) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    out.push(b.cmd(&["RPUSH", "list1", "foo"]));
    out.push(m.read());
    out.push(m.read());
    out
}

#[test]
fn tracking_matches_redis() {
    same_as_redis(tracking_script);
}

/// FLUSHDB queued in MULTI sends nothing when queued and one null invalidation after EXEC's
/// answer (no message per key it deleted); FLUSHALL empties the table even with no client
/// tracking; turning tracking off and on forgets a pending CLIENT CACHING.
fn flush_script(server: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let mut a = resp3(server);
    let mut b = server.client();
    out.push(a.cmd(&["CLIENT", "TRACKING", "on"]));
    out.push(a.cmd(&["SET", "a{t}", "1"]));
    out.push(a.cmd(&["GET", "a{t}"]));
    out.push(a.cmd(&["MULTI"]));
    out.push(a.cmd(&["FLUSHDB"]));
    out.push(a.cmd(&["EXEC"]));
    out.push(a.read());
    out.push(a.cmd(&["PING"]));
    // Keys a client read before turning tracking off stay in the table until FLUSHALL.
    out.push(a.cmd(&["GET", "k"]));
    out.push(a.cmd(&["CLIENT", "TRACKING", "off"]));
    out.push(info_field(&mut b, "stats", "tracking_total_keys"));
    out.push(b.cmd(&["FLUSHALL"]));
    out.push(info_field(&mut b, "stats", "tracking_total_keys"));
    out.push(a.cmd(&["CLIENT", "TRACKING", "on", "OPTIN"]));
    out.push(a.cmd(&["CLIENT", "CACHING", "yes"]));
    out.push(a.cmd(&["CLIENT", "TRACKING", "off"]));
    out.push(a.cmd(&["CLIENT", "TRACKING", "on", "OPTOUT"]));
    out.push(a.cmd(&["CLIENT", "TRACKINGINFO"]));
    out
}

#[test]
fn flushes_and_modes_match_redis() {
    same_as_redis(flush_script);
}
