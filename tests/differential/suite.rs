// The differential suite, included by `tests/differential.rs` (engine on `MemoryBackend`)
// and by each disk engine's `tests/differential.rs` (engine on that store). The includer
// defines `type Backend`, `fn new_backend() -> Backend` (an empty store each call) and
// `SKIPPED_BY_DEFAULT`, families left out unless `DIFF_FAMILIES` names them, and
// `RUN_BY_DEFAULT` (false: the comparison with Redis runs only with `DIFF_FJALL=1`), and
// `HUGE_VALUES` (whether generators may write 512 MB strings).
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rediskv::{KeyLayout, LayoutKind, ManualClock};
use rediskv::{Engine as KvEngine, Protocol, Reply, Session};

/// `argv!["GET", g.key()]` → `Vec<Vec<u8>>`.
macro_rules! argv {
    ($($a:expr),* $(,)?) => { Vec::<Vec<u8>>::from([$($crate::kit::Arg::arg($a)),*]) };
}

#[path = "client.rs"]
#[allow(dead_code)]
mod client;
#[path = "gen_bit.rs"]
mod gen_bit;
#[path = "gen_generic.rs"]
mod gen_generic;
#[path = "gen_geo.rs"]
mod gen_geo;
#[path = "gen_hash.rs"]
mod gen_hash;
#[path = "gen_hll.rs"]
mod gen_hll;
#[path = "gen_keyspace.rs"]
mod gen_keyspace;
#[path = "gen_list.rs"]
mod gen_list;
#[path = "gen_set.rs"]
mod gen_set;
#[path = "gen_stream.rs"]
mod gen_stream;
#[path = "gen_string.rs"]
mod gen_string;
#[path = "gen_txn.rs"]
mod gen_txn;
#[path = "gen_zset.rs"]
mod gen_zset;
#[path = "kit.rs"]
mod kit;

use client::{Client, RedisServer, missing_redis};
use kit::*;

/// What runs. An entry is a family name (all its commands) or `family:cmd cmd …` (only
/// those). Add a family here once its commands are merged.
const ENABLED_FAMILIES: &[&str] =
    &["keyspace", "string", "hash", "set", "list", "zset", "generic", "txn", "bit", "hll", "geo", "stream"];

