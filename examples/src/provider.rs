//! "Payrail": a real HTTP server on 127.0.0.1 that misbehaves on a script and records every side
//! effect it performs, so a client can be judged by what actually happened on the far side.
//!
//! Endpoints: `GET /quote` (a read) and `POST /orders` (a side effect: an order is placed for the
//! checkout named by `x-checkout-id`). A POST with an `Idempotency-Key` is deduplicated the way
//! real providers do: the first request with a key performs the effect and stores the answer,
//! repeats get the stored answer without a second effect. A POST without a key performs its effect
//! every time it arrives, so a client that resends one double-charges, and [`Provider::effects`]
//! counts it.
//!
//! Faults come from a [`Script`]:
//! - [`Script::PerRequest`]: the request's `x-fault` header lists what to do with its 1st, 2nd, ...
//!   attempt (attempts are counted per `x-request-id`): `ok`, `503:S` / `429:S` (with
//!   `Retry-After: S`), `500`, `422`, `hang:MS` (perform the effect, then answer only after MS).
//! - [`Script::Timeline`]: faults by time since the server started, for the main example.
//!
//! A node restart is real: [`Provider::restart_for`] closes the listening socket and every open
//! connection, so connections are refused until the server listens again on the same port.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// What the provider does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer normally after this many ms.
    Ok(u64),
    /// 503 with `Retry-After: s`.
    Unavailable(u64),
    /// 429 with `Retry-After: s`.
    Throttled(u64),
    /// 500.
    Broken,
    /// 422: the request is the caller's mistake.
    Invalid,
    /// Perform the effect, then answer only after this many ms (past the client's timeout).
    Hang(u64),
}

impl Fault {
    fn parse(s: &str) -> Option<Self> {
        let (name, arg) = s.trim().split_once(':').unwrap_or((s.trim(), "0"));
        let arg: u64 = arg.parse().ok()?;
        Some(match name {
            "ok" => Self::Ok(arg),
            "503" => Self::Unavailable(arg),
            "429" => Self::Throttled(arg),
            "500" => Self::Broken,
            "422" => Self::Invalid,
            "hang" => Self::Hang(arg),
            _ => return None,
        })
    }
}

/// One stretch of the timeline: from `from` (since the server started), each request draws the
/// first fault whose cumulative per-mille share covers a random draw; the rest are answered
/// normally after `latency_ms`.
#[derive(Debug, Clone)]
pub struct Phase {
    /// When the phase starts.
    pub from: Duration,
    /// Its name, for progress lines.
    pub name: &'static str,
    /// Normal latency.
    pub latency_ms: u64,
    /// Faults with their share of requests, in per mille.
    pub faults: Vec<(Fault, u32)>,
}

/// Where faults come from.
#[derive(Debug, Clone)]
pub enum Script {
    /// From each request's `x-fault` header, per attempt.
    PerRequest,
    /// From the phase the server is in, drawn with a seeded generator.
    Timeline(Vec<Phase>),
}

/// What the provider did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Effects {
    /// Orders placed.
    pub performed: u64,
    /// Orders placed more than once for the same checkout: each extra one is a double charge.
    pub duplicates: u64,
    /// Requests that reached the provider, orders and quotes.
    pub requests: u64,
}

#[derive(Default)]
struct Books {
    /// Orders placed per checkout id.
    orders: HashMap<String, u64>,
    /// Answers stored per idempotency key.
    keys: HashMap<String, (StatusCode, String)>,
    /// When each attempt of a request id arrived.
    arrivals: HashMap<String, Vec<Instant>>,
}

struct State {
    script: Script,
    started: Instant,
    books: Mutex<Books>,
    requests: AtomicU64,
    connections: AtomicU64,
    draws: AtomicU64,
}

/// A running provider. Dropping it stops the server.
pub struct Provider {
    addr: SocketAddr,
    state: Arc<State>,
    restarts: mpsc::UnboundedSender<Duration>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Provider {
    /// Starts the provider on a free port of 127.0.0.1.
    pub async fn start(script: Script) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            script,
            started: Instant::now(),
            books: Mutex::default(),
            requests: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            draws: AtomicU64::new(0),
        });
        let (restarts, rx) = mpsc::unbounded_channel();
        let server = tokio::spawn(serve(listener, addr, state.clone(), rx));
        Ok(Self { addr, state, restarts, server })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Simulates a node restart: closes the listening socket and every open connection now, and
    /// listens again on the same port after `down`.
    pub fn restart_for(&self, down: Duration) {
        let _ = self.restarts.send(down);
    }

    /// What it did so far.
    pub fn effects(&self) -> Effects {
        let books = self.state.books.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Effects {
            performed: books.orders.values().sum(),
            duplicates: books.orders.values().map(|n| n.saturating_sub(1)).sum(),
            requests: self.state.requests.load(Ordering::Relaxed),
        }
    }

    /// When each attempt of the request with this `x-request-id` arrived.
    pub fn arrivals(&self, request_id: &str) -> Vec<Instant> {
        let books = self.state.books.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        books.arrivals.get(request_id).cloned().unwrap_or_default()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::Relaxed)
    }

    /// Orders placed for one checkout.
    pub fn orders_for(&self, checkout: &str) -> u64 {
        let books = self.state.books.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        books.orders.get(checkout).copied().unwrap_or(0)
    }

    /// The timeline phase at `elapsed`, for progress lines.
    pub fn phase_at(&self, elapsed: Duration) -> &'static str {
        match &self.state.script {
            Script::Timeline(phases) => phase_name(phases, elapsed),
            Script::PerRequest => "",
        }
    }
}

