//! The adapter's mapping onto embassy-time, on its mock driver: exact delays and timeouts, attempt
//! futures dropped at their timeout, Retry-After honoured to the tick, a `static` dependency behind
//! a critical section, slots given back on cancellation, and a change of configuration while
//! frames run.
//!
//! Every test runs with 64-bit and with 32-bit ticks (`--features ticks-u32`); the last ones, with
//! 32-bit ticks only, run operations and dependencies across restarts of the core's clock. A test
//! of a protection needs its feature; the others run with none compiled in too, as firmware builds
//! this crate (`--no-default-features`, and the firmware example's
//! `--no-default-features --features ticks-u32,breaker,cooldown,duty-cycle`).
//!
//! They run on this crate's test clock (feature `test-clock`): `test_clock::run` polls the future
//! and, whenever it waits, moves the clock straight to its earliest timer, so every time asserted
//! is the exact tick a wait ended at. Some tests step or reset the clock themselves, so each takes
//! a lock and they run one at a time.

#![allow(clippy::useless_conversion)] // Conversions that are one only with 32-bit ticks.

use core::cell::RefCell;
use core::future::Future;
use std::sync::Mutex;

use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use relent_embassy::core::{
    Classify, Context, Dependency, DependencyConfig, Event, Jitter, Problem, ReplaySafety, RetryBudget,
    RetryPolicy, Verdict,
};
#[cfg(feature = "duty-cycle")]
use relent_embassy::core::{Disposition, DutyCycle};
use relent_embassy::test_clock;
use relent_embassy::{AttemptError, Duration, HZ, SharedDependency};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[cfg(feature = "bulkhead")]
mod common;

use test_clock::run;

fn elapsed_ms(since: embassy_time::Instant) -> u64 {
    (embassy_time::Instant::now() - since).as_millis()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkError {
    Busy(u32),
}

impl Classify<HZ> for LinkError {
    fn classify(&self) -> Verdict<HZ> {
        match self {
            Self::Busy(s) => Verdict::retryable_after_secs(*s),
        }
    }
}

const CHECKOUT: RetryPolicy<HZ> =
    match RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(Duration::from_secs(3))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };

/// Retries with a ratio budget: what every build has, the firmware's with no protection included.
const RETRIES: DependencyConfig<HZ> =
    DependencyConfig::new(Duration::from_secs(10)).budget(match RetryBudget::ratio(10, 10) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    });

/// One frame in flight at a time, where the bulkhead is compiled in.
#[cfg(feature = "bulkhead")]
const LINK: DependencyConfig<HZ> = RETRIES.bulkhead(1);
#[cfg(not(feature = "bulkhead"))]
const LINK: DependencyConfig<HZ> = RETRIES;

fn shared() -> SharedDependency<'static, CriticalSectionRawMutex, 4> {
    SharedDependency::new(&LINK, Dependency::new(&LINK, relent_embassy::now()).unwrap())
}

fn rng() -> rand_xoshiro::Xoshiro256PlusPlus {
    rand_core::SeedableRng::seed_from_u64(1)
}

fn read(deadline_ms: u16) -> Context<HZ> {
    Context::new(
        Duration::from_millis(deadline_ms.into()),
        ReplaySafety::replayable_read(Duration::from_secs(3600)),
    )
}

#[test]
fn seed_000_checkout_attempts_are_cut_at_their_timeouts_to_the_tick() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let link = shared();
    let attempts = RefCell::new(Vec::new());
    let t0 = embassy_time::Instant::now();
    let mut rng = rng();
    let done = run(link.execute(&CHECKOUT, read(7_500), &mut rng, |info| {
        // When it was sent, how long it may run, and when its timer drops it.
        attempts.borrow_mut().push((
            elapsed_ms(t0),
            info.timeout().as_millis(),
            (info.expires() - t0).as_millis(),
        ));
        core::future::pending::<Result<(), LinkError>>()
    }))
    .unwrap();
    assert_eq!(*attempts.borrow(), [(0, 3_000, 3_000), (3_100, 3_000, 6_100), (6_300, 1_200, 7_500)]);
    assert_eq!(elapsed_ms(t0), 7_500);
    assert_eq!(done.completion.problem, Some(Problem::AttemptsExhausted));
    assert_eq!(
        done.completion.last_failure,
        Some(AttemptError::TimedOut { after: Duration::from_millis(1_200) })
    );
}

#[test]
fn a_retry_after_is_waited_to_the_tick_and_events_reach_the_observer() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let link = shared();
    let t0 = embassy_time::Instant::now();
    let starts = RefCell::new(Vec::new());
    let mut events = Vec::new();
    let mut record = |e: &Event<HZ>| events.push(*e);
    let mut rng = rng();
    let done = run(link.execute_with(&CHECKOUT, read(10_000), &mut rng, &mut record, |info| {
        starts.borrow_mut().push(elapsed_ms(t0));
        async move { if info.number() == 1 { Err(LinkError::Busy(1)) } else { Ok(5u8) } }
    }))
    .unwrap();
    assert_eq!(done.value, Some(5));
    assert_eq!(*starts.borrow(), [0, 1_000]);
    let scheduled: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::RetryScheduled { delay, .. } => Some(delay.as_ticks().into()),
            _ => None,
        })
        .collect();
    assert_eq!(scheduled, [1_000_000], "1 s in embassy ticks (1 MHz with the mock driver)");
}

/// A "busy, retry in 100 s" beyond the policy's 2 s maximum delay defers the operation; `retry_at`
/// names the instant to try again on embassy's clock, to the tick, ready for `Timer::at`. A success
/// has none. `{:?}` of a `Done` shows its value and completion.
#[test]
fn a_deferral_says_when_to_try_again_on_embassys_clock() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let link = shared();
    let mut rng = rng();
    test_clock::advance(embassy_time::Duration::from_millis(250));
    let t0 = embassy_time::Instant::now();
    let busy = run(link.execute(&CHECKOUT, read(10_000), &mut rng, |_| async {
        embassy_time::Timer::after_millis(40).await;
        Err::<(), _>(LinkError::Busy(100))
    }))
    .unwrap();
    assert_eq!(busy.completion.problem, Some(Problem::RetryAfterExceedsMaximumDelay));
    assert_eq!(busy.retry_at(), Some(t0 + embassy_time::Duration::from_millis(100_040)));
    // `{:?}` shows the value and the completion, not how `retry_at` reads it.
    let shown = format!("{busy:?}");
    assert_eq!(shown, format!("Done {{ value: None, completion: {:?}, .. }}", busy.completion));
    let ok =
        run(link.execute(&CHECKOUT, read(10_000), &mut rng, |_| async { Ok::<_, LinkError>(()) })).unwrap();
    assert!(ok.completion.is_success());
    assert_eq!(ok.retry_at(), None);
}

/// A command that isolates the link while a frame is out (an interrupt handler, here the attempt
/// itself) ends the operation when that frame fails, without waiting out the backoff; every later
/// operation is refused unsent, with no instant to try again, until the link is closed.
#[cfg(feature = "breaker-isolate")]
#[test]
fn an_isolated_link_refuses_frames_unsent_until_it_is_closed() {
    use relent_embassy::core::{BreakerConfig, CircuitState, ConfigError, Disposition};
    const GUARDED: DependencyConfig<HZ> =
        RETRIES.breaker(BreakerConfig::consecutive_failures(5, Duration::from_secs(60)));
    static UPLINK: SharedDependency<'static, CriticalSectionRawMutex, 4> =
        match Dependency::new(&GUARDED, relent_embassy::Instant::from_ticks(0)) {
            Ok(state) => SharedDependency::new(&GUARDED, state),
            Err(e) => panic!("{}", e.message()),
        };
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let mut rng = rng();
    let t0 = embassy_time::Instant::now();
    let cut = run(UPLINK.execute(&CHECKOUT, read(10_000), &mut rng, |_| async {
        embassy_time::Timer::after_millis(40).await;
        assert_eq!(UPLINK.isolate_circuit(), Ok(Some(CircuitState::Isolated)));
        Err::<(), _>(LinkError::Busy(0))
    }))
    .unwrap();
    assert_eq!(
        (cut.completion.disposition, cut.completion.problem, cut.completion.summary.dispatched),
        (Disposition::Rejected, Some(Problem::CircuitIsolated), 1)
    );
    assert_eq!((elapsed_ms(t0), cut.retry_at()), (40, None), "ended at the failure, with no time to retry");
    let sent = RefCell::new(0);
    let attempt = || {
        *sent.borrow_mut() += 1;
        async { Ok::<_, LinkError>(()) }
    };
    let refused = run(UPLINK.execute(&CHECKOUT, read(10_000), &mut rng, |_| attempt())).unwrap();
    assert_eq!((refused.completion.problem, *sent.borrow()), (Some(Problem::CircuitIsolated), 0));
    assert_eq!(UPLINK.close_circuit(), Ok(Some(CircuitState::Closed)));
    assert_eq!(UPLINK.lock(|state, now| state.circuit(now)), CircuitState::Closed);
    let ok = run(UPLINK.execute(&CHECKOUT, read(10_000), &mut rng, |_| attempt())).unwrap();
    assert_eq!((ok.completion.is_success(), *sent.borrow()), (true, 1));
    // A link with no breaker has no circuit to isolate.
    assert_eq!(shared().isolate_circuit(), Err(ConfigError::NoBreaker));
}

