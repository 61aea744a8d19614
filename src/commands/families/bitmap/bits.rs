//! Bit algorithms in Redis' bit order (bit 0 is the most significant bit of byte 0):
//! counting and searching over a sparse view, and BITFIELD's integers and overflow rules.

use bytes::Bytes;

/// A read-only view of a bitmap: `len` bytes, zero except inside `pieces`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sparse {
    /// Length in bytes (the STRLEN of the equivalent string).
    pub(crate) len: u64,
    /// `(byte offset, bytes)`, sorted, non-overlapping, non-empty, inside `len`.
    pub(crate) pieces: Vec<(u64, Bytes)>,
}

/// The bits `from..=to` (0 = most significant) of a byte.
fn mask(from: u64, to: u64) -> u8 {
    (0xFFu8 >> from) & (0xFFu8 << (7 - to))
}

/// Set bits of `bytes` between bit positions `lo..=hi` (inside `bytes`).
fn count_in(bytes: &[u8], lo: u64, hi: u64) -> u64 {
    let (first, last) = ((lo / 8) as usize, (hi / 8) as usize);
    if first == last {
        return u64::from((bytes[first] & mask(lo % 8, hi % 8)).count_ones());
    }
    let edges = (bytes[first] & mask(lo % 8, 7)).count_ones() + (bytes[last] & mask(0, hi % 8)).count_ones();
    let middle: u64 = bytes[first + 1..last].iter().map(|b| u64::from(b.count_ones())).sum();
    u64::from(edges) + middle
}

/// The first position in `lo..=hi` (inside `bytes`) holding `bit`.
fn find_in(bytes: &[u8], bit: bool, lo: u64, hi: u64) -> Option<u64> {
    let (first, last) = (lo / 8, hi / 8);
    (first..=last).find_map(|i| {
        let from = if i == first { lo % 8 } else { 0 };
        let to = if i == last { hi % 8 } else { 7 };
        let byte = bytes[i as usize];
        let hits = if bit { byte } else { !byte } & mask(from, to);
        (hits != 0).then(|| i * 8 + u64::from(hits.leading_zeros()))
    })
}

impl Sparse {
    /// A view of a whole string value.
    pub(crate) fn of_string(value: Bytes) -> Sparse {
        let len = value.len() as u64;
        let pieces = if value.is_empty() { Vec::new() } else { vec![(0, value)] };
        Sparse { len, pieces }
    }

    /// The pieces overlapping bit positions `lo..=hi`, with their bit span `[a, b)`.
    fn overlapping(&self, lo: u64, hi: u64) -> impl Iterator<Item = (u64, u64, &[u8])> {
        self.pieces.iter().filter_map(move |(off, data)| {
            let (a, b) = (off * 8, (off + data.len() as u64) * 8);
            (b > lo && a <= hi).then_some((a, b, &data[..]))
        })
    }

    /// Set bits between bit positions `lo..=hi`.
    pub(crate) fn count(&self, lo: u64, hi: u64) -> u64 {
        self.overlapping(lo, hi).map(|(a, b, data)| count_in(data, lo.max(a) - a, hi.min(b - 1) - a)).sum()
    }

    /// The first position in `lo..=hi` holding `bit` (bytes outside the pieces are zero).
    pub(crate) fn find(&self, bit: bool, lo: u64, hi: u64) -> Option<u64> {
        let mut cursor = lo;
        for (a, b, data) in self.overlapping(lo, hi) {
            if !bit && cursor < a {
                return Some(cursor);
            }
            if let Some(p) = find_in(data, bit, cursor.max(a) - a, hi.min(b - 1) - a) {
                return Some(a + p);
            }
            cursor = b;
        }
        (!bit && cursor <= hi).then_some(cursor)
    }

    /// The whole value as bytes (what GET of the equivalent string returns).
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0; usize::try_from(self.len).unwrap_or(usize::MAX)];
        for (off, data) in &self.pieces {
            let off = *off as usize;
            out[off..off + data.len()].copy_from_slice(data);
        }
        out
    }
}

/// What BITFIELD does when a SET or INCRBY leaves the field's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Keep the low bits (two's complement for signed fields).
    Wrap,
    /// Clamp to the field's minimum or maximum.
    Sat,
    /// Do nothing and reply nil.
    Fail,
}

/// A BITFIELD type: `i1`…`i64` or `u1`…`u63`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldType {
    /// Signed (`i`) or unsigned (`u`).
    pub(crate) signed: bool,
    /// Width in bits.
    pub(crate) bits: u32,
}

