//! The reference backend: one `BTreeMap` per column family.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use super::{BatchOp, ColumnFamily, Direction, KvBackend, ScanIter, WriteBatch};
use crate::codec::KeyRange;
use crate::error::Result;

/// An in-memory [`KvBackend`]: one `BTreeMap<Bytes, Bytes>` per column family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryBackend {
    cfs: [BTreeMap<Bytes, Bytes>; 3],
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        MemoryBackend::default()
    }

    fn map(&self, cf: ColumnFamily) -> &BTreeMap<Bytes, Bytes> {
        &self.cfs[cf as usize]
    }

    /// Every record of a column family, in key order.
    pub fn records(&self, cf: ColumnFamily) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.map(cf).iter()
    }

    /// Number of records in a column family.
    pub fn len(&self, cf: ColumnFamily) -> usize {
        self.map(cf).len()
    }

    /// Whether all three column families are empty.
    pub fn is_empty(&self) -> bool {
        self.cfs.iter().all(BTreeMap::is_empty)
    }
}

impl KvBackend for MemoryBackend {
    fn get(&self, cf: ColumnFamily, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.map(cf).get(key).cloned())
    }

    fn scan<'a>(&'a self, cf: ColumnFamily, range: &KeyRange, direction: Direction) -> Result<ScanIter<'a>> {
        let end = match &range.end {
            Some(end) if end.as_slice() <= range.start.as_slice() => return Ok(Box::new(std::iter::empty())),
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        let iter = self
            .map(cf)
            .range::<[u8], _>((Bound::Included(range.start.as_slice()), end))
            .map(|(k, v)| Ok((k.clone(), v.clone())));
        Ok(match direction {
            Direction::Forward => Box::new(iter),
            Direction::Reverse => Box::new(iter.rev()),
        })
    }

    fn write(&mut self, batch: WriteBatch) -> Result<()> {
        for op in batch.into_ops() {
            match op {
                BatchOp::Put { cf, key, value } => {
                    self.cfs[cf as usize].insert(key, value);
                }
                BatchOp::Delete { cf, key } => {
                    self.cfs[cf as usize].remove(&key);
                }
            }
        }
        Ok(())
    }
}
