//! Properties of the protections under random configurations, arrivals and outcomes, with many
//! operations interleaved on one dependency and one virtual clock.

use std::collections::BTreeMap;

use proptest::prelude::*;
use relent_core::{
    Action, AdaptiveLimit, Attempt, BreakerConfig, CircuitState, ClientThrottle, Context, Dependency,
    DependencyConfig, Event, MAX_EVENTS_PER_CALL, Operation, Problem, RateLimit, ReplaySafety, RetryBudget,
    RetryPolicy,
};
use relent_tests::fate::{Fate, fate};
use relent_tests::rng::seeded;
use relent_tests::transcript::{D, Failure, HZ, T};

prop_compose! {
    fn config()(
        bulkhead in 1..5u16,
        threshold in 1..4u32,
        break_ms in 1..5_000u64,
        probes in 1..4u8,
        slow in proptest::option::of(100..900u64),
        count in 1..20u32,
        period in 100..5_000u64,
        burst in 1..5u32,
        max_wait in prop_oneof![Just(0u64), 0..2_000u64],
        cooldown in 1..30_000u64,
        queue in proptest::option::of((1..4u16, 1..2_000u64)),
        throttle in proptest::option::of(1_000..3_000u16),
        adaptive in proptest::option::of((50..900u64, any::<u16>(), 1..1_000u16)),
    ) -> DependencyConfig<HZ> {
        let mut breaker = BreakerConfig::consecutive_failures(threshold, D::from_ticks(break_ms)).probes(probes);
        if let Some(s) = slow {
            breaker = breaker.slow_calls(D::from_ticks(s));
        }
        let config = DependencyConfig::new(D::from_secs(10))
            .budget(RetryBudget::ratio(20, 2).unwrap())
            .breaker(breaker)
            .bulkhead(bulkhead)
            .rate_limit(RateLimit::new(count, D::from_ticks(period)).burst(burst).max_wait(D::from_ticks(max_wait)))
            .cooldown(D::from_ticks(cooldown));
        let config = match throttle {
            Some(k) => config.client_throttle(ClientThrottle::new(k)),
            None => config,
        };
        let config = match adaptive {
            Some((slow, floor, kept)) => config.adaptive_limit(
                AdaptiveLimit::new(D::from_ticks(slow)).min_slots(1 + floor % bulkhead).decrease_to_permille(kept),
            ),
            None => config,
        };
        match queue {
            Some((places, wait)) => config.bulkhead_queue(places, D::from_ticks(wait)),
            None => config,
        }
    }
}

const POLICY: RetryPolicy<HZ> = match RetryPolicy::exponential(4, D::from_millis(50), D::from_secs(1))
    .attempt_timeout(D::from_secs(1))
    .build()
{
    Ok(p) => p,
    Err(e) => panic!("{}", e.message()),
};

