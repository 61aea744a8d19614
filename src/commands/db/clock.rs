//! Time and chance: the time a command runs at, fresh versions, random numbers, and the keys'
//! access times (OBJECT IDLETIME and FREQ, RESTORE's IDLETIME and FREQ).

use super::Db;
use crate::backend::KvBackend;
use crate::codec::Version;

impl<B: KvBackend> Db<'_, B> {
    /// The time the next command runs at (see [`crate::commands::Session::set_time`]; 0: the
    /// clock's).
    pub(crate) fn give_time(&mut self, unix_ms: u64) {
        self.given_ms = unix_ms;
    }

    /// The clock's time in unix milliseconds; while a command runs, the time it started
    /// (as Redis 7.0 fixes the time a command's expiry checks see).
    pub fn now_ms(&self) -> u64 {
        match self.command_ms.get() {
            0 => self.shared.clock.now_ms(),
            fixed => fixed,
        }
    }

    /// A fresh collection version of the layout's variant: a [`Version::Short`], or for
    /// TiTea a [`Version::Id`] of the 64-bit version followed by 8 bytes mixed from it
    /// (unique as the version is).
    pub fn new_version(&self) -> Version {
        let v = self.shared.versions.next(self.shared.clock.now_us());
        if self.layout().version_len() == 16 {
            // splitmix64's finaliser: the low half looks random, as TiTea's UUIDs do.
            let mut z = v.wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            let mut id = [0; 16];
            id[..8].copy_from_slice(&v.to_be_bytes());
            id[8..].copy_from_slice(&(z ^ (z >> 31)).to_be_bytes());
            Version::Id(id)
        } else {
            Version::Short(v)
        }
    }

    /// The next pseudo-random number (xorshift64*).
    pub(crate) fn random_u64(&mut self) -> u64 {
        self.shared.random_u64()
    }

    /// Seconds since `key` was last used (OBJECT IDLETIME), from times kept in memory in a
    /// bounded table: a key it forgot reports a lower bound.
    pub(crate) fn idle_secs(&self, key: &[u8]) -> u64 {
        (self.now_ms() / 1000).saturating_sub(self.shared.access.last(&self.metadata_key(key)))
    }

    /// Sets when `key` was last used to `idle_secs` ago (RESTORE … IDLETIME).
    pub(crate) fn set_idle_secs(&self, key: &[u8], idle_secs: u64) {
        let at = (self.now_ms() / 1000).saturating_sub(idle_secs);
        self.shared.access.touch(&self.metadata_key(key), at);
    }

    /// Whether access frequencies are kept instead of last-use times (an LFU policy:
    /// see [`crate::commands::Engine::set_lfu`]).
    pub(crate) fn lfu(&self) -> bool {
        self.shared.access.lfu()
    }

    /// The logarithmic access counter of `key` (OBJECT FREQ), decayed to now.
    pub(crate) fn freq(&self, key: &[u8]) -> u8 {
        self.shared.access.freq(&self.metadata_key(key), self.now_ms() / 1000)
    }

    /// Sets the access counter of `key` (RESTORE … FREQ).
    pub(crate) fn set_freq(&self, key: &[u8], counter: u8) {
        self.shared.access.set_freq(&self.metadata_key(key), counter, self.now_ms() / 1000);
    }
}
