//! The sorted-set commands.
//!
//! Each member has two records, written and removed together in one batch: the member
//! record in the Subkey CF (`sub` = member, value = the 8 ordered score bytes) and the score
//! record in the Score CF (`[prefix][score 8][member]`, empty value), which orders members
//! by (score, member bytes) as Redis does. Score ranges are one Score CF range scan from the
//! encoded bound; lex ranges and ZSCAN walk the Subkey CF in member order.
//!
//! Scores are [`Reply::Double`]s, which print as Redis 7.0 prints them, `%.17g`: `0.1` is
//! `0.10000000000000001` (Redis 7.2 would print `0.1`). `-0` is stored as `0` (see
//! [`crate::codec::encode_f64`]), as the real 7.0 server shows it for small sets; replies
//! computed without storing (ZADD INCR on a new member, ZUNION) print `-0` like Redis.
//!
//! The blocking pops (BZPOPMIN, BZPOPMAX, BZMPOP) serve at once when a key holds a zset,
//! else block on their keys ([`crate::commands::Block`]), or inside MULTI answer the nil array.

mod core;
mod parse;
mod read;
mod setops;
mod write;

use bytes::Bytes;

pub use self::core::ScoredMember;
pub(crate) use self::core::ZKey;
use self::parse::{lex_range, score_range};
use crate::backend::KvBackend;
use crate::codec::RedisType;
use crate::commands::args::int_arg;
use crate::commands::args::{check_pairs_count, cursor_arg, float_arg, random_count_arg, timeout_arg};
use crate::commands::{CommandError, CommandResult, Db, Reply};

/// The largest `|count|` ZRANDMEMBER accepts for a negative count (members may repeat):
/// a library limit, since such a reply is built in memory.
pub const MAX_RANDOM_REPEATS: i64 = 1 << 24;

/// One end of a score range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreBound {
    /// The bound's score (`-inf` and `inf` allowed, never NaN).
    pub(crate) value: f64,
    /// Whether the bound itself is excluded (`(1.5`).
    pub(crate) exclusive: bool,
}

/// A score range `min..max`, each end inclusive or exclusive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreRange {
    /// The low end.
    pub(crate) min: ScoreBound,
    /// The high end.
    pub(crate) max: ScoreBound,
}

/// One end of a lex range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: before every member.
    Min,
    /// `+`: after every member.
    Max,
    /// `[member`.
    Inclusive(Bytes),
    /// `(member`.
    Exclusive(Bytes),
}

/// A lex range over member bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexRange {
    /// The low end.
    pub(crate) min: LexBound,
    /// The high end.
    pub(crate) max: LexBound,
}

/// What a range selects.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeSpec {
    /// Positions `start..=stop` (negative counts from the end), as in ZRANGE.
    Rank {
        /// First position.
        start: i64,
        /// Last position.
        stop: i64,
    },
    /// Members with a score in the range (BYSCORE).
    Score(ScoreRange),
    /// Members in the lex range (BYLEX).
    Lex(LexRange),
}

/// A ZRANGE query.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeQuery {
    /// What to select; for score and lex ranges `min` is always the low end, even with `rev`.
    pub(crate) spec: RangeSpec,
    /// Highest first (REV); rank positions then count from the highest.
    pub(crate) rev: bool,
    /// LIMIT offset count (score and lex ranges): a negative offset selects nothing, a
    /// negative count means no limit.
    pub(crate) limit: Option<(i64, i64)>,
}

/// ZADD's options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZAddFlags {
    /// Only add new members.
    pub(crate) nx: bool,
    /// Only update existing members.
    pub(crate) xx: bool,
    /// Only update when the new score is greater.
    pub(crate) gt: bool,
    /// Only update when the new score is less.
    pub(crate) lt: bool,
    /// Count changed members in the reply, not just added ones.
    pub(crate) ch: bool,
    /// Increment instead of set (one pair only); the reply is the new score.
    pub(crate) incr: bool,
}

/// What ZADD did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ZAddOutcome {
    /// Members added.
    pub(crate) added: i64,
    /// Existing members whose score changed.
    pub(crate) updated: i64,
    /// With INCR: the member's new score, `None` when NX/XX/GT/LT skipped it. Otherwise the
    /// score of the last pair applied.
    pub(crate) score: Option<f64>,
}

