//! Background maintenance, Redis' `serverCron` share of it: every tick (`1000 / hz` ms) a
//! bounded slice of time goes to active expiry (every namespace's databases, in bounded
//! sweeps, each key deleted under its lock after a fresh read: `gc::expire_step`), to
//! eviction a command's pass left unfinished (`evict`) and, for a store without a
//! compaction filter of its own (memory), to the incremental collector (`gc::Collector`)
//! that deletes the records of deleted and expired collections.
//!
//! Expiry's slice is Redis' active-expire budget: 25% of the tick, plus 2% per step of
//! `active-expire-effort` above 1; the collector gets 10% of the tick after it. A collector
//! pass that found nothing waits a second; an expiry pass that found nothing waits a second,
//! doubling up to 16 s while no command sets a TTL, so an idle or clean store costs almost
//! nothing, but never past the earliest expiry the pass read: a key leaves soon after it
//! expires. A database whose key counts say no key has a TTL is not swept at all.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use rediskv::ColumnFamily;
use rediskv::gc::{self, Collector, ExpirySweep};

use crate::state::{SharedEngine, State};
use crate::sync::lock;

/// Keys per expiry step: small enough that one step's batch holds the store's write lock
/// only briefly.
const STEP: usize = 512;
/// Records per collector step, smaller still: a collector batch of 512 deletes held the
/// memory store's write lock for about 0.1 ms, long enough to cost a loaded server
/// throughput.
const COLLECT_STEP: usize = 128;
/// The collector's share of each tick, in percent: garbage is invisible to clients, so it
/// yields to them (a 1,000,000-field hash is still reclaimed within seconds).
const COLLECT_SHARE: u32 = 10;
/// How long a pass that found nothing waits before the next one.
const IDLE: Duration = Duration::from_secs(1);
/// A collector pass runs when a command may have left garbage
/// ([`rediskv::server::Effects::garbage`]), and at least this often anyway.
const COLLECT_EVERY: Duration = Duration::from_secs(60);

/// The longest wait between expiry passes over a database where nothing expires and no
/// command set a TTL (passes walk every key: without this a large store with no TTLs would
/// be walked every second for nothing).
const IDLE_MAX: Duration = Duration::from_secs(16);

/// What follows the writes of a command, an EXEC or a script: keyspace notifications,
/// hints to the maintenance thread, the SWAPDB mapping saved. `lane` is the event loop's
/// index on a loop, [`crate::counters::LaneSum::shared_lane`] elsewhere.
#[inline(always)]
pub fn after_writes(state: &State, lane: usize, engine: &SharedEngine, session: &rediskv::Session) {
    let effects = session.effects();
    crate::notify::command_events(state, lane, effects, session.events());
    if effects.garbage {
        state.maint.garbage_hint.fetch_add(1, Relaxed);
    }
    let swapped = !session.swapped_dbs().is_empty();
    // SWAPDB may bring keys with TTLs into a database whose sweep backed off.
    if effects.ttl_set || swapped {
        state.maint.ttl_hint.fetch_add(1, Relaxed);
    }
    if swapped {
        save_db_slots(state, engine);
    }
}

/// Saves the SWAPDB mapping of `engine`'s databases.
#[cold]
#[inline(never)]
fn save_db_slots(state: &State, engine: &SharedEngine) {
    let ns = String::from_utf8_lossy(engine.layout().namespace()).into_owned();
    if let Err(e) = state.store.save_db_slots(&ns, &engine.db_slots()) {
        crate::log::warning!("Cannot save the SWAPDB mapping: {e}");
    }
}

