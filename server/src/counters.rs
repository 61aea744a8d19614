//! The counters INFO reports: per-command calls, times and latency buckets
//! (commandstats, latencystats), error codes (errorstats), totals, and the instantaneous
//! rates.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use rediskv::server::table::{self, CommandInfo};

use crate::sync::lock;

/// At most this many INFO commandstats entries (and errorstats codes, as Redis' 128).
pub const MAX_STAT_ENTRIES: usize = 1024;

/// A sum kept in lanes as [`CommandStats`]' counters: one per event loop, whose only writer
/// is that loop (it adds with a plain load and store, no locked instruction on the command
/// path), and a last one that the other threads add to atomically. Read, it is their sum.
#[derive(Debug)]
pub struct LaneSum {
    lanes: Box<[PaddedCounter]>,
}

/// A counter on a cache line of its own, so that two loops' lanes do not share one.
#[derive(Debug, Default)]
#[repr(align(64))]
struct PaddedCounter(AtomicU64);

impl Default for LaneSum {
    fn default() -> Self {
        LaneSum::with_lanes(1)
    }
}

impl LaneSum {
    /// A sum of zero in `lanes` lanes (at least one); each but the last must have one
    /// writing thread.
    pub fn with_lanes(lanes: usize) -> LaneSum {
        LaneSum { lanes: (0..lanes.max(1)).map(|_| PaddedCounter::default()).collect() }
    }

    /// The lane of the threads that are not event loops.
    pub fn shared_lane(&self) -> usize {
        self.lanes.len() - 1
    }

    /// Adds `n` (wrapping: a two's complement delta subtracts) in `lane` (an event loop's
    /// index; [`LaneSum::shared_lane`], or any index past it, for other threads).
    pub fn add(&self, lane: usize, n: u64) {
        let lane = lane.min(self.shared_lane());
        let counter = &self.lanes[lane].0;
        if lane == self.shared_lane() {
            counter.fetch_add(n, Relaxed);
        } else {
            counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
        }
    }

    /// Zeroes every lane (CONFIG RESETSTAT; an add racing with it may survive it).
    pub fn reset(&self) {
        self.lanes.iter().for_each(|l| l.0.store(0, Relaxed));
    }

    /// The sum of the lanes.
    pub fn sum(&self) -> u64 {
        self.lanes.iter().map(|l| l.0.load(Relaxed)).fold(0, u64::wrapping_add)
    }
}

/// Per-command counters (INFO commandstats).
#[derive(Debug, Clone, Copy)]
pub struct CommandStat {
    /// Times the command ran.
    pub calls: u64,
    /// Microseconds spent running it.
    pub usec: u64,
    /// Refused before running (arity, auth, pause…).
    pub rejected: u64,
    /// Ran and answered an error.
    pub failed: u64,
    /// Calls per latency bucket: bucket `i` counts calls of at most `2^i` µs (over
    /// `2^(i-1)`), as LATENCY HISTOGRAM reports them.
    pub buckets: [u64; LATENCY_BUCKETS],
}

impl Default for CommandStat {
    fn default() -> Self {
        CommandStat { calls: 0, usec: 0, rejected: 0, failed: 0, buckets: [0; LATENCY_BUCKETS] }
    }
}

/// Latency buckets per command: powers of two from 1 µs to about 36 minutes.
pub const LATENCY_BUCKETS: usize = 32;

/// The bucket of a call of `usec` µs.
fn latency_bucket(usec: u64) -> usize {
    let bits = (u64::BITS - usec.saturating_sub(1).leading_zeros()) as usize;
    bits.min(LATENCY_BUCKETS - 1)
}

/// INFO commandstats and the totals every command moves (commands processed, keyspace
/// hits and misses): lock-free counters for every command of the library's table (every
/// command passes here), a locked map for the few other names. The counters are kept per
/// lane, one per event loop and one for the other threads, and summed when read: an event
/// loop's lane has that loop as its only writer, which adds with a plain load and store
/// (no locked instruction on the command path); the other threads' lane adds atomically.
#[derive(Debug)]
pub struct CommandStats {
    lanes: Box<[Lane]>,
    other: Mutex<BTreeMap<String, CommandStat>>,
    /// `latency-tracking`: whether calls fill the latency buckets.
    pub tracking: AtomicBool,
}

