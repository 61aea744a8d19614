//! The keyspace events of [`Session::events`]: what a command raises, in Redis 7.0's order
//! (sequences checked against redis-server 7.0.15 with `notify-keyspace-events KEAn`), that
//! a failing command raises nothing, that a lazily expired key is reported once and then
//! deleted, and that active expiry names the database and key it expired.

use std::sync::Arc;

use bytes::Bytes;
use rediskv::gc::{ExpirySweep, expire_step};
use rediskv::server::NotifyFlags;
use rediskv::{ColumnFamily, MemoryBackend};
use rediskv::{Engine, Reply, Session};
use rediskv::{KeyRange, ManualClock};

const NOW: u64 = 1_700_000_000_000;

fn engine() -> (Engine<MemoryBackend>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(NOW));
    (Engine::new(MemoryBackend::new()).with_clock(clock.clone()), clock)
}

/// Runs `argv` and answers its events as `name key` (with `@db` past database 0).
fn events(engine: &Engine<MemoryBackend>, session: &mut Session, argv: &[&str]) -> Vec<String> {
    engine.run(session, argv);
    session
        .events()
        .iter()
        .map(|e| {
            let db = if e.db == 0 { String::new() } else { format!("@{}", e.db) };
            format!("{} {}{db}", e.name, String::from_utf8_lossy(&e.key))
        })
        .collect()
}

#[test]
fn commands_raise_redis_events_in_order() {
    let (engine, _) = engine();
    engine.set_new_events(true);
    let mut s = engine.session();
    let mut check =
        |argv: &[&str], want: &[&str]| assert_eq!(events(&engine, &mut s, argv), want, "{argv:?}");
    check(&["SET", "k", "v", "EX", "100"], &["new k", "set k", "expire k"]);
    check(&["SET", "k", "w", "KEEPTTL"], &["set k"]);
    check(&["SET", "k", "w", "NX"], &[]);
    check(&["MSET", "a", "1", "b", "2", "a", "3"], &["new a", "set a", "new b", "set b", "set a"]);
    check(&["RPUSH", "l", "x"], &["new l", "rpush l"]);
    check(&["RPOPLPUSH", "l", "m"], &["new m", "lpush m", "rpop l", "del l"]);
    check(&["LMOVE", "m", "m", "LEFT", "RIGHT"], &["rpush m", "lpop m"]);
    check(&["SADD", "s", "a"], &["new s", "sadd s"]);
    check(&["SMOVE", "s", "t", "a"], &["srem s", "del s", "new t", "sadd t"]);
    check(&["ZADD", "z", "1", "a"], &["new z", "zadd z"]);
    check(&["ZADD", "z", "1", "a"], &[]);
    check(&["ZINCRBY", "z", "1", "a"], &["zincr z"]);
    check(&["ZUNIONSTORE", "u", "2", "z", "nothing"], &["new u", "zunionstore u"]);
    check(&["ZINTERSTORE", "u", "2", "z", "nothing"], &["del u"]);
    check(&["ZINTERSTORE", "u", "2", "z", "nothing"], &[]);
    check(&["HSET", "h", "f", "1"], &["new h", "hset h"]);
    check(&["HDEL", "h", "f", "g"], &["hdel h", "del h"]);
    check(&["RENAME", "a", "b"], &["new b", "rename_from a", "rename_to b"]);
    check(&["COPY", "b", "b", "DB", "2"], &["new b@2", "copy_to b@2"]);
    check(&["EXPIRE", "b", "-1"], &["del b"]);
    check(&["PEXPIRE", "k", "5000"], &["expire k"]);
    check(&["PERSIST", "k"], &["persist k"]);
    check(&["DEL", "k", "k", "nothing", "t"], &["del k", "del t"]);
    check(&["SETBIT", "bits", "7", "0"], &["new bits", "setbit bits"]);
    check(&["SETBIT", "bits", "7", "0"], &[]);
    check(&["INCRBYFLOAT", "n", "1.5"], &["new n", "incrbyfloat n"]);
}

