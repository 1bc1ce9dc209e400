//! The adaptive limit (additive increase, multiplicative decrease of a bulkhead's slots) on a
//! virtual clock: what lowers it and by how much, what raises it and how fast, that the bulkhead
//! and its queue admit only what it allows, and, against a model of its rules over random traffic,
//! the limit after every attempt.

use proptest::prelude::*;
use relent_core::{
    Action, AdaptiveLimit, Attempt, BreakerConfig, ConfigError, Context, DependencyConfig,
    MAX_EVENTS_PER_CALL, Operation, Problem, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, Dep, Failure, HZ, Recorder, T, TIMEOUT, secs, valid};

const ONCE: RetryPolicy<HZ> = valid(RetryPolicy::single_attempt().build());

const BUG: Failure = Failure { name: "500", verdict: Verdict::NotRetryable };

/// A bulkhead of `slots` whose limit counts 250 ms as slow, with a floor of 2, keeping 0.9 of itself
/// on a sign of overload (Netflix's factor: more steps to check than the default's halving).
fn adaptive(slots: u16) -> DependencyConfig<HZ> {
    DependencyConfig::new(D::from_secs(10))
        .bulkhead(slots)
        .adaptive_limit(AdaptiveLimit::new(D::from_millis(250)).min_slots(2).decrease_to_permille(900))
}

fn read(id: u64) -> Context<HZ> {
    Context::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_secs(60))).id(id)
}

fn t(ms: u64) -> T {
    T::from_ticks(ms)
}

/// How an attempt ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Ok,
    Fail(Failure),
}

/// Operations in flight against one dependency, each holding its attempt.
struct Flight<'c> {
    config: &'c DependencyConfig<HZ>,
    held: Vec<(Operation<'c, HZ, Failure>, Attempt<HZ>)>,
    next_id: u64,
}

impl<'c> Flight<'c> {
    fn new(config: &'c DependencyConfig<HZ>) -> Self {
        Self { config, held: Vec::new(), next_id: 1 }
    }

    /// Starts one operation at `ms`: `Ok` if its attempt went out (it is held), or its refusal.
    fn send(&mut self, dep: &mut Dep, ms: u64) -> Result<(), Problem> {
        let mut op = Operation::start(&ONCE, self.config, read(self.next_id), t(ms)).unwrap();
        self.next_id += 1;
        match op.poll(t(ms), &mut dep.state, &mut Recorder::default()) {
            Action::Dispatch(attempt) => {
                self.held.push((op, attempt));
                Ok(())
            }
            Action::Done => Err(op.take_completion().unwrap().problem.unwrap()),
            Action::Wait { .. } => panic!("nothing here waits"),
        }
    }

    /// Ends the oldest attempt in flight at `ms`.
    fn end(&mut self, dep: &mut Dep, ms: u64, end: End) {
        let (mut op, attempt) = self.held.remove(0);
        let rec = &mut Recorder::default();
        match end {
            End::Ok => op.on_success(attempt, t(ms), &mut dep.state, rec),
            End::Fail(f) => op.on_failure(attempt, t(ms), &mut dep.state, &mut Fixed::top(), f, rec),
        }
    }

    /// Sends `n` at `ms` and ends them all, oldest first, `latency` later.
    fn round(&mut self, dep: &mut Dep, n: u16, ms: u64, latency: u64, end: End) {
        for _ in 0..n {
            self.send(dep, ms).unwrap();
        }
        for _ in 0..n {
            self.end(dep, ms + latency, end);
        }
    }
}

