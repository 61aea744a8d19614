//! Committing a batch ([`Db::commit`]): its key-count changes, the collections it leaves
//! to the collector, and the keys it touches and creates.

use std::collections::{HashMap, HashSet};
use std::sync::RwLockReadGuard;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::memo::Found;
use super::{Db, Touch, TouchedKey};
use crate::backend::{BatchOp, KvBackend, WriteBatch, WrittenMetadata};
use crate::codec::{ColumnFamily, LayoutKind};
use crate::commands::counts::{Delta, KeyCount, add_delta, counted, counted_meta};
use crate::commands::error::CommandError;
use crate::commands::reply::CommandResult;

/// What a batch changes beyond its records ([`Db::changes`]).
#[derive(Default)]
pub(super) struct Changes<'g> {
    pub(super) deltas: Vec<(usize, Delta)>,
    pub(super) garbage: bool,
    /// The key counts' gate, held from before the first read of a record of a namespace
    /// not counted yet until the deltas are applied ([`Db::write_counted`]).
    pub(super) gate: Option<RwLockReadGuard<'g, ()>>,
}

/// Whether writing `new` over `old` (each `None` for no record, `Some(None)` for one that
/// does not decode) leaves a collection's elements behind: its metadata deleted, or replaced
/// by another version's. A record that does not decode counts as a collection.
fn replaces_collection(old: Option<&Option<Found>>, new: Option<Option<WrittenMetadata>>) -> bool {
    match old {
        None => false,
        Some(None) => true,
        Some(Some(old)) if old.single_kv => false,
        Some(Some(old)) => new.is_none_or(|new| new.is_some_and(|new| new.version != old.version)),
    }
}

impl<B: KvBackend> Db<'_, B> {
    /// Marks this `Db` as writing to a transaction's overlay: see [`Db::take_counted`].
    pub(crate) fn defer_counts(&mut self) {
        self.deferred = true;
    }

    /// The count changes of the batches written since the last call, for the engine to
    /// apply ([`KeyCounts::apply`](crate::commands::counts::KeyCounts::apply)) once it has
    /// written the overlay they went to.
    pub(crate) fn take_counted(&mut self) -> Vec<(usize, Delta)> {
        std::mem::take(self.counted.get_mut())
    }

    /// The selected database's counts in O(1) (see [`crate::commands::counts`]), `None` when none
    /// are kept; the first call for a namespace counts its records. Inside a transaction (an
    /// overlay) the committed counts plus the transaction's own changes, `None` while the namespace
    /// is uncounted.
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
    pub(super) fn changes(&self, batch: &WriteBatch) -> crate::Result<Changes<'_>> {
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
        for (i, op) in batch.ops().iter().enumerate() {
            let (key, new) = match op {
                BatchOp::Put { cf: ColumnFamily::Metadata, key, value } => {
                    let decode = || {
                        let meta = base.decode_metadata(value).ok()?;
                        Some(WrittenMetadata { counted: counted_meta(&meta), version: meta.version })
                    };
                    let written = batch.written(i);
                    debug_assert!(
                        written.is_none_or(|w| Some(w) == decode()),
                        "{written:?} is not what {key:?} holds"
                    );
                    (key, Some(written.or_else(decode)))
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
                    changes.garbage |= replaces_collection(old.as_ref(), new);
                    earlier.unwrap_or_else(|| old.flatten().and_then(|found| found.counted))
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
            let new = new.flatten().and_then(|new| new.counted);
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
    pub(super) fn write_counted(
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

    /// Applies a command's writes as one atomic batch (nothing for an empty batch), and
    /// records the keys it touched: every metadata put, and every metadata delete of a
    /// record that exists ([`crate::commands::Session::touched`] after the command).
    ///
    /// # Errors
    /// Storage errors; then nothing was written or recorded.
    pub(crate) fn commit(&mut self, mut batch: WriteBatch) -> CommandResult<()> {
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
        // Settling drains the keys the last commit created: the journal's list is empty after.
        if created.is_empty() {
            journal.settle(true, &self.shared);
        } else {
            // A key whose `new` the command announced itself (before its commit) is not new again.
            let announced = |(db, key): &(usize, Bytes)| {
                journal.scratch.pending.iter().any(|e| e.name == "new" && e.db == *db && e.key == key)
            };
            let created: Vec<(usize, Bytes)> = created
                .iter()
                .filter_map(|k| self.shared.decode_touched(k))
                .filter(|k| !announced(k))
                .collect();
            journal.settle(true, &self.shared);
            journal.created = created;
        }
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
