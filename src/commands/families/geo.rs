//! The geo commands: GEOADD, GEODIST, GEOHASH, GEOPOS, GEOSEARCH, GEOSEARCHSTORE,
//! GEORADIUS, GEORADIUSBYMEMBER and their `_RO` forms.
//!
//! A geo key is a sorted set whose scores are 52-bit interleaved geohashes, as in Redis:
//! GEOADD is ZADD with the hash as the score, and every zset command works on the key. A
//! search scans the score windows of at most nine geohash cells (the cell around the centre
//! at a step chosen from the radius, and its neighbours), in Redis' order, keeps the points
//! inside the radius or box, and orders them as Redis does: glibc's stable merge sort when
//! all results are returned, Redis' partial quicksort (`pqsort`) when COUNT cuts them, so
//! even equal distances come out in Redis' order.
//!
//! Replies print as Redis 7.0's: distances with four decimals (`llrint` of the value times
//! 10^4), coordinates as `%.17Lf` with trailing zeros trimmed, GEOHASH as 11 base32
//! characters of the point re-encoded over latitude ±90; under RESP3 coordinates are
//! doubles carrying that text, as in Redis.

mod geohash;
mod order;

use bytes::Bytes;

use self::geohash::{Extent, Shape};
use super::zset::ZAddFlags;
use crate::backend::KvBackend;
use crate::commands::args::{float_arg, int_arg, parse_f64};
use crate::commands::long_double::{LongDouble, format_human};
use crate::commands::{CommandError, CommandResult, Db, Reply};

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// `lon lat`: two floats inside the world limits.
///
/// # Errors
/// "ERR value is not a valid float"; "ERR invalid longitude,latitude pair x,y" (`%f`).
fn lonlat(lon: &[u8], lat: &[u8]) -> CommandResult<[f64; 2]> {
    let (x, y) = (float_arg(lon)?, float_arg(lat)?);
    let inside = |v: f64, min, max| (min..=max).contains(&v);
    if !inside(x, geohash::LONG_MIN, geohash::LONG_MAX) || !inside(y, geohash::LAT_MIN, geohash::LAT_MAX) {
        return Err(CommandError::err(format!("invalid longitude,latitude pair {x:.6},{y:.6}")));
    }
    Ok([x, y])
}

/// A unit's size in meters.
///
/// # Errors
/// "ERR unsupported unit provided. please use M, KM, FT, MI".
fn unit(arg: &[u8]) -> CommandResult<f64> {
    Ok(match () {
        _ if is(arg, "m") => 1.0,
        _ if is(arg, "km") => 1000.0,
        _ if is(arg, "ft") => 0.3048,
        _ if is(arg, "mi") => 1609.34,
        _ => return Err(CommandError::err("unsupported unit provided. please use M, KM, FT, MI")),
    })
}

/// A non-negative float, or the error `message`.
fn measure(arg: &[u8], message: &str) -> CommandResult<f64> {
    parse_f64(arg).ok_or_else(|| CommandError::err(message))
}

/// `radius unit` → (radius, meters per unit).
fn radius_args(radius: &[u8], unit_arg: &[u8]) -> CommandResult<(Extent, f64)> {
    let r = measure(radius, "need numeric radius")?;
    if r < 0.0 {
        return Err(CommandError::err("radius cannot be negative"));
    }
    Ok((Extent::Radius(r), unit(unit_arg)?))
}

/// `width height unit` → (box, meters per unit).
fn box_args(width: &[u8], height: &[u8], unit_arg: &[u8]) -> CommandResult<(Extent, f64)> {
    let w = measure(width, "need numeric width")?;
    let h = measure(height, "need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err(CommandError::err("height or width cannot be negative"));
    }
    Ok((Extent::Box { width: w, height: h }, unit(unit_arg)?))
}

/// A distance as Redis prints it: `llrint(d * 10^4)` as a fixed-point number with four
/// decimals (`0.0000` for zero; x86's `llrint` gives `i64::MIN` for NaN or overflow).
fn distance_text(d: f64) -> Bytes {
    if d == 0.0 {
        return Bytes::from_static(b"0.0000");
    }
    let r = (d * 10000.0).round_ties_even();
    let n =
        if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&r) { r as i64 } else { i64::MIN };
    let v = n.unsigned_abs();
    let sign = if n < 0 { "-" } else { "" };
    Bytes::from(format!("{sign}{}.{:04}", v / 10000, v % 10000))
}

/// A coordinate as Redis' `addReplyHumanLongDouble` prints it.
fn coordinate(x: f64) -> Reply {
    Reply::DoubleText(Bytes::from(format_human(LongDouble::from_f64(x))))
}

