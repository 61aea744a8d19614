//! Redis' DUMP serialization: one RDB object, the RDB version and a CRC-64.
//!
//! ```text
//! payload = [type u8][object][rdb version u16 LE][crc64 u64 LE]   crc over everything before it
//! length  = 00xxxxxx | 01xxxxxx xxxxxxxx | 0x80 u32 BE | 0x81 u64 BE
//! string  = length bytes | 0xC0 i8 | 0xC1 i16 LE | 0xC2 i32 LE | 0xC3 lzf_len len lzf_bytes
//! ```
//!
//! | type | id | object | written by [`dump`] |
//! |---|---|---|---|
//! | string | 0 | string | yes (integers in the shortest int form) |
//! | list | 1 | length, strings | no (read only) |
//! | set | 2 | length, strings | yes |
//! | zset | 3 | length, (string, text double) | no |
//! | hash | 4 | length, (string, string) | yes |
//! | zset | 5 | length, (string, f64 LE) | yes |
//! | hash zipmap | 9 | string holding a zipmap | no |
//! | list ziplist | 10 | string holding a ziplist | no |
//! | set intset | 11 | string holding an intset | yes (≤ 512 integers) |
//! | zset ziplist | 12 | string holding a ziplist | no |
//! | hash ziplist | 13 | string holding a ziplist | no |
//! | list quicklist | 14 | length, ziplist strings | no |
//! | hash listpack | 16 | string holding a listpack | no |
//! | zset listpack | 17 | string holding a listpack | no |
//! | list quicklist 2 | 18 | length, (container 1 plain / 2 packed, string) | yes (8 KiB listpacks) |
//! | stream listpacks | 15 | nodes (16-byte id, listpack), length, last id, groups | no |
//! | stream listpacks 2 | 19 | as 15, plus first id, max deleted id, entries added, each group's entries read | yes |
//!
//! A stream node's listpack: count, deleted, the master entry's field count and names, 0;
//! then per entry: flags (1 deleted, 2 same fields as the master), ms and seq as
//! differences from the node's id, the field count and names unless same-fields, the
//! values, and the number of listpack items the entry used before this one. A group is its
//! name, last delivered id, entries read (19 only), its pending entries (16-byte id,
//! delivery time as 8 bytes LE, delivery count) and its consumers (name, seen time, the ids
//! they hold).
//!
//! [`restore`] reads every type Redis 7.0 writes or still loads (module types aside). It validates every container completely — Redis 7.0 does so only with
//! `sanitize-dump-payload yes` — so a duplicate hash field or set member is refused where a
//! default Redis would store a corrupt object. Like Redis, it ignores bytes after the object.

use bytes::Bytes;
use crc::{CRC_64_REDIS, Crc, Table};

use super::extra::StreamId;
use crate::error::{Error, Result};

/// The RDB version Redis 7.0 writes, and the newest [`restore`] accepts.
pub const RDB_VERSION: u16 = 10;

/// Redis' CRC-64 (Jones), sixteen bytes a step: a whole file's checksum costs little.
pub(crate) static CRC64: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_REDIS);

/// The most members an intset holds before Redis 7.0 uses a hash table
/// (`set-max-intset-entries`).
const INTSET_MAX_ENTRIES: usize = 512;
/// Bytes in one quicklist listpack node (`list-max-listpack-size -2`).
const QUICKLIST_NODE_BYTES: usize = 8 * 1024;

/// A value as DUMP carries it. Collections keep their order (list order; the others in the
/// order the payload lists them).
#[derive(Debug, Clone, PartialEq)]
pub enum RdbValue {
    /// A string.
    String(Bytes),
    /// A list, head first.
    List(Vec<Bytes>),
    /// A set's members.
    Set(Vec<Bytes>),
    /// A sorted set's members and scores.
    ZSet(Vec<(Bytes, f64)>),
    /// A hash's fields and values.
    Hash(Vec<(Bytes, Bytes)>),
    /// A stream, its consumer groups included.
    Stream(Box<RdbStream>),
}

impl RdbValue {
    /// The type's name, as TYPE answers it.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            RdbValue::String(_) => "string",
            RdbValue::List(_) => "list",
            RdbValue::Set(_) => "set",
            RdbValue::ZSet(_) => "zset",
            RdbValue::Hash(_) => "hash",
            RdbValue::Stream(_) => "stream",
        }
    }

    /// A list, set, sorted set or hash without elements: Redis refuses one in a DUMP payload
    /// and skips one in a file.
    pub(crate) fn is_empty_collection(&self) -> bool {
        match self {
            RdbValue::String(_) | RdbValue::Stream(_) => false,
            RdbValue::List(v) | RdbValue::Set(v) => v.is_empty(),
            RdbValue::ZSet(v) => v.is_empty(),
            RdbValue::Hash(v) => v.is_empty(),
        }
    }
}

/// A stream as DUMP carries it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RdbStream {
    /// The live entries in id order, each with its fields and values (`f1 v1 f2 v2 …`).
    pub entries: Vec<(StreamId, Vec<Bytes>)>,
    /// The last id generated.
    pub last_id: StreamId,
    /// The first live entry's id (0-0 when empty).
    pub first_id: StreamId,
    /// The largest id deleted.
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// The consumer groups, by name.
    pub groups: Vec<RdbGroup>,
}

