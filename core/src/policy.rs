//! The retry policy: how many attempts, how long to wait between them, and how long each may take.
//!
//! A [`RetryPolicy`] is immutable configuration that many operations share, usually a `const`. It
//! has the four parts seed 000 names (what to retry is the caller's [`Classify`](crate::Classify);
//! how many times, how long to wait and how much randomness are here) plus the two that tie a
//! retry to the deadline: an optional ceiling for each attempt's timeout, and an optional minimum
//! time that must still remain after a delay for another attempt to be worth starting.
//!
//! Why exponential (seed 000, "Exponential Backoff"): doubling is a guess about recovery time that
//! is right at every scale; the maximum delay is the caller's own patience. Why a count *and* a
//! deadline: the count bounds what one request does to the dependency, the deadline bounds what it
//! costs the caller, and the deadline wins ("Retries and the Deadline").
//!
//! All validation happens in `const fn`s, so a bad policy in a `const` fails the build
//! ([`RetryPolicy`] has an example).

use rand_core::RngCore;

use crate::error::ConfigError;
use crate::jitter::{Jitter, uniform_inclusive};
use crate::time::{Duration, Ticks};

/// The most attempts a policy may allow, the first call included (seed 003).
pub const MAX_ATTEMPTS: u8 = 64;

/// How the delay before retry `n` grows. `#[non_exhaustive]`: a variant comes with a feature
/// (`backoff-multiplier`), and another crate's build may turn it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Backoff {
    /// The same base delay before every retry.
    Constant,
    /// The base delay doubling before each retry, never above the maximum delay.
    Exponential,
    /// The base delay multiplied by `percent / 100` before each retry, each product rounded up to
    /// a whole tick, never above the maximum delay: 150 is resilience4j's default multiplier of
    /// 1.5, 160 the 1.6 of gRPC's connection backoff. Set with
    /// [`RetryPolicyBuilder::multiplier_percent`], which makes a multiplier of 200 (doubling)
    /// [`Backoff::Exponential`].
    #[cfg(feature = "backoff-multiplier")]
    Multiplied {
        /// The multiplier in hundredths: above 100.
        percent: u16,
    },
}

/// Immutable retry configuration shared by many operations. Build it with
/// [`RetryPolicy::exponential`], [`RetryPolicy::constant`] or [`RetryPolicy::single_attempt`].
///
/// Usually a `const`, so that a policy that cannot work fails the build with its message:
///
/// ```
/// use relent_core::{ConfigError, Duration, Jitter, RetryPolicy};
/// type D = Duration<1_000>; // ticks of 1 ms
///
/// // Seed 000's checkout: 3 attempts, 100 ms doubling to 2 s, full jitter, 3 s per attempt.
/// const CHECKOUT: RetryPolicy<1_000> =
///     match RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2)).attempt_timeout(D::from_secs(3)).build() {
///         Ok(policy) => policy,
///         Err(e) => panic!("{}", e.message()),
///     };
/// assert_eq!((CHECKOUT.max_attempts(), CHECKOUT.jitter_mode()), (3, Jitter::Full));
///
/// // Before jitter, the wait before retry 1, 2, 3... doubles, up to the maximum delay.
/// let nominal = [1, 2, 3, 4, 5, 6].map(|retry| CHECKOUT.nominal_delay(retry).as_millis());
/// assert_eq!(nominal, [100, 200, 400, 800, 1_600, 2_000]);
///
/// // Full jitter draws each wait from [0, nominal], so clients that failed together spread out.
/// # struct Rng(u64);
/// # impl relent_core::rand_core::RngCore for Rng {
/// #     fn next_u32(&mut self) -> u32 { self.next_u64() as u32 }
/// #     fn next_u64(&mut self) -> u64 { self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1); self.0 }
/// #     fn fill_bytes(&mut self, d: &mut [u8]) { d.fill(0) }
/// # }
/// let mut rng = Rng(7); // any rand_core::RngCore
/// let waits: Vec<D> = (0..100).map(|_| CHECKOUT.delay(2, D::from_millis(100), &mut rng)).collect();
/// assert!(waits.iter().all(|w| *w <= D::from_millis(200)));
/// assert!(waits.iter().any(|w| *w < D::from_millis(100)) && waits.iter().any(|w| *w > D::from_millis(100)));
///
/// // A policy that cannot work is an error that says how to fix it.
/// let backwards = RetryPolicy::<1_000>::exponential(3, D::from_secs(2), D::from_millis(100)).build();
/// assert_eq!(backwards, Err(ConfigError::MaxDelayBelowBaseDelay));
/// assert_eq!(
///     ConfigError::MaxDelayBelowBaseDelay.message(),
///     "the maximum delay is shorter than the base delay: raise the maximum delay to at least the base delay"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RetryPolicy<const HZ: u64> {
    max_attempts: u8,
    backoff: Backoff,
    jitter: Jitter,
    base_delay: Duration<HZ>,
    max_delay: Duration<HZ>,
    attempt_timeout: Option<Duration<HZ>>,
    min_remaining: Duration<HZ>,
    retry_after_spread: Duration<HZ>,
}

