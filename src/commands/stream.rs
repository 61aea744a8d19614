//! The stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD, XREADGROUP,
//! XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO and XSETID.
//!
//! A stream is one metadata record (version, length, and Kvrocks' stream counters: last
//! generated id, first entry, max deleted id, entries added, group count) plus records in
//! the Stream CF under the stream's subkey prefix (see [`crate::codec::StreamSub`]): one per
//! entry, keyed by its id, and after every entry the consumer groups, their consumers and
//! their pending entries. A stream exists with no entries (after XDEL of every entry, or
//! XGROUP CREATE … MKSTREAM); DEL is one metadata delete, as for every type.
//!
//! Trimming with `~` removes only whole nodes, as Redis does: a node holds
//! `stream-node-max-entries` consecutive entries by the order they were added
//! ([`Db::set_stream_node_entries`]). Redis also closes a node at `stream-node-max-bytes`;
//! here only the entry count does, so a stream of large entries may keep more under `~`
//! than Redis would.

use std::collections::HashMap;

use bytes::Bytes;

use super::args::int_arg;
use super::notify::NotifyFlags;
use super::{CommandError, CommandResult, Db, Reply};
use crate::backend::{ColumnFamily, Direction, KvBackend, WriteBatch};
use crate::codec::rdb::{RdbGroup, RdbStream};
use crate::codec::{
    ConsumerValue, Extra, GroupValue, Metadata, PendingValue, RedisType, StreamFields, StreamId, StreamSub,
    decode_entry, encode_entry, group_records_prefix, groups_prefix, prefix_successor,
};

const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
/// How many entries a woken XREAD without COUNT is served (Redis' default).
const BLOCKED_COUNT: &str = "1000";

fn err(text: &str) -> CommandError {
    CommandError::Other(text.to_string())
}

/// Parses `<ms>-<seq>`, `<ms>` (`seq` = `missing_seq`), `-` and `+` (unless `strict`), and
/// with `seq_given` the `<ms>-*` form (then `seq_given` is set to false).
fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_given: Option<&mut bool>,
) -> CommandResult<StreamId> {
    let invalid = || err(INVALID_ID);
    if arg.len() > 127 {
        return Err(invalid());
    }
    if strict && (arg == b"-" || arg == b"+") {
        return Err(invalid());
    }
    let mut given = true;
    let id = match arg {
        b"-" => StreamId::MIN,
        b"+" => StreamId::MAX,
        _ => {
            let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
                Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
                None => (arg, None),
            };
            let ms = parse_u64(ms).ok_or_else(invalid)?;
            let seq = match seq {
                Some(b"*") if seq_given.is_some() => {
                    given = false;
                    0
                }
                Some(seq) => parse_u64(seq).ok_or_else(invalid)?,
                None => missing_seq,
            };
            StreamId { ms, seq }
        }
    };
    if let Some(flag) = seq_given {
        *flag = given;
    }
    Ok(id)
}

/// Redis' `string2ull`: a non-negative `long long`, or what `strtoull` reads whole
/// (leading spaces and a `+` allowed).
fn parse_u64(s: &[u8]) -> Option<u64> {
    if let Some(v) = super::args::parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let s = s.trim_ascii_start();
    let digits = s.strip_prefix(b"+").unwrap_or(s);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// An interval bound: `(` makes it exclusive (the id after, or before for an end).
fn parse_bound(arg: &[u8], end: bool) -> CommandResult<StreamId> {
    let missing = if end { u64::MAX } else { 0 };
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id(&arg[1..], missing, true, None)?;
        return if end {
            id.prev().ok_or_else(|| err("ERR invalid end ID for the interval"))
        } else {
            id.next().ok_or_else(|| err("ERR invalid start ID for the interval"))
        };
    }
    parse_id(arg, missing, false, None)
}

fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(Bytes::from(id.to_string()))
}

/// A name as Redis' `%s` prints it: the bytes before the first NUL.
fn c_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes.split(|&b| b == 0).next().unwrap_or_default())
}

/// A stream record that does not decode: an error naming what it is, never a panic.
fn undecodable(what: &str) -> impl Fn(crate::Error) -> CommandError + '_ {
    move |e| CommandError::err(format!("undecodable {what}: {e}"))
}

fn subcommand_error(argv: &[Bytes]) -> CommandError {
    CommandError::Other(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        c_text(&argv[1]),
        String::from_utf8_lossy(&argv[0]).to_uppercase()
    ))
}

fn fields_of(meta: &Metadata<'_>) -> StreamFields {
    match meta.fields() {
        Extra::Stream(f) => f,
        _ => StreamFields::default(),
    }
}

/// An entry's fields and values, copied out of its record.
fn entry_fields(id: StreamId, value: &[u8]) -> CommandResult<Vec<Bytes>> {
    let fields = decode_entry(value).map_err(undecodable(&format!("stream entry {id}")))?;
    Ok(fields.into_iter().map(Bytes::copy_from_slice).collect())
}

/// An entry as Redis replies it: `[id, [field, value, …]]`.
fn entry_reply(id: StreamId, value: &[u8]) -> CommandResult<Reply> {
    let fields = entry_fields(id, value)?.into_iter().map(Reply::Bulk).collect();
    Ok(Reply::Array(vec![id_reply(id), Reply::Array(fields)]))
}

/// A stream read for one command: its metadata and counters.
struct Stream {
    meta: Metadata<'static>,
    f: StreamFields,
}

impl Stream {
    fn new(meta: Metadata<'static>) -> Self {
        let f = fields_of(&meta);
        Stream { meta, f }
    }

    fn version(&self) -> u128 {
        self.meta.version
    }

