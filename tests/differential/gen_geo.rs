//! Geo commands: GEOADD (NX/XX/CH) GEODIST GEOHASH GEOPOS GEOSEARCH GEOSEARCHSTORE
//! GEORADIUS(_RO) GEORADIUSBYMEMBER(_RO), plus ZADD of foreign scores into geo keys.
//!
//! Points cluster around a few centres (so radii catch several members, distances tie when
//! members share a point, and COUNT cuts through equal distances; now and then 60–200 points
//! at once, so sets pass Redis' 128-member listpack limit and searches pass the 40 results
//! where `pqsort` switches to a ninther), including the
//! antimeridian, the poles' latitude limits (±85.05112878) and the world's corners; radii run
//! from 0 to past 20000 km in every unit; coordinates, radii and units are sometimes invalid.
//! Replies are compared exactly: order included.

use crate::kit::*;

/// Cluster centres: (longitude, latitude).
const CENTRES: &[(f64, f64)] = &[
    (13.361389, 38.115556),
    (15.087269, 37.502669),
    (0.0, 0.0),
    (180.0, 0.0),
    (-180.0, 0.0),
    (179.9999, 85.05112878),
    (-179.9999, -85.05112878),
    (0.0, 85.05112878),
    (0.0, -85.05112878),
    (-73.9857, 40.7484),
    (139.6917, 35.6895),
    (-0.1278, 51.5074),
];

/// Exact edge coordinates, valid, then invalid.
const EDGE_LON: &[&str] = &["180", "-180", "0", "-0", "179.99999999", "-179.99999999", "1e-300"];
const EDGE_LAT: &[&str] =
    &["85.05112878", "-85.05112878", "0", "85.05112877", "-85.0511287799", "66.5", "-80.1"];
const BAD_LON: &[&str] = &["-180.0000001", "180.0000001", "200", "-1000"];
const BAD_LAT: &[&str] = &["85.05112879", "-85.051128781", "90", "-90"];
const BAD: &[&str] = &["x", "", "inf", "-inf", "nan", "1e400", "0x10", " 1"];

const GEO_MEMBERS: &[&str] = &["a", "b", "c", "", "\u{0}", "Palermo"];

/// Mostly `m0`…`m19` (sets grow large enough for COUNT to cut), some odd names.
fn member(g: &mut G) -> Vec<u8> {
    match g.rng.below(10) {
        0..=6 => format!("m{}", g.rng.below(20)).arg(),
        7 | 8 => g.pick(GEO_MEMBERS).arg(),
        _ => g.member(),
    }
}

/// A decimal near `c` within `spread` (clamped or not to `[-limit, limit]`).
fn near(g: &mut G, c: f64, spread: f64, limit: f64) -> String {
    let jitter = (g.rng.range(-1_000_000, 1_000_000) as f64) / 1_000_000.0 * spread;
    let mut v = c + jitter;
    if g.chance(98) {
        v = v.clamp(-limit, limit);
    }
    // Truncated, not rounded, so a clamped limit stays inside.
    let decimals = g.rng.below(9);
    let scale = 10f64.powi(decimals as i32);
    format!("{:.decimals$}", (v * scale).trunc() / scale)
}

/// A centre and a spread for one command's points: mostly the key's own centre (so a key's
/// points and the searches on it meet), sometimes any.
fn cluster(g: &mut G, key: &[u8]) -> ((f64, f64), f64) {
    let own = key.iter().map(|&b| usize::from(b)).sum::<usize>() % CENTRES.len();
    let centre = if g.chance(65) { CENTRES[own] } else { g.pick(CENTRES) };
    (centre, g.pick(&[0.0, 0.0001, 0.01, 0.5, 3.0, 40.0]))
}

/// A `lon lat` pair: mostly near a random centre, sometimes an exact edge or invalid text.
fn lonlat(g: &mut G, key: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let c = cluster(g, key);
    lonlat_near(g, c)
}

/// [`lonlat`] near the given cluster.
fn lonlat_near(g: &mut G, ((lon, lat), spread): ((f64, f64), f64)) -> (Vec<u8>, Vec<u8>) {
    match g.rng.below(40) {
        0..=33 => (near(g, lon, spread, 180.0).arg(), near(g, lat, spread, 85.05112878).arg()),
        34..=37 => (g.pick(EDGE_LON).arg(), g.pick(EDGE_LAT).arg()),
        38 => match g.rng.below(3) {
            0 => (g.pick(BAD_LON).arg(), g.pick(EDGE_LAT).arg()),
            1 => (g.pick(EDGE_LON).arg(), g.pick(BAD_LAT).arg()),
            _ => (g.pick(BAD_LON).arg(), g.pick(BAD_LAT).arg()),
        },
        _ => {
            let bad = g.pick(BAD).arg();
            if g.chance(50) { (bad, "1".arg()) } else { ("1".arg(), bad) }
        }
    }
}

