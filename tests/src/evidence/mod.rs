//! Evidence for the README, computed by relent-core's own code: simulations in which every retry,
//! delay and refusal is decided by the real policy, operation and dependency objects, never by a
//! re-implementation of their formulas. `cargo run --release -p relent-tests --bin evidence`
//! writes the tables and plots; `tests/tests/evidence.rs` checks the qualitative claims on reduced
//! runs in CI.

pub mod aws;
pub mod hedging;
pub mod overload;
pub mod plot;

/// The simulations' clock: microseconds, so that a 5 ms call and a 100 ms backoff are exact.
const HZ: u64 = 1_000_000;
/// A duration on the simulations' clock.
type D = relent_core::Duration<HZ>;
/// An instant on the simulations' clock.
type T = relent_core::Instant<HZ>;
