//! The core's clock on embassy's, and which restart of it an instant belongs to.
//!
//! The core's clock starts [`HISTORY`] ticks ahead of embassy's: embassy's tick counter starts at
//! zero at every boot, and the core cannot name an instant before its own tick 0. A dependency's
//! state restored from a deep-sleep snapshot holds what happened before the boot (the window's
//! counts of the last minute, which the retry budget and a failure-ratio breaker read); on a clock
//! that started at the boot, all of it would be before tick 0 and dropped. With the history,
//! anything up to `HISTORY` ticks before the boot keeps its place.
//!
//! With 64-bit ticks (the default) the core's clock is embassy-time's clock plus 2^40 ticks (12.7
//! days at 1 MHz), and an [`Epoch`] holds nothing. With 32-bit ticks (the `ticks-u32` feature) the
//! core's clock would run out after 2^32 ticks (49.7 days at 1 kHz, 71.6 minutes at 1 MHz), so it
//! is embassy's clock plus one step of 2^30 ticks, less a base that moves on in steps of 2^30: the
//! base is the largest multiple of the step that leaves the core's `now` at least one step, so
//! `now` stays between 2^30 and 2^31 from the boot on, and with every duration at most
//! [`relent_core::MAX_SPAN`] (one step) no instant the core computes saturates and every instant
//! up to a step old can be named.
//!
//! The base is a function of embassy's clock alone, so reading it needs no lock and no static.
//! Every piece of state that holds instants (a dependency's, an operation's) remembers the epoch it
//! was last used in and is rebased by the steps since then before its next use, under the same
//! lock as that use, with the `now` read under it.

use crate::{Duration, Instant};

/// The step between two restarts of the core's clock, in ticks (32-bit ticks only).
#[cfg(feature = "ticks-u32")]
const STEP: u64 = 1 << 30;

/// How far the core's clock runs ahead of embassy's: the past before the boot that a restored
/// state can hold. With 32-bit ticks, one step: [`relent_core::MAX_SPAN`], the longest window.
#[cfg(feature = "ticks-u32")]
pub(crate) const HISTORY: u64 = STEP;
/// How far the core's clock runs ahead of embassy's: the past before the boot that a restored
/// state can hold (12.7 days at 1 MHz, 34.8 years at 1 kHz).
#[cfg(not(feature = "ticks-u32"))]
pub(crate) const HISTORY: u64 = 1 << 40;

/// The restart of the core's clock that an instant was read in. Empty with 64-bit ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Epoch {
    #[cfg(feature = "ticks-u32")]
    steps: u32,
}

impl Epoch {
    /// The epoch of the core's tick 0, where a dependency built in a `static` starts (embassy's
    /// tick 0 is the core's tick `HISTORY`, in the same epoch).
    pub(crate) const START: Self = Self {
        #[cfg(feature = "ticks-u32")]
        steps: 0,
    };

    /// The core's `now`, and the epoch it belongs to. One function for every caller with 32-bit
    /// ticks (not inlined into each: on a Cortex-M3 that saved 120 bytes of flash).
    #[cfg_attr(not(feature = "ticks-u32"), inline)]
    #[cfg_attr(feature = "ticks-u32", inline(never))]
    pub(crate) fn now() -> (Instant, Self) {
        Self::at(embassy_time::Instant::now())
    }

    /// Embassy instant `t` on the core's clock, and the epoch that reading belongs to.
    #[cfg(not(feature = "ticks-u32"))]
    #[inline]
    pub(crate) const fn at(t: embassy_time::Instant) -> (Instant, Self) {
        // Wrapping: embassy's clock is 2^40 ticks from the end of 64 bits after 584,000 years at 1 MHz.
        (Instant::from_ticks(t.as_ticks().wrapping_add(HISTORY)), Self {})
    }

    /// Embassy instant `t` on the core's clock, and the epoch that reading belongs to.
    #[cfg(feature = "ticks-u32")]
    #[inline]
    pub(crate) const fn at(t: embassy_time::Instant) -> (Instant, Self) {
        // Embassy's tick t is the core's t + STEP (the history) less steps × STEP, steps being the
        // largest that leaves at least STEP: t / STEP, which leaves t mod STEP + STEP, below 2^31.
        // HISTORY = STEP = 2^30 makes it two bit operations (a restart without the history took a
        // shift and a subtraction).
        let t = t.as_ticks();
        let core = (t % STEP + HISTORY) as u32;
        let steps = t / STEP;
        let steps = if steps > u32::MAX as u64 { u32::MAX } else { steps as u32 };
        (Instant::from_ticks(core), Self { steps })
    }

