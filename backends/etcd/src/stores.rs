//! One store over several etcd clusters (several Raft groups), for a Redis Cluster of server
//! nodes: each cluster slot's records live in one of them, so the store's write capacity
//! grows with the number of clusters.
//!
//! The map is fixed: of `n` clusters, cluster `i` holds the slots `s` with
//! `s * n / 16384 == i` (contiguous ranges: 0–8191 and 8192–16383 for two). A record's slot
//! is its user key's, read from the record key by the layout (Kvrocks' layout names the
//! user key in every record; the others are refused); a key that does not decode goes to
//! the first cluster.
//!
//! In cluster mode every key of a command is in one slot, so a command's reads and its one
//! batch go to one cluster, committed as one `Txn` with its read set's compares, as over a
//! single cluster. What spans clusters:
//!
//! - scans that are not within one key's records (SCAN, KEYS, DBSIZE, the expiry sweep and
//!   the collector) read every cluster and merge the pages in key order; each cluster is
//!   read at its own revision;
//! - a batch whose records are in several clusters (FLUSHALL, FLUSHDB, a collector's or
//!   expiry step over keys of several slots) is split: one `Txn` per cluster, in cluster
//!   order, each atomic and guarded by the reads made in its cluster, not all-or-nothing
//!   together. A command refused by one cluster's compare runs again; those that span
//!   clusters are deletions, which apply the same when run again.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rediskv::Result;
use rediskv::{BatchOp, ColumnFamily, Direction, KvBackend, KvPair, ScanIter, WriteBatch};
use rediskv::{KeyLayout, KeyRange, LayoutKind, SLOT_COUNT, key_slot};

use crate::Backend;

/// The cluster of `count` holding `slot`.
pub fn slot_store(slot: u16, count: usize) -> usize {
    usize::from(slot) * count / usize::from(SLOT_COUNT)
}

/// Several etcd clusters as one [`KvBackend`], each holding a contiguous range of slots.
pub struct SlotStores {
    stores: Vec<Arc<Backend>>,
    layout: KeyLayout,
}

impl SlotStores {
    /// The store over `stores`, in slot order, whose records are laid out by `layout`.
    ///
    /// # Errors
    /// [`rediskv::Error::Backend`] for no store, or a layout other than Kvrocks' (whose
    /// records all name their user key).
    pub fn new(stores: Vec<Arc<Backend>>, layout: KeyLayout) -> Result<Self> {
        if stores.is_empty() {
            return Err(crate::err("a store over etcd clusters needs at least one"));
        }
        if layout.kind() != LayoutKind::Kvrocks {
            return Err(crate::err(format!(
                "the {} layout cannot spread its records over several etcd clusters (Kvrocks' can)",
                layout.kind().name()
            )));
        }
        Ok(SlotStores { stores, layout })
    }

    /// The clusters, in slot order.
    pub fn stores(&self) -> &[Arc<Backend>] {
        &self.stores
    }

    /// The cluster holding `slot`.
    pub fn store_of_slot(&self, slot: u16) -> &Arc<Backend> {
        &self.stores[slot_store(slot, self.stores.len())]
    }

    /// The index of the cluster holding record `key` of `cf`.
    fn index(&self, cf: ColumnFamily, key: &[u8]) -> usize {
        let user_key = match cf {
            ColumnFamily::Metadata => self.layout.decode_metadata_key(key).ok().map(|k| k.user_key),
            ColumnFamily::Score => self.layout.split_score_key(key).ok().map(|(k, _)| k.owner.user_key),
            ColumnFamily::Subkey | ColumnFamily::Stream => {
                self.layout.decode_subkey(key).ok().map(|k| k.user_key)
            }
        };
        user_key.map_or(0, |k| slot_store(key_slot(k), self.stores.len()))
    }

    fn store(&self, cf: ColumnFamily, key: &[u8]) -> &Arc<Backend> {
        &self.stores[self.index(cf, key)]
    }

