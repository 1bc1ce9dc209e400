//! A tower `Layer` that runs every request of an HTTP client service through one dependency's
//! pipeline.
//!
//! - A request is replayable when its method is idempotent or it carries an `Idempotency-Key`
//!   (seed 000); any other request gets exactly one attempt, whatever the policy says. A replayable
//!   request whose body cannot be replayed (a stream) also gets one attempt. Either way the
//!   [`RetryReport`] says so. A replayable request's body and parts are copied, and the inner
//!   service cloned, for each attempt that a retry may follow (the first attempt sends the body's
//!   copy made to learn whether it can be copied at all); the last attempt the policy allows sends
//!   the request's own through the service `call` cloned for the request. A request that succeeds
//!   at once has its body copied once, and one that gets a single attempt not at all.
//! - `poll_ready` is always ready: the inner service's readiness is awaited inside each attempt, so
//!   an open circuit (or a full bulkhead, or a cooldown) fails fast in `call` instead of holding
//!   `poll_ready`, and one broken dependency does not stall a shared client (tower's load-shed
//!   pattern).
//! - The layer's deadline is the most any request may take. A request may carry a sooner one, a
//!   [`RequestDeadline`] in its extensions: the deadline of the call it serves, passed on as seed
//!   000's wrapper passes `ctx.remaining()`, so that a handler's outbound calls together never
//!   outlast the handler's own deadline. With [`RetryLayer::timeout_header`], each attempt also tells
//!   the far side how long it will be waited for, and [`RequestDeadline::from_header`] reads that
//!   on the far side: the deadline crosses the network too.
//! - Responses go back to the caller as responses, whatever their status: the last 503 after the
//!   attempts ran out, or the 429 whose Retry-After was too long to wait, with the [`RetryReport`] in
//!   the response's extensions. Only what has no response is an error: a transport error, a timeout,
//!   or a refusal before anything was sent.
//!
//! Each call allocates four times: its boxed future, and the report in the response's extensions
//! (http's map, its table, the report's box); relent's own `execute` allocates nothing. The box is
//! what lets the future borrow from itself: the operation it runs borrows its policy and the
//! dependency's configuration (`Operation<'p, ..>` holds two references, so that one call in
//! progress costs 144 bytes, not the 376 that copies of both would), and here both live in the
//! future, its copy of the policy and the layer's `Arc`. Only an `async` block can hold such a
//! borrow without `unsafe`, and its type has no name on stable Rust.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use http::{Request, Response};
use relent_core::{
    Classify, Completion, Context, Criticality, Disposition, Problem, ReplaySafety, RetryPolicy, StartError,
    Verdict,
};
use tower::{Layer, Service, ServiceExt};

use crate::clock::{FAR, HZ, std_duration, ticks};
use crate::dependency::Dependency;
use crate::error::{AttemptError, Detailed, Outcome, Wait};
use crate::execute;
use crate::http::{Exchange, HttpClassifier, ReplayBody, StatusClassifier, is_idempotent, is_replayable};

/// Why a request got a single attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SingleAttempt {
    /// Neither an idempotent method nor an `Idempotency-Key`, under a policy of one attempt or
    /// through a layer set to [`RetryLayer::keyless_once`]: repeating it could repeat its effect.
    /// (Otherwise such a request is sent again after an attempt that never arrived: its
    /// `replay_safety` is `UntilArrived`.)
    NotIdempotent,
    /// Its body cannot be sent twice: not even an attempt that never arrived is sent again.
    BodyNotReplayable,
}

/// The instant a request must be over by: put it in the request's extensions to pass on the time
/// left to the call the request serves (seed 000's `ctx.remaining()`).
///
/// The request's attempts and waits then end by the sooner of this instant and the layer's own
/// deadline counted from the call, and the last attempt's timeout is cut to fit, as for any
/// deadline. A request whose deadline has already passed is not sent: the call fails with
/// [`HttpError::Refused`] and the problem `deadline_exceeded`. Without one, the layer's deadline
/// alone applies, or, for a request sent from inside an attempt of relent-tokio's, the sooner of it
/// and that attempt's expiry ([`attempt_expiry`](crate::attempt_expiry)). It rides along in every
/// attempt's request, where the inner service can read it too (to send the time left on in a
/// header, say).
///
/// ```
/// # async fn handler() {
/// use std::time::Duration;
/// use relent_tokio::RequestDeadline;
///
/// // The handler has 10 s for the whole checkout; each outbound request gets what is left.
/// let checkout = RequestDeadline::within(Duration::from_secs(10));
/// let mut quote = http::Request::get("http://payrail.test/quote").body(String::new()).unwrap();
/// quote.extensions_mut().insert(checkout);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestDeadline(tokio::time::Instant);

impl RequestDeadline {
    /// At `instant`, on tokio's clock.
    pub fn at(instant: tokio::time::Instant) -> Self {
        Self(instant)
    }

    /// `time` from now, on tokio's clock. A span beyond 30 years counts as 30 years: later than
    /// any layer's deadline, so the layer's applies.
    pub fn within(time: std::time::Duration) -> Self {
        let now = tokio::time::Instant::now();
        Self(now.checked_add(time.min(FAR)).unwrap_or(now))
    }

    /// The instant.
    pub fn instant(self) -> tokio::time::Instant {
        self.0
    }

