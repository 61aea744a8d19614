//! The list commands.
//!
//! A list is one metadata record (version, size, head, tail) plus one subkey per element,
//! whose `sub` is the element's stored index as a big-endian u64 (docs/layout.md, "List
//! indices"). The element at position `p` (0 = first) lives at stored index `head + p`;
//! the elements occupy exactly `[head, tail)`, so `size == tail - head`.
//!
//! Costs below count backend operations: "point read" is one `get`, "scan of n" is one
//! range scan yielding n records, writes are all in one batch.
//!
//! The blocking forms (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) serve at once when a key
//! holds a list; otherwise they block on their keys ([`crate::commands::Block`]: BLMOVE and BRPOPLPUSH
//! on the source only), or inside MULTI answer their timeout reply (nil array; BLMOVE and
//! BRPOPLPUSH a nil bulk).

use bytes::Bytes;

use crate::backend::{Direction, KvBackend, WriteBatch};
use crate::codec::{
    ColumnFamily, KeyRange, Metadata, RedisType, Version, push_back_tail, push_front_index, stored_index,
};
use crate::commands::args::{int_arg, normalize_range, timeout_arg};
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandError, CommandResult, Db, Reply};

/// One end of a list: `LEFT` is the head (position 0), `RIGHT` the tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListEnd {
    /// The head: LPUSH/LPOP side.
    Left,
    /// The tail: RPUSH/RPOP side.
    Right,
}

impl ListEnd {
    /// Parses `LEFT` or `RIGHT`, case-insensitively.
    ///
    /// # Errors
    /// [`CommandError::Syntax`] for anything else.
    pub(crate) fn parse(arg: &[u8]) -> CommandResult<ListEnd> {
        if arg.eq_ignore_ascii_case(b"left") {
            Ok(ListEnd::Left)
        } else if arg.eq_ignore_ascii_case(b"right") {
            Ok(ListEnd::Right)
        } else {
            Err(CommandError::Syntax)
        }
    }

    /// The keyspace event of a push at this end.
    fn push_event(self) -> &'static str {
        match self {
            ListEnd::Left => "lpush",
            ListEnd::Right => "rpush",
        }
    }

    /// The keyspace event of a pop from this end.
    fn pop_event(self) -> &'static str {
        match self {
            ListEnd::Left => "lpop",
            ListEnd::Right => "rpop",
        }
    }
}

/// The options of LPOS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LposOptions {
    /// Which match to start from: 1 = first from the head, -1 = first from the tail. Never 0.
    /// `i64::MIN` behaves as -1 (as in Redis 7.0, where negating it leaves it negative).
    pub(crate) rank: i64,
    /// How many positions to return; 0 = all matches.
    pub(crate) count: u64,
    /// How many elements to compare at most; 0 = the whole list.
    pub(crate) maxlen: u64,
}

impl Default for LposOptions {
    fn default() -> Self {
        LposOptions { rank: 1, count: 1, maxlen: 0 }
    }
}

/// The stored keys of one list incarnation: the shared subkey prefix, then the index (as
/// [`crate::codec::KeyLayout::list_sub`] writes it: TiTea's are signed positions).
///
/// Every key is built in a vector of exactly its length (the prefix is made with room for
/// one index), which becomes the batch's `Bytes` without a second allocation.
#[derive(Clone)]
struct ElemKeys {
    prefix: Vec<u8>,
    titea: bool,
}

impl ElemKeys {
    /// The bytes of an index after the prefix.
    fn sub_len(titea: bool) -> usize {
        if titea { 9 } else { 8 }
    }

    fn push_sub(&self, key: &mut Vec<u8>, index: u64) {
        if self.titea {
            key.extend_from_slice(&crate::codec::titea::list_sub(index));
        } else {
            key.extend_from_slice(&index.to_be_bytes());
        }
    }

    fn at(&self, index: u64) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + ElemKeys::sub_len(self.titea));
        k.extend_from_slice(&self.prefix);
        self.push_sub(&mut k, index);
        k
    }

    /// The key at `index`, built in the prefix's own vector: the last key a command needs.
    fn into_at(mut self, index: u64) -> Vec<u8> {
        let mut k = std::mem::take(&mut self.prefix);
        self.push_sub(&mut k, index);
        k
    }

    /// The index of the record `key` (under the prefix), if it is one.
    fn index_of(&self, key: &[u8]) -> Option<u64> {
        let sub = key.get(self.prefix.len()..)?;
        if self.titea {
            crate::codec::titea::decode_list_sub(sub)
        } else {
            Some(u64::from_be_bytes(sub.try_into().ok()?))
        }
    }
}

/// The shortest list whose pops tell the store to read ahead ([`KvBackend::get_ahead`]).
const READ_AHEAD_LEN: u64 = 8;

fn corrupted() -> CommandError {
    CommandError::Other("ERR storage error: list element missing or out of place".into())
}

/// The length of a list as an i64 (saturating; a list never gets near 2^63 elements).
fn len_i64(meta: &Metadata<'_>) -> i64 {
    i64::try_from(meta.size).unwrap_or(i64::MAX)
}

/// Resolves a Redis index (negative counts from the tail) to a position, if in range.
fn resolve_index(meta: &Metadata<'_>, index: i64) -> Option<u64> {
    let len = len_i64(meta);
    let i = if index < 0 { index.checked_add(len)? } else { index };
    if (0..len).contains(&i) { u64::try_from(i).ok() } else { None }
}