/// Every family's generators, by name, with the pool keys it prefers (overlapping, so
/// types still collide; keyspace commands use the whole pool).
type Family = (&'static str, fn() -> Vec<CmdGen>, &'static [&'static [u8]]);
const FAMILIES: &[Family] = &[
    ("keyspace", gen_keyspace::generators, &[]),
    ("string", gen_string::generators, &[b"k0", b"k1", b""]),
    ("hash", gen_hash::generators, &[b"k2", b"\x00\xff"]),
    ("set", gen_set::generators, &[b"k3", b"k4", b"{k}x"]),
    ("list", gen_list::generators, &[b"k1", b"k2", b""]),
    ("zset", gen_zset::generators, &[b"k4", b"{k}x", b"k0"]),
    ("generic", gen_generic::generators, &[b"k0", b"k1"]),
    ("txn", gen_txn::generators, &[b"k0", b"k3", b"k4"]),
    ("bit", gen_bit::generators, &[b"k0", b"k1", b"\x00\xff"]),
    ("hll", gen_hll::generators, &[b"k2", b"k3", b"k0"]),
    ("geo", gen_geo::generators, &[b"k3", b"{k}x", b"k4"]),
    ("stream", gen_stream::generators, &[b"k1", b"k4", b"\x00\xff"]),
];

const DEFAULT_OPS: usize = 30_000;

thread_local! {
    /// The protocol of the sequence being run (both sides speak it).
    static PROTOCOL: std::cell::Cell<Protocol> = const { std::cell::Cell::new(Protocol::Resp2) };
}

fn protocol() -> Protocol {
    PROTOCOL.get()
}

/// A database the sequences run against.
trait Target {
    fn exec(&mut self, argv: &[Vec<u8>]) -> Reply;
    fn reset(&mut self);
    /// Sends the following commands on client connection `conn` (0 after a reset).
    fn switch(&mut self, _conn: usize) {}
}

/// The engine in process, with one session per client connection.
struct Engine {
    engine: KvEngine<Backend>,
    sessions: Vec<Session>,
    current: usize,
    clock: Arc<ManualClock>,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

thread_local! {
    /// When the last command was sent to redis-server, and the longest round trip of the
    /// current sequence (both ms). The engine runs each command at the time it was sent, so
    /// a TTL both set from "now" differs by at most that round trip: a descheduled test
    /// thread (seconds on a loaded CI machine) is uncertainty, not a divergence.
    static REDIS_TIME: std::cell::Cell<(u64, i64)> = const { std::cell::Cell::new((0, 0)) };
}

/// The engine's "now": when the current command went to redis-server.
fn command_time() -> u64 {
    match REDIS_TIME.get().0 {
        0 => now_ms(),
        sent => sent,
    }
}

/// How far apart the two sides' clocks may have been in this sequence.
fn clock_uncertainty() -> i64 {
    REDIS_TIME.get().1
}

impl Engine {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new(now_ms()));
        let layout = LAYOUT.with_borrow(KeyLayout::clone);
        let engine = KvEngine::with_layout(new_backend(), layout).with_clock(clock.clone()).with_seed(42);
        let sessions = (0..gen_txn::CONNS).map(|_| engine.session()).collect();
        Engine { engine, sessions, current: 0, clock }
    }
}

impl Target for Engine {
    fn exec(&mut self, argv: &[Vec<u8>]) -> Reply {
        self.clock.set_ms(command_time());
        let argv: Vec<Bytes> = argv.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        client::fold(&self.engine.execute(&mut self.sessions[self.current], &argv), protocol())
    }
    fn reset(&mut self) {
        *self = Engine::new();
    }
    fn switch(&mut self, conn: usize) {
        self.current = conn;
    }
}

/// A redis-server over the wire, one connection per client.
struct Remote {
    port: u16,
    clients: Vec<Client>,
    current: usize,
    /// Which connections are inside MULTI.
    multi: Vec<bool>,
    /// Per connection, the queue positions of the errno-clearing commands inserted before a
    /// queued SORT (see `exec`); their replies are taken out of EXEC's.
    inserted: Vec<Vec<usize>>,
    /// Per connection, how many commands MULTI has queued.
    queued: Vec<usize>,
}

impl Remote {
    fn new(server: &RedisServer) -> Self {
        let mut remote = Remote {
            port: server.port,
            clients: Vec::new(),
            current: 0,
            multi: Vec::new(),
            inserted: Vec::new(),
            queued: Vec::new(),
        };
        remote.reset();
        remote
    }

    fn call(&mut self, argv: &[Vec<u8>]) -> Reply {
        self.clients[self.current]
            .call(argv)
            .unwrap_or_else(|e| {
                let line = argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ");
                panic!("redis-server connection failed: {e} (sending {line})")
            })
    }
}

impl Target for Remote {
    fn exec(&mut self, argv: &[Vec<u8>]) -> Reply {
        let name = argv.first().map(|n| n.to_ascii_lowercase()).unwrap_or_default();
        let conn = self.current;
        if name == b"sort" || name == b"sort_ro" {
            // Redis 7.0's SORT checks `errno` after `strtod` without clearing it first, so an
            // ERANGE left by an earlier command on the thread (GEOADD 1 1e400, ZADD 1e400 …)
            // fails the numeric sort of a non-integer element. GEOSEARCH parses its
            // coordinates with `errno = 0` first: it clears the stale value, and reads
            // nothing. Inside MULTI it is queued just before the SORT, and its reply is taken
            // out of EXEC's.
            let clear = argv!["GEOSEARCH", "no-such-key", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "m"];
            let reply = self.call(&clear);
            if self.multi[conn] && reply == Reply::status("QUEUED") {
                self.inserted[conn].push(self.queued[conn]);
                self.queued[conn] += 1;
            }
        }
        let sent = now_ms();
        let mut reply = self.call(argv);
        let (_, slowest) = REDIS_TIME.get();
        REDIS_TIME.set((sent, slowest.max((now_ms() - sent) as i64)));
        match name.as_slice() {
            b"multi" if reply == Reply::OK => {
                self.multi[conn] = true;
                self.queued[conn] = 0;
                self.inserted[conn].clear();
            }
            b"exec" | b"discard" | b"reset" => {
                if let (b"exec", Reply::Array(replies)) = (name.as_slice(), &mut reply) {
                    for &at in self.inserted[conn].iter().rev() {
                        if at < replies.len() {
                            replies.remove(at);
                        }
                    }
                }
                self.multi[conn] = false;
                self.inserted[conn].clear();
            }
            _ if self.multi[conn] && reply == Reply::status("QUEUED") => self.queued[conn] += 1,
            _ => {}
        }
        reply
    }
    fn reset(&mut self) {
        // Fresh connections: no MULTI, no WATCH, database 0.
        self.clients = (0..gen_txn::CONNS).map(|_| Client::connect(self.port).expect("connect")).collect();
        if protocol() == Protocol::Resp3 {
            for client in &mut self.clients {
                client.hello3().expect("HELLO 3");
            }
        }
        self.current = 0;
        self.multi = vec![false; gen_txn::CONNS];
        self.inserted = vec![Vec::new(); gen_txn::CONNS];
        self.queued = vec![0; gen_txn::CONNS];
        assert_eq!(self.exec(&argv!["FLUSHALL"]), Reply::OK);
        // INFO's expired_keys then counts this sequence's (see `Cmp::DbSize`).
        assert_eq!(self.exec(&argv!["CONFIG", "RESETSTAT"]), Reply::OK);
        REDIS_TIME.set((0, 0));
    }
    fn switch(&mut self, conn: usize) {
        self.current = conn;
    }
}

/// The enabled generators (plus the set of enabled command names).
fn enabled(spec: &[String]) -> (Vec<CmdGen>, BTreeSet<&'static str>) {
    let mut gens = Vec::new();
    for entry in spec {
        let (family, only) = match entry.split_once(':') {
            Some((f, cmds)) => (f.trim(), Some(cmds.split_whitespace().collect::<Vec<_>>())),
            None => (entry.trim(), None),
        };
        let (_, make, home) = FAMILIES
            .iter()
            .find(|(name, _, _)| *name == family)
            .unwrap_or_else(|| panic!("unknown family {family:?} in the enabled list"));
        let mut all = make();
        for g in &mut all {
            g.home = home;
        }
        if let Some(only) = &only {
            for name in only {
                assert!(all.iter().any(|g| g.name == *name), "family {family} has no generator for {name:?}");
            }
        }
        gens.extend(all.into_iter().filter(|g| only.as_ref().is_none_or(|o| o.contains(&g.name))));
    }
    let names = gens.iter().map(|g| g.name).collect();
    (gens, names)
}

fn generate(rng: &mut Rng, gens: &[CmdGen]) -> Op {
    let total: u32 = gens.iter().map(|g| g.weight).sum();
    let mut pick = rng.below(total as usize) as u32;
    let chosen = gens.iter().find(|g| {
        if pick < g.weight {
            true
        } else {
            pick -= g.weight;
            false
        }
    });
    let chosen = chosen.expect("weights add up");
    let mut op = (chosen.make)(&mut G { rng: &mut *rng, home: chosen.home });
    // Now and then drop trailing arguments (arity and syntax errors) where the comparison
    // stays deterministic.
    if rng.percent(1)
        && matches!(op.cmp, Cmp::Exact | Cmp::Unordered | Cmp::PairsUnordered | Cmp::Tolerance { .. })
    {
        let keep = 1 + rng.below(op.argv.len());
        op.argv.truncate(keep);
    }
    op
}

/// A short human form of a reply.
fn show(r: &Reply) -> String {
    match r {
        Reply::Status(s) => format!("+{s}"),
        Reply::Error(e) => format!("-{e}"),
        Reply::Integer(n) => format!(":{n}"),
        Reply::Bulk(b) => quote(b),
        Reply::Nil => "(nil)".into(),
        Reply::NilArray => "(nil array)".into(),
        Reply::Array(items) => format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(", ")),
        other => format!("{other:?}"),
    }
}

fn mismatch(what: &str, redis: &Reply, engine: &Reply) -> String {
    format!("{what}\n      redis:  {}\n      engine: {}", show(redis), show(engine))
}

