//! The client throttle: the client refuses a share of its own requests when the dependency has been
//! rejecting them, in proportion to how much it has been rejecting.
//!
//! Why: a dependency that is over capacity still spends work on every request it rejects (parsing
//! it, reading a token, answering 503). A breaker does not help there: the dependency is not down,
//! it accepts what it can, and a failure ratio of two thirds either keeps the breaker shut or
//! opens it and refuses the third that would have succeeded. The retry budget bounds retries only.
//! The Google SRE book's chapter 21, "Handling Overload" (its "Client-side throttling"; issue 6
//! sets its overload arithmetic beside seed 000's), has each client keep, over a recent window, its
//! *requests* (every request the application made, those the client refused included) and the
//! *accepts* (those the dependency accepted), and refuse a new request locally with probability
//!
//! ```text
//! max(0, (requests - K × accepts) / (requests + 1))
//! ```
//!
//! While the dependency accepts everything, `requests <= K × accepts` and nothing is refused. When it
//! accepts only a share, the client sends it about `K` times what it accepts (the book suggests
//! `K = 2`), and refuses the rest before they cost the dependency anything. It never refuses every
//! request (the `+ 1`), so the accepts that say the dependency recovered keep coming in.
//!
//! Three choices, and why:
//! - **The dependency's one window** ([`crate::CallWindow`]): requests are `calls + throttled`,
//!   accepts are `calls - failures`, over the same buckets the ratio budget and the breaker read
//!   (seed 000: one set of counts). A failure is whatever the caller reported as one, slow calls
//!   included where the breaker counts them; an attempt still in flight counts as accepted until it
//!   fails, which errs towards sending. A circuit that closes forgets its failures, and so does the
//!   throttle.
//! - **No random draw.** The core takes no generator at admission, and need not: each request adds
//!   its probability to a carry, and one is refused each time the carry reaches a whole request
//!   (error diffusion). Over any run of requests the refusals are the sum of their probabilities,
//!   rounded down, exactly, with no clumping, and a virtual-clock transcript names each one.
//! - **Every attempt, retries included**: a retry is a request the dependency would have to
//!   reject too. A retry the throttle refuses ends the operation, with its last failure kept.
//!
//! The probability is in units of 1/65,536 and the multiplier in thousandths, integers only.

use crate::window::Counts;

/// A whole request, in the units of a probability (1/65,536).
const ONE: u32 = 1 << 16;

/// The client throttle's configuration: its multiplier `K`, in thousandths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ClientThrottle {
    k_permille: u16,
}

impl ClientThrottle {
    /// The SRE book's `K = 2`: the client sends at most about twice what the dependency accepts.
    pub const K2: Self = Self::new(2_000);

    /// A throttle that lets through about `k_permille / 1000` times what the dependency accepts.
    /// Below 1,000 (K = 1) it would refuse requests a healthy dependency accepts, which
    /// [`Dependency::new`](crate::Dependency::new) refuses (`throttle_multiplier_below_one`). The book
    /// suggests 2,000; the larger, the later it steps in, and the nearer 1,000, the more of the work
    /// of rejecting it saves the dependency, at the cost of refusing some requests it would have
    /// accepted, and of a longer wait after it recovers (the README's evidence has K = 1.1 beside 2).
    pub const fn new(k_permille: u16) -> Self {
        Self { k_permille }
    }

    /// The multiplier `K`, in thousandths.
    pub const fn k_permille(&self) -> u16 {
        self.k_permille
    }

    pub(crate) const fn validate(&self) -> Result<(), crate::ConfigError> {
        if self.k_permille < 1_000 {
            return Err(crate::ConfigError::ThrottleMultiplierBelowOne);
        }
        Ok(())
    }

    /// The probability of refusing the next request after `counts`, in units of 1/65,536: always
    /// below one whole request.
    pub(crate) fn probability(&self, counts: Counts) -> u32 {
        let requests = u64::from(counts.calls).saturating_add(u64::from(counts.throttled));
        let accepts = u64::from(counts.calls.saturating_sub(counts.failures));
        // In thousandths: requests × 1000 - K × accepts, and (requests + 1) × 1000. Both below
        // 2^43, and the quotient below one (the numerator is at most requests × 1000), so neither
        // the products nor the result can overflow or reach `ONE`.
        let excess =
            requests.saturating_mul(1_000).saturating_sub(u64::from(self.k_permille).saturating_mul(accepts));
        let per = requests.saturating_add(1).saturating_mul(1_000);
        let p = excess.saturating_mul(u64::from(ONE)).checked_div(per).unwrap_or(0);
        u32::try_from(p).unwrap_or(0).min(ONE.saturating_sub(1))
    }
}

