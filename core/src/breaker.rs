//! The circuit breaker: stop calling a dependency that is failing, then probe it back.
//!
//! Seed 000 ("The Retry Budget"): a retry budget that is spent is a signal, and "the breaker is the
//! same observation made formally, and the two share a metric". So the breaker's failure-ratio mode
//! reads the dependency's one [`CallWindow`](crate::CallWindow), the same counts the ratio retry
//! budget reads. Two other modes keep a little state of their own: the last `size` outcomes as bits
//! (a count-based window, for dependencies called too rarely for a time window), and a run of
//! consecutive failures (the simplest breaker, cheap enough for any microcontroller).
//!
//! Consecutive failures come with the `breaker` feature; the other two modes are the features
//! `breaker-failure-ratio` and `breaker-count-window` (all on by default). Firmware that configures
//! one mode compiles in only that one: the mode is runtime configuration, so every mode compiled in
//! is linked (the two others cost the firmware example about half a KiB of flash on a Cortex-M3:
//! the workspace README's "Embedded targets" has the figure), and the count window's ring takes 8
//! bytes of the breaker's state there.
//!
//! States: **closed** (calls go through and are counted), **open** for `break_for` (every attempt
//! is refused with `circuit_open` and the instant the break ends), then **half-open**: up to
//! `probes` attempts are let through; when that many succeed the circuit closes (and its failure
//! counts start afresh), and one failure re-opens it for another `break_for`. An attempt slower than
//! the optional slow-call threshold counts as a failure whatever its result: a dependency that
//! answers in 20 s is down for a caller with a 3 s timeout.
//!
//! An operator may also hold the circuit **isolated** (Polly's `Isolate`, resilience4j's forced
//! open state): in an incident, or while a provider is known to be down for maintenance, every
//! attempt is refused with `circuit_isolated` and no instant to try again, whatever the counts say,
//! until the operator closes the circuit ([`Dependency::isolate_circuit`] and
//! [`Dependency::close_circuit`]). It has a code of its own so that a dashboard tells a decision
//! someone made from one the breaker made, and a caller does not wait for a break that has no end.
//!
//! [`Dependency::isolate_circuit`]: crate::Dependency::isolate_circuit
//! [`Dependency::close_circuit`]: crate::Dependency::close_circuit

use crate::error::ConfigError;
#[cfg(feature = "breaker-count-window")]
use crate::packed::U64;
use crate::time::{Duration, Ticks};
use crate::window::Counts;

/// When a closed circuit opens. Non-exhaustive: each mode but consecutive failures is a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Trip {
    /// At least `percent` % of the attempts in the dependency's time window failed, with at least
    /// `min_calls` attempts in it. Feature `breaker-failure-ratio`.
    #[cfg(feature = "breaker-failure-ratio")]
    FailureRatio {
        /// 1..=100.
        percent: u8,
        /// Fewer attempts than this in the window never open the circuit.
        min_calls: u32,
    },
    /// At least `percent` % of the last `size` outcomes (1..=64) failed, with at least `min_calls`
    /// outcomes recorded. Feature `breaker-count-window`.
    #[cfg(feature = "breaker-count-window")]
    CountWindow {
        /// Outcomes remembered, 1..=64.
        size: u8,
        /// 1..=100.
        percent: u8,
        /// Fewer outcomes than this never open the circuit.
        min_calls: u8,
    },
    /// `count` failures in a row.
    ConsecutiveFailures {
        /// At least 1.
        count: u32,
    },
}

/// A circuit breaker's configuration. Validated by [`Dependency::new`](crate::Dependency::new).
///
/// A circuit's life: two failures in a row open it for 10 s, during which calls are refused
/// without being sent; then it lets one probe through, whose success closes it.
///
/// ```
/// use relent_core::{
///     Action, BreakerConfig, CircuitState, ConfigError, Context, Dependency, DependencyConfig, Duration, Instant,
///     Operation, Problem, ReplaySafety, RetryPolicy, Verdict,
/// };
/// type D = Duration<1_000>;
///
/// const LEDGER: DependencyConfig<1_000> =
///     DependencyConfig::new(D::from_secs(60)).breaker(BreakerConfig::consecutive_failures(2, D::from_secs(10)));
/// let mut ledger = Dependency::<1_000, 4>::new(&LEDGER, Instant::from_ticks(0))?;
/// # struct NoDraws;
/// # impl relent_core::rand_core::RngCore for NoDraws {
/// #     fn next_u32(&mut self) -> u32 { unreachable!() }
/// #     fn next_u64(&mut self) -> u64 { unreachable!() }
/// #     fn fill_bytes(&mut self, _: &mut [u8]) { unreachable!() }
/// # }
///
/// /// One call at `at` (ms) that succeeds or fails at once: whether it was sent, and its problem.
/// fn call(ledger: &mut Dependency<1_000, 4>, at: u64, succeeds: bool) -> (bool, Option<Problem>) {
///     let once = RetryPolicy::single_attempt().build().unwrap();
///     let now = Instant::from_ticks(at.try_into().unwrap());
///     let context = Context::new(D::from_secs(5), ReplaySafety::Unsafe);
///     let mut op = Operation::<1_000, Verdict<1_000>>::start(&once, &LEDGER, context, now).unwrap();
///     let sent = match op.poll(now, ledger, &mut ()) {
///         Action::Dispatch(attempt) if succeeds => { op.on_success(attempt, now, ledger, &mut ()); true }
///         Action::Dispatch(attempt) => { op.on_failure(attempt, now, ledger, &mut NoDraws, Verdict::Retryable, &mut ()); true }
///         _ => false,
///     };
///     (sent, op.take_completion().unwrap().problem)
/// }
///
/// let failed = (true, Some(Problem::AttemptsExhausted)); // sent, failed, and its one attempt spent
/// assert_eq!(call(&mut ledger, 0, false), failed);
/// assert_eq!(call(&mut ledger, 1_000, false), failed);
/// assert_eq!(ledger.circuit(Instant::from_ticks(1_000)), CircuitState::Open);
/// assert_eq!(call(&mut ledger, 5_000, true), (false, Some(Problem::CircuitOpen))); // not sent
/// assert_eq!(ledger.circuit(Instant::from_ticks(11_000)), CircuitState::HalfOpen);
/// assert_eq!(call(&mut ledger, 11_000, true), (true, None)); // the probe
/// assert_eq!(ledger.circuit(Instant::from_ticks(11_000)), CircuitState::Closed);
///
/// // A breaker that can never close is refused when the dependency is built.
/// let never = DependencyConfig::<1_000>::new(D::from_secs(60)).breaker(BreakerConfig::consecutive_failures(0, D::from_secs(10)));
/// assert_eq!(never.validate(), Err(ConfigError::BreakerZeroConsecutiveFailures));
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BreakerConfig<const HZ: u64> {
    pub(crate) trip: Trip,
    pub(crate) break_for: Duration<HZ>,
    pub(crate) probes: u8,
    pub(crate) slow_call: Option<Duration<HZ>>,
}

