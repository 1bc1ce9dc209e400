//! The generic tower layer (`PipelineLayer`) over a scripted service of a store's own requests, on
//! tokio's paused clock: each attempt at its exact instant, what each request is stated and how
//! often it is cloned, and what the caller gets back.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration as Std;

use relent_tokio::core::{
    BreakerConfig, Criticality, DependencyConfig, Disposition, Jitter, Problem, ReplaySafety, RetryBudget,
    RetryPolicy, Verdict,
};
use relent_tokio::{AttemptError, Dependency, Duration, Error, HZ, PipelineLayer, Plan};
use tower::{Layer, Service, ServiceExt};

mod common;
use common::{Unavailable, chain};

/// A store's request. Clones are counted: each attempt that a retry may follow sends one.
#[derive(Debug)]
enum Query {
    Get(&'static str),
    Put(&'static str),
    /// A read that must be over by this instant (the call it serves ends then).
    GetBy(&'static str, tokio::time::Instant),
}

static CLONES: AtomicU32 = AtomicU32::new(0);

impl Clone for Query {
    fn clone(&self) -> Self {
        CLONES.fetch_add(1, Ordering::SeqCst);
        match self {
            Self::Get(k) => Self::Get(k),
            Self::Put(k) => Self::Put(k),
            Self::GetBy(k, by) => Self::GetBy(k, *by),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreError {
    Busy,
    Throttled { retry_in_ms: u64 },
    NotFound,
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Busy => f.write_str("store busy"),
            Self::Throttled { retry_in_ms } => write!(f, "store throttled for {retry_in_ms} ms"),
            Self::NotFound => f.write_str("no such key"),
        }
    }
}

impl std::error::Error for StoreError {}

/// Reads may be repeated for a minute; writes may not.
#[derive(Debug, Clone)]
struct Store;

impl Plan<Query, StoreError> for Store {
    fn safety(&self, query: &Query) -> ReplaySafety<HZ> {
        match query {
            Query::Get(_) | Query::GetBy(..) => ReplaySafety::replayable_read(Duration::from_secs(60)),
            Query::Put(_) => ReplaySafety::Unsafe,
        }
    }
    fn classify(&self, error: &StoreError) -> Verdict<HZ> {
        match error {
            StoreError::Busy => Verdict::Retryable,
            StoreError::Throttled { retry_in_ms } => {
                Verdict::RetryableAfter(Duration::from_millis(*retry_in_ms))
            }
            StoreError::NotFound => Verdict::NotRetryable,
        }
    }
    fn deadline(&self, query: &Query) -> Option<tokio::time::Instant> {
        match query {
            Query::GetBy(_, by) => Some(*by),
            _ => None,
        }
    }
    /// A read can be shed; a write must go (what a reserve keeps room for: only tested where a
    /// dependency keeps one).
    fn criticality(&self, query: &Query) -> Criticality {
        match query {
            Query::Put(_) => Criticality::Critical,
            Query::Get(_) | Query::GetBy(..) => Criticality::Sheddable,
        }
    }
}

/// What the scripted store answers, call by call (the last answer repeats); `None` hangs.
#[derive(Clone)]
struct Scripted {
    answers: Arc<Vec<Option<Result<&'static str, StoreError>>>>,
    /// When each call arrived, since the start.
    seen: Arc<Mutex<Vec<Std>>>,
    t0: tokio::time::Instant,
}

impl Scripted {
    fn new(answers: &[Option<Result<&'static str, StoreError>>]) -> Self {
        Self { answers: Arc::new(answers.to_vec()), seen: Arc::default(), t0: tokio::time::Instant::now() }
    }
    fn calls(&self) -> Vec<Std> {
        self.seen.lock().unwrap().clone()
    }
    fn service(
        &self,
    ) -> impl Service<Query, Response = &'static str, Error = StoreError, Future: Send> + Clone + Send + 'static
    {
        let this = self.clone();
        tower::service_fn(move |_query: Query| {
            let this = this.clone();
            async move {
                let n = {
                    let mut seen = this.seen.lock().unwrap();
                    seen.push(this.t0.elapsed());
                    seen.len() - 1
                };
                match this.answers[n.min(this.answers.len() - 1)] {
                    Some(answer) => answer,
                    None => std::future::pending().await,
                }
            }
        })
    }
}

const POLICY: RetryPolicy<HZ> =
    match RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(Duration::from_secs(1))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };

fn budgeted() -> DependencyConfig<HZ> {
    DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 20).unwrap())
}

fn layer(config: DependencyConfig<HZ>) -> PipelineLayer<Store> {
    let store = Dependency::with_seed("store", config, 1).unwrap();
    PipelineLayer::new(store, POLICY, Std::from_secs(10), Store)
}

fn ms(v: u64) -> Std {
    Std::from_millis(v)
}

/// The clones made since the last call (the tests of this file take turns: see `ONE_AT_A_TIME`).
fn clones() -> u32 {
    CLONES.swap(0, Ordering::SeqCst)
}

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(start_paused = true)]
async fn a_read_is_retried_after_its_backoff_with_a_clone_for_each_attempt_but_the_last() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = Scripted::new(&[Some(Err(StoreError::Busy)), Some(Err(StoreError::Busy)), Some(Ok("v1"))]);
    let mut svc = layer(budgeted()).layer(store.service());
    clones();
    let value = svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap();
    assert_eq!(value, "v1");
    assert_eq!(store.calls(), [ms(0), ms(100), ms(300)], "backoff of 100 ms, then 200 ms");
    assert_eq!(clones(), 2, "the first two attempts sent clones; the last, the request itself");
    // A read that succeeds at once was cloned once: a retry might have followed it.
    assert_eq!(svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap(), "v1");
    assert_eq!(clones(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_request_stated_unsafe_gets_one_attempt_and_is_never_cloned() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = Scripted::new(&[Some(Err(StoreError::Busy))]);
    let mut svc = layer(budgeted()).layer(store.service());
    clones();
    let err = svc.ready().await.unwrap().call(Query::Put("k1")).await.unwrap_err();
    assert_eq!(store.calls(), [ms(0)]);
    assert_eq!(clones(), 0);
    assert_eq!(err.code(), "attempts_exhausted");
    assert_eq!(
        chain(&err),
        ["store: failed (attempts_exhausted) after 1 attempt(s); last failure: store busy"]
    );
    let completion = err.completion().unwrap();
    assert_eq!(completion.summary.dispatched, 1);
    assert_eq!(completion.last_failure, Some(AttemptError::Failed(StoreError::Busy)));
    assert_eq!(err.into_last_failure(), Some(StoreError::Busy), "the store's own error, typed");
}

#[tokio::test(start_paused = true)]
async fn an_error_the_plan_calls_not_retryable_comes_back_at_once() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = Scripted::new(&[Some(Err(StoreError::NotFound))]);
    let mut svc = layer(budgeted()).layer(store.service());
    let err = svc.ready().await.unwrap().call(Query::Get("k9")).await.unwrap_err();
    assert_eq!(store.calls(), [ms(0)]);
    let completion = err.completion().unwrap();
    assert_eq!((completion.disposition, completion.problem), (Disposition::Failed, None));
    assert_eq!(chain(&err), ["store: failed after 1 attempt(s); last failure: no such key"]);
}

#[tokio::test(start_paused = true)]
async fn a_stated_wait_is_waited_exactly_and_one_too_long_is_handed_back() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = Scripted::new(&[Some(Err(StoreError::Throttled { retry_in_ms: 700 })), Some(Ok("v1"))]);
    let mut svc = layer(budgeted()).layer(store.service());
    assert_eq!(svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap(), "v1");
    assert_eq!(store.calls(), [ms(0), ms(700)]);