/// A sweep of one database of one engine.
struct Sweep {
    engine: Arc<SharedEngine>,
    db: usize,
    sweep: ExpirySweep,
    /// The current pass deleted something.
    found: bool,
    /// When a pass that found nothing may start again.
    idle_until: Option<Instant>,
    /// The wait after a pass that found nothing: 1 s, doubling up to [`IDLE_MAX`] while no
    /// command sets a TTL.
    idle: Duration,
    /// [`crate::counters::MaintStats::ttl_hint`] when the current pass started.
    ttl_hint: u64,
    /// The earliest expiry (unix ms) the current pass read that had not come yet.
    next_expiry_ms: Option<u64>,
}

/// Starts the maintenance thread.
pub fn spawn(state: Arc<State>) {
    let _ = std::thread::Builder::new().name("maintenance".into()).spawn(move || run(&state));
}

/// The collector reclaimed the records of the big collections deleted before `deferred`
/// (a [`State::deferred_frees`] figure): they count as lazily freed.
fn credit_lazyfree(state: &State, deferred: u64) {
    let before = state.maint.lazyfree_credited.swap(deferred, Relaxed);
    state.stats.lazyfreed_objects.fetch_add(deferred.saturating_sub(before), Relaxed);
}

fn run(state: &State) {
    let mut sweeps: HashMap<(Vec<u8>, usize), Sweep> = HashMap::new();
    let mut collector =
        (!state.store.collects_itself()).then(|| Collector::new(state.engine.layout(), gc::DEFAULT_GRACE_MS));
    let mut collector_idle_until: Option<Instant> = None;
    let mut collector_found = false;
    let (mut in_pass, mut pass_hint, mut last_pass) = (true, 0, Instant::now());
    let mut pass_deferred = state.deferred_frees();
    let mut flushed_at = (pass_deferred, state.maint.flushes.load(Relaxed));
    loop {
        let (tick, budget) = {
            let config = state.config();
            let hz = config.number("hz").clamp(1, 500) as u64;
            let effort = config.number("active-expire-effort").clamp(1, 10) as u64;
            let tick = Duration::from_millis(1000 / hz);
            (tick, tick * (25 + 2 * (effort as u32 - 1)) / 100)
        };
        let started = Instant::now();
        let deadline = started + budget;
        let databases = state.config().number("databases").clamp(1, 16) as usize;
        let leader = holds_lease(state);
        state.maint.leader.store(leader, Relaxed);
        if !leader {
            std::thread::sleep(tick);
            continue;
        }
        // A replica's keys expire when its primary's DELs arrive, as in Redis.
        let active = state.active_expire.load(Relaxed) && !state.expiry_paused() && !state.link.is_replica();
        let engines = if active { state.engines() } else { Vec::new() };
        for engine in engines {
            for db in 0..databases {
                if Instant::now() >= deadline {
                    break;
                }
                let Some(sweep) = sweep_of(&mut sweeps, &engine, db) else { continue };
                expire(state, sweep, deadline);
            }
        }
        state.latency.observe("expire-cycle", started.elapsed().as_micros() as u64);
        // Eviction a command's pass left unfinished (its time ran out), as Redis' eviction
        // time event.
        if state.maxmemory.load(Relaxed) > 0 {
            crate::evict::perform(state, None, &mut Vec::new());
        }
        if let Some(collector) = collector.as_mut() {
            // A pass starts only when garbage may exist (or a minute has passed): walking a
            // large live store for nothing costs the writers its lock.
            let hint = state.maint.garbage_hint.load(Relaxed);
            if !in_pass && (hint != pass_hint || last_pass.elapsed() >= COLLECT_EVERY) {
                (in_pass, pass_hint, last_pass) = (true, hint, Instant::now());
                pass_deferred = state.deferred_frees();
            }
            if in_pass && collector_idle_until.is_none_or(|t| Instant::now() >= t) {
                collector_idle_until = None;
                let deadline = Instant::now() + tick * COLLECT_SHARE / 100;
                in_pass =
                    !collect(state, collector, deadline, &mut collector_found, &mut collector_idle_until);
                if !in_pass {
                    credit_lazyfree(state, pass_deferred);
                }
            }
        } else {
            // The store drops the records itself (at compaction): they are handed over, and
            // leave memory with the memtables holding them, written to tables now (after
            // a big collection's deletion, or a FLUSHDB / FLUSHALL, as Redis frees them).
            let deferred = state.deferred_frees();
            let now = (deferred, state.maint.flushes.load(Relaxed));
            if now != flushed_at {
                flushed_at = now;
                if let Err(e) = state.store.sync() {
                    crate::log::warning!("Flush after a lazy free failed: {e}");
                }
            }
            credit_lazyfree(state, deferred);
        }
        let spent = started.elapsed();
        std::thread::sleep(tick.saturating_sub(spent));
    }
}

