//! Reconfiguring a dependency while it runs, on a virtual clock: a refused configuration changes
//! nothing; each part of the state stays, is carried into the new numbers, or is dropped, as
//! `Dependency::reconfigure` says; operations started before the change end under their own
//! configuration and give back exactly what they hold; and, over random traffic between random
//! pairs of configurations, nothing leaks, the carried state stays within the new limits, and a
//! "change" to the same configuration changes nothing.

use proptest::prelude::*;
use relent_core::{
    Action, AdaptiveLimit, Attempt, BreakerConfig, CircuitState, ClientThrottle, ConfigError, Context,
    Dependency, DependencyConfig, DutyCycle, Operation, RateLimit, ReplaySafety, RetryBudget, RetryPolicy,
    Verdict,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, Failure, HZ, T, TIMEOUT, valid};

type State = Dependency<HZ, 10, 8>;

const ONCE: RetryPolicy<HZ> = valid(RetryPolicy::single_attempt().build());
/// Two attempts 100 ms apart, 1 s each at most.
const TWICE: RetryPolicy<HZ> = valid(
    RetryPolicy::constant(2, D::from_millis(100))
        .jitter(relent_core::Jitter::None)
        .attempt_timeout(D::from_secs(1))
        .build(),
);

fn t(ms: u64) -> T {
    T::from_ticks(ms)
}

/// A 10 s window and nothing else: what each test adds its protection to.
const BASE: DependencyConfig<HZ> = DependencyConfig::new(D::from_secs(10));

fn read() -> Context<HZ> {
    Context::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_secs(60)))
}

type Held<'c> = (Operation<'c, HZ, Failure>, Attempt<HZ>);

/// Starts a one-attempt operation under `config` at `ms`: its attempt, in flight, or its
/// refusal's code.
fn send<'c>(config: &'c DependencyConfig<HZ>, state: &mut State, ms: u64) -> Result<Held<'c>, &'static str> {
    send_as(config, state, ms, read())
}

fn send_as<'c>(
    config: &'c DependencyConfig<HZ>,
    state: &mut State,
    ms: u64,
    context: Context<HZ>,
) -> Result<Held<'c>, &'static str> {
    let mut op = Operation::start(&ONCE, config, context, t(ms)).expect("the operation starts");
    match op.poll(t(ms), state, &mut ()) {
        Action::Dispatch(attempt) => Ok((op, attempt)),
        Action::Done => Err(op.take_completion().expect("done").problem.expect("refused").as_str()),
        Action::Wait { .. } => Err("waits"),
    }
}

/// Reports a held attempt at `ms`: a success, or a failure with `verdict`.
fn end((mut op, attempt): Held<'_>, state: &mut State, ms: u64, verdict: Option<Verdict<HZ>>) {
    match verdict {
        None => op.on_success(attempt, t(ms), state, &mut ()),
        Some(verdict) => {
            let failure = Failure { name: "failed", verdict };
            op.on_failure(attempt, t(ms), state, &mut Fixed(0), failure, &mut ());
        }
    }
    assert!(matches!(op.poll(t(ms), state, &mut ()), Action::Done), "a single attempt ends the operation");
}

const FAILED: Option<Verdict<HZ>> = Some(Verdict::Retryable);

#[test]
fn a_refused_configuration_changes_nothing_and_says_what_is_wrong() {
    let a = BASE
        .budget(valid(RetryBudget::token_bucket(5, 5, D::from_secs(60), D::from_secs(10))))
        .breaker(BreakerConfig::consecutive_failures(1, D::from_secs(30)));
    let mut state = State::new(&a, t(0)).unwrap();
    let held = send(&a, &mut state, 0).unwrap();
    end(held, &mut state, 10, FAILED);
    let before = state.clone();
    let refused = [
        (DependencyConfig::new(D::from_ticks(5)), ConfigError::WindowShorterThanBuckets),
        (a.rate_limit(RateLimit::new(0, D::from_secs(1))), ConfigError::ZeroRate),
        (a.bulkhead(0), ConfigError::ZeroBulkhead),
    ];
    for (to, error) in refused {
        assert_eq!(state.reconfigure(&a, &to, t(1_000)), Err(error));
        assert_eq!(state, before, "{error:?} changed the state");
    }
    // A duty cycle needs room in the airtime log.
    let mut logless = Dependency::<HZ, 10, 0>::new(&a, t(0)).unwrap();
    let duty = a.duty_cycle(DutyCycle::new(D::from_secs(1), D::from_secs(10)));
    assert_eq!(logless.reconfigure(&a, &duty, t(0)), Err(ConfigError::AirtimeLogSize));
}

