//! Garbage and expiry: the decision a compaction filter calls, the active expiry sweep, and a
//! compaction pass over any [`KvBackend`].
//!
//! DEL, overwrite and expiry of a collection only touch its metadata record (lazy deletion).
//! Its subkeys and score keys stay behind, invisible because readers only look under the live
//! version, until [`decide`] calls them garbage:
//!
//! | metadata of the record's key | decision |
//! |---|---|
//! | missing | drop |
//! | a string | drop |
//! | another version | drop |
//! | expired more than `grace_ms` ago | drop |
//! | an empty, size-tracked collection | drop |
//! | undecodable (a record this crate cannot read) | keep |
//! | otherwise | keep |
//!
//! A record whose own key does not decode is kept: a filter never drops what it cannot read.

use bytes::Bytes;

use crate::backend::{ColumnFamily, Direction, KvBackend, WriteBatch};
use crate::codec::{KeyLayout, KeyRange, Metadata, RedisType, peek_type_and_expire};
use crate::error::Result;

/// Kvrocks' grace period after expiry before subkeys are dropped: 5 minutes.
pub const DEFAULT_GRACE_MS: u64 = 5 * 60 * 1000;

/// What to do with a Subkey or Score record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The record may belong to a live key: keep it.
    Keep,
    /// The record can never be read again: drop it.
    Drop,
}

/// Decides whether a Subkey or Score record is garbage.
///
/// `metadata` is called at most once, with the metadata key of the record's owner, and
/// answers its raw metadata value (in a compaction filter: a point read of the Metadata CF,
/// or a cache). Pure: no I/O but through `metadata`, no clock but `now_ms`. A Metadata-CF
/// record is always kept: expiring those is the sweep's job.
pub fn decide<M, V>(
    layout: &KeyLayout,
    cf: ColumnFamily,
    record_key: &[u8],
    mut metadata: M,
    now_ms: u64,
    grace_ms: u64,
) -> Decision
where
    M: FnMut(&[u8]) -> Option<V>,
    V: AsRef<[u8]>,
{
    let (owner, version) = match cf {
        ColumnFamily::Metadata => return Decision::Keep,
        ColumnFamily::Subkey => match layout.decode_subkey(record_key) {
            Ok(sk) => (sk.owner(), sk.version),
            Err(_) => return Decision::Keep,
        },
        ColumnFamily::Score => match layout.decode_score_key(record_key) {
            Ok(sk) => (sk.owner, sk.version),
            Err(_) => return Decision::Keep,
        },
    };
    let Some(raw) = metadata(&layout.owner_metadata_key(&owner)) else {
        return Decision::Drop;
    };
    decide_with_metadata(raw.as_ref(), version, now_ms, grace_ms)
}

/// The decision for a record of `record_version` whose key's metadata value is `raw`.
pub fn decide_with_metadata(raw: &[u8], record_version: u64, now_ms: u64, grace_ms: u64) -> Decision {
    let Ok(meta) = Metadata::decode(raw) else {
        return Decision::Keep;
    };
    let expired_past_grace = meta.expire_ms != 0 && meta.expire_ms.saturating_add(grace_ms) < now_ms;
    let empty = meta.size == 0 && !meta.blind_write;
    if meta.ty == RedisType::String || meta.version != record_version || expired_past_grace || empty {
        Decision::Drop
    } else {
        Decision::Keep
    }
}

/// What one [`ExpirySweep::step`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepStep {
    /// Metadata records read.
    pub scanned: usize,
    /// Metadata keys of the expired records deleted.
    pub removed: Vec<Bytes>,
    /// Whether the sweep reached the end of its range.
    pub done: bool,
}

/// An active expiry sweep over a range of the Metadata CF, in bounded steps.
///
/// Each step reads at most `batch_size` metadata records after where the last one stopped and
/// deletes the expired ones in one batch; their subkeys then follow by lazy deletion. The
/// backend is borrowed mutably for the step, so no command runs between its read and its
/// delete; a shared backend must re-check expiry inside its own transaction.
#[derive(Debug, Clone)]
pub struct ExpirySweep {
    range: KeyRange,
    done: bool,
}

