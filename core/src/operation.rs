//! One operation's state machine: what to do next, and what a reported outcome means.
//!
//! Call-order contract (quinn-proto style):
//!
//! 1. [`Operation::start`] with the shared policy, a [`Context`] (deadline, replay safety, id), the
//!    dependency and `now`. Configuration that cannot run is refused here, before anything is
//!    dispatched.
//! 2. Loop on [`Operation::poll`] with the current `now`:
//!    - [`Action::Dispatch`]: run the attempt under [`Attempt::timeout`], then report it with
//!      [`Operation::on_success`] or [`Operation::on_failure`], handing the [`Attempt`] back (an
//!      attempt that timed out is a failure: report the caller's own timeout error). A caller that
//!      would rather not hold the attempt while it runs gets it back from [`Operation::attempt`].
//!    - [`Action::Wait`]: sleep until `until`, holding nothing (no lock, no slot), then poll again.
//!      Waking late is fine; waking early just yields the same `Wait`, except for an operation
//!      waiting in the bulkhead's queue ([`Operation::waits_for_slot`]), which the adapter polls
//!      sooner when [`Dependency::slot_for_waiting`] says a slot is free, and which then takes it
//!      (after a [reconfiguration](Dependency::reconfigure), if [`Operation::slot_free`] says so
//!      under the configuration it started with).
//!    - [`Action::Done`]: take the result with [`Operation::take_completion`].
//!
//! `now` must not go backwards; an earlier `now` is read as the latest one seen. Every rule lives
//! here, not in adapters: an adapter that needs an `if` about retries has found a bug in the core.
//!
//! The rules, in the order they are applied after a retryable failure (a non-retryable one ends
//! the operation at once, seed 003):
//!
//! 1. `attempts_exhausted` once the policy's attempts are spent;
//!    - an operation stated [`ReplaySafety::UntilArrived`] ends with `may_have_arrived` after a
//!      failure not judged [`Verdict::NeverArrived`]: that attempt may have reached the far side;
//! 2. a server-stated wait is a lower bound, never clamped down (seeds 000 and 003): longer than
//!    the policy's maximum delay, or not fitting before the deadline, it defers the operation with
//!    the wait as a hint (`retry_after_exceeds_maximum_delay`, `retry_after_exceeds_deadline`)
//!    instead of sleeping;
//! 3. otherwise the backoff delay, which must leave the policy's minimum remaining time (at least
//!    one tick) before the deadline (`retry_delay_exceeds_deadline`, seed 003);
//! 4. the retry must start while the replay-safety statement holds (`replay_statement_expired`);
//! 5. the dependency's budget must allow it (`retry_budget_exhausted`); it is charged only when
//!    the retry is dispatched, so a retry that is never made costs nothing.
//!
//! At dispatch, each attempt's timeout is `min(ceiling, time left before the deadline)` (seed 000:
//! the third attempt is cut to fit), and no attempt is dispatched once the deadline has passed. Every
//! attempt, the first included, then passes the dependency's protections in their fixed order
//! (isolation, cooldown, circuit, client throttle, bulkhead, rate limit, duty cycle, retry budget:
//! see [`crate::Dependency`]);
//! a refusal ends the operation with the protection's code, keeping the last failure. A rate unit
//! due soon enough (within the limit's `max_wait`) and airtime free soon enough (within the
//! policy's maximum delay), both before the deadline, are reserved and waited for instead; so is a
//! bulkhead slot, if the bulkhead has a queue, for at most its maximum wait.
//!
//! What an attempt holds (a bulkhead slot, a half-open probe, a budget reservation) is recorded in
//! the operation as well as in the [`Attempt`], so it is given back when the attempt is reported,
//! when the deadline passes with the attempt never reported, or when the caller cancels the
//! operation with [`Operation::abandon`]. An adapter whose future is dropped calls `abandon`. So is
//! a rate unit and airtime reserved for an attempt the operation waits to send, when it ends
//! without sending it (see [`crate::Dependency`]).

use rand_core::RngCore;

use crate::classify::{Classify, Verdict};
use crate::completion::{Completion, Disposition, Problem, Summary};
use crate::dependency::{
    Admission, BULKHEAD, Changes, Dependency, DependencyConfig, Ending, Request, Ticket, WaitFor,
};
use crate::error::StartError;
use crate::event::{AfterFailure, DelaySource, Event, Observer, OperationId};
use crate::policy::{RetryPolicy, check_hold};
use crate::safety::ReplaySafety;
use crate::time::{self, Duration, Instant, MaybeTicks};

/// What the caller states about one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Context<const HZ: u64> {
    deadline: Duration<HZ>,
    safety: ReplaySafety<HZ>,
    id: OperationId,
    airtime: Duration<HZ>,
    #[cfg(feature = "criticality")]
    criticality: crate::Criticality,
}

impl<const HZ: u64> Context<HZ> {
    /// An operation that must end within `deadline` of its start (all attempts and waits
    /// together), with the caller's replay-safety statement.
    pub const fn new(deadline: Duration<HZ>, safety: ReplaySafety<HZ>) -> Self {
        Self {
            deadline,
            safety,
            id: OperationId(0),
            airtime: Duration::<HZ>::from_ticks(0),
            #[cfg(feature = "criticality")]
            criticality: crate::Criticality::Critical,
        }
    }

    /// Sets how much the operation matters when the dependency's limits run short: a
    /// [`Sheddable`](crate::Criticality::Sheddable) one may not use the dependency's critical
    /// reserve ([`DependencyConfig::critical_reserve`]) of its limits, and so is
    /// refused before a critical one would be. [`Critical`](crate::Criticality::Critical) unless set.
    #[cfg(feature = "criticality")]
    #[cfg_attr(docsrs, doc(cfg(feature = "criticality")))]
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn criticality(mut self, criticality: crate::Criticality) -> Self {
        self.criticality = criticality;
        self
    }

    /// How much the operation matters when limits run short (see [`Context::criticality`]).
    #[cfg(feature = "criticality")]
    #[cfg_attr(docsrs, doc(cfg(feature = "criticality")))]
    pub const fn operation_criticality(&self) -> crate::Criticality {
        self.criticality
    }

    /// Sets what each attempt costs against the dependency's duty cycle: the frame's time on air,
    /// computed by the caller from its length and data rate. Required when the dependency has a
    /// duty cycle (a transmission that costs nothing would never be limited); ignored otherwise.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn airtime(mut self, airtime: Duration<HZ>) -> Self {
        self.airtime = airtime;
        self
    }

    /// What each attempt costs against a duty cycle.
    pub const fn attempt_airtime(&self) -> Duration<HZ> {
        self.airtime
    }

    /// Sets the id carried by every event and by the completion.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn id(mut self, id: u64) -> Self {
        self.id = OperationId(id);
        self
    }

    /// The operation's id (0 unless set with [`Context::id`]).
    pub const fn operation_id(&self) -> OperationId {
        self.id
    }

    /// The overall deadline, from the operation's start.
    pub const fn deadline(&self) -> Duration<HZ> {
        self.deadline
    }

    /// The same context with its deadline cut to `at_most` when that is sooner, and as it is
    /// otherwise: for an operation that must also end by a limit of its caller's (an adapter cuts
    /// an operation started inside another's attempt to what is left of that attempt). Everything
    /// else the context states is kept.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn deadline_within(mut self, at_most: Duration<HZ>) -> Self {
        if at_most.as_ticks() < self.deadline.as_ticks() {
            self.deadline = at_most;
        }
        self
    }

    /// The replay-safety statement.
    pub const fn safety(&self) -> ReplaySafety<HZ> {
        self.safety
    }
}

/// One dispatched attempt: run it, then hand this back with its outcome. Not `Clone`: each
/// attempt is reported once, and an attempt that was never reported is visible as a value that was
/// dropped. A caller that would rather not hold it while the attempt runs gets it back from
/// [`Operation::attempt`].
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use = "an attempt must be run and reported with on_success or on_failure"]
pub struct Attempt<const HZ: u64> {
    operation: OperationId,
    number: u8,
    started: Instant<HZ>,
    timeout: Duration<HZ>,
    deadline: Instant<HZ>,
}

