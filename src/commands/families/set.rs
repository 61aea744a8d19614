//! The set commands: SADD, SREM, SCARD, SISMEMBER, SMISMEMBER, SMEMBERS, SPOP, SRANDMEMBER,
//! SMOVE, SINTER, SINTERCARD, SINTERSTORE, SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE and SSCAN.
//!
//! A set is one metadata record (version, size) plus one Subkey-CF record per member with an
//! empty value. The size is exact, so SCARD is one metadata read; SMEMBERS is one range
//! scan; SINTER walks the smallest set and probes the others with point reads.
//!
//! # Blind-write sets
//! When [`Db::blind_write`] is on, new sets are created with `blind_write` set (docs/layout.md,
//! extensions). For such a set:
//! - SADD skips reading the members and replies with the number of members given (inexact:
//!   members already present count as added);
//! - SREM skips the reads and replies with the number of members given (inexact);
//! - SCARD counts by scanning (O(n)), and so do SPOP/SRANDMEMBER to learn the size;
//! - the set exists while its metadata record exists, even when SREM/SPOP/SMOVE removed every
//!   member (SCARD then says 0, but EXISTS says 1 and TYPE says set).
//!
//! SMOVE reads the member in both sets (its reply depends on it) and is exact.
//! The *STORE commands create their destination blind-write when the mode is on.

use std::collections::HashSet;

use bytes::Bytes;

use crate::backend::{ColumnFamily, Direction, KvBackend, WriteBatch};
use crate::codec::{Metadata, RedisType, Version};
use crate::commands::args::{Distinct, cursor_arg, random_count_arg};
use crate::commands::notify::NotifyFlags;
use crate::commands::subkeys::{Pick, parse_scan_options, scan_reply};
use crate::commands::{CommandError, CommandResult, Db, Reply};

