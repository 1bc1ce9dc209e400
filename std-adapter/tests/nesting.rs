//! An operation inside another's attempt: `Error` and `HttpError` classify themselves by seed 000's
//! rule that exactly one layer retries, and hand a known wait up. On tokio's paused clock, every
//! call's time is exact.

use std::sync::{Arc, Mutex};
use std::time::Duration as Std;

use http::{Method, Request, Response};
use relent_tokio::core::{
    BreakerConfig, Classify, Context, DependencyConfig, Disposition, Jitter, ReplaySafety, RetryBudget,
    RetryPolicy, Verdict,
};
use relent_tokio::{AttemptError, Dependency, Duration, Error, HZ, HttpError, RetryLayer};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ledger {
    Down,
    Busy(u64),
    Invalid,
}

impl Classify<HZ> for Ledger {
    fn classify(&self) -> Verdict<HZ> {
        match self {
            Self::Down => Verdict::Retryable,
            Self::Busy(s) => Verdict::RetryableAfter(Duration::from_secs(*s)),
            Self::Invalid => Verdict::NotRetryable,
        }
    }
}

/// `attempts` from 100 ms, doubling, waits of at most `max_delay_s`, each attempt `timeout_s`.
const fn policy(attempts: u8, max_delay_s: u64, timeout_s: u64) -> RetryPolicy<HZ> {
    match RetryPolicy::exponential(attempts, Duration::from_millis(100), Duration::from_secs(max_delay_s))
        .jitter(Jitter::None)
        .attempt_timeout(Duration::from_secs(timeout_s))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    }
}

/// The ledger client's own retries: 3 attempts, 100 ms then 200 ms apart, waits of at most 1 s.
const CLIENT: RetryPolicy<HZ> = policy(3, 1, 3);
/// A client that leaves retrying to its caller.
const ONCE: RetryPolicy<HZ> = policy(1, 1, 3);
/// The checkout around it: 3 attempts, waits of at most 10 s.
const CHECKOUT: RetryPolicy<HZ> = policy(3, 10, 3);

fn dependency(name: &str) -> Dependency {
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 20).unwrap());
    Dependency::with_seed(name, config, 3).unwrap()
}

fn read() -> Context<HZ> {
    Context::new(Duration::from_secs(30), ReplaySafety::replayable_read(Duration::from_secs(3_600)))
}

/// A mutation the provider deduplicates: the outer operation's statement that it may be repeated.
fn mutation() -> Context<HZ> {
    Context::new(Duration::from_secs(30), ReplaySafety::provider_idempotent_mutation(Duration::from_secs(60)))
}

/// The ledger's far side: answers from a script, and notes when each call came.
#[derive(Clone)]
struct Far {
    t0: Instant,
    script: Arc<Mutex<Vec<Result<u32, Ledger>>>>,
    calls: Arc<Mutex<Vec<Std>>>,
}

impl Far {
    fn new(script: &[Result<u32, Ledger>]) -> Self {
        let mut script = script.to_vec();
        script.reverse();
        Self { t0: Instant::now(), script: Arc::new(Mutex::new(script)), calls: Arc::default() }
    }

    async fn call(&self) -> Result<u32, Ledger> {
        self.calls.lock().unwrap().push(self.t0.elapsed());
        let mut script = self.script.lock().unwrap();
        if script.len() > 1 { script.pop().unwrap() } else { script[0] }
    }

    fn calls(&self) -> Vec<Std> {
        self.calls.lock().unwrap().clone()
    }
}

/// When a far side behind the layer got each request.
type Seen = Arc<Mutex<Vec<Std>>>;

/// A far side behind the layer that answers every request with `answer()` and notes it in the
/// returned list.
fn far_side(
    answer: fn() -> Result<Response<String>, std::io::Error>,
) -> (
    impl Service<Request<String>, Response = Response<String>, Error = std::io::Error, Future: Send>
    + Clone
    + Send
    + 'static,
    Seen,
) {
    let t0 = Instant::now();
    let seen: Seen = Arc::default();
    let noted = seen.clone();
    let service = tower::service_fn(move |_req: Request<String>| {
        noted.lock().unwrap().push(t0.elapsed());
        std::future::ready(answer())
    });
    (service, seen)
}

/// The times of the requests seen since the last call, from the first of them.
fn take(seen: &Seen) -> Vec<Std> {
    let times: Vec<Std> = seen.lock().unwrap().drain(..).collect();
    times.iter().map(|t| *t - times[0]).collect()
}

