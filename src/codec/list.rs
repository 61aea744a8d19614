//! List indices: elements live at stored indices `[head, tail)`.

use crate::error::{Error, Result};

/// The head and tail of a new list: `u64::MAX / 2`, so it can grow ~2^63 either way.
pub const LIST_INITIAL_INDEX: u64 = u64::MAX / 2;

/// The stored index of the element at `position` (0 = first) of a list starting at `head`.
///
/// # Errors
/// [`Error::ListIndexOverflow`] when `head + position` leaves the u64 range.
pub(crate) fn stored_index(head: u64, position: u64) -> Result<u64> {
    head.checked_add(position).ok_or(Error::ListIndexOverflow)
}

/// The index an LPUSH writes at, which becomes the new head: `head - 1`.
///
/// # Errors
/// [`Error::ListIndexOverflow`] when head is already 0.
pub(crate) fn push_front_index(head: u64) -> Result<u64> {
    head.checked_sub(1).ok_or(Error::ListIndexOverflow)
}

/// The tail after an RPUSH wrote at `tail`: `tail + 1`.
///
/// # Errors
/// [`Error::ListIndexOverflow`] when tail is already `u64::MAX`.
pub(crate) fn push_back_tail(tail: u64) -> Result<u64> {
    tail.checked_add(1).ok_or(Error::ListIndexOverflow)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;
    use crate::codec::{KeyLayout, Version};

    #[test]
    fn list_index_golden() {
        let head = LIST_INITIAL_INDEX;
        assert_eq!(push_front_index(head), Ok(0x7FFF_FFFF_FFFF_FFFE));
        assert_eq!(push_back_tail(head), Ok(0x8000_0000_0000_0000));
        assert_eq!(stored_index(head, 3), Ok(0x8000_0000_0000_0002));
        assert_eq!(push_front_index(0), Err(Error::ListIndexOverflow));
        assert_eq!(push_back_tail(u64::MAX), Err(Error::ListIndexOverflow));
        assert_eq!(stored_index(u64::MAX, 1), Err(Error::ListIndexOverflow));
    }

    proptest! {
        #[test]
        fn list_index_order_is_position_order(pushes in vec(any::<bool>(), 0..300)) {
            // true = LPUSH, false = RPUSH. Element i is the i-th pushed.
            let mut head = LIST_INITIAL_INDEX;
            let mut tail = LIST_INITIAL_INDEX;
            let mut logical: VecDeque<usize> = VecDeque::new();
            let mut stored: Vec<u64> = Vec::new();
            for (i, &front) in pushes.iter().enumerate() {
                if front {
                    head = push_front_index(head).unwrap();
                    stored.push(head);
                    logical.push_front(i);
                } else {
                    stored.push(tail);
                    tail = push_back_tail(tail).unwrap();
                    logical.push_back(i);
                }
            }
            prop_assert_eq!(tail - head, pushes.len() as u64);
            // Order the elements by their stored subkey bytes.
            let layout = KeyLayout::default();
            let mut by_bytes: Vec<(Vec<u8>, usize)> = stored
                .iter()
                .enumerate()
                .map(|(i, idx)| (layout.subkey(b"list", Version::Short(9), &idx.to_be_bytes()).unwrap(), i))
                .collect();
            by_bytes.sort();
            let order: Vec<usize> = by_bytes.into_iter().map(|(_, i)| i).collect();
            prop_assert_eq!(order, logical.iter().copied().collect::<Vec<_>>());
            // Position -> stored index.
            for (pos, &elem) in logical.iter().enumerate() {
                prop_assert_eq!(stored_index(head, pos as u64), Ok(stored[elem]));
                prop_assert!(stored[elem] >= head && stored[elem] < tail);
            }
        }
    }
}