#[test]
fn an_open_circuit_stays_open_to_its_end_and_a_new_break_length_applies_from_the_next_opening() {
    let a = BASE.breaker(BreakerConfig::consecutive_failures(1, D::from_secs(30)));
    let b = BASE.breaker(BreakerConfig::consecutive_failures(1, D::from_secs(60)));
    let mut state = State::new(&a, t(0)).unwrap();
    let held = send(&a, &mut state, 0).unwrap();
    end(held, &mut state, 10, FAILED);
    assert_eq!(state.circuit_open_until(t(10)), Some(t(30_010)));
    state.reconfigure(&a, &b, t(1_000)).unwrap();
    assert_eq!(state.circuit_open_until(t(1_000)), Some(t(30_010)));
    assert_eq!(send(&b, &mut state, 30_009).err(), Some("circuit_open"));
    let probe = send(&b, &mut state, 30_010).unwrap();
    assert_eq!(state.circuit(t(30_010)), CircuitState::HalfOpen);
    end(probe, &mut state, 30_020, FAILED);
    assert_eq!(state.circuit_open_until(t(30_020)), Some(t(90_020)), "60 s, the new break");
}

#[test]
fn a_run_of_failures_counts_towards_a_new_trip_count() {
    let a = BASE.breaker(BreakerConfig::consecutive_failures(5, D::from_secs(30)));
    let b = BASE.breaker(BreakerConfig::consecutive_failures(3, D::from_secs(30)));
    let mut state = State::new(&a, t(0)).unwrap();
    for ms in [0, 100] {
        let held = send(&a, &mut state, ms).unwrap();
        end(held, &mut state, ms + 10, FAILED);
    }
    state.reconfigure(&a, &b, t(200)).unwrap();
    assert_eq!(state.circuit(t(200)), CircuitState::Closed);
    let held = send(&b, &mut state, 300).unwrap();
    end(held, &mut state, 310, FAILED);
    assert_eq!(state.circuit(t(310)), CircuitState::Open, "the third failure in a row, under a count of 3");
}

/// A count window's outcomes are kept under a new rule of the same size (here a higher percent),
/// and forgotten under one of another size, whose slots they do not fill.
#[test]
fn a_count_window_is_kept_for_a_rule_of_its_size_and_forgotten_for_another() {
    let a = BASE.breaker(BreakerConfig::count_window(4, 50, 2, D::from_secs(30)));
    let same_size = BASE.breaker(BreakerConfig::count_window(4, 60, 2, D::from_secs(30)));
    let other_size = BASE.breaker(BreakerConfig::count_window(6, 50, 2, D::from_secs(30)));
    for (to, after) in [(same_size, CircuitState::Open), (other_size, CircuitState::Closed)] {
        let mut state = State::new(&a, t(0)).unwrap();
        let held = send(&a, &mut state, 0).unwrap();
        end(held, &mut state, 10, FAILED); // one failure of the two the rule needs to count
        state.reconfigure(&a, &to, t(100)).unwrap();
        let held = send(&to, &mut state, 200).unwrap();
        end(held, &mut state, 210, FAILED);
        assert_eq!(state.circuit(t(210)), after, "{:?}", to.circuit_breaker());
    }
}

#[test]
fn a_token_bucket_keeps_its_whole_tokens_up_to_the_new_capacity_and_refills_at_the_new_rate() {
    let a = BASE.budget(valid(RetryBudget::token_bucket(20, 20, D::from_secs(60), D::from_secs(10))));
    let b = BASE.budget(valid(RetryBudget::token_bucket(5, 5, D::from_secs(60), D::from_secs(10))));
    let mut state = State::new(&a, t(0)).unwrap();
    assert_eq!(state.retries_available(&a, t(1_000)), Some(20));
    state.reconfigure(&a, &b, t(1_000)).unwrap();
    assert_eq!(state.retries_available(&b, t(1_000)), Some(5), "cut to the smaller capacity");
    state.reconfigure(&b, &a, t(2_000)).unwrap();
    // Back to 20 a minute: the 5 it held, then one more every 3 s, from the change on.
    assert_eq!(state.retries_available(&a, t(2_000)), Some(5));
    assert_eq!(state.retries_available(&a, t(4_999)), Some(5));
    assert_eq!(state.retries_available(&a, t(5_000)), Some(6));
}

#[test]
fn a_token_bucket_added_starts_full_and_one_left_out_is_dropped() {
    let ratio = BASE.budget(valid(RetryBudget::ratio(10, 2)));
    let bucket = BASE.budget(valid(RetryBudget::token_bucket(3, 3, D::from_secs(60), D::from_secs(10))));
    let mut state = State::new(&ratio, t(0)).unwrap();
    state.reconfigure(&ratio, &bucket, t(0)).unwrap();
    assert_eq!(state.retries_available(&bucket, t(0)), Some(3));
    // Spend one: a two-attempt operation whose first attempt fails.
    let mut op = Operation::<HZ, Failure>::start(&TWICE, &bucket, read(), t(0)).unwrap();
    let Action::Dispatch(first) = op.poll(t(0), &mut state, &mut ()) else { panic!("dispatches") };
    op.on_failure(first, t(10), &mut state, &mut Fixed(0), TIMEOUT, &mut ());
    let Action::Wait { until } = op.poll(t(10), &mut state, &mut ()) else { panic!("backs off") };
    let Action::Dispatch(second) = op.poll(until, &mut state, &mut ()) else { panic!("retries") };
    op.on_success(second, t(120), &mut state, &mut ());
    assert_eq!(state.retries_available(&bucket, t(120)), Some(2));
    state.reconfigure(&bucket, &ratio, t(200)).unwrap();
    state.reconfigure(&ratio, &bucket, t(300)).unwrap();
    assert_eq!(state.retries_available(&bucket, t(300)), Some(3), "a bucket added again starts full");
}

