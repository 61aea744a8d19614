//! The Redis data model on an ordered key-value store.
//!
//! `rediskv` turns Redis keys into records of four column families and back, byte-compatible
//! with Apache Kvrocks by default, and runs Redis 7.0 command semantics against any store that
//! implements [`backend::KvBackend`]. It does no I/O of its own.
//!
//! | module | answers |
//! |---|---|
//! | [`codec`] | the bytes: record layouts, metadata, ordered doubles, list indices, versions, slots |
//! | [`backend`] | the storage trait, the in-memory reference backend, the conformance kit |
//! | [`commands`] | Redis semantics: [`commands::Db`], `execute(argv) -> Reply`, one module per command family; the command table with key specs; [`commands::Engine`] + [`commands::Session`] for many clients on many threads, MULTI/EXEC/WATCH |
//! | [`gc`] | lazy deletion: the garbage decision, the expiry sweep, a compaction pass |
//! | [`fsck`] | a consistency check over a whole store: sizes, zset score records, list indexes |
//!
//! The layers are one-way, each using only those above it in the table.
//!
//! # What to use
//!
//! - **Running commands**: [`commands::Db`] for one client (`Db::new(backend)`, then
//!   [`commands::Db::run`] or [`commands::Db::execute`] with an argv), or
//!   [`commands::Engine`] with a [`commands::Session`] per client for many clients on many
//!   threads (MULTI/EXEC/WATCH, blocking commands, keyspace events). Every command goes
//!   through its name: there is no typed per-command API. Replies are [`commands::Reply`],
//!   written as RESP2 or RESP3 by [`commands::Reply::write`].
//! - **A store**: implement [`backend::KvBackend`] and run [`kv_backend_conformance!`] over
//!   it; [`backend::MemoryBackend`] is the reference, [`backend::MetadataCache`] a cache to
//!   wrap a slow store in.
//! - **The bytes**: [`codec`], for tools that read or write a store's records directly
//!   (layouts, metadata, encodings, RDB payloads).
//! - **Maintenance**: [`gc`] (the garbage decision for a store's compaction filter, the
//!   expiry sweep, the collector) and [`fsck`].
//! - **A server's own commands**: [`commands::table`] (arity, flags, key specs),
//!   [`commands::resolve`], [`commands::args`] (argument parsing as Redis does it).
//!
//! # Format
//!
//! All integers are big-endian; `ns` is the namespace (default `__namespace`), `slot` is
//! present only with cluster slots on, `md5` only with a hash-spread prefix, and `prefix`
//! only with a fixed prefix (see [`codec::KeyLayout`]).
//!
//! | record | CF | key | value |
//! |---|---|---|---|
//! | string | Metadata | `prefix ns_len:u8 ns slot:u16 md5 key` | `flags:u8 expire:u64 bytes` |
//! | hash/set/zset | Metadata | as above | `flags expire version:u64 size:u64` |
//! | list | Metadata | as above | `flags expire version size head:u64 tail:u64` |
//! | hash field | Subkey | `prefix ns_len ns slot md5 key_len:u32 key version:u64 field` | field value |
//! | set member | Subkey | `… version member` | empty |
//! | list element | Subkey | `… version index:u64` | element |
//! | zset member | Subkey | `… version member` | score, 8 ordered bytes |
//! | zset score | Score | `… version score:8 member` | empty |
//! | bitmap, sortedint | Metadata | as above | `flags expire version size` (bitmap: size in bytes) |
//! | bitmap fragment | Subkey | `… version offset` (decimal ASCII byte offset, a multiple of 1024) | ≤ 1024 bytes; bit `i` is bit `i % 8` (from the LSB) of byte `i / 8` |
//! | stream, bloom, hyperloglog, tdigest, timeseries, topk | Metadata | as above | `flags expire version size` then the type's fields ([`codec::Extra`]) |
//! | JSON | Metadata | as above | `flags expire format:u8 document` |
//!
//! `flags = 0x80 | type` (String 1, Hash 2, List 3, Set 4, ZSet 5, Bitmap 6, Sortedint 7,
//! Stream 8, BloomFilter 9, JSON 10, HyperLogLog 11, TDigest 12, TimeSeries 13, TopK 14);
//! `0x40` marks a blind-write collection. String and JSON are single-KV (no version, size or
//! subkeys); stream, bloom, hyperloglog, tdigest, timeseries and topk exist with size 0. Expire is unix milliseconds, 0 for none. Legacy records (bit 7
//! clear) with a u32 expire in seconds and a u32 size are read, never written.
//!
//! A `version:u64` is a [`codec::Version::Short`]; TiTea's layout puts a 16-byte
//! [`codec::Version::Id`] in its place, and a layout refuses the other variant.
//!
//! # Example
//!
//! ```
//! use rediskv::backend::MemoryBackend;
//! use rediskv::commands::{Db, Reply};
//!
//! let mut db = Db::new(MemoryBackend::new());
//! assert_eq!(db.run(&["PING"]), Reply::status("PONG"));
//! assert_eq!(db.run(&["DEL", "nothing"]), Reply::Integer(0));
//! ```
//!
//! # Guides
//!
//! The repository's `docs/` directory: `layout.md` (every byte of every record, the
//! layout options), `library.md` (engine, sessions, transactions, threads, RESP3),
//! `backend.md` (implementing [`backend::KvBackend`] and wiring [`gc`] into a store's
//! compaction), `compatibility.md` (every Redis 7.0 command, implemented or not, and every
//! known difference), `testing.md`, `benchmarks.md`, and for the server `server.md` and
//! `etcd.md`.
#![deny(missing_docs)]

/// The README's Rust examples, run as doctests so the front page stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod backend;
pub mod codec;
pub mod commands;
mod error;
pub mod fsck;
pub mod gc;

pub use error::{Error, Result};
