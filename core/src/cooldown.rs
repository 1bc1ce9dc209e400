//! The cooldown: a partition-wide "not before" instant that the far side sets.
//!
//! A `Retry-After` is the far side saying "not now" about itself, not about one request (seed 003:
//! "A positive Retry-After also extends a shared cooldown for the partition, so the next operation
//! is deferred without calling the API"). So a positive stated wait from any operation extends the
//! dependency's cooldown, capped by the configured maximum so that one answer of "retry after a
//! day" cannot silence a dependency for a day, and never shortens it. Every attempt that would start
//! during the cooldown is not sent; the operation is deferred with the remaining wait as its hint
//! (`cooldown_active`).

use crate::time::Ticks;
/// The cooldown's state: the instant before which nothing is sent, in ticks (0: none yet).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Cooldown {
    until: Ticks,
}

impl Cooldown {
    pub(crate) const fn new() -> Self {
        Self { until: 0 }
    }

    /// Moves the cooldown's end `by` ticks earlier.
    pub(crate) fn rebase(&mut self, by: Ticks) {
        self.until = crate::time::earlier(self.until, by);
    }

    /// The instant the cooldown ends, if it is active at `now`.
    pub(crate) const fn active_until(&self, now: Ticks) -> Option<Ticks> {
        if now < self.until { Some(self.until) } else { None }
    }

    /// Ends the cooldown by `now + max` at the latest (a cooldown reconfigured to a shorter
    /// longest wait, see [`crate::Dependency::reconfigure`]).
    pub(crate) fn cut(&mut self, now: Ticks, max: Ticks) {
        self.until = self.until.min(now.saturating_add(max));
    }

    /// Extends the cooldown to `now + min(wait, max)`. Returns the new end when it moved later.
    pub(crate) fn extend(&mut self, now: Ticks, wait: Ticks, max: Ticks) -> Option<Ticks> {
        let until = now.saturating_add(wait.min(max));
        if wait > 0 && until > self.until {
            self.until = until;
            Some(until)
        } else {
            None
        }
    }
}

impl Cooldown {
    /// Bytes of a cooldown in a snapshot: what remains of it.
    pub(crate) const SNAPSHOT_LEN: usize = 8;

    pub(crate) fn save(&self, w: &mut crate::snapshot::Writer<'_>, now: Ticks) {
        w.ticks(self.until.saturating_sub(now));
    }

    pub(crate) fn restore(r: &mut crate::snapshot::Reader<'_>, rebase: crate::snapshot::Rebase) -> Self {
        Self { until: rebase.until(r.ticks()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_after_extends_the_cooldown_up_to_its_maximum_and_never_shortens_it() {
        let mut c = Cooldown::new();
        assert_eq!(c.extend(1_000, 30_000, 60_000), Some(31_000));
        assert_eq!(c.active_until(30_999), Some(31_000));
        assert_eq!(c.active_until(31_000), None);
        assert_eq!(c.extend(2_000, 5_000, 60_000), None, "a shorter wait does not shorten it");
        assert_eq!(c.active_until(2_000), Some(31_000));
        assert_eq!(c.extend(2_000, 86_400_000, 60_000), Some(62_000), "capped at the maximum");
        assert_eq!(c.extend(3_000, 0, 60_000), None, "a zero wait is no cooldown");
        assert_eq!(c.extend(2_000, 60_000, 60_000), None, "ending when it already ends moves nothing");
        let mut idle = Cooldown::new();
        assert_eq!(idle.extend(3_000, 0, 60_000), None, "a zero wait starts none either");
        assert_eq!(idle.active_until(2_999), None);
    }
}