impl<const HZ: u64> BreakerConfig<HZ> {
    /// Opens when `percent` % of the attempts in the dependency's window failed (with at least
    /// `min_calls` of them), for `break_for`; one half-open probe. Feature `breaker-failure-ratio`.
    #[cfg(feature = "breaker-failure-ratio")]
    pub const fn failure_ratio(percent: u8, min_calls: u32, break_for: Duration<HZ>) -> Self {
        Self::new(Trip::FailureRatio { percent, min_calls }, break_for)
    }

    /// Opens when `percent` % of the last `size` outcomes failed (with at least `min_calls` of
    /// them), for `break_for`; one half-open probe. Feature `breaker-count-window`.
    #[cfg(feature = "breaker-count-window")]
    pub const fn count_window(size: u8, percent: u8, min_calls: u8, break_for: Duration<HZ>) -> Self {
        Self::new(Trip::CountWindow { size, percent, min_calls }, break_for)
    }

    /// Opens after `count` failures in a row, for `break_for`; one half-open probe.
    pub const fn consecutive_failures(count: u32, break_for: Duration<HZ>) -> Self {
        Self::new(Trip::ConsecutiveFailures { count }, break_for)
    }

    const fn new(trip: Trip, break_for: Duration<HZ>) -> Self {
        Self { trip, break_for, probes: 1, slow_call: None }
    }

    /// Lets `probes` attempts through when half-open; that many successes close the circuit.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn probes(mut self, probes: u8) -> Self {
        self.probes = probes;
        self
    }

    /// Counts an attempt that took at least `threshold` as a failure, whatever its result.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn slow_calls(mut self, threshold: Duration<HZ>) -> Self {
        self.slow_call = Some(threshold);
        self
    }

    /// The trip condition.
    pub const fn trip(&self) -> Trip {
        self.trip
    }
    /// How long the circuit stays open.
    pub const fn break_for(&self) -> Duration<HZ> {
        self.break_for
    }
    /// Half-open probes.
    pub const fn probe_count(&self) -> u8 {
        self.probes
    }
    /// The time from which an attempt counts as a failure whatever its result, if one is set
    /// ([`slow_calls`](Self::slow_calls)).
    pub const fn slow_call_threshold(&self) -> Option<Duration<HZ>> {
        self.slow_call
    }

    pub(crate) const fn validate(&self) -> Result<(), ConfigError> {
        match self.trip {
            #[cfg(feature = "breaker-failure-ratio")]
            Trip::FailureRatio { percent, .. } => {
                if percent == 0 || percent > 100 {
                    return Err(ConfigError::BreakerPercentOutOfRange);
                }
            }
            #[cfg(feature = "breaker-count-window")]
            Trip::CountWindow { size, percent, min_calls } => {
                if size == 0 || size > 64 {
                    return Err(ConfigError::BreakerCountWindowOutOfRange);
                }
                if percent == 0 || percent > 100 {
                    return Err(ConfigError::BreakerPercentOutOfRange);
                }
                if min_calls > size {
                    return Err(ConfigError::BreakerMinCallsAboveWindow);
                }
            }
            Trip::ConsecutiveFailures { count } => {
                if count == 0 {
                    return Err(ConfigError::BreakerZeroConsecutiveFailures);
                }
            }
        }
        if self.break_for.as_ticks() == 0 {
            return Err(ConfigError::BreakerZeroBreak);
        }
        if self.probes == 0 {
            return Err(ConfigError::BreakerZeroProbes);
        }
        if let Some(t) = self.slow_call {
            if t.as_ticks() == 0 {
                return Err(ConfigError::BreakerZeroSlowCall);
            }
        }
        Ok(())
    }
}

/// The state of a circuit, as events and getters report it. Non-exhaustive: match the states you
/// act on and keep a fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CircuitState {
    /// Calls go through.
    Closed,
    /// Calls are refused until the break ends.
    Open,
    /// A limited number of probes go through.
    HalfOpen,
    /// An operator isolated the circuit: calls are refused until the operator closes it
    /// ([`Dependency::isolate_circuit`](crate::Dependency::isolate_circuit)). Feature
    /// `breaker-isolate`.
    #[cfg(feature = "breaker-isolate")]
    Isolated,
}

