//! The duty-cycle limiter (issue 7, part 1): transcripts on a virtual clock of attempts that cost
//! airtime, retries included, and a property that the airtime inside any window of the configured
//! length never exceeds the allowance, whatever the costs, times, outcomes, concurrency and log size.

use std::collections::BTreeMap;

use proptest::prelude::*;
use relent_core::{
    Action, Attempt, ConfigError, Context, Dependency, DependencyConfig, Disposition, DutyCycle, Jitter,
    Operation, RateLimit, ReplaySafety, RetryBudget, RetryPolicy, StartError, Verdict,
};
use relent_tests::rng::{Fixed, seeded};
use relent_tests::transcript::{D, Dep, Failure, HZ, Step, T, run, valid};

/// 4 attempts, 1 s doubling to 8 s, no jitter (so the transcripts are exact), 3 s per attempt.
const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(4, D::from_secs(1), D::from_secs(8))
        .jitter(Jitter::None)
        .attempt_timeout(D::from_secs(3))
        .build(),
);

const NO_ACK: Failure = Failure { name: "no ack", verdict: Verdict::Retryable };

/// A radio link allowed 10 % of any minute on air (6 s), with a generous retry budget so that only
/// the duty cycle limits it.
fn link() -> DependencyConfig<HZ> {
    DependencyConfig::new(D::from_secs(60))
        .budget(valid(RetryBudget::ratio(50, 10)))
        .duty_cycle(DutyCycle::per_mille(100, D::from_secs(60)))
}

/// An uplink whose frame is 1.5 s on air; the network deduplicates frames by counter.
fn uplink(id: u64, deadline_s: u64) -> Context<HZ> {
    Context::new(D::from_secs(deadline_s), ReplaySafety::provider_idempotent_mutation(D::from_secs(3600)))
        .id(id)
        .airtime(D::from_millis(1_500))
}

#[test]
fn retries_spend_airtime_and_the_next_uplink_is_deferred_until_the_first_frame_leaves_the_window() {
    let mut dep = Dep::new(link());
    let mut rng = Fixed::top();
    // Three frames go unacknowledged, the fourth gets through: 4 × 1.5 s = the whole 6 s.
    let script =
        [Step::Fail(2_000, NO_ACK), Step::Fail(2_000, NO_ACK), Step::Fail(2_000, NO_ACK), Step::Ok(1_500)];
    let (lines, done) = run(&POLICY, uplink(1, 60), &mut dep, 0, &script, &mut rng);
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 3.000",
            "2.000 #1 failed (retryable): retry",
            "wait 1.000 (backoff 1.000) until 3.000 for #2",
            "3.000 dispatch #2 timeout 3.000",
            "5.000 #2 failed (retryable): retry",
            "wait 2.000 (backoff 2.000) until 7.000 for #3",
            "7.000 dispatch #3 timeout 3.000",
            "9.000 #3 failed (retryable): retry",
            "wait 4.000 (backoff 4.000) until 13.000 for #4",
            "13.000 dispatch #4 timeout 3.000",
            "14.500 #4 succeeded",
            "14.500 done: succeeded after 4 dispatched",
        ]
    );
    assert_eq!(done.disposition, Disposition::Succeeded);
    assert_eq!(dep.state.airtime_used(&dep.config, T::from_ticks(14_500)), D::from_secs(6));

    // At 20 s nothing is left: the first frame (0 to 1.5 s) stops counting at 61.5 s, 41.5 s away,
    // longer than the policy's 8 s maximum delay. Deferred, with the instant it may go; not sent.
    let (lines, done) = run(&POLICY, uplink(2, 60), &mut dep, 20_000, &[Step::Ok(1_500)], &mut rng);
    assert_eq!(
        lines,
        [
            "20.000 refused #1: duty_cycle_exceeded (retry at 61.500)",
            "20.000 done: deferred, duty_cycle_exceeded after 0 dispatched",
        ]
    );
    assert_eq!(
        (done.disposition, done.code(), done.not_before, done.summary.dispatched),
        (Disposition::Deferred, "duty_cycle_exceeded", Some(T::from_ticks(61_500)), 0)
    );

    // At 55 s the wait is 6.5 s, within the maximum delay: the uplink waits for its airtime and
    // goes at the first instant the duty cycle allows.
    let (lines, done) = run(&POLICY, uplink(3, 60), &mut dep, 55_000, &[Step::Ok(1_500)], &mut rng);
    assert_eq!(
        lines,
        [
            "wait for airtime until 61.500 for #1",
            "61.500 dispatch #1 timeout 3.000",
            "63.000 #1 succeeded",
            "63.000 done: succeeded after 1 dispatched",
        ]
    );
    assert_eq!(done.disposition, Disposition::Succeeded);
    assert_eq!(done.summary.waited, D::from_millis(6_500), "the wait for airtime counts as waited");
    // Frames 2 to 4 and the new one: 6 s again.
    assert_eq!(dep.state.airtime_used(&dep.config, T::from_ticks(63_000)), D::from_secs(6));
}