/// Sends a `method` request through `client`, as one attempt of an outer operation does.
async fn send<S>(client: &S, method: Method) -> Result<Response<String>, HttpError<std::io::Error>>
where
    S: Service<Request<String>, Response = Response<String>, Error = HttpError<std::io::Error>> + Clone,
{
    let request = Request::builder().method(method).uri("/quote").body(String::new()).unwrap();
    client.clone().oneshot(request).await
}

fn refused() -> std::io::Error {
    std::io::Error::from(std::io::ErrorKind::ConnectionRefused)
}

fn ms(v: u64) -> Std {
    Std::from_millis(v)
}

#[tokio::test(start_paused = true)]
async fn an_inner_operation_that_retried_is_not_retried_again_by_the_outer_one() {
    let (ledger, checkout) = (dependency("ledger"), dependency("checkout"));
    let far = Far::new(&[Err(Ledger::Down)]);
    let done = checkout
        .execute_detailed(&CHECKOUT, read(), |_| ledger.execute(&CLIENT, read(), |_| far.call()))
        .await
        .unwrap();
    // The ledger client's three calls, and no more: not 3 x 3.
    assert_eq!(far.calls(), [ms(0), ms(100), ms(300)]);
    let c = &done.completion;
    assert_eq!((c.disposition, c.problem, c.summary.dispatched), (Disposition::Failed, None, 1));
    let Some(relent_tokio::AttemptError::Failed(inner)) = &c.last_failure else { panic!("{c:?}") };
    assert_eq!(inner.code(), "attempts_exhausted", "the inner error is kept as it was");
    assert_eq!(inner.classify(), Verdict::NotRetryable);
}

#[tokio::test(start_paused = true)]
async fn an_inner_operation_of_one_attempt_leaves_the_retrying_to_the_outer_one() {
    let (ledger, checkout) = (dependency("ledger"), dependency("checkout"));
    let far = Far::new(&[Err(Ledger::Down), Err(Ledger::Down), Ok(7)]);
    let value = checkout.execute(&CHECKOUT, read(), |_| ledger.execute(&ONCE, read(), |_| far.call())).await;
    assert_eq!(value.unwrap(), 7);
    // The checkout's backoff: 100 ms, then 200 ms.
    assert_eq!(far.calls(), [ms(0), ms(100), ms(300)]);

    // The inner failure's own verdict comes through: a Retry-After the outer waits exactly, and a
    // failure that is not retryable, not retried.
    let far = Far::new(&[Err(Ledger::Busy(4)), Err(Ledger::Invalid)]);
    let error = checkout
        .execute(&CHECKOUT, read(), |_| ledger.execute(&ONCE, read(), |_| far.call()))
        .await
        .unwrap_err();
    assert_eq!(far.calls(), [ms(0), ms(4_000)]);
    let completion = error.completion().unwrap();
    assert_eq!((completion.problem, completion.summary.dispatched), (None, 2));
    assert_eq!(error.into_last_failure().unwrap().into_last_failure(), Some(Ledger::Invalid));
}

#[tokio::test(start_paused = true)]
async fn a_wait_the_inner_operation_could_not_honour_is_handed_up_and_waited_by_the_patient_outer_one() {
    let (ledger, checkout) = (dependency("ledger"), dependency("checkout"));
    // "Busy, retry in 5 s": more than the client's 1 s, within the checkout's 10 s.
    let far = Far::new(&[Err(Ledger::Busy(5)), Ok(7)]);
    let done = checkout
        .execute_detailed(&CHECKOUT, read(), |_| ledger.execute(&CLIENT, read(), |_| far.call()))
        .await
        .unwrap();
    assert_eq!(done.value, Some(7));
    assert_eq!(far.calls(), [ms(0), ms(5_000)], "no sooner than the far side asked, and no later");
    assert_eq!(done.completion.summary.waited, Duration::from_secs(5));
    assert_eq!(done.completion.retry_after, Some(Duration::from_secs(5)));

    // An outer operation with no more patience defers in turn, with the same wait.
    let far = Far::new(&[Err(Ledger::Busy(5)), Ok(7)]);
    let error = checkout.execute(&CLIENT, read(), |_| ledger.execute(&CLIENT, read(), |_| far.call())).await;
    let error = error.unwrap_err();
    assert_eq!(error.code(), "retry_after_exceeds_maximum_delay");
    assert_eq!(error.retry_in(), Some(ms(5_000)));
    assert_eq!(error.completion().unwrap().disposition, Disposition::Deferred);
    assert_eq!(far.calls(), [ms(0)], "one call: the retry is the caller's, in 5 s");
}

