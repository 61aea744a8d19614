//! Argument parsing and number formatting with Redis' exact rules.

use std::collections::HashMap;

use super::error::CommandError;
pub use super::glob::Glob;
use super::long_double;

/// Byte strings (a command's keys, fields or members) each kept once, in the order first
/// given, each with a value of the caller's: found by a linear search while they are few,
/// the usual handful of a command's arguments (no hashing), and through an index past
/// [`Distinct::LINEAR`].
#[derive(Debug)]
pub(crate) struct Distinct<'a, T> {
    entries: Vec<(&'a [u8], T)>,
    index: Option<HashMap<&'a [u8], usize>>,
}

impl<'a, T> Distinct<'a, T> {
    /// Up to this many items are found by a linear search.
    const LINEAR: usize = 16;

    /// Room for `n` items.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Distinct { entries: Vec::with_capacity(n), index: None }
    }

    /// Where `item` is, if it is here.
    #[inline]
    pub(crate) fn position(&self, item: &[u8]) -> Option<usize> {
        match &self.index {
            None => self.entries.iter().position(|(i, _)| *i == item),
            Some(index) => index.get(item).copied(),
        }
    }

    /// Adds `item`, not here yet ([`Distinct::position`]), last, with `value`.
    pub(crate) fn push(&mut self, item: &'a [u8], value: T) {
        self.entries.push((item, value));
        let last = self.entries.len() - 1;
        match &mut self.index {
            Some(index) => {
                index.insert(item, last);
            }
            None if last == Self::LINEAR => {
                self.index = Some(self.entries.iter().enumerate().map(|(at, (i, _))| (*i, at)).collect());
            }
            None => {}
        }
    }

    /// The value of the item at `at`.
    pub(crate) fn value(&self, at: usize) -> &T {
        &self.entries[at].1
    }

    /// The value of the item at `at`, to change.
    pub(crate) fn value_mut(&mut self, at: usize) -> &mut T {
        &mut self.entries[at].1
    }

    /// The items and their values, in the order first given.
    pub(crate) fn entries(&self) -> &[(&'a [u8], T)] {
        &self.entries
    }

    /// The items and their values, in the order first given.
    pub(crate) fn into_entries(self) -> Vec<(&'a [u8], T)> {
        self.entries
    }
}

impl<'a> Distinct<'a, ()> {
    /// Each of `items` once, in the order first given.
    pub(crate) fn of(items: impl ExactSizeIterator<Item = &'a [u8]>) -> Self {
        let mut distinct = Distinct::with_capacity(items.len());
        for item in items {
            distinct.insert(item);
        }
        distinct
    }

    /// Adds `item` unless it is here already: whether it was new (as `HashSet::insert`).
    pub(crate) fn insert(&mut self, item: &'a [u8]) -> bool {
        let new = self.position(item).is_none();
        if new {
            self.push(item, ());
        }
        new
    }

    /// The items, in the order first given.
    pub(crate) fn items(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + '_ {
        self.entries.iter().map(|(i, ())| *i)
    }
}

/// Parses an i64 the way Redis' `string2ll` does: optional `-`, no `+`, no spaces, no
/// leading zeros (but `0`), at most i64's range.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    match s {
        [] => None,
        [b'0'] => Some(0),
        [b'-', rest @ ..] => {
            if rest.first().is_none_or(|&b| !(b'1'..=b'9').contains(&b)) {
                return None;
            }
            let mut v: i64 = 0;
            for &b in rest {
                if !b.is_ascii_digit() {
                    return None;
                }
                v = v.checked_mul(10)?.checked_sub(i64::from(b - b'0'))?;
            }
            Some(v)
        }
        [first, ..] if (b'1'..=b'9').contains(first) => {
            let mut v: i64 = 0;
            for &b in s {
                if !b.is_ascii_digit() {
                    return None;
                }
                v = v.checked_mul(10)?.checked_add(i64::from(b - b'0'))?;
            }
            Some(v)
        }
        _ => None,
    }
}

/// [`parse_i64`], or Redis' "value is not an integer or out of range".
///
/// # Errors
/// [`CommandError::NotInteger`].
pub(crate) fn int_arg(s: &[u8]) -> Result<i64, CommandError> {
    parse_i64(s).ok_or(CommandError::NotInteger)
}

/// What [`strtod`] read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Strtod {
    /// The value (0 when nothing was read).
    pub(crate) value: f64,
    /// How many bytes were consumed (0 when no number was found).
    pub(crate) used: usize,
    /// Whether C would set `errno = ERANGE` with a zero or infinite result
    /// (overflow, or underflow of a non-zero number to zero).
    pub(crate) range_error: bool,
}

