//! Caller mistakes, kept apart from outcomes.
//!
//! A [`ConfigError`] is a bad policy or budget, found while building it (in a `const`, at compile
//! time). A [`StartError`] is a combination that cannot run, found by
//! [`Operation::start`](crate::Operation::start) before anything is dispatched. Neither is an
//! outcome of a call: outcomes are [`Completion`](crate::Completion)s with a
//! [`Problem`](crate::Problem) code. Every message says what is wrong and how to fix it.

use crate::time::Ticks;
use core::fmt;

/// A policy, budget or dependency configuration that cannot be built.
///
/// `message()` is a `const fn`, so a bad configuration in a `const` stops the build with this text:
///
/// ```compile_fail
/// use relent_core::{Duration, RetryPolicy};
/// const BAD: RetryPolicy<1_000> =
///     match RetryPolicy::exponential(0, Duration::<1_000>::from_millis(100), Duration::<1_000>::from_secs(2)).build() {
///         Ok(p) => p,
///         Err(e) => panic!("{}", e.message()),
///     };
/// # fn main() { let _ = BAD; }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ConfigError {
    /// `max_attempts` is outside `1..=64`.
    MaxAttemptsOutOfRange,
    /// The maximum delay is shorter than the base delay.
    MaxDelayBelowBaseDelay,
    /// Exponential or decorrelated backoff from a zero base delay never grows.
    ZeroBaseDelay,
    /// An attempt timeout ceiling of zero would let no attempt run.
    ZeroAttemptTimeout,
    /// A ratio budget above 100 %.
    BudgetPercentOutOfRange,
    /// A token bucket that can never hold a token.
    ZeroBudgetCapacity,
    /// A token bucket that never refills.
    ZeroBudgetRefill,
    /// A token bucket refill period of zero.
    ZeroBudgetPeriod,
    /// A token bucket whose capacity × period does not fit the tick arithmetic.
    BudgetTooLargeForTickRate,
    /// A token bucket's reservation hold does not exceed the attempt timeout by more than 1 s.
    BudgetHoldTooShort,
    /// A token bucket is used with a policy that sets no attempt timeout, so the hold rule cannot
    /// be checked.
    BudgetNeedsAttemptTimeout,
    /// A dependency's counting window of zero length.
    ZeroWindow,
    /// A counting window shorter than its number of buckets, in ticks.
    WindowShorterThanBuckets,
    /// A breaker failure percentage outside `1..=100`.
    BreakerPercentOutOfRange,
    /// A count-based breaker window outside `1..=64` outcomes.
    BreakerCountWindowOutOfRange,
    /// A count-based breaker that needs more outcomes than its window holds.
    BreakerMinCallsAboveWindow,
    /// A consecutive-failures breaker that opens after zero failures.
    BreakerZeroConsecutiveFailures,
    /// A breaker that opens for no time.
    BreakerZeroBreak,
    /// A breaker with no half-open probes can never close.
    BreakerZeroProbes,
    /// A slow-call threshold of zero counts every call as a failure.
    BreakerZeroSlowCall,
    /// A bulkhead with no slots admits nothing.
    ZeroBulkhead,
    /// A bulkhead queue on a dependency with no bulkhead.
    BulkheadQueueWithoutBulkhead,
    /// A bulkhead queue with no places queues nothing.
    ZeroBulkheadQueue,
    /// A bulkhead queue whose operations wait for no time.
    ZeroBulkheadWait,
    /// A rate limit of zero units per period admits nothing.
    ZeroRate,
    /// A rate limit with a zero period.
    ZeroRatePeriod,
    /// A rate limit with a burst of zero admits nothing.
    ZeroRateBurst,
    /// A duty cycle over a zero window.
    ZeroDutyCycleWindow,
    /// A duty cycle that allows no airtime.
    ZeroDutyCycleAirtime,
    /// A duty cycle that allows more airtime than its window is long.
    DutyCycleAboveWindow,
    /// A duty cycle whose airtime allowance does not fit 32-bit ticks.
    DutyCycleAirtimeTooLarge,
    /// A duty cycle on a dependency with no airtime log (`L = 0`).
    AirtimeLogSize,
    /// A duration longer than [`MAX_SPAN`](crate::MAX_SPAN) ticks, with 32-bit ticks.
    SpanTooLongForTicks,
    /// An operator's control of the circuit ([`Dependency::isolate_circuit`],
    /// [`Dependency::close_circuit`]) on a dependency configured without a breaker.
    ///
    /// [`Dependency::isolate_circuit`]: crate::Dependency::isolate_circuit
    /// [`Dependency::close_circuit`]: crate::Dependency::close_circuit
    NoBreaker,
    /// A client throttle whose multiplier `K` is below 1,000 thousandths (1.0).
    ThrottleMultiplierBelowOne,
    /// An adaptive limit on a dependency with no bulkhead to adapt.
    AdaptiveLimitWithoutBulkhead,
    /// An adaptive limit whose latency threshold is zero counts every attempt as slow.
    AdaptiveLimitZeroSlow,
    /// An adaptive limit's floor of zero slots, or above the bulkhead's slots.
    AdaptiveLimitFloorOutOfRange,
    /// An adaptive limit that keeps none, or all, of the limit on a decrease (outside `1..=999`).
    AdaptiveLimitDecreaseOutOfRange,
    /// A latency log that weighs fewer than 20 or more than 4,000 attempts before halving.
    LatencySamplesOutOfRange,
    /// A critical reserve of no share, or of more than 90 % (outside `1..=90`).
    CriticalReserveOutOfRange,
    /// A backoff multiplier of 100 percent (1.0) or less, which never grows the delay.
    MultiplierNotAboveOne,
    /// A backoff multiplier on a constant policy, whose delay does not grow.
    MultiplierOnConstant,
}