#[test]
fn a_retry_that_would_break_the_duty_cycle_defers_the_operation_with_the_last_failure_kept() {
    // 5 s per minute, 2 s frames: two fit, the third must wait 55 s.
    let config = DependencyConfig::new(D::from_secs(60))
        .budget(valid(RetryBudget::ratio(50, 10)))
        .duty_cycle(DutyCycle::new(D::from_secs(5), D::from_secs(60)));
    let mut dep = Dep::new(config);
    let context = uplink(1, 60).airtime(D::from_secs(2));
    let (lines, done) = run(&POLICY, context, &mut dep, 0, &[Step::Fail(2_000, NO_ACK)], &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 3.000",
            "2.000 #1 failed (retryable): retry",
            "wait 1.000 (backoff 1.000) until 3.000 for #2",
            "3.000 dispatch #2 timeout 3.000",
            "5.000 #2 failed (retryable): retry",
            "wait 2.000 (backoff 2.000) until 7.000 for #3",
            "7.000 refused #3: duty_cycle_exceeded (retry at 62.000)",
            "7.000 done: deferred, duty_cycle_exceeded after 2 dispatched",
        ]
    );
    assert_eq!(done.last_failure.map(|f| f.name), Some("no ack"));
    assert_eq!(done.not_before, Some(T::from_ticks(62_000)));
}

#[test]
fn a_wait_for_airtime_must_fit_the_deadline() {
    let mut dep = Dep::new(link());
    let script = [Step::Ok(1_500)];
    for id in 0..4 {
        run(&POLICY, uplink(id, 60), &mut dep, id * 2_000, &script, &mut Fixed::top());
    }
    // Full until 61.5 s. At 58 s the 3.5 s wait fits the maximum delay, but not a 3 s deadline.
    let (lines, done) = run(&POLICY, uplink(9, 3), &mut dep, 58_000, &script, &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "58.000 refused #1: duty_cycle_exceeded (retry at 61.500)",
            "58.000 done: deferred, duty_cycle_exceeded after 0 dispatched",
        ]
    );
    assert_eq!(done.not_before, Some(T::from_ticks(61_500)));
    // With 5 s it fits, and goes at 61.5 s with what remains of the deadline as its timeout.
    let (lines, _) = run(&POLICY, uplink(10, 5), &mut dep, 58_000, &script, &mut Fixed::top());
    assert_eq!(lines[..2], ["wait for airtime until 61.500 for #1", "61.500 dispatch #1 timeout 1.500"]);
}

#[test]
fn a_wait_for_airtime_of_exactly_the_maximum_delay_or_to_the_last_instant_is_waited_for() {
    // Full until 61.5 s, as above, in two fresh dependencies.
    let full = || {
        let mut dep = Dep::new(link());
        for id in 0..4 {
            run(&POLICY, uplink(id, 60), &mut dep, id * 2_000, &[Step::Ok(1_500)], &mut Fixed::top());
        }
        dep
    };
    // From 53.5 s the wait is 8 s, the policy's maximum delay: still waited for.
    let (lines, _) = run(&POLICY, uplink(9, 60), &mut full(), 53_500, &[Step::Ok(1_500)], &mut Fixed::top());
    assert_eq!(lines[..2], ["wait for airtime until 61.500 for #1", "61.500 dispatch #1 timeout 3.000"]);
    // From 58 s with a 3.501 s deadline, 61.5 s is the last instant an attempt can start (one tick
    // before the deadline): still waited for, with that tick as its timeout.
    let last =
        Context::new(D::from_millis(3_501), ReplaySafety::provider_idempotent_mutation(D::from_secs(3600)))
            .id(10)
            .airtime(D::from_millis(1_500));
    let (lines, _) = run(&POLICY, last, &mut full(), 58_000, &[Step::Ok(1)], &mut Fixed::top());
    assert_eq!(lines[..2], ["wait for airtime until 61.500 for #1", "61.500 dispatch #1 timeout 0.001"]);
}

