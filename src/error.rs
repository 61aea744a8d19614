//! The crate's one error type.

/// Everything that can go wrong in the codec and the backend layer.
///
/// Command-level failures (WRONGTYPE, syntax errors…) are not errors of the library: they are
/// Redis error replies ([`crate::Reply::Error`]).
///
/// The tag is a whole word (`repr(u64)`; the variants' fields are 8-byte aligned, so the enum
/// is no larger for it): a `Result<T, Error>` is then copied and tested word by word, where a
/// one-byte tag puts a small `Ok` payload such as `[u8; 8]` at an odd offset and has the
/// compiler move it, and check for a `String` to free, byte by byte.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[repr(u64)]
pub enum Error {
    /// The input ended before a field could be read.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        /// The record or field being read.
        what: &'static str,
        /// Bytes the field needs.
        need: usize,
        /// Bytes that were left.
        have: usize,
    },
    /// A fixed-size record had bytes after its last field.
    #[error("{what} has {extra} trailing bytes")]
    TrailingBytes {
        /// The record being read.
        what: &'static str,
        /// How many bytes were left over.
        extra: usize,
    },
    /// Type id 0: Kvrocks' "none", which no record carries.
    #[error("unsupported redis type {name} (id {id})")]
    UnsupportedType {
        /// The type nibble.
        id: u8,
        /// Kvrocks' name for it.
        name: &'static str,
    },
    /// A type id no known writer uses (15).
    #[error("unknown redis type id {0}")]
    UnknownType(u8),
    /// Reserved flag bits were set, or the blind-write bit on a single-KV type.
    #[error("invalid metadata flags {0:#04x}")]
    InvalidFlags(u8),
    /// A metadata field holds a value no Kvrocks writer produces (a HyperLogLog encode type
    /// other than 0).
    #[error("invalid {what} {value} in metadata")]
    InvalidField {
        /// The field.
        what: &'static str,
        /// Its value.
        value: u64,
    },
    /// A namespace longer than 255 bytes.
    #[error("namespace is {0} bytes, the maximum is 255")]
    NamespaceTooLong(usize),
    /// A user key longer than `u32::MAX` bytes.
    #[error("key is {0} bytes, the maximum is 4294967295")]
    KeyTooLong(usize),
    /// More md5 bytes were asked for than a digest has.
    #[error("md5 prefix of {0} bytes, the maximum is 16")]
    HashPrefixTooLong(usize),
    /// NaN cannot be stored as a score.
    #[error("NaN is not a storable score")]
    NanScore,
    /// A key does not belong to the layout it was decoded with.
    #[error("key does not match the layout: {0}")]
    LayoutMismatch(&'static str),
    /// List head/tail arithmetic left the u64 range.
    #[error("list index out of range")]
    ListIndexOverflow,
    /// A failure reported by a storage backend.
    #[error("backend: {0}")]
    Backend(String),
    /// A transactional backend refused a command's batch because something the command read
    /// changed after it read it; nothing was applied and the command may run again
    /// (see [`crate::backend::KvBackend::begin`]).
    #[error("conflict: {0}")]
    Conflict(String),
    /// A DUMP payload shorter than its footer, of a newer RDB version, or with a wrong CRC.
    #[error("DUMP payload version or checksum are wrong")]
    DumpVersionOrChecksum,
    /// A DUMP payload whose object does not decode.
    #[error("bad DUMP data: {0}")]
    DumpFormat(&'static str),
    /// An RDB file that does not decode, truncated or corrupt.
    #[error("{what} at byte {offset}")]
    RdbFile {
        /// What is wrong.
        what: String,
        /// The offset in the file where the reader found it.
        offset: u64,
    },
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