impl<B: KvBackend> Db<'_, B> {
    /// SADD: adds the members; returns how many were new. Reads the metadata and the members
    /// (one `multi_get`), writes the new members and the metadata in one batch. A blind-write
    /// set skips the member reads and returns `members.len()`.
    ///
    /// # Errors
    /// WRONGTYPE for a non-set key; storage errors.
    pub(crate) fn sadd(&mut self, key: &[u8], members: &[Bytes]) -> CommandResult<i64> {
        let existed = self.lookup_of(key, RedisType::Set)?;
        let found = existed.is_some();
        let mut meta = existed.unwrap_or_else(|| self.new_collection(RedisType::Set));
        if meta.blind_write {
            let mut batch = WriteBatch::new();
            for m in members {
                batch.put(
                    ColumnFamily::Subkey,
                    self.subkey(key, meta.version, m)?,
                    self.layout().set_member_value(m),
                );
            }
            if !found {
                self.put_metadata(&mut batch, key, &meta);
            }
            self.commit(batch)?;
            self.notify(NotifyFlags::SET, "sadd", key);
            return Ok(members.len() as i64);
        }
        // Nothing allocated for the batch until a member is new.
        let mut batch = WriteBatch::default();
        let added = if let [member] = members {
            // One member (the common case): its subkey and one read, no lists of members,
            // subkeys or answers.
            let subkey = self.subkey(key, meta.version, member)?;
            let mut present = false;
            if found {
                self.backend()
                    .get_with(ColumnFamily::Subkey, &subkey, &mut |value| present = value.is_some())?;
            }
            if !present {
                batch = WriteBatch::new();
                batch.put(ColumnFamily::Subkey, subkey, self.layout().set_member_value(member));
            }
            u64::from(!present)
        } else {
            let unique = Distinct::of(members.iter().map(Bytes::as_ref));
            let (subkeys, present) = if found {
                self.read_subkeys(key, meta.version, unique.items())?
            } else {
                let subkeys = unique.items().map(|m| self.subkey(key, meta.version, m));
                (subkeys.collect::<CommandResult<Vec<_>>>()?, vec![false; unique.items().len()])
            };
            let mut added = 0;
            for ((m, subkey), present) in unique.items().zip(subkeys).zip(present) {
                if !present {
                    added += 1;
                    batch.put(ColumnFamily::Subkey, subkey, self.layout().set_member_value(m));
                }
            }
            added
        };
        if added > 0 {
            meta.size += added;
            self.put_collection(&mut batch, key, &meta);
        }
        self.commit(batch)?;
        if added > 0 {
            self.notify(NotifyFlags::SET, "sadd", key);
        }
        Ok(added as i64)
    }

    /// SREM: removes the members; returns how many were present (blind-write: how many were
    /// given). Deletes the set when it becomes empty.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn srem(&mut self, key: &[u8], members: &[Bytes]) -> CommandResult<i64> {
        let Some(mut meta) = self.lookup_of(key, RedisType::Set)? else { return Ok(0) };
        let removed = self.remove_subkeys(key, &mut meta, members)?;
        if removed > 0 {
            self.notify_edit(NotifyFlags::SET, "srem", key, &meta);
        }
        Ok(removed)
    }

    /// SCARD: one metadata read (a blind-write set is counted by a scan).
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn scard(&self, key: &[u8]) -> CommandResult<i64> {
        match self.lookup_of(key, RedisType::Set)? {
            None => Ok(0),
            Some(meta) => Ok(self.collection_len(key, &meta)? as i64),
        }
    }

    /// SMISMEMBER (and SISMEMBER): the metadata and one `multi_get` of the members.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn smismember(&self, key: &[u8], members: &[Bytes]) -> CommandResult<Vec<bool>> {
        match self.lookup_of(key, RedisType::Set)? {
            None => Ok(vec![false; members.len()]),
            Some(meta) => {
                let subs = members.iter().map(Bytes::as_ref);
                Ok(self.get_subkeys(key, meta.version, subs)?.iter().map(Option::is_some).collect())
            }
        }
    }

    /// SMEMBERS: every member in byte order; one range scan.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn smembers(&self, key: &[u8]) -> CommandResult<Vec<Bytes>> {
        match self.lookup_of(key, RedisType::Set)? {
            None => Ok(Vec::new()),
            Some(meta) => Ok(self.all_subkeys(key, meta.version)?.into_iter().map(|(m, _)| m).collect()),
        }
    }

    /// SPOP: removes and returns up to `count` distinct random members (the whole set, then
    /// deleted, when `count >= size`). Sampling cost as SRANDMEMBER; the removal is one batch.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn spop(&mut self, key: &[u8], count: u64) -> CommandResult<Vec<Bytes>> {
        let Some(mut meta) = self.lookup_of(key, RedisType::Set)? else { return Ok(Vec::new()) };
        if count == 0 {
            return Ok(Vec::new());
        }
        let picked = self.sample_subkeys(key, &meta, Pick::Distinct(count))?;
        let mut batch = WriteBatch::new();
        for (m, _) in &picked {
            batch.delete(ColumnFamily::Subkey, self.subkey(key, meta.version, m)?);
        }
        if !meta.blind_write && !picked.is_empty() {
            meta.size = meta.size.saturating_sub(picked.len() as u64);
            self.put_collection(&mut batch, key, &meta);
        }
        self.commit(batch)?;
        if !picked.is_empty() {
            self.notify_edit(NotifyFlags::SET, "spop", key, &meta);
        }
        Ok(picked.into_iter().map(|(m, _)| m).collect())
    }

    /// SRANDMEMBER with a count: `count >= 0` gives up to `count` distinct members,
    /// `count < 0` gives `-count` members with repeats. Never reads the whole set for a small
    /// count: random positions walked by one scan up to the largest position (sets up to 512
    /// members, or a count of at least a quarter of the size), else one seek per pick
    /// (approximately uniform).
    ///
    /// # Errors
    /// WRONGTYPE; "ERR value is out of range" for `count < -2^26` (a deviation: Redis would
    /// try to build the reply); storage errors.
    pub(crate) fn srandmember(&mut self, key: &[u8], count: i64) -> CommandResult<Vec<Bytes>> {
        let Some(meta) = self.lookup_of(key, RedisType::Set)? else { return Ok(Vec::new()) };
        let pick = if count >= 0 { Pick::Distinct(count as u64) } else { Pick::Repeat(count.unsigned_abs()) };
        Ok(self.sample_subkeys(key, &meta, pick)?.into_iter().map(|(m, _)| m).collect())
    }

    /// SMOVE: moves `member` from `src` to `dst`; returns whether `src` held it. `src == dst`
    /// only checks membership. Reads both metadata records and the member in both sets; one
    /// batch removes it from `src` (deleting `src` when emptied) and adds it to `dst`.
    ///
    /// # Errors
    /// WRONGTYPE when either key holds another type (none when `src` is missing, as Redis);
    /// storage errors.
    pub(crate) fn smove(&mut self, src: &[u8], dst: &[u8], member: &[u8]) -> CommandResult<bool> {
        // Redis looks both keys up before anything else (an expired one is reported).
        let (sentry, dentry) = (self.lookup(src)?, self.lookup(dst)?);
        let Some(sentry) = sentry else { return Ok(false) };
        let set_meta = |e: Option<crate::commands::Entry>| match e {
            Some(e) if e.meta.ty != RedisType::Set => Err(CommandError::WrongType),
            e => Ok(e.map(|e| e.meta)),
        };
        let mut smeta = set_meta(Some(sentry))?.expect("src is live");
        let dexisting = set_meta(dentry)?;
        if self.get_subkey(src, smeta.version, member)?.is_none() {
            return Ok(false);
        }
        if src == dst {
            return Ok(true);
        }
        let mut batch = WriteBatch::new();
        batch.delete(ColumnFamily::Subkey, self.subkey(src, smeta.version, member)?);
        if !smeta.blind_write {
            smeta.size -= 1;
            self.put_collection(&mut batch, src, &smeta);
        }
        let dfound = dexisting.is_some();
        let mut dmeta = dexisting.unwrap_or_else(|| self.new_collection(RedisType::Set));
        let present = dfound && self.get_subkey(dst, dmeta.version, member)?.is_some();
        if !present {
            batch.put(
                ColumnFamily::Subkey,
                self.subkey(dst, dmeta.version, member)?,
                self.layout().set_member_value(member),
            );
            if !dmeta.blind_write {
                dmeta.size += 1;
            }
            if !dfound || !dmeta.blind_write {
                self.put_collection(&mut batch, dst, &dmeta);
            }
        }
        self.commit(batch)?;
        self.notify_edit(NotifyFlags::SET, "srem", src, &smeta);
        if !present {
            self.notify(NotifyFlags::SET, "sadd", dst);
        }
        Ok(true)
    }

    /// The metadata of each key, type-checked (all of them, as Redis 7.0 does).
    fn set_metas(&self, keys: &[Bytes]) -> CommandResult<Vec<Option<Metadata<'static>>>> {
        keys.iter().map(|k| self.lookup_of(k, RedisType::Set)).collect()
    }

    /// SINTER (limit 0) and SINTERCARD: the members common to all sets. Walks the smallest
    /// set (sizes from metadata; a blind-write set counts as largest) and probes its members
    /// in the others with `multi_get` (128 members per call); stops after `limit` members when `limit > 0`.
    /// A missing key gives an empty result.
    ///
    /// # Errors
    /// WRONGTYPE when any key holds another type; storage errors.
    pub(crate) fn sinter(&self, keys: &[Bytes], limit: usize) -> CommandResult<Vec<Bytes>> {
        let metas = self.set_metas(keys)?;
        let Some(metas) = metas.into_iter().collect::<Option<Vec<_>>>() else { return Ok(Vec::new()) };
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by_key(|&i| if metas[i].blind_write { u64::MAX } else { metas[i].size });
        let (first, others) = order.split_first().expect("at least one key");
        let probe: Vec<(&[u8], Version)> = others
            .iter()
            .filter(|&&i| keys[i] != keys[*first])
            .map(|&i| (keys[i].as_ref(), metas[i].version))
            .collect();
        self.filter_members(&keys[*first], metas[*first].version, &probe, true, limit)
    }

    /// Walks the members of `key` and keeps those present in every `probe` set (`want_all`)
    /// or in none of them (`!want_all`), probing 128 members at a time with one `multi_get`
    /// over all probe sets; stops once `limit` members are kept (0: no limit).
    fn filter_members(
        &self,
        key: &[u8],
        version: Version,
        probe: &[(&[u8], Version)],
        want_all: bool,
        limit: usize,
    ) -> CommandResult<Vec<Bytes>> {
        const CHUNK: usize = 128;
        let mut out = Vec::new();
        let mut iter = self.scan_subkeys(key, version, Direction::Forward)?;
        loop {
            let mut chunk = Vec::with_capacity(CHUNK);
            for item in iter.by_ref().take(CHUNK) {
                chunk.push(item?.0);
            }
            if chunk.is_empty() {
                return Ok(out);
            }
            let keep: Vec<bool> =
                if probe.is_empty() {
                    vec![true; chunk.len()]
                } else {
                    let mut probe_keys = Vec::with_capacity(chunk.len() * probe.len());
                    for m in &chunk {
                        for (k, v) in probe {
                            probe_keys.push(self.subkey(k, *v, m)?);
                        }
                    }
                    let refs: Vec<&[u8]> = probe_keys.iter().map(Vec::as_slice).collect();
                    let found = self.backend().multi_get(ColumnFamily::Subkey, &refs)?;
                    found
                        .chunks(probe.len())
                        .map(|c| {
                            if want_all {
                                c.iter().all(Option::is_some)
                            } else {
                                c.iter().all(Option::is_none)
                            }
                        })
                        .collect()
                };
            for (m, k) in chunk.into_iter().zip(keep) {
                if k {
                    out.push(m);
                    if limit > 0 && out.len() >= limit {
                        return Ok(out);
                    }
                }
            }
        }
    }

    /// SUNION: every member of any set, each once (in the order the scans meet them). One
    /// range scan per set.
    ///
    /// # Errors
    /// WRONGTYPE when any key holds another type; storage errors.
    pub(crate) fn sunion(&self, keys: &[Bytes]) -> CommandResult<Vec<Bytes>> {
        let metas = self.set_metas(keys)?;
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (key, meta) in keys.iter().zip(&metas) {
            let Some(meta) = meta else { continue };
            for item in self.scan_subkeys(key, meta.version, Direction::Forward)? {
                let (m, _) = item?;
                if seen.insert(m.clone()) {
                    out.push(m);
                }
            }
        }
        Ok(out)
    }

    /// SDIFF: the members of the first set in none of the others. Walks the first set and
    /// probes the other existing sets with `multi_get` (128 members per call).
    ///
    /// # Errors
    /// WRONGTYPE when any key holds another type; storage errors.
    pub(crate) fn sdiff(&self, keys: &[Bytes]) -> CommandResult<Vec<Bytes>> {
        let metas = self.set_metas(keys)?;
        let Some(first) = &metas[0] else { return Ok(Vec::new()) };
        if keys[1..].iter().any(|k| k == &keys[0]) {
            return Ok(Vec::new());
        }
        let probe: Vec<(&[u8], Version)> = keys
            .iter()
            .zip(&metas)
            .skip(1)
            .filter_map(|(k, m)| m.as_ref().map(|m| (k.as_ref(), m.version)))
            .collect();
        self.filter_members(&keys[0], first.version, &probe, false, 0)
    }

    /// Stores `members` as set `dst` (replacing it), recording the event `name` (`sinterstore`, `sunionstore`,
    /// `sdiffstore`).
    fn store_set_as(&mut self, dst: &[u8], members: &[Bytes], name: &'static str) -> CommandResult<i64> {
        let existed = self.store_target(dst, members.is_empty())?;
        let mut batch = WriteBatch::new();
        if members.is_empty() {
            self.delete_key(&mut batch, dst);
        } else {
            let mut meta = self.new_collection(RedisType::Set);
            meta.size = members.len() as u64;
            for m in members {
                batch.put(
                    ColumnFamily::Subkey,
                    self.subkey(dst, meta.version, m)?,
                    self.layout().set_member_value(m),
                );
            }
            self.put_metadata(&mut batch, dst, &meta);
        }
        self.commit(batch)?;
        self.notify_store(NotifyFlags::SET, name, dst, members.is_empty(), existed);
        Ok(members.len() as i64)
    }
}

