//! Classification: which of the caller's failures are worth another attempt.
//!
//! This is the part of a policy seed 000 calls "the one that matters", and the one most retry
//! decorators get wrong by retrying on any error. Relent retries nothing it is not told to: the
//! caller implements [`Classify`] for its own error type and names the transient failures. The core
//! knows nothing of HTTP; the tokio adapter ships helpers that map 429/503 and Retry-After onto a
//! [`Verdict`].

use crate::completion::{Completion, Disposition, Problem};
use crate::time::Duration;

/// The caller's judgement of one failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Verdict<const HZ: u64> {
    /// Transient: another attempt may succeed (a reset connection, a read timeout, a 503).
    Retryable,
    /// Transient, and the far side said how long to wait (HTTP `Retry-After`, a modem's "busy, try
    /// again in N s"). The wait is a lower bound for the next attempt: never sooner.
    RetryableAfter(Duration<HZ>),
    /// Not worth repeating (a 400, a 422, a bug): returned to the caller as it is.
    NotRetryable,
    /// Transient, and the attempt never reached the far side: a refused connection, a connect
    /// timeout, a name that did not resolve, a frame the radio never sent. Retried as
    /// [`Verdict::Retryable`] is; and the one failure after which an operation stated
    /// [`ReplaySafety::UntilArrived`](crate::ReplaySafety::UntilArrived) (a POST without an
    /// idempotency key) is repeated, since the far side's state is unchanged (seed 000: "a
    /// connection refused or a connect timeout means the request never arrived ... a retry is
    /// safe"). Judge a failure so only when that is certain: one after which the request may have
    /// been sent, even in part (a reset connection, a timeout while waiting for the answer), is
    /// `Retryable`.
    NeverArrived,
}

impl<const HZ: u64> Verdict<HZ> {
    /// Retryable after a wait the far side stated in whole seconds (a modem's "busy, try again in
    /// N s", an HTTP `Retry-After: N`). Never panics: where `secs` seconds do not fit in
    /// [`Ticks`](crate::Ticks) at `HZ`, the wait saturates, and a wait that long defers the
    /// operation instead of sleeping (fugit's `Duration::from_secs` would overflow instead).
    pub const fn retryable_after_secs(secs: u32) -> Self {
        Self::RetryableAfter(Duration::<HZ>::from_ticks(crate::time::seconds::<HZ>(secs)))
    }

    /// The stable snake_case name of this verdict, for logs: `retryable`, `retryable_after` (the
    /// wait is [`retry_after`](Self::retry_after)), `not_retryable` or `never_arrived`.
    ///
    /// ```
    /// use relent_core::Verdict;
    /// let names = [Verdict::<1_000>::Retryable, Verdict::retryable_after_secs(2), Verdict::NotRetryable, Verdict::NeverArrived]
    ///     .map(|v| v.as_str());
    /// assert_eq!(names, ["retryable", "retryable_after", "not_retryable", "never_arrived"]);
    /// ```
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Retryable => "retryable",
            Self::RetryableAfter(_) => "retryable_after",
            Self::NotRetryable => "not_retryable",
            Self::NeverArrived => "never_arrived",
        }
    }

    /// Whether another attempt may help.
    pub const fn is_retryable(&self) -> bool {
        !matches!(self, Self::NotRetryable)
    }

    /// Whether the attempt never reached the far side ([`Verdict::NeverArrived`]).
    pub const fn never_arrived(&self) -> bool {
        matches!(self, Self::NeverArrived)
    }

    /// The server-stated wait, if any.
    pub const fn retry_after(&self) -> Option<Duration<HZ>> {
        match self {
            Self::RetryableAfter(d) => Some(*d),
            _ => None,
        }
    }
}

