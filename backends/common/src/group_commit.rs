//! [`GroupCommit`]: a round's batches held in memory and handed to the engine as one.
//!
//! With [`crate::Options::group_commit`] the server calls [`DiskBackend::persist_written`]
//! once per round of replies. In between, each command's batch is only kept here, in a map
//! from record key to its last value (or its deletion), which reads look at first; the
//! persist then writes the whole map to the engine as one atomic batch (each command's batch
//! wholly inside it) and hands it to the OS. A key written by many commands of one round (a
//! list's metadata under LPUSH, a counter under INCR) reaches the engine's memtable and
//! journal once, and the engine's per-batch work (its journal entry, locks, sequence
//! number) is paid once per round instead of once per command.
//!
//! Snapshots, flushes and compactions first commit what is held, and so does a scan of a
//! range holding a held record, so they read the engine alone. A round that holds more than [`MAX_HELD_BYTES`] (a large MULTI, a script, a
//! load) is committed as it goes, at a batch's end: as an engine batch written without
//! [`DiskBackend::persist_written`], it is durable only at the next persist.
//!
//! What acknowledged means is unchanged: a reply goes out only after the persist that
//! covers its batches (with `appendfsync always`, after their sync). A failed commit drops
//! what was held, as a crash would, and the engine reports it at the next persist.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use rediskv::backend::{BatchOp, ColumnFamily, Direction, KvBackend, ScanIter, Snapshot, WriteBatch};
use rediskv::codec::KeyRange;
use rediskv::{Error, Result};

use crate::{DiskBackend, DroppedWrites, Usage};

/// Past this many bytes of held keys and values, a write commits what is held at once.
pub const MAX_HELD_BYTES: usize = 4 << 20;

/// What a round has written and the engine does not hold yet.
#[derive(Default)]
struct Held {
    /// The last value of each key written (`None`: deleted), per column family in
    /// [`ColumnFamily::ALL`]'s order.
    records: [HashMap<Bytes, Option<Bytes>, BuildHasherDefault<KeyHasher>>; 4],
    /// Bytes of the keys and values in `records`.
    bytes: usize,
    /// The replica's stream position stamped when the last held batch was written
    /// ([`DiskBackend::stamp_writes`]): the one the engine's batch of them carries.
    stamp: Option<Vec<u8>>,
    /// The batch a commit hands to the engine, kept with its room between rounds.
    ops: Vec<BatchOp>,
}

/// A [`DiskBackend`] whose writes wait in memory for the next
/// [`DiskBackend::persist_written`] (see the module docs). Only for a backend opened with
/// [`crate::Options::group_commit`], whose caller persists before it acknowledges.
pub struct GroupCommit<B: DiskBackend> {
    inner: B,
    held: Mutex<Held>,
    /// Whether `held` may hold records: reads skip its lock while it is empty.
    holding: AtomicBool,
    /// The position [`DiskBackend::stamp_writes`] gave for the next batches.
    stamp: Mutex<Option<Vec<u8>>>,
    /// A reopen dropped held batches: the next persist fails, so that none of them is
    /// acknowledged.
    dropped: DroppedWrites,
}

impl<B: DiskBackend> GroupCommit<B> {
    /// Puts `inner`'s writes behind a round's map.
    pub fn new(inner: B) -> Self {
        GroupCommit {
            inner,
            held: Mutex::default(),
            holding: AtomicBool::new(false),
            stamp: Mutex::default(),
            dropped: DroppedWrites::default(),
        }
    }

    /// The engine behind it.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the round holds for `key`: `Some(None)` for a deletion, `None` when it holds
    /// nothing of it.
    fn held(&self, cf: ColumnFamily, key: &[u8]) -> Option<Option<Bytes>> {
        if !self.holding.load(Ordering::Acquire) {
            return None;
        }
        self.lock().records[slot(cf)].get(key).cloned()
    }

    /// Whether the round holds a record of `cf` in `range`.
    fn holds_in(&self, cf: ColumnFamily, range: &KeyRange) -> bool {
        self.holding.load(Ordering::Acquire)
            && self.lock().records[slot(cf)].keys().any(|key| range.contains(key))
    }

    /// Writes what is held to the engine as one batch. The records stay visible here until
    /// the engine holds them (readers then find them in one or the other).
    fn commit(&self) -> Result<()> {
        if !self.holding.load(Ordering::Acquire) {
            return Ok(());
        }
        // Readers wait on the lock until the engine holds the records taken out here.
        let mut held = self.lock();
        let Held { records, ops, stamp, .. } = &mut *held;
        for (cf, records) in ColumnFamily::ALL.iter().zip(records.iter_mut()) {
            ops.extend(records.drain().map(|(key, value)| match value {
                Some(value) => BatchOp::Put { cf: *cf, key, value },
                None => BatchOp::Delete { cf: *cf, key },
            }));
        }
        // The engine's batch carries the position of its last command, not a position
        // stamped since for a command not written yet.
        self.inner.stamp_writes(stamp.clone());
        let written = if ops.is_empty() { Ok(()) } else { self.inner.write_ops(ops) };
        held.clear();
        self.holding.store(false, Ordering::Release);
        written
    }
}

