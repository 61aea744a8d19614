//! Eviction (`maxmemory-policy`), as Redis 7.0's `performEvictions`: before a command runs,
//! and after CONFIG SET, while the memory store is over `maxmemory`, keys go one at a time
//! until the excess is freed, nothing is left to evict (deny-oom commands then get OOM), or
//! the time `maxmemory-eviction-tenacity` allows has passed (the maintenance thread carries
//! on at its next tick).
//!
//! Which key: the random policies draw one from the next database in turn; the others
//! sample `maxmemory-samples` keys of every database (read in key order from a random
//! point: [`rediskv::Engine::eviction_sample`]) into a pool of the 16 best candidates
//! kept between passes, and evict the best: the longest idle (LRU), the lowest access
//! counter (LFU) or the nearest expiry (volatile-ttl). Volatile policies look only at keys
//! with a TTL, found among at most [`VOLATILE_VISITS`] records per sample.
//!
//! A key is evicted as DEL deletes it ([`rediskv::Engine::evict`]: its metadata
//! record, one batch, O(1) for a collection), then announced: the `evicted` keyspace event,
//! the tracking invalidations (a client's own before its reply), INFO `evicted_keys`. An
//! evicted collection's records stay until the collector drops them, as Redis' lazily freed
//! objects: their estimated bytes are not counted against `maxmemory` meanwhile.
//!
//! Over a disk engine the memory counted is what the engine holds
//! ([`crate::store::Store::used_bytes`]): a pass first writes its memtables to its tables
//! (freeing memory without losing keys), and evicts only if memory stays over. A deleted
//! key's records leave memory only at the engine's next flush, so a pass there evicts until
//! nothing is left or its time runs out: keep `maxmemory` above the block cache's capacity
//! and the key filter. Over etcd `maxmemory` does not apply.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rediskv::server::Event;

use crate::client_info::ClientInfo;
use crate::counters::{Candidate, POOL_SIZE, Policy};
use crate::state::{SharedEngine, State};
use crate::sync::lock;

/// Records a volatile policy's sample visits at most, looking for keys with a TTL.
pub const VOLATILE_VISITS: usize = 1024;

