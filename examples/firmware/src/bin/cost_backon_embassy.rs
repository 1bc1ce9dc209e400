//! relent-embassy's success beside backon's retry with its Embassy sleeper, on the board, in
//! instructions: the firmware side of issue 6's adapter comparison (relent-tokio's is on the host,
//! against backon and tower). backon builds for `no_std`, and its `embassy-sleep` feature is its
//! Embassy adapter, so it is what firmware without Relent might pick.
//!
//! Run on each board in QEMU: `cargo run --release --bin cost-backon-embassy` (the lm3s6965evb,
//! Cortex-M3) and `cargo run --release --bin cost-backon-embassy --target thumbv6m-none-eabi` (the
//! micro:bit, Cortex-M0). How instructions are counted: see `relent_firmware::count`. A binary of
//! its own, not paths added to `cost-embassy`: the link-time optimiser lays out a binary's paths
//! anew with each path added, and `cost-embassy`'s counts are the README's.
//!
//! Every path runs one attempt that succeeds at once (a retry waits, which this way of counting
//! cannot), with the uplinks' policy on both sides (relent-embassy also with the uplinks' link:
//! breaker, ratio budget):
//! - `the attempt`: awaited alone.
//! - `embassy with_timeout`: under `embassy_time::with_timeout` of the policy's 2 s.
//! - `relent-embassy success`: `SharedDependency::execute`, which always bounds an attempt.
//! - `backon retry`: backon's `Retryable::retry` with `EmbassySleeper`, with no attempt timeout.
//! - `backon retry, each attempt under with_timeout`: the same, the attempt under `with_timeout`,
//!   like for like.
#![no_std]
#![no_main]

use core::hint::black_box;

use backon::Retryable;
use cortex_m_semihosting::hprintln;
use embassy_executor::Spawner;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use rand_core::RngCore;
use relent_core::{Dependency, Verdict};
use relent_embassy::{HZ, SharedDependency};
use relent_firmware::POLICY;
use relent_firmware::count::{Calibration, LINK, RUNS, context, print_ratio, print_tenths};
use relent_firmware::timed_async;

/// backon's equivalent of the uplinks' policy: 3 retries, 500 ms doubling to 8 s, with jitter.
const BACKON: backon::ExponentialBuilder = backon::ExponentialBuilder::new()
    .with_min_delay(core::time::Duration::from_millis(500))
    .with_max_delay(core::time::Duration::from_secs(8))
    .with_max_times(3)
    .with_jitter();

/// The attempt: ready at once, with a value the compiler cannot see.
async fn attempt() -> Result<u8, Verdict<HZ>> {
    Ok(black_box(1))
}

/// The attempt, under the policy's 2 s when `bounded`, a timeout being a retryable failure.
async fn bounded_attempt(bounded: bool) -> Result<u8, Verdict<HZ>> {
    if !bounded {
        return attempt().await;
    }
    embassy_time::with_timeout(embassy_time::Duration::from_secs(2), attempt())
        .await
        .unwrap_or(Err(Verdict::Retryable))
}

/// The attempt as firmware writes it without a retry library. Returns the attempts made.
async fn alone(bounded: bool) -> u8 {
    u8::from(bounded_attempt(bounded).await.is_ok())
}

/// The attempt through backon's retry. Returns the attempts made.
async fn backon(bounded: bool) -> u8 {
    let result = (|| bounded_attempt(bounded)).retry(BACKON).sleep(backon::EmbassySleeper).await;
    u8::from(result.is_ok())
}

/// The attempt through relent-embassy. Returns the attempts dispatched, 0 if it did not succeed.
async fn relent(link: &SharedDependency<'_, CriticalSectionRawMutex, 4>, rng: &mut impl RngCore) -> u8 {
    let done = link.execute(&POLICY, context(), rng, |_| attempt()).await;
    match done {
        Ok(done) if done.value.is_some() => done.completion.summary.dispatched,
        _ => 0,
    }
}

/// `over - under` in tenths, printed as instructions.
fn added(name: &str, over: u64, under: u64) -> u64 {
    let t = over.saturating_sub(under);
    print_tenths(name, t);
    t
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
    let bare = timed_async!(RUNS, alone(false));
    let timeout = timed_async!(RUNS, alone(true));
    let relent = timed_async!(RUNS, relent(&link, &mut rng));
    let retry = timed_async!(RUNS, backon(false));
    let bounded = timed_async!(RUNS, backon(true));
    // Every run made its one attempt, and it succeeded.
    let attempts_ok = [bare.1, timeout.1, relent.1, retry.1, bounded.1] == [RUNS; 5];
    calibration.print_heading();
    let [a, t, r, b, bt] = calibration.print_paths([
        ("the attempt", bare.0),
        ("embassy with_timeout", timeout.0),
        ("relent-embassy success", relent.0),
        ("backon retry", retry.0),
        ("backon retry, each attempt under with_timeout", bounded.0),
    ]);
    let relent_added = added("relent-embassy over with_timeout", r, t);
    let backon_added = added("backon retry over the attempt", b, a);
    let bounded_added = added("backon retry under with_timeout over with_timeout", bt, t);
    print_ratio("relent-embassy over backon's retry (what each adds)", relent_added, backon_added);
    print_ratio(
        "relent-embassy over backon's retry under with_timeout (what each adds)",
        relent_added,
        bounded_added,
    );
    if !attempts_ok {
        hprintln!(
            "cost: a path did not make its attempt (the attempt {}, with_timeout {}, relent-embassy {}, backon {}, backon under with_timeout {}; expected {} each)",
            bare.1,
            timeout.1,
            relent.1,
            retry.1,
            bounded.1,
            RUNS
        );
    }
    let calibration_ok = calibration.ok();
    relent_firmware::exit(attempts_ok && calibration_ok);
}
