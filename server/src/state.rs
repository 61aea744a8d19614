//! What every connection shares: the configuration, the counters INFO reports, the list
//! of connected clients (CLIENT LIST/KILL), and a client pause.
//!
//! Everything is behind atomics or short locks, so several event-loop threads can share one
//! `State` through an `Arc`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rediskv::codec::KeyLayout;
use rediskv::commands::Engine;

use crate::config::Config;
use crate::conn::{Mailbox, Message};
use crate::store::{Backend, Store};

/// The engine type: the library's thread-safe `Engine` over the shared store.
pub type SharedEngine = Engine<Backend>;

/// Kvrocks' name for the namespace of the admin (requirepass) connections.
pub const DEFAULT_NAMESPACE: &str = "__namespace";

/// Locks a mutex, going on after a panic elsewhere (the data is plain counters and names).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Microseconds since the Unix epoch.
pub fn unix_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
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

/// INFO commandstats: lock-free counters for every command of the library's table (every
/// command passes here, on every event loop), a locked map for the few other names.
#[derive(Debug)]
pub struct CommandStats {
    rows: Box<[[AtomicU64; 4]]>,
    buckets: Box<[[AtomicU64; LATENCY_BUCKETS]]>,
    other: Mutex<BTreeMap<String, CommandStat>>,
    /// `latency-tracking`: whether calls fill the latency buckets.
    pub tracking: AtomicBool,
}

impl Default for CommandStats {
    fn default() -> Self {
        let rows = rediskv::commands::table::all().iter().map(|_| Default::default()).collect();
        let buckets = rediskv::commands::table::all()
            .iter()
            .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
            .collect();
        CommandStats { rows, buckets, other: Mutex::default(), tracking: AtomicBool::new(true) }
    }
}

impl CommandStats {
    /// Counts one call of the command of row `info` (`None` µs: refused before running).
    pub fn count(&self, info: &rediskv::commands::table::CommandInfo, usec: Option<u64>, failed: bool) {
        // calls, µs, rejected, failed
        let delta = match usec {
            None => [0, 0, 1, 0],
            Some(usec) => [1, usec, 0, u64::from(failed)],
        };
        let bucket = usec.filter(|_| self.tracking.load(Relaxed)).map(latency_bucket);
        match info.position() {
            Some(row) => self.add_row(row, delta, bucket),
            None => self.add(info.name, delta, bucket, crate::client::MAX_STAT_ENTRIES),
        }
    }

    /// Counts a failure of a call counted when it blocked (its answer, when served, was an
    /// error: an XREADGROUP whose group was destroyed).
    pub fn count_failure(&self, name: &str, max_other: usize) {
        self.add(name, [0, 0, 0, 1], None, max_other);
    }

    fn add_row(&self, row: usize, delta: [u64; 4], bucket: Option<usize>) {
        for (counter, n) in self.rows[row].iter().zip(delta) {
            if n > 0 {
                counter.fetch_add(n, Relaxed);
            }
        }
        if let Some(b) = bucket {
            self.buckets[row][b].fetch_add(1, Relaxed);
        }
    }

