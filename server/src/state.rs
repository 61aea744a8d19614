//! What every connection shares: the configuration, the counters INFO reports, the list
//! of connected clients (CLIENT LIST/KILL), and a client pause.
//!
//! Everything is behind atomics or short locks, so several event-loop threads can share one
//! `State` through an `Arc`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use rediskv::Engine;
use rediskv::KeyLayout;
use rediskv::server::Listeners;

use crate::client_info::{ClientInfo, Clients, Peers};
use crate::clock::unix_micros;
use crate::config::Config;
use crate::counters::{LaneSum, Sampler, Stats};
use crate::mailbox::Loops;
use crate::store::Store;
use crate::sync::lock;

pub use crate::store::SharedEngine;

/// Kvrocks' name for the namespace of the admin (requirepass) connections.
pub const DEFAULT_NAMESPACE: &str = "__namespace";

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
    pub clients: Clients,
    /// Connections handed to the loops and not yet closed (maxclients; counted by the
    /// acceptor, before a loop registers the client).
    pub connections: AtomicUsize,
    /// Each event loop's mailbox, by loop index (set once the loops start).
    pub loops: Loops,
    /// The listeners, which CONFIG SET port/tls-port/bind replaces.
    pub listen: crate::listen::Listen,
    /// The TLS contexts of `tls-port` and of the links the server dials.
    pub tls: crate::tls::Tls,
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
    /// The `client-query-buffer-limit` parameter, kept here so a read from a client need
    /// not read the config.
    pub query_buffer_limit: AtomicU64,
    /// SLOWLOG.
    pub slowlog: crate::slowlog::SlowLog,
    /// MONITOR's clients.
    pub monitors: crate::monitor::Monitors,
    /// The latency monitor (LATENCY).
    pub latency: crate::latency::Latency,
    /// The store every connection's database lives in.
    pub store: Store,
    /// Whether the store takes writes (INFO `aof_last_write_status`).
    pub writes: crate::store::WriteStatus,
    /// ACL users and the ACL log.
    pub acl: crate::acl::Acl,
    /// CLIENT TRACKING's table.
    pub tracking: crate::tracking::Tracking,
    /// The script cache and the function libraries.
    pub scripts: crate::scripting::Scripts,
    /// This state, for the engines' answer while a script holds the keyspace (set once it
    /// is shared: [`State::answer_busy_while_held`]).
    me: std::sync::OnceLock<std::sync::Weak<State>>,
    /// The engine of the default namespace (admin connections).
    pub engine: Arc<SharedEngine>,
    /// DEBUG SET-ACTIVE-EXPIRE: whether the maintenance thread expires keys.
    pub active_expire: AtomicBool,
    /// What active expiry and the collector did (INFO).
    pub maint: crate::counters::MaintStats,
    /// `maxmemory-policy` and what eviction keeps between passes.
    pub eviction: crate::counters::Eviction,
    /// `notify-keyspace-events` as `NotifyFlags` bits (0: off, the fast path).
    pub notify_flags: std::sync::atomic::AtomicU32,
    /// Clients parked by blocking commands.
    pub blocked: crate::blocking::Blocked,
    /// Every subscription (pub/sub).
    pub pubsub: crate::pubsub::PubSub,
    /// Who needs the engines' modified keys: parked and tracking clients.
    listeners: Listeners,
    /// The engine of each tenant namespace, made when a tenant first logs in.
    tenants: Mutex<BTreeMap<String, Arc<SharedEngine>>>,
    /// When the server started.
    pub started: Instant,
    /// SAVE's and BGSAVE's state and figures.
    pub rdb: Arc<crate::persistence::Persistence>,
    /// Changes since the start, in lanes as [`State::client_bytes`] (see
    /// [`crate::notify::command_events`]); INFO `rdb_changes_since_last_save` is their sum
    /// less what the last save included ([`State::changes_since_save`]).
    pub dirty: Arc<LaneSum>,
    /// INFO run_id: 40 hex digits, new for each start.
    pub run_id: String,
    /// The replication stream, its backlog and the replicas (the primary's side).
    pub replication: Arc<crate::replication::Replication>,
    /// The link to this server's primary, while it is a replica (REPLICAOF).
    pub link: crate::replication::LinkStatus,
    /// FAILOVER's plan, while one is under way.
    pub failover: crate::failover_plan::Failover,
    /// The cluster this node is part of (`cluster-enabled yes`).
    pub cluster: std::sync::OnceLock<Arc<crate::cluster::Cluster>>,
    next_client_id: AtomicU64,
    /// Bytes one connection's state takes besides its buffers (its client list entry and
    /// its client, whose type is above this module: `main` sets it).
    pub client_size: usize,
    /// What the connections hold ([`crate::info::client_buffer_bytes`]): `client_size` per
    /// client, and their buffers' bytes, each added in the lane of the client's event loop
    /// (`main` sets a lane per loop).
    pub client_bytes: Arc<LaneSum>,
}

