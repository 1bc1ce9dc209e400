//! Uplinks over a flaky modem link, through relent-embassy: retries with full jitter, a retry
//! budget, a circuit breaker and a cooldown, on embassy's executor and a 1 kHz time driver.
//! One line per uplink, then the RAM taken (statics and the peak stack) and a summary; exit code 0
//! when every uplink ended in a known state.
//!
//! The cooldown is the `cooldown` feature (on by default; size.sh builds without it to measure
//! retry, budget and breaker alone).
//!
//! With the `duty-cycle` feature (on by default), the link may be on air at most 2.5 % of any
//! minute: each attempt, retries included, costs the frame's 120 ms of airtime, and an uplink waits
//! for its turn (or is deferred with `duty_cycle_exceeded` when the turn is too far off).
//!
//! With the `quiet-profile` feature (on by default), the network asks for a quiet profile while it
//! is congested and for the normal one back later, each in a command that comes with an
//! acknowledgement; the firmware switches the running link's configuration
//! (`SharedDependency::reconfigure`), keeping what its state knows.
//!
//! With the `deep-sleep` feature (on by default), the device goes into deep sleep for 20 s after
//! uplink 12: it saves the link's Relent state as a snapshot in a retained RAM section (`.uninit`,
//! which cortex-m-rt leaves alone at boot and QEMU keeps across a system reset), prints the RAM
//! taken so far, resets, and restores it on waking, rebased by the time slept, under the profile
//! it was saved in. The emulator has no RTC, so the time slept and the simulated world's clock
//! travel in the same retained region.
#![no_std]
#![no_main]

use cortex_m_semihosting::hprintln;
use embassy_executor::Spawner;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::Timer;
use relent_core::{
    BreakerConfig, Classify, Context, Dependency, DependencyConfig, Disposition, ReplaySafety, RetryBudget,
    Verdict,
};
use relent_embassy::{Duration, HZ, SharedDependency};
use relent_firmware::link::{Link, LinkError, Profile};
use relent_firmware::{GAP_S, POLICY, UPLINKS};

/// The link's failures, as Relent should treat them.
struct Uplink(LinkError);

impl Classify<HZ> for Uplink {
    fn classify(&self) -> Verdict<HZ> {
        match self.0 {
            LinkError::NoAck => Verdict::Retryable,
            LinkError::Busy(s) => Verdict::retryable_after_secs(s),
        }
    }
}

/// The link as a dependency, in a profile: retries at most `percent` % of transmissions per minute
/// (plus `floor`), and the circuit opens after `failures` failures in a row for `open`. With the
/// `cooldown` feature a "busy" pauses every uplink for as long as the network asks, up to 2
/// minutes; with `duty-cycle`, the link is on air at most 2.5 % of any minute (1.5 s: twelve
/// frames).
const fn profile(percent: u8, floor: u32, failures: u32, open: Duration) -> DependencyConfig<HZ> {
    let budget = match RetryBudget::ratio(percent, floor) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    };
    let config = DependencyConfig::new(Duration::from_secs(60))
        .budget(budget)
        .breaker(BreakerConfig::consecutive_failures(failures, open));
    #[cfg(feature = "cooldown")]
    let config = config.cooldown(Duration::from_secs(120));
    #[cfg(feature = "duty-cycle")]
    let config = config.duty_cycle(relent_core::DutyCycle::per_mille(25, Duration::from_secs(60)));
    config
}

/// The normal profile: retries at most 25 % (plus 4), the circuit opens after 4 failures in a row
/// for 20 s.
const LINK: DependencyConfig<HZ> = profile(25, 4, 4, Duration::from_secs(20));

/// The quiet profile, which the network asks for while it is congested: retries at most 10 % (plus
/// 1), the circuit opens after 3 failures in a row for 20 s. Feature `quiet-profile`; in flash,
/// as the normal one is.
#[cfg(feature = "quiet-profile")]
const QUIET: DependencyConfig<HZ> = profile(10, 1, 3, Duration::from_secs(20));

// The quiet profile fits the link's state (its window's buckets, its airtime log), checked when the
// firmware builds, as the normal one is by `LINK_STATE`: `reconfigure` cannot refuse it at run
// time, and the firmware carries no error message for it.
#[cfg(feature = "quiet-profile")]
const _: () = match LinkState::new(&QUIET, relent_embassy::Instant::from_ticks(0)) {
    Ok(_) => (),
    Err(e) => panic!("{}", e.message()),
};

/// Transmissions the duty cycle remembers (12 bytes each); more are merged, conservatively.
#[cfg(feature = "duty-cycle")]
const AIRTIME_LOG: usize = 8;
#[cfg(not(feature = "duty-cycle"))]
const AIRTIME_LOG: usize = 0;

type LinkState = Dependency<HZ, 4, AIRTIME_LOG>;

