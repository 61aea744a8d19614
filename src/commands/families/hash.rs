//! The hash commands: HSET, HSETNX, HGET, HMGET, HMSET, HDEL, HLEN, HSTRLEN, HEXISTS, HKEYS,
//! HVALS, HGETALL, HINCRBY, HINCRBYFLOAT, HRANDFIELD and HSCAN.
//!
//! A hash is one metadata record (version, size) plus one Subkey-CF record per field:
//! `subkey(key, version, field) -> value`. The size is kept exact, so HLEN is one
//! metadata read; HGETALL/HKEYS/HVALS are one range scan.
//!
//! # Blind-write hashes
//! When [`Db::blind_write`] is on, new hashes are created with `blind_write` set (docs/layout.md,
//! extensions). For such a hash:
//! - HSET/HMSET skip reading the existing fields and HSET replies with the number of
//!   field/value pairs given (inexact: overwritten fields count as added);
//! - HDEL skips the reads and replies with the number of fields given (inexact: missing
//!   fields count as removed);
//! - HLEN counts by scanning (O(n)); HRANDFIELD also scans to learn the size;
//! - the hash exists while its metadata record exists, even when HDEL removed every field
//!   (then HLEN says 0, HGETALL is empty, but EXISTS says 1 and TYPE says hash).
//!
//! HSETNX, HINCRBY and HINCRBYFLOAT read the field anyway (their reply depends on it) and
//! are exact in both modes.

use bytes::Bytes;

use crate::backend::{ColumnFamily, KvBackend, WriteBatch};
use crate::codec::{Metadata, RedisType};
use crate::commands::args::{Distinct, check_pairs_count, cursor_arg, int_arg, parse_i64, random_count_arg};
use crate::commands::long_double::{self, LongDouble};
use crate::commands::notify::NotifyFlags;
use crate::commands::subkeys::{Pick, parse_scan_options, scan_reply};
use crate::commands::{CommandError, CommandResult, Db, Reply};

