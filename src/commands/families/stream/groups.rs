//! Consumer groups, their consumers and pending entries lists: creating and removing them,
//! delivering entries to a consumer (XREADGROUP), acknowledging and claiming. Each
//! function queues its records in the caller's batch.

use std::collections::HashMap;

use bytes::Bytes;

use super::core::{Records, Stream, entry_fields};
use super::parse::ClaimArgs;
use crate::backend::{ColumnFamily, Direction, KvBackend, WriteBatch};
use crate::codec::{
    ConsumerValue, GroupValue, PendingValue, RedisType, StreamId, StreamSub, group_records_prefix,
    prefix_successor,
};
use crate::commands::{CommandResult, Db};

/// An entry delivered to a consumer: its id and fields, or no fields for an entry deleted
/// since it was delivered (or when only ids were asked for).
pub(super) type Delivered = (StreamId, Option<Vec<Bytes>>);

/// What one consumer reads from its group on one stream (XREADGROUP).
pub(super) struct GroupRead<'a> {
    pub(super) group: &'a [u8],
    pub(super) consumer: &'a [u8],
    /// The id after which to deliver the consumer's history; `None`: new entries (`>`).
    pub(super) after: Option<StreamId>,
    /// At most this many (0: all).
    pub(super) count: usize,
    /// New entries are not made pending.
    pub(super) noack: bool,
}

/// Who claims pending entries (XCLAIM, XAUTOCLAIM): a consumer of group `group` (its
/// record `g`), claiming entries idle at least `min_idle` ms at `now`.
pub(super) struct Claimant<'a> {
    pub(super) group: &'a [u8],
    pub(super) g: GroupValue,
    pub(super) name: &'a [u8],
    pub(super) min_idle: i64,
    pub(super) now: i64,
}

/// One consumer reading from its group within one XREADGROUP, XCLAIM or XAUTOCLAIM: the
/// consumer's record (created if missing) and the pending counts to write back.
struct GroupReader<'a, 's, 'd, B: KvBackend> {
    records: Records<'s, 'd, B>,
    group: &'a [u8],
    name: &'a [u8],
    me: ConsumerValue,
    /// Whether this reader created the consumer (its group counts one more).
    created: bool,
    /// Other consumers whose pending counts changed.
    others: HashMap<Bytes, ConsumerValue>,
    now: u64,
}

impl<'a, 's, 'd, B: KvBackend> GroupReader<'a, 's, 'd, B> {
    /// Looks the consumer up (refreshing its seen time) or creates it (its record is
    /// written by [`GroupReader::close`]; the key goes in `created` for its event, and the
    /// caller counts it in its group).
    fn open(
        records: Records<'s, 'd, B>,
        group: &'a [u8],
        name: &'a [u8],
        created: &mut Vec<Bytes>,
    ) -> CommandResult<Self> {
        let now = records.db.now_ms();
        let found = records.consumer(group, name)?;
        if found.is_none() {
            created.push(Bytes::copy_from_slice(records.key));
        }
        let me = ConsumerValue { seen_ms: now, ..found.unwrap_or_default() };
        Ok(GroupReader { records, group, name, me, created: found.is_none(), others: HashMap::new(), now })
    }

    /// Moves pending entry `id` to this consumer with a new delivery time and count;
    /// `owner` is its current holder (`None`: a new pending entry). Propagated as Redis does,
    /// with the group's last delivered id `last`.
    fn take(
        &mut self,
        id: StreamId,
        owner: Option<&[u8]>,
        (delivered_ms, deliveries): (u64, u64),
        last: StreamId,
        batch: &mut WriteBatch,
    ) -> CommandResult<()> {
        self.records.propagate_claim(self.group, self.name, id, (delivered_ms, deliveries), last);
        match owner {
            Some(o) if o == self.name => {}
            Some(o) => {
                let other = self.other(o)?;
                other.pending = other.pending.saturating_sub(1);
                self.me.pending += 1;
            }
            None => self.me.pending += 1,
        }
        let value = PendingValue { delivered_ms, deliveries, consumer: self.name };
        self.records.put_pending(batch, self.group, id, &value)
    }

    fn other(&mut self, name: &[u8]) -> CommandResult<&mut ConsumerValue> {
        if !self.others.contains_key(name) {
            let found = self.records.consumer(self.group, name)?.unwrap_or_default();
            self.others.insert(Bytes::copy_from_slice(name), found);
        }
        Ok(self.others.get_mut(name).expect("just inserted"))
    }

