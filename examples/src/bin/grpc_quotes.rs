//! The gRPC example: a service asking a flaky pricing service for quotes over gRPC, through Relent,
//! with the retry policy a gRPC client would read from its service config.
//!
//! It starts "Pricing", a real gRPC server on 127.0.0.1 (tonic's HTTP/2 server) that misbehaves on
//! a timeline: a node restart that refuses connections, load shedding with `UNAVAILABLE` and a
//! server pushback, a slow node past the attempt's timeout, a quota with a pushback longer than the
//! policy waits, a bug that answers `INTERNAL`. It answers `NOT_FOUND` for the SKUs it does not
//! sell. Then it sends 1,500 quotes at 150 a second over one tonic `Channel`, each through
//! `Dependency::execute`: the policy, the classifier and the deadline are the service config's
//! (`config::GrpcServiceConfig`), the retry budget its `retryThrottling`; the breaker and the
//! bulkhead, which a service config has no words for, are set in code.
//!
//! Run it with `cargo run -p relent-examples --bin grpc-quotes`. It ends with a table, and exits
//! non-zero if a quote was ever sent again after the service answered it `NOT_FOUND` (the answer
//! to a wrong request, which no retry changes).

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration as Std, Instant};

use relent_examples::pricing::{PricingClient, PricingServer, QuoteRequest};
use relent_examples::provider::{Fault, Phase};
use relent_examples::report::{latency_summary, show, tally};
use relent_tokio::config::{GrpcMethodConfig, GrpcServiceConfig};
use relent_tokio::core::{
    AttemptError, BreakerConfig, Context, DependencyConfig, Disposition, Judged, ReplaySafety,
};
use relent_tokio::{Dependency, Duration, HZ};
use tonic::Code;

/// The pricing service's config, as its owners publish it for gRPC clients: 3 attempts, backoff
/// from 100 ms to 1 s, 300 ms an attempt, 2 s a call; UNAVAILABLE and RESOURCE_EXHAUSTED retried;
/// retries throttled at a tenth of the calls (and 19 in a row, from its 40 tokens).
const SERVICE_CONFIG: &str = r#"{
  "loadBalancingConfig": [{ "pick_first": {} }],
  "methodConfig": [{
    "name": [{ "service": "pricing.Pricing" }],
    "timeout": "2s",
    "retryPolicy": {
      "maxAttempts": 3,
      "initialBackoff": "0.1s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"],
      "perAttemptRecvTimeout": "0.3s"
    }
  }],
  "retryThrottling": { "maxTokens": 40, "tokenRatio": 0.1 }
}"#;

const QUOTES: u64 = 1_500;
const PER_SECOND: u64 = 150;
/// When the node restarts, and for how long it refuses connections.
const RESTART_AT: Std = Std::from_millis(1_500);
const RESTART_FOR: Std = Std::from_secs(1);

fn timeline() -> Vec<Phase> {
    let phase = |ms: u64, name, faults| Phase { from: Std::from_millis(ms), name, latency_ms: 4, faults };
    vec![
        phase(0, "healthy", vec![]),
        phase(1_500, "node restart: connections refused", vec![]),
        phase(2_500, "healthy again", vec![]),
        phase(3_500, "shedding load: 20% UNAVAILABLE, pushback 1 s", vec![(Fault::Unavailable(1), 200)]),
        phase(5_000, "slow node: 15% answer after 1.5 s", vec![(Fault::Hang(1_500), 150)]),
        phase(6_500, "quota: 5% RESOURCE_EXHAUSTED, pushback 3 s", vec![(Fault::Throttled(3), 50)]),
        phase(7_500, "bug: 5% INTERNAL", vec![(Fault::Broken, 50)]),
        phase(8_500, "healthy", vec![]),
    ]
}

/// What became of one quote.
struct Fate {
    outcome: &'static str,
    attempts: u64,
    latency: Std,
    /// A SKU the service does not sell.
    unsold: bool,
    /// An attempt was made after the service had answered NOT_FOUND: a wrong request resent.
    resent_answer: bool,
}

/// A quote's result: the price, the code of the service's answer, or why it failed.
type Quoted = Result<Result<u64, Code>, relent_tokio::Error<Judged<HZ, tonic::Status>>>;

