//! Transcripts of the protections (circuit breaker, bulkhead, rate limiter, cooldown) and of how
//! they interact with retries, on a virtual clock. Lines are tagged with their operation.

use relent_core::{
    Action, Attempt, BreakerConfig, CircuitState, ConfigError, Context, Dependency, DependencyConfig,
    Disposition, Instant, Jitter, Operation, Problem, RateLimit, ReplaySafety, RetryBudget, RetryPolicy,
    Verdict,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, Dep, Failure, HZ, Recorder, T, valid};

const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(4, D::from_millis(100), D::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(D::from_secs(1))
        .build(),
);

const REFUSED: Failure = Failure { name: "refused", verdict: Verdict::Retryable };

fn base() -> DependencyConfig<HZ> {
    DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(10, 10)))
}

fn read(id: u64) -> Context<HZ> {
    Context::new(D::from_secs(60), ReplaySafety::replayable_read(D::from_secs(3600))).id(id)
}

fn t(ms: u64) -> Instant<HZ> {
    T::from_ticks(ms)
}

#[track_caller]
fn dispatch(
    op: &mut Operation<'_, HZ, Failure>,
    ms: u64,
    state: &mut Dependency<HZ, 10, 8>,
    rec: &mut Recorder,
) -> Attempt<HZ> {
    match op.poll(t(ms), state, rec) {
        Action::Dispatch(a) => a,
        other => panic!("expected a dispatch at {ms} ms, got {other:?}\n{:#?}", rec.lines),
    }
}

#[track_caller]
fn done(op: &mut Operation<'_, HZ, Failure>, ms: u64, state: &mut Dependency<HZ, 10, 8>, rec: &mut Recorder) {
    assert_eq!(op.poll(t(ms), state, rec), Action::Done, "{:#?}", rec.lines);
}

#[test]
fn a_breaker_that_opens_mid_operation_turns_the_next_retry_into_circuit_open_with_the_last_failure_kept() {
    let mut dep = Dep::new(base().breaker(BreakerConfig::consecutive_failures(2, D::from_secs(30))));
    let mut rec = Recorder::tagged();
    let mut a = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_failure(x, t(10), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    let x = dispatch(&mut a, 110, &mut dep.state, &mut rec);
    a.on_failure(x, t(120), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    done(&mut a, 120, &mut dep.state, &mut rec);
    let completion = a.take_completion().unwrap();
    assert_eq!(completion.disposition, Disposition::Rejected);
    assert_eq!(completion.problem, Some(Problem::CircuitOpen));
    assert_eq!(completion.last_failure, Some(REFUSED));
    assert_eq!(completion.not_before, Some(t(30_120)));

    // The next operation is refused without a call, then a probe closes the circuit after the break.
    let mut b = Operation::start(&POLICY, &dep.config, read(2), t(1_000)).unwrap();
    done(&mut b, 1_000, &mut dep.state, &mut rec);
    assert_eq!(b.take_completion().unwrap().summary.dispatched, 0);
    let mut c = Operation::start(&POLICY, &dep.config, read(3), t(30_120)).unwrap();
    let x = dispatch(&mut c, 30_120, &mut dep.state, &mut rec);
    c.on_success(x, t(30_125), &mut dep.state, &mut rec);
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op1: 0.010 #1 failed (retryable): retry",
            "op1: wait 0.100 (backoff 0.100) until 0.110 for #2",
            "op1: 0.110 dispatch #2 timeout 1.000",
            "op1: 0.120 #2 failed (retryable): stop: circuit_open",
            "op1: 0.120 circuit open",
            "op1: 0.120 refused #3: circuit_open (retry at 30.120)",
            "op1: 0.120 done: rejected, circuit_open after 2 dispatched",
            "op2: 1.000 refused #1: circuit_open (retry at 30.120)",
            "op2: 1.000 done: rejected, circuit_open after 0 dispatched",
            "op3: 30.120 circuit half_open",
            "op3: 30.120 dispatch #1 timeout 1.000",
            "op3: 30.125 #1 succeeded",
            "op3: 30.125 circuit closed",
            "op3: 30.125 done: succeeded after 1 dispatched",
        ]
    );
}

#[test]
fn a_bulkhead_slot_is_free_during_a_retry_delay_and_refused_while_taken() {
    let mut dep = Dep::new(base().bulkhead(1));
    let mut rec = Recorder::tagged();
    let mut a = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let mut b = Operation::start(&POLICY, &dep.config, read(2), t(0)).unwrap();
    let mut c = Operation::start(&POLICY, &dep.config, read(3), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    assert_eq!(dep.state.in_flight(), 1);
    a.on_failure(x, t(10), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    assert_eq!(dep.state.in_flight(), 0, "nothing is held while op1 waits to retry");
    let y = dispatch(&mut b, 50, &mut dep.state, &mut rec);
    done(&mut c, 55, &mut dep.state, &mut rec);
    b.on_success(y, t(60), &mut dep.state, &mut rec);
    let x = dispatch(&mut a, 110, &mut dep.state, &mut rec);
    a.on_success(x, t(115), &mut dep.state, &mut rec);
    assert_eq!(dep.state.in_flight(), 0);
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op1: 0.010 #1 failed (retryable): retry",
            "op1: wait 0.100 (backoff 0.100) until 0.110 for #2",
            "op2: 0.050 dispatch #1 timeout 1.000",
            "op3: 0.055 refused #1: bulkhead_full",
            "op3: 0.055 done: rejected, bulkhead_full after 0 dispatched",
            "op2: 0.060 #1 succeeded",
            "op2: 0.060 done: succeeded after 1 dispatched",
            "op1: 0.110 dispatch #2 timeout 1.000",
            "op1: 0.115 #2 succeeded",
            "op1: 0.115 done: succeeded after 2 dispatched",
        ]
    );
}

#[test]
fn every_retry_costs_a_rate_limit_unit() {
    // 3 units per 10 s, all 3 at once if need be.
    let mut dep = Dep::new(base().rate_limit(RateLimit::new(3, D::from_secs(10)).burst(3)));
    let mut rec = Recorder::tagged();
    let mut a = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    for (go, fail) in [(0, 10), (110, 120)] {
        let x = dispatch(&mut a, go, &mut dep.state, &mut rec);
        a.on_failure(x, t(fail), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    }
    let x = dispatch(&mut a, 320, &mut dep.state, &mut rec);
    a.on_success(x, t(330), &mut dep.state, &mut rec);
    // Three attempts, three units: the next operation finds none until the first is due again.
    let mut b = Operation::start(&POLICY, &dep.config, read(2), t(500)).unwrap();
    done(&mut b, 500, &mut dep.state, &mut rec);
    assert_eq!(
        rec.lines[rec.lines.len() - 2..],
        [
            "op2: 0.500 refused #1: rate_limited (retry at 3.334)",
            "op2: 0.500 done: rejected, rate_limited after 0 dispatched"
        ]
    );
    assert_eq!(b.take_completion().unwrap().not_before, Some(t(3_334)));
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(500)), t(3_334));
}

