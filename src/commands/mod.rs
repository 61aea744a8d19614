//! Redis semantics over a [`crate::backend::KvBackend`]: the [`Db`], the argv dispatcher,
//! [`Reply`], the command [`table`], client [`Session`]s and the thread-safe [`Engine`] with
//! MULTI/EXEC.
//!
//! Every command reads what it needs, then submits all its writes as one
//! [`crate::backend::WriteBatch`]; a command that fails writes nothing. Names, arity, flags
//! and key specs live in [`table`], and one match (`dispatch.rs`) leads from a command's row
//! to its handler. Commands run through [`Db::run`] / [`Db::execute`] (one client) or
//! [`Engine::execute`] (many): the families' typed methods are the crate's own.
//!
//! # Where things are
//!
//! - `families/`: the command families, one module per [`table::Family`] the library
//!   answers (`string`, `hash`, `list`, `set`, `zset/`, `stream/`, `bitmap/`, `geo/`, `hll/`,
//!   and the key-level `keyspace`, `generic`, `sort`, `dump`). Each parses its commands'
//!   arguments and reads and writes its type's records through the [`Db`]; a family that
//!   needs more than a file keeps its typed storage apart (`zset/core.rs`,
//!   `stream/core.rs`, `bitmap/store.rs`) from its argument parsing (`parse.rs`).
//! - this folder: the machinery the families share. The [`Db`] (`db.rs`, its methods by
//!   concern in `db/`), [`Engine`] and [`Session`] (`engine.rs`, `session.rs`, with `locks`,
//!   `overlay` for EXEC, `counts`, `access`, `listeners`, `blocking`, `cursor`), what a
//!   command produces (`reply`, `error`, `notify`, `propagate`), the command [`table`] and
//!   `dispatch`, and the helpers of several families (`args`, `glob`, `subkeys`,
//!   `long_double`, `rdb_file`).
//!
//! A handler builds the RESP3-shaped [`Reply`] whatever the client's protocol; folding to
//! RESP2 is [`Reply::write`]'s job alone (see `reply.rs`). A blocking command that cannot be
//! served leaves a [`Block`] in the [`Session`] instead of an answer (see `blocking.rs`).

mod access;
pub mod args;
mod blocking;
mod counts;
mod cursor;
mod db;
mod dispatch;
mod engine;
mod error;
mod families;
mod glob;
mod listeners;
mod locks;
mod long_double;
mod notify;
mod overlay;
mod propagate;
mod rdb_file;
mod reply;
mod session;
mod subkeys;
pub mod table;
mod table_data;

pub use blocking::Block;
pub use counts::KeyCount;
pub use db::{DATABASES, Db, Entry, Touch, TouchedKey};
pub use dispatch::{check_row, resolve};
pub use engine::{Engine, HeldAnswer, exec_abort};
pub use error::CommandError;
pub use families::keyspace::Sampled;
pub use listeners::{Listeners, Listening};
pub use notify::{Effects, Event, NotifyFlags};
pub use propagate::{LazyDeletes, Propagated, Propagation};
pub use rdb_file::{RdbCounts, RdbLoader, RdbSave, save_rdb};
pub use reply::{CommandResult, Protocol, Reply};
pub use session::Session;
pub use table::CommandInfo;
