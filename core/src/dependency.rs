//! One downstream dependency: its configuration, and the shared, mutable state of its protections.
//!
//! Three kinds of state have three owners (see the crate doc): the policy is immutable config, the
//! operation is one call's own `&mut` state machine, and the dependency is what all the calls to one
//! downstream share. The dependency is split in two:
//!
//! - a [`DependencyConfig`]: its window, retry budget, circuit breaker, client throttle, bulkhead,
//!   rate limit, duty cycle and cooldown, usually a `const` (in flash on firmware);
//! - a [`Dependency`]: only what changes (the window of counts, the budget's tokens, the breaker's
//!   state, the throttle's carry, slots in flight and operations waiting for one (and an adaptive
//!   limit's slots), the limiter's next
//!   arrival, the airtime log, the cooldown's end).
//!   This is plain, fixed-size data with no pointers, so it can sit in a `static`, behind any
//!   lock, and be saved across a reset.
//!
//! Many operations use one `Dependency` at once, so the caller keeps it behind a lock of its choice
//! (`critical-section` on firmware, one mutex per dependency on a server) and holds the lock for one
//! call into the core at a time: never across a wait or an attempt.
//!
//! ## The order of admission
//!
//! Before an attempt is dispatched, the protections are consulted in this fixed order, and all of
//! them are checked before any of them is charged, so a refusal never leaves a probe, a slot, a rate
//! unit or a budget token taken:
//!
//! 0. **isolation** (`circuit_isolated`, feature `breaker-isolate`): an operator took the
//!    dependency out ([`Dependency::isolate_circuit`]); it has no end, so it comes before anything
//!    that would name an instant to try again;
//! 1. **cooldown** (`cooldown_active`): the far side said "not before"; nothing else matters, and
//!    nothing is spent finding out;
//! 2. **circuit** (`circuit_open`): our own observation says the dependency is failing; an open
//!    circuit whose break has ended becomes half-open here;
//! 3. **client throttle** (`client_throttled`, feature `throttle`): our own count says the
//!    dependency rejects much of what it is sent ([`crate::ClientThrottle`]); a throttled attempt
//!    never waits in the bulkhead's queue, and one refused after it by another protection did not
//!    reach the dependency, so it leaves the throttle's carry as it was;
//! 4. **bulkhead** (`bulkhead_full`): local capacity, which frees up as attempts end; with a queue
//!    ([`DependencyConfig::bulkhead_queue`]), a full bulkhead is waited for, for a bounded time,
//!    holding a place in the queue and nothing else, and those that wait go first; with an
//!    adaptive limit (`DependencyConfig::adaptive_limit`, feature `bulkhead-adaptive`), its slots
//!    are what the limit has learnt from how attempts ended;
//! 5. **rate limit** (`rate_limited`): a unit is spent only for an attempt that will really go
//!    out, so an open circuit or a full bulkhead never burns the rate;
//! 6. **duty cycle** (`duty_cycle_exceeded`, deferred): the attempt's airtime must fit the duty
//!    cycle when it starts;
//! 7. **retry budget** (`retry_budget_exhausted`), for retries only.
//!
//! A rate unit due soon enough (within the limit's `max_wait`) and airtime free soon enough
//! (within the policy's maximum delay) are both reserved for the instant the attempt can go, and
//! the operation waits for it, holding nothing else; both waits must fit before the deadline. An
//! operation that ends without sending that attempt (cancelled, out of time when polled late, or
//! queued for a slot at that instant) gives both back, where what others took since allows it
//! without letting the limits be exceeded; otherwise they stay spent, and the limits err low.
//!
//! A refusal of the first attempt completes the operation as rejected (deferred, for the cooldown)
//! with its code and, where known, when to try again; a refusal of a later attempt becomes the
//! result, with the last failure kept beside it (seed 003).

#[cfg(feature = "bulkhead-adaptive")]
use crate::adaptive::Sign;
use crate::breaker::{Breaker, BreakerConfig, CircuitState};
use crate::budget::{BudgetKind, Reservation, RetryBudget, TokenBucket, ratio_allows_share, ratio_headroom};
use crate::bulkhead::{Bulkhead, Queue};
use crate::completion::Problem;
use crate::cooldown::Cooldown;
use crate::duty::{AirtimeLog, DutyCycle};
use crate::error::ConfigError;
use crate::latency::LatencyLog;
use crate::limiter::{Limiter, RateLimit};
#[cfg(feature = "throttle")]
use crate::throttle::{Draw, Throttle};
use crate::time::{Duration, Instant, Ticks};
use crate::window::{CallWindow, Counts};

mod reconfigure;

/// No throttle's state where the feature is off.
#[cfg(not(feature = "throttle"))]
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Throttle;
#[cfg(not(feature = "throttle"))]
impl Throttle {
    const fn new() -> Self {
        Self
    }
}

/// A dependency's configuration. Build it with `const fn`s; [`Dependency::new`] validates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DependencyConfig<const HZ: u64> {
    window: Duration<HZ>,
    budget: Option<RetryBudget<HZ>>,
    breaker: Option<BreakerConfig<HZ>>,
    bulkhead: Option<u16>,
    bulkhead_queue: Option<Queue<HZ>>,
    rate_limit: Option<RateLimit<HZ>>,
    duty_cycle: Option<DutyCycle<HZ>>,
    cooldown: Option<Duration<HZ>>,
    #[cfg(feature = "throttle")]
    throttle: Option<crate::ClientThrottle>,
    #[cfg(feature = "bulkhead-adaptive")]
    adaptive: Option<crate::AdaptiveLimit<HZ>>,
    #[cfg(feature = "latency")]
    latency_samples: Option<u16>,
    #[cfg(feature = "criticality")]
    critical_reserve: Option<u8>,
}

impl<const HZ: u64> DependencyConfig<HZ> {
    /// A dependency counted over `window` (seed 000: 10 s) with no protections yet. Without a
    /// budget only single-attempt policies can run against it.
    pub const fn new(window: Duration<HZ>) -> Self {
        Self {
            window,
            budget: None,
            breaker: None,
            bulkhead: None,
            bulkhead_queue: None,
            rate_limit: None,
            duty_cycle: None,
            cooldown: None,
            #[cfg(feature = "throttle")]
            throttle: None,
            #[cfg(feature = "bulkhead-adaptive")]
            adaptive: None,
            #[cfg(feature = "latency")]
            latency_samples: None,
            #[cfg(feature = "criticality")]
            critical_reserve: None,
        }
    }