fn bytes_of(r: &Reply) -> Option<Vec<u8>> {
    match r {
        Reply::Bulk(b) => Some(b.to_vec()),
        Reply::DoubleText(text) => Some(text.to_vec()),
        _ => None,
    }
}

/// An array's (or a RESP3 set's or map's) elements in canonical order: single items, or
/// pairs (a flat RESP2 array, a map, or an array of two-element arrays), after the kind.
fn canonical(r: &Reply, pairs: bool) -> Option<Vec<String>> {
    let (kind, shown): (&str, Vec<String>) = match r {
        Reply::Array(items)
            if pairs
                && !items.is_empty()
                && items.iter().all(|i| matches!(i, Reply::Array(p) if p.len() == 2)) =>
        {
            ("pairs", items.iter().map(|i| show(i).trim_matches(['[', ']']).replace(", ", " => ")).collect())
        }
        Reply::Array(items) => ("array", items.iter().map(show).collect()),
        Reply::Set(items) => ("set", items.iter().map(show).collect()),
        Reply::Map(kv) => ("map", kv.iter().map(|(k, v)| format!("{} => {}", show(k), show(v))).collect()),
        _ => return None,
    };
    let flat = matches!(r, Reply::Array(_) | Reply::Set(_)) && kind != "pairs";
    if pairs && flat && shown.len() % 2 != 0 {
        return None;
    }
    let mut out: Vec<String> =
        if pairs && flat { shown.chunks(2).map(|c| c.join(" => ")).collect() } else { shown };
    out.sort();
    out.insert(0, kind.to_string());
    Some(out)
}

/// The elements of an aggregate reply as bytes, pairs flattened (a map, or RESP3's
/// `[member, score]` arrays), doubles in their `%.17g` text: what RESP2 would list.
fn flat_items(r: &Reply) -> Option<Vec<Vec<u8>>> {
    let items: Vec<&Reply> = match r {
        Reply::Array(items) | Reply::Set(items) => items
            .iter()
            .flat_map(|i| match i {
                Reply::Array(pair) if pair.len() == 2 => pair.iter().collect(),
                other => vec![other],
            })
            .collect(),
        Reply::Map(kv) => kv.iter().flat_map(|(k, v)| [k, v]).collect(),
        _ => return None,
    };
    items.into_iter().map(bytes_of).collect()
}

/// A reply's kinds without its values: the kind, then the distinct shapes of its elements.
fn shape(r: &Reply) -> String {
    let items: Vec<&Reply> = match r {
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => items.iter().collect(),
        Reply::Map(kv) | Reply::Pairs(kv) | Reply::PairMap(kv) => kv.iter().flat_map(|(k, v)| [k, v]).collect(),
        _ => Vec::new(),
    };
    let kind = format!("{r:?}");
    let kind = kind.split(['(', ' ', '{']).next().unwrap_or_default().to_string();
    let inner: BTreeSet<String> = items.into_iter().map(shape).collect();
    if inner.is_empty() {
        kind
    } else {
        format!("{kind}<{}>", inner.into_iter().collect::<Vec<_>>().join("|"))
    }
}

/// Runs one op on both sides and compares. Returns how many commands were compared and
/// the reference's reply (`Nil` for SCAN/random ops).
fn compare_op(r: &mut dyn Target, e: &mut dyn Target, op: &Op) -> Result<(usize, Reply), String> {
    let result = compare_op_inner(r, e, op);
    if let Ok((_, reply)) = &result {
        STATS.with_borrow_mut(|stats| {
            let name = String::from_utf8_lossy(&op.argv[0]).to_ascii_uppercase();
            let entry = stats.entry(name).or_insert((0, 0));
            if reply.is_error() { entry.1 += 1 } else { entry.0 += 1 }
        });
    }
    result
}

/// Set when the subject is a second Redis (`DIFF_AGAINST=redis`).
static AGAINST_REDIS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

thread_local! {
    /// Per command name: (non-error, error) replies from Redis, for `DIFF_STATS=1`.
    static STATS: std::cell::RefCell<std::collections::BTreeMap<String, (usize, usize)>> = Default::default();
}

thread_local! {
    /// The client connection commands go to, and per connection the comparison modes of
    /// the commands queued in its open MULTI (`None`: no MULTI).
    static TXN: std::cell::RefCell<(usize, Vec<Option<Vec<Cmp>>>)> =
        std::cell::RefCell::new((0, vec![None; gen_txn::CONNS]));
}

fn txn_reset() {
    TXN.with_borrow_mut(|t| *t = (0, vec![None; gen_txn::CONNS]));
}

/// Compares one op, keeping track of connections and open transactions: inside a MULTI only
/// the modes EXEC can compare element by element are sent.
fn compare_op_inner(r: &mut dyn Target, e: &mut dyn Target, op: &Op) -> Result<(usize, Reply), String> {
    if let Cmp::Conn(n) = op.cmp {
        r.switch(n);
        e.switch(n);
        TXN.with_borrow_mut(|t| t.0 = n);
        return Ok((0, Reply::OK));
    }
    let name = op.argv[0].to_ascii_uppercase();
    let queueing = TXN.with_borrow(|t| t.1[t.0].is_some());
    let control = matches!(name.as_slice(), b"MULTI" | b"EXEC" | b"DISCARD" | b"WATCH");
    let queueable = matches!(op.cmp, Cmp::Exact | Cmp::Unordered | Cmp::PairsUnordered | Cmp::Tolerance { .. });
    if queueing && !control && !queueable {
        return Ok((0, Reply::Nil));
    }
    if op.cmp == Cmp::Exec {
        let queued = TXN.with_borrow_mut(|t| {
            let current = t.0;
            t.1[current].take()
        });
        let a = r.exec(&op.argv);
        let b = e.exec(&op.argv);
        return match (&a, &b, queued) {
            (Reply::Array(xs), Reply::Array(ys), Some(cmps))
                if xs.len() == ys.len() && xs.len() == cmps.len() =>
            {
                for ((x, y), cmp) in xs.iter().zip(ys).zip(cmps) {
                    if !same_reply(&cmp, x, y) {
                        return Err(mismatch("EXEC replies differ", &a, &b));
                    }
                }
                Ok((1, a))
            }
            _ if same_modulo_stored_negative_zero(&a, &b) => Ok((1, a)),
            _ => Err(mismatch("replies differ", &a, &b)),
        };
    }
    let result = compare_op_modes(r, e, op);
    if let Ok((_, reply)) = &result {
        TXN.with_borrow_mut(|t| {
            let current = t.0;
            let open = &mut t.1[current];
            match name.as_slice() {
                b"MULTI" if *reply == Reply::OK => *open = Some(Vec::new()),
                b"DISCARD" if *reply == Reply::OK => *open = None,
                _ if *reply == Reply::status("QUEUED") => {
                    open.get_or_insert_with(Vec::new).push(op.cmp.clone())
                }
                _ => {}
            }
        });
    }
    result
}

