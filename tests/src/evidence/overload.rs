//! The overload arithmetic of seed 000 ("The Retry Budget") and the Google SRE book (ch. 21): a
//! service sends `rate` first attempts a second to a dependency that fails every call during an
//! outage and then recovers. With 3 attempts per request and no budget, the dependency sees about
//! 3 calls per first attempt while it is down, exactly when it can least take them; with three
//! layers each retrying, 27. A ratio budget of 10 % keeps it near 1.1 per layer. tower's
//! `TpsBudget`, as tower's documentation deposits into it (once per success), runs beside Relent's
//! budgets for comparison: the budget users of tower's `Retry` would have instead.
//!
//! A discrete-event simulation on a virtual clock in microseconds. Each layer is a
//! [`Dependency`] with its own budget; an attempt at layer `k` is a whole operation at layer
//! `k + 1`, whose deadline is that attempt's timeout; the last layer calls the failing dependency.
//!
//! The same simulation with a dependency over capacity instead of down (the SRE book's "Client-side
//! throttling"): during the outage it accepts a fixed number of calls a second and rejects the
//! rest, and each rejection still costs it work. There the client throttle
//! ([`relent_core::ClientThrottle`]) keeps the calls it is sent near `K` times what it accepts.

use relent_core::{
    Action, Attempt, ClientThrottle, Context, Criticality, Dependency, DependencyConfig, Disposition, Jitter,
    Operation, Problem, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};

use super::{Agenda, D, HZ, T};
use crate::rng::seeded;
use crate::transcript::valid;

/// The retry budget each layer has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Effectively none: a ratio of 100 % with a floor no window reaches.
    Unlimited,
    /// Seed 000's: retries at most 10 % of calls over 10 s.
    Ratio,
    /// A token bucket sized to the same 10 %: 10 % of a second's first attempts, refilled each second.
    Tokens,
    /// tower's `TpsBudget` as its documentation's policy uses it, beside Relent's retries: a
    /// deposit for each call that succeeds, 10 % of them over 10 s to withdraw (`retry_percent`
    /// 0.1, no reserve: `min_per_sec` 0), a withdrawal as each retry goes out, and the retry not
    /// sent when it fails. The layers' own budgets then allow everything.
    Tower,
}

impl Budget {
    /// A short name, for plot legends.
    pub fn short_name(self) -> &'static str {
        match self {
            Self::Unlimited => "no budget",
            Self::Ratio => "ratio budget",
            Self::Tokens => "token bucket",
            Self::Tower => "tower's budget",
        }
    }

    /// The name used in tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unlimited => "no budget",
            Self::Ratio => "ratio budget (10 % of calls over 10 s)",
            Self::Tokens => "token bucket (10 % of a second's first attempts, refilled each second)",
            Self::Tower => "tower's TpsBudget (10 % of the calls that succeeded over 10 s, no reserve)",
        }
    }
}

/// One scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    /// First attempts per second, arriving evenly.
    pub rate: u64,
    /// How long first attempts keep arriving, in ms.
    pub duration_ms: u64,
    /// The dependency fails every call in [start, end) ms.
    pub outage_ms: (u64, u64),
    /// How long a call to the dependency takes, in ms.
    pub call_ms: u64,
    /// Layers, each retrying (1 or more).
    pub layers: usize,
    /// Each layer's budget.
    pub budget: Budget,
    /// The backoff's jitter.
    pub jitter: Jitter,
    /// Seed of the jitter draws.
    pub seed: u64,
    /// During the outage, the calls a second the dependency still accepts (at most a hundredth of
    /// them in each 10 ms), rejecting the rest; `None`: it accepts none, and calls in flight when
    /// it starts fail then.
    pub capacity: Option<u64>,
    /// The client throttle each layer has, if any.
    pub throttle: Option<ClientThrottle>,
    /// Every this many first attempts, one is critical (the first included) and the others
    /// sheddable: 1 for all critical.
    pub critical_one_in: u64,
    /// Each layer's critical reserve, in percent, if any.
    pub reserve: Option<u8>,
}

