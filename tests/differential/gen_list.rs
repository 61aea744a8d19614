//! List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LINDEX LRANGE LSET LREM LINSERT
//! LTRIM LPOS LMOVE RPOPLPUSH LMPOP.

use crate::kit::*;

fn side(g: &mut G) -> Vec<u8> {
    let s = g.pick(&["LEFT", "RIGHT", "LEFT", "RIGHT", "MIDDLE"]);
    g.kw(s)
}

fn pop(g: &mut G, name: &str) -> Op {
    let mut a = argv![name, g.key()];
    if g.chance(40) {
        a.push(g.count());
    }
    exact(a)
}

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("lpush", 8, |g| {
            let mut a = argv![g.kw("LPUSH"), g.key()];
            a.extend(g.members(4));
            exact(a)
        }),
        cmd("rpush", 8, |g| {
            let mut a = argv!["RPUSH", g.key()];
            a.extend(g.members(4));
            exact(a)
        }),
        cmd("lpushx", 2, |g| {
            let mut a = argv!["LPUSHX", g.key()];
            a.extend(g.members(2));
            exact(a)
        }),
        cmd("rpushx", 2, |g| {
            let mut a = argv!["RPUSHX", g.key()];
            a.extend(g.members(2));
            exact(a)
        }),
        cmd("lpop", 4, |g| pop(g, "LPOP")),
        cmd("rpop", 4, |g| pop(g, "RPOP")),
        cmd("llen", 3, |g| exact(argv!["LLEN", g.key()])),
        cmd("lindex", 3, |g| exact(argv!["LINDEX", g.key(), g.index()])),
        cmd("lrange", 5, |g| exact(argv!["LRANGE", g.key(), g.index(), g.index()])),
        cmd("lset", 3, |g| exact(argv!["LSET", g.key(), g.index(), g.member()])),
        cmd("lrem", 3, |g| exact(argv!["LREM", g.key(), g.index(), g.member()])),
        cmd("linsert", 3, |g| {
            let w = g.pick(&["BEFORE", "AFTER", "AFTER", "BEFORE", "AROUND"]);
            exact(argv!["LINSERT", g.key(), g.kw(w), g.member(), g.member()])
        }),
        cmd("ltrim", 3, |g| exact(argv!["LTRIM", g.key(), g.index(), g.index()])),
        cmd("lpos", 3, |g| {
            let mut a = argv!["LPOS", g.key(), g.member()];
            for _ in 0..g.rng.below(3) {
                match g.rng.below(4) {
                    0 => {
                        a.push(g.kw("RANK"));
                        a.push(g.pick(&["1", "2", "-1", "-2", "0", "-9223372036854775808", "x"]).arg());
                    }
                    1 => {
                        a.push(g.kw("COUNT"));
                        a.push(g.pick(&["0", "1", "2", "-1", "x"]).arg());
                    }
                    2 => {
                        a.push(g.kw("MAXLEN"));
                        a.push(g.pick(&["0", "1", "3", "-1"]).arg());
                    }
                    _ => a.push("BOGUS".arg()),
                }
            }
            exact(a)
        }),
        cmd("lmove", 3, |g| exact(argv!["LMOVE", g.key(), g.key(), side(g), side(g)])),
        cmd("rpoplpush", 2, |g| exact(argv!["RPOPLPUSH", g.key(), g.key()])),
        cmd("lmpop", 3, |g| mpop(g, "LMPOP", false, side)),
        // The blocking forms with short timeouts: served at once, or nil once the timeout
        // passes on Redis and at once from the engine (which leaves a block no one takes).
        cmd("blpop", 1, |g| blocking_pop(g, "BLPOP")),
        cmd("brpop", 1, |g| blocking_pop(g, "BRPOP")),
        cmd("blmove", 1, |g| exact(argv!["BLMOVE", g.key(), g.key(), side(g), side(g), g.block_timeout()])),
        cmd("brpoplpush", 1, |g| exact(argv!["BRPOPLPUSH", g.key(), g.key(), g.block_timeout()])),
        cmd("blmpop", 1, |g| mpop(g, "BLMPOP", true, side)),
    ]
}
