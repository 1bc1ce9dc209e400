//! The latency log on a virtual clock: which attempts it records, the percentile it gives against
//! the exact one over random latencies, how it forgets, and the hedge delay read from it.

use proptest::prelude::*;
use relent_core::{
    Action, Context, DependencyConfig, HedgeDelay, Operation, ReplaySafety, RetryBudget, RetryPolicy,
    StartError, Verdict,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, Dep, Failure, HZ, Recorder, T, TIMEOUT, valid};

const ONCE: RetryPolicy<HZ> = valid(RetryPolicy::single_attempt().build());
const BUG: Failure = Failure { name: "500", verdict: Verdict::NotRetryable };

fn logged(samples: u16) -> DependencyConfig<HZ> {
    DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(10, 5))).latency_samples(samples)
}

fn read() -> Context<HZ> {
    Context::new(D::from_secs(60), ReplaySafety::replayable_read(D::from_secs(600)))
}

/// How an attempt ends.
#[derive(Debug, Clone, Copy)]
enum End {
    Ok,
    Fail(Failure),
    Abandon,
}

/// One operation of one attempt, sent at `at` ms, ending `took` ms later as `end` says.
fn attempt(dep: &mut Dep, at: u64, took: u64, end: End) {
    let config = dep.config;
    let mut op: Operation<'_, HZ, Failure> =
        Operation::start(&ONCE, &config, read(), T::from_ticks(at)).unwrap();
    let rec = &mut Recorder::default();
    let Action::Dispatch(attempt) = op.poll(T::from_ticks(at), &mut dep.state, rec) else {
        panic!("not sent")
    };
    let now = T::from_ticks(at + took);
    match end {
        End::Ok => op.on_success(attempt, now, &mut dep.state, rec),
        End::Fail(f) => op.on_failure(attempt, now, &mut dep.state, &mut Fixed::top(), f, rec),
        End::Abandon => op.abandon(now, &mut dep.state, rec),
    }
}

fn percentile(dep: &Dep, percent: u8) -> Option<u64> {
    dep.state.latency_percentile(&dep.config, percent).map(|d| d.as_ticks())
}

/// Successes, failures of either kind and abandoned attempts are all recorded, each with how long
/// it ran: the 19 fast ones and one slow one of each kind put the 95th percentile at the slow one.
#[test]
fn every_attempt_that_ends_is_recorded_with_how_long_it_ran() {
    for slow in [End::Ok, End::Fail(TIMEOUT), End::Fail(BUG), End::Abandon] {
        let mut dep = Dep::new(logged(1_000));
        for i in 0..19 {
            attempt(&mut dep, i * 100, 20, End::Ok);
        }
        assert_eq!(percentile(&dep, 95), None, "{slow:?}: 19 attempts hold no 95th percentile");
        attempt(&mut dep, 2_000, 900, slow);
        // 20 attempts: the 95th is the 19th, 20 ms (its bucket: 20 to 23).
        assert_eq!(percentile(&dep, 95), Some(23), "{slow:?}");
        attempt(&mut dep, 3_000, 900, slow);
        // Two slow of 21: the 95th is now a slow one's (its bucket: 896 to 1,023).
        assert_eq!(percentile(&dep, 95), Some(1_023), "{slow:?}");
    }
}

/// Without `latency_samples`, no log, and a hedge learnt from it is refused; a percentile out of
/// range is refused; a dependency that slowed down is hedged later as its log follows.
#[test]
fn the_hedge_delay_follows_the_log_within_its_floor_and_fallback() {
    let plain = Dep::new(DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(10, 5))));
    let p95 = HedgeDelay::percentile(95);
    assert_eq!(plain.state.latency_percentile(&plain.config, 50), None);
    assert_eq!(plain.state.hedge_delay(&plain.config, p95), Err(StartError::HedgeWithoutLatencyLog));
    assert_eq!(
        plain.state.hedge_delay(&plain.config, HedgeDelay::after(D::from_millis(40))),
        Ok(Some(D::from_millis(40)))
    );
    let mut dep = Dep::new(logged(100));
    for percent in [0, 100, 255] {
        assert_eq!(
            dep.state.hedge_delay(&dep.config, HedgeDelay::percentile(percent)),
            Err(StartError::HedgePercentileOutOfRange { percent })
        );
    }
    let delay =
        |dep: &Dep, h: HedgeDelay<HZ>| dep.state.hedge_delay(&dep.config, h).unwrap().map(|d| d.as_ticks());
    let fallback = p95.until_learnt(D::from_millis(50));
    assert_eq!((delay(&dep, p95), delay(&dep, fallback)), (None, Some(50)));
    // 100 attempts of 20 ms: the 95th percentile is 23 ms, or the floor of 30.
    for i in 0..100 {
        attempt(&mut dep, i * 10, 20, End::Ok);
    }
    assert_eq!((delay(&dep, p95), delay(&dep, fallback)), (Some(23), Some(23)));
    assert_eq!(delay(&dep, p95.at_least(D::from_millis(30))), Some(30));
    // The dependency slows to 200 ms: once the slow attempts are more than a twentieth of the
    // log's weight, the hedge goes at their percentile (192 to 223 ms). The 100 fast ones were
    // halved at the 100th (to 400), so the third slow one (24 of 424) does it.
    let mut t = 2_000;
    let mut slow = 0;
    while delay(&dep, p95) == Some(23) {
        attempt(&mut dep, t, 200, End::Ok);
        t += 10;
        slow += 1;
    }
    assert_eq!((slow, delay(&dep, p95)), (3, Some(223)));
}