/// Implemented by the caller for its error type: says whether a failure is worth retrying. A type
/// the caller does not own goes in a [`Judged`], with its verdict.
///
/// ```
/// use relent_core::{Classify, Verdict};
///
/// enum UplinkError { NoAck, Busy { retry_in_s: u32 }, Rejected }
///
/// impl<const HZ: u64> Classify<HZ> for UplinkError {
///     fn classify(&self) -> Verdict<HZ> {
///         match self {
///             UplinkError::NoAck => Verdict::Retryable,
///             UplinkError::Busy { retry_in_s } => Verdict::retryable_after_secs(*retry_in_s),
///             UplinkError::Rejected => Verdict::NotRetryable,
///         }
///     }
/// }
/// ```
pub trait Classify<const HZ: u64> {
    /// The verdict on this failure.
    fn classify(&self) -> Verdict<HZ>;
}

impl<const HZ: u64> Classify<HZ> for Verdict<HZ> {
    fn classify(&self) -> Self {
        *self
    }
}

/// A failure of a type that does not implement [`Classify`], with the verdict the caller gave it:
/// a client library's error (`std::io::Error`, a database driver's, a gRPC status), which the
/// orphan rule keeps a caller from implementing `Classify` for, and which it would otherwise wrap
/// in a type of its own for each call.
///
/// Transparent, as [`AttemptError::Failed`] is: it displays the error, and its `source` is the
/// error's source. The error itself is the public `error`, or [`Judged::into_inner`].
///
/// ```
/// use relent_core::{Classify, Judged, Verdict};
///
/// /// What this service retries of its socket's errors: a refused connection never arrived.
/// fn verdict(e: &std::io::Error) -> Verdict<1_000> {
///     match e.kind() {
///         std::io::ErrorKind::ConnectionRefused => Verdict::NeverArrived,
///         _ => Verdict::NotRetryable,
///     }
/// }
///
/// let refused = Judged::by(std::io::Error::from(std::io::ErrorKind::ConnectionRefused), verdict);
/// assert_eq!(refused.classify(), Verdict::NeverArrived);
/// assert_eq!(refused.to_string(), "connection refused");
/// let reset = Judged::by(std::io::Error::from(std::io::ErrorKind::ConnectionReset), verdict);
/// assert_eq!(reset.classify(), Verdict::NotRetryable);
/// assert_eq!(reset.into_inner().kind(), std::io::ErrorKind::ConnectionReset);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Judged<const HZ: u64, E> {
    /// The failure.
    pub error: E,
    /// The verdict on it.
    pub verdict: Verdict<HZ>,
}

impl<const HZ: u64, E> Judged<HZ, E> {
    /// `error`, with `verdict`.
    pub const fn new(error: E, verdict: Verdict<HZ>) -> Self {
        Self { error, verdict }
    }

    /// `error`, with the verdict `judge` gives it: `.map_err(|e| Judged::by(e, verdict))` in an
    /// attempt, with one function for every call to the same client.
    pub fn by(error: E, judge: impl FnOnce(&E) -> Verdict<HZ>) -> Self {
        let verdict = judge(&error);
        Self { error, verdict }
    }

    /// `error`, retryable.
    pub const fn retryable(error: E) -> Self {
        Self { error, verdict: Verdict::Retryable }
    }

    /// `error`, not worth repeating.
    pub const fn not_retryable(error: E) -> Self {
        Self { error, verdict: Verdict::NotRetryable }
    }

    /// The failure, without its verdict.
    pub fn into_inner(self) -> E {
        self.error
    }
}

impl<const HZ: u64, E> Classify<HZ> for Judged<HZ, E> {
    fn classify(&self) -> Verdict<HZ> {
        self.verdict
    }
}

impl<const HZ: u64, E: core::fmt::Display> core::fmt::Display for Judged<HZ, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.error.fmt(f)
    }
}

/// As [`AttemptError`]'s: the message is the error's, so the chain goes on below it.
impl<const HZ: u64, E: core::error::Error + 'static> core::error::Error for Judged<HZ, E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        self.error.source()
    }
}