    /// Sets the retry budget all operations against this dependency share.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn budget(mut self, budget: RetryBudget<HZ>) -> Self {
        self.budget = Some(budget);
        self
    }

    #[cfg(feature = "breaker")]
    /// Adds a circuit breaker.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn breaker(mut self, breaker: BreakerConfig<HZ>) -> Self {
        self.breaker = Some(breaker);
        self
    }

    #[cfg(feature = "bulkhead")]
    /// Allows at most `max_in_flight` attempts at once.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn bulkhead(mut self, max_in_flight: u16) -> Self {
        self.bulkhead = Some(max_in_flight);
        self
    }

    #[cfg(feature = "bulkhead")]
    /// Lets an attempt that finds the bulkhead full wait for a slot, for at most `max_wait` (and
    /// never past the time its operation needs before its deadline), with at most `places`
    /// operations waiting at once; an attempt that finds the queue full too is refused with
    /// `bulkhead_full`, as without a queue. Operations that wait go first: while any waits, an
    /// attempt that did not finds no room. Needs [`bulkhead`](Self::bulkhead). The adapter wakes a
    /// waiting operation when a slot frees (see [`Dependency::slot_for_waiting`]).
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn bulkhead_queue(mut self, places: u16, max_wait: Duration<HZ>) -> Self {
        self.bulkhead_queue = Some(Queue { places, max_wait });
        self
    }

    #[cfg(feature = "bulkhead-adaptive")]
    /// Makes the bulkhead's size adaptive: lowered on signs of overload (transient failures,
    /// attempts that take the limit's `slow` or longer), raised again slot by slot while attempts
    /// come back fast, between the limit's floor and the bulkhead's slots, where it starts
    /// ([`AdaptiveLimit`](crate::AdaptiveLimit)). Needs [`bulkhead`](Self::bulkhead).
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn adaptive_limit(mut self, limit: crate::AdaptiveLimit<HZ>) -> Self {
        self.adaptive = Some(limit);
        self
    }

    #[cfg(feature = "latency")]
    /// Keeps a log of how long attempts take, each weighing half as much every `samples` attempts
    /// after it (20 to 4,000), read as percentiles with
    /// [`Dependency::latency_percentile`]: for a hedge sent at a percentile of the dependency's own
    /// latency ([`HedgeDelay::percentile`](crate::HedgeDelay::percentile)), and for dashboards. A
    /// log
    /// forgets a slowdown after about four times its samples: in the README's evidence, at 1,000
    /// calls a second, 200 followed the dependency and 1,000 still hedged late 3 to 4 s after a
    /// slowdown.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn latency_samples(mut self, samples: u16) -> Self {
        self.latency_samples = Some(samples);
        self
    }

    #[cfg(feature = "rate-limit")]
    /// Limits the rate of attempts, retries included.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn rate_limit(mut self, limit: RateLimit<HZ>) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    #[cfg(feature = "duty-cycle")]
    /// Limits the airtime of attempts, retries included: each costs what its
    /// [`Context::airtime`](crate::Context::airtime) states. The dependency state needs an airtime
    /// log for it (`Dependency<HZ, N, L>` with `L` of at least 1).
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn duty_cycle(mut self, duty: DutyCycle<HZ>) -> Self {
        self.duty_cycle = Some(duty);
        self
    }

    #[cfg(feature = "cooldown")]
    /// Lets a positive Retry-After put the whole dependency in cooldown, for at most `max`.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn cooldown(mut self, max: Duration<HZ>) -> Self {
        self.cooldown = Some(max);
        self
    }

    #[cfg(feature = "throttle")]
    /// Adds a client throttle: attempts are refused locally (`client_throttled`) in proportion to
    /// how much of what the dependency was sent over the window it rejected, so that it is sent
    /// about `K` times what it accepts ([`ClientThrottle`](crate::ClientThrottle)).
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn client_throttle(mut self, throttle: crate::ClientThrottle) -> Self {
        self.throttle = Some(throttle);
        self
    }

    #[cfg(feature = "criticality")]
    #[cfg_attr(docsrs, doc(cfg(feature = "criticality")))]
    /// Keeps `percent` of each limit (the bulkhead's slots, the retry budget, the rate limit's burst,
    /// the duty cycle's airtime) for critical work: an operation whose context is
    /// [`Sheddable`](crate::Criticality::Sheddable) may use the rest only (rounded down, one slot,
    /// token, unit or frame at least), and never waits in the bulkhead's queue. A client throttle
    /// refuses sheddable requests first.
    /// 1 to 90 ([`ConfigError::CriticalReserveOutOfRange`] otherwise). Without it, sheddable work
    /// sees the same limits as critical work. See [`Criticality`](crate::Criticality).
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn critical_reserve(mut self, percent: u8) -> Self {
        self.critical_reserve = Some(percent);
        self
    }

    /// The counting window.
    pub const fn window(&self) -> Duration<HZ> {
        self.window
    }
    /// The retry budget, if any.
    pub const fn retry_budget(&self) -> Option<RetryBudget<HZ>> {
        self.budget
    }
    /// The circuit breaker, if any.
    pub const fn circuit_breaker(&self) -> Option<BreakerConfig<HZ>> {
        self.breaker
    }
    /// The bulkhead's slots, if any.
    pub const fn bulkhead_slots(&self) -> Option<u16> {
        self.bulkhead
    }
    #[cfg(feature = "bulkhead-adaptive")]
    /// The bulkhead's adaptive limit, if any.
    pub const fn adaptive(&self) -> Option<crate::AdaptiveLimit<HZ>> {
        self.adaptive
    }
    /// How many attempts the latency log weighs before it halves their weights, if it is kept
    /// (never without the `latency` feature).
    pub const fn latency_log_samples(&self) -> Option<u16> {
        #[cfg(feature = "latency")]
        return self.latency_samples;
        #[cfg(not(feature = "latency"))]
        None
    }
    /// The share of each limit kept for critical work, in percent, if any
    /// (never without the `criticality` feature).
    pub const fn critical_reserve_percent(&self) -> Option<u8> {
        #[cfg(feature = "criticality")]
        return self.critical_reserve;
        #[cfg(not(feature = "criticality"))]
        None
    }
    /// How many operations may wait for a bulkhead slot at once, if the bulkhead has a queue.
    pub const fn bulkhead_queue_places(&self) -> Option<u16> {
        match self.bulkhead_queue {
            Some(q) => Some(q.places),
            None => None,
        }
    }
    /// The longest an attempt waits for a bulkhead slot, if the bulkhead has a queue.
    pub const fn bulkhead_max_wait(&self) -> Option<Duration<HZ>> {
        match self.bulkhead_queue {
            Some(q) => Some(q.max_wait),
            None => None,
        }
    }
    /// The rate limit, if any.
    pub const fn rate(&self) -> Option<RateLimit<HZ>> {
        self.rate_limit
    }
    /// The duty cycle, if any.
    pub const fn duty(&self) -> Option<DutyCycle<HZ>> {
        self.duty_cycle
    }
    /// The longest cooldown one Retry-After can cause, if the cooldown is on.
    pub const fn cooldown_max(&self) -> Option<Duration<HZ>> {
        self.cooldown
    }
    #[cfg(feature = "throttle")]
    /// The client throttle, if any.
    pub const fn throttle(&self) -> Option<crate::ClientThrottle> {
        self.throttle
    }

    // What the protections' code reads: a protection compiled out reads as never configured, a
    // constant `None`, so its code is not linked.
    #[inline(always)]
    fn breaker_on(&self) -> Option<&BreakerConfig<HZ>> {
        if cfg!(feature = "breaker") { self.breaker.as_ref() } else { None }
    }
    #[inline(always)]
    fn bulkhead_on(&self) -> Option<u16> {
        if cfg!(feature = "bulkhead") { self.bulkhead } else { None }
    }
    #[inline(always)]
    fn bulkhead_queue_on(&self) -> Option<Queue<HZ>> {
        if cfg!(feature = "bulkhead") { self.bulkhead_queue } else { None }
    }
    #[inline(always)]
    fn rate_limit_on(&self) -> Option<&RateLimit<HZ>> {
        if cfg!(feature = "rate-limit") { self.rate_limit.as_ref() } else { None }
    }
    #[inline(always)]
    pub(crate) fn duty_cycle_on(&self) -> Option<&DutyCycle<HZ>> {
        if cfg!(feature = "duty-cycle") { self.duty_cycle.as_ref() } else { None }
    }
    #[inline(always)]
    fn cooldown_on(&self) -> Option<Duration<HZ>> {
        if cfg!(feature = "cooldown") { self.cooldown } else { None }
    }
    #[cfg(feature = "bulkhead-adaptive")]
    #[inline(always)]
    fn adaptive_on(&self) -> Option<&crate::AdaptiveLimit<HZ>> {
        self.adaptive.as_ref()
    }
    #[cfg(feature = "throttle")]
    #[inline(always)]
    fn throttle_on(&self) -> Option<&crate::ClientThrottle> {
        self.throttle.as_ref()
    }

    /// Checks every part of the configuration.
    pub const fn validate(&self) -> Result<(), ConfigError> {
        if self.window.as_ticks() == 0 {
            return Err(ConfigError::ZeroWindow);
        }
        if let Some(b) = &self.breaker {
            if let Err(e) = b.validate() {
                return Err(e);
            }
        }
        if let Some(0) = self.bulkhead {
            return Err(ConfigError::ZeroBulkhead);
        }
        if let Some(q) = &self.bulkhead_queue {
            if self.bulkhead.is_none() {
                return Err(ConfigError::BulkheadQueueWithoutBulkhead);
            }
            if q.places == 0 {
                return Err(ConfigError::ZeroBulkheadQueue);
            }
            if q.max_wait.as_ticks() == 0 {
                return Err(ConfigError::ZeroBulkheadWait);
            }
        }
        #[cfg(feature = "bulkhead-adaptive")]
        if let Some(a) = &self.adaptive {
            if let Err(e) = a.validate(self.bulkhead) {
                return Err(e);
            }
        }
        if let Some(r) = &self.rate_limit {
            if r.count == 0 {
                return Err(ConfigError::ZeroRate);
            }
            if r.period.as_ticks() == 0 {
                return Err(ConfigError::ZeroRatePeriod);
            }
            if r.burst == 0 {
                return Err(ConfigError::ZeroRateBurst);
            }
        }
        if let Some(d) = &self.duty_cycle {
            if let Err(e) = d.validate() {
                return Err(e);
            }
        }
        #[cfg(feature = "throttle")]
        if let Some(t) = &self.throttle {
            if let Err(e) = t.validate() {
                return Err(e);
            }
        }
        #[cfg(feature = "latency")]
        if let Some(n) = self.latency_samples {
            if n < crate::latency::MIN_SAMPLES || n > crate::latency::MAX_SAMPLES {
                return Err(ConfigError::LatencySamplesOutOfRange);
            }
        }
        #[cfg(feature = "criticality")]
        if let Some(r) = self.critical_reserve {
            if r < crate::criticality::MIN_RESERVE || r > crate::criticality::MAX_RESERVE {
                return Err(ConfigError::CriticalReserveOutOfRange);
            }
        }
        if !self.spans_fit() {
            return Err(ConfigError::SpanTooLongForTicks);
        }
        Ok(())
    }

    /// Whether every duration of the configuration is at most [`crate::MAX_SPAN`].
    const fn spans_fit(&self) -> bool {
        let (period, hold) = match &self.budget {
            Some(b) => match b.kind() {
                BudgetKind::TokenBucket { period, hold, .. } => (period.as_ticks(), hold.as_ticks()),
                BudgetKind::Ratio { .. } => (0, 0),
            },
            None => (0, 0),
        };
        let (break_for, slow_call) = match &self.breaker {
            Some(b) => (b.break_for.as_ticks(), ticks_or_zero(b.slow_call)),
            None => (0, 0),
        };
        let (rate_period, max_wait) = match &self.rate_limit {
            Some(r) => (r.period.as_ticks(), r.max_wait.as_ticks()),
            None => (0, 0),
        };
        let queue_wait = match &self.bulkhead_queue {
            Some(q) => q.max_wait.as_ticks(),
            None => 0,
        };
        let duty_window = match &self.duty_cycle {
            Some(d) => d.window.as_ticks(),
            None => 0,
        };
        #[cfg(feature = "bulkhead-adaptive")]
        let adaptive_slow = match &self.adaptive {
            Some(a) => a.slow().as_ticks(),
            None => 0,
        };
        #[cfg(not(feature = "bulkhead-adaptive"))]
        let adaptive_slow = 0;
        crate::time::all_fit(&[
            self.window.as_ticks(),
            period,
            hold,
            break_for,
            slow_call,
            rate_period,
            max_wait,
            queue_wait,
            duty_window,
            ticks_or_zero(self.cooldown),
            adaptive_slow,
        ])
    }
}

