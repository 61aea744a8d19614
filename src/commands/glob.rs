//! Redis glob patterns (`KEYS`, `SCAN … MATCH`, `CONFIG GET`) with bounded cost.
//!
//! The rules are Redis 7.0's `stringmatchlen`, byte for byte:
//! - `?` matches one byte, `*` any run of bytes (`**` is one `*`);
//! - `[abc]`, `[^abc]`, ranges `[a-z]` and reversed `[z-a]`, compared as *signed* chars as
//!   Redis compares them on x86 (`[a-\xff]` is the range −1..97); `\x` in a class is `x`;
//!   `[]` matches nothing and `[^]` any byte; a `]` right after `-` ends a range, not the
//!   class (`[a-]` is the unterminated range `]`..`a`);
//! - a class without its `]` runs to the end of the pattern; a lone `[` matches nothing;
//! - `\x` outside a class is `x`, a trailing `\` is itself;
//! - an **empty** subject matches only the empty pattern (`*` does not match `""`: callers
//!   treat the pattern `*` as "everything" before matching, as Redis does).
//!
//! Redis recurses at each `*` and stops early once a later `*` has failed everywhere; this
//! matcher compiles the pattern once into tokens that each match one byte, then walks the
//! subject with two pointers, retrying only the last `*` seen. That is at most
//! `(|pattern| + 1) · (|subject| + 1)` steps whatever the pattern.

/// One token: matches one byte, or (`Star`) any run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Star,
    Any,
    Byte(u8),
    /// Class items `items[start..end]`.
    Class {
        negated: bool,
        start: usize,
        end: usize,
    },
}

/// One item of a class: a byte, or an inclusive range of signed chars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Byte(u8),
    Range(i8, i8),
}

/// A compiled glob pattern: compile once, match many subjects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    tokens: Vec<Token>,
    items: Vec<Item>,
}

impl Glob {
    /// Compiles `pattern`; every byte string is a valid pattern.
    pub fn new(pattern: &[u8]) -> Self {
        let (mut tokens, mut items) = (Vec::new(), Vec::new());
        let len = pattern.len();
        let mut i = 0;
        while i < len {
            let token = match pattern[i] {
                b'*' => {
                    while pattern.get(i + 1) == Some(&b'*') {
                        i += 1;
                    }
                    Token::Star
                }
                b'?' => Token::Any,
                b'[' => {
                    i += 1;
                    let negated = pattern.get(i) == Some(&b'^');
                    if negated {
                        i += 1;
                    }
                    let start = items.len();
                    loop {
                        if i >= len {
                            // Unterminated: the class is the rest of the pattern.
                            i = len - 1;
                            break;
                        }
                        match pattern[i] {
                            b'\\' if len - i >= 2 => {
                                i += 1;
                                items.push(Item::Byte(pattern[i]));
                            }
                            b']' => break,
                            lo if len - i >= 3 && pattern[i + 1] == b'-' => {
                                let (a, b) = (lo as i8, pattern[i + 2] as i8);
                                items.push(Item::Range(a.min(b), a.max(b)));
                                i += 2;
                            }
                            c => items.push(Item::Byte(c)),
                        }
                        i += 1;
                    }
                    Token::Class { negated, start, end: items.len() }
                }
                b'\\' if len - i >= 2 => {
                    i += 1;
                    Token::Byte(pattern[i])
                }
                c => Token::Byte(c),
            };
            tokens.push(token);
            i += 1;
        }
        Glob { tokens, items }
    }

    /// Whether `subject` matches.
    pub fn matches(&self, subject: &[u8]) -> bool {
        self.matches_counted(subject).0
    }

