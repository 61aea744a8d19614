//! Redis' geohash arithmetic, computed in the same order with the same doubles so every
//! score, box and distance equals Redis 7.0's to the last bit: the 52-bit interleaved hash
//! (latitude in the even bits, longitude in the odd bits, 26 bits each over
//! [-180, 180] × [-85.05112878, 85.05112878]), the cell of a hash, the eight neighbours,
//! the nine boxes a radius or box search scans, and the haversine distance on a sphere of
//! radius 6372797.560856 m.

use std::f64::consts::PI;

/// Bits per coordinate of a stored score (26 × 2 = 52).
pub(crate) const STEP_MAX: u8 = 26;
/// The longitude limits.
pub(crate) const LONG_MIN: f64 = -180.0;
/// The longitude limits.
pub(crate) const LONG_MAX: f64 = 180.0;
/// The latitude limits (Web Mercator's, EPSG:900913).
pub(crate) const LAT_MIN: f64 = -85.05112878;
/// The latitude limits.
pub(crate) const LAT_MAX: f64 = 85.05112878;
/// Redis' earth radius (the quadratic mean radius of WGS-84), in meters.
const EARTH_RADIUS: f64 = 6372797.560856;
/// Half the Mercator world width: where the step estimate stops doubling.
const MERCATOR_MAX: f64 = 20037726.37;
/// Degrees to radians, `M_PI / 180.0` as Redis folds it.
const D_R: f64 = PI / 180.0;

/// A hash of `step` bits per coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hash {
    /// The interleaved bits (`2 * step` of them for a valid hash).
    pub bits: u64,
    /// Bits per coordinate.
    pub step: u8,
}

/// A closed interval of one coordinate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Range {
    pub min: f64,
    pub max: f64,
}

/// The cell a hash names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Area {
    pub lon: Range,
    pub lat: Range,
}

/// The ranges scores are computed over.
pub(crate) const WORLD: (Range, Range) =
    (Range { min: LONG_MIN, max: LONG_MAX }, Range { min: LAT_MIN, max: LAT_MAX });

