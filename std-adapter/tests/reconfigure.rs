//! `Dependency::reconfigure` on tokio: operations running go on under the configuration they
//! started with while new ones run under the new one; a queue the new configuration adds wakes its
//! waiters as a queue configured from the start does; a refused configuration changes nothing; and
//! reconfigurations racing many operations on a multi-threaded runtime lose no slot.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration as Std;

use relent_tokio::core::{
    Classify, Context, DependencyConfig, Jitter, ReplaySafety, RetryBudget, RetryPolicy, StartError, Verdict,
};
use relent_tokio::{Dependency, Duration, Error, HZ};
use tokio::time::Instant;

#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl std::error::Error for Refused {}

impl Classify<HZ> for Refused {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

/// Three attempts, 100 ms apart.
fn three() -> RetryPolicy<HZ> {
    RetryPolicy::constant(3, Duration::from_millis(100)).jitter(Jitter::None).build().unwrap()
}

fn read() -> Context<HZ> {
    Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(60)))
}

const WINDOW: Duration = Duration::from_secs(10);

/// An operation whose first attempt failed waits for its retry when the budget is taken away: it
/// retries all the same, under the configuration it started with, while an operation started after
/// the change is refused for the policy it cannot run without a budget.
#[tokio::test(start_paused = true)]
async fn an_operation_running_goes_on_under_its_configuration_and_the_next_starts_under_the_new() {
    let with_budget = DependencyConfig::new(WINDOW).budget(RetryBudget::ratio(100, 10).unwrap());
    let dep = Dependency::with_seed("payrail", with_budget, 7).unwrap();
    let policy = three();
    let calls = AtomicU32::new(0);
    let running = dep.execute(&policy, read(), |_| async {
        // Fails once, then succeeds.
        if calls.fetch_add(1, Ordering::Relaxed) == 0 { Err(Refused) } else { Ok("quote") }
    });
    let change = async {
        tokio::time::sleep(Std::from_millis(50)).await;
        dep.reconfigure(DependencyConfig::new(WINDOW)).unwrap();
    };
    let (answer, ()) = tokio::join!(running, change);
    assert_eq!(answer.unwrap(), "quote");
    assert_eq!(calls.load(Ordering::Relaxed), 2, "retried under the budget it started with");
    let refused = dep.execute(&policy, read(), |_| async { Ok::<_, Refused>("quote") }).await;
    let Err(Error::Start(StartError::RetryWithoutBudget { .. })) = refused else {
        panic!("a policy of 3 attempts ran without a budget: {refused:?}")
    };
    assert_eq!(dep.config(), DependencyConfig::new(WINDOW));
}

/// A bulkhead of one slot, given a queue while it runs: the operation that waits in it is woken as
/// the slot frees, at 100 ms, not at the end of its wait.
#[tokio::test(start_paused = true)]
async fn a_queue_added_while_running_wakes_its_waiter_as_the_slot_frees() {
    let one = DependencyConfig::new(WINDOW).bulkhead(1);
    let dep = Dependency::with_seed("payrail", one, 7).unwrap();
    dep.reconfigure(one.bulkhead_queue(1, Duration::from_secs(2))).unwrap();
    let once = RetryPolicy::<HZ>::single_attempt().build().unwrap();
    let start = Instant::now();
    let holder = dep.execute(&once, read(), |_| async {
        tokio::time::sleep(Std::from_millis(100)).await;
        Ok::<_, Refused>(start.elapsed())
    });
    let waiter = async {
        tokio::time::sleep(Std::from_millis(10)).await;
        dep.execute(&once, read(), |_| async { Ok::<_, Refused>(start.elapsed()) }).await
    };
    let (held, waited) = tokio::join!(holder, waiter);
    assert_eq!(held.unwrap(), Std::from_millis(100));
    assert_eq!(waited.unwrap(), Std::from_millis(100), "sent as the slot freed");
    assert_eq!(dep.gauges().in_flight, 0);
}