#[test]
fn a_lengthened_window_keeps_its_counts_for_longer_and_a_shortened_one_forgets_them_sooner() {
    let ten = BASE;
    let sixty = DependencyConfig::new(D::from_secs(60));
    // Three calls at 0 under 10 s (buckets of 1 s); at 5 s the window becomes 60 s (buckets of
    // 6 s). Their bucket is then 5 back, and ages out 5 buckets of 6 s later: at 30 s, where the
    // old window would have dropped them at 10 s.
    let mut state = State::new(&ten, t(0)).unwrap();
    for _ in 0..3 {
        let held = send(&ten, &mut state, 0).unwrap();
        end(held, &mut state, 0, None);
    }
    state.reconfigure(&ten, &sixty, t(5_000)).unwrap();
    assert_eq!(state.counts(t(5_000)).calls, 3, "the totals do not change at the change");
    assert_eq!(state.counts(t(29_999)).calls, 3);
    assert_eq!(state.counts(t(30_000)).calls, 0);
    // The other way: their bucket is the newest at 5 s, and ages out 10 buckets of 1 s later.
    let mut state = State::new(&sixty, t(0)).unwrap();
    for _ in 0..3 {
        let held = send(&sixty, &mut state, 0).unwrap();
        end(held, &mut state, 0, None);
    }
    state.reconfigure(&sixty, &ten, t(5_000)).unwrap();
    assert_eq!(state.counts(t(14_999)).calls, 3);
    assert_eq!(state.counts(t(15_000)).calls, 0);
}

#[test]
fn a_raised_rate_limit_is_not_held_to_the_old_debt_and_a_lowered_one_applies_from_the_next_unit() {
    let slow = BASE.rate_limit(RateLimit::new(1, D::from_secs(10)));
    let fast = BASE.rate_limit(RateLimit::new(10, D::from_secs(1)));
    let mut state = State::new(&slow, t(0)).unwrap();
    let _held = send(&slow, &mut state, 0).unwrap();
    assert_eq!(state.next_rate_unit(&slow, t(50)), t(10_000));
    state.reconfigure(&slow, &fast, t(50)).unwrap();
    // As if that unit had been taken at 50 under the new limit: one interval of 100 ms later.
    assert_eq!(state.next_rate_unit(&fast, t(50)), t(150));

    let mut state = State::new(&fast, t(0)).unwrap();
    let _held = send(&fast, &mut state, 0).unwrap();
    state.reconfigure(&fast, &slow, t(50)).unwrap();
    assert_eq!(state.next_rate_unit(&slow, t(50)), t(100), "the unit due under the old limit");
    let _held = send(&slow, &mut state, 100).unwrap();
    assert_eq!(state.next_rate_unit(&slow, t(100)), t(10_100), "then the new interval");
}

/// Under another count, the part of a tick the arrival time held (in the old count's units) is
/// rounded up to a whole tick, never read in the new count's units. 3 a second leaves the arrival
/// time at 333 1/3 ms, which becomes 334 at 6 a second with a burst of 3 (a tolerance of 333 2/6):
/// a unit goes at once, which moves the arrival time an interval (166 4/6) on, to 500 4/6, and the
/// next unit is due at 167 4/6, so at tick 168. The third of a tick read as a sixth would give 167.
#[test]
fn under_another_count_a_part_of_a_tick_is_rounded_up_never_misread() {
    let three = BASE.rate_limit(RateLimit::new(3, D::from_secs(1)));
    let six = BASE.rate_limit(RateLimit::new(6, D::from_secs(1)).burst(3));
    let mut state = State::new(&three, t(0)).unwrap();
    let _held = send(&three, &mut state, 0).unwrap();
    assert_eq!(state.next_rate_unit(&three, t(0)), t(334));
    state.reconfigure(&three, &six, t(10)).unwrap();
    assert_eq!(state.next_rate_unit(&six, t(10)), t(10));
    let _held = send(&six, &mut state, 10).unwrap();
    assert_eq!(state.next_rate_unit(&six, t(10)), t(168));
}

#[test]
fn a_reserved_rate_unit_is_kept_as_long_as_the_new_limit_waits() {
    // Units due within 300 ms are reserved and waited for: a debt that far ahead is a promise.
    let waiting = BASE.rate_limit(RateLimit::new(10, D::from_secs(1)).max_wait(D::from_millis(300)));
    let mut state = State::new(&waiting, t(0)).unwrap();
    let _first = send(&waiting, &mut state, 0).unwrap();
    let mut op = Operation::<HZ, Failure>::start(&ONCE, &waiting, read(), t(0)).unwrap();
    assert_eq!(op.poll(t(0), &mut state, &mut ()), Action::Wait { until: t(100) });
    let before = state.clone();
    let quicker = BASE.rate_limit(RateLimit::new(20, D::from_secs(1)).max_wait(D::from_millis(300)));
    state.reconfigure(&waiting, &quicker, t(0)).unwrap();
    assert_eq!(state, before, "200 ms of debt is within what the new limit could have promised");
    assert_eq!(state.next_rate_unit(&quicker, t(0)), t(200));
}

