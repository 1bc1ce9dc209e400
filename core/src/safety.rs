//! Replay safety: the caller's statement that repeating an operation is safe.
//!
//! Relent cannot know whether a call has side effects (seed 003, "A retry needs three things"), and
//! the same error has opposite answers for different operations (seed 000: a read timeout is safe
//! to retry on a GET and unsafe on a POST without an idempotency key). So every operation is
//! [`ReplaySafety::Unsafe`] unless its caller states otherwise, a policy that allows more than one
//! attempt refuses to run an `Unsafe` operation, and a statement is only good for as long as the
//! caller says (an idempotency key that the provider forgets after 24 h stops protecting a replay
//! after 24 h).
//!
//! One statement needs no promise about the far side at all: [`ReplaySafety::UntilArrived`]. A call
//! that must not be repeated once it has arrived may still be repeated while no attempt has: seed
//! 000's wrapper retries a POST without an idempotency key after a refused connection, since "the
//! request never arrived: the far side's state is unchanged and a retry is safe". Such an operation
//! is retried after failures judged [`Verdict::NeverArrived`](crate::Verdict::NeverArrived) and
//! ends at the first that may have arrived (`may_have_arrived`). Seed 003 makes every repeat wait
//! for the caller's statement, and so does Relent: `Unsafe`, the default, still gets one attempt.

use crate::time::Duration;

/// What the caller states about repeating an operation, and for how long the statement holds
/// (counted from the operation's start).
///
/// Without a statement, a policy of more than one attempt refuses to start, before anything is
/// sent; a statement that expires stops retries at that point:
///
/// ```
/// use relent_core::{
///     Context, Dependency, DependencyConfig, Duration, Instant, Operation, ReplaySafety, RetryBudget, RetryPolicy,
///     StartError, Verdict,
/// };
/// type D = Duration<1_000>;
///
/// let policy = RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2)).build()?;
/// let config = DependencyConfig::new(D::from_secs(10)).budget(RetryBudget::ratio(10, 5)?);
/// let now = Instant::<1_000>::from_ticks(0);
///
/// // A POST without an idempotency key: nobody said a repeat is safe.
/// let charge = Context::new(D::from_secs(10), ReplaySafety::Unsafe);
/// let refused = Operation::<1_000, Verdict<1_000>>::start(&policy, &config, charge, now);
/// assert_eq!(refused.err(), Some(StartError::UnsafeWithRetries { max_attempts: 3 }));
/// // Sent once, it needs no statement.
/// assert!(Operation::<1_000, Verdict<1_000>>::start(&policy.without_retries(), &config, charge, now).is_ok());
///
/// // With an idempotency key the provider keeps for 24 h, repeats are safe for 24 h.
/// let keyed = Context::new(D::from_secs(10), ReplaySafety::provider_idempotent_mutation(D::from_secs(86_400)));
/// assert!(Operation::<1_000, Verdict<1_000>>::start(&policy, &config, keyed, now).is_ok());
/// assert_eq!(keyed.safety().as_str(), "provider_idempotent_mutation");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ReplaySafety<const HZ: u64> {
    /// No statement: the operation may have effects that a repeat would duplicate. The default.
    #[default]
    Unsafe,
    /// A repeat is unsafe once an attempt may have reached the far side, and safe until then (a
    /// POST without an idempotency key). The operation is retried only after failures judged
    /// [`Verdict::NeverArrived`](crate::Verdict::NeverArrived), each of which left the far side as
    /// it was, so every attempt it sends is the first to arrive; any other retryable failure ends it
    /// (`may_have_arrived`), its failure kept. No time limit: an attempt that never arrived stays
    /// so. Never hedged: a hedge is a copy sent while the first may be arriving. Feature
    /// `until-arrived` (a default).
    #[cfg(feature = "until-arrived")]
    #[cfg_attr(docsrs, doc(cfg(feature = "until-arrived")))]
    UntilArrived,
    /// The operation only reads; repeating it leaves the far side where one attempt would.
    ReplayableRead {
        /// How long the statement stays valid after the operation starts.
        valid_for: Duration<HZ>,
    },
    /// The operation mutates, and the provider deduplicates repeats (for example a POST that
    /// carries an idempotency key the provider honours).
    ProviderIdempotentMutation {
        /// How long the statement stays valid (for example the provider's key retention).
        valid_for: Duration<HZ>,
    },
}

impl<const HZ: u64> ReplaySafety<HZ> {
    /// A read that is safe to repeat for `valid_for` after the operation starts.
    pub const fn replayable_read(valid_for: Duration<HZ>) -> Self {
        Self::ReplayableRead { valid_for }
    }

    /// A mutation the provider deduplicates, safe to repeat for `valid_for`.
    pub const fn provider_idempotent_mutation(valid_for: Duration<HZ>) -> Self {
        Self::ProviderIdempotentMutation { valid_for }
    }

    /// How long a repeat is safe, or `None` for [`ReplaySafety::Unsafe`] and
    /// [`ReplaySafety::UntilArrived`] (whose repeats are safe by the failure, not by time).
    pub const fn valid_for(&self) -> Option<Duration<HZ>> {
        match self {
            Self::Unsafe => None,
            #[cfg(feature = "until-arrived")]
            Self::UntilArrived => None,
            Self::ReplayableRead { valid_for } | Self::ProviderIdempotentMutation { valid_for } => {
                Some(*valid_for)
            }
        }
    }

    /// Whether a hedge may repeat the operation (`Operation::hedge_plan`): only a read's statement
    /// allows it. A hedge is sent while the first copy is still out, and a provider's
    /// deduplication (an idempotency key) is promised for a repeat that comes after the first
    /// request, not for a copy in flight: providers treat one as a conflict (Zuora answers it 409;
    /// Stripe saves no result for a request that conflicts with one still executing), and a
    /// provider that records the key only after the effect would apply both. A keyed mutation is
    /// still retried.
    pub const fn may_hedge(&self) -> bool {
        matches!(self, Self::ReplayableRead { .. })
    }

    /// The stable snake_case name of this statement.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Unsafe => "unsafe",
            #[cfg(feature = "until-arrived")]
            Self::UntilArrived => "until_arrived",
            Self::ReplayableRead { .. } => "replayable_read",
            Self::ProviderIdempotentMutation { .. } => "provider_idempotent_mutation",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_has_its_stable_name() {
        let d = Duration::<1_000>::from_ticks(1);
        let names = [
            ReplaySafety::Unsafe,
            ReplaySafety::replayable_read(d),
            ReplaySafety::provider_idempotent_mutation(d),
        ]
        .map(|s| s.as_str());
        assert_eq!(names, ["unsafe", "replayable_read", "provider_idempotent_mutation"]);
        #[cfg(feature = "until-arrived")]
        assert_eq!(ReplaySafety::<1_000>::UntilArrived.as_str(), "until_arrived");
    }
}
