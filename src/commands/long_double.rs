//! An exact emulation of the x87 80-bit `long double` that Redis' INCRBYFLOAT uses on
//! x86-64 Linux: `strtold` parsing (correctly rounded, decimal and hex, with Redis'
//! checks), round-to-nearest-even addition, and `%.17Lf` formatting with the trailing
//! zeros trimmed. Everything is computed exactly with a small big-integer type.
//! Shared by INCRBYFLOAT and HINCRBYFLOAT.

use std::cmp::Ordering;

/// The exponent of the least significant bit of a denormal.
const MIN_EXP: i64 = -16445;
/// Every finite value is below `2^MAX_BITS`.
const MAX_BITS: i64 = 16384;
/// Redis' `MAX_LONG_DOUBLE_CHARS`: longer arguments are not numbers.
const MAX_CHARS: usize = 5 * 1024;

/// An unsigned big integer: little-endian 64-bit limbs, no trailing zero limb.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Big(Vec<u64>);

impl Big {
    fn from_u128(v: u128) -> Big {
        let mut b = Big(vec![v as u64, (v >> 64) as u64]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bits(&self) -> u64 {
        self.0.last().map_or(0, |&top| self.0.len() as u64 * 64 - u64::from(top.leading_zeros()))
    }

    fn bit(&self, i: u64) -> bool {
        self.0.get((i / 64) as usize).is_some_and(|limb| limb >> (i % 64) & 1 == 1)
    }

    /// Whether any bit below `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let full = (i / 64) as usize;
        if self.0.iter().take(full).any(|&l| l != 0) {
            return true;
        }
        let rem = i % 64;
        rem != 0 && self.0.get(full).is_some_and(|&l| l & ((1u64 << rem) - 1) != 0)
    }

    fn low_u128(&self) -> u128 {
        let lo = self.0.first().copied().unwrap_or(0);
        let hi = self.0.get(1).copied().unwrap_or(0);
        u128::from(lo) | u128::from(hi) << 64
    }

    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return self.clone();
        }
        let (limbs, rem) = ((n / 64) as usize, n % 64);
        let mut out = vec![0u64; limbs];
        out.reserve(self.0.len() + 1);
        let mut carry = 0u64;
        for &l in &self.0 {
            if rem == 0 {
                out.push(l);
            } else {
                out.push(l << rem | carry);
                carry = l >> (64 - rem);
            }
        }
        out.push(carry);
        let mut b = Big(out);
        b.trim();
        b
    }

    fn shr(&self, n: u64) -> Big {
        let (limbs, rem) = ((n / 64) as usize, n % 64);
        if limbs >= self.0.len() {
            return Big(Vec::new());
        }
        let src = &self.0[limbs..];
        let mut out = Vec::with_capacity(src.len());
        for (i, &l) in src.iter().enumerate() {
            if rem == 0 {
                out.push(l);
            } else {
                let next = src.get(i + 1).copied().unwrap_or(0);
                out.push(l >> rem | next << (64 - rem));
            }
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn mul_add_small(&mut self, m: u64, a: u64) {
        let mut carry = u128::from(a);
        for l in &mut self.0 {
            let v = u128::from(*l) * u128::from(m) + carry;
            *l = v as u64;
            carry = v >> 64;
        }
        if carry != 0 {
            self.0.push(carry as u64);
        }
        self.trim();
    }

    fn add(&self, o: &Big) -> Big {
        let n = self.0.len().max(o.0.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = false;
        for i in 0..n {
            let a = self.0.get(i).copied().unwrap_or(0);
            let b = o.0.get(i).copied().unwrap_or(0);
            let (s1, c1) = a.overflowing_add(b);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            out.push(s2);
            carry = c1 || c2;
        }
        out.push(u64::from(carry));
        let mut b = Big(out);
        b.trim();
        b
    }

    /// `self - o`, for `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = false;
        for (i, &a) in self.0.iter().enumerate() {
            let b = o.0.get(i).copied().unwrap_or(0);
            let (d1, b1) = a.overflowing_sub(b);
            let (d2, b2) = d1.overflowing_sub(u64::from(borrow));
            out.push(d2);
            borrow = b1 || b2;
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0.len().cmp(&o.0.len()).then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn pow10(n: u64) -> Big {
        let mut b = Big(vec![1]);
        let mut left = n;
        while left > 0 {
            let step = left.min(19);
            b.mul_add_small(10u64.pow(step as u32), 0);
            left -= step;
        }
        b
    }

    /// Divides by a small number, returning the remainder.
    fn divrem_small(&mut self, d: u64) -> u64 {
        let mut rem = 0u128;
        for l in self.0.iter_mut().rev() {
            let cur = rem << 64 | u128::from(*l);
            *l = (cur / u128::from(d)) as u64;
            rem = cur % u128::from(d);
        }
        self.trim();
        rem as u64
    }

    fn to_decimal(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.divrem_small(10_000_000_000_000_000_000));
        }
        let mut s = chunks.pop().map(|c| c.to_string()).unwrap_or_default();
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:019}"));
        }
        s
    }

    /// `(self / d, self % d != 0)` for a quotient below 2^128.
    fn div_small_quotient(&self, d: &Big) -> (u128, bool) {
        let mut rem = self.clone();
        let mut q = 0u128;
        let span = self.bits().saturating_sub(d.bits()) + 1;
        for i in (0..span.min(128)).rev() {
            let t = d.shl(i);
            if rem.cmp(&t) != Ordering::Less {
                rem = rem.sub(&t);
                q |= 1u128 << i;
            }
        }
        (q, !rem.is_zero())
    }
}

