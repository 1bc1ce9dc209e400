//! Frames dropped anywhere, on a link with a bulkhead and a queue (and a breaker of two probes, a
//! rate limit and a duty cycle where those are compiled in), on this crate's test clock.
//!
//! The single cases are tested one by one in `mock_time.rs`. This is the question firmware asks
//! after a day of tasks giving up on their frames at every instant (a newer reading replaces the
//! queued one, a user presses cancel): is anything held by a frame that is gone, or is a frame left
//! waiting for a slot that is free? Any number of frames, each with its own answers and dropped at
//! any instant or not at all, with room for as many wakers as the queue has places, as
//! `SharedDependency` asks:
//! - at every millisecond, once the tasks woken at it have run, no frame waits in the queue while a
//!   slot is free for it, and no more attempts run than the bulkhead allows;
//! - every frame that was not dropped ends by its deadline;
//! - with the link reconfigured (another bulkhead, the rate limit added or left out) at any instant
//!   as they run: the same, but that a frame started before the change may wait for a slot the new
//!   configuration adds (it is for the frames started after it), so the watch pauses at the change
//!   until every frame started before it has ended;
//! - once all have ended nothing is held, and once every break, reserved rate unit and airtime has
//!   passed, a new frame's first attempt goes at once and succeeds.
//!
//! With 32-bit ticks the frames run across a restart of the core's clock (every 2^30 ticks), which
//! rebases the link's state and each frame's operation as it next takes the lock.
//!
//! The frames are tasks of one executor (`join_all`), each polled only when its own waker was
//! woken, so that a wake-up the adapter fails to make is not made up for by another task's: a task
//! for each frame, one for all, or three each with some of them, whose frames share its waker
//! (which the link keeps once for all of them) and are polled whenever any of them is woken.

#![cfg(feature = "bulkhead")]
#![allow(clippy::useless_conversion)] // Conversions that are one only with 32-bit ticks.

use core::cell::Cell;
use core::future::Future;
use core::pin::Pin;
use core::task::Poll;

use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::{Instant as Clock, Timer};
use proptest::prelude::*;
use relent_embassy::core::{
    Classify, Context, Dependency, DependencyConfig, Jitter, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_embassy::{Duration, HZ, SharedDependency, test_clock};

mod common;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NoAck;

impl Classify<HZ> for NoAck {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

/// The queue's places, and the room for wakers the link is given.
const PLACES: usize = 3;
/// Every frame's deadline, in milliseconds.
const DEADLINE_MS: u32 = 5_000;

/// Retries under a budget, `slots` slots with a queue of 3 that waits up to 500 ms, a breaker of
/// two probes, 5 frames a second if `rate`, and a duty cycle (each where its feature is compiled
/// in).
const fn config(slots: u16, rate: bool) -> DependencyConfig<HZ> {
    let budget = match RetryBudget::ratio(50, 5) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    };
    let config = DependencyConfig::new(Duration::from_secs(10))
        .budget(budget)
        .bulkhead(slots)
        .bulkhead_queue(PLACES as u16, Duration::from_millis(500));
    #[cfg(feature = "breaker")]
    let config = config.breaker(
        relent_embassy::core::BreakerConfig::consecutive_failures(3, Duration::from_secs(2)).probes(2),
    );
    #[cfg(feature = "rate-limit")]
    let config = if rate {
        config.rate_limit(
            relent_embassy::core::RateLimit::new(5, Duration::from_secs(1)).max_wait(Duration::from_secs(1)),
        )
    } else {
        config
    };
    #[cfg(not(feature = "rate-limit"))]
    let _ = rate;
    // 1 s on air in any 4 s.
    #[cfg(feature = "duty-cycle")]
    let config = config
        .duty_cycle(relent_embassy::core::DutyCycle::new(Duration::from_secs(1), Duration::from_secs(4)));
    config
}

/// The configurations a link starts with or is changed to: `CONFIGS[2 * (slots - 1) + rate]`.
static CONFIGS: [DependencyConfig<HZ>; 6] =
    [config(1, false), config(1, true), config(2, false), config(2, true), config(3, false), config(3, true)];

fn configured(slots: u16, rate: bool) -> &'static DependencyConfig<HZ> {
    &CONFIGS[2 * usize::from(slots - 1) + usize::from(rate)]
}

/// How many attempts may run at once, but for a change.
const SLOTS: u16 = 2;

/// The airtime log's entries, where the duty cycle is compiled in.
const LOG: usize = if cfg!(feature = "duty-cycle") { 4 } else { 0 };

type Link = SharedDependency<'static, CriticalSectionRawMutex, 4, LOG, PLACES>;