/// A consumer group as DUMP carries it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RdbGroup {
    /// Its name.
    pub name: Bytes,
    /// The last id delivered.
    pub last_id: StreamId,
    /// The logical read counter; -1 when unknown.
    pub entries_read: i64,
    /// Pending entries in id order: id, delivery time (ms), delivery count, holder.
    pub pending: Vec<(StreamId, u64, u64, Bytes)>,
    /// Consumers by name, with their seen time (ms).
    pub consumers: Vec<(Bytes, u64)>,
}

/// Serializes `value` as a DUMP payload that Redis 7.0 RESTOREs.
///
/// Writes the type byte and object (see the module table), then [`RDB_VERSION`] and the
/// CRC-64 (Jones, as Redis) of everything before it, both little-endian.
pub fn dump(value: &RdbValue) -> Vec<u8> {
    let mut out = Vec::new();
    put_object(&mut out, None, value, false);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Appends `value`'s type byte and object, as DUMP and the RDB file both carry it (the file
/// puts the `key` between the two); with `compress`, strings over 20 bytes (listpacks and intsets included) are LZF-compressed
/// when that saves at least 4 bytes, as Redis with `rdbcompression yes`.
pub(crate) fn put_object(out: &mut Vec<u8>, key: Option<&[u8]>, value: &RdbValue, compress: bool) {
    let put_string = |out: &mut Vec<u8>, s: &[u8]| put_string(out, s, compress);
    let put_type = |out: &mut Vec<u8>, ty: u8| {
        out.push(ty);
        if let Some(key) = key {
            put_string(out, key);
        }
    };
    match value {
        RdbValue::String(s) => {
            put_type(out, 0);
            put_string(out, s);
        }
        RdbValue::List(items) => {
            put_type(out, 18);
            let nodes = quicklist_nodes(items);
            put_len(out, nodes.len() as u64);
            for node in nodes {
                put_len(out, 2);
                put_string(out, &listpack(node));
            }
        }
        RdbValue::Set(members) => match intset(members) {
            Some(blob) => {
                put_type(out, 11);
                put_string(out, &blob);
            }
            None => {
                put_type(out, 2);
                put_len(out, members.len() as u64);
                members.iter().for_each(|m| put_string(out, m));
            }
        },
        RdbValue::ZSet(pairs) => {
            put_type(out, 5);
            put_len(out, pairs.len() as u64);
            // Redis writes a skiplist from its tail, so loading inserts at the head.
            for (member, score) in pairs.iter().rev() {
                put_string(out, member);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        RdbValue::Hash(pairs) => {
            put_type(out, 4);
            put_len(out, pairs.len() as u64);
            for (field, value) in pairs {
                put_string(out, field);
                put_string(out, value);
            }
        }
        RdbValue::Stream(s) => {
            put_type(out, 19);
            put_stream(out, s, compress);
        }
    }
}

/// Checks a DUMP payload's version and checksum and reads its object.
///
/// # Errors
/// [`Error::DumpVersionOrChecksum`] for a payload under 10 bytes, an RDB version above
/// [`RDB_VERSION`] or a CRC mismatch (Redis: "DUMP payload version or checksum are wrong");
/// [`Error::DumpFormat`] for anything wrong inside (Redis: "Bad data format"), including an
/// empty collection, duplicate members, and the types this crate does not store (streams,
/// modules).
pub fn restore(payload: &[u8]) -> Result<RdbValue> {
    let Some(body_len) = payload.len().checked_sub(10) else {
        return Err(Error::DumpVersionOrChecksum);
    };
    let (body, footer) = payload.split_at(body_len);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().map_err(|_| Error::DumpVersionOrChecksum)?);
    if version > RDB_VERSION || CRC64.checksum(&payload[..body_len + 2]) != crc {
        return Err(Error::DumpVersionOrChecksum);
    }
    let mut r = In::new(body);
    let value = read_object(&mut r)?;
    if value.is_empty_collection() {
        return Err(Error::DumpFormat("empty collection"));
    }
    Ok(value)
}

/// RDB's opcode before one function library's code (Redis 7.0's `RDB_OPCODE_FUNCTION2`).
const OPCODE_FUNCTION2: u8 = 245;

/// Serializes function libraries as a FUNCTION DUMP payload that Redis 7.0 FUNCTION
/// RESTOREs: for each library the opcode 245 and its code as an RDB string, then
/// [`RDB_VERSION`] and the CRC-64 of everything before it, both little-endian.
pub fn dump_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        put_string(&mut out, code, false);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The libraries' code in a FUNCTION DUMP payload (LZF-compressed strings included, as
/// Redis writes them).
///
/// # Errors
/// [`Error::DumpVersionOrChecksum`] as for [`restore`]; [`Error::DumpFormat`] with Redis'
/// text: "given type is not a function" for another opcode, "can not read data type" or
/// "failed loading the given functions payload" for a cut or malformed payload.
pub fn restore_functions(payload: &[u8]) -> Result<Vec<Bytes>> {
    let Some(body_len) = payload.len().checked_sub(10) else {
        return Err(Error::DumpVersionOrChecksum);
    };
    let footer = &payload[body_len..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().map_err(|_| Error::DumpVersionOrChecksum)?);
    if version > RDB_VERSION || CRC64.checksum(&payload[..body_len + 2]) != crc {
        return Err(Error::DumpVersionOrChecksum);
    }
    let mut r = In::new(&payload[..body_len]);
    let mut codes = Vec::new();
    while !r.buf.is_empty() {
        match r.u8().map_err(|_| Error::DumpFormat("can not read data type"))? {
            OPCODE_FUNCTION2 => codes.push(
                r.string().map_err(|_| Error::DumpFormat("failed loading the given functions payload"))?,
            ),
            _ => return Err(Error::DumpFormat("given type is not a function")),
        }
    }
    Ok(codes)
}

fn read_object(r: &mut In<'_>) -> Result<RdbValue> {
    let ty = r.u8()?;
    read_object_of(ty, r)
}

/// Reads an object of type `ty` (its type byte already read).
pub(crate) fn read_object_of(ty: u8, r: &mut In<'_>) -> Result<RdbValue> {
    Ok(match ty {
        0 => RdbValue::String(r.string()?),
        1 => RdbValue::List(r.repeat(In::string)?),
        2 => RdbValue::Set(unique(r.repeat(In::string)?, |m| m)?),
        3 => RdbValue::ZSet(unique(r.repeat(|r| Ok((r.string()?, r.text_double()?)))?, |p| &p.0)?),
        4 => RdbValue::Hash(unique(r.repeat(|r| Ok((r.string()?, r.string()?)))?, |p| &p.0)?),
        5 => RdbValue::ZSet(unique(r.repeat(|r| Ok((r.string()?, r.f64_le()?)))?, |p| &p.0)?),
        9 => RdbValue::Hash(unique(zipmap(&r.string()?)?, |p| &p.0)?),
        10 => RdbValue::List(ziplist(&r.string()?)?),
        11 => RdbValue::Set(unique(read_intset(&r.string()?)?, |m| m)?),
        12 | 17 => {
            let blob = r.string()?;
            let items = if ty == 12 { ziplist(&blob)? } else { read_listpack(&blob)? };
            RdbValue::ZSet(unique(pairs(items, |s| parse_score(&s))?, |p| &p.0)?)
        }
        13 | 16 => {
            let blob = r.string()?;
            let items = if ty == 13 { ziplist(&blob)? } else { read_listpack(&blob)? };
            RdbValue::Hash(unique(pairs(items, Ok)?, |p| &p.0)?)
        }
        14 => RdbValue::List(r.repeat(|r| ziplist(&r.string()?))?.into_iter().flatten().collect()),
        18 => {
            let nodes = r.repeat(|r| match r.len()? {
                1 => Ok(vec![r.string()?]),
                2 => {
                    let items = read_listpack(&r.string()?)?;
                    if items.is_empty() { Err(Error::DumpFormat("empty quicklist node")) } else { Ok(items) }
                }
                _ => Err(Error::DumpFormat("quicklist container")),
            })?;
            RdbValue::List(nodes.into_iter().flatten().collect())
        }
        15 | 19 => RdbValue::Stream(Box::new(read_stream(r, ty == 19)?)),
        _ => return Err(Error::DumpFormat("unsupported object type")),
    })
}

/// Entries per node [`dump`] writes (Redis' default `stream-node-max-entries`).
const STREAM_NODE_ENTRIES: usize = 100;
const STREAM_DELETED: i64 = 1;
const STREAM_SAMEFIELDS: i64 = 2;

fn put_id_len(out: &mut Vec<u8>, id: StreamId) {
    put_len(out, id.ms);
    put_len(out, id.seq);
}

fn put_stream(out: &mut Vec<u8>, s: &RdbStream, compress: bool) {
    let put_string = |out: &mut Vec<u8>, s: &[u8]| put_string(out, s, compress);
    let nodes: Vec<&[(StreamId, Vec<Bytes>)]> = s.entries.chunks(STREAM_NODE_ENTRIES).collect();
    put_len(out, nodes.len() as u64);
    let int = |v: i64| Bytes::from(v.to_string());
    for node in nodes {
        let master = node[0].0;
        let master_fields: Vec<&Bytes> = node[0].1.iter().step_by(2).collect();
        let mut items = vec![int(node.len() as i64), int(0), int(master_fields.len() as i64)];
        items.extend(master_fields.iter().map(|f| (*f).clone()));
        items.push(int(0));
        for (id, fields) in node {
            let names: Vec<&Bytes> = fields.iter().step_by(2).collect();
            let same = names == master_fields;
            let before = items.len();
            items.push(int(if same { STREAM_SAMEFIELDS } else { 0 }));
            items.push(int(id.ms.wrapping_sub(master.ms) as i64));
            items.push(int(id.seq.wrapping_sub(master.seq) as i64));
            if same {
                items.extend(fields.iter().skip(1).step_by(2).cloned());
            } else {
                items.push(int(names.len() as i64));
                items.extend(fields.iter().cloned());
            }
            items.push(int((items.len() - before) as i64));
        }
        put_string(out, &master.to_bytes());
        put_string(out, &listpack(&items));
    }
    put_len(out, s.entries.len() as u64);
    put_id_len(out, s.last_id);
    put_id_len(out, s.first_id);
    put_id_len(out, s.max_deleted_id);
    put_len(out, s.entries_added);
    put_len(out, s.groups.len() as u64);
    for g in &s.groups {
        put_string(out, &g.name);
        put_id_len(out, g.last_id);
        put_len(out, g.entries_read as u64);
        put_len(out, g.pending.len() as u64);
        for (id, delivered, count, _) in &g.pending {
            out.extend_from_slice(&id.to_bytes());
            out.extend_from_slice(&delivered.to_le_bytes());
            put_len(out, *count);
        }
        put_len(out, g.consumers.len() as u64);
        for (name, seen) in &g.consumers {
            put_string(out, name);
            out.extend_from_slice(&seen.to_le_bytes());
            let held: Vec<&StreamId> = g.pending.iter().filter(|p| p.3 == name).map(|p| &p.0).collect();
            put_len(out, held.len() as u64);
            for id in held {
                out.extend_from_slice(&id.to_bytes());
            }
        }
    }
}

fn stream_id_raw(bytes: &[u8]) -> Result<StreamId> {
    let ms = u64::from_be_bytes(
        bytes.get(..8).and_then(|b| b.try_into().ok()).ok_or(Error::DumpFormat("stream id"))?,
    );
    let seq = u64::from_be_bytes(
        bytes.get(8..16).and_then(|b| b.try_into().ok()).ok_or(Error::DumpFormat("stream id"))?,
    );
    Ok(StreamId { ms, seq })
}

fn read_stream(r: &mut In<'_>, v2: bool) -> Result<RdbStream> {
    let bad = Error::DumpFormat;
    let mut s = RdbStream::default();
    let mut last_master: Option<StreamId> = None;
    for _ in 0..r.len()? {
        let key = r.string()?;
        if key.len() != 16 {
            return Err(bad("stream node key"));
        }
        let master = stream_id_raw(&key)?;
        if last_master.is_some_and(|m| m >= master) {
            return Err(bad("stream nodes out of order"));
        }
        last_master = Some(master);
        let items = read_listpack(&r.string()?)?;
        read_stream_node(&items, master, &mut s.entries)?;
    }
    let length = r.len()?;
    s.last_id = StreamId { ms: r.len()?, seq: r.len()? };
    if v2 {
        s.first_id = StreamId { ms: r.len()?, seq: r.len()? };
        s.max_deleted_id = StreamId { ms: r.len()?, seq: r.len()? };
        s.entries_added = r.len()?;
    } else {
        s.first_id = s.entries.first().map_or(StreamId::MIN, |e| e.0);
        s.entries_added = length;
    }
    if length != s.entries.len() as u64 || s.entries.last().is_some_and(|e| e.0 > s.last_id) {
        return Err(bad("stream length"));
    }
    let mut names = std::collections::HashSet::new();
    for _ in 0..r.len()? {
        let mut g = RdbGroup { name: r.string()?, ..RdbGroup::default() };
        if !names.insert(g.name.clone()) {
            return Err(bad("duplicate consumer group"));
        }
        g.last_id = StreamId { ms: r.len()?, seq: r.len()? };
        g.entries_read = if v2 { r.len()? as i64 } else { legacy_entries_read(&s, g.last_id) };
        for _ in 0..r.len()? {
            let id = stream_id_raw(r.take(16)?)?;
            let delivered = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| bad("time"))?);
            let count = r.len()?;
            if g.pending.last().is_some_and(|p| p.0 >= id) {
                return Err(bad("pending entries out of order"));
            }
            g.pending.push((id, delivered, count, Bytes::new()));
        }
        let mut consumers = std::collections::HashSet::new();
        for _ in 0..r.len()? {
            let name = r.string()?;
            let seen = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| bad("time"))?);
            if !consumers.insert(name.clone()) {
                return Err(bad("duplicate consumer"));
            }
            for _ in 0..r.len()? {
                let id = stream_id_raw(r.take(16)?)?;
                let at = g
                    .pending
                    .binary_search_by(|p| p.0.cmp(&id))
                    .map_err(|_| bad("consumer entry not pending"))?;
                if !g.pending[at].3.is_empty() {
                    return Err(bad("pending entry held twice"));
                }
                g.pending[at].3 = name.clone();
            }
            g.consumers.push((name, seen));
        }
        if g.pending.iter().any(|p| p.3.is_empty()) {
            return Err(bad("pending entry without a consumer"));
        }
        g.consumers.sort();
        s.groups.push(g);
    }
    s.groups.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(s)
}