/// A [`RetryPolicy`] under construction. Setters are infallible `const fn`s; [`build`](Self::build)
/// validates everything at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use = "a builder does nothing until build() is called"]
pub struct RetryPolicyBuilder<const HZ: u64> {
    policy: RetryPolicy<HZ>,
    /// [`multiplier_percent`](Self::multiplier_percent) was called on a constant policy: `build`
    /// refuses it.
    #[cfg(feature = "backoff-multiplier")]
    multiplier_on_constant: bool,
}

impl<const HZ: u64> RetryPolicy<HZ> {
    /// `max_attempts` attempts (the first call counts) with the delay doubling from `base_delay`
    /// and capped at `max_delay`. Jitter defaults to [`Jitter::Full`].
    pub const fn exponential(
        max_attempts: u8,
        base_delay: Duration<HZ>,
        max_delay: Duration<HZ>,
    ) -> RetryPolicyBuilder<HZ> {
        RetryPolicyBuilder::new(max_attempts, Backoff::Exponential, base_delay, max_delay)
    }

    /// `max_attempts` attempts with the same `delay` before each retry. The maximum delay (the
    /// longest Retry-After the policy sleeps through) defaults to `delay`; raise it with
    /// [`RetryPolicyBuilder::max_delay`]. Jitter defaults to [`Jitter::Full`].
    pub const fn constant(max_attempts: u8, delay: Duration<HZ>) -> RetryPolicyBuilder<HZ> {
        RetryPolicyBuilder::new(max_attempts, Backoff::Constant, delay, delay)
    }

    /// One attempt and no retries: the policy for an operation that is not safe to repeat. It needs
    /// no replay-safety statement and no budget.
    pub const fn single_attempt() -> RetryPolicyBuilder<HZ> {
        let zero = Duration::<HZ>::from_ticks(0);
        RetryPolicyBuilder::new(1, Backoff::Constant, zero, zero)
    }

    /// The same policy with a single attempt: what an operation that is not safe to repeat gets
    /// (seed 000: a keyless POST is sent once, whatever the retry policy says), keeping the
    /// attempt timeout. Needs no replay-safety statement and no budget.
    #[must_use = "this returns a single-attempt copy and leaves this policy as it is"]
    pub const fn without_retries(&self) -> Self {
        Self { max_attempts: 1, ..*self }
    }

    /// Attempts allowed, the first call included.
    pub const fn max_attempts(&self) -> u8 {
        self.max_attempts
    }
    /// How the delay grows.
    pub const fn backoff(&self) -> Backoff {
        self.backoff
    }
    /// How the delay is randomised.
    pub const fn jitter_mode(&self) -> Jitter {
        self.jitter
    }
    /// The delay before the first retry, before jitter.
    pub const fn base_delay(&self) -> Duration<HZ> {
        self.base_delay
    }
    /// The longest delay the policy waits, and the longest Retry-After it sleeps through.
    pub const fn max_delay(&self) -> Duration<HZ> {
        self.max_delay
    }
    /// The ceiling for each attempt's timeout, if any.
    pub const fn attempt_timeout(&self) -> Option<Duration<HZ>> {
        self.attempt_timeout
    }
    /// The time that must remain before the deadline after a delay for a retry to start: one tick
    /// at least.
    pub const fn min_remaining(&self) -> Duration<HZ> {
        self.min_remaining
    }
    /// The most random time added on top of a Retry-After (zero: exactly the stated wait).
    pub const fn retry_after_spread(&self) -> Duration<HZ> {
        self.retry_after_spread
    }

