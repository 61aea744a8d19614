//! A stream's metadata and counters ([`Stream`]) and its records ([`Records`]): reading
//! entries, groups, consumers and pending entries, and queueing their puts and deletes.

use bytes::Bytes;

use crate::backend::{ColumnFamily, Direction, KvBackend, WriteBatch};
use crate::codec::{
    ConsumerValue, Extra, GroupValue, KeyRange, Metadata, PendingValue, RedisType, StreamFields, StreamId,
    StreamSub, Version, decode_entry, group_records_prefix, groups_prefix, prefix_successor,
};
use crate::commands::{CommandError, CommandResult, Db};

/// An entry: its id and its fields and values (`field, value, …`).
pub(super) type Entry = (StreamId, Vec<Bytes>);

/// A pending entry: `(id, delivery time, deliveries, consumer)`.
pub(super) type Pending = (StreamId, u64, u64, Bytes);

pub(super) fn err(text: &str) -> CommandError {
    CommandError::Other(text.to_string())
}

/// A stream record that does not decode: an error naming what it is, never a panic.
fn undecodable(what: &str) -> impl Fn(crate::Error) -> CommandError + '_ {
    move |e| CommandError::err(format!("undecodable {what}: {e}"))
}

/// An entry's fields and values, copied out of its record.
pub(super) fn entry_fields(id: StreamId, value: &[u8]) -> CommandResult<Vec<Bytes>> {
    let fields = decode_entry(value).map_err(undecodable(&format!("stream entry {id}")))?;
    Ok(fields.into_iter().map(Bytes::copy_from_slice).collect())
}

/// Entries as read from their records, decoded.
pub(super) fn decode_entries(found: &[(StreamId, Bytes)]) -> CommandResult<Vec<Entry>> {
    found.iter().map(|(id, v)| Ok((*id, entry_fields(*id, v)?))).collect()
}

/// A stream read for one command: its metadata and counters.
pub(super) struct Stream {
    pub(super) meta: Metadata<'static>,
    pub(super) f: StreamFields,
}

impl Stream {
    pub(super) fn new(meta: Metadata<'static>) -> Self {
        let f = match meta.fields().into_owned() {
            Extra::Stream(f) => *f,
            _ => StreamFields::default(),
        };
        Stream { meta, f }
    }

    pub(super) fn version(&self) -> Version {
        self.meta.version
    }

    pub(super) fn len(&self) -> u64 {
        self.meta.size
    }

    /// Redis' `streamRangeHasTombstones`: whether a deleted id may lie in `[start, end]`.
    fn has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        let max = self.f.max_deleted_entry_id;
        if self.len() == 0 || max == StreamId::MIN || self.f.first_entry_id > max {
            return false;
        }
        start <= max && max <= end
    }

    /// Redis' `streamEstimateDistanceFromFirstEverEntry`: `id`'s logical read counter, or
    /// `None` when it cannot be known.
    fn estimate(&self, id: StreamId) -> Option<i64> {
        let added = self.f.entries_added as i64;
        let last = self.f.last_generated_id;
        if added == 0 {
            return Some(0);
        }
        if self.len() == 0 && id <= last {
            return Some(added);
        }
        if id == last {
            return Some(added);
        }
        if id > last {
            return None;
        }
        let max = self.f.max_deleted_entry_id;
        if max == StreamId::MIN || max < self.f.first_entry_id {
            let len = self.len() as i64;
            if id < self.f.first_entry_id {
                return Some(added - len);
            }
            if id == self.f.first_entry_id {
                return Some(added - len + 1);
            }
        }
        None
    }

    /// Redis' `streamReplyWithCGLag`: how many entries the group has not read, `None` when
    /// that cannot be known.
    pub(super) fn lag(&self, g: &GroupValue) -> Option<i64> {
        let added = self.f.entries_added as i64;
        if added == 0 {
            return Some(0);
        }
        if g.entries_read != -1 && !self.has_tombstones(g.last_delivered, StreamId::MAX) {
            return Some(added - g.entries_read);
        }
        self.estimate(g.last_delivered).map(|read| added - read)
    }

    /// Advances a group past the delivered `id` (Redis' read-counter bookkeeping).
    pub(super) fn deliver(&self, g: &mut GroupValue, id: StreamId) {
        if id <= g.last_delivered {
            return;
        }
        if g.entries_read != -1 && !self.has_tombstones(id, StreamId::MAX) {
            g.entries_read += 1;
        } else if self.f.entries_added != 0 {
            g.entries_read = self.estimate(id).unwrap_or(-1);
        }
        g.last_delivered = id;
    }
}

