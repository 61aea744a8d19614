//! Blocking commands in the library: a command that cannot be served leaves a `Block` in the
//! session; a re-run (`Engine::retry`) after another session touched one of its keys serves
//! it. Each scenario runs on a real redis-server 7.0 too (two connections: one blocks, the
//! other writes), and the replies are compared in RESP2 and RESP3.

#[path = "differential/client.rs"]
#[allow(dead_code)]
mod client;

use std::time::Duration;

use bytes::Bytes;
use client::{Client, RedisServer};
use rediskv::MemoryBackend;
use rediskv::{Engine, Protocol, Reply, Session};

fn server() -> Option<RedisServer> {
    RedisServer::start_or_skip("blocking test")
}

fn argv(line: &str) -> Vec<Bytes> {
    line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
}

fn connect(redis: &RedisServer, protocol: Protocol) -> Client {
    let mut c = redis.connect().unwrap();
    if protocol == Protocol::Resp3 {
        c.hello3().unwrap();
    }
    c
}

/// One blocked client (`waiter`, running `blocking`) and the commands another client runs
/// meanwhile (`writes`), on the engine: the waiter is re-run after every write that touched
/// one of its keys, as a server would. Returns the waiter's answer (`None`: still blocked)
/// and every writer reply, as clients of `protocol` read them.
fn engine_scenario(
    setup: &[&str],
    blocking: &str,
    writes: &[&str],
    protocol: Protocol,
) -> (Option<Reply>, Vec<Reply>) {
    let engine = Engine::new(MemoryBackend::new());
    let (mut waiter, mut writer) = (engine.session(), engine.session());
    for line in setup {
        engine.execute(&mut writer, &argv(line));
    }
    let (db, blocking) = waiter_db(blocking);
    engine.execute(&mut waiter, &argv(&format!("SELECT {db}")));
    let blocked = argv(blocking);
    let first = engine.execute(&mut waiter, &blocked);
    let Some(mut block) = waiter.take_block() else {
        return (Some(client::fold(&first, protocol)), Vec::new());
    };
    let mut answer = None;
    let mut replies = Vec::new();
    for line in writes {
        replies.push(client::fold(&engine.execute(&mut writer, &argv(line)), protocol));
        let wakes = writer
            .touched()
            .iter()
            .filter_map(|t| engine.touched_key(t))
            .any(|(db, key)| db == block.db && block.keys.contains(&key))
            || writer.swapped_dbs().iter().any(|&(a, b)| block.db == a || block.db == b);
        if answer.is_none() && wakes {
            let reply = engine.retry(&mut waiter, &blocked);
            match waiter.take_block() {
                Some(again) => block = again,
                None => answer = Some(client::fold(&reply, protocol)),
            }
        }
    }
    (answer, replies)
}

