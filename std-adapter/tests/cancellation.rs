//! Calls dropped anywhere, against every protection that holds something for a call: a bulkhead
//! with a queue, a breaker's half-open probes, a rate limit's reserved units, hedges.
//!
//! The single drops are tested one by one in `execute.rs` and `hedge.rs` (mid-attempt, in the
//! queue, a hedged call). This is the question a server asks after a day of clients hanging up at
//! every instant: is anything held by a call that is gone, or is a call left waiting for a slot that
//! is free? On tokio's paused clock, any number of calls, each with its own answers and dropped at
//! any instant or not at all:
//! - at every millisecond, once the tasks woken at it have run, no call waits in the queue while
//!   a slot is free for it, and no more attempts run than the bulkhead allows;
//! - every call that was not dropped ends by its deadline;
//! - with the dependency reconfigured (another bulkhead, a rate limit added or left out) at any
//!   instant as they run, as an operator may: the same, but that a call started before the change
//!   may wait for a slot the new configuration adds (it is for the calls started after it), so
//!   the watch for waiting calls pauses at the change until every call started before it has
//!   ended;
//! - once all have ended, nothing is held (no slot, no place in the queue), and once every break and
//!   every reserved rate unit has passed, a new call's first attempt goes at once and succeeds.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration as Std;

use proptest::prelude::*;
use relent_tokio::core::{
    BreakerConfig, Classify, Context, DependencyConfig, Jitter, RateLimit, ReplaySafety, RetryBudget,
    RetryPolicy, Verdict,
};
use relent_tokio::{AttemptInfo, Dependency, Duration, HZ};
use tokio::time::{Instant, sleep};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Busy;

impl Classify<HZ> for Busy {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("busy")
    }
}

impl std::error::Error for Busy {}

/// How many attempts may run at once.
const SLOTS: u16 = 2;
/// Every call's deadline.
const DEADLINE: Std = Std::from_secs(5);

/// A budget, a breaker with two probes, `slots` slots with a queue of 3, and 5 calls a second if
/// `rate`.
fn config(slots: u16, rate: bool) -> DependencyConfig<HZ> {
    let budget = RetryBudget::ratio(50, 5).unwrap();
    let breaker = BreakerConfig::consecutive_failures(3, Duration::from_secs(2)).probes(2);
    let config = DependencyConfig::new(Duration::from_secs(10))
        .budget(budget)
        .breaker(breaker)
        .bulkhead(slots)
        .bulkhead_queue(3, Duration::from_millis(500));
    let limit = RateLimit::new(5, Duration::from_secs(1)).max_wait(Duration::from_secs(1));
    if rate { config.rate_limit(limit) } else { config }
}

fn policy() -> RetryPolicy<HZ> {
    RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1))
        .jitter(Jitter::Full)
        .attempt_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

fn read() -> Context<HZ> {
    Context::new(Duration::from_secs(5), ReplaySafety::replayable_read(Duration::from_secs(60)))
}

/// What an attempt does: answers after some milliseconds, or hangs until its timeout drops it.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Ok(u64),
    Busy(u64),
    Hang,
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![(0u64..400).prop_map(Answer::Ok), (0u64..400).prop_map(Answer::Busy), Just(Answer::Hang),]
}

/// One client's call: when it starts, whether it is hedged, each attempt's answer (the last
/// repeated), and when the client drops it, counted from its start.
#[derive(Debug, Clone)]
struct Call {
    start_ms: u64,
    hedged: Option<u64>,
    answers: Vec<Answer>,
    dropped_after_ms: Option<u64>,
}

fn call() -> impl Strategy<Value = Call> {
    (
        0u64..3_000,
        proptest::option::weighted(0.3, 20u64..300),
        proptest::collection::vec(answer(), 1..4),
        proptest::option::weighted(0.6, 0u64..3_000),
    )
        .prop_map(|(start_ms, hedged, answers, dropped_after_ms)| Call {
            start_ms,
            hedged,
            answers,
            dropped_after_ms,
        })
}

