#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs, missing_debug_implementations)]
#![deny(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

// Host tests only: the test clock is a driver on std's locks.
#[cfg(all(feature = "test-clock", not(target_os = "none")))]
extern crate std;
#[cfg(all(feature = "test-clock", target_os = "none"))]
compile_error!(
    "relent-embassy's `test-clock` feature is for host tests: put it under [dev-dependencies], not \
     [dependencies]; on the board, the HAL's time driver is embassy-time's"
);

mod epoch;
mod error;
mod execute;
mod log;
mod rng;
mod shared;
#[cfg(all(feature = "test-clock", not(target_os = "none")))]
pub mod test_clock;

pub use error::Error;
pub use execute::{AttemptInfo, Bounded, Done};
pub use log::Log;
pub use rng::SharedRng;
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

/// Now, on embassy-time's clock, as the core's instant: embassy's ticks plus the history the core's
/// clock keeps before the boot (2^40 ticks), so that a state restored from a deep-sleep snapshot
/// keeps what happened before the boot; with 32-bit ticks (the `ticks-u32` feature), plus one step
/// of 2^30 ticks and less the base the core's clock last restarted at (see [`SharedDependency`]'s
/// docs), between 2^30 and 2^31. Give it to `Dependency::new` and `Dependency::restore`, never
/// embassy's ticks themselves.
pub fn now() -> Instant {
    epoch::Epoch::now().0
}

/// A core instant read since the core's clock last restarted (always, with 64-bit ticks) as an
/// embassy-time instant; one from before the boot is embassy's tick 0. With 32-bit ticks the clock
/// restarts every 2^30 ticks: convert an instant soon after reading it, as
/// [`SharedDependency::execute`] does with every instant it waits for. A completion's `not_before` has [`Done::retry_at`], which stays right however long it is kept.
pub fn to_embassy(t: Instant) -> embassy_time::Instant {
    epoch::Epoch::now().1.to_embassy(t)
}
