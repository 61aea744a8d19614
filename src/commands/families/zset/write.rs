//! Sorted-set writes: ZADD, ZINCRBY, ZREM, the ZREMRANGEBY* family, pops, ZRANGESTORE.

use bytes::Bytes;

use super::core::{ScoredMember, ZEdit, lex_key_range, score_key_range};
use super::{RangeQuery, RangeSpec, ZAddFlags, ZAddOutcome};
use crate::backend::{Direction, KvBackend, WriteBatch};
use crate::codec::{Metadata, RedisType};
use crate::commands::args::normalize_range;
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandError, CommandResult, Db};

impl ZAddFlags {
    /// Checks the option combinations Redis refuses, for `pairs` score-member pairs.
    ///
    /// # Errors
    /// "ERR XX and NX options at the same time are not compatible", "ERR GT, LT, and/or NX
    /// options at the same time are not compatible", "ERR INCR option supports a single
    /// increment-element pair", in that order.
    pub(crate) fn validate(&self, pairs: usize) -> CommandResult<()> {
        if self.nx && self.xx {
            return Err(CommandError::err("XX and NX options at the same time are not compatible"));
        }
        if (self.nx && (self.gt || self.lt)) || (self.gt && self.lt) {
            return Err(CommandError::err("GT, LT, and/or NX options at the same time are not compatible"));
        }
        if self.incr && pairs > 1 {
            return Err(CommandError::err("INCR option supports a single increment-element pair"));
        }
        Ok(())
    }
}

fn nan_error() -> CommandError {
    CommandError::err("resulting score is not a number (NaN)")
}