pub(crate) fn geoadd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let mut flags = ZAddFlags::default();
    let mut first = 2;
    while let Some(opt) = argv.get(first) {
        match () {
            _ if is(opt, "nx") => flags.nx = true,
            _ if is(opt, "xx") => flags.xx = true,
            _ if is(opt, "ch") => flags.ch = true,
            _ => break,
        }
        first += 1;
    }
    let rest = &argv[first..];
    if !rest.len().is_multiple_of(3) || (flags.nx && flags.xx) {
        return Err(CommandError::Syntax);
    }
    let mut pairs = Vec::with_capacity(rest.len() / 3);
    for triple in rest.chunks(3) {
        let [lon, lat] = lonlat(&triple[0], &triple[1])?;
        let score = geohash::point_to_score(lon, lat).expect("lonlat checked the limits");
        pairs.push((score, &triple[2]));
    }
    if pairs.is_empty() {
        // ZADD with no pairs.
        return Err(CommandError::Syntax);
    }
    let out = db.zadd(&argv[1], flags, &pairs)?;
    Ok(Reply::Integer(out.added + if flags.ch { out.updated } else { 0 }))
}

pub(crate) fn geodist<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let to_meters = match argv.len() {
        5 => unit(&argv[4])?,
        n if n > 5 => return Err(CommandError::Syntax),
        _ => 1.0,
    };
    let scores = db.zmscore(&argv[1], &argv[2..4])?;
    let (Some(a), Some(b)) = (scores[0], scores[1]) else { return Ok(Reply::Nil) };
    let ([x1, y1], [x2, y2]) = (geohash::score_to_point(a), geohash::score_to_point(b));
    Ok(Reply::Bulk(distance_text(geohash::distance(x1, y1, x2, y2) / to_meters)))
}

pub(crate) fn geohash_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let scores = db.zmscore(&argv[1], &argv[2..])?;
    Ok(Reply::Array(
        scores.into_iter().map(|s| s.map_or(Reply::Nil, |s| Reply::bulk(&geohash::base32(s)))).collect(),
    ))
}

pub(crate) fn geopos<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let scores = db.zmscore(&argv[1], &argv[2..])?;
    let point = |s: f64| {
        let [x, y] = geohash::score_to_point(s);
        Reply::Array(vec![coordinate(x), coordinate(y)])
    };
    Ok(Reply::Array(scores.into_iter().map(|s| s.map_or(Reply::NilArray, point)).collect()))
}

/// Where a search's centre comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Centre {
    /// GEORADIUS: `key lon lat radius unit`.
    Coords,
    /// GEORADIUSBYMEMBER: `key member radius unit`.
    Member,
    /// GEOSEARCH(STORE): FROMMEMBER / FROMLONLAT and BYRADIUS / BYBOX options.
    Options,
}

/// Whether and how a search stores its result.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Store {
    /// Never (the `_RO` forms and GEOSEARCH).
    No,
    /// STORE / STOREDIST options (GEORADIUS, GEORADIUSBYMEMBER).
    Options,
    /// Always, into `argv[1]` (GEOSEARCHSTORE; STOREDIST accepted).
    Destination,
}

/// Which GEORADIUS-like command a search is.
#[derive(Clone, Copy)]
pub(crate) struct Variant {
    pub(crate) from: Centre,
    pub(crate) store: Store,
}

/// ASC / DESC.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A point a search found.
struct Found {
    member: Bytes,
    score: f64,
    /// Meters until the reply divides by the unit.
    dist: f64,
    point: [f64; 2],
}

/// The member's position, for FROMMEMBER and GEORADIUSBYMEMBER.
fn member_point<B: KvBackend>(db: &Db<B>, key: &[u8], member: &[u8]) -> CommandResult<[f64; 2]> {
    match db.zscore(key, member)? {
        Some(score) => Ok(geohash::score_to_point(score)),
        None => Err(CommandError::err("could not decode requested zset member")),
    }
}

/// A parsed search.
struct Query<'a> {
    centre: [f64; 2],
    /// The extent and meters per unit; `None` only when the source key is missing.
    extent: Option<(Extent, f64)>,
    store: Option<&'a Bytes>,
    storedist: bool,
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    any: bool,
    /// 0: no COUNT.
    count: i64,
    sort: Sort,
}