    // Longer than the policy's 2 s maximum delay: deferred, with the wait, and nothing slept.
    let store = Scripted::new(&[Some(Err(StoreError::Throttled { retry_in_ms: 5_000 }))]);
    let mut svc = layer(budgeted()).layer(store.service());
    let t0 = tokio::time::Instant::now();
    let err = svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap_err();
    assert_eq!((store.calls(), t0.elapsed()), (vec![ms(0)], ms(0)));
    assert_eq!(err.code(), "retry_after_exceeds_maximum_delay");
    assert_eq!(err.completion().unwrap().disposition, Disposition::Deferred);
    assert_eq!(err.retry_in(), Some(ms(5_000)));
}

#[tokio::test(start_paused = true)]
async fn a_request_s_own_deadline_cuts_its_attempts_and_a_hang_times_out() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = Scripted::new(&[None]);
    let mut svc = layer(budgeted()).layer(store.service());
    let t0 = tokio::time::Instant::now();
    // The layer allows 10 s; this read must be over in 1.5 s: the first attempt times out at 1 s,
    // the second starts after the 100 ms backoff with the 400 ms left, and no third fits.
    let err = svc.ready().await.unwrap().call(Query::GetBy("k1", t0 + ms(1_500))).await.unwrap_err();
    assert_eq!(store.calls(), [ms(0), ms(1_100)]);
    assert_eq!(t0.elapsed(), ms(1_500));
    let completion = err.completion().unwrap();
    assert_eq!(completion.problem, Some(Problem::RetryDelayExceedsDeadline));
    assert_eq!(completion.last_failure, Some(AttemptError::TimedOut { after: Duration::from_millis(400) }));
}