    /// The one cluster every record of `range` is in, when the range lies within one key's
    /// records (a collection's subkeys or scores); `None` when it may span clusters.
    fn range_store(&self, cf: ColumnFamily, range: &KeyRange) -> Option<&Arc<Backend>> {
        if cf == ColumnFamily::Metadata {
            return None;
        }
        let owner_end = match cf {
            ColumnFamily::Score => {
                let (k, _) = self.layout.split_score_key(&range.start).ok()?;
                offset_after(&range.start, k.owner.user_key)?
            }
            _ => offset_after(&range.start, self.layout.decode_subkey(&range.start).ok()?.user_key)?,
        };
        // Every key from the start up to the end shares the start's bytes up to its user key.
        let owner = &range.start[..owner_end];
        let within = range.end.as_deref().is_some_and(|end| {
            end.starts_with(owner) || rediskv::prefix_successor(owner).is_some_and(|s| *end <= *s)
        });
        within.then(|| self.store(cf, &range.start))
    }
}

/// Where `part` (a slice of `whole`) ends in `whole`.
fn offset_after(whole: &[u8], part: &[u8]) -> Option<usize> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start + part.len();
    (end <= whole.len()).then_some(end)
}

impl KvBackend for SlotStores {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        self.store(cf, key).get(cf, key)
    }

    fn multi_get(&self, cf: ColumnFamily, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
        let mut out = vec![None; keys.len()];
        for (i, store) in self.stores.iter().enumerate() {
            let at: Vec<usize> = (0..keys.len()).filter(|&k| self.index(cf, keys[k]) == i).collect();
            if at.is_empty() {
                continue;
            }
            let mine: Vec<&[u8]> = at.iter().map(|&k| keys[k]).collect();
            for (k, value) in at.into_iter().zip(store.multi_get(cf, &mine)?) {
                out[k] = value;
            }
        }
        Ok(out)
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        if let Some(store) = self.range_store(cf, range) {
            return store.scan(cf, range, direction);
        }
        let scans = self.stores.iter().map(|s| s.scan(cf, range, direction)).collect::<Result<Vec<_>>>()?;
        Ok(Box::new(Merge { scans, heads: Vec::new(), started: false, direction }))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut batches: Vec<WriteBatch> = self.stores.iter().map(|_| WriteBatch::new()).collect();
        for op in batch.into_ops() {
            match op {
                BatchOp::Put { cf, key, value } => batches[self.index(cf, &key)].put(cf, key, value),
                BatchOp::Delete { cf, key } => batches[self.index(cf, &key)].delete(cf, key),
            }
        }
        for (store, batch) in self.stores.iter().zip(batches) {
            if !batch.is_empty() {
                store.write(batch)?;
            }
        }
        Ok(())
    }

    fn stamp(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<u64>> {
        self.store(cf, key).stamp(cf, key)
    }

    fn begin(&self) {
        self.stores.iter().for_each(|s| s.begin());
    }

    fn finish(&self) -> bool {
        self.stores.iter().fold(false, |refused, s| s.finish() | refused)
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn retry_pause(&self, attempt: u32, elapsed: Duration) -> Option<Duration> {
        self.stores[0].retry_pause(attempt, elapsed)
    }
}

/// Several clusters' scans of one range merged in key order.
struct Merge<'a> {
    scans: Vec<ScanIter<'a>>,
    /// Each scan's next record (`None`: it ended).
    heads: Vec<Option<KvPair>>,
    started: bool,
    direction: Direction,
}

impl Iterator for Merge<'_> {
    type Item = Result<KvPair>;

    fn next(&mut self) -> Option<Self::Item> {
        if !self.started {
            self.started = true;
            for scan in &mut self.scans {
                match scan.next().transpose() {
                    Ok(head) => self.heads.push(head),
                    Err(e) => return Some(Err(e)),
                }
            }
        }
        let forward = self.direction == Direction::Forward;
        // A record is in one cluster only: no two heads are equal.
        let mut next: Option<(usize, &Bytes)> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some((key, _)) = head else { continue };
            if next.is_none_or(|(_, best)| if forward { key < best } else { key > best }) {
                next = Some((i, key));
            }
        }
        let next = next?.0;
        let found = self.heads[next].take();
        match self.scans[next].next().transpose() {
            Ok(head) => self.heads[next] = head,
            Err(e) => return Some(Err(e)),
        }
        found.map(Ok)
    }
}
