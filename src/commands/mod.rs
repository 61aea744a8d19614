//! Redis semantics over a [`KvBackend`]: the [`Db`], the argv dispatcher, [`Reply`], the
//! command [`table`], client [`Session`]s and the thread-safe [`Engine`] with MULTI/EXEC.
//!
//! Every command reads what it needs, then submits all its writes as one
//! [`crate::backend::WriteBatch`]; a command that fails writes nothing. Each type family
//! lives in its own file and lists its handlers in its own `command` function; names,
//! arity, flags and key specs live in [`table`].
//!
//! A handler builds the RESP3-shaped [`Reply`] whatever the client's protocol; folding to
//! RESP2 is [`Reply::write`]'s job alone (see `reply.rs`). A blocking command that cannot be
//! served leaves a [`Block`] in the [`Session`] instead of an answer (see `blocking.rs`).

mod access;
pub mod args;
mod bitmap;
mod blocking;
mod counts;
mod cursor;
mod db;
mod dump;
mod engine;
mod error;
mod generic;
mod geo;
mod glob;
mod hash;
mod hll;
mod keyspace;
mod list;
mod listeners;
mod locks;
mod long_double;
pub mod notify;
mod overlay;
mod reply;
mod session;
mod set;
mod sort;
mod stream;
mod string;
mod subkeys;
pub mod table;
mod table_data;
mod zset;

use bytes::Bytes;

pub use blocking::Block;
pub use counts::KeyCount;
pub use db::{DATABASES, Db, Entry, LAZYFREE_THRESHOLD, Touch, TouchedKey};
pub use dump::RestoreOptions;
pub use engine::{Engine, HeldAnswer, exec_abort};
pub use error::CommandError;
pub use keyspace::{ExpireCondition, Sampled};
pub use list::{ListEnd, LposOptions};
pub use listeners::{Listeners, Listening};
pub use locks::{KeyLocks, LockGuard};
pub use notify::{Effects, Event, NotifyFlags};
pub use overlay::Overlay;
pub use reply::{CommandResult, Protocol, Reply};
pub use session::Session;
pub use string::{GetExpiry, MAX_STRING_LEN, SetOptions};
pub use table::{CommandInfo, Handler, keys};
pub use zset::{
    Aggregate, LexBound, LexRange, MAX_RANDOM_REPEATS, RangeQuery, RangeSpec, ScoreBound, ScoreRange,
    ScoredMember, SetOp, ZAddFlags, ZAddOutcome,
};

use table::Family;

use crate::backend::KvBackend;

/// The handler of a data command (`None` for session commands such as MULTI).
pub fn handler<B: KvBackend>(info: &CommandInfo) -> Option<Handler<B>> {
    let name = info.container();
    match info.family {
        Family::Keyspace => keyspace::command(name),
        Family::String => string::command(name),
        Family::Hash => hash::command(name),
        Family::Set => set::command(name),
        Family::List => list::command(name),
        Family::Zset => zset::command(name),
        Family::Dump => dump::command(name),
        Family::Generic => generic::command(name),
        Family::Sort => sort::command(name),
        Family::Bitmap => bitmap::command(name),
        Family::Hll => hll::command(name),
        Family::Geo => geo::command(name),
        Family::Stream => stream::command(name),
        Family::Session | Family::Server => None,
    }
}

/// Looks `argv[0]` (and a container's subcommand) up and checks the arity: the command's
/// metadata, or Redis 7.0's error reply for an unknown command or subcommand or a wrong
/// argument count.
///
/// # Errors
/// The error reply, ready to send.
pub fn resolve(argv: &[Bytes]) -> Result<&'static CommandInfo, Reply> {
    let Some(first) = argv.first() else {
        return Err(Reply::Error("ERR empty command".into()));
    };
    match table::find(argv) {
        Ok(info) | Err(Some(info)) => check_row(info, argv),
        Err(None) => Err(Reply::Error(unknown_command(first, &argv[1..]))),
    }
}

/// [`resolve`] for a row [`table::find`] already gave for `argv` (the command's or
/// subcommand's, or the container's when the subcommand is unknown), without looking the
/// name up again: the row to run, or Redis' error for an unknown subcommand or a wrong
/// number of arguments.
///
/// # Errors
/// The error reply, as [`resolve`]'s.
pub fn check_row(info: &'static CommandInfo, argv: &[Bytes]) -> Result<&'static CommandInfo, Reply> {
    // `find` gives a container's own row only when its subcommand is unknown.
    if !info.arity_ok(argv.len()) || (info.has_subcommands && argv.len() > 1) {
        return Err(row_error(info, argv));
    }
    Ok(info)
}

/// [`check_row`]'s error, apart so that the accepted path builds no formatting frame.
#[cold]
#[inline(never)]
fn row_error(info: &'static CommandInfo, argv: &[Bytes]) -> Reply {
    match argv.get(1) {
        Some(sub) if info.arity_ok(argv.len()) => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            String::from_utf8_lossy(sub),
            info.name.to_uppercase()
        )),
        _ => Reply::Error(CommandError::WrongArity(info.name.to_string()).to_string()),
    }
}

impl<B: KvBackend> Db<'_, B> {
    /// Runs one command given as argv (`argv[0]` is the name, case-insensitive) and returns
    /// its reply. Unknown commands and wrong arity get Redis 7.0's error text; `COMMAND`
    /// answers from the [`table`]; MULTI, EXEC, DISCARD, WATCH and UNWATCH need a
    /// [`Session`] and answer an error here (run them through [`Engine::execute`]).
    pub fn execute(&mut self, argv: &[Bytes]) -> Reply {
        match resolve(argv) {
            Ok(info) => self.execute_resolved(info, argv),
            Err(reply) => reply,
        }
    }

    /// [`Db::execute`] for a command [`resolve`] accepted.
    pub(crate) fn execute_resolved(&mut self, info: &CommandInfo, argv: &[Bytes]) -> Reply {
        self.touching = !info.is(table::attr::NO_TOUCH);
        let reply = match handler::<B>(info) {
            Some(run) => self
                .run_command(info.is_write(), |db| run(db, argv))
                .unwrap_or_else(|e| Reply::Error(e.to_string())),
            None if info.container() == "command" => table::command_reply(argv),
            None => Reply::Error(format!("ERR {} needs a client session", info.name.to_uppercase())),
        };
        self.end_command(!reply.is_error());
        reply
    }

    /// [`Db::execute`] for string arguments: `db.run(&["SET", "k", "v"])`.
    pub fn run<S: AsRef<[u8]>>(&mut self, argv: &[S]) -> Reply {
        let argv: Vec<Bytes> = argv.iter().map(|a| Bytes::copy_from_slice(a.as_ref())).collect();
        self.execute(&argv)
    }
}

/// `ERR unknown command 'foo', with args beginning with: 'a' 'b' ` (Redis 7.0).
fn unknown_command(name: &[u8], args: &[Bytes]) -> String {
    let mut text =
        format!("ERR unknown command '{}', with args beginning with: ", String::from_utf8_lossy(name));
    for arg in args {
        text.push_str(&format!("'{}' ", String::from_utf8_lossy(arg)));
    }
    text
}