fn outcome(result: &Quoted) -> &'static str {
    let err = match result {
        Ok(Ok(_)) => return "succeeded",
        Ok(Err(Code::NotFound)) => return "answered: NOT_FOUND",
        Ok(Err(_)) => return "answered: another code",
        Err(err) => err,
    };
    let Some(completion) = err.completion() else { return "not started" };
    match (completion.disposition, err.code()) {
        (Disposition::Failed, "") => match &completion.last_failure {
            Some(AttemptError::Failed(judged)) if judged.error.code() == Code::Internal => {
                "failed: INTERNAL, not retried"
            }
            _ => "failed: other, not retried",
        },
        (Disposition::Failed, "attempts_exhausted") => "failed: attempts_exhausted",
        (Disposition::Failed, "retry_budget_exhausted") => "failed: retry_budget_exhausted",
        (Disposition::Failed, "retry_delay_exceeds_deadline") => "failed: retry_delay_exceeds_deadline",
        (Disposition::Failed, "deadline_exceeded") => "failed: deadline_exceeded",
        (Disposition::Deferred, "retry_after_exceeds_maximum_delay") => {
            "deferred: pushback_exceeds_maximum_delay"
        }
        (Disposition::Deferred, "retry_after_exceeds_deadline") => "deferred: pushback_exceeds_deadline",
        (Disposition::Rejected, "circuit_open") => "rejected: circuit_open",
        (Disposition::Rejected, "bulkhead_full") => "rejected: bulkhead_full",
        _ => "other",
    }
}

async fn quote(pricing: &Dependency, method: &GrpcMethodConfig, client: &PricingClient, sku: String) -> Fate {
    let started = Instant::now();
    let unsold = sku == "sku-404";
    let attempts = AtomicU64::new(0);
    let (answered, resent_answer) = (AtomicBool::new(false), AtomicBool::new(false));
    let deadline = method.timeout().unwrap_or(Duration::from_secs(2));
    let read = Context::new(deadline, ReplaySafety::replayable_read(Duration::from_secs(60)));
    let result = pricing
        .execute(&method.policy(), read, |attempt| {
            attempts.fetch_add(1, Ordering::Relaxed);
            if answered.load(Ordering::Relaxed) {
                resent_answer.store(true, Ordering::Relaxed);
            }
            let (mut client, grpc, sku, answered) =
                (client.clone(), method.classifier(), sku.clone(), &answered);
            async move {
                let mut request = tonic::Request::new(QuoteRequest { sku });
                // The server's deadline for this attempt: grpc-timeout.
                request.set_timeout(attempt.timeout());
                let result = client.quote(request).await;
                if result.as_ref().is_err_and(|status| status.code() == Code::NotFound) {
                    answered.store(true, Ordering::Relaxed);
                }
                grpc.judge(result)
            }
        })
        .await;
    let result =
        result.map(|answer| answer.map(|reply| reply.into_inner().cents).map_err(|status| status.code()));
    Fate {
        outcome: outcome(&result),
        attempts: attempts.into_inner(),
        latency: started.elapsed(),
        unsold,
        resent_answer: resent_answer.into_inner(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = Arc::new(PricingServer::start(timeline()).await?);
    let channel: GrpcServiceConfig = serde_json::from_str(SERVICE_CONFIG)?;
    let budget = channel.retry_budget().ok_or("the service config throttles retries")?;
    // The circuit opens when half of the last 50 outcomes failed, for 1 s; 64 calls in flight.
    let config = DependencyConfig::new(Duration::from_secs(10))
        .budget(budget)
        .breaker(BreakerConfig::count_window(50, 50, 20, Duration::from_secs(1)))
        .bulkhead(64);
    let pricing = Arc::new(Dependency::new("pricing", config)?);
    let method = Arc::new(channel.method("pricing.Pricing", "Quote").clone());
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{}", server.addr()))?
        .connect_timeout(Std::from_millis(250));
    let client = PricingClient::new(endpoint.connect_lazy());

    println!(
        "Pricing listens on {}; {QUOTES} quotes at {PER_SECOND}/s over one tonic Channel through relent-tokio.",
        server.addr()
    );
    let started = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(QUOTES as usize);
    let mut tick = tokio::time::interval(Std::from_micros(1_000_000 / PER_SECOND));
    let (mut restarted, mut next_progress) = (false, Std::from_secs(1));
    for n in 0..QUOTES {
        tick.tick().await;
        let elapsed = started.elapsed();
        if !restarted && elapsed >= RESTART_AT {
            server.restart_for(RESTART_FOR);
            restarted = true;
        }
        if elapsed >= next_progress {
            next_progress += Std::from_secs(1);
            print!(
                "\r[{:>4.1} s] {:>4}/{QUOTES} quotes done | {:<50}",
                elapsed.as_secs_f64(),
                done.load(Ordering::Relaxed),
                server.phase_at(elapsed)
            );
            let _ = std::io::stdout().flush();
        }
        // One quote in fifty asks for a SKU the service does not sell.
        let sku = if n % 50 == 7 { "sku-404".to_owned() } else { format!("sku-{}", 1 + n % 99) };
        let (pricing, method, client, done) = (pricing.clone(), method.clone(), client.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let fate = quote(&pricing, &method, &client, sku).await;
            done.fetch_add(1, Ordering::Relaxed);
            fate
        }));
    }
    let mut fates = Vec::with_capacity(tasks.len());
    for task in tasks {
        fates.push(task.await?);
    }
    println!("\r{:<90}", format!("[{:>4.1} s] all {QUOTES} quotes done", started.elapsed().as_secs_f64()));
    report(&fates, &server, &pricing, &method)
}

