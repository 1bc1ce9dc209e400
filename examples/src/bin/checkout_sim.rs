//! Seed 000's checkout, run through relent-core against a simulated, flaky payment provider
//! ("Payrail") on a virtual clock: every attempt, wait and outcome is printed, and nothing sleeps.
//!
//! The policy is the chapter's: 3 attempts, 100 ms doubling to 2 s with full jitter, 3 s per
//! attempt, inside the checkout's 10 s deadline, with retries at most 10 % of calls to Payrail
//! over 10 s. Reads and keyed POSTs state that they are safe to repeat; a keyless POST does not, and
//! gets one attempt.
//!
//! Run it with `cargo run -p relent-examples --bin checkout-sim`.

use relent_core::rand_core::SeedableRng as _;
use relent_core::{
    Action, Classify, ConfigError, Context, DelaySource, Dependency, DependencyConfig, Disposition, Duration,
    Event, Instant, Jitter, Operation, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};

/// Milliseconds: the virtual clock's tick.
const HZ: u64 = 1_000;
type D = Duration<HZ>;
type T = Instant<HZ>;

const fn ok<V: Copy>(r: Result<V, ConfigError>) -> V {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{}", e.message()),
    }
}

/// Seed 000's policy for calls to Payrail.
const PAYRAIL_POLICY: RetryPolicy<HZ> = ok(RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2))
    .jitter(Jitter::Full)
    .attempt_timeout(D::from_secs(3))
    .build());

/// A keyless POST is not safe to repeat: one attempt, whatever happens.
const ONE_ATTEMPT: RetryPolicy<HZ> =
    ok(RetryPolicy::single_attempt().attempt_timeout(D::from_secs(3)).build());

/// Payrail, as a dependency: counted over 10 s, retries at most 10 % of its calls plus 4 per window
/// so a quiet service can still retry.
const PAYRAIL: DependencyConfig<HZ> =
    DependencyConfig::new(D::from_secs(10)).budget(ok(RetryBudget::ratio(10, 4)));

/// What Payrail does with one request, in the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Payrail {
    /// 200 after this many ms.
    Ok(u64),
    /// Connection refused after this many ms: the request never arrived.
    Refused(u64),
    /// 503 or 429 with `Retry-After: s`.
    Busy { status: u16, retry_after_s: u64 },
    /// 500.
    ServerError,
    /// No answer: the attempt runs into its timeout.
    Hang,
}

/// The caller's own error type, classified the way seed 000's `transient()` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PayrailError {
    ConnectRefused,
    Status { status: u16, retry_after_s: Option<u64> },
    ReadTimeout,
}

impl Classify<HZ> for PayrailError {
    fn classify(&self) -> Verdict<HZ> {
        match *self {
            // The request never arrived: safe to retry.
            Self::ConnectRefused => Verdict::Retryable,
            // "Not now": retry no sooner than the header says.
            Self::Status { status: 429 | 503, retry_after_s: Some(s) } => {
                Verdict::RetryableAfter(D::from_secs(s))
            }
            Self::Status { status: 429 | 503, retry_after_s: None } => Verdict::Retryable,
            // 500, 400, 422: the same bytes fail the same way.
            Self::Status { .. } => Verdict::NotRetryable,
            // Only reached on operations that stated they are safe to repeat; the others have a
            // one-attempt policy.
            Self::ReadTimeout => Verdict::Retryable,
        }
    }
}

impl std::fmt::Display for PayrailError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ConnectRefused => write!(f, "connection refused"),
            Self::Status { status, retry_after_s: Some(s) } => write!(f, "{status} with Retry-After: {s}"),
            Self::Status { status, retry_after_s: None } => write!(f, "{status}"),
            Self::ReadTimeout => write!(f, "read timeout"),
        }
    }
}

struct Checkout {
    call: &'static str,
    safety: ReplaySafety<HZ>,
    /// What Payrail does with each attempt, in order.
    script: &'static [Payrail],
}

const HOUR: D = D::from_secs(3_600);

fn checkouts() -> Vec<Checkout> {
    use Payrail::*;
    let read = ReplaySafety::replayable_read(HOUR);
    let keyed = ReplaySafety::provider_idempotent_mutation(D::from_secs(24 * 3_600));
    vec![
        Checkout { call: "GET /seats/12", safety: read, script: &[Ok(40)] },
        Checkout { call: "GET /seats/12, Payrail hangs", safety: read, script: &[Hang, Hang, Hang] },
        Checkout {
            call: "GET /seats/12 during a node restart",
            safety: read,
            script: &[Refused(2), Refused(3), Ok(45)],
        },
        Checkout {
            call: "GET /quote, load shedding",
            safety: read,
            script: &[Busy { status: 503, retry_after_s: 1 }, Ok(38)],
        },
        Checkout {
            call: "GET /quote, throttled for a minute",
            safety: read,
            script: &[Busy { status: 429, retry_after_s: 60 }],
        },
        Checkout { call: "POST /orders (Idempotency-Key)", safety: keyed, script: &[Hang, Ok(120)] },
        Checkout { call: "POST /orders (no key)", safety: ReplaySafety::Unsafe, script: &[Hang] },
        Checkout { call: "POST /orders (Idempotency-Key), bad card", safety: keyed, script: &[ServerError] },
    ]
}

