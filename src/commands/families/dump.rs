//! DUMP and RESTORE in Redis' own serialization ([`crate::codec::rdb`]), so data moves
//! between this engine and a real Redis (redis-shake, RIOT, `MIGRATE`-style tools).
//!
//! RESTORE writes the key's metadata and all its records in one batch, under a fresh
//! version; replacing a collection only overwrites its metadata (the old records become
//! garbage, O(1) as DEL).

use bytes::Bytes;

use crate::backend::{Direction, KvBackend, WriteBatch};
use crate::codec::rdb::{self, RdbValue};
use crate::codec::{ColumnFamily, Metadata, RedisType, push_back_tail};
use crate::commands::args::int_arg;
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandError, CommandResult, Db, Reply};

/// RESTORE's options after the payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreOptions {
    /// Overwrite an existing key instead of answering BUSYKEY.
    pub replace: bool,
    /// The TTL is an absolute unix time in milliseconds.
    pub absttl: bool,
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

    /// Calls `visit(key, value, expire_ms)` for every live key of the selected database, in
    /// key order, with its value as DUMP carries it; reads one key at a time. Returns how
    /// many keys of a Kvrocks-only type it skipped (they have no RDB form).
    ///
    /// # Errors
    /// Storage errors, and the first error `visit` returns (the walk stops there).
    pub(crate) fn each_rdb_value(
        &self,
        mut visit: impl FnMut(&[u8], RdbValue, u64) -> CommandResult<()>,
    ) -> CommandResult<u64> {
        let (mut skipped, mut failed) = (0, None);
        self.walk_keys(|key, _| {
            let step = match self.rdb_value(key) {
                Ok(Some((value, expire_ms))) => visit(key, value, expire_ms),
                // Expired between the walk's read and this one.
                Ok(None) => Ok(()),
                Err(CommandError::WrongType) => {
                    skipped += 1;
                    Ok(())
                }
                Err(e) => Err(e),
            };
            step.map_err(|e| failed = Some(e)).is_ok()
        })?;
        failed.map_or(Ok(skipped), Err)
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