impl ConfigError {
    /// The stable snake_case code of this error.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MaxAttemptsOutOfRange => "max_attempts_out_of_range",
            Self::MaxDelayBelowBaseDelay => "max_delay_below_base_delay",
            Self::ZeroBaseDelay => "zero_base_delay",
            Self::ZeroAttemptTimeout => "zero_attempt_timeout",
            Self::BudgetPercentOutOfRange => "budget_percent_out_of_range",
            Self::ZeroBudgetCapacity => "zero_budget_capacity",
            Self::ZeroBudgetRefill => "zero_budget_refill",
            Self::ZeroBudgetPeriod => "zero_budget_period",
            Self::BudgetTooLargeForTickRate => "budget_too_large_for_tick_rate",
            Self::BudgetHoldTooShort => "budget_hold_too_short",
            Self::BudgetNeedsAttemptTimeout => "budget_needs_attempt_timeout",
            Self::ZeroWindow => "zero_window",
            Self::WindowShorterThanBuckets => "window_shorter_than_buckets",
            Self::BreakerPercentOutOfRange => "breaker_percent_out_of_range",
            Self::BreakerCountWindowOutOfRange => "breaker_count_window_out_of_range",
            Self::BreakerMinCallsAboveWindow => "breaker_min_calls_above_window",
            Self::BreakerZeroConsecutiveFailures => "breaker_zero_consecutive_failures",
            Self::BreakerZeroBreak => "breaker_zero_break",
            Self::BreakerZeroProbes => "breaker_zero_probes",
            Self::BreakerZeroSlowCall => "breaker_zero_slow_call",
            Self::ZeroBulkhead => "zero_bulkhead",
            Self::BulkheadQueueWithoutBulkhead => "bulkhead_queue_without_bulkhead",
            Self::ZeroBulkheadQueue => "zero_bulkhead_queue",
            Self::ZeroBulkheadWait => "zero_bulkhead_wait",
            Self::ZeroRate => "zero_rate",
            Self::ZeroRatePeriod => "zero_rate_period",
            Self::ZeroRateBurst => "zero_rate_burst",
            Self::ZeroDutyCycleWindow => "zero_duty_cycle_window",
            Self::ZeroDutyCycleAirtime => "zero_duty_cycle_airtime",
            Self::DutyCycleAboveWindow => "duty_cycle_above_window",
            Self::DutyCycleAirtimeTooLarge => "duty_cycle_airtime_too_large",
            Self::AirtimeLogSize => "airtime_log_size",
            Self::SpanTooLongForTicks => "span_too_long_for_ticks",
            Self::NoBreaker => "no_breaker",
            Self::ThrottleMultiplierBelowOne => "throttle_multiplier_below_one",
            Self::AdaptiveLimitWithoutBulkhead => "adaptive_limit_without_bulkhead",
            Self::AdaptiveLimitZeroSlow => "adaptive_limit_zero_slow",
            Self::AdaptiveLimitFloorOutOfRange => "adaptive_limit_floor_out_of_range",
            Self::AdaptiveLimitDecreaseOutOfRange => "adaptive_limit_decrease_out_of_range",
            Self::LatencySamplesOutOfRange => "latency_samples_out_of_range",
            Self::CriticalReserveOutOfRange => "critical_reserve_out_of_range",
            Self::MultiplierNotAboveOne => "multiplier_not_above_one",
            Self::MultiplierOnConstant => "multiplier_on_constant",
        }
    }

    /// What is wrong and how to fix it. A `const fn`, for `panic!("{}", e.message())` in a `const`.
    pub const fn message(self) -> &'static str {
        match self {
            Self::MaxAttemptsOutOfRange => {
                "max_attempts must be between 1 and 64 and counts the first call: use 1 for no retries, 3 for one call and at most two retries"
            }
            Self::MaxDelayBelowBaseDelay => {
                "the maximum delay is shorter than the base delay: raise the maximum delay to at least the base delay"
            }
            Self::ZeroBaseDelay => {
                "exponential and decorrelated backoff cannot grow from a zero base delay: give a base delay of at least one tick (seed 000 uses 100 ms)"
            }
            Self::ZeroAttemptTimeout => {
                "an attempt timeout of zero lets no attempt run: give a positive ceiling, or none to use what remains of the deadline"
            }
            Self::BudgetPercentOutOfRange => {
                "a ratio retry budget is a percentage of all calls and must be between 0 and 100 (seed 000 uses 10)"
            }
            Self::ZeroBudgetCapacity => {
                "a token retry budget with capacity 0 never allows a retry: give a capacity of at least 1, or a policy of 1 attempt"
            }
            Self::ZeroBudgetRefill => {
                "a token retry budget that refills 0 tokens per period runs dry for good: give a refill of at least 1"
            }
            Self::ZeroBudgetPeriod => {
                "a token retry budget's refill period must be positive (seed 003 refills 10 tokens per 60 s)"
            }
            Self::BudgetTooLargeForTickRate => {
                "capacity × refill period overflows 64-bit ticks at this tick rate: use a smaller capacity or a shorter period"
            }
            Self::BudgetHoldTooShort => {
                "the retry budget's reservation hold must exceed the attempt timeout by more than 1 s, or a reservation can lapse while its attempt still runs: lengthen the hold or lower the attempt timeout"
            }
            Self::BudgetNeedsAttemptTimeout => {
                "a token retry budget holds a reservation for the length of an attempt, so the policy needs an attempt timeout ceiling shorter than the hold minus 1 s: set attempt_timeout"
            }
            Self::ZeroWindow => "a dependency's counting window must be positive (seed 000 counts over 10 s)",
            Self::WindowShorterThanBuckets => {
                "the counting window is shorter than its number of buckets in ticks, so a bucket would be empty: lengthen the window or use fewer buckets"
            }
            Self::BreakerPercentOutOfRange => {
                "a circuit breaker opens at a failure percentage between 1 and 100: 0 would open on success, above 100 never"
            }
            Self::BreakerCountWindowOutOfRange => {
                "a count-based breaker window remembers 1 to 64 outcomes: use a size in that range, or the time-based failure ratio"
            }
            Self::BreakerMinCallsAboveWindow => {
                "the breaker's minimum number of calls exceeds its count window, so it can never open: lower min_calls to at most the window size"
            }
            Self::BreakerZeroConsecutiveFailures => {
                "a consecutive-failures breaker must need at least 1 failure to open"
            }
            Self::BreakerZeroBreak => {
                "a circuit breaker must stay open for a positive break duration before it probes again (for example 30 s)"
            }
            Self::BreakerZeroProbes => {
                "a circuit breaker needs at least 1 half-open probe, or it can never close again"
            }
            Self::BreakerZeroSlowCall => {
                "a slow-call threshold of zero counts every call as a failure: give a positive threshold, or none"
            }
            Self::ZeroBulkhead => {
                "a bulkhead of 0 slots admits no attempt: allow at least 1 attempt in flight, or no bulkhead"
            }
            Self::BulkheadQueueWithoutBulkhead => {
                "a bulkhead queue holds attempts waiting for a bulkhead slot, and this dependency has no bulkhead: add one with DependencyConfig::bulkhead, or leave out bulkhead_queue"
            }
            Self::ZeroBulkheadQueue => {
                "a bulkhead queue of 0 places holds no waiting attempt: allow at least 1, or leave out bulkhead_queue"
            }
            Self::ZeroBulkheadWait => {
                "a bulkhead queue whose attempts wait for 0 ticks holds none: give a positive maximum wait, or leave out bulkhead_queue"
            }
            Self::ZeroRate => "a rate limit of 0 attempts per period admits nothing: allow at least 1",
            Self::ZeroRatePeriod => {
                "a rate limit's period must be positive (for example 100 attempts per 1 s)"
            }
            Self::ZeroRateBurst => "a rate limit's burst must be at least 1 (one attempt at a time)",
            Self::ZeroDutyCycleWindow => {
                "a duty cycle's window must be positive (EU868 counts 1 % of any hour)"
            }
            Self::ZeroDutyCycleAirtime => {
                "a duty cycle that allows no airtime lets nothing be sent: allow a positive airtime per window, or no duty cycle"
            }
            Self::DutyCycleAboveWindow => {
                "a duty cycle cannot allow more airtime than its window is long: give at most the window (100 %)"
            }
            Self::DutyCycleAirtimeTooLarge => {
                "a duty cycle's airtime allowance must fit in 32-bit ticks (71 minutes at 1 MHz): use a shorter window or a lower share"
            }
            Self::AirtimeLogSize => {
                "a duty cycle needs an airtime log to remember what was sent: give the dependency state its third parameter, for example Dependency<HZ, 4, 8> for 8 entries"
            }
            Self::SpanTooLongForTicks => {
                "with 32-bit ticks (the ticks-u32 feature) no delay, timeout, window, break, cooldown or period may exceed MAX_SPAN, 2^30 ticks (12.4 days at 1 kHz, 17.9 minutes at 1 MHz): shorten it, use a lower tick rate, or 64-bit ticks"
            }
            Self::NoBreaker => {
                "this dependency has no circuit breaker, so there is no circuit to isolate or close: configure one with DependencyConfig::breaker (the breaker feature, on by default)"
            }
            Self::ThrottleMultiplierBelowOne => {
                "a client throttle's multiplier K must be at least 1000 thousandths (K = 1): below it the client refuses requests a dependency that accepts everything would take; the SRE book suggests 2000 (ClientThrottle::K2)"
            }
            Self::AdaptiveLimitWithoutBulkhead => {
                "an adaptive limit lowers and raises a bulkhead's slots, and this dependency has no bulkhead: add one with DependencyConfig::bulkhead (its slots are the limit's ceiling), or leave out adaptive_limit"
            }
            Self::AdaptiveLimitZeroSlow => {
                "an adaptive limit whose slow threshold is 0 ticks counts every attempt as a sign of overload and keeps the limit at its floor: give the latency above which the dependency is queueing, for example a few times its usual latency"
            }
            Self::AdaptiveLimitFloorOutOfRange => {
                "an adaptive limit's floor (min_slots) must be at least 1 slot, or nothing would ever be sent, and at most the bulkhead's slots, its ceiling"
            }
            Self::AdaptiveLimitDecreaseOutOfRange => {
                "an adaptive limit keeps between 1 and 999 thousandths of itself on a sign of overload (decrease_to_permille): 500, the default, halves it as TCP does; Netflix's AIMD keeps 900"
            }
            Self::LatencySamplesOutOfRange => {
                "a latency log weighs between 20 and 4000 attempts before it halves their weights (latency_samples): fewer than 20 hold no 95th percentile, more would overflow its 16-bit counts; a few hundred suit most dependencies: a log forgets a slowdown after about four times its samples"
            }
            Self::CriticalReserveOutOfRange => {
                "a critical reserve keeps between 1 and 90 percent of each limit (bulkhead, retry budget, rate limit's burst, duty cycle's airtime) for critical work (critical_reserve): leave it out for none; 20 leaves sheddable work four fifths of each limit"
            }
            Self::MultiplierNotAboveOne => {
                "a backoff multiplier of 100 percent or less never grows the delay (multiplier_percent): give more than 100 (150 multiplies each delay by 1.5, 200 doubles it), or use a constant backoff for the same delay each time"
            }
            Self::MultiplierOnConstant => {
                "a backoff multiplier applies to an exponential backoff, and this policy is constant (multiplier_percent): build it with RetryPolicy::exponential, or leave the multiplier out for the same delay each time"
            }
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl core::error::Error for ConfigError {}

/// An operation that must not run as configured. Returned by
/// [`Operation::start`](crate::Operation::start) before anything is dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum StartError {
    /// The policy allows more than one attempt, and the operation made no replay-safety statement.
    UnsafeWithRetries {
        /// The policy's maximum number of attempts.
        max_attempts: u8,
    },
    /// The policy allows more than one attempt, and the dependency has no retry budget.
    RetryWithoutBudget {
        /// The policy's maximum number of attempts.
        max_attempts: u8,
    },
    /// The dependency's budget does not fit this policy (see the inner error).
    Budget(ConfigError),
    /// The dependency limits airtime (a duty cycle) and the context states none.
    NoAirtime,
    /// The operation's deadline is longer than [`MAX_SPAN`](crate::MAX_SPAN) ticks (32-bit ticks only).
    DeadlineTooLong {
        /// The deadline, in ticks.
        deadline: Ticks,
    },
    /// One attempt costs more airtime than the duty cycle allows in a whole window, so it can
    /// never be sent.
    AirtimeAboveDutyCycle {
        /// The attempt's airtime, in ticks.
        airtime: Ticks,
        /// The duty cycle's allowance per window, in ticks.
        allowance: Ticks,
    },
    /// A hedge was asked of an operation whose policy allows one attempt: a hedge is a repeat
    /// ([`Operation::hedge_plan`](crate::Operation::hedge_plan)).
    HedgeWithoutRetries,
    /// A hedge was asked of an operation whose statement is not a read's: a provider's
    /// idempotency key protects a repeat, not a copy in flight
    /// ([`ReplaySafety::may_hedge`](crate::ReplaySafety::may_hedge)).
    HedgeOfMutation,
    /// A hedge delay at a percentile outside 1 to 99.
    HedgePercentileOutOfRange {
        /// The percentile asked for.
        percent: u8,
    },
    /// A hedge delay learnt from a dependency that keeps no latency log.
    HedgeWithoutLatencyLog,
}

