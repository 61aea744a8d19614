//! The Redis type ids and the flags byte of a metadata value.

use crate::error::{Error, Result};

/// A Redis data type as stored in the low nibble of the flags byte.
///
/// Only the five supported types exist as values; the other ids Kvrocks uses decode to
/// [`Error::UnsupportedType`].
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
}

impl RedisType {
    /// The type id written in the flags byte.
    pub const fn id(self) -> u8 {
        self as u8
    }

    /// The name the Redis `TYPE` command replies with.
    pub const fn name(self) -> &'static str {
        match self {
            RedisType::String => "string",
            RedisType::Hash => "hash",
            RedisType::List => "list",
            RedisType::Set => "set",
            RedisType::ZSet => "zset",
        }
    }

    /// Whether values of this type live in subkeys (everything but strings).
    pub const fn is_collection(self) -> bool {
        !matches!(self, RedisType::String)
    }

    /// Reads a type id.
    ///
    /// # Errors
    /// [`Error::UnsupportedType`] for the ids Kvrocks knows but this crate does not
    /// implement (0 and 6–11), [`Error::UnknownType`] for 12 and above.
    pub fn from_id(id: u8) -> Result<Self> {
        let name = match id {
            1 => return Ok(RedisType::String),
            2 => return Ok(RedisType::Hash),
            3 => return Ok(RedisType::List),
            4 => return Ok(RedisType::Set),
            5 => return Ok(RedisType::ZSet),
            0 => "none",
            6 => "bitmap",
            7 => "sortedint",
            8 => "stream",
            9 => "bloomfilter",
            10 => "json",
            11 => "hyperloglog",
            _ => return Err(Error::UnknownType(id)),
        };
        Err(Error::UnsupportedType { id, name })
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
    /// [`Error::InvalidFlags`] when a reserved bit is set or a string claims blind-write;
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
