//! The replication stream: what each commit's writes become for replicas, as Redis 7.0
//! propagates them. A command is propagated by its effects, not by its arguments when those
//! would run differently on a replica: relative TTLs become absolute (`PEXPIREAT`, `SET …
//! PXAT`), random or blocking pops name what they popped (`SREM`, `LPOP`, `ZPOPMIN`),
//! `INCRBYFLOAT` sets its result, `XADD *` carries its id, and a key a command found
//! expired is deleted (`DEL`) before the command. A command that changed nothing is not
//! propagated, nor is a read.
//!
//! An [`super::Engine`] given a [`Propagation`] hands it each commit's commands (one unit:
//! a command with the deletions it caused, an EXEC's or a script's writes) while the
//! commit's key locks are still held, so two commits on one key reach the stream in the
//! order they committed.

use bytes::Bytes;

use super::Reply;

/// One command of the replication stream: the database it runs in and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Propagated {
    /// The database (the stream selects it when it changes).
    pub db: usize,
    /// The command.
    pub argv: Vec<Bytes>,
}

impl Propagated {
    /// `DEL key` in database `db`, or `UNLINK key` when `lazy`: an expired or evicted key's
    /// deletion.
    pub(crate) fn deletion(db: usize, key: Bytes, lazy: bool) -> Self {
        Propagated { db, argv: vec![deletion_name(lazy), key] }
    }
}

/// Which deletions Redis frees in the background, and so propagates as `UNLINK` rather than
/// `DEL`: its `lazyfree-lazy-expire` (expired keys, and TTLs set in the past),
/// `lazyfree-lazy-eviction` (evicted keys) and `lazyfree-lazy-user-del` (GETDEL).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LazyDeletes {
    /// `lazyfree-lazy-expire`.
    pub expire: bool,
    /// `lazyfree-lazy-eviction`.
    pub eviction: bool,
    /// `lazyfree-lazy-user-del`.
    pub user_del: bool,
}

impl LazyDeletes {
    pub(crate) fn bits(self) -> u8 {
        u8::from(self.expire) | u8::from(self.eviction) << 1 | u8::from(self.user_del) << 2
    }

    pub(crate) fn from_bits(bits: u8) -> Self {
        LazyDeletes { expire: bits & 1 != 0, eviction: bits & 2 != 0, user_del: bits & 4 != 0 }
    }
}

fn deletion_name(lazy: bool) -> Bytes {
    Bytes::from_static(if lazy { b"UNLINK" } else { b"DEL" })
}

/// Where an engine sends its commits' effects (a server's replication backlog).
pub trait Propagation: Send + Sync {
    /// Whether the stream is kept at all: while false the engine records nothing.
    fn active(&self) -> bool;

    /// One commit's commands, in order, called while the commit's key locks are held. A
    /// unit of several commands is one transaction (Redis wraps it in MULTI/EXEC).
    fn propagate(&self, unit: Vec<Propagated>);
}