impl CircuitState {
    /// The stable snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
            #[cfg(feature = "breaker-isolate")]
            Self::Isolated => "isolated",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Phase {
    Closed,
    Open {
        until: Ticks,
    },
    HalfOpen {
        in_flight: u8,
        successes: u8,
    },
    /// Held open by an operator, with no end.
    #[cfg(feature = "breaker-isolate")]
    Isolated,
}

/// Why the breaker refused an attempt: open until an instant, or half-open with every probe out.
/// (An isolated circuit is refused by admission before the breaker is asked.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) until: Option<Ticks>,
}

/// The breaker's state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Breaker {
    phase: Phase,
    /// Which half-open episode this is: a probe counts only against the episode that admitted it,
    /// so a probe left over from an earlier one cannot free a place in this one.
    episode: u16,
    consecutive: u32,
    /// The count window (only with that mode compiled in): bit i says whether the outcome in
    /// slot i failed; then how many slots are filled, and the next slot. Fields of their own
    /// rather than a struct, which would add 2 bytes of padding.
    #[cfg(feature = "breaker-count-window")]
    ring: U64,
    #[cfg(feature = "breaker-count-window")]
    ring_len: u8,
    #[cfg(feature = "breaker-count-window")]
    ring_next: u8,
}

impl Breaker {
    pub(crate) const fn new() -> Self {
        Self {
            phase: Phase::Closed,
            episode: 0,
            consecutive: 0,
            #[cfg(feature = "breaker-count-window")]
            ring: U64::of(0),
            #[cfg(feature = "breaker-count-window")]
            ring_len: 0,
            #[cfg(feature = "breaker-count-window")]
            ring_next: 0,
        }
    }

    pub(crate) const fn state(&self) -> CircuitState {
        match self.phase {
            Phase::Closed => CircuitState::Closed,
            Phase::Open { .. } => CircuitState::Open,
            Phase::HalfOpen { .. } => CircuitState::HalfOpen,
            #[cfg(feature = "breaker-isolate")]
            Phase::Isolated => CircuitState::Isolated,
        }
    }

    #[cfg(feature = "breaker-isolate")]
    /// Holds the circuit isolated until [`Breaker::force_close`]; its run of failures starts afresh.
    /// Returns the transition, `None` if it was isolated already.
    pub(crate) fn isolate(&mut self) -> Option<CircuitState> {
        if self.phase == Phase::Isolated {
            return None;
        }
        self.phase = Phase::Isolated;
        self.consecutive = 0;
        Some(CircuitState::Isolated)
    }

    /// Closes the circuit from any state with no outcomes remembered (the caller clears the
    /// window's failures, as on any closing). Returns the transition, `None` if it was closed.
    pub(crate) fn force_close(&mut self) -> Option<CircuitState> {
        let was = self.phase;
        self.close();
        (was != Phase::Closed).then_some(CircuitState::Closed)
    }

    /// Moves the instant an open circuit's break ends `by` ticks earlier.
    pub(crate) fn rebase(&mut self, by: Ticks) {
        if let Phase::Open { until } = &mut self.phase {
            *until = crate::time::earlier(*until, by);
        }
    }

    /// The instant an open circuit's break ends.
    pub(crate) const fn open_until(&self) -> Option<Ticks> {
        match self.phase {
            Phase::Open { until } => Some(until),
            _ => None,
        }
    }

    /// Whether an attempt may go at `now` (as a probe of the returned half-open episode, or not a
    /// probe), moving an open circuit whose break has ended to half-open (returned as a
    /// transition). Takes nothing: see [`Breaker::take_probe`].
    pub(crate) fn check(
        &mut self,
        probes: u8,
        now: Ticks,
    ) -> (Result<Option<u16>, Refused>, Option<CircuitState>) {
        let mut transition = None;
        if let Phase::Open { until } = self.phase {
            if now < until {
                return (Err(Refused { until: Some(until) }), None);
            }
            self.phase = Phase::HalfOpen { in_flight: 0, successes: 0 };
            self.episode = self.episode.wrapping_add(1);
            transition = Some(CircuitState::HalfOpen);
        }
        let verdict = match self.phase {
            Phase::Closed => Ok(None),
            // Successes counted under a rule of more probes than `probes` (by an operation started
            // before a reconfiguration, or in a snapshot restored under another) may be all that
            // `probes` asks for: then every attempt goes as a probe, and the first to succeed
            // closes the circuit (a failure opens it again), rather than the circuit waiting for a
            // probe it would no longer let through. 16 bytes of a Cortex-M3's flash.
            Phase::HalfOpen { in_flight, successes } => {
                if successes >= probes || in_flight.saturating_add(successes) < probes {
                    Ok(Some(self.episode))
                } else {
                    Err(Refused { until: None })
                }
            }
            Phase::Open { until } => Err(Refused { until: Some(until) }),
            // Admission refuses an isolated circuit, with its own code, before it asks the breaker
            // (before the cooldown); here it is refused all the same, with no end.
            #[cfg(feature = "breaker-isolate")]
            Phase::Isolated => Err(Refused { until: None }),
        };
        (verdict, transition)
    }

    /// Takes a half-open probe slot (after [`Breaker::check`] said the attempt is a probe).
    pub(crate) fn take_probe(&mut self) {
        if let Phase::HalfOpen { in_flight, .. } = &mut self.phase {
            *in_flight = in_flight.saturating_add(1);
        }
    }

    /// Whether `probe` (an episode number from [`Breaker::check`]) is a probe of the current
    /// half-open episode.
    const fn is_current(&self, probe: Option<u16>) -> bool {
        match (self.phase, probe) {
            (Phase::HalfOpen { .. }, Some(episode)) => episode == self.episode,
            _ => false,
        }
    }

    /// Gives back a probe whose attempt was abandoned without an outcome.
    pub(crate) fn release_probe(&mut self, probe: Option<u16>) {
        if !self.is_current(probe) {
            return;
        }
        if let Phase::HalfOpen { in_flight, .. } = &mut self.phase {
            *in_flight = in_flight.saturating_sub(1);
        }
    }