async fn serve(
    mut listener: TcpListener,
    addr: SocketAddr,
    state: Arc<State>,
    mut restarts: mpsc::UnboundedReceiver<Duration>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                state.connections.fetch_add(1, Ordering::Relaxed);
                let state = state.clone();
                connections.spawn(async move {
                    let service = service_fn(move |req| handle(state.clone(), req));
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
            Some(down) = restarts.recv() => {
                drop(listener);
                connections.abort_all();
                tokio::time::sleep(down).await;
                listener = loop {
                    match TcpListener::bind(addr).await {
                        Ok(l) => break l,
                        Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                    }
                };
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.into())));
    *r.status_mut() = status;
    r
}

fn header<'a>(req: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// splitmix64: a seeded draw in 0..1000 per request, so a timeline run is repeatable in shape.
fn per_mille(n: u64) -> u32 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) % 1000) as u32
}

fn fault_for(state: &State, req: &Request<Incoming>) -> Fault {
    match &state.script {
        Script::PerRequest => {
            let n = match header(req, "x-request-id") {
                Some(id) => {
                    let mut books = state.books.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    let arrivals = books.arrivals.entry(id.to_string()).or_default();
                    arrivals.push(Instant::now());
                    arrivals.len() - 1
                }
                None => 0,
            };
            let faults: Vec<&str> = header(req, "x-fault").unwrap_or("ok").split(',').collect();
            faults
                .get(n.min(faults.len().saturating_sub(1)))
                .and_then(|f| Fault::parse(f))
                .unwrap_or(Fault::Ok(0))
        }
        Script::Timeline(phases) => {
            timeline_fault(phases, state.started.elapsed(), state.draws.fetch_add(1, Ordering::Relaxed))
        }
    }
}

/// What the `n`th request of a timeline run gets at `elapsed` since the server started: the
/// phase's fault its draw falls in, else the phase's normal latency.
pub(crate) fn timeline_fault(phases: &[Phase], elapsed: Duration, n: u64) -> Fault {
    let Some(phase) = phases.iter().rev().find(|p| p.from <= elapsed) else {
        return Fault::Ok(0);
    };
    let draw = per_mille(n);
    let mut covered = 0;
    for (fault, share) in &phase.faults {
        covered += share;
        if draw < covered {
            return *fault;
        }
    }
    Fault::Ok(phase.latency_ms)
}

/// The phase's name at `elapsed`, for progress lines.
pub(crate) fn phase_name(phases: &[Phase], elapsed: Duration) -> &'static str {
    phases.iter().rev().find(|p| p.from <= elapsed).map_or("", |p| p.name)
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    state.requests.fetch_add(1, Ordering::Relaxed);
    let fault = fault_for(&state, &req);
    let is_order = req.method() == http::Method::POST && req.uri().path() == "/orders";
    // Faults that refuse the request happen before any effect.
    match fault {
        Fault::Unavailable(s) => {
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, "shedding load");
            r.headers_mut().insert(http::header::RETRY_AFTER, s.into());
            return Ok(r);
        }
        Fault::Throttled(s) => {
            let mut r = text(StatusCode::TOO_MANY_REQUESTS, "slow down");
            r.headers_mut().insert(http::header::RETRY_AFTER, s.into());
            return Ok(r);
        }
        Fault::Broken => return Ok(text(StatusCode::INTERNAL_SERVER_ERROR, "bug")),
        Fault::Invalid => return Ok(text(StatusCode::UNPROCESSABLE_ENTITY, "invalid card")),
        Fault::Ok(_) | Fault::Hang(_) => {}
    }
    let answer = if is_order {
        let checkout = header(&req, "x-checkout-id").unwrap_or("unknown").to_string();
        let key = header(&req, "idempotency-key").map(str::to_string);
        let mut books = state.books.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match key.as_ref().and_then(|k| books.keys.get(k)) {
            // A repeat of a keyed request: the stored answer, no second effect.
            Some((status, body)) => text(*status, body.clone()),
            None => {
                *books.orders.entry(checkout.clone()).or_default() += 1;
                let body = format!("order placed for {checkout}");
                if let Some(k) = key {
                    books.keys.insert(k, (StatusCode::CREATED, body.clone()));
                }
                text(StatusCode::CREATED, body)
            }
        }
    } else {
        text(StatusCode::OK, "quote: 42.00 EUR")
    };
    let delay = match fault {
        Fault::Ok(ms) | Fault::Hang(ms) => ms,
        _ => 0,
    };
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    Ok(answer)
}
