//! [`Db`]: the database over a backend, and the helpers every type family shares.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLockReadGuard};

use bytes::{Buf, Bytes};

use std::time::Duration;

use super::Reply;
use super::blocking::Block;
use super::counts::{Delta, KeyCount, KeyCounts, add_delta, counted, counted_meta};
use super::cursor::CursorStore;
use super::error::CommandError;
use super::listeners::Listeners;
use super::notify::{Effects, Event, NotifyFlags};
use super::propagate::Propagated;
use super::reply::CommandResult;
use super::table::CommandInfo;
use crate::backend::{BatchOp, Direction, KvBackend, ScanIter, WriteBatch};
use crate::codec::{
    Clock, ColumnFamily, KeyLayout, LayoutKind, Metadata, RedisType, SystemClock, Version, VersionGenerator,
    decode_neokv_legacy,
};

/// How many logical databases `SELECT` accepts (Redis' default `databases 16`).
pub const DATABASES: usize = 16;

/// What a stored record costs beside its key and value bytes (the store's per-entry
/// bookkeeping: an ordered map's node, an LSM's block index share).
pub(crate) const RECORD_OVERHEAD: u64 = 16;

/// A live key's metadata, with a string's value split off as `Bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The decoded metadata; `value` is empty (the bytes are in [`Entry::value`]).
    pub meta: Metadata<'static>,
    /// A string's value; empty for collections.
    pub value: Bytes,
}

/// A key a command modified (Redis' `signalModifiedKey`), named by its metadata record key,
/// which carries the database's namespace ([`super::Engine::touched_key`] decodes it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TouchedKey {
    /// The metadata record key (`[ns_len][ns]…[user key]`).
    pub metadata_key: Bytes,
    /// What happened to it.
    pub kind: Touch,
}

/// How a [`TouchedKey`] was touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Touch {
    /// A command's batch wrote or deleted its metadata record.
    Written,
    /// A command found it expired (Redis deletes it then; this engine leaves the record to
    /// [`crate::gc`]).
    Expired,
    /// A command changed it in a way that concerns only the clients blocked on it (Redis'
    /// `signalKeyAsReady` without `signalModifiedKey`): WATCH and client tracking ignore it.
    Ready,
}

impl TouchedKey {
    /// Whether the key counts as modified (Redis' `signalModifiedKey`): for WATCH and
    /// client tracking; every touch wakes blocked clients.
    pub fn modified(&self) -> bool {
        self.kind != Touch::Ready
    }
}

/// Redis' `LAZYFREE_THRESHOLD`: a deleted value of more allocations than this goes to its
/// lazyfree thread. Here every deleted collection's records are left for the collector;
/// those of more records than this count as lazily freed objects (INFO's
/// `lazyfree_pending_objects` and `lazyfreed_objects`).
pub const LAZYFREE_THRESHOLD: u64 = 64;

/// What every connection to one store shares: clock, version generator, the databases'
/// layouts, SCAN cursors, the random generator. All of it works through `&self`.
pub(crate) struct Shared {
    pub(crate) clock: Arc<dyn Clock>,
    versions: &'static VersionGenerator,
    /// The namespaces' layouts (`None`: a namespace over 255 bytes).
    layouts: Vec<Option<KeyLayout>>,
    /// Which of `layouts` each logical database uses: SWAPDB exchanges two entries, O(1).
    slots: Vec<AtomicUsize>,
    pub(crate) base_layout: KeyLayout,
    blind_write: AtomicBool,
    bitmap_strings: AtomicBool,
    new_events: AtomicBool,
    /// Whether commands record their [`Event`]s (their [`Effects`] are always counted).
    events: AtomicBool,
    /// Redis' `stream-node-max-entries`: the node size `~` trimming removes whole.
    pub(crate) stream_node_entries: AtomicU64,
    /// Which deletions propagate as UNLINK ([`super::LazyDeletes`], as bits).
    pub(crate) lazy_deletes: std::sync::atomic::AtomicU8,
    /// Until then (ms on `clock`) a key found expired is gone for commands but neither
    /// deleted nor signalled (Redis during CLIENT PAUSE). 0: not held.
    pub(crate) expiry_held_until: AtomicU64,
    /// Deleted collections of more than [`LAZYFREE_THRESHOLD`] records, whose records
    /// were left for the collector (see [`super::Engine::deferred_frees`]).
    pub(crate) deferred_frees: AtomicU64,
    /// When each key was last used (OBJECT IDLETIME).
    pub(crate) access: super::access::AccessTimes,
    pub(crate) cursors: CursorStore,
    rng: AtomicU64,
    /// Each namespace's key counts; `None` over a store other processes write too, and for a
    /// bare [`Db`] (which never deletes the expired keys it finds).
    pub(crate) counts: Option<KeyCounts>,
    /// Who needs the modified keys (see [`Listeners`]); `None`: they are always recorded.
    pub(crate) listeners: Option<Listeners>,
}

impl Shared {
    /// Which deletions propagate as UNLINK.
    pub(crate) fn lazy_deletes(&self) -> super::LazyDeletes {
        super::LazyDeletes::from_bits(self.lazy_deletes.load(Ordering::Relaxed))
    }

    pub(crate) fn new(layout: KeyLayout) -> Self {
        let layouts = (0..DATABASES).map(|i| layout_for(&layout, i).ok()).collect();
        Shared {
            clock: Arc::new(SystemClock),
            versions: VersionGenerator::global(),
            layouts,
            slots: (0..DATABASES).map(AtomicUsize::new).collect(),
            base_layout: layout,
            blind_write: AtomicBool::new(false),
            bitmap_strings: AtomicBool::new(false),
            new_events: AtomicBool::new(false),
            events: AtomicBool::new(true),
            stream_node_entries: AtomicU64::new(100),
            lazy_deletes: Default::default(),
            expiry_held_until: AtomicU64::new(0),
            deferred_frees: AtomicU64::new(0),
            access: super::access::AccessTimes::new(SystemClock.now_ms() / 1000),
            cursors: CursorStore::default(),
            rng: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
            counts: None,
            listeners: None,
        }
    }

    /// Keeps key counts from now on (an engine over a store no other process writes).
    pub(crate) fn count_keys(&mut self) {
        self.counts = Some(KeyCounts::new(DATABASES));
    }

    /// Whether commands record the keys they modify now (see [`Listeners`]).
    pub(crate) fn records_modified(&self) -> bool {
        self.listeners.as_ref().is_none_or(Listeners::any)
    }

    pub(crate) fn seed(&mut self, seed: u64) {
        self.rng = AtomicU64::new(seed | 1);
    }

    /// The namespace database `index` uses now.
    pub(crate) fn slot(&self, index: usize) -> Option<usize> {
        self.slots.get(index).map(|s| s.load(Ordering::SeqCst))
    }

    /// SWAPDB: databases `a` and `b` exchange namespaces, so each sees the other's keys.
    /// The caller holds the whole-keyspace lock exclusively: no command sees half a swap.
    pub(crate) fn swap(&self, a: usize, b: usize) {
        let (sa, sb) = (&self.slots[a], &self.slots[b]);
        let old_a = sa.load(Ordering::SeqCst);
        sa.store(sb.swap(old_a, Ordering::SeqCst), Ordering::SeqCst);
    }

    /// The namespace slot of every database ([`super::Engine::db_slots`]).
    pub(crate) fn slots(&self) -> Vec<usize> {
        self.slots.iter().map(|s| s.load(Ordering::SeqCst)).collect()
    }

    /// Sets every slot, if `slots` is a permutation of `0..DATABASES`.
    pub(crate) fn set_slots(&self, slots: &[usize]) -> bool {
        let mut seen = [false; DATABASES];
        for &s in slots {
            match seen.get_mut(s) {
                Some(seen) if !*seen => *seen = true,
                _ => return false,
            }
        }
        if slots.len() != DATABASES {
            return false;
        }
        for (slot, &s) in self.slots.iter().zip(slots) {
            slot.store(s, Ordering::SeqCst);
        }
        true
    }

    /// Records events from now on, or stops (see [`super::Engine::set_events`]).
    pub(crate) fn set_events(&self, on: bool) {
        self.events.store(on, Ordering::Relaxed);
    }

    /// Records `new` events from now on (see [`Db::set_new_events`]).
    pub(crate) fn set_new_events(&self, on: bool) {
        self.new_events.store(on, Ordering::Relaxed);
    }

    /// The layout of database `index`.
    pub(crate) fn layout_of(&self, index: usize) -> CommandResult<&KeyLayout> {
        let slot = self.slot(index);
        match slot.and_then(|s| self.layouts.get(s)) {
            Some(Some(layout)) => Ok(layout),
            Some(None) => Err(layout_for(&self.base_layout, slot.unwrap_or(index))
                .err()
                .map_or_else(|| CommandError::err("DB index is out of range"), CommandError::from)),
            None => Err(CommandError::err("DB index is out of range")),
        }
    }

    /// Which namespace slot a metadata key is under (`hint` first: usually the selected
    /// database's), `None` for a namespace none of the databases uses.
    fn slot_of_key(&self, metadata_key: &[u8], hint: Option<usize>) -> Option<usize> {
        let layout = |slot: usize| self.layouts.get(slot)?.as_ref();
        // The hint's namespace told by the key's first bytes where the layout allows: no decode.
        if hint.and_then(layout).is_some_and(|l| l.holds_metadata_key(metadata_key) == Some(true)) {
            return hint;
        }
        let namespace = self.base_layout.decode_metadata_key(metadata_key).ok()?.namespace;
        let is = |slot: usize| layout(slot).is_some_and(|l| l.namespace() == namespace);
        match hint {
            Some(slot) if is(slot) => Some(slot),
            _ => (0..self.layouts.len()).find(|&slot| is(slot)),
        }
    }

