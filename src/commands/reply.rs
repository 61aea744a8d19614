//! [`Reply`]: a RESP2 value, and its wire encoding.

use std::borrow::Cow;

use bytes::Bytes;

/// A command's answer, mirroring the RESP2 value kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

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
        fn line(out: &mut Vec<u8>, prefix: u8, text: &[u8]) {
            out.push(prefix);
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
        fn safe_line(out: &mut Vec<u8>, prefix: u8, text: &[u8]) {
            out.push(prefix);
            out.extend(text.iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
            out.extend_from_slice(b"\r\n");
        }
        match self {
            Reply::Status(s) => safe_line(out, b'+', s.as_bytes()),
            Reply::Error(e) => safe_line(out, b'-', e.as_bytes()),
            Reply::Integer(n) => line(out, b':', decimal(*n, &mut [0; 20])),
            Reply::Bulk(b) => {
                line(out, b'$', decimal(b.len() as i64, &mut [0; 20]));
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::Array(items) => {
                line(out, b'*', decimal(items.len() as i64, &mut [0; 20]));
                for item in items {
                    item.write_resp(out);
                }
            }
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
        }
    }
}

/// The decimal text of `n`, written into `buf` without allocating.
fn decimal(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
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
}