#[tokio::test(start_paused = true)]
async fn an_open_circuit_inside_is_waited_out_or_deferred_with_what_is_left_of_its_break() {
    let config = DependencyConfig::new(Duration::from_secs(10))
        .budget(RetryBudget::ratio(10, 20).unwrap())
        .breaker(BreakerConfig::consecutive_failures(1, Duration::from_secs(8)));
    let ledger = Dependency::with_seed("ledger", config, 3).unwrap();
    let checkout = dependency("checkout");
    let far = Far::new(&[Err(Ledger::Invalid), Ok(7)]);
    let _ = ledger.execute(&CLIENT, read(), |_| far.call()).await;
    tokio::time::advance(ms(1_500)).await;

    let inner = ledger.execute(&CLIENT, read(), |_| far.call()).await.unwrap_err();
    assert_eq!((inner.code(), inner.retry_in()), ("circuit_open", Some(ms(6_500))));
    assert_eq!(inner.classify(), Verdict::RetryableAfter(Duration::from_millis(6_500)));

    // The checkout waits for the circuit's probe, 6.5 s on, and gets its answer.
    let value =
        checkout.execute(&CHECKOUT, read(), |_| ledger.execute(&CLIENT, read(), |_| far.call())).await;
    assert_eq!(value.unwrap(), 7);
    assert_eq!(far.calls(), [ms(0), ms(8_000)]);
}

#[tokio::test(start_paused = true)]
async fn an_inner_operation_refused_for_good_is_not_retried() {
    let ledger = dependency("ledger");
    // An inner operation that never started: its policy and context cannot run together.
    let unsafe_call = Context::new(Duration::from_secs(30), ReplaySafety::Unsafe);
    let never = ledger.execute(&CLIENT, unsafe_call, |_| async { Ok::<u32, Ledger>(7) }).await.unwrap_err();
    assert!(matches!(never, Error::Start(_)));
    assert_eq!(never.classify(), Verdict::NotRetryable);

    // A retry budget that refused (the dependency is in trouble) is the inner layer's last word.
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 0).unwrap());
    let starved = Dependency::with_seed("starved", config, 3).unwrap();
    let far = Far::new(&[Err(Ledger::Down)]);
    let spent = starved.execute(&CLIENT, read(), |_| far.call()).await.unwrap_err();
    assert_eq!((spent.code(), spent.completion().unwrap().summary.dispatched), ("retry_budget_exhausted", 1));
    assert_eq!(spent.classify(), Verdict::NotRetryable);
}

/// The HTTP client's layer inside a handler's operation.
#[tokio::test(start_paused = true)]
async fn a_layered_http_request_is_retried_by_the_layer_or_by_the_outer_operation_never_both() {
    // A far side that refuses every connection.
    let (refusing, seen) = far_side(|| Err(refused()));
    let client = RetryLayer::new(dependency("payrail"), CLIENT, Std::from_secs(10)).layer(refusing);
    let checkout = dependency("checkout");

    // A GET: the layer retries it, the checkout does not.
    let error = checkout.execute(&CHECKOUT, read(), |_| send(&client, Method::GET)).await.unwrap_err();
    assert_eq!(take(&seen), [ms(0), ms(100), ms(300)]);
    assert_eq!(error.completion().unwrap().summary.dispatched, 1);

    // A keyless POST too: the refused connections never arrived, so the layer sends it again, and
    // the checkout, whose own statement would make it replayable, does not.
    let error = checkout.execute(&CHECKOUT, mutation(), |_| send(&client, Method::POST)).await.unwrap_err();
    assert_eq!(take(&seen), [ms(0), ms(100), ms(300)]);
    assert_eq!((error.code(), error.completion().unwrap().summary.dispatched), ("", 1));
    let Some(HttpError::Transport { report, .. }) = error.into_last_failure() else { panic!() };
    assert_eq!(
        (report.dispatched, report.replay_safety),
        (3, relent_tokio::core::ReplaySafety::UntilArrived)
    );
}