enum Slot<'a> {
    /// Start a hedge of operation `i` at this tick, as an adapter does after its delay.
    Hedge(usize),
    /// Poll at this tick.
    Poll(Operation<'a, HZ, Failure>),
    /// Report this attempt's fate at this tick.
    Out(Operation<'a, HZ, Failure>, Attempt<HZ>, Fate),
    /// Cancel this operation at this tick, while it waits (for a rate unit, a slot or a backoff).
    Abandon(Operation<'a, HZ, Failure>),
}

/// Everything the simulation saw.
struct Run {
    events: Vec<Event<HZ>>,
    dispatches: Vec<u64>,
    max_in_flight: u16,
    /// Attempts dispatched while the bulkhead's limit (an adaptive one's, as it stood) was taken.
    over_limit: usize,
    in_flight_at_end: u16,
    /// The most operations waiting in the bulkhead's queue at once, and how many at the end.
    max_waiting: u16,
    waiting_at_end: u16,
    unfinished: usize,
    /// The most events any one call into the operation made.
    most_events_in_a_call: usize,
    /// Calls after which the bulkhead's limit was not what its events said: moved without an
    /// event, or an event whose limits before and after were not the state's.
    unannounced_limit_moves: usize,
}

/// The id of the hedge of operation `i` (operations are numbered from 0).
const HEDGE_IDS: u64 = 1_000_000;

/// Runs operations started at `starts` to their ends, their attempts' fates taken from `fates` in
/// turn; with `hedge`, each operation is also hedged that long after its start (whether or not it
/// has ended then: the core must hold either way).
fn simulate(
    config: &DependencyConfig<HZ>,
    starts: &[u64],
    fates: &[Fate],
    seed: u64,
    hedge: Option<u64>,
) -> Run {
    let mut dep: Dependency<HZ, 10> = Dependency::new(config, T::from_ticks(0)).unwrap();
    let mut rng = seeded(seed);
    let mut fates = fates.iter().copied().cycle();
    let context = Context::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_secs(3600)));
    // (tick, sequence) -> what happens then; the sequence keeps equal ticks in arrival order.
    let mut queue: BTreeMap<(u64, usize), Slot> = BTreeMap::new();
    let mut plans = Vec::new();
    for (i, &s) in starts.iter().enumerate() {
        let op = Operation::start(&POLICY, config, context.id(i as u64), T::from_ticks(s)).unwrap();
        plans.push(op.hedge_plan().unwrap());
        queue.insert((s, i), Slot::Poll(op));
    }
    let mut seq = starts.len();
    if let Some(after) = hedge {
        for (i, &s) in starts.iter().enumerate() {
            seq += 1;
            queue.insert((s + after, seq), Slot::Hedge(i));
        }
    }
    let mut run = Run {
        events: Vec::new(),
        dispatches: Vec::new(),
        max_in_flight: 0,
        over_limit: 0,
        in_flight_at_end: 0,
        max_waiting: 0,
        waiting_at_end: 0,
        unfinished: 0,
        most_events_in_a_call: 0,
        unannounced_limit_moves: 0,
    };
    let mut steps = 0;
    while let Some(((now, _), slot)) = queue.pop_first() {
        steps += 1;
        if steps > 100_000 {
            run.unfinished = queue.len() + 1;
            break;
        }
        let at = T::from_ticks(now);
        let events_before = run.events.len();
        let limit_before = dep.bulkhead_limit(config);
        let mut record = |e: &Event<HZ>| run.events.push(*e);
        let next = match slot {
            Slot::Hedge(i) => {
                let mut op = Operation::start_hedge(&POLICY, config, plans[i], at);
                op.assign_id(HEDGE_IDS + i as u64);
                Some((now, Slot::Poll(op)))
            }
            Slot::Poll(mut op) => match op.poll(at, &mut dep, &mut record) {
                Action::Dispatch(attempt) => {
                    run.dispatches.push(now);
                    // Taken now: fewer than the limit were before.
                    if dep.in_flight() > dep.bulkhead_limit(config).unwrap() {
                        run.over_limit += 1;
                    }
                    let fate = fates.next().unwrap();
                    Some((fate.reported_at(now, attempt.timeout().as_ticks()), Slot::Out(op, attempt, fate)))
                }
                // Its caller is cancelled while it waits (what it reserved is given back), when the
                // next fate says so and before the wait ends.
                Action::Wait { until } => match fates.next().unwrap().gives_up_waiting(now, until.as_ticks())
                {
                    Some(then) => Some((then, Slot::Abandon(op))),
                    None => Some((until.as_ticks(), Slot::Poll(op))),
                },
                Action::Done => None,
            },
            Slot::Abandon(mut op) => {
                op.abandon(at, &mut dep, &mut record);
                None
            }
            Slot::Out(mut op, attempt, fate) => {
                fate.report(&mut op, attempt, at, &mut dep, &mut rng, &mut record);
                Some((now, Slot::Poll(op)))
            }
        };
        run.max_in_flight = run.max_in_flight.max(dep.in_flight());
        run.most_events_in_a_call = run.most_events_in_a_call.max(run.events.len() - events_before);
        let moves: Vec<_> = run.events[events_before..]
            .iter()
            .filter_map(|e| match *e {
                Event::BulkheadLimitChanged { from, to, .. } => Some((Some(from), Some(to))),
                _ => None,
            })
            .collect();
        let limit_after = dep.bulkhead_limit(config);
        let expected = if limit_before == limit_after { vec![] } else { vec![(limit_before, limit_after)] };
        if moves != expected {
            run.unannounced_limit_moves += 1;
        }
        run.max_waiting = run.max_waiting.max(dep.bulkhead_waiting());
        if let Some((when, slot)) = next {
            seq += 1;
            queue.insert((when, seq), slot);
        }
        // As an adapter does: a slot free while operations wait for one wakes the first of them.
        if dep.slot_for_waiting(config) {
            let woken = queue.iter().find_map(|(&key, slot)| match slot {
                Slot::Poll(op) if op.waits_for_slot() => Some(key),
                _ => None,
            });
            if let Some(key) = woken {
                let slot = queue.remove(&key).unwrap();
                seq += 1;
                queue.insert((now, seq), slot);
            }
        }
    }
    run.in_flight_at_end = dep.in_flight();
    run.waiting_at_end = dep.bulkhead_waiting();
    run
}

