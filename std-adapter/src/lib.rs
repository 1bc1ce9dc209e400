#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs, missing_debug_implementations)]

mod bound;
mod clock;
#[cfg(feature = "serde")]
pub mod config;
mod dependency;
mod error;
mod execute;
#[cfg(feature = "tonic")]
pub mod grpc;
mod hedge;
pub mod http;
mod inbound;
mod layer;
mod service;
mod timer;
mod trace;

pub use bound::attempt_expiry;
pub use clock::{Duration, HZ, Instant, std_duration, ticks};
pub use dependency::{AIRTIME_LOG, BUCKETS, Dependency, Gauges, State};
pub use error::{AttemptError, Detailed, Error};
pub use execute::AttemptInfo;
pub use hedge::IntoHedgeDelay;
pub use inbound::{Deadline, DeadlineLayer, Serving};
pub use layer::{
    HttpError, InvalidTimeout, RequestDeadline, Retry, RetryLayer, RetryReport, Scoped, SingleAttempt,
};
pub use service::{Pipeline, PipelineLayer, Plan};

/// The core, re-exported: policies, configurations, verdicts and completions are its types.
pub use relent_core as core;
