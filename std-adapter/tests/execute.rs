//! The adapter's mapping onto tokio: clock, timers, timeouts, cancellation, locks and logs. The
//! rules themselves are the core's and are tested there; these tests check that the adapter
//! carries them out exactly, on tokio's paused clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration as Std;

use relent_tokio::core::{
    CircuitState, Classify, Context, DependencyConfig, Disposition, DutyCycle, Jitter, Judged, Problem,
    ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tokio::{AttemptError, Dependency, Duration, Error, HZ};
use tokio::time::Instant;

mod common;
use common::{Unavailable, chain};

#[derive(Debug, Clone, PartialEq, Eq)]
enum PayrailError {
    Refused,
    Busy(u64),
    BadRequest,
}

impl Classify<HZ> for PayrailError {
    fn classify(&self) -> Verdict<HZ> {
        match self {
            Self::Refused => Verdict::Retryable,
            Self::Busy(s) => Verdict::RetryableAfter(Duration::from_secs(*s)),
            Self::BadRequest => Verdict::NotRetryable,
        }
    }
}

impl std::fmt::Display for PayrailError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for PayrailError {}

const fn valid<V: Copy>(r: Result<V, relent_tokio::core::ConfigError>) -> V {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{}", e.message()),
    }
}

/// Seed 000's checkout policy, without jitter so that delays are exact.
const CHECKOUT: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(Duration::from_secs(3))
        .build(),
);

fn payrail(config: DependencyConfig<HZ>) -> Dependency {
    Dependency::with_seed("payrail", config, 7).unwrap()
}

fn budgeted() -> DependencyConfig<HZ> {
    DependencyConfig::new(Duration::from_secs(10)).budget(valid(RetryBudget::ratio(10, 10)))
}

fn read(deadline: Std) -> Context<HZ> {
    Context::new(relent_tokio::ticks(deadline), ReplaySafety::replayable_read(Duration::from_secs(3600)))
}

/// (start of the attempt from t0, its timeout, whether its future was dropped before it ended)
type Log = Arc<Mutex<Vec<(Std, Std, bool)>>>;

/// Sets a flag when dropped: proves a timed-out attempt's future was cancelled.
struct DroppedFlag(Log, usize);

impl Drop for DroppedFlag {
    fn drop(&mut self) {
        self.0.lock().unwrap()[self.1].2 = true;
    }
}

