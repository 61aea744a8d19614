//! The reference backend: one `BTreeMap` per column family behind a read-write lock.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{RwLock, RwLockReadGuard};

use bytes::Bytes;

use super::{BatchOp, ColumnFamily, Direction, KvBackend, KvPair, ScanIter, WriteBatch};
use crate::codec::KeyRange;
use crate::error::Result;

type Maps = [BTreeMap<Bytes, Bytes>; 3];

/// An in-memory [`KvBackend`]: one `BTreeMap<Bytes, Bytes>` per column family.
///
/// Shareable between threads (`&self` everywhere): a batch is applied under the write lock,
/// so no reader sees half of it. A scan reads the map in chunks, taking the read lock once per
/// chunk, so a long scan never holds writers off; it sees each chunk as of the moment it is
/// read (commands get their consistency from the key locks of [`crate::commands`]).
#[derive(Debug, Default)]
pub struct MemoryBackend {
    cfs: RwLock<Maps>,
}

impl Clone for MemoryBackend {
    fn clone(&self) -> Self {
        MemoryBackend { cfs: RwLock::new(self.maps().clone()) }
    }
}

impl PartialEq for MemoryBackend {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other) || *self.maps() == *other.maps()
    }
}

impl Eq for MemoryBackend {}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        MemoryBackend::default()
    }

    fn maps(&self) -> RwLockReadGuard<'_, Maps> {
        // Only a panic inside `write` (allocation failure) poisons the lock; the maps are
        // still valid trees, so go on rather than fail every later command.
        self.cfs.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Every record of a column family, in key order (a copy taken under one read lock).
    pub fn records(&self, cf: ColumnFamily) -> std::vec::IntoIter<KvPair> {
        let copy: Vec<KvPair> =
            self.maps()[cf as usize].iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        copy.into_iter()
    }

    /// Number of records in a column family.
    pub fn len(&self, cf: ColumnFamily) -> usize {
        self.maps()[cf as usize].len()
    }

    /// Whether all three column families are empty.
    pub fn is_empty(&self) -> bool {
        self.maps().iter().all(BTreeMap::is_empty)
    }
}

impl KvBackend for MemoryBackend {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.maps()[cf as usize].get(key).cloned())
    }

    fn multi_get(&self, cf: ColumnFamily, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
        let maps = self.maps();
        Ok(keys.iter().map(|k| maps[cf as usize].get(*k).cloned()).collect())
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        if range.end.as_ref().is_some_and(|end| end.as_slice() <= range.start.as_slice()) {
            return Ok(Box::new(std::iter::empty()));
        }
        let start = Bound::Included(Bytes::copy_from_slice(&range.start));
        let end = range.end.as_ref().map_or(Bound::Unbounded, |e| Bound::Excluded(Bytes::copy_from_slice(e)));
        Ok(Box::new(Chunks {
            backend: self,
            cf,
            start,
            end,
            direction,
            buf: VecDeque::new(),
            chunk: 16,
            done: false,
        }))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut maps = self.cfs.write().unwrap_or_else(|e| e.into_inner());
        for op in batch.into_ops() {
            match op {
                BatchOp::Put { cf, key, value } => {
                    maps[cf as usize].insert(key, value);
                }
                BatchOp::Delete { cf, key } => {
                    maps[cf as usize].remove(&key);
                }
            }
        }
        Ok(())
    }
}

/// A lazy scan reading `chunk` records per read lock, doubling the chunk up to 1024 so short
/// scans (LRANGE 0 9) copy little and long ones take the lock rarely.
struct Chunks<'a> {
    backend: &'a MemoryBackend,
    cf: ColumnFamily,
    start: Bound<Bytes>,
    end: Bound<Bytes>,
    direction: Direction,
    buf: VecDeque<KvPair>,
    chunk: usize,
    done: bool,
}

impl Chunks<'_> {
    fn refill(&mut self) {
        let maps = self.backend.maps();
        let range = maps[self.cf as usize].range::<Bytes, _>((self.start.clone(), self.end.clone()));
        let pairs = range.map(|(k, v)| (k.clone(), v.clone()));
        match self.direction {
            Direction::Forward => self.buf.extend(pairs.take(self.chunk)),
            Direction::Reverse => self.buf.extend(pairs.rev().take(self.chunk)),
        }
        drop(maps);
        if self.buf.len() < self.chunk {
            self.done = true;
        }
        if let Some((last, _)) = self.buf.back() {
            match self.direction {
                Direction::Forward => self.start = Bound::Excluded(last.clone()),
                Direction::Reverse => self.end = Bound::Excluded(last.clone()),
            }
        }
        self.chunk = (self.chunk * 2).min(1024);
    }
}

impl Iterator for Chunks<'_> {
    type Item = Result<KvPair>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() && !self.done {
            self.refill();
        }
        self.buf.pop_front().map(Ok)
    }
}
