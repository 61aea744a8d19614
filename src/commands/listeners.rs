//! [`Listeners`]: who needs to hear which keys commands modify.
//!
//! Recording a command's modified keys ([`super::Session::touched`]) costs it a copy of each
//! key and a pass over its batch. A server needs them only for a WATCH, a client parked on a
//! key, or a client tracking keys: an engine given a count of those
//! ([`super::Engine::with_listeners`]) records them only while the count is above zero.
//!
//! A command decides under its key locks, at its commit. So a listener counted before its
//! own next command (or WATCH, or the re-run that parks a client) takes those locks hears
//! of every write after it: a writer either committed before the listener's command ran,
//! which then sees the write, or decides after the count went up.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A count of listeners, shared by the engines of a server (clones share it).
#[derive(Debug, Clone, Default)]
pub struct Listeners(Arc<AtomicUsize>);

impl Listeners {
    /// Counts one more listener until the returned guard drops.
    pub fn listen(&self) -> Listening {
        self.0.fetch_add(1, Ordering::SeqCst);
        Listening(Arc::clone(&self.0))
    }

    /// Whether anyone listens.
    pub fn any(&self) -> bool {
        self.0.load(Ordering::SeqCst) > 0
    }
}

/// One listener of a [`Listeners`], counted until dropped; a clone counts one more.
#[derive(Debug)]
pub struct Listening(Arc<AtomicUsize>);

impl Clone for Listening {
    fn clone(&self) -> Self {
        Listeners(Arc::clone(&self.0)).listen()
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_counts_until_dropped_and_a_clone_counts_again() {
        let listeners = Listeners::default();
        assert!(!listeners.any());
        let a = listeners.listen();
        let b = a.clone();
        assert_eq!(listeners.0.load(Ordering::SeqCst), 2);
        drop(a);
        assert!(listeners.any());
        drop(b);
        assert!(!listeners.any());
    }
}