impl StartError {
    /// The stable snake_case code of this error.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::UnsafeWithRetries { .. } => "unsafe_with_retries",
            Self::RetryWithoutBudget { .. } => "retry_without_budget",
            Self::Budget(e) => e.as_str(),
            Self::NoAirtime => "no_airtime",
            Self::DeadlineTooLong { .. } => "deadline_too_long",
            Self::AirtimeAboveDutyCycle { .. } => "airtime_above_duty_cycle",
            Self::HedgeWithoutRetries => "hedge_without_retries",
            Self::HedgeOfMutation => "hedge_of_mutation",
            Self::HedgePercentileOutOfRange { .. } => "hedge_percentile_out_of_range",
            Self::HedgeWithoutLatencyLog => "hedge_without_latency_log",
        }
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsafeWithRetries { max_attempts } => write!(
                f,
                "max_attempts = {max_attempts} (greater than one) requires an explicit replay-safety statement; the operation is Unsafe. \
                 State ReplaySafety::replayable_read or ReplaySafety::provider_idempotent_mutation in its Context if repeating it is safe, \
                 or ReplaySafety::UntilArrived to repeat only attempts that never reached the far side (judged Verdict::NeverArrived); \
                 Relent never infers that repeating a call is safe"
            ),
            Self::RetryWithoutBudget { max_attempts } => write!(
                f,
                "max_attempts = {max_attempts} requires a retry budget: retries must be paid for so a failing dependency is not hammered. \
                 Give the dependency a RetryBudget (RetryBudget::ratio or RetryBudget::token_bucket), or use a policy of 1 attempt"
            ),
            Self::Budget(e) => f.write_str(e.message()),
            Self::NoAirtime => f.write_str(
                "the dependency limits airtime with a duty cycle, and the operation states no airtime: a transmission \
                 that costs nothing would never be limited. Give the frame's time on air with Context::airtime",
            ),
            Self::DeadlineTooLong { deadline } => write!(
                f,
                "a deadline of {deadline} ticks is longer than 32-bit ticks plan ahead (MAX_SPAN, {} ticks: 12.4 days at 1 kHz, \
                 17.9 minutes at 1 MHz): shorten the deadline, use a lower tick rate, or 64-bit ticks",
                crate::MAX_SPAN
            ),
            Self::AirtimeAboveDutyCycle { airtime, allowance } => write!(
                f,
                "one attempt costs {airtime} ticks of airtime, more than the duty cycle allows in a whole window \
                 ({allowance} ticks), so it could never be sent: shorten the frame, use a faster data rate, or split it"
            ),
            Self::HedgeWithoutRetries => f.write_str(
                "a hedge repeats the call, and the policy allows one attempt, which says the call must not be repeated. \
                 Give the policy at least 2 attempts (with a replay-safety statement and a retry budget, as any retry \
                 needs), or do not hedge",
            ),
            Self::HedgeOfMutation => f.write_str(
                "a hedge sends a second copy while the first is still out, and the operation is a keyed mutation: a \
                 provider's idempotency key protects a repeat that comes after the first request, not a copy in \
                 flight, which providers treat as a conflict. Hedge reads only \
                 (ReplaySafety::replayable_read); a keyed mutation is still retried",
            ),
            Self::HedgePercentileOutOfRange { percent } => write!(
                f,
                "a hedge delay at the {percent}th percentile: give a percentile from 1 to 99. The Tail at Scale \
                 hedges at the 95th, which sends about one call in twenty twice"
            ),
            Self::HedgeWithoutLatencyLog => f.write_str(
                "a hedge delay learnt from the dependency's latency needs a log of it: give the dependency \
                 DependencyConfig::latency_samples (200 is a good start; the latency feature, on by default), or \
                 hedge after a fixed delay",
            ),
        }
    }
}

