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
            Self::ZeroRate => "zero_rate",
            Self::ZeroRatePeriod => "zero_rate_period",
            Self::ZeroRateBurst => "zero_rate_burst",
            Self::ZeroDutyCycleWindow => "zero_duty_cycle_window",
            Self::ZeroDutyCycleAirtime => "zero_duty_cycle_airtime",
            Self::DutyCycleAboveWindow => "duty_cycle_above_window",
            Self::DutyCycleAirtimeTooLarge => "duty_cycle_airtime_too_large",
            Self::AirtimeLogSize => "airtime_log_size",
            Self::SpanTooLongForTicks => "span_too_long_for_ticks",
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
        }
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsafeWithRetries { max_attempts } => write!(
                f,
                "max_attempts = {max_attempts} (greater than one) requires an explicit replay-safety statement; the operation is Unsafe. \
                 State ReplaySafety::replayable_read or ReplaySafety::provider_idempotent_mutation in its Context if repeating it is safe; \
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
        }
    }
}

impl core::error::Error for StartError {}