async fn hang(log: Log, t0: Instant, info: relent_tokio::AttemptInfo) -> Result<(), PayrailError> {
    let index = {
        let mut log = log.lock().unwrap();
        log.push((t0.elapsed(), info.timeout(), false));
        log.len() - 1
    };
    let _flag = DroppedFlag(log, index);
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn seed_000_checkout_hanging_attempts_are_cut_at_their_timeouts_and_dropped() {
    let dep = payrail(budgeted());
    let log: Log = Arc::default();
    let t0 = Instant::now();
    let done = dep
        .execute_detailed(&CHECKOUT, read(Std::from_millis(9_900)), |info| hang(log.clone(), t0, info))
        .await
        .unwrap();
    let ms = |v: u64| Std::from_millis(v);
    assert_eq!(
        *log.lock().unwrap(),
        [(ms(0), ms(3_000), true), (ms(3_100), ms(3_000), true), (ms(6_300), ms(3_000), true)],
        "attempt starts, timeouts, and each hanging future dropped"
    );
    assert_eq!(t0.elapsed(), ms(9_300));
    assert_eq!(done.completion.problem, Some(Problem::AttemptsExhausted));
    assert_eq!(done.completion.last_failure, Some(AttemptError::TimedOut { after: Duration::from_secs(3) }));
    assert_eq!(done.completion.summary.waited, Duration::from_millis(300));
}

#[tokio::test(start_paused = true)]
async fn each_attempt_is_told_its_number_timeout_expiry_deadline_and_operation_on_tokios_clock() {
    let dep = payrail(budgeted());
    let t0 = Instant::now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let _ = dep
        .execute_detailed(&CHECKOUT, read(Std::from_millis(9_900)).id(5), |info| {
            let seen = seen.clone();
            async move {
                let at = Instant::now() - t0;
                let told = (info.number(), at, info.timeout(), info.expires() - t0, info.deadline() - t0);
                seen.lock().unwrap().push((told, info.operation().0, format!("{info:?}")));
                std::future::pending::<Result<(), PayrailError>>().await
            }
        })
        .await
        .unwrap();
    let ms = |v: u64| Std::from_millis(v);
    let seen = seen.lock().unwrap();
    let told: Vec<_> = seen.iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(
        told,
        [
            ((1, ms(0), ms(3_000), ms(3_000), ms(9_900)), 5),
            ((2, ms(3_100), ms(3_000), ms(6_100), ms(9_900)), 5),
            ((3, ms(6_300), ms(3_000), ms(9_300), ms(9_900)), 5),
        ],
        "(number, start, timeout, expiry and deadline from t0), operation"
    );
    // Debug shows what the methods give, not the ticks behind them.
    let first = &seen[0].2;
    assert!(first.starts_with("AttemptInfo { number: 1, timeout: 3s, expires: "), "{first}");
    assert!(first.ends_with(", operation: OperationId(5) }"), "{first}");
}

#[tokio::test(start_paused = true)]
async fn seed_000_checkout_the_third_attempt_gets_what_remains_of_the_deadline() {
    let dep = payrail(budgeted());
    let log: Log = Arc::default();
    let t0 = Instant::now();
    let _ = dep
        .execute_detailed(&CHECKOUT, read(Std::from_millis(7_500)), |info| hang(log.clone(), t0, info))
        .await;
    let ms = |v: u64| Std::from_millis(v);
    assert_eq!(
        *log.lock().unwrap(),
        [(ms(0), ms(3_000), true), (ms(3_100), ms(3_000), true), (ms(6_300), ms(1_200), true)]
    );
    assert_eq!(t0.elapsed(), ms(7_500), "the operation ends at its deadline, not later");
}

#[tokio::test(start_paused = true)]
async fn the_operation_starts_at_the_first_poll_of_its_future_not_at_the_call() {
    let dep = payrail(budgeted());
    let log: Log = Arc::default();
    let t0 = Instant::now();
    let pending =
        dep.execute_detailed(&CHECKOUT, read(Std::from_millis(7_500)), |info| hang(log.clone(), t0, info));
    // The future sits unpolled for 2 s, as a request might in a queue. Like any Rust future it does
    // nothing until polled: its deadline and its first attempt's timeout run from the first poll,
    // so the attempt gets its whole 3 s (started at the call, it would have had 1 s of its 3).
    tokio::time::sleep(Std::from_secs(2)).await;
    let done = pending.await.unwrap();
    let ms = |v: u64| Std::from_millis(v);
    assert_eq!(
        *log.lock().unwrap(),
        [(ms(2_000), ms(3_000), true), (ms(5_100), ms(3_000), true), (ms(8_300), ms(1_200), true)]
    );
    assert_eq!(t0.elapsed(), ms(9_500), "the deadline is 7.5 s from the first poll");
    assert_eq!(done.completion.problem, Some(Problem::AttemptsExhausted));
}

/// A policy brought from a gRPC service config (`backoffMultiplier: 1.6`) waits 1.6 times as long
/// before each retry on tokio's clock, whose timer ends a wait at a whole millisecond.
#[tokio::test(start_paused = true)]
async fn a_multiplier_of_1_6_spaces_the_attempts_by_its_growing_waits() {
    const GRPC: RetryPolicy<HZ> = valid(
        RetryPolicy::exponential(5, Duration::from_millis(100), Duration::from_secs(1))
            .multiplier_percent(160)
            .jitter(Jitter::None)
            .build(),
    );
    let dep = payrail(budgeted());
    let starts = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let done = dep
        .execute_detailed(&GRPC, read(Std::from_secs(10)), |info| {
            starts.lock().unwrap().push(t0.elapsed());
            async move { if info.number() < 5 { Err(PayrailError::Refused) } else { Ok("seat 12") } }
        })
        .await
        .unwrap();
    assert_eq!(done.value, Some("seat 12"));
    // Waits of 100, 160, 256 and 409.6 ms: tokio's timer ends the last at 926 ms.
    let ms = Std::from_millis;
    assert_eq!(*starts.lock().unwrap(), [ms(0), ms(100), ms(260), ms(516), ms(926)]);
    assert_eq!(done.completion.summary.waited, Duration::from_micros(925_600));
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_is_slept_exactly_and_the_value_is_returned() {
    let dep = payrail(budgeted());
    let starts = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let value = dep
        .execute(&CHECKOUT, read(Std::from_secs(10)), |info| {
            starts.lock().unwrap().push(t0.elapsed());
            async move {
                tokio::time::sleep(Std::from_millis(20)).await;
                if info.number() == 1 { Err(PayrailError::Busy(1)) } else { Ok("seat 12") }
            }
        })
        .await
        .unwrap();
    assert_eq!(value, "seat 12");
    assert_eq!(*starts.lock().unwrap(), [Std::ZERO, Std::from_millis(1_020)]);
}

#[tokio::test(start_paused = true)]
async fn a_duty_cycle_defers_a_costed_call_or_makes_it_wait_on_tokios_timer() {
    // At most 1 s of "airtime" (a metered resource: a satellite modem's airtime, GPU seconds) in
    // any 10 s; each call costs 400 ms.
    let config = budgeted().duty_cycle(DutyCycle::new(Duration::from_secs(1), Duration::from_secs(10)));
    let dep = payrail(config);
    let t0 = Instant::now();
    let costed = read(Std::from_secs(30)).airtime(Duration::from_millis(400));
    let starts = Mutex::new(Vec::new());
    let call = |_| {
        starts.lock().unwrap().push(t0.elapsed());
        async { Ok::<_, PayrailError>(()) }
    };
    for _ in 0..2 {
        let done = dep.execute_detailed(&CHECKOUT, costed, call).await.unwrap();
        assert_eq!(done.completion.disposition, Disposition::Succeeded);
    }
    // 800 ms used: a third 400 ms call fits only once the first stops counting, at 10.4 s (its
    // end plus the window). That is further than CHECKOUT's 2 s maximum delay: deferred, unsent.
    let done = dep.execute_detailed(&CHECKOUT, costed, call).await.unwrap();
    assert_eq!(
        (done.completion.disposition, done.completion.code()),
        (Disposition::Deferred, "duty_cycle_exceeded")
    );
    assert_eq!(done.completion.not_before.map(|t| t.as_ticks()), Some(10_400_000));
    assert_eq!(t0.elapsed(), Std::ZERO);
    // A policy that may wait 20 s waits on tokio's timer and calls at exactly 10.4 s.
    let patient = valid(
        RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(20))
            .jitter(Jitter::None)
            .attempt_timeout(Duration::from_secs(3))
            .build(),
    );
    let done = dep.execute_detailed(&patient, costed, call).await.unwrap();
    assert_eq!(done.completion.disposition, Disposition::Succeeded);
    assert_eq!(done.completion.summary.waited, Duration::from_millis(10_400));
    assert_eq!(*starts.lock().unwrap(), [Std::ZERO, Std::ZERO, Std::from_millis(10_400)]);
}

#[tokio::test(start_paused = true)]
async fn a_failure_that_is_not_retryable_comes_back_as_it_is_after_one_attempt() {
    let dep = payrail(budgeted());
    let calls = AtomicUsize::new(0);
    let err = dep
        .execute(&CHECKOUT, read(Std::from_secs(10)), |_| {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Err::<(), _>(PayrailError::BadRequest) }
        })
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!(err.code(), "");
    assert_eq!(err.to_string(), "payrail: failed after 1 attempt(s); last failure: BadRequest");
    assert_eq!(err.into_last_failure(), Some(PayrailError::BadRequest));
}

