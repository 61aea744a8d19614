//! Keyspace and connection commands: DEL UNLINK EXISTS TYPE PING ECHO SELECT, expiry
//! (EXPIRE… with NX/XX/GT/LT, TTL…, PERSIST), RENAME RENAMENX COPY SCAN KEYS RANDOMKEY DBSIZE.

use crate::kit::*;

/// Expiry options, including invalid combinations.
fn expire_flags(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(40) {
        a.push(g.pick_kw(&["NX", "XX", "GT", "LT", "XY"]));
        if g.chance(15) {
            a.push(g.pick_kw(&["NX", "XX", "GT", "LT", "XY"]));
        }
    }
}

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("del", 6, |g| {
            let mut a = argv!["DEL"];
            a.extend(g.keys(3));
            exact(a)
        }),
        cmd("unlink", 3, |g| {
            let mut a = argv!["UNLINK"];
            a.extend(g.keys(3));
            exact(a)
        }),
        cmd("exists", 5, |g| {
            let mut a = argv!["EXISTS"];
            a.extend(g.keys(4));
            exact(a)
        }),
        cmd("type", 5, |g| exact(argv!["TYPE", g.key()])),
        cmd("ping", 1, |g| if g.chance(50) { exact(argv!["PING"]) } else { exact(argv!["PING", g.value()]) }),
        cmd("echo", 1, |g| exact(argv!["ECHO", g.value()])),
        cmd("select", 1, |g| {
            let db = g.pick(&["0", "0", "0", "1", "15", "16", "-1", "x", ""]);
            exact(argv!["SELECT", db])
        }),
        cmd("expire", 3, |g| {
            let mut a = argv![g.kw("EXPIRE"), g.key(), g.seconds()];
            expire_flags(g, &mut a);
            exact(a)
        }),
        cmd("pexpire", 2, |g| {
            let mut a = argv!["PEXPIRE", g.key(), g.millis()];
            expire_flags(g, &mut a);
            exact(a)
        }),
        cmd("expireat", 3, |g| {
            let mut a = argv!["EXPIREAT", g.key(), g.unix_seconds()];
            expire_flags(g, &mut a);
            exact(a)
        }),
        cmd("pexpireat", 2, |g| {
            let mut a = argv!["PEXPIREAT", g.key(), g.unix_millis()];
            expire_flags(g, &mut a);
            exact(a)
        }),
        cmd("ttl", 3, |g| within_seconds(argv!["TTL", g.key()], 2)),
        cmd("pttl", 3, |g| within_millis(argv!["PTTL", g.key()], 2000)),
        cmd("expiretime", 2, |g| within_seconds(argv!["EXPIRETIME", g.key()], 2)),
        cmd("pexpiretime", 2, |g| within_millis(argv!["PEXPIRETIME", g.key()], 2000)),
        cmd("persist", 2, |g| exact(argv!["PERSIST", g.key()])),
        cmd("rename", 3, |g| exact(argv!["RENAME", g.key(), g.key()])),
        cmd("renamenx", 2, |g| exact(argv!["RENAMENX", g.key(), g.key()])),
        cmd("move", 2, |g| {
            let db = g.pick(&["0", "1", "1", "15", "16", "-1", "x", "4294967296"]);
            exact(argv!["MOVE", g.key(), db])
        }),
        cmd("swapdb", 1, |g| {
            let a = g.pick(&["0", "0", "1", "15", "16", "x"]);
            let b = g.pick(&["0", "1", "1", "15", "-1", "1.5"]);
            exact(argv!["SWAPDB", a, b])
        }),
        cmd("copy", 3, |g| {
            let mut a = argv!["COPY", g.key(), g.key()];
            if g.chance(20) {
                a.push(g.kw("DB"));
                a.push(g.pick(&["0", "1", "16", "x"]).arg());
            }
            if g.chance(40) {
                a.push(g.kw("REPLACE"));
            }
            if g.chance(3) {
                a.push("BOGUS".arg());
            }
            exact(a)
        }),
        cmd("scan", 2, |g| {
            if g.chance(5) {
                return exact(argv!["SCAN", g.pick(&["x", "18446744073709551616", "1.5"])]);
            }
            let mut a = argv!["SCAN", "0"];
            scan_options(g, &mut a);
            if g.chance(20) {
                // Not "none": Redis 7.0 lists under TYPE none the expired keys its active
                // expiry has not reclaimed yet (the type lookup deletes the key, so the expiry
                // filter after it passes), which depends on Redis' timing.
                a.push(g.kw("TYPE"));
                a.push(g.pick(&["string", "list", "set", "zset", "hash", "STRING", "nosuchtype"]).arg());
            }
            Op { argv: a, cmp: Cmp::Scan { cursor_arg: 1, pairs: false } }
        }),
        cmd("keys", 2, |g| unordered(argv!["KEYS", g.pattern()])),
        cmd("randomkey", 1, |_| Op {
            argv: argv!["RANDOMKEY"],
            cmp: Cmp::Random(Random {
                snapshot: Snapshot::Keys,
                count: None,
                with_values: false,
                pops: false,
            }),
        }),
        cmd("dbsize", 1, |_| Op { argv: argv!["DBSIZE"], cmp: Cmp::DbSize }),
    ]
}

/// `[MATCH pattern] [COUNT n]` for the SCAN family, sometimes invalid.
pub fn scan_options(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(40) {
        a.push(g.kw("MATCH"));
        a.push(g.pattern());
    }
    if g.chance(40) {
        a.push(g.kw("COUNT"));
        a.push(g.pick(&["1", "2", "10", "1000", "0", "-1", "x"]).arg());
    }
    if g.chance(3) {
        a.push("NOPE".arg());
    }
}
