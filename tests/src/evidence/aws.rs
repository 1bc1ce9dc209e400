//! Brooker's "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015), with relent-core's
//! policies drawing every delay.
//!
//! One database row is updated under optimistic concurrency: `n` clients start together; each
//! reads the row's version, then writes it conditionally; the write fails when another write
//! landed in between, and the client backs off and starts again, until it succeeds. Each network
//! hop takes |Normal(10 ms, 2 ms)|. The server applies writes in the order they arrive. Measured:
//! the write calls made in all, and the time until the last client succeeds.
//!
//! The delay before a client's k-th retry is `RetryPolicy::delay(k, previous, rng)`, the function
//! an `Operation` uses: base 5 ms, cap 2 s. (`Operation` itself stops at 64 attempts; these clients
//! retry until they succeed, as in the paper, so the simulation calls the policy directly.)

use rand_distr::{Distribution, Normal};
use relent_core::{Jitter, RetryPolicy};

use super::Agenda;
use crate::rng::seeded;

const HZ: u64 = 1_000_000;
type D = relent_core::Duration<HZ>;

/// The backoff algorithms the paper compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Retry at once.
    NoBackoff,
    /// Exponential backoff without jitter.
    Exponential,
    /// Exponential, full jitter.
    FullJitter,
    /// Exponential, equal jitter.
    EqualJitter,
    /// Decorrelated jitter.
    Decorrelated,
}

impl Algorithm {
    /// All five, in the paper's order.
    pub const ALL: [Self; 5] =
        [Self::NoBackoff, Self::Exponential, Self::FullJitter, Self::EqualJitter, Self::Decorrelated];

    /// The name in tables and plots.
    pub fn name(self) -> &'static str {
        match self {
            Self::NoBackoff => "no backoff",
            Self::Exponential => "exponential",
            Self::FullJitter => "full jitter",
            Self::EqualJitter => "equal jitter",
            Self::Decorrelated => "decorrelated jitter",
        }
    }

    /// The relent-core policy that draws this algorithm's delays.
    pub fn policy(self) -> RetryPolicy<HZ> {
        let (base, cap) = (D::from_millis(5), D::from_secs(2));
        let p = match self {
            Self::NoBackoff => RetryPolicy::constant(64, D::from_ticks(0)).jitter(Jitter::None),
            Self::Exponential => RetryPolicy::exponential(64, base, cap).jitter(Jitter::None),
            Self::FullJitter => RetryPolicy::exponential(64, base, cap).jitter(Jitter::Full),
            Self::EqualJitter => RetryPolicy::exponential(64, base, cap).jitter(Jitter::Equal),
            Self::Decorrelated => RetryPolicy::exponential(64, base, cap).jitter(Jitter::Decorrelated),
        };
        p.build().expect("a valid policy")
    }
}

/// One run's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// Write calls made by all clients.
    pub writes: u64,
    /// When the last client succeeded, in ms.
    pub completion_ms: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The client's read reaches the server.
    ReadArrives(usize),
    /// The read's answer reaches the client, which sends its write.
    ReadAnswered(usize),
    /// The write reaches the server.
    WriteArrives(usize),
    /// The write's answer reaches the client.
    WriteAnswered(usize, bool),
    /// The client starts over with a read.
    Start(usize),
}

/// Simulates `n` clients with `algorithm`, seeded by `seed`.
pub fn run(algorithm: Algorithm, n: usize, seed: u64) -> Run {
    let policy = algorithm.policy();
    let mut rng = seeded(seed);
    let hop = Normal::new(10_000.0_f64, 2_000.0).expect("a valid normal distribution");
    let delay = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| hop.sample(rng).abs().round() as u64;
    let mut version = 0u64;
    let mut read_version = vec![0u64; n];
    let mut failures = vec![0u32; n];
    let mut previous = vec![policy.base_delay(); n];
    let mut agenda = Agenda::new();
    for c in 0..n {
        agenda.push(0, Event::Start(c));
    }
    let (mut writes, mut last) = (0u64, 0u64);
    while let Some((now, event)) = agenda.pop() {
        match event {
            Event::Start(c) => agenda.push(now + delay(&mut rng), Event::ReadArrives(c)),
            Event::ReadArrives(c) => {
                read_version[c] = version;
                agenda.push(now + delay(&mut rng), Event::ReadAnswered(c));
            }
            Event::ReadAnswered(c) => agenda.push(now + delay(&mut rng), Event::WriteArrives(c)),
            Event::WriteArrives(c) => {
                writes += 1;
                let ok = read_version[c] == version;
                if ok {
                    version += 1;
                }
                agenda.push(now + delay(&mut rng), Event::WriteAnswered(c, ok));
            }
            Event::WriteAnswered(_, true) => last = last.max(now),
            Event::WriteAnswered(c, false) => {
                failures[c] += 1;
                let retry = u8::try_from(failures[c]).unwrap_or(u8::MAX);
                let wait = policy.delay(retry, previous[c], &mut rng);
                previous[c] = wait;
                agenda.push(now + wait.as_ticks(), Event::Start(c));
            }
        }
    }
    Run { writes, completion_ms: last as f64 / 1_000.0 }
}

/// Means over `runs` seeded runs: (mean write calls, mean completion time in ms).
pub fn mean(algorithm: Algorithm, n: usize, runs: u64) -> (f64, f64) {
    let (mut writes, mut time) = (0.0, 0.0);
    for seed in 0..runs {
        let r = run(algorithm, n, seed.wrapping_mul(0x9e37_79b9).wrapping_add(n as u64));
        writes += r.writes as f64;
        time += r.completion_ms;
    }
    (writes / runs as f64, time / runs as f64)
}