/// A gateway that rejects most frames, under a client throttle of K = 1: after two rejections the
/// third frame is refused unsent (2/3 on a carry of 1/2), with no time to try again (the next may
/// go), and the shared state says what the throttle refused and how likely it is to refuse next.
#[cfg(feature = "throttle")]
#[test]
fn a_throttled_frame_is_refused_unsent_with_no_time_to_retry() {
    use relent_embassy::core::{ClientThrottle, Disposition};
    const THROTTLED: DependencyConfig<HZ> = RETRIES.client_throttle(ClientThrottle::new(1_000));
    const ONCE: RetryPolicy<HZ> = match RetryPolicy::single_attempt().build() {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let gateway: SharedDependency<'_, CriticalSectionRawMutex, 4> =
        SharedDependency::new(&THROTTLED, Dependency::new(&THROTTLED, relent_embassy::now()).unwrap());
    let mut rng = rng();
    let sent = RefCell::new(0);
    let rejected = || {
        *sent.borrow_mut() += 1;
        async { Err::<(), _>(LinkError::Busy(0)) }
    };
    for _ in 0..2 {
        let done = run(gateway.execute(&ONCE, read(10_000), &mut rng, |_| rejected())).unwrap();
        assert_eq!(done.completion.problem, Some(Problem::AttemptsExhausted));
    }
    let refused = run(gateway.execute(&ONCE, read(10_000), &mut rng, |_| rejected())).unwrap();
    assert_eq!(
        (refused.completion.disposition, refused.completion.problem, refused.retry_at(), *sent.borrow()),
        (Disposition::Rejected, Some(Problem::ClientThrottled), None, 2)
    );
    let (throttled, ppm) =
        gateway.lock(|state, now| (state.counts(now).throttled, state.throttle_ppm(&THROTTLED, now)));
    assert_eq!((throttled, ppm), (1, Some(750_000)), "3 requests, none accepted: 3/4 of the next");
}

/// A link whose bulkhead's limit adapts: a frame that runs past its timeout, on embassy's clock,
/// is a sign of overload that halves the limit from 2 slots to 1; then a fast frame, with the one
/// slot in use, is a whole round at a limit of 1, and adds the slot back.
#[cfg(feature = "bulkhead-adaptive")]
#[test]
fn a_frame_that_times_out_halves_the_links_adaptive_limit_and_says_so() {
    use relent_embassy::core::AdaptiveLimit;
    const ADAPTIVE: DependencyConfig<HZ> =
        RETRIES.bulkhead(2).adaptive_limit(AdaptiveLimit::new(Duration::from_millis(250)));
    const ONCE: RetryPolicy<HZ> =
        match RetryPolicy::single_attempt().attempt_timeout(Duration::from_millis(500)).build() {
            Ok(p) => p,
            Err(e) => panic!("{}", e.message()),
        };
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let link: SharedDependency<'_, CriticalSectionRawMutex, 4> =
        SharedDependency::new(&ADAPTIVE, Dependency::new(&ADAPTIVE, relent_embassy::now()).unwrap());
    let mut rng = rng();
    let limit = || link.lock(|state, _| state.bulkhead_limit(&ADAPTIVE));
    assert_eq!(limit(), Some(2));
    // Each move reaches the observer (and, with `defmt`, the log), with the limit before and after.
    let mut moves = Vec::new();
    let mut record = |e: &Event<HZ>| {
        if let Event::BulkheadLimitChanged { from, to, .. } = *e {
            moves.push((from, to));
        }
    };
    let start = embassy_time::Instant::now();
    let hung = run(link.execute_with(&ONCE, read(10_000), &mut rng, &mut record, |_| {
        core::future::pending::<Result<(), LinkError>>()
    }));
    assert_eq!(
        (hung.unwrap().completion.problem, elapsed_ms(start)),
        (Some(Problem::AttemptsExhausted), 500)
    );
    assert_eq!(limit(), Some(1));
    let ok = |_| async { Ok::<(), LinkError>(()) };
    let fast = run(link.execute_with(&ONCE, read(10_000), &mut rng, &mut record, ok));
    assert_eq!(fast.unwrap().completion.problem, None);
    assert_eq!(limit(), Some(2));
    assert_eq!(moves, [(2, 1), (1, 2)]);
}

/// A gateway's retry budget of two tokens, half kept for critical frames: the first telemetry
/// frame that fails is retried (one token), the second is not (only the reserve is left), and an
/// alarm frame that fails is retried with the reserve's token.
#[cfg(all(feature = "criticality", feature = "token-bucket"))]
#[test]
fn telemetry_stated_sheddable_leaves_the_budget_s_reserve_to_an_alarm() {
    use relent_embassy::core::Criticality;
    const RESERVED: DependencyConfig<HZ> = DependencyConfig::new(Duration::from_secs(10))
        .budget(match RetryBudget::token_bucket(2, 1, Duration::from_secs(600), Duration::from_secs(10)) {
            Ok(b) => b,
            Err(e) => panic!("{}", e.message()),
        })
        .critical_reserve(50);
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let link: SharedDependency<'_, CriticalSectionRawMutex, 4> =
        SharedDependency::new(&RESERVED, Dependency::new(&RESERVED, relent_embassy::now()).unwrap());
    let mut rng = rng();
    let mut frame = |criticality| {
        let first = core::cell::Cell::new(true);
        let done = run(link.execute(&CHECKOUT, read(10_000).criticality(criticality), &mut rng, |_| {
            let fails = first.replace(false);
            async move { if fails { Err(LinkError::Busy(0)) } else { Ok(()) } }
        }))
        .unwrap();
        (done.completion.problem, done.completion.summary.dispatched)
    };
    assert_eq!(frame(Criticality::Sheddable), (None, 2), "the first telemetry frame is retried");
    assert_eq!(
        frame(Criticality::Sheddable),
        (Some(Problem::RetryBudgetExhausted), 1),
        "the second finds only the reserve"
    );
    assert_eq!(frame(Criticality::Critical), (None, 2), "the alarm takes the reserve's token");
}

/// The observer runs under the dependency's lock (`execute_with` says so): a call back into the
/// dependency from it finds the state borrowed.
#[test]
#[should_panic(expected = "already borrowed")]
fn an_observer_that_calls_back_into_its_dependency_panics_on_the_borrow() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let link = shared();
    // Once: the operation, dropped while the panic unwinds, reports its end to the same observer,
    // and a second panic there would abort the test binary.
    let mut first = true;
    let mut peek = |_: &Event<HZ>| {
        if core::mem::take(&mut first) {
            link.lock(|state, _| state.in_flight());
        }
    };
    let mut rng = rng();
    let _ =
        run(link.execute_with(&CHECKOUT, read(10_000), &mut rng, &mut peek, |_| async {
            Ok::<_, LinkError>(())
        }));
}

/// A radio link on air at most 1 % of any 100 s (1 s), every frame 400 ms.
#[cfg(feature = "duty-cycle")]
const RADIO: DependencyConfig<HZ> = LINK.duty_cycle(DutyCycle::per_mille(10, Duration::from_secs(100)));

#[cfg(feature = "duty-cycle")]
#[test]
fn a_frame_over_the_duty_cycle_waits_on_embassys_timer_or_is_deferred_to_the_tick() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let radio: SharedDependency<'static, CriticalSectionRawMutex, 4, 8> =
        SharedDependency::new(&RADIO, Dependency::new(&RADIO, relent_embassy::now()).unwrap());
    let (t0, core_t0) = (embassy_time::Instant::now(), relent_embassy::now());
    let starts = RefCell::new(Vec::new());
    let frame = |deadline_ms| read(deadline_ms).airtime(Duration::from_millis(400));
    let mut rng = rng();
    let mut send = |_| {
        starts.borrow_mut().push(elapsed_ms(t0));
        async { Ok::<(), LinkError>(()) }
    };
    // Two frames: 800 ms of the 1 s. The third fits once the first stops counting, at 100.4 s:
    // further than CHECKOUT's 2 s maximum delay, so it is deferred, unsent, with that instant.
    for _ in 0..2 {
        let done = run(radio.execute(&CHECKOUT, frame(10_000), &mut rng, &mut send)).unwrap();
        assert_eq!(done.completion.disposition, Disposition::Succeeded);
    }
    let done = run(radio.execute(&CHECKOUT, frame(10_000), &mut rng, &mut send)).unwrap();
    assert_eq!(done.completion.problem, Some(Problem::DutyCycleExceeded));
    assert_eq!(done.completion.not_before, Some(core_t0 + Duration::from_millis(100_400)));
    assert_eq!(done.retry_at(), Some(embassy_time::Instant::from_millis(100_400)));
    // At 99 s the wait is 1.4 s, within the maximum delay: it waits on embassy's timer and goes at
    // exactly 100.4 s.
    run(async { embassy_time::Timer::at(embassy_time::Instant::from_secs(99)).await });
    let done = run(radio.execute(&CHECKOUT, frame(10_000), &mut rng, &mut send)).unwrap();
    assert_eq!(done.completion.disposition, Disposition::Succeeded);
    assert_eq!(done.completion.summary.waited, Duration::from_millis(1_400));
    assert_eq!(*starts.borrow(), [0, 0, 100_400]);
}

#[cfg(feature = "bulkhead")]
static STATIC_LINK: SharedDependency<'static, CriticalSectionRawMutex, 4> =
    match Dependency::new(&LINK, relent_embassy::Instant::from_ticks(0)) {
        Ok(state) => SharedDependency::new(&LINK, state),
        Err(e) => panic!("{}", e.message()),
    };

/// A frame whose future is dropped while it waits for airtime gives the airtime it reserved back:
/// the next frame goes when the first leaves the window, as if the dropped one had never waited.
#[cfg(feature = "duty-cycle")]
#[test]
fn a_frame_dropped_while_it_waits_for_airtime_gives_its_airtime_back() {
    use core::pin::pin;
    use core::task::{Context as TaskContext, Waker};

    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let radio: SharedDependency<'static, CriticalSectionRawMutex, 4, 8> =
        SharedDependency::new(&RADIO, Dependency::new(&RADIO, relent_embassy::now()).unwrap());
    let t0 = embassy_time::Instant::now();
    let starts = RefCell::new(Vec::new());
    let frame = || read(10_000).airtime(Duration::from_millis(500));
    let mut rng = rng();
    let mut send = |_| {
        starts.borrow_mut().push(elapsed_ms(t0));
        async { Ok::<(), LinkError>(()) }
    };
    // Half the allowance at 0 s and half at 50 s: the first stops counting at 100.5 s.
    run(radio.execute(&CHECKOUT, frame(), &mut rng, &mut send)).unwrap();
    run(async { embassy_time::Timer::at(embassy_time::Instant::from_secs(50)).await });
    run(radio.execute(&CHECKOUT, frame(), &mut rng, &mut send)).unwrap();
    // At 99 s a frame waits for 100.5 s, its 500 ms reserved then; its future is dropped.
    run(async { embassy_time::Timer::at(embassy_time::Instant::from_secs(99)).await });
    {
        let mut waiting = pin!(radio.execute(&CHECKOUT, frame(), &mut rng, &mut send));
        assert!(waiting.as_mut().poll(&mut TaskContext::from_waker(Waker::noop())).is_pending());
    }
    // Kept, that airtime would leave no room at 100.5 s, and the next frame would be deferred to
    // 150.5 s; given back, it goes at 100.5 s.
    run(async { embassy_time::Timer::at(embassy_time::Instant::from_millis(99_500)).await });
    let done = run(radio.execute(&CHECKOUT, frame(), &mut rng, &mut send)).unwrap();
    assert_eq!(done.completion.disposition, Disposition::Succeeded);
    assert_eq!(*starts.borrow(), [0, 50_000, 100_500]);
}

#[cfg(feature = "bulkhead")]
#[test]
fn a_static_dependency_gives_back_its_slot_when_the_operation_is_dropped_mid_attempt() {
    use core::pin::pin;
    use core::task::{Context as TaskContext, Waker};

    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let mut rng = rng();
    {
        let mut fut = pin!(STATIC_LINK.execute(&CHECKOUT, read(10_000), &mut rng, |_| {
            core::future::pending::<Result<(), LinkError>>()
        }));
        let mut cx = TaskContext::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(STATIC_LINK.lock(|s, _| s.in_flight()), 1, "the attempt holds the only slot");
    }
    assert_eq!(STATIC_LINK.lock(|s, _| s.in_flight()), 0, "dropping the future gave it back");
    let done =
        run(STATIC_LINK.execute(&CHECKOUT, read(10_000), &mut rng, |_| async { Ok::<_, LinkError>(1) }))
            .unwrap();
    assert_eq!(done.value, Some(1));
}