/// How a data command's row reaches the replicas once it changed something (Redis'
/// `dirty`); [`super::dispatch::replicated`] gives each row its form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replicated {
    /// Its own arguments.
    Verbatim,
    /// Its own arguments, even when it changed nothing (Redis' `forceCommandPropagation`):
    /// emptying or swapping databases.
    Always,
    /// Nothing: the command propagates its effects itself (`Db::propagate_instead`).
    Itself,
    /// `EXPIRE`'s kin: `PEXPIREAT` of the absolute time, or the key's deletion when that is
    /// past. `unit_ms` is the argument's unit; `absolute` whether it is a unix time.
    Expire {
        /// Milliseconds in one unit of the argument (1000 for seconds).
        unit_ms: i64,
        /// Whether the argument is a unix time rather than a time to live.
        absolute: bool,
    },
    /// `SET`: with an expiry option `SET key value PXAT when`, else itself without `GET`.
    Set,
    /// `SETEX` (`unit_ms` 1000) and `PSETEX` (1): `SET key value PXAT when`.
    SetWithTtl {
        /// Milliseconds in one unit of the TTL argument.
        unit_ms: i64,
    },
    /// `GETEX`: `PEXPIREAT`, `PERSIST` or the key's deletion.
    GetEx,
    /// `GETDEL`: the key's deletion.
    GetDel,
    /// `INCRBYFLOAT`: `SET key result KEEPTTL`.
    IncrByFloat,
    /// `HINCRBYFLOAT`: `HSET key field result`.
    HIncrByFloat,
    /// `SPOP`: `SREM` of each member popped (`DEL` when it took the whole set).
    SPop,
    /// A blocking pop of one element (`BLPOP`…): `pop` of the key that answered.
    BlockingPop {
        /// The non-blocking command.
        pop: &'static [u8],
    },
    /// `BRPOPLPUSH`: `RPOPLPUSH`.
    BRPopLPush,
    /// `BLMOVE`: `LMOVE`.
    BLMove,
    /// `LMPOP`/`ZMPOP` and their blocking forms: `first key count` when an argument is
    /// `first`'s option (`LEFT`, `MIN`), else `second key count`.
    MPop {
        /// The option that picks `first`.
        option: &'static [u8],
        /// The pop for `option`.
        first: &'static [u8],
        /// The pop otherwise.
        second: &'static [u8],
    },
    /// `XADD`: with the id it added in place of `*`.
    XAdd,
}

/// The commands `argv` (which answered `reply`, at `now_ms`) propagates, given that it
/// changed something, in the form `how`: usually `argv` itself. `exists` tells whether a
/// key exists after the command; `lazy` names its deletions.
pub(crate) fn effects(
    how: Replicated,
    argv: &[Bytes],
    reply: &Reply,
    now_ms: u64,
    exists: &dyn Fn(&[u8]) -> bool,
    lazy: LazyDeletes,
) -> Vec<Vec<Bytes>> {
    let arg = |i: usize| argv.get(i).cloned().unwrap_or_default();
    let key = || arg(1);
    let b = |s: &'static [u8]| Bytes::from_static(s);
    let num = |n: u64| Bytes::from(n.to_string());
    let int = |i: usize| std::str::from_utf8(&arg(i)).ok().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    let at = |ms: i64| (now_ms as i64).saturating_add(ms).max(0) as u64;
    let verbatim = || vec![argv.to_vec()];
    match how {
        Replicated::Verbatim | Replicated::Always => verbatim(),
        Replicated::Itself => Vec::new(),
        Replicated::Expire { unit_ms, absolute } => {
            let ms = int(2).saturating_mul(unit_ms);
            let when = if absolute { ms.max(0) as u64 } else { at(ms) };
            if when <= now_ms {
                return vec![vec![deletion_name(lazy.expire), key()]];
            }
            let mut out = vec![b(b"PEXPIREAT"), key(), num(when)];
            out.extend(argv.iter().skip(3).cloned());
            vec![out]
        }
        Replicated::Set => match expiry_option(argv, 3, now_ms) {
            Some(when) => vec![vec![b(b"SET"), key(), arg(2), b(b"PXAT"), num(when)]],
            // GET only answers: the replica need not.
            None => vec![
                argv.iter()
                    .enumerate()
                    .filter(|(i, a)| *i < 3 || !a.eq_ignore_ascii_case(b"get"))
                    .map(|(_, a)| a.clone())
                    .collect(),
            ],
        },
        Replicated::SetWithTtl { unit_ms } => {
            vec![vec![b(b"SET"), key(), arg(3), b(b"PXAT"), num(at(int(2).saturating_mul(unit_ms)))]]
        }
        Replicated::GetEx => match expiry_option(argv, 2, now_ms) {
            Some(when) if when <= now_ms => vec![vec![deletion_name(lazy.expire), key()]],
            Some(when) => vec![vec![b(b"PEXPIREAT"), key(), num(when)]],
            None => vec![vec![b(b"PERSIST"), key()]],
        },
        Replicated::GetDel => vec![vec![deletion_name(lazy.user_del), key()]],
        Replicated::IncrByFloat => match reply {
            Reply::Bulk(value) => vec![vec![b(b"SET"), key(), value.clone(), b(b"KEEPTTL")]],
            _ => verbatim(),
        },
        Replicated::HIncrByFloat => match reply {
            Reply::Bulk(value) => vec![vec![b(b"HSET"), key(), arg(2), value.clone()]],
            _ => verbatim(),
        },
        Replicated::SPop => match reply {
            Reply::Bulk(member) => vec![vec![b(b"SREM"), key(), member.clone()]],
            // A count that took the whole set deletes it.
            Reply::Array(_) | Reply::Set(_) if !exists(&key()) => vec![vec![b(b"DEL"), key()]],
            Reply::Array(members) | Reply::Set(members) => members
                .iter()
                .filter_map(|m| match m {
                    Reply::Bulk(m) => Some(vec![b(b"SREM"), key(), m.clone()]),
                    _ => None,
                })
                .collect(),
            _ => verbatim(),
        },
        Replicated::BlockingPop { pop } => match reply_key(reply) {
            Some(popped) => vec![vec![b(pop), popped]],
            None => Vec::new(),
        },
        Replicated::BRPopLPush => vec![vec![b(b"RPOPLPUSH"), key(), arg(2)]],
        Replicated::BLMove => vec![vec![b(b"LMOVE"), key(), arg(2), arg(3), arg(4)]],
        Replicated::MPop { option, first, second } => {
            let pop = if argv.iter().any(|a| a.eq_ignore_ascii_case(option)) { first } else { second };
            match popped_count(reply) {
                Some((popped, n)) => vec![vec![b(pop), popped, num(n)]],
                None => Vec::new(),
            }
        }
        Replicated::XAdd => match (reply, xadd_id_position(argv)) {
            (Reply::Bulk(id), Some(i)) => {
                let mut out = argv.to_vec();
                out[i] = id.clone();
                vec![out]
            }
            _ => verbatim(),
        },
    }
}

