//! TiTea's values and index records (Redis on TiKV, gengmei-tech/titea `server/store/`).
//!
//! ```text
//! metadata value:  [type u8][object id 16][count u64][created s u64][expire ms u64][extra]
//!   type            'r' string, 'h' hash, 'l' list, 's' set, 'z' sorted set
//!   extra           a string's value; a list's first and last position (i64 each)
//! element key:     kv<ns>d[object id 16][element]
//!   list element    ['<' or '>'][position i64]         (the sign of the position)
//!   zset member     [0][member]          → the score as decimal text
//!   zset score      [1][ordered score 8][member] → the score as decimal text
//! expire index:    kv<ns>e[expire ms u64][key]    → [object id 16][type u8]
//! GC index:        kv<ns>g[object id 16]          → [type u8]
//! ```
//! All integers big-endian; an expiry of 0 is none. Ordered scores are the engine's own
//! encoding ([`super::encode_f64`]), which TiTea's `Float64ToUint64` matches.

use bytes::BufMut;

use super::list::LIST_INITIAL_INDEX;
use super::metadata::Metadata;
use super::reader::Reader;
use super::types::RedisType;
use super::version::Version;
use crate::error::{Error, Result};

/// TiTea's system prefix, before the namespace of every record.
pub const SYSTEM_PREFIX: &[u8] = b"kv";

/// The marker byte of a sorted set's member records.
pub(crate) const WITHOUT_SCORE: u8 = 0;

/// The marker byte of a sorted set's score records.
pub(crate) const WITH_SCORE: u8 = 1;

/// The record type byte of the expire index.
pub const EXPIRE: u8 = b'e';

/// The record type byte of the GC index.
pub const GC: u8 = b'g';

/// Where a metadata value's object id lies (bytes 1..17).
pub const OBJECT_ID: std::ops::Range<usize> = 1..17;

/// Where a metadata value's created-at field lies (bytes 25..33).
pub const CREATED_AT: std::ops::Range<usize> = 25..33;

const SIGN: u64 = 1 << 63;

/// TiTea's type byte for `ty` (`None` for a type it has no id for).
pub fn type_byte(ty: RedisType) -> Option<u8> {
    Some(match ty {
        RedisType::String => b'r',
        RedisType::Hash => b'h',
        RedisType::List => b'l',
        RedisType::Set => b's',
        RedisType::ZSet => b'z',
        _ => return None,
    })
}

/// TiTea's signed list position of the engine's index `index`: the engine's initial index
/// is TiTea's 0, so a new list's first RPUSH lands on 0 and its first LPUSH on −1, as
/// TiTea's `RPush` and `LPush` write them.
pub(crate) fn list_position(index: u64) -> i64 {
    ((index ^ SIGN) as i64).wrapping_add(1)
}

/// The engine's list index of TiTea's position `position` ([`list_position`] inverted).
pub(crate) fn list_index(position: i64) -> u64 {
    (position.wrapping_sub(1) as u64) ^ SIGN
}

/// The element part of a list record's key: the sign of the position, then the position.
pub fn list_sub(index: u64) -> [u8; 9] {
    let position = list_position(index);
    let mut out = [0u8; 9];
    out[0] = if position < 0 { b'<' } else { b'>' };
    out[1..].copy_from_slice(&position.to_be_bytes());
    out
}

/// The engine's index in a list record's element part ([`list_sub`]); `None` when it is not
/// 9 bytes or its sign byte disagrees with the position.
pub fn decode_list_sub(sub: &[u8]) -> Option<u64> {
    let (&sign, rest) = sub.split_first()?;
    let position = i64::from_be_bytes(rest.try_into().ok()?);
    let expected = if position < 0 { b'<' } else { b'>' };
    (sign == expected).then(|| list_index(position))
}

