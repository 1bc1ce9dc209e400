//! What `execute` returns when the operation did not succeed.

use std::fmt;
use std::sync::Arc;

use relent_core::{Completion, Disposition, StartError};

use crate::clock::HZ;

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
    Ended {
        /// The dependency's name.
        dependency: Arc<str>,
        /// How it ended, with the last failure.
        completion: Completion<HZ, AttemptError<E>>,
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
            Self::Ended { dependency, completion } => {
                let outcome = Outcome {
                    dependency,
                    disposition: completion.disposition,
                    problem: completion.problem,
                    dispatched: completion.summary.dispatched,
                    retry_after: completion.retry_after.map(crate::clock::std_duration),
                };
                write!(f, "{outcome}")?;
                match &completion.last_failure {
                    Some(relent_core::AttemptError::TimedOut { after }) => write!(
                        f,
                        "; last failure: attempt timed out after {:?}",
                        crate::clock::std_duration(*after)
                    )?,
                    Some(relent_core::AttemptError::Failed(e)) => write!(f, "; last failure: {e}")?,
                    None => {}
                }
                Ok(())
            }
        }
    }
}

/// "payrail: failed (attempts_exhausted) after 3 attempt(s); the far side asked to wait 30s": how
/// an operation ended, as `Error` and the tower layer's `HttpError` both begin their messages (the
/// problem code and the wait only when there is one).
pub(crate) struct Outcome<'a> {
    pub(crate) dependency: &'a str,
    pub(crate) disposition: Disposition,
    pub(crate) problem: Option<relent_core::Problem>,
    pub(crate) dispatched: u8,
    pub(crate) retry_after: Option<std::time::Duration>,
}

impl fmt::Display for Outcome<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.dependency, self.disposition)?;
        if let Some(p) = self.problem {
            write!(f, " ({p})")?;
        }
        write!(f, " after {} attempt(s)", self.dispatched)?;
        if let Some(wait) = self.retry_after {
            write!(f, "; the far side asked to wait {wait:?}")?;
        }
        Ok(())
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
}

impl<T, E> Detailed<T, E> {
    /// The value, or the completion as an [`Error`].
    pub fn into_result(self, dependency: Arc<str>) -> Result<T, Error<E>> {
        self.into_result_with(|| dependency)
    }

    /// As [`Detailed::into_result`], with the dependency's name made only for an error.
    pub(crate) fn into_result_with(self, dependency: impl FnOnce() -> Arc<str>) -> Result<T, Error<E>> {
        match (self.value, self.completion.disposition) {
            (Some(v), Disposition::Succeeded) => Ok(v),
            (_, _) => Err(Error::Ended { dependency: dependency(), completion: self.completion }),
        }
    }
}