    fn add(&self, name: &str, delta: [u64; 4], bucket: Option<usize>, max_other: usize) {
        if let Some(row) = rediskv::commands::table::position(name) {
            return self.add_row(row, delta, bucket);
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
        for (info, row) in rediskv::commands::table::all().iter().zip(self.rows.iter()) {
            let [calls, usec, rejected, failed] = row.each_ref().map(|c| c.load(Relaxed));
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
        for (info, row) in rediskv::commands::table::all().iter().zip(self.buckets.iter()) {
            let buckets = row.each_ref().map(|c| c.load(Relaxed));
            all.insert(info.name.to_string(), (buckets.iter().sum(), buckets));
        }
        all.retain(|_, (calls, _)| *calls > 0);
        all
    }

    fn reset(&self) {
        self.rows.iter().flatten().for_each(|c| c.store(0, Relaxed));
        self.buckets.iter().flatten().for_each(|c| c.store(0, Relaxed));
        lock(&self.other).clear();
    }
}

/// Counters INFO reports; CONFIG RESETSTAT zeroes them.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections_received: AtomicU64,
    /// Connections refused (maxclients).
    pub rejected_connections: AtomicU64,
    /// Commands run.
    pub commands_processed: AtomicU64,
    /// Bytes read from clients.
    pub net_input: AtomicU64,
    /// Bytes written to clients.
    pub net_output: AtomicU64,
    /// Read commands that found their key.
    pub keyspace_hits: AtomicU64,
    /// Read commands that did not.
    pub keyspace_misses: AtomicU64,
    /// Error replies sent.
    pub error_replies: AtomicU64,
    /// Per command name (`config|get` for subcommands).
    pub commands: CommandStats,
    /// Error replies by their first word (`ERR`, `WRONGTYPE`…).
    pub errors: Mutex<BTreeMap<String, u64>>,
    /// Deleted big collections whose records the collector has reclaimed
    /// ([`crate::maint::MaintStats::lazyfree_credited`]).
    pub lazyfreed_objects: AtomicU64,
}

impl Stats {
    /// Zeroes every counter.
    pub fn reset(&self) {
        for c in [
            &self.connections_received,
            &self.rejected_connections,
            &self.commands_processed,
            &self.net_input,
            &self.net_output,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.error_replies,
            &self.lazyfreed_objects,
        ] {
            c.store(0, Relaxed);
        }
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
    fn new() -> Sampler {
        Sampler { at: Instant::now(), last: [0; 3], rates: [[0; 16]; 3], next: 0 }
    }

    /// The mean rate of counter `i` (0 commands, 1 input bytes, 2 output bytes) per second.
    pub fn rate(&self, i: usize) -> u64 {
        self.rates[i].iter().sum::<u64>() / 16
    }
}

/// What others may see of a connection (CLIENT LIST) and the flag CLIENT KILL sets.
#[derive(Debug)]
pub struct ClientInfo {
    /// CLIENT ID.
    pub id: u64,
    /// The peer's `ip:port`.
    pub addr: String,
    /// The local `ip:port` the client connected to.
    pub laddr: String,
    /// The socket's file descriptor.
    pub fd: i64,
    /// When it connected.
    pub created: Instant,
    /// When it last ran a command: µs after `created`. Atomics, not a lock: every command
    /// sets them.
    last_at: AtomicU64,
    /// Which command it last ran: its row in the command table (`usize::MAX`: none, or the
    /// name in `last_other`).
    last_cmd: AtomicUsize,
    /// The last command's name when the table has no row for it (rare: a mistyped name).
    last_other: Mutex<String>,
    /// CLIENT SETNAME.
    pub name: Mutex<Option<Bytes>>,
    /// The SELECTed database.
    pub db: AtomicUsize,
    /// Bytes waiting in its query buffer / output buffer.
    pub qbuf: AtomicUsize,
    /// Bytes of replies not yet written.
    pub omem: AtomicUsize,
    /// CLIENT NO-EVICT on.
    pub no_evict: AtomicBool,
    /// The RESP version it speaks (HELLO).
    pub resp: AtomicU8,
    /// A command of it waits for a CLIENT PAUSE to end (flag `b`, as Redis' postponed clients).
    pub blocked: AtomicBool,
    /// The Kvrocks namespace it authenticated into (`None`: the default one, admin).
    pub namespace: Mutex<Option<String>>,
    /// CLIENT KILL: close as soon as possible.
    pub killed: AtomicBool,
    /// The ACL user it is logged in as.
    pub user: Mutex<Vec<u8>>,
    /// CLIENT TRACKING's options, when on.
    pub tracking: Mutex<Option<crate::tracking::Mode>>,
    /// The event loop that owns the connection, and its token there (where messages go).
    pub loop_index: usize,
    /// See `loop_index`.
    pub token: usize,
    /// Channels, patterns and shard channels it subscribes to (CLIENT LIST sub/psub/ssub).
    pub subscriptions: [AtomicUsize; 3],
}

impl ClientInfo {
    /// A new client entry with the next id.
    pub fn new(id: u64, addr: String, laddr: String, fd: i64, loop_index: usize, token: usize) -> ClientInfo {
        let now = Instant::now();
        ClientInfo {
            id,
            addr,
            laddr,
            fd,
            created: now,
            last_at: AtomicU64::new(0),
            last_cmd: AtomicUsize::new(usize::MAX),
            last_other: Mutex::new("NULL".into()),
            name: Mutex::new(None),
            db: AtomicUsize::new(0),
            qbuf: AtomicUsize::new(0),
            omem: AtomicUsize::new(0),
            no_evict: AtomicBool::new(false),
            blocked: AtomicBool::new(false),
            resp: AtomicU8::new(2),
            namespace: Mutex::new(None),
            killed: AtomicBool::new(false),
            user: Mutex::new(b"default".to_vec()),
            tracking: Mutex::new(None),
            loop_index,
            token,
            subscriptions: Default::default(),
        }
    }

