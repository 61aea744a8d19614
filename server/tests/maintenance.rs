//! The server's maintenance thread on the memory store: keys that expire and are never read
//! again leave the backend (active expiry), and the records of a deleted collection leave it
//! too (the incremental collector), both visible in INFO.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Value, rediskv};

fn info_field(c: &mut Client, section: &str, name: &str) -> String {
    let text = c.cmd(&["INFO", section]).text();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
        .trim()
        .to_string()
}

/// The store's bytes (`used_memory` also counts the connections).
fn store_bytes(c: &mut Client) -> u64 {
    info_field(c, "memory", "used_memory_dataset").parse().unwrap()
}

/// Sends `commands` in one pipeline and checks every reply is not an error.
fn pipeline(c: &mut Client, commands: impl Iterator<Item = Vec<String>>) {
    let mut buf = Vec::new();
    let mut n = 0;
    for args in commands {
        buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in &args {
            buf.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        n += 1;
    }
    c.send_raw(&buf);
    for _ in 0..n {
        assert!(!matches!(c.read(), Value::Error(_)));
    }
}

/// Polls `done` every 50 ms until it holds or `limit` passes; returns how long it took.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// The active expiry sweep deletes keys nobody reads again: their records leave the store
/// and `expired_keys` counts each. How soon is a benchmark's question (a loaded machine
/// slows the sweep); the test allows 30 s and prints the time.
#[test]
fn keys_that_expire_unread_leave_the_backend() {
    let server = rediskv(&[]);
    let mut c = server.client();
    let baseline = store_bytes(&mut c);
    let n = 100_000;
    for chunk in 0..10 {
        pipeline(
            &mut c,
            (0..n / 10).map(|i| {
                vec![
                    "SET".into(),
                    format!("ttl:{chunk}:{i}"),
                    "some value".into(),
                    "PX".into(),
                    "3000".into(),
                ]
            }),
        );
    }
    // The last key expires by then (a TTL long enough for a slow machine to load them all).
    let expires_at = Instant::now() + Duration::from_secs(3);
    assert!(store_bytes(&mut c) > baseline + 1_000_000, "100k keys take room");
    let mut watcher = server.client();
    wait_for(Duration::from_secs(30), || store_bytes(&mut watcher) <= baseline)
        .expect("expired keys never left the backend");
    let since_expiry = Instant::now().saturating_duration_since(expires_at);
    eprintln!("100k expired keys gone {since_expiry:?} after expiring");
    // The sweep counts a step's keys right after deleting them: the last step's count may
    // land just after the reading above.
    let expired = |c: &mut Client| info_field(c, "stats", "expired_keys").parse::<u64>().unwrap();
    wait_for(Duration::from_secs(1), || expired(&mut watcher) == n)
        .unwrap_or_else(|| panic!("expired_keys is {}, not {n}", expired(&mut watcher)));
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Int(0));
}

#[test]
fn records_of_a_deleted_hash_are_collected() {
    let server = rediskv(&[]);
    let mut c = server.client();
    let baseline = store_bytes(&mut c);
    let fields = 200_000;
    for chunk in 0..(fields / 1000) {
        let mut args = vec!["HSET".to_string(), "big".to_string()];
        for i in 0..1000 {
            args.push(format!("field:{chunk}:{i}"));
            args.push(format!("value {i}"));
        }
        pipeline(&mut c, std::iter::once(args));
    }
    let loaded = store_bytes(&mut c);
    assert!(loaded > baseline + 5_000_000, "200k fields take room: {baseline} → {loaded}");
    assert_eq!(c.cmd(&["DEL", "big"]), Value::Int(1));
    // The keys left are still served while the collector works.
    assert_eq!(c.cmd(&["SET", "other", "v"]), Value::Status("OK".into()));
    let collected =
        |c: &mut Client| info_field(c, "stats", "rediskv_gc_collected_records").parse::<u64>().unwrap();
    let took = wait_for(Duration::from_secs(60), || collected(&mut c) >= fields)
        .expect("the deleted hash's records were never collected");
    eprintln!("200k records collected in {took:?}");
    let now = store_bytes(&mut c);
    assert!(
        now <= baseline + (loaded - baseline) / 20,
        "bytes {baseline} → {loaded} → {now}: not back within 5%"
    );
    assert_eq!(c.cmd(&["GET", "other"]), Value::Bulk(Some(b"v".to_vec())));
    assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(vec![])));
}

