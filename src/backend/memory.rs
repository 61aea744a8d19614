//! The reference backend: per column family, an ordered map of chunks of records, behind a
//! read-write lock.
//!
//! A column family ([`Family`]) is a two-level ordered structure: chunks of records, and an
//! index from each chunk's lower fence key to the chunk. A chunk holds exactly the keys from
//! its fence up to the next chunk's fence; the first chunk's fence is the empty key. A
//! [`Chunk`] holds up to [`CHUNK_RECORDS`] records or [`CHUNK_BYTES`] bytes of records (a
//! single larger record gets a chunk of its own) contiguously in one buffer, each key stored
//! without the prefix that all the chunk's keys share, and a slot array in key order giving
//! each record's offset and the first four bytes of its key after the prefix.
//!
//! A point read or write finds its chunk in the index, which has one entry per chunk rather
//! than per record, or directly when the key falls in the chunk the last writes went to (a
//! list's pushes and pops, keys written in order); then it binary-searches the slot array and
//! reads the buffer for the final comparison only. The prefix a collection's keys share
//! (namespace, user key, version) is compared once per lookup and stored once per chunk.
//! Chunks split when they pass a bound (where depends on where the keys have been going; the
//! larger piece keeps the chunk's buffer, so a run of pushes copies only the few records of
//! the smaller one), are rewritten without the records they no longer hold once those pass
//! half of the live bytes, and merge with a neighbour when they fall under a quarter of the
//! bounds, so memory follows the data after many deletes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::{Bound, Range};
use std::sync::{RwLock, RwLockReadGuard};

use bytes::Bytes;

use super::{BatchOp, ColumnFamily, Direction, KvBackend, KvPair, ScanIter, WriteBatch};
use crate::codec::KeyRange;
use crate::error::Result;

/// Values larger than this are kept as the `Bytes` they came in (shared, not copied) in
/// [`Family::large`]; smaller ones are copied into their chunk, so a value sliced from a
/// connection's read buffer does not pin the buffer.
const INLINE_MAX: usize = 4096;

/// Keys must be shorter than this (2 GiB): a chunk addresses its records with `u32` offsets,
/// and a record of the longest key and the longest inline value must start below 4 GiB even
/// after another such record.
const KEY_LIMIT: usize = 1 << 31;

/// A chunk holding more records than this splits. A lookup's binary search over 128 slots
/// takes seven probes in 1 KiB, and an insert shifts at most that; on a million-record
/// collection 64, 128 and 256 measured within a few percent of each other.
#[cfg(not(test))]
const CHUNK_RECORDS: usize = 128;
#[cfg(test)]
const CHUNK_RECORDS: usize = 8;

/// A chunk holding more record bytes than this (a page) splits, unless it holds a single
/// record. Records of short keys and values reach [`CHUNK_RECORDS`] first.
#[cfg(not(test))]
const CHUNK_BYTES: usize = 4096;
#[cfg(test)]
const CHUNK_BYTES: usize = 200;

/// Dead bytes a chunk may hold before it is rewritten without them, beyond half its live
/// bytes.
const DEAD_SLACK: usize = 64;

/// Reads the LEB128 number at `*at` and moves `*at` past it; stops at the end of `buf`.
#[inline]
fn read_varint(buf: &[u8], at: &mut usize) -> usize {
    match buf.get(*at) {
        Some(&byte) if byte < 0x80 => {
            *at += 1;
            usize::from(byte)
        }
        _ => read_long_varint(buf, at),
    }
}

#[cold]
fn read_long_varint(buf: &[u8], at: &mut usize) -> usize {
    let mut value = 0usize;
    let mut shift = 0u32;
    while let Some(&byte) = buf.get(*at) {
        *at += 1;
        value |= usize::from(byte & 0x7f).checked_shl(shift).unwrap_or(0);
        if byte < 0x80 {
            break;
        }
        shift += 7;
    }
    value
}

fn write_varint(buf: &mut Vec<u8>, mut value: usize) {
    while value >= 0x80 {
        buf.push(value as u8 | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

fn varint_len(value: usize) -> usize {
    (usize::BITS - (value | 1).leading_zeros()).div_ceil(7) as usize
}

/// Compares like `a.cmp(b)` without handing an empty slice to `memcmp`: an empty slice's
/// pointer may be dangling, and glibc's masked-load `memcmp` takes a slow fault-suppression
/// assist on a pointer into an unmapped page (measured: a tenth of a server's time in SET).
#[inline]
fn compare(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if a.is_empty() || b.is_empty() { a.len().cmp(&b.len()) } else { a.cmp(b) }
}

/// Whether `key` starts with `prefix`, without handing an empty slice to `memcmp`.
#[inline]
fn has_prefix(key: &[u8], prefix: &[u8]) -> bool {
    prefix.is_empty() || key.starts_with(prefix)
}

/// The length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A record's value word: the inline value's length shifted left by one, or 1 for a value in
/// [`Family::large`].
fn value_word(value: Option<&[u8]>) -> usize {
    value.map_or(1, |v| v.len() << 1)
}

/// The value a write replaced or a delete removed, as the chunk held it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Old {
    /// An inline value of this many bytes.
    Inline(usize),
    /// A value in [`Family::large`].
    Large,
}

/// Where a record is in its chunk's buffer, and the first bytes of its key after the prefix,
/// so that a binary search compares in the slot array and reads the buffer only on a tie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// The first four bytes of the key suffix, big-endian, zero-padded: ordered like the
    /// suffixes, and equal heads leave the order to the bytes after the fourth, or to the
    /// lengths when either suffix has no more (see [`Chunk::cmp_tied`]).
    head: u32,
    off: u32,
}

#[inline]
fn head(suffix: &[u8]) -> u32 {
    match *suffix {
        [a, b, c, d, ..] => u32::from_be_bytes([a, b, c, d]),
        [a, b, c] => u32::from_be_bytes([a, b, c, 0]),
        [a, b] => u32::from_be_bytes([a, b, 0, 0]),
        [a] => u32::from_be_bytes([a, 0, 0, 0]),
        [] => 0,
    }
}

/// One record as a chunk stores it.
struct Entry<'a> {
    /// The key without the chunk's prefix.
    suffix: &'a [u8],
    /// The inline value, or `None` for a value in [`Family::large`].
    value: Option<&'a [u8]>,
    /// The bytes the record takes in the buffer.
    len: usize,
}

/// A run of records in key order, in one buffer.
///
/// `buf` starts with the prefix every key of the chunk shares (`plen` bytes), then holds the
/// records, each `[suffix_len][suffix][value_word][value]` with the lengths as LEB128 varints
/// (see [`value_word`]). `slots` holds a [`Slot`] per live record in key order. A write
/// appends its record and points a slot at it (an overwrite with a value of the same length
/// writes in place); the record it replaces, like a deleted one, stays in the buffer as dead
/// bytes (unless it was the buffer's last) until they pass half the live bytes, and the chunk
/// is then rewritten without them. The first key of an empty chunk is its prefix; a key that
/// does not start with the prefix rewrites the chunk with the shorter common one. A split
/// builds the smaller piece with the longest prefix its keys share (one where a run of new
/// keys goes on: a byte shorter than the whole chunk's keys shared), and keeps the larger
/// one in place (its slots cut to its records, the other's records cut off the buffer's end
/// or left as dead bytes) while its slot heads still differ, else builds it too.
#[derive(Clone)]
struct Chunk {
    buf: Vec<u8>,
    slots: Vec<Slot>,
    plen: usize,
    /// Bytes of `buf` held by replaced and deleted records.
    dead: usize,
    /// Where the last new key went, to tell runs of keys when the chunk splits (`u32::MAX`:
    /// none since the chunk was built or split).
    last: u32,
}

/// Where the keys inserted into a chunk have been going, to choose where it splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Split {
    /// Anywhere: split the bytes in half.
    Halves,
    /// At the given index, the lower piece keeping the keys before it.
    At(usize),
    /// At the given index, the upper piece's fence just above the lower piece's last key, so
    /// that later keys between the two pieces go to the upper one (keys descending into the
    /// run that starts there).
    Before(usize),
}

impl Chunk {
    fn len(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    fn prefix(&self) -> &[u8] {
        self.buf.get(..self.plen).unwrap_or_default()
    }

    /// Bytes of live records (prefix excluded).
    fn live(&self) -> usize {
        self.buf.len().saturating_sub(self.plen + self.dead)
    }

    #[inline]
    fn entry(&self, i: usize) -> Entry<'_> {
        let start = self.slots.get(i).map_or(self.buf.len(), |s| s.off as usize);
        let mut at = start;
        let klen = read_varint(&self.buf, &mut at);
        let key_at = at;
        at = at.saturating_add(klen);
        let suffix = self.buf.get(key_at..at).unwrap_or_default();
        let word = read_varint(&self.buf, &mut at);
        let value_at = at;
        at = at.saturating_add(word >> 1);
        let value = (word & 1 == 0).then(|| self.buf.get(value_at..at).unwrap_or_default());
        Entry { suffix, value, len: at.min(self.buf.len()).saturating_sub(start) }
    }

    /// The key without the prefix of the record at offset `off`.
    #[inline]
    fn suffix_at(&self, off: u32) -> &[u8] {
        let mut at = off as usize;
        let klen = read_varint(&self.buf, &mut at);
        self.buf.get(at..at.saturating_add(klen)).unwrap_or_default()
    }

