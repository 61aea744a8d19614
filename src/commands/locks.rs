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
//! - one global lock sits above the stripes: every command takes it shared, and the
//!   commands that touch the whole keyspace (FLUSHDB, FLUSHALL, and EXEC of a transaction
//!   holding one) take it exclusive, so they never see or leave half a command. It is
//!   [`GLOBAL_COPIES`] `RwLock`s, each on a cache line of its own: a thread takes its own
//!   copy shared, an exclusive holder takes in order all those taken so far (see
//!   [`KeyLocks::used`]), so threads on different cores do not pass one lock word back and
//!   forth on every command, and an exclusive holder locks only as many as threads ran
//!   commands.
//!
//! A holder of the whole keyspace may run long (a script in [`super::Engine::atomically`]):
//! [`KeyLocks::lock_or`] polls the global lock meanwhile and may give up, so that the thread
//! waiting can answer instead (BUSY, [`super::Engine::answer_while_held`]).
//!
//! The store's own optimistic transactions (retry on conflict) would need a snapshot and a
//! conflict check from every backend; locks need nothing from the backend beyond atomic
//! batches, which keeps [`crate::backend::KvBackend`] small. A key hashes by its bytes only
//! (not its database), so `COPY src dst DB n` locks `dst` in every database at once.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

/// How many key stripes.
pub const STRIPES: usize = 1024;

/// How often [`KeyLocks::lock_or`] tries again for a global lock held by another.
const HELD_POLL: std::time::Duration = std::time::Duration::from_micros(100);

/// How many copies of the global lock: more than the event loops and other threads that
/// run commands at once, so that each usually has a copy to itself.
const GLOBAL_COPIES: usize = 16;

/// One copy of the global lock, alone on its cache lines (128 bytes: adjacent-line
/// prefetchers pull pairs of 64-byte lines).
#[derive(Debug, Default)]
#[repr(align(128))]
struct GlobalCopy(RwLock<()>);

/// The copy of the global lock the calling thread takes shared: threads are numbered in
/// the order they first take one.
#[inline]
fn own_copy() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // Constant-initialised (no lazy-init check on every read); `usize::MAX`: none yet.
    thread_local!(static COPY: Cell<usize> = const { Cell::new(usize::MAX) });
    COPY.with(|copy| match copy.get() {
        usize::MAX => {
            let own = NEXT.fetch_add(1, Ordering::Relaxed) % GLOBAL_COPIES;
            copy.set(own);
            own
        }
        own => own,
    })
}

/// The global lock and the key stripes.
#[derive(Debug)]
pub struct KeyLocks {
    global: Box<[GlobalCopy]>,
    /// The copies of `global` before this one have been taken shared (or are about to be):
    /// the others need no exclusive locking. It grows under `using`, which an exclusive
    /// holder keeps for as long as it holds the copies, so that a thread whose copy is new
    /// waits for the holder before it takes it.
    used: AtomicUsize,
    using: Mutex<()>,
    stripes: Box<[RwLock<()>]>,
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks {
            global: (0..GLOBAL_COPIES).map(|_| GlobalCopy::default()).collect(),
            used: AtomicUsize::new(0),
            using: Mutex::new(()),
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
        }
    }
}

