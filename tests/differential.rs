//! Differential test: seeded random command sequences run against a real `redis-server`
//! (the reference) and against the engine in process; every reply is compared.
//!
//! - Families and commands are enabled in [`ENABLED_FAMILIES`]; each family's generators
//!   live in `tests/differential/gen_<family>.rs` and say how their replies compare
//!   (exactly, as unordered arrays, as unordered pairs, within a TTL tolerance, SCAN-style
//!   by collecting every element, or by property for random replies).
//! - Each side has several client connections (the `txn` family switches between them and
//!   generates MULTI/EXEC/DISCARD/WATCH/UNWATCH): Redis one TCP connection per client, the
//!   engine one `Session` per client on an `Engine`. Inside a MULTI the runner sends only
//!   commands whose replies compare exactly or as unordered arrays, and compares EXEC's
//!   array element by element with the queued commands' modes.
//! - Before each sequence Redis gets fresh connections and `FLUSHALL`, the engine a fresh
//!   `Engine` whose `ManualClock` is set to the real time before every command.
//! - Sequences alternate between the protocols: odd ones run in RESP2, even ones with every
//!   Redis connection switched by `HELLO 3` and the engine's replies encoded in RESP3. Both
//!   sides' bytes are parsed by the same reader ([`client::fold`]), so the typed replies
//!   (maps, sets, doubles, nulls, `[member, score]` pairs) are compared kind by kind; the
//!   unordered modes compare a set with a set and a map with a map. `DIFF_PROTOCOL=2|3` runs
//!   only one.
//! - After each sequence the state of every pool key is compared (TYPE, then its contents
//!   and PTTL when those commands are enabled).
//! - A divergence is shrunk (delta debugging, replaying on a flushed Redis and a fresh Db)
//!   to a short sequence that still diverges, printed with the seed and both replies.
//!
//! Environment: `DIFF_OPS` (commands to compare, default 30000), `DIFF_SEED` (fix the
//! seed), `DIFF_FAMILIES` (`all` or `keyspace,string,…`: overrides [`ENABLED_FAMILIES`]),
//! `DIFF_AGAINST=redis` (compare Redis with a second Redis: validates the generators and
//! comparison modes themselves), `DIFF_STATS=1` (per command: how many replies were
//! errors, to check the generators reach the success paths). Without `redis-server` the test is skipped loudly, or
//! fails when `CI=true`.
//!
//! Not compared: relative expiries short enough to elapse during a run (every relative
//! EX/PX/EXPIRE used is ≥ 1000 s or ≤ 0, so expiry is exercised through past and far-future
//! times instead); TTL/PTTL/EXPIRETIME/PEXPIRETIME only within ±2 s; a blocking command's
//! wait (they run with 1–10 ms timeouts: Redis answers after waiting, the engine at once),
//! OBJECT/DEBUG/MEMORY introspection; SCAN cursor values and page sizes (the elements are
//! compared as sets); the order of SMEMBERS/SINTER/SUNION/SDIFF/KEYS/HKEYS/HVALS/HGETALL;
//! which elements SPOP/SRANDMEMBER/HRANDFIELD/ZRANDMEMBER/RANDOMKEY pick (count, distinctness,
//! membership and values are checked, and after SPOP the engine's set is resynchronised);
//! DBSIZE may be Redis' count or the live count (Redis keeps expired keys until it
//! reclaims them); huge negative random counts (Redis 7.0 tries to build them).

/// The store under the engine: in memory.
type Backend = rediskv::MemoryBackend;

/// An empty store for each sequence.
fn new_backend() -> Backend {
    Backend::new()
}

/// The comparison runs in every `cargo test`.
const RUN_BY_DEFAULT: bool = true;

/// Whether generators may write the largest values Redis allows (SETRANGE at 512 MB): an
/// `Arc` clone in memory.
const HUGE_VALUES: bool = true;

/// Every family runs by default.
const SKIPPED_BY_DEFAULT: &[&str] = &[];

include!("differential/suite.rs");
