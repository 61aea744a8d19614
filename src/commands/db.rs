//! [`Db`]: the database over a backend, and the helpers every type family shares.

use std::sync::Arc;

use bytes::Bytes;

use super::cursor::CursorStore;
use super::error::{CommandError, CommandResult};
use crate::backend::{Direction, KvBackend, ScanIter, WriteBatch};
use crate::codec::{Clock, ColumnFamily, KeyLayout, Metadata, RedisType, SystemClock, VersionGenerator};

/// How many logical databases `SELECT` accepts (Redis' default `databases 16`).
pub const DATABASES: usize = 16;

/// A live key's metadata, with a string's value split off as `Bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The decoded metadata; `value` is empty (the bytes are in [`Entry::value`]).
    pub meta: Metadata<'static>,
    /// A string's value; empty for collections.
    pub value: Bytes,
}

/// A Redis database over a [`KvBackend`].
///
/// `SELECT n` switches the namespace records are written under: database 0 uses the
/// layout's namespace (`__namespace` by default), database `n > 0` uses that namespace
/// followed by `:n`, so databases never see each other's keys.
pub struct Db<B> {
    backend: B,
    clock: Arc<dyn Clock>,
    versions: &'static VersionGenerator,
    base_layout: KeyLayout,
    layout: KeyLayout,
    index: usize,
    blind_write: bool,
    bitmap_strings: bool,
    pub(crate) cursors: CursorStore,
    rng: u64,
}

impl<B: KvBackend> Db<B> {
    /// A database with the default (Kvrocks standalone) layout and the system clock.
    pub fn new(backend: B) -> Self {
        Db::with_layout(backend, KeyLayout::default())
    }

    /// A database writing records with `layout`.
    pub fn with_layout(backend: B, layout: KeyLayout) -> Self {
        Db {
            backend,
            clock: Arc::new(SystemClock),
            versions: VersionGenerator::global(),
            base_layout: layout.clone(),
            layout,
            index: 0,
            blind_write: false,
            bitmap_strings: false,
            cursors: CursorStore::default(),
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// Replaces the clock (tests use [`crate::codec::ManualClock`]).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Seeds the generator behind SPOP, SRANDMEMBER, RANDOMKEY and friends.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.rng = seed | 1;
        self
    }

    /// Turns blind-write mode on or off for hashes and sets (LAYOUT.md, extensions).
    pub fn set_blind_write(&mut self, on: bool) {
        self.blind_write = on;
    }

    /// Whether blind-write mode is on.
    pub fn blind_write(&self) -> bool {
        self.blind_write
    }

    /// Picks how SETBIT, BITFIELD and BITOP create a key: `false` (the default) a Kvrocks
    /// bitmap in 1024-byte fragments, `true` a string like Redis. Existing keys keep their
    /// representation either way.
    pub fn set_bitmap_strings(&mut self, on: bool) {
        self.bitmap_strings = on;
    }

    /// Whether new bitmaps are strings ([`Db::set_bitmap_strings`]).
    pub fn bitmap_strings(&self) -> bool {
        self.bitmap_strings
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend, mutably (for maintenance such as [`crate::gc`]).
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// Gives the backend back.
    pub fn into_backend(self) -> B {
        self.backend
    }

    /// The layout of the selected database.
    pub fn layout(&self) -> &KeyLayout {
        &self.layout
    }

    /// The selected database index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Switches to database `index`.
    ///
    /// # Errors
    /// "ERR DB index is out of range" past [`DATABASES`]; a storage error when the
    /// namespace would exceed 255 bytes.
    pub fn select(&mut self, index: usize) -> CommandResult<()> {
        if index >= DATABASES {
            return Err(CommandError::err("DB index is out of range"));
        }
        self.layout = self.layout_of(index)?;
        self.index = index;
        Ok(())
    }

    /// The layout database `index` writes with.
    pub(crate) fn layout_of(&self, index: usize) -> CommandResult<KeyLayout> {
        if index == 0 {
            return Ok(self.base_layout.clone());
        }
        let mut ns = self.base_layout.namespace().to_vec();
        ns.extend_from_slice(format!(":{index}").as_bytes());
        Ok(self.base_layout.clone().with_namespace(&ns)?)
    }

    /// The clock's time in unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// A fresh collection version.
    pub fn new_version(&self) -> u64 {
        self.versions.next(self.clock.now_us())
    }

    /// The next pseudo-random number (xorshift64*).
    pub fn random_u64(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The metadata key of `key` in the selected database.
    pub fn metadata_key(&self, key: &[u8]) -> Vec<u8> {
        self.layout.metadata_key(key)
    }

    /// The subkey of `sub` under `key` at `version`.
    ///
    /// # Errors
    /// A storage error for a key over 4 GiB.
    pub fn subkey(&self, key: &[u8], version: u64, sub: &[u8]) -> CommandResult<Vec<u8>> {
        Ok(self.layout.subkey(key, version, sub)?)
    }

    /// Reads a key's metadata: `None` when missing, expired, or an empty collection.
    ///
    /// # Errors
    /// A storage error when the backend fails or the record does not decode.
    pub fn lookup(&self, key: &[u8]) -> CommandResult<Option<Entry>> {
        self.lookup_in(&self.layout, key)
    }

    /// [`Db::lookup`] in another database's layout (COPY … DB n).
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub(crate) fn lookup_in(&self, layout: &KeyLayout, key: &[u8]) -> CommandResult<Option<Entry>> {
        let Some(raw) = self.backend.get(ColumnFamily::Metadata, &layout.metadata_key(key))? else {
            return Ok(None);
        };
        let meta = Metadata::decode(&raw)?;
        if !meta.is_live(self.now_ms()) {
            return Ok(None);
        }
        let value = raw.slice_ref(meta.value);
        Ok(Some(Entry { meta: Metadata { value: &[], ..meta }, value }))
    }

    /// [`Db::lookup`] for a key that must hold `ty` when it exists.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] when it holds another type; storage errors.
    pub fn lookup_of(&self, key: &[u8], ty: RedisType) -> CommandResult<Option<Metadata<'static>>> {
        match self.lookup(key)? {
            None => Ok(None),
            Some(e) if e.meta.ty == ty => Ok(Some(e.meta)),
            Some(_) => Err(CommandError::WrongType),
        }
    }

    /// The value of a string key; a bitmap reads as the equivalent string.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a collection; storage errors.
    pub fn lookup_string(&self, key: &[u8]) -> CommandResult<Option<Bytes>> {
        match self.lookup_stringlike(key)? {
            None => Ok(None),
            Some(e) if e.meta.ty == RedisType::String => Ok(Some(e.value)),
            Some(_) => Err(CommandError::WrongType),
        }
    }

    /// [`Db::lookup`], with a bitmap turned into the string Redis would hold (type String,
    /// same expiry), for the string commands.
    ///
    /// # Errors
    /// As [`Db::lookup`].
    pub fn lookup_stringlike(&self, key: &[u8]) -> CommandResult<Option<Entry>> {
        match self.lookup(key)? {
            Some(e) if e.meta.ty == RedisType::Bitmap => {
                let value = self.bitmap_string(key, &e.meta)?;
                Ok(Some(Entry { meta: Metadata::string(&[], e.meta.expire_ms), value }))
            }
            other => Ok(other),
        }
    }

    /// The metadata of `key` if it holds `ty`, else a new empty collection of `ty` under a
    /// fresh version (a missing, expired or deleted key starts over).
    ///
    /// # Errors
    /// As [`Db::lookup_of`].
    pub fn lookup_or_create(&self, key: &[u8], ty: RedisType) -> CommandResult<Metadata<'static>> {
        Ok(match self.lookup_of(key, ty)? {
            Some(meta) => meta,
            None => self.new_collection(ty),
        })
    }

    /// A new, empty collection of `ty` under a fresh version; hashes and sets are
    /// blind-write while [`Db::blind_write`] is on.
    pub fn new_collection(&self, ty: RedisType) -> Metadata<'static> {
        let mut meta = Metadata::collection(ty, self.new_version());
        meta.blind_write = self.blind_write && matches!(ty, RedisType::Hash | RedisType::Set);
        meta
    }

