//! HTTP helpers: which requests may be repeated, how a response or a transport error is
//! classified, and `Retry-After`.
//!
//! Seed 000 ("What Is Safe to Retry") is the source of every default here:
//!
//! - a request is replayable when its method is idempotent (GET, HEAD, OPTIONS, PUT, DELETE) or it
//!   carries an `Idempotency-Key` the provider deduplicates; any other request (a keyless POST) is
//!   sent again only when its attempt never arrived, and a read timeout, a reset connection or a
//!   status on it is never retried (relent-core's `ReplaySafety::UntilArrived`);
//! - a connection refused or a connect timeout means the request never arrived: retryable; a
//!   refused connection is [`Verdict::NeverArrived`] ([`never_sent`]), the failure after which a
//!   keyless POST is sent again, and so is any error of hyper-util's client (reqwest's too) that
//!   says it could not connect, with the `hyper-util` feature ([`hyper_util_connect`]): its connect
//!   timeouts included;
//! - 429 and 503 are the far side saying "not now": retryable, no sooner than their `Retry-After`
//!   (delta-seconds or an HTTP-date; a date is read on the server's clock, against the response's
//!   own `Date`, so a client clock that runs ahead does not retry early);
//! - 500 is a failure of the far side and counts against it (the circuit breaker sees it), but is
//!   not retried; 400, 422 and the other 4xx are the caller's own request being wrong: the exchange
//!   worked, the response goes back to the caller as it is, and nothing counts against the
//!   dependency.
//!
//! Every default can be overridden per dependency with [`StatusClassifier`]'s rules (per status,
//! and [`StatusClassifier::retry_error_when`] for a client whose connect errors are types of its
//! own), or replaced by implementing [`HttpClassifier`].

use std::time::SystemTime;

use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use relent_core::Verdict;

use crate::clock::{HZ, ticks};

/// The header that makes a non-idempotent request replayable.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The same as a header name: looked up with it, a request's headers are searched without parsing
/// the name first (about 180 instructions fewer a request through the layer than with the `&str`).
static IDEMPOTENCY_KEY_NAME: http::HeaderName = http::HeaderName::from_static(IDEMPOTENCY_KEY);

/// Whether `method` is idempotent in the sense of seed 000: repeating it leaves the far side where
/// one request would.
pub fn is_idempotent(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE)
}

/// Whether `request` may be sent more than once: an idempotent method, or an `Idempotency-Key`.
pub fn is_replayable<B>(request: &Request<B>) -> bool {
    is_idempotent(request.method()) || has_idempotency_key(request.headers())
}

/// Whether `headers` hold an `Idempotency-Key`. A request's few header names are compared in turn:
/// a lookup hashes the name, byte by byte as it is not a standard one, which costs more than
/// comparing a dozen names (a standard name differs from it at its tag). A longer map is looked up.
fn has_idempotency_key(headers: &http::HeaderMap) -> bool {
    const SCAN_UP_TO: usize = 12;
    if headers.keys_len() <= SCAN_UP_TO {
        headers.keys().any(|name| *name == IDEMPOTENCY_KEY_NAME)
    } else {
        headers.contains_key(&IDEMPOTENCY_KEY_NAME)
    }
}

/// A `Retry-After` value as a wait from `now`: delta-seconds, or an HTTP-date (a date in the past
/// is a wait of zero). `None` when the value is neither. A response's header is better read with
/// [`retry_after`], which measures a date on the server's clock.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use relent_tokio::http::parse_retry_after;
///
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
/// assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
/// assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now), Some(Duration::from_secs(120)));
/// assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now), Some(Duration::ZERO)); // already past
/// assert_eq!(parse_retry_after("soon", now), None);
/// ```
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<std::time::Duration> {
    let value = value.trim();
    delta_seconds(value).or_else(|| until(value, now))
}