fn policy() -> RetryPolicy<HZ> {
    RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1))
        .jitter(Jitter::Full)
        .attempt_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

/// A frame's context: its deadline, and the airtime each of its attempts costs where the duty
/// cycle is compiled in.
fn read(airtime_ms: u32) -> Context<HZ> {
    let context = Context::new(
        Duration::from_millis(DEADLINE_MS.into()),
        ReplaySafety::replayable_read(Duration::from_secs(60)),
    );
    #[cfg(feature = "duty-cycle")]
    let context = context.airtime(Duration::from_millis(airtime_ms.into()));
    #[cfg(not(feature = "duty-cycle"))]
    let _ = airtime_ms;
    context
}

/// What an attempt does: answers after some milliseconds, or hangs until its timeout drops it.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Ack(u64),
    NoAck(u64),
    Hang,
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![(0u64..400).prop_map(Answer::Ack), (0u64..400).prop_map(Answer::NoAck), Just(Answer::Hang)]
}

/// One task's frame: when it starts, each attempt's answer (the last repeated), and when the task
/// drops it, counted from its start.
#[derive(Debug, Clone)]
struct Frame {
    start_ms: u64,
    answers: Vec<Answer>,
    dropped_after_ms: Option<u64>,
    airtime_ms: u32,
}

fn frame() -> impl Strategy<Value = Frame> {
    (
        0u64..3_000,
        proptest::collection::vec(answer(), 1..4),
        proptest::option::weighted(0.6, 0u64..3_000),
        1u32..400,
    )
        .prop_map(|(start_ms, answers, dropped_after_ms, airtime_ms)| Frame {
            start_ms,
            answers,
            dropped_after_ms,
            airtime_ms,
        })
}

fn ms_since(t: Clock) -> u64 {
    (Clock::now() - t).as_millis()
}

/// Counts the attempts running, each from its start until its future is dropped or ends.
struct Running<'a>(&'a Cell<u16>);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Runs `frame` (the `seed`th) from its start to its end or its drop, checking that each attempt
/// keeps within `slots` and that a frame that ends ends by its deadline.
async fn task(
    link: &Link,
    policy: &RetryPolicy<HZ>,
    frame: Frame,
    seed: u64,
    running: &Cell<u16>,
    slots: u16,
) {
    Timer::after_millis(frame.start_ms).await;
    let started = Clock::now();
    let mut rng: rand_xoshiro::Xoshiro256PlusPlus = rand_core::SeedableRng::seed_from_u64(seed);
    let answers = &frame.answers;
    let send = link.execute(policy, read(frame.airtime_ms), &mut rng, |info| {
        running.set(running.get() + 1);
        let now = running.get();
        assert!(now <= slots, "{now} attempts run at once, with {slots} slots");
        let index = usize::from(info.number() - 1).min(answers.len() - 1);
        let answer = answers[index];
        async move {
            let _running = Running(running);
            match answer {
                Answer::Ack(ms) => {
                    Timer::after_millis(ms).await;
                    Ok(())
                }
                Answer::NoAck(ms) => {
                    Timer::after_millis(ms).await;
                    Err(NoAck)
                }
                Answer::Hang => core::future::pending().await,
            }
        }
    });
    let ended = match frame.dropped_after_ms {
        Some(ms) => embassy_time::with_timeout(embassy_time::Duration::from_millis(ms), send).await.is_ok(),
        None => {
            send.await.unwrap();
            true
        }
    };
    if ended {
        let took = ms_since(started);
        assert!(took <= u64::from(DEADLINE_MS), "a frame ended {took} ms after it started");
    }
}

