//! DUMP and RESTORE in Redis' own serialization ([`crate::codec::rdb`]), so data moves
//! between this engine and a real Redis (redis-shake, RIOT, `MIGRATE`-style tools).
//!
//! RESTORE writes the key's metadata and all its records in one batch, under a fresh
//! version; replacing a collection only overwrites its metadata (the old records become
//! garbage, O(1) as DEL).

use bytes::Bytes;

use crate::backend::{Direction, KvBackend, WriteBatch};
use crate::codec::rdb::{self, RdbValue};
use crate::codec::{ColumnFamily, KeyRange, LayoutKind, Metadata, RedisType, Version, push_back_tail};
use crate::commands::args::int_arg;
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandError, CommandResult, Db, Reply};

/// RESTORE's options after the payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreOptions {
    /// Overwrite an existing key instead of answering BUSYKEY.
    pub(crate) replace: bool,
    /// The TTL is an absolute unix time in milliseconds.
    pub(crate) absttl: bool,
}

impl<B: KvBackend> Db<'_, B> {
    /// The DUMP payload of `key`, `None` when it does not exist. Reads the metadata and
    /// every record of a collection; a bitmap dumps as the equivalent string.
    ///
    /// # Errors
    /// As [`Db::rdb_value`].
    pub(crate) fn dump(&self, key: &[u8]) -> CommandResult<Option<Vec<u8>>> {
        Ok(self.rdb_value(key)?.map(|(value, _)| rdb::dump(&value)))
    }

    /// `key`'s value as DUMP and the RDB file carry it, with its expiry (absolute unix ms,
    /// 0 for none); `None` when it does not exist.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a Kvrocks-only type (bloom filter, JSON…), which
    /// has no RDB form here; storage errors.
    pub(crate) fn rdb_value(&self, key: &[u8]) -> CommandResult<Option<(RdbValue, u64)>> {
        let Some(entry) = self.lookup_stringlike(key)? else {
            return Ok(None);
        };
        let meta = entry.meta;
        let subs = |db: &Self| -> CommandResult<Vec<(Bytes, Bytes)>> {
            db.scan_subkeys(key, meta.version, Direction::Forward)?.collect()
        };
        let value = match meta.ty {
            RedisType::String => RdbValue::String(entry.value),
            RedisType::Hash => RdbValue::Hash(subs(self)?),
            RedisType::Set => RdbValue::Set(subs(self)?.into_iter().map(|(m, _)| m).collect()),
            RedisType::List => RdbValue::List(subs(self)?.into_iter().map(|(_, v)| v).collect()),
            RedisType::ZSet => {
                RdbValue::ZSet(self.scan_members(key, meta.version)?.collect::<CommandResult<_>>()?)
            }
            RedisType::Stream => RdbValue::Stream(Box::new(self.stream_rdb(key, &meta)?)),
            // Kvrocks-only types have no RDB form (a bitmap dumps as its string, above).
            _ => return Err(CommandError::WrongType),
        };
        Ok(Some((value, meta.expire_ms)))
    }

    /// Calls `visit(key, value, expire_ms)` for every live key of the selected database, with
    /// its value as DUMP carries it. Returns how many keys of a Kvrocks-only type it skipped
    /// (they have no RDB form).
    ///
    /// Two ordered scans, no read per key: the metadata records (strings whole, from their
    /// record), then for the layouts whose elements lie under the namespace's prefix
    /// (Kvrocks, NeoKV) the element records, a collection's records together, each checked
    /// against its metadata record (records of a deleted or replaced collection are left
    /// out). The other layouts, streams and bitmaps read each key as DUMP does. Keys go in
    /// no particular order; memory holds one key.
    ///
    /// # Errors
    /// Storage errors, and the first error `visit` returns (the walk stops there).
    pub(crate) fn each_rdb_value(
        &self,
        mut visit: impl FnMut(&[u8], RdbValue, u64) -> CommandResult<()>,
    ) -> CommandResult<u64> {
        let layout = self.layout();
        let grouped = matches!(layout.kind(), LayoutKind::Kvrocks | LayoutKind::NeoKv);
        let range = layout.namespace_range();
        let now = self.now_ms();
        let mut skipped = 0;
        for item in self.backend().scan(ColumnFamily::Metadata, &range, Direction::Forward)? {
            let (k, v) = item?;
            let (Ok(meta), Ok(decoded)) = (layout.decode_metadata(&v), layout.decode_metadata_key(&k)) else {
                continue;
            };
            if !meta.is_live(now) {
                continue;
            }
            let key = decoded.user_key;
            match meta.ty {
                RedisType::String => visit(key, RdbValue::String(slice_of(&v, meta.value)), meta.expire_ms)?,
                RedisType::Hash | RedisType::Set | RedisType::List | RedisType::ZSet if grouped => {}
                _ => match self.rdb_value(key) {
                    Ok(Some((value, expire_ms))) => visit(key, value, expire_ms)?,
                    // Expired between the scan's read and this one.
                    Ok(None) => {}
                    Err(CommandError::WrongType) => skipped += 1,
                    Err(e) => return Err(e),
                },
            }
        }
        if grouped {
            self.each_collection(&range, now, &mut visit)?;
        }
        Ok(skipped)
    }

    /// The hashes, sets, lists and sorted sets of the selected database, from one scan of
    /// the element records in `range` (the namespace's prefix): see [`Db::each_rdb_value`].
    fn each_collection(
        &self,
        range: &KeyRange,
        now: u64,
        visit: &mut impl FnMut(&[u8], RdbValue, u64) -> CommandResult<()>,
    ) -> CommandResult<()> {
        let layout = self.layout();
        // The collection whose records the scan is in, its metadata when it is live at that
        // version, and its records so far.
        let mut current: Option<(Bytes, Version, Option<Metadata<'static>>)> = None;
        let mut records: Vec<(Bytes, Bytes)> = Vec::new();
        let mut emit = |current: Option<(Bytes, Version, Option<Metadata<'static>>)>,
                        records: &mut Vec<(Bytes, Bytes)>|
         -> CommandResult<()> {
            let taken = std::mem::take(records);
            let Some((key, _, Some(meta))) = current else { return Ok(()) };
            let value = match meta.ty {
                RedisType::Hash => RdbValue::Hash(taken),
                RedisType::Set => RdbValue::Set(taken.into_iter().map(|(m, _)| m).collect()),
                RedisType::List => RdbValue::List(taken.into_iter().map(|(_, v)| v).collect()),
                _ => RdbValue::ZSet(
                    taken
                        .into_iter()
                        .map(|(m, score)| Ok((m, layout.decode_member_score(&score)?)))
                        .collect::<crate::Result<_>>()?,
                ),
            };
            visit(&key, value, meta.expire_ms)
        };
        for item in self.backend().scan(ColumnFamily::Subkey, range, Direction::Forward)? {
            let (k, v) = item?;
            // Records of other forms (NeoKV's first strings) are no collection's.
            let Ok(sub) = layout.decode_subkey(&k) else { continue };
            let same = current
                .as_ref()
                .is_some_and(|(key, version, _)| key == sub.user_key && *version == sub.version);
            if !same {
                emit(current.take(), &mut records)?;
                let meta = self.collection_meta(sub.user_key, sub.version, now)?;
                current = Some((Bytes::copy_from_slice(sub.user_key), sub.version, meta));
            }
            if let Some((_, _, Some(meta))) = &current {
                let element = match meta.ty {
                    RedisType::ZSet => layout.decode_member(sub.sub)?,
                    _ => sub.sub,
                };
                records.push((slice_of(&k, element), v));
            }
        }
        emit(current, &mut records)
    }

    /// The metadata of the live hash, set, list or sorted set `key` at `version`; `None` for
    /// anything else (the records of a deleted or replaced collection).
    fn collection_meta(
        &self,
        key: &[u8],
        version: Version,
        now: u64,
    ) -> CommandResult<Option<Metadata<'static>>> {
        let Some(raw) = self.backend().get(ColumnFamily::Metadata, &self.metadata_key(key))? else {
            return Ok(None);
        };
        let Ok(meta) = self.layout().decode_metadata(&raw) else { return Ok(None) };
        let collection =
            matches!(meta.ty, RedisType::Hash | RedisType::Set | RedisType::List | RedisType::ZSet);
        Ok((collection && meta.version == version && meta.is_live(now)).then(|| meta.without_value()))
    }

    /// Creates `key` from a DUMP payload, expiring at `ttl_ms` (0: never; relative to now
    /// unless `opts.absttl`). A TTL already in the past only deletes an existing key (with
    /// `replace`), as Redis does. One batch: the metadata and every record.
    ///
    /// # Errors
    /// In Redis' order: "BUSYKEY Target key name already exists." without `replace`; "ERR
    /// Invalid TTL value, must be >= 0"; "ERR DUMP payload version or checksum are wrong";
    /// "ERR Bad data format"; storage errors.
    pub(crate) fn restore(
        &mut self,
        key: &[u8],
        ttl_ms: i64,
        payload: &[u8],
        opts: RestoreOptions,
    ) -> CommandResult<()> {
        // With REPLACE Redis deletes whatever record is there, expired or not, unlooked.
        let exists = if opts.replace { self.store_target(key, true)? } else { self.lookup(key)?.is_some() };
        if exists && !opts.replace {
            return Err(CommandError::Other("BUSYKEY Target key name already exists.".into()));
        }
        if ttl_ms < 0 {
            return Err(CommandError::err("Invalid TTL value, must be >= 0"));
        }
        let value = rdb::restore(payload).map_err(|e| match e {
            crate::Error::DumpVersionOrChecksum => {
                CommandError::err("DUMP payload version or checksum are wrong")
            }
            _ => CommandError::err("Bad data format"),
        })?;
        let now = i64::try_from(self.now_ms()).unwrap_or(i64::MAX);
        let expire = match ttl_ms {
            0 => 0,
            ttl if opts.absttl => ttl,
            ttl => ttl.saturating_add(now),
        };
        self.restore_value(key, exists, value, expire)
    }

    /// Creates `key` holding `value`, expiring at `expire_ms` (absolute unix ms, 0: never),
    /// as RESTORE does once the payload is read, in one batch; `exists` says whether
    /// the key has a record, which it replaces. An expiry already past only deletes that
    /// record. Loading an RDB file writes each key through this.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn restore_value(
        &mut self,
        key: &[u8],
        exists: bool,
        value: RdbValue,
        expire_ms: i64,
    ) -> CommandResult<()> {
        let now = i64::try_from(self.now_ms()).unwrap_or(i64::MAX);
        let expire = expire_ms;
        let mut batch = WriteBatch::new();
        if expire != 0 && expire <= now {
            if exists {
                self.delete_key(&mut batch, key);
            }
            self.commit(batch)?;
            if exists {
                self.notify(NotifyFlags::GENERIC, "del", key);
            }
            return Ok(());
        }
        self.queue_value(&mut batch, key, value, expire as u64)?;
        self.commit(batch)?;
        self.notify_new_in(self.index(), key);
        self.notify(NotifyFlags::GENERIC, "restore", key);
        Ok(())
    }

    /// Queues `key` as a new key holding `value` (overwriting whatever it held): the
    /// metadata, and for a collection every record under a fresh version. `expire_ms` is
    /// absolute unix milliseconds, 0 for none. RESTORE and SORT … STORE write through this.
    ///
    /// # Errors
    /// Storage errors (a key or list too long for the layout).
    pub(crate) fn queue_value(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        value: RdbValue,
        expire_ms: u64,
    ) -> CommandResult<()> {
        let value = match value {
            RdbValue::Stream(s) => return self.queue_stream(batch, key, &s, expire_ms),
            value => value,
        };
        let ty = match &value {
            RdbValue::String(s) => {
                self.put_metadata(batch, key, &Metadata::string(s, expire_ms));
                return Ok(());
            }
            RdbValue::Hash(_) => RedisType::Hash,
            RdbValue::Set(_) => RedisType::Set,
            RdbValue::List(_) => RedisType::List,
            RdbValue::ZSet(_) => RedisType::ZSet,
            RdbValue::Stream(_) => unreachable!("returned above"),
        };
        // Not blind-write even in blind-write mode: the size is known.
        let mut meta = Metadata { expire_ms, ..Metadata::collection(ty, self.new_version()) };
        let version = meta.version;
        match value {
            RdbValue::String(_) | RdbValue::Stream(_) => unreachable!("returned above"),
            RdbValue::Hash(pairs) => {
                meta.size = pairs.len() as u64;
                for (field, value) in pairs {
                    batch.put(ColumnFamily::Subkey, self.subkey(key, version, &field)?, value);
                }
            }
            RdbValue::Set(members) => {
                meta.size = members.len() as u64;
                for member in members {
                    batch.put(
                        ColumnFamily::Subkey,
                        self.subkey(key, version, &member)?,
                        self.layout().set_member_value(&member),
                    );
                }
            }
            RdbValue::List(items) => {
                for item in items {
                    let index = meta.tail;
                    meta.tail = push_back_tail(meta.tail)?;
                    batch.put(
                        ColumnFamily::Subkey,
                        self.subkey(key, version, &self.layout().list_sub(index))?,
                        item,
                    );
                }
                meta.size = meta.tail - meta.head;
            }
            RdbValue::ZSet(pairs) => {
                meta.size = pairs.len() as u64;
                for (member, score) in pairs {
                    // -0 is stored as 0 (the ordered encoding keeps one zero).
                    let score = if score == 0.0 { 0.0 } else { score };
                    self.put_member_records(batch, key, version, &member, score)?;
                }
            }
        }
        self.put_metadata(batch, key, &meta);
        Ok(())
    }
}