pub(crate) fn sadd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.sadd(&argv[1], &argv[2..]).map(Reply::Integer)
}

pub(crate) fn srem<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.srem(&argv[1], &argv[2..]).map(Reply::Integer)
}

pub(crate) fn scard<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.scard(&argv[1]).map(Reply::Integer)
}

pub(crate) fn sismember<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.smismember(&argv[1], &argv[2..3])?[0].into()))
}

pub(crate) fn smismember<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let found = db.smismember(&argv[1], &argv[2..])?;
    Ok(Reply::Array(found.into_iter().map(|b| Reply::Integer(b.into())).collect()))
}

/// SMEMBERS, SINTER, SUNION, SDIFF, SPOP with a count: a RESP3 set (an array in RESP2).
fn set_reply(members: Vec<Bytes>) -> Reply {
    Reply::Set(members.into_iter().map(Reply::Bulk).collect())
}

pub(crate) fn smembers<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(set_reply(db.smembers(&argv[1])?))
}

pub(crate) fn spop<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    match argv.len() {
        2 => Ok(db.spop(&argv[1], 1)?.into_iter().next().map_or(Reply::Nil, Reply::Bulk)),
        3 => {
            let count = crate::commands::args::parse_i64(&argv[2])
                .filter(|n| *n >= 0)
                .ok_or_else(|| CommandError::err("value is out of range, must be positive"))?;
            Ok(set_reply(db.spop(&argv[1], count as u64)?))
        }
        _ => Err(CommandError::Syntax),
    }
}

