//! One transcript per rule of the operation state machine that the seeds do not already cover.

use relent_core::{
    Action, BreakerConfig, Context, DependencyConfig, Disposition, Event, Jitter, Operation, Problem,
    ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, Dep, Failure, HZ, Recorder, Step, T, TIMEOUT, run, valid};

const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(4, D::from_millis(100), D::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(D::from_secs(1))
        .build(),
);

fn ratio(percent: u8, floor: u32) -> Dep {
    Dep::new(DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(percent, floor))))
}

/// A token bucket of `capacity` tokens, one more a minute, each retry's token held 5 s until its
/// outcome is reported.
fn tokens(capacity: u32) -> Dep {
    let budget = valid(RetryBudget::token_bucket(capacity, 1, D::from_secs(60), D::from_secs(5)));
    Dep::at(DependencyConfig::new(D::from_secs(10)).budget(budget), 0)
}

fn read(deadline_ms: u64) -> Context<HZ> {
    Context::new(D::from_millis(deadline_ms), ReplaySafety::replayable_read(D::from_secs(3600)))
}

const REFUSED: Failure = Failure { name: "refused", verdict: Verdict::Retryable };

#[test]
fn a_ratio_budget_with_no_share_and_no_floor_refuses_the_first_retry() {
    let (lines, done) =
        run(&POLICY, read(10_000), &mut ratio(0, 0), 0, &[Step::Fail(10, REFUSED)], &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 1.000",
            "0.010 #1 failed (retryable): stop: retry_budget_exhausted",
            "0.010 refused #2: retry_budget_exhausted",
            "0.010 done: failed, retry_budget_exhausted after 1 dispatched",
        ]
    );
    assert_eq!(done.last_failure, Some(REFUSED));
}

#[test]
fn the_ratio_floor_is_shared_by_every_operation_in_the_window() {
    // Floor 2, no share: two retries per 10 s for the whole dependency.
    let mut dep = ratio(0, 2);
    let (first, _) = run(&POLICY, read(10_000), &mut dep, 0, &[Step::Fail(10, REFUSED)], &mut Fixed::top());
    assert_eq!(first.iter().filter(|l| l.contains(" dispatch #")).count(), 3, "{first:#?}");
    assert_eq!(first.last().unwrap(), "0.330 done: failed, retry_budget_exhausted after 3 dispatched");
    // A second operation in the same window gets no retry at all.
    let (second, _) =
        run(&POLICY, read(10_000), &mut dep, 1_000, &[Step::Fail(10, REFUSED)], &mut Fixed::top());
    assert_eq!(second.last().unwrap(), "1.010 done: failed, retry_budget_exhausted after 1 dispatched");
    // Once the window has slid past the retries, the floor is there again.
    let (third, _) = run(
        &POLICY,
        read(10_000),
        &mut dep,
        11_000,
        &[Step::Fail(10, REFUSED), Step::Ok(5)],
        &mut Fixed::top(),
    );
    assert_eq!(third.last().unwrap(), "11.115 done: succeeded after 2 dispatched");
}

#[test]
fn a_token_budget_is_spent_across_operations_and_refused_when_empty() {
    let mut dep = tokens(2);
    let (_, done) =
        run(&POLICY, read(10_000), &mut dep, 0, &[Step::Fail(10, REFUSED), Step::Ok(5)], &mut Fixed::top());
    assert!(done.is_success());
    assert_eq!(dep.state.retries_available(&dep.config, T::from_ticks(200)), Some(1));
    let (lines, done) =
        run(&POLICY, read(10_000), &mut dep, 1_000, &[Step::Fail(10, REFUSED)], &mut Fixed::top());
    assert_eq!(done.problem, Some(Problem::RetryBudgetExhausted));
    assert_eq!(
        lines[lines.len() - 3..],
        [
            "1.120 #2 failed (retryable): stop: retry_budget_exhausted",
            "1.120 refused #3: retry_budget_exhausted",
            "1.120 done: failed, retry_budget_exhausted after 2 dispatched",
        ]
    );
}