/// A key stripe, held.
enum Guard<'a> {
    Read(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Write(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

/// The global lock, held: the calling thread's copy shared, or every copy taken so far
/// exclusive, with [`KeyLocks::using`] (released after them).
enum Global<'a> {
    Own(RwLockReadGuard<'a, ()>),
    All(Vec<RwLockWriteGuard<'a, ()>>, MutexGuard<'a, ()>),
}

/// Locks held for one command; dropping it releases them.
pub struct LockGuard<'a> {
    _held: Held<'a>,
}

/// What a [`LockGuard`] holds. Flat, so that releasing the usual case (one key under the
/// thread's copy of the global lock) is one match: no option, vector or nested enum to look
/// at.
#[allow(dead_code)]
enum Held<'a> {
    /// The stripe of a key written, and the thread's copy of the global lock, shared
    /// (released in that order, as the fields drop).
    Write(RwLockWriteGuard<'a, ()>, RwLockReadGuard<'a, ()>),
    /// The stripe of a key read, and the thread's copy of the global lock, shared.
    Read(RwLockReadGuard<'a, ()>, RwLockReadGuard<'a, ()>),
    /// Any number of stripes, and the thread's copy of the global lock, shared.
    Keys(Vec<Guard<'a>>, RwLockReadGuard<'a, ()>),
    /// Every copy of the global lock taken so far, exclusive, with [`KeyLocks::using`].
    All(Vec<RwLockWriteGuard<'a, ()>>, MutexGuard<'a, ()>),
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
            let (using, used) = self.used_copies(true).expect("waited for");
            let copies = self.global[..used].iter();
            Global::All(copies.map(|c| c.0.write().unwrap_or_else(PoisonError::into_inner)).collect(), using)
        } else {
            Global::Own(self.own_global().read().unwrap_or_else(PoisonError::into_inner))
        };
        self.lock_keys(global, keys)
    }

    /// The calling thread's copy of the global lock, counted in [`KeyLocks::used`].
    #[inline]
    fn own_global(&self) -> &RwLock<()> {
        let own = own_copy();
        if own >= self.used.load(Ordering::Acquire) {
            self.use_copy(own);
        }
        &self.global[own].0
    }

    /// Counts copy `own` in [`KeyLocks::used`], after any exclusive holder is done.
    #[cold]
    fn use_copy(&self, own: usize) {
        let _using = self.using.lock().unwrap_or_else(PoisonError::into_inner);
        self.count_copy(own);
    }

    /// Counts copy `own` in [`KeyLocks::used`]; `using` held (its only writers hold it).
    fn count_copy(&self, own: usize) {
        if own >= self.used.load(Ordering::Acquire) {
            self.used.store(own + 1, Ordering::Release);
        }
    }

    /// [`KeyLocks::using`] and how many copies have been taken shared, for an exclusive
    /// holder (the calling thread's copy counted: it may take it while it holds them all);
    /// `None` when `wait` is false and another holds `using`.
    fn used_copies(&self, wait: bool) -> Option<(MutexGuard<'_, ()>, usize)> {
        let own = own_copy();
        let using = if wait {
            self.using.lock().unwrap_or_else(PoisonError::into_inner)
        } else {
            match self.using.try_lock() {
                Ok(guard) => guard,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => return None,
            }
        };
        self.count_copy(own);
        Some((using, self.used.load(Ordering::Acquire)))
    }

    /// Every copy of the global lock taken so far, exclusive, if none is held or waited
    /// for now.
    fn try_lock_all(&self) -> Option<Global<'_>> {
        let (using, used) = self.used_copies(false)?;
        let mut held = Vec::with_capacity(used);
        for copy in self.global[..used].iter() {
            match copy.0.try_write() {
                Ok(guard) => held.push(guard),
                Err(TryLockError::Poisoned(e)) => held.push(e.into_inner()),
                Err(TryLockError::WouldBlock) => return None,
            }
        }
        Some(Global::All(held, using))
    }

    /// The calling thread's copy of the global lock, shared, if no whole-keyspace holder
    /// holds or waits for it now.
    #[inline]
    fn try_lock_own(&self) -> Option<Global<'_>> {
        let own = own_copy();
        if own >= self.used.load(Ordering::Acquire) {
            // A new copy is counted only when no exclusive holder holds `using`.
            let _using = match self.using.try_lock() {
                Ok(guard) => guard,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => return None,
            };
            self.count_copy(own);
        }
        match self.global[own].0.try_read() {
            Ok(guard) => Some(Global::Own(guard)),
            Err(TryLockError::Poisoned(e)) => Some(Global::Own(e.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// [`KeyLocks::lock`], but while another holder keeps the global lock in the way it
    /// polls it (every 100 µs), calling `give_up` before each wait: `None` (nothing held)
    /// once that says so.
    pub(crate) fn lock_or<'k>(
        &self,
        whole_keyspace: bool,
        keys: impl IntoIterator<Item = (&'k [u8], bool)>,
        give_up: &mut dyn FnMut() -> bool,
    ) -> Option<LockGuard<'_>> {
        let global = loop {
            let attempt = if whole_keyspace { self.try_lock_all() } else { self.try_lock_own() };
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
        global: Global<'a>,
        keys: impl IntoIterator<Item = (&'k [u8], bool)>,
    ) -> LockGuard<'a> {
        let own = match global {
            Global::Own(own) => own,
            Global::All(copies, using) => return LockGuard { _held: Held::All(copies, using) },
        };
        let mut keys = keys.into_iter().map(|(k, w)| (stripe(k), w));
        let (first, second) = (keys.next(), keys.next());
        let held = match (first, second) {
            (None, _) => Held::Keys(Vec::new(), own),
            (Some(one), None) => match self.take(one) {
                Guard::Write(stripe) => Held::Write(stripe, own),
                Guard::Read(stripe) => Held::Read(stripe, own),
            },
            (Some(first), Some(second)) => {
                let mut wanted: Vec<(usize, bool)> = [first, second].into_iter().chain(keys).collect();
                // Sorted by stripe with writers first, so the dedup keeps the strongest mode.
                wanted.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
                wanted.dedup_by_key(|s| s.0);
                Held::Keys(wanted.into_iter().map(|s| self.take(s)).collect(), own)
            }
        };
        LockGuard { _held: held }
    }

    /// The global lock, shared, if no whole-keyspace command holds it or waits for it now
    /// (perhaps this very thread: a script); `None` otherwise, without blocking.
    pub(crate) fn try_lock_shared(&self) -> Option<LockGuard<'_>> {
        Some(self.lock_keys(self.try_lock_own()?, std::iter::empty()))
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

    /// Threads take different copies of the global lock shared, and a whole-keyspace holder
    /// still excludes every one of them (and they it).
    #[test]
    fn the_keyspace_excludes_commands_on_every_thread() {
        let locks = KeyLocks::default();
        let (taken, released) = (std::sync::Barrier::new(2), std::sync::atomic::AtomicBool::new(false));
        std::thread::scope(|s| {
            let copies: std::collections::HashSet<usize> =
                (0..4).map(|_| s.spawn(own_copy)).map(|t| t.join().unwrap()).collect();
            assert_eq!(copies.len(), 4, "four threads, four copies");
            let held = locks.lock(true, std::iter::empty());
            for _ in 0..4 {
                let refused = s.spawn(|| locks.lock_or(false, [(&b"k"[..], false)], &mut || true).is_none());
                assert!(refused.join().unwrap(), "a command ran while the keyspace was held");
            }
            drop(held);
            s.spawn(|| {
                let guard = locks.lock(false, [(&b"k"[..], false)]);
                taken.wait();
                std::thread::sleep(std::time::Duration::from_millis(50));
                released.store(true, Ordering::SeqCst);
                drop(guard);
            });
            taken.wait();
            let guard = locks.lock(true, std::iter::empty());
            assert!(released.load(Ordering::SeqCst), "the keyspace was held beside a command");
            drop(guard);
        });
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