/// Normalises LRANGE/LTRIM bounds: `Some((start, end))` inclusive positions, or `None`
/// when the range is empty.
fn list_range(meta: &Metadata<'_>, start: i64, stop: i64) -> Option<(u64, u64)> {
    let (start, stop) = normalize_range(start, stop, len_i64(meta))?;
    Some((u64::try_from(start).ok()?, u64::try_from(stop).ok()?))
}

impl<B: KvBackend> Db<'_, B> {
    fn elem_keys(&self, key: &[u8], version: Version) -> CommandResult<ElemKeys> {
        let titea = self.layout().kind() == crate::codec::LayoutKind::TiTea;
        Ok(ElemKeys { prefix: self.layout().subkey_prefix(key, version, ElemKeys::sub_len(titea))?, titea })
    }

    /// The live list at `key`, `None` when missing, WRONGTYPE for another type, and a
    /// storage error when its head, tail and size disagree (so no arithmetic on them can
    /// go wrong later).
    fn list_meta(&self, key: &[u8]) -> CommandResult<Option<Metadata<'static>>> {
        self.list_meta_at(&self.metadata_key(key))
    }

    /// [`Db::list_meta`] by metadata key, for the commands that write it back.
    fn list_meta_at(&self, mkey: &[u8]) -> CommandResult<Option<Metadata<'static>>> {
        let meta = self.lookup_of_at(mkey, RedisType::List)?;
        if let Some(m) = &meta
            && m.tail.checked_sub(m.head) != Some(m.size)
        {
            return Err(CommandError::Other("ERR storage error: list head/tail/size disagree".into()));
        }
        Ok(meta)
    }

    /// The live list at `key`, or a new empty one under a fresh version with fresh
    /// head/tail (a missing, expired or deleted key starts over).
    fn list_or_create_at(&self, mkey: &[u8]) -> CommandResult<Metadata<'static>> {
        match self.list_meta_at(mkey)? {
            Some(meta) => Ok(meta),
            None => Ok(self.new_collection(RedisType::List)),
        }
    }

    /// Reads positions `[from, to)` with one range scan, in `direction`; checks that every
    /// stored index is where it should be.
    fn read_span(
        &self,
        key: &[u8],
        meta: &Metadata<'_>,
        from: u64,
        to: u64,
        direction: Direction,
    ) -> CommandResult<Vec<Bytes>> {
        let mut out = Vec::new();
        self.for_each_in_span(key, meta, from, to, direction, |_, v| {
            out.push(v);
            true
        })?;
        Ok(out)
    }

    /// Walks positions `[from, to)` with one lazy range scan in `direction`, calling
    /// `f(position, value)` until it returns false. Errors when a stored index is missing.
    fn for_each_in_span(
        &self,
        key: &[u8],
        meta: &Metadata<'_>,
        from: u64,
        to: u64,
        direction: Direction,
        mut f: impl FnMut(u64, Bytes) -> bool,
    ) -> CommandResult<()> {
        if from >= to {
            return Ok(());
        }
        let keys = self.elem_keys(key, meta.version)?;
        let start = stored_index(meta.head, from)?;
        let end = stored_index(meta.head, to)?;
        let range = KeyRange { start: keys.at(start), end: Some(keys.at(end)) };
        let mut expected = match direction {
            Direction::Forward => from,
            Direction::Reverse => to - 1,
        };
        let mut seen = 0u64;
        for item in self.backend().scan(ColumnFamily::Subkey, &range, direction)? {
            let (k, v) = item?;
            let index = keys.index_of(&k).ok_or_else(corrupted)?;
            if index != meta.head + expected {
                return Err(corrupted());
            }
            seen += 1;
            if !f(expected, v) {
                return Ok(());
            }
            expected = match direction {
                Direction::Forward => expected + 1,
                Direction::Reverse => expected.wrapping_sub(1),
            };
        }
        if seen != to - from {
            return Err(corrupted());
        }
        Ok(())
    }

    /// Pushes `elements` one by one onto `end` of the list at `key`, creating it (fresh
    /// version, fresh head/tail) unless `only_existing` (LPUSHX/RPUSHX). Returns the new
    /// length, or 0 when `only_existing` and the key is missing.
    ///
    /// Cost: one metadata read, one point write per element plus the metadata write.
    ///
    /// # Errors
    /// WRONGTYPE; a storage error (list index overflow) when the indices would leave the
    /// u64 range; storage errors.
    pub(crate) fn list_push(
        &mut self,
        key: &[u8],
        end: ListEnd,
        elements: &[Bytes],
        only_existing: bool,
    ) -> CommandResult<i64> {
        // One routing for both keys: one md5 per command with a spread prefix.
        let routed = self.layout().routed(key);
        let mkey = routed.metadata_key();
        let mut meta = if only_existing {
            match self.list_meta_at(&mkey)? {
                Some(meta) => meta,
                None => return Ok(0),
            }
        } else {
            self.list_or_create_at(&mkey)?
        };
        let titea = self.layout().kind() == crate::codec::LayoutKind::TiTea;
        let keys = ElemKeys { prefix: routed.subkey_prefix(meta.version, ElemKeys::sub_len(titea))?, titea };
        let mut batch = WriteBatch::new();
        if let Some((last, rest)) = elements.split_last() {
            for element in rest {
                push_into(&mut batch, |i| keys.at(i), &mut meta, end, element.clone())?;
            }
            push_into(&mut batch, |i| keys.into_at(i), &mut meta, end, last.clone())?;
        }
        self.put_collection_at(&mut batch, mkey, &meta);
        self.commit(batch)?;
        self.notify(NotifyFlags::LIST, end.push_event(), key);
        Ok(len_i64(&meta))
    }

    /// Pops up to `count` elements from `end` of the list at `key`, in pop order.
    /// `None` when the key is missing. A list left empty is deleted (metadata only).
    ///
    /// Cost: one metadata read, one scan of `min(count, len)`, one delete per element and
    /// the metadata write.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn list_pop(
        &mut self,
        key: &[u8],
        end: ListEnd,
        count: u64,
    ) -> CommandResult<Option<Vec<Bytes>>> {
        let Some((mkey, keys, meta)) = self.list_to_pop(key)? else {
            return Ok(None);
        };
        self.pop_in(key, mkey, keys, meta, end, count).map(Some)
    }

    /// LPOP/RPOP without a count: [`Db::list_pop`] of one element, `None` when the key is
    /// missing. Cost: one metadata read, one point read, one delete and the metadata write.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn list_pop_one(&mut self, key: &[u8], end: ListEnd) -> CommandResult<Option<Bytes>> {
        let Some((mkey, keys, mut meta)) = self.list_to_pop(key)? else {
            return Ok(None);
        };
        if meta.size == 0 {
            return Ok(None);
        }
        let mut batch = WriteBatch::new();
        let value = self.take_end(&mut batch, keys, &mut meta, end)?;
        self.finish_pop(key, mkey, batch, &meta, end)?;
        Ok(Some(value))
    }

    /// The metadata key, element keys and metadata of the list at `key`, `None` when missing.
    fn list_to_pop(&self, key: &[u8]) -> CommandResult<Option<(Vec<u8>, ElemKeys, Metadata<'static>)>> {
        let routed = self.layout().routed(key);
        let mkey = routed.metadata_key();
        let Some(meta) = self.list_meta_at(&mkey)? else {
            return Ok(None);
        };
        let titea = self.layout().kind() == crate::codec::LayoutKind::TiTea;
        let keys = ElemKeys { prefix: routed.subkey_prefix(meta.version, ElemKeys::sub_len(titea))?, titea };
        Ok(Some((mkey, keys, meta)))
    }

    /// Writes a pop's metadata into `batch`, commits it and sends the pop's events.
    fn finish_pop(
        &mut self,
        key: &[u8],
        mkey: Vec<u8>,
        mut batch: WriteBatch,
        meta: &Metadata<'_>,
        end: ListEnd,
    ) -> CommandResult<()> {
        self.put_collection_at(&mut batch, mkey, meta);
        self.commit(batch)?;
        self.notify_edit(NotifyFlags::LIST, end.pop_event(), key, meta);
        Ok(())
    }

    /// Pops from a list whose metadata was read already.
    fn pop_in(
        &mut self,
        key: &[u8],
        mkey: Vec<u8>,
        keys: ElemKeys,
        mut meta: Metadata<'static>,
        end: ListEnd,
        count: u64,
    ) -> CommandResult<Vec<Bytes>> {
        let n = count.min(meta.size);
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut batch = WriteBatch::new();
        // One element is a point read (the common LPOP/RPOP), more are one range scan.
        let popped = if n == 1 {
            vec![self.take_end(&mut batch, keys, &mut meta, end)?]
        } else {
            let popped = match end {
                ListEnd::Left => self.read_span(key, &meta, 0, n, Direction::Forward)?,
                ListEnd::Right => self.read_span(key, &meta, meta.size - n, meta.size, Direction::Reverse)?,
            };
            pop_from(&mut batch, &keys, &mut meta, end, n);
            popped
        };
        self.finish_pop(key, mkey, batch, &meta, end)?;
        Ok(popped)
    }

    /// LLEN: the number of elements, 0 for a missing key. One metadata read.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn llen(&self, key: &[u8]) -> CommandResult<i64> {
        Ok(self.list_meta(key)?.map_or(0, |m| len_i64(&m)))
    }

    /// LINDEX on a list whose metadata was read already: one point read.
    fn lindex_in(&self, key: &[u8], meta: &Metadata<'_>, index: i64) -> CommandResult<Option<Bytes>> {
        let Some(pos) = resolve_index(meta, index) else {
            return Ok(None);
        };
        let keys = self.elem_keys(key, meta.version)?;
        self.element(&keys, stored_index(meta.head, pos)?).map(Some)
    }

    /// The element stored at `index`: one point read.
    /// Reads the element at `end` of a non-empty list and queues its deletion under the
    /// same key, updating `meta`.
    fn take_end(
        &self,
        batch: &mut WriteBatch,
        keys: ElemKeys,
        meta: &mut Metadata<'static>,
        end: ListEnd,
    ) -> CommandResult<Bytes> {
        let (index, bound, direction) = match end {
            ListEnd::Left => (meta.head, meta.tail, Direction::Forward),
            ListEnd::Right => (meta.tail - 1, meta.head, Direction::Reverse),
        };
        // The rest of the list on this side is what the next pops read: a store may read it
        // ahead. Not for a short list, where one scan costs more than the reads it saves.
        let bound_key = (meta.size >= READ_AHEAD_LEN && self.backend().reads_ahead()).then(|| keys.at(bound));
        let elem_key = keys.into_at(index);
        let value = match bound_key {
            Some(bound_key) => {
                self.backend().get_ahead(ColumnFamily::Subkey, &elem_key, &bound_key, direction)?
            }
            None => self.backend().get(ColumnFamily::Subkey, &elem_key)?,
        };
        let value = value.ok_or_else(corrupted)?;
        batch.delete(ColumnFamily::Subkey, elem_key);
        match end {
            ListEnd::Left => meta.head += 1,
            ListEnd::Right => meta.tail -= 1,
        }
        meta.size -= 1;
        Ok(value)
    }

    fn element(&self, keys: &ElemKeys, index: u64) -> CommandResult<Bytes> {
        self.backend().get(ColumnFamily::Subkey, &keys.at(index))?.ok_or_else(corrupted)
    }

    /// LRANGE: the elements from `start` to `stop` inclusive (negative counts from the
    /// tail, out-of-range bounds clamped). One metadata read and one range scan of the
    /// elements returned.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn lrange(&self, key: &[u8], start: i64, stop: i64) -> CommandResult<Vec<Bytes>> {
        let Some(meta) = self.list_meta(key)? else {
            return Ok(Vec::new());
        };
        let Some((from, to)) = list_range(&meta, start, stop) else {
            return Ok(Vec::new());
        };
        self.read_span(key, &meta, from, to + 1, Direction::Forward)
    }

    /// LSET on a list whose metadata was read already: one point write.
    fn lset_in(&mut self, key: &[u8], meta: &Metadata<'_>, index: i64, value: &[u8]) -> CommandResult<()> {
        let pos = resolve_index(meta, index).ok_or(CommandError::IndexOutOfRange)?;
        let keys = self.elem_keys(key, meta.version)?;
        let mut batch = WriteBatch::new();
        batch.put(
            ColumnFamily::Subkey,
            keys.at(stored_index(meta.head, pos)?),
            Bytes::copy_from_slice(value),
        );
        self.commit(batch)?;
        self.notify(NotifyFlags::LIST, "lset", key);
        Ok(())
    }

    /// LREM: removes the first `count` occurrences of `element` from the head (`count >
    /// 0`), the last `|count|` from the tail (`count < 0`), or all (`count == 0`).
    /// Returns how many were removed. A list left empty is deleted (metadata only).
    ///
    /// Cost: one scan from the starting end up to the last removed occurrence (the whole
    /// list when `count == 0` or too few match). The survivors between the first and last
    /// removed positions are rewritten, and then the shorter outer side (towards the head
    /// or the tail) is shifted: at most `len/2` extra moves (plus one scan of that side
    /// when it was not read yet), and `removed` deletes.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn lrem(&mut self, key: &[u8], count: i64, element: &[u8]) -> CommandResult<i64> {
        let Some(meta) = self.list_meta(key)? else {
            return Ok(0);
        };
        let limit = count.unsigned_abs();
        let direction = if count < 0 { Direction::Reverse } else { Direction::Forward };
        // Scan from the starting end until `limit` matches, keeping the values read.
        let mut read: Vec<(u64, Bytes)> = Vec::new();
        let mut matches: Vec<u64> = Vec::new();
        self.for_each_in_span(key, &meta, 0, meta.size, direction, |pos, v| {
            if v.as_ref() == element {
                matches.push(pos);
            }
            read.push((pos, v));
            limit == 0 || (matches.len() as u64) < limit
        })?;
        if matches.is_empty() {
            return Ok(0);
        }
        let removed = matches.len() as i64;
        if direction == Direction::Reverse {
            read.reverse();
            matches.reverse();
        }
        let (first, last) = (matches[0], matches[matches.len() - 1]);
        // What was read covers a contiguous span of positions starting at one end.
        let read_from = read[0].0;
        let read_to = read[read.len() - 1].0 + 1;
        let kept: Vec<Bytes> = read
            .iter()
            .filter(|(p, _)| *p >= first && *p <= last && matches.binary_search(p).is_err())
            .map(|(_, v)| v.clone())
            .collect();
        let prefix = (read_from == 0).then(|| slice_values(&read, 0, first));
        let suffix = (read_to == meta.size).then(|| slice_values(&read, last + 1, meta.size));
        let left = self.splice(key, meta, first, last + 1, kept, prefix, suffix)?;
        self.notify(NotifyFlags::LIST, "lrem", key);
        if left == 0 {
            self.notify(NotifyFlags::GENERIC, "del", key);
        }
        Ok(removed)
    }

    /// LINSERT: inserts `element` before or after the first occurrence of `pivot` (from
    /// the head). Returns the new length, -1 when the pivot is absent, 0 when the key is
    /// missing.
    ///
    /// Cost: one scan from the head to the pivot, then the shorter side is shifted by one
    /// (at most `len/2` moves, plus one scan of the tail side when that side is chosen),
    /// one write for the new element and the metadata write.
    ///
    /// # Errors
    /// WRONGTYPE; a storage error (list index overflow) when neither side can grow;
    /// storage errors.
    pub(crate) fn linsert(
        &mut self,
        key: &[u8],
        before: bool,
        pivot: &[u8],
        element: &[u8],
    ) -> CommandResult<i64> {
        let Some(meta) = self.list_meta(key)? else {
            return Ok(0);
        };
        let mut read: Vec<Bytes> = Vec::new();
        let mut found = None;
        self.for_each_in_span(key, &meta, 0, meta.size, Direction::Forward, |pos, v| {
            if v.as_ref() == pivot {
                found = Some(pos);
                false
            } else {
                read.push(v);
                true
            }
        })?;
        let Some(pivot_pos) = found else {
            return Ok(-1);
        };
        let at = if before { pivot_pos } else { pivot_pos + 1 };
        if !before {
            // The pivot itself lies before the insertion point: part of the head side.
            read.push(Bytes::copy_from_slice(pivot));
        }
        let new_len =
            self.splice(key, meta, at, at, vec![Bytes::copy_from_slice(element)], Some(read), None)?;
        self.notify(NotifyFlags::LIST, "linsert", key);
        Ok(i64::try_from(new_len).unwrap_or(i64::MAX))
    }

    /// Replaces positions `[a, b)` of the list with `new`, shifting the shorter outer side
    /// (the prefix `[0, a)` by moving the head, or the suffix `[b, len)` by moving the
    /// tail). `prefix`/`suffix` are the values of those sides when already read; the chosen
    /// side is scanned otherwise. Writes one batch; returns the new length.
    #[allow(clippy::too_many_arguments)]
    fn splice(
        &mut self,
        key: &[u8],
        mut meta: Metadata<'static>,
        a: u64,
        b: u64,
        new: Vec<Bytes>,
        prefix: Option<Vec<Bytes>>,
        suffix: Option<Vec<Bytes>>,
    ) -> CommandResult<u64> {
        let old_len = meta.size;
        let new_count = new.len() as u64;
        let new_len = old_len - (b - a) + new_count;
        let mut batch = WriteBatch::new();
        if new_len == 0 {
            self.delete_key(&mut batch, key);
            self.commit(batch)?;
            return Ok(0);
        }
        let keys = self.elem_keys(key, meta.version)?;
        let prefix_len = a;
        let suffix_len = old_len - b;
        // Candidate new heads/tails; a side whose indices would overflow is not an option.
        let head_side = if new_count >= b - a {
            meta.head.checked_sub(new_count - (b - a))
        } else {
            meta.head.checked_add((b - a) - new_count)
        };
        let tail_side = if new_count >= b - a {
            meta.tail.checked_add(new_count - (b - a))
        } else {
            meta.tail.checked_sub((b - a) - new_count)
        };
        let use_head = match (head_side, tail_side) {
            (Some(_), Some(_)) => prefix_len < suffix_len || (prefix_len == suffix_len && prefix.is_some()),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return Err(crate::Error::ListIndexOverflow.into()),
        };
        if use_head {
            let new_head = head_side.unwrap_or(meta.head);
            let moved = new_head != meta.head;
            let prefix = match prefix {
                Some(p) if moved => p,
                _ if moved => self.read_span(key, &meta, 0, a, Direction::Forward)?,
                _ => Vec::new(),
            };
            for (i, v) in prefix.into_iter().enumerate() {
                batch.put(ColumnFamily::Subkey, keys.at(new_head + i as u64), v);
            }
            for (j, v) in new.into_iter().enumerate() {
                batch.put(ColumnFamily::Subkey, keys.at(new_head + a + j as u64), v);
            }
            for index in meta.head..new_head {
                batch.delete(ColumnFamily::Subkey, keys.at(index));
            }
            meta.head = new_head;
        } else {
            let new_tail = tail_side.unwrap_or(meta.tail);
            let moved = new_tail != meta.tail;
            let suffix = match suffix {
                Some(s) if moved => s,
                _ if moved => self.read_span(key, &meta, b, old_len, Direction::Forward)?,
                _ => Vec::new(),
            };
            for (j, v) in new.into_iter().enumerate() {
                batch.put(ColumnFamily::Subkey, keys.at(meta.head + a + j as u64), v);
            }
            for (k, v) in suffix.into_iter().enumerate() {
                batch.put(ColumnFamily::Subkey, keys.at(meta.head + a + new_count + k as u64), v);
            }
            for index in new_tail..meta.tail {
                batch.delete(ColumnFamily::Subkey, keys.at(index));
            }
            meta.tail = new_tail;
        }
        meta.size = new_len;
        self.put_collection(&mut batch, key, &meta);
        self.commit(batch)?;
        Ok(new_len)
    }

    /// LTRIM: keeps only positions `start..=stop` (Redis index rules). The trimmed ends
    /// are deleted subkey by subkey and head/tail move; no element is moved. A list left
    /// empty is deleted by its metadata alone (O(1)).
    ///
    /// Cost: one metadata read, one delete per trimmed element (none when emptied).
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn ltrim(&mut self, key: &[u8], start: i64, stop: i64) -> CommandResult<()> {
        let Some(mut meta) = self.list_meta(key)? else {
            return Ok(());
        };
        let mut batch = WriteBatch::new();
        match list_range(&meta, start, stop) {
            None => {
                self.delete_key(&mut batch, key);
                meta.size = 0;
            }
            Some((from, to)) => {
                let keys = self.elem_keys(key, meta.version)?;
                let new_head = meta.head + from;
                let new_tail = meta.head + to + 1;
                for index in (meta.head..new_head).chain(new_tail..meta.tail) {
                    batch.delete(ColumnFamily::Subkey, keys.at(index));
                }
                if new_head != meta.head || new_tail != meta.tail {
                    meta.head = new_head;
                    meta.tail = new_tail;
                    meta.size = new_tail - new_head;
                    self.put_collection(&mut batch, key, &meta);
                }
            }
        }
        self.commit(batch)?;
        // Redis reports `ltrim` even when nothing was trimmed.
        self.notify_edit(NotifyFlags::LIST, "ltrim", key, &meta);
        Ok(())
    }

    /// LPOS: the positions (from the head) of the elements equal to `element`, per
    /// [`LposOptions`]. Empty when the key is missing or nothing matches.
    ///
    /// Cost: one lazy scan from the rank's end, stopping after `count` matches or
    /// `maxlen` elements.
    ///
    /// # Errors
    /// The RANK-zero error for `rank == 0`; WRONGTYPE; storage errors.
    pub(crate) fn lpos(&self, key: &[u8], element: &[u8], opts: LposOptions) -> CommandResult<Vec<u64>> {
        if opts.rank == 0 {
            return Err(rank_zero());
        }
        let Some(meta) = self.list_meta(key)? else {
            return Ok(Vec::new());
        };
        let direction = if opts.rank < 0 { Direction::Reverse } else { Direction::Forward };
        // Redis 7.0 negates i64::MIN to itself: every match from the tail counts, and its
        // COUNT test (`matches - rank + 1 >= count`) overflows and never stops the walk.
        let (rank, count) =
            if opts.rank == i64::MIN { (1, 0) } else { (opts.rank.unsigned_abs(), opts.count) };
        let limit = if opts.maxlen == 0 { meta.size } else { opts.maxlen.min(meta.size) };
        let (from, to) = match direction {
            Direction::Forward => (0, limit),
            Direction::Reverse => (meta.size - limit, meta.size),
        };
        let mut found = Vec::new();
        let mut matches = 0u64;
        self.for_each_in_span(key, &meta, from, to, direction, |pos, v| {
            if v.as_ref() == element {
                matches += 1;
                if matches >= rank {
                    found.push(pos);
                    if count != 0 && found.len() as u64 >= count {
                        return false;
                    }
                }
            }
            true
        })?;
        Ok(found)
    }

    /// LMOVE: pops from `from` of `src` and pushes onto `to` of `dst`, returning the
    /// element; `None` when `src` is missing (then `dst` is not even looked at). `src ==
    /// dst` rotates (or leaves the list as it was) with one metadata update.
    ///
    /// Cost: two metadata reads, one point read, one delete, one put, the metadata writes.
    ///
    /// BLMOVE and BRPOPLPUSH run this too, after validating their timeout: the library
    /// cannot wait, so they answer nil at once when `src` is missing, as Redis does inside
    /// MULTI.
    ///
    /// # Errors
    /// WRONGTYPE for `src`, or for `dst` when `src` has data (then nothing is written); a
    /// storage error on index overflow; storage errors.
    pub(crate) fn lmove(
        &mut self,
        src: &[u8],
        dst: &[u8],
        from: ListEnd,
        to: ListEnd,
    ) -> CommandResult<Option<Bytes>> {
        let Some(mut src_meta) = self.waited(self.list_meta(src))? else {
            return Ok(None);
        };
        let same = src == dst;
        let mut dst_meta = if same { None } else { Some(self.list_or_create_at(&self.metadata_key(dst))?) };
        let src_keys = self.elem_keys(src, src_meta.version)?;
        let mut batch = WriteBatch::new();
        let value;
        match dst_meta.as_mut() {
            None => {
                // The same list: the pop's key, then the push's.
                value = self.take_end(&mut batch, src_keys.clone(), &mut src_meta, from)?;
                push_into(&mut batch, |i| src_keys.into_at(i), &mut src_meta, to, value.clone())?;
                self.put_collection(&mut batch, src, &src_meta);
            }
            Some(dm) => {
                value = self.take_end(&mut batch, src_keys, &mut src_meta, from)?;
                let dst_keys = self.elem_keys(dst, dm.version)?;
                push_into(&mut batch, |i| dst_keys.into_at(i), dm, to, value.clone())?;
                self.put_collection(&mut batch, src, &src_meta);
                self.put_collection(&mut batch, dst, dm);
            }
        }
        self.commit(batch)?;
        // Redis pushes, then reports the pop (and the source's deletion).
        self.notify(NotifyFlags::LIST, to.push_event(), dst);
        self.notify_edit(NotifyFlags::LIST, from.pop_event(), src, &src_meta);
        Ok(Some(value))
    }

    /// LMPOP: pops up to `count` (the command requires at least 1) elements from `end` of the first non-empty list among
    /// `keys`; returns that key and the elements, `None` when all are missing.
    ///
    /// Cost: one metadata read per key up to the first list found, then as
    /// [`Db::list_pop`].
    ///
    /// BLMPOP, BLPOP and BRPOP (count 1) run this too, and block on `keys` when it finds
    /// nothing.
    ///
    /// # Errors
    /// WRONGTYPE when a key before the first list holds another type; storage errors.
    pub(crate) fn lmpop(
        &mut self,
        keys: &[Bytes],
        end: ListEnd,
        count: u64,
    ) -> CommandResult<Option<(Bytes, Vec<Bytes>)>> {
        for key in keys {
            let mkey = self.metadata_key(key);
            if let Some(meta) = self.waited(self.list_meta_at(&mkey))? {
                let keys = self.elem_keys(key, meta.version)?;
                let popped = self.pop_in(key, mkey, keys, meta, end, count)?;
                return Ok(Some((key.clone(), popped)));
            }
        }
        Ok(None)
    }
}