#[test]
fn a_retry_reported_after_an_earlier_reservation_lapsed_gives_its_reservation_back() {
    let mut dep = tokens(2);
    let mut lost = Operation::start(&POLICY, &dep.config, read(10_000), T::from_ticks(0)).unwrap();
    let Action::Dispatch(first) = lost.poll(T::from_ticks(0), &mut dep.state, &mut ()) else { panic!() };
    lost.on_failure(first, T::from_ticks(10), &mut dep.state, &mut Fixed::top(), REFUSED, &mut ());
    assert_eq!(
        lost.poll(T::from_ticks(10), &mut dep.state, &mut ()),
        Action::Wait { until: T::from_ticks(110) }
    );
    let Action::Dispatch(_retry) = lost.poll(T::from_ticks(110), &mut dep.state, &mut ()) else { panic!() };
    // The retry's outcome is never reported (its task died, `lost` is not used again): its token
    // is held, then returned.
    assert_eq!(dep.state.retries_available(&dep.config, T::from_ticks(5_109)), Some(1));
    assert_eq!(dep.state.retries_available(&dep.config, T::from_ticks(5_110)), Some(2), "lapsed");
    // A retry reserved after the lapse, and reported: its token is spent once, and no longer held.
    let (_, done) = run(
        &POLICY,
        read(10_000),
        &mut dep,
        6_000,
        &[Step::Fail(10, REFUSED), Step::Ok(5)],
        &mut Fixed::top(),
    );
    assert!(done.is_success());
    assert_eq!(dep.state.retries_available(&dep.config, T::from_ticks(6_200)), Some(1));
}

#[test]
fn a_retry_whose_start_would_fall_after_the_replay_statement_expired_is_not_made() {
    let context =
        Context::new(D::from_secs(10), ReplaySafety::provider_idempotent_mutation(D::from_millis(250)));
    let (lines, done) =
        run(&POLICY, context, &mut ratio(10, 10), 0, &[Step::Fail(10, REFUSED)], &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 1.000",
            "0.010 #1 failed (retryable): retry",
            "wait 0.100 (backoff 0.100) until 0.110 for #2",
            "0.110 dispatch #2 timeout 1.000",
            // The next retry would start at 0.320, after the statement's 0.250.
            "0.120 #2 failed (retryable): stop: replay_statement_expired",
            "0.120 done: failed, replay_statement_expired after 2 dispatched",
        ]
    );
    assert_eq!(done.problem, Some(Problem::ReplayStatementExpired));
}

#[test]
fn a_retry_that_would_leave_less_than_the_minimum_remaining_time_is_not_made() {
    let policy = valid(
        RetryPolicy::exponential(4, D::from_millis(100), D::from_secs(2))
            .jitter(Jitter::None)
            .attempt_timeout(D::from_secs(1))
            .min_remaining(D::from_millis(500))
            .build(),
    );
    // Deadline 0.7 s: after the first failure at 0.05 and a 0.1 s wait, 0.55 s would remain (>= 0.5);
    // after the second at 0.2 and a 0.2 s wait, 0.3 s would remain (< 0.5).
    let (lines, _) =
        run(&policy, read(700), &mut ratio(10, 10), 0, &[Step::Fail(50, REFUSED)], &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 0.700",
            "0.050 #1 failed (retryable): retry",
            "wait 0.100 (backoff 0.100) until 0.150 for #2",
            "0.150 dispatch #2 timeout 0.550",
            "0.200 #2 failed (retryable): stop: retry_delay_exceeds_deadline",
            "0.200 done: failed, retry_delay_exceeds_deadline after 2 dispatched",
        ]
    );
}

#[test]
fn a_retry_that_leaves_exactly_the_minimum_remaining_time_is_made() {
    let policy = valid(
        RetryPolicy::exponential(4, D::from_millis(100), D::from_secs(2))
            .jitter(Jitter::None)
            .attempt_timeout(D::from_secs(1))
            .min_remaining(D::from_millis(500))
            .build(),
    );
    // Deadline 0.65 s: after the failure at 0.05 and a 0.1 s wait, exactly 0.5 s remains. The
    // boundary belongs to the retry, at the decision and again at the dispatch.
    let (lines, _) = run(
        &policy,
        read(650),
        &mut ratio(10, 10),
        0,
        &[Step::Fail(50, REFUSED), Step::Ok(10)],
        &mut Fixed::top(),
    );
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 0.650",
            "0.050 #1 failed (retryable): retry",
            "wait 0.100 (backoff 0.100) until 0.150 for #2",
            "0.150 dispatch #2 timeout 0.500",
            "0.160 #2 succeeded",
            "0.160 done: succeeded after 2 dispatched",
        ]
    );
}

