//! Running an operation on a virtual clock against a script, and recording what the core decided.

use std::fmt::Write as _;
use std::string::String;
use std::vec::Vec;

use relent_core::rand_core::RngCore;
use relent_core::{
    Action, AfterFailure, Classify, Completion, Context, DelaySource, Dependency, DependencyConfig, Event,
    Instant, Observer, Operation, RetryPolicy, Verdict,
};

/// Ticks per second in transcript tests: milliseconds, so transcripts read as seconds with three
/// decimals.
pub const HZ: u64 = 1_000;

/// A duration in transcript ticks.
pub type D = relent_core::Duration<HZ>;
/// An instant in transcript ticks.
pub type T = Instant<HZ>;

/// Unwraps a configuration in a `const`: a bad one stops the build with its message.
pub const fn valid<V: Copy>(result: Result<V, relent_core::ConfigError>) -> V {
    match result {
        Ok(v) => v,
        Err(e) => panic!("{}", e.message()),
    }
}

/// A dependency's configuration and its state, side by side, as an adapter keeps them.
#[derive(Debug)]
pub struct Dep {
    /// The configuration (a `const` in real code).
    pub config: DependencyConfig<HZ>,
    /// The shared state: 10 buckets in its window, 8 entries in its airtime log.
    pub state: Dependency<HZ, 10, 8>,
}

impl Dep {
    /// Fresh state for `config` at time 0.
    pub fn new(config: DependencyConfig<HZ>) -> Self {
        Self::at(config, 0)
    }

    /// Fresh state for `config` at `start` ms.
    pub fn at(config: DependencyConfig<HZ>, start: u64) -> Self {
        let state = Dependency::new(&config, T::from_ticks(start)).expect("a valid dependency");
        Self { config, state }
    }
}

impl Dep {
    /// Carries the state over to `to` at `ms` ([`Dependency::reconfigure`]) and, if `to` is
    /// accepted, keeps `to` as the configuration, as an adapter does.
    pub fn reconfigure(&mut self, to: DependencyConfig<HZ>, ms: u64) -> Result<(), relent_core::ConfigError> {
        self.state.reconfigure(&self.config, &to, T::from_ticks(ms))?;
        self.config = to;
        Ok(())
    }
}

/// `s.mmm` for an instant or duration in milliseconds.
pub fn secs(ticks: u64) -> String {
    format!("{}.{:03}", ticks / 1_000, ticks % 1_000)
}

/// The caller's own failure type in transcripts: a name (to check the failure is kept as it is)
/// and the verdict its classifier gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// What the caller would call it: "timeout", "503", ...
    pub name: &'static str,
    /// What the caller's classifier says about it.
    pub verdict: Verdict<HZ>,
}

impl Classify<HZ> for Failure {
    fn classify(&self) -> Verdict<HZ> {
        self.verdict
    }
}

/// What one attempt does in a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Succeeds after `ms`.
    Ok(u64),
    /// Fails with `failure` after `ms`.
    Fail(u64, Failure),
    /// Runs past its timeout: reported when the timeout expires, as the caller's retryable
    /// "timeout" failure (what an adapter does).
    Hang,
}

/// A retryable timeout, as an adapter reports an attempt that ran past its timeout.
pub const TIMEOUT: Failure = Failure { name: "timeout", verdict: Verdict::Retryable };

/// Renders events as transcript lines.
#[derive(Debug, Default)]
pub struct Recorder {
    /// One line per event.
    pub lines: Vec<String>,
    /// Prefix each line with `op<id>: `, for transcripts of several operations.
    pub tagged: bool,
}

impl Recorder {
    /// A recorder that prefixes each line with its operation's id.
    pub fn tagged() -> Self {
        Self { lines: Vec::new(), tagged: true }
    }
}

impl Observer<HZ> for Recorder {
    fn on_event(&mut self, event: &Event<HZ>) {
        let line = line(event);
        self.lines.push(if self.tagged { format!("op{}: {line}", event.operation().0) } else { line });
    }
}

