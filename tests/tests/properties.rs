//! Properties of the retry engine over random policies, budgets, clocks and outcome sequences.
//!
//! Each property drives the real core and checks its decisions against the rule as stated in the
//! issue, never against a second implementation of the core.

use proptest::prelude::*;
use relent_core::{
    Action, AfterFailure, Backoff, Context, DelaySource, Dependency, DependencyConfig, Event, Jitter,
    Operation, Problem, ReplaySafety, RetryBudget, RetryPolicy, StartError, Verdict,
};
use relent_tests::rng::seeded;
use relent_tests::transcript::{D, Failure, HZ, T};

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Ok(u64),
    Fail(u64, Verdict<HZ>),
    Hang,
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        (0..200_000u64).prop_map(Outcome::Ok),
        (0..200_000u64).prop_map(|t| Outcome::Fail(t, Verdict::Retryable)),
        (0..200_000u64, 0..300_000u64)
            .prop_map(|(t, w)| Outcome::Fail(t, Verdict::RetryableAfter(D::from_ticks(w)))),
        (0..200_000u64).prop_map(|t| Outcome::Fail(t, Verdict::NotRetryable)),
        (0..200_000u64).prop_map(|t| Outcome::Fail(t, Verdict::NeverArrived)),
        Just(Outcome::Hang),
    ]
}

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![Just(Jitter::None), Just(Jitter::Full), Just(Jitter::Equal), Just(Jitter::Decorrelated)]
}

prop_compose! {
    fn retry_policy()(
        attempts in prop_oneof![1..=5u8, 1..=64u8],
        exponential in any::<bool>(),
        base in 1..20_000u64,
        extra in 0..200_000u64,
        jitter in jitter(),
        timeout in proptest::option::of(1..100_000u64),
        min_remaining in 0..5_000u64,
        spread in 0..5_000u64,
        // An exponential backoff's multiplier other than 2 (1.01 to 4), or none (doubling).
        multiplier in proptest::option::of(101..=400u16),
    ) -> RetryPolicy<HZ> {
        let builder = if exponential {
            let builder = RetryPolicy::exponential(attempts, D::from_ticks(base), D::from_ticks(base + extra));
            match multiplier { Some(percent) => builder.multiplier_percent(percent), None => builder }
        } else {
            RetryPolicy::constant(attempts, D::from_ticks(base)).max_delay(D::from_ticks(base + extra))
        };
        let builder = builder.jitter(jitter).min_remaining(D::from_ticks(min_remaining)).retry_after_spread(D::from_ticks(spread));
        let builder = match timeout { Some(t) => builder.attempt_timeout(D::from_ticks(t)), None => builder };
        builder.build().unwrap()
    }
}

/// A budget that fits `policy` (a token bucket's hold must exceed its attempt timeout by > 1 s).
fn budget_for(policy: RetryPolicy<HZ>) -> impl Strategy<Value = RetryBudget<HZ>> {
    let ratio = (0..=100u8, 0..20u32).prop_map(|(p, f)| RetryBudget::ratio(p, f).unwrap());
    match policy.attempt_timeout() {
        None => ratio.boxed(),
        Some(t) => prop_oneof![
            ratio,
            (1..20u32, 1..10u32, 1..100_000u64, 1..50_000u64).prop_map(move |(c, r, p, slack)| {
                let hold = t.as_ticks() + HZ + slack;
                RetryBudget::token_bucket(c, r, D::from_ticks(p), D::from_ticks(hold)).unwrap()
            }),
        ]
        .boxed(),
    }
}

fn start_tick() -> impl Strategy<Value = u64> {
    prop_oneof![0..1_000_000u64, (0..2_000_000u64).prop_map(|back| u64::MAX - back)]
}

fn safety() -> impl Strategy<Value = ReplaySafety<HZ>> {
    prop_oneof![
        Just(ReplaySafety::Unsafe),
        Just(ReplaySafety::UntilArrived),
        (1..2_000_000u64).prop_map(|v| ReplaySafety::replayable_read(D::from_ticks(v))),
        any::<u64>().prop_map(|v| ReplaySafety::provider_idempotent_mutation(D::from_ticks(v))),
    ]
}

fn scenario() -> impl Strategy<
    Value = (RetryPolicy<HZ>, RetryBudget<HZ>, u64, u64, ReplaySafety<HZ>, Vec<Outcome>, Vec<u64>, u64),