    /// The un-jittered delay before retry number `retry` (1 for the first retry):
    /// `base × 2^(retry-1)` capped at the maximum delay, or `base` for constant backoff; with a
    /// multiplier ([`Backoff::Multiplied`]), `base` multiplied by it `retry - 1` times, each product
    /// rounded up to a whole tick, capped at the maximum delay.
    pub const fn nominal_delay(&self, retry: u8) -> Duration<HZ> {
        let base = self.base_delay.as_ticks();
        let ticks = match self.backoff {
            Backoff::Constant => base,
            Backoff::Exponential => {
                // base × 2^doublings, saturating: a shift and a comparison, as cheap as a
                // multiply on a host, where a Cortex-M0 calls a library routine for a checked one.
                // The product fits while the doublings are at most base's leading zeros: one
                // instruction counts them, and the decision after a failure takes 5 fewer on a
                // Cortex-M3 or M4F than comparing base with the largest value that fits. ARMv6-M
                // (which `NO_WIDE_MULTIPLY` tells) has no such instruction, where counting cost 30
                // instructions and 120 bytes, so it compares. A base of 0, which only a policy that
                // never retries may have, stays 0.
                let doublings = retry.saturating_sub(1) as u32;
                let fits = if crate::mul::NO_WIDE_MULTIPLY {
                    matches!(Ticks::MAX.checked_shr(doublings), Some(largest) if base <= largest)
                } else {
                    doublings <= base.leading_zeros()
                };
                if fits {
                    base.wrapping_shl(doublings)
                } else if base == 0 {
                    0
                } else {
                    Ticks::MAX
                }
            }
            #[cfg(feature = "backoff-multiplier")]
            Backoff::Multiplied { percent } => multiplied(base, percent, retry, self.max_delay.as_ticks()),
        };
        let max = self.max_delay.as_ticks();
        Duration::<HZ>::from_ticks(if ticks < max { ticks } else { max })
    }

    /// The jittered delay before retry number `retry`, given the previous jittered delay (for
    /// [`Jitter::Decorrelated`]; pass the base delay before the first retry). Always within the
    /// bounds of [`Jitter`]'s table, and never above the maximum delay.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn delay<R: RngCore + ?Sized>(&self, retry: u8, previous: Duration<HZ>, rng: &mut R) -> Duration<HZ> {
        let (lo, hi) = self.jitter_interval(retry, previous);
        // Only a decorrelated interval reaches above the maximum delay. It is capped after the draw,
        // as AWS's `min(cap, random_between(base, sleep * 3))` is: a draw above the cap waits the
        // cap. Capping the interval first would spread those draws below it instead.
        let ticks = uniform_inclusive(rng, lo, hi).min(self.max_delay.as_ticks());
        Duration::<HZ>::from_ticks(ticks)
    }

    /// The interval [`delay`](Self::delay) draws from, before its cap at the maximum delay. Each
    /// mode is an interval, so that one draw serves them all; the decision after a failure
    /// (`Operation::decide`) draws from this interval or a Retry-After's at one site, where the
    /// draw's code is inlined once. `None` draws nothing: an interval of one point returns its end
    /// without a word.
    #[inline(always)]
    pub(crate) fn jitter_interval(&self, retry: u8, previous: Duration<HZ>) -> (Ticks, Ticks) {
        let d = self.nominal_delay(retry).as_ticks();
        match self.jitter {
            Jitter::None => (d, d),
            Jitter::Full => (0, d),
            Jitter::Equal => (d / 2, d),
            Jitter::Decorrelated => {
                let base = self.base_delay.as_ticks();
                // 3 × previous, saturating: a comparison, where a checked multiply is a library
                // call on a Cortex-M0 (`mul.rs`).
                let previous = previous.as_ticks();
                let tripled = if previous <= Ticks::MAX / 3 { previous.wrapping_mul(3) } else { Ticks::MAX };
                (base, tripled.max(base))
            }
        }
    }

    /// Checks that `budget` can serve this policy: seed 003's rule that a token bucket's
    /// reservation hold exceeds the attempt timeout by more than 1 s. A `const fn`, so a
    /// policy/budget pair can be checked at compile time as well as by
    /// [`Operation::start`](crate::Operation::start).
    pub const fn check_budget(&self, budget: &crate::RetryBudget<HZ>) -> Result<(), ConfigError> {
        match budget.hold() {
            None => Ok(()),
            Some(hold) => match self.attempt_timeout {
                None => Err(ConfigError::BudgetNeedsAttemptTimeout),
                Some(timeout) => check_hold::<HZ>(hold, timeout),
            },
        }
    }
}

