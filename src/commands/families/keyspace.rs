//! Commands on keys of any type, and the connection commands.
//!
//! Expiry, rename, copy, scan and flush all work on the Metadata CF: expiring, renaming
//! away, overwriting or flushing a collection only rewrites or deletes its metadata record
//! (O(1)); the subkeys of the old incarnation become garbage for [`crate::gc`].

use bytes::Bytes;

use crate::backend::{Direction, KvBackend, WriteBatch};
use crate::codec::{ColumnFamily, KeyLayout, KeyRange, LayoutKind, Metadata, RedisType, key_slot};
use crate::commands::args::{Distinct, Glob, cursor_arg, int_arg};
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandError, CommandResult, DATABASES, Db, Entry, Reply};

/// The NX / XX / GT / LT conditions of the EXPIRE family.
///
/// A key without expiry counts as having an infinite TTL: GT never succeeds on it and LT
/// always does (Redis 7.0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpireCondition {
    /// Set only when the key has no expiry.
    pub(crate) nx: bool,
    /// Set only when the key has an expiry.
    pub(crate) xx: bool,
    /// Set only when the new expiry is later than the current one.
    pub(crate) gt: bool,
    /// Set only when the new expiry is earlier than the current one.
    pub(crate) lt: bool,
}

impl ExpireCondition {
    /// Parses the option words after the time argument, as Redis 7.0 does.
    ///
    /// # Errors
    /// "ERR Unsupported option X", "ERR NX and XX, GT or LT options at the same time are not
    /// compatible", "ERR GT and LT options at the same time are not compatible".
    pub(crate) fn parse(options: &[Bytes]) -> CommandResult<Self> {
        let mut c = ExpireCondition::default();
        for opt in options {
            match opt.to_ascii_lowercase().as_slice() {
                b"nx" => c.nx = true,
                b"xx" => c.xx = true,
                b"gt" => c.gt = true,
                b"lt" => c.lt = true,
                _ => {
                    return Err(CommandError::err(format_args!(
                        "Unsupported option {}",
                        String::from_utf8_lossy(opt)
                    )));
                }
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(CommandError::err("NX and XX, GT or LT options at the same time are not compatible"));
        }
        if c.gt && c.lt {
            return Err(CommandError::err("GT and LT options at the same time are not compatible"));
        }
        Ok(c)
    }

    /// Whether a key whose current expiry is `current` (None: persistent) may get `when`.
    fn allows(&self, current: Option<i64>, when: i64) -> bool {
        if self.nx && current.is_some() {
            return false;
        }
        if self.xx && current.is_none() {
            return false;
        }
        if self.gt && current.is_none_or(|cur| when <= cur) {
            return false;
        }
        if self.lt && current.is_some_and(|cur| when >= cur) {
            return false;
        }
        true
    }
}

/// The metadata record of `entry` with another expiry (strings keep their value).
fn with_expire(entry: &Entry, expire_ms: u64) -> Metadata<'_> {
    Metadata { expire_ms, value: &entry.value, ..entry.meta.clone() }
}

/// The expiry of a live entry as Redis' signed milliseconds, `None` when persistent.
fn expiry_of(entry: &Entry) -> Option<i64> {
    (entry.meta.expire_ms != 0).then(|| i64::try_from(entry.meta.expire_ms).unwrap_or(i64::MAX))
}