#[test]
fn the_deadline_runs_from_the_call_and_a_refused_start_is_the_futures_output() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let link = shared();
    let mut rng = rng();
    let t0 = embassy_time::Instant::now();
    let deadlines = RefCell::new(Vec::new());
    let fut = link.execute(&CHECKOUT, read(7_500), &mut rng, |info| {
        deadlines.borrow_mut().push(info.deadline() - t0);
        async { Ok::<_, LinkError>(()) }
    });
    test_clock::advance(embassy_time::Duration::from_millis(500));
    assert!(run(fut).unwrap().completion.is_success());
    assert_eq!(*deadlines.borrow(), [embassy_time::Duration::from_millis(7_500)]);

    // Retries without a replay-safety statement: refused, and the operation is never called.
    let unsafe_context = Context::new(Duration::from_secs(5), ReplaySafety::Unsafe);
    let called = RefCell::new(0);
    let refused = run(link.execute(&CHECKOUT, unsafe_context, &mut rng, |_| {
        *called.borrow_mut() += 1;
        async { Ok::<_, LinkError>(()) }
    }));
    assert!(
        matches!(refused, Err(relent_embassy::core::StartError::UnsafeWithRetries { .. })),
        "{refused:?}"
    );
    assert_eq!(*called.borrow(), 0);
}

/// The future of `execute` holds the operation once (an `async fn` taking it as an argument would
/// hold it twice), beside the attempt's own future, and not the attempt (the operation gives it
/// back when it is reported).
#[test]
fn the_execute_future_holds_the_operation_once_and_not_the_attempt() {
    use relent_embassy::core::{Attempt, Operation};
    let link = shared();
    let mut rng = rng();
    let attempt_future = async { Ok::<u8, LinkError>(1) };
    let attempt_future_size = core::mem::size_of_val(&embassy_time::with_timeout(
        embassy_time::Duration::from_secs(1),
        attempt_future,
    ));
    let fut = link.execute(&CHECKOUT, read(1_000), &mut rng, |_| async { Ok::<u8, LinkError>(1) });
    let held = core::mem::size_of::<Operation<'_, HZ, AttemptError<LinkError>>>() + attempt_future_size;
    let size = core::mem::size_of_val(&fut);
    assert!(size >= held, "{size} < {held}: the operation is not in the future?");
    // Beside them, 32 bytes on a 64-bit host (40 with 32-bit ticks, from alignment): the
    // dependency, the epoch, the RNG, the closure, the value and the state's tag. With 64-bit
    // ticks that is less than the attempt (40 bytes), so holding it fails this.
    let attempt = core::mem::size_of::<Attempt<HZ>>();
    let extra = if cfg!(feature = "ticks-u32") { 40 } else { 32 };
    assert!(extra < attempt || cfg!(feature = "ticks-u32"));
    assert!(size <= held + extra, "the execute future is {size} bytes, {} more than it needs", size - held);
}

/// `&SharedRng` gives every kind of draw (a word of 32 bits, of 64, bytes) as the generator held
/// alone would, in turn, whichever handle draws: one tick width draws words of one kind, so the
/// operations' transcripts reach only one of the two. Its `Debug` shows nothing of the
/// generator's state, the secret its draws come from.
#[test]
fn a_shared_rng_draws_each_kind_of_value_as_its_generator_alone() {
    use rand_core::RngCore;
    let shared = relent_embassy::SharedRng::<CriticalSectionRawMutex, _>::new(rng());
    let (mut first, mut second) = (&shared, &shared);
    let mut alone = rng();
    let (mut bytes, mut alone_bytes) = ([0u8; 11], [0u8; 11]);
    assert_eq!(first.next_u32(), alone.next_u32());
    assert_eq!(second.next_u64(), alone.next_u64());
    first.fill_bytes(&mut bytes);
    alone.fill_bytes(&mut alone_bytes);
    assert_eq!(bytes, alone_bytes);
    assert_ne!(bytes, [0; 11]);
    assert_eq!((second.next_u64(), first.next_u32()), (alone.next_u64(), alone.next_u32()));
    assert_eq!(format!("{shared:?}"), "SharedRng { .. }");
}

/// With 32-bit ticks, the core's clock restarts 2^30 ticks later each time it reaches 2^31: at
/// 1 MHz (the mock driver's rate), every 17.9 minutes from 35.8 minutes on.
#[cfg(feature = "ticks-u32")]
mod restarts {
    use super::*;

    pub(super) const RESTART: u64 = 1 << 31;

    /// Moves the mock clock to `ticks` embassy ticks.
    pub(super) fn at(ticks: u64) -> embassy_time::Instant {
        let now = embassy_time::Instant::now().as_ticks();
        test_clock::advance(embassy_time::Duration::from_ticks(ticks - now));
        embassy_time::Instant::now()
    }

    #[test]
    fn an_operation_across_a_restart_of_the_core_clock_keeps_its_timeouts_to_the_tick() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let link = shared();
        // The clock restarts 3.5 s in: during the second attempt.
        let t0 = at(RESTART - 3_500_000);
        let attempts = RefCell::new(Vec::new());
        let mut rng = rng();
        let done = run(link.execute(&CHECKOUT, read(7_500), &mut rng, |info| {
            let expires = (info.expires() - t0).as_millis();
            attempts.borrow_mut().push((
                elapsed_ms(t0),
                info.timeout().as_millis(),
                expires,
                info.deadline() - t0,
            ));
            core::future::pending::<Result<(), LinkError>>()
        }))
        .unwrap();
        let deadline = embassy_time::Duration::from_millis(7_500);
        // The second attempt expires after the restart, on embassy's clock all the same.
        assert_eq!(
            *attempts.borrow(),
            [(0, 3_000, 3_000, deadline), (3_100, 3_000, 6_100, deadline), (6_300, 1_200, 7_500, deadline)]
        );
        assert_eq!(elapsed_ms(t0), 7_500);
        assert_eq!(done.completion.problem, Some(Problem::AttemptsExhausted));
        assert_eq!(done.completion.summary.elapsed, Duration::from_millis(7_500));
        assert!(relent_embassy::now().as_ticks() < (1 << 31), "the core's clock restarted");
    }

    /// An operation that starts before a restart (a "busy, retry in 1 s" waited across it) and is
    /// deferred after it by a "busy, retry in 100 s": `retry_at` names the instant on embassy's
    /// clock, and still does when the `Done` is kept past the next restart, where converting
    /// `not_before` then would be 2^30 ticks (17.9 minutes) late.
    #[test]
    fn a_deferral_kept_across_a_restart_still_says_when_to_try_again() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let link = shared();
        let mut rng = rng();
        let t0 = at(RESTART - 1_000_000);
        let busy = run(link.execute(&CHECKOUT, read(10_000), &mut rng, |info| async move {
            Err::<(), _>(LinkError::Busy(if info.number() == 1 { 1 } else { 100 }))
        }))
        .unwrap();
        assert_eq!(busy.completion.summary.dispatched, 2);
        assert_eq!(busy.completion.problem, Some(Problem::RetryAfterExceedsMaximumDelay));
        let when = t0 + embassy_time::Duration::from_secs(101);
        assert_eq!(busy.retry_at(), Some(when));
        at(RESTART + (1 << 30) + 1_000);
        assert_eq!(busy.retry_at(), Some(when));
        let late = busy.completion.not_before.map(relent_embassy::to_embassy);
        assert_eq!(late, Some(when + embassy_time::Duration::from_ticks(1 << 30)));
    }

    /// A network "busy for 100 s" pauses the link with a cooldown that outlives a restart.
    #[cfg(feature = "cooldown")]
    const COOLED: DependencyConfig<HZ> = LINK.cooldown(Duration::from_secs(120));

    #[cfg(feature = "cooldown")]
    #[test]
    fn a_cooldown_outlives_a_restart_to_the_tick_and_many_restarts_later_is_forgotten() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let link: SharedDependency<'static, CriticalSectionRawMutex, 4> =
            SharedDependency::new(&COOLED, Dependency::new(&COOLED, relent_embassy::now()).unwrap());
        let mut rng = rng();
        // Busy for 100 s: longer than CHECKOUT's 2 s maximum delay, so deferred; the cooldown runs
        // until t0 + 100 s, and the clock restarts at t0 + 50 s.
        let t0 = at(RESTART - 50_000_000);
        let busy =
            run(link.execute(&CHECKOUT, read(10_000), &mut rng, |_| async {
                Err::<(), _>(LinkError::Busy(100))
            }))
            .unwrap();
        assert_eq!(busy.completion.problem, Some(Problem::RetryAfterExceedsMaximumDelay));
        let until = t0 + embassy_time::Duration::from_secs(100);
        // After the restart, still cooling down: refused unsent, with the cooldown's end exact.
        at(RESTART + 49_000_000);
        let called = RefCell::new(0);
        let mut send = |_| {
            *called.borrow_mut() += 1;
            async { Ok::<_, LinkError>(()) }
        };
        let refused = run(link.execute(&CHECKOUT, read(10_000), &mut rng, &mut send)).unwrap();
        assert_eq!(refused.completion.problem, Some(Problem::CooldownActive));
        assert_eq!(refused.completion.not_before.map(relent_embassy::to_embassy), Some(until));
        assert_eq!(*called.borrow(), 0);
        // Six restarts later (107 minutes idle), the state is rebased past everything it held.
        at(RESTART + 6 * (1 << 30));
        let done = run(link.execute(&CHECKOUT, read(10_000), &mut rng, &mut send)).unwrap();
        assert!(done.completion.is_success());
        assert_eq!(*called.borrow(), 1);
        assert_eq!(link.lock(|s, now| s.cooldown_until(now)), None);
    }
}

/// `{:?}` of a shared dependency shows its configuration, read without borrowing the state, so it
/// works from inside `lock`'s closure too, where the state is borrowed.
#[test]
fn a_shared_dependency_prints_its_configuration_even_under_its_lock() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let link = shared();
    let outside = format!("{link:?}");
    assert_eq!(outside, format!("SharedDependency {{ config: {LINK:?}, .. }}"));
    assert_eq!(link.lock(|_, _| format!("{link:?}")), outside);
}

/// The backend's "stop retrying" command: first attempts only, until it says otherwise.
const FIRST_ATTEMPTS_ONLY: DependencyConfig<HZ> =
    DependencyConfig::new(Duration::from_secs(10)).budget(match RetryBudget::ratio(0, 0) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    });