    /// Seconds since its last command.
    pub fn idle(&self) -> u64 {
        let last = Duration::from_micros(self.last_at.load(Relaxed));
        self.created.elapsed().saturating_sub(last).as_secs()
    }

    /// Records that it runs (or ran until) `at`, and, when `name` is given, which command.
    pub fn ran(&self, at: Instant, name: Option<&str>) {
        self.last_at.store(at.saturating_duration_since(self.created).as_micros() as u64, Relaxed);
        if let Some(name) = name {
            match rediskv::commands::table::position(name) {
                Some(row) => self.last_cmd.store(row, Relaxed),
                None => {
                    self.last_cmd.store(usize::MAX, Relaxed);
                    name.clone_into(&mut lock(&self.last_other));
                }
            }
        }
    }

    /// The name of the command it last ran (`NULL` before any).
    fn last_command(&self) -> String {
        match rediskv::commands::table::all().get(self.last_cmd.load(Relaxed)) {
            Some(info) => info.name.to_string(),
            None => lock(&self.last_other).clone(),
        }
    }

    /// One CLIENT LIST line (without the newline), fields as Redis 7.0 prints them.
    pub fn line(&self) -> String {
        let name = lock(&self.name).as_deref().map(String::from_utf8_lossy).unwrap_or_default().into_owned();
        let cmd = self.last_command();
        let [sub, psub, ssub] = self.subscriptions.each_ref().map(|n| n.load(Relaxed));
        let tracking = lock(&self.tracking).clone();
        let mut flags = String::new();
        for (on, flag) in [
            (sub + psub + ssub > 0, 'P'),
            (self.blocked.load(Relaxed), 'b'),
            (tracking.is_some(), 't'),
            (tracking.as_ref().is_some_and(|m| m.broken_redirect), 'R'),
            (tracking.as_ref().is_some_and(|m| m.bcast), 'B'),
            (self.no_evict.load(Relaxed), 'e'),
        ] {
            if on {
                flags.push(flag);
            }
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let (qbuf, omem) = (self.qbuf.load(Relaxed), self.omem.load(Relaxed));
        format!(
            "id={} addr={} laddr={} fd={} name={name} age={} idle={} flags={flags} db={} sub={sub} psub={psub} ssub={ssub} \
             multi=-1 qbuf={qbuf} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={omem} \
             tot-mem={} events=r cmd={cmd} user={} redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            self.created.elapsed().as_secs(),
            self.idle(),
            self.db.load(Relaxed),
            qbuf + omem,
            String::from_utf8_lossy(&lock(&self.user)),
            tracking.map_or(-1, |m| m.redirect as i64),
            self.resp.load(Relaxed),
        )
    }
}

/// CLIENT PAUSE: until when, and whether only writes wait.
#[derive(Debug, Clone, Copy)]
pub struct Pause {
    /// The pause ends then.
    pub until: Instant,
    /// WRITE mode (otherwise ALL).
    pub writes_only: bool,
}

/// Everything connections share.
pub struct State {
    config: RwLock<Config>,
    /// INFO counters.
    pub stats: Stats,
    /// Connected clients by id.
    pub clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
    /// Connections handed to the loops and not yet closed (maxclients; counted by the
    /// acceptor, before a loop registers the client).
    pub connections: AtomicUsize,
    /// Each event loop's mailbox, by loop index (set once the loops start).
    pub loops: std::sync::OnceLock<Vec<Arc<Mailbox>>>,
    /// The listening address, and its replacement after CONFIG SET port/bind.
    pub listen: crate::conn::Listen,
    /// CLIENT PAUSE in force.
    pub pause: Mutex<Option<Pause>>,
    /// Whether `pause` may hold something (checked before taking its lock).
    pub pause_active: AtomicBool,
    /// instantaneous_ops_per_sec and the kbps figures of INFO stats.
    pub sampler: Mutex<Sampler>,
    /// The `maxmemory` parameter, kept here so write commands need not read the config.
    pub maxmemory: AtomicU64,
    /// The `proto-max-bulk-len` parameter, kept here so the request parser need not read
    /// the config.
    pub max_bulk: AtomicI64,
    /// SLOWLOG.
    pub slowlog: crate::slowlog::SlowLog,
    /// MONITOR's clients.
    pub monitors: crate::monitor::Monitors,
    /// The latency monitor (LATENCY).
    pub latency: crate::latency::Latency,
    /// The store every connection's database lives in.
    pub store: Store,
    /// ACL users and the ACL log.
    pub acl: crate::acl::Acl,
    /// CLIENT TRACKING's table.
    pub tracking: crate::tracking::Tracking,
    /// The script cache and the function libraries.
    pub scripts: crate::scripting::Scripts,
    /// The engine of the default namespace (admin connections).
    pub engine: Arc<SharedEngine>,
    /// DEBUG SET-ACTIVE-EXPIRE: whether the maintenance thread expires keys.
    pub active_expire: AtomicBool,
    /// What active expiry and the collector did (INFO).
    pub maint: crate::maint::MaintStats,
    /// `notify-keyspace-events` as `NotifyFlags` bits (0: off, the fast path).
    pub notify_flags: std::sync::atomic::AtomicU32,
    /// Clients parked by blocking commands.
    pub blocked: crate::blocking::Blocked,
    /// Every subscription (pub/sub).
    pub pubsub: crate::pubsub::PubSub,
    /// The engine of each tenant namespace, made when a tenant first logs in.
    tenants: Mutex<BTreeMap<String, Arc<SharedEngine>>>,
    /// When the server started.
    pub started: Instant,
    /// When the last SAVE or BGSAVE finished, in Unix seconds (the start time before any).
    pub last_save: Arc<AtomicU64>,
    /// Whether a BGSAVE is running.
    pub bgsave: Arc<AtomicBool>,
    /// Changes since the last SAVE or BGSAVE (INFO `rdb_changes_since_last_save`, see
    /// [`crate::notify::command_events`]).
    pub dirty: Arc<AtomicU64>,
    /// INFO run_id: 40 hex digits, new for each start.
    pub run_id: String,
    next_client_id: AtomicU64,
}

impl State {
    /// Shared state over `config` and `store`.
    pub fn new(config: Config, store: Store, layout: KeyLayout) -> State {
        let micros = unix_micros();
        let seed = micros ^ u64::from(std::process::id()).rotate_left(32);
        let run_id = (0..5u64)
            .map(|i| {
                format!(
                    "{:08x}",
                    (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(i as u32 * 13)) as u32
                )
            })
            .collect();
        let maxmemory = config.number("maxmemory").max(0) as u64;
        let max_bulk = config.number("proto-max-bulk-len");
        let slowlog = crate::slowlog::SlowLog::default();
        slowlog.configure(&config);
        let latency = crate::latency::Latency::default();
        latency.configure(&config);
        let stats = Stats::default();
        stats.commands.tracking.store(config.get("latency-tracking") == "yes", Relaxed);
        let acl = crate::acl::Acl::default();
        acl.set_default_password(Some(config.get("requirepass").as_bytes()));
        State {
            acl,
            tracking: Default::default(),
            scripts: Default::default(),
            slowlog,
            latency,
            monitors: Default::default(),
            engine: Arc::new(engine(&store, layout, DEFAULT_NAMESPACE)),
            tenants: Mutex::new(BTreeMap::new()),
            pubsub: Default::default(),
            blocked: Default::default(),
            notify_flags: Default::default(),
            maint: Default::default(),
            active_expire: AtomicBool::new(true),
            config: RwLock::new(config),
            stats,
            clients: Mutex::new(BTreeMap::new()),
            loops: std::sync::OnceLock::new(),
            listen: crate::conn::Listen::default(),
            connections: AtomicUsize::new(0),
            pause: Mutex::new(None),
            pause_active: AtomicBool::new(false),
            maxmemory: AtomicU64::new(maxmemory),
            max_bulk: AtomicI64::new(max_bulk),
            sampler: Mutex::new(Sampler::new()),
            store,
            started: Instant::now(),
            last_save: Arc::new(AtomicU64::new(micros / 1_000_000)),
            dirty: Arc::new(AtomicU64::new(0)),
            bgsave: Arc::default(),
            run_id,
            next_client_id: AtomicU64::new(1),
        }
    }