    /// XREADGROUP `>`: entries after the group's last delivered id, made pending for this
    /// consumer unless `noack`.
    fn new_entries(
        &mut self,
        s: &Stream,
        g: &mut GroupValue,
        count: usize,
        noack: bool,
        batch: &mut WriteBatch,
    ) -> CommandResult<Vec<Delivered>> {
        let Some(start) = g.last_delivered.next() else { return Ok(Vec::new()) };
        let found = self.records.entries(start, StreamId::MAX, false, count)?;
        let mut out = Vec::with_capacity(found.len());
        for (id, value) in &found {
            s.deliver(g, *id);
            out.push((*id, Some(entry_fields(*id, value)?)));
            if noack {
                continue;
            }
            let owner = match self.records.pending_entry(self.group, *id)? {
                Some((_, _, owner)) => Some(owner),
                None => {
                    g.pending += 1;
                    None
                }
            };
            self.take(*id, owner.as_deref(), (self.now, 1), g.last_delivered, batch)?;
        }
        if !found.is_empty() {
            self.me.active_ms = self.now;
        }
        Ok(out)
    }

    /// XREADGROUP with an id: this consumer's pending entries from `start`, each delivered
    /// again (without fields for an entry deleted since).
    fn history(
        &mut self,
        start: StreamId,
        count: usize,
        batch: &mut WriteBatch,
    ) -> CommandResult<Vec<Delivered>> {
        let mine: Vec<(StreamId, u64)> = self
            .records
            .pending(self.group, start)?
            .filter(|p| p.as_ref().is_err() || p.as_ref().is_ok_and(|p| p.3 == self.name))
            .take(if count == 0 { usize::MAX } else { count })
            .map(|p| p.map(|p| (p.0, p.2)))
            .collect::<CommandResult<_>>()?;
        let mut out = Vec::with_capacity(mine.len());
        for (id, deliveries) in mine {
            match self.records.entry(id)? {
                None => out.push((id, None)),
                Some(value) => {
                    out.push((id, Some(entry_fields(id, &value)?)));
                    let value = PendingValue {
                        delivered_ms: self.now,
                        deliveries: deliveries + 1,
                        consumer: self.name,
                    };
                    self.records.put_pending(batch, self.group, id, &value)?;
                }
            }
        }
        Ok(out)
    }

    /// A pending entry of a deleted stream entry is dropped: its holder's count goes down.
    fn release(&mut self, owner: &[u8]) -> CommandResult<()> {
        if owner == self.name {
            self.me.pending = self.me.pending.saturating_sub(1);
        } else {
            let c = self.other(owner)?;
            c.pending = c.pending.saturating_sub(1);
        }
        Ok(())
    }

    /// Queues this consumer's record and every other consumer whose count changed.
    fn close(self, batch: &mut WriteBatch) -> CommandResult<()> {
        self.records.put_consumer(batch, self.group, self.name, &self.me)?;
        for (name, c) in &self.others {
            self.records.put_consumer(batch, self.group, name, c)?;
        }
        Ok(())
    }
}

/// The reader XCLAIM and XAUTOCLAIM open at their first claim, and the pending entries they
/// drop before it.
struct Claimer<'a, 's, 'd, B: KvBackend> {
    records: Records<'s, 'd, B>,
    group: &'a [u8],
    name: &'a [u8],
    reader: Option<GroupReader<'a, 's, 'd, B>>,
}

impl<'a, 's, 'd, B: KvBackend> Claimer<'a, 's, 'd, B> {
    /// The reader, opened (and counted in `g` when it creates the consumer) on first use.
    fn reader(
        &mut self,
        g: &mut GroupValue,
        created: &mut Vec<Bytes>,
    ) -> CommandResult<(&mut GroupReader<'a, 's, 'd, B>, bool)> {
        let mut counted = false;
        if self.reader.is_none() {
            let r = GroupReader::open(self.records, self.group, self.name, created)?;
            if r.created {
                g.consumers += 1;
                counted = true;
            }
            self.reader = Some(r);
        }
        Ok((self.reader.as_mut().expect("just opened"), counted))
    }

    /// Drops the pending entry of a deleted entry held by `owner`.
    fn release(&mut self, owner: &[u8], batch: &mut WriteBatch) -> CommandResult<()> {
        match &mut self.reader {
            Some(r) => r.release(owner),
            None => {
                if let Some(mut c) = self.records.consumer(self.group, owner)? {
                    c.pending = c.pending.saturating_sub(1);
                    self.records.put_consumer(batch, self.group, owner, &c)?;
                }
                Ok(())
            }
        }
    }