/// A client library's own error (here the socket's), which no one but its crate can implement
/// `Classify` for, goes in a `Judged` with the verdict the caller gives it, and comes back as it was.
#[tokio::test(start_paused = true)]
async fn a_client_librarys_own_error_is_retried_by_the_verdict_judged_on_it() {
    use std::io::ErrorKind::{ConnectionRefused, ConnectionReset};
    fn verdict(e: &std::io::Error) -> Verdict<HZ> {
        match e.kind() {
            ConnectionRefused => Verdict::Retryable,
            _ => Verdict::NotRetryable,
        }
    }
    let dep = payrail(budgeted());
    let kinds = Mutex::new(vec![ConnectionReset, ConnectionRefused]);
    let t0 = Instant::now();
    let err = dep
        .execute(&CHECKOUT, read(Std::from_secs(10)), |_| {
            let kind = kinds.lock().unwrap().pop().unwrap();
            async move { Err::<(), _>(Judged::by(std::io::Error::from(kind), verdict)) }
        })
        .await
        .unwrap_err();
    assert_eq!(t0.elapsed(), Std::from_millis(100), "refused, retried after 100 ms, then reset");
    assert_eq!(chain(&err), ["payrail: failed after 2 attempt(s); last failure: connection reset"]);
    let last = err.into_last_failure().unwrap();
    assert_eq!((last.error.kind(), last.verdict), (ConnectionReset, Verdict::NotRetryable));
}