/// The absolute expiry (unix ms) the `EX|PX|EXAT|PXAT n` option among `argv[from..]` sets;
/// `None` without one.
fn expiry_option(argv: &[Bytes], from: usize, now_ms: u64) -> Option<u64> {
    let mut i = from;
    while i < argv.len() {
        let name = argv[i].to_ascii_lowercase();
        let value = argv.get(i + 1).and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok());
        let found = match (name.as_slice(), value) {
            (b"ex", Some(v)) => Some((now_ms as i64).saturating_add(v.saturating_mul(1000))),
            (b"px", Some(v)) => Some((now_ms as i64).saturating_add(v)),
            (b"exat", Some(v)) => Some(v.saturating_mul(1000)),
            (b"pxat", Some(v)) => Some(v),
            _ => None,
        };
        if let Some(when) = found {
            return Some(when.max(0) as u64);
        }
        i += 1;
    }
    None
}

/// The key a blocking pop's `[key, …]` reply names.
fn reply_key(reply: &Reply) -> Option<Bytes> {
    match reply {
        Reply::Array(items) => match items.first() {
            Some(Reply::Bulk(key)) => Some(key.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The key and the number of elements of an `[key, [elements]]` reply (LMPOP, ZMPOP).
fn popped_count(reply: &Reply) -> Option<(Bytes, u64)> {
    match reply {
        Reply::Array(items) => match (items.first(), items.get(1)) {
            (Some(Reply::Bulk(key)), Some(Reply::Array(popped))) => Some((key.clone(), popped.len() as u64)),
            _ => None,
        },
        _ => None,
    }
}

/// Where XADD's id is among its arguments: after the key and its options.
fn xadd_id_position(argv: &[Bytes]) -> Option<usize> {
    let mut i = 2;
    while i < argv.len() {
        let a = argv[i].to_ascii_lowercase();
        match a.as_slice() {
            b"nomkstream" => i += 1,
            b"maxlen" | b"minid" => {
                i += 1;
                if argv.get(i).is_some_and(|m| m.as_ref() == b"=" || m.as_ref() == b"~") {
                    i += 1;
                }
                i += 1;
            }
            b"limit" => i += 2,
            _ => return Some(i),
        }
    }
    None
}
