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
//! With a critical reserve on the dependency ([`crate::Criticality`]), the same share of requests
//! is refused, sheddable ones first: the throttle keeps the share of recent requests that were
//! sheddable, and each class's probability is drawn so that the two add up to the formula's.
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
/// request; and, with a critical reserve, the share of recent requests that were sheddable.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Throttle {
    /// Below one whole request (`ONE`), so 16 bits hold it, and the share beside it fits in the 4
    /// bytes the carry took alone.
    carry: u16,
    /// The share of the requests that reached the throttle lately that were sheddable, in units of
    /// 1/65,536 (an average that weighs each request 1/32 and the earlier ones the rest). Only
    /// moved where the dependency keeps a critical reserve.
    #[cfg(feature = "criticality")]
    sheddable: u16,
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
        Self {
            carry: 0,
            #[cfg(feature = "criticality")]
            sheddable: 0,
        }
    }

    /// The probability of refusing a request of one class when the throttle refuses a share `p` of
    /// all of them (see [`crate::Criticality`]): sheddable requests are refused first. With `s` the
    /// share of recent requests that were sheddable, a sheddable one is refused with `p / s` and a
    /// critical one not at all while `p <= s`; beyond it, sheddable ones nearly always and critical
    /// ones with `(p - s) / (1 - s)`. Either way a share `p` of the requests is refused, as the
    /// throttle's formula says, and the critical ones are the last. `sheddable` is the request's
    /// class, which the share is moved towards first.
    #[cfg(feature = "criticality")]
    pub(crate) fn for_class(&mut self, p: u32, sheddable: bool) -> u32 {
        let s = u32::from(self.sheddable);
        // Towards ONE or 0 by 1/32 of the way: stays below ONE, and never wraps.
        let s =
            if sheddable { s.saturating_add(ONE.saturating_sub(s) >> 5) } else { s.saturating_sub(s >> 5) };
        let s = s.min(ONE.saturating_sub(1));
        self.sheddable = u16::try_from(s).unwrap_or(u16::MAX);
        let most = ONE.saturating_sub(1);
        if sheddable {
            // p / s, or all but never a whole request.
            let q = u64::from(p).saturating_mul(u64::from(ONE)).checked_div(u64::from(s)).unwrap_or(u64::MAX);
            return u32::try_from(q).unwrap_or(most).min(most);
        }
        if p <= s {
            return 0;
        }
        // (p - s) / (1 - s): below p, since s < ONE.
        let q = u64::from(p.saturating_sub(s))
            .saturating_mul(u64::from(ONE))
            .checked_div(u64::from(ONE.saturating_sub(s)))
            .unwrap_or(0);
        u32::try_from(q).unwrap_or(most).min(most)
    }

    /// Adds a request of probability `p` (below `ONE`) to the carry.
    pub(crate) fn draw(&self, p: u32) -> Draw {
        // Both below 2^16: the sum cannot wrap.
        let next = u32::from(self.carry).saturating_add(p);
        match next.checked_sub(ONE) {
            Some(left) => Draw::Refuse(left),
            None => Draw::Pass(next),
        }
    }

    /// Keeps a carry `draw` gave (always below `ONE`).
    pub(crate) fn keep(&mut self, carry: u32) {
        self.carry = u16::try_from(carry).unwrap_or(u16::MAX);
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
            assert!(u32::from(throttle.carry) < ONE);
        }
    }

    /// The throttle's state after a long run in which one request in `critical_one_in` was
    /// critical and the rest sheddable.
    #[cfg(feature = "criticality")]
    fn learnt(critical_one_in: u32) -> Throttle {
        let mut t = Throttle::new();
        for i in 0..2_000 {
            let _ = t.for_class(0, i % critical_one_in != 0);
        }
        t
    }

    #[cfg(feature = "criticality")]
    #[test]
    fn the_sheddable_share_follows_the_requests() {
        // Half and half: within a few percent of 32,768 (the average weighs the latest most).
        let half = learnt(2).sheddable;
        assert!((31_500..=34_000).contains(&half), "{half}");
        // Nine in ten sheddable.
        let most = learnt(10).sheddable;
        assert!((57_000..=61_000).contains(&most), "{most}");
        // None: it decays towards zero and stays below one request in 2,000.
        let mut none = learnt(2);
        for _ in 0..2_000 {
            let _ = none.for_class(0, false);
        }
        assert!(none.sheddable < 32, "{}", none.sheddable);
    }

    /// With half the requests sheddable, a throttle refusing a quarter refuses half the sheddable
    /// ones and no critical one; refusing three quarters, nearly every sheddable one and half the
    /// critical ones. Over a run of both, the refusals are the throttle's share of all requests
    /// (to a few in a thousand: the share is an average), and they fall on sheddable ones first.
    #[cfg(feature = "criticality")]
    #[test]
    fn sheddable_requests_are_refused_first_and_the_total_is_the_throttles() {
        // (p, the critical requests it refuses of 1,000): none while p is below the sheddable
        // share, (3/4 - 1/2) / (1 - 1/2) of them beyond it.
        for (p, critical) in [(ONE / 4, 0..=0), (ONE * 3 / 4, 480..=520)] {
            let mut t = learnt(2);
            let (mut refused, mut critical_refused) = (0u32, 0u32);
            for i in 0..2_000u32 {
                let sheddable = i % 2 == 1;
                let q = t.for_class(p, sheddable);
                match t.draw(q) {
                    Draw::Refuse(left) => {
                        refused += 1;
                        critical_refused += u32::from(!sheddable);
                        t.keep(left);
                    }
                    Draw::Pass(next) => t.keep(next),
                }
            }
            let expected = u64::from(p) * 2_000 / u64::from(ONE);
            assert!(
                u64::from(refused).abs_diff(expected) <= 10,
                "p {p}: {refused} refused, {expected} expected"
            );
            assert!(critical.contains(&critical_refused), "p {p}: {critical_refused} critical refused");
        }
    }

    #[test]
    fn a_multiplier_below_one_is_refused() {
        assert_eq!(ClientThrottle::new(999).validate(), Err(crate::ConfigError::ThrottleMultiplierBelowOne));
        assert_eq!(ClientThrottle::new(1_000).validate(), Ok(()));
    }
}
