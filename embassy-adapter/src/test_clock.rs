//! A virtual embassy-time clock for host tests of firmware code (feature `test-clock`).
//!
//! Why: firmware waits seconds to hours (a modem's "busy, retry in 30 s", a cooldown, a duty cycle's
//! window), and a test of that code should take microseconds and see every wait end at its exact
//! tick. embassy-time's own `mock-driver` moves only when a test calls `advance`, so each test
//! writes an executor that steps it, at 1 ms a poll: an hour is 3.6 million polls, a wait that can
//! never end (a future waiting on a channel nobody sends on) loops for ever, and one global clock
//! stepped by tests running in parallel moves under each of them.
//!
//! This module is an embassy-time driver of its own: [`run`] polls a future to its end, and when
//! the future waits, moves the clock straight to the earliest timer, as tokio's paused clock does.
//! A future that waits with no timer armed and nothing to wake it (within a second of real time,
//! for a test whose other thread wakes it) panics, naming the tick, instead of hanging. `run`s
//! take turns, so tests in one binary can run in parallel. [`advance`] and [`reset`] are for tests
//! that step the clock themselves.
//!
//! The feature installs the driver and `critical-section`'s `std` implementation, for host tests
//! only: put it in `[dev-dependencies]`, without embassy-time's `mock-driver` or `std` (each
//! installs a driver too, and the link fails with two). Built for a board (`target_os = "none"`),
//! the feature is a compile error that says so. The clock counts in embassy-time's ticks, at
//! whatever `tick-hz-*` the firmware chose, so tests see the firmware's own rounding.
//!
//! The driver is installed as every embassy-time driver is, by embassy-time-driver's
//! `time_driver_impl!`, which exports two functions under fixed names with `#[unsafe(no_mangle)]`.
//! That attribute, from embassy's macro and in this feature only, is the one `unsafe` in this crate:
//! a firmware build (no `test-clock`) has none.

use core::cell::Cell;
use core::future::Future;
use core::pin::pin;
use core::sync::atomic::{AtomicBool, Ordering};
use core::task::{Context, Poll, Waker};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Wake;
use std::vec::Vec;

use embassy_time_driver::Driver;

/// The clock: now, in ticks, and the timers armed, each the earliest instant a waker asked for.
struct TestClock(Mutex<State>);

struct State {
    now: u64,
    timers: Vec<(u64, Waker)>,
}

embassy_time_driver::time_driver_impl!(static CLOCK: TestClock = TestClock(Mutex::new(State { now: 0, timers: Vec::new() })));

/// `run`s take turns on the one clock.
static ONE_RUN_AT_A_TIME: Mutex<()> = Mutex::new(());

std::thread_local! {
    /// Whether this thread is inside a `run`, whose turn a nested one would wait for.
    static IN_RUN: Cell<bool> = const { Cell::new(false) };
}

/// This thread inside a `run` until dropped, a panic's unwinding included.
struct InRun;

impl InRun {
    fn enter() -> Self {
        IN_RUN.set(true);
        Self
    }
}

impl Drop for InRun {
    fn drop(&mut self) {
        IN_RUN.set(false);
    }
}

impl TestClock {
    /// The state. Nothing panics while holding it, so a poisoned lock only says some test
    /// panicked elsewhere: the state is still whole.
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the clock to `to` (never back), and wakes every timer due by then. The wakers run
    /// after the lock is let go: a waker may arm a timer.
    fn move_to(&self, to: u64) {
        let due: Vec<Waker> = {
            let mut state = self.state();
            state.now = state.now.max(to);
            let now = state.now;
            let (due, armed) = core::mem::take(&mut state.timers).into_iter().partition(|(at, _)| *at <= now);
            state.timers = armed;
            due.into_iter().map(|(_, waker)| waker).collect()
        };
        due.into_iter().for_each(Waker::wake);
    }
}

impl Driver for TestClock {
    fn now(&self) -> u64 {
        self.state().now
    }

    /// As embassy's timer queues do: a waker is kept once, at the earliest instant asked for (an
    /// embassy timer asks again each time it is polled and not yet due), and one already due is
    /// woken at once.
    fn schedule_wake(&self, at: u64, waker: &Waker) {
        let mut state = self.state();
        if at <= state.now {
            drop(state);
            waker.wake_by_ref();
        } else if let Some(timer) = state.timers.iter_mut().find(|(_, w)| w.will_wake(waker)) {
            timer.0 = timer.0.min(at);
        } else {
            state.timers.push((at, waker.clone()));
        }
    }
}