/// A configuration the dependency could not run with is refused with its code, and the dependency
/// runs on with the one it had.
#[tokio::test(start_paused = true)]
async fn a_refused_configuration_changes_nothing() {
    let config = DependencyConfig::new(WINDOW).budget(RetryBudget::ratio(10, 2).unwrap()).bulkhead(4);
    let dep = Dependency::with_seed("payrail", config, 7).unwrap();
    let refused = dep.reconfigure(config.bulkhead(0)).unwrap_err();
    assert_eq!(refused.as_str(), "zero_bulkhead");
    assert_eq!(dep.config(), config);
    assert_eq!(dep.gauges().bulkhead_limit, Some(4));
}

/// Four threads run operations against one dependency with a bulkhead and a queue while another
/// changes its configuration back and forth, and its bulkhead's size with it: every operation
/// ends, and no slot or place in the queue is left taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reconfigurations_racing_operations_on_four_threads_leave_no_slot_taken() {
    let small = DependencyConfig::new(WINDOW)
        .budget(RetryBudget::ratio(50, 100).unwrap())
        .bulkhead(2)
        .bulkhead_queue(8, Duration::from_millis(200));
    let large = small.bulkhead(16).budget(RetryBudget::token_bucket(100, 100, WINDOW, WINDOW).unwrap());
    let dep = Dependency::new("payrail", small).unwrap();
    let ended = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for task in 0..8u32 {
        let (dep, ended) = (dep.clone(), ended.clone());
        tasks.push(tokio::spawn(async move {
            let policy = RetryPolicy::constant(2, Duration::from_millis(1))
                .attempt_timeout(Duration::from_secs(1))
                .build()
                .unwrap();
            for call in 0..200u32 {
                let _ = dep
                    .execute(&policy, read(), |info| async move {
                        tokio::task::yield_now().await;
                        if (call + task + u32::from(info.number())) % 3 == 0 { Err(Refused) } else { Ok(()) }
                    })
                    .await;
                ended.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let changer = {
        let dep = dep.clone();
        tokio::spawn(async move {
            for i in 0..400 {
                dep.reconfigure(if i % 2 == 0 { large } else { small }).unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    for task in tasks {
        task.await.unwrap();
    }
    changer.await.unwrap();
    assert_eq!(ended.load(Ordering::Relaxed), 1_600);
    let gauges = dep.gauges();
    assert_eq!((gauges.in_flight, gauges.waiting_for_slot), (0, 0));
}

/// A bulkhead of one slot with a queue, given a second slot while an operation waits in its queue:
/// the waiter started under one slot and goes under it, as the first slot frees at 1 s (it is woken
/// for the new slot, finds no room under its own configuration, and waits on, once: no wake-up
/// loop), while an operation started after the change goes at once in the second slot.
#[tokio::test(start_paused = true)]
async fn a_waiter_started_under_fewer_slots_waits_for_its_own_while_a_newcomer_takes_the_new_one() {
    let one = DependencyConfig::new(WINDOW).bulkhead(1).bulkhead_queue(2, Duration::from_secs(2));
    let dep = Dependency::with_seed("payrail", one, 7).unwrap();
    let once = RetryPolicy::<HZ>::single_attempt().build().unwrap();
    let start = Instant::now();
    let attempts = AtomicU32::new(0);
    let send = |hold_ms: u64| {
        let (dep, once, attempts) = (&dep, &once, &attempts);
        async move {
            dep.execute(once, read(), |_| async move {
                attempts.fetch_add(1, Ordering::Relaxed);
                let sent = start.elapsed();
                tokio::time::sleep(Std::from_millis(hold_ms)).await;
                Ok::<_, Refused>(sent)
            })
            .await
        }
    };
    let holder = send(1_000);
    let waiter = async {
        tokio::time::sleep(Std::from_millis(10)).await;
        send(10).await
    };
    let newcomer = async {
        tokio::time::sleep(Std::from_millis(300)).await;
        dep.reconfigure(one.bulkhead(2)).unwrap();
        send(10).await
    };
    let (held, waited, new) = tokio::join!(holder, waiter, newcomer);
    assert_eq!(held.unwrap(), Std::ZERO);
    assert_eq!(waited.unwrap(), Std::from_millis(1_000), "sent in the slot it waited for");
    assert_eq!(new.unwrap(), Std::from_millis(300), "sent at once in the new slot");
    assert_eq!(attempts.load(Ordering::Relaxed), 3);
    assert_eq!((dep.gauges().in_flight, dep.gauges().waiting_for_slot), (0, 0));
}

/// Two operations waiting under one slot when a second is given, and none started after: each is
/// woken for the free slot at most once per step that frees one, finds none under its own
/// configuration, and waits on; they go one after the other as the slot they started under frees,
/// at 1 s and at 1.5 s, and the runtime's clock (paused, it moves only when every task waits)
/// gets there: woken in a loop, they would never let it move.
#[tokio::test(start_paused = true)]
async fn two_waiters_started_under_fewer_slots_do_not_wake_each_other_in_a_loop() {
    let one = DependencyConfig::new(WINDOW).bulkhead(1).bulkhead_queue(2, Duration::from_secs(5));
    let dep = Dependency::with_seed("payrail", one, 7).unwrap();
    let once = RetryPolicy::<HZ>::single_attempt().build().unwrap();
    let start = Instant::now();
    let send = |after_ms: u64, hold_ms: u64| {
        let (dep, once) = (&dep, &once);
        async move {
            tokio::time::sleep(Std::from_millis(after_ms)).await;
            dep.execute(once, read(), |_| async move {
                let sent = start.elapsed();
                tokio::time::sleep(Std::from_millis(hold_ms)).await;
                Ok::<_, Refused>(sent)
            })
            .await
        }
    };
    let change = async {
        tokio::time::sleep(Std::from_millis(300)).await;
        dep.reconfigure(one.bulkhead(2)).unwrap();
    };
    let (held, first, second, ()) = tokio::join!(send(0, 1_000), send(10, 500), send(20, 500), change);
    assert_eq!(held.unwrap(), Std::ZERO);
    assert_eq!(first.unwrap(), Std::from_millis(1_000));
    assert_eq!(second.unwrap(), Std::from_millis(1_500));
    assert_eq!((dep.gauges().in_flight, dep.gauges().waiting_for_slot), (0, 0));
}

/// A change that frees a slot for the operations waiting wakes them, as a step that frees one does:
/// an adaptive limit learnt down to one slot, raised to a new floor of two while an operation
/// waits behind the one slot's holder, lets it go at once, at 300 ms, not when the holder ends.
#[tokio::test(start_paused = true)]
async fn a_change_that_raises_the_limit_to_a_new_floor_wakes_the_operation_waiting() {
    use relent_tokio::core::AdaptiveLimit;
    let learning = DependencyConfig::new(WINDOW)
        .bulkhead(4)
        .bulkhead_queue(2, Duration::from_secs(2))
        .adaptive_limit(AdaptiveLimit::new(Duration::from_millis(100)));
    let dep = Dependency::with_seed("payrail", learning, 7).unwrap();
    let once = RetryPolicy::<HZ>::single_attempt().build().unwrap();
    let start = Instant::now();
    let send = |hold_ms: u64| {
        let (dep, once) = (&dep, &once);
        async move {
            dep.execute(once, read(), |_| async move {
                let sent = start.elapsed();
                tokio::time::sleep(Std::from_millis(hold_ms)).await;
                Ok::<_, Refused>(sent)
            })
            .await
        }
    };
    // Two slow attempts, one after the other: 4 slots halve to 2, then to 1.
    send(150).await.unwrap();
    send(150).await.unwrap();
    assert_eq!(dep.gauges().bulkhead_limit, Some(1));
    let t0 = start.elapsed();
    let waiter = async {
        tokio::time::sleep(Std::from_millis(10)).await;
        send(10).await
    };
    let change = async {
        tokio::time::sleep(Std::from_millis(300)).await;
        dep.reconfigure(learning.adaptive_limit(AdaptiveLimit::new(Duration::from_millis(100)).min_slots(2)))
            .unwrap();
    };
    let (held, waited, ()) = tokio::join!(send(1_000), waiter, change);
    assert_eq!(held.unwrap() - t0, Std::ZERO);
    assert_eq!(waited.unwrap() - t0, Std::from_millis(300), "woken by the change");
    assert_eq!((dep.gauges().in_flight, dep.gauges().waiting_for_slot), (0, 0));
}