fn secs(ticks: u64) -> String {
    format!("{}.{:03}", ticks / 1_000, ticks % 1_000)
}

/// Runs one checkout to completion on the virtual clock, printing each step when `verbose`.
fn run_checkout(
    id: u64,
    checkout: &Checkout,
    payrail: &mut Dependency<HZ, 10>,
    rng: &mut rand_xoshiro::Xoshiro256PlusPlus,
    now: &mut T,
    verbose: bool,
) -> relent_core::Completion<HZ, PayrailError> {
    let policy = if checkout.safety == ReplaySafety::Unsafe { &ONE_ATTEMPT } else { &PAYRAIL_POLICY };
    let context = Context::new(D::from_secs(10), checkout.safety).id(id);
    let mut op = match Operation::<HZ, PayrailError>::start(policy, &PAYRAIL, context, *now) {
        Result::Ok(op) => op,
        Err(e) => panic!("{e}"),
    };
    let t0 = now.as_ticks();
    let rel = |t: u64| secs(t - t0);
    let mut print = |e: &Event<HZ>| {
        if !verbose {
            return;
        }
        match *e {
            Event::AttemptDispatched { attempt, timeout, at, .. } => {
                print!(
                    "  {:>6}  attempt {attempt} (timeout {} s) ",
                    rel(at.as_ticks()),
                    secs(timeout.as_ticks())
                )
            }
            Event::AttemptSucceeded { at, .. } => println!("-> 200 OK at {}", rel(at.as_ticks())),
            Event::RetryScheduled { delay, source, .. } => {
                let why = match source {
                    DelaySource::Backoff { nominal } => {
                        format!("full jitter of a {} s backoff", secs(nominal.as_ticks()))
                    }
                    DelaySource::RetryAfter { stated } => {
                        format!("Retry-After {} s, honoured exactly", secs(stated.as_ticks()))
                    }
                };
                println!("  {:>6}  wait {} s ({why})", "", secs(delay.as_ticks()));
            }
            Event::Refused { problem, .. } => {
                println!("  {:>6}  next attempt refused: {problem}", "")
            }
            Event::CircuitChanged { state, .. } => {
                println!("  {:>6}  Payrail's circuit is now {}", "", state.as_str())
            }
            Event::CooldownExtended { until, .. } => {
                println!("  {:>6}  Payrail in cooldown until {} s", "", rel(until.as_ticks()))
            }
            Event::WaitingForRateLimit { until, .. } => {
                println!("  {:>6}  wait for a rate-limit unit until {} s", "", rel(until.as_ticks()))
            }
            Event::WaitingForAirtime { until, .. } => {
                println!("  {:>6}  wait for airtime until {} s", "", rel(until.as_ticks()))
            }
            // Failures and completions are printed by the loop below; anything else is not shown.
            _ => {}
        }
    };
    let mut script = checkout.script.iter().copied();
    loop {
        match op.poll(*now, payrail, &mut print) {
            Action::Dispatch(attempt) => {
                let timeout = attempt.timeout().as_ticks();
                let (took, result) = match script.next().unwrap_or(Payrail::Hang) {
                    Payrail::Ok(ms) => (ms, Result::Ok(())),
                    Payrail::Refused(ms) => (ms, Err(PayrailError::ConnectRefused)),
                    Payrail::Busy { status, retry_after_s } => {
                        (25, Err(PayrailError::Status { status, retry_after_s: Some(retry_after_s) }))
                    }
                    Payrail::ServerError => {
                        (60, Err(PayrailError::Status { status: 500, retry_after_s: None }))
                    }
                    Payrail::Hang => (timeout, Err(PayrailError::ReadTimeout)),
                };
                *now = T::from_ticks(now.as_ticks() + took.min(timeout));
                match result {
                    Result::Ok(()) => op.on_success(attempt, *now, payrail, &mut print),
                    Err(e) => {
                        if verbose {
                            println!("-> {e} at {}", rel(now.as_ticks()));
                        }
                        op.on_failure(attempt, *now, payrail, rng, e, &mut print);
                    }
                }
            }
            // A real adapter sleeps here, holding nothing; the virtual clock just jumps.
            Action::Wait { until } => *now = until,
            Action::Done => break,
        }
    }
    let Some(done) = op.take_completion() else { unreachable!("poll said done") };
    if verbose {
        print!(
            "  done: {}; {} attempt(s), waited {} s, took {} s",
            outcome(&done),
            done.summary.dispatched,
            secs(done.summary.waited.as_ticks()),
            secs(done.summary.elapsed.as_ticks())
        );
        match done.not_before {
            Some(t) => println!("; try again at {} s\n", rel(t.as_ticks())),
            None => println!("\n"),
        }
    }
    done
}