    /// [`Breaker::on_outcome`] for an attempt that failed, with `counts` the window's counts with
    /// it. The common case, a closed circuit counting failures in a row that this one does not
    /// trip, is inlined into the failure's report, on the boards too: it took the call to
    /// `on_outcome` and most of that function's 22 instructions off the decision after a failure
    /// (Cortex-M4F 250.9 to 236.0, for 20 bytes of the Cortex-M3's flash). A success, and every
    /// other case, goes to `on_outcome`. Only the boards' builds call it: on a host `on_outcome`
    /// is inlined whole, and this check before it added 3 instructions to the decision.
    #[inline(always)]
    pub(crate) fn on_failure<const HZ: u64>(
        &mut self,
        config: &BreakerConfig<HZ>,
        counts: Counts,
        probe: Option<u16>,
        now: Ticks,
    ) -> Option<CircuitState> {
        if let (Phase::Closed, Trip::ConsecutiveFailures { count }) = (self.phase, config.trip) {
            let consecutive = self.consecutive.saturating_add(1);
            if consecutive < count {
                self.consecutive = consecutive;
                return None;
            }
        }
        self.on_outcome(config, Some(counts), probe, now)
    }

    /// Records one outcome: `None` for a success, or for a failure (slow calls included) the
    /// dependency's window counts with that failure in them, which the failure-ratio mode reads
    /// (the window has just counted it, so they cost nothing to pass). Returns the transition, if
    /// any; on closing, the caller clears the window's failure counts so that the circuit starts
    /// afresh.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(crate) fn on_outcome<const HZ: u64>(
        &mut self,
        config: &BreakerConfig<HZ>,
        failure: Option<Counts>,
        probe: Option<u16>,
        now: Ticks,
    ) -> Option<CircuitState> {
        let failed = failure.is_some();
        let probe = self.is_current(probe);
        match self.phase {
            Phase::HalfOpen { in_flight, successes } if probe => {
                if failed {
                    self.open(config, now);
                    return Some(CircuitState::Open);
                }
                let successes = successes.saturating_add(1);
                if successes >= config.probes {
                    self.close();
                    return Some(CircuitState::Closed);
                }
                self.phase = Phase::HalfOpen { in_flight: in_flight.saturating_sub(1), successes };
                None
            }
            // A late outcome of an attempt dispatched before the circuit opened (or was isolated),
            // or of a probe of an earlier episode, says nothing about the dependency now.
            Phase::HalfOpen { .. } | Phase::Open { .. } => None,
            #[cfg(feature = "breaker-isolate")]
            Phase::Isolated => None,
            Phase::Closed => {
                self.consecutive = if failed { self.consecutive.saturating_add(1) } else { 0 };
                let trips = match config.trip {
                    Trip::ConsecutiveFailures { count } => self.consecutive >= count,
                    #[cfg(feature = "breaker-count-window")]
                    Trip::CountWindow { size, percent, min_calls } => {
                        self.push(size, percent, min_calls, failed) && failed
                    }
                    #[cfg(feature = "breaker-failure-ratio")]
                    Trip::FailureRatio { percent, min_calls } => failure.is_some_and(|c| {
                        c.calls >= min_calls
                            && u64::from(c.failures).saturating_mul(100)
                                >= u64::from(percent).saturating_mul(u64::from(c.calls))
                    }),
                };
                if trips {
                    self.open(config, now);
                    Some(CircuitState::Open)
                } else {
                    None
                }
            }
        }
    }

    /// Bounds a breaker restored from a snapshot by `config`, at `now`, for a snapshot saved under
    /// another configuration (or bytes that pass the checksum but no configuration wrote): a break
    /// ends at most `break_for` from now, and a count window that `config`'s rule could not have
    /// filled (another size, outcomes past its count, or no count window at all) is forgotten.
    /// A breaker saved under `config` itself is within both bounds, and is left as it is.
    pub(crate) fn bound<const HZ: u64>(&mut self, config: &BreakerConfig<HZ>, now: Ticks) {
        if let Phase::Open { until } = &mut self.phase {
            *until = (*until).min(now.saturating_add(config.break_for.as_ticks()));
        }
        #[cfg(feature = "breaker-count-window")]
        {
            // A window of `size` slots holds `len` outcomes in its lowest `len` bits: filled in
            // order until it is full (the next slot is then `len`), any slot next once it is.
            let (len, next) = (self.ring_len, self.ring_next);
            let used = u64::MAX.checked_shr(64u32.saturating_sub(u32::from(len))).unwrap_or(0);
            let filled = match config.trip {
                Trip::CountWindow { size, .. } => (len < size && next == len) || (len == size && next < size),
                _ => false,
            };
            if !filled || self.ring.get() & !used != 0 {
                self.forget_count_window();
            }
        }
    }

    /// Forgets the count window's outcomes, and keeps everything else: for a breaker reconfigured
    /// to a trip rule its count window does not serve (another rule, or a window of another size;
    /// see [`crate::Dependency::reconfigure`]). The run of failures in a row is kept: every rule
    /// counts it the same way.
    pub(crate) fn forget_count_window(&mut self) {
        #[cfg(feature = "breaker-count-window")]
        {
            self.ring = U64::of(0);
            self.ring_len = 0;
            self.ring_next = 0;
        }
    }

    /// Closes the circuit with no outcomes remembered, in the same episode count.
    fn close(&mut self) {
        // Field by field, not `*self = Self { episode, ..Self::new() }`: on a Cortex-M that
        // clears the state with a memset routine of its own, 174 bytes of flash.
        self.phase = Phase::Closed;
        self.consecutive = 0;
        self.forget_count_window();
    }

    /// Records one outcome in a count window of `size` slots, and says whether at least
    /// `percent` % of the outcomes remembered failed, with at least `min_calls` of them.
    #[cfg(feature = "breaker-count-window")]
    fn push(&mut self, size: u8, percent: u8, min_calls: u8, failed: bool) -> bool {
        let bit = 1u64.checked_shl(u32::from(self.ring_next)).unwrap_or(0);
        let ring = self.ring.get();
        let ring = if failed { ring | bit } else { ring & !bit };
        self.ring = U64::of(ring);
        self.ring_len = self.ring_len.saturating_add(1).min(size);
        let next = self.ring_next.saturating_add(1);
        self.ring_next = if next >= size { 0 } else { next };
        let mask = u64::MAX.checked_shr(64u32.saturating_sub(u32::from(size))).unwrap_or(0);
        let failures = u64::from((ring & mask).count_ones());
        self.ring_len >= min_calls
            && failures.saturating_mul(100) >= u64::from(percent).saturating_mul(u64::from(self.ring_len))
    }

    fn open<const HZ: u64>(&mut self, config: &BreakerConfig<HZ>, now: Ticks) {
        self.phase = Phase::Open { until: now.saturating_add(config.break_for.as_ticks()) };
        self.consecutive = 0;
    }
}

