//! [`GroupCommit`]: a round's batches held in memory and handed to the engine as one, on a
//! thread of its own.
//!
//! With [`crate::Options::group_commit`] the server persists once per round of replies. In
//! between, each command's batch is only kept here, in a map from record key to its last
//! value (or its deletion), which reads look at first; the persist then writes the whole map
//! to the engine as one atomic batch (each command's batch wholly inside it) and hands it to
//! the OS. A key written by many commands of one round (a list's metadata under LPUSH, a
//! counter under INCR) reaches the engine's memtable and journal once, and the engine's
//! per-batch work (its journal entry, locks, sequence number) is paid once per round
//! instead of once per command.
//!
//! [`DiskBackend::persist_async`] queues that work: the caller then either hands it to the
//! writer thread ([`DiskBackend::start_persist`]: it has another round to serve meanwhile)
//! or does it itself ([`DiskBackend::persist_queued`]: it has nothing else to do, and a
//! thread switch would only add a wake-up). Either way the map moves to the batch being
//! written, which reads look at after the held map and before the engine, and each queued
//! callback is called, in the order queued, once its round is persisted; only then do the
//! round's replies go out. Batches reach the engine in the order they were written: one
//! commit at a time, each taking everything held.
//!
//! Snapshots, flushes and compactions first commit what is held, and so does a scan of a
//! range holding a held record, so they read the engine alone. A round that holds more than
//! [`MAX_HELD_BYTES`] (a large MULTI, a script, a load) is committed as it goes, at a
//! batch's end: as an engine batch written without a persist, it is durable only at the
//! next persist.
//!
//! What acknowledged means is unchanged: a reply goes out only after the persist that
//! covers its batches (with `appendfsync always`, after their sync). A failed commit drops
//! what was held, as a crash would, and the engine reports it at the next persist.

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use bytes::Bytes;
use indexmap::IndexMap;
use rediskv::KeyRange;
use rediskv::{BatchOp, ColumnFamily, Direction, KvBackend, ScanIter, Snapshot, WriteBatch};
use rediskv::{Error, Result};

use crate::{DiskBackend, DroppedWrites, Persisted, Record, Usage};

/// Past this many bytes of held keys and values, a write commits what is held at once.
pub const MAX_HELD_BYTES: usize = 4 << 20;

/// The last value of each key written (`None`: deleted), per column family in
/// [`ColumnFamily::ALL`]'s order, each map in the order its keys were first written: a
/// round's pushes, pops and appends then reach [`crate::in_key_order`] in runs already in
/// key order (or in reverse), which its sort takes in one pass.
type Records = [IndexMap<Bytes, Option<Bytes>, BuildHasherDefault<KeyHasher>>; 4];

/// What a round has written and the engine does not hold yet.
#[derive(Default)]
struct Held {
    records: Records,
    /// Bytes of the keys and values in `records`.
    bytes: usize,
    /// The least and the greatest key of each column family's records, in the same order,
    /// once a scan asked ([`Held::bounded`]): a scan of a range outside them needs no look
    /// at each record. Kept up to date by the writes after that scan; `None` until then, so
    /// that a round without scans does not pay for them.
    bounds: [Option<(Vec<u8>, Vec<u8>)>; 4],
    /// The replica's stream position stamped when the last held batch was written
    /// ([`DiskBackend::stamp_writes`]): the one the engine's batch of them carries.
    stamp: Option<Vec<u8>>,
    /// The maps of the last batch written, emptied, for the next round (their room kept).
    spare: Records,
}

/// What the writer thread is asked for.
#[derive(Default)]
struct Requests {
    /// Called once everything held when they were queued is persisted.
    waiting: Vec<Persisted>,
    /// A persist has taken requests and not persisted them yet.
    busy: bool,
    /// The writer thread is asked to persist what is queued.
    started: bool,
    /// The [`GroupCommit`] is dropped: the writer answers what is queued and ends.
    stop: bool,
}

