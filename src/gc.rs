//! Garbage and expiry: the decision a compaction filter calls, the active expiry sweep, and
//! the incremental [`Collector`] for stores without a compaction filter.
//!
//! DEL, overwrite and expiry of a collection only touch its metadata record (lazy deletion).
//! Its subkeys and score keys stay behind, invisible because readers only look under the live
//! version, until [`decide`] calls them garbage:
//!
//! | metadata of the record's key | decision |
//! |---|---|
//! | missing | drop |
//! | a single-KV type (string, JSON): no subkeys | drop |
//! | another version | drop |
//! | expired more than `grace_ms` ago | drop |
//! | size 0, size-tracked, type not emptyable (hash, list, set, zset, bitmap, sortedint) | drop |
//! | undecodable (a record this crate cannot read) | keep |
//! | otherwise | keep |
//!
//! A record whose own key does not decode is kept: a filter never drops what it cannot read.

use bytes::Bytes;

use crate::backend::{ColumnFamily, Direction, KvBackend, WriteBatch};
use crate::codec::{KeyLayout, KeyRange, Version};
use crate::commands::Engine;
use crate::error::Result;

/// Kvrocks' grace period after expiry before subkeys are dropped: 5 minutes.
pub const DEFAULT_GRACE_MS: u64 = 5 * 60 * 1000;

/// What to do with a Subkey, Score or Stream record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The record may belong to a live key: keep it.
    Keep,
    /// The record can never be read again: drop it.
    Drop,
}

/// Decides whether a Subkey, Score or Stream record is garbage.
///
/// `metadata` is called at most once, with the metadata key of the record's owner (TiTea:
/// the collection's GC index record, `kv<ns>g<id>`, which its deletion writes), and answers
/// that Metadata-CF record's value (in a compaction filter: a point read of the Metadata CF,
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
        ColumnFamily::Subkey | ColumnFamily::Stream => match layout.decode_subkey(record_key) {
            Ok(sk) => (sk.owner(), sk.version),
            Err(_) => return Decision::Keep,
        },
        ColumnFamily::Score => match layout.decode_score_key(record_key) {
            Ok(sk) => (sk.owner, sk.version),
            Err(_) => return Decision::Keep,
        },
    };
    let Some(key) = lookup_key(layout, &owner, version) else {
        return Decision::Keep;
    };
    let found = metadata(&key);
    judge(layout, found.as_ref().map(AsRef::as_ref), version, now_ms, grace_ms)
}

/// The Metadata-CF record that decides a record of `owner` at `version`: the owner's
/// metadata, or for TiTea (whose element records name no key) the collection's GC record;
/// `None` for a version not of the layout's variant.
fn lookup_key(layout: &KeyLayout, owner: &crate::codec::KeyOwner<'_>, version: Version) -> Option<Vec<u8>> {
    if layout.kind() == crate::codec::LayoutKind::TiTea {
        layout.gc_record_key(owner.namespace, version).ok()
    } else {
        Some(layout.owner_metadata_key(owner))
    }
}

/// The decision for a record at `version` given what [`lookup_key`] found: TiTea's
/// collection is garbage once its GC record exists; elsewhere a missing owner is, and
/// otherwise [`decide_with_metadata`] judges.
fn judge(layout: &KeyLayout, found: Option<&[u8]>, version: Version, now_ms: u64, grace_ms: u64) -> Decision {
    match (layout.kind() == crate::codec::LayoutKind::TiTea, found) {
        (true, Some(_)) | (false, None) => Decision::Drop,
        (true, None) => Decision::Keep,
        (false, Some(raw)) => decide_with_metadata(layout, raw, version, now_ms, grace_ms),
    }
}