#[tokio::test(start_paused = true)]
async fn an_open_circuit_fails_fast_without_touching_the_service() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = Scripted::new(&[Some(Err(StoreError::NotFound))]);
    let config = budgeted().breaker(BreakerConfig::consecutive_failures(1, Duration::from_secs(30)));
    let mut svc = layer(config).layer(store.service());
    let _ = svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap_err();
    let err = svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap_err();
    assert_eq!(store.calls().len(), 1, "the second call never reached the store");
    assert!(matches!(&err, Error::Ended { .. }));
    assert_eq!(err.code(), "circuit_open");
    assert_eq!(err.retry_in(), Some(Std::from_secs(30)));
    assert_eq!(chain(&err), ["store: rejected (circuit_open) after 0 attempt(s); try again in 30s"]);
}

#[tokio::test(start_paused = true)]
async fn a_dependency_with_no_budget_refuses_a_retrying_read_before_sending_it() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = Scripted::new(&[Some(Ok("v1"))]);
    let mut svc = layer(DependencyConfig::new(Duration::from_secs(10))).layer(store.service());
    let err = svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap_err();
    assert!(matches!(err, Error::Start(_)), "{err}");
    assert!(store.calls().is_empty());
    // A write gets one attempt, which needs no budget.
    assert_eq!(svc.ready().await.unwrap().call(Query::Put("k1")).await.unwrap(), "v1");
}

/// A service that is not ready fails the attempt with its error, which the plan classifies.
#[derive(Clone)]
struct NotReady;

impl Service<Query> for NotReady {
    type Response = &'static str;
    type Error = StoreError;
    type Future = std::future::Ready<Result<&'static str, StoreError>>;
    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), StoreError>> {
        std::task::Poll::Ready(Err(StoreError::Busy))
    }
    fn call(&mut self, _: Query) -> Self::Future {
        unreachable!("never ready")
    }
}

#[tokio::test(start_paused = true)]
async fn a_service_that_fails_to_get_ready_fails_the_attempt_with_its_error() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut svc = layer(budgeted()).layer(NotReady);
    let t0 = tokio::time::Instant::now();
    let err = svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap_err();
    assert_eq!(t0.elapsed(), ms(300), "three attempts, after 100 and 200 ms");
    assert_eq!(err.code(), "attempts_exhausted");
    assert_eq!(err.into_last_failure(), Some(StoreError::Busy));
}

/// Every read of a client whose errors have a cause of their own is worth one more try.
#[derive(Clone)]
struct Retries;

