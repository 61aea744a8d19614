//! The command table against a real redis-server 7.0: `COMMAND INFO` of every implemented
//! command (name, arity, flags, first/last/step, ACL categories, key specs), and
//! `COMMAND GETKEYS` over the numkeys and keyword forms and their errors.

#[path = "differential/client.rs"]
#[allow(dead_code)]
mod client;

use bytes::Bytes;
use client::RedisServer;
use rediskv::MemoryBackend;
use rediskv::server::table;
use rediskv::{Engine, Protocol, Reply};

fn server() -> Option<RedisServer> {
    RedisServer::start_or_skip("command_table test")
}

fn without_tips_and_subcommands(reply: Reply) -> Reply {
    match reply {
        Reply::Array(mut fields) if fields.len() == 10 => {
            fields[7] = Reply::Array(Vec::new());
            fields[9] = Reply::Array(Vec::new());
            Reply::Array(fields)
        }
        other => other,
    }
}

/// In both protocols: flags, categories and key specs are sets and maps in RESP3.
#[test]
fn command_info_matches_redis() {
    let Some(redis) = server() else { return };
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        command_info_matches(&redis, protocol);
    }
}

fn command_info_matches(redis: &RedisServer, protocol: Protocol) {
    let mut client = redis.connect().unwrap();
    if protocol == Protocol::Resp3 {
        client.hello3().unwrap();
    }
    let engine = Engine::new(MemoryBackend::new());
    let mut session = engine.session();
    // The commands Redis does not have are this project's own rows.
    let own: Vec<&str> = table::all().iter().filter(|i| i.is(table::attr::OWN)).map(|i| i.name).collect();
    assert_eq!(own, ["clusterx", "compact", "fsck", "namespace"]);
    for info in table::all().iter().filter(|i| !i.is(table::attr::OWN)) {
        let argv = ["COMMAND", "INFO", info.name];
        let theirs = client.call(&argv).unwrap();
        let ours = client::fold(&engine.run(&mut session, &argv), protocol);
        let one = |r: Reply| match r {
            Reply::Array(mut v) if v.len() == 1 => without_tips_and_subcommands(v.remove(0)),
            other => panic!("{}: not a one-entry array: {other:?}", info.name),
        };
        assert_eq!(one(ours), one(theirs), "COMMAND INFO {} in {protocol:?}", info.name);
    }
}

#[test]
fn command_getkeys_matches_redis() {
    let Some(redis) = server() else { return };
    let mut client = redis.connect().unwrap();
    let engine = Engine::new(MemoryBackend::new());
    let mut session = engine.session();
    let cases = [
        "GET a",
        "GET",
        "GET a b",
        "MSET a 1 b 2",
        "MSET a 1 b",
        "MGET a b c",
        "DEL a b",
        "RENAME a b",
        "COPY a b DB 3 REPLACE",
        "BLPOP a b 0",
        "BLMOVE a b LEFT RIGHT 0",
        "LMPOP 2 a b LEFT COUNT 3",
        "LMPOP 0 a LEFT",
        "LMPOP x a LEFT",
        "LMPOP 3 a LEFT",
        "BLMPOP 0 2 a b LEFT",
        "ZMPOP 1 a MIN",
        "BZMPOP 1.5 2 a b MAX",
        "ZUNIONSTORE d 2 a b WEIGHTS 1 2",
        "ZINTERSTORE d 1 a",
        "ZDIFFSTORE d -1 a",
        "ZUNION 2 a b",
        "ZINTERCARD 2 a b LIMIT 3",
        "SINTERCARD 1 a",
        "SINTERSTORE d a b",
        "SMOVE a b m",
        "ZRANGESTORE d s 0 -1",
        "PING x",
        "FLUSHDB",
        "SCAN 0",
        "NOSUCH a",
        "MULTI",
        "WATCH a b",
        "SORT s",
        "SORT s BY w_* GET # LIMIT 0 1 STORE d",
        "SORT s STORE d1 STORE d2",
        "SORT_RO s BY w_*",
        "EVAL script 2 a b x",
        "FCALL f 0 x",
        "XREADGROUP GROUP g c COUNT 1 STREAMS s1 s2 > >",
        "XGROUP CREATE s g $",
        "LMOVE a b LEFT RIGHT",
        "SET a b",
        "SET a b EX 10 GET",
        "BITFIELD a GET u8 0 OVERFLOW SAT",
        "BITFIELD a GET u8 0 SET u8 0 1",
        "BITFIELD a GET u8",
    ];
    for case in cases {
        for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
            let mut argv = vec!["COMMAND", sub];
            argv.extend(case.split(' '));
            let ours = client::fold_resp2(&engine.run(&mut session, &argv));
            assert_eq!(ours, client.call(&argv).unwrap(), "COMMAND {sub} {case}");
        }
    }
    // Every name, and the three filters (module: none is loaded here either).
    for line in [
        "COMMAND LIST FILTERBY ACLCAT scripting",
        "COMMAND LIST FILTERBY ACLCAT nosuch",
        "COMMAND LIST FILTERBY PATTERN config|*re*",
        "COMMAND LIST FILTERBY PATTERN X*",
        "COMMAND LIST FILTERBY MODULE m",
    ] {
        let argv: Vec<&str> = line.split(' ').collect();
        let sorted = |r: Reply| match r {
            Reply::Array(mut names) => {
                names.sort_by_key(|n| format!("{n:?}"));
                Reply::Array(names)
            }
            other => other,
        };
        let ours = sorted(client::fold_resp2(&engine.run(&mut session, &argv)));
        let theirs = sorted(client.call(&argv).unwrap());
        // Redis lists commands this engine does not have (LATENCY, FAILOVER…): ours are a
        // subset, and every name of ours is one of Redis'.
        let (Reply::Array(ours), Reply::Array(theirs)) = (ours, theirs) else { panic!("{line}") };
        assert!(ours.iter().all(|n| theirs.contains(n)), "{line}: {ours:?} not within {theirs:?}");
        assert_eq!(ours.is_empty(), theirs.is_empty(), "{line}");
    }
    for line in [
        "COMMAND GETKEYS",
        "COMMAND COUNT x",
        "COMMAND NOPE",
        "COMMAND INFO get NoSuch GET",
        "COMMAND LIST bad",
        "COMMAND LIST FILTERBY bad x",
        "COMMAND LIST FILTERBY bad",
    ] {
        let argv: Vec<&str> = line.split(' ').collect();
        assert_eq!(
            client::fold_resp2(&engine.run(&mut session, &argv)),
            client.call(&argv).unwrap(),
            "{line}"
        );
    }
}

#[test]
fn keys_name_what_getkeys_names() {
    let argv: Vec<Bytes> = ["ZUNIONSTORE", "d", "2", "a", "b"].iter().map(|s| Bytes::from(*s)).collect();
    assert_eq!(rediskv::server::table::keys(&argv), [&b"d"[..], b"a", b"b"]);
}