/// A finite long double `(-1)^neg * mant * 2^exp`, or an infinity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LongDouble {
    /// A finite value (zero when `mant` is 0).
    Finite {
        /// Negative.
        neg: bool,
        /// The 64-bit significand.
        mant: u64,
        /// The exponent of its least significant bit.
        exp: i64,
    },
    /// An infinity.
    Inf,
}

impl LongDouble {
    /// Positive zero.
    pub(crate) const ZERO: LongDouble = LongDouble::Finite { neg: false, mant: 0, exp: 0 };

    /// C's `(long double)x` for a finite double: exact. A non-finite `x` gives
    /// [`LongDouble::Inf`] (callers pass finite values).
    pub(crate) fn from_f64(x: f64) -> LongDouble {
        if !x.is_finite() {
            return LongDouble::Inf;
        }
        let bits = x.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i64;
        let fraction = bits & ((1 << 52) - 1);
        let (mant, exp) = if biased == 0 { (fraction, -1074) } else { (fraction | 1 << 52, biased - 1075) };
        LongDouble::Finite { neg: x.is_sign_negative(), mant, exp }
    }
}

/// Rounds `n * 2^exp` (plus a nonzero amount below `2^exp` when `sticky`, which
/// needs `n` to have at least 66 bits) to the nearest long double, ties to even.
fn round(neg: bool, n: &Big, exp: i64, sticky_in: bool) -> LongDouble {
    if n.is_zero() {
        return LongDouble::Finite { neg, mant: 0, exp: 0 };
    }
    let len = n.bits() as i64;
    let s = (len - 64).max(MIN_EXP - exp);
    let (mut mant, round_bit, sticky) = if s <= 0 {
        (n.shl((-s) as u64).low_u128() as u64, false, sticky_in)
    } else {
        let s = s as u64;
        (n.shr(s).low_u128() as u64, n.bit(s - 1), sticky_in || n.any_below(s - 1))
    };
    let mut e = exp + s;
    if round_bit && (sticky || mant & 1 == 1) {
        match mant.checked_add(1) {
            Some(m) => mant = m,
            None => {
                mant = 1 << 63;
                e += 1;
            }
        }
    }
    if mant == 0 {
        return LongDouble::Finite { neg, mant: 0, exp: 0 };
    }
    if i64::from(64 - mant.leading_zeros()) + e > MAX_BITS {
        return LongDouble::Inf;
    }
    LongDouble::Finite { neg, mant, exp: e }
}

/// Reads a decimal exponent, saturating far outside any useful range.
fn parse_exponent(s: &[u8]) -> Option<(i64, usize)> {
    let mut i = 0;
    let neg = match s.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let start = i;
    let mut v: i64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = (v * 10 + i64::from(s[i] - b'0')).min(1 << 40);
        i += 1;
    }
    if i == start {
        return None;
    }
    Some((if neg { -v } else { v }, i))
}