impl<const HZ: u64> Attempt<HZ> {
    /// 1 for the first attempt.
    pub const fn number(&self) -> u8 {
        self.number
    }
    /// How long this attempt may run: `min(policy ceiling, time left before the deadline)`.
    pub const fn timeout(&self) -> Duration<HZ> {
        self.timeout
    }
    /// When it was dispatched.
    pub const fn started(&self) -> Instant<HZ> {
        self.started
    }
    /// When its timeout expires: `started + timeout`.
    pub const fn expires(&self) -> Instant<HZ> {
        time::add(self.started, self.timeout)
    }
    /// The operation's overall deadline, for callers that set their own socket timeouts.
    pub const fn deadline(&self) -> Instant<HZ> {
        self.deadline
    }
    /// Whether this is a retry (attempt 2 or later).
    pub const fn is_retry(&self) -> bool {
        self.number > 1
    }
}

/// What the caller should do next.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use]
pub enum Action<const HZ: u64> {
    /// Run this attempt, then report it.
    Dispatch(Attempt<HZ>),
    /// Nothing to do before `until`; hold nothing while waiting.
    Wait {
        /// The instant to poll again.
        until: Instant<HZ>,
    },
    /// The operation ended: take its completion.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Phase<const HZ: u64> {
    /// `reserved`: a rate unit and airtime were reserved for the next attempt while it waited.
    /// `queued`: it holds a place in the bulkhead's queue, and `not_before` is the end of that
    /// wait, not a time before which it may not go. An array of one flag with the bulkhead compiled
    /// in and of none without, so that a build without it neither stores nor reads the flag.
    Ready {
        not_before: Instant<HZ>,
        reserved: bool,
        queued: Queued,
    },
    /// What the attempt out holds, and when it was dispatched.
    InFlight {
        ticket: Ticket,
        since: Instant<HZ>,
    },
    Done {
        disposition: Disposition,
        problem: Option<Problem>,
        at: Instant<HZ>,
    },
    Taken,
}

/// Whether an operation waits in the bulkhead's queue: see `Phase::Ready`.
type Queued = [bool; BULKHEAD];
const NOT_QUEUED: Queued = [false; BULKHEAD];

const fn is_queued(queued: Queued) -> bool {
    matches!(queued.first(), Some(true))
}

/// What to do after a failure, decided before anything is emitted.
enum Decision<const HZ: u64> {
    Retry {
        delay: Duration<HZ>,
        source: DelaySource<HZ>,
    },
    NotRetryable,
    /// `refused`: a protection refused the retry (reported as a refusal event), with `retry_at`
    /// when known.
    Stop {
        disposition: Disposition,
        problem: Problem,
        refused: bool,
        retry_at: Option<Instant<HZ>>,
    },
}

/// What a hedge of an operation needs from it: the operation's deadline, when its replay-safety
/// statement stops holding, and its airtime. Taken once, right after the start, with
/// [`Operation::hedge_plan`]; a hedge is started from it with [`Operation::start_hedge`] while the
/// operation is still running.
///
/// A hedged request (Dean and Barroso, "The Tail at Scale") repeats a call that is taking longer
/// than most do, without waiting for it to fail, and takes whichever answer comes first. It is a
/// repeat, so it needs what a retry needs (seed 003): a policy that allows more than one attempt
/// (and so a replay-safety statement and a retry budget, which `start` requires of it), a read's
/// statement (a provider's idempotency key protects a repeat, not a copy in flight:
/// [`ReplaySafety::may_hedge`]), a statement that still holds when the hedge goes out, the budget's consent (a hedge is paid for as a retry,
/// so an outage cannot double the load through hedges either), and time left before the same
/// deadline.
#[cfg(feature = "hedge")]
#[cfg_attr(docsrs, doc(cfg(feature = "hedge")))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HedgePlan<const HZ: u64> {
    deadline: Instant<HZ>,
    safe_until: Instant<HZ>,
    #[cfg(feature = "duty-cycle")]
    airtime: Duration<HZ>,
    /// The operation's, so a hedge of sheddable work is sheddable too.
    #[cfg(feature = "criticality")]
    held_back: u8,
    #[cfg(feature = "criticality")]
    criticality: crate::Criticality,
}

#[cfg(feature = "hedge")]
impl<const HZ: u64> HedgePlan<HZ> {
    /// The deadline a hedge ends by: the operation's.
    pub const fn deadline(&self) -> Instant<HZ> {
        self.deadline
    }

    /// Moves the plan's instants `by` ticks earlier, as [`Operation::rebase`] moves the operation's.
    pub fn rebase(&mut self, by: Duration<HZ>) {
        let by = by.as_ticks();
        self.deadline = Instant::<HZ>::from_ticks(time::earlier(self.deadline.as_ticks(), by));
        self.safe_until = Instant::<HZ>::from_ticks(time::earlier(self.safe_until.as_ticks(), by));
    }
}

/// What an operation is to hedging: one that may not be hedged (its statement is not a read's),
/// one that may, or a hedge itself.
#[cfg(feature = "hedge")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Hedging {
    Never,
    Read,
    Hedge,
}

/// One call's state machine, borrowing the shared policy and the dependency's configuration. `E`
/// is the caller's failure type.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Operation<'p, const HZ: u64, E> {
    policy: &'p RetryPolicy<HZ>,
    config: &'p DependencyConfig<HZ>,
    id: OperationId,
    /// When a repeat stops being safe: the start of time for an unsafe operation, which refuses a
    /// retry at any instant just as an expired statement does.
    safe_until: Instant<HZ>,
    started: Instant<HZ>,
    deadline: Instant<HZ>,
    latest: Instant<HZ>,
    /// What each attempt costs against a duty cycle (only with the duty cycle compiled in).
    #[cfg(feature = "duty-cycle")]
    airtime: Duration<HZ>,
    phase: Phase<HZ>,
    /// Attempts dispatched so far; for a hedge, one more (its attempt is a repeat, numbered 2).
    dispatched: u8,
    /// The context stated [`ReplaySafety::UntilArrived`]: only a failure that never arrived is
    /// retried. (`safe_until` is the end of time for it.) Only with the statement compiled in.
    #[cfg(feature = "until-arrived")]
    until_arrived: bool,
    /// The share of each limit, in percent, the operation may not use: the dependency's critical
    /// reserve for sheddable work, 0 for critical work. Only with criticality compiled in.
    #[cfg(feature = "criticality")]
    held_back: u8,
    /// The context's criticality, for the adapters' logs ([`Operation::criticality`]).
    #[cfg(feature = "criticality")]
    criticality: crate::Criticality,
    /// What the operation is to hedging. Only with hedging compiled in.
    #[cfg(feature = "hedge")]
    hedging: Hedging,
    previous_delay: Duration<HZ>,
    waited: Duration<HZ>,
    last_failure: Option<E>,
    /// The wait the far side stated on the last failure, if any.
    retry_after: MaybeTicks,
    /// For a deferred or rejected operation: the earliest instant to try again, where known.
    not_before_hint: MaybeTicks,
}

