//! The clock: `tokio::time::Instant` mapped onto the core's integer ticks.
//!
//! relent-tokio runs the core at [`HZ`] = 1 MHz: one tick is a microsecond, fine enough for any
//! network timeout and coarse enough that `u64` ticks last 584 000 years. Each [`Dependency`]
//! anchors tick 0 at the `tokio::time::Instant` it was created, so everything follows tokio's
//! clock, including paused time in tests (`#[tokio::test(start_paused = true)]`), where sleeps
//! complete instantly and deterministically.
//!
//! Conversions from `std::time::Duration` round *up* to the next microsecond, so a deadline or a
//! Retry-After never ends early; conversions back are exact.
//!
//! [`Dependency`]: crate::Dependency

/// Ticks per second in relent-tokio: microseconds.
pub const HZ: u64 = 1_000_000;

/// A duration in relent-tokio's ticks (microseconds).
pub type Duration = relent_core::Duration<HZ>;

/// An instant in relent-tokio's ticks (microseconds since the dependency's anchor).
pub type Instant = relent_core::Instant<HZ>;

/// `d` in ticks, rounded up to a whole microsecond, saturating.
pub fn ticks(d: std::time::Duration) -> Duration {
    // 64-bit arithmetic only: this runs several times per operation.
    let micros =
        d.as_secs().saturating_mul(1_000_000).saturating_add(u64::from(d.subsec_nanos().div_ceil(1_000)));
    Duration::from_ticks(micros)
}

/// Ticks as a `std::time::Duration`.
pub fn std_duration(d: Duration) -> std::time::Duration {
    std::time::Duration::from_micros(d.as_ticks())
}

/// The farthest ahead relent-tokio asks tokio's clock to go: 30 years, later than any timer or
/// deadline a service sets. Longer spans are clamped to it, since adding more to an instant could
/// overflow the platform's clock.
pub(crate) const FAR: std::time::Duration = std::time::Duration::from_secs(30 * 365 * 24 * 3600);

/// Maps tokio's clock onto ticks from an anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Clock {
    anchor: tokio::time::Instant,
}

impl Clock {
    pub(crate) fn starting_now() -> Self {
        Self { anchor: tokio::time::Instant::now() }
    }

    /// A clock whose tick 0 is `anchor`.
    pub(crate) fn anchored(anchor: tokio::time::Instant) -> Self {
        Self { anchor }
    }

    /// Now, in ticks since the anchor.
    pub(crate) fn now(&self) -> Instant {
        self.at(tokio::time::Instant::now())
    }

    /// A tokio instant in ticks since the anchor (0 before it).
    pub(crate) fn at(&self, t: tokio::time::Instant) -> Instant {
        Instant::from_ticks(ticks(t.saturating_duration_since(self.anchor)).as_ticks())
    }

    /// A tokio instant in ticks since the anchor, rounded down to the microsecond (0 before the
    /// anchor): for a limit not to pass, where [`Clock::at`] rounds up.
    pub(crate) fn floor(&self, t: tokio::time::Instant) -> Instant {
        let since = t.saturating_duration_since(self.anchor);
        Instant::from_ticks(u64::try_from(since.as_micros()).unwrap_or(u64::MAX))
    }

    /// A tick as a tokio instant. Ticks too far away for tokio's clock map to a point 30 years
    /// out, which no timer reaches. Clamped in ticks, before the conversion: this runs for each
    /// attempt's `AttemptInfo` and each wait.
    pub(crate) fn instant(&self, t: Instant) -> tokio::time::Instant {
        const FAR_TICKS: u64 = FAR.as_secs() * HZ;
        let d = std_duration(Duration::from_ticks(t.as_ticks().min(FAR_TICKS)));
        self.anchor.checked_add(d).unwrap_or(self.anchor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_up_to_the_next_microsecond() {
        assert_eq!(ticks(std::time::Duration::from_nanos(1)).as_ticks(), 1);
        assert_eq!(ticks(std::time::Duration::from_nanos(1_000)).as_ticks(), 1);
        assert_eq!(ticks(std::time::Duration::from_millis(3)).as_ticks(), 3_000);
        assert_eq!(ticks(std::time::Duration::MAX).as_ticks(), u64::MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_follows_tokio_time_and_maps_back_exactly() {
        let clock = Clock::starting_now();
        tokio::time::advance(std::time::Duration::from_millis(1_500)).await;
        let now = clock.now();
        assert_eq!(now.as_ticks(), 1_500_000);
        assert_eq!(clock.instant(now), tokio::time::Instant::now());
        assert!(clock.instant(Instant::from_ticks(u64::MAX)) > tokio::time::Instant::now());
    }

    #[tokio::test(start_paused = true)]
    async fn a_limit_rounds_down_to_the_microsecond_where_an_instant_rounds_up() {
        let clock = Clock::starting_now();
        let anchor = tokio::time::Instant::now();
        let t = anchor + std::time::Duration::from_nanos(2_500_999);
        assert_eq!((clock.floor(t).as_ticks(), clock.at(t).as_ticks()), (2_500, 2_501));
        let exact = anchor + std::time::Duration::from_micros(2_500);
        assert_eq!((clock.floor(exact).as_ticks(), clock.at(exact).as_ticks()), (2_500, 2_500));
        assert_eq!(
            clock.floor(anchor.checked_sub(std::time::Duration::from_secs(1)).unwrap_or(anchor)).as_ticks(),
            0
        );
    }

    #[tokio::test(start_paused = true)]
    async fn instants_map_exactly_up_to_thirty_years_and_later_ones_to_thirty_years() {
        let clock = Clock::starting_now();
        let anchor = tokio::time::Instant::now();
        let year = std::time::Duration::from_secs(365 * 24 * 3600);
        let far = year * 30;
        let tick = |d| Instant::from_ticks(ticks(d).as_ticks());
        assert_eq!(clock.instant(tick(year)), anchor + year);
        assert_eq!(clock.instant(tick(far)), anchor + far);
        assert_eq!(clock.instant(tick(far + year)), anchor + far);
        assert_eq!(clock.instant(Instant::from_ticks(u64::MAX)), anchor + far);
    }
}
