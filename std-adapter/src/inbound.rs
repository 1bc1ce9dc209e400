//! The server's side of a deadline sent in a header: a tower layer that serves each request in the
//! scope of the deadline its caller sent.
//!
//! Why (seed 000, "Retries and the Deadline"): "an attempt that cannot finish inside the client's
//! patience is an attempt whose answer nobody will read". A client's [`RetryLayer`] with
//! [`RetryLayer::timeout_header`] says how long it waits for each attempt; a server behind this
//! layer reads it and runs its handler in that deadline's [scope](RequestDeadline::scope), so the
//! handler's own calls through relent-tokio end when its caller stops waiting, and their callers'
//! callers too, a hop at a time. The server's own limit still holds: a caller that says it waits a
//! day does not make the server work a day. A value that is not whole milliseconds is the caller's
//! mistake, answered with a 400 that says so, before the handler runs, and logged at INFO
//! (`relent: timeout header refused`, with the header and the value).
//!
//! [`RetryLayer`]: crate::RetryLayer
//! [`RetryLayer::timeout_header`]: crate::RetryLayer::timeout_header

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use http::{HeaderName, Request, Response, StatusCode};
use tower::{Layer, Service};

use crate::layer::{RequestDeadline, Scoped, timeout_in};

/// Serves each request in the scope of the deadline its caller sent in a header (see
/// [`RequestDeadline::from_header`]), or of the server's own limit when that is sooner or the
/// header is absent. The deadline is also put in the request's extensions, for a handler that
/// passes it on by hand (to a task it spawns, which the scope does not reach).
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration as Std;
/// use http::{HeaderName, Request, Response};
/// use relent_tokio::DeadlineLayer;
/// use tower::{Layer, Service, ServiceExt};
///
/// const TIMEOUT: HeaderName = HeaderName::from_static("x-request-timeout-ms");
/// // A handler that says how long it has (its calls through relent-tokio end by then).
/// let handler = tower::service_fn(|_: Request<String>| async {
///     let left = relent_tokio::attempt_expiry().map(|end| end - tokio::time::Instant::now());
///     Ok::<_, std::convert::Infallible>(Response::new(format!("{left:?}")))
/// });
/// let mut server = DeadlineLayer::new(TIMEOUT, Std::from_secs(10)).layer(handler);
///
/// let inbound = Request::get("/quote").header(&TIMEOUT, "250").body(String::new())?;
/// assert_eq!(server.ready().await?.call(inbound).await?.body(), "Some(250ms)");
/// // A value that is not whole milliseconds: a 400 that says why, and the handler never runs.
/// let bad = Request::get("/quote").header(&TIMEOUT, "soon").body(String::new())?;
/// let refused = server.ready().await?.call(bad).await?;
/// assert_eq!(refused.status(), 400);
/// assert_eq!(
///     refused.body(),
///     "`soon` in header x-request-timeout-ms is not a timeout: the header holds whole milliseconds, such as 2500"
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DeadlineLayer {
    header: HeaderName,
    limit: std::time::Duration,
}

impl DeadlineLayer {
    /// Reads each request's deadline from header `header` (whole milliseconds), and serves it
    /// within `limit` at most: the server's own limit, which also applies to a request without
    /// the header.
    pub fn new(header: HeaderName, limit: std::time::Duration) -> Self {
        Self { header, limit }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Deadline { inner, layer: self.clone() }
    }
}

/// The service [`DeadlineLayer`] wraps around a server's handler.
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    layer: DeadlineLayer,
}

impl<S, B, RB> Service<Request<B>> for Deadline<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    RB: From<String>,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = Serving<S::Future, S::Error, RB>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        match timeout_in(request.headers(), &self.layer.header) {
            Ok(sent) => {
                // The sooner of what the caller waits and the server's limit, on one clock read.
                let limit = self.layer.limit;
                let deadline = RequestDeadline::within(sent.map_or(limit, |sent| sent.min(limit)));
                request.extensions_mut().insert(deadline);
                Serving::handler(deadline.scope(self.inner.call(request)))
            }
            Err(invalid) => {
                crate::trace::timeout_refused(invalid.header.as_str(), &invalid.value);
                let mut refused = Response::new(RB::from(invalid.to_string()));
                *refused.status_mut() = StatusCode::BAD_REQUEST;
                Serving::refused(refused)
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The future [`Deadline`] (and `grpc::Deadline`) returns: the handler's, in its deadline's
    /// scope, or the refusal (a 400, an `INVALID_ARGUMENT`) of a header that is not a timeout.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Serving<F, E, RB> {
        #[pin]
        state: State<F, E, RB>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProjection]
    #[derive(Debug)]
    enum State<F, E, RB> {
        // The handler's future, in the scope of the request's deadline.
        Handler {
            #[pin]
            future: Scoped<F>,
        },
        // The answer to a request whose header was not a timeout, taken when it is polled, and
        // the error type the handler's future would have given.
        Refused {
            response: Option<Response<RB>>,
            error: std::marker::PhantomData<fn() -> E>,
        },
    }
}

impl<F, E, RB> Serving<F, E, RB> {
    pub(crate) fn handler(future: Scoped<F>) -> Self {
        Self { state: State::Handler { future } }
    }

    pub(crate) fn refused(response: Response<RB>) -> Self {
        Self { state: State::Refused { response: Some(response), error: std::marker::PhantomData } }
    }
}

impl<F, E, RB> Future for Serving<F, E, RB>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = Result<Response<RB>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProjection::Handler { future } => future.poll(cx),
            // Taken once: a future is not polled after it is ready.
            StateProjection::Refused { response, .. } => match response.take() {
                Some(response) => Poll::Ready(Ok(response)),
                None => Poll::Pending,
            },
        }
    }
}
