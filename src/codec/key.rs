//! Record keys: metadata keys, subkeys and score keys, and the scan ranges over them.
//!
//! Kvrocks ([`LayoutKind::Kvrocks`], the default):
//! ```text
//! metadata key: [fixed prefix][ns_len u8][ns][slot u16]?[md5 N]?[user key]
//! subkey:       [fixed prefix][ns_len u8][ns][slot u16]?[md5 N]?[key_len u32][user key][version u64][sub]
//! score key:    [fixed prefix][ns_len u8][ns][slot u16]?[md5 N]?[key_len u32][user key][version u64][score 8][member]
//! ```
//! NeoKV ([`LayoutKind::NeoKv`]): the namespace is the region id and index id (8 bytes each,
//! big-endian with the sign bit flipped), without a length byte; the slot is always there; the
//! metadata key carries the key length too.
//! ```text
//! metadata key: [region 8][index 8][slot u16][key_len u32][user key]
//! subkey:       [region 8][index 8][slot u16][key_len u32][user key][version u64][sub]
//! score key:    [region 8][index 8][slot u16][key_len u32][user key][version u64][score 8][member]
//! legacy string (subkey column family): [metadata key]['S']
//! ```
//! camellia ([`LayoutKind::Camellia`]): a two-byte tag per record, the namespace without a
//! length (so decoders read only their own), the md5 spread prefix of its older releases
//! as an option, raw IEEE scores ([`super::camellia`]).
//! ```text
//! metadata key: m#[ns][md5 N]?[user key]
//! subkey:       s#[ns][md5 N]?[key_len u32][user key][version u64][sub]
//! score key:    k#[ns][md5 N]?[key_len u32][user key][version u64][score bits 8][member]
//! ```
//! The default layout (no fixed prefix, no slot, no md5, namespace `__namespace`) is Kvrocks'.
//! Decoders read the namespace from the bytes, so one layout decodes the records of every
//! namespace (what a compaction filter needs); the fixed prefix must match.

use bytes::BufMut;
use md5::{Digest, Md5};

use super::double::{decode_f64_slice, encode_f64};
use super::metadata::{Metadata, peek_type_and_expire};
use super::reader::Reader;
use super::slot::key_slot;
use super::types::RedisType;
use super::version::Version;
use super::{camellia, titea};
use crate::error::{Error, Result};

/// The namespace of the default layout (Kvrocks' default).
pub const DEFAULT_NAMESPACE: &[u8] = b"__namespace";

/// The type tag NeoKV's first encoding put after the user key of a string record.
pub(crate) const NEOKV_LEGACY_STRING_TAG: u8 = b'S';

/// Which system's key framing a [`KeyLayout`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayoutKind {
    /// Apache Kvrocks: `[ns_len][ns]` namespace, optional slot, no key length in metadata keys.
    Kvrocks,
    /// NeoKV: region id + index id, always a slot, the key length in every key; strings of
    /// its first encoding are read from the subkey column family and moved when written.
    NeoKv,
    /// camellia-redis-proxy-kv: `m#` / `s#` / `k#` then the namespace (no length), its own
    /// metadata values ([`super::camellia`]), raw IEEE scores, no lists.
    Camellia,
    /// TiTea (Redis on TiKV): `kv<namespace>` then `m` + key, or `d` + a 16-byte object id
    /// (no key) + element; its metadata values ([`super::titea`]); expire and GC index
    /// records kept beside them.
    TiTea,
}

impl LayoutKind {
    /// The name `--layout` and the manifests use: `kvrocks`, `neokv`.
    pub fn name(self) -> &'static str {
        match self {
            LayoutKind::Kvrocks => "kvrocks",
            LayoutKind::NeoKv => "neokv",
            LayoutKind::Camellia => "camellia",
            LayoutKind::TiTea => "titea",
        }
    }
}

/// How keys are laid out: system, fixed prefix, namespace, cluster slot, md5 spread prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLayout {
    kind: LayoutKind,
    fixed_prefix: Vec<u8>,
    namespace: Vec<u8>,
    cluster_slots: bool,
    hash_prefix_len: usize,
    /// camellia: the hash and set types written with encode version 1 (no count).
    uncounted: Uncounted,
    /// `fixed_prefix ++ [ns_len] ++ namespace` (NeoKV: `fixed_prefix ++ namespace`), the
    /// start of every record; camellia: `namespace`, after the fixed prefix and its tag.
    head: Vec<u8>,
}

/// camellia: which collection types are written uncounted (encode version 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Uncounted {
    hash: bool,
    set: bool,
}

/// Which record a key is: camellia tags each with `m#`, `s#` or `k#`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Metadata,
    Subkey,
    Score,
}

impl Tag {
    /// TiTea's record type byte: `m` for metadata, `d` for every element record.
    fn titea(self) -> u8 {
        match self {
            Tag::Metadata => b'm',
            Tag::Subkey | Tag::Score => b'd',
        }
    }

    fn camellia(self) -> [u8; 2] {
        match self {
            Tag::Metadata => *b"m#",
            Tag::Subkey => *b"s#",
            Tag::Score => *b"k#",
        }
    }
}

impl Default for KeyLayout {
    fn default() -> Self {
        KeyLayout::new(DEFAULT_NAMESPACE).expect("default namespace fits")
    }
}

impl KeyLayout {
    /// Kvrocks standalone layout with the given namespace.
    ///
    /// # Errors
    /// [`Error::NamespaceTooLong`] for a namespace over 255 bytes.
    pub fn new(namespace: &[u8]) -> Result<Self> {
        let mut layout = KeyLayout::bare(LayoutKind::Kvrocks, false);
        layout.set_namespace(namespace)?;
        Ok(layout)
    }

    /// camellia-redis-proxy-kv's layout for `namespace`: `m#<ns><key>`,
    /// `s#<ns><key_len><key><version><sub>`, `k#<ns><key_len><key><version><score><member>`,
    /// every collection counted (encode version 0) until [`KeyLayout::with_encode_version`].
    pub fn camellia(namespace: &[u8]) -> Self {
        let mut layout = KeyLayout::bare(LayoutKind::Camellia, false);
        layout.set_namespace(namespace).expect("any namespace fits");
        layout
    }

    /// TiTea's layout for `namespace` (its `group.service` names; `default.default` is its
    /// database 0): `kv<ns>m<key>`, `kv<ns>d<id 16><element>`, 16-byte object ids.
    pub fn titea(namespace: &[u8]) -> Self {
        let mut layout = KeyLayout::bare(LayoutKind::TiTea, false);
        layout.set_namespace(namespace).expect("any namespace fits");
        layout
    }

    /// How many bytes a collection's version takes in its records: 16 for TiTea's object
    /// ids, 8 elsewhere.
    pub fn version_len(&self) -> usize {
        if self.kind == LayoutKind::TiTea { 16 } else { 8 }
    }