/// An operation started under the old limit, which waits longer for a unit, reserves one further
/// ahead than the new limit would: a change to the configuration the dependency already has does
/// not take that reservation back.
#[test]
fn a_change_to_the_same_rate_limit_keeps_what_an_older_operation_reserved() {
    let waits = BASE.rate_limit(RateLimit::new(10, D::from_secs(1)).max_wait(D::from_secs(1)));
    let no_wait = BASE.rate_limit(RateLimit::new(10, D::from_secs(1)));
    let mut state = State::new(&waits, t(0)).unwrap();
    let _held = send(&waits, &mut state, 0).unwrap();
    state.reconfigure(&waits, &no_wait, t(0)).unwrap();
    let mut older = Operation::<HZ, Failure>::start(&ONCE, &waits, read(), t(0)).unwrap();
    assert_eq!(older.poll(t(0), &mut state, &mut ()), Action::Wait { until: t(100) });
    assert_eq!(state.next_rate_unit(&no_wait, t(0)), t(200));
    let before = state.clone();
    state.reconfigure(&no_wait, &no_wait, t(0)).unwrap();
    assert_eq!(state, before);
}

#[test]
fn a_cooldown_is_cut_to_the_new_longest_and_dropped_with_it() {
    let long = BASE.cooldown(D::from_secs(900));
    let short = BASE.cooldown(D::from_secs(60));
    let mut state = State::new(&long, t(0)).unwrap();
    let held = send(&long, &mut state, 0).unwrap();
    end(held, &mut state, 10, Some(Verdict::RetryableAfter(D::from_secs(600))));
    assert_eq!(state.cooldown_until(t(10)), Some(t(600_010)));
    state.reconfigure(&long, &short, t(1_000)).unwrap();
    assert_eq!(state.cooldown_until(t(1_000)), Some(t(61_000)));
    state.reconfigure(&short, &BASE, t(2_000)).unwrap();
    assert_eq!(state.cooldown_until(t(2_000)), None);
    state.reconfigure(&BASE, &short, t(3_000)).unwrap();
    assert_eq!(send(&short, &mut state, 3_000).map(|_| "sent"), Ok("sent"));
}

#[test]
fn a_breaker_left_out_is_dropped_with_its_isolation_and_starts_closed_when_added_back() {
    let a = BASE.breaker(BreakerConfig::consecutive_failures(1, D::from_secs(30)));
    let mut state = State::new(&a, t(0)).unwrap();
    let held = send(&a, &mut state, 0).unwrap();
    end(held, &mut state, 10, FAILED);
    assert_eq!(state.isolate_circuit(&a), Ok(Some(CircuitState::Isolated)));
    state.reconfigure(&a, &BASE, t(100)).unwrap();
    assert_eq!(state.circuit(t(100)), CircuitState::Closed);
    assert_eq!(send(&BASE, &mut state, 100).map(|_| "sent"), Ok("sent"));
    state.reconfigure(&BASE, &a, t(200)).unwrap();
    assert_eq!((state.circuit(t(200)), state.counts(t(200)).failures), (CircuitState::Closed, 1));
}

/// A probe sent in one half-open episode, still out while the breaker is left out and added back,
/// is not taken for a probe of the new breaker's first episode: its success closes nothing.
#[test]
fn a_probe_still_out_from_before_a_breaker_was_dropped_is_not_the_new_breaker_s() {
    let a = BASE.breaker(BreakerConfig::consecutive_failures(1, D::from_secs(1)));
    let mut state = State::new(&a, t(0)).unwrap();
    let held = send(&a, &mut state, 0).unwrap();
    end(held, &mut state, 10, FAILED);
    let old_probe = send(&a, &mut state, 1_010).unwrap();
    state.reconfigure(&a, &BASE, t(1_020)).unwrap();
    state.reconfigure(&BASE, &a, t(1_030)).unwrap();
    let held = send(&a, &mut state, 1_100).unwrap();
    end(held, &mut state, 1_110, FAILED);
    let new_probe = send(&a, &mut state, 2_110).unwrap();
    assert_eq!(state.circuit(t(2_110)), CircuitState::HalfOpen);
    end(old_probe, &mut state, 2_150, None);
    assert_eq!(state.circuit(t(2_150)), CircuitState::HalfOpen, "the old probe closed the new circuit");
    end(new_probe, &mut state, 2_160, None);
    assert_eq!(state.circuit(t(2_160)), CircuitState::Closed);
}

#[test]
fn attempts_in_flight_keep_their_slots_in_a_smaller_bulkhead_and_give_them_back_under_their_own() {
    let four = BASE.bulkhead(4);
    let two = BASE.bulkhead(2);
    let mut state = State::new(&four, t(0)).unwrap();
    let mut held: Vec<_> = (0..4).map(|_| send(&four, &mut state, 0).unwrap()).collect();
    state.reconfigure(&four, &two, t(10)).unwrap();
    assert_eq!((state.in_flight(), state.bulkhead_limit(&two)), (4, Some(2)));
    assert_eq!(send(&two, &mut state, 10).err(), Some("bulkhead_full"));
    end(held.pop().unwrap(), &mut state, 20, None);
    end(held.pop().unwrap(), &mut state, 20, None);
    assert_eq!(send(&two, &mut state, 20).err(), Some("bulkhead_full"), "2 in flight fill 2 slots");
    end(held.pop().unwrap(), &mut state, 30, None);
    let newcomer = send(&two, &mut state, 30).unwrap();
    end(held.pop().unwrap(), &mut state, 40, None);
    end(newcomer, &mut state, 40, None);
    assert_eq!(state.in_flight(), 0);
}

