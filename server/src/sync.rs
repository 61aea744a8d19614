//! A lock that outlives a panic elsewhere.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, going on after a panic elsewhere (the data is plain counters and names).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