/// How long, in real time, a run with no timer armed waits for another thread to wake its future
/// before it calls the future hung.
const GRACE: core::time::Duration = core::time::Duration::from_secs(1);

/// Whether the future asked to be polled again, and the thread that polls it, woken in turn (a
/// wake may come from another thread, as an interrupt's would).
struct Woken {
    again: AtomicBool,
    poller: std::thread::Thread,
}

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.again.store(true, Ordering::Release);
        self.poller.unpark();
    }
}

impl Woken {
    /// Whether the future was woken since last asked, forgetting it.
    fn take(&self) -> bool {
        self.again.swap(false, Ordering::AcqRel)
    }

    /// Waits up to `GRACE` of real time for a wake: whether one came.
    fn wait(&self) -> bool {
        let deadline = std::time::Instant::now() + GRACE;
        loop {
            if self.take() {
                return true;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            std::thread::park_timeout(left);
        }
    }
}

/// Polls `future` to its end. Whenever it waits and nothing woke it, the clock moves straight to
/// the earliest timer armed and wakes it: every wait ends at its exact tick, and an hour's takes
/// no longer than a millisecond's.
///
/// The clock goes on from where the last `run` (or [`advance`]) left it: read the time a test
/// measures from inside the future. Runs in one test binary take turns, so tests may run in
/// parallel. A timer armed in one run and never waited for (a timeout whose future finished first)
/// is dropped when the next run starts.
///
/// `run` is the executor: to test several tasks together (an uplink and the task that feeds it),
/// join their futures into one (`embassy_futures::join::join`, say) and run that. An executor of
/// its own (embassy-executor's `arch-std`) would wait on this clock, and nothing would move it.
///
/// # Panics
///
/// When the future waits with no timer armed and nothing wakes it within a second of real time
/// (another thread may, as an interrupt would): it would never finish (it waits on a channel
/// nobody sends on, say, or on `core::future::pending`). The message names the tick.
///
/// When called inside a run (by the future it polls), which would wait for its own turn for
/// ever: await the inner future instead. A panic of the future's own goes on as it is.
///
/// ```
/// use embassy_time::{Duration, Instant, Timer};
/// use relent_embassy::test_clock;
///
/// let waited = test_clock::run(async {
///     let start = Instant::now();
///     Timer::after(Duration::from_secs(3_600)).await; // an hour, at once
///     Instant::now() - start
/// });
/// assert_eq!(waited, Duration::from_secs(3_600));
/// ```
pub fn run<F: Future>(future: F) -> F::Output {
    assert!(
        !IN_RUN.get(),
        "test_clock::run inside a run would wait for its turn for ever: await the future instead"
    );
    let _turn = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let _in_run = InRun::enter();
    CLOCK.state().timers.clear();
    let woken = Arc::new(Woken { again: AtomicBool::new(false), poller: std::thread::current() });
    let waker = Waker::from(Arc::clone(&woken));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        if woken.take() {
            continue;
        }
        let (now, next) = {
            let state = CLOCK.state();
            (state.now, state.timers.iter().map(|(at, _)| *at).min())
        };
        match next {
            Some(at) => CLOCK.move_to(at),
            // Only another thread can wake it now: give it a moment of real time.
            None if woken.wait() => {}
            None => panic!(
                "test_clock::run: at tick {now} the future waits with no timer armed and nothing woke it in {} s, \
                 so it would never finish (a wait on a channel nobody sends on, or on `pending()`?)",
                GRACE.as_secs()
            ),
        }
    }
}

/// Moves the clock forward by `by` and wakes the timers due by then: for a test that steps the
/// clock itself (as a periodic tick would) or tests code that reads `Instant::now()` without
/// waiting. It does not take turns with [`run`]: a test binary that steps the clock from several
/// tests serializes them itself.
pub fn advance(by: embassy_time::Duration) {
    let to = CLOCK.state().now.saturating_add(by.as_ticks());
    CLOCK.move_to(to);
}

/// Puts the clock back to tick 0 and drops every timer armed: for a test that needs a known
/// start (state kept in a `static` from an earlier test then sees time go back, so give such a
/// test its own state).
pub fn reset() {
    let mut state = CLOCK.state();
    state.now = 0;
    state.timers.clear();
}
