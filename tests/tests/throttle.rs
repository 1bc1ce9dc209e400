//! The client throttle (the SRE book's adaptive throttling) on a virtual clock: which requests it
//! refuses and why, where it stands among the protections, and, against a model of the book's
//! formula over random traffic, that its refusals are exactly the probabilities' sum.

use proptest::prelude::*;
use relent_core::{
    Action, BreakerConfig, ClientThrottle, ConfigError, Context, Counts, DependencyConfig, Disposition,
    Jitter, Operation, Problem, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, Dep, Failure, HZ, Recorder, T, valid};

const ONCE: RetryPolicy<HZ> = valid(RetryPolicy::single_attempt().build());

const REFUSED: Failure = Failure { name: "503", verdict: Verdict::Retryable };

fn throttled(k_permille: u16) -> DependencyConfig<HZ> {
    DependencyConfig::new(D::from_secs(10)).client_throttle(ClientThrottle::new(k_permille))
}

fn read(id: u64) -> Context<HZ> {
    Context::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_secs(60))).id(id)
}

fn t(ms: u64) -> T {
    T::from_ticks(ms)
}

/// One request of one attempt at `ms`, answered 10 ms later with `ok` (a success) or a 503: its
/// transcript, tagged with its id, and its completion's disposition and problem.
fn request(dep: &mut Dep, id: u64, ms: u64, ok: bool, rec: &mut Recorder) -> (Disposition, Option<Problem>) {
    let mut op = Operation::start(&ONCE, &dep.config, read(id), t(ms)).unwrap();
    match op.poll(t(ms), &mut dep.state, rec) {
        Action::Dispatch(attempt) if ok => op.on_success(attempt, t(ms + 10), &mut dep.state, rec),
        Action::Dispatch(attempt) => {
            op.on_failure(attempt, t(ms + 10), &mut dep.state, &mut Fixed::top(), REFUSED, rec);
        }
        Action::Done => {}
        Action::Wait { .. } => panic!("nothing here waits"),
    }
    let done = op.take_completion().unwrap();
    (done.disposition, done.problem)
}

fn counts(calls: u32, failures: u32, throttled: u32) -> Counts {
    Counts { calls, retries: 0, failures, throttled }
}

/// With K = 1 and every call failing, request n + 1 is refused with probability n / (n + 1), and
/// the probabilities add up: 1/2 (sent), 2/3 (a carry of 7/6: refused), 3/4 (sent at 11/12), then
/// six refused in a row until the carry, short of a whole request by 1/55 or so after 10/11, lets
/// the eleventh through. Never all: the `+ 1` keeps a request going out now and then.
#[test]
fn while_every_call_fails_the_throttle_refuses_all_but_a_shrinking_share_and_never_all() {
    let mut dep = Dep::new(throttled(1_000));
    let mut rec = Recorder::tagged();
    for i in 0..11 {
        request(&mut dep, i + 1, i * 100, false, &mut rec);
    }
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 5.000",
            "op1: 0.010 #1 failed (retryable): stop: attempts_exhausted",
            "op1: 0.010 done: failed, attempts_exhausted after 1 dispatched",
            "op2: 0.100 dispatch #1 timeout 5.000",
            "op2: 0.110 #1 failed (retryable): stop: attempts_exhausted",
            "op2: 0.110 done: failed, attempts_exhausted after 1 dispatched",
            "op3: 0.200 refused #1: client_throttled",
            "op3: 0.200 done: rejected, client_throttled after 0 dispatched",
            "op4: 0.300 dispatch #1 timeout 5.000",
            "op4: 0.310 #1 failed (retryable): stop: attempts_exhausted",
            "op4: 0.310 done: failed, attempts_exhausted after 1 dispatched",
            "op5: 0.400 refused #1: client_throttled",
            "op5: 0.400 done: rejected, client_throttled after 0 dispatched",
            "op6: 0.500 refused #1: client_throttled",
            "op6: 0.500 done: rejected, client_throttled after 0 dispatched",
            "op7: 0.600 refused #1: client_throttled",
            "op7: 0.600 done: rejected, client_throttled after 0 dispatched",
            "op8: 0.700 refused #1: client_throttled",
            "op8: 0.700 done: rejected, client_throttled after 0 dispatched",
            "op9: 0.800 refused #1: client_throttled",
            "op9: 0.800 done: rejected, client_throttled after 0 dispatched",
            "op10: 0.900 refused #1: client_throttled",
            "op10: 0.900 done: rejected, client_throttled after 0 dispatched",
            "op11: 1.000 dispatch #1 timeout 5.000",
            "op11: 1.010 #1 failed (retryable): stop: attempts_exhausted",
            "op11: 1.010 done: failed, attempts_exhausted after 1 dispatched",
        ]
    );
    assert_eq!(dep.state.counts(t(1_010)), counts(4, 4, 7));
    // 11 requests, none accepted: 11/12 of the next would be refused.
    assert_eq!(dep.state.throttle_ppm(&dep.config, t(1_010)), Some(916_656));
}

