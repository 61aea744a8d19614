//! The stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD, XREADGROUP,
//! XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO and XSETID.
//!
//! A stream is one metadata record (version, length, and Kvrocks' stream counters: last
//! generated id, first entry, max deleted id, entries added, group count) plus records in
//! the Stream CF under the stream's subkey prefix (see [`crate::codec::StreamSub`]): one per
//! entry, keyed by its id, and after every entry the consumer groups, their consumers and
//! their pending entries. A stream exists with no entries (after XDEL of every entry, or
//! XGROUP CREATE … MKSTREAM); DEL is one metadata delete, as for every type.
//!
//! Trimming with `~` removes only whole nodes, as Redis does: a node holds
//! `stream-node-max-entries` consecutive entries by the order they were added
//! ([`crate::commands::Engine::set_stream_node_entries`]). Redis also closes a node at `stream-node-max-bytes`;
//! here only the entry count does, so a stream of large entries may keep more under `~`
//! than Redis would.
//!
//! The commands here parse arguments, call the typed storage layer and build replies; the
//! storage layer reads and queues records and never sees an argument list:
//! [`core`] (the stream's counters and its records by kind), [`read`] (ranges, pending
//! entries, DUMP), [`write`](mod@write) (adding, trimming, deleting entries, XSETID, RESTORE) and
//! [`groups`] (groups, consumers, delivering, acknowledging, claiming). [`parse`] reads ids
//! and options.

mod core;
mod groups;
mod parse;
mod read;
mod write;

use bytes::Bytes;

use self::core::{Entry, Stream, err};
use self::groups::{Claimant, Delivered, GroupRead};
use self::parse::{parse_add_or_trim, parse_bound, parse_claim, parse_id, parse_read, strict_id};
use self::read::PendingQuery;
use crate::backend::{KvBackend, WriteBatch};
use crate::codec::{GroupValue, StreamId};
use crate::commands::args::{int_arg, parse_i64};
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandError, CommandResult, Db, Reply};

/// How many entries a woken XREAD without COUNT is served (Redis' default).
const BLOCKED_COUNT: &str = "1000";

fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(Bytes::from(id.to_string()))
}

/// A name as Redis' `%s` prints it: the bytes before the first NUL.
fn c_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes.split(|&b| b == 0).next().unwrap_or_default())
}

fn subcommand_error(argv: &[Bytes]) -> CommandError {
    CommandError::Other(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        c_text(&argv[1]),
        String::from_utf8_lossy(&argv[0]).to_uppercase()
    ))
}

fn nogroup(key: &[u8], group: &[u8]) -> CommandError {
    CommandError::Other(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        c_text(key),
        c_text(group)
    ))
}

fn no_such_group(key: &[u8], group: &[u8]) -> CommandError {
    CommandError::Other(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        c_text(group),
        c_text(key)
    ))
}

/// An entry as Redis replies it: `[id, [field, value, …]]`.
fn entry_reply((id, fields): Entry) -> Reply {
    Reply::Array(vec![id_reply(id), Reply::Array(fields.into_iter().map(Reply::Bulk).collect())])
}

fn entries_reply(entries: Vec<Entry>) -> Reply {
    Reply::Array(entries.into_iter().map(entry_reply).collect())
}

/// A delivered entry: `[id, [field, value, …]]`, `[id, nil]` for a deleted one, or `id`
/// alone when only ids were asked for.
fn delivered_reply((id, fields): Delivered, justid: bool) -> Reply {
    match fields {
        _ if justid => id_reply(id),
        Some(fields) => entry_reply((id, fields)),
        None => Reply::Array(vec![id_reply(id), Reply::NilArray]),
    }
}

fn help(lines: &[&str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::Status(l.to_string().into())).collect())
}