/// The bulkhead's slots now: its size `max`, or what its adaptive limit has learnt.
#[inline(always)]
fn slots_now<const HZ: u64>(config: &DependencyConfig<HZ>, max: u16, bulkhead: &Bulkhead) -> u16 {
    #[cfg(feature = "bulkhead-adaptive")]
    if config.adaptive_on().is_some() {
        return bulkhead.learnt_limit(max);
    }
    let _ = (config, bulkhead);
    max
}

/// The bulkhead's slots an attempt held back by `held_back` percent may fill (see
/// [`crate::Criticality`]): all of them for critical work.
#[inline(always)]
fn held_back_slots(slots: u16, held_back: u8) -> u16 {
    #[cfg(feature = "criticality")]
    if held_back > 0 {
        return u16::try_from(crate::criticality::share(u32::from(slots), held_back)).unwrap_or(slots);
    }
    let _ = held_back;
    slots
}

/// The rate limit as an attempt held back by `held_back` percent sees it: its burst cut to its
/// share (see [`crate::Criticality`]), so it goes only while the rest of the burst is left.
#[inline(always)]
fn held_back_burst<const HZ: u64>(limit: &RateLimit<HZ>, held_back: u8) -> RateLimit<HZ> {
    #[cfg(feature = "criticality")]
    if held_back > 0 {
        return limit.burst(crate::criticality::share(limit.burst, held_back));
    }
    let _ = held_back;
    *limit
}

/// The duty cycle as an attempt held back by `held_back` percent sees it: its airtime allowance cut
/// to its share, and never below the attempt's own airtime (one frame at least, as a share is one
/// unit at least).
#[inline(always)]
fn held_back_airtime<const HZ: u64>(duty: &DutyCycle<HZ>, held_back: u8, cost: Ticks) -> DutyCycle<HZ> {
    #[cfg(feature = "criticality")]
    if held_back > 0 {
        let allowance = duty.airtime.as_ticks();
        let share = crate::criticality::share_ticks(allowance, held_back).max(cost).min(allowance);
        return DutyCycle { airtime: Duration::<HZ>::from_ticks(share), window: duty.window };
    }
    let _ = (held_back, cost);
    *duty
}

/// A duration's ticks, or zero for none.
const fn ticks_or_zero<const HZ: u64>(d: Option<Duration<HZ>>) -> Ticks {
    match d {
        Some(d) => d.as_ticks(),
        None => 0,
    }
}

/// One protection's state: an array of one when its feature is compiled in, of none otherwise, so
/// a protection compiled out takes no memory, and reaching its state is an `Option` like reaching
/// its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Part<T, const ON: usize>(pub(crate) [T; ON]);

impl<T, const ON: usize> Part<T, ON> {
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.first()
    }
    fn get_mut(&mut self) -> Option<&mut T> {
        self.0.first_mut()
    }
}

/// Whether each part's state is compiled in (1) or not (0).
pub(crate) const TOKEN_BUCKET: usize = cfg!(feature = "token-bucket") as usize;
pub(crate) const BREAKER: usize = cfg!(feature = "breaker") as usize;
pub(crate) const RATE_LIMIT: usize = cfg!(feature = "rate-limit") as usize;
pub(crate) const COOLDOWN: usize = cfg!(feature = "cooldown") as usize;
pub(crate) const BULKHEAD: usize = cfg!(feature = "bulkhead") as usize;
pub(crate) const THROTTLE: usize = cfg!(feature = "throttle") as usize;
pub(crate) const LATENCY: usize = cfg!(feature = "latency") as usize;

