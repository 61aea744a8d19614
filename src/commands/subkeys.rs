//! Machinery shared by the collections stored as one Subkey-CF record per element (hashes
//! and sets): exact or scanned length, batched point reads, SCAN-family pages, random
//! samples, and removal of elements.

use std::collections::HashSet;

use bytes::Bytes;

use super::args::{Distinct, Glob, int_arg};
use super::{CommandError, CommandResult, Db, Reply};
use crate::backend::{ColumnFamily, Direction, KvBackend, WriteBatch};
use crate::codec::{KeyRange, Metadata, Version};

/// What a point read of one subkey found.
type Found = Option<Bytes>;

/// Collections at most this large are sampled by walking to random positions; larger ones
/// (with a small count) by seeking to random keys.
const SMALL_COLLECTION: u64 = 512;

/// The largest negative count SRANDMEMBER/HRANDFIELD accept (2^26 picks). Redis 7.0 tries to
/// build any size of reply and runs out of memory past a few hundred million; here a larger
/// count is refused with "ERR value is out of range" rather than aborting the process.
pub(crate) const MAX_REPEAT_PICKS: u64 = 1 << 26;

/// The options of HSCAN/SSCAN after the cursor.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScanOptions {
    /// MATCH pattern.
    pub(crate) pattern: Option<Bytes>,
    /// COUNT: how many subkeys to walk (default 10).
    pub(crate) count: usize,
}

/// Parses `[MATCH pattern] [COUNT n]` (any order, repeatable).
///
/// # Errors
/// "ERR syntax error" for an unknown option or COUNT < 1; "ERR value is not an integer or
/// out of range" for a non-integer COUNT.
pub(crate) fn parse_scan_options(args: &[Bytes]) -> CommandResult<ScanOptions> {
    let mut opts = ScanOptions { pattern: None, count: 10 };
    let mut i = 0;
    while i < args.len() {
        let more = i + 1 < args.len();
        if args[i].eq_ignore_ascii_case(b"count") && more {
            let n = int_arg(&args[i + 1])?;
            if n < 1 {
                return Err(CommandError::Syntax);
            }
            opts.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if args[i].eq_ignore_ascii_case(b"match") && more {
            let pattern = args[i + 1].clone();
            opts.pattern = if pattern.as_ref() == b"*" { None } else { Some(pattern) };
        } else {
            return Err(CommandError::Syntax);
        }
        i += 2;
    }
    Ok(opts)
}

/// A random pick of subkeys: `count` distinct ones, or `count` with repetition.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pick {
    /// At most `n` distinct subkeys (all of them when `n >= size`).
    Distinct(u64),
    /// Exactly `n` subkeys, repeats allowed (none when the collection is empty).
    Repeat(u64),
}