    /// camellia: writes new hashes or sets with encode `version` 0 (counted) or 1 (no count:
    /// blind writes, HLEN/SCARD scan). Sorted sets and strings have version 0 only.
    ///
    /// # Errors
    /// [`Error::LayoutMismatch`] for another layout, another type, or another version.
    pub fn with_encode_version(mut self, ty: RedisType, version: u8) -> Result<Self> {
        if self.kind != LayoutKind::Camellia || version > 1 {
            return Err(Error::LayoutMismatch("camellia writes encode version 0 or 1"));
        }
        match ty {
            RedisType::Hash => self.uncounted.hash = version == 1,
            RedisType::Set => self.uncounted.set = version == 1,
            _ if version == 0 => {}
            _ => return Err(Error::LayoutMismatch("camellia writes version 1 for hashes and sets only")),
        }
        Ok(self)
    }

    /// camellia: the encode version new collections of `ty` are written with (0 elsewhere).
    pub fn encode_version(&self, ty: RedisType) -> u8 {
        u8::from(self.writes_uncounted(ty))
    }

    /// Whether new collections of `ty` keep no count (camellia encode version 1).
    pub(crate) fn writes_uncounted(&self, ty: RedisType) -> bool {
        match ty {
            RedisType::Hash => self.uncounted.hash,
            RedisType::Set => self.uncounted.set,
            _ => false,
        }
    }

    /// NeoKV's layout for one region and index (table): `[region][index][slot][key_len][key]`.
    pub fn neokv(region_id: i64, index_id: i64) -> Self {
        let mut layout = KeyLayout::bare(LayoutKind::NeoKv, true);
        layout.set_namespace(&neokv_namespace(region_id, index_id)).expect("16 bytes fit");
        layout
    }

    /// A layout of `kind` with no namespace set yet.
    fn bare(kind: LayoutKind, cluster_slots: bool) -> Self {
        KeyLayout {
            kind,
            fixed_prefix: Vec::new(),
            namespace: Vec::new(),
            cluster_slots,
            hash_prefix_len: 0,
            uncounted: Uncounted::default(),
            head: Vec::new(),
        }
    }

    fn set_namespace(&mut self, namespace: &[u8]) -> Result<()> {
        self.head.clear();
        // camellia's tag goes between the fixed prefix and the namespace: see `put_route`.
        match self.kind {
            LayoutKind::Camellia => {}
            LayoutKind::TiTea => self.head.extend_from_slice(titea::SYSTEM_PREFIX),
            _ => self.head.extend_from_slice(&self.fixed_prefix),
        }
        match self.kind {
            LayoutKind::Kvrocks => {
                let len =
                    u8::try_from(namespace.len()).map_err(|_| Error::NamespaceTooLong(namespace.len()))?;
                self.head.push(len);
            }
            LayoutKind::NeoKv if namespace.len() != NEOKV_NAMESPACE_LEN => {
                return Err(Error::LayoutMismatch("a neokv namespace is a region id and an index id"));
            }
            LayoutKind::NeoKv | LayoutKind::Camellia | LayoutKind::TiTea => {}
        }
        self.namespace = namespace.to_vec();
        self.head.extend_from_slice(namespace);
        Ok(())
    }

    /// The same layout with another namespace (NeoKV: the 16 bytes of region id and index id).
    ///
    /// # Errors
    /// [`Error::NamespaceTooLong`] for a namespace over 255 bytes; for NeoKV,
    /// [`Error::LayoutMismatch`] unless it is 16 bytes.
    pub fn with_namespace(mut self, namespace: &[u8]) -> Result<Self> {
        self.set_namespace(namespace)?;
        Ok(self)
    }

    /// The layout Redis database `index` writes with: database 0 is this layout; Kvrocks
    /// appends `:<index>` to the namespace, NeoKV adds `index` to the index id, camellia
    /// (whose namespaces carry no length, so one may not begin another) puts `<index>:`
    /// before the namespace.
    ///
    /// # Errors
    /// [`Error::NamespaceTooLong`] when the suffixed namespace passes 255 bytes; for
    /// camellia, [`Error::LayoutMismatch`] when one of the two namespaces begins the other.
    pub fn for_database(&self, index: usize) -> Result<Self> {
        if index == 0 {
            return Ok(self.clone());
        }
        match self.kind {
            LayoutKind::Kvrocks => {
                let mut ns = self.namespace.clone();
                ns.extend_from_slice(format!(":{index}").as_bytes());
                self.clone().with_namespace(&ns)
            }
            LayoutKind::NeoKv => {
                let (region, table) = self.neokv_ids().unwrap_or_default();
                let table = table.wrapping_add(i64::try_from(index).unwrap_or(i64::MAX));
                self.clone().with_namespace(&neokv_namespace(region, table))
            }
            LayoutKind::TiTea => {
                let mut ns = self.namespace.clone();
                ns.extend_from_slice(format!(":{index}").as_bytes());
                self.clone().with_namespace(&ns)
            }
            LayoutKind::Camellia => {
                let mut ns = format!("{index}:").into_bytes();
                ns.extend_from_slice(&self.namespace);
                if ns.starts_with(&self.namespace) {
                    return Err(Error::LayoutMismatch("a camellia namespace begins another database's"));
                }
                self.clone().with_namespace(&ns)
            }
        }
    }

    /// Which system's framing this layout writes.
    pub fn kind(&self) -> LayoutKind {
        self.kind
    }

    /// Whether this layout's system has a type id for `ty`: every type for Kvrocks; string,
    /// hash, list, set and sorted set for NeoKV (bitmaps are then strings, as in Redis); the
    /// same but lists for camellia (camellia-kv has no list commands).
    pub fn stores(&self, ty: RedisType) -> bool {
        match self.kind {
            LayoutKind::Kvrocks => true,
            LayoutKind::NeoKv => matches!(
                ty,
                RedisType::String | RedisType::Hash | RedisType::List | RedisType::Set | RedisType::ZSet
            ),
            LayoutKind::Camellia => {
                matches!(ty, RedisType::String | RedisType::Hash | RedisType::Set | RedisType::ZSet)
            }
            LayoutKind::TiTea => titea::type_byte(ty).is_some(),
        }
    }

