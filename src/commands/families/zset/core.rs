//! Record-level helpers: reading a sorted set's two column families and editing both in
//! one batch.

use bytes::Bytes;

use super::{LexBound, LexRange, ScoreRange};
use crate::backend::{ColumnFamily, Direction, KvBackend, WriteBatch};
use crate::codec::{KeyRange, Metadata, RedisType, Version, encode_f64, prefix_successor};
use crate::commands::args::Distinct;
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandResult, Db};

/// A (member, score) pair as commands return them.
pub type ScoredMember = (Bytes, f64);

/// The 8 ordered bytes of a score; NaN never reaches here (commands reject it), but would
/// be a storage error rather than a panic.
pub(super) fn score_bytes(score: f64) -> CommandResult<[u8; 8]> {
    Ok(encode_f64(score)?)
}

/// The members of a score range as a range of ordered positions `[ordered score][member]`
/// (what a score key holds after its prefix, with the score in [`encode_f64`]'s order), or
/// `None` when it is empty.
pub(super) fn score_key_range(range: &ScoreRange) -> Option<KeyRange> {
    let enc = |x: f64| encode_f64(x).map(u64::from_be_bytes).ok();
    let lo = enc(range.min.value)?;
    let hi = enc(range.max.value)?;
    let lo = if range.min.exclusive { lo.checked_add(1)? } else { lo };
    // `hi` is the first encoded score past the range.
    let hi = if range.max.exclusive { hi } else { hi.checked_add(1)? };
    if lo >= hi {
        return None;
    }
    Some(KeyRange { start: lo.to_be_bytes().to_vec(), end: Some(hi.to_be_bytes().to_vec()) })
}

/// Every ordered position: the whole sorted set.
pub(super) fn all_scores() -> KeyRange {
    KeyRange { start: Vec::new(), end: None }
}

/// Where a run of ordered positions lies in a layout whose score keys hold raw IEEE bits
/// (camellia): the non-negative scores in order, the negative ones in reverse.
struct RawParts {
    /// Raw score range of the negative scores, inclusive, if any.
    negative: Option<(u64, u64)>,
    /// Raw score range of the non-negative scores, inclusive, if any.
    positive: Option<(u64, u64)>,
}

const SIGN: u64 = 1 << 63;

/// The raw score ranges holding every score of the ordered positions `range` (a superset at
/// its two ends' scores: the caller filters by position).
fn raw_parts(range: &KeyRange) -> RawParts {
    let score_of = |b: &[u8]| {
        let mut s = [0u8; 8];
        let n = b.len().min(8);
        s[..n].copy_from_slice(&b[..n]);
        u64::from_be_bytes(s)
    };
    let lo = score_of(&range.start);
    let hi = range.end.as_deref().map_or(u64::MAX, score_of);
    let positive = (hi >= SIGN && lo.max(SIGN) <= hi).then(|| (lo.max(SIGN) ^ SIGN, hi ^ SIGN));
    let neg_hi = hi.min(SIGN - 1);
    let negative = (lo <= neg_hi).then_some((!neg_hi, !lo));
    RawParts { negative, positive }
}

/// Yields each run of equal scores of `inner` in reverse: a backward walk over camellia's
/// negative scores meets the members of one score from the last.
struct TiesReversed<I: Iterator> {
    inner: std::iter::Peekable<I>,
    run: Vec<ScoredMember>,
}

impl<I: Iterator<Item = CommandResult<ScoredMember>>> Iterator for TiesReversed<I> {
    type Item = CommandResult<ScoredMember>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(item) = self.run.pop() {
            return Some(Ok(item));
        }
        let first = match self.inner.next()? {
            Ok(item) => item,
            Err(e) => return Some(Err(e)),
        };
        let bits = first.1.to_bits();
        self.run.push(first);
        while let Some(Ok((_, s))) = self.inner.peek() {
            if s.to_bits() != bits {
                break;
            }
            if let Some(Ok(item)) = self.inner.next() {
                self.run.push(item);
            }
        }
        self.run.pop().map(Ok)
    }
}