impl Scenario {
    /// Seed 000's numbers: 3,000 first attempts a second for 15 s, a 5 s outage from 2 s, 5 ms calls.
    pub fn seed_000(layers: usize, budget: Budget, jitter: Jitter) -> Self {
        Self {
            rate: 3_000,
            duration_ms: 15_000,
            outage_ms: (2_000, 7_000),
            call_ms: 5,
            layers,
            budget,
            jitter,
            seed: 1,
            capacity: None,
            throttle: None,
            critical_one_in: 1,
            reserve: None,
        }
    }

    /// The SRE book's client-side throttling: 3,000 first attempts a second for 45 s, 5 ms calls, 3
    /// attempts under the ratio budget, and a dependency that accepts only 1,000 calls a second
    /// from 5 s to 35 s, answering the rest with a rejection.
    pub fn over_capacity(throttle: Option<ClientThrottle>) -> Self {
        Self {
            duration_ms: 45_000,
            outage_ms: (5_000, 35_000),
            capacity: Some(1_000),
            throttle,
            ..Self::seed_000(1, Budget::Ratio, Jitter::Full)
        }
    }

    /// The same over capacity with a throttle of `K = 2`, one first attempt in four critical and the
    /// rest sheddable, and the dependency keeping `reserve` percent for critical work, if any.
    pub fn over_capacity_mixed(reserve: Option<u8>) -> Self {
        Self { critical_one_in: 4, reserve, ..Self::over_capacity(Some(ClientThrottle::K2)) }
    }

    /// Seed 000's "Jitter" paragraph: calls take 300 ms, so about 900 are in flight when a node
    /// drops, and all of them fail at that instant.
    pub fn node_drop(jitter: Jitter) -> Self {
        Self { call_ms: 300, ..Self::seed_000(1, Budget::Unlimited, jitter) }
    }
}

/// What the dependency saw.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Calls reaching the dependency, per 100 ms.
    pub calls: Vec<u64>,
    /// First attempts made by the service, per 100 ms.
    pub first: Vec<u64>,
    /// Calls reaching the dependency, per 10 ms.
    pub calls_per_10ms: Vec<u64>,
    /// The most calls in any 10 ms slot.
    pub peak_per_10ms: u64,
    /// Calls the dependency accepted, per 100 ms.
    pub accepted: Vec<u64>,
    /// Attempts of the outermost layer the client throttle refused, per 100 ms.
    pub throttled: Vec<u64>,
    /// Operations of the outermost layer that ended, by success.
    pub succeeded: u64,
    /// ... and the ones that did not.
    pub failed: u64,
    /// Per 100 ms of arrival, operations of the outermost layer that ended: [critical succeeded,
    /// critical failed, sheddable succeeded, sheddable failed].
    pub by_class: [Vec<u64>; 4],
}

impl Outcome {
    /// Calls per first attempt over the 100 ms buckets in [from, to) ms.
    pub fn amplification(&self, from_ms: u64, to_ms: u64) -> f64 {
        let (a, b) = ((from_ms / 100) as usize, (to_ms / 100) as usize);
        let calls: u64 = self.calls.get(a..b.min(self.calls.len())).map_or(0, |s| s.iter().sum());
        let first: u64 = self.first.get(a..b.min(self.first.len())).map_or(0, |s| s.iter().sum());
        calls as f64 / first.max(1) as f64
    }

    /// Calls, accepted calls and attempts the client throttle refused, per second, over the 100 ms
    /// buckets in [from, to) ms.
    pub fn rates(&self, from_ms: u64, to_ms: u64) -> (f64, f64, f64) {
        let per_second = |counts: &[u64]| {
            let (a, b) = ((from_ms / 100) as usize, (to_ms / 100) as usize);
            let sum: u64 = counts.get(a..b.min(counts.len())).map_or(0, |s| s.iter().sum());
            sum as f64 * 1_000.0 / (to_ms - from_ms).max(1) as f64
        };
        (per_second(&self.calls), per_second(&self.accepted), per_second(&self.throttled))
    }

    /// Of the operations that arrived in [from, to) ms, the share that succeeded, in percent: of
    /// the critical ones, and of the sheddable ones (`None` where there were none).
    pub fn succeeded_by_class(&self, from_ms: u64, to_ms: u64) -> (Option<f64>, Option<f64>) {
        let sum = |v: &Vec<u64>| -> u64 {
            v.iter().skip((from_ms / 100) as usize).take(((to_ms - from_ms) / 100) as usize).sum()
        };
        let [c_ok, c_failed, s_ok, s_failed] = self.by_class.each_ref().map(sum);
        let share =
            |ok: u64, failed: u64| (ok + failed > 0).then(|| ok as f64 * 100.0 / (ok + failed) as f64);
        (share(c_ok, c_failed), share(s_ok, s_failed))
    }

