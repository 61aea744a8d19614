//! The wall clock, as Redis reports it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch.
pub fn unix_micros() -> u64 {
    // Seconds and micros apart: `as_micros` works in 128 bits.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() * 1_000_000 + u64::from(d.subsec_micros()))
}

/// TIME's reply: the Unix time, in seconds and the microseconds past them.
pub fn time_reply() -> rediskv::Reply {
    use rediskv::Reply;
    let micros = unix_micros();
    Reply::Array(vec![
        Reply::bulk_int((micros / 1_000_000) as i64),
        Reply::bulk_int((micros % 1_000_000) as i64),
    ])
}

/// Seconds since the Unix epoch.
pub fn unix_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// 40 random-looking hex digits, different at each call (run ids, replication ids).
pub fn random_id() -> String {
    use sha1::Digest;
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = [unix_micros(), u64::from(std::process::id()), call];
    let digest = sha1::Sha1::digest(seed.map(u64::to_le_bytes).concat());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
