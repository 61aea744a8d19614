//! xorshift64, a small seeded generator: the same seed gives the same run. Included by path
//! where a test or benchmark needs one (`#[path = ".../common/rng.rs"] mod rng;`).

/// The generator's state; any seed but 0.
pub struct Rng(pub u64);

impl Rng {
    /// The next number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