/// One lane's counters: per table row, calls, µs, rejected and failed, and latency buckets;
/// and the lane's commands processed, keyspace hits and keyspace misses.
#[derive(Debug)]
struct Lane {
    rows: Box<[[AtomicU64; 4]]>,
    buckets: Box<[[AtomicU64; LATENCY_BUCKETS]]>,
    totals: [AtomicU64; 3],
    /// Written by several threads (the last lane): adds must be atomic.
    shared: bool,
}

/// [`Lane::totals`]' indexes.
const PROCESSED: usize = 0;
const HITS: usize = 1;
const MISSES: usize = 2;

impl Lane {
    fn add(&self, counter: &AtomicU64, n: u64) {
        if self.shared {
            counter.fetch_add(n, Relaxed);
        } else {
            counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
        }
    }

    fn add_row(&self, row: usize, delta: [u64; 4], bucket: Option<usize>) {
        for (counter, n) in self.rows[row].iter().zip(delta) {
            if n > 0 {
                self.add(counter, n);
            }
        }
        if let Some(b) = bucket {
            self.add(&self.buckets[row][b], 1);
        }
    }

    fn new(shared: bool) -> Lane {
        let rows = table::all().iter().map(|_| Default::default()).collect();
        let buckets = table::all().iter().map(|_| std::array::from_fn(|_| AtomicU64::new(0))).collect();
        Lane { rows, buckets, totals: Default::default(), shared }
    }
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats::with_lanes(1)
    }
}

impl CommandStats {
    /// Counters in `lanes` lanes (at least one): [`CommandStats::count`]'s `lane` past the
    /// last is the last, and each but the last must have one writing thread.
    pub fn with_lanes(lanes: usize) -> CommandStats {
        let lanes = lanes.max(1);
        let lanes = (0..lanes).map(|i| Lane::new(i + 1 == lanes)).collect();
        CommandStats { lanes, other: Mutex::default(), tracking: AtomicBool::new(true) }
    }

    /// How many lanes: the last one is for the threads that are not event loops.
    pub fn lanes(&self) -> usize {
        self.lanes.len()
    }

    /// Counts one command processed and one call of the command of row `info` (`None` µs:
    /// refused before running) in `lane` (an event loop's index; [`CommandStats::lanes`] − 1
    /// for other threads).
    pub fn count(&self, lane: usize, info: &CommandInfo, usec: Option<u64>, failed: bool) {
        // calls, µs, rejected, failed
        let delta = match usec {
            None => [0, 0, 1, 0],
            Some(usec) => [1, usec, 0, u64::from(failed)],
        };
        let bucket = usec.filter(|_| self.tracking.load(Relaxed)).map(latency_bucket);
        let lane = &self.lanes[lane.min(self.lanes.len() - 1)];
        lane.add(&lane.totals[PROCESSED], 1);
        match info.position() {
            Some(row) => lane.add_row(row, delta, bucket),
            None => self.add(info.name, delta, bucket, MAX_STAT_ENTRIES),
        }
    }

    /// Counts like [`CommandStats::count`] into `pending`, for a command of row `row` of
    /// the table, adding what `pending` held for another row to `lane` first.
    pub fn count_pending(
        &self,
        lane: usize,
        pending: &mut PendingCounts,
        row: usize,
        usec: u64,
        failed: bool,
    ) {
        if pending.row != row {
            self.flush(lane, pending);
            pending.row = row;
        }
        pending.processed += 1;
        pending.delta[0] += 1;
        pending.delta[1] += usec;
        pending.delta[3] += u64::from(failed);
        if self.tracking.load(Relaxed) {
            let bucket = latency_bucket(usec);
            pending.buckets[bucket] += 1;
            pending.touched |= 1 << bucket;
        }
    }