/// Redis' `georadiusGeneric` parsing: the fixed arguments, then the options in order (errors
/// come in the order Redis meets them; FROMMEMBER reads the member as it is met), then the
/// option conflicts; `exists` says whether the source key `src` exists.
fn parse_query<'a, B: KvBackend>(
    db: &Db<B>,
    argv: &'a [Bytes],
    v: Variant,
    src: &[u8],
    exists: bool,
) -> CommandResult<Query<'a>> {
    let mut q = Query {
        centre: [0.0; 2],
        extent: None,
        store: (v.store == Store::Destination).then(|| &argv[1]),
        storedist: false,
        withdist: false,
        withhash: false,
        withcoord: false,
        any: false,
        count: 0,
        sort: Sort::None,
    };
    let base = match v.from {
        Centre::Coords => {
            q.centre = lonlat(&argv[2], &argv[3])?;
            q.extent = Some(radius_args(&argv[4], &argv[5])?);
            6
        }
        Centre::Member if !exists => 5,
        Centre::Member => {
            q.centre = member_point(db, src, &argv[2])?;
            q.extent = Some(radius_args(&argv[3], &argv[4])?);
            5
        }
        Centre::Options => {
            if v.store == Store::Destination {
                3
            } else {
                2
            }
        }
    };
    let (mut frommember, mut fromloc) = (false, false);
    let opts = &argv[base..];
    let search_opts = v.from == Centre::Options;
    let mut i = 0;
    while i < opts.len() {
        let (arg, left) = (&opts[i], opts.len() - i - 1);
        let is_box = matches!(q.extent, Some((Extent::Box { .. }, _)));
        let is_radius = matches!(q.extent, Some((Extent::Radius(_), _)));
        if is(arg, "withdist") {
            q.withdist = true;
        } else if is(arg, "withhash") {
            q.withhash = true;
        } else if is(arg, "withcoord") {
            q.withcoord = true;
        } else if is(arg, "any") {
            q.any = true;
        } else if is(arg, "asc") {
            q.sort = Sort::Asc;
        } else if is(arg, "desc") {
            q.sort = Sort::Desc;
        } else if is(arg, "count") && left >= 1 {
            q.count = int_arg(&opts[i + 1])?;
            if q.count <= 0 {
                return Err(CommandError::err("COUNT must be > 0"));
            }
            i += 1;
        } else if (is(arg, "store") || is(arg, "storedist")) && left >= 1 && v.store == Store::Options {
            q.store = Some(&opts[i + 1]);
            q.storedist = is(arg, "storedist");
            i += 1;
        } else if is(arg, "storedist") && v.store == Store::Destination {
            q.storedist = true;
        } else if is(arg, "frommember") && left >= 1 && search_opts && !fromloc {
            if exists {
                q.centre = member_point(db, src, &opts[i + 1])?;
            }
            frommember = true;
            i += 1;
        } else if is(arg, "fromlonlat") && left >= 2 && search_opts && !frommember {
            q.centre = lonlat(&opts[i + 1], &opts[i + 2])?;
            fromloc = true;
            i += 2;
        } else if is(arg, "byradius") && left >= 2 && search_opts && !is_box {
            q.extent = Some(radius_args(&opts[i + 1], &opts[i + 2])?);
            i += 2;
        } else if is(arg, "bybox") && left >= 3 && search_opts && !is_radius {
            q.extent = Some(box_args(&opts[i + 1], &opts[i + 2], &opts[i + 3])?);
            i += 3;
        } else {
            return Err(CommandError::Syntax);
        }
        i += 1;
    }
    if q.store.is_some() && (q.withdist || q.withhash || q.withcoord) {
        let what = if v.store == Store::Destination { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" };
        return Err(CommandError::err(format!(
            "{what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = || String::from_utf8_lossy(&argv[0]).into_owned();
    if search_opts && !(frommember || fromloc) {
        return Err(CommandError::err(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
            name()
        )));
    }
    if search_opts && q.extent.is_none() {
        return Err(CommandError::err(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {}",
            name()
        )));
    }
    if q.any && q.count == 0 {
        return Err(CommandError::err("the ANY argument requires COUNT argument"));
    }
    // COUNT without ANY means the nearest ones.
    if q.count != 0 && q.sort == Sort::None && !q.any {
        q.sort = Sort::Asc;
    }
    Ok(q)
}

/// GEOSEARCH, GEOSEARCHSTORE, GEORADIUS… : parse, scan the boxes, order, then reply or
/// store (one batch; an empty result deletes the destination).
pub(crate) fn search<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], v: Variant) -> CommandResult {
    let src = &argv[if v.store == Store::Destination { 2 } else { 1 }];
    let z = db.zkey(src)?;
    let q = parse_query(db, argv, v, src, z.is_some())?;
    // The keyspace event of a STORE (Redis names it after the command family).
    let event = if v.from == Centre::Options { "geosearchstore" } else { "georadiusstore" };
    let (Some(z), Some((extent, to_meters))) = (z, q.extent) else {
        return match q.store {
            Some(dst) => db.store_zset_as(dst, &[], event).map(Reply::Integer),
            None => Ok(Reply::Array(Vec::new())),
        };
    };
    let shape = Shape { centre: q.centre, extent, to_meters };
    let mut found = scan_boxes(db, &z, &shape, if q.any { q.count as usize } else { 0 })?;
    if found.is_empty() && q.store.is_none() {
        return Ok(Reply::Array(Vec::new()));
    }
    let returned =
        if q.count == 0 || (found.len() as i64) < q.count { found.len() } else { q.count as usize };
    if q.sort != Sort::None {
        let desc = q.sort == Sort::Desc;
        let cmp = |a: &Found, b: &Found| {
            let c = order::compare_distances(a.dist, b.dist);
            if desc { -c } else { c }
        };
        if returned == found.len() {
            order::merge_sort(&mut found, &cmp);
        } else {
            order::partial_quicksort(&mut found, &cmp, returned - 1);
        }
    }
    found.truncate(returned);
    for f in &mut found {
        f.dist /= to_meters;
    }
    match q.store {
        Some(dst) => {
            let score = |f: &Found| if q.storedist { f.dist } else { f.score };
            let items: Vec<(Bytes, f64)> = found.iter().map(|f| (f.member.clone(), score(f))).collect();
            db.store_zset_as(dst, &items, event).map(Reply::Integer)
        }
        None => Ok(Reply::Array(found.into_iter().map(|f| found_reply(f, &q)).collect())),
    }
}