/// The shared state of one dependency, with `N` buckets in its counting window and room for `L`
/// transmissions in its airtime log (only a duty cycle uses it; 0 by default, costing nothing).
///
/// Call-order contract: every method that takes `now` must be given a `now` that does not go
/// backwards across all the operations that share this dependency (an earlier one is read as the
/// latest seen), and the same [`DependencyConfig`] it was built from, or the one it was last
/// carried over to by [`Dependency::reconfigure`] (operations started before that may go on with
/// theirs until they end). Operations reach it through
/// [`Operation`](crate::Operation)'s methods; the public getters are for dashboards and tests.
///
/// What the operations against one dependency share, in an outage where every call fails: the
/// first read spends the budget's floor on its retries, the second is refused a retry by the
/// budget, and the fifth failure in a row opens the circuit, which then refuses reads before they
/// are sent.
///
/// ```
/// use relent_core::{
///     Action, BreakerConfig, CircuitState, Context, Dependency, DependencyConfig, Duration, Instant, Jitter,
///     Operation, Problem, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
/// };
/// type D = Duration<1_000>; // ticks of 1 ms
///
/// const POLICY: RetryPolicy<1_000> = match RetryPolicy::constant(3, D::from_millis(100)).jitter(Jitter::None).build() {
///     Ok(p) => p,
///     Err(e) => panic!("{}", e.message()),
/// };
/// // Retries at most 10 % of the calls in any 10 s, plus 2; open for 30 s after 5 failures in a row.
/// const PAYRAIL: DependencyConfig<1_000> = DependencyConfig::new(D::from_secs(10))
///     .budget(match RetryBudget::ratio(10, 2) { Ok(b) => b, Err(e) => panic!("{}", e.message()) })
///     .breaker(BreakerConfig::consecutive_failures(5, D::from_secs(30)));
/// # struct Rng(u64);
/// # impl relent_core::rand_core::RngCore for Rng {
/// #     fn next_u32(&mut self) -> u32 { self.next_u64() as u32 }
/// #     fn next_u64(&mut self) -> u64 { self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1); self.0 }
/// #     fn fill_bytes(&mut self, d: &mut [u8]) { d.fill(0) }
/// # }
///
/// /// One read in the outage (each attempt fails after 20 ms): its attempts, and why it ended.
/// fn read(payrail: &mut Dependency<1_000, 10>, now: &mut Instant<1_000>) -> (u8, Option<Problem>) {
///     let context = Context::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_secs(60)));
///     let mut op = Operation::<1_000, Verdict<1_000>>::start(&POLICY, &PAYRAIL, context, *now).unwrap();
///     loop {
///         match op.poll(*now, payrail, &mut ()) {
///             Action::Dispatch(attempt) => {
///                 *now = Instant::from_ticks(now.as_ticks() + 20);
///                 op.on_failure(attempt, *now, payrail, &mut Rng(1), Verdict::Retryable, &mut ());
///             }
///             Action::Wait { until } => *now = until,
///             Action::Done => break,
///         }
///     }
///     let done = op.take_completion().unwrap();
///     (done.summary.dispatched, done.problem)
/// }
///
/// let mut now = Instant::from_ticks(0);
/// let mut payrail = Dependency::<1_000, 10>::new(&PAYRAIL, now)?;
/// assert_eq!(read(&mut payrail, &mut now), (3, Some(Problem::AttemptsExhausted)));
/// assert_eq!(read(&mut payrail, &mut now), (1, Some(Problem::RetryBudgetExhausted)));
/// assert_eq!(payrail.circuit(now), CircuitState::Closed);
/// assert_eq!(read(&mut payrail, &mut now), (1, Some(Problem::CircuitOpen)));
/// assert_eq!(read(&mut payrail, &mut now), (0, Some(Problem::CircuitOpen)));
/// // What a dashboard reads: the window's counts, the circuit and when its break ends.
/// let counts = payrail.counts(now);
/// assert_eq!((counts.calls, counts.retries, counts.failures), (5, 2, 5));
/// assert_eq!(payrail.circuit_open_until(now), Some(Instant::from_ticks(300 + 30_000)));
/// assert_eq!(payrail.retries_available(&PAYRAIL, now), Some(0));
/// # Ok::<(), relent_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Dependency<const HZ: u64, const N: usize, const L: usize = 0> {
    pub(crate) window: CallWindow<N>,
    /// A token-bucket budget's state; unused by a ratio budget, which reads only the window.
    tokens: Part<TokenBucket, TOKEN_BUCKET>,
    breaker: Part<Breaker, BREAKER>,
    limiter: Part<Limiter, RATE_LIMIT>,
    airtime: AirtimeLog<L>,
    cooldown: Part<Cooldown, COOLDOWN>,
    bulkhead: Part<Bulkhead, BULKHEAD>,
    throttle: Part<Throttle, THROTTLE>,
    latency: Part<LatencyLog, LATENCY>,
}

/// What an admitted attempt holds, to be given back when it ends: a budget reservation, a
/// half-open probe (of an episode), a bulkhead slot. Packed into 8 bytes so that an admission
/// comes back from `admit` in registers rather than through memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Ticket {
    /// The reservation's epoch, when `HAS_RESERVATION` is set.
    epoch: u32,
    /// The half-open episode this attempt probes, when `HAS_PROBE` is set.
    episode: u16,
    flags: u8,
}

impl Ticket {
    const HAS_RESERVATION: u8 = 1;
    const HAS_PROBE: u8 = 2;
    const SLOT: u8 = 4;

    #[inline]
    fn new(reservation: Option<Reservation>, probe: Option<u16>, slot: bool) -> Self {
        let mut flags = 0;
        if reservation.is_some() {
            flags |= Self::HAS_RESERVATION;
        }
        if probe.is_some() {
            flags |= Self::HAS_PROBE;
        }
        if slot {
            flags |= Self::SLOT;
        }
        Self { epoch: reservation.map_or(0, Reservation::epoch), episode: probe.unwrap_or(0), flags }
    }

    fn reservation(self) -> Option<Reservation> {
        (self.flags & Self::HAS_RESERVATION != 0).then(|| Reservation::of_epoch(self.epoch))
    }

    fn probe(self) -> Option<u16> {
        (self.flags & Self::HAS_PROBE != 0).then_some(self.episode)
    }

    fn slot(self) -> bool {
        self.flags & Self::SLOT != 0
    }
}

/// What an attempt asks of the protections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request {
    /// Attempt 2 or later, paid for by the retry budget.
    pub(crate) retry: bool,
    /// A rate unit and the attempt's airtime were reserved for it while it waited.
    pub(crate) reserved: bool,
    /// It holds a place in the bulkhead's queue, which it waits in until `queue_until`.
    pub(crate) queued: bool,
    /// When its wait in the bulkhead's queue ends (read only if `queued`).
    pub(crate) queue_until: Ticks,
    /// The last tick at which the operation could still start this attempt.
    pub(crate) latest_start: Ticks,
    /// The attempt's airtime, in ticks (a duty cycle charges it).
    pub(crate) airtime: Ticks,
    /// The longest wait for airtime that fits the policy (its maximum delay), in ticks.
    pub(crate) airtime_wait: Ticks,
    /// The share of each limit, in percent, it may not use: the critical
    /// reserve for sheddable work, 0 otherwise (see [`crate::Criticality`]).
    pub(crate) held_back: u8,
}

/// What an admitted attempt waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitFor {
    RateUnit,
    Airtime,
}

/// The answer to "may this attempt go at `now`?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Go; the ticket must be given back.
    Go(Ticket),
    /// A rate unit and airtime were reserved for this instant: wait for it, holding nothing else.
    Wait(Ticks, WaitFor),
    /// The bulkhead is full: wait in its queue for a slot, until this instant at the latest,
    /// holding a place in it and nothing else.
    Queued(Ticks),
    /// Refused by a protection, with its problem code and, where known, when to try again
    /// (always after `now`, so never zero: with `NonZero` ticks and the ticket packed, an admission
    /// is 16 bytes and comes back from `admit` in registers).
    Refused { problem: Problem, until: Option<core::num::NonZero<Ticks>> },
}

/// How an attempt ended, for the protections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Succeeded,
    Failed {
        retry_after: Option<Ticks>,
        /// The caller's classifier called it transient (a sign of overload to an adaptive limit).
        /// Only where the adaptive limit is compiled in: firmware without it keeps the 4 bytes of
        /// flash and the instructions a failure's decision took before it.
        #[cfg(feature = "bulkhead-adaptive")]
        transient: bool,
    },
    /// Cancelled by the caller, or lost: no outcome is known.
    Abandoned,
}

/// State changes an observer hears about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Changes {
    pub(crate) circuit: Option<CircuitState>,
    pub(crate) cooldown_until: Option<Ticks>,
    /// The adaptive limit's move, from and to.
    #[cfg(feature = "bulkhead-adaptive")]
    pub(crate) limit: Option<(u16, u16)>,
}

impl<const HZ: u64, const N: usize, const L: usize> Dependency<HZ, N, L> {
    /// Fresh state at `now` (a full token bucket, an empty window, a closed circuit), after
    /// validating `config`. `N` must be at least 1 (a build error otherwise), and the window at
    /// least `N` ticks long; a duty cycle needs an airtime log of at least one entry (`L`). A
    /// `const fn`, so the state can be a `static`'s initial value.
    pub const fn new(config: &DependencyConfig<HZ>, now: Instant<HZ>) -> Result<Self, ConfigError> {
        let width = match Self::bucket_width_for(config) {
            Ok(w) => w,
            Err(e) => return Err(e),
        };
        let bucket = match &config.budget {
            Some(b) => b.bucket(),
            None => None,
        };
        #[cfg(feature = "token-bucket")]
        let tokens = [TokenBucket::new(bucket, now.as_ticks())];
        #[cfg(not(feature = "token-bucket"))]
        let tokens = {
            let _ = bucket;
            []
        };
        Ok(Self {
            window: CallWindow::new(width, now),
            tokens: Part(tokens),
            breaker: Part([const { Breaker::new() }; BREAKER]),
            limiter: Part([const { Limiter::new() }; RATE_LIMIT]),
            airtime: AirtimeLog::new(),
            cooldown: Part([const { Cooldown::new() }; COOLDOWN]),
            bulkhead: Part([const { Bulkhead::new() }; BULKHEAD]),
            throttle: Part([const { Throttle::new() }; THROTTLE]),
            latency: Part([const { LatencyLog::new() }; LATENCY]),
        })
    }