    /// Reads a metadata value as this layout's system writes it (camellia:
    /// [`super::camellia::decode_metadata`]; else [`Metadata::decode`]).
    ///
    /// # Errors
    /// As those functions.
    pub fn decode_metadata<'a>(&self, bytes: &'a [u8]) -> Result<Metadata<'a>> {
        match self.kind {
            LayoutKind::Camellia => camellia::decode_metadata(bytes),
            LayoutKind::TiTea => titea::decode_metadata(bytes),
            _ => Metadata::decode(bytes),
        }
    }

    /// The metadata value of `meta` as this layout's system writes it.
    ///
    /// # Errors
    /// [`Error::UnsupportedType`] for a type the system cannot store
    /// ([`KeyLayout::stores`]); [`Error::LayoutMismatch`] for a collection's version of the
    /// other [`Version`] variant.
    pub fn encode_metadata(&self, meta: &Metadata<'_>) -> Result<Vec<u8>> {
        if !self.stores(meta.ty) {
            return Err(Error::UnsupportedType { name: meta.ty.name(), id: meta.ty as u8 });
        }
        match self.kind {
            LayoutKind::Camellia => {
                let mut out = Vec::with_capacity(22 + meta.value.len());
                camellia::encode_metadata(meta, &mut out)?;
                Ok(out)
            }
            LayoutKind::TiTea => {
                let mut out = Vec::with_capacity(57 + meta.value.len());
                titea::encode_metadata(meta, &mut out)?;
                Ok(out)
            }
            _ => {
                if meta.ty.is_collection() {
                    meta.version.short()?;
                }
                Ok(meta.to_vec())
            }
        }
    }

    /// The type and expiry of a metadata value (see [`peek_type_and_expire`]).
    ///
    /// # Errors
    /// As [`KeyLayout::decode_metadata`] for those fields.
    pub fn peek_type_and_expire(&self, bytes: &[u8]) -> Result<(RedisType, u64)> {
        match self.kind {
            LayoutKind::Camellia => camellia::peek_type_and_expire(bytes),
            LayoutKind::TiTea => titea::decode_metadata(bytes).map(|m| (m.ty, m.expire_ms)),
            _ => peek_type_and_expire(bytes),
        }
    }

    /// The value of a sorted-set member's subkey: the score's 8 ordered bytes, or for
    /// camellia its decimal text.
    ///
    /// # Errors
    /// [`Error::NanScore`] for NaN.
    pub fn encode_member_score(&self, score: f64) -> Result<Vec<u8>> {
        match self.kind {
            LayoutKind::Camellia if score.is_nan() => Err(Error::NanScore),
            LayoutKind::Camellia => Ok(camellia::java_double_string(score + 0.0).into_bytes()),
            LayoutKind::TiTea if score.is_nan() => Err(Error::NanScore),
            LayoutKind::TiTea => Ok(titea::score_text(score).into_bytes()),
            _ => Ok(encode_f64(score)?.to_vec()),
        }
    }

    /// The score in a sorted-set member's subkey value ([`KeyLayout::encode_member_score`]).
    ///
    /// # Errors
    /// As [`decode_f64_slice`]; for camellia and TiTea, [`Error::InvalidField`] for text that
    /// is not a decimal number those systems read.
    pub fn decode_member_score(&self, bytes: &[u8]) -> Result<f64> {
        match self.kind {
            LayoutKind::Camellia => camellia::decode_member_score(bytes),
            LayoutKind::TiTea => titea::decode_score_text(bytes),
            _ => decode_f64_slice(bytes),
        }
    }

    /// The 8 bytes of a score in a score key (ordered, or camellia's raw IEEE bits).
    ///
    /// # Errors
    /// [`Error::NanScore`] for NaN.
    pub fn encode_score(&self, score: f64) -> Result<[u8; 8]> {
        match self.kind {
            LayoutKind::Camellia => camellia::encode_raw_score(score),
            _ => encode_f64(score),
        }
    }

    /// The score of a score key's 8 score bytes.
    ///
    /// # Errors
    /// As [`decode_f64_slice`].
    pub fn decode_score(&self, bytes: &[u8]) -> Result<f64> {
        match self.kind {
            LayoutKind::Camellia => camellia::decode_raw_score(bytes),
            _ => decode_f64_slice(bytes),
        }
    }

    /// Whether score keys sort by score (camellia's raw IEEE bits put negative scores after
    /// the positive ones, largest magnitude last).
    pub(crate) fn scores_ordered(&self) -> bool {
        self.kind != LayoutKind::Camellia
    }

    /// NeoKV's region id and index id (`None` for Kvrocks).
    pub fn neokv_ids(&self) -> Option<(i64, i64)> {
        (self.kind == LayoutKind::NeoKv).then(|| neokv_ids(&self.namespace)).flatten()
    }

    /// Writes the 2-byte cluster slot of the user key after the namespace when `on`. NeoKV
    /// always writes it: the call changes nothing there.
    pub fn with_cluster_slots(mut self, on: bool) -> Self {
        self.cluster_slots = on || self.kind == LayoutKind::NeoKv;
        self
    }

    /// Where NeoKV's first encoding kept the string whose metadata key is `metadata_key`
    /// (in the subkey column family): the metadata key and `'S'`. `None` for Kvrocks.
    pub fn legacy_string_key(&self, metadata_key: &[u8]) -> Option<Vec<u8>> {
        (self.kind == LayoutKind::NeoKv).then(|| {
            let mut key = Vec::with_capacity(metadata_key.len() + 1);
            key.extend_from_slice(metadata_key);
            key.push(NEOKV_LEGACY_STRING_TAG);
            key
        })
    }

    /// The metadata key of a record of NeoKV's first encoding (`None` when `key` is not one):
    /// what [`KeyLayout::legacy_string_key`] inverts.
    pub fn decode_legacy_string_key<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        let mkey = key.strip_suffix(&[NEOKV_LEGACY_STRING_TAG])?;
        (self.kind == LayoutKind::NeoKv && self.decode_metadata_key(mkey).is_ok()).then_some(mkey)
    }

    /// Puts `prefix` before every record (NeoKV writes region id + index id there).
    pub fn with_fixed_prefix(mut self, prefix: &[u8]) -> Self {
        self.fixed_prefix = prefix.to_vec();
        let ns = std::mem::take(&mut self.namespace);
        self.set_namespace(&ns).expect("namespace was valid");
        self
    }

    /// Puts the first `len` bytes of md5(user key) before the user key (camellia's spread
    /// prefix); 0 turns it off.
    ///
    /// # Errors
    /// [`Error::HashPrefixTooLong`] for more than 16 bytes.
    pub fn with_hash_prefix(mut self, len: usize) -> Result<Self> {
        if len > 16 {
            return Err(Error::HashPrefixTooLong(len));
        }
        self.hash_prefix_len = len;
        Ok(self)
    }

    /// The namespace records are written under.
    pub fn namespace(&self) -> &[u8] {
        &self.namespace
    }

    /// Whether the cluster slot is written.
    pub fn cluster_slots(&self) -> bool {
        self.cluster_slots
    }

    /// The fixed prefix before every record.
    pub fn fixed_prefix(&self) -> &[u8] {
        &self.fixed_prefix
    }

    /// How many md5 bytes go before the user key.
    pub fn hash_prefix_len(&self) -> usize {
        self.hash_prefix_len
    }

    /// `key` with its route (cluster slot, md5 prefix) worked out once. Every record key of
    /// one command can be built from it, so the md5 spread prefix costs one hash per
    /// command rather than one per record.
    pub fn routed<'a>(&'a self, key: &'a [u8]) -> RoutedKey<'a> {
        let mut hash = [0u8; 16];
        if self.hash_prefix_len > 0 {
            hash = Md5::digest(key).into();
        }
        let slot = self.cluster_slots.then(|| key_slot(key));
        RoutedKey { layout: self, key, slot, hash }
    }

    /// Whether record keys start `[ns_len][ns]` and nothing else (Kvrocks without cluster
    /// slots or an md5 prefix, what most servers run): no route to work out per key.
    fn plain_route(&self) -> bool {
        self.kind == LayoutKind::Kvrocks && !self.cluster_slots && self.hash_prefix_len == 0
    }

    /// Writes the metadata key of `key`: `[prefix][ns_len][ns][slot]?[md5]?[key]`.
    pub fn encode_metadata_key(&self, key: &[u8], out: &mut impl BufMut) {
        self.routed(key).encode_metadata_key(out);
    }

    /// The metadata key of `key`, in a new vector.
    pub fn metadata_key(&self, key: &[u8]) -> Vec<u8> {
        if self.plain_route() {
            return plain_metadata_key(&self.head, key);
        }
        self.routed(key).metadata_key()
    }

    /// The prefix shared by every subkey and score key of `key` at `version`
    /// (`[prefix][ns_len][ns][slot]?[md5]?[key_len u32][key][version u64]`), in a new vector
    /// with room for `extra` bytes.
    ///
    /// # Errors
    /// [`Error::KeyTooLong`] for a key over `u32::MAX` bytes; [`Error::LayoutMismatch`] for a
    /// [`Version`] of the other variant than the layout's.
    pub fn subkey_prefix(&self, key: &[u8], version: Version, extra: usize) -> Result<Vec<u8>> {
        if self.plain_route() {
            return plain_record_key(&self.head, key, version, &[], extra);
        }
        self.routed(key).subkey_prefix(version, extra)
    }

    /// Writes a subkey: the subkey prefix then `sub` (hash field, set member, zset member,
    /// or a list index as u64 big-endian).
    ///
    /// # Errors
    /// As [`KeyLayout::subkey_prefix`].
    pub fn encode_subkey(
        &self,
        key: &[u8],
        version: Version,
        sub: &[u8],
        out: &mut impl BufMut,
    ) -> Result<()> {
        self.routed(key).encode_subkey(version, sub, out)
    }

    /// The subkey of `sub`, in a new vector.
    ///
    /// # Errors
    /// As [`KeyLayout::subkey_prefix`].
    pub fn subkey(&self, key: &[u8], version: Version, sub: &[u8]) -> Result<Vec<u8>> {
        if self.plain_route() {
            return plain_record_key(&self.head, key, version, sub, 0);
        }
        self.routed(key).subkey(version, sub)
    }

    /// Writes a score key: the subkey prefix, the ordered score, then the member.
    ///
    /// # Errors
    /// As [`KeyLayout::subkey_prefix`], and [`Error::NanScore`] for NaN.
    pub fn encode_score_key(
        &self,
        key: &[u8],
        version: Version,
        score: f64,
        member: &[u8],
        out: &mut impl BufMut,
    ) -> Result<()> {
        self.routed(key).encode_score_key(version, score, member, out)
    }

    /// The score key of `member` with `score`, in a new vector.
    ///
    /// # Errors
    /// As [`KeyLayout::encode_score_key`].
    pub fn score_key(&self, key: &[u8], version: Version, score: f64, member: &[u8]) -> Result<Vec<u8>> {
        self.routed(key).score_key(version, score, member)
    }

    /// Every subkey of `key` at `version`, and no other record.
    ///
    /// # Errors
    /// As [`KeyLayout::subkey_prefix`].
    pub fn subkey_range(&self, key: &[u8], version: Version) -> Result<KeyRange> {
        Ok(KeyRange::prefix(self.subkey_prefix(key, version, 0)?))
    }

    /// Every score key of `key` at `version`, starting at `from` (inclusive) when given.
    ///
    /// # Errors
    /// As [`KeyLayout::subkey_prefix`], and [`Error::NanScore`] for a NaN bound.
    pub fn score_range(&self, key: &[u8], version: Version, from: Option<f64>) -> Result<KeyRange> {
        let mut range = KeyRange::prefix(self.score_prefix(key, version, 0)?);
        if let Some(score) = from {
            range.start.extend_from_slice(&self.encode_score(score)?);
        }
        Ok(range)
    }

    /// The prefix shared by the score keys of `key` at `version` (the subkey prefix, but
    /// camellia's `k#` where its subkeys have `s#`), with room for `extra` bytes.
    ///
    /// # Errors
    /// As [`KeyLayout::subkey_prefix`].
    pub fn score_prefix(&self, key: &[u8], version: Version, extra: usize) -> Result<Vec<u8>> {
        self.routed(key).score_prefix(version, extra)
    }

    /// The prefix of the member records of the sorted set `key` at `version`: the subkey
    /// prefix, and TiTea's marker byte 0 (which tells them from its score records).
    ///
    /// # Errors
    /// As [`KeyLayout::subkey_prefix`].
    pub(crate) fn member_prefix(&self, key: &[u8], version: Version) -> Result<Vec<u8>> {
        self.member_prefix_with_room(key, version, 0)
    }

    /// [`KeyLayout::member_prefix`] in a vector with room for `extra` more bytes.
    fn member_prefix_with_room(&self, key: &[u8], version: Version, extra: usize) -> Result<Vec<u8>> {
        let mut out = self.subkey_prefix(key, version, 1 + extra)?;
        if self.kind == LayoutKind::TiTea {
            out.push(titea::WITHOUT_SCORE);
        }
        Ok(out)
    }

    /// The record of `member` of the sorted set `key` at `version` (its value is the score).
    ///
    /// # Errors
    /// As [`KeyLayout::subkey_prefix`].
    pub fn member_key(&self, key: &[u8], version: Version, member: &[u8]) -> Result<Vec<u8>> {
        if self.plain_route() {
            return plain_record_key(&self.head, key, version, member, 0);
        }
        // Built at its length: growing the prefix's vector would move it.
        let mut out = self.member_prefix_with_room(key, version, member.len())?;
        out.extend_from_slice(member);
        Ok(out)
    }

    /// The member in the element part of a sorted set's member record: `sub` itself, or
    /// for TiTea what follows its marker byte 0 ([`KeyLayout::member_key`]).
    ///
    /// # Errors
    /// [`Error::LayoutMismatch`] for a TiTea element part without the marker.
    pub fn decode_member<'a>(&self, sub: &'a [u8]) -> Result<&'a [u8]> {
        match self.kind {
            LayoutKind::TiTea => match sub.split_first() {
                Some((&titea::WITHOUT_SCORE, member)) => Ok(member),
                _ => Err(Error::LayoutMismatch("titea member record marker differs")),
            },
            _ => Ok(sub),
        }
    }

    /// Whether this layout's system writes a version into a string's metadata: camellia
    /// the time of every write, TiTea an object id kept while the string lives. Strings
    /// of the other layouts carry none.
    pub fn versions_strings(&self) -> bool {
        matches!(self.kind, LayoutKind::Camellia | LayoutKind::TiTea)
    }

    /// The value of a set member's record: empty, or for TiTea the member itself (its
    /// SMEMBERS reads the values).
    pub fn set_member_value(&self, member: &[u8]) -> bytes::Bytes {
        match self.kind {
            LayoutKind::TiTea => bytes::Bytes::copy_from_slice(member),
            _ => bytes::Bytes::new(),
        }
    }

    /// The element part of a list record at the engine's index `index`: the index as a
    /// big-endian u64, or TiTea's sign byte and signed position ([`titea::list_sub`]).
    pub fn list_sub(&self, index: u64) -> Vec<u8> {
        match self.kind {
            LayoutKind::TiTea => titea::list_sub(index).to_vec(),
            _ => index.to_be_bytes().to_vec(),
        }
    }

    /// The engine's index in a list record's element part ([`KeyLayout::list_sub`]); `None`
    /// for bytes that are not one.
    pub fn decode_list_sub(&self, sub: &[u8]) -> Option<u64> {
        match self.kind {
            LayoutKind::TiTea => titea::decode_list_sub(sub),
            _ => Some(u64::from_be_bytes(sub.try_into().ok()?)),
        }
    }

    /// TiTea: the type byte of an expire or GC index record of this layout's namespace (or
    /// one of its databases'), `None` for any other key.
    pub fn index_record_tag(&self, key: &[u8]) -> Option<u8> {
        if self.kind != LayoutKind::TiTea {
            return None;
        }
        let mut rest = key.strip_prefix(titea::SYSTEM_PREFIX)?.strip_prefix(self.namespace.as_slice())?;
        if let Some(db) = rest.strip_prefix(b":") {
            let digits = db.iter().take_while(|b| b.is_ascii_digit()).count();
            rest = &db[digits..];
        }
        rest.first().copied().filter(|t| *t == titea::GC || *t == titea::EXPIRE)
    }

    /// TiTea: the GC index record that marks the collection `version` of `namespace` (this
    /// layout's or one of its databases', as decoders return it) deleted: `kv<ns>g<id>`.
    ///
    /// # Errors
    /// [`Error::LayoutMismatch`] for a [`Version::Short`].
    pub fn gc_record_key(&self, namespace: &[u8], version: Version) -> Result<Vec<u8>> {
        let id = version.id()?;
        let mut out = Vec::with_capacity(titea::SYSTEM_PREFIX.len() + namespace.len() + 17);
        out.extend_from_slice(titea::SYSTEM_PREFIX);
        out.extend_from_slice(namespace);
        out.push(titea::GC);
        out.extend_from_slice(&id);
        Ok(out)
    }

    /// TiTea: the expire index record of `key` expiring at `expire_ms`: `kv<ns>e<ms><key>`.
    pub fn expire_record_key(&self, expire_ms: u64, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.head.len() + 9 + key.len());
        out.extend_from_slice(&self.head);
        out.push(titea::EXPIRE);
        out.extend_from_slice(&expire_ms.to_be_bytes());
        out.extend_from_slice(key);
        out
    }

    /// Whether `metadata_key` is one of this namespace's, told from its first bytes alone:
    /// Kvrocks' namespace has its length before it and NeoKV's a fixed 16 bytes, so a key of
    /// this namespace is one that starts with them. `None` for camellia and TiTea, whose
    /// namespaces carry no length (one database's may begin another's): only
    /// [`KeyLayout::decode_metadata_key`] tells there.
    pub fn holds_metadata_key(&self, metadata_key: &[u8]) -> Option<bool> {
        match self.kind {
            LayoutKind::Kvrocks | LayoutKind::NeoKv => Some(metadata_key.starts_with(&self.head)),
            LayoutKind::Camellia | LayoutKind::TiTea => None,
        }
    }

    /// Every metadata key of this layout's namespace (all slots).
    pub fn namespace_range(&self) -> KeyRange {
        let mut start = Vec::with_capacity(self.fixed_prefix.len() + self.head.len() + 2);
        if self.kind == LayoutKind::Camellia {
            start.extend_from_slice(&self.fixed_prefix);
            start.extend_from_slice(&Tag::Metadata.camellia());
        }
        start.extend_from_slice(&self.head);
        if self.kind == LayoutKind::TiTea {
            start.push(Tag::Metadata.titea());
        }
        KeyRange::prefix(start)
    }

    /// Every metadata key of this namespace in cluster slot `slot`.
    ///
    /// # Errors
    /// [`Error::LayoutMismatch`] when the layout has no cluster slots.
    pub fn slot_range(&self, slot: u16) -> Result<KeyRange> {
        if !self.cluster_slots {
            return Err(Error::LayoutMismatch("cluster slots are off"));
        }
        let mut start = self.head.clone();
        start.put_u16(slot);
        Ok(KeyRange::prefix(start))
    }

    /// Every metadata key of this namespace in the cluster slots `first..=last`: one range,
    /// the slots being in order in the keys.
    ///
    /// # Errors
    /// [`Error::LayoutMismatch`] when the layout has no cluster slots.
    pub fn slots_range(&self, first: u16, last: u16) -> Result<KeyRange> {
        Ok(KeyRange { start: self.slot_range(first)?.start, end: self.slot_range(last)?.end })
    }

    /// Reads the head and route shared by all records: prefix, namespace, slot, md5.
    fn read_route<'a>(&self, r: &mut Reader<'a>, tag: Tag) -> Result<(&'a [u8], Option<u16>, &'a [u8])> {
        if self.kind == LayoutKind::TiTea {
            if r.take(titea::SYSTEM_PREFIX.len())? != titea::SYSTEM_PREFIX {
                return Err(Error::LayoutMismatch("titea system prefix differs"));
            }
            // The namespace has no length: this layout's own, and its databases'
            // (namespace + `:<n>`, see `for_database`).
            let rest = r.remaining();
            let mut len = self.namespace.len();
            if !rest.starts_with(&self.namespace) {
                return Err(Error::LayoutMismatch("titea namespace differs"));
            }
            if rest.get(len) == Some(&b':') {
                let digits = rest[len + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
                if digits == 0 {
                    return Err(Error::LayoutMismatch("titea namespace differs"));
                }
                len += 1 + digits;
            }
            let namespace = r.take(len)?;
            if r.u8()? != tag.titea() {
                return Err(Error::LayoutMismatch("titea record type differs"));
            }
            return Ok((namespace, None, &[]));
        }
        if self.kind == LayoutKind::Camellia {
            // Compared only when there is one (see below: an empty compare can be slow).
            let prefix = r.take(self.fixed_prefix.len())?;
            if !prefix.is_empty() && prefix != self.fixed_prefix.as_slice() {
                return Err(Error::LayoutMismatch("fixed prefix differs"));
            }
            if r.take(2)? != tag.camellia() {
                return Err(Error::LayoutMismatch("camellia record tag differs"));
            }
            // camellia's namespace has no length: only this layout's own is read, and its
            // databases' (`<n>:` + namespace, see `for_database`).
            let rest = r.remaining();
            let len = if rest.starts_with(&self.namespace) {
                self.namespace.len()
            } else {
                let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                let own = rest
                    .get(digits..)
                    .and_then(|r| r.strip_prefix(b":"))
                    .is_some_and(|r| r.starts_with(&self.namespace));
                if digits == 0 || !own {
                    return Err(Error::LayoutMismatch("camellia namespace differs"));
                }
                digits + 1 + self.namespace.len()
            };
            let namespace = r.take(len)?;
            let hash = r.take(self.hash_prefix_len)?;
            return Ok((namespace, None, hash));
        }
        let prefix = r.take(self.fixed_prefix.len())?;
        // No compare when there is no prefix: glibc's AVX-512 `memcmp` of zero bytes at an
        // empty `Vec`'s dangling pointer takes a ~40 ns fault-suppression assist on AMD Zen 4.
        if !prefix.is_empty() && prefix != self.fixed_prefix.as_slice() {
            return Err(Error::LayoutMismatch("fixed prefix differs"));
        }
        let ns_len = match self.kind {
            LayoutKind::Kvrocks => usize::from(r.u8()?),
            LayoutKind::NeoKv => NEOKV_NAMESPACE_LEN,
            LayoutKind::Camellia | LayoutKind::TiTea => self.namespace.len(),
        };
        let namespace = r.take(ns_len)?;
        let slot = if self.cluster_slots { Some(r.u16()?) } else { None };
        let hash = r.take(self.hash_prefix_len)?;
        Ok((namespace, slot, hash))
    }

    /// Reads a metadata key, borrowing its parts.
    ///
    /// # Errors
    /// [`Error::LayoutMismatch`] when the fixed prefix differs, [`Error::Truncated`] when
    /// the bytes end inside the namespace, slot or md5 prefix (NeoKV: or the key), and for
    /// NeoKV [`Error::TrailingBytes`] after the key.
    pub fn decode_metadata_key<'a>(&self, bytes: &'a [u8]) -> Result<MetadataKey<'a>> {
        let mut r = Reader::new(bytes, "metadata key");
        let (namespace, slot, hash) = self.read_route(&mut r, Tag::Metadata)?;
        let user_key = match self.kind {
            LayoutKind::Kvrocks | LayoutKind::Camellia | LayoutKind::TiTea => r.rest(),
            LayoutKind::NeoKv => {
                let len = r.u32()? as usize;
                let key = r.take(len)?;
                r.finish()?;
                key
            }
        };
        Ok(MetadataKey { namespace, slot, hash, user_key })
    }

    /// Reads a subkey, borrowing its parts.
    ///
    /// # Errors
    /// As [`KeyLayout::decode_metadata_key`], and [`Error::Truncated`] when the key length,
    /// key or version is cut short.
    pub fn decode_subkey<'a>(&self, bytes: &'a [u8]) -> Result<Subkey<'a>> {
        self.decode_record(bytes, Tag::Subkey)
    }

    fn decode_record<'a>(&self, bytes: &'a [u8], tag: Tag) -> Result<Subkey<'a>> {
        let mut r = Reader::new(bytes, "subkey");
        let (namespace, slot, hash) = self.read_route(&mut r, tag)?;
        if self.kind == LayoutKind::TiTea {
            // Element records name their collection by its id only: no key.
            let version = Version::Id(r.id()?);
            return Ok(Subkey { namespace, slot, hash, user_key: &[], version, sub: r.rest() });
        }
        let key_len = r.u32()? as usize;
        let user_key = r.take(key_len)?;
        let version = Version::Short(r.u64()?);
        Ok(Subkey { namespace, slot, hash, user_key, version, sub: r.rest() })
    }

    /// Reads a score key, borrowing its parts.
    ///
    /// # Errors
    /// As [`KeyLayout::decode_subkey`], and [`Error::Truncated`] / [`Error::NanScore`] for
    /// the score.
    pub fn decode_score_key<'a>(&self, bytes: &'a [u8]) -> Result<ScoreKey<'a>> {
        let (sk, score) = self.split_score_key(bytes)?;
        Ok(ScoreKey { score: self.decode_score(score)?, ..sk })
    }

    /// Reads a score key as [`KeyLayout::decode_score_key`] does, but returns its 8 score
    /// bytes as stored (the [`ScoreKey::score`] it returns is 0): what a tool shows of a
    /// score the engine never writes, as camellia's NaN or `-0.0`.
    ///
    /// # Errors
    /// As [`KeyLayout::decode_subkey`], and [`Error::Truncated`] for the score.
    pub fn split_score_key<'a>(&self, bytes: &'a [u8]) -> Result<(ScoreKey<'a>, &'a [u8])> {
        let sk = self.decode_record(bytes, Tag::Score)?;
        let mut r = Reader::new(sk.sub, "score key");
        if self.kind == LayoutKind::TiTea && r.u8()? != titea::WITH_SCORE {
            return Err(Error::LayoutMismatch("titea score key marker differs"));
        }
        let score = r.take(8)?;
        Ok((ScoreKey { owner: sk.owner(), version: sk.version, score: 0.0, member: r.rest() }, score))
    }

    /// The metadata key that owns a decoded subkey or score key: same namespace, slot, md5
    /// and user key. This is how a compaction filter finds a record's metadata.
    pub fn owner_metadata_key(&self, owner: &KeyOwner<'_>) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.fixed_prefix.len() + 7 + owner.namespace.len() + owner.hash.len() + owner.user_key.len(),
        );
        out.put_slice(&self.fixed_prefix);
        match self.kind {
            LayoutKind::Kvrocks => out.put_u8(owner.namespace.len() as u8),
            LayoutKind::Camellia => out.put_slice(&Tag::Metadata.camellia()),
            LayoutKind::TiTea => out.put_slice(titea::SYSTEM_PREFIX),
            LayoutKind::NeoKv => {}
        }
        out.put_slice(owner.namespace);
        if self.kind == LayoutKind::TiTea {
            out.put_u8(Tag::Metadata.titea());
        }
        if let Some(slot) = owner.slot {
            out.put_u16(slot);
        }
        out.put_slice(owner.hash);
        if self.kind == LayoutKind::NeoKv {
            out.put_u32(owner.user_key.len() as u32);
        }
        out.put_slice(owner.user_key);
        out
    }
}

