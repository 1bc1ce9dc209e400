#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod clock;
mod dependency;
mod error;
mod execute;
mod trace;

pub use clock::{Duration, HZ, Instant, std_duration, ticks};
pub use dependency::{BUCKETS, Dependency, State};
pub use error::{AttemptError, Detailed, Error};
pub use execute::AttemptInfo;

/// The core, re-exported: policies, configurations, verdicts and completions are its types.
pub use relent_core as core;
