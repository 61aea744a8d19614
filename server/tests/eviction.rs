//! `maxmemory-policy`: which keys eviction picks under each policy, what it announces
//! (keyspace events, tracking invalidations, WATCH, INFO), OBJECT FREQ/IDLETIME and
//! RESTORE's IDLETIME/FREQ, compared with a real redis-server; and, on rediskv alone, that
//! an evicted collection's records, left to the collector, do not make eviction take more
//! keys than needed; and `maxmemory` over fjall, whose memtables and caches count.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Server, Value, redis, rediskv, rediskv_on_disk, same_as_redis};

fn ok() -> Value {
    Value::Status("OK".into())
}

fn info_number(c: &mut Client, section: &str, field: &str) -> i64 {
    let text = match c.cmd(&["INFO", section]) {
        Value::Bulk(Some(b)) | Value::Verbatim(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO {other:?}"),
    };
    let line =
        text.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap_or_else(|| panic!("no {field}"));
    line[field.len() + 1..].trim().parse().unwrap()
}

fn sorted_keys(c: &mut Client) -> Vec<String> {
    let mut keys = c.cmd(&["KEYS", "*"]).texts();
    keys.sort();
    keys
}

/// Five 100 KB strings `<policy>:1`..`<policy>:5`, rewritten by RESTORE with `option` `values[i]`
/// (IDLETIME or FREQ), or with TTLs when `option` is `EX`, then a `maxmemory` 10 KB under
/// the memory in use: one key must go, and the policy says which.
fn evict_one(c: &mut Client, policy: &str, option: &str, values: [&str; 5]) -> Vec<Value> {
    let mut out = Vec::new();
    out.push(c.cmd(&["FLUSHALL"]));
    out.push(c.cmd(&["CONFIG", "RESETSTAT"]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory-policy", policy, "maxmemory-samples", "10"]));
    let value = "v".repeat(100_000);
    for (i, v) in values.iter().enumerate() {
        // Names of their own: Redis' pool may still hold another scenario's keys.
        let key = format!("{policy}:{}", i + 1);
        if option == "EX" {
            out.push(c.cmd(&["SET", &key, &value, "EX", v]));
            continue;
        }
        out.push(c.cmd(&["SET", &key, &value]));
        let Value::Bulk(Some(payload)) = c.cmd(&["DUMP", &key]) else { panic!("DUMP") };
        let args: Vec<&[u8]> =
            vec![b"RESTORE", key.as_bytes(), b"0", &payload, b"REPLACE", option.as_bytes(), v.as_bytes()];
        c.send(&args);
        out.push(c.read());
    }
    // A key without a TTL, which volatile policies never take.
    out.push(c.cmd(&["SET", &format!("{policy}:plain"), &value]));
    out.push(c.cmd(&["OBJECT", "FREQ", &format!("{policy}:1")]));
    let used = info_number(c, "memory", "used_memory");
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory", &(used - 10_000).to_string()]));
    out.push(Value::Int(info_number(c, "stats", "evicted_keys")));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]));
    out.push(Value::Array(Some(
        sorted_keys(c).into_iter().map(|k| Value::Bulk(Some(k.into_bytes()))).collect(),
    )));
    out
}

fn ranked_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut out = Vec::new();
    // The most idle key.
    out.extend(evict_one(&mut c, "allkeys-lru", "IDLETIME", ["1000", "5000", "3000", "2000", "4000"]));
    // The least used key.
    out.extend(evict_one(&mut c, "allkeys-lfu", "FREQ", ["40", "30", "3", "50", "20"]));
    // The nearest expiry.
    out.extend(evict_one(&mut c, "volatile-ttl", "EX", ["500", "400", "300", "100", "200"]));
    // The most idle key with a TTL (`plain` is idle longer but has none).
    out.push(c.cmd(&["FLUSHALL"]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"]));
    let value = "v".repeat(20_000);
    out.push(c.cmd(&["SET", "plain", &value]));
    out.push(c.cmd(&["SET", "t1", &value, "EX", "1000"]));
    out.push(c.cmd(&["SET", "t2", &value, "EX", "1000"]));
    // RESTORE sets the TTL too: EXPIRE afterwards would count as a use.
    for (key, ttl, idle) in [("plain", "0", "9000"), ("t1", "1000000", "1000"), ("t2", "1000000", "2000")] {
        let Value::Bulk(Some(payload)) = c.cmd(&["DUMP", key]) else { panic!("DUMP") };
        let args: Vec<&[u8]> = vec![
            b"RESTORE",
            key.as_bytes(),
            ttl.as_bytes(),
            &payload,
            b"REPLACE",
            b"IDLETIME",
            idle.as_bytes(),
        ];
        c.send(&args);
        out.push(c.read());
    }
    let used = info_number(&mut c, "memory", "used_memory");
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory", &(used - 10_000).to_string()]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]));
    out.push(Value::Array(Some(
        sorted_keys(&mut c).into_iter().map(|k| Value::Bulk(Some(k.into_bytes()))).collect(),
    )));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]));
    out
}