impl Breaker {
    /// Bytes of a breaker in a snapshot: its phase, what remains of an open break, half-open
    /// successes, the episode, the run of failures and the count window. Probes in flight are not
    /// saved. The count window's 10 bytes are there (as zeros) without that mode compiled in, so
    /// that one layout serves every build.
    pub(crate) const SNAPSHOT_LEN: usize = 1 + 8 + 1 + 2 + 4 + 8 + 1 + 1;

    pub(crate) fn save(&self, w: &mut crate::snapshot::Writer<'_>, now: Ticks) {
        match self.phase {
            Phase::Closed => {
                w.u8(0);
                w.ticks(0);
                w.u8(0);
            }
            Phase::Open { until } => {
                w.u8(1);
                w.ticks(until.saturating_sub(now));
                w.u8(0);
            }
            Phase::HalfOpen { successes, .. } => {
                w.u8(2);
                w.ticks(0);
                w.u8(successes);
            }
            #[cfg(feature = "breaker-isolate")]
            Phase::Isolated => {
                w.u8(3);
                w.ticks(0);
                w.u8(0);
            }
        }
        w.u16(self.episode);
        w.u32(self.consecutive);
        #[cfg(feature = "breaker-count-window")]
        let (bits, len, next) = (self.ring.get(), self.ring_len, self.ring_next);
        #[cfg(not(feature = "breaker-count-window"))]
        let (bits, len, next) = (0, 0, 0);
        w.u64(bits);
        w.u8(len);
        w.u8(next);
    }

