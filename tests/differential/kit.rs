//! The generator toolkit shared by the family modules: a seeded RNG, argument pools that
//! lean towards edge cases, the [`Op`] a generator produces and how its replies compare.

/// A small seeded PRNG (splitmix64), so a seed reproduces a whole run.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    /// True with probability `percent`/100.
    pub fn percent(&mut self, percent: u32) -> bool {
        self.below(100) < percent as usize
    }
}

/// How the two replies of one op are compared.
#[derive(Debug, Clone, PartialEq)]
pub enum Cmp {
    /// Byte-for-byte equal.
    Exact,
    /// Arrays equal as multisets (SMEMBERS, KEYS, HKEYS…); anything else exactly.
    Unordered,
    /// Flat arrays of pairs equal as multisets of pairs (HGETALL).
    PairsUnordered,
    /// Integers within `slack` when both are ≥ 0 (TTL ±2, PTTL ±2000…), counted in units of
    /// `unit_ms` milliseconds (1000 for TTL, 1 for PTTL) and widened by how far apart the two
    /// sides' clocks could be; negative codes (-1, -2) and everything else exactly.
    Tolerance { slack: i64, unit_ms: i64 },
    /// A SCAN-family command: iterated to the end on each side with argument `cursor_arg`
    /// as the cursor; the collected elements (pairs when `pairs`) are compared as sets.
    Scan { cursor_arg: usize, pairs: bool },
    /// DBSIZE: Redis counts keys that expired but were not reclaimed yet (a logically
    /// deleted key lingers until lazy or active expiry removes it, at a time of Redis'
    /// choosing), so the engine may answer either Redis' number or the live key count
    /// (`KEYS *` on the reference).
    DbSize,
    /// A random reply, checked by property against a snapshot of the key taken from the
    /// reference before the command.
    Random(Random),
    /// A lex-range command on the zset at argument `key_arg`: compared exactly while every
    /// member of that key has the same score on the reference, skipped on both sides
    /// otherwise. Redis leaves lex ranges over mixed scores unspecified (its answer walks
    /// score order); the engine answers in member order, as docs/layout.md's Subkey CF stores it.
    Lex { key_arg: usize },
    /// PFDEBUG DECODE of the key at argument `key_arg`: compared exactly while that key's
    /// value on the reference is at most [`DECODE_MAX_BYTES`] long, skipped on both sides
    /// otherwise: a sparse HLL that SETRANGE at the largest offset grew to 512 MB decodes
    /// to gigabytes of text, which takes Redis minutes.
    Decode { key_arg: usize },
    /// EXEC: an array is compared element by element, each with the mode of the command
    /// queued at that position; anything else (an error, a WATCH abort's nil) exactly.
    Exec,
    /// Not a command: the following commands go to client connection `n` on both sides.
    Conn(usize),
}

/// What a random command is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Snapshot {
    /// `SMEMBERS key`.
    Set,
    /// `HGETALL key` (field → value).
    Hash,
    /// `ZRANGE key 0 -1 WITHSCORES` (member → score).
    Zset,
    /// `KEYS *`.
    Keys,
}

/// A random command's shape (SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER, RANDOMKEY).
#[derive(Debug, Clone, PartialEq)]
pub struct Random {
    pub snapshot: Snapshot,
    /// Argument 1 is the key (ignored for [`Snapshot::Keys`]).
    /// The count argument, if given (a reply is then an array).
    pub count: Option<i64>,
    /// Replies carry values/scores after each element (WITHVALUES / WITHSCORES).
    pub with_values: bool,
    /// The command removes what it returns (SPOP): both sides are resynchronised after.
    pub pops: bool,
}

/// One generated command and how to compare its replies.
#[derive(Debug, Clone)]
pub struct Op {
    pub argv: Vec<Vec<u8>>,
    pub cmp: Cmp,
}

impl Op {
    /// The command as a redis-cli style line with non-printable bytes escaped.
    pub fn display(&self) -> String {
        self.argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
    }
}