/// One event as a transcript line.
pub fn line(event: &Event<HZ>) -> String {
    let mut s = String::new();
    let _ = match *event {
        Event::AttemptDispatched { attempt, timeout, at, .. } => {
            write!(s, "{} dispatch #{attempt} timeout {}", secs(at.as_ticks()), secs(timeout.as_ticks()))
        }
        Event::AttemptSucceeded { attempt, at, .. } => {
            write!(s, "{} #{attempt} succeeded", secs(at.as_ticks()))
        }
        Event::AttemptFailed { attempt, at, verdict, then, .. } => {
            let verdict = match verdict {
                Verdict::Retryable => String::from("retryable"),
                Verdict::NeverArrived => String::from("never arrived"),
                Verdict::RetryableAfter(d) => format!("retryable after {}", secs(d.as_ticks())),
                Verdict::NotRetryable => String::from("not retryable"),
            };
            let then = match then {
                AfterFailure::Retry => String::from("retry"),
                AfterFailure::NotRetryable => String::from("returned as it is"),
                AfterFailure::Stop(p) => format!("stop: {p}"),
            };
            write!(s, "{} #{attempt} failed ({verdict}): {then}", secs(at.as_ticks()))
        }
        Event::RetryScheduled { attempt, delay, until, source, .. } => {
            let source = match source {
                DelaySource::Backoff { nominal } => format!("backoff {}", secs(nominal.as_ticks())),
                DelaySource::RetryAfter { stated } => {
                    format!("retry-after {}", secs(stated.as_ticks()))
                }
            };
            write!(
                s,
                "wait {} ({source}) until {} for #{attempt}",
                secs(delay.as_ticks()),
                secs(until.as_ticks())
            )
        }
        Event::Refused { attempt, at, problem, retry_at, .. } => {
            let retry = retry_at.map(|t| format!(" (retry at {})", secs(t.as_ticks()))).unwrap_or_default();
            write!(s, "{} refused #{attempt}: {problem}{retry}", secs(at.as_ticks()))
        }
        Event::WaitingForRateLimit { attempt, until, .. } => {
            write!(s, "wait for a rate unit until {} for #{attempt}", secs(until.as_ticks()))
        }
        Event::WaitingForAirtime { attempt, until, .. } => {
            write!(s, "wait for airtime until {} for #{attempt}", secs(until.as_ticks()))
        }
        Event::WaitingForSlot { attempt, until, .. } => {
            write!(s, "wait for a bulkhead slot until {} for #{attempt}", secs(until.as_ticks()))
        }
        Event::CircuitChanged { at, state, .. } => {
            write!(s, "{} circuit {}", secs(at.as_ticks()), state.as_str())
        }
        Event::BulkheadLimitChanged { at, from, to, .. } => {
            write!(s, "{} bulkhead limit {from} -> {to}", secs(at.as_ticks()))
        }
        Event::CooldownExtended { at, until, .. } => {
            write!(s, "{} cooldown until {}", secs(at.as_ticks()), secs(until.as_ticks()))
        }
        Event::Completed { disposition, problem, dispatched, at, .. } => {
            let problem = problem.map(|p| format!(", {p}")).unwrap_or_default();
            write!(s, "{} done: {disposition}{problem} after {dispatched} dispatched", secs(at.as_ticks()))
        }
        // A new event must get its own transcript line before it can appear in a transcript.
        other => write!(s, "unrendered event: {other:?}"),
    };
    s
}

/// Runs one operation from `start` (ms) until it is done, with attempt outcomes taken from
/// `script` in order (the last step repeats if the script runs out). The clock jumps to each
/// instant the core asks to wait for. Returns the transcript and the completion.
pub fn run<R: RngCore>(
    policy: &RetryPolicy<HZ>,
    context: Context<HZ>,
    dep: &mut Dep,
    start: u64,
    script: &[Step],
    rng: &mut R,
) -> (Vec<String>, Completion<HZ, Failure>) {
    let mut now = T::from_ticks(start);
    let Dep { config, state: dependency } = dep;
    let mut op = Operation::start(policy, config, context, now).expect("the operation starts");
    let mut rec = Recorder::default();
    let mut steps = script.iter().copied();
    let mut last = script.last().copied().unwrap_or(Step::Ok(0));
    for _ in 0..1_000 {
        match op.poll(now, dependency, &mut rec) {
            Action::Dispatch(attempt) => {
                let step = steps.next().unwrap_or(last);
                last = step;
                match step {
                    Step::Ok(ms) => {
                        now = T::from_ticks(now.as_ticks() + ms.min(attempt.timeout().as_ticks()));
                        op.on_success(attempt, now, dependency, &mut rec);
                    }
                    Step::Fail(ms, failure) => {
                        now = T::from_ticks(now.as_ticks() + ms.min(attempt.timeout().as_ticks()));
                        op.on_failure(attempt, now, dependency, rng, failure, &mut rec);
                    }
                    Step::Hang => {
                        now = attempt.expires();
                        op.on_failure(attempt, now, dependency, rng, TIMEOUT, &mut rec);
                    }
                }
            }
            Action::Wait { until } => now = until,
            Action::Done => {
                let completion = op.take_completion().expect("a done operation has a completion");
                return (rec.lines, completion);
            }
        }
    }
    panic!("the operation did not finish in 1000 steps:\n{}", rec.lines.join("\n"));
}
