//! What relent-core's decisions cost on the board, in instructions, beside the loop firmware
//! writes by hand: the same paths as the host's `cargo bench -p relent-tests --bench decision`,
//! built as the uplinks firmware builds relent-core (32-bit ticks at 1 kHz, the breaker, cooldown
//! and duty cycle compiled in), with the uplinks' policy and breaker.
//!
//! Run on each board in QEMU: `cargo run --release --bin cost` (the lm3s6965evb, Cortex-M3) and
//! `cargo run --release --bin cost --target thumbv6m-none-eabi` (the micro:bit, Cortex-M0).
//!
//! How instructions are counted: see `relent_firmware::count`. relent-embassy's own paths are
//! counted by `cost-embassy`, a binary of their own.
//!
//! Paths:
//! - `hand-written`: 3 attempts, the first fails, exponential backoff with full jitter drawn from
//!   the same generator, a deadline check, the second succeeds: the arithmetic alone, no rules.
//! - `success`: relent-core starts an operation, admits its attempt (breaker, budget), takes its
//!   success and ends it: what every uplink that gets through at once costs.
//! - `fail, retry, succeed`: the same, with a retryable failure first, its decision (the budget,
//!   the breaker, the deadline, the replay statement, the jittered backoff), the wait's end and
//!   the retry.
#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m_semihosting::hprintln;
use embassy_executor::Spawner;
use rand_core::RngCore;
use relent_core::{Action, Dependency, Operation, Ticks, Verdict};
use relent_embassy::{HZ, Instant};
use relent_firmware::POLICY;
use relent_firmware::count::{Calibration, LINK, RUNS, context, timed};

/// One operation through relent-core, its attempts answering 1 ms after their dispatch: the first
/// fails (retryable) when `fail_first`, the next succeeds. Returns the attempts dispatched.
fn relent(dep: &mut Dependency<HZ, 4, 0>, rng: &mut impl RngCore, clock: &mut Ticks, fail_first: bool) -> u8 {
    let mut now = Instant::from_ticks(*clock);
    let Ok(mut op) = Operation::<HZ, Verdict<HZ>>::start(&POLICY, &LINK, context(), now) else {
        return 0;
    };
    let mut failed = !fail_first;
    loop {
        match op.poll(now, dep, &mut ()) {
            Action::Dispatch(attempt) => {
                now = Instant::from_ticks(now.as_ticks().wrapping_add(1));
                if failed {
                    op.on_success(attempt, now, dep, &mut ());
                } else {
                    failed = true;
                    op.on_failure(attempt, now, dep, rng, black_box(Verdict::Retryable), &mut ());
                }
            }
            Action::Wait { until } => now = until,
            Action::Done => break,
        }
    }
    *clock = now.as_ticks();
    op.take_completion().map_or(0, |c| c.summary.dispatched)
}

/// The baseline: the policy's attempt limit, exponential backoff with full jitter, and the
/// deadline, written inline, with no budget, breaker, replay statement, classification or events.
fn hand_written(rng: &mut impl RngCore, clock: &mut Ticks) -> u8 {
    let deadline = clock.wrapping_add(20_000);
    let mut now = *clock;
    let mut attempts = 0u8;
    loop {
        attempts += 1;
        now = now.wrapping_add(1);
        let failed = black_box(attempts == 1);
        if !failed || attempts >= 3 {
            break;
        }
        let nominal: Ticks = (500 << (attempts - 1)).min(8_000);
        let delay = Ticks::from(rng.next_u32()) % (nominal + 1);
        if deadline.wrapping_sub(now) <= delay {
            break;
        }
        now = now.wrapping_add(delay);
    }
    *clock = now;
    attempts
}

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    relent_firmware::time::start();
    let mut rng: rand_xoshiro::Xoroshiro64Star = rand_core::SeedableRng::from_seed(*b"relent\x5e\xed");
    let mut clock: Ticks = 0;
    let Ok(mut dep) = Dependency::<HZ, 4, 0>::new(&LINK, Instant::from_ticks(0)) else {
        relent_firmware::exit(false);
    };
    let calibration = Calibration::run();
    let hand = timed(RUNS, || hand_written(&mut rng, &mut clock));
    let success = timed(RUNS, || relent(&mut dep, &mut rng, &mut clock, false));
    let retried = timed(RUNS, || relent(&mut dep, &mut rng, &mut clock, true));
    // Every path made the attempts it is named for, every run: nothing was refused or cut short.
    let attempts_ok = hand.1 == 2 * RUNS && success.1 == RUNS && retried.1 == 2 * RUNS;
    calibration.print_heading();
    let [h, _, r] = calibration.print_paths([
        ("hand-written", hand.0),
        ("success", success.0),
        ("fail, retry, succeed", retried.0),
    ]);
    hprintln!(
        "fail, retry, succeed over hand-written: {}.{:02}x",
        r / h.max(1),
        (r % h.max(1)) * 100 / h.max(1)
    );
    if !attempts_ok {
        hprintln!(
            "cost: a path did not make its attempts (hand-written {}, success {}, fail, retry, succeed {}; expected {}, {}, {})",
            hand.1,
            success.1,
            retried.1,
            2 * RUNS,
            RUNS,
            2 * RUNS
        );
    }
    let calibration_ok = calibration.ok();
    relent_firmware::exit(attempts_ok && calibration_ok);
}
