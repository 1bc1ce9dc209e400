//! Alarms beside telemetry on a radio link's duty cycle, with relent-core's own objects: how long an
//! alarm waits for airtime when telemetry has used the hour's, with and without a critical reserve.
//!
//! A discrete-event simulation on a virtual clock in microseconds. A LoRaWAN-like device may be on
//! air 1 % of any hour (36 s); each frame costs 1.2 s. Telemetry is a frame a minute, twice what
//! the duty cycle allows, stated sheddable: a reading whose frame cannot go now is dropped (the
//! next one comes in a minute). Alarms come at seeded random times, about one every 37 minutes,
//! critical: an alarm whose frame cannot go now is sent again when the duty cycle says airtime is
//! free (its completion's `not_before`), until it goes. Each uplink is one attempt
//! (`RetryPolicy::single_attempt`); a frame that goes is on air for its airtime, then acknowledged.

use rand_core::RngCore;
use relent_core::{
    Action, Context, Criticality, Dependency, DependencyConfig, DutyCycle, Operation, ReplaySafety,
    RetryPolicy, Verdict,
};

use super::{Agenda, D, HZ, T};
use crate::rng::seeded;
use crate::transcript::valid;

/// One scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    /// How long the device runs, in seconds.
    pub duration_s: u64,
    /// The dependency's critical reserve, in percent, if any.
    pub reserve: Option<u8>,
    /// Seed of the alarms' times.
    pub seed: u64,
}

impl Scenario {
    /// A day, with or without a reserve.
    pub fn day(reserve: Option<u8>) -> Self {
        Self { duration_s: 24 * 3_600, reserve, seed: 1 }
    }
}

/// A frame's time on air, in µs.
const AIRTIME_US: u64 = 1_200_000;
/// A telemetry reading every minute.
const TELEMETRY_EVERY_US: u64 = 60_000_000;
/// An alarm every 37 minutes on average (uniformly from 1 to 73 minutes apart).
const ALARM_GAP_US: (u64, u64) = (60_000_000, 73 * 60_000_000);

/// What the device saw.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Each alarm's wait from its raising to its frame going out, in µs.
    pub alarm_waits_us: Vec<u64>,
    /// Telemetry readings sent, and dropped for want of airtime.
    pub telemetry: (u64, u64),
}

impl Outcome {
    /// The alarms' wait at `per_mille`, in seconds.
    pub fn alarm_wait_s(&self, per_mille: u64) -> f64 {
        let mut waits = self.alarm_waits_us.clone();
        waits.sort_unstable();
        let n = waits.len() as u64;
        let rank = (n * per_mille).div_ceil(1_000).clamp(1, n.max(1));
        waits.get(rank as usize - 1).map_or(0.0, |&us| us as f64 / 1e6)
    }

    /// The share of the alarms that went at once, in percent.
    pub fn alarms_at_once_percent(&self) -> f64 {
        let at_once = self.alarm_waits_us.iter().filter(|&&w| w == 0).count();
        at_once as f64 * 100.0 / self.alarm_waits_us.len().max(1) as f64
    }
}

/// One attempt per uplink.
const ONCE: RetryPolicy<HZ> = valid(RetryPolicy::single_attempt().build());

/// The caller's error type: nothing fails here but for want of airtime, which the core decides.
#[derive(Debug, Clone, Copy)]
struct Never;

impl relent_core::Classify<HZ> for Never {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::NotRetryable
    }
}

/// What happens at an instant, ordered so that the agenda can hold it directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A telemetry reading to send.
    Telemetry,
    /// An alarm raised at this instant (µs) to send, or to send again.
    Alarm(u64),
    /// The next alarm is raised.
    Raise,
}

/// Runs one scenario.
pub fn run(s: &Scenario) -> Outcome {
    let window =
        DependencyConfig::new(D::from_secs(60)).duty_cycle(DutyCycle::per_mille(10, D::from_secs(3_600)));
    let config = s.reserve.map_or(window, |r| window.critical_reserve(r));
    // 64 entries: the 30 frames an hour allows, and room to spare, so no merge holds airtime longer.
    let mut dep: Dependency<HZ, 4, 64> =
        Dependency::new(&config, T::from_ticks(0)).expect("a valid dependency");
    let mut rng = seeded(s.seed);
    let mut agenda = Agenda::new();
    let end = s.duration_s * 1_000_000;
    agenda.push(0, Event::Telemetry);
    agenda.push(ALARM_GAP_US.0 + rng.next_u64() % (ALARM_GAP_US.1 - ALARM_GAP_US.0), Event::Raise);
    let mut out = Outcome::default();
    let context = |criticality| {
        Context::new(D::from_secs(30), ReplaySafety::provider_idempotent_mutation(D::from_secs(3_600)))
            .airtime(D::from_micros(AIRTIME_US))
            .criticality(criticality)
    };
    while let Some((now, event)) = agenda.pop() {
        let at = T::from_ticks(now);
        let criticality = match event {
            Event::Raise => {
                if now < end {
                    agenda.push(now, Event::Alarm(now));
                    let gap = ALARM_GAP_US.0 + rng.next_u64() % (ALARM_GAP_US.1 - ALARM_GAP_US.0);
                    agenda.push(now + gap, Event::Raise);
                }
                continue;
            }
            Event::Telemetry => {
                if now + TELEMETRY_EVERY_US < end {
                    agenda.push(now + TELEMETRY_EVERY_US, Event::Telemetry);
                }
                Criticality::Sheddable
            }
            Event::Alarm(_) => Criticality::Critical,
        };
        let mut op: Operation<'_, HZ, Never> =
            Operation::start(&ONCE, &config, context(criticality), at).expect("the uplink starts");
        match op.poll(at, &mut dep, &mut ()) {
            Action::Dispatch(attempt) => {
                op.on_success(attempt, T::from_ticks(now + AIRTIME_US), &mut dep, &mut ());
                match event {
                    Event::Alarm(raised) => out.alarm_waits_us.push(now - raised),
                    _ => out.telemetry.0 += 1,
                }
            }
            Action::Done => {
                let done = op.take_completion().expect("done");
                match (event, done.not_before) {
                    // Sent again when the duty cycle frees its airtime.
                    (Event::Alarm(raised), Some(again)) => {
                        agenda.push(again.as_ticks(), Event::Alarm(raised))
                    }
                    (Event::Alarm(_), None) => panic!("an alarm refused with no instant: {done:?}"),
                    _ => out.telemetry.1 += 1,
                }
            }
            Action::Wait { .. } => panic!("a single attempt waits for nothing here"),
        }
    }
    out
}