/// Redis' estimate of a group's read counter when the payload (type 15) has none.
fn legacy_entries_read(s: &RdbStream, id: StreamId) -> i64 {
    let added = s.entries_added as i64;
    if added == 0 || id == s.last_id {
        return added;
    }
    match s.entries.first() {
        Some((first, _)) if id < *first => added - s.entries.len() as i64,
        Some((first, _)) if id == *first => added - s.entries.len() as i64 + 1,
        None if id <= s.last_id => added,
        _ => -1,
    }
}

/// Reads one node's listpack into `entries` (deleted entries skipped).
fn read_stream_node(
    items: &[Bytes],
    master: StreamId,
    entries: &mut Vec<(StreamId, Vec<Bytes>)>,
) -> Result<()> {
    let bad = Error::DumpFormat;
    let int = |i: usize| -> Result<i64> {
        let item = items.get(i).ok_or(bad("stream node truncated"))?;
        std::str::from_utf8(item).ok().and_then(|t| t.parse().ok()).ok_or(bad("stream node integer"))
    };
    let count = int(0)?;
    let deleted = int(1)?;
    let nfields = usize::try_from(int(2)?).map_err(|_| bad("stream field count"))?;
    let master_fields = items.get(3..nfields.saturating_add(3)).ok_or(bad("stream node truncated"))?;
    let mut at = 3 + nfields;
    if int(at)? != 0 {
        return Err(bad("stream master terminator"));
    }
    at += 1;
    let (mut live, mut dead) = (0, 0);
    while at < items.len() {
        let start = at;
        let flags = int(at)?;
        let ms = master.ms.wrapping_add(int(at + 1)? as u64);
        let seq = master.seq.wrapping_add(int(at + 2)? as u64);
        at += 3;
        let mut fields = Vec::new();
        if flags & STREAM_SAMEFIELDS != 0 {
            let values = items.get(at..at.saturating_add(nfields)).ok_or(bad("stream node truncated"))?;
            for (f, v) in master_fields.iter().zip(values) {
                fields.extend([f.clone(), v.clone()]);
            }
            at += nfields;
        } else {
            let n = usize::try_from(int(at)?).map_err(|_| bad("stream field count"))?;
            at += 1;
            let end = n.checked_mul(2).and_then(|m| m.checked_add(at)).ok_or(bad("stream field count"))?;
            let pairs = items.get(at..end).ok_or(bad("stream node truncated"))?;
            fields.extend(pairs.iter().cloned());
            at += 2 * n;
        }
        if int(at)? != (at - start) as i64 {
            return Err(bad("stream entry back count"));
        }
        at += 1;
        let id = StreamId { ms, seq };
        if entries.last().is_some_and(|e| e.0 >= id) || fields.is_empty() {
            return Err(bad("stream entry"));
        }
        if flags & STREAM_DELETED != 0 {
            dead += 1;
        } else {
            live += 1;
            entries.push((id, fields));
        }
    }
    if live != count || dead != deleted || live + dead == 0 {
        return Err(bad("stream node counts"));
    }
    Ok(())
}