#[test]
fn each_policy_picks_the_key_redis_picks() {
    same_as_redis(ranked_script);
}

/// Evicting everything: the `evicted` events, the WATCH it breaks, OOM once nothing is
/// left, and the volatile policies that find nothing to take.
fn announce_script(server: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let mut c = server.client();
    let mut sub = server.client();
    let mut w = server.client();
    out.push(c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]));
    out.push(sub.cmd(&["PSUBSCRIBE", "__keyevent@*__:evicted"]));
    for db in ["0", "3"] {
        out.push(c.cmd(&["SELECT", db]));
        out.push(c.cmd(&["MSET", "a", "1", "b", "2"]));
        out.push(c.cmd(&["HSET", "h", "f", "v"]));
    }
    out.push(w.cmd(&["WATCH", "a"]));
    // Volatile policies: no key has a TTL, nothing goes, writes are refused.
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]));
    out.push(c.cmd(&["SET", "x", "1"]));
    out.push(c.cmd(&["GET", "a"]));
    out.push(c.cmd(&["DBSIZE"]));
    // Any key: every one goes, one event each.
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]));
    out.push(c.cmd(&["DBSIZE"]));
    out.push(c.cmd(&["SET", "x", "1"]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]));
    let mut events: Vec<String> = (0..6)
        .map(|_| match sub.read() {
            Value::Array(Some(parts)) => format!("{} {}", parts[2].text(), parts[3].text()),
            other => panic!("{other:?}"),
        })
        .collect();
    events.sort();
    out.extend(events.into_iter().map(Value::Status));
    out.push(Value::Int(info_number(&mut c, "stats", "evicted_keys")));
    out.push(c.cmd(&["SELECT", "0"]));
    out.push(c.cmd(&["DBSIZE"]));
    out.push(w.cmd(&["MULTI"]));
    out.push(w.cmd(&["PING"]));
    out.push(w.cmd(&["EXEC"]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction", "notify-keyspace-events", ""]));
    out
}

#[test]
fn eviction_announces_what_redis_announces() {
    same_as_redis(announce_script);
}

/// A tracking client whose command makes eviction take a key it read hears of it before its
/// reply (Redis' tracking unit does this with SETBIT, whose bitmaps are sparse here:
/// SETRANGE makes the big value in both).
fn tracking_script(server: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let mut a = server.client();
    let mut b = server.client();
    a.cmd(&["HELLO", "3"]);
    // Emptied before tracking starts (FLUSHALL would send `a` an invalidation).
    out.push(b.cmd(&["FLUSHALL"]));
    out.push(a.cmd(&["CLIENT", "TRACKING", "on"]));
    out.push(b.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]));
    let used = info_number(&mut b, "memory", "used_memory");
    out.push(b.cmd(&["CONFIG", "SET", "maxmemory", &(used + 100_000).to_string()]));
    out.push(a.cmd(&["SETEX", "volatile-key", "10000", "x"]));
    out.push(a.cmd(&["GET", "volatile-key"]));
    out.push(b.cmd(&["SETRANGE", "big", "200000", "x"]));
    out.push(a.cmd(&["STRLEN", "big"]));
    out.push(a.read());
    out.push(b.cmd(&["EXISTS", "volatile-key"]));
    // Still over, nothing left with a TTL: a write is refused, a read is not.
    out.push(b.cmd(&["SET", "x", "1"]));
    out.push(b.cmd(&["STRLEN", "big"]));
    out.push(b.cmd(&["CONFIG", "SET", "maxmemory", "0", "maxmemory-policy", "noeviction"]));
    out
}

