//! End to end: a deadline sent in a header, over real sockets and in real time. A client's attempt
//! of 1 s tells a hyper server behind `DeadlineLayer` so (`RetryLayer::timeout_header`); the
//! server's handler calls a ledger that hangs, under a context of 10 s, with attempts of 600 ms
//! 500 ms apart. Knowing it has 1 s, the handler's call gives up when its first attempt times
//! out (a second would start after the deadline) and the handler answers 504 in time for the
//! client to read it. Without the header, the call would retry at 1.1 s and the client would
//! time out with no answer.

use std::sync::{Arc, Mutex};
use std::time::{Duration as Std, Instant};

use bytes::Bytes;
use http::{HeaderName, Request, Response};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use relent_tokio::core::{Context, Jitter, ReplaySafety, RetryPolicy, Verdict};
use relent_tokio::{DeadlineLayer, Dependency, Duration, HZ, RetryLayer};
use tower::{Layer, Service, ServiceExt};

fn budgeted() -> relent_tokio::core::DependencyConfig<HZ> {
    let budget = relent_tokio::core::RetryBudget::ratio(10, 20).unwrap();
    relent_tokio::core::DependencyConfig::new(Duration::from_secs(10)).budget(budget)
}

const TIMEOUT: HeaderName = HeaderName::from_static("x-request-timeout-ms");

/// What the server's handler saw of its call to the ledger: the deadline it ran under, its
/// problem code, and how long after the request arrived it ended.
type Seen = Arc<Mutex<Option<(Std, &'static str, Std)>>>;

/// A hyper server on 127.0.0.1 whose handler calls a ledger that never answers, through
/// relent-tokio, within the deadline `DeadlineLayer` gives it (the server's own limit: 10 s), and
/// answers 504 with the call's problem code.
async fn server(seen: Seen) -> std::net::SocketAddr {
    let ledger = Dependency::new("ledger", budgeted()).unwrap();
    let policy: RetryPolicy<HZ> =
        RetryPolicy::exponential(3, Duration::from_millis(500), Duration::from_secs(1))
            .jitter(Jitter::None)
            .attempt_timeout(Duration::from_millis(600))
            .build()
            .unwrap();
    let handler = tower::service_fn(move |_: Request<hyper::body::Incoming>| {
        let (ledger, seen) = (ledger.clone(), seen.clone());
        async move {
            let arrived = Instant::now();
            let read =
                Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(60)));
            let done = ledger
                .execute_detailed(&policy, read, |_| std::future::pending::<Result<(), Verdict<HZ>>>())
                .await
                .unwrap();
            *seen.lock().unwrap() = Some((done.deadline, done.completion.code(), arrived.elapsed()));
            let mut answer = Response::new(Full::new(Bytes::from_static(done.completion.code().as_bytes())));
            *answer.status_mut() = http::StatusCode::GATEWAY_TIMEOUT;
            Ok::<_, std::convert::Infallible>(answer)
        }
    });
    let service = DeadlineLayer::new(TIMEOUT, Std::from_secs(10)).layer(handler);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let service = service.clone();
            tokio::spawn(async move {
                let serve = hyper::service::service_fn(move |request| service.clone().oneshot(request));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), serve)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_knows_its_client_s_timeout_answers_within_it_over_a_real_connection() {
    let seen: Seen = Arc::default();
    let addr = server(seen.clone()).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let once = RetryPolicy::single_attempt().attempt_timeout(Duration::from_secs(1)).build().unwrap();
    let payrail = Dependency::new("payrail", budgeted()).unwrap();
    let mut client = RetryLayer::new(payrail, once, Std::from_secs(5)).timeout_header(TIMEOUT).layer(client);
    let request = Request::get(format!("http://{addr}/quote")).body(Full::new(Bytes::new())).unwrap();
    let response = client.ready().await.unwrap().call(request).await.unwrap();
    assert_eq!(response.status(), http::StatusCode::GATEWAY_TIMEOUT);
    let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    assert_eq!(body, "retry_delay_exceeds_deadline");
    let (deadline, code, took) = seen.lock().unwrap().expect("the handler answered");
    // The header said 1000 (whole milliseconds, rounded down), read on arrival: what was left when
    // the ledger's call started is at most that, less the little the request took to get there.
    assert!(deadline <= Std::from_secs(1) && deadline > Std::from_millis(900), "{deadline:?}");
    assert_eq!(code, "retry_delay_exceeds_deadline");
    // The first attempt's 600 ms, and the retry refused then: about 600 ms of real time, well
    // before the client's 1 s.
    assert!(took >= Std::from_millis(600) && took < Std::from_secs(1), "{took:?}");
}
