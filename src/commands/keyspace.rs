//! Commands on keys of any type, and the connection commands.

use bytes::Bytes;

use super::args::int_arg;
use super::{Command, CommandError, CommandResult, Db, Reply};
use crate::backend::{KvBackend, WriteBatch};

/// This family's command table.
pub(super) fn command<B: KvBackend>(name: &str) -> Option<Command<B>> {
    Some(match name {
        "del" => Command::new("del", -2, del),
        "unlink" => Command::new("unlink", -2, del),
        "exists" => Command::new("exists", -2, exists),
        "type" => Command::new("type", 2, type_),
        "ping" => Command::new("ping", -1, ping),
        "echo" => Command::new("echo", 2, echo),
        "select" => Command::new("select", 2, select),
        _ => return None,
    })
}

impl<B: KvBackend> Db<B> {
    /// Deletes keys, O(1) each (metadata only); returns how many existed.
    ///
    /// # Errors
    /// Storage errors.
    pub fn del(&mut self, keys: &[Bytes]) -> CommandResult<i64> {
        let mut batch = WriteBatch::new();
        let mut removed = 0;
        let mut seen = std::collections::HashSet::new();
        for key in keys {
            if seen.insert(key) && self.lookup(key)?.is_some() {
                removed += 1;
                self.delete_key(&mut batch, key);
            }
        }
        self.commit(batch)?;
        Ok(removed)
    }
}

fn del<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.del(&argv[1..]).map(Reply::Integer)
}

fn exists<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let mut n = 0;
    for key in &argv[1..] {
        if db.lookup(key)?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Integer(n))
}

fn type_<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::status(db.lookup(&argv[1])?.map_or("none", |e| e.meta.ty.name())))
}

fn ping<B: KvBackend>(_db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    match argv.len() {
        1 => Ok(Reply::status("PONG")),
        2 => Ok(Reply::Bulk(argv[1].clone())),
        _ => Err(CommandError::WrongArity("ping".into())),
    }
}

fn echo<B: KvBackend>(_db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Bulk(argv[1].clone()))
}

fn select<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let index = int_arg(&argv[1])?;
    let index = usize::try_from(index).map_err(|_| CommandError::err("DB index is out of range"))?;
    db.select(index)?;
    Ok(Reply::OK)
}
