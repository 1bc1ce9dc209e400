//! Evidence for the README, computed by relent-core's own code: simulations in which every retry,
//! delay and refusal is decided by the real policy, operation and dependency objects, never by a
//! re-implementation of their formulas. `cargo run --release -p relent-tests --bin evidence`
//! writes the tables and plots; `tests/tests/evidence.rs` checks the qualitative claims on reduced
//! runs in CI.

pub mod adaptive;
pub mod airtime;
pub mod aws;
pub mod hedging;
pub mod overload;
pub mod plot;

/// The events of a discrete-event simulation still to come, earliest first, and those at one
/// instant in the order they were added (so a run is deterministic).
struct Agenda<E> {
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64, E)>>,
    added: u64,
}

impl<E: Ord> Agenda<E> {
    fn new() -> Self {
        Self { heap: std::collections::BinaryHeap::new(), added: 0 }
    }

    /// Adds `event` at instant `at`.
    fn push(&mut self, at: u64, event: E) {
        self.heap.push(std::cmp::Reverse((at, self.added, event)));
        self.added += 1;
    }

    /// The next event, and its instant.
    fn pop(&mut self) -> Option<(u64, E)> {
        self.heap.pop().map(|std::cmp::Reverse((at, _, event))| (at, event))
    }
}

/// The simulations' clock: microseconds, so that a 5 ms call and a 100 ms backoff are exact.
const HZ: u64 = 1_000_000;
/// A duration on the simulations' clock.
type D = relent_core::Duration<HZ>;
/// An instant on the simulations' clock.
type T = relent_core::Instant<HZ>;
