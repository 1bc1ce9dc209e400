//! gRPC helpers (feature `tonic`): how a call's [`tonic::Status`] is judged, by its code and the
//! server's pushback; how a service passes a wait on to its own callers; and the deadline its
//! callers send.
//!
//! A gRPC client returns every failure as a `Status`, the far side's faults and the answers to a
//! wrong request alike, and the caller cannot implement [`Classify`](relent_core::Classify) on it.
//! [`GrpcClassifier::judge`] splits a call's result in two, as the HTTP layer splits responses:
//!
//! - **the exchange worked**: the reply, or a status that answers the caller's own request
//!   (`NOT_FOUND`, `INVALID_ARGUMENT`, ...), comes back as `Ok` and counts as a success for the
//!   dependency (its breaker does not see it), as a 404 through the HTTP layer does;
//! - **a failure of the far side**: an `Err` holding the status in a [`Judged`] with its verdict,
//!   which the operation retries or not, and which counts against the dependency.
//!
//! The default rule for each code is the HTTP helpers' rule for the HTTP status gRPC maps it to
//! (`google.rpc.Code`'s own table, as in AIP-193), so a dependency reached over gRPC is judged as
//! it would be over HTTP (seed 000, "What Is Safe to Retry"):
//!
//! | code | HTTP | rule |
//! |---|---|---|
//! | `UNAVAILABLE`, `RESOURCE_EXHAUSTED` | 503, 429 | retried: the far side says "not now" |
//! | `UNKNOWN`, `INTERNAL`, `DATA_LOSS`, `UNIMPLEMENTED`, `DEADLINE_EXCEEDED` | 500, 501, 504 | a failure, not retried |
//! | `OK` and every other code | 200, 4xx, 499 | the exchange worked: the caller's answer |
//!
//! Three more readings:
//!
//! - **Server pushback** (gRFC A6, "gRPC Retry Design"): a retried status with
//!   `grpc-retry-pushback-ms` ([`PUSHBACK`]) is retried no sooner than that many milliseconds
//!   ([`Verdict::RetryableAfter`], a wait too long for the deadline defers the operation, as a
//!   `Retry-After` does); a value that is not a non-negative integer is the server saying "do not
//!   retry", and the status is not retried. On a status that is not retried it changes nothing.
//! - **A call that ended without an answer**: tonic's client reports its own timeout
//!   (`Endpoint::timeout`, a request's `set_timeout`) as `CANCELLED`, with
//!   [`tonic::TimeoutExpired`] as the status's cause, and a call the connection closed under
//!   before it was sent (a node going away) as `CANCELLED` caused by the transport's error; a
//!   tonic server ends a call whose `grpc-timeout` has passed with `CANCELLED` in the timeout's
//!   words ("Timeout expired"), whichever side's timer fires first. None is the server's answer:
//!   each is retried, as an attempt that outlives relent's own timeout is
//!   ([`AttemptError::TimedOut`](crate::AttemptError::TimedOut)), whatever the rule for
//!   `CANCELLED`. Any other `CANCELLED`, one the server sent, is judged by the rule.
//! - **A call that was never sent**: tonic's `Channel` reports a refused connection as
//!   `UNAVAILABLE` caused by the refusal; retried under the rule for `UNAVAILABLE`, it is
//!   [`Verdict::NeverArrived`], so a call stated `ReplaySafety::UntilArrived` (a mutation without a
//!   request id the server deduplicates) is sent again after it, and after nothing else.
//!
//! Every rule can be overridden per code ([`GrpcClassifier::rule`]). As everywhere in Relent, a
//! call is repeated only under a replay-safety statement that allows it: the classifier never
//! decides that a call may be sent twice. A client whose retry policies are written in a gRPC
//! service config reads them, with feature `serde` too, through `config::GrpcServiceConfig`: each
//! method's policy, its classifier (its `retryableStatusCodes` retried) and its timeout.
//!
//! A service that answers its own callers over gRPC tells them, with [`status_for`], whether it
//! already retried (a pushback of `-1`) or how long to wait (an open circuit's break), so that one
//! layer retries, not each hop; [`pushback_value`] writes a wait it knows of another way. It reads
//! how long its caller waits with [`deadline`], and runs its own calls in that deadline's scope,
//! or has [`DeadlineLayer`] do so for every method.
//!
//! A streaming call is judged by what opening it returned: a status that ends the stream partway,
//! after messages arrived, is the caller's to handle, as a retry would repeat what it has read.
//!
//! tonic's generated clients send each request as a stream, which the tower layers cannot replay;
//! the call goes through [`Dependency::execute`](crate::Dependency::execute) instead, the client
//! cloned into each attempt (a tonic `Channel` is cheap to clone):
//!
//! ```
//! # use relent_tokio::core::{Context, DependencyConfig, ReplaySafety, RetryBudget, RetryPolicy};
//! # use relent_tokio::grpc::GrpcClassifier;
//! # use relent_tokio::{Dependency, Duration, HZ};
//! # #[derive(Clone)]
//! # struct PricingClient;
//! # impl PricingClient {
//! #     async fn quote(&mut self, r: tonic::Request<String>) -> Result<tonic::Response<u64>, tonic::Status> {
//! #         Err(tonic::Status::not_found(format!("no price for {}", r.get_ref())))
//! #     }
//! # }
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let client = PricingClient;
//! let pricing = Dependency::new("pricing", DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5)?))?;
//! let policy: RetryPolicy<HZ> = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2)).build()?;
//! let grpc = GrpcClassifier::default();
//! let read = Context::new(Duration::from_secs(5), ReplaySafety::replayable_read(Duration::from_secs(60)));
//!
//! let answer = pricing
//!     .execute(&policy, read, |attempt| {
//!         let (mut client, grpc) = (client.clone(), &grpc);
//!         async move {
//!             let mut request = tonic::Request::new("sku-7".to_string());
//!             request.set_timeout(attempt.timeout()); // the server's deadline: grpc-timeout
//!             grpc.judge(client.quote(request).await)
//!         }
//!     })
//!     .await?; // Err: a failure of the far side (UNAVAILABLE three times, an INTERNAL, ...)
//! match answer {
//!     Ok(reply) => println!("{}", reply.into_inner()),
//!     // The service's answer to this request, not a fault of the dependency: one attempt.
//!     Err(status) => assert_eq!(status.code(), tonic::Code::NotFound),
//! }
//! # Ok(()) }
//! ```