impl<B: KvBackend> Db<'_, B> {
    /// Deletes keys, O(1) each (metadata only); returns how many existed.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn del(&mut self, keys: &[Bytes]) -> CommandResult<i64> {
        let mut batch = WriteBatch::new();
        let mut removed = 0;
        let mut seen = Distinct::with_capacity(keys.len());
        let mut freed = Vec::new();
        for key in keys {
            if !seen.insert(key) {
                continue;
            }
            if let Some(entry) = self.lookup(key)? {
                removed += 1;
                self.delete_key(&mut batch, key);
                freed.push(entry.meta);
                // In key order with the `expired` of keys found expired (settled by commit).
                self.notify(NotifyFlags::GENERIC, "del", key);
            }
        }
        self.commit(batch)?;
        for meta in &freed {
            self.count_deferred_free(meta);
        }
        Ok(removed)
    }

    /// Makes `key` expire at `when_ms` (unix milliseconds) if `cond` allows; a time at or
    /// before now deletes the key. Reads and rewrites (or deletes) the metadata record only.
    /// Returns whether the key existed and the condition held.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn expire_at_ms(
        &mut self,
        key: &[u8],
        when_ms: i64,
        cond: ExpireCondition,
    ) -> CommandResult<bool> {
        let Some(entry) = self.lookup(key)? else {
            return Ok(false);
        };
        if !cond.allows(expiry_of(&entry), when_ms) {
            return Ok(false);
        }
        let mut batch = WriteBatch::new();
        let event = if when_ms <= i64::try_from(self.now_ms()).unwrap_or(i64::MAX) {
            self.delete_key(&mut batch, key);
            "del"
        } else {
            self.put_metadata(&mut batch, key, &with_expire(&entry, when_ms as u64));
            "expire"
        };
        self.commit(batch)?;
        self.notify(NotifyFlags::GENERIC, event, key);
        Ok(true)
    }

    /// The absolute expiry of `key` in unix milliseconds: -2 when missing, -1 when it has
    /// none. Reads the metadata record.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn pexpiretime(&self, key: &[u8]) -> CommandResult<i64> {
        Ok(match self.lookup(key)? {
            None => -2,
            Some(entry) => expiry_of(&entry).unwrap_or(-1),
        })
    }

    /// The remaining time to live of `key` in milliseconds: -2 when missing, -1 when it
    /// has no expiry. Reads the metadata record.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn pttl(&self, key: &[u8]) -> CommandResult<i64> {
        let at = self.pexpiretime(key)?;
        if at < 0 {
            return Ok(at);
        }
        let now = i64::try_from(self.now_ms()).unwrap_or(i64::MAX);
        Ok(at.saturating_sub(now).max(0))
    }

    /// Removes the expiry of `key`; returns whether it had one. Rewrites the metadata record.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn persist(&mut self, key: &[u8]) -> CommandResult<bool> {
        let Some(entry) = self.lookup(key)? else {
            return Ok(false);
        };
        if entry.meta.expire_ms == 0 {
            return Ok(false);
        }
        let mut batch = WriteBatch::new();
        self.put_metadata(&mut batch, key, &with_expire(&entry, 0));
        self.commit(batch)?;
        self.notify(NotifyFlags::GENERIC, "persist", key);
        Ok(true)
    }

    /// Queues a copy of the live key `entry` (named `src` in the selected database) as
    /// `dst` in `dst_layout`: strings copy their metadata; collections get a fresh version
    /// and a copy of every subkey (and, for sorted sets, every score key), sub bytes
    /// unchanged.
    fn queue_copy(
        &self,
        batch: &mut WriteBatch,
        entry: &Entry,
        src: &[u8],
        dst_layout: &KeyLayout,
        dst: &[u8],
    ) -> CommandResult<()> {
        let mut meta = Metadata { value: &entry.value, ..entry.meta.clone() };
        if meta.ty.is_collection() {
            let version = self.new_version();
            let cfs: &[ColumnFamily] = match meta.ty {
                RedisType::ZSet => &[ColumnFamily::Subkey, ColumnFamily::Score],
                RedisType::Stream => &[ColumnFamily::Stream],
                _ => &[ColumnFamily::Subkey],
            };
            for &cf in cfs {
                // Score keys have a prefix of their own in camellia's layout.
                let (src_prefix, dst_prefix) = if cf == ColumnFamily::Score {
                    (
                        self.layout().score_prefix(src, meta.version, 0)?,
                        dst_layout.score_prefix(dst, version, 0)?,
                    )
                } else {
                    (
                        self.layout().subkey_prefix(src, meta.version, 0)?,
                        dst_layout.subkey_prefix(dst, version, 0)?,
                    )
                };
                let src_prefix_len = src_prefix.len();
                let range = KeyRange::prefix(src_prefix);
                for item in self.backend().scan(cf, &range, Direction::Forward)? {
                    let (k, v) = item?;
                    let mut new_key = Vec::with_capacity(dst_prefix.len() + k.len() - src_prefix_len);
                    new_key.extend_from_slice(&dst_prefix);
                    new_key.extend_from_slice(&k[src_prefix_len..]);
                    batch.put(cf, new_key, v);
                }
            }
            meta.version = version;
        }
        self.put_metadata_in(dst_layout, batch, dst_layout.metadata_key(dst), &meta);
        Ok(())
    }

    /// Renames `src` to `dst`, keeping the expiry; with `nx`, only when `dst` does not
    /// exist. A collection's records are copied under a fresh version and the old
    /// incarnation is dropped by deleting its metadata, all in one batch. Returns whether
    /// the rename happened (renaming a key onto itself succeeds without writing, or returns
    /// false with `nx`).
    ///
    /// # Errors
    /// [`CommandError::NoSuchKey`] when `src` does not exist; storage errors.
    pub(crate) fn rename(&mut self, src: &[u8], dst: &[u8], nx: bool) -> CommandResult<bool> {
        let Some(entry) = self.lookup(src)? else {
            return Err(CommandError::NoSuchKey);
        };
        if src == dst {
            return Ok(!nx);
        }
        // Redis looks `dst` up even without NX (an expired one is reported expired).
        if self.lookup(dst)?.is_some() && nx {
            return Ok(false);
        }
        let mut batch = WriteBatch::new();
        let layout = self.layout().clone();
        self.queue_copy(&mut batch, &entry, src, &layout, dst)?;
        self.delete_key(&mut batch, src);
        self.commit(batch)?;
        self.notify_new_in(self.index(), dst);
        self.notify(NotifyFlags::GENERIC, "rename_from", src);
        self.notify(NotifyFlags::GENERIC, "rename_to", dst);
        Ok(true)
    }

    /// Copies `src` to `dst` in database `db` (the selected one when `None`), keeping the
    /// expiry; an existing `dst` is overwritten only with `replace`. Returns whether the
    /// copy happened (false when `src` is missing or `dst` exists without `replace`).
    ///
    /// # Errors
    /// "ERR DB index is out of range", "ERR source and destination objects are the same";
    /// storage errors.
    pub(crate) fn copy(
        &mut self,
        src: &[u8],
        dst: &[u8],
        db: Option<usize>,
        replace: bool,
    ) -> CommandResult<bool> {
        let dst_index = db.unwrap_or(self.index());
        if dst_index >= DATABASES {
            return Err(CommandError::err("DB index is out of range"));
        }
        if dst_index == self.index() && src == dst {
            return Err(CommandError::err("source and destination objects are the same"));
        }
        let dst_layout = self.layout_of(dst_index)?;
        let Some(entry) = self.lookup(src)? else {
            return Ok(false);
        };
        // Redis looks `dst` up even with REPLACE (an expired one is reported expired).
        if self.lookup_in(&dst_layout, dst)?.is_some() && !replace {
            return Ok(false);
        }
        let mut batch = WriteBatch::new();
        self.queue_copy(&mut batch, &entry, src, &dst_layout, dst)?;
        self.commit(batch)?;
        self.notify_new_in(dst_index, dst);
        self.notify_in(dst_index, NotifyFlags::GENERIC, "copy_to", dst);
        Ok(true)
    }

    /// MOVE: moves `key` to database `db` with its TTL, as one batch (its records are
    /// copied under the other database's namespace, O(size), and its metadata deleted).
    /// Returns false when `key` is missing or `db` already holds it.
    ///
    /// # Errors
    /// "ERR DB index is out of range" past [`DATABASES`]; "ERR source and destination
    /// objects are the same" for the selected database; storage errors.
    pub(crate) fn move_key(&mut self, key: &[u8], db: usize) -> CommandResult<bool> {
        if db >= DATABASES {
            return Err(CommandError::err("DB index is out of range"));
        }
        if db == self.index() {
            return Err(CommandError::err("source and destination objects are the same"));
        }
        let dst_layout = self.layout_of(db)?;
        let Some(entry) = self.lookup(key)? else {
            return Ok(false);
        };
        if self.lookup_in(&dst_layout, key)?.is_some() {
            return Ok(false);
        }
        let mut batch = WriteBatch::new();
        self.queue_copy(&mut batch, &entry, key, &dst_layout, key)?;
        self.delete_key(&mut batch, key);
        self.commit(batch)?;
        // Redis: `new` in the target, then move_from here and move_to there.
        self.notify_new_in(db, key);
        self.notify(NotifyFlags::GENERIC, "move_from", key);
        self.notify_in(db, NotifyFlags::GENERIC, "move_to", key);
        Ok(true)
    }

    /// Walks the metadata records of the selected database in `ranges` (in order: its
    /// namespace's, or runs of slots) from just after the metadata key `after` (from the
    /// start when `None`), calling `visit(metadata key, live)` until it returns false; `live`
    /// is `Some((user key, type))` for a live key and `None` for an expired, empty or
    /// undecodable record.
    fn walk_records(
        &self,
        ranges: &[KeyRange],
        after: Option<&[u8]>,
        mut visit: impl FnMut(&Bytes, Option<(&[u8], RedisType)>) -> bool,
    ) -> CommandResult<()> {
        let now = self.now_ms();
        for range in ranges {
            let mut range = range.clone();
            if let Some(after) = after {
                let mut start = after.to_vec();
                start.push(0);
                if start > range.start {
                    range.start = start;
                }
            }
            if range.end.as_ref().is_some_and(|end| range.start >= *end) {
                continue;
            }
            for item in self.backend().scan(ColumnFamily::Metadata, &range, Direction::Forward)? {
                let (k, v) = item?;
                let live = match (self.layout().decode_metadata(&v), self.layout().decode_metadata_key(&k)) {
                    (Ok(meta), Ok(decoded)) if meta.is_live(now) => Some((decoded.user_key, meta.ty)),
                    _ => None,
                };
                if !visit(&k, live) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Where KEYS, SCAN, DBSIZE and RANDOMKEY read: the ranges of the session's slots
    /// ([`super::super::Session::set_key_slots`]) when the layout writes slots, else the
    /// namespace's.
    fn key_ranges(&self) -> Vec<KeyRange> {
        match (&self.key_slots, self.layout().cluster_slots()) {
            (Some(slots), true) => slots
                .iter()
                .filter_map(|&(first, last)| self.layout().slots_range(first, last).ok())
                .collect(),
            _ => vec![self.layout().namespace_range()],
        }
    }

    /// [`crate::Engine::eviction_sample`] of the selected database.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn sample_keys(
        &mut self,
        count: usize,
        volatile: bool,
        visits: usize,
    ) -> crate::Result<Vec<Sampled>> {
        let range = self.layout().namespace_range();
        let ends = |direction| -> crate::Result<Option<Bytes>> {
            Ok(self
                .backend()
                .scan(ColumnFamily::Metadata, &range, direction)?
                .next()
                .transpose()?
                .map(|(k, _)| k))
        };
        let (Some(first), Some(last)) = (ends(Direction::Forward)?, ends(Direction::Reverse)?) else {
            return Ok(Vec::new());
        };
        let start = between(&first, &last, || self.random_u64());
        let now = self.now_ms();
        let lfu = self.lfu();
        let access = &self.shared.access;
        let (mut sampled, mut visited) = (Vec::new(), 0);
        let wrapped = KeyRange { start: range.start.clone(), end: Some(start.clone()) };
        for part in [KeyRange { start, end: range.end.clone() }, wrapped] {
            for item in self.backend().scan(ColumnFamily::Metadata, &part, Direction::Forward)? {
                let (k, v) = item?;
                visited += 1;
                let meta = self.layout().decode_metadata(&v).ok().filter(|m| m.is_live(now));
                let decoded = self.layout().decode_metadata_key(&k).ok();
                if let (Some(meta), Some(decoded)) = (meta, decoded)
                    && (!volatile || meta.expire_ms != 0)
                {
                    let now_secs = now / 1000;
                    sampled.push(Sampled {
                        key: Bytes::copy_from_slice(decoded.user_key),
                        idle_secs: if lfu { 0 } else { now_secs.saturating_sub(access.last(&k)) },
                        freq: if lfu { access.freq(&k, now_secs) } else { 0 },
                        expire_ms: meta.expire_ms,
                    });
                }
                if sampled.len() >= count || visited >= visits {
                    return Ok(sampled);
                }
            }
        }
        Ok(sampled)
    }

    /// Walks the live keys of the selected database, calling `visit(user key, type)` until
    /// it returns false.
    pub(crate) fn walk_keys(&self, mut visit: impl FnMut(&[u8], RedisType) -> bool) -> CommandResult<()> {
        self.walk_records(&self.key_ranges(), None, |_, live| live.is_none_or(|(key, ty)| visit(key, ty)))
    }

    /// Walks the live keys of the selected database in cluster slot `slot`, calling
    /// `visit(user key)` until it returns false: a scan of the slot's own range when the
    /// layout writes the slot into its keys ([`KeyLayout::slot_range`]), else a walk of every
    /// key.
    ///
    /// # Errors
    /// Storage errors.
    pub fn walk_slot(&self, slot: u16, visit: impl FnMut(&[u8]) -> bool) -> CommandResult<()> {
        self.walk_slots(slot, slot, visit)
    }

    /// [`Db::walk_slot`] over the slots `first..=last`, in slot order when the layout writes
    /// slots (one scan of their range), else in key order.
    ///
    /// # Errors
    /// Storage errors.
    pub fn walk_slots(
        &self,
        first: u16,
        last: u16,
        mut visit: impl FnMut(&[u8]) -> bool,
    ) -> CommandResult<()> {
        let (range, every_key) = match self.layout().slots_range(first, last) {
            Ok(range) => (range, false),
            Err(_) => (self.layout().namespace_range(), true),
        };
        self.walk_records(&[range], None, |_, live| {
            live.is_none_or(|(key, _)| (every_key && !(first..=last).contains(&key_slot(key))) || visit(key))
        })
    }

    /// One SCAN step: examines up to `count` live keys after `cursor` (0 starts over),
    /// visiting at most `10 * count` records (expired ones included), and returns the next cursor (0 when the iteration is complete) with the examined keys
    /// that match `pattern` and `ty` (a type name, compared case-insensitively). Every key
    /// present for the whole iteration is returned exactly once.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn scan(
        &mut self,
        cursor: u64,
        pattern: Option<&[u8]>,
        count: usize,
        ty: Option<&[u8]>,
    ) -> CommandResult<(u64, Vec<Bytes>)> {
        // A cursor names a user key, not a record: it stays valid in another database, or
        // after SWAPDB moved the selected database to another namespace (Redis' cursors are
        // positions too, valid in any database).
        let after = self.cursors().resolve(cursor).map(|user_key| self.metadata_key(&user_key));
        let count = count.max(1);
        // Like Redis, give up after visiting ten times `count` records (expired ones
        // included) so that a keyspace full of expired records cannot stall one call.
        let max_visits = count.saturating_mul(10);
        let (mut examined, mut visits) = (0, 0);
        let mut last: Option<Bytes> = None;
        let mut more = false;
        let mut keys = Vec::new();
        let mut others = Vec::new();
        let glob = pattern.map(Glob::new);
        self.walk_records(&self.key_ranges(), after.as_deref(), |meta_key, live| {
            if examined == count || visits == max_visits {
                more = true;
                return false;
            }
            visits += 1;
            last = Some(meta_key.clone());
            if let Some((user_key, key_ty)) = live {
                examined += 1;
                let type_ok = ty.is_none_or(|t| t.eq_ignore_ascii_case(key_ty.reply_name().as_bytes()));
                if type_ok && glob.as_ref().is_none_or(|g| g.matches(user_key)) {
                    keys.push(Bytes::copy_from_slice(user_key));
                }
            } else {
                others.push(meta_key.clone());
            }
            true
        })?;
        // Redis expires the keys matching the pattern that it finds expired: looking them up
        // reports them.
        for meta_key in others {
            let user_key = self.layout().decode_metadata_key(&meta_key).map(|d| d.user_key);
            if user_key.is_ok_and(|k| glob.as_ref().is_none_or(|g| g.matches(k))) {
                self.lookup_at(&meta_key)?;
            }
        }
        let next = match (more, last) {
            (true, Some(last)) => {
                let user_key = self.layout().decode_metadata_key(&last).map_or(&last[..], |d| d.user_key);
                self.cursors().save(user_key.to_vec())
            }
            _ => 0,
        };
        Ok((next, keys))
    }

    /// Every live key matching the glob `pattern`, in key order.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn keys(&self, pattern: &[u8]) -> CommandResult<Vec<Bytes>> {
        let mut keys = Vec::new();
        let all = pattern == b"*";
        let glob = Glob::new(pattern);
        self.walk_keys(|user_key, _| {
            if all || glob.matches(user_key) {
                keys.push(Bytes::copy_from_slice(user_key));
            }
            true
        })?;
        Ok(keys)
    }

    /// The number of keys in the selected database. Under an [`crate::commands::Engine`] over a store
    /// no other process writes, in O(1) from the counts the commits keep (see
    /// [`crate::commands::Engine::key_count`]): as in Redis, an expired key whose record nobody has
    /// deleted yet still counts. Otherwise (a bare `Db`, a store several server nodes share,
    /// a session restricted to some slots) a scan of the metadata records that counts live
    /// keys only.
    ///
    /// # Errors
    /// Storage errors (from the scan, or the first count of the database).
    pub(crate) fn dbsize(&self) -> CommandResult<i64> {
        if self.key_slots.is_some() {
            return self.live_keys();
        }
        match self.key_count()? {
            Some(count) => Ok(i64::try_from(count.keys).unwrap_or(i64::MAX)),
            None => self.live_keys(),
        }
    }

    /// The number of live keys in the selected database, by a scan of its metadata records.
    ///
    /// # Errors
    /// Storage errors.
    fn live_keys(&self) -> CommandResult<i64> {
        let mut n = 0;
        self.walk_keys(|_, _| {
            n += 1;
            true
        })?;
        Ok(n)
    }

    /// A random live key, `None` when the database is empty (two scans of the metadata
    /// records: count, then pick).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn randomkey(&mut self) -> CommandResult<Option<Bytes>> {
        let n = self.live_keys()?;
        if n == 0 {
            return Ok(None);
        }
        let mut skip = self.random_u64() % n as u64;
        let mut found = None;
        self.walk_keys(|user_key, _| {
            if skip == 0 {
                found = Some(Bytes::copy_from_slice(user_key));
                return false;
            }
            skip -= 1;
            true
        })?;
        Ok(found)
    }

    /// Queues the deletion of every metadata record under `layout`'s namespace, and under
    /// NeoKV of every string its first encoding left there (found among the namespace's
    /// subkeys: a walk over its elements, which only that layout pays).
    fn queue_flush(&self, batch: &mut WriteBatch, layout: &KeyLayout) -> CommandResult<()> {
        let range = layout.namespace_range();
        for item in self.backend().scan(ColumnFamily::Metadata, &range, Direction::Forward)? {
            let (k, _) = item?;
            batch.delete(ColumnFamily::Metadata, k);
        }
        if layout.kind() == LayoutKind::NeoKv {
            for item in self.backend().scan(ColumnFamily::Subkey, &range, Direction::Forward)? {
                let (k, _) = item?;
                if layout.decode_legacy_string_key(&k).is_some() {
                    batch.delete(ColumnFamily::Subkey, k);
                }
            }
        }
        Ok(())
    }

    /// Deletes every key of the selected database: its metadata records, in one batch
    /// (subkeys become garbage).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn flushdb(&mut self) -> CommandResult<()> {
        let mut batch = WriteBatch::new();
        let layout = self.layout().clone();
        self.queue_flush(&mut batch, &layout)?;
        self.commit(batch)
    }

    /// Deletes every key of all [`DATABASES`] databases, in one batch.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn flushall(&mut self) -> CommandResult<()> {
        let mut batch = WriteBatch::new();
        for i in 0..DATABASES {
            let layout = self.layout_of(i)?;
            self.queue_flush(&mut batch, &layout)?;
        }
        self.commit(batch)
    }
}