    /// Compares the key suffix of the record at offset `off` with `suffix`, whose heads are
    /// equal: their first four bytes are settled, so only the bytes after them are compared,
    /// and none when either suffix is no longer than four bytes (the shorter is then the
    /// other's beginning, or both are the same).
    #[inline]
    fn cmp_tied(&self, off: u32, suffix: &[u8]) -> std::cmp::Ordering {
        let stored = self.suffix_at(off);
        match (stored.get(4..), suffix.get(4..)) {
            (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() => a.cmp(b),
            _ => stored.len().cmp(&suffix.len()),
        }
    }

    /// The whole key of record `i`.
    fn key(&self, i: usize) -> Vec<u8> {
        let suffix = self.entry(i).suffix;
        let mut key = Vec::with_capacity(self.plen + suffix.len());
        key.extend_from_slice(self.prefix());
        key.extend_from_slice(suffix);
        key
    }

    /// Where the key with this suffix is (`Ok`) or would go (`Err`).
    #[inline(always)]
    fn find(&self, suffix: &[u8]) -> std::result::Result<usize, usize> {
        let head = head(suffix);
        // The ends first: a list's pushes and pops, and keys written in order, go there. A
        // key at either end is settled with one comparison, even when its neighbours share
        // its head (a list's elements in a chunk whose prefix stops before their indexes).
        let n = self.slots.len();
        if let Some(last) = self.slots.last() {
            if last.head < head {
                return Err(n);
            }
            if last.head == head {
                match self.cmp_tied(last.off, suffix) {
                    std::cmp::Ordering::Less => return Err(n),
                    std::cmp::Ordering::Equal => return Ok(n - 1),
                    // The only key with this head: the key goes just before it.
                    std::cmp::Ordering::Greater if n == 1 || self.slots[n - 2].head < head => {
                        return Err(n - 1);
                    }
                    std::cmp::Ordering::Greater => {}
                }
            }
        }
        if let Some(first) = self.slots.first() {
            if first.head > head {
                return Err(0);
            }
            if first.head == head {
                match self.cmp_tied(first.off, suffix) {
                    std::cmp::Ordering::Greater => return Err(0),
                    std::cmp::Ordering::Equal => return Ok(0),
                    std::cmp::Ordering::Less => {}
                }
            }
        }
        self.find_inside(suffix, head)
    }

    /// [`Chunk::find`] for a key with this head that is neither at nor beyond either end:
    /// out of line, so that a lookup inlines only the checks at the ends.
    #[inline(never)]
    fn find_inside(&self, suffix: &[u8], head: u32) -> std::result::Result<usize, usize> {
        // The first slot with the same head or a greater one; the buffer is read only there,
        // unless several keys share the head.
        let at = self.slots.partition_point(|s| s.head < head);
        match self.slots.get(at) {
            Some(s) if s.head == head => match self.cmp_tied(s.off, suffix) {
                std::cmp::Ordering::Less => {
                    let ties = &self.slots[at + 1..];
                    let ties = &ties[..ties.partition_point(|s| s.head == head)];
                    match ties.binary_search_by(|s| self.cmp_tied(s.off, suffix)) {
                        Ok(i) => Ok(at + 1 + i),
                        Err(i) => Err(at + 1 + i),
                    }
                }
                std::cmp::Ordering::Equal => Ok(at),
                std::cmp::Ordering::Greater => Err(at),
            },
            _ => Err(at),
        }
    }

    /// Where `key` is (`Ok`) or would go (`Err`).
    #[inline(always)]
    fn search(&self, key: &[u8]) -> std::result::Result<usize, usize> {
        let prefix = self.prefix();
        if has_prefix(key, prefix) {
            self.find(key.get(prefix.len()..).unwrap_or_default())
        } else if compare(key, prefix).is_lt() {
            // Every key here starts with the prefix, so all of them sort on one side of `key`.
            Err(0)
        } else {
            Err(self.len())
        }
    }

    /// The index of the first key at or above `key`.
    fn lower_bound(&self, key: &[u8]) -> usize {
        self.search(key).unwrap_or_else(|i| i)
    }

    /// The index of the first key above `key`.
    fn upper_bound(&self, key: &[u8]) -> usize {
        self.search(key).map_or_else(|i| i, |i| i + 1)
    }

    /// Index of the first key at or after the start bound.
    fn start_index(&self, start: Bound<&[u8]>) -> usize {
        match start {
            Bound::Included(key) => self.lower_bound(key),
            Bound::Excluded(key) => self.upper_bound(key),
            Bound::Unbounded => 0,
        }
    }

    /// Index of the first key at or after the end bound.
    fn end_index(&self, end: Bound<&[u8]>) -> usize {
        match end {
            Bound::Included(key) => self.upper_bound(key),
            Bound::Excluded(key) => self.lower_bound(key),
            Bound::Unbounded => self.len(),
        }
    }

    /// Stores `key` (which belongs in this chunk) with an inline value, or with `None` for a
    /// large one. Answers where the key is now and the value it replaced.
    fn put(&mut self, key: &[u8], value: Option<&[u8]>) -> (usize, Option<Old>) {
        if self.buf.is_empty() {
            // The first key's prefix is all of it; each later key shortens it as needed.
            self.buf.extend_from_slice(key);
            self.plen = key.len();
        } else if !has_prefix(key, self.prefix()) {
            let keep = common_prefix(self.prefix(), key);
            let prefix = self.prefix()[..keep].to_vec();
            *self = Chunk::build(&[(self, 0..self.len())], &prefix);
        }
        let suffix = key.get(self.plen..).unwrap_or_default();
        let found = self.find(suffix);
        let (i, old) = match found {
            Ok(i) => {
                let entry = self.entry(i);
                let (old, len) = (entry.value.map_or(Old::Large, |v| Old::Inline(v.len())), entry.len);
                if let (Old::Inline(n), Some(new)) = (old, value)
                    && n == new.len()
                {
                    // The same length: write the value over the old one.
                    let end = self.slots[i].off as usize + len;
                    if let Some(place) = self.buf.get_mut(end.saturating_sub(n)..end) {
                        place.copy_from_slice(new);
                        return (i, Some(old));
                    }
                }
                self.forget(i, len);
                (i, Some(old))
            }
            Err(i) => (i, None),
        };
        if u32::try_from(self.buf.len()).is_err() {
            // Only after a record near the 2 GiB key limit: drop the dead bytes so the new
            // record starts below 4 GiB.
            self.compact();
        }
        let need = varint_len(suffix.len())
            + suffix.len()
            + varint_len(value_word(value))
            + value.map_or(0, <[u8]>::len);
        if self.buf.capacity() - self.buf.len() < need {
            self.buf.reserve_exact(need.max(self.buf.len() / 4).max(64));
        }
        let off = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        write_varint(&mut self.buf, suffix.len());
        self.buf.extend_from_slice(suffix);
        write_varint(&mut self.buf, value_word(value));
        self.buf.extend_from_slice(value.unwrap_or_default());
        if self.slots.len() == self.slots.capacity() {
            self.slots.reserve_exact((self.slots.len() / 4).max(4));
        }
        self.slots.insert(i, Slot { head: head(suffix), off });
        if old.is_some() && self.wasteful() {
            self.compact();
        }
        (i, old)
    }

    /// Removes `key`; the value it had, if it was here.
    fn delete(&mut self, key: &[u8]) -> Option<Old> {
        let i = self.search(key).ok()?;
        let entry = self.entry(i);
        let (old, len) = (entry.value.map_or(Old::Large, |v| Old::Inline(v.len())), entry.len);
        self.forget(i, len);
        if self.slots.is_empty() {
            *self = Chunk::default();
        } else if self.wasteful() {
            self.compact();
        }
        Some(old)
    }

    /// Drops slot `i`, whose record takes `len` bytes: the buffer's last record is cut off,
    /// any other becomes dead bytes.
    fn forget(&mut self, i: usize, len: usize) {
        let off = self.slots.remove(i).off as usize;
        if off + len == self.buf.len() {
            self.buf.truncate(off);
        } else {
            self.dead += len;
        }
    }

    /// Whether the dead bytes are worth a rewrite.
    fn wasteful(&self) -> bool {
        self.dead > DEAD_SLACK && self.dead > self.live() / 2
    }

    /// Rewrites the chunk without its dead bytes, keeping its prefix. When they all lie
    /// before the first live record (the oldest records popped first: a list pushed at one
    /// end and popped at the other), the live bytes move down in one copy instead.
    fn compact(&mut self) {
        let first = self.slots.iter().map(|s| s.off as usize).min().unwrap_or(self.buf.len());
        if first == self.plen + self.dead {
            self.buf.drain(self.plen..first);
            let dead = self.dead as u32;
            self.slots.iter_mut().for_each(|s| s.off -= dead);
            self.dead = 0;
            return;
        }
        let prefix = self.prefix().to_vec();
        let last = self.last;
        *self = Chunk { last, ..Chunk::build(&[(self, 0..self.len())], &prefix) };
    }

    /// Whether the chunk must split.
    fn over(&self) -> bool {
        self.len() > CHUNK_RECORDS || (self.len() > 1 && self.live() > CHUNK_BYTES)
    }

    /// Whether the chunk is small enough to merge with a neighbour.
    fn under(&self) -> bool {
        self.len() * 4 < CHUNK_RECORDS && self.live() * 4 < CHUNK_BYTES
    }

    /// Whether `self` and `other` fit in one chunk that is not about to split again.
    fn fits_with(&self, other: &Chunk) -> bool {
        (self.len() + other.len()) * 4 <= CHUNK_RECORDS * 3
            && (self.live() + other.live()) * 4 <= CHUNK_BYTES * 3
    }

    /// The records of `parts` in one new chunk whose prefix is the longest their keys share.
    /// The parts must be in key order.
    fn pack(parts: &[(&Chunk, Range<usize>)]) -> Chunk {
        Chunk::pack_within(parts, usize::MAX)
    }

    /// [`Chunk::pack`] with a prefix of at most `most` bytes, so that the keys a run goes on
    /// with fit it: a key outside the prefix rebuilds the chunk.
    fn pack_within(parts: &[(&Chunk, Range<usize>)], most: usize) -> Chunk {
        let mut nonempty = parts.iter().filter(|(_, r)| !r.is_empty());
        let (Some((c0, r0)), Some((c1, r1))) = (nonempty.next(), parts.iter().rfind(|(_, r)| !r.is_empty()))
        else {
            return Chunk::default();
        };
        let (first, last) = (c0.key(r0.start), c1.key(r1.end - 1));
        Chunk::build(parts, &first[..common_prefix(&first, &last).min(most)])
    }

    /// The records of `parts` (in key order, every key starting with `prefix`) in one new chunk
    /// with that prefix, sized to fit.
    fn build(parts: &[(&Chunk, Range<usize>)], prefix: &[u8]) -> Chunk {
        let plen = prefix.len();
        let records = || parts.iter().flat_map(|(c, r)| r.clone().map(move |i| (*c, c.entry(i))));
        let mut size = plen;
        let mut count = 0;
        for (c, e) in records() {
            let klen = (c.plen + e.suffix.len()).saturating_sub(plen);
            let vlen = e.value.map_or(0, <[u8]>::len);
            size += varint_len(klen) + klen + varint_len(value_word(e.value)) + vlen;
            count += 1;
        }
        let mut buf = Vec::with_capacity(size);
        buf.extend_from_slice(prefix);
        let mut slots = Vec::with_capacity(count);
        for (c, e) in records() {
            let off = u32::try_from(buf.len()).unwrap_or(u32::MAX);
            let klen = (c.plen + e.suffix.len()).saturating_sub(plen);
            write_varint(&mut buf, klen);
            let key_at = buf.len();
            if plen <= c.plen {
                buf.extend_from_slice(c.prefix().get(plen..).unwrap_or_default());
                buf.extend_from_slice(e.suffix);
            } else {
                buf.extend_from_slice(e.suffix.get(plen - c.plen..).unwrap_or_default());
            }
            slots.push(Slot { head: head(buf.get(key_at..).unwrap_or_default()), off });
            write_varint(&mut buf, value_word(e.value));
            buf.extend_from_slice(e.value.unwrap_or_default());
        }
        Chunk { buf, slots, plen, dead: 0, last: u32::MAX }
    }

    /// Where an over-full chunk splits after a new key went in at `pos`: after a run of
    /// keys appended at the end (RPUSH), the lower piece keeps seven eighths; before a run
    /// prepended at the start (LPUSH), the upper piece does; a run ascending or descending
    /// inside the chunk splits where it runs; anything else splits the bytes in half.
    fn split_point(&self, pos: Option<usize>) -> Split {
        let n = self.len();
        let last = self.last as usize;
        let Some(pos) = pos else { return Split::Halves };
        if pos + 1 == n {
            Split::At(n - n / 8)
        } else if pos == 0 {
            Split::At((n / 8).max(1))
        } else if pos == last {
            Split::Before(pos)
        } else if pos == last.wrapping_add(1) {
            Split::At(pos + 1)
        } else {
            Split::Halves
        }
    }

    /// The index where the records before it hold at least `share` bytes, within `1..len`.
    fn byte_point(&self, share: usize) -> usize {
        let mut bytes = 0;
        for i in 0..self.len() {
            if bytes >= share && i > 0 {
                return i.min(self.len() - 1);
            }
            bytes += self.entry(i).len;
        }
        self.len().saturating_sub(1).max(1)
    }

    /// Splits the over-full chunk after a new key went in at `pos` (`None`: after an
    /// overwrite): keeps the first piece and answers the others with their fences, in key
    /// order. The larger piece keeps this chunk's buffer (see [`Chunk::cut`]); only the
    /// smaller one is copied.
    fn split(&mut self, pos: Option<usize>) -> Vec<(Box<[u8]>, Chunk)> {
        let n = self.len();
        let (at, above_lower) = match self.split_point(pos) {
            Split::Halves => (self.byte_point(self.live() / 2), false),
            Split::At(at) => (at, false),
            Split::Before(at) => (at, true),
        };
        let at = at.clamp(1, n.saturating_sub(1).max(1));
        let fence = if above_lower {
            let mut fence = self.key(at - 1);
            fence.push(0);
            fence
        } else {
            self.key(at)
        };
        let (keep, other) = if at * 2 >= n { (0..at, at..n) } else { (at..n, 0..at) };
        // The piece the newest key went to is where a run goes on: its prefix is a byte
        // shorter than the whole chunk's keys share. A list pushed at one end crosses a
        // multiple of 256 in its index every 256 pushes, which would rebuild the piece if its
        // prefix held that byte; with one byte less, only at every 65,536.
        let most = match pos {
            Some(pos) if other.contains(&pos) => {
                (self.plen + common_prefix(self.entry(0).suffix, self.entry(n - 1).suffix)).saturating_sub(1)
            }
            _ => usize::MAX,
        };
        let run = matches!(pos, Some(pos) if other.contains(&pos));
        let mut built = Chunk::pack_within(&[(self, other)], most);
        if run && !built.over() {
            // The run fills this piece up to the bounds: room for that now, rather than a
            // reallocation of both vectors every quarter of growth on the way.
            let per_record = built.live().div_ceil(built.len().max(1));
            let room = (per_record * (CHUNK_RECORDS + 1)).min(CHUNK_BYTES) + built.plen;
            built.buf.reserve_exact(room.saturating_sub(built.buf.len()));
            built.slots.reserve_exact((CHUNK_RECORDS + 1).saturating_sub(built.slots.len()));
        }
        let mut kept = std::mem::take(self);
        kept.cut(keep.clone());
        let (lower, upper) = if keep.start == 0 { (kept, built) } else { (built, kept) };
        let mut pieces = Vec::new();
        Chunk::halve(Box::default(), lower, &mut pieces);
        Chunk::halve(fence.into(), upper, &mut pieces);
        let mut pieces = pieces.into_iter();
        *self = pieces.next().map(|(_, c)| c).unwrap_or_default();
        pieces.collect()
    }

    /// Cuts the chunk down to records `keep` (its first or its last ones). In place while
    /// the slot heads still tell the kept keys apart (its first and last heads differ): the
    /// records cut away are cut off the buffer's end when they are all there (a run's
    /// latest keys), else left as dead bytes. Otherwise rebuilt with the longest prefix the
    /// kept keys share, so that their heads read the bytes that differ.
    fn cut(&mut self, keep: Range<usize>) {
        if self.slots[keep.start].head == self.slots[keep.end - 1].head {
            *self = Chunk::pack(&[(self, keep)]);
            return;
        }
        let gone = if keep.start == 0 { keep.end..self.len() } else { 0..keep.start };
        let (mut from, mut bytes) = (self.buf.len(), 0);
        for i in gone.clone() {
            from = from.min(self.slots[i].off as usize);
            bytes += self.entry(i).len;
        }
        if from + bytes == self.buf.len() {
            self.buf.truncate(from);
        } else {
            self.dead += bytes;
        }
        self.slots.drain(gone);
        // Slot indices moved: no run to follow until the next insert.
        self.last = u32::MAX;
        if self.wasteful() {
            self.compact();
        } else {
            self.buf.shrink_to_fit();
            self.slots.shrink_to_fit();
        }
    }

    /// Halves `chunk` until every piece is within the bounds (only records of many kilobytes
    /// need more than one cut); pushes the pieces in key order, the first with `fence`.
    fn halve(fence: Box<[u8]>, chunk: Chunk, out: &mut Vec<(Box<[u8]>, Chunk)>) {
        if !chunk.over() {
            out.push((fence, chunk));
            return;
        }
        let at = chunk.byte_point(chunk.live() / 2);
        let lower = Chunk::pack(&[(&chunk, 0..at)]);
        let upper = Chunk::pack(&[(&chunk, at..chunk.len())]);
        let upper_fence = upper.key(0).into();
        drop(chunk);
        Chunk::halve(fence, lower, out);
        Chunk::halve(upper_fence, upper, out);
    }
}

impl Default for Chunk {
    fn default() -> Self {
        Chunk { buf: Vec::new(), slots: Vec::new(), plen: 0, dead: 0, last: u32::MAX }
    }
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries((0..self.len()).map(|i| self.key(i).escape_ascii().to_string())).finish()
    }
}