use relent_core::{Judged, Verdict};
use tonic::metadata::AsciiMetadataValue;
use tonic::{Code, Status};

use crate::Error;
use crate::clock::{HZ, ticks};
use crate::http::{Exchange, Overrides, StatusRule};

/// The metadata key of gRPC's server pushback (gRFC A6): the wait before a retry in whole
/// milliseconds, or a value that is not a non-negative integer for "do not retry".
pub const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// What a status's `grpc-retry-pushback-ms` says ([`pushback`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushback {
    /// Retry no sooner than this.
    After(std::time::Duration),
    /// Do not retry: the value was not a non-negative integer (gRFC A6).
    Stop,
}

/// The server pushback of `status`, if it carries one.
///
/// A value of ASCII digits (surrounding spaces aside) is a wait in milliseconds; more than `u64`
/// holds is "a very long time", not garbage, as with `Retry-After`. Anything else (`-1`, `soon`,
/// `1.5`, empty) is [`Pushback::Stop`].
///
/// ```
/// use std::time::Duration;
/// use relent_tokio::grpc::{PUSHBACK, Pushback, pushback};
///
/// let mut status = tonic::Status::unavailable("draining");
/// assert_eq!(pushback(&status), None);
/// status.metadata_mut().insert(PUSHBACK, "250".parse().unwrap());
/// assert_eq!(pushback(&status), Some(Pushback::After(Duration::from_millis(250))));
/// status.metadata_mut().insert(PUSHBACK, "-1".parse().unwrap());
/// assert_eq!(pushback(&status), Some(Pushback::Stop));
/// ```
pub fn pushback(status: &Status) -> Option<Pushback> {
    let value = status.metadata().get(PUSHBACK)?;
    let digits = value.to_str().map(str::trim).unwrap_or_default();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Pushback::Stop);
    }
    Some(Pushback::After(std::time::Duration::from_millis(digits.parse::<u64>().unwrap_or(u64::MAX))))
}

/// `wait` as a `grpc-retry-pushback-ms` value, for a service that answers its own caller with
/// `UNAVAILABLE` and knows when to come back (an [`Error::retry_in`](crate::Error::retry_in), a
/// [`RetryReport::retry_in`](crate::RetryReport::retry_in)): whole milliseconds, rounded up so that
/// the caller never comes back sooner, and at most `i32::MAX` (24.8 days), the most that every
/// gRPC client reads as a wait rather than as "do not retry".
///
/// ```
/// use std::time::Duration;
/// use relent_tokio::grpc::{PUSHBACK, pushback_value};
///
/// assert_eq!(pushback_value(Duration::from_millis(1_500)), "1500");
/// assert_eq!(pushback_value(Duration::from_micros(1_200)), "2"); // never sooner
/// assert_eq!(pushback_value(Duration::from_secs(60 * 86_400)), "2147483647");
///
/// let mut status = tonic::Status::unavailable("circuit open");
/// status.metadata_mut().insert(PUSHBACK, pushback_value(Duration::from_secs(18)));
/// ```
pub fn pushback_value(wait: std::time::Duration) -> AsciiMetadataValue {
    let millis = wait.as_millis().saturating_add(u128::from(wait.subsec_nanos() % 1_000_000 > 0));
    AsciiMetadataValue::from(i32::try_from(millis).unwrap_or(i32::MAX))
}

