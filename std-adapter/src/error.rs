//! What `execute` returns when the operation did not succeed.

use std::fmt;
use std::sync::Arc;

use relent_core::{Classify, Completion, Disposition, StartError, Verdict};

use crate::clock::HZ;

/// One attempt's failure: the operation's own error, or the attempt ran past its timeout and was
/// dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError<E> {
    /// The attempt ran past its timeout; its future was dropped.
    TimedOut {
        /// The timeout it was given.
        after: std::time::Duration,
    },
    /// The operation returned this error.
    Failed(E),
}

impl<E> AttemptError<E> {
    /// The operation's own error, if that is what this is.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Self::Failed(e) => Some(e),
            Self::TimedOut { .. } => None,
        }
    }
}

/// A timeout is retryable: the attempt may not have reached the far side, or may have; the
/// operation's replay-safety statement (not the classifier) decides whether repeating it is safe.
impl<E: Classify<HZ>> Classify<HZ> for AttemptError<E> {
    fn classify(&self) -> Verdict<HZ> {
        match self {
            Self::TimedOut { .. } => Verdict::Retryable,
            Self::Failed(e) => e.classify(),
        }
    }
}

impl<E: fmt::Display> fmt::Display for AttemptError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TimedOut { after } => write!(f, "attempt timed out after {after:?}"),
            Self::Failed(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for AttemptError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::TimedOut { .. } => None,
            Self::Failed(e) => Some(e),
        }
    }
}

/// The operation did not produce a value: it could not start, or it ended failed, deferred or
/// rejected. `?`-friendly; [`Error::completion`] has the details.
#[derive(Debug)]
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
                write!(f, "{dependency}: {}", completion.disposition)?;
                if let Some(p) = completion.problem {
                    write!(f, " ({p})")?;
                }
                write!(f, " after {} attempt(s)", completion.summary.dispatched)?;
                if let Some(t) = completion.retry_after {
                    write!(f, "; the far side asked to wait {:?}", crate::clock::std_duration(t))?;
                }
                if let Some(e) = &completion.last_failure {
                    write!(f, "; last failure: {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Start(e) => Some(e),
            Self::Ended { completion, .. } => {
                completion.last_failure.as_ref().map(|e| e as &(dyn std::error::Error + 'static))
            }
        }
    }
}

/// A value with the completion that produced it: `execute_detailed`'s answer (seed 003's
/// `executeDetailed`).
#[derive(Debug)]
pub struct Detailed<T, E> {
    /// The value, when an attempt succeeded.
    pub value: Option<T>,
    /// How the operation went.
    pub completion: Completion<HZ, AttemptError<E>>,
}

impl<T, E> Detailed<T, E> {
    /// The value, or the completion as an [`Error`].
    pub fn into_result(self, dependency: Arc<str>) -> Result<T, Error<E>> {
        match (self.value, self.completion.disposition) {
            (Some(v), Disposition::Succeeded) => Ok(v),
            (_, _) => Err(Error::Ended { dependency, completion: self.completion }),
        }
    }
}