/// The stream and group named by a group command, or NOGROUP.
fn stream_and_group<B: KvBackend>(
    db: &Db<B>,
    key: &[u8],
    group: &[u8],
) -> CommandResult<(Stream, GroupValue)> {
    let Some(s) = db.stream(key)? else { return Err(nogroup(key, group)) };
    let Some(g) = db.stream_records(key, &s).group(group)? else { return Err(nogroup(key, group)) };
    Ok((s, g))
}

/// Commits a group command's batch and sends `xgroup-createconsumer` for each consumer it
/// created.
fn commit_group_batch<B: KvBackend>(
    db: &mut Db<B>,
    batch: WriteBatch,
    created: Vec<Bytes>,
) -> CommandResult<()> {
    if !batch.is_empty() {
        db.commit_unsignalled(batch)?;
    }
    for key in created {
        db.notify_unsignalled(NotifyFlags::STREAM, "xgroup-createconsumer", &key);
    }
    Ok(())
}

pub(crate) fn xadd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let args = parse_add_or_trim(argv, true)?;
    let field_pos = args.id_pos + 1;
    if argv.len() < field_pos + 2 || (argv.len() - field_pos) % 2 == 1 {
        return Err(CommandError::WrongArity("xadd".into()));
    }
    if let Some((id, true)) = args.id
        && id == StreamId::MIN
    {
        return Err(err("ERR The ID specified in XADD must be greater than 0-0"));
    }
    let key = &argv[1];
    let mut batch = WriteBatch::new();
    let Some((id, trimmed)) = db.stream_add(&mut batch, key, &args, &argv[field_pos..])? else {
        return Ok(Reply::Nil);
    };
    db.commit(batch)?;
    db.notify(NotifyFlags::STREAM, "xadd", key);
    if trimmed > 0 {
        db.notify(NotifyFlags::STREAM, "xtrim", key);
    }
    if args.trim.approx
        && db.records_propagation()
        && let Some(s) = db.stream(key)?
    {
        let mut exact = exact_trim(argv, args.id_pos, &s);
        exact[args.id_pos] = Bytes::from(id.to_string());
        db.propagate_instead(exact);
    }
    Ok(id_reply(id))
}

/// `argv` (an XADD's or XTRIM's, its trimming options before `end`) with `MAXLEN ~ n` or
/// `MINID ~ id` as the trim it did, as Redis propagates it: `MAXLEN = <length now>`,
/// `MINID = <first id now>`, so that a replica trims exactly as much.
fn exact_trim(argv: &[Bytes], end: usize, s: &Stream) -> Vec<Bytes> {
    let mut out = argv.to_vec();
    for i in 2..end.min(argv.len()).saturating_sub(2) {
        let maxlen = argv[i].eq_ignore_ascii_case(b"maxlen");
        if (maxlen || argv[i].eq_ignore_ascii_case(b"minid")) && argv[i + 1].as_ref() == b"~" {
            out[i + 1] = Bytes::from_static(b"=");
            out[i + 2] = Bytes::from(match (maxlen, s.len()) {
                (true, len) => len.to_string(),
                // Redis names the largest id when no entry is left.
                (false, 0) => StreamId::MAX.to_string(),
                (false, _) => s.f.first_entry_id.to_string(),
            });
            break;
        }
    }
    out
}

pub(crate) fn xtrim<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let args = parse_add_or_trim(argv, false)?;
    let key = &argv[1];
    let Some(mut s) = db.stream(key)? else { return Ok(Reply::Integer(0)) };
    let mut batch = WriteBatch::new();
    let trimmed = db.stream_trim(&mut batch, key, &mut s, &args.trim, None)?;
    if trimmed > 0 {
        db.put_stream(&mut batch, key, &s);
        db.commit(batch)?;
        db.notify(NotifyFlags::STREAM, "xtrim", key);
        if args.trim.approx {
            db.propagate_instead(exact_trim(argv, argv.len(), &s));
        }
    }
    Ok(Reply::Integer(trimmed as i64))
}

pub(crate) fn xlen<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.stream(&argv[1])?.map_or(0, |s| s.len() as i64)))
}