/// A frame on a link made with `RETRIES` whose first attempt, busy for 1 s, is answered after the
/// link was reconfigured to `FIRST_ATTEMPTS_ONLY` (from inside that attempt): it started under
/// `RETRIES`, and retries under it. A frame started after fails at its first attempt, refused a
/// retry by the new budget; one started after the link is put back retries again.
#[test]
fn a_reconfigured_link_runs_frames_started_after_under_the_new_configuration_and_earlier_ones_under_theirs() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let link: SharedDependency<'_, CriticalSectionRawMutex, 4> =
        SharedDependency::new(&RETRIES, Dependency::new(&RETRIES, relent_embassy::now()).unwrap());
    let t0 = embassy_time::Instant::now();
    let mut rng = rng();
    // Busy for 1 s at the first attempt (reconfiguring the link to `to` there), then through.
    let mut frame = |to: Option<&'static DependencyConfig<HZ>>| {
        let sent = RefCell::new(Vec::new());
        let done = run(link.execute(&CHECKOUT, read(10_000), &mut rng, |info| {
            sent.borrow_mut().push(elapsed_ms(t0));
            if let (1, Some(to)) = (info.number(), to) {
                link.reconfigure(to).unwrap();
            }
            async move { if info.number() == 1 { Err(LinkError::Busy(1)) } else { Ok(()) } }
        }))
        .unwrap();
        (sent.into_inner(), done.completion.problem)
    };
    assert_eq!(frame(Some(&FIRST_ATTEMPTS_ONLY)), (vec![0, 1_000], None));
    assert_eq!(link.config(), &FIRST_ATTEMPTS_ONLY);
    assert_eq!(frame(None), (vec![1_000], Some(Problem::RetryBudgetExhausted)));
    link.reconfigure(&RETRIES).unwrap();
    assert_eq!(link.config(), &RETRIES);
    assert_eq!(frame(None), (vec![1_000, 2_000], None));
}

/// A configuration the dependency cannot run under is refused with what to fix, and changes
/// nothing: a window shorter than its four buckets, or (where compiled in) a duty cycle with no
/// airtime log to keep it in.
#[test]
fn a_configuration_the_link_cannot_run_under_is_refused_and_changes_nothing() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    let link = shared();
    static TOO_SHORT: DependencyConfig<HZ> = DependencyConfig::new(Duration::from_ticks(3));
    let refused = link.reconfigure(&TOO_SHORT).unwrap_err();
    assert_eq!(refused, relent_embassy::core::ConfigError::WindowShorterThanBuckets);
    assert_eq!(link.config(), &LINK);
    #[cfg(feature = "duty-cycle")]
    {
        static ON_AIR: DependencyConfig<HZ> =
            LINK.duty_cycle(DutyCycle::new(Duration::from_millis(600), Duration::from_secs(60)));
        let refused = link.reconfigure(&ON_AIR).unwrap_err();
        assert_eq!(refused, relent_embassy::core::ConfigError::AirtimeLogSize);
        assert_eq!(link.config(), &LINK);
    }
}

/// A link that was switched to `FIRST_ATTEMPTS_ONLY` saves its state before a deep sleep; on the
/// next boot (embassy's clock back at tick 0) a link made with `LINK` restores it under the
/// configuration it was saved under, which becomes the link's: the window's counts are back, 2 s
/// older (the core's clock keeps a history before the boot), and a frame is refused its retry as
/// before the sleep. A corrupted snapshot, or one restored under a configuration whose window's
/// buckets are of another width, leaves the state as it was under that configuration and says why;
/// a configuration the link cannot run under changes nothing.
#[test]
fn the_cores_instants_convert_to_embassys_to_the_tick_and_one_from_before_the_boot_is_tick_0() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    test_clock::advance(embassy_time::Duration::from_millis(1_500));
    let (core_now, embassy_now) = (relent_embassy::now(), embassy_time::Instant::now());
    assert_eq!(embassy_now.as_millis(), 1_500);
    // The core's clock runs ahead of embassy's by the history it keeps before the boot.
    let history: u64 = if cfg!(feature = "ticks-u32") { 1 << 30 } else { 1 << 40 };
    assert_eq!(u64::from(core_now.as_ticks()), history + embassy_now.as_ticks());
    let to_embassy = relent_embassy::to_embassy;
    assert_eq!(to_embassy(core_now), embassy_now);
    let ms = |ms: u32| Duration::from_millis(ms.into());
    let later = core_now.checked_add_duration(ms(250)).unwrap();
    assert_eq!(to_embassy(later), embassy_now + embassy_time::Duration::from_millis(250));
    // The boot is embassy's tick 0; anything before it (a snapshot's instants) is that tick too.
    let earlier = |by: u32| to_embassy(core_now.checked_sub_duration(ms(by)).unwrap()).as_ticks();
    assert_eq!(earlier(1_499), embassy_time::Duration::from_millis(1).as_ticks());
    assert_eq!(earlier(1_500), 0);
    assert_eq!(earlier(2_000), 0);
    assert_eq!(to_embassy(relent_embassy::Instant::from_ticks(0)).as_ticks(), 0);
}

#[test]
fn a_snapshot_is_restored_under_the_configuration_it_was_saved_under_which_becomes_the_links() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    type Link = Dependency<HZ, 4>;
    let busy_once = |link: &SharedDependency<'static, CriticalSectionRawMutex, 4>| {
        let mut rng = rng();
        run(link.execute(&CHECKOUT, read(10_000), &mut rng, |info| async move {
            if info.number() == 1 { Err(LinkError::Busy(1)) } else { Ok(()) }
        }))
        .unwrap()
        .completion
        .problem
    };
    test_clock::reset();
    let before = shared();
    before.reconfigure(&FIRST_ATTEMPTS_ONLY).unwrap();
    assert_eq!(busy_once(&before), Some(Problem::RetryBudgetExhausted));
    let counts = before.lock(|state, now| state.counts(now));
    assert_eq!((counts.calls, counts.retries, counts.failures), (1, 0, 1));
    let mut retained = [0u8; Link::SNAPSHOT_LEN];
    assert_eq!(before.save(&mut retained), Ok(Link::SNAPSHOT_LEN));
    assert_eq!(before.save(&mut [0u8; 8]), Err(relent_embassy::core::SnapshotError::TooShort));

    // The next boot, 2 s of deep sleep later.
    test_clock::reset();
    let slept = Duration::from_secs(2);
    let after = shared();
    assert_eq!(after.restore(&FIRST_ATTEMPTS_ONLY, &retained, slept), Ok(None));
    assert_eq!(after.config(), &FIRST_ATTEMPTS_ONLY);
    assert_eq!(after.lock(|state, now| state.counts(now)), counts);
    // In their place, 2 s older: the window is 10 s, so the call is gone 8 s after the boot at the
    // latest (sooner by the buckets' width of 2.5 s at most, twice: its bucket's age when saved
    // and its place among the new clock's buckets), and still counted 2.5 s after it.
    test_clock::advance(embassy_time::Duration::from_millis(2_500));
    assert_eq!(after.lock(|state, now| state.counts(now)), counts);
    test_clock::advance(embassy_time::Duration::from_millis(5_500));
    assert_eq!(after.lock(|state, now| state.counts(now)).calls, 0);
    test_clock::reset();
    let after = shared();
    assert_eq!(after.restore(&FIRST_ATTEMPTS_ONLY, &retained, slept), Ok(None));
    assert_eq!(busy_once(&after), Some(Problem::RetryBudgetExhausted));
    let busy = after.lock(|state, now| state.counts(now));
    assert_eq!((busy.calls, busy.failures), (2, 2));

    // Refused: the state stays as it was (here, with the two failures), under the configuration.
    let mut corrupted = retained;
    corrupted[20] ^= 1;
    after.reconfigure(&LINK).unwrap();
    let refused = after.restore(&FIRST_ATTEMPTS_ONLY, &corrupted, slept);
    assert_eq!(refused, Ok(Some(relent_embassy::core::SnapshotError::Corrupted)));
    assert_eq!(after.config(), &FIRST_ATTEMPTS_ONLY);
    assert_eq!(after.lock(|state, now| state.counts(now)), busy);

    let fresh = |link: &SharedDependency<'static, CriticalSectionRawMutex, 4>| {
        link.lock(|state, now| state.counts(now)) == relent_embassy::core::Counts::default()
    };
    static WIDER: DependencyConfig<HZ> =
        DependencyConfig::new(Duration::from_secs(20)).budget(match RetryBudget::ratio(0, 0) {
            Ok(b) => b,
            Err(e) => panic!("{}", e.message()),
        });
    let after = shared();
    let refused = after.restore(&WIDER, &retained, slept);
    assert_eq!(refused, Ok(Some(relent_embassy::core::SnapshotError::OtherConfig)));
    assert_eq!(after.config(), &WIDER);
    assert!(fresh(&after));

    static TOO_SHORT: DependencyConfig<HZ> = DependencyConfig::new(Duration::from_ticks(3));
    let after = shared();
    let refused = after.restore(&TOO_SHORT, &retained, slept);
    assert_eq!(refused, Err(relent_embassy::core::ConfigError::WindowShorterThanBuckets));
    assert_eq!(after.config(), &LINK);
}

/// A battery device that deep-sleeps between uplinks, 5 s each time, with a retry budget of 10 %
/// and one retry a minute: its first uplink, busy once, is retried; after the next wake, the
/// restored window still holds that retry, so the second uplink's is refused by the budget. A link
/// that started fresh at each boot would have had its floor's retry again, at every wake.
#[test]
fn a_device_that_sleeps_between_uplinks_keeps_its_retry_budget_across_the_wakes() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    static SPARING: DependencyConfig<HZ> =
        DependencyConfig::new(Duration::from_secs(60)).budget(match RetryBudget::ratio(10, 1) {
            Ok(b) => b,
            Err(e) => panic!("{}", e.message()),
        });
    let boot = || {
        test_clock::reset();
        SharedDependency::<'static, CriticalSectionRawMutex, 4>::new(
            &SPARING,
            Dependency::new(&SPARING, relent_embassy::Instant::from_ticks(0)).unwrap(),
        )
    };
    let uplink = |link: &SharedDependency<'static, CriticalSectionRawMutex, 4>| {
        let mut rng = rng();
        let done = run(link.execute(&CHECKOUT, read(10_000), &mut rng, |info| async move {
            if info.number() == 1 { Err(LinkError::Busy(1)) } else { Ok(()) }
        }))
        .unwrap();
        (done.completion.summary.dispatched, done.completion.problem)
    };
    let mut retained = [0u8; Dependency::<HZ, 4>::SNAPSHOT_LEN];
    let slept = Duration::from_secs(5);

    let link = boot();
    assert_eq!(uplink(&link), (2, None));
    link.save(&mut retained).unwrap();

    let link = boot();
    assert_eq!(link.restore(&SPARING, &retained, slept), Ok(None));
    assert_eq!(uplink(&link), (1, Some(Problem::RetryBudgetExhausted)));

    // Without the snapshot, the floor's retry again.
    assert_eq!(uplink(&boot()), (2, None));
}

