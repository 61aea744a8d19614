//! Parsing stream ids and the options of XADD, XTRIM, XREAD/XREADGROUP and XCLAIM.

use bytes::Bytes;

use super::core::err;
use crate::codec::StreamId;
use crate::commands::args::{int_arg, parse_i64};
use crate::commands::{CommandError, CommandResult};

const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// Parses `<ms>-<seq>`, `<ms>` (`seq` = `missing_seq`), `-` and `+` (unless `strict`), and
/// with `seq_given` the `<ms>-*` form (then `seq_given` is set to false).
pub(super) fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_given: Option<&mut bool>,
) -> CommandResult<StreamId> {
    let invalid = || err(INVALID_ID);
    if arg.len() > 127 {
        return Err(invalid());
    }
    if strict && (arg == b"-" || arg == b"+") {
        return Err(invalid());
    }
    let mut given = true;
    let id = match arg {
        b"-" => StreamId::MIN,
        b"+" => StreamId::MAX,
        _ => {
            let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
                Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
                None => (arg, None),
            };
            let ms = parse_u64(ms).ok_or_else(invalid)?;
            let seq = match seq {
                Some(b"*") if seq_given.is_some() => {
                    given = false;
                    0
                }
                Some(seq) => parse_u64(seq).ok_or_else(invalid)?,
                None => missing_seq,
            };
            StreamId { ms, seq }
        }
    };
    if let Some(flag) = seq_given {
        *flag = given;
    }
    Ok(id)
}

/// A strict id (`-` and `+` refused, a missing sequence is 0).
pub(super) fn strict_id(arg: &[u8]) -> CommandResult<StreamId> {
    parse_id(arg, 0, true, None)
}

/// Redis' `string2ull`: a non-negative `long long`, or what `strtoull` reads whole
/// (leading spaces and a `+` allowed).
fn parse_u64(s: &[u8]) -> Option<u64> {
    if let Some(v) = parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let s = s.trim_ascii_start();
    let digits = s.strip_prefix(b"+").unwrap_or(s);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// An interval bound: `(` makes it exclusive (the id after, or before for an end).
pub(super) fn parse_bound(arg: &[u8], end: bool) -> CommandResult<StreamId> {
    let missing = if end { u64::MAX } else { 0 };
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id(&arg[1..], missing, true, None)?;
        return if end {
            id.prev().ok_or_else(|| err("ERR invalid end ID for the interval"))
        } else {
            id.next().ok_or_else(|| err("ERR invalid start ID for the interval"))
        };
    }
    parse_id(arg, missing, false, None)
}

/// The trimming XADD and XTRIM ask for.
#[derive(Default)]
pub(super) struct Trim {
    pub(super) max_len: Option<u64>,
    pub(super) min_id: Option<StreamId>,
    /// `~`: whole nodes only.
    pub(super) approx: bool,
    /// `LIMIT`, given or defaulted (0: none).
    pub(super) limit: Option<u64>,
}

/// XADD's and XTRIM's options; for XADD also where its id is and the id given (with
/// whether its sequence was given, not `*`).
pub(super) struct AddArgs {
    pub(super) trim: Trim,
    pub(super) nomkstream: bool,
    pub(super) id: Option<(StreamId, bool)>,
    pub(super) id_pos: usize,
}