/// One attempt's failure as an adapter reports it: the attempt ran past its timeout and was dropped,
/// or the operation returned the caller's own error.
///
/// `Failed` is transparent, as `#[error(transparent)]` would make it: it displays the caller's
/// error, and its `source` is that error's source. Were the source the caller's error itself, a
/// reporter that prints the chain (anyhow's `{:#}`) would show its message twice. The caller's
/// error itself: [`AttemptError::into_inner`], or a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AttemptError<const HZ: u64, E> {
    /// The attempt ran past its timeout; its future was dropped.
    TimedOut {
        /// The timeout it was given.
        after: Duration<HZ>,
    },
    /// The operation returned this error.
    Failed(E),
}

impl<const HZ: u64, E> AttemptError<HZ, E> {
    /// The operation's own error, if that is what this is.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Self::Failed(e) => Some(e),
            Self::TimedOut { .. } => None,
        }
    }
}

/// A timeout is retryable: the attempt may or may not have reached the far side, and the
/// operation's replay-safety statement, not the classifier, decides whether repeating it is safe.
impl<const HZ: u64, E: Classify<HZ>> Classify<HZ> for AttemptError<HZ, E> {
    fn classify(&self) -> Verdict<HZ> {
        match self {
            Self::TimedOut { .. } => Verdict::Retryable,
            Self::Failed(e) => e.classify(),
        }
    }
}

impl<const HZ: u64, E: core::fmt::Display> core::fmt::Display for AttemptError<HZ, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::TimedOut { after } => {
                write!(f, "attempt timed out after {} ticks at {HZ} Hz", after.as_ticks())
            }
            Self::Failed(e) => e.fmt(f),
        }
    }
}

impl<const HZ: u64, E: core::error::Error + 'static> core::error::Error for AttemptError<HZ, E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::TimedOut { .. } => None,
            Self::Failed(e) => e.source(),
        }
    }
}

/// How an operation ended, as much of it as an operation that ran it inside one of its own attempts
/// needs to judge it: the one rule behind the adapters' `Classify` of an operation's end (seed 000,
/// "Where the Retry Lives": exactly one layer retries; three layers of three attempts are 27 calls).
///
/// [`Ended::verdict`] says:
/// - An inner operation that could retry was the retrying layer. Whether it spent its attempts,
///   its budget refused a retry (the SRE book's "overloaded; don't retry"), its deadline or replay
///   statement ran out, or its failure was not retryable: not retryable.
/// - One whose policy allowed a single attempt, spent on the first, left the retrying to its
///   caller: the verdict on that attempt's failure (`single`). A hedge's one attempt is not such
///   an attempt: it was a retry (`retries` is 1), a repeat under a policy of several, so the hedge
///   and its operation were the retrying layer. So did one stated safe until an attempt arrives
///   whose first attempt may have arrived (`may_have_arrived` after one attempt): it repeated
///   nothing, and a caller whose own statement allows a repeat may make it. After attempts that
///   never arrived it was the retrying layer.
/// - One deferred or rejected with a known wait (a Retry-After it could not wait, a cooldown, an
///   open circuit, a rate limit, airtime): retryable after that wait, so that an outer operation
///   with more patience waits for it, and one with less defers in turn, with the same wait.
/// - A refusal with no end in sight (a full bulkhead), and a success: not retryable.
///
/// With a whole [`Completion`] at hand, [`Completion::outer_verdict`] applies it, asking the last
/// failure's own [`Classify`] for `single`. relent-tokio's `RetryReport` keeps only these fields
/// of a completion, and builds an `Ended` itself.
///
/// ```
/// use relent_core::{Disposition, Duration, Ended, Problem, Verdict};
///
/// let busy = Ended::<1_000> {
///     disposition: Disposition::Deferred,
///     problem: Some(Problem::RetryAfterExceedsMaximumDelay),
///     dispatched: 1,
///     retries: 0,
///     retry_in: Some(Duration::<1_000>::from_secs(30)),
/// };
/// assert_eq!(busy.verdict(|| Verdict::Retryable), Verdict::RetryableAfter(Duration::<1_000>::from_secs(30)));
/// let spent = Ended::<1_000> { disposition: Disposition::Failed, problem: Some(Problem::AttemptsExhausted), dispatched: 3, retries: 2, retry_in: None };
/// assert_eq!(spent.verdict(|| Verdict::Retryable), Verdict::NotRetryable);
/// // A policy of one attempt leaves the retrying to its caller; a hedge's one attempt does not.
/// let single = Ended::<1_000> { disposition: Disposition::Failed, problem: Some(Problem::AttemptsExhausted), dispatched: 1, retries: 0, retry_in: None };
/// assert_eq!(single.verdict(|| Verdict::Retryable), Verdict::Retryable);
/// let hedge = Ended::<1_000> { retries: 1, ..single };
/// assert_eq!(hedge.verdict(|| Verdict::Retryable), Verdict::NotRetryable);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ended<const HZ: u64> {
    /// How it ended.
    pub disposition: Disposition,
    /// Why, where there is a problem code.
    pub problem: Option<Problem>,
    /// The attempts it dispatched.
    pub dispatched: u8,
    /// Of those, retries: all but the first, or, for a hedge, its one attempt.
    pub retries: u8,
    /// For a deferred or rejected operation, the wait from now until it may be tried again, where
    /// known (the completion's `not_before`, less now).
    pub retry_in: Option<Duration<HZ>>,
}

