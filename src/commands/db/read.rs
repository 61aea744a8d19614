//! Reading records: metadata keys and subkeys, lookups (live keys, the expired keys found on
//! the way, NeoKV's first-encoding strings), subkey reads and scans.

use std::sync::atomic::Ordering;

use bytes::{Buf, Bytes};

use super::{Db, Entry, Touch, TouchedKey};
use crate::backend::{Direction, KvBackend, ScanIter};
use crate::codec::{ColumnFamily, KeyLayout, Metadata, RedisType, Version, decode_neokv_legacy};
use crate::commands::error::CommandError;
use crate::commands::notify::Event;
use crate::commands::reply::CommandResult;

impl<B: KvBackend> Db<'_, B> {
    /// The metadata key of `key` in the selected database.
    pub(crate) fn metadata_key(&self, key: &[u8]) -> Vec<u8> {
        self.layout().metadata_key(key)
    }

    /// The subkey of `sub` under `key` at `version`.
    ///
    /// # Errors
    /// A storage error for a key over 4 GiB.
    pub(crate) fn subkey(&self, key: &[u8], version: Version, sub: &[u8]) -> CommandResult<Vec<u8>> {
        Ok(self.layout().subkey(key, version, sub)?)
    }

    /// Reads a key's metadata: `None` when missing, expired, or an empty collection.
    ///
    /// # Errors
    /// A storage error when the backend fails or the record does not decode.
    pub(crate) fn lookup(&self, key: &[u8]) -> CommandResult<Option<Entry>> {
        self.lookup_in(self.layout(), key)
    }

    /// [`Db::lookup`] without a string's value (see [`Db::lookup_meta_at`]): for a command
    /// that needs only whether the key exists, its type or its expiry.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_meta(&self, key: &[u8]) -> CommandResult<Option<Metadata<'static>>> {
        self.lookup_meta_at(&self.metadata_key(key))
    }

    /// [`Db::lookup`] in another database's layout (COPY … DB n).
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_in(&self, layout: &KeyLayout, key: &[u8]) -> CommandResult<Option<Entry>> {
        self.lookup_at(&layout.metadata_key(key))
    }

    /// [`Db::lookup`] by metadata key, for a command that reads and then writes a key and
    /// builds its metadata key once.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_at(&self, mkey: &[u8]) -> CommandResult<Option<Entry>> {
        let raw = match self.backend.get(ColumnFamily::Metadata, mkey)? {
            Some(raw) => raw,
            None => match self.legacy_at(mkey)? {
                Some(raw) => raw,
                None => return Ok(None),
            },
        };
        let meta = self.layout().decode_metadata(&raw).map_err(|e| self.undecodable(mkey, &e))?;
        // Where the value lies in the record (`None`: empty, or not cut from the record).
        let len = meta.value.len();
        let offset = (meta.value.as_ptr() as usize)
            .checked_sub(raw.as_ptr() as usize)
            .filter(|&at| len > 0 && at + len <= raw.len());
        let copied =
            if offset.is_none() && len > 0 { Bytes::copy_from_slice(meta.value) } else { Bytes::new() };
        let Some(meta) = self.found(mkey, meta.without_value()) else { return Ok(None) };
        // The value is cut out of the record read (which nothing else holds): no copy.
        let value = match offset {
            Some(offset) => {
                let mut value = raw;
                value.advance(offset);
                value.truncate(len);
                value
            }
            None => copied,
        };
        Ok(Some(Entry { meta, value }))
    }

    /// [`Db::lookup_at`] without a string's value: the record is decoded where the store
    /// keeps it ([`KvBackend::get_with`]), not copied out.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_meta_at(&self, mkey: &[u8]) -> CommandResult<Option<Metadata<'static>>> {
        // Not `lookup_with(mkey, |_| ())`: that costs every collection command's lookup
        // about 25 instructions more.
        let layout = self.layout();
        let mut read = None;
        self.backend.get_with(ColumnFamily::Metadata, mkey, &mut |raw| {
            read = raw.map(|raw| layout.decode_metadata(raw).map(|meta| meta.without_value()));
        })?;
        let decoded = match read {
            Some(decoded) => decoded,
            None => match self.legacy_at(mkey)? {
                Some(raw) => layout.decode_metadata(&raw).map(|meta| meta.without_value()),
                None => return Ok(None),
            },
        };
        let meta = decoded.map_err(|e| self.undecodable(mkey, &e))?;
        Ok(self.found(mkey, meta))
    }

    /// [`Db::lookup_meta_at`] that also lends the decoded record, a string's value
    /// included, to `read` where the store keeps it: the metadata (without the value) and
    /// what `read` returned, when the key is live.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    fn lookup_with<T>(
        &self,
        mkey: &[u8],
        mut read: impl FnMut(&Metadata<'_>) -> T,
    ) -> CommandResult<Option<(Metadata<'static>, T)>> {
        let layout = self.layout();
        let mut decoded = None;
        self.backend.get_with(ColumnFamily::Metadata, mkey, &mut |raw| {
            decoded =
                raw.map(|raw| layout.decode_metadata(raw).map(|meta| (read(&meta), meta.without_value())));
        })?;
        let decoded = match decoded {
            Some(decoded) => decoded,
            None => match self.legacy_at(mkey)? {
                Some(raw) => layout.decode_metadata(&raw).map(|meta| (read(&meta), meta.without_value())),
                None => return Ok(None),
            },
        };
        let (t, meta) = decoded.map_err(|e| self.undecodable(mkey, &e))?;
        Ok(self.found(mkey, meta).map(|meta| (meta, t)))
    }

    /// [`Db::lookup_stringlike_at`] that lends the string's value to `read` instead of
    /// copying it out (a bitmap's string is built first): the key's expiry (0: none) and
    /// what `read` returned, `None` when the key is missing.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a collection; as [`Db::lookup`].
    pub(crate) fn read_string_at<T>(
        &self,
        key: &[u8],
        mkey: &[u8],
        mut read: impl FnMut(&[u8]) -> T,
    ) -> CommandResult<Option<(u64, T)>> {
        let found =
            self.lookup_with(mkey, |meta| (meta.ty == RedisType::String).then(|| read(meta.value)))?;
        match found {
            None => Ok(None),
            Some((meta, Some(t))) => Ok(Some((meta.expire_ms, t))),
            Some((meta, None)) if meta.ty == RedisType::Bitmap => {
                Ok(Some((meta.expire_ms, read(&self.bitmap_string(key, &meta)?))))
            }
            Some(_) => Err(CommandError::WrongType),
        }
    }

    /// After a lookup found no record at `mkey`: NeoKV's legacy string record, if any.
    fn legacy_at(&self, mkey: &[u8]) -> CommandResult<Option<Bytes>> {
        self.remember(mkey, None, false);
        Ok(legacy_record(&self.backend, &self.shared.base_layout, mkey)?)
    }

    /// A record this crate cannot read is an error naming the key, never an absent key.
    fn undecodable(&self, mkey: &[u8], e: &crate::Error) -> CommandError {
        self.remember(mkey, Some(None), false);
        let key = self.layout().decode_metadata_key(mkey).map_or(mkey, |k| k.user_key);
        CommandError::err(format!("undecodable metadata of key '{}': {e}", key.escape_ascii()))
    }

    /// A lookup's metadata record at `mkey`, decoded: remembered, and `Some` when it is
    /// live now (its last-use time set, unless the command does not touch keys); a key
    /// past its TTL is recorded expired.
    fn found(&self, mkey: &[u8], meta: Metadata<'static>) -> Option<Metadata<'static>> {
        let now = self.now_ms();
        let live = meta.is_live(now);
        let touches = live && self.touching;
        self.remember(mkey, Some(Some(super::memo::Found::of(&meta))), touches);
        if !live {
            if meta.is_expired(now) {
                self.record_expired(mkey);
            }
            return None;
        }
        if self.layout().version_len() == 16 && !meta.ty.is_single_kv() {
            self.journal.borrow_mut().owners.push((meta.version, Bytes::copy_from_slice(mkey)));
        }
        if touches {
            self.shared.access.touch(mkey, now / 1000);
        }
        Some(meta)
    }

    /// Records a key found expired: `Touch::Expired` and its `expired` event, once (Redis
    /// deletes the key at the first lookup; this engine after the command, see
    /// [`Db::delete_expired`], so until it writes the key the command sees it as gone).
    fn record_expired(&self, mkey: &[u8]) {
        if self.now_ms() < self.shared.expiry_held_until.load(Ordering::Relaxed) {
            // Expiry is held: the key stays, logically gone, until a command finds it later.
            return;
        }
        let mut journal = self.journal.borrow_mut();
        if journal.found_expired(mkey) {
            return;
        }
        let metadata_key = Bytes::copy_from_slice(mkey);
        journal.touched.push(TouchedKey { metadata_key, kind: Touch::Expired });
        journal.effects.expired += 1;
        if !self.shared.events.load(Ordering::Relaxed) {
            return;
        }
        if let Some((db, key)) = self.shared.decode_touched(mkey) {
            journal.scratch.pending.push(Event::expired(db, key));
        }
    }

    /// [`Db::lookup`] for a key that must hold `ty` when it exists.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] when it holds another type; storage errors.
    pub(crate) fn lookup_of(&self, key: &[u8], ty: RedisType) -> CommandResult<Option<Metadata<'static>>> {
        self.lookup_of_at(&self.metadata_key(key), ty)
    }

    /// [`Db::lookup_of`] by metadata key (see [`Db::lookup_at`]).
    ///
    /// # Errors
    /// As [`Db::lookup_of`].
    #[inline]
    pub(crate) fn lookup_of_at(
        &self,
        mkey: &[u8],
        ty: RedisType,
    ) -> CommandResult<Option<Metadata<'static>>> {
        match self.lookup_meta_at(mkey)? {
            None => Ok(None),
            Some(meta) if meta.ty == ty => Ok(Some(meta)),
            Some(_) => Err(CommandError::WrongType),
        }
    }

    /// The value of a string key.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a collection; storage errors.
    pub(crate) fn lookup_string(&self, key: &[u8]) -> CommandResult<Option<Bytes>> {
        // The value copied where the store keeps the record: not the whole record copied
        // out, then cut.
        Ok(self.read_string_at(key, &self.metadata_key(key), Bytes::copy_from_slice)?.map(|(_, v)| v))
    }

    /// [`Db::lookup`], with a bitmap turned into the string Redis would hold (type String,
    /// same expiry), for the string commands.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_stringlike(&self, key: &[u8]) -> CommandResult<Option<Entry>> {
        self.lookup_stringlike_at(key, &self.metadata_key(key))
    }

    /// [`Db::lookup_stringlike`] with `key`'s metadata key built already, for a command that
    /// writes the key next.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_stringlike_at(&self, key: &[u8], mkey: &[u8]) -> CommandResult<Option<Entry>> {
        match self.lookup_at(mkey)? {
            Some(e) if e.meta.ty == RedisType::Bitmap => {
                let value = self.bitmap_string(key, &e.meta)?;
                Ok(Some(Entry { meta: Metadata::string(&[], e.meta.expire_ms), value }))
            }
            other => Ok(other),
        }
    }

    /// Reads one subkey's value.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn get_subkey(
        &self,
        key: &[u8],
        version: Version,
        sub: &[u8],
    ) -> CommandResult<Option<Bytes>> {
        Ok(self.backend.get(ColumnFamily::Subkey, &self.subkey(key, version, sub)?)?)
    }

    /// Walks the subkeys of `key` at `version` lazily, yielding `(sub, value)`.
    ///
    /// # Errors
    /// Storage errors, when starting or from any item.
    pub(crate) fn scan_subkeys(
        &self,
        key: &[u8],
        version: Version,
        direction: Direction,
    ) -> CommandResult<impl Iterator<Item = CommandResult<(Bytes, Bytes)>> + '_> {
        let prefix_len = self.layout().subkey_prefix(key, version, 0)?.len();
        let iter: ScanIter<'_> =
            self.backend.scan(ColumnFamily::Subkey, &self.layout().subkey_range(key, version)?, direction)?;
        Ok(iter.map(move |item| {
            let (k, v) = item?;
            Ok((k.slice(prefix_len..), v))
        }))
    }
}

