//! Logging: every core event as a `tracing` event, with the dependency's name and the operation's
//! id as fields (the std half of embassy's `fmt.rs` shim; the embassy adapter logs with defmt).
//!
//! Levels: decisions a dashboard should count (a retry scheduled, a refusal, a circuit change, an
//! adaptive limit lowered, an operation that did not succeed) at INFO or WARN; the per-attempt
//! detail at DEBUG, and an adaptive limit's climb back (a line a slot) with it. A refusal of work
//! its caller stated sheddable ([`relent_core::Criticality`]) is at INFO, with
//! `criticality="sheddable"`: shedding it is what it was stated for, and under a critical reserve a
//! busy dependency refuses it by design, so at WARN it would bury the refusals of critical work.
//!
//! Nothing is logged under a dependency's lock. The core hands its events to an observer inside
//! each call, and the adapter makes those calls under the lock; a subscriber that writes to a file
//! or a socket can take far longer than the core's microseconds, and in an outage every caller of
//! the dependency logs a refusal at WARN. So the adapter's observer, [`Deferred`], only copies each
//! event at a level some subscriber takes into a fixed array, and the events are logged once the
//! lock is released, in order.
//!
//! The level some subscriber takes is read once a step, not once an event: an event below it (every
//! event of a successful operation under an INFO subscriber, or with none) then costs one
//! comparison, inlined where the core makes it.

use relent_core::{
    AfterFailure, DelaySource, Disposition, Event, MAX_EVENTS_PER_CALL, Observer, OperationId,
};

use tracing::Level;
use tracing::level_filters::{LevelFilter, STATIC_MAX_LEVEL};

use crate::clock::{Duration, HZ};

/// An operator's change of a dependency's circuit (`Dependency::isolate_circuit`,
/// `Dependency::close_circuit`): the line the breaker's own changes log, with `by="operator"` and no
/// operation.
pub(crate) fn circuit_changed_by_operator(dependency: &str, state: relent_core::CircuitState) {
    tracing::warn!(dependency, state = state.as_str(), by = "operator", "relent: circuit changed");
}

/// A dependency's configuration changed while it runs (`Dependency::reconfigure`): at INFO, a
/// routine change (a configuration file reloaded), with the configuration it runs with now.
pub(crate) fn reconfigured(dependency: &str, config: &relent_core::DependencyConfig<HZ>) {
    tracing::info!(dependency, config = ?config, "relent: dependency reconfigured");
}

/// A reconfiguration to the configuration in force, which changes nothing: at DEBUG, as a file
/// reloaded on a timer would otherwise log at INFO each time.
pub(crate) fn unchanged(dependency: &str) {
    tracing::debug!(dependency, "relent: dependency configuration unchanged");
}

/// The most events one step under the lock makes: a report and the poll after it, two calls into
/// the core.
pub(crate) const STEP_EVENTS: usize = 2 * MAX_EVENTS_PER_CALL;

/// The observer of one step under a dependency's lock: it keeps the step's events, and
/// [`Deferred::emit`] hands them to `O` (a [`Trace`]) once the lock is released. Should a step ever
/// make more than [`STEP_EVENTS`], the ones kept are handed over at once, under the lock, and the
/// array starts again: nothing is lost and the order holds.
pub(crate) struct Deferred<O> {
    sink: O,
    /// The most verbose level the sink takes, read when the step began.
    max: LevelFilter,
    /// Whether the step's operation is sheddable work (see `level`).
    sheddable: bool,
    /// Made with the first event kept: a step that keeps none writes nothing here.
    kept: Option<Kept>,
}

/// The events kept, in order: the first `len` of `events`. The slots past `len` hold nothing to
/// log: copies of the first event kept, which filled the array when it was made, or events already
/// handed over.
struct Kept {
    events: [Event<HZ>; STEP_EVENTS],
    len: usize,
}

/// What [`Deferred`] hands events to: an observer that says below which level it would drop
/// events anyway, so that none is kept for nothing.
pub(crate) trait Sink: Observer<HZ> {
    fn max_level(&self) -> LevelFilter;