/// No chunk: the finger points nowhere.
const NO_CHUNK: u32 = u32::MAX;

/// The bounds of one chunk, remembered so that a run of operations on one chunk (a list's
/// pushes and pops, a batch of keys in order) finds it without walking the index.
#[derive(Debug, Clone)]
struct Finger {
    /// The chunk's place in [`Family::chunks`], or [`NO_CHUNK`].
    chunk: u32,
    /// Its fence.
    lo: Vec<u8>,
    /// The next chunk's fence (`None`: the last chunk).
    hi: Option<Vec<u8>>,
}

impl Default for Finger {
    fn default() -> Self {
        Finger { chunk: NO_CHUNK, lo: Vec::new(), hi: None }
    }
}

impl Finger {
    /// The chunk whose range holds `key`, if it is the one remembered.
    #[inline]
    fn find(&self, key: &[u8]) -> Option<usize> {
        let inside =
            compare(&self.lo, key).is_le() && self.hi.as_ref().is_none_or(|hi| compare(key, hi).is_lt());
        (self.chunk != NO_CHUNK && inside).then_some(self.chunk as usize)
    }

    fn set(&mut self, chunk: u32, lo: &[u8], hi: Option<&[u8]>) {
        self.chunk = chunk;
        self.lo.clear();
        self.lo.extend_from_slice(lo);
        match (hi, &mut self.hi) {
            (Some(hi), Some(mine)) => {
                mine.clear();
                mine.extend_from_slice(hi);
            }
            (hi, mine) => *mine = hi.map(<[u8]>::to_vec),
        }
    }
}