/// Refuses a collection whose keys repeat.
fn unique<T>(items: Vec<T>, key: impl Fn(&T) -> &Bytes) -> Result<Vec<T>> {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    if items.iter().all(|item| seen.insert(key(item).clone())) {
        Ok(items)
    } else {
        Err(Error::DumpFormat("duplicate member"))
    }
}

/// Pairs up a flat container: field, value, field, value…
fn pairs<T>(items: Vec<Bytes>, value: impl Fn(Bytes) -> Result<T>) -> Result<Vec<(Bytes, T)>> {
    if !items.len().is_multiple_of(2) {
        return Err(Error::DumpFormat("odd number of entries"));
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, value(v)?));
    }
    Ok(out)
}

/// A score written as text in a ziplist or listpack: what `strtod` reads, whole.
fn parse_score(text: &[u8]) -> Result<f64> {
    let s = std::str::from_utf8(text).map_err(|_| Error::DumpFormat("score"))?;
    let x: f64 = match s {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ => s.parse().map_err(|_| Error::DumpFormat("score"))?,
    };
    if x.is_nan() { Err(Error::DumpFormat("score")) } else { Ok(x) }
}

/// A little-endian reader over the payload; every failure is [`Error::DumpFormat`].
pub(crate) struct In<'a> {
    /// The bytes not read yet.
    pub(crate) buf: &'a [u8],
    /// Whether a read failed because the bytes ran out (a streaming reader then waits for
    /// more instead of calling the input corrupt).
    pub(crate) starved: bool,
}

