//! `rediskv-inspect`: the records of a rediskv store, in every layout the library writes
//! (Kvrocks, NeoKV), for the engineer at the desk.
//!
//! | module | does |
//! |---|---|
//! | [`record`] | one record ↔ JSON: [`record::decode`], [`record::encode`] |
//! | [`store`] | opening a fjall (or RocksDB) directory with the layout its manifest names; [`store::dump`] |
//! | [`convert`] | a whole store rewritten in another layout, key by key through the engine |
//! | [`rdb`] | a `dump.rdb` into a new store ([`rdb::import`]) and a store to one ([`rdb::export`]) |
//!
//! The binary's usage is in `rediskv-inspect --help`; docs/inspect.md has examples.
#![deny(missing_docs)]

pub mod convert;
pub mod rdb;
pub mod record;
pub mod store;