    /// Whether `subject` matches, and the steps it took: one per token tried against a
    /// subject byte, plus one per class item compared. Never more than
    /// `(|pattern| + 1) · (|subject| + 1)`.
    pub(crate) fn matches_counted(&self, subject: &[u8]) -> (bool, u64) {
        if subject.is_empty() {
            return (self.tokens.is_empty(), 1);
        }
        let mut steps = 0;
        let (mut ti, mut si) = (0, 0);
        // After a `*`: the token following it, and where in the subject its match ends.
        let mut star: Option<(usize, usize)> = None;
        while si < subject.len() {
            steps += 1;
            match self.tokens.get(ti) {
                Some(Token::Star) if ti + 1 == self.tokens.len() => return (true, steps),
                Some(Token::Star) => {
                    star = Some((ti + 1, si));
                    ti += 1;
                    continue;
                }
                Some(&token) if self.one(token, subject[si], &mut steps) => {
                    ti += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
            // Mismatch: let the last `*` swallow one more byte; earlier stars need not be
            // retried, since the rest after the last one failed from every earlier start.
            let Some((after, end)) = star else { return (false, steps) };
            star = Some((after, end + 1));
            (ti, si) = (after, end + 1);
        }
        while self.tokens.get(ti) == Some(&Token::Star) {
            ti += 1;
        }
        (ti == self.tokens.len(), steps)
    }

    /// Whether a one-byte token matches `c`.
    fn one(&self, token: Token, c: u8, steps: &mut u64) -> bool {
        match token {
            Token::Star | Token::Any => true,
            Token::Byte(b) => b == c,
            Token::Class { negated, start, end } => {
                let items = &self.items[start..end];
                let found = items.iter().position(|item| match *item {
                    Item::Byte(b) => b == c,
                    Item::Range(lo, hi) => (lo..=hi).contains(&(c as i8)),
                });
                *steps += found.map_or(items.len(), |at| at + 1) as u64;
                found.is_some() != negated
            }
        }
    }
}

/// Redis glob matching (`stringmatchlen`, see [`Glob`]) of one subject; compile a [`Glob`]
/// to match many.
pub(crate) fn glob_match(pattern: &[u8], subject: &[u8]) -> bool {
    Glob::new(pattern).matches(subject)
}

/// [`glob_match`] and the steps it took ([`Glob::matches_counted`]).
#[cfg(test)]
fn glob_match_counted(pattern: &[u8], subject: &[u8]) -> (bool, u64) {
    Glob::new(pattern).matches_counted(subject)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        glob_match(p.as_bytes(), s.as_bytes())
    }

    #[test]
    fn wildcards() {
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h*llo", "hllo"));
        assert!(m("a*", "a"));
        assert!(m("a**", "a"));
        assert!(!m("a*b", "acbd"));
        assert!(m("*a*b*", "xxaxxbxx"));
        // An empty subject matches only the empty pattern, as in stringmatchlen.
        assert!(m("", ""));
        assert!(!m("*", ""));
        assert!(!m("**", ""));
        assert!(!m("", "a"));
    }

    #[test]
    fn classes() {
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hallo"), "reversed range");
        assert!(m("[\\]]", "]"));
        assert!(m("[a\\-z]", "-"));
        assert!(!m("[a\\-z]", "b"));
        assert!(!m("[]", "]"), "[] matches nothing");
        assert!(m("[^]", "x"), "[^] matches anything");
        assert!(!m("[]a]", "]a"), "`[]` then the literals `a]`: never");
    }

    #[test]
    fn unterminated_classes_and_escapes() {
        assert!(!m("[", "["));
        assert!(m("[^", "x"));
        assert!(m("[ab", "b"));
        assert!(!m("[ab", "ab"));
        assert!(m("[a-", "-"));
        // `]` closes the range, so the class never closes: range `]`..`a` (93..97).
        assert!(m("[a-]", "_"));
        assert!(!m("[a-]x", "_x"));
        assert!(m("[\\", "\\"));
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "x"));
        assert!(m("a\\", "a\\"));
        assert!(m("\\\\", "\\"));
    }

    #[test]
    fn ranges_compare_signed_chars() {
        // [a-\xff] is -1..=97: 0xff and ASCII up to `a`, not 0x80.
        let p = b"[a-\xff]";
        assert!(glob_match(p, b"\xff"));
        assert!(glob_match(p, b"0"));
        assert!(!glob_match(p, b"\x80"));
        assert!(!glob_match(p, b"b"));
        assert!(glob_match(b"[\x80-\xff]", b"\x90"));
        assert!(!glob_match(b"[\x80-\xff]", b"a"));
    }

    fn bound(p: &[u8], s: &[u8]) -> u64 {
        (p.len() as u64 + 1) * (s.len() as u64 + 1)
    }

    #[test]
    fn pathological_patterns_stay_within_the_bound() {
        for (stars, n) in [(10, 40), (20, 100), (50, 1000), (200, 5000)] {
            let mut p = b"a*".repeat(stars);
            p.push(b'b');
            let s = vec![b'a'; n];
            let (matched, steps) = glob_match_counted(&p, &s);
            assert!(!matched);
            assert!(steps <= bound(&p, &s), "{stars} stars, {n} bytes: {steps} steps");
        }
        // The two-pointer walk's worst case: the whole run after the star retried at
        // every start.
        let mut p = b"*".to_vec();
        p.extend([b'a'; 100]);
        p.push(b'b');
        let (matched, steps) = glob_match_counted(&p, &[b'a'; 2000]);
        assert!(!matched);
        assert!(steps > 100 * 1000, "the worst case is quadratic: {steps}");
        assert!(steps <= bound(&p, &[b'a'; 2000]), "{steps}");
        let (matched, steps) = glob_match_counted(&b"*[ab]".repeat(100), &b"ab".repeat(3000));
        assert!(matched);
        assert!(steps <= bound(&b"*[ab]".repeat(100), &b"ab".repeat(3000)));
        let (matched, steps) = glob_match_counted(&b"*?".repeat(100), &[b'x'; 99]);
        assert!(!matched);
        assert!(steps <= bound(&b"*?".repeat(100), &[b'x'; 99]));
    }

    #[test]
    fn steps_never_exceed_the_bound_on_random_input() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let alphabet = b"ab*?[]^-\\";
        for _ in 0..20_000 {
            let p: Vec<u8> = (0..next(16)).map(|_| alphabet[next(alphabet.len())]).collect();
            let s: Vec<u8> = (0..next(24)).map(|_| alphabet[next(3)]).collect();
            let (_, steps) = glob_match_counted(&p, &s);
            assert!(steps <= bound(&p, &s), "{:?} {:?}: {steps}", p.escape_ascii(), s.escape_ascii());
        }
    }
}