impl core::error::Error for StartError {}

#[cfg(test)]
mod tests {
    //! Every refusal through the entry point a caller meets it at: a configuration that each
    //! [`ConfigError`] and [`StartError`] names, built with the public API, gets exactly that
    //! error; and the codes and messages that logs and build errors show are distinct.

    extern crate std;
    use std::collections::BTreeSet;
    use std::string::ToString;
    use std::vec::Vec;

    use super::*;
    #[cfg(feature = "breaker")]
    use crate::BreakerConfig;
    #[cfg(feature = "duty-cycle")]
    use crate::DutyCycle;
    #[cfg(feature = "rate-limit")]
    use crate::RateLimit;
    use crate::{
        Context, Dependency, DependencyConfig, Instant, MAX_SPAN, Operation, ReplaySafety, RetryBudget,
        RetryPolicy, Verdict,
    };

    const HZ: u64 = 1_000;
    type D = crate::Duration<HZ>;
    const T0: Instant<HZ> = Instant::<HZ>::from_ticks(0);

    /// Every configuration refusal, in declaration order. `refusal` matches without a wildcard,
    /// so a new variant does not build until it names the configuration that produces it; list it
    /// here as well.
    const ALL: [ConfigError; 43] = [
        ConfigError::MaxAttemptsOutOfRange,
        ConfigError::MaxDelayBelowBaseDelay,
        ConfigError::ZeroBaseDelay,
        ConfigError::ZeroAttemptTimeout,
        ConfigError::BudgetPercentOutOfRange,
        ConfigError::ZeroBudgetCapacity,
        ConfigError::ZeroBudgetRefill,
        ConfigError::ZeroBudgetPeriod,
        ConfigError::BudgetTooLargeForTickRate,
        ConfigError::BudgetHoldTooShort,
        ConfigError::BudgetNeedsAttemptTimeout,
        ConfigError::ZeroWindow,
        ConfigError::WindowShorterThanBuckets,
        ConfigError::BreakerPercentOutOfRange,
        ConfigError::BreakerCountWindowOutOfRange,
        ConfigError::BreakerMinCallsAboveWindow,
        ConfigError::BreakerZeroConsecutiveFailures,
        ConfigError::BreakerZeroBreak,
        ConfigError::BreakerZeroProbes,
        ConfigError::BreakerZeroSlowCall,
        ConfigError::ZeroBulkhead,
        ConfigError::BulkheadQueueWithoutBulkhead,
        ConfigError::ZeroBulkheadQueue,
        ConfigError::ZeroBulkheadWait,
        ConfigError::ZeroRate,
        ConfigError::ZeroRatePeriod,
        ConfigError::ZeroRateBurst,
        ConfigError::ZeroDutyCycleWindow,
        ConfigError::ZeroDutyCycleAirtime,
        ConfigError::DutyCycleAboveWindow,
        ConfigError::DutyCycleAirtimeTooLarge,
        ConfigError::AirtimeLogSize,
        ConfigError::SpanTooLongForTicks,
        ConfigError::NoBreaker,
        ConfigError::ThrottleMultiplierBelowOne,
        ConfigError::AdaptiveLimitWithoutBulkhead,
        ConfigError::AdaptiveLimitZeroSlow,
        ConfigError::AdaptiveLimitFloorOutOfRange,
        ConfigError::AdaptiveLimitDecreaseOutOfRange,
        ConfigError::LatencySamplesOutOfRange,
        ConfigError::CriticalReserveOutOfRange,
        ConfigError::MultiplierNotAboveOne,
        ConfigError::MultiplierOnConstant,
    ];