impl<B: KvBackend> Db<'_, B> {
    /// HSET: sets each field to its value (a later duplicate field wins) and returns how many
    /// fields were new. `fields_and_values` alternates fields and values, as HSET's
    /// arguments do (borrowed: each value is shared into the batch, never copied); a last
    /// field without a value is ignored. Reads the hash's metadata and the given fields (one
    /// `multi_get`), writes the fields and the metadata in one batch. A blind-write hash
    /// skips the field reads and returns the number of pairs.
    ///
    /// # Errors
    /// WRONGTYPE for a non-hash key; storage errors.
    pub(crate) fn hset(&mut self, key: &[u8], fields_and_values: &[Bytes]) -> CommandResult<i64> {
        let pairs = fields_and_values.chunks_exact(2);
        let existed = self.lookup_of(key, RedisType::Hash)?;
        let found = existed.is_some();
        let mut meta = existed.unwrap_or_else(|| self.new_collection(RedisType::Hash));
        let mut batch = WriteBatch::new();
        let added = if let [field, value] = fields_and_values {
            // One pair (the common case): its subkey, one read, and no list of writes.
            let sub = self.subkey(key, meta.version, field)?;
            let added = if meta.blind_write || !found {
                1
            } else {
                let mut present = false;
                self.backend().get_with(ColumnFamily::Subkey, &sub, &mut |v| present = v.is_some())?;
                i64::from(!present)
            };
            batch.put(ColumnFamily::Subkey, sub, value.clone());
            added
        } else {
            // One subkey per distinct field, each built once; a repeated field keeps its first
            // slot and its last value, as Redis applies the pairs in order.
            let mut writes: Distinct<(Vec<u8>, &Bytes)> = Distinct::with_capacity(pairs.len());
            for pair in pairs.clone() {
                let (f, v) = (&pair[0], &pair[1]);
                match writes.position(f) {
                    Some(at) => writes.value_mut(at).1 = v,
                    None => writes.push(f, (self.subkey(key, meta.version, f)?, v)),
                }
            }
            let added = if meta.blind_write {
                pairs.len() as i64
            } else if found {
                let present =
                    self.subkeys_present(writes.entries().iter().map(|(_, (k, _))| k.as_slice()))?;
                present.iter().filter(|p| !**p).count() as i64
            } else {
                writes.entries().len() as i64
            };
            for (_, (sub, v)) in writes.into_entries() {
                batch.put(ColumnFamily::Subkey, sub, v.clone());
            }
            added
        };
        if !meta.blind_write {
            meta.size += added as u64;
        }
        if !found || (!meta.blind_write && added > 0) {
            self.put_collection(&mut batch, key, &meta);
        }
        self.commit(batch)?;
        self.notify(NotifyFlags::HASH, "hset", key);
        Ok(added)
    }

    /// HSETNX: sets `field` only when absent; returns whether it did. Reads the metadata and
    /// the field.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn hsetnx(&mut self, key: &[u8], field: &[u8], value: &[u8]) -> CommandResult<bool> {
        let mut meta = self.lookup_or_create(key, RedisType::Hash)?;
        if self.get_subkey(key, meta.version, field)?.is_some() {
            return Ok(false);
        }
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Subkey, self.subkey(key, meta.version, field)?, value.to_vec());
        if !meta.blind_write {
            meta.size += 1;
        }
        self.put_collection(&mut batch, key, &meta);
        self.commit(batch)?;
        self.notify(NotifyFlags::HASH, "hset", key);
        Ok(true)
    }

    /// HGET: one metadata read and one subkey read.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn hget(&self, key: &[u8], field: &[u8]) -> CommandResult<Option<Bytes>> {
        match self.lookup_of(key, RedisType::Hash)? {
            None => Ok(None),
            Some(meta) => self.get_subkey(key, meta.version, field),
        }
    }

    /// HMGET: the metadata and one `multi_get` of the fields.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn hmget(&self, key: &[u8], fields: &[Bytes]) -> CommandResult<Vec<Option<Bytes>>> {
        match self.lookup_of(key, RedisType::Hash)? {
            None => Ok(vec![None; fields.len()]),
            Some(meta) => self.get_subkeys(key, meta.version, fields.iter().map(Bytes::as_ref)),
        }
    }

    /// HDEL: deletes the fields; returns how many existed (a blind-write hash: how many were
    /// given, without reading them). Deletes the hash when it becomes empty.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn hdel(&mut self, key: &[u8], fields: &[Bytes]) -> CommandResult<i64> {
        let Some(mut meta) = self.lookup_of(key, RedisType::Hash)? else { return Ok(0) };
        let removed = self.remove_subkeys(key, &mut meta, fields)?;
        if removed > 0 {
            self.notify_edit(NotifyFlags::HASH, "hdel", key, &meta);
        }
        Ok(removed)
    }

    /// HLEN: one metadata read (a blind-write hash is counted by a scan).
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn hlen(&self, key: &[u8]) -> CommandResult<i64> {
        match self.lookup_of(key, RedisType::Hash)? {
            None => Ok(0),
            Some(meta) => Ok(self.collection_len(key, &meta)? as i64),
        }
    }

    /// HGETALL: every `(field, value)` in field byte order; one range scan.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn hgetall(&self, key: &[u8]) -> CommandResult<Vec<(Bytes, Bytes)>> {
        match self.lookup_of(key, RedisType::Hash)? {
            None => Ok(Vec::new()),
            Some(meta) => self.all_subkeys(key, meta.version),
        }
    }

    /// HINCRBY: adds `delta` to the integer in `field` (missing = 0), returns the result.
    ///
    /// # Errors
    /// WRONGTYPE; "ERR hash value is not an integer"; "ERR increment or decrement would
    /// overflow"; storage errors.
    pub(crate) fn hincrby(&mut self, key: &[u8], field: &[u8], delta: i64) -> CommandResult<i64> {
        let mut meta = self.lookup_or_create(key, RedisType::Hash)?;
        let old = self.get_subkey(key, meta.version, field)?;
        let current = match &old {
            None => 0,
            Some(v) => parse_i64(v).ok_or_else(|| CommandError::err("hash value is not an integer"))?,
        };
        let new = current.checked_add(delta).ok_or(CommandError::Overflow)?;
        self.put_field(key, &mut meta, field, old.is_none(), Bytes::from(new.to_string()))?;
        self.notify(NotifyFlags::HASH, "hincrby", key);
        Ok(new)
    }

    /// HINCRBYFLOAT: adds `delta` (text) to the number in `field` (missing = 0) with the
    /// x87 `long double` arithmetic and `%.17Lf` formatting Redis uses (shared with
    /// INCRBYFLOAT), and returns the stored text.
    ///
    /// # Errors
    /// "ERR value is not a valid float" for a `delta` that is not a number; "ERR value is NaN
    /// or Infinity" for an infinite `delta`; WRONGTYPE; "ERR hash value is not a float";
    /// "ERR increment would produce NaN or Infinity"; storage errors.
    pub(crate) fn hincrbyfloat(&mut self, key: &[u8], field: &[u8], delta: &[u8]) -> CommandResult<Bytes> {
        let delta = long_double::parse(delta).ok_or(CommandError::NotFloat)?;
        if delta == LongDouble::Inf {
            return Err(CommandError::err("value is NaN or Infinity"));
        }
        let mut meta = self.lookup_or_create(key, RedisType::Hash)?;
        let old = self.get_subkey(key, meta.version, field)?;
        let current = match &old {
            None => LongDouble::ZERO,
            Some(v) => long_double::parse(v).ok_or_else(|| CommandError::err("hash value is not a float"))?,
        };
        let new = long_double::add(current, delta)
            .ok_or_else(|| CommandError::err("increment would produce NaN or Infinity"))?;
        let text = Bytes::from(long_double::format_human(new));
        self.put_field(key, &mut meta, field, old.is_none(), text.clone())?;
        self.notify(NotifyFlags::HASH, "hincrbyfloat", key);
        Ok(text)
    }

    fn put_field(
        &mut self,
        key: &[u8],
        meta: &mut Metadata<'static>,
        field: &[u8],
        is_new: bool,
        value: Bytes,
    ) -> CommandResult<()> {
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Subkey, self.subkey(key, meta.version, field)?, value);
        if is_new && !meta.blind_write {
            meta.size += 1;
        }
        self.put_collection(&mut batch, key, meta);
        self.commit(batch)
    }

    /// HRANDFIELD with a count: `count >= 0` gives up to `count` distinct fields, `count < 0`
    /// gives `-count` fields with repeats. Returns `(field, value)` pairs; cost as
    /// `sample_subkeys` (positions walk or seeks; never a full read for a small count on a
    /// large hash).
    ///
    /// # Errors
    /// WRONGTYPE; "ERR value is out of range" for `count < -2^26` (a deviation: Redis would
    /// try to build the reply); storage errors.
    pub(crate) fn hrandfield(&mut self, key: &[u8], count: i64) -> CommandResult<Vec<(Bytes, Bytes)>> {
        let Some(meta) = self.lookup_of(key, RedisType::Hash)? else { return Ok(Vec::new()) };
        let pick = if count >= 0 { Pick::Distinct(count as u64) } else { Pick::Repeat(count.unsigned_abs()) };
        self.sample_subkeys(key, &meta, pick)
    }
}

