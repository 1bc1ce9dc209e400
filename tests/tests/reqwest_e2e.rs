//! End to end: relent-tokio's tower layer over reqwest's client, as the README's "With reqwest"
//! shows it, against the examples' real payment provider on 127.0.0.1.
//!
//! reqwest's `Client` is a service of reqwest's own requests; a `service_fn` of four lines makes it
//! one of `http` requests, which the layer takes. These tests check what that adapter and reqwest's
//! errors change, beside `http_e2e.rs`'s tests over hyper's client: that with relent-tokio's
//! `hyper-util` feature, reqwest's connection refused and connect timeout are read as "never
//! arrived" and retried, a keyless POST's too; that
//! its own total timeout is not; that a keyed POST is replayed and a keyless one is not; and that
//! the report survives the response's trip back into reqwest's `Response`.

use std::time::Duration as Std;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use relent_examples::provider::{Provider, Script};
use relent_tokio::core::Disposition;
use relent_tokio::{Dependency, HttpError, RetryLayer, RetryReport};
use tower::{Layer, Service, ServiceExt};

mod e2e;
use e2e::{POLICY, budgeted};

/// reqwest's client as a service of `http` requests, as the README writes it.
fn adapter(
    client: reqwest::Client,
) -> impl Service<
    Request<Bytes>,
    Response = Response<reqwest::Body>,
    Error = reqwest::Error,
    Future = impl Future<Output = Result<Response<reqwest::Body>, reqwest::Error>> + Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |request: Request<Bytes>| {
        let client = client.clone();
        async move { Ok(Response::from(client.execute(request.try_into()?).await?)) }
    })
}

/// The layer over reqwest's client with a 100 ms connect timeout (200 ms inside the
/// attempt timeout, so that it fires first on a busy machine too) and `extra` settings of its own.
fn layered(
    extra: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
) -> impl Service<Request<Bytes>, Response = Response<reqwest::Body>, Error = HttpError<reqwest::Error>> {
    let client = extra(reqwest::Client::builder().connect_timeout(Std::from_millis(100))).build().unwrap();
    let dependency = Dependency::with_seed("payrail", budgeted(), 3);
    RetryLayer::new(dependency.unwrap(), POLICY, Std::from_secs(10)).layer(adapter(client))
}