pub(crate) fn del<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.del(&argv[1..]).map(Reply::Integer)
}

pub(crate) fn exists<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let mut n = 0;
    for key in &argv[1..] {
        if db.lookup_meta(key)?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Integer(n))
}

pub(crate) fn type_<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::status(db.lookup_meta(&argv[1])?.map_or("none", |meta| meta.ty.reply_name())))
}

/// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT: `unit_ms` is 1000 for seconds, `relative`
/// adds the current time.
fn expire_generic<B: KvBackend>(
    db: &mut Db<B>,
    argv: &[Bytes],
    unit_ms: i64,
    relative: bool,
    name: &str,
) -> CommandResult {
    let cond = ExpireCondition::parse(&argv[3..])?;
    let mut when = int_arg(&argv[2])?;
    let invalid = || CommandError::err(format_args!("invalid expire time in '{name}' command"));
    if unit_ms != 1 {
        if when > i64::MAX / unit_ms || when < i64::MIN / unit_ms {
            return Err(invalid());
        }
        when *= unit_ms;
    }
    let base = if relative { i64::try_from(db.now_ms()).unwrap_or(i64::MAX) } else { 0 };
    if when > i64::MAX - base {
        return Err(invalid());
    }
    when += base;
    Ok(Reply::Integer(i64::from(db.expire_at_ms(&argv[1], when, cond)?)))
}