    /// Core instant `t`, read in this epoch, on embassy's clock. An instant from before embassy's
    /// tick 0 (the history before the boot) is its tick 0. One function for every caller with
    /// 32-bit ticks, as `now` is: inlined at each, it took 44 bytes more of a Cortex-M3's flash
    /// for 6 instructions fewer on relent-embassy's success path.
    #[cfg_attr(not(feature = "ticks-u32"), inline)]
    #[cfg_attr(feature = "ticks-u32", inline(never))]
    pub(crate) const fn to_embassy(self, t: Instant) -> embassy_time::Instant {
        #[cfg(not(feature = "ticks-u32"))]
        return embassy_time::Instant::from_ticks(t.as_ticks().saturating_sub(HISTORY));
        #[cfg(feature = "ticks-u32")]
        // The base is below 2^62: no sum with a 32-bit instant wraps.
        return embassy_time::Instant::from_ticks(
            (self.steps as u64 * STEP).wrapping_add(t.as_ticks() as u64).saturating_sub(HISTORY),
        );
    }

    /// How far the core's clock restarted between `earlier` and this epoch, if at all: the `by` of
    /// [`Dependency::rebase`](relent_core::Dependency::rebase) for state last used in `earlier`.
    /// Saturates (to a shift past everything) for state idle for four steps or more.
    #[inline]
    pub(crate) fn since(self, earlier: Self) -> Option<Duration> {
        #[cfg(not(feature = "ticks-u32"))]
        {
            let _ = earlier;
            None
        }
        #[cfg(feature = "ticks-u32")]
        {
            let steps = self.steps.checked_sub(earlier.steps).filter(|&s| s > 0)?;
            let by = u64::from(steps).saturating_mul(STEP);
            Some(Duration::from_ticks(u32::try_from(by).unwrap_or(u32::MAX)))
        }
    }
}

/// A core duration on embassy's clock (the same ticks, at either width).
#[inline]
#[allow(clippy::useless_conversion)] // A conversion only with 32-bit ticks.
pub(crate) fn span(d: Duration) -> embassy_time::Duration {
    embassy_time::Duration::from_ticks(d.as_ticks().into())
}

#[cfg(all(test, feature = "ticks-u32"))]
mod tests {
    use super::*;

    fn at(t: u64) -> (u32, u32) {
        let (now, epoch) = Epoch::at(embassy_time::Instant::from_ticks(t));
        (now.as_ticks(), epoch.steps)
    }

    #[test]
    fn the_core_clock_starts_a_step_ahead_and_stays_between_one_and_two_steps() {
        assert_eq!(at(0), (1 << 30, 0));
        assert_eq!(at((1 << 30) - 1), ((1 << 31) - 1, 0));
        assert_eq!(at(1 << 30), (1 << 30, 1));
        assert_eq!(at(1 << 31), (1 << 30, 2));
        assert_eq!(at((1 << 31) - 1), ((1 << 31) - 1, 1));
        assert_eq!(at(u64::MAX).1, u32::MAX);
    }

    #[test]
    fn an_instant_goes_back_to_embassys_clock_through_its_epoch() {
        for t in [0, 5, (1 << 31) + 7, 1 << 40, (1 << 40) + 123_456] {
            let (now, epoch) = Epoch::at(embassy_time::Instant::from_ticks(t));
            assert_eq!(epoch.to_embassy(now).as_ticks(), t);
        }
        // The history before the boot: an instant a second before embassy's tick 0 is its tick 0.
        let (now, epoch) = Epoch::at(embassy_time::Instant::from_ticks(0));
        let before = Instant::from_ticks(now.as_ticks() - 1_000);
        assert_eq!(epoch.to_embassy(before).as_ticks(), 0);
    }

    #[test]
    fn the_shift_between_epochs_is_whole_steps_and_saturates() {
        let e = |steps| Epoch { steps };
        assert_eq!(e(3).since(e(3)), None);
        assert_eq!(e(3).since(e(4)), None);
        assert_eq!(e(4).since(e(3)), Some(Duration::from_ticks(1 << 30)));
        assert_eq!(e(6).since(e(3)), Some(Duration::from_ticks(3 << 30)));
        assert_eq!(e(9).since(e(3)), Some(Duration::from_ticks(u32::MAX)));
    }
}

#[cfg(test)]
mod history {
    use super::*;

    #[test]
    #[allow(clippy::useless_conversion)] // A conversion only with 32-bit ticks.
    fn embassys_tick_0_is_the_cores_history_and_goes_back() {
        let (now, epoch) = Epoch::at(embassy_time::Instant::from_ticks(0));
        assert_eq!(u64::from(now.as_ticks()), HISTORY);
        assert_eq!(epoch, Epoch::START);
        assert_eq!(epoch.to_embassy(now).as_ticks(), 0);
        assert_eq!(epoch.to_embassy(Instant::from_ticks(0)).as_ticks(), 0);
    }
}