    /// The time left at `now`: zero once the deadline has passed.
    pub fn remaining_at(self, now: tokio::time::Instant) -> std::time::Duration {
        self.0.saturating_duration_since(now)
    }

    /// Runs `future` under this deadline: every operation of relent-tokio started inside it
    /// (`execute`, `execute_detailed`, a request through either layer) ends by it, its last
    /// attempt cut to fit, and one started after it has passed is refused with
    /// `deadline_exceeded` before anything is sent. Seed 000's `ctx.remaining()`, given once for
    /// a whole handler rather than to each of its calls; with [`from_header`](Self::from_header),
    /// the deadline its own caller sent.
    ///
    /// A scope never extends the bound it runs in: inside an attempt that expires sooner, or
    /// inside a scope that ends sooner, that instant stays the bound. A task spawned inside it is
    /// not bounded by it (as a task spawned from an attempt is not). Each operation's completion
    /// says the deadline it ran under, and a `relent: deadline cut` line at DEBUG (`by="scope"`)
    /// what it asked for.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration as Std;
    /// use relent_tokio::core::{Context, DependencyConfig, ReplaySafety, RetryBudget, RetryPolicy, Verdict};
    /// use relent_tokio::{Dependency, Duration, HZ, RequestDeadline};
    ///
    /// let ledger = Dependency::new("ledger", DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5)?))?;
    /// let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1)).build()?;
    /// // Each call would allow itself 10 s; the handler has 2 s for both.
    /// let read = Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(60)));
    /// let handler = async {
    ///     let first = ledger.execute_detailed(&policy, read, |_| async {
    ///         tokio::time::sleep(Std::from_millis(1_500)).await; // a slow answer
    ///         Ok::<_, Verdict<HZ>>(1)
    ///     });
    ///     let first = first.await?;
    ///     let second = ledger.execute_detailed(&policy, read, |_| async { Ok::<_, Verdict<HZ>>(2) }).await?;
    ///     Ok::<_, relent_tokio::core::StartError>((first.deadline, second.deadline))
    /// };
    /// let (first, second) = RequestDeadline::within(Std::from_secs(2)).scope(handler).await?;
    /// assert_eq!((first, second), (Std::from_secs(2), Std::from_millis(500))); // what was left
    /// # Ok(()) }
    /// ```
    pub fn scope<F: Future>(self, future: F) -> Scoped<F> {
        Scoped { future, deadline: self.0 }
    }
}

impl RequestDeadline {
    /// The deadline a caller sent in header `name` (as [`RetryLayer::timeout_header`] sends it):
    /// whole milliseconds from now, on tokio's clock. Put it in the extensions of the requests a
    /// handler makes for that call, and they end when the caller stops waiting.
    ///
    /// `Ok(None)` when the header is absent; with several values, the smallest. Counted from this
    /// call, so the request's time in transit is not taken off: a far side that wants a margin
    /// for its answer's way back takes it off itself. A value beyond 30 years counts as 30 years,
    /// as in [`within`](Self::within).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use http::HeaderName;
    /// use relent_tokio::RequestDeadline;
    ///
    /// const TIMEOUT: HeaderName = HeaderName::from_static("x-request-timeout-ms");
    /// // The caller waits 2.5 s for this request; the handler's own limit is 10 s.
    /// let inbound = http::Request::get("/checkout").header(&TIMEOUT, "2500").body(())?;
    /// let deadline = RequestDeadline::from_header(inbound.headers(), &TIMEOUT)? // a 400 for a bad value
    ///     .unwrap_or_else(|| RequestDeadline::within(Duration::from_secs(10)));
    /// assert_eq!(deadline.remaining_at(tokio::time::Instant::now()), Duration::from_millis(2_500));
    /// // Each outbound request of the handler carries it (the layer ends it by then).
    /// let mut quote = http::Request::get("http://payrail.test/quote").body(String::new())?;
    /// quote.extensions_mut().insert(deadline);
    ///
    /// // A value that is not whole milliseconds is refused, saying so.
    /// let bad = http::Request::get("/").header(&TIMEOUT, "2.5s").body(())?;
    /// let err = RequestDeadline::from_header(bad.headers(), &TIMEOUT).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "`2.5s` in header x-request-timeout-ms is not a timeout: the header holds whole milliseconds, such as 2500"
    /// );
    /// # Ok(()) }
    /// ```
    pub fn from_header(
        headers: &http::HeaderMap,
        name: &http::HeaderName,
    ) -> Result<Option<Self>, InvalidTimeout> {
        Ok(timeout_in(headers, name)?.map(Self::within))
    }
}

/// The smallest timeout, in whole milliseconds, that `headers` hold under `name`: what
/// [`RequestDeadline::from_header`] counts from now, and `DeadlineLayer` takes its limit's minimum
/// with before reading the clock once.
pub(crate) fn timeout_in(
    headers: &http::HeaderMap,
    name: &http::HeaderName,
) -> Result<Option<std::time::Duration>, InvalidTimeout> {
    let mut least: Option<u64> = None;
    for value in headers.get_all(name) {
        let bytes = value.as_bytes();
        if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
            return Err(InvalidTimeout {
                header: name.clone(),
                value: String::from_utf8_lossy(bytes).into_owned(),
            });
        }
        // Digits alone: only a number too large for 64 bits fails, and it is as far as any.
        let ms = std::str::from_utf8(bytes).ok().and_then(|t| t.parse().ok()).unwrap_or(u64::MAX);
        least = Some(least.map_or(ms, |l| l.min(ms)));
    }
    Ok(least.map(std::time::Duration::from_millis))
}