#[test]
fn a_rate_unit_due_soon_enough_is_reserved_and_waited_for_holding_nothing_else() {
    let limit = RateLimit::new(1, D::from_secs(1)).max_wait(D::from_secs(2));
    let mut dep = Dep::new(base().rate_limit(limit).bulkhead(1));
    let mut rec = Recorder::tagged();
    let mut a = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let mut b = Operation::start(&POLICY, &dep.config, read(2), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_success(x, t(5), &mut dep.state, &mut rec);
    assert_eq!(b.poll(t(100), &mut dep.state, &mut rec), Action::Wait { until: t(1_000) });
    assert_eq!(dep.state.in_flight(), 0, "no slot is held while waiting for the unit");
    // Another operation cannot take the reserved unit: the next one is due at 2.0 s.
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(100)), t(2_000));
    let y = dispatch(&mut b, 1_000, &mut dep.state, &mut rec);
    b.on_success(y, t(1_010), &mut dep.state, &mut rec);
    // A wait that does not fit before the deadline is refused instead.
    let short = Context::new(D::from_millis(500), ReplaySafety::replayable_read(D::from_secs(3600))).id(3);
    let mut c = Operation::start(&POLICY, &dep.config, short, t(1_100)).unwrap();
    done(&mut c, 1_100, &mut dep.state, &mut rec);
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op1: 0.005 #1 succeeded",
            "op1: 0.005 done: succeeded after 1 dispatched",
            "op2: wait for a rate unit until 1.000 for #1",
            "op2: 1.000 dispatch #1 timeout 1.000",
            "op2: 1.010 #1 succeeded",
            "op2: 1.010 done: succeeded after 1 dispatched",
            "op3: 1.100 refused #1: rate_limited (retry at 2.000)",
            "op3: 1.100 done: rejected, rate_limited after 0 dispatched",
        ]
    );
}

#[test]
fn a_rate_unit_due_exactly_at_the_longest_wait_or_the_last_start_is_waited_for() {
    // One unit a second, waited for up to 0.9 s.
    let limit = RateLimit::new(1, D::from_secs(1)).max_wait(D::from_millis(900));
    let mut dep = Dep::new(base().rate_limit(limit));
    let mut rec = Recorder::tagged();
    let mut a = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_success(x, t(5), &mut dep.state, &mut rec);
    // At 0.1 s the next unit is due at 1.0 s: a wait of exactly the 0.9 s allowed.
    let mut b = Operation::start(&POLICY, &dep.config, read(2), t(100)).unwrap();
    assert_eq!(b.poll(t(100), &mut dep.state, &mut rec), Action::Wait { until: t(1_000) });
    let y = dispatch(&mut b, 1_000, &mut dep.state, &mut rec);
    b.on_success(y, t(1_010), &mut dep.state, &mut rec);
    // At 1.1 s the next is due at 2.0 s, and a 0.901 s deadline makes 2.0 s the last instant an
    // attempt can start (one tick before the deadline): waited for, with that tick as its timeout.
    let last = Context::new(D::from_millis(901), ReplaySafety::replayable_read(D::from_secs(3600))).id(3);
    let mut c = Operation::start(&POLICY, &dep.config, last, t(1_100)).unwrap();
    assert_eq!(c.poll(t(1_100), &mut dep.state, &mut rec), Action::Wait { until: t(2_000) });
    let z = dispatch(&mut c, 2_000, &mut dep.state, &mut rec);
    assert_eq!(z.timeout(), D::from_millis(1));
}

#[test]
fn a_thirty_second_retry_after_puts_the_dependency_in_cooldown_so_the_next_operation_is_deferred_unsent() {
    let mut dep = Dep::new(base().cooldown(D::from_secs(60)));
    let mut rec = Recorder::tagged();
    let busy = Failure { name: "503", verdict: Verdict::RetryableAfter(D::from_secs(30)) };
    let mut a = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_failure(x, t(10), &mut dep.state, &mut Fixed::top(), busy, &mut rec);
    let mut b = Operation::start(&POLICY, &dep.config, read(2), t(1_000)).unwrap();
    done(&mut b, 1_000, &mut dep.state, &mut rec);
    let deferred = b.take_completion().unwrap();
    assert_eq!(deferred.disposition, Disposition::Deferred);
    assert_eq!(deferred.summary.dispatched, 0);
    assert_eq!(deferred.not_before, Some(t(30_010)));
    let mut c = Operation::start(&POLICY, &dep.config, read(3), t(30_010)).unwrap();
    let _ = dispatch(&mut c, 30_010, &mut dep.state, &mut rec);
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op1: 0.010 #1 failed (retryable after 30.000): stop: retry_after_exceeds_maximum_delay",
            "op1: 0.010 cooldown until 30.010",
            "op1: 0.010 done: deferred, retry_after_exceeds_maximum_delay after 1 dispatched",
            "op2: 1.000 refused #1: cooldown_active (retry at 30.010)",
            "op2: 1.000 done: deferred, cooldown_active after 0 dispatched",
            "op3: 30.010 dispatch #1 timeout 1.000",
        ]
    );
}

#[test]
fn a_retry_after_that_is_honoured_ends_exactly_when_the_cooldown_does() {
    // The operation that was told to wait 1 s is not refused by the cooldown its own answer started.
    let mut dep = Dep::new(base().cooldown(D::from_secs(60)));
    let mut rec = Recorder::tagged();
    let busy = Failure { name: "503", verdict: Verdict::RetryableAfter(D::from_secs(1)) };
    let mut a = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_failure(x, t(10), &mut dep.state, &mut Fixed::top(), busy, &mut rec);
    let x = dispatch(&mut a, 1_010, &mut dep.state, &mut rec);
    a.on_success(x, t(1_020), &mut dep.state, &mut rec);
    assert!(a.take_completion().unwrap().is_success());
}

