//! Stream commands: XADD XLEN XRANGE XREVRANGE XDEL XTRIM XREAD XREADGROUP XGROUP XACK
//! XPENDING (summary) XCLAIM XAUTOCLAIM XINFO GROUPS XSETID.
//!
//! Ids are explicit so both sides agree: most XADDs take the next value of a counter shared
//! by the whole run (ids grow, so most succeed), some an old or malformed id (errors).
//! Not generated: `*` ids (each side's clock picks its own), replies that carry idle times
//! (XPENDING's extended form, XINFO CONSUMERS and STREAM), and `~` trimming (Redis removes
//! whole nodes, whose boundaries after an XDEL this engine does not track; the TCL suite
//! covers `~`).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::kit::*;

/// The milliseconds of the next fresh id.
static NEXT_MS: AtomicU64 = AtomicU64::new(1);

fn fresh_ms() -> u64 {
    NEXT_MS.fetch_add(1 + u64::from(NEXT_MS.load(Ordering::Relaxed).is_multiple_of(3)), Ordering::Relaxed)
}

/// An id for XADD: fresh, `<ms>-*`, old, or not an id.
fn add_id(g: &mut G) -> Vec<u8> {
    match g.rng.below(20) {
        0..=11 => format!("{}-{}", fresh_ms(), g.rng.below(3)).into_bytes(),
        12..=15 => format!("{}-*", fresh_ms()).into_bytes(),
        16 => format!("{}-*", g.rng.below(5)).into_bytes(),
        17 => format!("{}", g.rng.below(5)).into_bytes(),
        _ => g.pick(&["0-0", "x", "1-x", "-", "+", "18446744073709551615-18446744073709551615"]).arg(),
    }
}

/// An id to read or delete by: near the ids in use, or an edge.
fn id(g: &mut G) -> Vec<u8> {
    let near = NEXT_MS.load(Ordering::Relaxed);
    match g.rng.below(10) {
        0..=5 => format!("{}-{}", near.saturating_sub(g.rng.below(30) as u64), g.rng.below(3)).into_bytes(),
        6 => format!("{}", near.saturating_sub(g.rng.below(30) as u64)).into_bytes(),
        7 => g.pick(&["0-0", "0", "1-0"]).arg(),
        8 => g.pick(&["18446744073709551615-18446744073709551615", "18446744073709551615"]).arg(),
        _ => g.pick(&["x", "", "-1", "1-2-3"]).arg(),
    }
}

/// A range bound: an id, `(id`, `-` or `+`.
fn bound(g: &mut G) -> Vec<u8> {
    match g.rng.below(6) {
        0 => b"-".to_vec(),
        1 => b"+".to_vec(),
        2 => [b"(".to_vec(), id(g)].concat(),
        _ => id(g),
    }
}

fn group(g: &mut G) -> Vec<u8> {
    g.pick(&["g1", "g1", "g2", "nogroup"]).arg()
}

fn consumer(g: &mut G) -> Vec<u8> {
    g.pick(&["alice", "bob", "carol", ""]).arg()
}

fn count_opt(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(50) {
        a.push(g.kw("COUNT"));
        a.push(g.pick(&["1", "2", "3", "0", "-1", "x", "100"]).arg());
    }
}

/// `MAXLEN [=] n` or `MINID [=] id`, exact.
fn trim_opts(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(50) {
        a.push(g.kw("MAXLEN"));
        if g.chance(30) {
            a.push(b"=".to_vec());
        }
        a.push(g.pick(&["0", "1", "2", "5", "-1", "x"]).arg());
    } else {
        a.push(g.kw("MINID"));
        if g.chance(30) {
            a.push(b"=".to_vec());
        }
        a.push(id(g));
    }
    if g.chance(5) {
        a.push(g.kw("LIMIT"));
        a.push(b"10".to_vec());
    }
}

