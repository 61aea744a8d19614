//! Bitmap commands: SETBIT GETBIT BITCOUNT (BYTE|BIT) BITPOS (BYTE|BIT) BITOP (AND OR XOR
//! NOT) BITFIELD BITFIELD_RO (every type width, WRAP/SAT/FAIL, `#n` offsets). Offsets favour
//! byte and 1024-byte fragment edges; offsets past 2^32-1 and malformed ones test the errors.
//! Writes stay below 2^23 bits so a run never builds Redis' 512 MB string (2^32-1 is read).

use crate::kit::*;

/// A bit offset for a write.
fn offset(g: &mut G) -> Vec<u8> {
    if g.chance(60) {
        return g.rng.range(0, 64).arg();
    }
    g.pick(&[
        "0",
        "7",
        "8",
        "8191",
        "8192",
        "8193",
        "16383",
        "16384",
        "65536",
        "100000",
        "8388607",
        "-1",
        "4294967296",
        "x",
        "1.5",
        "",
    ])
    .arg()
}

/// A bit offset for a read (may be huge).
fn read_offset(g: &mut G) -> Vec<u8> {
    if g.chance(10) { "4294967295".arg() } else { offset(g) }
}

fn bit(g: &mut G) -> Vec<u8> {
    if g.chance(90) { g.pick(&["0", "1"]).arg() } else { g.pick(&["2", "-1", "x", "01"]).arg() }
}

/// A BITCOUNT/BITPOS index: small, negative, or an edge.
fn index(g: &mut G) -> Vec<u8> {
    if g.chance(80) {
        g.rng.range(-40, 40).arg()
    } else {
        g.pick(&["9223372036854775807", "-9223372036854775808", "1030", "-1030", "x"]).arg()
    }
}

fn unit(g: &mut G) -> Vec<u8> {
    if g.chance(90) { g.pick_kw(&["BYTE", "BIT"]) } else { "bits".arg() }
}

fn field_type(g: &mut G) -> Vec<u8> {
    if g.chance(92) {
        let signed = g.chance(50);
        let bits = if signed { g.rng.range(1, 64) } else { g.rng.range(1, 63) };
        format!("{}{bits}", if signed { 'i' } else { 'u' }).into_bytes()
    } else {
        g.pick(&["u64", "i65", "i0", "I8", "i08", "x", "u"]).arg()
    }
}

fn field_offset(g: &mut G) -> Vec<u8> {
    if g.chance(20) { format!("#{}", g.rng.range(0, 12)).into_bytes() } else { offset(g) }
}

fn field_value(g: &mut G) -> Vec<u8> {
    if g.chance(60) {
        g.rng.range(-300, 300).arg()
    } else {
        g.pick(&["9223372036854775807", "-9223372036854775808", "4294967295", "-128", "127", "255", "x"])
            .arg()
    }
}

fn bitfield_ops(g: &mut G, a: &mut Vec<Vec<u8>>, read_only: bool) {
    for _ in 0..1 + g.rng.below(4) {
        match g.rng.below(if read_only { 12 } else { 10 }) {
            0..=2 => a.extend([g.kw("GET"), field_type(g), field_offset(g)]),
            3..=4 => a.extend([g.kw("SET"), field_type(g), field_offset(g), field_value(g)]),
            5..=6 => a.extend([g.kw("INCRBY"), field_type(g), field_offset(g), field_value(g)]),
            7..=8 => {
                let how = if g.chance(95) { g.pick_kw(&["WRAP", "SAT", "FAIL"]) } else { "BOGUS".arg() };
                a.extend([g.kw("OVERFLOW"), how]);
            }
            9 => a.push(g.pick_kw(&["GET", "BOGUS"])),
            _ => a.extend([g.kw("GET"), field_type(g), field_offset(g)]),
        }
    }
}

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("setbit", 10, |g| exact(argv!["SETBIT", g.key(), offset(g), bit(g)])),
        cmd("getbit", 5, |g| exact(argv!["GETBIT", g.key(), read_offset(g)])),
        cmd("bitcount", 6, |g| {
            let mut a = argv!["BITCOUNT", g.key()];
            match g.rng.below(6) {
                0 => {}
                1 => a.push(index(g)),
                2 | 3 => a.extend([index(g), index(g)]),
                _ => a.extend([index(g), index(g), unit(g)]),
            }
            exact(a)
        }),
        cmd("bitpos", 6, |g| {
            let mut a = argv!["BITPOS", g.key(), bit(g)];
            match g.rng.below(6) {
                0 => {}
                1 => a.push(index(g)),
                2 | 3 => a.extend([index(g), index(g)]),
                4 => a.extend([index(g), index(g), unit(g)]),
                _ => a.extend([index(g), index(g), unit(g), "x".arg()]),
            }
            exact(a)
        }),
        cmd("bitop", 4, |g| {
            let op = if g.chance(95) { g.pick_kw(&["AND", "OR", "XOR", "NOT"]) } else { "NAND".arg() };
            let mut a = argv!["BITOP", op.clone(), g.key()];
            let n = if op.eq_ignore_ascii_case(b"not") && g.chance(90) { 1 } else { 1 + g.rng.below(3) };
            a.extend(g.keys(n).into_iter().take(n));
            exact(a)
        }),
        cmd("bitfield", 6, |g| {
            let mut a = argv!["BITFIELD", g.key()];
            bitfield_ops(g, &mut a, false);
            exact(a)
        }),
        cmd("bitfield_ro", 3, |g| {
            let mut a = argv!["BITFIELD_RO", g.key()];
            bitfield_ops(g, &mut a, true);
            exact(a)
        }),
    ]
}
