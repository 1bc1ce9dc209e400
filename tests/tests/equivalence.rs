//! What must change nothing: the two ways relent-core's state crosses a change of clock, and a
//! reconfiguration that changes no number, checked against the state that did not go through them,
//! event for event, after random operations (some of them hedged, some with a policy patient enough
//! to wait for airtime) under random protections. A field one of them forgot (a half-open
//! episode's successes, a count window's ring, a rate limit's debt, a token bucket's partial
//! refill, an operation's replay statement, a hedge's plan) or an instant moved a tick off shows
//! as a first difference.
//!
//! **A snapshot is the dependency.** Saved while nothing is in flight and restored after a sleep,
//! the restored state decides everything after exactly as the original would have, left idle that
//! long. The restoring clock either counted through the sleep (an RTC's, say) or reads any whole
//! number of the dependency's windows ahead (a clock that started elsewhere, as after a reboot), so
//! that a part saved as an instant rather than as what remains of it shows too. (A clock ahead by
//! other amounts places the window's counts in its own buckets, up to a bucket's width from where
//! they were: `tests/tests/snapshots.rs` checks that case's rules, one case at a time.) What a
//! snapshot leaves out by design is left out of these configurations: an adaptive bulkhead limit,
//! the latency log and the client throttle's carry start fresh on restore (their module docs and
//! the README's "Surviving deep sleep" say so).
//!
//! **A restarted clock is the same clock.** relent-embassy restarts the core's clock every 2^30
//! ticks with 32-bit ticks, rebasing the dependency and every operation, with attempts out and
//! operations waiting. A script run with its clock restarted by any number of ticks at any instant
//! gives the events of the same script run without the restart, each moved by the restart's ticks,
//! with every protection (the adaptive limit, the throttle and the latency log too): the window's
//! buckets move with the clock, unlike a snapshot's, which start where the restoring clock's do.
//! A hedge not yet sent is a plan the adapter holds, and is rebased with the rest.
//!
//! **A configuration reloaded unchanged changes nothing.** `Dependency::reconfigure` to a copy of
//! the configuration the dependency has, at any instant of the same scripts, with attempts out and
//! operations waiting (those under way keep the configuration they started with, as the adapters'
//! do), gives the same events at the same instants: each part's carry-over rule must leave alone
//! what the new numbers do not change.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use relent_core::{
    Action, AdaptiveLimit, Attempt, BreakerConfig, BudgetKind, CircuitState, ClientThrottle, Completion,
    Context, Criticality, Dependency, DependencyConfig, Disposition, DutyCycle, Event, HedgePlan, Operation,
    OperationId, RateLimit, ReplaySafety, RetryBudget, RetryPolicy,
};
use relent_tests::fate::{Fate, fate};
use relent_tests::rng::seeded;
use relent_tests::transcript::{D, Failure, HZ, T};

type Dep = Dependency<HZ, 10, 8>;

fn budget() -> impl Strategy<Value = RetryBudget<HZ>> {
    prop_oneof![
        (0..=50u8, 0..4u32).prop_map(|(percent, floor)| RetryBudget::ratio(percent, floor).unwrap()),
        (1..8u32, 1..4u32, 1..10_000u64, 2_001..6_000u64).prop_map(|(capacity, refill, period, hold)| {
            RetryBudget::token_bucket(capacity, refill, D::from_ticks(period), D::from_ticks(hold)).unwrap()
        }),
    ]
}

fn breaker() -> impl Strategy<Value = BreakerConfig<HZ>> {
    let trip = prop_oneof![
        (1..4u32, 1..8_000u64).prop_map(|(n, b)| BreakerConfig::consecutive_failures(n, D::from_ticks(b))),
        (1..=100u8, 1..8u32, 1..8_000u64).prop_map(|(percent, min, b)| BreakerConfig::failure_ratio(
            percent,
            min,
            D::from_ticks(b)
        )),
        (1..=64u8, 1..=100u8, any::<u8>(), 1..8_000u64).prop_map(|(size, percent, min, b)| {
            BreakerConfig::count_window(size, percent, 1 + min % size, D::from_ticks(b))
        }),
    ];
    (trip, 1..4u8, proptest::option::of(100..900u64)).prop_map(|(breaker, probes, slow)| {
        let breaker = breaker.probes(probes);
        match slow {
            Some(s) => breaker.slow_calls(D::from_ticks(s)),
            None => breaker,
        }
    })
}

