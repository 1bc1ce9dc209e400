//! What relent-embassy takes on the board, in instructions, for an operation whose attempt succeeds
//! at once, beside the one call firmware writes without it: `embassy_time::with_timeout` of the
//! attempt, under the uplinks' 2 s attempt timeout.
//!
//! Run on each board in QEMU: `cargo run --release --bin cost-embassy` (the lm3s6965evb,
//! Cortex-M3) and `cargo run --release --bin cost-embassy --target thumbv6m-none-eabi` (the
//! micro:bit, Cortex-M0). How instructions are counted: see `relent_firmware::count`; relent-core's
//! own paths are counted by `cost`.
//!
//! Paths:
//! - `embassy with_timeout`: the attempt under `with_timeout`: embassy's clock read, the timer
//!   made, the attempt polled once.
//! - `relent-embassy success`: `SharedDependency::execute` of the same attempt, with the uplinks'
//!   policy and link (breaker, ratio budget): the dependency's lock (a critical section), the
//!   core's operation (start, admission, success, completion; `cost`'s `success` path), embassy's
//!   clock read before and after the attempt, the attempt's expiry, and the `Done` it returns.
//!
//! A retry waits, which this way of counting cannot (the wait moves the emulator's clock): the
//! decision itself is `cost`'s.
#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m_semihosting::hprintln;
use embassy_executor::Spawner;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use rand_core::RngCore;
use relent_core::{Dependency, Verdict};
use relent_embassy::{HZ, SharedDependency};
use relent_firmware::POLICY;
use relent_firmware::count::{Calibration, LINK, RUNS, context};
use relent_firmware::timed_async;

/// One attempt that succeeds at once, under the policy's 2 s timeout, as firmware writes it
/// without Relent. Returns the attempts made.
async fn with_timeout() -> u8 {
    let attempt = async { Ok::<u8, Verdict<HZ>>(black_box(1)) };
    match embassy_time::with_timeout(embassy_time::Duration::from_secs(2), attempt).await {
        Ok(Ok(_)) => 1,
        _ => 0,
    }
}

/// The same attempt through relent-embassy. Returns the attempts dispatched, 0 if it did not
/// succeed.
async fn relent(link: &SharedDependency<'_, CriticalSectionRawMutex, 4>, rng: &mut impl RngCore) -> u8 {
    let done = link.execute(&POLICY, context(), rng, |_| async { Ok::<u8, Verdict<HZ>>(black_box(1)) }).await;
    match done {
        Ok(done) if done.value.is_some() => done.completion.summary.dispatched,
        _ => 0,
    }
}

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    relent_firmware::time::start();
    let mut rng: rand_xoshiro::Xoroshiro64Star = rand_core::SeedableRng::from_seed(*b"relent\x5e\xed");
    let Ok(state) = Dependency::<HZ, 4, 0>::new(&LINK, relent_embassy::now()) else {
        relent_firmware::exit(false);
    };
    let link = SharedDependency::<CriticalSectionRawMutex, 4>::new(&LINK, state);
    let calibration = Calibration::run();
    let bare = timed_async!(RUNS, with_timeout());
    let relent = timed_async!(RUNS, relent(&link, &mut rng));
    // Every run made its one attempt, and it succeeded.
    let attempts_ok = bare.1 == RUNS && relent.1 == RUNS;
    calibration.print_heading();
    let [b, r] =
        calibration.print_paths([("embassy with_timeout", bare.0), ("relent-embassy success", relent.0)]);
    let added = r.saturating_sub(b);
    hprintln!("relent-embassy over with_timeout: {}.{} instructions", added / 10, added % 10);
    if !attempts_ok {
        hprintln!(
            "cost: a path did not make its attempts (with_timeout {}, relent-embassy {}; expected {} each)",
            bare.1,
            relent.1,
            RUNS
        );
    }
    let calibration_ok = calibration.ok();
    relent_firmware::exit(attempts_ok && calibration_ok);
}
