//! What the end-to-end tests over hyper's client (`http_e2e.rs`) and reqwest's (`reqwest_e2e.rs`)
//! share: the policy and budget their layers run under, and requests scripted for the provider.

use http::{Method, Request};
use relent_tokio::core::{DependencyConfig, Jitter, RetryBudget, RetryPolicy};
use relent_tokio::{Duration, HZ};

/// Four attempts, 150 ms, 300 ms and 600 ms apart, each of 300 ms.
pub(crate) const POLICY: RetryPolicy<HZ> =
    match RetryPolicy::exponential(4, Duration::from_millis(150), Duration::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(Duration::from_millis(300))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };

/// A budget roomy enough for every test's retries.
pub(crate) fn budgeted() -> DependencyConfig<HZ> {
    DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 20).unwrap())
}

/// A request to `url` whose attempts the provider answers as `fault` says (`x-fault`), counted
/// under `id` (`x-request-id`, and `x-checkout-id` for an order), with an `Idempotency-Key` if
/// `key` is given.
pub(crate) fn request<B>(
    url: &str,
    method: Method,
    id: &str,
    fault: &str,
    key: Option<&str>,
    body: B,
) -> Request<B> {
    let mut r = Request::builder()
        .method(method)
        .uri(url)
        .header("x-request-id", id)
        .header("x-checkout-id", id)
        .header("x-fault", fault);
    if let Some(k) = key {
        r = r.header("idempotency-key", k);
    }
    r.body(body).unwrap()
}

/// A port that neither accepts nor refuses: its listener's backlog of one is taken by a connection
/// the caller keeps, so the kernel drops every later connection's SYN and a connect waits out the
/// client's connect timeout. That is Linux's way with a full backlog (CI's); other kernels may
/// complete the handshake or refuse, so the test that uses it runs on Linux only.
#[cfg(target_os = "linux")]
pub(crate) async fn black_hole() -> (std::net::SocketAddr, tokio::net::TcpListener, tokio::net::TcpStream) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let held = tokio::net::TcpStream::connect(addr).await.unwrap();
    (addr, listener, held)
}