/// Ten attempts out at once time out together: the first lowers the limit from 10 to 9, and the
/// other nine, sent under the old limit, do not lower it again. Then the bulkhead admits 9.
#[test]
fn a_round_of_timeouts_lowers_the_limit_once_and_the_bulkhead_admits_only_the_new_limit() {
    let config = adaptive(10);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    assert_eq!(dep.state.bulkhead_limit(&config), Some(10));
    for _ in 0..10 {
        flight.send(&mut dep, 0).unwrap();
    }
    assert_eq!(flight.send(&mut dep, 0), Err(Problem::BulkheadFull));
    for _ in 0..10 {
        flight.end(&mut dep, 5_000, End::Fail(TIMEOUT));
    }
    assert_eq!(dep.state.bulkhead_limit(&config), Some(9));
    for _ in 0..9 {
        flight.send(&mut dep, 5_100).unwrap();
    }
    assert_eq!(flight.send(&mut dep, 5_100), Err(Problem::BulkheadFull));
    assert_eq!(dep.state.in_flight(), 9);
    // The next round's timeouts are a new sign: 9 × 0.9 = 8.1, so 8.
    flight.end(&mut dep, 5_200, End::Fail(TIMEOUT));
    assert_eq!(dep.state.bulkhead_limit(&config), Some(8));
}

/// Each move of the limit is an event, with the limit before and after: down on a timeout, then
/// back up a slot at a time as fast successes come back, and nothing for an attempt that moves it
/// neither way.
#[test]
fn each_move_of_the_limit_is_an_event_with_the_limit_before_and_after() {
    let config = adaptive(4);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    let mut transcript = Vec::new();
    let mut round = |dep: &mut Dep, ms: u64, n: u16, end: End| {
        for _ in 0..n {
            flight.send(dep, ms).unwrap();
        }
        for _ in 0..n {
            let (mut op, attempt) = flight.held.remove(0);
            let mut rec = Recorder::default();
            match end {
                End::Ok => op.on_success(attempt, t(ms + 20), &mut dep.state, &mut rec),
                End::Fail(f) => {
                    op.on_failure(attempt, t(ms + 20), &mut dep.state, &mut Fixed::top(), f, &mut rec)
                }
            }
            transcript.extend(rec.lines.into_iter().filter(|l| l.contains("limit")));
        }
    };
    round(&mut dep, 0, 1, End::Fail(TIMEOUT));
    round(&mut dep, 1_000, 1, End::Fail(TIMEOUT));
    round(&mut dep, 2_000, 1, End::Fail(BUG));
    for i in 0..4 {
        round(&mut dep, 3_000 + i * 100, 2, End::Ok);
    }
    // Up from 2: a round of two fast successes makes the two steps of a slot; from 3, only the first
    // of each round ends with half the limit in use, so three rounds make the next.
    assert_eq!(
        transcript,
        [
            "0.020 bulkhead limit 4 -> 3",
            "1.020 bulkhead limit 3 -> 2",
            "3.020 bulkhead limit 2 -> 3",
            "3.320 bulkhead limit 3 -> 4"
        ]
    );
}

/// The most events one call makes, all at once: a 503 with Retry-After that opens the circuit,
/// lowers the limit and extends the cooldown, whose retry the open circuit refuses, which ends the
/// operation.
#[test]
fn one_failure_can_make_the_most_events_a_call_makes() {
    let config = adaptive(10)
        .budget(valid(RetryBudget::ratio(10, 5)))
        .breaker(BreakerConfig::consecutive_failures(1, D::from_secs(5)))
        .cooldown(D::from_secs(10));
    let mut dep = Dep::new(config);
    let policy = valid(RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2)).build());
    let mut op: Operation<'_, HZ, Failure> = Operation::start(&policy, &config, read(1), t(0)).unwrap();
    let Action::Dispatch(attempt) = op.poll(t(0), &mut dep.state, &mut Recorder::default()) else { panic!() };
    let busy = Failure { name: "503", verdict: Verdict::RetryableAfter(D::from_secs(1)) };
    let mut rec = Recorder::default();
    op.on_failure(attempt, t(20), &mut dep.state, &mut Fixed::top(), busy, &mut rec);
    assert_eq!(
        rec.lines,
        [
            "0.020 #1 failed (retryable after 1.000): stop: circuit_open",
            "0.020 circuit open",
            "0.020 bulkhead limit 10 -> 9",
            "0.020 cooldown until 1.020",
            "0.020 refused #2: circuit_open (retry at 5.020)",
            "0.020 done: rejected, circuit_open after 1 dispatched",
        ]
    );
    assert_eq!(rec.lines.len(), MAX_EVENTS_PER_CALL);
}