impl<'a> In<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        In { buf, starved: false }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            self.starved = true;
            return Err(Error::DumpFormat("truncated"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn f64_le(&mut self) -> Result<f64> {
        let x = f64::from_le_bytes(self.take(8)?.try_into().map_err(|_| Error::DumpFormat("double"))?);
        if x.is_nan() { Err(Error::DumpFormat("NaN score")) } else { Ok(x) }
    }

    /// The old zset score: a length byte (253 NaN, 254 +inf, 255 -inf) then ASCII.
    fn text_double(&mut self) -> Result<f64> {
        match self.u8()? {
            253 => Err(Error::DumpFormat("NaN score")),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => parse_score(self.take(usize::from(n))?),
        }
    }

    /// A length, or `Err` for the special string encodings (which only [`In::string`] reads).
    fn len_or_special(&mut self) -> Result<std::result::Result<u64, u8>> {
        let first = self.u8()?;
        Ok(match first >> 6 {
            0 => Ok(u64::from(first & 0x3F)),
            1 => Ok(u64::from(first & 0x3F) << 8 | u64::from(self.u8()?)),
            2 => match first {
                0x80 => Ok(u64::from(u32::from_be_bytes(self.take(4)?.try_into().unwrap_or_default()))),
                0x81 => Ok(u64::from_be_bytes(self.take(8)?.try_into().unwrap_or_default())),
                _ => return Err(Error::DumpFormat("length encoding")),
            },
            _ => Err(first & 0x3F),
        })
    }

    pub(crate) fn len(&mut self) -> Result<u64> {
        self.len_or_special()?.map_err(|_| Error::DumpFormat("length"))
    }

    pub(crate) fn string(&mut self) -> Result<Bytes> {
        let len = match self.len_or_special()? {
            Ok(len) => len,
            Err(0) => return Ok(Bytes::from((self.u8()? as i8).to_string())),
            Err(1) => return Ok(Bytes::from(i16::from_le_bytes([self.u8()?, self.u8()?]).to_string())),
            Err(2) => {
                let b = self.take(4)?;
                return Ok(Bytes::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]).to_string()));
            }
            Err(3) => {
                let compressed = self.len()?;
                let len = self.len()?;
                let input =
                    self.take(usize::try_from(compressed).map_err(|_| Error::DumpFormat("length"))?)?;
                return lzf_decompress(input, len).map(Bytes::from);
            }
            Err(_) => return Err(Error::DumpFormat("string encoding")),
        };
        let len = usize::try_from(len).map_err(|_| Error::DumpFormat("length"))?;
        Ok(Bytes::copy_from_slice(self.take(len)?))
    }

    /// A length, then that many items. The capacity is bounded by the bytes left, so a huge
    /// length in a short payload cannot allocate much.
    fn repeat<T>(&mut self, mut item: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        let n = self.len()?;
        let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(self.buf.len()));
        for _ in 0..n {
            out.push(item(self)?);
        }
        Ok(out)
    }
}

