//! The adaptive limit: a bulkhead whose slots follow what the dependency is seen to handle.
//!
//! Why: a bulkhead's fixed size is a guess made before the dependency misbehaved. By Little's law
//! the attempts in flight are the rate times the latency, so a dependency that slows down from
//! 20 ms to 2 s (a queue building up on its side) fills a bulkhead of 200 slots at 100 calls a
//! second, and every one of those 200 attempts waits in the dependency's queue, holding a task
//! and a connection here, likely to time out and be retried (seed 000: "each retry holds a task
//! and a connection for another 3 seconds"). A smaller fixed size refuses calls a healthy
//! dependency would have answered. An adaptive limit lowers the bound when attempts come back
//! slow or fail transiently, and raises it slowly while they come back fast: additive increase
//! and multiplicative decrease, the rule TCP's congestion avoidance applies to its window
//! (RFC 5681) and Netflix's concurrency-limits library (`AIMDLimit`) to a service's calls.
//!
//! The rules, and why:
//! - **It starts at the bulkhead's slots**, which stay its ceiling: a dependency that never shows
//!   a sign of overload sees exactly the fixed bulkhead, so adding the limit never costs a healthy
//!   dependency anything. With [`AdaptiveLimit::min_slots`] it never goes below a floor.
//! - **A sign of overload** is an attempt that failed in a way the caller's classifier calls
//!   transient (a timeout, a 503 or 429, a refused connection: [`Verdict::is_retryable`]), or one
//!   that took [`AdaptiveLimit::slow`] or longer, successes included (a queue on the far side
//!   shows as latency before it shows as failures). A fast failure that is not transient (a
//!   400, a bug) says nothing about load, and neither does an attempt abandoned with no outcome.
//! - **On a sign, the limit is halved** (TCP's factor; [`AdaptiveLimit::decrease_to_permille`]
//!   sets another, Netflix's `AIMDLimit` keeps 0.9), and is at least one slot lower, down to the
//!   floor. Halving, because the limit is too high by however much the far side's queue holds,
//!   and until it comes down, every attempt waits behind that queue: in the README's evidence a
//!   limit keeping 0.9 took 2 to 4 s of timeouts to come down to what a slowed dependency could
//!   serve, and halving took one round. **Once per round**: a sign from an attempt dispatched
//!   before the last decrease is ignored, as it was sent under the old limit (TCP reduces its
//!   window once per window of losses, not per loss). Without that, the 200 timeouts of one bad
//!   second would take the limit to its floor.
//! - **A fast success adds one step**, and as many steps as the limit has slots add one slot, up to
//!   the bulkhead's: about one slot per round of calls, as TCP's window grows by one segment a
//!   round trip. Only while at least half the limit is in use: a limit the callers never come near
//!   has not been tested, so it does not grow (RFC 7661's rule for a window the application leaves
//!   unused).
//!
//! The state is two counts and the instant of the last decrease, beside the bulkhead's own counts
//! (12 bytes, 8 with 32-bit ticks); integers only. A snapshot does not save it (nor the bulkhead's slots in flight): a restored dependency
//! starts again at the bulkhead's size and learns within a few rounds.
//!
//! [`Verdict::is_retryable`]: crate::Verdict::is_retryable

use crate::bulkhead::Bulkhead;
use crate::time::{Duration, Ticks};

/// An adaptive limit's configuration (see the module doc): the latency that counts as a sign of
/// overload, the floor, and the share of the limit kept on a decrease.
///
/// ```
/// use relent_core::{AdaptiveLimit, DependencyConfig, Duration};
///
/// // At most 200 attempts in flight; fewer, down to 8, while attempts time out, fail transiently
/// // or take 250 ms or longer.
/// const PAYRAIL: DependencyConfig<1_000> = DependencyConfig::new(Duration::<1_000>::from_secs(10))
///     .bulkhead(200)
///     .adaptive_limit(AdaptiveLimit::new(Duration::<1_000>::from_millis(250)).min_slots(8));
/// # relent_core::Dependency::<1_000, 10>::new(&PAYRAIL, relent_core::Instant::<1_000>::from_ticks(0))?;
/// # Ok::<(), relent_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AdaptiveLimit<const HZ: u64> {
    slow: Duration<HZ>,
    min_slots: u16,
    keep_permille: u16,
}

