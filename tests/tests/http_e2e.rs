//! End to end: relent-tokio's tower layer over hyper's pooled client, against the examples' real
//! payment provider on 127.0.0.1, with real sockets and real time. Each request scripts its own
//! faults (`x-fault`, per attempt) and the provider records what arrived and what it did.

use std::time::Duration as Std;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relent_examples::provider::{Provider, Script};
use relent_tokio::core::{
    BreakerConfig, DependencyConfig, Disposition, Jitter, Problem, ReplaySafety, RetryPolicy,
};
use relent_tokio::{Dependency, Duration, HZ, HttpError, RequestDeadline, RetryLayer, RetryReport};
use tower::{Layer, Service, ServiceExt};

mod e2e;
use e2e::{POLICY, budgeted};

type Svc = relent_tokio::Retry<Client<HttpConnector, Full<Bytes>>>;

fn client(config: DependencyConfig<HZ>) -> Svc {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Std::from_millis(250)));
    let client = Client::builder(TokioExecutor::new()).build(connector);
    let dependency = Dependency::with_seed("payrail", config, 3).unwrap();
    RetryLayer::new(dependency, POLICY, Std::from_secs(10)).layer(client)
}

fn request(
    provider: &Provider,
    method: Method,
    path: &str,
    id: &str,
    fault: &str,
    key: Option<&str>,
) -> Request<Full<Bytes>> {
    e2e::request(&provider.url(path), method, id, fault, key, Full::new(Bytes::from_static(b"{}")))
}

async fn send(
    svc: &mut Svc,
    req: Request<Full<Bytes>>,
) -> Result<(StatusCode, RetryReport), HttpError<hyper_util::client::legacy::Error>> {
    let response = svc.ready().await.unwrap().call(req).await?;
    let report = *response.extensions().get::<RetryReport>().unwrap();
    Ok((response.status(), report))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_gets_its_attempts_and_retry_after_is_honoured_against_a_real_server() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    let mut svc = client(budgeted());
    let cases = [
        ("a", Method::GET, "503:1,ok", StatusCode::OK, 2),
        ("b", Method::GET, "429:1,ok", StatusCode::OK, 2),
        ("c", Method::GET, "500", StatusCode::INTERNAL_SERVER_ERROR, 1),
        ("d", Method::GET, "422", StatusCode::UNPROCESSABLE_ENTITY, 1),
        ("e", Method::GET, "hang:2000,hang:2000,ok", StatusCode::OK, 3),
        ("f", Method::GET, "503:0,503:0,503:0,503:0", StatusCode::SERVICE_UNAVAILABLE, 4),
    ];
    for (id, method, fault, status, attempts) in cases {
        let (got, report) =
            send(&mut svc, request(&provider, method, "/quote", id, fault, None)).await.unwrap();
        assert_eq!((got, report.dispatched), (status, attempts), "{id}: {fault}");
        assert_eq!(provider.arrivals(id).len(), usize::from(attempts), "{id}: what the provider saw");
    }
    // Retry-After: 1 -> the second attempt arrives no sooner than 1 s after the first.
    for id in ["a", "b"] {
        let arrivals = provider.arrivals(id);
        assert!(arrivals[1] - arrivals[0] >= Std::from_secs(1), "{id}: {:?}", arrivals[1] - arrivals[0]);
    }
    // The last of four 503s goes back to the caller as the response, with the attempts counted.
    assert_eq!(provider.effects().performed, 0, "quotes have no side effect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_post_that_times_out_is_sent_once() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    let mut svc = client(budgeted());
    let err = send(&mut svc, request(&provider, Method::POST, "/orders", "k1", "hang:2000,ok", None))
        .await
        .unwrap_err();
    assert!(matches!(err, HttpError::TimedOut { .. }), "{err}");
    let report = err.report().unwrap();
    assert_eq!(
        (report.replay_safety, report.problem),
        (ReplaySafety::UntilArrived, Some(Problem::MayHaveArrived))
    );
    assert_eq!(provider.arrivals("k1").len(), 1, "never resent");
    assert_eq!(provider.orders_for("k1"), 1, "the order was placed once, its answer lost");
}

/// hyper-util's client says when it could not connect, a connect timeout included, and
/// relent-tokio's `hyper-util` feature takes its word: a keyless POST to an address that never
/// answers is sent again after each connect timeout, as after a refused connection, until the
/// policy's attempts run out. (An io `TimedOut` alone could be a read that timed out.)
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_post_whose_connect_timed_out_never_arrived_and_is_sent_again() {
    let (addr, _listener, _held) = e2e::black_hole().await;
    // A connect timeout of 100 ms, 200 ms inside the attempt timeout: it fires first on a busy
    // machine too.
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Std::from_millis(100)));
    let client = Client::builder(TokioExecutor::new()).build(connector);
    let dependency = Dependency::with_seed("payrail", budgeted(), 3).unwrap();
    let mut svc = RetryLayer::new(dependency, POLICY, Std::from_secs(10)).layer(client);
    let order = e2e::request(
        &format!("http://{addr}/orders"),
        Method::POST,
        "o",
        "ok",
        None,
        Full::new(Bytes::from_static(b"{}")),
    );
    let err = send(&mut svc, order).await.unwrap_err();
    let HttpError::Transport { error, report, .. } = &err else { panic!("{err}") };
    assert!(error.is_connect(), "hyper-util's connect error: {error:?}");
    assert_eq!(
        (report.dispatched, report.problem, report.replay_safety),
        (4, Some(Problem::AttemptsExhausted), ReplaySafety::UntilArrived)
    );
    assert_eq!(report.waited, Std::from_millis(150 + 300 + 600));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_post_that_times_out_is_retried_and_the_provider_performs_it_once() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    let mut svc = client(budgeted());
    let (status, report) =
        send(&mut svc, request(&provider, Method::POST, "/orders", "k2", "hang:2000,ok", Some("key-k2")))
            .await
            .unwrap();
    assert_eq!((status, report.dispatched), (StatusCode::CREATED, 2));
    assert_eq!(provider.arrivals("k2").len(), 2);
    assert_eq!(provider.orders_for("k2"), 1, "deduplicated by its key");
    assert_eq!(provider.effects().duplicates, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_beyond_the_maximum_delay_comes_back_deferred_with_the_hint() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    let mut svc = client(budgeted());
    let (status, report) =
        send(&mut svc, request(&provider, Method::GET, "/quote", "t", "429:60", None)).await.unwrap();
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        (report.disposition, report.problem),
        (Disposition::Deferred, Some(Problem::RetryAfterExceedsMaximumDelay))
    );
    assert_eq!(report.retry_after, Some(Std::from_secs(60)));
    assert_eq!(provider.arrivals("t").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_fails_fast_without_a_connection_being_made() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    let mut svc = client(budgeted().breaker(BreakerConfig::consecutive_failures(1, Duration::from_secs(30))));
    let (status, _) =
        send(&mut svc, request(&provider, Method::GET, "/quote", "x", "500", None)).await.unwrap();
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let (requests, connections) = (provider.effects().requests, provider.connections());
    let err = send(&mut svc, request(&provider, Method::GET, "/quote", "y", "ok", None)).await.unwrap_err();
    let report = err.report().unwrap();
    assert_eq!((report.problem, report.dispatched), (Some(Problem::CircuitOpen), 0));
    assert_eq!(provider.effects().requests, requests, "no request reached the provider");
    assert_eq!(provider.connections(), connections, "no connection was made");
}