/// LZF decompression into exactly `len` bytes.
fn lzf_decompress(input: &[u8], len: u64) -> Result<Vec<u8>> {
    let bad = || Error::DumpFormat("lzf");
    let len = usize::try_from(len).map_err(|_| bad())?;
    // An LZF back-reference expands at most 264 bytes per 2 input bytes.
    if len > input.len().saturating_mul(132).saturating_add(64) {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let run = input.get(i..i + ctrl + 1).ok_or_else(bad)?;
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*input.get(i).ok_or_else(bad)?);
                i += 1;
            }
            let back = ((ctrl & 0x1F) << 8) + usize::from(*input.get(i).ok_or_else(bad)?) + 1;
            i += 1;
            let start = out.len().checked_sub(back).ok_or_else(bad)?;
            for k in 0..n + 2 {
                out.push(out[start + k]);
            }
        }
        if out.len() > len {
            return Err(bad());
        }
    }
    if out.len() == len { Ok(out) } else { Err(bad()) }
}

/// A listpack: total bytes u32 LE, count u16 LE, entries each followed by its back-length,
/// then 0xFF. Integers come back as their decimal text.
fn read_listpack(blob: &[u8]) -> Result<Vec<Bytes>> {
    let bad = |what| Error::DumpFormat(what);
    if blob.len() < 7 || u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize != blob.len() {
        return Err(bad("listpack header"));
    }
    let count = u16::from_le_bytes([blob[4], blob[5]]);
    let mut r = In::new(&blob[6..]);
    let mut out = Vec::new();
    loop {
        let start = r.buf.len();
        let first = r.u8()?;
        if first == 0xFF {
            break;
        }
        let int = |v: i64| Bytes::from(v.to_string());
        let item = match first {
            0x00..=0x7F => int(i64::from(first)),
            0x80..=0xBF => Bytes::copy_from_slice(r.take(usize::from(first & 0x3F))?),
            0xC0..=0xDF => {
                let v = i64::from(first & 0x1F) << 8 | i64::from(r.u8()?);
                int(if v >= 1 << 12 { v - (1 << 13) } else { v })
            }
            0xE0..=0xEF => {
                let n = usize::from(first & 0x0F) << 8 | usize::from(r.u8()?);
                Bytes::copy_from_slice(r.take(n)?)
            }
            0xF0 => {
                let b = r.take(4)?;
                Bytes::copy_from_slice(r.take(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)?)
            }
            0xF1 => int(i64::from(i16::from_le_bytes([r.u8()?, r.u8()?]))),
            0xF2 => {
                let b = r.take(3)?;
                int(i64::from(i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8))
            }
            0xF3 => int(i64::from(i32::from_le_bytes(r.take(4)?.try_into().map_err(|_| bad("int"))?))),
            0xF4 => int(i64::from_le_bytes(r.take(8)?.try_into().map_err(|_| bad("int"))?)),
            _ => return Err(bad("listpack entry encoding")),
        };
        let entry_len = start - r.buf.len();
        let backlen = backlen_bytes(entry_len);
        if r.take(backlen.len())? != backlen.as_slice() {
            return Err(bad("listpack back-length"));
        }
        out.push(item);
    }
    if !r.buf.is_empty() || (count != u16::MAX && usize::from(count) != out.len()) {
        return Err(bad("listpack count"));
    }
    Ok(out)
}

/// The back-length a listpack writes after an entry of `len` bytes: 7 bits per byte, the
/// highest group first; every byte after the first has bit 7 set (read backwards, it says
/// that more bytes follow).
fn backlen_bytes(len: usize) -> Vec<u8> {
    let mut groups = Vec::with_capacity(5);
    let mut v = len;
    loop {
        groups.push((v & 0x7F) as u8);
        v >>= 7;
        if v == 0 {
            break;
        }
    }
    groups.reverse();
    for g in groups.iter_mut().skip(1) {
        *g |= 0x80;
    }
    groups
}