#[test]
fn tracking_hears_of_an_eviction_before_the_reply() {
    same_as_redis(tracking_script);
}

/// OBJECT FREQ and IDLETIME under each kind of policy, RESTORE's IDLETIME and FREQ.
fn object_script(server: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let mut c = server.client();
    out.push(c.cmd(&["SET", "foo", "bar"]));
    let Value::Bulk(Some(payload)) = c.cmd(&["DUMP", "foo"]) else { panic!("DUMP") };
    let restore = |c: &mut Client, option: &str, value: &str| {
        c.send(&[b"RESTORE", b"r", b"0", &payload, b"REPLACE", option.as_bytes(), value.as_bytes()]);
        c.read()
    };
    out.push(c.cmd(&["OBJECT", "FREQ", "foo"]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-lfu"]));
    out.push(c.cmd(&["OBJECT", "IDLETIME", "foo"]));
    out.push(c.cmd(&["SET", "new", "v"]));
    out.push(c.cmd(&["OBJECT", "FREQ", "new"]));
    out.push(restore(&mut c, "FREQ", "100"));
    out.push(c.cmd(&["OBJECT", "FREQ", "r"]));
    // IDLETIME is ignored under LFU: a new key's counter.
    out.push(restore(&mut c, "IDLETIME", "100"));
    out.push(c.cmd(&["OBJECT", "FREQ", "r"]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]));
    out.push(c.cmd(&["OBJECT", "FREQ", "r"]));
    out.push(restore(&mut c, "IDLETIME", "1000"));
    let idle = match c.cmd(&["OBJECT", "IDLETIME", "r"]) {
        Value::Int(n) => n,
        other => panic!("{other:?}"),
    };
    out.push(Value::Bool((1000..=1010).contains(&idle)));
    // FREQ is ignored under LRU: just restored, not idle.
    out.push(restore(&mut c, "FREQ", "7"));
    out.push(c.cmd(&["OBJECT", "IDLETIME", "r"]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]));
    out
}

#[test]
fn object_freq_and_idletime_follow_the_policy() {
    same_as_redis(object_script);
}

/// A counter read many times under LFU grows logarithmically: 200 reads with
/// `lfu-log-factor 10` take it from 5 to somewhere around 9-12, never to 205.
#[test]
fn lfu_counters_grow_logarithmically() {
    let server = rediskv(&[]);
    let mut c = server.client();
    // No decay: a minute boundary during the test must not take one off.
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu", "lfu-decay-time", "0"]);
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["OBJECT", "FREQ", "k"]), Value::Int(5));
    for _ in 0..200 {
        c.cmd(&["GET", "k"]);
    }
    let Value::Int(freq) = c.cmd(&["OBJECT", "FREQ", "k"]) else { panic!() };
    assert!((6..=20).contains(&freq), "{freq}");
    // lfu-log-factor 0: every use counts.
    c.cmd(&["CONFIG", "SET", "lfu-log-factor", "0"]);
    for _ in 0..50 {
        c.cmd(&["GET", "k"]);
    }
    assert_eq!(c.cmd(&["OBJECT", "FREQ", "k"]), Value::Int(freq + 50));
}

/// An evicted hash's records wait for the collector: eviction counts them as freed (an
/// estimate) instead of evicting every other key while the store's bytes have not moved
/// yet, and the collector does free them.
#[test]
fn an_evicted_collection_counts_as_freed_until_collected() {
    let server = rediskv(&[]);
    let mut c = server.client();
    let mut args: Vec<String> = vec!["HSET".into(), "h".into()];
    for i in 0..20_000 {
        args.push(format!("field:{i}"));
        args.push(format!("value:{i}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&refs), Value::Int(20_000));
    for i in 0..20 {
        c.cmd(&["SET", &format!("s{i}"), "x"]);
    }
    // The hash is the most idle key.
    let Value::Bulk(Some(payload)) = c.cmd(&["DUMP", "h"]) else { panic!("DUMP") };
    c.send(&[b"RESTORE", b"h", b"0", &payload, b"REPLACE", b"IDLETIME", b"10000"]);
    assert_eq!(c.read(), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru", "maxmemory-samples", "64"]), ok());
    let used = info_number(&mut c, "memory", "used_memory");
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &(used - 10_000).to_string()]), ok());
    assert_eq!(c.cmd(&["EXISTS", "h"]), Value::Int(0));
    assert_eq!(info_number(&mut c, "stats", "evicted_keys"), 1);
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Int(20));
    assert_eq!(c.cmd(&["SET", "after", "x"]), ok());
    // The collector drops the records: the memory in use falls under the limit for real.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let used_now = info_number(&mut c, "memory", "used_memory");
        if used_now < used - 100_000 {
            break;
        }
        assert!(Instant::now() < deadline, "the hash's records were never collected ({used_now} of {used})");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_number(&mut c, "stats", "evicted_keys"), 1);
}