/// The status a gRPC service answers its own caller with when an operation it ran on one of its
/// dependencies ended in `error`: seed 000's rule that one layer retries, carried across a gRPC
/// hop by the server pushback.
///
/// A caller retries `UNAVAILABLE` by default (the defaults above, and most gRPC clients'
/// configurations), so a service that answered every failure with a bare `UNAVAILABLE` after
/// retrying it itself would have each of its failures retried again: three layers of three
/// attempts are 27 calls. The status says what [`Error`]'s own verdict says (its
/// [`Classify`](relent_core::Classify), the rule `execute`'s errors follow when they are nested in
/// process):
///
/// - an operation that could retry and failed (it was the retrying layer), or whose last failure
///   was not retryable: `UNAVAILABLE` with a pushback of `-1`, "do not retry";
/// - one deferred or rejected with a known end (an open circuit's break, a Retry-After it could
///   not wait): `UNAVAILABLE` with that wait as the pushback ([`pushback_value`]);
/// - one of a single attempt whose failure was retryable: `UNAVAILABLE`, no pushback, the
///   retrying left to the caller;
/// - an operation that never started (its policy and context do not fit, a fault of this
///   service's code): `INTERNAL`.
///
/// The message is the error's (`pricing: failed (attempts_exhausted) after 3 attempt(s); last
/// failure: ...`). An answer to the caller's own request that [`GrpcClassifier::judge`] returned as
/// `Ok` is not an `Error`: pass that status on as it is.
pub fn status_for<E>(error: &Error<E>) -> Status
where
    E: relent_core::Classify<HZ> + std::fmt::Display,
{
    use relent_core::Classify as _;
    let message = error.to_string();
    if let Error::Start(_) = error {
        return Status::internal(message);
    }
    let mut status = Status::unavailable(message);
    let pushback = match error.classify() {
        Verdict::Retryable | Verdict::NeverArrived => None,
        Verdict::RetryableAfter(wait) => Some(pushback_value(crate::std_duration(wait))),
        Verdict::NotRetryable => Some(AsciiMetadataValue::from_static("-1")),
    };
    if let Some(value) = pushback {
        status.metadata_mut().insert(PUSHBACK, value);
    }
    status
}

/// The metadata key of a gRPC call's timeout: how long its caller waits, as tonic's
/// `Request::set_timeout` writes it.
pub const TIMEOUT: &str = "grpc-timeout";

/// The deadline the caller of a gRPC call sent (`grpc-timeout`), counted from now on tokio's
/// clock: what a handler runs its own calls through relent-tokio in ([`RequestDeadline::scope`]),
/// so that they end when its caller stops waiting, and are refused once it has, as
/// [`RequestDeadline::from_header`] does for an HTTP server. Its caller's own attempts tell it so
/// when they set their timeout from [`AttemptInfo::timeout`](crate::AttemptInfo::timeout), as the
/// module's example does.
///
/// [`RequestDeadline::scope`]: crate::RequestDeadline::scope
/// [`RequestDeadline::from_header`]: crate::RequestDeadline::from_header
///
/// `Ok(None)` without the key. A value that is not gRPC's (up to 8 digits and a unit: `H`, `M`,
/// `S`, `m`, `u`, `n`) is the caller's mistake, refused with `INVALID_ARGUMENT` and a message that
/// says so (tonic's server ignores it instead; a server that must not refuse its callers can
/// treat the error as `None`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use relent_tokio::RequestDeadline;
/// use relent_tokio::grpc::deadline;
///
/// // In a tonic handler: the caller waits 250 ms; the handler's own limit is 10 s.
/// let mut request = tonic::Request::new(());
/// request.set_timeout(Duration::from_millis(250));
/// let within = deadline(&request)?.unwrap_or_else(|| RequestDeadline::within(Duration::from_secs(10)));
/// assert_eq!(within.remaining_at(tokio::time::Instant::now()), Duration::from_millis(250));
/// // within.scope(async { ... the handler's calls through relent-tokio ... }).await
///
/// let mut bad = tonic::Request::new(());
/// bad.metadata_mut().insert(relent_tokio::grpc::TIMEOUT, "2.5S".parse()?);
/// assert_eq!(
///     deadline(&bad).unwrap_err().message(),
///     "`2.5S` in grpc-timeout is not a timeout: gRPC writes one as up to 8 digits and a unit (H, M, S, m, u \
///      or n), such as 250m"
/// );
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// `INVALID_ARGUMENT`, for a `grpc-timeout` that is not gRPC's format.
pub fn deadline<T>(request: &tonic::Request<T>) -> Result<Option<crate::RequestDeadline>, Status> {
    let Some(value) = request.metadata().get(TIMEOUT) else {
        return Ok(None);
    };
    let timeout = grpc_timeout(value.as_bytes())
        .ok_or_else(|| Status::invalid_argument(not_a_timeout(&String::from_utf8_lossy(value.as_bytes()))))?;
    Ok(Some(crate::RequestDeadline::within(timeout)))
}