/// A chunk's fence and its place in [`Family::chunks`].
type Placed<'a> = (&'a [u8], usize);

/// One column family: its chunks, an index of them by fence, its record count, and the
/// values too large to copy, by key.
///
/// The chunks live in a slab (`chunks`, with `free` places to reuse). The first chunk, whose
/// fence is the empty key, is at place `first`; `index` maps the fence of every other chunk
/// to its place. (The empty fence stays out of the index so that no search compares an
/// empty key.) Places let the finger name a chunk without a borrow of the index; every
/// change to the index forgets the finger.
#[derive(Debug, Clone)]
struct Family {
    first: u32,
    index: BTreeMap<Box<[u8]>, u32>,
    chunks: Vec<Chunk>,
    free: Vec<u32>,
    finger: Finger,
    /// The chunk the last write went to: a second write there in a row sets the finger.
    recent: u32,
    len: usize,
    large: HashMap<Box<[u8]>, Bytes>,
}

impl Default for Family {
    fn default() -> Self {
        Family {
            first: NO_CHUNK,
            index: BTreeMap::new(),
            chunks: Vec::new(),
            free: Vec::new(),
            finger: Finger::default(),
            recent: NO_CHUNK,
            len: 0,
            large: HashMap::new(),
        }
    }
}

impl Family {
    fn first(&self) -> Option<Placed<'_>> {
        (self.first != NO_CHUNK).then_some((&[], self.first as usize))
    }

    /// The chunk whose range holds `key`, found in the index.
    fn floor(&self, key: &[u8]) -> Option<Placed<'_>> {
        Family::floor_in(&self.index, self.first, key)
    }

    fn floor_in<'a>(index: &'a BTreeMap<Box<[u8]>, u32>, first: u32, key: &[u8]) -> Option<Placed<'a>> {
        let found = if key.is_empty() {
            None
        } else {
            index.range::<[u8], _>((Bound::Unbounded, Bound::Included(key))).next_back()
        };
        match found {
            Some((fence, &i)) => Some((fence, i as usize)),
            None => (first != NO_CHUNK).then_some((&[], first as usize)),
        }
    }

    /// The chunks after the one fenced at `fence`, in order.
    fn after<'a>(&'a self, fence: &[u8]) -> impl Iterator<Item = Placed<'a>> + 'a {
        Family::after_in(&self.index, fence)
    }

    fn after_in<'a>(
        index: &'a BTreeMap<Box<[u8]>, u32>,
        fence: &[u8],
    ) -> impl Iterator<Item = Placed<'a>> + 'a {
        let rest = if fence.is_empty() {
            index.range::<[u8], _>(..)
        } else {
            index.range::<[u8], _>((Bound::Excluded(fence), Bound::Unbounded))
        };
        rest.map(|(fence, &i)| (&fence[..], i as usize))
    }

    /// The chunks before the one fenced at `fence`, last first.
    fn before<'a>(&'a self, fence: &[u8]) -> impl Iterator<Item = Placed<'a>> + 'a {
        let rest = (!fence.is_empty()).then(|| {
            let rest = self.index.range::<[u8], _>((Bound::Unbounded, Bound::Excluded(fence)));
            rest.rev().map(|(fence, &i)| (&fence[..], i as usize)).chain(self.first())
        });
        rest.into_iter().flatten()
    }

    /// Every chunk in order.
    fn all(&self) -> impl Iterator<Item = Placed<'_>> + '_ {
        self.first().into_iter().chain(self.after(&[]))
    }

    /// The chunk whose range holds `key`, if there is any chunk.
    #[inline]
    fn locate(&self, key: &[u8]) -> Option<Placed<'_>> {
        match self.finger.find(key) {
            Some(i) => Some((&self.finger.lo, i)),
            None => self.floor(key),
        }
    }

    /// Like [`Family::locate`] for a write: also remembers the chunk in the finger when the
    /// write before went there too.
    #[inline]
    fn locate_mut(&mut self, key: &[u8]) -> Option<usize> {
        match self.finger.find(key) {
            Some(i) => Some(i),
            None => self.locate_in_index(key),
        }
    }

    /// [`Family::locate_mut`] past the finger: out of line, so that a write the finger
    /// places inlines only its check.
    #[inline(never)]
    fn locate_in_index(&mut self, key: &[u8]) -> Option<usize> {
        let (fence, i) = Family::floor_in(&self.index, self.first, key)?;
        if i as u32 == self.recent {
            let hi = Family::after_in(&self.index, fence).next().map(|(hi, _)| hi);
            self.finger.set(i as u32, fence, hi);
        }
        self.recent = i as u32;
        Some(i)
    }

    /// Puts `chunk` in a free place of the slab.
    fn alloc(&mut self, chunk: Chunk) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.chunks[i as usize] = chunk;
                i
            }
            None => {
                self.chunks.push(chunk);
                (self.chunks.len() - 1) as u32
            }
        }
    }

    /// Drops the chunk fenced at `fence` (not the first) from the index and frees its place.
    /// When most places are free, moves the chunks to the front of a smaller slab.
    fn release(&mut self, fence: &[u8]) {
        if let Some(i) = self.index.remove(fence) {
            self.chunks[i as usize] = Chunk::default();
            self.free.push(i);
        }
        self.finger.chunk = NO_CHUNK;
        if self.free.len() > 64 && self.free.len() > self.chunks.len() / 2 {
            let mut chunks = Vec::with_capacity(self.chunks.len() - self.free.len());
            let first = (self.first != NO_CHUNK).then_some(&mut self.first);
            for place in first.into_iter().chain(self.index.values_mut()) {
                chunks.push(std::mem::take(&mut self.chunks[*place as usize]));
                *place = (chunks.len() - 1) as u32;
            }
            self.chunks = chunks;
            self.free.clear();
            self.recent = NO_CHUNK;
        }
    }

    fn get(&self, key: &[u8]) -> Option<Bytes> {
        let chunk = &self.chunks[self.locate(key)?.1];
        let entry = chunk.entry(chunk.search(key).ok()?);
        Some(match entry.value {
            Some(v) => Bytes::copy_from_slice(v),
            None => self.large.get(key).cloned().unwrap_or_default(),
        })
    }

    /// The value of `key` where it lies, without a copy.
    fn value(&self, key: &[u8]) -> Option<&[u8]> {
        let chunk = &self.chunks[self.locate(key)?.1];
        let entry = chunk.entry(chunk.search(key).ok()?);
        Some(match entry.value {
            Some(v) => v,
            None => self.large.get(key).map_or(&[][..], |v| &v[..]),
        })
    }

    /// Record `i` of `chunk` as a scan yields it: a copy of the key, and a copy of the value or
    /// the shared large value.
    fn pair(&self, chunk: &Chunk, i: usize) -> KvPair {
        let entry = chunk.entry(i);
        let mut key = Vec::with_capacity(chunk.plen + entry.suffix.len());
        key.extend_from_slice(chunk.prefix());
        key.extend_from_slice(entry.suffix);
        let value = match entry.value {
            Some(v) => Bytes::copy_from_slice(v),
            None => self.large.get(&key[..]).cloned().unwrap_or_default(),
        };
        (Bytes::from(key), value)
    }

    /// Stores `key` → `value`; the length of the value it replaced, if any.
    fn put(&mut self, key: &[u8], value: Bytes) -> Option<usize> {
        let is_large = value.len() > INLINE_MAX;
        let i = match self.locate_mut(key) {
            Some(i) => i,
            None => {
                self.first = self.alloc(Chunk::default());
                self.first as usize
            }
        };
        let chunk = &mut self.chunks[i];
        let (pos, old) = chunk.put(key, (!is_large).then_some(&value[..]));
        if chunk.over() {
            // Where a new key went tells where to split; an overwrite splits in half.
            let pieces = chunk.split(old.is_none().then_some(pos));
            for (fence, piece) in pieces {
                let place = self.alloc(piece);
                self.index.insert(fence, place);
            }
            self.finger.chunk = NO_CHUNK;
        } else if old.is_none() {
            chunk.last = pos as u32;
        }
        let old = match old {
            None => {
                self.len += 1;
                None
            }
            Some(Old::Inline(n)) => Some(n),
            Some(Old::Large) => Some(self.large.remove(key).map_or(0, |v| v.len())),
        };
        if is_large {
            self.large.insert(key.into(), value);
        }
        old
    }

    /// Removes `key`; the length of its value, if it was there.
    fn delete(&mut self, key: &[u8]) -> Option<usize> {
        let i = self.locate_mut(key)?;
        let chunk = &mut self.chunks[i];
        let was_under = chunk.under();
        let old = chunk.delete(key)?;
        // Look for a neighbour to merge with when the chunk empties or first gets small.
        let merge = chunk.len() == 0 || (chunk.under() && !was_under);
        self.len -= 1;
        if merge {
            self.merge(key);
        }
        Some(match old {
            Old::Inline(n) => n,
            Old::Large => self.large.remove(key).map_or(0, |v| v.len()),
        })
    }

    /// Merges the chunk holding `key` into the previous one, or the next one into it, when
    /// the two fit in one; drops it when it is empty and not the first.
    fn merge(&mut self, key: &[u8]) {
        let Some((fence, i)) = self.floor(key) else { return };
        let fence = fence.to_vec();
        let chunk = &self.chunks[i];
        if chunk.len() == 0 && !fence.is_empty() {
            self.release(&fence);
            return;
        }
        let prev = self.before(&fence).next().map(|(_, p)| p);
        if let Some(p) = prev {
            let prev = &self.chunks[p];
            let chunk = &self.chunks[i];
            if prev.fits_with(chunk) {
                let merged = Chunk::pack(&[(prev, 0..prev.len()), (chunk, 0..chunk.len())]);
                // A shorter common prefix makes the keys longer: the two may not fit after all.
                if !merged.over() {
                    self.chunks[p] = merged;
                    self.release(&fence);
                    return;
                }
            }
        }
        let next = self.after(&fence).next().map(|(f, n)| (f.to_vec(), n));
        if let Some((next_fence, n)) = next {
            let (chunk, next) = (&self.chunks[i], &self.chunks[n]);
            if chunk.fits_with(next) {
                let merged = Chunk::pack(&[(chunk, 0..chunk.len()), (next, 0..next.len())]);
                if !merged.over() {
                    self.chunks[i] = merged;
                    self.release(&next_fence);
                }
            }
        }
    }

    /// Appends to `out` up to `limit` records of `[start, end)` in `direction`.
    fn collect(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        out: &mut VecDeque<KvPair>,
    ) {
        let mut room = limit;
        // Copies records `lo..hi` of `chunk` in the scan's direction; false when the batch is full.
        let mut take = |chunk: &Chunk, lo: usize, hi: usize| {
            let n = room.min(hi.saturating_sub(lo));
            match direction {
                Direction::Forward => out.extend((lo..lo + n).map(|i| self.pair(chunk, i))),
                Direction::Reverse => out.extend((hi - n..hi).rev().map(|i| self.pair(chunk, i))),
            }
            room -= n;
            room > 0
        };
        match direction {
            Direction::Forward => {
                let from = match start {
                    Bound::Included(key) | Bound::Excluded(key) => key,
                    Bound::Unbounded => &[],
                };
                let past = |key: &[u8]| match end {
                    Bound::Included(end) => compare(key, end).is_gt(),
                    Bound::Excluded(end) => compare(key, end).is_ge(),
                    Bound::Unbounded => false,
                };
                if past(from) {
                    return;
                }
                // The chunk holding `from`, then the chunks after it.
                let Some((fence, first)) = self.locate(from) else { return };
                let chunk = &self.chunks[first];
                let hi = chunk.end_index(end);
                if !take(chunk, chunk.start_index(start), hi) || hi < chunk.len() {
                    return;
                }
                for (fence, i) in self.after(fence) {
                    let chunk = &self.chunks[i];
                    let hi = chunk.end_index(end);
                    if past(fence) || !take(chunk, chunk.start_index(start), hi) || hi < chunk.len() {
                        return;
                    }
                }
            }
            Direction::Reverse => {
                // The chunk holding the end, then the chunks before it.
                let last = match end {
                    Bound::Included(end) | Bound::Excluded(end) => self.locate(end),
                    Bound::Unbounded => self.index.iter().next_back().map(|(f, &i)| (&f[..], i as usize)),
                };
                let Some((fence, last)) = last.or_else(|| self.first()) else { return };
                let chunk = &self.chunks[last];
                let lo = chunk.start_index(start);
                if !take(chunk, lo, chunk.end_index(end)) || lo > 0 {
                    return;
                }
                for (_, i) in self.before(fence) {
                    let chunk = &self.chunks[i];
                    let lo = chunk.start_index(start);
                    if !take(chunk, lo, chunk.len()) || lo > 0 {
                        return;
                    }
                }
            }
        }
    }

    /// Every record in key order.
    fn pairs(&self) -> impl Iterator<Item = KvPair> + '_ {
        self.all().flat_map(move |(_, i)| {
            let chunk = &self.chunks[i];
            (0..chunk.len()).map(move |i| self.pair(chunk, i))
        })
    }
}