/// The records of one stream (one key at one version) in the Stream CF.
pub(super) struct Records<'s, 'd, B: KvBackend> {
    pub(super) db: &'s Db<'d, B>,
    pub(super) key: &'s [u8],
    pub(super) version: Version,
}

impl<B: KvBackend> Clone for Records<'_, '_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: KvBackend> Copy for Records<'_, '_, B> {}

impl<'d, B: KvBackend> Db<'d, B> {
    /// The stream at `key`, or `None`.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(super) fn stream(&self, key: &[u8]) -> CommandResult<Option<Stream>> {
        Ok(self.lookup_of(key, RedisType::Stream)?.map(Stream::new))
    }

    /// The records of stream `s` at `key`.
    pub(super) fn stream_records<'s>(&'s self, key: &'s [u8], s: &Stream) -> Records<'s, 'd, B> {
        Records { db: self, key, version: s.version() }
    }

    /// Queues the stream's metadata (kept when empty: a stream exists with no entries).
    pub(super) fn put_stream(&self, batch: &mut WriteBatch, key: &[u8], s: &Stream) {
        let meta = Metadata { extra: Extra::Stream(Box::new(s.f)), ..s.meta.clone() };
        self.put_metadata(batch, key, &meta);
    }
}

impl<'s, 'd, B: KvBackend> Records<'s, 'd, B> {
    /// The full key of record `sub`.
    pub(super) fn key_of(self, sub: StreamSub<'_>) -> CommandResult<Vec<u8>> {
        self.db.subkey(self.key, self.version, &sub.to_bytes())
    }

    fn get(self, sub: StreamSub<'_>) -> CommandResult<Option<Bytes>> {
        Ok(self.db.backend().get(ColumnFamily::Stream, &self.key_of(sub)?)?)
    }

    /// Queues a put of record `sub`.
    pub(super) fn put(self, batch: &mut WriteBatch, sub: StreamSub<'_>, value: Vec<u8>) -> CommandResult<()> {
        batch.put(ColumnFamily::Stream, self.key_of(sub)?, value);
        Ok(())
    }

    /// Queues a delete of record `sub`.
    pub(super) fn delete(self, batch: &mut WriteBatch, sub: StreamSub<'_>) -> CommandResult<()> {
        batch.delete(ColumnFamily::Stream, self.key_of(sub)?);
        Ok(())
    }

    /// The records whose `sub` lies in `[from, to)` (`to: None`: to the end of the stream),
    /// as `(sub, value)`.
    pub(super) fn scan(
        self,
        from: &[u8],
        to: Option<&[u8]>,
        direction: Direction,
    ) -> CommandResult<impl Iterator<Item = CommandResult<(Bytes, Bytes)>> + use<'s, 'd, B>> {
        let prefix = self.db.layout().subkey_prefix(self.key, self.version, 0)?;
        let mut start = prefix.clone();
        start.extend_from_slice(from);
        let end = match to {
            Some(to) => {
                let mut end = prefix.clone();
                end.extend_from_slice(to);
                Some(end)
            }
            None => prefix_successor(&prefix),
        };
        let n = prefix.len();
        let iter = self.db.backend().scan(ColumnFamily::Stream, &KeyRange { start, end }, direction)?;
        Ok(iter.map(move |item| {
            let (k, v) = item?;
            Ok((k.slice(n..), v))
        }))
    }

    /// One entry's record value.
    pub(super) fn entry(self, id: StreamId) -> CommandResult<Option<Bytes>> {
        self.get(StreamSub::Entry(id))
    }