pub(crate) fn xrange<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    range(db, argv, false)
}

pub(crate) fn xrevrange<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    range(db, argv, true)
}

fn range<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], rev: bool) -> CommandResult {
    let (start, end) = if rev { (&argv[3], &argv[2]) } else { (&argv[2], &argv[3]) };
    let start = parse_bound(start, false)?;
    let end = parse_bound(end, true)?;
    let mut count: i64 = -1;
    let mut i = 4;
    while i < argv.len() {
        if argv[i].eq_ignore_ascii_case(b"count") && i + 1 < argv.len() {
            count = int_arg(&argv[i + 1])?.max(0);
            i += 2;
        } else {
            return Err(CommandError::Syntax);
        }
    }
    let Some(s) = db.stream(&argv[1])? else { return Ok(Reply::Array(Vec::new())) };
    if count == 0 {
        return Ok(Reply::NilArray);
    }
    let count = usize::try_from(count.max(0)).unwrap_or(usize::MAX);
    Ok(entries_reply(db.stream_records(&argv[1], &s).range(start, end, rev, count)?))
}

pub(crate) fn xdel<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let key = &argv[1];
    let Some(s) = db.stream(key)? else { return Ok(Reply::Integer(0)) };
    let ids = argv[2..].iter().map(|a| strict_id(a)).collect::<CommandResult<Vec<_>>>()?;
    let mut batch = WriteBatch::new();
    let deleted = db.stream_delete(&mut batch, key, s, ids)?;
    if deleted > 0 {
        db.commit(batch)?;
        db.notify(NotifyFlags::STREAM, "xdel", key);
    }
    Ok(Reply::Integer(deleted as i64))
}