/// Spreads the 32 bits of `v` to the even bit positions.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bits of `v` into 32 bits.
fn gather(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// The hash of a point at `step` bits over the given ranges; `None` outside the world
/// limits or the ranges (Redis' `geohashEncode`).
pub(crate) fn encode(lon_range: Range, lat_range: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if step == 0 || step > 32 {
        return None;
    }
    // NaN never gets here: the comparisons are written so that it would be refused.
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if !(lat_range.min..=lat_range.max).contains(&lat) || !(lon_range.min..=lon_range.max).contains(&lon) {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min) * scale;
    // C converts the offsets (in [0, 2^step]) to uint32_t by truncation.
    Some(Hash { bits: spread(lat_offset as u32) | spread(lon_offset as u32) << 1, step })
}

/// The cell of `hash` over the given ranges; `None` for the zero hash.
pub(crate) fn decode(lon_range: Range, lat_range: Range, hash: Hash) -> Option<Area> {
    if hash.bits == 0 && hash.step == 0 {
        return None;
    }
    let ilat = gather(hash.bits);
    let ilon = gather(hash.bits >> 1);
    let cells = (1u64 << hash.step) as f64;
    let lat_scale = lat_range.max - lat_range.min;
    let lon_scale = lon_range.max - lon_range.min;
    // `ilat + 1` is 32-bit unsigned arithmetic in C: it wraps.
    let at = |i: u32, range: Range, scale: f64| range.min + (f64::from(i) * 1.0 / cells) * scale;
    Some(Area {
        lat: Range {
            min: at(ilat, lat_range, lat_scale),
            max: at(ilat.wrapping_add(1), lat_range, lat_scale),
        },
        lon: Range {
            min: at(ilon, lon_range, lon_scale),
            max: at(ilon.wrapping_add(1), lon_range, lon_scale),
        },
    })
}

/// The centre of a cell, clamped to the world limits: `[longitude, latitude]`.
fn centre(area: &Area) -> [f64; 2] {
    let lon = ((area.lon.min + area.lon.max) / 2.0).clamp_c(LONG_MIN, LONG_MAX);
    let lat = ((area.lat.min + area.lat.max) / 2.0).clamp_c(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// C's `if (x > max) x = max; if (x < min) x = min;`.
trait ClampC {
    fn clamp_c(self, min: f64, max: f64) -> f64;
}

impl ClampC for f64 {
    fn clamp_c(self, min: f64, max: f64) -> f64 {
        let x = if self > max { max } else { self };
        if x < min { min } else { x }
    }
}

/// C's `(uint64_t)x` on x86-64 (gcc: `cvttsd2si`, with 2^63 subtracted first for large
/// values): negative values wrap, out-of-range values give `2^63` or 0.
pub(crate) fn c_u64(x: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let cvtt = |v: f64| if v > -TWO_63 && v < TWO_63 { v as i64 as u64 } else { 1 << 63 };
    if x < TWO_63 || x.is_nan() { cvtt(x) } else { cvtt(x - TWO_63) ^ 1 << 63 }
}

/// C's `(long long)x` on x86-64: truncation, `i64::MIN` out of range.
pub(crate) fn c_i64(x: f64) -> i64 {
    if x > -9_223_372_036_854_775_808.0 && x < 9_223_372_036_854_775_808.0 { x as i64 } else { i64::MIN }
}

/// The position a stored score stands for: `[longitude, latitude]` (Redis' `decodeGeohash`;
/// any score decodes, a foreign one to some clamped point).
pub(crate) fn score_to_point(score: f64) -> [f64; 2] {
    let hash = Hash { bits: c_u64(score), step: STEP_MAX };
    let area = decode(WORLD.0, WORLD.1, hash).expect("a step-26 hash is never the zero hash");
    centre(&area)
}

/// The score GEOADD stores for a valid point: the 52-bit hash as a double (rounded to even
/// past 2^53, as ZADD parses Redis' decimal text).
pub(crate) fn point_to_score(lon: f64, lat: f64) -> Option<f64> {
    encode(WORLD.0, WORLD.1, lon, lat, STEP_MAX).map(|h| align52(h) as f64)
}

/// The hash moved to the top of 52 bits.
pub(crate) fn align52(hash: Hash) -> u64 {
    hash.bits << (52 - u32::from(hash.step) * 2)
}

/// One step east (`d > 0`) or west along the odd (longitude) bits.
fn move_x(hash: &mut Hash, d: i8) {
    let shift = 64 - u32::from(hash.step) * 2;
    let x = hash.bits & 0xAAAA_AAAA_AAAA_AAAA;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    let x = if d > 0 { x.wrapping_add(zz + 1) } else { (x | zz).wrapping_sub(zz + 1) };
    hash.bits = (x & (0xAAAA_AAAA_AAAA_AAAAu64 >> shift)) | y;
}

/// One step north (`d > 0`) or south along the even (latitude) bits.
fn move_y(hash: &mut Hash, d: i8) {
    let shift = 64 - u32::from(hash.step) * 2;
    let x = hash.bits & 0xAAAA_AAAA_AAAA_AAAA;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0xAAAA_AAAA_AAAA_AAAAu64 >> shift;
    let y = if d > 0 { y.wrapping_add(zz + 1) } else { (y | zz).wrapping_sub(zz + 1) };
    hash.bits = x | (y & (0x5555_5555_5555_5555u64 >> shift));
}

/// The neighbour of `hash` `dx` cells east and `dy` cells north (each -1, 0 or 1).
fn neighbour(hash: Hash, dx: i8, dy: i8) -> Hash {
    let mut h = hash;
    if dx != 0 {
        move_x(&mut h, dx);
    }
    if dy != 0 {
        move_y(&mut h, dy);
    }
    h
}

fn deg_rad(deg: f64) -> f64 {
    deg * D_R
}

fn rad_deg(rad: f64) -> f64 {
    rad / D_R
}

/// The distance along a meridian between two latitudes, in meters.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The haversine great-circle distance in meters (Redis' `geohashGetDistance`, with its
/// shortcut for equal longitudes). May be NaN for antipodal points, as in Redis.
pub(crate) fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((deg_rad(lon2) - deg_rad(lon1)) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

/// What a search covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Extent {
    /// BYRADIUS / GEORADIUS: a radius in the unit.
    Radius(f64),
    /// BYBOX: width and height in the unit.
    Box { width: f64, height: f64 },
}

/// A search area: centre `[longitude, latitude]`, extent, and meters per unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shape {
    pub centre: [f64; 2],
    pub extent: Extent,
    pub to_meters: f64,
}

impl Shape {
    /// The distance in meters from the centre to `point` if it lies in the shape (Redis'
    /// `geoWithinShape`; a NaN distance counts as inside, as there).
    pub(crate) fn distance_if_within(&self, point: [f64; 2]) -> Option<f64> {
        let [cx, cy] = self.centre;
        let [x, y] = point;
        match self.extent {
            Extent::Radius(r) => {
                let d = distance(cx, cy, x, y);
                (d.partial_cmp(&(r * self.to_meters)) != Some(std::cmp::Ordering::Greater)).then_some(d)
            }
            Extent::Box { width, height } => {
                let (w, h) = (width * self.to_meters, height * self.to_meters);
                if lat_distance(y, cy) > h / 2.0 || distance(x, y, cx, y) > w / 2.0 {
                    return None;
                }
                Some(distance(cx, cy, x, y))
            }
        }
    }

    /// `[min lon, min lat, max lon, max lat]` around the centre (Redis'
    /// `geohashBoundingBox`: the longitude span taken at the latitude farther from the
    /// equator).
    fn bounds(&self) -> [f64; 4] {
        let [lon, lat] = self.centre;
        let (half_h, half_w) = match self.extent {
            Extent::Radius(r) => (r, r),
            Extent::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let (height, width) = (self.to_meters * half_h, self.to_meters * half_w);
        let lat_delta = rad_deg(height / EARTH_RADIUS);
        let lon_delta_top = rad_deg(width / EARTH_RADIUS / deg_rad(lat + lat_delta).cos());
        let lon_delta_bottom = rad_deg(width / EARTH_RADIUS / deg_rad(lat - lat_delta).cos());
        let lon_delta = if lat < 0.0 { lon_delta_bottom } else { lon_delta_top };
        [lon - lon_delta, lat - lat_delta, lon + lon_delta, lat + lat_delta]
    }

    /// The centre cell and its eight neighbours in the order Redis scans them (centre,
    /// N, S, E, W, NE, NW, SE, SW), `None` for those left out (Redis'
    /// `geohashCalculateAreasByShapeWGS84`).
    pub(crate) fn boxes(&self) -> [Option<Hash>; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let [lon, lat] = self.centre;
        let radius = match self.extent {
            Extent::Radius(r) => r,
            Extent::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.to_meters;
        let mut step = estimate_step(radius, lat);
        let (lon_range, lat_range) = WORLD;
        let at = |step: u8| {
            let hash = encode(lon_range, lat_range, lon, lat, step).unwrap_or(Hash { bits: 0, step });
            let cell = move |dx, dy| decode(lon_range, lat_range, neighbour(hash, dx, dy));
            (hash, cell)
        };
        let (mut hash, cell) = at(step);
        // A neighbour that ends inside the bounding box means the cells are too small.
        let decrease = cell(0, 1).is_some_and(|a| a.lat.max < max_lat)
            || cell(0, -1).is_some_and(|a| a.lat.min > min_lat)
            || cell(1, 0).is_some_and(|a| a.lon.max < max_lon)
            || cell(-1, 0).is_some_and(|a| a.lon.min > min_lon);
        if step > 1 && decrease {
            step -= 1;
            hash = at(step).0;
        }
        // (dx, dy) of centre, N, S, E, W, NE, NW, SE, SW.
        const ORDER: [(i8, i8); 9] =
            [(0, 0), (0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (-1, 1), (1, -1), (-1, -1)];
        let mut out = ORDER.map(|(dx, dy)| Some(neighbour(hash, dx, dy)));
        if let (true, Some(area)) = (step >= 2, decode(lon_range, lat_range, hash)) {
            // Drop the sides the centre cell already reaches past.
            let (south, north) = (area.lat.min < min_lat, area.lat.max > max_lat);
            let (west, east) = (area.lon.min < min_lon, area.lon.max > max_lon);
            for (slot, (dx, dy)) in out.iter_mut().zip(ORDER) {
                if (south && dy < 0) || (north && dy > 0) || (west && dx < 0) || (east && dx > 0) {
                    *slot = None;
                }
            }
        }
        out
    }
}

/// How many bits per coordinate the nine boxes of a search of `radius` meters at latitude
/// `lat` use (Redis' `geohashEstimateStepsByRadius`).
fn estimate_step(radius: f64, lat: f64) -> u8 {
    if radius == 0.0 {
        return STEP_MAX;
    }
    let mut range = radius;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// The score interval `[min, max)` holding every point of the cell `hash`.
pub(crate) fn score_window(hash: Hash) -> (f64, f64) {
    let min = align52(hash);
    let max = align52(Hash { bits: hash.bits + 1, step: hash.step });
    (min as f64, max as f64)
}

/// The standard 11-character base32 geohash of a stored score (GEOHASH): the point
/// re-encoded over latitude [-90, 90], the last character always `0`.
pub(crate) fn base32(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let [lon, lat] = score_to_point(score);
    let ranges = (Range { min: -180.0, max: 180.0 }, Range { min: -90.0, max: 90.0 });
    let bits = encode(ranges.0, ranges.1, lon, lat, STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().take(10).enumerate() {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_round_trips() {
        for v in [0u32, 1, 0xFFFF_FFFF, 0x1234_5678, 1 << 26] {
            assert_eq!(gather(spread(v)), v);
            assert_eq!(gather(spread(v) << 1 >> 1), v);
        }
        assert_eq!(spread(0b11), 0b101);
    }

    #[test]
    fn c_conversions_follow_x86() {
        assert_eq!(c_u64(-1.0), u64::MAX);
        assert_eq!(c_u64(1.5), 1);
        assert_eq!(c_u64(f64::INFINITY), 0);
        assert_eq!(c_u64(f64::NEG_INFINITY), 1 << 63);
        assert_eq!(c_u64(1e19), 10_000_000_000_000_000_000);
        assert_eq!(c_i64(f64::INFINITY), i64::MIN);
        assert_eq!(c_i64(-3.9), -3);
    }

    #[test]
    fn neighbours_step_one_cell() {
        let h = encode(WORLD.0, WORLD.1, 13.361389, 38.115556, 10).unwrap();
        let a = decode(WORLD.0, WORLD.1, h).unwrap();
        let n = decode(WORLD.0, WORLD.1, neighbour(h, 0, 1)).unwrap();
        let e = decode(WORLD.0, WORLD.1, neighbour(h, 1, 0)).unwrap();
        assert_eq!(n.lat.min, a.lat.max);
        assert_eq!(n.lon, a.lon);
        assert_eq!(e.lon.min, a.lon.max);
        assert_eq!(e.lat, a.lat);
        assert_eq!(neighbour(neighbour(h, -1, -1), 1, 1), h);
    }
}