    /// Adds what `pending` holds to `lane` (as [`CommandStats::count`]) and empties it.
    pub fn flush(&self, lane: usize, pending: &mut PendingCounts) {
        if pending.processed == 0 && pending.hits == 0 && pending.misses == 0 {
            return;
        }
        let lane = &self.lanes[lane.min(self.lanes.len() - 1)];
        for (which, n) in [(PROCESSED, pending.processed), (HITS, pending.hits), (MISSES, pending.misses)] {
            if n > 0 {
                lane.add(&lane.totals[which], n);
            }
        }
        let row = pending.row;
        if row < lane.rows.len() {
            lane.add_row(row, pending.delta, None);
            let mut touched = pending.touched;
            while touched != 0 {
                let bucket = touched.trailing_zeros() as usize;
                touched &= touched - 1;
                lane.add(&lane.buckets[row][bucket], pending.buckets[bucket]);
                pending.buckets[bucket] = 0;
            }
        }
        pending.row = usize::MAX;
        pending.delta = [0; 4];
        pending.touched = 0;
        pending.processed = 0;
        pending.hits = 0;
        pending.misses = 0;
    }

    /// Counts a read command's keyspace `hits` and `misses` into `pending`.
    pub fn keyspace_pending(pending: &mut PendingCounts, hits: u64, misses: u64) {
        pending.hits += hits;
        pending.misses += misses;
    }

    /// Counts a failure of a call counted when it blocked (its answer, when served, was an
    /// error: an XREADGROUP whose group was destroyed).
    pub fn count_failure(&self, name: &str) {
        self.add(name, [0, 0, 0, 1], None, MAX_STAT_ENTRIES);
    }

    fn add(&self, name: &str, delta: [u64; 4], bucket: Option<usize>, max_other: usize) {
        if let Some(row) = table::position(name) {
            let other_threads = &self.lanes[self.lanes.len() - 1];
            return other_threads.add_row(row, delta, bucket);
        }
        let mut other = lock(&self.other);
        if !other.contains_key(name) && other.len() >= max_other {
            return;
        }
        let s = other.entry(name.to_string()).or_default();
        s.calls += delta[0];
        s.usec += delta[1];
        s.rejected += delta[2];
        s.failed += delta[3];
        if let Some(b) = bucket {
            s.buckets[b] += 1;
        }
    }

    /// Every counted command, by name.
    pub fn snapshot(&self) -> BTreeMap<String, CommandStat> {
        let mut all = lock(&self.other).clone();
        for (i, info) in table::all().iter().enumerate() {
            let sum = |k: usize| self.lanes.iter().map(|l| l.rows[i][k].load(Relaxed)).sum::<u64>();
            let [calls, usec, rejected, failed] = [0, 1, 2, 3].map(sum);
            if calls + rejected > 0 {
                let buckets = [0; LATENCY_BUCKETS];
                all.insert(info.name.to_string(), CommandStat { calls, usec, rejected, failed, buckets });
            }
        }
        all
    }

    /// Every command whose latency was tracked: its tracked calls and their buckets.
    pub fn histograms(&self) -> BTreeMap<String, (u64, [u64; LATENCY_BUCKETS])> {
        let mut all: BTreeMap<String, (u64, [u64; LATENCY_BUCKETS])> = lock(&self.other)
            .iter()
            .map(|(name, s)| (name.clone(), (s.buckets.iter().sum(), s.buckets)))
            .collect();
        for (i, info) in table::all().iter().enumerate() {
            let buckets: [u64; LATENCY_BUCKETS] =
                std::array::from_fn(|b| self.lanes.iter().map(|l| l.buckets[i][b].load(Relaxed)).sum());
            all.insert(info.name.to_string(), (buckets.iter().sum(), buckets));
        }
        all.retain(|_, (calls, _)| *calls > 0);
        all
    }

    /// Counts a read command's keyspace `hits` and `misses` in `lane` (as [`CommandStats::count`]).
    pub fn keyspace(&self, lane: usize, hits: u64, misses: u64) {
        let lane = &self.lanes[lane.min(self.lanes.len() - 1)];
        lane.add(&lane.totals[HITS], hits);
        lane.add(&lane.totals[MISSES], misses);
    }

    fn total(&self, which: usize) -> u64 {
        self.lanes.iter().map(|l| l.totals[which].load(Relaxed)).fold(0, u64::wrapping_add)
    }

    /// Commands processed (INFO's `total_commands_processed`): every call [`CommandStats::count`] counted.
    pub fn processed(&self) -> u64 {
        self.total(PROCESSED)
    }

