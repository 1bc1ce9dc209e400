//! Classification: which of the caller's failures are worth another attempt.
//!
//! This is the part of a policy seed 000 calls "the one that matters", and the one most retry
//! decorators get wrong by retrying on any error. Relent retries nothing it is not told to: the
//! caller implements [`Classify`] for its own error type and names the transient failures. The core
//! knows nothing of HTTP; the tokio adapter ships helpers that map 429/503 and Retry-After onto a
//! [`Verdict`].

use crate::time::Duration;

/// The caller's judgement of one failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Verdict<const HZ: u64> {
    /// Transient: another attempt may succeed (a connection refused, a connect timeout).
    Retryable,
    /// Transient, and the far side said how long to wait (HTTP `Retry-After`, a modem's "busy, try
    /// again in N s"). The wait is a lower bound for the next attempt: never sooner.
    RetryableAfter(Duration<HZ>),
    /// Not worth repeating (a 400, a 422, a bug): returned to the caller as it is.
    NotRetryable,
}

impl<const HZ: u64> Verdict<HZ> {
    /// Retryable after a wait the far side stated in whole seconds (a modem's "busy, try again in
    /// N s", an HTTP `Retry-After: N`). Never panics: where `secs` seconds do not fit in
    /// [`Ticks`](crate::Ticks) at `HZ`, the wait saturates, and a wait that long defers the
    /// operation instead of sleeping (fugit's `Duration::from_secs` would overflow instead).
    pub const fn retryable_after_secs(secs: u32) -> Self {
        Self::RetryableAfter(Duration::<HZ>::from_ticks(crate::time::seconds::<HZ>(secs)))
    }

    /// Whether another attempt may help.
    pub const fn is_retryable(&self) -> bool {
        !matches!(self, Self::NotRetryable)
    }

    /// The server-stated wait, if any.
    pub const fn retry_after(&self) -> Option<Duration<HZ>> {
        match self {
            Self::RetryableAfter(d) => Some(*d),
            _ => None,
        }
    }
}

/// Implemented by the caller for its error type: says whether a failure is worth retrying.
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
}
