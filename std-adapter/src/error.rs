//! What `execute` returns when the operation did not succeed.

use std::fmt;
use std::sync::Arc;

use relent_core::{Completion, Disposition, StartError, Verdict};

use crate::clock::{Duration, HZ, Instant, std_duration};

/// One attempt's failure at relent-tokio's tick rate (the core's type): the operation's own error,
/// or the attempt ran past its timeout and was dropped.
pub type AttemptError<E> = relent_core::AttemptError<HZ, E>;

/// The operation did not produce a value: it could not start, or it ended failed, deferred or
/// rejected. `?`-friendly; [`Error::completion`] has the details. `non_exhaustive`, as are the
/// adapters' reports (`Detailed`, `RetryReport`; `AttemptInfo` has methods): a later version may
/// add a way to end or a field without breaking your build, so match what you act on and keep a
/// fallback.
///
/// ```
/// use relent_tokio::core::{Classify, Context, DependencyConfig, Disposition, ReplaySafety, RetryBudget, RetryPolicy, Verdict};
/// use relent_tokio::{Dependency, Duration, Error, HZ};
///
/// #[derive(Debug, PartialEq)]
/// enum LedgerError { Unavailable }
/// impl Classify<HZ> for LedgerError {
///     fn classify(&self) -> Verdict<HZ> { Verdict::Retryable }
/// }
/// impl std::fmt::Display for LedgerError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("ledger unavailable") }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2)).build()?;
/// let ledger = Dependency::new("ledger", DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5)?))?;
/// let read = Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(60)));
///
/// let outage = ledger.execute(&policy, read, |_| async { Err::<u64, _>(LedgerError::Unavailable) }).await;
/// let Err(error) = outage else { panic!("every attempt failed") };
/// assert_eq!(error.code(), "attempts_exhausted"); // stable: for metrics and alerts
/// assert_eq!(
///     error.to_string(),
///     "ledger: failed (attempts_exhausted) after 3 attempt(s); last failure: ledger unavailable"
/// );
/// let completion = error.completion().unwrap();
/// assert_eq!((completion.disposition, completion.summary.dispatched), (Disposition::Failed, 3));
/// assert_eq!(error.into_last_failure(), Some(LedgerError::Unavailable)); // your own error, typed
///
/// // An unsafe call with retries never starts.
/// let charge = Context::new(Duration::from_secs(10), ReplaySafety::Unsafe);
/// let refused = ledger.execute(&policy, charge, |_| async { Ok::<_, LedgerError>(0) }).await;
/// assert!(matches!(refused, Err(Error::Start(_))));
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error<E> {
    /// The policy and the call do not fit together; nothing was sent.
    Start(StartError),
    /// The operation ended without a value.
    #[non_exhaustive]
    Ended {
        /// The dependency's name.
        dependency: Arc<str>,
        /// How it ended, with the last failure.
        completion: Completion<HZ, AttemptError<E>>,
        /// For a deferred or rejected operation, how long after its end to try again, where that
        /// is known: the completion's `not_before` (an instant on the dependency's own clock,
        /// [`Dependency::now`](crate::Dependency::now)) as a wait. See [`Error::retry_in`].
        retry_in: Option<std::time::Duration>,
    },
}

impl<E> Error<E> {
    /// The completion, unless the operation never started.
    pub fn completion(&self) -> Option<&Completion<HZ, AttemptError<E>>> {
        match self {
            Self::Start(_) => None,
            Self::Ended { completion, .. } => Some(completion),
        }
    }