impl<const HZ: u64> AdaptiveLimit<HZ> {
    /// A limit that counts an attempt taking `slow` or longer as a sign of overload, with a floor
    /// of one slot, halved on a sign of overload.
    pub const fn new(slow: Duration<HZ>) -> Self {
        Self { slow, min_slots: 1, keep_permille: 500 }
    }

    /// Never fewer than `min_slots` slots (at least 1, at most the bulkhead's).
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn min_slots(mut self, min_slots: u16) -> Self {
        self.min_slots = min_slots;
        self
    }

    /// On a sign of overload, keep `permille` thousandths of the limit (1 to 999; the default,
    /// 500, halves it as TCP does; Netflix's `AIMDLimit` keeps 900), and at least one slot fewer.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn decrease_to_permille(mut self, permille: u16) -> Self {
        self.keep_permille = permille;
        self
    }

    /// The latency that counts as a sign of overload.
    pub const fn slow(&self) -> Duration<HZ> {
        self.slow
    }

    /// The floor.
    pub const fn floor(&self) -> u16 {
        self.min_slots
    }

    /// The share of the limit kept on a decrease, in thousandths.
    pub const fn kept_permille(&self) -> u16 {
        self.keep_permille
    }

    /// Checks the limit against the bulkhead it adapts (`slots`, `None` without one).
    pub(crate) const fn validate(&self, slots: Option<u16>) -> Result<(), crate::ConfigError> {
        let Some(slots) = slots else {
            return Err(crate::ConfigError::AdaptiveLimitWithoutBulkhead);
        };
        if self.slow.as_ticks() == 0 {
            return Err(crate::ConfigError::AdaptiveLimitZeroSlow);
        }
        if self.min_slots == 0 || self.min_slots > slots {
            return Err(crate::ConfigError::AdaptiveLimitFloorOutOfRange);
        }
        if self.keep_permille == 0 || self.keep_permille >= 1_000 {
            return Err(crate::ConfigError::AdaptiveLimitDecreaseOutOfRange);
        }
        Ok(())
    }
}

/// What one ended attempt says to the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sign {
    /// A transient failure, or an attempt that took `slow` or longer.
    Overload,
    /// A success faster than `slow`.
    Fast,
    /// Nothing: a failure that is not transient.
    Neither,
}

/// The limit as learnt, in the bulkhead's state: where it stands, the steps towards its next slot,
/// and when it was last lowered.
impl Bulkhead {
    /// The limit, for a bulkhead of `slots`.
    pub(crate) const fn learnt_limit(&self, slots: u16) -> u16 {
        if self.limit == 0 || self.limit > slots { slots } else { self.limit }
    }

    /// Learns from an attempt dispatched at `dispatched` that ended at `now` with `sign`, while
    /// `in_use` slots were taken (its own included), under `config` and a bulkhead of `slots`.
    pub(crate) fn learn<const HZ: u64>(
        &mut self,
        config: &AdaptiveLimit<HZ>,
        slots: u16,
        sign: Sign,
        in_use: u16,
        dispatched: Ticks,
        now: Ticks,
    ) {
        let limit = self.learnt_limit(slots);
        match sign {
            // Once per round: this attempt went out under the limit before the last decrease.
            Sign::Overload if self.limit != 0 && dispatched < self.lowered_at => {}
            Sign::Overload => {
                let kept = u32::from(limit).saturating_mul(u32::from(config.keep_permille)) / 1_000;
                let kept = u16::try_from(kept).unwrap_or(u16::MAX).min(limit.saturating_sub(1));
                self.limit = kept.max(config.min_slots).max(1);
                self.steps = 0;
                self.lowered_at = now;
            }
            Sign::Fast if u32::from(in_use).saturating_mul(2) >= u32::from(limit) && limit < slots => {
                self.steps = self.steps.saturating_add(1);
                if self.steps >= limit {
                    self.limit = limit.saturating_add(1);
                    self.steps = 0;
                }
            }
            Sign::Fast | Sign::Neither => {}
        }
    }

