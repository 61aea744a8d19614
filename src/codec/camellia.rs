//! camellia-redis-proxy-kv's values: metadata, zset member scores, score-key scores and the
//! routing prefix its TiKV and HBase clients put before every key.
//!
//! ```text
//! metadata value:  [encode version u8][type u8][key version i64][expire ms i64][extra]
//!   string          0, 1, extra = the value
//!   hash, zset, set 0, 2|3|5, extra = element count i32   (encode version 0)
//!   hash, set       1, 2|5,   no extra: the count is not kept (encode version 1)
//! zset member value (s#):  the score as Java's Double.toString writes it ("1.5", "1.0E10")
//! zset score (k# key):     the score's IEEE 754 bits, big-endian (not order-preserving)
//! ```
//! All integers big-endian; an expiry of −1 (any negative) is none, and camellia counts a key
//! expired when `expire <= now`, so 0 reads as long expired.

use bytes::BufMut;

use super::metadata::Metadata;
use super::reader::Reader;
use super::types::RedisType;
use super::version::Version;
use crate::error::{Error, Result};

/// camellia's type id for `ty` (`None` for a type camellia-kv has no id for).
pub(crate) fn type_id(ty: RedisType) -> Option<u8> {
    Some(match ty {
        RedisType::String => 1,
        RedisType::Hash => 2,
        RedisType::ZSet => 3,
        RedisType::List => 4,
        RedisType::Set => 5,
        _ => return None,
    })
}

/// Reads a camellia metadata value. Encode version 1 hashes and sets decode as blind-write
/// collections (no size).
///
/// # Errors
/// [`Error::Truncated`] under 18 bytes or a count cut short; [`Error::TrailingBytes`] after a
/// count; [`Error::UnknownType`] for a type id camellia does not write;
/// [`Error::InvalidField`] for an encode version other than 0 (1 for hashes and sets), a
/// list (camellia-kv writes none), or a zset of encode version 1 (its index lives in a Redis
/// cache, not in the store).
pub fn decode_metadata(bytes: &[u8]) -> Result<Metadata<'_>> {
    let mut r = Reader::new(bytes, "camellia metadata");
    let encode_version = r.u8()?;
    let ty = match r.u8()? {
        1 => RedisType::String,
        2 => RedisType::Hash,
        3 => RedisType::ZSet,
        4 => RedisType::List,
        5 => RedisType::Set,
        other => return Err(Error::UnknownType(other)),
    };
    let version = Version::Short(r.u64()?);
    let expire = r.u64()? as i64;
    let expire_ms = match expire {
        e if e < 0 => 0,
        0 => 1,
        e => e as u64,
    };
    let bad = |what| Error::InvalidField { what, value: u64::from(encode_version) };
    if ty == RedisType::String {
        if encode_version != 0 {
            return Err(bad("camellia string encode version"));
        }
        return Ok(Metadata { version, ..Metadata::string(r.rest(), expire_ms) });
    }
    let mut meta = Metadata { expire_ms, ..Metadata::collection(ty, version) };
    match (ty, encode_version) {
        (RedisType::List, _) => return Err(bad("camellia list encode version")),
        (_, 0) => meta.size = u64::from(r.u32()?),
        (RedisType::Hash | RedisType::Set, 1) => meta.blind_write = true,
        (RedisType::ZSet, _) => return Err(bad("camellia zset encode version")),
        _ => return Err(bad("camellia encode version")),
    }
    r.finish()?;
    Ok(meta)
}

/// Writes `meta` as camellia does: encode version 1 for a blind-write hash or set, else 0;
/// no expiry as −1; a count over `i32::MAX` as `i32::MAX`.
///
/// # Errors
/// [`Error::UnsupportedType`] for a type camellia-kv does not store (a list, a stream, …).
pub fn encode_metadata(meta: &Metadata<'_>, out: &mut impl BufMut) -> Result<()> {
    let unsupported = || Error::UnsupportedType { name: meta.ty.name(), id: meta.ty as u8 };
    let id = type_id(meta.ty).filter(|_| meta.ty != RedisType::List).ok_or_else(unsupported)?;
    let blind = meta.blind_write && matches!(meta.ty, RedisType::Hash | RedisType::Set);
    out.put_u8(u8::from(blind));
    out.put_u8(id);
    out.put_u64(meta.version.short()?);
    out.put_i64(if meta.expire_ms == 0 { -1 } else { meta.expire_ms.min(i64::MAX as u64) as i64 });
    if meta.ty == RedisType::String {
        out.put_slice(meta.value);
    } else if !blind {
        out.put_u32(meta.size.min(i32::MAX as u64) as u32);
    }
    Ok(())
}

/// The type and expiry of a camellia metadata value, as [`decode_metadata`] reads them.
///
/// # Errors
/// As [`decode_metadata`].
pub fn peek_type_and_expire(bytes: &[u8]) -> Result<(RedisType, u64)> {
    decode_metadata(bytes).map(|m| (m.ty, m.expire_ms))
}