impl PartialEq for Family {
    fn eq(&self, other: &Family) -> bool {
        self.len == other.len && self.pairs().eq(other.pairs())
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

/// An in-memory [`KvBackend`]: one chunked ordered map per column family (see the module
/// documentation).
///
/// Shareable between threads (`&self` everywhere): a batch is applied under the write lock,
/// so no reader sees half of it. A scan reads the map in batches, taking the read lock once
/// per batch, so a long scan never holds writers off; it sees each batch as of the moment it
/// is read (commands get their consistency from the key locks of [`crate::Engine`]).
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
        // Only a panic inside `write` (allocation failure) poisons the lock; go on rather
        // than fail every later command.
        self.cfs.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Every record of a column family, in key order (a copy taken under one read lock).
    pub fn records(&self, cf: ColumnFamily) -> std::vec::IntoIter<KvPair> {
        let maps = self.maps();
        let copy: Vec<KvPair> = maps[cf as usize].pairs().collect();
        copy.into_iter()
    }

    /// Number of records in a column family.
    pub fn len(&self, cf: ColumnFamily) -> usize {
        self.maps()[cf as usize].len
    }

    /// Whether all four column families are empty.
    pub fn is_empty(&self) -> bool {
        self.maps().cfs.iter().all(|f| f.len == 0)
    }

    /// The bytes of every key and value stored, across the four column families: the
    /// figure INFO memory and a `maxmemory` limit use (the maps' own overhead is not counted).
    pub fn bytes(&self) -> u64 {
        self.maps().bytes
    }
}

impl KvBackend for MemoryBackend {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.maps()[cf as usize].get(key))
    }

    fn get_with(&self, cf: ColumnFamily, key: &[u8], read: &mut dyn FnMut(Option<&[u8]>)) -> Result<()> {
        read(self.maps()[cf as usize].value(key));
        Ok(())
    }

    fn multi_get(&self, cf: ColumnFamily, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
        let maps = self.maps();
        let family = &maps[cf as usize];
        Ok(keys.iter().map(|k| family.get(k)).collect())
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        if range.end.as_ref().is_some_and(|end| end.as_slice() <= range.start.as_slice()) {
            return Ok(Box::new(std::iter::empty()));
        }
        let start = Bound::Included(Bytes::copy_from_slice(&range.start));
        let end = range.end.as_ref().map_or(Bound::Unbounded, |e| Bound::Excluded(Bytes::copy_from_slice(e)));
        Ok(Box::new(Batches {
            backend: self,
            cf,
            start,
            end,
            direction,
            buf: VecDeque::new(),
            batch: 16,
            done: false,
        }))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        // Refuse a key too long for a chunk before applying any of the batch.
        let too_long = batch.ops().iter().find_map(|op| match op {
            BatchOp::Put { key, .. } | BatchOp::Delete { key, .. } => {
                (key.len() >= KEY_LIMIT).then_some(key.len())
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

    /// A copy of the whole store, taken under its lock: O(data), and writes wait meanwhile.
    fn snapshot(&self) -> Result<Option<super::Snapshot>> {
        Ok(Some(std::sync::Arc::new(self.clone())))
    }
}

/// A lazy scan reading `batch` records per read lock, doubling the batch up to 1024 so short
/// scans (LRANGE 0 9) copy little and long ones take the lock rarely. Each batch starts again
/// from just past the last key of the one before, so writes between batches never make it
/// repeat or reorder keys.
struct Batches<'a> {
    backend: &'a MemoryBackend,
    cf: ColumnFamily,
    start: Bound<Bytes>,
    end: Bound<Bytes>,
    direction: Direction,
    buf: VecDeque<KvPair>,
    batch: usize,
    done: bool,
}

impl Batches<'_> {
    fn refill(&mut self) {
        let maps = self.backend.maps();
        let (start, end) = (self.start.as_ref().map(|b| &b[..]), self.end.as_ref().map(|b| &b[..]));
        maps[self.cf as usize].collect(start, end, self.direction, self.batch, &mut self.buf);
        drop(maps);
        if self.buf.len() < self.batch {
            self.done = true;
        }
        if let Some((last, _)) = self.buf.back() {
            match self.direction {
                Direction::Forward => self.start = Bound::Excluded(last.clone()),
                Direction::Reverse => self.end = Bound::Excluded(last.clone()),
            }
        }
        self.batch = (self.batch * 2).min(1024);
    }
}

impl Iterator for Batches<'_> {
    type Item = Result<KvPair>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() && !self.done {
            self.refill();
        }
        self.buf.pop_front().map(Ok)
    }
}