prop_compose! {
    fn config()(
        window in 1..30u64,
        budget in budget(),
        breaker in proptest::option::of(breaker()),
        bulkhead in proptest::option::of((1..5u16, proptest::option::of((1..4u16, 1..2_000u64)))),
        rate in proptest::option::of((1..8u32, 100..5_000u64, 1..5u32, prop_oneof![Just(0u64), 0..2_000u64])),
        // Windows of a few seconds too, where an attempt may wait for airtime (for as long as the
        // policy's longest backoff, 1 s) rather than be refused.
        duty in proptest::option::of((500..=2_000u64, prop_oneof![2_000..5_000u64, 2_000..40_000u64])),
        cooldown in proptest::option::of(1..30_000u64),
        reserve in proptest::option::of(1..=50u8),
    ) -> DependencyConfig<HZ> {
        let mut config = DependencyConfig::new(D::from_secs(window)).budget(budget);
        if let Some(breaker) = breaker {
            config = config.breaker(breaker);
        }
        if let Some((slots, queue)) = bulkhead {
            config = config.bulkhead(slots);
            if let Some((places, wait)) = queue {
                config = config.bulkhead_queue(places, D::from_ticks(wait));
            }
        }
        if let Some((count, period, burst, wait)) = rate {
            config = config.rate_limit(
                RateLimit::new(count, D::from_ticks(period)).burst(burst).max_wait(D::from_ticks(wait)),
            );
        }
        if let Some((airtime, window)) = duty {
            config = config.duty_cycle(DutyCycle::new(D::from_ticks(airtime), D::from_ticks(window)));
        }
        if let Some(max) = cooldown {
            config = config.cooldown(D::from_ticks(max));
        }
        if let Some(percent) = reserve {
            config = config.critical_reserve(percent);
        }
        config
    }
}

prop_compose! {
    /// [`config`], and what a snapshot leaves out but a clock's restart keeps: a client throttle,
    /// an adaptive bulkhead limit and a latency log.
    fn config_all()(
        config in config(),
        throttle in proptest::option::of(1_000..3_000u16),
        adaptive in proptest::option::of((50..900u64, any::<u16>(), 1..1_000u16)),
        latency in proptest::option::of(20..100u16),
    ) -> DependencyConfig<HZ> {
        let mut config = config;
        if let Some(k) = throttle {
            config = config.client_throttle(ClientThrottle::new(k));
        }
        if let (Some((slow, floor, kept)), Some(slots)) = (adaptive, config.bulkhead_slots()) {
            config = config.adaptive_limit(
                AdaptiveLimit::new(D::from_ticks(slow)).min_slots(1 + floor % slots).decrease_to_permille(kept),
            );
        }
        if let Some(samples) = latency {
            config = config.latency_samples(samples);
        }
        config
    }
}

/// One operation of a script: when it starts (after the script's first tick), whether it is
/// sheddable, how long each of its attempts is on air, for how long it may be sent at all (its
/// replay statement), whether it runs under [`PATIENT`] rather than [`POLICY`], and how long after
/// its start a hedge of it is sent if it is still running then.
#[derive(Debug, Clone, Copy)]
struct Start {
    after: u64,
    sheddable: bool,
    airtime: u64,
    safe_for: u64,
    patient: bool,
    hedge: Option<u64>,
}