    /// Takes one sample of the counters (the event loop calls it every tick).
    pub fn sample(&self) {
        let mut s = lock(&self.sampler);
        let elapsed = s.at.elapsed().as_millis() as u64;
        if elapsed == 0 {
            return;
        }
        let now = [&self.stats.commands_processed, &self.stats.net_input, &self.stats.net_output]
            .map(|c| c.load(Relaxed));
        let slot = s.next;
        let last = s.last;
        for ((rates, now), last) in s.rates.iter_mut().zip(now).zip(last) {
            rates[slot] = now.saturating_sub(last) * 1000 / elapsed;
        }
        s.last = now;
        s.at = Instant::now();
        s.next = (slot + 1) % 16;
    }

    /// The engine a tenant of namespace `ns` works in.
    pub fn tenant_engine(&self, ns: &str) -> Arc<SharedEngine> {
        lock(&self.tenants)
            .entry(ns.to_string())
            .or_insert_with(|| {
                // NAMESPACE and the start refuse tenants under layouts without namespaces; a
                // namespace over 255 bytes, which NAMESPACE refuses, falls back to the default.
                let layout = self.engine.layout().clone();
                let engine =
                    engine(&self.store, layout.clone().with_namespace(ns.as_bytes()).unwrap_or(layout), ns);
                let flags = rediskv::commands::NotifyFlags::from_bits(self.notify_flags.load(Relaxed));
                engine.set_new_events(flags.contains(rediskv::commands::NotifyFlags::NEW));
                engine.set_stream_node_entries(self.config().number("stream-node-max-entries").max(0) as u64);
                Arc::new(engine)
            })
            .clone()
    }

