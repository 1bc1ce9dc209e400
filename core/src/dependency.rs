//! The shared, mutable state of one downstream dependency.
//!
//! Three kinds of state have three owners (see the crate doc): the policy is immutable config, the
//! operation is one call's own `&mut` state machine, and the dependency is what all the calls to one
//! downstream share: its window of counts and its retry budget (and, with the protections, its
//! breaker, limiter, bulkhead and cooldown). Many operations use one `Dependency` at once, so the
//! caller keeps it behind a lock of its choosing (`critical-section` on firmware, a per-dependency
//! mutex on a server) and takes the lock only for the length of one call into the core: the core
//! never holds it across a wait or an attempt.
//!
//! `Dependency::new` is a `const fn`, so the state can sit in a `static` on firmware.

use crate::budget::{
    BudgetKind, Reservation, RetryBudget, TokenBucket, ratio_allows, ratio_headroom,
};
use crate::error::ConfigError;
use crate::time::{Duration, Instant};
use crate::window::{CallWindow, Counts};

/// A dependency's configuration: its counting window and its retry budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DependencyConfig<const HZ: u64> {
    window: Duration<HZ>,
    budget: Option<RetryBudget<HZ>>,
}

impl<const HZ: u64> DependencyConfig<HZ> {
    /// A dependency counted over `window` (seed 000: 10 s), with no retry budget yet. Without a
    /// budget only single-attempt policies can run against it.
    pub const fn new(window: Duration<HZ>) -> Self {
        Self {
            window,
            budget: None,
        }
    }

    /// Sets the retry budget all operations against this dependency share.
    pub const fn budget(mut self, budget: RetryBudget<HZ>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The counting window.
    pub const fn window(&self) -> Duration<HZ> {
        self.window
    }

    /// The retry budget, if any.
    pub const fn retry_budget(&self) -> Option<RetryBudget<HZ>> {
        self.budget
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum BudgetState {
    None,
    Ratio { percent: u8, floor: u32 },
    Tokens(TokenBucket),
}

/// The shared state of one dependency, with `N` buckets in its counting window. It keeps only
/// what changes and the numbers its rules read; the [`DependencyConfig`] it was built from is not
/// stored twice.
///
/// Call-order contract: every method that takes `now` must be given a `now` that does not go
/// backwards across all the operations that share this dependency (an earlier one is read as the
/// latest seen). Operations reach it through [`Operation`](crate::Operation)'s methods; the public
/// getters here are for dashboards and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Dependency<const HZ: u64, const N: usize> {
    window: CallWindow<N>,
    budget: BudgetState,
}

impl<const HZ: u64, const N: usize> Dependency<HZ, N> {
    /// Fresh state at `now` (a full token bucket, an empty window). `N` must be at least 1 (a build
    /// error otherwise), and the window at least `N` ticks long.
    pub const fn new(config: DependencyConfig<HZ>, now: Instant<HZ>) -> Result<Self, ConfigError> {
        let window = config.window.as_ticks();
        if window == 0 {
            return Err(ConfigError::ZeroWindow);
        }
        let width = match window.checked_div(N as u64) {
            Some(w) => w,
            None => 0,
        };
        if width == 0 {
            return Err(ConfigError::WindowShorterThanBuckets);
        }
        let budget = match config.budget {
            None => BudgetState::None,
            Some(b) => match b.kind() {
                BudgetKind::Ratio { percent, floor } => BudgetState::Ratio { percent, floor },
                BudgetKind::TokenBucket {
                    capacity,
                    refill,
                    period,
                    hold,
                } => BudgetState::Tokens(TokenBucket::new(capacity, refill, period, hold, now)),
            },
        };
        Ok(Self {
            window: CallWindow::new(width, now),
            budget,
        })
    }

    /// Whether a retry budget governs this dependency (a policy of more than one attempt needs one).
    pub const fn has_retry_budget(&self) -> bool {
        !matches!(self.budget, BudgetState::None)
    }

    /// The reservation hold of a token-bucket budget; `None` for a ratio budget or none.
    pub const fn budget_hold(&self) -> Option<Duration<HZ>> {
        match &self.budget {
            BudgetState::Tokens(bucket) => Some(Duration::<HZ>::from_ticks(bucket.hold_ticks())),
            BudgetState::None | BudgetState::Ratio { .. } => None,
        }
    }

    /// Calls, retries and failures over the window at `now`.
    pub fn counts(&mut self, now: Instant<HZ>) -> Counts {
        self.window.totals(now)
    }

    /// How many more retries the budget would allow at `now` if no other call were made: tokens
    /// available for a token bucket, retries left in the window for a ratio budget; `None` without
    /// a budget.
    pub fn retries_available(&mut self, now: Instant<HZ>) -> Option<u32> {
        match &mut self.budget {
            BudgetState::None => None,
            BudgetState::Tokens(bucket) => Some(bucket.available(now.as_ticks())),
            BudgetState::Ratio { percent, floor } => {
                let (percent, floor) = (*percent, *floor);
                Some(ratio_headroom(self.window.totals(now), percent, floor))
            }
        }
    }

    /// Whether the budget would allow a retry at `now`, without taking anything.
    pub(crate) fn retry_allowed(&mut self, now: Instant<HZ>) -> bool {
        match &mut self.budget {
            BudgetState::None => false,
            BudgetState::Tokens(bucket) => bucket.available(now.as_ticks()) > 0,
            BudgetState::Ratio { percent, floor } => {
                let (percent, floor) = (*percent, *floor);
                ratio_allows(self.window.totals(now), percent, floor)
            }
        }
    }

    /// Admits one attempt at `now`: a first attempt always, a retry if the budget allows, in which
    /// case the budget is charged. Counts the call in the window.
    pub(crate) fn admit(
        &mut self,
        now: Instant<HZ>,
        retry: bool,
    ) -> Result<Option<Reservation>, ()> {
        let reservation = if retry {
            match &mut self.budget {
                BudgetState::None => return Err(()),
                BudgetState::Tokens(bucket) => Some(bucket.reserve(now.as_ticks()).ok_or(())?),
                BudgetState::Ratio { percent, floor } => {
                    let (percent, floor) = (*percent, *floor);
                    if !ratio_allows(self.window.totals(now), percent, floor) {
                        return Err(());
                    }
                    None
                }
            }
        } else {
            None
        };
        self.window.record_call(now, retry);
        Ok(reservation)
    }

    /// Records the outcome of an attempt admitted earlier, settling its reservation.
    pub(crate) fn complete(
        &mut self,
        now: Instant<HZ>,
        reservation: Option<Reservation>,
        failed: bool,
    ) {
        if let (Some(r), BudgetState::Tokens(bucket)) = (reservation, &mut self.budget) {
            bucket.settle(r, now.as_ticks());
        }
        if failed {
            self.window.record_failure(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_state_sizes() {
        // The budget lives inside the dependency as this enum: the token bucket's 56 bytes and a
        // tag. Reported in the README.
        assert_eq!(core::mem::size_of::<TokenBucket>(), 56);
        assert_eq!(core::mem::size_of::<BudgetState>(), 64);
    }
}