#[tokio::test(start_paused = true)]
async fn a_wait_longer_than_the_policy_allows_is_deferred_and_the_message_says_how_long() {
    let dep = payrail(budgeted());
    let err = dep
        .execute(&CHECKOUT, read(Std::from_secs(60)), |_| async { Err::<(), _>(PayrailError::Busy(30)) })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry_after_exceeds_maximum_delay");
    assert_eq!(
        err.to_string(),
        "payrail: deferred (retry_after_exceeds_maximum_delay) after 1 attempt(s); the far side asked to wait 30s; \
         last failure: Busy(30)"
    );
}

#[tokio::test(start_paused = true)]
async fn an_error_chain_shows_each_message_once() {
    let dep = payrail(budgeted());
    let err = dep
        .execute(&CHECKOUT, read(Std::from_secs(10)), |_| async {
            Err::<(), _>(Unavailable(std::io::ErrorKind::ConnectionRefused.into()))
        })
        .await
        .unwrap_err();
    assert_eq!(
        chain(&err),
        ["payrail: failed after 1 attempt(s); last failure: upstream unavailable", "connection refused"]
    );
    let timed_out = dep
        .execute(&CHECKOUT.without_retries(), read(Std::from_secs(10)), |_| {
            std::future::pending::<Result<(), Unavailable>>()
        })
        .await
        .unwrap_err();
    assert_eq!(
        chain(&timed_out),
        ["payrail: failed (attempts_exhausted) after 1 attempt(s); last failure: attempt timed out after 3s"]
    );
}

#[tokio::test(start_paused = true)]
async fn an_unsafe_operation_with_a_retrying_policy_is_refused_before_anything_is_sent() {
    let dep = payrail(budgeted());
    let calls = AtomicUsize::new(0);
    let unsafe_op = Context::new(Duration::from_secs(10), ReplaySafety::Unsafe);
    let err = dep
        .execute(&CHECKOUT, unsafe_op, |_| {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Ok::<_, PayrailError>(()) }
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Start(_)));
    assert_eq!(err.code(), "unsafe_with_retries");
    assert_eq!(chain(&err)[1..], [] as [String; 0], "the message shows the start error, which has no cause");
    assert!(err.completion().is_none(), "an operation that never started has no completion");
    assert_eq!(err.into_last_failure(), None);
    assert_eq!(calls.load(Ordering::Relaxed), 0);
    // The same call with the policy's single-attempt form runs, once.
    let once = CHECKOUT.without_retries();
    let r = dep
        .execute(&once, unsafe_op, |_| {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Err::<(), _>(PayrailError::Refused) }
        })
        .await;
    assert_eq!(r.unwrap_err().code(), "attempts_exhausted");
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_execute_future_mid_attempt_gives_back_its_bulkhead_slot() {
    let dep = payrail(budgeted().bulkhead(1));
    let started = Arc::new(tokio::sync::Notify::new());
    let task = {
        let (dep, started) = (dep.clone(), started.clone());
        tokio::spawn(async move {
            dep.execute(&CHECKOUT, read(Std::from_secs(10)), |_| {
                started.notify_one();
                std::future::pending::<Result<(), PayrailError>>()
            })
            .await
        })
    };
    started.notified().await;
    assert_eq!(dep.inspect(|s, _, _| s.in_flight()), 1);
    task.abort();
    let _ = task.await;
    assert_eq!(dep.inspect(|s, _, _| s.in_flight()), 0, "the slot came back");
    // And the next operation gets it.
    let r = dep.execute(&CHECKOUT, read(Std::from_secs(10)), |_| async { Ok::<_, PayrailError>(1) }).await;
    assert_eq!(r.unwrap(), 1);
}