/// The `Retry-After` of a set of headers, if present and valid.
///
/// An HTTP-date is a point on the server's clock, so it is measured against the headers' own
/// `Date` (the instant the server made the response, RFC 9110 section 6.6.1) when they have a
/// valid one, and against `now` only when they do not. A client whose clock runs 30 s ahead of the
/// server's would otherwise read "retry at 12:00:10", sent at 12:00:00, as a date already past and
/// retry at once, which is what the header asks it not to do; one running behind would wait too
/// long. Measured from `Date`, the wait is the one the server meant, and never shorter: `Date` is
/// the server's time rounded down to the second, and the response's time in transit is waited on
/// top.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use http::HeaderMap;
/// use relent_tokio::http::retry_after;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("date", "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
/// headers.insert("retry-after", "Wed, 21 Oct 2015 07:28:10 GMT".parse().unwrap());
/// // This client's clock is 30 s ahead of the server's: the wait is still the server's 10 s.
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480 + 30);
/// assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(10)));
/// // Without a Date, the date is measured against this clock, and has already passed.
/// headers.remove("date");
/// assert_eq!(retry_after(&headers, now), Some(Duration::ZERO));
/// ```
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<std::time::Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    delta_seconds(value).or_else(|| {
        // Only a date needs the server's clock: delta-seconds never parse `Date`.
        let sent = headers
            .get(header::DATE)
            .and_then(|d| d.to_str().ok())
            .and_then(|d| httpdate::parse_http_date(d.trim()).ok());
        until(value, sent.unwrap_or(now))
    })
}

/// A wait as a `Retry-After` value for a response of your own: delta-seconds, rounded up, so that
/// a caller that waits what it says never comes back sooner. What a service answers its own caller
/// with, in a 503 or a 429, when an operation it ran for that caller was deferred or rejected with
/// a known end ([`Error::retry_in`](crate::Error::retry_in), [`RetryReport::retry_in`]): seed 003's
/// "returned to you", passed on one layer up. Delta-seconds rather than a date: no clock of the
/// caller's needs to agree with this one.
///
/// [`RetryReport::retry_in`]: crate::RetryReport::retry_in
///
/// ```
/// use std::time::Duration;
/// use relent_tokio::http::retry_after_value;
///
/// assert_eq!(retry_after_value(Duration::from_secs(18)), "18");
/// assert_eq!(retry_after_value(Duration::from_millis(17_200)), "18"); // never sooner
/// assert_eq!(retry_after_value(Duration::ZERO), "0");
/// ```
pub fn retry_after_value(wait: std::time::Duration) -> http::HeaderValue {
    let seconds = wait.as_secs().saturating_add(u64::from(wait.subsec_nanos() > 0));
    http::HeaderValue::from(seconds)
}

/// `value` as delta-seconds, already trimmed. More seconds than `u64` holds is "a very long
/// time", not garbage.
fn delta_seconds(value: &str) -> Option<std::time::Duration> {
    (!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()))
        .then(|| std::time::Duration::from_secs(value.parse::<u64>().unwrap_or(u64::MAX)))
}

/// The wait from `now` until `value` as an HTTP-date, already trimmed: zero for a date past.
fn until(value: &str, now: SystemTime) -> Option<std::time::Duration> {
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or_default())
}

/// How one HTTP exchange went, for the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// The far side answered and is healthy; the response goes to the caller.
    Success,
    /// A failure of the far side, with the verdict on retrying it.
    Failure(Verdict<HZ>),
}

/// Classifies responses and transport errors of one dependency.
pub trait HttpClassifier<RB, E>: Send + Sync + 'static {
    /// A response.
    fn response(&self, response: &Response<RB>) -> Exchange;
    /// An error of the inner service (no response).
    fn error(&self, error: &E) -> Verdict<HZ>;
}

/// What a status code means, in a [`StatusClassifier`] rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusRule {
    /// The exchange worked; return the response.
    Success,
    /// A failure that is retried (after `Retry-After` if the response has one).
    Retry,
    /// A failure that is not retried.
    Fail,
}

/// A classifier's overrides of its default rules, keyed by status (or by gRPC code): each key
/// once, with the rule set last, in the order the keys were last set.
#[derive(Debug, Clone)]
pub(crate) struct Overrides<K>(Vec<(K, StatusRule)>);

impl<K> Default for Overrides<K> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<K: Copy + PartialEq> Overrides<K> {
    /// Sets `key`'s rule, replacing an earlier one.
    pub(crate) fn set(&mut self, key: K, rule: StatusRule) {
        self.0.retain(|(k, _)| *k != key);
        self.0.push((key, rule));
    }

    /// `key`'s rule, if one was set.
    pub(crate) fn get(&self, key: K) -> Option<StatusRule> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, rule)| *rule)
    }

    /// Each key set, with its rule, in the order last set.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, StatusRule)> + '_ {
        self.0.iter().copied()
    }
}