fn starts(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Start>> {
    starts_within(n, 20_000)
}

/// `n` operations starting within `spread` ticks of the script's first.
fn starts_within(n: std::ops::Range<usize>, spread: u64) -> impl Strategy<Value = Vec<Start>> {
    proptest::collection::vec(
        (
            0..spread,
            any::<bool>(),
            1..400u64,
            prop_oneof![Just(3_600_000u64), 1..3_000u64],
            any::<bool>(),
            prop_oneof![1 => Just(None), 1 => prop_oneof![0..300u64, 0..1_500u64].prop_map(Some)],
        )
            .prop_map(|(after, sheddable, airtime, safe_for, patient, hedge)| Start {
                after,
                sheddable,
                airtime,
                safe_for,
                patient,
                hedge,
            }),
        n,
    )
}

const POLICY: RetryPolicy<HZ> = match RetryPolicy::exponential(4, D::from_millis(50), D::from_secs(1))
    .attempt_timeout(D::from_secs(1))
    .build()
{
    Ok(p) => p,
    Err(e) => panic!("{}", e.message()),
};

/// A policy whose attempts may wait longer, as long as its longest backoff, for airtime.
const PATIENT: RetryPolicy<HZ> = match RetryPolicy::exponential(3, D::from_millis(200), D::from_secs(4))
    .attempt_timeout(D::from_millis(700))
    .build()
{
    Ok(p) => p,
    Err(e) => panic!("{}", e.message()),
};

enum Slot<'a> {
    Poll(Operation<'a, HZ, Failure>),
    Out(Operation<'a, HZ, Failure>, Attempt<HZ>, Fate),
    Abandon(Operation<'a, HZ, Failure>),
    /// A hedge to start, from the plan its operation gave when it started.
    Hedge(HedgePlan<HZ>, &'static RetryPolicy<HZ>),
}

/// A slot of the script's queue, and the race it belongs to: the index of the operation, which its
/// hedge shares.
type Entry<'a> = (usize, Slot<'a>);

/// What a script's run saw, in order: every event (dispatches, refusals, waits, the circuit's and
/// the cooldown's moves, completions), with its instant, and every completion as its caller takes
/// it (with when to try again).
type Transcript = Vec<Seen>;

#[derive(Debug)]
enum Seen {
    Event(Event<HZ>),
    // Compared through `Debug`, which dead-code analysis does not count as a read.
    #[allow(dead_code)]
    Done(Completion<HZ, Failure>),
}

/// Runs `starts` from tick `from` on `dep` to their ends, their attempts' fates taken from `fates`
/// in turn and the jitter drawn from `seed`, as an adapter would: each operation polled when its
/// wait ends, and the first waiting for a slot woken when one frees. Ids start at `first_id`.
fn run(
    dep: &mut Dep,
    config: &DependencyConfig<HZ>,
    from: u64,
    starts: &[Start],
    fates: &[Fate],
    seed: u64,
    first_id: u64,
) -> Transcript {
    run_changing(dep, config, from, starts, fates, seed, first_id, None).0
}

/// What happens to a running script at one instant, that must change no decision.
#[derive(Debug, Clone, Copy)]
enum Change<'c> {
    /// The clock restarts `by` ticks back, as relent-embassy's does every 2^30 ticks with 32-bit
    /// ticks: the dependency and every operation are rebased, each attempt out is taken back from
    /// its operation (as the adapters hold none), and the script goes on in the new clock's time.
    Restart { by: u64 },
    /// The dependency is carried over to `to`, a copy of its configuration, as a configuration
    /// file reloaded unchanged: the operations under way go on under the configuration they
    /// started with, and those that start after it under `to`.
    Reconfigure { to: &'c DependencyConfig<HZ> },
}

/// Where the ids of hedges start: a hedge of the operation of id `n` is `HEDGE_IDS + n`.
const HEDGE_IDS: u64 = 1 << 32;

/// What a change found going on: the parts of the state that held something, and the operations'
/// doings.
type AtChange = Vec<&'static str>;

/// As [`run`], and with `change` = `(at, change)` the change comes at the first step at or after
/// `at`. Returns the transcript, how many of its events came before the change, and what the change
/// found going on.
#[allow(clippy::too_many_arguments)]
fn run_changing<'c>(
    dep: &mut Dep,
    config: &'c DependencyConfig<HZ>,
    from: u64,
    starts: &[Start],
    fates: &[Fate],
    seed: u64,
    first_id: u64,
    mut change: Option<(u64, Change<'c>)>,
) -> (Transcript, usize, AtChange) {
    let mut rng = seeded(seed);
    let mut fates = fates.iter().copied().cycle();
    let mut events = Vec::new();
    let mut queue: BTreeMap<(u64, usize), Entry> = BTreeMap::new();
    for (i, s) in starts.iter().enumerate() {
        let criticality = if s.sheddable { Criticality::Sheddable } else { Criticality::Critical };
        let context = Context::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_ticks(s.safe_for)))
            .id(first_id + i as u64)
            .criticality(criticality)
            .airtime(D::from_ticks(s.airtime));
        let at = from + s.after;
        let config = match change {
            Some((when, Change::Reconfigure { to })) if at >= when => to,
            _ => config,
        };
        let policy = if s.patient { &PATIENT } else { &POLICY };
        let op = Operation::start(policy, config, context, T::from_ticks(at)).unwrap();
        if let Some(after) = s.hedge {
            let plan = op.hedge_plan().expect("a read of up to 4 attempts may be hedged");
            queue.insert((at + after, starts.len() + i), (i, Slot::Hedge(plan, policy)));
        }
        queue.insert((at, i), (i, Slot::Poll(op)));
    }
    let mut seq = 2 * starts.len();
    let mut steps = 0;
    let mut before_change = None;
    let mut found = AtChange::new();
    let mut config = config;
    while let Some(((now, key), (race, slot))) = queue.pop_first() {
        if let Some((_, happens)) = change.filter(|&(at, _)| now >= at) {
            change = None;
            before_change = Some(events.len());
            found = held(dep, config, now);
            // A hedge is due only while its operation runs (sent then, or never): the operation is
            // in the queue, or the step the change came at.
            let popped = (race, !matches!(slot, Slot::Hedge(..)));
            let running = |r: usize| {
                popped == (r, true) || queue.values().any(|(q, s)| *q == r && !matches!(s, Slot::Hedge(..)))
            };
            for (r, slot) in queue.values() {
                found.push(match slot {
                    Slot::Out(op, ..) if op.is_hedge() => "a hedge's attempt out",
                    Slot::Out(..) => "an attempt out",
                    Slot::Poll(op) if op.waits_for_slot() => "an operation in the bulkhead's queue",
                    Slot::Poll(op) => match last_wait(&events, op.id(), now) {
                        Some(wait) => wait,
                        None if op.dispatched() > 0 => "an operation between attempts",
                        None => continue,
                    },
                    Slot::Hedge(..) if running(*r) => "a hedge due",
                    _ => continue,
                });
            }
            queue.insert((now, key), (race, slot));
            let by = match happens {
                Change::Restart { by } => by,
                Change::Reconfigure { to } => {
                    dep.reconfigure(config, to, T::from_ticks(now)).unwrap();
                    config = to;
                    continue;
                }
            };
            dep.rebase(D::from_ticks(by));
            for ((t, key), (race, slot)) in std::mem::take(&mut queue) {
                let slot = match slot {
                    Slot::Poll(mut op) => {
                        op.rebase(D::from_ticks(by));
                        Slot::Poll(op)
                    }
                    Slot::Abandon(mut op) => {
                        op.rebase(D::from_ticks(by));
                        Slot::Abandon(op)
                    }
                    Slot::Out(mut op, _, fate) => {
                        op.rebase(D::from_ticks(by));
                        let attempt = op.attempt().expect("an attempt out is its operation's");
                        Slot::Out(op, attempt, fate)
                    }
                    Slot::Hedge(mut plan, policy) => {
                        plan.rebase(D::from_ticks(by));
                        Slot::Hedge(plan, policy)
                    }
                };
                queue.insert((t - by, key), (race, slot));
            }
            continue;
        }
        steps += 1;
        assert!(steps < 100_000, "the script never ends");
        let at = T::from_ticks(now);
        let mut record = |e: &Event<HZ>| events.push(Seen::Event(*e));
        let next = match slot {
            Slot::Poll(mut op) => match op.poll(at, dep, &mut record) {
                Action::Dispatch(attempt) => {
                    let fate = fates.next().unwrap();
                    Some((fate.reported_at(now, attempt.timeout().as_ticks()), Slot::Out(op, attempt, fate)))
                }
                Action::Wait { until } => match fates.next().unwrap().gives_up_waiting(now, until.as_ticks())
                {
                    Some(then) => Some((then, Slot::Abandon(op))),
                    None => Some((until.as_ticks(), Slot::Poll(op))),
                },
                Action::Done => {
                    let completion = op.take_completion().expect("a completion once done");
                    if completion.disposition == Disposition::Succeeded {
                        // The race is won: the other side is abandoned (or never sent).
                        let other = queue.iter().find_map(|(&key, (r, _))| (*r == race).then_some(key));
                        if let Some(key) = other {
                            seq += 1;
                            match queue.remove(&key).unwrap() {
                                (_, Slot::Poll(op) | Slot::Out(op, ..) | Slot::Abandon(op)) => {
                                    queue.insert((now, seq), (race, Slot::Abandon(op)));
                                }
                                (_, Slot::Hedge(..)) => {}
                            }
                        }
                    }
                    events.push(Seen::Done(completion));
                    None
                }
            },
            Slot::Abandon(mut op) => {
                op.abandon(at, dep, &mut record);
                None
            }
            Slot::Out(mut op, attempt, fate) => {
                fate.report(&mut op, attempt, at, dep, &mut rng, &mut record);
                Some((now, Slot::Poll(op)))
            }
            // Sent only while the operation runs: it is the other of its race in the queue.
            Slot::Hedge(plan, policy) if queue.values().any(|(r, _)| *r == race) => {
                let mut hedge = Operation::start_hedge(policy, config, plan, at);
                assert!(hedge.assign_id(HEDGE_IDS + first_id + race as u64));
                Some((now, Slot::Poll(hedge)))
            }
            Slot::Hedge(..) => None,
        };
        if let Some((when, slot)) = next {
            seq += 1;
            queue.insert((when, seq), (race, slot));
        }
        if dep.slot_for_waiting(config) {
            let woken = queue.iter().find_map(|(&key, (_, slot))| match slot {
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
    // A change due after the script's last step comes once it has ended, on the dependency alone.
    match change {
        Some((_, Change::Restart { by })) => dep.rebase(D::from_ticks(by)),
        Some((at, Change::Reconfigure { to })) => dep.reconfigure(config, to, T::from_ticks(at)).unwrap(),
        None => {}
    }
    let before = before_change.unwrap_or(events.len());
    (events, before, found)
}

/// What operation `id` waits for at `now`, by the last wait it reported, if it still waits for it.
fn last_wait(events: &Transcript, id: OperationId, now: u64) -> Option<&'static str> {
    events.iter().rev().find_map(|e| match *e {
        Seen::Event(Event::WaitingForAirtime { operation, until, .. }) if operation == id => {
            Some((until.as_ticks() > now).then_some("an operation waiting for airtime"))
        }
        Seen::Event(Event::WaitingForRateLimit { operation, until, .. }) if operation == id => {
            Some((until.as_ticks() > now).then_some("an operation waiting for a rate unit"))
        }
        Seen::Event(Event::AttemptDispatched { operation, .. }) if operation == id => Some(None),
        _ => None,
    })?
}

/// The last instant a transcript shows.
fn last_instant(events: &Transcript) -> u64 {
    events
        .iter()
        .filter_map(|e| match e {
            Seen::Event(Event::Completed { at, .. }) => Some(at.as_ticks()),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// What the dependency's queries say at `at`: the same on both sides wherever the transcripts are.
fn readings(dep: &mut Dep, config: &DependencyConfig<HZ>, at: u64) -> impl PartialEq + std::fmt::Debug {
    let t = T::from_ticks(at);
    (
        dep.counts(t),
        dep.circuit(t),
        dep.circuit_open_until(t),
        dep.cooldown_until(t),
        dep.next_rate_unit(config, t),
        dep.airtime_used(config, t),
        dep.next_airtime(config, t, D::from_millis(300)),
        dep.retries_available(config, t),
        (dep.bulkhead_limit(config), dep.throttle_ppm(config, t), dep.latency_percentile(config, 90)),
    )
}

/// One case: a history, the save after it, the sleep, and the script after.
#[derive(Debug, Clone)]
struct Case {
    config: DependencyConfig<HZ>,
    before: Vec<Start>,
    after: Vec<Start>,
    fates: Vec<Fate>,
    seed: u64,
    /// From the history's last instant to the save.
    gap: u64,
    slept: u64,
    /// How many of the dependency's windows the restoring clock reads ahead of the saving one (0:
    /// it counted through the sleep; more: a clock that started elsewhere, as after a reboot).
    /// Whole windows, so that the window's buckets start at the same instants on both.
    ahead: u64,
}

prop_compose! {
    fn case()(
        config in config(),
        before in starts(0..12),
        after in starts(1..12),
        fates in proptest::collection::vec(fate(900), 1..30),
        seed in any::<u64>(),
        gap in prop_oneof![Just(0u64), 0..500u64, 0..30_000u64],
        slept in prop_oneof![Just(0u64), 0..1_000u64, 0..60_000u64],
        ahead in prop_oneof![Just(0u64), 0..1_000u64],
    ) -> Case {
        Case { config, before, after, fates, seed, gap, slept, ahead }
    }
}

/// What the state held when it was saved, and what the script after met: to check that the cases
/// reach every part.
#[derive(Debug, Default)]
struct Held {
    parts: Vec<&'static str>,
    refusals: Vec<&'static str>,
}

/// Runs `case`'s history on a new dependency, saves it, restores a copy, runs the script after on
/// both and fails at the first difference, in an event or in what the dependency's queries say.
fn compare(case: &Case) -> Result<Held, TestCaseError> {
    let config = &case.config;
    prop_assert!(config.validate().is_ok(), "{:?}", config.validate());
    let mut original = Dep::new(config, T::from_ticks(0)).unwrap();
    let history = run(&mut original, config, 0, &case.before, &case.fates, case.seed, 0);
    prop_assert_eq!(original.in_flight(), 0);
    prop_assert_eq!(original.bulkhead_waiting(), 0);
    let saved_at = last_instant(&history) + case.gap;
    let held = held(&mut original, config, saved_at);
    let mut bytes = [0u8; Dep::SNAPSHOT_LEN];
    prop_assert_eq!(original.save(T::from_ticks(saved_at), &mut bytes), Ok(Dep::SNAPSHOT_LEN));
    let woke = saved_at + case.slept;
    // The restored copy's clock reads `shift` more than the original's at every instant.
    let shift = case.ahead * config.window().as_ticks();
    let mut restored =
        Dep::restore(config, &bytes, T::from_ticks(woke + shift), D::from_ticks(case.slept)).unwrap();
    prop_assert_eq!(
        in_original_time(&readings(&mut restored, config, woke + shift), shift as i64),
        format!("{:?}", readings(&mut original, config, woke))
    );

    let (ids, seed) = (case.before.len() as u64, case.seed ^ 1);
    let transcript = run(&mut original, config, woke, &case.after, &case.fates, seed, ids);
    let expected: Vec<String> = transcript.iter().map(|e| format!("{e:?}")).collect();
    let got: Vec<String> = run(&mut restored, config, woke + shift, &case.after, &case.fates, seed, ids)
        .iter()
        .map(|e| in_original_time(e, shift as i64))
        .collect();
    if let Some(i) = (0..expected.len().max(got.len())).find(|&i| expected.get(i) != got.get(i)) {
        prop_assert!(
            false,
            "event {} differs after a snapshot saved at {} and restored at {} ({} on the restoring clock):\n original: {:?}\n restored: {:?}\n(before it: {:?})",
            i,
            saved_at,
            woke,
            woke + shift,
            expected.get(i),
            got.get(i),
            &expected[i.saturating_sub(3)..i]
        );
    }
    let end = last_instant(&transcript);
    for at in [end, end + 1_000, end + 60_000] {
        prop_assert_eq!(
            in_original_time(&readings(&mut restored, config, at + shift), shift as i64),
            format!("{:?}", readings(&mut original, config, at)),
            "at {}",
            at
        );
    }
    let refusals = transcript
        .iter()
        .filter_map(|e| match e {
            Seen::Event(Event::Refused { problem, .. }) => Some(problem.as_str()),
            Seen::Event(Event::AttemptSucceeded { operation, .. }) if operation.0 >= HEDGE_IDS => {
                Some("a hedge that won")
            }
            _ => None,
        })
        .collect();
    Ok(Held { parts: held, refusals })
}

/// `value`'s `Debug` text with every instant in it moved `by` ticks earlier: what the restored copy,
/// on a clock `by` ahead of the original's, says in the original's time.
fn in_original_time(value: &impl std::fmt::Debug, by: i64) -> String {
    const INSTANT: &str = "MonotonicInstant { ticks: ";
    let text = format!("{value:?}");
    let (mut out, mut rest) = (String::new(), text.as_str());
    while let Some(i) = rest.find(INSTANT) {
        let (head, tail) = rest.split_at(i + INSTANT.len());
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let ticks: u64 = tail[..digits].parse().unwrap();
        out.push_str(head);
        out.push_str(&ticks.checked_add_signed(-by).unwrap().to_string());
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// The parts of `dep`'s state that hold something at `at`.
fn held(dep: &mut Dep, config: &DependencyConfig<HZ>, at: u64) -> Vec<&'static str> {
    let t = T::from_ticks(at);
    let counts = dep.counts(t);
    let mut parts = Vec::new();
    if counts.calls > 0 {
        parts.push("window counts");
    }
    match dep.circuit(t) {
        CircuitState::Open => parts.push("an open circuit"),
        CircuitState::HalfOpen => parts.push("a half-open circuit"),
        CircuitState::Closed if counts.failures > 0 && config.circuit_breaker().is_some() => {
            parts.push("a closed circuit that counts failures")
        }
        _ => {}
    }
    if dep.cooldown_until(t).is_some_and(|until| until > t) {
        parts.push("a cooldown");
    }
    if config.rate().is_some() && dep.next_rate_unit(config, t) > t {
        parts.push("a rate limit's debt");
    }
    if config.duty().is_some() && dep.airtime_used(config, t).as_ticks() > 0 {
        parts.push("airtime");
    }
    if dep.bulkhead_limit(config) < config.bulkhead_slots() {
        parts.push("an adaptive limit lowered");
    }
    if dep.throttle_ppm(config, t).is_some_and(|ppm| ppm > 0) {
        parts.push("a throttle refusing some");
    }
    if dep.latency_percentile(config, 50).is_some() {
        parts.push("a latency log that knows its median");
    }
    if let Some(BudgetKind::TokenBucket { capacity, .. }) = config.retry_budget().map(|b| b.kind()) {
        if dep.retries_available(config, t) < Some(capacity) {
            parts.push("a token bucket partly spent");
        }
    }
    parts
}

proptest! {
    #![proptest_config(ProptestConfig { cases: relent_tests::cases(10_000), ..ProptestConfig::default() })]

    /// A restart of the clock by any number of ticks, at any instant, with operations waiting or
    /// attempts out, changes no decision and no instant but by the restart's ticks.
    #[test]
    fn a_restarted_clock_changes_no_decision(
        script in script(),
        by in prop_oneof![1..10_000u64, Just(1 << 30), 1..BASE - 1_000_000],
    ) {
        compare_change(&script, Change::Restart { by })?;
    }

    /// A dependency carried over to a copy of its configuration (a configuration file reloaded
    /// unchanged), at any instant, with operations waiting or attempts out, changes no decision:
    /// as `Dependency::reconfigure` promises, carrying a state over to the configuration it has
    /// changes nothing.
    #[test]
    fn a_reconfiguration_to_the_same_configuration_changes_no_decision(script in script()) {
        let same = script.config;
        compare_change(&script, Change::Reconfigure { to: &same })?;
    }

    /// After any history, a snapshot saved with nothing in flight and restored `slept` later on a
    /// clock that counted through the sleep makes every later decision the original makes.
    #[test]
    fn a_restored_snapshot_decides_everything_after_as_the_original_would(case in case()) {
        compare(&case)?;
    }
}

/// A script of the restart and reconfiguration properties: up to 23 operations starting within
/// 5 s under every protection, their attempts' fates, the jitter's seed, and when (from the
/// script's first tick) the change comes: while operations run, or after the last has ended.
#[derive(Debug, Clone)]
struct Script {
    config: DependencyConfig<HZ>,
    ops: Vec<Start>,
    fates: Vec<Fate>,
    seed: u64,
    at: u64,
}

prop_compose! {
    fn script()(
        config in config_all(),
        ops in starts_within(1..24, 5_000),
        fates in proptest::collection::vec(fate(900), 1..30),
        seed in any::<u64>(),
        at in 0..8_000u64,
    ) -> Script {
        Script { config, ops, fates, seed, at }
    }
}

/// Where the scripts of the restart property start: far enough from tick 0 that a restart by as
/// many ticks as they draw leaves every instant they hold on the new clock.
const BASE: u64 = 1 << 32;

/// A script run twice on fresh dependencies, the second time with `change` at `BASE + at`, must
/// give the same events at the same instants (after a restart, the second's read back in the
/// first's time) and leave the same state. Returns what the change found going on.
fn compare_change(script: &Script, change: Change<'_>) -> Result<AtChange, TestCaseError> {
    let &Script { ref config, ref ops, ref fates, seed, at } = script;
    prop_assert!(config.validate().is_ok(), "{:?}", config.validate());
    let mut plain = Dep::new(config, T::from_ticks(BASE)).unwrap();
    let mut changed = plain.clone();
    let (expected, ..) = run_changing(&mut plain, config, BASE, ops, fates, seed, 0, None);
    let (got, before, found) =
        run_changing(&mut changed, config, BASE, ops, fates, seed, 0, Some((BASE + at, change)));
    let (by, after) = match change {
        Change::Restart { by } => (by, config),
        Change::Reconfigure { to } => (0, to),
    };
    let expected: Vec<String> = expected.iter().map(|e| format!("{e:?}")).collect();
    let got: Vec<String> = got
        .iter()
        .enumerate()
        .map(|(i, e)| if i < before { format!("{e:?}") } else { in_original_time(e, -(by as i64)) })
        .collect();
    if let Some(i) = (0..expected.len().max(got.len())).find(|&i| expected.get(i) != got.get(i)) {
        prop_assert!(
            false,
            "event {} differs with {:?} at {} (after {} events):\n plain:   {:?}\n changed: {:?}\n(before it: {:?})",
            i,
            change,
            BASE + at,
            before,
            expected.get(i),
            got.get(i),
            &expected[i.saturating_sub(3)..i]
        );
    }
    let end = BASE + 30_000;
    for t in [end, end + 1_000, end + 60_000] {
        prop_assert_eq!(
            in_original_time(&readings(&mut changed, after, t - by), -(by as i64)),
            format!("{:?}", readings(&mut plain, config, t)),
            "at {}",
            t
        );
    }
    Ok(found)
}

/// The restart property is only as good as what its restarts find: over fixed cases, each part of
/// the state held something at a restart, and operations were out, between attempts and queued;
/// and the same at a reconfiguration, which runs the same cases.
#[test]
fn the_restarts_and_reconfigurations_find_every_part_holding_something_and_operations_under_way() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for _ in 0..2_000 {
        let script = script().new_tree(&mut runner).unwrap().current();
        let by = (1..BASE - 1_000_000).new_tree(&mut runner).unwrap().current();
        let same = script.config;
        for (change, what) in
            [(Change::Restart { by }, "restart"), (Change::Reconfigure { to: &same }, "reconfigure")]
        {
            let mut found = compare_change(&script, change).unwrap();
            found.sort_unstable();
            found.dedup();
            for key in found {
                *seen.entry((what, key)).or_default() += 1;
            }
        }
    }
    eprintln!("{seen:?}");
    for key in [
        "window counts",
        "an open circuit",
        "a half-open circuit",
        "a cooldown",
        "a rate limit's debt",
        "airtime",
        "a token bucket partly spent",
        "an adaptive limit lowered",
        "a throttle refusing some",
        "a latency log that knows its median",
        "an attempt out",
        "an operation between attempts",
        "an operation in the bulkhead's queue",
        "an operation waiting for airtime",
        "an operation waiting for a rate unit",
        "a hedge due",
        "a hedge's attempt out",
    ] {
        for what in ["restart", "reconfigure"] {
            assert!(seen.get(&(what, key)).copied().unwrap_or(0) >= 20, "{what}, {key}: {seen:?}");
        }
    }
}

/// The property is only as good as the states it saves: over fixed cases, each part of the state
/// held something when saved, and the scripts after met each protection's refusal.
#[test]
fn the_cases_save_every_part_and_meet_every_refusal_after() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..1_000 {
        let case = case().new_tree(&mut runner).unwrap().current();
        let held = compare(&case).unwrap();
        for key in held.parts.into_iter().chain(held.refusals) {
            *seen.entry(key).or_default() += 1;
        }
    }
    eprintln!("{seen:?}");
    for key in [
        "window counts",
        "an open circuit",
        "a half-open circuit",
        "a closed circuit that counts failures",
        "a cooldown",
        "a rate limit's debt",
        "airtime",
        "a token bucket partly spent",
        "circuit_open",
        "cooldown_active",
        "rate_limited",
        "duty_cycle_exceeded",
        "retry_budget_exhausted",
        "bulkhead_full",
        "a hedge that won",
    ] {
        assert!(seen.get(key).copied().unwrap_or(0) >= 10, "{key}: {seen:?}");
    }
}
