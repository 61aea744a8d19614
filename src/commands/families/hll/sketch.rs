//! Redis' HyperLogLog string format and algorithms, reimplemented from its description in
//! Redis 7.0's `hyperloglog.c`: the 16-byte header (`HYLL`, encoding, 3 unused bytes, a
//! little-endian cardinality cache whose top bit marks it stale), 16384 six-bit registers
//! either dense (12288 bytes, register `i` at bit `6i`, least significant bits first) or
//! sparse (opcodes ZERO `00xxxxxx`, XZERO `01xxxxxx yyyyyyyy`, VAL `1vvvvvxx`), the
//! MurmurHash64A element hash with seed `0xadc83b19`, the in-place sparse update with its
//! split-and-merge rule and promotion to dense, and Ertl's estimator.

/// Register index bits.
const P: u32 = 14;
/// Registers.
pub(crate) const REGISTERS: usize = 1 << P;
/// Hash bits left for the run of zeros.
const Q: usize = 64 - P as usize;
/// Header bytes.
pub(crate) const HEADER: usize = 16;
/// Bytes of a dense HLL.
pub(crate) const DENSE_SIZE: usize = HEADER + REGISTERS * 6 / 8;
/// Redis' `hll-sparse-max-bytes` default: past it a sparse HLL becomes dense.
const SPARSE_MAX_BYTES: usize = 3000;
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
const ENC_DENSE: u8 = 0;
const ENC_SPARSE: u8 = 1;

/// The sparse representation is corrupt (Redis' INVALIDOBJ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Corrupt;

/// MurmurHash64A as Redis uses it (8-byte blocks read little-endian).
pub(crate) fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().unwrap_or_default());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element lands in and the length of its run of zeros plus one.
pub(crate) fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | 1 << Q;
    (index, rest.trailing_zeros() as u8 + 1)
}

/// A new, empty HLL: sparse, one XZERO opcode covering every register, cache 0.
pub(crate) fn new_sparse() -> Vec<u8> {
    let mut v = b"HYLL".to_vec();
    v.extend_from_slice(&[ENC_SPARSE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let len = XZERO_MAX_LEN - 1;
    v.extend_from_slice(&[0x40 | (len >> 8) as u8, (len & 0xFF) as u8]);
    v
}

/// Whether `value` is an HLL Redis accepts: `HYLL`, a known encoding, and exactly the
/// dense size when dense.
pub(crate) fn is_valid(value: &[u8]) -> bool {
    value.len() >= HEADER
        && &value[..4] == b"HYLL"
        && value[4] <= ENC_SPARSE
        && (value[4] != ENC_DENSE || value.len() == DENSE_SIZE)
}

pub(crate) fn dense_get(regs: &[u8], i: usize) -> u8 {
    let (byte, fb) = (i * 6 / 8, (i * 6) & 7);
    let b0 = u16::from(regs[byte]);
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8
}

pub(crate) fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let (byte, fb) = (i * 6 / 8, (i * 6) & 7);
    let v = u16::from(val);
    regs[byte] = (u16::from(regs[byte]) & !(63 << fb) | (v << fb)) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next = ((u16::from(*next) & !(63u16 >> (8 - fb))) | (v >> (8 - fb))) as u8;
    }
}

/// One sparse opcode: `(registers covered, value, opcode bytes)`. A missing second XZERO
/// byte reads as 0, as Redis reads the string's terminator.
pub(crate) fn opcode(ops: &[u8], p: usize) -> (usize, u8, usize) {
    let b = ops[p];
    match b & 0xC0 {
        0x00 => (usize::from(b & 0x3F) + 1, 0, 1),
        0x40 => {
            let low = usize::from(ops.get(p + 1).copied().unwrap_or(0));
            ((usize::from(b & 0x3F) << 8 | low) + 1, 0, 2)
        }
        _ => (usize::from(b & 0x03) + 1, ((b >> 2) & 0x1F) + 1, 1),
    }
}

fn val_op(value: u8, len: usize) -> u8 {
    0x80 | (value - 1) << 2 | (len - 1) as u8
}

fn zero_ops(out: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        out.extend_from_slice(&[0x40 | ((len - 1) >> 8) as u8, ((len - 1) & 0xFF) as u8]);
    } else {
        out.push((len - 1) as u8);
    }
}

