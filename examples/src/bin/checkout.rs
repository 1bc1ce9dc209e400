//! The main example: a checkout service calling a flaky payment provider through Relent.
//!
//! It starts "Payrail", a real HTTP server on 127.0.0.1 that misbehaves on a timeline (a node
//! restart that refuses connections, load shedding with 503 + Retry-After, throttling with 429, a
//! slow node that hangs past the attempt timeout, a bug that answers 500) and records every order
//! it places. Then it drives 3,000 checkouts at 150 a second through hyper's pooled client wrapped
//! in relent-tokio's `RetryLayer`: each checkout reads a quote (GET, safe to retry) and places an
//! order (POST; most with an Idempotency-Key, some without, which are resent only after an attempt
//! that never arrived: a refused connection, or any connect error of hyper-util's client, which
//! relent-tokio's `hyper-util` feature reads), both within
//! the checkout's one deadline (seed 000's `ctx.remaining()`), a `RequestDeadline`'s scope. A
//! quote still out at Payrail's learnt 90th percentile of latency (50 ms at least) is hedged.
//!
//! Run it with `cargo run -p relent-examples --bin checkout`. It ends with a table and exits
//! non-zero if the provider performed any order twice.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration as Std, Instant};

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relent_examples::provider::{Fault, Phase, Provider, Script};
use relent_examples::report::{latency_summary, show, tally};
use relent_tokio::core::{
    BreakerConfig, ConfigError, DependencyConfig, Disposition, HedgeDelay, RateLimit, RetryBudget,
    RetryPolicy,
};
use relent_tokio::{Dependency, Duration, HZ, HttpError, RequestDeadline, RetryLayer, RetryReport};
use tower::{Layer, Service, ServiceExt};

const fn valid<V: Copy>(r: Result<V, ConfigError>) -> V {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{}", e.message()),
    }
}

/// Seed 000's shape: 3 attempts, backoff from 100 ms to 1 s with full jitter, 500 ms per attempt.
const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1))
        .attempt_timeout(Duration::from_millis(500))
        .build(),
);

/// Payrail as a dependency: retries at most 10 % of calls over 10 s (plus 20 per window); the
/// circuit opens when half of the last 50 outcomes failed (a time window of 10 s would barely
/// notice a 1.5 s outage), for 1 s, and one successful probe closes it;
/// 64 attempts in flight at most; 400 attempts a second. No cooldown: Payrail sheds a fraction of
/// requests with Retry-After, and a cooldown would turn each of those into a pause for every
/// caller; it suits a provider that throttles the whole account instead. A log of how long its
/// attempts take (each weighing half as much every 200 attempts), for the quotes' hedges and the
/// report.
const PAYRAIL: DependencyConfig<HZ> = DependencyConfig::new(Duration::from_secs(10))
    .budget(valid(RetryBudget::ratio(10, 20)))
    .breaker(BreakerConfig::count_window(50, 50, 20, Duration::from_secs(1)))
    .bulkhead(64)
    .rate_limit(RateLimit::new(400, Duration::from_secs(1)).burst(50))
    .latency_samples(200);

/// A quote (a GET) still unanswered at Payrail's 90th percentile of latency, and no sooner than
/// 50 ms, gets a second copy, paid for by the retry budget; the first answer wins. Orders are
/// never hedged: a key protects a repeat, not a copy in flight.
const HEDGE: HedgeDelay<HZ> =
    HedgeDelay::percentile(90).at_least(Duration::from_millis(50)).until_learnt(Duration::from_millis(50));

/// The most one request may take (the layer's deadline), and the most a checkout's two requests
/// may take together: the order gets what the quote left.
const REQUEST_DEADLINE: Std = Std::from_secs(5);
const CHECKOUT_DEADLINE: Std = Std::from_secs(5);

const CHECKOUTS: u64 = 3_000;
const PER_SECOND: u64 = 150;