    /// Keyspace hits and misses (INFO's `keyspace_hits`, `keyspace_misses`).
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (self.total(HITS), self.total(MISSES))
    }

    fn reset(&self) {
        for lane in &self.lanes {
            lane.rows.iter().flatten().for_each(|c| c.store(0, Relaxed));
            lane.buckets.iter().flatten().for_each(|c| c.store(0, Relaxed));
            lane.totals.iter().for_each(|c| c.store(0, Relaxed));
        }
        lock(&self.other).clear();
    }
}

/// One client's counts not added to its event loop's lane yet: the calls of the table row
/// it ran last, their latency buckets, and its commands processed and keyspace hits and
/// misses. A client running a pipeline of one command adds them once per batch of
/// requests instead of once per command ([`CommandStats::count_pending`]); it adds them
/// ([`CommandStats::flush`]) before anything that may read the counters runs.
#[derive(Debug)]
pub struct PendingCounts {
    /// The row the calls are of (`usize::MAX`: none).
    row: usize,
    /// Calls, µs, rejected and failed of `row`.
    delta: [u64; 4],
    /// Calls per latency bucket of `row`; `touched` has a bit per bucket that holds some.
    buckets: [u64; LATENCY_BUCKETS],
    touched: u32,
    processed: u64,
    hits: u64,
    misses: u64,
}

impl Default for PendingCounts {
    fn default() -> Self {
        PendingCounts {
            row: usize::MAX,
            delta: [0; 4],
            buckets: [0; LATENCY_BUCKETS],
            touched: 0,
            processed: 0,
            hits: 0,
            misses: 0,
        }
    }
}

/// Counters INFO reports; CONFIG RESETSTAT zeroes them.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections_received: AtomicU64,
    /// Connections refused (maxclients).
    pub rejected_connections: AtomicU64,
    /// Bytes read from clients, in a lane per event loop.
    pub net_input: LaneSum,
    /// Bytes written to clients, in a lane per event loop.
    pub net_output: LaneSum,
    /// Error replies sent.
    pub error_replies: AtomicU64,
    /// Per command name (`config|get` for subcommands).
    pub commands: CommandStats,
    /// Error replies by their first word (`ERR`, `WRONGTYPE`…).
    pub errors: Mutex<BTreeMap<String, u64>>,
    /// Deleted big collections whose records the collector has reclaimed
    /// ([`MaintStats::lazyfree_credited`]).
    pub lazyfreed_objects: AtomicU64,
}

impl Stats {
    /// Gives the counters kept in lanes a lane per event loop and one for the other
    /// threads (`lanes` in all).
    pub fn set_lanes(&mut self, lanes: usize) {
        let tracking = self.commands.tracking.load(Relaxed);
        self.commands = CommandStats::with_lanes(lanes);
        self.commands.tracking.store(tracking, Relaxed);
        self.net_input = LaneSum::with_lanes(lanes);
        self.net_output = LaneSum::with_lanes(lanes);
    }

    /// Zeroes every counter.
    pub fn reset(&self) {
        for c in [
            &self.connections_received,
            &self.rejected_connections,
            &self.error_replies,
            &self.lazyfreed_objects,
        ] {
            c.store(0, Relaxed);
        }
        self.net_input.reset();
        self.net_output.reset();
        self.commands.reset();
        lock(&self.errors).clear();
    }

    /// Counts one error reply under its first word (`ERR`, `WRONGTYPE`…). Redis stops
    /// adding error codes past 128 distinct ones; so does this.
    pub fn error(&self, text: &str) {
        self.error_replies.fetch_add(1, Relaxed);
        let code = text.split(' ').next().unwrap_or("ERR");
        let mut errors = lock(&self.errors);
        if let Some(n) = errors.get_mut(code) {
            *n += 1;
        } else if errors.len() < 128 {
            errors.insert(code.to_string(), 1);
        }
    }
}

/// Redis' instantaneous metrics: per-second rates over the last 16 ticks.
#[derive(Debug)]
pub struct Sampler {
    at: Instant,
    /// Commands, input bytes, output bytes at the last sample.
    last: [u64; 3],
    /// Per-second rates of the last 16 samples, for each of the three.
    rates: [[u64; 16]; 3],
    next: usize,
}