/// The rule needs the inner operation's own end: an outer attempt that times out first drops the
/// inner operation mid-retry, and a timed-out attempt is retryable (9 calls to a far side that
/// hangs, where the rule allows 3). An operation started inside an attempt ends by that attempt's
/// expiry on its own, whatever deadline its context asks for: 3 calls, and the outer operation ends
/// with the inner one, at the outer attempt's expiry exactly.
#[tokio::test(start_paused = true)]
async fn an_operation_inside_an_attempt_ends_by_the_attempts_expiry_on_its_own() {
    // The client's 4 attempts time out after 1 s; the checkout's after 3 s.
    const INNER: RetryPolicy<HZ> = policy(4, 1, 1);
    let (ledger, checkout) = (dependency("ledger"), dependency("checkout"));
    let calls: Arc<Mutex<Vec<Std>>> = Arc::default();
    let hangs = |t0: Instant| {
        let calls = calls.clone();
        move |_| {
            calls.lock().unwrap().push(t0.elapsed());
            std::future::pending::<Result<u32, Ledger>>()
        }
    };
    let inner = |deadline| Context::new(deadline, ReplaySafety::replayable_read(Duration::from_secs(3_600)));

    // An inner deadline of 2.5 s, inside the checkout's 3 s attempt; one of 3 s exactly, the
    // attempt's timeout, with no margin; and one of 30 s, cut to the attempt's 3 s.
    for (deadline, ends) in [(2_500, 2_500), (3_000, 3_000), (30_000, 3_000)] {
        calls.lock().unwrap().clear();
        let t0 = Instant::now();
        let detailed = checkout
            .execute_detailed(&CHECKOUT, read(), |_| {
                let client =
                    ledger.execute_detailed(&INNER, inner(Duration::from_millis(deadline)), hangs(t0));
                async { Ok::<_, Ledger>(client.await.unwrap()) }
            })
            .await
            .unwrap();
        // The client's third attempt is cut to fit, and the client ends on its own, with no time
        // for its fourth.
        assert_eq!(*calls.lock().unwrap(), [ms(0), ms(1_100), ms(2_300)], "inner deadline {deadline} ms");
        assert_eq!(t0.elapsed(), ms(ends), "inner deadline {deadline} ms");
        let client = detailed.value.unwrap();
        assert_eq!(client.deadline, ms(ends), "the deadline the client ran under");
        assert_eq!(
            (client.completion.code(), client.completion.summary.dispatched),
            ("retry_delay_exceeds_deadline", 3)
        );
        // The checkout's attempt succeeded: it returned the client's completion as its value.
        assert_eq!(detailed.completion.summary.dispatched, 1);
    }

    // Through `execute`, the client's error ends the checkout, which does not retry it.
    calls.lock().unwrap().clear();
    let t0 = Instant::now();
    let error = checkout
        .execute(&CHECKOUT, read(), |_| ledger.execute(&INNER, inner(Duration::from_secs(30)), hangs(t0)))
        .await
        .unwrap_err();
    assert_eq!(*calls.lock().unwrap(), [ms(0), ms(1_100), ms(2_300)]);
    let c = error.completion().unwrap();
    assert_eq!((c.disposition, c.problem, c.summary.dispatched), (Disposition::Failed, None, 1));
    let Some(AttemptError::Failed(client)) = &c.last_failure else { panic!("{c:?}") };
    assert_eq!(client.code(), "retry_delay_exceeds_deadline");
    assert_eq!(t0.elapsed(), ms(3_000));
}

/// The bound is converted between two dependencies' clocks, anchored a fraction of a microsecond
/// apart, rounded down: the inner operation never outlasts the outer attempt.
#[tokio::test(start_paused = true)]
async fn an_inner_dependency_on_another_anchor_still_ends_by_the_outer_attempts_expiry() {
    const INNER: RetryPolicy<HZ> = policy(4, 1, 1);
    let ledger = dependency("ledger");
    tokio::time::advance(Std::from_nanos(1_234_567)).await;
    let checkout = dependency("checkout");
    let t0 = Instant::now();
    let detailed = checkout
        .execute_detailed(&CHECKOUT, read(), |_| {
            let client =
                ledger.execute_detailed(&INNER, read(), |_| std::future::pending::<Result<u32, Ledger>>());
            async { Ok::<_, Ledger>(client.await.unwrap()) }
        })
        .await
        .unwrap();
    let client = detailed.value.unwrap();
    // The checkout's attempt expires 3 s after its start, at 3,001,234.567 µs on the ledger's
    // clock, rounded down to 3,001,234; the client starts at 1,234.567 µs, rounded up to 1,235 (a
    // start, like any reading of the clock, rounds up): 2,999,999 µs left.
    assert_eq!(client.deadline, Std::from_micros(2_999_999));
    assert_eq!(
        (client.completion.code(), client.completion.summary.dispatched),
        ("retry_delay_exceeds_deadline", 3)
    );
    assert_eq!(detailed.completion.summary.dispatched, 1, "the checkout did not time out first");
    // Both timers fire together, at the first millisecond of tokio's timer (its resolution) at or
    // after 3 s, neither instant being a whole millisecond of it.
    assert!(t0.elapsed() > ms(3_000) && t0.elapsed() <= ms(3_001), "{:?}", t0.elapsed());
}