fn unit(g: &mut G) -> Vec<u8> {
    if g.chance(98) { g.pick_kw(&["M", "KM", "FT", "MI"]) } else { g.pick(&["cm", "", "kilometers"]).arg() }
}

/// A radius (or box side) for `unit`-less magnitudes: 0 to past half the earth's
/// circumference, with edge and invalid values.
fn radius(g: &mut G) -> Vec<u8> {
    match g.rng.below(20) {
        0 => "0".arg(),
        1..=6 => g.rng.range(1, 2000).arg(),
        7..=12 => (g.rng.range(1, 600) * 1000).arg(),
        13..=15 => g.pick(&["5000000", "10000000", "20000000", "20037726", "40000000"]).arg(),
        16 | 17 => format!("{}.{}", g.rng.range(0, 50), g.rng.range(0, 999)).arg(),
        18 => g.pick(&["1e308", "inf", "0.0001", "-0"]).arg(),
        _ if g.chance(50) => g.pick(&["-1", "x", "", "nan"]).arg(),
        _ => g.rng.range(1, 100).arg(),
    }
}

/// `radius unit`, scaled so km and mi get similar reach as meters.
fn distance(g: &mut G, a: &mut Vec<Vec<u8>>) {
    let u = unit(g);
    let r = radius(g);
    let scaled = match (std::str::from_utf8(&r).ok().and_then(|s| s.parse::<i64>().ok()), u.as_slice()) {
        (Some(n), k) if n > 1000 && (k.eq_ignore_ascii_case(b"km") || k.eq_ignore_ascii_case(b"mi")) => {
            (n / 1000).arg()
        }
        _ => r,
    };
    a.push(scaled);
    a.push(u);
}

/// The common search options, in random order.
fn options(g: &mut G, a: &mut Vec<Vec<u8>>, with: bool, store: bool, storedist_flag: bool) {
    let mut opts: Vec<Vec<Vec<u8>>> = Vec::new();
    if with {
        for w in ["WITHDIST", "WITHHASH", "WITHCOORD"] {
            if g.chance(35) {
                opts.push(vec![g.kw(w)]);
            }
        }
    }
    if g.chance(40) {
        opts.push(vec![g.pick_kw(&["ASC", "DESC"])]);
    }
    if g.chance(45) {
        let count = match g.rng.below(25) {
            0..=19 => g.rng.range(1, 6).arg(),
            20..=23 => g.pick(&["10", "30", "45", "100", "150"]).arg(),
            _ => g.pick(&["0", "-1", "x"]).arg(),
        };
        let mut c = vec![g.kw("COUNT"), count];
        if g.chance(35) {
            c.push(g.kw("ANY"));
        }
        opts.push(c);
    } else if g.chance(3) {
        opts.push(vec![g.kw("ANY")]);
    }
    if store && g.chance(30) {
        opts.push(vec![g.pick_kw(&["STORE", "STOREDIST"]), g.key()]);
    }
    if storedist_flag && g.chance(40) {
        opts.push(vec![g.kw("STOREDIST")]);
    }
    if g.chance(3) {
        opts.push(vec![g.pick_kw(&["STORE", "WITHDIST", "FROMMEMBER", "BYBOX", "NOSUCH"])]);
    }
    // Shuffle.
    for i in (1..opts.len()).rev() {
        let j = g.rng.below(i + 1);
        opts.swap(i, j);
    }
    a.extend(opts.into_iter().flatten());
}

/// GEOSEARCH's FROM… and BY… clauses (occasionally missing, doubled or both).
fn from_and_by(g: &mut G, a: &mut Vec<Vec<u8>>, key: &[u8]) {
    let mut parts: Vec<Vec<Vec<u8>>> = Vec::new();
    let from = g.rng.below(40);
    if from < 20 || from == 39 {
        let (lon, lat) = lonlat(g, key);
        parts.push(vec![g.kw("FROMLONLAT"), lon, lat]);
    }
    if (20..39).contains(&from) || from == 39 {
        parts.push(vec![g.kw("FROMMEMBER"), member(g)]);
    }
    let by = g.rng.below(40);
    if by < 20 || by == 39 {
        let mut p = vec![g.kw("BYRADIUS")];
        distance(g, &mut p);
        parts.push(p);
    }
    if (20..39).contains(&by) || by == 39 {
        let mut p = vec![g.kw("BYBOX"), radius(g)];
        distance(g, &mut p);
        parts.push(p);
    }
    if g.chance(50) {
        parts.reverse();
    }
    a.extend(parts.into_iter().flatten());
}

