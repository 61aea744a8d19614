//! Fault injection: random commands of every family (the differential test's generators)
//! run on a [`FaultyBackend`] that fails one chosen read or the write of each command. After
//! every command the store must hold exactly the records it held before the command, or
//! exactly those the same command leaves on a fault-free copy — never anything in between.
//! A command whose fault fired must answer with an error and have written nothing, unless
//! the failed read was one it did not use (a scan pulled one item past what it needed): then
//! its reply and state must be exactly the fault-free ones.
//!
//! Fresh collection versions come from a process-wide clock-based generator, so the two runs
//! of one command name new collections with different numbers; stores are compared with
//! every version replaced by its rank among the store's versions (new versions are larger
//! than every older one, so ranks line up exactly when the records do).
//!
//! `FAULT_TRIALS=n` sets the number of commands whose fault fired (default 1,000; the README's figure
//! is `FAULT_TRIALS=100000 cargo test --release --test fault_injection`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rediskv::{Clock, KeyLayout, ManualClock, Metadata};
use rediskv::{ColumnFamily, FaultyBackend, KvBackend, MemoryBackend};
use rediskv::{Db, Reply};

macro_rules! argv {
    ($($a:expr),* $(,)?) => { Vec::<Vec<u8>>::from([$($crate::kit::Arg::arg($a)),*]) };
}

#[allow(dead_code)]
#[path = "differential/gen_generic.rs"]
mod gen_generic;
#[allow(dead_code)]
#[path = "differential/gen_geo.rs"]
mod gen_geo;
#[allow(dead_code)]
#[path = "differential/gen_hash.rs"]
mod gen_hash;
#[allow(dead_code)]
#[path = "differential/gen_keyspace.rs"]
mod gen_keyspace;
#[allow(dead_code)]
#[path = "differential/gen_list.rs"]
mod gen_list;
#[allow(dead_code)]
#[path = "differential/gen_set.rs"]
mod gen_set;
#[allow(dead_code)]
#[path = "differential/gen_string.rs"]
mod gen_string;
#[allow(dead_code)]
#[path = "differential/gen_zset.rs"]
mod gen_zset;
#[allow(dead_code)]
#[path = "differential/kit.rs"]
mod kit;

use kit::{CmdGen, G, Rng};

/// Commands per generated sequence.
const SEQUENCE: usize = 40;

/// The generators may write 512 MB strings (SETRANGE's largest offset): cheap in memory.
const HUGE_VALUES: bool = true;

/// A family's generators and the pool keys it prefers (as in the differential test).
type Family = (fn() -> Vec<CmdGen>, &'static [&'static [u8]]);

fn generators() -> Vec<CmdGen> {
    let families: [Family; 8] = [
        (gen_keyspace::generators, &[]),
        (gen_string::generators, &[b"k0", b"k1", b""]),
        (gen_hash::generators, &[b"k2", b"\x00\xff"]),
        (gen_set::generators, &[b"k3", b"k4", b"{k}x"]),
        (gen_list::generators, &[b"k1", b"k2", b""]),
        (gen_zset::generators, &[b"k4", b"{k}x", b"k0"]),
        (gen_generic::generators, &[b"k0", b"k1"]),
        (gen_geo::generators, &[b"k3", b"{k}x", b"k4"]),
    ];
    let mut all = Vec::new();
    for (make, home) in families {
        all.extend(make().into_iter().map(|g| CmdGen { home, ..g }));
    }
    all
}

fn generate(rng: &mut Rng, gens: &[CmdGen]) -> Vec<Bytes> {
    let total: u32 = gens.iter().map(|g| g.weight).sum();
    let mut pick = rng.below(total as usize) as u32;
    let chosen = gens
        .iter()
        .find(|g| {
            let hit = pick < g.weight;
            pick = pick.saturating_sub(g.weight);
            hit
        })
        .expect("weights add up");
    let op = (chosen.make)(&mut G { rng, home: chosen.home });
    op.argv.into_iter().map(Bytes::from).collect()
}

type Records = Vec<(ColumnFamily, Vec<u8>, Vec<u8>)>;

/// Every record, each version replaced by its rank among the store's versions.
fn normalized(store: &MemoryBackend) -> Records {
    let layout = KeyLayout::default();
    // Where a version sits in a record: (in the key?, offset).
    let spot = |cf: ColumnFamily, key: &[u8], value: &[u8]| -> Option<(bool, usize)> {
        match cf {
            ColumnFamily::Metadata => {
                Metadata::decode(value).ok().filter(|m| m.ty.is_collection()).map(|_| (false, 9))
            }
            _ => layout.decode_subkey(key).ok().map(|sk| (true, key.len() - sk.sub.len() - 8)),
        }
    };
    let mut records: Records = Vec::new();
    let mut versions = BTreeMap::new();
    for cf in ColumnFamily::ALL {
        for (k, v) in store.records(cf) {
            if let Some((in_key, at)) = spot(cf, &k, &v) {
                let bytes = if in_key { &k[at..at + 8] } else { &v[at..at + 8] };
                versions.insert(u64::from_be_bytes(bytes.try_into().unwrap()), 0u64);
            }
            records.push((cf, k.to_vec(), v.to_vec()));
        }
    }
    for (rank, v) in versions.values_mut().enumerate() {
        *v = rank as u64;
    }
    for (cf, k, v) in &mut records {
        if let Some((in_key, at)) = spot(*cf, k, v) {
            let bytes = if in_key { &mut k[at..at + 8] } else { &mut v[at..at + 8] };
            let rank = versions[&u64::from_be_bytes((&*bytes).try_into().unwrap())];
            bytes.copy_from_slice(&rank.to_be_bytes());
        }
    }
    records.sort();
    records
}

