//! A RESP2/RESP3 server over the rediskv engine, for redis-cli, redis-benchmark and client
//! libraries.
//!
//! ```text
//! cargo run --release -p rediskv-server -- [redis.conf] [--engine fjall|memory|rocksdb] [--dir ./data]
//!     [--layout kvrocks|neokv|camellia|titea] [--threads N] [--appendfsync everysec] [--port 6380] [--<parameter> value]…
//! redis-cli -p 6380
//! ```
//!
//! The data lives in [`store`]: fjall in `./data` by default. N event loops (mio/epoll,
//! [`conn`]) serve the connections, plaintext or TLS ([`tls`]), one acceptor hands them out; each connection is a
//! library `Session` (selected database, MULTI, WATCH) on the shared `Engine` of its
//! namespace (the default one, or its tenant's). Every complete request in the input buffer
//! is parsed and executed and all replies go out in one write, so pipelining is cheap.
//!
//! Where a command runs: [`client::Client::execute`] finds its row of the library's command
//! table once; the row's flags and attributes drive the gate, and [`client::Client::run`]
//! answers the server's own commands (family `Server`) in one `match`, handing every other
//! to the engine. A [`maint`] thread runs active expiry and, for the memory store, the
//! garbage collector; scripts run on the event loops, or on the thread of [`script_thread`].
//!
//! The modules import each other without a circle (`tests/module_graph.rs`), in layers:
//! - leaves: [`sync`], [`clock`], [`resp`], [`store`], [`mailbox`] (how other threads reach
//!   an event loop), [`listen`], [`tls`], [`config`], [`counters`], [`client_info`],
//!   [`log`], [`persistence`];
//! - what [`state`] holds, none of which knows `State`: [`acl`], [`slowlog`], [`latency`],
//!   [`monitor`], [`pubsub`], [`tracking`], [`blocking`], [`scripting`], [`replication`],
//!   [`cluster`] (each given the few
//!   things it needs: the loops' inboxes, the clients, or a `Host` trait `State` implements);
//! - [`state`], then what uses it: [`notify`], [`evict`], [`maint`], [`wakeups`], [`script_thread`],
//!   [`rdb`], [`info`], [`admin`], [`client`], [`conn`], [`replica`] (a replica's link to its
//!   primary).

mod acl;
mod admin;
mod blocking;
mod client;
mod client_info;
mod clock;
mod cluster;
mod cmsgpack;
mod config;
#[cfg(test)]
mod config_doc;
mod conn;
mod counters;
mod evict;
mod failover;
mod failover_plan;
mod flags;
mod info;
mod latency;
mod listen;
mod log;
mod lua_struct;
mod mailbox;
mod maint;
mod migrate;
mod monitor;
mod notify;
mod persistence;
mod pubsub;
mod rdb;
mod replica;
mod replication;
mod resp;
mod role;
mod script_thread;
mod scripting;
#[cfg(feature = "etcd")]
mod slot_move;
mod slowlog;
mod state;
mod store;
mod sync;
mod tls;
mod tracking;
mod wakeups;

use std::sync::Arc;

use config::Config;
use rediskv::{KeyLayout, LayoutKind, RedisType};

/// mimalloc instead of glibc's malloc: under the LSM engines' many short-lived buffers glibc
/// spent a third of a loop's time consolidating free chunks (perf, HSET on fjall); Redis links
/// jemalloc for the same reason. mimalloc's version 2: with the same CPU per command, the
/// fjall engine's peak RSS during a load is about a fifth lower and the memory engine's RSS
/// 4% lower than under version 3 (`benches/storage_cost.sh`).
#[global_allocator]
static ALLOCATOR: Mimalloc = Mimalloc;

/// mimalloc through its plain entry points for every request whose alignment its blocks
/// always have (a machine word: its size classes are multiples of one), and through the
/// aligned ones for the rest. The `mimalloc` crate's allocator takes the aligned path for
/// every request: about 41 instructions an allocation against `mi_malloc`'s 16, and a
/// pipelined SET allocates four times (counted with `benches/callgrind_commands.sh`).
struct Mimalloc;