> {
    retry_policy().prop_flat_map(|p| {
        (
            Just(p),
            budget_for(p),
            prop_oneof![0..3_000_000u64, Just(u64::MAX)],
            start_tick(),
            safety(),
            proptest::collection::vec(outcome(), 1..70),
            proptest::collection::vec(prop_oneof![3 => Just(0u64), 1 => 0..50_000u64], 1..70),
            any::<u64>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: relent_tests::cases(2_000), ..ProptestConfig::default() })]

    /// Dispatches never exceed max attempts; no attempt starts at or after the deadline; an
    /// attempt's timeout never exceeds what remains nor the ceiling; each delay is within its
    /// jitter's bounds and never below a Retry-After; the next attempt never starts before its
    /// delay has passed; an operation stated safe until an attempt arrives is repeated only after
    /// failures that never arrived; the run ends with exactly one completion that agrees with the
    /// events; nothing panics, including near u64::MAX.
    #[test]
    fn every_decision_respects_the_policy((policy, budget, deadline, start, safety, outcomes, lateness, seed) in scenario()) {
        let config = DependencyConfig::new(D::from_secs(10)).budget(budget);
        let mut dep: Dependency<HZ, 10> = Dependency::new(&config, T::from_ticks(start)).unwrap();
        let context = Context::new(D::from_ticks(deadline), safety);
        let now0 = T::from_ticks(start);
        let mut op = match Operation::<HZ, Failure>::start(&policy, &config, context, now0) {
            Ok(op) => op,
            Err(e) => {
                prop_assert!(policy.max_attempts() > 1);
                prop_assert_eq!(e, StartError::UnsafeWithRetries { max_attempts: policy.max_attempts() });
                prop_assert_eq!(safety, ReplaySafety::Unsafe);
                return Ok(());
            }
        };
        let op_deadline = start.saturating_add(deadline);
        let mut rng = seeded(seed);
        let mut events: Vec<Event<HZ>> = Vec::new();
        let mut now = start;
        let mut dispatched = 0u8;
        let mut not_before = start;
        let mut outcomes = outcomes.iter().cycle();
        let mut lateness = lateness.iter().cycle();
        let mut finished = false;
        for _ in 0..500 {
            let mut record = |e: &Event<HZ>| events.push(*e);
            match op.poll(T::from_ticks(now), &mut dep, &mut record) {
                Action::Dispatch(attempt) => {
                    dispatched += 1;
                    prop_assert!(dispatched <= policy.max_attempts());
                    prop_assert!(now < op_deadline, "dispatched at {} with the deadline at {}", now, op_deadline);
                    prop_assert!(now >= not_before, "dispatched at {} before {}", now, not_before);
                    let timeout = attempt.timeout().as_ticks();
                    prop_assert!(timeout > 0);
                    prop_assert!(timeout <= op_deadline - now);
                    if let Some(ceiling) = policy.attempt_timeout() {
                        prop_assert!(timeout <= ceiling.as_ticks());
                    }
                    prop_assert_eq!(attempt.number(), dispatched);
                    let out = *outcomes.next().unwrap();
                    let took = match out { Outcome::Ok(t) | Outcome::Fail(t, _) => t.min(timeout), Outcome::Hang => timeout };
                    now = now.saturating_add(took);
                    let at = T::from_ticks(now);
                    let mut record = |e: &Event<HZ>| events.push(*e);
                    match out {
                        Outcome::Ok(_) => op.on_success(attempt, at, &mut dep, &mut record),
                        Outcome::Fail(_, verdict) => {
                            op.on_failure(attempt, at, &mut dep, &mut rng, Failure { name: "f", verdict }, &mut record)
                        }
                        Outcome::Hang => op.on_failure(
                            attempt, at, &mut dep, &mut rng, Failure { name: "timeout", verdict: Verdict::Retryable }, &mut record,
                        ),
                    }
                }
                Action::Wait { until } => {
                    prop_assert!(until.as_ticks() > now);
                    not_before = not_before.max(until.as_ticks()).min(op_deadline);
                    now = until.as_ticks().saturating_add(*lateness.next().unwrap());
                }
                Action::Done => { finished = true; break; }
            }
        }
        prop_assert!(finished, "the operation did not finish");
        let done = op.take_completion().unwrap();
        prop_assert_eq!(done.summary.dispatched, dispatched);

        let mut previous_backoff = policy.base_delay().as_ticks();
        let mut completions = 0;
        for e in &events {
            match *e {
                Event::RetryScheduled { attempt, delay, source, .. } => {
                    let delay = delay.as_ticks();
                    match source {
                        DelaySource::Backoff { nominal } => {
                            let nominal = nominal.as_ticks();
                            prop_assert!(nominal <= policy.max_delay().as_ticks());
                            // The policy's own delay for this retry (its first is attempt 2).
                            prop_assert_eq!(nominal, policy.nominal_delay(attempt - 1).as_ticks());
                            // A multiplied one is the last retry's times the multiplier, rounded up to
                            // a tick, up to the maximum delay (the first retry's is the base delay).
                            if let (Backoff::Multiplied { percent }, 3..) = (policy.backoff(), attempt) {
                                let last = u128::from(policy.nominal_delay(attempt - 2).as_ticks());
                                let grown = (last * u128::from(percent)).div_ceil(100);
                                prop_assert_eq!(u128::from(nominal), grown.min(u128::from(policy.max_delay().as_ticks())));
                            }
                            let base = policy.base_delay().as_ticks();
                            if policy.backoff() == Backoff::Constant {
                                prop_assert_eq!(nominal, base.min(policy.max_delay().as_ticks()));
                            }
                            match policy.jitter_mode() {
                                Jitter::None => prop_assert_eq!(delay, nominal),
                                Jitter::Full => prop_assert!(delay <= nominal),
                                Jitter::Equal => prop_assert!(nominal / 2 <= delay && delay <= nominal),
                                Jitter::Decorrelated => {
                                    let hi = previous_backoff.saturating_mul(3).max(base).min(policy.max_delay().as_ticks());
                                    prop_assert!(base.min(hi) <= delay && delay <= hi, "{} not in [{}, {}]", delay, base, hi);
                                }
                            }
                            previous_backoff = delay;
                        }
                        DelaySource::RetryAfter { stated } => {
                            let stated = stated.as_ticks();
                            prop_assert!(stated <= delay, "a Retry-After of {} was cut to {}", stated, delay);
                            prop_assert!(delay <= stated + policy.retry_after_spread().as_ticks());
                        }
                    }
                }
                // Stated safe until an attempt arrives: only a failure that never arrived is
                // followed by another attempt.
                Event::AttemptFailed { verdict, then: AfterFailure::Retry, .. } if safety == ReplaySafety::UntilArrived => {
                    prop_assert_eq!(verdict, Verdict::NeverArrived);
                }
                // And only such an operation ends for an attempt that may have arrived.
                Event::AttemptFailed { verdict, then: AfterFailure::Stop(Problem::MayHaveArrived), .. } => {
                    prop_assert_eq!(safety, ReplaySafety::UntilArrived);
                    prop_assert!(verdict.is_retryable() && !verdict.never_arrived());
                }
                Event::Completed { disposition, problem, dispatched: n, .. } => {
                    completions += 1;
                    prop_assert_eq!(disposition, done.disposition);
                    prop_assert_eq!(problem, done.problem);
                    prop_assert_eq!(n, dispatched);
                }
                _ => {}
            }
        }
        prop_assert_eq!(completions, 1);
    }
}