    pub(crate) fn rebase_learnt(&mut self, by: Ticks) {
        self.lowered_at = self.lowered_at.saturating_sub(by);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ConfigError;

    type D = Duration<1_000>;

    /// A bulkhead with no slot taken whose limit has learnt this much.
    fn bulkhead_at(limit: u16, steps: u16, lowered_at: Ticks) -> Bulkhead {
        let mut bulkhead = Bulkhead::new();
        (bulkhead.limit, bulkhead.steps, bulkhead.lowered_at) = (limit, steps, lowered_at);
        bulkhead
    }

    /// Netflix's factor, 0.9: more steps to check than halving's.
    fn limit() -> AdaptiveLimit<1_000> {
        AdaptiveLimit::new(D::from_millis(250)).min_slots(4).decrease_to_permille(900)
    }

    #[test]
    fn by_default_a_sign_halves_the_limit_down_to_one_slot() {
        let halving = AdaptiveLimit::new(D::from_millis(250));
        assert_eq!((halving.floor(), halving.kept_permille()), (1, 500));
        let mut learnt = Bulkhead::new();
        let mut seen = [0u16; 8];
        for (round, limit_now) in seen.iter_mut().enumerate() {
            let at = 1_000 * (round as Ticks + 1);
            learnt.learn(&halving, 100, Sign::Overload, 1, at - 1, at);
            *limit_now = learnt.learnt_limit(100);
        }
        assert_eq!(seen, [50, 25, 12, 6, 3, 1, 1, 1]);
    }

    #[test]
    fn it_starts_at_the_bulkheads_slots_and_a_fast_success_there_changes_nothing() {
        let mut learnt = Bulkhead::new();
        assert_eq!(learnt.learnt_limit(100), 100);
        learnt.learn(&limit(), 100, Sign::Fast, 100, 0, 10);
        assert_eq!((learnt.learnt_limit(100), learnt.steps), (100, 0));
    }

    /// 100 × 0.9 = 90, 90 × 0.9 = 81, and so on; a decrease is at least one slot (5 × 0.9 = 4.5
    /// would round down to 4 anyway; 4 is the floor); never below the floor.
    #[test]
    fn each_sign_of_a_new_round_keeps_nine_tenths_down_to_the_floor() {
        let mut learnt = Bulkhead::new();
        let mut seen = [0u16; 12];
        for (round, limit_now) in seen.iter_mut().enumerate() {
            let at = 1_000 * (round as Ticks + 1);
            learnt.learn(&limit(), 100, Sign::Overload, 1, at - 1, at);
            *limit_now = learnt.learnt_limit(100);
        }
        assert_eq!(seen, [90, 81, 72, 64, 57, 51, 45, 40, 36, 32, 28, 25]);
        for round in 12..40 {
            learnt.learn(&limit(), 100, Sign::Overload, 1, round * 1_000, round * 1_000 + 1);
        }
        assert_eq!(learnt.learnt_limit(100), 4);
    }

    #[test]
    fn a_decrease_takes_at_least_one_slot() {
        let mut learnt = Bulkhead::new();
        let halving = limit().min_slots(1).decrease_to_permille(999);
        learnt.learn(&halving, 5, Sign::Overload, 1, 0, 1);
        assert_eq!(learnt.learnt_limit(5), 4);
    }

    /// Signs from attempts sent before the last decrease were sent under the old limit.
    #[test]
    fn a_sign_from_an_attempt_sent_before_the_last_decrease_is_ignored() {
        let mut learnt = Bulkhead::new();
        learnt.learn(&limit(), 100, Sign::Overload, 50, 900, 1_000);
        assert_eq!(learnt.learnt_limit(100), 90);
        // Sent at 950 and 999, before the decrease at 1,000: ignored.
        learnt.learn(&limit(), 100, Sign::Overload, 50, 950, 1_100);
        learnt.learn(&limit(), 100, Sign::Overload, 50, 999, 1_200);
        assert_eq!(learnt.learnt_limit(100), 90);
        // Sent at 1,000, under the new limit: a new round.
        learnt.learn(&limit(), 100, Sign::Overload, 50, 1_000, 1_300);
        assert_eq!(learnt.learnt_limit(100), 81);
    }

    /// At a limit of 10, ten fast successes add a slot, then eleven the next.
    #[test]
    fn as_many_fast_successes_as_the_limit_has_slots_add_one() {
        let mut learnt = bulkhead_at(10, 0, 0);
        for _ in 0..9 {
            learnt.learn(&limit(), 100, Sign::Fast, 10, 0, 1);
        }
        assert_eq!(learnt.learnt_limit(100), 10);
        learnt.learn(&limit(), 100, Sign::Fast, 10, 0, 1);
        assert_eq!((learnt.learnt_limit(100), learnt.steps), (11, 0));
        for _ in 0..10 {
            learnt.learn(&limit(), 100, Sign::Fast, 6, 0, 1);
        }
        assert_eq!(learnt.learnt_limit(100), 11);
        learnt.learn(&limit(), 100, Sign::Fast, 6, 0, 1);
        assert_eq!(learnt.learnt_limit(100), 12);
    }

    /// RFC 7661: a limit the callers leave more than half unused has not been tested.
    #[test]
    fn a_limit_less_than_half_in_use_does_not_grow() {
        let mut learnt = bulkhead_at(10, 0, 0);
        for _ in 0..100 {
            learnt.learn(&limit(), 100, Sign::Fast, 4, 0, 1);
        }
        assert_eq!((learnt.learnt_limit(100), learnt.steps), (10, 0));
        learnt.learn(&limit(), 100, Sign::Fast, 5, 0, 1);
        assert_eq!(learnt.steps, 1);
    }

    #[test]
    fn it_grows_to_the_bulkheads_slots_and_no_further() {
        let mut learnt = bulkhead_at(19, 0, 0);
        for _ in 0..1_000 {
            learnt.learn(&limit(), 20, Sign::Fast, 20, 0, 1);
        }
        assert_eq!((learnt.learnt_limit(20), learnt.steps), (20, 0));
    }

    #[test]
    fn a_fast_failure_that_is_not_transient_says_nothing() {
        let mut learnt = bulkhead_at(10, 3, 0);
        learnt.learn(&limit(), 100, Sign::Neither, 10, 0, 1);
        assert_eq!(learnt, bulkhead_at(10, 3, 0));
    }

    #[test]
    fn a_decrease_starts_the_steps_again() {
        let mut learnt = bulkhead_at(10, 9, 0);
        learnt.learn(&limit(), 100, Sign::Overload, 10, 5, 7);
        assert_eq!(learnt, bulkhead_at(9, 0, 7));
    }

    /// A limit above the bulkhead's slots (none can be learnt so, but the state does not know the
    /// configuration it is read with) reads as the slots.
    #[test]
    fn a_limit_reads_as_at_most_the_bulkheads_slots() {
        assert_eq!(bulkhead_at(50, 0, 0).learnt_limit(20), 20);
        assert_eq!(bulkhead_at(20, 0, 0).learnt_limit(20), 20);
        assert_eq!(bulkhead_at(19, 0, 0).learnt_limit(20), 19);
    }

    /// With 32-bit ticks no span may exceed `MAX_SPAN`, the slow threshold included.
    #[cfg(feature = "ticks-u32")]
    #[test]
    fn a_slow_threshold_past_max_span_is_refused() {
        let config = crate::DependencyConfig::new(D::from_secs(10))
            .bulkhead(8)
            .adaptive_limit(AdaptiveLimit::new(D::from_ticks(crate::MAX_SPAN + 1)));
        assert_eq!(config.validate(), Err(ConfigError::SpanTooLongForTicks));
    }

    #[test]
    fn rebasing_moves_the_last_decrease() {
        let mut learnt = bulkhead_at(10, 0, 5_000);
        learnt.rebase_learnt(3_000);
        assert_eq!(learnt.lowered_at, 2_000);
        learnt.rebase_learnt(3_000);
        assert_eq!(learnt.lowered_at, 0);
    }

    #[test]
    fn validation_names_each_mistake() {
        let ok = limit();
        assert_eq!(ok.validate(Some(4)), Ok(()));
        assert_eq!(ok.validate(None), Err(ConfigError::AdaptiveLimitWithoutBulkhead));
        assert_eq!(ok.validate(Some(3)), Err(ConfigError::AdaptiveLimitFloorOutOfRange));
        assert_eq!(ok.min_slots(0).validate(Some(3)), Err(ConfigError::AdaptiveLimitFloorOutOfRange));
        assert_eq!(
            AdaptiveLimit::new(D::from_ticks(0)).validate(Some(3)),
            Err(ConfigError::AdaptiveLimitZeroSlow)
        );
        for bad in [0, 1_000, u16::MAX] {
            assert_eq!(
                ok.decrease_to_permille(bad).validate(Some(8)),
                Err(ConfigError::AdaptiveLimitDecreaseOutOfRange)
            );
        }
        for good in [1, 500, 999] {
            assert_eq!(ok.decrease_to_permille(good).validate(Some(8)), Ok(()));
        }
        assert_eq!((ok.slow(), ok.floor(), ok.kept_permille()), (D::from_millis(250), 4, 900));
    }
}