impl Sampler {
    /// No samples yet.
    pub fn new() -> Sampler {
        Sampler { at: Instant::now(), last: [0; 3], rates: [[0; 16]; 3], next: 0 }
    }

    /// Takes one sample of the counters (commands, input bytes, output bytes).
    pub fn sample(&mut self, now: [u64; 3]) {
        let elapsed = self.at.elapsed().as_millis() as u64;
        if elapsed == 0 {
            return;
        }
        for ((rates, now), last) in self.rates.iter_mut().zip(now).zip(self.last) {
            rates[self.next] = now.saturating_sub(last) * 1000 / elapsed;
        }
        self.last = now;
        self.at = Instant::now();
        self.next = (self.next + 1) % 16;
    }

    /// The mean rate of counter `i` (0 commands, 1 input bytes, 2 output bytes) per second.
    pub fn rate(&self, i: usize) -> u64 {
        self.rates[i].iter().sum::<u64>() / 16
    }
}

/// What INFO reports of maintenance.
#[derive(Debug, Default)]
pub struct MaintStats {
    /// Keys deleted by active expiry.
    pub expired_keys: AtomicU64,
    /// Metadata records the expiry sweep read.
    pub expire_examined: AtomicU64,
    /// Records the collector examined.
    pub gc_examined: AtomicU64,
    /// Records the collector deleted.
    pub gc_collected: AtomicU64,
    /// Complete collector passes.
    pub gc_passes: AtomicU64,
    /// [`crate::state::State::deferred_frees`] when the last complete collector pass
    /// started: the big collections deleted before it have had their records reclaimed
    /// (INFO's `lazyfreed_objects` counts them; `lazyfree_pending_objects` the ones after).
    pub lazyfree_credited: AtomicU64,
    /// Where the collector is: `subkey` or `score`, and the first key it examines next, hex.
    pub gc_position: std::sync::Mutex<String>,
    /// Bumped by commands that may have left garbage.
    pub garbage_hint: AtomicU64,
    /// Bumped by FLUSHDB and FLUSHALL: whatever a disk store's memtables hold may be garbage.
    pub flushes: AtomicU64,
    /// Bumped by commands that may have set a TTL.
    pub ttl_hint: AtomicU64,
    /// Whether this node swept at its last tick (always, unless nodes share the store and
    /// another holds the maintenance lease).
    pub leader: AtomicBool,
}

/// `maxmemory-policy`: which keys eviction may pick, and how it ranks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Evict nothing: writes get OOM.
    NoEviction,
    /// Any key, least recently used first.
    AllkeysLru,
    /// Any key, least frequently used first.
    AllkeysLfu,
    /// Any key, at random.
    AllkeysRandom,
    /// Keys with a TTL, least recently used first.
    VolatileLru,
    /// Keys with a TTL, least frequently used first.
    VolatileLfu,
    /// Keys with a TTL, at random.
    VolatileRandom,
    /// Keys with a TTL, nearest expiry first.
    VolatileTtl,
}

impl Policy {
    const ALL: [(&'static str, Policy); 8] = [
        ("noeviction", Policy::NoEviction),
        ("allkeys-lru", Policy::AllkeysLru),
        ("allkeys-lfu", Policy::AllkeysLfu),
        ("allkeys-random", Policy::AllkeysRandom),
        ("volatile-lru", Policy::VolatileLru),
        ("volatile-lfu", Policy::VolatileLfu),
        ("volatile-random", Policy::VolatileRandom),
        ("volatile-ttl", Policy::VolatileTtl),
    ];

    /// The policy a `maxmemory-policy` value names (noeviction for anything else).
    pub fn parse(name: &str) -> Policy {
        Policy::ALL.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map_or(Policy::NoEviction, |(_, p)| *p)
    }

    fn index(self) -> u8 {
        Policy::ALL.iter().position(|(_, p)| *p == self).unwrap_or(0) as u8
    }

    /// Whether access frequencies rank the keys (keys keep LFU counters then).
    pub fn lfu(self) -> bool {
        matches!(self, Policy::AllkeysLfu | Policy::VolatileLfu)
    }

    /// Whether only keys with a TTL may go.
    pub fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru | Policy::VolatileLfu | Policy::VolatileRandom | Policy::VolatileTtl
        )
    }

    /// Whether the key is drawn at random rather than ranked.
    pub fn random(self) -> bool {
        matches!(self, Policy::AllkeysRandom | Policy::VolatileRandom)
    }
}

