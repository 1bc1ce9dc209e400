//! Events for observers and tests, without allocation.
//!
//! Every decision the core makes is reported as an [`Event`] to an [`Observer`] the caller passes
//! in: the tokio adapter turns them into `tracing` events, the embassy adapter into `defmt` lines,
//! and tests record them into transcripts. An observer is called synchronously inside the core
//! call, so it must be quick; `()` ignores everything and costs nothing.

use crate::breaker::CircuitState;
use crate::classify::Verdict;
use crate::completion::{Disposition, Problem};
use crate::time::{Duration, Instant};

/// The caller's id for one operation, carried by every event and by the completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OperationId(pub u64);

/// Where a retry delay came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DelaySource<const HZ: u64> {
    /// The policy's backoff; `nominal` is the delay before jitter.
    Backoff {
        /// The un-jittered delay.
        nominal: Duration<HZ>,
    },
    /// The far side's stated wait (a lower bound; the delay may add the policy's spread on top).
    RetryAfter {
        /// The wait as stated.
        stated: Duration<HZ>,
    },
}

/// What happens after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AfterFailure {
    /// A retry is scheduled.
    Retry,
    /// The classifier called the failure not retryable: it is returned as it is.
    NotRetryable,
    /// Retryable, but the retry stage stopped here.
    Stop(Problem),
}

/// One thing the core decided. New protections bring new events, so the enum is `non_exhaustive`:
/// an observer matches what it records and ignores the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Event<const HZ: u64> {
    /// Attempt `attempt` (1 for the first) was handed to the caller to run.
    AttemptDispatched {
        /// The operation.
        operation: OperationId,
        /// Its attempt number.
        attempt: u8,
        /// The attempt's timeout.
        timeout: Duration<HZ>,
        /// When.
        at: Instant<HZ>,
    },
    /// The attempt succeeded.
    AttemptSucceeded {
        /// The operation.
        operation: OperationId,
        /// Its attempt number.
        attempt: u8,
        /// When it was reported.
        at: Instant<HZ>,
    },
    /// The attempt failed; `verdict` is the classifier's, `then` says whether it is retried and if
    /// not, why.
    AttemptFailed {
        /// The operation.
        operation: OperationId,
        /// Its attempt number.
        attempt: u8,
        /// When it was reported.
        at: Instant<HZ>,
        /// The classifier's verdict.
        verdict: Verdict<HZ>,
        /// What happens next.
        then: AfterFailure,
    },
    /// Attempt `attempt` will be dispatched no sooner than `until`.
    RetryScheduled {
        /// The operation.
        operation: OperationId,
        /// The attempt number of the retry.
        attempt: u8,
        /// The delay.
        delay: Duration<HZ>,
        /// `at + delay`.
        until: Instant<HZ>,
        /// Backoff or Retry-After.
        source: DelaySource<HZ>,
    },
    /// A protection or the retry budget refused attempt `attempt`.
    Refused {
        /// The operation.
        operation: OperationId,
        /// The attempt number that was refused.
        attempt: u8,
        /// When.
        at: Instant<HZ>,
        /// Which protection, by its code.
        problem: Problem,
        /// When to try again, where known.
        retry_at: Option<Instant<HZ>>,
    },
    /// Attempt `attempt` reserved a rate-limit unit due at `until` and waits for it.
    WaitingForRateLimit {
        /// The operation.
        operation: OperationId,
        /// The attempt number.
        attempt: u8,
        /// When the unit is due.
        until: Instant<HZ>,
    },
    /// Attempt `attempt` would break the duty cycle now: its airtime was reserved from `until`,
    /// and it waits until then.
    WaitingForAirtime {
        /// The operation.
        operation: OperationId,
        /// The attempt number.
        attempt: u8,
        /// When the attempt may go.
        until: Instant<HZ>,
    },
    /// Attempt `attempt` found the bulkhead full and waits in its queue for a slot, until `until`
    /// at the latest: the adapter wakes it sooner when a slot frees.
    WaitingForSlot {
        /// The operation.
        operation: OperationId,
        /// The attempt number.
        attempt: u8,
        /// The end of its wait: it is refused with `bulkhead_full` if no slot has freed by then.
        until: Instant<HZ>,
    },
    /// The dependency's circuit changed state, in a call made by `operation`.
    CircuitChanged {
        /// The operation whose call caused the change.
        operation: OperationId,
        /// When.
        at: Instant<HZ>,
        /// The new state.
        state: CircuitState,
    },
    /// An attempt of `operation` moved the bulkhead's adaptive limit (`AdaptiveLimit`) from `from`
    /// slots to `to`: down on a sign of overload (a transient failure, or an attempt that took the
    /// limit's `slow` or longer), up by one when enough fast successes came back. Made only with
    /// the `bulkhead-adaptive` feature.
    BulkheadLimitChanged {
        /// The operation whose attempt moved the limit.
        operation: OperationId,
        /// When.
        at: Instant<HZ>,
        /// The limit before, in slots.
        from: u16,
        /// The limit now.
        to: u16,
    },
    /// A Retry-After reported by `operation` extended the dependency's cooldown to `until`.
    CooldownExtended {
        /// The operation that reported the wait.
        operation: OperationId,
        /// When.
        at: Instant<HZ>,
        /// The new end of the cooldown.
        until: Instant<HZ>,
    },
    /// The operation ended.
    Completed {
        /// The operation.
        operation: OperationId,
        /// How.
        disposition: Disposition,
        /// Why, when the retry stage stopped it.
        problem: Option<Problem>,
        /// Attempts dispatched.
        dispatched: u8,
        /// When.
        at: Instant<HZ>,
    },
}

