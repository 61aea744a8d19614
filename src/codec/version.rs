//! Collection versions, their generation and the clock it reads.
//!
//! `version = (unix_us << 11) + counter % 2048`, the counter starting at a random value.
//! Unlike Kvrocks' generator, [`VersionGenerator::next`] never repeats or goes backwards,
//! even when the clock steps back: it returns `max(candidate, last + 1)`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// The incarnation of a collection, as its records carry it: what a layout's subkeys, score
/// keys and metadata name it by.
///
/// | variant | layouts | bytes in a record |
/// |---|---|---|
/// | `Short` | Kvrocks, NeoKV, camellia | 8, big-endian |
/// | `Id` | TiTea | its 16 bytes (the object id) |
///
/// A layout given the other variant refuses it with [`Error::LayoutMismatch`]; its decoders
/// produce its own. Strings carry [`Version::NONE`] until a layout that versions them
/// ([`super::KeyLayout::versions_strings`]) gives them one. Versions of one variant order as
/// their records do.
///
/// The tag is a whole word (`repr(u64)`, 24 bytes as with a one-byte tag), so an `Id` sits
/// at offset 8 and a version (and a decoded record holding one) is copied word by word, not
/// byte by byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u64)]
pub enum Version {
    /// A 64-bit version.
    Short(u64),
    /// A 16-byte object id.
    Id([u8; 16]),
}

impl Version {
    /// No version: a string's, before a layout that versions strings stamps one.
    pub const NONE: Version = Version::Short(0);

    /// Whether this is [`Version::NONE`] or an all-zero id.
    pub(crate) fn is_none(self) -> bool {
        match self {
            Version::Short(v) => v == 0,
            Version::Id(id) => id == [0; 16],
        }
    }

    /// The 64-bit version.
    ///
    /// # Errors
    /// [`Error::LayoutMismatch`] for a [`Version::Id`].
    pub fn short(self) -> Result<u64> {
        match self {
            Version::Short(v) => Ok(v),
            Version::Id(_) => {
                Err(Error::LayoutMismatch("a 16-byte id where the layout's versions are 64-bit"))
            }
        }
    }

    /// The 16-byte object id.
    ///
    /// # Errors
    /// [`Error::LayoutMismatch`] for a [`Version::Short`].
    pub fn id(self) -> Result<[u8; 16]> {
        match self {
            Version::Id(id) => Ok(id),
            Version::Short(_) => Err(Error::LayoutMismatch(
                "a 64-bit version where the layout names collections by 16-byte ids",
            )),
        }
    }
}

impl Default for Version {
    fn default() -> Self {
        Version::NONE
    }
}

impl From<u64> for Version {
    fn from(v: u64) -> Self {
        Version::Short(v)
    }
}

impl From<[u8; 16]> for Version {
    fn from(id: [u8; 16]) -> Self {
        Version::Id(id)
    }
}

impl std::fmt::Display for Version {
    /// A `Short` in decimal, an `Id` in 32 hex digits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Version::Short(v) => write!(f, "{v}"),
            Version::Id(id) => id.iter().try_for_each(|b| write!(f, "{b:02x}")),
        }
    }
}

/// A source of wall-clock time. Injectable so tests of expiry never sleep.
pub trait Clock: Send + Sync {
    /// Microseconds since the unix epoch.
    fn now_us(&self) -> u64;

    /// Milliseconds since the unix epoch.
    fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
    }
}

/// A clock that only moves when told to: for tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    us: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `ms` milliseconds since the epoch.
    pub fn new(ms: u64) -> Self {
        ManualClock { us: AtomicU64::new(ms * 1000) }
    }

    /// Sets the time, in milliseconds. It may go backwards.
    pub fn set_ms(&self, ms: u64) {
        self.us.store(ms * 1000, Ordering::SeqCst);
    }

    /// Moves the time forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: u64) {
        self.us.fetch_add(ms * 1000, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> u64 {
        self.us.load(Ordering::SeqCst)
    }
}

/// Hands out strictly increasing versions.
#[derive(Debug)]
pub struct VersionGenerator {
    counter: AtomicU64,
    last: AtomicU64,
}

impl VersionGenerator {
    /// A generator whose counter starts at `seed`.
    pub fn new(seed: u64) -> Self {
        VersionGenerator { counter: AtomicU64::new(seed), last: AtomicU64::new(0) }
    }

    /// The process-wide generator, its counter seeded at random. Every database in the
    /// process draws from it, so versions never repeat within the process.
    pub fn global() -> &'static VersionGenerator {
        static GLOBAL: OnceLock<VersionGenerator> = OnceLock::new();
        GLOBAL.get_or_init(|| VersionGenerator::new(RandomState::new().build_hasher().finish()))
    }

    /// The next version at time `now_us`: `(now_us << 11) + counter % 2048`, or one more
    /// than the last version handed out if that is larger.
    pub fn next(&self, now_us: u64) -> u64 {
        let counter = self.counter.fetch_add(1, Ordering::Relaxed) % 2048;
        let candidate = (now_us << 11).wrapping_add(counter);
        let prev = self
            .last
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
                Some(candidate.max(last.saturating_add(1)))
            })
            .unwrap_or_else(|last| last);
        candidate.max(prev.saturating_add(1))
    }
}