/// Counts the attempts running, each from its start until its future is dropped or ends.
struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One attempt of `call`: checks, as it starts, that the bulkhead holds (`slots`: the most any
/// configuration allows).
async fn attempt(
    call: Arc<Call>,
    info: AttemptInfo,
    running: Arc<AtomicUsize>,
    slots: u16,
) -> Result<u8, Busy> {
    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
    let _running = Running(running);
    assert!(now <= usize::from(slots), "{now} attempts run at once, with {slots} slots");
    let index = usize::from(info.number() - 1).min(call.answers.len() - 1);
    match call.answers[index] {
        Answer::Ok(ms) => {
            sleep(Std::from_millis(ms)).await;
            Ok(info.number())
        }
        Answer::Busy(ms) => {
            sleep(Std::from_millis(ms)).await;
            Err(Busy)
        }
        Answer::Hang => std::future::pending().await,
    }
}

/// Runs `call` from its start to its end or its drop; whether it ended (was not dropped first).
async fn client(
    dep: Dependency,
    policy: RetryPolicy<HZ>,
    call: Call,
    running: Arc<AtomicUsize>,
    slots: u16,
) -> bool {
    sleep(Std::from_millis(call.start_ms)).await;
    let started = Instant::now();
    let call = Arc::new(call);
    let op = |info| attempt(call.clone(), info, running.clone(), slots);
    let run = async {
        match call.hedged {
            Some(after) => drop(dep.execute_hedged(&policy, read(), Std::from_millis(after), op).await),
            None => drop(dep.execute(&policy, read(), op).await),
        }
    };
    let ended = match call.dropped_after_ms {
        Some(ms) => tokio::time::timeout(Std::from_millis(ms), run).await.is_ok(),
        None => {
            run.await;
            true
        }
    };
    if ended {
        // Its deadline, and tokio's timer firing on the next whole millisecond.
        let took = started.elapsed();
        assert!(took <= DEADLINE + Std::from_millis(1), "a call ended {took:?} after it started");
    }
    ended
}

/// Whether a call waits in the queue while a slot is free for it.
fn waits_with_a_slot_free(dep: &Dependency) -> bool {
    dep.inspect(|state, config, _| state.bulkhead_waiting() > 0 && state.slot_for_waiting(config))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").map_or(128, |v| v.parse().expect("PROPTEST_CASES: a whole number")),
        ..ProptestConfig::default()
    })]

    /// See the module doc.
    #[test]
    fn calls_dropped_anywhere_leave_nothing_held_and_no_call_waiting_for_a_free_slot(
        calls in proptest::collection::vec(call(), 1..12),
        rate in any::<bool>(),
        change in proptest::option::weighted(0.3, (0u64..4_000, 1u16..4, any::<bool>())),
    ) {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        runtime.block_on(async {
            let dep = Dependency::with_seed("ledger", config(SLOTS, rate), 11).unwrap();
            let policy = policy();
            let running = Arc::new(AtomicUsize::new(0));
            let slots = change.map_or(SLOTS, |(_, slots, _)| slots.max(SLOTS));
            // The calls started before the change (or at its millisecond) that have not ended.
            let before = Arc::new(AtomicUsize::new(0));
            let tasks: Vec<_> = calls
                .iter()
                .map(|call| {
                    let old = change.is_some_and(|(at_ms, ..)| call.start_ms <= at_ms);
                    before.fetch_add(usize::from(old), Ordering::SeqCst);
                    let (before, run) = (before.clone(), client(dep.clone(), policy, call.clone(), running.clone(), slots));
                    tokio::spawn(async move {
                        run.await;
                        before.fetch_sub(usize::from(old), Ordering::SeqCst);
                    })
                })
                .collect();
            let changed = Arc::new(AtomicBool::new(false));
            if let Some((at_ms, slots, rate)) = change {
                let (dep, changed) = (dep.clone(), changed.clone());
                tokio::spawn(async move {
                    sleep(Std::from_millis(at_ms)).await;
                    changed.store(true, Ordering::SeqCst);
                    dep.reconfigure(config(slots, rate)).unwrap();
                });
            }
            // The watch: each millisecond, once every task woken at it has run; after a change,
            // once every call started before it has ended.
            let done = Arc::new(AtomicBool::new(false));
            let watch = {
                let (dep, done) = (dep.clone(), done.clone());
                tokio::spawn(async move {
                    let mut stuck = Vec::new();
                    while !done.load(Ordering::SeqCst) {
                        sleep(Std::from_millis(1)).await;
                        for _ in 0..8 {
                            tokio::task::yield_now().await;
                        }
                        // Read with the state, in the same poll: a change made at this millisecond
                        // is either seen here or made after.
                        let watched = !changed.load(Ordering::SeqCst) || before.load(Ordering::SeqCst) == 0;
                        if watched && waits_with_a_slot_free(&dep) {
                            stuck.push(dep.gauges());
                        }
                    }
                    stuck
                })
            };
            for task in tasks {
                task.await.unwrap();
            }
            done.store(true, Ordering::SeqCst);
            let stuck = watch.await.unwrap();
            assert!(stuck.is_empty(), "calls waited with a slot free: {stuck:?}");

            let gauges = dep.gauges();
            assert_eq!((gauges.in_flight, gauges.waiting_for_slot), (0, 0), "{gauges:?}");
            assert_eq!(running.load(Ordering::SeqCst), 0);
            // Past every break (2 s), every reserved unit (1 s at most ahead) and the change.
            sleep(Std::from_secs(10)).await;
            let t0 = Instant::now();
            let first = dep.execute(&policy, read(), |info| async move { Ok::<_, Busy>(info.number()) }).await;
            assert_eq!((first.unwrap(), t0.elapsed()), (1, Std::ZERO), "{:?}", dep.gauges());
        });
    }
}