/// The key range of a lex range inside `prefix`, or `None` when it is empty.
pub(super) fn lex_key_range(prefix: &[u8], range: &LexRange) -> Option<KeyRange> {
    let join = |m: &[u8], zero: bool| {
        let mut k = Vec::with_capacity(prefix.len() + m.len() + 1);
        k.extend_from_slice(prefix);
        k.extend_from_slice(m);
        if zero {
            k.push(0);
        }
        k
    };
    let start = match &range.min {
        LexBound::Min => prefix.to_vec(),
        LexBound::Max => return None,
        LexBound::Inclusive(m) => join(m, false),
        LexBound::Exclusive(m) => join(m, true),
    };
    let end = match &range.max {
        LexBound::Min => return None,
        LexBound::Max => prefix_successor(prefix),
        LexBound::Inclusive(m) => Some(join(m, true)),
        LexBound::Exclusive(m) => Some(join(m, false)),
    };
    if end.as_ref().is_some_and(|e| e <= &start) {
        return None;
    }
    Some(KeyRange { start, end })
}

/// A live sorted set: its metadata and the record prefixes of its version.
pub(crate) struct ZKey {
    pub meta: Metadata<'static>,
    /// The prefix of its member subkeys.
    pub prefix: Vec<u8>,
    /// The prefix of its score keys (the same bytes but in camellia's layout).
    pub scores: Vec<u8>,
}