/// The link's shared state, in a static: 4 buckets of 15 s, and the airtime log.
static LINK_STATE: SharedDependency<'static, CriticalSectionRawMutex, 4, AIRTIME_LOG> =
    match LinkState::new(&LINK, relent_embassy::Instant::from_ticks(0)) {
        Ok(state) => SharedDependency::new(&LINK, state),
        Err(e) => panic!("{}", e.message()),
    };

/// Where a boot starts: the link, the first uplink, the tallies so far, the profile in force.
struct Start {
    link: Link,
    first: u32,
    tally: [u32; 4],
    profile: Profile,
}

impl Start {
    /// A cold boot.
    fn cold() -> Self {
        Start { link: Link::new(), first: 0, tally: [0; 4], profile: Profile::Normal }
    }
}

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    relent_firmware::time::start();
    #[cfg(feature = "deep-sleep")]
    let start = sleep::wake();
    #[cfg(not(feature = "deep-sleep"))]
    let start = Start::cold();
    #[cfg_attr(not(feature = "quiet-profile"), allow(unused_mut))]
    let Start { link, first, tally, mut profile } = start;
    // The emulator has no RNG, so the example seeds from a constant to repeat itself. Real firmware
    // seeds from its hardware RNG or a unique device id (or hands Relent the hardware RNG itself): a
    // fleet sharing one seed retries in step. Xoroshiro64* (8 bytes of state, 32-bit words, as the
    // 32-bit ticks draw) is plenty for jitter: its code is the smallest measured here, 88 bytes less
    // than SplitMix64's 64-bit multiplies and 328 less than xoshiro128++, which also took 8 more
    // bytes of RAM. A constant seed of its own width needs no expansion.
    let mut rng: rand_xoshiro::Xoroshiro64Star = rand_core::SeedableRng::from_seed(*b"relent\x5e\xed");
    let [mut delivered, mut deferred, mut rejected, mut failed] = tally;
    for n in first..UPLINKS {
        let frame = n.to_le_bytes();
        // The network server deduplicates frames by sequence number: a repeat is harmless.
        let safety = ReplaySafety::provider_idempotent_mutation(Duration::from_secs(3_600));
        let context = Context::new(Duration::from_secs(20), safety)
            .id(u64::from(n))
            .airtime(Duration::from_millis(relent_firmware::link::AIRTIME_MS as _));
        let at = link.real_ms();
        let radio = &link;
        let result = LINK_STATE
            .execute(&POLICY, context, &mut rng, |_attempt| async move {
                radio.send(&frame).await.map_err(Uplink)
            })
            .await;
        let Ok(done) = result else { relent_firmware::exit(false) };
        let c = &done.completion;
        let code = c.problem.map_or("", |p| p.as_str());
        let (attempts, waited) = (u32::from(c.summary.dispatched), c.summary.waited.as_ticks());
        match c.disposition {
            Disposition::Succeeded => delivered += 1,
            Disposition::Deferred => deferred += 1,
            Disposition::Rejected => rejected += 1,
            Disposition::Failed => failed += 1,
        }
        // On embassy's clock: right however long `done` is kept (the core's clock may restart).
        let again = done
            .retry_at()
            .map_or(0, |t| t.saturating_duration_since(embassy_time::Instant::now()).as_secs());
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
        #[cfg(feature = "quiet-profile")]
        if let Some(asked) = link.command() {
            profile = switch(asked, n);
        }
        #[cfg(feature = "deep-sleep")]
        sleep::maybe_sleep(n, first, &link, [delivered, deferred, rejected, failed], profile);
        // Only a deep sleep needs to know the profile (its snapshot is restored under it).
        #[cfg(not(feature = "deep-sleep"))]
        let _ = profile;
        Timer::after(embassy_time::Duration::from_secs(GAP_S)).await;
    }
    let total = delivered + deferred + rejected + failed;
    relent_firmware::print_memory();
    hprintln!(
        "summary: {} uplinks: delivered {}, deferred {}, rejected {}, failed {} | {} transmissions, {} while asked for silence | busiest minute on air: {} ms",
        UPLINKS,
        delivered,
        deferred,
        rejected,
        failed,
        link.sent(),
        link.sent_in_silence(),
        link.busiest_minute_ms()
    );
    relent_firmware::exit(total == UPLINKS);
}

/// The configuration of a profile.
#[cfg_attr(not(any(feature = "quiet-profile", feature = "deep-sleep")), allow(dead_code))]
fn config(profile: Profile) -> &'static DependencyConfig<HZ> {
    match profile {
        Profile::Normal => &LINK,
        #[cfg(feature = "quiet-profile")]
        Profile::Quiet => &QUIET,
        // Never asked for: the firmware reads no command without the feature.
        #[cfg(not(feature = "quiet-profile"))]
        Profile::Quiet => &LINK,
    }
}

/// Runs the link in the profile the network asked for after uplink `n`, keeping what its state
/// knows (an open circuit, a cooldown, the airtime on record, the retries in the window), and
/// returns it.
#[cfg(feature = "quiet-profile")]
fn switch(to: Profile, n: u32) -> Profile {
    if LINK_STATE.reconfigure(config(to)).is_err() {
        hprintln!("profile {} refused", to.as_str());
        relent_firmware::exit(false);
    }
    hprintln!("profile {} from uplink {:02} on, as the network asked", to.as_str(), n + 1);
    to
}

