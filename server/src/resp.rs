//! An incremental RESP2 request parser with Redis 7.0's limits and error texts.
//!
//! [`parse`] looks at the bytes received so far and returns one of: a complete command
//! (as byte ranges of its arguments plus how many bytes it used), "need more bytes", or a
//! protocol error whose text is exactly what redis-server 7.0 sends before closing the
//! connection. Multibulk (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) and inline (`GET k\r\n`,
//! with redis' quoting rules) requests are both understood.

use std::borrow::Cow;
use std::ops::Range;

/// Longest inline request, and longest `*count`/`$len` line (Redis' `PROTO_INLINE_MAX_SIZE`).
pub const INLINE_MAX: usize = 64 * 1024;
/// Largest multibulk count Redis accepts from an authenticated client (`INT_MAX`).
pub const MULTIBULK_MAX: i64 = i32::MAX as i64;
/// Largest multibulk count from a client that still has to AUTH (Redis' 10).
pub const UNAUTH_MULTIBULK_MAX: i64 = 10;
/// Largest bulk argument from a client that still has to AUTH (Redis' 16 KB).
pub const UNAUTH_BULK_MAX: i64 = 16 * 1024;

/// The limits a request is parsed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk argument: the `proto-max-bulk-len` parameter.
    pub max_bulk: i64,
    /// Whether the client may send big requests (authenticated, or no password is set).
    pub authenticated: bool,
}

impl Default for Limits {
    /// Redis' defaults: 512 MB bulks, authenticated.
    fn default() -> Self {
        Limits { max_bulk: 512 * 1024 * 1024, authenticated: true }
    }
}

/// What [`parse`] found at the start of the buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A command: its argument ranges were pushed to `args`; `consumed` bytes are used up.
    /// An empty request (`*0\r\n`, a blank inline line) has no arguments and gets no reply.
    Command {
        /// Bytes of the buffer this request occupied.
        consumed: usize,
    },
    /// An inline command whose arguments had quotes or escapes: they are owned, not ranges.
    Inline {
        /// Bytes of the buffer this request occupied.
        consumed: usize,
        /// The decoded arguments.
        args: Vec<Vec<u8>>,
    },
    /// The buffer holds no complete request yet.
    Incomplete,
}

/// A protocol error: the connection gets `-{text}\r\n` and is closed.
#[derive(Debug, PartialEq, Eq)]
pub struct ProtocolError(pub Cow<'static, str>);

impl ProtocolError {
    /// The full error line Redis sends, without the `-` and CRLF.
    pub fn text(&self) -> String {
        format!("ERR Protocol error: {}", self.0)
    }
}

/// Redis' `string2ll`: optional `-`, digits, no leading zeros, no `+`, no spaces.
fn parse_len(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
    }
    Some(if neg { -v } else { v })
}

/// Finds the `\r` ending the header line at `start`; Redis needs one more byte after it.
/// `Ok(None)` means incomplete; `too_big` is the error for a line past [`INLINE_MAX`].
fn header_line(buf: &[u8], start: usize, too_big: &'static str) -> Result<Option<usize>, ProtocolError> {
    match memchr(b'\r', &buf[start..]) {
        Some(i) if start + i + 1 < buf.len() => Ok(Some(start + i)),
        Some(_) => Ok(None),
        None if buf.len() - start > INLINE_MAX => Err(ProtocolError(Cow::Borrowed(too_big))),
        None => Ok(None),
    }
}

