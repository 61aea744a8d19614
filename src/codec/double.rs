//! Order-preserving encoding of `f64` scores.
//!
//! `bits = x.to_bits(); encoded = if sign { !bits } else { bits | 1 << 63 }`, written
//! big-endian, so byte order equals numeric order: `-inf < -1 < 0 < 1 < +inf`.
//!
//! **`-0.0` policy:** `-0.0` is stored as `+0.0` (bytes `80 00 00 00 00 00 00 00`). The two
//! compare equal in Redis, so they must land on the same bytes for members with equal scores
//! to order by member; a decoded score is therefore never `-0.0`.

use crate::error::{Error, Result};

/// The bytes of `x` in score order.
///
/// # Errors
/// [`Error::NanScore`] for NaN, which has no place in the order.
pub fn encode_f64(x: f64) -> Result<[u8; 8]> {
    if x.is_nan() {
        return Err(Error::NanScore);
    }
    let bits = if x == 0.0 { 0 } else { x.to_bits() };
    let ordered = if bits >> 63 == 1 { !bits } else { bits | 1 << 63 };
    Ok(ordered.to_be_bytes())
}

/// The score whose encoding is `bytes`.
///
/// # Errors
/// [`Error::NanScore`] when the bytes decode to NaN (never written by [`encode_f64`]).
/// The bytes `7F FF FF FF FF FF FF FF` (what `-0.0` would encode to without the policy
/// above, never written by [`encode_f64`]) decode to `+0.0`.
pub fn decode_f64(bytes: [u8; 8]) -> Result<f64> {
    let ordered = u64::from_be_bytes(bytes);
    let bits = if ordered >> 63 == 1 { ordered & !(1 << 63) } else { !ordered };
    let x = f64::from_bits(bits);
    if x.is_nan() {
        Err(Error::NanScore)
    } else if x == 0.0 {
        Ok(0.0)
    } else {
        Ok(x)
    }
}

/// [`decode_f64`] from a slice that must be exactly 8 bytes.
///
/// # Errors
/// [`Error::Truncated`] or [`Error::TrailingBytes`] for a wrong length, [`Error::NanScore`]
/// for NaN.
pub fn decode_f64_slice(bytes: &[u8]) -> Result<f64> {
    match <[u8; 8]>::try_from(bytes) {
        Ok(b) => decode_f64(b),
        Err(_) if bytes.len() < 8 => Err(Error::Truncated { what: "score", need: 8, have: bytes.len() }),
        Err(_) => Err(Error::TrailingBytes { what: "score", extra: bytes.len() - 8 }),
    }
}
