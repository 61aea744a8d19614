//! INFO [section …]: Redis 7.0's sections and field names, with this server's real counters
//! (fields about machinery it does not have — forks, AOF, replicas, allocators — are present
//! with the values an idle Redis without them shows).

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use rediskv::{ColumnFamily, KeyRange};
use rediskv::{DATABASES, Reply};
use rediskv::{Direction, KvBackend};

use crate::clock::unix_micros;
use crate::state::State;
use crate::sync::lock;

pub use crate::config::REDIS_VERSION;

/// Every section in Redis 7.0's order; `true` for the ones INFO without arguments shows.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
];

/// INFO: the requested sections (`default`, `all`, `everything` or names), in Redis'
/// order, as a verbatim (RESP2: bulk) string of `# Title\r\nfield:value\r\n` blocks separated by blank lines.
/// The keyspace section counts the keys of `namespace` (the client's).
pub fn info(argv: &[Bytes], state: &State, namespace: &[u8]) -> Reply {
    let asked: Vec<String> =
        argv[1..].iter().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect();
    let wanted = |name: &str, default: bool| {
        if asked.is_empty() {
            return default;
        }
        asked.iter().any(|a| match a.as_str() {
            "default" => default,
            "all" | "everything" => true,
            a => a == name,
        })
    };
    let mut out = String::new();
    for &(name, default) in SECTIONS {
        if !wanted(name, default) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {}\r\n", title(name));
        section(name, state, namespace, &mut out);
    }
    Reply::Verbatim { format: *b"txt", text: Bytes::from(out) }
}

fn title(name: &str) -> &'static str {
    match name {
        "server" => "Server",
        "clients" => "Clients",
        "memory" => "Memory",
        "persistence" => "Persistence",
        "stats" => "Stats",
        "replication" => "Replication",
        "cpu" => "CPU",
        "modules" => "Modules",
        "commandstats" => "Commandstats",
        "errorstats" => "Errorstats",
        "latencystats" => "Latencystats",
        "cluster" => "Cluster",
        _ => "Keyspace",
    }
}

/// Appends `field:value\r\n` lines.
fn fields(out: &mut String, pairs: &[(&str, String)]) {
    for (k, v) in pairs {
        let _ = write!(out, "{k}:{v}\r\n");
    }
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    match bytes {
        0..1024 => format!("{bytes}B"),
        1024..1_048_576 => format!("{:.2}K", b / 1024.0),
        1_048_576..1_073_741_824 => format!("{:.2}M", b / 1_048_576.0),
        _ => format!("{:.2}G", b / 1_073_741_824.0),
    }
}