#[test]
fn an_adaptive_limit_keeps_what_it_learnt_within_the_new_slots_and_floor() {
    let learning = BASE.bulkhead(10).adaptive_limit(AdaptiveLimit::new(D::from_millis(100)));
    let mut state = State::new(&learning, t(0)).unwrap();
    let held = send(&learning, &mut state, 0).unwrap();
    end(held, &mut state, 200, None); // slow: the limit halves
    assert_eq!(state.bulkhead_limit(&learning), Some(5));
    let floor = BASE.bulkhead(10).adaptive_limit(AdaptiveLimit::new(D::from_millis(100)).min_slots(8));
    state.reconfigure(&learning, &floor, t(300)).unwrap();
    assert_eq!(state.bulkhead_limit(&floor), Some(8), "raised to the new floor");
    let smaller = BASE.bulkhead(4).adaptive_limit(AdaptiveLimit::new(D::from_millis(100)));
    state.reconfigure(&floor, &smaller, t(400)).unwrap();
    assert_eq!(state.bulkhead_limit(&smaller), Some(4), "within the new slots");
    let fixed = BASE.bulkhead(10);
    state.reconfigure(&smaller, &fixed, t(500)).unwrap();
    state.reconfigure(&fixed, &learning, t(600)).unwrap();
    assert_eq!(
        state.bulkhead_limit(&learning),
        Some(10),
        "an adaptive limit added again starts at its slots"
    );
}

/// Found by the fuzz target `reconfigure`: an operation started under a floor of 1 and still
/// running after a change to a floor of 4 lowers the limit by its own configuration's rule, to 2,
/// below the floor in force. A change to the configuration in force leaves that as it is, as
/// every rule does where nothing changed (it raised it to the floor); a change of floor raises it.
#[test]
fn a_limit_an_older_operation_lowered_below_the_floor_is_raised_only_by_a_change_of_floor() {
    let low = BASE.bulkhead(8).adaptive_limit(AdaptiveLimit::new(D::from_millis(100)).min_slots(1));
    let high = BASE.bulkhead(8).adaptive_limit(AdaptiveLimit::new(D::from_millis(100)).min_slots(4));
    let mut state = State::new(&low, t(0)).unwrap();
    end(send(&low, &mut state, 0).unwrap(), &mut state, 200, None); // slow: 8 halves to 4
    let slow = send(&low, &mut state, 210).unwrap();
    state.reconfigure(&low, &high, t(250)).unwrap();
    assert_eq!(state.bulkhead_limit(&high), Some(4));
    end(slow, &mut state, 400, None); // slow, under the floor of 1 it started with: 4 halves to 2
    assert_eq!(state.bulkhead_limit(&high), Some(2));
    let before = state.clone();
    state.reconfigure(&high, &high, t(450)).unwrap();
    assert_eq!(state, before, "carried over to the configuration it has, nothing changes");
    let higher = BASE.bulkhead(8).adaptive_limit(AdaptiveLimit::new(D::from_millis(100)).min_slots(5));
    state.reconfigure(&high, &higher, t(500)).unwrap();
    assert_eq!(state.bulkhead_limit(&higher), Some(5), "raised to a new floor");
}

#[test]
fn the_airtime_on_record_counts_against_a_new_duty_cycle_as_if_it_had_been_in_place() {
    let a = BASE.duty_cycle(DutyCycle::new(D::from_secs(1), D::from_secs(10)));
    let b = BASE.duty_cycle(DutyCycle::new(D::from_millis(500), D::from_secs(10)));
    let frame = read().airtime(D::from_millis(400));
    let mut state = State::new(&a, t(0)).unwrap();
    let mut always_b = State::new(&b, t(0)).unwrap();
    let _held = send_as(&a, &mut state, 0, frame).unwrap();
    let _held_b = send_as(&b, &mut always_b, 0, frame).unwrap();
    state.reconfigure(&a, &b, t(100)).unwrap();
    for ms in [100, 5_000, 10_399, 10_400] {
        assert_eq!(state.airtime_used(&b, t(ms)), always_b.airtime_used(&b, t(ms)));
        assert_eq!(
            state.next_airtime(&b, t(ms), D::from_millis(200)),
            always_b.next_airtime(&b, t(ms), D::from_millis(200))
        );
    }
    assert_eq!(state.airtime_used(&b, t(100)), D::from_millis(400));
    state.reconfigure(&b, &BASE, t(200)).unwrap();
    state.reconfigure(&BASE, &b, t(300)).unwrap();
    assert_eq!(state.airtime_used(&b, t(300)), D::from_ticks(0), "a log kept by nobody is dropped");
}

