//! Read-only stream queries: ranges of entries, a group's pending entries, DUMP's whole
//! stream.

use bytes::Bytes;

use super::core::{Entry, Pending, Records, Stream, decode_entries, entry_fields};
use crate::backend::KvBackend;
use crate::codec::rdb::{RdbGroup, RdbStream};
use crate::codec::{Metadata, StreamId};
use crate::commands::{CommandResult, Db};

/// XPENDING's summary of a group: how many entries are pending, the first and last ids,
/// and how many each consumer holds (by name).
pub(super) struct PendingSummary {
    pub(super) count: usize,
    pub(super) first: StreamId,
    pub(super) last: StreamId,
    pub(super) per_consumer: Vec<(Bytes, i64)>,
}

/// XPENDING's filter of a group's pending entries.
pub(super) struct PendingQuery<'a> {
    pub(super) start: StreamId,
    pub(super) end: StreamId,
    /// At most this many (0: none).
    pub(super) count: usize,
    /// Only entries idle this long (ms; 0: all).
    pub(super) min_idle: i64,
    pub(super) consumer: Option<&'a [u8]>,
}

impl<B: KvBackend> Records<'_, '_, B> {
    /// Up to `count` entries (0: all) with ids in `[start, end]`, decoded.
    pub(super) fn range(
        self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: usize,
    ) -> CommandResult<Vec<Entry>> {
        decode_entries(&self.entries(start, end, rev, count)?)
    }

    /// Up to `count` entries (0: all) after `after`, or `None` when the stream has none
    /// after it.
    pub(super) fn after(
        self,
        s: &Stream,
        after: StreamId,
        count: usize,
    ) -> CommandResult<Option<Vec<Entry>>> {
        if s.len() == 0 || s.f.last_entry_id <= after {
            return Ok(None);
        }
        let Some(start) = after.next() else { return Ok(None) };
        self.range(start, StreamId::MAX, false, count).map(Some)
    }

    /// A group's pending entries summed up, or `None` when it has none.
    pub(super) fn pending_summary(self, group: &[u8]) -> CommandResult<Option<PendingSummary>> {
        let all: Vec<Pending> = self.pending(group, StreamId::MIN)?.collect::<CommandResult<_>>()?;
        let (Some(first), Some(last)) = (all.first(), all.last()) else { return Ok(None) };
        let mut per: Vec<(Bytes, i64)> = Vec::new();
        for (_, _, _, owner) in &all {
            match per.iter_mut().find(|(o, _)| o == owner) {
                Some((_, n)) => *n += 1,
                None => per.push((owner.clone(), 1)),
            }
        }
        per.sort();
        Ok(Some(PendingSummary { count: all.len(), first: first.0, last: last.0, per_consumer: per }))
    }

    /// The pending entries `q` selects, each with its idle time at `now` (in place of its
    /// delivery time).
    pub(super) fn pending_range(
        self,
        group: &[u8],
        q: &PendingQuery<'_>,
        now: i64,
    ) -> CommandResult<Vec<Pending>> {
        let mut out = Vec::new();
        if q.count == 0 {
            return Ok(out);
        }
        for p in self.pending(group, q.start)? {
            let (id, delivered, deliveries, owner) = p?;
            if id > q.end {
                break;
            }
            if q.consumer.is_some_and(|c| c != owner.as_ref()) {
                continue;
            }
            let idle = now - delivered as i64;
            if q.min_idle != 0 && idle < q.min_idle {
                continue;
            }
            out.push((id, idle.max(0) as u64, deliveries, owner));
            if out.len() == q.count {
                break;
            }
        }
        Ok(out)
    }
}

impl<B: KvBackend> Db<'_, B> {
    /// The stream at `key` (its metadata `meta`) as DUMP carries it.
    ///
    /// # Errors
    /// Storage errors, and an undecodable record.
    pub(in crate::commands) fn stream_rdb(
        &self,
        key: &[u8],
        meta: &Metadata<'_>,
    ) -> CommandResult<RdbStream> {
        let s = Stream::new(meta.clone().without_value());
        let records = self.stream_records(key, &s);
        let mut entries = Vec::with_capacity(usize::try_from(s.len()).unwrap_or(0).min(1 << 20));
        for (id, value) in records.entries(StreamId::MIN, StreamId::MAX, false, 0)? {
            entries.push((id, entry_fields(id, &value)?));
        }
        let mut groups = Vec::new();
        for (name, g) in records.groups()? {
            let pending = records.pending(&name, StreamId::MIN)?.collect::<CommandResult<_>>()?;
            let consumers = records.consumers(&name)?.into_iter().map(|(c, v)| (c, v.seen_ms)).collect();
            groups.push(RdbGroup {
                name,
                last_id: g.last_delivered,
                entries_read: g.entries_read,
                pending,
                consumers,
            });
        }
        Ok(RdbStream {
            entries,
            last_id: s.f.last_generated_id,
            first_id: s.f.first_entry_id,
            max_deleted_id: s.f.max_deleted_entry_id,
            entries_added: s.f.entries_added,
            groups,
        })
    }
}
