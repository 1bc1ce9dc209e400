#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

mod execute;
mod log;
mod shared;

pub use execute::{AttemptInfo, Done};
pub use log::Log;
pub use shared::SharedDependency;

/// The core, re-exported: policies, configurations, verdicts and completions are its types.
pub use relent_core as core;

/// The core's tick rate: embassy-time's own, so no conversion loses precision.
pub const HZ: u64 = embassy_time::TICK_HZ;

/// A duration in embassy-time's ticks.
pub type Duration = relent_core::Duration<HZ>;

/// An instant in embassy-time's ticks.
pub type Instant = relent_core::Instant<HZ>;

/// One attempt's failure at embassy's tick rate.
pub type AttemptError<E> = relent_core::AttemptError<HZ, E>;

/// Now, on embassy-time's clock, as the core's instant.
pub fn now() -> Instant {
    Instant::from_ticks(embassy_time::Instant::now().as_ticks())
}

/// A core instant as an embassy-time instant (the same ticks).
pub const fn to_embassy(t: Instant) -> embassy_time::Instant {
    embassy_time::Instant::from_ticks(t.as_ticks())
}