impl<B: KvBackend> Db<'_, B> {
    /// The live sorted set at `key`, with its record prefix.
    pub(crate) fn zkey(&self, key: &[u8]) -> CommandResult<Option<ZKey>> {
        let Some(meta) = self.lookup_of(key, RedisType::ZSet)? else { return Ok(None) };
        let prefix = self.layout().member_prefix(key, meta.version)?;
        let scores = self.layout().score_prefix(key, meta.version, 0)?;
        Ok(Some(ZKey { meta, prefix, scores }))
    }

    /// The stored score of `member`.
    pub(super) fn member_score(
        &self,
        key: &[u8],
        version: Version,
        member: &[u8],
    ) -> CommandResult<Option<f64>> {
        // The record is decoded where the store keeps it: a score needs no copy of it.
        let mut score = None;
        let mkey = self.layout().member_key(key, version, member)?;
        self.backend().get_with(ColumnFamily::Subkey, &mkey, &mut |raw| {
            score = raw.map(|raw| self.layout().decode_member_score(raw));
        })?;
        Ok(score.transpose()?)
    }

    /// Walks the members of `z` at the ordered positions `range` ([`score_key_range`]) in
    /// score order, yielding (member, score). One Score CF scan; where score keys hold raw
    /// IEEE bits (camellia), one per sign, the negative scores walked the other way.
    pub(super) fn scan_score_range<'a>(
        &'a self,
        z: &ZKey,
        range: &KeyRange,
        dir: Direction,
    ) -> CommandResult<Box<dyn Iterator<Item = CommandResult<ScoredMember>> + 'a>> {
        let prefix = &z.scores;
        if self.layout().scores_ordered() {
            let join = |rel: &[u8]| [prefix.as_slice(), rel].concat();
            let end = match &range.end {
                Some(end) => Some(join(end)),
                None => prefix_successor(prefix),
            };
            let keys = KeyRange { start: join(&range.start), end };
            return Ok(Box::new(self.scan_scores(prefix.len(), &keys, dir)?));
        }
        let parts = raw_parts(range);
        let raw = |(a, b): (u64, u64)| {
            let start = [prefix.as_slice(), &a.to_be_bytes()].concat();
            let end = match b.checked_add(1) {
                Some(b) => Some([prefix.as_slice(), &b.to_be_bytes()].concat()),
                None => prefix_successor(prefix),
            };
            KeyRange { start, end }
        };
        let flip = match dir {
            Direction::Forward => Direction::Reverse,
            Direction::Reverse => Direction::Forward,
        };
        let negative: Box<dyn Iterator<Item = _>> = match parts.negative {
            Some(p) => {
                let inner = self.scan_scores(prefix.len(), &raw(p), flip)?.peekable();
                Box::new(TiesReversed { inner, run: Vec::new() })
            }
            None => Box::new(std::iter::empty()),
        };
        let positive: Box<dyn Iterator<Item = _>> = match parts.positive {
            Some(p) => Box::new(self.scan_scores(prefix.len(), &raw(p), dir)?),
            None => Box::new(std::iter::empty()),
        };
        let walk: Box<dyn Iterator<Item = _>> = match dir {
            Direction::Forward => Box::new(negative.chain(positive)),
            Direction::Reverse => Box::new(positive.chain(negative)),
        };
        let range = range.clone();
        Ok(Box::new(walk.filter(move |item| match item {
            Ok((member, score)) => {
                let at = [&encode_f64(*score).unwrap_or_default()[..], member].concat();
                range.contains(&at)
            }
            Err(_) => true,
        })))
    }

    /// Walks the Score CF records in `keys`, yielding (member, score).
    fn scan_scores<'a>(
        &'a self,
        prefix_len: usize,
        keys: &KeyRange,
        dir: Direction,
    ) -> CommandResult<impl Iterator<Item = CommandResult<ScoredMember>> + use<'a, B>> {
        let iter = self.backend().scan(ColumnFamily::Score, keys, dir)?;
        Ok(iter.map(move |item| {
            let (k, _) = item?;
            if k.len() < prefix_len + 8 {
                return Err(crate::Error::Truncated {
                    what: "score key",
                    need: prefix_len + 8,
                    have: k.len(),
                }
                .into());
            }
            let score = self.layout().decode_score(&k[prefix_len..prefix_len + 8])?;
            Ok((k.slice(prefix_len + 8..), score))
        }))
    }

    /// Walks the member records of the sorted set `key` at `version` in member order,
    /// yielding (member, score).
    ///
    /// # Errors
    /// Storage errors; a member record whose score does not decode.
    pub(crate) fn scan_members<'a>(
        &'a self,
        key: &[u8],
        version: Version,
    ) -> CommandResult<impl Iterator<Item = CommandResult<ScoredMember>> + use<'a, B>> {
        let prefix = self.layout().member_prefix(key, version)?;
        self.scan_member_range(prefix.len(), &KeyRange::prefix(prefix), Direction::Forward)
    }

    /// Walks Subkey CF records in `range` (inside `prefix`), yielding (member, score).
    pub(super) fn scan_member_range<'a>(
        &'a self,
        prefix_len: usize,
        range: &KeyRange,
        dir: Direction,
    ) -> CommandResult<impl Iterator<Item = CommandResult<ScoredMember>> + use<'a, B>> {
        let iter = self.backend().scan(ColumnFamily::Subkey, range, dir)?;
        Ok(iter.map(move |item| {
            let (k, v) = item?;
            let score = self.layout().decode_member_score(&v)?;
            Ok((k.slice(prefix_len.min(k.len())..), score))
        }))
    }

    /// Calls `f` with each (member, score) whose score lies in `[min, max)`, in score order,
    /// until it returns `false` (the geo searches' box scans).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn for_each_in_scores(
        &self,
        z: &ZKey,
        min: f64,
        max: f64,
        mut f: impl FnMut(Bytes, f64) -> bool,
    ) -> CommandResult<()> {
        let bound = |value, exclusive| super::ScoreBound { value, exclusive };
        let range = ScoreRange { min: bound(min, false), max: bound(max, true) };
        let Some(kr) = score_key_range(&range) else { return Ok(()) };
        for item in self.scan_score_range(z, &kr, Direction::Forward)? {
            let (member, score) = item?;
            if !f(member, score) {
                break;
            }
        }
        Ok(())
    }

    /// Walks the whole sorted set in score order.
    pub(super) fn scan_all_scores<'a>(
        &'a self,
        z: &ZKey,
        dir: Direction,
    ) -> CommandResult<Box<dyn Iterator<Item = CommandResult<ScoredMember>> + 'a>> {
        self.scan_score_range(z, &all_scores(), dir)
    }

    /// Queues both records of `member` with `score`.
    pub(crate) fn put_member_records(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        version: Version,
        member: &[u8],
        score: f64,
    ) -> CommandResult<()> {
        let value = self.layout().encode_member_score(score)?;
        batch.put(ColumnFamily::Subkey, self.layout().member_key(key, version, member)?, value);
        let score_value = if self.layout().version_len() == 16 {
            // TiTea keeps the score's text in the score record too.
            self.layout().encode_member_score(score)?
        } else {
            Vec::new()
        };
        batch.put(ColumnFamily::Score, self.layout().score_key(key, version, score, member)?, score_value);
        Ok(())
    }

    /// Queues the deletion of both records of `member`, whose stored score is `score`.
    pub(super) fn delete_member_records(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        version: Version,
        member: &[u8],
        score: f64,
    ) -> CommandResult<()> {
        batch.delete(ColumnFamily::Subkey, self.layout().member_key(key, version, member)?);
        batch.delete(ColumnFamily::Score, self.layout().score_key(key, version, score, member)?);
        Ok(())
    }

    /// [`Db::store_zset`], recording the STORE command's `event` (see [`Db::notify_store`]).
    pub(crate) fn store_zset_as(
        &mut self,
        dst: &[u8],
        items: &[ScoredMember],
        event: &'static str,
    ) -> CommandResult<i64> {
        let existed = self.store_target(dst, items.is_empty())?;
        let stored = self.store_zset(dst, items)?;
        self.notify_store(NotifyFlags::ZSET, event, dst, items.is_empty(), existed);
        Ok(stored)
    }

    /// Replaces `dst` (whatever its type) with a new sorted set holding `items` (unique
    /// members), under a fresh version; an empty `items` deletes `dst`. Returns the size.
    pub(crate) fn store_zset(&mut self, dst: &[u8], items: &[ScoredMember]) -> CommandResult<i64> {
        let mut batch = WriteBatch::new();
        if items.is_empty() {
            self.delete_key(&mut batch, dst);
        } else {
            let mut meta = Metadata::collection(RedisType::ZSet, self.new_version());
            for (member, score) in items {
                self.put_member_records(&mut batch, dst, meta.version, member, *score)?;
            }
            meta.size = items.len() as u64;
            self.put_metadata(&mut batch, dst, &meta);
        }
        self.commit(batch)?;
        Ok(items.len() as i64)
    }
}