#[test]
fn a_client_throttle_and_a_latency_log_left_out_are_dropped() {
    let a = BASE.client_throttle(ClientThrottle::K2).latency_samples(100);
    let mut state = State::new(&a, t(0)).unwrap();
    for ms in 0..30 {
        let held = send(&a, &mut state, ms).unwrap();
        end(held, &mut state, ms + 7, None);
    }
    assert!(state.latency_percentile(&a, 50).is_some());
    let fresh = State::new(&a, t(0)).unwrap();
    state.reconfigure(&a, &BASE, t(100)).unwrap();
    state.reconfigure(&BASE, &a, t(100)).unwrap();
    assert_eq!(state.latency_percentile(&a, 50), None);
    assert_eq!(state.throttle_ppm(&a, t(100)), fresh.clone().throttle_ppm(&a, t(100)));
}

// ---- Random traffic between two random configurations ----

/// One protection or another, or none, for each part: a configuration `Cfg::build` makes.
#[derive(Debug, Clone, Copy)]
struct Cfg {
    window_s: u64,
    budget: u8,
    breaker: u8,
    bulkhead: u8,
    queue: bool,
    adaptive: bool,
    rate: u8,
    rate_wait: bool,
    cooldown: u8,
    throttle: bool,
    latency: bool,
    reserve: bool,
    duty: bool,
}

impl Cfg {
    fn build(self) -> DependencyConfig<HZ> {
        let mut c = DependencyConfig::new(D::from_secs(self.window_s));
        c = match self.budget {
            0 => c,
            1 => c.budget(valid(RetryBudget::ratio(10, 2))),
            n => c.budget(valid(RetryBudget::token_bucket(
                u32::from(n),
                u32::from(n),
                D::from_secs(10),
                D::from_secs(2),
            ))),
        };
        c = match self.breaker {
            0 => c,
            1 => c.breaker(BreakerConfig::count_window(4, 50, 2, D::from_secs(2))),
            2 => c.breaker(BreakerConfig::count_window(6, 50, 2, D::from_secs(3))),
            6 => c.breaker(BreakerConfig::failure_ratio(50, 2, D::from_secs(2)).probes(2)),
            7 => c.breaker(
                BreakerConfig::consecutive_failures(2, D::from_secs(2)).slow_calls(D::from_millis(300)),
            ),
            // Of 1 to 3 probes: a circuit half-open under one count is carried to another.
            n => c.breaker(
                BreakerConfig::consecutive_failures(u32::from(n - 2), D::from_secs(u64::from(n)))
                    .probes(n - 2),
            ),
        };
        if self.bulkhead > 0 {
            c = c.bulkhead(u16::from(self.bulkhead));
            if self.queue {
                c = c.bulkhead_queue(2, D::from_millis(500));
            }
            if self.adaptive {
                c = c.adaptive_limit(AdaptiveLimit::new(D::from_millis(300)).min_slots(1));
            }
        }
        if self.rate > 0 {
            let limit =
                RateLimit::new(u32::from(self.rate), D::from_secs(1)).burst(u32::from(self.rate % 3) + 1);
            c = c.rate_limit(if self.rate_wait { limit.max_wait(D::from_millis(300)) } else { limit });
        }
        if self.cooldown > 0 {
            c = c.cooldown(D::from_secs(u64::from(self.cooldown)));
        }
        if self.throttle {
            c = c.client_throttle(ClientThrottle::K2);
        }
        if self.latency {
            c = c.latency_samples(50);
        }
        if self.reserve {
            c = c.critical_reserve(25);
        }
        if self.duty {
            c = c.duty_cycle(DutyCycle::new(D::from_secs(1), D::from_secs(10)));
        }
        c
    }
}

fn cfg() -> impl Strategy<Value = Cfg> {
    (
        prop_oneof![Just(5u64), Just(10), Just(60)],
        0u8..5,
        0u8..8,
        0u8..4,
        any::<bool>(),
        any::<bool>(),
        0u8..5,
        any::<bool>(),
        prop_oneof![Just(0u8), Just(1), Just(30)],
        any::<(bool, bool, bool, bool)>(),
    )
        .prop_map(
            |(window_s, budget, breaker, bulkhead, queue, adaptive, rate, rate_wait, cooldown, flags)| Cfg {
                window_s,
                budget,
                breaker,
                bulkhead,
                queue,
                adaptive,
                rate,
                rate_wait,
                cooldown,
                throttle: flags.0,
                latency: flags.1,
                reserve: flags.2,
                duty: flags.3,
            },
        )
}

#[derive(Debug, Clone, Copy)]
enum Step {
    /// The clock moves on this many ms, and operations whose wait ended are polled.
    Advance(u64),
    /// An operation starts under the current configuration: two attempts or one, sheddable or not.
    Start { twice: bool, sheddable: bool },
    /// The attempt held at this index (modulo) ends: 0 a success, 1 a failure, 2 a failure with
    /// a Retry-After of 2 s, 3 abandoned, 4 a slow success.
    End(usize, u8),
    /// The other configuration replaces the current one.
    Swap,
    /// The current configuration replaces itself: nothing may change.
    Same,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u64..700).prop_map(Step::Advance),
        4 => (any::<bool>(), any::<bool>()).prop_map(|(twice, sheddable)| Step::Start { twice, sheddable }),
        4 => (any::<usize>(), 0u8..5).prop_map(|(i, how)| Step::End(i, how)),
        1 => Just(Step::Swap),
        1 => Just(Step::Same),
    ]
}