pub(crate) fn expire<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    expire_generic(db, argv, 1000, true, "expire")
}

pub(crate) fn pexpire<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    expire_generic(db, argv, 1, true, "pexpire")
}

pub(crate) fn expireat<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    expire_generic(db, argv, 1000, false, "expireat")
}

pub(crate) fn pexpireat<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    expire_generic(db, argv, 1, false, "pexpireat")
}

/// Milliseconds to Redis' rounded seconds, negative codes unchanged.
fn to_seconds(ms: i64) -> i64 {
    if ms < 0 { ms } else { ms.saturating_add(500) / 1000 }
}

pub(crate) fn ttl<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(to_seconds(db.pttl(&argv[1])?)))
}

pub(crate) fn pttl<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.pttl(&argv[1])?))
}

pub(crate) fn expiretime<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(to_seconds(db.pexpiretime(&argv[1])?)))
}

pub(crate) fn pexpiretime<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.pexpiretime(&argv[1])?))
}

pub(crate) fn persist<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(i64::from(db.persist(&argv[1])?)))
}

pub(crate) fn rename<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.rename(&argv[1], &argv[2], false)?;
    Ok(Reply::OK)
}

pub(crate) fn renamenx<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(i64::from(db.rename(&argv[1], &argv[2], true)?)))
}