/// The same scenario on redis-server: the waiter's answer read after the writes, or `None`
/// when nothing arrived within 300 ms (still blocked).
fn redis_scenario(
    redis: &RedisServer,
    setup: &[&str],
    blocking: &str,
    writes: &[&str],
    protocol: Protocol,
) -> (Option<Reply>, Vec<Reply>) {
    let mut writer = connect(redis, protocol);
    assert_eq!(writer.call(&["FLUSHALL"]).unwrap(), Reply::OK);
    for line in setup {
        writer.call(&line.split(' ').collect::<Vec<_>>()).unwrap();
    }
    let mut waiter = connect(redis, protocol);
    let (db, blocking) = waiter_db(blocking);
    assert_eq!(waiter.call(&["SELECT", &db.to_string()]).unwrap(), Reply::OK);
    waiter.send(&blocking.split(' ').collect::<Vec<_>>()).unwrap();
    // Let the server park it before the writes (CLIENT LIST shows the blocked command).
    for _ in 0..100 {
        let Reply::Bulk(list) = writer.call(&["CLIENT", "LIST"]).unwrap() else { break };
        if String::from_utf8_lossy(&list).contains("flags=b") {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let replies = writes.iter().map(|l| writer.call(&l.split(' ').collect::<Vec<_>>()).unwrap()).collect();
    waiter.set_read_timeout(Some(Duration::from_millis(300)));
    (waiter.read_reply().ok(), replies)
}

/// `@n BLPOP …` blocks in database n (default 0).
fn waiter_db(blocking: &str) -> (usize, &str) {
    match blocking.strip_prefix('@').and_then(|r| r.split_once(' ')) {
        Some((db, rest)) => (db.parse().expect("a database index"), rest),
        None => (0, blocking),
    }
}

fn compare(redis: &RedisServer, setup: &[&str], blocking: &str, writes: &[&str]) -> Option<Reply> {
    let mut answers = Vec::new();
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let ours = engine_scenario(setup, blocking, writes, protocol);
        let theirs = redis_scenario(redis, setup, blocking, writes, protocol);
        assert_eq!(ours, theirs, "{blocking} then {writes:?} in {protocol:?}");
        answers.push(ours.0);
    }
    answers.swap_remove(0)
}

#[test]
fn blocked_pops_are_served_by_a_later_push_as_in_redis() {
    let Some(redis) = server() else { return };
    let served = compare(&redis, &[], "BLPOP q 0", &["SET other 1", "RPUSH q a b"]);
    assert_eq!(served, Some(Reply::Array(vec![Reply::bulk(b"q"), Reply::bulk(b"a")])));
    compare(&redis, &[], "BRPOP q1 q2 0", &["LPUSH q2 x", "LPUSH q1 y"]);
    compare(&redis, &[], "BLMPOP 0 2 q1 q2 RIGHT COUNT 5", &["RPUSH q2 a b c"]);
    compare(&redis, &[], "BLMOVE src dst LEFT RIGHT 0", &["RPUSH dst x", "RPUSH src a b", "LRANGE dst 0 -1"]);
    compare(&redis, &[], "BRPOPLPUSH src dst 0", &["LPUSH src a", "LRANGE dst 0 -1"]);
    compare(&redis, &[], "BZPOPMIN z 0", &["ZADD z 2 b 1.5 a"]);
    compare(&redis, &[], "BZPOPMAX z1 z2 0", &["ZADD z2 2 b 1.5 a"]);
    compare(&redis, &[], "BZMPOP 0 1 z MAX COUNT 2", &["ZADD z 2 b 1.5 a 3 c", "ZRANGE z 0 -1 WITHSCORES"]);
    // Keys created by other commands than pushes.
    compare(&redis, &[], "@1 BLPOP q 0", &["RPUSH q a", "MOVE q 1"]);
    compare(&redis, &["RPUSH tmp a b"], "BRPOP q 0", &["RENAME tmp q"]);
    compare(&redis, &["RPUSH tmp 3 1 2"], "BLPOP q 0", &["SORT tmp STORE q"]);
    compare(&redis, &["RPUSH tmp a"], "BLMOVE q d LEFT LEFT 0", &["LMOVE tmp q LEFT LEFT", "LRANGE d 0 -1"]);
    compare(&redis, &["ZADD tmp 1 a"], "BZPOPMAX q 0", &["COPY tmp q"]);
    compare(&redis, &["RPUSH tmp a"], "BLPOP q 0", &["LMPOP 1 nothing LEFT", "RPOPLPUSH tmp q"]);
    // A MULTI/EXEC push wakes the client once the transaction is done.
    compare(&redis, &[], "BLPOP q 0", &["MULTI", "LPUSH q a", "LPUSH q b", "EXEC"]);
    // Data already there: no blocking at all.
    compare(&redis, &["RPUSH q a"], "BLPOP q 0", &[]);
}

/// SWAPDB wakes clients blocked in either database: they see the other database's keys.
#[test]
fn swapdb_serves_clients_blocked_in_either_database_as_in_redis() {
    let Some(redis) = server() else { return };
    let served = compare(&redis, &[], "@1 BLPOP q 0", &["RPUSH q a", "SWAPDB 0 1", "LLEN q"]);
    assert_eq!(served, Some(Reply::Array(vec![Reply::bulk(b"q"), Reply::bulk(b"a")])));
    compare(&redis, &[], "BZPOPMIN z 0", &["SELECT 3", "ZADD z 1 m", "SWAPDB 3 0"]);
    // Still nothing to pop after the swap: still blocked.
    assert_eq!(compare(&redis, &[], "@2 BLPOP q 0", &["SET q s", "SWAPDB 0 2"]), None);
}

#[test]
fn a_key_of_another_type_leaves_the_client_blocked_as_in_redis() {
    let Some(redis) = server() else { return };
    // Created as a string, deleted, then pushed to: served only by the push.
    let served = compare(&redis, &[], "BLPOP k 0", &["SET k s", "DEL k", "LPUSH k v"]);
    assert_eq!(served, Some(Reply::Array(vec![Reply::bulk(b"k"), Reply::bulk(b"v")])));
    assert_eq!(compare(&redis, &[], "BZPOPMIN k 0", &["RPUSH k a"]), None);
    assert_eq!(compare(&redis, &[], "BLPOP k 0", &["SADD k a", "LPUSH other x"]), None);
    // BLMOVE into a key of another type: WRONGTYPE once the source has data.
    compare(&redis, &["SET dst s"], "BLMOVE src dst LEFT LEFT 0", &["RPUSH src a", "LRANGE src 0 -1"]);
    // Already of the wrong type when the command arrives: WRONGTYPE at once.
    compare(&redis, &["SET k s"], "BLPOP k 0", &[]);
}

#[test]
fn argument_errors_and_non_blocking_answers_match_redis() {
    let Some(redis) = server() else { return };
    let lines = [
        "BLPOP q -1",
        "BLPOP q abc",
        "BLPOP q inf",
        "BLPOP q nan",
        "BLPOP q 1e400",
        "BRPOP q 0x",
        "BLMPOP 0 0 q LEFT",
        "BLMPOP 0 -1 q LEFT",
        "BLMPOP 0 2 q LEFT",
        "BLMPOP 0 1 q UP",
        "BLMPOP 0 1 q LEFT COUNT 0",
        "BLMPOP -1 1 q LEFT",
        "BLMPOP x 1 q LEFT",
        "BZMPOP 0 1 z MIDDLE",
        "BZMPOP 0 x z MIN",
        "BZMPOP -5 1 z MIN",
        "BZPOPMIN z -1",
        "BLMOVE a b UP LEFT 0",
        "BLMOVE a b LEFT LEFT -1",
        "BRPOPLPUSH a b x",
        "WAIT x 0",
        "WAIT 0 -1",
        "WAIT 0 1.5",
        "WAIT 0 0",
        "WAIT -3 100",
    ];
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let mut c = connect(&redis, protocol);
        let engine = Engine::new(MemoryBackend::new());
        let mut s = engine.session();
        for line in lines {
            let ours = client::fold(&engine.execute(&mut s, &argv(line)), protocol);
            assert!(s.take_block().is_none(), "{line} must not block");
            assert_eq!(ours, c.call(&line.split(' ').collect::<Vec<_>>()).unwrap(), "{line} in {protocol:?}");
        }
    }
}

