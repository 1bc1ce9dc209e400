//! Hedged requests ("The Tail at Scale", Dean and Barroso, 2013) with relent-core's own objects:
//! what a hedge after the 95th percentile does to the latency's tail, what it costs in calls, and
//! what the retry budget does when every call turns slow and every request would be hedged.
//!
//! A discrete-event simulation on a virtual clock in microseconds. A service sends `rate`
//! requests a second to one dependency, each an `Operation` whose call takes 10 to 30 ms, or 200
//! to 400 ms for one call in twenty (a slow node, a collection pause: each call independently);
//! during the slowdown every call takes 200 to 400 ms (the dependency is overloaded). A request
//! still unanswered after the delay gets a hedge from `Operation::start_hedge`, admitted or
//! refused by the dependency as the core decides, and the first answer ends the request; the other
//! operation is abandoned, as relent-tokio's `execute_hedged` drops it. With a learnt delay, the
//! delay is the dependency's `hedge_delay` for `HedgeDelay::percentile(95)`, read as each request
//! arrives, from the latency log the dependency keeps of every attempt that ends.

use rand_core::RngCore;
use relent_core::{
    Action, Attempt, Context, Dependency, DependencyConfig, HedgeDelay, HedgePlan, Jitter, Operation,
    ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};

use super::{Agenda, D, HZ, T};
use crate::rng::seeded;
use crate::transcript::valid;

/// Whether requests are hedged, and what bounds the hedges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hedging {
    /// No hedge.
    Off,
    /// A hedge for every request still out after the delay, with nothing to bound them (a
    /// budget no window reaches), as tower's hedge middleware has.
    Unbounded,
    /// The same, paid for by seed 000's ratio budget: retries and hedges at most 10 % of calls
    /// over 10 s.
    Budgeted,
    /// Paid for by the same budget, at this percentile of the attempts' latency as the
    /// dependency's log has learnt it (`Scenario::latency_samples`), and after the fixed delay
    /// until it has.
    Learnt(u8),
}

impl Hedging {
    /// Every mode, in the tables' order.
    pub const ALL: [Self; 5] =
        [Self::Off, Self::Unbounded, Self::Budgeted, Self::Learnt(95), Self::Learnt(90)];

    /// The name used in tables.
    pub fn name(self) -> String {
        match self {
            Self::Off => "no hedge".into(),
            Self::Unbounded => "hedge after 50 ms, nothing bounding it".into(),
            Self::Budgeted => "hedge after 50 ms, paid for by a 10 % ratio budget".into(),
            Self::Learnt(p) => format!("hedge at the learnt {p}th percentile, paid for by the same budget"),
        }
    }
}

/// One scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    /// Requests per second, arriving evenly.
    pub rate: u64,
    /// How long requests keep arriving, in ms.
    pub duration_ms: u64,
    /// Every call started in [start, end) ms is slow.
    pub slowdown_ms: (u64, u64),
    /// How long a request waits for its answer before it is hedged, in ms.
    pub hedge_after_ms: u64,
    /// Whether requests are hedged.
    pub hedging: Hedging,
    /// Seed of the calls' latencies.
    pub seed: u64,
    /// The latency log's size for a learnt delay (`DependencyConfig::latency_samples`).
    pub latency_samples: u16,
}

impl Scenario {
    /// 1,000 requests a second for 20 s, every call slow from 8 s to 13 s, hedges after 50 ms (the
    /// calls' 95th percentile is 30 ms).
    pub fn tail(hedging: Hedging) -> Self {
        Self {
            rate: 1_000,
            duration_ms: 20_000,
            slowdown_ms: (8_000, 13_000),
            hedge_after_ms: 50,
            hedging,
            seed: 1,
            // Each attempt's weight halves every 200 attempts, a fifth of a second here. With
            // 1,000 (a second) the log still held the slowdown's latencies 3 to 4 s after it, and
            // hedged late then (the README's table says what that cost).
            latency_samples: 200,
        }
    }

    /// Whether a request that arrived at `ms` arrived during the slowdown.
    pub fn in_slowdown(&self, ms: u64) -> bool {
        (self.slowdown_ms.0..self.slowdown_ms.1).contains(&ms)
    }