pub(crate) fn copy<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let mut replace = false;
    let mut target = None;
    let mut j = 3;
    while j < argv.len() {
        let opt = argv[j].to_ascii_lowercase();
        if opt == b"replace" {
            replace = true;
        } else if opt == b"db" && j + 1 < argv.len() {
            target = Some(db_index_arg(&argv[j + 1])?);
            j += 1;
        } else {
            return Err(CommandError::Syntax);
        }
        j += 1;
    }
    Ok(Reply::Integer(i64::from(db.copy(&argv[1], &argv[2], target, replace)?)))
}

pub(crate) fn scan<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let cursor = cursor_arg(&argv[1])?;
    let mut count = 10usize;
    let mut pattern: Option<&[u8]> = None;
    let mut ty: Option<&[u8]> = None;
    let mut i = 2;
    while i < argv.len() {
        let opt = argv[i].to_ascii_lowercase();
        let has_value = i + 1 < argv.len();
        match opt.as_slice() {
            b"count" if has_value => {
                let n = int_arg(&argv[i + 1])?;
                if n < 1 {
                    return Err(CommandError::Syntax);
                }
                count = usize::try_from(n).unwrap_or(usize::MAX);
            }
            b"match" if has_value => {
                let p = &argv[i + 1][..];
                pattern = if p == b"*" { None } else { Some(p) };
            }
            b"type" if has_value => ty = Some(&argv[i + 1][..]),
            _ => return Err(CommandError::Syntax),
        }
        i += 2;
    }
    let (next, keys) = db.scan(cursor, pattern, count, ty)?;
    Ok(Reply::Array(vec![Reply::bulk(next.to_string().as_bytes()), Reply::bulks(keys)]))
}