/// A success that takes the limit's 250 ms or longer is a sign of overload too (a queue on the far
/// side shows as latency first), and so is a fast failure the classifier calls transient; a fast
/// failure that is not transient is not, and a slow one is.
#[test]
fn slow_attempts_and_transient_failures_lower_the_limit_and_a_fast_bug_does_not() {
    let config = adaptive(100);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    let mut limits = Vec::new();
    let mut one = |dep: &mut Dep, ms: u64, latency: u64, end: End| {
        flight.round(dep, 1, ms, latency, end);
        limits.push(dep.state.bulkhead_limit(&config).unwrap());
    };
    one(&mut dep, 0, 249, End::Ok);
    one(&mut dep, 1_000, 250, End::Ok);
    one(&mut dep, 2_000, 10, End::Fail(BUG));
    one(&mut dep, 3_000, 10, End::Fail(TIMEOUT));
    one(&mut dep, 4_000, 300, End::Fail(BUG));
    assert_eq!(limits, [100, 90, 90, 81, 72]);
}

/// Back up one slot a round: a round of as many fast successes as the limit, all in flight at
/// once, adds a slot only for those that ended while at least half the limit was in use (half of
/// them), so two rounds add one; and never past the bulkhead's slots.
#[test]
fn fast_successes_raise_the_limit_one_slot_for_as_many_as_it_has_and_no_further_than_the_bulkhead() {
    let config = adaptive(10);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    // Down to 6: 10, 9, 8, 7, 6, one timeout a round.
    for round in 0..4 {
        flight.round(&mut dep, 1, round * 1_000, 10, End::Fail(TIMEOUT));
    }
    assert_eq!(dep.state.bulkhead_limit(&config), Some(6));
    let mut limits = Vec::new();
    for round in 0..12 {
        let limit = dep.state.bulkhead_limit(&config).unwrap();
        flight.round(&mut dep, limit, 10_000 + round * 100, 20, End::Ok);
        limits.push(dep.state.bulkhead_limit(&config).unwrap());
    }
    // Of 6 ending one by one, those ending while 6, 5, 4 and 3 are in use count a step, the last
    // two do not: 4 steps, and the next round's first two make the 6 that add a slot. So about
    // two rounds a slot, until the bulkhead's 10.
    assert_eq!(limits, [6, 7, 7, 8, 8, 9, 9, 10, 10, 10, 10, 10]);
}

/// A dependency whose clock restarts 8 s later (`Dependency::rebase`, as firmware does before its
/// 32-bit clock runs out) keeps its last decrease at the same moment: an attempt sent before it is
/// still of the old round, one sent after it of a new one.
#[test]
fn a_rebased_dependency_keeps_its_rounds() {
    let config = adaptive(100);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    // Sent at 9.900 and 10.000; the first times out at 10.010, which lowers the limit.
    flight.send(&mut dep, 9_900).unwrap();
    flight.send(&mut dep, 10_000).unwrap();
    flight.end(&mut dep, 10_010, End::Fail(TIMEOUT));
    assert_eq!(dep.state.bulkhead_limit(&config), Some(90));
    dep.state.rebase(D::from_secs(8));
    // The second, sent at 2.000 on the new clock, before the decrease at 2.010, times out at
    // 2.100: of the old round.
    let (mut op, attempt) = flight.held.remove(0);
    op.rebase(D::from_secs(8));
    op.on_failure(attempt, t(2_100), &mut dep.state, &mut Fixed::top(), TIMEOUT, &mut Recorder::default());
    assert_eq!(dep.state.bulkhead_limit(&config), Some(90));
    // One sent at 2.020, after the decrease: a new round.
    flight.round(&mut dep, 1, 2_020, 10, End::Fail(TIMEOUT));
    assert_eq!(dep.state.bulkhead_limit(&config), Some(81));
}

