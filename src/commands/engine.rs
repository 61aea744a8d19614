//! [`Engine`]: one backend shared by many clients on many threads, with MULTI/EXEC/WATCH.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;

use super::db::{Share, Shared, expired_keys};
use super::dispatch::{Action, action, needs_session};
use super::listeners::Listeners;
use super::locks::{KeyLocks, LockGuard};
use super::overlay::Overlay;
use super::propagate::{Propagated, Propagation};
use super::session::{Multi, Watched};
use super::table::{self, CommandInfo};
use super::{CommandError, Db, Reply, Session, Touch, TouchedKey, resolve};
use crate::backend::{ColumnFamily, KvBackend};
use crate::codec::{Clock, KeyLayout};

/// A database many clients use at once: the backend and the state every connection shares
/// (clock, versions, SCAN cursors, key locks, WATCH registrations). Per-connection state
/// lives in each client's [`Session`]. `Engine<B>` is `Send + Sync` when `B` is; wrap it in an
/// `Arc` and call [`Engine::execute`] from any thread.
///
/// Each command runs under striped key locks (the private `locks` module) taken from its
/// key specs, so its reads and its one batch are atomic with respect to other commands. EXEC runs its
/// queue over an overlay (the private `overlay` module) under the union of the queued commands' locks and commits the
/// whole transaction as one batch.
pub struct Engine<B> {
    backend: B,
    shared: Shared,
    locks: KeyLocks,
    watches: Watches,
    next_client: AtomicU64,
    held_answer: std::sync::OnceLock<HeldAnswer>,
    propagation: std::sync::OnceLock<Arc<dyn Propagation>>,
}

/// The reply to an EXEC refused before running with `refusal`, as Redis'
/// `execCommandAbort` gives it: `EXECABORT Transaction discarded because of: <error>` (the
/// caller discards the transaction). A reply that is no error stays as it is.
pub fn exec_abort(refusal: Reply) -> Reply {
    match refusal {
        Reply::Error(e) => Reply::Error(format!("EXECABORT Transaction discarded because of: {e}")),
        other => other,
    }
}

/// What a command answers instead of waiting while another holds the keyspace-wide lock
/// (see [`Engine::answer_while_held`]); `None`: go on waiting.
pub type HeldAnswer = Box<dyn Fn(&[Bytes]) -> Option<Reply> + Send + Sync>;

impl<B: KvBackend> Engine<B> {
    /// An engine with the default (Kvrocks standalone) layout and the system clock.
    pub fn new(backend: B) -> Self {
        Engine::with_layout(backend, KeyLayout::default())
    }

    /// An engine writing records with `layout`.
    pub fn with_layout(backend: B, layout: KeyLayout) -> Self {
        let mut shared = Shared::new(layout);
        // Counts kept here would miss other processes' writes: those stores scan instead.
        if !backend.is_shared() {
            shared.count_keys();
        }
        Engine {
            backend,
            shared,
            locks: KeyLocks::default(),
            watches: Watches::default(),
            next_client: AtomicU64::new(1),
            held_answer: std::sync::OnceLock::new(),
            propagation: std::sync::OnceLock::new(),
        }
    }

