//! A tower `Layer` that runs every request of any service through one dependency's pipeline: the
//! HTTP layer ([`RetryLayer`](crate::RetryLayer)) for requests that are not HTTP.
//!
//! tower's own `Retry` takes any request type, and a service of RPC frames, of queries to a store
//! or of a client's own request type needs the same pipeline as an HTTP client: the retry budget,
//! the deadline, the protections, the completion. What HTTP tells the HTTP layer (which methods
//! may be repeated, which statuses failed, a request's deadline in its extensions) a [`Plan`] tells
//! this one, as a `Policy` tells tower's `Retry`:
//!
//! - the replay-safety statement for each request (seed 003: made on every call). A request
//!   stated `Unsafe` gets exactly one attempt, whatever the policy allows; one stated
//!   `UntilArrived` is retried only after errors judged `NeverArrived`, as a keyless POST is
//!   through the HTTP layer;
//! - the verdict on each error: retryable, retryable after a stated wait, or not;
//! - optionally, the request's own deadline, sooner than the layer's.
//!
//! A response is a success. A service that answers some failures with a response (a status field)
//! turns those into errors below this layer (tower's `ServiceExt::and_then`), so that the plan
//! classifies them. Each attempt that a retry may follow sends a clone of the request (`Req:
//! Clone`, as tower's `Retry` clones it for each call) through a clone of the inner service; the
//! last attempt the policy allows sends the request itself, through the clone `call` made for it.
//! The inner service's readiness is awaited inside each attempt, so `poll_ready` is always ready
//! and an open circuit fails in `call` without waiting for it (as in the HTTP layer).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use relent_core::{Classify, Context, ReplaySafety, RetryPolicy, Verdict};
use tower::{Layer, Service, ServiceExt};

use crate::clock::{HZ, ticks};
use crate::dependency::Dependency;
use crate::error::{AttemptError, Detailed, Error};
use crate::execute;

/// What [`PipelineLayer`] needs to know of a service's requests and errors, as tower's `Policy`
/// tells its `Retry`.
///
/// ```
/// use relent_tokio::core::{ReplaySafety, Verdict};
/// use relent_tokio::{Duration, HZ, Plan};
///
/// /// A key-value store's request: a read may be repeated, a write may not.
/// #[derive(Clone)]
/// enum Query { Get(String), Put(String, Vec<u8>) }
///
/// #[derive(Debug)]
/// enum StoreError { Busy { retry_in_ms: u64 }, Unreachable, NotFound }
///
/// #[derive(Clone)]
/// struct Store;
///
/// impl Plan<Query, StoreError> for Store {
///     fn safety(&self, query: &Query) -> ReplaySafety<HZ> {
///         match query {
///             Query::Get(_) => ReplaySafety::replayable_read(Duration::from_secs(60)),
///             Query::Put(..) => ReplaySafety::Unsafe, // one attempt
///         }
///     }
///     fn classify(&self, error: &StoreError) -> Verdict<HZ> {
///         match error {
///             StoreError::Busy { retry_in_ms } => Verdict::RetryableAfter(Duration::from_millis(*retry_in_ms)),
///             StoreError::Unreachable => Verdict::Retryable,
///             StoreError::NotFound => Verdict::NotRetryable,
///         }
///     }
/// }
/// # let _ = Store;
/// ```
pub trait Plan<Req, E> {
    /// Your statement that `request` may be sent again, and for how long
    /// ([`ReplaySafety::replayable_read`], [`ReplaySafety::provider_idempotent_mutation`]);
    /// [`ReplaySafety::Unsafe`] gives it exactly one attempt. The layer cannot know: it never
    /// infers that repeating a request is safe.
    fn safety(&self, request: &Req) -> ReplaySafety<HZ>;

    /// Whether an attempt's error is worth another attempt, and when.
    fn classify(&self, error: &E) -> Verdict<HZ>;

    /// The instant `request` must be over by, on tokio's clock, if it carries one (the deadline
    /// of the call it serves): its attempts and waits then end by the sooner of it and the
    /// layer's deadline, as a [`RequestDeadline`](crate::RequestDeadline) does for an HTTP request.
    /// None by default.
    fn deadline(&self, request: &Req) -> Option<tokio::time::Instant> {
        let _ = request;
        None
    }

    /// How much `request` matters when the dependency's limits run short
    /// ([`Criticality`](relent_core::Criticality)): a sheddable one may not use the dependency's
    /// critical reserve of its limits. Critical by default.
    fn criticality(&self, request: &Req) -> relent_core::Criticality {
        let _ = request;
        relent_core::Criticality::Critical
    }
}