/// A user key and its route under a [`KeyLayout`] (from [`KeyLayout::routed`]): builds the
/// key's metadata key, subkeys and score keys without hashing again.
#[derive(Debug, Clone, Copy)]
pub struct RoutedKey<'a> {
    layout: &'a KeyLayout,
    key: &'a [u8],
    slot: Option<u16>,
    /// md5(key) when the layout has a spread prefix, else zeros.
    hash: [u8; 16],
}

impl RoutedKey<'_> {
    /// The bytes before the key length / key: `[prefix][ns_len][ns][slot]?[md5]?`
    /// (camellia: `[tag][ns][md5]?`).
    fn put_route(&self, out: &mut impl BufMut, tag: Tag) {
        if self.layout.kind == LayoutKind::Camellia {
            out.put_slice(&self.layout.fixed_prefix);
            out.put_slice(&tag.camellia());
        }
        out.put_slice(&self.layout.head);
        if self.layout.kind == LayoutKind::TiTea {
            out.put_u8(tag.titea());
        }
        if let Some(slot) = self.slot {
            out.put_u16(slot);
        }
        if self.layout.hash_prefix_len > 0 {
            out.put_slice(&self.hash[..self.layout.hash_prefix_len]);
        }
    }

    fn route_len(&self) -> usize {
        let tag = match self.layout.kind {
            LayoutKind::Camellia => self.layout.fixed_prefix.len() + 2,
            LayoutKind::TiTea => 1,
            _ => 0,
        };
        tag + self.layout.head.len() + if self.slot.is_some() { 2 } else { 0 } + self.layout.hash_prefix_len
    }

    /// Writes the metadata key, as [`KeyLayout::encode_metadata_key`].
    pub(crate) fn encode_metadata_key(&self, out: &mut impl BufMut) {
        self.put_route(out, Tag::Metadata);
        if self.layout.kind == LayoutKind::NeoKv {
            out.put_u32(self.key.len() as u32);
        }
        out.put_slice(self.key);
    }

    /// Whether `bytes` is this key's metadata key (what [`KeyLayout::metadata_key`] builds),
    /// found without building it.
    pub fn is_metadata_key(&self, bytes: &[u8]) -> bool {
        if self.layout.kind == LayoutKind::TiTea {
            let rest = bytes.strip_prefix(self.layout.head.as_slice()).and_then(|r| r.strip_prefix(b"m"));
            return rest == Some(self.key);
        }
        let slot = self.slot.map(u16::to_be_bytes);
        let tag = Tag::Metadata.camellia();
        let camellia = self.layout.kind == LayoutKind::Camellia;
        let parts: [&[u8]; 5] = [
            if camellia { &self.layout.fixed_prefix } else { &[] },
            if camellia { &tag } else { &[] },
            &self.layout.head,
            slot.as_ref().map_or(&[][..], |s| &s[..]),
            &self.hash[..self.layout.hash_prefix_len],
        ];
        let mut rest = bytes;
        for part in parts {
            // An empty part is skipped, not compared (see `read_route`: a zero-length compare
            // can be slow).
            if part.is_empty() {
                continue;
            }
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        if self.layout.kind == LayoutKind::NeoKv {
            match rest.strip_prefix(&(self.key.len() as u32).to_be_bytes()[..]) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest == self.key
    }

    /// The metadata key, in a new vector.
    pub(crate) fn metadata_key(&self) -> Vec<u8> {
        if self.layout.plain_route() {
            return plain_metadata_key(&self.layout.head, self.key);
        }
        // Exactly the length: a full vector becomes `Bytes` without another allocation.
        let len_field = if self.layout.kind == LayoutKind::NeoKv { 4 } else { 0 };
        let mut out = Vec::with_capacity(self.route_len() + len_field + self.key.len());
        self.encode_metadata_key(&mut out);
        debug_assert_eq!(out.len(), out.capacity());
        out
    }

    /// Writes the prefix shared by every subkey and score key of the key at `version`:
    /// `[prefix][ns_len][ns][slot]?[md5]?[key_len u32][key][version u64]`.
    ///
    /// # Errors
    /// [`Error::KeyTooLong`] for a key over `u32::MAX` bytes; [`Error::LayoutMismatch`] for a
    /// [`Version`] of the other variant than the layout's.
    pub(crate) fn encode_subkey_prefix(&self, version: Version, out: &mut impl BufMut) -> Result<()> {
        self.encode_record_prefix(version, out, Tag::Subkey)
    }

    fn encode_record_prefix(&self, version: Version, out: &mut impl BufMut, tag: Tag) -> Result<()> {
        if self.layout.kind == LayoutKind::TiTea {
            let id = version.id()?;
            self.put_route(out, tag);
            out.put_slice(&id);
            if tag == Tag::Score {
                out.put_u8(titea::WITH_SCORE);
            }
            return Ok(());
        }
        let version = version.short()?;
        self.put_route(out, tag);
        let len = u32::try_from(self.key.len()).map_err(|_| Error::KeyTooLong(self.key.len()))?;
        out.put_u32(len);
        out.put_slice(self.key);
        out.put_u64(version);
        Ok(())
    }

    /// The score-key prefix at `version` (see [`KeyLayout::score_prefix`]).
    ///
    /// # Errors
    /// As [`RoutedKey::encode_subkey_prefix`].
    pub(crate) fn score_prefix(&self, version: Version, extra: usize) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.route_len() + 12 + self.key.len() + extra);
        self.encode_record_prefix(version, &mut out, Tag::Score)?;
        Ok(out)
    }

    /// The subkey prefix at `version`, in a new vector with room for `extra` bytes.
    ///
    /// # Errors
    /// As [`RoutedKey::encode_subkey_prefix`].
    pub(crate) fn subkey_prefix(&self, version: Version, extra: usize) -> Result<Vec<u8>> {
        if self.layout.plain_route() {
            return plain_record_key(&self.layout.head, self.key, version, &[], extra);
        }
        let mut out = Vec::with_capacity(self.route_len() + 12 + self.key.len() + extra);
        self.encode_subkey_prefix(version, &mut out)?;
        Ok(out)
    }

    /// Writes the subkey of `sub` at `version`, as [`KeyLayout::encode_subkey`].
    ///
    /// # Errors
    /// As [`KeyLayout::subkey_prefix`].
    pub fn encode_subkey(&self, version: Version, sub: &[u8], out: &mut impl BufMut) -> Result<()> {
        self.encode_subkey_prefix(version, out)?;
        out.put_slice(sub);
        Ok(())
    }

    /// The subkey of `sub` at `version`, in a new vector.
    ///
    /// # Errors
    /// As [`RoutedKey::encode_subkey_prefix`].
    pub(crate) fn subkey(&self, version: Version, sub: &[u8]) -> Result<Vec<u8>> {
        if self.layout.plain_route() {
            return plain_record_key(&self.layout.head, self.key, version, sub, 0);
        }
        let mut out = self.subkey_prefix(version, sub.len())?;
        out.extend_from_slice(sub);
        Ok(out)
    }

    /// Writes the score key of `member`, as [`KeyLayout::encode_score_key`].
    ///
    /// # Errors
    /// As [`RoutedKey::encode_subkey_prefix`], and [`Error::NanScore`] for NaN.
    pub(crate) fn encode_score_key(
        &self,
        version: Version,
        score: f64,
        member: &[u8],
        out: &mut impl BufMut,
    ) -> Result<()> {
        let score = self.layout.encode_score(score)?;
        self.encode_record_prefix(version, out, Tag::Score)?;
        out.put_slice(&score);
        out.put_slice(member);
        Ok(())
    }

    /// The score key of `member` with `score`, in a new vector.
    ///
    /// # Errors
    /// As [`RoutedKey::encode_score_key`].
    pub(crate) fn score_key(&self, version: Version, score: f64, member: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.route_len() + 20 + self.key.len() + member.len());
        self.encode_score_key(version, score, member, &mut out)?;
        Ok(out)
    }
}