/// `base` multiplied by `percent / 100` once for each retry after the first, each product rounded
/// up to a whole tick (so that a base of one tick grows too: 1, 2, 3, 5, 8 at 150), saturating, and
/// stopping once it reaches `max`, at which [`RetryPolicy::nominal_delay`] caps it. Exact in integers:
/// `ticks × percent / 100` is `(ticks / 100) × percent` plus the rest's share, so nothing overflows
/// before the result would. At most 254 steps, and fewer once `max` is reached.
///
/// Out of line: inlined, its loop took 4 more instructions from a doubling policy's decision after
/// a failure (257 against 253, callgrind's count on a host); out of line, 252.
#[cfg(feature = "backoff-multiplier")]
#[inline(never)]
const fn multiplied(base: Ticks, percent: u16, retry: u8, max: Ticks) -> Ticks {
    let percent = percent as Ticks;
    let mut ticks = base;
    let mut steps = retry.saturating_sub(1);
    while steps > 0 && ticks < max {
        // The rest is below 100 and the percentage below 65,536: their product fits 32 bits.
        let rest = (ticks % 100).wrapping_mul(percent).div_ceil(100);
        ticks = match (ticks / 100).checked_mul(percent) {
            Some(whole) => whole.saturating_add(rest),
            None => Ticks::MAX,
        };
        steps = steps.wrapping_sub(1);
    }
    ticks
}

/// `hold > timeout + 1 s`, exactly.
pub(crate) const fn check_hold<const HZ: u64>(
    hold: Duration<HZ>,
    timeout: Duration<HZ>,
) -> Result<(), ConfigError> {
    let needed = timeout.as_ticks().saturating_add(crate::time::one_second::<HZ>());
    if hold.as_ticks() > needed { Ok(()) } else { Err(ConfigError::BudgetHoldTooShort) }
}

impl<const HZ: u64> RetryPolicyBuilder<HZ> {
    const fn new(
        max_attempts: u8,
        backoff: Backoff,
        base_delay: Duration<HZ>,
        max_delay: Duration<HZ>,
    ) -> Self {
        let zero = Duration::<HZ>::from_ticks(0);
        Self {
            policy: RetryPolicy {
                max_attempts,
                backoff,
                jitter: Jitter::Full,
                base_delay,
                max_delay,
                attempt_timeout: None,
                min_remaining: zero,
                retry_after_spread: zero,
            },
            #[cfg(feature = "backoff-multiplier")]
            multiplier_on_constant: false,
        }
    }

    /// Multiplies the delay by `percent / 100` before each retry instead of doubling it: 150 for
    /// 1.5 (resilience4j's default), 160 for 1.6 (gRPC's connection backoff); 200 is doubling, the
    /// default. Each product is rounded up to a whole tick, so that a small base grows too, and the
    /// delay stops at the maximum delay as a doubling one does. For an exponential policy only:
    /// [`build`](Self::build) refuses a multiplier of 100 or less
    /// ([`ConfigError::MultiplierNotAboveOne`]) and one on a constant policy
    /// ([`ConfigError::MultiplierOnConstant`]).
    ///
    /// ```
    /// use relent_core::{Backoff, Duration, Jitter, RetryPolicy};
    /// type D = Duration<1_000>;
    ///
    /// let policy = RetryPolicy::<1_000>::exponential(8, D::from_millis(100), D::from_secs(1))
    ///     .multiplier_percent(150)
    ///     .jitter(Jitter::None)
    ///     .build()?;
    /// assert_eq!(policy.backoff(), Backoff::Multiplied { percent: 150 });
    /// let nominal = [1, 2, 3, 4, 5, 6, 7].map(|retry| policy.nominal_delay(retry).as_millis());
    /// // 337.5 ms rounds up to 338, and 338 × 1.5 is 507.
    /// assert_eq!(nominal, [100, 150, 225, 338, 507, 761, 1_000]);
    /// # Ok::<(), relent_core::ConfigError>(())
    /// ```
    #[cfg(feature = "backoff-multiplier")]
    pub const fn multiplier_percent(mut self, percent: u16) -> Self {
        match self.policy.backoff {
            Backoff::Constant => self.multiplier_on_constant = true,
            _ if percent == 200 => self.policy.backoff = Backoff::Exponential,
            _ => self.policy.backoff = Backoff::Multiplied { percent },
        }
        self
    }