    /// Which database a metadata key belongs to now, and its user key.
    pub(crate) fn decode_touched(&self, metadata_key: &[u8]) -> Option<(usize, Bytes)> {
        let (slot, key) = self.layouts.iter().enumerate().find_map(|(i, layout)| {
            let decoded = layout.as_ref()?.decode_metadata_key(metadata_key).ok()?;
            (decoded.namespace == layout.as_ref()?.namespace())
                .then(|| (i, Bytes::copy_from_slice(decoded.user_key)))
        })?;
        let index = (0..DATABASES).find(|&i| self.slot(i) == Some(slot))?;
        Some((index, key))
    }

    /// The next pseudo-random number (xorshift64*), shared by every thread.
    fn random_u64(&self) -> u64 {
        let step = |mut x: u64| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x
        };
        let old = self.rng.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| Some(step(x))).unwrap_or(0);
        step(old).wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The layout database `index` writes with: the base namespace, then `:index` past 0.
fn layout_for(base: &KeyLayout, index: usize) -> crate::Result<KeyLayout> {
    base.for_database(index)
}

/// The shared state a [`Db`] works with: its own, or an [`super::Engine`]'s.
pub(crate) enum Share<'a> {
    Owned(Box<Shared>),
    Borrowed(&'a Shared),
}

impl std::ops::Deref for Share<'_> {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        match self {
            Share::Owned(s) => s,
            Share::Borrowed(s) => s,
        }
    }
}

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
    block: Option<Block>,
    swapped: Vec<(usize, usize)>,
    /// Writes to a transaction's overlay: their count changes wait in `counted` until the
    /// engine commits the overlay ([`Db::take_counted`]).
    deferred: bool,
    counted: RefCell<Vec<(usize, Delta)>>,
    /// What the running command learnt of the metadata records it looked up since it last
    /// wrote (the first [`READ_MEMO`]): its commit takes what its batch replaces (for the key
    /// counts, the garbage and the touched keys) from here, not from the store a second
    /// time. Kept only while a command runs ([`Db::run_command`]: under its key locks nothing
    /// else writes them) and emptied by every write.
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
}

/// How many metadata records a [`Db`] remembers between writes: a command reads a few.
const READ_MEMO: usize = 8;

/// What a command found in a metadata record: `None` when there is none, `Some(None)` when
/// it does not decode, else its metadata (without a string's value).
type Recalled = Option<Option<Metadata<'static>>>;

/// The metadata records a command looked up ([`Db::lookup_at`]): each key a range of
/// `keys`, with what it found and whether the lookup set the key's last-use time. Handed
/// from command to command with the [`Scratch`].
#[derive(Debug, Default)]
pub(crate) struct ReadMemo {
    reads: Vec<(std::ops::Range<usize>, Recalled, bool)>,
    keys: Vec<u8>,
}

impl ReadMemo {
    fn find(&self, key: &[u8]) -> Option<&(std::ops::Range<usize>, Recalled, bool)> {
        self.reads.iter().find(|(r, _, _)| &self.keys[r.clone()] == key)
    }

    fn get(&self, key: &[u8]) -> Option<&Recalled> {
        self.find(key).map(|(_, found, _)| found)
    }

    /// Whether the command's lookup of `key` set its last-use time.
    fn touched(&self, key: &[u8]) -> bool {
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

    fn clear(&mut self) {
        self.reads.clear();
        self.keys.clear();
    }
}

/// What a batch changes beyond its records ([`Db::changes`]).
#[derive(Default)]
struct Changes<'g> {
    deltas: Vec<(usize, Delta)>,
    garbage: bool,
    /// The key counts' gate, held from before the first read of a record of a namespace
    /// not counted yet until the deltas are applied ([`Db::write_counted`]).
    gate: Option<RwLockReadGuard<'g, ()>>,
}

/// Whether writing `new` over `old` (each `None` for no record, `Some(None)` for one that
/// does not decode) leaves a collection's elements behind: its metadata deleted, or replaced
/// by another version's. A record that does not decode counts as a collection.
fn replaces_collection(old: Option<&Option<Metadata<'_>>>, new: Option<&Option<Metadata<'_>>>) -> bool {
    match old {
        None => false,
        Some(None) => true,
        Some(Some(old)) if old.ty.is_single_kv() => false,
        Some(Some(old)) => new.is_none_or(|new| new.as_ref().is_some_and(|new| new.version != old.version)),
    }
}

/// What the commands run on a [`Db`] did to keys, for WATCH, blocking wake-ups and keyspace
/// notifications alike: one record, fed in three places — a lookup that finds a key expired
/// (`Touch::Expired` and an `expired` event), [`Db::commit`] (`Touch::Written` for each
/// metadata record written, and the keys it created), and the families' `notify` calls next
/// to their commit (the command's events, as Redis' `notifyKeyspaceEvent`).
///
/// Events wait in `pending`, in the order they happen, until a commit or the end of the
/// command settles them: a command that fails keeps only its `expired` events (Redis
/// deletes an expired key whatever the command does next), so an error writes nothing and
/// announces nothing.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    pub(crate) touched: Vec<TouchedKey>,
    pub(crate) events: Vec<Event>,
    pub(crate) effects: Effects,
    scratch: Scratch,
    /// Keys the last commit created, while `new` events are on: each gets its `new` event
    /// just before its first event of the command (Redis' `dbAdd` order).
    created: Vec<(usize, Bytes)>,
    /// A type the layout cannot store that the command tried to write: its commit fails.
    refused: Option<RedisType>,
    /// TiTea: the metadata key of each collection version the command looked up (its
    /// element records do not name their key).
    owners: Vec<(Version, Bytes)>,
}

/// A journal's vectors that live only while a command runs, handed from command to command
/// through the [`super::Session`] so that a command allocates none of them.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The events recorded and not settled yet (with events on).
    pending: Vec<Event>,
    /// What the pending events count for.
    pending_effects: Effects,
    /// The database and key (a range of `keys`) of each notified key: each counts as
    /// written once settled, as Redis signals every key it notifies about (LTRIM that trims
    /// nothing touches WATCH).
    signalled: Vec<(usize, std::ops::Range<usize>)>,
    keys: Vec<u8>,
    /// The [`Db`]'s read memo, between commands.
    memo: ReadMemo,
}

impl Journal {
    /// Forgets what the last command recorded; the vectors keep their room.
    pub(crate) fn clear(&mut self) {
        self.touched.clear();
        self.events.clear();
        self.effects = Effects::default();
        self.created.clear();
        self.refused = None;
        self.owners.clear();
    }

    /// Settles the pending events: kept when `ok`, else only the `expired` ones; then `new`
    /// for the keys created and not yet notified.
    #[inline]
    fn settle(&mut self, ok: bool, shared: &Shared) {
        // A command settles at its commit, its end and its hand-back, usually once with work:
        // the test is inlined, the work is not (its call would cost more than the test).
        let scratch = &self.scratch;
        if !(scratch.pending.is_empty()
            && scratch.signalled.is_empty()
            && self.created.is_empty()
            && scratch.pending_effects == Effects::default())
        {
            self.settle_pending(ok, shared);
        }
    }

    #[inline(never)]
    fn settle_pending(&mut self, ok: bool, shared: &Shared) {
        let scratch = &mut self.scratch;
        // Each part only when it has work: most commands have effects to add and nothing else.
        if !scratch.pending.is_empty() {
            let pending = scratch.pending.drain(..).filter(|e| ok || e.class == NotifyFlags::EXPIRED);
            self.events.extend(pending);
        }
        let effects = std::mem::take(&mut scratch.pending_effects);
        if ok {
            self.effects.add(effects);
        } else {
            scratch.signalled.clear();
            scratch.keys.clear();
        }
        if !scratch.signalled.is_empty() {
            for (db, range) in scratch.signalled.drain(..) {
                let Ok(layout) = shared.layout_of(db) else { continue };
                let routed = layout.routed(&scratch.keys[range]);
                // Usually the command's commit recorded the key already: nothing to build.
                let last = self.touched.iter().rev().find(|t| routed.is_metadata_key(&t.metadata_key));
                if last.is_none_or(|t| t.kind != Touch::Written) {
                    let metadata_key = Bytes::from(routed.metadata_key());
                    self.touched.push(TouchedKey { metadata_key, kind: Touch::Written });
                }
            }
            scratch.keys.clear();
        }
        if !self.created.is_empty() {
            for (db, key) in self.created.drain(..) {
                self.events.push(Event { class: NotifyFlags::NEW, name: "new", db, key });
            }
        }
    }

    /// Whether the command found `mkey` expired and has not written it since.
    fn found_expired(&self, mkey: &[u8]) -> bool {
        let last = self.touched.iter().rev().find(|t| t.metadata_key == mkey);
        last.is_some_and(|t| t.kind == Touch::Expired)
    }
}

/// What [`Db::hand_back`] returns to a session: the journal, the block and the swapped
/// databases.
pub(crate) type HandedBack = (Option<Box<Journal>>, Option<Block>, Vec<(usize, usize)>);

/// A [`Db`]'s journal: the session's, lent for one command ([`Db::take_journal`], handed back
/// by [`Db::hand_back`]), or the `Db`'s own, boxed at its first write. Moving it is moving a
/// pointer, and a `Db` that lent it back drops nothing.
#[derive(Debug, Default)]
pub(crate) struct JournalSlot(Option<Box<Journal>>);