    /// What building a policy or budget, or a dependency's state, came to.
    fn built<T>(result: Result<T, ConfigError>) -> Option<Result<(), ConfigError>> {
        Some(result.map(drop))
    }

    /// A dependency's state built from `config`, as `Dependency::new` (and both adapters') builds
    /// it: ten buckets, an airtime log of four entries.
    fn dependency(config: DependencyConfig<HZ>) -> Option<Result<(), ConfigError>> {
        built(Dependency::<HZ, 10, 4>::new(&config, T0))
    }

    fn window() -> DependencyConfig<HZ> {
        DependencyConfig::new(D::from_secs(10))
    }

    fn policy(max_attempts: u8) -> crate::RetryPolicyBuilder<HZ> {
        RetryPolicy::exponential(max_attempts, D::from_millis(100), D::from_secs(2))
    }

    /// What the configuration that `e` names comes to, through the call a caller makes; `None`
    /// where this build cannot state it: its protection compiled out, or a span too long for
    /// 32-bit ticks with 64-bit ticks, whose spans have no limit.
    fn refusal(e: ConfigError) -> Option<Result<(), ConfigError>> {
        let second = D::from_secs(1);
        match e {
            ConfigError::MaxAttemptsOutOfRange => built(policy(65).build()),
            ConfigError::MaxDelayBelowBaseDelay => {
                built(RetryPolicy::<HZ>::exponential(3, D::from_secs(2), second).build())
            }
            ConfigError::ZeroBaseDelay => {
                built(RetryPolicy::<HZ>::exponential(3, D::from_ticks(0), second).build())
            }
            ConfigError::ZeroAttemptTimeout => built(policy(3).attempt_timeout(D::from_ticks(0)).build()),
            ConfigError::BudgetPercentOutOfRange => built(RetryBudget::<HZ>::ratio(101, 0)),
            #[cfg(feature = "token-bucket")]
            ConfigError::ZeroBudgetCapacity => built(RetryBudget::token_bucket(0, 1, second, second)),
            #[cfg(feature = "token-bucket")]
            ConfigError::ZeroBudgetRefill => built(RetryBudget::token_bucket(1, 0, second, second)),
            #[cfg(feature = "token-bucket")]
            ConfigError::ZeroBudgetPeriod => built(RetryBudget::token_bucket(1, 1, D::from_ticks(0), second)),
            // Credit is counted in 64 bits: only 64-bit ticks can overflow it.
            #[cfg(all(feature = "token-bucket", not(feature = "ticks-u32")))]
            ConfigError::BudgetTooLargeForTickRate => {
                built(RetryBudget::token_bucket(u32::MAX, 1, D::from_ticks(crate::Ticks::MAX / 2), second))
            }
            // A 3 s attempt needs a hold of more than 4 s.
            #[cfg(feature = "token-bucket")]
            ConfigError::BudgetHoldTooShort => {
                let budget = RetryBudget::token_bucket(10, 1, D::from_secs(60), D::from_secs(4)).ok()?;
                built(policy(3).attempt_timeout(D::from_secs(3)).build().ok()?.check_budget(&budget))
            }
            #[cfg(feature = "token-bucket")]
            ConfigError::BudgetNeedsAttemptTimeout => {
                let budget = RetryBudget::token_bucket(10, 1, D::from_secs(60), D::from_secs(4)).ok()?;
                built(policy(3).build().ok()?.check_budget(&budget))
            }
            ConfigError::ZeroWindow => dependency(DependencyConfig::new(D::from_ticks(0))),
            // Ten buckets need a window of ten ticks at least.
            ConfigError::WindowShorterThanBuckets => dependency(DependencyConfig::new(D::from_ticks(9))),
            #[cfg(feature = "breaker-failure-ratio")]
            ConfigError::BreakerPercentOutOfRange => {
                dependency(window().breaker(BreakerConfig::failure_ratio(101, 10, D::from_secs(30))))
            }
            #[cfg(feature = "breaker-count-window")]
            ConfigError::BreakerCountWindowOutOfRange => {
                dependency(window().breaker(BreakerConfig::count_window(65, 50, 10, D::from_secs(30))))
            }
            #[cfg(feature = "breaker-count-window")]
            ConfigError::BreakerMinCallsAboveWindow => {
                dependency(window().breaker(BreakerConfig::count_window(20, 50, 21, D::from_secs(30))))
            }
            #[cfg(feature = "breaker")]
            ConfigError::BreakerZeroConsecutiveFailures => {
                dependency(window().breaker(BreakerConfig::consecutive_failures(0, D::from_secs(30))))
            }
            #[cfg(feature = "breaker")]
            ConfigError::BreakerZeroBreak => {
                dependency(window().breaker(BreakerConfig::consecutive_failures(5, D::from_ticks(0))))
            }
            #[cfg(feature = "breaker")]
            ConfigError::BreakerZeroProbes => dependency(
                window().breaker(BreakerConfig::consecutive_failures(5, D::from_secs(30)).probes(0)),
            ),
            #[cfg(feature = "breaker")]
            ConfigError::BreakerZeroSlowCall => dependency(window().breaker(
                BreakerConfig::consecutive_failures(5, D::from_secs(30)).slow_calls(D::from_ticks(0)),
            )),
            #[cfg(feature = "bulkhead")]
            ConfigError::ZeroBulkhead => dependency(window().bulkhead(0)),
            #[cfg(feature = "bulkhead")]
            ConfigError::BulkheadQueueWithoutBulkhead => {
                dependency(window().bulkhead_queue(64, D::from_millis(200)))
            }
            #[cfg(feature = "bulkhead")]
            ConfigError::ZeroBulkheadQueue => {
                dependency(window().bulkhead(32).bulkhead_queue(0, D::from_millis(200)))
            }
            #[cfg(feature = "bulkhead")]
            ConfigError::ZeroBulkheadWait => {
                dependency(window().bulkhead(32).bulkhead_queue(64, D::from_ticks(0)))
            }
            #[cfg(feature = "rate-limit")]
            ConfigError::ZeroRate => dependency(window().rate_limit(RateLimit::new(0, second))),
            #[cfg(feature = "rate-limit")]
            ConfigError::ZeroRatePeriod => {
                dependency(window().rate_limit(RateLimit::new(100, D::from_ticks(0))))
            }
            #[cfg(feature = "rate-limit")]
            ConfigError::ZeroRateBurst => {
                dependency(window().rate_limit(RateLimit::new(100, second).burst(0)))
            }
            #[cfg(feature = "duty-cycle")]
            ConfigError::ZeroDutyCycleWindow => {
                dependency(window().duty_cycle(DutyCycle::new(second, D::from_ticks(0))))
            }
            #[cfg(feature = "duty-cycle")]
            ConfigError::ZeroDutyCycleAirtime => {
                dependency(window().duty_cycle(DutyCycle::new(D::from_ticks(0), D::from_secs(3600))))
            }
            #[cfg(feature = "duty-cycle")]
            ConfigError::DutyCycleAboveWindow => {
                dependency(window().duty_cycle(DutyCycle::new(D::from_secs(61), D::from_secs(60))))
            }
            // Airtime is counted in 32 bits: only 64-bit ticks can state more.
            #[cfg(all(feature = "duty-cycle", not(feature = "ticks-u32")))]
            ConfigError::DutyCycleAirtimeTooLarge => dependency(
                window().duty_cycle(DutyCycle::new(D::from_ticks(1 << 33), D::from_ticks(1 << 40))),
            ),
            #[cfg(feature = "duty-cycle")]
            ConfigError::AirtimeLogSize => {
                let config = window().duty_cycle(DutyCycle::per_mille(10, D::from_secs(3600)));
                built(Dependency::<HZ, 10, 0>::new(&config, T0))
            }
            #[cfg(feature = "ticks-u32")]
            ConfigError::SpanTooLongForTicks => {
                built(RetryPolicy::<HZ>::exponential(3, second, D::from_ticks(MAX_SPAN + 1)).build())
            }
            ConfigError::NoBreaker => {
                let mut state = Dependency::<HZ, 10, 4>::new(&window(), T0).ok()?;
                built(state.close_circuit(&window()))
            }
            #[cfg(feature = "throttle")]
            ConfigError::ThrottleMultiplierBelowOne => {
                dependency(window().client_throttle(crate::ClientThrottle::new(999)))
            }
            #[cfg(feature = "bulkhead-adaptive")]
            ConfigError::AdaptiveLimitWithoutBulkhead => {
                dependency(window().adaptive_limit(crate::AdaptiveLimit::new(D::from_millis(250))))
            }
            #[cfg(feature = "bulkhead-adaptive")]
            ConfigError::AdaptiveLimitZeroSlow => {
                dependency(window().bulkhead(32).adaptive_limit(crate::AdaptiveLimit::new(D::from_ticks(0))))
            }
            #[cfg(feature = "bulkhead-adaptive")]
            ConfigError::AdaptiveLimitFloorOutOfRange => dependency(
                window()
                    .bulkhead(32)
                    .adaptive_limit(crate::AdaptiveLimit::new(D::from_millis(250)).min_slots(33)),
            ),
            #[cfg(feature = "bulkhead-adaptive")]
            ConfigError::AdaptiveLimitDecreaseOutOfRange => {
                dependency(window().bulkhead(32).adaptive_limit(
                    crate::AdaptiveLimit::new(D::from_millis(250)).decrease_to_permille(1_000),
                ))
            }
            #[cfg(feature = "latency")]
            ConfigError::LatencySamplesOutOfRange => dependency(window().latency_samples(19)),
            #[cfg(feature = "criticality")]
            ConfigError::CriticalReserveOutOfRange => dependency(window().critical_reserve(91)),
            #[cfg(feature = "backoff-multiplier")]
            ConfigError::MultiplierNotAboveOne => built(policy(3).multiplier_percent(100).build()),
            #[cfg(feature = "backoff-multiplier")]
            ConfigError::MultiplierOnConstant => {
                built(RetryPolicy::<HZ>::constant(3, second).multiplier_percent(150).build())
            }
            // What this build cannot state (see above).
            #[cfg(not(feature = "token-bucket"))]
            ConfigError::ZeroBudgetCapacity
            | ConfigError::ZeroBudgetRefill
            | ConfigError::ZeroBudgetPeriod
            | ConfigError::BudgetHoldTooShort
            | ConfigError::BudgetNeedsAttemptTimeout => None,
            #[cfg(any(not(feature = "token-bucket"), feature = "ticks-u32"))]
            ConfigError::BudgetTooLargeForTickRate => None,
            #[cfg(not(feature = "breaker-failure-ratio"))]
            ConfigError::BreakerPercentOutOfRange => None,
            #[cfg(not(feature = "breaker-count-window"))]
            ConfigError::BreakerCountWindowOutOfRange | ConfigError::BreakerMinCallsAboveWindow => None,
            #[cfg(not(feature = "breaker"))]
            ConfigError::BreakerZeroConsecutiveFailures
            | ConfigError::BreakerZeroBreak
            | ConfigError::BreakerZeroProbes
            | ConfigError::BreakerZeroSlowCall => None,
            #[cfg(not(feature = "bulkhead"))]
            ConfigError::ZeroBulkhead
            | ConfigError::BulkheadQueueWithoutBulkhead
            | ConfigError::ZeroBulkheadQueue
            | ConfigError::ZeroBulkheadWait => None,
            #[cfg(not(feature = "rate-limit"))]
            ConfigError::ZeroRate | ConfigError::ZeroRatePeriod | ConfigError::ZeroRateBurst => None,
            #[cfg(not(feature = "duty-cycle"))]
            ConfigError::ZeroDutyCycleWindow
            | ConfigError::ZeroDutyCycleAirtime
            | ConfigError::DutyCycleAboveWindow
            | ConfigError::AirtimeLogSize => None,
            #[cfg(any(not(feature = "duty-cycle"), feature = "ticks-u32"))]
            ConfigError::DutyCycleAirtimeTooLarge => None,
            #[cfg(not(feature = "ticks-u32"))]
            ConfigError::SpanTooLongForTicks => None,
            #[cfg(not(feature = "throttle"))]
            ConfigError::ThrottleMultiplierBelowOne => None,
            #[cfg(not(feature = "bulkhead-adaptive"))]
            ConfigError::AdaptiveLimitWithoutBulkhead
            | ConfigError::AdaptiveLimitZeroSlow
            | ConfigError::AdaptiveLimitFloorOutOfRange
            | ConfigError::AdaptiveLimitDecreaseOutOfRange => None,
            #[cfg(not(feature = "latency"))]
            ConfigError::LatencySamplesOutOfRange => None,
            #[cfg(not(feature = "criticality"))]
            ConfigError::CriticalReserveOutOfRange => None,
            #[cfg(not(feature = "backoff-multiplier"))]
            ConfigError::MultiplierNotAboveOne | ConfigError::MultiplierOnConstant => None,
        }
    }