#[test]
fn failing_commands_raise_nothing() {
    let (engine, _) = engine();
    let mut s = engine.session();
    engine.run(&mut s, &["SET", "str", "v"]);
    for argv in [
        &["LPUSH", "str", "x"][..],
        &["INCR", "str"],
        &["SET", "k", "v", "EX", "0"],
        &["RENAME", "missing", "x"],
        &["EXEC"],
    ] {
        assert!(engine.run(&mut s, argv).is_error(), "{argv:?}");
        assert!(s.events().is_empty(), "{argv:?}: {:?}", s.events());
    }
    // Nothing written, nothing raised.
    assert_eq!(events(&engine, &mut s, &["LPOP", "missing"]), Vec::<String>::new());
}

#[test]
fn exec_raises_the_queued_commands_events_in_order() {
    let (engine, _) = engine();
    let mut s = engine.session();
    for argv in [&["MULTI"][..], &["SET", "a", "1"], &["INCR", "a"], &["DEL", "a"]] {
        engine.run(&mut s, argv);
        assert!(s.events().is_empty(), "queued: no events yet");
    }
    assert_eq!(events(&engine, &mut s, &["EXEC"]), ["set a", "incrby a", "del a"]);
}

#[test]
fn a_lazily_expired_key_is_reported_once_and_deleted() {
    let (engine, clock) = engine();
    let mut s = engine.session();
    engine.run(&mut s, &["SELECT", "1"]);
    engine.run(&mut s, &["SET", "k", "v", "PX", "1000"]);
    clock.advance_ms(2000);
    assert_eq!(events(&engine, &mut s, &["GET", "k"]), ["expired k@1"]);
    assert_eq!(engine.backend().records(ColumnFamily::Metadata).len(), 0, "the engine deleted it");
    assert_eq!(events(&engine, &mut s, &["GET", "k"]), Vec::<String>::new());
    // A failing command still reports the key it found expired (Redis deleted it).
    engine.run(&mut s, &["SET", "k", "v", "PX", "1000"]);
    clock.advance_ms(2000);
    assert!(engine.run(&mut s, &["SET", "k", "v", "EX", "x"]).is_error());
    assert!(s.events().is_empty(), "SET checks its arguments before the key");
    assert_eq!(events(&engine, &mut s, &["GET", "k"]), ["expired k@1"]);
    engine.run(&mut s, &["SET", "k", "v", "PX", "1000"]);
    clock.advance_ms(2000);
    assert!(engine.run(&mut s, &["LPUSH", "k"]).is_error(), "arity");
    assert_eq!(events(&engine, &mut s, &["INCRBYFLOAT", "k", "x"]), ["expired k@1"]);
    // A key overwritten by the command that found it expired is not deleted afterwards.
    engine.run(&mut s, &["SET", "k", "v", "PX", "1000"]);
    clock.advance_ms(2000);
    assert_eq!(
        events(&engine, &mut s, &["SET", "k", "w", "PXAT", "1"]),
        ["expired k@1", "set k@1", "expire k@1"]
    );
    assert_eq!(events(&engine, &mut s, &["TYPE", "k"]), ["expired k@1"]);
}

#[test]
fn active_expiry_names_what_it_deleted() {
    let (engine, clock) = engine();
    let mut s = engine.session();
    engine.run(&mut s, &["SET", "live", "v"]);
    engine.run(&mut s, &["SET", "gone", "v", "PX", "10"]);
    engine.run(&mut s, &["SELECT", "3"]);
    engine.run(&mut s, &["RPUSH", "list", "a", "b"]);
    engine.run(&mut s, &["PEXPIRE", "list", "10"]);
    clock.advance_ms(20);
    let mut sweep = ExpirySweep::new(KeyRange::prefix(Vec::new()));
    let mut expired = Vec::new();
    while !sweep.is_done() {
        let step = expire_step(&engine, &mut sweep, engine.now_ms(), 2).unwrap();
        assert_eq!(step.removed.len(), step.expired.len());
        expired.extend(step.expired);
    }
    expired.sort();
    assert_eq!(expired, [(0, Bytes::from_static(b"gone")), (3, Bytes::from_static(b"list"))]);
    let (db, key) = expired[1].clone();
    let messages = rediskv::server::Event::expired(db, key).messages(NotifyFlags::parse(b"Ex").unwrap());
    assert_eq!(messages, [(Bytes::from_static(b"__keyevent@3__:expired"), Bytes::from_static(b"list"))]);
    assert_eq!(engine.run(&mut s, &["DBSIZE"]), Reply::Integer(0));
    let remaining = engine.backend().records(ColumnFamily::Metadata);
    assert_eq!(remaining.len(), 1, "only `live` is left");
}