impl FieldType {
    /// Reads a raw field value (the low `bits` bits of `raw`) as this type's integer.
    pub(crate) fn interpret(self, raw: u64) -> i64 {
        if self.signed && self.bits < 64 {
            let shift = 64 - self.bits;
            ((raw << shift) as i64) >> shift
        } else {
            raw as i64
        }
    }

    /// `value + incr` in this type (SET passes the new value and 0), or `None` when it
    /// overflows under [`Overflow::Fail`]. Overflow is judged with Redis' own comparisons,
    /// wrapping intermediate differences included (so SET i34 to i64::MIN saturates to the
    /// maximum, as in Redis).
    pub(crate) fn apply(self, value: i64, incr: i64, overflow: Overflow) -> Option<i64> {
        let mask = low_mask(self.bits);
        let (up, down, max, min) = if self.signed {
            let max = (mask >> 1) as i64;
            let min = -max - 1;
            let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
            let min_incr = min.wrapping_sub(value);
            let narrow = self.bits != 64;
            let up =
                value > max || (narrow && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr);
            let down =
                value < min || (narrow && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr);
            (up, !up && down, max, min)
        } else {
            let v = value as u64;
            let max_incr = mask.wrapping_sub(v) as i64;
            let min_incr = v.wrapping_neg() as i64;
            let up = v > mask || (incr > 0 && incr > max_incr);
            (up, !up && incr < 0 && incr < min_incr, mask as i64, 0)
        };
        let sum = (value as u64).wrapping_add(incr as u64);
        if !up && !down {
            return Some(sum as i64);
        }
        match overflow {
            Overflow::Fail => None,
            Overflow::Sat => Some(if up { max } else { min }),
            Overflow::Wrap => Some(self.interpret(sum & mask)),
        }
    }
}

/// The low `bits` bits set.
pub(crate) fn low_mask(bits: u32) -> u64 {
    if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(len: u64, pieces: &[(u64, &[u8])]) -> Sparse {
        Sparse { len, pieces: pieces.iter().map(|(o, d)| (*o, Bytes::copy_from_slice(d))).collect() }
    }

    #[test]
    fn count_and_find_across_gaps() {
        // bytes: 0:FF 1:00(gap) 2:0F 3:00(gap)
        let v = view(4, &[(0, &[0xFF]), (2, &[0x0F])]);
        assert_eq!(v.count(0, 31), 12);
        assert_eq!(v.count(4, 19), 4);
        assert_eq!(v.count(20, 21), 2);
        assert_eq!(v.find(false, 0, 31), Some(8));
        assert_eq!(v.find(true, 1, 31), Some(1));
        assert_eq!(v.find(true, 8, 31), Some(20));
        assert_eq!(v.find(false, 20, 23), None);
        assert_eq!(v.find(false, 20, 31), Some(24));
        assert_eq!(v.find(true, 24, 31), None);
        assert_eq!(v.to_vec(), [0xFF, 0, 0x0F, 0]);
    }

    #[test]
    fn field_overflow_rules() {
        let i8t = FieldType { signed: true, bits: 8 };
        let u2 = FieldType { signed: false, bits: 2 };
        let i64t = FieldType { signed: true, bits: 64 };
        assert_eq!(i8t.apply(200, 0, Overflow::Fail), None);
        assert_eq!(i8t.apply(200, 0, Overflow::Wrap), Some(-56));
        assert_eq!(i8t.apply(100, 100, Overflow::Sat), Some(127));
        assert_eq!(i8t.apply(-100, -100, Overflow::Sat), Some(-128));
        assert_eq!(u2.apply(0, 7, Overflow::Wrap), Some(3));
        assert_eq!(u2.apply(-1, 0, Overflow::Sat), Some(3));
        assert_eq!(u2.apply(1, -2, Overflow::Sat), Some(0));
        assert_eq!(i64t.apply(-1, i64::MIN, Overflow::Wrap), Some(i64::MAX));
        assert_eq!(i64t.interpret(u64::MAX), -1);
        // Redis' wrapping comparison: i64::MIN into an i34 counts as overflowing upwards.
        assert_eq!(
            FieldType { signed: true, bits: 34 }.apply(i64::MIN, 0, Overflow::Sat),
            Some((1 << 33) - 1)
        );
        assert_eq!(FieldType { signed: true, bits: 3 }.interpret(0b100), -4);
    }
}
