//! Server-side SCAN cursors: a cursor number names the last item a scan returned.

use std::collections::{HashMap, VecDeque};

/// How many cursors are remembered; older ones restart from the beginning.
const CAPACITY: usize = 16 * 1024;

/// Maps the numbers SCAN/HSCAN/SSCAN/ZSCAN hand out to the position they stand for.
///
/// A position is opaque bytes the scanning command chooses (typically the last key or
/// member returned); it survives between calls for as long as it is among the last
/// [`CAPACITY`] cursors.
#[derive(Debug, Default)]
pub struct CursorStore {
    next: u64,
    positions: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

impl CursorStore {
    /// Remembers `position` and returns a fresh non-zero cursor for it.
    pub fn save(&mut self, position: Vec<u8>) -> u64 {
        self.next += 1;
        let id = self.next;
        if self.order.len() == CAPACITY {
            if let Some(old) = self.order.pop_front() {
                self.positions.remove(&old);
            }
        }
        self.positions.insert(id, position);
        self.order.push_back(id);
        id
    }

    /// The position of `cursor`, or `None` for 0 and unknown cursors (start over).
    pub fn resolve(&self, cursor: u64) -> Option<&[u8]> {
        self.positions.get(&cursor).map(Vec::as_slice)
    }
}