impl State {
    /// Shared state over `config` and `store`.
    pub fn new(config: Config, store: Store, layout: KeyLayout) -> State {
        let micros = unix_micros();
        let run_id = crate::clock::random_id();
        let slowlog = crate::slowlog::SlowLog::default();
        slowlog.configure(&config);
        let latency = crate::latency::Latency::default();
        latency.configure(&config);
        let stats = Stats::default();
        stats.commands.tracking.store(config.get("latency-tracking") == "yes", Relaxed);
        let acl = crate::acl::Acl::default();
        acl.set_default_password(Some(config.get("requirepass").as_bytes()));
        let listeners = Listeners::default();
        let state = State {
            acl,
            tracking: crate::tracking::Tracking::new(listeners.clone()),
            scripts: Default::default(),
            me: Default::default(),
            slowlog,
            latency,
            monitors: Default::default(),
            engine: Arc::new(engine(&store, layout, DEFAULT_NAMESPACE, &listeners)),
            tenants: Mutex::new(BTreeMap::new()),
            pubsub: Default::default(),
            blocked: crate::blocking::Blocked::new(listeners.clone()),
            listeners,
            notify_flags: Default::default(),
            maint: Default::default(),
            eviction: Default::default(),
            active_expire: AtomicBool::new(true),
            config: RwLock::new(config),
            stats,
            clients: Mutex::new(BTreeMap::new()),
            loops: Loops::default(),
            listen: crate::listen::Listen::default(),
            tls: crate::tls::Tls::default(),
            connections: AtomicUsize::new(0),
            client_bytes: Arc::default(),
            pause: Mutex::new(None),
            pause_active: AtomicBool::new(false),
            maxmemory: AtomicU64::default(),
            max_bulk: AtomicI64::default(),
            query_buffer_limit: AtomicU64::default(),
            sampler: Mutex::new(Sampler::new()),
            store,
            writes: Default::default(),
            started: Instant::now(),
            rdb: Arc::new(crate::persistence::Persistence::new(micros / 1_000_000)),
            dirty: Arc::default(),
            run_id,
            replication: Arc::default(),
            link: crate::replication::LinkStatus::default(),
            failover: crate::failover_plan::Failover::default(),
            cluster: std::sync::OnceLock::new(),
            next_client_id: AtomicU64::new(1),
            client_size: std::mem::size_of::<ClientInfo>(),
        };
        state.keep_params(&state.config());
        state
    }

    /// Copies out of `config` the parameters read on every command or request
    /// ([`State::maxmemory`], [`State::max_bulk`], [`State::query_buffer_limit`], the
    /// cluster's `tls-cluster` and its links' setup): at start and after each CONFIG SET.
    pub fn keep_params(&self, config: &Config) {
        self.maxmemory.store(config.number("maxmemory").max(0) as u64, Relaxed);
        self.max_bulk.store(config.number("proto-max-bulk-len"), Relaxed);
        self.query_buffer_limit.store(config.number("client-query-buffer-limit").max(1) as u64, Relaxed);
        if let Some(cluster) = self.cluster.get() {
            let tls_cluster = config.get("tls-cluster") == "yes";
            cluster.set_tls_cluster(tls_cluster);
            #[cfg(feature = "etcd")]
            cluster.relay.set_setup(crate::cluster::relay::Setup {
                auth: config.link_auth(),
                tls: tls_cluster.then(|| self.tls.client()).flatten(),
            });
        }
    }

    /// Takes one sample of the counters (the event loop calls it every tick).
    pub fn sample(&self) {
        let [input, output] = [&self.stats.net_input, &self.stats.net_output].map(LaneSum::sum);
        let now = [self.stats.commands.processed(), input, output];
        lock(&self.sampler).sample(now);
    }

    /// From now on a command that finds the keyspace held by a running script (its gate
    /// let it through just before the script started) answers BUSY past the threshold, as
    /// the gate would have, instead of holding up its event loop until the script ends.
    pub fn answer_busy_while_held(self: &Arc<Self>) {
        if self.me.set(Arc::downgrade(self)).is_err() {
            return;
        }
        self.engine.answer_while_held(busy_answer(Arc::downgrade(self)));
        // Tenant engines made before this call, if any; later ones get it when made.
        for engine in lock(&self.tenants).values() {
            engine.answer_while_held(busy_answer(Arc::downgrade(self)));
        }
    }

