//! Integer time, generic over the tick rate.
//!
//! The core never reads a clock: every mutating call takes `now`, which must not go backwards
//! (a `now` earlier than one already seen is treated as that earlier instant, never as a panic).
//! Time is fugit's 64-bit monotonic instant and duration at `HZ` ticks a second, so embassy's
//! `TICK_HZ` plugs in directly and the tokio adapter maps `tokio::time::Instant` onto a rate of its
//! choosing.
//!
//! fugit's `+` and `-` panic on overflow. The core therefore does all tick arithmetic through the
//! saturating helpers below: an instant saturates at `Ticks::MAX` ticks, which the core reads as
//! "never" (a deadline that far away is no deadline), and a duration between instants saturates at
//! zero. That is what lets every input, including instants near `Ticks::MAX`, be handled without a
//! panic.

/// The integer the core counts ticks in: `u64`, or `u32` with the `ticks-u32` feature.
#[cfg(not(feature = "ticks-u32"))]
pub type Ticks = u64;
/// The integer the core counts ticks in: `u64`, or `u32` with the `ticks-u32` feature.
#[cfg(feature = "ticks-u32")]
pub type Ticks = u32;

/// Twice as wide as [`Ticks`]: products of two tick counts fit in it.
#[cfg(not(feature = "ticks-u32"))]
pub(crate) type Wide = u128;
#[cfg(feature = "ticks-u32")]
pub(crate) type Wide = u64;

/// An instant on the caller's monotonic clock, in ticks of `1 / HZ` seconds.
pub type Instant<const HZ: u64> = fugit::MonotonicTimerInstant<Ticks, HZ>;

/// A span of time in ticks of `1 / HZ` seconds.
pub type Duration<const HZ: u64> = fugit::TimerDuration<Ticks, HZ>;

/// A tick count as a `u64`, whatever the width of [`Ticks`]: for products with counts.
#[inline]
#[allow(clippy::unnecessary_cast)]
pub(crate) const fn wide(t: Ticks) -> u64 {
    t as u64
}

/// The longest duration, in ticks, that a policy, a dependency's configuration or an operation's
/// deadline may state: with 32-bit ticks, 2^30 (12.4 days at 1 kHz, 9.1 hours at 32,768 Hz,
/// 17.9 minutes at 1 MHz); with 64-bit ticks, no limit (`u64::MAX`).
///
/// With 32-bit ticks the clock must be restarted before it runs out ([`crate::Dependency::rebase`]):
/// relent-embassy restarts it 2^30 ticks later whenever it reaches 2^31, so `now` stays below 2^31
/// and, with every duration at most 2^30, no instant the core computes saturates.
pub const MAX_SPAN: Ticks = if cfg!(feature = "ticks-u32") { 1 << 30 } else { Ticks::MAX };

/// Whether a duration of `d` ticks is at most [`MAX_SPAN`].
#[inline]
pub(crate) const fn fits(d: Ticks) -> bool {
    #[cfg(feature = "ticks-u32")]
    return d <= MAX_SPAN;
    #[cfg(not(feature = "ticks-u32"))]
    {
        let _ = d;
        true
    }
}

/// Whether every duration in `spans` is at most [`MAX_SPAN`].
pub(crate) const fn all_fit(mut spans: &[Ticks]) -> bool {
    while let [first, rest @ ..] = spans {
        if !fits(*first) {
            return false;
        }
        spans = rest;
    }
    true
}

/// Instant `t` on a clock restarted `by` ticks later (see [`crate::Dependency::rebase`]): `t - by`,
/// tick 0 for an instant before the new clock's start, and the end of time ("never") kept as it is.
#[inline]
pub(crate) const fn earlier(t: Ticks, by: Ticks) -> Ticks {
    if t == Ticks::MAX { t } else { t.saturating_sub(by) }
}

/// `t + d`, saturating at the end of time.
#[inline]
pub(crate) const fn add<const HZ: u64>(t: Instant<HZ>, d: Duration<HZ>) -> Instant<HZ> {
    Instant::<HZ>::from_ticks(t.as_ticks().saturating_add(d.as_ticks()))
}

/// `later - earlier`, or zero when `later` is not after `earlier`.
#[inline]
pub(crate) const fn since<const HZ: u64>(later: Instant<HZ>, earlier: Instant<HZ>) -> Duration<HZ> {
    Duration::<HZ>::from_ticks(later.as_ticks().saturating_sub(earlier.as_ticks()))
}

/// `a + b`, saturating.
#[inline]
pub(crate) const fn sum<const HZ: u64>(a: Duration<HZ>, b: Duration<HZ>) -> Duration<HZ> {
    Duration::<HZ>::from_ticks(a.as_ticks().saturating_add(b.as_ticks()))
}