/// Attempts of 0 to 3 ticks have a bucket each, and one longer than 2³² ticks counts as that.
#[test]
fn the_shortest_and_the_longest_attempts_are_recorded_at_the_ends_of_the_log() {
    for took in 0..4 {
        let mut dep = Dep::new(logged(100));
        for i in 0..20 {
            attempt(&mut dep, i * 10, took, End::Ok);
        }
        assert_eq!(percentile(&dep, 50), Some(took), "{took} ticks");
    }
    let mut dep = Dep::new(logged(100));
    let past = (1u64 << 32) + 5;
    for i in 0..20 {
        attempt(&mut dep, i * past, past, End::Ok);
    }
    assert_eq!(percentile(&dep, 50), Some(u64::from(u32::MAX)));
}

/// A log weighs 20 to 4,000 attempts before it halves, and says so otherwise; a hedge delay says
/// which percentile it reads.
#[test]
fn a_log_outside_20_to_4000_attempts_is_refused() {
    for (samples, ok) in [(19, false), (20, true), (4_000, true), (4_001, false)] {
        let got = relent_core::Dependency::<HZ, 10>::new(&logged(samples), T::from_ticks(0)).map(drop);
        assert_eq!(got, if ok { Ok(()) } else { Err(relent_core::ConfigError::LatencySamplesOutOfRange) });
    }
    assert_eq!(logged(200).latency_log_samples(), Some(200));
    assert_eq!(HedgeDelay::<HZ>::percentile(90).percent(), Some(90));
    assert_eq!(HedgeDelay::<HZ>::after(D::from_millis(5)).percent(), None);
    // A fixed delay needs no dependency to read, and keeps its floor; a percentile does need one.
    let fixed = HedgeDelay::<HZ>::after(D::from_millis(5));
    assert_eq!(
        (fixed.fixed(), fixed.at_least(D::from_millis(8)).fixed()),
        (Some(D::from_millis(5)), Some(D::from_millis(8)))
    );
    assert_eq!(HedgeDelay::<HZ>::percentile(90).until_learnt(D::from_millis(5)).fixed(), None);
}

/// The log's percentile against the exact one, over up to 4,000 random latencies (one halving at
/// most, which keeps the order of the weights): never below it, and at most a quarter above.
fn exact(sorted: &[u64], percent: u8) -> u64 {
    let rank = (sorted.len() * usize::from(percent)).div_ceil(100);
    sorted[rank - 1]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(relent_tests::cases(256)))]

    #[test]
    fn the_percentile_is_never_below_the_exact_one_and_at_most_a_quarter_above(
        latencies in prop::collection::vec(0u64..200_000, 100..1_000),
        percent in 1u8..=99,
    ) {
        let mut dep = Dep::new(logged(4_000));
        for (i, &took) in latencies.iter().enumerate() {
            attempt(&mut dep, i as u64 * 1_000, took, End::Ok);
        }
        let mut sorted = latencies.clone();
        sorted.sort_unstable();
        let n = sorted.len();
        let got = percentile(&dep, percent);
        if n * usize::from(100 - percent) < 100 {
            prop_assert_eq!(got, None);
        } else {
            let (got, exact) = (got.unwrap(), exact(&sorted, percent));
            prop_assert!(got >= exact && got <= exact + exact / 4, "{} against {}", got, exact);
        }
    }
}
