#![doc = include_str!("../README.md")]
#![no_std]
// On docs.rs: each item a Cargo feature gates says which (see Cargo.toml's docs.rs metadata).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(missing_docs, missing_debug_implementations)]
#![deny(clippy::float_arithmetic, clippy::float_cmp)]
#![deny(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]
#![deny(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_possible_wrap)]
#![cfg_attr(
    not(test),
    deny(
        clippy::panic,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]
#![cfg_attr(test, allow(clippy::cast_possible_truncation))]

// Inlining: size on bare metal, speed on hosts. The functions of the decision after an attempt
// (the breaker's `on_outcome`, the budget's read, the window's fast path, the backoff draw and its
// uniform integer) carry `#[cfg_attr(not(target_os = "none"), inline(always))]`. On a host these
// and `Dependency::complete` are inlined into `on_success` and `on_failure`: seven calls fewer
// took `on_failure` from 369 to 248 instructions (callgrind on `cargo bench -p relent-tests
// --bench alternatives`'s `retry_decision/relent_core_on_failure`; 22 ns to 12-14 ns in criterion
// that day), and reading the window once instead of three times after a failure to 234. On bare
// metal (`target_os = "none"`: Cortex-M firmware, built for size) the compiler keeps choosing for
// the others, because forced copies there cost flash, which issue 5's budget counts to the byte.
// `Dependency::complete` alone is inlined on every target: each caller knows how its attempt
// ended, so each copy keeps that ending's work alone, which on bare metal is faster and, but for 8
// bytes on a Cortex-M3, smaller too (docs/firmware-size.md).
#[cfg(feature = "bulkhead-adaptive")]
mod adaptive;
mod breaker;
mod budget;
mod bulkhead;
mod classify;
mod completion;
mod cooldown;
#[cfg(feature = "criticality")]
mod criticality;
mod dependency;
mod duty;
mod error;
mod event;
#[cfg(feature = "hedge")]
mod hedge_delay;
mod jitter;
mod latency;
mod limiter;
mod mul;
mod operation;
mod packed;
mod policy;
mod safety;
mod snapshot;
#[cfg(feature = "throttle")]
mod throttle;
mod time;
mod window;

#[cfg(feature = "bulkhead-adaptive")]
pub use adaptive::AdaptiveLimit;
pub use breaker::{BreakerConfig, CircuitState, Trip};
pub use budget::{BudgetKind, RetryBudget};
pub use classify::{AttemptError, Classify, Ended, Judged, Verdict};
pub use completion::{Completion, Disposition, Outcome, Problem, Summary};
#[cfg(feature = "criticality")]
pub use criticality::Criticality;
pub use dependency::{Dependency, DependencyConfig};
pub use duty::DutyCycle;
pub use error::{ConfigError, StartError};
pub use event::{AfterFailure, DelaySource, Event, MAX_EVENTS_PER_CALL, Observer, OperationId};
#[cfg(feature = "hedge")]
pub use hedge_delay::HedgeDelay;
pub use jitter::Jitter;
pub use limiter::RateLimit;
#[cfg(feature = "hedge")]
pub use operation::HedgePlan;
pub use operation::{Action, Attempt, Context, Operation};
pub use policy::{Backoff, MAX_ATTEMPTS, RetryPolicy, RetryPolicyBuilder};
pub use safety::ReplaySafety;
pub use snapshot::{SNAPSHOT_VERSION, SnapshotError};
#[cfg(feature = "throttle")]
pub use throttle::ClientThrottle;
pub use time::{Duration, Instant, MAX_SPAN, Ticks};
pub use window::{CallWindow, Counts};

/// Re-exported so callers name the same `RngCore` the core takes: rand_core 0.9's, the one the
/// Embassy HALs' hardware RNGs implement. A rand 0.10 generator goes in through a newtype
/// (the workspace README, after the first example).
pub use rand_core;