/// What a journal not yet boxed reads as.
static EMPTY_JOURNAL: Journal = Journal {
    touched: Vec::new(),
    events: Vec::new(),
    effects: Effects { changes: 0, expired: 0, garbage: false, ttl_set: false },
    scratch: Scratch {
        pending: Vec::new(),
        pending_effects: Effects { changes: 0, expired: 0, garbage: false, ttl_set: false },
        signalled: Vec::new(),
        keys: Vec::new(),
        memo: ReadMemo { reads: Vec::new(), keys: Vec::new() },
    },
    created: Vec::new(),
    refused: None,
    owners: Vec::new(),
};

impl std::ops::Deref for JournalSlot {
    type Target = Journal;

    fn deref(&self) -> &Journal {
        self.0.as_deref().unwrap_or(&EMPTY_JOURNAL)
    }
}

impl std::ops::DerefMut for JournalSlot {
    fn deref_mut(&mut self) -> &mut Journal {
        self.0.get_or_insert_with(Box::default)
    }
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
        }
    }

    /// Marks this `Db` as writing to a transaction's overlay: see [`Db::take_counted`].
    pub(crate) fn defer_counts(&mut self) {
        self.deferred = true;
    }

    /// The count changes of the batches written since the last call, for the engine to
    /// apply ([`KeyCounts::apply`]) once it has written the overlay they went to.
    pub(crate) fn take_counted(&mut self) -> Vec<(usize, Delta)> {
        std::mem::take(self.counted.get_mut())
    }

    /// The selected database's counts in O(1) (see [`super::counts`]), `None` when none are
    /// kept; the first call for a namespace counts its records. Inside a transaction (an
    /// overlay) the committed counts plus the transaction's own changes, `None` while the
    /// namespace is uncounted.
    ///
    /// # Errors
    /// Storage errors from a first count.
    pub(crate) fn key_count(&self) -> CommandResult<Option<KeyCount>> {
        let (Some(counts), Some(slot)) = (&self.shared.counts, self.shared.slot(self.index)) else {
            return Ok(None);
        };
        if self.deferred {
            let Some(count) = counts.get(slot) else { return Ok(None) };
            let mine = self.counted.borrow().iter().find(|(s, _)| *s == slot).map(|(_, d)| *d);
            return Ok(Some(mine.unwrap_or_default().applied_to(count)));
        }
        Ok(Some(counts.get_or_count(slot, self.layout(), &self.backend)?))
    }

    /// What `batch` changes beyond its records (before [`Db::adapt`]: only metadata records
    /// count): the key counts' deltas, from the records it replaces, and whether it deletes
    /// or replaces (with another version) a collection's metadata, leaving its elements to
    /// the collector. One pass over the batch, each replaced record decoded once.
    ///
    /// What the records replaced held is what the command found looking them up (the read
    /// memo, [`Db::lookup_at`] and [`Db::metadata_record`]); for the counts one it did not
    /// look up is read now, and for the garbage it counts as a collection replaced, as a
    /// write that cannot tell (a blind write) must.
    ///
    /// # Errors
    /// Storage errors reading those records.
    fn changes(&self, batch: &WriteBatch) -> crate::Result<Changes<'_>> {
        let mut changes = Changes::default();
        let base = &self.shared.base_layout;
        let counts = self.shared.counts.as_ref();
        let hint = self.shared.slot(self.index);
        let is_metadata = |op: &BatchOp| {
            matches!(
                op,
                BatchOp::Put { cf: ColumnFamily::Metadata, .. }
                    | BatchOp::Delete { cf: ColumnFamily::Metadata, .. }
            )
        };
        // What each key holds as the batch goes (FLUSHALL, or a key written twice): needed
        // only when the batch writes several metadata records.
        let several = batch.ops().iter().filter(|op| is_metadata(op)).nth(1).is_some();
        let mut current: Option<HashMap<&[u8], Option<u64>>> = several.then(HashMap::new);
        for op in batch.ops() {
            let (key, new) = match op {
                BatchOp::Put { cf: ColumnFamily::Metadata, key, value } => {
                    (key, Some(base.decode_metadata(value).ok()))
                }
                BatchOp::Delete { cf: ColumnFamily::Metadata, key } => (key, None),
                _ => continue,
            };
            // A namespace counted already stays counted while a command holds its key locks
            // (only a whole-keyspace holder forgets counts): no gate. One nobody has counted
            // yet takes no deltas: its first scan, which waits for the gate this write holds
            // from now on, will see this batch.
            let slot = counts.and_then(|counts| {
                let slot = self.shared.slot_of_key(key, hint)?;
                if self.deferred || counts.is_counted(slot) {
                    return Some(slot);
                }
                changes.gate.get_or_insert_with(|| counts.write_gate());
                counts.is_counted(slot).then_some(slot)
            });
            let earlier = current.as_ref().and_then(|c| c.get(&key[..]).copied());
            let remembered = self.read_memo.borrow().get(key).copied();
            let old = match remembered {
                Some(old) => {
                    changes.garbage |= replaces_collection(old.as_ref(), new.as_ref());
                    earlier.unwrap_or_else(|| old.flatten().as_ref().and_then(counted_meta))
                }
                None => {
                    changes.garbage = true;
                    match (slot, earlier) {
                        (None, _) => None,
                        (Some(_), Some(earlier)) => earlier,
                        (Some(_), None) => {
                            counted(base, self.backend.get(ColumnFamily::Metadata, key)?.as_deref())
                        }
                    }
                }
            };
            let Some(slot) = slot else { continue };
            let new = new.flatten().as_ref().and_then(counted_meta);
            if let Some(current) = &mut current {
                current.insert(key, new);
            }
            let mut delta = Delta::default();
            delta.change(old, new);
            add_delta(&mut changes.deltas, slot, delta);
        }
        Ok(changes)
    }

    /// Writes `batch`, then records its count changes `deltas`: applied at once to the
    /// engine's counts (under their gate, so that a first count sees the batch or takes the
    /// deltas, never both), or kept for the engine when this `Db` writes to an overlay.
    ///
    /// # Errors
    /// The backend's; nothing was counted then.
    fn write_counted(
        &self,
        batch: WriteBatch,
        deltas: Vec<(usize, Delta)>,
        gate: Option<RwLockReadGuard<'_, ()>>,
    ) -> crate::Result<()> {
        self.read_memo.borrow_mut().clear();
        let counts = self.shared.counts.as_ref().filter(|_| !self.deferred && !deltas.is_empty());
        self.backend.write(batch)?;
        match counts {
            Some(counts) => counts.apply(&deltas),
            None if self.deferred => {
                let mut counted = self.counted.borrow_mut();
                for (slot, delta) in deltas {
                    add_delta(&mut counted, slot, delta);
                }
            }
            None => {}
        }
        drop(gate);
        Ok(())
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

    /// Lends a fresh `Db` the journal a session kept from its last command, which
    /// [`super::Session::clear_results`] emptied before this one: a command reuses its
    /// vectors' memory instead of allocating its own.
    pub(crate) fn take_journal(&mut self, journal: Option<Box<Journal>>) {
        let Some(journal) = journal else { return };
        debug_assert!(journal.touched.is_empty() && journal.events.is_empty() && journal.created.is_empty());
        let slot = self.journal.get_mut();
        *slot = JournalSlot(Some(journal));
        std::mem::swap(self.read_memo.get_mut(), &mut slot.scratch.memo);
        self.read_memo.get_mut().clear();
    }

    /// What the commands run left for the session: the settled journal (touched keys,
    /// events, effects, and the scratch vectors for the next [`Db::take_journal`]), the block
    /// and the swapped databases.
    pub(crate) fn hand_back(&mut self) -> HandedBack {
        if let Some(journal) = self.journal.get_mut().0.as_deref_mut() {
            journal.settle(true, &self.shared);
            std::mem::swap(&mut journal.scratch.memo, self.read_memo.get_mut());
        }
        (self.journal.get_mut().0.take(), self.block.take(), std::mem::take(&mut self.swapped))
    }

    /// The time the next command runs at (see [`super::Session::set_time`]; 0: the clock's).
    pub(crate) fn give_time(&mut self, unix_ms: u64) {
        self.given_ms = unix_ms;
    }

    /// Records the replication stream of the commands this `Db` runs ([`Db::take_propagated`]).
    pub(crate) fn record_propagation(&mut self) {
        self.propagated = Some(Vec::new());
    }

    /// The replication stream of the commands run since the last call, if recorded.
    pub(crate) fn take_propagated(&mut self) -> Vec<Propagated> {
        self.propagated.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Whether the replication stream is recorded, and where the journal stood before a
    /// command: its changes and its touched keys (for [`Db::propagate_command`]).
    pub(crate) fn propagation_mark(&self) -> Option<(u64, usize)> {
        self.propagated.as_ref()?;
        let journal = self.journal.borrow();
        Some((journal.effects.changes, journal.touched.len()))
    }

    /// Whether the replication stream is recorded.
    pub(crate) fn records_propagation(&self) -> bool {
        self.propagated.is_some()
    }

    /// Propagates `argv` for the running command, in place of what its arguments would
    /// (Redis' `alsoPropagate` with `preventCommandPropagation`): for effects only the
    /// command knows, as the exact trim of `MAXLEN ~` or a claimed entry's delivery count.
    /// Nothing while the stream is not recorded.
    pub(crate) fn propagate_instead(&self, argv: Vec<Bytes>) {
        if self.records_propagation() {
            self.instead.borrow_mut().get_or_insert_with(Vec::new).push(argv);
        }
    }

    /// Appends to the recorded stream what the command just run propagates: the deletion of
    /// each key it found expired, then its effects if it changed something (or what it
    /// propagates instead, [`Db::propagate_instead`]).
    pub(crate) fn propagate_command(
        &mut self,
        mark: (u64, usize),
        db: usize,
        info: &CommandInfo,
        argv: &[Bytes],
        reply: &Reply,
    ) {
        let (changes, touched) = mark;
        let journal = self.journal.borrow();
        let mut unit = Vec::new();
        for t in journal.touched.iter().skip(touched).filter(|t| t.kind == Touch::Expired) {
            if let Some((db, key)) = self.shared.decode_touched(&t.metadata_key) {
                let deletion = Propagated::deletion(db, key, self.shared.lazy_deletes().expire);
                if !unit.contains(&deletion) {
                    unit.push(deletion);
                }
            }
        }
        let changed = journal.effects.changes > changes || super::propagate::always_propagated(info);
        drop(journal);
        if let Some(instead) = self.instead.take() {
            if !reply.is_error() {
                unit.extend(instead.into_iter().map(|argv| Propagated { db, argv }));
            }
        } else if changed && !reply.is_error() {
            let exists = |key: &[u8]| matches!(self.lookup(key), Ok(Some(_)));
            let lazy = self.shared.lazy_deletes();
            let effects = super::propagate::effects(info, argv, reply, self.ran_ms, &exists, lazy);
            unit.extend(effects.into_iter().map(|argv| Propagated { db, argv }));
        }
        if let Some(stream) = &mut self.propagated {
            stream.extend(unit);
        }
    }

    /// Lets blocking commands block (see [`super::blocking`]); off by default, so they answer
    /// their timeout reply at once, as inside MULTI.
    pub(crate) fn allow_blocking(&mut self) {
        self.may_block = true;
    }

    /// Marks this command as a woken client's re-run (see [`Db::waited`]).
    pub(crate) fn set_retrying(&mut self) {
        self.retrying = true;
    }

    /// Sets the node size approximate stream trimming (`MAXLEN ~`, `MINID ~`) removes whole
    /// (Redis' `stream-node-max-entries`, 100 by default; 0: unbounded). Shared by every
    /// session of an [`super::Engine`].
    pub fn set_stream_node_entries(&mut self, entries: u64) {
        self.shared.stream_node_entries.store(entries, Ordering::Relaxed);
    }

    /// The node size of [`Db::set_stream_node_entries`].
    pub(crate) fn stream_node_entries(&self) -> u64 {
        self.shared.stream_node_entries.load(Ordering::Relaxed)
    }

    /// Whether this command is a woken client's re-run.
    pub(crate) fn is_retrying(&self) -> bool {
        self.retrying
    }

    /// A blocking command's lookup of a key it waits on. On a re-run a key holding another
    /// type counts as missing instead of WRONGTYPE: Redis 7.0 serves a woken client only from
    /// a key of the type it waits for, and leaves it blocked otherwise.
    ///
    /// # Errors
    /// `found`'s error, except WRONGTYPE on a re-run.
    pub(crate) fn waited<T>(&self, found: CommandResult<Option<T>>) -> CommandResult<Option<T>> {
        match found {
            Err(CommandError::WrongType) if self.retrying => Ok(None),
            other => other,
        }
    }

    /// What a blocking command that found nothing to serve answers. When it may block: a
    /// [`Block`] on `keys` of the selected database for [`super::Session::take_block`], and
    /// `on_timeout` (what Redis sends when the timeout passes). Otherwise (MULTI) `at_once`,
    /// which differs for BLMOVE/BRPOPLPUSH: a nil bulk at once, a nil array at a timeout.
    pub(crate) fn would_block(
        &mut self,
        keys: &[Bytes],
        timeout: Option<Duration>,
        at_once: Reply,
        on_timeout: Reply,
    ) -> Reply {
        self.would_block_as(keys, timeout, at_once, on_timeout, None)
    }

    /// [`Db::would_block`] for a command whose re-runs must see other arguments than its
    /// first run (`retry_argv`): XREAD's `$` becomes the id it stood for then.
    pub(crate) fn would_block_as(
        &mut self,
        keys: &[Bytes],
        timeout: Option<Duration>,
        at_once: Reply,
        on_timeout: Reply,
        retry_argv: Option<Vec<Bytes>>,
    ) -> Reply {
        if !self.may_block {
            return at_once;
        }
        let keys = keys.to_vec();
        self.block =
            Some(Block { keys, db: self.index, timeout, on_timeout: on_timeout.clone(), retry_argv });
        on_timeout
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

    /// Turns blind-write mode on or off for hashes and sets (docs/layout.md, extensions).
    pub fn set_blind_write(&mut self, on: bool) {
        self.shared.blind_write.store(on, Ordering::Relaxed);
    }

    /// Turns the recording of `new` events (class `n`, a command created a key) on or off.
    /// Off by default: finding which keys a commit creates costs a read per metadata write,
    /// so a server turns it on only while `notify-keyspace-events` has `n`. Shared by every
    /// session of an [`super::Engine`].
    pub fn set_new_events(&mut self, on: bool) {
        self.shared.set_new_events(on);
    }

    /// Whether blind-write mode is on.
    pub(crate) fn blind_write(&self) -> bool {
        self.shared.blind_write.load(Ordering::Relaxed)
    }

    /// Picks how SETBIT, BITFIELD and BITOP create a key: `false` (the default) a Kvrocks
    /// bitmap in 1024-byte fragments, `true` a string like Redis. Existing keys keep their
    /// representation either way.
    pub fn set_bitmap_strings(&mut self, on: bool) {
        self.shared.bitmap_strings.store(on, Ordering::Relaxed);
    }

    /// Whether new bitmaps are strings ([`Db::set_bitmap_strings`]).
    pub(crate) fn bitmap_strings(&self) -> bool {
        self.shared.bitmap_strings.load(Ordering::Relaxed)
            || !self.shared.base_layout.stores(RedisType::Bitmap)
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend, mutably (for maintenance such as [`crate::gc`]).
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// Gives the backend back.
    pub fn into_backend(self) -> B {
        self.backend
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

    /// The keys the commands run since the last [`Db::take_touched`] modified, or found
    /// expired, in order (a key may repeat).
    pub(crate) fn take_touched(&mut self) -> Vec<TouchedKey> {
        std::mem::take(&mut self.journal.get_mut().touched)
    }

    /// The keyspace events the commands run since the last [`Db::take_events`] raised, in
    /// order (see [`super::notify`]). A `Db` leaves the keys it finds expired in place (an
    /// [`super::Engine`] deletes them after each command, [`Db::delete_expired`]), so over a
    /// bare `Db` every command that finds one reports it `expired` again.
    /// Events are recorded unless turned off ([`super::Engine::set_events`]).
    pub(crate) fn take_events(&mut self) -> Vec<Event> {
        let journal = self.journal.get_mut();
        journal.settle(true, &self.shared);
        std::mem::take(&mut journal.events)
    }

    /// What the commands run since the last [`Db::take_effects`] did (see [`Effects`]),
    /// counted whether or not events are recorded.
    pub(crate) fn take_effects(&mut self) -> Effects {
        let journal = self.journal.get_mut();
        journal.settle(true, &self.shared);
        std::mem::take(&mut journal.effects)
    }

    /// Ends a command: its pending events stand if it succeeded (`ok`), else only its
    /// `expired` ones.
    pub(crate) fn end_command(&mut self, ok: bool) {
        let journal = self.journal.get_mut();
        journal.settle(ok, &self.shared);
        journal.refused = None;
        journal.owners.clear();
    }

    /// Records the event `name` of `class` on `key` in the selected database; a command
    /// calls it right after the [`Db::commit`] that made the change, in Redis' order.
    pub(crate) fn notify(&self, class: NotifyFlags, name: &'static str, key: &[u8]) {
        self.notify_in(self.index, class, name, key);
    }

    /// Records a collection edit: `name` of `class` on `key`, then `del` when the edit left
    /// `meta` empty (the collection is gone, as Redis deletes an emptied one).
    pub(crate) fn notify_edit(
        &self,
        class: NotifyFlags,
        name: &'static str,
        key: &[u8],
        meta: &Metadata<'_>,
    ) {
        self.notify(class, name, key);
        if meta.size == 0 && !meta.blind_write {
            self.notify(NotifyFlags::GENERIC, "del", key);
        }
    }

    /// Before a STORE command replaces `dst` with a result (`empty` or not): whether `dst`
    /// has a record, expired or not (an empty result deletes it, and Redis' `dbDelete`
    /// reports `del` for whatever it found). A non-empty result looks `dst` up first, as
    /// Redis' `setKey` does, so an expired `dst` is reported expired.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn store_target(&self, dst: &[u8], empty: bool) -> CommandResult<bool> {
        if empty {
            let mkey = self.metadata_key(dst);
            // A key this command found expired is gone already, as in Redis.
            let gone = self.journal.borrow().found_expired(&mkey);
            Ok(!gone && self.metadata_record(&mkey)?.is_some())
        } else {
            Ok(self.lookup(dst)?.is_some())
        }
    }

    /// Records a STORE command's event after its commit: `name` of `class` for a non-empty
    /// result, else `del` when `dst` had a record ([`Db::store_target`]).
    pub(crate) fn notify_store(
        &self,
        class: NotifyFlags,
        name: &'static str,
        dst: &[u8],
        empty: bool,
        existed: bool,
    ) {
        if !empty {
            self.notify(class, name, dst);
        } else if existed {
            self.notify(NotifyFlags::GENERIC, "del", dst);
        }
    }

    /// [`Db::notify`] for a key of database `db` (COPY … DB, MOVE).
    pub(crate) fn notify_in(&self, db: usize, class: NotifyFlags, name: &'static str, key: &[u8]) {
        self.record_event(db, class, name, key, true);
    }

    /// [`Db::notify`] for a change Redis makes without signalling the key (a stream's
    /// consumer groups: XGROUP, XACK, XCLAIM, XREADGROUP…): the event only.
    pub(crate) fn notify_unsignalled(&self, class: NotifyFlags, name: &'static str, key: &[u8]) {
        self.record_event(self.index, class, name, key, false);
    }

    fn record_event(&self, db: usize, class: NotifyFlags, name: &'static str, key: &[u8], signal: bool) {
        let mut journal = self.journal.borrow_mut();
        let journal = &mut *journal;
        if let Some(i) = journal.created.iter().position(|(d, k)| *d == db && k == key) {
            let (db, key) = journal.created.remove(i);
            journal.scratch.pending.push(Event { class: NotifyFlags::NEW, name: "new", db, key });
        }
        let scratch = &mut journal.scratch;
        scratch.pending_effects.count(name);
        if signal && self.shared.records_modified() {
            let start = scratch.keys.len();
            scratch.keys.extend_from_slice(key);
            scratch.signalled.push((db, start..scratch.keys.len()));
        }
        if self.shared.events.load(Ordering::Relaxed) {
            scratch.pending.push(Event { class, name, db, key: Bytes::copy_from_slice(key) });
        }
    }

    /// Records `new` for `key` in database `db` now, even if it existed: RENAME, COPY and
    /// RESTORE replace a key by deleting and re-adding it, and Redis announces the add
    /// before their own events.
    pub(crate) fn notify_new_in(&self, db: usize, key: &[u8]) {
        if self.shared.new_events.load(Ordering::Relaxed) {
            let mut journal = self.journal.borrow_mut();
            journal.created.retain(|(d, k)| !(*d == db && k == key));
            journal.scratch.pending.push(Event {
                class: NotifyFlags::NEW,
                name: "new",
                db,
                key: Bytes::copy_from_slice(key),
            });
        }
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

    /// The metadata key of `key` in the selected database.
    pub fn metadata_key(&self, key: &[u8]) -> Vec<u8> {
        self.layout().metadata_key(key)
    }

    /// The subkey of `sub` under `key` at `version`.
    ///
    /// # Errors
    /// A storage error for a key over 4 GiB.
    pub fn subkey(&self, key: &[u8], version: Version, sub: &[u8]) -> CommandResult<Vec<u8>> {
        Ok(self.layout().subkey(key, version, sub)?)
    }

    /// Reads a key's metadata: `None` when missing, expired, or an empty collection.
    ///
    /// # Errors
    /// A storage error when the backend fails or the record does not decode.
    pub fn lookup(&self, key: &[u8]) -> CommandResult<Option<Entry>> {
        self.lookup_in(self.layout(), key)
    }

    /// [`Db::lookup`] without a string's value (see [`Db::lookup_meta_at`]): for a command
    /// that needs only whether the key exists, its type or its expiry.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_meta(&self, key: &[u8]) -> CommandResult<Option<Metadata<'static>>> {
        self.lookup_meta_at(&self.metadata_key(key))
    }

    /// [`Db::lookup`] in another database's layout (COPY … DB n).
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_in(&self, layout: &KeyLayout, key: &[u8]) -> CommandResult<Option<Entry>> {
        self.lookup_at(&layout.metadata_key(key))
    }

    /// [`Db::lookup`] by metadata key, for a command that reads and then writes a key and
    /// builds its metadata key once.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_at(&self, mkey: &[u8]) -> CommandResult<Option<Entry>> {
        let raw = match self.backend.get(ColumnFamily::Metadata, mkey)? {
            Some(raw) => raw,
            None => match self.legacy_at(mkey)? {
                Some(raw) => raw,
                None => return Ok(None),
            },
        };
        let meta = self.layout().decode_metadata(&raw).map_err(|e| self.undecodable(mkey, &e))?;
        // Where the value lies in the record (`None`: empty, or not cut from the record).
        let len = meta.value.len();
        let offset = (meta.value.as_ptr() as usize)
            .checked_sub(raw.as_ptr() as usize)
            .filter(|&at| len > 0 && at + len <= raw.len());
        let copied =
            if offset.is_none() && len > 0 { Bytes::copy_from_slice(meta.value) } else { Bytes::new() };
        let Some(meta) = self.found(mkey, meta.without_value()) else { return Ok(None) };
        // The value is cut out of the record read (which nothing else holds): no copy.
        let value = match offset {
            Some(offset) => {
                let mut value = raw;
                value.advance(offset);
                value.truncate(len);
                value
            }
            None => copied,
        };
        Ok(Some(Entry { meta, value }))
    }

    /// [`Db::lookup_at`] without a string's value: the record is decoded where the store
    /// keeps it ([`KvBackend::get_with`]), not copied out.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_meta_at(&self, mkey: &[u8]) -> CommandResult<Option<Metadata<'static>>> {
        // Not `lookup_with(mkey, |_| ())`: that costs every collection command's lookup
        // about 25 instructions more.
        let layout = self.layout();
        let mut read = None;
        self.backend.get_with(ColumnFamily::Metadata, mkey, &mut |raw| {
            read = raw.map(|raw| layout.decode_metadata(raw).map(|meta| meta.without_value()));
        })?;
        let decoded = match read {
            Some(decoded) => decoded,
            None => match self.legacy_at(mkey)? {
                Some(raw) => layout.decode_metadata(&raw).map(|meta| meta.without_value()),
                None => return Ok(None),
            },
        };
        let meta = decoded.map_err(|e| self.undecodable(mkey, &e))?;
        Ok(self.found(mkey, meta))
    }

    /// [`Db::lookup_meta_at`] that also lends the decoded record, a string's value
    /// included, to `read` where the store keeps it: the metadata (without the value) and
    /// what `read` returned, when the key is live.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    fn lookup_with<T>(
        &self,
        mkey: &[u8],
        mut read: impl FnMut(&Metadata<'_>) -> T,
    ) -> CommandResult<Option<(Metadata<'static>, T)>> {
        let layout = self.layout();
        let mut decoded = None;
        self.backend.get_with(ColumnFamily::Metadata, mkey, &mut |raw| {
            decoded =
                raw.map(|raw| layout.decode_metadata(raw).map(|meta| (read(&meta), meta.without_value())));
        })?;
        let decoded = match decoded {
            Some(decoded) => decoded,
            None => match self.legacy_at(mkey)? {
                Some(raw) => layout.decode_metadata(&raw).map(|meta| (read(&meta), meta.without_value())),
                None => return Ok(None),
            },
        };
        let (t, meta) = decoded.map_err(|e| self.undecodable(mkey, &e))?;
        Ok(self.found(mkey, meta).map(|meta| (meta, t)))
    }

    /// [`Db::lookup_stringlike_at`] that lends the string's value to `read` instead of
    /// copying it out (a bitmap's string is built first): the key's expiry (0: none) and
    /// what `read` returned, `None` when the key is missing.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a collection; as [`Db::lookup`].
    pub(crate) fn read_string_at<T>(
        &self,
        key: &[u8],
        mkey: &[u8],
        mut read: impl FnMut(&[u8]) -> T,
    ) -> CommandResult<Option<(u64, T)>> {
        let found =
            self.lookup_with(mkey, |meta| (meta.ty == RedisType::String).then(|| read(meta.value)))?;
        match found {
            None => Ok(None),
            Some((meta, Some(t))) => Ok(Some((meta.expire_ms, t))),
            Some((meta, None)) if meta.ty == RedisType::Bitmap => {
                Ok(Some((meta.expire_ms, read(&self.bitmap_string(key, &meta)?))))
            }
            Some(_) => Err(CommandError::WrongType),
        }
    }

    /// After a lookup found no record at `mkey`: NeoKV's legacy string record, if any.
    fn legacy_at(&self, mkey: &[u8]) -> CommandResult<Option<Bytes>> {
        self.remember(mkey, None, false);
        Ok(legacy_record(&self.backend, &self.shared.base_layout, mkey)?)
    }

    /// A record this crate cannot read is an error naming the key, never an absent key.
    fn undecodable(&self, mkey: &[u8], e: &crate::Error) -> CommandError {
        self.remember(mkey, Some(None), false);
        let key = self.layout().decode_metadata_key(mkey).map_or(mkey, |k| k.user_key);
        CommandError::err(format!("undecodable metadata of key '{}': {e}", key.escape_ascii()))
    }

    /// A lookup's metadata record at `mkey`, decoded: remembered, and `Some` when it is
    /// live now (its last-use time set, unless the command does not touch keys); a key
    /// past its TTL is recorded expired.
    fn found(&self, mkey: &[u8], meta: Metadata<'static>) -> Option<Metadata<'static>> {
        let now = self.now_ms();
        let live = meta.is_live(now);
        let touches = live && self.touching;
        self.remember(mkey, Some(Some(meta)), touches);
        if !live {
            if meta.is_expired(now) {
                self.record_expired(mkey);
            }
            return None;
        }
        if self.layout().version_len() == 16 && !meta.ty.is_single_kv() {
            self.journal.borrow_mut().owners.push((meta.version, Bytes::copy_from_slice(mkey)));
        }
        if touches {
            self.shared.access.touch(mkey, now / 1000);
        }
        Some(meta)
    }

    /// Records a key found expired: `Touch::Expired` and its `expired` event, once (Redis
    /// deletes the key at the first lookup; this engine after the command, see
    /// [`Db::delete_expired`], so until it writes the key the command sees it as gone).
    fn record_expired(&self, mkey: &[u8]) {
        if self.now_ms() < self.shared.expiry_held_until.load(Ordering::Relaxed) {
            // Expiry is held: the key stays, logically gone, until a command finds it later.
            return;
        }
        let mut journal = self.journal.borrow_mut();
        if journal.found_expired(mkey) {
            return;
        }
        let metadata_key = Bytes::copy_from_slice(mkey);
        journal.touched.push(TouchedKey { metadata_key, kind: Touch::Expired });
        journal.effects.expired += 1;
        if !self.shared.events.load(Ordering::Relaxed) {
            return;
        }
        if let Some((db, key)) = self.shared.decode_touched(mkey) {
            journal.scratch.pending.push(Event::expired(db, key));
        }
    }

    /// Deletes, in one batch, those of `metadata_keys` whose record is still expired at
    /// `now_ms` (a key written since is left alone), and returns them. Redis deletes a key
    /// when it finds it expired; this engine does it after the command, so a later command
    /// does not report the same expiry again. The caller holds the keys' locks. A deleted
    /// collection sets [`Effects::garbage`].
    ///
    /// # Errors
    /// Storage errors; nothing was deleted then.
    pub fn delete_expired(&self, metadata_keys: &[Bytes], now_ms: u64) -> crate::Result<Vec<Bytes>> {
        let mut batch = WriteBatch::new();
        let mut deleted = Vec::new();
        let mut big = 0;
        let mut collections = false;
        for key in metadata_keys {
            let raw = self.metadata_record(key)?;
            let meta = raw.as_ref().and_then(|raw| self.layout().decode_metadata(raw).ok());
            if let Some(meta) = meta.filter(|m| m.is_expired(now_ms)) {
                batch.delete(ColumnFamily::Metadata, key.clone());
                deleted.push(key.clone());
                big += usize::from(!meta.ty.is_single_kv() && meta.size > LAZYFREE_THRESHOLD);
                collections |= !meta.ty.is_single_kv();
            }
        }
        if !batch.is_empty() {
            let Changes { deltas, gate, .. } = self.changes(&batch)?;
            let batch = self.adapt(batch)?;
            self.write_counted(batch, deltas, gate)?;
            self.shared.deferred_frees.fetch_add(big as u64, Ordering::Relaxed);
            self.journal.borrow_mut().effects.garbage |= collections;
        }
        Ok(deleted)
    }

    /// Deletes `key` for `maxmemory` as DEL does: its metadata record alone, in one batch
    /// (a collection's records become garbage for the collector). `None` when it is not
    /// live; else an estimate of the bytes its records keep until the collector drops
    /// them (0 for a string, freed with its record). The caller holds the key's lock.
    ///
    /// # Errors
    /// Storage errors; nothing was deleted then.
    pub(crate) fn evict_key(&self, key: &[u8]) -> crate::Result<Option<u64>> {
        let mkey = self.metadata_key(key);
        let Some(raw) = self.metadata_record(&mkey)? else { return Ok(None) };
        let Some(meta) = self.layout().decode_metadata(&raw).ok().filter(|m| m.is_live(self.now_ms())) else {
            return Ok(None);
        };
        let mut left = 0;
        if !meta.ty.is_single_kv() && meta.size > 0 {
            // A few records' mean size times the records the collection has.
            let (mut seen, mut bytes) = (0u64, 0u64);
            if let Ok(records) = self.scan_subkeys(key, meta.version, Direction::Forward) {
                for (sub, value) in records.take(5).flatten() {
                    bytes += (mkey.len() + 12 + sub.len() + value.len()) as u64 + RECORD_OVERHEAD;
                    seen += 1;
                }
            }
            let records = match meta.ty {
                RedisType::Bitmap => meta.size.div_ceil(1024),
                RedisType::ZSet => meta.size * 2,
                _ => meta.size,
            };
            left = bytes.checked_div(seen).unwrap_or(0) * records;
        }
        let mut batch = WriteBatch::new();
        self.delete_key(&mut batch, key);
        let Changes { deltas, gate, .. } = self.changes(&batch)?;
        let batch = self.adapt(batch)?;
        self.write_counted(batch, deltas, gate)?;
        self.count_deferred_free(&meta);
        Ok(Some(left))
    }

    /// [`Db::lookup`] for a key that must hold `ty` when it exists.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] when it holds another type; storage errors.
    pub(crate) fn lookup_of(&self, key: &[u8], ty: RedisType) -> CommandResult<Option<Metadata<'static>>> {
        self.lookup_of_at(&self.metadata_key(key), ty)
    }

    /// [`Db::lookup_of`] by metadata key (see [`Db::lookup_at`]).
    ///
    /// # Errors
    /// As [`Db::lookup_of`].
    pub(crate) fn lookup_of_at(
        &self,
        mkey: &[u8],
        ty: RedisType,
    ) -> CommandResult<Option<Metadata<'static>>> {
        match self.lookup_meta_at(mkey)? {
            None => Ok(None),
            Some(meta) if meta.ty == ty => Ok(Some(meta)),
            Some(_) => Err(CommandError::WrongType),
        }
    }

    /// The value of a string key.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a collection; storage errors.
    pub(crate) fn lookup_string(&self, key: &[u8]) -> CommandResult<Option<Bytes>> {
        match self.lookup_stringlike(key)? {
            None => Ok(None),
            Some(e) if e.meta.ty == RedisType::String => Ok(Some(e.value)),
            Some(_) => Err(CommandError::WrongType),
        }
    }

    /// [`Db::lookup`], with a bitmap turned into the string Redis would hold (type String,
    /// same expiry), for the string commands.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_stringlike(&self, key: &[u8]) -> CommandResult<Option<Entry>> {
        self.lookup_stringlike_at(key, &self.metadata_key(key))
    }

    /// [`Db::lookup_stringlike`] with `key`'s metadata key built already, for a command that
    /// writes the key next.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_stringlike_at(&self, key: &[u8], mkey: &[u8]) -> CommandResult<Option<Entry>> {
        match self.lookup_at(mkey)? {
            Some(e) if e.meta.ty == RedisType::Bitmap => {
                let value = self.bitmap_string(key, &e.meta)?;
                Ok(Some(Entry { meta: Metadata::string(&[], e.meta.expire_ms), value }))
            }
            other => Ok(other),
        }
    }

    /// The metadata of `key` if it holds `ty`, else a new empty collection of `ty` under a
    /// fresh version (a missing, expired or deleted key starts over).
    ///
    /// # Errors
    /// As [`Db::lookup_of`].
    pub(crate) fn lookup_or_create(&self, key: &[u8], ty: RedisType) -> CommandResult<Metadata<'static>> {
        Ok(match self.lookup_of(key, ty)? {
            Some(meta) => meta,
            None => self.new_collection(ty),
        })
    }

    /// A new, empty collection of `ty` under a fresh version; hashes and sets are
    /// blind-write while [`Db::blind_write`] is on, or when the layout writes them
    /// uncounted (camellia's encode version 1).
    pub(crate) fn new_collection(&self, ty: RedisType) -> Metadata<'static> {
        let mut meta = Metadata::collection(ty, self.new_version());
        meta.blind_write = (self.blind_write() && matches!(ty, RedisType::Hash | RedisType::Set))
            || self.layout().writes_uncounted(ty);
        meta
    }

    /// Queues the metadata record of `key`, in the layout's form. A type the layout cannot
    /// store is not queued: the command's commit fails instead ([`Db::commit`]).
    pub(crate) fn put_metadata(&self, batch: &mut WriteBatch, key: &[u8], meta: &Metadata<'_>) {
        self.put_metadata_in(self.layout(), batch, self.metadata_key(key), meta);
    }

    /// [`Db::put_metadata`] under a metadata key built already, of `layout`'s database.
    pub(crate) fn put_metadata_in(
        &self,
        layout: &KeyLayout,
        batch: &mut WriteBatch,
        mkey: Vec<u8>,
        meta: &Metadata<'_>,
    ) {
        // camellia and TiTea put a version in a string's record too: a fresh one for a
        // string a command made (TiTea keeps a live string's id: `titea_index_records`).
        let stamped;
        let meta = if meta.ty == RedisType::String && meta.version.is_none() && layout.versions_strings() {
            stamped = Metadata { version: self.new_version(), ..*meta };
            &stamped
        } else {
            meta
        };
        match layout.encode_metadata(meta) {
            Ok(value) => {
                // A key this command's lookup touched has its time set already (the
                // command's time, under LFU its count too): setting it again changes nothing.
                if !self.read_memo.borrow().touched(&mkey) {
                    self.shared.access.written(&mkey, self.now_ms() / 1000);
                }
                batch.put(ColumnFamily::Metadata, mkey, value);
            }
            Err(_) => self.journal.borrow_mut().refused = Some(meta.ty),
        }
    }

    /// Queues the metadata of a collection after an edit: deleted when it became empty
    /// (an empty collection does not exist), written otherwise.
    pub(crate) fn put_collection(&self, batch: &mut WriteBatch, key: &[u8], meta: &Metadata<'_>) {
        self.put_collection_at(batch, self.metadata_key(key), meta);
    }

    /// [`Db::put_collection`] under a metadata key built already (see [`Db::lookup_at`]).
    pub(crate) fn put_collection_at(&self, batch: &mut WriteBatch, mkey: Vec<u8>, meta: &Metadata<'_>) {
        if meta.size == 0 && !meta.blind_write {
            batch.delete(ColumnFamily::Metadata, mkey);
        } else {
            self.put_metadata_in(self.layout(), batch, mkey, meta);
        }
    }

    /// Counts, once its deletion is committed, a deleted key whose records are left for
    /// the collector: a collection of more than [`LAZYFREE_THRESHOLD`] records.
    pub(crate) fn count_deferred_free(&self, meta: &Metadata<'_>) {
        if !meta.ty.is_single_kv() && meta.size > LAZYFREE_THRESHOLD {
            self.shared.deferred_frees.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Queues the deletion of `key`: its metadata record only, O(1) whatever the size; the
    /// subkeys become garbage for [`crate::gc`].
    pub(crate) fn delete_key(&self, batch: &mut WriteBatch, key: &[u8]) {
        let mkey = self.metadata_key(key);
        self.shared.access.forget(&mkey);
        batch.delete(ColumnFamily::Metadata, mkey);
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
    /// see [`super::Engine::set_lfu`]).
    pub fn lfu(&self) -> bool {
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

    /// Reads one subkey's value.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn get_subkey(
        &self,
        key: &[u8],
        version: Version,
        sub: &[u8],
    ) -> CommandResult<Option<Bytes>> {
        Ok(self.backend.get(ColumnFamily::Subkey, &self.subkey(key, version, sub)?)?)
    }

    /// Walks the subkeys of `key` at `version` lazily, yielding `(sub, value)`.
    ///
    /// # Errors
    /// Storage errors, when starting or from any item.
    pub fn scan_subkeys(
        &self,
        key: &[u8],
        version: Version,
        direction: Direction,
    ) -> CommandResult<impl Iterator<Item = CommandResult<(Bytes, Bytes)>> + '_> {
        let prefix_len = self.layout().subkey_prefix(key, version, 0)?.len();
        let iter: ScanIter<'_> =
            self.backend.scan(ColumnFamily::Subkey, &self.layout().subkey_range(key, version)?, direction)?;
        Ok(iter.map(move |item| {
            let (k, v) = item?;
            Ok((k.slice(prefix_len..), v))
        }))
    }

    /// Applies a command's writes as one atomic batch (nothing for an empty batch), and
    /// records the keys it touched: every metadata put, and every metadata delete of a
    /// record that exists ([`super::Session::touched`] after the command).
    ///
    /// # Errors
    /// Storage errors; then nothing was written or recorded.
    pub fn commit(&mut self, mut batch: WriteBatch) -> CommandResult<()> {
        let base = &self.shared.base_layout;
        if let Some(ty) = self.journal.get_mut().refused.take() {
            return Err(CommandError::err(format!(
                "the {} layout cannot store a {} key",
                base.kind().name(),
                ty.name()
            )));
        }
        if batch.is_empty() {
            return Ok(());
        }
        let Changes { deltas, garbage, gate } = self.changes(&batch)?;
        if base.kind() != LayoutKind::Kvrocks {
            batch = self.adapt(batch)?;
        }
        // A delete touches a key only if it had a record (Redis signals what it removed).
        // An element written without a size change (HSET of an existing field, ZADD of a
        // new score, LSET) touches its owner.
        let new_events = self.shared.new_events.load(Ordering::Relaxed);
        let mut created = Vec::new();
        // The owners go straight into the journal (no vector of their own), and are taken
        // back out if the write fails.
        let before = self.journal.borrow().touched.len();
        let record = self.shared.records_modified();
        let found = self.owners(&batch, record, new_events, &mut created, before);
        let written = found.and_then(|()| Ok(self.write_counted(batch, deltas, gate)?));
        let journal = self.journal.get_mut();
        if let Err(e) = written {
            journal.touched.truncate(before);
            return Err(e);
        }
        // A key whose `new` the command announced itself (before its commit) is not new again.
        let announced = |(db, key): &(usize, Bytes)| {
            journal.scratch.pending.iter().any(|e| e.name == "new" && e.db == *db && e.key == key)
        };
        let created: Vec<(usize, Bytes)> =
            created.iter().filter_map(|k| self.shared.decode_touched(k)).filter(|k| !announced(k)).collect();
        journal.settle(true, &self.shared);
        journal.created = created;
        journal.effects.garbage |= garbage;
        Ok(())
    }

    /// [`Db::commit`] for a write Redis makes without signalling its key: a BITFIELD whose
    /// every write failed still creates or grows the string, and neither WATCH, client
    /// tracking nor a blocked client hears of it (the `new` event of a created key is still
    /// raised, as Redis' `dbAdd` does).
    ///
    /// # Errors
    /// As [`Db::commit`].
    pub(crate) fn commit_unsignalled(&mut self, batch: WriteBatch) -> CommandResult<()> {
        let before = self.journal.get_mut().touched.len();
        self.commit(batch)?;
        self.journal.get_mut().touched.truncate(before);
        Ok(())
    }

    /// [`Db::commit`] for a write after which Redis wakes the clients blocked on its key
    /// without signalling it modified (`signalKeyAsReady` alone: XGROUP DESTROY, whose
    /// blocked XREADGROUP readers then fail): the keys count as [`Touch::Ready`].
    ///
    /// # Errors
    /// As [`Db::commit`].
    pub(crate) fn commit_ready(&mut self, batch: WriteBatch) -> CommandResult<()> {
        let before = self.journal.get_mut().touched.len();
        self.commit(batch)?;
        for t in &mut self.journal.get_mut().touched[before..] {
            if t.kind == Touch::Written {
                t.kind = Touch::Ready;
            }
        }
        Ok(())
    }

    /// Appends to the journal's touched keys, as written, the owner of every record `batch`
    /// writes (each once, after index `from`; only when `record`), and to `created` the
    /// metadata keys it creates (only with `new_events`).
    fn owners(
        &self,
        batch: &WriteBatch,
        record: bool,
        new_events: bool,
        created: &mut Vec<Bytes>,
        from: usize,
    ) -> CommandResult<()> {
        if !record && !new_events {
            return Ok(());
        }
        let layout = self.layout();
        // The owners already listed: looked up in the list for a small batch, in a set for a
        // batch of many keys (FLUSHDB), which stays linear.
        let mut listed: Option<HashSet<Bytes>> = (record && batch.ops().len() > 32)
            .then(|| self.journal.borrow().touched[from..].iter().map(|t| t.metadata_key.clone()).collect());
        // The owner of the last element record: a command writes its elements in a row, and
        // their owner is listed (or built) once.
        let mut last_owner = None;
        for op in batch.ops() {
            let owner = match op {
                BatchOp::Put { cf: ColumnFamily::Metadata, key, .. } => {
                    if new_events && !created.contains(key) && !self.is_live_record(key)? {
                        created.push(key.clone());
                    }
                    if !record {
                        continue;
                    }
                    // A copy, not a clone: sharing the batch's key would make both reference
                    // counted (two allocations and atomic updates instead of one).
                    Some(Bytes::copy_from_slice(key))
                }
                _ if !record => continue,
                BatchOp::Delete { cf: ColumnFamily::Metadata, key } => {
                    let remembered = matches!(self.read_memo.borrow().get(key), Some(Some(_)));
                    (remembered || self.metadata_record(key)?.is_some()).then(|| Bytes::copy_from_slice(key))
                }
                BatchOp::Put { cf: ColumnFamily::Subkey | ColumnFamily::Stream, key, .. }
                | BatchOp::Delete { cf: ColumnFamily::Subkey | ColumnFamily::Stream, key }
                    if layout.version_len() == 16 =>
                {
                    // TiTea's element records name their collection by id: its key is the one
                    // the command looked up under that id.
                    let version = layout.decode_subkey(key).ok().map(|sk| sk.version);
                    let journal = self.journal.borrow();
                    journal.owners.iter().find(|(v, _)| Some(*v) == version).map(|(_, k)| k.clone())
                }
                BatchOp::Put { cf: ColumnFamily::Score, key, .. }
                | BatchOp::Delete { cf: ColumnFamily::Score, key }
                    if layout.version_len() == 16 =>
                {
                    let version = layout.decode_score_key(key).ok().map(|sk| sk.version);
                    let journal = self.journal.borrow();
                    journal.owners.iter().find(|(v, _)| Some(*v) == version).map(|(_, k)| k.clone())
                }
                BatchOp::Put { cf: ColumnFamily::Subkey | ColumnFamily::Stream, key, .. }
                | BatchOp::Delete { cf: ColumnFamily::Subkey | ColumnFamily::Stream, key } => {
                    let Ok(owner) = layout.decode_subkey(key).map(|sk| sk.owner()) else { continue };
                    if last_owner.replace(owner) == Some(owner) {
                        continue;
                    }
                    Some(layout.owner_metadata_key(&owner).into())
                }
                BatchOp::Put { cf: ColumnFamily::Score, key, .. }
                | BatchOp::Delete { cf: ColumnFamily::Score, key } => {
                    let Ok(owner) = layout.decode_score_key(key).map(|sk| sk.owner) else { continue };
                    if last_owner.replace(owner) == Some(owner) {
                        continue;
                    }
                    Some(layout.owner_metadata_key(&owner).into())
                }
            };
            let first = |o: &Bytes| match &mut listed {
                Some(listed) => listed.insert(o.clone()),
                None => !self.journal.borrow().touched[from..].iter().any(|t| t.metadata_key == o),
            };
            if let Some(owner) = owner.filter(first) {
                self.journal
                    .borrow_mut()
                    .touched
                    .push(TouchedKey { metadata_key: owner, kind: Touch::Written });
            }
        }
        Ok(())
    }

    /// Whether a metadata record exists and is live (a key `commit` overwrites, not creates).
    fn is_live_record(&self, mkey: &[u8]) -> CommandResult<bool> {
        if let Some(Some(found)) = self.read_memo.borrow().get(mkey) {
            return Ok(found.is_some_and(|m| m.is_live(self.now_ms())));
        }
        let raw = self.metadata_record(mkey)?;
        Ok(raw.is_some_and(|raw| self.layout().decode_metadata(&raw).is_ok_and(|m| m.is_live(self.now_ms()))))
    }
}

impl<B: KvBackend> Db<'_, B> {
    /// The metadata record at `mkey`, as [`metadata_record`] reads it; what the metadata
    /// column family held is remembered for the commit ([`Db::remember`]).
    ///
    /// # Errors
    /// As [`metadata_record`].
    pub(crate) fn metadata_record(&self, mkey: &[u8]) -> crate::Result<Option<Bytes>> {
        let raw = self.backend.get(ColumnFamily::Metadata, mkey)?;
        if self.remembering.get() {
            let base = &self.shared.base_layout;
            let found = raw.as_deref().map(|raw| base.decode_metadata(raw).ok().map(|m| m.without_value()));
            self.remember(mkey, found, false);
        }
        match raw {
            None => legacy_record(&self.backend, &self.shared.base_layout, mkey),
            raw => Ok(raw),
        }
    }

    /// Remembers what the record at `mkey` in the metadata column family held, and whether
    /// the lookup set the key's last-use time (`touched`), while a command that may write
    /// runs and there is room ([`READ_MEMO`]); the first reading stands (nothing writes the
    /// record before the memo is emptied).
    fn remember(&self, mkey: &[u8], found: Recalled, touched: bool) {
        if !self.remembering.get() {
            return;
        }
        let mut memo = self.read_memo.borrow_mut();
        if memo.len() < READ_MEMO && memo.get(mkey).is_none() {
            memo.push(mkey, found, touched);
        }
    }
}