/// A multi-operation simulation on one dependency: `ops` operations start at random instants and
/// are interleaved on one virtual clock; every dispatch is logged as (tick, is_retry).
fn simulate(
    budget: RetryBudget<HZ>,
    starts: &[u64],
    fail_percent: u8,
    seed: u64,
) -> (Vec<(u64, bool)>, Dependency<HZ, 10>) {
    const POLICY: RetryPolicy<HZ> = match RetryPolicy::exponential(5, D::from_millis(50), D::from_secs(1))
        .attempt_timeout(D::from_millis(500))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };
    let config = DependencyConfig::new(D::from_secs(10)).budget(budget);
    let mut dep: Dependency<HZ, 10> = Dependency::new(&config, T::from_ticks(0)).unwrap();
    let mut rng = seeded(seed);
    let mut ops: Vec<(u64, Operation<HZ, Failure>, Option<relent_core::Attempt<HZ>>)> = Vec::new();
    let context = Context::new(D::from_secs(60), ReplaySafety::replayable_read(D::from_secs(3600)));
    let mut log = Vec::new();
    let mut pending: Vec<u64> = starts.to_vec();
    pending.sort_unstable();
    let mut pending = pending.into_iter().peekable();
    loop {
        // The next thing to happen: an operation's start, or an operation's next instant.
        let next_op = ops.iter().enumerate().min_by_key(|(_, (t, _, _))| *t).map(|(i, (t, _, _))| (i, *t));
        let next_start = pending.peek().copied();
        match (next_op, next_start) {
            (None, None) => break,
            (_, Some(s)) if next_op.is_none_or(|(_, t)| s <= t) => {
                pending.next();
                let op = Operation::start(&POLICY, &config, context, T::from_ticks(s)).unwrap();
                ops.push((s, op, None));
            }
            (Some((i, now)), _) => {
                let (t, op, out) = &mut ops[i];
                let at = T::from_ticks(now);
                if let Some(attempt) = out.take() {
                    let fails = (rand_core::RngCore::next_u32(&mut rng) % 100) < u32::from(fail_percent);
                    if fails {
                        op.on_failure(
                            attempt,
                            at,
                            &mut dep,
                            &mut rng,
                            Failure { name: "f", verdict: Verdict::Retryable },
                            &mut (),
                        );
                    } else {
                        op.on_success(attempt, at, &mut dep, &mut ());
                    }
                    continue;
                }
                match op.poll(at, &mut dep, &mut ()) {
                    Action::Dispatch(attempt) => {
                        log.push((now, attempt.is_retry()));
                        *t = now + 1 + (rand_core::RngCore::next_u64(&mut rng) % 300);
                        *out = Some(attempt);
                    }
                    Action::Wait { until } => *t = until.as_ticks(),
                    Action::Done => {
                        ops.swap_remove(i);
                    }
                }
            }
            (None, Some(_)) => unreachable!(),
        }
    }
    (log, dep)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: relent_tests::cases(200), ..ProptestConfig::default() })]

    /// At every retry, the retries in the dependency's window (the current bucket and the nine
    /// before it, 1 s each) are at most the floor plus the ratio's share of all calls in it.
    #[test]
    fn the_ratio_budget_never_lets_retries_exceed_its_share_plus_floor_in_the_window(
        percent in 0..=100u8,
        floor in 0..10u32,
        starts in proptest::collection::vec(0..40_000u64, 1..300),
        fail_percent in 0..=100u8,
        seed in any::<u64>(),
    ) {
        let (log, _) = simulate(RetryBudget::ratio(percent, floor).unwrap(), &starts, fail_percent, seed);
        let width = 1_000;
        for &(t, retry) in &log {
            if !retry { continue; }
            let window_start = (t / width).saturating_sub(9) * width;
            let (calls, retries) = log.iter()
                .filter(|(u, _)| *u >= window_start && *u <= t)
                .fold((0u64, 0u64), |(c, r), (_, is_retry)| (c + 1, r + u64::from(*is_retry)));
            prop_assert!(
                100 * retries <= 100 * u64::from(floor) + u64::from(percent) * calls,
                "at {}: {} retries of {} calls, {}% + {}", t, retries, calls, percent, floor
            );
        }
    }

    /// Retries dispatched by any instant never exceed the bucket's capacity plus its refill so far
    /// (every attempt here is reported, so no reservation lapses and returns its token).
    #[test]
    fn the_token_budget_never_lets_retries_exceed_capacity_plus_refill(
        capacity in 1..20u32,
        refill in 1..5u32,
        period in 100..20_000u64,
        starts in proptest::collection::vec(0..40_000u64, 1..200),
        fail_percent in 0..=100u8,
        seed in any::<u64>(),
    ) {
        let budget = RetryBudget::token_bucket(capacity, refill, D::from_ticks(period), D::from_ticks(500 + HZ + 1)).unwrap();
        let (log, _) = simulate(budget, &starts, fail_percent, seed);
        let mut retries = 0u64;
        for &(t, retry) in &log {
            retries += u64::from(retry);
            let earned = u64::from(capacity) + u64::from(refill) * t / period;
            prop_assert!(retries <= earned, "at {}: {} retries, {} tokens earned", t, retries, earned);
        }
    }
}
