//! relent-tokio beside the crates users would pick instead (backon, tower's `Retry` with a
//! `TpsBudget`, each with and without an attempt timeout), and the bare call, on a tokio runtime
//! the caller builds. One definition of the contenders for two configurations:
//! - relent-tests' `alternatives` bench runs them on a paused clock (tokio's `test-util`), which the
//!   retry path's 100 ms backoff needs;
//! - this crate's own `production` bench runs the paths that never sleep on the real clock, built
//!   as a service's release build is: without `test-util`, whose clock reads go through the
//!   runtime's handle and a lock.
//!
//! Both report ratios taken within rounds of the paired mode ([`paired`]), and both have the count
//! mode the evidence binary runs under callgrind ([`count`]). [`probes`] are calls that each lean on
//! one part of a processor core, timed beside relent-core's decision by the alternatives bench's
//! states mode.

pub mod contenders;
pub mod layers;
pub mod paired;
pub mod probes;

pub use contenders::{Adapters, CONTEXT, Contender, PATHS, PATHS_ON_THE_REAL_CLOCK, Path, count};