pin_project_lite::pin_project! {
    /// The future [`RequestDeadline::scope`] returns: the caller's future, polled under the
    /// deadline. It holds that future in place, once, beside the instant.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Scoped<F> {
        #[pin]
        future: F,
        deadline: tokio::time::Instant,
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        crate::bound::poll_scoped(*this.deadline, this.future, cx)
    }
}

/// A timeout header whose value is not whole milliseconds ([`RequestDeadline::from_header`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidTimeout {
    /// The header's name.
    pub header: http::HeaderName,
    /// Its value as sent (bytes that are not UTF-8 replaced).
    pub value: String,
}

impl fmt::Display for InvalidTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` in header {} is not a timeout: the header holds whole milliseconds, such as 2500",
            self.value, self.header
        )
    }
}

impl std::error::Error for InvalidTimeout {}

/// How a request went through the pipeline: in the response's extensions, or in the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryReport {
    /// The operation's id, as in the logs.
    pub operation: u64,
    /// Succeeded, failed, deferred or rejected.
    pub disposition: Disposition,
    /// The problem code, if any.
    pub problem: Option<Problem>,
    /// Attempts sent.
    pub dispatched: u8,
    /// Of those, retries: all but the first, or, for a hedge, its one attempt (a repeat
    /// of the request, as a retry is).
    pub retries: u8,
    /// Time spent waiting between attempts.
    pub waited: std::time::Duration,
    /// Time from the first attempt to the end.
    pub elapsed: std::time::Duration,
    /// The far side's last stated wait.
    pub retry_after: Option<std::time::Duration>,
    /// For a deferred or rejected request, how long after its end to try again, where that is
    /// known (as [`Error::retry_in`](crate::Error::retry_in)): the 429 whose Retry-After was too
    /// long to wait, the cooldown it started, the open circuit's break, the next rate-limit unit.
    pub retry_in: Option<std::time::Duration>,
    /// Set when the request was only ever going to get one attempt, and why.
    pub single_attempt: Option<SingleAttempt>,
    /// The replay-safety statement the layer made for the request (seed 003: every operation
    /// states one): `ReplayableRead` for an idempotent method, `ProviderIdempotentMutation` for a
    /// request that carries an `Idempotency-Key`, each valid for [`RetryLayer::replay_valid_for`];
    /// `UntilArrived` for any other request (a keyless POST), sent again only after an attempt
    /// that never arrived (a refused connection, [`crate::http::never_sent`]), and ended at the first that may have
    /// (`may_have_arrived`); `Unsafe` for a request the layer gives a single attempt (`single_attempt` says why; a read
    /// under a policy of one attempt is still a read). What to look at when a request was
    /// repeated and should not have been, or the other way round.
    pub replay_safety: ReplaySafety<HZ>,
    /// The deadline the request ran under, from its start: the layer's, or what was left of the
    /// request's [`RequestDeadline`], or of the attempt it was sent from (see
    /// [`attempt_expiry`](crate::attempt_expiry)), when that was sooner. What to look at when a request ended
    /// with `deadline_exceeded` or `retry_delay_exceeds_deadline` sooner than the layer's deadline.
    pub deadline: std::time::Duration,
    /// Whether the response is a hedge's ([`RetryLayer::hedge_after`]): a second copy of the
    /// request, sent while the first was still out, answered first. The other fields are then the
    /// hedge's own: one attempt, numbered 2, its own operation id. What a dashboard counts to see
    /// how often hedges win.
    pub hedge: bool,
    /// Whether a hedge was sent for the request at all, answered first or not
    /// ([`Detailed::hedge_sent`](crate::Detailed::hedge_sent)): hedges that won over requests
    /// hedged says whether the delay is well placed. The calls a request made are `dispatched`,
    /// and one more for a hedge sent that the first copy beat; when the hedge won, `dispatched` is
    /// its one attempt, and the first copy made at least one more.
    pub hedge_sent: bool,
    /// How much the request mattered when the dependency's limits ran short: the layer's
    /// ([`RetryLayer::criticality`]), or the request's own, from its extensions. What a dashboard
    /// splits refusals by, to tell work shed on purpose from work that should have gone.
    pub criticality: Criticality,
}

impl RetryReport {
    fn new<E>(
        completion: &Completion<HZ, E>,
        retry_in: Option<std::time::Duration>,
        single_attempt: Option<SingleAttempt>,
        (replay_safety, criticality): (ReplaySafety<HZ>, Criticality),
        deadline: std::time::Duration,
        (hedge, hedge_sent): (bool, bool),
    ) -> Self {
        Self {
            operation: completion.operation.0,
            disposition: completion.disposition,
            problem: completion.problem,
            dispatched: completion.summary.dispatched,
            retries: completion.summary.retries,
            waited: std_duration(completion.summary.waited),
            elapsed: std_duration(completion.summary.elapsed),
            retry_after: completion.retry_after.map(std_duration),
            retry_in,
            single_attempt,
            replay_safety,
            criticality,
            deadline,
            hedge,
            hedge_sent,
        }
    }
}

/// A request that produced no response to return. Its message starts with the dependency's name,
/// as [`Error`](crate::Error)'s does: a service with a layer per provider can tell from a log line
/// which one refused or failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum HttpError<E> {
    /// The inner service failed (connection refused, reset, ...), on the last attempt.
    Transport {
        /// The dependency's name.
        dependency: Arc<str>,
        /// The inner service's error.
        error: E,
        /// How the request went.
        report: RetryReport,
    },
    /// The last attempt ran past its timeout.
    TimedOut {
        /// The dependency's name.
        dependency: Arc<str>,
        /// The last attempt's timeout.
        after: std::time::Duration,
        /// How the request went.
        report: RetryReport,
    },
    /// A protection refused the request before anything was sent (circuit open, bulkhead full,
    /// rate limited, cooldown), or the retry budget or deadline ended it with no response kept.
    Refused {
        /// The dependency's name.
        dependency: Arc<str>,
        /// How the request went.
        report: RetryReport,
    },
    /// The request's body could not be copied for a retry (a [`ReplayBody`] whose `try_clone`
    /// gave up after the first attempt); the last attempt's response is lost with it. The attempt
    /// that got no body counts in the report's `dispatched` (the pipeline had admitted it), though
    /// nothing was sent for it.
    BodyNotReplayable {
        /// The dependency's name.
        dependency: Arc<str>,
        /// How the request went.
        report: RetryReport,
    },
    /// The layer's policy cannot run this request; nothing was sent.
    Start(StartError),
}

impl<E> HttpError<E> {
    /// The report, unless nothing started.
    pub fn report(&self) -> Option<&RetryReport> {
        match self {
            Self::Transport { report, .. }
            | Self::TimedOut { report, .. }
            | Self::Refused { report, .. }
            | Self::BodyNotReplayable { report, .. } => Some(report),
            Self::Start(_) => None,
        }
    }

    /// The dependency's name, unless nothing started.
    pub fn dependency(&self) -> Option<&str> {
        match self {
            Self::Transport { dependency, .. }
            | Self::TimedOut { dependency, .. }
            | Self::Refused { dependency, .. }
            | Self::BodyNotReplayable { dependency, .. } => Some(dependency),
            Self::Start(_) => None,
        }
    }
}

impl RetryReport {
    fn outcome<'a>(&self, dependency: &'a str) -> Outcome<'a> {
        let ended = relent_core::Outcome {
            disposition: self.disposition,
            problem: self.problem,
            dispatched: self.dispatched,
            retry_after: self.retry_after.map(Wait),
            retry_in: self.retry_in.map(Wait),
        };
        Outcome { dependency, ended }
    }
}

impl<E: fmt::Display> fmt::Display for HttpError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Transport { dependency, error, report } => {
                write!(f, "{}; last failure: {error}", report.outcome(dependency))
            }
            Self::TimedOut { dependency, after, report } => {
                write!(f, "{}; last failure: attempt timed out after {after:?}", report.outcome(dependency))
            }
            Self::Refused { dependency, report } => write!(f, "{}", report.outcome(dependency)),
            Self::BodyNotReplayable { dependency, report } => {
                write!(
                    f,
                    "{dependency}: the request body could not be copied for attempt {}",
                    report.dispatched
                )
            }
            Self::Start(e) => write!(f, "request not started: {e}"),
        }
    }
}

/// As [`Error`](crate::Error)'s: the message shows the transport error or the start error, so
/// `source` continues below it, and a chain is printed with each message once.
impl<E: std::error::Error + 'static> std::error::Error for HttpError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Transport { error, .. } => error.source(),
            Self::Start(e) => e.source(),
            Self::TimedOut { .. } | Self::Refused { .. } | Self::BodyNotReplayable { .. } => None,
        }
    }
}

/// What an operation whose attempt sent this request should do about it: as
/// [`Error`](crate::Error)'s verdict, seed 000's rule that exactly one layer retries. A request the
/// layer could retry was retried here (a keyless POST too, whose attempts that never arrived were
/// sent again, and which ended at one that may have arrived), so the outer operation does not retry
/// it again; one the layer gave a single attempt (a policy of one attempt, a body that cannot be
/// copied) is the outer's to retry,
/// when the layer's classifier called its failure retryable (after the far side's Retry-After, if
/// it stated one); a deferral or a refusal with a known end is retryable after
/// [`RetryReport::retry_in`]; a request that succeeded is not retryable.
///
/// A response comes back as `Ok` whatever its status, with this report in its extensions: an
/// attempt that turns a status into an error of its own classifies that error by the report, and
/// a 503 the layer already retried is not retried again.
///
/// ```
/// use relent_tokio::core::{Classify, Verdict};
/// use relent_tokio::{HZ, RetryReport};
///
/// /// An outer operation's error for a response it cannot use.
/// #[derive(Debug)]
/// struct Status(http::StatusCode, RetryReport);
///
/// impl Classify<HZ> for Status {
///     fn classify(&self) -> Verdict<HZ> {
///         self.1.classify()
///     }
/// }
/// ```
impl Classify<HZ> for RetryReport {
    fn classify(&self) -> Verdict<HZ> {
        let ended = relent_core::Ended {
            disposition: self.disposition,
            problem: self.problem,
            dispatched: self.dispatched,
            retries: self.retries,
            retry_in: self.retry_in.map(ticks),
        };
        ended.verdict(|| match self.retry_after {
            Some(wait) => Verdict::RetryableAfter(ticks(wait)),
            None => Verdict::Retryable,
        })
    }
}