/// The common header line at `start`: digits without a sign or a leading zero (up to 18),
/// then `\r` and one more byte. Its number and the index of its `\r`, in one pass; `None`
/// for anything else (incomplete, signed, malformed, long), which [`header_line`] and
/// [`parse_len`] then judge as Redis does.
#[inline(always)]
fn plain_header(buf: &[u8], start: usize) -> Option<(i64, usize)> {
    // One or two digits, the headers of nearly every request, read at once.
    match buf.get(start..start + 4) {
        Some(&[d @ b'0'..=b'9', b'\r', _, _]) => return Some((i64::from(d - b'0'), start + 1)),
        Some(&[t @ b'1'..=b'9', u @ b'0'..=b'9', b'\r', _]) => {
            return Some((i64::from(t - b'0') * 10 + i64::from(u - b'0'), start + 2));
        }
        _ => {}
    }
    let mut n: i64 = 0;
    for (i, &c) in buf.iter().enumerate().skip(start) {
        match c {
            b'0'..=b'9' if i - start < 18 && !(i == start + 1 && buf[start] == b'0') => {
                n = n * 10 + i64::from(c - b'0');
            }
            b'\r' if i > start && i + 1 < buf.len() => return Some((n, i)),
            _ => return None,
        }
    }
    None
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

/// Parses one request at the start of `buf`. For [`Parsed::Command`] the argument ranges
/// (into `buf`) are appended to `args`, which the caller clears between calls.
///
/// # Errors
/// The Redis protocol error for a malformed request or one past `limits` (Redis' texts:
/// `invalid multibulk length`, `invalid bulk length`, `unauthenticated multibulk length`,
/// `unauthenticated bulk length`, …).
pub fn parse(buf: &[u8], args: &mut Vec<Range<usize>>, limits: Limits) -> Result<Parsed, ProtocolError> {
    args.clear();
    if buf.is_empty() {
        return Ok(Parsed::Incomplete);
    }
    if buf[0] != b'*' {
        return parse_inline(buf, args);
    }
    let (count, cr) = match plain_header(buf, 1) {
        Some((n, cr)) => (Some(n), cr),
        None => {
            let Some(cr) = header_line(buf, 1, "too big mbulk count string")? else {
                return Ok(Parsed::Incomplete);
            };
            (parse_len(&buf[1..cr]), cr)
        }
    };
    let count = count.filter(|&n| n <= MULTIBULK_MAX);
    let Some(count) = count else {
        return Err(ProtocolError(Cow::Borrowed("invalid multibulk length")));
    };
    if count > UNAUTH_MULTIBULK_MAX && !limits.authenticated {
        return Err(ProtocolError(Cow::Borrowed("unauthenticated multibulk length")));
    }
    let mut pos = cr + 2;
    if count <= 0 {
        return Ok(Parsed::Command { consumed: pos.min(buf.len()) });
    }
    args.reserve(usize::try_from(count).unwrap_or(0).min(1024));
    for _ in 0..count {
        if pos >= buf.len() {
            return Ok(Parsed::Incomplete);
        }
        if buf[pos] != b'$' {
            return Err(expected_dollar(buf[pos]));
        }
        let (len, cr) = match plain_header(buf, pos + 1) {
            Some((n, cr)) => (Some(n), cr),
            None => {
                let Some(cr) = header_line(buf, pos + 1, "too big bulk count string")? else {
                    return Ok(Parsed::Incomplete);
                };
                (parse_len(&buf[pos + 1..cr]), cr)
            }
        };
        let len = match len {
            Some(n) if n > UNAUTH_BULK_MAX && n <= limits.max_bulk && !limits.authenticated => {
                return Err(ProtocolError(Cow::Borrowed("unauthenticated bulk length")));
            }
            Some(n) if (0..=limits.max_bulk).contains(&n) => n as usize,
            _ => return Err(ProtocolError(Cow::Borrowed("invalid bulk length"))),
        };
        let start = cr + 2;
        // Like Redis, the two bytes after the data are skipped without being checked.
        if buf.len() < start + len + 2 {
            return Ok(Parsed::Incomplete);
        }
        args.push(start..start + len);
        pos = start + len + 2;
    }
    Ok(Parsed::Command { consumed: pos })
}

/// A bulk argument of at least this many bytes is a big one (Redis' `PROTO_MBULK_BIG_ARG`):
/// the query buffer makes room for exactly the rest of its request ([`big_arg_end`]).
pub const BIG_ARG: usize = 32 * 1024;

/// Where the request at the start of `buf` ends at the least, when `buf` holds its headers up
/// to a bulk argument of [`BIG_ARG`] bytes or more and not all of that argument's data: the
/// end of that argument and its CRLF. `None` for anything else: a complete request, one
/// still missing a header, an inline one, one that [`parse`] refuses under `limits` or one
/// whose headers take its slower path (signs, leading zeros).
pub fn big_arg_end(buf: &[u8], limits: Limits) -> Option<usize> {
    if buf.first() != Some(&b'*') || !limits.authenticated {
        return None;
    }
    let (count, cr) = plain_header(buf, 1)?;
    let mut pos = cr + 2;
    for _ in 0..count.min(MULTIBULK_MAX) {
        if buf.get(pos) != Some(&b'$') {
            return None;
        }
        let (len, cr) = plain_header(buf, pos + 1)?;
        if len > limits.max_bulk {
            return None;
        }
        let end = (cr + 2).checked_add(usize::try_from(len).ok()?)?.checked_add(2)?;
        if end > buf.len() {
            return (len as usize >= BIG_ARG).then_some(end);
        }
        pos = end;
    }
    None
}

/// Redis' "expected '$', got 'x'" (Redis prints the byte raw).
fn expected_dollar(got: u8) -> ProtocolError {
    ProtocolError(format!("expected '$', got '{}'", String::from_utf8_lossy(&[got])).into())
}

fn parse_inline(buf: &[u8], args: &mut Vec<Range<usize>>) -> Result<Parsed, ProtocolError> {
    let Some(nl) = memchr(b'\n', buf) else {
        if buf.len() > INLINE_MAX {
            return Err(ProtocolError(Cow::Borrowed("too big inline request")));
        }
        return Ok(Parsed::Incomplete);
    };
    if nl > INLINE_MAX {
        return Err(ProtocolError(Cow::Borrowed("too big inline request")));
    }
    let end = if nl > 0 && buf[nl - 1] == b'\r' { nl - 1 } else { nl };
    let line = &buf[..end];
    let consumed = nl + 1;
    if !line.iter().any(|&c| c == b'"' || c == b'\'') {
        // Fast path: plain whitespace-separated words.
        let mut i = 0;
        while i < line.len() {
            while i < line.len() && is_space(line[i]) {
                i += 1;
            }
            let start = i;
            while i < line.len() && !is_space(line[i]) {
                i += 1;
            }
            if start < i {
                args.push(start..i);
            }
        }
        return Ok(Parsed::Command { consumed });
    }
    let words = split_args(line).ok_or(ProtocolError(Cow::Borrowed("unbalanced quotes in request")))?;
    Ok(Parsed::Inline { consumed, args: words })
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c)
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Redis' `sdssplitargs`: words, "double quotes" with escapes, 'single quotes'.
/// `None` for unbalanced quotes or a closing quote not followed by a space.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Some(out);
        }
        let mut word = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq {
                let c = *line.get(i)?;
                if c == b'\\'
                    && line.get(i + 1) == Some(&b'x')
                    && let (Some(h), Some(l)) =
                        (line.get(i + 2).and_then(|&c| hex(c)), line.get(i + 3).and_then(|&c| hex(c)))
                {
                    word.push(h * 16 + l);
                    i += 4;
                    continue;
                }
                if c == b'\\' && i + 1 < line.len() {
                    word.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    if line.get(i + 1).is_some_and(|&n| !is_space(n)) {
                        return None;
                    }
                    inq = false;
                    i += 1;
                    break;
                }
                word.push(c);
                i += 1;
            } else if insq {
                let c = *line.get(i)?;
                if c == b'\\' && line.get(i + 1) == Some(&b'\'') {
                    word.push(b'\'');
                    i += 2;
                    continue;
                }
                if c == b'\'' {
                    if line.get(i + 1).is_some_and(|&n| !is_space(n)) {
                        return None;
                    }
                    insq = false;
                    i += 1;
                    break;
                }
                word.push(c);
                i += 1;
            } else {
                match line.get(i) {
                    None => break,
                    Some(&c) if is_space(c) => break,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(&c) => word.push(c),
                }
                i += 1;
            }
        }
        let _ = (inq, insq);
        out.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(buf: &[u8]) -> Result<(Vec<Vec<u8>>, usize), ProtocolError> {
        let mut ranges = Vec::new();
        match parse(buf, &mut ranges, Limits::default())? {
            Parsed::Command { consumed } => {
                Ok((ranges.iter().map(|r| buf[r.clone()].to_vec()).collect(), consumed))
            }
            Parsed::Inline { consumed, args } => Ok((args, consumed)),
            Parsed::Incomplete => Ok((vec![b"<incomplete>".to_vec()], 0)),
        }
    }

    fn ok(buf: &[u8], expect: &[&str]) {
        let (got, consumed) = words(buf).unwrap();
        let expect: Vec<Vec<u8>> = expect.iter().map(|s| s.as_bytes().to_vec()).collect();
        assert_eq!(got, expect, "{:?}", String::from_utf8_lossy(buf));
        assert!(consumed <= buf.len());
    }

    fn incomplete(buf: &[u8]) {
        assert_eq!(
            parse(buf, &mut Vec::new(), Limits::default()),
            Ok(Parsed::Incomplete),
            "{:?}",
            String::from_utf8_lossy(buf)
        );
    }

    fn error(buf: &[u8], text: &str) {
        assert_eq!(
            parse(buf, &mut Vec::new(), Limits::default()).map_err(|e| e.text()),
            Err(text.to_string())
        );
    }

    #[test]
    fn multibulk_commands_and_pipelines() {
        ok(b"*1\r\n$4\r\nPING\r\n", &["PING"]);
        ok(b"*2\r\n$4\r\necho\r\n$0\r\n\r\n", &["echo", ""]);
        ok(b"*2\r\n$3\r\nGET\r\n$3\r\na\r\n\r\n", &["GET", "a\r\n"]);
        let pipeline = b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n";
        let (first, used) = words(pipeline).unwrap();
        assert_eq!(first, vec![b"PING".to_vec()]);
        ok(&pipeline[used..], &["ECHO", "x"]);
        // Redis skips the two bytes after bulk data without checking them.
        ok(b"*1\r\n$4\r\nPINGxx", &["PING"]);
        // Empty and negative counts are empty requests, no reply.
        ok(b"*0\r\n", &[]);
        ok(b"*-1\r\n", &[]);
    }

    #[test]
    fn incomplete_at_every_split_point() {
        let full = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        for cut in 0..full.len() {
            incomplete(&full[..cut]);
        }
        ok(full, &["SET", "k", "hello"]);
        incomplete(b"PING");
        incomplete(b"*1\r");
    }

    #[test]
    fn protocol_errors_match_redis() {
        // Texts observed from redis-server 7.0.15.
        error(b"*1\r\n$x\r\n", "ERR Protocol error: invalid bulk length");
        error(b"*1\r\n$-1\r\n", "ERR Protocol error: invalid bulk length");
        error(b"*1\r\n$+4\r\nPING\r\n", "ERR Protocol error: invalid bulk length");
        error(b"*1\r\n$2147483648\r\n", "ERR Protocol error: invalid bulk length");
        error(b"*1\r\n$536870913\r\n", "ERR Protocol error: invalid bulk length");
        error(b"*1\r\n$4\nPING\r\n", "ERR Protocol error: invalid bulk length");
        error(b"*1\r\nx4\r\n", "ERR Protocol error: expected '$', got 'x'");
        error(b"*abc\r\n", "ERR Protocol error: invalid multibulk length");
        error(b"*01\r\n", "ERR Protocol error: invalid multibulk length");
        error(b"*+1\r\n", "ERR Protocol error: invalid multibulk length");
        error(b"*2147483648\r\n", "ERR Protocol error: invalid multibulk length");
        error(b"*99999999999999999999\r\n", "ERR Protocol error: invalid multibulk length");
        let mut long = b"*".to_vec();
        long.extend(std::iter::repeat_n(b'1', 70_000));
        error(&long, "ERR Protocol error: too big mbulk count string");
        let mut long = b"*1\r\n$".to_vec();
        long.extend(std::iter::repeat_n(b'1', 70_000));
        error(&long, "ERR Protocol error: too big bulk count string");
        let long = vec![b'a'; 70_000];
        error(&long, "ERR Protocol error: too big inline request");
        error(b"echo \"unbal\r\n", "ERR Protocol error: unbalanced quotes in request");
        error(b"echo 'x'y\r\n", "ERR Protocol error: unbalanced quotes in request");
        error(b"\"\r\n", "ERR Protocol error: unbalanced quotes in request");
    }

    #[test]
    fn limits_follow_the_configuration_and_authentication() {
        // Texts observed from redis-server 7.0.15 (requirepass set, before AUTH).
        let unauth = Limits { authenticated: false, ..Limits::default() };
        let text = |buf: &[u8], limits| parse(buf, &mut Vec::new(), limits).map_err(|e| e.text());
        assert_eq!(
            text(b"*11\r\n", unauth),
            Err("ERR Protocol error: unauthenticated multibulk length".into())
        );
        assert_eq!(text(b"*10\r\n", unauth), Ok(Parsed::Incomplete));
        assert_eq!(
            text(b"*2\r\n$16385\r\n", unauth),
            Err("ERR Protocol error: unauthenticated bulk length".into())
        );
        assert_eq!(text(b"*2\r\n$16384\r\n", unauth), Ok(Parsed::Incomplete));
        let small = Limits { max_bulk: 1 << 20, authenticated: true };
        assert_eq!(text(b"*1\r\n$1048577\r\n", small), Err("ERR Protocol error: invalid bulk length".into()));
        assert_eq!(text(b"*1\r\n$1048576\r\n", small), Ok(Parsed::Incomplete));
    }

    #[test]
    fn large_counts_are_not_preallocated() {
        // Redis accepts counts up to INT_MAX and waits for the data.
        incomplete(b"*2147483647\r\n");
        incomplete(b"*1\r\n$536870912\r\n");
    }

    #[test]
    fn a_big_argument_says_where_its_request_ends() {
        let limits = Limits::default();
        let big = BIG_ARG + 5;
        let mut req = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${big}\r\n").into_bytes();
        let end = req.len() + big + 2;
        // Its header is not there yet: nothing known.
        assert_eq!(big_arg_end(&req[..req.len() - 1], limits), None);
        assert_eq!(big_arg_end(&req, limits), Some(end));
        req.extend(std::iter::repeat_n(b'v', big));
        assert_eq!(big_arg_end(&req, limits), Some(end));
        req.extend_from_slice(b"\r\n");
        assert_eq!(req.len(), end);
        // Complete: parse takes it.
        assert_eq!(big_arg_end(&req, limits), None);
        incomplete(&req[..end - 1]);
        assert!(
            matches!(parse(&req, &mut Vec::new(), limits), Ok(Parsed::Command { consumed }) if consumed == end)
        );
        // A small argument, an unauthenticated client, a bulk over the limit: no room made.
        assert_eq!(big_arg_end(b"*2\r\n$3\r\nGET\r\n$32767\r\nab", limits), None);
        let unauth = Limits { authenticated: false, ..limits };
        assert_eq!(big_arg_end(b"*2\r\n$3\r\nGET\r\n$40000\r\nab", unauth), None);
        let small = Limits { max_bulk: 39_999, ..limits };
        assert_eq!(big_arg_end(b"*2\r\n$3\r\nGET\r\n$40000\r\nab", small), None);
        assert_eq!(big_arg_end(b"*2\r\n$3\r\nGET\r\n$40000\r\nab", limits), Some(21 + 40_002));
        assert_eq!(big_arg_end(b"GET k\r\n", limits), None);
    }

    #[test]
    fn inline_commands() {
        ok(b"PING\r\n", &["PING"]);
        ok(b"PING\n", &["PING"]);
        ok(b"  set   a\tb \r\n", &["set", "a", "b"]);
        ok(b"\r\n", &[]);
        ok(b"$4\r\n", &["$4"]);
        ok(b"set \"a b\" c\r\n", &["set", "a b", "c"]);
        ok(b"echo \"\\x41\\n\"\r\n", &["echo", "A\n"]);
        ok(b"echo 'it\\'s'\r\n", &["echo", "it's"]);
        ok(b"echo \"\"\r\n", &["echo", ""]);
    }

    #[test]
    fn never_panics_on_garbage() {
        let mut state = 0x1234_5678_9abc_def0_u64;
        let alphabet = b"*$\r\n0123456789-+ \"'\\xaPING";
        for _ in 0..20_000 {
            let mut buf = Vec::new();
            for _ in 0..(state % 40) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                buf.push(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            let mut args = Vec::new();
            if let Ok(Parsed::Command { consumed }) = parse(&buf, &mut args, Limits::default()) {
                assert!(consumed <= buf.len());
                assert!(args.iter().all(|r| r.end <= buf.len()));
            }
        }
    }

    #[test]
    fn the_one_pass_header_agrees_with_the_general_path() {
        let mut state = 0x0bad_cafe_1234_5678_u64;
        let alphabet = b"0123456789\r\n-+ a";
        let mut taken = 0;
        for _ in 0..100_000 {
            let mut next = |bound: u64| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % bound) as usize
            };
            // Mostly digits, then anything: the headers that come, and their near misses.
            // Half of them one or two bytes long before the rest (the headers read at once).
            let digits = if next(2) == 0 { next(3) } else { next(22) };
            let mut buf: Vec<u8> = (0..digits).map(|_| alphabet[next(10)]).collect();
            buf.extend((0..next(4)).map(|_| alphabet[next(alphabet.len() as u64)]));
            if let Some((n, cr)) = plain_header(&buf, 0) {
                taken += 1;
                assert_eq!(
                    header_line(&buf, 0, "").ok(),
                    Some(Some(cr)),
                    "{:?}",
                    buf.escape_ascii().to_string()
                );
                assert_eq!(parse_len(&buf[..cr]), Some(n), "{:?}", buf.escape_ascii().to_string());
            }
        }
        assert!(taken > 1000, "only {taken} buffers took the one-pass path");
        // What it leaves to the general path.
        for line in
            [&b"-1\r\n"[..], b"01\r\n", b"\r\n", b"12", b"12\r", b"1234567890123456789\r\n", b"1 \r\n"]
        {
            assert_eq!(plain_header(line, 0), None, "{:?}", line.escape_ascii().to_string());
        }
        for line in [&b"05\r\n"[..], b"7\r", b"42\r", b"4\n\r\n", b"-7\r\n"] {
            assert_eq!(plain_header(line, 0), None, "{:?}", line.escape_ascii().to_string());
        }
        assert_eq!(plain_header(b"0\r\n", 0), Some((0, 1)));
        assert_eq!(plain_header(b"7\r\n$", 0), Some((7, 1)));
        assert_eq!(plain_header(b"$42\r\n", 1), Some((42, 3)));
        assert_eq!(plain_header(b"10\r\n", 0), Some((10, 2)));
        assert_eq!(plain_header(b"*123456789012345678\r\n", 1), Some((123_456_789_012_345_678, 19)));
    }
}