#[test]
fn a_first_attempt_with_one_tick_left_is_dispatched_with_that_tick() {
    let (lines, _) = run(&POLICY, read(1), &mut ratio(10, 10), 0, &[Step::Ok(1)], &mut Fixed::top());
    assert_eq!(
        lines,
        ["0.000 dispatch #1 timeout 0.001", "0.001 #1 succeeded", "0.001 done: succeeded after 1 dispatched"]
    );
}

#[test]
fn a_retry_after_equal_to_the_maximum_delay_is_slept_through() {
    // The policy's maximum delay is 2 s: a stated wait of exactly 2 s is honoured, not deferred.
    let busy = Failure { name: "busy", verdict: Verdict::RetryableAfter(D::from_secs(2)) };
    let (lines, done) = run(
        &POLICY,
        read(10_000),
        &mut ratio(10, 10),
        0,
        &[Step::Fail(10, busy), Step::Ok(5)],
        &mut Fixed::top(),
    );
    assert!(done.is_success(), "{lines:#?}");
    assert_eq!(lines[2], "wait 2.000 (retry-after 2.000) until 2.010 for #2");
}

#[test]
fn a_circuit_open_until_exactly_the_retry_s_start_lets_the_retry_probe_it() {
    // The failure at 0.010 opens the circuit for 100 ms, until 0.110: when the 100 ms backoff ends.
    // At that instant the circuit is half-open and the retry is its probe.
    let config = DependencyConfig::new(D::from_secs(10))
        .budget(valid(RetryBudget::ratio(10, 10)))
        .breaker(BreakerConfig::consecutive_failures(1, D::from_millis(100)));
    let (lines, done) = run(
        &POLICY,
        read(10_000),
        &mut Dep::new(config),
        0,
        &[Step::Fail(10, REFUSED), Step::Ok(5)],
        &mut Fixed::top(),
    );
    assert!(done.is_success(), "{lines:#?}");
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 1.000",
            "0.010 #1 failed (retryable): retry",
            "0.010 circuit open",
            "wait 0.100 (backoff 0.100) until 0.110 for #2",
            "0.110 circuit half_open",
            "0.110 dispatch #2 timeout 1.000",
            "0.115 #2 succeeded",
            "0.115 circuit closed",
            "0.115 done: succeeded after 2 dispatched",
        ]
    );
}

#[test]
fn a_retry_whose_token_another_operation_took_first_fails_with_retry_budget_exhausted() {
    // One token. Both operations fail at once and both retries are allowed (a token is there);
    // the first to be dispatched reserves it, and the second is refused at its dispatch.
    let mut dep = tokens(1);
    let mut rec = Recorder::tagged();
    let t = T::from_ticks;
    let mut ops = [1, 2].map(|id| Operation::start(&POLICY, &dep.config, read(10_000).id(id), t(0)).unwrap());
    for op in &mut ops {
        let Action::Dispatch(first) = op.poll(t(0), &mut dep.state, &mut rec) else { panic!() };
        op.on_failure(first, t(10), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    }
    let Action::Dispatch(_) = ops[0].poll(t(110), &mut dep.state, &mut rec) else {
        panic!("{:#?}", rec.lines)
    };
    assert_eq!(ops[1].poll(t(110), &mut dep.state, &mut rec), Action::Done);
    let done = ops[1].take_completion().unwrap();
    assert_eq!((done.disposition, done.problem), (Disposition::Failed, Some(Problem::RetryBudgetExhausted)));
    assert_eq!(
        rec.lines[rec.lines.len() - 3..],
        [
            "op1: 0.110 dispatch #2 timeout 1.000",
            "op2: 0.110 refused #2: retry_budget_exhausted",
            "op2: 0.110 done: failed, retry_budget_exhausted after 1 dispatched",
        ]
    );
}

#[test]
fn a_retry_after_spread_adds_on_top_of_the_stated_wait_and_never_below_it() {
    let policy = valid(
        RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(5))
            .attempt_timeout(D::from_secs(1))
            .retry_after_spread(D::from_millis(400))
            .build(),
    );
    let busy = Failure { name: "busy", verdict: Verdict::RetryableAfter(D::from_secs(2)) };
    for (rng, expected) in [(Fixed::bottom(), "wait 2.000"), (Fixed::top(), "wait 2.400")] {
        let (lines, _) =
            run(&policy, read(10_000), &mut ratio(10, 10), 0, &[Step::Fail(0, busy), Step::Ok(1)], &mut {
                rng
            });
        assert!(lines[2].starts_with(&format!("{expected} (retry-after 2.000)")), "{lines:#?}");
    }
}

