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
/// use relent_core::{Classify, Duration, Verdict};
///
/// enum UplinkError { NoAck, Busy { retry_in_s: u64 }, Rejected }
///
/// impl<const HZ: u64> Classify<HZ> for UplinkError {
///     fn classify(&self) -> Verdict<HZ> {
///         match self {
///             UplinkError::NoAck => Verdict::Retryable,
///             UplinkError::Busy { retry_in_s } => {
///                 Verdict::RetryableAfter(Duration::<HZ>::from_ticks(retry_in_s.saturating_mul(HZ)))
///             }
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