/// A ranked eviction candidate (Redis' eviction pool entry).
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Higher goes first: idle seconds, `255 - counter`, or `u64::MAX - expiry`.
    pub score: u64,
    /// The namespace of its engine.
    pub namespace: Vec<u8>,
    /// Its database.
    pub db: usize,
    /// The key.
    pub key: bytes::Bytes,
}

/// Redis' `EVPOOL_SIZE`: the best candidates kept between samples.
pub const POOL_SIZE: usize = 16;

/// What eviction keeps between passes.
#[derive(Debug, Default)]
pub struct Eviction {
    policy: std::sync::atomic::AtomicU8,
    /// Keys evicted (INFO `evicted_keys`).
    pub evicted_keys: AtomicU64,
    /// The best candidates seen so far, worst first.
    pub pool: Mutex<Vec<Candidate>>,
    /// Bytes of evicted collections the collector has not dropped yet, each with the
    /// collector pass count after which it has (a whole pass started after the eviction).
    pub pending: Mutex<std::collections::VecDeque<(u64, u64)>>,
    /// The next (engine, database) a random policy draws from.
    pub next_db: std::sync::atomic::AtomicUsize,
    /// One eviction pass at a time.
    pub running: Mutex<()>,
    /// Since when memory has been over the limit, if it is (INFO
    /// `current_eviction_exceeded_time`).
    pub exceeded_since: Mutex<Option<Instant>>,
    /// Microseconds over the limit in past episodes (`total_eviction_exceeded_time`).
    pub exceeded_total: AtomicU64,
    /// Whether `exceeded_since` is set.
    over: AtomicBool,
}

impl Eviction {
    /// The policy in force.
    pub fn policy(&self) -> Policy {
        Policy::ALL[usize::from(self.policy.load(Relaxed)).min(7)].1
    }

    /// Sets the policy; the pool's ranks mean something else under another one.
    pub fn set_policy(&self, policy: Policy) {
        if self.policy.swap(policy.index(), Relaxed) != policy.index() {
            lock(&self.pool).clear();
        }
    }

    /// Bytes evicted collections still hold, given the collector's completed passes.
    pub fn pending_bytes(&self, passes: u64) -> u64 {
        let mut pending = lock(&self.pending);
        pending.retain(|(after, _)| passes < *after);
        pending.iter().map(|(_, bytes)| bytes).sum()
    }

    /// Records whether memory is over the limit now.
    pub fn exceeded(&self, over: bool) {
        // Every command under a maxmemory tells: the lock only for a change.
        if self.over.load(Relaxed) == over {
            return;
        }
        let mut since = lock(&self.exceeded_since);
        self.over.store(over, Relaxed);
        match (over, *since) {
            (true, None) => *since = Some(Instant::now()),
            (false, Some(at)) => {
                self.exceeded_total.fetch_add(at.elapsed().as_micros() as u64, Relaxed);
                *since = None;
            }
            _ => {}
        }
    }

    /// CONFIG RESETSTAT: `evicted_keys` and the time over the limit start again.
    pub fn reset_stats(&self) {
        self.evicted_keys.store(0, Relaxed);
        self.exceeded_total.store(0, Relaxed);
        let mut since = lock(&self.exceeded_since);
        if since.is_some() {
            *since = Some(Instant::now());
        }
    }