    pub(crate) fn restore(
        r: &mut crate::snapshot::Reader<'_>,
        rebase: crate::snapshot::Rebase,
    ) -> Result<Self, crate::snapshot::SnapshotError> {
        let (tag, remaining, successes) = (r.u8(), r.ticks(), r.u8());
        let phase = match tag {
            0 => Phase::Closed,
            // A break that ended during the sleep becomes half-open on the next attempt.
            1 => Phase::Open { until: rebase.until(remaining) },
            2 => Phase::HalfOpen { in_flight: 0, successes },
            // An operator's isolation outlives the sleep: only the operator ends it. A build
            // without `breaker-isolate` cannot hold it, and finds the snapshot corrupted.
            #[cfg(feature = "breaker-isolate")]
            3 => Phase::Isolated,
            _ => return Err(crate::snapshot::SnapshotError::Corrupted),
        };
        let (episode, consecutive, ring, ring_len, ring_next) = (r.u16(), r.u32(), r.u64(), r.u8(), r.u8());
        if ring_len > 64 || ring_next >= 64 {
            return Err(crate::snapshot::SnapshotError::Corrupted);
        }
        // Without the count window compiled in, no configuration can use what was saved.
        #[cfg(not(feature = "breaker-count-window"))]
        let _ = (ring, ring_len, ring_next);
        Ok(Self {
            phase,
            episode,
            consecutive,
            #[cfg(feature = "breaker-count-window")]
            ring: U64::of(ring),
            #[cfg(feature = "breaker-count-window")]
            ring_len,
            #[cfg(feature = "breaker-count-window")]
            ring_next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 1_000;
    type D = Duration<HZ>;

    fn outcome(b: &mut Breaker, cfg: &BreakerConfig<HZ>, failed: bool, now: Ticks) -> Option<CircuitState> {
        let (ok, _) = b.check(cfg.probes, now);
        let probe = ok.unwrap();
        if probe.is_some() {
            b.take_probe();
        }
        // As `Dependency::complete` reports them: a failure through the path inlined for it.
        if failed {
            b.on_failure(cfg, Counts::default(), probe, now)
        } else {
            b.on_outcome(cfg, None, probe, now)
        }
    }

    #[test]
    fn a_failure_changes_the_breaker_through_its_inlined_path_as_through_on_outcome() {
        let configs = [
            Some(BreakerConfig::<HZ>::consecutive_failures(1, D::from_secs(10))),
            Some(BreakerConfig::consecutive_failures(3, D::from_secs(10)).probes(2)),
            Some(BreakerConfig::consecutive_failures(u32::MAX, D::from_secs(10))),
            #[cfg(feature = "breaker-count-window")]
            Some(BreakerConfig::count_window(4, 50, 2, D::from_secs(10))),
            #[cfg(feature = "breaker-failure-ratio")]
            Some(BreakerConfig::failure_ratio(50, 2, D::from_secs(10))),
        ];
        // Every history of up to 6 outcomes, 5 s apart (so the circuit opens, half-opens and
        // closes along the way), then one more failure, with and without the current probe.
        for cfg in configs.iter().flatten() {
            for len in 0..=6u32 {
                for history in 0..(1u32 << len) {
                    let mut b = Breaker::new();
                    let mut now = 0;
                    for i in 0..len {
                        now += 5_000;
                        if let (Ok(probe), _) = b.check(cfg.probes, now) {
                            if probe.is_some() {
                                b.take_probe();
                            }
                            b.on_outcome(cfg, (history >> i & 1 == 1).then(Counts::default), probe, now);
                        }
                    }
                    now += 5_000;
                    let probe = match b.check(cfg.probes, now) {
                        (Ok(probe), _) => probe,
                        (Err(_), _) => Some(b.episode),
                    };
                    let counts = Counts::of(4, 0, 3);
                    for probe in [probe, None] {
                        let (mut inlined, mut general) = (b.clone(), b.clone());
                        assert_eq!(
                            inlined.on_failure(cfg, counts, probe, now),
                            general.on_outcome(cfg, Some(counts), probe, now),
                            "{cfg:?}, history {history:0len$b}, probe {probe:?}",
                            len = len as usize
                        );
                        assert_eq!(
                            inlined,
                            general,
                            "{cfg:?}, history {history:0len$b}, probe {probe:?}",
                            len = len as usize
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn consecutive_failures_open_then_a_probe_closes() {
        let cfg = BreakerConfig::consecutive_failures(3, D::from_secs(30));
        let mut b = Breaker::new();
        assert_eq!(outcome(&mut b, &cfg, true, 0), None);
        assert_eq!(outcome(&mut b, &cfg, false, 1), None, "a success resets the run");
        assert_eq!(outcome(&mut b, &cfg, true, 2), None);
        assert_eq!(outcome(&mut b, &cfg, true, 3), None);
        assert_eq!(outcome(&mut b, &cfg, true, 4), Some(CircuitState::Open));
        assert_eq!(b.check(1, 30_003), (Err(Refused { until: Some(30_004) }), None));
        assert_eq!(b.check(1, 30_004), (Ok(Some(1)), Some(CircuitState::HalfOpen)));
        b.take_probe();
        assert_eq!(b.check(1, 30_005).0, Err(Refused { until: None }), "one probe at a time");
        assert_eq!(b.on_outcome(&cfg, None, Some(1), 30_010), Some(CircuitState::Closed));
    }

    #[test]
    fn a_failed_probe_reopens_for_another_break() {
        let cfg = BreakerConfig::consecutive_failures(1, D::from_secs(10)).probes(2);
        let mut b = Breaker::new();
        assert_eq!(outcome(&mut b, &cfg, true, 0), Some(CircuitState::Open));
        assert_eq!(outcome(&mut b, &cfg, false, 10_000), None, "one of two probes succeeded");
        assert_eq!(b.state(), CircuitState::HalfOpen);
        assert_eq!(outcome(&mut b, &cfg, true, 10_001), Some(CircuitState::Open));
        assert_eq!(b.open_until(), Some(20_001));
    }

    #[test]
    fn a_probe_of_an_earlier_episode_frees_no_place_in_this_one() {
        let cfg = BreakerConfig::consecutive_failures(1, D::from_secs(10));
        let mut b = Breaker::new();
        assert_eq!(outcome(&mut b, &cfg, true, 0), Some(CircuitState::Open));
        // Episode 1: a probe goes out and is never reported; the circuit is re-opened meanwhile.
        let (stale, _) = b.check(1, 10_000);
        b.take_probe();
        b.phase = Phase::Open { until: 20_000 };
        // Episode 2: one probe out, so the circuit is full.
        let (current, _) = b.check(1, 20_000);
        assert_eq!(current, Ok(Some(2)));
        b.take_probe();
        b.release_probe(stale.unwrap());
        assert_eq!(b.check(1, 20_001).0, Err(Refused { until: None }), "the stale release freed nothing");
        b.release_probe(current.unwrap());
        assert_eq!(b.check(1, 20_002).0, Ok(Some(2)));
    }

    #[cfg(feature = "breaker-count-window")]
    #[test]
    fn the_count_window_remembers_only_the_last_outcomes() {
        // 50 % of the last 4, with at least 4 recorded.
        let cfg = BreakerConfig::count_window(4, 50, 4, D::from_secs(10));
        let mut b = Breaker::new();
        for (i, failed) in [true, false, false, false, false, true].into_iter().enumerate() {
            assert_eq!(outcome(&mut b, &cfg, failed, i as Ticks), None, "outcome {i}");
        }
        // Last four: false, false, true, true -> 50 %.
        assert_eq!(outcome(&mut b, &cfg, true, 6), Some(CircuitState::Open));
    }

    #[cfg(feature = "breaker-count-window")]
    #[test]
    fn a_success_forgets_only_its_own_slot_of_the_count_window() {
        // 60 % of the last 3: failure, success, failure is 2 of 3.
        let cfg = BreakerConfig::count_window(3, 60, 3, D::from_secs(10));
        let mut b = Breaker::new();
        assert_eq!(outcome(&mut b, &cfg, true, 0), None);
        assert_eq!(outcome(&mut b, &cfg, false, 1), None);
        assert_eq!(outcome(&mut b, &cfg, true, 2), Some(CircuitState::Open));
    }

    #[cfg(feature = "breaker-count-window")]
    #[test]
    fn a_failure_in_a_slot_that_held_a_failure_stays_a_failure() {
        // 100 % of the last 2. The third outcome fails into the slot of the first, which failed.
        let cfg = BreakerConfig::count_window(2, 100, 2, D::from_secs(10));
        let mut b = Breaker::new();
        for (i, failed) in [true, false, true].into_iter().enumerate() {
            assert_eq!(outcome(&mut b, &cfg, failed, i as Ticks), None, "outcome {i}");
        }
        assert_eq!(outcome(&mut b, &cfg, true, 3), Some(CircuitState::Open), "the last two failed");
    }

    #[test]
    fn a_late_outcome_of_an_attempt_sent_before_the_circuit_opened_is_not_a_probe_s() {
        let cfg = BreakerConfig::consecutive_failures(1, D::from_secs(10));
        let mut b = Breaker::new();
        // An attempt goes out while closed (no probe number), then another's failure opens the circuit.
        let (early, _) = b.check(1, 0);
        assert_eq!(early, Ok(None));
        assert_eq!(outcome(&mut b, &cfg, true, 1), Some(CircuitState::Open));
        assert_eq!(b.check(1, 10_001), (Ok(Some(1)), Some(CircuitState::HalfOpen)));
        b.take_probe();
        // The early attempt's outcome arrives while the probe is out: it changes nothing.
        assert_eq!(b.on_outcome(&cfg, Some(Counts::default()), None, 10_002), None);
        assert_eq!(b.on_outcome(&cfg, None, None, 10_003), None);
        assert_eq!(b.state(), CircuitState::HalfOpen);
        assert_eq!(b.on_outcome(&cfg, None, Some(1), 10_004), Some(CircuitState::Closed), "the probe's does");
    }

    #[test]
    fn a_rebased_open_circuit_stays_open_until_the_same_instant() {
        let cfg = BreakerConfig::consecutive_failures(1, D::from_secs(10));
        let mut b = Breaker::new();
        assert_eq!(outcome(&mut b, &cfg, true, 50_000), Some(CircuitState::Open));
        b.rebase(40_000);
        assert_eq!(b.open_until(), Some(20_000));
        assert_eq!(b.check(1, 19_999).0, Err(Refused { until: Some(20_000) }));
        assert_eq!(b.check(1, 20_000).1, Some(CircuitState::HalfOpen));
    }

    #[test]
    fn a_saved_count_window_restores_only_with_a_length_and_position_save_could_write() {
        use crate::snapshot::{Reader, Rebase, SnapshotError, Writer};
        let mut buf = [0u8; Breaker::SNAPSHOT_LEN];
        Breaker::new().save(&mut Writer::new(&mut buf), 0);
        // The last two bytes: how many outcomes the ring holds (at most 64), and the next slot (0-63).
        let restore = |len: u8, next: u8| {
            let mut edited = buf;
            edited[Breaker::SNAPSHOT_LEN - 2..].copy_from_slice(&[len, next]);
            Breaker::restore(&mut Reader::new(&edited), Rebase { now: 0, slept: 0 }).map(|_| ())
        };
        assert_eq!(restore(64, 63), Ok(()));
        assert_eq!(restore(65, 0), Err(SnapshotError::Corrupted));
        assert_eq!(restore(0, 64), Err(SnapshotError::Corrupted));
    }

    /// The phase tags a snapshot may hold: 0 to 2 in every build, 3 (isolated) only where a build
    /// can hold it; without `breaker-isolate` it is as corrupted as 4.
    #[test]
    fn a_saved_phase_restores_only_where_this_build_has_it() {
        use crate::snapshot::{Reader, Rebase, SnapshotError, Writer};
        let mut isolated = Breaker::new();
        #[cfg(feature = "breaker-isolate")]
        assert_eq!(isolated.isolate(), Some(CircuitState::Isolated));
        #[cfg(not(feature = "breaker-isolate"))]
        {
            isolated.phase = Phase::Open { until: 5 };
        }
        let mut buf = [0u8; Breaker::SNAPSHOT_LEN];
        isolated.save(&mut Writer::new(&mut buf), 0);
        let restore = |tag: u8| {
            let mut edited = buf;
            edited[0] = tag;
            Breaker::restore(&mut Reader::new(&edited), Rebase { now: 0, slept: 0 }).map(|b| b.state())
        };
        #[cfg(feature = "breaker-isolate")]
        assert_eq!((buf[0], restore(3)), (3, Ok(CircuitState::Isolated)));
        #[cfg(not(feature = "breaker-isolate"))]
        assert_eq!(restore(3), Err(SnapshotError::Corrupted));
        assert_eq!(restore(2), Ok(CircuitState::HalfOpen));
        assert_eq!(restore(4), Err(SnapshotError::Corrupted));
    }

    #[cfg(feature = "breaker-isolate")]
    #[test]
    fn isolation_holds_against_every_outcome_and_only_a_close_ends_it() {
        let config = BreakerConfig::<1_000>::consecutive_failures(1, D::from_secs(1));
        let mut b = Breaker::new();
        let (verdict, transition) = b.check(1, 0);
        assert_eq!((verdict, transition), (Ok(None), None));
        assert_eq!(b.isolate(), Some(CircuitState::Isolated));
        let refused = Err(Refused { until: None });
        for outcome in [None, Some(Counts::of(9, 0, 9))] {
            assert_eq!(b.on_outcome(&config, outcome, None, 10), None);
            assert_eq!(b.on_failure(&config, Counts::of(1, 0, 1), None, 10), None);
        }
        assert_eq!(b.check(1, Ticks::MAX), (refused, None), "for ever");
        assert_eq!(b.isolate(), None);
        assert_eq!(b.force_close(), Some(CircuitState::Closed));
        assert_eq!(b.force_close(), None);
        assert_eq!(b.check(1, 20), (Ok(None), None));
    }

    #[cfg(any(feature = "breaker-failure-ratio", feature = "breaker-count-window"))]
    #[test]
    fn the_widest_valid_breakers_are_accepted() {
        let d = D::from_secs(1);
        #[cfg(feature = "breaker-failure-ratio")]
        assert_eq!(BreakerConfig::failure_ratio(100, 1, d).validate(), Ok(()));
        #[cfg(feature = "breaker-count-window")]
        {
            assert_eq!(BreakerConfig::count_window(64, 100, 64, d).validate(), Ok(()));
            assert_eq!(BreakerConfig::count_window(1, 1, 1, d).validate(), Ok(()));
        }
    }

    #[cfg(feature = "breaker-failure-ratio")]
    #[test]
    fn the_failure_ratio_reads_the_window_and_needs_its_minimum_throughput() {
        let cfg = BreakerConfig::failure_ratio(50, 10, D::from_secs(10));
        let mut b = Breaker::new();
        let few = Counts::of(9, 0, 9);
        assert_eq!(b.on_outcome(&cfg, Some(few), None, 0), None);
        let enough = Counts::of(10, 0, 5);
        assert_eq!(b.on_outcome(&cfg, Some(enough), None, 0), Some(CircuitState::Open));
    }

    #[test]
    fn bad_breakers_are_refused_with_their_codes() {
        let d = D::from_secs(1);
        #[cfg(feature = "breaker-failure-ratio")]
        {
            assert_eq!(
                BreakerConfig::failure_ratio(0, 1, d).validate(),
                Err(ConfigError::BreakerPercentOutOfRange)
            );
            assert_eq!(
                BreakerConfig::failure_ratio(101, 1, d).validate(),
                Err(ConfigError::BreakerPercentOutOfRange)
            );
        }
        #[cfg(feature = "breaker-count-window")]
        {
            assert_eq!(
                BreakerConfig::count_window(65, 50, 1, d).validate(),
                Err(ConfigError::BreakerCountWindowOutOfRange)
            );
            assert_eq!(
                BreakerConfig::count_window(8, 50, 9, d).validate(),
                Err(ConfigError::BreakerMinCallsAboveWindow)
            );
            for percent in [0, 101] {
                assert_eq!(
                    BreakerConfig::count_window(8, percent, 1, d).validate(),
                    Err(ConfigError::BreakerPercentOutOfRange)
                );
            }
            assert_eq!(
                BreakerConfig::count_window(0, 50, 0, d).validate(),
                Err(ConfigError::BreakerCountWindowOutOfRange)
            );
        }
        assert_eq!(
            BreakerConfig::consecutive_failures(0, d).validate(),
            Err(ConfigError::BreakerZeroConsecutiveFailures)
        );
        assert_eq!(
            BreakerConfig::consecutive_failures(1, d).probes(0).validate(),
            Err(ConfigError::BreakerZeroProbes)
        );
        assert_eq!(
            BreakerConfig::consecutive_failures(1, D::from_ticks(0)).validate(),
            Err(ConfigError::BreakerZeroBreak)
        );
        assert_eq!(
            BreakerConfig::consecutive_failures(1, d).slow_calls(D::from_ticks(0)).validate(),
            Err(ConfigError::BreakerZeroSlowCall)
        );
    }

    /// `bound` keeps what a configuration could have written and forgets the rest: a window of
    /// its size filled in order, or full with its next slot inside it; not one of another size,
    /// one whose next slot is not where filling in order leaves it, or one with outcomes past its
    /// count. And it cuts a break to the configuration's.
    #[cfg(feature = "breaker-count-window")]
    #[test]
    fn a_restored_count_window_is_kept_only_as_the_rule_could_have_filled_it() {
        let cfg = BreakerConfig::<1_000>::count_window(4, 50, 2, D::from_secs(10));
        let ring = |bits: u64, len: u8, next: u8| {
            let mut b = Breaker::new();
            (b.ring, b.ring_len, b.ring_next) = (U64::of(bits), len, next);
            b.bound(&cfg, 0);
            (b.ring.get(), b.ring_len, b.ring_next)
        };
        // Kept: filling in order, and full with its next slot anywhere inside it.
        assert_eq!(ring(0b101, 3, 3), (0b101, 3, 3));
        assert_eq!(ring(0, 0, 0), (0, 0, 0));
        assert_eq!(ring(0b1101, 4, 0), (0b1101, 4, 0));
        assert_eq!(ring(0b1111, 4, 3), (0b1111, 4, 3));
        // Forgotten: more outcomes than the window holds, a next slot not where filling in order
        // leaves it, a next slot past the window, outcomes past its count.
        let forgotten = (0, 0, 0);
        assert_eq!(ring(0b11_1111, 6, 6), forgotten, "a window of 8's outcomes under one of 4");
        assert_eq!(ring(0b11, 2, 3), forgotten);
        assert_eq!(ring(0b11, 2, 1), forgotten);
        assert_eq!(ring(0b1111, 4, 4), forgotten);
        assert_eq!(ring(0b1_0001, 3, 3), forgotten, "an outcome in a slot not filled");
        assert_eq!(ring(0b1_0000_0001, 4, 0), forgotten, "an outcome past the window's four");
        // Under another rule a count window is forgotten whatever it holds.
        let mut b = Breaker::new();
        (b.ring, b.ring_len, b.ring_next) = (U64::of(0b1), 1, 1);
        b.bound(&BreakerConfig::<1_000>::consecutive_failures(3, D::from_secs(10)), 0);
        assert_eq!((b.ring.get(), b.ring_len, b.ring_next), forgotten);
        // A break longer than the configuration's ends at the configuration's from now.
        b.phase = Phase::Open { until: 50_000 };
        b.bound(&cfg, 1_000);
        assert_eq!(b.open_until(), Some(11_000));
        b.bound(&cfg, 2_000);
        assert_eq!(b.open_until(), Some(11_000), "and one within it is kept");
    }
}