/// The metadata key `[head][key]` of a plain route ([`KeyLayout::plain_route`]), in a
/// vector of exactly its length. Written into a zeroed vector by slice copies: appending
/// each part costs a call per part.
fn plain_metadata_key(head: &[u8], key: &[u8]) -> Vec<u8> {
    let mut out = vec![0; head.len() + key.len()];
    let (h, k) = out.split_at_mut(head.len());
    h.copy_from_slice(head);
    k.copy_from_slice(key);
    out
}

/// The record key `[head][key_len u32][key][version u64][sub]` of a plain route
/// ([`KeyLayout::plain_route`]), with room for `extra` bytes more (none: exactly its
/// length, so that it becomes `Bytes` without another allocation). Written as
/// [`plain_metadata_key`] is.
///
/// # Errors
/// As [`KeyLayout::subkey_prefix`].
fn plain_record_key(head: &[u8], key: &[u8], version: Version, sub: &[u8], extra: usize) -> Result<Vec<u8>> {
    let version = version.short()?;
    let len = u32::try_from(key.len()).map_err(|_| Error::KeyTooLong(key.len()))?;
    let n = head.len() + 12 + key.len() + sub.len();
    let mut out = if extra == 0 {
        vec![0; n]
    } else {
        let mut out = Vec::with_capacity(n + extra);
        out.resize(n, 0);
        out
    };
    let (h, rest) = out.split_at_mut(head.len());
    h.copy_from_slice(head);
    let (l, rest) = rest.split_at_mut(4);
    l.copy_from_slice(&len.to_be_bytes());
    let (k, rest) = rest.split_at_mut(key.len());
    k.copy_from_slice(key);
    let (v, s) = rest.split_at_mut(8);
    v.copy_from_slice(&version.to_be_bytes());
    s.copy_from_slice(sub);
    Ok(out)
}