    /// Whether the events it is handed are a sheddable operation's (see `level`).
    fn sheddable(&self) -> bool {
        false
    }
}

impl Sink for Trace<'_> {
    /// The most verbose level any subscriber may take, as `tracing::level_enabled!` reads it (one
    /// atomic load): `OFF` when no subscriber is set. A hint: a subscriber may still filter an
    /// event out by target.
    fn max_level(&self) -> LevelFilter {
        LevelFilter::current().min(STATIC_MAX_LEVEL)
    }

    fn sheddable(&self) -> bool {
        self.sheddable
    }
}

impl<O: Sink> Deferred<O> {
    pub(crate) fn new(sink: O) -> Self {
        let (max, sheddable) = (sink.max_level(), sink.sheddable());
        Self { sink, max, sheddable, kept: None }
    }

    /// Hands the events kept to the sink, in order, and forgets them.
    pub(crate) fn emit(&mut self) {
        if let Some(kept) = &mut self.kept {
            for event in &kept.events[..kept.len] {
                self.sink.on_event(event);
            }
            kept.len = 0;
        }
    }

    fn keep(&mut self, event: &Event<HZ>) {
        if self.kept.as_ref().is_some_and(|kept| kept.len == STEP_EVENTS) {
            self.emit();
        }
        match &mut self.kept {
            Some(kept) => {
                kept.events[kept.len] = *event;
                kept.len += 1;
            }
            None => self.kept = Some(Kept { events: [*event; STEP_EVENTS], len: 1 }),
        }
    }
}

impl<O: Sink> Observer<HZ> for Deferred<O> {
    /// Inlined into the core's calls, where each event's kind, and so its level, is known: an event
    /// below the level costs the comparison and nothing else.
    #[inline(always)]
    fn on_event(&mut self, event: &Event<HZ>) {
        if level(event, self.sheddable) <= self.max {
            self.keep(event);
        }
    }
}

/// The level `Trace` logs `event` at, for an operation that is `sheddable` or not, which
/// [`Deferred`] checks before an event is kept. A unit test checks the two agree for every kind of
/// event, and the tracing tests that each transcript at INFO and at WARN is the DEBUG one less the
/// lines below that level.
#[inline(always)]
fn level(event: &Event<HZ>, sheddable: bool) -> Level {
    match *event {
        Event::RetryScheduled { .. } => Level::INFO,
        Event::Refused { .. } if sheddable => Level::INFO,
        Event::Refused { .. } | Event::CircuitChanged { .. } | Event::CooldownExtended { .. } => Level::WARN,
        Event::BulkheadLimitChanged { from, to, .. } if to < from => Level::WARN,
        Event::Completed { disposition, .. } if disposition != Disposition::Succeeded => Level::INFO,
        _ => Level::DEBUG,
    }
}

/// An observer that emits `tracing` events for one dependency.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trace<'a> {
    pub(crate) dependency: &'a str,
    /// Whether the operation is sheddable work: its refusals are logged at INFO.
    pub(crate) sheddable: bool,
}

