//! The Redis data model on an ordered key-value store.
//!
//! `rediskv` turns Redis keys into records of four column families and back, byte-compatible
//! with Apache Kvrocks by default, and runs Redis 7.0 command semantics against any store that
//! implements [`KvBackend`]. It does no I/O of its own.
//!
//! Everything is named at the crate root; the modules behind it are private.
//!
//! | you are writing | use |
//! |---|---|
//! | a store | [`KvBackend`], [`WriteBatch`] ([`BatchOp`], [`ColumnFamily`], [`Direction`]), then [`kv_backend_conformance!`] over it; [`MemoryBackend`] is the reference, [`MetadataCache`] a cache to wrap a slow store in, [`FaultyBackend`] a store that fails on demand |
//! | an engine or embedding | [`Engine`] + a [`Session`] per client (MULTI/EXEC/WATCH, blocking, keyspace events), or [`Db`] for one client; every command goes through its argv; answers are [`Reply`], written as RESP2 or RESP3 ([`Protocol`]) by [`Reply::write`] |
//! | a server around the engine | the [`server`] module: the command table, argument parsing, keyspace events, the replication stream, pub/sub, blocking, RDB files |
//! | a tool that reads or writes records | the codec: [`KeyLayout`] ([`LayoutKind`], [`KeyRange`], [`Subkey`]), [`Metadata`], [`RedisType`], [`Version`], [`encode_f64`], [`key_slot`], the stream records ([`StreamId`], [`GroupValue`]…), RDB payloads ([`rdb`]) and files ([`RdbFileReader`], [`RdbFileWriter`]), the other systems' layouts ([`camellia`], [`titea`]) |
//! | maintenance | [`gc`] (the garbage decision for a store's compaction filter, the expiry sweep, the collector) and [`fsck`] (a consistency check over a whole store) |
//!
//! Inside, the layers are one-way: `codec` (the bytes) → `backend` (the storage trait) →
//! `commands` (Redis semantics) → `gc` and `fsck`.
//!
//! # Format
//!
//! All integers are big-endian; `ns` is the namespace (default `__namespace`), `slot` is
//! present only with cluster slots on, `md5` only with a hash-spread prefix, and `prefix`
//! only with a fixed prefix (see [`KeyLayout`]).
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
//! | stream, bloom, hyperloglog, tdigest, timeseries, topk | Metadata | as above | `flags expire version size` then the type's fields ([`Extra`]) |
//! | JSON | Metadata | as above | `flags expire format:u8 document` |
//!
//! `flags = 0x80 | type` (String 1, Hash 2, List 3, Set 4, ZSet 5, Bitmap 6, Sortedint 7,
//! Stream 8, BloomFilter 9, JSON 10, HyperLogLog 11, TDigest 12, TimeSeries 13, TopK 14);
//! `0x40` marks a blind-write collection. String and JSON are single-KV (no version, size or
//! subkeys); stream, bloom, hyperloglog, tdigest, timeseries and topk exist with size 0. Expire is unix milliseconds, 0 for none. Legacy records (bit 7
//! clear) with a u32 expire in seconds and a u32 size are read, never written.
//!
//! A `version:u64` is a [`Version::Short`]; TiTea's layout puts a 16-byte
//! [`Version::Id`] in its place, and a layout refuses the other variant.
//!
//! # Example
//!
//! ```
//! use rediskv::{Db, MemoryBackend, Reply};
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
//! `backend.md` (implementing [`KvBackend`] and wiring [`gc`] into a store's
//! compaction), `compatibility.md` (every Redis 7.0 command, implemented or not, and every
//! known difference), `testing.md`, `benchmarks.md`, and for the server `server.md` and
//! `etcd.md`.
#![deny(missing_docs)]

/// The README's Rust examples, run as doctests so the front page stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod backend;
mod codec;
mod commands;
mod error;
pub mod fsck;
pub mod gc;

pub use backend::{
    BatchOp, CONFLICT_ATTEMPTS, Direction, FaultyBackend, KvBackend, KvPair, MemoryBackend, MetadataCache,
    ScanIter, Snapshot, WriteBatch, conformance,
};
pub use codec::{
    BloomFields, Clock, ColumnFamily, ConsumerValue, DEFAULT_NAMESPACE, Extra, FLAG_64BIT, FLAG_BLIND_WRITE,
    FLAG_RESERVED, Flags, Float, GroupValue, KeyLayout, KeyOwner, KeyRange, LIST_INITIAL_INDEX, LayoutKind,
    ManualClock, Metadata, MetadataKey, PendingValue, RdbEntry, RdbFileOptions, RdbFileReader, RdbFileWriter,
    RdbHeader, RdbItem, RdbReplication, RedisType, RoutedKey, SLOT_COUNT, ScoreKey, StreamFields, StreamId,
    StreamSub, Subkey, TDigestFields, TYPE_MASK, TimeSeriesFields, TopKFields, Version, VersionGenerator,
    camellia, decode_entry, decode_f64, decode_f64_slice, decode_neokv_legacy, encode_entry, encode_f64,
    encode_neokv_legacy, hash_tag, key_slot, neokv_ids, neokv_namespace, peek_type_and_expire,
    prefix_successor, rdb, titea,
};
pub use commands::{DATABASES, Db, Engine, Protocol, Reply, Session};
pub use error::{Error, Result};

pub mod server {
    //! What a server around the [`Engine`](crate::Engine) needs beyond running commands: the command [`table`]
    //! (arity, flags, key specs) with [`resolve`] and [`args`] (argument parsing as Redis does
    //! it), keyspace events ([`NotifyFlags`], [`Event`], [`Effects`]), the replication stream
    //! ([`Propagation`], [`Propagated`], [`LazyDeletes`]), pub/sub ([`Listeners`]), blocking
    //! ([`Block`], [`HeldAnswer`]), eviction ([`Sampled`]), per-database counts ([`KeyCount`]),
    //! modified keys for WATCH and client tracking ([`TouchedKey`], [`Touch`]) and RDB files
    //! ([`RdbSave`], [`RdbLoader`], [`save_rdb`]). An engine or a store needs none of it.

    pub use crate::commands::{
        Block, Effects, Event, HeldAnswer, KeyCount, LazyDeletes, Listeners, Listening, NotifyFlags,
        Propagated, Propagation, RdbCounts, RdbLoader, RdbSave, Sampled, Touch, TouchedKey, args, check_row,
        exec_abort, resolve, save_rdb, table,
    };
}