#[test]
fn half_open_admits_only_its_probes_and_their_successes_close_the_circuit() {
    let mut dep =
        Dep::new(base().breaker(BreakerConfig::consecutive_failures(1, D::from_secs(10)).probes(2)));
    let mut rec = Recorder::tagged();
    let once = valid(RetryPolicy::single_attempt().build());
    let mut a = Operation::start(&once, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_failure(x, t(1), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    assert_eq!(dep.state.circuit_open_until(t(10_000)), Some(t(10_001)));
    assert_eq!(dep.state.circuit_open_until(t(10_001)), None, "half-open from its end");
    let mut probes: Vec<_> =
        (2..=4).map(|id| Operation::start(&POLICY, &dep.config, read(id), t(10_001)).unwrap()).collect();
    let p1 = dispatch(&mut probes[0], 10_001, &mut dep.state, &mut rec);
    let p2 = dispatch(&mut probes[1], 10_001, &mut dep.state, &mut rec);
    done(&mut probes[2], 10_001, &mut dep.state, &mut rec);
    assert_eq!(dep.state.circuit(t(10_001)), CircuitState::HalfOpen);
    probes[0].on_success(p1, t(10_010), &mut dep.state, &mut rec);
    assert_eq!(dep.state.circuit(t(10_010)), CircuitState::HalfOpen, "one of two probes succeeded");
    probes[1].on_success(p2, t(10_020), &mut dep.state, &mut rec);
    assert_eq!(dep.state.circuit(t(10_020)), CircuitState::Closed);
    assert_eq!(
        rec.lines[4..],
        [
            "op2: 10.001 circuit half_open",
            "op2: 10.001 dispatch #1 timeout 1.000",
            "op3: 10.001 dispatch #1 timeout 1.000",
            "op4: 10.001 refused #1: circuit_open",
            "op4: 10.001 done: rejected, circuit_open after 0 dispatched",
            "op2: 10.010 #1 succeeded",
            "op2: 10.010 done: succeeded after 1 dispatched",
            "op3: 10.020 #1 succeeded",
            "op3: 10.020 circuit closed",
            "op3: 10.020 done: succeeded after 1 dispatched",
        ]
    );
}

#[test]
fn a_slow_success_counts_as_a_failure_for_the_breaker() {
    let breaker = BreakerConfig::consecutive_failures(1, D::from_secs(10)).slow_calls(D::from_millis(500));
    let mut dep = Dep::new(base().breaker(breaker));
    let mut rec = Recorder::tagged();
    let mut a = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_success(x, t(600), &mut dep.state, &mut rec);
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op1: 0.600 #1 succeeded",
            "op1: 0.600 circuit open",
            "op1: 0.600 done: succeeded after 1 dispatched",
        ]
    );
    assert!(a.take_completion().unwrap().is_success(), "the caller still gets its (slow) success");
}

#[test]
fn the_failure_ratio_breaker_reads_the_same_window_as_the_ratio_budget() {
    // 50 % of at least 4 calls in the dependency's one window.
    let mut dep = Dep::new(base().breaker(BreakerConfig::failure_ratio(50, 4, D::from_secs(5))));
    let once = valid(RetryPolicy::single_attempt().build());
    let mut rec = Recorder::tagged();
    for (id, fails) in [(1, false), (2, true), (3, false)] {
        let mut op = Operation::start(&once, &dep.config, read(id), t(id)).unwrap();
        let x = dispatch(&mut op, id, &mut dep.state, &mut rec);
        if fails {
            op.on_failure(x, t(id), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
        } else {
            op.on_success(x, t(id), &mut dep.state, &mut rec);
        }
    }
    assert_eq!(dep.state.circuit(t(3)), CircuitState::Closed, "1 failure of 3 calls");
    let mut op = Operation::start(&once, &dep.config, read(4), t(4)).unwrap();
    let x = dispatch(&mut op, 4, &mut dep.state, &mut rec);
    op.on_failure(x, t(4), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    assert_eq!(dep.state.circuit(t(4)), CircuitState::Open, "2 failures of 4 calls");
    let counts = dep.state.counts(t(4));
    assert_eq!((counts.calls, counts.failures), (4, 2), "one set of counts");
}

#[test]
fn a_circuit_that_closes_forgets_the_failures_that_opened_it() {
    // The window (10 s) outlasts the open state (5 s): the failures that opened the circuit are still
    // in it when the probe closes the circuit. Counted again, they would reopen it at the next failure.
    let mut dep = Dep::new(base().breaker(BreakerConfig::failure_ratio(50, 4, D::from_secs(5))));
    let once = valid(RetryPolicy::single_attempt().build());
    let mut rec = Recorder::tagged();
    let mut call = |id: u64, ms: u64, fails: bool, dep: &mut Dep| {
        let mut op = Operation::start(&once, &dep.config, read(id), t(ms)).unwrap();
        let x = dispatch(&mut op, ms, &mut dep.state, &mut rec);
        if fails {
            op.on_failure(x, t(ms), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
        } else {
            op.on_success(x, t(ms), &mut dep.state, &mut rec);
        }
    };
    for (id, fails) in [(1, false), (2, true), (3, false), (4, true)] {
        call(id, id, fails, &mut dep);
    }
    assert_eq!(dep.state.circuit(t(4)), CircuitState::Open, "2 failures of 4 calls");
    call(5, 5_004, false, &mut dep);
    assert_eq!(dep.state.circuit(t(5_004)), CircuitState::Closed, "the probe succeeded");
    let counts = dep.state.counts(t(5_004));
    assert_eq!((counts.calls, counts.failures), (5, 0), "the calls stay; the failures are forgotten");
    call(6, 5_010, true, &mut dep);
    let counts = dep.state.counts(t(5_010));
    assert_eq!((counts.calls, counts.failures), (6, 1));
    assert_eq!(
        dep.state.circuit(t(5_010)),
        CircuitState::Closed,
        "1 failure of 6 calls since it closed (3 of 6 with the old ones counted: 50 %, open again)"
    );
}

#[test]
fn the_protections_are_consulted_in_their_order_and_a_refusal_takes_nothing() {
    let config = base()
        .cooldown(D::from_secs(60))
        .breaker(BreakerConfig::consecutive_failures(1, D::from_secs(10)))
        .bulkhead(1)
        .rate_limit(RateLimit::new(10, D::from_secs(1)).burst(10));
    let mut dep = Dep::new(config);
    let once = valid(RetryPolicy::single_attempt().build());
    let mut rec = Recorder::tagged();
    // Op 1 holds the only bulkhead slot; op 2 is refused for it and spends no rate unit.
    let mut holder = Operation::start(&once, &dep.config, read(1), t(0)).unwrap();
    let held = dispatch(&mut holder, 0, &mut dep.state, &mut rec);
    let unit_before = dep.state.next_rate_unit(&dep.config, t(0));
    let mut second = Operation::start(&once, &dep.config, read(2), t(0)).unwrap();
    done(&mut second, 0, &mut dep.state, &mut rec);
    assert_eq!(second.take_completion().unwrap().problem, Some(Problem::BulkheadFull));
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(0)), unit_before, "no unit spent on a refusal");
    // Op 1 fails with a Retry-After: the circuit opens and the cooldown starts. The cooldown is
    // consulted first.
    let busy = Failure { name: "503", verdict: Verdict::RetryableAfter(D::from_secs(5)) };
    holder.on_failure(held, t(10), &mut dep.state, &mut Fixed::top(), busy, &mut rec);
    let mut third = Operation::start(&once, &dep.config, read(3), t(20)).unwrap();
    done(&mut third, 20, &mut dep.state, &mut rec);
    assert_eq!(third.take_completion().unwrap().problem, Some(Problem::CooldownActive));
    // After the cooldown, the circuit (open for 10 s) is next.
    let mut fourth = Operation::start(&once, &dep.config, read(4), t(5_010)).unwrap();
    done(&mut fourth, 5_010, &mut dep.state, &mut rec);
    assert_eq!(fourth.take_completion().unwrap().problem, Some(Problem::CircuitOpen));
}

#[test]
fn abandoning_an_operation_gives_back_its_slot_and_its_probe() {
    let config = base().bulkhead(1).breaker(BreakerConfig::consecutive_failures(1, D::from_secs(1)));
    let mut dep = Dep::new(config);
    let once = valid(RetryPolicy::single_attempt().build());
    let mut rec = Recorder::tagged();
    let mut a = Operation::start(&once, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_failure(x, t(1), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    // Half-open at 1.001: a probe goes out, then its caller is cancelled.
    let mut b = Operation::start(&once, &dep.config, read(2), t(1_001)).unwrap();
    let lost = dispatch(&mut b, 1_001, &mut dep.state, &mut rec);
    drop(lost);
    assert_eq!(dep.state.in_flight(), 1);
    b.abandon(t(1_002), &mut dep.state, &mut rec);
    assert_eq!(dep.state.in_flight(), 0);
    assert_eq!(b.take_completion().unwrap().problem, Some(Problem::Cancelled));
    // The probe was given back: another may go.
    let mut c = Operation::start(&once, &dep.config, read(3), t(1_003)).unwrap();
    let _ = dispatch(&mut c, 1_003, &mut dep.state, &mut rec);
    // An operation that has ended is not cancelled by a late abandon (a future dropped after its
    // operation ended), whether or not its completion was taken: no event, nothing changed.
    let events = rec.lines.len();
    a.abandon(t(1_004), &mut dep.state, &mut rec);
    b.abandon(t(1_004), &mut dep.state, &mut rec);
    assert_eq!(rec.lines.len(), events);
    assert_eq!(dep.state.in_flight(), 1, "c's attempt holds the slot still");
    assert_eq!(a.take_completion().unwrap().problem, Some(Problem::AttemptsExhausted));
}

/// One rate unit every 10 s, waited for up to 30 s, and the unit at 0 taken by a call that
/// succeeded: the next is due at 10 s.
fn one_unit_every_10s_the_first_taken() -> (Dep, Recorder) {
    let limit = RateLimit::new(1, D::from_secs(10)).max_wait(D::from_secs(30));
    let mut dep = Dep::new(base().rate_limit(limit));
    let once = valid(RetryPolicy::single_attempt().build());
    let mut rec = Recorder::tagged();
    let mut a = Operation::<HZ, Failure>::start(&once, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_success(x, t(5), &mut dep.state, &mut rec);
    (dep, rec)
}

/// A rate unit reserved for an attempt whose operation is cancelled while it waits is given back
/// when it is the last unit taken: the next operation waits for the unit it would have had. One
/// reserved before another that is still waiting stays spent (giving it back could let two units
/// go closer than the limit allows), until that later one is given back too.
#[test]
fn a_rate_unit_reserved_by_a_cancelled_operation_is_given_back_when_it_is_the_last_taken() {
    let (mut dep, mut rec) = one_unit_every_10s_the_first_taken();
    let once = valid(RetryPolicy::single_attempt().build());
    let mut b = Operation::<HZ, Failure>::start(&once, &dep.config, read(2), t(1_000)).unwrap();
    assert_eq!(b.poll(t(1_000), &mut dep.state, &mut rec), Action::Wait { until: t(10_000) });
    b.abandon(t(2_000), &mut dep.state, &mut rec);
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(2_000)), t(10_000), "b's unit is free again");

    // c reserves the unit at 10 s and d the one at 20 s; c is cancelled first: its unit stays spent.
    let mut c = Operation::<HZ, Failure>::start(&once, &dep.config, read(3), t(3_000)).unwrap();
    assert_eq!(c.poll(t(3_000), &mut dep.state, &mut rec), Action::Wait { until: t(10_000) });
    let mut d = Operation::<HZ, Failure>::start(&once, &dep.config, read(4), t(3_000)).unwrap();
    assert_eq!(d.poll(t(3_000), &mut dep.state, &mut rec), Action::Wait { until: t(20_000) });
    c.abandon(t(4_000), &mut dep.state, &mut rec);
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(4_000)), t(30_000));
    // d, the last taken, is given back: the next unit is the one d had, at 20 s.
    d.abandon(t(5_000), &mut dep.state, &mut rec);
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(5_000)), t(20_000));
    assert_eq!(d.take_completion().unwrap().problem, Some(Problem::Cancelled));
}

