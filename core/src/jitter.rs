//! Jitter: how much randomness goes into each retry delay, and the one sampling routine the core
//! uses.
//!
//! Why jitter at all (seed 000, "Jitter"): without it, every client that failed at the same instant
//! backs off by the same amount and returns at the same instant, as a wave as tall as the one that
//! failed. Brooker's "Exponential Backoff And Jitter" (AWS, 2015) measured the alternatives and found
//! full jitter both finishes the work sooner and makes fewer calls than plain exponential backoff,
//! which is why [`Jitter::Full`] is the default here and in seed 003.
//!
//! Randomness is an input: the caller hands in a `rand_core::RngCore` (a hardware RNG on firmware,
//! a PRNG seeded from OS entropy on a server). A fixed seed shared by a fleet makes every device
//! draw the same "random" delays, which is exactly the synchronised wave jitter exists to break.
//!
//! Sampling is unbiased (Lemire's multiply-and-reject) and integer-only. The rejection loop is
//! bounded so that a broken RNG (one that returns the same word forever) cannot hang the caller;
//! after [`MAX_REJECTIONS`] rejections the last draw is used with its negligible bias.

use crate::time::Ticks;
use rand_core::RngCore;

/// How a computed backoff delay `d` is randomised.
///
/// | variant | delay | source |
/// |---|---|---|
/// | `None` | `d` | |
/// | `Full` | uniform in `[0, d]` | seed 000, seed 003, AWS |
/// | `Equal` | `d/2` + uniform in `[0, d/2]` | AWS |
/// | `Decorrelated` | `min(max_delay, uniform(base, 3 × previous delay))`, ignoring `d` | AWS |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Jitter {
    /// Wait exactly the computed delay. Synchronised clients stay synchronised.
    None,
    /// Uniform in `[0, d]`: the default, and the best of the AWS measurements.
    #[default]
    Full,
    /// Half the delay fixed, half random: never shorter than `d/2`.
    Equal,
    /// Each delay drawn from `[base, 3 × previous]`, capped at the maximum delay.
    Decorrelated,
}

impl Jitter {
    /// The stable snake_case name of this mode.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Full => "full",
            Self::Equal => "equal",
            Self::Decorrelated => "decorrelated",
        }
    }
}

/// Rejections after which a draw is accepted as it is (see the module doc).
pub(crate) const MAX_REJECTIONS: u32 = 16;

/// One uniformly random word as wide as [`Ticks`].
#[inline]
fn draw<R: RngCore + ?Sized>(rng: &mut R) -> Ticks {
    #[cfg(not(feature = "ticks-u32"))]
    return rng.next_u64();
    #[cfg(feature = "ticks-u32")]
    return rng.next_u32();
}