    #[test]
    fn each_configuration_refusal_is_what_the_configuration_it_names_gets() {
        let mut stated = 0;
        for e in ALL {
            if let Some(got) = refusal(e) {
                assert_eq!(got, Err(e), "{}", e.as_str());
                stated += 1;
            }
        }
        // With every protection compiled in, all but those this tick width cannot meet (64-bit
        // ticks: a span too long for 32; 32-bit ticks: a budget or an airtime too large for 64).
        if every_protection() {
            assert_eq!(stated, if cfg!(feature = "ticks-u32") { ALL.len() - 2 } else { ALL.len() - 1 });
        }
    }

    /// Whether this build has every protection compiled in (the default features).
    const fn every_protection() -> bool {
        cfg!(all(
            feature = "breaker-failure-ratio",
            feature = "breaker-count-window",
            feature = "bulkhead",
            feature = "rate-limit",
            feature = "duty-cycle",
            feature = "token-bucket",
            feature = "hedge",
            feature = "throttle",
            feature = "bulkhead-adaptive",
            feature = "latency",
            feature = "criticality",
            feature = "backoff-multiplier"
        ))
    }

    /// Every refusal to start, with the numbers the configurations in `start_refusal` give it.
    /// That function matches without a wildcard, as `refusal` does: list a new variant here too.
    fn start_refusals() -> [StartError; 10] {
        [
            StartError::UnsafeWithRetries { max_attempts: 3 },
            StartError::RetryWithoutBudget { max_attempts: 3 },
            StartError::Budget(ConfigError::BudgetHoldTooShort),
            StartError::NoAirtime,
            StartError::DeadlineTooLong { deadline: MAX_SPAN.saturating_add(1) },
            StartError::AirtimeAboveDutyCycle { airtime: 2_000, allowance: 1_000 },
            StartError::HedgeWithoutRetries,
            StartError::HedgeOfMutation,
            StartError::HedgePercentileOutOfRange { percent: 100 },
            StartError::HedgeWithoutLatencyLog,
        ]
    }