/// An operation cancelled during a backoff holds no rate unit, and gives none back: not even
/// when the last unit taken, another operation's, is due at the instant its retry was.
#[test]
fn an_operation_cancelled_in_its_backoff_gives_back_no_one_else_s_rate_unit() {
    let limit = RateLimit::new(1, D::from_secs(10)).max_wait(D::from_secs(30));
    let mut dep = Dep::new(base().rate_limit(limit));
    let every_10s = valid(RetryPolicy::constant(2, D::from_secs(10)).jitter(Jitter::None).build());
    let mut rec = Recorder::tagged();
    let mut a = Operation::start(&every_10s, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_failure(x, t(0), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    assert_eq!(a.poll(t(0), &mut dep.state, &mut rec), Action::Wait { until: t(10_000) });
    // b reserves the unit at 10 s, the instant a's retry is due.
    let mut b = Operation::<HZ, Failure>::start(&every_10s, &dep.config, read(2), t(20)).unwrap();
    assert_eq!(b.poll(t(20), &mut dep.state, &mut rec), Action::Wait { until: t(10_000) });
    a.abandon(t(5_000), &mut dep.state, &mut rec);
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(5_000)), t(20_000), "b's unit is still b's");
}

/// An operation whose deadline runs out while it waits for a reserved unit (its caller polls it
/// late) gives the unit back as a cancelled one does: the attempt never went.
#[test]
fn a_rate_unit_reserved_by_an_operation_that_ran_out_of_time_is_given_back() {
    let (mut dep, mut rec) = one_unit_every_10s_the_first_taken();
    let once = valid(RetryPolicy::single_attempt().build());
    let short = Context::new(D::from_secs(12), ReplaySafety::replayable_read(D::from_secs(3600))).id(2);
    let mut b = Operation::<HZ, Failure>::start(&once, &dep.config, short, t(1_000)).unwrap();
    assert_eq!(b.poll(t(1_000), &mut dep.state, &mut rec), Action::Wait { until: t(10_000) });
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(1_000)), t(20_000));
    // Polled at 13 s, after its deadline at 13 s: it ends unsent, and its unit at 10 s is given back.
    done(&mut b, 13_000, &mut dep.state, &mut rec);
    assert_eq!(b.take_completion().unwrap().problem, Some(Problem::DeadlineExceeded));
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(13_000)), t(13_000));
}