#[cfg(test)]
impl Family {
    /// Panics unless the chunks are well formed: fences in order, the first one empty, every
    /// key of a chunk at or above its fence, below the next one, in order and under the
    /// chunk's prefix, every chunk within its bounds (or a single record), no empty chunk but
    /// the first, the dead bytes counted and under the rewrite bound, and the record count
    /// right.
    fn check(&self) {
        let placed: Vec<(&[u8], usize)> = self.all().collect();
        assert!(self.index.keys().all(|f| !f.is_empty()), "the empty fence is not in the index");
        assert_eq!(placed.is_empty(), self.first == NO_CHUNK);
        let mut places: Vec<u32> =
            placed.iter().map(|&(_, i)| i as u32).chain(self.free.iter().copied()).collect();
        places.sort_unstable();
        assert!(places.iter().copied().eq(0..self.chunks.len() as u32), "each place used once or free");
        for &i in &self.free {
            assert_eq!(self.chunks[i as usize].buf.capacity(), 0, "a free place holds nothing");
        }
        if let Some(i) = self.finger.find(&self.finger.lo) {
            assert_eq!(self.floor(&self.finger.lo), Some((&self.finger.lo[..], i)), "the finger's fence");
            let next = self.after(&self.finger.lo).next().map(|(f, _)| f);
            assert_eq!(next, self.finger.hi.as_deref(), "the finger's next fence");
        }
        let mut count = 0;
        let mut previous: Option<Vec<u8>> = None;
        for (n, &(fence, i)) in placed.iter().enumerate() {
            let chunk = &self.chunks[i];
            assert!(n == 0 || chunk.len() > 0, "an empty chunk that is not the first");
            assert!(
                !chunk.over(),
                "a chunk over its bounds: {} records, {} bytes",
                chunk.len(),
                chunk.live()
            );
            let used: usize = (0..chunk.len()).map(|i| chunk.entry(i).len).sum();
            assert_eq!(chunk.plen + used + chunk.dead, chunk.buf.len(), "dead bytes counted");
            assert!(!chunk.wasteful(), "dead bytes past the rewrite bound");
            for i in 0..chunk.len() {
                let key = chunk.key(i);
                assert!(key.starts_with(chunk.prefix()));
                assert_eq!(chunk.slots[i].head, head(chunk.entry(i).suffix), "the slot's head");
                assert!(&key[..] >= fence, "a key below its chunk's fence");
                if let Some(&(next, _)) = placed.get(n + 1) {
                    assert!(&key[..] < next, "a key at or above the next fence");
                }
                assert!(previous.as_ref().is_none_or(|p| *p < key), "keys in order");
                assert_eq!(chunk.search(&key), Ok(i));
                let large = chunk.entry(i).value.is_none();
                assert_eq!(large, self.large.contains_key(&key[..]), "large values kept apart");
                previous = Some(key);
            }
            count += chunk.len();
        }
        assert_eq!(count, self.len, "record count");
        assert_eq!(self.large.len(), self.pairs().filter(|(_, v)| v.len() > INLINE_MAX).count());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A key is found, or placed, at a chunk's ends as in its middle: before the first key,
    /// after the last, on the last, and among keys that share their first four bytes past
    /// the prefix (the last slot's head tied with the one before it), or whose suffixes are
    /// shorter and differ only in trailing zero bytes (equal heads too).
    #[test]
    fn a_search_at_either_end_agrees_with_the_sorted_keys() {
        let keys: [&[u8]; 8] = [
            b"p\x10",
            b"p\x10\x00",
            b"p\x10\x00\x00\x00\x00",
            b"p\x20",
            b"p\x30abcd1",
            b"p\x30abcd2",
            b"p\x30abcd3",
            b"p\x40",
        ];
        for n in 1..=keys.len() {
            for skip in 0..n {
                // The chunk holds `n` keys but the one at `skip`, which is searched for as absent.
                let mut chunk = Chunk::default();
                let held: Vec<&[u8]> =
                    keys[..n].iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, k)| *k).collect();
                for key in &held {
                    chunk.put(key, Some(b"v"));
                }
                let mut probes: Vec<&[u8]> = keys[..n].to_vec();
                probes.extend([
                    &b"p"[..],
                    b"p\x00",
                    b"p\x05",
                    b"p\x10\x00\x00",
                    b"p\x10\x00\x00\x00",
                    b"p\x10\x00\x00\x00\x00\x00",
                    b"p\x30",
                    b"p\x30abc",
                    b"p\x30abcd",
                    b"p\x30abcd9",
                    b"p\x50",
                    b"q",
                ]);
                for probe in probes {
                    let expected = held.binary_search(&probe);
                    assert_eq!(chunk.search(probe), expected, "{probe:?} among {held:?}");
                }
            }
        }
    }

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

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// A key from a small space where keys share prefixes, are prefixes of each other, hold
    /// 0x00 and 0xff bytes, run in sequence (as list elements do), or are longer than a chunk.
    fn random_key(rng: &mut Rng) -> Vec<u8> {
        const PREFIXES: [&[u8]; 6] = [
            b"",
            b"a",
            b"\x00",
            b"\xff\xff",
            b"ns\x00\x00\x00\x04list\x01\x02\x03\x04\x05\x06\x07\x08",
            b"ns\x00\x00\x00\x04hash",
        ];
        let mut key = PREFIXES[rng.below(PREFIXES.len())].to_vec();
        match rng.below(8) {
            0 => key.extend(std::iter::repeat_n(b'k', 300 + rng.below(3))),
            1..=3 => key.extend_from_slice(&(0x8000u64 + rng.below(400) as u64).to_be_bytes()),
            _ => {
                for _ in 0..rng.below(4) {
                    key.push([0x00, 0x01, b'a', b'b', 0x7f, 0xff][rng.below(6)]);
                }
            }
        }
        key
    }

    /// Puts `key` (deletes it, without a value) in the model and in the batch alike.
    fn write_both(
        model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
        batch: &mut WriteBatch,
        cf: ColumnFamily,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) {
        match value {
            Some(value) => {
                model.insert(key.clone(), value.clone());
                batch.put(cf, key, value);
            }
            None => {
                model.remove(&key);
                batch.delete(cf, key);
            }
        }
    }

    fn random_value(rng: &mut Rng) -> Vec<u8> {
        let len = match rng.below(20) {
            0 => INLINE_MAX + 1 + rng.below(100),
            1 => INLINE_MAX,
            2..=4 => 100 + rng.below(200),
            5 => 0,
            _ => rng.below(12),
        };
        vec![rng.below(256) as u8; len]
    }

    fn bound_key(rng: &mut Rng) -> Vec<u8> {
        let mut key = random_key(rng);
        if rng.below(3) == 0 {
            key.truncate(rng.below(key.len() + 1));
        }
        key
    }

    fn scanned(
        b: &MemoryBackend,
        cf: ColumnFamily,
        range: &KeyRange,
        direction: Direction,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        b.scan(cf, range, direction)
            .unwrap()
            .map(|item| {
                let (k, v) = item.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect()
    }

    fn expected(
        model: &BTreeMap<Vec<u8>, Vec<u8>>,
        range: &KeyRange,
        direction: Direction,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        if range.end.as_ref().is_some_and(|end| *end <= range.start) {
            return Vec::new();
        }
        let end = range.end.as_ref().map_or(Bound::Unbounded, |e| Bound::Excluded(e.clone()));
        let pairs =
            model.range((Bound::Included(range.start.clone()), end)).map(|(k, v)| (k.clone(), v.clone()));
        match direction {
            Direction::Forward => pairs.collect(),
            Direction::Reverse => pairs.rev().collect(),
        }
    }

    /// Checks every read of the backend against the model.
    fn check_against(b: &MemoryBackend, models: &[BTreeMap<Vec<u8>, Vec<u8>>; 4], rng: &mut Rng) {
        let mut bytes = 0;
        for (cf, model) in ColumnFamily::ALL.into_iter().zip(models) {
            b.maps()[cf as usize].check();
            assert_eq!(b.len(cf), model.len());
            for (k, v) in model {
                assert_eq!(
                    b.get(cf, k).unwrap().as_deref(),
                    Some(&v[..]),
                    "get {:?}",
                    k.escape_ascii().to_string()
                );
                bytes += k.len() + v.len();
            }
            for _ in 0..8 {
                let k = bound_key(rng);
                assert_eq!(b.get(cf, &k).unwrap().as_deref(), model.get(&k).map(|v| &v[..]));
            }
            let keys: Vec<&[u8]> = model.keys().map(|k| &k[..]).chain([&b"absent"[..]]).collect();
            let want: Vec<Option<Bytes>> =
                keys.iter().map(|k| model.get(*k).map(|v| Bytes::from(v.clone()))).collect();
            assert_eq!(b.multi_get(cf, &keys).unwrap(), want);
            let all = KeyRange { start: Vec::new(), end: None };
            for direction in [Direction::Forward, Direction::Reverse] {
                assert_eq!(scanned(b, cf, &all, direction), expected(model, &all, direction));
                for _ in 0..4 {
                    let range =
                        KeyRange { start: bound_key(rng), end: (rng.below(4) != 0).then(|| bound_key(rng)) };
                    assert_eq!(
                        scanned(b, cf, &range, direction),
                        expected(model, &range, direction),
                        "{range:?}"
                    );
                }
            }
            let records: Vec<(Vec<u8>, Vec<u8>)> =
                b.records(cf).map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            assert_eq!(records, expected(model, &all, Direction::Forward));
        }
        assert_eq!(b.bytes(), bytes as u64);
        assert_eq!(b.is_empty(), models.iter().all(BTreeMap::is_empty));
    }

    /// Thousands of random batches against a `BTreeMap` per column family: puts of short and
    /// long keys sharing prefixes or running in sequence, overwrites with shorter, longer and
    /// large values, deletes of present and absent keys. The store grows and shrinks in
    /// phases, so chunks split, merge, compact and change their prefixes throughout.
    #[test]
    fn matches_a_model_through_random_batches() {
        let b = MemoryBackend::new();
        let mut models: [BTreeMap<Vec<u8>, Vec<u8>>; 4] = Default::default();
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let mut most = 0;
        for round in 0..3000 {
            // Phases of 500 batches: growing, then shrinking.
            let put_share = if round / 500 % 2 == 0 { 7 } else { 3 };
            let mut batch = WriteBatch::new();
            for _ in 0..1 + rng.below(12) {
                let cfs = if rng.below(8) == 0 { 4 } else { 2 };
                let cf = ColumnFamily::ALL[rng.below(cfs)];
                let model = &mut models[cf as usize];
                // Deletes mostly hit present keys, puts often overwrite.
                let key = if !model.is_empty() && rng.below(2) == 0 {
                    model.keys().nth(rng.below(model.len())).cloned().unwrap_or_default()
                } else {
                    random_key(&mut rng)
                };
                let value = (rng.below(10) < put_share).then(|| random_value(&mut rng));
                write_both(model, &mut batch, cf, key, value);
            }
            b.write(batch).unwrap();
            check_against(&b, &models, &mut rng);
            most = most.max(b.maps().cfs.iter().map(|f| f.all().count()).sum());
            if round % 250 == 0 {
                // A copy holds the same records and compares equal; a write tells them apart.
                let copy = b.clone();
                check_against(&copy, &models, &mut rng);
                assert!(copy == b);
                assert!(!format!("{copy:?}").is_empty());
                let mut batch = WriteBatch::new();
                batch.put(ColumnFamily::Metadata, &b"only in the copy"[..], &b"v"[..]);
                copy.write(batch).unwrap();
                assert!(copy != b);
            }
        }
        assert!(most > 100, "the test made at most {most} chunks: too few to split and merge");
        // Everything deleted: each family is down to its empty first chunk.
        let mut batch = WriteBatch::new();
        for (cf, model) in ColumnFamily::ALL.into_iter().zip(&models) {
            for key in model.keys() {
                batch.delete(cf, key.clone());
            }
        }
        b.write(batch).unwrap();
        assert!(b.is_empty());
        assert_eq!(b.bytes(), 0);
        for family in &b.maps().cfs {
            family.check();
            assert!(family.all().count() <= 1);
            assert!(family.chunks.iter().all(|c| c.buf.capacity() == 0));
            assert!(family.large.is_empty());
        }
    }

    /// Runs of keys appended at the end (RPUSH), prepended (LPUSH) or running up or down
    /// inside the family, then deleted from either end or at random: the chunks stay in
    /// order and within their bounds, they fill well while the runs grow, and they merge
    /// back as the records go.
    #[test]
    fn runs_fill_chunks_and_deletes_merge_them() {
        let b = MemoryBackend::new();
        let cf = ColumnFamily::Subkey;
        let key = |prefix: &[u8], i: u64| [prefix, &i.to_be_bytes()].concat();
        let put = |k: Vec<u8>| {
            let mut batch = WriteBatch::new();
            batch.put(cf, k, &b"0123456789"[..]);
            b.write(batch).unwrap();
        };
        // Keys on both sides of the runs, as other collections are.
        for i in 0..20 {
            put(key(b"a", i));
            put(key(b"z", i));
        }
        for i in 0..2000 {
            put(key(b"m-up", i));
            put(key(b"m-down", u64::MAX - i));
        }
        let family = |f: &dyn Fn(&Family)| f(&b.maps()[cf as usize]);
        family(&|f| {
            f.check();
            // 4,040 records in chunks of at most CHUNK_RECORDS: sequential runs leave them
            // about seven-eighths full, not half.
            let chunks = f.all().count();
            assert!(chunks * CHUNK_RECORDS * 3 < f.len * 4, "{chunks} chunks for {} records", f.len);
        });
        let mut rng = Rng(7);
        let mut left: Vec<Vec<u8>> = b.records(cf).map(|(k, _)| k.to_vec()).collect();
        while left.len() > 10 {
            let i = match rng.below(3) {
                0 => 0,
                1 => left.len() - 1,
                _ => rng.below(left.len()),
            };
            let mut batch = WriteBatch::new();
            batch.delete(cf, left.remove(i));
            b.write(batch).unwrap();
        }
        family(&|f| {
            f.check();
            let chunks = f.all().count();
            assert!(chunks <= 4, "{chunks} chunks left for {} records", f.len);
            assert!(f.chunks.len() <= 4 + 64, "a slab of {} places for {chunks} chunks", f.chunks.len());
        });
        let got: Vec<Vec<u8>> = b.records(cf).map(|(k, _)| k.to_vec()).collect();
        assert_eq!(got, left);
    }

    /// Puts `keys` into a new chunk in the order given, as [`Family::put`] does, until the
    /// chunk is over its bounds; answers it and where the last key went.
    fn overfull(keys: impl IntoIterator<Item = Vec<u8>>, value: &[u8]) -> (Chunk, usize) {
        let mut chunk = Chunk::default();
        for key in keys {
            let (pos, _) = chunk.put(&key, Some(value));
            if chunk.over() {
                return (chunk, pos);
            }
            chunk.last = pos as u32;
        }
        panic!("the keys did not fill a chunk");
    }

    /// Panics unless the pieces of a split hold `keys` in order behind fences that separate
    /// them, each within its bounds, its dead bytes counted and under the rewrite bound, and
    /// its prefix one its keys share.
    fn check_pieces(keys: &[Vec<u8>], first: &Chunk, rest: &[(Box<[u8]>, Chunk)]) {
        let pieces: Vec<&Chunk> = [first].into_iter().chain(rest.iter().map(|(_, c)| c)).collect();
        let got: Vec<Vec<u8>> = pieces.iter().flat_map(|c| (0..c.len()).map(|i| c.key(i))).collect();
        assert_eq!(got, keys);
        for (n, piece) in pieces.iter().enumerate() {
            assert!(piece.len() > 0 && !piece.over() && !piece.wasteful());
            let used: usize = (0..piece.len()).map(|i| piece.entry(i).len).sum();
            assert_eq!(piece.plen + used + piece.dead, piece.buf.len(), "dead bytes counted");
            let (lo, hi) = (piece.key(0), piece.key(piece.len() - 1));
            assert!(piece.plen <= common_prefix(&lo, &hi), "a prefix the keys share");
            for i in 0..piece.len() {
                assert_eq!(piece.slots[i].head, head(piece.entry(i).suffix));
                assert_eq!(piece.search(&piece.key(i)), Ok(i));
            }
            if n > 0 {
                let fence = &rest[n - 1].0[..];
                assert!(pieces[n - 1].key(pieces[n - 1].len() - 1).as_slice() < fence);
                assert!(fence <= lo.as_slice());
            }
        }
    }

    /// Runs of keys split the chunk they fill near the run's start (LPUSH) or end (RPUSH):
    /// the larger piece keeps its records where they are in the buffer and the latest keys
    /// are cut off its end, the smaller is built; a piece whose slot heads would all be the
    /// same is built too, with the longer prefix its keys share, and so is one left with too
    /// many dead bytes.
    #[test]
    fn a_split_keeps_the_larger_piece_in_place() {
        let key = |prefix: &[u8], i: u64| [prefix, &i.to_be_bytes()].concat();
        let ascending: Vec<Vec<u8>> = (1000..1100).map(|i| key(b"list", i)).collect();
        let descending: Vec<Vec<u8>> = (0..100).rev().map(|i| key(b"list", i)).collect();
        // The keys, and whether the larger piece is the lower one and stays in place.
        let cases = [
            (ascending.clone(), Some((true, true))),
            (descending.clone(), Some((false, true))),
            // Descending into a chunk that also holds another collection's key: the run's
            // piece is built with the prefix the run shares.
            ([vec![b'a']].into_iter().chain(descending).collect(), Some((false, false))),
            // Values of a quarter and a fifth of the byte bound: the bytes bound splits. The
            // last key goes neither where the one before went nor next to it: in halves, where
            // the records cut away would be too many dead bytes, so both pieces are built.
            (ascending, None),
            ([10, 50, 30, 20, 40].map(|i| key(b"hash", i)).to_vec(), Some((true, false))),
            // Descending across a multiple of 256: the larger piece's keys share one more
            // byte than the chunk's, and its slot heads still tell them apart.
            ((0x1ff..=0x207).rev().map(|i| key(b"list", i)).collect(), Some((false, true))),
        ];
        for (n, (keys, expect)) in cases.into_iter().enumerate() {
            let value = vec![b'v'; [3, 3, 3, CHUNK_BYTES / 4, CHUNK_BYTES / 5, 3][n]];
            let (mut chunk, pos) = overfull(keys, &value);
            let keys: Vec<Vec<u8>> = (0..chunk.len()).map(|i| chunk.key(i)).collect();
            let (slots, buf) = (chunk.slots.clone(), chunk.buf.clone());
            let rest = chunk.split(Some(pos));
            check_pieces(&keys, &chunk, &rest);
            assert_eq!(rest.len(), 1, "case {n}: two pieces");
            if let Some((lower_kept, in_place)) = expect {
                let (kept, cut) = if lower_kept { (&chunk, &rest[0].1) } else { (&rest[0].1, &chunk) };
                assert!(kept.len() > cut.len(), "case {n}: the larger piece");
                let at = if lower_kept { 0 } else { cut.len() };
                let same = kept.slots[..] == slots[at..at + kept.len()] && buf.starts_with(&kept.buf);
                assert_eq!(same, in_place, "case {n}: the larger piece in place");
                if in_place {
                    assert_eq!(kept.dead, 0, "case {n}: the latest keys cut off the buffer's end");
                }
            }
        }
    }

    /// The piece a run of keys goes on in after a split has a prefix a byte shorter than the
    /// split chunk's keys shared: a list pushed at either end goes on across a multiple of
    /// 256 in its index without a rebuild (which would shorten the prefix).
    #[test]
    fn a_run_goes_on_across_a_multiple_of_256_without_a_rebuild() {
        let key = |i: u64| [&b"list"[..], &i.to_be_bytes()].concat();
        // LPUSH from 0x108 down to 0x100, then on across 0x100; RPUSH from 0x2f0 up to
        // 0x2f8, then on across 0x300.
        let runs: [(Vec<u64>, Vec<u64>); 2] = [
            ((0x100..=0x108).rev().collect(), (0xf8..=0xff).rev().collect()),
            ((0x2f0..=0x2f8).collect(), (0x2f9..=0x301).collect()),
        ];
        for (keys, next) in runs {
            let (mut chunk, pos) = overfull(keys.iter().map(|&i| key(i)), b"v");
            let whole = common_prefix(&chunk.key(0), &chunk.key(chunk.len() - 1));
            let mut rest = chunk.split(Some(pos));
            assert_eq!(rest.len(), 1);
            let (lower, upper) = (&mut chunk, &mut rest[0].1);
            let run = if pos == 0 { lower } else { upper };
            assert_eq!(run.plen, whole - 1, "the run's piece: a byte spare");
            for i in next {
                run.put(&key(i), Some(b"v"));
                assert_eq!(run.plen, whole - 1, "{i:#x} went in without a rebuild");
            }
        }
    }

    /// Records deleted oldest first from a chunk whose buffer holds them newest last (a list
    /// pushed at its head, popped at its tail) leave their dead bytes before the live ones:
    /// the compaction moves the live bytes down within the buffer. Deletes elsewhere leave
    /// holes, and the chunk is rebuilt. Either way every key left keeps its value.
    #[test]
    fn a_compaction_of_dead_bytes_before_the_live_ones_moves_them_down() {
        let key = |i: u64| [&b"list"[..], &i.to_be_bytes()].concat();
        for tail_first in [true, false] {
            let mut chunk = Chunk::default();
            for i in (0..100u64).rev() {
                chunk.put(&key(i), Some(&i.to_le_bytes()));
            }
            let mut left: Vec<u64> = (0..100).collect();
            let mut compactions = 0;
            while left.len() > 10 {
                // The tail (the oldest record, first in the buffer), or one from the middle.
                let i = if tail_first { left.pop().unwrap() } else { left.remove(left.len() / 2) };
                let (capacity, dead) = (chunk.buf.capacity(), chunk.dead);
                assert!(chunk.delete(&key(i)).is_some());
                if chunk.dead < dead {
                    compactions += 1;
                    assert_eq!(chunk.dead, 0);
                    assert_eq!(chunk.buf.capacity() == capacity, tail_first, "moved down in place");
                }
                for (n, &j) in left.iter().enumerate() {
                    assert_eq!(chunk.search(&key(j)), Ok(n));
                    assert_eq!(chunk.entry(n).value, Some(&j.to_le_bytes()[..]));
                }
                assert_eq!(chunk.search(&key(i)), Err(left.partition_point(|&j| j < i)));
            }
            assert!(compactions > 0, "the dead bytes were worth a rewrite");
        }
    }

    /// LPUSH- and RPUSH-like runs of thousands of keys, alone and mixed with random puts and
    /// deletes around them: after every split or merge the store holds the model's records,
    /// in order, in well-formed chunks within their bounds.
    #[test]
    fn runs_and_random_writes_match_a_model_at_every_split() {
        let b = MemoryBackend::new();
        let cf = ColumnFamily::Subkey;
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut rng = Rng(0xC0FF_EE00_1234_5678);
        let list = |n: u8, i: u64| [&b"ns\x00\x00\x00\x04list"[..], &[n], &i.to_be_bytes()].concat();
        let hash = |i: u64| [&b"ns\x00\x00\x00\x04hash"[..], &i.to_be_bytes()].concat();
        let (mut head, mut tail) = (1u64 << 40, 1u64 << 40);
        let mut splits = 0;
        for step in 0..6000 {
            let len = match rng.below(100) {
                0 => INLINE_MAX + 1,
                1..=2 => 120,
                _ => rng.below(8),
            };
            let value = vec![step as u8; len];
            let (key, put) = match (step / 1500, rng.below(10)) {
                (0, _) => {
                    head -= 1;
                    (list(1, head), true)
                }
                (1, _) => {
                    tail += 1;
                    (list(2, tail), true)
                }
                (_, 0..=2) => {
                    head -= 1;
                    (list(1, head), true)
                }
                (_, 3..=5) => {
                    tail += 1;
                    (list(2, tail), true)
                }
                (_, 6..=7) => (hash(rng.next() % 4096), true),
                _ => match model.keys().nth(rng.below(model.len())) {
                    Some(k) => (k.clone(), false),
                    None => continue,
                },
            };
            let chunks = b.maps()[cf as usize].all().count();
            let mut batch = WriteBatch::new();
            write_both(&mut model, &mut batch, cf, key, put.then_some(value));
            b.write(batch).unwrap();
            let now = b.maps()[cf as usize].all().count();
            if now == chunks {
                continue;
            }
            splits += usize::from(now > chunks);
            b.maps()[cf as usize].check();
            for (k, v) in &model {
                assert_eq!(b.get(cf, k).unwrap().as_deref(), Some(&v[..]), "step {step}");
            }
            let all = KeyRange { start: Vec::new(), end: None };
            for direction in [Direction::Forward, Direction::Reverse] {
                assert!(scanned(&b, cf, &all, direction) == expected(&model, &all, direction), "step {step}");
            }
        }
        assert!(splits > 500, "only {splits} splits");
    }

    /// Keys longer than a chunk's byte bound live in chunks of their own; overwrites and
    /// deletes around them keep everything readable.
    #[test]
    fn records_larger_than_a_chunk() {
        let b = MemoryBackend::new();
        let cf = ColumnFamily::Metadata;
        let mut model = BTreeMap::new();
        let mut rng = Rng(99);
        for _ in 0..300 {
            let key = vec![b'a' + rng.below(3) as u8; 1 + rng.below(3) * CHUNK_BYTES];
            let mut batch = WriteBatch::new();
            if rng.below(4) == 0 {
                model.remove(&key);
                batch.delete(cf, key);
            } else {
                let value = vec![1; rng.below(3) * CHUNK_BYTES];
                model.insert(key.clone(), value.clone());
                batch.put(cf, key, value);
            }
            b.write(batch).unwrap();
            b.maps()[cf as usize].check();
            let all = KeyRange { start: Vec::new(), end: None };
            assert_eq!(scanned(&b, cf, &all, Direction::Forward), expected(&model, &all, Direction::Forward));
        }
    }

    /// A scan that sees batches written between its refills still yields keys strictly in
    /// order, never twice, and every key that was there for the whole scan.
    #[test]
    fn a_scan_sees_writes_between_batches_in_order() {
        for direction in [Direction::Forward, Direction::Reverse] {
            let b = MemoryBackend::new();
            let cf = ColumnFamily::Subkey;
            let key = |i: u64| [&b"k"[..], &i.to_be_bytes()].concat();
            let mut batch = WriteBatch::new();
            for i in (0..4000).step_by(2) {
                batch.put(cf, key(i), &b"v"[..]);
            }
            b.write(batch).unwrap();
            let mut rng = Rng(0xDEAD_BEEF);
            // Even keys below 1000 and from 3000 are never deleted.
            let kept: Vec<Vec<u8>> =
                (0..4000).step_by(2).filter(|i| !(1000..3000).contains(i)).map(key).collect();
            let range = KeyRange { start: b"k".to_vec(), end: Some(b"l".to_vec()) };
            let mut seen: Vec<Vec<u8>> = Vec::new();
            for item in b.scan(cf, &range, direction).unwrap() {
                seen.push(item.unwrap().0.to_vec());
                let mut batch = WriteBatch::new();
                for _ in 0..3 {
                    let i = rng.below(4000) as u64;
                    if i % 2 == 1 {
                        batch.put(cf, key(i), &b"new"[..]);
                    } else if (1000..3000).contains(&i) {
                        batch.delete(cf, key(i));
                    }
                }
                b.write(batch).unwrap();
            }
            let mut sorted = seen.clone();
            sorted.sort();
            sorted.dedup();
            if direction == Direction::Reverse {
                sorted.reverse();
            }
            assert_eq!(seen, sorted, "strictly in order, no duplicates");
            for k in &kept {
                assert!(
                    seen.binary_search_by(|s| if direction == Direction::Forward {
                        s.cmp(k)
                    } else {
                        k.cmp(s)
                    })
                    .is_ok()
                );
            }
            b.maps()[cf as usize].check();
        }
    }

    proptest::proptest! {
        /// Any sequence of puts and deletes over a tiny key space leaves the same records as
        /// a `BTreeMap` and well-formed chunks.
        #[test]
        fn any_writes_match_a_model(
            ops in proptest::collection::vec(
                (proptest::prelude::any::<bool>(), proptest::collection::vec(0u8..4, 0..5), 0usize..300),
                0..200,
            )
        ) {
            let b = MemoryBackend::new();
            let mut model = BTreeMap::new();
            for (put, key, len) in ops {
                let mut batch = WriteBatch::new();
                if put {
                    model.insert(key.clone(), vec![7; len]);
                    batch.put(ColumnFamily::Score, key, vec![7; len]);
                } else {
                    model.remove(&key);
                    batch.delete(ColumnFamily::Score, key);
                }
                b.write(batch).unwrap();
            }
            b.maps()[ColumnFamily::Score as usize].check();
            let all = KeyRange { start: Vec::new(), end: None };
            for direction in [Direction::Forward, Direction::Reverse] {
                proptest::prop_assert_eq!(
                    scanned(&b, ColumnFamily::Score, &all, direction),
                    expected(&model, &all, direction)
                );
            }
        }
    }
}
