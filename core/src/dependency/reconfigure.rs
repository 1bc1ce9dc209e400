//! A dependency's state carried over to a new configuration, without a restart.
//!
//! Why: operators change a dependency's numbers in an incident (a smaller retry budget, a lower
//! rate, a longer break, a bulkhead cut to what the provider says it can take), and a restart to
//! apply them forgets what the state knows at the worst moment: that the circuit is open, that
//! the provider asked for a cooldown, which attempts are in flight, what the window counted, how
//! much airtime the radio has used this hour. So the state is kept, and each part is carried over
//! by one rule, here, next to the others: what is a fact about the dependency stays, what the old
//! numbers produced is carried into the new ones and never given more than they allow, and a
//! protection the new configuration adds or leaves out starts fresh, as in a new dependency.
//!
//! The configuration is the caller's (a `const`, or the adapter's), so the caller swaps it: this
//! only makes the state fit the new one. Operations started before the change may go on under the
//! configuration they started with until they end: they only give back what they hold, and every
//! count saturates, so whatever the two configurations, nothing is lost or counted twice.

use super::{Dependency, DependencyConfig};
use crate::breaker::BreakerConfig;
use crate::budget::TokenBucket;
use crate::cooldown::Cooldown;
use crate::duty::AirtimeLog;
use crate::error::ConfigError;
use crate::latency::LatencyLog;
use crate::limiter::Limiter;
use crate::time::Instant;