#[test]
fn inside_multi_blocking_commands_answer_their_timeout_reply_as_in_redis() {
    let Some(redis) = server() else { return };
    let queue = [
        "BLPOP q 0",
        "BRPOP q 1",
        "BLMOVE q d LEFT LEFT 0",
        "BRPOPLPUSH q d 0",
        "BLMPOP 0 1 q LEFT",
        "BZPOPMIN z 0",
        "BZPOPMAX z 0",
        "BZMPOP 0 1 z MIN",
        "WAIT 1 0",
        "RPUSH q a",
        "BLPOP q 0",
    ];
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let mut c = connect(&redis, protocol);
        c.call(&["FLUSHALL"]).unwrap();
        let engine = Engine::new(MemoryBackend::new());
        let mut s = engine.session();
        for line in ["MULTI"].iter().chain(&queue).chain(&["EXEC"]) {
            let ours = client::fold(&engine.execute(&mut s, &argv(line)), protocol);
            assert!(s.take_block().is_none(), "{line} must not block");
            assert_eq!(ours, c.call(&line.split(' ').collect::<Vec<_>>()).unwrap(), "{line} in {protocol:?}");
        }
    }
}

/// What the server is told: keys, database, timeout, and the timeout reply per command.
#[test]
fn blocks_name_their_keys_database_timeout_and_timeout_reply() {
    let engine = Engine::new(MemoryBackend::new());
    let mut s = engine.session();
    let block = |s: &mut Session, line: &str| {
        engine.execute(s, &argv(line));
        s.take_block().unwrap_or_else(|| panic!("{line} blocks"))
    };
    engine.execute(&mut s, &argv("SELECT 3"));
    let b = block(&mut s, "BLPOP a b 0");
    assert_eq!((b.keys.clone(), b.db, b.timeout), (vec![Bytes::from("a"), Bytes::from("b")], 3, None));
    assert_eq!(b.timeout_reply(), Reply::NilArray);
    let b = block(&mut s, "BLMOVE src dst LEFT RIGHT 1.5");
    assert_eq!((b.keys.clone(), b.timeout), (vec![Bytes::from("src")], Some(Duration::from_millis(1500))));
    assert_eq!(b.timeout_reply(), Reply::NilArray);
    // Redis rounds the milliseconds up: -0.0001 s is 0, forever.
    assert_eq!(block(&mut s, "BLPOP q -0.0001").timeout, None);
    assert_eq!(block(&mut s, "BZMPOP 0.0001 2 z1 z2 MIN").timeout, Some(Duration::from_millis(1)));
    assert_eq!(block(&mut s, "BZMPOP 0 2 z1 z2 MIN").keys, vec![Bytes::from("z1"), Bytes::from("z2")]);
    let b = block(&mut s, "WAIT 2 250");
    assert_eq!(
        (b.keys.len(), b.timeout, b.timeout_reply()),
        (0, Some(Duration::from_millis(250)), Reply::Integer(0))
    );
    // A command that does not block clears any earlier block.
    engine.execute(&mut s, &argv("BLPOP a 0"));
    engine.execute(&mut s, &argv("PING"));
    assert!(s.take_block().is_none());
    // Db::execute (no session) never blocks: the timeout reply at once.
    let mut db = rediskv::Db::new(MemoryBackend::new());
    assert_eq!(db.run(&["BLPOP", "q", "0"]), Reply::NilArray);
}

