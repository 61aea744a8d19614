//! [`Reply`]: a RESP3 value, and its wire encoding in RESP3 or folded to RESP2 as Redis 7.0
//! folds each kind.
//!
//! | kind | RESP3 | RESP2 |
//! |---|---|---|
//! | [`Reply::Map`] | `%n` then n key/value pairs | `*2n`, the pairs flattened |
//! | [`Reply::Set`] | `~n` | `*n` |
//! | [`Reply::Double`] | `,<%.17g>` (`,inf`, `,-inf`) | a bulk string of the same text |
//! | [`Reply::DoubleText`] | `,text` | a bulk string of the text |
//! | [`Reply::Boolean`] | `#t` / `#f` | `:1` / `:0` |
//! | [`Reply::BigNumber`] | `(digits` | a bulk string |
//! | [`Reply::Verbatim`] | `=len` then `txt:` and the text | a bulk string of the text |
//! | [`Reply::Push`] | `>n` | `*n` |
//! | [`Reply::Nil`], [`Reply::NilArray`] | `_` | `$-1`, `*-1` |
//! | [`Reply::Pairs`] | `*n` of `*2` pairs | `*2n`, the pairs flattened |
//! | [`Reply::PairMap`] | `%n` then n key/value pairs | `*n` of `*2` pairs |
//!
//! # Where the protocol lives
//!
//! A command builds one [`Reply`], the RESP3 value Redis 7.0 sends after `HELLO 3`, without
//! knowing its client's protocol; every RESP2 difference is a fold rule of [`Reply::write`]
//! above. The [`super::Db`] never learns the protocol. So one reply serves every place a
//! reply is made before it is known who reads it — EXEC's queue, a blocked command re-run
//! for a woken client, [`super::Db::run`] in tests — and the protocol is one argument of one
//! function. Redis' only protocol test that is not a kind of value — `WITHSCORES` /
//! `WITHVALUES` answering `[member, score]` pairs in RESP3 and a flat array in RESP2 — is the
//! [`Reply::Pairs`] kind, folded like a map but sent as an array of pairs.

use std::borrow::Cow;

use bytes::Bytes;

use super::args::format_g17;
use super::error::CommandError;

/// What a command handler returns.
pub type CommandResult<T = Reply> = Result<T, CommandError>;

/// Which protocol a client speaks (`HELLO 2` / `HELLO 3`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2, every client's default.
    #[default]
    Resp2,
    /// RESP3.
    Resp3,
}

/// A command's answer, mirroring the RESP3 value kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+text` — a simple string such as `OK` or `PONG`.
    Status(Cow<'static, str>),
    /// `-text` — an error; the text starts with its code (`ERR`, `WRONGTYPE`…).
    Error(String),
    /// `:n`.
    Integer(i64),
    /// `$len` then the bytes.
    Bulk(Bytes),
    /// `$-1` — the nil bulk string.
    Nil,
    /// `*len` then the elements.
    Array(Vec<Reply>),
    /// `*-1` — the nil array.
    NilArray,
    /// A map: field/value pairs in order (HGETALL, CONFIG GET, HELLO).
    Map(Vec<(Reply, Reply)>),
    /// A set: unordered distinct elements (SMEMBERS, SINTER…).
    Set(Vec<Reply>),
    /// A double (ZSCORE, ZINCRBY…).
    Double(f64),
    /// A double already printed, as Redis' `addReplyHumanLongDouble` prints it (GEOPOS
    /// coordinates): `,text` in RESP3, a bulk string of the text in RESP2.
    DoubleText(Bytes),
    /// A boolean.
    Boolean(bool),
    /// An integer too large for `i64`, as decimal digits.
    BigNumber(String),
    /// Text with a three-letter format (`txt`, `mkd`): INFO, CLIENT LIST under RESP3.
    Verbatim {
        /// The format, e.g. `*b"txt"`.
        format: [u8; 3],
        /// The text.
        text: Bytes,
    },
    /// An out-of-band message (pub/sub, invalidation).
    Push(Vec<Reply>),
    /// `[a, b]` pairs: an array of two-element arrays in RESP3, one flat array `a b a b …`
    /// in RESP2 (ZRANGE … WITHSCORES, ZPOPMIN with a count, HRANDFIELD … WITHVALUES).
    Pairs(Vec<(Reply, Reply)>),
    /// A map in RESP3, an array of `[key, value]` pairs in RESP2 (XREAD, XREADGROUP).
    PairMap(Vec<(Reply, Reply)>),
}

