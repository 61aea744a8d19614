//! [`Overlay`]: a backend that buffers writes over another, for EXEC.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::iter::Peekable;

use bytes::Bytes;

use crate::backend::{BatchOp, ColumnFamily, Direction, KvBackend, KvPair, ScanIter, WriteBatch};
use crate::codec::KeyRange;
use crate::{Error, Result};

type Pending = BTreeMap<(ColumnFamily, Bytes), Option<Bytes>>;

/// Reads through to `base`, but sees the batches written to it first: a transaction's
/// commands see each other's writes while nothing reaches `base` until
/// [`Overlay::into_batch`] hands them over as one batch.
///
/// One thread uses an overlay (it is not `Sync`); the caller holds the key locks.
pub struct Overlay<'a, B: ?Sized> {
    base: &'a B,
    pending: RefCell<Pending>,
    /// The first error a read of `base` gave (see [`Overlay::failure`]).
    failure: RefCell<Option<Error>>,
}

impl<'a, B: KvBackend + ?Sized> Overlay<'a, B> {
    /// An overlay with no writes yet.
    pub(crate) fn new(base: &'a B) -> Self {
        Overlay { base, pending: RefCell::new(BTreeMap::new()), failure: RefCell::new(None) }
    }

    /// The first error a read of the base store gave, if any: a transaction that met one
    /// must not commit, since a queued command may have failed half-way.
    pub fn failure(&self) -> Option<Error> {
        self.failure.borrow().clone()
    }

    /// Remembers the first failed read of the base store.
    fn note<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            self.failure.borrow_mut().get_or_insert_with(|| e.clone());
        }
        result
    }

    /// Every buffered write as one batch: one put or delete per record, its final state.
    pub(crate) fn into_batch(self) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for ((cf, key), value) in self.pending.into_inner() {
            match value {
                Some(value) => batch.put(cf, key, value),
                None => batch.delete(cf, key),
            }
        }
        batch
    }
}

impl<B: KvBackend + ?Sized> KvBackend for Overlay<'_, B> {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        if let Some(value) = self.pending.borrow().get(&(cf, Bytes::copy_from_slice(key))) {
            return Ok(value.clone());
        }
        self.note(self.base.get(cf, key))
    }

    fn get_ahead(
        &self,
        cf: ColumnFamily,
        key: &[u8],
        bound: &[u8],
        direction: Direction,
    ) -> Result<Option<Bytes>> {
        if let Some(value) = self.pending.borrow().get(&(cf, Bytes::copy_from_slice(key))) {
            return Ok(value.clone());
        }
        self.note(self.base.get_ahead(cf, key, bound, direction))
    }

    fn reads_ahead(&self) -> bool {
        self.base.reads_ahead()
    }

    fn scan<'s>(&'s self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'s>> {
        let start = (cf, Bytes::copy_from_slice(&range.start));
        let pending = self.pending.borrow();
        let in_range = pending.range(start..).take_while(|((c, k), _)| {
            *c == cf && range.end.as_ref().is_none_or(|end| k.as_ref() < end.as_slice())
        });
        let mut mine: Vec<(Bytes, Option<Bytes>)> =
            in_range.map(|((_, k), v)| (k.clone(), v.clone())).collect();
        if direction == Direction::Reverse {
            mine.reverse();
        }
        let base = self.note(self.base.scan(cf, range, direction))?;
        let failure = &self.failure;
        let base: ScanIter<'s> = Box::new(base.inspect(move |item| {
            if let Err(e) = item {
                failure.borrow_mut().get_or_insert_with(|| e.clone());
            }
        }));
        Ok(Box::new(Merge { base: base.peekable(), mine: mine.into_iter().peekable(), direction }))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut pending = self.pending.borrow_mut();
        for op in batch.into_ops() {
            match op {
                BatchOp::Put { cf, key, value } => pending.insert((cf, key), Some(value)),
                BatchOp::Delete { cf, key } => pending.insert((cf, key), None),
            };
        }
        Ok(())
    }

    fn is_shared(&self) -> bool {
        self.base.is_shared()
    }
}

/// Merges the base scan with the buffered writes (which win on equal keys; `None` hides).
struct Merge<'s> {
    base: Peekable<ScanIter<'s>>,
    mine: Peekable<std::vec::IntoIter<(Bytes, Option<Bytes>)>>,
    direction: Direction,
}

impl Iterator for Merge<'_> {
    type Item = Result<KvPair>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.base.peek(), self.mine.peek()) {
                (Some(Err(_)), _) => return self.base.next(),
                (None, None) => return None,
                (Some(_), None) => return self.base.next(),
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(Ok((b, _))), Some((m, _))) => match self.direction {
                    Direction::Forward => b.cmp(m),
                    Direction::Reverse => m.cmp(b),
                },
            };
            if order == std::cmp::Ordering::Less {
                return self.base.next();
            }
            if order == std::cmp::Ordering::Equal {
                self.base.next();
            }
            let (key, value) = self.mine.next()?;
            if let Some(value) = value {
                return Some(Ok((key, value)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemoryBackend;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn scans_merge_both_ways_and_hide_deletes() {
        let base = MemoryBackend::new();
        let mut batch = WriteBatch::new();
        for k in ["a", "c", "e"] {
            batch.put(ColumnFamily::Subkey, b(k), b("base"));
        }
        base.write(batch).unwrap();
        let overlay = Overlay::new(&base);
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Subkey, b("b"), b("mine"));
        batch.put(ColumnFamily::Subkey, b("c"), b("mine"));
        batch.delete(ColumnFamily::Subkey, b("e"));
        batch.put(ColumnFamily::Metadata, b("c"), b("other cf"));
        overlay.write(batch).unwrap();
        let all = KeyRange { start: Vec::new(), end: None };
        let scan = |d| -> Vec<(Bytes, Bytes)> {
            overlay.scan(ColumnFamily::Subkey, &all, d).unwrap().map(|r| r.unwrap()).collect()
        };
        let forward = vec![(b("a"), b("base")), (b("b"), b("mine")), (b("c"), b("mine"))];
        assert_eq!(scan(Direction::Forward), forward);
        assert_eq!(scan(Direction::Reverse), forward.into_iter().rev().collect::<Vec<_>>());
        assert_eq!(overlay.get(ColumnFamily::Subkey, b"e").unwrap(), None);
        assert_eq!(base.get(ColumnFamily::Subkey, b"e").unwrap(), Some(b("base")));
        assert_eq!(overlay.into_batch().len(), 4);
    }
}