/// Parses a number as Redis' `string2ld` does (`strtold` over the whole argument, no
/// leading space, NaN and out-of-range results refused). `None` means "not a valid
/// float"; `Some(Inf)` comes from an explicit `inf`/`infinity`.
pub(crate) fn parse(s: &[u8]) -> Option<LongDouble> {
    if s.is_empty() || s.len() >= MAX_CHARS {
        return None;
    }
    // redis-server 7.0.15 refuses a NUL byte anywhere ("\x00", "1\x00", "\x001").
    if s.contains(&0) {
        return None;
    }
    if s.first().is_some_and(|&b| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')) {
        return None;
    }
    let (neg, body) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    if lower == b"inf" || lower == b"infinity" {
        return Some(LongDouble::Inf);
    }
    if lower.len() >= 2 && lower[0] == b'0' && lower[1] == b'x' {
        return parse_hex(neg, &body[2..]);
    }
    parse_decimal(neg, body)
}

fn parse_decimal(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let mut i = 0;
    let mut digits: Vec<u8> = Vec::new();
    let mut frac = 0i64;
    let mut seen_digit = false;
    while i < s.len() && s[i].is_ascii_digit() {
        seen_digit = true;
        if !(digits.is_empty() && s[i] == b'0') {
            digits.push(s[i] - b'0');
        }
        i += 1;
    }
    if i < s.len() && s[i] == b'.' {
        i += 1;
        while i < s.len() && s[i].is_ascii_digit() {
            seen_digit = true;
            frac += 1;
            if digits.is_empty() && s[i] == b'0' {
                // a leading zero of the fraction only moves the point
            } else {
                digits.push(s[i] - b'0');
            }
            i += 1;
        }
    }
    if !seen_digit {
        return None;
    }
    let mut exp10 = 0i64;
    if i < s.len() && (s[i] == b'e' || s[i] == b'E') {
        let (e, used) = parse_exponent(&s[i + 1..])?;
        exp10 = e;
        i += 1 + used;
    }
    if i != s.len() {
        return None;
    }
    while digits.last() == Some(&0) {
        digits.pop();
        frac -= 1;
    }
    if digits.is_empty() {
        return Some(LongDouble::Finite { neg, mant: 0, exp: 0 });
    }
    // value = D * 10^e10, D having `digits.len()` digits.
    let e10 = exp10 - frac;
    let magnitude = digits.len() as i64 + e10; // value < 10^magnitude
    if magnitude > 4934 {
        return None; // overflow: ERANGE with HUGE_VAL
    }
    if magnitude < -4952 {
        return None; // underflow to zero: ERANGE with 0
    }
    let mut d = Big(Vec::new());
    for chunk in digits.chunks(19) {
        let v = chunk.iter().fold(0u64, |acc, &x| acc * 10 + u64::from(x));
        d.mul_add_small(10u64.pow(chunk.len() as u32), v);
    }
    let value = if e10 >= 0 {
        round(neg, &d.mul(&Big::pow10(e10 as u64)), 0, false)
    } else {
        let den = Big::pow10((-e10) as u64);
        let t = d.bits() as i64 - den.bits() as i64;
        let k = 66 - t;
        let (num, den) = if k >= 0 { (d.shl(k as u64), den) } else { (d, den.shl((-k) as u64)) };
        let (q, inexact) = num.div_small_quotient(&den);
        round(neg, &Big::from_u128(q), -k, inexact)
    };
    check_range(value)
}

/// strtold's ERANGE results that Redis refuses: overflow and underflow to zero.
fn check_range(value: LongDouble) -> Option<LongDouble> {
    match value {
        LongDouble::Inf | LongDouble::Finite { mant: 0, .. } => None,
        v => Some(v),
    }
}