impl<B: DiskBackend> KvBackend for GroupCommit<B> {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        match self.held(cf, key) {
            Some(value) => Ok(value),
            None => self.inner.get(cf, key),
        }
    }

    fn get_with(&self, cf: ColumnFamily, key: &[u8], read: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        match self.held(cf, key) {
            Some(value) => {
                read(value.as_deref());
                Ok(())
            }
            None => self.inner.get_with(cf, key, read),
        }
    }

    /// Reads the engine, after committing what is held when a held record lies in `range`
    /// (a list's read-ahead below the elements popped this round commits nothing).
    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        if self.holds_in(cf, range) {
            self.commit()?;
        }
        self.inner.scan(cf, range, direction)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let limit = self.inner.max_key_len();
        if let Some(long) = batch.ops().iter().find(|op| op_key(op).len() > limit) {
            return Err(Error::Backend(format!(
                "a key of {} bytes is over the limit of {limit}",
                op_key(long).len()
            )));
        }
        let stamp = self.stamp.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let full = {
            let mut held = self.lock();
            held.stamp = stamp;
            for op in batch.into_ops() {
                let (cf, key, value) = match op {
                    BatchOp::Put { cf, key, value } => (cf, key, Some(value)),
                    BatchOp::Delete { cf, key } => (cf, key, None),
                };
                held.bytes += key.len() + value.as_ref().map_or(0, Bytes::len);
                held.records[slot(cf)].insert(key, value);
            }
            self.holding.store(true, Ordering::Release);
            held.bytes > MAX_HELD_BYTES
        };
        if full { self.commit() } else { Ok(()) }
    }

    fn snapshot(&self) -> Result<Option<Snapshot>> {
        self.commit()?;
        self.inner.snapshot()
    }
}

fn op_key(op: &BatchOp) -> &Bytes {
    match op {
        BatchOp::Put { key, .. } | BatchOp::Delete { key, .. } => key,
    }
}

impl<B: DiskBackend> DiskBackend for GroupCommit<B> {
    fn flush(&self) -> Result<()> {
        self.commit()?;
        self.inner.flush()
    }

    fn compact(&self) -> Result<()> {
        self.commit()?;
        self.inner.compact()
    }

    fn disk_bytes(&self, cf: ColumnFamily) -> u64 {
        self.inner.disk_bytes(cf)
    }

    fn approximate_records(&self, cf: ColumnFamily) -> Option<u64> {
        self.inner.approximate_records(cf)
    }

    fn usage(&self) -> Usage {
        self.inner.usage()
    }

    fn memory_bytes(&self) -> u64 {
        self.inner.memory_bytes()
    }

    fn max_key_len(&self) -> usize {
        self.inner.max_key_len()
    }

    /// Commits what is held first: its writes then end before the load's.
    fn bulk_load(&self, on: bool) -> Result<()> {
        self.commit()?;
        self.inner.bulk_load(on)
    }

    fn stamp_writes(&self, position: Option<Vec<u8>>) {
        *self.stamp.lock().unwrap_or_else(|e| e.into_inner()) = position;
    }

    /// Commits what is held first (with the position its batches were stamped with).
    fn set_position(&self, position: Option<Vec<u8>>) -> Result<()> {
        self.commit()?;
        self.stamp_writes(position.clone());
        self.inner.set_position(position)
    }

    fn position(&self) -> Result<Option<Vec<u8>>> {
        self.inner.position()
    }

    fn persist_written(&self) -> Result<()> {
        if let Some(e) = self.dropped.take() {
            return Err(e);
        }
        self.commit()?;
        self.inner.persist_written()
    }

    /// Drops what the round held (no persist took it: the next persist fails), then reopens
    /// the engine.
    fn reopen(&self) -> Result<()> {
        let mut held = self.lock();
        if self.holding.swap(false, Ordering::AcqRel) {
            self.dropped.dropped();
        }
        held.clear();
        drop(held);
        self.inner.reopen()
    }
}

impl<B: DiskBackend> Drop for GroupCommit<B> {
    /// Hands what is held to the engine, which keeps it on a clean close as it keeps the
    /// batches it took that no persist covered.
    fn drop(&mut self) {
        let _ = self.commit();
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
        self.records.iter_mut().for_each(|records| records.clear());
        self.ops.clear();
        self.bytes = 0;
    }
}

/// `cf`'s place in [`ColumnFamily::ALL`].
fn slot(cf: ColumnFamily) -> usize {
    ColumnFamily::ALL.iter().position(|c| *c == cf).unwrap_or(0)
}