/// The decision for a record of `record_version` whose key's metadata value is `raw`.
pub fn decide_with_metadata(
    layout: &KeyLayout,
    raw: &[u8],
    record_version: Version,
    now_ms: u64,
    grace_ms: u64,
) -> Decision {
    let Ok(meta) = layout.decode_metadata(raw) else {
        return Decision::Keep;
    };
    let expired_past_grace = meta.expire_ms != 0 && meta.expire_ms.saturating_add(grace_ms) < now_ms;
    let empty = meta.size == 0 && !meta.blind_write && !meta.ty.is_emptyable();
    if meta.ty.is_single_kv() || meta.version != record_version || expired_past_grace || empty {
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
    /// The database and user key of each of [`SweepStep::removed`], in the same order, from
    /// [`expire_step`]; empty from [`ExpirySweep::step`], which knows no databases (decode
    /// with [`Engine::key_of`]).
    pub expired: Vec<(usize, Bytes)>,
    /// Whether the sweep reached the end of its range.
    pub done: bool,
    /// The earliest expiry (unix ms) among the records read that had not expired yet: when
    /// a sweep that found nothing should look again.
    pub next_expiry_ms: Option<u64>,
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
    /// Whose metadata values the range holds (Kvrocks' unless [`ExpirySweep::of`]).
    layout: KeyLayout,
    done: bool,
}

impl ExpirySweep {
    /// A sweep over `range`, any range of metadata keys in Kvrocks' value format.
    pub fn new(range: KeyRange) -> Self {
        ExpirySweep { range, layout: KeyLayout::default(), done: false }
    }

    /// A sweep over one database: `layout`'s [`KeyLayout::namespace_range`], its values read
    /// as that layout writes them.
    pub fn of(layout: &KeyLayout) -> Self {
        ExpirySweep { range: layout.namespace_range(), layout: layout.clone(), done: false }
    }

    /// Whether the sweep has covered its whole range.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Runs one bounded step: finds expired metadata records, then deletes what it found in one batch.
    /// Only for a backend no command writes meanwhile; beside running commands use
    /// [`expire_step`], which re-checks each key under its lock.
    ///
    /// # Errors
    /// Backend errors; the step then deleted nothing and can be retried.
    pub fn step<B: KvBackend>(&mut self, backend: &B, now_ms: u64, batch_size: usize) -> Result<SweepStep> {
        let step = self.find(backend, now_ms, batch_size)?;
        let mut batch = WriteBatch::new();
        for key in &step.removed {
            batch.delete(ColumnFamily::Metadata, key.clone());
        }
        if !batch.is_empty() {
            backend.write(batch)?;
        }
        Ok(step)
    }

    /// Reads at most `batch_size` metadata records after where the last call stopped and
    /// lists (in [`SweepStep::removed`]) the keys of those expired at `now_ms`, deleting
    /// nothing.
    ///
    /// # Errors
    /// Backend errors; the position then did not move.
    pub(crate) fn find<B: KvBackend>(
        &mut self,
        backend: &B,
        now_ms: u64,
        batch_size: usize,
    ) -> Result<SweepStep> {
        let mut step = SweepStep { done: self.done, ..SweepStep::default() };
        if self.done || batch_size == 0 {
            return Ok(step);
        }
        let mut last = None;
        for item in backend.scan(ColumnFamily::Metadata, &self.range, Direction::Forward)?.take(batch_size) {
            let (key, value) = item?;
            step.scanned += 1;
            match expiry(&self.layout, &value) {
                Some(at) if at < now_ms => step.removed.push(key.clone()),
                Some(at) => step.next_expiry_ms = Some(step.next_expiry_ms.map_or(at, |next| next.min(at))),
                None => {}
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
        Ok(step)
    }
}

/// The expiry (unix ms) a metadata value carries (none, or undecodable: `None`).
fn expiry(layout: &KeyLayout, value: &[u8]) -> Option<u64> {
    layout.peek_type_and_expire(value).ok().map(|(_, expire_ms)| expire_ms).filter(|&at| at != 0)
}

/// One step of active expiry beside running commands (Redis' active expire cycle): the
/// sweep finds expired metadata records, then the [`Engine`] deletes each under its key's
/// lock after a fresh read, all in one batch — a key a client recreated since the
/// sweep read it is not touched. Returns the sweep's step with [`SweepStep::removed`] holding
/// the metadata keys actually deleted and [`SweepStep::expired`] their databases and user
/// keys, for `expired` notifications ([`crate::server::Event`]).
///
/// # Errors
/// Backend errors; nothing was deleted then.
pub fn expire_step<B: KvBackend>(
    engine: &Engine<B>,
    sweep: &mut ExpirySweep,
    now_ms: u64,
    batch_size: usize,
) -> Result<SweepStep> {
    let mut step = sweep.find(engine.backend(), now_ms, batch_size)?;
    step.removed = engine.delete_expired(&step.removed, now_ms)?;
    step.expired = step.removed.iter().filter_map(|k| engine.key_of(k)).collect();
    Ok(step)
}

/// What [`compact`] dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Subkey, Score and Stream records examined.
    pub examined: usize,
    /// Subkey and Stream records dropped.
    pub dropped_subkeys: usize,
    /// Score records dropped.
    pub dropped_scores: usize,
}

/// A full compaction pass: one [`Collector`] pass over every Subkey, Score and Stream record, as a
/// RocksDB compaction filter would do over time.
///
/// # Errors
/// Backend errors; what was deleted before the failure was garbage and stays deleted.
pub fn compact<B: KvBackend>(
    backend: &B,
    layout: &KeyLayout,
    now_ms: u64,
    grace_ms: u64,
) -> Result<CompactionReport> {
    let mut collector = Collector::new(layout, grace_ms);
    let mut report = CompactionReport::default();
    loop {
        let step = collector.step(backend, now_ms, 4096)?;
        report.examined += step.examined;
        report.dropped_subkeys += step.dropped_subkeys;
        report.dropped_scores += step.dropped_scores;
        if step.pass_done {
            return Ok(report);
        }
    }
}

/// What one [`Collector::step`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CollectStep {
    /// Subkey, Score and Stream records examined.
    pub examined: usize,
    /// Subkey and Stream records deleted.
    pub dropped_subkeys: usize,
    /// Score records deleted.
    pub dropped_scores: usize,
    /// Metadata records read (one per run of records with the same owner and version).
    pub metadata_reads: usize,
    /// Whether the step finished a pass over every column family (the next step starts
    /// the next pass from the beginning).
    pub pass_done: bool,
}

/// Totals of a [`Collector`] since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CollectorStats {
    /// Records examined.
    pub(crate) examined: u64,
    /// Records deleted.
    pub dropped: u64,
    /// Complete passes over the three column families.
    pub passes: u64,
}

