//! Products kept in 32 bits on a Cortex-M0, which cannot multiply into 64.
//!
//! Why a module for a multiply: the Cortex-M0 and M0+ (ARMv6-M, `thumbv6m-none-eabi`) have no
//! 32 × 32 → 64-bit multiply, so every `u64` product is a call to `__aeabi_lmul`, a 64 × 64
//! multiply of 37 instructions. A retry made 8 such calls with 32-bit ticks, a quarter of its
//! instructions there (docs/performance.md, "relent-core on the firmware's boards"): 6 in the ratio
//! budget's comparison, which [`NO_WIDE_MULTIPLY`] moves to 32-bit words while the counts allow
//! (`budget.rs`), one in the backoff's doubling, now a shift on every target (`policy.rs`), and
//! one here, in the jitter's draw (Lemire's multiply, [`crate::jitter`]). There the product is
//! made from 32-bit multiplies of 16-bit halves: two when the delay's span in ticks fits in 16
//! bits (65 s at 1 kHz, as it almost always does), four otherwise. With 64-bit ticks the draw's
//! product is 128 bits wide, four calls to `__aeabi_lmul`; while the span fits in 32 bits (49 days
//! at 1 kHz, 71 minutes at 1 MHz) it is two such 32-bit products instead.
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
///
/// `--cfg relent_no_wide_multiply` (in `RUSTFLAGS`) makes it true on any target, so that the
/// host's tests, property tests and fuzzing, and the evidence simulations, whose millions of draws
/// must write the same files, run the Cortex-M0's arithmetic as well: CI does.
pub(crate) const NO_WIDE_MULTIPLY: bool =
    cfg!(any(relent_no_wide_multiply, all(target_arch = "arm", not(target_has_atomic = "32"))));

/// `a × b` exactly, as its high and low words.
#[allow(clippy::cast_possible_truncation)] // Splitting a wide product into its two words.
#[inline(always)]
pub(crate) fn wide_mul(a: Ticks, b: Ticks) -> (Ticks, Ticks) {
    if NO_WIDE_MULTIPLY {
        #[cfg(feature = "ticks-u32")]
        return by_words(a, b);
        #[cfg(not(feature = "ticks-u32"))]
        if let Some(product) = by_double_words(a, b) {
            return product;
        }
    }
    let product = Wide::from(a).wrapping_mul(Wide::from(b));
    ((product >> Ticks::BITS) as Ticks, product as Ticks)
}

/// `a × b` exactly, as its high and low words, from two 32-bit multiplies when `b` fits in 16 bits;
/// `None` otherwise.
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

/// `a × b` exactly, as its high and low words, from 32-bit multiplies: two when `b` fits in 16
/// bits ([`by_half_word`]), four otherwise ([`by_quarter_words`]).
#[inline(always)]
pub(crate) fn by_words(a: u32, b: u32) -> (u32, u32) {
    match by_half_word(a, b) {
        Some(product) => product,
        None => by_quarter_words(a, b),
    }
}

/// `a × b` exactly, as its high and low words, from the four products of their 16-bit halves: for
/// a delay's span above 65 s at 1 kHz, 65 ms at 1 MHz. Out of line, so that the common span's two
/// multiplies stay as short as they were (inlined, this path took 4 instructions from every draw
/// on a Cortex-M0, whose compiler then split the span before the loop).
#[inline(never)]
pub(crate) const fn by_quarter_words(a: u32, b: u32) -> (u32, u32) {
    // Each product is below 2^32. `middle` gathers what lands on bits 16 to 47: below 3 × 2^16,
    // so it cannot wrap; its carry joins the high word, which is the product's top half and so
    // below 2^32 as well.
    let (a_low, a_high, b_low, b_high) = (a & 0xFFFF, a >> 16, b & 0xFFFF, b >> 16);
    let low_low = a_low.wrapping_mul(b_low);
    let low_high = a_low.wrapping_mul(b_high);
    let high_low = a_high.wrapping_mul(b_low);
    let high_high = a_high.wrapping_mul(b_high);
    let middle = (low_low >> 16).wrapping_add(low_high & 0xFFFF).wrapping_add(high_low & 0xFFFF);
    let low = (middle << 16) | (low_low & 0xFFFF);
    let high = high_high.wrapping_add(low_high >> 16).wrapping_add(high_low >> 16).wrapping_add(middle >> 16);
    (high, low)
}