/// How long a node keeps the maintenance lease of a shared store past its last tick.
#[cfg(feature = "etcd")]
const LEASE: Duration = Duration::from_secs(3);

/// Whether this node sweeps now: always, unless other nodes share the store (etcd), where
/// only the holder of the maintenance lease does, so that nodes do not all walk the same
/// keys. A node that stops ticking hands over after `LEASE` (3 s).
fn holds_lease(state: &State) -> bool {
    #[cfg(feature = "etcd")]
    if let Some(etcd) = state.store.etcd() {
        return etcd.hold_maintenance_lease(state.engine.now_ms(), LEASE).unwrap_or(false);
    }
    let _ = state;
    true
}

/// Wakes this node's clients blocked on keys other nodes write: a thread per etcd cluster
/// holding data follows its change feed of metadata keys. (Keyspace notifications and
/// PUBLISH stay per node: the feed says which key changed, not which command or event
/// changed it.)
#[cfg(feature = "etcd")]
pub fn follow_other_nodes(state: Arc<State>) {
    for etcd in state.store.etcd_data().to_vec() {
        follow_changes(state.clone(), etcd);
    }
}

/// [`follow_other_nodes`] for one etcd cluster.
#[cfg(feature = "etcd")]
fn follow_changes(state: Arc<State>, etcd: Arc<rediskv_etcd::Backend>) {
    let _ = std::thread::Builder::new().name("etcd-feed".into()).spawn(move || {
        // etcd ends a watch when its member goes away or the connection breaks: watch again
        // (through another member), or the node's blocked clients would stop hearing of
        // other nodes' writes for good. Writes in the gap went unheard: once the new watch
        // is in place, every parked client here is retried.
        let mut resumed = false;
        loop {
            match etcd.metadata_changes() {
                Ok(changes) => {
                    if std::mem::replace(&mut resumed, true) {
                        state.blocked.wake_all(&*state);
                    }
                    for key in changes {
                        for engine in state.engines() {
                            if let Some((db, user_key)) = engine.key_of(&key) {
                                state.blocked.wake_key(&*state, &engine, db, user_key);
                            }
                        }
                    }
                    crate::log::warning!("The etcd change feed ended: watching again");
                }
                Err(e) => crate::log::warning!("No change feed from etcd ({e}): trying again in 1 s"),
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
}

/// The sweep of database `db` of `engine` (by its namespace), made when first needed.
fn sweep_of<'a>(
    sweeps: &'a mut HashMap<(Vec<u8>, usize), Sweep>,
    engine: &Arc<SharedEngine>,
    db: usize,
) -> Option<&'a mut Sweep> {
    let layout = engine.db_layout(db)?;
    Some(sweeps.entry((engine.layout().namespace().to_vec(), db)).or_insert_with(|| Sweep {
        engine: engine.clone(),
        db,
        sweep: ExpirySweep::of(layout),
        found: false,
        idle_until: None,
        idle: IDLE,
        ttl_hint: 0,
        next_expiry_ms: None,
    }))
}

/// Runs expiry steps on one database until its pass ends or the deadline.
fn expire(state: &State, sweep: &mut Sweep, deadline: Instant) {
    // A command that set a TTL ends the wait: that key must leave soon after it expires.
    let ttl_set = state.maint.ttl_hint.load(Relaxed) != sweep.ttl_hint;
    if sweep.idle_until.is_some_and(|t| Instant::now() < t) && !ttl_set {
        return;
    }
    sweep.idle_until = None;
    // Where the engine counts keys, a database with no TTL has nothing to expire: no pass
    // reads its records (on a disk engine a string's record holds its value, read whole).
    if sweep.engine.key_count(sweep.db).is_ok_and(|count| count.is_some_and(|c| c.expires == 0)) {
        return;
    }
    while Instant::now() < deadline {
        let now = sweep.engine.now_ms();
        let Ok(step) = gc::expire_step(&sweep.engine, &mut sweep.sweep, now, STEP) else { return };
        state.maint.expire_examined.fetch_add(step.scanned as u64, Relaxed);
        state.maint.expired_keys.fetch_add(step.removed.len() as u64, Relaxed);
        if !step.removed.is_empty() {
            state.maint.garbage_hint.fetch_add(1, Relaxed);
        }
        sweep.found |= !step.removed.is_empty();
        if let Some(at) = step.next_expiry_ms {
            sweep.next_expiry_ms = Some(sweep.next_expiry_ms.map_or(at, |next| next.min(at)));
        }
        crate::notify::expired(state, &step.expired);
        if state.tracking.active() && !step.expired.is_empty() {
            let keys: Vec<bytes::Bytes> = step.expired.iter().map(|(_, k)| k.clone()).collect();
            let mut to = crate::tracking::Delivery { me: None, own: &mut Vec::new() };
            state.tracking.invalidate(state.peers(), sweep.engine.layout().namespace(), &keys, &mut to);
        }
        if step.done {
            if let Some(layout) = sweep.engine.db_layout(sweep.db) {
                sweep.sweep = ExpirySweep::of(layout);
            }
            let hint = state.maint.ttl_hint.load(Relaxed);
            if std::mem::take(&mut sweep.found) {
                sweep.idle = IDLE; // keys are expiring: the next pass starts at once
            } else {
                sweep.idle = if hint == sweep.ttl_hint { (sweep.idle * 2).min(IDLE_MAX) } else { IDLE };
                // No later than the first key the pass saw expire (a millisecond after it).
                let due = sweep.next_expiry_ms.map(|at| Duration::from_millis(at.saturating_sub(now) + 1));
                sweep.idle_until = Some(Instant::now() + due.map_or(sweep.idle, |due| due.min(sweep.idle)));
            }
            sweep.ttl_hint = hint;
            sweep.next_expiry_ms = None;
            return;
        }
    }
}

/// Runs collector steps until the deadline or the end of a pass; true when a pass ended.
fn collect(
    state: &State,
    collector: &mut Collector,
    deadline: Instant,
    found: &mut bool,
    idle_until: &mut Option<Instant>,
) -> bool {
    let backend = state.store.backend();
    let mut ended = false;
    let stats = &state.maint;
    while Instant::now() < deadline {
        let Ok(step) = collector.step(&backend, state.engine.now_ms(), COLLECT_STEP) else { return false };
        stats.gc_examined.fetch_add(step.examined as u64, Relaxed);
        let dropped = (step.dropped_subkeys + step.dropped_scores) as u64;
        stats.gc_collected.fetch_add(dropped, Relaxed);
        *found |= dropped > 0;
        if step.pass_done {
            stats.gc_passes.fetch_add(1, Relaxed);
            ended = true;
            if !std::mem::take(found) {
                *idle_until = Some(Instant::now() + IDLE);
            }
            break;
        }
    }
    let (cf, next) = collector.position();
    let cf = match cf {
        ColumnFamily::Score => "score",
        ColumnFamily::Stream => "stream",
        _ => "subkey",
    };
    let hex: String = next.iter().take(64).map(|b| format!("{b:02x}")).collect();
    *lock(&stats.gc_position) = format!("{cf}:{hex}");
    ended
}