/// A ziplist: zlbytes u32, zltail u32, zllen u16, entries (prevlen, encoding, data), 0xFF.
fn ziplist(blob: &[u8]) -> Result<Vec<Bytes>> {
    let bad = |what| Error::DumpFormat(what);
    if blob.len() < 11 || u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize != blob.len() {
        return Err(bad("ziplist header"));
    }
    let count = u16::from_le_bytes([blob[8], blob[9]]);
    let mut r = In::new(&blob[10..]);
    let mut out = Vec::new();
    loop {
        let first = r.u8()?;
        if first == 0xFF {
            break;
        }
        if first == 0xFE {
            r.take(4)?;
        }
        let enc = r.u8()?;
        let int = |v: i64| Bytes::from(v.to_string());
        let item = match enc >> 6 {
            0 => Bytes::copy_from_slice(r.take(usize::from(enc & 0x3F))?),
            1 => {
                let n = usize::from(enc & 0x3F) << 8 | usize::from(r.u8()?);
                Bytes::copy_from_slice(r.take(n)?)
            }
            2 => {
                let b = r.take(4)?;
                Bytes::copy_from_slice(r.take(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)?)
            }
            _ => match enc {
                0xC0 => int(i64::from(i16::from_le_bytes([r.u8()?, r.u8()?]))),
                0xD0 => int(i64::from(i32::from_le_bytes(r.take(4)?.try_into().map_err(|_| bad("int"))?))),
                0xE0 => int(i64::from_le_bytes(r.take(8)?.try_into().map_err(|_| bad("int"))?)),
                0xF0 => {
                    let b = r.take(3)?;
                    int(i64::from(i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8))
                }
                0xFE => int(i64::from(r.u8()? as i8)),
                0xF1..=0xFD => int(i64::from(enc & 0x0F) - 1),
                _ => return Err(bad("ziplist entry encoding")),
            },
        };
        out.push(item);
    }
    if !r.buf.is_empty() || (count != u16::MAX && usize::from(count) != out.len()) {
        return Err(bad("ziplist count"));
    }
    Ok(out)
}

/// A zipmap: zmlen u8, then (len field, len free value free-bytes) pairs, then 0xFF.
fn zipmap(blob: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
    let mut r = In::new(blob);
    r.u8()?;
    let mut out = Vec::new();
    let zlen = |r: &mut In<'_>| -> Result<Option<usize>> {
        Ok(match r.u8()? {
            0xFF => None,
            254 => {
                Some(u32::from_le_bytes(r.take(4)?.try_into().map_err(|_| Error::DumpFormat("zipmap"))?)
                    as usize)
            }
            n => Some(usize::from(n)),
        })
    };
    while let Some(flen) = zlen(&mut r)? {
        let field = Bytes::copy_from_slice(r.take(flen)?);
        let vlen = zlen(&mut r)?.ok_or(Error::DumpFormat("zipmap"))?;
        let free = usize::from(r.u8()?);
        let value = Bytes::copy_from_slice(r.take(vlen)?);
        r.take(free)?;
        out.push((field, value));
    }
    Ok(out)
}

/// An intset: encoding u32 LE (2, 4 or 8), count u32 LE, then the integers ascending, LE.
fn read_intset(blob: &[u8]) -> Result<Vec<Bytes>> {
    let bad = || Error::DumpFormat("intset");
    if blob.len() < 8 {
        return Err(bad());
    }
    let width = u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
    let count = u32::from_le_bytes([blob[4], blob[5], blob[6], blob[7]]) as usize;
    if !matches!(width, 2 | 4 | 8) || count.checked_mul(width) != Some(blob.len() - 8) {
        return Err(bad());
    }
    let values: Vec<i64> = blob[8..]
        .chunks_exact(width)
        .map(|c| match width {
            2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
            4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        })
        .collect();
    if values.windows(2).any(|w| w[0] >= w[1]) {
        return Err(bad());
    }
    Ok(values.into_iter().map(|v| Bytes::from(v.to_string())).collect())
}

/// Writes a length in the shortest form.
pub(crate) fn put_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if let Ok(len) = u32::try_from(len) {
        out.push(0x80);
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// Writes a string: a canonical decimal integer in 32 bits takes the int forms, as Redis
/// writes them; with `compress`, a longer string over 20 bytes that LZF shrinks by at least
/// 4 bytes is written compressed (`0xC3`, compressed length, length, data); anything else is
/// length and bytes.
pub(crate) fn put_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    match canonical_int(s).and_then(|v| i32::try_from(v).ok()) {
        Some(v) if i8::try_from(v).is_ok() => out.extend_from_slice(&[0xC0, v as i8 as u8]),
        Some(v) if i16::try_from(v).is_ok() => {
            out.push(0xC1);
            out.extend_from_slice(&(v as i16).to_le_bytes());
        }
        Some(v) => {
            out.push(0xC2);
            out.extend_from_slice(&v.to_le_bytes());
        }
        None => match compress.then(|| lzf_compress(s)).flatten() {
            Some(packed) => {
                out.push(0xC3);
                put_len(out, packed.len() as u64);
                put_len(out, s.len() as u64);
                out.extend_from_slice(&packed);
            }
            None => {
                put_len(out, s.len() as u64);
                out.extend_from_slice(s);
            }
        },
    }
}