impl<'p, const HZ: u64, E> Operation<'p, HZ, E> {
    /// Starts an operation at `now` against the dependency configured by `config`, or refuses it
    /// before anything is dispatched: a policy that allows more than one attempt needs a retry
    /// budget on the dependency that fits the policy, and a replay-safety statement in the context
    /// (seed 003).
    #[inline]
    pub fn start(
        policy: &'p RetryPolicy<HZ>,
        config: &'p DependencyConfig<HZ>,
        context: Context<HZ>,
        now: Instant<HZ>,
    ) -> Result<Self, StartError> {
        if !time::fits(context.deadline.as_ticks()) {
            return Err(StartError::DeadlineTooLong { deadline: context.deadline.as_ticks() });
        }
        let max_attempts = policy.max_attempts();
        if max_attempts > 1 {
            let Some(budget) = config.retry_budget() else {
                return Err(StartError::RetryWithoutBudget { max_attempts });
            };
            if let Some(hold) = budget.hold() {
                // The longest attempt this operation can dispatch.
                let ceiling = policy.attempt_timeout().unwrap_or(context.deadline);
                let longest = time::min(ceiling, context.deadline);
                check_hold::<HZ>(hold, longest).map_err(StartError::Budget)?;
            }
            if let ReplaySafety::Unsafe = context.safety {
                return Err(StartError::UnsafeWithRetries { max_attempts });
            }
        }
        if let Some(duty) = config.duty_cycle_on() {
            let (airtime, allowance) = (context.airtime.as_ticks(), duty.airtime().as_ticks());
            if airtime == 0 {
                return Err(StartError::NoAirtime);
            }
            if airtime > allowance {
                return Err(StartError::AirtimeAboveDutyCycle { airtime, allowance });
            }
        }
        Ok(Self {
            policy,
            config,
            id: context.id,
            safe_until: match context.safety {
                // Saturating at the end of time (a statement that long holds for good) is kept by
                // `rebase`, and the deadline ends the operation first anyway.
                ReplaySafety::ReplayableRead { valid_for }
                | ReplaySafety::ProviderIdempotentMutation { valid_for } => time::add(now, valid_for),
                #[cfg(feature = "until-arrived")]
                ReplaySafety::UntilArrived => Instant::<HZ>::from_ticks(time::Ticks::MAX),
                ReplaySafety::Unsafe => Instant::<HZ>::from_ticks(0),
            },
            started: now,
            deadline: time::add(now, context.deadline),
            latest: now,
            #[cfg(feature = "duty-cycle")]
            airtime: context.airtime,
            phase: Phase::Ready { not_before: now, reserved: false, queued: NOT_QUEUED },
            dispatched: 0,
            #[cfg(feature = "until-arrived")]
            until_arrived: matches!(context.safety, ReplaySafety::UntilArrived),
            #[cfg(feature = "criticality")]
            held_back: match (context.criticality, config.critical_reserve_percent()) {
                (crate::Criticality::Sheddable, Some(reserve)) => reserve,
                _ => 0,
            },
            #[cfg(feature = "criticality")]
            criticality: context.criticality,
            #[cfg(feature = "hedge")]
            hedging: if context.safety.may_hedge() { Hedging::Read } else { Hedging::Never },
            previous_delay: policy.base_delay(),
            waited: Duration::<HZ>::from_ticks(0),
            last_failure: None,
            retry_after: MaybeTicks::NONE,
            not_before_hint: MaybeTicks::NONE,
        })
    }

    /// How much the operation matters when limits run short, as its context stated
    /// ([`Context::criticality`]; a hedge's is the operation's it hedges): for an adapter's logs,
    /// which need not raise a refusal of work stated sheddable to a warning.
    #[cfg(feature = "criticality")]
    #[cfg_attr(docsrs, doc(cfg(feature = "criticality")))]
    pub const fn criticality(&self) -> crate::Criticality {
        self.criticality
    }

    /// The share of each limit, in percent, the operation may not use (0 without criticality).
    #[inline(always)]
    const fn held_back(&self) -> u8 {
        #[cfg(feature = "criticality")]
        return self.held_back;
        #[cfg(not(feature = "criticality"))]
        return 0;
    }

    /// Whether this operation is a hedge (never without hedging compiled in).
    #[inline(always)]
    const fn hedged(&self) -> bool {
        #[cfg(feature = "hedge")]
        return matches!(self.hedging, Hedging::Hedge);
        #[cfg(not(feature = "hedge"))]
        return false;
    }

    /// Restarts the operation's clock `by` ticks later, as [`Dependency::rebase`] does for its
    /// dependency (and with the same `by`, before the operation's next call). A completion not yet
    /// taken is rebased too. Only an operation older than `by` ticks (which has outlived its
    /// deadline, at most [`crate::MAX_SPAN`]) loses anything: its start becomes tick 0, and its
    /// completion reports less time elapsed than there was.
    pub fn rebase(&mut self, by: Duration<HZ>) {
        let by = by.as_ticks();
        let earlier = |t: Instant<HZ>| Instant::<HZ>::from_ticks(time::earlier(t.as_ticks(), by));
        self.safe_until = earlier(self.safe_until);
        self.started = earlier(self.started);
        self.deadline = earlier(self.deadline);
        self.latest = earlier(self.latest);
        match &mut self.phase {
            Phase::Ready { not_before: t, .. }
            | Phase::InFlight { since: t, .. }
            | Phase::Done { at: t, .. } => {
                *t = earlier(*t);
            }
            Phase::Taken => {}
        }
        if let Some(t) = self.not_before_hint.get() {
            self.not_before_hint = MaybeTicks::new(Some(time::earlier(t, by)));
        }
    }

    /// The operation's id.
    pub const fn id(&self) -> OperationId {
        self.id
    }

    /// Gives the operation `id` if its context set none (id 0), and says whether it did. For an
    /// adapter that numbers a dependency's operations: call it under the lock of the operation's
    /// first poll, before that poll, so that every event and the completion carry the id, and
    /// keep the count beside the state that lock guards. relent-tokio does: its atomic counter
    /// cost a locked read-modify-write per operation, 7 to 11 ns on the development machine, where
    /// the count under the lock costs nothing the lock does not already pay.
    pub fn assign_id(&mut self, id: u64) -> bool {
        let unset = self.id.0 == 0;
        if unset {
            self.id = OperationId(id);
        }
        unset
    }

