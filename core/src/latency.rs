//! The latency log: how long a dependency's attempts take, as a histogram that forgets, so that a
//! hedge can be sent at a percentile of the dependency's own latency and a dashboard can read it.
//!
//! Why: "The Tail at Scale" (Dean and Barroso, 2013) sends a hedge once the first copy "has been
//! outstanding for more than the 95th-percentile expected latency". A fixed delay is a guess of that
//! percentile made once, and the percentile moves: a delay set under it hedges far more than one
//! call in twenty, and one set above it hedges nothing. The dependency's state already sees every
//! attempt end, with how long it took, under its lock, so the log is kept there
//! ([`DependencyConfig::latency_samples`](crate::DependencyConfig::latency_samples)) and read with
//! [`Dependency::latency_percentile`](crate::Dependency::latency_percentile).
//!
//! The rules, and why:
//! - **Buckets four to an octave**: 0, 1, 2 and 3 ticks, then 4, 5, 6, 7, then 8–9, 10–11, 12–13,
//!   14–15, and so on up to 2³² ticks (71 minutes at 1 MHz; anything longer counts as that). A
//!   percentile is read as the largest value of its bucket: at most a quarter above the true value,
//!   never below it, so a hedge never goes sooner than the percentile asked for. 124 counts of 16
//!   bits, whatever the tick rate: integers only, no allocation, the same at 1 kHz and 1 MHz.
//! - **It forgets**: each attempt weighs 8 when it is recorded, and every `samples` attempts every
//!   weight is halved, so an attempt's weight halves every `samples` attempts after it. The
//!   percentile follows a dependency that slows down within about `samples` attempts, and what it
//!   did an hour ago fades rather than stopping at a cliff. (Halving counts of one attempt each
//!   would lose the rare slow ones first, the tail a percentile is read from; weights of 8 lose an
//!   eighth of one at most per halving.)
//! - **Every attempt that ends is recorded**, with how long it ran: a success, a failure, and an
//!   attempt abandoned with no outcome, as a time it took at least. The last matters for hedging:
//!   the copy that loses a hedge's race is abandoned when the other answers, after the hedge delay,
//!   and a log that left it out would see fewer slow attempts than there are and hedge sooner and
//!   sooner. Recorded as what it ran, it is still above the percentile, which is all the percentile
//!   needs of it.
//! - **A percentile needs one attempt above it**: the 95th needs 20 attempts' weight, the 99th 100.
//!   Before that there is none, and a learnt hedge uses its fallback or is not sent.
//!
//! Not in snapshots: a restored dependency learns again within `samples` attempts.

// Compiled in every build: without the feature, the dependency's state holds no log.
#![cfg_attr(not(feature = "latency"), allow(dead_code))]

use crate::time::Ticks;

/// Buckets in the log: four for 0 to 3 ticks, then four an octave up to 2³² ticks.
pub(crate) const BUCKETS: usize = 124;

/// What one attempt weighs when recorded (see the module doc).
const WEIGHT: u16 = 8;

/// The most attempts a log may weigh before halving: the weights then stay within 16 bits.
pub(crate) const MAX_SAMPLES: u16 = 4_000;
/// The fewest: fewer than 20 cannot give a 95th percentile between halvings.
pub(crate) const MIN_SAMPLES: u16 = 20;

/// The last bucket, for anything longer than 2³² ticks.
const LAST: usize = BUCKETS - 1;

/// The bucket of an attempt that took `ticks`.
fn bucket(ticks: u64) -> usize {
    let Ok(ticks) = u32::try_from(ticks) else { return LAST };
    if ticks < 4 {
        return usize::try_from(ticks).unwrap_or(LAST);
    }
    // 2..=31: the octave, and the two bits after its leading one.
    let octave = 31u32.saturating_sub(ticks.leading_zeros());
    let within = ticks.checked_shr(octave.saturating_sub(2)).unwrap_or(0) & 3;
    usize::try_from(octave.saturating_sub(1).saturating_mul(4).saturating_add(within)).unwrap_or(LAST)
}

/// The largest number of ticks bucket `i` holds.
fn largest(i: usize) -> u64 {
    let i = u64::try_from(i).unwrap_or(u64::MAX).min(u64::try_from(LAST).unwrap_or(0));
    if i < 4 {
        return i;
    }
    let octave = u32::try_from(i / 4).unwrap_or(0).saturating_add(1);
    let within = i % 4;
    5u64.saturating_add(within).checked_shl(octave.saturating_sub(2)).unwrap_or(u64::MAX).saturating_sub(1)
}

/// The log's state, in the dependency's (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct LatencyLog {
    weights: [u16; BUCKETS],
    /// Attempts recorded since the weights were last halved.
    since_halved: u16,
}