fn parse_hex(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let mut i = 0;
    let mut n = Big(Vec::new());
    let mut frac = 0i64;
    let mut seen_digit = false;
    let hex = |b: u8| (b as char).to_digit(16);
    while i < s.len() && hex(s[i]).is_some() {
        seen_digit = true;
        n.mul_add_small(16, u64::from(hex(s[i]).unwrap_or(0)));
        i += 1;
    }
    if i < s.len() && s[i] == b'.' {
        i += 1;
        while i < s.len() && hex(s[i]).is_some() {
            seen_digit = true;
            n.mul_add_small(16, u64::from(hex(s[i]).unwrap_or(0)));
            frac += 1;
            i += 1;
        }
    }
    if !seen_digit {
        return None; // "0x" alone: strtold reads "0" and stops at the x
    }
    let mut exp2 = 0i64;
    if i < s.len() && (s[i] == b'p' || s[i] == b'P') {
        let (e, used) = parse_exponent(&s[i + 1..])?;
        exp2 = e;
        i += 1 + used;
    }
    if i != s.len() {
        return None;
    }
    if n.is_zero() {
        return Some(LongDouble::Finite { neg, mant: 0, exp: 0 });
    }
    let e = exp2 - 4 * frac;
    let top = n.bits() as i64 + e;
    if !(MIN_EXP - 2..=MAX_BITS + 1).contains(&top) {
        return None;
    }
    check_range(round(neg, &n, e, false))
}

impl Big {
    /// `self * b`.
    fn mul(&self, b: &Big) -> Big {
        let a = self;
        let mut out = vec![0u64; a.0.len() + b.0.len() + 1];
        for (i, &x) in a.0.iter().enumerate() {
            let mut carry = 0u128;
            for (j, &y) in b.0.iter().enumerate() {
                let cur = u128::from(out[i + j]) + u128::from(x) * u128::from(y) + carry;
                out[i + j] = cur as u64;
                carry = cur >> 64;
            }
            let mut k = i + b.0.len();
            while carry != 0 {
                let cur = u128::from(out[k]) + carry;
                out[k] = cur as u64;
                carry = cur >> 64;
                k += 1;
            }
        }
        let mut r = Big(out);
        r.trim();
        r
    }
}

/// `(long long)ceill(v * 1000.0)` as Redis 7.0 computes a blocking timeout on x86-64: the
/// product rounded to a long double, rounded up to an integer; an infinity or a result
/// outside the i64 range gives `i64::MIN`, the x87 "integer indefinite".
pub(crate) fn times_1000_ceil_as_i64(v: LongDouble) -> i64 {
    let LongDouble::Finite { neg, mant, exp } = v else { return i64::MIN };
    let product = Big::from_u128(u128::from(mant) * 1000);
    let LongDouble::Finite { neg, mant, exp } = round(neg, &product, exp, false) else {
        return i64::MIN;
    };
    let (whole, fraction) = match exp {
        e if e >= 64 => return i64::MIN,
        e if e >= 0 => (u128::from(mant) << e, false),
        e if e > -64 => (u128::from(mant >> -e), mant & ((1u64 << -e) - 1) != 0),
        _ => (0, mant != 0),
    };
    // Ceiling: a positive value with a fraction rounds away from zero, a negative one
    // towards it.
    let magnitude = if fraction && !neg { whole + 1 } else { whole };
    match i64::try_from(magnitude) {
        Ok(m) if neg => -m,
        Ok(m) => m,
        Err(_) => i64::MIN,
    }
}

/// `a + b` rounded to a long double; `None` when the sum is infinite or NaN.
pub(crate) fn add(a: LongDouble, b: LongDouble) -> Option<LongDouble> {
    let (
        LongDouble::Finite { neg: na, mant: ma, exp: ea },
        LongDouble::Finite { neg: nb, mant: mb, exp: eb },
    ) = (a, b)
    else {
        return None;
    };
    if ma == 0 && mb == 0 {
        return Some(LongDouble::Finite { neg: na && nb, mant: 0, exp: 0 });
    }
    if ma == 0 {
        return Some(b);
    }
    if mb == 0 {
        return Some(a);
    }
    let emin = ea.min(eb);
    let x = Big::from_u128(u128::from(ma)).shl((ea - emin) as u64);
    let y = Big::from_u128(u128::from(mb)).shl((eb - emin) as u64);
    let (neg, sum) = if na == nb {
        (na, x.add(&y))
    } else {
        match x.cmp(&y) {
            Ordering::Equal => return Some(LongDouble::ZERO),
            Ordering::Greater => (na, x.sub(&y)),
            Ordering::Less => (nb, y.sub(&x)),
        }
    };
    match round(neg, &sum, emin, false) {
        LongDouble::Inf => None,
        v => Some(v),
    }
}