    /// When the operation started: the instant given to [`Operation::start`] (moved by
    /// [`Operation::rebase`]).
    pub const fn started(&self) -> Instant<HZ> {
        self.started
    }
    /// The overall deadline.
    pub const fn deadline(&self) -> Instant<HZ> {
        self.deadline
    }
    /// Attempts dispatched so far (a hedge's one attempt counts once, although it is numbered 2).
    pub const fn dispatched(&self) -> u8 {
        self.dispatched.saturating_sub(self.hedged() as u8)
    }
    /// Whether the operation has ended.
    pub const fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done { .. } | Phase::Taken)
    }
    /// Whether the operation waits in the bulkhead's queue for a slot. Its [`Action::Wait`]'s
    /// instant is then the end of that wait: poll it sooner when a slot frees (see
    /// [`Dependency::slot_for_waiting`]), and it takes the slot.
    pub const fn waits_for_slot(&self) -> bool {
        matches!(self.phase, Phase::Ready { queued, .. } if is_queued(queued))
    }

    /// Whether this operation waits in the bulkhead's queue and a slot is free for it:
    /// [`Dependency::slot_for_waiting`] under the configuration it started with, which it takes
    /// the slot under. The two differ only after a [reconfiguration](Dependency::reconfigure) to
    /// more slots: an operation that started under fewer finds none where the configuration in
    /// force sees one for the operations started under it. An adapter that wakes every waiting
    /// operation when `slot_for_waiting` says a slot is free checks this before polling one again,
    /// so that one that cannot take the slot waits on, rather than polling and being woken again
    /// in a loop.
    pub fn slot_free<const N: usize, const L: usize>(&self, dependency: &Dependency<HZ, N, L>) -> bool {
        self.waits_for_slot() && dependency.slot_for_waiting(self.config)
    }

    /// What each attempt costs against a duty cycle, in ticks (none without one compiled in).
    #[inline(always)]
    /// Gives back a rate unit and airtime reserved for `at` (`reserved`) for an attempt that will
    /// not go out. Nothing to give back where neither limit is compiled in.
    fn give_back_reserved<const N: usize, const L: usize>(
        &self,
        dependency: &mut Dependency<HZ, N, L>,
        at: Instant<HZ>,
        reserved: bool,
    ) {
        if reserved && cfg!(any(feature = "rate-limit", feature = "duty-cycle")) {
            dependency.give_back_reserved(self.config, at.as_ticks(), self.airtime());
        }
    }

    fn airtime(&self) -> crate::time::Ticks {
        #[cfg(feature = "duty-cycle")]
        return self.airtime.as_ticks();
        #[cfg(not(feature = "duty-cycle"))]
        return 0;
    }

    fn clamp(&mut self, now: Instant<HZ>) -> Instant<HZ> {
        self.latest = time::latest(self.latest, now);
        self.latest
    }

    /// What to do at `now`. See the module doc for the contract.
    pub fn poll<const N: usize, const L: usize, O: Observer<HZ> + ?Sized>(
        &mut self,
        now: Instant<HZ>,
        dependency: &mut Dependency<HZ, N, L>,
        observer: &mut O,
    ) -> Action<HZ> {
        let before = self.latest;
        let now = self.clamp(now);
        let (not_before, reserved, queued) = match self.phase {
            Phase::Done { .. } | Phase::Taken => return Action::Done,
            Phase::InFlight { ticket, since } => {
                // An attempt is out and was never reported. It cannot outlive the deadline.
                if now < self.deadline {
                    return Action::Wait { until: self.deadline };
                }
                let changes =
                    dependency.complete(self.config, now, ticket, Ending::Abandoned, time::since(now, since));
                self.announce(now, changes, observer);
                self.finish(now, Disposition::Failed, Some(Problem::DeadlineExceeded), observer);
                return Action::Done;
            }
            Phase::Ready { not_before, reserved, queued } => (not_before, reserved, queued),
        };
        // A waiting operation asks for its slot again at each poll (the adapter polls it when one
        // frees), and counts the time since its last poll as waited.
        let queued = is_queued(queued);
        if queued {
            self.waited = time::sum(self.waited, time::since(now, before));
        } else if now < not_before {
            return Action::Wait { until: not_before };
        }
        let remaining = time::since(self.deadline, now);
        let retry = self.dispatched > 0;
        // One tick at least either way (`RetryPolicyBuilder::build` raises `min_remaining` to it).
        let needed = if retry { self.policy.min_remaining().as_ticks() } else { 1 };
        let stop = if remaining.as_ticks() < needed {
            Some(Problem::DeadlineExceeded)
        } else if retry && now >= self.safe_until {
            Some(Problem::ReplayStatementExpired)
        } else {
            None
        };
        if let Some(problem) = stop {
            if queued {
                dependency.leave_queue();
            }
            self.give_back_reserved(dependency, not_before, reserved);
            self.finish(now, Disposition::Failed, Some(problem), observer);
            return Action::Done;
        }
        let number = self.dispatched.saturating_add(1);
        let latest_start = self.deadline.as_ticks().saturating_sub(needed);
        let mut changes = Changes::default();
        let request = Request {
            retry,
            reserved,
            queued,
            queue_until: not_before.as_ticks(),
            latest_start,
            airtime: self.airtime(),
            airtime_wait: self.policy.max_delay().as_ticks(),
            held_back: self.held_back(),
        };
        let admission = dependency.admit(self.config, now, request, &mut changes);
        self.announce(now, changes, observer);
        let ticket = match admission {
            Admission::Go(ticket) => ticket,
            Admission::Wait(at, wait_for) => {
                let until = Instant::<HZ>::from_ticks(at);
                self.waited = time::sum(self.waited, time::since(until, now));
                self.phase = Phase::Ready { not_before: until, reserved: true, queued: NOT_QUEUED };
                let (operation, attempt) = (self.id, number);
                observer.on_event(&match wait_for {
                    WaitFor::RateUnit => Event::WaitingForRateLimit { operation, attempt, until },
                    WaitFor::Airtime => Event::WaitingForAirtime { operation, attempt, until },
                });
                return Action::Wait { until };
            }
            Admission::Queued(at) => {
                let until = Instant::<HZ>::from_ticks(at);
                // A rate unit or airtime reserved for this tick is given up (and given back where
                // nothing was taken since): the attempt will not go out at it, and the limits hold
                // for the ticks attempts go out at. It takes them afresh when it gets its slot.
                self.give_back_reserved(dependency, not_before, reserved);
                self.phase = Phase::Ready { not_before: until, reserved: false, queued: [true; BULKHEAD] };
                if !queued {
                    observer.on_event(&Event::WaitingForSlot { operation: self.id, attempt: number, until });
                }
                return Action::Wait { until };
            }
            Admission::Refused { problem, until } => {
                let retry_at = until.map(|t| Instant::<HZ>::from_ticks(t.get()));
                observer.on_event(&Event::Refused {
                    operation: self.id,
                    attempt: number,
                    at: now,
                    problem,
                    retry_at,
                });
                self.not_before_hint = MaybeTicks::new(retry_at.map(|t| t.as_ticks()));
                let disposition = match problem {
                    Problem::RetryBudgetExhausted => Disposition::Failed,
                    Problem::CooldownActive | Problem::DutyCycleExceeded => Disposition::Deferred,
                    _ => Disposition::Rejected,
                };
                self.finish(now, disposition, Some(problem), observer);
                return Action::Done;
            }
        };
        self.dispatched = number;
        self.phase = Phase::InFlight { ticket, since: now };
        let attempt = self.attempt_from(now);
        observer.on_event(&Event::AttemptDispatched {
            operation: self.id,
            attempt: number,
            timeout: attempt.timeout,
            at: now,
        });
        Action::Dispatch(attempt)
    }

    /// The attempt in flight, if one is: the same value [`Operation::poll`] dispatched (with its
    /// instants rebased if the operation was), for a caller that did not keep it. An adapter uses
    /// this to hold nothing of the attempt while it runs (firmware RAM, a server's future size).
    /// Reporting it is reporting that attempt: the first report counts, and any later one, of this
    /// value or of the one `poll` returned, is ignored.
    pub fn attempt(&self) -> Option<Attempt<HZ>> {
        match self.phase {
            Phase::InFlight { since, .. } => Some(self.attempt_from(since)),
            _ => None,
        }
    }

    /// The attempt numbered `self.dispatched`, dispatched at `started`: its timeout is
    /// `min(ceiling, time left before the deadline)`. The one place an attempt is made.
    fn attempt_from(&self, started: Instant<HZ>) -> Attempt<HZ> {
        let remaining = time::since(self.deadline, started);
        let timeout = match self.policy.attempt_timeout() {
            Some(ceiling) => time::min(ceiling, remaining),
            None => remaining,
        };
        Attempt { operation: self.id, number: self.dispatched, started, timeout, deadline: self.deadline }
    }

    /// Tells the observer about state changes in the dependency that this operation caused.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn announce<O: Observer<HZ> + ?Sized>(&self, now: Instant<HZ>, changes: Changes, observer: &mut O) {
        if let Some(state) = changes.circuit {
            observer.on_event(&Event::CircuitChanged { operation: self.id, at: now, state });
        }
        #[cfg(feature = "bulkhead-adaptive")]
        if let Some((from, to)) = changes.limit {
            observer.on_event(&Event::BulkheadLimitChanged { operation: self.id, at: now, from, to });
        }
        if let Some(until) = changes.cooldown_until {
            observer.on_event(&Event::CooldownExtended {
                operation: self.id,
                at: now,
                until: Instant::<HZ>::from_ticks(until),
            });
        }
    }

    /// Cancels the operation at `now`: gives back whatever an attempt still out holds (its bulkhead
    /// slot, its half-open probe; a budget reservation is spent, since the call may have reached the
    /// far side) and ends the operation as failed with `cancelled`, unless it had already ended.
    /// An adapter calls this when the future running the operation is dropped.
    pub fn abandon<const N: usize, const L: usize, O: Observer<HZ> + ?Sized>(
        &mut self,
        now: Instant<HZ>,
        dependency: &mut Dependency<HZ, N, L>,
        observer: &mut O,
    ) {
        let before = self.latest;
        let now = self.clamp(now);
        match self.phase {
            Phase::Done { .. } | Phase::Taken => return,
            Phase::InFlight { ticket, since } => {
                let changes =
                    dependency.complete(self.config, now, ticket, Ending::Abandoned, time::since(now, since));
                self.announce(now, changes, observer);
            }
            Phase::Ready { queued, .. } if is_queued(queued) => {
                self.waited = time::sum(self.waited, time::since(now, before));
                dependency.leave_queue();
            }
            Phase::Ready { not_before, reserved, .. } => {
                self.give_back_reserved(dependency, not_before, reserved)
            }
        }
        self.finish(now, Disposition::Failed, Some(Problem::Cancelled), observer);
    }

    /// Whether `attempt` is the one this operation has out.
    fn owns(&self, attempt: &Attempt<HZ>) -> Option<(Ticket, Instant<HZ>)> {
        match self.phase {
            Phase::InFlight { ticket, since }
                if attempt.operation == self.id && attempt.number == self.dispatched =>
            {
                Some((ticket, since))
            }
            _ => None,
        }
    }

    /// Reports that `attempt` succeeded. An attempt this operation does not have out (already
    /// reported, from another operation, or reported after the operation ended) is ignored.
    pub fn on_success<const N: usize, const L: usize, O: Observer<HZ> + ?Sized>(
        &mut self,
        attempt: Attempt<HZ>,
        now: Instant<HZ>,
        dependency: &mut Dependency<HZ, N, L>,
        observer: &mut O,
    ) {
        let Some((ticket, since)) = self.owns(&attempt) else {
            return;
        };
        let now = self.clamp(now);
        let changes =
            dependency.complete(self.config, now, ticket, Ending::Succeeded, time::since(now, since));
        observer.on_event(&Event::AttemptSucceeded { operation: self.id, attempt: attempt.number, at: now });
        self.announce(now, changes, observer);
        self.finish(now, Disposition::Succeeded, None, observer);
    }

    /// Reports that `attempt` failed with the caller's `failure`, classifies it and decides
    /// whether to retry (see the module doc for the order of the rules). The failure is kept for
    /// the completion. An attempt this operation does not have out is ignored, and its failure
    /// dropped.
    pub fn on_failure<const N: usize, const L: usize, R: RngCore + ?Sized, O: Observer<HZ> + ?Sized>(
        &mut self,
        attempt: Attempt<HZ>,
        now: Instant<HZ>,
        dependency: &mut Dependency<HZ, N, L>,
        rng: &mut R,
        failure: E,
        observer: &mut O,
    ) where
        E: Classify<HZ>,
    {
        let Some((ticket, since)) = self.owns(&attempt) else {
            return;
        };
        let now = self.clamp(now);
        let verdict = failure.classify();
        let ending = Ending::Failed {
            retry_after: verdict.retry_after().map(|d| d.as_ticks()),
            #[cfg(feature = "bulkhead-adaptive")]
            transient: verdict.is_retryable(),
        };
        let changes = dependency.complete(self.config, now, ticket, ending, time::since(now, since));
        self.retry_after = MaybeTicks::new(verdict.retry_after().map(|d| d.as_ticks()));
        self.last_failure = Some(failure);
        let decision = self.decide(now, verdict, dependency, rng);
        let then = match decision {
            Decision::Retry { .. } => AfterFailure::Retry,
            Decision::NotRetryable => AfterFailure::NotRetryable,
            Decision::Stop { problem, .. } => AfterFailure::Stop(problem),
        };
        observer.on_event(&Event::AttemptFailed {
            operation: self.id,
            attempt: attempt.number,
            at: now,
            verdict,
            then,
        });
        // The attempt's consequences for the dependency (a circuit that opened, a cooldown that
        // grew) are reported after the attempt itself.
        self.announce(now, changes, observer);
        match decision {
            Decision::Retry { delay, source } => {
                let until = time::add(now, delay);
                self.waited = time::sum(self.waited, delay);
                if let DelaySource::Backoff { .. } = source {
                    self.previous_delay = delay;
                }
                self.phase = Phase::Ready { not_before: until, reserved: false, queued: NOT_QUEUED };
                observer.on_event(&Event::RetryScheduled {
                    operation: self.id,
                    attempt: attempt.number.saturating_add(1),
                    delay,
                    until,
                    source,
                });
            }
            Decision::NotRetryable => self.finish(now, Disposition::Failed, None, observer),
            Decision::Stop { disposition, problem, refused, retry_at } => {
                if refused {
                    observer.on_event(&Event::Refused {
                        operation: self.id,
                        attempt: attempt.number.saturating_add(1),
                        at: now,
                        problem,
                        retry_at,
                    });
                    self.not_before_hint = MaybeTicks::new(retry_at.map(|t| t.as_ticks()));
                }
                if disposition == Disposition::Deferred {
                    self.not_before_hint = MaybeTicks::new(
                        self.retry_after.duration().map(|wait| time::add(now, wait).as_ticks()),
                    );
                }
                self.finish(now, disposition, Some(problem), observer);
            }
        }
    }

    fn decide<const N: usize, const L: usize, R: RngCore + ?Sized>(
        &self,
        now: Instant<HZ>,
        verdict: Verdict<HZ>,
        dependency: &mut Dependency<HZ, N, L>,
        rng: &mut R,
    ) -> Decision<HZ> {
        let stop =
            |disposition, problem| Decision::Stop { disposition, problem, refused: false, retry_at: None };
        if !verdict.is_retryable() {
            return Decision::NotRetryable;
        }
        let policy = self.policy;
        if self.dispatched >= policy.max_attempts() || self.hedged() {
            return stop(Disposition::Failed, Problem::AttemptsExhausted);
        }
        #[cfg(feature = "until-arrived")]
        if self.until_arrived && !verdict.never_arrived() {
            return stop(Disposition::Failed, Problem::MayHaveArrived);
        }
        // An isolated circuit would refuse any retry, for as long as the operator says: end now,
        // before a deferral could name an instant to try again that the isolation does not keep.
        #[cfg(feature = "breaker-isolate")]
        if dependency.circuit_isolated() {
            return Decision::Stop {
                disposition: Disposition::Rejected,
                problem: Problem::CircuitIsolated,
                refused: true,
                retry_at: None,
            };
        }
        let remaining = time::since(self.deadline, now).as_ticks();
        // A retry must leave this much before the deadline once its delay has passed (one tick at
        // least: `RetryPolicyBuilder::build` sees to it).
        let needed = policy.min_remaining().as_ticks();
        // Either wait is a draw from an interval, made at one site so that the draw is inlined
        // once: the stated wait and up to its spread, or the backoff's jitter, capped at the
        // maximum delay as `RetryPolicy::delay` caps it. Nothing after the draw depends on which.
        let (lo, hi, cap, source) = match verdict.retry_after() {
            Some(stated) => {
                if stated.as_ticks() > policy.max_delay().as_ticks() {
                    return stop(Disposition::Deferred, Problem::RetryAfterExceedsMaximumDelay);
                }
                let Some(slack) =
                    remaining.checked_sub(stated.as_ticks()).and_then(|r| r.checked_sub(needed))
                else {
                    return stop(Disposition::Deferred, Problem::RetryAfterExceedsDeadline);
                };
                // At most the slack: the wait and `needed` fit before the deadline.
                let hi = stated.as_ticks().saturating_add(policy.retry_after_spread().as_ticks().min(slack));
                (stated.as_ticks(), hi, hi, DelaySource::RetryAfter { stated })
            }
            None => {
                let (lo, hi) = policy.jitter_interval(self.dispatched, self.previous_delay);
                let nominal = policy.nominal_delay(self.dispatched);
                (lo, hi, policy.max_delay().as_ticks(), DelaySource::Backoff { nominal })
            }
        };
        let delay = crate::jitter::uniform_inclusive(rng, lo, hi).min(cap);
        // Never true for a stated wait (above).
        if delay.saturating_add(needed) > remaining {
            return stop(Disposition::Failed, Problem::RetryDelayExceedsDeadline);
        }
        let delay = Duration::<HZ>::from_ticks(delay);
        let starts = time::add(now, delay);
        if starts >= self.safe_until {
            return stop(Disposition::Failed, Problem::ReplayStatementExpired);
        }
        // A circuit that this failure (or another operation) opened, and that stays open past the
        // retry's start, would refuse it: end now rather than wait for a refusal.
        if let Some(until) = dependency.circuit_open_until(now) {
            if until > starts {
                return Decision::Stop {
                    disposition: Disposition::Rejected,
                    problem: Problem::CircuitOpen,
                    refused: true,
                    retry_at: Some(until),
                };
            }
        }
        // `complete` counted this failure at `now` just before.
        if !dependency.retry_allowed_after_failure(self.config, now, self.held_back()) {
            return Decision::Stop {
                disposition: Disposition::Failed,
                problem: Problem::RetryBudgetExhausted,
                refused: true,
                retry_at: None,
            };
        }
        Decision::Retry { delay, source }
    }

    /// Ends the operation. Not inlined: it ends it from seven places, and on a Cortex-M3 one copy
    /// is 20 bytes of flash less than seven.
    #[inline(never)]
    fn finish<O: Observer<HZ> + ?Sized>(
        &mut self,
        now: Instant<HZ>,
        disposition: Disposition,
        problem: Option<Problem>,
        observer: &mut O,
    ) {
        self.phase = Phase::Done { disposition, problem, at: now };
        observer.on_event(&Event::Completed {
            operation: self.id,
            disposition,
            problem,
            dispatched: self.dispatched(),
            at: now,
        });
    }

    /// The completion, once [`poll`](Self::poll) has returned [`Action::Done`]; `None` before that,
    /// and after it has been taken once.
    pub fn take_completion(&mut self) -> Option<Completion<HZ, E>> {
        let Phase::Done { disposition, problem, at } = self.phase else {
            return None;
        };
        self.phase = Phase::Taken;
        Some(Completion {
            operation: self.id,
            disposition,
            problem,
            summary: Summary {
                dispatched: self.dispatched(),
                retries: self.dispatched.saturating_sub(1),
                waited: self.waited,
                elapsed: time::since(at, self.started),
            },
            last_failure: self.last_failure.take(),
            retry_after: self.retry_after.duration(),
            not_before: self.not_before_hint.instant(),
        })
    }
}