/// The parts of a metadata key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataKey<'a> {
    /// The namespace bytes.
    pub namespace: &'a [u8],
    /// The cluster slot, when the layout writes it.
    pub slot: Option<u16>,
    /// The md5 spread prefix (empty when off).
    pub hash: &'a [u8],
    /// The Redis key.
    pub user_key: &'a [u8],
}

/// The parts of a subkey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subkey<'a> {
    /// The namespace bytes.
    pub namespace: &'a [u8],
    /// The cluster slot, when the layout writes it.
    pub slot: Option<u16>,
    /// The md5 spread prefix (empty when off).
    pub hash: &'a [u8],
    /// The Redis key.
    pub user_key: &'a [u8],
    /// The version of the collection the record belongs to.
    pub version: Version,
    /// Field, member, or list index bytes.
    pub sub: &'a [u8],
}

impl<'a> Subkey<'a> {
    /// The key this record belongs to.
    pub fn owner(&self) -> KeyOwner<'a> {
        KeyOwner { namespace: self.namespace, slot: self.slot, hash: self.hash, user_key: self.user_key }
    }
}

/// The parts of a score key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreKey<'a> {
    /// The key this record belongs to.
    pub owner: KeyOwner<'a>,
    /// The version of the sorted set.
    pub version: Version,
    /// The member's score.
    pub score: f64,
    /// The member.
    pub member: &'a [u8],
}