#[test]
fn a_zero_retry_after_retries_at_once() {
    let now_please = Failure { name: "now", verdict: Verdict::RetryableAfter(D::from_ticks(0)) };
    let (lines, _) = run(
        &POLICY,
        read(10_000),
        &mut ratio(10, 10),
        0,
        &[Step::Fail(5, now_please), Step::Ok(5)],
        &mut Fixed::top(),
    );
    assert_eq!(lines[2], "wait 0.000 (retry-after 0.000) until 0.005 for #2");
    assert_eq!(lines[3], "0.005 dispatch #2 timeout 1.000");
}

#[test]
fn equal_and_decorrelated_jitter_stay_in_their_windows() {
    for (jitter, rng, waits) in [
        (Jitter::Equal, Fixed::bottom(), ["0.050", "0.100", "0.200"]),
        (Jitter::Equal, Fixed::top(), ["0.100", "0.200", "0.400"]),
        (Jitter::Decorrelated, Fixed::bottom(), ["0.100", "0.100", "0.100"]),
        (Jitter::Decorrelated, Fixed::top(), ["0.300", "0.900", "2.000"]),
    ] {
        let policy = valid(
            RetryPolicy::exponential(4, D::from_millis(100), D::from_secs(2))
                .jitter(jitter)
                .attempt_timeout(D::from_secs(1))
                .build(),
        );
        let (lines, _) =
            run(&policy, read(60_000), &mut ratio(10, 10), 0, &[Step::Fail(0, REFUSED)], &mut { rng });
        let got: Vec<&str> = lines.iter().filter(|l| l.starts_with("wait")).map(|l| &l[5..10]).collect();
        assert_eq!(got, waits, "{jitter:?} {lines:#?}");
    }
}