fn outcome(done: &relent_core::Completion<HZ, PayrailError>) -> String {
    match (done.disposition, done.problem) {
        (d, Some(p)) => format!("{d}, {p}"),
        (Disposition::Failed, None) => {
            format!(
                "failed, not retryable ({})",
                done.last_failure.map(|e| e.to_string()).unwrap_or_default()
            )
        }
        (d, None) => d.to_string(),
    }
}

fn tally(tally: &mut Vec<(String, u32)>, done: &relent_core::Completion<HZ, PayrailError>) {
    let code = outcome(done);
    match tally.iter_mut().find(|(c, _)| *c == code) {
        Some((_, count)) => *count += 1,
        None => tally.push((code, 1)),
    }
}

fn main() {
    let mut payrail: Dependency<HZ, 10> = match Dependency::new(&PAYRAIL, T::from_ticks(0)) {
        Result::Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    // Production seeds from OS entropy once per process; a fixed seed keeps this output stable.
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0x5eed);
    let mut now = T::from_ticks(0);
    let mut ids = 0..;
    let mut outcomes: Vec<(String, u32)> = Vec::new();
    let background = Checkout {
        call: "GET /seats",
        safety: ReplaySafety::replayable_read(HOUR),
        script: &[Payrail::Ok(5)],
    };

    println!("Seed 000's checkout policy against a simulated Payrail, on a virtual clock.");
    println!("Between the checkouts shown, Payrail serves 40 other reads a second that succeed.\n");
    for (n, checkout) in checkouts().iter().enumerate() {
        // Two seconds of ordinary traffic: these calls are what the 10 % retry budget is a share of.
        let slot_end = now.as_ticks() + 2_000;
        while now.as_ticks() < slot_end {
            let done =
                run_checkout(ids.next().unwrap_or(0), &background, &mut payrail, &mut rng, &mut now, false);
            tally(&mut outcomes, &done);
            now = T::from_ticks(now.as_ticks() + 20);
        }
        println!("checkout {}: {} ({})", n + 1, checkout.call, checkout.safety.as_str());
        let done = run_checkout(ids.next().unwrap_or(0), checkout, &mut payrail, &mut rng, &mut now, true);
        tally(&mut outcomes, &done);
    }

    // An outage: every call is refused while 200 checkouts arrive. Without a budget each would make
    // 3 calls; the budget holds retries to 10 % of calls in the window (plus the floor of 4).
    let outage = Checkout {
        call: "GET /seats",
        safety: ReplaySafety::replayable_read(HOUR),
        script: &[Payrail::Refused(1); 3],
    };
    let mut outage_tally = Vec::new();
    let (mut calls, mut retries) = (0u32, 0u32);
    let outage_start = now;
    for _ in 0..200 {
        let done = run_checkout(ids.next().unwrap_or(0), &outage, &mut payrail, &mut rng, &mut now, false);
        calls += u32::from(done.summary.dispatched);
        retries += u32::from(done.summary.retries);
        tally(&mut outage_tally, &done);
        tally(&mut outcomes, &done);
        now = T::from_ticks(now.as_ticks() + 5);
    }
    println!(
        "Outage: Payrail refuses every connection while 200 checkouts arrive over {} s.",
        secs(now.as_ticks() - outage_start.as_ticks())
    );
    println!(
        "  {calls} calls for 200 checkouts ({retries} retries): {:.2} calls per checkout, not 3",
        f64::from(calls) / 200.0
    );
    for (code, count) in &outage_tally {
        println!("  {count:>4}  {code}");
    }
    let counts = payrail.counts(now);
    println!(
        "\nPayrail's window (last 10 s): {} calls, {} retries ({:.1} %), {} failures",
        counts.calls,
        counts.retries,
        100.0 * f64::from(counts.retries) / f64::from(counts.calls.max(1)),
        counts.failures
    );
    println!("All {} checkouts by outcome:", ids.next().unwrap_or(0));
    for (code, count) in outcomes {
        println!("  {count:>4}  {code}");
    }
}