impl LatencyLog {
    pub(crate) const fn new() -> Self {
        Self { weights: [0; BUCKETS], since_halved: 0 }
    }

    /// Records an attempt that took `took`, in a log that halves every `samples` attempts.
    pub(crate) fn record(&mut self, took: Ticks, samples: u16) {
        if let Some(weight) = self.weights.get_mut(bucket(crate::time::wide(took))) {
            *weight = weight.saturating_add(WEIGHT);
        }
        self.since_halved = self.since_halved.saturating_add(1);
        if self.since_halved >= samples {
            for weight in &mut self.weights {
                *weight /= 2;
            }
            self.since_halved = 0;
        }
    }

    /// The `percent`th percentile (1 to 99) in ticks: the largest value of the bucket where it
    /// falls. `None` for a percent out of range, or until one attempt's weight lies above it.
    pub(crate) fn percentile(&self, percent: u8) -> Option<Ticks> {
        if !(1..=99).contains(&percent) {
            return None;
        }
        let total = self.weights.iter().fold(0u32, |sum, &w| sum.saturating_add(u32::from(w)));
        let above = total.saturating_mul(u32::from(100u8.saturating_sub(percent)));
        if above < 100 * u32::from(WEIGHT) {
            return None;
        }
        // The first bucket where the weight so far reaches `percent` of the total.
        let rank = total.saturating_mul(u32::from(percent)).div_ceil(100);
        let mut so_far = 0u32;
        let i = self.weights.iter().position(|&w| {
            so_far = so_far.saturating_add(u32::from(w));
            so_far >= rank
        })?;
        Some(u32::try_from(largest(i)).map_or(Ticks::MAX, Ticks::from))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    #[test]
    fn buckets_are_four_to_an_octave_and_each_ends_where_the_next_begins() {
        let firsts: Vec<usize> = [0u64, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 20].map(bucket).to_vec();
        assert_eq!(firsts, [0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 10, 11, 12, 13]);
        for i in 0..BUCKETS - 1 {
            assert_eq!(bucket(largest(i)), i, "bucket {i} holds its largest value");
            assert_eq!(bucket(largest(i) + 1), i + 1, "and the next value is the next bucket's");
        }
        assert_eq!(largest(BUCKETS - 1), u64::from(u32::MAX));
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        // A bucket is at most a quarter of its smallest value wide, from 4 ticks up.
        for i in 4..BUCKETS {
            let smallest = largest(i - 1) + 1;
            assert!((largest(i) - smallest + 1) * 4 <= smallest, "bucket {i}");
        }
    }

    #[test]
    fn a_percentile_is_the_largest_value_of_its_bucket_once_one_attempt_is_above_it() {
        let mut log = LatencyLog::new();
        // 19 attempts of 10 ticks: nothing above a 95th percentile yet.
        for _ in 0..19 {
            log.record(10, 1_000);
        }
        assert_eq!(log.percentile(95), None);
        assert_eq!(log.percentile(50), Some(11));
        log.record(1_000, 1_000);
        // 20 attempts: the 95th is the 19th, still 10 ticks; the 99th needs 100.
        assert_eq!(log.percentile(95), Some(11));
        assert_eq!(log.percentile(99), None);
        for _ in 0..80 {
            log.record(10, 1_000);
        }
        assert_eq!(log.percentile(99), Some(11));
        // Two slow attempts in 100: past the 99th, which is now in the bucket of 1,000 (896-1,023).
        log.record(1_000, 1_000);
        assert_eq!(log.percentile(99), Some(1_023));
        assert_eq!((log.percentile(0), log.percentile(100)), (None, None));
    }

    #[test]
    fn each_attempt_s_weight_halves_every_samples_attempts() {
        let mut log = LatencyLog::new();
        // 100 slow attempts, then fast ones of 20 ticks (their bucket's largest value is 23). The
        // 95th percentile comes down once the slow ones weigh a nineteenth of the fast ones or
        // less: slow 800 halved to 400, 200, 100, 50 at each hundredth attempt, fast 8 each,
        // halved with them (400 at the 100th, 600 at the 200th, 700 at the 300th): 950 at the
        // 332nd fast attempt.
        for _ in 0..100 {
            log.record(5_000, 100);
        }
        let mut when = None;
        for n in 1..=1_000 {
            log.record(20, 100);
            if when.is_none() && log.percentile(95) == Some(23) {
                when = Some(n);
            }
        }
        assert_eq!(when, Some(332));
    }

    #[test]
    fn longer_than_two_to_the_32_ticks_counts_as_that() {
        let mut log = LatencyLog::new();
        for _ in 0..20 {
            log.record(Ticks::MAX, 100);
        }
        assert_eq!(log.percentile(50), Some(Ticks::from(u32::MAX)));
    }
}