fn slice_values(read: &[(u64, Bytes)], from: u64, to: u64) -> Vec<Bytes> {
    read.iter().filter(|(p, _)| *p >= from && *p < to).map(|(_, v)| v.clone()).collect()
}

/// Queues one element pushed onto `end`, updating head/tail/size in `meta`.
/// `key_at` builds the element key of a stored index.
fn push_into(
    batch: &mut WriteBatch,
    key_at: impl FnOnce(u64) -> Vec<u8>,
    meta: &mut Metadata<'static>,
    end: ListEnd,
    value: Bytes,
) -> CommandResult<()> {
    match end {
        ListEnd::Left => {
            let index = push_front_index(meta.head)?;
            batch.put(ColumnFamily::Subkey, key_at(index), value);
            meta.head = index;
        }
        ListEnd::Right => {
            let tail = push_back_tail(meta.tail)?;
            batch.put(ColumnFamily::Subkey, key_at(meta.tail), value);
            meta.tail = tail;
        }
    }
    meta.size += 1;
    Ok(())
}

/// Queues the deletion of `n <= size` elements at `end`, updating `meta`.
fn pop_from(batch: &mut WriteBatch, keys: &ElemKeys, meta: &mut Metadata<'static>, end: ListEnd, n: u64) {
    for _ in 0..n {
        match end {
            ListEnd::Left => {
                batch.delete(ColumnFamily::Subkey, keys.at(meta.head));
                meta.head += 1;
            }
            ListEnd::Right => {
                meta.tail -= 1;
                batch.delete(ColumnFamily::Subkey, keys.at(meta.tail));
            }
        }
    }
    meta.size -= n;
}