/// What the caller's threads and the writer thread share.
struct Shared<B> {
    inner: B,
    held: Mutex<Held>,
    /// Whether `held` may hold records: reads skip its lock while it is empty.
    holding: AtomicBool,
    /// The batch being committed: taken out of `held`, not yet all in the engine.
    writing: Mutex<Option<Arc<Records>>>,
    /// Whether `writing` holds a batch: reads skip its lock otherwise.
    committing: AtomicBool,
    /// Held by a commit from taking `held` until the engine holds it, so that batches
    /// reach the engine in order.
    order: Mutex<()>,
    /// The position [`DiskBackend::stamp_writes`] gave for the next batches.
    stamp: Mutex<Option<Vec<u8>>>,
    /// A reopen dropped held batches: the next persist fails, so that none of them is
    /// acknowledged.
    dropped: DroppedWrites,
    requests: Mutex<Requests>,
    /// Wakes the writer ([`DiskBackend::start_persist`]).
    wake: Condvar,
    /// Held by whoever persists queued requests, from taking them until they are called
    /// back: callbacks come in the order queued (a failure is reported before any later
    /// round's success).
    persisting: Mutex<()>,
}

/// A [`DiskBackend`] whose writes wait in memory for the next
/// [`DiskBackend::persist_written`] or [`DiskBackend::persist_async`] (see the module
/// docs). Only for a backend opened with [`crate::Options::group_commit`], whose caller
/// persists before it acknowledges.
pub struct GroupCommit<B: DiskBackend + Send + Sync + 'static> {
    shared: Arc<Shared<B>>,
    writer: Option<JoinHandle<()>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl<B: DiskBackend + Send + Sync + 'static> GroupCommit<B> {
    /// Puts `inner`'s writes behind a round's map, with a writer thread for
    /// [`DiskBackend::persist_async`].
    ///
    /// # Panics
    /// The writer thread could not be started.
    pub fn new(inner: B) -> Self {
        let shared = Arc::new(Shared {
            inner,
            held: Mutex::default(),
            holding: AtomicBool::new(false),
            writing: Mutex::default(),
            committing: AtomicBool::new(false),
            order: Mutex::default(),
            stamp: Mutex::default(),
            dropped: DroppedWrites::default(),
            requests: Mutex::default(),
            wake: Condvar::new(),
            persisting: Mutex::default(),
        });
        let writer = shared.clone();
        let writer = std::thread::Builder::new()
            .name("group-commit".into())
            .spawn(move || writer.write_rounds())
            .expect("the group commit thread starts");
        GroupCommit { shared, writer: Some(writer) }
    }

    /// The engine behind it.
    pub fn inner(&self) -> &B {
        &self.shared.inner
    }
}

impl<B: DiskBackend> Shared<B> {
    /// The writer thread: whenever started, persists what is queued.
    fn write_rounds(&self) {
        loop {
            {
                let mut requests = lock(&self.requests);
                while !requests.started && !requests.stop {
                    requests = self.wake.wait(requests).unwrap_or_else(|e| e.into_inner());
                }
                if !requests.started && requests.waiting.is_empty() {
                    return;
                }
                requests.started = false;
            }
            self.persist_queued();
        }
    }

    /// Persists what is held for the requests queued so far, then calls them back.
    fn persist_queued(&self) {
        let _one = lock(&self.persisting);
        let waiting = {
            let mut requests = lock(&self.requests);
            if requests.waiting.is_empty() {
                return;
            }
            requests.busy = true;
            std::mem::take(&mut requests.waiting)
        };
        let persisted = self.persist();
        lock(&self.requests).busy = false;
        for done in waiting {
            done(persisted.clone());
        }
    }

    /// What the round holds for `key`: `Some(None)` for a deletion, `None` when neither the
    /// round nor the batch being committed holds it.
    fn held(&self, cf: ColumnFamily, key: &[u8]) -> Option<Option<Bytes>> {
        if self.holding.load(Ordering::SeqCst)
            && let Some(value) = lock(&self.held).records[slot(cf)].get(key)
        {
            return Some(value.clone());
        }
        if !self.committing.load(Ordering::SeqCst) {
            return None;
        }
        lock(&self.writing).as_ref()?[slot(cf)].get(key).cloned()
    }

