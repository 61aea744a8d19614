//! [`Runs`]: list elements read ahead of a walk through them, for [`super::MetadataCache`].
//!
//! A list popped element by element asks for one subkey after another; on an LSM store each
//! is a point read through the memtables, filters and index blocks of its tables. When a
//! read ([`super::KvBackend::get_ahead`]) asks for a key inside the span the previous one
//! announced, the asks are a walk, and the cache reads the next [`RUN_RECORDS`] records of
//! it in one scan. It keeps them as a run: an interval of keys and every record the store
//! holds in it, answering the walk's next reads until it leaves the interval.
//!
//! A run mirrors the store. A write with subkeys, before the store takes it, removes the
//! keys it deletes from the runs holding them and drops a run that one of its puts falls
//! in (deletes commute, so two writers of one key cannot leave a run disagreeing with the
//! store; a put might); a write the store refuses drops every run. Writers count their
//! writes as they start and end. A scan's records become a run only if no write was under
//! way when it began and none started until it is kept: the writer counts its start before
//! it looks for runs, the reader counts its run before it looks at the starts again (both
//! sequentially consistent, so at least one of the two sees the other).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use super::{BatchOp, ColumnFamily, Direction, KvBackend};
use crate::codec::KeyRange;
use crate::error::Result;

/// The most records one scan reads ahead.
pub const RUN_RECORDS: usize = 512;

/// A scan stops reading ahead past this many bytes of values.
pub const RUN_BYTES: usize = 64 << 10;

/// The most runs kept (the least recently used goes first).
const RUNS: usize = 32;

/// The most spans announced by recent reads kept to recognise a walk.
const HINTS: usize = 64;

/// Every subkey record the store holds in `[start, end)`.
struct Run {
    start: Bytes,
    end: Bytes,
    /// Ascending.
    records: VecDeque<(Bytes, Bytes)>,
    used: u64,
}

impl Run {
    fn holds(&self, key: &[u8]) -> bool {
        self.start.as_ref() <= key && key < self.end.as_ref()
    }

    /// The place of `key` among the records. A walk asks for, and then deletes, the record
    /// at one end: those are looked at first.
    fn find(&self, key: &[u8]) -> Option<usize> {
        let last = self.records.len().checked_sub(1)?;
        if self.records[last].0.as_ref() == key {
            return Some(last);
        }
        if self.records[0].0.as_ref() == key {
            return Some(0);
        }
        self.records.binary_search_by(|(k, _)| k.as_ref().cmp(key)).ok()
    }
}

/// The span a read announced: the keys after `key` up to `bound`, in `direction`.
struct Hint {
    key: Vec<u8>,
    bound: Vec<u8>,
    direction: Direction,
}

impl Hint {
    fn holds(&self, key: &[u8]) -> bool {
        match self.direction {
            Direction::Forward => self.key.as_slice() < key && key < self.bound.as_slice(),
            Direction::Reverse => self.bound.as_slice() <= key && key < self.key.as_slice(),
        }
    }
}

#[derive(Default)]
struct State {
    /// Disjoint, sorted by `start`.
    runs: Vec<Run>,
    hints: VecDeque<Hint>,
    clock: u64,
}

impl State {
    /// The index of the run holding `key`.
    fn run_of(&self, key: &[u8]) -> Option<usize> {
        let i = self.runs.partition_point(|r| r.start.as_ref() <= key).checked_sub(1)?;
        self.runs[i].holds(key).then_some(i)
    }
}

/// What a read of a walk does next (see [`Runs::lookup`]).
pub enum Lookup {
    /// A run answered: the record, or its absence.
    Hit(Option<Bytes>),
    /// The read continues a walk: read ahead.
    Walk,
    /// The first read of a walk, or none: read the key alone.
    Point,
}

/// The runs of one store's subkey column family (see the module docs).
#[derive(Default)]
pub struct Runs {
    state: Mutex<State>,
    /// `state.runs.len()`, for the writers that find none without the lock.
    active: AtomicUsize,
    /// Writes with subkeys started, and ended.
    started: AtomicU64,
    ended: AtomicU64,
}