    /// The width of the window's buckets under `config`, after every check a state for it needs:
    /// `config` itself valid, its window at least `N` ticks long, and an airtime log of at least
    /// one entry for a duty cycle. What [`Dependency::new`] and [`Dependency::reconfigure`] both
    /// check.
    const fn bucket_width_for(config: &DependencyConfig<HZ>) -> Result<Ticks, ConfigError> {
        if let Err(e) = config.validate() {
            return Err(e);
        }
        let width = match config.window.as_ticks().checked_div(CallWindow::<N>::SLOTS) {
            Some(w) => w,
            None => 0,
        };
        if width == 0 {
            return Err(ConfigError::WindowShorterThanBuckets);
        }
        if config.duty_cycle.is_some() && L == 0 {
            return Err(ConfigError::AirtimeLogSize);
        }
        Ok(width)
    }

    /// Restarts this dependency's clock `by` ticks later: every instant it holds moves `by` ticks
    /// earlier, so that it reads the same on a clock whose tick 0 is the old clock's tick `by`.
    /// Each [`Operation`](crate::Operation) that uses it must be rebased by the same amount before
    /// its next call ([`Operation::rebase`](crate::Operation::rebase)).
    ///
    /// This is how 32-bit ticks (the `ticks-u32` feature) run for longer than 2^32 ticks (49.7 days
    /// at 1 kHz): relent-embassy restarts the clock 2^30 ticks later each time it reaches 2^31.
    ///
    /// An instant more than `by` ticks before the old clock's `now` becomes tick 0 of the new one. That
    /// is exact as long as the new clock's `now` is at least [`crate::MAX_SPAN`] (every span in the
    /// configuration is at most that, so tick 0 is then as long ago as anything the state
    /// remembers), with one conservative exception: a token bucket idle since before the new tick
    /// 0 counts its refill from tick 0, and may hold less credit than it earned, never more.
    pub fn rebase(&mut self, by: Duration<HZ>) {
        let by = by.as_ticks();
        self.window.rebase(by);
        if let Some(t) = self.tokens.get_mut() {
            t.rebase(by);
        }
        if let Some(b) = self.breaker.get_mut() {
            b.rebase(by);
        }
        if let Some(l) = self.limiter.get_mut() {
            l.rebase(by);
        }
        self.airtime.rebase(by);
        if let Some(c) = self.cooldown.get_mut() {
            c.rebase(by);
        }
        #[cfg(feature = "bulkhead-adaptive")]
        if let Some(b) = self.bulkhead.get_mut() {
            b.rebase_learnt(by);
        }
    }

    /// The parts a snapshot saves, in order.
    #[allow(clippy::type_complexity)]
    pub(crate) const fn parts(
        &self,
    ) -> (
        &CallWindow<N>,
        &Part<TokenBucket, TOKEN_BUCKET>,
        &Part<Breaker, BREAKER>,
        &Part<Limiter, RATE_LIMIT>,
        &AirtimeLog<L>,
        &Part<Cooldown, COOLDOWN>,
    ) {
        (&self.window, &self.tokens, &self.breaker, &self.limiter, &self.airtime, &self.cooldown)
    }

    /// A dependency from restored parts, with no attempt in flight.
    pub(crate) const fn from_parts(
        window: CallWindow<N>,
        tokens: Part<TokenBucket, TOKEN_BUCKET>,
        breaker: Part<Breaker, BREAKER>,
        limiter: Part<Limiter, RATE_LIMIT>,
        airtime: AirtimeLog<L>,
        cooldown: Part<Cooldown, COOLDOWN>,
    ) -> Self {
        let bulkhead = Part([const { Bulkhead::new() }; BULKHEAD]);
        // The throttle's carry, under one request, and its share of sheddable work are not saved:
        // they start again from none.
        let throttle = Part([const { Throttle::new() }; THROTTLE]);
        // Nor the latency log: it learns again within its samples.
        let latency = Part([const { LatencyLog::new() }; LATENCY]);
        Self { window, tokens, breaker, limiter, airtime, cooldown, bulkhead, throttle, latency }
    }

    /// Calls, retries and failures over the window at `now` (and the attempts the client throttle
    /// refused, with feature `throttle`).
    pub fn counts(&mut self, now: Instant<HZ>) -> Counts {
        self.window.totals(now)
    }

    #[cfg(feature = "throttle")]
    /// The client throttle's probability of refusing the next attempt at `now`, in parts per
    /// million (rounded down; 0 while the dependency accepts at least `1/K` of what it is sent);
    /// `None` without a throttle. For a dashboard: the refusals themselves are in
    /// [`counts`](Self::counts)' `throttled`.
    pub fn throttle_ppm(&mut self, config: &DependencyConfig<HZ>, now: Instant<HZ>) -> Option<u32> {
        let throttle = config.throttle_on()?;
        Some(crate::throttle::to_ppm(throttle.probability(self.window.totals(now))))
    }

    /// How many more retries the budget would allow at `now` if no other call were made: tokens
    /// available for a token bucket, retries left in the window for a ratio budget; `None` without
    /// a budget.
    pub fn retries_available(&mut self, config: &DependencyConfig<HZ>, now: Instant<HZ>) -> Option<u32> {
        let budget = config.budget?;
        match (budget.kind(), budget.bucket()) {
            (_, Some(bucket)) => {
                self.tokens.get_mut().map(|tokens| tokens.available(&bucket, now.as_ticks()))
            }
            (BudgetKind::Ratio { percent, floor }, None) => {
                Some(ratio_headroom(self.window.totals(now), percent, floor))
            }
            (BudgetKind::TokenBucket { .. }, None) => None,
        }
    }

    /// The circuit's state at `now` (an open circuit whose break has ended reads as half-open).
    pub fn circuit(&self, now: Instant<HZ>) -> CircuitState {
        let Some(breaker) = self.breaker.get() else {
            return CircuitState::Closed;
        };
        match breaker.open_until() {
            Some(until) if now.as_ticks() >= until => CircuitState::HalfOpen,
            _ => breaker.state(),
        }
    }

    /// The end of the circuit's break, if it is open at `now`.
    pub fn circuit_open_until(&self, now: Instant<HZ>) -> Option<Instant<HZ>> {
        match self.breaker.get()?.open_until() {
            Some(until) if now.as_ticks() < until => Some(Instant::<HZ>::from_ticks(until)),
            _ => None,
        }
    }

    /// Isolates the circuit: from now on every attempt is refused with
    /// [`Problem::CircuitIsolated`] (disposition rejected, no instant to try again), whatever the
    /// counts say, until [`close_circuit`](Self::close_circuit). For an operator in an incident
    /// (Polly's `Isolate`, resilience4j's forced open state): a provider known to be down, or one
    /// that must not be called during a migration. It comes first in admission, before the
    /// cooldown, since it outlasts any instant the others would name. An operation whose attempt
    /// fails while the circuit is isolated ends at once with that code, rather than wait out a
    /// backoff (or be deferred) for a retry that could not go; one already waiting is refused when
    /// its retry is due. The isolation is saved in a snapshot and outlives a deep sleep.
    ///
    /// Returns the change to report, `None` if the circuit was isolated already. Attempts in
    /// flight finish; their outcomes are counted in the window (which a ratio budget reads) but
    /// move no circuit, as late outcomes of an open one do not. A dependency whose configuration
    /// has no breaker has no circuit to isolate: [`ConfigError::NoBreaker`].
    ///
    /// ```
    /// use relent_core::{BreakerConfig, CircuitState, Dependency, DependencyConfig, Duration, Instant};
    /// type D = Duration<1_000>;
    ///
    /// const PAYRAIL: DependencyConfig<1_000> =
    ///     DependencyConfig::new(D::from_secs(10)).breaker(BreakerConfig::consecutive_failures(5, D::from_secs(30)));
    /// let now = Instant::from_ticks(0);
    /// let mut payrail = Dependency::<1_000, 4>::new(&PAYRAIL, now)?;
    /// assert_eq!(payrail.isolate_circuit(&PAYRAIL), Ok(Some(CircuitState::Isolated)));
    /// assert_eq!(payrail.isolate_circuit(&PAYRAIL), Ok(None)); // already
    /// assert_eq!((payrail.circuit(now), payrail.circuit_open_until(now)), (CircuitState::Isolated, None));
    /// assert_eq!(payrail.close_circuit(&PAYRAIL), Ok(Some(CircuitState::Closed)));
    /// assert_eq!(payrail.circuit(now), CircuitState::Closed);
    /// # Ok::<(), relent_core::ConfigError>(())
    /// ```
    ///
    /// Feature `breaker-isolate` (on by default): on a Cortex-M3 the checks cost about 100 bytes
    /// of flash, which firmware that never isolates a circuit keeps by leaving it out.
    #[cfg(feature = "breaker-isolate")]
    pub fn isolate_circuit(
        &mut self,
        config: &DependencyConfig<HZ>,
    ) -> Result<Option<CircuitState>, ConfigError> {
        match (config.breaker_on(), self.breaker.get_mut()) {
            (Some(_), Some(breaker)) => Ok(breaker.isolate()),
            _ => Err(ConfigError::NoBreaker),
        }
    }