/// Applies a dependency's pipeline to any tower service whose requests are `Clone`, under a
/// [`Plan`].
///
/// ```
/// # use std::sync::{Arc, atomic::{AtomicU32, Ordering}};
/// use std::time::Duration as Std;
/// use relent_tokio::core::{DependencyConfig, ReplaySafety, RetryBudget, RetryPolicy, Verdict};
/// use relent_tokio::{Dependency, Duration, HZ, PipelineLayer, Plan};
/// use tower::{Layer, Service, ServiceExt};
///
/// #[derive(Clone, Debug)]
/// struct Get(&'static str);
/// #[derive(Debug)]
/// struct Busy;
/// # impl std::fmt::Display for Busy {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("busy") }
/// # }
/// # impl std::error::Error for Busy {}
///
/// #[derive(Clone)]
/// struct Reads;
/// impl Plan<Get, Busy> for Reads {
///     fn safety(&self, _: &Get) -> ReplaySafety<HZ> { ReplaySafety::replayable_read(Duration::from_secs(60)) }
///     fn classify(&self, _: &Busy) -> Verdict<HZ> { Verdict::Retryable }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = Dependency::new("store", DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5)?))?;
/// let policy = RetryPolicy::exponential(3, Duration::from_millis(50), Duration::from_secs(1))
///     .attempt_timeout(Duration::from_millis(200))
///     .build()?;
/// // A store that is busy on the first call, then answers.
/// let calls = Arc::new(AtomicU32::new(0));
/// # let counter = calls.clone();
/// let inner = tower::service_fn(move |Get(key): Get| {
/// #   let calls = counter.clone();
///     async move {
///         if calls.fetch_add(1, Ordering::Relaxed) == 0 { Err(Busy) } else { Ok(format!("value of {key}")) }
///     }
/// });
/// let mut client = PipelineLayer::new(store, policy, Std::from_secs(2), Reads).layer(inner);
/// let value = client.ready().await?.call(Get("k1")).await?;
/// assert_eq!((value.as_str(), calls.load(Ordering::Relaxed)), ("value of k1", 2));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PipelineLayer<P> {
    dependency: Dependency,
    policy: RetryPolicy<HZ>,
    deadline: std::time::Duration,
    plan: P,
    hedge_after: Option<relent_core::HedgeDelay<HZ>>,
}

impl<P> PipelineLayer<P> {
    /// Every request through `dependency` under `policy`, each within `deadline` (all attempts and
    /// waits together; sooner for a request whose [`Plan::deadline`] is, or that is sent from
    /// inside an attempt of relent-tokio's), stated and classified by `plan`.
    pub fn new(
        dependency: Dependency,
        policy: RetryPolicy<HZ>,
        deadline: std::time::Duration,
        plan: P,
    ) -> Self {
        Self { dependency, policy, deadline, plan, hedge_after: None }
    }

    /// Hedges every request the plan states a read ([`ReplaySafety::replayable_read`]; see
    /// [`Dependency::execute_hedged`](crate::Dependency::execute_hedged)): one that has not
    /// answered `after` its start gets a second attempt, a clone of it through a clone of the
    /// service, and the first success is the response; the other is cancelled. `after` is a
    /// `std::time::Duration` or a [`HedgeDelay`](relent_core::HedgeDelay) (a percentile of the
    /// dependency's latency, as for `execute_hedged`). A hedge is paid for
    /// by the retry budget and admitted by the protections as a retry is. An `Unsafe` request is
    /// never hedged, nor a keyed mutation, which is still retried
    /// ([`ReplaySafety::may_hedge`]). Every attempt of a hedged request sends a clone, the last included. The policy
    /// must allow a repeat: with one attempt, each request that would be hedged is refused with
    /// `hedge_without_retries` before anything is sent.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub fn hedge_after(mut self, after: impl crate::IntoHedgeDelay) -> Self {
        self.hedge_after = Some(after.into_hedge_delay());
        self
    }
}

impl<S, P: Clone> Layer<S> for PipelineLayer<P> {
    type Service = Pipeline<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        Pipeline { inner, shared: Arc::new(self.clone()) }
    }
}

/// The service [`PipelineLayer`] wraps around another.
#[derive(Debug)]
pub struct Pipeline<S, P> {
    inner: S,
    shared: Arc<PipelineLayer<P>>,
}

impl<S: Clone, P> Clone for Pipeline<S, P> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), shared: self.shared.clone() }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, Req, P> Service<Req> for Pipeline<S, P>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    Req: Clone + Send + 'static,
    P: Plan<Req, S::Error> + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = BoxFuture<Result<S::Response, Error<S::Error>>>;

    fn poll_ready(&mut self, _cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let safety = self.shared.plan.safety(&request);
        match self.shared.hedge_after {
            Some(after) if safety.may_hedge() => {
                Box::pin(run_hedged(self.shared.clone(), self.inner.clone(), request, safety, after))
            }
            _ => Box::pin(run(self.shared.clone(), self.inner.clone(), request, safety)),
        }
    }
}

/// An inner service's error with the plan's verdict on it.
struct Classified<E>(E, Verdict<HZ>);

impl<E> Classify<HZ> for Classified<E> {
    fn classify(&self) -> Verdict<HZ> {
        self.1
    }
}