    /// What `Operation::start` comes to with the policy, dependency and context that `e` names;
    /// `None` where this build cannot state them (as for `refusal`).
    fn start_refusal(e: StartError) -> Option<Result<(), StartError>> {
        let policy = policy(3).attempt_timeout(D::from_secs(3)).build().ok()?;
        let read = Context::new(D::from_secs(10), ReplaySafety::replayable_read(D::from_secs(60)));
        let budgeted = window().budget(RetryBudget::ratio(10, 5).ok()?);
        let start = |policy: &RetryPolicy<HZ>, config: &DependencyConfig<HZ>, context: Context<HZ>| {
            Some(Operation::<HZ, Verdict<HZ>>::start(policy, config, context, T0).map(drop))
        };
        match e {
            StartError::UnsafeWithRetries { .. } => {
                start(&policy, &budgeted, Context::new(D::from_secs(10), ReplaySafety::Unsafe))
            }
            StartError::RetryWithoutBudget { .. } => start(&policy, &window(), read),
            // The hold of 4 s is too short for the policy's 3 s attempts.
            #[cfg(feature = "token-bucket")]
            StartError::Budget(_) => {
                let budget = RetryBudget::token_bucket(10, 1, D::from_secs(60), D::from_secs(4)).ok()?;
                start(&policy, &window().budget(budget), read)
            }
            #[cfg(feature = "duty-cycle")]
            StartError::NoAirtime => {
                start(&policy, &budgeted.duty_cycle(DutyCycle::new(D::from_secs(1), D::from_secs(100))), read)
            }
            #[cfg(feature = "ticks-u32")]
            StartError::DeadlineTooLong { .. } => {
                let long = Context::new(
                    D::from_ticks(MAX_SPAN + 1),
                    ReplaySafety::replayable_read(D::from_secs(60)),
                );
                start(&policy, &budgeted, long)
            }
            // Two seconds on air, where the duty cycle allows one in any 100 s.
            #[cfg(feature = "duty-cycle")]
            StartError::AirtimeAboveDutyCycle { .. } => start(
                &policy,
                &budgeted.duty_cycle(DutyCycle::new(D::from_secs(1), D::from_secs(100))),
                read.airtime(D::from_secs(2)),
            ),
            // Started, it is refused its hedge.
            #[cfg(feature = "hedge")]
            StartError::HedgeWithoutRetries => {
                let once = policy.without_retries();
                let op = Operation::<HZ, Verdict<HZ>>::start(&once, &budgeted, read, T0).ok()?;
                Some(op.hedge_plan().map(drop))
            }
            #[cfg(feature = "hedge")]
            StartError::HedgeOfMutation => {
                let keyed = Context::new(
                    D::from_secs(10),
                    ReplaySafety::provider_idempotent_mutation(D::from_secs(60)),
                );
                let op = Operation::<HZ, Verdict<HZ>>::start(&policy, &budgeted, keyed, T0).ok()?;
                Some(op.hedge_plan().map(drop))
            }
            // The delay of a hedge, read from the dependency's state.
            #[cfg(all(feature = "hedge", feature = "latency"))]
            StartError::HedgePercentileOutOfRange { .. } => {
                let logged = budgeted.latency_samples(100);
                let state = Dependency::<HZ, 10>::new(&logged, T0).ok()?;
                Some(state.hedge_delay(&logged, crate::HedgeDelay::percentile(100)).map(drop))
            }
            #[cfg(feature = "hedge")]
            StartError::HedgeWithoutLatencyLog => {
                let state = Dependency::<HZ, 10>::new(&budgeted, T0).ok()?;
                Some(state.hedge_delay(&budgeted, crate::HedgeDelay::percentile(95)).map(drop))
            }
            #[cfg(not(feature = "hedge"))]
            StartError::HedgeWithoutRetries
            | StartError::HedgeOfMutation
            | StartError::HedgeWithoutLatencyLog => None,
            #[cfg(not(all(feature = "hedge", feature = "latency")))]
            StartError::HedgePercentileOutOfRange { .. } => None,
            #[cfg(not(feature = "token-bucket"))]
            StartError::Budget(_) => None,
            #[cfg(not(feature = "duty-cycle"))]
            StartError::NoAirtime | StartError::AirtimeAboveDutyCycle { .. } => None,
            #[cfg(not(feature = "ticks-u32"))]
            StartError::DeadlineTooLong { .. } => None,
        }
    }