/// Reads a TiTea metadata value. A list's positions become the engine's head (first) and
/// tail (one past the last).
///
/// # Errors
/// [`Error::Truncated`] under 41 bytes (a list's 57); [`Error::UnknownType`] for a type byte
/// TiTea does not write; [`Error::TrailingBytes`] after a hash's, set's or sorted set's
/// fields or a list's positions.
pub fn decode_metadata(bytes: &[u8]) -> Result<Metadata<'_>> {
    let mut r = Reader::new(bytes, "titea metadata");
    let ty = match r.u8()? {
        b'r' => RedisType::String,
        b'h' => RedisType::Hash,
        b'l' => RedisType::List,
        b's' => RedisType::Set,
        b'z' => RedisType::ZSet,
        other => return Err(Error::UnknownType(other)),
    };
    let version = Version::Id(r.id()?);
    let size = r.u64()?;
    let _created = r.u64()?;
    let expire_ms = r.u64()?;
    if ty == RedisType::String {
        return Ok(Metadata { version, ..Metadata::string(r.rest(), expire_ms) });
    }
    let mut meta = Metadata { expire_ms, size, ..Metadata::collection(ty, version) };
    if ty == RedisType::List {
        meta.head = list_index(r.u64()? as i64);
        meta.tail = list_index(r.u64()? as i64).wrapping_add(1);
    }
    r.finish()?;
    Ok(meta)
}

/// Writes `meta` as TiTea does, its created-at time 0 ([`CREATED_AT`]: the engine fills it
/// in at commit). A list's head and tail become its first and last position.
///
/// # Errors
/// [`Error::UnsupportedType`] for a type TiTea does not store; [`Error::LayoutMismatch`] for
/// a [`Version::Short`] other than [`Version::NONE`].
pub fn encode_metadata(meta: &Metadata<'_>, out: &mut impl BufMut) -> Result<()> {
    let ty = type_byte(meta.ty).ok_or(Error::UnsupportedType { name: meta.ty.name(), id: meta.ty as u8 })?;
    out.put_u8(ty);
    // A string not given an id yet ([`Version::NONE`]) writes the all-zero id.
    out.put_slice(&if meta.version == Version::NONE { [0; 16] } else { meta.version.id()? });
    out.put_u64(if meta.ty == RedisType::String { 0 } else { meta.size });
    out.put_u64(0);
    out.put_u64(meta.expire_ms);
    match meta.ty {
        RedisType::String => out.put_slice(meta.value),
        RedisType::List => {
            let (head, tail) = if meta.size == 0 {
                (LIST_INITIAL_INDEX, LIST_INITIAL_INDEX)
            } else {
                (meta.head, meta.tail)
            };
            out.put_i64(list_position(head));
            out.put_i64(list_position(tail.wrapping_sub(1)));
        }
        _ => {}
    }
    Ok(())
}

/// A score as the text TiTea keeps in a member's records (Go's `ParseFloat` reads it):
/// the shortest digits that read back to the same double, `inf` / `-inf`.
pub(crate) fn score_text(x: f64) -> String {
    format!("{:?}", x + 0.0)
}

/// The score in a member's record: decimal text (what TiTea's clients sent, or
/// [`score_text`]).
///
/// # Errors
/// [`Error::InvalidField`] for bytes that are not a number, [`Error::NanScore`] for NaN.
pub(crate) fn decode_score_text(bytes: &[u8]) -> Result<f64> {
    let bad = || Error::InvalidField { what: "titea member score", value: bytes.len() as u64 };
    let x: f64 = std::str::from_utf8(bytes).map_err(|_| bad())?.parse().map_err(|_| bad())?;
    if x.is_nan() {
        return Err(Error::NanScore);
    }
    Ok(x + 0.0)
}

/// The value of an expire index record: the collection's object id and type byte.
///
/// # Errors
/// [`Error::UnsupportedType`] for a type TiTea does not store.
pub(crate) fn expire_value(meta: &Metadata<'_>) -> Result<Vec<u8>> {
    let ty = type_byte(meta.ty).ok_or(Error::UnsupportedType { name: meta.ty.name(), id: meta.ty as u8 })?;
    let mut out = meta.version.id()?.to_vec();
    out.push(ty);
    Ok(out)
}