fn timeline() -> Vec<Phase> {
    let phase = |s: u64, name, faults| Phase { from: Std::from_secs(s), name, latency_ms: 5, faults };
    vec![
        phase(0, "healthy", vec![]),
        phase(3, "node restart: connections refused", vec![]),
        phase(5, "load shedding: 25% 503 Retry-After 1", vec![(Fault::Unavailable(1), 250)]),
        phase(
            8,
            "throttling: 15% 429 Retry-After 1, 2% Retry-After 30",
            vec![(Fault::Throttled(1), 150), (Fault::Throttled(30), 20)],
        ),
        phase(11, "slow node: 8% hang 1.5 s", vec![(Fault::Hang(1_500), 80)]),
        phase(14, "bug: 15% 500", vec![(Fault::Broken, 150)]),
        phase(16, "healthy", vec![]),
    ]
}

/// One request's fate, as the caller sees it.
#[derive(Debug, Clone, Copy)]
struct Fate {
    outcome: &'static str,
    dispatched: u8,
    ok: bool,
    /// A hedge was sent, and whether it answered first.
    hedge: (bool, bool),
}

fn fate(
    result: &Result<(http::StatusCode, RetryReport), HttpError<hyper_util::client::legacy::Error>>,
) -> Fate {
    let (report, status) = match result {
        Ok((status, report)) => (Some(*report), Some(*status)),
        Err(e) => (e.report().copied(), None),
    };
    let Some(report) = report else {
        return Fate { outcome: "not started", dispatched: 0, ok: false, hedge: (false, false) };
    };
    let outcome = match (report.disposition, report.problem) {
        (Disposition::Succeeded, _) => "succeeded",
        (_, Some(p)) => match p.as_str() {
            "attempts_exhausted" => "failed: attempts_exhausted",
            "retry_budget_exhausted" => "failed: retry_budget_exhausted",
            "retry_delay_exceeds_deadline" => "failed: retry_delay_exceeds_deadline",
            "retry_after_exceeds_maximum_delay" => "deferred: retry_after_exceeds_maximum_delay",
            "retry_after_exceeds_deadline" => "deferred: retry_after_exceeds_deadline",
            "cooldown_active" => "deferred: cooldown_active",
            "circuit_open" => "rejected: circuit_open",
            "bulkhead_full" => "rejected: bulkhead_full",
            "rate_limited" => "rejected: rate_limited",
            "deadline_exceeded" => "failed: deadline_exceeded",
            "may_have_arrived" => "failed: may_have_arrived (keyless, not resent)",
            _ => "other",
        },
        (Disposition::Failed, None) => match status {
            Some(s) if s.is_server_error() => "failed: 500, not retried",
            _ => "failed: transport error, not retried",
        },
        (_, None) => "other",
    };
    Fate {
        outcome,
        dispatched: report.dispatched,
        ok: report.disposition == Disposition::Succeeded,
        hedge: (report.hedge_sent, report.hedge),
    }
}

/// The pooled client, counting every call it is given: the calls Payrail was sent, the hedges'
/// and the refused connections' included, which no one request's report adds up to.
#[derive(Clone)]
struct Counted {
    client: Client<HttpConnector, Full<Bytes>>,
    calls: Arc<AtomicU64>,
}

impl Service<Request<Full<Bytes>>> for Counted {
    type Response = <Client<HttpConnector, Full<Bytes>> as Service<Request<Full<Bytes>>>>::Response;
    type Error = hyper_util::client::legacy::Error;
    type Future = hyper_util::client::legacy::ResponseFuture;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.client.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Full<Bytes>>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.client.request(req)
    }
}

type Svc = relent_tokio::Retry<Counted>;

async fn send(
    mut svc: Svc,
    req: Request<Full<Bytes>>,
) -> Result<(http::StatusCode, RetryReport), HttpError<hyper_util::client::legacy::Error>> {
    let response = svc.ready().await?.call(req).await?;
    let report =
        response.extensions().get::<RetryReport>().copied().expect("the layer reports every response");
    Ok((response.status(), report))
}

