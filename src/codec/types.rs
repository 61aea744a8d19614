//! The Redis type ids and the flags byte of a metadata value.

use crate::error::{Error, Result};

/// A Redis data type as stored in the low nibble of the flags byte: every id Kvrocks
/// defines (1–14). Id 0 ("none") and 15 do not decode.
///
/// Kvrocks calls String and JSON "single KV" types: their record is the whole value, with
/// no version or size. The others keep a version and a size, and their data in subkeys.
/// "Emptyable" types exist with size 0 (a stream, a filter, a sketch); for the rest a
/// size of 0 means the key is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RedisType {
    /// A string, stored inline in the metadata value.
    String = 1,
    /// A hash: one subkey per field.
    Hash = 2,
    /// A list: one subkey per element, indexed by `u64`.
    List = 3,
    /// A set: one subkey per member, empty value.
    Set = 4,
    /// A sorted set: one subkey per member plus one score key.
    ZSet = 5,
    /// A bitmap: 1024-byte fragments in subkeys named by their decimal byte offset; size is
    /// the length in bytes.
    Bitmap = 6,
    /// Kvrocks' sorted integers: one subkey per 8-byte id.
    Sortedint = 7,
    /// A stream, with its entry-id counters in the metadata.
    Stream = 8,
    /// A scalable bloom filter (RedisBloom's `MBbloom--`).
    BloomFilter = 9,
    /// A JSON document (RedisJSON's `ReJSON-RL`), stored inline after a format byte.
    Json = 10,
    /// Kvrocks' HyperLogLog type (register segments in subkeys).
    HyperLogLog = 11,
    /// A t-digest sketch (`TDIS-TYPE`).
    TDigest = 12,
    /// A time series.
    TimeSeries = 13,
    /// A top-k sketch.
    TopK = 14,
}

impl RedisType {
    /// The type id written in the flags byte.
    pub const fn id(self) -> u8 {
        self as u8
    }

    /// Kvrocks' name for the type (its `RedisTypeNames`); [`RedisType::reply_name`] is what
    /// `TYPE` replies.
    pub const fn name(self) -> &'static str {
        match self {
            RedisType::String => "string",
            RedisType::Hash => "hash",
            RedisType::List => "list",
            RedisType::Set => "set",
            RedisType::ZSet => "zset",
            RedisType::Bitmap => "bitmap",
            RedisType::Sortedint => "sortedint",
            RedisType::Stream => "stream",
            RedisType::BloomFilter => "MBbloom--",
            RedisType::Json => "ReJSON-RL",
            RedisType::HyperLogLog => "hyperloglog",
            RedisType::TDigest => "TDIS-TYPE",
            RedisType::TimeSeries => "timeseries",
            RedisType::TopK => "topk",
        }
    }

    /// The name `TYPE` (and `SCAN … TYPE`) uses: Kvrocks' name, except that a bitmap is a
    /// "string" as in Redis, where bitmaps are strings and clients expect that name.
    pub const fn reply_name(self) -> &'static str {
        match self {
            RedisType::Bitmap => "string",
            ty => ty.name(),
        }
    }

    /// Whether the metadata record is the whole value, with no version, size or subkeys
    /// (Kvrocks' `IsSingleKVType`: String and JSON).
    pub const fn is_single_kv(self) -> bool {
        matches!(self, RedisType::String | RedisType::Json)
    }

    /// Whether values of this type live in subkeys (everything but the single-KV types).
    pub const fn is_collection(self) -> bool {
        !self.is_single_kv()
    }

    /// Whether a key of this type exists with size 0 (Kvrocks' `IsEmptyableType`, plus
    /// top-k: its writer was not available to check, and a garbage collector must not drop
    /// what may be live).
    pub const fn is_emptyable(self) -> bool {
        self.is_single_kv()
            || matches!(
                self,
                RedisType::Stream
                    | RedisType::BloomFilter
                    | RedisType::HyperLogLog
                    | RedisType::TDigest
                    | RedisType::TimeSeries
                    | RedisType::TopK
            )
    }

    /// Every type, by id.
    pub const ALL: [RedisType; 14] = [
        RedisType::String,
        RedisType::Hash,
        RedisType::List,
        RedisType::Set,
        RedisType::ZSet,
        RedisType::Bitmap,
        RedisType::Sortedint,
        RedisType::Stream,
        RedisType::BloomFilter,
        RedisType::Json,
        RedisType::HyperLogLog,
        RedisType::TDigest,
        RedisType::TimeSeries,
        RedisType::TopK,
    ];

    /// Reads a type id.
    ///
    /// # Errors
    /// [`Error::UnsupportedType`] for 0 (Kvrocks' "none", never stored), [`Error::UnknownType`]
    /// for 15.
    pub fn from_id(id: u8) -> Result<Self> {
        match id {
            0 => Err(Error::UnsupportedType { id, name: "none" }),
            1..=14 => Ok(RedisType::ALL[usize::from(id) - 1]),
            _ => Err(Error::UnknownType(id)),
        }
    }
}

/// Bit 7 of the flags byte: expire and size are 64-bit (always set by our writers).
pub const FLAG_64BIT: u8 = 0x80;
/// Bit 6 of the flags byte: a blind-write collection whose size is not tracked (an extension).
pub const FLAG_BLIND_WRITE: u8 = 0x40;
/// Bits 4–5 of the flags byte: reserved, must be zero.
pub const FLAG_RESERVED: u8 = 0x30;
/// Bits 0–3 of the flags byte: the type id.
pub const TYPE_MASK: u8 = 0x0F;

/// The decoded flags byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flags {
    /// The value's type.
    pub ty: RedisType,
    /// Whether expire and size are the 64-bit forms (false for legacy records).
    pub wide: bool,
    /// Whether the collection is blind-write (size not tracked).
    pub blind_write: bool,
}

impl Flags {
    /// The flags our writers produce: 64-bit, with the blind-write bit when asked.
    pub const fn new(ty: RedisType, blind_write: bool) -> Self {
        Flags { ty, wide: true, blind_write }
    }

    /// The byte: `0x80 | (0x40 if blind) | type`.
    pub const fn byte(self) -> u8 {
        (if self.wide { FLAG_64BIT } else { 0 })
            | (if self.blind_write { FLAG_BLIND_WRITE } else { 0 })
            | self.ty.id()
    }

    /// Reads a flags byte.
    ///
    /// # Errors
    /// [`Error::InvalidFlags`] when a reserved bit is set or a single-KV type (string, JSON) claims blind-write;
    /// the errors of [`RedisType::from_id`] for an unsupported or unknown type.
    pub fn from_byte(byte: u8) -> Result<Self> {
        if byte & FLAG_RESERVED != 0 {
            return Err(Error::InvalidFlags(byte));
        }
        let ty = RedisType::from_id(byte & TYPE_MASK)?;
        let blind_write = byte & FLAG_BLIND_WRITE != 0;
        if blind_write && !ty.is_collection() {
            return Err(Error::InvalidFlags(byte));
        }
        Ok(Flags { ty, wide: byte & FLAG_64BIT != 0, blind_write })
    }
}