/// The metadata record at `mkey`; when there is none and `layout` is NeoKV's, the string
/// its first encoding kept under [`KeyLayout::legacy_string_key`], as a string metadata
/// value (NeoKV's read fallback).
///
/// # Errors
/// Storage errors; [`crate::Error::Truncated`] for a legacy record under 8 bytes.
pub(crate) fn metadata_record<B: KvBackend>(
    backend: &B,
    layout: &KeyLayout,
    mkey: &[u8],
) -> crate::Result<Option<Bytes>> {
    match backend.get(ColumnFamily::Metadata, mkey)? {
        None => legacy_record(backend, layout, mkey),
        raw => Ok(raw),
    }
}

/// NeoKV's first-encoding string for `mkey`, as a string metadata value, when the layout is
/// NeoKV's and there is one.
///
/// # Errors
/// Storage errors; [`crate::Error::Truncated`] for a legacy record under 8 bytes.
fn legacy_record<B: KvBackend>(backend: &B, layout: &KeyLayout, mkey: &[u8]) -> crate::Result<Option<Bytes>> {
    let Some(legacy_key) = layout.legacy_string_key(mkey) else { return Ok(None) };
    match backend.get(ColumnFamily::Subkey, &legacy_key)? {
        Some(raw) => Ok(Some(decode_neokv_legacy(&raw)?.to_vec().into())),
        None => Ok(None),
    }
}

