//! Sorted-set commands: ZADD ZINCRBY ZREM ZCARD ZSCORE ZMSCORE ZCOUNT ZLEXCOUNT ZRANGE
//! ZRANGESTORE ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE ZRANK
//! ZREVRANK ZREMRANGEBYSCORE ZREMRANGEBYRANK ZREMRANGEBYLEX ZPOPMIN ZPOPMAX ZMPOP ZRANDMEMBER
//! ZUNION ZINTER ZDIFF ZUNIONSTORE ZINTERSTORE ZDIFFSTORE ZINTERCARD ZSCAN.

use crate::kit::*;

fn limit(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(30) {
        a.push(g.kw("LIMIT"));
        a.push(g.pick(&["0", "1", "2", "-1", "x"]).arg());
        a.push(g.pick(&["0", "1", "2", "-1", "100", "x"]).arg());
    }
}

fn withscores(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(40) {
        a.push(g.kw("WITHSCORES"));
    }
}

/// ZRANGE/ZRANGESTORE's `start stop [BYSCORE|BYLEX] [REV] [LIMIT o c]`.
fn range_spec(g: &mut G, a: &mut Vec<Vec<u8>>) {
    match g.rng.below(3) {
        0 => {
            a.push(g.index());
            a.push(g.index());
        }
        1 => {
            a.push(g.score_bound());
            a.push(g.score_bound());
            a.push(g.kw("BYSCORE"));
        }
        _ => {
            a.push(g.lex_bound());
            a.push(g.lex_bound());
            a.push(g.kw("BYLEX"));
        }
    }
    if g.chance(30) {
        a.push(g.kw("REV"));
    }
    limit(g, a);
}

/// ZRANGE/ZRANGESTORE: a lex comparison when the spec says BYLEX.
fn by_lex_or_exact(a: Vec<Vec<u8>>, key_arg: usize) -> Op {
    if a.iter().any(|arg| arg.eq_ignore_ascii_case(b"BYLEX")) { lex(a, key_arg) } else { exact(a) }
}

/// ZUNION/ZINTER/ZDIFF and their STORE forms: numkeys, keys, WEIGHTS, AGGREGATE.
fn combine(g: &mut G, a: &mut Vec<Vec<u8>>, weights: bool) {
    let keys = g.keys(3);
    let n = keys.len();
    let numkeys = if g.chance(92) { n.to_string() } else { g.pick(&["0", "-1", "9", "x"]).to_string() };
    a.push(numkeys.arg());
    a.extend(keys);
    if weights && g.chance(30) {
        a.push(g.kw("WEIGHTS"));
        let count = if g.chance(90) { n } else { n + 1 };
        for _ in 0..count {
            a.push(g.pick(&["1", "2", "0", "-1", "0.5", "inf", "-inf", "x"]).arg());
        }
    }
    if weights && g.chance(30) {
        a.push(g.kw("AGGREGATE"));
        let agg = g.pick(&["SUM", "MIN", "MAX", "AVG"]);
        a.push(g.kw(agg));
    }
}