pub(crate) fn keys<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::bulks(db.keys(&argv[1])?))
}

pub(crate) fn randomkey<B: KvBackend>(db: &mut Db<B>, _argv: &[Bytes]) -> CommandResult {
    Ok(Reply::bulk_or_nil(db.randomkey()?))
}

pub(crate) fn dbsize<B: KvBackend>(db: &mut Db<B>, _argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.dbsize()?))
}

/// FLUSHDB / FLUSHALL accept one optional ASYNC or SYNC word.
fn flush_mode(argv: &[Bytes]) -> CommandResult<()> {
    match argv {
        [_] => Ok(()),
        [_, mode] if mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync") => Ok(()),
        _ => Err(CommandError::Syntax),
    }
}

pub(crate) fn flushdb<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    flush_mode(argv)?;
    db.flushdb()?;
    Ok(Reply::OK)
}

pub(crate) fn flushall<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    flush_mode(argv)?;
    db.flushall()?;
    Ok(Reply::OK)
}

pub(crate) fn ping<B: KvBackend>(_db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    match argv.len() {
        1 => Ok(Reply::status("PONG")),
        2 => Ok(Reply::Bulk(argv[1].clone())),
        _ => Err(CommandError::WrongArity("ping".into())),
    }
}

pub(crate) fn echo<B: KvBackend>(_db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Bulk(argv[1].clone()))
}

