//! The tower layer over a scripted in-process service, on tokio's paused clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration as Std;

use http::{Method, Request, Response, StatusCode};
use relent_tokio::core::{
    BreakerConfig, DependencyConfig, Disposition, Jitter, Problem, ReplaySafety, RetryBudget, RetryPolicy,
    StartError, Verdict,
};
use relent_tokio::{
    Dependency, Duration, HZ, HttpError, RequestDeadline, RetryLayer, RetryReport, SingleAttempt,
};
use tower::{Layer, Service, ServiceExt};

mod common;
use common::{Unavailable, chain};

/// What the scripted provider does with the n-th request for a path.
#[derive(Debug, Clone, Copy)]
enum Reply {
    Status(u16),
    StatusAfter(u16, &'static str),
    /// A status with a `Date` and a `Retry-After`, as a server sends them.
    StatusDated {
        status: u16,
        date: &'static str,
        retry_after: &'static str,
    },
    Hang,
    Refuse,
    /// A status after this many milliseconds: a slow answer.
    Slow(u16, u64),
}

#[derive(Clone, Default)]
struct Provider {
    scripts: Arc<Mutex<HashMap<String, Vec<Reply>>>>,
    seen: Arc<Mutex<HashMap<String, Vec<Std>>>>,
}

impl Provider {
    fn script(&self, path: &str, replies: &[Reply]) {
        self.scripts.lock().unwrap().insert(path.into(), replies.to_vec());
    }
    fn attempts(&self, path: &str) -> Vec<Std> {
        self.seen.lock().unwrap().get(path).cloned().unwrap_or_default()
    }
    fn service(
        &self,
        t0: tokio::time::Instant,
    ) -> impl Service<Request<String>, Response = Response<String>, Error = std::io::Error, Future: Send>
    + Clone
    + Send
    + 'static {
        let this = self.clone();
        tower::service_fn(move |req: Request<String>| {
            let this = this.clone();
            async move {
                let path = req.uri().path().to_string();
                let n = {
                    let mut seen = this.seen.lock().unwrap();
                    let v = seen.entry(path.clone()).or_default();
                    v.push(t0.elapsed());
                    v.len() - 1
                };
                let reply =
                    this.scripts.lock().unwrap().get(&path).and_then(|s| s.get(n.min(s.len() - 1)).copied());
                match reply.unwrap_or(Reply::Status(200)) {
                    Reply::Status(code) => Ok(Response::builder().status(code).body(String::new()).unwrap()),
                    Reply::StatusAfter(code, after) => Ok(Response::builder()
                        .status(code)
                        .header("retry-after", after)
                        .body(String::new())
                        .unwrap()),
                    Reply::StatusDated { status, date, retry_after } => Ok(Response::builder()
                        .status(status)
                        .header("date", date)
                        .header("retry-after", retry_after)
                        .body(String::new())
                        .unwrap()),
                    Reply::Hang => std::future::pending().await,
                    Reply::Slow(code, after) => {
                        tokio::time::sleep(Std::from_millis(after)).await;
                        Ok(Response::builder().status(code).body(String::new()).unwrap())
                    }
                    Reply::Refuse => Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
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

fn layer(config: DependencyConfig<HZ>) -> RetryLayer {
    let dep = Dependency::with_seed("payrail", config, 1).unwrap();
    RetryLayer::new(dep, POLICY, Std::from_secs(10))
}

fn budgeted() -> DependencyConfig<HZ> {
    DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 20).unwrap())
}

fn request(method: Method, path: &str, key: Option<&str>) -> Request<String> {
    let mut r = Request::builder().method(method).uri(path);
    if let Some(k) = key {
        r = r.header("idempotency-key", k);
    }
    r.body("{}".to_string()).unwrap()
}

/// How long the layer's replay statements hold by default.
const DAY: Duration = Duration::from_secs(24 * 3600);

fn ms(v: u64) -> Std {
    Std::from_millis(v)
}

#[tokio::test(start_paused = true)]
async fn each_fault_gets_the_attempts_seed_000_says() {
    let provider = Provider::default();
    provider.script("/refused", &[Reply::Refuse, Reply::Status(200)]);
    provider.script("/busy", &[Reply::StatusAfter(503, "1"), Reply::Status(200)]);
    provider.script("/throttled", &[Reply::StatusAfter(429, "2"), Reply::Status(200)]);
    provider.script("/broken", &[Reply::Status(500)]);
    provider.script("/invalid", &[Reply::Status(422)]);
    provider.script("/hangs", &[Reply::Hang]);
    let t0 = tokio::time::Instant::now();
    let mut svc = layer(budgeted()).layer(provider.service(t0));
    for path in ["/refused", "/busy", "/throttled", "/broken", "/invalid", "/hangs"] {
        let start = t0.elapsed();
        let _ = svc.ready().await.unwrap().call(request(Method::GET, path, None)).await;
        let attempts: Vec<Std> = provider.attempts(path).iter().map(|t| *t - start).collect();
        let expected: &[Std] = match path {
            "/refused" => &[ms(0), ms(100)],
            "/busy" => &[ms(0), ms(1_000)],
            "/throttled" => &[ms(0), ms(2_000)],
            "/broken" | "/invalid" => &[ms(0)],
            // Three attempts cut at 1 s each, 100 and 200 ms apart.
            _ => &[ms(0), ms(1_100), ms(2_300)],
        };
        assert_eq!(attempts, expected, "{path}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_keyless_post_that_times_out_is_sent_once_and_a_keyed_one_is_retried() {
    let provider = Provider::default();
    provider.script("/orders", &[Reply::Hang]);
    provider.script("/keyed", &[Reply::Hang, Reply::Status(201)]);
    let t0 = tokio::time::Instant::now();
    let mut svc = layer(budgeted()).layer(provider.service(t0));
    let err = svc.ready().await.unwrap().call(request(Method::POST, "/orders", None)).await.unwrap_err();
    assert!(matches!(err, HttpError::TimedOut { .. }), "{err}");
    let report = err.report().unwrap();
    // It may have arrived: not sent again.
    assert_eq!(
        (report.dispatched, report.retries, report.single_attempt, report.problem),
        (1, 0, None, Some(Problem::MayHaveArrived))
    );
    assert_eq!(report.replay_safety, ReplaySafety::UntilArrived);
    assert_eq!(provider.attempts("/orders").len(), 1);
    let response =
        svc.ready().await.unwrap().call(request(Method::POST, "/keyed", Some("k-1"))).await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!(
        (report.dispatched, report.single_attempt, report.disposition),
        (2, None, Disposition::Succeeded)
    );
    assert_eq!(report.replay_safety, ReplaySafety::provider_idempotent_mutation(DAY));
}

/// Seed 000's wrapper: "a connection refused ... means the request never arrived: the far side's
/// state is unchanged and a retry is safe", for a POST without a key as for any request; a 503 on
/// it arrived, and ends it.
#[tokio::test(start_paused = true)]
async fn a_keyless_post_is_sent_again_after_a_refused_connection_and_not_after_a_503() {
    let provider = Provider::default();
    provider.script("/orders", &[Reply::Refuse, Reply::Refuse, Reply::Status(201)]);
    provider.script("/shed", &[Reply::Refuse, Reply::StatusAfter(503, "1"), Reply::Status(201)]);
    let t0 = tokio::time::Instant::now();
    let mut svc = layer(budgeted()).layer(provider.service(t0));
    let response = svc.ready().await.unwrap().call(request(Method::POST, "/orders", None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    // 100 ms, then 200 ms of backoff (no jitter).
    assert_eq!(provider.attempts("/orders"), [ms(0), ms(100), ms(300)]);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!((report.dispatched, report.replay_safety), (3, ReplaySafety::UntilArrived));

    let t1 = t0.elapsed();
    let response = svc.ready().await.unwrap().call(request(Method::POST, "/shed", None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "the 503 is the answer");
    assert_eq!(provider.attempts("/shed"), [t1, t1 + ms(100)]);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!((report.dispatched, report.problem), (2, Some(Problem::MayHaveArrived)));
    assert_eq!(report.retry_after, Some(Std::from_secs(1)), "the far side's wait is kept");

    // A layer whose rule is one attempt for such a request, whatever became of it.
    provider.script("/once", &[Reply::Refuse, Reply::Status(201)]);
    let mut once = layer(budgeted()).keyless_once().layer(provider.service(t0));
    let err = once.ready().await.unwrap().call(request(Method::POST, "/once", None)).await.unwrap_err();
    let report = err.report().unwrap();
    assert_eq!(
        (report.dispatched, report.single_attempt, report.replay_safety),
        (1, Some(SingleAttempt::NotIdempotent), ReplaySafety::Unsafe)
    );
    assert_eq!(provider.attempts("/once").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_beyond_the_maximum_delay_comes_back_deferred_with_its_response() {
    let provider = Provider::default();
    provider.script("/slow-down", &[Reply::StatusAfter(429, "60")]);
    let mut svc = layer(budgeted()).layer(provider.service(tokio::time::Instant::now()));
    let response = svc.ready().await.unwrap().call(request(Method::GET, "/slow-down", None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!(report.disposition, Disposition::Deferred);
    assert_eq!(report.problem, Some(Problem::RetryAfterExceedsMaximumDelay));
    assert_eq!(report.retry_after, Some(Std::from_secs(60)));
    assert_eq!(report.retry_in, Some(Std::from_secs(60)), "try again when the far side said");
    assert_eq!(report.replay_safety, ReplaySafety::replayable_read(DAY));
    assert_eq!(report.deadline, Std::from_secs(10), "the layer's, with no RequestDeadline");
    assert_eq!(provider.attempts("/slow-down").len(), 1);
}

/// The server's clock is not this machine's: here it says 2015. Its "retry at 07:28:02", sent at
/// 07:28:00, is a wait of 2 s, not a date long past that would be retried at once.
#[tokio::test(start_paused = true)]
async fn an_http_date_retry_after_is_waited_on_the_servers_clock() {
    let provider = Provider::default();
    let busy = Reply::StatusDated {
        status: 503,
        date: "Wed, 21 Oct 2015 07:28:00 GMT",
        retry_after: "Wed, 21 Oct 2015 07:28:02 GMT",
    };
    provider.script("/dated", &[busy, Reply::Status(200)]);
    let mut svc = layer(budgeted()).layer(provider.service(tokio::time::Instant::now()));
    let response = svc.ready().await.unwrap().call(request(Method::GET, "/dated", None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(provider.attempts("/dated"), [ms(0), ms(2_000)]);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!((report.dispatched, report.waited, report.retry_after), (2, ms(2_000), Some(ms(2_000))));
}

#[tokio::test(start_paused = true)]
async fn an_open_circuit_fails_fast_in_call_without_touching_the_inner_service() {
    let provider = Provider::default();
    provider.script("/down", &[Reply::Status(500)]);
    let config = budgeted().breaker(BreakerConfig::consecutive_failures(1, Duration::from_secs(30)));
    let mut svc = layer(config).layer(provider.service(tokio::time::Instant::now()));
    let first = svc.ready().await.unwrap().call(request(Method::GET, "/down", None)).await.unwrap();
    assert_eq!(first.status(), StatusCode::INTERNAL_SERVER_ERROR, "the 500 goes back as a response");
    // poll_ready does not hold the caller back; call refuses at once.
    tokio::time::advance(ms(12_000)).await;
    let err = svc.ready().await.unwrap().call(request(Method::GET, "/down", None)).await.unwrap_err();
    let report = err.report().unwrap();
    assert_eq!(
        (report.disposition, report.problem, report.dispatched),
        (Disposition::Rejected, Some(Problem::CircuitOpen), 0)
    );
    assert_eq!(report.retry_in, Some(ms(18_000)), "what is left of the 30 s break");
    // What this service tells its own caller, in a 503 of its own.
    assert_eq!(relent_tokio::http::retry_after_value(report.retry_in.unwrap()), "18");
    assert_eq!(provider.attempts("/down").len(), 1, "no second request reached the provider");
}

/// A provider over capacity answers two payments with 503 (a POST without a key gets one attempt,
/// and its 503 goes back as the response); under a client throttle of K = 1 the third is refused
/// in `call`, unsent, with no time to try again: the throttle says how much, not when.
#[tokio::test(start_paused = true)]
async fn a_throttled_request_fails_fast_in_call_without_touching_the_inner_service() {
    let provider = Provider::default();
    provider.script("/pay", &[Reply::Status(503), Reply::Status(503), Reply::Status(200)]);
    let config = budgeted().client_throttle(relent_tokio::core::ClientThrottle::new(1_000));
    let mut svc = layer(config).layer(provider.service(tokio::time::Instant::now()));
    for _ in 0..2 {
        let shed = svc.ready().await.unwrap().call(request(Method::POST, "/pay", None)).await.unwrap();
        assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    let err = svc.ready().await.unwrap().call(request(Method::POST, "/pay", None)).await.unwrap_err();
    let report = err.report().unwrap();
    assert_eq!(
        (report.disposition, report.problem, report.dispatched, report.retry_in),
        (Disposition::Rejected, Some(Problem::ClientThrottled), 0, None)
    );
    assert_eq!(provider.attempts("/pay").len(), 2, "the third payment did not reach the provider");
}

/// A body that cannot be sent twice, like a stream.
#[derive(Debug)]
struct Stream;

impl relent_tokio::http::ReplayBody for Stream {
    fn try_clone(&self) -> Option<Self> {
        None
    }
}

#[tokio::test(start_paused = true)]
async fn a_replayable_request_whose_body_cannot_be_replayed_gets_one_attempt_and_says_so() {
    let calls = Arc::new(Mutex::new(0));
    let inner = {
        let calls = calls.clone();
        tower::service_fn(move |_req: Request<Stream>| {
            *calls.lock().unwrap() += 1;
            async { Ok::<_, std::io::Error>(Response::builder().status(503).body(String::new()).unwrap()) }
        })
    };
    let mut svc = layer(budgeted()).layer(inner);
    let request = Request::put("/uploads/1").body(Stream).unwrap();
    let response = svc.ready().await.unwrap().call(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!((report.dispatched, report.single_attempt), (1, Some(SingleAttempt::BodyNotReplayable)));
    assert_eq!(report.replay_safety, ReplaySafety::Unsafe, "a PUT, but its body cannot be sent twice");
    assert_eq!(*calls.lock().unwrap(), 1);
}

/// A body that can be copied `copies` times, then gives up: replayable by its own account, until
/// it is not.
/// The default rules for responses; a transport error means "busy, come back in 30 s".
#[derive(Clone)]
struct BusyWhenRefused;

impl relent_tokio::http::HttpClassifier<String, std::io::Error> for BusyWhenRefused {
    fn response(&self, response: &Response<String>) -> relent_tokio::http::Exchange {
        relent_tokio::http::HttpClassifier::<String, std::io::Error>::response(
            &relent_tokio::http::StatusClassifier::default(),
            response,
        )
    }
    fn error(&self, _error: &std::io::Error) -> Verdict<HZ> {
        Verdict::RetryableAfter(Duration::from_secs(30))
    }
}

#[derive(Debug)]
struct Flaky {
    copies: Arc<Mutex<usize>>,
}

impl relent_tokio::http::ReplayBody for Flaky {
    fn try_clone(&self) -> Option<Self> {
        let mut left = self.copies.lock().unwrap();
        *left = left.checked_sub(1)?;
        Some(Self { copies: self.copies.clone() })
    }
}

/// A body that counts the copies made of it, and says which one a request carried.
#[derive(Debug)]
struct Counted {
    copies: Arc<Mutex<u32>>,
    /// 0 for the request's own body, n for the n-th copy.
    copy: u32,
}

impl relent_tokio::http::ReplayBody for Counted {
    fn try_clone(&self) -> Option<Self> {
        let mut copies = self.copies.lock().unwrap();
        *copies += 1;
        Some(Self { copies: self.copies.clone(), copy: *copies })
    }
}

/// An inner service that answers each request with the next of `statuses` (the last one over and
/// over), keeps the copy number of each body it was sent, and counts its own clones.
struct Answering {
    statuses: &'static [u16],
    sent: Arc<Mutex<Vec<u32>>>,
    clones: Arc<Mutex<u32>>,
}

impl Clone for Answering {
    fn clone(&self) -> Self {
        *self.clones.lock().unwrap() += 1;
        Self { statuses: self.statuses, sent: self.sent.clone(), clones: self.clones.clone() }
    }
}

impl Service<Request<Counted>> for Answering {
    type Response = Response<String>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Response<String>, std::io::Error>>;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Counted>) -> Self::Future {
        let mut sent = self.sent.lock().unwrap();
        sent.push(req.into_body().copy);
        let status = self.statuses[(sent.len() - 1).min(self.statuses.len() - 1)];
        std::future::ready(Ok(Response::builder().status(status).body(String::new()).unwrap()))
    }
}

/// Each attempt a retry may follow sends a copy of the body, the first attempt the copy the layer
/// made to learn whether the body can be replayed, through a clone of the inner service; the last
/// attempt the policy allows sends the request's own body through the service the layer's `call`
/// cloned, and a request that gets one attempt has its body copied not at all.
#[tokio::test(start_paused = true)]
async fn a_body_and_the_service_are_copied_once_for_each_attempt_a_retry_may_follow_and_no_more() {
    /// A request, what the service answers, and what the test expects.
    struct Case {
        policy: RetryPolicy<HZ>,
        method: Method,
        answers: &'static [u16],
        /// The body each attempt carried: 0 for the request's own, n for the n-th copy.
        carried: &'static [u32],
        copies: u32,
        /// One by the layer's `call`, and one for each attempt but the last the policy allows.
        clones: u32,
    }
    let once = RetryPolicy::single_attempt().build().unwrap();
    let cases = [
        // A read that succeeds at once: the layer's copy went, the request's own body stayed.
        Case { policy: POLICY, method: Method::GET, answers: &[200], carried: &[1], copies: 1, clones: 2 },
        // A read retried twice: two copies, then the request's own body on the last attempt.
        Case {
            policy: POLICY,
            method: Method::GET,
            answers: &[503],
            carried: &[1, 2, 0],
            copies: 2,
            clones: 3,
        },
        Case {
            policy: POLICY,
            method: Method::GET,
            answers: &[503, 200],
            carried: &[1, 2],
            copies: 2,
            clones: 3,
        },
        // A keyless POST's first attempt sends a copy, as a retry follows it if it never arrives; a
        // 503 arrived, so none does.
        Case { policy: POLICY, method: Method::POST, answers: &[503], carried: &[1], copies: 1, clones: 2 },
        // A keyless POST under a policy of one attempt: its own body, and no copy made.
        Case { policy: once, method: Method::POST, answers: &[503], carried: &[0], copies: 0, clones: 1 },
        // A read under a policy of one attempt: no retry can follow it, so nothing is copied.
        Case { policy: once, method: Method::GET, answers: &[503], carried: &[0], copies: 0, clones: 1 },
    ];
    for Case { policy, method, answers: statuses, carried, copies: copied, clones: cloned } in cases {
        let (sent, clones, copies) = (Arc::default(), Arc::new(Mutex::new(0)), Arc::new(Mutex::new(0)));
        let answering = Answering { statuses, sent: Arc::clone(&sent), clones: clones.clone() };
        let dep = Dependency::with_seed("payrail", budgeted(), 1).unwrap();
        let mut svc = RetryLayer::new(dep, policy, Std::from_secs(10)).layer(answering);
        let request = Request::builder()
            .method(method.clone())
            .uri("/quote")
            .body(Counted { copies: copies.clone(), copy: 0 })
            .unwrap();
        svc.ready().await.unwrap().call(request).await.unwrap();
        let case = format!("{method} answered {statuses:?}, {} attempt(s)", policy.max_attempts());
        assert_eq!(*sent.lock().unwrap(), carried, "{case}: the bodies sent");
        assert_eq!(*copies.lock().unwrap(), copied, "{case}: the body's copies");
        assert_eq!(*clones.lock().unwrap(), cloned, "{case}: the service's clones");
    }
}

#[tokio::test(start_paused = true)]
async fn each_error_says_what_happened_and_its_chain_shows_each_message_once() {
    let provider = Provider::default();
    provider.script("/refused", &[Reply::Refuse]);
    provider.script("/hangs", &[Reply::Hang]);
    provider.script("/down", &[Reply::Status(500)]);
    let t0 = tokio::time::Instant::now();
    let breaker = BreakerConfig::consecutive_failures(4, Duration::from_secs(30));
    let mut svc = layer(budgeted().breaker(breaker)).layer(provider.service(t0));
    let mut send = async |method, path| svc.ready().await.unwrap().call(request(method, path, None)).await;

    let timed_out = send(Method::POST, "/hangs").await.unwrap_err();
    assert_eq!(
        chain(&timed_out),
        ["payrail: failed (may_have_arrived) after 1 attempt(s); last failure: attempt timed out after 1s"]
    );
    assert!(
        matches!(timed_out, HttpError::TimedOut { after, .. } if after == std::time::Duration::from_secs(1))
    );
    assert_eq!(timed_out.dependency(), Some("payrail"));
    let transport = send(Method::GET, "/refused").await.unwrap_err();
    assert!(matches!(transport, HttpError::Transport { .. }));
    assert_eq!(transport.dependency(), Some("payrail"));
    assert_eq!(
        chain(&transport),
        ["payrail: failed (attempts_exhausted) after 3 attempt(s); last failure: connection refused"]
    );
    // The timeout and the three refusals opened the circuit.
    let refused = send(Method::GET, "/down").await.unwrap_err();
    assert_eq!(chain(&refused), ["payrail: rejected (circuit_open) after 0 attempt(s); try again in 30s"]);
    assert_eq!(refused.dependency(), Some("payrail"));
    assert!(provider.attempts("/down").is_empty());

    // A wait longer than the policy's longest delay defers the request; the message says how long.
    let mut svc = layer(budgeted()).classifier(BusyWhenRefused).layer(provider.service(t0));
    let deferred = svc.ready().await.unwrap().call(request(Method::GET, "/refused", None)).await.unwrap_err();
    assert_eq!(
        chain(&deferred),
        ["payrail: deferred (retry_after_exceeds_maximum_delay) after 1 attempt(s); the far side asked to \
             wait 30s; last failure: connection refused"]
    );

    // A client's error with a cause: the message shows it, and the chain goes on to its cause.
    let inner = tower::service_fn(|_req: Request<String>| async {
        Err::<Response<String>, _>(Unavailable(std::io::ErrorKind::ConnectionRefused.into()))
    });
    let mut svc = layer(budgeted()).layer(inner);
    let caused = svc.ready().await.unwrap().call(request(Method::GET, "/quote", None)).await.unwrap_err();
    assert_eq!(
        chain(&caused),
        [
            "payrail: failed (attempts_exhausted) after 3 attempt(s); last failure: upstream unavailable",
            "connection refused"
        ]
    );

    // One copy: the layer's, which the first attempt sends; the retry's copy fails.
    let copies = Arc::new(Mutex::new(1));
    let inner = tower::service_fn(|_req: Request<Flaky>| async {
        Ok::<_, std::io::Error>(Response::builder().status(503).body(String::new()).unwrap())
    });
    let mut svc = layer(budgeted()).layer(inner);
    let flaky = Request::get("/report").body(Flaky { copies }).unwrap();
    let no_body = svc.ready().await.unwrap().call(flaky).await.unwrap_err();
    assert!(matches!(no_body, HttpError::BodyNotReplayable { .. }));
    assert_eq!(chain(&no_body), ["payrail: the request body could not be copied for attempt 2"]);
    assert_eq!(no_body.report().unwrap().dispatched, 2, "counted, though nothing was sent");

    let unbudgeted = DependencyConfig::new(Duration::from_secs(10));
    let mut svc = layer(unbudgeted).layer(provider.service(t0));
    let start = svc.ready().await.unwrap().call(request(Method::GET, "/never", None)).await.unwrap_err();
    assert!(start.report().is_none());
    assert_eq!(start.dependency(), None, "nothing started");
    assert_eq!(
        chain(&start),
        [format!("request not started: {}", StartError::RetryWithoutBudget { max_attempts: 3 })]
    );
    assert!(provider.attempts("/never").is_empty());
}

/// `request` carrying `deadline` in its extensions.
fn with_deadline(mut request: Request<String>, deadline: RequestDeadline) -> Request<String> {
    request.extensions_mut().insert(deadline);
    request
}

#[tokio::test(start_paused = true)]
async fn a_request_deadline_sooner_than_the_layers_cuts_the_attempts_to_fit_it() {
    let provider = Provider::default();
    provider.script("/hangs", &[Reply::Hang]);
    let t0 = tokio::time::Instant::now();
    let mut svc = layer(budgeted()).layer(provider.service(t0));
    // The layer allows 10 s; the caller has 1.5 s left. The first attempt times out at 1 s, the
    // second starts after the 100 ms backoff with the 0.4 s that is left, and no third fits.
    let request = with_deadline(request(Method::GET, "/hangs", None), RequestDeadline::within(ms(1_500)));
    let err = svc.ready().await.unwrap().call(request).await.unwrap_err();
    assert_eq!(provider.attempts("/hangs"), [ms(0), ms(1_100)]);
    assert!(matches!(err, HttpError::TimedOut { after, .. } if after == ms(400)), "{err}");
    let report = err.report().unwrap();
    assert_eq!(
        (report.disposition, report.problem, report.dispatched, report.elapsed),
        (Disposition::Failed, Some(Problem::RetryDelayExceedsDeadline), 2, ms(1_500))
    );
    assert_eq!(report.deadline, ms(1_500), "the report says which deadline the request ran under");
    assert_eq!(t0.elapsed(), ms(1_500), "the call returned at the caller's deadline");
}

#[tokio::test(start_paused = true)]
async fn a_request_whose_deadline_has_passed_is_refused_before_anything_is_sent() {
    let provider = Provider::default();
    let t0 = tokio::time::Instant::now();
    let mut svc = layer(budgeted()).layer(provider.service(t0));
    tokio::time::advance(ms(2_000)).await;
    for deadline in [RequestDeadline::at(t0), RequestDeadline::within(Std::ZERO)] {
        let request = with_deadline(request(Method::GET, "/quote", None), deadline);
        let err = svc.ready().await.unwrap().call(request).await.unwrap_err();
        assert!(matches!(err, HttpError::Refused { .. }), "{err}");
        assert_eq!(chain(&err), ["payrail: failed (deadline_exceeded) after 0 attempt(s)"]);
        assert_eq!(err.report().unwrap().deadline, Std::ZERO);
    }
    assert!(provider.attempts("/quote").is_empty(), "nothing reached the provider");
    assert_eq!(RequestDeadline::at(t0).remaining_at(tokio::time::Instant::now()), Std::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_request_deadline_later_than_the_layers_leaves_the_layers_in_force() {
    let provider = Provider::default();
    provider.script("/hangs", &[Reply::Hang]);
    let t0 = tokio::time::Instant::now();
    let dep = Dependency::with_seed("payrail", budgeted(), 1).unwrap();
    let mut svc = RetryLayer::new(dep, POLICY, ms(1_500)).layer(provider.service(t0));
    // The layer allows 1.5 s; a request deadline 60 s away, or as far as a duration goes, does
    // not extend it: two attempts, the second cut to 0.4 s, as in the test above.
    for (n, within) in [Std::from_secs(60), Std::MAX].into_iter().enumerate() {
        let start = t0.elapsed();
        let request = with_deadline(request(Method::GET, "/hangs", None), RequestDeadline::within(within));
        let err = svc.ready().await.unwrap().call(request).await.unwrap_err();
        assert!(matches!(err, HttpError::TimedOut { after, .. } if after == ms(400)), "{err}");
        let report = err.report().unwrap();
        assert_eq!((report.problem, report.deadline), (Some(Problem::RetryDelayExceedsDeadline), ms(1_500)));
        let attempts: Vec<Std> = provider.attempts("/hangs")[n * 2..].iter().map(|t| *t - start).collect();
        assert_eq!(attempts, [ms(0), ms(1_100)], "deadline {within:?} from now");
    }
    // What `within` makes of a span too long for tokio's clock: 30 years, as its doc says.
    let thirty_years = Std::from_secs(30 * 365 * 24 * 3600);
    let now = tokio::time::Instant::now();
    assert_eq!(RequestDeadline::within(Std::MAX).remaining_at(now), thirty_years);
    assert_eq!(RequestDeadline::within(thirty_years + ms(1)).remaining_at(now), thirty_years);
    assert_eq!(RequestDeadline::within(ms(1)).instant(), now + ms(1));
}

#[tokio::test(start_paused = true)]
async fn each_attempt_carries_the_request_deadline_to_the_inner_service() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let inner = {
        let seen = seen.clone();
        tower::service_fn(move |req: Request<String>| {
            let seen = seen.clone();
            async move {
                let mut seen = seen.lock().unwrap();
                seen.push(req.extensions().get::<RequestDeadline>().copied());
                let status = if seen.len() == 1 { 503 } else { 200 };
                Ok::<_, std::io::Error>(Response::builder().status(status).body(String::new()).unwrap())
            }
        })
    };
    let mut svc = layer(budgeted()).layer(inner);
    let deadline = RequestDeadline::at(tokio::time::Instant::now() + ms(5_000));
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(with_deadline(request(Method::GET, "/quote", None), deadline))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(*seen.lock().unwrap(), [Some(deadline), Some(deadline)]);
    assert_eq!(deadline.instant() - tokio::time::Instant::now(), ms(4_900), "after one 100 ms backoff");
}

/// A request under a policy of one attempt is still the replayable read it is: the report says
/// so, and no `SingleAttempt` reason is given, as none of the request's own made it one.
#[tokio::test(start_paused = true)]
async fn a_read_under_a_policy_of_one_attempt_is_sent_once_and_reported_as_a_read() {
    let provider = Provider::default();
    provider.script("/busy", &[Reply::Status(503)]);
    let dep = Dependency::with_seed("payrail", budgeted(), 1).unwrap();
    let once = RetryPolicy::single_attempt().build().unwrap();
    let mut svc =
        RetryLayer::new(dep, once, Std::from_secs(10)).layer(provider.service(tokio::time::Instant::now()));
    let response = svc.ready().await.unwrap().call(request(Method::GET, "/busy", None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!(
        (report.disposition, report.problem, report.dispatched, report.single_attempt),
        (Disposition::Failed, Some(Problem::AttemptsExhausted), 1, None)
    );
    assert_eq!(report.replay_safety, ReplaySafety::replayable_read(DAY));
    assert_eq!(provider.attempts("/busy").len(), 1);
}

/// `replay_valid_for` bounds how long after the call a request may still be sent again (seed
/// 003's statement lifetime): a retry that would start later is not made.
#[tokio::test(start_paused = true)]
async fn a_retry_that_would_start_after_the_replay_statement_ends_is_not_made() {
    let provider = Provider::default();
    provider.script("/busy", &[Reply::Status(503), Reply::Status(200)]);
    provider.script("/slow", &[Reply::StatusAfter(503, "1"), Reply::Status(200)]);
    let t0 = tokio::time::Instant::now();
    // The first backoff is 100 ms; the statement holds for 150 ms from the call.
    let mut svc = layer(budgeted()).replay_valid_for(ms(150)).layer(provider.service(t0));
    let response = svc.ready().await.unwrap().call(request(Method::GET, "/busy", None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "the retry at 100 ms is inside the statement");
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!(
        (report.dispatched, report.replay_safety),
        (2, ReplaySafety::replayable_read(Duration::from_millis(150)))
    );

    // A Retry-After of 1 s puts the retry past the statement's end: the 503 comes back.
    let start = t0.elapsed();
    let response = svc.ready().await.unwrap().call(request(Method::GET, "/slow", None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!(
        (report.disposition, report.problem, report.dispatched),
        (Disposition::Failed, Some(Problem::ReplayStatementExpired), 1)
    );
    assert_eq!(provider.attempts("/slow").len(), 1);
    assert_eq!(t0.elapsed() - start, Std::ZERO, "nothing was slept for a retry that could not be made");
}

/// An inner service whose readiness fails `failures` times, then is ready, and answers 200.
#[derive(Clone)]
struct NotReady {
    failures: Arc<Mutex<u32>>,
    calls: Arc<Mutex<u32>>,
}

impl Service<Request<String>> for NotReady {
    type Response = Response<String>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Response<String>, std::io::Error>>;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        let mut left = self.failures.lock().unwrap();
        if *left == 0 {
            return std::task::Poll::Ready(Ok(()));
        }
        *left -= 1;
        std::task::Poll::Ready(Err(std::io::ErrorKind::ConnectionRefused.into()))
    }

    fn call(&mut self, _req: Request<String>) -> Self::Future {
        *self.calls.lock().unwrap() += 1;
        std::future::ready(Ok(Response::builder().status(200).body(String::new()).unwrap()))
    }
}

/// The layer's `poll_ready` is always ready (see the module docs); the inner service's readiness
/// is awaited inside each attempt, so a client that cannot get ready (a pool that refused a
/// connection) fails that attempt as its error would, and is classified like one.
#[tokio::test(start_paused = true)]
async fn an_inner_service_that_fails_to_get_ready_fails_the_attempt_with_its_error() {
    let (failures, calls) = (Arc::new(Mutex::new(1)), Arc::new(Mutex::new(0)));
    let inner = NotReady { failures: failures.clone(), calls: calls.clone() };
    let t0 = tokio::time::Instant::now();
    let mut svc = layer(budgeted()).layer(inner);
    let response = svc.ready().await.unwrap().call(request(Method::GET, "/quote", None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!(
        (report.dispatched, report.retries, report.waited),
        (2, 1, ms(100)),
        "a refused connection is retried"
    );
    assert_eq!((*calls.lock().unwrap(), t0.elapsed()), (1, ms(100)), "one call, after the backoff");

    *failures.lock().unwrap() = u32::MAX;
    let err = svc.ready().await.unwrap().call(request(Method::GET, "/quote", None)).await.unwrap_err();
    let HttpError::Transport { error, report, .. } = &err else { panic!("{err}") };
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionRefused);
    assert_eq!((report.dispatched, report.problem), (3, Some(Problem::AttemptsExhausted)));
    assert_eq!(err.report(), Some(report));
    assert_eq!(*calls.lock().unwrap(), 1, "no call reached a service that was not ready");
}

const TIMEOUT: http::HeaderName = http::HeaderName::from_static("x-request-timeout-ms");

/// A service that records each request's timeout header, as sent and as the far side reads it
/// (the time left until its deadline), and hangs.
#[allow(clippy::type_complexity)]
fn reads_timeouts() -> (
    Arc<Mutex<Vec<(Option<String>, Option<Std>)>>>,
    impl Service<Request<String>, Response = Response<String>, Error = std::io::Error, Future: Send> + Clone,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let inner = {
        let seen = seen.clone();
        tower::service_fn(move |req: Request<String>| {
            let seen = seen.clone();
            async move {
                let sent = req.headers().get(&TIMEOUT).map(|v| v.to_str().unwrap().to_owned());
                let read = RequestDeadline::from_header(req.headers(), &TIMEOUT).unwrap();
                let left = read.map(|d| d.remaining_at(tokio::time::Instant::now()));
                seen.lock().unwrap().push((sent, left));
                std::future::pending::<Result<Response<String>, std::io::Error>>().await
            }
        })
    };
    (seen, inner)
}

#[tokio::test(start_paused = true)]
async fn each_attempt_tells_the_far_side_its_timeout_in_whole_milliseconds() {
    let (seen, inner) = reads_timeouts();
    let mut svc = layer(budgeted()).timeout_header(TIMEOUT).layer(inner);
    // 1 s per attempt; the caller has 1,500.7 ms: the second attempt, after the 100 ms backoff,
    // gets 400.7 ms, sent as 400. The caller's own value of the header is replaced.
    let mut request = request(Method::GET, "/hangs", None);
    request.headers_mut().insert(&TIMEOUT, http::HeaderValue::from_static("60000"));
    let request = with_deadline(request, RequestDeadline::within(Std::from_micros(1_500_700)));
    let err = svc.ready().await.unwrap().call(request).await.unwrap_err();
    assert!(matches!(err, HttpError::TimedOut { after, .. } if after == Std::from_micros(400_700)), "{err}");
    assert_eq!(
        *seen.lock().unwrap(),
        [(Some("1000".into()), Some(ms(1_000))), (Some("400".into()), Some(ms(400)))],
        "each attempt's timeout, sent and read back on the far side"
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_timeout_header_the_request_goes_as_it_was_given() {
    let (seen, inner) = reads_timeouts();
    let mut svc = layer(budgeted()).layer(inner);
    let mut request = request(Method::GET, "/hangs", None);
    request.headers_mut().insert(&TIMEOUT, http::HeaderValue::from_static("60000"));
    let _ = tokio::time::timeout(ms(1_500), svc.ready().await.unwrap().call(request)).await;
    assert_eq!(
        *seen.lock().unwrap(),
        [(Some("60000".into()), Some(ms(60_000))), (Some("60000".into()), Some(ms(60_000)))]
    );
    let request = self::request(Method::GET, "/hangs", None);
    let _ = tokio::time::timeout(ms(10), svc.ready().await.unwrap().call(request)).await;
    assert_eq!(seen.lock().unwrap()[2], (None, None));
}

#[tokio::test(start_paused = true)]
async fn a_timeout_header_is_read_as_whole_milliseconds_the_smallest_of_several() {
    let read = |values: &[&[u8]]| {
        let mut headers = http::HeaderMap::new();
        for v in values {
            headers.append(&TIMEOUT, http::HeaderValue::from_bytes(v).unwrap());
        }
        RequestDeadline::from_header(&headers, &TIMEOUT)
            .map(|d| d.map(|d| d.remaining_at(tokio::time::Instant::now())))
    };
    assert_eq!(read(&[]), Ok(None));
    assert_eq!(read(&[b"0"]), Ok(Some(Std::ZERO)));
    assert_eq!(read(&[b"2500"]), Ok(Some(ms(2_500))));
    assert_eq!(read(&[b"0042"]), Ok(Some(ms(42))));
    assert_eq!(read(&[b"900", b"300", b"700"]), Ok(Some(ms(300))));
    // Too large for 64 bits, or for tokio's clock: 30 years, as `RequestDeadline::within` says.
    let thirty_years = Std::from_secs(30 * 365 * 24 * 3600);
    assert_eq!(read(&[b"99999999999999999999999"]), Ok(Some(thirty_years)));
    assert_eq!(read(&[b"18446744073709551615"]), Ok(Some(thirty_years)));
    for bad in [&b""[..], b"2.5", b"2500ms", b"-1", b"+1", b" 1", b"1 ", b"1e3", b"\xff1"] {
        let err = read(&[b"100", bad]).unwrap_err();
        assert_eq!(err.header, TIMEOUT);
        assert_eq!(err.value, String::from_utf8_lossy(bad), "{bad:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "`{}` in header x-request-timeout-ms is not a timeout: the header holds whole milliseconds, such as 2500",
                err.value
            )
        );
    }
}

proptest::proptest! {
    /// Whatever bytes a caller sends in the header, one value or several: reading them never
    /// panics, takes exactly the values of digits alone (any other is refused, naming the first
    /// such value), and gives the smallest, as milliseconds from now.
    #[test]
    fn any_timeout_header_is_read_as_its_smallest_value_or_refused(
        values in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::string::bytes_regex("[0-9]{1,6}").unwrap(),
                proptest::string::bytes_regex("[0-9]{1,3}[ .a-z+-][0-9]{0,2}").unwrap(),
                proptest::collection::vec(proptest::num::u8::ANY, 0..8),
            ],
            0..4,
        )
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        let _entered = runtime.enter();
        let mut headers = http::HeaderMap::new();
        // What http takes as a header value (no control bytes but tab), in order.
        let mut sent: Vec<Vec<u8>> = Vec::new();
        for v in &values {
            if let Ok(value) = http::HeaderValue::from_bytes(v) {
                headers.append(&TIMEOUT, value);
                sent.push(v.clone());
            }
        }
        let read = RequestDeadline::from_header(&headers, &TIMEOUT);
        let now = tokio::time::Instant::now();
        match sent.iter().find(|v| v.is_empty() || !v.iter().all(u8::is_ascii_digit)) {
            Some(bad) => proptest::prop_assert_eq!(
                read.map_err(|e| e.value),
                Err::<Option<RequestDeadline>, String>(String::from_utf8_lossy(bad).into_owned())
            ),
            None => {
                let least = sent.iter().map(|v| std::str::from_utf8(v).unwrap().parse::<u64>().unwrap()).min();
                let read = read.unwrap().map(|d| d.remaining_at(now));
                proptest::prop_assert_eq!(read, least.map(Std::from_millis));
            }
        }
    }
}

/// A read still unanswered after the layer's hedge delay gets a second copy through a clone of the
/// service; the first answer is the response, and its report says it is the hedge's.
#[tokio::test(start_paused = true)]
async fn a_read_still_out_after_the_hedge_delay_gets_a_second_copy_and_the_first_answer_wins() {
    let provider = Provider::default();
    let t0 = tokio::time::Instant::now();
    provider.script("/quote", &[Reply::Hang, Reply::Slow(200, 20)]);
    provider.script("/fast", &[Reply::Slow(200, 30)]);
    provider.script("/first", &[Reply::Slow(200, 80), Reply::Slow(200, 100)]);
    let mut svc = layer(budgeted()).hedge_after(ms(50)).layer(provider.service(t0));

    let response = svc.ready().await.unwrap().call(request(Method::GET, "/quote", None)).await.unwrap();
    assert_eq!((response.status(), t0.elapsed()), (StatusCode::OK, ms(70)));
    assert_eq!(provider.attempts("/quote"), [ms(0), ms(50)]);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!(
        (report.hedge, report.dispatched, report.retries, report.disposition),
        (true, 1, 1, Disposition::Succeeded)
    );
    assert!(report.hedge_sent);

    // Answered before the delay: one copy, no hedge.
    let t1 = t0.elapsed();
    let response = svc.ready().await.unwrap().call(request(Method::GET, "/fast", None)).await.unwrap();
    assert_eq!((t0.elapsed() - t1, provider.attempts("/fast")), (ms(30), vec![t1]));
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!((report.hedge, report.hedge_sent), (false, false));

    // The first copy answers while the hedge is out: its answer is the response.
    let t2 = t0.elapsed();
    let response = svc.ready().await.unwrap().call(request(Method::GET, "/first", None)).await.unwrap();
    assert_eq!((t0.elapsed() - t2, provider.attempts("/first")), (ms(80), vec![t2, t2 + ms(50)]));
    // It says a hedge was sent: one call more than its one attempt.
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!((report.hedge, report.hedge_sent, report.dispatched), (false, true, 1));
}

/// Only requests of idempotent methods are hedged. A POST without an `Idempotency-Key` gets its one
/// attempt however long it takes (it is sent again only when it never arrived); one with a key is retried after its attempt times out, not
/// hedged: a provider's key protects a repeat, not a copy in flight.
#[tokio::test(start_paused = true)]
async fn only_reads_are_hedged_a_keyless_post_gets_one_attempt_and_a_keyed_one_is_retried() {
    let provider = Provider::default();
    let t0 = tokio::time::Instant::now();
    provider.script("/charge", &[Reply::Slow(201, 300)]);
    provider.script("/refund", &[Reply::Hang, Reply::Slow(201, 10)]);
    provider.script("/quote", &[Reply::Hang, Reply::Slow(200, 10)]);
    // A classifier set after the delay keeps it.
    let classifier = relent_tokio::http::StatusClassifier::default();
    let mut svc = layer(budgeted()).hedge_after(ms(50)).classifier(classifier).layer(provider.service(t0));
    let response = svc.ready().await.unwrap().call(request(Method::POST, "/charge", None)).await.unwrap();
    assert_eq!((response.status(), provider.attempts("/charge")), (StatusCode::CREATED, vec![ms(0)]));
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!((report.hedge, report.replay_safety), (false, ReplaySafety::UntilArrived));

    let t1 = t0.elapsed();
    let keyed = request(Method::POST, "/refund", Some("r-1"));
    let response = svc.ready().await.unwrap().call(keyed).await.unwrap();
    // The first attempt's 1 s timeout, then 100 ms of backoff.
    assert_eq!(provider.attempts("/refund"), [t1, t1 + ms(1_100)]);
    let report = response.extensions().get::<RetryReport>().unwrap();
    assert_eq!((report.hedge, report.dispatched), (false, 2));

    let t2 = t0.elapsed();
    let response = svc.ready().await.unwrap().call(request(Method::GET, "/quote", None)).await.unwrap();
    assert_eq!(provider.attempts("/quote"), [t2, t2 + ms(50)]);
    assert!(response.extensions().get::<RetryReport>().unwrap().hedge);
}

/// Every attempt of a hedged request sends a copy of its body through a clone of the service, the
/// request's own body never: either of two attempts out at once may be the last one running.
#[tokio::test(start_paused = true)]
async fn each_attempt_of_a_hedged_request_sends_a_copy_of_the_body_through_a_clone_of_the_service() {
    #[derive(Clone)]
    struct FirstHangs(Arc<Mutex<Vec<u32>>>);
    impl Service<Request<Counted>> for FirstHangs {
        type Response = Response<String>;
        type Error = std::io::Error;
        type Future =
            std::pin::Pin<Box<dyn Future<Output = Result<Response<String>, std::io::Error>> + Send>>;
        fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn call(&mut self, req: Request<Counted>) -> Self::Future {
            let mut sent = self.0.lock().unwrap();
            sent.push(req.into_body().copy);
            let first = sent.len() == 1;
            Box::pin(async move {
                if first {
                    std::future::pending::<()>().await;
                }
                Ok(Response::new(String::new()))
            })
        }
    }
    let (sent, copies) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(0)));
    let dep = Dependency::with_seed("payrail", budgeted(), 1).unwrap();
    let mut svc =
        RetryLayer::new(dep, POLICY, Std::from_secs(10)).hedge_after(ms(50)).layer(FirstHangs(sent.clone()));
    let body = Counted { copies: copies.clone(), copy: 0 };
    let request = Request::builder().uri("/quote").body(body).unwrap();
    let response = svc.ready().await.unwrap().call(request).await.unwrap();
    assert!(response.extensions().get::<RetryReport>().unwrap().hedge);
    assert_eq!((sent.lock().unwrap().clone(), *copies.lock().unwrap()), (vec![1, 2], 2));
}

/// A hedging layer whose policy allows one attempt refuses each request it would hedge, before
/// anything is sent: a hedge is a repeat.
#[tokio::test(start_paused = true)]
async fn a_hedging_layer_with_a_policy_of_one_attempt_refuses_what_it_would_hedge() {
    let provider = Provider::default();
    let t0 = tokio::time::Instant::now();
    let dep = Dependency::with_seed("payrail", budgeted(), 1).unwrap();
    let once = RetryPolicy::single_attempt().build().unwrap();
    let mut svc =
        RetryLayer::new(dep, once, Std::from_secs(10)).hedge_after(ms(50)).layer(provider.service(t0));
    let refused = svc.ready().await.unwrap().call(request(Method::GET, "/quote", None)).await.unwrap_err();
    assert!(matches!(refused, HttpError::Start(StartError::HedgeWithoutRetries)), "{refused:?}");
    assert!(refused.to_string().contains("at least 2 attempts"), "{refused}");
    assert!(provider.attempts("/quote").is_empty());
}

/// A layer of sheddable requests against two slots, half kept for critical work: with one
/// sheddable request in flight the next is refused unsent (`bulkhead_full`), and a request that
/// says it is critical in its extensions takes the slot kept for it.
#[tokio::test(start_paused = true)]
async fn a_sheddable_layer_leaves_the_critical_reserve_to_requests_that_say_they_are_critical() {
    use relent_tokio::core::Criticality;
    let provider = Provider::default();
    provider.script("/quote", &[Reply::Hang]);
    let config = budgeted().bulkhead(2).critical_reserve(50);
    let svc = layer(config)
        .criticality(Criticality::Sheddable)
        .layer(provider.service(tokio::time::Instant::now()));
    let first = tokio::spawn(svc.clone().oneshot(request(Method::GET, "/quote", None)));
    tokio::task::yield_now().await;
    assert_eq!(provider.attempts("/quote").len(), 1);
    let err = svc.clone().oneshot(request(Method::GET, "/quote", None)).await.unwrap_err();
    let report = err.report().unwrap();
    assert_eq!(
        (report.disposition, report.problem, report.dispatched, report.criticality),
        (Disposition::Rejected, Some(Problem::BulkheadFull), 0, Criticality::Sheddable)
    );
    let mut critical = request(Method::GET, "/quote", None);
    critical.extensions_mut().insert(Criticality::Critical);
    let second = tokio::spawn(svc.clone().oneshot(critical));
    tokio::task::yield_now().await;
    assert_eq!(provider.attempts("/quote").len(), 2, "the critical request went");
    // Both slots taken: a critical request is refused too.
    let mut critical = request(Method::GET, "/quote", None);
    critical.extensions_mut().insert(Criticality::Critical);
    let err = svc.clone().oneshot(critical).await.unwrap_err();
    let report = err.report().unwrap();
    assert_eq!((report.problem, report.criticality), (Some(Problem::BulkheadFull), Criticality::Critical));
    first.abort();
    second.abort();
}