/// An operation of the script: its configuration's index, and its attempt in flight or the
/// instant it waits for.
struct Op<'c> {
    on: usize,
    op: Operation<'c, HZ, Failure>,
    attempt: Option<Attempt<HZ>>,
    until: T,
}

/// Polls `op` at `now` and files it by what it does next; a finished one is dropped.
fn file<'c>(mut op: Op<'c>, now: T, state: &mut State, ops: &mut Vec<Op<'c>>) {
    match op.op.poll(now, state, &mut ()) {
        Action::Dispatch(a) => {
            op.attempt = Some(a);
            ops.push(op);
        }
        Action::Wait { until } => {
            op.until = until;
            ops.push(op);
        }
        Action::Done => {}
    }
}

/// What an adapter does when a slot is free for the operations waiting in the bulkhead's queue:
/// polls each that `Operation::slot_free` says has one (under the configuration it started with).
/// None of them is left waiting in the queue with a slot free for it: an adapter would poll it
/// again at once, and again, in a loop.
fn wake<'c>(now: T, state: &mut State, ops: &mut Vec<Op<'c>>) {
    let (woken, rest): (Vec<_>, Vec<_>) = ops.drain(..).partition(|o| o.op.slot_free(state));
    *ops = rest;
    for op in woken {
        file(op, now, state, ops);
    }
    assert!(!ops.iter().any(|o| o.op.slot_free(state)), "an operation left waiting for a slot free for it");
}

/// The state's slots and queue against the operations: an attempt in flight holds a slot exactly
/// when its operation's configuration has a bulkhead, and the queue holds those waiting in it.
fn check_held(configs: &[DependencyConfig<HZ>; 2], ops: &[Op<'_>], state: &State) {
    let slots =
        ops.iter().filter(|o| o.attempt.is_some() && configs[o.on].bulkhead_slots().is_some()).count();
    let queued = ops.iter().filter(|o| o.op.waits_for_slot()).count();
    assert_eq!(usize::from(state.in_flight()), slots, "slots held");
    assert_eq!(usize::from(state.bulkhead_waiting()), queued, "places in the queue");
}

/// What a state carried over from `from` to `to` at `now` may hold at most. A rate limit's debt
/// is cut only where the limit changed: otherwise it may run past the limit's own wait, by a unit
/// reserved for an attempt that waits for airtime (a duty cycle's wait is the policy's).
fn check_within(from: &DependencyConfig<HZ>, to: &DependencyConfig<HZ>, state: &mut State, now: T) {
    if let (Some(limit), true) = (to.rate(), from.rate() != to.rate()) {
        let interval = limit.period().as_ticks().div_ceil(u64::from(limit.count()));
        let latest = now.as_ticks()
            + limit.max_wait_time().as_ticks()
            + u64::from(limit.burst_size() - 1) * interval
            + interval
            + 1;
        assert!(state.next_rate_unit(to, now).as_ticks() <= latest, "a rate debt beyond the new limit's");
    }
    if let (Some(max), Some(until)) = (to.cooldown_max(), state.cooldown_until(now)) {
        assert!(until.as_ticks() <= now.as_ticks() + max.as_ticks(), "a cooldown beyond the new longest");
    }
    if let Some(relent_core::BudgetKind::TokenBucket { capacity, .. }) = to.retry_budget().map(|b| b.kind()) {
        assert!(state.retries_available(to, now).unwrap() <= capacity, "tokens beyond the new capacity");
    }
    if let (Some(slots), Some(limit)) = (to.bulkhead_slots(), state.bulkhead_limit(to)) {
        assert!(limit <= slots, "a learnt limit above the bulkhead");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: relent_tests::cases(512), failure_persistence: None, ..ProptestConfig::default() })]

    /// Random traffic against one dependency whose configuration changes back and forth: the
    /// slots and queue places always match the operations that hold them (whichever
    /// configuration each started under), a waiting operation woken for a slot free for it takes
    /// it or leaves the queue, the state carried over stays within the new limits,
    /// a change to the same configuration changes nothing, and once every operation has ended
    /// nothing is left held.
    #[test]
    fn nothing_leaks_and_nothing_exceeds_the_new_limits_across_reconfigurations(
        a in cfg(),
        b in cfg(),
        steps in prop::collection::vec(step(), 1..120),
    ) {
        let configs = [a.build(), b.build()];
        let mut current = 0;
        let mut now = t(0);
        let mut state = State::new(&configs[0], now).unwrap();
        let mut ops: Vec<Op<'_>> = Vec::new();
        for step in steps {
            match step {
                Step::Advance(ms) => {
                    now = t(now.as_ticks() + ms);
                    let (due, rest): (Vec<_>, Vec<_>) =
                        ops.drain(..).partition(|o| o.attempt.is_none() && o.until <= now);
                    ops = rest;
                    for op in due {
                        file(op, now, &mut state, &mut ops);
                    }
                }
                Step::Start { twice, sheddable } => {
                    let config = &configs[current];
                    let class = if sheddable { relent_core::Criticality::Sheddable } else { relent_core::Criticality::Critical };
                    let context = read().airtime(D::from_millis(100)).criticality(class);
                    let policy = if twice { &TWICE } else { &ONCE };
                    if let Ok(op) = Operation::start(policy, config, context, now) {
                        file(Op { on: current, op, attempt: None, until: now }, now, &mut state, &mut ops);
                    }
                }
                Step::End(i, how) => {
                    let holding: Vec<usize> = (0..ops.len()).filter(|&j| ops[j].attempt.is_some()).collect();
                    if holding.is_empty() {
                        continue;
                    }
                    let mut op = ops.swap_remove(holding[i % holding.len()]);
                    let attempt = op.attempt.take().unwrap();
                    let took = if how == 4 { 400 } else { 20 }.min(attempt.timeout().as_ticks());
                    now = t(now.as_ticks() + took);
                    let failure = |verdict| Failure { name: "failed", verdict };
                    match how {
                        0 | 4 => op.op.on_success(attempt, now, &mut state, &mut ()),
                        1 => op.op.on_failure(attempt, now, &mut state, &mut Fixed(3), failure(Verdict::Retryable), &mut ()),
                        2 => op.op.on_failure(
                            attempt, now, &mut state, &mut Fixed(3),
                            failure(Verdict::RetryableAfter(D::from_secs(2))), &mut (),
                        ),
                        _ => op.op.abandon(now, &mut state, &mut ()),
                    }
                    file(op, now, &mut state, &mut ops);
                }
                Step::Swap => {
                    let next = 1 - current;
                    state.reconfigure(&configs[current], &configs[next], now).unwrap();
                    check_within(&configs[current], &configs[next], &mut state, now);
                    current = next;
                }
                Step::Same => {
                    let before = state.clone();
                    state.reconfigure(&configs[current], &configs[current], now).unwrap();
                    prop_assert_eq!(&state, &before);
                }
            }
            wake(now, &mut state, &mut ops);
            check_held(&configs, &ops, &state);
        }
        // Every operation ends: attempts succeed, waits run out.
        for _ in 0..1_000 {
            let Some(mut op) = ops.pop() else { break };
            match op.attempt.take() {
                Some(attempt) => {
                    now = t(now.as_ticks() + 1);
                    op.op.on_success(attempt, now, &mut state, &mut ());
                }
                None => now = now.max(op.until),
            }
            file(op, now, &mut state, &mut ops);
            check_held(&configs, &ops, &state);
        }
        prop_assert!(ops.is_empty(), "every operation ends");
        prop_assert_eq!((state.in_flight(), state.bulkhead_waiting()), (0, 0));
        // And nothing is left stuck: a minute on (past any break, cooldown, rate debt or airtime
        // of these configurations), a first attempt goes.
        let later = t(now.as_ticks() + 60_000);
        let mut op = Operation::<HZ, Failure>::start(&ONCE, &configs[current], read().airtime(D::from_millis(100)), later).unwrap();
        let action = op.poll(later, &mut state, &mut ());
        prop_assert!(matches!(action, Action::Dispatch(_)), "refused a minute on: {:?}", op.take_completion());
    }
}