/// A request run inside another operation's attempt, returned as that attempt's failure: its
/// report's verdict ([`RetryReport`]'s `Classify`), and not retryable when it never started.
impl<E> Classify<HZ> for HttpError<E> {
    fn classify(&self) -> Verdict<HZ> {
        self.report().map_or(Verdict::NotRetryable, Classify::classify)
    }
}

/// One attempt's failure, with the classifier's verdict.
enum Failed<RB, E> {
    Response(Response<RB>, Verdict<HZ>),
    Transport(E, Verdict<HZ>),
    /// The body said it could be replayed, then could not produce another copy.
    NoBody,
}

impl<RB, E> Classify<HZ> for Failed<RB, E> {
    fn classify(&self) -> Verdict<HZ> {
        match self {
            Self::Response(_, v) | Self::Transport(_, v) => *v,
            Self::NoBody => Verdict::NotRetryable,
        }
    }
}

/// Applies a dependency's pipeline to an HTTP client service.
#[derive(Debug, Clone)]
pub struct RetryLayer<C = StatusClassifier> {
    dependency: Dependency,
    policy: RetryPolicy<HZ>,
    deadline: std::time::Duration,
    replay_valid_for: std::time::Duration,
    timeout_header: Option<http::HeaderName>,
    hedge_after: Option<relent_core::HedgeDelay<HZ>>,
    criticality: Criticality,
    /// Whether a request the layer may not repeat gets one attempt even when it never arrived.
    keyless_once: bool,
    classifier: C,
}