    /// The stable code: the start error's, or the completion's problem (`""` for a failure that
    /// was simply not retryable).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Start(e) => e.as_str(),
            Self::Ended { completion, .. } => completion.code(),
        }
    }

    /// For a deferred or rejected operation, how long after it ended to try again, where that is
    /// known: the far side's Retry-After that did not fit the policy or the deadline, the cooldown
    /// it started, the circuit's break, the next rate-limit unit or the airtime to wait for.
    /// `None` for an operation that failed, and for a refusal with no end in sight (a full
    /// bulkhead). Waited from the moment the error is returned, it never tries sooner than the
    /// dependency would allow. To pass it on to a caller of your own, in a 503's `Retry-After`:
    /// [`http::retry_after_value`](crate::http::retry_after_value).
    pub fn retry_in(&self) -> Option<std::time::Duration> {
        match self {
            Self::Start(_) => None,
            Self::Ended { retry_in, .. } => *retry_in,
        }
    }

    /// The operation's own last error, if the last attempt returned one.
    pub fn into_last_failure(self) -> Option<E> {
        match self {
            Self::Start(_) => None,
            Self::Ended { completion, .. } => completion.last_failure.and_then(AttemptError::into_inner),
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Start(e) => write!(f, "operation not started: {e}"),
            Self::Ended { dependency, completion, retry_in } => {
                let ended = relent_core::Outcome {
                    disposition: completion.disposition,
                    problem: completion.problem,
                    dispatched: completion.summary.dispatched,
                    retry_after: completion.retry_after.map(|w| Wait(std_duration(w))),
                    retry_in: retry_in.map(Wait),
                };
                let outcome = Outcome { dependency, ended };
                write!(f, "{outcome}")?;
                match &completion.last_failure {
                    Some(relent_core::AttemptError::TimedOut { after }) => {
                        write!(f, "; last failure: attempt timed out after {:?}", std_duration(*after))?
                    }
                    Some(relent_core::AttemptError::Failed(e)) => write!(f, "; last failure: {e}")?,
                    None => {}
                }
                Ok(())
            }
        }
    }
}

/// An operation run inside another's attempt: seed 000's rule that exactly one layer retries an
/// operation ("Where the Retry Lives": 3 attempts at each of three layers are 27 calls from one
/// click). An outer operation whose attempt runs an inner `execute` and returns its `Error` as the
/// attempt's failure gets this verdict ([`relent_core::Ended`]'s rule, which relent-embassy's
/// `Error` follows too):
///
/// - An inner operation whose policy allows one attempt did not retry, so the outer is the layer
///   that does: its last failure's own verdict, as the inner classified it.
/// - An inner operation that could retry was the retrying layer. Whether it spent its attempts, its
///   budget refused a retry (the dependency is in trouble: the SRE book's "overloaded; don't
///   retry"), its deadline or replay statement ran out, or its failure was not retryable: not
///   retryable.
/// - An inner operation deferred or rejected with a known instant to try again (a Retry-After it
///   could not wait, a cooldown, an open circuit, a rate limit, airtime): retryable after
///   [`Error::retry_in`], so that an outer layer with more patience (a job with minutes to spare)
///   waits for it, and one with less defers in turn, with the same wait.
/// - A refusal with no end in sight (a full bulkhead), and an operation that never started: not
///   retryable.
///
/// The rule needs the inner operation to end on its own: an outer attempt that timed out first
/// would drop it mid-retry ([`AttemptError::TimedOut`](relent_core::AttemptError::TimedOut), which
/// is retryable), and the outer operation would start it again. So an operation started inside an
/// attempt ends by that attempt's expiry, whatever its own deadline (see
/// [`attempt_expiry`](crate::attempt_expiry)).
///
/// ```
/// use relent_tokio::core::{Classify, Context, DependencyConfig, Disposition, ReplaySafety, RetryBudget, RetryPolicy, Verdict};
/// use relent_tokio::{Dependency, Duration, Error, HZ};
///
/// #[derive(Debug)]
/// struct Unavailable;
/// impl Classify<HZ> for Unavailable {
///     fn classify(&self) -> Verdict<HZ> { Verdict::Retryable }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2)).build()?;
/// let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5)?);
/// let (ledger, checkout) = (Dependency::new("ledger", config)?, Dependency::new("checkout", config)?);
/// let read = Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(60)));
///
/// let calls = std::cell::Cell::new(0);
/// let done = checkout
///     .execute_detailed(&policy, read, |_| {
///         // The ledger's client retries its own calls...
///         ledger.execute(&policy, read, |_| async { calls.set(calls.get() + 1); Err::<(), _>(Unavailable) })
///     })
///     .await?;
/// // ...so the checkout does not retry them again: 3 calls, not 9.
/// assert_eq!((calls.get(), done.completion.summary.dispatched), (3, 1));
/// assert_eq!(done.completion.disposition, Disposition::Failed);
/// # Ok(()) }
/// ```
impl<E: relent_core::Classify<HZ>> relent_core::Classify<HZ> for Error<E> {
    fn classify(&self) -> Verdict<HZ> {
        let Self::Ended { completion, retry_in, .. } = self else {
            return Verdict::NotRetryable;
        };
        completion.outer_verdict(retry_in.map(crate::clock::ticks))
    }
}

