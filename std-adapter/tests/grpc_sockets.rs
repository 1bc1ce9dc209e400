//! `relent_tokio::grpc` over real sockets, on the real clock: tonic's HTTP/2 server and its
//! `Channel`, whose refused connections, connections closed under a call and own timeouts the
//! classifier must read as the statuses they are. A file of its own: tonic's transport, which
//! these tests need, needs newer versions of relent-tokio's dependencies than relent-tokio does,
//! so CI's run at the oldest versions relent-tokio declares leaves this file out.
#![cfg(feature = "tonic")]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration as Std;

use relent_tokio::Duration;
use relent_tokio::core::{Jitter, RetryPolicy, Verdict};
use relent_tokio::grpc::GrpcClassifier;
use support::{Client, Handler, Pricing, Wire, budgeted, pricing, read};
use tonic::Code;

/// A listener on `addr` (taken again at once: `SO_REUSEADDR`), served by tonic's HTTP/2 server.
fn serve(addr: std::net::SocketAddr, handler: Handler) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    socket.bind(addr).unwrap();
    // Listening from here: a connection made from now on waits in the backlog to be served.
    let listener = socket.listen(64).unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(tonic::transport::Server::builder().serve_with_incoming(Wire(handler), incoming));
}

/// A tonic `Channel` to `addr`, connected at its first call.
fn channel(addr: std::net::SocketAddr, timeout: Option<Std>) -> Client<tonic::transport::Channel> {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap();
    let endpoint = match timeout {
        Some(t) => endpoint.timeout(t),
        None => endpoint,
    };
    Client(tonic::client::Grpc::new(endpoint.connect_lazy()))
}

/// What became of a failed attempt over a socket: its code, whether tonic's client made the status
/// itself (it has a cause; a status read from the wire has none), and the classifier's reading.
type Failure = (Code, bool, relent_tokio::http::Exchange);

/// `Quote` over `client` through a dependency, on the real clock: 3 attempts 20 ms apart, the
/// attempt timeout `attempt`, each failure recorded, and `after_failure` run on each.
async fn quote_over(
    client: &Client<tonic::transport::Channel>,
    grpc: &GrpcClassifier,
    attempt: Duration,
    after_failure: impl Fn(),
) -> (Result<String, String>, Vec<Failure>) {
    let dep = pricing(budgeted());
    let policy = RetryPolicy::constant(3, Duration::from_millis(20))
        .jitter(Jitter::None)
        .attempt_timeout(attempt)
        .build()
        .unwrap();
    let failures = Mutex::new(Vec::new());
    let reply = dep
        .execute(&policy, read(Std::from_secs(20)), |_| {
            let (mut client, failures, after_failure) = (client.clone(), &failures, &after_failure);
            async move {
                let result = client.quote("sku-7").await;
                if let Err(status) = &result {
                    let caused = std::error::Error::source(status).is_some();
                    failures.lock().unwrap().push((status.code(), caused, grpc.exchange(status)));
                    after_failure();
                }
                grpc.judge(result)
            }
        })
        .await;
    let reply = match reply {
        Ok(Ok(reply)) => Ok(reply.into_inner()),
        Ok(Err(status)) => Err(format!("answered {status:?}")),
        Err(e) => Err(e.to_string()),
    };
    (reply, failures.into_inner().unwrap())
}

const RETRIED: relent_tokio::http::Exchange = relent_tokio::http::Exchange::Failure(Verdict::Retryable);

/// Over a real socket, on the real clock: a server restarting is a refused connection, which
/// tonic's `Channel` reports as UNAVAILABLE, caused by the refusal: never arrived. The classifier
/// retries it; the server listens again
/// after the first attempt, and the retry is answered.
#[tokio::test]
async fn over_a_socket_a_refused_connection_is_unavailable_and_retried_when_the_server_is_back() {
    // An address nobody listens on: bound for its port, and closed.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let server = Pricing::new([Ok("12.50".into())]);
    let back_up = || serve(addr, server.handler()); // before the retry
    let (reply, failures) =
        quote_over(&channel(addr, None), &GrpcClassifier::default(), Duration::from_secs(5), back_up).await;
    assert_eq!(reply.as_deref(), Ok("sku-7: 12.50"));
    // Never arrived: a keyless call (`ReplaySafety::UntilArrived`) is sent again too.
    assert_eq!(
        failures,
        [(Code::Unavailable, true, relent_tokio::http::Exchange::Failure(Verdict::NeverArrived))]
    );
    assert_eq!(server.calls().len(), 1, "the refused call never reached the server");
}

/// Over a real socket: tonic's own client timeout (`Endpoint::timeout`, 100 ms, shorter than the
/// policy's attempt timeout) ends a call the server is slow to answer. tonic reports it as
/// CANCELLED caused by `TimeoutExpired`, which the classifier retries as an attempt timing out,
/// whatever CANCELLED's rule; the second call is answered at once.
#[tokio::test]
async fn over_a_socket_tonics_own_timeout_is_retried_as_an_attempt_that_timed_out() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = calls.clone();
    serve(
        addr,
        Arc::new(move |_| {
            let call = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move {
                if call == 0 {
                    tokio::time::sleep(Std::from_secs(10)).await; // slower than any timeout here
                }
                Ok("12.50".into())
            })
        }),
    );
    let grpc = GrpcClassifier::default().rule(Code::Cancelled, relent_tokio::http::StatusRule::Fail);
    let client = channel(addr, Some(Std::from_millis(100)));
    let (reply, failures) = quote_over(&client, &grpc, Duration::from_secs(5), || {}).await;
    assert_eq!(reply.as_deref(), Ok("12.50"));
    assert_eq!(failures, [(Code::Cancelled, true, RETRIED)]);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

/// Over a real socket: a server that closes the connection as it takes it (a node going away)
/// leaves the call unsent, which tonic reports as CANCELLED with the transport's error as its
/// cause: no answer of the server's, so retried, where a CANCELLED the server sends is its answer.
/// The next connection is served.
#[tokio::test]
async fn over_a_socket_a_connection_closed_under_the_call_is_cancelled_and_retried() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Pricing::new([Ok("12.50".into())]);
    let handler = server.handler();
    tokio::spawn(async move {
        let (first, _) = listener.accept().await.unwrap();
        drop(first); // closed before a byte of the call is read
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        tonic::transport::Server::builder().serve_with_incoming(Wire(handler), incoming).await
    });
    let (reply, failures) =
        quote_over(&channel(addr, None), &GrpcClassifier::default(), Duration::from_secs(5), || {}).await;
    assert_eq!(reply.as_deref(), Ok("sku-7: 12.50"));
    assert_eq!(failures, [(Code::Cancelled, true, RETRIED)]);
    assert_eq!(server.calls().len(), 1);
}
