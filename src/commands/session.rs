//! [`Session`]: what Redis keeps per client connection.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bytes::Bytes;

use super::db::Journal;
use super::{Block, CommandInfo, Event, TouchedKey};

/// One client's state: selected database, protocol version, MULTI queue, WATCHed keys,
/// id and name. The shared [`super::Engine`] holds none of it; a connection owns its
/// session and passes it to every [`super::Engine::execute`].
#[derive(Debug)]
pub struct Session {
    id: u64,
    resp: u8,
    pub(crate) db: usize,
    pub(crate) multi: Option<Multi>,
    pub(crate) watched: Vec<Watched>,
    /// Set by another client touching a watched key (Redis' `CLIENT_DIRTY_CAS`).
    pub(crate) dirty: Arc<AtomicBool>,
    /// The last command's touched keys, events and effects, and the vectors the next one
    /// reuses (`None` until a command records something): lent to each command's [`super::Db`].
    pub(crate) journal: Option<Box<Journal>>,
    /// The time the next command runs at, given by the caller (0: the engine's clock).
    pub(crate) time_ms: u64,
    pub(crate) block: Option<Box<Block>>,
    pub(crate) swapped: Vec<(usize, usize)>,
    /// The cluster slots KEYS, SCAN, DBSIZE and RANDOMKEY read ([`Session::set_key_slots`]).
    pub(crate) key_slots: Option<Arc<[(u16, u16)]>>,
}

/// An open MULTI: the queued commands, and whether one was refused while queueing.
#[derive(Debug, Default)]
pub(crate) struct Multi {
    pub(crate) queue: Vec<(&'static CommandInfo, Vec<Bytes>)>,
    pub(crate) failed: bool,
}

/// A WATCHed key.
#[derive(Debug, Clone)]
pub(crate) struct Watched {
    pub(crate) key: Bytes,
    /// The logical database: a SWAPDB that keeps the watch keeps it on this database.
    pub(crate) db: usize,
    /// Already expired when watched: its expiry does not abort EXEC (Redis 7.0).
    pub(crate) expired_at_watch: bool,
    /// The backend's stamp of the metadata record when watched (see `KvBackend::stamp`).
    pub(crate) stamp: Option<u64>,
    /// The watch as a listener of modified keys (see [`super::Listeners`]).
    pub(crate) _listening: Option<super::Listening>,
}

impl Session {
    /// A session on database 0, RESP2, with client id `id`.
    pub fn new(id: u64) -> Self {
        Session {
            id,
            resp: 2,
            db: 0,
            multi: None,
            watched: Vec::new(),
            dirty: Arc::new(AtomicBool::new(false)),
            journal: None,
            time_ms: 0,
            block: None,
            swapped: Vec::new(),
            key_slots: None,
        }
    }

    /// The commands queued in the open MULTI, in order (none outside MULTI): what EXEC will
    /// run, for a server that shows them (MONITOR).
    pub fn queued(&self) -> impl Iterator<Item = &[Bytes]> {
        self.multi.iter().flat_map(|m| m.queue.iter().map(|(_, argv)| argv.as_slice()))
    }

    /// The client id (`CLIENT ID`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The RESP protocol version the client speaks (2, or 3 after the server's `HELLO 3`).
    pub fn resp(&self) -> u8 {
        self.resp
    }

    /// Sets the RESP protocol version.
    pub fn set_resp(&mut self, resp: u8) {
        self.resp = resp;
    }

    /// The selected database.
    pub fn db(&self) -> usize {
        self.db
    }

    /// Whether a MULTI is open.
    pub fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    /// Marks the open MULTI (if any) as failed, so EXEC answers EXECABORT: for a command a
    /// server refused before queueing it (unknown, not allowed, wrong arity), as Redis'
    /// `flagTransaction`.
    pub fn flag_transaction(&mut self) {
        if let Some(multi) = &mut self.multi {
            multi.failed = true;
        }
    }

    /// How many keys the session watches.
    pub fn watched_count(&self) -> usize {
        self.watched.len()
    }

