//! Counting instructions on the emulated boards, for the `cost` binaries: what relent-core's paths
//! (`cost`) and relent-embassy's (`cost-embassy`) take, beside what firmware writes without them,
//! and each beside backon's: relent-core's decision beside its backoff step (`cost-backon`),
//! relent-embassy's success beside its retry (`cost-backon-embassy`).
//!
//! How: QEMU's `-icount` (the runners in `.cargo/config.toml`) moves the emulated clock by a fixed
//! time for every instruction the core runs, so the clock's milliseconds count instructions. Their
//! rate depends on the shift and on the board's timer, so a binary first times a loop of a known
//! count ([`Calibration::run`]), and counts each path in that loop's instructions a millisecond.
//! The timer's own interrupt takes the same share of every millisecond, the calibration's included,
//! so it cancels. Deterministic: every run of one build prints the same counts, whatever else the
//! machine does. Instructions are not cycles: a Cortex-M0 takes one to three cycles for most of
//! them (a load or a store two, a taken branch three).
//!
//! Only a path that never waits can be counted so: a wait moves the emulated clock by its length.
//! The paths are separate binaries because the link-time optimiser inlines relent-core into a
//! binary's paths differently once relent-embassy calls it too: in one binary, the hand-written
//! loop measured 46.9 instructions rather than 40.0 and the core's retry 722.6 rather than 657.6.

use cortex_m_semihosting::hprintln;
use relent_core::{BreakerConfig, Context, DependencyConfig, ReplaySafety, RetryBudget};
use relent_embassy::{Duration, HZ};

/// Times each path runs.
pub const RUNS: u32 = 20_000;

/// The calibration's loop: cortex-m's `delay(CALIBRATION)` runs `subs` and `bne` `CALIBRATION + 1`
/// times, so 200,000 instructions a run, against which the few of the loop around it (about five)
/// are a few thousandths of a percent.
const CALIBRATION: u32 = 99_999;

/// Instructions a calibration run takes.
const CALIBRATION_INSTRUCTIONS: u64 = 2 * (CALIBRATION as u64 + 1);

/// Calibration runs: 20 million instructions.
const CALIBRATION_RUNS: u32 = 100;

/// The uplinks' link, with a budget that allows every retry (here every operation retries), so
/// that each run takes the same path; its window is still read and written on every call.
pub const LINK: DependencyConfig<HZ> = DependencyConfig::new(Duration::from_secs(60))
    .budget(match RetryBudget::ratio(100, 0) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    })
    .breaker(BreakerConfig::consecutive_failures(4, Duration::from_secs(20)));

/// An operation's deadline and its replay statement (the uplinks').
pub fn context() -> Context<HZ> {
    Context::new(
        Duration::from_secs(20),
        ReplaySafety::provider_idempotent_mutation(Duration::from_secs(3_600)),
    )
}

/// Milliseconds of the emulator's clock that `runs` calls of `path` take, and their attempts.
/// Inlined, as it was when each binary had its own: the loop around a path is part of its count.
#[inline(always)]
pub fn timed(runs: u32, mut path: impl FnMut() -> u8) -> (u64, u32) {
    let started = embassy_time::Instant::now();
    let mut attempts = 0u32;
    for _ in 0..runs {
        attempts += u32::from(path());
    }
    (started.elapsed().as_millis(), attempts)
}

/// [`timed`] for a path that is a future, awaited `runs` times: the path is an expression, so that
/// it may borrow what the loop around it holds (a generator). Each future must be ready at its
/// first poll, or the count includes the time it waited.
#[macro_export]
macro_rules! timed_async {
    ($runs:expr, $path:expr) => {{
        let started = embassy_time::Instant::now();
        let mut attempts = 0u32;
        for _ in 0..$runs {
            attempts += u32::from($path.await);
        }
        (started.elapsed().as_millis(), attempts)
    }};
}

/// Prints a count given in tenths of an instruction: `name: 12.3 instructions`.
pub fn print_tenths(name: &str, tenths: u64) {
    hprintln!("{}: {}.{} instructions", name, tenths / 10, tenths % 10);
}

/// Prints `over / under` to the hundredth, rounded down: `name: 0.44x`.
pub fn print_ratio(name: &str, over: u64, under: u64) {
    let hundredths = over * 100 / under.max(1);
    hprintln!("{}: {}.{:02}x", name, hundredths / 100, hundredths % 100);
}

/// How long the calibration's loop took on the emulator's clock.
pub struct Calibration {
    ms: u64,
}

impl Calibration {
    /// Times the calibration's loop, 20 million instructions.
    pub fn run() -> Self {
        let (ms, _) = timed(CALIBRATION_RUNS, || {
            cortex_m::asm::delay(CALIBRATION);
            1
        });
        Calibration { ms }
    }

    /// Whether it took long enough to count by: a millisecond is a thousandth of it or less, which
    /// needs `-icount` with a shift of 2 or more on these boards. Says so when not.
    pub fn ok(&self) -> bool {
        if self.ms < 1_000 {
            hprintln!(
                "cost: the calibration took {} ms, too few to count by: run with a larger -icount shift",
                self.ms
            );
        }
        self.ms >= 1_000
    }

    /// Prints the heading of the counts.
    pub fn print_heading(&self) {
        hprintln!(
            "cost: instructions a run ({} runs a path; {} ms of the emulator's clock for {} instructions of calibration)",
            RUNS,
            self.ms,
            CALIBRATION_INSTRUCTIONS * u64::from(CALIBRATION_RUNS)
        );
    }

    /// Instructions a run, in tenths, of a path whose [`RUNS`] runs took `ms`.
    pub fn tenths(&self, ms: u64) -> u64 {
        let per_ms_times_runs = CALIBRATION_INSTRUCTIONS * u64::from(CALIBRATION_RUNS) * 10;
        let runs_ms = self.ms.max(1) * u64::from(RUNS);
        (ms * per_ms_times_runs + runs_ms / 2) / runs_ms
    }

    /// Prints each path's count, `(name, ms)`, and returns them in tenths of an instruction.
    pub fn print_paths<const N: usize>(&self, paths: [(&str, u64); N]) -> [u64; N] {
        paths.map(|(name, ms)| {
            let t = self.tenths(ms);
            hprintln!("path {}: {}.{} instructions", name, t / 10, t % 10);
            t
        })
    }
}