/// Patient enough to outlast a 1 s restart with room to spare: attempts at 0, 0.2, 0.6, 1.4 and 3 s.
const PATIENT: RetryPolicy<HZ> =
    match RetryPolicy::exponential(5, Duration::from_millis(200), Duration::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(Duration::from_millis(300))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_refused_while_a_node_restarts_are_retried_until_it_is_back_a_keyless_post_too() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    // Each request from a fresh client (no pooled connection from before the restart), sent while
    // the node restarts.
    let during_a_restart = async |method, path, id| {
        provider.restart_for(Std::from_secs(1));
        tokio::time::sleep(Std::from_millis(50)).await;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Std::from_millis(250)));
        let client = Client::builder(TokioExecutor::new()).build(connector);
        let dependency = Dependency::with_seed("payrail", budgeted(), 3).unwrap();
        let mut svc = RetryLayer::new(dependency, PATIENT, Std::from_secs(10)).layer(client);
        send(&mut svc, request(&provider, method, path, id, "ok", None)).await.unwrap()
    };
    let (status, report) = during_a_restart(Method::GET, "/quote", "r").await;
    assert_eq!(status, StatusCode::OK);
    assert!(report.dispatched >= 2, "refused at first, then retried: {report:?}");
    assert_eq!(provider.arrivals("r").len(), 1, "refused attempts never reached the provider");

    // A keyless POST: hyper's refused connection never arrived, and it is sent again (seed 000).
    let (status, report) = during_a_restart(Method::POST, "/orders", "p").await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(report.dispatched >= 2, "refused at first, then sent again: {report:?}");
    assert_eq!(report.replay_safety, ReplaySafety::UntilArrived);
    assert_eq!((provider.arrivals("p").len(), provider.orders_for("p")), (1, 1), "placed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_deadline_from_the_caller_bounds_the_retries_and_a_passed_one_sends_nothing() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    let mut svc = client(budgeted());
    // The caller has 400 ms left: the first attempt times out at 300 ms, and the 150 ms backoff
    // does not fit in the 100 ms that are left, though the layer's own deadline is 10 s.
    let mut req = request(&provider, Method::POST, "/orders", "d1", "hang:2000,ok", Some("key-d1"));
    req.extensions_mut().insert(RequestDeadline::within(Std::from_millis(400)));
    let err = send(&mut svc, req).await.unwrap_err();
    assert!(matches!(err, HttpError::TimedOut { .. }), "{err}");
    let report = err.report().unwrap();
    assert_eq!((report.problem, report.dispatched), (Some(Problem::RetryDelayExceedsDeadline), 1));
    assert_eq!(provider.arrivals("d1").len(), 1);

    // A caller whose deadline has passed: no connection is made.
    let mut req = request(&provider, Method::GET, "/quote", "d2", "ok", None);
    req.extensions_mut().insert(RequestDeadline::at(tokio::time::Instant::now()));
    let err = send(&mut svc, req).await.unwrap_err();
    assert!(matches!(err, HttpError::Refused { .. }), "{err}");
    assert_eq!(err.report().unwrap().problem, Some(Problem::DeadlineExceeded));
    assert!(provider.arrivals("d2").is_empty(), "nothing reached the provider");
}