/// A "busy, retry in 60 s" starts the dependency's cooldown: the gauges say how long it has left,
/// on tokio's clock, and nothing once it has ended.
#[tokio::test(start_paused = true)]
async fn the_gauges_say_what_is_left_of_a_cooldown() {
    let dep = payrail(budgeted().cooldown(Duration::from_secs(120)));
    let once = CHECKOUT.without_retries();
    let _ = dep
        .execute(&once, read(Std::from_secs(10)), |_| async { Err::<(), _>(PayrailError::Busy(60)) })
        .await;
    let gauges = dep.gauges();
    assert_eq!(
        (gauges.cooldown_left, gauges.window.calls, gauges.window.failures),
        (Some(Std::from_secs(60)), 1, 1)
    );
    tokio::time::advance(Std::from_secs(45)).await;
    assert_eq!(dep.gauges().cooldown_left, Some(Std::from_secs(15)));
    tokio::time::advance(Std::from_secs(15)).await;
    // And the 10 s window has forgotten the failure.
    let gauges = dep.gauges();
    assert_eq!((gauges.cooldown_left, gauges.window.calls), (None, 0));
}

/// An operation `dep` refuses: its error, after checking that the operation was never called.
async fn refused_unsent(dep: &Dependency, policy: &RetryPolicy<HZ>) -> Error<PayrailError> {
    let calls = AtomicUsize::new(0);
    let err = dep
        .execute(policy, read(Std::from_secs(10)), |_| {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Ok::<_, PayrailError>(()) }
        })
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 0, "the operation was called");
    err
}

#[tokio::test(start_paused = true)]
async fn an_open_circuit_refuses_without_calling_the_operation() {
    let breaker = relent_tokio::core::BreakerConfig::consecutive_failures(1, Duration::from_secs(30));
    let dep = payrail(budgeted().breaker(breaker));
    let once = CHECKOUT.without_retries();
    let _ =
        dep.execute(&once, read(Std::from_secs(10)), |_| async { Err::<(), _>(PayrailError::Refused) }).await;
    let err = refused_unsent(&dep, &once).await;
    assert_eq!(chain(&err), ["payrail: rejected (circuit_open) after 0 attempt(s); try again in 30s"]);
    let gauges = dep.gauges();
    assert_eq!((gauges.circuit, gauges.break_left), (CircuitState::Open, Some(Std::from_secs(30))));
    assert_eq!((gauges.cooldown_left, gauges.throttle_ppm), (None, None));
    let completion = err.completion().unwrap();
    assert_eq!(
        (completion.disposition, completion.problem),
        (Disposition::Rejected, Some(Problem::CircuitOpen))
    );
}

/// The client throttle at K = 1: after two failures, the third call is refused with probability
/// 2/3 on top of the first two's 0 and 1/2, a whole call: refused without calling the operation,
/// with no instant to try again (the next may pass), and read out for a dashboard.
#[tokio::test(start_paused = true)]
async fn the_client_throttle_refuses_without_calling_the_operation_and_says_so() {
    let dep = payrail(budgeted().client_throttle(relent_tokio::core::ClientThrottle::new(1_000)));
    let once = CHECKOUT.without_retries();
    for _ in 0..2 {
        let _ = dep
            .execute(&once, read(Std::from_secs(10)), |_| async { Err::<(), _>(PayrailError::Refused) })
            .await;
    }
    let err = refused_unsent(&dep, &once).await;
    assert_eq!(err.code(), "client_throttled");
    assert_eq!(chain(&err), ["payrail: rejected (client_throttled) after 0 attempt(s)"]);
    // 3 requests, none accepted: 3/4 of the next would be refused.
    let gauges = dep.gauges();
    assert_eq!((gauges.window.throttled, gauges.throttle_ppm), (1, Some(750_000)));
    assert_eq!((gauges.window.calls, gauges.window.failures), (2, 2));
}