impl<const HZ: u64> Event<HZ> {
    /// The operation the event belongs to (for a dependency's state change: the operation whose
    /// call caused it).
    pub const fn operation(&self) -> OperationId {
        match *self {
            Self::AttemptDispatched { operation, .. }
            | Self::AttemptSucceeded { operation, .. }
            | Self::AttemptFailed { operation, .. }
            | Self::RetryScheduled { operation, .. }
            | Self::Refused { operation, .. }
            | Self::WaitingForRateLimit { operation, .. }
            | Self::WaitingForAirtime { operation, .. }
            | Self::WaitingForSlot { operation, .. }
            | Self::CircuitChanged { operation, .. }
            | Self::BulkheadLimitChanged { operation, .. }
            | Self::CooldownExtended { operation, .. }
            | Self::Completed { operation, .. } => operation,
        }
    }
}

/// The most events one call into an [`Operation`](crate::Operation) makes: `on_failure`'s
/// failure, a circuit change, a change of the bulkhead's adaptive limit, a cooldown extension, the
/// refusal of the retry, and the end (one fewer without the `bulkhead-adaptive` feature). An
/// observer that keeps events to act on after the call (outside a lock, say) needs room for this
/// many per call. The property tests and the fuzz target's scripts check the bound on every call
/// they make, and a test reaches it.
pub const MAX_EVENTS_PER_CALL: usize = 6;

/// Receives the core's events.
///
/// Implemented for `()` (no observer) and for any `FnMut(&Event<HZ>)`. A transcript of one
/// operation whose retry waits for its backoff and then for the rate limit:
///
/// ```
/// use relent_core::{
///     Action, Context, Dependency, DependencyConfig, Duration, Event, Instant, Jitter, Operation, RateLimit,
///     ReplaySafety, RetryBudget, RetryPolicy, Verdict,
/// };
/// type D = Duration<1_000>; // ticks of 1 ms
///
/// let policy = RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2)).jitter(Jitter::None).build()?;
/// // One attempt a second; an attempt may wait up to 1 s for its unit rather than be refused.
/// let config = DependencyConfig::new(D::from_secs(10))
///     .budget(RetryBudget::ratio(10, 5)?)
///     .rate_limit(RateLimit::new(1, D::from_secs(1)).max_wait(D::from_secs(1)));
/// let mut now = Instant::<1_000>::from_ticks(0);
/// let mut ledger = Dependency::<1_000, 10>::new(&config, now)?;
/// # struct Rng(u64);
/// # impl relent_core::rand_core::RngCore for Rng {
/// #     fn next_u32(&mut self) -> u32 { self.next_u64() as u32 }
/// #     fn next_u64(&mut self) -> u64 { self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1); self.0 }
/// #     fn fill_bytes(&mut self, d: &mut [u8]) { d.fill(0) }
/// # }
/// # let mut rng = Rng(1);
///
/// let mut transcript = Vec::new();
/// let mut observer = |event: &Event<1_000>| {
///     transcript.push(match *event {
///         Event::AttemptDispatched { attempt, at, .. } => format!("{at}: attempt {attempt} dispatched"),
///         Event::AttemptSucceeded { attempt, at, .. } => format!("{at}: attempt {attempt} succeeded"),
///         Event::AttemptFailed { attempt, at, then, .. } => format!("{at}: attempt {attempt} failed, then {then:?}"),
///         Event::RetryScheduled { attempt, until, .. } => format!("attempt {attempt} not before {until}"),
///         Event::WaitingForRateLimit { attempt, until, .. } => format!("attempt {attempt} waits for a unit at {until}"),
///         Event::Completed { disposition, at, .. } => format!("{at}: completed, {}", disposition.as_str()),
///         other => format!("{other:?}"), // Event is non_exhaustive: keep a fallback arm
///     })
/// };
///
/// let context = Context::new(D::from_secs(10), ReplaySafety::replayable_read(D::from_secs(60)));
/// let mut op = Operation::<1_000, Verdict<1_000>>::start(&policy, &config, context, now)?;
/// loop {
///     match op.poll(now, &mut ledger, &mut observer) {
///         Action::Dispatch(attempt) => {
///             now = Instant::from_ticks(now.as_ticks() + 20); // each attempt takes 20 ms
///             if attempt.number() == 1 {
///                 op.on_failure(attempt, now, &mut ledger, &mut rng, Verdict::Retryable, &mut observer);
///             } else {
///                 op.on_success(attempt, now, &mut ledger, &mut observer);
///             }
///         }
///         Action::Wait { until } => now = until,
///         Action::Done => break,
///     }
/// }
/// assert_eq!(transcript, [
///     "0 ms: attempt 1 dispatched",
///     "20 ms: attempt 1 failed, then Retry",
///     "attempt 2 not before 120 ms",
///     "attempt 2 waits for a unit at 1000 ms",
///     "1000 ms: attempt 2 dispatched",
///     "1020 ms: attempt 2 succeeded",
///     "1020 ms: completed, succeeded",
/// ]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Observer<const HZ: u64> {
    /// Called once per event, in order, inside the core call that made the decision. At most
    /// [`MAX_EVENTS_PER_CALL`] times per call.
    fn on_event(&mut self, event: &Event<HZ>);
}

impl<const HZ: u64> Observer<HZ> for () {
    #[inline]
    fn on_event(&mut self, _event: &Event<HZ>) {}
}

impl<const HZ: u64, F: FnMut(&Event<HZ>)> Observer<HZ> for F {
    #[inline]
    fn on_event(&mut self, event: &Event<HZ>) {
        self(event);
    }
}