fn report(
    fates: &[Fate],
    server: &PricingServer,
    pricing: &Dependency,
    method: &GrpcMethodConfig,
) -> Result<(), Box<dyn std::error::Error>> {
    println!("\nOutcomes of {} quotes:", fates.len());
    for (outcome, n) in tally(fates.iter().map(|f| f.outcome)) {
        println!("  {n:>6}  {outcome}");
    }
    println!("\nAttempts per quote:");
    for attempts in 0..=u64::from(method.policy().max_attempts()) {
        let n = fates.iter().filter(|f| f.attempts == attempts).count();
        let note = if attempts == 0 { " (refused before sending: circuit, bulkhead)" } else { "" };
        println!("  {attempts} attempt(s): {n:>6}{note}");
    }
    let calls: u64 = fates.iter().map(|f| f.attempts).sum();
    let first = fates.iter().filter(|f| f.attempts > 0).count() as u64;
    let amplification = calls as f64 / first.max(1) as f64;
    println!(
        "Amplification: {calls} calls for {first} first attempts = {amplification:.3} calls per first attempt (policy allows {})",
        method.policy().max_attempts()
    );
    println!(
        "Pricing saw {} of them; the other {} were refused connections while it restarted.",
        server.calls(),
        calls - server.calls()
    );

    let latencies: Vec<Std> = fates.iter().filter(|f| f.outcome == "succeeded").map(|f| f.latency).collect();
    let n = latencies.len();
    println!("\nQuote latency, {} succeeded: {}", n, latency_summary(latencies));
    let slowest = fates.iter().map(|f| f.latency).max().unwrap_or_default();
    let deadline =
        method.timeout().map_or_else(|| "none".to_owned(), |t| show(relent_tokio::std_duration(t)));
    println!(
        "Slowest quote, answered or not: {} (its deadline, the service config's timeout: {deadline})",
        show(slowest)
    );

    let unsold = fates.iter().filter(|f| f.unsold).count();
    let answered = fates.iter().filter(|f| f.outcome == "answered: NOT_FOUND").count();
    let resent = fates.iter().filter(|f| f.resent_answer).count();
    println!(
        "\nQuotes for an unsold SKU: {unsold}, answered NOT_FOUND {answered} (the others were refused or failed \
         before the service answered); sent again after NOT_FOUND: {resent}"
    );
    let counts = pricing.inspect(|s, _, now| s.counts(now));
    println!(
        "Pricing's window now: {} calls, {} retries, {} failures; circuit {}",
        counts.calls,
        counts.retries,
        counts.failures,
        pricing.inspect(|s, _, now| s.circuit(now)).as_str()
    );
    if resent > 0 {
        return Err(format!("{resent} quotes were sent again after the service answered NOT_FOUND").into());
    }
    Ok(())
}
