//! What each layout's own system writes beside a batch of metadata writes: NeoKV's migration
//! of first-encoding strings, TiTea's GC, expire and created-at records.

use bytes::Bytes;

use super::Db;
use crate::backend::{BatchOp, KvBackend, WriteBatch};
use crate::codec::{ColumnFamily, KeyLayout, LayoutKind, Metadata, RedisType};

impl<B: KvBackend> Db<'_, B> {
    /// What the layout's system writes beside a batch of metadata writes: NeoKV's
    /// migration of first-encoding strings, TiTea's index records; the batch as it is for
    /// Kvrocks and camellia.
    ///
    /// # Errors
    /// Storage errors reading the records the batch replaces.
    pub(super) fn adapt(&self, mut batch: WriteBatch) -> crate::Result<WriteBatch> {
        match self.shared.base_layout.kind() {
            LayoutKind::NeoKv => migrate_legacy(&self.shared.base_layout, &mut batch),
            LayoutKind::TiTea => batch = self.titea_index_records(batch)?,
            _ => {}
        }
        Ok(batch)
    }

    /// TiTea's index records for the metadata writes of `batch`, in the same batch, as
    /// TiTea's own writes keep them: a GC record (`kv<ns>g<id>` → type) for every collection
    /// a write deletes or replaces, the expire record (`kv<ns>e<ms><key>` → id, type) moved
    /// with the key's expiry; and the created-at time of each metadata value (kept when the
    /// collection stays the same, now otherwise).
    ///
    /// # Errors
    /// Storage errors reading the records the batch replaces.
    fn titea_index_records(&self, batch: WriteBatch) -> crate::Result<WriteBatch> {
        let base = &self.shared.base_layout;
        let now_s = self.now_ms() / 1000;
        let mut out = WriteBatch::new();
        // What each metadata key holds as the batch goes (a key written twice in one batch).
        let mut current: Vec<(Bytes, Option<Bytes>)> = Vec::new();
        for op in batch.into_ops() {
            let (key, new) = match op {
                BatchOp::Put { cf: ColumnFamily::Metadata, key, value } => (key, Some(value)),
                BatchOp::Delete { cf: ColumnFamily::Metadata, key } => (key, None),
                BatchOp::Put { cf, key, value } => {
                    out.put(cf, key, value);
                    continue;
                }
                BatchOp::Delete { cf, key } => {
                    out.delete(cf, key);
                    continue;
                }
            };
            let old = match current.iter().find(|(k, _)| *k == key) {
                Some((_, v)) => v.clone(),
                None => self.backend.get(ColumnFamily::Metadata, &key)?,
            };
            let Ok(mk) = base.decode_metadata_key(&key) else {
                put_or_delete(&mut out, key, new);
                continue;
            };
            let layout = KeyLayout::titea(mk.namespace);
            let old_meta = old.as_deref().and_then(|raw| base.decode_metadata(raw).ok());
            let new = match (&old_meta, &new) {
                (Some(old), Some(raw)) => keep_string_id(old, raw, self.now_ms()).or(new),
                _ => new,
            };
            let new_meta = new.as_deref().and_then(|raw| base.decode_metadata(raw).ok());
            let same = |a: &Metadata<'_>, b: &Metadata<'_>| a.version == b.version && a.ty == b.ty;
            let mut value = new.clone();
            if let Some(old) = &old_meta {
                let kept = new_meta.as_ref().is_some_and(|n| same(old, n));
                if !old.ty.is_single_kv() && !kept {
                    let ty = crate::codec::titea::type_byte(old.ty).unwrap_or(b'h');
                    out.put(ColumnFamily::Metadata, base.gc_record_key(mk.namespace, old.version)?, vec![ty]);
                }
                if old.expire_ms != 0
                    && !(kept && new_meta.as_ref().is_some_and(|n| n.expire_ms == old.expire_ms))
                {
                    out.delete(ColumnFamily::Metadata, layout.expire_record_key(old.expire_ms, mk.user_key));
                }
            }
            if let (Some(new_meta), Some(raw)) = (&new_meta, &new) {
                let kept = old_meta.as_ref().is_some_and(|o| same(o, new_meta));
                if new_meta.expire_ms != 0
                    && !(kept && old_meta.as_ref().is_some_and(|o| o.expire_ms == new_meta.expire_ms))
                {
                    let index = crate::codec::titea::expire_value(new_meta)?;
                    out.put(
                        ColumnFamily::Metadata,
                        layout.expire_record_key(new_meta.expire_ms, mk.user_key),
                        index,
                    );
                }
                let created = match (&old, kept) {
                    (Some(old), true) => old.get(crate::codec::titea::CREATED_AT).map(<[u8]>::to_vec),
                    _ => None,
                };
                let mut bytes = raw.to_vec();
                if let Some(field) = bytes.get_mut(crate::codec::titea::CREATED_AT) {
                    field.copy_from_slice(&created.unwrap_or_else(|| now_s.to_be_bytes().to_vec()));
                }
                value = Some(bytes.into());
            }
            match current.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = new.clone(),
                None => current.push((key.clone(), new.clone())),
            }
            put_or_delete(&mut out, key, value);
        }
        Ok(out)
    }
}

/// TiTea: the string record `raw` written over `old` with `old`'s object id, when both are
/// live strings of different ids (TiTea's string writes keep the id of a live string).
fn keep_string_id(old: &Metadata<'_>, raw: &Bytes, now_ms: u64) -> Option<Bytes> {
    let live_string = |m: &Metadata<'_>| m.ty == RedisType::String && !m.is_expired(now_ms);
    let fresh = crate::codec::titea::decode_metadata(raw).ok()?;
    if !live_string(old) || !live_string(&fresh) || fresh.version == old.version {
        return None;
    }
    let mut bytes = raw.to_vec();
    bytes.get_mut(crate::codec::titea::OBJECT_ID)?.copy_from_slice(&old.version.id().ok()?);
    Some(bytes.into())
}

/// Queues `value` at the metadata key `key`, or its deletion for `None`.
fn put_or_delete(batch: &mut WriteBatch, key: Bytes, value: Option<Bytes>) {
    match value {
        Some(value) => batch.put(ColumnFamily::Metadata, key, value),
        None => batch.delete(ColumnFamily::Metadata, key),
    }
}

/// NeoKV's write-side migration: every metadata record `batch` writes or deletes also
/// deletes the string of NeoKV's first encoding under the same key, so a key read through
/// the fallback is moved (or deleted) by its first write. Nothing for Kvrocks.
fn migrate_legacy(layout: &KeyLayout, batch: &mut WriteBatch) {
    if layout.kind() != LayoutKind::NeoKv {
        return;
    }
    let legacy: Vec<Vec<u8>> = batch
        .ops()
        .iter()
        .filter_map(|op| match op {
            BatchOp::Put { cf: ColumnFamily::Metadata, key, .. }
            | BatchOp::Delete { cf: ColumnFamily::Metadata, key } => layout.legacy_string_key(key),
            _ => None,
        })
        .collect();
    for key in legacy {
        batch.delete(ColumnFamily::Subkey, key);
    }
}
