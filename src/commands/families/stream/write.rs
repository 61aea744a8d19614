//! Entry writes: adding, trimming, deleting, XSETID's counters, and RESTORE's whole stream.
//! Each queues its records and the stream's metadata in the caller's batch.

use bytes::Bytes;

use super::core::{Stream, err};
use super::parse::{AddArgs, Trim};
use crate::backend::{KvBackend, WriteBatch};
use crate::codec::rdb::RdbStream;
use crate::codec::{
    ConsumerValue, GroupValue, Metadata, PendingValue, RedisType, StreamFields, StreamId, StreamSub,
    encode_entry,
};
use crate::commands::{CommandResult, Db};

impl<B: KvBackend> Db<'_, B> {
    /// XADD: adds an entry of `fields` under the id `args` gives (or the next one), trimming
    /// as `args` asks. Returns the id and how many entries were trimmed, or `None` when the
    /// key is missing and NOMKSTREAM was given.
    ///
    /// # Errors
    /// WRONGTYPE; an id not above the stream's last; storage errors.
    pub(super) fn stream_add(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        args: &AddArgs,
        fields: &[Bytes],
    ) -> CommandResult<Option<(StreamId, u64)>> {
        let mut s = match self.stream(key)? {
            Some(s) => s,
            None if args.nomkstream => return Ok(None),
            None => Stream::new(self.new_collection(RedisType::Stream)),
        };
        let last = s.f.last_generated_id;
        if last == StreamId::MAX {
            return Err(err("ERR The stream has exhausted the last possible ID, unable to add more items"));
        }
        let too_small =
            || err("ERR The ID specified in XADD is equal or smaller than the target stream top item");
        let id = match args.id {
            Some((id, true)) => id,
            Some((id, false)) if id.ms == last.ms => {
                last.next().filter(|n| n.ms == last.ms).ok_or_else(too_small)?
            }
            Some((id, false)) => id,
            None => {
                let now = self.now_ms();
                if now > last.ms {
                    StreamId { ms: now, seq: 0 }
                } else {
                    last.next().ok_or_else(too_small)?
                }
            }
        };
        if id <= last {
            return Err(too_small());
        }
        s.meta.size += 1;
        s.f.entries_added += 1;
        if s.len() == 1 {
            s.f.first_entry_id = id;
            s.f.recorded_first_entry_id = id;
        }
        s.f.last_generated_id = id;
        s.f.last_entry_id = id;
        let trimmed = self.stream_trim(batch, key, &mut s, &args.trim, Some(id))?;
        if s.len() > 0 {
            self.stream_records(key, &s).put(batch, StreamSub::Entry(id), encode_entry(fields))?;
        }
        self.put_stream(batch, key, &s);
        Ok(Some((id, trimmed)))
    }

    /// Removes entries from the front as `trim` asks, queueing the deletes; returns how many.
    /// Exact trimming removes entries one by one; `~` removes whole nodes (entries in groups
    /// of [`Db::stream_node_entries`], numbered by the order they were added) and stops at
    /// the first node it cannot remove whole, or that would take it past the limit.
    /// `added` is the entry XADD adds, not in the store yet and not in `batch` either (it is
    /// the stream's last: XADD writes it only if it survives, that is when the stream is not
    /// left empty). The caller queues the stream's metadata.
    pub(super) fn stream_trim(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        s: &mut Stream,
        trim: &Trim,
        added: Option<StreamId>,
    ) -> CommandResult<u64> {
        let node = match self.stream_node_entries() {
            0 => u64::MAX,
            n => n,
        };
        let limit = match trim.limit {
            Some(0) => u64::MAX,
            Some(n) => n,
            // Redis' default for `~`: a hundred nodes' worth.
            None if trim.approx => node.saturating_mul(100).clamp(1, 1_000_000),
            None => u64::MAX,
        };
        let mut want = match (trim.max_len, trim.min_id) {
            (Some(n), _) => s.len().saturating_sub(n),
            (None, Some(_)) => s.len(),
            (None, None) => 0,
        };
        want = want.min(limit);
        if want == 0 {
            return Ok(0);
        }
        let records = self.stream_records(key, s);
        let take = usize::try_from(want).unwrap_or(usize::MAX).saturating_add(1);
        let mut found = records.entries(StreamId::MIN, StreamId::MAX, false, take)?;
        if let Some(id) = added
            && found.len() < take
        {
            found.push((id, Bytes::new()));
        }
        // How many of `found` go: every one before the bound, or whole nodes under `~`.
        let mut cut = found
            .iter()
            .take(usize::try_from(want).unwrap_or(usize::MAX))
            .take_while(|(id, _)| trim.min_id.is_none_or(|min| *id < min))
            .count();
        if trim.approx {
            // The first live entry's ordinal, as if nothing between was deleted by XDEL.
            let first = s.f.entries_added.saturating_sub(s.len());
            let mut whole = 0usize;
            let mut at = first;
            loop {
                // A node ends at its size, or at the stream's last entry.
                let left = s.len().saturating_sub(whole as u64);
                let size = usize::try_from((node - at % node).min(left)).unwrap_or(usize::MAX);
                if size == 0 || whole.saturating_add(size) > cut {
                    break;
                }
                whole += size;
                at = at.saturating_add(size as u64);
            }
            cut = whole;
        }
        let mut deleted = 0;
        for (id, _) in &found[..cut] {
            if Some(*id) != added {
                records.delete(batch, StreamSub::Entry(*id))?;
            }
            deleted += 1;
        }
        let next_first = found.get(cut).map_or(StreamId::MIN, |(id, _)| *id);
        if deleted > 0 {
            s.meta.size -= deleted;
            s.f.first_entry_id = if s.len() == 0 { StreamId::MIN } else { next_first };
            if s.len() == 0 {
                s.f.last_entry_id = StreamId::MIN;
            }
        }
        Ok(deleted)
    }

    /// XDEL: deletes the entries `ids` that exist and queues the stream's new counters;
    /// returns how many went.
    ///
    /// # Errors
    /// Storage errors.
    pub(super) fn stream_delete(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        mut s: Stream,
        ids: Vec<StreamId>,
    ) -> CommandResult<u64> {
        let records = self.stream_records(key, &s);
        let mut gone: Vec<StreamId> = Vec::new();
        let mut first_deleted = false;
        for id in ids {
            if gone.contains(&id) || records.entry(id)?.is_none() {
                continue;
            }
            records.delete(batch, StreamSub::Entry(id))?;
            gone.push(id);
            first_deleted |= id == s.f.first_entry_id;
            if id > s.f.max_deleted_entry_id {
                s.f.max_deleted_entry_id = id;
            }
        }
        if gone.is_empty() {
            return Ok(0);
        }
        s.meta.size -= gone.len() as u64;
        if s.len() == 0 {
            s.f.first_entry_id = StreamId::MIN;
            s.f.last_entry_id = StreamId::MIN;
        } else {
            let live = |found: Vec<(StreamId, Bytes)>| {
                found.iter().map(|(id, _)| *id).find(|id| !gone.contains(id)).unwrap_or_default()
            };
            if first_deleted {
                s.f.first_entry_id =
                    live(records.entries(s.f.first_entry_id, StreamId::MAX, false, gone.len() + 1)?);
            }
            if gone.contains(&s.f.last_entry_id) {
                s.f.last_entry_id =
                    live(records.entries(StreamId::MIN, s.f.last_entry_id, true, gone.len() + 1)?);
            }
        }
        self.put_stream(batch, key, &s);
        Ok(gone.len() as u64)
    }

    /// XSETID: sets the last generated id and, when given, the entries-added counter and
    /// the largest deleted id (`StreamId::MIN`: unchanged).
    ///
    /// # Errors
    /// An id below the stream's last entry, or an entries-added below its length.
    pub(super) fn stream_set_id(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        mut s: Stream,
        id: StreamId,
        entries_added: Option<u64>,
        max_deleted: StreamId,
    ) -> CommandResult<()> {
        if s.len() > 0 {
            if id < s.f.last_entry_id {
                return Err(err("ERR The ID specified in XSETID is smaller than the target stream top item"));
            }
            if entries_added.is_some_and(|n| n < s.len()) {
                return Err(err(
                    "ERR The entries_added specified in XSETID is smaller than the target stream length",
                ));
            }
        }
        s.f.last_generated_id = id;
        if let Some(n) = entries_added {
            s.f.entries_added = n;
        }
        if max_deleted != StreamId::MIN {
            s.f.max_deleted_entry_id = max_deleted;
        }
        self.put_stream(batch, key, &s);
        Ok(())
    }

    /// Queues `key` as a new stream holding `rdb` (RESTORE): its metadata and every record,
    /// under a fresh version.
    ///
    /// # Errors
    /// Storage errors (a key too long for the layout).
    pub(in crate::commands) fn queue_stream(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        rdb: &RdbStream,
        expire_ms: u64,
    ) -> CommandResult<()> {
        let mut s = Stream::new(Metadata {
            expire_ms,
            ..Metadata::collection(RedisType::Stream, self.new_version())
        });
        s.meta.size = rdb.entries.len() as u64;
        s.f = StreamFields {
            last_generated_id: rdb.last_id,
            recorded_first_entry_id: rdb.first_id,
            max_deleted_entry_id: rdb.max_deleted_id,
            first_entry_id: rdb.first_id,
            last_entry_id: rdb.entries.last().map_or(StreamId::MIN, |e| e.0),
            entries_added: rdb.entries_added,
            group_number: Some(rdb.groups.len() as u64),
        };
        let records = self.stream_records(key, &s);
        for (id, fields) in &rdb.entries {
            records.put(batch, StreamSub::Entry(*id), encode_entry(fields))?;
        }
        for g in &rdb.groups {
            let group = g.name.as_ref();
            let value = GroupValue {
                consumers: g.consumers.len() as u64,
                pending: g.pending.len() as u64,
                last_delivered: g.last_id,
                entries_read: g.entries_read,
                lag: 0,
            };
            records.put_group(batch, group, &value)?;
            for (name, seen) in &g.consumers {
                let held = g.pending.iter().filter(|p| p.3 == name).count() as u64;
                let c = ConsumerValue { pending: held, seen_ms: *seen, active_ms: *seen };
                records.put_consumer(batch, group, name, &c)?;
            }
            for (id, delivered_ms, deliveries, owner) in &g.pending {
                let p =
                    PendingValue { delivered_ms: *delivered_ms, deliveries: *deliveries, consumer: owner };
                records.put_pending(batch, group, *id, &p)?;
            }
        }
        self.put_stream(batch, key, &s);
        Ok(())
    }
}