impl Observer<HZ> for Trace<'_> {
    fn on_event(&mut self, event: &Event<HZ>) {
        let dependency = self.dependency;
        let operation = event.operation().0;
        match *event {
            Event::AttemptDispatched { attempt, timeout, .. } => tracing::debug!(
                dependency,
                operation,
                attempt,
                timeout_us = timeout.as_ticks(),
                "relent: attempt dispatched"
            ),
            Event::AttemptSucceeded { attempt, .. } => {
                tracing::debug!(dependency, operation, attempt, "relent: attempt succeeded")
            }
            Event::AttemptFailed { attempt, verdict, then, .. } => {
                let then = match then {
                    AfterFailure::Retry => "retry",
                    AfterFailure::NotRetryable => "not_retryable",
                    AfterFailure::Stop(problem) => problem.as_str(),
                };
                // The caller's judgement beside the core's decision: a keyless request's
                // `may_have_arrived` after a `retryable` failure, not a `never_arrived` one.
                let verdict = verdict.as_str();
                tracing::debug!(dependency, operation, attempt, verdict, then, "relent: attempt failed")
            }
            Event::RetryScheduled { attempt, delay, source, .. } => {
                let (source, stated_us) = match source {
                    DelaySource::Backoff { nominal } => ("backoff", nominal.as_ticks()),
                    DelaySource::RetryAfter { stated } => ("retry_after", stated.as_ticks()),
                };
                tracing::info!(
                    dependency,
                    operation,
                    attempt,
                    delay_us = delay.as_ticks(),
                    source,
                    stated_us,
                    "relent: retry scheduled"
                )
            }
            // Waits as spans from the event, which a reader can use; instants are on the
            // dependency's own clock (microseconds since it was made), kept for ordering. Two
            // calls, not an `Option` field: tracing-core records `Option` values only from 0.1.21,
            // and the oldest tracing this crate accepts (0.1.18) asks for tracing-core 0.1.12.
            Event::Refused { attempt, problem, at, retry_at, .. } if self.sheddable => match retry_at {
                Some(t) => tracing::info!(
                    dependency,
                    operation,
                    attempt,
                    code = problem.as_str(),
                    criticality = "sheddable",
                    retry_in_us = t.as_ticks().saturating_sub(at.as_ticks()),
                    "relent: attempt refused"
                ),
                None => tracing::info!(
                    dependency,
                    operation,
                    attempt,
                    code = problem.as_str(),
                    criticality = "sheddable",
                    "relent: attempt refused"
                ),
            },
            Event::Refused { attempt, problem, at, retry_at, .. } => match retry_at {
                Some(t) => tracing::warn!(
                    dependency,
                    operation,
                    attempt,
                    code = problem.as_str(),
                    retry_in_us = t.as_ticks().saturating_sub(at.as_ticks()),
                    "relent: attempt refused"
                ),
                None => tracing::warn!(
                    dependency,
                    operation,
                    attempt,
                    code = problem.as_str(),
                    "relent: attempt refused"
                ),
            },
            Event::WaitingForRateLimit { attempt, until, .. } => {
                tracing::debug!(
                    dependency,
                    operation,
                    attempt,
                    until_us = until.as_ticks(),
                    "relent: waiting for a rate-limit unit"
                )
            }
            Event::WaitingForAirtime { attempt, until, .. } => {
                tracing::debug!(
                    dependency,
                    operation,
                    attempt,
                    until_us = until.as_ticks(),
                    "relent: waiting for airtime (duty cycle)"
                )
            }
            Event::WaitingForSlot { attempt, until, .. } => {
                tracing::debug!(
                    dependency,
                    operation,
                    attempt,
                    until_us = until.as_ticks(),
                    "relent: waiting for a bulkhead slot"
                )
            }
            Event::CircuitChanged { state, .. } => {
                tracing::warn!(dependency, operation, state = state.as_str(), "relent: circuit changed")
            }
            Event::BulkheadLimitChanged { from, to, .. } => {
                if to < from {
                    tracing::warn!(dependency, operation, from, to, "relent: bulkhead limit lowered")
                } else {
                    tracing::debug!(dependency, operation, from, to, "relent: bulkhead limit raised")
                }
            }
            Event::CooldownExtended { at, until, .. } => {
                tracing::warn!(
                    dependency,
                    operation,
                    until_us = until.as_ticks(),
                    for_us = until.as_ticks().saturating_sub(at.as_ticks()),
                    "relent: cooldown extended"
                )
            }
            Event::Completed { disposition, problem, dispatched, .. } => {
                let code = problem.map_or("", |p| p.as_str());
                if disposition == Disposition::Succeeded {
                    tracing::debug!(dependency, operation, dispatched, "relent: operation succeeded")
                } else {
                    tracing::info!(
                        dependency,
                        operation,
                        dispatched,
                        disposition = disposition.as_str(),
                        code,
                        "relent: operation ended"
                    )
                }
            }
            // An event this version does not know yet (the enum is non_exhaustive).
            _ => tracing::debug!(dependency, operation, event = ?event, "relent: event"),
        }
    }
}