/// The refusal of a `grpc-timeout` that is not gRPC's format: what is wrong, and what is right.
fn not_a_timeout(value: &str) -> String {
    format!(
        "`{value}` in {TIMEOUT} is not a timeout: gRPC writes one as up to 8 digits and a unit (H, M, S, m, u or \
         n), such as 250m"
    )
}

/// Serves each gRPC request of a tonic server in the scope of the deadline its caller sent
/// (`grpc-timeout`), or of the server's own limit when that is sooner or the caller sent none:
/// [`deadline`] for every method at once, as [`DeadlineLayer`](crate::DeadlineLayer) is for an
/// HTTP server. tonic's `Server::builder().layer(grpc::DeadlineLayer::new(limit))`.
///
/// Each handler's calls through relent-tokio end when its caller stops waiting (or at the
/// limit), and one started after that is refused with `deadline_exceeded` before anything is
/// sent. The deadline is also put in the request's extensions, which tonic hands on to the
/// handler's `tonic::Request` (`request.extensions().get::<RequestDeadline>()`), for a task the
/// handler spawns. A value not in gRPC's format is answered with `INVALID_ARGUMENT`, saying so,
/// before the handler runs, and logged at INFO (`relent: timeout header refused`). A streaming
/// response's messages made after the handler returned are outside the scope.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use relent_tokio::grpc::{DeadlineLayer, TIMEOUT};
/// use tower::{Layer, Service, ServiceExt};
///
/// // An HTTP service as tonic's router is one; it says how long its handler has.
/// let router = tower::service_fn(|_: http::Request<tonic::body::Body>| async {
///     let left = relent_tokio::attempt_expiry().map(|end| end - tokio::time::Instant::now());
///     let mut response = http::Response::new(tonic::body::Body::default());
///     response.headers_mut().insert("left", format!("{left:?}").parse().unwrap());
///     Ok::<_, std::convert::Infallible>(response)
/// });
/// let mut server = DeadlineLayer::new(Duration::from_secs(10)).layer(router);
/// let call = |timeout: &str| {
///     http::Request::post("/pricing.Pricing/Quote").header(TIMEOUT, timeout).body(tonic::body::Body::default())
/// };
/// let served = server.ready().await?.call(call("250m")?).await?;
/// assert_eq!(served.headers()["left"], "Some(250ms)");
/// let capped = server.ready().await?.call(call("1H")?).await?; // the server's own limit
/// assert_eq!(capped.headers()["left"], "Some(10s)");
/// let refused = server.ready().await?.call(call("soon")?).await?;
/// assert_eq!(refused.headers()["grpc-status"], "3"); // INVALID_ARGUMENT, the handler never ran
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    limit: std::time::Duration,
}

impl DeadlineLayer {
    /// Serves each request within `limit` at most: the server's own limit, which also applies to
    /// a request whose caller sent no `grpc-timeout`.
    pub fn new(limit: std::time::Duration) -> Self {
        Self { limit }
    }
}

impl<S> tower::Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline { inner, limit: self.limit }
    }
}

/// The service [`DeadlineLayer`] wraps around a tonic server's routes.
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    limit: std::time::Duration,
}

impl<S, B, RB> tower::Service<http::Request<B>> for Deadline<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    RB: Default,
{
    type Response = http::Response<RB>;
    type Error = S::Error;
    type Future = crate::Serving<S::Future, S::Error, RB>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let sent = match request.headers().get(TIMEOUT).map(|value| (value, grpc_timeout(value.as_bytes()))) {
            None => None,
            Some((_, Some(sent))) => Some(sent),
            Some((value, None)) => {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                crate::trace::timeout_refused(TIMEOUT, &value);
                return crate::Serving::refused(Status::invalid_argument(not_a_timeout(&value)).into_http());
            }
        };
        // The sooner of what the caller waits and the server's limit, on one clock read.
        let deadline = crate::RequestDeadline::within(sent.map_or(self.limit, |sent| sent.min(self.limit)));
        request.extensions_mut().insert(deadline);
        crate::Serving::handler(deadline.scope(self.inner.call(request)))
    }
}

/// `value` as gRPC's `TimeoutValue TimeoutUnit`: 1 to 8 ASCII digits, then one unit.
fn grpc_timeout(value: &[u8]) -> Option<std::time::Duration> {
    let (unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // 8 digits always fit, and the largest in hours is still far from u64's end.
    let value = digits.iter().fold(0_u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => std::time::Duration::from_secs(value * 3_600),
        b'M' => std::time::Duration::from_secs(value * 60),
        b'S' => std::time::Duration::from_secs(value),
        b'm' => std::time::Duration::from_millis(value),
        b'u' => std::time::Duration::from_micros(value),
        b'n' => std::time::Duration::from_nanos(value),
        _ => return None,
    })
}