/// `"…"` with `\xNN` escapes, like redis-cli prints.
pub fn quote(bytes: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in bytes {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

/// Anything usable as one argument.
pub trait Arg {
    fn arg(self) -> Vec<u8>;
}
impl Arg for &str {
    fn arg(self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for String {
    fn arg(self) -> Vec<u8> {
        self.into_bytes()
    }
}
impl Arg for Vec<u8> {
    fn arg(self) -> Vec<u8> {
        self
    }
}
impl Arg for &[u8] {
    fn arg(self) -> Vec<u8> {
        self.to_vec()
    }
}
impl Arg for i64 {
    fn arg(self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}
impl Arg for usize {
    fn arg(self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}

/// A command generator: the command's lowercase name (what [`crate::ENABLED_FAMILIES`]
/// filters on), a weight, and the function producing one op.
pub struct CmdGen {
    pub name: &'static str,
    pub weight: u32,
    pub make: fn(&mut G) -> Op,
    /// The family's preferred keys (set from [`crate::FAMILIES`]).
    pub home: &'static [&'static [u8]],
}

/// Shorthand for a table entry.
pub fn cmd(name: &'static str, weight: u32, make: fn(&mut G) -> Op) -> CmdGen {
    CmdGen { name, weight, make, home: &[] }
}

pub fn exact(argv: Vec<Vec<u8>>) -> Op {
    Op { argv, cmp: Cmp::Exact }
}
pub fn lex(argv: Vec<Vec<u8>>, key_arg: usize) -> Op {
    Op { argv, cmp: Cmp::Lex { key_arg } }
}
/// The longest value [`Cmp::Decode`] compares.
pub const DECODE_MAX_BYTES: i64 = 1 << 20;

pub fn decode(argv: Vec<Vec<u8>>, key_arg: usize) -> Op {
    Op { argv, cmp: Cmp::Decode { key_arg } }
}
pub fn unordered(argv: Vec<Vec<u8>>) -> Op {
    Op { argv, cmp: Cmp::Unordered }
}
pub fn pairs(argv: Vec<Vec<u8>>) -> Op {
    Op { argv, cmp: Cmp::PairsUnordered }
}
/// `NAME key… timeout` (BLPOP, BRPOP, BZPOPMIN, BZPOPMAX) with a short timeout.
pub fn blocking_pop(g: &mut G, name: &str) -> Op {
    let mut a = argv![name];
    a.extend(g.keys(3));
    a.push(g.block_timeout());
    exact(a)
}

/// `NAME [timeout] numkeys key… <end> [COUNT n]`: LMPOP and ZMPOP, or with `blocking`
/// BLMPOP and BZMPOP with a short timeout; `end` draws LEFT/RIGHT or MIN/MAX.
pub fn mpop(g: &mut G, name: &str, blocking: bool, end: fn(&mut G) -> Vec<u8>) -> Op {
    let mut a = argv![name];
    if blocking {
        a.push(g.block_timeout());
    }
    crate::gen_set::numkeys(g, &mut a);
    a.push(end(g));
    if g.chance(40) {
        a.push(g.kw("COUNT"));
        a.push(g.count());
    }
    exact(a)
}

/// A time in seconds (TTL, EXPIRETIME), equal within `slack` seconds.
pub fn within_seconds(argv: Vec<Vec<u8>>, slack: i64) -> Op {
    Op { argv, cmp: Cmp::Tolerance { slack, unit_ms: 1000 } }
}

/// A time in milliseconds (PTTL, PEXPIRETIME), equal within `slack` ms.
pub fn within_millis(argv: Vec<Vec<u8>>, slack: i64) -> Op {
    Op { argv, cmp: Cmp::Tolerance { slack, unit_ms: 1 } }
}

/// The key pool: small, so types collide (WRONGTYPE) and keys are overwritten, deleted and
/// recreated. Includes an empty key and binary keys.
pub const KEYS: &[&[u8]] = &[b"k0", b"k1", b"k2", b"k3", b"k4", b"", b"\x00\xff", b"{k}x"];

/// Values for strings, fields, members: empty, binary, numeric-looking and not.
pub const VALUES: &[&[u8]] = &[
    b"",
    b"a",
    b"b",
    b"c",
    b"abc",
    b"hello world",
    b"0",
    b"1",
    b"-1",
    b"10",
    b"42",
    b"007",
    b"3.5",
    b"-2.25",
    b"1e3",
    b"0x10",
    b" 1",
    b"1 ",
    b"inf",
    b"-inf",
    b"nan",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"9223372036854775808",
    b"\x00",
    b"a\x00b",
    b"\xff\xfe\xfd",
    b"\xc3\x28",
    b"k0",
    b"k1",
    b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
];

/// Members/fields: a smaller pool so collections overlap and repeat; integers for intsets.
pub const MEMBERS: &[&[u8]] =
    &[b"a", b"b", b"c", b"d", b"e", b"", b"\x00", b"\xff", b"1", b"2", b"10", b"-3", b"a b"];

/// Integer arguments: ordinary, edge and invalid.
pub const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "-2",
    "5",
    "10",
    "100",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "x",
    "",
    "1.5",
    " 1",
];

/// Scores for ZADD/ZINCRBY/weights.
pub const SCORES: &[&str] = &[
    "0", "1", "-1", "2", "2.5", "-2.5", "3", "10", "0.1", "1e308", "-1e308", "inf", "-inf", "+inf", "-0",
    "x", "nan", "",
];

/// Score-range bounds.
pub const SCORE_BOUNDS: &[&str] = &[
    "-inf", "+inf", "inf", "0", "1", "(1", "2", "(2.5", "-1", "(-1", "10", "(inf", "(-inf", "x", "((1", "",
    "3",
];

/// Lex-range bounds.
pub const LEX_BOUNDS: &[&str] = &["-", "+", "[a", "(a", "[b", "(c", "[", "(", "[e", "a", "[\x00", "(\x7f"];

/// List/range indexes: small positive and negative, huge, bounds, invalid.
pub const INDEXES: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "-2",
    "3",
    "5",
    "-5",
    "100",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
    "x",
];

/// Glob patterns for KEYS/SCAN MATCH.
pub const PATTERNS: &[&str] = &["*", "k*", "k?", "k[0-2]", "k[^0]", "*1*", "\\*", "", "[", "a*", "{k}*", "?"];

/// The per-op context a generator draws from.
pub struct G<'a> {
    pub rng: &'a mut Rng,
    /// Keys this family prefers (most of the time), so that not every command of a run
    /// with many families enabled hits WRONGTYPE; the whole pool is still used.
    pub home: &'static [&'static [u8]],
}

impl G<'_> {
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.rng.below(items.len())]
    }
    pub fn chance(&mut self, percent: u32) -> bool {
        self.rng.percent(percent)
    }
    pub fn key(&mut self) -> Vec<u8> {
        if !self.home.is_empty() && self.chance(75) {
            self.pick(self.home).to_vec()
        } else {
            self.pick(KEYS).to_vec()
        }
    }
    /// 1..=max keys, possibly repeated.
    pub fn keys(&mut self, max: usize) -> Vec<Vec<u8>> {
        let n = 1 + self.rng.below(max);
        (0..n).map(|_| self.key()).collect()
    }
    pub fn value(&mut self) -> Vec<u8> {
        self.pick(VALUES).to_vec()
    }
    pub fn member(&mut self) -> Vec<u8> {
        if self.chance(10) { self.value() } else { self.pick(MEMBERS).to_vec() }
    }
    /// 1..=max members, possibly repeated.
    pub fn members(&mut self, max: usize) -> Vec<Vec<u8>> {
        let n = 1 + self.rng.below(max);
        (0..n).map(|_| self.member()).collect()
    }
    /// Mostly small integers, sometimes an edge or invalid one.
    pub fn int(&mut self) -> Vec<u8> {
        if self.chance(70) { self.rng.range(-10, 20).arg() } else { self.pick(INTS).arg() }
    }
    /// A count for SPOP/LPOP/…: mostly small non-negative.
    pub fn count(&mut self) -> Vec<u8> {
        if self.chance(80) { self.rng.range(0, 6).arg() } else { self.pick(INTS).arg() }
    }
    /// The count of SRANDMEMBER/HRANDFIELD/ZRANDMEMBER/SPOP and its value: small positive,
    /// small negative (repeats allowed) when `negative`, or an edge/invalid one. Never a
    /// huge negative count: Redis 7.0 accepts down to -LONG_MAX and would try to build a
    /// reply of 2^63 elements.
    pub fn random_count(&mut self, negative: bool) -> (Vec<u8>, Option<i64>) {
        let text = match self.rng.below(10) {
            0..=5 => self.rng.range(0, 6).to_string(),
            6 | 7 if negative => self.rng.range(-6, -1).to_string(),
            _ => self
                .pick(&["9223372036854775807", "-9223372036854775808", "100", "x", "", "1.5", "-0"])
                .to_string(),
        };
        let value = text.parse().ok();
        (text.into_bytes(), value)
    }
    pub fn index(&mut self) -> Vec<u8> {
        if self.chance(60) { self.rng.range(-6, 6).arg() } else { self.pick(INDEXES).arg() }
    }
    pub fn score(&mut self) -> Vec<u8> {
        if self.chance(60) { self.rng.range(-3, 5).arg() } else { self.pick(SCORES).arg() }
    }
    pub fn score_bound(&mut self) -> Vec<u8> {
        self.pick(SCORE_BOUNDS).arg()
    }
    pub fn lex_bound(&mut self) -> Vec<u8> {
        self.pick(LEX_BOUNDS).arg()
    }
    /// An increment for INCRBYFLOAT/HINCRBYFLOAT.
    pub fn float(&mut self) -> Vec<u8> {
        self.pick(&[
            "0.1",
            "1",
            "-1.5",
            "3.0e2",
            "1e308",
            "-1e308",
            "inf",
            "x",
            "5",
            "0",
            "-0.25",
            "1.7976931348623157e308",
        ])
        .arg()
    }
    /// A blocking command's timeout in seconds: short enough that Redis answers nil soon
    /// when nothing can be served (never 0, which waits forever), or invalid.
    pub fn block_timeout(&mut self) -> Vec<u8> {
        self.pick(&["0.01", "0.001", "0.002", "1e-3", "-1", "x", "inf", "-0.5", "1e400", "0x"]).arg()
    }
    pub fn pattern(&mut self) -> Vec<u8> {
        self.pick(PATTERNS).arg()
    }
    /// A relative expiry in seconds that never elapses during a run (≥ 1000 s), is in
    /// the past (≤ 0: deletes at once), or is invalid.
    pub fn seconds(&mut self) -> Vec<u8> {
        self.pick(&[
            "1000",
            "100000",
            "3000000",
            "0",
            "-1",
            "-100",
            "x",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775",
            "1.5",
        ])
        .arg()
    }
    /// As [`G::seconds`], in milliseconds (≥ 1,000,000 ms when positive).
    pub fn millis(&mut self) -> Vec<u8> {
        self.pick(&[
            "1000000",
            "100000000",
            "0",
            "-1",
            "x",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775",
            "1.5",
        ])
        .arg()
    }
    /// An absolute unix time in seconds: far future (exact comparisons), past, or edge.
    pub fn unix_seconds(&mut self) -> Vec<u8> {
        self.pick(&[
            "4102444800",
            "4102444801",
            "32503680000",
            "1",
            "0",
            "-1",
            "1000000000",
            "9223372036854775807",
            "x",
        ])
        .arg()
    }
    /// As [`G::unix_seconds`], in milliseconds.
    pub fn unix_millis(&mut self) -> Vec<u8> {
        self.pick(&[
            "4102444800000",
            "4102444800123",
            "32503680000000",
            "1",
            "0",
            "-1",
            "1000000000000",
            "9223372036854775807",
            "x",
        ])
        .arg()
    }
    /// One of `words`, in random case.
    pub fn pick_kw(&mut self, words: &[&str]) -> Vec<u8> {
        let w = self.pick(words);
        self.kw(w)
    }
    /// Random-case spelling of a keyword, to test case-insensitivity.
    pub fn kw(&mut self, word: &str) -> Vec<u8> {
        match self.rng.below(4) {
            0 => word.to_ascii_lowercase().arg(),
            _ => word.arg(),
        }
    }
}