    /// The engine a tenant of namespace `ns` works in.
    pub fn tenant_engine(&self, ns: &str) -> Arc<SharedEngine> {
        lock(&self.tenants)
            .entry(ns.to_string())
            .or_insert_with(|| {
                // NAMESPACE and the start refuse tenants under layouts without namespaces; a
                // namespace over 255 bytes, which NAMESPACE refuses, falls back to the default.
                let layout = self.engine.layout().clone();
                let layout = layout.clone().with_namespace(ns.as_bytes()).unwrap_or(layout);
                let engine = engine(&self.store, layout, ns, &self.listeners);
                if let Some(me) = self.me.get() {
                    engine.answer_while_held(busy_answer(me.clone()));
                }
                let flags = rediskv::server::NotifyFlags::from_bits(self.notify_flags.load(Relaxed));
                engine.set_new_events(flags.contains(rediskv::server::NotifyFlags::NEW));
                engine.set_stream_node_entries(self.config().number("stream-node-max-entries").max(0) as u64);
                engine.set_lazy_deletes(self.config().lazy_deletes());
                let config = self.config();
                let param = |name| config.number(name).clamp(0, i64::from(u32::MAX)) as u32;
                let lfu =
                    self.eviction.policy().lfu().then(|| (param("lfu-log-factor"), param("lfu-decay-time")));
                engine.set_lfu(lfu);
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

    /// Registers a new connection of event loop `loop_index` and returns its entry (the loop
    /// calls it: the entry's bytes go in that loop's lane of `client_bytes`).
    pub fn connect(
        &self,
        addr: String,
        laddr: String,
        fd: i64,
        loop_index: usize,
        token: usize,
    ) -> Arc<ClientInfo> {
        let id = self.next_client_id.fetch_add(1, Relaxed);
        let bytes = self.client_bytes.clone();
        bytes.add(loop_index, self.client_size as u64);
        let info = Arc::new(ClientInfo::new(id, addr, laddr, fd, loop_index, token, bytes));
        lock(&self.clients).insert(id, info.clone());
        self.stats.connections_received.fetch_add(1, Relaxed);
        info
    }

    /// The connected clients and their loops, for the subsystems that reach clients.
    pub fn peers(&self) -> Peers<'_> {
        Peers { clients: &self.clients, loops: &self.loops }
    }

    /// Every engine: the default namespace's, then each tenant's.
    pub fn engines(&self) -> Vec<Arc<SharedEngine>> {
        let mut all = vec![self.engine.clone()];
        all.extend(lock(&self.tenants).values().cloned());
        all
    }

    /// The store failed to persist writes (`error`, the engine's message): write commands
    /// are refused from now on, with the OS' words for the failure (from the message, else
    /// from a write in the store's directory), and the engine is brought back to what its
    /// directory holds, which drops the batches no persist took.
    pub fn write_failed(&self, error: &str) {
        let reason = crate::store::os_words(error)
            .or_else(|| self.store.probe_directory().err().and_then(|e| crate::store::os_words(&e)))
            .unwrap_or_else(|| error.to_string());
        self.writes.failed(reason);
        if let Err(e) = self.reopen_store() {
            crate::log::warning!("The store could not be opened again (retried every second): {e}");
        }
    }

    /// Once a second while writes fail, as Redis retries its AOF: reopens the engine if it
    /// still needs it, then writes in the store's directory; writes run again once that
    /// works (a write the engine still fails on fails the store again).
    pub fn retry_writes(&self) {
        if self.writes.needs_reopen() && self.reopen_store().is_err() {
            return;
        }
        match self.store.probe_directory() {
            Ok(()) => self.writes.recovered(),
            Err(e) => self.writes.still_failing(crate::store::os_words(&e).unwrap_or(e)),
        }
    }

    /// [`Store::reopen`] while no command runs (every engine's keyspace locked), the engines'
    /// key counts forgotten: they are counted again from the reopened store.
    fn reopen_store(&self) -> Result<(), String> {
        let engines = self.engines();
        let _locks: Vec<_> = engines.iter().map(|e| e.locks().lock(true, std::iter::empty())).collect();
        for engine in &engines {
            engine.forget_key_counts();
        }
        self.store.reopen()?;
        self.writes.reopened();
        Ok(())
    }

    /// INFO `rdb_changes_since_last_save`.
    pub fn changes_since_save(&self) -> u64 {
        self.dirty.sum().saturating_sub(self.rdb.saved_dirty.load(Relaxed))
    }

    /// Forgets a closed connection (its event loop calls it, as [`State::connect`]).
    pub fn disconnect(&self, id: u64) {
        if let Some(gone) = lock(&self.clients).remove(&id) {
            gone.set_buffers(Some(0), Some(0));
            self.client_bytes.add(gone.loop_index, 0u64.wrapping_sub(self.client_size as u64));
        }
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
    /// the collector, over every engine (see [`rediskv::Engine::deferred_frees`]).
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

/// [`crate::scripting::Scripts::busy`] for a command waiting for the keyspace.
fn busy_answer(state: std::sync::Weak<State>) -> rediskv::server::HeldAnswer {
    Box::new(move |argv| {
        let state = state.upgrade()?;
        let threshold = state.config().number("busy-reply-threshold").max(0) as u64;
        state.scripts.busy(threshold, argv)
    })
}

/// An engine writing `layout` (namespace `ns`) into `store`, recording the keys commands
/// modify while one of `listeners` needs them.
fn engine(store: &Store, layout: KeyLayout, ns: &str, listeners: &Listeners) -> SharedEngine {
    let engine = Engine::with_layout(store.backend(), layout).with_listeners(listeners.clone());
    if let Some(slots) = store.load_db_slots(ns)
        && !engine.restore_db_slots(&slots)
    {
        crate::log::warning!("Ignoring a corrupt SWAPDB record for namespace {ns}");
    }
    engine
}
