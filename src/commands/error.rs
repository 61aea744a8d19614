//! [`CommandError`]: the error replies commands give, with Redis 7.0's exact text.

/// A command's failure. Its `Display` is the exact Redis error line (without `-`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The key holds another type.
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// An argument is not an i64 (or out of the command's range).
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// An argument or stored value is not a float.
    #[error("ERR value is not a valid float")]
    NotFloat,
    /// Options that cannot go together, or an unknown option.
    #[error("ERR syntax error")]
    Syntax,
    /// INCR/DECR family overflow.
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    /// The key does not exist (LSET, RENAME…).
    #[error("ERR no such key")]
    NoSuchKey,
    /// An index outside the collection (LSET).
    #[error("ERR index out of range")]
    IndexOutOfRange,
    /// A value past 512 MB (SETRANGE, APPEND).
    #[error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")]
    StringTooLong,
    /// Wrong number of arguments; holds the lowercase command name.
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(String),
    /// Any other error; holds the whole line, code included (e.g. `ERR invalid cursor`).
    #[error("{0}")]
    Other(String),
    /// The storage layer failed.
    #[error("ERR storage error: {0}")]
    Storage(#[from] crate::Error),
}

impl CommandError {
    /// An `ERR`-coded error with the given message.
    pub(crate) fn err(message: impl std::fmt::Display) -> Self {
        CommandError::Other(format!("ERR {message}"))
    }
}