pub(crate) fn xsetid<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let id = strict_id(&argv[2])?;
    let (mut entries_added, mut max_deleted) = (None, StreamId::MIN);
    let mut i = 3;
    while i < argv.len() {
        let more = i + 1 < argv.len();
        if argv[i].eq_ignore_ascii_case(b"entriesadded") && more {
            let n = int_arg(&argv[i + 1])?;
            if n < 0 {
                return Err(err("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if argv[i].eq_ignore_ascii_case(b"maxdeletedid") && more {
            max_deleted = strict_id(&argv[i + 1])?;
            if id < max_deleted {
                return Err(err(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CommandError::Syntax);
        }
        i += 2;
    }
    let key = &argv[1];
    let Some(s) = db.stream(key)? else { return Err(CommandError::NoSuchKey) };
    let mut batch = WriteBatch::new();
    db.stream_set_id(&mut batch, key, s, id, entries_added, max_deleted)?;
    db.commit_unsignalled(batch)?;
    db.notify_unsignalled(NotifyFlags::STREAM, "xsetid", key);
    Ok(Reply::OK)
}

/// One key of an XREAD/XREADGROUP: the id after which to read (`None`: the group's `>`),
/// and the stream and group as the argument checks read them.
struct ReadKey<'a> {
    key: &'a Bytes,
    after: Option<StreamId>,
    stream: Option<Stream>,
    group: Option<GroupValue>,
}

pub(crate) fn xread<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let group_cmd = argv[0].len() == 10;
    let args = parse_read(argv, group_cmd)?;
    let (group, streams_at) = (args.group, args.streams_at);
    let n = (argv.len() - streams_at) / 2;
    let retrying = db.is_retrying();
    let mut reads: Vec<ReadKey<'_>> = Vec::with_capacity(n);
    let mut rewritten = None::<Vec<Bytes>>;
    for k in 0..n {
        let key = &argv[streams_at + k];
        let arg = argv[streams_at + n + k].as_ref();
        let s = match db.stream(key) {
            Err(CommandError::WrongType) if retrying && group.is_none() => None,
            Err(CommandError::WrongType) if retrying => {
                return Err(err("UNBLOCKED the stream key no longer exists"));
            }
            other => other?,
        };
        let mut found = None;
        if let Some((g, _)) = group {
            found = match &s {
                Some(s) => db.stream_records(key, s).group(g)?,
                None => None,
            };
            if found.is_none() {
                if retrying && s.is_none() {
                    return Err(err("UNBLOCKED the stream key no longer exists"));
                }
                if retrying {
                    return Err(err(
                        "NOGROUP the consumer group this client was blocked on no longer exists",
                    ));
                }
                return Err(CommandError::Other(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    c_text(key),
                    c_text(g)
                )));
            }
        }
        let after = if arg == b"$" {
            if group_cmd {
                return Err(err(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ));
            }
            let last = s.as_ref().map_or(StreamId::MIN, |s| s.f.last_generated_id);
            rewritten.get_or_insert_with(|| argv.to_vec())[streams_at + n + k] =
                Bytes::from(last.to_string());
            Some(last)
        } else if arg == b">" {
            if !group_cmd {
                return Err(err(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            None
        } else {
            // Redis marks `>` with the largest id: that id given reads as `>` too.
            Some(strict_id(arg)?).filter(|id| !(group_cmd && *id == StreamId::MAX))
        };
        reads.push(ReadKey { key, after, stream: s, group: found });
    }
    let mut served = Vec::new();
    let mut batch = WriteBatch::new();
    let mut created = Vec::new();
    for read in &reads {
        let Some(s) = &read.stream else { continue };
        let records = db.stream_records(read.key, s);
        let found = match group {
            None => match records.after(s, read.after.unwrap_or_default(), args.count)? {
                Some(found) => found.into_iter().map(entry_reply).collect(),
                None => continue,
            },
            Some((g, consumer)) => {
                let gv = read.group.unwrap_or_default();
                let what =
                    GroupRead { group: g, consumer, after: read.after, count: args.count, noack: args.noack };
                match records.read_group(&mut batch, &mut created, s, gv, &what)? {
                    Some(found) => found.into_iter().map(|d| delivered_reply(d, false)).collect(),
                    None => continue,
                }
            }
        };
        served.push((Reply::Bulk(read.key.clone()), Reply::Array(found)));
    }
    commit_group_batch(db, batch, created)?;
    if !served.is_empty() {
        return Ok(Reply::PairMap(served));
    }
    match args.timeout {
        None => Ok(Reply::NilArray),
        Some(ms) => {
            if !args.count_given {
                let argv = rewritten.get_or_insert_with(|| argv.to_vec());
                argv.splice(
                    1..1,
                    [Bytes::from_static(b"COUNT"), Bytes::from_static(BLOCKED_COUNT.as_bytes())],
                );
            }
            let keys: Vec<Bytes> = reads.iter().map(|r| r.key.clone()).collect();
            let timeout = (ms > 0).then(|| std::time::Duration::from_millis(ms as u64));
            Ok(db.would_block_as(&keys, timeout, Reply::NilArray, Reply::NilArray, rewritten))
        }
    }
}

pub(crate) fn xgroup<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let sub = argv[1].to_ascii_lowercase();
    if sub == b"help" {
        return Ok(help(&[
            "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
            "HELP",
            "    Prints this help.",
        ]));
    }
    let (key, group) = (&argv[2], argv[3].as_ref());
    let (create, setid) = (sub == b"create", sub == b"setid");
    let (mut mkstream, mut entries_read) = (false, -1i64);
    let mut i = 5;
    while i < argv.len() {
        if create && argv[i].eq_ignore_ascii_case(b"mkstream") {
            mkstream = true;
            i += 1;
        } else if (create || setid) && argv[i].eq_ignore_ascii_case(b"entriesread") && i + 1 < argv.len() {
            entries_read = int_arg(&argv[i + 1])?;
            if entries_read < -1 {
                return Err(err("ERR value for ENTRIESREAD must be positive or -1"));
            }
            i += 2;
        } else {
            return Err(subcommand_error(argv));
        }
    }
    let s = db.stream(key)?;
    let existing = match &s {
        Some(s) => db.stream_records(key, s).group(group)?,
        None => None,
    };
    if !mkstream {
        if s.is_none() {
            return Err(err(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ));
        }
        if existing.is_none() && matches!(sub.as_slice(), b"setid" | b"createconsumer" | b"delconsumer") {
            return Err(no_such_group(key, group));
        }
    }
    let existed = s.is_some();
    let mut batch = WriteBatch::new();
    let (reply, event) = match sub.as_slice() {
        b"create" if argv.len() <= 8 => {
            let id = if argv[4].as_ref() == b"$" {
                s.as_ref().map_or(StreamId::MIN, |s| s.f.last_generated_id)
            } else {
                strict_id(&argv[4])?
            };
            if existing.is_some() {
                return Err(err("BUSYGROUP Consumer Group name already exists"));
            }
            db.stream_create_group(&mut batch, key, s, group, id, entries_read)?;
            (Reply::OK, "xgroup-create")
        }
        b"setid" if argv.len() == 5 || argv.len() == 7 => {
            let s = s.expect("checked above");
            let id = if argv[4].as_ref() == b"$" {
                s.f.last_generated_id
            } else {
                parse_id(&argv[4], 0, false, None)?
            };
            let g = GroupValue { last_delivered: id, entries_read, ..existing.expect("checked above") };
            db.stream_records(key, &s).put_group(&mut batch, group, &g)?;
            (Reply::OK, "xgroup-setid")
        }
        b"destroy" if argv.len() == 4 => {
            let Some(s) = s else { return Err(subcommand_error(argv)) };
            if existing.is_none() {
                return Ok(Reply::Integer(0));
            }
            db.stream_destroy_group(&mut batch, key, s, group)?;
            (Reply::Integer(1), "xgroup-destroy")
        }
        b"createconsumer" if argv.len() == 5 => {
            let s = s.expect("checked above");
            let g = existing.expect("checked above");
            if !db.stream_records(key, &s).create_consumer(&mut batch, group, g, &argv[4])? {
                return Ok(Reply::Integer(0));
            }
            (Reply::Integer(1), "xgroup-createconsumer")
        }
        b"delconsumer" if argv.len() == 5 => {
            let s = s.expect("checked above");
            let g = existing.expect("checked above");
            let Some(removed) = db.stream_records(key, &s).delete_consumer(&mut batch, group, g, &argv[4])?
            else {
                return Ok(Reply::Integer(0));
            };
            (Reply::Integer(removed as i64), "xgroup-delconsumer")
        }
        _ => return Err(subcommand_error(argv)),
    };
    // As Redis: a group's change signals no key; MKSTREAM's new stream does, and DESTROY
    // wakes the group's blocked readers (they then fail).
    match event {
        "xgroup-create" if !existed => {
            db.commit(batch)?;
            db.notify(NotifyFlags::STREAM, event, key);
        }
        "xgroup-destroy" => {
            db.commit_ready(batch)?;
            db.notify_unsignalled(NotifyFlags::STREAM, event, key);
        }
        _ => {
            db.commit_unsignalled(batch)?;
            db.notify_unsignalled(NotifyFlags::STREAM, event, key);
        }
    }
    Ok(reply)
}

pub(crate) fn xack<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let (key, group) = (&argv[1], argv[2].as_ref());
    let Some(s) = db.stream(key)? else { return Ok(Reply::Integer(0)) };
    let records = db.stream_records(key, &s);
    let Some(g) = records.group(group)? else { return Ok(Reply::Integer(0)) };
    let ids = argv[3..].iter().map(|a| strict_id(a)).collect::<CommandResult<Vec<_>>>()?;
    let mut batch = WriteBatch::new();
    let acked = records.ack(&mut batch, group, g, ids)?;
    if acked > 0 {
        db.commit_unsignalled(batch)?;
    }
    Ok(Reply::Integer(acked as i64))
}

pub(crate) fn xpending<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let (key, group) = (&argv[1], argv[2].as_ref());
    let summary = argv.len() == 3;
    if !summary && !(6..=9).contains(&argv.len()) {
        return Err(CommandError::Syntax);
    }
    let mut q =
        PendingQuery { start: StreamId::MIN, end: StreamId::MAX, count: 0, min_idle: 0, consumer: None };
    if !summary {
        let mut at = 3;
        if argv[3].eq_ignore_ascii_case(b"idle") {
            q.min_idle = int_arg(&argv[4])?;
            if argv.len() < 8 {
                return Err(CommandError::Syntax);
            }
            at += 2;
        }
        q.count = usize::try_from(int_arg(&argv[at + 2])?.max(0)).unwrap_or(usize::MAX);
        q.start = parse_bound(&argv[at], false)?;
        q.end = parse_bound(&argv[at + 1], true)?;
        q.consumer = argv.get(at + 3).map(|c| c.as_ref());
    }
    let (s, _) = stream_and_group(db, key, group)?;
    let records = db.stream_records(key, &s);
    if summary {
        let Some(sum) = records.pending_summary(group)? else {
            return Ok(Reply::Array(vec![Reply::Integer(0), Reply::Nil, Reply::Nil, Reply::NilArray]));
        };
        let per = sum
            .per_consumer
            .into_iter()
            .map(|(o, n)| Reply::Array(vec![Reply::Bulk(o), Reply::Bulk(Bytes::from(n.to_string()))]))
            .collect();
        return Ok(Reply::Array(vec![
            Reply::Integer(sum.count as i64),
            id_reply(sum.first),
            id_reply(sum.last),
            Reply::Array(per),
        ]));
    }
    if let Some(c) = q.consumer
        && records.consumer(group, c)?.is_none()
    {
        return Ok(Reply::Array(Vec::new()));
    }
    let now = db.now_ms() as i64;
    let found = records.pending_range(group, &q, now)?;
    Ok(Reply::Array(
        found
            .into_iter()
            .map(|(id, idle, deliveries, owner)| {
                Reply::Array(vec![
                    id_reply(id),
                    Reply::Bulk(owner),
                    Reply::Integer(idle as i64),
                    Reply::Integer(deliveries as i64),
                ])
            })
            .collect(),
    ))
}

pub(crate) fn xclaim<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let (key, group, name) = (&argv[1], argv[2].as_ref(), argv[3].as_ref());
    let (s, g) = stream_and_group(db, key, group)?;
    let min_idle =
        parse_i64(&argv[4]).ok_or_else(|| err("ERR Invalid min-idle-time argument for XCLAIM"))?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < argv.len() {
        match strict_id(&argv[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = db.now_ms() as i64;
    let args = parse_claim(argv, j, now)?;
    let (mut batch, mut created) = (WriteBatch::new(), Vec::new());
    let who = Claimant { group, g, name, min_idle, now };
    let claimed = db.stream_records(key, &s).claim(&mut batch, &mut created, who, ids, &args)?;
    commit_group_batch(db, batch, created)?;
    Ok(Reply::Array(claimed.into_iter().map(|d| delivered_reply(d, args.justid)).collect()))
}

pub(crate) fn xautoclaim<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let (key, group, name) = (&argv[1], argv[2].as_ref(), argv[3].as_ref());
    let min_idle =
        parse_i64(&argv[4]).ok_or_else(|| err("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?.max(0);
    let start = parse_bound(&argv[5], false)?;
    let (mut count, mut justid) = (100i64, false);
    let mut j = 6;
    while j < argv.len() {
        if argv[j].eq_ignore_ascii_case(b"count") && j + 1 < argv.len() {
            let max = i64::MAX / 16;
            count = parse_i64(&argv[j + 1])
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| err("ERR COUNT must be > 0"))?;
            j += 1;
        } else if argv[j].eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else {
            return Err(CommandError::Syntax);
        }
        j += 1;
    }
    let (s, g) = stream_and_group(db, key, group)?;
    let now = db.now_ms() as i64;
    let (mut batch, mut created) = (WriteBatch::new(), Vec::new());
    let who = Claimant { group, g, name, min_idle, now };
    let (next, claimed, deleted) =
        db.stream_records(key, &s).autoclaim(&mut batch, &mut created, who, start, count, justid)?;
    commit_group_batch(db, batch, created)?;
    Ok(Reply::Array(vec![
        id_reply(next),
        Reply::Array(claimed.into_iter().map(|d| delivered_reply(d, justid)).collect()),
        Reply::Array(deleted.into_iter().map(id_reply).collect()),
    ]))
}

pub(crate) fn xinfo<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let sub = argv[1].to_ascii_lowercase();
    if sub == b"help" {
        if argv.len() != 2 {
            return Err(subcommand_error(argv));
        }
        return Ok(help(&[
            "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
            "HELP",
            "    Prints this help.",
        ]));
    }
    if argv.len() < 3 {
        return Err(subcommand_error(argv));
    }
    let key = &argv[2];
    let Some(s) = db.stream(key)? else { return Err(CommandError::NoSuchKey) };
    let records = db.stream_records(key, &s);
    let bulk = |t: &'static str| Reply::Bulk(Bytes::from_static(t.as_bytes()));
    let now = db.now_ms() as i64;
    match sub.as_slice() {
        b"consumers" if argv.len() == 4 => {
            let group = argv[3].as_ref();
            if records.group(group)?.is_none() {
                return Err(no_such_group(key, group));
            }
            let consumers = records.consumers(group)?;
            Ok(Reply::Array(
                consumers
                    .into_iter()
                    .map(|(name, c)| {
                        Reply::Map(vec![
                            (bulk("name"), Reply::Bulk(name)),
                            (bulk("pending"), Reply::Integer(c.pending as i64)),
                            (bulk("idle"), Reply::Integer((now - c.seen_ms as i64).max(0))),
                        ])
                    })
                    .collect(),
            ))
        }
        b"groups" if argv.len() == 3 => {
            let groups = records.groups()?;
            Ok(Reply::Array(
                groups
                    .into_iter()
                    .map(|(name, g)| {
                        Reply::Map(vec![
                            (bulk("name"), Reply::Bulk(name)),
                            (bulk("consumers"), Reply::Integer(g.consumers as i64)),
                            (bulk("pending"), Reply::Integer(g.pending as i64)),
                            (bulk("last-delivered-id"), id_reply(g.last_delivered)),
                            (bulk("entries-read"), read_counter(&g)),
                            (bulk("lag"), lag_reply(&s, &g)),
                        ])
                    })
                    .collect(),
            ))
        }
        b"stream" => stream_info(db, argv, &s),
        _ => Err(subcommand_error(argv)),
    }
}

fn read_counter(g: &GroupValue) -> Reply {
    if g.entries_read == -1 { Reply::Nil } else { Reply::Integer(g.entries_read) }
}

fn lag_reply(s: &Stream, g: &GroupValue) -> Reply {
    s.lag(g).map_or(Reply::Nil, Reply::Integer)
}

fn stream_info<B: KvBackend>(db: &Db<B>, argv: &[Bytes], s: &Stream) -> CommandResult {
    let key = &argv[2];
    let opts = &argv[3..];
    let mut count: i64 = 10;
    let full = !opts.is_empty();
    if full {
        if (opts.len() != 1 && opts.len() != 3) || !opts[0].eq_ignore_ascii_case(b"full") {
            return Err(subcommand_error(argv));
        }
        if opts.len() == 3 {
            if !opts[1].eq_ignore_ascii_case(b"count") {
                return Err(subcommand_error(argv));
            }
            count = int_arg(&opts[2])?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let records = db.stream_records(key, s);
    let bulk = |t: &'static str| Reply::Bulk(Bytes::from_static(t.as_bytes()));
    // Redis' radix tree has one key per node of entries: the nodes `~` trimming counts
    // (see the module docs); its inner nodes have no counterpart, and are given as one more.
    let node = db.stream_node_entries().max(1);
    let keys = match s.len() {
        0 => 0,
        len => {
            let last = s.f.entries_added.saturating_sub(1);
            last / node - s.f.entries_added.saturating_sub(len) / node + 1
        }
    };
    let mut map = vec![
        (bulk("length"), Reply::Integer(s.len() as i64)),
        (bulk("radix-tree-keys"), Reply::Integer(keys as i64)),
        (bulk("radix-tree-nodes"), Reply::Integer(keys as i64 + 1)),
        (bulk("last-generated-id"), id_reply(s.f.last_generated_id)),
        (bulk("max-deleted-entry-id"), id_reply(s.f.max_deleted_entry_id)),
        (bulk("entries-added"), Reply::Integer(s.f.entries_added as i64)),
        (bulk("recorded-first-entry-id"), id_reply(s.f.first_entry_id)),
    ];
    let edge = |rev: bool| -> CommandResult<Reply> {
        let found = records.range(StreamId::MIN, StreamId::MAX, rev, 1)?;
        Ok(found.into_iter().next().map_or(Reply::Nil, entry_reply))
    };
    let groups = records.groups()?;
    if !full {
        map.push((bulk("groups"), Reply::Integer(groups.len() as i64)));
        map.push((bulk("first-entry"), edge(false)?));
        map.push((bulk("last-entry"), edge(true)?));
        return Ok(Reply::Map(map));
    }
    let limit = usize::try_from(count).unwrap_or(usize::MAX);
    map.push((bulk("entries"), entries_reply(records.range(StreamId::MIN, StreamId::MAX, false, limit)?)));
    let take = if limit == 0 { usize::MAX } else { limit };
    let mut group_replies = Vec::new();
    for (name, g) in groups {
        let pel: Vec<(StreamId, u64, u64, Bytes)> =
            records.pending(&name, StreamId::MIN)?.collect::<CommandResult<_>>()?;
        let pending = pel
            .iter()
            .take(take)
            .map(|(id, t, n, owner)| {
                Reply::Array(vec![
                    id_reply(*id),
                    Reply::Bulk(owner.clone()),
                    Reply::Integer(*t as i64),
                    Reply::Integer(*n as i64),
                ])
            })
            .collect();
        let mut consumers = Vec::new();
        for (cname, c) in records.consumers(&name)? {
            let mine: Vec<Reply> = pel
                .iter()
                .filter(|p| p.3 == cname)
                .take(take)
                .map(|(id, t, n, _)| {
                    Reply::Array(vec![id_reply(*id), Reply::Integer(*t as i64), Reply::Integer(*n as i64)])
                })
                .collect();
            consumers.push(Reply::Map(vec![
                (bulk("name"), Reply::Bulk(cname)),
                (bulk("seen-time"), Reply::Integer(c.seen_ms as i64)),
                (bulk("pel-count"), Reply::Integer(c.pending as i64)),
                (bulk("pending"), Reply::Array(mine)),
            ]));
        }
        group_replies.push(Reply::Map(vec![
            (bulk("name"), Reply::Bulk(name)),
            (bulk("last-delivered-id"), id_reply(g.last_delivered)),
            (bulk("entries-read"), read_counter(&g)),
            (bulk("lag"), lag_reply(s, &g)),
            (bulk("pel-count"), Reply::Integer(g.pending as i64)),
            (bulk("pending"), Reply::Array(pending)),
            (bulk("consumers"), Reply::Array(consumers)),
        ]));
    }
    map.push((bulk("groups"), Reply::Array(group_replies)));
    Ok(Reply::Map(map))
}