/// A half-open circuit that has seen two of its three probes succeed, carried over to a rule of
/// one probe, has had the successes the new rule asks for: it lets attempts through as probes,
/// and the first success closes it (the first failure opens it again), rather than waiting for a
/// probe it no longer lets through.
#[test]
fn a_half_open_circuit_with_the_successes_a_smaller_probe_count_asks_for_closes_at_the_next_success() {
    let a = BASE.breaker(BreakerConfig::consecutive_failures(1, D::from_secs(1)).probes(3));
    let b = BASE.breaker(BreakerConfig::consecutive_failures(1, D::from_secs(1)));
    let half_open_with_two_successes = || {
        let mut state = State::new(&a, t(0)).unwrap();
        let held = send(&a, &mut state, 0).unwrap();
        end(held, &mut state, 10, FAILED);
        for ms in [1_010, 1_100] {
            let probe = send(&a, &mut state, ms).unwrap();
            end(probe, &mut state, ms + 10, None);
        }
        assert_eq!(state.circuit(t(1_200)), CircuitState::HalfOpen);
        state.reconfigure(&a, &b, t(1_200)).unwrap();
        state
    };
    let mut state = half_open_with_two_successes();
    let first = send(&b, &mut state, 1_300).expect("a probe goes");
    let second = send(&b, &mut state, 1_301).expect("and another, while none has come back");
    end(first, &mut state, 1_310, None);
    assert_eq!(state.circuit(t(1_310)), CircuitState::Closed, "the first success closes it");
    end(second, &mut state, 1_320, FAILED);
    assert_eq!(state.circuit_open_until(t(1_320)), Some(t(2_320)), "closed, one failure opens it under b");

    let mut state = half_open_with_two_successes();
    let probe = send(&b, &mut state, 1_300).unwrap();
    end(probe, &mut state, 1_310, FAILED);
    assert_eq!(state.circuit_open_until(t(1_310)), Some(t(2_310)), "a failed probe opens it for b's break");
}