fn fields(g: &mut G, a: &mut Vec<Vec<u8>>) {
    for _ in 0..1 + g.rng.below(3) {
        a.push(g.member());
        a.push(g.value());
    }
    if g.chance(3) {
        a.push(g.member());
    }
}

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("xadd", 16, |g| {
            let mut a = argv![g.kw("XADD"), g.key()];
            if g.chance(10) {
                a.push(g.kw("NOMKSTREAM"));
            }
            if g.chance(15) {
                trim_opts(g, &mut a);
            }
            a.push(add_id(g));
            fields(g, &mut a);
            exact(a)
        }),
        cmd("xlen", 3, |g| exact(argv!["XLEN", g.key()])),
        cmd("xrange", 5, |g| {
            let mut a = argv![g.kw("XRANGE"), g.key(), bound(g), bound(g)];
            count_opt(g, &mut a);
            exact(a)
        }),
        cmd("xrevrange", 3, |g| {
            let mut a = argv!["XREVRANGE", g.key(), bound(g), bound(g)];
            count_opt(g, &mut a);
            exact(a)
        }),
        cmd("xdel", 3, |g| {
            let mut a = argv!["XDEL", g.key()];
            a.extend((0..1 + g.rng.below(3)).map(|_| id(g)));
            exact(a)
        }),
        cmd("xtrim", 2, |g| {
            let mut a = argv!["XTRIM", g.key()];
            trim_opts(g, &mut a);
            exact(a)
        }),
        cmd("xread", 4, |g| {
            let mut a = argv![g.kw("XREAD")];
            count_opt(g, &mut a);
            if g.chance(20) {
                a.push(g.kw("BLOCK"));
                a.push(g.pick(&["1", "5", "x", "-1"]).arg());
            }
            a.push(g.kw("STREAMS"));
            let keys = g.keys(2);
            let ids: Vec<Vec<u8>> = keys.iter().map(|_| if g.chance(20) { b"$".to_vec() } else { id(g) }).collect();
            a.extend(keys);
            a.extend(ids);
            exact(a)
        }),
        cmd("xgroup", 6, |g| {
            let key = g.key();
            exact(match g.rng.below(7) {
                0..=2 => {
                    let start = if g.chance(30) { b"$".to_vec() } else { id(g) };
                    let mut a = argv!["XGROUP", g.kw("CREATE"), key, group(g), start];
                    if g.chance(60) {
                        a.push(g.kw("MKSTREAM"));
                    }
                    if g.chance(15) {
                        a.push(g.kw("ENTRIESREAD"));
                        a.push(g.pick(&["0", "3", "-1", "-2"]).arg());
                    }
                    a
                }
                3 => argv!["XGROUP", "SETID", key, group(g), if g.chance(30) { b"$".to_vec() } else { id(g) }],
                4 => argv!["XGROUP", "DESTROY", key, group(g)],
                5 => argv!["XGROUP", "CREATECONSUMER", key, group(g), consumer(g)],
                _ => argv!["XGROUP", "DELCONSUMER", key, group(g), consumer(g)],
            })
        }),
        cmd("xreadgroup", 8, |g| {
            let mut a = argv![g.kw("XREADGROUP"), "GROUP", group(g), consumer(g)];
            count_opt(g, &mut a);
            if g.chance(10) {
                a.push(g.kw("NOACK"));
            }
            a.push(g.kw("STREAMS"));
            let key = g.key();
            a.push(key);
            a.push(if g.chance(70) { b">".to_vec() } else { id(g) });
            exact(a)
        }),
        cmd("xack", 4, |g| {
            let mut a = argv!["XACK", g.key(), group(g)];
            a.extend((0..1 + g.rng.below(3)).map(|_| id(g)));
            exact(a)
        }),
        cmd("xpending", 3, |g| exact(argv!["XPENDING", g.key(), group(g)])),
        cmd("xclaim", 3, |g| {
            let mut a = argv!["XCLAIM", g.key(), group(g), consumer(g), "0"];
            a.extend((0..1 + g.rng.below(3)).map(|_| id(g)));
            for _ in 0..g.rng.below(3) {
                match g.rng.below(4) {
                    0 => a.push(g.kw("JUSTID")),
                    1 => a.push(g.kw("FORCE")),
                    2 => a.extend([g.kw("RETRYCOUNT"), g.pick(&["0", "5", "x"]).arg()]),
                    _ => a.extend([g.kw("LASTID"), id(g)]),
                }
            }
            exact(a)
        }),
        cmd("xautoclaim", 3, |g| {
            let mut a = argv!["XAUTOCLAIM", g.key(), group(g), consumer(g), "0", bound(g)];
            if g.chance(50) {
                a.extend([g.kw("COUNT"), g.pick(&["1", "2", "0", "x"]).arg()]);
            }
            if g.chance(30) {
                a.push(g.kw("JUSTID"));
            }
            exact(a)
        }),
        cmd("xinfo", 3, |g| exact(argv!["XINFO", "GROUPS", g.key()])),
        cmd("xsetid", 2, |g| {
            let mut a = argv!["XSETID", g.key(), id(g)];
            if g.chance(30) {
                a.extend([g.kw("ENTRIESADDED"), g.pick(&["0", "5", "100", "-1"]).arg()]);
            }
            if g.chance(20) {
                a.extend([g.kw("MAXDELETEDID"), id(g)]);
            }
            exact(a)
        }),
    ]
}