    fn close(self, batch: &mut WriteBatch) -> CommandResult<()> {
        match self.reader {
            Some(r) => r.close(batch),
            None => Ok(()),
        }
    }
}

impl<B: KvBackend> Db<'_, B> {
    /// XGROUP CREATE: a group delivering after `id`, on the stream `s` or on a new empty
    /// stream (MKSTREAM).
    ///
    /// # Errors
    /// Storage errors.
    pub(super) fn stream_create_group(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        s: Option<Stream>,
        group: &[u8],
        id: StreamId,
        entries_read: i64,
    ) -> CommandResult<()> {
        let mut s = s.unwrap_or_else(|| Stream::new(self.new_collection(RedisType::Stream)));
        let g = GroupValue { last_delivered: id, entries_read, ..GroupValue::default() };
        self.stream_records(key, &s).put_group(batch, group, &g)?;
        s.f.group_number = Some(s.f.group_number.unwrap_or(0) + 1);
        self.put_stream(batch, key, &s);
        Ok(())
    }

    /// XGROUP DESTROY: the group's record, its consumers and its pending entries.
    ///
    /// # Errors
    /// Storage errors.
    pub(super) fn stream_destroy_group(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        mut s: Stream,
        group: &[u8],
    ) -> CommandResult<()> {
        let records = self.stream_records(key, &s);
        records.delete(batch, StreamSub::Group(group))?;
        for pending in [false, true] {
            let from = group_records_prefix(pending, group);
            let to = prefix_successor(&from);
            for item in records.scan(&from, to.as_deref(), Direction::Forward)? {
                let (sub, _) = item?;
                batch.delete(ColumnFamily::Stream, self.subkey(key, s.version(), &sub)?);
            }
        }
        s.f.group_number = Some(s.f.group_number.unwrap_or(1).saturating_sub(1));
        self.put_stream(batch, key, &s);
        Ok(())
    }
}

impl<B: KvBackend> Records<'_, '_, B> {
    /// XGROUP CREATECONSUMER: whether consumer `name` was created in group `g`.
    pub(super) fn create_consumer(
        self,
        batch: &mut WriteBatch,
        group: &[u8],
        mut g: GroupValue,
        name: &[u8],
    ) -> CommandResult<bool> {
        if self.consumer(group, name)?.is_some() {
            return Ok(false);
        }
        g.consumers += 1;
        self.put_group(batch, group, &g)?;
        let c = ConsumerValue { seen_ms: self.db.now_ms(), ..ConsumerValue::default() };
        self.put_consumer(batch, group, name, &c)?;
        Ok(true)
    }

    /// XGROUP DELCONSUMER: removes consumer `name` and its pending entries; returns how many
    /// pending entries it held, or `None` when there is no such consumer.
    pub(super) fn delete_consumer(
        self,
        batch: &mut WriteBatch,
        group: &[u8],
        mut g: GroupValue,
        name: &[u8],
    ) -> CommandResult<Option<u64>> {
        if self.consumer(group, name)?.is_none() {
            return Ok(None);
        }
        let mut removed = 0;
        for p in self.pending(group, StreamId::MIN)? {
            let (id, _, _, owner) = p?;
            if owner == name {
                self.delete(batch, StreamSub::Pending { group, id })?;
                removed += 1;
            }
        }
        g.consumers = g.consumers.saturating_sub(1);
        g.pending = g.pending.saturating_sub(removed);
        self.put_group(batch, group, &g)?;
        self.delete(batch, StreamSub::Consumer { group, consumer: name })?;
        Ok(Some(removed))
    }

    /// XACK: removes the pending entries `ids` of group `g`; returns how many there were.
    pub(super) fn ack(
        self,
        batch: &mut WriteBatch,
        group: &[u8],
        mut g: GroupValue,
        ids: Vec<StreamId>,
    ) -> CommandResult<u64> {
        let mut acked: Vec<StreamId> = Vec::new();
        let mut owners: HashMap<Bytes, u64> = HashMap::new();
        for id in ids {
            if acked.contains(&id) {
                continue;
            }
            let Some((_, _, owner)) = self.pending_entry(group, id)? else { continue };
            *owners.entry(owner).or_default() += 1;
            self.delete(batch, StreamSub::Pending { group, id })?;
            acked.push(id);
        }
        if acked.is_empty() {
            return Ok(0);
        }
        g.pending = g.pending.saturating_sub(acked.len() as u64);
        self.put_group(batch, group, &g)?;
        for (name, n) in owners {
            if let Some(mut c) = self.consumer(group, &name)? {
                c.pending = c.pending.saturating_sub(n);
                self.put_consumer(batch, group, &name, &c)?;
            }
        }
        Ok(acked.len() as u64)
    }

