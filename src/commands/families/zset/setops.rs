//! ZUNION, ZINTER, ZDIFF (and their STORE forms) and ZINTERCARD. Plain sets are accepted
//! as inputs with every score 1, as in Redis.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;

use super::core::ScoredMember;
use super::{Aggregate, SetOp};
use crate::backend::{Direction, KvBackend};
use crate::codec::{Metadata, RedisType};
use crate::commands::{CommandError, CommandResult, Db};

/// One input of a set operation.
struct Source<'k> {
    key: &'k [u8],
    meta: Option<Metadata<'static>>,
    weight: f64,
}

impl Source<'_> {
    fn len(&self) -> u64 {
        self.meta.as_ref().map_or(0, |m| m.size)
    }
}

fn aggregate(target: &mut f64, val: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += val;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if val < *target {
                *target = val;
            }
        }
        Aggregate::Max => {
            if val > *target {
                *target = val;
            }
        }
    }
}

fn weighted(weight: f64, score: f64) -> f64 {
    let s = weight * score;
    if s.is_nan() { 0.0 } else { s }
}

/// Sorts results the way a sorted set orders them: score, then member bytes.
pub(super) fn sort_items(items: &mut [ScoredMember]) {
    items.sort_by(|a, b| {
        a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.0.cmp(&b.0))
    });
}

impl<B: KvBackend> Db<'_, B> {
    /// Type-checks every input (sorted set or set; missing is empty), in argument order.
    fn sources<'k>(&self, keys: &'k [Bytes], weights: Option<&[f64]>) -> CommandResult<Vec<Source<'k>>> {
        keys.iter()
            .enumerate()
            .map(|(i, key)| {
                let meta = match self.lookup(key)? {
                    None => None,
                    Some(e) if matches!(e.meta.ty, RedisType::ZSet | RedisType::Set) => Some(e.meta),
                    Some(_) => return Err(CommandError::WrongType),
                };
                let weight = weights.and_then(|w| w.get(i)).copied().unwrap_or(1.0);
                Ok(Source { key, meta, weight })
            })
            .collect()
    }

    /// Every (member, score) of a source: sets give score 1.
    fn load(&self, src: &Source<'_>) -> CommandResult<Vec<ScoredMember>> {
        let Some(meta) = &src.meta else { return Ok(Vec::new()) };
        if meta.ty == RedisType::Set {
            return self
                .scan_subkeys(src.key, meta.version, Direction::Forward)?
                .map(|r| r.map(|(m, _)| (m, 1.0)))
                .collect();
        }
        self.scan_members(src.key, meta.version)?.collect()
    }

    /// A point lookup of `member` in a source: its score, 1 for a set member.
    fn probe(&self, src: &Source<'_>, member: &[u8]) -> CommandResult<Option<f64>> {
        let Some(meta) = &src.meta else { return Ok(None) };
        if meta.ty == RedisType::Set {
            return Ok(self.get_subkey(src.key, meta.version, member)?.map(|_| 1.0));
        }
        self.member_score(src.key, meta.version, member)
    }

    /// ZUNION / ZINTER / ZDIFF: the result in sorted-set order.
    ///
    /// Union reads every input; intersection reads the smallest input and probes the others
    /// with point reads; difference reads the first and probes the rest. Weighted scores
    /// that are NaN (0 × inf) count as 0, and so do SUMs of +inf and -inf, as in Redis.
    /// `weights` (one per key) and `aggregate` do not apply to [`SetOp::Diff`].
    ///
    /// # Errors
    /// WRONGTYPE when an input is neither a sorted set nor a set; storage errors.
    pub(crate) fn zsetop(
        &self,
        op: SetOp,
        keys: &[Bytes],
        weights: Option<&[f64]>,
        how: Aggregate,
    ) -> CommandResult<Vec<ScoredMember>> {
        let mut srcs = self.sources(keys, weights)?;
        let mut out: Vec<ScoredMember> = Vec::new();
        match op {
            SetOp::Union => {
                srcs.sort_by_key(Source::len);
                let mut acc: HashMap<Bytes, usize> = HashMap::new();
                for src in &srcs {
                    for (member, score) in self.load(src)? {
                        let score = weighted(src.weight, score);
                        match acc.get(&member) {
                            Some(&i) => aggregate(&mut out[i].1, score, how),
                            None => {
                                acc.insert(member.clone(), out.len());
                                out.push((member, score));
                            }
                        }
                    }
                }
            }
            SetOp::Inter => {
                srcs.sort_by_key(Source::len);
                if srcs.iter().any(|s| s.meta.is_none()) {
                    return Ok(Vec::new());
                }
                'members: for (member, score) in self.load(&srcs[0])? {
                    let mut total = weighted(srcs[0].weight, score);
                    for src in &srcs[1..] {
                        match self.probe(src, &member)? {
                            None => continue 'members,
                            // Unlike the first score, Redis aggregates these raw: -inf × 0 is NaN,
                            // and a NaN sum becomes 0 in `aggregate`.
                            Some(s) => aggregate(&mut total, src.weight * s, how),
                        }
                    }
                    out.push((member, total));
                }
            }
            SetOp::Diff => {
                'diff: for (member, score) in self.load(&srcs[0])? {
                    for src in &srcs[1..] {
                        if self.probe(src, &member)?.is_some() {
                            continue 'diff;
                        }
                    }
                    out.push((member, score));
                }
            }
        }
        sort_items(&mut out);
        Ok(out)
    }

    /// ZUNIONSTORE / ZINTERSTORE / ZDIFFSTORE: [`Db::zsetop`] stored in `dst` (replacing
    /// any value, fresh version; deleted when empty). Returns the stored size.
    ///
    /// # Errors
    /// As [`Db::zsetop`].
    pub(crate) fn zsetop_store(
        &mut self,
        dst: &[u8],
        op: SetOp,
        keys: &[Bytes],
        weights: Option<&[f64]>,
        how: Aggregate,
    ) -> CommandResult<i64> {
        let items = self.zsetop(op, keys, weights, how)?;
        let event = match op {
            SetOp::Union => "zunionstore",
            SetOp::Inter => "zinterstore",
            SetOp::Diff => "zdiffstore",
        };
        self.store_zset_as(dst, &items, event)
    }

    /// ZINTERCARD: the size of the intersection, stopping at `limit` (0 = no limit).
    ///
    /// # Errors
    /// As [`Db::zsetop`].
    pub(crate) fn zintercard(&self, keys: &[Bytes], limit: u64) -> CommandResult<u64> {
        let mut srcs = self.sources(keys, None)?;
        srcs.sort_by_key(Source::len);
        if srcs.iter().any(|s| s.meta.is_none()) {
            return Ok(0);
        }
        let mut n = 0;
        let mut seen = HashSet::new();
        'members: for (member, _) in self.load(&srcs[0])? {
            for src in &srcs[1..] {
                if self.probe(src, &member)?.is_none() {
                    continue 'members;
                }
            }
            if seen.insert(member) {
                n += 1;
                if limit != 0 && n >= limit {
                    break;
                }
            }
        }
        Ok(n)
    }
}