/// One result: the member alone, or `[member, dist?, hash?, [lon, lat]?]`.
fn found_reply(f: Found, q: &Query) -> Reply {
    if !(q.withdist || q.withhash || q.withcoord) {
        return Reply::Bulk(f.member);
    }
    let mut item = vec![Reply::Bulk(f.member)];
    if q.withdist {
        item.push(Reply::Bulk(distance_text(f.dist)));
    }
    if q.withhash {
        item.push(Reply::Integer(geohash::c_i64(f.score)));
    }
    if q.withcoord {
        item.push(Reply::Array(vec![coordinate(f.point[0]), coordinate(f.point[1])]));
    }
    Reply::Array(item)
}

/// Redis' `membersOfAllNeighbors`: the points in the search's boxes that lie in the shape,
/// box by box (a box equal to the one scanned before it is skipped, as in Redis), each in
/// score order; with a `limit` (COUNT … ANY) it stops once that many are found.
fn scan_boxes<B: KvBackend>(
    db: &Db<B>,
    z: &super::zset::ZKey,
    shape: &Shape,
    limit: usize,
) -> CommandResult<Vec<Found>> {
    let boxes = shape.boxes();
    let mut found = Vec::new();
    let mut last = 0;
    for (i, cell) in boxes.iter().enumerate() {
        let Some(cell) = cell else { continue };
        if last != 0 && boxes[last] == Some(*cell) {
            continue;
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        let (min, max) = geohash::score_window(*cell);
        db.for_each_in_scores(z, min, max, |member, score| {
            let point = geohash::score_to_point(score);
            if let Some(dist) = shape.distance_if_within(point) {
                found.push(Found { member, score, dist, point });
            }
            limit == 0 || found.len() < limit
        })?;
        last = i;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_print_with_four_decimals() {
        assert_eq!(distance_text(0.0), "0.0000");
        assert_eq!(distance_text(-0.0), "0.0000");
        assert_eq!(distance_text(166274.15156960033), "166274.1516");
        assert_eq!(distance_text(0.00004), "0.0000");
        assert_eq!(distance_text(0.775), "0.7750");
        // llrint of the double product, not decimal rounding: 0.00015 * 10^4 is just
        // below 1.5.
        assert_eq!(distance_text(0.00015), "0.0001");
        assert_eq!(distance_text(f64::NAN), "-922337203685477.5808");
    }

    #[test]
    fn coordinates_print_as_human_long_doubles() {
        let text = |s: &'static str| Reply::DoubleText(Bytes::from_static(s.as_bytes()));
        assert_eq!(coordinate(13.361389338970184), text("13.36138933897018433"));
        assert_eq!(coordinate(-0.0), text("0"));
        assert_eq!(coordinate(180.0), text("180"));
    }
}
