//! Argument parsing for the sorted-set commands: C `strtod` rules, score and lex bounds.

use bytes::Bytes;

use super::{LexBound, LexRange, ScoreBound, ScoreRange};
use crate::commands::CommandError;

/// What [`strtod`] read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Strtod {
    /// The value (0 when nothing was read).
    pub value: f64,
    /// How many bytes were consumed (0 when no number was found).
    pub used: usize,
    /// Whether C would set `errno = ERANGE` with a zero or infinite result
    /// (overflow, or underflow of a non-zero number to zero).
    pub range_error: bool,
}

/// C's `strtod` (glibc): leading white space, sign, `inf`/`infinity`/`nan`, hex floats
/// (`0x1.8p3`), decimal with optional exponent. Reads the longest valid prefix.
pub(super) fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod { value: 0.0, used: 0, range_error: false };
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let sign = |v: f64| if negative { -v } else { v };
    let rest = &s[i..];
    let starts_with_ci =
        |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    if starts_with_ci(b"infinity") {
        return Strtod { value: sign(f64::INFINITY), used: i + 8, range_error: false };
    }
    if starts_with_ci(b"inf") {
        return Strtod { value: sign(f64::INFINITY), used: i + 3, range_error: false };
    }
    if starts_with_ci(b"nan") {
        let mut used = i + 3;
        if s.get(used) == Some(&b'(') {
            if let Some(close) = s[used..].iter().position(|&b| b == b')') {
                if s[used + 1..used + close].iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') {
                    used += close + 1;
                }
            }
        }
        return Strtod { value: f64::NAN, used, range_error: false };
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        if let Some(r) = hex_float(&rest[2..]) {
            return Strtod { value: sign(r.value), used: i + 2 + r.used, range_error: r.range_error };
        }
        // "0x" without hex digits: strtod reads the "0".
        return Strtod { value: sign(0.0), used: i + 1, range_error: false };
    }
    // Decimal: digits [. digits] [e [sign] digits], at least one digit in the mantissa.
    let mut j = 0;
    let mut digits = 0;
    let mut nonzero = false;
    while j < rest.len() && rest[j].is_ascii_digit() {
        nonzero |= rest[j] != b'0';
        j += 1;
        digits += 1;
    }
    if j < rest.len() && rest[j] == b'.' {
        j += 1;
        while j < rest.len() && rest[j].is_ascii_digit() {
            nonzero |= rest[j] != b'0';
            j += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return none;
    }
    if j < rest.len() && (rest[j] | 0x20) == b'e' {
        let mut k = j + 1;
        if k < rest.len() && (rest[k] == b'+' || rest[k] == b'-') {
            k += 1;
        }
        if k < rest.len() && rest[k].is_ascii_digit() {
            while k < rest.len() && rest[k].is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    let text = std::str::from_utf8(&rest[..j]).unwrap_or("0");
    let value: f64 = text.parse().unwrap_or(0.0);
    let range_error = value.is_infinite() || (value == 0.0 && nonzero);
    Strtod { value: sign(value), used: i + j, range_error }
}

/// A hex float body after `0x`: hex digits, optional `.` and hex digits, optional `p` exponent.
fn hex_float(s: &[u8]) -> Option<Strtod> {
    let mut mantissa: u64 = 0;
    let mut exp: i64 = 0;
    let mut digits = 0;
    let mut sticky = false;
    let mut j = 0;
    let mut seen_dot = false;
    while j < s.len() {
        let c = s[j];
        if c == b'.' && !seen_dot {
            seen_dot = true;
            j += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else { break };
        digits += 1;
        if mantissa >> 60 == 0 {
            mantissa = mantissa << 4 | u64::from(d);
            if seen_dot {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_dot {
                exp += 4;
            }
        }
        j += 1;
    }
    if digits == 0 {
        return None;
    }
    if j < s.len() && (s[j] | 0x20) == b'p' {
        let mut k = j + 1;
        let mut neg = false;
        if k < s.len() && (s[k] == b'+' || s[k] == b'-') {
            neg = s[k] == b'-';
            k += 1;
        }
        if k < s.len() && s[k].is_ascii_digit() {
            let mut e: i64 = 0;
            while k < s.len() && s[k].is_ascii_digit() {
                e = (e * 10 + i64::from(s[k] - b'0')).min(1 << 20);
                k += 1;
            }
            exp += if neg { -e } else { e };
            j = k;
        }
    }
    if sticky {
        mantissa |= 1;
    }
    let value = (mantissa as f64) * 2f64.powi(exp.clamp(-2000, 2000) as i32);
    let range_error = value.is_infinite() || (value == 0.0 && mantissa != 0);
    Some(Strtod { value, used: j, range_error })
}

/// Redis' `getDoubleFromObject`: the whole argument must be a number, no leading space,
/// no overflow or underflow to zero, not NaN. Accepts hex floats and `inf`.
pub(super) fn parse_double(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s[0].is_ascii_whitespace() || s[0] == b'\x0b' {
        return None;
    }
    let r = strtod(s);
    if r.used != s.len() || r.range_error || r.value.is_nan() {
        return None;
    }
    Some(r.value)
}

/// [`parse_double`], or "ERR value is not a valid float".
pub(super) fn score_arg(s: &[u8]) -> Result<f64, CommandError> {
    parse_double(s).ok_or(CommandError::NotFloat)
}

/// One end of a score range as Redis' `zslParseRange` reads it: `(` makes it exclusive,
/// then `strtod` must consume the rest (leading space and an empty string are accepted, as
/// in Redis; overflow gives ±inf), and NaN is refused.
fn score_bound(s: &[u8]) -> Option<ScoreBound> {
    let (exclusive, body) = match s.first() {
        Some(b'(') => (true, &s[1..]),
        _ => (false, s),
    };
    let r = strtod(body);
    if r.used != body.len() || r.value.is_nan() {
        return None;
    }
    Some(ScoreBound { value: r.value, exclusive })
}

/// A score range, or "ERR min or max is not a float".
pub(super) fn score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, CommandError> {
    match (score_bound(min), score_bound(max)) {
        (Some(min), Some(max)) => Ok(ScoreRange { min, max }),
        _ => Err(CommandError::err("min or max is not a float")),
    }
}

/// One end of a lex range: `-`, `+`, `[member`, `(member`.
fn lex_bound(s: &[u8]) -> Option<LexBound> {
    match s.first()? {
        b'-' if s.len() == 1 => Some(LexBound::Min),
        b'+' if s.len() == 1 => Some(LexBound::Max),
        b'[' => Some(LexBound::Inclusive(Bytes::copy_from_slice(&s[1..]))),
        b'(' => Some(LexBound::Exclusive(Bytes::copy_from_slice(&s[1..]))),
        _ => None,
    }
}

/// A lex range, or "ERR min or max not valid string range item".
pub(super) fn lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, CommandError> {
    match (lex_bound(min), lex_bound(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err(CommandError::err("min or max not valid string range item")),
    }
}

/// A SCAN cursor as Redis' `parseScanCursorOrReply` reads it (`strtoul`: optional sign,
/// a leading `-` wraps, no leading space, no overflow), or "ERR invalid cursor".
pub(super) fn scan_cursor(s: &[u8]) -> Result<u64, CommandError> {
    let invalid = || CommandError::err("invalid cursor");
    if s.is_empty() {
        return Ok(0);
    }
    let (negative, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10).and_then(|v| v.checked_add(u64::from(d - b'0'))).ok_or_else(invalid)?;
    }
    Ok(if negative { v.wrapping_neg() } else { v })
}

/// A blocking command's timeout in seconds, checked as Redis 7.0 does
/// (`getTimeoutFromObjectOrReply`); returns milliseconds.
///
/// A value whose milliseconds do not fit an i64 (including `inf`) becomes negative in
/// Redis' conversion and gets "timeout is negative", as on the real server.
pub(super) fn timeout_arg(s: &[u8]) -> Result<u64, CommandError> {
    let bad = || CommandError::err("timeout is not a float or out of range");
    if s.is_empty() || s[0].is_ascii_whitespace() {
        return Err(bad());
    }
    let r = strtod(s);
    if r.used != s.len() || r.value.is_nan() {
        return Err(bad());
    }
    let ms = r.value * 1000.0;
    // (long long) of an out-of-range double is i64::MIN on x86-64.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let ms = if (-TWO_63..TWO_63).contains(&ms) { ms as i64 } else { i64::MIN };
    if ms < 0 {
        return Err(CommandError::err("timeout is negative"));
    }
    // Redis 7.0.15 answers a huge timeout with data available by popping at once (no
    // "timeout is out of range").
    Ok(ms as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_follow_get_double_from_object() {
        assert_eq!(parse_double(b"1.5"), Some(1.5));
        assert_eq!(parse_double(b"0x10"), Some(16.0));
        assert_eq!(parse_double(b"0x1.8p1"), Some(3.0));
        assert_eq!(parse_double(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_double(b"1."), Some(1.0));
        assert_eq!(parse_double(b".5"), Some(0.5));
        assert_eq!(parse_double(b"0e-400"), Some(0.0));
        for bad in [&b""[..], b" 1", b"1 ", b"1e400", b"1e-400", b"nan", b"abc", b".", b"1e", b"--1", b"0x"] {
            assert_eq!(parse_double(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn score_bounds_follow_zsl_parse_range() {
        let b = |s: &[u8]| score_bound(s).map(|b| (b.value, b.exclusive));
        assert_eq!(b(b"(1"), Some((1.0, true)));
        assert_eq!(b(b"( 1"), Some((1.0, true)));
        assert_eq!(b(b""), Some((0.0, false)));
        assert_eq!(b(b"("), Some((0.0, true)));
        assert_eq!(b(b"1e400"), Some((f64::INFINITY, false)));
        assert_eq!(b(b"0x2"), Some((2.0, false)));
        assert_eq!(b(b"nan"), None);
        assert_eq!(b(b"(nan"), None);
        assert_eq!(b(b"a"), None);
    }

    #[test]
    fn cursors_follow_strtoul() {
        assert_eq!(scan_cursor(b"0"), Ok(0));
        assert_eq!(scan_cursor(b"-1"), Ok(u64::MAX));
        assert_eq!(scan_cursor(b"18446744073709551615"), Ok(u64::MAX));
        assert!(scan_cursor(b"18446744073709551616").is_err());
        assert!(scan_cursor(b"x").is_err());
        assert!(scan_cursor(b" 1").is_err());
    }
}