/// Totals over the whole run.
#[derive(Default)]
struct Totals {
    commands: AtomicU64,
    faulted: AtomicU64,
    read_faults: AtomicU64,
    write_faults: AtomicU64,
    partial: AtomicU64,
    /// Faults on a read the command did not use: it completed exactly as without the fault.
    unused: AtomicU64,
}

struct Sequence<'a> {
    clock: Arc<ManualClock>,
    index: usize,
    totals: &'a Totals,
}

impl Sequence<'_> {
    fn db<B: KvBackend>(&self, backend: B, seed: u64) -> Db<'static, B> {
        let mut db = Db::new(backend).with_clock(self.clock.clone()).with_seed(seed);
        db.select(self.index).expect("a valid index");
        db
    }

    /// Runs `argv` on `before` without a fault, then with one, checks the outcome, and
    /// answers the fault-free state.
    fn step(
        &mut self,
        before: MemoryBackend,
        argv: &[Bytes],
        rng: &mut Rng,
    ) -> Result<MemoryBackend, TestCaseError> {
        let seed = rng.next_u64();
        let clean = FaultyBackend::new(before.clone());
        let mut db = self.db(&clean, seed);
        let want = db.execute(argv);
        let index = db.index();
        drop(db);
        let (reads, writes) = (clean.reads(), clean.writes());
        let after = clean.into_inner();
        self.totals.commands.fetch_add(1, Ordering::Relaxed);

        let faulty = FaultyBackend::new(before.clone());
        let chosen = rng.below((reads + writes) as usize + 1) as u64;
        if chosen < reads {
            faulty.fail_read(chosen);
        } else if writes > 0 {
            faulty.fail_write(rng.below(writes as usize) as u64);
        } else {
            // Nothing to fail: the command neither reads nor writes (PING, ECHO…).
            self.index = index;
            return Ok(after);
        }
        let got = self.db(&faulty, seed).execute(argv);
        let shown: Vec<String> = argv.iter().map(|a| a.escape_ascii().to_string()).collect();
        prop_assert_eq!(faulty.fired(), 1, "{:?}: the armed fault did not fire (nondeterminism?)", shown);
        self.totals.faulted.fetch_add(1, Ordering::Relaxed);
        let counter = if chosen < reads { &self.totals.read_faults } else { &self.totals.write_faults };
        counter.fetch_add(1, Ordering::Relaxed);
        let state = faulty.into_inner();
        let unchanged = state == before;
        let as_after = normalized(&state) == normalized(&after);
        if !unchanged && !as_after {
            self.totals.partial.fetch_add(1, Ordering::Relaxed);
            prop_assert!(false, "{:?}: a fault left a state that is neither before nor after", shown);
        }
        if matches!(got, Reply::Error(_)) {
            prop_assert!(unchanged, "{:?}: the command answered an error but wrote", shown);
        } else {
            // The failed read was one the command did not need (a scan pulled one item past
            // what it used): the command must then have completed exactly.
            prop_assert!(
                got == want && as_after,
                "{:?}: the fault fired, the reply was {:?} (fault-free: {:?}), state {}",
                shown,
                got,
                want,
                if unchanged { "unchanged" } else { "as after" }
            );
            self.totals.unused.fetch_add(1, Ordering::Relaxed);
        }
        self.index = index;
        Ok(after)
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[test]
fn a_failing_store_never_holds_half_a_command() {
    let trials: u64 =
        std::env::var("FAULT_TRIALS").map_or(1_000, |v| v.replace('_', "").parse().expect("a number"));
    let gens = generators();
    let totals = Totals::default();
    // Sequences run until `trials` faults have fired (each case fires about half its length).
    let cases = u32::try_from(trials).unwrap_or(u32::MAX);
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let result = runner.run(&(any::<u64>(), 1..=SEQUENCE), |(seed, len)| {
        if totals.faulted.load(Ordering::Relaxed) >= trials {
            return Ok(());
        }
        let mut rng = Rng::new(seed);
        let clock = Arc::new(ManualClock::new(now_ms()));
        let mut seq = Sequence { clock: clock.clone(), index: 0, totals: &totals };
        let mut store = MemoryBackend::new();
        for _ in 0..len {
            // Now and then jump far enough for the ≥ 1000 s expiries to fire.
            clock.advance_ms(if rng.percent(3) { 5_000_000 } else { 1 });
            let argv = generate(&mut rng, &gens);
            store = seq.step(store, &argv, &mut rng)?;
        }
        let problems = rediskv::fsck::check(&store, &KeyLayout::default(), clock.now_ms()).unwrap();
        prop_assert!(problems.is_empty(), "fsck: {:?}", problems);
        Ok(())
    });
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    eprintln!(
        "fault injection: {} commands, {} with a fault fired ({} reads, {} writes), {} partial writes, \
         {} faults on a read the command did not need (it completed exactly)",
        get(&totals.commands),
        get(&totals.faulted),
        get(&totals.read_faults),
        get(&totals.write_faults),
        get(&totals.partial),
        get(&totals.unused),
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    assert_eq!(get(&totals.partial), 0);
    assert!(get(&totals.faulted) >= trials);
    assert!(get(&totals.write_faults) > 0 && get(&totals.read_faults) > 0);
}
