//! Redis semantics over a [`KvBackend`]: the [`Db`], the argv dispatcher and [`Reply`].
//!
//! Every command reads what it needs, then submits all its writes as one
//! [`crate::backend::WriteBatch`]; a command that fails writes nothing. Each type family
//! lives in its own file and lists its commands in its own `command` table.

pub mod args;
mod bitmap;
mod cursor;
mod db;
mod error;
mod hash;
mod keyspace;
mod list;
mod long_double;
mod reply;
mod set;
mod string;
mod subkeys;
mod zset;

use bytes::Bytes;

pub use db::{DATABASES, Db, Entry};
pub use error::{CommandError, CommandResult};
pub use keyspace::ExpireCondition;
pub use list::{ListEnd, LposOptions};
pub use reply::{Protocol, Reply};
pub use string::{GetExpiry, MAX_STRING_LEN, SetOptions};
pub use zset::{
    Aggregate, LexBound, LexRange, MAX_RANDOM_REPEATS, RangeQuery, RangeSpec, ScoreBound, ScoreRange,
    ScoredMember, SetOp, ZAddFlags, ZAddOutcome,
};

use crate::backend::KvBackend;

/// A command handler: gets the whole argv (`argv[0]` is the name), arity already checked.
pub type Handler<B> = fn(&mut Db<B>, &[Bytes]) -> CommandResult;

/// One entry of a family's command table.
pub struct Command<B> {
    /// Lowercase name, as in error messages.
    pub name: &'static str,
    /// Redis arity: `n > 0` exactly n arguments including the name, `-n` at least n.
    pub arity: i32,
    /// The handler.
    pub run: Handler<B>,
}

impl<B> Command<B> {
    /// A table entry.
    pub const fn new(name: &'static str, arity: i32, run: Handler<B>) -> Self {
        Command { name, arity, run }
    }

    fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 { argc == arity } else { argc >= -arity }
    }
}

/// Finds a command by lowercase name across the type families.
pub fn lookup<B: KvBackend>(name: &str) -> Option<Command<B>> {
    keyspace::command(name)
        .or_else(|| string::command(name))
        .or_else(|| hash::command(name))
        .or_else(|| set::command(name))
        .or_else(|| list::command(name))
        .or_else(|| zset::command(name))
        .or_else(|| bitmap::command(name))
}

impl<B: KvBackend> Db<B> {
    /// Runs one command given as argv (`argv[0]` is the name, case-insensitive) and returns
    /// its reply. Unknown commands and wrong arity get Redis 7.0's error text.
    pub fn execute(&mut self, argv: &[Bytes]) -> Reply {
        let Some(first) = argv.first() else {
            return Reply::Error("ERR empty command".into());
        };
        // Every command name fits in 24 bytes; lowercase it on the stack.
        let mut buf = [0u8; 24];
        let name = buf.get_mut(..first.len()).and_then(|buf| {
            buf.copy_from_slice(first);
            buf.make_ascii_lowercase();
            std::str::from_utf8(buf).ok()
        });
        let Some(cmd) = name.and_then(lookup::<B>) else {
            return Reply::Error(unknown_command(first, &argv[1..]));
        };
        if !cmd.arity_ok(argv.len()) {
            return Reply::Error(CommandError::WrongArity(cmd.name.to_string()).to_string());
        }
        (cmd.run)(self, argv).unwrap_or_else(|e| Reply::Error(e.to_string()))
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