impl<const HZ: u64, const N: usize, const L: usize> Dependency<HZ, N, L> {
    /// Carries this dependency's state from the configuration `from` (the one it was built with, or
    /// last reconfigured to) over to `to`, at `now`, for a caller that changes a dependency's
    /// configuration while it runs (an operator in an incident, a configuration file reloaded).
    /// From then on, give every call `to`.
    ///
    /// `to` is checked as [`Dependency::new`] checks a configuration; when it is refused, nothing
    /// changes and the error says what to fix. Otherwise each part of the state:
    ///
    /// - **stays**, whatever changed, where it is a fact about the dependency or a promise already
    ///   made: attempts in flight and operations waiting in the bulkhead's queue (each gives back
    ///   what it holds when it ends), an open, half-open or isolated circuit and when its break
    ///   ends, the cooldown's end (cut to `to`'s longest cooldown), the airtime on record, the
    ///   client throttle's carry and the latency log;
    /// - **is carried** into `to`'s numbers where they changed, never given more than `to` allows:
    ///   a window of another length keeps its counts, which age out at the new bucket width from
    ///   `now`; a token bucket keeps its whole tokens, at most `to`'s capacity, and its reservations;
    ///   a rate limit keeps the units taken, with the debt they ran up cut to the most that units
    ///   taken under `to` could have left at `now` (its longest wait, its burst and one interval;
    ///   an attempt waiting for airtime past that, which reserved its unit further ahead, still
    ///   goes at its instant, and the new limit may let one more unit go beside it); an adaptive
    ///   limit keeps what it learnt, within `to`'s slots and, where the floor changed, its floor
    ///   (an operation from before a change may lower it below a floor `to` kept; the limit grows
    ///   back as `to`'s operations succeed); a breaker's new trip rule reads the run of failures so far (a count
    ///   window of another size or rule starts empty), a new break length applies from the next
    ///   time the circuit opens, and a new probe count at once (a half-open circuit whose probes'
    ///   successes already make it lets attempts through as probes, and the first success closes
    ///   it);
    /// - **starts fresh** where `to` adds the protection or leaves it out (a breaker's isolation
    ///   goes with it: with no breaker there is no circuit to isolate or close), as in a new
    ///   dependency: a token bucket that `to` adds starts full.
    ///
    /// So carrying a state over to the configuration it has changes nothing.
    ///
    /// Operations started under `from` may go on with it until they end (an adapter cannot take
    /// a borrowed configuration back from them): for their remaining attempts they see `from`'s
    /// limits over this state, and what they give back fits either configuration.
    ///
    /// ```
    /// use relent_core::{Dependency, DependencyConfig, Duration, Instant, RateLimit, RetryBudget};
    /// type D = Duration<1_000>;
    ///
    /// let calm = DependencyConfig::<1_000>::new(D::from_secs(10)).budget(RetryBudget::token_bucket(
    ///     20, 20, D::from_secs(60), D::from_secs(10))?);
    /// let mut payrail = Dependency::<1_000, 10>::new(&calm, Instant::from_ticks(0))?;
    /// let now = Instant::from_ticks(5_000);
    /// assert_eq!(payrail.retries_available(&calm, now), Some(20));
    ///
    /// // In an incident: 5 retries a minute at most, and 50 calls a second.
    /// let incident = calm
    ///     .budget(RetryBudget::token_bucket(5, 5, D::from_secs(60), D::from_secs(10))?)
    ///     .rate_limit(RateLimit::new(50, D::from_secs(1)));
    /// payrail.reconfigure(&calm, &incident, now)?;
    /// assert_eq!(payrail.retries_available(&incident, now), Some(5));
    ///
    /// // A configuration that cannot work is refused, and nothing changes.
    /// let broken = incident.rate_limit(RateLimit::new(0, D::from_secs(1)));
    /// assert_eq!(payrail.reconfigure(&incident, &broken, now).map_err(|e| e.as_str()), Err("zero_rate"));
    /// assert_eq!(payrail.retries_available(&incident, now), Some(5));
    /// # Ok::<(), relent_core::ConfigError>(())
    /// ```
    pub fn reconfigure(
        &mut self,
        from: &DependencyConfig<HZ>,
        to: &DependencyConfig<HZ>,
        now: Instant<HZ>,
    ) -> Result<(), ConfigError> {
        let width = Self::bucket_width_for(to)?;
        let t = now.as_ticks();
        if width != self.window.bucket_width() {
            self.window.resize(width, now);
        }
        if let Some(tokens) = self.tokens.get_mut() {
            let (old, new) = (from.budget.and_then(|b| b.bucket()), to.budget.and_then(|b| b.bucket()));
            match (old, new) {
                (Some(old), Some(new)) if old != new => tokens.carry(&old, &new, t),
                (Some(_), Some(_)) | (None, None) => {}
                (_, new) => *tokens = TokenBucket::new(new, t),
            }
        }
        if let Some(breaker) = self.breaker.get_mut() {
            match (from.breaker_on(), to.breaker_on()) {
                (Some(old), Some(new)) if !same_count_window(old, new) => breaker.forget_count_window(),
                (Some(_), Some(_)) | (None, None) => {}
                // Closed with nothing remembered, in the same count of half-open episodes: a
                // probe still out from an earlier one is never taken for a later one's.
                _ => {
                    let _ = breaker.force_close();
                }
            }
        }
        if let Some(limiter) = self.limiter.get_mut() {
            match (from.rate_limit_on(), to.rate_limit_on()) {
                (Some(old), Some(new)) if old != new => limiter.carry(old, new, t),
                (Some(_), Some(_)) | (None, None) => {}
                _ => *limiter = Limiter::new(),
            }
        }
        if from.duty_cycle_on().is_some() != to.duty_cycle_on().is_some() {
            self.airtime = AirtimeLog::new();
        }
        if let Some(cooldown) = self.cooldown.get_mut() {
            match (from.cooldown_on(), to.cooldown_on()) {
                (Some(old), Some(max)) if old != max => cooldown.cut(t, max.as_ticks()),
                (Some(_), Some(_)) | (None, None) => {}
                _ => *cooldown = Cooldown::new(),
            }
        }
        #[cfg(feature = "bulkhead-adaptive")]
        if let Some(bulkhead) = self.bulkhead.get_mut() {
            match (from.adaptive_on().zip(from.bulkhead_on()), to.adaptive_on().zip(to.bulkhead_on())) {
                // What it learnt, within a new floor; `learnt_limit` keeps it within the slots. Only
                // where the floor changed, as every rule here: an operation still running under an
                // earlier configuration of a lower floor may have lowered the limit below this
                // one's, and carrying the state over to the configuration it has changes nothing.
                (Some((old, _)), Some((new, _))) if bulkhead.limit != 0 && old.floor() != new.floor() => {
                    bulkhead.limit = bulkhead.limit.max(new.floor());
                }
                (Some(_), Some(_)) | (None, None) => {}
                _ => (bulkhead.limit, bulkhead.steps, bulkhead.lowered_at) = (0, 0, 0),
            }
        }
        #[cfg(feature = "throttle")]
        if let (true, Some(throttle)) =
            (from.throttle_on().is_some() != to.throttle_on().is_some(), self.throttle.get_mut())
        {
            *throttle = crate::throttle::Throttle::new();
        }
        if let (true, Some(log)) = (
            from.latency_log_samples().is_some() != to.latency_log_samples().is_some(),
            self.latency.get_mut(),
        ) {
            *log = LatencyLog::new();
        }
        Ok(())
    }
}