/// Three clients blocked on one list, served in the order they blocked as the server
/// retries them; each push serves one.
#[test]
fn three_blocked_clients_are_served_one_push_each_in_retry_order() {
    let engine = Engine::new(MemoryBackend::new());
    let mut clients: Vec<Session> = (0..3).map(|_| engine.session()).collect();
    let mut writer = engine.session();
    let blpop = argv("BLPOP q 0");
    for c in &mut clients {
        engine.execute(c, &blpop);
        assert!(c.take_block().is_some());
    }
    let mut parked: Vec<usize> = vec![0, 1, 2];
    let mut served = Vec::new();
    for value in ["a", "b", "c"] {
        engine.execute(&mut writer, &argv(&format!("RPUSH q {value}")));
        assert!(writer.touched().iter().any(|t| engine.touched_key(t) == Some((0, Bytes::from("q")))));
        parked.retain(|&i| {
            let reply = engine.retry(&mut clients[i], &blpop);
            match clients[i].take_block() {
                Some(_) => true,
                None => {
                    served.push((i, reply));
                    false
                }
            }
        });
    }
    let pair = |v: &[u8]| Reply::Array(vec![Reply::bulk(b"q"), Reply::bulk(v)]);
    assert_eq!(served, vec![(0, pair(b"a")), (1, pair(b"b")), (2, pair(b"c"))]);
}

/// What redis-server answers when the timeout passes, against `Block::timeout_reply`.
#[test]
fn timeout_replies_match_redis() {
    let Some(redis) = server() else { return };
    let lines = [
        "BLPOP q 0.02",
        "BRPOP q1 q2 0.02",
        "BLMOVE q d LEFT LEFT 0.02",
        "BRPOPLPUSH q d 0.02",
        "BLMPOP 0.02 1 q LEFT",
        "BZPOPMIN z 0.02",
        "BZPOPMAX z 0.02",
        "BZMPOP 0.02 1 z MIN",
        "WAIT 1 20",
    ];
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let mut c = connect(&redis, protocol);
        let engine = Engine::new(MemoryBackend::new());
        let mut s = engine.session();
        for line in lines {
            let returned = engine.execute(&mut s, &argv(line));
            let block = s.take_block().unwrap_or_else(|| panic!("{line} blocks"));
            assert_eq!(returned, block.timeout_reply(), "{line}: execute returns the timeout reply");
            let theirs = c.call(&line.split(' ').collect::<Vec<_>>()).unwrap();
            assert_eq!(client::fold(&block.timeout_reply(), protocol), theirs, "{line} in {protocol:?}");
        }
    }
}