impl RetryLayer<StatusClassifier> {
    /// Every request through `dependency` under `policy`, each within `deadline` (all attempts and
    /// waits together; sooner for a request with a [`RequestDeadline`]), classified by the default
    /// [`StatusClassifier`].
    pub fn new(dependency: Dependency, policy: RetryPolicy<HZ>, deadline: std::time::Duration) -> Self {
        Self {
            dependency,
            policy,
            deadline,
            replay_valid_for: std::time::Duration::from_secs(24 * 3600),
            timeout_header: None,
            hedge_after: None,
            criticality: Criticality::Critical,
            keyless_once: false,
            classifier: StatusClassifier::default(),
        }
    }
}

impl<C> RetryLayer<C> {
    /// Replaces the classifier.
    pub fn classifier<C2>(self, classifier: C2) -> RetryLayer<C2> {
        RetryLayer {
            dependency: self.dependency,
            policy: self.policy,
            deadline: self.deadline,
            replay_valid_for: self.replay_valid_for,
            timeout_header: self.timeout_header,
            hedge_after: self.hedge_after,
            criticality: self.criticality,
            keyless_once: self.keyless_once,
            classifier,
        }
    }

    /// Gives every request the layer may not repeat (neither an idempotent method nor an
    /// `Idempotency-Key`) a single attempt, even after a refused connection: for a team whose rule
    /// is that such a request is sent once, whatever became of it. Its report's `single_attempt`
    /// is then `NotIdempotent`, and its statement `Unsafe`. By default it is sent again after an
    /// attempt that never arrived, and only then (seed 000; [`RetryReport::replay_safety`]).
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub fn keyless_once(mut self) -> Self {
        self.keyless_once = true;
        self
    }

    /// How long a replayable request stays safe to repeat (default 24 h, a common idempotency-key
    /// retention).
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub fn replay_valid_for(mut self, valid_for: std::time::Duration) -> Self {
        self.replay_valid_for = valid_for;
        self
    }

    /// Tells the far side how long each attempt will be waited for: every attempt's request
    /// carries its timeout in header `name`, in whole milliseconds rounded down (the policy's
    /// attempt timeout, or the time left before the deadline when that is sooner, as
    /// [`AttemptInfo::timeout`](crate::AttemptInfo::timeout) says), in place of any value of that
    /// name the request had. Seed 000: "an attempt that cannot finish inside the client's patience
    /// is an attempt whose answer nobody will read"; a far side that reads the header (with
    /// [`RequestDeadline::from_header`], if it runs relent-tokio) can stop that work, and pass
    /// what is left on to its own calls. No header is sent by default: there is no standard name
    /// (Envoy sends `x-envoy-expected-rq-timeout-ms`; `x-request-timeout-ms` is a common choice).
    ///
    /// ```
    /// use std::time::Duration as Std;
    /// use http::HeaderName;
    /// use relent_tokio::core::{DependencyConfig, RetryBudget, RetryPolicy};
    /// use relent_tokio::{Dependency, Duration, RetryLayer};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let payrail = Dependency::new("payrail", DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5)?))?;
    /// let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1))
    ///     .attempt_timeout(Duration::from_millis(500))
    ///     .build()?;
    /// // Each attempt says `x-request-timeout-ms: 500`, or less for one cut by the 5 s deadline.
    /// let layer = RetryLayer::new(payrail, policy, Std::from_secs(5))
    ///     .timeout_header(HeaderName::from_static("x-request-timeout-ms"));
    /// # let _ = layer; Ok(()) }
    /// ```
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub fn timeout_header(mut self, name: http::HeaderName) -> Self {
        self.timeout_header = Some(name);
        self
    }

