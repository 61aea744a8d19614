//! Generic commands: TOUCH, WAIT, LCS (LEN, IDX, MINMATCHLEN, WITHMATCHLEN), OBJECT's error
//! forms and HELP, and DUMP of a missing key. OBJECT ENCODING/REFCOUNT of live keys are not
//! compared here: Redis' answer depends on each value's history (an APPENDed string is `raw`,
//! a shrunk hash stays `hashtable`), which tests/generic_commands.rs covers on fresh keys.

use crate::kit::*;

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("touch", 3, |g| {
            let mut a = argv!["TOUCH"];
            a.extend(g.keys(4));
            exact(a)
        }),
        cmd("wait", 1, |g| {
            // Redis waits out the timeout when asked for replicas it does not have; the
            // engine answers 0 at once (no replica can ever acknowledge), so only counts it
            // already meets are compared.
            let numreplicas = g.pick(&["0", "x", "-1", "1.5"]);
            let timeout = g.pick(&["0", "10", "-1", "x", "1.5"]);
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
            // ones, or the wrong number of arguments.
            match g.rng.below(3) {
                0 => a.push("no-such-key".arg()),
                1 => {
                    a.push(g.key());
                    a.push(g.key());
                }
                _ => {}
            }
            exact(a)
        }),
        cmd("dump", 1, |_| exact(argv!["DUMP", "no-such-key"])),
    ]
}