impl Plan<Query, Unavailable> for Retries {
    fn safety(&self, _: &Query) -> ReplaySafety<HZ> {
        ReplaySafety::replayable_read(Duration::from_secs(60))
    }
    fn classify(&self, _: &Unavailable) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

#[tokio::test(start_paused = true)]
async fn the_error_s_chain_shows_each_message_once_down_to_the_service_s_own_cause() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let refused = tower::service_fn(|_: Query| async {
        Err::<&'static str, _>(Unavailable(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)))
    });
    let store = Dependency::with_seed("store", budgeted(), 1).unwrap();
    let mut svc = PipelineLayer::new(store, POLICY, Std::from_secs(10), Retries).layer(refused);
    let err = svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap_err();
    assert_eq!(
        chain(&err),
        [
            "store: failed (attempts_exhausted) after 3 attempt(s); last failure: upstream unavailable",
            "connection refused"
        ]
    );
}

/// With `hedge_after`, a read still unanswered after the delay gets a second attempt, a clone
/// through a clone of the service, and its answer is the response; every attempt of a hedged
/// request sends a clone. A write stated `Unsafe` is never hedged.
#[tokio::test(start_paused = true)]
async fn a_read_still_out_after_the_hedge_delay_gets_a_second_attempt_and_a_write_never_does() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = Scripted::new(&[None, Some(Ok("v2"))]);
    let mut svc = layer(budgeted()).hedge_after(ms(50)).layer(store.service());
    clones();
    let t0 = tokio::time::Instant::now();
    let value = svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap();
    assert_eq!((value, t0.elapsed(), store.calls()), ("v2", ms(50), vec![ms(0), ms(50)]));
    assert_eq!(clones(), 2, "a clone for each attempt, the request itself never sent");

    let store = Scripted::new(&[None]);
    let mut svc = layer(budgeted()).hedge_after(ms(50)).layer(store.service());
    let error = svc.ready().await.unwrap().call(Query::Put("k1")).await.unwrap_err();
    let completion = error.completion().unwrap();
    assert_eq!((store.calls(), completion.summary.dispatched), (vec![ms(0)], 1), "one attempt, no hedge");
    assert!(error.into_last_failure().is_none(), "it timed out");
    assert_eq!(clones(), 0);
}

/// A hedging layer whose policy allows one attempt refuses each read it would hedge, before
/// anything is sent.
#[tokio::test(start_paused = true)]
async fn a_hedging_layer_with_a_policy_of_one_attempt_refuses_the_reads_it_would_hedge() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = Scripted::new(&[Some(Ok("v1"))]);
    let dep = Dependency::with_seed("store", budgeted(), 1).unwrap();
    let once = RetryPolicy::single_attempt().build().unwrap();
    let mut svc =
        PipelineLayer::new(dep, once, Std::from_secs(10), Store).hedge_after(ms(50)).layer(store.service());
    let error = svc.ready().await.unwrap().call(Query::Get("k1")).await.unwrap_err();
    assert_eq!(error.code(), "hedge_without_retries");
    assert!(store.calls().is_empty());
    // A write, never hedged, goes.
    assert_eq!(svc.ready().await.unwrap().call(Query::Put("k1")).await.unwrap(), "v1");
    clones();
}

/// Two slots, half kept for critical work: with one read in flight the next is refused unsent
/// (`bulkhead_full`), and a write, which the plan calls critical, takes the slot kept for it.
#[tokio::test(start_paused = true)]
async fn the_plan_s_sheddable_reads_leave_the_critical_reserve_to_its_writes() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let store = Scripted::new(&[None]);
    let svc = layer(budgeted().bulkhead(2).critical_reserve(50)).layer(store.service());
    let read = tokio::spawn(svc.clone().oneshot(Query::Get("k1")));
    tokio::task::yield_now().await;
    assert_eq!(store.calls().len(), 1);
    let err = svc.clone().oneshot(Query::Get("k2")).await.unwrap_err();
    assert_eq!(chain(&err), ["store: rejected (bulkhead_full) after 0 attempt(s)"]);
    let write = tokio::spawn(svc.clone().oneshot(Query::Put("k3")));
    tokio::task::yield_now().await;
    assert_eq!(store.calls().len(), 2, "the write went");
    read.abort();
    write.abort();
    let _ = clones();
}
