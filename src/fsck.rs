//! A consistency check over a whole store: what every command must leave true.
//!
//! [`check`] (or an [`Fsck`] for more control) walks the Metadata column family of every
//! namespace under a layout's fixed prefix, or of the namespaces given, and for every **live**
//! key (not expired; a collection with a size, or blind-write) verifies:
//!
//! | key | invariant | problem when broken |
//! |---|---|---|
//! | any | the metadata value decodes | [`Problem::UndecodableMetadata`] |
//! | any | the slot / md5 route is the one the user key hashes to | [`Problem::Misrouted`] |
//! | hash, set, zset, list | size = number of subkeys under the live version | [`Problem::SizeMismatch`] |
//! | bitmap and the other Kvrocks types but streams | (their `size` is not an element count: not checked) | |
//! | zset | every member's value is an ordered score, and its score record exists | [`Problem::BadRecord`], [`Problem::MissingScore`] |
//! | zset | every score record has a member with exactly that score | [`Problem::StrayScore`] |
//! | list | `head ≤ tail`, `size = tail − head`, elements at every index of `[head, tail)` and nowhere else | [`Problem::ListBounds`], [`Problem::ListGap`] |
//! | stream | size = number of entry records; every record and value decodes; the group count and each group's pending count match their records | [`Problem::SizeMismatch`], [`Problem::BadRecord`] |
//!
//! It also decodes the key of every Subkey, Score and Stream record in the same ranges
//! ([`Problem::UndecodableKey`]); under NeoKV's layout a string of its first encoding in the
//! Subkey column family is a record too, whose value must decode
//! ([`Problem::UndecodableMetadata`]). Blind-write collections do not track their size, so only
//! their records are checked, not the count.
//!
//! Records no live version owns are *not* problems by default: DEL, overwrite and expiry
//! leave them behind on purpose (lazy deletion) until [`crate::gc`] drops them. After a
//! [`crate::gc::compact`] with grace 0 there should be none; [`Fsck::report_garbage`] then
//! reports each as [`Problem::Garbage`] with the reason (owner missing, a string — strings
//! have no subkeys —, another version, expired, or empty).
//!
//! The check reads only; backend failures are its only errors, and nothing it reads can make
//! it panic. It works on any [`KvBackend`] and does not use the command layer.

use std::collections::HashMap;
use std::fmt;

use bytes::Bytes;

use crate::backend::{ColumnFamily, Direction, KvBackend};
use crate::codec::{
    ConsumerValue, Extra, GroupValue, KeyLayout, KeyRange, Metadata, PendingValue, RedisType, StreamSub,
    Version, decode_entry, decode_neokv_legacy,
};
use crate::error::{Error, Result};

/// Why a Subkey, Score or Stream record belongs to no live key version (see [`Fsck::report_garbage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GarbageReason {
    /// The owner's metadata record is missing.
    OwnerMissing,
    /// The owner is a string: strings have no subkeys.
    OwnerIsString,
    /// The owner lives under another version.
    OtherVersion,
    /// The owner has expired.
    OwnerExpired,
    /// The owner is a size-tracked collection of size 0, which does not exist.
    OwnerEmpty,
}