/// MIN or MAX (sometimes neither) in random case.
fn min_max(g: &mut G) -> Vec<u8> {
    let w = g.pick(&["MIN", "MAX", "MIN", "MAX", "MID"]);
    g.kw(w)
}

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("zadd", 10, |g| {
            let mut a = argv![g.kw("ZADD"), g.key()];
            if g.chance(30) {
                for _ in 0..1 + g.rng.below(2) {
                    let flag = g.pick(&["NX", "XX", "GT", "LT", "CH", "INCR"]);
                    a.push(g.kw(flag));
                }
            }
            for _ in 0..1 + g.rng.below(3) {
                a.push(g.score());
                a.push(g.member());
            }
            if g.chance(4) {
                a.pop();
            }
            exact(a)
        }),
        cmd("zincrby", 3, |g| exact(argv!["ZINCRBY", g.key(), g.score(), g.member()])),
        cmd("zrem", 3, |g| {
            let mut a = argv!["ZREM", g.key()];
            a.extend(g.members(3));
            exact(a)
        }),
        cmd("zcard", 3, |g| exact(argv!["ZCARD", g.key()])),
        cmd("zscore", 3, |g| exact(argv!["ZSCORE", g.key(), g.member()])),
        cmd("zmscore", 2, |g| {
            let mut a = argv!["ZMSCORE", g.key()];
            a.extend(g.members(3));
            exact(a)
        }),
        cmd("zcount", 2, |g| exact(argv!["ZCOUNT", g.key(), g.score_bound(), g.score_bound()])),
        cmd("zlexcount", 2, |g| lex(argv!["ZLEXCOUNT", g.key(), g.lex_bound(), g.lex_bound()], 1)),
        cmd("zrange", 6, |g| {
            let mut a = argv!["ZRANGE", g.key()];
            range_spec(g, &mut a);
            withscores(g, &mut a);
            by_lex_or_exact(a, 1)
        }),
        cmd("zrangestore", 2, |g| {
            let mut a = argv!["ZRANGESTORE", g.key(), g.key()];
            range_spec(g, &mut a);
            by_lex_or_exact(a, 2)
        }),
        cmd("zrangebyscore", 3, |g| {
            let mut a = argv!["ZRANGEBYSCORE", g.key(), g.score_bound(), g.score_bound()];
            withscores(g, &mut a);
            limit(g, &mut a);
            exact(a)
        }),
        cmd("zrevrangebyscore", 2, |g| {
            let mut a = argv!["ZREVRANGEBYSCORE", g.key(), g.score_bound(), g.score_bound()];
            withscores(g, &mut a);
            limit(g, &mut a);
            exact(a)
        }),
        cmd("zrangebylex", 2, |g| {
            let mut a = argv!["ZRANGEBYLEX", g.key(), g.lex_bound(), g.lex_bound()];
            limit(g, &mut a);
            lex(a, 1)
        }),
        cmd("zrevrangebylex", 2, |g| {
            let mut a = argv!["ZREVRANGEBYLEX", g.key(), g.lex_bound(), g.lex_bound()];
            limit(g, &mut a);
            lex(a, 1)
        }),
        cmd("zrevrange", 2, |g| {
            let mut a = argv!["ZREVRANGE", g.key(), g.index(), g.index()];
            withscores(g, &mut a);
            exact(a)
        }),
        cmd("zrank", 2, |g| exact(argv!["ZRANK", g.key(), g.member()])),
        cmd("zrevrank", 2, |g| exact(argv!["ZREVRANK", g.key(), g.member()])),
        cmd("zremrangebyscore", 2, |g| {
            exact(argv!["ZREMRANGEBYSCORE", g.key(), g.score_bound(), g.score_bound()])
        }),
        cmd("zremrangebyrank", 2, |g| exact(argv!["ZREMRANGEBYRANK", g.key(), g.index(), g.index()])),
        cmd("zremrangebylex", 2, |g| lex(argv!["ZREMRANGEBYLEX", g.key(), g.lex_bound(), g.lex_bound()], 1)),
        cmd("zpopmin", 2, |g| {
            let mut a = argv!["ZPOPMIN", g.key()];
            if g.chance(50) {
                a.push(g.count());
            }
            exact(a)
        }),
        cmd("zpopmax", 2, |g| {
            let mut a = argv!["ZPOPMAX", g.key()];
            if g.chance(50) {
                a.push(g.count());
            }
            exact(a)
        }),
        cmd("zmpop", 2, |g| mpop(g, "ZMPOP", false, min_max)),
        cmd("bzpopmin", 1, |g| blocking_pop(g, "BZPOPMIN")),
        cmd("bzpopmax", 1, |g| blocking_pop(g, "BZPOPMAX")),
        cmd("bzmpop", 1, |g| mpop(g, "BZMPOP", true, min_max)),
        cmd("zrandmember", 3, |g| {
            let mut a = argv!["ZRANDMEMBER", g.key()];
            let mut count = None;
            let mut with_values = false;
            if g.chance(65) {
                let (c, parsed) = g.random_count(true);
                count = parsed;
                a.push(c);
                if g.chance(40) {
                    a.push(g.kw("WITHSCORES"));
                    with_values = true;
                }
            }
            crate::gen_hash::random(a, Snapshot::Zset, count, with_values)
        }),
        cmd("zunion", 2, |g| {
            let mut a = argv!["ZUNION"];
            combine(g, &mut a, true);
            withscores(g, &mut a);
            exact(a)
        }),
        cmd("zinter", 2, |g| {
            let mut a = argv!["ZINTER"];
            combine(g, &mut a, true);
            withscores(g, &mut a);
            exact(a)
        }),
        cmd("zdiff", 2, |g| {
            let mut a = argv!["ZDIFF"];
            combine(g, &mut a, false);
            withscores(g, &mut a);
            exact(a)
        }),
        cmd("zunionstore", 2, |g| {
            let mut a = argv!["ZUNIONSTORE", g.key()];
            combine(g, &mut a, true);
            exact(a)
        }),
        cmd("zinterstore", 2, |g| {
            let mut a = argv!["ZINTERSTORE", g.key()];
            combine(g, &mut a, true);
            exact(a)
        }),
        cmd("zdiffstore", 2, |g| {
            let mut a = argv!["ZDIFFSTORE", g.key()];
            combine(g, &mut a, false);
            exact(a)
        }),
        cmd("zintercard", 2, |g| {
            let mut a = argv!["ZINTERCARD"];
            crate::gen_set::numkeys(g, &mut a);
            if g.chance(30) {
                a.push(g.kw("LIMIT"));
                a.push(g.pick(&["0", "1", "2", "-1", "x"]).arg());
            }
            exact(a)
        }),
        cmd("zscan", 2, |g| {
            let mut a = argv!["ZSCAN", g.key(), "0"];
            crate::gen_keyspace::scan_options(g, &mut a);
            Op { argv: a, cmp: Cmp::Scan { cursor_arg: 2, pairs: true } }
        }),
    ]
}