/// An operation inside another's attempt (a modem driver's own retries inside an uplink's attempt):
/// `AttemptInfo::bound` ends it by the attempt's expiry, and its `Error` is classified by seed 000's
/// rule that exactly one layer retries, handing a known wait up.
mod nesting {
    use relent_embassy::Error;
    use relent_embassy::core::Disposition;

    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Modem {
        NoAnswer,
        Busy(u32),
        Invalid,
    }

    impl core::fmt::Display for Modem {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            match self {
                Self::NoAnswer => f.write_str("no answer"),
                Self::Busy(s) => write!(f, "busy, retry in {s} s"),
                Self::Invalid => f.write_str("invalid command"),
            }
        }
    }

    impl Classify<HZ> for Modem {
        fn classify(&self) -> Verdict<HZ> {
            match self {
                Self::NoAnswer => Verdict::Retryable,
                Self::Busy(s) => Verdict::retryable_after_secs(*s),
                Self::Invalid => Verdict::NotRetryable,
            }
        }
    }

    /// `attempts` from 100 ms, doubling, waits of at most `max_delay_ms`, each attempt `timeout_ms`.
    const fn policy(attempts: u8, max_delay_ms: u32, timeout_ms: u32) -> RetryPolicy<HZ> {
        let (max_delay, timeout) =
            (Duration::from_millis(max_delay_ms as _), Duration::from_millis(timeout_ms as _));
        match RetryPolicy::exponential(attempts, Duration::from_millis(100), max_delay)
            .jitter(Jitter::None)
            .attempt_timeout(timeout)
            .build()
        {
            Ok(p) => p,
            Err(e) => panic!("{}", e.message()),
        }
    }

    /// The modem driver's own retries: 3 attempts, 100 ms then 200 ms apart, waits of at most 1 s.
    const DRIVER: RetryPolicy<HZ> = policy(3, 1_000, 3_000);
    /// A driver that leaves retrying to its caller.
    const ONCE: RetryPolicy<HZ> = policy(1, 1_000, 3_000);
    /// An uplink with patience: 3 attempts of 3 s, waits of at most 10 s.
    const PATIENT: RetryPolicy<HZ> = policy(3, 10_000, 3_000);

    /// The modem: answers from a script (the last answer repeats), noting when each call came.
    struct Far {
        t0: embassy_time::Instant,
        script: RefCell<Vec<Result<u8, Modem>>>,
        calls: RefCell<Vec<u64>>,
    }

    impl Far {
        fn new(script: &[Result<u8, Modem>]) -> Self {
            let script = script.iter().rev().copied().collect();
            Self { t0: embassy_time::Instant::now(), script: RefCell::new(script), calls: RefCell::default() }
        }

        async fn call(&self) -> Result<u8, Modem> {
            self.calls.borrow_mut().push(elapsed_ms(self.t0));
            let mut script = self.script.borrow_mut();
            if script.len() > 1 { script.pop().unwrap() } else { script[0] }
        }

        /// Notes the call, and never answers.
        fn hang(&self) -> core::future::Pending<Result<u8, Modem>> {
            self.calls.borrow_mut().push(elapsed_ms(self.t0));
            core::future::pending()
        }

        fn calls(&self) -> Vec<u64> {
            self.calls.borrow().clone()
        }
    }

    type Link = SharedDependency<'static, CriticalSectionRawMutex, 4>;

    /// An uplink under `outer` (30 s) whose every attempt, after `work_ms` of its own, runs the modem
    /// driver under `inner`, its `command` bounded by the attempt, and returns the driver's `Error`
    /// as its failure.
    fn uplink<F, Fut>(
        (uplink, modem): &(Link, Link),
        outer: &RetryPolicy<HZ>,
        work_ms: u64,
        inner: &RetryPolicy<HZ>,
        command: Context<HZ>,
        call: F,
    ) -> relent_embassy::Done<u8, Error<Modem>>
    where
        F: Fn() -> Fut + Copy,
        Fut: Future<Output = Result<u8, Modem>>,
    {
        run(uplink.execute(outer, read(30_000), &mut rng(), |attempt| async move {
            if work_ms > 0 {
                embassy_time::Timer::after_millis(work_ms).await;
            }
            modem.execute(inner, attempt.bound(command), &mut rng(), |_| call()).await?.into_result()
        }))
        .unwrap()
    }

    /// Without the bound, the uplink's attempt times out at 3 s and drops the driver mid-retry; a
    /// timeout is retryable, so the uplink starts the driver again: 9 calls where the rule allows
    /// 3. With it, the driver ends on its own by the attempt's expiry, whatever deadline it was
    /// given (2.5 s, exactly the attempt's 3 s, or 30 s): its third attempt is cut to fit, and the
    /// uplink's one attempt ends with it, to the tick.
    #[test]
    fn an_operation_inside_an_attempt_ends_by_the_attempts_expiry_on_its_own() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        // The driver's 4 attempts time out after 1 s; the uplink's after 3 s.
        const HANGING: RetryPolicy<HZ> = policy(4, 1_000, 1_000);
        let links = (shared(), shared());
        let (link, modem) = (&links.0, &links.1);

        let far = &Far::new(&[]);
        let done = run(link.execute(&CHECKOUT, read(10_000), &mut rng(), |_| async move {
            Ok::<_, Modem>(modem.execute(&HANGING, read(30_000), &mut rng(), |_| far.hang()).await.unwrap())
        }))
        .unwrap();
        let unbounded = [0, 1_100, 2_300, 3_100, 4_200, 5_400, 6_300, 7_400, 8_600];
        assert_eq!(far.calls(), unbounded, "three attempts of three");
        assert_eq!(done.completion.problem, Some(Problem::AttemptsExhausted));
        assert_eq!(elapsed_ms(far.t0), 9_300);

        for (deadline, ends) in [(2_500, 2_500), (3_000, 3_000), (30_000, 3_000)] {
            let far = &Far::new(&[]);
            let done = run(link.execute(&CHECKOUT, read(10_000), &mut rng(), |attempt| async move {
                let bounded = attempt.bound(read(deadline));
                Ok::<_, Modem>(modem.execute(&HANGING, bounded, &mut rng(), |_| far.hang()).await.unwrap())
            }))
            .unwrap();
            assert_eq!(far.calls(), [0, 1_100, 2_300], "inner deadline {deadline} ms");
            assert_eq!(elapsed_ms(far.t0), ends, "inner deadline {deadline} ms");
            let driver = done.value.unwrap().completion;
            assert_eq!((driver.code(), driver.summary.dispatched), ("retry_delay_exceeds_deadline", 3));
            assert_eq!(driver.summary.elapsed, Duration::from_millis(ends.try_into().unwrap()));
            assert_eq!(done.completion.summary.dispatched, 1, "the uplink's attempt succeeded");
        }

        // Through `into_result`, the driver's error ends the uplink, which does not retry it.
        let far = &Far::new(&[]);
        let done = uplink(&links, &CHECKOUT, 0, &HANGING, read(30_000), || far.hang());
        assert_eq!(far.calls(), [0, 1_100, 2_300]);
        assert_eq!(elapsed_ms(far.t0), 3_000);
        let c = &done.completion;
        assert_eq!((c.disposition, c.problem, c.summary.dispatched), (Disposition::Failed, None, 1));
        let Some(AttemptError::Failed(driver)) = &c.last_failure else { panic!("{c:?}") };
        assert_eq!(driver.code(), "retry_delay_exceeds_deadline");
        assert_eq!(driver.classify(), Verdict::NotRetryable);
    }

    /// The bound is the attempt's expiry, not its timeout: an operation started later in the
    /// attempt (after 1.234 s of the attempt's own work) gets what is left, 1.766 s, to the tick.
    #[test]
    fn an_operation_started_late_in_an_attempt_gets_what_is_left_of_it() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let links = (shared(), shared());
        let far = &Far::new(&[]);
        let done = uplink(&links, &CHECKOUT, 1_234, &DRIVER, read(30_000), || far.hang());
        let Some(AttemptError::Failed(Error::Ended { completion, .. })) = &done.completion.last_failure
        else {
            panic!("{:?}", done.completion)
        };
        // One attempt, cut from 3 s to the 1.766 s left.
        assert_eq!((far.calls(), completion.summary.dispatched), (vec![1_234], 1));
        assert_eq!(completion.summary.elapsed, Duration::from_millis(1_766));
        assert_eq!(
            completion.last_failure,
            Some(AttemptError::TimedOut { after: Duration::from_millis(1_766) })
        );
        assert_eq!(done.completion.summary.elapsed, Duration::from_millis(3_000));
        let Some(AttemptError::Failed(driver)) = &done.completion.last_failure else { unreachable!() };
        let timed_out = "attempt timed out after 1766 ms";
        assert_eq!(
            driver.to_string(),
            format!("failed (retry_delay_exceeds_deadline) after 1 attempt(s); last failure: {timed_out}")
        );
    }

    #[test]
    fn an_inner_operation_that_retried_is_not_retried_again_and_one_of_one_attempt_is() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let links = (shared(), shared());

        // The driver retried: its three calls, and no more.
        let far = &Far::new(&[Err(Modem::NoAnswer)]);
        let done = uplink(&links, &PATIENT, 0, &DRIVER, read(10_000), || far.call());
        assert_eq!(far.calls(), [0, 100, 300]);
        let c = &done.completion;
        assert_eq!((c.disposition, c.problem, c.summary.dispatched), (Disposition::Failed, None, 1));
        let Some(AttemptError::Failed(driver)) = &c.last_failure else { panic!("{c:?}") };
        assert_eq!((driver.code(), driver.retry_in()), ("attempts_exhausted", None));

        // A driver of one attempt: the uplink retries, by its failure's own verdict.
        let far = &Far::new(&[Err(Modem::NoAnswer), Err(Modem::NoAnswer), Ok(7)]);
        let done = uplink(&links, &PATIENT, 0, &ONCE, read(10_000), || far.call());
        assert_eq!((done.value, far.calls()), (Some(7), vec![0, 100, 300]));

        // Its stated wait is waited exactly, and a failure that is not retryable is not retried.
        let far = &Far::new(&[Err(Modem::Busy(4)), Err(Modem::Invalid)]);
        let error =
            uplink(&links, &PATIENT, 0, &ONCE, read(10_000), || far.call()).into_result().unwrap_err();
        assert_eq!(far.calls(), [0, 4_000]);
        let completion = error.completion().unwrap();
        assert_eq!((completion.problem, completion.summary.dispatched), (None, 2));
        assert_eq!(error.into_last_failure().unwrap().into_last_failure(), Some(Modem::Invalid));
    }

    /// "Busy, retry in 5 s" is more than the driver's 1 s: the driver defers, and hands the wait up.
    /// A patient uplink waits it to the tick; one with no more patience defers in turn, with the
    /// same wait.
    #[test]
    fn a_wait_the_inner_operation_could_not_honour_is_handed_up_and_waited_by_the_patient_outer_one() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let links = (shared(), shared());

        let far = &Far::new(&[Err(Modem::Busy(5)), Ok(7)]);
        let done = uplink(&links, &PATIENT, 0, &DRIVER, read(10_000), || far.call());
        assert_eq!(done.value, Some(7));
        assert_eq!(far.calls(), [0, 5_000], "no sooner than the modem asked, and no later");
        assert_eq!(done.completion.summary.waited, Duration::from_secs(5));
        assert_eq!(done.completion.retry_after, Some(Duration::from_secs(5)));

        let far = &Far::new(&[Err(Modem::Busy(5)), Ok(7)]);
        let t0 = embassy_time::Instant::now();
        let done = uplink(&links, &DRIVER, 0, &DRIVER, read(10_000), || far.call());
        assert_eq!(done.retry_at(), Some(t0 + embassy_time::Duration::from_secs(5)));
        let error = done.into_result().unwrap_err();
        assert_eq!(error.code(), "retry_after_exceeds_maximum_delay");
        assert_eq!(error.retry_in(), Some(embassy_time::Duration::from_secs(5)));
        assert_eq!(error.classify(), Verdict::RetryableAfter(Duration::from_secs(5)));
        assert_eq!(far.calls(), [0], "one call: the retry is the caller's, in 5 s");
        // The message: the uplink's end, then the driver's, each wait said once.
        let deferred = "deferred (retry_after_exceeds_maximum_delay) after 1 attempt(s); the far side asked to wait 5000 ms";
        assert_eq!(
            error.to_string(),
            format!("{deferred}; last failure: {deferred}; last failure: busy, retry in 5 s")
        );
    }

    /// A "busy, retry in 5 s" puts the modem in cooldown: a driver's operation 1 s later is
    /// deferred with the 4 s left, which its error says and hands up, and a patient uplink waits
    /// those 4 s to the tick.
    #[cfg(feature = "cooldown")]
    #[test]
    fn a_cooldown_inside_is_waited_out_with_what_is_left_of_it() {
        const COOLING: DependencyConfig<HZ> = LINK.cooldown(Duration::from_secs(60));
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let modem =
            SharedDependency::new(&COOLING, Dependency::new(&COOLING, relent_embassy::now()).unwrap());
        let links = (shared(), modem);
        let far = &Far::new(&[Err(Modem::Busy(5)), Ok(7)]);
        let command = run(links.1.execute(&DRIVER, read(10_000), &mut rng(), |_| far.call())).unwrap();
        let busy = command.into_result().unwrap_err();
        let asked = "the far side asked to wait 5000 ms; last failure: busy, retry in 5 s";
        let deferred = format!("deferred (retry_after_exceeds_maximum_delay) after 1 attempt(s); {asked}");
        assert_eq!(busy.to_string(), deferred);

        test_clock::advance(embassy_time::Duration::from_secs(1));
        let command = run(links.1.execute(&DRIVER, read(10_000), &mut rng(), |_| far.call())).unwrap();
        let cooling = command.into_result().unwrap_err();
        assert_eq!(cooling.retry_in(), Some(embassy_time::Duration::from_secs(4)));
        assert_eq!(
            cooling.to_string(),
            "deferred (cooldown_active) after 0 attempt(s); try again in 4000 ms"
        );
        assert_eq!(cooling.classify(), Verdict::RetryableAfter(Duration::from_secs(4)));

        let done = uplink(&links, &PATIENT, 0, &DRIVER, read(10_000), || far.call());
        assert_eq!(done.value, Some(7));
        assert_eq!(far.calls(), [0, 5_000]);
        assert_eq!(done.completion.summary.waited, Duration::from_secs(4));
    }

    proptest::proptest! {
        // 64 cases, or PROPTEST_CASES's count for a longer run (as relent-tests' `cases`:
        // proptest's own reading of it gives way to a count set here).
        #![proptest_config(proptest::test_runner::Config {
            cases: std::env::var("PROPTEST_CASES").map_or(64, |v| v.parse().expect("PROPTEST_CASES: a whole number")),
            ..Default::default()
        })]

        /// Whatever the outer attempt's timeout, the attempt's own work before the inner operation
        /// starts, the inner deadline and the inner policy, against a modem that hangs: the inner
        /// operation ends on its own, by the outer attempt's expiry, so the outer attempt returns
        /// and is never timed out and retried. With 32-bit ticks the operations start within 5 s
        /// of a restart of the core's clock, before or after it. (Times in whole milliseconds:
        /// the mock executor moves the clock 1 ms at a time.)
        #[test]
        fn an_inner_operation_never_outlasts_the_attempt_it_runs_in(
            start_ms in 0u64..10_000,
            outer_timeout_ms in 1u32..5_000,
            work_permille in 0u32..1_000,
            inner_deadline_ms in 1u16..10_000,
            inner_attempts in 1u8..5,
            inner_timeout_ms in 1u32..3_000,
        ) {
            let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            test_clock::reset();
            let restart = if cfg!(feature = "ticks-u32") { (1 << 31) - 5_000_000 } else { 0 };
            test_clock::advance(embassy_time::Duration::from_ticks(restart + start_ms * 1_000));
            let links = (shared(), shared());
            let timeouts = |attempts, timeout_ms: u32| {
                RetryPolicy::exponential(attempts, Duration::from_millis(100), Duration::from_secs(1))
                    .jitter(Jitter::None)
                    .attempt_timeout(Duration::from_millis(timeout_ms.into()))
                    .build()
                    .unwrap()
            };
            let (outer, inner) = (timeouts(3, outer_timeout_ms), timeouts(inner_attempts, inner_timeout_ms));
            let work_ms = u64::from(outer_timeout_ms * work_permille / 1_000);
            let far = &Far::new(&[]);
            let done = uplink(&links, &outer, work_ms, &inner, read(inner_deadline_ms), || far.hang());

            let c = &done.completion;
            // An inner operation that could retry is not retried; one of a single attempt leaves
            // the retrying to the uplink, whose every attempt it ends in the same way.
            let attempts = if inner_attempts == 1 { 3 } else { 1 };
            proptest::prop_assert_eq!(c.summary.dispatched, attempts, "{:?}", c);
            let Some(AttemptError::Failed(Error::Ended { completion: inner, .. })) = &c.last_failure else {
                proptest::prop_assert!(false, "the outer attempt timed out: {:?}", c);
                unreachable!()
            };
            let left = u64::from(outer_timeout_ms) - work_ms;
            let ms = |d: Duration| u64::from(d.as_ticks()) / 1_000; // the mock driver's 1 MHz
            let elapsed = ms(inner.summary.elapsed);
            proptest::prop_assert!(elapsed <= left.min(inner_deadline_ms.into()), "{} ms of {} left", elapsed, left);
            // Each outer attempt ended when its inner operation did, to the tick.
            let busy = u64::from(attempts) * (work_ms + elapsed);
            proptest::prop_assert_eq!(ms(c.summary.elapsed), busy + ms(c.summary.waited));
            proptest::prop_assert_eq!(far.calls().first().copied(), Some(work_ms));
        }
    }

    /// A driver's error with a cause.
    #[derive(Debug)]
    struct Unreachable(Refused);
    #[derive(Debug)]
    struct Refused;

    impl core::fmt::Display for Unreachable {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str("host unreachable")
        }
    }
    impl core::fmt::Display for Refused {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str("connection refused")
        }
    }
    impl std::error::Error for Refused {}
    impl std::error::Error for Unreachable {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    impl Classify<HZ> for Unreachable {
        fn classify(&self) -> Verdict<HZ> {
            Verdict::NotRetryable
        }
    }

    /// The message shows the last failure, so the error's chain goes on below it: a reporter that
    /// prints the chain (anyhow's `{:#}`) shows each message once.
    #[test]
    fn an_errors_source_continues_below_the_last_failure_its_message_shows() {
        use std::error::Error as _;
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let link = shared();
        let unreachable = |_| async { Err::<(), _>(Unreachable(Refused)) };
        let error = run(link.execute(&DRIVER, read(10_000), &mut rng(), unreachable)).unwrap().into_result();
        let error = error.unwrap_err();
        assert_eq!(error.to_string(), "failed after 1 attempt(s); last failure: host unreachable");
        assert_eq!(error.source().map(ToString::to_string).as_deref(), Some("connection refused"));
        assert_eq!(error.into_last_failure().map(|e| e.to_string()).as_deref(), Some("host unreachable"));

        // An operation that never started: its message is the refusal's, which has no cause below
        // it, and it has no failure of its own.
        let unsafe_command = Context::new(Duration::from_secs(10), ReplaySafety::Unsafe);
        let start = run(link.execute(&PATIENT, unsafe_command, &mut rng(), unreachable)).unwrap_err();
        let never = Error::<Unreachable>::from(start);
        assert_eq!(never.to_string(), format!("operation not started: {start}"));
        assert!(never.source().is_none());
        assert!(never.into_last_failure().is_none());
    }

    /// An operation bound to a fixed instant (a receive window closing 1.5 s from now) ends by it
    /// whatever its own deadline; one started at that instant or after it ends at once, sending
    /// nothing.
    #[test]
    fn an_operation_bound_to_an_instant_ends_by_it_and_one_started_after_it_sends_nothing() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let link = shared();
        let far = &Far::new(&[]);
        let closes = embassy_time::Instant::now() + embassy_time::Duration::from_millis(1_500);
        let window = relent_embassy::Bounded::until(read(10_000), closes);
        let done = run(link.execute(&CHECKOUT, window, &mut rng(), |_| far.hang())).unwrap();
        assert_eq!(far.calls(), [0]);
        assert_eq!(embassy_time::Instant::now(), closes);
        assert_eq!(
            done.completion.last_failure,
            Some(AttemptError::TimedOut { after: Duration::from_millis(1_500) })
        );

        let late = run(link.execute(&CHECKOUT, window, &mut rng(), |_| far.hang())).unwrap();
        assert_eq!(far.calls(), [0], "nothing sent");
        assert_eq!(
            (late.completion.disposition, late.completion.code()),
            (Disposition::Failed, "deadline_exceeded")
        );
        assert_eq!(late.completion.summary.dispatched, 0);
    }

    /// Jitter drawn through a `SharedRng` is drawn inside the dependency's critical section, which
    /// the draw's own lock nests in (on the host too, with critical-section's std implementation);
    /// the waits are the generator's own: an operation with full jitter sends at the same instants
    /// through a `SharedRng` as through the same seeded generator held alone.
    #[test]
    fn jitter_drawn_through_a_shared_rng_is_the_generators_own() {
        use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
        const JITTERED: RetryPolicy<HZ> =
            match RetryPolicy::exponential(4, Duration::from_millis(400), Duration::from_secs(2)).build() {
                Ok(p) => p,
                Err(e) => panic!("{}", e.message()),
            };
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let sends = |rng: &mut dyn rand_core::RngCore| {
            test_clock::reset();
            let far = &Far::new(&[Err(Modem::NoAnswer)]);
            run(shared().execute(&JITTERED, read(10_000), rng, |_| far.call())).unwrap();
            far.calls()
        };
        let alone = sends(&mut rng());
        let shared_rng = relent_embassy::SharedRng::<CriticalSectionRawMutex, _>::new(rng());
        let through_it = sends(&mut &shared_rng);
        assert_eq!(alone.len(), 4);
        assert_eq!(through_it, alone);
        // And the draws were jittered: not the un-jittered 0, 400, 1200, 2800 ms.
        assert_ne!(alone, [0, 400, 1_200, 2_800]);
    }

    /// With 32-bit ticks: an attempt dispatched 1 s before a restart of the core's clock starts an
    /// operation 1.5 s in, after the restart. The bound, converted on the inner operation's own
    /// clock read, leaves it the 1.5 s that are left, to the tick.
    #[cfg(feature = "ticks-u32")]
    #[test]
    fn an_operation_started_after_a_restart_still_ends_by_the_attempts_expiry() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let links = (shared(), shared());
        let t0 = super::restarts::at(super::restarts::RESTART - 1_000_000);
        let far = &Far::new(&[]);
        let done = uplink(&links, &CHECKOUT, 1_500, &DRIVER, read(30_000), || far.hang());
        assert!(relent_embassy::now().as_ticks() < (1 << 31), "the core's clock restarted");
        assert_eq!(elapsed_ms(t0), 3_000);
        let Some(AttemptError::Failed(Error::Ended { completion, .. })) = &done.completion.last_failure
        else {
            panic!("{:?}", done.completion)
        };
        assert_eq!((far.calls(), completion.summary.elapsed), (vec![1_500], Duration::from_millis(1_500)));
        assert_eq!(done.completion.summary.dispatched, 1);
    }

    /// An inner operation that never started (its policy and context cannot run together) is an
    /// `Error::Start` through `?`, and is not retried.
    #[test]
    fn an_inner_operation_that_never_started_is_not_retried() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        test_clock::reset();
        let links = (shared(), shared());
        let unsafe_command = Context::new(Duration::from_secs(10), ReplaySafety::Unsafe);
        let far = &Far::new(&[Ok(7)]);
        let done = uplink(&links, &PATIENT, 0, &DRIVER, unsafe_command, || far.call());
        assert_eq!(far.calls(), Vec::<u64>::new());
        let c = &done.completion;
        assert_eq!((c.disposition, c.summary.dispatched), (Disposition::Failed, 1));
        let Some(AttemptError::Failed(never)) = &c.last_failure else { panic!("{c:?}") };
        assert!(matches!(never, Error::Start(_)), "{never:?}");
        assert_eq!((never.code(), never.classify()), ("unsafe_with_retries", Verdict::NotRetryable));
        assert!(never.completion().is_none() && never.retry_in().is_none());
        let Error::Start(start) = never else { unreachable!() };
        assert_eq!(never.to_string(), format!("operation not started: {start}"));
    }
}

