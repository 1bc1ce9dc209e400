//! Caller mistakes, kept apart from outcomes.
//!
//! A [`ConfigError`] is a bad policy or budget, found while building it (in a `const`, at compile
//! time). A [`StartError`] is a combination that cannot run, found by
//! [`Operation::start`](crate::Operation::start) before anything is dispatched. Neither is an
//! outcome of a call: outcomes are [`Completion`](crate::Completion)s with a
//! [`Problem`](crate::Problem) code. Every message says what is wrong and how to fix it.

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
            Self::ZeroWindow => {
                "a dependency's counting window must be positive (seed 000 counts over 10 s)"
            }
            Self::WindowShorterThanBuckets => {
                "the counting window is shorter than its number of buckets in ticks, so a bucket would be empty: lengthen the window or use fewer buckets"
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
}

impl StartError {
    /// The stable snake_case code of this error.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::UnsafeWithRetries { .. } => "unsafe_with_retries",
            Self::RetryWithoutBudget { .. } => "retry_without_budget",
            Self::Budget(e) => e.as_str(),
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
        }
    }
}

impl core::error::Error for StartError {}
