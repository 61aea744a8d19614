//! The command families, one module per [`super::table::Family`] that the library answers:
//! each parses its commands' arguments, reads and writes its type's records through
//! [`super::Db`], and builds the [`super::Reply`]. The machinery they share (the `Db`, the
//! journal, locks, sessions, the engine, the table and dispatch) is the parent module's.

pub(super) mod bitmap;
pub(super) mod dump;
pub(super) mod generic;
pub(super) mod geo;
pub(super) mod hash;
pub(super) mod hll;
pub(super) mod keyspace;
pub(super) mod list;
pub(super) mod set;
pub(super) mod sort;
pub(super) mod stream;
pub(super) mod string;
pub(super) mod zset;
