//! Read-only sorted-set queries: scores, counts, ranges, ranks, random members, ZSCAN.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;

use super::core::{ScoredMember, ZKey, lex_key_range, score_bytes, score_key_range};
use super::{LexRange, RangeQuery, RangeSpec, ScoreRange};
use crate::backend::{Direction, KvBackend};
use crate::codec::{KeyRange, RedisType};
use crate::commands::args::normalize_range;
use crate::commands::subkeys::ScanOptions;
use crate::commands::{CommandResult, Db};

impl<B: KvBackend> Db<'_, B> {
    /// ZCARD: the number of members of `key` (0 when missing), from the metadata alone.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zcard(&self, key: &[u8]) -> CommandResult<u64> {
        Ok(self.lookup_of(key, RedisType::ZSet)?.map_or(0, |m| m.size))
    }

    /// ZSCORE: one point read of the member record.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zscore(&self, key: &[u8], member: &[u8]) -> CommandResult<Option<f64>> {
        match self.lookup_of(key, RedisType::ZSet)? {
            None => Ok(None),
            Some(meta) => self.member_score(key, meta.version, member),
        }
    }

    /// ZMSCORE: one batched read (`multi_get`) of the member records.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zmscore(&self, key: &[u8], members: &[Bytes]) -> CommandResult<Vec<Option<f64>>> {
        let Some(meta) = self.lookup_of(key, RedisType::ZSet)? else {
            return Ok(vec![None; members.len()]);
        };
        let keys = members
            .iter()
            .map(|m| Ok(self.layout().member_key(key, meta.version, m)?))
            .collect::<CommandResult<Vec<_>>>()?;
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let values = self.backend().multi_get(crate::backend::ColumnFamily::Subkey, &refs)?;
        values
            .into_iter()
            .map(|v| v.map(|v| Ok(self.layout().decode_member_score(&v)?)).transpose())
            .collect()
    }

    /// ZCOUNT: members whose score lies in `range`; one Score CF range scan, O(result).
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zcount(&self, key: &[u8], range: &ScoreRange) -> CommandResult<i64> {
        let Some(z) = self.zkey(key)? else { return Ok(0) };
        let Some(kr) = score_key_range(range) else { return Ok(0) };
        let mut n = 0;
        for item in self.scan_score_range(&z, &kr, Direction::Forward)? {
            item?;
            n += 1;
        }
        Ok(n)
    }

    /// ZLEXCOUNT: members in the lex range; one Subkey CF range scan, O(result).
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zlexcount(&self, key: &[u8], range: &LexRange) -> CommandResult<i64> {
        let Some(z) = self.zkey(key)? else { return Ok(0) };
        let Some(kr) = lex_key_range(&z.prefix, range) else { return Ok(0) };
        let mut n = 0;
        for item in self.scan_member_range(z.prefix.len(), &kr, Direction::Forward)? {
            item?;
            n += 1;
        }
        Ok(n)
    }

    /// ZRANGE and its variants: the selected (member, score) pairs in reply order.
    ///
    /// Rank ranges walk the Score CF from whichever end is nearer (O(distance + result));
    /// score ranges are one Score CF scan from the encoded bound; lex ranges are one
    /// Subkey CF scan in member order (Redis leaves lex ranges over unequal scores
    /// unspecified; here they are simply member order). LIMIT offsets are skipped in the scan.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zrange(&self, key: &[u8], query: &RangeQuery) -> CommandResult<Vec<ScoredMember>> {
        match self.zkey(key)? {
            None => Ok(Vec::new()),
            Some(z) => self.zrange_of(&z, query),
        }
    }

    pub(super) fn zrange_of(&self, z: &ZKey, query: &RangeQuery) -> CommandResult<Vec<ScoredMember>> {
        let dir = if query.rev { Direction::Reverse } else { Direction::Forward };
        match &query.spec {
            RangeSpec::Rank { start, stop } => {
                let len = z.meta.size as i64;
                let Some((s, e)) = normalize_range(*start, *stop, len) else { return Ok(Vec::new()) };
                // Ascending positions [a, b].
                let (a, b) = if query.rev { (len - 1 - e, len - 1 - s) } else { (s, e) };
                let mut items = self.positions(z, a, b)?;
                if query.rev {
                    items.reverse();
                }
                Ok(items)
            }
            RangeSpec::Score(range) => {
                let Some(kr) = score_key_range(range) else { return Ok(Vec::new()) };
                let iter = self.scan_score_range(z, &kr, dir)?;
                collect_limited(iter, query.limit)
            }
            RangeSpec::Lex(range) => {
                let Some(kr) = lex_key_range(&z.prefix, range) else { return Ok(Vec::new()) };
                let iter = self.scan_member_range(z.prefix.len(), &kr, dir)?;
                collect_limited(iter, query.limit)
            }
        }
    }

    /// The members at ascending positions `a..=b`, walking from the nearer end. A read
    /// failing among the skipped records is an error too (`Iterator::skip` would drop it).
    pub(super) fn positions(&self, z: &ZKey, a: i64, b: i64) -> CommandResult<Vec<ScoredMember>> {
        let len = z.meta.size as i64;
        let count = (b - a + 1) as usize;
        let forward = a <= len - 1 - b;
        let (dir, skip) = if forward { (Direction::Forward, a) } else { (Direction::Reverse, len - 1 - b) };
        let mut iter = self.scan_all_scores(z, dir)?;
        for item in iter.by_ref().take(skip as usize) {
            item?;
        }
        let mut items: Vec<ScoredMember> = iter.take(count).collect::<CommandResult<_>>()?;
        if !forward {
            items.reverse();
        }
        Ok(items)
    }

    /// ZRANK / ZREVRANK: the member's 0-based position, ascending or descending.
    ///
    /// Cost: one point read for the score, then two Score CF scans walked in lockstep, one
    /// from the lowest score up to the member and one from the highest down to it; the
    /// first to arrive gives the rank, so the cost is O(min(rank, size - rank)).
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zrank(&self, key: &[u8], member: &[u8], rev: bool) -> CommandResult<Option<i64>> {
        let Some(z) = self.zkey(key)? else { return Ok(None) };
        let Some(score) = self.member_score(key, z.meta.version, member)? else { return Ok(None) };
        let own = [&score_bytes(score)?[..], member].concat();
        let below = KeyRange { start: Vec::new(), end: Some(own.clone()) };
        let mut after = own;
        after.push(0);
        let above = KeyRange { start: after, end: None };
        let mut up = self.scan_score_range(&z, &below, Direction::Forward)?;
        let mut down = self.scan_score_range(&z, &above, Direction::Reverse)?;
        let len = z.meta.size as i64;
        let mut n: i64 = 0;
        let asc = loop {
            match up.next() {
                None => break n,
                Some(r) => {
                    r?;
                }
            }
            match down.next() {
                None => break len - 1 - n,
                Some(r) => {
                    r?;
                }
            }
            n += 1;
        };
        let asc = asc.clamp(0, (len - 1).max(0));
        Ok(Some(if rev { len - 1 - asc } else { asc }))
    }

    /// ZRANDMEMBER without a count: one random member, or `None` for a missing key.
    /// Cost O(size): the position is walked to from the nearer end.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zrandmember_one(&mut self, key: &[u8]) -> CommandResult<Option<Bytes>> {
        let Some(z) = self.zkey(key)? else { return Ok(None) };
        let p = (self.random_u64() % z.meta.size.max(1)) as i64;
        Ok(self.positions(&z, p, p)?.into_iter().next().map(|(m, _)| m))
    }

    /// ZRANDMEMBER with a count: `count >= 0` gives distinct members (the whole set, in
    /// score order, when `count >= size`); a negative count gives `|count|` members that
    /// may repeat. One scan of the set, O(size + |count|).
    ///
    /// # Errors
    /// WRONGTYPE; "ERR value is out of range" for a negative count below
    /// `-`[`super::MAX_RANDOM_REPEATS`]; storage errors.
    pub(crate) fn zrandmember(&mut self, key: &[u8], count: i64) -> CommandResult<Vec<ScoredMember>> {
        if count < -super::MAX_RANDOM_REPEATS {
            return Err(crate::commands::CommandError::err("value is out of range"));
        }
        let Some(z) = self.zkey(key)? else { return Ok(Vec::new()) };
        let size = z.meta.size;
        if count == 0 || size == 0 {
            return Ok(Vec::new());
        }
        if count > 0 && count as u64 >= size {
            return self.scan_all_scores(&z, Direction::Forward)?.collect();
        }
        // Pick positions.
        let picks: Vec<u64> = if count > 0 {
            // Floyd's algorithm: `count` distinct positions.
            let k = count as u64;
            let mut chosen = BTreeSet::new();
            for j in size - k..size {
                let t = self.random_u64() % (j + 1);
                if !chosen.insert(t) {
                    chosen.insert(j);
                }
            }
            let mut v: Vec<u64> = chosen.into_iter().collect();
            self.shuffle(&mut v);
            v
        } else {
            let n = count.unsigned_abs();
            let mut v = Vec::new();
            for _ in 0..n {
                v.push(self.random_u64() % size);
            }
            v
        };
        let wanted: BTreeSet<u64> = picks.iter().copied().collect();
        let last = *wanted.iter().next_back().unwrap_or(&0);
        let mut found: HashMap<u64, ScoredMember> = HashMap::new();
        for (i, item) in self.scan_all_scores(&z, Direction::Forward)?.enumerate() {
            let i = i as u64;
            if i > last {
                break;
            }
            let item = item?;
            if wanted.contains(&i) {
                found.insert(i, item);
            }
        }
        Ok(picks.iter().filter_map(|p| found.get(p).cloned()).collect())
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.random_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }

    /// ZSCAN: up to `count` members examined from the cursor in member order, filtered by
    /// `pattern`; returns the next cursor (0 when done). Cursors are kept by
    /// [`crate::commands::Db`]'s cursor store; an unknown cursor starts over.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zscan(
        &mut self,
        key: &[u8],
        cursor: u64,
        pattern: Option<&[u8]>,
        count: usize,
    ) -> CommandResult<(u64, Vec<ScoredMember>)> {
        let Some(meta) = self.lookup_of(key, RedisType::ZSet)? else { return Ok((0, Vec::new())) };
        let opts = ScanOptions { pattern: pattern.map(Bytes::copy_from_slice), count };
        let (next, page) =
            self.scan_page_in(self.layout().member_prefix(key, meta.version)?, cursor, &opts)?;
        let members = page
            .into_iter()
            .map(|(member, score)| Ok((member, self.layout().decode_member_score(&score)?)))
            .collect::<CommandResult<_>>()?;
        Ok((next, members))
    }
}

fn collect_limited(
    iter: impl Iterator<Item = CommandResult<ScoredMember>>,
    limit: Option<(i64, i64)>,
) -> CommandResult<Vec<ScoredMember>> {
    let (skip, take) = match limit {
        None => (0, usize::MAX),
        Some((offset, _)) if offset < 0 => return Ok(Vec::new()),
        Some((offset, count)) => (offset as usize, if count < 0 { usize::MAX } else { count as usize }),
    };
    let mut out = Vec::new();
    let mut skipped = 0;
    for item in iter {
        if out.len() >= take {
            break;
        }
        let item = item?;
        if skipped < skip {
            skipped += 1;
            continue;
        }
        out.push(item);
    }
    Ok(out)
}