impl Runs {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the state is held leaves nothing half-written in it.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The answer for `key` from a run, or whether to read ahead. A read that a run does not
    /// answer leaves its span (`key` to `bound` in `direction`) as a hint for the next one.
    pub(crate) fn lookup(&self, key: &[u8], bound: &[u8], direction: Direction) -> Lookup {
        let mut state = self.lock();
        state.clock += 1;
        let now = state.clock;
        if let Some(i) = state.run_of(key) {
            let run = &mut state.runs[i];
            run.used = now;
            return Lookup::Hit(run.find(key).map(|j| run.records[j].1.clone()));
        }
        let walk = state.hints.iter().position(|h| h.holds(key));
        if let Some(i) = walk {
            state.hints.remove(i);
        }
        if state.hints.len() == HINTS {
            state.hints.pop_front();
        }
        state.hints.push_back(Hint { key: key.to_vec(), bound: bound.to_vec(), direction });
        if walk.is_some() { Lookup::Walk } else { Lookup::Point }
    }

    /// Reads `key` and up to [`RUN_RECORDS`] records after it in `direction` toward `bound`
    /// with one scan of `store`, keeps them as a run unless a write of subkeys was under way
    /// meanwhile, and answers `key`. With a write under way as it starts: a point read.
    ///
    /// # Errors
    /// The store's, from its scan; nothing is kept then.
    pub(crate) fn read_ahead<B: KvBackend + ?Sized>(
        &self,
        store: &B,
        key: &[u8],
        bound: &[u8],
        direction: Direction,
    ) -> Result<Option<Bytes>> {
        let ended = self.ended.load(Ordering::SeqCst);
        let since = self.started.load(Ordering::SeqCst);
        let range = match direction {
            Direction::Forward => KeyRange { start: key.to_vec(), end: Some(bound.to_vec()) },
            Direction::Reverse => KeyRange { start: bound.to_vec(), end: Some(successor(key)) },
        };
        if since != ended || range.end.as_ref().is_some_and(|end| *end <= range.start) {
            return store.get(ColumnFamily::Subkey, key);
        }
        let mut records = VecDeque::new();
        let (mut bytes, mut full) = (0, false);
        for pair in store.scan(ColumnFamily::Subkey, &range, direction)? {
            let (k, v) = pair?;
            bytes += v.len();
            records.push_back((k, v));
            if records.len() == RUN_RECORDS || bytes >= RUN_BYTES {
                full = true;
                break;
            }
        }
        let value = records.front().filter(|(k, _)| k.as_ref() == key).map(|(_, v)| v.clone());
        // The scan knows every record of its range, or, when it stopped full, of the part
        // up to the last record it read.
        let farthest = records.back().filter(|_| full).map(|(k, _)| k.clone());
        let (start, end) = (Bytes::from(range.start), Bytes::from(range.end.unwrap_or_default()));
        let (start, end) = match direction {
            Direction::Forward => (start, farthest.map_or(end, |k| successor(&k).into())),
            Direction::Reverse => (farthest.unwrap_or(start), end),
        };
        if direction == Direction::Reverse {
            records.make_contiguous().reverse();
        }
        self.keep(Run { start, end, records, used: 0 }, since);
        Ok(value)
    }

    /// Installs `run`, read after `since` writes started, unless another one started since.
    fn keep(&self, mut run: Run, since: u64) {
        let mut state = self.lock();
        self.active.fetch_add(1, Ordering::SeqCst);
        if self.started.load(Ordering::SeqCst) != since {
            self.active.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        run.used = state.clock;
        state.runs.retain(|r| !(run.start < r.end && r.start < run.end));
        if state.runs.len() == RUNS
            && let Some(oldest) = state.runs.iter().enumerate().min_by_key(|(_, r)| r.used).map(|(i, _)| i)
        {
            state.runs.remove(oldest);
        }
        let at = state.runs.partition_point(|r| r.start < run.start);
        state.runs.insert(at, run);
        self.active.store(state.runs.len(), Ordering::SeqCst);
    }

    /// Before the store takes a batch with subkey records (`ops`, the whole batch): the
    /// runs lose the subkeys it deletes, and a run one of its subkey puts falls in goes.
    pub(crate) fn start_write(&self, ops: &[BatchOp]) {
        self.started.fetch_add(1, Ordering::SeqCst);
        if self.active.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut state = self.lock();
        for op in ops {
            match op {
                BatchOp::Delete { cf: ColumnFamily::Subkey, key } => {
                    if let Some(i) = state.run_of(key) {
                        let run = &mut state.runs[i];
                        if let Some(j) = run.find(key) {
                            run.records.remove(j);
                        }
                    }
                }
                BatchOp::Put { cf: ColumnFamily::Subkey, key, .. } => {
                    if let Some(i) = state.run_of(key) {
                        state.runs.remove(i);
                    }
                }
                _ => {}
            }
        }
        self.active.store(state.runs.len(), Ordering::SeqCst);
    }

    /// Drops every run (the store changed behind them).
    pub(crate) fn clear(&self) {
        let mut state = self.lock();
        state.runs.clear();
        self.active.store(0, Ordering::SeqCst);
    }

    /// After the store took (`written`) or refused a batch [`Runs::start_write`] saw:
    /// after a refusal no run is kept (they may lack records the store still has).
    pub(crate) fn end_write(&self, written: bool) {
        if !written && self.active.load(Ordering::SeqCst) > 0 {
            let mut state = self.lock();
            state.runs.clear();
            self.active.store(0, Ordering::SeqCst);
        }
        self.ended.fetch_add(1, Ordering::SeqCst);
    }
}

/// The first key after `key`.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use proptest::prelude::*;