/// `attempt_expiry` gives the expiry of the innermost attempt the code runs in, and the outer one's
/// again after the inner operation is done; none outside, and none in a task spawned from an
/// attempt, which the attempt's timeout does not drop.
#[tokio::test(start_paused = true)]
async fn attempt_expiry_is_the_innermost_attempts_and_is_put_back_after_it() {
    use relent_tokio::attempt_expiry;
    let (ledger, checkout) = (dependency("ledger"), dependency("checkout"));
    let t0 = Instant::now();
    assert_eq!(attempt_expiry(), None);
    let seen = checkout
        .execute(&CHECKOUT, read(), |outer| {
            let (ledger, outer) = (&ledger, outer.expires());
            async move {
                let before = attempt_expiry();
                tokio::time::sleep(ms(500)).await;
                let inner = ledger
                    .execute(&policy(3, 1, 1), read(), |attempt| async move {
                        Ok::<_, Ledger>((attempt_expiry(), attempt.expires()))
                    })
                    .await
                    .unwrap();
                let spawned = tokio::spawn(async { attempt_expiry() }).await.unwrap();
                Ok::<_, Error<Ledger>>((before, outer, inner, attempt_expiry(), spawned))
            }
        })
        .await
        .unwrap();
    let (before, outer, (inner_seen, inner), after, spawned) = seen;
    assert_eq!((before, outer), (Some(t0 + ms(3_000)), t0 + ms(3_000)));
    assert_eq!(
        (inner_seen, inner),
        (Some(t0 + ms(1_500)), t0 + ms(1_500)),
        "the client's 1 s attempt at 0.5 s"
    );
    assert_eq!(after, Some(t0 + ms(3_000)), "the outer attempt's, put back");
    assert_eq!(spawned, None);
    assert_eq!(attempt_expiry(), None);
}

/// A layered request sent from an attempt ends by that attempt's expiry too, and its report says
/// so; a `RequestDeadline` of the attempt's expiry, exactly, is the same limit, with no margin.
#[tokio::test(start_paused = true)]
async fn a_layered_request_from_an_attempt_ends_by_its_expiry_and_reports_that_deadline() {
    let (hanging, seen) = far_side(|| Err(refused()));
    // A layer whose attempts hang for good: the far side never answers.
    let hanging = tower::service_fn(move |req: Request<String>| {
        let mut far = hanging.clone();
        async move {
            let _ = far.call(req).await;
            std::future::pending::<Result<Response<String>, std::io::Error>>().await
        }
    });
    let policy = policy(4, 1, 1);
    let client = RetryLayer::new(dependency("payrail"), policy, Std::from_secs(10)).layer(hanging);
    let checkout = dependency("checkout");
    for exact in [false, true] {
        let t0 = Instant::now();
        let error = checkout
            .execute(&CHECKOUT, read(), |attempt| {
                let mut request = Request::get("/quote").body(String::new()).unwrap();
                if exact {
                    request.extensions_mut().insert(relent_tokio::RequestDeadline::at(attempt.expires()));
                }
                client.clone().oneshot(request)
            })
            .await
            .unwrap_err();
        assert_eq!(take(&seen), [ms(0), ms(1_100), ms(2_300)], "with a RequestDeadline: {exact}");
        assert_eq!(t0.elapsed(), ms(3_000));
        assert_eq!(error.completion().unwrap().summary.dispatched, 1, "the checkout did not retry");
        let Some(HttpError::TimedOut { report, .. }) = error.into_last_failure() else { panic!() };
        assert_eq!(
            (report.deadline, report.problem.map(|p| p.as_str())),
            (ms(3_000), Some("retry_delay_exceeds_deadline"))
        );
    }
}

