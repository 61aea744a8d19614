//! Generic commands: TOUCH, WAIT, LCS (LEN, IDX, MINMATCHLEN, WITHMATCHLEN), SORT and
//! SORT_RO, OBJECT's error forms and HELP, and DUMP of a missing key.
//!
//! SORT patterns reach the pool: `k*` turns the member `1` into the key `k1`, `*` makes the
//! member itself a key (the pool has the key ``), `*->a` reads field `a` of such a hash.
//! Orders Redis leaves open are not asked for: `BY nosort` on a set is compared as a
//! multiset and without LIMIT, ALPHA is not combined with a BY pattern (ties between equal
//! weights come out in `qsort`'s order), and ALPHA without STORE is compared as a multiset
//! and without LIMIT (C-string ties such as "" and "\0" keep Redis' hash order for sets
//! and sorted sets, and a LIMIT may cut between them). OBJECT ENCODING/REFCOUNT of live keys
//! are not compared here: Redis' answer depends on each value's history (an APPENDed string
//! is `raw`, a shrunk hash stays `hashtable`), which tests/generic_commands.rs covers on
//! fresh keys.

use crate::kit::*;

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("touch", 3, |g| {
            let mut a = argv!["TOUCH"];
            a.extend(g.keys(4));
            exact(a)
        }),
        cmd("wait", 1, |g| {
            // Redis waits out the timeout when asked for replicas it does not have (the
            // engine blocks, which the runner does not wait for): short timeouts only then.
            let numreplicas = g.pick(&["0", "x", "-1", "1.5", "1", "2"]);
            let timeout = match numreplicas {
                "1" | "2" => g.pick(&["10", "1", "-1", "x", "1.5"]),
                _ => g.pick(&["0", "10", "-1", "x", "1.5"]),
            };
            exact(argv!["WAIT", numreplicas, timeout])
        }),
        cmd("lcs", 6, |g| {
            let mut a = argv!["LCS", g.key(), g.key()];
            for _ in 0..g.rng.below(4) {
                match g.rng.below(6) {
                    0 => a.push(g.kw("LEN")),
                    1 | 2 => a.push(g.kw("IDX")),
                    3 => a.push(g.kw("WITHMATCHLEN")),
                    4 => {
                        a.push(g.kw("MINMATCHLEN"));
                        if !g.chance(5) {
                            a.push(g.pick(&["0", "1", "2", "3", "-2", "x"]).arg());
                        }
                    }
                    _ => a.push("NOPE".arg()),
                }
            }
            exact(a)
        }),
        cmd("object", 2, |g| {
            let sub = g.pick(&["ENCODING", "REFCOUNT", "IDLETIME", "FREQ", "HELP", "NOPE", "encoding"]);
            let mut a = argv!["OBJECT", sub];
            // Keys are compared only where the answer does not depend on history: missing
            // ones, or the wrong number of arguments. The live key comes second, so that the
            // suite's dropping of trailing arguments never leaves it alone.
            match g.rng.below(3) {
                0 => a.push("no-such-key".arg()),
                1 => {
                    a.push("no-such-key".arg());
                    a.push(g.key());
                }
                _ => {}
            }
            exact(a)
        }),
        cmd("dump", 1, |_| exact(argv!["DUMP", "no-such-key"])),
        cmd("sort", 8, |g| sort_op(g, false)),
        cmd("sort_ro", 3, |g| sort_op(g, true)),
    ]
}

fn sort_op(g: &mut G, readonly: bool) -> Op {
    let mut a = argv![if readonly { "SORT_RO" } else { "SORT" }, g.key()];
    let nosort = g.chance(25);
    let by_pattern = !nosort && g.chance(40);
    if nosort {
        a.push(g.kw("BY"));
        a.push(g.pick(&["nosort", "k", "#"]).arg());
    } else if by_pattern {
        a.push(g.kw("BY"));
        a.push(g.pick(&["k*", "*", "k*->a", "*->b", "x*y"]).arg());
    }
    // ALPHA without STORE compares C strings: "" and "\0" tie, and Redis leaves tied members
    // of a set or sorted set in its hash order, so a LIMIT could cut between them.
    let alpha = !by_pattern && g.chance(40);
    let store = g.chance(15);
    let open_ties = alpha && !store;
    if !nosort && !open_ties && g.chance(30) {
        a.push(g.kw("LIMIT"));
        a.push(g.pick(&["0", "1", "2", "-1", "100", "x"]).arg());
        a.push(g.pick(&["0", "1", "3", "-1", "-5", "100"]).arg());
    }
    for _ in 0..g.rng.below(3) {
        a.push(g.kw("GET"));
        a.push(g.pick(&["#", "k*", "*", "k*->a", "*->a", "nokey*"]).arg());
    }
    if g.chance(40) {
        a.push(g.pick_kw(&["ASC", "DESC"]));
    }
    if alpha {
        a.push(g.kw("ALPHA"));
    }
    if store {
        a.push(g.kw("STORE"));
        a.push(g.key());
    }
    if g.chance(3) {
        a.push("BOGUS".arg());
    }
    if nosort || open_ties { unordered(a) } else { exact(a) }
}