impl<const HZ: u64> Ended<HZ> {
    /// `completion`'s end, with the wait its `not_before` leaves from now (`retry_in`).
    pub const fn of<E>(completion: &Completion<HZ, E>, retry_in: Option<Duration<HZ>>) -> Self {
        Self {
            disposition: completion.disposition,
            problem: completion.problem,
            dispatched: completion.summary.dispatched,
            retries: completion.summary.retries,
            retry_in,
        }
    }

    /// The verdict of the operation that ran this one in an attempt (the rule above). `single` is
    /// the verdict on the last failure itself, asked for only when the inner operation's policy
    /// allowed it one attempt: it spent one, and that one was not a retry.
    pub fn verdict(&self, single: impl FnOnce() -> Verdict<HZ>) -> Verdict<HZ> {
        match self.disposition {
            Disposition::Deferred | Disposition::Rejected => match self.retry_in {
                Some(wait) => Verdict::RetryableAfter(wait),
                None => Verdict::NotRetryable,
            },
            Disposition::Failed
                if self.problem.is_some_and(left_to_caller) && self.dispatched == 1 && self.retries == 0 =>
            {
                single()
            }
            Disposition::Failed | Disposition::Succeeded => Verdict::NotRetryable,
        }
    }
}

/// Whether an operation that made one attempt and ended with `problem` left the retrying to its
/// caller: it had no retry to make (its policy's one attempt), or made none for its statement (the
/// attempt may have arrived).
const fn left_to_caller(problem: Problem) -> bool {
    #[cfg(feature = "until-arrived")]
    if let Problem::MayHaveArrived = problem {
        return true;
    }
    matches!(problem, Problem::AttemptsExhausted)
}

impl<const HZ: u64, E: Classify<HZ>> Completion<HZ, E> {
    /// The verdict of an operation that ran this one inside one of its attempts, as the adapters'
    /// errors give it: [`Ended`]'s rule, where a policy of one attempt leaves the last failure's
    /// own verdict (none: not retryable). `retry_in` is the wait `not_before` leaves from now, read
    /// on the adapter's clock.
    ///
    /// A hedge's completion (`Operation::start_hedge`) counts one attempt, as an operation of one
    /// attempt does; but that attempt was a retry, a repeat under a policy of several: the hedge
    /// and its operation were the retrying layer, and its failure is not retryable to the
    /// operation that ran it. (The adapters return a hedge's completion only when it succeeded.)
    pub fn outer_verdict(&self, retry_in: Option<Duration<HZ>>) -> Verdict<HZ> {
        Ended::of(self, retry_in)
            .verdict(|| self.last_failure.as_ref().map_or(Verdict::NotRetryable, E::classify))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;

    /// A caller's error with a message, as a server's would be.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Refused;
    impl core::fmt::Display for Refused {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str("connection refused")
        }
    }
    impl core::error::Error for Refused {}
    impl Classify<1_000> for Refused {
        fn classify(&self) -> Verdict<1_000> {
            Verdict::NotRetryable
        }
    }