    /// Takes the [`Block`] of the last executed command if it would block: then the reply
    /// [`super::Engine::execute`] returned is not an answer; park the client as
    /// [`super::Block`] describes.
    pub fn take_block(&mut self) -> Option<Block> {
        self.block.take().map(|block| *block)
    }

    /// The database pairs the last executed command (SWAPDB, or an EXEC holding some)
    /// exchanged, in order. Every key of both databases may have changed: a server retries
    /// every client blocked in either database (Redis 7.0 signals each of their blocked keys
    /// that exists after the swap), and the engine has already aborted every WATCH on them.
    pub fn swapped_dbs(&self) -> &[(usize, usize)] {
        &self.swapped
    }

    /// The keys the last executed command (or EXEC) modified or found expired, in order
    /// (Redis' `signalModifiedKey`), and those it only made ready for blocked clients
    /// ([`super::Touch::Ready`]: not `TouchedKey::modified`);
    /// [`super::Engine::touched_key`] names their database and key. Blocked clients wake up
    /// from all of these; WATCH and client tracking heed the modified ones. An engine with
    /// [`super::Engine::with_listeners`] records the written and ready ones only while
    /// someone listens.
    #[inline]
    pub fn touched(&self) -> &[TouchedKey] {
        self.journal.as_ref().map_or(&[], |j| &j.touched)
    }

    /// The keyspace events the last executed command (or EXEC, in queue order) raised, as
    /// Redis 7.0's `notifyKeyspaceEvent` calls: publish each with
    /// [`Event::messages`](super::Event::messages) under the server's
    /// `notify-keyspace-events` flags. Empty after an error or a command that wrote nothing
    /// (but a key found expired is an `expired` event even then).
    pub fn events(&self) -> &[Event] {
        self.journal.as_ref().map_or(&[], |j| &j.events)
    }

    /// Gives the next command [`super::Engine::execute`] runs (not EXEC, a script or a
    /// retried blocked command) its time, in unix milliseconds, instead of the engine reading
    /// its clock: for a caller that reads the same clock to time the command (as Redis times a
    /// call with the reading its expiry checks see). The time must come from the engine's
    /// clock.
    pub fn set_time(&mut self, unix_ms: u64) {
        self.time_ms = unix_ms;
    }

    /// Restricts KEYS, SCAN, DBSIZE and RANDOMKEY to the keys of the cluster slot ranges
    /// `first..=last` given (all keys with `None`), where the layout writes each key's slot
    /// ([`crate::codec::KeyLayout::cluster_slots`]): each range of slots is then one range of
    /// the store, and only those are read. Under another layout it changes nothing (the
    /// caller filters the keys). A cluster node over a shared store sets its own slots.
    pub fn set_key_slots(&mut self, ranges: Option<Vec<(u16, u16)>>) {
        self.key_slots = ranges.map(|mut ranges| {
            ranges.sort_unstable();
            ranges.into()
        });
    }

    /// What the last executed command (or EXEC, or script) did, counted whether or not its
    /// events were recorded (see [`super::Effects`]).
    pub fn effects(&self) -> super::Effects {
        self.journal.as_ref().map(|j| j.effects).unwrap_or_default()
    }

    /// Forgets the last command's results (touched keys, events, effects, block, swapped
    /// databases) before the next one runs.
    pub(crate) fn clear_results(&mut self) {
        if let Some(journal) = &mut self.journal {
            journal.clear();
        }
        self.block = None;
        self.swapped.clear();
    }

    /// Sets the results of a transaction or script run on a `Db` of its own.
    pub(crate) fn set_results(
        &mut self,
        touched: Vec<TouchedKey>,
        events: Vec<Event>,
        effects: super::Effects,
        swapped: Vec<(usize, usize)>,
    ) {
        let journal = self.journal.get_or_insert_with(Box::default);
        journal.touched = touched;
        journal.events = events;
        journal.effects = effects;
        self.swapped = swapped;
    }

    /// Marks the last command as having left garbage for [`crate::gc`].
    pub(crate) fn add_garbage(&mut self) {
        self.journal.get_or_insert_with(Box::default).effects.garbage = true;
    }
}
