//! Test support for Relent: a virtual clock that jumps to the next instant the core asks for,
//! scripted attempt outcomes, deterministic RNGs, and an observer that renders the core's events as
//! transcript lines, so a test can assert a whole run exactly.
//!
//! Nothing here re-implements a rule of the core: the harness only reports what the script says
//! each attempt did and records what the core decided.

pub mod evidence;
pub mod rng;
pub mod transcript;

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