/// Writes under `maxmemory 1` and the default `noeviction`: refused with Redis' OOM error
/// (a command, a script's call, a transaction), reads served, writes back at `maxmemory 0`.
fn oom_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut out = vec![c.cmd(&["SET", "foo", "bar"]), c.cmd(&["CONFIG", "SET", "maxmemory", "1"])];
    out.push(c.cmd(&["SET", "x", "y"]));
    out.push(c.cmd(&["LPUSH", "list", "a"]));
    out.push(c.cmd(&["EVAL", "return redis.call('set', 'x', 'y')", "0"]));
    out.push(c.cmd(&["EVAL", "return redis.pcall('set', 'x', 'y')", "0"]));
    out.push(c.cmd(&["MULTI"]));
    out.push(c.cmd(&["SET", "x", "y"]));
    out.push(c.cmd(&["EXEC"]));
    out.push(c.cmd(&["GET", "foo"]));
    out.push(c.cmd(&["DEL", "foo"]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]));
    out.push(c.cmd(&["SET", "x", "y"]));
    out.push(c.cmd(&["GET", "x"]));
    out
}

#[test]
fn fjall_refuses_writes_over_maxmemory_as_redis() {
    let Some(redis) = redis(&[]) else { return };
    let theirs = oom_script(&redis);
    assert!(matches!(&theirs[2], Value::Error(e) if e.starts_with("OOM ")), "{:?}", theirs[2]);
    let ours = oom_script(&rediskv_on_disk("fjall", &[]));
    assert_eq!(ours, theirs);
}

/// Under an eviction policy, `maxmemory 1` on fjall evicts every key (as Redis' memory can
/// never get that low), with the `evicted` event.
#[test]
fn fjall_evicts_under_an_eviction_policy() {
    let server = rediskv_on_disk("fjall", &[]);
    let mut c = server.client();
    for i in 0..10 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), ok());
    }
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Int(0));
    assert_eq!(info_number(&mut c, "stats", "evicted_keys"), 10);
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
}

/// A disk engine's `used_memory` counts its memtables: it grows with what is written, and a
/// big collection's UNLINK, or a FLUSHDB ASYNC, gives it back (the memtables holding it are
/// written to tables), as Redis' lazyfree unit expects; a limit above it lets writes through.
fn used_memory_follows_the_memtables(engine: &str) {
    let server = rediskv_on_disk(engine, &[]);
    let mut c = server.client();
    // A debug build on a busy machine takes seconds for the SADD.
    c.set_read_timeout(Duration::from_secs(120));
    for release in [&["UNLINK", "set"][..], &["FLUSHDB", "ASYNC"]] {
        let before = info_number(&mut c, "memory", "used_memory");
        let mut args: Vec<String> = vec!["SADD".into(), "set".into()];
        args.extend((0..50_000).map(|i| i.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(c.cmd(&refs), Value::Int(50_000));
        let peak = info_number(&mut c, "memory", "used_memory");
        assert!(peak > before + 1_000_000, "{engine}: {before} → {peak}");
        assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &(peak * 2).to_string()]), ok());
        assert_eq!(c.cmd(&["SET", "x", "y"]), ok());
        assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
        let released = c.cmd(release);
        assert!(matches!(released, Value::Int(1) | Value::Status(_)), "{release:?}: {released:?}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = info_number(&mut c, "memory", "used_memory");
            if now < before * 2 && now < peak {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{engine}, {release:?}: used_memory stayed at {now} ({before} before, {peak} at the peak)"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn fjall_used_memory_follows_its_memtables() {
    used_memory_follows_the_memtables("fjall");
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_used_memory_follows_its_memtables() {
    used_memory_follows_the_memtables("rocksdb");
}
