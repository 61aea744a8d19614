//! [`Db`]: the database over a backend, and the helpers every type family shares.
//!
//! This file holds the `Db` itself (its state, constructors, the selected database and the
//! run of one command); its methods are grouped by concern in `db/`:
//!
//! | file | concern |
//! |---|---|
//! | `read.rs` | record reads: metadata keys, lookups (expired keys found on the way), subkeys |
//! | `write.rs` | queued writes: metadata in the layout's form, new collections, deletions |
//! | `commit.rs` | the batch: one atomic write, its key-count changes, the keys it touches |
//! | `adapt.rs` | what NeoKV's and TiTea's own systems write beside a batch |
//! | `memo.rs` | the read memo: what a command looked up, for its commit |
//! | `journal.rs` | touched keys, events and effects, lent by the session |
//! | `notify.rs` | keyspace events in Redis' order |
//! | `propagation.rs` | the replication stream of the commands run |
//! | `blocking.rs` | blocking commands: may block, re-runs, the [`Block`] |
//! | `clock.rs` | the command's time, versions, random numbers, idle times and LFU counters |
//! | `switches.rs` | blind writes, `new` events, bitmaps as strings, stream node size |
//! | `shared.rs` | what every connection to one store shares ([`Shared`]) |

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;

use super::blocking::Block;
use super::counts::Delta;
use super::cursor::CursorStore;
use super::propagate::Propagated;
use super::reply::CommandResult;
use crate::backend::KvBackend;
use crate::codec::{Clock, KeyLayout, Metadata};

mod adapt;
mod blocking;
mod clock;
mod commit;
mod journal;
mod memo;
mod notify;
mod propagation;
mod read;
mod shared;
mod switches;
mod write;

use commit::Changes;
pub(crate) use journal::{Journal, JournalSlot, expired_keys};
pub use journal::{Touch, TouchedKey};
use memo::ReadMemo;
pub(crate) use read::metadata_record;
pub(crate) use shared::{Share, Shared};

/// How many logical databases `SELECT` accepts (Redis' default `databases 16`).
pub const DATABASES: usize = 16;

/// What a stored record costs beside its key and value bytes (the store's per-entry
/// bookkeeping: an ordered map's node, an LSM's block index share).
pub(crate) const RECORD_OVERHEAD: u64 = 16;

/// A live key's metadata, with a string's value split off as `Bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The decoded metadata; `value` is empty (the bytes are in [`Entry::value`]).
    pub(crate) meta: Metadata<'static>,
    /// A string's value; empty for collections.
    pub(crate) value: Bytes,
}

/// Redis' `LAZYFREE_THRESHOLD`: a deleted value of more allocations than this goes to its
/// lazyfree thread. Here every deleted collection's records are left for the collector;
/// those of more records than this count as lazily freed objects (INFO's
/// `lazyfree_pending_objects` and `lazyfreed_objects`).
pub const LAZYFREE_THRESHOLD: u64 = 64;

/// A Redis database over a [`KvBackend`]: what one command runs against.
///
/// `SELECT n` switches the namespace records are written under: database 0 uses the
/// layout's namespace (`__namespace` by default), database `n > 0` uses that namespace
/// followed by `:n`, so databases never see each other's keys.
///
/// [`Db::new`] makes a self-contained database for one caller (tests, tools, one thread):
/// it owns its backend and state and remembers its selected database. Many connections on
/// many threads share a [`super::Engine`] instead, which lends each command a `Db` over a
/// borrowed backend.
pub struct Db<'a, B> {
    pub(crate) backend: B,
    pub(crate) shared: Share<'a>,
    index: usize,
    journal: RefCell<JournalSlot>,
    /// Whether a blocking command may block ([`super::Engine::execute`] outside MULTI).
    may_block: bool,
    /// Whether the running command's lookups set the keys' last-use time (not Redis'
    /// `LOOKUP_NOTOUCH` commands: EXISTS, TYPE, TTL…, OBJECT, MEMORY).
    pub(crate) touching: bool,
    /// A woken client's re-run ([`super::Engine::retry`]).
    retrying: bool,
    /// Boxed: a command that does not block moves a pointer, not the [`Block`].
    block: Option<Box<Block>>,
    swapped: Vec<(usize, usize)>,
    /// Writes to a transaction's overlay: their count changes wait in `counted` until the
    /// engine commits the overlay ([`Db::take_counted`]).
    deferred: bool,
    counted: RefCell<Vec<(usize, Delta)>>,
    /// What the running command learnt of the metadata records it looked up since it last wrote
    /// (the first [`READ_MEMO`](memo::READ_MEMO)): its commit takes what its batch replaces (for
    /// the key counts, the garbage and the touched keys) from here, not from the store a second
    /// time. Kept only while a command runs ([`Db::run_command`]: under its key locks nothing else
    /// writes them) and emptied by every write.
    read_memo: RefCell<ReadMemo>,
    remembering: std::cell::Cell<bool>,
    /// The time the running command reads, fixed at its first read (as Redis' command time
    /// snapshot: one command sees one instant); 0 outside a command.
    command_ms: std::cell::Cell<u64>,
    /// The time the caller gave the next command ([`super::Session::set_time`]); 0: none.
    given_ms: u64,
    /// The time the last command ran at (its replication effects' absolute TTLs).
    ran_ms: u64,
    /// The replication stream of the commands run so far, while recorded
    /// ([`Db::record_propagation`]).
    propagated: Option<Vec<Propagated>>,
    /// What the running command propagates instead of its arguments, when it says so
    /// ([`Db::propagate_instead`]).
    instead: RefCell<Option<Vec<Vec<Bytes>>>>,
    /// The cluster slots the keyspace walks read ([`super::Session::set_key_slots`]).
    pub(crate) key_slots: Option<Arc<[(u16, u16)]>>,
}