/// The rule's other ends: a refusal with no end in sight, a layer that could not start the request,
/// and a wait the layer's own classifier put on a single attempt's transport error.
#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_or_a_request_that_never_started_is_not_retried_and_a_stated_wait_is_waited() {
    // A full bulkhead: retry_in is unknown, and the outer operation does not retry.
    let config = DependencyConfig::new(Duration::from_secs(10))
        .budget(RetryBudget::ratio(10, 20).unwrap())
        .bulkhead(1);
    let ledger = Dependency::with_seed("ledger", config, 3).unwrap();
    let gate = tokio::sync::Notify::new();
    let holds = ledger.execute(&CLIENT, read(), |_| async {
        gate.notified().await;
        Ok::<u32, Ledger>(7)
    });
    let refused = async {
        tokio::task::yield_now().await;
        let refused = ledger.execute(&CLIENT, read(), |_| async { Ok::<u32, Ledger>(7) }).await;
        gate.notify_one();
        refused.unwrap_err()
    };
    let (held, refused) = tokio::join!(holds, refused);
    assert_eq!(held.unwrap(), 7);
    assert_eq!((refused.code(), refused.retry_in()), ("bulkhead_full", None));
    assert_eq!(refused.classify(), Verdict::NotRetryable);
    let never =
        ledger.execute(&CLIENT, Context::new(Duration::from_secs(1), ReplaySafety::Unsafe), |_| async {
            Ok::<u32, Ledger>(7)
        });
    assert_eq!(never.await.unwrap_err().retry_in(), None);

    // A layer whose dependency has no budget cannot start a request under a retrying policy.
    let calls = Arc::new(Mutex::new(0));
    let counted = calls.clone();
    let fine = tower::service_fn(move |_req: Request<String>| {
        *counted.lock().unwrap() += 1;
        async { Ok::<_, std::io::Error>(Response::new(String::new())) }
    });
    let unbudgeted =
        Dependency::with_seed("payrail", DependencyConfig::new(Duration::from_secs(10)), 3).unwrap();
    let mut client = RetryLayer::new(unbudgeted, CLIENT, Std::from_secs(10)).layer(fine);
    let request = Request::get("/quote").body(String::new()).unwrap();
    let not_started = client.ready().await.unwrap().call(request).await.unwrap_err();
    assert!(matches!(not_started, HttpError::Start(_)));
    assert_eq!(not_started.classify(), Verdict::NotRetryable);
    assert_eq!(*calls.lock().unwrap(), 0);
}

/// A classifier that says how long a transport error asks to wait.
#[derive(Clone)]
struct WaitOnReset;

impl relent_tokio::http::HttpClassifier<String, std::io::Error> for WaitOnReset {
    fn response(&self, _response: &Response<String>) -> relent_tokio::http::Exchange {
        relent_tokio::http::Exchange::Success
    }
    fn error(&self, _error: &std::io::Error) -> Verdict<HZ> {
        Verdict::RetryableAfter(Duration::from_secs(2))
    }
}

#[tokio::test(start_paused = true)]
async fn a_single_attempts_stated_wait_is_the_outer_operations_to_wait() {
    let (resets, seen) = far_side(|| Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset)));
    let layer = RetryLayer::new(dependency("payrail"), CLIENT, Std::from_secs(10)).classifier(WaitOnReset);
    let client = layer.layer(resets);
    let checkout = dependency("checkout");
    // A keyless POST: one attempt at the layer, and the checkout waits the 2 s before each retry.
    let error = checkout.execute(&CHECKOUT, mutation(), |_| send(&client, Method::POST)).await.unwrap_err();
    assert_eq!(take(&seen), [ms(0), ms(2_000), ms(4_000)]);
    assert_eq!(error.code(), "attempts_exhausted");
}

/// An outer operation's error for a response it cannot use, classified by the layer's report.
#[derive(Debug)]
struct Status(http::StatusCode, relent_tokio::RetryReport);

impl Classify<HZ> for Status {
    fn classify(&self) -> Verdict<HZ> {
        self.1.classify()
    }
}

/// A response comes back as `Ok` whatever its status: an outer operation that turns a 503 into an
/// error of its own classifies it by the report, so a 503 the layer retried is not retried again,
/// and one it sent once (a keyless POST) is retried by the outer operation, after its Retry-After.
#[tokio::test(start_paused = true)]
async fn a_response_the_caller_cannot_use_is_classified_by_its_report() {
    let (busy, seen) = far_side(|| {
        Ok(Response::builder().status(503).header("retry-after", "1").body(String::new()).unwrap())
    });
    let client = RetryLayer::new(dependency("payrail"), CLIENT, Std::from_secs(10)).layer(busy);
    let checkout = dependency("checkout");
    // The outer attempt: a response it cannot use is an error of its own, with the report.
    let usable = |method: Method| {
        let client = &client;
        move |_| {
            let method = method.clone();
            async move {
                let response = send(client, method).await.unwrap();
                let report = *response.extensions().get::<relent_tokio::RetryReport>().unwrap();
                match response.status() {
                    s if s.is_success() => Ok(()),
                    s => Err(Status(s, report)),
                }
            }
        }
    };

    // A GET: the layer waits out each Retry-After and retries; the checkout does not.
    let error = checkout.execute(&CHECKOUT, read(), usable(Method::GET)).await.unwrap_err();
    assert_eq!(take(&seen), [ms(0), ms(1_000), ms(2_000)]);
    assert_eq!(error.completion().unwrap().summary.dispatched, 1);
    let Some(Status(status, report)) = error.into_last_failure() else { panic!("the 503 is kept") };
    assert_eq!((status, report.dispatched), (http::StatusCode::SERVICE_UNAVAILABLE, 3));

    // A keyless POST: sent once by the layer, retried by the checkout a second later each time.
    let error = checkout.execute(&CHECKOUT, mutation(), usable(Method::POST)).await.unwrap_err();
    assert_eq!(take(&seen), [ms(0), ms(1_000), ms(2_000)]);
    assert_eq!((error.code(), error.completion().unwrap().summary.dispatched), ("attempts_exhausted", 3));
}

