//! `Error`: an operation that gave no value, as the error of a `Result`, so that an attempt of an
//! outer operation can return it with `?` and the outer operation classifies it.
//!
//! Why (seed 000, "Where the Retry Lives"): exactly one layer retries an operation. Firmware nests
//! operations too: an uplink whose attempt brings up a modem whose driver retries its own AT
//! commands. Returned as the uplink attempt's failure, the modem's end is judged by
//! [`relent_core::Ended`]'s rule, the one relent-tokio's `Error` follows: an inner operation that
//! retried is not retried again (3 AT commands, not 9), one with a known wait hands the wait up.
//! The inner operation must end on its own for that, before the outer attempt's timeout drops it
//! mid-retry: [`AttemptInfo::bound`](crate::AttemptInfo::bound).

use core::fmt;

use relent_core::{Classify, Completion, Outcome, StartError, Verdict};

use crate::execute::{Done, wait_ticks};
use crate::{AttemptError, HZ};

/// Why an operation gave no value: it never started, or it ended failed, deferred or rejected.
/// [`Done::into_result`] makes one; `?` makes one from a refused start.
///
/// As an attempt's failure it is classified by [`relent_core::Ended`]'s rule: not retryable when
/// the inner operation could retry (it was the layer that retries) or never started; its last
/// failure's own verdict when its policy allowed one attempt; retryable after
/// [`Error::retry_in`] when it was deferred or rejected with a known instant to try again.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error<E> {
    /// The policy and the context do not fit together; nothing was sent.
    Start(StartError),
    /// The operation ended without a value.
    #[non_exhaustive]
    Ended {
        /// How it ended, with the last failure.
        completion: Completion<HZ, AttemptError<E>>,
        /// For a deferred or rejected operation, how long to wait before trying again, where that
        /// is known, counted from when [`Done::into_result`] made this error (see
        /// [`Error::retry_in`]).
        retry_in: Option<embassy_time::Duration>,
    },
}

impl<E> From<StartError> for Error<E> {
    fn from(e: StartError) -> Self {
        Self::Start(e)
    }
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

    /// For a deferred or rejected operation, how long to wait before trying again, where that is
    /// known (the completion's `not_before`: a Retry-After that did not fit, the cooldown, the
    /// circuit's break, the rate limit, the airtime). Counted from when the error was made, so
    /// waited at once (`Timer::after`) it never tries sooner than the dependency allows; to keep
    /// an instant instead, read [`Done::retry_at`] before `into_result`.
    pub fn retry_in(&self) -> Option<embassy_time::Duration> {
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

/// "failed (attempts_exhausted) after 3 attempt(s); last failure: no answer", with the far side's
/// wait and the wait before trying again when there are ("deferred
/// (retry_after_exceeds_maximum_delay) after 1 attempt(s); the far side asked to wait 5000 ms; try
/// again in 5000 ms"), as relent-tokio's `Error` says it, less the dependency's name, which a
/// firmware dependency does not have. Waits in whole milliseconds, rounded down.
impl<E: fmt::Display> fmt::Display for Error<E> {
    #[allow(clippy::useless_conversion)] // A conversion only with 32-bit ticks.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (completion, retry_in) = match self {
            Self::Start(e) => return write!(f, "operation not started: {e}"),
            Self::Ended { completion, retry_in } => (completion, retry_in),
        };
        let ended = Outcome {
            disposition: completion.disposition,
            problem: completion.problem,
            dispatched: completion.summary.dispatched,
            retry_after: completion.retry_after.map(|w| Millis(u64::from(w.as_ticks()))),
            retry_in: retry_in.map(|w| Millis(w.as_ticks())),
        };
        write!(f, "{ended}")?;
        match &completion.last_failure {
            Some(AttemptError::TimedOut { after }) => {
                write!(f, "; last failure: attempt timed out after {}", Millis(u64::from(after.as_ticks())))
            }
            Some(AttemptError::Failed(e)) => write!(f, "; last failure: {e}"),
            None => Ok(()),
        }
    }
}

/// A wait of embassy-time's ticks as relent-embassy's messages say it: in whole milliseconds,
/// rounded down (`5000 ms`), at any tick rate and for any count (embassy's `as_millis` multiplies
/// first, which overflows for a long enough wait at a rate such as 32,768 Hz, and a far side's
/// wait is the caller's input).
#[derive(PartialEq, Eq)]
struct Millis(u64);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ticks = self.0;
        let ms = (ticks / HZ).saturating_mul(1_000).saturating_add((ticks % HZ).saturating_mul(1_000) / HZ);
        write!(f, "{ms} ms")
    }
}

/// The message already shows the start error or the last failure, so `source` continues the chain
/// below it, with the last failure's own cause (as relent-tokio's `Error` does).
impl<E: core::error::Error + 'static> core::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Start(e) => e.source(),
            Self::Ended { completion, .. } => completion.last_failure.as_ref().and_then(|e| e.source()),
        }
    }
}

/// An operation run inside another's attempt, returned as that attempt's failure:
/// [`relent_core::Ended`]'s rule (see [`Error`]).
impl<E: Classify<HZ>> Classify<HZ> for Error<E> {
    fn classify(&self) -> Verdict<HZ> {
        let Self::Ended { completion, retry_in } = self else {
            return Verdict::NotRetryable;
        };
        completion.outer_verdict(retry_in.map(wait_ticks))
    }
}

impl<T, E> Done<T, E> {
    /// The value, or why there is none: `Ok` if an attempt succeeded, else [`Error::Ended`] with
    /// the completion and the wait before trying again ([`Done::retry_at`] less now, read here).
    /// With `?` after `execute(..).await?` in an attempt of an outer operation, the outer
    /// operation classifies the inner one's end.
    pub fn into_result(self) -> Result<T, Error<E>> {
        let retry_at = self.retry_at();
        match self.value {
            Some(value) => Ok(value),
            None => {
                let retry_in = retry_at.map(|at| at.saturating_duration_since(embassy_time::Instant::now()));
                Err(Error::Ended { completion: self.completion, retry_in })
            }
        }
    }
}