proptest! {
    #![proptest_config(ProptestConfig { cases: relent_tests::cases(300), ..ProptestConfig::default() })]

    /// Permits in flight never exceed the bulkhead and never leak, whatever happens to attempts
    /// (reported, cancelled, or dropped and never reported).
    #[test]
    fn permits_never_exceed_the_bulkhead_and_never_leak(
        config in config(),
        starts in proptest::collection::vec(0..20_000u64, 1..60),
        fates in proptest::collection::vec(fate(800), 1..40),
        seed in any::<u64>(),
        hedge in proptest::option::of(0..1_500u64),
    ) {
        let run = simulate(&config, &starts, &fates, seed, hedge);
        prop_assert_eq!(run.unfinished, 0);
        prop_assert!(run.max_in_flight <= config.bulkhead_slots().unwrap());
        prop_assert_eq!(run.over_limit, 0, "an attempt went out beyond the adaptive limit");
        prop_assert_eq!(run.in_flight_at_end, 0, "a permit leaked");
        prop_assert!(run.max_waiting <= config.bulkhead_queue_places().unwrap_or(0));
        prop_assert_eq!(run.waiting_at_end, 0, "a place in the queue leaked");
        let completed = run.events.iter().filter(|e| matches!(e, Event::Completed { .. })).count();
        let hedges = if hedge.is_some() { starts.len() } else { 0 };
        prop_assert_eq!(completed, starts.len() + hedges, "every operation and hedge ends exactly once");
        prop_assert!(run.most_events_in_a_call <= MAX_EVENTS_PER_CALL, "{}", run.most_events_in_a_call);
        prop_assert_eq!(run.unannounced_limit_moves, 0, "the limit moved unlike its events said");
    }

    /// While the circuit is half-open, the attempts dispatched never exceed its probe count (a
    /// cancelled or lost probe gives its place back).
    #[test]
    fn half_open_never_admits_more_than_its_probes(
        config in config(),
        starts in proptest::collection::vec(0..20_000u64, 1..60),
        fates in proptest::collection::vec(fate(800), 1..40),
        seed in any::<u64>(),
        hedge in proptest::option::of(0..1_500u64),
    ) {
        let run = simulate(&config, &starts, &fates, seed, hedge);
        let probes = usize::from(config.circuit_breaker().unwrap().probe_count());
        let mut half_open = false;
        let (mut admitted, mut given_back) = (0usize, 0usize);
        // Which operations hold a probe, to count the ones given back.
        let mut holders = std::collections::BTreeSet::new();
        for e in &run.events {
            match *e {
                Event::CircuitChanged { state, .. } => {
                    half_open = state == CircuitState::HalfOpen;
                    admitted = 0;
                    given_back = 0;
                    holders.clear();
                }
                Event::AttemptDispatched { operation, .. } if half_open => {
                    admitted += 1;
                    holders.insert(operation);
                    prop_assert!(admitted - given_back <= probes, "{} probes out of {}", admitted - given_back, probes);
                }
                Event::Completed { operation, problem: Some(Problem::Cancelled | Problem::DeadlineExceeded), .. }
                    if half_open && holders.remove(&operation) =>
                {
                    given_back += 1;
                }
                Event::AttemptSucceeded { operation, .. } | Event::AttemptFailed { operation, .. } => {
                    holders.remove(&operation);
                }
                _ => {}
            }
        }
    }

    /// In any span [t1, t2], the attempts dispatched number at most
    /// `burst + (t2 - t1) × count / period`, retries included.
    #[test]
    fn the_limiter_never_admits_more_than_its_rate_plus_burst_in_any_window(
        config in config(),
        starts in proptest::collection::vec(0..20_000u64, 1..80),
        fates in proptest::collection::vec(fate(800), 1..40),
        seed in any::<u64>(),
        hedge in proptest::option::of(0..1_500u64),
    ) {
        let run = simulate(&config, &starts, &fates, seed, hedge);
        let limit = config.rate().unwrap();
        let (count, period, burst) = (u128::from(limit.count()), u128::from(limit.period().as_ticks()), u128::from(limit.burst_size()));
        let d = &run.dispatches;
        for i in 0..d.len() {
            for j in i..d.len() {
                let n = (j - i + 1) as u128;
                let span = u128::from(d[j] - d[i]);
                prop_assert!(
                    n.saturating_sub(burst) * period <= span * count,
                    "{} attempts in [{}, {}] with {} per {} and a burst of {}", n, d[i], d[j], count, period, burst
                );
            }
        }
    }

    /// The cooldown's end only ever moves later.
    #[test]
    fn the_cooldown_never_moves_earlier(
        config in config(),
        starts in proptest::collection::vec(0..20_000u64, 1..60),
        fates in proptest::collection::vec(fate(800), 1..40),
        seed in any::<u64>(),
        hedge in proptest::option::of(0..1_500u64),
    ) {
        let run = simulate(&config, &starts, &fates, seed, hedge);
        let mut last = 0;
        for e in &run.events {
            if let Event::CooldownExtended { until, .. } = *e {
                prop_assert!(until.as_ticks() > last, "the cooldown moved from {} to {}", last, until.as_ticks());
                last = until.as_ticks();
            }
            if let Event::AttemptDispatched { at, .. } = *e {
                prop_assert!(at.as_ticks() >= last, "an attempt went at {} during a cooldown until {}", at.as_ticks(), last);
            }
        }
    }
}

