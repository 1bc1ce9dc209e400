//! The bulkhead's adaptive limit against fixed bulkheads, with relent-core's own objects: what each
//! does when the dependency slows down until it can serve half, then a sixth, of what it is sent.
//!
//! A discrete-event simulation on a virtual clock in microseconds. A service sends `rate` requests
//! a second, evenly, each an `Operation` of one attempt with a 300 ms timeout, admitted or refused
//! by the dependency's bulkhead as the core decides. The dependency serves them in arrival order
//! with 20 workers: 5 to 15 ms a call when healthy (2,000 calls a second), 30 to 50 ms during its
//! first slowdown (500 a second), 100 to 140 ms during its second (167 a second). A
//! caller that times out gives its slot back and goes, but the dependency still serves the call
//! when its turn comes, for nobody: the work a fixed bulkhead lets pile up. An attempt is reported
//! as an adapter reports it: a success when the answer comes within the timeout, the caller's
//! retryable "timeout" at the timeout otherwise.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand_core::RngCore;
use relent_core::{
    Action, AdaptiveLimit, Attempt, Context, Criticality, Dependency, DependencyConfig, Operation,
    ReplaySafety, RetryPolicy, Verdict,
};

use super::{Agenda, D, HZ, T};
use crate::rng::seeded;
use crate::transcript::valid;

/// The bulkhead in front of the dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bulkhead {
    /// A fixed number of slots.
    Fixed(u16),
    /// An adaptive limit under this many slots, keeping this many thousandths of itself on a sign
    /// of overload (an attempt of 200 ms or more, or a timeout); never fewer than 4 slots.
    Adaptive(u16, u16),
}

impl Bulkhead {
    /// Every bulkhead, in the tables' order.
    pub const ALL: [Self; 4] =
        [Self::Fixed(200), Self::Fixed(60), Self::Adaptive(200, 500), Self::Adaptive(200, 900)];

    /// The name used in tables.
    pub fn name(self) -> String {
        match self {
            Self::Fixed(n) => format!("fixed, {n} slots"),
            Self::Adaptive(n, 500) => format!("adaptive, up to {n} slots, halved on overload (the default)"),
            Self::Adaptive(n, kept) => {
                format!("adaptive, up to {n} slots, {} kept on overload", f64::from(kept) / 1_000.0)
            }
        }
    }

    fn config(self, reserve: Option<u8>) -> DependencyConfig<HZ> {
        let window = DependencyConfig::new(D::from_secs(10));
        let window = match reserve {
            Some(percent) => window.critical_reserve(percent),
            None => window,
        };
        match self {
            Self::Fixed(n) => window.bulkhead(n),
            Self::Adaptive(n, kept) => window.bulkhead(n).adaptive_limit(
                AdaptiveLimit::new(D::from_millis(200)).min_slots(4).decrease_to_permille(kept),
            ),
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
    /// The first slowdown, [start, end) ms: calls of 30 to 50 ms.
    pub first_ms: (u64, u64),
    /// The second slowdown: calls of 100 to 140 ms.
    pub second_ms: (u64, u64),
    /// The dependency's workers: it serves 200 calls a second per worker in the first slowdown,
    /// 67 in the second.
    pub workers: usize,
    /// The bulkhead.
    pub bulkhead: Bulkhead,
    /// Every this many requests, one is critical (the first included) and the others sheddable:
    /// 1 for all critical.
    pub critical_one_in: u64,
    /// The dependency's critical reserve, in percent, if any.
    pub reserve: Option<u8>,
    /// Seed of the calls' service times.
    pub seed: u64,
}

/// The attempt's timeout.
const TIMEOUT_MS: u64 = 300;

impl Scenario {
    /// 1,000 requests a second for 40 s; the first slowdown from 5 s to 15 s, the second from 20 s
    /// to 30 s.
    pub fn slowdowns(bulkhead: Bulkhead) -> Self {
        Self {
            rate: 1_000,
            duration_ms: 40_000,
            first_ms: (5_000, 15_000),
            second_ms: (20_000, 30_000),
            workers: 20,
            bulkhead,
            critical_one_in: 1,
            reserve: None,
            seed: 1,
        }
    }

    /// The same, with one request in ten critical and the rest sheddable, and the dependency
    /// keeping `reserve` percent of its bulkhead for critical work, if any.
    pub fn mixed(bulkhead: Bulkhead, reserve: Option<u8>) -> Self {
        Self { critical_one_in: 10, reserve, ..Self::slowdowns(bulkhead) }
    }

    /// A call's service time, for a call that starts at `us`, in µs.
    fn service_us(&self, us: u64, rng: &mut impl RngCore) -> u64 {
        let ms = us / 1_000;
        let (lo, hi) = if (self.first_ms.0..self.first_ms.1).contains(&ms) {
            (30_000, 50_000)
        } else if (self.second_ms.0..self.second_ms.1).contains(&ms) {
            (100_000, 140_000)
        } else {
            (5_000, 15_000)
        };
        lo + rng.next_u64() % (hi - lo + 1)
    }
}

/// What the requests, and the dependency, saw.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Per 100 ms of arrival: requests answered within their timeout.
    pub answered: Vec<u64>,
    /// Per 100 ms of arrival: requests that timed out.
    pub timed_out: Vec<u64>,
    /// Per 100 ms of arrival: requests the bulkhead refused.
    pub refused: Vec<u64>,
    /// The bulkhead's limit at the end of each 100 ms.
    pub limit: Vec<u16>,
    /// Each answered request's arrival (ms) and time to its answer (µs).
    pub latencies: Vec<(u64, u64)>,
    /// The dependency's work, in µs: in all, and on calls whose caller had timed out.
    pub work_us: (u64, u64),
    /// Per 100 ms of arrival, of the critical requests only: answered within their timeout, timed
    /// out, refused.
    pub critical: [Vec<u64>; 3],
}

impl Outcome {
    fn bin(v: &mut Vec<u64>, ms: u64) {
        let i = (ms / 100) as usize;
        if v.len() <= i {
            v.resize(i + 1, 0);
        }
        v[i] += 1;
    }