    /// Whether the round or the batch being committed holds a record of `cf` in `range`.
    fn holds_in(&self, cf: ColumnFamily, range: &KeyRange) -> bool {
        let any = |records: &Records| records[slot(cf)].keys().any(|key| range.contains(key));
        let held_in = |held: &mut Held| {
            let Some((least, greatest)) = held.bounded(cf) else { return false };
            range.end.as_deref().is_none_or(|end| least.as_slice() < end)
                && greatest.as_slice() >= range.start.as_slice()
                && any(&held.records)
        };
        (self.holding.load(Ordering::SeqCst) && held_in(&mut lock(&self.held)))
            || (self.committing.load(Ordering::SeqCst) && lock(&self.writing).as_deref().is_some_and(any))
    }

    /// Writes what is held to the engine as one batch, after the batch being committed.
    fn commit(&self) -> Result<()> {
        let _order = lock(&self.order);
        self.commit_held()
    }

    /// [`Shared::commit`] under `order`. The records stay visible in `writing` until the
    /// engine holds them (readers then find them in one or the other).
    fn commit_held(&self) -> Result<()> {
        if !self.holding.load(Ordering::SeqCst) {
            return Ok(());
        }
        let (records, stamp) = {
            let mut held = lock(&self.held);
            let spare = std::mem::take(&mut held.spare);
            let records = Arc::new(std::mem::replace(&mut held.records, spare));
            *lock(&self.writing) = Some(records.clone());
            self.committing.store(true, Ordering::SeqCst);
            self.holding.store(false, Ordering::SeqCst);
            held.bytes = 0;
            held.bounds = Default::default();
            (records, held.stamp.take())
        };
        let mut lent: Vec<Record<'_>> = Vec::with_capacity(records.iter().map(IndexMap::len).sum());
        for (cf, records) in ColumnFamily::ALL.iter().zip(records.iter()) {
            lent.extend(records.iter().map(|(key, value)| (*cf, key, value.as_ref())));
        }
        // The engine's batch carries the position of its last command, not a position
        // stamped since for a command not written yet.
        self.inner.stamp_writes(stamp);
        let written = if lent.is_empty() { Ok(()) } else { self.inner.write_records(&mut lent) };
        drop(lent);
        let taken = lock(&self.writing).take();
        self.committing.store(false, Ordering::SeqCst);
        drop(records);
        // Readers look records up under the lock and keep no reference: the maps are ours
        // again, kept for a later round.
        if let Some(mut spare) = taken.and_then(|r| Arc::try_unwrap(r).ok()) {
            spare.iter_mut().for_each(IndexMap::clear);
            lock(&self.held).spare = spare;
        }
        written
    }

    /// Commits what is held and hands every batch the engine took to the OS.
    fn persist(&self) -> Result<()> {
        let _order = lock(&self.order);
        if let Some(e) = self.dropped.take() {
            return Err(e);
        }
        self.commit_held()?;
        self.inner.persist_written()
    }
}

impl<B: DiskBackend + Send + Sync + 'static> KvBackend for GroupCommit<B> {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        match self.shared.held(cf, key) {
            Some(value) => Ok(value),
            None => self.shared.inner.get(cf, key),
        }
    }

    fn get_with(&self, cf: ColumnFamily, key: &[u8], read: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        match self.shared.held(cf, key) {
            Some(value) => {
                read(value.as_deref());
                Ok(())
            }
            None => self.shared.inner.get_with(cf, key, read),
        }
    }

    /// Reads the engine, after committing what is held when a held record lies in `range`
    /// (a list's read-ahead below the elements popped this round commits nothing).
    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        if self.shared.holds_in(cf, range) {
            self.shared.commit()?;
        }
        self.shared.inner.scan(cf, range, direction)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let shared = &*self.shared;
        let limit = shared.inner.max_key_len();
        if let Some(long) = batch.ops().iter().find(|op| op_key(op).len() > limit) {
            return Err(Error::Backend(format!(
                "a key of {} bytes is over the limit of {limit}",
                op_key(long).len()
            )));
        }
        let stamp = lock(&shared.stamp).clone();
        let full = {
            let mut held = lock(&shared.held);
            held.stamp = stamp;
            for op in batch.into_ops() {
                let (cf, key, value) = match op {
                    BatchOp::Put { cf, key, value } => (cf, key, Some(value)),
                    BatchOp::Delete { cf, key } => (cf, key, None),
                };
                held.bytes += key.len() + value.as_ref().map_or(0, Bytes::len);
                if let Some((least, greatest)) = &mut held.bounds[slot(cf)] {
                    if key.as_ref() < least.as_slice() {
                        least.clear();
                        least.extend_from_slice(&key);
                    }
                    if key.as_ref() > greatest.as_slice() {
                        greatest.clear();
                        greatest.extend_from_slice(&key);
                    }
                }
                held.records[slot(cf)].insert(key, value);
            }
            shared.holding.store(true, Ordering::SeqCst);
            held.bytes > MAX_HELD_BYTES
        };
        if full { shared.commit() } else { Ok(()) }
    }

    fn snapshot(&self) -> Result<Option<Snapshot>> {
        self.shared.commit()?;
        self.shared.inner.snapshot()
    }
}