/// ZUNION/ZINTER AGGREGATE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Aggregate {
    /// Sum of the weighted scores (the default).
    #[default]
    Sum,
    /// Smallest weighted score.
    Min,
    /// Largest weighted score.
    Max,
}

/// Which set operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOp {
    /// ZUNION.
    Union,
    /// ZINTER.
    Inter,
    /// ZDIFF: the first input minus the others.
    Diff,
}

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A score: a RESP3 double (a `%.17g` bulk string in RESP2).
fn score_reply(score: f64) -> Reply {
    Reply::Double(score)
}

/// Members, or `[member, score]` pairs (flat in RESP2) `withscores`.
fn items_reply(items: Vec<ScoredMember>, withscores: bool) -> Reply {
    if withscores {
        Reply::Pairs(items.into_iter().map(|(m, s)| (Reply::Bulk(m), score_reply(s))).collect())
    } else {
        Reply::bulks(items.into_iter().map(|(m, _)| m))
    }
}

pub(crate) fn zadd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let mut flags = ZAddFlags::default();
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        if is(a, "nx") {
            flags.nx = true;
        } else if is(a, "xx") {
            flags.xx = true;
        } else if is(a, "ch") {
            flags.ch = true;
        } else if is(a, "incr") {
            flags.incr = true;
        } else if is(a, "gt") {
            flags.gt = true;
        } else if is(a, "lt") {
            flags.lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let elements = argv.len() - i;
    if elements == 0 || !elements.is_multiple_of(2) {
        return Err(CommandError::Syntax);
    }
    flags.validate(elements / 2)?;
    let out = if let [score, member] = &argv[i..] {
        // One pair (the common case): no list of pairs.
        db.zadd(&argv[1], flags, &[(float_arg(score)?, member)])?
    } else {
        let pairs =
            argv[i..].chunks(2).map(|p| Ok((float_arg(&p[0])?, &p[1]))).collect::<CommandResult<Vec<_>>>()?;
        db.zadd(&argv[1], flags, &pairs)?
    };
    Ok(if flags.incr {
        out.score.map_or(Reply::Nil, score_reply)
    } else {
        Reply::Integer(out.added + if flags.ch { out.updated } else { 0 })
    })
}

pub(crate) fn zincrby<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let incr = float_arg(&argv[2])?;
    db.zincrby(&argv[1], incr, &argv[3]).map(score_reply)
}

pub(crate) fn zrem<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.zrem(&argv[1], &argv[2..]).map(Reply::Integer)
}

pub(crate) fn zcard<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.zcard(&argv[1])? as i64))
}

pub(crate) fn zscore<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(db.zscore(&argv[1], &argv[2])?.map_or(Reply::Nil, score_reply))
}

pub(crate) fn zmscore<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let scores = db.zmscore(&argv[1], &argv[2..])?;
    Ok(Reply::Array(scores.into_iter().map(|s| s.map_or(Reply::Nil, score_reply)).collect()))
}

pub(crate) fn zcount<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let range = score_range(&argv[2], &argv[3])?;
    db.zcount(&argv[1], &range).map(Reply::Integer)
}

pub(crate) fn zlexcount<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let range = lex_range(&argv[2], &argv[3])?;
    db.zlexcount(&argv[1], &range).map(Reply::Integer)
}

/// Which range a ZRANGE-like command reads: by rank, score or lex, or as its options say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Auto,
    Rank,
    Score,
    Lex,
}