/// C's `strtod` (glibc): leading white space, sign, `inf`/`infinity`/`nan`, hex floats
/// (`0x1.8p3`), decimal with optional exponent. Reads the longest valid prefix.
pub(crate) fn strtod(s: &[u8]) -> Strtod {
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
        if s.get(used) == Some(&b'(')
            && let Some(close) = s[used..].iter().position(|&b| b == b')')
            && s[used + 1..used + close].iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
        {
            used += close + 1;
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
pub(crate) fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s[0].is_ascii_whitespace() || s[0] == b'\x0b' {
        return None;
    }
    let r = strtod(s);
    if r.used != s.len() || r.range_error || r.value.is_nan() {
        return None;
    }
    Some(r.value)
}

/// [`parse_f64`], or Redis' "value is not a valid float".
///
/// # Errors
/// [`CommandError::NotFloat`].
pub(crate) fn float_arg(s: &[u8]) -> Result<f64, CommandError> {
    parse_f64(s).ok_or(CommandError::NotFloat)
}

/// Parses a SCAN-family cursor as Redis' `parseScanCursorOrReply` (`strtoul`): optional
/// sign, decimal digits and nothing else, a leading `-` wraps, empty means 0.
///
/// # Errors
/// "ERR invalid cursor".
pub(crate) fn cursor_arg(s: &[u8]) -> Result<u64, CommandError> {
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

/// Parses a blocking command's timeout (seconds, a float) as Redis 7.0 does: parsed by
/// `strtold` (decimal, hex float, `inf`/`infinity`), multiplied by 1000 and rounded up to a
/// `long long` of milliseconds (`ceill`), all in x87 long double arithmetic. `None` for 0
/// (wait forever), else the wait.
///
/// # Errors
/// "ERR timeout is not a float or out of range" for text that is not a number or that a
/// long double cannot hold; "ERR timeout is negative" for a negative result — including the
/// infinities and anything from 9223372036854775.808 seconds up, whose conversion yields
/// `LLONG_MIN` on x86-64.
pub(crate) fn timeout_arg(s: &[u8]) -> Result<Option<std::time::Duration>, CommandError> {
    let seconds =
        long_double::parse(s).ok_or_else(|| CommandError::err("timeout is not a float or out of range"))?;
    let ms = long_double::times_1000_ceil_as_i64(seconds);
    if ms < 0 {
        return Err(CommandError::err("timeout is negative"));
    }
    Ok((ms > 0).then(|| std::time::Duration::from_millis(ms as u64)))
}

/// Normalises a Redis index range (LRANGE, LTRIM, ZRANGE by rank…) against a length:
/// negative indexes count from the end, the start is clamped to 0 and the stop to
/// `len - 1`. `None` when the range is empty, else the inclusive `(start, stop)`.
pub(crate) fn normalize_range(start: i64, stop: i64, len: i64) -> Option<(i64, i64)> {
    let start = if start < 0 { len.saturating_add(start).max(0) } else { start };
    let stop = if stop < 0 { len.saturating_add(stop) } else { stop };
    if start > stop || start >= len {
        return None;
    }
    Some((start, stop.min(len - 1)))
}

/// Parses the count of SRANDMEMBER/HRANDFIELD/ZRANDMEMBER: an i64 in `[-i64::MAX, i64::MAX]`.
///
/// # Errors
/// Redis 7.0's texts for a non-integer or `i64::MIN`.
pub(crate) fn random_count_arg(arg: &[u8]) -> Result<i64, CommandError> {
    let n = int_arg(arg)?;
    if n == i64::MIN {
        return Err(CommandError::err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(n)
}

/// HRANDFIELD … WITHVALUES / ZRANDMEMBER … WITHSCORES: Redis refuses a count whose reply
/// length (twice the count) would overflow, before it looks at the key.
///
/// # Errors
/// "ERR value is out of range" when `with_values` and `|count| > i64::MAX / 2`.
pub(crate) fn check_pairs_count(count: i64, with_values: bool) -> Result<(), CommandError> {
    if with_values && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(CommandError::err("value is out of range"));
    }
    Ok(())
}

/// Formats a double as C's `%.17g`, which Redis 7.0 uses for scores: `inf`, `-inf`,
/// `0.10000000000000001`, `1e+20`, `3.0000000000000001e-05`. `-0.0` prints as `-0`.
pub fn format_g17(x: f64) -> String {
    format_g(x, 17)
}

/// Formats a double as C's `%.<precision>g` (`precision` >= 1; NaN as `nan`): Lua 5.1
/// prints numbers as `%.14g`.
pub(crate) fn format_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let precision = precision.max(1);
    let sci = format!("{x:.*e}", precision - 1);
    let (mantissa, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("exponent");
    if !(-4..precision as i32).contains(&exp) {
        let mantissa = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp) as usize;
        trim_fraction(&format!("{x:.decimals$}")).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each item keeps the position it was first given, before and after the index takes
    /// over from the linear search.
    #[test]
    fn distinct_keeps_first_positions_past_the_linear_search() {
        let names: Vec<String> = (0..40).map(|i| format!("k{}", i % 25)).collect();
        let mut distinct = Distinct::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            match distinct.position(name.as_bytes()) {
                Some(at) => {
                    assert_eq!(at, i % 25, "{name} at {i}");
                    *distinct.value_mut(at) += 1;
                }
                None => {
                    assert!(i < 25, "{name} at {i} counted new again");
                    distinct.push(name.as_bytes(), 1);
                }
            }
        }
        let expected: Vec<(String, i32)> =
            (0..25).map(|i| (format!("k{i}"), if i < 15 { 2 } else { 1 })).collect();
        let entries: Vec<(String, i32)> =
            distinct.entries().iter().map(|(k, n)| (String::from_utf8(k.to_vec()).unwrap(), *n)).collect();
        assert_eq!(entries, expected);
        assert_eq!(distinct.position(b"k24"), Some(24));
        assert_eq!(distinct.position(b"k25"), None);
        let of = Distinct::of(names.iter().map(|n| n.as_bytes()));
        assert_eq!(
            of.items().collect::<Vec<_>>(),
            expected.iter().map(|(k, _)| k.as_bytes()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn g_formats_as_printf() {
        // What glibc's printf("%.14g") prints.
        for (x, want) in [
            (1.0, "1"),
            (0.1, "0.1"),
            (1.0 / 3.0, "0.33333333333333"),
            (123456789012345.0, "1.2345678901234e+14"),
            (12345678901234.0, "12345678901234"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (1e300, "1e+300"),
            (99999999999999.9, "1e+14"),
        ] {
            assert_eq!(format_g(x, 14), want, "{x}");
        }
        assert_eq!(format_g17(0.1), "0.10000000000000001");
    }

    #[test]
    fn integers_follow_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        for bad in [&b""[..], b"-0", b"01", b"+1", b" 1", b"1 ", b"9223372036854775808", b"1a", b"-"] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn doubles_follow_get_double_from_object() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"0x1.8p1"), Some(3.0));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"1."), Some(1.0));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        assert_eq!(parse_f64(b"0e-400"), Some(0.0));
        for bad in [&b""[..], b" 1", b"1 ", b"1e400", b"1e-400", b"nan", b"abc", b".", b"1e", b"--1", b"0x"] {
            assert_eq!(parse_f64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn cursors_follow_strtoul() {
        // HSCAN/SSCAN/ZSCAN/SCAN with "" all start over on redis-server 7.0.15.
        assert_eq!(cursor_arg(b""), Ok(0));
        assert_eq!(cursor_arg(b"0"), Ok(0));
        assert_eq!(cursor_arg(b"-1"), Ok(u64::MAX));
        assert_eq!(cursor_arg(b"18446744073709551615"), Ok(u64::MAX));
        assert!(cursor_arg(b"18446744073709551616").is_err());
        assert!(cursor_arg(b"x").is_err());
        assert!(cursor_arg(b" 1").is_err());
    }
    #[test]
    #[allow(clippy::excessive_precision)]
    fn g17_matches_redis_7_0_score_text() {
        // Replies of a real redis-server 7.0.15 to ZADD/ZRANGE WITHSCORES.
        assert_eq!(format_g17(0.1), "0.10000000000000001");
        assert_eq!(format_g17(1e20), "1e+20");
        assert_eq!(format_g17(3.0e-5), "3.0000000000000001e-05");
        assert_eq!(format_g17(123456789.123456789), "123456789.12345679");
        assert_eq!(format_g17(1.5), "1.5");
        assert_eq!(format_g17(-2.0), "-2");
        assert_eq!(format_g17(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_g17(1e16), "10000000000000000");
        assert_eq!(format_g17(1e17), "1e+17");
        assert_eq!(format_g17(0.0001), "0.0001");
    }
}