#[test]
fn messages_and_flags_are_redis_s() {
    let (engine, _) = engine();
    let mut s = engine.session();
    engine.run(&mut s, &["SELECT", "5"]);
    engine.run(&mut s, &["LPUSH", "q", "job"]);
    let flags = NotifyFlags::parse(b"Kl").unwrap();
    let messages: Vec<_> = s.events().iter().flat_map(|e| e.messages(flags)).collect();
    assert_eq!(messages, [(Bytes::from_static(b"__keyspace@5__:q"), Bytes::from_static(b"lpush"))]);
    assert!(s.events()[0].messages(NotifyFlags::parse(b"KEg").unwrap()).is_empty());
    assert_eq!(NotifyFlags::parse(b"lK").unwrap().to_string(), "lK");
}

#[test]
fn active_expiry_of_a_watched_key_aborts_exec() {
    let (engine, clock) = engine();
    let (mut a, mut b) = (engine.session(), engine.session());
    engine.run(&mut a, &["SET", "k", "v", "PX", "10"]);
    engine.run(&mut a, &["SET", "stale", "v", "PX", "1"]);
    clock.advance_ms(5);
    engine.run(&mut b, &["WATCH", "stale"]);
    engine.run(&mut a, &["WATCH", "k"]);
    clock.advance_ms(20);
    let mut sweep = ExpirySweep::new(KeyRange::prefix(Vec::new()));
    let step = expire_step(&engine, &mut sweep, engine.now_ms(), 10).unwrap();
    assert_eq!(step.expired.len(), 2);
    for (session, want) in [(&mut a, Reply::NilArray), (&mut b, Reply::Array(vec![Reply::OK]))] {
        engine.run(session, &["MULTI"]);
        engine.run(session, &["SET", "x", "1"]);
        assert_eq!(engine.run(session, &["EXEC"]), want, "a key expired when watched does not abort");
    }
}

/// What [`Session::effects`] must say, derived from the events an engine recorded.
fn effects_of_events(session: &Session) -> (u64, u64, bool) {
    let events = session.events();
    let changes =
        events.iter().filter(|e| !matches!(e.name, "expired" | "new" | "rename_from" | "move_from")).count();
    let expired = events.iter().filter(|e| e.name == "expired").count();
    let ttl =
        events.iter().any(|e| matches!(e.name, "expire" | "rename_to" | "restore" | "copy_to" | "move_to"));
    (changes as u64, expired as u64, ttl)
}