/// Redis' `zrangeGenericCommand`: options, then conflicts, then the range, then the key.
pub(crate) fn range_cmd<B: KvBackend>(
    db: &mut Db<B>,
    argv: &[Bytes],
    key_idx: usize,
    store: bool,
    mut kind: Kind,
    fixed_rev: Option<bool>,
) -> CommandResult {
    let mut withscores = false;
    let mut limit: Option<(i64, i64)> = None;
    let mut rev = fixed_rev.unwrap_or(false);
    let mut j = key_idx + 3;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        let a = &argv[j];
        if !store && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            limit = Some((int_arg(&argv[j + 1])?, int_arg(&argv[j + 2])?));
            j += 2;
        } else if fixed_rev.is_none() && !rev && is(a, "rev") {
            rev = true;
        } else if kind == Kind::Auto && is(a, "bylex") {
            kind = Kind::Lex;
        } else if kind == Kind::Auto && is(a, "byscore") {
            kind = Kind::Score;
        } else {
            return Err(CommandError::Syntax);
        }
        j += 1;
    }
    if kind == Kind::Auto {
        kind = Kind::Rank;
    }
    if kind == Kind::Rank && limit.is_some_and(|(_, count)| count != -1) {
        return Err(CommandError::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && kind == Kind::Lex {
        return Err(CommandError::err("syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (mut lo, mut hi) = (&argv[key_idx + 1], &argv[key_idx + 2]);
    if rev && kind != Kind::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let spec = match kind {
        Kind::Score => RangeSpec::Score(score_range(lo, hi)?),
        Kind::Lex => RangeSpec::Lex(lex_range(lo, hi)?),
        _ => RangeSpec::Rank { start: int_arg(lo)?, stop: int_arg(hi)? },
    };
    let query = RangeQuery { spec, rev, limit: if kind == Kind::Rank { None } else { limit } };
    if store {
        db.zrangestore(&argv[1], &argv[2], &query).map(Reply::Integer)
    } else {
        Ok(items_reply(db.zrange(&argv[key_idx], &query)?, withscores))
    }
}

pub(crate) fn zrank<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], rev: bool) -> CommandResult {
    Ok(db.zrank(&argv[1], &argv[2], rev)?.map_or(Reply::Nil, Reply::Integer))
}

pub(crate) fn zremrange<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], kind: Kind) -> CommandResult {
    let spec = match kind {
        Kind::Score => RangeSpec::Score(score_range(&argv[2], &argv[3])?),
        Kind::Lex => RangeSpec::Lex(lex_range(&argv[2], &argv[3])?),
        _ => RangeSpec::Rank { start: int_arg(&argv[2])?, stop: int_arg(&argv[3])? },
    };
    db.zremrange(&argv[1], &spec).map(Reply::Integer)
}

/// Redis' `getPositiveLongFromObjectOrReply` / `getRangeLongFromObjectOrReply`.
fn ranged_long(arg: &[u8], min: i64, message: &str) -> CommandResult<i64> {
    match crate::commands::args::parse_i64(arg) {
        Some(n) if n >= min => Ok(n),
        _ => Err(CommandError::err(message)),
    }
}

pub(crate) fn zpop<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], max: bool) -> CommandResult {
    if argv.len() > 3 {
        return Err(CommandError::Syntax);
    }
    let Some(count) = argv.get(2) else {
        // Without a count Redis answers one flat `[member, score]` in both protocols.
        let popped = db.zpop(&argv[1], max, 1)?;
        return Ok(Reply::Array(
            popped.into_iter().flat_map(|(m, s)| [Reply::Bulk(m), score_reply(s)]).collect(),
        ));
    };
    let count = ranged_long(count, 0, "value is out of range, must be positive")? as usize;
    Ok(items_reply(db.zpop(&argv[1], max, count)?, true))
}

fn mpop_reply(popped: Option<(Bytes, Vec<ScoredMember>)>) -> Reply {
    match popped {
        None => Reply::NilArray,
        Some((key, items)) => Reply::Array(vec![
            Reply::Bulk(key),
            Reply::Array(
                items.into_iter().map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), score_reply(s)])).collect(),
            ),
        ]),
    }
}

/// ZMPOP (`numkeys_idx` 1).
pub(crate) fn zmpop<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], numkeys_idx: usize) -> CommandResult {
    let (keys, max, count) = parse_zmpop(argv, numkeys_idx)?;
    Ok(mpop_reply(db.zmpop(keys, max, count)?))
}

/// Redis' `zmpopGenericCommand` arguments from `numkeys_idx`: the keys, MAX, the count.
fn parse_zmpop(argv: &[Bytes], numkeys_idx: usize) -> CommandResult<(&[Bytes], bool, usize)> {
    let numkeys = ranged_long(&argv[numkeys_idx], 1, "numkeys should be greater than 0")? as usize;
    let where_idx = numkeys_idx.saturating_add(numkeys).saturating_add(1);
    if where_idx >= argv.len() {
        return Err(CommandError::Syntax);
    }
    let max = if is(&argv[where_idx], "min") {
        false
    } else if is(&argv[where_idx], "max") {
        true
    } else {
        return Err(CommandError::Syntax);
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < argv.len() {
        if count.is_none() && is(&argv[j], "count") && j + 1 < argv.len() {
            count = Some(ranged_long(&argv[j + 1], 1, "count should be greater than 0")? as usize);
            j += 2;
        } else {
            return Err(CommandError::Syntax);
        }
    }
    Ok((&argv[numkeys_idx + 1..where_idx], max, count.unwrap_or(1)))
}

pub(crate) fn bzpop<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], max: bool) -> CommandResult {
    let last = argv.len() - 1;
    let timeout = timeout_arg(&argv[last])?;
    Ok(match db.zmpop(&argv[1..last], max, 1)? {
        Some((key, items)) if !items.is_empty() => {
            let (member, score) = items.into_iter().next().expect("one item");
            Reply::Array(vec![Reply::Bulk(key), Reply::Bulk(member), score_reply(score)])
        }
        _ => db.would_block(&argv[1..last], timeout, Reply::NilArray, Reply::NilArray),
    })
}