/// Calls that never come near the limit do not raise it: it has not been tested.
#[test]
fn a_limit_the_callers_leave_unused_does_not_grow() {
    let config = adaptive(10);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    flight.round(&mut dep, 1, 0, 10, End::Fail(TIMEOUT));
    assert_eq!(dep.state.bulkhead_limit(&config), Some(9));
    // 1,000 calls one at a time: 1 in use of 9.
    for i in 0..1_000 {
        flight.round(&mut dep, 1, 1_000 + i * 50, 20, End::Ok);
    }
    assert_eq!(dep.state.bulkhead_limit(&config), Some(9));
}

/// With a queue, a freed slot goes to a waiting operation only when the limit allows it: after a
/// decrease from 4 to 3 with 4 in flight, the first attempt to end frees no slot for the queue.
#[test]
fn the_queue_is_given_a_slot_only_below_the_learnt_limit() {
    let config = adaptive(4).bulkhead_queue(8, D::from_secs(1));
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    for _ in 0..4 {
        flight.send(&mut dep, 0).unwrap();
    }
    let mut waiter: Operation<'_, HZ, Failure> = Operation::start(&ONCE, &config, read(99), t(0)).unwrap();
    let rec = &mut Recorder::default();
    assert!(matches!(waiter.poll(t(0), &mut dep.state, rec), Action::Wait { .. }));
    assert_eq!(dep.state.bulkhead_waiting(), 1);
    flight.end(&mut dep, 100, End::Fail(TIMEOUT));
    assert_eq!((dep.state.bulkhead_limit(&config), dep.state.in_flight()), (Some(3), 3));
    assert!(!dep.state.slot_for_waiting(&config));
    assert!(matches!(waiter.poll(t(100), &mut dep.state, rec), Action::Wait { .. }));
    flight.end(&mut dep, 110, End::Ok);
    assert!(dep.state.slot_for_waiting(&config));
    assert!(matches!(waiter.poll(t(110), &mut dep.state, rec), Action::Dispatch(_)));
    assert_eq!(dep.state.in_flight(), 3);
}

#[test]
fn each_mistake_in_an_adaptive_limit_is_refused_with_its_code() {
    let limit = AdaptiveLimit::new(D::from_millis(250));
    let plain = DependencyConfig::<HZ>::new(D::from_secs(10));
    assert_eq!(plain.adaptive(), None);
    assert_eq!(plain.bulkhead(8).adaptive_limit(limit).adaptive(), Some(limit));
    let cases = [
        (
            plain.adaptive_limit(limit),
            ConfigError::AdaptiveLimitWithoutBulkhead,
            "DependencyConfig::bulkhead",
        ),
        (
            plain.bulkhead(8).adaptive_limit(AdaptiveLimit::new(D::from_ticks(0))),
            ConfigError::AdaptiveLimitZeroSlow,
            "0 ticks",
        ),
        (
            plain.bulkhead(8).adaptive_limit(limit.min_slots(9)),
            ConfigError::AdaptiveLimitFloorOutOfRange,
            "min_slots",
        ),
        (
            plain.bulkhead(8).adaptive_limit(limit.decrease_to_permille(1_000)),
            ConfigError::AdaptiveLimitDecreaseOutOfRange,
            "halves it as TCP does",
        ),
    ];
    for (config, error, hint) in cases {
        let err = relent_core::Dependency::<HZ, 10>::new(&config, t(0)).unwrap_err();
        assert_eq!(err, error);
        assert!(err.message().contains(hint), "{}: {}", err.as_str(), err.message());
    }
}

/// The model: the limit starts at the bulkhead's slots; an attempt that took 250 ms or more, or
/// failed transiently, sent at or after the last decrease (or before any), keeps 9/10 of the limit
/// rounded down, at least one fewer, at least the floor; a fast success while at least half the
/// limit is in use (its own slot included) adds a step, and as many steps as the limit add a slot,
/// up to the bulkhead's; anything else changes nothing. An attempt is admitted only while fewer
/// than the limit are in flight.
#[derive(Debug)]
struct Model {
    slots: u16,
    floor: u16,
    limit: u16,
    steps: u16,
    lowered_at: Option<u64>,
}