fn rank_zero() -> CommandError {
    CommandError::err(
        "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
    )
}

/// Redis' `getPositiveLongFromObjectOrReply`: 0..=i64::MAX, else `message`.
fn positive_arg(arg: &[u8], message: &str) -> CommandResult<u64> {
    crate::commands::args::parse_i64(arg)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| CommandError::err(message))
}

/// Redis' `getRangeLongFromObjectOrReply(1, LONG_MAX)`: 1..=i64::MAX, else `message`.
fn strictly_positive_arg(arg: &[u8], message: &str) -> CommandResult<u64> {
    crate::commands::args::parse_i64(arg)
        .filter(|&n| n > 0)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| CommandError::err(message))
}

fn push_cmd<B: KvBackend>(
    db: &mut Db<B>,
    argv: &[Bytes],
    end: ListEnd,
    only_existing: bool,
) -> CommandResult {
    db.list_push(&argv[1], end, &argv[2..], only_existing).map(Reply::Integer)
}

pub(crate) fn lpush_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    push_cmd(db, argv, ListEnd::Left, false)
}

pub(crate) fn rpush_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    push_cmd(db, argv, ListEnd::Right, false)
}

pub(crate) fn lpushx_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    push_cmd(db, argv, ListEnd::Left, true)
}

pub(crate) fn rpushx_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    push_cmd(db, argv, ListEnd::Right, true)
}

