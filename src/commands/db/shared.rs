//! What every connection to one store shares ([`Shared`]): the clock, the version
//! generator, each database's layout and their swaps, SCAN cursors, key counts, access times
//! and the random generator, all working through `&self`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;

use super::DATABASES;
use crate::codec::{Clock, KeyLayout, SystemClock, VersionGenerator};
use crate::commands::counts::KeyCounts;
use crate::commands::cursor::CursorStore;
use crate::commands::error::CommandError;
use crate::commands::listeners::Listeners;
use crate::commands::reply::CommandResult;

/// What every connection to one store shares: clock, version generator, the databases'
/// layouts, SCAN cursors, the random generator. All of it works through `&self`.
pub(crate) struct Shared {
    pub(crate) clock: Arc<dyn Clock>,
    pub(super) versions: &'static VersionGenerator,
    /// The namespaces' layouts (`None`: a namespace over 255 bytes).
    layouts: Vec<Option<KeyLayout>>,
    /// Which of `layouts` each logical database uses: SWAPDB exchanges two entries, O(1).
    slots: Vec<AtomicUsize>,
    pub(crate) base_layout: KeyLayout,
    pub(super) blind_write: AtomicBool,
    pub(super) bitmap_strings: AtomicBool,
    pub(super) new_events: AtomicBool,
    /// Whether commands record their [`Event`](crate::commands::Event)s (their
    /// [`Effects`](crate::commands::Effects) are always counted).
    pub(super) events: AtomicBool,
    /// Redis' `stream-node-max-entries`: the node size `~` trimming removes whole.
    pub(crate) stream_node_entries: AtomicU64,
    /// Which deletions propagate as UNLINK ([`crate::commands::LazyDeletes`], as bits).
    pub(crate) lazy_deletes: std::sync::atomic::AtomicU8,
    /// Until then (ms on `clock`) a key found expired is gone for commands but neither
    /// deleted nor signalled (Redis during CLIENT PAUSE). 0: not held.
    pub(crate) expiry_held_until: AtomicU64,
    /// Deleted collections of more than [`LAZYFREE_THRESHOLD`](super::LAZYFREE_THRESHOLD) records,
    /// whose records were left for the collector (see [`crate::commands::Engine::deferred_frees`]).
    pub(crate) deferred_frees: AtomicU64,
    /// When each key was last used (OBJECT IDLETIME).
    pub(crate) access: crate::commands::access::AccessTimes,
    pub(crate) cursors: CursorStore,
    rng: AtomicU64,
    /// Each namespace's key counts; `None` over a store other processes write too, and for a
    /// bare [`Db`](super::Db) (which never deletes the expired keys it finds).
    pub(crate) counts: Option<KeyCounts>,
    /// Who needs the modified keys (see [`Listeners`]); `None`: they are always recorded.
    pub(crate) listeners: Option<Listeners>,
}

impl Shared {
    /// Which deletions propagate as UNLINK.
    pub(crate) fn lazy_deletes(&self) -> crate::commands::LazyDeletes {
        crate::commands::LazyDeletes::from_bits(self.lazy_deletes.load(Ordering::Relaxed))
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
            access: crate::commands::access::AccessTimes::new(SystemClock.now_ms() / 1000),
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
    #[inline]
    pub(crate) fn records_modified(&self) -> bool {
        self.listeners.as_ref().is_none_or(Listeners::any)
    }

    pub(crate) fn seed(&mut self, seed: u64) {
        self.rng = AtomicU64::new(seed | 1);
    }

    /// The namespace database `index` uses now.
    #[inline]
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

    /// The namespace slot of every database ([`crate::commands::Engine::db_slots`]).
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

    /// Records events from now on, or stops (see [`crate::commands::Engine::set_events`]).
    pub(crate) fn set_events(&self, on: bool) {
        self.events.store(on, Ordering::Relaxed);
    }

    /// Records `new` events from now on (see [`Engine::set_new_events`](crate::Engine::set_new_events)).
    pub(crate) fn set_new_events(&self, on: bool) {
        self.new_events.store(on, Ordering::Relaxed);
    }

    /// The layout of database `index`.
    #[inline]
    pub(crate) fn layout_of(&self, index: usize) -> CommandResult<&KeyLayout> {
        match self.slot(index).and_then(|s| self.layouts.get(s)) {
            Some(Some(layout)) => Ok(layout),
            _ => Err(self.no_layout(index)),
        }
    }

    /// Why database `index` has no layout: out of range, or its namespace's error.
    #[cold]
    fn no_layout(&self, index: usize) -> CommandError {
        match self.slot(index).filter(|&s| s < self.layouts.len()) {
            Some(slot) => layout_for(&self.base_layout, slot)
                .err()
                .map_or_else(|| CommandError::err("DB index is out of range"), CommandError::from),
            None => CommandError::err("DB index is out of range"),
        }
    }

    /// Which namespace slot a metadata key is under (`hint` first: usually the selected
    /// database's), `None` for a namespace none of the databases uses.
    pub(super) fn slot_of_key(&self, metadata_key: &[u8], hint: Option<usize>) -> Option<usize> {
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
    pub(super) fn random_u64(&self) -> u64 {
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

/// The shared state a [`Db`](super::Db) works with: its own, or an [`crate::commands::Engine`]'s.
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
