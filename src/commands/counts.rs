//! Each database's key count and expiry count, kept by the commits so that DBSIZE and INFO
//! keyspace answer in O(1) instead of scanning every metadata record.
//!
//! A count covers the metadata records that are keys, expired or not: a key counts until its
//! record is deleted (when a command finds it expired, or the expiry sweep does), as Redis
//! counts a key until it notices it expired. Counts are kept per namespace (the `:n` of
//! database `n` as first written), so SWAPDB, which exchanges namespaces, exchanges counts.
//! Each namespace is counted by one scan the first time it is asked for, then adjusted by
//! every write: a record that is a key where none was adds one, a key's record deleted (or
//! made an empty collection) takes one away, and expiries set or removed move the expiry
//! count likewise.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use crate::backend::{Direction, KvBackend};
use crate::codec::{ColumnFamily, KeyLayout, Metadata};

/// One database's counts ([`super::Engine::key_count`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyCount {
    /// Keys, including those expired whose record nobody has deleted yet.
    pub keys: u64,
    /// Of those, the keys with a TTL.
    pub expires: u64,
    /// The sum of their expiry times (unix ms), modulo 2^64.
    expire_sum: u64,
}

impl KeyCount {
    /// The mean remaining TTL in ms at `now_ms` of the keys with a TTL (0 without any; an
    /// expired key not yet deleted counts as a negative remainder, and a negative mean as 0).
    pub fn avg_ttl(&self, now_ms: u64) -> u64 {
        if self.expires == 0 {
            return 0;
        }
        // Wrapping arithmetic: the sum of remainders fits in i64 even when the sum of times
        // does not fit in u64.
        let remaining = self.expire_sum.wrapping_sub(self.expires.wrapping_mul(now_ms)) as i64;
        (remaining.max(0) as u64) / self.expires
    }
}

/// What one metadata record adds to its database's counts: `None` when it is not a key
/// (absent, undecodable, an empty collection), else `Some(expire_ms)`, 0 without a TTL.
pub(crate) fn counted(layout: &KeyLayout, raw: Option<&[u8]>) -> Option<u64> {
    counted_meta(&layout.decode_metadata(raw?).ok()?)
}

/// [`counted`] of a decoded record.
pub(crate) fn counted_meta(meta: &Metadata<'_>) -> Option<u64> {
    (meta.ty.is_emptyable() || meta.blind_write || meta.size > 0).then_some(meta.expire_ms)
}

/// The change a batch makes to one namespace's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Delta {
    keys: i64,
    expires: i64,
    expire_sum: u64,
}

impl Delta {
    /// Adds the change of one record from `old` to `new` (both as [`counted`] says).
    pub(crate) fn change(&mut self, old: Option<u64>, new: Option<u64>) {
        let ttl = |c: Option<u64>| i64::from(c.is_some_and(|e| e != 0));
        self.keys += i64::from(new.is_some()) - i64::from(old.is_some());
        self.expires += ttl(new) - ttl(old);
        self.expire_sum = self.expire_sum.wrapping_add(new.unwrap_or(0)).wrapping_sub(old.unwrap_or(0));
    }

    /// Adds `other`.
    pub(crate) fn add(&mut self, other: Delta) {
        self.keys += other.keys;
        self.expires += other.expires;
        self.expire_sum = self.expire_sum.wrapping_add(other.expire_sum);
    }

    /// `count` after this change (never below 0).
    pub(crate) fn applied_to(self, count: KeyCount) -> KeyCount {
        KeyCount {
            keys: (count.keys as i64).saturating_add(self.keys).max(0) as u64,
            expires: (count.expires as i64).saturating_add(self.expires).max(0) as u64,
            expire_sum: count.expire_sum.wrapping_add(self.expire_sum),
        }
    }
}

/// Adds `delta` for namespace `slot` to `deltas`.
#[inline]
pub(crate) fn add_delta(deltas: &mut Vec<(usize, Delta)>, slot: usize, delta: Delta) {
    // An overwrite that keeps the key and its TTL (most writes) changes nothing: no entry,
    // so its batch allocates no list and touches no counter.
    if delta == Delta::default() {
        return;
    }
    match deltas.iter_mut().find(|(s, _)| *s == slot) {
        Some((_, d)) => d.add(delta),
        None => deltas.push((slot, delta)),
    }
}

/// One namespace's counts; `known` is false until its first scan.
#[derive(Default)]
struct Slot {
    known: AtomicBool,
    keys: AtomicI64,
    expires: AtomicI64,
    expire_sum: AtomicU64,
}