/// Hedging: see [`HedgePlan`].
#[cfg(feature = "hedge")]
#[cfg_attr(docsrs, doc(cfg(feature = "hedge")))]
impl<'p, const HZ: u64, E> Operation<'p, HZ, E> {
    /// What a hedge of this operation needs (see [`HedgePlan`]), or
    /// [`StartError::HedgeWithoutRetries`] when its policy allows one attempt (a hedge is a repeat,
    /// and a policy of one attempt states that the call must not be repeated), or
    /// [`StartError::HedgeOfMutation`] when its statement is not a read's
    /// ([`ReplaySafety::may_hedge`]: a provider's key protects a repeat, not a copy in flight). Call it right after
    /// [`Operation::start`], so that a configuration that cannot hedge is refused before anything is
    /// sent, as `start` refuses one that cannot retry.
    pub const fn hedge_plan(&self) -> Result<HedgePlan<HZ>, StartError> {
        if self.policy.max_attempts() < 2 {
            return Err(StartError::HedgeWithoutRetries);
        }
        if let Hedging::Never = self.hedging {
            return Err(StartError::HedgeOfMutation);
        }
        Ok(HedgePlan {
            deadline: self.deadline,
            safe_until: self.safe_until,
            #[cfg(feature = "duty-cycle")]
            airtime: self.airtime,
            #[cfg(feature = "criticality")]
            held_back: self.held_back,
            #[cfg(feature = "criticality")]
            criticality: self.criticality,
        })
    }