proptest::proptest! {
    // 96 cases, or PROPTEST_CASES's count for a longer run (as relent-tests' `cases`: proptest's
    // own reading of it gives way to a count set here).
    #![proptest_config(proptest::test_runner::Config {
        cases: std::env::var("PROPTEST_CASES").map_or(96, |v| v.parse().expect("PROPTEST_CASES: a whole number")),
        ..Default::default()
    })]

    /// Whatever the two dependencies' anchors (either made first, up to 5 ms apart, to the
    /// nanosecond), the outer attempt's timeout, the inner deadline and the inner policy, against a
    /// far side that hangs: the inner operation ends on its own, by the outer attempt's expiry, so
    /// the outer attempt returns and is never timed out and retried. The inner deadline is its
    /// context's when that is sooner, and otherwise the outer attempt's time left, to the
    /// microsecond below.
    #[test]
    fn an_inner_operation_never_outlasts_the_attempt_it_runs_in(
        inner_first in proptest::bool::ANY,
        offset_ns in 0u64..5_000_000,
        outer_timeout_us in 1_000u64..5_000_000,
        inner_deadline_us in 1u64..10_000_000,
        inner_attempts in 1u8..5,
        inner_timeout_us in 1_000u64..3_000_000,
    ) {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        runtime.block_on(async {
            let (ledger, checkout) = if inner_first {
                let ledger = dependency("ledger");
                tokio::time::advance(Std::from_nanos(offset_ns)).await;
                (ledger, dependency("checkout"))
            } else {
                let checkout = dependency("checkout");
                tokio::time::advance(Std::from_nanos(offset_ns)).await;
                (dependency("ledger"), checkout)
            };
            let timeouts = |attempts, timeout_us| {
                RetryPolicy::exponential(attempts, Duration::from_millis(100), Duration::from_secs(1))
                    .jitter(Jitter::None)
                    .attempt_timeout(Duration::from_micros(timeout_us))
                    .build()
                    .unwrap()
            };
            let (outer, inner) = (timeouts(3, outer_timeout_us), timeouts(inner_attempts, inner_timeout_us));
            let context = Context::new(
                Duration::from_micros(inner_deadline_us),
                ReplaySafety::replayable_read(Duration::from_secs(3_600)),
            );
            let done = checkout
                .execute_detailed(&outer, read(), |_| {
                    let client = ledger.execute_detailed(&inner, context, |_| {
                        std::future::pending::<Result<u32, Ledger>>()
                    });
                    async { Ok::<_, Ledger>(client.await.unwrap()) }
                })
                .await
                .unwrap();
            assert_eq!(done.completion.summary.dispatched, 1, "the outer attempt timed out: {done:?}");
            let client = done.value.unwrap();
            let asked = Std::from_micros(inner_deadline_us);
            let left = Std::from_micros(outer_timeout_us);
            if asked < left {
                assert_eq!(client.deadline, asked);
            } else {
                assert!(client.deadline <= left && client.deadline + Std::from_micros(1) >= left,
                    "{:?} against {left:?} left", client.deadline);
            }
            // Ended by its deadline, late only by tokio's timer: it fires on whole milliseconds, and
            // the paused clock, moving to a timer, counts from its own reading rounded down to a
            // millisecond (a 693.811 ms deadline, 0.189 ms into a millisecond, fired at 695 ms).
            let elapsed = relent_tokio::std_duration(client.completion.summary.elapsed);
            assert!(elapsed <= client.deadline + Std::from_millis(2), "{elapsed:?}, {:?}", client.deadline);
        });
    }
}