    /// XREADGROUP on this stream: new entries or the consumer's history, as `read` asks, for
    /// group `g`. `None` when `>` finds nothing new (the key is left out of the reply).
    /// A consumer created goes in `created` (by key).
    pub(super) fn read_group(
        self,
        batch: &mut WriteBatch,
        created: &mut Vec<Bytes>,
        s: &Stream,
        mut g: GroupValue,
        read: &GroupRead<'_>,
    ) -> CommandResult<Option<Vec<Delivered>>> {
        if read.after.is_none() && (s.len() == 0 || s.f.last_entry_id <= g.last_delivered) {
            return Ok(None);
        }
        let mut reader = GroupReader::open(self, read.group, read.consumer, created)?;
        if reader.created {
            g.consumers += 1;
        }
        let delivered = match read.after {
            Some(after) => match after.next() {
                Some(start) => reader.history(start, read.count, batch)?,
                None => Vec::new(),
            },
            None => reader.new_entries(s, &mut g, read.count, read.noack, batch)?,
        };
        if read.noack && read.after.is_none() {
            // No pending entries to claim: the consumer and the group's position instead.
            let (key, group) = (Bytes::copy_from_slice(self.key), Bytes::copy_from_slice(read.group));
            if reader.created {
                let consumer = Bytes::copy_from_slice(read.consumer);
                self.db.propagate_instead(vec![
                    Bytes::from_static(b"XGROUP"),
                    Bytes::from_static(b"CREATECONSUMER"),
                    key.clone(),
                    group.clone(),
                    consumer,
                ]);
            }
            if !delivered.is_empty() {
                self.propagate_group_id(read.group, &g);
            }
        }
        reader.close(batch)?;
        self.put_group(batch, read.group, &g)?;
        Ok(Some(delivered))
    }

    /// XCLAIM: moves the pending entries `ids` idle long enough to the claimant as `args`
    /// asks (dropping those whose entries were deleted). Returns
    /// the claimed entries, without fields under JUSTID.
    pub(super) fn claim(
        self,
        batch: &mut WriteBatch,
        created: &mut Vec<Bytes>,
        who: Claimant<'_>,
        ids: Vec<StreamId>,
        args: &ClaimArgs,
    ) -> CommandResult<Vec<Delivered>> {
        let Claimant { group, mut g, name, min_idle, now } = who;
        let mut group_changed = false;
        let last_id_moved = args.last_id > g.last_delivered;
        if last_id_moved {
            g.last_delivered = args.last_id;
            group_changed = true;
        }
        let mut claims_propagated = false;
        let delivery = match args.time {
            Some(t) if t >= 0 && t <= now => t as u64,
            _ => now as u64,
        };
        let mut claimer = Claimer { records: self, group, name, reader: None };
        let mut out = Vec::new();
        for id in ids {
            let pending = self.pending_entry(group, id)?;
            let Some(entry) = self.entry(id)? else {
                if let Some((delivered, deliveries, owner)) = pending {
                    self.propagate_claim(group, &owner, id, (delivered, deliveries), g.last_delivered);
                    claims_propagated = true;
                    self.delete(batch, StreamSub::Pending { group, id })?;
                    g.pending = g.pending.saturating_sub(1);
                    group_changed = true;
                    claimer.release(&owner, batch)?;
                }
                continue;
            };
            let (owner, deliveries) = match pending {
                Some((delivered, deliveries, owner)) => {
                    if min_idle > 0 && now - (delivered as i64) < min_idle {
                        continue;
                    }
                    (Some(owner), deliveries)
                }
                // A pending entry FORCE creates counts one delivery, as Redis' new NACK.
                None if args.force => {
                    g.pending += 1;
                    group_changed = true;
                    (None, 1)
                }
                None => continue,
            };
            let (r, counted) = claimer.reader(&mut g, created)?;
            group_changed |= counted;
            let deliveries = match args.retry {
                Some(n) if n >= 0 => n as u64,
                _ if args.justid => deliveries,
                _ => deliveries + 1,
            };
            r.take(id, owner.as_deref(), (delivery, deliveries), g.last_delivered, batch)?;
            claims_propagated = true;
            r.me.active_ms = now as u64;
            out.push((id, if args.justid { None } else { Some(entry_fields(id, &entry)?) }));
        }
        claimer.close(batch)?;
        if last_id_moved && !claims_propagated {
            self.propagate_group_id(group, &g);
        }
        if group_changed {
            self.put_group(batch, group, &g)?;
        }
        Ok(out)
    }

