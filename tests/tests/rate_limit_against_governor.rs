//! Relent's rate limiter against governor's, the crate a Rust service would otherwise pick for it:
//! both are GCRA, so on one clock, for the same quota and the same arrivals, they must admit the same
//! calls and name the same instant for the next unit. docs/coming-from.md maps one onto the other.
//!
//! Relent runs at relent-tokio's tick rate (a microsecond) and governor on its fake clock in
//! nanoseconds, advanced by whole microseconds. The quotas are those whose emission interval is a
//! whole number of microseconds: governor keeps the interval in whole nanoseconds, cut down from
//! `period / count` (`Quota::per_second(3)` emits every 333,333,333 ns), where Relent keeps the
//! remainder exactly, so for other quotas the two part by up to a nanosecond a unit (checked below).

use std::num::NonZeroU32;
use std::time::Duration as Std;

use governor::clock::{Clock, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use proptest::prelude::*;
use relent_core::{
    Action, Context, Dependency, DependencyConfig, Disposition, Duration, Instant, Operation, Problem,
    RateLimit, ReplaySafety, RetryPolicy, Verdict,
};

/// relent-tokio's ticks: microseconds.
const HZ: u64 = 1_000_000;
type D = Duration<HZ>;

const ONCE: RetryPolicy<HZ> = match RetryPolicy::single_attempt().build() {
    Ok(p) => p,
    Err(e) => panic!("{}", e.message()),
};

/// What a limiter said of one call: admitted, or refused with the wait until its unit is due.
#[derive(Debug, PartialEq, Eq)]
enum Said {
    Admitted,
    RefusedFor(Std),
}

/// Relent: a dependency whose only protection is `limit`, one single-attempt call at each arrival.
struct Relent {
    config: DependencyConfig<HZ>,
    state: Dependency<HZ, 4>,
}

impl Relent {
    fn new(limit: RateLimit<HZ>) -> Self {
        let config = DependencyConfig::new(D::from_secs(10)).rate_limit(limit);
        let state = Dependency::new(&config, Instant::from_ticks(0)).expect("a valid rate limit");
        Self { config, state }
    }

    fn call(&mut self, at_us: u64) -> Said {
        let now = Instant::<HZ>::from_ticks(at_us);
        let read = Context::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_secs(60)));
        let mut op =
            Operation::<HZ, Verdict<HZ>>::start(&ONCE, &self.config, read, now).expect("one attempt starts");
        match op.poll(now, &mut self.state, &mut ()) {
            Action::Dispatch(attempt) => {
                op.on_success(attempt, now, &mut self.state, &mut ());
                Said::Admitted
            }
            Action::Done => {
                let refused = op.take_completion().expect("a completion once done");
                assert_eq!(
                    (refused.disposition, refused.problem),
                    (Disposition::Rejected, Some(Problem::RateLimited))
                );
                let due = refused.not_before.expect("a refusal by the rate limit says when the unit is due");
                Said::RefusedFor(Std::from_micros(due.as_ticks() - at_us))
            }
            wait @ Action::Wait { .. } => panic!("no max_wait, so no wait: {wait:?}"),
        }
    }
}

/// governor: a direct limiter on its fake clock, which starts at 0 as Relent's does here.
struct Governor {
    clock: FakeRelativeClock,
    limiter: RateLimiter<NotKeyed, InMemoryState, FakeRelativeClock, NoOpMiddleware<Nanos>>,
    at_us: u64,
}

impl Governor {
    fn new(quota: Quota) -> Self {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::direct_with_clock(quota, clock.clone());
        Self { clock, limiter, at_us: 0 }
    }

    fn call(&mut self, at_us: u64) -> Said {
        self.clock.advance(Std::from_micros(at_us - self.at_us));
        self.at_us = at_us;
        match self.limiter.check() {
            Ok(()) => Said::Admitted,
            Err(not_until) => Said::RefusedFor(not_until.wait_time_from(self.clock.now())),
        }
    }
}

fn nonzero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("not zero")
}

/// The same limit both ways: `count` calls per `count × interval`, in bursts of up to `burst`.
fn pair(count: u32, interval_us: u64, burst: u32) -> (Relent, Governor) {
    let relent = RateLimit::new(count, D::from_ticks(u64::from(count) * interval_us)).burst(burst);
    let quota =
        Quota::with_period(Std::from_micros(interval_us)).expect("not zero").allow_burst(nonzero(burst));
    (Relent::new(relent), Governor::new(quota))
}

#[test]
fn fifty_a_second_in_bursts_of_ten_is_admitted_alike_and_refused_for_the_same_wait() {
    // governor's `Quota::per_second(50)` allows bursts of 50; Relent's `RateLimit::new` bursts of 1
    // until `burst` says otherwise. Here both say 10.
    let quota = Quota::per_second(nonzero(50)).allow_burst(nonzero(10));
    assert_eq!(quota, Quota::with_period(Std::from_millis(20)).unwrap().allow_burst(nonzero(10)));
    let (mut relent, mut governor) = pair(50, 20_000, 10);
    // Twelve calls at once: ten go, and the next unit is due in 20 ms; a call then goes, and the
    // one after it is refused for another 20 ms.
    let calls = [0; 12].into_iter().chain([20_000, 20_000]);
    let said: Vec<Said> = calls
        .map(|at| {
            let (r, g) = (relent.call(at), governor.call(at));
            assert_eq!(r, g, "at {at} µs");
            r
        })
        .collect();
    let twenty_ms = || Said::RefusedFor(Std::from_millis(20));
    let mut expected: Vec<Said> = (0..10).map(|_| Said::Admitted).collect();
    expected.extend([twenty_ms(), twenty_ms(), Said::Admitted, twenty_ms()]);
    assert_eq!(said, expected);
}