/// One broken invariant. Keys are raw record keys (`key` is always a Metadata-CF key, which
/// names the namespace and the user key).
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// A record key that does not decode under the layout.
    UndecodableKey {
        /// Its column family.
        cf: ColumnFamily,
        /// The record key.
        record: Bytes,
        /// Why it does not decode.
        error: Error,
    },
    /// A metadata value that does not decode (unknown type, bad flags, truncated…).
    UndecodableMetadata {
        /// The metadata key.
        key: Bytes,
        /// Why it does not decode.
        error: Error,
    },
    /// The metadata key's slot or md5 prefix is not the one its user key hashes to, so no
    /// command can find it.
    Misrouted {
        /// The metadata key.
        key: Bytes,
    },
    /// A size-tracked collection whose size differs from its subkeys under the live version.
    SizeMismatch {
        /// The metadata key.
        key: Bytes,
        /// The size field.
        size: u64,
        /// Subkeys found.
        subkeys: u64,
    },
    /// A record of a live collection whose bytes are not what its type stores: a zset
    /// member value that is not an ordered score, a score key without its 8 score bytes or
    /// with a value, a list subkey whose index is not 8 bytes.
    BadRecord {
        /// The metadata key.
        key: Bytes,
        /// Its column family.
        cf: ColumnFamily,
        /// The record key.
        record: Bytes,
        /// What is wrong.
        why: &'static str,
    },
    /// A zset member without a score record at its score.
    MissingScore {
        /// The metadata key.
        key: Bytes,
        /// The member.
        member: Bytes,
        /// The score its subkey holds.
        score: f64,
    },
    /// A score record whose member is missing or holds another score.
    StrayScore {
        /// The metadata key.
        key: Bytes,
        /// The member.
        member: Bytes,
        /// The score in the score record.
        score: f64,
    },
    /// A list whose `head > tail` or whose size is not `tail − head`.
    ListBounds {
        /// The metadata key.
        key: Bytes,
        /// The size field.
        size: u64,
        /// The head field.
        head: u64,
        /// The tail field.
        tail: u64,
    },
    /// A list whose elements are not exactly the indexes `head, head+1, …, tail−1`: `found`
    /// is the index met where `expected` should have been (`None`: the elements ended early).
    ListGap {
        /// The metadata key.
        key: Bytes,
        /// The index that should come next.
        expected: u64,
        /// The index found instead.
        found: Option<u64>,
    },
    /// A record no live key version owns (only with [`Fsck::report_garbage`]).
    Garbage {
        /// Its column family.
        cf: ColumnFamily,
        /// The record key.
        record: Bytes,
        /// Why it is garbage.
        reason: GarbageReason,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = |b: &Bytes| b.escape_ascii().to_string();
        match self {
            Problem::UndecodableKey { cf, record, error } => {
                write!(f, "{} record {}: {error}", cf.kvrocks_name(), k(record))
            }
            Problem::UndecodableMetadata { key, error } => write!(f, "metadata of {}: {error}", k(key)),
            Problem::Misrouted { key } => write!(f, "{}: slot or md5 prefix does not match the key", k(key)),
            Problem::SizeMismatch { key, size, subkeys } => {
                write!(f, "{}: size {size} but {subkeys} subkeys", k(key))
            }
            Problem::BadRecord { key, cf, record, why } => {
                write!(f, "{}: {} record {}: {why}", k(key), cf.kvrocks_name(), k(record))
            }
            Problem::MissingScore { key, member, score } => {
                write!(f, "{}: member {} has no score record at {score}", k(key), k(member))
            }
            Problem::StrayScore { key, member, score } => {
                write!(f, "{}: score record {score} of {} has no such member", k(key), k(member))
            }
            Problem::ListBounds { key, size, head, tail } => {
                write!(f, "{}: list size {size} with head {head} and tail {tail}", k(key))
            }
            Problem::ListGap { key, expected, found } => {
                write!(f, "{}: list index {expected} expected, found {found:?}", k(key))
            }
            Problem::Garbage { cf, record, reason } => {
                write!(f, "{} record {}: garbage ({reason:?})", cf.kvrocks_name(), k(record))
            }
        }
    }
}

/// Every problem in every namespace under `layout`'s fixed prefix, with keys judged live
/// at `now_ms`: [`Fsck::new`]`(layout).run(backend, now_ms)`.
///
/// # Errors
/// Backend errors only.
pub fn check<B: KvBackend>(backend: &B, layout: &KeyLayout, now_ms: u64) -> Result<Vec<Problem>> {
    Fsck::new(layout).run(backend, now_ms)
}

/// A configurable consistency check (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Fsck {
    layout: KeyLayout,
    namespaces: Option<Vec<Vec<u8>>>,
    garbage: bool,
}

impl Fsck {
    /// A check of every namespace under `layout`'s fixed prefix, decoding keys with its
    /// slot and md5 options.
    pub fn new(layout: &KeyLayout) -> Self {
        Fsck { layout: layout.clone(), namespaces: None, garbage: false }
    }

    /// Checks only these namespaces (database `n > 0` of a [`crate::commands::Db`] is the
    /// base namespace followed by `:n`).
    pub fn namespaces<N: AsRef<[u8]>>(mut self, namespaces: &[N]) -> Self {
        self.namespaces = Some(namespaces.iter().map(|n| n.as_ref().to_vec()).collect());
        self
    }

    /// Also reports every Subkey, Score and Stream record no live key version owns, as
    /// [`Problem::Garbage`]: meant for a store just compacted with grace 0.
    pub fn report_garbage(mut self, on: bool) -> Self {
        self.garbage = on;
        self
    }

    /// Runs the check; `now_ms` decides which keys are expired.
    ///
    /// # Errors
    /// Backend errors, and [`Error::NamespaceTooLong`] for a namespace given over 255 bytes.
    pub fn run<B: KvBackend>(&self, backend: &B, now_ms: u64) -> Result<Vec<Problem>> {
        let ranges = match &self.namespaces {
            None => vec![KeyRange::prefix(self.layout.fixed_prefix().to_vec())],
            Some(list) => list
                .iter()
                .map(|ns| Ok(self.layout.clone().with_namespace(ns)?.namespace_range()))
                .collect::<Result<_>>()?,
        };
        let mut walk = Walk { backend, layout: &self.layout, now_ms, ns: None, problems: Vec::new() };
        for range in &ranges {
            for item in backend.scan(ColumnFamily::Metadata, range, Direction::Forward)? {
                let (key, value) = item?;
                walk.metadata(key, &value)?;
            }
            for cf in [ColumnFamily::Subkey, ColumnFamily::Score, ColumnFamily::Stream] {
                walk.records(cf, range, self.garbage)?;
            }
        }
        Ok(walk.problems)
    }
}

