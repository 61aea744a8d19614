//! Key locks for many threads over one backend.
//!
//! # Why striped key locks
//! A command reads, then submits one batch; its reads must see one state of its keys and
//! nobody may write them in between. The engine knows every command's keys before running
//! it (the key specs of [`super::table`]), so it locks exactly those, Kvrocks' way:
//! - each key hashes to one of [`STRIPES`] `RwLock`s — shared for a read-only command,
//!   exclusive for a writer — so commands on different keys run in parallel and readers of
//!   one key too, with a fixed memory cost whatever the number of keys;
//! - a command locks its stripes in ascending index order, each once, so two commands can
//!   never wait for each other in a cycle: no deadlock;
//! - one global `RwLock` sits above the stripes: every command takes it shared, and the
//!   commands that touch the whole keyspace (FLUSHDB, FLUSHALL, and EXEC of a transaction
//!   holding one) take it exclusive, so they never see or leave half a command.
//!
//! A holder of the whole keyspace may run long (a script in [`super::Engine::atomically`]):
//! [`KeyLocks::lock_or`] polls the global lock meanwhile and may give up, so that the thread
//! waiting can answer instead (BUSY, [`super::Engine::answer_while_held`]).
//!
//! The store's own optimistic transactions (retry on conflict) would need a snapshot and a
//! conflict check from every backend; locks need nothing from the backend beyond atomic
//! batches, which keeps [`crate::backend::KvBackend`] small. A key hashes by its bytes only
//! (not its database), so `COPY src dst DB n` locks `dst` in every database at once.

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

/// How many key stripes.
pub const STRIPES: usize = 1024;

/// How often [`KeyLocks::lock_or`] tries again for a global lock held by another.
const HELD_POLL: std::time::Duration = std::time::Duration::from_micros(100);

/// The global lock and the key stripes.
#[derive(Debug)]
pub struct KeyLocks {
    global: RwLock<()>,
    stripes: Box<[RwLock<()>]>,
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks { global: RwLock::new(()), stripes: (0..STRIPES).map(|_| RwLock::new(())).collect() }
    }
}