    /// The end of the last 100 ms in which the client throttle refused an attempt, in ms.
    pub fn last_throttled_ms(&self) -> Option<u64> {
        self.throttled.iter().rposition(|&n| n > 0).map(|i| (i as u64 + 1) * 100)
    }

    /// Calls per second reaching the dependency in each 100 ms from 0 to `to_ms`: (seconds, calls/s).
    pub fn calls_per_second(&self, to_ms: u64) -> Vec<(f64, f64)> {
        per_second(&self.calls, to_ms)
    }

    /// Calls the dependency accepted per second in each 100 ms from 0 to `to_ms`: (seconds, calls/s).
    pub fn accepted_per_second(&self, to_ms: u64) -> Vec<(f64, f64)> {
        per_second(&self.accepted, to_ms)
    }

    /// First attempts per second in each 100 ms from 0 to `to_ms`: (seconds, first attempts/s).
    pub fn first_attempts_per_second(&self, to_ms: u64) -> Vec<(f64, f64)> {
        per_second(&self.first, to_ms)
    }

    /// Calls in each 10 ms for `span_ms` from `from_ms`: (ms after `from_ms`, calls).
    pub fn calls_per_10ms_from(&self, from_ms: u64, span_ms: u64) -> Vec<(u64, u64)> {
        let slots = self.calls_per_10ms.iter().skip((from_ms / 10) as usize).take((span_ms / 10) as usize);
        slots.zip((0..).step_by(10)).map(|(&calls, ms)| (ms, calls)).collect()
    }

    /// Calls per first attempt in each 100 ms from 0 to `to_ms` (while first attempts arrive):
    /// (seconds, calls per first attempt).
    pub fn amplification_over_time(&self, to_ms: u64) -> Vec<(f64, f64)> {
        (0..(to_ms / 100)).map(|i| (i as f64 / 10.0, self.amplification(i * 100, (i + 1) * 100))).collect()
    }
}

/// Counts per 100 ms as (seconds, count per second), from 0 to `to_ms`.
fn per_second(counts: &[u64], to_ms: u64) -> Vec<(f64, f64)> {
    (0..(to_ms / 100) as usize)
        .map(|i| (i as f64 / 10.0, counts.get(i).copied().unwrap_or(0) as f64 * 10.0))
        .collect()
}

fn policy(jitter: Jitter) -> RetryPolicy<HZ> {
    valid(
        RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(1))
            .jitter(jitter)
            .attempt_timeout(D::from_millis(500))
            .build(),
    )
}

fn config(
    budget: Budget,
    rate: u64,
    throttle: Option<ClientThrottle>,
    reserve: Option<u8>,
) -> DependencyConfig<HZ> {
    let budget = match budget {
        Budget::Unlimited | Budget::Tower => valid(RetryBudget::ratio(100, 1_000_000_000)),
        Budget::Ratio => valid(RetryBudget::ratio(10, 0)),
        Budget::Tokens => {
            let tokens = u32::try_from(rate / 10).unwrap_or(u32::MAX).max(1);
            valid(RetryBudget::token_bucket(tokens, tokens, D::from_secs(1), D::from_secs(2)))
        }
    };
    let config = DependencyConfig::new(D::from_secs(10)).budget(budget);
    let config = reserve.map_or(config, |r| config.critical_reserve(r));
    throttle.map_or(config, |t| config.client_throttle(t))
}

/// Why an attempt failed, as the simulation's callers see it.
#[derive(Debug, Clone, Copy)]
struct Unavailable;

impl relent_core::Classify<HZ> for Unavailable {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

/// tower's `TpsBudget`, one per layer, on a paused tokio clock that the simulation moves to each
/// event's instant (the budget reads `tokio::time::Instant::now()` itself).
struct TowerBudgets {
    runtime: tokio::runtime::Runtime,
    budgets: Vec<tower::retry::budget::TpsBudget>,
    /// The clock's instant, in µs since the simulation's start.
    at_us: u64,
}

impl TowerBudgets {
    fn new(layers: usize) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime for tower's clock");
        // Made on the paused clock, which their windows then follow.
        let budgets = runtime.block_on(async {
            (0..layers)
                .map(|_| tower::retry::budget::TpsBudget::new(std::time::Duration::from_secs(10), 0, 0.1))
                .collect()
        });
        Self { runtime, budgets, at_us: 0 }
    }