/// A JSON request to `url`, as `e2e::request` scripts it.
fn request(url: &str, post: bool, id: &str, fault: &str, key: Option<&str>) -> Request<Bytes> {
    let method = if post { Method::POST } else { Method::GET };
    let mut request = e2e::request(url, method, id, fault, key, Bytes::from_static(b"{\"amount\":1250}"));
    request.headers_mut().insert("content-type", http::HeaderValue::from_static("application/json"));
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_with_retry_after_is_retried_and_the_report_survives_the_trip_back_into_reqwest() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    let mut svc = layered(|b| b);
    let quote = request(&provider.url("/quote"), false, "q", "503:1,ok", None);
    let response = svc.ready().await.unwrap().call(quote).await.unwrap();
    // Back into reqwest's own response, for its `text` and `json`: the extensions come along.
    let response = reqwest::Response::from(response);
    assert_eq!(response.status(), StatusCode::OK);
    let report = *response.extensions().get::<RetryReport>().unwrap();
    assert_eq!(
        (report.dispatched, report.disposition, report.waited),
        (2, Disposition::Succeeded, Std::from_secs(1))
    );
    assert!(!response.text().await.unwrap().is_empty(), "the body reads through reqwest");
    let arrivals = provider.arrivals("q");
    assert_eq!(arrivals.len(), 2);
    assert!(arrivals[1] - arrivals[0] >= Std::from_secs(1), "{:?}", arrivals[1] - arrivals[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_post_that_times_out_is_replayed_and_a_keyless_one_is_sent_once() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    let mut svc = layered(|b| b);
    let orders = provider.url("/orders");

    let keyed = request(&orders, true, "k1", "hang:2000,ok", Some("key-k1"));
    let response = svc.ready().await.unwrap().call(keyed).await.unwrap();
    let report = *response.extensions().get::<RetryReport>().unwrap();
    assert_eq!((response.status(), report.dispatched), (StatusCode::CREATED, 2));
    assert_eq!(provider.arrivals("k1").len(), 2, "the body went out again");
    assert_eq!(provider.orders_for("k1"), 1, "deduplicated by its key");

    let keyless = request(&orders, true, "k2", "hang:2000,ok", None);
    let err = svc.ready().await.unwrap().call(keyless).await.unwrap_err();
    assert!(matches!(err, HttpError::TimedOut { .. }), "{err}");
    assert_eq!(
        err.report().unwrap().problem,
        Some(relent_tokio::core::Problem::MayHaveArrived),
        "it may have arrived"
    );
    assert_eq!(provider.arrivals("k2").len(), 1, "never resent");
    assert_eq!(provider.effects().duplicates, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_refused_while_the_node_restarts_are_retried_through_reqwest() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    // Down for 600 ms: the first attempt (at about 50 ms) is refused with 550 ms to spare, and the
    // last the policy allows (1,050 ms later) comes 500 ms after the node is back.
    provider.restart_for(Std::from_millis(600));
    tokio::time::sleep(Std::from_millis(50)).await;
    // A fresh client, with no pooled connection from before the restart.
    let mut svc = layered(|b| b);
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(request(&provider.url("/quote"), false, "r", "ok", None))
        .await
        .unwrap();
    let report = *response.extensions().get::<RetryReport>().unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(report.dispatched >= 2, "refused at first, then retried: {report:?}");
    assert_eq!(provider.arrivals("r").len(), 1, "refused attempts never reached the provider");
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqwests_connect_timeout_never_arrived_and_is_retried_until_the_attempts_run_out_a_keyless_post_too()
{
    let (addr, _listener, _held) = e2e::black_hole().await;
    let mut svc = layered(|b| b);
    let quote = request(&format!("http://{addr}/quote"), false, "c", "ok", None);
    let err = svc.ready().await.unwrap().call(quote).await.unwrap_err();
    let HttpError::Transport { error, report, .. } = &err else { panic!("{err}") };
    assert!(error.is_connect() && error.is_timeout(), "reqwest's connect timeout: {error:?}");
    // Four connect timeouts of 100 ms, each inside its 300 ms attempt, then 150, 300 and 600 ms
    // apart: every attempt the policy allows.
    assert_eq!(
        (report.dispatched, report.problem),
        (4, Some(relent_tokio::core::Problem::AttemptsExhausted))
    );
    assert_eq!(report.waited, Std::from_millis(150 + 300 + 600));

    // A keyless POST: reqwest's client (hyper-util's) says it never connected, whichever of its
    // two timers fired, and relent-tokio's `hyper-util` feature takes its word: sent again.
    let order = request(&format!("http://{addr}/orders"), true, "o", "ok", None);
    let err = svc.ready().await.unwrap().call(order).await.unwrap_err();
    let report = err.report().unwrap();
    assert_eq!(
        (report.dispatched, report.problem, report.replay_safety),
        (
            4,
            Some(relent_tokio::core::Problem::AttemptsExhausted),
            relent_tokio::core::ReplaySafety::UntilArrived
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqwests_own_timeout_is_a_transport_error_that_is_not_retried() {
    let provider = Provider::start(Script::PerRequest).await.unwrap();
    // reqwest's total timeout, shorter than the policy's 300 ms attempt timeout: it ends the
    // attempt first, with an error the default classifier cannot tell from a failure after the
    // request arrived. The README says to leave the attempts' timing to the policy.
    let mut svc = layered(|b| b.timeout(Std::from_millis(100)));
    let quote = request(&provider.url("/quote"), false, "t", "hang:2000,ok", None);
    let err = svc.ready().await.unwrap().call(quote).await.unwrap_err();
    let HttpError::Transport { error, report, .. } = &err else { panic!("{err}") };
    assert!(error.is_timeout() && !error.is_connect(), "{error:?}");
    // A failure not retried ends with no problem code: the failure is the answer.
    assert_eq!((report.dispatched, report.disposition, report.problem), (1, Disposition::Failed, None));
    assert_eq!(provider.arrivals("t").len(), 1);
}