/// A database index argument (COPY … DB, MOVE), read as Redis' `getIntFromObjectOrReply`.
///
/// # Errors
/// Redis 7.0's texts for a non-integer, a value outside `i32`, and an index out of range.
fn db_index_arg(arg: &[u8]) -> CommandResult<usize> {
    let index = int_arg(arg)?;
    if i32::try_from(index).is_err() {
        return Err(CommandError::err(
            "value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    usize::try_from(index)
        .ok()
        .filter(|&i| i < DATABASES)
        .ok_or_else(|| CommandError::err("DB index is out of range"))
}

/// `MOVE key db`.
pub(crate) fn move_cmd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(i64::from(db.move_key(&argv[1], db_index_arg(&argv[2])?)?)))
}

/// `SWAPDB a b`: see [`Db::swapdb`].
pub(crate) fn swapdb<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let index = |arg: &[u8], which: &str| {
        let i = int_arg(arg).ok().and_then(|i| i32::try_from(i).ok());
        i.ok_or_else(|| CommandError::err(format!("invalid {which} DB index")))
    };
    let (a, b) = (index(&argv[1], "first")?, index(&argv[2], "second")?);
    let in_range = |i: i32| usize::try_from(i).ok().filter(|&i| i < DATABASES);
    let (Some(a), Some(b)) = (in_range(a), in_range(b)) else {
        return Err(CommandError::err("DB index is out of range"));
    };
    db.swapdb(a, b);
    Ok(Reply::OK)
}

pub(crate) fn select<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let index = int_arg(&argv[1])?;
    let index = usize::try_from(index).map_err(|_| CommandError::err("DB index is out of range"))?;
    db.select(index)?;
    Ok(Reply::OK)
}

/// A key an eviction pass sampled ([`crate::Engine::eviction_sample`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampled {
    /// The key.
    pub key: Bytes,
    /// Seconds since its last use (0 while access frequencies are kept instead).
    pub idle_secs: u64,
    /// Its access counter, decayed to now (0 while last-use times are kept instead).
    pub freq: u8,
    /// Its expiry in unix milliseconds; 0: none.
    pub expire_ms: u64,
}

/// A random key in `[first, last]` (for `first <= last`): their common prefix, one byte
/// drawn between theirs, then random bytes.
fn between(first: &[u8], last: &[u8], mut random: impl FnMut() -> u64) -> Vec<u8> {
    let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let mut key = first[..common].to_vec();
    if common == last.len() {
        return key; // first == last
    }
    let low = first.get(common).copied().unwrap_or(0);
    let high = last[common];
    key.push(low + (random() % (u64::from(high - low) + 1)) as u8);
    key.extend_from_slice(&random().to_be_bytes()[..4]);
    key
}
