//! Which restart of the core's clock an instant belongs to.
//!
//! With 64-bit ticks (the default) the core's clock is embassy-time's clock, tick for tick, and an
//! [`Epoch`] holds nothing. With 32-bit ticks (the `ticks-u32` feature) the core's clock would run
//! out after 2^32 ticks (49.7 days at 1 kHz, 71.6 minutes at 1 MHz), so it is embassy's clock less
//! a base that moves on in steps of 2^30 ticks: the base is the largest multiple of the step that
//! leaves the core's `now` at least one step, so `now` stays below 2^31, and with every duration at
//! most [`relent_core::MAX_SPAN`] (one step) no instant the core computes saturates.
//!
//! The base is a function of embassy's clock alone, so reading it needs no lock and no static.
//! Every piece of state that holds instants (a dependency's, an operation's) remembers the epoch it
//! was last used in and is rebased by the steps since then before its next use, under the same
//! lock as that use, with the `now` read under it.

use crate::{Duration, Instant};

/// The step between two restarts of the core's clock, in ticks (32-bit ticks only).
#[cfg(feature = "ticks-u32")]
const STEP: u64 = 1 << 30;

/// The restart of the core's clock that an instant was read in. Empty with 64-bit ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Epoch {
    #[cfg(feature = "ticks-u32")]
    steps: u32,
}

impl Epoch {
    /// The epoch of the core's tick 0, where a dependency built in a `static` starts.
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
        (Instant::from_ticks(t.as_ticks()), Self {})
    }

    /// Embassy instant `t` on the core's clock, and the epoch that reading belongs to.
    #[cfg(feature = "ticks-u32")]
    #[inline]
    pub(crate) const fn at(t: embassy_time::Instant) -> (Instant, Self) {
        let t = t.as_ticks();
        let steps = (t / STEP).saturating_sub(1);
        // t - steps × STEP is below 2 × STEP = 2^31: it fits.
        let core = (t - steps * STEP) as u32;
        let steps = if steps > u32::MAX as u64 { u32::MAX } else { steps as u32 };
        (Instant::from_ticks(core), Self { steps })
    }

    /// Core instant `t`, read in this epoch, on embassy's clock.
    #[inline]
    pub(crate) const fn to_embassy(self, t: Instant) -> embassy_time::Instant {
        #[cfg(not(feature = "ticks-u32"))]
        return embassy_time::Instant::from_ticks(t.as_ticks());
        #[cfg(feature = "ticks-u32")]
        return embassy_time::Instant::from_ticks(
            (self.steps as u64 * STEP).saturating_add(t.as_ticks() as u64),
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
    fn the_core_clock_stays_between_one_and_two_steps_once_past_the_first() {
        assert_eq!(at(0), (0, 0));
        assert_eq!(at((1 << 31) - 1), ((1 << 31) - 1, 0));
        assert_eq!(at(1 << 31), (1 << 30, 1));
        assert_eq!(at(3 << 30), (1 << 30, 2));
        assert_eq!(at((3 << 30) - 1), ((1 << 31) - 1, 1));
        assert_eq!(at(u64::MAX).1, u32::MAX);
    }

    #[test]
    fn an_instant_goes_back_to_embassys_clock_through_its_epoch() {
        for t in [0, 5, (1 << 31) + 7, 1 << 40, (1 << 40) + 123_456] {
            let (now, epoch) = Epoch::at(embassy_time::Instant::from_ticks(t));
            assert_eq!(epoch.to_embassy(now).as_ticks(), t);
        }
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