fn pop_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], end: ListEnd, name: &str) -> CommandResult {
    match argv.len() {
        2 => Ok(Reply::bulk_or_nil(db.list_pop_one(&argv[1], end)?)),
        3 => {
            let count = positive_arg(&argv[2], "value is out of range, must be positive")?;
            Ok(match db.list_pop(&argv[1], end, count)? {
                None => Reply::NilArray,
                Some(items) => Reply::bulks(items),
            })
        }
        _ => Err(CommandError::WrongArity(name.into())),
    }
}

pub(crate) fn lpop_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    pop_cmd(db, argv, ListEnd::Left, "lpop")
}

pub(crate) fn rpop_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    pop_cmd(db, argv, ListEnd::Right, "rpop")
}

pub(crate) fn llen_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.llen(&argv[1]).map(Reply::Integer)
}

pub(crate) fn lindex_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    // Redis looks the key up before parsing the index.
    let Some(meta) = db.list_meta(&argv[1])? else {
        return Ok(Reply::Nil);
    };
    let index = int_arg(&argv[2])?;
    db.lindex_in(&argv[1], &meta, index).map(Reply::bulk_or_nil)
}

pub(crate) fn lrange_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let start = int_arg(&argv[2])?;
    let stop = int_arg(&argv[3])?;
    db.lrange(&argv[1], start, stop).map(Reply::bulks)
}

