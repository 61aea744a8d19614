//! HyperLogLog commands: PFADD (few to thousands of elements, so sparse HLLs split, merge
//! and turn dense), PFDEBUG (registers, sparse opcodes, encoding, conversion), PFCOUNT of one key (the cache Redis writes back is compared through GET)
//! and of many keys, PFMERGE into new, sparse and dense targets, and hand-made payloads:
//! a valid empty sparse HLL, a truncated header, a bad magic, a wrong dense length, a
//! sparse HLL whose runs stop short (INVALIDOBJ) and one with a fresh cache.

use crate::kit::*;

/// An element: a small shared vocabulary so HLLs overlap, sometimes binary.
fn element(g: &mut G) -> Vec<u8> {
    if g.chance(5) { g.value() } else { format!("e{}", g.rng.range(0, 5000)).into_bytes() }
}

/// A hand-made payload (header: `HYLL`, encoding, 3 unused, 8 cache bytes).
fn payload(g: &mut G) -> Vec<u8> {
    let header = |enc: u8, cache: [u8; 8]| {
        let mut v = b"HYLL".to_vec();
        v.extend_from_slice(&[enc, 0, 0, 0]);
        v.extend_from_slice(&cache);
        v
    };
    let stale = [0, 0, 0, 0, 0, 0, 0, 0x80];
    match g.rng.below(7) {
        0 => [header(1, [0; 8]), vec![0x7F, 0xFF]].concat(),
        1 => b"HYLL\x01\x00".to_vec(),
        2 => [b"HYLX".to_vec(), header(1, stale)[4..].to_vec(), vec![0x7F, 0xFF]].concat(),
        3 => [header(0, stale), vec![0; 100]].concat(),
        4 => [header(1, stale), vec![0x7F, 0xF0]].concat(),
        5 => [header(1, [7, 0, 0, 0, 0, 0, 0, 0]), vec![0x7F, 0xFF]].concat(),
        _ => [header(1, stale), vec![0x83, 0x7F, 0xFE]].concat(),
    }
}

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("pfadd", 12, |g| {
            let mut a = argv!["PFADD", g.key()];
            // Mostly small; sometimes enough to grow the sparse form past 3000 bytes.
            let n = match g.rng.below(20) {
                0 | 1 => 0,
                2..=13 => 1 + g.rng.below(5),
                14..=18 => 50 + g.rng.below(250),
                _ => 1500 + g.rng.below(1000),
            };
            a.extend((0..n).map(|_| element(g)));
            exact(a)
        }),
        cmd("pfcount", 8, |g| {
            let mut a = argv!["PFCOUNT"];
            let max = if g.chance(60) { 1 } else { 4 };
            a.extend(g.keys(max));
            exact(a)
        }),
        cmd("pfmerge", 4, |g| {
            let mut a = argv!["PFMERGE", g.key()];
            let n = g.rng.below(4);
            a.extend(g.keys(3).into_iter().take(n));
            exact(a)
        }),
        cmd("set", 1, |g| exact(argv!["SET", g.key(), payload(g)])),
        cmd("get", 2, |g| exact(argv!["GET", g.key()])),
        cmd("pfdebug", 3, |g| {
            let sub = g.pick(&["ENCODING", "GETREG", "DECODE", "TODENSE", "decode", "NOPE"]);
            let mut a = argv!["PFDEBUG", sub, g.key()];
            if g.chance(5) {
                a.push(b"extra".to_vec());
            }
            if sub.eq_ignore_ascii_case("decode") { decode(a, 2) } else { exact(a) }
        }),
    ]
}
