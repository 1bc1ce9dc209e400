//! Criticality: which work a dependency's limits keep room for when they run short.
//!
//! Why: not every call to a dependency matters as much. A checkout's order must go through; the
//! quote shown beside it can be skipped, and a firmware's alarm uplink matters more than its hourly
//! telemetry. When a limit runs short (the bulkhead's slots, the retry budget, a radio's airtime),
//! the protections
//! otherwise serve whichever attempt comes first, and an outage's flood of cheap calls takes the
//! room the important ones needed. The Google SRE book's chapter 21 ("Handling Overload",
//! "Criticality") marks every request with a criticality and sheds the lower ones first.
//!
//! Relent keeps two classes, stated per operation in its [`Context`](crate::Context):
//! [`Criticality::Critical`] (the default) and [`Criticality::Sheddable`], and one number per
//! dependency, its critical reserve ([`DependencyConfig::critical_reserve`](crate::DependencyConfig::critical_reserve)):
//! the share of each limit that sheddable work may not use. Sheddable work sees every limit
//! smaller by that share, so it is refused while critical work still finds room:
//!
//! - **the bulkhead**: a sheddable attempt takes a slot only while fewer than its share of the
//!   slots (of the adaptive limit's slots, where it has one) are taken, and never waits in the
//!   bulkhead's queue: the queue is for work that must go, and a sheddable attempt that would wait
//!   is refused (`bulkhead_full`) at once;
//! - **the retry budget**: a sheddable retry (or hedge) is allowed only while the retries in the
//!   window are within its share of the ratio budget's allowance, or while the token bucket holds
//!   more than the reserve's tokens;
//! - **the rate limit**: a sheddable attempt sees a burst of its share, so it takes a unit only
//!   while the reserve's units are left (with a burst of one, there is no reserve to keep), and its
//!   refusal or wait names when its own unit is due;
//! - **the duty cycle**: a sheddable frame sees an airtime allowance of its share, and never less
//!   than its own airtime, so that an alarm finds the reserve's airtime on air when telemetry has
//!   used the rest;
//! - **the client throttle**: it refuses the same share of all requests as without a reserve (its
//!   formula's), and the refusals fall on sheddable requests first: with `s` the share of recent
//!   requests that were sheddable (an average the throttle keeps, weighing each request 1/32, in
//!   the 2 bytes beside its carry), a sheddable one is refused with `p / s` and a critical one not
//!   at all while `p <= s`; beyond, sheddable ones nearly always and critical ones with
//!   `(p - s) / (1 - s)`. The share is learnt from every request that reaches the throttle, while
//!   it refuses nothing too, so it is known when an overload begins; a dependency whose first
//!   requests meet an overload has it after a few dozen (after 32 requests of a steady mix it is
//!   63 % of the way there), and until then critical requests are refused about as often as without
//!   a reserve.
//!
//! A share is `100 - reserve` percent of the limit, rounded down, and at least one unit: a
//! bulkhead of one slot has no reserve (sheddable work is never refused for good by the
//! configuration alone). A refusal keeps its protection's problem code (`bulkhead_full`,
//! `retry_budget_exhausted`, `rate_limited`, `duty_cycle_exceeded`, `client_throttled`): what
//! refused the attempt,
//! which a dashboard already counts.
//!
//! Without a reserve configured, both classes see the same limits. The circuit and the cooldown
//! treat both classes alike: they say the dependency is down or paused, which is as true for
//! critical work as for the rest.

use crate::time::Ticks;

/// How much an operation matters when the dependency's limits run short (see the module doc).
#[cfg_attr(docsrs, doc(cfg(feature = "criticality")))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Criticality {
    /// Work that must go through while anything does: it may use the whole of every limit. The
    /// default.
    #[default]
    Critical,
    /// Work that may be refused first: it may use every limit but the dependency's critical
    /// reserve ([`DependencyConfig::critical_reserve`](crate::DependencyConfig::critical_reserve)).
    Sheddable,
}

impl Criticality {
    /// The stable snake_case name: `critical` or `sheddable` (a configuration file's value, a log
    /// field).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Critical => "critical",
            Self::Sheddable => "sheddable",
        }
    }
}

/// The smallest critical reserve, in percent.
pub(crate) const MIN_RESERVE: u8 = 1;
/// The largest critical reserve, in percent: sheddable work keeps a tenth of each limit at least.
pub(crate) const MAX_RESERVE: u8 = 90;

/// The share of a limit of `units` that work held back by `reserve` percent may use: `100 -
/// reserve` percent of it, rounded down, and at least one unit; the whole limit for a reserve of
/// zero (critical work, or no reserve configured). For slots and tokens.
#[inline]
pub(crate) fn share(units: u32, reserve: u8) -> u32 {
    u32::try_from(share_of(u64::from(units), reserve)).unwrap_or(units)
}

/// [`share`] of a tick count (a duty cycle's airtime allowance).
#[inline]
pub(crate) fn share_ticks(units: Ticks, reserve: u8) -> Ticks {
    Ticks::try_from(share_of(crate::time::wide(units), reserve)).unwrap_or(units)
}

/// The rule [`share`] states, in 64 bits: the one place it is written. Never above `units`, so it
/// fits back in the type the units came in.
#[inline]
fn share_of(units: u64, reserve: u8) -> u64 {
    if reserve == 0 {
        return units;
    }
    let kept = 100u64.saturating_sub(u64::from(reserve));
    (units.saturating_mul(kept) / 100).max(1).min(units)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_the_rest_of_the_limit_rounded_down_and_at_least_one_unit() {
        assert_eq!(share(200, 20), 160);
        assert_eq!(share(10, 25), 7); // 7.5 rounded down: the reserve is 3 slots
        assert_eq!(share(4, 20), 3);
        assert_eq!(share(2, 90), 1);
        assert_eq!(share(1, 50), 1); // one slot has no reserve
        assert_eq!(share(0, 50), 0); // no limit, no share
        assert_eq!(share(u32::MAX, 10), 3_865_470_565);
        assert_eq!(share(200, 0), 200); // critical work sees the whole limit
        assert_eq!(share_ticks(36_000, 20), 28_800);
        assert_eq!(share_ticks(0, 20), 0);
    }

    #[test]
    fn the_names_are_stable() {
        assert_eq!(Criticality::Critical.as_str(), "critical");
        assert_eq!(Criticality::Sheddable.as_str(), "sheddable");
        assert_eq!(Criticality::default(), Criticality::Critical);
    }
}