/// Whether two replies agree under `cmp` (the non-iterating modes).
fn same_reply(cmp: &Cmp, a: &Reply, b: &Reply) -> bool {
    match (cmp, a, b) {
        (Cmp::Unordered, Reply::Array(_) | Reply::Set(_), _) => canonical(a, false) == canonical(b, false),
        (Cmp::PairsUnordered, Reply::Array(_) | Reply::Map(_), _) => {
            canonical(a, true).is_some() && canonical(a, true) == canonical(b, true)
        }
        (Cmp::Tolerance { slack, unit_ms }, Reply::Integer(x), Reply::Integer(y)) if *x >= 0 && *y >= 0 => {
            (x - y).abs() <= slack + (clock_uncertainty() + unit_ms - 1) / unit_ms
        }
        _ => same_modulo_stored_negative_zero(a, b),
    }
}

fn compare_op_modes(r: &mut dyn Target, e: &mut dyn Target, op: &Op) -> Result<(usize, Reply), String> {
    match &op.cmp {
        Cmp::Exec | Cmp::Conn(_) => unreachable!("handled by compare_op_inner"),
        Cmp::Exact | Cmp::Unordered | Cmp::PairsUnordered | Cmp::Tolerance { .. } => {
            let a = r.exec(&op.argv);
            let b = e.exec(&op.argv);
            let same = same_reply(&op.cmp, &a, &b);
            if same { Ok((1, a)) } else { Err(mismatch("replies differ", &a, &b)) }
        }
        Cmp::Scan { cursor_arg, pairs } => {
            let (mut ra, na) = scan_all(r, op, *cursor_arg, *pairs);
            let (rb, nb) = scan_all(e, op, *cursor_arg, *pairs);
            if op.argv[0].eq_ignore_ascii_case(b"zscan") {
                // A stored -0 (skiplist encoding) matches the engine's 0, as elsewhere.
                ra = ra.map(|set| set.into_iter().map(|s| s.replace(" => \"-0\"", " => \"0\"")).collect());
            }
            match (ra, rb) {
                (Ok(sa), Ok(sb)) if sa == sb => Ok((na.min(nb), Reply::Nil)),
                (Ok(sa), Ok(sb)) => {
                    Err(format!("scanned elements differ\n      redis:  {sa:?}\n      engine: {sb:?}"))
                }
                (Err(a), Err(b)) if a == b => Ok((1, a)),
                (Err(a), Err(b)) => Err(mismatch("replies differ", &a, &b)),
                (Err(a), Ok(sb)) => Err(format!("redis: {}\n      engine scanned: {sb:?}", show(&a))),
                (Ok(sa), Err(b)) => Err(format!("redis scanned: {sa:?}\n      engine: {}", show(&b))),
            }
        }
        Cmp::Random(rnd) => compare_random(r, e, op, rnd).map(|n| (n, Reply::Nil)),
        Cmp::Decode { key_arg } => {
            if let Reply::Integer(n) = r.exec(&argv!["STRLEN", op.argv[*key_arg].as_slice()])
                && n > DECODE_MAX_BYTES {
                    return Ok((0, Reply::Nil));
                }
            compare_op_modes(r, e, &Op { argv: op.argv.clone(), cmp: Cmp::Exact })
        }
        Cmp::Lex { key_arg } => {
            if mixed_scores(r, &op.argv[*key_arg]) {
                return Ok((0, Reply::Nil));
            }
            compare_op_modes(r, e, &Op { argv: op.argv.clone(), cmp: Cmp::Exact })
        }
        Cmp::DbSize => {
            let a = r.exec(&op.argv);
            let b = e.exec(&op.argv);
            if a == b {
                return Ok((1, a));
            }
            let live = match r.exec(&argv!["KEYS", "*"]) {
                Reply::Array(keys) => keys.len() as i64,
                _ => -1,
            };
            match (&a, &b) {
                (Reply::Integer(_), Reply::Integer(n)) if *n == live => Ok((1, a)),
                // Keys Redis' active expiry reclaimed (it runs while a client waits, for
                // one) that the engine still counts: at most the keys Redis expired in this
                // sequence.
                (Reply::Integer(m), Reply::Integer(n)) if *n > live && *n <= m + expired_keys(r) => Ok((1, a)),
                // A second Redis may hold expired keys of its own.
                (Reply::Integer(_), Reply::Integer(n))
                    if *n >= live && AGAINST_REDIS.load(std::sync::atomic::Ordering::Relaxed) =>
                {
                    Ok((1, a))
                }
                _ => Err(mismatch(&format!("replies differ (live keys: {live})"), &a, &b)),
            }
        }
    }
}