    #[test]
    fn each_refusal_to_start_is_what_the_operation_it_names_gets() {
        let mut stated = 0;
        for e in start_refusals() {
            if let Some(got) = start_refusal(e) {
                assert_eq!(got, Err(e), "{}", e.as_str());
                stated += 1;
            }
        }
        if every_protection() {
            assert_eq!(stated, if cfg!(feature = "ticks-u32") { 10 } else { 9 });
        }
        // 64-bit ticks take any deadline.
        if cfg!(not(feature = "ticks-u32")) {
            let far = Context::new(
                D::from_ticks(crate::Ticks::MAX),
                ReplaySafety::replayable_read(D::from_secs(60)),
            );
            let policy = policy(1).build().unwrap();
            assert!(Operation::<HZ, Verdict<HZ>>::start(&policy, &window(), far, T0).is_ok());
        }
    }

    /// A stable code: lowercase words of letters and digits joined by single underscores.
    fn snake_case(code: &str) -> bool {
        !code.is_empty()
            && code
                .split('_')
                .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
    }

    #[test]
    fn codes_are_distinct_snake_case_and_messages_distinct() {
        // A start refusal over a budget reports the budget's own code and message.
        let starts: Vec<StartError> =
            start_refusals().into_iter().filter(|e| !matches!(e, StartError::Budget(_))).collect();
        let codes: Vec<&str> =
            ALL.iter().map(|e| e.as_str()).chain(starts.iter().map(|e| e.as_str())).collect();
        assert!(codes.iter().all(|c| snake_case(c)), "{codes:?}");
        assert_eq!(codes.iter().collect::<BTreeSet<_>>().len(), codes.len(), "a code names one refusal");

        let messages: Vec<std::string::String> =
            ALL.iter().map(ToString::to_string).chain(starts.iter().map(ToString::to_string)).collect();
        assert_eq!(
            messages.iter().collect::<BTreeSet<_>>().len(),
            messages.len(),
            "a message names one refusal"
        );
        for (e, shown) in ALL.iter().zip(&messages) {
            assert_eq!(shown, e.message(), "Display shows the message");
        }
        let budget = StartError::Budget(ConfigError::BudgetHoldTooShort);
        assert_eq!(budget.as_str(), "budget_hold_too_short");
        assert_eq!(budget.to_string(), ConfigError::BudgetHoldTooShort.message());
        // A start refusal's message gives its numbers.
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with("one attempt costs 2000 ticks of airtime")
                    && m.contains("(1000 ticks)"))
        );
    }
}