    /// The configuration, for reading.
    pub fn config(&self) -> RwLockReadGuard<'_, Config> {
        self.config.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The configuration, for CONFIG SET and NAMESPACE.
    pub fn config_mut(&self) -> RwLockWriteGuard<'_, Config> {
        self.config.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new connection and returns its entry.
    pub fn connect(
        &self,
        addr: String,
        laddr: String,
        fd: i64,
        loop_index: usize,
        token: usize,
    ) -> Arc<ClientInfo> {
        let id = self.next_client_id.fetch_add(1, Relaxed);
        let info = Arc::new(ClientInfo::new(id, addr, laddr, fd, loop_index, token));
        lock(&self.clients).insert(id, info.clone());
        self.stats.connections_received.fetch_add(1, Relaxed);
        info
    }

    /// Bytes the connections hold now: each one's state (its entry here and its client) and
    /// the query and reply bytes in its buffers (one read of each client).
    pub fn client_buffer_bytes(&self) -> u64 {
        let state = (std::mem::size_of::<ClientInfo>() + std::mem::size_of::<crate::client::Client>()) as u64;
        lock(&self.clients)
            .values()
            .map(|c| state + (c.qbuf.load(Relaxed) + c.omem.load(Relaxed)) as u64)
            .sum()
    }

    /// What `used_memory` and `maxmemory` count: the store's bytes and the connections'
    /// state and buffers, as Redis counts its dataset and its clients.
    pub fn used_memory(&self) -> u64 {
        self.store.used_bytes() + self.client_buffer_bytes()
    }