/// INFO stats' `expired_keys` of the reference: keys Redis expired since the sequence began
/// (its reset clears the statistics); 0 when it cannot be read.
fn expired_keys(r: &mut dyn Target) -> i64 {
    let text = match r.exec(&argv!["INFO", "stats"]) {
        Reply::Bulk(text) | Reply::Verbatim { text, .. } => text,
        _ => return 0,
    };
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|line| line.strip_prefix("expired_keys:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Equal, except that a score `-0` from Redis matches `0` from the engine. Redis keeps a
/// stored `-0` only once a zset is skiplist-encoded (more than 128 members, or one over 64
/// bytes) and prints `0` while it is a listpack; the engine stores `-0` as `+0` (docs/layout.md's
/// ordered double) and always prints `0`.
fn same_modulo_stored_negative_zero(a: &Reply, b: &Reply) -> bool {
    match (a, b) {
        (Reply::Bulk(x), Reply::Bulk(y)) | (Reply::DoubleText(x), Reply::DoubleText(y)) => same_score(x, y),
        (Reply::Array(xs), Reply::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same_modulo_stored_negative_zero(x, y))
        }
        _ => a == b,
    }
}

/// Whether a score the reference answers (`reference`) is the one the engine answers, a
/// stored `-0` being `0` in the engine.
fn same_score(reference: &[u8], engine: &[u8]) -> bool {
    reference == engine || (reference == b"-0" && engine == b"0")
}

/// Whether the reference's zset at `key` holds more than one distinct score.
fn mixed_scores(r: &mut dyn Target, key: &[u8]) -> bool {
    let Some(items) = flat_items(&r.exec(&argv!["ZRANGE", key, "0", "-1", "WITHSCORES"])) else {
        return false;
    };
    let mut scores = items.iter().skip(1).step_by(2);
    let first = scores.next();
    scores.any(|s| Some(s) != first)
}

/// Iterates a SCAN-family command to cursor 0; `Err(reply)` for a reply that is not a
/// `[cursor, [elements]]` page (an error), or a fake error if it never ends.
fn scan_all(
    t: &mut dyn Target,
    op: &Op,
    cursor_arg: usize,
    pairs: bool,
) -> (Result<BTreeSet<String>, Reply>, usize) {
    let mut argv = op.argv.clone();
    let mut seen = BTreeSet::new();
    for calls in 1..=10_000 {
        let reply = t.exec(&argv);
        let Reply::Array(page) = &reply else { return (Err(reply), calls) };
        let [Reply::Bulk(cursor), Reply::Array(_)] = page.as_slice() else { return (Err(reply), calls) };
        if !matches!(shape(&page[1]).as_str(), "Array" | "Array<Bulk>") {
            return (Err(Reply::Error(format!("(scan page of {})", shape(&page[1])))), calls);
        }
        let Some(items) = canonical(&page[1], pairs) else { return (Err(reply), calls) };
        seen.extend(items);
        if cursor.as_ref() == b"0" {
            return (Ok(seen), calls);
        }
        argv[cursor_arg] = cursor.to_vec();
    }
    (Err(Reply::Error("(scan did not finish after 10000 calls)".into())), 10_000)
}

/// A key's elements, with their values or scores when it has them.
type Elements = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// The reference's contents of the key a random command reads: element → value/score.
fn snapshot(r: &mut dyn Target, op: &Op, rnd: &Random) -> Option<Elements> {
    let key = op.argv.get(1).cloned().unwrap_or_default();
    let (argv, pairs) = match rnd.snapshot {
        Snapshot::Set => (argv!["SMEMBERS", key], false),
        Snapshot::Hash => (argv!["HGETALL", key], true),
        Snapshot::Zset => (argv!["ZRANGE", key, "0", "-1", "WITHSCORES"], true),
        Snapshot::Keys => (argv!["KEYS", "*"], false),
    };
    let items = flat_items(&r.exec(&argv))?;
    Some(if pairs {
        items.chunks(2).map(|c| (c[0].clone(), c.get(1).cloned())).collect()
    } else {
        items.into_iter().map(|m| (m, None)).collect()
    })
}

/// Checks a random reply against the snapshot; returns the elements it named. A zset's score
/// `-0` in the snapshot matches `0` from the engine, as in [`same_modulo_stored_negative_zero`].
fn check_random(
    reply: &Reply,
    snap: &[(Vec<u8>, Option<Vec<u8>>)],
    rnd: &Random,
) -> Result<Vec<Vec<u8>>, String> {
    let lookup = |m: &[u8]| snap.iter().find(|(k, _)| k == m).map(|(_, v)| v.clone());
    let Some(count) = rnd.count else {
        let m = bytes_of(reply).ok_or("expected one bulk element")?;
        lookup(&m).ok_or_else(|| format!("{} is not in the key", quote(&m)))?;
        return Ok(vec![m]);
    };
    let items = flat_items(reply).ok_or("expected an array of bulk strings (or pairs)")?;
    let step = if rnd.with_values { 2 } else { 1 };
    if items.len() % step != 0 {
        return Err("odd number of items with values".into());
    }
    let mut names = Vec::new();
    for chunk in items.chunks(step) {
        let stored = lookup(&chunk[0]).ok_or_else(|| format!("{} is not in the key", quote(&chunk[0])))?;
        if rnd.with_values {
            let zset = matches!(rnd.snapshot, Snapshot::Zset);
            if !stored.as_deref().is_some_and(|s| s == chunk[1] || (zset && same_score(s, &chunk[1]))) {
                return Err(format!("{} comes with the wrong value {}", quote(&chunk[0]), quote(&chunk[1])));
            }
        }
        names.push(chunk[0].clone());
    }
    let expect = if count > 0 { (count as usize).min(snap.len()) } else { count.unsigned_abs() as usize };
    if names.len() != expect {
        return Err(format!("{} elements, expected {expect}", names.len()));
    }
    if count > 0 && names.iter().collect::<BTreeSet<_>>().len() != names.len() {
        return Err("repeated elements for a positive count".into());
    }
    Ok(names)
}

fn compare_random(r: &mut dyn Target, e: &mut dyn Target, op: &Op, rnd: &Random) -> Result<usize, String> {
    let snap = snapshot(r, op, rnd);
    let a = r.exec(&op.argv);
    let b = e.exec(&op.argv);
    let exact =
        a.is_error() || b.is_error() || snap.as_ref().is_none_or(|s| s.is_empty()) || rnd.count == Some(0);
    if exact {
        return if a == b { Ok(1) } else { Err(mismatch("replies differ", &a, &b)) };
    }
    if shape(&a) != shape(&b) {
        return Err(mismatch(&format!("reply kinds differ: {} and {}", shape(&a), shape(&b)), &a, &b));
    }
    let snap = snap.unwrap_or_default();
    let got_a =
        check_random(&a, &snap, rnd).map_err(|m| mismatch(&format!("redis reply invalid?! {m}"), &a, &b))?;
    let got_b =
        check_random(&b, &snap, rnd).map_err(|m| mismatch(&format!("engine reply invalid: {m}"), &a, &b))?;
    if rnd.pops {
        // Make the engine's set equal to Redis' again: give back what only it popped,
        // remove what only Redis popped.
        let key = op.argv[1].clone();
        let only_b: Vec<Vec<u8>> = got_b.iter().filter(|m| !got_a.contains(m)).cloned().collect();
        let only_a: Vec<Vec<u8>> = got_a.iter().filter(|m| !got_b.contains(m)).cloned().collect();
        for (fix, members) in [("SADD", only_b), ("SREM", only_a)] {
            if members.is_empty() {
                continue;
            }
            let mut argv = argv![fix, key.clone()];
            argv.extend(members);
            let reply = e.exec(&argv);
            if reply.is_error() {
                let op = Op { argv, cmp: Cmp::Exact };
                return Err(format!("resync {} failed: {}", op.display(), show(&reply)));
            }
        }
    }
    Ok(1)
}

/// The first divergence of a sequence: the op index (`ops.len()` for the final state
/// check) and the description.
struct Divergence {
    index: usize,
    what: String,
}

/// Runs `ops` from a clean state on both sides, then compares every pool key's state.
fn run_ops(
    r: &mut dyn Target,
    e: &mut dyn Target,
    ops: &[Op],
    names: &BTreeSet<&str>,
) -> Result<usize, Divergence> {
    r.reset();
    e.reset();
    txn_reset();
    let mut compared = 0;
    for (index, op) in ops.iter().enumerate() {
        compared += compare_op(r, e, op)
            .map_err(|what| Divergence { index, what: format!("{}\n      {what}", op.display()) })?
            .0;
    }
    let fail = |op: &Op, what: String| Divergence {
        index: ops.len(),
        what: format!("final state check: {}\n      {what}", op.display()),
    };
    // Close every open transaction, then check the state from connection 0.
    for conn in (0..gen_txn::CONNS).rev() {
        let switch = Op { argv: argv!["\u{0}CONN", conn.to_string()], cmp: Cmp::Conn(conn) };
        compare_op(r, e, &switch).map_err(|w| fail(&switch, w))?;
        if TXN.with_borrow(|t| t.1[conn].is_some()) {
            let discard = exact(argv!["DISCARD"]);
            compare_op(r, e, &discard).map_err(|w| fail(&discard, w))?;
        }
    }
    let select = exact(argv!["SELECT", "0"]);
    compare_op(r, e, &select).map_err(|w| fail(&select, w))?;
    for key in KEYS {
        let ty = exact(argv!["TYPE", *key]);
        let (_, ty_reply) = compare_op(r, e, &ty).map_err(|w| fail(&ty, w))?;
        let read = match &ty_reply {
            Reply::Status(t) if t == "string" => Some(("get", exact(argv!["GET", *key]))),
            Reply::Status(t) if t == "list" => Some(("lrange", exact(argv!["LRANGE", *key, "0", "-1"]))),
            Reply::Status(t) if t == "set" => Some(("smembers", unordered(argv!["SMEMBERS", *key]))),
            Reply::Status(t) if t == "hash" => Some(("hgetall", pairs(argv!["HGETALL", *key]))),
            Reply::Status(t) if t == "zset" => {
                Some(("zrange", exact(argv!["ZRANGE", *key, "0", "-1", "WITHSCORES"])))
            }
            Reply::Status(t) if t == "stream" => Some(("xrange", exact(argv!["XRANGE", *key, "-", "+"]))),
            _ => None,
        };
        let checks = read.into_iter().chain(Some(("pttl", within_millis(argv!["PTTL", *key], 2000))));
        for (name, op) in checks {
            if names.contains(name) {
                compared += compare_op(r, e, &op).map_err(|w| fail(&op, w))?.0;
            }
        }
    }
    Ok(compared)
}

/// Delta debugging: drop chunks of ops (halves, quarters, … single ops) while the sequence
/// still diverges; cut everything after the divergence. Bounded by `budget` replays.
fn shrink(
    r: &mut dyn Target,
    e: &mut dyn Target,
    mut ops: Vec<Op>,
    names: &BTreeSet<&str>,
    budget: usize,
) -> (Vec<Op>, Divergence) {
    let mut last = run_ops(r, e, &ops, names).expect_err("the failing sequence diverges again when replayed");
    ops.truncate((last.index + 1).min(ops.len()));
    let mut n = 2;
    let mut tries = 0;
    while ops.len() > 1 && tries < budget {
        let chunk = ops.len().div_ceil(n);
        let mut reduced = false;
        let mut start = 0;
        while start < ops.len() && tries < budget {
            let mut candidate = ops.clone();
            candidate.drain(start..(start + chunk).min(ops.len()));
            tries += 1;
            if let Err(d) = run_ops(r, e, &candidate, names) {
                candidate.truncate((d.index + 1).min(candidate.len()));
                ops = candidate;
                last = d;
                reduced = true;
                break;
            }
            start += chunk;
        }
        if reduced {
            n = (n - 1).max(2);
        } else if n >= ops.len() {
            break;
        } else {
            n = (n * 2).min(ops.len());
        }
    }
    (ops, last)
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().replace('_', "").parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a number")))
}

std::thread_local! {
    /// The record layout the engine under test writes (each test thread sets its own).
    static LAYOUT: std::cell::RefCell<KeyLayout> = std::cell::RefCell::new(KeyLayout::default());
}

#[test]
fn engine_replies_match_redis() {
    compare_with_redis(KeyLayout::default(), &[]);
}

/// The same comparison with Kvrocks' cluster form (`cluster-enabled yes`: the slot in every
/// key), named `kvrocks-cluster` in `DIFF_LAYOUTS`.
#[test]
fn engine_on_kvrocks_cluster_layout_replies_match_redis() {
    compare_with_redis(KeyLayout::default().with_cluster_slots(true), &[]);
}

/// The same comparison with NeoKV's records. NeoKV has no stream type, so the stream
/// family is left out (an XADD there answers an error, see docs/layouts.md).
#[test]
fn engine_on_neokv_layout_replies_match_redis() {
    compare_with_redis(KeyLayout::neokv(1, 2), &["stream"]);
}

/// The same comparison with camellia-redis-proxy-kv's records (counted collections,
/// encode version 0: what redis-server answers). camellia-kv has no list or stream type, so
/// those families are left out, and SORT, whose STORE writes a list (an LPUSH, XADD or SORT
/// … STORE there answers an error, see docs/layouts.md); SORT_RO still runs.
#[test]
fn engine_on_camellia_layout_replies_match_redis() {
    compare_with_redis(KeyLayout::camellia(b"rediskv"), &["list", "stream", "sort"]);
}

/// The same comparison with TiTea's records (16-byte object ids, its own index records).
/// TiTea has no stream type, so that family is left out.
#[test]
fn engine_on_titea_layout_replies_match_redis() {
    compare_with_redis(KeyLayout::titea(b"default.default"), &["stream"]);
}

/// Runs the comparison with the engine writing `layout`'s records, without the families
/// or generators named in `unsupported` (the layout's system cannot store their type). `DIFF_LAYOUTS`
/// (`kvrocks,kvrocks-cluster,neokv,camellia,titea`) picks which layouts run.
fn compare_with_redis(layout: KeyLayout, unsupported: &[&str]) {
    let name = match layout.kind() {
        LayoutKind::Kvrocks if layout.cluster_slots() => "kvrocks-cluster",
        kind => kind.name(),
    };
    if std::env::var("DIFF_LAYOUTS").is_ok_and(|v| !v.split(',').any(|l| l == name)) {
        eprintln!("differential on the {name} layout: not in DIFF_LAYOUTS");
        return;
    }
    LAYOUT.set(layout);
    if !RUN_BY_DEFAULT && std::env::var("DIFF_FJALL").as_deref() != Ok("1") {
        eprintln!("differential on a disk engine: skipped (set DIFF_FJALL=1 to run it)");
        return;
    }
    if !RedisServer::available() {
        missing_redis("differential test");
        return;
    }
    let server = RedisServer::start().expect("start redis-server");
    let mut reference = Remote::new(&server);
    let version = reference.exec(&argv!["INFO", "server"]);
    if let Some(info) = bytes_of(&version) {
        let info = String::from_utf8_lossy(&info);
        if let Some(v) = info.lines().find_map(|l| l.strip_prefix("redis_version:"))
            && !v.starts_with("7.0") {
                eprintln!("differential: note: reference is redis {v}, the engine targets 7.0");
            }
    }

    let against_redis = std::env::var("DIFF_AGAINST").is_ok_and(|v| v == "redis");
    AGAINST_REDIS.store(against_redis, std::sync::atomic::Ordering::Relaxed);
    let second_server;
    let mut subject: Box<dyn Target> = if against_redis {
        second_server = RedisServer::start().expect("start the second redis-server");
        Box::new(Remote::new(&second_server))
    } else {
        Box::new(Engine::new())
    };

    let spec: Vec<String> = match std::env::var("DIFF_FAMILIES") {
        Ok(v) if v == "all" => FAMILIES.iter().map(|(f, _, _)| f.to_string()).collect(),
        Ok(v) => v.split(',').map(str::to_string).collect(),
        Err(_) => ENABLED_FAMILIES.iter().filter(|f| !SKIPPED_BY_DEFAULT.contains(f)).map(|s| s.to_string()).collect(),
    };
    let left_out: Vec<&String> = spec.iter().filter(|f| unsupported.contains(&f.as_str())).collect();
    if !left_out.is_empty() {
        eprintln!("differential on the {name} layout: {left_out:?} left out (no such type in {name})");
    }
    let spec: Vec<String> = spec.iter().filter(|f| !unsupported.contains(&f.as_str())).cloned().collect();
    let (mut gens, _) = enabled(&spec);
    let dropped: Vec<&str> = gens.iter().map(|g| g.name).filter(|n| unsupported.contains(n)).collect();
    if !dropped.is_empty() {
        eprintln!("differential on the {name} layout: commands {dropped:?} left out (they write a type {name} lacks)");
    }
    gens.retain(|g| !unsupported.contains(&g.name));
    let names: BTreeSet<&'static str> = gens.iter().map(|g| g.name).collect();
    assert!(!gens.is_empty(), "no generator enabled");

    let total = env_usize("DIFF_OPS").unwrap_or(DEFAULT_OPS);
    let seed = std::env::var("DIFF_SEED")
        .ok()
        .map(|s| s.trim().parse::<u64>().expect("DIFF_SEED is a u64"))
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64));
    eprintln!(
        "differential ({name} layout): seed {seed}, {} generators ({} families: {})",
        gens.len(),
        spec.len(),
        spec.join(" | ")
    );

    let only = std::env::var("DIFF_PROTOCOL").ok();
    let mut rng = Rng::new(seed);
    let mut compared = 0;
    let mut per_protocol = [0; 2];
    let mut sequence = 0;
    while compared < total {
        sequence += 1;
        let resp3 = match only.as_deref() {
            Some("3") => true,
            Some("2") => false,
            _ => sequence % 2 == 0,
        };
        PROTOCOL.set(if resp3 { Protocol::Resp3 } else { Protocol::Resp2 });
        let len = rng.range(20, 250) as usize;
        let ops: Vec<Op> = (0..len).map(|_| generate(&mut rng, &gens)).collect();
        match run_ops(&mut reference, subject.as_mut(), &ops, &names) {
            Ok(n) => {
                compared += n;
                per_protocol[usize::from(resp3)] += n;
            }
            Err(first) => {
                eprintln!(
                    "differential: divergence in sequence {sequence} ({:?}, seed {seed}) at command {}:\n      {}",
                    protocol(),
                    first.index + 1,
                    first.what
                );
                let (small, last) = shrink(&mut reference, subject.as_mut(), ops, &names, 3000);
                let mut text = format!(
                    "\ndifferential ({name} layout): DIVERGENCE (seed {seed}, sequence {sequence}, {:?}; rerun with DIFF_LAYOUTS={name} DIFF_SEED={seed})\n\
                     shrunk to {} command(s), run on an empty database (FLUSHALL / fresh Db):\n",
                    protocol(),
                    small.len()
                );
                for (i, op) in small.iter().enumerate() {
                    text.push_str(&format!("  {:>3}. {}\n", i + 1, op.display()));
                }
                text.push_str(&format!(
                    "diverges at {}:\n      {}\n",
                    if last.index >= small.len() {
                        "the end".to_string()
                    } else {
                        format!("command {}", last.index + 1)
                    },
                    last.what
                ));
                panic!("{text}");
            }
        }
    }
    if std::env::var("DIFF_STATS").is_ok_and(|v| v == "1") {
        STATS.with_borrow(|stats| {
            for (name, (ok, err)) in stats {
                println!("  {name:<18} {ok:>7} ok {err:>7} error");
            }
        });
    }
    println!(
        "differential ({name} layout): {compared} commands compared ({} in RESP2, {} in RESP3), seed {seed}",
        per_protocol[0], per_protocol[1]
    );
}

