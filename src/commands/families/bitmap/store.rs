//! Where a key's bits live: inline in a string record (as Redis), or in the Kvrocks bitmap
//! type's 1024-byte fragments.
//!
//! A fragment's subkey is the decimal ASCII byte offset of its first byte (`0`, `1024`,
//! `2048`…); inside it, bit `i` is bit `i % 8` counted from the least significant end of
//! byte `i / 8` (Kvrocks' order, the reverse of Redis' within each byte). A fragment grows
//! as Kvrocks grows it: to the byte written, or to double its length, at most 1024 bytes.
//! The metadata size is the length in bytes of the equivalent string.

use std::collections::{BTreeMap, BTreeSet, btree_map};

use bytes::Bytes;

use super::bits::Sparse;
use crate::backend::{Direction, KvBackend, WriteBatch};
use crate::codec::{ColumnFamily, Metadata, RedisType, Version};
use crate::commands::{CommandError, CommandResult, Db};

/// Bytes per fragment.
pub(crate) const FRAGMENT_BYTES: u64 = 1024;

/// The subkey naming the fragment that starts at byte `start`.
fn fragment_sub(start: u64) -> Vec<u8> {
    start.to_string().into_bytes()
}

/// A key's bits, open for reading and writing.
pub(crate) enum Bits {
    /// A string value (or a new key under the "strings like Redis" option).
    Str {
        /// The value.
        value: Vec<u8>,
        /// Its expiry, kept on write.
        expire_ms: u64,
    },
    /// A Kvrocks bitmap.
    Fragments {
        /// Its metadata (size grows with writes).
        meta: Metadata<'static>,
        /// The fragments read so far, by start byte, in Kvrocks' bit order.
        loaded: BTreeMap<u64, Vec<u8>>,
        /// Those written.
        dirty: BTreeSet<u64>,
    },
}

impl Bits {
    /// Reads bit `pos` (Redis' numbering); bits past the end are 0.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn bit<B: KvBackend>(&mut self, db: &Db<B>, key: &[u8], pos: u64) -> CommandResult<bool> {
        Ok(match self {
            Bits::Str { value, .. } => {
                value.get((pos / 8) as usize).is_some_and(|b| b & (0x80 >> (pos % 8)) != 0)
            }
            Bits::Fragments { meta, loaded, .. } => {
                let frag = fragment(db, key, meta.version, loaded, pos / 8)?;
                let i = (pos / 8) % FRAGMENT_BYTES;
                frag.get(i as usize).is_some_and(|b| b & (1 << (pos % 8)) != 0)
            }
        })
    }

    /// Sets bit `pos` to `on`, growing the value to cover it.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn set_bit<B: KvBackend>(
        &mut self,
        db: &Db<B>,
        key: &[u8],
        pos: u64,
        on: bool,
    ) -> CommandResult<()> {
        self.grow(pos / 8 + 1);
        let byte = (pos / 8) as usize;
        match self {
            Bits::Str { value, .. } => {
                let m = 0x80 >> (pos % 8);
                value[byte] = if on { value[byte] | m } else { value[byte] & !m };
            }
            Bits::Fragments { meta, loaded, dirty } => {
                let start = (pos / 8) / FRAGMENT_BYTES * FRAGMENT_BYTES;
                let frag = fragment(db, key, meta.version, loaded, pos / 8)?;
                let i = (byte as u64 % FRAGMENT_BYTES) as usize;
                expand(frag, i + 1);
                let m = 1 << (pos % 8);
                frag[i] = if on { frag[i] | m } else { frag[i] & !m };
                dirty.insert(start);
            }
        }
        Ok(())
    }

    /// The value's length in bytes.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Bits::Str { value, .. } => value.len() as u64,
            Bits::Fragments { meta, .. } => meta.size,
        }
    }

    /// Makes the value at least `len` bytes long (zero-filled), as Redis grows a string.
    pub(crate) fn grow(&mut self, len: u64) {
        match self {
            Bits::Str { value, .. } => {
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                if value.len() < len {
                    value.resize(len, 0);
                }
            }
            Bits::Fragments { meta, .. } => meta.size = meta.size.max(len),
        }
    }

    /// Queues what changed: the string record, or the written fragments and the metadata.
    pub(crate) fn queue<B: KvBackend>(
        &self,
        db: &Db<B>,
        batch: &mut WriteBatch,
        key: &[u8],
    ) -> CommandResult<()> {
        match self {
            Bits::Str { value, expire_ms } => {
                db.put_metadata(batch, key, &Metadata::string(value, *expire_ms))
            }
            Bits::Fragments { meta, loaded, dirty } => {
                for (start, frag) in loaded.iter().filter(|(start, _)| dirty.contains(start)) {
                    let subkey = db.subkey(key, meta.version, &fragment_sub(*start))?;
                    batch.put(ColumnFamily::Subkey, subkey, frag.clone());
                }
                db.put_metadata(batch, key, meta);
            }
        }
        Ok(())
    }
}

/// Kvrocks' growth rule for a fragment that must hold `min` bytes.
fn expand(frag: &mut Vec<u8>, min: usize) {
    let old = frag.len();
    if min > old {
        let new = if min > old * 2 { min } else { (old * 2).min(FRAGMENT_BYTES as usize) };
        frag.resize(new, 0);
    }
}