/// Both futures to their ends, as two tasks of one executor: each is polled first, and then only
/// when its own waker was woken (the first first), so a wake-up the code under test fails to make
/// is not made up for by the other's.
#[cfg(feature = "bulkhead")]
async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (core::pin::pin!(a), core::pin::pin!(b));
    let (task_a, task_b) = (common::Task::new(), common::Task::new());
    let (mut out_a, mut out_b) = (None, None);
    core::future::poll_fn(|cx| {
        if out_a.is_none() {
            out_a = task_a.step(a.as_mut(), cx.waker());
        }
        if out_b.is_none() {
            out_b = task_b.step(b.as_mut(), cx.waker());
        }
        if out_a.is_some() && out_b.is_some() {
            core::task::Poll::Ready(())
        } else {
            core::task::Poll::Pending
        }
    })
    .await;
    (out_a.unwrap(), out_b.unwrap())
}

/// Three frames on a link with one slot and a queue of two that waits up to 1 s, from 0, 10 and
/// 20 ms, each 100 ms on air: the milliseconds each went out at, and the time each waited.
#[cfg(feature = "bulkhead")]
fn three_frames_through_one_slot<const W: usize>() -> [(Option<u64>, Option<Problem>, u64); 3] {
    const QUEUED: DependencyConfig<HZ> = LINK.bulkhead_queue(2, Duration::from_secs(1));
    let link: SharedDependency<'_, CriticalSectionRawMutex, 4, 0, W> =
        SharedDependency::new(&QUEUED, Dependency::new(&QUEUED, relent_embassy::now()).unwrap());
    let t0 = embassy_time::Instant::now();
    let once = CHECKOUT.without_retries();
    let frame = |after_ms: u64| {
        let (link, once) = (&link, &once);
        async move {
            embassy_time::Timer::after_millis(after_ms).await;
            let mut rng = rng();
            let sent = RefCell::new(None);
            let done = link
                .execute(once, read(10_000), &mut rng, |_| {
                    *sent.borrow_mut() = Some(elapsed_ms(t0));
                    async {
                        embassy_time::Timer::after_millis(100).await;
                        Ok::<_, LinkError>(())
                    }
                })
                .await
                .unwrap();
            let waited = u64::from(done.completion.summary.waited.as_ticks()) / 1_000;
            (sent.into_inner(), done.completion.problem, waited)
        }
    };
    let (a, (b, c)) = run(join(frame(0), join(frame(10), frame(20))));
    assert_eq!(link.lock(|state, _| (state.in_flight(), state.bulkhead_waiting())), (0, 0));
    [a, b, c]
}