    /// Sets the jitter mode (default [`Jitter::Full`]).
    pub const fn jitter(mut self, jitter: Jitter) -> Self {
        self.policy.jitter = jitter;
        self
    }

    /// Sets the maximum delay: the cap of the backoff and the longest Retry-After slept through.
    pub const fn max_delay(mut self, max_delay: Duration<HZ>) -> Self {
        self.policy.max_delay = max_delay;
        self
    }

    /// Caps each attempt's timeout. An attempt gets `min(ceiling, time left before the deadline)`.
    pub const fn attempt_timeout(mut self, ceiling: Duration<HZ>) -> Self {
        self.policy.attempt_timeout = Some(ceiling);
        self
    }

    /// A retry starts only if at least `min_remaining` is left before the deadline once its delay
    /// has passed. Default: one tick, any time left (less is taken as one tick: a retry needs some
    /// time before the deadline).
    pub const fn min_remaining(mut self, min_remaining: Duration<HZ>) -> Self {
        self.policy.min_remaining = min_remaining;
        self
    }

    /// Opt-in: add a random amount in `[0, spread]` on top of a server-stated Retry-After, so that
    /// clients told the same wait do not all return at once. The wait is never shortened. Default:
    /// zero (exactly the stated wait, as seed 000's wrapper does).
    pub const fn retry_after_spread(mut self, spread: Duration<HZ>) -> Self {
        self.policy.retry_after_spread = spread;
        self
    }

