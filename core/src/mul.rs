//! Products kept in 32 bits on a Cortex-M0, which cannot multiply into 64.
//!
//! Why a module for a multiply: the Cortex-M0 and M0+ (ARMv6-M, `thumbv6m-none-eabi`) have no
//! 32 × 32 → 64-bit multiply, so every `u64` product is a call to `__aeabi_lmul`, a 64 × 64
//! multiply of 37 instructions. A retry made 8 such calls with 32-bit ticks, a quarter of its
//! instructions there (docs/performance.md, "relent-core on the firmware's boards"): 6 in the ratio
//! budget's comparison, which [`NO_WIDE_MULTIPLY`] moves to 32-bit words while the counts allow
//! (`budget.rs`), one in the backoff's doubling, now a shift on every target (`policy.rs`), and
//! one here, in the jitter's draw (Lemire's multiply, [`crate::jitter`]). Its second factor, the
//! delay's span in ticks, is almost always below 2^16 (65 s at 1 kHz); split in 16-bit halves, the
//! product is two 32-bit multiplies inline.
//!
//! Other targets multiply natively and keep the one product they always had: on a Cortex-M3
//! (`umull`) the split measured 11 instructions more a retry, and the ratio's 32-bit comparison 60
//! bytes more of flash. No stable `cfg` names the Arm architecture; ARMv6-M is the M-profile
//! without compare-and-swap, which `target_has_atomic` does name (ARMv4T and ARMv5TE lack it too,
//! and take the same paths, exact there as well). Both paths are compiled and tested on every
//! target.

use crate::time::{Ticks, Wide};

/// Whether the target has no 32 × 32 → 64-bit multiply (ARMv6-M, told by the proxy above): where
/// it is true, the core keeps its products in 32 bits. The one place that says so.
pub(crate) const NO_WIDE_MULTIPLY: bool = cfg!(all(target_arch = "arm", not(target_has_atomic = "32")));

/// `a × b` exactly, as its high and low words.
#[allow(clippy::cast_possible_truncation)] // Splitting a wide product into its two words.
#[inline(always)]
pub(crate) fn wide_mul(a: Ticks, b: Ticks) -> (Ticks, Ticks) {
    #[cfg(feature = "ticks-u32")]
    if NO_WIDE_MULTIPLY {
        if let Some(product) = by_half_word(a, b) {
            return product;
        }
    }
    let product = Wide::from(a).wrapping_mul(Wide::from(b));
    ((product >> Ticks::BITS) as Ticks, product as Ticks)
}

/// `a × b` exactly, as its high and low words, from two 32-bit multiplies when `b` fits in 16 bits;
/// `None` otherwise.
#[cfg_attr(not(feature = "ticks-u32"), allow(dead_code))] // Only 32-bit ticks split.
#[inline(always)]
pub(crate) const fn by_half_word(a: u32, b: u32) -> Option<(u32, u32)> {
    if b > 0xFFFF {
        return None;
    }
    // a × b = high × b × 2^16 + low × b, with high and low a's 16-bit halves. Each partial product
    // is below 2^32. The high word is (high × b + (low × b >> 16)) >> 16: that sum is below
    // (2^16 - 1)^2 + 2^16 < 2^32, so neither step wraps.
    let upper = (a >> 16).wrapping_mul(b);
    let lower = (a & 0xFFFF).wrapping_mul(b);
    let high = upper.wrapping_add(lower >> 16) >> 16;
    let low = (upper << 16).wrapping_add(lower);
    Some((high, low))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `a × b` in `u64`, as its two words.
    fn reference(a: u32, b: u32) -> (u32, u32) {
        let p = u64::from(a) * u64::from(b);
        ((p >> 32) as u32, p as u32)
    }

    #[test]
    fn the_split_product_is_exact_at_the_extremes_and_declines_a_wide_factor() {
        let edges =
            [0, 1, 2, 0xFFFE, 0xFFFF, 0x1_0000, 0x1_0001, 0x7FFF_FFFF, 0x8000_0000, u32::MAX - 1, u32::MAX];
        for a in edges {
            for b in [0, 1, 2, 3, 100, 0x8000, 0xFFFE, 0xFFFF] {
                assert_eq!(by_half_word(a, b), Some(reference(a, b)), "{a} × {b}");
            }
            for b in [0x1_0000, 0x1_0001, u32::MAX] {
                assert_eq!(by_half_word(a, b), None, "{a} × {b}");
            }
        }
    }

    #[test]
    fn the_split_product_is_exact_for_many_factors() {
        use rand_xoshiro::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0x5EED);
        // Miri interprets each multiply: a thousand there (CI runs it on three targets).
        for _ in 0..if cfg!(miri) { 1_000 } else { 200_000 } {
            let a = rng.next_u32();
            // Second factors of every width up to 16 bits, not mostly 16-bit ones.
            let b = (rng.next_u32() & 0xFFFF) >> (rng.next_u32() % 16);
            assert_eq!(by_half_word(a, b), Some(reference(a, b)), "{a} × {b}");
        }
    }

    #[test]
    fn the_wide_product_is_exact() {
        for (a, b) in
            [(0, 0), (Ticks::MAX, Ticks::MAX), (Ticks::MAX, 0xFFFF), (12_345, 67_890), (Ticks::MAX, 1)]
        {
            let p = Wide::from(a) * Wide::from(b);
            assert_eq!(wide_mul(a, b), ((p >> Ticks::BITS) as Ticks, p as Ticks));
        }
    }
}
