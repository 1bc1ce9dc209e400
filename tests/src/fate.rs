//! What a simulated caller does with each attempt it is given: answers it (with success, a failure,
//! or a "retry after"), gives up on it, or loses it; and, drawn while its operation waits, whether
//! it gives up during the wait. Shared by the simulations that run many operations on one clock
//! (`tests/tests/protection_properties.rs`, `tests/tests/equivalence.rs`), so that each reports an
//! attempt by the same rules.

use proptest::prelude::*;
use rand_core::RngCore;
use relent_core::{Attempt, Dependency, Observer, Operation, Verdict};

use crate::transcript::{D, Failure, HZ, T};

/// What the script does with one dispatched attempt.
#[derive(Debug, Clone, Copy)]
pub enum Fate {
    /// Succeeds after this long.
    Succeed(u64),
    /// Fails after this long, retryable.
    Fail(u64),
    /// Fails after the first, saying "retry after" the second.
    FailAfter(u64, u64),
    /// The caller is cancelled after this long: `abandon`. Drawn at a wait, it gives up during the
    /// wait if that is before the wait ends.
    Cancel(u64),
    /// The caller drops the attempt and never reports it: the operation cleans up at its deadline.
    Lose,
}

/// Fates whose attempts take up to `longest` ticks: mostly answers, some cancellations and losses.
pub fn fate(longest: u64) -> impl Strategy<Value = Fate> {
    prop_oneof![
        4 => (0..longest).prop_map(Fate::Succeed),
        4 => (0..longest).prop_map(Fate::Fail),
        1 => (0..100u64, 0..20_000u64).prop_map(|(t, w)| Fate::FailAfter(t, w)),
        1 => (0..longest).prop_map(Fate::Cancel),
        1 => Just(Fate::Lose),
    ]
}

impl Fate {
    /// When an attempt dispatched at `now` with `timeout` is reported (at once, if it is lost).
    pub fn reported_at(self, now: u64, timeout: u64) -> u64 {
        match self {
            Self::Succeed(t) | Self::Fail(t) | Self::FailAfter(t, _) | Self::Cancel(t) => {
                now + t.min(timeout)
            }
            Self::Lose => now,
        }
    }

    /// Whether a caller drawn this fate while its operation waits from `now` until `until` gives
    /// up first, and when.
    pub fn gives_up_waiting(self, now: u64, until: u64) -> Option<u64> {
        match self {
            Self::Cancel(t) if now + t < until => Some(now + t),
            _ => None,
        }
    }

    /// Reports `attempt` to `op` at `at`, as this fate says.
    pub fn report<const N: usize, const L: usize>(
        self,
        op: &mut Operation<'_, HZ, Failure>,
        attempt: Attempt<HZ>,
        at: T,
        dep: &mut Dependency<HZ, N, L>,
        rng: &mut impl RngCore,
        observer: &mut impl Observer<HZ>,
    ) {
        match self {
            Self::Succeed(_) => op.on_success(attempt, at, dep, observer),
            Self::Fail(_) => {
                let f = Failure { name: "f", verdict: Verdict::Retryable };
                op.on_failure(attempt, at, dep, rng, f, observer);
            }
            Self::FailAfter(_, w) => {
                let f = Failure { name: "busy", verdict: Verdict::RetryableAfter(D::from_ticks(w)) };
                op.on_failure(attempt, at, dep, rng, f, observer);
            }
            Self::Cancel(_) => op.abandon(at, dep, observer),
            Self::Lose => drop(attempt),
        }
    }
}