    fn len(&self) -> u64 {
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

    /// Redis' `streamReplyWithCGLag`.
    fn lag(&self, g: &GroupValue) -> Reply {
        let added = self.f.entries_added as i64;
        if added == 0 {
            return Reply::Integer(0);
        }
        if g.entries_read != -1 && !self.has_tombstones(g.last_delivered, StreamId::MAX) {
            return Reply::Integer(added - g.entries_read);
        }
        match self.estimate(g.last_delivered) {
            Some(read) => Reply::Integer(added - read),
            None => Reply::Nil,
        }
    }

    /// Advances a group past the delivered `id` (Redis' read-counter bookkeeping).
    fn deliver(&self, g: &mut GroupValue, id: StreamId) {
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

/// The trimming XADD and XTRIM ask for.
#[derive(Default)]
struct Trim {
    max_len: Option<u64>,
    min_id: Option<StreamId>,
    /// `~`: whole nodes only.
    approx: bool,
    /// `LIMIT`, given or defaulted (0: none).
    limit: Option<u64>,
}

/// XADD's and XTRIM's options; for XADD also where its id is and the id given.
struct AddArgs {
    trim: Trim,
    nomkstream: bool,
    id: Option<(StreamId, bool)>,
    id_pos: usize,
}

fn parse_add_or_trim(argv: &[Bytes], xadd: bool) -> CommandResult<AddArgs> {
    let mut args = AddArgs { trim: Trim::default(), nomkstream: false, id: None, id_pos: argv.len() };
    let (mut approx, mut limit_given, mut limit) = (false, false, 0u64);
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        let opt = argv[i].as_ref();
        if xadd && opt == b"*" {
            break;
        } else if (opt.eq_ignore_ascii_case(b"maxlen") || opt.eq_ignore_ascii_case(b"minid")) && more > 0 {
            if args.trim.max_len.is_some() || args.trim.min_id.is_some() {
                return Err(err(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            approx = false;
            let next = argv[i + 1].as_ref();
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if opt.eq_ignore_ascii_case(b"maxlen") {
                let n = int_arg(&argv[i + 1])?;
                if n < 0 {
                    return Err(err("ERR The MAXLEN argument must be >= 0."));
                }
                args.trim.max_len = Some(n as u64);
            } else {
                args.trim.min_id = Some(parse_id(&argv[i + 1], 0, true, None)?);
            }
            i += 1;
        } else if opt.eq_ignore_ascii_case(b"limit") && more > 0 {
            let n = int_arg(&argv[i + 1])?;
            if n < 0 {
                return Err(err("ERR The LIMIT argument must be >= 0."));
            }
            limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && opt.eq_ignore_ascii_case(b"nomkstream") {
            args.nomkstream = true;
        } else if xadd {
            let mut seq_given = true;
            let id = parse_id(opt, 0, true, Some(&mut seq_given))?;
            args.id = Some((id, seq_given));
            break;
        } else {
            return Err(CommandError::Syntax);
        }
        i += 1;
    }
    args.id_pos = i;
    let strategy = args.trim.max_len.is_some() || args.trim.min_id.is_some();
    if limit != 0 && !strategy {
        return Err(err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"));
    }
    if !xadd && !strategy {
        return Err(err("ERR syntax error, XTRIM must be called with a trimming strategy"));
    }
    if limit_given && !approx {
        return Err(err("ERR syntax error, LIMIT cannot be used without the special ~ option"));
    }
    args.trim.approx = approx;
    args.trim.limit = limit_given.then_some(limit);
    Ok(args)
}

impl<'d, B: KvBackend> Db<'d, B> {
    fn stream(&self, key: &[u8]) -> CommandResult<Option<Stream>> {
        Ok(self.lookup_of(key, RedisType::Stream)?.map(Stream::new))
    }

    fn record(&self, key: &[u8], version: u128, sub: StreamSub<'_>) -> CommandResult<Vec<u8>> {
        self.subkey(key, version, &sub.to_bytes())
    }

    fn get_record(&self, key: &[u8], version: u128, sub: StreamSub<'_>) -> CommandResult<Option<Bytes>> {
        Ok(self.backend().get(ColumnFamily::Stream, &self.record(key, version, sub)?)?)
    }

    /// The records whose `sub` lies in `[from, to)` (`to: None`: to the end of the stream),
    /// as `(sub, value)`.
    fn records<'s>(
        &'s self,
        key: &[u8],
        version: u128,
        from: &[u8],
        to: Option<&[u8]>,
        direction: Direction,
    ) -> CommandResult<impl Iterator<Item = CommandResult<(Bytes, Bytes)>> + use<'s, 'd, B>> {
        let prefix = self.layout().subkey_prefix(key, version, 0)?;
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
        let range = crate::codec::KeyRange { start, end };
        let n = prefix.len();
        let iter = self.backend().scan(ColumnFamily::Stream, &range, direction)?;
        Ok(iter.map(move |item| {
            let (k, v) = item?;
            Ok((k.slice(n..), v))
        }))
    }

    /// Up to `count` entries (0: all) with ids in `[start, end]`, in order or reversed.
    fn entries(
        &self,
        key: &[u8],
        version: u128,
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
        for item in self.records(key, version, &start.to_bytes(), Some(&to), direction)? {
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
    fn groups(&self, key: &[u8], version: u128) -> CommandResult<Vec<(Bytes, GroupValue)>> {
        let from = groups_prefix();
        let to = prefix_successor(&from);
        let mut out = Vec::new();
        for item in self.records(key, version, &from, to.as_deref(), Direction::Forward)? {
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

    fn group(&self, key: &[u8], version: u128, group: &[u8]) -> CommandResult<Option<GroupValue>> {
        match self.get_record(key, version, StreamSub::Group(group))? {
            None => Ok(None),
            Some(raw) => Ok(Some(GroupValue::decode(&raw).map_err(undecodable("group"))?)),
        }
    }

    fn consumer(
        &self,
        key: &[u8],
        version: u128,
        group: &[u8],
        name: &[u8],
    ) -> CommandResult<Option<ConsumerValue>> {
        match self.get_record(key, version, StreamSub::Consumer { group, consumer: name })? {
            None => Ok(None),
            Some(raw) => Ok(Some(ConsumerValue::decode(&raw).map_err(undecodable("consumer"))?)),
        }
    }

    /// A group's consumers, by name.
    fn consumers(
        &self,
        key: &[u8],
        version: u128,
        group: &[u8],
    ) -> CommandResult<Vec<(Bytes, ConsumerValue)>> {
        let from = group_records_prefix(false, group);
        let to = prefix_successor(&from);
        let mut out = Vec::new();
        for item in self.records(key, version, &from, to.as_deref(), Direction::Forward)? {
            let (sub, value) = item?;
            if let Ok(StreamSub::Consumer { consumer, .. }) = StreamSub::decode(&sub) {
                let c = ConsumerValue::decode(&value).map_err(undecodable("consumer"))?;
                out.push((Bytes::copy_from_slice(consumer), c));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// A group's pending entries from `start` on, in id order: `(id, delivery time, count,
    /// consumer)`.
    fn pending<'s>(
        &'s self,
        key: &[u8],
        version: u128,
        group: &[u8],
        start: StreamId,
    ) -> CommandResult<impl Iterator<Item = CommandResult<(StreamId, u64, u64, Bytes)>> + use<'s, 'd, B>>
    {
        let prefix = group_records_prefix(true, group);
        let to = prefix_successor(&prefix);
        let mut from = prefix;
        from.extend_from_slice(&start.to_bytes());
        let iter = self.records(key, version, &from, to.as_deref(), Direction::Forward)?;
        Ok(iter.filter_map(|item| {
            let (sub, value) = match item {
                Ok(found) => found,
                Err(e) => return Some(Err(e)),
            };
            let Ok(StreamSub::Pending { id, .. }) = StreamSub::decode(&sub) else { return None };
            Some(
                PendingValue::decode(&value)
                    .map(|p| (id, p.delivered_ms, p.deliveries, Bytes::copy_from_slice(p.consumer)))
                    .map_err(undecodable("pending entry")),
            )
        }))
    }

    /// The stream at `key` (its metadata `meta`) as DUMP carries it.
    ///
    /// # Errors
    /// Storage errors, and an undecodable record.
    pub(super) fn stream_rdb(&self, key: &[u8], meta: &Metadata<'_>) -> CommandResult<RdbStream> {
        let s = Stream::new(meta.without_value());
        let mut entries = Vec::with_capacity(usize::try_from(s.len()).unwrap_or(0).min(1 << 20));
        for (id, value) in self.entries(key, s.version(), StreamId::MIN, StreamId::MAX, false, 0)? {
            entries.push((id, entry_fields(id, &value)?));
        }
        let mut groups = Vec::new();
        for (name, g) in self.groups(key, s.version())? {
            let pending =
                self.pending(key, s.version(), &name, StreamId::MIN)?.collect::<CommandResult<_>>()?;
            let consumers =
                self.consumers(key, s.version(), &name)?.into_iter().map(|(c, v)| (c, v.seen_ms)).collect();
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

    /// Queues `key` as a new stream holding `rdb` (RESTORE): its metadata and every record,
    /// under a fresh version.
    ///
    /// # Errors
    /// Storage errors (a key too long for the layout).
    pub(super) fn queue_stream(
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
        let v = s.version();
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
        for (id, fields) in &rdb.entries {
            batch.put(
                ColumnFamily::Stream,
                self.record(key, v, StreamSub::Entry(*id))?,
                encode_entry(fields),
            );
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
            batch.put(ColumnFamily::Stream, self.record(key, v, StreamSub::Group(group))?, value.to_bytes());
            for (name, seen) in &g.consumers {
                let held = g.pending.iter().filter(|p| p.3 == name).count() as u64;
                let c = ConsumerValue { pending: held, seen_ms: *seen, active_ms: *seen };
                let record = self.record(key, v, StreamSub::Consumer { group, consumer: name })?;
                batch.put(ColumnFamily::Stream, record, c.to_bytes());
            }
            for (id, delivered_ms, deliveries, owner) in &g.pending {
                let p =
                    PendingValue { delivered_ms: *delivered_ms, deliveries: *deliveries, consumer: owner };
                batch.put(
                    ColumnFamily::Stream,
                    self.record(key, v, StreamSub::Pending { group, id: *id })?,
                    p.to_bytes(),
                );
            }
        }
        self.put_stream(batch, key, &s);
        Ok(())
    }

    /// Queues the stream's metadata (kept when empty: a stream exists with no entries).
    fn put_stream(&self, batch: &mut WriteBatch, key: &[u8], s: &Stream) {
        let meta = Metadata { extra: Extra::Stream(s.f), ..s.meta };
        self.put_metadata(batch, key, &meta);
    }

    /// Removes entries from the front as `trim` asks, queueing the deletes; returns how many.
    /// Exact trimming removes entries one by one; `~` removes whole nodes (entries in groups
    /// of [`Db::stream_node_entries`], numbered by the order they were added) and stops at
    /// the first node it cannot remove whole, or that would take it past the limit.
    /// `added` is the entry XADD adds, not in the store yet and not in `batch` either (it is
    /// the stream's last: XADD writes it only if it survives, that is when the stream is not
    /// left empty).
    fn trim(
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
        let take = usize::try_from(want).unwrap_or(usize::MAX).saturating_add(1);
        let mut found = self.entries(key, s.version(), StreamId::MIN, StreamId::MAX, false, take)?;
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
                batch.delete(ColumnFamily::Stream, self.record(key, s.version(), StreamSub::Entry(*id))?);
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
}

pub(super) fn xadd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let args = parse_add_or_trim(argv, true)?;
    let field_pos = args.id_pos + 1;
    if argv.len() < field_pos + 2 || (argv.len() - field_pos) % 2 == 1 {
        return Err(CommandError::WrongArity("xadd".into()));
    }
    if let Some((id, true)) = args.id
        && id == StreamId::MIN
    {
        return Err(err("ERR The ID specified in XADD must be greater than 0-0"));
    }
    let key = &argv[1];
    let mut s = match db.stream(key)? {
        Some(s) => s,
        None if args.nomkstream => return Ok(Reply::Nil),
        None => Stream::new(db.new_collection(RedisType::Stream)),
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
            let now = db.now_ms();
            if now > last.ms { StreamId { ms: now, seq: 0 } } else { last.next().ok_or_else(too_small)? }
        }
    };
    if id <= last {
        return Err(too_small());
    }
    let mut batch = WriteBatch::new();
    s.meta.size += 1;
    s.f.entries_added += 1;
    if s.len() == 1 {
        s.f.first_entry_id = id;
        s.f.recorded_first_entry_id = id;
    }
    s.f.last_generated_id = id;
    s.f.last_entry_id = id;
    let trimmed = db.trim(&mut batch, key, &mut s, &args.trim, Some(id))?;
    if s.len() > 0 {
        batch.put(
            ColumnFamily::Stream,
            db.record(key, s.version(), StreamSub::Entry(id))?,
            encode_entry(&argv[field_pos..]),
        );
    }
    db.put_stream(&mut batch, key, &s);
    db.commit(batch)?;
    db.notify(NotifyFlags::STREAM, "xadd", key);
    if trimmed > 0 {
        db.notify(NotifyFlags::STREAM, "xtrim", key);
    }
    Ok(id_reply(id))
}

pub(super) fn xtrim<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let args = parse_add_or_trim(argv, false)?;
    let key = &argv[1];
    let Some(mut s) = db.stream(key)? else { return Ok(Reply::Integer(0)) };
    let mut batch = WriteBatch::new();
    let trimmed = db.trim(&mut batch, key, &mut s, &args.trim, None)?;
    if trimmed > 0 {
        db.put_stream(&mut batch, key, &s);
        db.commit(batch)?;
        db.notify(NotifyFlags::STREAM, "xtrim", key);
    }
    Ok(Reply::Integer(trimmed as i64))
}

pub(super) fn xlen<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.stream(&argv[1])?.map_or(0, |s| s.len() as i64)))
}

pub(super) fn xrange<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    range(db, argv, false)
}

pub(super) fn xrevrange<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    range(db, argv, true)
}

fn range<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], rev: bool) -> CommandResult {
    let (start, end) = if rev { (&argv[3], &argv[2]) } else { (&argv[2], &argv[3]) };
    let start = parse_bound(start, false)?;
    let end = parse_bound(end, true)?;
    let mut count: i64 = -1;
    let mut i = 4;
    while i < argv.len() {
        if argv[i].eq_ignore_ascii_case(b"count") && i + 1 < argv.len() {
            count = int_arg(&argv[i + 1])?.max(0);
            i += 2;
        } else {
            return Err(CommandError::Syntax);
        }
    }
    let Some(s) = db.stream(&argv[1])? else { return Ok(Reply::Array(Vec::new())) };
    if count == 0 {
        return Ok(Reply::NilArray);
    }
    let count = usize::try_from(count.max(0)).unwrap_or(usize::MAX);
    let found = db.entries(&argv[1], s.version(), start, end, rev, count)?;
    Ok(Reply::Array(found.iter().map(|(id, v)| entry_reply(*id, v)).collect::<CommandResult<_>>()?))
}

pub(super) fn xdel<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let key = &argv[1];
    let Some(mut s) = db.stream(key)? else { return Ok(Reply::Integer(0)) };
    let ids = argv[2..].iter().map(|a| parse_id(a, 0, true, None)).collect::<CommandResult<Vec<_>>>()?;
    let mut batch = WriteBatch::new();
    let mut gone: Vec<StreamId> = Vec::new();
    let mut first_deleted = false;
    for id in ids {
        if gone.contains(&id) {
            continue;
        }
        let record = db.record(key, s.version(), StreamSub::Entry(id))?;
        if db.backend().get(ColumnFamily::Stream, &record)?.is_none() {
            continue;
        }
        batch.delete(ColumnFamily::Stream, record);
        gone.push(id);
        first_deleted |= id == s.f.first_entry_id;
        if id > s.f.max_deleted_entry_id {
            s.f.max_deleted_entry_id = id;
        }
    }
    if gone.is_empty() {
        return Ok(Reply::Integer(0));
    }
    s.meta.size -= gone.len() as u64;
    if s.len() == 0 {
        s.f.first_entry_id = StreamId::MIN;
        s.f.last_entry_id = StreamId::MIN;
    } else {
        if first_deleted {
            let after =
                db.entries(key, s.version(), s.f.first_entry_id, StreamId::MAX, false, gone.len() + 1)?;
            s.f.first_entry_id =
                after.iter().map(|(id, _)| *id).find(|id| !gone.contains(id)).unwrap_or_default();
        }
        if gone.contains(&s.f.last_entry_id) {
            let before =
                db.entries(key, s.version(), StreamId::MIN, s.f.last_entry_id, true, gone.len() + 1)?;
            s.f.last_entry_id =
                before.iter().map(|(id, _)| *id).find(|id| !gone.contains(id)).unwrap_or_default();
        }
    }
    db.put_stream(&mut batch, key, &s);
    db.commit(batch)?;
    db.notify(NotifyFlags::STREAM, "xdel", key);
    Ok(Reply::Integer(gone.len() as i64))
}

pub(super) fn xsetid<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let id = parse_id(&argv[2], 0, true, None)?;
    let (mut entries_added, mut max_deleted) = (None, StreamId::MIN);
    let mut i = 3;
    while i < argv.len() {
        let more = i + 1 < argv.len();
        if argv[i].eq_ignore_ascii_case(b"entriesadded") && more {
            let n = int_arg(&argv[i + 1])?;
            if n < 0 {
                return Err(err("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if argv[i].eq_ignore_ascii_case(b"maxdeletedid") && more {
            max_deleted = parse_id(&argv[i + 1], 0, true, None)?;
            if id < max_deleted {
                return Err(err(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CommandError::Syntax);
        }
        i += 2;
    }
    let key = &argv[1];
    let Some(mut s) = db.stream(key)? else { return Err(CommandError::NoSuchKey) };
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
    let mut batch = WriteBatch::new();
    db.put_stream(&mut batch, key, &s);
    db.commit_unsignalled(batch)?;
    db.notify_unsignalled(NotifyFlags::STREAM, "xsetid", key);
    Ok(Reply::OK)
}

/// One key of an XREAD/XREADGROUP: the id after which to read (`None`: the group's `>`),
/// and the stream and group as the argument checks read them.
struct ReadKey<'a> {
    key: &'a Bytes,
    after: Option<StreamId>,
    stream: Option<Stream>,
    group: Option<GroupValue>,
}

pub(super) fn xread<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let group_cmd = argv[0].len() == 10;
    let (mut timeout, mut count, mut count_given) = (None::<i64>, 0usize, false);
    let (mut group, mut noack, mut streams_at) = (None::<(&Bytes, &Bytes)>, false, 0);
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let o = argv[i].as_ref();
        if o.eq_ignore_ascii_case(b"block") && more > 0 {
            i += 1;
            let ms = super::args::parse_i64(&argv[i])
                .ok_or_else(|| err("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(err("ERR timeout is negative"));
            }
            timeout = Some(ms);
        } else if o.eq_ignore_ascii_case(b"count") && more > 0 {
            i += 1;
            count = usize::try_from(int_arg(&argv[i])?.max(0)).unwrap_or(usize::MAX);
            count_given = true;
        } else if o.eq_ignore_ascii_case(b"streams") && more > 0 {
            streams_at = i + 1;
            if !(argv.len() - streams_at).is_multiple_of(2) {
                return Err(err(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            break;
        } else if o.eq_ignore_ascii_case(b"group") && more >= 2 {
            if !group_cmd {
                return Err(err(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((&argv[i + 1], &argv[i + 2]));
            i += 2;
        } else if o.eq_ignore_ascii_case(b"noack") {
            if !group_cmd {
                return Err(err(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(CommandError::Syntax);
        }
        i += 1;
    }
    if streams_at == 0 {
        return Err(CommandError::Syntax);
    }
    if group_cmd && group.is_none() {
        return Err(err("ERR Missing GROUP option for XREADGROUP"));
    }
    let n = (argv.len() - streams_at) / 2;
    let retrying = db.is_retrying();
    let mut reads: Vec<ReadKey<'_>> = Vec::with_capacity(n);
    let mut rewritten = None::<Vec<Bytes>>;
    for k in 0..n {
        let key = &argv[streams_at + k];
        let arg = argv[streams_at + n + k].as_ref();
        let s = match db.stream(key) {
            Err(CommandError::WrongType) if retrying && group.is_none() => None,
            Err(CommandError::WrongType) if retrying => {
                return Err(err("UNBLOCKED the stream key no longer exists"));
            }
            other => other?,
        };
        let mut found = None;
        if let Some((g, _)) = group {
            found = match &s {
                Some(s) => db.group(key, s.version(), g)?,
                None => None,
            };
            if found.is_none() {
                if retrying && s.is_none() {
                    return Err(err("UNBLOCKED the stream key no longer exists"));
                }
                if retrying {
                    return Err(err(
                        "NOGROUP the consumer group this client was blocked on no longer exists",
                    ));
                }
                return Err(CommandError::Other(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    c_text(key),
                    c_text(g)
                )));
            }
        }
        let after = if arg == b"$" {
            if group_cmd {
                return Err(err(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ));
            }
            let last = s.as_ref().map_or(StreamId::MIN, |s| s.f.last_generated_id);
            rewritten.get_or_insert_with(|| argv.to_vec())[streams_at + n + k] =
                Bytes::from(last.to_string());
            Some(last)
        } else if arg == b">" {
            if !group_cmd {
                return Err(err(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            None
        } else {
            // Redis marks `>` with the largest id: that id given reads as `>` too.
            Some(parse_id(arg, 0, true, None)?).filter(|id| !(group_cmd && *id == StreamId::MAX))
        };
        reads.push(ReadKey { key, after, stream: s, group: found });
    }
    let mut served = Vec::new();
    let mut batch = WriteBatch::new();
    let mut created = Vec::new();
    for read in &reads {
        let Some(s) = &read.stream else { continue };
        let found = match group {
            None => {
                let after = read.after.unwrap_or_default();
                if s.len() == 0 || s.f.last_entry_id <= after {
                    continue;
                }
                let Some(start) = after.next() else { continue };
                let found = db.entries(read.key, s.version(), start, StreamId::MAX, false, count)?;
                found.iter().map(|(id, v)| entry_reply(*id, v)).collect::<CommandResult<Vec<_>>>()?
            }
            Some((g, consumer)) => {
                let mut gv = read.group.unwrap_or_default();
                if read.after.is_none() && (s.len() == 0 || s.f.last_entry_id <= gv.last_delivered) {
                    continue;
                }
                let mut reader = GroupReader::open(db, read.key, s, g, consumer, &mut created)?;
                if reader.created {
                    gv.consumers += 1;
                }
                let replies = match read.after {
                    // The history after the id given.
                    Some(after) => match after.next() {
                        Some(start) => reader.history(db, start, count, &mut batch)?,
                        None => Vec::new(),
                    },
                    None => reader.new_entries(db, s, &mut gv, count, noack, &mut batch)?,
                };
                reader.close(db, &mut batch)?;
                batch.put(
                    ColumnFamily::Stream,
                    db.record(read.key, s.version(), StreamSub::Group(g))?,
                    gv.to_bytes(),
                );
                replies
            }
        };
        served.push((Reply::Bulk(read.key.clone()), Reply::Array(found)));
    }
    if !batch.is_empty() {
        db.commit_unsignalled(batch)?;
    }
    for key in created {
        db.notify_unsignalled(NotifyFlags::STREAM, "xgroup-createconsumer", &key);
    }
    if !served.is_empty() {
        return Ok(Reply::PairMap(served));
    }
    match timeout {
        None => Ok(Reply::NilArray),
        Some(ms) => {
            if !count_given {
                let argv = rewritten.get_or_insert_with(|| argv.to_vec());
                argv.splice(
                    1..1,
                    [Bytes::from_static(b"COUNT"), Bytes::from_static(BLOCKED_COUNT.as_bytes())],
                );
            }
            let keys: Vec<Bytes> = reads.iter().map(|r| r.key.clone()).collect();
            let timeout = (ms > 0).then(|| std::time::Duration::from_millis(ms as u64));
            Ok(db.would_block_as(&keys, timeout, Reply::NilArray, Reply::NilArray, rewritten))
        }
    }
}

/// One consumer reading from its group within one XREADGROUP, XCLAIM or XAUTOCLAIM: the
/// consumer's record (created if missing) and the pending counts to write back.
struct GroupReader<'a> {
    key: &'a Bytes,
    version: u128,
    group: &'a [u8],
    name: &'a [u8],
    me: ConsumerValue,
    /// Whether this reader created the consumer (its group counts one more).
    created: bool,
    /// Other consumers whose pending counts changed.
    others: HashMap<Bytes, ConsumerValue>,
    now: u64,
}

impl<'a> GroupReader<'a> {
    /// Looks the consumer up (refreshing its seen time) or creates it (its record is
    /// written by [`GroupReader::close`]; `key` goes in `created` for its event, and the
    /// caller counts it in its group).
    fn open<B: KvBackend>(
        db: &Db<'_, B>,
        key: &'a Bytes,
        s: &Stream,
        group: &'a [u8],
        name: &'a [u8],
        created: &mut Vec<Bytes>,
    ) -> CommandResult<Self> {
        let now = db.now_ms();
        let found = db.consumer(key, s.version(), group, name)?;
        if found.is_none() {
            created.push(key.clone());
        }
        let me = ConsumerValue { seen_ms: now, ..found.unwrap_or_default() };
        Ok(GroupReader {
            key,
            version: s.version(),
            group,
            name,
            me,
            created: found.is_none(),
            others: HashMap::new(),
            now,
        })
    }

    fn pending_key<B: KvBackend>(&self, db: &Db<'_, B>, id: StreamId) -> CommandResult<Vec<u8>> {
        db.record(self.key, self.version, StreamSub::Pending { group: self.group, id })
    }

    /// Moves pending entry `id` to this consumer with a new delivery time and count;
    /// `owner` is its current holder (`None`: a new pending entry).
    fn take<B: KvBackend>(
        &mut self,
        db: &Db<'_, B>,
        id: StreamId,
        owner: Option<&[u8]>,
        delivered_ms: u64,
        deliveries: u64,
        batch: &mut WriteBatch,
    ) -> CommandResult<()> {
        match owner {
            Some(o) if o == self.name => {}
            Some(o) => {
                let other = self.other(db, o)?;
                other.pending = other.pending.saturating_sub(1);
                self.me.pending += 1;
            }
            None => self.me.pending += 1,
        }
        let value = PendingValue { delivered_ms, deliveries, consumer: self.name };
        batch.put(ColumnFamily::Stream, self.pending_key(db, id)?, value.to_bytes());
        Ok(())
    }

    fn other<B: KvBackend>(&mut self, db: &Db<'_, B>, name: &[u8]) -> CommandResult<&mut ConsumerValue> {
        if !self.others.contains_key(name) {
            let found = db.consumer(self.key, self.version, self.group, name)?.unwrap_or_default();
            self.others.insert(Bytes::copy_from_slice(name), found);
        }
        Ok(self.others.get_mut(name).expect("just inserted"))
    }

    /// XREADGROUP `>`: entries after the group's last delivered id, made pending for this
    /// consumer unless `noack`.
    fn new_entries<B: KvBackend>(
        &mut self,
        db: &Db<'_, B>,
        s: &Stream,
        g: &mut GroupValue,
        count: usize,
        noack: bool,
        batch: &mut WriteBatch,
    ) -> CommandResult<Vec<Reply>> {
        let Some(start) = g.last_delivered.next() else { return Ok(Vec::new()) };
        let found = db.entries(self.key, self.version, start, StreamId::MAX, false, count)?;
        let mut out = Vec::with_capacity(found.len());
        for (id, value) in &found {
            s.deliver(g, *id);
            out.push(entry_reply(*id, value)?);
            if noack {
                continue;
            }
            let owner = match db.get_record(
                self.key,
                self.version,
                StreamSub::Pending { group: self.group, id: *id },
            )? {
                Some(raw) => Some(decode_pending(&raw)?.2),
                None => {
                    g.pending += 1;
                    None
                }
            };
            self.take(db, *id, owner.as_deref(), self.now, 1, batch)?;
        }
        if !found.is_empty() {
            self.me.active_ms = self.now;
        }
        Ok(out)
    }

    /// XREADGROUP with an id: this consumer's pending entries from `start`, each delivered
    /// again (`[id, nil]` for an entry deleted since).
    fn history<B: KvBackend>(
        &mut self,
        db: &Db<'_, B>,
        start: StreamId,
        count: usize,
        batch: &mut WriteBatch,
    ) -> CommandResult<Vec<Reply>> {
        let mine: Vec<(StreamId, u64)> = db
            .pending(self.key, self.version, self.group, start)?
            .filter(|p| p.as_ref().is_err() || p.as_ref().is_ok_and(|p| p.3 == self.name))
            .take(if count == 0 { usize::MAX } else { count })
            .map(|p| p.map(|p| (p.0, p.2)))
            .collect::<CommandResult<_>>()?;
        let mut out = Vec::with_capacity(mine.len());
        for (id, deliveries) in mine {
            match db.get_record(self.key, self.version, StreamSub::Entry(id))? {
                None => out.push(Reply::Array(vec![id_reply(id), Reply::NilArray])),
                Some(value) => {
                    out.push(entry_reply(id, &value)?);
                    let value = PendingValue {
                        delivered_ms: self.now,
                        deliveries: deliveries + 1,
                        consumer: self.name,
                    };
                    batch.put(ColumnFamily::Stream, self.pending_key(db, id)?, value.to_bytes());
                }
            }
        }
        Ok(out)
    }

    /// Queues this consumer's record and every other consumer whose count changed.
    fn close<B: KvBackend>(self, db: &Db<'_, B>, batch: &mut WriteBatch) -> CommandResult<()> {
        let record = |name: &[u8]| {
            db.record(self.key, self.version, StreamSub::Consumer { group: self.group, consumer: name })
        };
        batch.put(ColumnFamily::Stream, record(self.name)?, self.me.to_bytes());
        for (name, c) in &self.others {
            batch.put(ColumnFamily::Stream, record(name)?, c.to_bytes());
        }
        Ok(())
    }
}

/// A pending record's delivery time, count and holder.
fn decode_pending(raw: &[u8]) -> CommandResult<(u64, u64, Bytes)> {
    let p = PendingValue::decode(raw).map_err(undecodable("pending entry"))?;
    Ok((p.delivered_ms, p.deliveries, Bytes::copy_from_slice(p.consumer)))
}

fn nogroup(key: &[u8], group: &[u8]) -> CommandError {
    CommandError::Other(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        c_text(key),
        c_text(group)
    ))
}

pub(super) fn xgroup<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let sub = argv[1].to_ascii_lowercase();
    if sub == b"help" {
        return Ok(help(&[
            "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
            "HELP",
            "    Prints this help.",
        ]));
    }
    let (key, group) = (&argv[2], argv[3].as_ref());
    let (create, setid) = (sub == b"create", sub == b"setid");
    let (mut mkstream, mut entries_read) = (false, -1i64);
    let mut i = 5;
    while i < argv.len() {
        if create && argv[i].eq_ignore_ascii_case(b"mkstream") {
            mkstream = true;
            i += 1;
        } else if (create || setid) && argv[i].eq_ignore_ascii_case(b"entriesread") && i + 1 < argv.len() {
            entries_read = int_arg(&argv[i + 1])?;
            if entries_read < -1 {
                return Err(err("ERR value for ENTRIESREAD must be positive or -1"));
            }
            i += 2;
        } else {
            return Err(subcommand_error(argv));
        }
    }
    let s = db.stream(key)?;
    let existing = match &s {
        Some(s) => db.group(key, s.version(), group)?,
        None => None,
    };
    if !mkstream {
        if s.is_none() {
            return Err(err(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ));
        }
        if existing.is_none() && matches!(sub.as_slice(), b"setid" | b"createconsumer" | b"delconsumer") {
            return Err(CommandError::Other(format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                c_text(group),
                c_text(key)
            )));
        }
    }
    let existed = s.is_some();
    let mut batch = WriteBatch::new();
    let group_key = |db: &Db<B>, v: u128| db.record(key, v, StreamSub::Group(group));
    let (reply, event) = match sub.as_slice() {
        b"create" if argv.len() <= 8 => {
            let id = if argv[4].as_ref() == b"$" {
                s.as_ref().map_or(StreamId::MIN, |s| s.f.last_generated_id)
            } else {
                parse_id(&argv[4], 0, true, None)?
            };
            if existing.is_some() {
                return Err(err("BUSYGROUP Consumer Group name already exists"));
            }
            let mut s = s.unwrap_or_else(|| Stream::new(db.new_collection(RedisType::Stream)));
            let g = GroupValue { last_delivered: id, entries_read, ..GroupValue::default() };
            batch.put(ColumnFamily::Stream, group_key(db, s.version())?, g.to_bytes());
            s.f.group_number = Some(s.f.group_number.unwrap_or(0) + 1);
            db.put_stream(&mut batch, key, &s);
            (Reply::OK, "xgroup-create")
        }
        b"setid" if argv.len() == 5 || argv.len() == 7 => {
            let s = s.expect("checked above");
            let id = if argv[4].as_ref() == b"$" {
                s.f.last_generated_id
            } else {
                parse_id(&argv[4], 0, false, None)?
            };
            let g = GroupValue { last_delivered: id, entries_read, ..existing.expect("checked above") };
            batch.put(ColumnFamily::Stream, group_key(db, s.version())?, g.to_bytes());
            (Reply::OK, "xgroup-setid")
        }
        b"destroy" if argv.len() == 4 => {
            let Some(mut s) = s else { return Err(subcommand_error(argv)) };
            if existing.is_none() {
                return Ok(Reply::Integer(0));
            }
            batch.delete(ColumnFamily::Stream, group_key(db, s.version())?);
            for pending in [false, true] {
                let from = group_records_prefix(pending, group);
                let to = prefix_successor(&from);
                for item in db.records(key, s.version(), &from, to.as_deref(), Direction::Forward)? {
                    let (sub, _) = item?;
                    batch.delete(ColumnFamily::Stream, db.subkey(key, s.version(), &sub)?);
                }
            }
            s.f.group_number = Some(s.f.group_number.unwrap_or(1).saturating_sub(1));
            db.put_stream(&mut batch, key, &s);
            (Reply::Integer(1), "xgroup-destroy")
        }
        b"createconsumer" if argv.len() == 5 => {
            let s = s.expect("checked above");
            if db.consumer(key, s.version(), group, &argv[4])?.is_some() {
                return Ok(Reply::Integer(0));
            }
            let mut g = existing.expect("checked above");
            g.consumers += 1;
            batch.put(ColumnFamily::Stream, group_key(db, s.version())?, g.to_bytes());
            let c = ConsumerValue { seen_ms: db.now_ms(), ..ConsumerValue::default() };
            let record = db.record(key, s.version(), StreamSub::Consumer { group, consumer: &argv[4] })?;
            batch.put(ColumnFamily::Stream, record, c.to_bytes());
            (Reply::Integer(1), "xgroup-createconsumer")
        }
        b"delconsumer" if argv.len() == 5 => {
            let s = s.expect("checked above");
            let name = argv[4].as_ref();
            if db.consumer(key, s.version(), group, name)?.is_none() {
                return Ok(Reply::Integer(0));
            }
            let mut removed = 0;
            for p in db.pending(key, s.version(), group, StreamId::MIN)? {
                let (id, _, _, owner) = p?;
                if owner == name {
                    batch.delete(
                        ColumnFamily::Stream,
                        db.record(key, s.version(), StreamSub::Pending { group, id })?,
                    );
                    removed += 1;
                }
            }
            let mut g = existing.expect("checked above");
            g.consumers = g.consumers.saturating_sub(1);
            g.pending = g.pending.saturating_sub(removed);
            batch.put(ColumnFamily::Stream, group_key(db, s.version())?, g.to_bytes());
            batch.delete(
                ColumnFamily::Stream,
                db.record(key, s.version(), StreamSub::Consumer { group, consumer: name })?,
            );
            (Reply::Integer(removed as i64), "xgroup-delconsumer")
        }
        _ => return Err(subcommand_error(argv)),
    };
    // As Redis: a group's change signals no key; MKSTREAM's new stream does, and DESTROY
    // wakes the group's blocked readers (they then fail).
    match event {
        "xgroup-create" if !existed => {
            db.commit(batch)?;
            db.notify(NotifyFlags::STREAM, event, key);
        }
        "xgroup-destroy" => {
            db.commit_ready(batch)?;
            db.notify_unsignalled(NotifyFlags::STREAM, event, key);
        }
        _ => {
            db.commit_unsignalled(batch)?;
            db.notify_unsignalled(NotifyFlags::STREAM, event, key);
        }
    }
    Ok(reply)
}

fn help(lines: &[&str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::Status(l.to_string().into())).collect())
}

pub(super) fn xack<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let (key, group) = (&argv[1], argv[2].as_ref());
    let Some(s) = db.stream(key)? else { return Ok(Reply::Integer(0)) };
    let Some(mut g) = db.group(key, s.version(), group)? else { return Ok(Reply::Integer(0)) };
    let ids = argv[3..].iter().map(|a| parse_id(a, 0, true, None)).collect::<CommandResult<Vec<_>>>()?;
    let mut batch = WriteBatch::new();
    let mut acked: Vec<StreamId> = Vec::new();
    let mut owners: HashMap<Bytes, u64> = HashMap::new();
    for id in ids {
        if acked.contains(&id) {
            continue;
        }
        let record = db.record(key, s.version(), StreamSub::Pending { group, id })?;
        let Some(raw) = db.backend().get(ColumnFamily::Stream, &record)? else { continue };
        *owners.entry(decode_pending(&raw)?.2).or_default() += 1;
        batch.delete(ColumnFamily::Stream, record);
        acked.push(id);
    }
    if acked.is_empty() {
        return Ok(Reply::Integer(0));
    }
    g.pending = g.pending.saturating_sub(acked.len() as u64);
    batch.put(ColumnFamily::Stream, db.record(key, s.version(), StreamSub::Group(group))?, g.to_bytes());
    for (name, n) in owners {
        if let Some(mut c) = db.consumer(key, s.version(), group, &name)? {
            c.pending = c.pending.saturating_sub(n);
            let record = db.record(key, s.version(), StreamSub::Consumer { group, consumer: &name })?;
            batch.put(ColumnFamily::Stream, record, c.to_bytes());
        }
    }
    db.commit_unsignalled(batch)?;
    Ok(Reply::Integer(acked.len() as i64))
}

pub(super) fn xpending<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let (key, group) = (&argv[1], argv[2].as_ref());
    let summary = argv.len() == 3;
    if !summary && !(6..=9).contains(&argv.len()) {
        return Err(CommandError::Syntax);
    }
    let (mut start, mut end, mut count, mut min_idle, mut consumer) =
        (StreamId::MIN, StreamId::MAX, 0usize, 0i64, None);
    if !summary {
        let mut at = 3;
        if argv[3].eq_ignore_ascii_case(b"idle") {
            min_idle = int_arg(&argv[4])?;
            if argv.len() < 8 {
                return Err(CommandError::Syntax);
            }
            at += 2;
        }
        count = usize::try_from(int_arg(&argv[at + 2])?.max(0)).unwrap_or(usize::MAX);
        start = parse_bound(&argv[at], false)?;
        end = parse_bound(&argv[at + 1], true)?;
        consumer = argv.get(at + 3).map(|c| c.as_ref());
    }
    let Some(s) = db.stream(key)? else { return Err(nogroup(key, group)) };
    if db.group(key, s.version(), group)?.is_none() {
        return Err(nogroup(key, group));
    }
    if summary {
        let all: Vec<(StreamId, u64, u64, Bytes)> =
            db.pending(key, s.version(), group, StreamId::MIN)?.collect::<CommandResult<_>>()?;
        let (Some(first), Some(last)) = (all.first(), all.last()) else {
            return Ok(Reply::Array(vec![Reply::Integer(0), Reply::Nil, Reply::Nil, Reply::NilArray]));
        };
        let mut per: Vec<(Bytes, i64)> = Vec::new();
        for (_, _, _, owner) in &all {
            match per.iter_mut().find(|(o, _)| o == owner) {
                Some((_, n)) => *n += 1,
                None => per.push((owner.clone(), 1)),
            }
        }
        per.sort();
        let per = per
            .into_iter()
            .map(|(o, n)| Reply::Array(vec![Reply::Bulk(o), Reply::Bulk(Bytes::from(n.to_string()))]))
            .collect();
        return Ok(Reply::Array(vec![
            Reply::Integer(all.len() as i64),
            id_reply(first.0),
            id_reply(last.0),
            Reply::Array(per),
        ]));
    }
    if let Some(c) = consumer
        && db.consumer(key, s.version(), group, c)?.is_none()
    {
        return Ok(Reply::Array(Vec::new()));
    }
    let now = db.now_ms() as i64;
    let mut out = Vec::new();
    if count > 0 {
        for p in db.pending(key, s.version(), group, start)? {
            let (id, delivered, deliveries, owner) = p?;
            if id > end {
                break;
            }
            if consumer.is_some_and(|c| c != owner.as_ref()) {
                continue;
            }
            let idle = now - delivered as i64;
            if min_idle != 0 && idle < min_idle {
                continue;
            }
            out.push(Reply::Array(vec![
                id_reply(id),
                Reply::Bulk(owner),
                Reply::Integer(idle.max(0)),
                Reply::Integer(deliveries as i64),
            ]));
            if out.len() == count {
                break;
            }
        }
    }
    Ok(Reply::Array(out))
}

pub(super) fn xclaim<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let (key, group, name) = (&argv[1], argv[2].as_ref(), argv[3].as_ref());
    let Some(s) = db.stream(key)? else { return Err(nogroup(key, group)) };
    let Some(mut g) = db.group(key, s.version(), group)? else { return Err(nogroup(key, group)) };
    let min_idle = super::args::parse_i64(&argv[4])
        .ok_or_else(|| err("ERR Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < argv.len() {
        match parse_id(&argv[j], 0, true, None) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = db.now_ms() as i64;
    let (mut force, mut justid, mut retry, mut time, mut last_id) =
        (false, false, None, None::<i64>, StreamId::MIN);
    while j < argv.len() {
        let more = j + 1 < argv.len();
        let opt = argv[j].as_ref();
        let number = |what: &str| {
            super::args::parse_i64(&argv[j + 1])
                .ok_or_else(|| CommandError::Other(format!("ERR Invalid {what} option argument for XCLAIM")))
        };
        if opt.eq_ignore_ascii_case(b"force") {
            force = true;
        } else if opt.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else if opt.eq_ignore_ascii_case(b"idle") && more {
            time = Some(now - number("IDLE")?);
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"time") && more {
            time = Some(number("TIME")?);
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"retrycount") && more {
            retry = Some(number("RETRYCOUNT")?);
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"lastid") && more {
            last_id = parse_id(&argv[j + 1], 0, true, None)?;
            j += 1;
        } else {
            return Err(CommandError::Other(format!("ERR Unrecognized XCLAIM option '{}'", c_text(opt))));
        }
        j += 1;
    }
    let mut batch = WriteBatch::new();
    let mut group_changed = false;
    if last_id > g.last_delivered {
        g.last_delivered = last_id;
        group_changed = true;
    }
    let delivery = match time {
        Some(t) if t >= 0 && t <= now => t as u64,
        _ => now as u64,
    };
    let mut created = Vec::new();
    let mut reader: Option<GroupReader<'_>> = None;
    let mut out = Vec::new();
    for id in ids {
        let pending_key = db.record(key, s.version(), StreamSub::Pending { group, id })?;
        let pending = db
            .backend()
            .get(ColumnFamily::Stream, &pending_key)?
            .map(|raw| decode_pending(&raw))
            .transpose()?;
        let Some(entry) = db.get_record(key, s.version(), StreamSub::Entry(id))? else {
            if let Some((_, _, owner)) = pending {
                batch.delete(ColumnFamily::Stream, pending_key);
                g.pending = g.pending.saturating_sub(1);
                group_changed = true;
                release(db, &mut reader, key, &s, group, name, &owner, &mut batch)?;
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
            None if force => {
                g.pending += 1;
                group_changed = true;
                (None, 0)
            }
            None => continue,
        };
        if reader.is_none() {
            let r = GroupReader::open(db, key, &s, group, name, &mut created)?;
            if r.created {
                g.consumers += 1;
                group_changed = true;
            }
            reader = Some(r);
        }
        let r = reader.as_mut().expect("just opened");
        let deliveries = match retry {
            Some(n) if n >= 0 => n as u64,
            _ if justid => deliveries,
            _ => deliveries + 1,
        };
        r.take(db, id, owner.as_deref(), delivery, deliveries, &mut batch)?;
        r.me.active_ms = now as u64;
        out.push(if justid { id_reply(id) } else { entry_reply(id, &entry)? });
    }
    if let Some(r) = reader {
        r.close(db, &mut batch)?;
    }
    if group_changed {
        batch.put(ColumnFamily::Stream, db.record(key, s.version(), StreamSub::Group(group))?, g.to_bytes());
    }
    db.commit_unsignalled(batch)?;
    for key in created {
        db.notify_unsignalled(NotifyFlags::STREAM, "xgroup-createconsumer", &key);
    }
    Ok(Reply::Array(out))
}

/// A pending entry of a deleted stream entry is dropped: its holder's count goes down.
#[allow(clippy::too_many_arguments)]
fn release<'a, B: KvBackend>(
    db: &Db<'_, B>,
    reader: &mut Option<GroupReader<'a>>,
    key: &'a Bytes,
    s: &Stream,
    group: &'a [u8],
    name: &'a [u8],
    owner: &[u8],
    batch: &mut WriteBatch,
) -> CommandResult<()> {
    if owner == name
        && let Some(r) = reader
    {
        r.me.pending = r.me.pending.saturating_sub(1);
        return Ok(());
    }
    match reader {
        Some(r) => {
            let c = r.other(db, owner)?;
            c.pending = c.pending.saturating_sub(1);
        }
        None => {
            if let Some(mut c) = db.consumer(key, s.version(), group, owner)? {
                c.pending = c.pending.saturating_sub(1);
                let record = db.record(key, s.version(), StreamSub::Consumer { group, consumer: owner })?;
                batch.put(ColumnFamily::Stream, record, c.to_bytes());
            }
        }
    }
    Ok(())
}

pub(super) fn xautoclaim<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let (key, group, name) = (&argv[1], argv[2].as_ref(), argv[3].as_ref());
    let min_idle = super::args::parse_i64(&argv[4])
        .ok_or_else(|| err("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let start = parse_bound(&argv[5], false)?;
    let (mut count, mut justid) = (100i64, false);
    let mut j = 6;
    while j < argv.len() {
        if argv[j].eq_ignore_ascii_case(b"count") && j + 1 < argv.len() {
            let max = i64::MAX / 16;
            count = super::args::parse_i64(&argv[j + 1])
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| err("ERR COUNT must be > 0"))?;
            j += 1;
        } else if argv[j].eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else {
            return Err(CommandError::Syntax);
        }
        j += 1;
    }
    let Some(s) = db.stream(key)? else { return Err(nogroup(key, group)) };
    let Some(mut g) = db.group(key, s.version(), group)? else { return Err(nogroup(key, group)) };
    let now = db.now_ms() as i64;
    let mut attempts = count.saturating_mul(10);
    let pel: Vec<(StreamId, u64, u64, Bytes)> =
        db.pending(key, s.version(), group, start)?.collect::<CommandResult<_>>()?;
    let mut batch = WriteBatch::new();
    let mut created = Vec::new();
    let mut reader: Option<GroupReader<'_>> = None;
    let (mut out, mut deleted) = (Vec::new(), Vec::new());
    let mut next = StreamId::MIN;
    let mut index = 0;
    while attempts > 0 && count > 0 && index < pel.len() {
        attempts -= 1;
        let (id, delivered, deliveries, owner) = &pel[index];
        index += 1;
        let Some(entry) = db.get_record(key, s.version(), StreamSub::Entry(*id))? else {
            batch.delete(
                ColumnFamily::Stream,
                db.record(key, s.version(), StreamSub::Pending { group, id: *id })?,
            );
            g.pending = g.pending.saturating_sub(1);
            release(db, &mut reader, key, &s, group, name, owner, &mut batch)?;
            deleted.push(id_reply(*id));
            count -= 1;
            continue;
        };
        if min_idle > 0 && now - (*delivered as i64) < min_idle {
            continue;
        }
        if reader.is_none() {
            let r = GroupReader::open(db, key, &s, group, name, &mut created)?;
            if r.created {
                g.consumers += 1;
            }
            reader = Some(r);
        }
        let r = reader.as_mut().expect("just opened");
        let deliveries = if justid { *deliveries } else { deliveries + 1 };
        r.take(db, *id, Some(owner), now as u64, deliveries, &mut batch)?;
        r.me.active_ms = now as u64;
        out.push(if justid { id_reply(*id) } else { entry_reply(*id, &entry)? });
        count -= 1;
    }
    if let Some((id, ..)) = pel.get(index) {
        next = *id;
    }
    if let Some(r) = reader {
        r.close(db, &mut batch)?;
    }
    batch.put(ColumnFamily::Stream, db.record(key, s.version(), StreamSub::Group(group))?, g.to_bytes());
    db.commit_unsignalled(batch)?;
    for key in created {
        db.notify_unsignalled(NotifyFlags::STREAM, "xgroup-createconsumer", &key);
    }
    Ok(Reply::Array(vec![id_reply(next), Reply::Array(out), Reply::Array(deleted)]))
}

pub(super) fn xinfo<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let sub = argv[1].to_ascii_lowercase();
    if sub == b"help" {
        if argv.len() != 2 {
            return Err(subcommand_error(argv));
        }
        return Ok(help(&[
            "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
            "HELP",
            "    Prints this help.",
        ]));
    }
    if argv.len() < 3 {
        return Err(subcommand_error(argv));
    }
    let key = &argv[2];
    let Some(s) = db.stream(key)? else { return Err(CommandError::NoSuchKey) };
    let bulk = |t: &'static str| Reply::Bulk(Bytes::from_static(t.as_bytes()));
    let now = db.now_ms() as i64;
    match sub.as_slice() {
        b"consumers" if argv.len() == 4 => {
            let group = argv[3].as_ref();
            if db.group(key, s.version(), group)?.is_none() {
                return Err(CommandError::Other(format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    c_text(group),
                    c_text(key)
                )));
            }
            let consumers = db.consumers(key, s.version(), group)?;
            Ok(Reply::Array(
                consumers
                    .into_iter()
                    .map(|(name, c)| {
                        Reply::Map(vec![
                            (bulk("name"), Reply::Bulk(name)),
                            (bulk("pending"), Reply::Integer(c.pending as i64)),
                            (bulk("idle"), Reply::Integer((now - c.seen_ms as i64).max(0))),
                        ])
                    })
                    .collect(),
            ))
        }
        b"groups" if argv.len() == 3 => {
            let groups = db.groups(key, s.version())?;
            Ok(Reply::Array(
                groups
                    .into_iter()
                    .map(|(name, g)| {
                        Reply::Map(vec![
                            (bulk("name"), Reply::Bulk(name)),
                            (bulk("consumers"), Reply::Integer(g.consumers as i64)),
                            (bulk("pending"), Reply::Integer(g.pending as i64)),
                            (bulk("last-delivered-id"), id_reply(g.last_delivered)),
                            (bulk("entries-read"), read_counter(&g)),
                            (bulk("lag"), s.lag(&g)),
                        ])
                    })
                    .collect(),
            ))
        }
        b"stream" => stream_info(db, argv, &s),
        _ => Err(subcommand_error(argv)),
    }
}

fn read_counter(g: &GroupValue) -> Reply {
    if g.entries_read == -1 { Reply::Nil } else { Reply::Integer(g.entries_read) }
}

fn stream_info<B: KvBackend>(db: &Db<B>, argv: &[Bytes], s: &Stream) -> CommandResult {
    let key = &argv[2];
    let opts = &argv[3..];
    let mut count: i64 = 10;
    let full = !opts.is_empty();
    if full {
        if (opts.len() != 1 && opts.len() != 3) || !opts[0].eq_ignore_ascii_case(b"full") {
            return Err(subcommand_error(argv));
        }
        if opts.len() == 3 {
            if !opts[1].eq_ignore_ascii_case(b"count") {
                return Err(subcommand_error(argv));
            }
            count = int_arg(&opts[2])?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let bulk = |t: &'static str| Reply::Bulk(Bytes::from_static(t.as_bytes()));
    // Redis' radix tree has one key per node of entries: the nodes `~` trimming counts
    // (see the module docs); its inner nodes have no counterpart, and are given as one more.
    let node = db.stream_node_entries().max(1);
    let keys = match s.len() {
        0 => 0,
        len => {
            let last = s.f.entries_added.saturating_sub(1);
            last / node - s.f.entries_added.saturating_sub(len) / node + 1
        }
    };
    let mut map = vec![
        (bulk("length"), Reply::Integer(s.len() as i64)),
        (bulk("radix-tree-keys"), Reply::Integer(keys as i64)),
        (bulk("radix-tree-nodes"), Reply::Integer(keys as i64 + 1)),
        (bulk("last-generated-id"), id_reply(s.f.last_generated_id)),
        (bulk("max-deleted-entry-id"), id_reply(s.f.max_deleted_entry_id)),
        (bulk("entries-added"), Reply::Integer(s.f.entries_added as i64)),
        (bulk("recorded-first-entry-id"), id_reply(s.f.first_entry_id)),
    ];
    let edge = |rev: bool| -> CommandResult<Reply> {
        let found = db.entries(key, s.version(), StreamId::MIN, StreamId::MAX, rev, 1)?;
        found.first().map_or(Ok(Reply::Nil), |(id, v)| entry_reply(*id, v))
    };
    let groups = db.groups(key, s.version())?;
    if !full {
        map.push((bulk("groups"), Reply::Integer(groups.len() as i64)));
        map.push((bulk("first-entry"), edge(false)?));
        map.push((bulk("last-entry"), edge(true)?));
        return Ok(Reply::Map(map));
    }
    let limit = usize::try_from(count).unwrap_or(usize::MAX);
    let entries = db.entries(key, s.version(), StreamId::MIN, StreamId::MAX, false, limit)?;
    let entries = entries.iter().map(|(id, v)| entry_reply(*id, v)).collect::<CommandResult<Vec<_>>>()?;
    map.push((bulk("entries"), Reply::Array(entries)));
    let take = if limit == 0 { usize::MAX } else { limit };
    let mut group_replies = Vec::new();
    for (name, g) in groups {
        let pel: Vec<(StreamId, u64, u64, Bytes)> =
            db.pending(key, s.version(), &name, StreamId::MIN)?.collect::<CommandResult<_>>()?;
        let pending = pel
            .iter()
            .take(take)
            .map(|(id, t, n, owner)| {
                Reply::Array(vec![
                    id_reply(*id),
                    Reply::Bulk(owner.clone()),
                    Reply::Integer(*t as i64),
                    Reply::Integer(*n as i64),
                ])
            })
            .collect();
        let mut consumers = Vec::new();
        for (cname, c) in db.consumers(key, s.version(), &name)? {
            let mine: Vec<Reply> = pel
                .iter()
                .filter(|p| p.3 == cname)
                .take(take)
                .map(|(id, t, n, _)| {
                    Reply::Array(vec![id_reply(*id), Reply::Integer(*t as i64), Reply::Integer(*n as i64)])
                })
                .collect();
            consumers.push(Reply::Map(vec![
                (bulk("name"), Reply::Bulk(cname)),
                (bulk("seen-time"), Reply::Integer(c.seen_ms as i64)),
                (bulk("pel-count"), Reply::Integer(c.pending as i64)),
                (bulk("pending"), Reply::Array(mine)),
            ]));
        }
        group_replies.push(Reply::Map(vec![
            (bulk("name"), Reply::Bulk(name)),
            (bulk("last-delivered-id"), id_reply(g.last_delivered)),
            (bulk("entries-read"), read_counter(&g)),
            (bulk("lag"), s.lag(&g)),
            (bulk("pel-count"), Reply::Integer(g.pending as i64)),
            (bulk("pending"), Reply::Array(pending)),
            (bulk("consumers"), Reply::Array(consumers)),
        ]));
    }
    map.push((bulk("groups"), Reply::Array(group_replies)));
    Ok(Reply::Map(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis_does() {
        assert_eq!(parse_id(b"5", 7, false, None).unwrap(), StreamId { ms: 5, seq: 7 });
        assert_eq!(parse_id(b"5-3", 7, false, None).unwrap(), StreamId { ms: 5, seq: 3 });
        assert_eq!(parse_id(b"-", 0, false, None).unwrap(), StreamId::MIN);
        assert_eq!(parse_id(b"+", 0, false, None).unwrap(), StreamId::MAX);
        assert!(parse_id(b"+", 0, true, None).is_err());
        assert!(parse_id(b"1-*", 0, true, None).is_err());
        let mut given = true;
        assert_eq!(parse_id(b"1-*", 0, true, Some(&mut given)).unwrap(), StreamId { ms: 1, seq: 0 });
        assert!(!given);
        assert!(parse_id(b"x", 0, false, None).is_err());
        assert!(parse_id(b"1-2-3", 0, false, None).is_err());
        assert!(parse_id(b"18446744073709551616", 0, false, None).is_err());
        assert_eq!(parse_bound(b"(1-0", true).unwrap(), StreamId { ms: 0, seq: u64::MAX });
        assert!(parse_bound(b"(0-0", true).is_err());
        assert!(parse_bound(b"(18446744073709551615-18446744073709551615", false).is_err());
    }
}