/// An incremental garbage collector for stores without a compaction filter (the memory
/// backend, TiKV, etcd, FoundationDB): each [`Collector::step`] examines at most N Subkey,
/// Score and Stream records after where the last step stopped, applies [`decide`] to them, and deletes
/// the garbage in one batch.
///
/// # Why it never deletes a live record
/// A record `(key, version, …)` is live only while the key's metadata names that version.
/// Versions are never reused: once the metadata has moved away from a version (deleted,
/// overwritten, expired past the grace period, or emptied), no command can make it live
/// again — any write to the key creates a fresh version, whose records have other bytes.
/// The collector reads a record, *then* reads its owner's metadata; a `Drop` decision thus
/// proves the version dead at a moment after the record was read, and deleting a dead
/// version's records is safe at any later time, whatever commands run concurrently. The
/// metadata is read once per run of records with the same owner **and version**: a
/// decision is never carried over to another version, because a version created after the
/// metadata read would otherwise be judged by a stale answer.
#[derive(Debug, Clone)]
pub struct Collector {
    layout: KeyLayout,
    grace_ms: u64,
    cf: ColumnFamily,
    /// The first key of `cf` not yet examined in this pass.
    next: Vec<u8>,
    stats: CollectorStats,
}

impl Collector {
    /// A collector over every record under `layout`'s fixed prefix (all namespaces), with
    /// the grace period after expiry of [`decide`].
    pub fn new(layout: &KeyLayout, grace_ms: u64) -> Self {
        Collector {
            layout: layout.clone(),
            grace_ms,
            cf: ColumnFamily::Subkey,
            next: layout.fixed_prefix().to_vec(),
            stats: CollectorStats::default(),
        }
    }