#[test]
fn bad_protections_are_refused_with_their_codes() {
    let d = D::from_secs(1);
    let check = |config: DependencyConfig<HZ>| Dependency::<HZ, 10>::new(&config, t(0)).map(|_| ());
    assert_eq!(check(base().bulkhead(0)), Err(ConfigError::ZeroBulkhead));
    assert_eq!(check(base().rate_limit(RateLimit::new(0, d))), Err(ConfigError::ZeroRate));
    assert_eq!(
        check(base().rate_limit(RateLimit::new(1, D::from_ticks(0)))),
        Err(ConfigError::ZeroRatePeriod)
    );
    assert_eq!(check(base().rate_limit(RateLimit::new(1, d).burst(0))), Err(ConfigError::ZeroRateBurst));
    assert_eq!(
        check(base().breaker(BreakerConfig::failure_ratio(150, 1, d))),
        Err(ConfigError::BreakerPercentOutOfRange)
    );
    assert_eq!(
        check(base().breaker(BreakerConfig::consecutive_failures(1, d).probes(0))),
        Err(ConfigError::BreakerZeroProbes)
    );
    assert_eq!(
        ConfigError::BreakerZeroProbes.to_string(),
        "a circuit breaker needs at least 1 half-open probe, or it can never close again"
    );
}

/// A breaker that needs five failures in a row, so that these tests' single failures never trip it.
fn guarded() -> Dep {
    Dep::new(base().breaker(BreakerConfig::consecutive_failures(5, D::from_secs(30))))
}

#[test]
fn an_isolated_circuit_refuses_every_attempt_with_circuit_isolated_and_no_time_to_try_again_until_closed() {
    let mut dep = guarded();
    let mut rec = Recorder::tagged();
    assert_eq!(dep.state.isolate_circuit(&dep.config), Ok(Some(CircuitState::Isolated)));
    assert_eq!(dep.state.isolate_circuit(&dep.config), Ok(None), "isolated already");
    for (id, ms) in [(1, 0), (2, 3_600_000)] {
        let mut op = Operation::start(&POLICY, &dep.config, read(id), t(ms)).unwrap();
        done(&mut op, ms, &mut dep.state, &mut rec);
        let completion = op.take_completion().unwrap();
        assert_eq!(
            (completion.disposition, completion.problem, completion.not_before),
            (Disposition::Rejected, Some(Problem::CircuitIsolated), None)
        );
        assert_eq!(dep.state.circuit(t(ms)), CircuitState::Isolated, "an hour changes nothing");
        assert_eq!(dep.state.circuit_open_until(t(ms)), None, "no end to wait for");
    }
    assert_eq!(dep.state.close_circuit(&dep.config), Ok(Some(CircuitState::Closed)));
    let mut op = Operation::start(&POLICY, &dep.config, read(3), t(3_600_001)).unwrap();
    let x = dispatch(&mut op, 3_600_001, &mut dep.state, &mut rec);
    op.on_success(x, t(3_600_002), &mut dep.state, &mut rec);
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 refused #1: circuit_isolated",
            "op1: 0.000 done: rejected, circuit_isolated after 0 dispatched",
            "op2: 3600.000 refused #1: circuit_isolated",
            "op2: 3600.000 done: rejected, circuit_isolated after 0 dispatched",
            "op3: 3600.001 dispatch #1 timeout 1.000",
            "op3: 3600.002 #1 succeeded",
            "op3: 3600.002 done: succeeded after 1 dispatched",
        ]
    );
}

#[test]
fn an_isolation_while_an_attempt_is_out_ends_the_operation_at_its_failure_with_the_failure_kept() {
    let mut dep = guarded();
    let mut rec = Recorder::tagged();
    let mut op = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut op, 0, &mut dep.state, &mut rec);
    dep.state.isolate_circuit(&dep.config).unwrap();
    op.on_failure(x, t(10), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    done(&mut op, 10, &mut dep.state, &mut rec);
    let completion = op.take_completion().unwrap();
    assert_eq!(
        (completion.disposition, completion.problem, completion.not_before, completion.last_failure),
        (Disposition::Rejected, Some(Problem::CircuitIsolated), None, Some(REFUSED))
    );
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op1: 0.010 #1 failed (retryable): stop: circuit_isolated",
            "op1: 0.010 refused #2: circuit_isolated",
            "op1: 0.010 done: rejected, circuit_isolated after 1 dispatched",
        ],
        "no backoff waited out for a retry that could not go"
    );
}

#[test]
fn an_isolation_during_a_backoff_refuses_the_retry_when_it_is_due_with_the_failure_kept() {
    let mut dep = guarded();
    let mut rec = Recorder::tagged();
    let mut op = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut op, 0, &mut dep.state, &mut rec);
    op.on_failure(x, t(10), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    dep.state.isolate_circuit(&dep.config).unwrap();
    done(&mut op, 110, &mut dep.state, &mut rec);
    let completion = op.take_completion().unwrap();
    assert_eq!(
        (completion.disposition, completion.problem, completion.last_failure),
        (Disposition::Rejected, Some(Problem::CircuitIsolated), Some(REFUSED))
    );
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op1: 0.010 #1 failed (retryable): retry",
            "op1: wait 0.100 (backoff 0.100) until 0.110 for #2",
            "op1: 0.110 refused #2: circuit_isolated",
            "op1: 0.110 done: rejected, circuit_isolated after 1 dispatched",
        ]
    );
}