/// Judges gRPC statuses for one dependency: the default rules (see the module doc), with
/// per-code overrides.
///
/// ```
/// use relent_tokio::core::Verdict;
/// use relent_tokio::grpc::GrpcClassifier;
/// use relent_tokio::http::{Exchange, StatusRule};
/// use tonic::{Code, Status};
///
/// // This service answers ABORTED when a transaction lost a race that a second try wins.
/// let grpc = GrpcClassifier::default().rule(Code::Aborted, StatusRule::Retry);
/// assert_eq!(grpc.exchange(&Status::aborted("conflict")), Exchange::Failure(Verdict::Retryable));
/// // The defaults.
/// assert_eq!(grpc.rule_for(Code::Unavailable), StatusRule::Retry);
/// assert_eq!(grpc.rule_for(Code::Internal), StatusRule::Fail);
/// assert_eq!(grpc.rule_for(Code::NotFound), StatusRule::Success);
/// ```
#[derive(Debug, Clone, Default)]
pub struct GrpcClassifier {
    rules: Overrides<Code>,
}

impl GrpcClassifier {
    /// Overrides the default for `code`.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub fn rule(mut self, code: Code, rule: StatusRule) -> Self {
        self.rules.set(code, rule);
        self
    }

    /// The codes whose rule [`rule`](Self::rule) set, each once with its latest rule, in the order
    /// they were last set: what a service logs to show how it judges a dependency's statuses.
    pub fn overrides(&self) -> impl Iterator<Item = (Code, StatusRule)> + '_ {
        self.rules.iter()
    }

    /// The rule for `code`: an override, or the default.
    pub fn rule_for(&self, code: Code) -> StatusRule {
        if let Some(rule) = self.rules.get(code) {
            return rule;
        }
        match code {
            Code::Unavailable | Code::ResourceExhausted => StatusRule::Retry,
            Code::Unknown
            | Code::Internal
            | Code::DataLoss
            | Code::Unimplemented
            | Code::DeadlineExceeded => StatusRule::Fail,
            Code::Ok
            | Code::Cancelled
            | Code::InvalidArgument
            | Code::NotFound
            | Code::AlreadyExists
            | Code::PermissionDenied
            | Code::FailedPrecondition
            | Code::Aborted
            | Code::OutOfRange
            | Code::Unauthenticated => StatusRule::Success,
        }
    }

    /// How the exchange that ended in `status` went: a success (the caller's answer), or a
    /// failure of the far side with its verdict, from the code's rule, the server's pushback, and
    /// tonic's own timeout (see the module doc).
    pub fn exchange(&self, status: &Status) -> Exchange {
        if unanswered(status) {
            return Exchange::Failure(Verdict::Retryable);
        }
        match self.rule_for(status.code()) {
            StatusRule::Success => Exchange::Success,
            StatusRule::Fail => Exchange::Failure(Verdict::NotRetryable),
            StatusRule::Retry => Exchange::Failure(match pushback(status) {
                // tonic's `Channel` was refused its connection: the call was never sent. (Its
                // connect timeout is no hyper-util client error, and stays `Retryable`.)
                None if crate::http::never_sent(status) => Verdict::NeverArrived,
                None => Verdict::Retryable,
                Some(Pushback::After(wait)) => Verdict::RetryableAfter(ticks(wait)),
                Some(Pushback::Stop) => Verdict::NotRetryable,
            }),
        }
    }

    /// A call's result split for an attempt to return: `Ok` with the reply, or with a status that
    /// answers the caller (the exchange worked); `Err` with a status that is a failure of the far
    /// side, [`Judged`] with its verdict.
    ///
    /// # Errors
    ///
    /// The status, with its verdict, when [`exchange`](Self::exchange) calls it a failure.
    pub fn judge<T>(&self, result: Result<T, Status>) -> Result<Result<T, Status>, Judged<HZ, Status>> {
        match result {
            Ok(reply) => Ok(Ok(reply)),
            Err(status) => match self.exchange(&status) {
                Exchange::Success => Ok(Err(status)),
                Exchange::Failure(verdict) => Err(Judged::new(status, verdict)),
            },
        }
    }
}