struct Checkout {
    quote: Fate,
    order: Option<Fate>,
    keyed: bool,
    latency: Std,
}

async fn checkout(svc: Svc, provider: &Provider, n: u64) -> Checkout {
    let started = Instant::now();
    // The quote and the order share the checkout's one deadline (seed 000's `ctx.remaining()`):
    // every request through the layer inside the scope ends by it.
    RequestDeadline::within(CHECKOUT_DEADLINE)
        .scope(async move {
            let id = format!("checkout-{n}");
            let quote = Request::builder()
                .uri(provider.url("/quote"))
                .body(Full::new(Bytes::new()))
                .expect("a valid request");
            let quote = fate(&send(svc.clone(), quote).await);
            // One checkout in five is an old client that sends no Idempotency-Key: resent only
            // when its attempt never arrived (a refused connection, a connect timeout).
            let keyed = n % 5 != 0;
            let order = if quote.ok {
                let mut req = Request::builder()
                    .method(Method::POST)
                    .uri(provider.url("/orders"))
                    .header("x-checkout-id", &id);
                if keyed {
                    req = req.header("idempotency-key", format!("order-{id}"));
                }
                let req =
                    req.body(Full::new(Bytes::from_static(b"{\"amount\":4200}"))).expect("a valid request");
                Some(fate(&send(svc, req).await))
            } else {
                None
            };
            Checkout { quote, order, keyed, latency: started.elapsed() }
        })
        .await
}

#[tokio::main]
async fn main() {
    let provider =
        Arc::new(Provider::start(Script::Timeline(timeline())).await.expect("a free port on 127.0.0.1"));
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Std::from_millis(250)));
    let client = Client::builder(TokioExecutor::new()).build(connector);
    let payrail = Dependency::new("payrail", PAYRAIL).expect("a valid configuration");
    let calls = Arc::new(AtomicU64::new(0));
    let counted = Counted { client, calls: calls.clone() };
    let svc: Svc =
        RetryLayer::new(payrail.clone(), POLICY, REQUEST_DEADLINE).hedge_after(HEDGE).layer(counted);

    println!(
        "Payrail listens on {}; {CHECKOUTS} checkouts at {PER_SECOND}/s through relent-tokio.",
        provider.addr()
    );
    let started = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(CHECKOUTS as usize);
    let mut tick = tokio::time::interval(Std::from_micros(1_000_000 / PER_SECOND));
    let mut restarted = false;
    let mut next_progress = Std::from_secs(1);
    for n in 0..CHECKOUTS {
        tick.tick().await;
        let elapsed = started.elapsed();
        if !restarted && elapsed >= Std::from_secs(3) {
            provider.restart_for(Std::from_millis(1_500));
            restarted = true;
        }
        if elapsed >= next_progress {
            next_progress += Std::from_secs(1);
            print!(
                "\r[{:>4.1} s] {:>4}/{CHECKOUTS} checkouts done, {:>4} ok | {:<60}",
                elapsed.as_secs_f64(),
                done.load(Ordering::Relaxed),
                ok.load(Ordering::Relaxed),
                provider.phase_at(elapsed)
            );
            let _ = std::io::stdout().flush();
        }
        let (svc, provider, done, ok) = (svc.clone(), provider.clone(), done.clone(), ok.clone());
        tasks.push(tokio::spawn(async move {
            let c = checkout(svc, &provider, n).await;
            done.fetch_add(1, Ordering::Relaxed);
            if c.order.is_some_and(|o| o.ok) {
                ok.fetch_add(1, Ordering::Relaxed);
            }
            c
        }));
    }
    let mut checkouts = Vec::with_capacity(tasks.len());
    for t in tasks {
        checkouts.push(t.await.expect("a checkout task"));
    }
    println!(
        "\r{:<110}",
        format!("[{:>4.1} s] all {CHECKOUTS} checkouts done", started.elapsed().as_secs_f64())
    );
    report(&checkouts, &provider, &payrail, calls.load(Ordering::Relaxed));
}