pub(crate) fn bzmpop<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    // Redis parses numkeys, MIN|MAX and COUNT before the timeout.
    let (keys, max, count) = parse_zmpop(argv, 2)?;
    let timeout = timeout_arg(&argv[1])?;
    Ok(match db.zmpop(keys, max, count)? {
        Some(popped) => mpop_reply(Some(popped)),
        None => db.would_block(keys, timeout, Reply::NilArray, Reply::NilArray),
    })
}

pub(crate) fn zrandmember<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    if argv.len() == 2 {
        return Ok(Reply::bulk_or_nil(db.zrandmember_one(&argv[1])?));
    }
    let count = random_count_arg(&argv[2])?;
    if argv.len() > 4 || (argv.len() == 4 && !is(&argv[3], "withscores")) {
        return Err(CommandError::Syntax);
    }
    let withscores = argv.len() == 4;
    if count < -MAX_RANDOM_REPEATS {
        // Redis would try to build the reply (and a real 7.0.15 server dies on
        // `ZRANDMEMBER z -9223372036854775807`); the library refuses instead.
        return Err(CommandError::err("value is out of range"));
    }
    check_pairs_count(count, withscores)?;
    Ok(items_reply(db.zrandmember(&argv[1], count)?, withscores))
}

/// Checks the inputs' types as Redis does before parsing the options.
fn check_setop_types<B: KvBackend>(db: &Db<B>, keys: &[Bytes]) -> CommandResult<()> {
    for key in keys {
        if let Some(e) = db.lookup(key)?
            && !matches!(e.meta.ty, RedisType::ZSet | RedisType::Set)
        {
            return Err(CommandError::WrongType);
        }
    }
    Ok(())
}

/// Redis' `zunionInterDiffGenericCommand`.
pub(crate) fn setop_cmd<B: KvBackend>(
    db: &mut Db<B>,
    argv: &[Bytes],
    op: SetOp,
    store: bool,
) -> CommandResult {
    let numkeys_idx = if store { 2 } else { 1 };
    let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
    let numkeys = int_arg(&argv[numkeys_idx])?;
    if numkeys < 1 {
        return Err(CommandError::err(format!("at least 1 input key is needed for '{name}' command")));
    }
    if numkeys as u64 > (argv.len() - numkeys_idx - 1) as u64 {
        return Err(CommandError::Syntax);
    }
    let first = numkeys_idx + 1;
    let keys = &argv[first..first + numkeys as usize];
    check_setop_types(db, keys)?;
    let mut weights: Option<Vec<f64>> = None;
    let mut how = Aggregate::Sum;
    let mut withscores = false;
    let mut j = first + keys.len();
    while j < argv.len() {
        let remaining = argv.len() - j;
        if op != SetOp::Diff && remaining > keys.len() && is(&argv[j], "weights") {
            let w = argv[j + 1..j + 1 + keys.len()]
                .iter()
                .map(|a| {
                    crate::commands::args::parse_f64(a)
                        .ok_or_else(|| CommandError::err("weight value is not a float"))
                })
                .collect::<CommandResult<Vec<_>>>()?;
            weights = Some(w);
            j += 1 + keys.len();
        } else if op != SetOp::Diff && remaining >= 2 && is(&argv[j], "aggregate") {
            let a = &argv[j + 1];
            how = if is(a, "sum") {
                Aggregate::Sum
            } else if is(a, "min") {
                Aggregate::Min
            } else if is(a, "max") {
                Aggregate::Max
            } else {
                return Err(CommandError::Syntax);
            };
            j += 2;
        } else if !store && is(&argv[j], "withscores") {
            withscores = true;
            j += 1;
        } else {
            return Err(CommandError::Syntax);
        }
    }
    if store {
        db.zsetop_store(&argv[1], op, keys, weights.as_deref(), how).map(Reply::Integer)
    } else {
        Ok(items_reply(db.zsetop(op, keys, weights.as_deref(), how)?, withscores))
    }
}