fn op_key(op: &BatchOp) -> &Bytes {
    match op {
        BatchOp::Put { key, .. } | BatchOp::Delete { key, .. } => key,
    }
}

impl<B: DiskBackend + Send + Sync + 'static> DiskBackend for GroupCommit<B> {
    fn flush(&self) -> Result<()> {
        self.shared.commit()?;
        self.shared.inner.flush()
    }

    fn compact(&self) -> Result<()> {
        self.shared.commit()?;
        self.shared.inner.compact()
    }

    fn disk_bytes(&self, cf: ColumnFamily) -> u64 {
        self.shared.inner.disk_bytes(cf)
    }

    fn approximate_records(&self, cf: ColumnFamily) -> Option<u64> {
        self.shared.inner.approximate_records(cf)
    }

    fn usage(&self) -> Usage {
        self.shared.inner.usage()
    }

    fn memory_bytes(&self) -> u64 {
        self.shared.inner.memory_bytes()
    }

    fn max_key_len(&self) -> usize {
        self.shared.inner.max_key_len()
    }

    /// Commits what is held first: its writes then end before the load's.
    fn bulk_load(&self, on: bool) -> Result<()> {
        self.shared.commit()?;
        self.shared.inner.bulk_load(on)
    }

    fn stamp_writes(&self, position: Option<Vec<u8>>) {
        *lock(&self.shared.stamp) = position;
    }

    /// Commits what is held first (with the position its batches were stamped with).
    fn set_position(&self, position: Option<Vec<u8>>) -> Result<()> {
        let _order = lock(&self.shared.order);
        self.shared.commit_held()?;
        self.stamp_writes(position.clone());
        self.shared.inner.set_position(position)
    }

    fn position(&self) -> Result<Option<Vec<u8>>> {
        self.shared.inner.position()
    }

    fn persist_written(&self) -> Result<()> {
        self.shared.persist()
    }

    /// Queues `done`, unless nothing is held nor being persisted: then `done` comes back,
    /// for [`DiskBackend::persist_written`] on the caller's thread (a round of reads alone
    /// costs nothing more).
    fn persist_async(&self, done: Persisted) -> std::result::Result<(), Persisted> {
        let shared = &*self.shared;
        let mut requests = lock(&shared.requests);
        if !shared.holding.load(Ordering::SeqCst) && !requests.busy && requests.waiting.is_empty() {
            return Err(done);
        }
        requests.waiting.push(done);
        Ok(())
    }

    fn start_persist(&self) {
        lock(&self.shared.requests).started = true;
        self.shared.wake.notify_one();
    }

    fn persist_queued(&self) {
        self.shared.persist_queued();
    }

    /// Drops what the round held (no persist took it: the next persist fails), then reopens
    /// the engine.
    fn reopen(&self) -> Result<()> {
        let shared = &*self.shared;
        let _order = lock(&shared.order);
        let mut held = lock(&shared.held);
        if shared.holding.swap(false, Ordering::SeqCst) {
            shared.dropped.dropped();
        }
        held.clear();
        drop(held);
        shared.inner.reopen()
    }
}

impl<B: DiskBackend + Send + Sync + 'static> Drop for GroupCommit<B> {
    /// Answers what waits for the writer and hands what is held to the engine, which keeps
    /// it on a clean close as it keeps the batches it took that no persist covered.
    fn drop(&mut self) {
        {
            let mut requests = lock(&self.shared.requests);
            requests.stop = true;
            requests.started = true;
        }
        self.shared.wake.notify_one();
        // (Dropped by the writer itself, from a callback holding the last reference, it
        // ends on its own after that callback.)
        if let Some(writer) = self.writer.take().filter(|w| w.thread().id() != std::thread::current().id()) {
            let _ = writer.join();
        }
        let _ = self.shared.commit();
    }
}