impl ExpirySweep {
    /// A sweep over `range`: [`KeyLayout::namespace_range`] for one database, or any range
    /// of metadata keys.
    pub fn new(range: KeyRange) -> Self {
        ExpirySweep { range, done: false }
    }

    /// Whether the sweep has covered its whole range.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Runs one bounded step.
    ///
    /// # Errors
    /// Backend errors; the step then deleted nothing and can be retried.
    pub fn step<B: KvBackend>(&mut self, backend: &B, now_ms: u64, batch_size: usize) -> Result<SweepStep> {
        let mut step = SweepStep { done: self.done, ..SweepStep::default() };
        if self.done || batch_size == 0 {
            return Ok(step);
        }
        let mut last = None;
        for item in backend.scan(ColumnFamily::Metadata, &self.range, Direction::Forward)?.take(batch_size) {
            let (key, value) = item?;
            step.scanned += 1;
            if let Ok((_, expire_ms)) = peek_type_and_expire(&value) {
                if expire_ms != 0 && expire_ms < now_ms {
                    step.removed.push(key.clone());
                }
            }
            last = Some(key);
        }
        match last {
            Some(key) if step.scanned == batch_size => {
                // Resume just after the last key read.
                self.range.start = key.to_vec();
                self.range.start.push(0);
            }
            _ => self.done = true,
        }
        step.done = self.done;
        let mut batch = WriteBatch::new();
        for key in &step.removed {
            batch.delete(ColumnFamily::Metadata, key.clone());
        }
        if !batch.is_empty() {
            backend.write(batch)?;
        }
        Ok(step)
    }
}

/// What [`compact`] dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Subkey and Score records examined.
    pub examined: usize,
    /// Subkey records dropped.
    pub dropped_subkeys: usize,
    /// Score records dropped.
    pub dropped_scores: usize,
}

/// A full compaction pass: applies [`decide`] to every Subkey and Score record and deletes
/// the garbage in one batch, as a RocksDB compaction filter would over time. Records of one
/// key are adjacent, so the last metadata lookup is cached.
///
/// # Errors
/// Backend errors; nothing is deleted then.
pub fn compact<B: KvBackend>(
    backend: &B,
    layout: &KeyLayout,
    now_ms: u64,
    grace_ms: u64,
) -> Result<CompactionReport> {
    let mut report = CompactionReport::default();
    let mut batch = WriteBatch::new();
    let everything = KeyRange::prefix(layout.fixed_prefix().to_vec());
    for cf in [ColumnFamily::Subkey, ColumnFamily::Score] {
        let mut cache: Option<(Vec<u8>, Option<Bytes>)> = None;
        let mut failure = None;
        for item in backend.scan(cf, &everything, Direction::Forward)? {
            let (key, _) = item?;
            report.examined += 1;
            let lookup = |meta_key: &[u8]| -> Option<Bytes> {
                if let Some((cached_key, value)) = &cache {
                    if cached_key.as_slice() == meta_key {
                        return value.clone();
                    }
                }
                let value = match backend.get(ColumnFamily::Metadata, meta_key) {
                    Ok(v) => v,
                    Err(e) => {
                        failure = Some(e);
                        // Keep the record: an unreadable answer must not drop data.
                        return Some(Bytes::new());
                    }
                };
                cache = Some((meta_key.to_vec(), value.clone()));
                value
            };
            if decide(layout, cf, &key, lookup, now_ms, grace_ms) == Decision::Drop {
                match cf {
                    ColumnFamily::Score => report.dropped_scores += 1,
                    _ => report.dropped_subkeys += 1,
                }
                batch.delete(cf, key);
            }
            if let Some(e) = failure.take() {
                return Err(e);
            }
        }
    }
    backend.write(batch)?;
    Ok(report)
}
