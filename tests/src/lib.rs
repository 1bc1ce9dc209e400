//! Test support for Relent: a virtual clock that jumps to the next instant the core asks for,
//! scripted attempt outcomes, deterministic RNGs, and an observer that renders the core's events as
//! transcript lines, so a test can assert a whole run exactly.
//!
//! Nothing here re-implements a rule of the core: the harness only reports what the script says
//! each attempt did and records what the core decided.

pub mod evidence;
pub mod fate;
pub mod rng;
pub mod transcript;

/// How many cases a property test runs: `default`, or the number the `PROPTEST_CASES` environment
/// variable gives. proptest reads that variable into its default configuration only, which a
/// suite that sets its own count overrides, so without this a longer run outside CI
/// (`PROPTEST_CASES=20000 cargo test --release -p relent-tests`) would silently run the usual few.
///
/// # Panics
///
/// If `PROPTEST_CASES` is set to anything but a whole number, saying so.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").map_or(default, |v| {
        v.parse().unwrap_or_else(|_| panic!("PROPTEST_CASES must be a whole number of cases, not {v:?}"))
    })
}

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/coming-from.md")]
struct ComingFromDoctests;