/// A probability in units of 1/65,536 as parts per million, rounded down.
pub(crate) fn to_ppm(p: u32) -> u32 {
    let ppm = u64::from(p).saturating_mul(1_000_000) >> 16;
    u32::try_from(ppm).unwrap_or(1_000_000)
}

/// The throttle's state: what the requests since its last refusal have added up to, below one whole
/// request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Throttle {
    carry: u32,
}

/// What the throttle says of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Draw {
    /// Refuse it; the carry left after it.
    Refuse(u32),
    /// Let it through; the carry to keep if it goes out (an attempt another protection refuses
    /// did not reach the throttle's dependency, and leaves the carry as it was).
    Pass(u32),
}

impl Throttle {
    pub(crate) const fn new() -> Self {
        Self { carry: 0 }
    }

    /// Adds a request of probability `p` (below `ONE`) to the carry.
    pub(crate) fn draw(&self, p: u32) -> Draw {
        // Both below 2^16: the sum cannot wrap.
        let next = self.carry.saturating_add(p);
        match next.checked_sub(ONE) {
            Some(left) => Draw::Refuse(left),
            None => Draw::Pass(next),
        }
    }

    pub(crate) fn keep(&mut self, carry: u32) {
        self.carry = carry;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(calls: u32, failures: u32, throttled: u32) -> Counts {
        Counts { calls, retries: 0, failures, throttled }
    }

    #[test]
    fn a_dependency_that_accepts_everything_is_never_throttled() {
        for k in [1_000, 1_100, 2_000, u16::MAX] {
            let t = ClientThrottle::new(k);
            assert_eq!(t.probability(counts(0, 0, 0)), 0);
            assert_eq!(t.probability(counts(1_000, 0, 0)), 0, "K = {k}");
            assert_eq!(t.probability(counts(u32::MAX, 0, 0)), 0, "K = {k}");
        }
        // At K = 2, up to half the calls may fail before anything is refused.
        assert_eq!(ClientThrottle::K2.probability(counts(100, 50, 0)), 0);
        assert_eq!(ClientThrottle::K2.probability(counts(100, 51, 0)), 1_297);
    }

    /// The book's formula, exactly: (requests - K × accepts) / (requests + 1), in 1/65,536.
    #[test]
    fn the_probability_is_the_books_formula() {
        let k2 = ClientThrottle::K2;
        // 300 requests, 100 accepted: (300 - 200) / 301.
        assert_eq!(k2.probability(counts(200, 100, 100)), 100 * 65_536 / 301);
        // Nothing accepted: n / (n + 1), never a whole request.
        assert_eq!(k2.probability(counts(1, 1, 0)), 32_768);
        assert_eq!(k2.probability(counts(9, 9, 0)), 58_982);
        assert_eq!(k2.probability(counts(u32::MAX, u32::MAX, u32::MAX)), ONE - 1);
        // K = 1.1: 300 requests, 100 accepted: (300 - 110) / 301.
        assert_eq!(ClientThrottle::new(1_100).probability(counts(200, 100, 100)), 190 * 65_536 / 301);
        assert_eq!(to_ppm(ONE - 1), 999_984);
        assert_eq!(to_ppm(32_768), 500_000);
    }

    /// Error diffusion: over any run of draws the refusals are the sum of the probabilities,
    /// rounded down.
    #[test]
    fn refusals_add_up_to_the_probabilities_drawn() {
        let mut throttle = Throttle::new();
        let (mut refused, mut sum) = (0u64, 0u64);
        for step in 0..10_000u32 {
            let p = step.wrapping_mul(7_919) % ONE;
            sum += u64::from(p);
            match throttle.draw(p) {
                Draw::Refuse(left) => {
                    refused += 1;
                    throttle.keep(left);
                }
                Draw::Pass(next) => throttle.keep(next),
            }
            assert_eq!(refused, sum >> 16, "after {step}");
            assert!(throttle.carry < ONE);
        }
    }

    #[test]
    fn a_multiplier_below_one_is_refused() {
        assert_eq!(ClientThrottle::new(999).validate(), Err(crate::ConfigError::ThrottleMultiplierBelowOne));
        assert_eq!(ClientThrottle::new(1_000).validate(), Ok(()));
    }
}