/// In-memory state of the members one command edits, so duplicates within the command see
/// earlier changes; [`ZEdit::finish`] turns the net changes into one batch.
pub(super) struct ZEdit<'k> {
    pub key: &'k [u8],
    pub meta: Metadata<'static>,
    /// Whether the key existed before the command.
    pub existed: bool,
    /// Each member looked up, in the order first looked up, with its score in storage and
    /// its score now.
    members: Distinct<'k, (Option<f64>, Option<f64>)>,
}

impl<'k> ZEdit<'k> {
    /// Starts editing the sorted set at `key`: a missing or expired key starts as an empty
    /// set under a fresh version, written only if a member gets added.
    pub(crate) fn open<B: KvBackend>(db: &Db<B>, key: &'k [u8]) -> CommandResult<Self> {
        let existing = db.lookup_of(key, RedisType::ZSet)?;
        let existed = existing.is_some();
        let meta = existing.unwrap_or_else(|| Metadata::collection(RedisType::ZSet, db.new_version()));
        Ok(ZEdit { key, meta, existed, members: Distinct::with_capacity(1) })
    }

    /// The member's score as of now in this command.
    pub(crate) fn get<B: KvBackend>(&mut self, db: &Db<B>, member: &'k [u8]) -> CommandResult<Option<f64>> {
        if let Some(at) = self.members.position(member) {
            return Ok(self.members.value(at).1);
        }
        let stored = if self.existed { db.member_score(self.key, self.meta.version, member)? } else { None };
        self.members.push(member, (stored, stored));
        Ok(stored)
    }

    /// Sets (or removes, with `None`) the member's score; [`ZEdit::get`] must have been
    /// called for it first.
    pub(crate) fn set(&mut self, member: &[u8], score: Option<f64>) {
        if let Some(at) = self.members.position(member) {
            self.members.value_mut(at).1 = score;
        }
    }

    /// Queues the net changes and the metadata into one batch and commits it.
    pub(crate) fn finish<B: KvBackend>(self, db: &mut Db<B>) -> CommandResult<()> {
        // No room taken until a member changes: a ZADD of the scores there already writes
        // nothing.
        let mut batch = WriteBatch::default();
        let mut size = self.meta.size as i64;
        let version = self.meta.version;
        for &(member, (stored, now)) in self.members.entries() {
            let same = match (stored, now) {
                (Some(a), Some(b)) => score_bytes(a)? == score_bytes(b)?,
                (None, None) => true,
                _ => false,
            };
            if same {
                continue;
            }
            if batch.is_empty() {
                batch = WriteBatch::new();
            }
            if let Some(old) = stored {
                if now.is_none() {
                    db.delete_member_records(&mut batch, self.key, version, member, old)?;
                    size -= 1;
                } else {
                    batch.delete(ColumnFamily::Score, db.layout().score_key(self.key, version, old, member)?);
                }
            } else {
                size += 1;
            }
            if let Some(new) = now {
                db.put_member_records(&mut batch, self.key, version, member, new)?;
            }
        }
        if size as u64 != self.meta.size {
            let meta = Metadata { size: size.max(0) as u64, ..self.meta };
            db.put_collection(&mut batch, self.key, &meta);
        }
        db.commit(batch)
    }
}