pub(crate) fn lset_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    // Redis looks the key up before parsing the index.
    let meta = db.list_meta(&argv[1])?.ok_or(CommandError::NoSuchKey)?;
    let index = int_arg(&argv[2])?;
    db.lset_in(&argv[1], &meta, index, &argv[3])?;
    Ok(Reply::OK)
}

pub(crate) fn lrem_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let count = int_arg(&argv[2])?;
    db.lrem(&argv[1], count, &argv[3]).map(Reply::Integer)
}

pub(crate) fn linsert_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let before = if argv[2].eq_ignore_ascii_case(b"before") {
        true
    } else if argv[2].eq_ignore_ascii_case(b"after") {
        false
    } else {
        return Err(CommandError::Syntax);
    };
    db.linsert(&argv[1], before, &argv[3], &argv[4]).map(Reply::Integer)
}

pub(crate) fn ltrim_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let start = int_arg(&argv[2])?;
    let stop = int_arg(&argv[3])?;
    db.ltrim(&argv[1], start, stop)?;
    Ok(Reply::OK)
}

pub(crate) fn lpos_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let mut opts = LposOptions::default();
    let mut with_count = false;
    let mut j = 3;
    while j < argv.len() {
        let opt = &argv[j];
        let has_value = j + 1 < argv.len();
        if opt.eq_ignore_ascii_case(b"rank") && has_value {
            let rank = int_arg(&argv[j + 1])?;
            if rank == 0 {
                return Err(rank_zero());
            }
            opts.rank = rank;
        } else if opt.eq_ignore_ascii_case(b"count") && has_value {
            opts.count = positive_arg(&argv[j + 1], "COUNT can't be negative")?;
            with_count = true;
        } else if opt.eq_ignore_ascii_case(b"maxlen") && has_value {
            opts.maxlen = positive_arg(&argv[j + 1], "MAXLEN can't be negative")?;
        } else {
            return Err(CommandError::Syntax);
        }
        j += 2;
    }
    let found = db.lpos(&argv[1], &argv[2], opts)?;
    let as_int = |p: u64| Reply::Integer(i64::try_from(p).unwrap_or(i64::MAX));
    Ok(if with_count {
        Reply::Array(found.into_iter().map(as_int).collect())
    } else {
        found.into_iter().next().map_or(Reply::Nil, as_int)
    })
}