    /// Hedges every request of an idempotent method the layer would retry (see
    /// [`Dependency::execute_hedged`]): one that has not answered `after` its start gets a second
    /// copy, sent as attempt 2 through a clone of the service, and the first success is the
    /// response; the other is cancelled. `after` is a `std::time::Duration`, or a
    /// [`HedgeDelay`](relent_core::HedgeDelay): `HedgeDelay::percentile(95)` hedges at the
    /// dependency's own 95th percentile of latency, read from its latency log when each request
    /// starts (see [`Dependency::execute_hedged`]). A hedge is paid for by the dependency's retry budget and admitted by its
    /// protections as a retry is. A request that gets one attempt (a body that cannot be copied) is
    /// not hedged, nor is a POST without an `Idempotency-Key` (sent again only when its attempt never
    /// arrived), and neither is a POST with a key, which is still retried: a provider's key protects a repeat that comes after the first
    /// request, not a copy in flight ([`ReplaySafety::may_hedge`]).
    /// Every attempt of a hedged request sends a copy of it, the last included (either of two
    /// attempts out at once may be the one still running when the other needs the request). The
    /// policy must allow a repeat: with one attempt, each request that would be hedged is refused
    /// with `hedge_without_retries` before anything is sent.
    ///
    /// ```
    /// use std::time::Duration as Std;
    /// use relent_tokio::core::{DependencyConfig, RetryBudget, RetryPolicy};
    /// use relent_tokio::{Dependency, Duration, RetryLayer};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let prices = Dependency::new("prices", DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5)?))?;
    /// let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1))
    ///     .attempt_timeout(Duration::from_millis(500))
    ///     .build()?;
    /// // Most answers take under 40 ms: a GET still out at 40 ms gets a second copy.
    /// let layer = RetryLayer::new(prices, policy, Std::from_secs(2)).hedge_after(Std::from_millis(40));
    /// # let _ = layer; Ok(()) }
    /// ```
    ///
    /// [`Dependency::execute_hedged`]: crate::Dependency::execute_hedged
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub fn hedge_after(mut self, after: impl crate::IntoHedgeDelay) -> Self {
        self.hedge_after = Some(after.into_hedge_delay());
        self
    }

    /// How much the layer's requests matter when the dependency's limits run short (see
    /// [`Criticality`]): [`Critical`](Criticality::Critical) by default. A request that carries a
    /// [`Criticality`] in its extensions is of that one instead, so one client can send both
    /// (`request.extensions_mut().insert(Criticality::Sheddable)`). A sheddable request may not use
    /// the dependency's critical reserve ([`DependencyConfig::critical_reserve`]) of its bulkhead
    /// and retry budget: when those run short, it is refused (`bulkhead_full`,
    /// `retry_budget_exhausted`) while critical requests still go.
    ///
    /// ```
    /// use std::time::Duration as Std;
    /// use relent_tokio::core::{Criticality, DependencyConfig, RetryBudget, RetryPolicy};
    /// use relent_tokio::{Dependency, Duration, RetryLayer};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // A fifth of the slots and of the retry budget is kept for critical requests.
    /// let config = DependencyConfig::new(Duration::from_secs(10))
    ///     .budget(RetryBudget::ratio(10, 5)?)
    ///     .bulkhead(100)
    ///     .critical_reserve(20);
    /// let prices = Dependency::new("prices", config)?;
    /// let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1)).build()?;
    /// // Price lookups may be shed: they use at most 80 of the slots and 80 % of the budget.
    /// let layer = RetryLayer::new(prices, policy, Std::from_secs(2)).criticality(Criticality::Sheddable);
    /// # let _ = layer; Ok(()) }
    /// ```
    ///
    /// [`DependencyConfig::critical_reserve`]: relent_core::DependencyConfig::critical_reserve
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub fn criticality(mut self, criticality: Criticality) -> Self {
        self.criticality = criticality;
        self
    }
}

impl<S, C: Clone> Layer<S> for RetryLayer<C> {
    type Service = Retry<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Retry { inner, shared: Arc::new(self.clone()) }
    }
}

/// The service [`RetryLayer`] wraps around an HTTP client.
#[derive(Debug)]
pub struct Retry<S, C = StatusClassifier> {
    inner: S,
    shared: Arc<RetryLayer<C>>,
}

impl<S: Clone, C> Clone for Retry<S, C> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), shared: self.shared.clone() }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, RB, C> Service<Request<B>> for Retry<S, C>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send + 'static,
    B: ReplayBody + Send + 'static,
    RB: Send + 'static,
    C: HttpClassifier<RB, S::Error>,
{
    type Response = Response<RB>;
    type Error = HttpError<S::Error>;
    type Future = BoxFuture<Result<Response<RB>, HttpError<S::Error>>>;

    fn poll_ready(&mut self, _cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let prepared = prepare(&self.shared, request);
        match self.shared.hedge_after {
            Some(after) if prepared.single.is_none() && prepared.safety.may_hedge() => {
                Box::pin(run_hedged(self.shared.clone(), self.inner.clone(), prepared, after))
            }
            _ => Box::pin(run(self.shared.clone(), self.inner.clone(), prepared)),
        }
    }
}