/// "payrail: failed (attempts_exhausted) after 3 attempt(s); the far side asked to wait 30s": how
/// an operation ended, as `Error` and the tower layer's `HttpError` both begin their messages: the
/// dependency's name, then [`relent_core::Outcome`], whose rule says which codes and waits appear.
pub(crate) struct Outcome<'a> {
    pub(crate) dependency: &'a str,
    pub(crate) ended: relent_core::Outcome<Wait>,
}

impl fmt::Display for Outcome<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.dependency, self.ended)
    }
}

/// A wait as relent-tokio's messages say it: std's `Debug` of a `Duration` (`18s`, `1.5s`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wait(pub(crate) std::time::Duration);

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// The message already shows the start error or the last failure, so `source` continues the chain
/// below it, with the last failure's own cause: a reporter that prints the chain (anyhow's `{:#}`)
/// shows each message once. The last failure itself, typed: [`Error::into_last_failure`] or
/// [`Error::completion`].
impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Start(e) => e.source(),
            Self::Ended { completion, .. } => completion.last_failure.as_ref().and_then(|e| e.source()),
        }
    }
}

/// A value with the completion that produced it: `execute_detailed`'s answer (seed 003's
/// `executeDetailed`).
#[derive(Debug)]
#[non_exhaustive]
pub struct Detailed<T, E> {
    /// The value, when an attempt succeeded.
    pub value: Option<T>,
    /// How the operation went.
    pub completion: Completion<HZ, AttemptError<E>>,
    /// For a deferred or rejected operation, how long after its end to try again, where known
    /// (as [`Error::retry_in`]).
    pub retry_in: Option<std::time::Duration>,
    /// The deadline the operation ran under, from its start: its context's, or less when it
    /// started inside an attempt that expired sooner (see [`attempt_expiry`]).
    ///
    /// [`attempt_expiry`]: crate::attempt_expiry
    pub deadline: std::time::Duration,
    /// Whether the value and the completion are a hedge's
    /// ([`Dependency::execute_hedged_detailed`](crate::Dependency::execute_hedged_detailed)): a
    /// second copy of the call, sent while the first was still out, succeeded first. The
    /// completion is then the hedge's own: one attempt, numbered 2, its own operation id.
    pub hedge: bool,
    /// Whether a hedge was sent at all, answered first or not: the requests hedged, which hedges
    /// won ([`hedge`](Self::hedge)) are a share of. A hedge the dependency refused (the budget, a
    /// protection) was not sent; one sent and beaten by the first copy was, and is one more call
    /// than the completion's attempts (when the hedge won, the completion is the hedge's, and the
    /// first copy made at least one call more).
    pub hedge_sent: bool,
}

impl<T, E> Detailed<T, E> {
    /// The value and the completion, with the wait until `not_before` counted from `now`, read
    /// (on the dependency's clock) only when there is a `not_before`: at or after the operation's
    /// end, so that the wait, taken from when the caller gets it, never ends sooner.
    pub(crate) fn new(
        value: Option<T>,
        completion: Completion<HZ, AttemptError<E>>,
        deadline: Duration,
        now: impl FnOnce() -> Instant,
    ) -> Self {
        let retry_in = completion
            .not_before
            .map(|at| std_duration(Duration::from_ticks(at.as_ticks().saturating_sub(now().as_ticks()))));
        Self {
            value,
            completion,
            retry_in,
            deadline: std_duration(deadline),
            hedge: false,
            hedge_sent: false,
        }
    }

    /// The value, or the completion as an [`Error`].
    pub fn into_result(self, dependency: Arc<str>) -> Result<T, Error<E>> {
        self.into_result_with(|| dependency)
    }

    /// As [`Detailed::into_result`], with the dependency's name made only for an error.
    pub(crate) fn into_result_with(self, dependency: impl FnOnce() -> Arc<str>) -> Result<T, Error<E>> {
        match (self.value, self.completion.disposition) {
            (Some(v), Disposition::Succeeded) => Ok(v),
            (_, _) => Err(Error::Ended {
                dependency: dependency(),
                completion: self.completion,
                retry_in: self.retry_in,
            }),
        }
    }
}