    /// XAUTOCLAIM: moves up to `count` pending entries from `start` on, idle long enough, to
    /// the claimant, dropping those whose entries were deleted
    /// (they count too). Returns the id to continue from, the claimed entries (without
    /// fields under `justid`) and the ids dropped.
    pub(super) fn autoclaim(
        self,
        batch: &mut WriteBatch,
        created: &mut Vec<Bytes>,
        who: Claimant<'_>,
        start: StreamId,
        mut count: i64,
        justid: bool,
    ) -> CommandResult<(StreamId, Vec<Delivered>, Vec<StreamId>)> {
        let Claimant { group, mut g, name, min_idle, now } = who;
        let mut attempts = count.saturating_mul(10);
        let pel: Vec<(StreamId, u64, u64, Bytes)> =
            self.pending(group, start)?.collect::<CommandResult<_>>()?;
        let mut claimer = Claimer { records: self, group, name, reader: None };
        let (mut out, mut deleted) = (Vec::new(), Vec::new());
        let mut index = 0;
        while attempts > 0 && count > 0 && index < pel.len() {
            attempts -= 1;
            let (id, delivered, deliveries, owner) = &pel[index];
            index += 1;
            let Some(entry) = self.entry(*id)? else {
                self.propagate_claim(group, owner, *id, (*delivered, *deliveries), g.last_delivered);
                self.delete(batch, StreamSub::Pending { group, id: *id })?;
                g.pending = g.pending.saturating_sub(1);
                claimer.release(owner, batch)?;
                deleted.push(*id);
                count -= 1;
                continue;
            };
            if min_idle > 0 && now - (*delivered as i64) < min_idle {
                continue;
            }
            let (r, _) = claimer.reader(&mut g, created)?;
            let deliveries = if justid { *deliveries } else { deliveries + 1 };
            r.take(*id, Some(owner), (now as u64, deliveries), g.last_delivered, batch)?;
            r.me.active_ms = now as u64;
            out.push((*id, if justid { None } else { Some(entry_fields(*id, &entry)?) }));
            count -= 1;
        }
        let next = pel.get(index).map_or(StreamId::MIN, |p| p.0);
        claimer.close(batch)?;
        self.put_group(batch, group, &g)?;
        Ok((next, out, deleted))
    }
}

impl<B: KvBackend> Records<'_, '_, B> {
    /// Redis' propagation of a pending entry (`streamPropagateXCLAIM`): `XCLAIM key group
    /// consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID last`, which gives the entry
    /// to the consumer on a replica as it is here (or drops it there, its entry deleted).
    fn propagate_claim(
        &self,
        group: &[u8],
        consumer: &[u8],
        id: StreamId,
        (delivered_ms, deliveries): (u64, u64),
        last: StreamId,
    ) {
        if !self.db.records_propagation() {
            return;
        }
        let b = Bytes::from_static;
        let text = |t: String| Bytes::from(t);
        self.db.propagate_instead(vec![
            b(b"XCLAIM"),
            Bytes::copy_from_slice(self.key),
            Bytes::copy_from_slice(group),
            Bytes::copy_from_slice(consumer),
            b(b"0"),
            text(id.to_string()),
            b(b"TIME"),
            text(delivered_ms.to_string()),
            b(b"RETRYCOUNT"),
            text(deliveries.to_string()),
            b(b"FORCE"),
            b(b"JUSTID"),
            b(b"LASTID"),
            text(last.to_string()),
        ]);
    }

    /// Redis' propagation of a group's position (`streamPropagateGroupID`): `XGROUP SETID
    /// key group last ENTRIESREAD n`.
    fn propagate_group_id(&self, group: &[u8], g: &GroupValue) {
        if !self.db.records_propagation() {
            return;
        }
        self.db.propagate_instead(vec![
            Bytes::from_static(b"XGROUP"),
            Bytes::from_static(b"SETID"),
            Bytes::copy_from_slice(self.key),
            Bytes::copy_from_slice(group),
            Bytes::from(g.last_delivered.to_string()),
            Bytes::from_static(b"ENTRIESREAD"),
            Bytes::from(g.entries_read.to_string()),
        ]);
    }
}