/// A request refused with a 400 by `DeadlineLayer` because its timeout `header` held `value`, which
/// is not whole milliseconds: a caller's mistake its own logs may not show, so the server's say it.
pub(crate) fn timeout_refused(header: &str, value: &str) {
    tracing::info!(header, value, "relent: timeout header refused");
}

/// An operation's deadline cut to `deadline` from the `asked` of its context, `by` the attempt it
/// runs in, the scope it runs in or the request's own deadline (see `bound`): logged before the
/// operation takes the dependency's lock.
pub(crate) fn deadline_cut(dependency: &str, deadline: Duration, asked: Duration, by: &'static str) {
    tracing::debug!(
        dependency,
        deadline_us = deadline.as_ticks(),
        asked_us = asked.as_ticks(),
        by,
        "relent: deadline cut"
    );
}

/// A hedge started for `operation`, as operation `hedge`, whose own events follow.
pub(crate) fn hedge_started(dependency: &str, operation: OperationId, hedge: OperationId) {
    tracing::debug!(dependency, operation = operation.0, hedge = hedge.0, "relent: hedge started");
}

#[cfg(test)]
mod tests {
    use relent_core::{Instant, OperationId};

    use super::*;

    /// The tests' sink keeps everything.
    impl<F: FnMut(&Event<HZ>)> Sink for F {
        fn max_level(&self) -> LevelFilter {
            LevelFilter::TRACE
        }
    }

    fn succeeded(operation: u64) -> Event<HZ> {
        Event::AttemptSucceeded { operation: OperationId(operation), attempt: 1, at: Instant::from_ticks(0) }
    }

    /// A subscriber that takes everything and records the level of each event.
    struct Levels(std::sync::Mutex<Vec<Level>>);

    impl tracing::Subscriber for Levels {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            self.0.lock().unwrap().push(*event.metadata().level());
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[test]
    fn the_level_checked_before_an_event_is_kept_is_the_level_it_is_logged_at() {
        use relent_core::{AfterFailure, CircuitState, DelaySource, Duration, Problem, Verdict};
        let (operation, attempt, at) = (OperationId(7), 2, Instant::from_ticks(5));
        let every_kind: [Event<HZ>; 14] = [
            Event::AttemptDispatched { operation, attempt, timeout: Duration::from_ticks(3), at },
            Event::AttemptSucceeded { operation, attempt, at },
            Event::AttemptFailed {
                operation,
                attempt,
                at,
                verdict: Verdict::Retryable,
                then: AfterFailure::Retry,
            },
            Event::RetryScheduled {
                operation,
                attempt,
                delay: Duration::from_ticks(3),
                until: at,
                source: DelaySource::Backoff { nominal: Duration::from_ticks(3) },
            },
            Event::Refused { operation, attempt, at, problem: Problem::CircuitOpen, retry_at: None },
            Event::WaitingForRateLimit { operation, attempt, until: at },
            Event::WaitingForAirtime { operation, attempt, until: at },
            Event::WaitingForSlot { operation, attempt, until: at },
            Event::CircuitChanged { operation, at, state: CircuitState::Open },
            Event::CooldownExtended { operation, at, until: at },
            Event::BulkheadLimitChanged { operation, at, from: 8, to: 4 },
            Event::BulkheadLimitChanged { operation, at, from: 4, to: 5 },
            Event::Completed {
                operation,
                disposition: Disposition::Succeeded,
                problem: None,
                dispatched: 1,
                at,
            },
            Event::Completed {
                operation,
                disposition: Disposition::Failed,
                problem: Some(Problem::AttemptsExhausted),
                dispatched: 3,
                at,
            },
        ];
        for sheddable in [false, true] {
            let levels = std::sync::Arc::new(Levels(Default::default()));
            tracing::subscriber::with_default(levels.clone(), || {
                tracing::callsite::rebuild_interest_cache();
                for event in &every_kind {
                    Trace { dependency: "payrail", sheddable }.on_event(event);
                }
            });
            let logged = levels.0.lock().unwrap().clone();
            assert_eq!(logged, every_kind.iter().map(|e| level(e, sheddable)).collect::<Vec<_>>());
            // Each level is used, so the comparison above can tell them apart.
            for used in [Level::DEBUG, Level::INFO, Level::WARN] {
                assert!(logged.contains(&used), "{used}");
            }
            // A refusal: WARN for critical work, INFO for sheddable work.
            let refused = every_kind.iter().position(|e| matches!(e, Event::Refused { .. })).unwrap();
            assert_eq!(logged[refused], if sheddable { Level::INFO } else { Level::WARN });
        }
    }