/// A toy key-value target for checking the runner and the shrinker without Redis.
struct Toy {
    map: std::collections::HashMap<Vec<u8>, Vec<u8>>,
    /// Bug to plant: DEL of `k1` answers 0 and keeps the key.
    buggy: bool,
}

impl Target for Toy {
    fn exec(&mut self, argv: &[Vec<u8>]) -> Reply {
        match argv[0].as_slice() {
            b"SET" => {
                self.map.insert(argv[1].clone(), argv[2].clone());
                Reply::OK
            }
            b"GET" => Reply::bulk_or_nil(self.map.get(&argv[1]).map(|v| Bytes::copy_from_slice(v))),
            b"DEL" if self.buggy && argv[1] == b"k1" => Reply::Integer(0),
            b"DEL" => Reply::Integer(i64::from(self.map.remove(&argv[1]).is_some())),
            _ => Reply::Error("ERR unknown command".into()),
        }
    }
    fn reset(&mut self) {
        self.map.clear();
    }
}

#[test]
fn shrinker_finds_the_minimal_divergent_sequence() {
    let mut rng = Rng::new(3);
    let keys: [&[u8]; 3] = [b"k0", b"k1", b"k2"];
    let ops: Vec<Op> = (0..300)
        .map(|i| {
            let key = keys[rng.below(3)];
            match rng.below(3) {
                0 => exact(argv!["SET", key, format!("v{i}")]),
                1 => exact(argv!["GET", key]),
                // Deletes of k1 only late in the sequence, so the shrinker has work to do.
                _ if key == b"k1" && i < 250 => exact(argv!["GET", key]),
                _ => exact(argv!["DEL", key]),
            }
        })
        .collect();
    let mut good = Toy { map: Default::default(), buggy: false };
    let mut bad = Toy { map: Default::default(), buggy: true };
    let names = BTreeSet::new();
    assert!(run_ops(&mut good, &mut Toy { map: Default::default(), buggy: false }, &ops, &names).is_ok());
    let (small, last) = shrink(&mut good, &mut bad, ops, &names, 3000);
    let shown: Vec<String> = small.iter().map(Op::display).collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(shown[0].starts_with("\"SET\" \"k1\""), "{shown:?}");
    assert_eq!(shown[1], "\"DEL\" \"k1\"");
    assert_eq!(last.index, 1);
    assert!(last.what.contains(":1") && last.what.contains(":0"), "{}", last.what);
}

