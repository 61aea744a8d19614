//! Metadata values: the one record per Redis key in the Metadata CF.

use bytes::BufMut;

use super::extra::Extra;
use super::list::LIST_INITIAL_INDEX;
use super::reader::Reader;
use super::types::{Flags, RedisType};
use super::version::Version;
use crate::error::Result;

/// A decoded metadata value. Strings borrow their value from the input.
///
/// | type | bytes after flags and expire |
/// |---|---|
/// | String | the raw value |
/// | Hash, Set, ZSet | version u64, size u64 |
/// | List | version u64, size u64, head u64, tail u64 |
/// | Bitmap, Sortedint | version u64, size u64 |
/// | JSON | the [`Extra`] format byte, then the document |
/// | Stream, BloomFilter, HyperLogLog, TDigest, TimeSeries, TopK | version u64, size u64, then the [`Extra`] fields |
///
/// All integers are big-endian. Legacy records (flags bit 7 clear) have a u32 expire in
/// seconds and a u32 size; they decode to the same struct, expire converted to milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata<'a> {
    /// The value's type.
    pub ty: RedisType,
    /// Absolute expiry in unix milliseconds; 0 means none.
    pub expire_ms: u64,
    /// The incarnation of a collection; [`Version::NONE`] for strings. A
    /// [`Version::Short`] in every layout but TiTea's, whose collections are named by
    /// 16-byte object ids ([`Version::Id`]).
    pub version: Version,
    /// Number of elements of a collection; 0 for strings and blind-write collections.
    pub size: u64,
    /// First list index in use (lists only).
    pub head: u64,
    /// One past the last list index in use (lists only).
    pub tail: u64,
    /// The size is not tracked: the collection exists while this record exists.
    pub blind_write: bool,
    /// The string value, the JSON document, or a time series' source key; empty otherwise.
    pub value: &'a [u8],
    /// The type-specific fields ([`Extra::None`] for the types without any).
    pub extra: Extra,
}

impl<'a> Metadata<'a> {
    /// The metadata of a string holding `value`.
    pub fn string(value: &'a [u8], expire_ms: u64) -> Self {
        Metadata {
            ty: RedisType::String,
            expire_ms,
            version: Version::NONE,
            size: 0,
            head: 0,
            tail: 0,
            blind_write: false,
            value,
            extra: Extra::None,
        }
    }