#[test]
fn effects_are_counted_alike_with_events_off() {
    let (on, on_clock) = engine();
    let (off, off_clock) = engine();
    off.set_events(false);
    let (mut a, mut b) = (on.session(), off.session());
    let script: &[&[&str]] = &[
        &["SET", "k", "v", "EX", "100"],
        &["MSET", "a", "1", "b", "2", "a", "3"],
        &["RPUSH", "l", "x", "y"],
        &["RPOPLPUSH", "l", "m"],
        &["LTRIM", "m", "0", "-1"],
        &["HSET", "h", "f", "1", "g", "2"],
        &["HDEL", "h", "f", "g"],
        &["INCR", "k"],
        &["RENAME", "a", "c"],
        &["COPY", "c", "c", "DB", "2"],
        &["MOVE", "b", "3"],
        &["SADD", "s", "a", "b"],
        &["SET", "s", "now a string"],
        &["ZADD", "z", "1", "a"],
        &["ZUNIONSTORE", "u", "1", "z"],
        &["PEXPIRE", "u", "10"],
        &["DEL", "c", "m", "nothing"],
        &["SET", "e", "v", "PX", "500"],
        &["MULTI"],
        &["INCR", "n"],
        &["EXPIRE", "n", "100"],
        &["LPUSH", "n", "wrong type"],
        &["EXEC"],
    ];
    for argv in script {
        let (x, y) = (on.run(&mut a, argv), off.run(&mut b, argv));
        assert_eq!(x, y, "{argv:?}");
        assert!(b.events().is_empty(), "{argv:?}: no events recorded while off");
        let e = a.effects();
        assert_eq!((e.changes, e.expired, e.ttl_set), effects_of_events(&a), "{argv:?}");
        assert_eq!(a.effects(), b.effects(), "{argv:?}");
        assert_eq!(a.touched(), b.touched(), "{argv:?}: WATCH and wake-ups see the same keys");
    }
    on_clock.advance_ms(1000);
    off_clock.advance_ms(1000);
    for argv in [&["GET", "e"][..], &["TYPE", "u"], &["EXISTS", "e", "u"]] {
        on.run(&mut a, argv);
        off.run(&mut b, argv);
        let e = a.effects();
        assert_eq!((e.changes, e.expired, e.ttl_set), effects_of_events(&a), "{argv:?}");
        assert_eq!(a.effects(), b.effects(), "{argv:?}");
    }
    assert_eq!(a.effects().expired, 0, "EXISTS after GET and TYPE deleted both");
}

#[test]
fn garbage_is_reported_when_a_collection_goes() {
    let (engine, clock) = engine();
    engine.set_events(false);
    let mut s = engine.session();
    let mut garbage = |argv: &[&str]| {
        assert!(!engine.run(&mut s, argv).is_error(), "{argv:?}");
        s.effects().garbage
    };
    assert!(!garbage(&["SET", "str", "v"]));
    assert!(!garbage(&["SET", "str", "w"]), "a string over a string");
    assert!(!garbage(&["DEL", "str"]));
    assert!(!garbage(&["HSET", "h", "f", "1"]));
    assert!(!garbage(&["HSET", "h", "g", "2"]), "an edit keeps the version");
    assert!(!garbage(&["LPUSH", "l", "a", "b"]));
    assert!(!garbage(&["RPOP", "l"]));
    assert!(garbage(&["SET", "h", "a string now"]), "a hash overwritten");
    assert!(garbage(&["DEL", "l"]), "a list deleted");
    assert!(!garbage(&["DEL", "l"]), "nothing left to delete");
    assert!(!garbage(&["SADD", "s", "a"]));
    assert!(garbage(&["RENAME", "s", "t"]), "the renamed set's old records");
    assert!(!garbage(&["ZADD", "z", "1", "a"]));
    assert!(garbage(&["ZUNIONSTORE", "z", "1", "t"]), "a sorted set replaced by a store");
    assert!(!garbage(&["PEXPIRE", "z", "100"]));
    clock.advance_ms(200);
    assert!(garbage(&["EXISTS", "z"]), "an expired collection deleted after the command");
    assert!(!garbage(&["EXISTS", "z"]));
}

#[test]
fn a_command_given_a_time_runs_at_it() {
    let (engine, _) = engine();
    let mut s = engine.session();
    engine.run(&mut s, &["SET", "k", "v", "PXAT", &(NOW + 1000).to_string()]);
    engine.run(&mut s, &["SET", "j", "v", "PXAT", &(NOW + 1000).to_string()]);
    s.set_time(NOW + 2000);
    assert_eq!(engine.run(&mut s, &["PTTL", "j"]), Reply::Integer(-2), "past its expiry at the given time");
    assert_eq!(s.effects().expired, 1);
    assert_eq!(engine.run(&mut s, &["PTTL", "k"]), Reply::Integer(1000), "the next command reads the clock");
    s.set_time(NOW + 500);
    engine.run(&mut s, &["MULTI"]);
    engine.run(&mut s, &["PTTL", "k"]);
    assert_eq!(
        engine.run(&mut s, &["EXEC"]),
        Reply::Array(vec![Reply::Integer(1000)]),
        "MULTI takes no given time"
    );
}