    /// Replaces the clock (tests use [`crate::codec::ManualClock`]).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.shared.access = super::access::AccessTimes::new(clock.now_ms() / 1000);
        self.shared.clock = clock;
        self
    }

    /// Records the keys commands modify ([`Session::touched`]: written or made ready) only
    /// while `listeners` counts someone, or a client of this engine watches a key (each
    /// WATCH counts there until UNWATCH, EXEC, DISCARD or [`Engine::close`]); keys found
    /// expired are recorded always. Without it (a new engine) they are always recorded. A
    /// server counts there its parked clients and its tracking clients: see [`Listeners`]
    /// for when a listener must be counted.
    pub fn with_listeners(mut self, listeners: Listeners) -> Self {
        self.shared.listeners = Some(listeners);
        self
    }

    /// Seeds the generator behind SPOP, SRANDMEMBER, RANDOMKEY and friends.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.shared.seed(seed);
        self
    }

    /// Sends every commit's replication stream to `propagation` from now on, while it is
    /// [`Propagation::active`] (see `propagate.rs`). Set once; `false` if it was set.
    pub fn set_propagation(&self, propagation: Arc<dyn Propagation>) -> bool {
        self.propagation.set(propagation).is_ok()
    }

    /// The propagation, while it records.
    fn recording(&self) -> Option<&Arc<dyn Propagation>> {
        self.propagation.get().filter(|p| p.active())
    }

    /// A fresh `Db` over `backend` for database `index`, recording the replication stream
    /// while it is kept.
    fn db_over<'b, T: KvBackend>(&'b self, backend: T, index: usize) -> Db<'b, T> {
        let mut db = Db::over(backend, Share::Borrowed(&self.shared), index);
        if self.recording().is_some() {
            db.record_propagation();
        }
        db
    }

    /// Hands one commit's stream to the propagation (under the commit's locks).
    #[inline]
    fn propagate(&self, unit: Vec<Propagated>) {
        // Most commands propagate nothing (no replica, or nothing written): the test is
        // inlined, the hand-over is not.
        if !unit.is_empty() {
            self.hand_over(unit);
        }
    }

    #[inline(never)]
    fn hand_over(&self, unit: Vec<Propagated>) {
        if let Some(propagation) = self.propagation.get() {
            propagation.propagate(unit);
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The layout of database 0 (its decoders read every database's records).
    pub fn layout(&self) -> &KeyLayout {
        &self.shared.base_layout
    }

    /// The layout of database `index` (`None` past [`super::DATABASES`], or when the
    /// namespace with its `:index` suffix would pass 255 bytes): its
    /// [`KeyLayout::namespace_range`] is where an expiry sweep (or INFO keyspace) of that
    /// database walks. After a SWAPDB it is the namespace the database uses now.
    pub fn db_layout(&self, index: usize) -> Option<&KeyLayout> {
        self.shared.layout_of(index).ok()
    }

    /// Which namespace each database uses: entry `i` is `n` when database `i` reads and
    /// writes the records first written as database `n` (the identity until a SWAPDB). The
    /// engine keeps it in memory only: an on-disk server saves it (with its config, say)
    /// and restores it with [`Engine::restore_db_slots`], or a restart undoes every SWAPDB.
    pub fn db_slots(&self) -> Vec<usize> {
        self.shared.slots()
    }

    /// Restores what [`Engine::db_slots`] returned, before the engine serves commands.
    /// Returns false, changing nothing, when `slots` is not a permutation of `0..DATABASES`.
    pub fn restore_db_slots(&self, slots: &[usize]) -> bool {
        self.shared.set_slots(slots)
    }

    /// The clock's time in unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.shared.clock.now_ms()
    }

    /// Database `index`'s key count and expiry count in O(1), as DBSIZE answers (expired keys
    /// not yet deleted included); the first call for a database counts its records once.
    /// `None` past [`super::DATABASES`], and over a store other processes write too
    /// ([`KvBackend::is_shared`]: etcd shared by several server nodes), where the engine
    /// keeps no counts, as they would miss the other processes' writes: scan there.
    ///
    /// # Errors
    /// Storage errors from a first count.
    pub fn key_count(&self, index: usize) -> crate::Result<Option<super::KeyCount>> {
        let (Some(counts), Some(slot)) = (&self.shared.counts, self.shared.slot(index)) else {
            return Ok(None);
        };
        let Ok(layout) = self.shared.layout_of(index) else { return Ok(None) };
        if let Some(count) = counts.get(slot) {
            return Ok(Some(count));
        }
        // A first count runs under the keyspace lock, shared as a command's: never in the
        // middle of a server emptying the store (see `touch_all_watched`). When a
        // whole-keyspace command holds it (maybe this thread's script), one scan, kept for
        // nobody.
        match self.locks.try_lock_shared() {
            Some(_guard) => counts.get_or_count(slot, layout, &self.backend).map(Some),
            None => super::counts::scan_count(layout, &self.backend).map(Some),
        }
    }

    /// While another caller holds the keyspace-wide lock (a script in
    /// [`Engine::atomically`], FLUSHALL, a transaction with a whole-keyspace command), a
    /// command waits for it by polling and asks `answer` with its
    /// arguments before each wait: the first `Some(reply)` is its reply, and it runs
    /// nothing. The keys a command found expired are then left to the sweep, and
    /// [`Engine::evict`] leaves its key, rather than wait. Without it a command blocks
    /// until the lock is free. Set once: later calls change nothing.
    pub fn answer_while_held(&self, answer: HeldAnswer) {
        let _ = self.held_answer.set(answer);
    }

    /// The locks `whole` and `keys` of a command with arguments `argv`: waiting for them
    /// as [`Engine::answer_while_held`] says, `Err` with the answer given instead.
    fn acquire<'k>(
        &self,
        whole: bool,
        keys: impl IntoIterator<Item = (&'k [u8], bool)>,
        argv: &[Bytes],
    ) -> Result<LockGuard<'_>, Reply> {
        let Some(answer) = self.held_answer.get() else { return Ok(self.locks.lock(whole, keys)) };
        let mut reply = None;
        let guard = self.locks.lock_or(whole, keys, &mut || {
            reply = answer(argv);
            reply.is_some()
        });
        guard.ok_or_else(|| reply.unwrap_or(Reply::NilArray))
    }

    /// Exclusive locks on `keys`, for the engine's own deletes (expired keys after a
    /// command, eviction): with [`Engine::answer_while_held`] set, `None` at once while
    /// another holds the keyspace-wide lock (the caller leaves the keys for later), else
    /// waiting for it.
    fn lock_for_delete<'k>(&self, keys: impl IntoIterator<Item = (&'k [u8], bool)>) -> Option<LockGuard<'_>> {
        if self.held_answer.get().is_none() {
            return Some(self.locks.lock(false, keys));
        }
        self.locks.lock_or(false, keys, &mut || true)
    }

    /// The key locks, for an engine that runs its own maintenance beside the commands.
    pub fn locks(&self) -> &KeyLocks {
        &self.locks
    }

    /// A new client session with a fresh id.
    pub fn session(&self) -> Session {
        Session::new(self.next_client.fetch_add(1, Ordering::Relaxed))
    }

    /// Ends a session: forgets its WATCHes. Call it when the connection closes.
    pub fn close(&self, session: &mut Session) {
        self.unwatch(session);
        session.multi = None;
    }

    /// A [`Db`] over `session`'s database, without locks: for single-threaded use and tests
    /// (typed calls such as `engine.db(&s).get(b"k")`).
    pub fn db(&self, session: &Session) -> Db<'_, &B> {
        let mut db = Db::over(&self.backend, Share::Borrowed(&self.shared), session.db);
        db.key_slots.clone_from(&session.key_slots);
        db
    }

    /// The database and user key a [`TouchedKey`] names (`None` if its namespace is not one
    /// of this engine's databases).
    pub fn touched_key(&self, touched: &TouchedKey) -> Option<(usize, Bytes)> {
        self.key_of(&touched.metadata_key)
    }

    /// The user keys of `touched` that count as modified (`TouchedKey::modified`): what
    /// client tracking invalidates.
    pub fn modified_keys(&self, touched: &[TouchedKey]) -> Vec<Bytes> {
        touched.iter().filter(|t| t.modified()).filter_map(|t| self.touched_key(t)).map(|(_, k)| k).collect()
    }

    /// The database and user key of a metadata record key (`None` if its namespace is not
    /// one of this engine's databases).
    pub fn key_of(&self, metadata_key: &[u8]) -> Option<(usize, Bytes)> {
        self.shared.decode_touched(metadata_key)
    }

    /// Records keyspace events ([`Session::events`]) from now on, or stops (they are on in a
    /// new engine). A server turns them off while `notify-keyspace-events` is empty: a
    /// command then copies no key for them. [`Session::effects`] is counted either way.
    pub fn set_events(&self, on: bool) {
        self.shared.set_events(on);
    }

    /// Records `new` events (class `n`, a command created a key) from now on, or stops. Off
    /// by default: finding which keys a commit creates costs a read per metadata write, so a
    /// server turns it on only while `notify-keyspace-events` has `n`.
    pub fn set_new_events(&self, on: bool) {
        self.shared.set_new_events(on);
    }

    /// Keeps each key's access frequency (`Some((lfu-log-factor, lfu-decay-time))`, for an
    /// LFU `maxmemory-policy`: OBJECT FREQ, RESTORE … FREQ) or its last-use time (`None`).
    pub fn set_lfu(&self, lfu: Option<(u32, u32)>) {
        self.shared.access.set_lfu(lfu);
    }

    /// Sets which deletions the replication stream names `UNLINK` rather than `DEL`.
    pub fn set_lazy_deletes(&self, lazy: super::LazyDeletes) {
        self.shared.lazy_deletes.store(lazy.bits(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets the node size approximate stream trimming (`MAXLEN ~`, `MINID ~`) removes whole
    /// (Redis' `stream-node-max-entries`, 100 by default; 0: unbounded), for every session.
    pub fn set_stream_node_entries(&self, entries: u64) {
        self.shared.stream_node_entries.store(entries, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many deleted keys (DEL, UNLINK, expiry) were collections of more than
    /// `LAZYFREE_THRESHOLD` records, left for the collector rather than freed
    /// by the deleting command: Redis' lazily freed objects.
    pub fn deferred_frees(&self) -> u64 {
        self.shared.deferred_frees.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Holds expiry until `until_ms` (on the engine's clock; 0 ends the hold), as Redis
    /// during CLIENT PAUSE: a command sees a key past its TTL as gone, but the key is
    /// neither deleted nor signalled (no `expired` event) until a command finds it after
    /// the hold. The expiry sweep is the caller's to stop.
    pub fn hold_expiry_until(&self, until_ms: u64) {
        self.shared.expiry_held_until.store(until_ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// Deletes those of `metadata_keys` still expired at `now_ms`, each under its key's
    /// exclusive lock after a fresh read, all in one batch: a key a client wrote since it
    /// was found expired is left alone. Returns the keys deleted, and flags the WATCHes on
    /// them (unless expired when watched). Used after a command that found keys expired, and
    /// by [`crate::gc::expire_step`].
    ///
    /// # Errors
    /// Storage errors; nothing was deleted then.
    pub(crate) fn delete_expired(&self, metadata_keys: &[Bytes], now_ms: u64) -> crate::Result<Vec<Bytes>> {
        self.delete_expired_keys(metadata_keys, now_ms, true).map(|(deleted, _)| deleted)
    }

    /// [`Engine::delete_expired`], and whether a deleted key was a collection.
    /// With `wait` false its locks are [`Engine::lock_for_delete`]'s, and the deletions are
    /// not propagated: the command that found the keys expired propagated them.
    fn delete_expired_keys(
        &self,
        metadata_keys: &[Bytes],
        now_ms: u64,
        wait: bool,
    ) -> crate::Result<(Vec<Bytes>, bool)> {
        if metadata_keys.is_empty() {
            return Ok((Vec::new(), false));
        }
        let layout = self.layout();
        let user_keys: Vec<&[u8]> = metadata_keys
            .iter()
            .filter_map(|k| layout.decode_metadata_key(k).ok().map(|mk| mk.user_key))
            .collect();
        let keys = user_keys.iter().map(|k| (*k, true));
        let guard = if wait { Some(self.locks.lock(false, keys)) } else { self.lock_for_delete(keys) };
        let Some(_guard) = guard else { return Ok((Vec::new(), false)) };
        // A backend shared by several processes makes the delete conditional on the re-read
        // (a conflict then deletes nothing; the next sweep finds the key again if still
        // expired, so no retry here).
        self.backend.begin();
        let mut db = Db::over(&self.backend, Share::Borrowed(&self.shared), 0);
        let deleted = db.delete_expired(metadata_keys, now_ms);
        let garbage = db.take_effects().garbage;
        drop(db);
        self.backend.finish();
        let deleted = deleted?;
        if wait && self.recording().is_some() {
            // Each deletion on its own, as Redis' active expiry propagates them.
            for (db, key) in deleted.iter().filter_map(|k| self.shared.decode_touched(k)) {
                self.propagate(vec![Propagated::deletion(db, key, self.shared.lazy_deletes().expire)]);
            }
        }
        // As Redis' expiry signals the key: a WATCH on it (live when watched) aborts EXEC.
        let touched: Vec<TouchedKey> =
            deleted.iter().map(|k| TouchedKey { metadata_key: k.clone(), kind: Touch::Expired }).collect();
        self.watches.notify(&touched, &self.shared);
        Ok((deleted, garbage))
    }

    /// Up to `count` live keys of database `index` (only those with a TTL when `volatile`),
    /// read in key order from a random point and wrapping at the end, after visiting at most
    /// `visits` records: an eviction pass's sample. The point is drawn between the first and
    /// last keys, so that keys sharing a prefix do not always yield the same sample. Touches
    /// no key.
    ///
    /// # Errors
    /// Storage errors.
    pub fn eviction_sample(
        &self,
        index: usize,
        count: usize,
        volatile: bool,
        visits: usize,
    ) -> crate::Result<Vec<super::Sampled>> {
        if index >= super::DATABASES {
            return Ok(Vec::new());
        }
        Db::over(&self.backend, Share::Borrowed(&self.shared), index).sample_keys(count, volatile, visits)
    }

    /// Evicts `key` of database `index` (`maxmemory`): deleted as DEL deletes it, under
    /// its key's exclusive lock, in one batch, its WATCHes flagged. `None` when it was no
    /// longer live; else an estimate of the bytes its records keep until the collector
    /// drops them (0 for a string); `None` too, with nothing deleted, while another holds
    /// the keyspace-wide lock, with [`Engine::answer_while_held`] set.
    ///
    /// # Errors
    /// Storage errors; nothing was deleted then.
    pub fn evict(&self, index: usize, key: &[u8]) -> crate::Result<Option<u64>> {
        if index >= super::DATABASES {
            return Ok(None);
        }
        let Some(_guard) = self.lock_for_delete([(key, true)]) else { return Ok(None) };
        self.backend.begin();
        let db = Db::over(&self.backend, Share::Borrowed(&self.shared), index);
        let evicted = db.evict_key(key);
        let metadata_key = Bytes::from(db.metadata_key(key));
        self.backend.finish();
        let evicted = evicted?;
        if evicted.is_some() && self.recording().is_some() {
            let lazy = self.shared.lazy_deletes().eviction;
            self.propagate(vec![Propagated::deletion(index, Bytes::copy_from_slice(key), lazy)]);
        }
        if evicted.is_some() {
            self.watches.notify(&[TouchedKey { metadata_key, kind: Touch::Written }], &self.shared);
        }
        Ok(evicted)
    }

    /// [`Engine::execute`] for string arguments.
    pub fn run<S: AsRef<[u8]>>(&self, session: &mut Session, argv: &[S]) -> Reply {
        let argv: Vec<Bytes> = argv.iter().map(|a| Bytes::copy_from_slice(a.as_ref())).collect();
        self.execute(session, &argv)
    }

    /// Flags every WATCH on a key that exists now, in any database, as Redis 7.0's FLUSHALL
    /// does before it empties them. For a server that empties the store itself: call it
    /// under the exclusive keyspace lock ([`Engine::locks`]), before deleting.
    pub fn touch_all_watched(&self) {
        let now = self.shared.clock.now_ms();
        self.watches.notify_where(|db, key| self.live(db, key, now));
    }

    /// Forgets the key counts ([`Engine::key_count`]): they are counted again at their next
    /// use. For a server that changes the store behind the engine (empties it, loads it):
    /// call it under the exclusive keyspace lock, before the change.
    pub fn forget_key_counts(&self) {
        if let Some(counts) = &self.shared.counts {
            counts.forget();
        }
    }

    /// Runs one command for `session` (argv as in [`Db::execute`]), with Redis 7.0's
    /// MULTI/EXEC/DISCARD/WATCH/UNWATCH semantics and errors, and `COMMAND` from the table.
    /// Afterwards [`Session::touched`] lists the keys it modified and [`Session::events`] its
    /// keyspace events; keys it found expired have been deleted.
    ///
    /// A blocking command that cannot be served now leaves a [`super::Block`] in the session
    /// ([`Session::take_block`]) and its reply is not an answer (see [`super::Block`]).
    pub fn execute(&self, session: &mut Session, argv: &[Bytes]) -> Reply {
        self.execute_as(session, resolve(argv), argv, false)
    }

    /// [`Engine::execute`] for a command whose row the caller found already with
    /// [`table::find`] (the command's or subcommand's, or the container's
    /// when the subcommand is unknown): the name is not looked up again.
    pub fn execute_row(&self, session: &mut Session, info: &'static CommandInfo, argv: &[Bytes]) -> Reply {
        self.execute_as(session, super::check_row(info, argv), argv, false)
    }

    /// [`Engine::execute_row`] for a row [`super::check_row`] accepted for `argv` already (a
    /// server checks a command's arity before its ACL and other refusals, as Redis does):
    /// not checked again.
    pub fn execute_checked(
        &self,
        session: &mut Session,
        info: &'static CommandInfo,
        argv: &[Bytes],
    ) -> Reply {
        debug_assert!(super::check_row(info, argv).is_ok(), "{} was not checked", info.name);
        self.execute_as(session, Ok(info), argv, false)
    }

    /// Re-runs a parked client's blocking command (the same argv, the same session) after a
    /// key it waits on was touched. As [`Engine::execute`], except that a waited-on key now
    /// holding another type is skipped instead of answering WRONGTYPE (Redis 7.0 leaves the
    /// client blocked then). A new [`Session::take_block`] means: still blocked, keep the
    /// first deadline. The argv must be the one that blocked.
    pub fn retry(&self, session: &mut Session, argv: &[Bytes]) -> Reply {
        self.execute_as(session, resolve(argv), argv, true)
    }

    fn execute_as(
        &self,
        session: &mut Session,
        resolved: Result<&'static CommandInfo, Reply>,
        argv: &[Bytes],
        retry: bool,
    ) -> Reply {
        let time_ms = std::mem::take(&mut session.time_ms);
        session.clear_results();
        let info = match resolved {
            Ok(info) => info,
            Err(reply) => {
                session.flag_transaction();
                return reply;
            }
        };
        let action = action(info);
        if let Some(multi) = &mut session.multi
            && !matches!(action, Action::Exec | Action::Discard | Action::Multi | Action::Watch)
        {
            multi.queue.push((info, argv.to_vec()));
            return Reply::status("QUEUED");
        }
        match action {
            Action::Multi if session.multi.is_some() => {
                Reply::Error("ERR MULTI calls can not be nested".into())
            }
            Action::Multi => {
                session.multi = Some(Multi::default());
                Reply::OK
            }
            Action::Exec => self.exec(session),
            Action::Discard => match session.multi.take() {
                None => Reply::Error("ERR DISCARD without MULTI".into()),
                Some(_) => {
                    self.unwatch(session);
                    Reply::OK
                }
            },
            Action::Watch if session.multi.is_some() => {
                Reply::Error("ERR WATCH inside MULTI is not allowed".into())
            }
            Action::Watch => self.watch(session, &argv[1..]).unwrap_or_else(|e| Reply::Error(e.to_string())),
            Action::Unwatch => {
                self.unwatch(session);
                Reply::OK
            }
            run => {
                session.time_ms = time_ms;
                self.run_locked(session, &[(info, argv)], |db, (info, argv)| {
                    db.allow_blocking();
                    if retry {
                        db.set_retrying();
                    }
                    db.execute_action(info, run, argv)
                })
            }
        }
    }

    /// Runs `commands` under their locks over a fresh [`Db`], then notifies watchers.
    fn run_locked<'s, T>(
        &'s self,
        session: &mut Session,
        commands: &[(&'static CommandInfo, T)],
        run: impl Fn(&mut Db<'s, &'s B>, &(&'static CommandInfo, T)) -> Reply,
    ) -> Reply
    where
        T: AsRef<[Bytes]>,
    {
        let guard = match commands {
            [(info, argv)] => self.lock_one(info, argv.as_ref()),
            [(_, first), ..] => {
                self.lock(commands.iter().map(|(info, argv)| (*info, argv.as_ref())), &[], first.as_ref())
            }
            [] => Ok(self.locks.lock(false, std::iter::empty())),
        };
        let guard = match guard {
            Ok(guard) => guard,
            Err(answer) => return answer,
        };
        let index = session.db;
        let mut db = self.db(session);
        if self.recording().is_some() {
            db.record_propagation();
        }
        db.give_time(std::mem::take(&mut session.time_ms));
        db.take_journal(session.journal.take());
        // The `Db` stays in place (it is large): a retry starts over with a fresh one.
        let mut retry = false;
        let reply = self.transaction(|| {
            if std::mem::replace(&mut retry, true) {
                db = self.db_over(&self.backend, index);
                db.key_slots.clone_from(&session.key_slots);
            }
            commands.iter().map(|c| run(&mut db, c)).next_back().unwrap_or(Reply::NilArray)
        });
        self.propagate(db.take_propagated());
        session.db = db.index();
        let (journal, block, swapped) = db.hand_back();
        // The session's were lent to the `Db` (or cleared): nothing to drop on the way back.
        refill(&mut session.journal, journal);
        refill(&mut session.block, block);
        session.swapped = swapped;
        // Most commands touch no key anyone listens for (none recorded) and swap nothing.
        let touched = !session.touched().is_empty();
        if touched || !session.swapped.is_empty() {
            self.notify(session.touched(), &session.swapped);
        }
        drop(guard);
        if touched {
            self.reap(session);
        }
        reply
    }

    /// Deletes the keys the last command found expired (a failure leaves them expired: the
    /// reply stands, and the sweep retries).
    fn reap(&self, session: &mut Session) {
        let expired = expired_keys(session.touched());
        if !expired.is_empty()
            && let Ok((_, true)) = self.delete_expired_keys(&expired, self.now_ms(), false)
        {
            session.add_garbage();
        }
    }

    /// Runs `attempt` between the backend's [`KvBackend::begin`] and [`KvBackend::finish`],
    /// again while the backend refuses it and its [`KvBackend::retry_pause`] allows, after
    /// that pause (which lets the competing writer finish). Returns the last attempt's result.
    fn transaction<T>(&self, mut attempt: impl FnMut() -> T) -> T {
        // The clock is read at the first refusal, not before every command: a command that
        // commits at once (nearly all) reads no clock here.
        let mut start = None;
        let mut n = 1;
        loop {
            self.backend.begin();
            let result = attempt();
            if !self.backend.finish() {
                return result;
            }
            let start = *start.get_or_insert_with(std::time::Instant::now);
            match self.backend.retry_pause(n, start.elapsed()) {
                Some(pause) => std::thread::sleep(pause),
                None => return result,
            }
            n += 1;
        }
    }

    /// The locks for one command: [`Engine::lock`]'s, told without iterators for a command
    /// with one fixed key (most commands; such a row has no derived keys).
    fn lock_one(&self, info: &'static CommandInfo, argv: &[Bytes]) -> Result<LockGuard<'_>, Reply> {
        match info.fixed_key() {
            Some(at) if !info.is_keyspace_wide() => {
                self.acquire(false, argv.get(at).map(|key| (key.as_ref(), info.is_write())), argv)
            }
            _ => self.lock(std::iter::once((info, argv)), &[], argv),
        }
    }

    /// The locks for `commands` and the `watched` keys (shared), as [`Engine::acquire`]
    /// takes them for a command with arguments `argv`.
    fn lock<'c>(
        &self,
        commands: impl Iterator<Item = (&'static CommandInfo, &'c [Bytes])> + Clone,
        watched: &'c [Watched],
        argv: &[Bytes],
    ) -> Result<LockGuard<'_>, Reply> {
        let several = commands.clone().nth(1).is_some();
        let whole = commands.clone().any(|(info, argv)| {
            (info.is_keyspace_wide() && (several || info.is_write())) || info.reads_derived_keys(argv)
        });
        let keys = commands.flat_map(|(info, argv)| {
            let (fixed, refs) = match info.fixed_key() {
                Some(i) => (argv.get(i), Vec::new()),
                None => (None, table::key_refs(info, argv).unwrap_or_default()),
            };
            let refs = refs.into_iter().map(move |(i, _)| &argv[i]);
            fixed.into_iter().chain(refs).map(move |key| (key.as_ref(), info.is_write()))
        });
        let watched = watched.iter().map(|w| (w.key.as_ref(), false));
        self.acquire(whole, keys.chain(watched), argv)
    }

    fn exec(&self, session: &mut Session) -> Reply {
        let Some(multi) = session.multi.take() else {
            return Reply::Error("ERR EXEC without MULTI".into());
        };
        if multi.failed {
            self.unwatch(session);
            return Reply::Error("EXECABORT Transaction discarded because of previous errors.".into());
        }
        let watched = std::mem::take(&mut session.watched);
        let queue = &multi.queue;
        let exec = [Bytes::from_static(b"EXEC")];
        let guard = self.lock(queue.iter().map(|(info, argv)| (*info, argv.as_slice())), &watched, &exec);
        session.watched = watched;
        let guard = match guard {
            Ok(guard) => guard,
            Err(answer) => {
                // Refused before running: the transaction ends, as Redis' execCommandAbort.
                self.unwatch(session);
                return exec_abort(answer);
            }
        };
        let aborted = session.dirty.load(Ordering::SeqCst) || self.watched_expired(session);
        let stamps: Vec<(Vec<u8>, u64)> = session
            .watched
            .iter()
            .filter_map(|w| Some((self.metadata_key(w.db, &w.key), w.stamp?)))
            .collect();
        self.unwatch(session);
        if aborted {
            return Reply::NilArray;
        }
        // SWAPDBs apply at once, outside the batch: an attempt that is refused or fails
        // undoes its own before the next attempt (or the error) is answered.
        let undo = |swapped: Vec<(usize, usize)>| {
            for &(a, b) in swapped.iter().rev() {
                self.shared.swap(a, b);
            }
        };
        let mut applied: Vec<(usize, usize)> = Vec::new();
        let attempt = || {
            undo(std::mem::take(&mut applied));
            // Written by another process since WATCH? (Inside the transaction, so a write
            // after this check refuses the commit and the next attempt sees it.)
            for (key, stamp) in &stamps {
                if self.backend.stamp(ColumnFamily::Metadata, key)? != Some(*stamp) {
                    return Ok(None);
                }
            }
            let overlay = Overlay::new(&self.backend);
            let mut db = self.db_over(&overlay, session.db);
            db.defer_counts();
            let replies = queue
                .iter()
                .map(|(info, argv)| match action(info) {
                    Action::Unwatch => Reply::OK,
                    run => db.execute_action(info, run, argv),
                })
                .collect();
            let index = db.index();
            let touched = db.take_touched();
            let events = db.take_events();
            let effects = db.take_effects();
            applied = db.take_swapped();
            let counted = db.take_counted();
            let propagated = db.take_propagated();
            drop(db);
            let written = self.commit(overlay, &counted);
            if written.is_err() {
                undo(std::mem::take(&mut applied));
            }
            written.map(|()| Some((replies, index, touched, (events, effects, propagated), applied.clone())))
        };
        let (replies, index, touched, (events, effects, propagated), swapped) =
            match self.transaction(attempt) {
                Ok(Some(done)) => done,
                Ok(None) => return Reply::NilArray,
                Err(e) => return Reply::Error(CommandError::from(e).to_string()),
            };
        session.db = index;
        self.propagate(propagated);
        self.notify(&touched, &swapped);
        session.set_results(touched, events, effects, swapped);
        drop(guard);
        self.reap(session);
        Reply::Array(replies)
    }

    /// Writes what `overlay` gathered as one batch, or nothing when one of its reads
    /// failed (a command may then be half-done); then applies its count changes `counted`.
    fn commit(
        &self,
        overlay: Overlay<'_, B>,
        counted: &[(usize, super::counts::Delta)],
    ) -> crate::Result<()> {
        match overlay.failure() {
            Some(e) => Err(e),
            None => {
                let batch = overlay.into_batch();
                if batch.is_empty() {
                    return Ok(());
                }
                let counts = self.shared.counts.as_ref().filter(|_| !counted.is_empty());
                let _gate = counts.map(super::counts::KeyCounts::write_gate);
                self.backend.write(batch)?;
                counts.inspect(|c| c.apply(counted));
                Ok(())
            }
        }
    }

    /// Runs `body` as one atomic unit, as Redis runs a script: alone (no other command of
    /// this engine runs meanwhile); each command `body` runs through its argument (an argv,
    /// answered as [`Db::execute`] answers it) sees the writes of the commands before it;
    /// and all their writes are committed as one batch when `body` returns, also when it
    /// ends in an error after writing, as Redis keeps what a failed script wrote. The
    /// commands start in `session`'s database, and a SELECT among them changes only theirs.
    /// Blocking commands answer at once, as in EXEC. A store that refuses the commit (a
    /// conflict over etcd) runs `body` again from the start, so `body` must do nothing but
    /// run commands and compute. Afterwards [`Session::touched`] and [`Session::events`]
    /// describe all of the commands' effects.
    ///
    /// # Errors
    /// The store's error, as an error reply, when the commands' reads or their batch failed:
    /// then nothing was written.
    pub fn atomically<R>(
        &self,
        session: &mut Session,
        mut body: impl FnMut(&mut dyn FnMut(&[Bytes]) -> Reply) -> R,
    ) -> Result<R, Reply> {
        let run = self.atomically_or_abandon(session, |call| {
            Ok::<R, std::convert::Infallible>(body(&mut |argv: &[Bytes]| match resolve(argv) {
                // `call` takes a server's row as one its caller ran: here no one ran it.
                Ok(info) if info.family == table::Family::Server => needs_session(info),
                Ok(info) => call(info, argv),
                Err(reply) => reply,
            }))
        })?;
        Ok(run.unwrap_or_else(|never| match never {}))
    }

    /// [`Engine::atomically`], except that `body` may abandon its run: when it answers
    /// `Err`, nothing its commands wrote is committed (a SWAPDB among them is undone), no
    /// one hears of them, and the `Err` comes back as `Ok(Err(..))`; and that `body` runs
    /// each command with the row [`table::find`] gave for it (the command's or subcommand's,
    /// or the container's when the subcommand is unknown), which is not looked up again.
    /// A row of the server's own ([`table::Family::Server`]: a PUBLISH the server ran for
    /// the body) is not run: it takes its place in the replication stream, answered `OK`.
    ///
    /// # Errors
    /// As [`Engine::atomically`].
    pub fn atomically_or_abandon<R, A>(
        &self,
        session: &mut Session,
        mut body: impl FnMut(&mut dyn FnMut(&'static CommandInfo, &[Bytes]) -> Reply) -> Result<R, A>,
    ) -> Result<Result<R, A>, Reply> {
        session.clear_results();
        let guard = self.locks.lock(true, std::iter::empty());
        let undo = |swapped: Vec<(usize, usize)>| {
            for &(a, b) in swapped.iter().rev() {
                self.shared.swap(a, b);
            }
        };
        let mut applied: Vec<(usize, usize)> = Vec::new();
        let start_db = session.db;
        let attempt = || {
            undo(std::mem::take(&mut applied));
            let overlay = Overlay::new(&self.backend);
            let mut db = self.db_over(&overlay, start_db);
            db.defer_counts();
            let result = match body(&mut |info, argv: &[Bytes]| {
                // A row the server answers (a script's PUBLISH) ran in the server: only its
                // place in the replication stream is the engine's.
                if info.family == table::Family::Server {
                    db.propagate_ran(argv);
                    return Reply::OK;
                }
                match super::check_row(info, argv) {
                    Ok(info) => db.execute_resolved(info, argv),
                    Err(reply) => reply,
                }
            }) {
                Ok(result) => result,
                Err(abandoned) => {
                    undo(db.take_swapped());
                    return Ok(Err(abandoned));
                }
            };
            let touched = db.take_touched();
            let events = (db.take_events(), db.take_effects());
            applied = db.take_swapped();
            let counted = db.take_counted();
            let propagated = db.take_propagated();
            drop(db);
            let written = self.commit(overlay, &counted);
            if written.is_err() {
                undo(std::mem::take(&mut applied));
            }
            written.map(|()| Ok((result, touched, events, applied.clone(), propagated)))
        };
        let run = self.transaction(attempt).map_err(|e| Reply::Error(CommandError::from(e).to_string()))?;
        let (result, touched, (events, effects), swapped, propagated) = match run {
            Ok(run) => run,
            Err(abandoned) => return Ok(Err(abandoned)),
        };
        self.propagate(propagated);
        self.notify(&touched, &swapped);
        session.set_results(touched, events, effects, swapped);
        drop(guard);
        self.reap(session);
        Ok(Ok(result))
    }

    /// WATCH: remembers each key's record and whether it is already expired.
    fn watch(&self, session: &mut Session, keys: &[Bytes]) -> Result<Reply, CommandError> {
        let layout = self.shared.layout_of(session.db)?;
        let now = self.shared.clock.now_ms();
        let db = session.db;
        // Under the keys' locks, so that a write either committed before the watch or
        // decides to record its keys after the watch counts as a listener.
        let _guard = self.locks.lock(false, keys.iter().map(|k| (k.as_ref(), false)));
        for key in keys {
            if session.watched.iter().any(|w| w.db == db && w.key == key) {
                continue;
            }
            let listening = self.shared.listeners.as_ref().map(Listeners::listen);
            let metadata_key = layout.metadata_key(key);
            let expired_at_watch = self.expired(&metadata_key, now)?;
            self.watches
                .add((db, key.clone()), Watcher { flag: Arc::downgrade(&session.dirty), expired_at_watch });
            let stamp = self.backend.stamp(ColumnFamily::Metadata, &metadata_key)?;
            session.watched.push(Watched {
                key: key.clone(),
                db,
                expired_at_watch,
                stamp,
                _listening: listening,
            });
        }
        Ok(Reply::OK)
    }

    /// Whether a watched key that was live when watched has expired since (Redis 7.0 aborts
    /// EXEC then, even if nobody touched it).
    fn watched_expired(&self, session: &Session) -> bool {
        let now = self.shared.clock.now_ms();
        session.watched.iter().any(|w| {
            !w.expired_at_watch && self.expired(&self.metadata_key(w.db, &w.key), now).unwrap_or(true)
        })
    }

    /// The metadata key of `key` in database `db` now (empty for a database without a layout).
    fn metadata_key(&self, db: usize, key: &[u8]) -> Vec<u8> {
        self.shared.layout_of(db).map(|l| l.metadata_key(key)).unwrap_or_default()
    }

    /// Whether `key` is live in database `db`.
    fn live(&self, db: usize, key: &[u8], now: u64) -> bool {
        let raw =
            super::db::metadata_record(&self.backend, &self.shared.base_layout, &self.metadata_key(db, key));
        matches!(raw, Ok(Some(raw)) if self.shared.base_layout.decode_metadata(&raw).is_ok_and(|m| m.is_live(now)))
    }

    /// Flags the watchers a command's writes and swaps concern.
    fn notify(&self, touched: &[TouchedKey], swapped: &[(usize, usize)]) {
        self.watches.notify(touched, &self.shared);
        if !swapped.is_empty() {
            let now = self.shared.clock.now_ms();
            // As Redis 7.0's `touchAllWatchedKeysInDb`: a key in either database that exists
            // in either; a watch on a key in neither stays, on its logical database.
            self.watches.notify_where(|db, key| {
                swapped
                    .iter()
                    .any(|&(a, b)| (db == a || db == b) && (self.live(a, key, now) || self.live(b, key, now)))
            });
        }
    }

    fn expired(&self, metadata_key: &[u8], now: u64) -> Result<bool, CommandError> {
        Ok(match super::db::metadata_record(&self.backend, &self.shared.base_layout, metadata_key)? {
            Some(raw) => self.shared.base_layout.decode_metadata(&raw)?.is_expired(now),
            None => false,
        })
    }

    fn unwatch(&self, session: &mut Session) {
        for w in session.watched.drain(..) {
            self.watches.remove(&(w.db, w.key), &session.dirty);
        }
        session.dirty.store(false, Ordering::SeqCst);
    }
}

/// Puts `value` in `slot`, usually empty: the old value's drop is called only when there
/// is one (an out-of-line drop of `None` costs a call on every command).
#[inline]
fn refill<T>(slot: &mut Option<T>, value: Option<T>) {
    if let Some(old) = std::mem::replace(slot, value) {
        drop(old);
    }
}

/// One session's registration on a watched key.
struct Watcher {
    flag: Weak<AtomicBool>,
    expired_at_watch: bool,
}

/// Who watches which (database, user key). Writers flag the watchers of what they touched before
/// they release their key locks, so an EXEC holding those locks sees every earlier write.
#[derive(Default)]
struct Watches {
    keys: AtomicUsize,
    map: Mutex<HashMap<(usize, Bytes), Vec<Watcher>>>,
}

impl Watches {
    fn add(&self, key: (usize, Bytes), watcher: Watcher) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(key).or_default().push(watcher);
        self.keys.store(map.len(), Ordering::SeqCst);
    }

    fn remove(&self, key: &(usize, Bytes), flag: &Arc<AtomicBool>) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(watchers) = map.get_mut(key) {
            watchers
                .retain(|w| w.flag.strong_count() > 0 && !std::ptr::eq(w.flag.as_ptr(), Arc::as_ptr(flag)));
            if watchers.is_empty() {
                map.remove(key);
            }
        }
        self.keys.store(map.len(), Ordering::SeqCst);
    }

    /// Flags the watchers of every watched (database, key) for which `concerned` holds.
    fn notify_where(&self, concerned: impl Fn(usize, &[u8]) -> bool) {
        if self.keys.load(Ordering::SeqCst) == 0 {
            return;
        }
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        for ((db, key), watchers) in map.iter() {
            if concerned(*db, key) {
                for flag in watchers.iter().filter_map(|w| w.flag.upgrade()) {
                    flag.store(true, Ordering::SeqCst);
                }
            }
        }
    }

    fn notify(&self, touched: &[TouchedKey], shared: &Shared) {
        if touched.is_empty() || self.keys.load(Ordering::SeqCst) == 0 {
            return;
        }
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        for t in touched {
            let Some(key) = shared.decode_touched(&t.metadata_key) else { continue };
            for w in map.get(&key).into_iter().flatten() {
                if !t.modified() || (t.kind == Touch::Expired && w.expired_at_watch) {
                    continue;
                }
                if let Some(flag) = w.flag.upgrade() {
                    flag.store(true, Ordering::SeqCst);
                }
            }
        }
    }
}