#[cfg(feature = "bulkhead")]
#[test]
fn a_frame_waiting_in_the_bulkhead_s_queue_goes_the_tick_its_slot_frees() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    assert_eq!(
        three_frames_through_one_slot::<2>(),
        [(Some(0), None, 0), (Some(100), None, 90), (Some(200), None, 180)]
    );
}

/// With no room for wakers (`W` of 0, the default), a waiting frame is not woken: it goes at the
/// end of its wait, and the slot stays free until then, kept for the frames that wait; the third
/// frame's wait ends while the second holds the slot, and it is refused.
#[cfg(feature = "bulkhead")]
#[test]
fn without_room_for_wakers_a_frame_in_the_queue_goes_only_at_the_end_of_its_wait() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    assert_eq!(
        three_frames_through_one_slot::<0>(),
        [(Some(0), None, 0), (Some(1_010), None, 1_000), (None, Some(Problem::BulkheadFull), 1_000)]
    );
}

/// `future`, dropped at `at` if it has not ended by then: a task that stops waiting for its frame.
#[cfg(feature = "bulkhead")]
async fn dropped_at<F: Future>(at: embassy_time::Instant, future: F) -> Option<F::Output> {
    let mut future = core::pin::pin!(future);
    let mut timer = embassy_time::Timer::at(at);
    core::future::poll_fn(|cx| {
        if let core::task::Poll::Ready(v) = future.as_mut().poll(cx) {
            return core::task::Poll::Ready(Some(v));
        }
        core::pin::Pin::new(&mut timer).poll(cx).map(|()| None)
    })
    .await
}

/// Four frames on a link with one slot and a queue of two places (and room for two wakers), each
/// frame 100 ms on air but the holder's: a holder from 0 ms, two frames that wait behind it from 10
/// and 20 ms and leave the queue (`dropped`: dropped at 100 ms, with the holder on air until 1 s
/// and waits of up to 2 s; or else each at the end of a 400 ms wait, with the holder on air until
/// 700 ms), and a frame that waits behind it from 600 (or 500) ms: when each went (`None`: refused
/// or dropped first).
#[cfg(feature = "bulkhead")]
fn a_frame_queued_after_two_left(dropped: bool) -> [Option<u64>; 4] {
    const QUEUED: DependencyConfig<HZ> = LINK.bulkhead_queue(2, Duration::from_secs(2));
    const IMPATIENT: DependencyConfig<HZ> = LINK.bulkhead_queue(2, Duration::from_millis(400));
    let config = if dropped { &QUEUED } else { &IMPATIENT };
    let link: SharedDependency<'_, CriticalSectionRawMutex, 4, 0, 2> =
        SharedDependency::new(config, Dependency::new(config, relent_embassy::now()).unwrap());
    let t0 = embassy_time::Instant::now();
    let once = CHECKOUT.without_retries();
    let frame = |after_ms: u64, on_air_ms: u64, drop_ms: Option<u64>| {
        let (link, once) = (&link, &once);
        async move {
            embassy_time::Timer::after_millis(after_ms).await;
            let mut rng = rng();
            let sent = RefCell::new(None);
            let done = link.execute(once, read(10_000), &mut rng, |_| {
                *sent.borrow_mut() = Some(elapsed_ms(t0));
                async move {
                    embassy_time::Timer::after_millis(on_air_ms).await;
                    Ok::<_, LinkError>(())
                }
            });
            let forever = t0 + embassy_time::Duration::from_secs(3_600);
            let at = drop_ms.map_or(forever, |ms| t0 + embassy_time::Duration::from_millis(ms));
            let _ = dropped_at(at, done).await;
            sent.into_inner()
        }
    };
    let (drop_ms, holder_ms, late_ms) = if dropped { (Some(100), 1_000, 600) } else { (None, 700, 500) };
    let ((holder, late), (first, second)) = run(join(
        join(frame(0, holder_ms, None), frame(late_ms, 100, None)),
        join(frame(10, 100, drop_ms), frame(20, 100, drop_ms)),
    ));
    assert_eq!(link.lock(|state, _| (state.in_flight(), state.bulkhead_waiting())), (0, 0));
    [holder, first, second, late]
}

/// Two frames dropped while they wait in the queue leave it: the frame queued after them is woken
/// when the slot frees, as they would have been, and goes at 1 s.
#[cfg(feature = "bulkhead")]
#[test]
fn a_frame_queued_after_two_were_dropped_from_the_queue_goes_the_tick_its_slot_frees() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    assert_eq!(a_frame_queued_after_two_left(true), [Some(0), None, None, Some(1_000)]);
}