#[test]
fn a_probe_out_when_the_circuit_is_isolated_counts_for_nothing_and_closing_takes_calls_at_once() {
    let mut dep = Dep::new(base().breaker(BreakerConfig::consecutive_failures(1, D::from_secs(5))));
    let mut rec = Recorder::tagged();
    let once = valid(RetryPolicy::single_attempt().build());
    let mut a = Operation::start(&once, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_failure(x, t(1), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    let mut probe = Operation::start(&once, &dep.config, read(2), t(5_001)).unwrap();
    let p = dispatch(&mut probe, 5_001, &mut dep.state, &mut rec);
    assert_eq!(dep.state.isolate_circuit(&dep.config), Ok(Some(CircuitState::Isolated)));
    probe.on_success(p, t(5_005), &mut dep.state, &mut rec);
    assert_eq!(dep.state.circuit(t(5_005)), CircuitState::Isolated, "the probe's success closes nothing");

    // Closing starts the counts afresh: the failure that opened the circuit is forgotten, the
    // calls are not.
    let counts = dep.state.counts(t(5_005));
    assert_eq!((counts.calls, counts.failures), (2, 1));
    assert_eq!(dep.state.close_circuit(&dep.config), Ok(Some(CircuitState::Closed)));
    let counts = dep.state.counts(t(5_005));
    assert_eq!((counts.calls, counts.failures), (2, 0));
    let mut b = Operation::start(&once, &dep.config, read(3), t(5_006)).unwrap();
    let x = dispatch(&mut b, 5_006, &mut dep.state, &mut rec);
    b.on_success(x, t(5_007), &mut dep.state, &mut rec);
    assert_eq!(b.take_completion().unwrap().disposition, Disposition::Succeeded);
    assert_eq!(
        rec.lines[4..],
        [
            "op2: 5.001 circuit half_open",
            "op2: 5.001 dispatch #1 timeout 60.000",
            "op2: 5.005 #1 succeeded",
            "op2: 5.005 done: succeeded after 1 dispatched",
            "op3: 5.006 dispatch #1 timeout 60.000",
            "op3: 5.007 #1 succeeded",
            "op3: 5.007 done: succeeded after 1 dispatched",
        ],
        "the probe's success is reported to its caller, and changes no circuit"
    );
}

#[test]
fn closing_an_open_circuit_lets_calls_through_before_its_break_ends() {
    let mut dep = Dep::new(base().breaker(BreakerConfig::consecutive_failures(1, D::from_secs(30))));
    let mut rec = Recorder::tagged();
    let once = valid(RetryPolicy::single_attempt().build());
    let mut a = Operation::start(&once, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_failure(x, t(1), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    assert_eq!(dep.state.circuit_open_until(t(1)), Some(t(30_001)));
    assert_eq!(dep.state.close_circuit(&dep.config), Ok(Some(CircuitState::Closed)));
    assert_eq!(dep.state.close_circuit(&dep.config), Ok(None), "closed already");
    assert_eq!(dep.state.circuit_open_until(t(2)), None);
    let mut b = Operation::start(&once, &dep.config, read(2), t(2)).unwrap();
    let x = dispatch(&mut b, 2, &mut dep.state, &mut rec);
    // One failure trips it again: the run of failures started afresh at one, not at two.
    b.on_failure(x, t(3), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    assert_eq!(dep.state.circuit_open_until(t(3)), Some(t(30_003)));
}

#[test]
fn a_dependency_without_a_breaker_has_no_circuit_to_isolate_or_close_and_says_how_to_get_one() {
    let mut dep = Dep::new(base());
    assert_eq!(dep.state.isolate_circuit(&dep.config), Err(ConfigError::NoBreaker));
    assert_eq!(dep.state.close_circuit(&dep.config), Err(ConfigError::NoBreaker));
    assert_eq!(
        ConfigError::NoBreaker.to_string(),
        "this dependency has no circuit breaker, so there is no circuit to isolate or close: configure one with DependencyConfig::breaker (the breaker feature, on by default)"
    );
    let mut op = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut op, 0, &mut dep.state, &mut Recorder::tagged());
    op.on_success(x, t(1), &mut dep.state, &mut ());
}

#[test]
fn an_isolation_comes_before_a_cooldown_whose_instant_it_would_outlast() {
    let mut dep = Dep::new(
        base().breaker(BreakerConfig::consecutive_failures(5, D::from_secs(30))).cooldown(D::from_secs(120)),
    );
    let mut rec = Recorder::tagged();
    let busy = Failure { name: "busy", verdict: Verdict::RetryableAfter(D::from_secs(30)) };
    let once = valid(RetryPolicy::single_attempt().build());
    let mut a = Operation::start(&once, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_failure(x, t(10), &mut dep.state, &mut Fixed::top(), busy, &mut rec);
    assert_eq!(dep.state.cooldown_until(t(10)), Some(t(30_010)));
    dep.state.isolate_circuit(&dep.config).unwrap();
    let mut b = Operation::start(&POLICY, &dep.config, read(2), t(20)).unwrap();
    done(&mut b, 20, &mut dep.state, &mut rec);
    let completion = b.take_completion().unwrap();
    assert_eq!(
        (completion.disposition, completion.problem, completion.not_before),
        (Disposition::Rejected, Some(Problem::CircuitIsolated), None),
        "not deferred to 30.010, when the isolation would still refuse it"
    );
}

#[test]
fn a_failure_whose_retry_after_would_defer_the_operation_ends_it_isolated_instead() {
    let mut dep = guarded();
    let mut rec = Recorder::tagged();
    let too_long = Failure { name: "busy", verdict: Verdict::RetryableAfter(D::from_secs(100)) };
    let mut op = Operation::start(&POLICY, &dep.config, read(1), t(0)).unwrap();
    let x = dispatch(&mut op, 0, &mut dep.state, &mut rec);
    dep.state.isolate_circuit(&dep.config).unwrap();
    op.on_failure(x, t(10), &mut dep.state, &mut Fixed::top(), too_long, &mut rec);
    let completion = op.take_completion().unwrap();
    assert_eq!(
        (completion.disposition, completion.problem, completion.not_before, completion.last_failure),
        (Disposition::Rejected, Some(Problem::CircuitIsolated), None, Some(too_long)),
        "not deferred by the 100 s Retry-After (the policy's maximum delay is 2 s)"
    );

    // With its attempts spent, an operation ends as it would have without the isolation.
    let once = valid(RetryPolicy::single_attempt().build());
    dep.state.close_circuit(&dep.config).unwrap();
    let mut op = Operation::start(&once, &dep.config, read(2), t(20)).unwrap();
    let x = dispatch(&mut op, 20, &mut dep.state, &mut rec);
    dep.state.isolate_circuit(&dep.config).unwrap();
    op.on_failure(x, t(30), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    assert_eq!(op.take_completion().unwrap().problem, Some(Problem::AttemptsExhausted));
}

/// One slot, and a queue of `places` that waits at most 200 ms.
fn queued(places: u16) -> Dep {
    Dep::new(base().bulkhead(1).bulkhead_queue(places, D::from_millis(200)))
}

#[track_caller]
fn waits(
    op: &mut Operation<'_, HZ, Failure>,
    ms: u64,
    state: &mut Dependency<HZ, 10, 8>,
    rec: &mut Recorder,
) -> u64 {
    match op.poll(t(ms), state, rec) {
        Action::Wait { until } => until.as_ticks(),
        other => panic!("expected a wait at {ms} ms, got {other:?}\n{:#?}", rec.lines),
    }
}

#[test]
fn a_full_bulkhead_queues_attempts_and_a_freed_slot_goes_to_one_that_waited_not_to_a_newcomer() {
    let mut dep = queued(3);
    let mut rec = Recorder::tagged();
    let once = valid(RetryPolicy::single_attempt().build());
    let mut ops: Vec<_> =
        (1..=5).map(|id| Operation::start(&once, &dep.config, read(id), t(0)).unwrap()).collect();
    let [a, b, c, d, e] = &mut ops[..] else { unreachable!() };
    let x = dispatch(a, 0, &mut dep.state, &mut rec);
    assert_eq!(waits(b, 10, &mut dep.state, &mut rec), 210);
    assert!(b.waits_for_slot());
    assert_eq!(waits(c, 20, &mut dep.state, &mut rec), 220);
    assert_eq!((dep.state.bulkhead_waiting(), dep.state.slot_for_waiting(&dep.config)), (2, false));
    // Polled before a slot frees (a spurious wake-up), it waits on to the same end, unannounced.
    assert_eq!(waits(b, 30, &mut dep.state, &mut rec), 210);
    a.on_success(x, t(50), &mut dep.state, &mut rec);
    assert!(dep.state.slot_for_waiting(&dep.config), "a slot is free and two wait: the adapter wakes one");
    // A newcomer finds the slot free, but two operations wait: it queues behind them.
    assert_eq!(waits(d, 55, &mut dep.state, &mut rec), 255);
    assert!(!e.waits_for_slot());
    // The queue is full (3 places): the next newcomer is refused, as without a queue.
    done(e, 56, &mut dep.state, &mut rec);
    // The woken waiter takes the slot (any waiter may: c, here, before b).
    let y = dispatch(c, 60, &mut dep.state, &mut rec);
    assert!(!c.waits_for_slot());
    assert_eq!((dep.state.bulkhead_waiting(), dep.state.slot_for_waiting(&dep.config)), (2, false));
    c.on_success(y, t(70), &mut dep.state, &mut rec);
    let z = dispatch(b, 75, &mut dep.state, &mut rec);
    b.on_success(z, t(80), &mut dep.state, &mut rec);
    let w = dispatch(d, 85, &mut dep.state, &mut rec);
    d.on_success(w, t(90), &mut dep.state, &mut rec);
    assert_eq!((dep.state.in_flight(), dep.state.bulkhead_waiting()), (0, 0));
    assert!(!dep.state.slot_for_waiting(&dep.config), "a free slot with no one waiting wakes no one");
    let waited: Vec<_> =
        ops.iter_mut().map(|op| op.take_completion().unwrap().summary.waited.as_ticks()).collect();
    assert_eq!(waited, [0, 65, 40, 30, 0], "time in the queue counts as waited");
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 60.000",
            "op2: wait for a bulkhead slot until 0.210 for #1",
            "op3: wait for a bulkhead slot until 0.220 for #1",
            "op1: 0.050 #1 succeeded",
            "op1: 0.050 done: succeeded after 1 dispatched",
            "op4: wait for a bulkhead slot until 0.255 for #1",
            "op5: 0.056 refused #1: bulkhead_full",
            "op5: 0.056 done: rejected, bulkhead_full after 0 dispatched",
            "op3: 0.060 dispatch #1 timeout 59.940",
            "op3: 0.070 #1 succeeded",
            "op3: 0.070 done: succeeded after 1 dispatched",
            "op2: 0.075 dispatch #1 timeout 59.925",
            "op2: 0.080 #1 succeeded",
            "op2: 0.080 done: succeeded after 1 dispatched",
            "op4: 0.085 dispatch #1 timeout 59.915",
            "op4: 0.090 #1 succeeded",
            "op4: 0.090 done: succeeded after 1 dispatched",
        ]
    );
}

#[test]
fn a_retry_that_waits_its_whole_time_in_the_queue_is_refused_with_bulkhead_full_and_its_failure_kept() {
    let mut dep = queued(4);
    let mut rec = Recorder::tagged();
    let once = valid(RetryPolicy::single_attempt().build());
    let mut holder = Operation::start(&once, &dep.config, read(1), t(0)).unwrap();
    let mut a = Operation::start(&POLICY, &dep.config, read(2), t(0)).unwrap();
    let x = dispatch(&mut a, 0, &mut dep.state, &mut rec);
    a.on_failure(x, t(10), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    let _held = dispatch(&mut holder, 20, &mut dep.state, &mut rec);
    assert_eq!(waits(&mut a, 110, &mut dep.state, &mut rec), 310, "the retry queues when due");
    assert_eq!(waits(&mut a, 309, &mut dep.state, &mut rec), 310);
    done(&mut a, 310, &mut dep.state, &mut rec);
    assert_eq!(dep.state.bulkhead_waiting(), 0, "its place was given back");
    let completion = a.take_completion().unwrap();
    assert_eq!(
        (completion.disposition, completion.problem, completion.last_failure),
        (Disposition::Rejected, Some(Problem::BulkheadFull), Some(REFUSED))
    );
    assert_eq!(completion.summary.waited, D::from_millis(300), "100 ms of backoff, 200 in the queue");
    assert_eq!(
        rec.lines,
        [
            "op2: 0.000 dispatch #1 timeout 1.000",
            "op2: 0.010 #1 failed (retryable): retry",
            "op2: wait 0.100 (backoff 0.100) until 0.110 for #2",
            "op1: 0.020 dispatch #1 timeout 59.980",
            "op2: wait for a bulkhead slot until 0.310 for #2",
            "op2: 0.310 refused #2: bulkhead_full",
            "op2: 0.310 done: rejected, bulkhead_full after 1 dispatched",
        ]
    );
}

#[test]
fn a_wait_in_the_queue_ends_in_time_for_the_deadline_and_then_the_operation_ends_as_its_deadline_says() {
    let mut dep = queued(4);
    let mut rec = Recorder::tagged();
    let once = valid(RetryPolicy::single_attempt().build());
    let mut holder = Operation::start(&once, &dep.config, read(1), t(0)).unwrap();
    let _held = dispatch(&mut holder, 0, &mut dep.state, &mut rec);
    // 150 ms to its deadline: a first attempt needs one tick, so it waits until 149 at the latest.
    let short = Context::new(D::from_millis(150), ReplaySafety::replayable_read(D::from_secs(60))).id(2);
    let mut a = Operation::start(&once, &dep.config, short, t(0)).unwrap();
    assert_eq!(waits(&mut a, 0, &mut dep.state, &mut rec), 149);
    done(&mut a, 149, &mut dep.state, &mut rec);
    assert_eq!(a.take_completion().unwrap().problem, Some(Problem::BulkheadFull));
    // Polled only after its deadline (an adapter that woke late), it ends with deadline_exceeded,
    // and gives its place back all the same.
    let mut b = Operation::start(&once, &dep.config, short.id(3), t(0)).unwrap();
    assert_eq!(waits(&mut b, 0, &mut dep.state, &mut rec), 149);
    assert_eq!(dep.state.bulkhead_waiting(), 1);
    done(&mut b, 150, &mut dep.state, &mut rec);
    assert_eq!(b.take_completion().unwrap().problem, Some(Problem::DeadlineExceeded));
    assert_eq!(dep.state.bulkhead_waiting(), 0);
    // With no time left to wait at all, the attempt is refused at once, as without a queue.
    let mut c = Operation::start(&once, &dep.config, short.id(4), t(0)).unwrap();
    done(&mut c, 149, &mut dep.state, &mut rec);
    assert_eq!(c.take_completion().unwrap().problem, Some(Problem::BulkheadFull));
    assert_eq!(dep.state.bulkhead_waiting(), 0);
}

#[test]
fn abandoning_an_operation_that_waits_in_the_queue_gives_its_place_back() {
    let mut dep = queued(1);
    let mut rec = Recorder::tagged();
    let once = valid(RetryPolicy::single_attempt().build());
    let mut holder = Operation::start(&once, &dep.config, read(1), t(0)).unwrap();
    let _held = dispatch(&mut holder, 0, &mut dep.state, &mut rec);
    let mut a = Operation::start(&once, &dep.config, read(2), t(0)).unwrap();
    assert_eq!(waits(&mut a, 0, &mut dep.state, &mut rec), 200);
    // One that does not wait, cancelled meanwhile, gives back no place: it held none.
    let mut idle = Operation::<HZ, Failure>::start(&once, &dep.config, read(4), t(0)).unwrap();
    idle.abandon(t(30), &mut dep.state, &mut rec);
    assert_eq!(dep.state.bulkhead_waiting(), 1);
    assert_eq!(idle.take_completion().unwrap().summary.waited, D::from_ticks(0));
    a.abandon(t(40), &mut dep.state, &mut rec);
    assert_eq!(dep.state.bulkhead_waiting(), 0);
    let completion = a.take_completion().unwrap();
    assert_eq!(
        (completion.problem, completion.summary.waited),
        (Some(Problem::Cancelled), D::from_millis(40))
    );
    // The place is free for another.
    let mut b = Operation::start(&once, &dep.config, read(3), t(50)).unwrap();
    assert_eq!(waits(&mut b, 50, &mut dep.state, &mut rec), 250);
}

#[test]
fn an_isolation_refuses_an_operation_waiting_in_the_queue_and_gives_its_place_back() {
    let mut dep = Dep::new(
        base()
            .breaker(BreakerConfig::consecutive_failures(5, D::from_secs(30)))
            .bulkhead(1)
            .bulkhead_queue(2, D::from_millis(200)),
    );
    let mut rec = Recorder::tagged();
    let once = valid(RetryPolicy::single_attempt().build());
    let mut holder = Operation::start(&once, &dep.config, read(1), t(0)).unwrap();
    let held = dispatch(&mut holder, 0, &mut dep.state, &mut rec);
    let mut a = Operation::start(&once, &dep.config, read(2), t(0)).unwrap();
    assert_eq!(waits(&mut a, 0, &mut dep.state, &mut rec), 200);
    dep.state.isolate_circuit(&dep.config).unwrap();
    holder.on_success(held, t(10), &mut dep.state, &mut rec);
    assert!(dep.state.slot_for_waiting(&dep.config));
    done(&mut a, 10, &mut dep.state, &mut rec);
    assert_eq!(a.take_completion().unwrap().problem, Some(Problem::CircuitIsolated));
    assert_eq!((dep.state.bulkhead_waiting(), dep.state.in_flight()), (0, 0));
}

#[test]
fn a_bulkhead_queue_is_refused_without_a_bulkhead_without_places_or_without_a_wait_each_saying_how_to_fix_it()
{
    let check = |config: DependencyConfig<HZ>| Dependency::<HZ, 10>::new(&config, t(0)).map(|_| ());
    let wait = D::from_millis(200);
    let cases = [
        (
            base().bulkhead_queue(64, wait),
            ConfigError::BulkheadQueueWithoutBulkhead,
            "a bulkhead queue holds attempts waiting for a bulkhead slot, and this dependency has no bulkhead: add one with DependencyConfig::bulkhead, or leave out bulkhead_queue",
        ),
        (
            base().bulkhead(32).bulkhead_queue(0, wait),
            ConfigError::ZeroBulkheadQueue,
            "a bulkhead queue of 0 places holds no waiting attempt: allow at least 1, or leave out bulkhead_queue",
        ),
        (
            base().bulkhead(32).bulkhead_queue(64, D::from_ticks(0)),
            ConfigError::ZeroBulkheadWait,
            "a bulkhead queue whose attempts wait for 0 ticks holds none: give a positive maximum wait, or leave out bulkhead_queue",
        ),
    ];
    for (config, error, message) in cases {
        assert_eq!(check(config), Err(error));
        assert_eq!(error.to_string(), message);
    }
    let config = base().bulkhead(32).bulkhead_queue(64, wait);
    assert_eq!((config.bulkhead_queue_places(), config.bulkhead_max_wait()), (Some(64), Some(wait)));
    assert_eq!((base().bulkhead_queue_places(), base().bulkhead_max_wait()), (None, None));
}

/// A rate unit is reserved for the tick its attempt goes out at. One that finds the bulkhead full
/// at that tick waits in the queue, and the unit it reserved is given up: when it gets its slot it
/// takes a unit afresh, after those others reserved meanwhile, so that attempts go out at the
/// rate's spacing (here 100 ms) whatever the queue did.
#[test]
fn a_reserved_rate_unit_is_given_up_when_its_attempt_waits_in_the_queue_so_the_rate_holds_at_dispatch() {
    let config = base()
        .bulkhead(1)
        .bulkhead_queue(2, D::from_secs(1))
        .rate_limit(RateLimit::new(1, D::from_millis(100)).max_wait(D::from_secs(1)));
    let mut dep = Dep::new(config);
    let mut rec = Recorder::tagged();
    let once = valid(RetryPolicy::single_attempt().build());
    let mut ops: Vec<_> =
        (1..=4).map(|id| Operation::start(&once, &dep.config, read(id), t(0)).unwrap()).collect();
    let [a, b, c, d] = &mut ops[..] else { unreachable!() };
    let x = dispatch(a, 0, &mut dep.state, &mut rec);
    a.on_success(x, t(5), &mut dep.state, &mut rec);
    assert_eq!(waits(b, 10, &mut dep.state, &mut rec), 100, "b reserves the unit at 100");
    assert_eq!(waits(c, 20, &mut dep.state, &mut rec), 200, "c the one at 200");
    assert_eq!(waits(d, 30, &mut dep.state, &mut rec), 300, "d the one at 300");
    let y = dispatch(b, 100, &mut dep.state, &mut rec);
    assert_eq!(
        waits(c, 200, &mut dep.state, &mut rec),
        1_200,
        "b holds the slot: c queues, giving up its unit"
    );
    b.on_success(y, t(250), &mut dep.state, &mut rec);
    assert_eq!(
        waits(c, 250, &mut dep.state, &mut rec),
        400,
        "its slot free, c takes the next unit, after d's"
    );
    let z = dispatch(d, 300, &mut dep.state, &mut rec);
    d.on_success(z, t(310), &mut dep.state, &mut rec);
    let w = dispatch(c, 400, &mut dep.state, &mut rec);
    c.on_success(w, t(410), &mut dep.state, &mut rec);
    let dispatched: Vec<_> = rec.lines.iter().filter(|l| l.contains(" dispatch #")).cloned().collect();
    assert_eq!(
        dispatched,
        [
            "op1: 0.000 dispatch #1 timeout 60.000",
            "op2: 0.100 dispatch #1 timeout 59.900",
            "op4: 0.300 dispatch #1 timeout 59.700",
            "op3: 0.400 dispatch #1 timeout 59.600",
        ]
    );
    assert_eq!((dep.state.in_flight(), dep.state.bulkhead_waiting()), (0, 0));
}