/// What a request runs under, worked out before anything is awaited: its parts and body, taken
/// apart to be put together again for each attempt, and why it gets one attempt, if it does.
struct Prepared<B> {
    parts: http::request::Parts,
    body: B,
    /// The copy of the body made to learn whether it can be replayed: the first attempt's, when a
    /// retry may follow it.
    copy: Option<B>,
    single: Option<SingleAttempt>,
    policy: RetryPolicy<HZ>,
    safety: ReplaySafety<HZ>,
    /// The request's own deadline, if it has one: counted from the first poll, when the operation
    /// starts, as the layer's is.
    until: Option<RequestDeadline>,
    /// The request's own criticality, or the layer's.
    criticality: Criticality,
}

/// Takes `request` apart in a plain function, not in the future: a request the future borrowed
/// (its method, headers and extensions are read here) would keep its 224 bytes in the future after
/// it was taken apart, beside the parts.
fn prepare<B: ReplayBody, C>(shared: &RetryLayer<C>, request: Request<B>) -> Prepared<B> {
    let replayable = is_replayable(&request);
    let (single, copy) = if !replayable && (shared.keyless_once || shared.policy.max_attempts() <= 1) {
        (Some(SingleAttempt::NotIdempotent), None)
    } else if shared.policy.max_attempts() <= 1 {
        // No retry can follow the one attempt: no copy is needed to learn anything.
        (None, None)
    } else {
        match request.body().try_clone() {
            None => (Some(SingleAttempt::BodyNotReplayable), None),
            copy => (None, copy),
        }
    };
    let valid_for = ticks(shared.replay_valid_for);
    let (policy, safety) = match single {
        Some(_) => (shared.policy.without_retries(), ReplaySafety::Unsafe),
        None if is_idempotent(request.method()) => (shared.policy, ReplaySafety::replayable_read(valid_for)),
        None if replayable => (shared.policy, ReplaySafety::provider_idempotent_mutation(valid_for)),
        // A keyless POST: sent again only after an attempt that never arrived (seed 000).
        None => (shared.policy, ReplaySafety::UntilArrived),
    };
    let until = request.extensions().get::<RequestDeadline>().copied();
    let criticality = request.extensions().get::<Criticality>().copied().unwrap_or(shared.criticality);
    let (parts, body) = request.into_parts();
    Prepared { parts, body, copy, single, policy, safety, until, criticality }
}

/// The request's whole run through the pipeline, and its response or error with the report. A
/// function returning an `async` block, not an `async fn`: an `async fn` keeps its arguments in
/// locals of its own, so its future would hold `shared` and the request twice (as `execute`'s
/// `run` explains).
#[allow(clippy::manual_async_fn)]
fn run<S, B, RB, C>(
    shared: Arc<RetryLayer<C>>,
    inner: S,
    prepared: Prepared<B>,
) -> impl Future<Output = Result<Response<RB>, HttpError<S::Error>>>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone,
    B: ReplayBody,
    C: HttpClassifier<RB, S::Error>,
{
    let Prepared { parts, body, mut copy, single, policy, safety, until, criticality } = prepared;
    let (mut parts, mut body, mut inner) = (Some(parts), Some(body), Some(inner));
    async move {
        // The layer's deadline, cut (on the operation's first clock read) to the request's own
        // and to the expiry of the attempt the request is sent from, when either is sooner.
        let context = Context::new(ticks(shared.deadline), safety).criticality(criticality);
        // One reference for the classifier and the timeout header: the closure holds it once.
        let layer = &*shared;
        let last = policy.max_attempts();
        // The attempts borrow the request's parts and body and the inner service, which this
        // future holds once; moved into the closure, they would take their room twice, here and
        // in `execute`'s future. (The service mutably, so that it need only be `Send`.)
        let (parts, body, copy, inner) = (&mut parts, &mut body, &mut copy, &mut inner);
        let until = until.map(RequestDeadline::instant);
        let detailed = execute::run(
            &shared.dependency.inner,
            &policy,
            context,
            move || until,
            move |info| {
                // An attempt that a retry may follow sends copies of the request's parts and body
                // (the first, the body's copy made in `prepare`) through a clone of the inner
                // service; the last one the policy allows (the only one, for a request that gets a
                // single attempt) sends the request's own through the service that `call` gave
                // this request, so that nothing is copied or cloned for it.
                let number = info.number();
                let body =
                    execute::for_attempt(number, last, body, |b| copy.take().or_else(|| b.try_clone()));
                let parts = execute::for_attempt(number, last, parts, |p| Some(p.clone()));
                let service = execute::for_attempt(number, last, inner, |s| Some(s.clone()));
                send(layer, &info, service, parts, body)
            },
            |ran, _| ran,
        )
        .await;
        respond(&shared, detailed, single, (safety, criticality))
    }
}