/// An adaptive limit on a bulkhead of 4: a success that took the limit's 250 ms halves it to 2
/// (the gauge says so), and with 2 calls in flight the next is refused unsent, `bulkhead_full`.
#[tokio::test(start_paused = true)]
async fn a_slow_call_lowers_the_adaptive_limit_and_the_bulkhead_refuses_beyond_it() {
    let limit = relent_tokio::core::AdaptiveLimit::new(Duration::from_millis(250));
    let dep = payrail(budgeted().bulkhead(4).adaptive_limit(limit));
    let once = CHECKOUT.without_retries();
    assert_eq!(dep.gauges().bulkhead_limit, Some(4));
    let slow = dep.execute(&once, read(Std::from_secs(10)), |_| async {
        tokio::time::sleep(Std::from_millis(250)).await;
        Ok::<_, PayrailError>(())
    });
    slow.await.unwrap();
    assert_eq!(dep.gauges().bulkhead_limit, Some(2));
    let started = Arc::new(tokio::sync::Notify::new());
    let mut held = Vec::new();
    for _ in 0..2 {
        let (dep, notify) = (dep.clone(), started.clone());
        held.push(tokio::spawn(async move {
            dep.execute(&CHECKOUT.without_retries(), read(Std::from_secs(10)), |_| async {
                notify.notify_one();
                std::future::pending::<Result<(), PayrailError>>().await
            })
            .await
        }));
        started.notified().await;
    }
    let gauges = dep.gauges();
    assert_eq!((gauges.in_flight, gauges.bulkhead_limit), (2, Some(2)));
    assert_eq!(refused_unsent(&dep, &once).await.code(), "bulkhead_full");
    for task in held {
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_on_a_multi_threaded_runtime_share_one_dependency() {
    let dep = payrail(budgeted().bulkhead(4));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for n in 0..400u32 {
        let (dep, peak) = (dep.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            let detailed = dep
                .execute_detailed(&CHECKOUT, read(Std::from_secs(10)), |info| {
                    let (dep, peak) = (dep.clone(), peak.clone());
                    async move {
                        peak.fetch_max(usize::from(dep.inspect(|s, _, _| s.in_flight())), Ordering::Relaxed);
                        tokio::task::yield_now().await;
                        if (n + u32::from(info.number())) % 5 == 0 {
                            Err(PayrailError::Refused)
                        } else {
                            Ok(())
                        }
                    }
                })
                .await
                .unwrap();
            (
                detailed.completion.disposition,
                detailed.completion.problem,
                detailed.completion.summary.dispatched,
            )
        }));
    }
    let mut dispatched = 0u32;
    let mut rejected = 0;
    for t in tasks {
        let (disposition, problem, n) = t.await.unwrap();
        dispatched += u32::from(n);
        if disposition == Disposition::Rejected {
            assert_eq!(problem, Some(Problem::BulkheadFull));
            rejected += 1;
        }
    }
    assert!(peak.load(Ordering::Relaxed) <= 4, "the bulkhead held");
    assert_eq!(dep.inspect(|s, _, _| s.in_flight()), 0, "no slot leaked");
    let counts = dep.inspect(|s, _, now| s.counts(now));
    assert_eq!(counts.calls, dispatched, "one set of counts, agreeing with every completion");
    // How many were rejected depends on how the scheduler overlaps the tasks; what must hold is above.
    assert!(dispatched > 0, "{dispatched} dispatched, {rejected} rejected");
}

#[tokio::test(start_paused = true)]
async fn operations_without_an_id_get_the_dependencys_next_one_and_a_given_id_is_kept() {
    let dep = payrail(budgeted());
    let mut ids = Vec::new();
    for context in [read(Std::from_secs(1)), read(Std::from_secs(1)).id(77), read(Std::from_secs(1))] {
        let ran = dep.execute_detailed(&CHECKOUT, context, |info| async move {
            Ok::<_, PayrailError>(info.operation())
        });
        let detailed = ran.await.unwrap();
        assert_eq!(
            detailed.value,
            Some(detailed.completion.operation),
            "the attempt is told its operation's id"
        );
        ids.push(detailed.completion.operation.0);
    }
    assert_eq!(ids, [1, 77, 2]);
}

/// `execute_detailed`'s answer turns into `execute`'s: the value, or an `Error` that names the
/// dependency given and keeps the completion.
#[tokio::test(start_paused = true)]
async fn a_detailed_answer_becomes_the_value_or_the_error_execute_would_give() {
    let dep = payrail(budgeted());
    let name: Arc<str> = Arc::from("ledger");
    let done = dep
        .execute_detailed(&CHECKOUT, read(Std::from_secs(10)), |info| async move {
            if info.number() == 1 { Err(PayrailError::Refused) } else { Ok(42) }
        })
        .await
        .unwrap();
    assert_eq!(done.into_result(name.clone()).unwrap(), 42);

    let done = dep
        .execute_detailed(&CHECKOUT, read(Std::from_secs(10)), |_| async {
            Err::<u8, _>(PayrailError::BadRequest)
        })
        .await
        .unwrap();
    let err = done.into_result(name).unwrap_err();
    assert_eq!(chain(&err), ["ledger: failed after 1 attempt(s); last failure: BadRequest"]);
    assert_eq!(err.completion().map(|c| c.disposition), Some(Disposition::Failed));
    assert_eq!(err.into_last_failure(), Some(PayrailError::BadRequest));
}