/// A hash of record keys for [`Held`]: eight bytes at a time, multiply and rotate. SipHash,
/// the standard map's, costs several times more on the long keys of subkeys; what keys
/// chosen to collide could cost is bounded by the round's [`MAX_HELD_BYTES`].
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
            self.0 = (self.0 ^ word).wrapping_mul(K).rotate_left(29);
        }
        for byte in chunks.remainder() {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(K).rotate_left(29);
        }
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

impl Held {
    fn clear(&mut self) {
        self.records.iter_mut().for_each(IndexMap::clear);
        self.bounds = Default::default();
        self.bytes = 0;
    }

    /// The least and the greatest key held in `cf` (`None` when it holds none), found once
    /// and then kept up to date by the writes ([`Held::bounds`]).
    fn bounded(&mut self, cf: ColumnFamily) -> Option<&(Vec<u8>, Vec<u8>)> {
        let records = &self.records[slot(cf)];
        if records.is_empty() {
            return None;
        }
        let bounds = &mut self.bounds[slot(cf)];
        if bounds.is_none() {
            let least = records.keys().min()?.to_vec();
            let greatest = records.keys().max()?.to_vec();
            *bounds = Some((least, greatest));
        }
        bounds.as_ref()
    }
}

/// `cf`'s place in [`ColumnFamily::ALL`].
fn slot(cf: ColumnFamily) -> usize {
    ColumnFamily::ALL.iter().position(|c| *c == cf).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};

    use rediskv::MemoryBackend;

    use super::*;

    /// An engine whose persists each wait for the test's verdict, after saying they began.
    struct Gated {
        memory: MemoryBackend,
        began: Mutex<Sender<()>>,
        verdicts: Mutex<Receiver<Result<()>>>,
    }

    impl KvBackend for Gated {
        fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
            self.memory.get(cf, key)
        }

        fn scan<'a>(
            &'a self,
            cf: ColumnFamily,
            range: &KeyRange,
            direction: Direction,
        ) -> Result<ScanIter<'a>> {
            self.memory.scan(cf, range, direction)
        }

        fn write(&self, batch: WriteBatch) -> Result<()> {
            self.memory.write(batch)
        }
    }

    impl DiskBackend for Gated {
        fn flush(&self) -> Result<()> {
            Ok(())
        }

        fn compact(&self) -> Result<()> {
            Ok(())
        }

        fn disk_bytes(&self, _cf: ColumnFamily) -> u64 {
            0
        }

        fn persist_written(&self) -> Result<()> {
            lock(&self.began).send(()).expect("the test listens");
            lock(&self.verdicts).recv().expect("a verdict")
        }
    }

    /// A held engine, the end that says when its persists began, the end that decides
    /// them, and a queue of the persists' callbacks' results, tagged.
    #[allow(clippy::type_complexity)]
    fn gated() -> (
        GroupCommit<Gated>,
        Receiver<()>,
        Sender<Result<()>>,
        Sender<(u8, Result<()>)>,
        Receiver<(u8, Result<()>)>,
    ) {
        let (began_tx, began) = channel();
        let (verdict, verdicts) = channel();
        let (done_tx, done) = channel();
        let engine = Gated {
            memory: MemoryBackend::new(),
            began: Mutex::new(began_tx),
            verdicts: Mutex::new(verdicts),
        };
        (GroupCommit::new(engine), began, verdict, done_tx, done)
    }

    fn put(backend: &dyn KvBackend, value: &'static [u8]) {
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Subkey, Bytes::from_static(b"k"), Bytes::from_static(value));
        backend.write(batch).expect("write");
    }

    fn read(backend: &dyn KvBackend) -> Option<Bytes> {
        backend.get(ColumnFamily::Subkey, b"k").expect("get")
    }

    fn queue(held: &GroupCommit<Gated>, done: &Sender<(u8, Result<()>)>, tag: u8) {
        let done = done.clone();
        let callback: Persisted = Box::new(move |persisted| done.send((tag, persisted)).expect("send"));
        assert!(held.persist_async(callback).is_ok(), "round {tag} is queued");
    }

    /// A scan commits what is held only when a held record lies in its range, also after
    /// writes extended the held keys past the ones an earlier scan saw.
    #[test]
    fn a_scan_commits_only_for_a_held_record_in_its_range() {
        let (held, ..) = gated();
        let write = |key: &'static [u8]| {
            let mut batch = WriteBatch::new();
            batch.put(ColumnFamily::Subkey, Bytes::from_static(key), Bytes::from_static(b"v"));
            held.write(batch).expect("write");
        };
        let scan = |start: &[u8], end: Option<&[u8]>| {
            let range = KeyRange { start: start.to_vec(), end: end.map(<[u8]>::to_vec) };
            held.scan(ColumnFamily::Subkey, &range, Direction::Forward).expect("scan").count()
        };
        let in_engine = |key: &[u8]| held.inner().get(ColumnFamily::Subkey, key).expect("get").is_some();
        write(b"m");
        assert_eq!(scan(b"a", Some(b"c")), 0);
        assert!(!in_engine(b"m"), "nothing held in the range: nothing committed");
        write(b"b");
        write(b"n");
        assert_eq!(scan(b"o", None), 0);
        assert!(!in_engine(b"b"), "past the greatest key held");
        assert_eq!(scan(b"a", Some(b"c")), 1, "the record written after the first scan");
        assert!(in_engine(b"b") && in_engine(b"m") && in_engine(b"n"), "the round is committed whole");
        write(b"x");
        assert_eq!(scan(b"y", None), 0);
        assert_eq!(scan(b"a", Some(b"x")), 3);
        assert!(!in_engine(b"x"), "the next round's bounds start over");
        assert_eq!(scan(b"w", None), 1);
        assert!(in_engine(b"x"));
    }

    #[test]
    fn a_round_is_called_back_only_after_the_engine_persisted_it() {
        let (held, began, verdict, done_tx, done) = gated();
        put(&held, b"1");
        queue(&held, &done_tx, 1);
        held.start_persist();
        began.recv().expect("the writer thread persists");
        // The engine holds the round (its batch is written before the persist) and has not
        // persisted it: no callback yet, and the loop's reads and writes go on.
        assert_eq!(read(held.inner()).as_deref(), Some(&b"1"[..]));
        assert_eq!(done.try_recv().err(), Some(TryRecvError::Empty), "called back before persisted");
        put(&held, b"2");
        assert_eq!(read(&held).as_deref(), Some(&b"2"[..]), "a later write reads back over the round");
        assert_eq!(read(held.inner()).as_deref(), Some(&b"1"[..]), "and waits for its own round");
        verdict.send(Ok(())).expect("verdict");
        assert_eq!(done.recv().expect("called back"), (1, Ok(())));

        // The next round, persisted on the caller's thread: called back there.
        queue(&held, &done_tx, 2);
        verdict.send(Ok(())).expect("verdict");
        held.persist_queued();
        assert_eq!(done.try_recv().expect("called back on this thread"), (2, Ok(())));
        assert_eq!(read(held.inner()).as_deref(), Some(&b"2"[..]));
        assert!(held.persist_async(Box::new(|_| panic!("nothing to wait for"))).is_err());
    }

    #[test]
    fn a_failed_persist_fails_every_round_it_covered_and_no_later_one() {
        let (held, began, verdict, done_tx, done) = gated();
        put(&held, b"1");
        queue(&held, &done_tx, 1);
        put(&held, b"2");
        queue(&held, &done_tx, 2);
        held.start_persist();
        began.recv().expect("the writer thread persists");
        // Queued while the writer persists rounds 1 and 2: a persist of its own.
        put(&held, b"3");
        queue(&held, &done_tx, 3);
        let failure = Error::Backend("no space left on device".into());
        verdict.send(Err(failure.clone())).expect("verdict");
        assert_eq!(done.recv().expect("called back"), (1, Err(failure.clone())));
        assert_eq!(done.recv().expect("called back"), (2, Err(failure)));
        held.start_persist();
        began.recv().expect("the writer thread persists again");
        verdict.send(Ok(())).expect("verdict");
        assert_eq!(done.recv().expect("called back"), (3, Ok(())));
    }
}
