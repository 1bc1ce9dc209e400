//! The server's side of a deadline sent in a header (`DeadlineLayer`), on tokio's paused clock:
//! which deadline a handler runs under, the 400 for a header that is not a timeout, and the whole
//! chain, from a client's attempt to the calls its server makes.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration as Std;

use http::{HeaderName, Request, Response, StatusCode};
use relent_tokio::core::{
    Classify, Context, DependencyConfig, Jitter, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tokio::{DeadlineLayer, Dependency, Duration, HZ, RequestDeadline, RetryLayer, attempt_expiry};
use tower::{Layer, Service, ServiceExt};

const TIMEOUT: HeaderName = HeaderName::from_static("x-request-timeout-ms");

fn ms(v: u64) -> Std {
    Std::from_millis(v)
}

/// A handler that answers with the time it has left and the deadline in its request's extensions,
/// counting its calls.
fn handler(
    calls: Arc<AtomicU32>,
) -> impl Service<Request<String>, Response = Response<String>, Error = std::convert::Infallible> + Clone {
    tower::service_fn(move |request: Request<String>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move {
            let now = tokio::time::Instant::now();
            let left = attempt_expiry().map(|end| end - now);
            let given = request.extensions().get::<RequestDeadline>().map(|d| d.remaining_at(now));
            Ok(Response::new(format!("{left:?} {given:?}")))
        }
    })
}

async fn serve(
    server: &mut impl Service<Request<String>, Response = Response<String>, Error = std::convert::Infallible>,
    timeout: Option<&str>,
) -> Response<String> {
    let mut request = Request::get("/quote");
    if let Some(t) = timeout {
        request = request.header(&TIMEOUT, t);
    }
    server.ready().await.unwrap().call(request.body(String::new()).unwrap()).await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_handler_runs_within_what_its_caller_waits_and_never_past_the_server_s_limit() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut server = DeadlineLayer::new(TIMEOUT, ms(2_000)).layer(handler(calls.clone()));
    for (sent, left) in [(Some("250"), 250), (Some("0"), 0), (Some("60000"), 2_000), (None, 2_000)] {
        let response = serve(&mut server, sent).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.body(), &format!("Some({:?}) Some({:?})", ms(left), ms(left)), "sent {sent:?}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(attempt_expiry(), None, "nothing is left bounded after a request");
}

#[tokio::test(start_paused = true)]
async fn a_header_that_is_not_a_timeout_is_answered_400_without_running_the_handler() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut server = DeadlineLayer::new(TIMEOUT, ms(2_000)).layer(handler(calls.clone()));
    for bad in ["2.5s", "-1", ""] {
        let response = serve(&mut server, Some(bad)).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            response.body(),
            &format!(
                "`{bad}` in header x-request-timeout-ms is not a timeout: the header holds whole milliseconds, such as 2500"
            )
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[derive(Debug)]
struct Down;

impl Classify<HZ> for Down {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

/// The whole chain: a client's attempt of 500 ms says so in the header; the server behind it runs
/// its handler within that; the handler's own call to a ledger that hangs, which would allow
/// itself 10 s, is cut to fit what the client waits: its second attempt gets the 100 ms left, not
/// its 300 (the client's timeout drops the handler at 500 ms either way, in this one process, as
/// hyper drops a handler whose client closed the connection; `tests/tests/deadline_e2e.rs` shows
/// what the cut gives a server over a real connection: an answer in time).
#[tokio::test(start_paused = true)]
async fn a_client_s_attempt_timeout_bounds_the_calls_its_server_makes_for_it() {
    let budget =
        || DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 20).unwrap());
    let ledger = Dependency::with_seed("ledger", budget(), 1).unwrap();
    let inner_policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1))
        .jitter(Jitter::None)
        .attempt_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let t0 = tokio::time::Instant::now();
    // When each of the ledger's attempts started, and the timeout it was given.
    let ledger_calls: Arc<Mutex<Vec<(Std, Std)>>> = Arc::default();
    let handler = {
        let ledger_calls = ledger_calls.clone();
        tower::service_fn(move |_: Request<String>| {
            let (ledger, ledger_calls) = (ledger.clone(), ledger_calls.clone());
            async move {
                let read = Context::new(
                    Duration::from_secs(10),
                    ReplaySafety::replayable_read(Duration::from_secs(60)),
                );
                let done = ledger
                    .execute_detailed(&inner_policy, read, |attempt| {
                        ledger_calls.lock().unwrap().push((t0.elapsed(), attempt.timeout()));
                        std::future::pending::<Result<(), Down>>()
                    })
                    .await
                    .unwrap();
                Ok::<_, std::convert::Infallible>(Response::new(String::from(done.completion.code())))
            }
        })
    };
    let server = DeadlineLayer::new(TIMEOUT, ms(10_000)).layer(handler);
    let client_policy =
        RetryPolicy::single_attempt().attempt_timeout(Duration::from_millis(500)).build().unwrap();
    let payrail = Dependency::with_seed("payrail", budget(), 1).unwrap();
    let mut client = RetryLayer::new(payrail, client_policy, ms(5_000)).timeout_header(TIMEOUT).layer(server);
    let _ = client.ready().await.unwrap().call(Request::get("/quote").body(String::new()).unwrap()).await;
    assert_eq!(*ledger_calls.lock().unwrap(), [(ms(0), ms(300)), (ms(400), ms(100))]);
    assert_eq!(t0.elapsed(), ms(500));
}

/// A handler that is never ready: the layer says so, with its error, rather than take requests.
#[derive(Clone)]
struct Overloaded;

impl Service<Request<String>> for Overloaded {
    type Response = Response<String>;
    type Error = &'static str;
    type Future = std::future::Ready<Result<Response<String>, &'static str>>;
    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), &'static str>> {
        std::task::Poll::Ready(Err("overloaded"))
    }
    fn call(&mut self, _: Request<String>) -> Self::Future {
        std::future::ready(Ok(Response::new(String::from("served"))))
    }
}

#[tokio::test(start_paused = true)]
async fn the_layer_is_ready_when_its_handler_is() {
    let mut server = DeadlineLayer::new(TIMEOUT, ms(2_000)).layer(Overloaded);
    assert_eq!(server.ready().await.err(), Some("overloaded"));
}