pub fn generators() -> Vec<CmdGen> {
    vec![
        cmd("geoadd", 14, |g| {
            let mut a = argv!["GEOADD", g.key()];
            for opt in ["NX", "XX", "CH"] {
                if g.chance(12) {
                    a.push(g.kw(opt));
                }
            }
            let n = if g.chance(98) { 1 + g.rng.below(5) } else { 0 };
            let c = cluster(g, &a[1]);
            for _ in 0..n {
                let (lon, lat) = if g.chance(80) { lonlat_near(g, c) } else { lonlat(g, &a[1]) };
                a.extend([lon, lat, member(g)]);
            }
            if g.chance(3) {
                a.push(member(g));
            }
            exact(a)
        }),
        cmd("geoadd", 1, |g| {
            // Many points (members p0…p199, a third on one spot): sets past 128 members
            // (Redis' skiplist encoding) and searches past 40 results (pqsort's ninther).
            let mut a = argv!["GEOADD", g.key()];
            let ((lon, lat), _) = cluster(g, &a[1]);
            let c = ((lon, lat), g.pick(&[0.0001, 0.01, 0.1]));
            let spot = (near(g, lon, 0.0, 180.0).arg(), near(g, lat, 0.0, 85.05112878).arg());
            for _ in 0..60 + g.rng.below(140) {
                let (lon, lat) = if g.chance(33) { spot.clone() } else { lonlat_near(g, c) };
                a.extend([lon, lat, format!("p{}", g.rng.below(200)).arg()]);
            }
            exact(a)
        }),
        cmd("geodist", 5, |g| {
            let mut a = argv!["GEODIST", g.key(), member(g), member(g)];
            if g.chance(60) {
                a.push(unit(g));
            }
            if g.chance(3) {
                a.push(unit(g));
            }
            exact(a)
        }),
        cmd("geohash", 3, |g| {
            let mut a = argv!["GEOHASH", g.key()];
            a.extend((0..g.rng.below(4)).map(|_| member(g)));
            exact(a)
        }),
        cmd("geopos", 4, |g| {
            let mut a = argv!["GEOPOS", g.key()];
            a.extend((0..g.rng.below(4)).map(|_| member(g)));
            exact(a)
        }),
        cmd("geosearch", 10, |g| {
            let mut a = argv!["GEOSEARCH", g.key()];
            let key = a[1].clone();
            from_and_by(g, &mut a, &key);
            options(g, &mut a, true, false, false);
            exact(a)
        }),
        cmd("geosearchstore", 5, |g| {
            let mut a = argv!["GEOSEARCHSTORE", g.key(), g.key()];
            let key = a[2].clone();
            from_and_by(g, &mut a, &key);
            let with = g.chance(10);
            options(g, &mut a, with, false, true);
            exact(a)
        }),
        cmd("georadius", 6, |g| {
            let ro = g.chance(30);
            let mut a = argv![if ro { "GEORADIUS_RO" } else { "GEORADIUS" }, g.key()];
            let (lon, lat) = lonlat(g, &a[1].clone());
            a.extend([lon, lat]);
            distance(g, &mut a);
            options(g, &mut a, true, !ro, false);
            exact(a)
        }),
        cmd("georadius_ro", 1, |g| {
            let mut a = argv!["GEORADIUS_RO", g.key()];
            let (lon, lat) = lonlat(g, &a[1].clone());
            a.extend([lon, lat]);
            distance(g, &mut a);
            let store = g.chance(10);
            options(g, &mut a, true, store, false);
            exact(a)
        }),
        cmd("georadiusbymember", 6, |g| {
            let ro = g.chance(30);
            let mut a =
                argv![if ro { "GEORADIUSBYMEMBER_RO" } else { "GEORADIUSBYMEMBER" }, g.key(), member(g)];
            distance(g, &mut a);
            options(g, &mut a, true, !ro, false);
            exact(a)
        }),
        cmd("georadiusbymember_ro", 1, |g| {
            let mut a = argv!["GEORADIUSBYMEMBER_RO", g.key(), member(g)];
            distance(g, &mut a);
            let store = g.chance(10);
            options(g, &mut a, true, store, false);
            exact(a)
        }),
        cmd("zadd", 2, |g| {
            // Scores no GEOADD writes: negative, fractional, past 52 bits.
            let score = g.pick(&[
                "-1",
                "1.5",
                "4503599627370496",
                "9007199254740993",
                "18014398509481984",
                "1e19",
                "3471579339700058",
                "0",
            ]);
            exact(argv!["ZADD", g.key(), score, member(g)])
        }),
        cmd("zrange", 2, |g| exact(argv!["ZRANGE", g.key(), "0", "-1", "WITHSCORES"])),
    ]
}