const WORD: usize = std::mem::size_of::<usize>();

// SAFETY: every method forwards to mimalloc's function for the same request; `mi_malloc`,
// `mi_zalloc` and `mi_realloc` return blocks aligned to a word, all a layout of at most a
// word's alignment asks; a larger alignment goes to the `_aligned` functions, as before.
unsafe impl std::alloc::GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_malloc, mi_malloc_aligned};
        // SAFETY: as the impl's.
        unsafe {
            if layout.align() <= WORD {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};
        // SAFETY: as the impl's.
        unsafe {
            if layout.align() <= WORD {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from mimalloc (the methods above).
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        use libmimalloc_sys::{mi_realloc, mi_realloc_aligned};
        // SAFETY: `ptr` came from mimalloc, with `layout`'s alignment.
        unsafe {
            if layout.align() <= WORD {
                mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

/// What the command line chose besides Redis' parameters.
struct Start {
    config: Config,
    /// `--engine`: fjall unless told.
    engine: String,
    /// `--threads`: event loops (default: the number of cores).
    threads: usize,
    /// Where a disk engine keeps its files: `--dir`, the config file's `dir`, or `./data`.
    data_dir: std::path::PathBuf,
    /// `--etcd-*`: the cluster of `--engine etcd`.
    etcd: store::EtcdFlags,
    /// `--cluster-etcd`: the etcd members keeping a disk engine's cluster's slot table.
    cluster_etcd: Option<String>,
    /// `--cluster-initial-nodes`: how many nodes share a new cluster's slots.
    initial_nodes: usize,
    /// `--layout` and its options: the records the store holds.
    layout: KeyLayout,
    /// `--cache-size`, `--write-buffer-size`: a disk engine's memory.
    memory: store::DiskMemory,
}

/// Takes `--flag value` out of `args`.
fn take_flag(args: &mut Vec<String>, flag: &str) -> Result<Option<String>, String> {
    match args.iter().position(|a| a == flag) {
        Some(i) if i + 1 < args.len() => {
            let value = args.remove(i + 1);
            args.remove(i);
            Ok(Some(value))
        }
        Some(_) => Err(format!("{flag} needs a value")),
        None => Ok(None),
    }
}

/// The configuration from the command line: a config file (first positional argument or
/// `--config`), then `--name value` pairs for any parameter, as redis-server takes them.
fn options() -> Result<Start, String> {
    let mut config = Config::new();
    let default_dir = config.get("dir").to_string();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", flags::help());
        std::process::exit(0);
    }
    let file = match args.first() {
        Some(first) if !first.starts_with('-') => Some(args.remove(0)),
        _ => match args.iter().position(|a| a == "--config") {
            Some(i) if i + 1 < args.len() => {
                let file = args.remove(i + 1);
                args.remove(i);
                Some(file)
            }
            Some(_) => return Err("--config needs a file".into()),
            None => None,
        },
    };
    let engine = take_flag(&mut args, "--engine")?.unwrap_or_else(|| "fjall".into());
    let threads = match take_flag(&mut args, "--threads")? {
        Some(n) => n.parse().ok().filter(|n| (1..=256).contains(n)).ok_or("--threads must be 1 to 256")?,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let number = |flag: &str, value: Option<String>| -> Result<Option<usize>, String> {
        value.map(|v| v.parse().map_err(|_| format!("{flag} must be a number"))).transpose()
    };
    let etcd = store::EtcdFlags {
        endpoints: take_flag(&mut args, "--etcd-endpoints")?,
        prefix: take_flag(&mut args, "--etcd-prefix")?,
        max_txn_ops: number("--etcd-max-txn-ops", take_flag(&mut args, "--etcd-max-txn-ops")?)?,
        max_request_bytes: number(
            "--etcd-max-request-bytes",
            take_flag(&mut args, "--etcd-max-request-bytes")?,
        )?,
        quorum_timeout_ms: number("--etcd-quorum-timeout", take_flag(&mut args, "--etcd-quorum-timeout")?)?,
        conflict_timeout_ms: number(
            "--etcd-conflict-timeout",
            take_flag(&mut args, "--etcd-conflict-timeout")?,
        )?,
        ca_cert_file: take_flag(&mut args, "--etcd-ca-cert-file")?,
        cert_file: take_flag(&mut args, "--etcd-cert-file")?,
        key_file: take_flag(&mut args, "--etcd-key-file")?,
        stores: std::iter::from_fn(|| take_flag(&mut args, "--cluster-etcd-store").transpose())
            .collect::<Result<_, _>>()?,
    };
    let layout = layout(&mut args)?;
    let cluster_etcd = take_flag(&mut args, "--cluster-etcd")?;
    let initial_nodes = number("--cluster-initial-nodes", take_flag(&mut args, "--cluster-initial-nodes")?)?
        .unwrap_or(1)
        .max(1);
    let mut bytes = |flag: &str, default: u64| -> Result<u64, String> {
        match take_flag(&mut args, flag)? {
            Some(v) => config::memory(&v)
                .and_then(|n| u64::try_from(n).ok())
                .filter(|n| *n >= 1 << 20)
                .ok_or(format!("{flag} must be a size of at least 1mb (bytes, or 64mb, 1gb…)")),
            None => Ok(default),
        }
    };
    let default = store::DiskMemory::default();
    let memory = store::DiskMemory {
        cache_bytes: bytes("--cache-size", default.cache_bytes)?,
        write_buffer_bytes: bytes("--write-buffer-size", default.write_buffer_bytes)?,
    };
    // The data directory must exist before `dir` is checked.
    let data_dir = take_flag(&mut args, "--dir")?;
    if let Some(dir) = &data_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {dir}: {e}"))?;
        args.extend(["--dir".to_string(), dir.clone()]);
    }
    if let Some(file) = file {
        config.load_file(std::path::Path::new(&file))?;
    }
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let name = match flag.as_str() {
            "-p" => "port".to_string(),
            "-b" => "bind".to_string(),
            f => f
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {f} ({})", flags::usage()))?
                .to_ascii_lowercase(),
        };
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        config.set_one(&name, &value, true).map_err(|e| format!("--{name} {value}: {e}"))?;
    }
    let data_dir = match config.get("dir") {
        dir if dir == default_dir && data_dir.is_none() => std::path::Path::new(dir).join("data"),
        dir => dir.into(),
    };
    if !etcd.stores.is_empty() && (engine != "etcd" || config.get("cluster-enabled") != "yes") {
        return Err("--cluster-etcd-store needs --engine etcd and --cluster-enabled yes".into());
    }
    if layout.kind() != LayoutKind::Kvrocks && !config.namespaces.is_empty() {
        return Err(format!(
            "the {} layout has no namespaces: remove the namespace.* lines",
            layout.kind().name()
        ));
    }
    // As Kvrocks with `cluster-enabled yes`: every key carries its slot, so a slot's keys are
    // one range of the store (the store's manifest then refuses a start without it).
    let layout = match layout.kind() {
        LayoutKind::Kvrocks => layout.with_cluster_slots(config.get("cluster-enabled") == "yes"),
        _ => layout,
    };
    Ok(Start { config, engine, threads, data_dir, etcd, cluster_etcd, initial_nodes, layout, memory })
}

/// `--layout kvrocks|neokv|camellia` (Kvrocks' records by default) with NeoKV's
/// `--neokv-region-id` and `--neokv-index-id` (1 and 1, as NeoKV's standalone server) and
/// camellia's `--camellia-namespace` (`default`), `--camellia-hash-version` and
/// `--camellia-set-version` (0: counted, or 1) and `--camellia-md5-prefix` (0, or 8 for
/// stores of camellia's releases that spread keys by md5), and TiTea's `--titea-namespace`
/// (`default.default`).
fn layout(args: &mut Vec<String>) -> Result<KeyLayout, String> {
    let id = |flag: &str, value: Option<String>| -> Result<Option<i64>, String> {
        value.map(|v| v.parse().map_err(|_| format!("{flag} must be a 64-bit integer"))).transpose()
    };
    let region = id("--neokv-region-id", take_flag(args, "--neokv-region-id")?)?;
    let index = id("--neokv-index-id", take_flag(args, "--neokv-index-id")?)?;
    let neokv = region.is_some() || index.is_some();
    let namespace = take_flag(args, "--camellia-namespace")?;
    let mut camellia_versions = Vec::new();
    for (flag, ty) in
        [("--camellia-hash-version", RedisType::Hash), ("--camellia-set-version", RedisType::Set)]
    {
        if let Some(v) = take_flag(args, flag)? {
            camellia_versions
                .push((ty, v.parse::<u8>().ok().filter(|v| *v <= 1).ok_or(format!("{flag} is 0 or 1"))?));
        }
    }
    let md5 = take_flag(args, "--camellia-md5-prefix")?
        .map(|v| v.parse::<usize>().map_err(|_| "--camellia-md5-prefix is a byte count".to_string()))
        .transpose()?;
    let camellia = namespace.is_some() || !camellia_versions.is_empty() || md5.is_some();
    let titea = take_flag(args, "--titea-namespace")?;
    let kind = take_flag(args, "--layout")?.unwrap_or_else(|| "kvrocks".into());
    if titea.is_some() && kind != "titea" {
        return Err("--titea-namespace needs --layout titea".into());
    }
    if neokv && kind != "neokv" {
        return Err("--neokv-region-id and --neokv-index-id need --layout neokv".into());
    }
    if camellia && kind != "camellia" {
        return Err("the --camellia-* options need --layout camellia".into());
    }
    match kind.as_str() {
        "kvrocks" => Ok(KeyLayout::default()),
        "neokv" => Ok(KeyLayout::neokv(region.unwrap_or(1), index.unwrap_or(1))),
        "camellia" => {
            let mut layout = KeyLayout::camellia(namespace.as_deref().unwrap_or("default").as_bytes())
                .with_hash_prefix(md5.unwrap_or(0))
                .map_err(|e| e.to_string())?;
            for (ty, v) in camellia_versions {
                layout = layout.with_encode_version(ty, v).map_err(|e| e.to_string())?;
            }
            Ok(layout)
        }
        "titea" => Ok(KeyLayout::titea(titea.as_deref().unwrap_or("default.default").as_bytes())),
        other => Err(format!("unknown layout '{other}' (kvrocks, neokv, camellia or titea)")),
    }
}

/// Logs `why` and exits with status 1.
fn fatal(why: &str) -> ! {
    log::warning!("{why}");
    std::process::exit(1);
}

/// `cluster-enabled yes`: over etcd, registers and follows the slot table the nodes share;
/// over a disk engine with `--cluster-etcd`, the same with the slots' data at home (a slot
/// moves with CLUSTERX MIGRATE); otherwise this node alone serves every slot.
fn join_cluster(state: &Arc<state::State>, topology: Option<(store::EtcdFlags, usize)>) {
    let config = state.config();
    let port: u16 = config.get("port").parse().unwrap_or(6380);
    let announced = |name: &str| Some(config.get(name).to_string()).filter(|v| !v.is_empty() && v != "0");
    let bind = config.get("bind").split_whitespace().next().unwrap_or("127.0.0.1").to_string();
    let host =
        announced("cluster-announce-ip").unwrap_or(if bind == "*" { "127.0.0.1".into() } else { bind });
    let port = announced("cluster-announce-port").and_then(|p| p.parse().ok()).unwrap_or(port);
    let tls_port =
        announced("cluster-announce-tls-port").unwrap_or_else(|| config.get("tls-port").to_string());
    let tls_port = tls_port.parse().unwrap_or(0);
    let ttl = std::time::Duration::from_millis(config.number("cluster-node-timeout").max(1000) as u64);
    let tls_cluster = config.get("tls-cluster") == "yes";
    drop(config);
    #[cfg_attr(not(feature = "etcd"), allow(unused_mut))]
    let mut myself = cluster::Node { id: state.run_id.clone(), host, port, tls_port };
    #[cfg(feature = "etcd")]
    let local = topology.map(|(flags, initial)| {
        let closed = state
            .store
            .closed_slot()
            .cloned()
            .unwrap_or_else(|| fatal("--cluster-etcd needs a disk engine (--engine fjall or rocksdb)"));
        let etcd = store::open_topology(&flags).unwrap_or_else(|e| fatal(&e));
        // The slots' data is in the data directory: so is the id of the node owning them.
        if let Some(dir) = state.store.dir() {
            myself.id = cluster::moves::node_id(dir, &myself.id).unwrap_or_else(|e| fatal(&e));
        }
        (etcd, Arc::new(cluster::moves::Moves::new(state.replication.clone(), closed, initial)))
    });
    #[cfg(not(feature = "etcd"))]
    if topology.is_some() {
        fatal("--cluster-etcd needs a build with the etcd feature");
    }
    let node = Arc::new(cluster::Cluster::new(myself.clone()));
    node.set_tls_cluster(tls_cluster);
    // A parked client whose slot moved gets its redirection; the shard channels of a slot
    // this node no longer serves are dropped, their subscribers told.
    let weak = Arc::downgrade(state);
    node.on_change(Box::new(move || {
        if let Some(state) = weak.upgrade() {
            state.blocked.wake_all(&*state);
            if let Some(cluster) = state.cluster.get() {
                let topology = cluster.topology();
                state.pubsub.drop_shards(&state.loops, |slot| cluster.serves(&topology, slot));
            }
        }
    }));
    let _ = state.cluster.set(node.clone());
    // The cluster's links (pub/sub relay) follow the config from here on.
    state.keep_params(&state.config());
    #[cfg(feature = "etcd")]
    if let Some((etcd, moves)) = local {
        slot_move::set_server(Arc::downgrade(state));
        let (asked, synced, promoted) = (Arc::downgrade(state), Arc::downgrade(state), Arc::downgrade(state));
        moves.set_role(
            move || {
                let state = asked.upgrade()?;
                state.link.is_replica().then(|| {
                    let link = state.link.info();
                    (link.host, link.port)
                })
            },
            move || synced.upgrade().is_some_and(|state| state.link.is_synced()),
            move || {
                if let Some(state) = promoted.upgrade() {
                    role::stop_replicating(&state);
                }
            },
        );
        let started = Arc::downgrade(state);
        moves.set_start(move |slot, to| match started.upgrade() {
            Some(state) => slot_move::start(&state, slot, to),
            None => rediskv::Reply::Error("ERR the server is shutting down".into()),
        });
        let _ = node.moves.set(moves);
        let _ = node.etcd.set(etcd.clone());
        cluster::membership::spawn(node, etcd, ttl);
        return;
    }
    #[cfg(feature = "etcd")]
    if let Some(etcd) = state.store.etcd() {
        // Every node must map the slots to the same data clusters.
        let ids = state.store.etcd_data().iter().map(|d| d.cluster_id()).collect::<Result<Vec<_>, _>>();
        if let Err(e) = ids.and_then(|ids| etcd.cluster_check_stores(&ids)) {
            fatal(&format!("Cannot join the cluster: {e}"));
        }
        let _ = node.fences.set(state.store.etcd_data().to_vec());
        let _ = node.etcd.set(etcd.clone());
        cluster::membership::spawn(node, etcd.clone(), ttl);
        return;
    }
    let _ = ttl;
    let everything = vec![Some(myself); usize::from(rediskv::SLOT_COUNT)];
    node.set_topology(cluster::Topology::from_owners(&everything, 1, 0));
}

/// mimalloc's `mi_option_purge_delay` (its position in `mi_option_e` of version 2).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long mimalloc keeps freed memory before it returns it to the OS. Its default, 10 ms,
/// returns a flushed memtable's memory between two rounds, and the next memtable faults it in
/// again, zeroed page by page: a tenth of the event loop's time under pipelined LPUSH on
/// fjall (perf), and 3,500 page faults against 22 per 200,000 LPUSHes.
const PURGE_DELAY_MS: std::ffi::c_long = 1000;

fn main() {
    // SAFETY: sets an option's value; mimalloc reads its options at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    let Start { config, engine, threads, data_dir, etcd, cluster_etcd, initial_nodes, layout, memory } =
        options().unwrap_or_else(|e| {
            // No log exists before the configuration is read: redis-server, too, writes this
            // to standard error.
            eprintln!("server: {e}");
            std::process::exit(2);
        });
    let syslog = (config.get("syslog-enabled") == "yes")
        .then(|| (config.get("syslog-ident"), config.get("syslog-facility")));
    if let Err(e) = log::open(config.get("logfile"), syslog) {
        let why = e.to_string();
        let why = why.split(" (os error").next().unwrap_or(&why);
        eprintln!(
            "\n*** FATAL CONFIG FILE ERROR (Redis {}) ***\nCan't open the log file: {why}",
            config::REDIS_VERSION
        );
        std::process::exit(1);
    }
    log::warning!("rediskv is starting");
    log::warning!(
        "rediskv version={}, Redis version={}, bits={}, pid={}, just started",
        env!("CARGO_PKG_VERSION"),
        config::REDIS_VERSION,
        usize::BITS,
        std::process::id()
    );
    match config.file() {
        Some(file) => log::warning!("Configuration loaded from {}", file.display()),
        None => log::warning!("No config file given, using the defaults and the command line"),
    }
    let topology = cluster_etcd
        .map(|endpoints| (store::EtcdFlags { endpoints: Some(endpoints), ..etcd.clone() }, initial_nodes));
    let store = store::Store::open(&engine, &data_dir, config.get("appendfsync"), memory, &etcd, &layout)
        .unwrap_or_else(|e| {
            log::warning!("{e}");
            std::process::exit(1);
        });
    let tls_contexts = tls::Tls::default();
    if config.wants_tls()
        && let Err(e) = tls_contexts.configure(&config)
    {
        log::warning!("{e}");
        fatal("Failed to configure TLS. Check logs for more info.");
    }
    // `bind` may list several addresses; the first one is served. `port 0` with a
    // `tls-port` serves TLS only, as Redis; without one it asks for any free port.
    let bind = config.get("bind").to_string();
    let tls_port = config.number("tls-port");
    let plain = if config.get("port") != "0" || tls_port == 0 {
        let port: u16 = config.get("port").parse().unwrap_or(6380);
        Some(listen::listen_on(&bind, port).unwrap_or_else(|e| fatal(&e)))
    } else {
        None
    };
    let tls =
        (tls_port != 0).then(|| listen::listen_on(&bind, tls_port as u16).unwrap_or_else(|e| fatal(&e)));
    let mut config = config;
    let plain_port = plain.as_ref().and_then(|l| l.local_addr().ok()).map_or(0, |a| a.port());
    if plain_port != 0 {
        // Port 0 asks for any free port: report the one we got.
        let _ = config.set_one("port", &plain_port.to_string(), true);
    }
    log::notice!("Running mode=standalone, port={plain_port}.");
    let data = store.dir().map_or(String::new(), |d| format!(" in {}", d.display()));
    for (listener, what) in [(&plain, ""), (&tls, " (TLS)")] {
        if let Some(local) = listener.as_ref().and_then(|l| l.local_addr().ok()) {
            log::notice!("Listening on {local}{what} ({} engine{data}, {threads} threads)", store.name());
        }
    }
    let mut state = state::State::new(config, store, layout);
    state.tls = tls_contexts;
    state.client_size += std::mem::size_of::<client::Client>();
    // A lane of counters per event loop, and one for the other threads.
    state.stats.set_lanes(threads + 1);
    state.client_bytes = Arc::new(counters::LaneSum::with_lanes(threads + 1));
    state.dirty = Arc::new(counters::LaneSum::with_lanes(threads + 1));
    let state = Arc::new(state);
    state.answer_busy_while_held();
    state.listen.put(listen::Side::Plain, plain);
    state.listen.put(listen::Side::Tls, tls);
    let aclfile = state.config().get("aclfile").to_string();
    if !aclfile.is_empty() {
        let pubsub_all = state.config().get("acl-pubsub-default") == "allchannels";
        let loaded = std::fs::read_to_string(&aclfile)
            .map_err(|e| format!("Error loading ACLs, opening file '{aclfile}': {e}"))
            .and_then(|text| state.acl.load(&text, &aclfile, pubsub_all));
        if let Err(e) = loaded {
            log::warning!("{e}");
            std::process::exit(1);
        }
    }
    if let Some(codes) = state.store.load_functions()
        && let Err(e) = state.scripts.restore_codes(&codes)
    {
        log::warning!("Cannot load the saved function libraries: {e}");
        std::process::exit(1);
    }
    // Before anything propagates: the transaction's commands run again are not this
    // server's writes.
    if let Err(e) = replica::settle_file_changes(&state) {
        log::warning!("{e}");
        std::process::exit(1);
    }
    log::warning!("Server initialized");
    if let Err(e) = rdb::load_at_start(&state) {
        log::warning!("Cannot load the RDB file: {e}");
        std::process::exit(1);
    }
    notify::configure(&state);
    evict::configure(&state);
    state.replication.configure(&state.config());
    if state.config().get("cluster-enabled") == "yes" {
        join_cluster(&state, topology);
    }
    // A node that moves slots with their data captures the stream of the slot it moves.
    #[cfg(feature = "etcd")]
    let propagation: Arc<dyn rediskv::server::Propagation> =
        match state.cluster.get().and_then(|c| c.moves.get()) {
            Some(moves) => moves.clone(),
            None => state.replication.clone(),
        };
    #[cfg(not(feature = "etcd"))]
    let propagation = state.replication.clone();
    state.engine.set_propagation(propagation);
    let weak = Arc::downgrade(&state);
    state.link.set_runner(Box::new(move |generation| {
        if let Some(state) = weak.upgrade() {
            replica::spawn(state, generation);
        }
    }));
    replica::spawn_cron(state.clone());
    maint::spawn(state.clone());
    rdb::spawn_cron(state.clone());
    script_thread::spawn(state.clone());
    #[cfg(feature = "etcd")]
    maint::follow_other_nodes(state.clone());
    let primary = state.config().get("replicaof").to_string();
    if let Some((host, port)) =
        primary.split_once(' ').and_then(|(h, p)| Some((h.to_string(), p.trim().parse::<u16>().ok()?)))
    {
        // A replica continues from the position its data stands at, as Redis from its RDB's.
        if let Some(at) = state.store.position() {
            log::notice!(
                "Stream position stored with the data: replication id {}, offset {}",
                at.replid,
                at.offset
            );
            state.replication.follow(&at.replid, at.offset, replication::Sync::Full);
            state.link.set_stream_db(at.db);
        }
        role::become_replica(&state, &host, port);
    } else if let Err(e) = state.store.set_position(None) {
        // A primary's writes are its own: a stored position no longer stands for its data.
        log::warning!("Cannot forget the replication position: {e}");
    }
    log::notice!("Ready to accept connections");
    if let Err(e) = conn::serve(state, threads) {
        log::warning!("{e}");
        std::process::exit(1);
    }
}