    /// Closes the circuit from any state (isolated, open, half-open) and starts its counts afresh:
    /// the breaker's run of failures or count window, and the window's failures (which a ratio
    /// budget reads too), as when probes close it. Calls go through at once. For an operator
    /// ending an isolation, or overriding a break after fixing what tripped it.
    ///
    /// Returns the change to report, `None` if the circuit was closed already (its counts are
    /// cleared all the same). [`ConfigError::NoBreaker`] without a breaker.
    pub fn close_circuit(
        &mut self,
        config: &DependencyConfig<HZ>,
    ) -> Result<Option<CircuitState>, ConfigError> {
        let (Some(_), Some(breaker)) = (config.breaker_on(), self.breaker.get_mut()) else {
            return Err(ConfigError::NoBreaker);
        };
        let change = breaker.force_close();
        self.window.clear_failures();
        Ok(change)
    }

    /// Whether an operator isolated the circuit ([`isolate_circuit`](Self::isolate_circuit)).
    #[cfg(feature = "breaker-isolate")]
    pub(crate) fn circuit_isolated(&self) -> bool {
        self.breaker.get().is_some_and(|b| b.state() == CircuitState::Isolated)
    }

    /// Attempts in flight (holding a bulkhead slot).
    pub fn in_flight(&self) -> u16 {
        self.bulkhead.get().map_or(0, Bulkhead::in_flight)
    }

    /// The bulkhead's slots now: its size, or, with an adaptive limit, what the limit has learnt
    /// ([`AdaptiveLimit`](crate::AdaptiveLimit)); `None` without a bulkhead.
    pub fn bulkhead_limit(&self, config: &DependencyConfig<HZ>) -> Option<u16> {
        match (config.bulkhead_on(), self.bulkhead.get()) {
            (Some(max), Some(bulkhead)) => Some(slots_now(config, max, bulkhead)),
            _ => None,
        }
    }

    /// The `percent`th percentile (1 to 99) of how long attempts took, from the latency log
    /// (`DependencyConfig::latency_samples`, feature `latency`): the largest value of its bucket,
    /// at most a quarter above the true one, never below. `None` without a log, for a percent out
    /// of range, or until one attempt's weight lies above the percentile (20 attempts for the
    /// 95th).
    pub fn latency_percentile(&self, config: &DependencyConfig<HZ>, percent: u8) -> Option<Duration<HZ>> {
        config.latency_log_samples()?;
        let ticks = self.latency.get()?.percentile(percent)?;
        Some(Duration::<HZ>::from_ticks(ticks))
    }

    /// Operations waiting in the bulkhead's queue for a slot.
    pub fn bulkhead_waiting(&self) -> u16 {
        self.bulkhead.get().map_or(0, Bulkhead::waiting)
    }

    /// Whether a bulkhead slot is free while operations wait for one: an adapter that finds this
    /// after any call into the core wakes one waiting operation, which polls and takes the slot
    /// (the core cannot know when a slot frees, so a waiting operation is never woken by it). False
    /// without a queue. An adapter that never wakes them is still correct, only slower: each
    /// waiting operation tries once more at the end of its wait, and until then the free slot
    /// stays free, as the operations that did not wait find no room while any does.
    ///
    /// After a [reconfiguration](Dependency::reconfigure), pass the configuration in force: a
    /// waiting operation that started under another takes a slot under its own, which
    /// [`Operation::slot_free`](crate::Operation::slot_free) reads; one woken that finds none
    /// must not wake the queue again for it, or the two wake each other in a loop.
    pub fn slot_for_waiting(&self, config: &DependencyConfig<HZ>) -> bool {
        match (config.bulkhead_on(), self.bulkhead.get()) {
            (Some(max), Some(bulkhead)) => {
                bulkhead.waiting() > 0 && bulkhead.has_room(slots_now(config, max, bulkhead))
            }
            _ => false,
        }
    }

    /// An operation waiting in the bulkhead's queue ends without asking for its slot again (its
    /// deadline, its replay statement, or its caller ended it).
    pub(crate) fn leave_queue(&mut self) {
        if let Some(bulkhead) = self.bulkhead.get_mut() {
            bulkhead.leave();
        }
    }

    /// The end of the cooldown, if it is active at `now`.
    pub fn cooldown_until(&self, now: Instant<HZ>) -> Option<Instant<HZ>> {
        self.cooldown.get()?.active_until(now.as_ticks()).map(Instant::<HZ>::from_ticks)
    }

    /// The earliest instant at or after `now` at which the rate limit allows an attempt.
    pub fn next_rate_unit(&self, config: &DependencyConfig<HZ>, now: Instant<HZ>) -> Instant<HZ> {
        match (config.rate_limit_on(), self.limiter.get()) {
            (Some(limit), Some(limiter)) => Instant::<HZ>::from_ticks(limiter.next_at(limit, now.as_ticks())),
            _ => now,
        }
    }

    /// The earliest instant at or after `now` at which the duty cycle allows an attempt of
    /// `airtime`; `now` without a duty cycle, `None` if it never can (more than the allowance).
    pub fn next_airtime(
        &self,
        config: &DependencyConfig<HZ>,
        now: Instant<HZ>,
        airtime: Duration<HZ>,
    ) -> Option<Instant<HZ>> {
        match config.duty_cycle_on() {
            Some(duty) => {
                self.airtime.next_at(duty, now.as_ticks(), airtime.as_ticks()).map(Instant::<HZ>::from_ticks)
            }
            None => Some(now),
        }
    }

    /// Airtime that counts against the duty cycle at `now`: what was sent in the last window, by
    /// the conservative rule of [`DutyCycle`] (zero without a duty cycle).
    pub fn airtime_used(&self, config: &DependencyConfig<HZ>, now: Instant<HZ>) -> Duration<HZ> {
        let used = match config.duty_cycle_on() {
            Some(_) => self.airtime.load(now.as_ticks()),
            None => 0,
        };
        Duration::<HZ>::from_ticks(used)
    }

    /// Whether the budget would allow a retry at `now`, without taking anything, right after
    /// [`complete`](Self::complete) counted a failure at `now` (the window is there already).
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(crate) fn retry_allowed_after_failure(
        &mut self,
        config: &DependencyConfig<HZ>,
        now: Instant<HZ>,
        held_back: u8,
    ) -> bool {
        let Some(budget) = config.budget else {
            return false;
        };
        match (budget.kind(), budget.bucket()) {
            (_, Some(bucket)) => self
                .tokens
                .get_mut()
                .is_some_and(|t| t.available(&bucket, now.as_ticks()) > bucket.held_back_tokens(held_back)),
            (BudgetKind::Ratio { percent, floor }, None) => {
                ratio_allows_share(self.window.totals_as_moved(now), percent, floor, held_back)
            }
            (BudgetKind::TokenBucket { .. }, None) => false,
        }
    }