    /// Whether a request that arrived at `ms` is in the steady state: not in the slowdown, nor in
    /// the second after it, when requests still meet its last slow calls.
    pub fn steady(&self, ms: u64) -> bool {
        ms < self.slowdown_ms.0 || ms >= self.slowdown_ms.1 + 1_000
    }
}

/// What the requests saw.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Each steady-state request's time to its answer, in µs, sorted.
    pub steady_latency_us: Vec<u64>,
    /// Steady-state requests, and the calls they made.
    pub steady: (u64, u64),
    /// Requests that arrived during the slowdown, and the calls they made.
    pub slowdown: (u64, u64),
    /// Hedges sent, hedges whose answer came first, and hedges the dependency refused.
    pub hedges: (u64, u64, u64),
    /// Every request, and every call made.
    pub total: (u64, u64),
    /// The hedge delays used in the steady state, and during the slowdown: the least and the
    /// most, in µs (the fixed delay's for a fixed one); `None` without hedging.
    pub delays_us: [Option<(u64, u64)>; 2],
}

impl Outcome {
    /// The latency at percentile `p` (0 to 100, as a fraction of 1,000 for 99.9) in ms, of the
    /// steady-state requests.
    pub fn percentile_ms(&self, per_mille: u64) -> f64 {
        let n = self.steady_latency_us.len() as u64;
        let rank = (n * per_mille).div_ceil(1_000).clamp(1, n.max(1));
        self.steady_latency_us.get(rank as usize - 1).map_or(0.0, |&us| us as f64 / 1_000.0)
    }

    /// Calls per request in the steady state.
    pub fn steady_calls_per_request(&self) -> f64 {
        self.steady.1 as f64 / self.steady.0.max(1) as f64
    }

    /// Calls per request during the slowdown.
    pub fn slowdown_calls_per_request(&self) -> f64 {
        self.slowdown.1 as f64 / self.slowdown.0.max(1) as f64
    }
}

/// Two attempts (so that a hedge may be sent), 1 s each: no call here takes that long.
const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(2, D::from_millis(100), D::from_secs(1))
        .jitter(Jitter::Full)
        .attempt_timeout(D::from_secs(1))
        .build(),
);

fn config(s: &Scenario) -> DependencyConfig<HZ> {
    let hedging = s.hedging;
    let budget = match hedging {
        Hedging::Off | Hedging::Unbounded => valid(RetryBudget::ratio(100, 1_000_000_000)),
        Hedging::Budgeted | Hedging::Learnt(_) => valid(RetryBudget::ratio(10, 0)),
    };
    let config = DependencyConfig::new(D::from_secs(10)).budget(budget);
    if let Hedging::Learnt(_) = hedging { config.latency_samples(s.latency_samples) } else { config }
}

/// When to hedge: the fixed delay, or the learnt 95th percentile with the fixed delay until the
/// log holds it; `None` without hedging.
fn hedge_delay(s: &Scenario) -> Option<HedgeDelay<HZ>> {
    let fixed = D::from_millis(s.hedge_after_ms);
    match s.hedging {
        Hedging::Off => None,
        Hedging::Unbounded | Hedging::Budgeted => Some(HedgeDelay::after(fixed)),
        Hedging::Learnt(p) => Some(HedgeDelay::percentile(p).until_learnt(fixed)),
    }
}

/// Widens `range` (least, most) to hold `value`.
fn widen(range: &mut Option<(u64, u64)>, value: u64) {
    let (lo, hi) = range.get_or_insert((value, value));
    *lo = (*lo).min(value);
    *hi = (*hi).max(value);
}

/// The calls never fail here; the type is what an operation needs.
#[derive(Debug, Clone, Copy)]
struct Never;