    /// Every engine: the default namespace's, then each tenant's.
    pub fn engines(&self) -> Vec<Arc<SharedEngine>> {
        let mut all = vec![self.engine.clone()];
        all.extend(lock(&self.tenants).values().cloned());
        all
    }

    /// Sends `message` to event loop `index` (ignored before the loops start).
    pub fn send(&self, index: usize, message: Message) {
        if let Some(mailbox) = self.loops.get().and_then(|l| l.get(index)) {
            mailbox.send(message);
        }
    }

    /// Asks every event loop to look at its connections now (CLIENT KILL, end of a pause).
    pub fn kick(&self) {
        for mailbox in self.loops.get().into_iter().flatten() {
            mailbox.send(Message::Kick);
        }
    }

    /// Forgets a closed connection.
    pub fn disconnect(&self, id: u64) {
        lock(&self.clients).remove(&id);
        self.monitors.remove(id);
        self.connections.fetch_sub(1, Relaxed);
    }

    /// Holds every engine's expiry until the CLIENT PAUSE in force ends (or lets it go
    /// when there is none): Redis neither expires nor evicts keys during a pause.
    pub fn hold_expiry(&self) {
        let left = lock(&self.pause).map(|p| p.until.saturating_duration_since(Instant::now()));
        for engine in self.engines() {
            let until = left.map_or(0, |left| engine.now_ms() + left.as_millis() as u64);
            engine.hold_expiry_until(until);
        }
    }

    /// Deleted collections of more than 64 records (Redis' lazyfree threshold) left for
    /// the collector, over every engine (see [`rediskv::commands::Engine::deferred_frees`]).
    pub fn deferred_frees(&self) -> u64 {
        self.engines().iter().map(|e| e.deferred_frees()).sum()
    }

    /// Whether a CLIENT PAUSE holds expiry now (the expire cycle waits).
    pub fn expiry_paused(&self) -> bool {
        self.pause_active.load(Relaxed) && self.paused(true).is_some()
    }

    /// The pause in force for a command (`write`: whether it writes), if any.
    pub fn paused(&self, write: bool) -> Option<Duration> {
        let mut pause = lock(&self.pause);
        match *pause {
            Some(p) if p.until <= Instant::now() => {
                *pause = None;
                self.pause_active.store(false, Relaxed);
                None
            }
            Some(p) if write || !p.writes_only => Some(p.until - Instant::now()),
            _ => None,
        }
    }
}

/// An engine writing `layout` (namespace `ns`) into `store`.
fn engine(store: &Store, layout: KeyLayout, ns: &str) -> SharedEngine {
    let engine = Engine::with_layout(store.backend(), layout);
    if let Some(slots) = store.load_db_slots(ns) {
        if !engine.restore_db_slots(&slots) {
            eprintln!("server: ignoring a corrupt SWAPDB record for namespace {ns}");
        }
    }
    engine
}