    /// Up to `count` entries (0: all) with ids in `[start, end]`, in order or reversed, as
    /// record values.
    pub(super) fn entries(
        self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: usize,
    ) -> CommandResult<Vec<(StreamId, Bytes)>> {
        let mut out = Vec::new();
        if start > end {
            return Ok(out);
        }
        let mut to = end.to_bytes().to_vec();
        to.push(0);
        let direction = if rev { Direction::Reverse } else { Direction::Forward };
        for item in self.scan(&start.to_bytes(), Some(&to), direction)? {
            let (sub, value) = item?;
            if sub.len() != 16 {
                continue;
            }
            if let Ok(StreamSub::Entry(id)) = StreamSub::decode(&sub) {
                out.push((id, value));
                if count != 0 && out.len() == count {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Every consumer group of the stream, by name.
    pub(super) fn groups(self) -> CommandResult<Vec<(Bytes, GroupValue)>> {
        let from = groups_prefix();
        let to = prefix_successor(&from);
        let mut out = Vec::new();
        for item in self.scan(&from, to.as_deref(), Direction::Forward)? {
            let (sub, value) = item?;
            if let Ok(StreamSub::Group(name)) = StreamSub::decode(&sub) {
                let g = GroupValue::decode(&value).map_err(undecodable("group"))?;
                out.push((Bytes::copy_from_slice(name), g));
            }
        }
        // Records sort by name length first; Redis lists groups by name.
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    pub(super) fn group(self, group: &[u8]) -> CommandResult<Option<GroupValue>> {
        match self.get(StreamSub::Group(group))? {
            None => Ok(None),
            Some(raw) => Ok(Some(GroupValue::decode(&raw).map_err(undecodable("group"))?)),
        }
    }

    pub(super) fn put_group(self, batch: &mut WriteBatch, group: &[u8], g: &GroupValue) -> CommandResult<()> {
        self.put(batch, StreamSub::Group(group), g.to_bytes())
    }

    pub(super) fn consumer(self, group: &[u8], name: &[u8]) -> CommandResult<Option<ConsumerValue>> {
        match self.get(StreamSub::Consumer { group, consumer: name })? {
            None => Ok(None),
            Some(raw) => Ok(Some(ConsumerValue::decode(&raw).map_err(undecodable("consumer"))?)),
        }
    }

    pub(super) fn put_consumer(
        self,
        batch: &mut WriteBatch,
        group: &[u8],
        name: &[u8],
        c: &ConsumerValue,
    ) -> CommandResult<()> {
        self.put(batch, StreamSub::Consumer { group, consumer: name }, c.to_bytes())
    }

    /// A group's consumers, by name.
    pub(super) fn consumers(self, group: &[u8]) -> CommandResult<Vec<(Bytes, ConsumerValue)>> {
        let from = group_records_prefix(false, group);
        let to = prefix_successor(&from);
        let mut out = Vec::new();
        for item in self.scan(&from, to.as_deref(), Direction::Forward)? {
            let (sub, value) = item?;
            if let Ok(StreamSub::Consumer { consumer, .. }) = StreamSub::decode(&sub) {
                let c = ConsumerValue::decode(&value).map_err(undecodable("consumer"))?;
                out.push((Bytes::copy_from_slice(consumer), c));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// A group's pending entries from `start` on, in id order.
    pub(super) fn pending(
        self,
        group: &[u8],
        start: StreamId,
    ) -> CommandResult<impl Iterator<Item = CommandResult<Pending>> + use<'s, 'd, B>> {
        let prefix = group_records_prefix(true, group);
        let to = prefix_successor(&prefix);
        let mut from = prefix;
        from.extend_from_slice(&start.to_bytes());
        let iter = self.scan(&from, to.as_deref(), Direction::Forward)?;
        Ok(iter.filter_map(|item| {
            let (sub, value) = match item {
                Ok(found) => found,
                Err(e) => return Some(Err(e)),
            };
            let Ok(StreamSub::Pending { id, .. }) = StreamSub::decode(&sub) else { return None };
            Some(decode_pending(&value).map(|(t, n, owner)| (id, t, n, owner)))
        }))
    }

    /// One pending entry's delivery time, count and holder.
    pub(super) fn pending_entry(
        self,
        group: &[u8],
        id: StreamId,
    ) -> CommandResult<Option<(u64, u64, Bytes)>> {
        self.get(StreamSub::Pending { group, id })?.map(|raw| decode_pending(&raw)).transpose()
    }

    pub(super) fn put_pending(
        self,
        batch: &mut WriteBatch,
        group: &[u8],
        id: StreamId,
        p: &PendingValue<'_>,
    ) -> CommandResult<()> {
        self.put(batch, StreamSub::Pending { group, id }, p.to_bytes())
    }
}

/// A pending record's delivery time, count and holder.
fn decode_pending(raw: &[u8]) -> CommandResult<(u64, u64, Bytes)> {
    let p = PendingValue::decode(raw).map_err(undecodable("pending entry"))?;
    Ok((p.delivered_ms, p.deliveries, Bytes::copy_from_slice(p.consumer)))
}