impl<B: KvBackend> Db<'_, B> {
    /// What the layout's system writes beside a batch of metadata writes: NeoKV's
    /// migration of first-encoding strings, TiTea's index records; the batch as it is for
    /// Kvrocks and camellia.
    ///
    /// # Errors
    /// Storage errors reading the records the batch replaces.
    fn adapt(&self, mut batch: WriteBatch) -> crate::Result<WriteBatch> {
        match self.shared.base_layout.kind() {
            LayoutKind::NeoKv => migrate_legacy(&self.shared.base_layout, &mut batch),
            LayoutKind::TiTea => batch = self.titea_index_records(batch)?,
            _ => {}
        }
        Ok(batch)
    }

    /// TiTea's index records for the metadata writes of `batch`, in the same batch, as
    /// TiTea's own writes keep them: a GC record (`kv<ns>g<id>` → type) for every collection
    /// a write deletes or replaces, the expire record (`kv<ns>e<ms><key>` → id, type) moved
    /// with the key's expiry; and the created-at time of each metadata value (kept when the
    /// collection stays the same, now otherwise).
    ///
    /// # Errors
    /// Storage errors reading the records the batch replaces.
    fn titea_index_records(&self, batch: WriteBatch) -> crate::Result<WriteBatch> {
        let base = &self.shared.base_layout;
        let now_s = self.now_ms() / 1000;
        let mut out = WriteBatch::new();
        // What each metadata key holds as the batch goes (a key written twice in one batch).
        let mut current: Vec<(Bytes, Option<Bytes>)> = Vec::new();
        for op in batch.into_ops() {
            let (key, new) = match op {
                BatchOp::Put { cf: ColumnFamily::Metadata, key, value } => (key, Some(value)),
                BatchOp::Delete { cf: ColumnFamily::Metadata, key } => (key, None),
                BatchOp::Put { cf, key, value } => {
                    out.put(cf, key, value);
                    continue;
                }
                BatchOp::Delete { cf, key } => {
                    out.delete(cf, key);
                    continue;
                }
            };
            let old = match current.iter().find(|(k, _)| *k == key) {
                Some((_, v)) => v.clone(),
                None => self.backend.get(ColumnFamily::Metadata, &key)?,
            };
            let Ok(mk) = base.decode_metadata_key(&key) else {
                put_or_delete(&mut out, key, new);
                continue;
            };
            let layout = KeyLayout::titea(mk.namespace);
            let old_meta = old.as_deref().and_then(|raw| base.decode_metadata(raw).ok());
            let new = match (&old_meta, &new) {
                (Some(old), Some(raw)) => keep_string_id(old, raw, self.now_ms()).or(new),
                _ => new,
            };
            let new_meta = new.as_deref().and_then(|raw| base.decode_metadata(raw).ok());
            let same = |a: &Metadata<'_>, b: &Metadata<'_>| a.version == b.version && a.ty == b.ty;
            let mut value = new.clone();
            if let Some(old) = &old_meta {
                let kept = new_meta.as_ref().is_some_and(|n| same(old, n));
                if !old.ty.is_single_kv() && !kept {
                    let ty = crate::codec::titea::type_byte(old.ty).unwrap_or(b'h');
                    out.put(ColumnFamily::Metadata, base.gc_record_key(mk.namespace, old.version)?, vec![ty]);
                }
                if old.expire_ms != 0
                    && !(kept && new_meta.as_ref().is_some_and(|n| n.expire_ms == old.expire_ms))
                {
                    out.delete(ColumnFamily::Metadata, layout.expire_record_key(old.expire_ms, mk.user_key));
                }
            }
            if let (Some(new_meta), Some(raw)) = (&new_meta, &new) {
                let kept = old_meta.as_ref().is_some_and(|o| same(o, new_meta));
                if new_meta.expire_ms != 0
                    && !(kept && old_meta.as_ref().is_some_and(|o| o.expire_ms == new_meta.expire_ms))
                {
                    let index = crate::codec::titea::expire_value(new_meta)?;
                    out.put(
                        ColumnFamily::Metadata,
                        layout.expire_record_key(new_meta.expire_ms, mk.user_key),
                        index,
                    );
                }
                let created = match (&old, kept) {
                    (Some(old), true) => old.get(crate::codec::titea::CREATED_AT).map(<[u8]>::to_vec),
                    _ => None,
                };
                let mut bytes = raw.to_vec();
                if let Some(field) = bytes.get_mut(crate::codec::titea::CREATED_AT) {
                    field.copy_from_slice(&created.unwrap_or_else(|| now_s.to_be_bytes().to_vec()));
                }
                value = Some(bytes.into());
            }
            match current.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = new.clone(),
                None => current.push((key.clone(), new.clone())),
            }
            put_or_delete(&mut out, key, value);
        }
        Ok(out)
    }
}