    /// This metadata without a string's value (every other field copied): what a reader
    /// keeps of a record whose bytes it does not hold on to.
    pub(crate) fn without_value(self) -> Metadata<'static> {
        let Metadata { ty, expire_ms, version, size, head, tail, blind_write, value: _, extra } = self;
        Metadata { ty, expire_ms, version, size, head, tail, blind_write, value: &[], extra }
    }

    /// The metadata of a new, empty collection with the given version. Lists start with
    /// head = tail = [`LIST_INITIAL_INDEX`]; the type's extra fields have their defaults.
    pub fn collection(ty: RedisType, version: Version) -> Metadata<'static> {
        let (head, tail) =
            if ty == RedisType::List { (LIST_INITIAL_INDEX, LIST_INITIAL_INDEX) } else { (0, 0) };
        let extra = Extra::default_for(ty);
        Metadata { ty, expire_ms: 0, version, size: 0, head, tail, blind_write: false, value: &[], extra }
    }

    /// The extra fields [`Metadata::encode`] writes: [`Metadata::extra`] when it belongs to
    /// the type, else the type's defaults.
    pub(crate) fn fields(&self) -> std::borrow::Cow<'_, Extra> {
        if self.extra.fits(self.ty) {
            std::borrow::Cow::Borrowed(&self.extra)
        } else {
            std::borrow::Cow::Owned(Extra::default_for(self.ty))
        }
    }

    /// Whether the key has expired at `now_ms`: `expire != 0 && expire < now`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_ms != 0 && self.expire_ms < now_ms
    }

    /// Whether the key exists at `now_ms`: not expired, and non-empty unless its type is
    /// emptyable ([`RedisType::is_emptyable`]; blind-write collections exist while their
    /// record does).
    pub fn is_live(&self, now_ms: u64) -> bool {
        !self.is_expired(now_ms) && (self.ty.is_emptyable() || self.blind_write || self.size > 0)
    }

    /// The number of bytes [`Metadata::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        let common = match self.ty {
            RedisType::String | RedisType::Json => self.value.len(),
            RedisType::List => 32,
            _ => 16,
        };
        let extra = if Extra::carried_by(self.ty) { self.fields().encoded_len(self.value) } else { 0 };
        9 + common + extra
    }

    /// Writes the 64-bit form: flags, expire u64, then the value (strings), version and size
    /// (hash, set, zset) or version, size, head and tail (lists), then the type's
    /// extra fields ([`Metadata::extra`]; a JSON document after its format byte). A blind-write collection
    /// writes size 0. The blind-write bit is only written for collections (a string with it
    /// would not decode). The version is a [`Version::Short`]: of an [`Version::Id`], which
    /// [`super::KeyLayout::encode_metadata`] refuses for these layouts, the last 8 bytes.
    pub fn encode(&self, out: &mut impl BufMut) {
        let flags = Flags::new(self.ty, self.blind_write && self.ty.is_collection()).byte();
        // As in `decode`, only the types that carry extra fields build them.
        let extra = Extra::carried_by(self.ty);
        if self.ty.is_single_kv() {
            out.put_u8(flags);
            out.put_u64(self.expire_ms);
            if extra {
                self.fields().encode(&[], out);
            }
            out.put_slice(self.value);
            return;
        }
        // The fixed fields go out as one copy of a fixed length (25 bytes, a list's 41): one
        // capacity check instead of one per field.
        let version = match self.version {
            Version::Short(v) => v,
            Version::Id(id) => {
                u64::from_be_bytes([id[8], id[9], id[10], id[11], id[12], id[13], id[14], id[15]])
            }
        };
        let mut head = [0u8; 41];
        head[0] = flags;
        head[1..9].copy_from_slice(&self.expire_ms.to_be_bytes());
        head[9..17].copy_from_slice(&version.to_be_bytes());
        head[17..25].copy_from_slice(&(if self.blind_write { 0 } else { self.size }).to_be_bytes());
        if self.ty == RedisType::List {
            head[25..33].copy_from_slice(&self.head.to_be_bytes());
            head[33..41].copy_from_slice(&self.tail.to_be_bytes());
            out.put_slice(&head);
        } else {
            out.put_slice(&head[..25]);
        }
        if extra {
            self.fields().encode(self.value, out);
        }
    }

    /// [`Metadata::encode`] into a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        if self.ty == RedisType::String {
            // Flags, expiry and value, as `encode` writes them, into a zeroed vector of their
            // length by slice copies: a put per field costs a capacity check and a call each.
            let mut out = vec![0; 9 + self.value.len()];
            out[0] = Flags::new(self.ty, false).byte();
            out[1..9].copy_from_slice(&self.expire_ms.to_be_bytes());
            out[9..].copy_from_slice(self.value);
            return out;
        }
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode(&mut out);
        out
    }

    /// Reads a metadata value, 64-bit or legacy. Borrows the string value from `bytes`.
    ///
    /// # Errors
    /// [`crate::Error::Truncated`] when a field is cut short, [`crate::Error::TrailingBytes`]
    /// after a collection's last field, [`crate::Error::InvalidField`] for an extra field no
    /// writer produces, and the flags errors of [`Flags::from_byte`].
    pub fn decode(bytes: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(bytes, "metadata");
        let flags = Flags::from_byte(r.u8()?)?;
        let expire_ms = if flags.wide { r.u64()? } else { u64::from(r.u32()?) * 1000 };
        let mut meta = Metadata {
            ty: flags.ty,
            expire_ms,
            version: Version::NONE,
            size: 0,
            head: 0,
            tail: 0,
            blind_write: flags.blind_write,
            value: &[],
            extra: Extra::None,
        };
        // Only the newer types carry extra fields: the common ones skip the (large) Extra
        // round trip, which cost a metadata decode 10 ns.
        let extra = Extra::carried_by(flags.ty);
        if flags.ty.is_single_kv() {
            if extra {
                meta.extra = Extra::decode(flags.ty, &mut r)?.0;
            }
            meta.value = r.rest();
            return Ok(meta);
        }
        meta.version = Version::Short(r.u64()?);
        meta.size = if flags.wide { r.u64()? } else { u64::from(r.u32()?) };
        if flags.blind_write {
            meta.size = 0;
        }
        if flags.ty == RedisType::List {
            meta.head = r.u64()?;
            meta.tail = r.u64()?;
        }
        if extra {
            (meta.extra, meta.value) = Extra::decode(flags.ty, &mut r)?;
        }
        r.finish()?;
        Ok(meta)
    }
}

/// Reads a string record of NeoKV's first encoding (found under
/// [`super::KeyLayout::legacy_string_key`]): `[expire_at_ms i64][payload]`, big-endian, where
/// 0 (or, never written, a negative time) means no expiry.
///
/// # Errors
/// [`crate::Error::Truncated`] when the value is shorter than 8 bytes.
pub fn decode_neokv_legacy(bytes: &[u8]) -> Result<Metadata<'_>> {
    let mut r = Reader::new(bytes, "neokv legacy string");
    let expire = r.u64()? as i64;
    Ok(Metadata::string(r.rest(), expire.max(0) as u64))
}

/// Writes a string record of NeoKV's first encoding: `expire_ms` (0 for none) as a big-endian
/// i64, then `payload`. Nothing here writes such records; tools and tests make them to read.
pub fn encode_neokv_legacy(expire_ms: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + payload.len());
    out.put_u64(expire_ms);
    out.put_slice(payload);
    out
}

/// Reads only the type and expiry of a metadata value, without the rest: what a compaction
/// filter or an expiry sweep needs.
///
/// # Errors
/// As [`Metadata::decode`] for the flags and expire fields.
pub fn peek_type_and_expire(bytes: &[u8]) -> Result<(RedisType, u64)> {
    let mut r = Reader::new(bytes, "metadata");
    let flags = Flags::from_byte(r.u8()?)?;
    let expire_ms = if flags.wide { r.u64()? } else { u64::from(r.u32()?) * 1000 };
    Ok((flags.ty, expire_ms))
}
