//! relent-core's decision after a failure beside backon's backoff step, on the board, in
//! instructions: issue 6's first goal (the whole decision, budget, breaker, deadline and jitter
//! included, no slower than backon's bare step) where nothing else shares the core. backon builds
//! for `no_std` (its `embassy-sleep` feature is its Embassy adapter), so it is what firmware that
//! does not use Relent would pick; its step computes in `f32`, which a Cortex-M0 or M3 has no unit
//! for.
//!
//! Run on each board in QEMU: `cargo run --release --bin cost-backon` (the lm3s6965evb, Cortex-M3)
//! and `cargo run --release --bin cost-backon --target thumbv6m-none-eabi` (the micro:bit,
//! Cortex-M0). How instructions are counted: see `relent_firmware::count`.
//!
//! Both sides with the uplinks' policy (4 attempts, 500 ms doubling to 8 s, full jitter), each
//! drawing from its own generator: relent-core from the uplinks' `Xoroshiro64Star`, backon from
//! the `fastrand` generator it builds in. relent-core is built as the uplinks firmware builds it
//! (32-bit ticks at 1 kHz; the breaker, cooldown and duty cycle compiled in), and its dependency
//! has rules like the host benchmark's (`cargo bench -p relent-tests --bench alternatives`): a
//! ratio budget that allows every retry, and the firmware's breaker, on consecutive failures, with
//! a count no run reaches; both are read and written on every call, so that each run takes the
//! same path. The paths, each run from nothing as the host's `decision_from_scratch`:
//! - `backon build`: backon's backoff built from its builder.
//! - `backon build and step`: the same, and its first step (the 500 ms and its jitter).
//! - `relent start and admit`: an operation started and its first attempt admitted (the breaker,
//!   the budget's window).
//! - `relent start, admit and fail`: the same, and the attempt's retryable failure with its
//!   decision (classification, the deadline, the replay statement, the breaker, the budget, the
//!   jittered backoff).
//!
//! The step and the decision are the differences of the two pairs. The binary is built as a
//! firmware that uses relent-core is, so that the compiler cannot specialise the measured code for
//! this one caller:
//! - each measured call is a function of its own (`decide`, `backon_step`), called with its state
//!   in memory, as an adapter's future holds it and as the host's count measures them
//!   (`on_failure` and `ExponentialBackoff::next` there);
//! - the policy and the rules reach relent-core through `black_box`, as a configuration the
//!   operation keeps a reference to does (folded as constants, they took the checks of the
//!   protections the rules leave out off the start and admission: 107.1 instructions on the M3
//!   against 132.0);
//! - an operation that succeeds runs once after the counts (`succeed`), as in any firmware: the
//!   dependency's report of an attempt's end (`Dependency::complete`) then has a caller besides the
//!   failure's, and the compiler keeps it a function of its own, as in the uplinks firmware,
//!   rather than a copy inlined into the decision for the failure's case alone. That copy took 67
//!   instructions off the decision on the M3 (206.0 against 273.0).
//!
//! Until 2026-12-04 the binary had none of these: the decision counted 209.0 on the M3, 308.0 on
//! the M0 and 213.3 on the M4F, and backon's step, inlined into its loop with its fields in
//! registers, 467.9, 1,113.2 and 208.3.
#![no_std]
#![no_main]

use core::hint::black_box;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use cortex_m_semihosting::hprintln;
use embassy_executor::Spawner;
use rand_core::RngCore;
use relent_core::{
    Action, Attempt, BreakerConfig, Dependency, DependencyConfig, Operation, RetryBudget, Ticks, Verdict,
};
use relent_embassy::{Duration, HZ, Instant};
use relent_firmware::POLICY;
use relent_firmware::count::{Calibration, RUNS, context, print_ratio, print_tenths, timed};

/// backon's equivalent of the uplinks' policy: 3 retries, 500 ms doubling to 8 s, with jitter.
const BACKON: ExponentialBuilder = ExponentialBuilder::new()
    .with_min_delay(core::time::Duration::from_millis(500))
    .with_max_delay(core::time::Duration::from_secs(8))
    .with_max_times(3)
    .with_jitter();

/// Every retry allowed by the budget, and a breaker that would trip after `u32::MAX` failures in a
/// row (every run here fails its first attempt, 40,000 of them).
const RULES: DependencyConfig<HZ> = DependencyConfig::new(Duration::from_secs(60))
    .budget(match RetryBudget::ratio(100, 0) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    })
    .breaker(BreakerConfig::consecutive_failures(u32::MAX, Duration::from_secs(20)));