    fn per_second(v: &[u64], from_ms: u64, to_ms: u64) -> f64 {
        let total: u64 =
            v.iter().skip((from_ms / 100) as usize).take(((to_ms - from_ms) / 100) as usize).sum();
        total as f64 * 1_000.0 / (to_ms - from_ms) as f64
    }

    /// Requests answered within their timeout per second, of those that arrived in [from, to) ms.
    pub fn answered_per_second(&self, from_ms: u64, to_ms: u64) -> f64 {
        Self::per_second(&self.answered, from_ms, to_ms)
    }

    /// Requests that timed out per second, of those that arrived in [from, to) ms.
    pub fn timed_out_per_second(&self, from_ms: u64, to_ms: u64) -> f64 {
        Self::per_second(&self.timed_out, from_ms, to_ms)
    }

    /// Requests refused per second, of those that arrived in [from, to) ms.
    pub fn refused_per_second(&self, from_ms: u64, to_ms: u64) -> f64 {
        Self::per_second(&self.refused, from_ms, to_ms)
    }

    /// The answered requests' latency at `per_mille`, in ms, of those that arrived in [from, to)
    /// ms; `None` if none was answered.
    pub fn percentile_ms(&self, from_ms: u64, to_ms: u64, per_mille: u64) -> Option<f64> {
        let mut us: Vec<u64> = self
            .latencies
            .iter()
            .filter(|(at, _)| (from_ms..to_ms).contains(at))
            .map(|&(_, us)| us)
            .collect();
        us.sort_unstable();
        let n = us.len() as u64;
        let rank = (n * per_mille).div_ceil(1_000).clamp(1, n.max(1));
        us.get(rank as usize - 1).map(|&us| us as f64 / 1_000.0)
    }

    /// Of the critical requests that arrived in [from, to) ms, the share answered within their
    /// timeout, in percent; and those timed out and refused, per second.
    pub fn critical(&self, from_ms: u64, to_ms: u64) -> (f64, f64, f64) {
        let [answered, timed_out, refused] =
            self.critical.each_ref().map(|v| Self::per_second(v, from_ms, to_ms));
        let all = answered + timed_out + refused;
        (if all > 0.0 { answered * 100.0 / all } else { 100.0 }, timed_out, refused)
    }

    /// Sheddable requests answered within their timeout per second, of those that arrived in
    /// [from, to) ms.
    pub fn sheddable_answered_per_second(&self, from_ms: u64, to_ms: u64) -> f64 {
        self.answered_per_second(from_ms, to_ms) - Self::per_second(&self.critical[0], from_ms, to_ms)
    }

    /// The share of the dependency's work spent on calls whose caller had given up, in percent.
    pub fn wasted_percent(&self) -> f64 {
        self.work_us.1 as f64 * 100.0 / self.work_us.0.max(1) as f64
    }

    /// How long after `end_ms` every request is answered again, in ms: the start of the first
    /// 100 ms from which no request times out or is refused until `until_ms`.
    pub fn back_to_normal_after_ms(&self, end_ms: u64, until_ms: u64) -> u64 {
        let bins = (end_ms / 100) as usize..(until_ms / 100) as usize;
        let bad = |i: usize| {
            self.timed_out.get(i).copied().unwrap_or(0) + self.refused.get(i).copied().unwrap_or(0) > 0
        };
        bins.clone().rev().find(|&i| bad(i)).map_or(0, |i| (i as u64 + 1) * 100 - end_ms)
    }

    /// Answered requests per second, per 100 ms of arrival, for a plot.
    pub fn answered_points(&self) -> Vec<(f64, f64)> {
        self.answered.iter().enumerate().map(|(i, &n)| (i as f64 / 10.0, n as f64 * 10.0)).collect()
    }

