//! Transactions and several clients: MULTI EXEC DISCARD WATCH UNWATCH, and switches between
//! [`CONNS`] client connections, so one client's writes meet another's WATCH and MULTI.
//! Inside a MULTI the runner sends only commands it can compare exactly (or as unordered
//! arrays) and compares EXEC's array element by element with each queued command's mode.

use crate::kit::*;

/// How many client connections each side has.
pub const CONNS: usize = 3;

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("multi", 6, |_| exact(argv!["MULTI"])),
        cmd("exec", 5, |_| Op { argv: argv!["EXEC"], cmp: Cmp::Exec }),
        cmd("discard", 1, |_| exact(argv!["DISCARD"])),
        cmd("watch", 4, |g| {
            let mut a = argv!["WATCH"];
            a.extend(g.keys(3));
            exact(a)
        }),
        cmd("unwatch", 1, |_| exact(argv!["UNWATCH"])),
        cmd("conn", 8, |g| {
            let n = g.rng.below(CONNS);
            Op { argv: argv!["\u{0}CONN", n.to_string()], cmp: Cmp::Conn(n) }
        }),
    ]
}