    /// Admits one attempt at `now` (see the module doc for the order). A rate unit or airtime that
    /// is only free later is waited for when the waits fit `request`.
    pub(crate) fn admit(
        &mut self,
        config: &DependencyConfig<HZ>,
        now: Instant<HZ>,
        request: Request,
        changes: &mut Changes,
    ) -> Admission {
        let t = now.as_ticks();
        let refuse = |problem, until: Option<Ticks>| Admission::Refused {
            problem,
            until: until.and_then(core::num::NonZero::<Ticks>::new),
        };
        // A place in the bulkhead's queue is given back whatever comes of this admission, and taken
        // again below if the attempt goes on waiting.
        if let (true, Some(bulkhead)) = (request.queued, self.bulkhead.get_mut()) {
            bulkhead.leave();
        }
        // An operator's isolation first: it outlasts any instant the others would name.
        #[cfg(feature = "breaker-isolate")]
        if self.circuit_isolated() {
            return refuse(Problem::CircuitIsolated, None);
        }
        if let (Some(_), Some(cooldown)) = (config.cooldown_on(), self.cooldown.get()) {
            if let Some(until) = cooldown.active_until(t) {
                return refuse(Problem::CooldownActive, Some(until));
            }
        }
        let mut probe = None;
        if let (Some(config), Some(breaker)) = (config.breaker_on(), self.breaker.get_mut()) {
            let (verdict, transition) = breaker.check(config.probes, t);
            changes.circuit = transition;
            match verdict {
                Ok(is_probe) => probe = is_probe,
                Err(refused) => return refuse(Problem::CircuitOpen, refused.until),
            }
        }
        // The carry the throttle keeps if this attempt goes out.
        #[cfg(feature = "throttle")]
        let mut throttle_carry = None;
        #[cfg(feature = "throttle")]
        if let (Some(throttle), Some(state)) = (config.throttle_on(), self.throttle.get_mut()) {
            let p = throttle.probability(self.window.totals(now));
            // With a critical reserve, sheddable requests are refused first.
            #[cfg(feature = "criticality")]
            let p = match config.critical_reserve_percent() {
                Some(_) => state.for_class(p, request.held_back > 0),
                None => p,
            };
            match state.draw(p) {
                Draw::Refuse(carry) => {
                    state.keep(carry);
                    self.window.record_throttled(now);
                    return refuse(Problem::ClientThrottled, None);
                }
                Draw::Pass(carry) => throttle_carry = Some(carry),
            }
        }
        if let (Some(max), Some(bulkhead)) = (config.bulkhead_on(), self.bulkhead.get_mut()) {
            // Those that wait go first: an attempt that did not wait finds no room while any does.
            // Sheddable work finds room in its share of the slots only, and never waits.
            if !bulkhead.has_room(held_back_slots(slots_now(config, max, bulkhead), request.held_back))
                || (!request.queued && bulkhead.waiting() > 0)
            {
                if let (Some(queue), 0) = (config.bulkhead_queue_on(), request.held_back) {
                    let until = if request.queued {
                        request.queue_until
                    } else {
                        t.saturating_add(queue.max_wait.as_ticks()).min(request.latest_start)
                    };
                    if t < until && (request.queued || bulkhead.waiting() < queue.places) {
                        bulkhead.join();
                        return Admission::Queued(until);
                    }
                }
                return refuse(Problem::BulkheadFull, None);
            }
        }
        // When the attempt can go: now, or later if the rate limit or the duty cycle says so.
        let mut go = t;
        let mut wait_for = WaitFor::RateUnit;
        if let (Some(limit), Some(limiter), false) =
            (config.rate_limit_on(), self.limiter.get(), request.reserved)
        {
            let due = limiter.next_at(&held_back_burst(limit, request.held_back), t);
            if due > t {
                let wait = due.saturating_sub(t);
                if wait > limit.max_wait.as_ticks() || due > request.latest_start {
                    return refuse(Problem::RateLimited, Some(due));
                }
                go = due;
            }
        }
        if let (Some(duty), false) = (config.duty_cycle_on(), request.reserved) {
            self.airtime.prune(t);
            let duty = held_back_airtime(duty, request.held_back, request.airtime);
            let Some(free) = self.airtime.next_at(&duty, go, request.airtime) else {
                // More than the whole allowance (refused at start; kept for safety).
                return refuse(Problem::DutyCycleExceeded, None);
            };
            if free > go {
                if free.saturating_sub(t) > request.airtime_wait || free > request.latest_start {
                    return refuse(Problem::DutyCycleExceeded, Some(free));
                }
                go = free;
                wait_for = WaitFor::Airtime;
            }
        }
        if go > t {
            // Reserved for the tick the attempt will go out, not now: the unit's arrival and the
            // airtime's start are that tick, so the limits hold for dispatch times exactly.
            self.charge_timed(config, go, request.airtime);
            return Admission::Wait(go, wait_for);
        }
        let mut reservation = None;
        if request.retry {
            let Some(budget) = config.budget else {
                return refuse(Problem::RetryBudgetExhausted, None);
            };
            match (budget.kind(), budget.bucket()) {
                (_, Some(bucket)) => {
                    let keep = bucket.held_back_tokens(request.held_back);
                    match self.tokens.get_mut().and_then(|tokens| tokens.reserve(&bucket, t, keep)) {
                        Some(r) => reservation = Some(r),
                        None => return refuse(Problem::RetryBudgetExhausted, None),
                    }
                }
                (BudgetKind::Ratio { percent, floor }, None) => {
                    if !ratio_allows_share(self.window.totals(now), percent, floor, request.held_back) {
                        return refuse(Problem::RetryBudgetExhausted, None);
                    }
                }
                (BudgetKind::TokenBucket { .. }, None) => {
                    return refuse(Problem::RetryBudgetExhausted, None);
                }
            }
        }
        // Everything allows it: charge.
        if let (Some(_), Some(breaker)) = (probe, self.breaker.get_mut()) {
            breaker.take_probe();
        }
        let slot = match (config.bulkhead_on(), self.bulkhead.get_mut()) {
            (Some(_), Some(bulkhead)) => {
                bulkhead.take();
                true
            }
            _ => false,
        };
        if !request.reserved {
            self.charge_timed(config, t, request.airtime);
        }
        #[cfg(feature = "throttle")]
        if let (Some(carry), Some(state)) = (throttle_carry, self.throttle.get_mut()) {
            state.keep(carry);
        }
        self.window.record_call(now, request.retry);
        Admission::Go(Ticket::new(reservation, probe, slot))
    }

    /// Gives back the rate unit and the airtime reserved at `at` for an attempt of `airtime` that
    /// will not go out: its operation ended while it waited for them (cancelled, or its deadline
    /// or replay statement ran out before it was polled again). What others took since may keep
    /// them spent (see `Limiter::give_back` and `AirtimeLog::give_back`): the limits only err low.
    pub(crate) fn give_back_reserved(&mut self, config: &DependencyConfig<HZ>, at: Ticks, airtime: Ticks) {
        if let (Some(limit), Some(limiter)) = (config.rate_limit_on(), self.limiter.get_mut()) {
            limiter.give_back(limit, at);
        }
        if let Some(duty) = config.duty_cycle_on() {
            self.airtime.give_back(duty, at, airtime);
        }
    }

    /// Takes a rate unit and records the airtime for an attempt going out at `at`. Inlined on hosts:
    /// without a rate limit or a duty cycle it is two checks, and once `admit` grew with
    /// criticality's shares the compiler stopped inlining it, for 14 instructions more on every
    /// admission (callgrind on relent-adapter-bench's production bench, success path).
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn charge_timed(&mut self, config: &DependencyConfig<HZ>, at: Ticks, airtime: Ticks) {
        if let (Some(limit), Some(limiter)) = (config.rate_limit_on(), self.limiter.get_mut()) {
            limiter.take(limit, at);
        }
        if let Some(duty) = config.duty_cycle_on() {
            self.airtime.record(duty, at, airtime);
        }
    }