enum Guard<'a> {
    Read(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Write(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

/// Locks held for one command; dropping it releases them.
pub struct LockGuard<'a> {
    // Most commands name one key: its stripe is held without allocating.
    _one: Option<Guard<'a>>,
    _keys: Vec<Guard<'a>>,
    _global: Guard<'a>,
}

/// The stripe of `key`: a multiply-rotate hash over its bytes eight at a time (a byte-wise
/// hash is one multiply per byte, in a dependency chain, on every command's path).
pub fn stripe(key: &[u8]) -> usize {
    crate::backend::key_hash(key) as usize % STRIPES
}

impl KeyLocks {
    /// Takes the global lock (exclusive when `whole_keyspace`), then — unless that is
    /// exclusive — the stripes of `keys` in ascending order, exclusive for a key marked
    /// `true` (written), shared otherwise. Blocks until all are held.
    pub fn lock<'k>(
        &self,
        whole_keyspace: bool,
        keys: impl IntoIterator<Item = (&'k [u8], bool)>,
    ) -> LockGuard<'_> {
        let global = if whole_keyspace {
            Guard::Write(self.global.write().unwrap_or_else(PoisonError::into_inner))
        } else {
            Guard::Read(self.global.read().unwrap_or_else(PoisonError::into_inner))
        };
        self.lock_keys(global, keys)
    }

    /// [`KeyLocks::lock`], but while another holder keeps the global lock in the way it
    /// polls it (every 100 µs), calling `give_up` before each wait: `None` (nothing held)
    /// once that says so.
    pub fn lock_or<'k>(
        &self,
        whole_keyspace: bool,
        keys: impl IntoIterator<Item = (&'k [u8], bool)>,
        give_up: &mut dyn FnMut() -> bool,
    ) -> Option<LockGuard<'_>> {
        let global = loop {
            let attempt = if whole_keyspace {
                match self.global.try_write() {
                    Ok(guard) => Some(Guard::Write(guard)),
                    Err(TryLockError::Poisoned(e)) => Some(Guard::Write(e.into_inner())),
                    Err(TryLockError::WouldBlock) => None,
                }
            } else {
                match self.global.try_read() {
                    Ok(guard) => Some(Guard::Read(guard)),
                    Err(TryLockError::Poisoned(e)) => Some(Guard::Read(e.into_inner())),
                    Err(TryLockError::WouldBlock) => None,
                }
            };
            match attempt {
                Some(guard) => break guard,
                None if give_up() => return None,
                None => std::thread::sleep(HELD_POLL),
            }
        };
        Some(self.lock_keys(global, keys))
    }

    /// The stripes of `keys` under `global` (none when it is exclusive).
    fn lock_keys<'a, 'k>(
        &'a self,
        global: Guard<'a>,
        keys: impl IntoIterator<Item = (&'k [u8], bool)>,
    ) -> LockGuard<'a> {
        if matches!(global, Guard::Write(_)) {
            return LockGuard { _one: None, _keys: Vec::new(), _global: global };
        }
        let mut keys = keys.into_iter().map(|(k, w)| (stripe(k), w));
        let (first, second) = (keys.next(), keys.next());
        if second.is_none() {
            let one = first.map(|s| self.take(s));
            return LockGuard { _one: one, _keys: Vec::new(), _global: global };
        }
        let mut wanted: Vec<(usize, bool)> = first.into_iter().chain(second).chain(keys).collect();
        // Sorted by stripe with writers first, so the dedup keeps the strongest mode.
        wanted.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        wanted.dedup_by_key(|s| s.0);
        let keys = wanted.into_iter().map(|s| self.take(s)).collect();
        LockGuard { _one: None, _keys: keys, _global: global }
    }

    /// The global lock, shared, if no whole-keyspace command holds it or waits for it now
    /// (perhaps this very thread: a script); `None` otherwise, without blocking.
    pub fn try_lock_shared(&self) -> Option<LockGuard<'_>> {
        let global = match self.global.try_read() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        Some(LockGuard { _one: None, _keys: Vec::new(), _global: Guard::Read(global) })
    }

    /// Blocks until stripe `i` is held: exclusive when `write`, shared otherwise.
    fn take(&self, (i, write): (usize, bool)) -> Guard<'_> {
        let lock = &self.stripes[i];
        if write {
            Guard::Write(lock.write().unwrap_or_else(PoisonError::into_inner))
        } else {
            Guard::Read(lock.read().unwrap_or_else(PoisonError::into_inner))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// While a whole-keyspace holder keeps the global lock, `lock_or` asks before each wait
    /// and gives up holding nothing; once it is free, it locks without asking.
    #[test]
    fn lock_or_gives_up_only_while_the_keyspace_is_held() {
        let locks = KeyLocks::default();
        let held = locks.lock(true, std::iter::empty());
        let mut asked = 0;
        let got = locks.lock_or(false, [(&b"k"[..], true)], &mut || {
            asked += 1;
            asked == 3
        });
        assert!(got.is_none());
        assert_eq!(asked, 3);
        assert!(locks.lock_or(true, std::iter::empty(), &mut || true).is_none());
        drop(held);
        let got = locks.lock_or(false, [(&b"k"[..], true)], &mut || panic!("asked with the keyspace free"));
        assert!(got.is_some());
        // A command holds the keyspace shared: an exclusive lock of it waits.
        assert!(locks.lock_or(true, std::iter::empty(), &mut || true).is_none());
        drop(got);
        assert!(locks.lock_or(true, std::iter::empty(), &mut || panic!("asked")).is_some());
    }

    /// Keys that differ in one byte anywhere (typical `user:1234` names, short and long)
    /// spread over every stripe, none holding more than twice its share.
    #[test]
    fn stripes_spread_similar_keys() {
        for (prefix, n) in [("", 50_000), ("k", 50_000), ("user:session:000000000000", 50_000)] {
            let mut counts = vec![0u32; STRIPES];
            for i in 0..n {
                counts[stripe(format!("{prefix}{i}").as_bytes())] += 1;
            }
            let share = n as u32 / STRIPES as u32;
            assert!(counts.iter().all(|&c| c > 0), "{prefix:?}: an empty stripe");
            assert!(counts.iter().all(|&c| c <= 2 * share), "{prefix:?}: max {:?}", counts.iter().max());
        }
        assert_eq!(stripe(b"same key"), stripe(b"same key"));
    }
}