    /// Validates and returns the policy.
    pub const fn build(self) -> Result<RetryPolicy<HZ>, ConfigError> {
        let mut p = self.policy;
        // One tick at least, here once, rather than at each of the two checks that read it.
        if p.min_remaining.as_ticks() == 0 {
            p.min_remaining = Duration::<HZ>::from_ticks(1);
        }
        if p.max_attempts == 0 || p.max_attempts > MAX_ATTEMPTS {
            return Err(ConfigError::MaxAttemptsOutOfRange);
        }
        if p.max_delay.as_ticks() < p.base_delay.as_ticks() {
            return Err(ConfigError::MaxDelayBelowBaseDelay);
        }
        #[cfg(feature = "backoff-multiplier")]
        {
            if self.multiplier_on_constant {
                return Err(ConfigError::MultiplierOnConstant);
            }
            if let Backoff::Multiplied { percent } = p.backoff {
                if percent <= 100 {
                    return Err(ConfigError::MultiplierNotAboveOne);
                }
            }
        }
        let grows = !matches!(p.backoff, Backoff::Constant) || matches!(p.jitter, Jitter::Decorrelated);
        if grows && p.max_attempts > 1 && p.base_delay.as_ticks() == 0 {
            return Err(ConfigError::ZeroBaseDelay);
        }
        let ceiling = match p.attempt_timeout {
            Some(t) if t.as_ticks() == 0 => return Err(ConfigError::ZeroAttemptTimeout),
            Some(t) => t.as_ticks(),
            None => 0,
        };
        // The base delay is at most the maximum delay.
        let spans =
            [p.max_delay.as_ticks(), ceiling, p.min_remaining.as_ticks(), p.retry_after_spread.as_ticks()];
        if !crate::time::all_fit(&spans) {
            return Err(ConfigError::SpanTooLongForTicks);
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 1_000;
    type D = Duration<HZ>;

    struct Const(u64);
    impl RngCore for Const {
        fn next_u32(&mut self) -> u32 {
            self.0 as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(self.0 as u8);
        }
    }

    fn policy(jitter: Jitter) -> RetryPolicy<HZ> {
        RetryPolicy::exponential(8, D::from_millis(100), D::from_secs(2)).jitter(jitter).build().unwrap()
    }

    #[test]
    fn exponential_doubles_from_the_base_and_stops_at_the_maximum() {
        let p = policy(Jitter::None);
        let delays: [Ticks; 7] = core::array::from_fn(|i| p.nominal_delay(i as u8 + 1).as_ticks());
        assert_eq!(delays, [100, 200, 400, 800, 1600, 2000, 2000]);
    }

    #[test]
    fn doubling_is_base_times_a_power_of_two_saturating_for_every_base_and_retry() {
        // The longest maximum delay there may be: the end of time with 64-bit ticks.
        let max = crate::time::MAX_SPAN;
        for base in [1, 3, 1_000, (max >> 24) + 7, max / 3, max - 1, max] {
            let p =
                RetryPolicy::<HZ>::exponential(8, D::from_ticks(base), D::from_ticks(max)).build().unwrap();
            for retry in 0..=u8::MAX {
                // Worked out in 128 bits, independently of the policy's own arithmetic.
                let doublings = u32::from(retry.saturating_sub(1));
                let exact = if doublings < 64 { u128::from(base) << doublings } else { u128::MAX };
                let expected = Ticks::try_from(exact).unwrap_or(Ticks::MAX).min(max);
                assert_eq!(p.nominal_delay(retry).as_ticks(), expected, "base {base}, retry {retry}");
            }
        }
    }

    #[test]
    fn a_retry_needs_at_least_one_tick_left_before_the_deadline() {
        let d = |ticks| D::from_ticks(ticks);
        let exp =
            |min| RetryPolicy::<HZ>::exponential(3, d(100), d(2000)).min_remaining(d(min)).build().unwrap();
        assert_eq!(RetryPolicy::<HZ>::exponential(3, d(100), d(2000)).build().unwrap().min_remaining(), d(1));
        assert_eq!(exp(0).min_remaining(), d(1), "less than a tick is a tick");
        assert_eq!(exp(1).min_remaining(), d(1));
        assert_eq!(exp(250).min_remaining(), d(250));
        assert_eq!(exp(0).without_retries().min_remaining(), d(1));
    }

    #[test]
    fn a_zero_base_stays_zero_at_every_retry() {
        // Only a policy of one attempt, which never retries, may have a base of 0.
        let p = RetryPolicy::<HZ>::exponential(1, D::from_ticks(0), D::from_secs(2)).build().unwrap();
        for retry in 0..=u8::MAX {
            assert_eq!(p.nominal_delay(retry).as_ticks(), 0, "retry {retry}");
        }
    }

    #[test]
    fn a_huge_retry_number_saturates_at_the_maximum_delay() {
        assert_eq!(policy(Jitter::None).nominal_delay(u8::MAX).as_ticks(), 2000);
    }

    #[cfg(feature = "backoff-multiplier")]
    fn multiplied(percent: u16, base: Ticks, max: Ticks) -> Result<RetryPolicy<HZ>, ConfigError> {
        RetryPolicy::exponential(8, D::from_ticks(base), D::from_ticks(max))
            .multiplier_percent(percent)
            .build()
    }

    #[cfg(feature = "backoff-multiplier")]
    #[test]
    fn a_multiplier_grows_each_delay_by_its_share_rounded_up_to_a_tick() {
        let delays = |p: RetryPolicy<HZ>| -> [Ticks; 8] {
            core::array::from_fn(|i| p.nominal_delay(i as u8 + 1).as_ticks())
        };
        // 1.5: 337.5 rounds up to 338, and 338 × 1.5 is 507; then the maximum.
        assert_eq!(
            delays(multiplied(150, 100, 1_000).unwrap()),
            [100, 150, 225, 338, 507, 761, 1_000, 1_000]
        );
        // 1.6, gRPC's connection backoff from 1 s to 120 s.
        let grpc = multiplied(160, 1_000, 120_000).unwrap();
        assert_eq!(delays(grpc), [1_000, 1_600, 2_560, 4_096, 6_554, 10_487, 16_780, 26_848]);
        assert_eq!(grpc.nominal_delay(12).as_ticks(), 120_000);
        // A base of one tick grows too, by at least a tick a retry.
        assert_eq!(delays(multiplied(150, 1, 1_000).unwrap()), [1, 2, 3, 5, 8, 12, 18, 27]);
        assert_eq!(delays(multiplied(101, 1, 1_000).unwrap()), [1, 2, 3, 4, 5, 6, 7, 8]);
        // Retry 0 (no retry yet) is the base, as with doubling.
        assert_eq!(multiplied(150, 100, 1_000).unwrap().nominal_delay(0).as_ticks(), 100);
    }

    #[cfg(feature = "backoff-multiplier")]
    #[test]
    fn a_multiplied_delay_is_each_exact_product_rounded_up_saturating_for_every_base_and_retry() {
        let max = crate::time::MAX_SPAN;
        // Under miri (CI's 32-bit big-endian runs), a multiplier and a base either side of the
        // rounding: the full set added about 100 s to its two runs.
        let percents: &[u16] =
            if cfg!(miri) { &[101, 160] } else { &[101, 125, 150, 160, 199, 201, 300, 1_000, u16::MAX] };
        let bases: &[Ticks] = if cfg!(miri) {
            &[1, 12_345]
        } else {
            &[1, 3, 99, 100, 1_000, 12_345, (max >> 24) + 7, max / 3, max - 1, max]
        };
        for &percent in percents {
            for &base in bases {
                let p = multiplied(percent, base, max).unwrap();
                // Worked out in 128 bits, independently of the policy's own arithmetic.
                let mut exact = u128::from(base);
                for retry in 0..=u8::MAX {
                    if retry >= 2 && exact < u128::from(max) {
                        exact = (exact * u128::from(percent)).div_ceil(100);
                    }
                    // Under miri, the first retries and every sixteenth: each call loops up to 254 times.
                    if cfg!(miri) && retry > 8 && retry % 16 != 0 {
                        continue;
                    }
                    let expected = Ticks::try_from(exact).unwrap_or(Ticks::MAX).min(max);
                    assert_eq!(
                        p.nominal_delay(retry).as_ticks(),
                        expected,
                        "{percent} %, base {base}, retry {retry}"
                    );
                }
            }
        }
    }

    #[cfg(feature = "backoff-multiplier")]
    #[test]
    fn a_multiplier_of_200_is_doubling_and_one_of_100_or_less_or_on_a_constant_policy_is_refused() {
        let doubling = multiplied(200, 100, 2_000).unwrap();
        assert_eq!(doubling.backoff(), Backoff::Exponential);
        let exponential =
            RetryPolicy::exponential(8, D::from_ticks(100), D::from_ticks(2_000)).build().unwrap();
        assert_eq!(doubling, exponential);
        // The last multiplier set wins.
        let back = RetryPolicy::<HZ>::exponential(8, D::from_ticks(100), D::from_ticks(2_000))
            .multiplier_percent(150)
            .multiplier_percent(200)
            .build();
        assert_eq!(back, Ok(exponential));
        for percent in [0, 1, 99, 100] {
            assert_eq!(multiplied(percent, 100, 2_000), Err(ConfigError::MultiplierNotAboveOne), "{percent}");
        }
        assert_eq!(
            RetryPolicy::<HZ>::constant(3, D::from_ticks(100)).multiplier_percent(150).build(),
            Err(ConfigError::MultiplierOnConstant)
        );
        // A multiplied backoff grows, so it needs a base delay, as doubling does.
        assert_eq!(multiplied(150, 0, 2_000), Err(ConfigError::ZeroBaseDelay));
        let once =
            RetryPolicy::<HZ>::exponential(1, D::from_ticks(0), D::from_ticks(2_000)).multiplier_percent(150);
        assert_eq!(once.build().map(|p| p.nominal_delay(5).as_ticks()), Ok(0));
    }

    #[test]
    fn full_jitter_spans_zero_to_the_nominal_delay() {
        let p = policy(Jitter::Full);
        assert_eq!(p.delay(3, D::from_ticks(0), &mut Const(0)).as_ticks(), 0);
        assert_eq!(p.delay(3, D::from_ticks(0), &mut Const(u64::MAX)).as_ticks(), 400);
    }

    #[test]
    fn equal_jitter_spans_half_to_all_of_the_nominal_delay() {
        let p = policy(Jitter::Equal);
        assert_eq!(p.delay(2, D::from_ticks(0), &mut Const(0)).as_ticks(), 100);
        assert_eq!(p.delay(2, D::from_ticks(0), &mut Const(u64::MAX)).as_ticks(), 200);
    }

    #[test]
    fn decorrelated_jitter_spans_base_to_three_times_the_previous_delay_capped() {
        let p = policy(Jitter::Decorrelated);
        assert_eq!(p.delay(1, D::from_millis(100), &mut Const(0)).as_ticks(), 100);
        assert_eq!(p.delay(1, D::from_millis(100), &mut Const(u64::MAX)).as_ticks(), 300);
        assert_eq!(p.delay(5, D::from_millis(1500), &mut Const(u64::MAX)).as_ticks(), 2000);
        // The middle of [100, 4500] is 2300: above the cap, so the cap (AWS's min(cap, draw)). An
        // interval capped before the draw would give the middle of [100, 2000] instead.
        assert_eq!(p.delay(5, D::from_millis(1500), &mut Const(u64::MAX / 2)).as_ticks(), 2000);
    }

    #[test]
    fn decorrelated_jitter_triples_the_previous_delay_saturating_at_the_end_of_time() {
        let max = crate::time::MAX_SPAN;
        let p = RetryPolicy::<HZ>::exponential(8, D::from_ticks(1), D::from_ticks(max))
            .jitter(Jitter::Decorrelated)
            .build()
            .unwrap();
        // The top of the interval, [1, 3 × previous], drawn with the largest word.
        for previous in
            [1, 7, Ticks::MAX / 3 - 1, Ticks::MAX / 3, Ticks::MAX / 3 + 1, Ticks::MAX - 1, Ticks::MAX]
        {
            let exact = (u128::from(previous) * 3).min(u128::from(Ticks::MAX));
            let expected = Ticks::try_from(exact).unwrap().min(max);
            let drawn = p.delay(2, D::from_ticks(previous), &mut Const(u64::MAX)).as_ticks();
            assert_eq!(drawn, expected, "previous {previous}");
        }
    }

    #[test]
    fn no_jitter_is_the_nominal_delay() {
        assert_eq!(policy(Jitter::None).delay(2, D::from_ticks(0), &mut Const(7)).as_ticks(), 200);
    }

    #[test]
    fn constant_backoff_repeats_its_delay() {
        let p = RetryPolicy::<HZ>::constant(3, D::from_millis(5)).jitter(Jitter::None).build().unwrap();
        assert_eq!(p.nominal_delay(1), p.nominal_delay(2));
        assert_eq!(p.max_delay(), D::from_millis(5));
    }

    #[test]
    fn zero_and_sixty_five_attempts_are_refused() {
        let b = |n| RetryPolicy::<HZ>::exponential(n, D::from_millis(1), D::from_millis(2)).build();
        assert_eq!(b(0), Err(ConfigError::MaxAttemptsOutOfRange));
        assert_eq!(b(65), Err(ConfigError::MaxAttemptsOutOfRange));
        assert!(b(1).is_ok());
        assert!(b(64).is_ok());
    }

    #[test]
    fn bad_delays_and_timeouts_are_refused_with_their_codes() {
        let r = RetryPolicy::<HZ>::exponential(3, D::from_secs(2), D::from_millis(100)).build();
        assert_eq!(r, Err(ConfigError::MaxDelayBelowBaseDelay));
        let r = RetryPolicy::<HZ>::exponential(3, D::from_ticks(0), D::from_millis(100)).build();
        assert_eq!(r, Err(ConfigError::ZeroBaseDelay));
        let r = RetryPolicy::<HZ>::constant(3, D::from_millis(5)).attempt_timeout(D::from_ticks(0)).build();
        assert_eq!(r, Err(ConfigError::ZeroAttemptTimeout));
        assert_eq!(r.unwrap_err().as_str(), "zero_attempt_timeout");
    }

    #[test]
    fn without_retries_keeps_the_attempt_timeout_and_allows_one_attempt() {
        let p = RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2))
            .attempt_timeout(D::from_secs(3))
            .build()
            .unwrap()
            .without_retries();
        assert_eq!((p.max_attempts(), p.attempt_timeout()), (1, Some(D::from_secs(3))));
    }

    #[test]
    fn a_single_attempt_policy_needs_no_delays() {
        let p = RetryPolicy::<HZ>::single_attempt().build().unwrap();
        assert_eq!(p.max_attempts(), 1);
        // A zero base delay is refused only where a delay would be drawn from it: with one attempt
        // there is no retry, so an exponential or decorrelated policy of one attempt is fine.
        let zero = D::from_ticks(0);
        assert!(RetryPolicy::<HZ>::exponential(1, zero, zero).build().is_ok());
        assert!(RetryPolicy::<HZ>::constant(1, zero).jitter(Jitter::Decorrelated).build().is_ok());
        assert_eq!(RetryPolicy::<HZ>::exponential(2, zero, zero).build(), Err(ConfigError::ZeroBaseDelay));
    }

    #[test]
    fn the_hold_must_exceed_the_attempt_timeout_by_more_than_one_second() {
        assert_eq!(check_hold::<HZ>(D::from_secs(4), D::from_secs(3)), Err(ConfigError::BudgetHoldTooShort));
        assert_eq!(check_hold::<HZ>(D::from_ticks(4001), D::from_secs(3)), Ok(()));
    }
}