#[test]
fn comparison_modes() {
    let mut a = Toy { map: Default::default(), buggy: false };
    let mut b = Toy { map: Default::default(), buggy: false };
    a.exec(&argv!["SET", "x", "1"]);
    b.exec(&argv!["SET", "x", "1"]);
    // A fake target whose GET answers differently is caught; tolerance applies to integers
    // only when both are non-negative.
    assert!(compare_op(&mut a, &mut b, &exact(argv!["GET", "x"])).is_ok());
    assert!(compare_op(&mut a, &mut b, &exact(argv!["GET", "nope"])).is_ok());
    b.exec(&argv!["SET", "x", "2"]);
    assert!(compare_op(&mut a, &mut b, &exact(argv!["GET", "x"])).is_err());
    assert_eq!(canonical(&Reply::bulks(["b", "a"]), false), canonical(&Reply::bulks(["a", "b"]), false));
    assert_eq!(
        canonical(&Reply::bulks(["f2", "v2", "f1", "v1"]), true),
        canonical(&Reply::bulks(["f1", "v1", "f2", "v2"]), true)
    );
    assert_ne!(
        canonical(&Reply::bulks(["f1", "v2", "f2", "v1"]), true),
        canonical(&Reply::bulks(["f1", "v1", "f2", "v2"]), true)
    );
    // Times agree within their slack, widened by the sequence's slowest Redis round trip
    // converted to their unit; negative codes exactly.
    let pttl = Cmp::Tolerance { slack: 2000, unit_ms: 1 };
    let ttl = Cmp::Tolerance { slack: 2, unit_ms: 1000 };
    let int = Reply::Integer;
    REDIS_TIME.set((0, 0));
    assert!(same_reply(&pttl, &int(1_000_000), &int(998_000)));
    assert!(!same_reply(&pttl, &int(1_000_000), &int(997_999)));
    assert!(!same_reply(&ttl, &int(100), &int(97)));
    assert!(!same_reply(&pttl, &int(-1), &int(5)));
    REDIS_TIME.set((0, 6_500));
    assert!(same_reply(&pttl, &int(1_000_000), &int(991_500)));
    assert!(!same_reply(&pttl, &int(1_000_000), &int(991_499)));
    assert!(same_reply(&ttl, &int(100), &int(91)));
    assert!(!same_reply(&ttl, &int(100), &int(90)));
    assert!(!same_reply(&ttl, &int(-2), &int(-1)));
    REDIS_TIME.set((0, 0));
    let snap = vec![(b"a".to_vec(), Some(b"1".to_vec())), (b"b".to_vec(), Some(b"2".to_vec()))];
    let rnd = |count, with_values| Random { snapshot: Snapshot::Hash, count, with_values, pops: false };
    assert!(check_random(&Reply::bulk(b"a"), &snap, &rnd(None, false)).is_ok());
    assert!(check_random(&Reply::bulk(b"z"), &snap, &rnd(None, false)).is_err());
    assert!(check_random(&Reply::bulks(["a", "b"]), &snap, &rnd(Some(5), false)).is_ok());
    assert!(check_random(&Reply::bulks(["a", "a"]), &snap, &rnd(Some(5), false)).is_err());
    assert!(check_random(&Reply::bulks(["a", "a", "a"]), &snap, &rnd(Some(-3), false)).is_ok());
    assert!(check_random(&Reply::bulks(["a", "1", "b", "2"]), &snap, &rnd(Some(2), true)).is_ok());
    assert!(check_random(&Reply::bulks(["a", "2"]), &snap, &rnd(Some(1), true)).is_err());
}