/// The key a subkey or score key belongs to (everything but version and sub).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyOwner<'a> {
    /// The namespace bytes.
    pub namespace: &'a [u8],
    /// The cluster slot, when the layout writes it.
    pub slot: Option<u16>,
    /// The md5 spread prefix (empty when off).
    pub hash: &'a [u8],
    /// The Redis key.
    pub user_key: &'a [u8],
}

/// How long a NeoKV namespace is: region id and index id, 8 bytes each.
pub(crate) const NEOKV_NAMESPACE_LEN: usize = 16;

/// NeoKV's namespace bytes for a region and index: each id big-endian with its sign bit
/// flipped, so ids order as signed numbers (NeoKV's `MutTableKey::append_i64`).
pub fn neokv_namespace(region_id: i64, index_id: i64) -> [u8; NEOKV_NAMESPACE_LEN] {
    let mut out = [0u8; NEOKV_NAMESPACE_LEN];
    out[..8].copy_from_slice(&((region_id as u64) ^ (1 << 63)).to_be_bytes());
    out[8..].copy_from_slice(&((index_id as u64) ^ (1 << 63)).to_be_bytes());
    out
}

/// The region id and index id of a NeoKV namespace (`None` unless it is 16 bytes).
pub fn neokv_ids(namespace: &[u8]) -> Option<(i64, i64)> {
    let bytes: [u8; NEOKV_NAMESPACE_LEN] = namespace.try_into().ok()?;
    let id = |b: &[u8]| (u64::from_be_bytes(b.try_into().unwrap_or_default()) ^ (1 << 63)) as i64;
    Some((id(&bytes[..8]), id(&bytes[8..])))
}

/// A half-open key range `[start, end)`; `end: None` means to the end of the key space.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyRange {
    /// First key in the range.
    pub start: Vec<u8>,
    /// First key past the range, or `None` for unbounded.
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    /// Every key that starts with `prefix`.
    pub fn prefix(prefix: Vec<u8>) -> Self {
        let end = prefix_successor(&prefix);
        KeyRange { start: prefix, end }
    }

    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|end| key < end)
    }
}

/// The smallest key greater than every key starting with `prefix`: the prefix with trailing
/// `0xFF` bytes dropped and its last byte incremented; `None` when there is none.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}