fn report(checkouts: &[Checkout], provider: &Provider, payrail: &Dependency, calls: u64) {
    let requests: Vec<Fate> =
        checkouts.iter().flat_map(|c| std::iter::once(c.quote).chain(c.order)).collect();
    println!("\nOutcomes of {} requests (quotes and orders):", requests.len());
    for (outcome, n) in tally(requests.iter().map(|r| r.outcome)) {
        println!("  {n:>6}  {outcome}");
    }

    println!("\nAttempts per request:");
    for attempts in 0..=3u8 {
        let n = requests.iter().filter(|r| r.dispatched == attempts).count();
        let note =
            if attempts == 0 { " (refused before sending: circuit, bulkhead, rate, cooldown)" } else { "" };
        println!("  {attempts} attempt(s): {n:>6}{note}");
    }
    let hedged = checkouts.iter().filter(|c| c.quote.hedge.0).count();
    let won = checkouts.iter().filter(|c| c.quote.hedge.1).count();
    println!("\nHedged quotes: {hedged} sent a second copy, {won} answered by it first");
    for (name, fates) in [
        ("Quotes", checkouts.iter().map(|c| c.quote).collect::<Vec<_>>()),
        ("Orders", checkouts.iter().filter_map(|c| c.order).collect()),
    ] {
        let count = |outcome: &str| fates.iter().filter(|f| f.outcome == outcome).count();
        println!(
            "{name}: {:>5} of {:>5} succeeded; refused a retry by the budget {:>4}, a slot {:>4}",
            count("succeeded"),
            fates.len(),
            count("failed: retry_budget_exhausted"),
            count("rejected: bulkhead_full")
        );
    }
    let first: u64 = requests.iter().filter(|r| r.dispatched > 0).count() as u64;
    println!(
        "Amplification: {calls} calls for {first} first attempts = {:.3} calls per first attempt (policy allows 3, and a hedge)",
        calls as f64 / first.max(1) as f64
    );

    let latencies: Vec<Std> =
        checkouts.iter().filter(|c| c.order.is_some_and(|o| o.ok)).map(|c| c.latency).collect();
    let n = latencies.len();
    println!("\nCheckout latency, {} completed checkouts: {}", n, latency_summary(latencies));
    let slowest = checkouts.iter().map(|c| c.latency).max().unwrap_or_default();
    println!("Slowest checkout, completed or not: {} (its deadline: {CHECKOUT_DEADLINE:?})", show(slowest));

    let effects = provider.effects();
    let keyless = checkouts.iter().filter(|c| !c.keyed && c.order.is_some()).count();
    println!(
        "\nPayrail saw {} requests and placed {} orders ({keyless} of the order requests had no Idempotency-Key).",
        effects.requests, effects.performed
    );
    println!("Duplicate side effects (orders placed twice for one checkout): {}", effects.duplicates);
    let g = payrail.gauges();
    let p = |d: Option<Std>| d.map_or_else(|| "-".to_owned(), show);
    println!(
        "Payrail's attempts lately, from its latency log: p50 {}  p90 {}  p99 {}",
        p(g.latency_p50),
        p(g.latency_p90),
        p(g.latency_p99)
    );
    let counts = payrail.inspect(|s, _, now| s.counts(now));
    println!(
        "Payrail's window now: {} calls, {} retries, {} failures; circuit {}",
        counts.calls,
        counts.retries,
        counts.failures,
        payrail.inspect(|s, _, now| s.circuit(now)).as_str()
    );
    if effects.duplicates > 0 {
        eprintln!("error: {} orders were placed twice", effects.duplicates);
        std::process::exit(1);
    }
}