/// The request's whole run through the pipeline, under the plan's statement `safety` for it. A
/// function returning an `async` block, not an `async fn`, which would hold its arguments twice
/// (as the HTTP layer's `run` explains).
#[allow(clippy::manual_async_fn)]
fn run<S, Req, P>(
    shared: Arc<PipelineLayer<P>>,
    inner: S,
    request: Req,
    safety: ReplaySafety<HZ>,
) -> impl Future<Output = Result<S::Response, Error<S::Error>>>
where
    S: Service<Req> + Clone,
    Req: Clone,
    P: Plan<Req, S::Error>,
{
    let until = shared.plan.deadline(&request);
    let criticality = shared.plan.criticality(&request);
    // A request that may not be repeated gets one attempt, whatever the policy allows.
    let policy =
        if matches!(safety, ReplaySafety::Unsafe) { shared.policy.without_retries() } else { shared.policy };
    let (mut request, mut inner) = (Some(request), Some(inner));
    async move {
        let context = Context::new(ticks(shared.deadline), safety).criticality(criticality);
        let layer = &*shared;
        let last = policy.max_attempts();
        // Borrowed by the attempts, so that the future holds them once.
        let (request, inner) = (&mut request, &mut inner);
        let detailed = execute::run(
            &layer.dependency.inner,
            &policy,
            context,
            move || until,
            move |info| {
                // An attempt that a retry may follow sends a clone through a clone of the service;
                // the last one the policy allows sends the request itself through `call`'s.
                let number = info.number();
                let request = execute::for_attempt(number, last, request, |r| Some(r.clone()));
                let service = execute::for_attempt(number, last, inner, |s| Some(s.clone()));
                send(layer, service, request)
            },
            |ran, _| ran,
        )
        .await;
        respond(layer, detailed)
    }
}

/// A hedged request's run (see [`PipelineLayer::hedge_after`]): `run`'s, with the request and the
/// service behind a mutex that both loops' attempts take in turn, only to clone them (never
/// contended, and never held across an await; a mutex so that the future is `Send` with a request
/// and a service that are only `Send`), and a clone for every attempt.
#[allow(clippy::manual_async_fn)]
fn run_hedged<S, Req, P>(
    shared: Arc<PipelineLayer<P>>,
    inner: S,
    request: Req,
    safety: ReplaySafety<HZ>,
    after: relent_core::HedgeDelay<HZ>,
) -> impl Future<Output = Result<S::Response, Error<S::Error>>>
where
    S: Service<Req> + Clone,
    Req: Clone,
    P: Plan<Req, S::Error>,
{
    let until = shared.plan.deadline(&request);
    let criticality = shared.plan.criticality(&request);
    let originals = std::sync::Mutex::new((request, inner));
    async move {
        let context = Context::new(ticks(shared.deadline), safety).criticality(criticality);
        let (layer, originals) = (&*shared, &originals);
        let fresh = execute::Fresh { context, until: move || until };
        let attempt = move |_: crate::AttemptInfo| {
            let originals = originals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (request, inner) = &*originals;
            send(layer, Some(inner.clone()), Some(request.clone()))
        };
        let policy = layer.policy;
        let finish = |raced, _: &_| respond(layer, raced);
        crate::hedge::race(&layer.dependency.inner, &policy, fresh, after, attempt, finish).await
    }
}

/// One attempt: `request` through `service` once it is ready, its error classified by the plan.
/// `None` is an attempt after the last, which the core never dispatches: nothing to send, so it
/// would only wait for its timeout. An `async` block, not an `async fn`, which would hold the
/// request twice.
#[allow(clippy::manual_async_fn)]
fn send<S, Req, P>(
    layer: &PipelineLayer<P>,
    mut service: Option<S>,
    request: Option<Req>,
) -> impl Future<Output = Result<S::Response, Classified<S::Error>>> + use<'_, S, Req, P>
where
    S: Service<Req>,
    P: Plan<Req, S::Error>,
{
    async move {
        let (Some(request), Some(service)) = (request, &mut service) else {
            return std::future::pending().await;
        };
        let result = match service.ready().await {
            Ok(ready) => ready.call(request).await,
            Err(e) => Err(e),
        };
        result.map_err(|e| {
            let verdict = layer.plan.classify(&e);
            Classified(e, verdict)
        })
    }
}

/// The layer's answer for a request's run: the value, or the error with the service's own last
/// error in its completion.
fn respond<T, E, P>(
    layer: &PipelineLayer<P>,
    detailed: Result<Detailed<T, Classified<E>>, relent_core::StartError>,
) -> Result<T, Error<E>> {
    let Detailed { value, completion, retry_in, .. } = detailed.map_err(Error::Start)?;
    match value {
        Some(value) => Ok(value),
        None => Err(Error::Ended {
            dependency: layer.dependency.inner.name.clone(),
            completion: completion.map_last_failure(|failure| match failure {
                AttemptError::Failed(Classified(e, _)) => AttemptError::Failed(e),
                AttemptError::TimedOut { after } => AttemptError::TimedOut { after },
            }),
            retry_in,
        }),
    }
}