/// What a dependency tells about itself: its name, its configuration, and the time on its clock,
/// which is tokio's (paused here), in the core's ticks.
#[tokio::test(start_paused = true)]
async fn a_dependency_tells_its_name_configuration_and_time() {
    let dep = payrail(budgeted());
    assert_eq!(dep.name(), "payrail");
    assert_eq!(dep.config().window(), Duration::from_secs(10));
    let before = dep.now();
    tokio::time::advance(Std::from_millis(1_500)).await;
    assert_eq!(dep.now() - before, Duration::from_millis(1_500));
    assert_eq!(dep.inspect(|_, _, now| now), dep.now(), "inspect is given the same clock's time");
}

/// One slot, and a queue of four that waits at most `wait_ms`.
fn queued(wait_ms: u64) -> Dependency {
    payrail(budgeted().bulkhead(1).bulkhead_queue(4, Duration::from_millis(wait_ms)))
}

/// Runs one operation on `dep` from `delay` after t0 whose attempt takes `takes`, and says when
/// its attempt started (from t0), what it came to, and the time it waited.
async fn queued_call(
    dep: Dependency,
    t0: Instant,
    delay: Std,
    takes: Std,
) -> (Option<Std>, Option<Problem>, Std) {
    tokio::time::sleep(delay).await;
    let started = Mutex::new(None);
    let once = CHECKOUT.without_retries();
    let detailed = dep
        .execute_detailed(&once, read(Std::from_secs(10)), |_| {
            *started.lock().unwrap() = Some(t0.elapsed());
            async move {
                tokio::time::sleep(takes).await;
                Ok::<_, PayrailError>(())
            }
        })
        .await
        .unwrap();
    let waited = relent_tokio::std_duration(detailed.completion.summary.waited);
    (started.into_inner().unwrap(), detailed.completion.problem, waited)
}

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_s_queue_hands_each_freed_slot_to_the_operation_that_waited_longest_at_once() {
    let dep = queued(1_000);
    let t0 = Instant::now();
    let ms = Std::from_millis;
    let calls = [
        tokio::spawn(queued_call(dep.clone(), t0, ms(0), ms(100))),
        tokio::spawn(queued_call(dep.clone(), t0, ms(10), ms(100))),
        tokio::spawn(queued_call(dep.clone(), t0, ms(20), ms(50))),
    ];
    tokio::time::sleep(ms(30)).await;
    assert_eq!(dep.inspect(|s, _, _| (s.in_flight(), s.bulkhead_waiting())), (1, 2));
    let mut ended = Vec::new();
    for call in calls {
        ended.push(call.await.unwrap());
    }
    // Each freed slot went out the instant it was freed, in the order the calls arrived.
    assert_eq!(
        ended,
        [(Some(ms(0)), None, ms(0)), (Some(ms(100)), None, ms(90)), (Some(ms(200)), None, ms(180)),]
    );
    assert_eq!(dep.inspect(|s, _, _| (s.in_flight(), s.bulkhead_waiting())), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_call_that_waits_its_whole_time_in_the_queue_is_refused_with_bulkhead_full_unsent() {
    let dep = queued(50);
    let t0 = Instant::now();
    let ms = Std::from_millis;
    let holder = tokio::spawn(queued_call(dep.clone(), t0, ms(0), ms(500)));
    let (started, code, waited) = queued_call(dep.clone(), t0, ms(10), ms(1)).await;
    assert_eq!((started, code, waited), (None, Some(Problem::BulkheadFull), ms(50)));
    assert_eq!(t0.elapsed(), ms(60), "refused exactly at the end of its wait");
    assert_eq!(holder.await.unwrap(), (Some(ms(0)), None, ms(0)));
    assert_eq!(dep.inspect(|s, _, _| s.bulkhead_waiting()), 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_call_that_waits_in_the_queue_gives_its_place_back_and_the_next_one_gets_the_slot() {
    let dep = queued(1_000);
    let t0 = Instant::now();
    let ms = Std::from_millis;
    let holder = tokio::spawn(queued_call(dep.clone(), t0, ms(0), ms(100)));
    let dropped = tokio::spawn(queued_call(dep.clone(), t0, ms(10), ms(1)));
    let next = tokio::spawn(queued_call(dep.clone(), t0, ms(20), ms(1)));
    tokio::time::sleep(ms(30)).await;
    assert_eq!(dep.inspect(|s, _, _| s.bulkhead_waiting()), 2);
    dropped.abort();
    assert!(dropped.await.unwrap_err().is_cancelled());
    assert_eq!(dep.inspect(|s, _, _| s.bulkhead_waiting()), 1, "its place came back");
    assert_eq!(holder.await.unwrap().0, Some(ms(0)));
    assert_eq!(next.await.unwrap(), (Some(ms(100)), None, ms(80)));
}

/// One call every 10 s, and a call may wait up to 30 s for its unit.
fn one_call_every_10_s() -> Dependency {
    let limit =
        relent_tokio::core::RateLimit::new(1, Duration::from_secs(10)).max_wait(Duration::from_secs(30));
    payrail(budgeted().rate_limit(limit))
}

/// A call over the rate limit waits on tokio's clock for the instant its unit falls due, and goes
/// then; the wait counts in its completion.
#[tokio::test(start_paused = true)]
async fn a_call_over_the_rate_limit_waits_for_its_unit_and_goes_the_instant_it_falls_due() {
    let dep = one_call_every_10_s();
    let t0 = Instant::now();
    let ms = Std::from_millis;
    let first = tokio::spawn(queued_call(dep.clone(), t0, ms(0), ms(1)));
    let second = tokio::spawn(queued_call(dep.clone(), t0, ms(1_000), ms(1)));
    assert_eq!(first.await.unwrap(), (Some(ms(0)), None, ms(0)));
    assert_eq!(second.await.unwrap(), (Some(ms(10_000)), None, ms(9_000)));
}

/// A call dropped while it waits for its rate unit gives the unit back: the next call takes it
/// when it falls due, at 10 s, rather than the one after it at 20 s, past its 10 s deadline.
#[tokio::test(start_paused = true)]
async fn dropping_a_call_that_waits_for_its_rate_unit_gives_the_unit_back_to_the_next() {
    let dep = one_call_every_10_s();
    let t0 = Instant::now();
    let ms = Std::from_millis;
    let first = tokio::spawn(queued_call(dep.clone(), t0, ms(0), ms(1)));
    let dropped = tokio::spawn(queued_call(dep.clone(), t0, ms(1_000), ms(1)));
    let next = tokio::spawn(queued_call(dep.clone(), t0, ms(6_000), ms(1)));
    tokio::time::sleep(ms(5_000)).await;
    dropped.abort();
    assert!(dropped.await.unwrap_err().is_cancelled());
    assert_eq!(first.await.unwrap().0, Some(ms(0)));
    assert_eq!(next.await.unwrap(), (Some(ms(10_000)), None, ms(4_000)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_through_a_queued_bulkhead_on_a_multi_threaded_runtime_lose_no_slot_and_no_place() {
    // Each attempt holds its slot for a millisecond on the real clock; a queue of 400 places that
    // waits up to 10 s lets every call through, two at a time.
    let dep = payrail(budgeted().bulkhead(2).bulkhead_queue(400, Duration::from_secs(10)));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..200 {
        let (dep, peak) = (dep.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            let once = CHECKOUT.without_retries();
            dep.execute(&once, read(Std::from_secs(20)), |_| {
                let (dep, peak) = (dep.clone(), peak.clone());
                async move {
                    peak.fetch_max(usize::from(dep.inspect(|s, _, _| s.in_flight())), Ordering::Relaxed);
                    tokio::time::sleep(Std::from_millis(1)).await;
                    Ok::<_, PayrailError>(())
                }
            })
            .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert!(peak.load(Ordering::Relaxed) <= 2, "the bulkhead held");
    assert_eq!(dep.inspect(|s, _, _| (s.in_flight(), s.bulkhead_waiting())), (0, 0));
}