fn section(name: &str, state: &State, namespace: &[u8], out: &mut String) {
    let s = |v: &str| v.to_string();
    let n = |v: u64| v.to_string();
    let stats = &state.stats;
    let config = state.config();
    match name {
        "server" => {
            let uptime = state.started.elapsed().as_secs();
            let micros = unix_micros();
            fields(
                out,
                &[
                    ("redis_version", s(REDIS_VERSION)),
                    ("rediskv_version", s(env!("CARGO_PKG_VERSION"))),
                    ("redis_git_sha1", s("00000000")),
                    ("redis_git_dirty", s("0")),
                    ("redis_build_id", s("0")),
                    ("redis_mode", s("standalone")),
                    ("os", format!("{} {}", std::env::consts::OS, std::env::consts::ARCH)),
                    ("arch_bits", n(usize::BITS as u64)),
                    ("monotonic_clock", s("POSIX clock_gettime")),
                    ("multiplexing_api", s("epoll")),
                    ("atomicvar_api", s("c11-builtin")),
                    ("gcc_version", s("0.0.0")),
                    ("process_id", n(u64::from(std::process::id()))),
                    ("process_supervised", s("no")),
                    ("run_id", state.run_id.clone()),
                    // As Redis: the TLS port when there is no plaintext one.
                    (
                        "tcp_port",
                        s(if config.get("port") == "0" {
                            config.get("tls-port")
                        } else {
                            config.get("port")
                        }),
                    ),
                    ("server_time_usec", n(micros)),
                    ("uptime_in_seconds", n(uptime)),
                    ("uptime_in_days", n(uptime / 86400)),
                    ("hz", s(config.get("hz"))),
                    ("configured_hz", s(config.get("hz"))),
                    ("lru_clock", n((micros / 1_000_000) & ((1 << 24) - 1))),
                    (
                        "executable",
                        std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
                    ),
                    ("config_file", config.file().map(|p| p.display().to_string()).unwrap_or_default()),
                    ("io_threads_active", s("0")),
                    ("rediskv_engine", s(state.store.name())),
                    ("rediskv_dir", state.store.dir().map(|d| d.display().to_string()).unwrap_or_default()),
                    ("rediskv_threads", n(state.loops.len() as u64)),
                ],
            );
        }
        "clients" => {
            let clients = lock(&state.clients);
            let max_in =
                clients.values().map(|c| c.qbuf.load(Relaxed) + c.qbuf_free.load(Relaxed)).max().unwrap_or(0)
                    as u64;
            let max_out = clients.values().map(|c| c.output_bytes()).max().unwrap_or(0) as u64;
            fields(
                out,
                &[
                    ("connected_clients", n(clients.len() as u64)),
                    ("cluster_connections", s("0")),
                    ("maxclients", s(config.get("maxclients"))),
                    ("client_recent_max_input_buffer", n(max_in)),
                    ("client_recent_max_output_buffer", n(max_out)),
                    // Parked by a blocking command, or held by CLIENT PAUSE (Redis counts both).
                    (
                        "blocked_clients",
                        n(clients.values().filter(|c| c.blocked.load(Relaxed)).count() as u64),
                    ),
                    ("tracking_clients", n(state.tracking.counts()[0] as u64)),
                    ("clients_in_timeout_table", s("0")),
                ],
            );
        }
        "memory" => {
            let dataset = state.store.used_bytes();
            let clients = client_buffer_bytes(state);
            let (backlog, replicas) = state.replication.memory();
            let [scripts, script_bytes, functions, libraries, library_bytes] = state.scripts.counts();
            let used = dataset + clients;
            let rss = rss_bytes();
            let lazyfree_pending =
                state.deferred_frees().saturating_sub(state.maint.lazyfree_credited.load(Relaxed));
            let max = config.number("maxmemory").max(0) as u64;
            let ratio = if used == 0 { 0.0 } else { rss as f64 / used as f64 };
            let z = || s("0");
            fields(
                out,
                &[
                    ("used_memory", n(used)),
                    ("used_memory_human", human(used)),
                    ("used_memory_rss", n(rss)),
                    ("used_memory_rss_human", human(rss)),
                    ("used_memory_peak", n(used)),
                    ("used_memory_peak_human", human(used)),
                    ("used_memory_peak_perc", s("100.00%")),
                    ("used_memory_overhead", n(clients)),
                    ("used_memory_startup", z()),
                    ("used_memory_dataset", n(dataset)),
                    (
                        "used_memory_dataset_perc",
                        format!("{:.2}%", 100.0 * dataset as f64 / used.max(1) as f64),
                    ),
                    ("allocator_allocated", n(used)),
                    ("allocator_active", n(used)),
                    ("allocator_resident", n(rss)),
                    ("total_system_memory", n(system_memory())),
                    ("total_system_memory_human", human(system_memory())),
                    ("used_memory_lua", z()),
                    ("used_memory_vm_eval", z()),
                    ("used_memory_lua_human", s("0B")),
                    ("used_memory_scripts_eval", n(script_bytes)),
                    ("number_of_cached_scripts", n(scripts)),
                    ("number_of_functions", n(functions)),
                    ("number_of_libraries", n(libraries)),
                    ("used_memory_vm_functions", z()),
                    ("used_memory_vm_total", z()),
                    ("used_memory_vm_total_human", s("0B")),
                    ("used_memory_functions", n(library_bytes)),
                    ("used_memory_scripts", n(script_bytes + library_bytes)),
                    ("used_memory_scripts_human", human(script_bytes + library_bytes)),
                    ("maxmemory", n(max)),
                    ("maxmemory_human", human(max)),
                    ("maxmemory_policy", s(config.get("maxmemory-policy"))),
                    ("allocator_frag_ratio", s("1.00")),
                    ("allocator_frag_bytes", z()),
                    ("allocator_rss_ratio", s("1.00")),
                    ("allocator_rss_bytes", z()),
                    ("rss_overhead_ratio", s("1.00")),
                    ("rss_overhead_bytes", z()),
                    ("mem_fragmentation_ratio", format!("{ratio:.2}")),
                    ("mem_fragmentation_bytes", n(rss.saturating_sub(used))),
                    ("mem_not_counted_for_evict", z()),
                    ("mem_replication_backlog", n(backlog)),
                    ("mem_total_replication_buffers", n(backlog + replicas)),
                    ("mem_clients_slaves", n(replicas)),
                    ("mem_clients_normal", z()),
                    ("mem_cluster_links", z()),
                    ("mem_aof_buffer", z()),
                    ("mem_allocator", s("libc")),
                    ("active_defrag_running", z()),
                    ("lazyfree_pending_objects", n(lazyfree_pending)),
                    ("lazyfreed_objects", n(state.stats.lazyfreed_objects.load(Relaxed))),
                ],
            );
            // Where a disk engine's bytes are (extensions).
            if let Some(usage) = state.store.disk_usage() {
                fields(
                    out,
                    &[
                        ("rediskv_disk_tables_bytes", n(usage.tables)),
                        ("rediskv_disk_journals_bytes", n(usage.journals)),
                        ("rediskv_block_cache_bytes", n(usage.cache)),
                        ("rediskv_block_cache_capacity", n(usage.cache_capacity)),
                        ("rediskv_memtables_bytes", n(usage.memtables)),
                        ("rediskv_pinned_blocks_bytes", n(usage.pinned)),
                    ],
                );
            }
            if let Some((bytes, answers)) = state.store.key_filter() {
                fields(
                    out,
                    &[
                        ("rediskv_key_filter_bytes", n(bytes as u64)),
                        ("rediskv_key_filter_active", n(u64::from(answers))),
                    ],
                );
            }
        }
        "persistence" => {
            let rdb = &state.rdb;
            let running = rdb.in_progress.load(Relaxed);
            let z = || s("0");
            let m1 = || s("-1");
            let ok = || s("ok");
            fields(
                out,
                &[
                    ("loading", z()),
                    ("async_loading", z()),
                    ("current_cow_peak", z()),
                    ("current_cow_size", z()),
                    ("current_cow_size_age", z()),
                    ("current_fork_perc", s("0.00")),
                    ("current_save_keys_processed", n(rdb.keys_processed.load(Relaxed))),
                    ("current_save_keys_total", n(rdb.keys_total.load(Relaxed))),
                    ("rdb_changes_since_last_save", n(state.changes_since_save())),
                    ("rdb_bgsave_in_progress", n(u64::from(running))),
                    ("rdb_last_save_time", n(rdb.last_save.load(Relaxed))),
                    ("rdb_last_bgsave_status", s(if rdb.last_ok.load(Relaxed) { "ok" } else { "err" })),
                    ("rdb_last_bgsave_time_sec", s(&rdb.last_secs.load(Relaxed).to_string())),
                    (
                        "rdb_current_bgsave_time_sec",
                        if running {
                            n(crate::clock::unix_secs().saturating_sub(rdb.started.load(Relaxed)))
                        } else {
                            m1()
                        },
                    ),
                    ("rdb_saves", n(rdb.saves.load(Relaxed))),
                    ("rdb_last_cow_size", z()),
                    ("rdb_last_load_keys_expired", n(rdb.load_expired.load(Relaxed))),
                    ("rdb_last_load_keys_loaded", n(rdb.loaded.load(Relaxed))),
                    ("aof_enabled", z()),
                    ("aof_rewrite_in_progress", z()),
                    ("aof_rewrite_scheduled", z()),
                    ("aof_last_rewrite_time_sec", m1()),
                    ("aof_current_rewrite_time_sec", m1()),
                    ("aof_last_bgrewrite_status", ok()),
                    ("aof_rewrites", z()),
                    ("aof_rewrites_consecutive_failures", z()),
                    ("aof_last_write_status", s(if state.writes.failing() { "err" } else { "ok" })),
                    ("aof_last_cow_size", z()),
                    ("module_fork_in_progress", z()),
                    ("module_fork_last_cow_size", z()),
                ],
            );
        }
        "stats" => {
            let get = |c: &std::sync::atomic::AtomicU64| n(c.load(Relaxed));
            let z = || s("0");
            let (ops, kbps_in, kbps_out) = {
                let sampler = lock(&state.sampler);
                (sampler.rate(0), sampler.rate(1) as f64 / 1024.0, sampler.rate(2) as f64 / 1024.0)
            };
            let mut pairs = vec![
                ("total_connections_received", get(&stats.connections_received)),
                ("total_commands_processed", n(stats.commands.processed())),
                ("instantaneous_ops_per_sec", n(ops)),
                ("total_net_input_bytes", n(stats.net_input.sum())),
                ("total_net_output_bytes", n(stats.net_output.sum())),
                ("total_net_repl_input_bytes", z()),
                ("total_net_repl_output_bytes", z()),
                ("instantaneous_input_kbps", format!("{kbps_in:.2}")),
                ("instantaneous_output_kbps", format!("{kbps_out:.2}")),
                ("instantaneous_input_repl_kbps", s("0.00")),
                ("instantaneous_output_repl_kbps", s("0.00")),
                ("rejected_connections", get(&stats.rejected_connections)),
            ];
            let [full, partial_ok, partial_err] = state.replication.sync_counts();
            pairs.extend([
                ("sync_full", n(full)),
                ("sync_partial_ok", n(partial_ok)),
                ("sync_partial_err", n(partial_err)),
            ]);
            for zero in [
                "expired_stale_perc",
                "expired_time_cap_reached_count",
                "expire_cycle_cpu_milliseconds",
                "evicted_clients",
            ] {
                pairs.push((zero, if zero == "expired_stale_perc" { s("0.00") } else { z() }));
            }
            pairs.insert(15, ("expired_keys", get(&state.maint.expired_keys)));
            let (total, current) = state.eviction.exceeded_ms();
            pairs.insert(19, ("evicted_keys", get(&state.eviction.evicted_keys)));
            pairs.insert(21, ("total_eviction_exceeded_time", n(total)));
            pairs.insert(22, ("current_eviction_exceeded_time", n(current)));
            let (hits, misses) = stats.commands.hits_and_misses();
            pairs.push(("keyspace_hits", n(hits)));
            pairs.push(("keyspace_misses", n(misses)));
            use crate::pubsub::Kind;
            pairs.push(("pubsub_channels", n(state.pubsub.channels(Kind::Channel, None).len() as u64)));
            pairs.push(("pubsub_patterns", n(state.pubsub.patterns() as u64)));
            pairs.push(("pubsubshard_channels", n(state.pubsub.channels(Kind::Shard, None).len() as u64)));
            for zero in [
                "latest_fork_usec",
                "total_forks",
                "migrate_cached_sockets",
                "slave_expires_tracked_keys",
                "active_defrag_hits",
                "active_defrag_misses",
                "active_defrag_key_hits",
                "active_defrag_key_misses",
                "total_active_defrag_time",
                "current_active_defrag_time",
            ] {
                pairs.push((zero, z()));
            }
            let [_, keys, items, prefixes] = state.tracking.counts();
            pairs.push(("tracking_total_keys", n(keys as u64)));
            pairs.push(("tracking_total_items", n(items as u64)));
            pairs.push(("tracking_total_prefixes", n(prefixes as u64)));
            pairs.push(("unexpected_error_replies", z()));
            pairs.push(("total_error_replies", get(&stats.error_replies)));
            for zero in [
                "dump_payload_sanitizations",
                "total_reads_processed",
                "total_writes_processed",
                "io_threaded_reads_processed",
                "io_threaded_writes_processed",
                "reply_buffer_shrinks",
                "reply_buffer_expands",
            ] {
                pairs.push((zero, z()));
            }
            // The collector of stores without a compaction filter (extensions).
            let maint = &state.maint;
            pairs.push(("rediskv_expire_examined_keys", get(&maint.expire_examined)));
            pairs.push(("rediskv_gc_examined_records", get(&maint.gc_examined)));
            pairs.push(("rediskv_gc_collected_records", get(&maint.gc_collected)));
            pairs.push(("rediskv_gc_passes", get(&maint.gc_passes)));
            pairs.push(("rediskv_gc_position", lock(&maint.gc_position).clone()));
            let leader = maint.leader.load(std::sync::atomic::Ordering::Relaxed);
            pairs.push(("rediskv_maintenance_leader", u8::from(leader).to_string()));
            #[cfg(feature = "etcd")]
            if state.store.etcd().is_some() {
                // Over every cluster holding data.
                let stats = state.store.etcd_data().iter().map(|etcd| etcd.stats()).fold(
                    rediskv_etcd::Stats::default(),
                    |a, b| rediskv_etcd::Stats {
                        unavailable_retries: a.unavailable_retries + b.unavailable_retries,
                        ambiguous_commits: a.ambiguous_commits + b.ambiguous_commits,
                        ambiguous_applied: a.ambiguous_applied + b.ambiguous_applied,
                        conflict_retries: a.conflict_retries + b.conflict_retries,
                    },
                );
                pairs.push(("rediskv_etcd_unavailable_retries", stats.unavailable_retries.to_string()));
                pairs.push(("rediskv_etcd_ambiguous_commits", stats.ambiguous_commits.to_string()));
                pairs.push(("rediskv_etcd_ambiguous_applied", stats.ambiguous_applied.to_string()));
                pairs.push(("rediskv_etcd_conflict_retries", stats.conflict_retries.to_string()));
            }
            fields(out, &pairs);
        }
        "replication" => {
            let mut pairs = Vec::new();
            if state.link.is_replica() {
                pairs.push(("role".to_string(), s("slave")));
                let priority = config.get("replica-priority");
                let read_only = config.get("replica-read-only") == "yes";
                let announced = config.get("replica-announced") == "yes";
                let offset = state.replication.id_and_offset().1;
                pairs.extend(state.link.info_fields(offset, priority, read_only, announced));
            } else {
                pairs.push(("role".to_string(), s("master")));
            }
            pairs.extend(
                state.replication.info_fields(config.get("repl-backlog-size"), state.failover.state_name()),
            );
            let pairs: Vec<(&str, String)> = pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            fields(out, &pairs);
        }
        "cpu" => {
            let (user, sys) = cpu_seconds();
            fields(
                out,
                &[
                    ("used_cpu_sys", format!("{sys:.6}")),
                    ("used_cpu_user", format!("{user:.6}")),
                    ("used_cpu_sys_children", s("0.000000")),
                    ("used_cpu_user_children", s("0.000000")),
                    ("used_cpu_sys_main_thread", format!("{sys:.6}")),
                    ("used_cpu_user_main_thread", format!("{user:.6}")),
                ],
            );
        }
        "commandstats" => {
            for (name, c) in stats.commands.snapshot() {
                let per = if c.calls == 0 { 0.0 } else { c.usec as f64 / c.calls as f64 };
                let _ = write!(
                    out,
                    "cmdstat_{name}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}\r\n",
                    c.calls, c.usec, c.rejected, c.failed
                );
            }
        }
        "latencystats" => {
            let percentiles: Vec<f64> = config
                .get("latency-tracking-info-percentiles")
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            for (name, (calls, buckets)) in stats.commands.histograms() {
                let parts: Vec<String> = percentiles
                    .iter()
                    .map(|&p| {
                        // The first bucket whose cumulative count reaches p% of the calls.
                        let target = ((p / 100.0) * calls as f64).ceil().max(1.0) as u64;
                        let mut seen = 0;
                        let bucket = buckets.iter().position(|n| {
                            seen += n;
                            seen >= target
                        });
                        let usec = bucket.map_or(0, |b| 1u64 << b);
                        let label = format!("{p}");
                        format!("p{label}={usec}.000")
                    })
                    .collect();
                let _ = write!(out, "latency_percentiles_usec_{name}:{}\r\n", parts.join(","));
            }
        }
        "errorstats" => {
            for (code, count) in lock(&stats.errors).iter() {
                let _ = write!(out, "errorstat_{code}:count={count}\r\n");
            }
        }
        "cluster" => {
            fields(out, &[("cluster_enabled", s(if state.cluster.get().is_some() { "1" } else { "0" }))])
        }
        "keyspace" => {
            let base = namespace;
            let databases = (config.number("databases").max(1) as usize).min(DATABASES);
            drop(config);
            for index in 0..databases {
                let (keys, expires, avg_ttl) = keyspace(state, base, index);
                if keys > 0 {
                    let _ = write!(out, "db{index}:keys={keys},expires={expires},avg_ttl={avg_ttl}\r\n");
                }
            }
        }
        _ => {}
    }
}

