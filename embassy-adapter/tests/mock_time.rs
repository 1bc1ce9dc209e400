//! The adapter's mapping onto embassy-time, on its mock driver: exact delays and timeouts, attempt
//! futures dropped at their timeout, Retry-After honoured to the tick, a `static` dependency behind
//! a critical section, and slots given back on cancellation.
//!
//! Every test runs with 64-bit and with 32-bit ticks (`--features ticks-u32`); the last ones, with
//! 32-bit ticks only, run operations and dependencies across restarts of the core's clock. A test
//! of a protection needs its feature; the others run with none compiled in too, as firmware builds
//! this crate (`--no-default-features`, and the firmware example's
//! `--no-default-features --features ticks-u32,breaker,cooldown,duty-cycle`).
//!
//! The mock driver is one global clock, so these tests take a lock and run one at a time. A tiny
//! executor polls the future with a no-op waker and moves the clock 1 ms forward whenever it is
//! pending.

#![allow(clippy::useless_conversion)] // Conversions that are one only with 32-bit ticks.

use core::cell::RefCell;
use core::future::Future;
use core::pin::pin;
use core::task::{Context as TaskContext, Poll, Waker};
use std::sync::Mutex;

use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::MockDriver;
use relent_embassy::core::{
    Classify, Context, Dependency, DependencyConfig, Event, Jitter, Problem, ReplaySafety, RetryBudget,
    RetryPolicy, Verdict,
};
#[cfg(feature = "duty-cycle")]
use relent_embassy::core::{Disposition, DutyCycle};
use relent_embassy::{AttemptError, Duration, HZ, SharedDependency};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Polls `fut` to completion, advancing the mock clock 1 ms whenever it is pending.
fn run<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = TaskContext::from_waker(Waker::noop());
    for _ in 0..10_000_000 {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        MockDriver::get().advance(embassy_time::Duration::from_millis(1));
    }
    panic!("the future did not finish in 10 000 s of mock time");
}

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
    MockDriver::get().reset();
    let link = shared();
    let attempts = RefCell::new(Vec::new());
    let t0 = embassy_time::Instant::now();
    let mut rng = rng();
    let done = run(link.execute(&CHECKOUT, read(7_500), &mut rng, |info| {
        attempts.borrow_mut().push((elapsed_ms(t0), info.timeout().as_millis()));
        core::future::pending::<Result<(), LinkError>>()
    }))
    .unwrap();
    assert_eq!(*attempts.borrow(), [(0, 3_000), (3_100, 3_000), (6_300, 1_200)]);
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
    MockDriver::get().reset();
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
    MockDriver::get().reset();
    let link = shared();
    let mut rng = rng();
    MockDriver::get().advance(embassy_time::Duration::from_millis(250));
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

/// The observer runs under the dependency's lock (`execute_with` says so): a call back into the
/// dependency from it finds the state borrowed.
#[test]
#[should_panic(expected = "already borrowed")]
fn an_observer_that_calls_back_into_its_dependency_panics_on_the_borrow() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    MockDriver::get().reset();
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
    MockDriver::get().reset();
    let radio: SharedDependency<'static, CriticalSectionRawMutex, 4, 8> =
        SharedDependency::new(&RADIO, Dependency::new(&RADIO, relent_embassy::now()).unwrap());
    let t0 = embassy_time::Instant::now();
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
    assert_eq!(done.completion.not_before, Some(relent_embassy::Instant::from_ticks(100_400_000)));
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

#[cfg(feature = "bulkhead")]
#[test]
fn a_static_dependency_gives_back_its_slot_when_the_operation_is_dropped_mid_attempt() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    MockDriver::get().reset();
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
    MockDriver::get().reset();
    let link = shared();
    let mut rng = rng();
    let t0 = embassy_time::Instant::now();
    let deadlines = RefCell::new(Vec::new());
    let fut = link.execute(&CHECKOUT, read(7_500), &mut rng, |info| {
        deadlines.borrow_mut().push(info.deadline() - t0);
        async { Ok::<_, LinkError>(()) }
    });
    MockDriver::get().advance(embassy_time::Duration::from_millis(500));
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

/// With 32-bit ticks, the core's clock restarts 2^30 ticks later each time it reaches 2^31: at
/// 1 MHz (the mock driver's rate), every 17.9 minutes from 35.8 minutes on.
#[cfg(feature = "ticks-u32")]
mod restarts {
    use super::*;

    const RESTART: u64 = 1 << 31;

    /// Moves the mock clock to `ticks` embassy ticks.
    fn at(ticks: u64) -> embassy_time::Instant {
        let now = embassy_time::Instant::now().as_ticks();
        MockDriver::get().advance(embassy_time::Duration::from_ticks(ticks - now));
        embassy_time::Instant::now()
    }

    #[test]
    fn an_operation_across_a_restart_of_the_core_clock_keeps_its_timeouts_to_the_tick() {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        MockDriver::get().reset();
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
        MockDriver::get().reset();
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
        MockDriver::get().reset();
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

/// `{:?}` of a shared dependency shows its configuration and takes no lock, so it works from inside
/// `lock`'s closure too, where the state is borrowed.
#[test]
fn a_shared_dependency_prints_its_configuration_even_under_its_lock() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let link = shared();
    let outside = format!("{link:?}");
    assert_eq!(outside, format!("SharedDependency {{ config: {LINK:?}, .. }}"));
    assert_eq!(link.lock(|_, _| format!("{link:?}")), outside);
}
