//! Argument parsing and number formatting with Redis' exact rules.

use super::error::CommandError;

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
pub fn int_arg(s: &[u8]) -> Result<i64, CommandError> {
    parse_i64(s).ok_or(CommandError::NotInteger)
}

/// Parses a double the way Redis does with `strtod`: the whole argument, no leading
/// space, `inf`/`-inf`/`+inf`/`infinity` accepted, NaN and overflow to infinity refused.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty() || text.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let v: f64 = text.parse().ok()?;
    if v.is_nan() {
        return None;
    }
    if v.is_infinite() {
        let body = text.trim_start_matches(['+', '-']).to_ascii_lowercase();
        if body != "inf" && body != "infinity" {
            return None;
        }
    }
    Some(v)
}

/// [`parse_f64`], or Redis' "value is not a valid float".
///
/// # Errors
/// [`CommandError::NotFloat`].
pub fn float_arg(s: &[u8]) -> Result<f64, CommandError> {
    parse_f64(s).ok_or(CommandError::NotFloat)
}

/// Formats a double as C's `%.17g`, which Redis 7.0 uses for scores: `inf`, `-inf`,
/// `0.10000000000000001`, `1e+20`, `3.0000000000000001e-05`. `-0.0` prints as `-0`.
pub fn format_g17(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{x:.16e}");
    let (mantissa, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("exponent");
    if !(-4..17).contains(&exp) {
        let mantissa = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (16 - exp) as usize;
        trim_fraction(&format!("{x:.decimals$}")).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { s }
}

/// Redis glob matching (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\x`.
pub fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    glob_at(pattern, s, 0)
}

fn glob_at(p: &[u8], s: &[u8], depth: usize) -> bool {
    if depth > 1000 {
        return false;
    }
    let (mut pi, mut si) = (0, 0);
    while pi < p.len() {
        match p[pi] {
            b'*' => {
                while pi + 1 < p.len() && p[pi + 1] == b'*' {
                    pi += 1;
                }
                if pi + 1 == p.len() {
                    return true;
                }
                return (si..=s.len()).any(|start| glob_at(&p[pi + 1..], &s[start..], depth + 1));
            }
            b'?' => {
                if si >= s.len() {
                    return false;
                }
                si += 1;
            }
            b'[' => {
                if si >= s.len() {
                    return false;
                }
                pi += 1;
                let not = p.get(pi) == Some(&b'^');
                if not {
                    pi += 1;
                }
                let mut matched = false;
                loop {
                    if pi >= p.len() {
                        pi -= 1;
                        break;
                    }
                    if p[pi] == b'\\' && pi + 2 < p.len() {
                        pi += 1;
                        if p[pi] == s[si] {
                            matched = true;
                        }
                    } else if p[pi] == b']' {
                        break;
                    } else if pi + 2 < p.len() && p[pi + 1] == b'-' {
                        let (mut lo, mut hi) = (p[pi], p[pi + 2]);
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        if (lo..=hi).contains(&s[si]) {
                            matched = true;
                        }
                        pi += 2;
                    } else if p[pi] == s[si] {
                        matched = true;
                    }
                    pi += 1;
                }
                if matched == not {
                    return false;
                }
                si += 1;
            }
            b'\\' if pi + 1 < p.len() => {
                pi += 1;
                if si >= s.len() || p[pi] != s[si] {
                    return false;
                }
                si += 1;
            }
            c => {
                if si >= s.len() || c != s[si] {
                    return false;
                }
                si += 1;
            }
        }
        pi += 1;
    }
    si == s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn floats_follow_strtod() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"5.0e3"), Some(5000.0));
        for bad in [&b""[..], b"nan", b" 1", b"1 ", b"1e400", b"abc"] {
            assert_eq!(parse_f64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
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

    #[test]
    fn glob_rules() {
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(glob_match(b"h*llo", b"heeeello"));
        assert!(glob_match(b"h[ae]llo", b"hallo"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"h[a-b]llo", b"hbllo"));
        assert!(glob_match(b"h\\*", b"h*"));
        assert!(!glob_match(b"h\\*", b"hx"));
        assert!(!glob_match(b"a*b", b"acbd"));
    }
}