/// Keys, keys with a TTL, and their mean remaining TTL in ms, of database `index` of a
/// namespace: in O(1) from the engine's counts (which include expired keys not deleted yet,
/// as Redis'); over a store several server nodes share, one scan of the database's metadata
/// records (live keys only; a cluster node's, of the slots it serves: only their ranges in
/// Kvrocks' cluster form).
fn keyspace(state: &State, base: &[u8], index: usize) -> (u64, u64, u64) {
    let engine = state.engines().into_iter().find(|e| e.layout().namespace() == base);
    let now = unix_micros() / 1000;
    let cluster = state.cluster.get().filter(|c| c.shares_store());
    if cluster.is_none()
        && let Some(Ok(Some(count))) = engine.as_ref().map(|e| e.key_count(index))
    {
        return (count.keys, count.expires, count.avg_ttl(now));
    }
    let topology = cluster.map(|c| c.topology());
    // The namespace database `index` uses now (SWAPDB moves them).
    let Some(layout) = engine.as_ref().and_then(|e| e.db_layout(index).cloned()) else { return (0, 0, 0) };
    let (mut keys, mut expires, mut ttl_sum) = (0u64, 0u64, 0u64);
    let backend = state.store.backend();
    // Where the layout writes each key's slot, only the node's slot ranges are read.
    let ranges: Vec<KeyRange> = match (cluster, &topology) {
        (Some(cluster), Some(topology)) if layout.cluster_slots() => (topology.ranges.iter())
            .filter(|r| r.2.id == cluster.myself.id)
            .filter_map(|r| layout.slots_range(r.0, r.1).ok())
            .collect(),
        _ => vec![layout.namespace_range()],
    };
    let scans = ranges.iter().map(|range| backend.scan(ColumnFamily::Metadata, range, Direction::Forward));
    let Ok(scans) = scans.collect::<Result<Vec<_>, _>>() else { return (0, 0, 0) };
    for (key, value) in scans.into_iter().flatten().flatten() {
        if let (Some(cluster), Some(topology)) = (cluster, &topology) {
            let Ok(key) = layout.decode_metadata_key(&key) else { continue };
            if !cluster.holds(topology, rediskv::key_slot(key.user_key)) {
                continue;
            }
        }
        let Ok(meta) = layout.decode_metadata(&value) else { continue };
        if !meta.is_live(now) {
            continue;
        }
        keys += 1;
        if meta.expire_ms != 0 {
            expires += 1;
            ttl_sum += meta.expire_ms.saturating_sub(now);
        }
    }
    (keys, expires, ttl_sum.checked_div(expires).unwrap_or(0))
}

