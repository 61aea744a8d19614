//! Hash commands: HSET HSETNX HGET HMGET HMSET HDEL HLEN HSTRLEN HEXISTS HKEYS HVALS
//! HGETALL HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN.

use crate::kit::*;

fn field_values(g: &mut G, a: &mut Vec<Vec<u8>>) {
    for _ in 0..1 + g.rng.below(4) {
        a.push(g.member());
        a.push(g.value());
    }
    if g.chance(4) {
        a.pop();
    }
}

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("hset", 10, |g| {
            let mut a = argv![g.kw("HSET"), g.key()];
            field_values(g, &mut a);
            exact(a)
        }),
        cmd("hmset", 2, |g| {
            let mut a = argv!["HMSET", g.key()];
            field_values(g, &mut a);
            exact(a)
        }),
        cmd("hsetnx", 3, |g| exact(argv!["HSETNX", g.key(), g.member(), g.value()])),
        cmd("hget", 5, |g| exact(argv!["HGET", g.key(), g.member()])),
        cmd("hmget", 3, |g| {
            let mut a = argv!["HMGET", g.key()];
            a.extend(g.members(4));
            exact(a)
        }),
        cmd("hdel", 4, |g| {
            let mut a = argv!["HDEL", g.key()];
            a.extend(g.members(3));
            exact(a)
        }),
        cmd("hlen", 3, |g| exact(argv!["HLEN", g.key()])),
        cmd("hstrlen", 2, |g| exact(argv!["HSTRLEN", g.key(), g.member()])),
        cmd("hexists", 2, |g| exact(argv!["HEXISTS", g.key(), g.member()])),
        cmd("hkeys", 2, |g| unordered(argv!["HKEYS", g.key()])),
        cmd("hvals", 2, |g| unordered(argv!["HVALS", g.key()])),
        cmd("hgetall", 3, |g| pairs(argv!["HGETALL", g.key()])),
        cmd("hincrby", 3, |g| exact(argv!["HINCRBY", g.key(), g.member(), g.int()])),
        cmd("hincrbyfloat", 3, |g| exact(argv!["HINCRBYFLOAT", g.key(), g.member(), g.float()])),
        cmd("hrandfield", 3, |g| {
            let mut a = argv!["HRANDFIELD", g.key()];
            let mut count = None;
            let mut with_values = false;
            if g.chance(70) {
                let (c, parsed) = g.random_count(true);
                a.push(c);
                count = parsed;
                if g.chance(40) {
                    a.push(g.kw("WITHVALUES"));
                    with_values = true;
                }
            }
            random(a, Snapshot::Hash, count, with_values)
        }),
        cmd("hscan", 2, |g| {
            let mut a = argv!["HSCAN", g.key(), "0"];
            crate::gen_keyspace::scan_options(g, &mut a);
            Op { argv: a, cmp: Cmp::Scan { cursor_arg: 2, pairs: true } }
        }),
    ]
}

/// A random-reply op (count `None` when absent or unparsable: then compared exactly unless
/// absent).
pub fn random(argv: Vec<Vec<u8>>, snapshot: Snapshot, count: Option<i64>, with_values: bool) -> Op {
    Op { argv, cmp: Cmp::Random(Random { snapshot, count, with_values, pops: false }) }
}
