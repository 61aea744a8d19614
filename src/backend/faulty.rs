//! [`FaultyBackend`]: a wrapper that makes a chosen read or write fail, for tests of engines.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use super::{ColumnFamily, Direction, KvBackend, ScanIter, WriteBatch};
use crate::codec::KeyRange;
use crate::error::{Error, Result};

const NONE: u64 = u64::MAX;

/// Wraps a backend and fails on command, once: the n-th read or the n-th write from now.
///
/// Meant for tests of engines built on this crate: arm a fault, run a command, and check
/// that the store holds exactly the state before it or after it, and that the client got an
/// error. A *read* is one [`KvBackend::get`], one [`KvBackend::multi_get`], the start of one
/// [`KvBackend::scan`], or one item a scan yields; a failed scan item ends that scan. A
/// failed [`KvBackend::write`] applies nothing. Each fault fires at most once, with
/// [`Error::Backend`] naming it; everything else passes through to the inner backend.
#[derive(Debug)]
pub struct FaultyBackend<B> {
    inner: B,
    reads: AtomicU64,
    writes: AtomicU64,
    fail_read: AtomicU64,
    fail_write: AtomicU64,
    fired: AtomicU64,
}

impl<B: KvBackend> FaultyBackend<B> {
    /// A wrapper with no fault armed.
    pub fn new(inner: B) -> Self {
        FaultyBackend {
            inner,
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            fail_read: AtomicU64::new(NONE),
            fail_write: AtomicU64::new(NONE),
            fired: AtomicU64::new(0),
        }
    }

    /// Restarts the read and write counts and makes read number `n` from now fail
    /// (0: the next one).
    pub fn fail_read(&self, n: u64) {
        self.reset_counts();
        self.fail_read.store(n, Ordering::SeqCst);
    }

    /// Restarts the counts and makes write number `n` from now fail (0: the next one);
    /// nothing of that batch is applied.
    pub fn fail_write(&self, n: u64) {
        self.reset_counts();
        self.fail_write.store(n, Ordering::SeqCst);
    }

    /// Restarts the counts and clears any fault not fired yet.
    pub fn disarm(&self) {
        self.reset_counts();
        self.fail_read.store(NONE, Ordering::SeqCst);
        self.fail_write.store(NONE, Ordering::SeqCst);
    }

    fn reset_counts(&self) {
        self.reads.store(0, Ordering::SeqCst);
        self.writes.store(0, Ordering::SeqCst);
    }

    /// Reads since the last arm or disarm (a failed read counts).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// Writes since the last arm or disarm (a failed write counts).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// Faults injected since the wrapper was made.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::SeqCst)
    }

    /// Gives the wrapped backend back.
    pub fn into_inner(self) -> B {
        self.inner
    }

    /// Counts one read; fails it when it is the armed one.
    fn read(&self) -> Result<()> {
        self.count(&self.reads, &self.fail_read, "read")
    }

    /// Counts one operation of a kind; fails it (once) when it is the armed one.
    fn count(&self, done: &AtomicU64, armed: &AtomicU64, what: &str) -> Result<()> {
        let n = done.fetch_add(1, Ordering::SeqCst);
        if armed.compare_exchange(n, NONE, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            self.fired.fetch_add(1, Ordering::SeqCst);
            return Err(Error::Backend(format!("injected fault: {what} {n}")));
        }
        Ok(())
    }
}

impl<B: KvBackend> KvBackend for FaultyBackend<B> {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        self.read()?;
        self.inner.get(cf, key)
    }

    fn multi_get(&self, cf: ColumnFamily, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
        self.read()?;
        self.inner.multi_get(cf, keys)
    }

    fn get_ahead(
        &self,
        cf: ColumnFamily,
        key: &[u8],
        bound: &[u8],
        direction: Direction,
    ) -> Result<Option<Bytes>> {
        self.read()?;
        self.inner.get_ahead(cf, key, bound, direction)
    }

    fn reads_ahead(&self) -> bool {
        self.inner.reads_ahead()
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        self.read()?;
        let mut inner = self.inner.scan(cf, range, direction)?;
        let mut failed = false;
        Ok(Box::new(std::iter::from_fn(move || {
            if failed {
                return None;
            }
            let item = inner.next()?;
            if let Err(e) = self.read() {
                failed = true;
                return Some(Err(e));
            }
            Some(item)
        })))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.count(&self.writes, &self.fail_write, "write")?;
        self.inner.write(batch)
    }

    fn begin(&self) {
        self.inner.begin()
    }

    fn finish(&self) -> bool {
        self.inner.finish()
    }

    fn is_shared(&self) -> bool {
        self.inner.is_shared()
    }

    fn snapshot(&self) -> Result<Option<super::Snapshot>> {
        self.read()?;
        self.inner.snapshot()
    }

    fn retry_pause(&self, attempt: u32, elapsed: std::time::Duration) -> Option<std::time::Duration> {
        self.inner.retry_pause(attempt, elapsed)
    }

    fn stamp(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<u64>> {
        self.read()?;
        self.inner.stamp(cf, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemoryBackend;

    fn store() -> FaultyBackend<MemoryBackend> {
        let backend = FaultyBackend::new(MemoryBackend::new());
        let mut batch = WriteBatch::new();
        for k in [&b"a"[..], b"b", b"c"] {
            batch.put(ColumnFamily::Subkey, k.to_vec(), b"v".to_vec());
        }
        backend.write(batch).unwrap();
        backend
    }

    fn all() -> KeyRange {
        KeyRange { start: vec![], end: None }
    }

    #[test]
    fn the_chosen_read_fails_once() {
        let b = store();
        b.fail_read(1);
        assert!(b.get(ColumnFamily::Subkey, b"a").unwrap().is_some());
        assert!(matches!(b.get(ColumnFamily::Subkey, b"a"), Err(Error::Backend(_))));
        assert!(b.get(ColumnFamily::Subkey, b"a").unwrap().is_some());
        assert_eq!((b.reads(), b.fired()), (3, 1));
    }

    #[test]
    fn a_scan_item_fails_and_ends_the_scan() {
        let b = store();
        b.fail_read(2); // the start is read 0, items are reads 1, 2, 3
        let items: Vec<_> = b.scan(ColumnFamily::Subkey, &all(), Direction::Forward).unwrap().collect();
        assert_eq!(items.len(), 2);
        assert!(items[0].is_ok() && items[1].is_err());
        b.fail_read(0);
        assert!(b.scan(ColumnFamily::Subkey, &all(), Direction::Forward).is_err());
        b.disarm();
        assert_eq!(b.scan(ColumnFamily::Subkey, &all(), Direction::Forward).unwrap().count(), 3);
        assert_eq!(b.reads(), 4);
    }

    #[test]
    fn a_failed_write_applies_nothing() {
        let b = store();
        let before = b.inner.clone();
        b.fail_write(1);
        b.write(WriteBatch::new()).unwrap();
        let mut batch = WriteBatch::new();
        batch.delete(ColumnFamily::Subkey, b"a".to_vec());
        batch.put(ColumnFamily::Metadata, b"m".to_vec(), b"x".to_vec());
        assert!(matches!(b.write(batch.clone()), Err(Error::Backend(_))));
        assert_eq!(b.inner, before);
        b.write(batch).unwrap();
        assert_ne!(b.inner, before);
        assert_eq!((b.writes(), b.fired()), (3, 1));
    }
}
