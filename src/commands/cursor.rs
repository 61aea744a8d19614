//! Server-side SCAN cursors: a cursor number names the last item a scan returned.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

/// How many cursors are remembered; older ones restart from the beginning.
const CAPACITY: usize = 16 * 1024;

/// Maps the numbers SCAN/HSCAN/SSCAN/ZSCAN hand out to the position they stand for.
///
/// A position is opaque bytes the scanning command chooses (typically the last key or
/// member returned); it survives between calls for as long as it is among the last
/// [`CAPACITY`] cursors. One store serves every connection (a client may continue a scan
/// on another connection, as in Redis), so it locks inside.
#[derive(Debug, Default)]
pub struct CursorStore {
    inner: Mutex<Cursors>,
}

#[derive(Debug, Default)]
struct Cursors {
    next: u64,
    positions: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

impl CursorStore {
    /// Remembers `position` and returns a fresh non-zero cursor for it.
    pub(crate) fn save(&self, position: Vec<u8>) -> u64 {
        let mut c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        c.next += 1;
        let id = c.next;
        if c.order.len() == CAPACITY
            && let Some(old) = c.order.pop_front()
        {
            c.positions.remove(&old);
        }
        c.positions.insert(id, position);
        c.order.push_back(id);
        id
    }

    /// The position of `cursor`, or `None` for 0 and unknown cursors (start over).
    pub(crate) fn resolve(&self, cursor: u64) -> Option<Vec<u8>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).positions.get(&cursor).cloned()
    }
}
