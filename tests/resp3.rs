//! Every reply shape that differs between the protocols, against redis-server 7.0 after
//! `HELLO 3` and in RESP2: the engine's reply encoded in each protocol and parsed back must
//! equal what Redis sends. (The differential test covers the same at random; this list is
//! the checklist, one line per shape.)

#[path = "differential/client.rs"]
#[allow(dead_code)]
mod client;

use client::RedisServer;
use rediskv::MemoryBackend;
use rediskv::{Engine, Protocol, Reply};

/// Lines run in order on both sides; collections are kept small and in an order Redis
/// lists them in (sorted members, insertion order equal to member order).
const SCRIPT: &[&str] = &[
    "HSET h a 1 b 2",
    "HGETALL h",
    "HGETALL nokey",
    "HRANDFIELD h 2 WITHVALUES",
    "HRANDFIELD h 0 WITHVALUES",
    "HRANDFIELD nokey 2 WITHVALUES",
    "HRANDFIELD nokey",
    "HINCRBYFLOAT h f 1.5",
    "HSCAN h 0",
    "HMGET h a zz",
    "SADD s 1 2 3",
    "SMEMBERS s",
    "SMEMBERS nokey",
    "SINTER s s",
    "SUNION s nokey",
    "SDIFF s nokey",
    "SDIFF nokey s",
    "SPOP nokey 2",
    "SPOP s 0",
    "SPOP nokey",
    "SRANDMEMBER nokey 2",
    "SMISMEMBER s 1 9",
    "SSCAN s 0",
    "ZADD z 1 a 2.5 b 0.1 c",
    "ZSCORE z b",
    "ZSCORE z zz",
    "ZMSCORE z a zz c",
    "ZINCRBY z 1 a",
    "ZADD z INCR 1 a",
    "ZADD z NX INCR 1 a",
    "ZADD z INCR -inf neg",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZRANGE z 0 -1",
    "ZRANGE z -inf +inf BYSCORE WITHSCORES LIMIT 1 2",
    "ZREVRANGE z 0 1 WITHSCORES",
    "ZRANGEBYSCORE z (0 +inf WITHSCORES",
    "ZREVRANGEBYSCORE z +inf -inf WITHSCORES",
    "ZRANGE nokey 0 -1 WITHSCORES",
    "ZUNION 2 z nokey WITHSCORES",
    "ZINTER 1 z WITHSCORES",
    "ZDIFF 2 z nokey WITHSCORES",
    "ZRANDMEMBER nokey 2 WITHSCORES",
    "ZRANDMEMBER nokey",
    "ZRANK z zz",
    "ZADD zs 1 a 2.5 b",
    "ZSCAN zs 0",
    "ZPOPMIN z",
    "ZPOPMIN z 1",
    "ZPOPMAX z 2",
    "ZPOPMIN z 0",
    "ZPOPMIN nokey",
    "ZADD z 1 a 2 b",
    "ZMPOP 1 z MIN",
    "ZMPOP 1 z MAX COUNT 5",
    "ZMPOP 1 nokey MIN",
    "BZPOPMIN nokey2 z2 0.01",
    "ZADD z 1 a",
    "BZPOPMIN z 0",
    "ZADD z 1 a 2 b",
    "BZMPOP 0 1 z MIN COUNT 2",
    "GET nokey",
    "MGET nokey h",
    "INCRBYFLOAT f 1.5",
    "RPUSH l a b",
    "LPOS l zz",
    "LPOS l a COUNT 0",
    "LPOP nokey",
    "LPOP nokey 2",
    "LPOP l 0",
    "LMPOP 1 nokey LEFT",
    "BLPOP l 0",
    "BLMPOP 0 1 l RIGHT COUNT 3",
    "SET a ohmytext",
    "SET b mynewtext",
    "LCS a b IDX WITHMATCHLEN",
    "LCS a b",
    "OBJECT ENCODING nokey",
    "OBJECT FREQ a",
    "DUMP nokey",
    "SORT nokey",
    "BITFIELD bf OVERFLOW FAIL INCRBY u2 0 5",
    "MULTI",
    "ZSCORE z a",
    "HGETALL h",
    "SMEMBERS s",
    "ZRANGE z 0 -1 WITHSCORES",
    "GET nokey",
    "EXEC",
    "WATCH h",
    "@1 DEL h",
    "MULTI",
    "PING",
    "EXEC",
    "TYPE h",
    "PING",
];

#[test]
fn reply_shapes_match_redis_in_both_protocols() {
    let Some(server) = RedisServer::start_or_skip("resp3 test") else { return };
    for protocol in [Protocol::Resp3, Protocol::Resp2] {
        let mut redis: Vec<client::Client> = (0..2).map(|_| server.connect().expect("connect")).collect();
        if protocol == Protocol::Resp3 {
            redis.iter_mut().for_each(|c| c.hello3().unwrap());
        }
        assert_eq!(redis[0].call(&["FLUSHALL"]).unwrap(), Reply::OK);
        let engine = Engine::new(MemoryBackend::new());
        let mut sessions = [engine.session(), engine.session()];
        for line in SCRIPT {
            let (conn, line) = line.strip_prefix("@1 ").map_or((0, *line), |l| (1, l));
            let argv: Vec<&str> = line.split(' ').collect();
            let ours = client::fold(&engine.run(&mut sessions[conn], &argv), protocol);
            assert_eq!(ours, redis[conn].call(&argv).unwrap(), "{line} in {protocol:?}");
        }
    }
}

/// The RESP3 bytes of the kinds whose text matters, exactly as redis-server 7.0.15 sent them
/// (HGETALL, ZSCORE of 0.1, ZRANGE WITHSCORES, SMEMBERS, GET of nothing).
#[test]
fn resp3_bytes_of_typical_replies() {
    let engine = Engine::new(MemoryBackend::new());
    let mut s = engine.session();
    for line in ["HSET h a 1", "ZADD z 0.1 m", "SADD s x"] {
        engine.run(&mut s, &line.split(' ').collect::<Vec<_>>());
    }
    let mut bytes = |line: &str, protocol| {
        let mut out = Vec::new();
        engine.run(&mut s, &line.split(' ').collect::<Vec<_>>()).write(protocol, &mut out);
        String::from_utf8(out).unwrap()
    };
    assert_eq!(bytes("HGETALL h", Protocol::Resp3), "%1\r\n$1\r\na\r\n$1\r\n1\r\n");
    assert_eq!(bytes("ZSCORE z m", Protocol::Resp3), ",0.10000000000000001\r\n");
    assert_eq!(bytes("ZSCORE z m", Protocol::Resp2), "$19\r\n0.10000000000000001\r\n");
    assert_eq!(
        bytes("ZRANGE z 0 -1 WITHSCORES", Protocol::Resp3),
        "*1\r\n*2\r\n$1\r\nm\r\n,0.10000000000000001\r\n"
    );
    assert_eq!(
        bytes("ZRANGE z 0 -1 WITHSCORES", Protocol::Resp2),
        "*2\r\n$1\r\nm\r\n$19\r\n0.10000000000000001\r\n"
    );
    assert_eq!(bytes("SMEMBERS s", Protocol::Resp3), "~1\r\n$1\r\nx\r\n");
    assert_eq!(bytes("GET nokey", Protocol::Resp3), "_\r\n");
    assert_eq!(bytes("LMPOP 1 nokey LEFT", Protocol::Resp3), "_\r\n");
}