/// Resident memory from /proc (0 elsewhere).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).unwrap_or(0) * 4096
}

fn system_memory() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kb = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok());
    kb.unwrap_or(0) * 1024
}

/// User and system CPU seconds of this process from /proc (clock ticks at 100 Hz).
fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let mut f = rest.split_whitespace().skip(11);
    let tick = |v: Option<&str>| v.and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (tick(f.next()), tick(f.next()))
}

/// MEMORY STATS, DOCTOR, MALLOC-STATS and PURGE (MEMORY USAGE and HELP are the engine's).
/// The figures are this server's: the store's bytes (`used_bytes`) where Redis counts its
/// allocations, the process RSS, and each connection's buffers.
pub fn memory(argv: &[Bytes], state: &State, namespace: &[u8]) -> Reply {
    let sub = argv.get(1).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    if argv.len() != 2 {
        return Reply::Error(format!(
            "ERR wrong number of arguments for 'memory|{}' command",
            String::from_utf8_lossy(&sub)
        ));
    }
    let dataset = state.store.used_bytes();
    let client_bytes = client_buffer_bytes(state);
    let used = dataset + client_bytes;
    let rss = rss_bytes();
    let client_count = lock(&state.clients).len() as u64;
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    match sub.as_slice() {
        b"stats" => {
            let databases = (state.config().number("databases").max(1) as usize).min(DATABASES);
            let keys: Vec<(usize, u64)> = (0..databases)
                .map(|i| (i, keyspace(state, namespace, i).0))
                .filter(|(_, n)| *n > 0)
                .collect();
            let count: u64 = keys.iter().map(|(_, n)| n).sum();
            let int = |n: u64| Reply::Integer(n as i64);
            let mut fields = vec![
                ("peak.allocated", int(used)),
                ("total.allocated", int(used)),
                ("startup.allocated", int(0)),
                ("replication.backlog", int(0)),
                ("clients.slaves", int(0)),
                ("clients.normal", int(client_bytes)),
                ("cluster.links", int(0)),
                ("aof.buffer", int(0)),
                ("lua.caches", int(0)),
                ("functions.caches", int(0)),
            ];
            let mut out: Vec<(Reply, Reply)> =
                fields.drain(..).map(|(k, v)| (Reply::bulk(k.as_bytes()), v)).collect();
            for (db, _) in &keys {
                let overhead = [
                    "overhead.hashtable.main",
                    "overhead.hashtable.expires",
                    "overhead.hashtable.slot-to-keys",
                ]
                .map(|k| (Reply::bulk(k.as_bytes()), int(0)));
                out.push((Reply::bulk(format!("db.{db}").as_bytes()), Reply::Map(overhead.to_vec())));
            }
            let more = [
                ("overhead.total", int(client_bytes)),
                ("keys.count", int(count)),
                ("keys.bytes-per-key", int(dataset.checked_div(count).unwrap_or(0))),
                ("dataset.bytes", int(dataset)),
                ("dataset.percentage", Reply::Double(100.0 * ratio(dataset, used))),
                ("peak.percentage", Reply::Double(100.0)),
                ("allocator.allocated", int(used)),
                ("allocator.active", int(used)),
                ("allocator.resident", int(rss)),
                ("allocator-fragmentation.ratio", Reply::Double(1.0)),
                ("allocator-fragmentation.bytes", int(0)),
                ("allocator-rss.ratio", Reply::Double(ratio(rss, used))),
                ("allocator-rss.bytes", Reply::Integer(rss as i64 - used as i64)),
                ("rss-overhead.ratio", Reply::Double(1.0)),
                ("rss-overhead.bytes", int(0)),
                ("fragmentation", Reply::Double(ratio(rss, used))),
                ("fragmentation.bytes", Reply::Integer(rss as i64 - used as i64)),
            ];
            out.extend(more.into_iter().map(|(k, v)| (Reply::bulk(k.as_bytes()), v)));
            Reply::Map(out)
        }
        b"doctor" => {
            let text = if used < 5 << 20 {
                "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".to_string()
            } else {
                let mut issues = String::new();
                if ratio(rss, used) > 1.4 && rss.saturating_sub(used) > 10 << 20 {
                    issues.push_str(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"mimalloc\".\n\n");
                }
                if client_bytes.checked_div(client_count).unwrap_or(0) > 200 << 10 {
                    issues.push_str(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
                }
                if issues.is_empty() {
                    "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".to_string()
                } else {
                    format!(
                        "Sam, I detected a few issues in this Redis instance memory implants:\n\n{issues}I'm here to keep you safe, Sam. I want to help you.\n"
                    )
                }
            };
            Reply::Verbatim { format: *b"txt", text: Bytes::from(text) }
        }
        b"malloc-stats" => Reply::bulk(b"Stats not supported for the current allocator"),
        // mimalloc gives freed pages back by itself: nothing to ask it.
        b"purge" => Reply::OK,
        _ => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try MEMORY HELP.",
            String::from_utf8_lossy(&argv[1])
        )),
    }
}

/// Whether the store is past `maxmemory` (not over etcd, whose memory is the cluster's).
pub fn out_of_memory(state: &State) -> bool {
    let max = state.maxmemory.load(Relaxed);
    max > 0 && state.store.limits_memory() && used_memory(state) > max
}

/// The memory `maxmemory` limits: the store's and the connections', less the estimated
/// bytes of evicted collections the collector has not dropped yet.
pub fn used_memory(state: &State) -> u64 {
    let pending = state.eviction.pending_bytes(state.maint.gc_passes.load(Relaxed));
    (state.store.used_bytes() + client_buffer_bytes(state)).saturating_sub(pending)
}

/// Bytes the connections hold now: each one's state (its entry in the client list and its
/// client) and the query and reply bytes in its buffers, in O(1) (their sum is kept as
/// they change, [`crate::client_info::ClientInfo::set_buffers`]). A query
/// buffer's spare room is left out: the tick gives it back soon, and counting it made
/// `used_memory` jump by what the last big request left (Redis' lazyfree unit compares
/// it with twice a small figure).
pub fn client_buffer_bytes(state: &State) -> u64 {
    state.client_bytes.sum()
}