    /// Starts, at `now`, a hedge of the operation `plan` was taken from, under the same policy and
    /// dependency: an operation of one attempt, numbered 2 and reported as a retry, that goes
    /// through the dependency's protections like any attempt and, as a retry does, needs the
    /// retry budget's consent (refused with `retry_budget_exhausted`, and charged when it goes), the
    /// replay statement still holding (`replay_statement_expired`) and the policy's
    /// `min_remaining` before the operation's deadline (`deadline_exceeded`). A failure ends it
    /// (`attempts_exhausted` when retryable): the operation it hedges goes on with its own retries.
    /// Its id is 0, for the adapter to number; its completion counts the one attempt it sent, as a
    /// retry.
    ///
    /// The caller runs both and takes the first success; the other is abandoned
    /// ([`Operation::abandon`]), which gives back what its attempt holds without counting it as a
    /// failure.
    pub fn start_hedge(
        policy: &'p RetryPolicy<HZ>,
        config: &'p DependencyConfig<HZ>,
        plan: HedgePlan<HZ>,
        now: Instant<HZ>,
    ) -> Self {
        Self {
            policy,
            config,
            id: OperationId(0),
            safe_until: plan.safe_until,
            started: now,
            deadline: plan.deadline,
            latest: now,
            #[cfg(feature = "duty-cycle")]
            airtime: plan.airtime,
            phase: Phase::Ready { not_before: now, reserved: false, queued: NOT_QUEUED },
            dispatched: 1,
            // A hedge's statement is a read's.
            #[cfg(feature = "until-arrived")]
            until_arrived: false,
            #[cfg(feature = "criticality")]
            held_back: plan.held_back,
            #[cfg(feature = "criticality")]
            criticality: plan.criticality,
            hedging: Hedging::Hedge,
            previous_delay: policy.base_delay(),
            waited: Duration::<HZ>::from_ticks(0),
            last_failure: None,
            retry_after: MaybeTicks::NONE,
            not_before_hint: MaybeTicks::NONE,
        }
    }