/// A uniformly distributed integer in `[lo, hi]`, both ends included. Returns `lo` when
/// `hi <= lo`.
// One draw site and plain word splits: the RNG's code is inlined once, and nothing goes through
// the stack (on a Cortex-M3, 120 bytes less than a split through an array).
#[cfg_attr(not(target_os = "none"), inline(always))]
pub(crate) fn uniform_inclusive<R: RngCore + ?Sized>(rng: &mut R, lo: Ticks, hi: Ticks) -> Ticks {
    let Some(span) = hi.checked_sub(lo) else {
        return lo;
    };
    if span == 0 {
        return lo;
    }
    // 0 stands for the whole Ticks range, where every word is already uniform.
    let range = span.wrapping_add(1);
    // Lemire, "Fast Random Integer Generation in an Interval" (2019): the high word of x * range
    // is uniform in [0, range) once draws whose low word falls below 2^b mod range are rejected (b:
    // the tick width). That threshold is below `range`, so it is computed (a division) only for a
    // low word below `range`: a draw in 2^b / range, almost never for a delay in ticks.
    let mut threshold = None;
    let mut offset = 0;
    for _ in 0..MAX_REJECTIONS {
        let word = draw(rng);
        if range == 0 {
            offset = word;
            break;
        }
        let (high, low) = crate::mul::wide_mul(word, range);
        offset = high;
        if low >= range
            || low >= *threshold.get_or_insert_with(|| range.wrapping_neg().checked_rem(range).unwrap_or(0))
        {
            break;
        }
    }
    // offset < range = span + 1 (or range is 0, the whole range, and lo is 0): lo + offset <= hi,
    // so the sum cannot wrap.
    lo.wrapping_add(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns its words in order, then repeats the last.
    struct Script<'a>(&'a [Ticks], usize);

    impl RngCore for Script<'_> {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        #[allow(clippy::unnecessary_cast)] // A cast only with 64-bit ticks.
        fn next_u64(&mut self) -> u64 {
            let i = self.1.min(self.0.len() - 1);
            self.1 += 1;
            self.0[i] as u64
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            for b in dst {
                *b = self.next_u64() as u8;
            }
        }
    }

    #[test]
    fn extremes_of_the_rng_map_to_the_ends_of_the_interval() {
        assert_eq!(uniform_inclusive(&mut Script(&[0], 0), 10, 20), 10);
        assert_eq!(uniform_inclusive(&mut Script(&[Ticks::MAX], 0), 10, 20), 20);
    }

    #[test]
    fn an_empty_or_inverted_interval_gives_its_lower_end() {
        assert_eq!(uniform_inclusive(&mut Script(&[Ticks::MAX], 0), 7, 7), 7);
        assert_eq!(uniform_inclusive(&mut Script(&[Ticks::MAX], 0), 9, 3), 9);
    }

    #[test]
    fn intervals_at_the_top_of_the_tick_range_end_exactly_at_their_upper_end() {
        // The sum lo + offset is not clamped: these are where a wrong offset would wrap or overshoot.
        for (lo, hi) in [(Ticks::MAX - 2, Ticks::MAX), (1, Ticks::MAX), (Ticks::MAX - 1, Ticks::MAX)] {
            assert_eq!(uniform_inclusive(&mut Script(&[Ticks::MAX], 0), lo, hi), hi, "[{lo}, {hi}]");
            assert_eq!(uniform_inclusive(&mut Script(&[0], 0), lo, hi), lo, "[{lo}, {hi}]");
        }
    }

    #[test]
    fn the_full_tick_range_uses_the_raw_word() {
        assert_eq!(uniform_inclusive(&mut Script(&[42], 0), 0, Ticks::MAX), 42);
    }

    #[test]
    fn a_stuck_rng_in_the_rejection_zone_still_terminates_inside_the_interval() {
        // range 3: threshold = 2^32 mod 3 = 2^64 mod 3 = 1; the word 0 has low word 0 < 1 and is rejected forever.
        let mut rng = Script(&[0], 0);
        assert_eq!(uniform_inclusive(&mut rng, 5, 7), 5);
        assert_eq!(rng.1, MAX_REJECTIONS as usize, "the last draw is kept after the bound's rejections");
    }

    #[test]
    fn a_rejected_draw_is_replaced_by_the_next_one() {
        // First word rejected (low word 0 < threshold 1), second word maps to the top.
        let mut rng = Script(&[0, Ticks::MAX], 0);
        assert_eq!(uniform_inclusive(&mut rng, 5, 7), 7);
        assert_eq!(rng.1, 2);
    }

    #[test]
    fn a_draw_whose_low_word_is_below_the_range_but_not_the_threshold_is_kept() {
        // range 3, threshold 1: the word (2^b + 1) / 3 times 3 is 2^b + 1, high word 2, low word 1.
        // Only a low word below the threshold is rejected; this one is kept, on the first draw.
        let word = Ticks::MAX / 3 * 2 + 1;
        let mut rng = Script(&[word, 0], 0);
        assert_eq!(uniform_inclusive(&mut rng, 5, 7), 7);
        assert_eq!(rng.1, 1, "one word drawn");
    }

    #[test]
    fn every_mode_has_its_stable_name() {
        let names = [Jitter::None, Jitter::Full, Jitter::Equal, Jitter::Decorrelated].map(Jitter::as_str);
        assert_eq!(names, ["none", "full", "equal", "decorrelated"]);
    }
}