/// `%.17Lf` with the trailing zeros (and a trailing point) removed, `-0` printed as
/// `0`: Redis' `ld2string(..., LD_STR_HUMAN)`.
pub(crate) fn format_human(v: LongDouble) -> String {
    let LongDouble::Finite { neg, mant, exp } = v else {
        return if matches!(v, LongDouble::Inf) { "inf".into() } else { "0".into() };
    };
    let m = Big::from_u128(u128::from(mant));
    let text = if exp >= 0 {
        m.shl(exp as u64).to_decimal()
    } else {
        let mut scaled = m;
        scaled.mul_add_small(10u64.pow(17), 0);
        let sh = (-exp) as u64;
        let mut q = scaled.shr(sh);
        let round_bit = scaled.bit(sh - 1);
        let sticky = scaled.any_below(sh - 1);
        if round_bit && (sticky || q.bit(0)) {
            q = q.add(&Big::from_u128(1));
        }
        let mut digits = q.to_decimal();
        if digits.len() < 18 {
            digits = format!("{}{digits}", "0".repeat(18 - digits.len()));
        }
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() { int.to_string() } else { format!("{int}.{frac}") }
    };
    if neg && text != "0" { format!("-{text}") } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> Option<String> {
        let a = parse(a.as_bytes())?;
        let b = parse(b.as_bytes())?;
        add(a, b).map(format_human)
    }

    #[test]
    fn matches_redis_7_0_incrbyfloat() {
        // Replies of redis-server 7.0.15 (x86-64) to SET x A; INCRBYFLOAT x B.
        assert_eq!(incr("0.1", "0.2").as_deref(), Some("0.3"));
        assert_eq!(incr("5.0e3", "0").as_deref(), Some("5000"));
        assert_eq!(incr("0", "0.000003814697265625").as_deref(), Some("0.00000381469726562"));
        assert_eq!(incr("0", "1.5e-10").as_deref(), Some("0.00000000015"));
        assert_eq!(incr("0", "-0.00000000000000000001").as_deref(), Some("0"));
        assert_eq!(incr("0", "0x10").as_deref(), Some("16"));
        assert_eq!(incr("0", "1e-4940").as_deref(), Some("0"));
        assert!(parse(b"1e5000").is_none());
        assert!(parse(b"1e-5000").is_none());
        assert!(parse(b" 1").is_none());
        let big = incr("1e308", "1e308").unwrap_or_default();
        assert!(big.starts_with("1999999999999999999933717593116912913211"), "{big}");
        assert_eq!(big.len(), 309);
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            if let Some(v) = parse(&bytes) {
                let _ = add(v, v).map(format_human);
            }
        }

        #[test]
        fn integer_sums_are_exact(a in proptest::prelude::any::<i64>(), b in proptest::prelude::any::<i64>()) {
            // |a + b| < 2^64 fits the 64-bit significand: no rounding at all.
            let want = (i128::from(a) + i128::from(b)).to_string();
            proptest::prop_assert_eq!(incr(&a.to_string(), &b.to_string()), Some(want));
        }

        #[test]
        fn short_decimals_round_trip(m in 0u64..100_000_000_000_000_000, neg in proptest::prelude::any::<bool>()) {
            // Below 1 the error of the nearest long double (<= 2^-65) is far under
            // half of the 1e-17 step %.17Lf prints, so the input comes back.
            let text = format!("{}0.{m:017}", if neg { "-" } else { "" });
            let trimmed = text.trim_end_matches('0').trim_end_matches('.');
            let want = if trimmed == "-0" || trimmed.is_empty() || trimmed == "-" { "0" } else { trimmed };
            proptest::prop_assert_eq!(incr(&text, "0"), Some(want.to_string()));
        }
    }
}
