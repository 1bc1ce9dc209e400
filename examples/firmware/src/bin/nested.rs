//! An uplink whose attempt first attaches the modem, through a modem driver that retries its own AT
//! commands: two operations, one inside the other's attempt, on embassy's executor and the board's
//! 1 kHz time driver. Seed 000's rule is that exactly one layer retries ("Where the Retry Lives"):
//! - the driver's operation is bounded by the uplink's attempt (`AttemptInfo::bound`), so it ends
//!   on its own by that attempt's expiry, and its `Error` (`Done::into_result`) tells the uplink
//!   not to retry what it already retried: 3 AT commands to a modem that hangs, where an unbounded
//!   driver, dropped mid-retry by the uplink's timeout, is started again for 9;
//! - a "busy, retry in 5 s" beyond the driver's patience is handed up, and the uplink, which has
//!   more, waits it to the tick.
//!
//! One line per scenario, then a summary; exit code 0 when every count is the rule's.
#![no_std]
#![no_main]

use core::cell::Cell;

use cortex_m_semihosting::hprintln;
use embassy_executor::Spawner;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::{Instant, Timer};
use relent_core::{
    Classify, Context, Dependency, DependencyConfig, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_embassy::{Done, Duration, Error, HZ, SharedDependency, SharedRng};

/// What the modem answers an AT command.
#[derive(Debug, Clone, Copy)]
enum ModemError {
    /// "busy, retry in N s".
    Busy(u32),
}

impl Classify<HZ> for ModemError {
    fn classify(&self) -> Verdict<HZ> {
        match self {
            Self::Busy(s) => Verdict::retryable_after_secs(*s),
        }
    }
}

impl core::fmt::Display for ModemError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Busy(s) => write!(f, "busy, retry in {s} s"),
        }
    }
}

/// How the simulated modem behaves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// Never answers.
    Hangs,
    /// "busy, retry in 5 s" once, then answers.
    BusyOnce,
    /// Answers after 40 ms.
    Answers,
}

/// The simulated modem: counts its AT commands.
struct Modem {
    behaviour: Cell<Behaviour>,
    commands: Cell<u32>,
}

impl Modem {
    async fn attach(&self) -> Result<(), ModemError> {
        self.commands.set(self.commands.get() + 1);
        match self.behaviour.get() {
            Behaviour::Hangs => core::future::pending().await,
            Behaviour::BusyOnce => {
                self.behaviour.set(Behaviour::Answers);
                Err(ModemError::Busy(5))
            }
            Behaviour::Answers => {
                Timer::after_millis(40).await;
                Ok(())
            }
        }
    }
}

/// `attempts` of `timeout_ms` each, from 100 ms doubling, with full jitter, waits of at most
/// `max_delay_s`.
const fn policy(attempts: u8, timeout_ms: u32, max_delay_s: u32) -> RetryPolicy<HZ> {
    match RetryPolicy::exponential(
        attempts,
        Duration::from_millis(100),
        Duration::from_secs(max_delay_s as _),
    )
    .attempt_timeout(Duration::from_millis(timeout_ms as _))
    .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    }
}

/// The uplink: 3 attempts of 3 s, and the patience to wait up to 10 s between them.
const SEND: RetryPolicy<HZ> = policy(3, 3_000, 10);
/// The modem driver: 4 AT commands of 1 s, waits of at most 1 s.
const AT: RetryPolicy<HZ> = policy(4, 1_000, 1);

const CONFIG: DependencyConfig<HZ> =
    DependencyConfig::new(Duration::from_secs(60)).budget(match RetryBudget::ratio(25, 8) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    });

static UPLINK: SharedDependency<'static, CriticalSectionRawMutex, 4> =
    match Dependency::new(&CONFIG, relent_embassy::Instant::from_ticks(0)) {
        Ok(state) => SharedDependency::new(&CONFIG, state),
        Err(e) => panic!("{}", e.message()),
    };
static MODEM: SharedDependency<'static, CriticalSectionRawMutex, 4> =
    match Dependency::new(&CONFIG, relent_embassy::Instant::from_ticks(0)) {
        Ok(state) => SharedDependency::new(&CONFIG, state),
        Err(e) => panic!("{}", e.message()),
    };

fn read(seconds: u32) -> Context<HZ> {
    Context::new(Duration::from_secs(seconds as _), ReplaySafety::replayable_read(Duration::from_secs(3_600)))
}

/// The one PRNG both operations draw their jitter from, each draw under its own lock.
type Rng = SharedRng<CriticalSectionRawMutex, rand_xoshiro::Xoroshiro64Star>;

/// One uplink whose every attempt attaches the modem (its driver's operation bounded by the
/// attempt when `bounded`), then transmits for 100 ms.
async fn uplink(modem: &Modem, bounded: bool, rng: &Rng) -> Done<(), Error<ModemError>> {
    let mut uplink_rng = rng;
    let done = UPLINK.execute(&SEND, read(20), &mut uplink_rng, |attempt| async move {
        let mut modem_rng = rng;
        let attach = if bounded {
            MODEM.execute(&AT, attempt.bound(read(30)), &mut modem_rng, |_| modem.attach()).await
        } else {
            MODEM.execute(&AT, read(30), &mut modem_rng, |_| modem.attach()).await
        };
        attach?.into_result()?;
        Timer::after_millis(100).await;
        Ok(())
    });
    match done.await {
        Ok(done) => done,
        Err(e) => panic!("{}", e),
    }
}

/// Prints one scenario's line; returns the AT commands it made.
fn report(name: &str, modem: &Modem, started: Instant, done: &Done<(), Error<ModemError>>) -> u32 {
    let c = &done.completion;
    hprintln!(
        "{}: {} AT commands | uplink {} after {} attempt(s), waited {} ms, {} ms in all",
        name,
        modem.commands.get(),
        c.disposition,
        c.summary.dispatched,
        c.summary.waited.as_millis(),
        started.elapsed().as_millis()
    );
    if let Some(relent_embassy::AttemptError::Failed(driver)) = &c.last_failure {
        hprintln!("  the driver's last word: {}", driver);
    }
    modem.commands.replace(0)
}

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    relent_firmware::time::start();
    // Seeded from a constant to repeat itself; real firmware seeds from its hardware RNG.
    let rng: Rng = SharedRng::new(rand_core::SeedableRng::from_seed(*b"relent\x5e\xed"));
    let modem = Modem { behaviour: Cell::new(Behaviour::Hangs), commands: Cell::new(0) };

    let t = Instant::now();
    let done = uplink(&modem, true, &rng).await;
    let bounded = report("modem hangs, driver bounded by the attempt", &modem, t, &done);
    let bounded_attempts = done.completion.summary.dispatched;

    let t = Instant::now();
    let done = uplink(&modem, false, &rng).await;
    let unbounded = report("modem hangs, driver not bounded", &modem, t, &done);

    modem.behaviour.set(Behaviour::BusyOnce);
    let t = Instant::now();
    let done = uplink(&modem, true, &rng).await;
    report("modem busy for 5 s", &modem, t, &done);
    let busy_ok = done.completion.is_success() && done.completion.summary.waited.as_millis() == 5_000;

    hprintln!(
        "summary: a hanging modem got {} AT commands bounded ({} uplink attempt), {} not bounded; a busy modem's 5 s waited by the uplink: {}",
        bounded,
        bounded_attempts,
        unbounded,
        if busy_ok { "yes" } else { "no" }
    );
    relent_firmware::exit(bounded == 3 && bounded_attempts == 1 && unbounded == 9 && busy_ok);
}