/// An uplink cancelled while it waits for airtime gives back the airtime it reserved: the next
/// one goes when the first frame leaves the window, as if the cancelled one had never waited.
#[test]
fn airtime_reserved_by_a_cancelled_uplink_is_given_back() {
    let mut dep = Dep::new(link());
    for id in 0..4 {
        run(&POLICY, uplink(id, 60), &mut dep, id * 2_000, &[Step::Ok(1_500)], &mut Fixed::top());
    }
    // The minute's 6 s are spent until the first frame leaves at 61.5 s.
    let t = T::from_ticks;
    let mut a = Operation::<HZ, Failure>::start(&POLICY, &dep.config, uplink(9, 60), t(53_500)).unwrap();
    assert_eq!(a.poll(t(53_500), &mut dep.state, &mut ()), Action::Wait { until: t(61_500) });
    assert_eq!(dep.state.airtime_used(&dep.config, t(61_500)), D::from_millis(6_000), "a's 1.5 s reserved");
    a.abandon(t(55_000), &mut dep.state, &mut ());
    assert_eq!(dep.state.airtime_used(&dep.config, t(61_500)), D::from_millis(4_500), "given back");
    // Without the give-back, b would wait for the second frame to leave, at 63.5 s.
    let mut b = Operation::<HZ, Failure>::start(&POLICY, &dep.config, uplink(10, 60), t(56_000)).unwrap();
    assert_eq!(b.poll(t(56_000), &mut dep.state, &mut ()), Action::Wait { until: t(61_500) });
}

#[test]
fn a_rate_limit_and_a_duty_cycle_both_waited_for_reserve_one_instant() {
    // One attempt per 4 s, waiting up to 5 s for a unit; 3 s of airtime per minute, 1.5 s frames.
    let config = link()
        .rate_limit(RateLimit::new(1, D::from_secs(4)).max_wait(D::from_secs(5)))
        .duty_cycle(DutyCycle::new(D::from_secs(3), D::from_secs(60)));
    let mut dep = Dep::new(config);
    let script = [Step::Ok(1_500)];
    let (a, _) = run(&POLICY, uplink(1, 60), &mut dep, 0, &script, &mut Fixed::top());
    assert_eq!(a[0], "0.000 dispatch #1 timeout 3.000");
    // The rate limit makes the second wait until 4 s; the airtime still fits then.
    let (b, _) = run(&POLICY, uplink(2, 60), &mut dep, 2_000, &script, &mut Fixed::top());
    assert_eq!(b[..2], ["wait for a rate unit until 4.000 for #1", "4.000 dispatch #1 timeout 3.000"]);
    // The third has a rate unit at 8 s, but the airtime is spent until the first frame leaves at
    // 61.5 s: deferred by the duty cycle, and the rate unit is not taken.
    let (c, done) = run(&POLICY, uplink(3, 60), &mut dep, 6_000, &script, &mut Fixed::top());
    assert_eq!(c[0], "6.000 refused #1: duty_cycle_exceeded (retry at 61.500)");
    assert_eq!(done.code(), "duty_cycle_exceeded");
    assert_eq!(dep.state.next_rate_unit(&dep.config, T::from_ticks(6_000)), T::from_ticks(8_000));
    // At 58 s both allow it later: one wait, until the later of the two (61.5 s), reported as
    // the duty cycle's.
    let (d, _) = run(&POLICY, uplink(4, 60), &mut dep, 58_000, &script, &mut Fixed::top());
    assert_eq!(d[..2], ["wait for airtime until 61.500 for #1", "61.500 dispatch #1 timeout 3.000"]);
}