impl<B: KvBackend> Db<'_, B> {
    /// The metadata record at `mkey`, as [`metadata_record`] reads it; what the metadata
    /// column family held is remembered for the commit ([`Db::remember`]).
    ///
    /// # Errors
    /// As [`metadata_record`].
    pub(crate) fn metadata_record(&self, mkey: &[u8]) -> crate::Result<Option<Bytes>> {
        let raw = self.backend.get(ColumnFamily::Metadata, mkey)?;
        if self.remembering.get() {
            let base = &self.shared.base_layout;
            let found =
                raw.as_deref().map(|raw| base.decode_metadata(raw).ok().map(|m| super::memo::Found::of(&m)));
            self.remember(mkey, found, false);
        }
        match raw {
            None => legacy_record(&self.backend, &self.shared.base_layout, mkey),
            raw => Ok(raw),
        }
    }
}

/// The metadata record at `mkey`; when there is none and `layout` is NeoKV's, the string
/// its first encoding kept under [`KeyLayout::legacy_string_key`], as a string metadata
/// value (NeoKV's read fallback).
///
/// # Errors
/// Storage errors; [`crate::Error::Truncated`] for a legacy record under 8 bytes.
pub(crate) fn metadata_record<B: KvBackend>(
    backend: &B,
    layout: &KeyLayout,
    mkey: &[u8],
) -> crate::Result<Option<Bytes>> {
    match backend.get(ColumnFamily::Metadata, mkey)? {
        None => legacy_record(backend, layout, mkey),
        raw => Ok(raw),
    }
}

/// NeoKV's first-encoding string for `mkey`, as a string metadata value, when the layout is
/// NeoKV's and there is one.
///
/// # Errors
/// Storage errors; [`crate::Error::Truncated`] for a legacy record under 8 bytes.
fn legacy_record<B: KvBackend>(backend: &B, layout: &KeyLayout, mkey: &[u8]) -> crate::Result<Option<Bytes>> {
    let Some(legacy_key) = layout.legacy_string_key(mkey) else { return Ok(None) };
    match backend.get(ColumnFamily::Subkey, &legacy_key)? {
        Some(raw) => Ok(Some(decode_neokv_legacy(&raw)?.to_vec().into())),
        None => Ok(None),
    }
}