/// At K = 2 a dependency that fails up to half of what it is sent is never throttled; past that the
/// throttle steps in, and once the failures have left the window (10 s) it lets everything through.
#[test]
fn up_to_one_failure_in_k_nothing_is_refused_and_the_throttle_forgets_with_the_window() {
    let mut dep = Dep::new(throttled(2_000));
    let mut rec = Recorder::default();
    let mut outcomes = Vec::new();
    // Alternate success and failure for 40 requests: half accepted, K = 2, nothing refused.
    for i in 0..40 {
        outcomes.push(request(&mut dep, i + 1, i * 100, i % 2 == 0, &mut rec).1);
    }
    assert!(!outcomes.contains(&Some(Problem::ClientThrottled)), "{outcomes:?}");
    assert_eq!(dep.state.throttle_ppm(&dep.config, t(4_000)), Some(0));
    // Then every call fails: the share refused grows with the failures.
    let refused = (40..100)
        .filter(|&i| request(&mut dep, i + 1, i * 100, false, &mut rec).1 == Some(Problem::ClientThrottled))
        .count();
    let now = t(9_910);
    let window = dep.state.counts(now);
    assert_eq!(
        (window.calls + window.throttled, window.calls - window.failures),
        (100, 20),
        "100 requests, 20 accepted, in the window"
    );
    assert_eq!(refused, window.throttled as usize);
    assert_eq!(
        refused, 22,
        "60 failing requests, of which the throttle refused 22: about the sum of (r - 40) / (r + 1) over r = 40..100"
    );
    // (100 - 2 × 20) / 101, in units of 1/65,536, then in parts per million.
    assert_eq!(
        dep.state.throttle_ppm(&dep.config, now),
        Some((60 * 65_536 / 101 * 1_000_000u64 / 65_536) as u32)
    );
    // 10 s after the last request, the window is empty and the next request goes out.
    assert_eq!(dep.state.throttle_ppm(&dep.config, t(19_910)), Some(0));
    assert_eq!(request(&mut dep, 101, 19_910, true, &mut rec), (Disposition::Succeeded, None));
}

/// A retry is a request too: refused, it ends the operation as rejected with its last failure kept.
#[test]
fn a_retry_the_throttle_refuses_ends_the_operation_with_its_last_failure_kept() {
    let policy = valid(RetryPolicy::constant(3, D::from_millis(100)).jitter(Jitter::None).build());
    let config = throttled(1_000).budget(valid(RetryBudget::ratio(10, 10)));
    let mut dep = Dep::new(config);
    let mut rec = Recorder::tagged();
    let mut op = Operation::start(&policy, &dep.config, read(1), t(0)).unwrap();
    let mut now = t(0);
    loop {
        match op.poll(now, &mut dep.state, &mut rec) {
            Action::Dispatch(attempt) => {
                now = t(now.as_ticks() + 10);
                op.on_failure(attempt, now, &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
            }
            Action::Wait { until } => now = until,
            Action::Done => break,
        }
    }
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 5.000",
            "op1: 0.010 #1 failed (retryable): retry",
            "op1: wait 0.100 (backoff 0.100) until 0.110 for #2",
            "op1: 0.110 dispatch #2 timeout 4.890",
            "op1: 0.120 #2 failed (retryable): retry",
            "op1: wait 0.100 (backoff 0.100) until 0.220 for #3",
            "op1: 0.220 refused #3: client_throttled",
            "op1: 0.220 done: rejected, client_throttled after 2 dispatched",
        ]
    );
    let done = op.take_completion().unwrap();
    assert_eq!(done.last_failure, Some(REFUSED));
}

/// After the circuit (an open circuit refuses first, and the throttle counts nothing), before the
/// bulkhead: a throttled request takes no slot, and is refused as throttled even when the bulkhead
/// is full.
#[test]
fn the_throttle_comes_after_the_circuit_and_before_the_bulkhead() {
    let config =
        throttled(1_000).bulkhead(1).breaker(BreakerConfig::consecutive_failures(3, D::from_secs(1)));
    let mut dep = Dep::new(config);
    let mut rec = Recorder::tagged();
    // Two failures: the next request's probability is 2/3 on a carry of 1/2, a refusal, which
    // takes no slot.
    request(&mut dep, 1, 0, false, &mut rec);
    request(&mut dep, 2, 100, false, &mut rec);
    assert_eq!(request(&mut dep, 3, 200, false, &mut rec).1, Some(Problem::ClientThrottled));
    assert_eq!(dep.state.in_flight(), 0);
    // 3/4 on a carry of 1/6: op 4 goes out and holds the one slot.
    let config = dep.config;
    let mut op4: Operation<'_, HZ, Failure> = Operation::start(&ONCE, &config, read(4), t(300)).unwrap();
    let Action::Dispatch(held) = op4.poll(t(300), &mut dep.state, &mut rec) else {
        panic!("{:?}", rec.lines)
    };
    // The next (4 requests, 1 accepted so far: op 4 is out; 3/5 on a carry of 11/12) is refused by
    // the throttle, which is asked before the full bulkhead.
    assert_eq!(request(&mut dep, 5, 300, false, &mut rec).1, Some(Problem::ClientThrottled));
    // Op 4 fails: the third failure in a row opens the circuit, which refuses before the throttle
    // and counts nothing for it.
    op4.on_failure(held, t(310), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec);
    let before = dep.state.counts(t(400));
    assert_eq!(before, counts(3, 3, 2));
    assert_eq!(request(&mut dep, 6, 400, false, &mut rec).1, Some(Problem::CircuitOpen));
    assert_eq!(dep.state.counts(t(400)), before);
}