#[test]
fn a_frame_cancelled_while_it_waits_for_airtime_gives_its_rate_unit_back_whole() {
    // One attempt per 4 s, waiting up to 5 s for a unit; 3 s of airtime per minute.
    let config = link()
        .rate_limit(RateLimit::new(1, D::from_secs(4)).max_wait(D::from_secs(5)))
        .duty_cycle(DutyCycle::new(D::from_secs(3), D::from_secs(60)));
    let mut dep = Dep::new(config);
    let t = T::from_ticks;
    // A 2.5 s frame at 0 leaves 0.5 s of airtime until it leaves the window at 62.5 s.
    let long = |id| uplink(id, 120).airtime(D::from_millis(2_500));
    let (first, _) = run(&POLICY, long(1), &mut dep, 0, &[Step::Ok(2_500)], &mut Fixed::top());
    assert_eq!(first[0], "0.000 dispatch #1 timeout 3.000");
    // At 56 s another waits 6.5 s for its airtime, until 62.5 s, its rate unit reserved for then;
    // its caller gives up at once.
    let mut a = Operation::<HZ, Failure>::start(&POLICY, &dep.config, long(2), t(56_000)).unwrap();
    assert_eq!(a.poll(t(56_000), &mut dep.state, &mut ()), Action::Wait { until: t(62_500) });
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(56_000)), t(66_500));
    a.abandon(t(56_000), &mut dep.state, &mut ());
    // The limit is as it was before the reservation: a short frame that fits the airtime left goes
    // at once. (The give-back once moved the rate limit's arrival time back only to 62.5 s, the
    // reserved unit's instant, 6.5 s away: the short frame was refused `rate_limited`, its wait
    // longer than 5 s, for a unit no frame used.)
    assert_eq!(dep.state.next_rate_unit(&dep.config, t(56_000)), t(56_000));
    let short = uplink(3, 60).airtime(D::from_millis(500));
    let (b, done) = run(&POLICY, short, &mut dep, 56_000, &[Step::Ok(500)], &mut Fixed::top());
    assert_eq!(b[0], "56.000 dispatch #1 timeout 3.000");
    assert_eq!(done.disposition, Disposition::Succeeded);
}

#[test]
fn airtime_is_required_and_must_fit_the_allowance_and_the_state_needs_a_log() {
    let config = link();
    let no_airtime = Context::new(D::from_secs(60), ReplaySafety::replayable_read(D::from_secs(60)));
    let err = Operation::<HZ, Failure>::start(&POLICY, &config, no_airtime, T::from_ticks(0)).unwrap_err();
    assert_eq!(err, StartError::NoAirtime);
    assert!(err.to_string().contains("Context::airtime"), "{err}");
    let too_long = uplink(1, 60).airtime(D::from_secs(7));
    let err = Operation::<HZ, Failure>::start(&POLICY, &config, too_long, T::from_ticks(0)).unwrap_err();
    assert_eq!(err, StartError::AirtimeAboveDutyCycle { airtime: 7_000, allowance: 6_000 });
    assert_eq!(err.as_str(), "airtime_above_duty_cycle");
    // Without a duty cycle, airtime is ignored.
    let plain = DependencyConfig::new(D::from_secs(60)).budget(valid(RetryBudget::ratio(10, 3)));
    assert!(Operation::<HZ, Failure>::start(&POLICY, &plain, too_long, T::from_ticks(0)).is_ok());
    // A duty cycle needs somewhere to remember what was sent.
    let err = Dependency::<HZ, 4>::new(&config, T::from_ticks(0)).unwrap_err();
    assert_eq!(err, ConfigError::AirtimeLogSize);
    assert!(err.message().contains("Dependency<HZ, 4, 8>"), "{}", err.message());
    // Bad duty cycles are refused with their own errors.
    let bad = |duty| DependencyConfig::<HZ>::new(D::from_secs(60)).duty_cycle(duty).validate();
    assert_eq!(bad(DutyCycle::per_mille(0, D::from_secs(60))), Err(ConfigError::ZeroDutyCycleAirtime));
    assert_eq!(bad(DutyCycle::new(D::from_secs(1), D::from_ticks(0))), Err(ConfigError::ZeroDutyCycleWindow));
    assert_eq!(bad(DutyCycle::per_mille(1_001, D::from_secs(60))), Err(ConfigError::DutyCycleAboveWindow));
    // EU868's shares, exactly: 1 % and 0.1 % of an hour.
    assert_eq!(DutyCycle::<HZ>::per_mille(10, D::from_secs(3_600)).airtime(), D::from_secs(36));
    assert_eq!(DutyCycle::<HZ>::per_mille(1, D::from_secs(3_600)).airtime(), D::from_millis(3_600));
}

