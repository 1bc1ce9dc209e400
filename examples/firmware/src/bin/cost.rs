//! What relent-core's decisions cost on the board, in instructions, beside the loop firmware
//! writes by hand: the same paths as the host's `cargo bench -p relent-tests --bench decision`,
//! built as the uplinks firmware builds relent-core (32-bit ticks at 1 kHz, the breaker, cooldown
//! and duty cycle compiled in), with the uplinks' policy and breaker.
//!
//! Run on each board in QEMU: `cargo run --release --bin cost` (the lm3s6965evb, Cortex-M3) and
//! `cargo run --release --bin cost --target thumbv6m-none-eabi` (the micro:bit, Cortex-M0).
//!
//! How instructions are counted: QEMU's `-icount` (the runners in `.cargo/config.toml`) moves the
//! emulated clock by a fixed time for every instruction the core runs, so the clock's
//! milliseconds count instructions. Their rate depends on the shift and on the board's timer, so
//! the firmware first times a loop of a known count ([`CALIBRATION`]), and counts each path in
//! that loop's instructions a millisecond. The timer's own interrupt takes the same share of every
//! millisecond, the calibration's included, so it cancels. Deterministic: every run of one build
//! prints the same counts, whatever else the machine does. Instructions are not cycles: a
//! Cortex-M0 takes one to three cycles for most of them (a load or a store two, a taken branch
//! three).
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
use relent_core::{
    Action, BreakerConfig, Context, Dependency, DependencyConfig, Operation, ReplaySafety, RetryBudget,
    Ticks, Verdict,
};
use relent_embassy::{Duration, HZ, Instant};
use relent_firmware::POLICY;

/// The uplinks' link, with a budget that allows every retry (here every operation retries), so
/// that each run takes the same path; its window is still read and written on every call.
const LINK: DependencyConfig<HZ> = DependencyConfig::new(Duration::from_secs(60))
    .budget(match RetryBudget::ratio(100, 0) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    })
    .breaker(BreakerConfig::consecutive_failures(4, Duration::from_secs(20)));

/// Times each path runs.
const RUNS: u32 = 20_000;

/// The calibration's loop: cortex-m's `delay(CALIBRATION)` runs `subs` and `bne` `CALIBRATION + 1`
/// times, so 200,000 instructions a run, against which the few of the loop around it (about five)
/// are a few thousandths of a percent.
const CALIBRATION: u32 = 99_999;

/// Instructions a calibration run takes.
const CALIBRATION_INSTRUCTIONS: u64 = 2 * (CALIBRATION as u64 + 1);

/// Calibration runs: 20 million instructions.
const CALIBRATION_RUNS: u32 = 100;

/// An operation's deadline and its replay statement (the uplinks').
fn context() -> Context<HZ> {
    Context::new(
        Duration::from_secs(20),
        ReplaySafety::provider_idempotent_mutation(Duration::from_secs(3_600)),
    )
}

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

/// Milliseconds of the emulator's clock that `runs` calls of `path` take, and their attempts.
fn timed(runs: u32, mut path: impl FnMut() -> u8) -> (u64, u32) {
    let started = embassy_time::Instant::now();
    let mut attempts = 0u32;
    for _ in 0..runs {
        attempts += u32::from(path());
    }
    (started.elapsed().as_millis(), attempts)
}

/// Instructions a run, in tenths, of a path whose `RUNS` runs took `ms`, when the calibration's
/// took `calibration_ms`.
fn tenths(ms: u64, calibration_ms: u64) -> u64 {
    let per_ms_times_runs = CALIBRATION_INSTRUCTIONS * u64::from(CALIBRATION_RUNS) * 10;
    (ms * per_ms_times_runs + calibration_ms * u64::from(RUNS) / 2) / (calibration_ms * u64::from(RUNS))
}

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    relent_firmware::time::start();
    let mut rng: rand_xoshiro::Xoroshiro64Star = rand_core::SeedableRng::from_seed(*b"relent\x5e\xed");
    let mut clock: Ticks = 0;
    let Ok(mut dep) = Dependency::<HZ, 4, 0>::new(&LINK, Instant::from_ticks(0)) else {
        relent_firmware::exit(false);
    };
    let calibration = timed(CALIBRATION_RUNS, || {
        cortex_m::asm::delay(CALIBRATION);
        1
    });
    let hand = timed(RUNS, || hand_written(&mut rng, &mut clock));
    let success = timed(RUNS, || relent(&mut dep, &mut rng, &mut clock, false));
    let retried = timed(RUNS, || relent(&mut dep, &mut rng, &mut clock, true));
    // Every path made the attempts it is named for, every run: nothing was refused or cut short.
    let attempts_ok = hand.1 == 2 * RUNS && success.1 == RUNS && retried.1 == 2 * RUNS;
    // And the calibration took long enough to count by: a millisecond is a thousandth of it or
    // less, which needs `-icount` with a shift of 2 or more on these boards.
    let calibration_ok = calibration.0 >= 1_000;
    hprintln!(
        "cost: instructions a run ({} runs a path; {} ms of the emulator's clock for {} instructions of calibration)",
        RUNS,
        calibration.0,
        CALIBRATION_INSTRUCTIONS * u64::from(CALIBRATION_RUNS)
    );
    let [h, s, r] = [hand, success, retried].map(|(ms, _)| tenths(ms, calibration.0));
    for (name, t) in [("hand-written", h), ("success", s), ("fail, retry, succeed", r)] {
        hprintln!("path {}: {}.{} instructions", name, t / 10, t % 10);
    }
    hprintln!("fail, retry, succeed over hand-written: {}.{:02}x", r / h, (r % h) * 100 / h);
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
    if !calibration_ok {
        hprintln!(
            "cost: the calibration took {} ms, too few to count by: run with a larger -icount shift",
            calibration.0
        );
    }
    relent_firmware::exit(attempts_ok && calibration_ok);
}
