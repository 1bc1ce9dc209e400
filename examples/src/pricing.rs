//! "Pricing": a real gRPC server on 127.0.0.1 (tonic's HTTP/2 server) that quotes prices and
//! misbehaves on a timeline as Payrail does ([`crate::provider`]), in gRPC's terms: load shedding
//! is `UNAVAILABLE` and throttling `RESOURCE_EXHAUSTED`, each with the server's pushback
//! (`grpc-retry-pushback-ms`), a bug is `INTERNAL`, a slow node answers late; a node restart closes
//! the socket and every connection, so connections are refused until it listens again.
//!
//! One method, `pricing.Pricing/Quote`: a [`QuoteRequest`] for a SKU, a [`QuoteReply`] with its
//! price. A SKU it does not sell is `NOT_FOUND`, whatever the timeline says: the answer to a wrong
//! request, not a fault of the server's.
//!
//! The messages and the client are what tonic's code generator writes for such a `.proto`, by hand
//! so that the example builds without `protoc`.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use http::uri::PathAndQuery;
use relent_tokio::grpc::{PUSHBACK, pushback_value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

use crate::provider::{Fault, Phase, phase_name, timeline_fault};

/// The method's path, as a call names it.
pub const QUOTE: &str = "/pricing.Pricing/Quote";

/// `message QuoteRequest { string sku = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct QuoteRequest {
    /// What to price: `sku-1` to `sku-99` are sold.
    #[prost(string, tag = "1")]
    pub sku: String,
}

/// `message QuoteReply { uint64 cents = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct QuoteReply {
    /// The price.
    #[prost(uint64, tag = "1")]
    pub cents: u64,
}

/// The generated client's shape: tonic's `Grpc` over a `Channel`, one method.
#[derive(Debug, Clone)]
pub struct PricingClient(tonic::client::Grpc<Channel>);

impl PricingClient {
    /// A client over `channel` (cheap to clone: clones share its connection).
    pub fn new(channel: Channel) -> Self {
        Self(tonic::client::Grpc::new(channel))
    }

    /// `rpc Quote(QuoteRequest) returns (QuoteReply)`.
    pub async fn quote(&mut self, request: Request<QuoteRequest>) -> Result<Response<QuoteReply>, Status> {
        self.0.ready().await.map_err(|e| Status::unknown(format!("Service was not ready: {e}")))?;
        self.0.unary(request, PathAndQuery::from_static(QUOTE), ProstCodec::default()).await
    }
}

/// The price of a SKU it sells.
fn price_of(sku: &str) -> Option<u64> {
    let n: u64 = sku.strip_prefix("sku-")?.parse().ok()?;
    (1..100).contains(&n).then_some(n * 125)
}

struct State {
    phases: Vec<Phase>,
    started: Instant,
    calls: AtomicU64,
}

/// A running server. Dropping it stops it.
pub struct PricingServer {
    addr: SocketAddr,
    state: Arc<State>,
    restarts: mpsc::UnboundedSender<Duration>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for PricingServer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl PricingServer {
    /// Starts the server on a free port of 127.0.0.1, its timeline counted from now.
    pub async fn start(phases: Vec<Phase>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State { phases, started: Instant::now(), calls: AtomicU64::new(0) });
        let (restarts, rx) = mpsc::unbounded_channel();
        let server = tokio::spawn(serve(listener, addr, state.clone(), rx));
        Ok(Self { addr, state, restarts, server })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A node restart: stops listening now, ends every connection (tonic's graceful shutdown: the
    /// calls in flight are answered, no new one is taken), and listens again on the same port after
    /// `down`.
    pub fn restart_for(&self, down: Duration) {
        let _ = self.restarts.send(down);
    }

    /// Calls that reached it.
    pub fn calls(&self) -> u64 {
        self.state.calls.load(Ordering::Relaxed)
    }

    /// The timeline phase at `elapsed`, for progress lines.
    pub fn phase_at(&self, elapsed: Duration) -> &'static str {
        phase_name(&self.state.phases, elapsed)
    }
}

async fn serve(
    mut listener: TcpListener,
    addr: SocketAddr,
    state: Arc<State>,
    mut restarts: mpsc::UnboundedReceiver<Duration>,
) {
    loop {
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tonic::transport::Server::builder().serve_with_incoming_shutdown(
            Pricing(state.clone()),
            TcpIncoming::from(listener),
            async move {
                let _ = stopped.await;
            },
        );
        let mut server = std::pin::pin!(server);
        let down = tokio::select! {
            _ = &mut server => return,
            Some(down) = restarts.recv() => down,
        };
        let _ = stop.send(());
        // Down for `down` from the signal, however long the calls in flight take to be answered.
        let (_, ()) = tokio::join!(server, tokio::time::sleep(down));
        listener = loop {
            match TcpListener::bind(addr).await {
                Ok(l) => break l,
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        };
    }
}

/// The server as an HTTP service: tonic's server `Grpc` (decoding, the handler, encoding the
/// status) for `Quote`, `UNIMPLEMENTED` for any other path.
#[derive(Clone)]
struct Pricing(Arc<State>);

type Body = tonic::body::Body;

impl tower::Service<http::Request<Body>> for Pricing {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let state = self.0.clone();
        Box::pin(async move {
            if request.uri().path() != QUOTE {
                return Ok(Status::unimplemented(request.uri().path().to_string()).into_http());
            }
            let quote =
                tower::service_fn(move |request: Request<QuoteRequest>| quote(state.clone(), request));
            Ok(tonic::server::Grpc::new(ProstCodec::default()).unary(quote, request).await)
        })
    }
}

/// A status with the server's pushback: retry no sooner than `secs` seconds.
fn pushed_back(mut status: Status, secs: u64) -> Status {
    status.metadata_mut().insert(PUSHBACK, pushback_value(Duration::from_secs(secs)));
    status
}

async fn quote(state: Arc<State>, request: Request<QuoteRequest>) -> Result<Response<QuoteReply>, Status> {
    let n = state.calls.fetch_add(1, Ordering::Relaxed);
    let sku = request.into_inner().sku;
    let Some(cents) = price_of(&sku) else {
        return Err(Status::not_found(format!("no price for {sku}")));
    };
    let delay = match timeline_fault(&state.phases, state.started.elapsed(), n) {
        Fault::Unavailable(secs) => return Err(pushed_back(Status::unavailable("shedding load"), secs)),
        Fault::Throttled(secs) => return Err(pushed_back(Status::resource_exhausted("quota"), secs)),
        Fault::Broken => return Err(Status::internal("bug")),
        Fault::Invalid => return Err(Status::invalid_argument(format!("{sku} cannot be quoted now"))),
        Fault::Ok(ms) | Fault::Hang(ms) => ms,
    };
    tokio::time::sleep(Duration::from_millis(delay)).await;
    Ok(Response::new(QuoteReply { cents }))
}