impl<const HZ: u64, const N: usize, const L: usize> Dependency<HZ, N, L> {
    /// Bounds a state restored from a snapshot by `config` (see [`Dependency::restore`]): what
    /// `config` leaves out is dropped, and what its numbers bound is cut to them, so that a
    /// snapshot saved under another configuration (a firmware update changed it, or the device
    /// restored under the wrong one), or bytes that pass the checksum but no configuration wrote,
    /// hold nothing `config` would not allow. Unlike [`Dependency::reconfigure`], nothing says
    /// which configuration saved the state, so nothing is carried over: an open circuit's break is
    /// cut to `config`'s, a cooldown to its longest, a rate limit's debt and the airtime on record
    /// to what `config` could leave, and a count window its rule could not have filled is
    /// forgotten. A token bucket needs nothing here: it never holds more than its capacity once
    /// brought up to date. A snapshot saved under `config` comes through unchanged, but for a rate
    /// unit or airtime reserved ahead for an attempt that was waiting when it was saved, past the
    /// limit's own wait: the reset ended that attempt.
    pub(crate) fn bound_restored(&mut self, config: &DependencyConfig<HZ>, now: Instant<HZ>) {
        let t = now.as_ticks();
        if let Some(breaker) = self.breaker.get_mut() {
            match config.breaker_on() {
                Some(c) => breaker.bound(c, t),
                None => {
                    let _ = breaker.force_close();
                }
            }
        }
        if let Some(limiter) = self.limiter.get_mut() {
            match config.rate_limit_on() {
                Some(limit) => limiter.bound(limit, t),
                None => *limiter = Limiter::new(),
            }
        }
        match config.duty_cycle_on() {
            Some(duty) => self.airtime.bound(duty, t),
            None => self.airtime = AirtimeLog::new(),
        }
        if let Some(cooldown) = self.cooldown.get_mut() {
            match config.cooldown_on() {
                Some(max) => cooldown.cut(t, max.as_ticks()),
                None => *cooldown = Cooldown::new(),
            }
        }
    }
}

/// Whether a breaker's count window (its outcomes remembered) means the same under `new` as under
/// `old`: one rule, or two count-window rules of one size.
fn same_count_window<const HZ: u64>(old: &BreakerConfig<HZ>, new: &BreakerConfig<HZ>) -> bool {
    if old.trip == new.trip {
        return true;
    }
    match (old.trip, new.trip) {
        #[cfg(feature = "breaker-count-window")]
        (crate::Trip::CountWindow { size: a, .. }, crate::Trip::CountWindow { size: b, .. }) => a == b,
        _ => false,
    }
}
