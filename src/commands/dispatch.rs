//! From a command's row to its code: [`resolve`] finds the row `argv` runs (or Redis'
//! error), [`action`] maps the row to what runs it, in one match, [`replicated`] to how it
//! reaches the replicas, and [`Db::execute`] runs a data command's handler.

use bytes::Bytes;

use super::db::Db;
use super::error::CommandError;
use super::families::{
    bitmap, dump, generic, geo, hash, hll, keyspace, list, set, sort, stream, string, zset,
};
use super::propagate::Replicated;
use super::reply::{CommandResult, Reply};
use super::table::{self, CommandInfo, Family as F};
use crate::backend::KvBackend;

/// A data command's handler: gets the whole argv (`argv[0]` is the name), arity already
/// checked.
pub(crate) type Handler<B> = fn(&mut Db<'_, B>, &[Bytes]) -> CommandResult;

/// What runs a command's row.
pub(crate) enum Action<B> {
    /// A data command: its handler runs over a [`Db`].
    Data(Handler<B>),
    /// `COMMAND` and its subcommands, answered from the [`table`].
    Command,
    /// MULTI, EXEC, DISCARD, WATCH, UNWATCH: a [`super::Session`]'s transaction state.
    Multi,
    /// EXEC.
    Exec,
    /// DISCARD.
    Discard,
    /// WATCH.
    Watch,
    /// UNWATCH.
    Unwatch,
    /// A command a server answers ([`F::Server`]).
    Server,
}

impl<B> Clone for Action<B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for Action<B> {}

/// What runs `info`'s row: the one place a command's name leads to its code. Keyed by the
/// family first, so that a name is compared only with its family's names.
pub(crate) fn action<B: KvBackend>(info: &CommandInfo) -> Action<B> {
    let run: Handler<B> = match (info.family, info.container()) {
        (F::Keyspace, "del") => keyspace::del,
        (F::Keyspace, "unlink") => keyspace::del,
        (F::Keyspace, "exists") => keyspace::exists,
        (F::Keyspace, "type") => keyspace::type_,
        (F::Keyspace, "expire") => keyspace::expire,
        (F::Keyspace, "pexpire") => keyspace::pexpire,
        (F::Keyspace, "expireat") => keyspace::expireat,
        (F::Keyspace, "pexpireat") => keyspace::pexpireat,
        (F::Keyspace, "ttl") => keyspace::ttl,
        (F::Keyspace, "pttl") => keyspace::pttl,
        (F::Keyspace, "expiretime") => keyspace::expiretime,
        (F::Keyspace, "pexpiretime") => keyspace::pexpiretime,
        (F::Keyspace, "persist") => keyspace::persist,
        (F::Keyspace, "rename") => keyspace::rename,
        (F::Keyspace, "renamenx") => keyspace::renamenx,
        (F::Keyspace, "copy") => keyspace::copy,
        (F::Keyspace, "scan") => keyspace::scan,
        (F::Keyspace, "keys") => keyspace::keys,
        (F::Keyspace, "randomkey") => keyspace::randomkey,
        (F::Keyspace, "dbsize") => keyspace::dbsize,
        (F::Keyspace, "flushdb") => keyspace::flushdb,
        (F::Keyspace, "flushall") => keyspace::flushall,
        (F::Keyspace, "ping") => keyspace::ping,
        (F::Keyspace, "echo") => keyspace::echo,
        (F::Keyspace, "select") => keyspace::select,
        (F::Keyspace, "move") => keyspace::move_cmd,
        (F::Keyspace, "swapdb") => keyspace::swapdb,
        (F::String, "get") => string::get,
        (F::String, "set") => string::set,
        (F::String, "setnx") => string::setnx,
        (F::String, "setex") => string::setex,
        (F::String, "psetex") => string::psetex,
        (F::String, "getset") => string::getset,
        (F::String, "getdel") => string::getdel,
        (F::String, "getex") => string::getex,
        (F::String, "mget") => string::mget,
        (F::String, "mset") => string::mset,
        (F::String, "msetnx") => string::msetnx,
        (F::String, "append") => string::append,
        (F::String, "strlen") => string::strlen,
        (F::String, "getrange") => string::getrange,
        (F::String, "substr") => string::getrange,
        (F::String, "setrange") => string::setrange,
        (F::String, "incr") => string::incr,
        (F::String, "decr") => string::decr,
        (F::String, "incrby") => string::incrby,
        (F::String, "decrby") => string::decrby,
        (F::String, "incrbyfloat") => string::incrbyfloat,
        (F::Hash, "hset") => hash::hset,
        (F::Hash, "hmset") => hash::hmset,
        (F::Hash, "hsetnx") => hash::hsetnx,
        (F::Hash, "hget") => hash::hget,
        (F::Hash, "hmget") => hash::hmget,
        (F::Hash, "hdel") => hash::hdel,
        (F::Hash, "hlen") => hash::hlen,
        (F::Hash, "hstrlen") => hash::hstrlen,
        (F::Hash, "hexists") => hash::hexists,
        (F::Hash, "hkeys") => hash::hkeys,
        (F::Hash, "hvals") => hash::hvals,
        (F::Hash, "hgetall") => hash::hgetall,
        (F::Hash, "hincrby") => hash::hincrby,
        (F::Hash, "hincrbyfloat") => hash::hincrbyfloat,
        (F::Hash, "hrandfield") => hash::hrandfield,
        (F::Hash, "hscan") => hash::hscan,
        (F::Set, "sadd") => set::sadd,
        (F::Set, "srem") => set::srem,
        (F::Set, "scard") => set::scard,
        (F::Set, "sismember") => set::sismember,
        (F::Set, "smismember") => set::smismember,
        (F::Set, "smembers") => set::smembers,
        (F::Set, "spop") => set::spop,
        (F::Set, "srandmember") => set::srandmember,
        (F::Set, "smove") => set::smove,
        (F::Set, "sinter") => set::sinter,
        (F::Set, "sintercard") => set::sintercard,
        (F::Set, "sinterstore") => set::sinterstore,
        (F::Set, "sunion") => set::sunion,
        (F::Set, "sunionstore") => set::sunionstore,
        (F::Set, "sdiff") => set::sdiff,
        (F::Set, "sdiffstore") => set::sdiffstore,
        (F::Set, "sscan") => set::sscan,
        (F::List, "lpush") => list::lpush_cmd,
        (F::List, "rpush") => list::rpush_cmd,
        (F::List, "lpushx") => list::lpushx_cmd,
        (F::List, "rpushx") => list::rpushx_cmd,
        (F::List, "lpop") => list::lpop_cmd,
        (F::List, "rpop") => list::rpop_cmd,
        (F::List, "llen") => list::llen_cmd,
        (F::List, "lindex") => list::lindex_cmd,
        (F::List, "lrange") => list::lrange_cmd,
        (F::List, "lset") => list::lset_cmd,
        (F::List, "lrem") => list::lrem_cmd,
        (F::List, "linsert") => list::linsert_cmd,
        (F::List, "ltrim") => list::ltrim_cmd,
        (F::List, "lpos") => list::lpos_cmd,
        (F::List, "lmove") => list::lmove_cmd,
        (F::List, "rpoplpush") => list::rpoplpush_cmd,
        (F::List, "lmpop") => list::lmpop_cmd,
        (F::List, "blpop") => list::blpop_cmd,
        (F::List, "brpop") => list::brpop_cmd,
        (F::List, "blmove") => list::blmove_cmd,
        (F::List, "brpoplpush") => list::brpoplpush_cmd,
        (F::List, "blmpop") => list::blmpop_cmd,
        (F::Zset, "zadd") => zset::zadd,
        (F::Zset, "zincrby") => zset::zincrby,
        (F::Zset, "zrem") => zset::zrem,
        (F::Zset, "zcard") => zset::zcard,
        (F::Zset, "zscore") => zset::zscore,
        (F::Zset, "zmscore") => zset::zmscore,
        (F::Zset, "zcount") => zset::zcount,
        (F::Zset, "zlexcount") => zset::zlexcount,
        (F::Zset, "zrange") => |db, a| zset::range_cmd(db, a, 1, false, zset::Kind::Auto, None),
        (F::Zset, "zrangestore") => |db, a| zset::range_cmd(db, a, 2, true, zset::Kind::Auto, None),
        (F::Zset, "zrangebyscore") => {
            |db, a| zset::range_cmd(db, a, 1, false, zset::Kind::Score, Some(false))
        }
        (F::Zset, "zrevrangebyscore") => {
            |db, a| zset::range_cmd(db, a, 1, false, zset::Kind::Score, Some(true))
        }
        (F::Zset, "zrangebylex") => |db, a| zset::range_cmd(db, a, 1, false, zset::Kind::Lex, Some(false)),
        (F::Zset, "zrevrangebylex") => |db, a| zset::range_cmd(db, a, 1, false, zset::Kind::Lex, Some(true)),
        (F::Zset, "zrevrange") => |db, a| zset::range_cmd(db, a, 1, false, zset::Kind::Rank, Some(true)),
        (F::Zset, "zrank") => |db, a| zset::zrank(db, a, false),
        (F::Zset, "zrevrank") => |db, a| zset::zrank(db, a, true),
        (F::Zset, "zremrangebyscore") => |db, a| zset::zremrange(db, a, zset::Kind::Score),
        (F::Zset, "zremrangebyrank") => |db, a| zset::zremrange(db, a, zset::Kind::Rank),
        (F::Zset, "zremrangebylex") => |db, a| zset::zremrange(db, a, zset::Kind::Lex),
        (F::Zset, "zpopmin") => |db, a| zset::zpop(db, a, false),
        (F::Zset, "zpopmax") => |db, a| zset::zpop(db, a, true),
        (F::Zset, "zmpop") => |db, a| zset::zmpop(db, a, 1),
        (F::Zset, "bzpopmin") => |db, a| zset::bzpop(db, a, false),
        (F::Zset, "bzpopmax") => |db, a| zset::bzpop(db, a, true),
        (F::Zset, "bzmpop") => zset::bzmpop,
        (F::Zset, "zrandmember") => zset::zrandmember,
        (F::Zset, "zunion") => |db, a| zset::setop_cmd(db, a, zset::SetOp::Union, false),
        (F::Zset, "zinter") => |db, a| zset::setop_cmd(db, a, zset::SetOp::Inter, false),
        (F::Zset, "zdiff") => |db, a| zset::setop_cmd(db, a, zset::SetOp::Diff, false),
        (F::Zset, "zunionstore") => |db, a| zset::setop_cmd(db, a, zset::SetOp::Union, true),
        (F::Zset, "zinterstore") => |db, a| zset::setop_cmd(db, a, zset::SetOp::Inter, true),
        (F::Zset, "zdiffstore") => |db, a| zset::setop_cmd(db, a, zset::SetOp::Diff, true),
        (F::Zset, "zintercard") => zset::zintercard,
        (F::Zset, "zscan") => zset::zscan,
        (F::Dump, "dump") => dump::dump_cmd,
        (F::Dump, "restore") => dump::restore_cmd,
        (F::Generic, "object") => generic::object,
        (F::Generic, "memory") => generic::memory,
        (F::Generic, "touch") => generic::touch,
        (F::Generic, "wait") => generic::wait,
        (F::Generic, "lcs") => generic::lcs,
        (F::Sort, "sort") => sort::sort,
        (F::Sort, "sort_ro") => sort::sort_ro,
        (F::Bitmap, "setbit") => bitmap::setbit,
        (F::Bitmap, "getbit") => bitmap::getbit,
        (F::Bitmap, "bitcount") => bitmap::bitcount,
        (F::Bitmap, "bitpos") => bitmap::bitpos,
        (F::Bitmap, "bitop") => bitmap::bitop,
        (F::Bitmap, "bitfield") => bitmap::bitfield,
        (F::Bitmap, "bitfield_ro") => bitmap::bitfield_ro,
        (F::Hll, "pfadd") => hll::pfadd,
        (F::Hll, "pfcount") => hll::pfcount,
        (F::Hll, "pfmerge") => hll::pfmerge,
        (F::Hll, "pfdebug") => hll::pfdebug,
        (F::Hll, "pfselftest") => hll::pfselftest,
        (F::Geo, "geoadd") => geo::geoadd,
        (F::Geo, "geodist") => geo::geodist,
        (F::Geo, "geohash") => geo::geohash_cmd,
        (F::Geo, "geopos") => geo::geopos,
        (F::Geo, "georadius") => {
            |db, a| geo::search(db, a, geo::Variant { from: geo::Centre::Coords, store: geo::Store::Options })
        }
        (F::Geo, "georadius_ro") => {
            |db, a| geo::search(db, a, geo::Variant { from: geo::Centre::Coords, store: geo::Store::No })
        }
        (F::Geo, "georadiusbymember") => {
            |db, a| geo::search(db, a, geo::Variant { from: geo::Centre::Member, store: geo::Store::Options })
        }
        (F::Geo, "georadiusbymember_ro") => {
            |db, a| geo::search(db, a, geo::Variant { from: geo::Centre::Member, store: geo::Store::No })
        }
        (F::Geo, "geosearch") => {
            |db, a| geo::search(db, a, geo::Variant { from: geo::Centre::Options, store: geo::Store::No })
        }
        (F::Geo, "geosearchstore") => |db, a| {
            geo::search(db, a, geo::Variant { from: geo::Centre::Options, store: geo::Store::Destination })
        },
        (F::Stream, "xadd") => stream::xadd,
        (F::Stream, "xlen") => stream::xlen,
        (F::Stream, "xrange") => stream::xrange,
        (F::Stream, "xrevrange") => stream::xrevrange,
        (F::Stream, "xdel") => stream::xdel,
        (F::Stream, "xtrim") => stream::xtrim,
        (F::Stream, "xread" | "xreadgroup") => stream::xread,
        (F::Stream, "xgroup") => stream::xgroup,
        (F::Stream, "xack") => stream::xack,
        (F::Stream, "xpending") => stream::xpending,
        (F::Stream, "xclaim") => stream::xclaim,
        (F::Stream, "xautoclaim") => stream::xautoclaim,
        (F::Stream, "xinfo") => stream::xinfo,
        (F::Stream, "xsetid") => stream::xsetid,
        (F::Session, "command") => return Action::Command,
        (F::Session, "multi") => return Action::Multi,
        (F::Session, "exec") => return Action::Exec,
        (F::Session, "discard") => return Action::Discard,
        (F::Session, "watch") => return Action::Watch,
        (F::Session, "unwatch") => return Action::Unwatch,
        _ => return Action::Server,
    };
    Action::Data(run)
}

/// How `info`'s row reaches the replicas when it changed something: [`action`]'s companion,
/// keyed the same way. A row not named here is propagated as it was given.
pub(crate) fn replicated(info: &CommandInfo) -> Replicated {
    use Replicated as R;
    match (info.family, info.container()) {
        (F::Keyspace, "expire") => R::Expire { unit_ms: 1000, absolute: false },
        (F::Keyspace, "pexpire") => R::Expire { unit_ms: 1, absolute: false },
        (F::Keyspace, "expireat") => R::Expire { unit_ms: 1000, absolute: true },
        (F::Keyspace, "pexpireat") => R::Expire { unit_ms: 1, absolute: true },
        (F::Keyspace, "flushdb" | "flushall" | "swapdb") => R::Always,
        (F::String, "set") => R::Set,
        (F::String, "setex") => R::SetWithTtl { unit_ms: 1000 },
        (F::String, "psetex") => R::SetWithTtl { unit_ms: 1 },
        (F::String, "getex") => R::GetEx,
        (F::String, "getdel") => R::GetDel,
        (F::String, "incrbyfloat") => R::IncrByFloat,
        (F::Hash, "hincrbyfloat") => R::HIncrByFloat,
        (F::Set, "spop") => R::SPop,
        (F::List, "blpop") => R::BlockingPop { pop: b"LPOP" },
        (F::List, "brpop") => R::BlockingPop { pop: b"RPOP" },
        (F::List, "brpoplpush") => R::BRPopLPush,
        (F::List, "blmove") => R::BLMove,
        (F::List, "lmpop" | "blmpop") => R::MPop { option: b"left", first: b"LPOP", second: b"RPOP" },
        (F::Zset, "bzpopmin") => R::BlockingPop { pop: b"ZPOPMIN" },
        (F::Zset, "bzpopmax") => R::BlockingPop { pop: b"ZPOPMAX" },
        (F::Zset, "zmpop" | "bzmpop") => R::MPop { option: b"min", first: b"ZPOPMIN", second: b"ZPOPMAX" },
        (F::Stream, "xadd") => R::XAdd,
        // Their effects are the claims they propagate themselves (`Db::propagate_instead`).
        (F::Stream, "xreadgroup" | "xclaim" | "xautoclaim") => R::Itself,
        _ => R::Verbatim,
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

/// The reply to a command a [`Db`] does not run alone: MULTI and its kin, which need a
/// [`super::Session`], and the commands a server answers.
pub(crate) fn needs_session(info: &CommandInfo) -> Reply {
    Reply::Error(format!("ERR {} needs a client session", info.name.to_uppercase()))
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
    /// [`super::Session`] and answer an error here (run them through
    /// [`super::Engine::execute`]).
    pub fn execute(&mut self, argv: &[Bytes]) -> Reply {
        match resolve(argv) {
            Ok(info) => self.execute_resolved(info, argv),
            Err(reply) => reply,
        }
    }

    /// [`Db::execute`] for a command [`resolve`] accepted.
    pub(crate) fn execute_resolved(&mut self, info: &CommandInfo, argv: &[Bytes]) -> Reply {
        self.execute_action(info, action(info), argv)
    }

    /// [`Db::execute`] for a command [`resolve`] accepted and the [`action`] of its row.
    pub(crate) fn execute_action(&mut self, info: &CommandInfo, action: Action<B>, argv: &[Bytes]) -> Reply {
        self.touching = !info.is(table::attr::NO_TOUCH);
        let (mark, db) = (self.propagation_mark(), self.index());
        let reply = match action {
            Action::Data(run) => self
                .run_command(info.is_write(), |db| run(db, argv))
                .unwrap_or_else(|e| Reply::Error(e.to_string())),
            Action::Command => table::command_reply(argv),
            _ => needs_session(info),
        };
        self.end_command(!reply.is_error());
        if let Some(mark) = mark {
            self.propagate_command(mark, db, replicated(info), argv, &reply);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemoryBackend;

    #[test]
    fn every_row_has_its_action() {
        for info in table::all() {
            let action = action::<MemoryBackend>(info);
            match info.family {
                F::Server => assert!(matches!(action, Action::Server), "{}", info.name),
                F::Session => assert!(!matches!(action, Action::Server | Action::Data(_)), "{}", info.name),
                _ => assert!(matches!(action, Action::Data(_)), "{} has no handler", info.name),
            }
        }
    }

    #[test]
    fn rows_replicated_by_their_effects_are_found_under_their_families() {
        let rewritten = [
            "expire",
            "pexpire",
            "expireat",
            "pexpireat",
            "flushdb",
            "flushall",
            "swapdb",
            "set",
            "setex",
            "psetex",
            "getex",
            "getdel",
            "incrbyfloat",
            "hincrbyfloat",
            "spop",
            "blpop",
            "brpop",
            "brpoplpush",
            "blmove",
            "lmpop",
            "blmpop",
            "bzpopmin",
            "bzpopmax",
            "zmpop",
            "bzmpop",
            "xadd",
            "xreadgroup",
            "xclaim",
            "xautoclaim",
        ];
        for info in table::all() {
            let how = replicated(info);
            assert_eq!(how != Replicated::Verbatim, rewritten.contains(&info.name), "{}: {how:?}", info.name);
        }
    }
}