pub(crate) fn zintercard<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let numkeys = int_arg(&argv[1])?;
    if numkeys < 1 {
        return Err(CommandError::err("at least 1 input key is needed for 'zintercard' command"));
    }
    if numkeys as u64 > (argv.len() - 2) as u64 {
        return Err(CommandError::Syntax);
    }
    let keys = &argv[2..2 + numkeys as usize];
    check_setop_types(db, keys)?;
    let mut limit = 0u64;
    let mut j = 2 + keys.len();
    while j < argv.len() {
        if argv.len() - j >= 2 && is(&argv[j], "limit") {
            limit = ranged_long(&argv[j + 1], 0, "LIMIT can't be negative")? as u64;
            j += 2;
        } else {
            return Err(CommandError::Syntax);
        }
    }
    Ok(Reply::Integer(db.zintercard(keys, limit)? as i64))
}

pub(crate) fn zscan<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let cursor = cursor_arg(&argv[2])?;
    let empty = || Reply::Array(vec![Reply::bulk(b"0"), Reply::Array(Vec::new())]);
    if db.lookup_of(&argv[1], RedisType::ZSet)?.is_none() {
        return Ok(empty());
    }
    let mut count = 10usize;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 3;
    while i < argv.len() {
        let left = argv.len() - i;
        if is(&argv[i], "count") && left >= 2 {
            let n = int_arg(&argv[i + 1])?;
            if n < 1 {
                return Err(CommandError::Syntax);
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else if is(&argv[i], "match") && left >= 2 {
            pattern = if argv[i + 1].as_ref() == b"*" { None } else { Some(&argv[i + 1]) };
            i += 2;
        } else {
            return Err(CommandError::Syntax);
        }
    }
    let (next, items) = db.zscan(&argv[1], cursor, pattern, count)?;
    // ZSCAN's scores are bulk strings in both protocols (Redis 7.0).
    let items = items
        .into_iter()
        .flat_map(|(m, s)| [Reply::Bulk(m), Reply::Bulk(Bytes::from(crate::commands::args::format_g17(s)))])
        .collect();
    Ok(Reply::Array(vec![Reply::Bulk(Bytes::from(next.to_string())), Reply::Array(items)]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemoryBackend;

    #[test]
    fn typed_api() {
        let mut db = Db::new(MemoryBackend::new());
        let pairs = [
            (1.0, Bytes::from_static(b"a")),
            (2.0, Bytes::from_static(b"b")),
            (3.0, Bytes::from_static(b"c")),
        ];
        let out = db.zadd(b"z", ZAddFlags::default(), &pairs).unwrap();
        assert_eq!((out.added, out.updated), (3, 0));
        let out =
            db.zadd(b"z", ZAddFlags { xx: true, ch: true, ..ZAddFlags::default() }, &pairs[..1]).unwrap();
        assert_eq!((out.added, out.updated), (0, 0));
        let range = ScoreRange {
            min: ScoreBound { value: 1.0, exclusive: true },
            max: ScoreBound { value: f64::INFINITY, exclusive: false },
        };
        let q = RangeQuery { spec: RangeSpec::Score(range), rev: true, limit: Some((0, 1)) };
        assert_eq!(db.zrange(b"z", &q).unwrap(), vec![(Bytes::from_static(b"c"), 3.0)]);
        assert_eq!(db.zcount(b"z", &range).unwrap(), 2);
        let keys = [Bytes::from_static(b"z"), Bytes::from_static(b"z")];
        let union = db.zsetop(SetOp::Union, &keys, Some(&[1.0, 2.0]), Aggregate::Max).unwrap();
        assert_eq!(union.iter().map(|(_, s)| *s).collect::<Vec<_>>(), [2.0, 4.0, 6.0]);
        assert_eq!(db.zscore(b"z", b"c").unwrap(), Some(3.0));
        assert_eq!(db.zrank(b"z", b"c", false).unwrap(), Some(2));
    }
}