/// The fragment holding byte `byte`, read on first use.
fn fragment<'l, B: KvBackend>(
    db: &Db<B>,
    key: &[u8],
    version: Version,
    loaded: &'l mut BTreeMap<u64, Vec<u8>>,
    byte: u64,
) -> CommandResult<&'l mut Vec<u8>> {
    let start = byte / FRAGMENT_BYTES * FRAGMENT_BYTES;
    Ok(match loaded.entry(start) {
        btree_map::Entry::Occupied(o) => o.into_mut(),
        btree_map::Entry::Vacant(v) => {
            let value = db.get_subkey(key, version, &fragment_sub(start))?;
            v.insert(value.map_or_else(Vec::new, |v| v.to_vec()))
        }
    })
}

impl<B: KvBackend> Db<'_, B> {
    /// Opens the bits of `key` for reading and writing. A missing key is `None`, or with
    /// `create` a new empty value: a Kvrocks bitmap under a fresh version, or a string
    /// while [`Db::bitmap_strings`] is on.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a key of another type; storage errors.
    pub(crate) fn open_bits(&self, key: &[u8], create: bool) -> CommandResult<Option<Bits>> {
        let bitmap = |meta| Bits::Fragments { meta, loaded: BTreeMap::new(), dirty: BTreeSet::new() };
        Ok(match self.lookup(key)? {
            Some(e) if e.meta.ty == RedisType::String => {
                Some(Bits::Str { value: e.value.to_vec(), expire_ms: e.meta.expire_ms })
            }
            Some(e) if e.meta.ty == RedisType::Bitmap => Some(bitmap(e.meta)),
            Some(_) => return Err(CommandError::WrongType),
            None if !create => None,
            None if self.bitmap_strings() => Some(Bits::Str { value: Vec::new(), expire_ms: 0 }),
            None => Some(bitmap(self.new_collection(RedisType::Bitmap))),
        })
    }

    /// A read-only view of `key`'s bits: a string's value, or a bitmap's fragments turned
    /// into Redis' bit order and cut to its size. `None` when missing.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a key of another type; storage errors.
    pub(crate) fn bit_view(&self, key: &[u8]) -> CommandResult<Option<Sparse>> {
        match self.lookup(key)? {
            None => Ok(None),
            Some(e) if e.meta.ty == RedisType::String => Ok(Some(Sparse::of_string(e.value))),
            Some(e) if e.meta.ty == RedisType::Bitmap => Ok(Some(self.fragments_view(key, &e.meta)?)),
            Some(_) => Err(CommandError::WrongType),
        }
    }

    /// Every fragment of a bitmap, in Redis' bit order. Subkeys that do not name a
    /// fragment (not a decimal multiple of 1024) are ignored.
    fn fragments_view(&self, key: &[u8], meta: &Metadata<'_>) -> CommandResult<Sparse> {
        let mut pieces = Vec::new();
        for item in self.scan_subkeys(key, meta.version, Direction::Forward)? {
            let (sub, value) = item?;
            let Some(start) = std::str::from_utf8(&sub).ok().and_then(|s| s.parse::<u64>().ok()) else {
                continue;
            };
            if start % FRAGMENT_BYTES != 0 || start >= meta.size || fragment_sub(start) != sub[..] {
                continue;
            }
            let valid = (value.len() as u64).min(FRAGMENT_BYTES).min(meta.size - start) as usize;
            let bytes: Vec<u8> = value[..valid].iter().map(|b| b.reverse_bits()).collect();
            if !bytes.is_empty() {
                pieces.push((start, Bytes::from(bytes)));
            }
        }
        // Decimal names do not sort numerically ("10240" < "2048").
        pieces.sort_unstable_by_key(|(start, _)| *start);
        Ok(Sparse { len: meta.size, pieces })
    }

    /// A bitmap key's value as the equivalent string (for GET, STRLEN, APPEND…).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn bitmap_string(&self, key: &[u8], meta: &Metadata<'_>) -> CommandResult<Bytes> {
        Ok(Bytes::from(self.fragments_view(key, meta)?.to_vec()))
    }

    /// Queues `value` as the whole new value of `key` (no expiry): a Kvrocks bitmap with
    /// only its non-zero fragments, or a string while [`Db::bitmap_strings`] is on.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn queue_bits(&self, batch: &mut WriteBatch, key: &[u8], value: &[u8]) -> CommandResult<()> {
        if self.bitmap_strings() {
            self.put_metadata(batch, key, &Metadata::string(value, 0));
            return Ok(());
        }
        let mut meta = self.new_collection(RedisType::Bitmap);
        meta.size = value.len() as u64;
        for (i, chunk) in value.chunks(FRAGMENT_BYTES as usize).enumerate() {
            if chunk.iter().any(|&b| b != 0) {
                let swapped: Vec<u8> = chunk.iter().map(|b| b.reverse_bits()).collect();
                let sub = fragment_sub(i as u64 * FRAGMENT_BYTES);
                batch.put(ColumnFamily::Subkey, self.subkey(key, meta.version, &sub)?, swapped);
            }
        }
        self.put_metadata(batch, key, &meta);
        Ok(())
    }
}