    /// A sink at a fixed level that records the operation id of each event it is handed.
    struct AtMost(LevelFilter, Vec<u64>);

    impl Observer<HZ> for AtMost {
        fn on_event(&mut self, event: &Event<HZ>) {
            self.1.push(event.operation().0);
        }
    }

    impl Sink for AtMost {
        fn max_level(&self) -> LevelFilter {
            self.0
        }
    }

    #[test]
    fn a_step_keeps_only_the_events_at_its_sink_s_level_and_makes_no_array_for_none() {
        use relent_core::{CircuitState, DelaySource, Duration};
        let at = Instant::from_ticks(0);
        let (debug, info, warn) = (
            succeeded(1),
            Event::RetryScheduled {
                operation: OperationId(2),
                attempt: 2,
                delay: Duration::from_ticks(3),
                until: at,
                source: DelaySource::Backoff { nominal: Duration::from_ticks(3) },
            },
            Event::CircuitChanged { operation: OperationId(3), at, state: CircuitState::Open },
        );
        for (max, handed) in [
            (LevelFilter::OFF, vec![]),
            (LevelFilter::WARN, vec![3]),
            (LevelFilter::INFO, vec![2, 3]),
            (LevelFilter::DEBUG, vec![1, 2, 3]),
        ] {
            let mut deferred = Deferred::new(AtMost(max, Vec::new()));
            for event in [&debug, &info, &warn] {
                deferred.on_event(event);
            }
            assert_eq!(
                deferred.kept.is_some(),
                !handed.is_empty(),
                "{max}: the array made only for an event kept"
            );
            deferred.emit();
            assert_eq!(deferred.sink.1, handed, "{max}");
        }
    }

    #[test]
    fn a_step_s_events_reach_the_sink_only_when_emitted_and_in_order() {
        let seen = std::cell::RefCell::new(Vec::new());
        let mut deferred = Deferred::new(|e: &Event<HZ>| seen.borrow_mut().push(e.operation().0));
        for id in 0..STEP_EVENTS as u64 {
            deferred.on_event(&succeeded(id));
        }
        assert!(seen.borrow().is_empty(), "a full step is kept, not handed over");
        deferred.emit();
        deferred.emit();
        assert_eq!(*seen.borrow(), (0..STEP_EVENTS as u64).collect::<Vec<_>>(), "each once, in order");
    }

    #[test]
    fn more_events_than_a_step_makes_are_handed_over_early_none_lost_and_in_order() {
        let seen = std::cell::RefCell::new(Vec::new());
        let mut deferred = Deferred::new(|e: &Event<HZ>| seen.borrow_mut().push(e.operation().0));
        let total = 2 * STEP_EVENTS as u64 + 3;
        for id in 0..total {
            deferred.on_event(&succeeded(id));
            // Full arrays are handed over when the next event arrives, not before.
            let handed = id / STEP_EVENTS as u64 * STEP_EVENTS as u64;
            assert_eq!(seen.borrow().len() as u64, handed, "after event {id}");
        }
        deferred.emit();
        assert_eq!(*seen.borrow(), (0..total).collect::<Vec<_>>());
    }
}