#[test]
fn waking_late_past_the_deadline_dispatches_nothing() {
    let mut dep = ratio(10, 10);
    let mut op =
        Operation::<HZ, Failure>::start(&POLICY, &dep.config, read(1_000), T::from_ticks(0)).unwrap();
    let mut rec = Recorder::default();
    let Action::Dispatch(a) = op.poll(T::from_ticks(0), &mut dep.state, &mut rec) else { panic!() };
    op.on_failure(a, T::from_ticks(100), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    // Asked to wait until 0.2 s, the caller oversleeps to 1.5 s.
    assert_eq!(
        op.poll(T::from_ticks(150), &mut dep.state, &mut rec),
        Action::Wait { until: T::from_ticks(200) }
    );
    assert_eq!(op.poll(T::from_ticks(1_500), &mut dep.state, &mut rec), Action::Done);
    let done = op.take_completion().unwrap();
    assert_eq!(done.problem, Some(Problem::DeadlineExceeded));
    assert_eq!(done.last_failure, Some(REFUSED));
    assert_eq!(op.take_completion(), None, "a completion is taken once");
}

#[test]
fn an_attempt_never_reported_ends_the_operation_at_its_deadline() {
    let mut dep = ratio(10, 10);
    let mut op =
        Operation::<HZ, Failure>::start(&POLICY, &dep.config, read(3_000), T::from_ticks(0)).unwrap();
    let Action::Dispatch(lost) = op.poll(T::from_ticks(0), &mut dep.state, &mut ()) else { panic!() };
    drop(lost);
    assert_eq!(
        op.poll(T::from_ticks(10), &mut dep.state, &mut ()),
        Action::Wait { until: T::from_ticks(3_000) }
    );
    assert_eq!(op.poll(T::from_ticks(3_000), &mut dep.state, &mut ()), Action::Done);
    assert_eq!(op.take_completion().unwrap().problem, Some(Problem::DeadlineExceeded));
}

#[test]
fn a_report_for_an_attempt_the_operation_does_not_have_out_is_ignored() {
    let mut dep = ratio(10, 10);
    let mut a =
        Operation::<HZ, Failure>::start(&POLICY, &dep.config, read(3_000).id(1), T::from_ticks(0)).unwrap();
    let mut b =
        Operation::<HZ, Failure>::start(&POLICY, &dep.config, read(3_000).id(2), T::from_ticks(0)).unwrap();
    let Action::Dispatch(of_a) = a.poll(T::from_ticks(0), &mut dep.state, &mut ()) else { panic!() };
    let Action::Dispatch(of_b) = b.poll(T::from_ticks(0), &mut dep.state, &mut ()) else { panic!() };
    // b is handed a's attempt: ignored; b's own attempt is still out.
    b.on_success(of_a, T::from_ticks(5), &mut dep.state, &mut ());
    assert!(!b.is_done());
    b.on_success(of_b, T::from_ticks(6), &mut dep.state, &mut ());
    assert!(b.is_done());
    assert!(!a.is_done());
}

#[test]
fn instants_near_the_end_of_time_saturate_instead_of_panicking() {
    let start = u64::MAX - 150;
    let mut dep =
        Dep::at(DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(10, 10))), start);
    let context =
        Context::new(D::from_ticks(u64::MAX), ReplaySafety::replayable_read(D::from_ticks(u64::MAX)));
    let (lines, done) = run(&POLICY, context, &mut dep, start, &[Step::Fail(10, REFUSED)], &mut Fixed::top());
    // The deadline saturated at u64::MAX ticks: 150 ms remain; the second retry's 200 ms wait does not fit.
    assert_eq!(done.problem, Some(Problem::RetryDelayExceedsDeadline), "{lines:#?}");
    assert_eq!(done.summary.dispatched, 2);
}

#[test]
fn the_observer_sees_every_event_of_a_run_once_and_in_order() {
    let mut seen: Vec<&'static str> = Vec::new();
    let mut dep = ratio(10, 10);
    let mut op =
        Operation::<HZ, Failure>::start(&POLICY, &dep.config, read(10_000), T::from_ticks(0)).unwrap();
    let mut observer = |e: &Event<HZ>| {
        seen.push(match e {
            Event::AttemptDispatched { .. } => "dispatched",
            Event::AttemptSucceeded { .. } => "succeeded",
            Event::AttemptFailed { .. } => "failed",
            Event::RetryScheduled { .. } => "scheduled",
            Event::Refused { .. } => "refused",
            Event::WaitingForRateLimit { .. } => "rate wait",
            Event::WaitingForAirtime { .. } => "airtime wait",
            Event::CircuitChanged { .. } => "circuit",
            Event::CooldownExtended { .. } => "cooldown",
            Event::Completed { .. } => "completed",
            _ => "unknown",
        })
    };
    let Action::Dispatch(a) = op.poll(T::from_ticks(0), &mut dep.state, &mut observer) else { panic!() };
    op.on_failure(a, T::from_ticks(1), &mut dep.state, &mut Fixed::top(), TIMEOUT, &mut observer);
    let Action::Dispatch(a) = op.poll(T::from_ticks(101), &mut dep.state, &mut observer) else { panic!() };
    op.on_success(a, T::from_ticks(102), &mut dep.state, &mut observer);
    assert_eq!(op.poll(T::from_ticks(102), &mut dep.state, &mut observer), Action::Done);
    assert_eq!(seen, ["dispatched", "failed", "scheduled", "dispatched", "succeeded", "completed"]);
    assert_eq!(op.take_completion().unwrap().disposition, Disposition::Succeeded);
}