impl<B: KvBackend> Db<'_, B> {
    /// ZADD: adds or updates members with Redis' NX/XX/GT/LT/CH/INCR rules, pairs applied
    /// in order (a member given twice ends with its last score). Reads each member record
    /// once, then writes both records of every changed member, the old score record deleted,
    /// in one batch. A missing key with XX is not created.
    ///
    /// # Errors
    /// The errors of [`ZAddFlags::validate`]; "ERR value is not a valid float" for a NaN
    /// score; WRONGTYPE; "ERR resulting score is not a number (NaN)" when INCR gives NaN;
    /// storage errors. Nothing is written on error.
    pub(crate) fn zadd(
        &mut self,
        key: &[u8],
        flags: ZAddFlags,
        pairs: &[(f64, impl AsRef<[u8]>)],
    ) -> CommandResult<ZAddOutcome> {
        flags.validate(pairs.len())?;
        if pairs.iter().any(|(s, _)| s.is_nan()) {
            return Err(CommandError::NotFloat);
        }
        let mut edit = ZEdit::open(self, key)?;
        let mut out = ZAddOutcome::default();
        if !edit.existed && flags.xx {
            return Ok(out);
        }
        for (score, member) in pairs {
            let member = member.as_ref();
            match edit.get(self, member)? {
                Some(cur) => {
                    if flags.nx {
                        continue;
                    }
                    let mut new = *score;
                    if flags.incr {
                        new += cur;
                        if new.is_nan() {
                            return Err(nan_error());
                        }
                    }
                    if (flags.lt && new >= cur) || (flags.gt && new <= cur) {
                        continue;
                    }
                    out.score = Some(new);
                    if new != cur {
                        edit.set(member, Some(new));
                        out.updated += 1;
                    }
                }
                None if !flags.xx => {
                    edit.set(member, Some(*score));
                    out.score = Some(*score);
                    out.added += 1;
                }
                None => {}
            }
        }
        edit.finish(self)?;
        if out.added + out.updated > 0 {
            self.notify(NotifyFlags::ZSET, if flags.incr { "zincr" } else { "zadd" }, key);
        }
        Ok(out)
    }

    /// ZINCRBY: adds `increment` to the member's score (a missing member starts at 0) and
    /// returns the new score.
    ///
    /// # Errors
    /// As [`Db::zadd`] with INCR.
    pub(crate) fn zincrby(&mut self, key: &[u8], increment: f64, member: &[u8]) -> CommandResult<f64> {
        let flags = ZAddFlags { incr: true, ..ZAddFlags::default() };
        let out = self.zadd(key, flags, &[(increment, member)])?;
        out.score.ok_or_else(nan_error)
    }

    /// ZREM: removes members (both records each) and returns how many existed; the key
    /// is deleted when it becomes empty.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zrem(&mut self, key: &[u8], members: &[Bytes]) -> CommandResult<i64> {
        let mut edit = ZEdit::open(self, key)?;
        if !edit.existed {
            return Ok(0);
        }
        let mut removed = 0u64;
        for member in members {
            if edit.get(self, member)?.is_some() {
                edit.set(member, None);
                removed += 1;
            }
        }
        let meta = Metadata { size: edit.meta.size.saturating_sub(removed), ..edit.meta.clone() };
        edit.finish(self)?;
        if removed > 0 {
            self.notify_edit(NotifyFlags::ZSET, "zrem", key, &meta);
        }
        Ok(removed as i64)
    }

    /// ZREMRANGEBYRANK / ZREMRANGEBYSCORE / ZREMRANGEBYLEX: removes the members `spec`
    /// selects (one range scan) and returns how many; LIMIT and direction do not apply.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zremrange(&mut self, key: &[u8], spec: &RangeSpec) -> CommandResult<i64> {
        let Some(z) = self.zkey(key)? else { return Ok(0) };
        let items: Vec<ScoredMember> = match spec {
            RangeSpec::Rank { start, stop } => match normalize_range(*start, *stop, z.meta.size as i64) {
                None => Vec::new(),
                Some((a, b)) => self.positions(&z, a, b)?,
            },
            RangeSpec::Score(range) => match score_key_range(range) {
                None => Vec::new(),
                Some(kr) => {
                    self.scan_score_range(&z, &kr, Direction::Forward)?.collect::<CommandResult<_>>()?
                }
            },
            RangeSpec::Lex(range) => match lex_key_range(&z.prefix, range) {
                None => Vec::new(),
                Some(kr) => self
                    .scan_member_range(z.prefix.len(), &kr, Direction::Forward)?
                    .collect::<CommandResult<_>>()?,
            },
        };
        let event = match spec {
            RangeSpec::Rank { .. } => "zremrangebyrank",
            RangeSpec::Score(_) => "zremrangebyscore",
            RangeSpec::Lex(_) => "zremrangebylex",
        };
        self.remove_items(key, z.meta, &items, event)?;
        Ok(items.len() as i64)
    }

    /// Deletes `items` (present, distinct members) from the set and fixes its size; then
    /// records `event` (and `del` if the set is gone).
    fn remove_items(
        &mut self,
        key: &[u8],
        meta: Metadata<'static>,
        items: &[ScoredMember],
        event: &'static str,
    ) -> CommandResult<()> {
        if items.is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        for (member, score) in items {
            self.delete_member_records(&mut batch, key, meta.version, member, *score)?;
        }
        let meta = Metadata { size: meta.size.saturating_sub(items.len() as u64), ..meta };
        self.put_collection(&mut batch, key, &meta);
        self.commit(batch)?;
        self.notify_edit(NotifyFlags::ZSET, event, key, &meta);
        Ok(())
    }

    /// ZPOPMIN / ZPOPMAX: removes and returns up to `count` members from the low (or,
    /// with `max`, high) end of the Score CF.
    ///
    /// # Errors
    /// WRONGTYPE; storage errors.
    pub(crate) fn zpop(&mut self, key: &[u8], max: bool, count: usize) -> CommandResult<Vec<ScoredMember>> {
        let Some(z) = self.zkey(key)? else { return Ok(Vec::new()) };
        if count == 0 {
            return Ok(Vec::new());
        }
        let dir = if max { Direction::Reverse } else { Direction::Forward };
        let items: Vec<ScoredMember> =
            self.scan_all_scores(&z, dir)?.take(count).collect::<CommandResult<_>>()?;
        self.remove_items(key, z.meta, &items, if max { "zpopmax" } else { "zpopmin" })?;
        Ok(items)
    }

    /// ZMPOP (and the non-blocking BZMPOP/BZPOP*): pops from the first key that holds a
    /// sorted set; `None` when none does. Keys are checked in order up to that one.
    ///
    /// # Errors
    /// WRONGTYPE when a key checked before finding one holds another type; storage errors.
    pub(crate) fn zmpop(
        &mut self,
        keys: &[Bytes],
        max: bool,
        count: usize,
    ) -> CommandResult<Option<(Bytes, Vec<ScoredMember>)>> {
        for key in keys {
            if self.waited(self.lookup_of(key, RedisType::ZSet))?.is_some() {
                let items = self.zpop(key, max, count)?;
                return Ok(Some((key.clone(), items)));
            }
        }
        Ok(None)
    }

    /// ZRANGESTORE: stores the range `query` selects from `src` in `dst` (replacing any
    /// value, fresh version); an empty result deletes `dst`. Returns the stored size.
    ///
    /// # Errors
    /// WRONGTYPE for `src`; storage errors.
    pub(crate) fn zrangestore(&mut self, dst: &[u8], src: &[u8], query: &RangeQuery) -> CommandResult<i64> {
        let items = self.zrange(src, query)?;
        self.store_zset_as(dst, &items, "zrangestore")
    }
}