/// One run's state: the problems so far and the layout of the namespace last seen.
struct Walk<'a, B> {
    backend: &'a B,
    layout: &'a KeyLayout,
    now_ms: u64,
    ns: Option<(Vec<u8>, KeyLayout)>,
    problems: Vec<Problem>,
}

impl<B: KvBackend> Walk<'_, B> {
    /// The layout of `namespace` (cached: records of one namespace are adjacent).
    fn layout_of(&mut self, namespace: &[u8]) -> Result<&KeyLayout> {
        if self.ns.as_ref().is_none_or(|(ns, _)| ns != namespace) {
            self.ns = Some((namespace.to_vec(), self.layout.clone().with_namespace(namespace)?));
        }
        Ok(&self.ns.as_ref().expect("just set").1)
    }

    fn metadata(&mut self, key: Bytes, value: &[u8]) -> Result<()> {
        // TiTea's expire and GC index records share the column family: their values must
        // be what TiTea writes.
        if let Some(tag) = self.layout.index_record_tag(&key) {
            let ok = match tag {
                crate::codec::titea::GC => value.len() == 1,
                _ => value.len() == 17,
            };
            if !ok {
                self.problems.push(bad(
                    &key,
                    ColumnFamily::Metadata,
                    key.clone(),
                    "index record value is malformed",
                ));
            }
            return Ok(());
        }
        let (namespace, user_key) = match self.layout.decode_metadata_key(&key) {
            Ok(mk) => (mk.namespace, mk.user_key),
            Err(error) => {
                self.problems.push(Problem::UndecodableKey {
                    cf: ColumnFamily::Metadata,
                    record: key,
                    error,
                });
                return Ok(());
            }
        };
        let meta = match self.layout.decode_metadata(value) {
            Ok(meta) => meta,
            Err(error) => {
                self.problems.push(Problem::UndecodableMetadata { key, error });
                return Ok(());
            }
        };
        let layout = self.layout_of(namespace)?.clone();
        if layout.metadata_key(user_key) != key {
            self.problems.push(Problem::Misrouted { key });
            return Ok(());
        }
        // Only these five count their elements in `size` (a bitmap's is its length in
        // bytes, a string has no subkeys; other Kvrocks types are read, not checked).
        if !meta.is_live(self.now_ms)
            || !matches!(
                meta.ty,
                RedisType::Hash | RedisType::Set | RedisType::ZSet | RedisType::List | RedisType::Stream
            )
        {
            return Ok(());
        }
        let found = match meta.ty {
            RedisType::ZSet => self.zset(&layout, &key, user_key, &meta)?,
            RedisType::Stream => self.stream(&layout, &key, user_key, &meta)?,
            RedisType::List => self.list(&layout, &key, user_key, &meta)?,
            _ => self.subkeys(&layout, user_key, meta.version)?.count() as u64,
        };
        if !meta.blind_write && found != meta.size {
            self.problems.push(Problem::SizeMismatch { key, size: meta.size, subkeys: found });
        }
        Ok(())
    }

    /// The `(sub, record key, value)` of every subkey of `user_key` at `version`.
    fn subkeys(
        &self,
        layout: &KeyLayout,
        user_key: &[u8],
        version: Version,
    ) -> Result<impl Iterator<Item = Result<(Bytes, Bytes, Bytes)>> + '_> {
        self.prefixed(ColumnFamily::Subkey, layout.subkey_range(user_key, version)?)
    }

    fn prefixed(
        &self,
        cf: ColumnFamily,
        range: KeyRange,
    ) -> Result<impl Iterator<Item = Result<(Bytes, Bytes, Bytes)>> + '_> {
        let prefix_len = range.start.len();
        let iter = self.backend.scan(cf, &range, Direction::Forward)?;
        Ok(iter.map(move |item| item.map(|(k, v)| (k.slice(prefix_len..), k, v))))
    }

    /// Checks that every stream record and value decodes, and that the group and pending
    /// counts agree with the records; answers the entry count.
    fn stream(
        &mut self,
        layout: &KeyLayout,
        key: &Bytes,
        user_key: &[u8],
        meta: &Metadata<'_>,
    ) -> Result<u64> {
        let (mut entries, mut groups) = (0, 0);
        let mut pending: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut counted: Vec<(Vec<u8>, u64, Bytes)> = Vec::new();
        let mut found = Vec::new();
        for item in self.prefixed(ColumnFamily::Stream, layout.subkey_range(user_key, meta.version)?)? {
            let (sub, record, value) = item?;
            let why = match StreamSub::decode(&sub) {
                Err(_) => Some("stream record key does not decode"),
                Ok(StreamSub::Entry(_)) => {
                    entries += 1;
                    decode_entry(&value).is_err().then_some("stream entry value does not decode")
                }
                Ok(StreamSub::Group(group)) => {
                    groups += 1;
                    match GroupValue::decode(&value) {
                        Ok(g) => {
                            counted.push((group.to_vec(), g.pending, record.clone()));
                            None
                        }
                        Err(_) => Some("stream group value does not decode"),
                    }
                }
                Ok(StreamSub::Consumer { .. }) => {
                    ConsumerValue::decode(&value).is_err().then_some("stream consumer value does not decode")
                }
                Ok(StreamSub::Pending { group, .. }) => {
                    *pending.entry(group.to_vec()).or_default() += 1;
                    PendingValue::decode(&value).is_err().then_some("stream pending value does not decode")
                }
            };
            if let Some(why) = why {
                found.push(bad(key, ColumnFamily::Stream, record, why));
            }
        }
        for (group, want, record) in counted {
            if pending.get(&group).copied().unwrap_or(0) != want {
                found.push(bad(key, ColumnFamily::Stream, record, "stream group's pending count disagrees"));
            }
        }
        if let Extra::Stream(fields) = &meta.extra
            && fields.group_number.is_some_and(|n| n != groups)
        {
            found.push(bad(key, ColumnFamily::Metadata, key.clone(), "stream group count disagrees"));
        }
        self.problems.append(&mut found);
        Ok(entries)
    }

    /// Checks members against score records both ways; answers the member count.
    fn zset(&mut self, layout: &KeyLayout, key: &Bytes, user_key: &[u8], meta: &Metadata<'_>) -> Result<u64> {
        let mut count = 0;
        let mut found = Vec::new();
        let members = KeyRange::prefix(layout.member_prefix(user_key, meta.version)?);
        for item in self.prefixed(ColumnFamily::Subkey, members)? {
            let (member, record, value) = item?;
            count += 1;
            let Ok(score) = layout.decode_member_score(&value) else {
                found.push(bad(key, ColumnFamily::Subkey, record, "zset member value is not a score"));
                continue;
            };
            let score_key = layout.score_key(user_key, meta.version, score, &member)?;
            if self.backend.get(ColumnFamily::Score, &score_key)?.is_none() {
                found.push(Problem::MissingScore { key: key.clone(), member, score });
            }
        }
        let scores = KeyRange::prefix(layout.score_prefix(user_key, meta.version, 0)?);
        for item in self.prefixed(ColumnFamily::Score, scores)? {
            let (rest, record, value) = item?;
            let Some((score_bytes, member)) = rest.split_first_chunk::<8>() else {
                found.push(bad(key, ColumnFamily::Score, record, "score key has no 8 score bytes"));
                continue;
            };
            let Ok(score) = layout.decode_score(score_bytes) else {
                found.push(bad(key, ColumnFamily::Score, record, "score key holds NaN"));
                continue;
            };
            // TiTea keeps the score's text there too.
            let held_text = layout.kind() == crate::codec::LayoutKind::TiTea
                && layout.decode_member_score(&value).is_ok();
            if !value.is_empty() && !held_text {
                found.push(bad(key, ColumnFamily::Score, record.clone(), "score record has a value"));
            }
            let held = self
                .backend
                .get(ColumnFamily::Subkey, &layout.member_key(user_key, meta.version, member)?)?;
            let held = held.map(|v| layout.decode_member_score(&v).map(f64::to_bits));
            if !matches!(held, Some(Ok(bits)) if bits == score.to_bits()) {
                found.push(Problem::StrayScore { key: key.clone(), member: record.slice_ref(member), score });
            }
        }
        self.problems.append(&mut found);
        Ok(count)
    }

    /// Checks that elements sit at exactly `head..tail`; answers the element count.
    fn list(&mut self, layout: &KeyLayout, key: &Bytes, user_key: &[u8], meta: &Metadata<'_>) -> Result<u64> {
        let mut found = Vec::new();
        if meta.head > meta.tail || meta.tail - meta.head != meta.size {
            found.push(Problem::ListBounds {
                key: key.clone(),
                size: meta.size,
                head: meta.head,
                tail: meta.tail,
            });
        }
        let (mut count, mut expected, mut gap) = (0, meta.head, false);
        for item in self.subkeys(layout, user_key, meta.version)? {
            let (sub, record, _) = item?;
            count += 1;
            let Some(index) = layout.decode_list_sub(&sub) else {
                found.push(bad(key, ColumnFamily::Subkey, record, "list index does not decode"));
                continue;
            };
            if !gap && (index != expected || index >= meta.tail) {
                found.push(Problem::ListGap { key: key.clone(), expected, found: Some(index) });
                gap = true;
            }
            expected = index.saturating_add(1);
        }
        if !gap && expected < meta.tail {
            found.push(Problem::ListGap { key: key.clone(), expected, found: None });
        }
        self.problems.append(&mut found);
        Ok(count)
    }

    /// Decodes every record key of `cf` in `range`; with `garbage`, also judges its owner.
    fn records(&mut self, cf: ColumnFamily, range: &KeyRange, garbage: bool) -> Result<()> {
        // The owner metadata key and version last judged, and the verdict.
        let mut last: Option<(Vec<u8>, Version, Option<GarbageReason>)> = None;
        for item in self.backend.scan(cf, range, Direction::Forward)? {
            let (record, value) = item?;
            // A string of NeoKV's first encoding: its value must decode.
            if let Some(mkey) =
                (cf == ColumnFamily::Subkey).then(|| self.layout.decode_legacy_string_key(&record)).flatten()
            {
                if let Err(error) = decode_neokv_legacy(&value) {
                    self.problems
                        .push(Problem::UndecodableMetadata { key: Bytes::copy_from_slice(mkey), error });
                }
                continue;
            }
            let decoded = match cf {
                ColumnFamily::Score => self.layout.decode_score_key(&record).map(|sk| (sk.owner, sk.version)),
                _ => self.layout.decode_subkey(&record).map(|sk| (sk.owner(), sk.version)),
            };
            let (owner, version) = match decoded {
                Ok(found) => found,
                Err(error) => {
                    self.problems.push(Problem::UndecodableKey { cf, record, error });
                    continue;
                }
            };
            if !garbage {
                continue;
            }
            let titea = self.layout.kind() == crate::codec::LayoutKind::TiTea;
            let owner = if titea {
                self.layout.gc_record_key(owner.namespace, version)?
            } else {
                self.layout.owner_metadata_key(&owner)
            };
            let reason = match &last {
                Some((o, v, reason)) if *o == owner && *v == version => *reason,
                _ => {
                    let raw = self.backend.get(ColumnFamily::Metadata, &owner)?;
                    // TiTea: a collection's GC record marks its records garbage.
                    let reason = match (titea, raw) {
                        (true, found) => found.map(|_| GarbageReason::OwnerMissing),
                        (false, raw) => garbage_reason(self.layout, raw.as_deref(), version, self.now_ms),
                    };
                    last = Some((owner, version, reason));
                    reason
                }
            };
            if let Some(reason) = reason {
                self.problems.push(Problem::Garbage { cf, record, reason });
            }
        }
        Ok(())
    }
}

