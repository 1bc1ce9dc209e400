//! Uplinks over a flaky modem link, through relent-embassy: retries with full jitter, a retry
//! budget, a circuit breaker and a cooldown, on embassy's executor and a SysTick time driver.
//! One line per uplink, then a summary; exit code 0 when every uplink ended in a known state.
#![no_std]
#![no_main]

use cortex_m_semihosting::hprintln;
use embassy_executor::Spawner;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::{Instant, Timer};
use relent_core::{
    BreakerConfig, Classify, Context, Dependency, DependencyConfig, Disposition, ReplaySafety, RetryBudget,
    RetryPolicy, Verdict,
};
use relent_embassy::{Duration, HZ, SharedDependency};
use relent_firmware::link::{Link, LinkError};
use relent_firmware::{GAP_S, UPLINKS};

/// The link's failures, as Relent should treat them.
struct Uplink(LinkError);

impl Classify<HZ> for Uplink {
    fn classify(&self) -> Verdict<HZ> {
        match self.0 {
            LinkError::NoAck => Verdict::Retryable,
            LinkError::Busy(s) => Verdict::RetryableAfter(Duration::from_secs(s)),
        }
    }
}

/// 4 attempts, 500 ms doubling to 8 s with full jitter, 2 s per attempt.
const POLICY: RetryPolicy<HZ> =
    match RetryPolicy::exponential(4, Duration::from_millis(500), Duration::from_secs(8))
        .attempt_timeout(Duration::from_secs(2))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };

/// The link as a dependency: retries at most 25 % of transmissions per minute (plus 4), the circuit
/// opens after 4 failures in a row for 20 s, and a "busy" pauses every uplink for as long as the
/// network asks, up to 2 minutes.
const LINK: DependencyConfig<HZ> = DependencyConfig::new(Duration::from_secs(60))
    .budget(match RetryBudget::ratio(25, 4) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    })
    .breaker(BreakerConfig::consecutive_failures(4, Duration::from_secs(20)))
    .cooldown(Duration::from_secs(120));

/// The link's shared state, in a static: 4 buckets of 15 s.
static LINK_STATE: SharedDependency<'static, CriticalSectionRawMutex, 4> =
    match Dependency::new(&LINK, relent_embassy::Instant::from_ticks(0)) {
        Ok(state) => SharedDependency::new(&LINK, state),
        Err(e) => panic!("{}", e.message()),
    };

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    let Some(core) = cortex_m::Peripherals::take() else { relent_firmware::exit(false) };
    relent_firmware::time::start(core.SYST);
    let link = Link::new();
    // The emulator has no RNG, so the example seeds from a constant to repeat itself. Real firmware
    // seeds from its hardware RNG or a unique device id: a fleet sharing one seed retries in step.
    let mut rng: rand_xoshiro::Xoshiro128PlusPlus = rand_core::SeedableRng::seed_from_u64(0x5eed);
    let (mut delivered, mut deferred, mut rejected, mut failed) = (0u32, 0u32, 0u32, 0u32);
    for n in 0..UPLINKS {
        let frame = n.to_le_bytes();
        // The network server deduplicates frames by sequence number: a repeat is harmless.
        let safety = ReplaySafety::provider_idempotent_mutation(Duration::from_secs(3_600));
        let context = Context::new(Duration::from_secs(20), safety).id(u64::from(n));
        let at = Instant::now().as_millis();
        let radio = &link;
        let result = LINK_STATE
            .execute(&POLICY, context, &mut rng, |_attempt| async move {
                radio.send(&frame).await.map_err(Uplink)
            })
            .await;
        let Ok(done) = result else { relent_firmware::exit(false) };
        let c = &done.completion;
        let code = c.problem.map_or("", |p| p.as_str());
        let (attempts, waited) = (c.summary.dispatched, c.summary.waited.as_ticks());
        match c.disposition {
            Disposition::Succeeded => delivered += 1,
            Disposition::Deferred => deferred += 1,
            Disposition::Rejected => rejected += 1,
            Disposition::Failed => failed += 1,
        }
        let again =
            c.not_before.map_or(0, |t| t.as_ticks().saturating_sub(relent_embassy::now().as_ticks()) / 1_000);
        hprintln!(
            "uplink {:02} at {:>6} ms: {}{}{} | attempts {} | waited {} ms{}{}",
            n,
            at,
            c.disposition.as_str(),
            if code.is_empty() { "" } else { " " },
            code,
            attempts,
            waited,
            if again > 0 { " | try again in s: " } else { "" },
            Again(again)
        );
        Timer::after(embassy_time::Duration::from_secs(GAP_S)).await;
    }
    let total = delivered + deferred + rejected + failed;
    hprintln!(
        "summary: {} uplinks: delivered {}, deferred {}, rejected {}, failed {} | {} transmissions, {} while asked for silence",
        UPLINKS,
        delivered,
        deferred,
        rejected,
        failed,
        link.sent(),
        link.sent_in_silence()
    );
    relent_firmware::exit(total == UPLINKS);
}

/// Prints a number of seconds, or nothing for zero.
struct Again(u64);

impl core::fmt::Display for Again {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0 > 0 { write!(f, "{}", self.0) } else { Ok(()) }
    }
}