/// A handler's deadline given once, as a scope: every operation inside it ends by it, each with
/// what the ones before it left; the last attempt is cut to fit, and one started after the
/// deadline is refused before anything is sent. Outside the scope, nothing is bounded.
#[tokio::test(start_paused = true)]
async fn operations_inside_a_scope_share_its_deadline_and_the_last_is_cut_to_fit() {
    use relent_tokio::{RequestDeadline, attempt_expiry};
    let ledger = dependency("ledger");
    let far = Far::new(&[Err(Ledger::Down)]);
    let t0 = Instant::now();
    let handler = async {
        let inside = attempt_expiry();
        // A first read that answers at once; then one that fails until the scope's end.
        let first = ledger.execute_detailed(&CLIENT, read(), |_| async { Ok::<_, Ledger>(1) }).await.unwrap();
        tokio::time::sleep(ms(1_200)).await;
        let second = ledger
            .execute_detailed(&CLIENT, read(), |_| async {
                let answer = far.call().await;
                tokio::time::sleep(ms(250)).await;
                answer
            })
            .await
            .unwrap();
        let ended = t0.elapsed();
        tokio::time::sleep(ms(300)).await;
        let late = ledger.execute_detailed(&CLIENT, read(), |_| async { Ok::<_, Ledger>(3) }).await.unwrap();
        (inside, first, (second, ended), late)
    };
    let (inside, first, (second, ended), late) = RequestDeadline::within(ms(2_000)).scope(handler).await;
    assert_eq!(inside, Some(t0 + ms(2_000)), "inside the scope and no attempt: the scope's deadline");
    assert_eq!((first.value, first.deadline), (Some(1), ms(2_000)));
    // From 1.2 s, 0.8 s left: attempts at 1.2 s and 1.55 s (after 250 ms and the 100 ms backoff);
    // the third would start at 2.0 s, with nothing left, so it is refused when the second fails.
    assert_eq!(far.calls(), [ms(1_200), ms(1_550)]);
    assert_eq!(second.deadline, ms(800));
    assert_eq!(second.completion.code(), "retry_delay_exceeds_deadline");
    assert_eq!(ended, ms(1_800));
    assert_eq!((late.value, late.completion.code(), late.deadline), (None, "deadline_exceeded", Std::ZERO));
    assert_eq!(late.completion.summary.dispatched, 0, "nothing was sent at 2.1 s, after the deadline");
    assert_eq!(attempt_expiry(), None, "put back after the scope");
    let after = ledger.execute_detailed(&CLIENT, read(), |_| async { Ok::<_, Ledger>(4) }).await.unwrap();
    assert_eq!(after.deadline, Std::from_secs(30), "outside the scope, the context's own");
}

/// A scope never extends the bound it runs in: one later than the attempt it runs in leaves the
/// attempt's expiry in force, and one inside a sooner scope the sooner one. A sooner scope inside
/// an attempt cuts further.
#[tokio::test(start_paused = true)]
async fn a_scope_only_ever_shortens_the_bound_it_runs_in() {
    use relent_tokio::{RequestDeadline, attempt_expiry};
    let (ledger, checkout) = (dependency("ledger"), dependency("checkout"));
    let t0 = Instant::now();
    let seen = checkout
        .execute(&CHECKOUT, read(), |_| async {
            let later = RequestDeadline::within(ms(60_000)).scope(async { attempt_expiry() }).await;
            let sooner = RequestDeadline::within(ms(1_000))
                .scope(async {
                    let inner = ledger
                        .execute_detailed(&CLIENT, read(), |_| async { Ok::<_, Ledger>(attempt_expiry()) })
                        .await
                        .unwrap();
                    (attempt_expiry(), inner.deadline, inner.value)
                })
                .await;
            Ok::<_, Ledger>((later, sooner, attempt_expiry()))
        })
        .await
        .unwrap();
    let (later, (sooner, inner_deadline, inner_attempt), after) = seen;
    assert_eq!(later, Some(t0 + ms(3_000)), "the checkout's 3 s attempt, not the scope's 60 s");
    assert_eq!(sooner, Some(t0 + ms(1_000)));
    assert_eq!(inner_deadline, ms(1_000), "the ledger's read ran under the sooner scope");
    assert_eq!(inner_attempt, Some(Some(t0 + ms(1_000))), "its attempt cut to the scope's end");
    assert_eq!(after, Some(t0 + ms(3_000)), "the attempt's expiry, put back");
    // Scopes nested the other way round: the inner, later one leaves the outer in force.
    let nested = RequestDeadline::within(ms(500))
        .scope(RequestDeadline::within(ms(9_000)).scope(async { attempt_expiry() }))
        .await;
    assert_eq!(nested, Some(Instant::now() + ms(500)));
}