/// A request the bulkhead refuses did not reach the dependency: the throttle's carry stays where
/// it was, so the next request is decided as if it had not been made.
#[test]
fn a_request_another_protection_refuses_leaves_the_throttles_carry() {
    let mut dep = Dep::new(throttled(1_000).bulkhead(1));
    let mut rec = Recorder::tagged();
    // One failure; then op 2 (probability 1/2: a carry of 1/2) holds the one slot.
    request(&mut dep, 1, 0, false, &mut rec);
    let config = dep.config;
    let mut holder: Operation<'_, HZ, Failure> = Operation::start(&ONCE, &config, read(2), t(100)).unwrap();
    let Action::Dispatch(held) = holder.poll(t(100), &mut dep.state, &mut rec) else { panic!() };
    // Op 3 passes the throttle (2 requests, 1 accepted: 1/3, a carry of 5/6 were it sent) and is
    // refused by the bulkhead: the carry stays 1/2.
    assert_eq!(request(&mut dep, 3, 150, true, &mut rec).1, Some(Problem::BulkheadFull));
    holder.on_success(held, t(200), &mut dep.state, &mut rec);
    // Op 4: 1/3 again on a carry of 1/2 goes out (on 5/6 it would have been refused).
    assert_eq!(request(&mut dep, 4, 300, true, &mut rec), (Disposition::Succeeded, None));
    assert_eq!(dep.state.counts(t(310)), counts(3, 1, 0));
}

#[test]
fn a_multiplier_below_one_is_refused_with_its_code_and_a_fix() {
    let config = DependencyConfig::<HZ>::new(D::from_secs(10));
    assert_eq!(config.throttle(), None);
    let config = config.client_throttle(ClientThrottle::new(500));
    assert_eq!(config.throttle().map(|t| t.k_permille()), Some(500));
    let err = relent_core::Dependency::<HZ, 10>::new(&config, t(0)).unwrap_err();
    assert_eq!(err, ConfigError::ThrottleMultiplierBelowOne);
    assert_eq!(err.as_str(), "throttle_multiplier_below_one");
    assert!(err.message().contains("ClientThrottle::K2"), "{}", err.message());
}

/// The model: the book's formula over the requests and accepts in the window (buckets of 1 s,
/// aligned on the clock, 10 of them), in units of 1/65,536 rounded down, each added to a carry
/// that refuses a request each time it reaches a whole one. Requests every 0 to 1.5 s, each
/// accepted or failed at random, at K from 1 to 3.
fn model(k: u64, arrivals: &[(u64, bool)]) -> Vec<bool> {
    let mut log: Vec<(u64, Option<bool>)> = Vec::new(); // (bucket, accepted; None: throttled)
    let mut carry = 0u64;
    let mut refused = Vec::new();
    let mut now = 0;
    for &(gap, ok) in arrivals {
        now += gap;
        let bucket = now / 1_000;
        let live: Vec<_> = log.iter().filter(|(b, _)| b + 10 > bucket).collect();
        let requests = live.len() as u64;
        let accepts = live.iter().filter(|(_, a)| *a == Some(true)).count() as u64;
        let excess = (requests * 1_000).saturating_sub(k * accepts);
        let p = excess * 65_536 / ((requests + 1) * 1_000);
        carry += p;
        if carry >= 65_536 {
            carry -= 65_536;
            log.push((bucket, None));
            refused.push(true);
        } else {
            log.push((bucket, Some(ok)));
            refused.push(false);
        }
    }
    refused
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(relent_tests::cases(256)))]

    #[test]
    fn the_throttles_refusals_are_the_books_probabilities_summed(
        k in 1_000u16..=3_000,
        arrivals in prop::collection::vec((0u64..1_500, prop::bool::weighted(0.3)), 1..300),
    ) {
        let mut dep = Dep::new(throttled(k));
        let mut rec = Recorder::default();
        let mut now = 0;
        let mut got = Vec::new();
        for (i, &(gap, ok)) in arrivals.iter().enumerate() {
            now += gap;
            // Answered at once, so that each call's outcome is in the window before the next request.
            let mut op = Operation::start(&ONCE, &dep.config, read(i as u64), t(now)).unwrap();
            match op.poll(t(now), &mut dep.state, &mut rec) {
                Action::Dispatch(a) if ok => op.on_success(a, t(now), &mut dep.state, &mut rec),
                Action::Dispatch(a) => op.on_failure(a, t(now), &mut dep.state, &mut Fixed::top(), REFUSED, &mut rec),
                _ => {}
            }
            got.push(op.take_completion().unwrap().problem == Some(Problem::ClientThrottled));
        }
        prop_assert_eq!(got, model(u64::from(k), &arrivals));
    }
}