pub(super) fn parse_add_or_trim(argv: &[Bytes], xadd: bool) -> CommandResult<AddArgs> {
    let mut args = AddArgs { trim: Trim::default(), nomkstream: false, id: None, id_pos: argv.len() };
    let (mut approx, mut limit_given, mut limit) = (false, false, 0u64);
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        let opt = argv[i].as_ref();
        if xadd && opt == b"*" {
            break;
        } else if (opt.eq_ignore_ascii_case(b"maxlen") || opt.eq_ignore_ascii_case(b"minid")) && more > 0 {
            if args.trim.max_len.is_some() || args.trim.min_id.is_some() {
                return Err(err(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            approx = false;
            let next = argv[i + 1].as_ref();
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if opt.eq_ignore_ascii_case(b"maxlen") {
                let n = int_arg(&argv[i + 1])?;
                if n < 0 {
                    return Err(err("ERR The MAXLEN argument must be >= 0."));
                }
                args.trim.max_len = Some(n as u64);
            } else {
                args.trim.min_id = Some(strict_id(&argv[i + 1])?);
            }
            i += 1;
        } else if opt.eq_ignore_ascii_case(b"limit") && more > 0 {
            let n = int_arg(&argv[i + 1])?;
            if n < 0 {
                return Err(err("ERR The LIMIT argument must be >= 0."));
            }
            limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && opt.eq_ignore_ascii_case(b"nomkstream") {
            args.nomkstream = true;
        } else if xadd {
            let mut seq_given = true;
            let id = parse_id(opt, 0, true, Some(&mut seq_given))?;
            args.id = Some((id, seq_given));
            break;
        } else {
            return Err(CommandError::Syntax);
        }
        i += 1;
    }
    args.id_pos = i;
    let strategy = args.trim.max_len.is_some() || args.trim.min_id.is_some();
    if limit != 0 && !strategy {
        return Err(err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"));
    }
    if !xadd && !strategy {
        return Err(err("ERR syntax error, XTRIM must be called with a trimming strategy"));
    }
    if limit_given && !approx {
        return Err(err("ERR syntax error, LIMIT cannot be used without the special ~ option"));
    }
    args.trim.approx = approx;
    args.trim.limit = limit_given.then_some(limit);
    Ok(args)
}

/// XREAD's and XREADGROUP's options up to STREAMS.
pub(super) struct ReadArgs<'a> {
    /// BLOCK's milliseconds.
    pub(super) timeout: Option<i64>,
    /// COUNT (0: all).
    pub(super) count: usize,
    pub(super) count_given: bool,
    /// GROUP's group and consumer.
    pub(super) group: Option<(&'a Bytes, &'a Bytes)>,
    pub(super) noack: bool,
    /// Where the keys start.
    pub(super) streams_at: usize,
}

pub(super) fn parse_read(argv: &[Bytes], group_cmd: bool) -> CommandResult<ReadArgs<'_>> {
    let mut args =
        ReadArgs { timeout: None, count: 0, count_given: false, group: None, noack: false, streams_at: 0 };
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let o = argv[i].as_ref();
        if o.eq_ignore_ascii_case(b"block") && more > 0 {
            i += 1;
            let ms =
                parse_i64(&argv[i]).ok_or_else(|| err("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(err("ERR timeout is negative"));
            }
            args.timeout = Some(ms);
        } else if o.eq_ignore_ascii_case(b"count") && more > 0 {
            i += 1;
            args.count = usize::try_from(int_arg(&argv[i])?.max(0)).unwrap_or(usize::MAX);
            args.count_given = true;
        } else if o.eq_ignore_ascii_case(b"streams") && more > 0 {
            args.streams_at = i + 1;
            if !(argv.len() - args.streams_at).is_multiple_of(2) {
                return Err(err(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            break;
        } else if o.eq_ignore_ascii_case(b"group") && more >= 2 {
            if !group_cmd {
                return Err(err(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            args.group = Some((&argv[i + 1], &argv[i + 2]));
            i += 2;
        } else if o.eq_ignore_ascii_case(b"noack") {
            if !group_cmd {
                return Err(err(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            args.noack = true;
        } else {
            return Err(CommandError::Syntax);
        }
        i += 1;
    }
    if args.streams_at == 0 {
        return Err(CommandError::Syntax);
    }
    if group_cmd && args.group.is_none() {
        return Err(err("ERR Missing GROUP option for XREADGROUP"));
    }
    Ok(args)
}

/// XCLAIM's options after its ids.
#[derive(Default)]
pub(super) struct ClaimArgs {
    pub(super) force: bool,
    pub(super) justid: bool,
    /// RETRYCOUNT.
    pub(super) retry: Option<i64>,
    /// The delivery time IDLE or TIME asks for (unchecked).
    pub(super) time: Option<i64>,
    pub(super) last_id: StreamId,
}

/// Parses XCLAIM's options from `argv[at..]`; IDLE counts back from `now`.
pub(super) fn parse_claim(argv: &[Bytes], mut at: usize, now: i64) -> CommandResult<ClaimArgs> {
    let mut args = ClaimArgs::default();
    while at < argv.len() {
        let more = at + 1 < argv.len();
        let opt = argv[at].as_ref();
        let number = |what: &str| {
            parse_i64(&argv[at + 1])
                .ok_or_else(|| CommandError::Other(format!("ERR Invalid {what} option argument for XCLAIM")))
        };
        if opt.eq_ignore_ascii_case(b"force") {
            args.force = true;
        } else if opt.eq_ignore_ascii_case(b"justid") {
            args.justid = true;
        } else if opt.eq_ignore_ascii_case(b"idle") && more {
            args.time = Some(now - number("IDLE")?);
            at += 1;
        } else if opt.eq_ignore_ascii_case(b"time") && more {
            args.time = Some(number("TIME")?);
            at += 1;
        } else if opt.eq_ignore_ascii_case(b"retrycount") && more {
            args.retry = Some(number("RETRYCOUNT")?);
            at += 1;
        } else if opt.eq_ignore_ascii_case(b"lastid") && more {
            args.last_id = strict_id(&argv[at + 1])?;
            at += 1;
        } else {
            return Err(CommandError::Other(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                super::c_text(opt)
            )));
        }
        at += 1;
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis_does() {
        assert_eq!(parse_id(b"5", 7, false, None).unwrap(), StreamId { ms: 5, seq: 7 });
        assert_eq!(parse_id(b"5-3", 7, false, None).unwrap(), StreamId { ms: 5, seq: 3 });
        assert_eq!(parse_id(b"-", 0, false, None).unwrap(), StreamId::MIN);
        assert_eq!(parse_id(b"+", 0, false, None).unwrap(), StreamId::MAX);
        assert!(parse_id(b"+", 0, true, None).is_err());
        assert!(parse_id(b"1-*", 0, true, None).is_err());
        let mut given = true;
        assert_eq!(parse_id(b"1-*", 0, true, Some(&mut given)).unwrap(), StreamId { ms: 1, seq: 0 });
        assert!(!given);
        assert!(parse_id(b"x", 0, false, None).is_err());
        assert!(parse_id(b"1-2-3", 0, false, None).is_err());
        assert!(parse_id(b"18446744073709551616", 0, false, None).is_err());
        assert_eq!(parse_bound(b"(1-0", true).unwrap(), StreamId { ms: 0, seq: u64::MAX });
        assert!(parse_bound(b"(0-0", true).is_err());
        assert!(parse_bound(b"(18446744073709551615-18446744073709551615", false).is_err());
    }
}