// Replies are compared in tests; a NaN double is never a reply (Redis refuses NaN scores).
impl Eq for Reply {}

impl Reply {
    /// `+OK`.
    pub const OK: Reply = Reply::Status(Cow::Borrowed("OK"));

    /// A status reply with static text.
    pub const fn status(text: &'static str) -> Reply {
        Reply::Status(Cow::Borrowed(text))
    }

    /// A bulk reply copying `bytes`.
    pub fn bulk(bytes: &[u8]) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(bytes))
    }

    /// A bulk reply holding the decimal text of `n`.
    pub fn bulk_int(n: i64) -> Reply {
        Reply::Bulk(Bytes::from(n.to_string()))
    }

    /// A bulk reply, or nil for `None`.
    pub fn bulk_or_nil(bytes: Option<Bytes>) -> Reply {
        bytes.map_or(Reply::Nil, Reply::Bulk)
    }

    /// An array of bulk replies.
    pub fn bulks<I, T>(items: I) -> Reply
    where
        I: IntoIterator<Item = T>,
        T: Into<Bytes>,
    {
        Reply::Array(items.into_iter().map(|b| Reply::Bulk(b.into())).collect())
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the RESP2 encoding: `+OK\r\n`, `-ERR …\r\n`, `:1\r\n`, `$3\r\nfoo\r\n`,
    /// `$-1\r\n`, `*2\r\n…`, `*-1\r\n`.
    ///
    /// Status and error lines have every CR and LF replaced by a space, as Redis 7.0 does:
    /// their text often quotes client arguments, and a raw line break there would let a client
    /// forge the replies that follow. Bulk strings stay binary-safe.
    pub fn write_resp(&self, out: &mut Vec<u8>) {
        self.write(Protocol::Resp2, out);
    }

    /// Appends the encoding in `protocol`: RESP3 as is, or folded to RESP2 as the module
    /// docs' table says. Status and error lines are sanitized as in [`Reply::write_resp`].
    pub fn write(&self, protocol: Protocol, out: &mut Vec<u8>) {
        fn line(out: &mut Vec<u8>, prefix: u8, text: &[u8]) {
            out.push(prefix);
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
        fn safe_line(out: &mut Vec<u8>, prefix: u8, text: &[u8]) {
            // Nearly every line is clean (OK, QUEUED, an error text): copied whole.
            if !text.iter().any(|&b| b == b'\r' || b == b'\n') {
                return line(out, prefix, text);
            }
            out.push(prefix);
            out.extend(text.iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
            out.extend_from_slice(b"\r\n");
        }
        match self {
            // The commonest status whole, with no scan of its text.
            Reply::Status(s) if s == "OK" => out.extend_from_slice(b"+OK\r\n"),
            Reply::Status(s) => safe_line(out, b'+', s.as_bytes()),
            Reply::Error(e) => safe_line(out, b'-', e.as_bytes()),
            Reply::Integer(n) => line(out, b':', decimal(*n, &mut [0; 20])),
            Reply::Bulk(b) => bulk(out, b'$', b),
            Reply::Nil | Reply::NilArray if protocol == Protocol::Resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => aggregate(out, protocol, b'*', items),
            Reply::Set(items) => {
                aggregate(out, protocol, if protocol == Protocol::Resp3 { b'~' } else { b'*' }, items)
            }
            Reply::Push(items) => {
                aggregate(out, protocol, if protocol == Protocol::Resp3 { b'>' } else { b'*' }, items)
            }
            Reply::Map(pairs) | Reply::Pairs(pairs) | Reply::PairMap(pairs) => {
                // Whether the protocol sends a map (else an array), and each pair as `*2`.
                let (map, nested) = match (self, protocol) {
                    (Reply::Map(_), Protocol::Resp3) | (Reply::PairMap(_), Protocol::Resp3) => (true, false),
                    (Reply::Map(_), Protocol::Resp2) | (Reply::Pairs(_), Protocol::Resp2) => (false, false),
                    _ => (false, true),
                };
                let len = if map || nested { pairs.len() } else { 2 * pairs.len() };
                line(out, if map { b'%' } else { b'*' }, decimal(len as i64, &mut [0; 20]));
                for (k, v) in pairs {
                    if nested {
                        out.extend_from_slice(b"*2\r\n");
                    }
                    k.write(protocol, out);
                    v.write(protocol, out);
                }
            }
            Reply::Double(x) => match protocol {
                Protocol::Resp3 => line(out, b',', format_g17(*x).as_bytes()),
                Protocol::Resp2 => bulk(out, b'$', format_g17(*x).as_bytes()),
            },
            Reply::DoubleText(text) => match protocol {
                Protocol::Resp3 => safe_line(out, b',', text),
                Protocol::Resp2 => bulk(out, b'$', text),
            },
            Reply::Boolean(b) => match protocol {
                Protocol::Resp3 => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
                Protocol::Resp2 => out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
            },
            Reply::BigNumber(digits) => match protocol {
                Protocol::Resp3 => safe_line(out, b'(', digits.as_bytes()),
                Protocol::Resp2 => bulk(out, b'$', digits.as_bytes()),
            },
            Reply::Verbatim { format, text } => match protocol {
                Protocol::Resp3 => {
                    line(out, b'=', decimal(text.len() as i64 + 4, &mut [0; 20]));
                    out.extend_from_slice(format);
                    out.push(b':');
                    out.extend_from_slice(text);
                    out.extend_from_slice(b"\r\n");
                }
                Protocol::Resp2 => bulk(out, b'$', text),
            },
        }
    }
}

/// `$len\r\n` then the bytes and `\r\n`.
fn bulk(out: &mut Vec<u8>, prefix: u8, bytes: &[u8]) {
    let mut digits = [0; 20];
    let len = decimal(bytes.len() as i64, &mut digits);
    // One capacity check for the whole reply; a one-digit length without a copy call.
    out.reserve(len.len() + bytes.len() + 5);
    out.push(prefix);
    match len {
        [digit] => out.push(*digit),
        _ => out.extend_from_slice(len),
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// `<prefix>n\r\n` then each item.
fn aggregate(out: &mut Vec<u8>, protocol: Protocol, prefix: u8, items: &[Reply]) {
    out.push(prefix);
    out.extend_from_slice(decimal(items.len() as i64, &mut [0; 20]));
    out.extend_from_slice(b"\r\n");
    for item in items {
        item.write(protocol, out);
    }
}

/// The decimal text of `n`, written into `buf` without allocating: two digits per division,
/// from a table of the hundred pairs.
pub(crate) fn decimal(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let pair = |r: u64| {
        let at = 2 * r as usize;
        [PAIRS[at], PAIRS[at + 1]]
    };
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    while v >= 100 {
        i -= 2;
        buf[i..i + 2].copy_from_slice(&pair(v % 100));
        v /= 100;
    }
    if v >= 10 {
        i -= 2;
        buf[i..i + 2].copy_from_slice(&pair(v));
    } else {
        i -= 1;
        buf[i] = b'0' + v as u8;
    }
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_writes_every_digit_count_and_both_ends() {
        // Every pair of digits, at every place of a three-digit number, and both signs.
        let mut cases: Vec<i64> = (-1000..=1000).collect();
        cases.extend([i64::MIN, i64::MAX, i64::MIN + 1]);
        for digits in 1..19 {
            let p = 10i64.pow(digits);
            cases.extend([p - 1, p, p + 1, -(p - 1), -p, -(p + 1)]);
        }
        for n in cases {
            assert_eq!(decimal(n, &mut [0; 20]), n.to_string().as_bytes(), "{n}");
        }
    }

    #[test]
    fn resp_encoding() {
        let mut out = Vec::new();
        for r in [
            Reply::OK,
            Reply::Error("ERR x".into()),
            Reply::Integer(i64::MIN),
            Reply::Integer(0),
            Reply::Integer(42),
            Reply::bulk(b""),
            Reply::Nil,
            Reply::Array(vec![Reply::bulk(b"ab"), Reply::Integer(-7)]),
            Reply::NilArray,
        ] {
            r.write_resp(&mut out);
        }
        let want = "+OK\r\n-ERR x\r\n:-9223372036854775808\r\n:0\r\n:42\r\n$0\r\n\r\n$-1\r\n\
                    *2\r\n$2\r\nab\r\n:-7\r\n*-1\r\n";
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn line_breaks_in_status_and_error_lines_become_spaces() {
        let mut out = Vec::new();
        Reply::Error("ERR unknown command 'FOO', with args beginning with: 'a\nb\r\nc' ".into())
            .write_resp(&mut out);
        Reply::Status("x\r\n$4\r\nfake".into()).write_resp(&mut out);
        Reply::bulk(b"a\r\nb").write_resp(&mut out);
        let want = "-ERR unknown command 'FOO', with args beginning with: 'a b  c' \r\n\
                    +x  $4  fake\r\n$4\r\na\r\nb\r\n";
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    /// Each RESP3 kind in both protocols; the RESP3 bytes are what redis-server 7.0.15 sends
    /// after `HELLO 3` (HGETALL, ZSCORE of 1.5 and inf, SMEMBERS of nothing, GET of nothing,
    /// INFO cluster).
    #[test]
    fn resp3_kinds_and_their_resp2_folding() {
        let cases: Vec<(Reply, &str, &str)> = vec![
            (
                Reply::Map(vec![
                    (Reply::bulk(b"a"), Reply::bulk(b"1")),
                    (Reply::bulk(b"b"), Reply::bulk(b"2")),
                ]),
                "%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n",
                "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n",
            ),
            (
                Reply::Pairs(vec![
                    (Reply::bulk(b"a"), Reply::Double(1.0)),
                    (Reply::bulk(b"b"), Reply::Double(2.5)),
                ]),
                "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n",
                "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\n2.5\r\n",
            ),
            (Reply::Double(1.5), ",1.5\r\n", "$3\r\n1.5\r\n"),
            (Reply::Double(f64::INFINITY), ",inf\r\n", "$3\r\ninf\r\n"),
            (Reply::Double(0.1), ",0.10000000000000001\r\n", "$19\r\n0.10000000000000001\r\n"),
            (Reply::Set(vec![]), "~0\r\n", "*0\r\n"),
            (Reply::Nil, "_\r\n", "$-1\r\n"),
            (Reply::NilArray, "_\r\n", "*-1\r\n"),
            (Reply::Boolean(true), "#t\r\n", ":1\r\n"),
            (Reply::Boolean(false), "#f\r\n", ":0\r\n"),
            (
                Reply::BigNumber("123456789012345678901234567890".into()),
                "(123456789012345678901234567890\r\n",
                "$30\r\n123456789012345678901234567890\r\n",
            ),
            (
                Reply::Verbatim {
                    format: *b"txt",
                    text: Bytes::from_static(b"# Cluster\r\ncluster_enabled:0\r\n"),
                },
                "=34\r\ntxt:# Cluster\r\ncluster_enabled:0\r\n\r\n",
                "$30\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n",
            ),
            (
                Reply::Push(vec![Reply::bulk(b"message"), Reply::Array(vec![Reply::Double(-2.0)])]),
                ">2\r\n$7\r\nmessage\r\n*1\r\n,-2\r\n",
                "*2\r\n$7\r\nmessage\r\n*1\r\n$2\r\n-2\r\n",
            ),
        ];
        for (reply, resp3, resp2) in cases {
            let (mut three, mut two) = (Vec::new(), Vec::new());
            reply.write(Protocol::Resp3, &mut three);
            reply.write(Protocol::Resp2, &mut two);
            assert_eq!(String::from_utf8(three).unwrap(), resp3, "{reply:?} in RESP3");
            assert_eq!(String::from_utf8(two).unwrap(), resp2, "{reply:?} in RESP2");
        }
    }
}
