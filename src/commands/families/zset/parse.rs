//! Argument parsing for the sorted-set commands: score and lex range bounds.

use bytes::Bytes;

use super::{LexBound, LexRange, ScoreBound, ScoreRange};
use crate::commands::CommandError;
use crate::commands::args::strtod;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
