//! The reference backend: one ordered set of records per column family behind a read-write
//! lock.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap, VecDeque};
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
/// Values larger than this are kept as the `Bytes` they came in (shared, not copied); smaller
/// ones are copied into their record, so a value sliced from a connection's read buffer does
/// not pin the buffer.
const INLINE_MAX: usize = 4096;

/// The high bit of a record's length word: the value is in the column family's `large` map.
const LARGE: u32 = 1 << 31;

/// One record in one allocation: `[key_len u32][key][value]`; with the [`LARGE`] bit set in
/// the length word, `[key_len | LARGE][key]` and the value in [`Family::large`]. Ordered,
/// compared and looked up by its key.
struct Record(Box<[u8]>);

impl Record {
    fn new(key: &[u8], value: Option<&[u8]>) -> Record {
        let mut bytes = Vec::with_capacity(4 + key.len() + value.map_or(0, <[u8]>::len));
        let word = key.len() as u32 | if value.is_none() { LARGE } else { 0 };
        bytes.extend_from_slice(&word.to_be_bytes());
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(value.unwrap_or_default());
        Record(bytes.into_boxed_slice())
    }

    fn word(&self) -> u32 {
        u32::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }

    fn key(&self) -> &[u8] {
        &self.0[4..4 + (self.word() & !LARGE) as usize]
    }

    /// The value held in the record (`None`: a large value, in [`Family::large`]).
    fn inline(&self) -> Option<&[u8]> {
        (self.word() & LARGE == 0).then(|| &self.0[4 + self.key().len()..])
    }
}

impl Borrow<[u8]> for Record {
    fn borrow(&self) -> &[u8] {
        self.key()
    }
}

impl PartialEq for Record {
    fn eq(&self, other: &Record) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Record {}

impl PartialOrd for Record {
    fn partial_cmp(&self, other: &Record) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Record {
    fn cmp(&self, other: &Record) -> std::cmp::Ordering {
        self.key().cmp(other.key())
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.key().escape_ascii().to_string())
    }
}

/// One column family: its records in key order, and the values too large to copy.
#[derive(Debug, Default)]
struct Family {
    records: BTreeSet<Record>,
    large: HashMap<Box<[u8]>, Bytes>,
}

impl Family {
    /// The value of `record`, as the backend hands it out: a copy, or the shared large value.
    fn value(&self, record: &Record) -> Bytes {
        match record.inline() {
            Some(v) => Bytes::copy_from_slice(v),
            None => self.large.get(record.key()).cloned().unwrap_or_default(),
        }
    }

    /// Stores `key` → `value`; the length of the value it replaced, if any.
    fn put(&mut self, key: &[u8], value: Bytes) -> Option<usize> {
        let large = value.len() > INLINE_MAX;
        let record = Record::new(key, (!large).then_some(&value[..]));
        let old = self.records.replace(record).map(|old| self.forget(&old));
        if large {
            self.large.insert(key.into(), value);
        }
        old
    }

    /// Removes `key`; the length of its value, if it was there.
    fn delete(&mut self, key: &[u8]) -> Option<usize> {
        let old = self.records.take(key)?;
        Some(self.forget(&old))
    }

    /// The length of a record's value, dropping its large value if it has one.
    fn forget(&mut self, old: &Record) -> usize {
        match old.inline() {
            Some(v) => v.len(),
            None => self.large.remove(old.key()).map_or(0, |v| v.len()),
        }
    }

    fn pairs(&self) -> impl DoubleEndedIterator<Item = (&[u8], Bytes)> + '_ {
        self.records.iter().map(|r| (r.key(), self.value(r)))
    }
}

impl PartialEq for Family {
    fn eq(&self, other: &Family) -> bool {
        self.records.len() == other.records.len() && self.pairs().eq(other.pairs())
    }
}

impl Clone for Family {
    fn clone(&self) -> Family {
        let mut copy = Family::default();
        for (key, value) in self.pairs() {
            copy.put(key, value);
        }
        copy
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Maps {
    cfs: [Family; 4],
    bytes: u64,
}

impl std::ops::Index<usize> for Maps {
    type Output = Family;
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

impl Eq for Maps {}

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
        let maps = self.maps();
        let copy: Vec<KvPair> =
            maps[cf as usize].pairs().map(|(k, v)| (Bytes::copy_from_slice(k), v)).collect();
        copy.into_iter()
    }

    /// Number of records in a column family.
    pub fn len(&self, cf: ColumnFamily) -> usize {
        self.maps()[cf as usize].records.len()
    }

    /// Whether all four column families are empty.
    pub fn is_empty(&self) -> bool {
        self.maps().cfs.iter().all(|f| f.records.is_empty())
    }

    /// The bytes of every key and value stored, across the four column families: the
    /// figure INFO memory and a `maxmemory` limit use (the maps' own overhead is not counted).
    pub fn bytes(&self) -> u64 {
        self.maps().bytes
    }
}

impl KvBackend for MemoryBackend {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        let maps = self.maps();
        let family = &maps[cf as usize];
        Ok(family.records.get(key).map(|r| family.value(r)))
    }

    fn multi_get(&self, cf: ColumnFamily, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
        let maps = self.maps();
        let family = &maps[cf as usize];
        Ok(keys.iter().map(|k| family.records.get(*k).map(|r| family.value(r))).collect())
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
        // A record's length word holds key lengths under 2 GiB: refuse the batch before
        // applying any of it.
        let too_long = batch.ops().iter().find_map(|op| match op {
            BatchOp::Put { key, .. } | BatchOp::Delete { key, .. } => {
                (key.len() >= LARGE as usize).then_some(key.len())
            }
        });
        if let Some(len) = too_long {
            return Err(crate::Error::Backend(format!(
                "a key of {len} bytes: the memory backend keeps keys under 2 GiB"
            )));
        }
        let mut guard = self.cfs.write().unwrap_or_else(|e| e.into_inner());
        let Maps { cfs, bytes } = &mut *guard;
        for op in batch.into_ops() {
            match op {
                BatchOp::Put { cf, key, value } => {
                    *bytes += value.len() as u64;
                    match cfs[cf as usize].put(&key, value) {
                        Some(old) => *bytes -= old as u64,
                        None => *bytes += key.len() as u64,
                    }
                }
                BatchOp::Delete { cf, key } => {
                    if let Some(old) = cfs[cf as usize].delete(&key) {
                        *bytes -= (key.len() + old) as u64;
                    }
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
        let bounds = (self.start.as_ref().map(|b| &b[..]), self.end.as_ref().map(|b| &b[..]));
        let family = &maps[self.cf as usize];
        let range = family.records.range::<[u8], _>(bounds);
        let pairs = range.map(|r| (Bytes::copy_from_slice(r.key()), family.value(r)));
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