/// Lets every task woken before it run, once or more: it wakes itself and waits its turn.
async fn yield_now() {
    let mut yielded = false;
    core::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

type Boxed<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Every future to its end, as tasks of one executor (see `common::Task`), in order; or, if
/// `shared`, as the futures of one task that all share its waker and are all polled whenever it
/// is woken, as `embassy_futures::join_array` runs them (a firmware task sending several frames).
async fn join_all(mut futures: Vec<Boxed<'_>>, shared: bool) {
    let tasks: Vec<_> = futures.iter().map(|_| common::Task::new()).collect();
    let mut ended = vec![false; futures.len()];
    core::future::poll_fn(|cx| {
        for ((future, task), ended) in futures.iter_mut().zip(&tasks).zip(ended.iter_mut()) {
            if !*ended {
                *ended = if shared {
                    future.as_mut().poll(cx).is_ready()
                } else {
                    task.step(future.as_mut(), cx.waker()).is_some()
                };
            }
        }
        if ended.iter().all(|e| *e) { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
}

/// Whether a frame waits in the queue while a slot is free for it.
fn waits_with_a_slot_free(link: &Link) -> bool {
    let config = link.config();
    link.lock(|state, _| state.bulkhead_waiting() > 0 && state.slot_for_waiting(config))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").map_or(128, |v| v.parse().expect("PROPTEST_CASES: a whole number")),
        ..ProptestConfig::default()
    })]

    /// See the module doc.
    #[test]
    fn frames_dropped_anywhere_leave_nothing_held_and_no_frame_waiting_for_a_free_slot(
        frames in proptest::collection::vec(frame(), 1..12),
        rate in any::<bool>(),
        change in proptest::option::weighted(0.3, (0u64..4_000, 1u16..4, any::<bool>())),
        start_ms in 0u64..8_000,
        grouping in 0u8..3,
        group_of in proptest::collection::vec(0usize..3, 12),
    ) {
        test_clock::reset();
        // With 32-bit ticks, from 5 s before a restart of the core's clock to 3 s after it, so
        // that frames wait, are dropped and give back across it.
        let restart = if cfg!(feature = "ticks-u32") { (1 << 31) - 5_000_000 } else { 0 };
        test_clock::advance(embassy_time::Duration::from_ticks(restart + start_ms * 1_000));
        let start = configured(SLOTS, rate);
        let link: Link = SharedDependency::new(start, Dependency::new(start, relent_embassy::now()).unwrap());
        let policy = policy();
        let running = Cell::new(0);
        let slots = change.map_or(SLOTS, |(_, slots, _)| slots.max(SLOTS));
        let left = Cell::new(frames.len());
        let changed = Cell::new(false);
        let stuck = Cell::new(0u32);
        // The frames started before the change (or at its millisecond) that have not ended.
        let before = Cell::new(0);
        // Which task each frame runs in: one each, all in one, or one of three.
        let mut groups: Vec<Vec<Boxed<'_>>> = Vec::new();
        for (seed, frame) in frames.iter().enumerate() {
            let old = usize::from(change.is_some_and(|(at_ms, ..)| frame.start_ms <= at_ms));
            before.set(before.get() + old);
            let (link, policy, running, left, before) = (&link, &policy, &running, &left, &before);
            let future: Boxed<'_> = Box::pin(async move {
                task(link, policy, frame.clone(), seed as u64, running, slots).await;
                left.set(left.get() - 1);
                before.set(before.get() - old);
            });
            let group = [seed, 0, group_of[seed]][usize::from(grouping)];
            groups.resize_with(groups.len().max(group + 1), Vec::new);
            groups[group].push(future);
        }
        let mut tasks: Vec<Boxed<'_>> =
            groups.into_iter().map(|group| Box::pin(join_all(group, true)) as Boxed<'_>).collect();
        if let Some((at_ms, slots, rate)) = change {
            let (link, changed) = (&link, &changed);
            tasks.push(Box::pin(async move {
                Timer::after_millis(at_ms).await;
                changed.set(true);
                link.reconfigure(configured(slots, rate)).unwrap();
            }));
        }
        // The watch: each millisecond, once every task woken at it has run; after a change, once
        // every frame started before it has ended.
        let (link_ref, left_ref, changed_ref, stuck_ref, before_ref) = (&link, &left, &changed, &stuck, &before);
        tasks.push(Box::pin(async move {
            while left_ref.get() > 0 {
                Timer::after_millis(1).await;
                for _ in 0..8 {
                    yield_now().await;
                }
                let watched = !changed_ref.get() || before_ref.get() == 0;
                if watched && waits_with_a_slot_free(link_ref) {
                    stuck_ref.set(stuck_ref.get() + 1);
                }
            }
        }));
        test_clock::run(join_all(tasks, false));
        prop_assert_eq!(stuck.get(), 0, "milliseconds in which a frame waited with a slot free");
        prop_assert_eq!(link.lock(|state, _| (state.in_flight(), state.bulkhead_waiting())), (0, 0));
        prop_assert_eq!(running.get(), 0);

        // Past every break (2 s), every reserved unit (1 s at most ahead), every airtime (which
        // counts for 4 s after its end) and the change.
        test_clock::advance(embassy_time::Duration::from_secs(10));
        let t0 = Clock::now();
        let sent = Cell::new(None);
        let mut rng: rand_xoshiro::Xoshiro256PlusPlus = rand_core::SeedableRng::seed_from_u64(99);
        let done = test_clock::run(link.execute(&policy, read(300), &mut rng, |_| {
            sent.set(Some(ms_since(t0)));
            async { Ok::<_, NoAck>(()) }
        }))
        .unwrap();
        prop_assert_eq!((sent.get(), done.completion.summary.dispatched), (Some(0), 1));
    }
}
