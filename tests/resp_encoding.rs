//! Any `Reply` encodes to exactly one RESP value that a strict parser reads back, under
//! RESP2 and RESP3: error and status lines never carry CR or LF (Redis 7.0 turns them into
//! spaces), so a reply can never be forged from an argument.

use std::borrow::Cow;

use bytes::Bytes;
use proptest::prelude::*;
use rediskv::{Protocol, Reply};

/// A strict RESP2/RESP3 parser: returns the length of the one value at the start of `buf`,
/// or why it is malformed.
fn value_len(buf: &[u8]) -> Result<usize, String> {
    let line_end = |from: usize| -> Result<usize, String> {
        let i = buf[from..].iter().position(|&b| b == b'\r').ok_or("no CR")? + from;
        if buf.get(i + 1) != Some(&b'\n') {
            return Err(format!("CR without LF at {i}"));
        }
        if buf[from..i].contains(&b'\n') {
            return Err("LF inside a line".into());
        }
        Ok(i)
    };
    let kind = *buf.first().ok_or("empty")?;
    let end = line_end(1)?;
    let line = &buf[1..end];
    let after = end + 2;
    let number = || -> Result<i64, String> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad number {line:?}"))
    };
    match kind {
        b'+' | b'-' | b':' | b',' | b'(' | b'#' | b'_' => {
            if kind == b':' {
                number()?;
            }
            Ok(after)
        }
        b'$' | b'=' => {
            let n = number()?;
            if n == -1 && kind == b'$' {
                return Ok(after);
            }
            let n = usize::try_from(n).map_err(|_| "negative length")?;
            if buf.len() < after + n + 2 || &buf[after + n..after + n + 2] != b"\r\n" {
                return Err("bulk not followed by CRLF".into());
            }
            Ok(after + n + 2)
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = number()?;
            if n == -1 && kind == b'*' {
                return Ok(after);
            }
            let count = usize::try_from(n).map_err(|_| "negative count")? * if kind == b'%' { 2 } else { 1 };
            let mut pos = after;
            for _ in 0..count {
                pos += value_len(&buf[pos..])?;
            }
            Ok(pos)
        }
        other => Err(format!("unknown type byte {other:?}")),
    }
}

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(prop_oneof![Just('\r'), Just('\n'), Just(' '), any::<char>()], 0..12)
        .prop_map(|c| c.into_iter().collect())
}

fn bytes() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(prop_oneof![Just(b'\r'), Just(b'\n'), any::<u8>()], 0..12).prop_map(Bytes::from)
}

fn reply() -> impl Strategy<Value = Reply> {
    let leaf = prop_oneof![
        text().prop_map(|t| Reply::Status(Cow::Owned(t))),
        text().prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Integer),
        bytes().prop_map(Reply::Bulk),
        Just(Reply::Nil),
        Just(Reply::NilArray),
        any::<f64>().prop_filter("Redis never replies NaN", |d| !d.is_nan()).prop_map(Reply::Double),
        any::<bool>().prop_map(Reply::Boolean),
        "-?[0-9]{1,40}".prop_map(Reply::BigNumber),
        bytes().prop_map(|text| Reply::Verbatim { format: *b"txt", text }),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Reply::Array),
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Reply::Set),
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Reply::Push),
            proptest::collection::vec((inner.clone(), inner.clone()), 0..3).prop_map(Reply::Map),
            proptest::collection::vec((inner.clone(), inner), 0..3).prop_map(Reply::Pairs),
        ]
    })
}

proptest! {
    #[test]
    fn every_reply_is_exactly_one_resp_value(reply in reply()) {
        for protocol in [Protocol::Resp2, Protocol::Resp3] {
            let mut out = Vec::new();
            reply.write(protocol, &mut out);
            prop_assert_eq!(value_len(&out), Ok(out.len()), "{:?} {:?}", protocol, String::from_utf8_lossy(&out));
        }
    }
}

#[test]
fn the_forging_error_becomes_one_line() {
    let mut out = Vec::new();
    Reply::Error("ERR unknown command 'NOSUCHCMD', with args beginning with: 'x\r\n$4\r\nfake' ".into())
        .write_resp(&mut out);
    assert_eq!(out, b"-ERR unknown command 'NOSUCHCMD', with args beginning with: 'x  $4  fake' \r\n");
    // The parser catches the unsanitised form.
    assert!(value_len(b"-ERR x\r\n$4\r\nfake\r\n").is_ok_and(|n| n < 19));
    assert!(value_len(b"-ERR a\nb\r\n").is_err());
}
