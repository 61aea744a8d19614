//! The journal of what commands did to keys ([`Journal`]): the keys they touched, the events
//! they raised, their effects; lent by a session for each command and settled when it ends.

use bytes::Bytes;

use super::{Db, ReadMemo, Shared};
use crate::backend::KvBackend;
use crate::codec::{RedisType, Version};
use crate::commands::blocking::Block;
use crate::commands::notify::{Effects, Event, NotifyFlags};

/// A key a command modified (Redis' `signalModifiedKey`), named by its metadata record key,
/// which carries the database's namespace ([`crate::commands::Engine::touched_key`] decodes it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TouchedKey {
    /// The metadata record key (`[ns_len][ns]…[user key]`).
    pub(crate) metadata_key: Bytes,
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
    pub(crate) fn modified(&self) -> bool {
        self.kind != Touch::Ready
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
    pub(super) scratch: Scratch,
    /// Keys the last commit created, while `new` events are on: each gets its `new` event
    /// just before its first event of the command (Redis' `dbAdd` order).
    pub(super) created: Vec<(usize, Bytes)>,
    /// A type the layout cannot store that the command tried to write: its commit fails.
    pub(super) refused: Option<RedisType>,
    /// TiTea: the metadata key of each collection version the command looked up (its
    /// element records do not name their key).
    pub(super) owners: Vec<(Version, Bytes)>,
}

/// A journal's vectors that live only while a command runs, handed from command to command
/// through the [`crate::commands::Session`] so that a command allocates none of them.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The events recorded and not settled yet (with events on).
    pub(super) pending: Vec<Event>,
    /// What the pending events count for.
    pub(super) pending_effects: Effects,
    /// The database and key (a range of `keys`) of each notified key: each counts as
    /// written once settled, as Redis signals every key it notifies about (LTRIM that trims
    /// nothing touches WATCH).
    pub(super) signalled: Vec<(usize, std::ops::Range<usize>)>,
    pub(super) keys: Vec<u8>,
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
    pub(super) fn settle(&mut self, ok: bool, shared: &Shared) {
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
    pub(super) fn found_expired(&self, mkey: &[u8]) -> bool {
        let last = self.touched.iter().rev().find(|t| t.metadata_key == mkey);
        last.is_some_and(|t| t.kind == Touch::Expired)
    }
}

/// What [`Db::hand_back`] returns to a session: the journal, the block and the swapped
/// databases.
pub(crate) type HandedBack = (Option<Box<Journal>>, Option<Box<Block>>, Vec<(usize, usize)>);

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

    #[inline]
    fn deref(&self) -> &Journal {
        self.0.as_deref().unwrap_or(&EMPTY_JOURNAL)
    }
}

impl std::ops::DerefMut for JournalSlot {
    #[inline]
    fn deref_mut(&mut self) -> &mut Journal {
        self.0.get_or_insert_with(Box::default)
    }
}

impl<B: KvBackend> Db<'_, B> {
    /// Lends a fresh `Db` the journal a session kept from its last command, which
    /// [`crate::commands::Session::clear_results`] emptied before this one: a command reuses its
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

    /// The keys the commands run since the last [`Db::take_touched`] modified, or found
    /// expired, in order (a key may repeat).
    pub(crate) fn take_touched(&mut self) -> Vec<TouchedKey> {
        std::mem::take(&mut self.journal.get_mut().touched)
    }

    /// The keyspace events the commands run since the last [`Db::take_events`] raised, in order
    /// (see [`crate::commands::notify`]). A `Db` leaves the keys it finds expired in place (an
    /// [`crate::commands::Engine`] deletes them after each command, [`Db::delete_expired`]), so
    /// over a bare `Db` every command that finds one reports it `expired` again. Events are
    /// recorded unless turned off ([`crate::commands::Engine::set_events`]).
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