/// `a × b` exactly, as its high and low 64-bit words, from [`by_words`]' 32-bit products when `b`
/// fits in 32 bits (a delay's span below 49 days at 1 kHz, 71 minutes at 1 MHz); `None` otherwise.
/// With 64-bit ticks on a Cortex-M0, the draw's 128-bit product was four calls to `__aeabi_lmul`.
#[cfg_attr(feature = "ticks-u32", allow(dead_code))] // Only 64-bit ticks need it.
#[allow(clippy::cast_possible_truncation)] // Splitting words into halves.
#[inline(always)]
pub(crate) fn by_double_words(a: u64, b: u64) -> Option<(u64, u64)> {
    if b > 0xFFFF_FFFF {
        return None;
    }
    // a × b = (upper × 2^32 + lower) × b, with upper and lower a's 32-bit halves: below 2^96. Bits
    // 32 to 63 are the sum of the lower product's high word and the upper product's low word
    // (below 2^33), whose carry joins the upper product's high word in the high 64 bits.
    let (lower_high, lower_low) = by_words(a as u32, b as u32);
    let (upper_high, upper_low) = by_words((a >> 32) as u32, b as u32);
    let middle = u64::from(lower_high).wrapping_add(u64::from(upper_low));
    let low = (middle << 32) | u64::from(lower_low);
    let high = u64::from(upper_high).wrapping_add(middle >> 32);
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

    /// Factors at the edges of each 16- and 32-bit half.
    const EDGES: [u32; 13] = [
        0,
        1,
        2,
        0xFFFE,
        0xFFFF,
        0x1_0000,
        0x1_0001,
        0x7FFF_FFFF,
        0x8000_0000,
        0xFFFF_0000,
        0xFFFF_FFFE,
        0xFFFF_FFFF,
        0x1234_5678,
    ];

    #[test]
    fn the_four_part_product_is_exact_for_every_width_of_either_factor() {
        for a in EDGES {
            for b in EDGES {
                assert_eq!(by_words(a, b), reference(a, b), "{a} × {b}");
            }
        }
        use rand_xoshiro::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0x4_5EED);
        for _ in 0..if cfg!(miri) { 1_000 } else { 200_000 } {
            // Factors of every width, so that both the two-part and the four-part paths run.
            let a = rng.next_u32() >> (rng.next_u32() % 32);
            let b = rng.next_u32() >> (rng.next_u32() % 32);
            assert_eq!(by_words(a, b), reference(a, b), "{a} × {b}");
        }
    }

    #[test]
    fn the_double_word_product_is_exact_and_declines_a_factor_of_33_bits() {
        let reference = |a: u64, b: u64| {
            let p = u128::from(a) * u128::from(b);
            ((p >> 64) as u64, p as u64)
        };
        let wide = EDGES
            .iter()
            .flat_map(|&high| EDGES.iter().map(move |&low| u64::from(high) << 32 | u64::from(low)));
        for a in wide.clone() {
            for b in EDGES.map(u64::from) {
                assert_eq!(by_double_words(a, b), Some(reference(a, b)), "{a} × {b}");
            }
        }
        for a in wide {
            for b in [1 << 32, (1 << 32) + 1, u64::MAX] {
                assert_eq!(by_double_words(a, b), None, "{a} × {b}");
            }
        }
        use rand_xoshiro::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0x6_5EED);
        for _ in 0..if cfg!(miri) { 1_000 } else { 200_000 } {
            let a = rng.next_u64() >> (rng.next_u32() % 64);
            let b = u64::from(rng.next_u32() >> (rng.next_u32() % 32));
            assert_eq!(by_double_words(a, b), Some(reference(a, b)), "{a} × {b}");
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