    /// The bulkhead's limit at the end of each 100 ms, for a plot.
    pub fn limit_points(&self) -> Vec<(f64, f64)> {
        self.limit.iter().enumerate().map(|(i, &n)| ((i + 1) as f64 / 10.0, f64::from(n))).collect()
    }
}

/// One attempt of at most 300 ms.
const POLICY: RetryPolicy<HZ> =
    valid(RetryPolicy::single_attempt().attempt_timeout(D::from_millis(TIMEOUT_MS)).build());

/// The caller's timeout, as the adapters report one.
#[derive(Debug, Clone, Copy)]
struct TimedOut;

impl relent_core::Classify<HZ> for TimedOut {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

/// What happens at an instant, ordered so that the agenda can hold it directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The `k`-th request arrives.
    Arrive(u64),
    /// The dependency answers request `k`, after serving it for this many µs.
    Answer(usize, u64),
    /// Request `k`'s attempt times out.
    Timeout(usize),
    /// The end of a 100 ms bin: read the limit.
    Sample,
}

/// A request's operation, and the attempt it has out.
type Out<'a> = (Operation<'a, HZ, TimedOut>, Attempt<HZ>);

/// Runs one scenario.
pub fn run(s: &Scenario) -> Outcome {
    let config = s.bulkhead.config(s.reserve);
    let mut dep: Dependency<HZ, 10> = Dependency::new(&config, T::from_ticks(0)).expect("a valid dependency");
    let mut rng = seeded(s.seed);
    let read = Context::new(D::from_secs(2), ReplaySafety::replayable_read(D::from_secs(60)));
    // Each request's arrival (ms), whether it is critical, and its operation with the attempt it
    // has out.
    let mut requests: Vec<(u64, bool, Option<Out<'_>>)> = Vec::new();
    // When each worker is next free, in µs.
    let mut workers: BinaryHeap<Reverse<u64>> = (0..s.workers).map(|_| Reverse(0)).collect();
    let mut agenda = Agenda::new();
    let total = s.rate * s.duration_ms / 1_000;
    agenda.push(0, Event::Arrive(0));
    agenda.push(100_000, Event::Sample);
    let mut out = Outcome::default();
    while let Some((now, event)) = agenda.pop() {
        let at = T::from_ticks(now);
        match event {
            Event::Arrive(k) => {
                if k + 1 < total {
                    agenda.push((k + 1) * 1_000_000 / s.rate, Event::Arrive(k + 1));
                }
                let arrived = now / 1_000;
                let critical = k % s.critical_one_in.max(1) == 0;
                let criticality = if critical { Criticality::Critical } else { Criticality::Sheddable };
                let mut op = Operation::start(&POLICY, &config, read.criticality(criticality), at)
                    .expect("the read starts");
                match op.poll(at, &mut dep, &mut ()) {
                    Action::Dispatch(attempt) => {
                        // Served in arrival order by the first worker free.
                        let Reverse(free) = workers.pop().expect("a worker");
                        let start = free.max(now);
                        let service = s.service_us(start, &mut rng);
                        workers.push(Reverse(start + service));
                        let k = requests.len();
                        agenda.push(start + service, Event::Answer(k, service));
                        agenda.push(attempt.expires().as_ticks(), Event::Timeout(k));
                        requests.push((arrived, critical, Some((op, attempt))));
                    }
                    _ => {
                        Outcome::bin(&mut out.refused, arrived);
                        if critical {
                            Outcome::bin(&mut out.critical[2], arrived);
                        }
                    }
                }
            }
            Event::Answer(k, service) => {
                out.work_us.0 += service;
                let (arrived, critical, held) = &mut requests[k];
                match held.take() {
                    Some((mut op, attempt)) => {
                        op.on_success(attempt, at, &mut dep, &mut ());
                        Outcome::bin(&mut out.answered, *arrived);
                        if *critical {
                            Outcome::bin(&mut out.critical[0], *arrived);
                        }
                        out.latencies.push((*arrived, now - *arrived * 1_000));
                    }
                    None => out.work_us.1 += service,
                }
            }
            Event::Timeout(k) => {
                let (arrived, critical, held) = &mut requests[k];
                if let Some((mut op, attempt)) = held.take() {
                    op.on_failure(attempt, at, &mut dep, &mut rng, TimedOut, &mut ());
                    Outcome::bin(&mut out.timed_out, *arrived);
                    if *critical {
                        Outcome::bin(&mut out.critical[1], *arrived);
                    }
                }
            }
            Event::Sample => {
                out.limit.push(dep.bulkhead_limit(&config).unwrap_or(0));
                if now < s.duration_ms * 1_000 {
                    agenda.push(now + 100_000, Event::Sample);
                }
            }
        }
    }
    out
}