impl<B: KvBackend> Db<'static, B> {
    /// A database with the default (Kvrocks standalone) layout and the system clock.
    pub fn new(backend: B) -> Self {
        Db::with_layout(backend, KeyLayout::default())
    }

    /// A database writing records with `layout`.
    pub fn with_layout(backend: B, layout: KeyLayout) -> Self {
        Db::over(backend, Share::Owned(Box::new(Shared::new(layout))), 0)
    }

    /// Replaces the clock (tests use [`crate::codec::ManualClock`]).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        let shared = self.owned();
        shared.access = super::access::AccessTimes::new(clock.now_ms() / 1000);
        shared.clock = clock;
        self
    }

    /// Seeds the generator behind SPOP, SRANDMEMBER, RANDOMKEY and friends.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.owned().seed(seed);
        self
    }

    fn owned(&mut self) -> &mut Shared {
        match &mut self.shared {
            Share::Owned(s) => s,
            Share::Borrowed(_) => unreachable!("Db::new owns its state"),
        }
    }
}

impl<'a, B: KvBackend> Db<'a, B> {
    pub(crate) fn over(backend: B, shared: Share<'a>, index: usize) -> Self {
        Db {
            backend,
            shared,
            index,
            journal: RefCell::default(),
            may_block: false,
            touching: true,
            retrying: false,
            block: None,
            swapped: Vec::new(),
            deferred: false,
            counted: RefCell::default(),
            read_memo: RefCell::default(),
            remembering: std::cell::Cell::new(false),
            command_ms: std::cell::Cell::new(0),
            given_ms: 0,
            ran_ms: 0,
            propagated: None,
            instead: RefCell::default(),
            key_slots: None,
        }
    }

    /// Runs one command's handler, with the read memo on ([`Db::remember`]) for a
    /// command that may write (a read-only one would only pay for it).
    pub(crate) fn run_command<T>(&mut self, writes: bool, run: impl FnOnce(&mut Self) -> T) -> T {
        self.read_memo.get_mut().clear();
        self.remembering.set(writes);
        let given = std::mem::take(&mut self.given_ms);
        self.command_ms.set(if given > 0 { given } else { self.shared.clock.now_ms().max(1) });
        let result = run(self);
        self.ran_ms = self.command_ms.get();
        self.command_ms.set(0);
        self.remembering.set(false);
        self.read_memo.get_mut().clear();
        result
    }

    /// SWAPDB: databases `a` and `b` (both below [`DATABASES`]) exchange their keys, in
    /// O(1): each logical database names a namespace, and the two names are swapped (the
    /// caller holds the whole-keyspace lock exclusively, as [`super::Engine`] does for a
    /// keyspace-wide write). Records nothing for `a == b`, else the pair for
    /// [`Db::take_swapped`]: every key of both databases may have changed.
    pub(crate) fn swapdb(&mut self, a: usize, b: usize) {
        if a != b {
            self.shared.swap(a, b);
            self.swapped.push((a, b));
        }
    }

    /// The database pairs SWAPDB exchanged since the last call, in order.
    pub(crate) fn take_swapped(&mut self) -> Vec<(usize, usize)> {
        std::mem::take(&mut self.swapped)
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend, mutably (for maintenance such as [`crate::gc`]).
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The layout of the selected database.
    pub fn layout(&self) -> &KeyLayout {
        self.shared.layout_of(self.index).expect("select checked the layout")
    }

    /// The selected database index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Switches to database `index`.
    ///
    /// # Errors
    /// "ERR DB index is out of range" past [`DATABASES`]; a storage error when the
    /// namespace would exceed 255 bytes.
    pub fn select(&mut self, index: usize) -> CommandResult<()> {
        self.shared.layout_of(index)?;
        self.index = index;
        Ok(())
    }

    /// The layout database `index` writes with.
    pub(crate) fn layout_of(&self, index: usize) -> CommandResult<KeyLayout> {
        self.shared.layout_of(index).cloned()
    }

    /// The SCAN cursors (shared by every connection, as in Redis).
    pub(crate) fn cursors(&self) -> &CursorStore {
        &self.shared.cursors
    }
}