/// Deep sleep: the snapshot and the run's progress in retained RAM across a reset.
#[cfg(feature = "deep-sleep")]
mod sleep {
    use core::mem::MaybeUninit;

    use cortex_m_semihosting::hprintln;
    use relent_embassy::Duration;
    use relent_firmware::link::{Link, Profile, World};

    use super::{LINK_STATE, LinkState, Start, config};

    /// What survives deep sleep: the Relent snapshot, where the run was, and (because the emulator
    /// has no RTC) the time slept and the simulated world. Plain integers only: any bit pattern is a
    /// valid value, so reading it uninitialised after a cold boot is sound, and the marker says
    /// whether it holds anything.
    #[repr(C)]
    struct Retained {
        marker: u32,
        next_uplink: u32,
        tally: [u32; 4],
        slept_ms: u32,
        world: World,
        /// 1 when the link was in the quiet profile: its snapshot is restored under the
        /// configuration it was saved under.
        quiet: u8,
        snapshot: [u8; LinkState::SNAPSHOT_LEN],
    }

    const MARKER: u32 = 0x524c_4e54; // "RLNT"

    #[unsafe(link_section = ".uninit.RELENT")]
    static mut RETAINED: MaybeUninit<Retained> = MaybeUninit::uninit();

    /// Deep sleep after this uplink, for this long.
    const SLEEP_AFTER: u32 = 12;
    const SLEEP_MS: u32 = 20_000;

    /// The retained region, used in place: a copy of it on the stack would be 416 bytes more of
    /// the task's frame.
    ///
    /// SAFETY: call it at most once per use, and let the reference go before the next call. The only
    /// task calls it twice, at boot and before the reset; every field is an integer or an array of
    /// them, so whatever bits the RAM holds after a cold boot are a valid value.
    unsafe fn retained() -> &'static mut Retained {
        unsafe { &mut *(&raw mut RETAINED).cast::<Retained>() }
    }

    /// At boot: restores the link's state after a deep sleep, or starts cold.
    pub(super) fn wake() -> Start {
        // SAFETY: the first of the two uses, at boot.
        let retained = unsafe { retained() };
        if retained.marker != MARKER {
            return Start::cold();
        }
        // Cleared so that a later crash or reset starts cold.
        retained.marker = 0;
        #[allow(clippy::useless_conversion)] // A conversion only when size.sh builds 64-bit ticks.
        let slept = Duration::from_millis(retained.slept_ms.into());
        let profile = if retained.quiet == 1 { Profile::Quiet } else { Profile::Normal };
        // Under the profile it was saved in, which becomes the link's in the same step.
        match LINK_STATE.restore(config(profile), &retained.snapshot, slept) {
            Ok(None) => {}
            Ok(Some(refused)) => hprintln!("the snapshot was refused ({}): starting fresh", refused.as_str()),
            // Each profile fits the link's state: checked when the firmware builds.
            Err(_) => relent_firmware::exit(false),
        }
        let (calls, cooldown) = LINK_STATE.lock(|s, now| (s.counts(now).calls, s.cooldown_until(now)));
        hprintln!(
            "woke after {} ms of deep sleep: link state restored from a {}-byte snapshot, profile {}, {} transmissions in the last minute; cooldown {}",
            retained.slept_ms,
            LinkState::SNAPSHOT_LEN,
            profile.as_str(),
            calls,
            if cooldown.is_some() { "still active" } else { "over" }
        );
        let (first, tally) = (retained.next_uplink, retained.tally);
        Start { link: Link::in_world(retained.world), first, tally, profile }
    }

    /// After uplink `n` of a run that started cold at `first`: sleep if it is time.
    pub(super) fn maybe_sleep(n: u32, first: u32, link: &Link, tally: [u32; 4], profile: Profile) {
        if n != SLEEP_AFTER || first > SLEEP_AFTER {
            return;
        }
        relent_firmware::print_memory();
        // SAFETY: the second use; `wake`'s reference ended with it.
        let retained = unsafe { retained() };
        if LINK_STATE.save(&mut retained.snapshot).is_err() {
            relent_firmware::exit(false);
        }
        retained.next_uplink = n + 1;
        retained.tally = tally;
        retained.slept_ms = SLEEP_MS;
        retained.world = link.world_after(SLEEP_MS.into());
        retained.quiet = u8::from(profile == Profile::Quiet);
        // Last, once the region is whole.
        retained.marker = MARKER;
        hprintln!("deep sleep for {} ms: snapshot kept in retained RAM, resetting", SLEEP_MS);
        cortex_m::peripheral::SCB::sys_reset();
    }
}

/// Prints a number of seconds, or nothing for zero.
struct Again(u64);

impl core::fmt::Display for Again {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0 > 0 { write!(f, "{}", self.0) } else { Ok(()) }
    }
}