/// A hedged request's run (see [`RetryLayer::hedge_after`]): `run`'s, with the request's parts,
/// body and service behind a mutex that both loops' attempts take in turn (each only to make its
/// copies, never across an await: it is never contended; a mutex rather than a cell so that the
/// future is `Send` with a body and a service that are only `Send`), and a copy for every attempt.
#[allow(clippy::manual_async_fn)]
fn run_hedged<S, B, RB, C>(
    shared: Arc<RetryLayer<C>>,
    inner: S,
    prepared: Prepared<B>,
    after: relent_core::HedgeDelay<HZ>,
) -> impl Future<Output = Result<Response<RB>, HttpError<S::Error>>>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone,
    B: ReplayBody,
    C: HttpClassifier<RB, S::Error>,
{
    let Prepared { parts, body, copy, single, policy, safety, until, criticality } = prepared;
    let originals = std::sync::Mutex::new((parts, body, copy, inner));
    async move {
        let context = Context::new(ticks(shared.deadline), safety).criticality(criticality);
        let (layer, originals) = (&*shared, &originals);
        let until = until.map(RequestDeadline::instant);
        let fresh = execute::Fresh { context, until: move || until };
        let attempt = move |info: crate::AttemptInfo| {
            let mut originals = originals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (parts, body, copy, inner) = &mut *originals;
            let body = copy.take().or_else(|| body.try_clone());
            send(layer, &info, Some(inner.clone()), Some(parts.clone()), body)
        };
        // The layer's own error type, as `Service::Error` (see `respond`).
        #[allow(clippy::result_large_err)]
        let finish = |raced, _: &_| respond(&shared, raced, single, (safety, criticality));
        crate::hedge::race(&shared.dependency.inner, &policy, fresh, after, attempt, finish).await
    }
}

/// One attempt: the request made of `parts` and `body` (with the attempt's timeout in the layer's
/// header, if it has one) through `service`, and its outcome classified. `None` for a part is a
/// body that could not be copied, or no service left, which the core never asks for.
fn send<'a, S, B, RB, C>(
    layer: &'a RetryLayer<C>,
    info: &crate::AttemptInfo,
    mut service: Option<S>,
    parts: Option<http::request::Parts>,
    body: Option<B>,
) -> impl Future<Output = Result<Response<RB>, Failed<RB, S::Error>>> + use<'a, S, B, RB, C>
where
    S: Service<Request<B>, Response = Response<RB>>,
    C: HttpClassifier<RB, S::Error>,
{
    let request = body.zip(parts).map(|(body, parts)| {
        let mut request = Request::from_parts(parts, body);
        if let Some(name) = &layer.timeout_header {
            let ms = u64::try_from(info.timeout().as_millis()).unwrap_or(u64::MAX);
            request.headers_mut().insert(name.clone(), http::HeaderValue::from(ms));
        }
        request
    });
    async move {
        // Checked before the service's readiness is awaited. The request is moved out of the
        // future's own field only by the call: bound to a local of its own across that await, it
        // would take its room in the future twice. (No service is left only for an attempt after
        // the last, which the core never dispatches.)
        let (Some(_), Some(service)) = (&request, &mut service) else {
            return Err(Failed::NoBody);
        };
        let result = match service.ready().await {
            Ok(ready) => match request {
                Some(request) => ready.call(request).await,
                None => return Err(Failed::NoBody),
            },
            Err(e) => Err(e),
        };
        let classifier = &layer.classifier;
        match result {
            Ok(response) => match classifier.response(&response) {
                Exchange::Success => Ok(response),
                Exchange::Failure(verdict) => Err(Failed::Response(response, verdict)),
            },
            Err(e) => {
                let verdict = classifier.error(&e);
                Err(Failed::Transport(e, verdict))
            }
        }
    }
}

/// What the layer returns for a request's run: its response with the report, or the error. The
/// error is large (the report, 112 bytes, and the dependency's name) and is the layer's
/// `Service::Error` as it is: boxing it would allocate on every failed request.
#[allow(clippy::result_large_err)]
fn respond<RB, E, C>(
    shared: &RetryLayer<C>,
    detailed: Result<Detailed<Response<RB>, Failed<RB, E>>, relent_core::StartError>,
    single: Option<SingleAttempt>,
    stated: (ReplaySafety<HZ>, Criticality),
) -> Result<Response<RB>, HttpError<E>> {
    let Detailed { value, completion, retry_in, deadline, hedge, hedge_sent } =
        detailed.map_err(HttpError::Start)?;
    let report = RetryReport::new(&completion, retry_in, single, stated, deadline, (hedge, hedge_sent));
    let with_report = |mut response: Response<RB>| {
        response.extensions_mut().insert(report);
        response
    };
    // The name is cloned only for an error: a response touches no reference count.
    let dependency = || shared.dependency.inner.name.clone();
    match (value, completion.last_failure) {
        (Some(response), _) => Ok(with_report(response)),
        (None, Some(AttemptError::Failed(Failed::Response(response, _)))) => Ok(with_report(response)),
        (None, Some(AttemptError::Failed(Failed::Transport(error, _)))) => {
            Err(HttpError::Transport { dependency: dependency(), error, report })
        }
        (None, Some(AttemptError::TimedOut { after })) => {
            Err(HttpError::TimedOut { dependency: dependency(), after: std_duration(after), report })
        }
        (None, Some(AttemptError::Failed(Failed::NoBody))) => {
            Err(HttpError::BodyNotReplayable { dependency: dependency(), report })
        }
        (None, None) => Err(HttpError::Refused { dependency: dependency(), report }),
    }
}