    use super::*;
    use crate::backend::cached::tests::Counting;
    use crate::backend::{FaultyBackend, MemoryBackend, MetadataCache, WriteBatch};

    fn key(list: u8, i: u32) -> Vec<u8> {
        [&[list][..], &i.to_be_bytes()].concat()
    }

    fn fill<B: KvBackend>(store: &B, list: u8, n: u32) {
        let mut batch = WriteBatch::new();
        for i in 0..n {
            batch.put(ColumnFamily::Subkey, key(list, i), i.to_be_bytes().to_vec());
        }
        store.write(batch).unwrap();
    }

    /// One pop from the tail of `list`, whose elements are `[head, tail)`: the element read,
    /// then deleted.
    fn pop<B: KvBackend>(store: &B, list: u8, head: u32, tail: u32) -> Option<Bytes> {
        let got = store
            .get_ahead(ColumnFamily::Subkey, &key(list, tail - 1), &key(list, head), Direction::Reverse)
            .unwrap();
        let mut batch = WriteBatch::new();
        batch.delete(ColumnFamily::Subkey, key(list, tail - 1));
        store.write(batch).unwrap();
        got
    }

    #[test]
    fn a_walk_reads_the_store_once_per_run() {
        let cache = MetadataCache::new(Counting::default());
        fill(&cache, 1, 1000);
        for tail in (1..=1000).rev() {
            assert_eq!(pop(&cache, 1, 0, tail).as_deref(), Some(&(tail - 1).to_be_bytes()[..]));
        }
        let store = cache.inner();
        // The first pop is a point read; every later one comes from a run of RUN_RECORDS.
        assert_eq!(store.subkey_reads.load(Ordering::Relaxed), 1);
        assert_eq!(store.scans.load(Ordering::Relaxed), 999usize.div_ceil(RUN_RECORDS));
    }

    #[test]
    fn a_key_asked_again_is_no_walk() {
        // A stack: each pop's element pushed back before the next pop asks for it.
        let cache = MetadataCache::new(Counting::default());
        fill(&cache, 1, 100);
        for _ in 0..50 {
            assert!(pop(&cache, 1, 0, 100).is_some());
            fill(&cache, 1, 100);
        }
        let store = cache.inner();
        assert_eq!(
            (store.subkey_reads.load(Ordering::Relaxed), store.scans.load(Ordering::Relaxed)),
            (50, 0)
        );
    }

    #[test]
    fn a_put_in_a_run_drops_it_and_a_delete_leaves_it_exact() {
        let cache = MetadataCache::new(Counting::default());
        fill(&cache, 1, 300);
        pop(&cache, 1, 0, 300);
        pop(&cache, 1, 0, 299); // reads 298..=171 ahead
        let mut batch = WriteBatch::new();
        batch.delete(ColumnFamily::Subkey, key(1, 290));
        cache.write(batch).unwrap();
        let scans = cache.inner().scans.load(Ordering::Relaxed);
        assert_eq!(pop(&cache, 1, 0, 298).as_deref(), Some(&297u32.to_be_bytes()[..]));
        assert_eq!(
            cache.get_ahead(ColumnFamily::Subkey, &key(1, 290), &key(1, 0), Direction::Reverse).unwrap(),
            None
        );
        assert_eq!(cache.inner().scans.load(Ordering::Relaxed), scans, "the run answered");
        let mut batch = WriteBatch::new();
        batch.put(ColumnFamily::Subkey, key(1, 200), &b"new"[..]);
        cache.write(batch).unwrap();
        let got =
            cache.get_ahead(ColumnFamily::Subkey, &key(1, 200), &key(1, 0), Direction::Reverse).unwrap();
        assert_eq!(got.as_deref(), Some(&b"new"[..]));
    }