/// Redis' `evictionTimeLimitUs`: 50 µs per step of tenacity up to 10, then 15% more per
/// step; none at 100.
fn time_limit(tenacity: i64) -> Duration {
    match tenacity {
        ..=10 => Duration::from_micros(50 * tenacity.max(0) as u64),
        11..=99 => Duration::from_micros((500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64),
        _ => Duration::MAX,
    }
}

/// Takes `maxmemory-policy`, `lfu-log-factor` and `lfu-decay-time` from the configuration
/// (at start and after CONFIG SET): under an LFU policy the engines keep access counters.
pub fn configure(state: &State) {
    let policy = Policy::parse(state.config().get("maxmemory-policy"));
    state.eviction.set_policy(policy);
    let lfu = lfu_params(state, policy);
    for engine in state.engines() {
        engine.set_lfu(lfu);
    }
}

/// What [`rediskv::Engine::set_lfu`] takes under `policy`.
pub fn lfu_params(state: &State, policy: Policy) -> Option<(u32, u32)> {
    let config = state.config();
    let param = |name| config.number(name).clamp(0, i64::from(u32::MAX)) as u32;
    policy.lfu().then(|| (param("lfu-log-factor"), param("lfu-decay-time")))
}

/// Evicts keys while memory is over `maxmemory` (see the module docs). True when it stays
/// over with nothing left to evict (or under `noeviction`): deny-oom commands are refused.
/// `me` is the client about to run a command: its own invalidations go to `own`, to be
/// written before its reply.
pub fn perform(state: &State, me: Option<&ClientInfo>, own: &mut Vec<u8>) -> bool {
    let max = state.maxmemory.load(Relaxed);
    // During CLIENT PAUSE the dataset stays as it is (and nothing is refused), as in Redis.
    if max == 0 || !state.store.limits_memory() || state.expiry_paused() {
        return false;
    }
    // A replica's keys go when its primary says (`replica-ignore-maxmemory yes`).
    if state.link.is_replica() && state.config().get("replica-ignore-maxmemory") == "yes" {
        return false;
    }
    let eviction = &state.eviction;
    let over = |used: u64| {
        eviction.exceeded(used > max);
        used > max
    };
    if !over(crate::info::used_memory(state)) {
        return false;
    }
    // A disk engine's memtables go to its tables (nothing to do in memory).
    if let Err(e) = state.store.sync() {
        crate::log::warning!("Flush for maxmemory failed: {e}");
    }
    if !over(crate::info::used_memory(state)) {
        return false;
    }
    let policy = eviction.policy();
    if policy == Policy::NoEviction {
        return true;
    }
    let _one = lock(&eviction.running);
    let used = crate::info::used_memory(state);
    if !over(used) {
        return false;
    }
    let (limit, samples) = {
        let config = state.config();
        (
            time_limit(config.number("maxmemory-eviction-tenacity")),
            config.number("maxmemory-samples").clamp(1, 64) as usize,
        )
    };
    let started = Instant::now();
    let to_free = used - max;
    let (mut freed, mut evicted, mut ghosts) = (0, 0u64, 0);
    let stuck = loop {
        if freed >= to_free {
            break false;
        }
        let Some(candidate) = pick(state, policy, samples) else { break true };
        let Some(engine) =
            state.engines().into_iter().find(|e| e.layout().namespace() == candidate.namespace)
        else {
            continue;
        };
        let before = state.store.used_bytes();
        let left = match engine.evict(candidate.db, &candidate.key) {
            Ok(Some(left)) => left,
            Ok(None) => {
                // A key deleted since it was sampled: try the next.
                ghosts += 1;
                if ghosts > 4 * POOL_SIZE {
                    break true;
                }
                continue;
            }
            Err(e) => {
                crate::log::warning!("Eviction failed: {e}");
                break true;
            }
        };
        freed += before.saturating_sub(state.store.used_bytes()) + left;
        if left > 0 {
            // Dropped by the first collector pass that starts after this one.
            let passes = state.maint.gc_passes.load(Relaxed);
            lock(&eviction.pending).push_back((passes + 2, left));
            state.maint.garbage_hint.fetch_add(1, Relaxed);
        }
        announce(state, &engine, candidate.db, candidate.key, me, own);
        evicted += 1;
        if evicted % 16 == 0 && started.elapsed() > limit {
            break false;
        }
    };
    state.latency.observe("eviction-cycle", started.elapsed().as_micros() as u64);
    stuck
}

/// The evicted key's event, invalidations and count.
fn announce(
    state: &State,
    engine: &SharedEngine,
    db: usize,
    key: Bytes,
    me: Option<&ClientInfo>,
    own: &mut Vec<u8>,
) {
    state.eviction.evicted_keys.fetch_add(1, Relaxed);
    if state.tracking.active() {
        let mut to = crate::tracking::Delivery { me, own };
        let keys = [key.clone()];
        state.tracking.invalidate_evicted(state.peers(), engine.layout().namespace(), &keys, &mut to);
    }
    crate::notify::publish(state, &[Event::evicted(db, key)]);
}

/// The databases with keys (with keys with a TTL for a volatile policy), of every engine.
fn targets(state: &State, volatile: bool) -> Vec<(Arc<SharedEngine>, usize)> {
    let databases = state.config().number("databases").clamp(1, rediskv::DATABASES as i64) as usize;
    let mut all = Vec::new();
    for engine in state.engines() {
        for db in 0..databases {
            // No counts (a shared store): sample anyway.
            let wanted = match engine.key_count(db) {
                Ok(Some(count)) => (if volatile { count.expires } else { count.keys }) > 0,
                Ok(None) => true,
                Err(_) => false,
            };
            if wanted {
                all.push((engine.clone(), db));
            }
        }
    }
    all
}

/// The next key to evict under `policy`, `None` when there is none.
fn pick(state: &State, policy: Policy, samples: usize) -> Option<Candidate> {
    let volatile = policy.volatile();
    let visits = if volatile { VOLATILE_VISITS } else { samples * 10 };
    let targets = targets(state, volatile);
    if targets.is_empty() {
        return None;
    }
    let candidate = |engine: &SharedEngine, db, sampled: rediskv::server::Sampled| Candidate {
        score: match policy {
            Policy::AllkeysLfu | Policy::VolatileLfu => 255 - u64::from(sampled.freq),
            Policy::VolatileTtl => u64::MAX - sampled.expire_ms,
            _ => sampled.idle_secs,
        },
        namespace: engine.layout().namespace().to_vec(),
        db,
        key: sampled.key,
    };
    if policy.random() {
        let first = state.eviction.next_db.fetch_add(1, Relaxed);
        for i in 0..targets.len() {
            let (engine, db) = &targets[(first + i) % targets.len()];
            if let Some(sampled) = engine.eviction_sample(*db, 1, volatile, visits).ok()?.pop() {
                return Some(candidate(engine, *db, sampled));
            }
        }
        return None;
    }
    let mut pool = lock(&state.eviction.pool);
    for (engine, db) in &targets {
        for sampled in engine.eviction_sample(*db, samples, volatile, visits).ok()? {
            admit(&mut pool, candidate(engine, *db, sampled));
        }
    }
    // The best is last.
    pool.pop()
}

/// Adds `candidate` to the pool (kept sorted, worst first, at most [`POOL_SIZE`]) unless
/// the pool is full of better ones; a key already there takes the new rank.
fn admit(pool: &mut Vec<Candidate>, candidate: Candidate) {
    pool.retain(|c| !(c.key == candidate.key && c.db == candidate.db && c.namespace == candidate.namespace));
    if pool.len() == POOL_SIZE {
        if pool[0].score >= candidate.score {
            return;
        }
        pool.remove(0);
    }
    let at = pool.partition_point(|c| c.score <= candidate.score);
    pool.insert(at, candidate);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(score: u64, key: &'static str) -> Candidate {
        Candidate { score, namespace: Vec::new(), db: 0, key: Bytes::from_static(key.as_bytes()) }
    }

    #[test]
    fn the_pool_keeps_the_best_candidates_best_last() {
        let mut pool = Vec::new();
        for i in 0..40u64 {
            admit(&mut pool, c(i * 7 % 40, ["a", "b", "c", "d", "e", "f", "g", "h"][i as usize % 8]));
        }
        // Eight distinct keys, each with its last rank.
        assert_eq!(pool.len(), 8);
        assert!(pool.windows(2).all(|w| w[0].score <= w[1].score));
        for i in 0..100u64 {
            admit(&mut pool, c(1000 + i, Box::leak(format!("k{i}").into_boxed_str())));
        }
        assert_eq!(pool.len(), POOL_SIZE);
        assert_eq!(pool.last().unwrap().score, 1099);
        assert_eq!(pool[0].score, 1084);
        admit(&mut pool, c(5, "worse"));
        assert!(pool.iter().all(|c| &c.key[..] != b"worse"));
    }

    #[test]
    fn time_limit_follows_tenacity() {
        assert_eq!(time_limit(0), Duration::ZERO);
        assert_eq!(time_limit(10), Duration::from_micros(500));
        assert!(time_limit(11) > Duration::from_micros(500));
        assert_eq!(time_limit(100), Duration::MAX);
    }
}
