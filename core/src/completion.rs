//! How an operation ended: a disposition, a stable problem code, a summary, and the caller's last
//! failure.
//!
//! Seed 003's "detailed completions": when the retry stage gives up, the last business failure is
//! kept as the result and the reason is recorded as a problem with a stable snake_case code, so that
//! logs and dashboards can be grepped for `retry_budget_exhausted` across services and languages.
//! Nothing is lost: the failure value the caller reported is handed back as it is.

use core::fmt;

use crate::event::OperationId;
use crate::time::{Duration, Instant};

/// The broad outcome of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Disposition {
    /// An attempt succeeded.
    Succeeded,
    /// The operation gave up; the last failure, if any, is kept.
    Failed,
    /// The far side asked for a wait the operation could not honour (longer than the policy's
    /// maximum delay, or than the deadline allows), or the dependency is in the cooldown such a
    /// wait started; nothing was slept, and the completion says when to try again.
    Deferred,
    /// A protection (circuit, client throttle, bulkhead, rate limit) refused an attempt; the completion says when
    /// to try again where that is known, and keeps the last failure if an earlier attempt failed.
    Rejected,
}

impl Disposition {
    /// The stable snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Deferred => "deferred",
            Self::Rejected => "rejected",
        }
    }
}

impl fmt::Display for Disposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an operation stopped short of success: the retry stage's reasons, and the protections'
/// refusals. The codes are stable: grep for them. New protections bring new codes, so the enum is
/// `non_exhaustive`: match the codes you act on and keep a fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Problem {
    /// Every attempt the policy allows was made.
    AttemptsExhausted,
    /// The dependency's retry budget refused the next retry.
    RetryBudgetExhausted,
    /// The backoff delay does not fit in what remains of the deadline (less the minimum remaining).
    RetryDelayExceedsDeadline,
    /// A server-stated wait exceeds the policy's maximum delay. Deferred.
    RetryAfterExceedsMaximumDelay,
    /// A server-stated wait does not fit in what remains of the deadline. Deferred.
    RetryAfterExceedsDeadline,
    /// The deadline passed before the next attempt could be dispatched.
    DeadlineExceeded,
    /// The next attempt would start after the replay-safety statement expired.
    ReplayStatementExpired,
    /// The failed attempt may have reached the far side, and the operation's statement
    /// ([`ReplaySafety::UntilArrived`](crate::ReplaySafety::UntilArrived)) allows repeating only
    /// attempts that never did ([`Verdict::NeverArrived`](crate::Verdict::NeverArrived)).
    /// Feature `until-arrived` (a default).
    #[cfg(feature = "until-arrived")]
    MayHaveArrived,
    /// The circuit breaker is open (or half-open with every probe out).
    CircuitOpen,
    /// An operator isolated the circuit: refused with no instant to try again, until the operator
    /// closes it ([`Dependency::isolate_circuit`](crate::Dependency::isolate_circuit)). Feature
    /// `breaker-isolate`.
    #[cfg(feature = "breaker-isolate")]
    CircuitIsolated,
    /// The client throttle refused the attempt: the dependency has been rejecting so much of
    /// what it was sent that the client sends only about `K` times what it accepts
    /// ([`ClientThrottle`](crate::ClientThrottle)). Rejected, with no instant: the next attempt
    /// may pass. Feature `throttle`.
    #[cfg(feature = "throttle")]
    ClientThrottled,
    /// The bulkhead has no free slot.
    BulkheadFull,
    /// The rate limit has no unit available soon enough.
    RateLimited,
    /// The dependency is in a cooldown started by a Retry-After. Deferred.
    CooldownActive,
    /// The attempt's airtime would break the dependency's duty cycle, and waiting for it does not
    /// fit the policy's maximum delay or the deadline. Deferred, with the instant it may go.
    DutyCycleExceeded,
    /// The caller cancelled the operation.
    Cancelled,
}

