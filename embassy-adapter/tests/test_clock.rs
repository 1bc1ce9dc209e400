//! The test clock (feature `test-clock`) as a test relies on it: each wait ends at its exact tick
//! and no later, the earliest of several first; a future that wakes itself is polled again at the
//! same instant; a wait nothing can end panics instead of hanging; runs in parallel take turns;
//! `advance` wakes what is due and nothing else.
//!
//! The clock is one per test binary, so each test takes `SERIAL` (the test of parallel runs starts
//! its threads inside it).

use core::future::{Future, poll_fn};
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Wake;

use embassy_time::{Duration, Instant, Timer, with_timeout};
use relent_embassy::test_clock;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

#[test]
fn an_hours_wait_ends_at_once_at_its_exact_tick() {
    let _serial = serial();
    let wait = Duration::from_secs(3_600) + Duration::from_ticks(1);
    let (started, ended) = test_clock::run(async {
        let started = Instant::now();
        Timer::after(wait).await;
        (started, Instant::now())
    });
    assert_eq!(ended - started, wait);
    assert_eq!(Instant::now(), ended, "nothing moved the clock after the run");
}

#[test]
fn waits_end_in_order_and_a_timeout_cuts_a_longer_wait_at_its_own_tick() {
    let _serial = serial();
    let times = test_clock::run(async {
        let t0 = Instant::now();
        let mut times = Vec::new();
        Timer::after_millis(250).await;
        times.push((Instant::now() - t0).as_micros());
        let cut = with_timeout(Duration::from_millis(700), Timer::after_secs(5)).await;
        assert!(cut.is_err(), "the 5 s wait is cut by the 700 ms timeout");
        times.push((Instant::now() - t0).as_micros());
        let inner = with_timeout(Duration::from_secs(5), Timer::after_micros(1_500)).await;
        assert!(inner.is_ok());
        times.push((Instant::now() - t0).as_micros());
        times
    });
    assert_eq!(times, [250_000, 950_000, 951_500]);
}

/// Yields once: wakes itself and is pending, as `embassy_futures::yield_now` does (`by_value`:
/// through a clone of its waker, woken by value, as a channel wakes the waker it kept).
fn yield_once(by_value: bool) -> impl Future<Output = ()> {
    let mut yielded = false;
    poll_fn(move |cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        if by_value {
            #[allow(clippy::waker_clone_wake)] // by value on purpose: the path a kept waker takes
            cx.waker().clone().wake();
        } else {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    })
}