impl relent_core::Classify<HZ> for Never {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

/// One request: when it arrived, its operation and its hedge with the attempt each has out, and
/// the plan a hedge is started from.
struct Request<'a> {
    arrived: u64,
    plan: HedgePlan<HZ>,
    ops: [Option<(Operation<'a, HZ, Never>, Attempt<HZ>)>; 2],
    answered: bool,
}

/// What happens at an instant, ordered so that the agenda can hold it directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The `k`-th request arrives.
    Arrive(u64),
    /// The delay of request `k` has passed: hedge it if it is still unanswered.
    HedgeDue(usize),
    /// The call of request `k`'s operation (0) or hedge (1) answers.
    Answer(usize, usize),
}

/// A call's latency at `now_ms`, in µs.
fn latency_us(s: &Scenario, now_ms: u64, rng: &mut impl RngCore) -> u64 {
    let slow = s.in_slowdown(now_ms) || rng.next_u32() % 20 == 0;
    let (lo, hi) = if slow { (200_000, 400_000) } else { (10_000, 30_000) };
    lo + rng.next_u64() % (hi - lo + 1)
}

/// Runs one scenario.
pub fn run(s: &Scenario) -> Outcome {
    let config = config(s);
    let mut dep: Dependency<HZ, 10> = Dependency::new(&config, T::from_ticks(0)).expect("a valid dependency");
    let mut rng = seeded(s.seed);
    let read = Context::new(D::from_secs(2), ReplaySafety::replayable_read(D::from_secs(60)));
    let mut requests: Vec<Request> = Vec::new();
    let mut agenda = Agenda::new();
    let total = s.rate * s.duration_ms / 1_000;
    agenda.push(0, Event::Arrive(0));
    let mut out = Outcome::default();
    while let Some((now, event)) = agenda.pop() {
        let at = T::from_ticks(now);
        let now_ms = now / 1_000;
        let sent = match event {
            Event::Arrive(k) => {
                if k + 1 < total {
                    agenda.push((k + 1) * 1_000_000 / s.rate, Event::Arrive(k + 1));
                }
                let mut op = Operation::start(&POLICY, &config, read, at).expect("the read starts");
                let plan = op.hedge_plan().expect("two attempts: a hedge may be sent");
                let Action::Dispatch(attempt) = op.poll(at, &mut dep, &mut ()) else {
                    unreachable!("nothing here refuses a first attempt")
                };
                let k = requests.len();
                requests.push(Request {
                    arrived: now_ms,
                    plan,
                    ops: [Some((op, attempt)), None],
                    answered: false,
                });
                let delay = hedge_delay(s).map(|h| dep.hedge_delay(&config, h).expect("a valid hedge delay"));
                if let Some(Some(delay)) = delay {
                    let delay = delay.as_ticks();
                    if s.steady(now_ms) {
                        widen(&mut out.delays_us[0], delay);
                    } else if s.in_slowdown(now_ms) {
                        widen(&mut out.delays_us[1], delay);
                    }
                    agenda.push(now + delay, Event::HedgeDue(k));
                }
                Some((k, 0))
            }
            Event::HedgeDue(k) => {
                let request = &mut requests[k];
                if request.answered {
                    None
                } else {
                    let mut hedge = Operation::start_hedge(&POLICY, &config, request.plan, at);
                    match hedge.poll(at, &mut dep, &mut ()) {
                        Action::Dispatch(attempt) => {
                            out.hedges.0 += 1;
                            request.ops[1] = Some((hedge, attempt));
                            Some((k, 1))
                        }
                        _ => {
                            out.hedges.2 += 1;
                            None
                        }
                    }
                }
            }
            Event::Answer(k, which) => {
                let request = &mut requests[k];
                if let Some((mut op, attempt)) = request.ops[which].take() {
                    op.on_success(attempt, at, &mut dep, &mut ());
                    request.answered = true;
                    if which == 1 {
                        out.hedges.1 += 1;
                    }
                    if let Some((mut other, _)) = request.ops[1 - which].take() {
                        other.abandon(at, &mut dep, &mut ());
                    }
                    let arrived = request.arrived;
                    if s.steady(arrived) {
                        out.steady_latency_us.push(now - arrived * 1_000);
                    }
                }
                None
            }
        };
        if let Some((k, which)) = sent {
            out.total.1 += 1;
            let arrived = requests[k].arrived;
            if s.steady(arrived) {
                out.steady.1 += 1;
            } else if s.in_slowdown(arrived) {
                out.slowdown.1 += 1;
            }
            agenda.push(now + latency_us(s, now_ms, &mut rng), Event::Answer(k, which));
        }
        if let Event::Arrive(_) = event {
            out.total.0 += 1;
            let arrived = now_ms;
            if s.steady(arrived) {
                out.steady.0 += 1;
            } else if s.in_slowdown(arrived) {
                out.slowdown.0 += 1;
            }
        }
    }
    out.steady_latency_us.sort_unstable();
    out
}