/// The default classifier (see the module doc), with per-status overrides and a rule for which
/// errors of the inner service are retried.
///
/// ```
/// use http::{Response, StatusCode};
/// use relent_tokio::core::Verdict;
/// use relent_tokio::http::{Exchange, HttpClassifier, StatusClassifier, StatusRule};
/// use relent_tokio::Duration;
///
/// // This provider's 502s are its load balancer restarting a node: retry them.
/// let classifier = StatusClassifier::default().rule(StatusCode::BAD_GATEWAY, StatusRule::Retry);
/// assert_eq!(classifier.rule_for(StatusCode::BAD_GATEWAY), StatusRule::Retry);
/// // The defaults: 429 and 503 are retried, other 5xx fail, anything else is the caller's answer.
/// assert_eq!(classifier.rule_for(StatusCode::SERVICE_UNAVAILABLE), StatusRule::Retry);
/// assert_eq!(classifier.rule_for(StatusCode::INTERNAL_SERVER_ERROR), StatusRule::Fail);
/// assert_eq!(classifier.rule_for(StatusCode::NOT_FOUND), StatusRule::Success);
///
/// // A 503 that says when: retried no sooner than its Retry-After.
/// let busy = Response::builder().status(503).header("retry-after", "2").body(()).unwrap();
/// let exchange = HttpClassifier::<(), std::io::Error>::response(&classifier, &busy);
/// assert_eq!(exchange, Exchange::Failure(Verdict::RetryableAfter(Duration::from_secs(2))));
/// ```
#[derive(Debug, Clone)]
pub struct StatusClassifier {
    rules: Overrides<StatusCode>,
    retry_error: fn(&(dyn std::error::Error + 'static)) -> bool,
    unsent_error: fn(&(dyn std::error::Error + 'static)) -> bool,
}

impl Default for StatusClassifier {
    fn default() -> Self {
        Self { rules: Overrides::default(), retry_error: never_arrived, unsent_error: never_sent }
    }
}

impl StatusClassifier {
    /// Overrides the default for `status`.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub fn rule(mut self, status: StatusCode, rule: StatusRule) -> Self {
        self.rules.set(status, rule);
        self
    }

    /// Which errors of the inner service (a request with no response) are retried: those `rule`
    /// returns `true` for. The default is [`never_arrived`]: a connection refused or a connect
    /// timeout, as io errors anywhere in the error's sources, which is how hyper's connector
    /// reports them, and with the `hyper-util` feature any connect error of hyper-util's client
    /// (and so of reqwest's, which reports some of its connect timeouts with a type of its own). A
    /// client with error types of its own replaces it.
    ///
    /// Whatever the rule says, a request the layer may not send again (a keyless POST) is retried
    /// only after an error that never arrived ([`never_sent`]), which this classifier judges
    /// [`Verdict::NeverArrived`] when the rule retries it.
    ///
    /// ```
    /// use relent_tokio::core::Verdict;
    /// use relent_tokio::http::{HttpClassifier, StatusClassifier, never_arrived};
    ///
    /// #[derive(Debug)]
    /// struct Unreachable; // a client's own "could not connect"
    /// impl std::fmt::Display for Unreachable {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("unreachable") }
    /// }
    /// impl std::error::Error for Unreachable {}
    ///
    /// let classifier = StatusClassifier::default()
    ///     .retry_error_when(|e| never_arrived(e) || e.is::<Unreachable>());
    /// assert_eq!(HttpClassifier::<(), Unreachable>::error(&classifier, &Unreachable), Verdict::Retryable);
    /// let io = |e: std::io::ErrorKind| HttpClassifier::<(), std::io::Error>::error(&classifier, &e.into());
    /// assert_eq!(io(std::io::ErrorKind::ConnectionRefused), Verdict::NeverArrived);
    /// assert_eq!(io(std::io::ErrorKind::TimedOut), Verdict::Retryable);
    /// assert_eq!(io(std::io::ErrorKind::ConnectionReset), Verdict::NotRetryable);
    /// ```
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub fn retry_error_when(mut self, rule: fn(&(dyn std::error::Error + 'static)) -> bool) -> Self {
        self.retry_error = rule;
        self
    }

    /// Which of the errors the retry rule retries certainly never reached the far side, and are
    /// judged [`Verdict::NeverArrived`]: those `rule` returns `true` for. They are what a request
    /// the layer may not repeat (a keyless POST) is sent again after. The default is
    /// [`never_sent`]: a refused connection, and with the `hyper-util` feature any connect error of
    /// hyper-util's client (reqwest's included), its connect timeouts among them. A client of
    /// another kind that says exactly when it never sent a request replaces it: its word is needed
    /// for a connect timeout, which an io `TimedOut` cannot tell from a connection that stopped
    /// answering mid-request.
    ///
    /// ```
    /// use relent_tokio::core::Verdict;
    /// use relent_tokio::http::{HttpClassifier, StatusClassifier, connection_refused};
    ///
    /// #[derive(Debug)]
    /// struct ConnectTimeout; // a client's own "timed out connecting": nothing was sent
    /// impl std::fmt::Display for ConnectTimeout {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("connect timeout") }
    /// }
    /// impl std::error::Error for ConnectTimeout {}
    ///
    /// let unsent = |e: &(dyn std::error::Error + 'static)| connection_refused(e) || e.is::<ConnectTimeout>();
    /// let classifier = StatusClassifier::default()
    ///     .retry_error_when(|e| e.is::<ConnectTimeout>() || relent_tokio::http::never_arrived(e))
    ///     .never_arrived_when(unsent);
    /// assert_eq!(HttpClassifier::<(), ConnectTimeout>::error(&classifier, &ConnectTimeout), Verdict::NeverArrived);
    /// // A rule that does not retry an error wins: it is not retried at all.
    /// let strict = StatusClassifier::default().retry_error_when(|_| false).never_arrived_when(unsent);
    /// assert_eq!(HttpClassifier::<(), ConnectTimeout>::error(&strict, &ConnectTimeout), Verdict::NotRetryable);
    /// ```
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub fn never_arrived_when(mut self, rule: fn(&(dyn std::error::Error + 'static)) -> bool) -> Self {
        self.unsent_error = rule;
        self
    }

    /// The statuses whose rule [`rule`](Self::rule) set, each once with its latest rule, in the
    /// order they were last set: what a service logs to show how it classifies a dependency's
    /// answers.
    ///
    /// ```
    /// use http::StatusCode;
    /// use relent_tokio::http::{StatusClassifier, StatusRule};
    ///
    /// let classifier = StatusClassifier::default()
    ///     .rule(StatusCode::BAD_GATEWAY, StatusRule::Retry)
    ///     .rule(StatusCode::CONFLICT, StatusRule::Fail)
    ///     .rule(StatusCode::BAD_GATEWAY, StatusRule::Fail); // the later rule for a status wins
    /// assert_eq!(
    ///     classifier.overrides().collect::<Vec<_>>(),
    ///     [(StatusCode::CONFLICT, StatusRule::Fail), (StatusCode::BAD_GATEWAY, StatusRule::Fail)],
    /// );
    /// ```
    pub fn overrides(&self) -> impl Iterator<Item = (StatusCode, StatusRule)> + '_ {
        self.rules.iter()
    }

    /// The rule for `status`: an override, or the default.
    pub fn rule_for(&self, status: StatusCode) -> StatusRule {
        if let Some(rule) = self.rules.get(status) {
            return rule;
        }
        match status {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => StatusRule::Retry,
            s if s.is_server_error() => StatusRule::Fail,
            _ => StatusRule::Success,
        }
    }
}

impl<RB, E: std::error::Error + 'static> HttpClassifier<RB, E> for StatusClassifier {
    fn response(&self, response: &Response<RB>) -> Exchange {
        match self.rule_for(response.status()) {
            StatusRule::Success => Exchange::Success,
            StatusRule::Fail => Exchange::Failure(Verdict::NotRetryable),
            StatusRule::Retry => match retry_after(response.headers(), SystemTime::now()) {
                Some(wait) => Exchange::Failure(Verdict::RetryableAfter(ticks(wait))),
                None => Exchange::Failure(Verdict::Retryable),
            },
        }
    }

    fn error(&self, error: &E) -> Verdict<HZ> {
        if !(self.retry_error)(error) {
            Verdict::NotRetryable
        } else if (self.unsent_error)(error) {
            Verdict::NeverArrived
        } else {
            Verdict::Retryable
        }
    }
}

/// Whether an error says the request never reached the far side: a connection refused, or a
/// connect timeout, anywhere in its chain of sources; with the `hyper-util` feature, any error of
/// hyper-util's client that says it could not connect ([`hyper_util_connect`]) too.
///
/// Refusals and timeouts are io errors of their kind (`ConnectionRefused`, `TimedOut`), as hyper's
/// connector reports them. An io `TimedOut` is read as a connect timeout: a client whose reads time
/// out with the same kind has those retried too, which is why the rule decides only whether an
/// error is retried, and a request the layer may not send again (a keyless POST) is sent again
/// only after an error that certainly never arrived ([`never_sent`]).
/// [`StatusClassifier::retry_error_when`] takes a rule of a client's own.
pub fn never_arrived(error: &(dyn std::error::Error + 'static)) -> bool {
    io_error_of_kind(error, |kind| {
        matches!(kind, std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::TimedOut)
    }) || could_not_connect(error)
}

/// Whether an error certainly says the request was never sent: a refused connection
/// ([`connection_refused`]), or, with the `hyper-util` feature, hyper-util's client saying it
/// could not connect ([`hyper_util_connect`]: its connect timeouts included, and reqwest's, whose
/// client is hyper-util's). Sending such a request again is safe whatever it does.
/// [`StatusClassifier`] judges such an error [`Verdict::NeverArrived`] when its rule retries it
/// (its default for [`StatusClassifier::never_arrived_when`]).
///
/// Without the feature a connect timeout is not read so: an io `TimedOut` is also what a
/// connection that stopped answering in the middle of a request reports, and that request may
/// have arrived.
///
/// ```
/// use relent_tokio::http::never_sent;
///
/// assert!(never_sent(&std::io::Error::from(std::io::ErrorKind::ConnectionRefused)));
/// assert!(!never_sent(&std::io::Error::from(std::io::ErrorKind::TimedOut)));
/// ```
pub fn never_sent(error: &(dyn std::error::Error + 'static)) -> bool {
    connection_refused(error) || could_not_connect(error)
}

/// Whether an error says the connection was refused (an io error of kind `ConnectionRefused`
/// anywhere in its chain of sources, as hyper's and reqwest's connectors report it): the request
/// was never sent.
///
/// ```
/// use relent_tokio::http::connection_refused;
///
/// assert!(connection_refused(&std::io::Error::from(std::io::ErrorKind::ConnectionRefused)));
/// assert!(!connection_refused(&std::io::Error::from(std::io::ErrorKind::TimedOut)));
/// ```
pub fn connection_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    io_error_of_kind(error, |kind| kind == std::io::ErrorKind::ConnectionRefused)
}

/// Whether hyper-util's client says, anywhere in `error`'s chain of sources, that it could not
/// connect (`hyper_util::client::legacy::Error::is_connect`): the connector failed, or the pool
/// could give no connection, before a byte of the request was written. A connect timeout
/// (`HttpConnector::set_connect_timeout`, or reqwest's `connect_timeout`), a refused connection, a
/// name that did not resolve and a TLS handshake that failed are all such errors.
///
/// reqwest's client is hyper-util's, and its `Error::is_connect` is this same test, so with this
/// feature reqwest's connect errors are found too, whichever of its timers fired: as long as
/// reqwest and relent-tokio build against one hyper-util 0.1 (cargo unifies them).
///
/// A name that does not resolve is retried by the default rules, as any error that never left:
/// a resolver's failure often passes, and one that lasts spends the policy's attempts and the
/// retry budget as any other failure that lasts.
///
/// With the `hyper-util` feature only; [`never_arrived`] and [`never_sent`], the classifier's
/// defaults, call it when it is there.
#[cfg(feature = "hyper-util")]
pub fn hyper_util_connect(error: &(dyn std::error::Error + 'static)) -> bool {
    sources(error).any(|e| {
        e.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(hyper_util::client::legacy::Error::is_connect)
    })
}

/// [`hyper_util_connect`] when the client it knows is compiled in.
fn could_not_connect(error: &(dyn std::error::Error + 'static)) -> bool {
    #[cfg(feature = "hyper-util")]
    return hyper_util_connect(error);
    #[cfg(not(feature = "hyper-util"))]
    {
        let _ = error;
        false
    }
}

/// `error` and its sources, in order.
fn sources<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'e (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |e| e.source())
}

/// Whether an io error of a kind `wanted` accepts is anywhere in `error`'s chain of sources.
fn io_error_of_kind(
    error: &(dyn std::error::Error + 'static),
    wanted: impl Fn(std::io::ErrorKind) -> bool,
) -> bool {
    sources(error).any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|io| wanted(io.kind())))
}

/// A request body that can be sent again. Implemented for the owned body types; a body that
/// cannot be replayed (a stream) returns `None`, and its request gets one attempt.
///
/// Under a policy of more than one attempt, the [`RetryLayer`](crate::RetryLayer) asks for a copy
/// once before a replayable request's first attempt (whether it gets one decides whether the
/// request may be retried, and the copy is what the first attempt sends), then once for each later
/// attempt that a retry may follow; the last
/// attempt the policy allows sends the original. A copy refused after the first ends the request
/// with [`HttpError::BodyNotReplayable`](crate::HttpError::BodyNotReplayable).
pub trait ReplayBody: Sized {
    /// Another copy of the body, if it can be made.
    fn try_clone(&self) -> Option<Self>;
}

impl ReplayBody for () {
    fn try_clone(&self) -> Option<Self> {
        Some(())
    }
}
impl ReplayBody for String {
    fn try_clone(&self) -> Option<Self> {
        Some(self.clone())
    }
}
impl ReplayBody for Vec<u8> {
    fn try_clone(&self) -> Option<Self> {
        Some(self.clone())
    }
}
impl ReplayBody for bytes::Bytes {
    fn try_clone(&self) -> Option<Self> {
        Some(self.clone())
    }
}
impl<D: Clone> ReplayBody for http_body_util::Full<D> {
    fn try_clone(&self) -> Option<Self> {
        Some(self.clone())
    }
}
impl<D> ReplayBody for http_body_util::Empty<D> {
    fn try_clone(&self) -> Option<Self> {
        Some(Self::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_owned_body_types_copy_themselves_whole() {
        assert_eq!(().try_clone(), Some(()));
        assert_eq!(String::from("{\"amount\":1}").try_clone().as_deref(), Some("{\"amount\":1}"));
        assert_eq!(b"\x01\x02".to_vec().try_clone(), Some(vec![1, 2]));
        let bytes = bytes::Bytes::from_static(b"card=4242");
        assert_eq!(bytes.try_clone(), Some(bytes));
        assert!(http_body_util::Empty::<bytes::Bytes>::new().try_clone().is_some());
    }

    #[test]
    fn a_rule_of_the_clients_own_replaces_never_arrived_for_errors() {
        #[derive(Debug)]
        struct Unreachable;
        impl std::fmt::Display for Unreachable {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("unreachable")
            }
        }
        impl std::error::Error for Unreachable {}
        let default = StatusClassifier::default();
        let own = StatusClassifier::default().retry_error_when(|e| e.is::<Unreachable>());
        let unreachable = |c: &StatusClassifier| HttpClassifier::<(), Unreachable>::error(c, &Unreachable);
        let refused = |c: &StatusClassifier| {
            HttpClassifier::<(), std::io::Error>::error(c, &std::io::ErrorKind::ConnectionRefused.into())
        };
        assert_eq!(
            (unreachable(&default), refused(&default)),
            (Verdict::NotRetryable, Verdict::NeverArrived)
        );
        assert_eq!((unreachable(&own), refused(&own)), (Verdict::Retryable, Verdict::NotRetryable));
        // Responses are classified as before.
        let busy = Response::builder().status(503).body(()).unwrap();
        assert_eq!(
            HttpClassifier::<(), Unreachable>::response(&own, &busy),
            Exchange::Failure(Verdict::Retryable)
        );
    }

    #[test]
    fn retry_after_is_delta_seconds_or_an_http_date() {
        let now = httpdate::parse_http_date("Sun, 29 Nov 2026 23:00:00 GMT").unwrap();
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("Sun, 29 Nov 2026 23:01:30 GMT", now), Some(Duration::from_secs(90)));
        assert_eq!(
            parse_retry_after("Sun, 29 Nov 2026 22:59:00 GMT", now),
            Some(Duration::ZERO),
            "a past date"
        );
        assert_eq!(parse_retry_after("99999999999999999999999", now), Some(Duration::from_secs(u64::MAX)));
        // The edge of u64: its largest value is exact, one more saturates to it.
        assert_eq!(parse_retry_after("18446744073709551615", now), Some(Duration::from_secs(u64::MAX)));
        assert_eq!(parse_retry_after("18446744073709551620", now), Some(Duration::from_secs(u64::MAX)));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
        assert_eq!(parse_retry_after("", now), None);
    }

    /// Values a server may send: anything; delta-seconds and near misses of them (a sign, a
    /// fraction, a unit, an inner space), padded; and HTTP-dates with, most of the time, one
    /// character changed. Arbitrary text alone almost never parses, so the near misses are what
    /// put the accepting side of the property below to the test.
    fn retry_after_values() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::strategy::Strategy;
        proptest::prop_oneof![
            "\\PC*",
            (
                "[ \t]{0,2}",
                proptest::option::of("[+-]"),
                "[0-9]{1,22}",
                proptest::prop_oneof!["", "\\.[0-9]", "[smh]", " [0-9]", ",[0-9]"],
                "[ \t]{0,2}",
            )
                .prop_map(|(before, sign, digits, rest, after)| {
                    format!("{before}{}{digits}{rest}{after}", sign.unwrap_or_default())
                }),
            (0u64..4_000_000_000, 0usize..40, proptest::char::range(' ', '~')).prop_map(|(t, at, c)| {
                let date = httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_secs(t));
                // An IMF-fixdate is 29 characters: a place past them leaves the date as it is.
                date.char_indices().map(|(i, d)| if i == at { c } else { d }).collect()
            }),
        ]
    }

    proptest::proptest! {
        /// A server sends any bytes: parsing never panics, and accepts exactly what the RFC allows,
        /// delta-seconds or an HTTP-date, with optional whitespace around either.
        #[test]
        fn any_retry_after_value_parses_or_is_refused_without_panicking(value in retry_after_values(), secs in 0u64..=u64::MAX) {
            let now = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
            let v = value.trim();
            let digits = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
            let allowed = digits || httpdate::parse_http_date(v).is_ok();
            proptest::prop_assert_eq!(parse_retry_after(&value, now).is_some(), allowed, "{:?}", value);
            // Delta-seconds are taken as they are, saturating past u64 (never refused as garbage).
            proptest::prop_assert_eq!(parse_retry_after(&secs.to_string(), now), Some(Duration::from_secs(secs)));
            let tenfold = Duration::from_secs(secs.saturating_mul(10));
            proptest::prop_assert_eq!(parse_retry_after(&format!("{secs}0"), now), Some(tenfold));
        }

        /// An HTTP-date is a wait until that second: exact for a date ahead, zero for one past.
        #[test]
        fn an_http_date_is_a_wait_until_it(now_secs in 0u64..4_000_000_000, ahead in -100_000i64..100_000_000) {
            let now = std::time::UNIX_EPOCH + Duration::from_secs(now_secs);
            let at = now_secs.saturating_add_signed(ahead);
            let date = httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_secs(at));
            let expected = Duration::from_secs(at.saturating_sub(now_secs));
            proptest::prop_assert_eq!(parse_retry_after(&date, now), Some(expected), "{}", date);
        }

        /// A response's HTTP-date is read on the server's clock: with a valid `Date`, the wait is
        /// the server's, whatever this clock says; a `Date` that does not parse is ignored, and the
        /// date is measured against this clock; delta-seconds never look at `Date`.
        #[test]
        fn a_responses_http_date_is_measured_against_its_own_date_header(
            sent in 0u64..4_000_000_000,
            wait in 0u64..100_000,
            skew in -1_000_000i64..1_000_000,
            bad_date in proptest::option::of("[a-z0-9 ,:]{0,12}"),
        ) {
            let at = |secs: u64| httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_secs(secs));
            let now_secs = sent.saturating_add_signed(skew);
            let now = std::time::UNIX_EPOCH + Duration::from_secs(now_secs);
            let mut headers = HeaderMap::new();
            headers.insert(header::RETRY_AFTER, at(sent + wait).parse().unwrap());
            headers.insert(header::DATE, at(sent).parse().unwrap());
            proptest::prop_assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(wait)));
            // Padding, as a hand-built header may carry, changes nothing.
            headers.insert(header::DATE, format!(" {} ", at(sent)).parse().unwrap());
            proptest::prop_assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(wait)));