#[test]
fn a_future_that_wakes_itself_is_polled_again_at_the_same_instant() {
    let _serial = serial();
    let (before, after) = test_clock::run(async {
        // A timer a minute off, armed (polled once) but not awaited, must not be jumped to while
        // the future still asks to be polled.
        let mut far = pin!(with_timeout(Duration::from_secs(60), core::future::pending::<()>()));
        poll_fn(|cx| {
            assert!(far.as_mut().poll(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        let before = Instant::now();
        for by_value in [false, true, false, true] {
            yield_once(by_value).await;
        }
        (before, Instant::now())
    });
    assert_eq!(after, before);
}

/// Both futures to their ends, polled in turn: the join a test runs several tasks with.
async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut out_a, mut out_b) = (None, None);
    poll_fn(|cx| {
        if out_a.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                out_a = Some(v);
            }
        }
        if out_b.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                out_b = Some(v);
            }
        }
        if out_a.is_some() && out_b.is_some() { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    (out_a.unwrap(), out_b.unwrap())
}

#[test]
fn two_tasks_joined_into_one_future_wake_each_other_and_wait_their_own_timers() {
    use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
    use embassy_sync::signal::Signal;

    let _serial = serial();
    let frame: Signal<CriticalSectionRawMutex, u8> = Signal::new();
    let (fed_at, (got, sent_at)) = test_clock::run(async {
        let t0 = Instant::now();
        let feeder = async {
            Timer::after_millis(1_000).await;
            frame.signal(42);
            (Instant::now() - t0).as_millis()
        };
        let uplink = async {
            let got = frame.wait().await; // woken by the feeder, not by a timer
            Timer::after_millis(500).await;
            (got, (Instant::now() - t0).as_millis())
        };
        join(feeder, uplink).await
    });
    assert_eq!((fed_at, got, sent_at), (1_000, 42, 1_500));
}

#[test]
fn a_future_waiting_on_nothing_a_timer_ends_panics_naming_the_tick() {
    let _serial = serial();
    // A timeout that never fired, left by an earlier run: dropped as the next run starts, so it
    // does not move that run's clock.
    let finished_first = test_clock::run(with_timeout(Duration::from_secs(3_600), async { 7 }));
    assert_eq!(finished_first, Ok(7));
    let now = Instant::now();
    let hung = std::panic::catch_unwind(|| test_clock::run(core::future::pending::<()>()));
    let message = *hung.unwrap_err().downcast::<String>().unwrap();
    assert_eq!(
        message,
        format!(
            "test_clock::run: at tick {} the future waits with no timer armed and nothing woke it in 1 s, so it \
             would never finish (a wait on a channel nobody sends on, or on `pending()`?)",
            now.as_ticks()
        )
    );
    assert_eq!(Instant::now(), now);
    // The clock works on after the panic.
    let waited = test_clock::run(async {
        let t0 = Instant::now();
        Timer::after_secs(1).await;
        Instant::now() - t0
    });
    assert_eq!(waited, Duration::from_secs(1));
}

#[test]
fn a_future_woken_from_another_thread_with_no_timer_armed_is_waited_for_not_called_hung() {
    use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
    use embassy_sync::signal::Signal;

    static IRQ: Signal<CriticalSectionRawMutex, u8> = Signal::new();
    let _serial = serial();
    IRQ.reset();
    // A thread standing in for an interrupt, 50 ms of real time later.
    let interrupt = std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        IRQ.signal(9);
    });
    let (got, waited) = test_clock::run(async {
        let t0 = Instant::now();
        (IRQ.wait().await, Instant::now() - t0)
    });
    interrupt.join().unwrap();
    assert_eq!((got, waited), (9, Duration::from_ticks(0)), "no timer, so the clock did not move");
}

#[test]
fn a_run_inside_a_run_panics_saying_to_await_instead_and_the_next_run_works() {
    let _serial = serial();
    let nested = std::panic::catch_unwind(|| test_clock::run(async { test_clock::run(async { 1 }) }));
    let message = *nested.unwrap_err().downcast::<&'static str>().unwrap();
    assert_eq!(
        message,
        "test_clock::run inside a run would wait for its turn for ever: await the future instead"
    );
    assert_eq!(test_clock::run(async { 2 }), 2, "neither the turn nor the thread stays taken");
}

#[test]
fn runs_on_threads_at_once_take_turns_and_each_sees_only_its_own_waits() {
    let _serial = serial();
    // Without turns, one run would move the clock to its own timer past another's, and that one
    // would see its wait end late.
    let threads: Vec<_> = (1..=4u64)
        .map(|k| {
            std::thread::spawn(move || {
                (0..50)
                    .map(|_| {
                        test_clock::run(async move {
                            let t0 = Instant::now();
                            Timer::after_millis(k * 7).await;
                            Timer::after_millis(k).await;
                            Instant::now() - t0
                        })
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for (k, thread) in (1..=4u64).zip(threads) {
        let waited = thread.join().unwrap();
        assert!(waited.iter().all(|w| *w == Duration::from_millis(k * 8)), "{k}: {waited:?}");
    }
}

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn advance_wakes_a_timer_when_it_is_due_and_not_before() {
    let _serial = serial();
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    let mut timer = pin!(Timer::after_millis(5));
    assert!(timer.as_mut().poll(&mut cx).is_pending());
    test_clock::advance(Duration::from_micros(4_999));
    assert!(!flag.0.load(Ordering::SeqCst), "not due 1 µs early");
    test_clock::advance(Duration::from_micros(1));
    assert!(flag.0.load(Ordering::SeqCst), "woken when due");
    assert!(timer.as_mut().poll(&mut cx).is_ready());
}

#[test]
fn reset_puts_the_clock_back_to_tick_zero() {
    let _serial = serial();
    test_clock::advance(Duration::from_secs(90));
    assert!(Instant::now().as_ticks() >= Duration::from_secs(90).as_ticks());
    test_clock::reset();
    assert_eq!(Instant::now().as_ticks(), 0);
}