    /// Where the next step starts: the column family and the first key it will examine.
    pub fn position(&self) -> (ColumnFamily, &[u8]) {
        (self.cf, &self.next)
    }

    /// Totals since the collector was made.
    pub fn stats(&self) -> CollectorStats {
        self.stats
    }

    /// Examines at most `max_records` records (at least one) and deletes the garbage among
    /// them in one batch.
    ///
    /// # Errors
    /// Backend errors; the step then deleted nothing and the position did not move.
    pub fn step<B: KvBackend>(
        &mut self,
        backend: &B,
        now_ms: u64,
        max_records: usize,
    ) -> Result<CollectStep> {
        let mut step = CollectStep::default();
        let mut batch = WriteBatch::new();
        let (mut cf, mut next) = (self.cf, self.next.clone());
        let end = crate::codec::prefix_successor(self.layout.fixed_prefix());
        let budget = max_records.max(1);
        while step.examined < budget && !step.pass_done {
            let range = KeyRange { start: next.clone(), end: end.clone() };
            let mut run: Option<(Vec<u8>, Version, Decision)> = None;
            let mut reached_end = true;
            for item in backend.scan(cf, &range, Direction::Forward)? {
                if step.examined == budget {
                    reached_end = false;
                    break;
                }
                let (key, _) = item?;
                step.examined += 1;
                next.clear();
                next.extend_from_slice(&key);
                next.push(0);
                let Some((owner, version)) = self.owner_of(cf, &key) else { continue };
                let decision = match &run {
                    Some((o, v, d)) if *o == owner && *v == version => *d,
                    _ => {
                        step.metadata_reads += 1;
                        let found = backend.get(ColumnFamily::Metadata, &owner)?;
                        let d = judge(&self.layout, found.as_deref(), version, now_ms, self.grace_ms);
                        run = Some((owner, version, d));
                        d
                    }
                };
                if decision == Decision::Drop {
                    match cf {
                        ColumnFamily::Score => step.dropped_scores += 1,
                        _ => step.dropped_subkeys += 1,
                    }
                    batch.delete(cf, key);
                }
            }
            if reached_end {
                cf = match cf {
                    ColumnFamily::Subkey => ColumnFamily::Score,
                    ColumnFamily::Score => ColumnFamily::Stream,
                    _ => {
                        step.pass_done = true;
                        ColumnFamily::Subkey
                    }
                };
                next = self.layout.fixed_prefix().to_vec();
            }
        }
        if !batch.is_empty() {
            backend.write(batch)?;
        }
        (self.cf, self.next) = (cf, next);
        self.stats.examined += step.examined as u64;
        self.stats.dropped += (step.dropped_subkeys + step.dropped_scores) as u64;
        self.stats.passes += u64::from(step.pass_done);
        Ok(step)
    }

    /// The record [`lookup_key`] names and the record's version; `None` for a key that does
    /// not decode (kept, as [`decide`] keeps it).
    fn owner_of(&self, cf: ColumnFamily, key: &[u8]) -> Option<(Vec<u8>, Version)> {
        let (owner, version) = match cf {
            ColumnFamily::Score => self.layout.decode_score_key(key).ok().map(|sk| (sk.owner, sk.version))?,
            _ => self.layout.decode_subkey(key).ok().map(|sk| (sk.owner(), sk.version))?,
        };
        Some((lookup_key(&self.layout, &owner, version)?, version))
    }
}