/// The budget is checked when a failure is decided on and again when the retry is dispatched, and
/// charged only then (seed 000's wrapper checks and spends in one step; here a retry that waits
/// its backoff has not spent anything yet). Two operations that fail together may both be told
/// "retry"; the first to dispatch takes the window's one retry, and the other is refused at its
/// dispatch, its failure kept.
#[test]
fn a_ratio_budget_spent_while_a_retry_waits_refuses_it_at_dispatch() {
    // Floor 1, no share: one retry per 10 s for the whole dependency.
    let mut dep = ratio(0, 1);
    let mut rec = Recorder::tagged();
    let t = T::from_ticks;
    let mut a = Operation::start(&POLICY, &dep.config, read(10_000).id(1), t(0)).unwrap();
    let mut b = Operation::start(&POLICY, &dep.config, read(10_000).id(2), t(0)).unwrap();
    let Action::Dispatch(a1) = a.poll(t(0), &mut dep.state, &mut rec) else { panic!() };
    let Action::Dispatch(b1) = b.poll(t(0), &mut dep.state, &mut rec) else { panic!() };
    a.on_failure(a1, t(10), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    b.on_failure(b1, t(20), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    assert_eq!(a.poll(t(10), &mut dep.state, &mut rec), Action::Wait { until: t(110) });
    assert_eq!(b.poll(t(20), &mut dep.state, &mut rec), Action::Wait { until: t(120) });
    let Action::Dispatch(a2) = a.poll(t(110), &mut dep.state, &mut rec) else { panic!() };
    assert_eq!(b.poll(t(120), &mut dep.state, &mut rec), Action::Done);
    a.on_success(a2, t(130), &mut dep.state, &mut rec);
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op2: 0.000 dispatch #1 timeout 1.000",
            "op1: 0.010 #1 failed (retryable): retry",
            "op1: wait 0.100 (backoff 0.100) until 0.110 for #2",
            "op2: 0.020 #1 failed (retryable): retry",
            "op2: wait 0.100 (backoff 0.100) until 0.120 for #2",
            "op1: 0.110 dispatch #2 timeout 1.000",
            "op2: 0.120 refused #2: retry_budget_exhausted",
            "op2: 0.120 done: failed, retry_budget_exhausted after 1 dispatched",
            "op1: 0.130 #2 succeeded",
            "op1: 0.130 done: succeeded after 2 dispatched",
        ]
    );
    let done = b.take_completion().unwrap();
    assert_eq!(done.last_failure, Some(REFUSED), "the failure that was to be retried is kept");
}

/// `retries_available` for a ratio budget: how many retries in a row the window would allow now,
/// each counted as a call too (the largest k with 100 × (retries + k) ≤ 100 × floor + percent ×
/// (calls + k)).
#[test]
fn a_ratio_budget_says_how_many_retries_it_would_allow() {
    // 10 % of calls, plus 2 a window.
    let mut dep = ratio(10, 2);
    assert_eq!(dep.state.retries_available(&dep.config, T::from_ticks(0)), Some(2), "the floor alone");
    for n in 0..50 {
        let (_, done) = run(&POLICY, read(10_000), &mut dep, 10 * n, &[Step::Ok(5)], &mut Fixed::top());
        assert!(done.is_success());
    }
    // 50 calls: 7 retries, which would make 57 calls, of which 5.7 may be retries, plus 2.
    assert_eq!(dep.state.retries_available(&dep.config, T::from_ticks(500)), Some(7));
    let (_, done) = run(
        &POLICY,
        read(10_000),
        &mut dep,
        1_000,
        &[Step::Fail(10, REFUSED), Step::Ok(5)],
        &mut Fixed::top(),
    );
    assert!(done.is_success());
    // 52 calls, 1 of them a retry.
    assert_eq!(dep.state.retries_available(&dep.config, T::from_ticks(1_200)), Some(6));
    // Once the window has slid past them all, the floor alone again.
    assert_eq!(dep.state.retries_available(&dep.config, T::from_ticks(12_000)), Some(2));
}