fn bad(key: &Bytes, cf: ColumnFamily, record: Bytes, why: &'static str) -> Problem {
    Problem::BadRecord { key: key.clone(), cf, record, why }
}

/// Why a record of `version` whose owner's metadata is `raw` is garbage; `None` when the
/// owner is live at that version, or its metadata does not decode (reported on its own).
fn garbage_reason(
    layout: &KeyLayout,
    raw: Option<&[u8]>,
    version: Version,
    now_ms: u64,
) -> Option<GarbageReason> {
    let Some(raw) = raw else { return Some(GarbageReason::OwnerMissing) };
    let meta = layout.decode_metadata(raw).ok()?;
    if meta.ty == RedisType::String {
        Some(GarbageReason::OwnerIsString)
    } else if meta.version != version {
        Some(GarbageReason::OtherVersion)
    } else if meta.is_expired(now_ms) {
        Some(GarbageReason::OwnerExpired)
    } else if !meta.is_live(now_ms) {
        Some(GarbageReason::OwnerEmpty)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::backend::{MemoryBackend, WriteBatch};
    use crate::codec::{ManualClock, encode_f64};
    use crate::commands::Db;

    const NOW: u64 = 1_700_000_000_000;

    fn layout() -> KeyLayout {
        KeyLayout::default()
    }

    fn put(store: &MemoryBackend, cf: ColumnFamily, key: Vec<u8>, value: Vec<u8>) {
        let mut batch = WriteBatch::new();
        batch.put(cf, key, value);
        store.write(batch).unwrap();
    }

    fn del(store: &MemoryBackend, cf: ColumnFamily, key: Vec<u8>) {
        let mut batch = WriteBatch::new();
        batch.delete(cf, key);
        store.write(batch).unwrap();
    }

    fn meta(store: &MemoryBackend, key: &[u8], meta: &Metadata<'_>) {
        put(store, ColumnFamily::Metadata, layout().metadata_key(key), meta.to_vec());
    }

    fn sized(ty: RedisType, version: Version, size: u64) -> Metadata<'static> {
        Metadata { size, ..Metadata::collection(ty, version) }
    }

    /// A zset `z` (version 7) with members a=1 and b=2, both records each.
    fn zset_store() -> MemoryBackend {
        let store = MemoryBackend::new();
        meta(&store, b"z", &sized(RedisType::ZSet, Version::Short(7), 2));
        for (m, s) in [(&b"a"[..], 1.0), (b"b", 2.0)] {
            put(
                &store,
                ColumnFamily::Subkey,
                layout().subkey(b"z", Version::Short(7), m).unwrap(),
                encode_f64(s).unwrap().to_vec(),
            );
            put(
                &store,
                ColumnFamily::Score,
                layout().score_key(b"z", Version::Short(7), s, m).unwrap(),
                vec![],
            );
        }
        store
    }

    /// A list `l` (version 9) of three elements at head..head+3.
    fn list_store() -> MemoryBackend {
        let store = MemoryBackend::new();
        let head = 100;
        meta(
            &store,
            b"l",
            &Metadata { head, tail: head + 3, ..sized(RedisType::List, Version::Short(9), 3) },
        );
        for i in head..head + 3 {
            put(&store, ColumnFamily::Subkey, list_key(i), b"x".to_vec());
        }
        store
    }

    fn list_key(index: u64) -> Vec<u8> {
        layout().subkey(b"l", Version::Short(9), &index.to_be_bytes()).unwrap()
    }

    fn problems(store: &MemoryBackend) -> Vec<Problem> {
        check(store, &layout(), NOW).unwrap()
    }

    fn only(store: &MemoryBackend) -> Problem {
        let found = problems(store);
        assert_eq!(found.len(), 1, "{found:?}");
        found.into_iter().next().unwrap()
    }

    #[test]
    fn hand_built_stores_are_clean() {
        assert_eq!(problems(&zset_store()), vec![]);
        assert_eq!(problems(&list_store()), vec![]);
    }

    #[test]
    fn size_mismatch_is_found() {
        let store = MemoryBackend::new();
        meta(&store, b"h", &sized(RedisType::Hash, Version::Short(3), 2));
        put(
            &store,
            ColumnFamily::Subkey,
            layout().subkey(b"h", Version::Short(3), b"f").unwrap(),
            b"v".to_vec(),
        );
        // A subkey of another version does not count.
        put(
            &store,
            ColumnFamily::Subkey,
            layout().subkey(b"h", Version::Short(2), b"g").unwrap(),
            b"v".to_vec(),
        );
        let key = Bytes::from(layout().metadata_key(b"h"));
        assert_eq!(only(&store), Problem::SizeMismatch { key, size: 2, subkeys: 1 });
    }

    #[test]
    fn zset_member_without_score_record_is_found() {
        let store = zset_store();
        del(&store, ColumnFamily::Score, layout().score_key(b"z", Version::Short(7), 2.0, b"b").unwrap());
        let key = Bytes::from(layout().metadata_key(b"z"));
        assert_eq!(only(&store), Problem::MissingScore { key, member: Bytes::from_static(b"b"), score: 2.0 });
    }

    #[test]
    fn score_record_with_another_score_or_no_member_is_found() {
        let store = zset_store();
        put(
            &store,
            ColumnFamily::Score,
            layout().score_key(b"z", Version::Short(7), 5.0, b"a").unwrap(),
            vec![],
        );
        put(
            &store,
            ColumnFamily::Score,
            layout().score_key(b"z", Version::Short(7), 3.0, b"c").unwrap(),
            vec![],
        );
        let key = Bytes::from(layout().metadata_key(b"z"));
        let stray = |m: &'static [u8], score| Problem::StrayScore {
            key: key.clone(),
            member: Bytes::from_static(m),
            score,
        };
        assert_eq!(problems(&store), vec![stray(b"c", 3.0), stray(b"a", 5.0)]);
    }

    #[test]
    fn zset_member_with_a_bad_score_value_is_found() {
        let store = zset_store();
        put(
            &store,
            ColumnFamily::Subkey,
            layout().subkey(b"z", Version::Short(7), b"a").unwrap(),
            b"1".to_vec(),
        );
        let found = problems(&store);
        assert!(matches!(found[0], Problem::BadRecord { cf: ColumnFamily::Subkey, .. }), "{found:?}");
        // The score record of `a` now has no member at that score.
        assert!(matches!(found[1], Problem::StrayScore { score: 1.0, .. }), "{found:?}");
        assert_eq!(found.len(), 2);
    }

    #[test]
    fn list_gaps_and_bounds_are_found() {
        let store = list_store();
        del(&store, ColumnFamily::Subkey, list_key(101));
        let key = Bytes::from(layout().metadata_key(b"l"));
        assert_eq!(
            problems(&store),
            vec![
                Problem::ListGap { key: key.clone(), expected: 101, found: Some(102) },
                Problem::SizeMismatch { key: key.clone(), size: 3, subkeys: 2 },
            ]
        );

        let store = list_store();
        put(&store, ColumnFamily::Subkey, list_key(103), b"x".to_vec());
        let found = problems(&store);
        assert_eq!(found[0], Problem::ListGap { key: key.clone(), expected: 103, found: Some(103) });

        let store = list_store();
        del(&store, ColumnFamily::Subkey, list_key(102));
        assert_eq!(problems(&store)[0], Problem::ListGap { key: key.clone(), expected: 102, found: None });

        let store = list_store();
        meta(
            &store,
            b"l",
            &Metadata { head: 100, tail: 104, ..sized(RedisType::List, Version::Short(9), 3) },
        );
        let found = problems(&store);
        assert_eq!(found[0], Problem::ListBounds { key: key.clone(), size: 3, head: 100, tail: 104 });

        let store = list_store();
        put(
            &store,
            ColumnFamily::Subkey,
            layout().subkey(b"l", Version::Short(9), b"short").unwrap(),
            b"x".to_vec(),
        );
        assert!(
            problems(&store)
                .iter()
                .any(|p| matches!(p, Problem::BadRecord { why: "list index does not decode", .. }))
        );
    }

    #[test]
    fn undecodable_records_are_reported_not_panicked_on() {
        let store = zset_store();
        let bad_meta = layout().metadata_key(b"weird");
        put(&store, ColumnFamily::Metadata, bad_meta.clone(), vec![0x86, 0, 0]);
        put(&store, ColumnFamily::Metadata, vec![0x30, b'x'], vec![0x81]);
        put(&store, ColumnFamily::Subkey, vec![0x0B, b'_'], vec![]);
        put(&store, ColumnFamily::Score, layout().subkey(b"z", Version::Short(7), b"\x01").unwrap(), vec![]);
        let found = problems(&store);
        assert!(
            found
                .iter()
                .any(|p| matches!(p, Problem::UndecodableMetadata { key, .. } if key[..] == bad_meta[..]))
        );
        assert!(
            found.iter().any(|p| matches!(p, Problem::UndecodableKey { cf: ColumnFamily::Metadata, .. }))
        );
        assert!(found.iter().any(|p| matches!(p, Problem::UndecodableKey { cf: ColumnFamily::Subkey, .. })));
        assert!(found.iter().any(|p| matches!(p, Problem::UndecodableKey { cf: ColumnFamily::Score, .. })));
        assert!(found.iter().any(|p| matches!(p, Problem::BadRecord { cf: ColumnFamily::Score, .. })));
        assert!(found.iter().all(|p| !p.to_string().is_empty()));
    }

    #[test]
    fn misrouted_keys_are_found() {
        let slots = KeyLayout::default().with_cluster_slots(true);
        let store = MemoryBackend::new();
        let mut key = slots.metadata_key(b"s");
        key[12] ^= 1; // the slot's low byte
        put(&store, ColumnFamily::Metadata, key.clone(), Metadata::string(b"v", 0).to_vec());
        assert_eq!(check(&store, &slots, NOW).unwrap(), vec![Problem::Misrouted { key: key.into() }]);
    }

    #[test]
    fn expired_and_blind_collections_skip_the_count() {
        let store = MemoryBackend::new();
        meta(&store, b"old", &Metadata { expire_ms: NOW - 1, ..sized(RedisType::Set, Version::Short(4), 9) });
        meta(
            &store,
            b"blind",
            &Metadata { blind_write: true, ..sized(RedisType::Set, Version::Short(5), 0) },
        );
        put(
            &store,
            ColumnFamily::Subkey,
            layout().subkey(b"blind", Version::Short(5), b"m").unwrap(),
            vec![],
        );
        assert_eq!(problems(&store), vec![]);
    }

    fn db_store(clock: Arc<ManualClock>) -> Db<'static, MemoryBackend> {
        let mut db = Db::new(MemoryBackend::new()).with_clock(clock);
        let commands: &[&[&str]] = &[
            &["HSET", "h", "a", "1", "b", "2"],
            &["SADD", "s", "x", "y", "z"],
            &["SREM", "s", "y"],
            &["RPUSH", "l", "1", "2", "3", "4"],
            &["LPUSH", "l", "0"],
            &["LREM", "l", "1", "2"],
            &["LINSERT", "l", "BEFORE", "3", "2.5"],
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
            &["ZINCRBY", "z", "5", "a"],
            &["ZREM", "z", "b"],
            &["SET", "str", "v"],
            &["XADD", "x", "1-1", "f", "v"],
            &["XADD", "x", "2-1", "f", "w"],
            &["XADD", "x", "3-1", "g", "x"],
            &["XDEL", "x", "2-1"],
            &["XGROUP", "CREATE", "x", "g", "0"],
            &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "x", ">"],
            &["XADD", "xgone", "1-1", "f", "v"],
            &["DEL", "xgone"],
            &["HSET", "gone", "f", "v"],
            &["SET", "gone", "now a string"],
            &["SADD", "exp", "m"],
            &["PEXPIRE", "exp", "10"],
            &["SELECT", "3"],
            &["ZADD", "z", "-0", "m"],
            &["RPUSH", "l", "a"],
            &["DEL", "l"],
        ];
        for argv in commands {
            let reply = db.run(argv);
            assert!(!matches!(reply, crate::commands::Reply::Error(_)), "{argv:?}: {reply:?}");
        }
        db
    }

    #[test]
    fn stores_built_by_commands_are_clean() {
        let clock = Arc::new(ManualClock::new(NOW));
        let db = db_store(clock.clone());
        assert_eq!(check(db.backend(), &layout(), NOW).unwrap(), vec![]);
        let db3 = Fsck::new(&layout()).namespaces(&[b"__namespace:3"]);
        assert_eq!(db3.run(db.backend(), NOW).unwrap(), vec![]);
        // Lazy deletion left garbage behind; compaction with grace 0 drops all of it.
        let later = NOW + 1000;
        let garbage = Fsck::new(&layout()).report_garbage(true).run(db.backend(), later).unwrap();
        let reasons: Vec<GarbageReason> = garbage
            .iter()
            .map(|p| match p {
                Problem::Garbage { reason, .. } => *reason,
                other => panic!("{other}"),
            })
            .collect();
        for reason in [GarbageReason::OwnerIsString, GarbageReason::OwnerMissing, GarbageReason::OwnerExpired]
        {
            assert!(reasons.contains(&reason), "{reason:?} in {reasons:?}");
        }
        crate::gc::compact(db.backend(), &layout(), later, 0).unwrap();
        let after = Fsck::new(&layout()).report_garbage(true).run(db.backend(), later).unwrap();
        assert_eq!(after, vec![]);
    }

    #[test]
    fn stream_records_are_counted_and_decoded() {
        let clock = Arc::new(ManualClock::new(NOW));
        let db = db_store(clock);
        let store = db.backend();
        let raw = store.get(ColumnFamily::Metadata, &layout().metadata_key(b"x")).unwrap().unwrap();
        let version = Metadata::decode(&raw).unwrap().version;
        let sub = |s: StreamSub<'_>| layout().subkey(b"x", version, &s.to_bytes()).unwrap();
        // A lost entry: the size no longer matches.
        let entry = sub(StreamSub::Entry(crate::codec::StreamId { ms: 3, seq: 1 }));
        let value = store.get(ColumnFamily::Stream, &entry).unwrap().unwrap();
        del(store, ColumnFamily::Stream, entry.clone());
        let found = problems(store);
        assert!(matches!(found.as_slice(), [Problem::SizeMismatch { size: 2, subkeys: 1, .. }]), "{found:?}");
        put(store, ColumnFamily::Stream, entry, value.to_vec());
        assert_eq!(problems(store), vec![]);
        // A pending entry without its count in the group, and a value that does not decode.
        let pending = sub(StreamSub::Pending { group: b"g", id: crate::codec::StreamId { ms: 9, seq: 9 } });
        put(
            store,
            ColumnFamily::Stream,
            pending,
            PendingValue { delivered_ms: 1, deliveries: 1, consumer: b"alice" }.to_bytes(),
        );
        put(
            store,
            ColumnFamily::Stream,
            sub(StreamSub::Consumer { group: b"g", consumer: b"bob" }),
            vec![1, 2, 3],
        );
        let why: Vec<&str> = problems(store)
            .iter()
            .map(|p| match p {
                Problem::BadRecord { why, .. } => *why,
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(why, ["stream consumer value does not decode", "stream group's pending count disagrees"]);
    }

    #[test]
    fn other_versions_and_empty_owners_are_garbage() {
        let store = zset_store();
        put(&store, ColumnFamily::Subkey, layout().subkey(b"z", Version::Short(6), b"old").unwrap(), vec![]);
        meta(&store, b"e", &sized(RedisType::Hash, Version::Short(8), 0));
        put(&store, ColumnFamily::Subkey, layout().subkey(b"e", Version::Short(8), b"f").unwrap(), vec![]);
        let found = Fsck::new(&layout()).report_garbage(true).run(&store, NOW).unwrap();
        let reasons: Vec<_> = found
            .iter()
            .filter_map(|p| match p {
                Problem::Garbage { reason, .. } => Some(*reason),
                _ => None,
            })
            .collect();
        assert_eq!(reasons, vec![GarbageReason::OwnerEmpty, GarbageReason::OtherVersion]);
    }
}