impl Problem {
    /// The stable snake_case code.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::AttemptsExhausted => "attempts_exhausted",
            Self::RetryBudgetExhausted => "retry_budget_exhausted",
            Self::RetryDelayExceedsDeadline => "retry_delay_exceeds_deadline",
            Self::RetryAfterExceedsMaximumDelay => "retry_after_exceeds_maximum_delay",
            Self::RetryAfterExceedsDeadline => "retry_after_exceeds_deadline",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::ReplayStatementExpired => "replay_statement_expired",
            #[cfg(feature = "until-arrived")]
            Self::MayHaveArrived => "may_have_arrived",
            Self::CircuitOpen => "circuit_open",
            #[cfg(feature = "breaker-isolate")]
            Self::CircuitIsolated => "circuit_isolated",
            #[cfg(feature = "throttle")]
            Self::ClientThrottled => "client_throttled",
            Self::BulkheadFull => "bulkhead_full",
            Self::RateLimited => "rate_limited",
            Self::CooldownActive => "cooldown_active",
            Self::DutyCycleExceeded => "duty_cycle_exceeded",
            Self::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an operation spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Summary<const HZ: u64> {
    /// Attempts dispatched, the first included.
    pub dispatched: u8,
    /// Of those, retries.
    pub retries: u8,
    /// Total time the core had the operation wait: backoff delays between attempts, and waits for
    /// a rate-limit unit, for airtime or for a bulkhead slot before one.
    pub waited: Duration<HZ>,
    /// From the operation's start to its end.
    pub elapsed: Duration<HZ>,
}

/// The end of an operation. `E` is the caller's own failure type.
///
/// A modem that answers "busy, retry in 600 s" under a policy that waits at most 8 s: nothing is
/// slept, and the operation completes deferred, with the caller's failure and when to try again:
///
/// ```
/// use relent_core::{
///     Action, Classify, Context, Dependency, DependencyConfig, Disposition, Duration, Instant, Operation, Problem,
///     ReplaySafety, RetryBudget, RetryPolicy, Verdict,
/// };
/// type D = Duration<1_000>;
///
/// #[derive(Debug, PartialEq)]
/// enum ModemError { Busy { retry_in_s: u32 } }
/// impl Classify<1_000> for ModemError {
///     fn classify(&self) -> Verdict<1_000> {
///         match self { Self::Busy { retry_in_s } => Verdict::retryable_after_secs(*retry_in_s) }
///     }
/// }
/// # struct NoDraws;
/// # impl relent_core::rand_core::RngCore for NoDraws {
/// #     fn next_u32(&mut self) -> u32 { unreachable!() }
/// #     fn next_u64(&mut self) -> u64 { unreachable!() }
/// #     fn fill_bytes(&mut self, _: &mut [u8]) { unreachable!() }
/// # }
///
/// let policy = RetryPolicy::exponential(4, D::from_millis(500), D::from_secs(8)).build()?;
/// let config = DependencyConfig::new(D::from_secs(60)).budget(RetryBudget::ratio(25, 4)?);
/// let mut uplink = Dependency::<1_000, 4>::new(&config, Instant::from_ticks(0))?;
/// let frame = Context::new(D::from_secs(20), ReplaySafety::provider_idempotent_mutation(D::from_secs(3_600)));
/// let mut now = Instant::from_ticks(1_000);
/// let mut op = Operation::start(&policy, &config, frame, now)?;
/// if let Action::Dispatch(attempt) = op.poll(now, &mut uplink, &mut ()) {
///     now = Instant::from_ticks(1_200);
///     op.on_failure(attempt, now, &mut uplink, &mut NoDraws, ModemError::Busy { retry_in_s: 600 }, &mut ());
/// }
/// assert_eq!(op.poll(now, &mut uplink, &mut ()), Action::Done);
///
/// let done = op.take_completion().unwrap();
/// assert_eq!(done.disposition, Disposition::Deferred);
/// assert_eq!(done.code(), "retry_after_exceeds_maximum_delay");
/// assert_eq!(done.problem, Some(Problem::RetryAfterExceedsMaximumDelay));
/// assert_eq!(done.retry_after, Some(D::from_secs(600)));
/// assert_eq!(done.not_before, Some(Instant::from_ticks(1_200 + 600_000))); // keep the frame until then
/// assert_eq!(done.last_failure, Some(ModemError::Busy { retry_in_s: 600 }));
/// assert_eq!((done.summary.dispatched, done.summary.waited), (1, D::from_ticks(0)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Completion<const HZ: u64, E> {
    /// The operation's id, as given in its context.
    pub operation: OperationId,
    /// Succeeded, failed or deferred.
    pub disposition: Disposition,
    /// Why the retry stage stopped it; `None` on success and for a failure the classifier called
    /// not retryable (it is returned as it is, seed 003).
    pub problem: Option<Problem>,
    /// Attempts, retries, time waited and used.
    pub summary: Summary<HZ>,
    /// The last failure reported, kept even when a problem is recorded.
    pub last_failure: Option<E>,
    /// The wait the far side stated on the last failure, if any.
    pub retry_after: Option<Duration<HZ>>,
    /// For a deferred or rejected operation: the earliest instant to try again, where known.
    pub not_before: Option<Instant<HZ>>,
}

impl<const HZ: u64, E> Completion<HZ, E> {
    /// Whether an attempt succeeded.
    pub const fn is_success(&self) -> bool {
        matches!(self.disposition, Disposition::Succeeded)
    }

    /// The problem code, or `""` when there is none.
    pub const fn code(&self) -> &'static str {
        match self.problem {
            Some(p) => p.as_str(),
            None => "",
        }
    }

    /// The same completion with its last failure turned by `f`: for an adapter that reports a
    /// failure of its own type where it kept one of another (a service's error without the verdict
    /// it was given, say), as the completion cannot be built outside this crate.
    ///
    /// ```
    /// # use relent_core::Completion;
    /// /// A completion whose failures kept a status code beside their message, without the code.
    /// fn messages(done: Completion<1_000, (u16, &'static str)>) -> Completion<1_000, &'static str> {
    ///     done.map_last_failure(|(_, message)| message)
    /// }
    /// # let _ = messages;
    /// ```
    pub fn map_last_failure<F>(self, f: impl FnOnce(E) -> F) -> Completion<HZ, F> {
        Completion {
            operation: self.operation,
            disposition: self.disposition,
            problem: self.problem,
            summary: self.summary,
            last_failure: self.last_failure.map(f),
            retry_after: self.retry_after,
            not_before: self.not_before,
        }
    }
}