    /// Gives back what `ticket` holds and records how its attempt ended, `took` after dispatch.
    /// Inlined on every target: each caller knows how its attempt ended, so each copy keeps only
    /// that ending's work. On a Cortex-M3 it takes 27 instructions off a failure's decision, for 8
    /// bytes of the firmware's flash there (92 fewer on a Cortex-M0).
    #[inline(always)]
    pub(crate) fn complete(
        &mut self,
        config: &DependencyConfig<HZ>,
        now: Instant<HZ>,
        ticket: Ticket,
        ending: Ending,
        took: Duration<HZ>,
    ) -> Changes {
        let t = now.as_ticks();
        let mut changes = Changes::default();
        if let (Some(samples), Some(log)) = (config.latency_log_samples(), self.latency.get_mut()) {
            log.record(took.as_ticks(), samples);
        }
        if let (true, Some(bulkhead)) = (ticket.slot(), self.bulkhead.get_mut()) {
            #[cfg(feature = "bulkhead-adaptive")]
            if let (Some(adaptive), Some(max)) = (config.adaptive_on(), config.bulkhead_on()) {
                let sign = match ending {
                    Ending::Abandoned => Sign::Neither,
                    _ if took.as_ticks() >= adaptive.slow().as_ticks() => Sign::Overload,
                    Ending::Failed { transient: true, .. } => Sign::Overload,
                    Ending::Failed { transient: false, .. } => Sign::Neither,
                    Ending::Succeeded => Sign::Fast,
                };
                let dispatched = t.saturating_sub(took.as_ticks());
                let (in_use, from) = (bulkhead.in_flight(), bulkhead.learnt_limit(max));
                bulkhead.learn(adaptive, max, sign, in_use, dispatched, t);
                let to = bulkhead.learnt_limit(max);
                if to != from {
                    changes.limit = Some((from, to));
                }
            }
            bulkhead.release();
        }
        if let (Some(r), Some(bucket), Some(tokens)) =
            (ticket.reservation(), config.budget.and_then(|b| b.bucket()), self.tokens.get_mut())
        {
            tokens.settle(&bucket, r, t);
        }
        let failed = match ending {
            Ending::Abandoned => {
                if let Some(breaker) = self.breaker.get_mut() {
                    breaker.release_probe(ticket.probe());
                }
                return changes;
            }
            Ending::Succeeded => false,
            Ending::Failed { retry_after, .. } => {
                if let (Some(max), Some(wait), Some(cooldown)) =
                    (config.cooldown_on(), retry_after, self.cooldown.get_mut())
                {
                    changes.cooldown_until = cooldown.extend(t, wait, max.as_ticks());
                }
                true
            }
        };
        let slow = config
            .breaker_on()
            .and_then(|b| b.slow_call)
            .is_some_and(|threshold| took.as_ticks() >= threshold.as_ticks());
        // A failure (or a slow call) is counted, and the breaker reads the counts with it.
        let failure = (failed || slow).then(|| self.window.record_failure(now));
        if let (Some(config), Some(breaker)) = (config.breaker_on(), self.breaker.get_mut()) {
            // On the boards a failure goes through the breaker's inlined common case
            // (`Breaker::on_failure`); on hosts `on_outcome` is inlined whole already.
            changes.circuit = match failure {
                Some(counts) if failed && cfg!(target_os = "none") => {
                    breaker.on_failure(config, counts, ticket.probe(), t)
                }
                _ => breaker.on_outcome(config, failure, ticket.probe(), t),
            };
            if changes.circuit == Some(CircuitState::Closed) {
                self.window.clear_failures();
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_sizes() {
        let t = core::mem::size_of::<crate::time::Ticks>();
        assert_eq!(core::mem::size_of::<Admission>(), 8 + t, "returned in registers");
        // Reported in the README (64-bit ticks; 32-bit ticks save 4 bytes an instant).
        assert_eq!(core::mem::size_of::<TokenBucket>(), if t == 8 { 32 } else { 24 });
        // The count window's ring and its two counters take 8 more bytes, with padding.
        let ring = if cfg!(feature = "breaker-count-window") { 8 } else { 0 };
        assert_eq!(core::mem::size_of::<Breaker>(), if t == 8 { 24 } else { 16 } + ring);
        // The arrival time and its fraction, and the same before the last unit taken.
        assert_eq!(core::mem::size_of::<Limiter>(), 2 * t + 8);
        assert_eq!(core::mem::size_of::<Cooldown>(), t);
        // Slots in flight, and operations waiting for one; with the adaptive limit, the limit, its
        // steps towards the next slot, and the instant of its last decrease.
        let learnt = if cfg!(feature = "bulkhead-adaptive") { 4 + t } else { 0 };
        assert_eq!(core::mem::size_of::<Bulkhead>(), 4 + learnt);
    }

    /// A dependency's read-outs for the protections it does not have: a closed circuit, no wait
    /// for a rate unit or airtime, no airtime used, nothing in flight, no cooldown, and no count
    /// of retries without a budget.
    #[test]
    fn without_a_protection_its_read_outs_say_it_does_not_hold_anything_back() {
        const HZ: u64 = 1_000;
        let config = DependencyConfig::new(Duration::<HZ>::from_secs(10));
        let now = Instant::<HZ>::from_ticks(5_000);
        let mut dep = Dependency::<HZ, 10, 4>::new(&config, Instant::<HZ>::from_ticks(0)).unwrap();
        assert_eq!((dep.circuit(now), dep.circuit_open_until(now)), (CircuitState::Closed, None));
        assert_eq!(dep.next_rate_unit(&config, now), now);
        assert_eq!(dep.next_airtime(&config, now, Duration::<HZ>::from_secs(1)), Some(now));
        assert_eq!(dep.airtime_used(&config, now), Duration::<HZ>::from_ticks(0));
        assert_eq!((dep.in_flight(), dep.cooldown_until(now)), (0, None));
        assert_eq!((dep.bulkhead_waiting(), dep.slot_for_waiting(&config)), (0, false));
        assert_eq!(dep.retries_available(&config, now), None);
    }

    /// The configuration's getters give back what its builders were given.
    #[test]
    fn a_configuration_reads_back_what_it_was_built_with() {
        const HZ: u64 = 1_000;
        let window = Duration::<HZ>::from_secs(10);
        let config = DependencyConfig::new(window);
        assert_eq!((config.window(), config.retry_budget()), (window, None));
        #[cfg(feature = "breaker")]
        {
            let breaker =
                crate::BreakerConfig::consecutive_failures(3, Duration::<HZ>::from_secs(30)).probes(2);
            assert_eq!(
                (breaker.trip(), breaker.break_for(), breaker.probe_count()),
                (crate::Trip::ConsecutiveFailures { count: 3 }, Duration::<HZ>::from_secs(30), 2)
            );
            assert_eq!(config.breaker(breaker).circuit_breaker(), Some(breaker));
        }
        #[cfg(feature = "duty-cycle")]
        {
            let duty = crate::DutyCycle::new(Duration::<HZ>::from_secs(36), Duration::<HZ>::from_secs(3600));
            assert_eq!(
                (duty.airtime(), duty.window()),
                (Duration::<HZ>::from_secs(36), Duration::<HZ>::from_secs(3600))
            );
            assert_eq!(config.duty_cycle(duty).duty(), Some(duty));
        }
    }

    #[test]
    fn a_ticket_gives_back_exactly_what_was_packed_into_it() {
        for reservation in [None, Some(Reservation::of_epoch(0)), Some(Reservation::of_epoch(u32::MAX))] {
            for probe in [None, Some(0), Some(7), Some(u16::MAX)] {
                for slot in [false, true] {
                    let ticket = Ticket::new(reservation, probe, slot);
                    assert_eq!(
                        (ticket.reservation(), ticket.probe(), ticket.slot()),
                        (reservation, probe, slot)
                    );
                }
            }
        }
    }

    #[test]
    fn a_configuration_reads_back_what_it_was_given() {
        type D = Duration<1_000>;
        let plain = DependencyConfig::<1_000>::new(D::from_secs(10));
        assert_eq!((plain.duty(), plain.cooldown_max(), plain.rate()), (None, None, None));
        // Each protection's builder method exists only with its feature.
        #[cfg(all(feature = "duty-cycle", feature = "cooldown", feature = "rate-limit"))]
        {
            let duty = crate::duty::DutyCycle::per_mille(10, D::from_secs(3_600));
            let rate = crate::limiter::RateLimit::new(5, D::from_secs(1));
            let full = plain.duty_cycle(duty).cooldown(D::from_secs(900)).rate_limit(rate);
            assert_eq!(full.duty(), Some(duty));
            assert_eq!(full.cooldown_max(), Some(D::from_secs(900)));
            assert_eq!(full.rate(), Some(rate));
        }
    }
}