    const TIMED_OUT: AttemptError<1_000, Refused> =
        AttemptError::TimedOut { after: Duration::<1_000>::from_ticks(2_500) };

    #[test]
    fn an_attempt_error_gives_back_the_callers_error_and_only_that() {
        assert_eq!(AttemptError::<1_000, _>::Failed(Refused).into_inner(), Some(Refused));
        assert_eq!(TIMED_OUT.into_inner(), None);
    }

    #[test]
    fn a_timeout_is_retryable_and_the_callers_error_is_classified_by_the_caller() {
        assert_eq!(TIMED_OUT.classify(), Verdict::Retryable);
        assert_eq!(AttemptError::<1_000, _>::Failed(Refused).classify(), Verdict::NotRetryable);
    }

    /// An error with a cause, as a client library's would be.
    #[derive(Debug)]
    struct Unreachable(Refused);
    impl core::fmt::Display for Unreachable {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str("host unreachable")
        }
    }
    impl core::error::Error for Unreachable {
        fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_attempt_error_says_what_happened_and_is_transparent_over_the_callers_error() {
        use core::error::Error;
        assert_eq!(TIMED_OUT.to_string(), "attempt timed out after 2500 ticks at 1000 Hz");
        assert!(TIMED_OUT.source().is_none());
        let failed = AttemptError::<1_000, _>::Failed(Refused);
        assert_eq!(failed.to_string(), "connection refused");
        assert!(failed.source().is_none(), "its message is displayed already, and it has no cause");
        let failed = AttemptError::<1_000, _>::Failed(Unreachable(Refused));
        assert_eq!(failed.to_string(), "host unreachable");
        assert_eq!(failed.source().map(ToString::to_string).as_deref(), Some("connection refused"));
    }

    /// A judged error is classified by its verdict alone, whatever the error would say, and is as
    /// transparent as an attempt error: its message, then its error's causes.
    #[test]
    fn a_judged_error_has_its_verdict_and_the_errors_message_and_causes() {
        use core::error::Error;
        let wait = Verdict::RetryableAfter(Duration::<1_000>::from_ticks(250));
        let judged = Judged::new(Unreachable(Refused), wait);
        assert_eq!(judged.classify(), wait);
        assert_eq!(AttemptError::Failed(judged).classify(), wait, "through an attempt's failure");
        let judged = Judged::new(Unreachable(Refused), wait);
        assert_eq!(judged.to_string(), "host unreachable");
        assert_eq!(judged.source().map(ToString::to_string).as_deref(), Some("connection refused"));
        assert_eq!(Judged::<1_000, _>::retryable(Refused).classify(), Verdict::Retryable);
        assert_eq!(Judged::<1_000, _>::not_retryable(Refused).verdict, Verdict::NotRetryable);
        let by =
            Judged::<1_000, _>::by(7u8, |n| if *n > 5 { Verdict::Retryable } else { Verdict::NotRetryable });
        assert_eq!((by.verdict, by.into_inner()), (Verdict::Retryable, 7));
    }

    /// Every disposition, with and without a wait, one attempt and three: the outer verdict.
    #[test]
    fn an_inner_operations_end_is_retried_by_its_caller_only_when_it_left_the_retrying_to_it() {
        type D = Duration<1_000>;
        let end = |disposition, problem, dispatched: u8, retry_in| Ended::<1_000> {
            disposition,
            problem,
            dispatched,
            retries: dispatched.saturating_sub(1),
            retry_in,
        };
        let wait = Some(D::from_secs(30));
        let single = || Verdict::RetryableAfter(D::from_millis(5));
        let verdicts = [
            // The inner operation retried: its caller does not.
            (end(Disposition::Failed, Some(Problem::AttemptsExhausted), 3, None), Verdict::NotRetryable),
            (end(Disposition::Failed, Some(Problem::RetryBudgetExhausted), 2, None), Verdict::NotRetryable),
            (end(Disposition::Failed, Some(Problem::DeadlineExceeded), 1, None), Verdict::NotRetryable),
            (end(Disposition::Failed, None, 1, None), Verdict::NotRetryable),
            // A policy of one attempt: the caller retries by the failure's own verdict.
            (end(Disposition::Failed, Some(Problem::AttemptsExhausted), 1, None), single()),
            // A hedge's one attempt was a retry: the hedge and its operation were the retrying layer.
            (
                Ended { retries: 1, ..end(Disposition::Failed, Some(Problem::AttemptsExhausted), 1, None) },
                Verdict::NotRetryable,
            ),
            // Deferred or rejected: the wait is handed up, or nothing when there is none.
            (
                end(Disposition::Deferred, Some(Problem::RetryAfterExceedsDeadline), 1, wait),
                Verdict::RetryableAfter(D::from_secs(30)),
            ),
            (
                end(Disposition::Rejected, Some(Problem::CircuitOpen), 0, wait),
                Verdict::RetryableAfter(D::from_secs(30)),
            ),
            (end(Disposition::Rejected, Some(Problem::BulkheadFull), 0, None), Verdict::NotRetryable),
            (end(Disposition::Succeeded, None, 1, None), Verdict::NotRetryable),
        ];
        for (ended, verdict) in verdicts {
            assert_eq!(ended.verdict(single), verdict, "{ended:?}");
        }
    }

    #[test]
    fn an_end_is_read_from_the_completion_with_the_wait_given() {
        let completion = Completion::<1_000, Refused> {
            operation: crate::OperationId(7),
            disposition: Disposition::Rejected,
            problem: Some(Problem::CooldownActive),
            summary: crate::Summary {
                dispatched: 0,
                retries: 0,
                waited: Duration::from_ticks(0),
                elapsed: Duration::from_ticks(0),
            },
            last_failure: None,
            retry_after: None,
            not_before: Some(crate::Instant::from_ticks(9_000)),
        };
        let wait = Some(Duration::<1_000>::from_ticks(4_000));
        let ended = Ended::of(&completion, wait);
        assert_eq!(
            ended,
            Ended {
                disposition: Disposition::Rejected,
                problem: Some(Problem::CooldownActive),
                dispatched: 0,
                retries: 0,
                retry_in: wait
            }
        );
    }

    /// A policy of one attempt leaves its failure's verdict to the caller; one that retried, or one
    /// with no failure kept, is not retried again; a refusal hands its wait up.
    #[test]
    fn a_completions_outer_verdict_asks_the_last_failure_only_after_a_single_attempt() {
        let completion = |disposition, problem, dispatched, last_failure| Completion::<
            1_000,
            AttemptError<1_000, Refused>,
        > {
            operation: crate::OperationId(7),
            disposition,
            problem,
            summary: crate::Summary {
                dispatched,
                retries: dispatched.saturating_sub(1),
                waited: Duration::from_ticks(0),
                elapsed: Duration::from_ticks(0),
            },
            last_failure,
            retry_after: None,
            not_before: None,
        };
        let exhausted = Some(Problem::AttemptsExhausted);
        let single_timeout = completion(Disposition::Failed, exhausted, 1, Some(TIMED_OUT));
        assert_eq!(single_timeout.outer_verdict(None), Verdict::Retryable);
        let single_refused =
            completion(Disposition::Failed, exhausted, 1, Some(AttemptError::Failed(Refused)));
        assert_eq!(single_refused.outer_verdict(None), Verdict::NotRetryable);
        assert_eq!(
            completion(Disposition::Failed, exhausted, 1, None).outer_verdict(None),
            Verdict::NotRetryable
        );
        let retried = completion(Disposition::Failed, exhausted, 3, Some(TIMED_OUT));
        assert_eq!(retried.outer_verdict(None), Verdict::NotRetryable);
        let wait = Duration::<1_000>::from_ticks(4_000);
        let cooling = completion(Disposition::Rejected, Some(Problem::CooldownActive), 0, None);
        assert_eq!(cooling.outer_verdict(Some(wait)), Verdict::RetryableAfter(wait));
    }
}