/// The smaller of two durations.
#[inline]
pub(crate) const fn min<const HZ: u64>(a: Duration<HZ>, b: Duration<HZ>) -> Duration<HZ> {
    if a.as_ticks() <= b.as_ticks() { a } else { b }
}

/// The larger of two durations.
#[cfg(feature = "hedge")]
#[inline]
pub(crate) const fn max<const HZ: u64>(a: Duration<HZ>, b: Duration<HZ>) -> Duration<HZ> {
    if a.as_ticks() >= b.as_ticks() { a } else { b }
}

/// The later of two instants.
#[inline]
pub(crate) const fn latest<const HZ: u64>(a: Instant<HZ>, b: Instant<HZ>) -> Instant<HZ> {
    if a.as_ticks() >= b.as_ticks() { a } else { b }
}

/// `secs` seconds at `HZ`, in ticks, saturating.
#[inline]
#[allow(clippy::cast_possible_truncation)] // Checked against Ticks::MAX first.
pub(crate) const fn seconds<const HZ: u64>(secs: u32) -> Ticks {
    let t = (secs as u64).saturating_mul(HZ);
    if t > wide(Ticks::MAX) { Ticks::MAX } else { t as Ticks }
}

/// One second at `HZ`, in ticks (saturating where it does not fit in 32-bit ticks).
#[inline]
pub(crate) const fn one_second<const HZ: u64>() -> Ticks {
    seconds::<HZ>(1)
}

/// An optional tick count as wide as a tick, where `Option<Ticks>` takes twice that: the state an
/// operation keeps for its whole life is smaller, on a Cortex-M and in a server's future alike. `Ticks::MAX` means
/// none, so a real count is kept at `Ticks::MAX - 1` at most: one tick before the end of time, where
/// the core already saturates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct MaybeTicks(Ticks);

impl MaybeTicks {
    pub(crate) const NONE: Self = Self(Ticks::MAX);

    #[inline]
    pub(crate) const fn new(ticks: Option<Ticks>) -> Self {
        match ticks {
            Some(t) if t < Ticks::MAX => Self(t),
            Some(_) => Self(Ticks::MAX - 1),
            None => Self::NONE,
        }
    }

    #[inline]
    pub(crate) const fn get(self) -> Option<Ticks> {
        if self.0 == Ticks::MAX { None } else { Some(self.0) }
    }

    #[inline]
    pub(crate) const fn instant<const HZ: u64>(self) -> Option<Instant<HZ>> {
        match self.get() {
            Some(t) => Some(Instant::<HZ>::from_ticks(t)),
            None => None,
        }
    }

    #[inline]
    pub(crate) const fn duration<const HZ: u64>(self) -> Option<Duration<HZ>> {
        match self.get() {
            Some(t) => Some(Duration::<HZ>::from_ticks(t)),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type I = Instant<1_000>;
    type D = Duration<1_000>;

    #[test]
    fn add_saturates_at_the_end_of_time() {
        let t = I::from_ticks(Ticks::MAX - 1);
        assert_eq!(add(t, D::from_ticks(5)).as_ticks(), Ticks::MAX);
    }

    #[test]
    fn maybe_ticks_keeps_every_count_but_the_last_tick_of_time() {
        for t in [0, 1, 42, Ticks::MAX - 1] {
            assert_eq!(MaybeTicks::new(Some(t)).get(), Some(t));
        }
        assert_eq!(MaybeTicks::new(Some(Ticks::MAX)).get(), Some(Ticks::MAX - 1));
        assert_eq!(MaybeTicks::new(None).get(), None);
        assert_eq!(core::mem::size_of::<MaybeTicks>(), core::mem::size_of::<Ticks>());
    }

    #[test]
    fn seconds_saturate_instead_of_overflowing() {
        assert_eq!(seconds::<1_000>(7), 7_000);
        assert_eq!(seconds::<1_000_000>(u32::MAX), wide_or_max(u64::from(u32::MAX) * 1_000_000));
        assert_eq!(seconds::<{ u64::MAX }>(2), Ticks::MAX);
    }

    /// `t` in ticks, or `Ticks::MAX` where it does not fit.
    fn wide_or_max(t: u64) -> Ticks {
        Ticks::try_from(t).unwrap_or(Ticks::MAX)
    }

    #[test]
    fn since_is_zero_when_time_went_backwards() {
        assert_eq!(since(I::from_ticks(3), I::from_ticks(7)).as_ticks(), 0);
        assert_eq!(since(I::from_ticks(7), I::from_ticks(3)).as_ticks(), 4);
    }
}