    #[test]
    fn a_refused_write_leaves_no_run() {
        let cache = MetadataCache::new(FaultyBackend::new(MemoryBackend::new()));
        fill(&cache, 1, 300);
        pop(&cache, 1, 0, 300);
        pop(&cache, 1, 0, 299);
        // The pop of 297 is refused: its element stays in the store, so in what answers.
        cache.inner().fail_write(0);
        let mut batch = WriteBatch::new();
        batch.delete(ColumnFamily::Subkey, key(1, 297));
        assert!(cache.write(batch).is_err());
        let got =
            cache.get_ahead(ColumnFamily::Subkey, &key(1, 297), &key(1, 0), Direction::Reverse).unwrap();
        assert_eq!(got.as_deref(), Some(&297u32.to_be_bytes()[..]));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u8, u32, u8),
        Delete(u8, u32),
        /// Pops `n` from one end of list `l` between `from` and `to`.
        Walk {
            list: u8,
            from: u32,
            to: u32,
            forward: bool,
            n: u32,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..3u8, 0..300u32, any::<u8>()).prop_map(|(l, i, v)| Op::Put(l, i, v)),
            (0..3u8, 0..300u32).prop_map(|(l, i)| Op::Delete(l, i)),
            (0..3u8, 0..300u32, 0..300u32, any::<bool>(), 1..200u32).prop_map(|(list, a, b, forward, n)| {
                Op::Walk { list, from: a.min(b), to: a.max(b) + 1, forward, n }
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Through random writes and walks, every read of a walk answers as the store
        /// behind the cache, a walk's deletes included.
        #[test]
        fn walks_answer_as_the_store(ops in proptest::collection::vec(op(), 1..40)) {
            let cache = MetadataCache::new(MemoryBackend::new());
            for list in 0..3 {
                fill(&cache, list, 300);
            }
            for op in ops {
                let mut batch = WriteBatch::new();
                match op {
                    Op::Put(l, i, v) => batch.put(ColumnFamily::Subkey, key(l, i), vec![v]),
                    Op::Delete(l, i) => batch.delete(ColumnFamily::Subkey, key(l, i)),
                    Op::Walk { list, mut from, mut to, forward, n } => {
                        for _ in 0..n.min(to - from) {
                            let (at, bound, direction) =
                                if forward { (from, to, Direction::Forward) } else { (to - 1, from, Direction::Reverse) };
                            let got = cache.get_ahead(ColumnFamily::Subkey, &key(list, at), &key(list, bound), direction).unwrap();
                            prop_assert_eq!(got, cache.inner().get(ColumnFamily::Subkey, &key(list, at)).unwrap());
                            let mut pop = WriteBatch::new();
                            pop.delete(ColumnFamily::Subkey, key(list, at));
                            cache.write(pop).unwrap();
                            if forward { from += 1 } else { to -= 1 }
                        }
                    }
                }
                cache.write(batch).unwrap();
            }
        }
    }

    /// Readers walk a list while a writer overwrites all of it, generation after
    /// generation: a read never answers an older generation than the last whose write had
    /// ended before the read began (a run read before a write must not outlive it).
    #[test]
    fn a_run_never_answers_what_an_ended_write_replaced() {
        const LEN: u32 = 600;
        let cache = Arc::new(MetadataCache::new(Counting::default()));
        let ended = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let write_generation = |generation: u64| {
            let mut batch = WriteBatch::new();
            for i in 0..LEN {
                batch.put(ColumnFamily::Subkey, key(1, i), generation.to_be_bytes().to_vec());
            }
            batch
        };
        cache.write(write_generation(0)).unwrap();
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (cache, ended, stop) = (cache.clone(), ended.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for tail in (1..=LEN).rev() {
                            let before = ended.load(Ordering::SeqCst);
                            let got = cache
                                .get_ahead(
                                    ColumnFamily::Subkey,
                                    &key(1, tail - 1),
                                    &key(1, 0),
                                    Direction::Reverse,
                                )
                                .unwrap()
                                .expect("every element is there");
                            let generation = u64::from_be_bytes(got.as_ref().try_into().unwrap());
                            assert!(
                                generation >= before,
                                "read generation {generation} after {before} ended"
                            );
                            reads += 1;
                        }
                    }
                    reads
                })
            })
            .collect();
        for generation in 1..=300 {
            cache.write(write_generation(generation)).unwrap();
            ended.store(generation, Ordering::SeqCst);
            // Room for the readers to keep runs between writes.
            for _ in 0..50 {
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        let store = cache.inner();
        let (gets, scans) =
            (store.subkey_reads.load(Ordering::Relaxed) as u64, store.scans.load(Ordering::Relaxed) as u64);
        assert!(
            scans >= 100 && gets + scans < reads / 2,
            "runs answered most reads: {reads} reads, {gets} point reads, {scans} scans"
        );
    }
}