/// Every register's value, from either encoding.
///
/// # Errors
/// [`Corrupt`] when sparse runs do not cover exactly 16384 registers.
pub(crate) fn registers(hll: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut max = vec![0u8; REGISTERS];
    merge_into(&mut max, hll)?;
    Ok(max)
}

/// `max[i] = max(max[i], register i)` (Redis' `hllMerge`).
///
/// # Errors
/// [`Corrupt`] as [`registers`].
pub(crate) fn merge_into(max: &mut [u8], hll: &[u8]) -> Result<(), Corrupt> {
    let regs = &hll[HEADER..];
    if hll[4] == ENC_DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(regs, i));
        }
        return Ok(());
    }
    let (mut i, mut p) = (0, 0);
    while p < regs.len() {
        let (run, value, size) = opcode(regs, p);
        if value > 0 {
            // Unlike a count, a merge refuses a run past the last register (Redis 7.0).
            if run + i > REGISTERS {
                return Err(Corrupt);
            }
            for m in &mut max[i..i + run] {
                *m = (*m).max(value);
            }
        }
        i += run;
        p += size;
    }
    if i == REGISTERS { Ok(()) } else { Err(Corrupt) }
}

/// Converts a sparse HLL to dense in place (header, cache included, kept).
///
/// # Errors
/// [`Corrupt`] as [`registers`].
pub(crate) fn to_dense(hll: &mut Vec<u8>) -> Result<(), Corrupt> {
    if hll[4] == ENC_DENSE {
        return Ok(());
    }
    let regs = registers(hll)?;
    let mut dense = hll[..HEADER].to_vec();
    dense[4] = ENC_DENSE;
    dense.resize(DENSE_SIZE, 0);
    for (i, &v) in regs.iter().enumerate().filter(|(_, v)| **v > 0) {
        dense_set(&mut dense[HEADER..], i, v);
    }
    *hll = dense;
    Ok(())
}

