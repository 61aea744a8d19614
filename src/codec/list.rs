//! List indices: elements live at stored indices `[head, tail)`.

use crate::error::{Error, Result};

/// The head and tail of a new list: `u64::MAX / 2`, so it can grow ~2^63 either way.
pub const LIST_INITIAL_INDEX: u64 = u64::MAX / 2;

/// The stored index of the element at `position` (0 = first) of a list starting at `head`.
///
/// # Errors
/// [`Error::ListIndexOverflow`] when `head + position` leaves the u64 range.
pub fn stored_index(head: u64, position: u64) -> Result<u64> {
    head.checked_add(position).ok_or(Error::ListIndexOverflow)
}

/// The position (0 = first) of the element stored at `index` in a list starting at `head`.
///
/// # Errors
/// [`Error::ListIndexOverflow`] when `index` lies before `head`.
pub fn position_of(head: u64, index: u64) -> Result<u64> {
    index.checked_sub(head).ok_or(Error::ListIndexOverflow)
}

/// The index an LPUSH writes at, which becomes the new head: `head - 1`.
///
/// # Errors
/// [`Error::ListIndexOverflow`] when head is already 0.
pub fn push_front_index(head: u64) -> Result<u64> {
    head.checked_sub(1).ok_or(Error::ListIndexOverflow)
}

/// The tail after an RPUSH wrote at `tail`: `tail + 1`.
///
/// # Errors
/// [`Error::ListIndexOverflow`] when tail is already `u64::MAX`.
pub fn push_back_tail(tail: u64) -> Result<u64> {
    tail.checked_add(1).ok_or(Error::ListIndexOverflow)
}