/// HRANDFIELD … WITHVALUES: `[field, value]` pairs (flat in RESP2).
fn pairs_reply(pairs: Vec<(Bytes, Bytes)>) -> Reply {
    Reply::Pairs(pairs.into_iter().map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v))).collect())
}

/// HGETALL: a map (flat in RESP2).
fn map_reply(pairs: Vec<(Bytes, Bytes)>) -> Reply {
    Reply::Map(pairs.into_iter().map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v))).collect())
}

/// The field-value arguments of HSET or HMSET, refused when a value is missing.
fn field_pairs<'a>(args: &'a [Bytes], name: &str) -> CommandResult<&'a [Bytes]> {
    if !args.len().is_multiple_of(2) {
        return Err(CommandError::WrongArity(name.into()));
    }
    Ok(args)
}

pub(crate) fn hset<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let pairs = field_pairs(&argv[2..], "hset")?;
    db.hset(&argv[1], pairs).map(Reply::Integer)
}

pub(crate) fn hmset<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let pairs = field_pairs(&argv[2..], "hmset")?;
    db.hset(&argv[1], pairs)?;
    Ok(Reply::OK)
}

pub(crate) fn hsetnx<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.hsetnx(&argv[1], &argv[2], &argv[3]).map(|b| Reply::Integer(b.into()))
}