/// LZF compression of `input` (over 20 bytes), or `None` when the result would not be at
/// least 4 bytes shorter (Redis then writes the string as it is). Literal runs of up to 32
/// bytes (`000LLLLL`, then the bytes); back-references of 3 to 264 bytes up to 8 KiB back
/// (`LLLooooo oooooooo`, with an extra length byte when `LLL` is 7).
fn lzf_compress(input: &[u8]) -> Option<Vec<u8>> {
    const MAX_BACK: usize = 1 << 13;
    const MAX_MATCH: usize = 264;
    if input.len() <= 20 {
        return None;
    }
    let limit = input.len() - 4;
    let bits = input.len().next_power_of_two().trailing_zeros().clamp(8, 14);
    // Position + 1 of the last 3 bytes hashing to each slot; 0: none.
    let mut table = vec![0usize; 1 << bits];
    let hash = |i: usize| {
        let v = u32::from_le_bytes([input[i], input[i + 1], input[i + 2], 0]);
        (v.wrapping_mul(2_654_435_761) >> (32 - bits)) as usize
    };
    let literals = |out: &mut Vec<u8>, run: &[u8]| {
        for chunk in run.chunks(32) {
            out.push((chunk.len() - 1) as u8);
            out.extend_from_slice(chunk);
        }
    };
    let mut out = Vec::with_capacity(limit);
    let (mut i, mut run_start) = (0, 0);
    while i + 2 < input.len() {
        let slot = hash(i);
        let candidate = std::mem::replace(&mut table[slot], i + 1);
        let back = i + 1 - candidate.max(1);
        if candidate != 0 && back <= MAX_BACK && input[candidate - 1..candidate + 2] == input[i..i + 3] {
            let from = candidate - 1;
            let most = (input.len() - i).min(MAX_MATCH);
            let len =
                3 + input[i + 3..i + most].iter().zip(&input[from + 3..]).take_while(|(a, b)| a == b).count();
            literals(&mut out, &input[run_start..i]);
            let (off, n) = (back - 1, len - 2);
            if n < 7 {
                out.push((n << 5 | off >> 8) as u8);
            } else {
                out.extend_from_slice(&[(7 << 5 | off >> 8) as u8, (n - 7) as u8]);
            }
            out.push(off as u8);
            i += len;
            run_start = i;
            if out.len() > limit {
                return None;
            }
        } else {
            i += 1;
        }
    }
    literals(&mut out, &input[run_start..]);
    (out.len() <= limit).then_some(out)
}

/// The value of a string that is exactly the decimal text of an `i64` (no sign on zero, no
/// leading zeros, at most 20 bytes), as Redis' `string2ll`.
fn canonical_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (v.to_string().as_bytes() == s).then_some(v)
}

/// An intset of the members, when all are canonical integers and there are few enough.
fn intset(members: &[Bytes]) -> Option<Vec<u8>> {
    if members.is_empty() || members.len() > INTSET_MAX_ENTRIES {
        return None;
    }
    let mut values = members.iter().map(|m| canonical_int(m)).collect::<Option<Vec<i64>>>()?;
    values.sort_unstable();
    let width: usize = if values.iter().all(|v| i16::try_from(*v).is_ok()) {
        2
    } else if values.iter().all(|v| i32::try_from(*v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    Some(out)
}

/// Splits list elements into quicklist nodes of at most [`QUICKLIST_NODE_BYTES`] of element
/// data (a larger element gets a node of its own).
fn quicklist_nodes(items: &[Bytes]) -> Vec<&[Bytes]> {
    let mut nodes = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        if i > start && bytes + item.len() > QUICKLIST_NODE_BYTES {
            nodes.push(&items[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += item.len() + 2;
    }
    if start < items.len() {
        nodes.push(&items[start..]);
    }
    nodes
}

/// A listpack of the items, integers in the integer encodings as Redis' `lpAppend` does.
fn listpack(items: &[Bytes]) -> Vec<u8> {
    let mut out = vec![0; 6];
    for item in items {
        let start = out.len();
        match canonical_int(item) {
            Some(v @ 0..=127) => out.push(v as u8),
            Some(v) if (-4096..4096).contains(&v) => {
                let u = (v & 0x1FFF) as u16;
                out.extend_from_slice(&[0xC0 | (u >> 8) as u8, u as u8]);
            }
            Some(v) if i16::try_from(v).is_ok() => {
                out.push(0xF1);
                out.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Some(v) if (-(1 << 23)..1 << 23).contains(&v) => {
                out.push(0xF2);
                out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            Some(v) if i32::try_from(v).is_ok() => {
                out.push(0xF3);
                out.extend_from_slice(&(v as i32).to_le_bytes());
            }
            Some(v) => {
                out.push(0xF4);
                out.extend_from_slice(&v.to_le_bytes());
            }
            None if item.len() < 64 => {
                out.push(0x80 | item.len() as u8);
                out.extend_from_slice(item);
            }
            None if item.len() < 4096 => {
                out.extend_from_slice(&[0xE0 | (item.len() >> 8) as u8, item.len() as u8]);
                out.extend_from_slice(item);
            }
            None => {
                out.push(0xF0);
                out.extend_from_slice(&(item.len() as u32).to_le_bytes());
                out.extend_from_slice(item);
            }
        }
        let backlen = backlen_bytes(out.len() - start);
        out.extend_from_slice(&backlen);
    }
    out.push(0xFF);
    let total = out.len() as u32;
    out[..4].copy_from_slice(&total.to_le_bytes());
    let count = u16::try_from(items.len()).unwrap_or(u16::MAX);
    out[4..6].copy_from_slice(&count.to_le_bytes());
    out
}