/// A wait in whole microseconds, rounded up: the first tick of Relent's clock at which it is over.
fn micros_up(wait: Std) -> u64 {
    u64::try_from(wait.as_nanos().div_ceil(1_000)).expect("a short wait")
}

#[test]
fn three_a_second_governor_runs_a_third_of_a_microsecond_a_thousand_units_ahead_relent_keeps_the_rate() {
    // governor emits every 333,333,333 ns, cut down from a third of a second; Relent keeps the
    // third of a nanosecond. A caller that takes every unit the moment it is due (bursts of 2, so
    // that the theoretical arrival time runs ahead of the calls and adds up the intervals) sees
    // the same instants from both, to the microsecond, until the intervals' cut adds up.
    let quota = Quota::per_second(nonzero(3)).allow_burst(nonzero(2));
    assert_eq!(quota.replenish_interval(), Std::from_nanos(333_333_333));
    let mut relent = Relent::new(RateLimit::new(3, D::from_secs(1)).burst(2));
    let mut governor = Governor::new(quota);
    let (mut at, mut units) = (0, 0u32);
    let (relent_wait, governor_wait) = loop {
        assert!(units <= 2_000, "the two still agree after {units} units");
        match (relent.call(at), governor.call(at)) {
            (Said::Admitted, Said::Admitted) => units += 1,
            (Said::RefusedFor(r), Said::RefusedFor(g)) if r == Std::from_micros(micros_up(g)) => {
                at += micros_up(g)
            }
            (Said::RefusedFor(r), Said::RefusedFor(g)) => break (r, g),
            other => panic!("at {at} µs, after {units} units, one admits and the other refuses: {other:?}"),
        }
    };
    // 1,001 units at the instants both name; the next is due 1,000 intervals after the second
    // unit: 333,333,333 µs exactly by governor's cut interval, a third of a microsecond later by
    // the rate, so at the next whole microsecond by Relent's.
    assert_eq!((at, units), (333_000_000, 1_001));
    assert_eq!((governor_wait, relent_wait), (Std::from_micros(333_333), Std::from_micros(333_334)));
    // governor then admits a 1,002nd unit in 333,333,333 µs, where 3 a second in bursts of 2 allow
    // 2 + 999.999999; Relent admits it a microsecond later, within the rate.
    assert_eq!(governor.call(333_333_333), Said::Admitted);
    assert_eq!(relent.call(333_333_333), Said::RefusedFor(Std::from_micros(1)));
    assert_eq!(relent.call(333_333_334), Said::Admitted);
}

/// When the next call comes: after a gap, or a whole number of intervals after the instant the
/// last refusal named for the next unit, on that tick or a tick either side of it (what callers
/// that wait for their units do; `burst - 1` intervals on is the limiter's arrival time).
#[derive(Debug, Clone, Copy)]
enum Next {
    After(u64),
    AtDue { intervals: u32, tick: i8 },
}

fn next() -> impl Strategy<Value = Next> {
    prop_oneof![
        4 => Just(Next::After(0)),
        8 => (0..=2_000u64).prop_map(Next::After),
        8 => (0..=60_000u64).prop_map(Next::After),
        1 => (0..=2_000_000u64).prop_map(Next::After),
        8 => (0..12u32, -1..=1i8).prop_map(|(intervals, tick)| Next::AtDue { intervals, tick }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(2_000)
    ))]

    /// For any quota with an interval of whole microseconds, any burst and any arrivals (many at
    /// one instant, gaps shorter and longer than the interval, idle spells that refill the burst,
    /// calls on the tick a unit falls due and a tick either side), the two limiters admit the same
    /// calls and refuse the others for the same wait.
    #[test]
    fn relent_and_governor_admit_the_same_calls_and_name_the_same_next_unit(
        count in 1..=100u32,
        interval_us in 1..=50_000u64,
        burst in 1..=12u32,
        calls in prop::collection::vec(next(), 1..300),
    ) {
        let (mut relent, mut governor) = pair(count, interval_us, burst);
        let (mut at, mut due, mut admitted) = (0u64, 0u64, 0u64);
        for (i, call) in calls.iter().enumerate() {
            at = match *call {
                Next::After(gap) => at + gap,
                Next::AtDue { intervals, tick } => {
                    (due + u64::from(intervals) * interval_us).saturating_add_signed(i64::from(tick)).max(at)
                }
            };
            let (r, g) = (relent.call(at), governor.call(at));
            prop_assert_eq!(&r, &g, "call {} at {} µs", i, at);
            match r {
                Said::Admitted => admitted += 1,
                Said::RefusedFor(wait) => due = at + u64::try_from(wait.as_micros()).expect("a short wait"),
            }
        }
        // Never more than the burst and a unit an interval since the first call.
        prop_assert!(admitted <= u64::from(burst) + at / interval_us);
    }
}