pub(crate) fn lmove_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let from = ListEnd::parse(&argv[3])?;
    let to = ListEnd::parse(&argv[4])?;
    db.lmove(&argv[1], &argv[2], from, to).map(Reply::bulk_or_nil)
}

pub(crate) fn rpoplpush_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.lmove(&argv[1], &argv[2], ListEnd::Right, ListEnd::Left).map(Reply::bulk_or_nil)
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT n]` starting at `argv[first]`.
fn parse_mpop(argv: &[Bytes], first: usize) -> CommandResult<(&[Bytes], ListEnd, u64)> {
    let numkeys = strictly_positive_arg(&argv[first], "numkeys should be greater than 0")?;
    let available = (argv.len() - first - 1) as u64; // keys + where (+ options)
    if numkeys >= available {
        return Err(CommandError::Syntax);
    }
    let keys_end = first + 1 + numkeys as usize;
    let keys = &argv[first + 1..keys_end];
    let end = ListEnd::parse(&argv[keys_end])?;
    let mut count = None;
    let mut j = keys_end + 1;
    while j < argv.len() {
        if count.is_none() && argv[j].eq_ignore_ascii_case(b"count") && j + 1 < argv.len() {
            count = Some(strictly_positive_arg(&argv[j + 1], "count should be greater than 0")?);
            j += 2;
        } else {
            return Err(CommandError::Syntax);
        }
    }
    Ok((keys, end, count.unwrap_or(1)))
}

fn mpop_reply(result: Option<(Bytes, Vec<Bytes>)>) -> Reply {
    match result {
        None => Reply::NilArray,
        Some((key, items)) => Reply::Array(vec![Reply::Bulk(key), Reply::bulks(items)]),
    }
}

pub(crate) fn lmpop_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let (keys, end, count) = parse_mpop(argv, 1)?;
    db.lmpop(keys, end, count).map(mpop_reply)
}

fn bpop_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], end: ListEnd) -> CommandResult {
    let (timeout, keys) = argv[1..].split_last().ok_or(CommandError::Syntax)?;
    let timeout = timeout_arg(timeout)?;
    Ok(match db.lmpop(keys, end, 1)? {
        Some((key, mut items)) if !items.is_empty() => {
            Reply::Array(vec![Reply::Bulk(key), Reply::Bulk(items.swap_remove(0))])
        }
        _ => db.would_block(keys, timeout, Reply::NilArray, Reply::NilArray),
    })
}

pub(crate) fn blpop_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    bpop_cmd(db, argv, ListEnd::Left)
}

pub(crate) fn brpop_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    bpop_cmd(db, argv, ListEnd::Right)
}

pub(crate) fn blmove_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let from = ListEnd::parse(&argv[3])?;
    let to = ListEnd::parse(&argv[4])?;
    let timeout = timeout_arg(&argv[5])?;
    blmove(db, argv, from, to, timeout)
}

pub(crate) fn brpoplpush_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let timeout = timeout_arg(&argv[3])?;
    blmove(db, argv, ListEnd::Right, ListEnd::Left, timeout)
}

/// BLMOVE/BRPOPLPUSH once the arguments are parsed: blocks on the source alone.
fn blmove<B: KvBackend>(
    db: &mut Db<B>,
    argv: &[Bytes],
    from: ListEnd,
    to: ListEnd,
    timeout: Option<std::time::Duration>,
) -> CommandResult {
    Ok(match db.lmove(&argv[1], &argv[2], from, to)? {
        Some(value) => Reply::Bulk(value),
        None => db.would_block(&argv[1..2], timeout, Reply::Nil, Reply::NilArray),
    })
}

pub(crate) fn blmpop_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    // Redis parses numkeys, the end and COUNT before the timeout.
    let (keys, end, count) = parse_mpop(argv, 2)?;
    let timeout = timeout_arg(&argv[1])?;
    Ok(match db.lmpop(keys, end, count)? {
        Some(popped) => mpop_reply(Some(popped)),
        None => db.would_block(keys, timeout, Reply::NilArray, Reply::NilArray),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemoryBackend;

    #[test]
    fn typed_api() {
        let mut db = Db::new(MemoryBackend::new());
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        db.run(&["RPUSH", "k", "z", "a", "b", "a"]);
        assert_eq!(db.lrange(b"k", 0, -1).unwrap(), vec![b("z"), b("a"), b("b"), b("a")]);
        assert_eq!(db.lpos(b"k", b"a", LposOptions { count: 0, ..Default::default() }).unwrap(), vec![1, 3]);
        assert_eq!(db.lmove(b"k", b"j", ListEnd::Left, ListEnd::Right).unwrap(), Some(b("z")));
        assert_eq!(db.list_pop(b"k", ListEnd::Left, 1).unwrap(), Some(vec![b("a")]));
        assert_eq!(db.llen(b"k").unwrap(), 2);
        assert!(db.lpos(b"k", b"a", LposOptions { rank: 0, ..Default::default() }).is_err());
    }
}