/// Raises register `index` to `count` if lower; returns whether it changed (Redis'
/// `hllDenseSet` / `hllSparseSet`, promoting a sparse HLL to dense when the value or the
/// size needs it). A sparse update marks the cache stale, as Redis' does; a dense one
/// leaves that to the caller.
///
/// # Errors
/// [`Corrupt`] for a sparse HLL whose opcodes do not reach `index`.
pub(crate) fn set(hll: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    if hll[4] == ENC_DENSE {
        let regs = &mut hll[HEADER..];
        if dense_get(regs, index) >= count {
            return Ok(false);
        }
        dense_set(regs, index, count);
        return Ok(true);
    }
    if count > SPARSE_VAL_MAX_VALUE {
        to_dense(hll)?;
        return set(hll, index, count);
    }
    // Step 1: find the opcode covering `index`, and the one before it.
    let end = hll.len();
    let (mut p, mut first, mut prev, mut found) = (HEADER, 0, None, None);
    while p < end {
        let (span, value, size) = opcode(hll, p);
        if index < first + span {
            found = Some((span, value, size));
            break;
        }
        prev = Some(p);
        p += size;
        first += span;
    }
    let Some((span, value, size)) = found else {
        return Err(Corrupt);
    };
    // Step 2: the cases that rewrite one byte, else the split.
    let is_val = hll[p] & 0x80 != 0;
    if is_val && value >= count {
        return Ok(false);
    }
    if span == 1 && (is_val || hll[p] & 0xC0 == 0) {
        hll[p] = val_op(count, 1);
    } else {
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        if is_val {
            if index != first {
                seq.push(val_op(value, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(value, last - index));
            }
        } else {
            if index != first {
                zero_ops(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                zero_ops(&mut seq, last - index);
            }
        }
        // Step 3: splice, unless the string would outgrow the sparse limit.
        if seq.len() > size && end + seq.len() - size > SPARSE_MAX_BYTES {
            to_dense(hll)?;
            return set(hll, index, count);
        }
        // A 2-byte XZERO cut short at the end reads Redis' sds terminator as its second
        // byte; Redis then resizes by `seq - 2` and copies `seq` from `p`, so the string
        // ends one byte into `seq` (the dropped byte stays past Redis' string end, where a
        // later split of the same cut opcode reads it; here that byte reads as 0).
        let new_len = end + seq.len() - size;
        hll.splice(p..(p + size).min(end), seq);
        hll.truncate(new_len);
    }
    // Step 4: merge adjacent equal VAL opcodes, scanning up to 5 opcodes from `prev`.
    let mut p = prev.unwrap_or(HEADER);
    let mut scan = 5;
    while p < hll.len() && scan > 0 {
        scan -= 1;
        let b = hll[p];
        if b & 0x80 == 0 {
            p += if b & 0xC0 == 0x40 { 2 } else { 1 };
            continue;
        }
        if hll.get(p + 1).is_some_and(|n| n & 0x80 != 0) {
            let (l1, v1, _) = opcode(hll, p);
            let (l2, v2, _) = opcode(hll, p + 1);
            if v1 == v2 && l1 + l2 <= SPARSE_VAL_MAX_LEN {
                hll[p + 1] = val_op(v1, l1 + l2);
                hll.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate_cache(hll);
    Ok(true)
}

/// Marks the cached cardinality stale.
pub(crate) fn invalidate_cache(hll: &mut [u8]) {
    hll[15] |= 0x80;
}

/// The cached cardinality, when fresh.
pub(crate) fn cached(hll: &[u8]) -> Option<u64> {
    (hll[15] & 0x80 == 0).then(|| u64::from_le_bytes(hll[8..16].try_into().unwrap_or_default()))
}

/// Stores a fresh cardinality in the cache.
pub(crate) fn store_cache(hll: &mut [u8], card: u64) {
    hll[8..16].copy_from_slice(&card.to_le_bytes());
}

/// The register histogram of an HLL (64 buckets, as Redis keeps).
///
/// # Errors
/// [`Corrupt`] for sparse runs not covering exactly 16384 registers.
pub(crate) fn histogram(hll: &[u8]) -> Result<[u32; 64], Corrupt> {
    Ok(raw_histogram(&registers(hll)?))
}

/// The histogram of raw one-byte registers (PFCOUNT of many keys).
pub(crate) fn raw_histogram(regs: &[u8]) -> [u32; 64] {
    let mut histo = [0u32; 64];
    for &r in regs {
        histo[usize::from(r & 63)] += 1;
    }
    histo
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if before == z {
            return z / 3.0;
        }
    }
}

/// Ertl's estimate from a register histogram, rounded as `llroundl`.
pub(crate) fn estimate(histo: &[u32; 64]) -> u64 {
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histo[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_matches_reference_vectors() {
        // Empty input, seed 0: h starts at 0 and every step keeps it 0.
        assert_eq!(murmur64a(b"", 0), 0);
        // One 8-byte block of zeros, seed 0: k stays 0, h = (0 ^ 8m) * m before the final mix.
        let m = 0xc6a4_a793_5bd1_e995_u64;
        let mut h = 8u64.wrapping_mul(m).wrapping_mul(m);
        h ^= h >> 47;
        h = h.wrapping_mul(m);
        h ^= h >> 47;
        assert_eq!(murmur64a(&[0; 8], 0), h);
    }

    #[test]
    fn sparse_split_and_merge() {
        let mut h = new_sparse();
        assert!(set(&mut h, 5, 3).unwrap());
        // XZERO(5) split: ZERO len 5, VAL 3 x1, XZERO len 16378.
        assert_eq!(&h[HEADER..], [0x04, 0x88, 0x40 | 0x3F, 0xF9]);
        assert!(set(&mut h, 6, 3).unwrap());
        // ZERO5, VAL3x1, VAL3x1 merge into VAL3x2, then XZERO 16377.
        assert_eq!(&h[HEADER..], [0x04, 0x89, 0x7F, 0xF8]);
        assert!(!set(&mut h, 6, 2).unwrap());
        let regs = registers(&h).unwrap();
        assert_eq!((regs[4], regs[5], regs[6], regs[7]), (0, 3, 3, 0));
        assert!(set(&mut h, 100, 40).unwrap());
        assert_eq!(h.len(), DENSE_SIZE);
        let regs = registers(&h).unwrap();
        assert_eq!((regs[5], regs[6], regs[100], regs[16383]), (3, 3, 40, 0));
    }
}
