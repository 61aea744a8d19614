//! String commands: GET SET (NX XX GET EX PX EXAT PXAT KEEPTTL) SETNX SETEX PSETEX GETSET
//! GETDEL GETEX MGET MSET MSETNX APPEND STRLEN GETRANGE SUBSTR SETRANGE INCR DECR INCRBY
//! DECRBY INCRBYFLOAT.

use crate::kit::*;

/// An expiry option for SET/GETEX (relative ones never elapse during a run).
fn expiry(g: &mut G, a: &mut Vec<Vec<u8>>) {
    match g.rng.below(5) {
        0 => {
            a.push(g.kw("EX"));
            a.push(g.seconds());
        }
        1 => {
            a.push(g.kw("PX"));
            a.push(g.millis());
        }
        2 => {
            a.push(g.kw("EXAT"));
            a.push(g.unix_seconds());
        }
        3 => {
            a.push(g.kw("PXAT"));
            a.push(g.unix_millis());
        }
        _ => a.push(g.kw("EX")), // missing value: syntax error
    }
}

fn offset(g: &mut G) -> Vec<u8> {
    // The largest valid offset makes a 512 MB string: only where the store holds it cheaply.
    let largest = if crate::HUGE_VALUES { "536870911" } else { "1048575" };
    g.pick(&["0", "1", "3", "10", "100", "-1", largest, "536870912", "x", "9223372036854775807"]).arg()
}

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("get", 8, |g| exact(argv!["GET", g.key()])),
        cmd("set", 10, |g| {
            let mut a = argv![g.kw("SET"), g.key(), g.value()];
            for _ in 0..g.rng.below(4) {
                match g.rng.below(5) {
                    0 => a.push(g.pick_kw(&["NX", "XX"])),
                    1 => a.push(g.kw("GET")),
                    2 => a.push(g.kw("KEEPTTL")),
                    3 => expiry(g, &mut a),
                    _ => {
                        if g.chance(10) {
                            a.push("BOGUS".arg())
                        }
                    }
                }
            }
            exact(a)
        }),
        cmd("setnx", 3, |g| exact(argv!["SETNX", g.key(), g.value()])),
        cmd("setex", 2, |g| exact(argv!["SETEX", g.key(), g.seconds(), g.value()])),
        cmd("psetex", 2, |g| exact(argv!["PSETEX", g.key(), g.millis(), g.value()])),
        cmd("getset", 2, |g| exact(argv!["GETSET", g.key(), g.value()])),
        cmd("getdel", 2, |g| exact(argv!["GETDEL", g.key()])),
        cmd("getex", 3, |g| {
            let mut a = argv!["GETEX", g.key()];
            match g.rng.below(4) {
                0 => {}
                1 => a.push(g.kw("PERSIST")),
                2 => expiry(g, &mut a),
                _ => {
                    expiry(g, &mut a);
                    a.push(g.pick_kw(&["PERSIST", "EX", "BOGUS"]));
                }
            }
            exact(a)
        }),
        cmd("mget", 3, |g| {
            let mut a = argv!["MGET"];
            a.extend(g.keys(4));
            exact(a)
        }),
        cmd("mset", 3, |g| {
            let mut a = argv!["MSET"];
            for _ in 0..1 + g.rng.below(3) {
                a.push(g.key());
                a.push(g.value());
            }
            if g.chance(5) {
                a.pop();
            }
            exact(a)
        }),
        cmd("msetnx", 2, |g| {
            let mut a = argv!["MSETNX"];
            for _ in 0..1 + g.rng.below(3) {
                a.push(g.key());
                a.push(g.value());
            }
            exact(a)
        }),
        cmd("append", 4, |g| exact(argv!["APPEND", g.key(), g.value()])),
        cmd("strlen", 3, |g| exact(argv!["STRLEN", g.key()])),
        cmd("getrange", 3, |g| exact(argv!["GETRANGE", g.key(), g.index(), g.index()])),
        cmd("substr", 1, |g| exact(argv!["SUBSTR", g.key(), g.index(), g.index()])),
        cmd("setrange", 3, |g| exact(argv!["SETRANGE", g.key(), offset(g), g.value()])),
        cmd("incr", 4, |g| exact(argv!["INCR", g.key()])),
        cmd("decr", 3, |g| exact(argv!["DECR", g.key()])),
        cmd("incrby", 3, |g| exact(argv!["INCRBY", g.key(), g.int()])),
        cmd("decrby", 3, |g| exact(argv!["DECRBY", g.key(), g.int()])),
        cmd("incrbyfloat", 3, |g| exact(argv!["INCRBYFLOAT", g.key(), g.float()])),
    ]
}