/// How an operation ended, in words, as the adapters begin their errors' messages: "deferred
/// (retry_after_exceeds_maximum_delay) after 1 attempt(s); the far side asked to wait 30s", and
/// "; try again in 18s" after a refusal. The problem code and the waits only when there are; the
/// wait before trying again only when it is not the far side's wait just said. `W` is a wait in the
/// adapter's own words (relent-tokio's `5s`, relent-embassy's `5000 ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome<W> {
    /// How it ended.
    pub disposition: Disposition,
    /// Why, where there is a problem code.
    pub problem: Option<Problem>,
    /// The attempts it dispatched.
    pub dispatched: u8,
    /// The far side's stated wait (a Retry-After), if any.
    pub retry_after: Option<W>,
    /// For a deferred or rejected operation, the wait before trying again, where known.
    pub retry_in: Option<W>,
}

impl<W: fmt::Display + PartialEq> fmt::Display for Outcome<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.disposition)?;
        if let Some(p) = self.problem {
            write!(f, " ({p})")?;
        }
        write!(f, " after {} attempt(s)", self.dispatched)?;
        if let Some(wait) = &self.retry_after {
            write!(f, "; the far side asked to wait {wait}")?;
        }
        // An open circuit's break, a cooldown, a rate limit: said unless it is the wait just said.
        match &self.retry_in {
            Some(wait) if self.retry_after.as_ref() != Some(wait) => write!(f, "; try again in {wait}"),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(disposition: Disposition, problem: Option<Problem>) -> Completion<1_000, ()> {
        let zero = Duration::<1_000>::from_ticks(0);
        Completion {
            operation: OperationId(1),
            disposition,
            problem,
            summary: Summary { dispatched: 1, retries: 0, waited: zero, elapsed: zero },
            last_failure: None,
            retry_after: None,
            not_before: None,
        }
    }

    #[test]
    fn only_a_success_is_a_success_and_the_code_is_the_problem_s() {
        let success = ended(Disposition::Succeeded, None);
        assert!(success.is_success());
        assert_eq!(success.code(), "");
        for disposition in [Disposition::Failed, Disposition::Deferred, Disposition::Rejected] {
            let ended = ended(disposition, Some(Problem::AttemptsExhausted));
            assert!(!ended.is_success(), "{disposition:?}");
            assert_eq!(ended.code(), "attempts_exhausted");
        }
        assert!(!ended(Disposition::Failed, None).is_success(), "a failure not retried");
    }

    #[test]
    fn mapping_the_last_failure_keeps_every_other_field() {
        let mut done = ended(Disposition::Deferred, Some(Problem::RetryAfterExceedsMaximumDelay));
        done.summary = Summary {
            dispatched: 2,
            retries: 1,
            waited: Duration::from_ticks(7),
            elapsed: Duration::from_ticks(9),
        };
        done.retry_after = Some(Duration::from_ticks(600));
        done.not_before = Some(Instant::from_ticks(609));
        done.last_failure = Some(());
        let mapped = done.clone().map_last_failure(|()| 300u16);
        assert_eq!(
            (mapped.operation, mapped.disposition, mapped.problem, mapped.summary),
            (done.operation, done.disposition, done.problem, done.summary)
        );
        assert_eq!((mapped.retry_after, mapped.not_before), (done.retry_after, done.not_before));
        assert_eq!(mapped.last_failure, Some(300));
        done.last_failure = None;
        assert_eq!(done.map_last_failure(|()| 1u8).last_failure, None, "none stays none");
    }

    #[test]
    fn an_outcome_says_the_code_and_each_wait_once() {
        extern crate std;
        use std::string::ToString;
        let outcome = |problem, retry_after, retry_in| Outcome {
            disposition: Disposition::Deferred,
            problem,
            dispatched: 1,
            retry_after,
            retry_in,
        };
        let code = Some(Problem::RetryAfterExceedsMaximumDelay);
        assert_eq!(
            outcome(code, Some("5 s"), Some("5 s")).to_string(),
            "deferred (retry_after_exceeds_maximum_delay) after 1 attempt(s); the far side asked to wait 5 s"
        );
        assert_eq!(
            outcome(Some(Problem::CooldownActive), None, Some("4 s")).to_string(),
            "deferred (cooldown_active) after 1 attempt(s); try again in 4 s"
        );
        assert_eq!(
            outcome(code, Some("5 s"), Some("4 s")).to_string(),
            "deferred (retry_after_exceeds_maximum_delay) after 1 attempt(s); the far side asked to wait 5 s; try again in 4 s"
        );
        let failed = Outcome::<&str> {
            disposition: Disposition::Failed,
            problem: None,
            dispatched: 3,
            retry_after: None,
            retry_in: None,
        };
        assert_eq!(failed.to_string(), "failed after 3 attempt(s)");
    }
}