impl<B: KvBackend> Db<'_, B> {
    /// The number of fields/members of a hash or set: `meta.size`, or for a blind-write
    /// collection a count by scanning all its subkeys (O(n)).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn collection_len(&self, key: &[u8], meta: &Metadata<'_>) -> CommandResult<u64> {
        if !meta.blind_write {
            return Ok(meta.size);
        }
        let mut n = 0;
        for item in self.scan_subkeys(key, meta.version, Direction::Forward)? {
            item?;
            n += 1;
        }
        Ok(n)
    }

    /// Every subkey of a collection, in key order: one range scan.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn all_subkeys(&self, key: &[u8], version: Version) -> CommandResult<Vec<(Bytes, Bytes)>> {
        self.scan_subkeys(key, version, Direction::Forward)?.collect()
    }

    /// Point reads of several subkeys of one collection (one backend `multi_get`).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn get_subkeys<'s>(
        &self,
        key: &[u8],
        version: Version,
        subs: impl IntoIterator<Item = &'s [u8]>,
    ) -> CommandResult<Vec<Found>> {
        let keys =
            subs.into_iter().map(|s| self.subkey(key, version, s)).collect::<CommandResult<Vec<_>>>()?;
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        Ok(self.backend().multi_get(ColumnFamily::Subkey, &refs)?)
    }

    /// Builds the subkeys of `subs` and tells which have a record, in the same order, for a
    /// command that writes or deletes some of them next.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn read_subkeys<'s>(
        &self,
        key: &[u8],
        version: Version,
        subs: impl IntoIterator<Item = &'s [u8]>,
    ) -> CommandResult<(Vec<Vec<u8>>, Vec<bool>)> {
        let keys =
            subs.into_iter().map(|s| self.subkey(key, version, s)).collect::<CommandResult<Vec<_>>>()?;
        let present = self.subkeys_present(keys.iter().map(Vec::as_slice))?;
        Ok((keys, present))
    }

    /// Which of the subkeys `keys` have a record, in order. Their values are lent, not
    /// copied: one read for a single subkey (SADD, SREM or HSET of one element, the common
    /// case), one backend `multi_get` for more.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn subkeys_present<'k>(
        &self,
        mut keys: impl ExactSizeIterator<Item = &'k [u8]>,
    ) -> CommandResult<Vec<bool>> {
        if keys.len() == 1
            && let Some(key) = keys.next()
        {
            let mut present = false;
            self.backend().get_with(ColumnFamily::Subkey, key, &mut |value| present = value.is_some())?;
            return Ok(vec![present]);
        }
        let refs: Vec<&[u8]> = keys.collect();
        Ok(self.backend().multi_get(ColumnFamily::Subkey, &refs)?.iter().map(Option::is_some).collect())
    }

    /// One page of HSCAN/SSCAN: walks up to `opts.count` subkeys after the position the
    /// cursor stands for, keeps those matching the pattern, and returns the next cursor
    /// (0 when the walk reached the end) with them. Reads O(count) subkeys.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn scan_page(
        &mut self,
        key: &[u8],
        version: Version,
        cursor: u64,
        opts: &ScanOptions,
    ) -> CommandResult<(u64, Vec<(Bytes, Bytes)>)> {
        let prefix = self.layout().subkey_prefix(key, version, 0)?;
        self.scan_page_in(prefix, cursor, opts)
    }

    /// [`Db::scan_page`] over the records under `prefix` (a sorted set's member records).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn scan_page_in(
        &mut self,
        prefix: Vec<u8>,
        cursor: u64,
        opts: &ScanOptions,
    ) -> CommandResult<(u64, Vec<(Bytes, Bytes)>)> {
        let mut range = KeyRange::prefix(prefix);
        let prefix_len = range.start.len();
        if let Some(last) = self.cursors().resolve(cursor) {
            range.start.extend_from_slice(&last);
            range.start.push(0);
        }
        let mut out = Vec::new();
        let mut last: Option<Bytes> = None;
        let mut more = false;
        let glob = opts.pattern.as_deref().map(Glob::new);
        for (walked, item) in
            self.backend().scan(ColumnFamily::Subkey, &range, Direction::Forward)?.enumerate()
        {
            let (k, v) = item?;
            if walked == opts.count {
                more = true;
                break;
            }
            let sub = k.slice(prefix_len..);
            if glob.as_ref().is_none_or(|g| g.matches(&sub)) {
                out.push((sub.clone(), v));
            }
            last = Some(sub);
        }
        let next = match (more, last) {
            (true, Some(last)) => self.cursors().save(last.to_vec()),
            _ => 0,
        };
        Ok((next, out))
    }

    /// Random subkeys of a hash or set, as `(sub, value)`.
    ///
    /// Cost: the size comes from the metadata (a blind-write collection is counted by a
    /// full scan). `Distinct(n)` with `n >= size` is one full scan. Otherwise, for a
    /// collection of at most [`SMALL_COLLECTION`] subkeys or a count of at least a quarter of
    /// the size, random positions are chosen (uniformly) and one scan walks only up to the
    /// largest position: O(max position) reads, never the whole collection when the largest
    /// position is early. For a larger collection and a small count, each pick is one seek
    /// (a scan of one record) to a random key between the first and the last subkey: O(count)
    /// reads whatever the size, but only approximately uniform (a subkey after a wide gap in
    /// key space is picked more often). Distinct sampling by seeks gives up after
    /// `8 * count + 64` seeks and falls back to positions.
    ///
    /// # Errors
    /// "ERR value is out of range" for `Repeat(n)` past [`MAX_REPEAT_PICKS`] on a non-empty
    /// collection; storage errors.
    pub(crate) fn sample_subkeys(
        &mut self,
        key: &[u8],
        meta: &Metadata<'_>,
        pick: Pick,
    ) -> CommandResult<Vec<(Bytes, Bytes)>> {
        let size = self.collection_len(key, meta)?;
        let count = match pick {
            Pick::Distinct(n) | Pick::Repeat(n) => n,
        };
        if size == 0 || count == 0 {
            return Ok(Vec::new());
        }
        if let Pick::Repeat(n) = pick
            && n > MAX_REPEAT_PICKS
        {
            return Err(CommandError::err("value is out of range"));
        }
        if let Pick::Distinct(n) = pick
            && n >= size
        {
            return self.all_subkeys(key, meta.version);
        }
        let distinct = matches!(pick, Pick::Distinct(_));
        if size > SMALL_COLLECTION
            && count.saturating_mul(4) < size
            && let Some(found) = self.sample_by_seeks(key, meta.version, count, distinct)?
        {
            return Ok(found);
        }
        let positions: Vec<u64> = if distinct {
            // Floyd's algorithm: `count` distinct positions in [0, size).
            let mut chosen = HashSet::new();
            let mut order = Vec::new();
            for j in size - count..size {
                let t = self.random_u64() % (j + 1);
                let p = if chosen.insert(t) { t } else { j };
                if p == j {
                    chosen.insert(j);
                }
                order.push(p);
            }
            order
        } else {
            (0..count).map(|_| self.random_u64() % size).collect()
        };
        let mut wanted: Vec<(u64, usize)> = positions.iter().enumerate().map(|(i, &p)| (p, i)).collect();
        wanted.sort_unstable();
        let mut out: Vec<Option<(Bytes, Bytes)>> = vec![None; positions.len()];
        let mut next = 0;
        for (pos, item) in self.scan_subkeys(key, meta.version, Direction::Forward)?.enumerate() {
            if next == wanted.len() {
                break;
            }
            let item = item?;
            while next < wanted.len() && wanted[next].0 == pos as u64 {
                out[wanted[next].1] = Some(item.clone());
                next += 1;
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Picks by seeking to random keys; `None` when distinct picks could not be completed.
    fn sample_by_seeks(
        &mut self,
        key: &[u8],
        version: Version,
        count: u64,
        distinct: bool,
    ) -> CommandResult<Option<Vec<(Bytes, Bytes)>>> {
        let range = self.layout().subkey_range(key, version)?;
        let prefix_len = range.start.len();
        let first = self.scan_subkeys(key, version, Direction::Forward)?.next().transpose()?;
        let last = self.scan_subkeys(key, version, Direction::Reverse)?.next().transpose()?;
        let (Some(first), Some(last)) = (first, last) else { return Ok(Some(Vec::new())) };
        let as_u128 = |b: &[u8]| {
            let mut buf = [0u8; 16];
            let n = b.len().min(16);
            buf[..n].copy_from_slice(&b[..n]);
            u128::from_be_bytes(buf)
        };
        let (lo, hi) = (as_u128(&first.0), as_u128(&last.0));
        let span = hi - lo;
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut attempts = 0u64;
        while (out.len() as u64) < count {
            if distinct && attempts > 8 * count + 64 {
                return Ok(None);
            }
            attempts += 1;
            let r = (u128::from(self.random_u64()) << 64) | u128::from(self.random_u64());
            let x = lo + if span == u128::MAX { r } else { r % (span + 1) };
            let bytes = x.to_be_bytes();
            let keep = bytes.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
            let mut start = range.start.clone();
            start.extend_from_slice(&bytes[..keep]);
            let seek = KeyRange { start, end: range.end.clone() };
            let found =
                self.backend().scan(ColumnFamily::Subkey, &seek, Direction::Forward)?.next().transpose()?;
            let item = match found {
                Some((k, v)) => (k.slice(prefix_len..), v),
                None => first.clone(),
            };
            if !distinct || seen.insert(item.0.clone()) {
                out.push(item);
            }
        }
        Ok(Some(out))
    }

    /// Deletes subkeys of a hash or set and updates the metadata; returns how many existed
    /// (blind-write: how many were given).
    pub(crate) fn remove_subkeys(
        &mut self,
        key: &[u8],
        meta: &mut Metadata<'static>,
        subs: &[Bytes],
    ) -> CommandResult<i64> {
        let mut batch = WriteBatch::new();
        let removed = if meta.blind_write {
            for s in subs {
                batch.delete(ColumnFamily::Subkey, self.subkey(key, meta.version, s)?);
            }
            subs.len() as i64
        } else {
            let unique = Distinct::of(subs.iter().map(Bytes::as_ref));
            let (subkeys, present) = self.read_subkeys(key, meta.version, unique.items())?;
            let mut removed = 0;
            for (subkey, present) in subkeys.into_iter().zip(present) {
                if present {
                    removed += 1;
                    batch.delete(ColumnFamily::Subkey, subkey);
                }
            }
            if removed > 0 {
                meta.size = meta.size.saturating_sub(removed);
                self.put_collection(&mut batch, key, meta);
            }
            removed as i64
        };
        self.commit(batch)?;
        Ok(removed)
    }
}

/// `[cursor, items]`, the SCAN family's reply.
pub(crate) fn scan_reply(cursor: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(vec![Reply::Bulk(Bytes::from(cursor.to_string())), Reply::Array(items)])
}