/// TiTea: the string record `raw` written over `old` with `old`'s object id, when both are
/// live strings of different ids (TiTea's string writes keep the id of a live string).
fn keep_string_id(old: &Metadata<'_>, raw: &Bytes, now_ms: u64) -> Option<Bytes> {
    let live_string = |m: &Metadata<'_>| m.ty == RedisType::String && !m.is_expired(now_ms);
    let fresh = crate::codec::titea::decode_metadata(raw).ok()?;
    if !live_string(old) || !live_string(&fresh) || fresh.version == old.version {
        return None;
    }
    let mut bytes = raw.to_vec();
    bytes.get_mut(crate::codec::titea::OBJECT_ID)?.copy_from_slice(&old.version.id().ok()?);
    Some(bytes.into())
}

/// Queues `value` at the metadata key `key`, or its deletion for `None`.
fn put_or_delete(batch: &mut WriteBatch, key: Bytes, value: Option<Bytes>) {
    match value {
        Some(value) => batch.put(ColumnFamily::Metadata, key, value),
        None => batch.delete(ColumnFamily::Metadata, key),
    }
}

/// NeoKV's write-side migration: every metadata record `batch` writes or deletes also
/// deletes the string of NeoKV's first encoding under the same key, so a key read through
/// the fallback is moved (or deleted) by its first write. Nothing for Kvrocks.
fn migrate_legacy(layout: &KeyLayout, batch: &mut WriteBatch) {
    if layout.kind() != LayoutKind::NeoKv {
        return;
    }
    let legacy: Vec<Vec<u8>> = batch
        .ops()
        .iter()
        .filter_map(|op| match op {
            BatchOp::Put { cf: ColumnFamily::Metadata, key, .. }
            | BatchOp::Delete { cf: ColumnFamily::Metadata, key } => layout.legacy_string_key(key),
            _ => None,
        })
        .collect();
    for key in legacy {
        batch.delete(ColumnFamily::Subkey, key);
    }
}

/// The metadata keys `touched` found expired and did not write afterwards, each once: the
/// records still to delete (a key written since holds a new record, maybe expired too,
/// that a later command must find).
pub(crate) fn expired_keys(touched: &[TouchedKey]) -> Vec<Bytes> {
    let mut keys: Vec<Bytes> = Vec::new();
    for t in touched {
        keys.retain(|k| *k != t.metadata_key);
        if t.kind == Touch::Expired {
            keys.push(t.metadata_key.clone());
        }
    }
    keys
}