/// An operation started at `clock` (a millisecond later each run) with its first attempt admitted,
/// and, when `fail`, that attempt's failure 1 ms later decided. Returns 1 when the path went as
/// named: the attempt dispatched, and after a failure a retry scheduled.
fn relent(dep: &mut Dependency<HZ, 4, 0>, rng: &mut impl RngCore, clock: &mut Ticks, fail: bool) -> u8 {
    *clock = clock.wrapping_add(1);
    let now = Instant::from_ticks(*clock);
    let Ok(mut op) =
        Operation::<HZ, Verdict<HZ>>::start(black_box(&POLICY), black_box(&RULES), context(), now)
    else {
        return 0;
    };
    let Action::Dispatch(attempt) = op.poll(now, dep, &mut ()) else {
        return 0;
    };
    if !fail {
        return u8::from(black_box(&op).attempt().is_some());
    }
    let then = Instant::from_ticks(now.as_ticks().wrapping_add(1));
    decide(&mut op, attempt, then, dep, rng);
    // Opaque, as a caller that keeps the operation is: every field the decision writes is written.
    u8::from(!black_box(&mut op).is_done())
}

/// An operation whose attempt succeeds, run once after the counts: as in any firmware, the
/// dependency's report of an attempt's end then has a caller besides the failure's.
#[inline(never)]
fn succeed(dep: &mut Dependency<HZ, 4, 0>, clock: &mut Ticks) -> bool {
    *clock = clock.wrapping_add(1);
    let now = Instant::from_ticks(*clock);
    let Ok(mut op) =
        Operation::<HZ, Verdict<HZ>>::start(black_box(&POLICY), black_box(&RULES), context(), now)
    else {
        return false;
    };
    let Action::Dispatch(attempt) = op.poll(now, dep, &mut ()) else {
        return false;
    };
    op.on_success(attempt, now, dep, &mut ());
    matches!(op.poll(now, dep, &mut ()), Action::Done)
}

/// relent-core's decision after the attempt's retryable failure: the measured call.
#[inline(never)]
fn decide(
    op: &mut Operation<'static, HZ, Verdict<HZ>>,
    attempt: Attempt<HZ>,
    then: Instant,
    dep: &mut Dependency<HZ, 4, 0>,
    rng: &mut impl RngCore,
) {
    op.on_failure(attempt, then, dep, rng, black_box(Verdict::Retryable), &mut ());
}

/// backon's step: the measured call on its side.
#[inline(never)]
fn backon_step(backoff: &mut ExponentialBackoff) -> Option<core::time::Duration> {
    backoff.next()
}

/// backon's backoff built, and when `step`, its first step taken. Returns 1 when the path went as
/// named (a step gave a delay).
fn backon(step: bool) -> u8 {
    let mut backoff = black_box(BACKON).build();
    if !step {
        black_box(&mut backoff);
        return 1;
    }
    let delay = black_box(backon_step(&mut backoff));
    // Opaque, as a caller that keeps the backoff is: its state after the step is written.
    black_box(&mut backoff);
    u8::from(delay.is_some())
}

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    relent_firmware::time::start();
    let mut rng: rand_xoshiro::Xoroshiro64Star = rand_core::SeedableRng::from_seed(*b"relent\x5e\xed");
    let mut clock: Ticks = 0;
    let Ok(mut dep) = Dependency::<HZ, 4, 0>::new(&RULES, Instant::from_ticks(0)) else {
        relent_firmware::exit(false);
    };
    let calibration = Calibration::run();
    let build = timed(RUNS, || backon(false));
    let step = timed(RUNS, || backon(true));
    let admit = timed(RUNS, || relent(&mut dep, &mut rng, &mut clock, false));
    let fail = timed(RUNS, || relent(&mut dep, &mut rng, &mut clock, true));
    let succeeded = succeed(&mut dep, &mut clock);
    let paths_ok = [build.1, step.1, admit.1, fail.1] == [RUNS; 4] && succeeded;
    calibration.print_heading();
    let [b, s, a, f] = calibration.print_paths([
        ("backon build", build.0),
        ("backon build and step", step.0),
        ("relent start and admit", admit.0),
        ("relent start, admit and fail", fail.0),
    ]);
    let (backon_step, decision) = (s.saturating_sub(b), f.saturating_sub(a));
    print_tenths("backon's step", backon_step);
    print_tenths("relent-core's decision after a failure", decision);
    print_ratio("decision over backon's step", decision, backon_step);
    print_ratio("from nothing: relent's start, admission and decision over backon's build and step", f, s);
    if !paths_ok {
        hprintln!(
            "cost: a path did not go as named in every run (backon build {}, build and step {}, relent start and admit {}, start, admit and fail {}; expected {} each)",
            build.1,
            step.1,
            admit.1,
            fail.1,
            RUNS
        );
    }
    let calibration_ok = calibration.ok();
    relent_firmware::exit(paths_ok && calibration_ok);
}