/// The properties above are only as good as the situations the simulation reaches: this checks,
/// over fixed seeds, that it reaches every one of them.
#[test]
fn the_simulation_reaches_every_protection() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..200 {
        let config = config().new_tree(&mut runner).unwrap().current();
        let starts = proptest::collection::vec(0..20_000u64, 1..60).new_tree(&mut runner).unwrap().current();
        let fates = proptest::collection::vec(fate(800), 1..40).new_tree(&mut runner).unwrap().current();
        let hedge = proptest::option::of(0..1_500u64).new_tree(&mut runner).unwrap().current();
        let run = simulate(&config, &starts, &fates, 7, hedge);
        for e in &run.events {
            let key = match e {
                Event::AttemptDispatched { operation, .. } if operation.0 >= HEDGE_IDS => "hedge_dispatched",
                Event::Refused { operation, .. } if operation.0 >= HEDGE_IDS => "hedge_refused",
                Event::CircuitChanged { state: CircuitState::HalfOpen, .. } => "half_open",
                Event::CircuitChanged { state: CircuitState::Closed, .. } => "closed_again",
                Event::WaitingForRateLimit { .. } => "rate_wait",
                Event::CooldownExtended { .. } => "cooldown",
                Event::BulkheadLimitChanged { from, to, .. } if to < from => "limit_down",
                Event::BulkheadLimitChanged { .. } => "limit_up",
                Event::Refused { problem, .. } => problem.as_str(),
                Event::Completed { problem: Some(Problem::DeadlineExceeded), .. } => "lost_attempt_reclaimed",
                Event::Completed { problem: Some(Problem::Cancelled), dispatched: 0, .. } => {
                    "cancelled_waiting"
                }
                Event::Completed { problem: Some(Problem::Cancelled), .. } => "cancelled",
                Event::AttemptDispatched { .. } => "dispatched",
                _ => continue,
            };
            *seen.entry(key).or_default() += 1;
        }
    }
    for key in [
        "dispatched",
        "hedge_dispatched",
        "hedge_refused",
        "half_open",
        "closed_again",
        "rate_wait",
        "cooldown",
        "limit_down",
        "limit_up",
        "circuit_open",
        "bulkhead_full",
        "rate_limited",
        "cooldown_active",
        "client_throttled",
        "retry_budget_exhausted",
        "lost_attempt_reclaimed",
        "cancelled",
        "cancelled_waiting",
    ] {
        assert!(seen.get(key).copied().unwrap_or(0) > 0, "the simulation never reached {key}: {seen:?}");
    }
    println!("{seen:?}");
}
