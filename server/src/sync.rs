//! A lock that outlives a panic elsewhere: in a debug build, where a panicking thread unwinds
//! (a release build aborts the process, see the workspace's `Cargo.toml`).

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, going on after a panic elsewhere (the data is plain counters and names).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
