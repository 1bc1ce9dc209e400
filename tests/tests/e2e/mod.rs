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