/// The counts of every namespace of an engine.
pub(crate) struct KeyCounts {
    /// Held shared by each write to a namespace not counted yet, from before it reads the
    /// records its batch replaces until its deltas are applied; exclusively by a scan that
    /// counts a namespace. So a scan sees every write whose deltas it will not receive, and
    /// none whose deltas it will. A write to a namespace counted already needs no gate: no
    /// scan of it can start until its counts are forgotten, which happens only under the
    /// exclusive keyspace lock ([`KeyCounts::forget`]).
    gate: RwLock<()>,
    slots: Vec<Slot>,
}

impl KeyCounts {
    /// Counts for `databases` namespaces, none counted yet.
    pub(crate) fn new(databases: usize) -> Self {
        KeyCounts { gate: RwLock::new(()), slots: (0..databases).map(|_| Slot::default()).collect() }
    }

    /// The gate a write to a namespace not counted yet holds while it reads what its batch
    /// replaces, applies the batch and then its deltas.
    pub(crate) fn write_gate(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds the deltas of a batch just applied, under [`KeyCounts::write_gate`]. A namespace
    /// not counted yet takes none: its first scan will see the batch.
    pub(crate) fn apply(&self, deltas: &[(usize, Delta)]) {
        for &(slot, d) in deltas.iter().filter(|(_, d)| *d != Delta::default()) {
            let Some(s) = self.slots.get(slot).filter(|s| s.known.load(Ordering::SeqCst)) else { continue };
            s.keys.fetch_add(d.keys, Ordering::Relaxed);
            s.expires.fetch_add(d.expires, Ordering::Relaxed);
            s.expire_sum.fetch_add(d.expire_sum, Ordering::Relaxed);
        }
    }

    /// Whether namespace `slot` has been counted (writes then keep its counts).
    #[inline]
    pub(crate) fn is_counted(&self, slot: usize) -> bool {
        self.slots.get(slot).is_some_and(|s| s.known.load(Ordering::SeqCst))
    }

    /// Namespace `slot`'s counts, `None` before its first scan.
    pub(crate) fn get(&self, slot: usize) -> Option<KeyCount> {
        let s = self.slots.get(slot)?;
        if !s.known.load(Ordering::SeqCst) {
            return None;
        }
        Some(KeyCount {
            keys: s.keys.load(Ordering::Relaxed).max(0) as u64,
            expires: s.expires.load(Ordering::Relaxed).max(0) as u64,
            expire_sum: s.expire_sum.load(Ordering::Relaxed),
        })
    }

    /// Namespace `slot`'s counts, counting its records in `layout`'s namespace range first if
    /// it has not been counted yet (writers wait meanwhile). `backend` must be the store
    /// itself, not a transaction's overlay: the scan must see only committed records.
    ///
    /// # Errors
    /// Storage errors from the scan; the namespace stays uncounted then.
    pub(crate) fn get_or_count<B: KvBackend>(
        &self,
        slot: usize,
        layout: &KeyLayout,
        backend: &B,
    ) -> crate::Result<KeyCount> {
        if let Some(count) = self.get(slot) {
            return Ok(count);
        }
        let _gate = self.gate.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = self.get(slot) {
            return Ok(count);
        }
        let count = scan_count(layout, backend)?;
        let Some(s) = self.slots.get(slot) else { return Ok(count) };
        s.keys.store(count.keys as i64, Ordering::Relaxed);
        s.expires.store(count.expires as i64, Ordering::Relaxed);
        s.expire_sum.store(count.expire_sum, Ordering::Relaxed);
        s.known.store(true, Ordering::SeqCst);
        Ok(count)
    }

    /// Forgets every count: each namespace is scanned again at its next use. For writes that
    /// bypass the commit path (a server emptying the store itself). The caller holds the
    /// exclusive keyspace lock: no write is under way, as writes to counted namespaces do not
    /// take the gate.
    pub(crate) fn forget(&self) {
        let _gate = self.gate.write().unwrap_or_else(PoisonError::into_inner);
        for s in &self.slots {
            s.known.store(false, Ordering::SeqCst);
        }
    }
}

/// The counts of the records in `layout`'s namespace range, by one scan.
///
/// # Errors
/// Storage errors.
pub(crate) fn scan_count<B: KvBackend>(layout: &KeyLayout, backend: &B) -> crate::Result<KeyCount> {
    let mut count = KeyCount::default();
    for item in backend.scan(ColumnFamily::Metadata, &layout.namespace_range(), Direction::Forward)? {
        let (k, v) = item?;
        if layout.decode_metadata_key(&k).is_err() {
            continue;
        }
        if let Some(expire_ms) = counted(layout, Some(&v)) {
            count.keys += 1;
            if expire_ms != 0 {
                count.expires += 1;
                count.expire_sum = count.expire_sum.wrapping_add(expire_ms);
            }
        }
    }
    Ok(count)
}