    /// Moves the budgets' clock on to `now_us`.
    fn at(&mut self, now_us: u64) {
        if now_us > self.at_us {
            let by = std::time::Duration::from_micros(now_us - self.at_us);
            self.runtime.block_on(tokio::time::advance(by));
            self.at_us = now_us;
        }
    }

    fn deposit(&self, layer: usize) {
        use tower::retry::budget::Budget as _;
        self.runtime.block_on(async { self.budgets[layer].deposit() });
    }

    fn withdraw(&self, layer: usize) -> bool {
        use tower::retry::budget::Budget as _;
        self.runtime.block_on(async { self.budgets[layer].withdraw() })
    }
}

struct Op<'a> {
    layer: usize,
    op: Operation<'a, HZ, Unavailable>,
    /// The attempt this operation has out.
    out: Option<Attempt<HZ>>,
    /// The parent operation whose attempt this operation is.
    parent: Option<usize>,
    /// When the first attempt it serves arrived, in µs, and whether it is critical.
    arrived: (u64, bool),
}

/// What happens at an instant; ordered so that the agenda can hold it directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The service's `k`-th first attempt.
    Arrive(u64),
    Poll(usize),
    /// The attempt of this operation ended, successfully or not.
    Report(usize, bool),
}

/// Runs one scenario.
pub fn run(s: &Scenario) -> Outcome {
    let policy = policy(s.jitter);
    let config = config(s.budget, s.rate, s.throttle, s.reserve);
    let mut layers: Vec<Dependency<HZ, 10>> = (0..s.layers)
        .map(|_| Dependency::new(&config, T::from_ticks(0)).expect("a valid dependency"))
        .collect();
    let mut rng = seeded(s.seed);
    let mut ops: Vec<Option<Op>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut agenda = Agenda::new();
    let horizon_us = (s.duration_ms + 20_000) * 1_000;
    let buckets = (horizon_us / 100_000) as usize + 1;
    let mut out = Outcome {
        calls: vec![0; buckets],
        first: vec![0; buckets],
        calls_per_10ms: vec![0; buckets * 10],
        accepted: vec![0; buckets],
        throttled: vec![0; buckets],
        by_class: [(); 4].map(|()| vec![0; buckets]),
        ..Outcome::default()
    };
    let mut accepted_per_10ms = vec![0u64; buckets * 10];
    // The k-th first attempt arrives at k / rate seconds, rounded down to the microsecond: exactly
    // `rate` a second, where a gap rounded once would drift (3,003 a second for 3,000).
    let rate = s.rate.max(1);
    agenda.push(0, Event::Arrive(0));
    let context = |deadline: D, critical: bool| {
        let criticality = if critical { Criticality::Critical } else { Criticality::Sheddable };
        Context::new(deadline, ReplaySafety::replayable_read(D::from_secs(3_600))).criticality(criticality)
    };

    let mut tower = (s.budget == Budget::Tower).then(|| TowerBudgets::new(s.layers));
    while let Some((now, event)) = agenda.pop() {
        let t = T::from_ticks(now);
        if let Some(tower) = tower.as_mut() {
            tower.at(now);
        }
        match event {
            Event::Arrive(k) => {
                if now < s.duration_ms * 1_000 {
                    out.first[(now / 100_000) as usize] += 1;
                    let critical = k % s.critical_one_in.max(1) == 0;
                    let op = Operation::start(&policy, &config, context(D::from_secs(10), critical), t)
                        .expect("starts");
                    let arrived = (now, critical);
                    let slot =
                        insert(&mut ops, &mut free, Op { layer: 0, op, out: None, parent: None, arrived });
                    agenda.push(now, Event::Poll(slot));
                    agenda.push((k + 1) * 1_000_000 / rate, Event::Arrive(k + 1));
                }
            }
            Event::Poll(i) => {
                let Some(rec) = ops.get_mut(i).and_then(Option::as_mut) else { continue };
                let layer = rec.layer;
                match rec.op.poll(t, &mut layers[layer], &mut ()) {
                    Action::Dispatch(attempt) => {
                        if attempt.number() > 1 && tower.as_ref().is_some_and(|b| !b.withdraw(layer)) {
                            // tower's budget refuses the retry: it is not sent, and the operation
                            // ends with the failure before it (as cancelled, here).
                            rec.op.abandon(t, &mut layers[layer], &mut ());
                            agenda.push(now, Event::Poll(i));
                            continue;
                        }
                        let timeout = attempt.timeout();
                        rec.out = Some(attempt);
                        if layer + 1 == s.layers {
                            // The dependency itself.
                            let slot = (now / 100_000) as usize;
                            out.calls[slot.min(buckets - 1)] += 1;
                            out.calls_per_10ms[((now / 10_000) as usize).min(buckets * 10 - 1)] += 1;
                            let (down_from, down_to) = (s.outage_ms.0 * 1_000, s.outage_ms.1 * 1_000);
                            let ends = now + s.call_ms * 1_000;
                            let report = if now >= down_from && now < down_to {
                                let taken =
                                    &mut accepted_per_10ms[((now / 10_000) as usize).min(buckets * 10 - 1)];
                                let accepts = s.capacity.is_some_and(|c| *taken < c / 100);
                                *taken += u64::from(accepts);
                                Event::Report(i, accepts)
                            } else if s.capacity.is_none() && now < down_from && ends > down_from {
                                // In flight when the node drops: fails at that instant.
                                agenda.push(down_from, Event::Report(i, false));
                                continue;
                            } else {
                                Event::Report(i, true)
                            };
                            agenda.push(ends, report);
                        } else {
                            let arrived = rec.arrived;
                            let child = Operation::start(&policy, &config, context(timeout, arrived.1), t)
                                .expect("starts");
                            let slot = insert(
                                &mut ops,
                                &mut free,
                                Op { layer: layer + 1, op: child, out: None, parent: Some(i), arrived },
                            );
                            agenda.push(now, Event::Poll(slot));
                        }
                    }
                    Action::Wait { until } => agenda.push(until.as_ticks(), Event::Poll(i)),
                    Action::Done => {
                        let done = rec.op.take_completion().expect("done");
                        let (parent, (arrived, critical)) = (rec.parent, rec.arrived);
                        ops[i] = None;
                        free.push(i);
                        let ok = done.disposition == Disposition::Succeeded;
                        if parent.is_none() && done.problem == Some(Problem::ClientThrottled) {
                            out.throttled[((now / 100_000) as usize).min(buckets - 1)] += 1;
                        }
                        if parent.is_none() {
                            let class = usize::from(!critical) * 2 + usize::from(!ok);
                            out.by_class[class][((arrived / 100_000) as usize).min(buckets - 1)] += 1;
                        }
                        match parent {
                            Some(p) => agenda.push(now, Event::Report(p, ok)),
                            None if ok => out.succeeded += 1,
                            None => out.failed += 1,
                        }
                    }
                }
            }
            Event::Report(i, ok) => {
                let Some(rec) = ops.get_mut(i).and_then(Option::as_mut) else { continue };
                let Some(attempt) = rec.out.take() else { continue };
                let dep = &mut layers[rec.layer];
                if ok && rec.layer + 1 == s.layers {
                    out.accepted[((attempt.started().as_ticks() / 100_000) as usize).min(buckets - 1)] += 1;
                }
                if ok {
                    if let Some(tower) = &tower {
                        tower.deposit(rec.layer);
                    }
                    rec.op.on_success(attempt, t, dep, &mut ());
                } else {
                    rec.op.on_failure(attempt, t, dep, &mut rng, Unavailable, &mut ());
                }
                agenda.push(now, Event::Poll(i));
            }
        }
    }
    out.peak_per_10ms = out.calls_per_10ms.iter().copied().max().unwrap_or(0);
    out
}

fn insert<'a>(ops: &mut Vec<Option<Op<'a>>>, free: &mut Vec<usize>, op: Op<'a>) -> usize {
    match free.pop() {
        Some(i) => {
            ops[i] = Some(op);
            i
        }
        None => {
            ops.push(Some(op));
            ops.len() - 1
        }
    }
}