pub(crate) fn dump_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(db.dump(&argv[1])?.map_or(Reply::Nil, |p| Reply::Bulk(Bytes::from(p))))
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]`. The options are
/// checked first, as Redis does; IDLETIME sets the key's last-use time (OBJECT IDLETIME)
/// and FREQ its access counter (OBJECT FREQ), each only under the policy that keeps it (LRU
/// times, LFU counters), as Redis; naming both is a syntax error.
pub(crate) fn restore_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let mut opts = RestoreOptions::default();
    let (mut idle, mut freq) = (None, None);
    let mut j = 4;
    while j < argv.len() {
        let has_value = j + 1 < argv.len();
        match argv[j].to_ascii_lowercase().as_slice() {
            b"replace" => opts.replace = true,
            b"absttl" => opts.absttl = true,
            b"idletime" if has_value && freq.is_none() => {
                let secs = int_arg(&argv[j + 1])?;
                if secs < 0 {
                    return Err(CommandError::err("Invalid IDLETIME value, must be >= 0"));
                }
                idle = Some(secs as u64);
                j += 1;
            }
            b"freq" if has_value && idle.is_none() => {
                let counter = int_arg(&argv[j + 1])?;
                if !(0..=255).contains(&counter) {
                    return Err(CommandError::err("Invalid FREQ value, must be >= 0 and <= 255"));
                }
                freq = Some(counter as u8);
                j += 1;
            }
            _ => return Err(CommandError::Syntax),
        }
        j += 1;
    }
    if !opts.replace && db.lookup(&argv[1])?.is_some() {
        return Err(CommandError::Other("BUSYKEY Target key name already exists.".into()));
    }
    let ttl = int_arg(&argv[2])?;
    db.restore(&argv[1], ttl, &argv[3], opts)?;
    match (db.lfu(), idle, freq) {
        (false, Some(secs), _) => db.set_idle_secs(&argv[1], secs),
        (true, _, Some(counter)) => db.set_freq(&argv[1], counter),
        // A new object's counter, even over a key it replaced.
        (true, _, None) => db.set_freq(&argv[1], crate::commands::access::LFU_INIT),
        _ => {}
    }
    Ok(Reply::OK)
}

/// `part` of `record` as its own [`Bytes`]: shared when it lies in the record, else copied.
fn slice_of(record: &Bytes, part: &[u8]) -> Bytes {
    let (start, end) = (record.as_ptr() as usize, record.as_ptr() as usize + record.len());
    let at = part.as_ptr() as usize;
    if !part.is_empty() && at >= start && at + part.len() <= end {
        record.slice_ref(part)
    } else {
        Bytes::copy_from_slice(part)
    }
}
