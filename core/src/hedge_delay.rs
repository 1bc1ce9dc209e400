//! When a hedge goes out: after a fixed delay, or at a percentile of the dependency's own latency.
//!
//! Why a percentile: "The Tail at Scale" sends the second copy once the first "has been outstanding
//! for more than the 95th-percentile expected latency", which limits the extra load to about 5 %.
//! A fixed delay is that percentile as it was measured once; the dependency's latency moves (a
//! deploy, a busier hour, a slowdown), and with it the share of calls sent twice. A delay read from
//! the latency log ([`crate::DependencyConfig::latency_samples`]) when each operation starts follows
//! it: when every call slows down, the percentile rises with them and hedging backs off by itself,
//! on top of the retry budget that pays for each hedge.

use crate::dependency::{Dependency, DependencyConfig};
use crate::error::StartError;
use crate::time::Duration;

/// When to hedge an operation ([`Dependency::hedge_delay`] reads it against the dependency).
///
/// ```
/// use relent_core::{Dependency, DependencyConfig, Duration, HedgeDelay, Instant, RetryBudget};
/// type D = Duration<1_000>;
///
/// let config = DependencyConfig::new(D::from_secs(10)).budget(RetryBudget::ratio(10, 5)?).latency_samples(200);
/// let quotes = Dependency::<1_000, 10>::new(&config, Instant::from_ticks(0))?;
/// // At the 90th percentile of the last few hundred attempts, never sooner than 20 ms, and after
/// // 50 ms until the log holds enough attempts to tell.
/// let hedge = HedgeDelay::percentile(90).at_least(D::from_millis(20)).until_learnt(D::from_millis(50));
/// assert_eq!(quotes.hedge_delay(&config, hedge)?, Some(D::from_millis(50)));
/// assert_eq!(quotes.hedge_delay(&config, HedgeDelay::after(D::from_millis(30)))?, Some(D::from_millis(30)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HedgeDelay<const HZ: u64> {
    /// The fixed delay; for a percentile, the delay until the log has learnt it, if `fallback`.
    delay: Duration<HZ>,
    /// The soonest a hedge goes.
    at_least: Duration<HZ>,
    when: When,
}

/// Fixed or learnt: kept apart from the durations so that the whole is 24 bytes, which an
/// adapter's hedged future holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum When {
    After,
    Percentile { percent: u8, fallback: bool },
}

impl<const HZ: u64> HedgeDelay<HZ> {
    /// A hedge `delay` after the operation's start.
    pub const fn after(delay: Duration<HZ>) -> Self {
        Self { delay, at_least: Duration::<HZ>::from_ticks(0), when: When::After }
    }

    /// A hedge at the `percent`th percentile (1 to 99) of how long the dependency's attempts take,
    /// from its latency log. Until the log has learnt it (20 attempts for the 95th), no hedge, or
    /// the delay given to [`until_learnt`](Self::until_learnt).
    ///
    /// Pick a percentile clear of the share of calls that are slow: with one call in twenty slow
    /// (a slow node behind the balancer), the 95th percentile is the edge between the fast calls
    /// and the slow ones, and the delay jumps between the two. In the README's evidence, with
    /// exactly that, the 90th percentile hedged at the fast calls' edge and cut the 99th
    /// percentile of requests from 77 ms (a fixed delay past the 95th) to 59 ms, and the 95th did
    /// not.
    pub const fn percentile(percent: u8) -> Self {
        let zero = Duration::<HZ>::from_ticks(0);
        Self { delay: zero, at_least: zero, when: When::Percentile { percent, fallback: false } }
    }

    /// Never sooner than `floor`: for a dependency that answers in a millisecond, a hedge at its
    /// 95th percentile would race calls that a network hiccup delays by as much.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn at_least(mut self, floor: Duration<HZ>) -> Self {
        self.at_least = floor;
        self
    }

    /// For a percentile: the delay until the log has learnt it.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn until_learnt(mut self, delay: Duration<HZ>) -> Self {
        if let When::Percentile { percent, .. } = self.when {
            self.delay = delay;
            self.when = When::Percentile { percent, fallback: true };
        }
        self
    }

    /// The percentile, for a learnt delay.
    pub const fn percent(&self) -> Option<u8> {
        match self.when {
            When::Percentile { percent, .. } => Some(percent),
            When::After => None,
        }
    }

    /// The delay of a fixed hedge delay (never sooner than its floor), which reads nothing of the
    /// dependency: an adapter needs no lock for it. `None` for a percentile, which
    /// [`Dependency::hedge_delay`] reads from the latency log.
    pub const fn fixed(&self) -> Option<Duration<HZ>> {
        match self.when {
            When::After => Some(crate::time::max(self.delay, self.at_least)),
            When::Percentile { .. } => None,
        }
    }
}

impl<const HZ: u64, const N: usize, const L: usize> Dependency<HZ, N, L> {
    /// How long after an operation's start its hedge goes, as `delay` says, read now: `None` for
    /// no hedge (a percentile not yet learnt, with no delay until it is). Refused for a percentile
    /// outside 1 to 99 ([`StartError::HedgePercentileOutOfRange`]) or on a dependency that keeps
    /// no latency log ([`StartError::HedgeWithoutLatencyLog`]), before anything is sent.
    pub fn hedge_delay(
        &self,
        config: &DependencyConfig<HZ>,
        delay: HedgeDelay<HZ>,
    ) -> Result<Option<Duration<HZ>>, StartError> {
        let chosen = match delay.when {
            When::After => return Ok(delay.fixed()),
            When::Percentile { percent, .. } if !(1..=99).contains(&percent) => {
                return Err(StartError::HedgePercentileOutOfRange { percent });
            }
            When::Percentile { percent, fallback } => match config.latency_log_samples() {
                Some(_) => self.latency_percentile(config, percent).or(fallback.then_some(delay.delay)),
                None => return Err(StartError::HedgeWithoutLatencyLog),
            },
        };
        Ok(chosen.map(|d| crate::time::max(d, delay.at_least)))
    }
}
