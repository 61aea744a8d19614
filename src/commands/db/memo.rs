//! The read memo ([`ReadMemo`]): the metadata records a command looked up, so that its
//! commit takes what its batch replaces from here instead of the store.

use super::Db;
use crate::backend::KvBackend;
use crate::codec::{Metadata, Version};
use crate::commands::counts::counted_meta;

/// How many metadata records a [`Db`] remembers between writes: a command reads a few.
pub(super) const READ_MEMO: usize = 8;

/// What a command found in a metadata record: `None` when there is none, `Some(None)` when
/// it does not decode, else what its commit needs of it.
pub(super) type Recalled = Option<Option<Found>>;

/// What a commit needs of a metadata record its command looked up (a few words, not the
/// whole [`Metadata`], which the memo would copy at every lookup).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    /// What it adds to the key counts ([`counted_meta`]): `None` when it is no key (an
    /// empty collection), else its expiry.
    pub(crate) counted: Option<u64>,
    /// Whether its type keeps its value in the record alone (no elements).
    pub(crate) single_kv: bool,
    /// Its version.
    pub(crate) version: Version,
}

impl Found {
    /// What the commit needs of `meta`.
    pub(crate) fn of(meta: &Metadata<'_>) -> Found {
        Found { counted: counted_meta(meta), single_kv: meta.ty.is_single_kv(), version: meta.version }
    }

    /// Whether the key exists at `now_ms`, as [`Metadata::is_live`].
    pub(crate) fn is_live(&self, now_ms: u64) -> bool {
        self.counted.is_some_and(|expire_ms| expire_ms == 0 || expire_ms >= now_ms)
    }
}

/// The metadata records a command looked up ([`Db::lookup_at`]): each key a range of
/// `keys`, with what it found and whether the lookup set the key's last-use time. Handed
/// from command to command with the [`Scratch`](super::journal::Scratch).
#[derive(Debug, Default)]
pub(crate) struct ReadMemo {
    pub(super) reads: Vec<(std::ops::Range<usize>, Recalled, bool)>,
    pub(super) keys: Vec<u8>,
}

impl ReadMemo {
    fn find(&self, key: &[u8]) -> Option<&(std::ops::Range<usize>, Recalled, bool)> {
        self.reads.iter().find(|(r, _, _)| &self.keys[r.clone()] == key)
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<&Recalled> {
        self.find(key).map(|(_, found, _)| found)
    }

    /// Whether the command's lookup of `key` set its last-use time.
    pub(super) fn touched(&self, key: &[u8]) -> bool {
        self.find(key).is_some_and(|(_, _, touched)| *touched)
    }

    fn push(&mut self, key: &[u8], found: Recalled, touched: bool) {
        let start = self.keys.len();
        self.keys.extend_from_slice(key);
        self.reads.push((start..self.keys.len(), found, touched));
    }

    fn len(&self) -> usize {
        self.reads.len()
    }

    pub(super) fn clear(&mut self) {
        self.reads.clear();
        self.keys.clear();
    }
}

impl<B: KvBackend> Db<'_, B> {
    /// Remembers what the record at `mkey` in the metadata column family held, and whether
    /// the lookup set the key's last-use time (`touched`), while a command that may write
    /// runs and there is room ([`READ_MEMO`]); the first reading stands (nothing writes the
    /// record before the memo is emptied).
    pub(super) fn remember(&self, mkey: &[u8], found: Recalled, touched: bool) {
        if !self.remembering.get() {
            return;
        }
        let mut memo = self.read_memo.borrow_mut();
        if memo.len() < READ_MEMO && memo.get(mkey).is_none() {
            memo.push(mkey, found, touched);
        }
    }
}