pub(crate) fn srandmember<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    match argv.len() {
        2 => Ok(db.srandmember(&argv[1], 1)?.into_iter().next().map_or(Reply::Nil, Reply::Bulk)),
        3 => {
            let count = random_count_arg(&argv[2])?;
            Ok(Reply::bulks(db.srandmember(&argv[1], count)?))
        }
        _ => Err(CommandError::Syntax),
    }
}

pub(crate) fn smove<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.smove(&argv[1], &argv[2], &argv[3])?.into()))
}

pub(crate) fn sinter<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(set_reply(db.sinter(&argv[1..], 0)?))
}

pub(crate) fn sintercard<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let numkeys = crate::commands::args::parse_i64(&argv[1])
        .filter(|n| *n > 0)
        .ok_or_else(|| CommandError::err("numkeys should be greater than 0"))?;
    if numkeys > (argv.len() - 2) as i64 {
        return Err(CommandError::err("Number of keys can't be greater than number of args"));
    }
    let numkeys = numkeys as usize;
    let keys = &argv[2..2 + numkeys];
    let mut limit = 0usize;
    let mut i = 2 + numkeys;
    while i < argv.len() {
        if argv[i].eq_ignore_ascii_case(b"limit") && i + 1 < argv.len() {
            let n = crate::commands::args::parse_i64(&argv[i + 1])
                .filter(|n| *n >= 0)
                .ok_or_else(|| CommandError::err("LIMIT can't be negative"))?;
            limit = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return Err(CommandError::Syntax);
        }
    }
    Ok(Reply::Integer(db.sinter(keys, limit)?.len() as i64))
}

pub(crate) fn sinterstore<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let members = db.sinter(&argv[2..], 0)?;
    db.store_set_as(&argv[1], &members, "sinterstore").map(Reply::Integer)
}

pub(crate) fn sunion<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(set_reply(db.sunion(&argv[1..])?))
}

pub(crate) fn sunionstore<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let members = db.sunion(&argv[2..])?;
    db.store_set_as(&argv[1], &members, "sunionstore").map(Reply::Integer)
}

pub(crate) fn sdiff<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(set_reply(db.sdiff(&argv[1..])?))
}

pub(crate) fn sdiffstore<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let members = db.sdiff(&argv[2..])?;
    db.store_set_as(&argv[1], &members, "sdiffstore").map(Reply::Integer)
}

pub(crate) fn sscan<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let cursor = cursor_arg(&argv[2])?;
    let Some(meta) = db.lookup_of(&argv[1], RedisType::Set)? else { return Ok(scan_reply(0, Vec::new())) };
    let opts = parse_scan_options(&argv[3..])?;
    let (next, items) = db.scan_page(&argv[1], meta.version, cursor, &opts)?;
    Ok(scan_reply(next, items.into_iter().map(|(m, _)| Reply::Bulk(m)).collect()))
}
