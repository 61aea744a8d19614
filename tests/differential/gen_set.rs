//! Set commands: SADD SREM SCARD SISMEMBER SMISMEMBER SMEMBERS SPOP SRANDMEMBER SMOVE SINTER
//! SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE SSCAN.

use crate::kit::*;

/// `numkeys key…`, with a wrong numkeys now and then.
pub fn numkeys(g: &mut G, a: &mut Vec<Vec<u8>>) {
    let keys = g.keys(3);
    let n = if g.chance(90) { keys.len().to_string() } else { g.pick(&["0", "-1", "5", "x"]).to_string() };
    a.push(n.arg());
    a.extend(keys);
}

fn random_count(g: &mut G, a: &mut Vec<Vec<u8>>, allow_negative: bool) -> Option<i64> {
    if g.chance(35) {
        return None;
    }
    let (c, parsed) = g.random_count(allow_negative);
    a.push(c);
    parsed
}

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("sadd", 10, |g| {
            let mut a = argv![g.kw("SADD"), g.key()];
            a.extend(g.members(4));
            exact(a)
        }),
        cmd("srem", 4, |g| {
            let mut a = argv!["SREM", g.key()];
            a.extend(g.members(3));
            exact(a)
        }),
        cmd("scard", 3, |g| exact(argv!["SCARD", g.key()])),
        cmd("sismember", 3, |g| exact(argv!["SISMEMBER", g.key(), g.member()])),
        cmd("smismember", 2, |g| {
            let mut a = argv!["SMISMEMBER", g.key()];
            a.extend(g.members(4));
            exact(a)
        }),
        cmd("smembers", 3, |g| unordered(argv!["SMEMBERS", g.key()])),
        cmd("spop", 3, |g| {
            let mut a = argv!["SPOP", g.key()];
            let count = random_count(g, &mut a, false);
            Op {
                argv: a,
                cmp: Cmp::Random(Random { snapshot: Snapshot::Set, count, with_values: false, pops: true }),
            }
        }),
        cmd("srandmember", 3, |g| {
            let mut a = argv!["SRANDMEMBER", g.key()];
            let count = random_count(g, &mut a, true);
            crate::gen_hash::random(a, Snapshot::Set, count, false)
        }),
        cmd("smove", 3, |g| exact(argv!["SMOVE", g.key(), g.key(), g.member()])),
        cmd("sinter", 2, |g| {
            let mut a = argv!["SINTER"];
            a.extend(g.keys(3));
            unordered(a)
        }),
        cmd("sintercard", 2, |g| {
            let mut a = argv!["SINTERCARD"];
            numkeys(g, &mut a);
            if g.chance(30) {
                a.push(g.kw("LIMIT"));
                a.push(g.pick(&["0", "1", "2", "-1", "x"]).arg());
            }
            exact(a)
        }),
        cmd("sinterstore", 2, |g| {
            let mut a = argv!["SINTERSTORE", g.key()];
            a.extend(g.keys(3));
            exact(a)
        }),
        cmd("sunion", 2, |g| {
            let mut a = argv!["SUNION"];
            a.extend(g.keys(3));
            unordered(a)
        }),
        cmd("sunionstore", 2, |g| {
            let mut a = argv!["SUNIONSTORE", g.key()];
            a.extend(g.keys(3));
            exact(a)
        }),
        cmd("sdiff", 2, |g| {
            let mut a = argv!["SDIFF"];
            a.extend(g.keys(3));
            unordered(a)
        }),
        cmd("sdiffstore", 2, |g| {
            let mut a = argv!["SDIFFSTORE", g.key()];
            a.extend(g.keys(3));
            exact(a)
        }),
        cmd("sscan", 2, |g| {
            let mut a = argv!["SSCAN", g.key(), "0"];
            crate::gen_keyspace::scan_options(g, &mut a);
            Op { argv: a, cmp: Cmp::Scan { cursor_arg: 2, pairs: false } }
        }),
    ]
}
