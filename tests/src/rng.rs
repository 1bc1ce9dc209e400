//! Deterministic randomness for tests.

use rand_core::RngCore;

/// Always returns the same word: `Fixed::top()` puts every jittered delay at the top of its window
/// (the nominal delay for full jitter), `Fixed::bottom()` at the bottom.
#[derive(Debug, Clone, Copy)]
pub struct Fixed(pub u64);

impl Fixed {
    /// Every draw at the top of its interval.
    pub const fn top() -> Self {
        Self(u64::MAX)
    }
    /// Every draw at the bottom of its interval.
    pub const fn bottom() -> Self {
        Self(0)
    }
}

impl RngCore for Fixed {
    fn next_u32(&mut self) -> u32 {
        (self.0 >> 32) as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        rand_core::impls::fill_bytes_via_next(self, dst);
    }
}

/// A seeded, fast, well-distributed PRNG for simulations and properties.
pub fn seeded(seed: u64) -> rand_xoshiro::Xoshiro256PlusPlus {
    use rand_core::SeedableRng;
    rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed)
}