/// Whether `status` is a call that ended without the server's answer, which tonic reports as
/// `CANCELLED`: one tonic's client made itself (its own timeout, the connection closing under the
/// call), with the error as the status's source, which a status read from the wire never has; or
/// one worded as tonic words `TimeoutExpired`, what a tonic server sends when the request's
/// `grpc-timeout` passes (the same timer as the client's, the cause lost on the wire). And any
/// status caused by `TimeoutExpired`, whatever its code.
fn unanswered(status: &Status) -> bool {
    let mut next = std::error::Error::source(status);
    if status.code() == Code::Cancelled
        && (next.is_some() || status.message() == tonic::TimeoutExpired(()).to_string())
    {
        return true;
    }
    while let Some(e) = next {
        if e.is::<tonic::TimeoutExpired>() {
            return true;
        }
        next = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_pushback(code: Code, value: &str) -> Status {
        let mut status = Status::new(code, "test");
        status.metadata_mut().insert(PUSHBACK, value.parse().expect("an ASCII value"));
        status
    }

    #[test]
    fn every_code_has_the_rule_of_the_http_status_grpc_maps_it_to() {
        use Code::*;
        let grpc = GrpcClassifier::default();
        let http = crate::http::StatusClassifier::default();
        // google.rpc.Code's HTTP mapping (AIP-193; 499 is "client closed request").
        for (code, status) in [
            (Ok, 200),
            (Cancelled, 499),
            (Unknown, 500),
            (InvalidArgument, 400),
            (DeadlineExceeded, 504),
            (NotFound, 404),
            (AlreadyExists, 409),
            (PermissionDenied, 403),
            (ResourceExhausted, 429),
            (FailedPrecondition, 400),
            (Aborted, 409),
            (OutOfRange, 400),
            (Unimplemented, 501),
            (Internal, 500),
            (Unavailable, 503),
            (DataLoss, 500),
            (Unauthenticated, 401),
        ] {
            let status = http::StatusCode::from_u16(status).expect("a valid status");
            assert_eq!(grpc.rule_for(code), http.rule_for(status), "{code:?} as {status}");
        }
    }

    #[test]
    fn a_retried_status_waits_for_its_pushback_and_a_malformed_one_is_not_retried() {
        let grpc = GrpcClassifier::default();
        let failure = |status: &Status| grpc.exchange(status);
        assert_eq!(failure(&Status::unavailable("x")), Exchange::Failure(Verdict::Retryable));
        assert_eq!(
            failure(&with_pushback(Code::Unavailable, "250")),
            Exchange::Failure(Verdict::RetryableAfter(crate::Duration::from_millis(250)))
        );
        assert_eq!(
            failure(&with_pushback(Code::ResourceExhausted, " 0 ")),
            Exchange::Failure(Verdict::RetryableAfter(crate::Duration::from_ticks(0)))
        );
        for stop in ["-1", "+5", "soon", "1.5", "", "0x10"] {
            assert_eq!(
                failure(&with_pushback(Code::Unavailable, stop)),
                Exchange::Failure(Verdict::NotRetryable),
                "{stop:?}"
            );
        }
        // More milliseconds than u64 holds: a very long wait (which defers), not "do not retry".
        assert_eq!(
            failure(&with_pushback(Code::Unavailable, "99999999999999999999999")),
            Exchange::Failure(Verdict::RetryableAfter(ticks(std::time::Duration::from_millis(u64::MAX))))
        );
        // Pushback changes nothing on a status that is not retried, either way.
        assert_eq!(failure(&with_pushback(Code::Internal, "250")), Exchange::Failure(Verdict::NotRetryable));
        assert_eq!(failure(&with_pushback(Code::NotFound, "-1")), Exchange::Success);
    }

    #[test]
    fn a_call_that_ended_unanswered_is_retried_whatever_the_rule_for_cancelled() {
        let grpc = GrpcClassifier::default();
        // As tonic's transport builds it from its timeout layer's error.
        let timeout = Status::from_error(Box::new(tonic::TimeoutExpired(())));
        assert_eq!(timeout.code(), Code::Cancelled);
        assert_eq!(grpc.exchange(&timeout), Exchange::Failure(Verdict::Retryable));
        // Further down the chain, under the error of a transport that wraps it (tonic's channel
        // reports its inner service's errors in a `transport::Error` whose source they are).
        #[derive(Debug)]
        struct Transport(tonic::TimeoutExpired);
        impl std::fmt::Display for Transport {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("transport error")
            }
        }
        impl std::error::Error for Transport {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let wrapped = Status::from_error(Box::new(Transport(tonic::TimeoutExpired(()))));
        assert_eq!(wrapped.code(), Code::Cancelled);
        assert_eq!(grpc.exchange(&wrapped), Exchange::Failure(Verdict::Retryable));
        // A tonic server ends a call at its grpc-timeout with the same words, the cause lost on
        // the wire: the same timer, whichever side's fires first.
        let servers = Status::cancelled(tonic::TimeoutExpired(()).to_string());
        assert_eq!(grpc.exchange(&servers), Exchange::Failure(Verdict::Retryable));
        // The connection closed under a call before it was sent: tonic's client makes the status
        // itself, with the transport's error as its cause, which no status read from the wire has.
        let mut closed = Status::cancelled("operation was canceled");
        closed.set_source(std::sync::Arc::new(std::io::Error::from(std::io::ErrorKind::ConnectionAborted)));
        assert_eq!(grpc.exchange(&closed), Exchange::Failure(Verdict::Retryable));
        // Another CANCELLED is the server's answer.
        assert_eq!(grpc.exchange(&Status::cancelled("by the caller")), Exchange::Success);
        assert_eq!(grpc.exchange(&Status::aborted(tonic::TimeoutExpired(()).to_string())), Exchange::Success);
        let overridden = grpc.clone().rule(Code::Cancelled, StatusRule::Fail);
        assert_eq!(
            overridden.exchange(&Status::cancelled("by the caller")),
            Exchange::Failure(Verdict::NotRetryable)
        );
        assert_eq!(overridden.exchange(&timeout), Exchange::Failure(Verdict::Retryable));
    }

    #[test]
    fn a_refused_connection_never_arrived_under_the_rule_for_unavailable() {
        let grpc = GrpcClassifier::default();
        // As tonic's channel reports it: UNAVAILABLE, the refusal somewhere under it.
        let mut refused = Status::unavailable("tcp connect error");
        refused.set_source(std::sync::Arc::new(std::io::Error::other(Refused(
            std::io::ErrorKind::ConnectionRefused.into(),
        ))));
        assert_eq!(grpc.exchange(&refused), Exchange::Failure(Verdict::NeverArrived));
        // Any other UNAVAILABLE may have arrived: a server shedding load sent it.
        assert_eq!(grpc.exchange(&Status::unavailable("shedding")), Exchange::Failure(Verdict::Retryable));
        let mut reset = Status::unavailable("connection reset");
        reset.set_source(std::sync::Arc::new(std::io::Error::from(std::io::ErrorKind::ConnectionReset)));
        assert_eq!(grpc.exchange(&reset), Exchange::Failure(Verdict::Retryable));
        // The rule still decides whether it is retried at all.
        let failing = grpc.clone().rule(Code::Unavailable, StatusRule::Fail);
        assert_eq!(failing.exchange(&refused), Exchange::Failure(Verdict::NotRetryable));
        // And a status for it that a pushback stops is not retried.
        let mut stopped = with_pushback(Code::Unavailable, "-1");
        stopped.set_source(std::sync::Arc::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)));
        assert_eq!(grpc.exchange(&stopped), Exchange::Failure(Verdict::NotRetryable));
    }

    /// An error whose source is the refusal, as hyper's connect error holds it.
    #[derive(Debug)]
    struct Refused(std::io::Error);
    impl std::fmt::Display for Refused {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("tcp connect error")
        }
    }
    impl std::error::Error for Refused {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn judge_returns_answers_as_ok_and_failures_with_their_verdict() {
        let grpc = GrpcClassifier::default();
        assert_eq!(grpc.judge(Ok::<_, Status>(7)).map(|r| r.ok()).ok().flatten(), Some(7));
        let answer = grpc.judge::<()>(Err(Status::not_found("no such sku"))).expect("an answer");
        assert_eq!(answer.expect_err("the status").message(), "no such sku");
        let failure = grpc.judge::<()>(Err(with_pushback(Code::Unavailable, "40"))).expect_err("a failure");
        assert_eq!(failure.verdict, Verdict::RetryableAfter(crate::Duration::from_millis(40)));
        assert_eq!(failure.error.code(), Code::Unavailable);
    }

    #[test]
    fn overrides_are_kept_once_each_in_the_order_last_set() {
        let grpc = GrpcClassifier::default()
            .rule(Code::Aborted, StatusRule::Retry)
            .rule(Code::Internal, StatusRule::Retry)
            .rule(Code::Aborted, StatusRule::Fail);
        assert_eq!(
            grpc.overrides().collect::<Vec<_>>(),
            [(Code::Internal, StatusRule::Retry), (Code::Aborted, StatusRule::Fail)]
        );
        assert_eq!(grpc.rule_for(Code::Aborted), StatusRule::Fail);
        assert_eq!(grpc.rule_for(Code::DataLoss), StatusRule::Fail);
    }

    #[test]
    fn a_grpc_timeout_is_up_to_eight_digits_and_a_unit() {
        use std::time::Duration as D;
        for (text, read) in [
            ("1H", D::from_secs(3_600)),
            ("2M", D::from_secs(120)),
            ("30S", D::from_secs(30)),
            ("250m", D::from_millis(250)),
            ("99999999u", D::from_micros(99_999_999)),
            ("7n", D::from_nanos(7)),
            ("0m", D::ZERO),
            ("00000010S", D::from_secs(10)),
            ("99999999H", D::from_secs(99_999_999 * 3_600)),
        ] {
            assert_eq!(grpc_timeout(text.as_bytes()), Some(read), "{text:?}");
        }
        for text in
            ["", "m", "250", "123456789m", "2.5S", "-1S", "+1S", "1 S", " 1S", "1s", "1h", "1Ś", "1mm"]
        {
            assert_eq!(grpc_timeout(text.as_bytes()), None, "{text:?}");
        }
    }

    /// What tonic's client writes for each attempt's timeout reads back as that timeout, to the
    /// unit tonic chose (it keeps 8 digits: a long timeout loses its finer units).
    #[test]
    fn every_timeout_tonic_writes_reads_back() {
        use std::time::Duration as D;
        for timeout in [
            D::from_nanos(1),
            D::from_millis(250),
            D::from_secs(30),
            D::from_secs(3_600),
            D::from_secs(86_400),
        ] {
            let mut request = tonic::Request::new(());
            request.set_timeout(timeout);
            let text = request.metadata().get(TIMEOUT).unwrap().to_str().unwrap();
            assert_eq!(grpc_timeout(text.as_bytes()), Some(timeout), "{text}");
        }
    }

    /// Near misses of a number, as `retry_after_values` in the HTTP helpers makes them: a sign, a
    /// fraction, a unit, an inner space, padding; and any text.
    fn pushback_values() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::strategy::Strategy;
        proptest::prop_oneof![
            "[ -~]*",
            (
                "[ ]{0,2}",
                proptest::option::of("[+-]"),
                "[0-9]{1,22}",
                proptest::prop_oneof!["", "\\.[0-9]", "[smh]", " [0-9]"],
                "[ ]{0,2}"
            )
                .prop_map(|(before, sign, digits, rest, after)| format!(
                    "{before}{}{digits}{rest}{after}",
                    sign.unwrap_or_default()
                )),
        ]
    }

    proptest::proptest! {
        /// A server sends any pushback: a number of milliseconds (padding aside) is a wait, exact
        /// and saturating past u64, and anything else is "do not retry"; never a panic.
        #[test]
        fn any_pushback_is_a_wait_or_a_stop(value in pushback_values()) {
            let status = with_pushback(Code::Unavailable, &value);
            let v = value.trim();
            let read = pushback(&status);
            if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
                let millis = v.parse::<u64>().unwrap_or(u64::MAX);
                proptest::prop_assert_eq!(read, Some(Pushback::After(std::time::Duration::from_millis(millis))));
            } else {
                proptest::prop_assert_eq!(read, Some(Pushback::Stop));
            }
        }

        /// Any wait tonic's client may set, and any text in its place: a timeout reads back within
        /// the unit tonic wrote it in, and a value gRPC does not write is refused, never a panic.
        #[test]
        fn any_grpc_timeout_reads_back_or_is_refused(nanos in 1u64..=86_400 * 1_000_000_000, text in "[0-9]{0,10}[HMSmuns.]?") {
            let timeout = std::time::Duration::from_nanos(nanos);
            let mut request = tonic::Request::new(());
            request.set_timeout(timeout);
            let written = request.metadata().get(TIMEOUT).unwrap().to_str().unwrap().to_string();
            let read = grpc_timeout(written.as_bytes()).expect("tonic's own value");
            // tonic keeps 8 digits: it rounds down to its unit, by less than one of that unit.
            let unit = match written.as_bytes()[written.len() - 1] {
                b'n' => std::time::Duration::from_nanos(1),
                b'u' => std::time::Duration::from_micros(1),
                b'm' => std::time::Duration::from_millis(1),
                b'S' => std::time::Duration::from_secs(1),
                _ => std::time::Duration::from_secs(60),
            };
            proptest::prop_assert!(read <= timeout && timeout - read < unit, "{} read as {:?}", written, read);
            let valid = text.len() >= 2
                && text.len() <= 9
                && text[..text.len() - 1].bytes().all(|b| b.is_ascii_digit())
                && "HMSmun".contains(&text[text.len() - 1..]);
            proptest::prop_assert_eq!(grpc_timeout(text.as_bytes()).is_some(), valid, "{:?}", text);
        }
    }

    #[test]
    fn a_pushback_value_is_read_back_as_at_least_the_wait() {
        for millis in [0_u64, 1, 999, 1_000, 86_400_000] {
            for extra_micros in [0_u64, 1, 999] {
                let wait =
                    std::time::Duration::from_millis(millis) + std::time::Duration::from_micros(extra_micros);
                let mut status = Status::unavailable("x");
                status.metadata_mut().insert(PUSHBACK, pushback_value(wait));
                let Some(Pushback::After(read)) = pushback(&status) else { panic!("{wait:?} not read back") };
                assert!(
                    read >= wait && read - wait < std::time::Duration::from_millis(1),
                    "{wait:?} read as {read:?}"
                );
            }
        }
    }
}