/// A score as Java's `Double.toString` writes it, what camellia keeps in a zset member's
/// record: the shortest digits that read back to the same double, plain between 10^-3 and
/// 10^7 (`"1.5"`, `"100.0"`), else `d.dddE±n` (`"1.0E10"`, `"1.0E-5"`); `"Infinity"`.
pub(crate) fn java_double_string(x: f64) -> String {
    use std::fmt::Write;
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let mut out = String::with_capacity(32);
    if x.is_sign_negative() {
        out.push('-');
    }
    let a = x.abs();
    if a == 0.0 {
        out.push_str("0.0");
        return out;
    }
    // `{:e}` gives the shortest round-trip digits ("1.2345e-7"); Java's scientific form has
    // at least two, the two nearest the value when one would do ("4.9E-324", not "5.0E-324").
    let mut sci = String::with_capacity(32);
    let plain = (1e-3..1e7).contains(&a);
    let _ = write!(sci, "{a:e}");
    if !plain && !sci.contains('.') {
        sci.clear();
        let _ = write!(sci, "{a:.1e}");
    }
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (lead, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if !plain {
        let _ = write!(out, "{lead}.{}E{exp}", if frac.is_empty() { "0" } else { frac });
        return out;
    }
    // Plain: the digits `lead frac` with the point after `exp + 1` of them.
    let digits = || lead.chars().chain(frac.chars());
    let count = 1 + frac.len() as i32;
    let point = exp + 1;
    if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.extend(digits());
    } else if point >= count {
        out.extend(digits());
        out.extend(std::iter::repeat_n('0', (point - count) as usize));
        out.push_str(".0");
    } else {
        out.extend(digits().take(point as usize));
        out.push('.');
        out.extend(digits().skip(point as usize));
    }
    out
}

/// Reads a zset member's score record: a decimal number as Java's `Double.parseDouble`
/// accepts it (what camellia writes, [`java_double_string`], or any other decimal form).
///
/// # Errors
/// [`Error::InvalidField`] for bytes that are not such a number, and [`Error::NanScore`] for
/// `NaN`.
pub(crate) fn decode_member_score(bytes: &[u8]) -> Result<f64> {
    let bad = || Error::InvalidField { what: "camellia member score", value: bytes.len() as u64 };
    let text = std::str::from_utf8(bytes).map_err(|_| bad())?.trim();
    let (sign, body) = match text.as_bytes().first() {
        Some(b'-') => (-1.0, &text[1..]),
        Some(b'+') => (1.0, &text[1..]),
        _ => (1.0, text),
    };
    let body = body.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(body);
    let x = match body {
        "Infinity" => f64::INFINITY,
        "NaN" => return Err(Error::NanScore),
        b if !b.is_empty()
            && b.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'-' | b'+')) =>
        {
            b.parse::<f64>().map_err(|_| bad())?
        }
        _ => return Err(bad()),
    };
    // -0.0 reads as 0.0, as the engine's other score encodings (one zero, ordered by member).
    Ok(if x == 0.0 { 0.0 } else { sign * x })
}

/// The 8 bytes camellia puts in a score key: the IEEE 754 bits, big-endian (`-0.0` as
/// `+0.0`, so equal scores share their bytes).
///
/// # Errors
/// [`Error::NanScore`] for NaN.
pub(crate) fn encode_raw_score(x: f64) -> Result<[u8; 8]> {
    if x.is_nan() {
        return Err(Error::NanScore);
    }
    Ok(if x == 0.0 { 0u64 } else { x.to_bits() }.to_be_bytes())
}

/// The score of a camellia score key's 8 bytes (`-0.0` reads as `0.0`).
///
/// # Errors
/// [`Error::Truncated`] or [`Error::TrailingBytes`] unless 8 bytes; [`Error::NanScore`].
pub(crate) fn decode_raw_score(bytes: &[u8]) -> Result<f64> {
    let b: [u8; 8] = match bytes.try_into() {
        Ok(b) => b,
        Err(_) if bytes.len() < 8 => {
            return Err(Error::Truncated { what: "score", need: 8, have: bytes.len() });
        }
        Err(_) => return Err(Error::TrailingBytes { what: "score", extra: bytes.len() - 8 }),
    };
    let x = f64::from_bits(u64::from_be_bytes(b));
    if x.is_nan() {
        return Err(Error::NanScore);
    }
    Ok(if x == 0.0 { 0.0 } else { x })
}

/// The prefix camellia's storage clients put before every key of cluster slot `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CamelliaRoute {
    /// None: the OBKV client (the slot is a partition column there).
    None,
    /// The first 8 bytes of md5 of the slot's decimal digits: the TiKV and HBase clients.
    SlotMd5,
    /// The slot as a big-endian i32: the TiKV and HBase clients of releases before the md5.
    SlotInt,
}

impl CamelliaRoute {
    /// How many bytes the prefix takes.
    pub fn len(self) -> usize {
        match self {
            CamelliaRoute::None => 0,
            CamelliaRoute::SlotMd5 => 8,
            CamelliaRoute::SlotInt => 4,
        }
    }

    /// Whether there is no prefix.
    pub fn is_empty(self) -> bool {
        self == CamelliaRoute::None
    }

    /// The prefix of slot `slot` (the Redis Cluster slot of the user key).
    pub fn prefix(self, slot: u16) -> Vec<u8> {
        use md5::{Digest, Md5};
        match self {
            CamelliaRoute::None => Vec::new(),
            CamelliaRoute::SlotMd5 => Md5::digest(slot.to_string().as_bytes())[..8].to_vec(),
            CamelliaRoute::SlotInt => i32::from(slot).to_be_bytes().to_vec(),
        }
    }
}