pub(crate) fn hget<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.hget(&argv[1], &argv[2]).map(Reply::bulk_or_nil)
}

pub(crate) fn hmget<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let values = db.hmget(&argv[1], &argv[2..])?;
    Ok(Reply::Array(values.into_iter().map(Reply::bulk_or_nil).collect()))
}

pub(crate) fn hdel<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.hdel(&argv[1], &argv[2..]).map(Reply::Integer)
}

pub(crate) fn hlen<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.hlen(&argv[1]).map(Reply::Integer)
}

pub(crate) fn hstrlen<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.hget(&argv[1], &argv[2])?.map_or(0, |v| v.len() as i64)))
}

pub(crate) fn hexists<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.hget(&argv[1], &argv[2])?.is_some().into()))
}

pub(crate) fn hkeys<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::bulks(db.hgetall(&argv[1])?.into_iter().map(|(f, _)| f)))
}

pub(crate) fn hvals<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::bulks(db.hgetall(&argv[1])?.into_iter().map(|(_, v)| v)))
}

pub(crate) fn hgetall<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.hgetall(&argv[1]).map(map_reply)
}

pub(crate) fn hincrby<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let delta = int_arg(&argv[3])?;
    db.hincrby(&argv[1], &argv[2], delta).map(Reply::Integer)
}

pub(crate) fn hincrbyfloat<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.hincrbyfloat(&argv[1], &argv[2], &argv[3]).map(Reply::Bulk)
}

pub(crate) fn hrandfield<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    if argv.len() == 2 {
        let picked = db.hrandfield(&argv[1], 1)?;
        return Ok(picked.into_iter().next().map_or(Reply::Nil, |(f, _)| Reply::Bulk(f)));
    }
    let count = random_count_arg(&argv[2])?;
    if argv.len() > 4 || (argv.len() == 4 && !argv[3].eq_ignore_ascii_case(b"withvalues")) {
        return Err(CommandError::Syntax);
    }
    let withvalues = argv.len() == 4;
    check_pairs_count(count, withvalues)?;
    let picked = db.hrandfield(&argv[1], count)?;
    Ok(if withvalues { pairs_reply(picked) } else { Reply::bulks(picked.into_iter().map(|(f, _)| f)) })
}

pub(crate) fn hscan<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let cursor = cursor_arg(&argv[2])?;
    let Some(meta) = db.lookup_of(&argv[1], RedisType::Hash)? else { return Ok(scan_reply(0, Vec::new())) };
    let opts = parse_scan_options(&argv[3..])?;
    let (next, pairs) = db.scan_page(&argv[1], meta.version, cursor, &opts)?;
    Ok(scan_reply(next, pairs.into_iter().flat_map(|(f, v)| [Reply::Bulk(f), Reply::Bulk(v)]).collect()))
}