            let on_this_clock = Duration::from_secs((sent + wait).saturating_sub(now_secs));
            match bad_date {
                Some(garbage) => { headers.insert(header::DATE, garbage.parse().unwrap()); }
                None => { headers.remove(header::DATE); }
            }
            proptest::prop_assert_eq!(retry_after(&headers, now), Some(on_this_clock));

            headers.insert(header::DATE, at(sent).parse().unwrap());
            headers.insert(header::RETRY_AFTER, wait.to_string().parse().unwrap());
            proptest::prop_assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(wait)));
        }

        /// A wait passed on as a `Retry-After` reads back, through this module's own parser, as the
        /// whole seconds at or above it: never sooner, and less than a second later. The one
        /// exception is past `u64::MAX` seconds, the most the value can say, where a fraction
        /// saturates down to it.
        #[test]
        fn a_wait_passed_on_reads_back_as_the_whole_seconds_at_or_above_it(
            secs in proptest::prop_oneof![
                0u64..100_000,
                proptest::strategy::Just(u64::MAX - 1),
                proptest::strategy::Just(u64::MAX),
            ],
            nanos in proptest::prop_oneof![proptest::strategy::Just(0u32), 1u32..1_000_000_000],
        ) {
            let wait = Duration::new(secs, nanos);
            let mut headers = HeaderMap::new();
            headers.insert(header::RETRY_AFTER, retry_after_value(wait));
            let back = retry_after(&headers, std::time::UNIX_EPOCH).unwrap();
            let expected = if nanos == 0 { secs } else { secs.saturating_add(1) };
            proptest::prop_assert_eq!(back, Duration::from_secs(expected));
            proptest::prop_assert!(back >= wait || secs == u64::MAX);
        }
    }

    #[test]
    fn idempotent_methods_and_keyed_posts_are_replayable() {
        let req = |m: Method| Request::builder().method(m).body(()).unwrap();
        for m in [Method::GET, Method::HEAD, Method::OPTIONS, Method::PUT, Method::DELETE] {
            assert!(is_replayable(&req(m)));
        }
        assert!(!is_replayable(&req(Method::POST)));
        assert!(!is_replayable(&req(Method::PATCH)));
        let keyed = Request::post("/orders").header("Idempotency-Key", "k1").body(()).unwrap();
        assert!(is_replayable(&keyed));
    }

    /// A few names are compared in turn, more are looked up: both ways find the key wherever it
    /// is among the names (standard ones, custom ones, and ones that only start like it), and
    /// neither finds one that is not there. Every name is distinct, so a request of `names` names
    /// and the key has `names + 1`: 11 and 12 are searched, 13 and 40 looked up.
    #[test]
    fn the_key_is_found_among_few_headers_and_among_many() {
        use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, USER_AGENT};
        let standard = [ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, USER_AGENT];
        let name = |i: usize| match i % 3 {
            0 if i / 3 < standard.len() => standard[i / 3].clone(),
            1 => http::HeaderName::from_bytes(format!("idempotency-key-{i}").as_bytes()).unwrap(),
            _ => http::HeaderName::from_bytes(format!("x-custom-{i}").as_bytes()).unwrap(),
        };
        for names in [0, 1, 10, 11, 12, 40] {
            for at in 0..=names {
                let mut keyed = Request::post("/orders").body(()).unwrap();
                for i in 0..=names {
                    if i == at {
                        keyed.headers_mut().insert("idempotency-key", http::HeaderValue::from_static("k1"));
                    }
                    if i < names {
                        keyed.headers_mut().insert(name(i), http::HeaderValue::from_static("v"));
                    }
                }
                assert_eq!(keyed.headers().keys_len(), names + 1);
                assert!(is_replayable(&keyed), "{names} names, the key before name {at}");
                keyed.headers_mut().remove("idempotency-key");
                assert!(!is_replayable(&keyed), "{names} names, no key");
            }
        }
    }

    #[test]
    fn statuses_are_classified_as_seed_000_says_and_can_be_overridden() {
        let c = StatusClassifier::default();
        let response = |code: u16, retry_after: Option<&str>| {
            let mut r = Response::builder().status(code);
            if let Some(v) = retry_after {
                r = r.header("retry-after", v);
            }
            r.body(()).unwrap()
        };
        let classify =
            |c: &StatusClassifier, r: &Response<()>| HttpClassifier::<(), std::io::Error>::response(c, r);
        assert_eq!(classify(&c, &response(200, None)), Exchange::Success);
        assert_eq!(classify(&c, &response(400, None)), Exchange::Success, "the caller's own mistake");
        assert_eq!(classify(&c, &response(422, None)), Exchange::Success);
        assert_eq!(classify(&c, &response(500, None)), Exchange::Failure(Verdict::NotRetryable));
        assert_eq!(classify(&c, &response(503, None)), Exchange::Failure(Verdict::Retryable));
        assert_eq!(
            classify(&c, &response(429, Some("2"))),
            Exchange::Failure(Verdict::RetryableAfter(crate::Duration::from_secs(2)))
        );
        let c = c
            .rule(StatusCode::INTERNAL_SERVER_ERROR, StatusRule::Retry)
            .rule(StatusCode::CONFLICT, StatusRule::Fail);
        assert_eq!(classify(&c, &response(500, None)), Exchange::Failure(Verdict::Retryable));
        assert_eq!(classify(&c, &response(409, None)), Exchange::Failure(Verdict::NotRetryable));
    }

    #[derive(Debug)]
    struct Wrapped(std::io::Error);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("client error")
        }
    }
    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_refused_or_timed_out_connection_anywhere_in_the_chain_is_retryable_and_only_a_refused_one_never_arrived()
     {
        let c = StatusClassifier::default();
        let refused = Wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let timed_out = Wrapped(std::io::Error::from(std::io::ErrorKind::TimedOut));
        let reset = Wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(HttpClassifier::<(), Wrapped>::error(&c, &refused), Verdict::NeverArrived);
        assert_eq!(
            HttpClassifier::<(), Wrapped>::error(&c, &timed_out),
            Verdict::Retryable,
            "a connection that stopped answering mid-request times out with the same kind"
        );
        assert_eq!(
            HttpClassifier::<(), Wrapped>::error(&c, &reset),
            Verdict::NotRetryable,
            "a reset may come after the request arrived"
        );
    }
}
