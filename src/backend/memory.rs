//! The reference backend: one `BTreeMap` per column family behind a read-write lock.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{RwLock, RwLockReadGuard};

use bytes::Bytes;

use super::{BatchOp, ColumnFamily, Direction, KvBackend, KvPair, ScanIter, WriteBatch};
use crate::codec::KeyRange;
use crate::error::Result;

/// One column family. Keys are boxed slices, not `Bytes`: a tree slot is 16 bytes instead of
/// 32 and a key is one allocation, which takes a list element from 203 to 147 bytes of memory
/// (1,000,000 31-byte keys with 3-byte values). Values stay `Bytes`, so a read of a large
/// value shares it instead of copying.
type Map = BTreeMap<Box<[u8]>, Bytes>;

/// The three maps and the bytes their keys and values hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Maps {
    cfs: [Map; 4],
    bytes: u64,
}

impl std::ops::Index<usize> for Maps {
    type Output = Map;
    fn index(&self, cf: usize) -> &Self::Output {
        &self.cfs[cf]
    }
}

/// An in-memory [`KvBackend`]: one `BTreeMap` per column family.
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
            self.maps()[cf as usize].iter().map(|(k, v)| (Bytes::copy_from_slice(k), v.clone())).collect();
        copy.into_iter()
    }

    /// Number of records in a column family.
    pub fn len(&self, cf: ColumnFamily) -> usize {
        self.maps()[cf as usize].len()
    }

    /// Whether all four column families are empty.
    pub fn is_empty(&self) -> bool {
        self.maps().cfs.iter().all(BTreeMap::is_empty)
    }

    /// The bytes of every key and value stored, across the four column families: the
    /// figure INFO memory and a `maxmemory` limit use (the maps' own overhead is not counted).
    pub fn bytes(&self) -> u64 {
        self.maps().bytes
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
        let mut guard = self.cfs.write().unwrap_or_else(|e| e.into_inner());
        let Maps { cfs, bytes } = &mut *guard;
        for op in batch.into_ops() {
            match op {
                BatchOp::Put { cf, key, value } => {
                    *bytes += value.len() as u64;
                    let key_len = key.len() as u64;
                    match cfs[cf as usize].insert(owned(key), detached(value)) {
                        Some(old) => *bytes -= old.len() as u64,
                        None => *bytes += key_len,
                    }
                }
                BatchOp::Delete { cf, key } => {
                    if let Some(old) = cfs[cf as usize].remove(&key[..]) {
                        *bytes -= (key.len() + old.len()) as u64;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The key as a boxed slice, reusing its buffer when the batch held the only reference.
fn owned(key: Bytes) -> Box<[u8]> {
    Vec::from(key).into_boxed_slice()
}

/// A value the map can keep without pinning more than itself: a small value is often a slice
/// of a connection's read buffer, and holding it would hold the whole buffer (40 bytes per
/// stored list element in a pipelined LPUSH). Large values are kept as they come.
fn detached(value: Bytes) -> Bytes {
    if value.len() <= 4096 { Bytes::copy_from_slice(&value) } else { value }
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
        let bounds = (self.start.as_ref().map(|b| &b[..]), self.end.as_ref().map(|b| &b[..]));
        let range = maps[self.cf as usize].range::<[u8], _>(bounds);
        let pairs = range.map(|(k, v)| (Bytes::copy_from_slice(k), v.clone()));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A small value sliced from a larger buffer (a connection's read buffer) is stored apart
    /// from it, so the map does not keep the buffer alive; a large one is shared as it is.
    #[test]
    fn small_values_do_not_pin_the_buffer_they_came_from() {
        let b = MemoryBackend::new();
        let buffer = Bytes::from(vec![7u8; 1 << 16]);
        let inside = |v: &Bytes| buffer.as_ptr_range().contains(&v.as_ptr());
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Subkey, buffer.slice(0..3), buffer.slice(3..6));
        batch.put(ColumnFamily::Subkey, b"big".to_vec(), buffer.slice(8..8 + 8192));
        b.write(batch).unwrap();
        let small = b.get(ColumnFamily::Subkey, &[7, 7, 7]).unwrap().unwrap();
        assert_eq!(small, [7, 7, 7][..]);
        assert!(!inside(&small));
        let (key, _) = b.records(ColumnFamily::Subkey).find(|(_, v)| v.len() == 3).unwrap();
        assert!(!inside(&key));
        assert!(inside(&b.get(ColumnFamily::Subkey, b"big").unwrap().unwrap()));
    }

    /// The byte count equals the sum of key and value lengths after any mix of puts,
    /// overwrites with shorter and longer values, and deletes of present and missing keys.
    #[test]
    fn byte_count_follows_every_write() {
        let b = MemoryBackend::new();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2000 {
            let mut batch = WriteBatch::new();
            for _ in 0..4 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let cf = ColumnFamily::ALL[(rng % 4) as usize];
                let key = vec![b'k'; 1 + (rng >> 8) as usize % 5];
                if rng >> 20 & 3 == 0 {
                    batch.delete(cf, key);
                } else {
                    batch.put(cf, key, vec![b'v'; (rng >> 24) as usize % 9]);
                }
            }
            b.write(batch).unwrap();
            let want: usize = ColumnFamily::ALL
                .into_iter()
                .flat_map(|cf| b.records(cf))
                .map(|(k, v)| k.len() + v.len())
                .sum();
            assert_eq!(b.bytes(), want as u64);
        }
        assert!(b.bytes() > 0);
    }
}