/// Two frames whose waits in the queue ended (refused at 410 and 420 ms) leave it too: the frame
/// queued after them at 500 ms is woken when the slot frees, and goes at 700 ms, not at the end of
/// its wait.
#[cfg(feature = "bulkhead")]
#[test]
fn a_frame_queued_after_two_waited_their_whole_time_goes_the_tick_its_slot_frees() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    assert_eq!(a_frame_queued_after_two_left(false), [Some(0), None, None, Some(700)]);
}

/// A free slot wakes only the operations in the bulkhead's queue: a frame waiting out a
/// Retry-After is not woken by it (were it, its wait would end at once, over and over, while the
/// slot stays free for the frame in the queue). The frame that waits out its Retry-After is polled
/// first when both are woken, so such a loop would never let the queued one run: the test hangs.
#[cfg(feature = "bulkhead")]
#[test]
fn a_free_slot_does_not_end_a_wait_outside_the_bulkhead_s_queue() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    const QUEUED: DependencyConfig<HZ> = LINK.bulkhead_queue(2, Duration::from_secs(1));
    let link: SharedDependency<'_, CriticalSectionRawMutex, 4, 0, 2> =
        SharedDependency::new(&QUEUED, Dependency::new(&QUEUED, relent_embassy::now()).unwrap());
    let t0 = embassy_time::Instant::now();
    // From `after_ms`, attempts of `on_air_ms`; the first answers "busy for 1 s" if `busy`.
    let frame = |after_ms: u64, on_air_ms: u64, busy: bool| {
        let link = &link;
        async move {
            embassy_time::Timer::after_millis(after_ms).await;
            let mut rng = rng();
            let sent = RefCell::new(Vec::new());
            let done = link
                .execute(&CHECKOUT, read(10_000), &mut rng, |info| {
                    sent.borrow_mut().push(elapsed_ms(t0));
                    let answer = if busy && info.number() == 1 { Err(LinkError::Busy(1)) } else { Ok(()) };
                    async move {
                        embassy_time::Timer::after_millis(on_air_ms).await;
                        answer
                    }
                })
                .await
                .unwrap();
            (sent.into_inner(), done.completion.problem)
        }
    };
    // The slot's holder from 20 ms; of the other two, the busy frame is polled first.
    let (holder, (busy, queued)) =
        run(join(frame(20, 100, false), join(frame(0, 10, true), frame(30, 100, false))));
    assert_eq!(busy, (vec![0, 1_010], None));
    assert_eq!(holder, (vec![20], None));
    assert_eq!(queued, (vec![120], None));
    assert_eq!(link.lock(|state, _| (state.in_flight(), state.bulkhead_waiting())), (0, 0));
}

/// A frame that takes a slot without having been woken for it leaves no waker behind either. Two
/// slots cut to one while a frame waits: when the first slot frees, the link (now of one slot,
/// with one still held) wakes nobody, but the waiting frame, started under two, may go; its task
/// also runs a ticker, whose wake-up polls it, and it goes at 500 ms with its waker still
/// registered. That task ends. Of two frames that wait next, the second finds room for its waker
/// only if that one was taken: it goes the tick its slot frees, at 2,010 ms, not at the end of its
/// wait.
#[cfg(feature = "bulkhead")]
#[test]
fn a_frame_that_takes_a_slot_unwoken_leaves_no_waker_to_keep_a_place() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    static TWO: DependencyConfig<HZ> = LINK.bulkhead(2).bulkhead_queue(2, Duration::from_secs(2));
    static ONE: DependencyConfig<HZ> = TWO.bulkhead(1);
    let link: SharedDependency<'_, CriticalSectionRawMutex, 4, 0, 2> =
        SharedDependency::new(&TWO, Dependency::new(&TWO, relent_embassy::now()).unwrap());
    let t0 = embassy_time::Instant::now();
    let once = CHECKOUT.without_retries();
    // One attempt of `on_air_ms`, from `after_ms`: when it went.
    let frame = |after_ms: u64, on_air_ms: u64| {
        let (link, once) = (&link, &once);
        async move {
            embassy_time::Timer::after_millis(after_ms).await;
            let mut rng = rng();
            let sent = RefCell::new(None);
            link.execute(once, read(10_000), &mut rng, |_| {
                *sent.borrow_mut() = Some(elapsed_ms(t0));
                async move {
                    embassy_time::Timer::after_millis(on_air_ms).await;
                    Ok::<_, LinkError>(())
                }
            })
            .await
            .unwrap();
            sent.into_inner()
        }
    };
    let change = async {
        embassy_time::Timer::after_millis(100).await;
        link.reconfigure(&ONE).unwrap();
    };
    // The waiting frame and a ticker every 50 ms, in one task: both polled whenever it is woken.
    let ticked = async {
        let ended = core::cell::Cell::new(false);
        let (mut waiting, mut ticker) = (
            core::pin::pin!(async {
                let sent = frame(10, 10).await;
                ended.set(true);
                sent
            }),
            core::pin::pin!(async {
                while !ended.get() {
                    embassy_time::Timer::after_millis(50).await;
                }
            }),
        );
        let mut sent = None;
        core::future::poll_fn(|cx| {
            if sent.is_none() {
                if let core::task::Poll::Ready(v) = waiting.as_mut().poll(cx) {
                    sent = Some(v);
                }
            }
            let ticking = ticker.as_mut().poll(cx).is_pending();
            if sent.is_some() && !ticking { core::task::Poll::Ready(()) } else { core::task::Poll::Pending }
        })
        .await;
        sent.unwrap()
    };
    let ((short, long), ((unwoken, ()), (next, last))) = run(join(
        join(frame(0, 500), frame(0, 2_000)),
        join(join(ticked, change), join(frame(600, 10), frame(610, 10))),
    ));
    assert_eq!([short, long, unwoken, next, last], [Some(0), Some(0), Some(500), Some(2_000), Some(2_010)]);
    assert_eq!(link.lock(|state, _| (state.in_flight(), state.bulkhead_waiting())), (0, 0));
}

/// A second slot given by a reconfiguration while a frame waits in the queue: the waiting frame
/// started under one slot and goes under it, as the first slot frees at 1 s (woken for the new
/// slot, it finds none under its own configuration and waits on, with no wake-up loop), while a
/// frame started after the change goes at once in the second slot.
#[cfg(feature = "bulkhead")]
#[test]
fn a_frame_waiting_under_fewer_slots_waits_for_its_own_while_a_newcomer_takes_the_new_one() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    static QUEUED: DependencyConfig<HZ> = LINK.bulkhead_queue(2, Duration::from_secs(2));
    static TWO_SLOTS: DependencyConfig<HZ> = QUEUED.bulkhead(2);
    let link: SharedDependency<'_, CriticalSectionRawMutex, 4, 0, 2> =
        SharedDependency::new(&QUEUED, Dependency::new(&QUEUED, relent_embassy::now()).unwrap());
    let t0 = embassy_time::Instant::now();
    let once = CHECKOUT.without_retries();
    // One attempt of `on_air_ms`, from `after_ms`, reconfiguring the link to `to` first.
    let frame = |after_ms: u64, on_air_ms: u64, to: Option<&'static DependencyConfig<HZ>>| {
        let (link, once) = (&link, &once);
        async move {
            embassy_time::Timer::after_millis(after_ms).await;
            if let Some(to) = to {
                link.reconfigure(to).unwrap();
            }
            let mut rng = rng();
            let sent = RefCell::new(None);
            let done = link
                .execute(once, read(10_000), &mut rng, |_| {
                    *sent.borrow_mut() = Some(elapsed_ms(t0));
                    async move {
                        embassy_time::Timer::after_millis(on_air_ms).await;
                        Ok::<_, LinkError>(())
                    }
                })
                .await
                .unwrap();
            (sent.into_inner(), done.completion.problem)
        }
    };
    let (holder, (waiter, newcomer)) =
        run(join(frame(0, 1_000, None), join(frame(10, 10, None), frame(300, 10, Some(&TWO_SLOTS)))));
    assert_eq!(holder, (Some(0), None));
    assert_eq!(waiter, (Some(1_000), None), "sent in the slot it waited for");
    assert_eq!(newcomer, (Some(300), None), "sent at once in the new slot");
    assert_eq!(link.lock(|state, _| (state.in_flight(), state.bulkhead_waiting())), (0, 0));
}

/// A change that frees a slot for the frames waiting wakes them, as a step that frees one does: an
/// adaptive limit learnt down to one slot, raised to a new floor of two while a frame waits behind
/// the one slot's holder, lets it go at once, at 300 ms, not when the holder ends.
#[cfg(feature = "bulkhead-adaptive")]
#[test]
fn a_change_that_raises_the_limit_to_a_new_floor_wakes_the_frame_waiting() {
    use relent_embassy::core::AdaptiveLimit;
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    test_clock::reset();
    static LEARNING: DependencyConfig<HZ> = LINK
        .bulkhead(4)
        .bulkhead_queue(2, Duration::from_secs(2))
        .adaptive_limit(AdaptiveLimit::new(Duration::from_millis(100)));
    static FLOOR: DependencyConfig<HZ> =
        LEARNING.adaptive_limit(AdaptiveLimit::new(Duration::from_millis(100)).min_slots(2));
    let link: SharedDependency<'_, CriticalSectionRawMutex, 4, 0, 2> =
        SharedDependency::new(&LEARNING, Dependency::new(&LEARNING, relent_embassy::now()).unwrap());
    let once = CHECKOUT.without_retries();
    // One attempt of `on_air_ms`, from `after_ms`: when it went, from `t0`.
    let frame = |t0: embassy_time::Instant, after_ms: u64, on_air_ms: u64| {
        let (link, once) = (&link, &once);
        async move {
            embassy_time::Timer::after_millis(after_ms).await;
            let mut rng = rng();
            let sent = RefCell::new(None);
            link.execute(once, read(10_000), &mut rng, |_| {
                *sent.borrow_mut() = Some(elapsed_ms(t0));
                async move {
                    embassy_time::Timer::after_millis(on_air_ms).await;
                    Ok::<_, LinkError>(())
                }
            })
            .await
            .unwrap();
            sent.into_inner()
        }
    };
    // Two slow frames, one after the other: 4 slots halve to 2, then to 1.
    let t0 = embassy_time::Instant::now();
    run(frame(t0, 0, 150));
    run(frame(t0, 0, 150));
    assert_eq!(link.lock(|state, _| state.bulkhead_limit(&LEARNING)), Some(1));
    let t0 = embassy_time::Instant::now();
    let change = async {
        embassy_time::Timer::after_millis(300).await;
        link.reconfigure(&FLOOR).unwrap();
    };
    let (holder, (waiter, ())) = run(join(frame(t0, 0, 1_000), join(frame(t0, 10, 10), change)));
    assert_eq!((holder, waiter), (Some(0), Some(300)), "woken by the change");
    assert_eq!(link.lock(|state, _| (state.in_flight(), state.bulkhead_waiting())), (0, 0));
}
