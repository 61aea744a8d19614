//! Shared helpers for the command tests: a database on `MemoryBackend` with a manual clock.
#![allow(dead_code)]

use std::sync::Arc;

use bytes::Bytes;
use rediskv::ManualClock;
use rediskv::MemoryBackend;
use rediskv::{Db, Reply};

/// The bytes of a hex literal (whitespace ignored): how golden vectors are written.
pub fn h(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len().is_multiple_of(2), "odd hex literal {s:?}");
    digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap()).collect()
}

/// The argv of a space-separated command line.
pub fn argv(line: &str) -> Vec<Bytes> {
    line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
}

/// 2026-01-01T00:00:00Z in milliseconds: the clock every test starts at.
pub const T0_MS: u64 = 1_767_225_600_000;

/// A fresh database and the clock that drives it.
pub fn db() -> (Db<'static, MemoryBackend>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0_MS));
    let db = Db::new(MemoryBackend::new()).with_clock(clock.clone()).with_seed(42);
    (db, clock)
}

#[path = "../differential/client.rs"]
#[allow(dead_code)]
pub mod client;

/// Runs a command written as one line of space-separated arguments; the reply as a RESP2
/// client reads it (maps flattened, doubles as bulk strings: see `client::fold`).
pub fn run(db: &mut Db<MemoryBackend>, line: &str) -> Reply {
    client::fold_resp2(&db.run(&line.split_whitespace().collect::<Vec<_>>()))
}

/// [`run`] as a RESP3 client reads the reply.
pub fn run3(db: &mut Db<MemoryBackend>, line: &str) -> Reply {
    client::fold(&db.run(&line.split_whitespace().collect::<Vec<_>>()), rediskv::Protocol::Resp3)
}

/// A bulk reply.
pub fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

/// An array of bulk replies.
pub fn bulks(items: &[&str]) -> Reply {
    Reply::Array(items.iter().map(|s| bulk(s)).collect())
}

/// An error reply with exactly this text.
pub fn err(text: &str) -> Reply {
    Reply::Error(text.to_string())
}

/// The integer reply `n`.
pub fn int(n: i64) -> Reply {
    Reply::Integer(n)
}

/// The WRONGTYPE error reply.
pub fn wrongtype() -> Reply {
    err("WRONGTYPE Operation against a key holding the wrong kind of value")
}

/// The elements of an array of bulk strings, as UTF-8 text.
pub fn strings(reply: Reply) -> Vec<String> {
    match reply {
        Reply::Array(items) => items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Runs `MULTI`, `SET a 1`, `refused`, `EXEC` on an engine over `layout`: EXEC answers `OK`
/// and the refused command's `error` (the other command applied, as an EXEC with a failing
/// command is), and `a` holds 1 after. The engine, for further checks.
pub fn assert_refused_in_exec(
    layout: rediskv::KeyLayout,
    refused: &str,
    error: &str,
) -> (rediskv::Engine<MemoryBackend>, rediskv::Session) {
    let engine = rediskv::Engine::with_layout(MemoryBackend::new(), layout);
    let mut session = engine.session();
    let mut exec = |line: &str| engine.execute(&mut session, &argv(line));
    assert_eq!(exec("MULTI"), Reply::OK);
    exec("SET a 1");
    exec(refused);
    assert_eq!(exec("EXEC"), Reply::Array(vec![Reply::OK, Reply::Error(error.into())]));
    assert_eq!(exec("GET a"), Reply::Bulk(Bytes::from_static(b"1")));
    (engine, session)
}