impl Model {
    fn learn(&mut self, in_use: u16, sent: u64, now: u64, took: u64, end: End) {
        let overload = took >= 250 || matches!(end, End::Fail(f) if f.verdict.is_retryable());
        if overload {
            if self.lowered_at.is_some_and(|at| sent < at) {
                return;
            }
            let kept = (u32::from(self.limit) * 900 / 1_000) as u16;
            self.limit = kept.min(self.limit - 1).max(self.floor);
            self.steps = 0;
            self.lowered_at = Some(now);
        } else if end == End::Ok && 2 * in_use >= self.limit && self.limit < self.slots {
            self.steps += 1;
            if self.steps >= self.limit {
                self.limit += 1;
                self.steps = 0;
            }
        }
    }
}

/// One step of random traffic: after `gap` ms, send one attempt, or end the attempt in flight at
/// `pick` (modulo how many) after it took `took` ms, with a success, a timeout or a bug.
#[derive(Debug, Clone)]
enum Traffic {
    Send { gap: u64 },
    End { gap: u64, pick: usize, kind: u8 },
}

fn traffic() -> impl Strategy<Value = Traffic> {
    prop_oneof![
        (0u64..100).prop_map(|gap| Traffic::Send { gap }),
        (0u64..400, any::<usize>(), 0u8..3).prop_map(|(gap, pick, kind)| Traffic::End { gap, pick, kind }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(relent_tests::cases(256)))]

    #[test]
    fn the_limit_follows_the_model_after_every_attempt_and_bounds_admission(
        slots in 2u16..40,
        steps in prop::collection::vec(traffic(), 1..400),
    ) {
        let config = adaptive(slots);
        let mut dep = Dep::new(config);
        let mut model = Model { slots, floor: 2, limit: slots, steps: 0, lowered_at: None };
        let mut out: Vec<(Operation<'_, HZ, Failure>, Attempt<HZ>, u64)> = Vec::new();
        let (mut now, mut id) = (0u64, 0u64);
        for step in steps {
            match step {
                Traffic::Send { gap } => {
                    now += gap;
                    id += 1;
                    let mut op = Operation::start(&ONCE, &config, read(id), t(now)).unwrap();
                    let admitted = match op.poll(t(now), &mut dep.state, &mut Recorder::default()) {
                        Action::Dispatch(attempt) => {
                            out.push((op, attempt, now));
                            true
                        }
                        _ => {
                            prop_assert_eq!(op.take_completion().unwrap().problem, Some(Problem::BulkheadFull));
                            false
                        }
                    };
                    prop_assert_eq!(admitted, out.len() - usize::from(admitted) < usize::from(model.limit));
                }
                Traffic::End { gap, pick, kind } if !out.is_empty() => {
                    now += gap;
                    let in_use = out.len() as u16;
                    let (mut op, attempt, sent) = out.remove(pick % out.len());
                    let end = [End::Ok, End::Fail(TIMEOUT), End::Fail(BUG)][usize::from(kind)];
                    let rec = &mut Recorder::default();
                    match end {
                        End::Ok => op.on_success(attempt, t(now), &mut dep.state, rec),
                        End::Fail(f) => op.on_failure(attempt, t(now), &mut dep.state, &mut Fixed::top(), f, rec),
                    }
                    let before = model.limit;
                    model.learn(in_use, sent, now, now - sent, end);
                    // The event says each move, and only a move.
                    let said: Vec<&String> = rec.lines.iter().filter(|l| l.contains("limit")).collect();
                    let moved = format!("{} bulkhead limit {before} -> {}", secs(now), model.limit);
                    prop_assert_eq!(said, if before == model.limit { vec![] } else { vec![&moved] });
                }
                Traffic::End { .. } => {}
            }
            prop_assert_eq!(dep.state.bulkhead_limit(&config), Some(model.limit));
            prop_assert!((2..=slots).contains(&model.limit));
            prop_assert_eq!(usize::from(dep.state.in_flight()), out.len());
        }
    }
}