#[test]
fn a_ttl_set_after_a_long_quiet_spell_is_still_swept_promptly() {
    // With no TTL in sight, expiry passes back off (1, 2, 4, 8 s…); a command that sets a
    // TTL must bring them back.
    let server = rediskv(&[]);
    let mut c = server.client();
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(c.cmd(&["SET", "k", "v", "PX", "300"]), Value::Status("OK".into()));
    let took = wait_for(Duration::from_secs(20), || info_field(&mut c, "stats", "expired_keys") == "1")
        .expect("the key never expired actively");
    assert!(took <= Duration::from_secs(3), "swept {took:?} after the SET, the back-off was not cut short");
}

/// Expiry passes read a database's records only while some key there has a TTL: after the
/// last such key expires, the 1,000 keys without one are not read again until a TTL is set.
#[test]
fn a_database_without_ttls_is_not_swept() {
    let server = rediskv(&[]);
    let mut c = server.client();
    pipeline(&mut c, (0..1000).map(|i| vec!["SET".into(), format!("k{i}"), "v".into()]));
    let examined =
        |c: &mut Client| info_field(c, "stats", "rediskv_expire_examined_keys").parse::<u64>().unwrap();
    assert_eq!(c.cmd(&["SET", "short", "v", "PX", "100"]), Value::Status("OK".into()));
    wait_for(Duration::from_secs(20), || info_field(&mut c, "stats", "expired_keys") == "1")
        .expect("the key never expired actively");
    let after_expiry = examined(&mut c);
    assert!(after_expiry >= 1000, "the pass that found the key read {after_expiry} records");
    // A pass that found a key is followed by another one second later, where keys have TTLs.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(examined(&mut c), after_expiry, "a database without TTLs was swept");
    assert_eq!(c.cmd(&["SET", "later", "v", "EX", "1000"]), Value::Status("OK".into()));
    wait_for(Duration::from_secs(20), || examined(&mut c) >= after_expiry + 1000)
        .expect("a key with a TTL did not bring the sweep back");
}

#[test]
fn debug_set_active_expire_0_stops_active_expiry() {
    let server = rediskv(&["--enable-debug-command", "yes"]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), Value::Status("OK".into()));
    assert_eq!(c.cmd(&["SET", "k", "v", "PX", "100"]), Value::Status("OK".into()));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(info_field(&mut c, "stats", "expired_keys"), "0");
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), Value::Status("OK".into()));
    wait_for(Duration::from_secs(10), || info_field(&mut c, "stats", "expired_keys") == "1")
        .expect("active expiry resumed");
}

#[test]
fn only_a_dropped_collection_starts_a_collector_pass() {
    let server = rediskv(&[]);
    let mut c = server.client();
    let mut hset = vec!["HSET".to_string(), "h".to_string()];
    hset.extend((0..1000).flat_map(|i| [format!("f{i}"), "v".to_string()]));
    pipeline(&mut c, std::iter::once(hset));
    let examined =
        |c: &mut Client| info_field(c, "stats", "rediskv_gc_examined_records").parse::<u64>().unwrap();
    // The pass every server starts with ends; then none runs without a reason (or a minute).
    let mut last = examined(&mut c);
    wait_for(Duration::from_secs(20), || {
        std::thread::sleep(Duration::from_millis(1500));
        let now = examined(&mut c);
        std::mem::replace(&mut last, now) == now
    })
    .expect("the first collector pass never ended");
    let before = examined(&mut c);
    pipeline(&mut c, (0..2000).map(|i| vec!["SET".into(), format!("s{}", i % 500), "v".into()]));
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(examined(&mut c), before, "strings written over strings leave no garbage");
    assert_eq!(c.cmd(&["SET", "h", "a string now"]), Value::Status("OK".into()));
    wait_for(Duration::from_secs(5), || examined(&mut c) > before).expect("the dropped hash started a pass");
}