    /// Queues the metadata record of `key`.
    pub fn put_metadata(&self, batch: &mut WriteBatch, key: &[u8], meta: &Metadata<'_>) {
        batch.put(ColumnFamily::Metadata, self.metadata_key(key), meta.to_vec());
    }

    /// Queues the metadata of a collection after an edit: deleted when it became empty
    /// (an empty collection does not exist), written otherwise.
    pub fn put_collection(&self, batch: &mut WriteBatch, key: &[u8], meta: &Metadata<'_>) {
        if meta.size == 0 && !meta.blind_write {
            self.delete_key(batch, key);
        } else {
            self.put_metadata(batch, key, meta);
        }
    }

    /// Queues the deletion of `key`: its metadata record only, O(1) whatever the size; the
    /// subkeys become garbage for [`crate::gc`].
    pub fn delete_key(&self, batch: &mut WriteBatch, key: &[u8]) {
        batch.delete(ColumnFamily::Metadata, self.metadata_key(key));
    }

    /// Reads one subkey's value.
    ///
    /// # Errors
    /// Storage errors.
    pub fn get_subkey(&self, key: &[u8], version: u64, sub: &[u8]) -> CommandResult<Option<Bytes>> {
        Ok(self.backend.get(ColumnFamily::Subkey, &self.subkey(key, version, sub)?)?)
    }

    /// Walks the subkeys of `key` at `version` lazily, yielding `(sub, value)`.
    ///
    /// # Errors
    /// Storage errors, when starting or from any item.
    pub fn scan_subkeys(
        &self,
        key: &[u8],
        version: u64,
        direction: Direction,
    ) -> CommandResult<impl Iterator<Item = CommandResult<(Bytes, Bytes)>> + '_> {
        let prefix_len = self.layout.subkey_prefix(key, version, 0)?.len();
        let iter: ScanIter<'_> =
            self.backend.scan(ColumnFamily::Subkey, &self.layout.subkey_range(key, version)?, direction)?;
        Ok(iter.map(move |item| {
            let (k, v) = item?;
            Ok((k.slice(prefix_len..), v))
        }))
    }

    /// Applies a command's writes as one atomic batch (nothing for an empty batch).
    ///
    /// # Errors
    /// Storage errors.
    pub fn commit(&mut self, batch: WriteBatch) -> CommandResult<()> {
        if !batch.is_empty() {
            self.backend.write(batch)?;
        }
        Ok(())
    }
}