    /// `total_eviction_exceeded_time` and `current_eviction_exceeded_time`, in ms.
    pub fn exceeded_ms(&self) -> (u64, u64) {
        let current = lock(&self.exceeded_since).map_or(0, |at| at.elapsed().as_micros() as u64);
        ((self.exceeded_total.load(Relaxed) + current) / 1000, current / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_summed_when_read() {
        let stats = CommandStats::with_lanes(3);
        let get = table::find(&[bytes::Bytes::from_static(b"GET")]).ok().unwrap();
        stats.count(0, get, Some(3), false);
        stats.count(1, get, Some(5), true);
        stats.count(7, get, None, false);
        stats.add("get", [0, 0, 0, 1], None, MAX_STAT_ENTRIES);
        let got = stats.snapshot()["get"];
        assert_eq!((got.calls, got.usec, got.rejected, got.failed), (2, 8, 1, 2));
        let (calls, buckets) = stats.histograms()["get"];
        assert_eq!((calls, buckets[2], buckets[3]), (2, 1, 1), "3 µs and 5 µs calls");
        stats.keyspace(1, 2, 1);
        assert_eq!((stats.processed(), stats.hits_and_misses()), (3, (2, 1)));
        stats.reset();
        assert!(stats.snapshot().is_empty());
        assert_eq!((stats.processed(), stats.hits_and_misses()), (0, (0, 0)));
    }

    /// Counts held back in a client's pending counts, flushed when another row comes and at
    /// the end, add up to what counting each call at once adds.
    #[test]
    fn pending_counts_add_up_to_direct_counts() {
        let find =
            |name: &'static str| table::find(&[bytes::Bytes::from_static(name.as_bytes())]).ok().unwrap();
        let (get, set) = (find("GET"), find("SET"));
        let calls = [(get, 1, false), (get, 3, false), (get, 3000, true), (set, 5, false), (get, 0, false)];
        let (direct, held) = (CommandStats::with_lanes(2), CommandStats::with_lanes(2));
        let mut pending = PendingCounts::default();
        for (info, usec, failed) in calls {
            direct.count(0, info, Some(usec), failed);
            held.count_pending(0, &mut pending, info.position().unwrap(), usec, failed);
        }
        direct.keyspace(0, 2, 1);
        CommandStats::keyspace_pending(&mut pending, 2, 1);
        assert_eq!(held.snapshot()["set"].calls, 1, "GET's and SET's were flushed when the row changed");
        assert_eq!(held.processed(), 4);
        held.flush(0, &mut pending);
        let view = |s: &CommandStats| {
            let snap: Vec<_> =
                s.snapshot().into_iter().map(|(n, c)| (n, c.calls, c.usec, c.rejected, c.failed)).collect();
            (snap, s.histograms(), s.processed(), s.hits_and_misses())
        };
        assert_eq!(view(&held), view(&direct));
        held.flush(0, &mut pending);
        assert_eq!(view(&held), view(&direct), "a second flush adds nothing");
    }

    /// Each event loop writes its own lane while several other threads share the last one:
    /// no count is lost.
    #[test]
    fn concurrent_counts_are_all_kept() {
        const N: u64 = 20_000;
        let stats = CommandStats::with_lanes(3);
        let get = table::find(&[bytes::Bytes::from_static(b"GET")]).ok().unwrap();
        std::thread::scope(|s| {
            for lane in [0, 1, 2, 2, 2] {
                let stats = &stats;
                s.spawn(move || {
                    for _ in 0..N {
                        stats.count(lane, get, Some(1), false);
                        stats.keyspace(lane, 1, 0);
                    }
                });
            }
        });
        assert_eq!(stats.processed(), 5 * N);
        assert_eq!(stats.hits_and_misses(), (5 * N, 0));
        assert_eq!(stats.snapshot()["get"].calls, 5 * N);
    }

    /// Each loop adds and subtracts in its own lane, three threads share the last one: the
    /// sum is exact.
    #[test]
    fn lane_sums_keep_every_delta() {
        const N: u64 = 20_000;
        let sum = LaneSum::with_lanes(3);
        assert_eq!(sum.shared_lane(), 2);
        std::thread::scope(|s| {
            for lane in [0, 1, 2, 2, 2] {
                let sum = &sum;
                s.spawn(move || {
                    for i in 0..N {
                        sum.add(lane, 3);
                        if i % 2 == 0 {
                            sum.add(lane, 0u64.wrapping_sub(2));
                        }
                    }
                });
            }
        });
        assert_eq!(sum.sum(), 5 * (3 * N - N));
        sum.add(7, 1);
        assert_eq!(sum.sum(), 5 * 2 * N + 1, "lane 7 is the shared lane");
    }
}
