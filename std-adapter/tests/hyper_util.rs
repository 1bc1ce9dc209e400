//! The `hyper-util` feature over real sockets: hyper-util's pooled client's own errors, read by
//! `http::hyper_util_connect` and judged by the default `StatusClassifier`. A refused connection, a
//! connect timeout and a name that does not resolve never sent the request (`NeverArrived`, so a
//! keyless POST may be sent again); a connection closed under a request is no connect error, and
//! with no io error of a connect's kind in it, it is not retried.
#![cfg(feature = "hyper-util")]

use std::time::Duration as Std;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relent_tokio::core::Verdict;
use relent_tokio::http::{
    HttpClassifier, StatusClassifier, connection_refused, hyper_util_connect, never_arrived, never_sent,
};

type HyperError = hyper_util::client::legacy::Error;

/// hyper-util's client with a connect timeout of 100 ms, and what a GET of `url` failed with.
async fn failure(url: String) -> HyperError {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Std::from_millis(100)));
    let client = Client::builder(TokioExecutor::new()).build::<_, Full<Bytes>>(connector);
    client.request(Request::get(url).body(Full::default()).unwrap()).await.unwrap_err()
}

/// Every reading of an error: (`hyper_util_connect`, `never_sent`, `never_arrived`, the default
/// classifier's verdict).
fn read(error: &HyperError) -> (bool, bool, bool, Verdict<{ relent_tokio::HZ }>) {
    let verdict = HttpClassifier::<(), HyperError>::error(&StatusClassifier::default(), error);
    (hyper_util_connect(error), never_sent(error), never_arrived(error), verdict)
}

/// An error that holds another as its source, as reqwest's `Error` holds hyper-util's.
#[derive(Debug)]
struct Wrapped(HyperError);

impl std::fmt::Display for Wrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a client's own error")
    }
}

impl std::error::Error for Wrapped {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error_that_never_arrived() {
    // A port that was just free: nothing listens on it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let error = failure(format!("http://{addr}/orders")).await;
    assert!(error.is_connect() && connection_refused(&error), "{error:?}");
    assert_eq!(read(&error), (true, true, true, Verdict::NeverArrived));
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_connect_timeout_is_a_connect_error_that_never_arrived_which_its_io_error_alone_cannot_say() {
    // A listener whose backlog of one is taken: the kernel drops the next connection's SYN, and
    // the connect times out.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let _held = tokio::net::TcpStream::connect(addr).await.unwrap();
    let error = failure(format!("http://{addr}/orders")).await;
    assert!(error.is_connect() && !connection_refused(&error), "{error:?}");
    // Its io error is a `TimedOut`, which a read that timed out reports too: retried by
    // `never_arrived` on its own, but only hyper-util's word says that it was never sent.
    let timed_out = std::iter::successors(Some(&error as &(dyn std::error::Error + 'static)), |e| e.source())
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::TimedOut);
    assert!(timed_out, "{error:?}");
    assert_eq!(read(&error), (true, true, true, Verdict::NeverArrived));
    // Found anywhere in the chain: under reqwest's error, for one.
    let wrapped = Wrapped(error);
    let classifier = StatusClassifier::default();
    assert!(hyper_util_connect(&wrapped) && never_sent(&wrapped));
    assert_eq!(HttpClassifier::<(), Wrapped>::error(&classifier, &wrapped), Verdict::NeverArrived);
    // A rule that retries nothing still wins: not retried at all.
    let strict = classifier.retry_error_when(|_| false);
    assert_eq!(HttpClassifier::<(), Wrapped>::error(&strict, &wrapped), Verdict::NotRetryable);
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_a_connect_error_that_never_arrived() {
    // A resolver that knows no name, as one does while DNS is down: no network needed.
    let resolver = tower::service_fn(|_: hyper_util::client::legacy::connect::dns::Name| async {
        Err::<std::vec::IntoIter<std::net::SocketAddr>, _>(std::io::Error::other("no such name"))
    });
    let client = Client::builder(TokioExecutor::new())
        .build::<_, Full<Bytes>>(HttpConnector::new_with_resolver(resolver));
    let request = Request::get("http://payrail.example/orders").body(Full::default()).unwrap();
    let error = client.request(request).await.unwrap_err();
    assert!(error.is_connect(), "{error:?}");
    assert_eq!(read(&error), (true, true, true, Verdict::NeverArrived));
}

#[tokio::test]
async fn a_connection_closed_under_the_request_may_have_arrived_and_is_no_connect_error() {
    // A server that takes the connection, reads the request, and closes it without an answer.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        stream.readable().await.unwrap();
        let _ = stream.try_read(&mut [0u8; 1024]);
    });
    let error = failure(format!("http://{addr}/orders")).await;
    assert!(!error.is_connect(), "{error:?}");
    assert_eq!(read(&error), (false, false, false, Verdict::NotRetryable));
}