// ---- the property ----

/// What one attempt does: how long it runs (ms), and whether it succeeds; drawn at a wait, whether
/// the caller is cancelled during it.
#[derive(Debug, Clone, Copy)]
struct Fate {
    runs: u64,
    ok: bool,
    /// Drawn at a wait: the caller is cancelled after `runs`, if that is before the wait ends.
    cancel: bool,
}

enum Slot<'a> {
    Poll(Operation<'a, HZ, Failure>),
    Out(Operation<'a, HZ, Failure>, Attempt<HZ>, Fate),
    Abandon(Operation<'a, HZ, Failure>),
}

/// Runs operations started at `starts` (ms) with airtimes `costs` (cycled) concurrently against
/// one dependency with an airtime log of `L`, and returns every transmission as (start, cost).
fn transmissions<const L: usize>(
    config: &DependencyConfig<HZ>,
    starts: &[u64],
    costs: &[u64],
    fates: &[Fate],
    seed: u64,
) -> Vec<(u64, u64)> {
    let mut dep: Dependency<HZ, 10, L> = Dependency::new(config, T::from_ticks(0)).unwrap();
    let mut rng = seeded(seed);
    let mut fates = fates.iter().copied().cycle();
    let mut queue: BTreeMap<(u64, usize), Slot> = BTreeMap::new();
    for (i, (&s, &c)) in starts.iter().zip(costs.iter().cycle()).enumerate() {
        let context = Context::new(D::from_secs(30), ReplaySafety::replayable_read(D::from_secs(3600)))
            .id(i as u64)
            .airtime(D::from_ticks(c));
        let op = Operation::start(&PROPERTY_POLICY, config, context, T::from_ticks(s)).unwrap();
        queue.insert((s, i), Slot::Poll(op));
    }
    let mut seq = starts.len();
    let mut sent = Vec::new();
    let mut cost_of = BTreeMap::new();
    for (i, &c) in costs.iter().cycle().take(starts.len()).enumerate() {
        cost_of.insert(i as u64, c);
    }
    while let Some(((now, _), slot)) = queue.pop_first() {
        let at = T::from_ticks(now);
        let next = match slot {
            Slot::Poll(mut op) => match op.poll(at, &mut dep, &mut ()) {
                Action::Dispatch(attempt) => {
                    sent.push((now, cost_of[&op.id().0]));
                    let fate = fates.next().unwrap();
                    Some((now + fate.runs.min(attempt.timeout().as_ticks()), Slot::Out(op, attempt, fate)))
                }
                // Its caller is cancelled while it waits (the airtime it reserved is given back),
                // when the next fate says so and before the wait ends.
                Action::Wait { until } => match fates.next().unwrap() {
                    Fate { runs, cancel: true, .. } if now + runs < until.as_ticks() => {
                        Some((now + runs, Slot::Abandon(op)))
                    }
                    _ => Some((until.as_ticks(), Slot::Poll(op))),
                },
                Action::Done => None,
            },
            Slot::Abandon(mut op) => {
                op.abandon(at, &mut dep, &mut ());
                None
            }
            Slot::Out(mut op, attempt, fate) => {
                if fate.ok {
                    op.on_success(attempt, at, &mut dep, &mut ());
                } else {
                    let f = Failure { name: "f", verdict: Verdict::Retryable };
                    op.on_failure(attempt, at, &mut dep, &mut rng, f, &mut ());
                }
                Some((now, Slot::Poll(op)))
            }
        };
        if let Some((when, slot)) = next {
            seq += 1;
            queue.insert((when, seq), slot);
        }
    }
    sent
}

const PROPERTY_POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(4, D::from_millis(100), D::from_secs(20))
        .attempt_timeout(D::from_secs(5))
        .build(),
);

/// The largest airtime inside any window `[a, a + window)`: the overlap is piecewise linear in
/// `a`, so its maximum is at a window starting at a transmission's start or ending at its end.
fn busiest_window(sent: &[(u64, u64)], window: u64) -> u64 {
    let overlap = |a: i128| -> u64 {
        let (lo, hi) = (a, a + window as i128);
        sent.iter()
            .map(|&(s, c)| {
                let (s, e) = (s as i128, (s + c) as i128);
                (e.min(hi) - s.max(lo)).max(0) as u64
            })
            .sum()
    };
    sent.iter()
        .flat_map(|&(s, c)| [s as i128, (s + c) as i128 - window as i128])
        .map(overlap)
        .max()
        .unwrap_or(0)
}

fn fate() -> impl Strategy<Value = Fate> {
    (0..6_000u64, any::<bool>(), any::<bool>()).prop_map(|(runs, ok, cancel)| Fate { runs, ok, cancel })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(relent_tests::cases(400)))]

    #[test]
    fn airtime_inside_any_window_never_exceeds_the_allowance(
        window_s in 1..120u64,
        per_mille in 1..=500u16,
        mut starts in proptest::collection::vec(0..300_000u64, 1..80),
        costs in proptest::collection::vec(1..4_000u64, 1..8),
        fates in proptest::collection::vec(fate(), 1..20),
        log in 0..3usize,
        seed in any::<u64>(),
        rate in proptest::option::of((1..5u32, 500..10_000u64, 1..3u32, 0..10_000u64)),
    ) {
        starts.sort_unstable();
        let duty = DutyCycle::per_mille(per_mille, D::from_secs(window_s));
        let allowance = duty.airtime().as_ticks();
        // Costs above the allowance are refused at start (tested above); keep the ones that fit.
        let costs: Vec<u64> = costs.iter().map(|&c| c.min(allowance)).collect();
        let config = DependencyConfig::new(D::from_secs(60)).budget(valid(RetryBudget::ratio(50, 20))).duty_cycle(duty);
        // With a rate limit too, an attempt that waits for airtime reserves its rate unit for the
        // instant it goes, and a cancelled one gives it back: the rate must hold all the same.
        let config = match rate {
            Some((count, period, burst, wait)) => config.rate_limit(
                RateLimit::new(count, D::from_ticks(period)).burst(burst).max_wait(D::from_ticks(wait)),
            ),
            None => config,
        };
        let sent = match log {
            0 => transmissions::<1>(&config, &starts, &costs, &fates, seed),
            1 => transmissions::<3>(&config, &starts, &costs, &fates, seed),
            _ => transmissions::<16>(&config, &starts, &costs, &fates, seed),
        };
        let busiest = busiest_window(&sent, window_s * 1_000);
        prop_assert!(busiest <= allowance, "{busiest} ms on air in a {window_s} s window, allowed {allowance}: {sent:?}");
        // In any span [t1, t2], at most `burst + (t2 - t1) × count / period` attempts.
        if let Some((count, period, burst, _)) = rate {
            let (count, period, burst) = (u128::from(count), u128::from(period), u128::from(burst));
            for (i, &(first, _)) in sent.iter().enumerate() {
                for (j, &(last, _)) in sent.iter().enumerate().skip(i) {
                    let n = (j - i + 1) as u128;
                    prop_assert!(
                        n.saturating_sub(burst) * period <= u128::from(last - first) * count,
                        "{n} attempts in [{first}, {last}] with {count} per {period} and a burst of {burst}: {sent:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_property_is_not_vacuous_the_limit_is_reached_and_a_bigger_log_sends_more() {
    // Uplinks every 2 s for 10 minutes, 1 s each, 5 % of a minute (3 s): the limit binds.
    let starts: Vec<u64> = (0..300).map(|i| i * 2_000).collect();
    let config = DependencyConfig::new(D::from_secs(60))
        .budget(valid(RetryBudget::ratio(50, 20)))
        .duty_cycle(DutyCycle::per_mille(50, D::from_secs(60)));
    let fates = [Fate { runs: 1_000, ok: true, cancel: false }];
    let exact = transmissions::<16>(&config, &starts, &[1_000], &fates, 1);
    let small = transmissions::<1>(&config, &starts, &[1_000], &fates, 1);
    assert_eq!(busiest_window(&exact, 60_000), 3_000, "the limit is reached exactly");
    assert!(busiest_window(&small, 60_000) <= 3_000);
    // A log of one entry merges everything and releases later, so it sends less, never more.
    assert!(small.len() < exact.len(), "{} vs {}", small.len(), exact.len());
    // Without a duty cycle all 300 would go at once.
    assert!(exact.len() < 300 / 2, "{}", exact.len());
}