    /// Whether this operation is a hedge of another ([`Operation::start_hedge`]).
    pub const fn is_hedge(&self) -> bool {
        matches!(self.hedging, Hedging::Hedge)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;
    #[cfg(feature = "breaker")]
    use crate::breaker::BreakerConfig;
    use crate::breaker::CircuitState;
    use crate::budget::RetryBudget;
    #[cfg(feature = "duty-cycle")]
    use crate::duty::DutyCycle;
    use crate::error::ConfigError;
    use crate::jitter::Jitter;
    #[cfg(feature = "rate-limit")]
    use crate::limiter::RateLimit;
    use crate::time::{MAX_SPAN, Ticks};

    const HZ: u64 = 1_000;
    type D = Duration<HZ>;
    type I = Instant<HZ>;

    const POLICY: RetryPolicy<HZ> = match RetryPolicy::exponential(4, D::from_millis(100), D::from_secs(2))
        .jitter(Jitter::Full)
        .attempt_timeout(D::from_secs(1))
        .build()
    {
        Ok(p) => p,
        Err(_) => panic!(),
    };

    /// Every protection compiled in, so that rebasing is checked on every piece of state.
    fn config() -> DependencyConfig<HZ> {
        let config = DependencyConfig::new(D::from_secs(10)).budget(RetryBudget::ratio(20, 3).unwrap());
        #[cfg(feature = "breaker")]
        let config = config.breaker(BreakerConfig::consecutive_failures(5, D::from_secs(2)));
        #[cfg(feature = "rate-limit")]
        let config = config.rate_limit(RateLimit::new(5, D::from_secs(1)).max_wait(D::from_millis(500)));
        #[cfg(feature = "duty-cycle")]
        let config = config.duty_cycle(DutyCycle::new(D::from_secs(1), D::from_secs(10)));
        #[cfg(feature = "cooldown")]
        let config = config.cooldown(D::from_secs(30));
        config
    }

    /// A small PRNG (xorshift64*), the same sequence in every run.
    struct Xs(u64);
    impl RngCore for Xs {
        fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn next_u32(&mut self) -> u32 {
            (self.next_u64() >> 32) as u32
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(self.next_u32() as u8);
        }
    }

    /// What the caller saw, on the original clock: instants are reported as `ticks + offset`.
    #[derive(Debug, PartialEq, Eq)]
    enum Seen {
        Dispatch { number: u8, timeout: Ticks, at: Ticks },
        Wait { until: Ticks },
        Done(Disposition, Option<Problem>, u8, Ticks, Ticks, Option<Ticks>),
    }

    /// Runs 40 operations against one dependency from `start`, with seeded outcomes. At each
    /// `(operation, step)` in `rebases`, the clock restarts `by` ticks later: the dependency and the
    /// operation in progress are rebased, and every later `now` is read on the new clock.
    fn run(
        config: DependencyConfig<HZ>,
        start: Ticks,
        rebases: &[(usize, usize, Ticks)],
    ) -> (Vec<Seen>, usize) {
        let mut dep = Dependency::<HZ, 5, 4>::new(&config, I::from_ticks(start)).unwrap();
        let (mut outcomes, mut jitter) = (Xs(0x1234_5678), Xs(0x9e37_79b9));
        let (mut t, mut offset) = (start, 0 as Ticks);
        let (mut seen, mut restarts) = (Vec::new(), 0);
        for n in 0..40 {
            let context = Context::new(D::from_secs(8), ReplaySafety::replayable_read(D::from_secs(60)))
                .airtime(D::from_millis(50));
            let mut op =
                Operation::<HZ, Verdict<HZ>>::start(&POLICY, &config, context, I::from_ticks(t - offset))
                    .unwrap();
            for step in 0.. {
                for &(_, _, by) in rebases.iter().filter(|&&(o, s, _)| (o, s) == (n, step)) {
                    dep.rebase(D::from_ticks(by));
                    op.rebase(D::from_ticks(by));
                    offset += by;
                    restarts += 1;
                }
                let now = I::from_ticks(t - offset);
                match op.poll(now, &mut dep, &mut ()) {
                    Action::Dispatch(attempt) => {
                        let at = attempt.started().as_ticks() + offset;
                        seen.push(Seen::Dispatch {
                            number: attempt.number(),
                            timeout: attempt.timeout().as_ticks(),
                            at,
                        });
                        t += 30;
                        let done = I::from_ticks(t - offset);
                        match outcomes.next_u32() % 6 {
                            0 | 1 => op.on_success(attempt, done, &mut dep, &mut ()),
                            2 | 3 => op.on_failure(
                                attempt,
                                done,
                                &mut dep,
                                &mut jitter,
                                Verdict::Retryable,
                                &mut (),
                            ),
                            4 => {
                                let busy = Verdict::RetryableAfter(D::from_millis(400));
                                op.on_failure(attempt, done, &mut dep, &mut jitter, busy, &mut ())
                            }
                            _ => op.on_failure(
                                attempt,
                                done,
                                &mut dep,
                                &mut jitter,
                                Verdict::NotRetryable,
                                &mut (),
                            ),
                        }
                    }
                    Action::Wait { until } => {
                        seen.push(Seen::Wait { until: until.as_ticks() + offset });
                        t = until.as_ticks() + offset;
                    }
                    Action::Done => {
                        let c = op.take_completion().unwrap();
                        let s = c.summary;
                        let not_before = c.not_before.map(|i| i.as_ticks() + offset);
                        seen.push(Seen::Done(
                            c.disposition,
                            c.problem,
                            s.dispatched,
                            s.waited.as_ticks(),
                            s.elapsed.as_ticks(),
                            not_before,
                        ));
                        break;
                    }
                }
            }
            t += 1_200;
        }
        (seen, restarts)
    }

    /// Late enough that a restart by 2^30 ticks leaves the clock well past the longest span.
    const LATE: Ticks = 1_200_000_000;

    /// Between operations, and twice within one (operation 10 takes six steps whichever protections
    /// are compiled in).
    const RESTARTS: [(usize, usize, Ticks); 3] = [(3, 0, 1 << 30), (10, 2, 40_000_000), (10, 4, 100_000)];

    #[test]
    fn a_rebased_clock_gives_the_same_transcript() {
        let (plain, _) = run(config(), LATE, &[]);
        let (rebased, restarts) = run(config(), LATE, &RESTARTS);
        assert_eq!(restarts, 3);
        assert!(plain.iter().filter(|s| matches!(s, Seen::Dispatch { number: 2.., .. })).count() > 5);
        // The protections' state is rebased too: they refuse or defer some operations here.
        #[cfg(all(
            feature = "breaker",
            feature = "rate-limit",
            feature = "duty-cycle",
            feature = "cooldown"
        ))]
        assert!(
            plain.iter().any(|s| matches!(s, Seen::Done(Disposition::Deferred | Disposition::Rejected, ..)))
        );
        assert_eq!(plain, rebased);
    }

    #[cfg(feature = "token-bucket")]
    #[test]
    fn a_rebased_clock_gives_the_same_transcript_with_a_token_bucket() {
        // 3 tokens, one every 10 s, held 3 s: small enough to run out, so that its refill (counted
        // from the bucket's rebased instants) decides retries.
        let bucket = RetryBudget::token_bucket(3, 1, D::from_secs(10), D::from_secs(3)).unwrap();
        let config = config().budget(bucket);
        let (plain, _) = run(config, LATE, &[]);
        let (rebased, _) = run(config, LATE, &RESTARTS);
        let exhausted = |s: &&Seen| matches!(s, Seen::Done(_, Some(Problem::RetryBudgetExhausted), ..));
        assert!(plain.iter().filter(exhausted).count() > 2, "{plain:?}");
        assert!(plain.iter().filter(|s| matches!(s, Seen::Dispatch { number: 2.., .. })).count() > 5);
        assert_eq!(plain, rebased);
    }

    #[test]
    fn an_idle_dependency_rebased_past_everything_it_holds_starts_clean() {
        let config = config();
        let mut dep = Dependency::<HZ, 5, 4>::new(&config, I::from_ticks(1_000)).unwrap();
        let mut cooled = dep.clone();
        // A cooldown until 31 s, then the clock restarts so far on that all of it is in the past.
        let context = Context::new(D::from_secs(8), ReplaySafety::replayable_read(D::from_secs(60)))
            .airtime(D::from_millis(50));
        let mut op =
            Operation::<HZ, Verdict<HZ>>::start(&POLICY, &config, context, I::from_ticks(1_000)).unwrap();
        let Action::Dispatch(a) = op.poll(I::from_ticks(1_000), &mut cooled, &mut ()) else { panic!() };
        let busy = Verdict::RetryableAfter(D::from_secs(60));
        op.on_failure(a, I::from_ticks(1_100), &mut cooled, &mut Xs(1), busy, &mut ());
        #[cfg(feature = "cooldown")]
        assert_eq!(cooled.cooldown_until(I::from_ticks(1_100)), Some(I::from_ticks(31_100)));
        cooled.rebase(D::from_ticks(MAX_SPAN));
        dep.rebase(D::from_ticks(MAX_SPAN));
        let later = I::from_ticks(50_000_000);
        assert_eq!(cooled.cooldown_until(later), None);
        assert_eq!(cooled.counts(later), dep.counts(later));
        assert_eq!(cooled.circuit(later), CircuitState::Closed);
    }

    #[test]
    fn the_attempt_in_flight_is_given_back_as_dispatched_and_counts_once() {
        let config = config();
        let mut dep = Dependency::<HZ, 5, 4>::new(&config, I::from_ticks(0)).unwrap();
        // 1.1 s to the deadline: the second attempt's timeout is cut below the 1 s ceiling.
        let context = Context::new(D::from_millis(1_100), ReplaySafety::replayable_read(D::from_secs(60)))
            .airtime(D::from_millis(1));
        let mut op =
            Operation::<HZ, Verdict<HZ>>::start(&POLICY, &config, context, I::from_ticks(1_000)).unwrap();
        assert_eq!(op.attempt(), None, "nothing dispatched yet");
        let Action::Dispatch(first) = op.poll(I::from_ticks(1_000), &mut dep, &mut ()) else { panic!() };
        assert_eq!(op.attempt().as_ref(), Some(&first));
        drop(first);
        let given = op.attempt().unwrap();
        op.on_failure(given, I::from_ticks(1_200), &mut dep, &mut Xs(7), Verdict::Retryable, &mut ());
        assert_eq!(op.attempt(), None, "reported: none in flight while the retry waits");
        let Action::Wait { until } = op.poll(I::from_ticks(1_200), &mut dep, &mut ()) else { panic!() };
        let Action::Dispatch(second) = op.poll(until, &mut dep, &mut ()) else { panic!() };
        let cut = 2_100 - until.as_ticks();
        assert!(cut < 1_000);
        assert_eq!(
            (second.number(), second.started(), second.timeout().as_ticks(), second.deadline()),
            (2, until, cut, I::from_ticks(2_100))
        );
        assert_eq!(op.attempt().as_ref(), Some(&second));
        // Rebased, the attempt given back is on the new clock, with the same timeout.
        op.rebase(D::from_ticks(500));
        let rebased = op.attempt().unwrap();
        assert_eq!(
            (rebased.started(), rebased.timeout(), rebased.deadline()),
            (I::from_ticks(until.as_ticks() - 500), second.timeout(), I::from_ticks(1_600))
        );
        // The first report of any copy counts; the others are ignored.
        let again = op.attempt().unwrap();
        op.on_success(rebased, until, &mut dep, &mut ());
        op.on_failure(again, until, &mut dep, &mut Xs(7), Verdict::NotRetryable, &mut ());
        op.on_failure(second, until, &mut dep, &mut Xs(7), Verdict::NotRetryable, &mut ());
        assert_eq!(op.attempt(), None);
        let done = op.take_completion().unwrap();
        assert_eq!(
            (done.disposition, done.summary.dispatched, done.last_failure),
            (Disposition::Succeeded, 2, Some(Verdict::Retryable)),
            "the ignored reports replaced nothing"
        );
    }

    #[test]
    fn an_id_assigned_before_the_first_poll_is_on_every_event_and_the_completion_and_a_set_id_is_kept() {
        let config = config();
        let mut dep = Dependency::<HZ, 5, 4>::new(&config, I::from_ticks(0)).unwrap();
        let context = Context::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_secs(60)))
            .airtime(D::from_millis(1));
        let t = I::from_ticks(1_000);
        let mut ids = Vec::new();
        let mut seen = |event: &Event<HZ>| ids.push(event.operation().0);
        let mut op = Operation::<HZ, Verdict<HZ>>::start(&POLICY, &config, context, t).unwrap();
        assert_eq!(op.id(), OperationId(0), "none set");
        assert!(op.assign_id(41));
        assert!(!op.assign_id(42), "an id is assigned once");
        let Action::Dispatch(attempt) = op.poll(t, &mut dep, &mut seen) else { panic!() };
        op.on_success(attempt, t, &mut dep, &mut seen);
        assert_eq!(op.poll(t, &mut dep, &mut seen), Action::Done);
        assert_eq!(op.take_completion().unwrap().operation, OperationId(41));
        assert_eq!(ids, [41, 41, 41], "dispatched, succeeded, ended");

        let mut set = Operation::<HZ, Verdict<HZ>>::start(&POLICY, &config, context.id(7), t).unwrap();
        assert!(!set.assign_id(43), "the context's id is kept");
        assert_eq!(set.id(), OperationId(7));
    }

    /// The getters give back what the builders and `start` were given, each its own field.
    #[test]
    fn a_context_and_an_operation_read_back_what_they_were_given() {
        let safety = ReplaySafety::provider_idempotent_mutation(D::from_secs(60));
        let context = Context::new(D::from_secs(8), safety).airtime(D::from_millis(50)).id(9);
        assert_eq!(
            (context.deadline(), context.safety(), context.attempt_airtime(), context.operation_id()),
            (D::from_secs(8), safety, D::from_millis(50), OperationId(9))
        );
        let config = config();
        let mut dep = Dependency::<HZ, 5, 4>::new(&config, I::from_ticks(1_000)).unwrap();
        let mut op =
            Operation::<HZ, Verdict<HZ>>::start(&POLICY, &config, context, I::from_ticks(1_000)).unwrap();
        assert_eq!(
            (op.started(), op.deadline(), op.dispatched(), op.id()),
            (I::from_ticks(1_000), I::from_ticks(9_000), 0, OperationId(9))
        );
        let Action::Dispatch(_) = op.poll(I::from_ticks(1_000), &mut dep, &mut ()) else { panic!() };
        assert_eq!(op.dispatched(), 1);
    }

    /// A sooner limit cuts the deadline and keeps the rest of the statement; a later or equal one
    /// changes nothing.
    #[test]
    fn a_deadline_within_a_sooner_limit_is_cut_to_it_and_keeps_the_rest() {
        let safety = ReplaySafety::provider_idempotent_mutation(D::from_secs(60));
        let context = Context::new(D::from_secs(8), safety).airtime(D::from_millis(50)).id(9);
        assert_eq!(context.deadline_within(D::from_secs(8)), context);
        assert_eq!(context.deadline_within(D::from_secs(9)), context);
        let cut = context.deadline_within(D::from_millis(2_500));
        assert_eq!(
            (cut.deadline(), cut.safety(), cut.attempt_airtime(), cut.operation_id()),
            (D::from_millis(2_500), safety, D::from_millis(50), OperationId(9))
        );
        assert_eq!(context.deadline_within(D::from_ticks(0)).deadline(), D::from_ticks(0));
    }

    #[test]
    fn a_completion_not_yet_taken_is_rebased_with_its_instant_to_try_again() {
        let config = DependencyConfig::new(D::from_secs(10)).budget(RetryBudget::ratio(20, 3).unwrap());
        let mut dep = Dependency::<HZ, 5, 4>::new(&config, I::from_ticks(0)).unwrap();
        let context = Context::new(D::from_secs(10), ReplaySafety::replayable_read(D::from_secs(60)));
        let t = I::from_ticks(5_000);
        let mut op = Operation::<HZ, Verdict<HZ>>::start(&POLICY, &config, context, t).unwrap();
        let Action::Dispatch(attempt) = op.poll(t, &mut dep, &mut ()) else { panic!() };
        // 60 s asked for, beyond the policy's 2 s maximum delay: deferred, to try again at 65.03 s.
        let busy = Verdict::RetryableAfter(D::from_secs(60));
        op.on_failure(attempt, I::from_ticks(5_030), &mut dep, &mut Xs(1), busy, &mut ());
        assert_eq!(op.poll(I::from_ticks(5_030), &mut dep, &mut ()), Action::Done);
        // The clock restarts 5 s later before the completion is taken: its instants move with it.
        op.rebase(D::from_ticks(5_000));
        let done = op.take_completion().unwrap();
        assert_eq!(
            (done.disposition, done.problem, done.not_before),
            (
                Disposition::Deferred,
                Some(Problem::RetryAfterExceedsMaximumDelay),
                Some(I::from_ticks(60_030))
            )
        );
        assert_eq!(done.summary.elapsed, D::from_millis(30), "the time used is not changed by a rebase");
        // Taken, nothing is left to rebase.
        op.rebase(D::from_ticks(1_000));
        assert!(op.take_completion().is_none());
    }

    #[test]
    fn a_backoff_waits_what_the_policys_delay_draws_in_every_jitter_mode() {
        // The decision draws a backoff from `RetryPolicy::jitter_interval` at the site it shares
        // with a Retry-After's spread: the waits must be the ones `RetryPolicy::delay` gives from
        // the same words, its cap included (700 ms here, which the doubling and decorrelated
        // jitter both reach).
        for jitter in [Jitter::None, Jitter::Full, Jitter::Equal, Jitter::Decorrelated] {
            let policy = RetryPolicy::<HZ>::exponential(6, D::from_millis(100), D::from_millis(700))
                .jitter(jitter)
                .build()
                .unwrap();
            let config = DependencyConfig::new(D::from_secs(10)).budget(RetryBudget::ratio(10, 20).unwrap());
            let mut dep = Dependency::<HZ, 5, 4>::new(&config, I::from_ticks(0)).unwrap();
            let context = Context::new(D::from_secs(60), ReplaySafety::replayable_read(D::from_secs(120)));
            let mut op =
                Operation::<HZ, Verdict<HZ>>::start(&policy, &config, context, I::from_ticks(0)).unwrap();
            let (mut rng, mut reference) = (Xs(0x9e37_79b9), Xs(0x9e37_79b9));
            let (mut now, mut previous) = (0, policy.base_delay());
            let (mut waited, mut expected) = (Vec::new(), Vec::new());
            loop {
                match op.poll(I::from_ticks(now), &mut dep, &mut ()) {
                    Action::Dispatch(attempt) => {
                        let retry = attempt.number();
                        now += 10;
                        op.on_failure(
                            attempt,
                            I::from_ticks(now),
                            &mut dep,
                            &mut rng,
                            Verdict::Retryable,
                            &mut (),
                        );
                        if retry < policy.max_attempts() {
                            previous = policy.delay(retry, previous, &mut reference);
                            expected.push(previous.as_ticks());
                        }
                    }
                    Action::Wait { until } => {
                        waited.push(until.as_ticks() - now);
                        now = until.as_ticks();
                    }
                    Action::Done => break,
                }
            }
            assert_eq!(waited, expected, "{jitter:?}");
            assert_eq!(waited.len(), 5, "{jitter:?}");
            assert_eq!(rng.0, reference.0, "{jitter:?}: the same words drawn");
        }
    }

    #[test]
    fn spans_longer_than_32_bit_ticks_plan_ahead_are_refused_with_their_codes() {
        let long = D::from_ticks(MAX_SPAN.saturating_add(1));
        let policy = RetryPolicy::<HZ>::exponential(3, D::from_millis(100), long).build();
        let dependency = DependencyConfig::new(long).budget(RetryBudget::ratio(10, 1).unwrap());
        let context = Context::new(long, ReplaySafety::replayable_read(D::from_secs(1)));
        let fine = DependencyConfig::new(D::from_secs(10)).budget(RetryBudget::ratio(10, 1).unwrap());
        let started = Operation::<HZ, Verdict<HZ>>::start(&POLICY, &fine, context, I::from_ticks(0));
        if cfg!(feature = "ticks-u32") {
            assert_eq!(policy.unwrap_err(), ConfigError::SpanTooLongForTicks);
            assert_eq!(dependency.validate(), Err(ConfigError::SpanTooLongForTicks));
            assert_eq!(started.unwrap_err(), StartError::DeadlineTooLong { deadline: long.as_ticks() });
        } else {
            // 64-bit ticks have no limit: MAX_SPAN is the end of time, and nothing exceeds it.
            assert_eq!(MAX_SPAN, Ticks::MAX);
            assert!(policy.is_ok() && dependency.validate().is_ok() && started.is_ok());
        }
        // Each span of a dependency is checked: the window above, a bulkhead queue's wait here.
        #[cfg(feature = "bulkhead")]
        assert_eq!(
            fine.bulkhead(1).bulkhead_queue(1, long).validate().is_err(),
            cfg!(feature = "ticks-u32"),
            "a queue's wait longer than MAX_SPAN"
        );
    }
}
