//! A dependency shared by every task that calls it: its configuration, and its state behind its own
//! lock.
//!
//! One `std::sync::Mutex` per dependency, never one for the process: a slow or failing payment
//! provider must not serialise the calls to the fraud service. The lock is held for one call into
//! the core at a time (a fraction of a microsecond), never across an await, so a plain blocking
//! mutex is the right tool on a multi-threaded runtime. relent-adapter-bench measures it with one
//! dependency shared by two cores calling it back to back, millions of operations a second. Two
//! threads each running an operation a `block_on` pay about what one thread does in wall time per
//! call; tasks on tokio's multi-threaded runtime, with nothing between their operations, pay about
//! three times one worker's, as the lock moves between the cores at every step. tower's retry with a shared budget and a `Timeout` slows more in the first and about as
//! much in the second. A spinning `parking_lot` lock did not do better (docs/performance.md).
//!
//! Jitter comes from a fast PRNG (xoshiro256++) kept beside the state, seeded from OS entropy once
//! per process and mixed with the dependency's name. Never a fixed seed in production: a fleet of
//! processes with the same seed draws the same "random" delays and retries in step, which is the
//! synchronised wave jitter exists to prevent (seed 000, "Jitter"). Tests pass an explicit seed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use tokio::sync::Notify;

use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use relent_core::{CircuitState, ConfigError, DependencyConfig};

use crate::clock::{Clock, HZ, Instant};
use crate::trace::{Deferred, Trace};

/// Buckets in a dependency's window of counts.
pub const BUCKETS: usize = 10;

/// Transmissions (or other costed attempts) a dependency's duty cycle remembers before it merges
/// the closest (see `relent_core::DutyCycle`): 16 entries, 192 bytes per dependency.
pub const AIRTIME_LOG: usize = 16;

/// The core's state for one dependency at relent-tokio's tick rate.
pub type State = relent_core::Dependency<HZ, BUCKETS, AIRTIME_LOG>;

/// A dependency's gauges at one instant ([`Dependency::gauges`]), each what the core's read-out of
/// the same name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Gauges {
    /// The circuit: closed, open, half-open, or isolated by an operator.
    pub circuit: CircuitState,
    /// How long an open circuit's break has left, before it lets a probe through; `None` unless
    /// it is open (an isolation has no end).
    pub break_left: Option<std::time::Duration>,
    /// Attempts in flight (what a bulkhead counts).
    pub in_flight: u16,
    /// The bulkhead's slots now: its size, or what its adaptive limit has learnt (below the size
    /// while the dependency shows signs of overload); `None` without a bulkhead.
    pub bulkhead_limit: Option<u16>,
    /// Calls waiting in the bulkhead's queue for a slot: a queue that is never empty says the
    /// bulkhead is too small, or the dependency too slow.
    pub waiting_for_slot: u16,
    /// The window's calls, retries and failures (and the attempts the client throttle refused):
    /// calls per first attempt, the amplification the budget bounds, is calls over calls less
    /// retries.
    pub window: relent_core::Counts,
    /// The retries the budget would allow now; `None` without a budget.
    pub retries_available: Option<u32>,
    /// How long the cooldown a Retry-After started has left; `None` when there is none.
    pub cooldown_left: Option<std::time::Duration>,
    /// The client throttle's probability of refusing the next call, in parts per million; `None`
    /// without a throttle.
    pub throttle_ppm: Option<u32>,
    /// How long attempts take, at the 50th percentile, from the latency log
    /// ([`latency_samples`](relent_core::DependencyConfig::latency_samples)): at most a quarter
    /// above the true value, never below. `None` without a log, or before its second attempt.
    pub latency_p50: Option<std::time::Duration>,
    /// The same at the 90th percentile, from the 10th attempt.
    pub latency_p90: Option<std::time::Duration>,
    /// The same at the 99th percentile, from the 100th attempt.
    pub latency_p99: Option<std::time::Duration>,
    /// Hedges sent since the dependency was made ([`Dependency::execute_hedged`],
    /// `hedge_after` on the layers): a counter, as a dashboard's rate of it reads it.
    pub hedges_sent: u64,
    /// Of those, the hedges that answered first: over `hedges_sent`, whether the hedge delay is well
    /// placed (most hedges winning says it is late; few, that it sends calls for nothing).
    pub hedges_won: u64,
}

pub(crate) struct Locked {
    pub(crate) state: State,
    pub(crate) rng: Xoshiro256PlusPlus,
    /// The id the next operation without one gets (see `Operation::assign_id`): counted under the
    /// lock each operation's first step takes anyway, where an atomic counter of its own cost a
    /// locked read-modify-write per operation.
    pub(crate) next_id: u64,
    /// Hedges sent, and of those answered first, since the dependency was made: counted under the
    /// lock when a hedged call that sent one ends (a hedge is the rare case: a lock for it costs
    /// the calls that hedge, not every call, as an atomic beside the read-mostly fields would).
    pub(crate) hedges: (u64, u64),
    /// The configuration [`Dependency::reconfigure`] last set, `None` until it is first called:
    /// until then every operation borrows `Inner::config` and touches no reference count.
    pub(crate) reconfigured: Option<Arc<DependencyConfig<HZ>>>,
    /// How many more times a waiting operation that finds no slot may pass its wake-up on (see
    /// [`Locked::wakes_waiter`]).
    pub(crate) passes: u16,
}

/// Where an operation keeps the configuration it started under, for its whole life, once its
/// dependency has been reconfigured: the operation borrows it from here (see
/// [`Inner::config_for`]).
pub(crate) type Holder = Option<Arc<DependencyConfig<HZ>>>;

impl Locked {
    /// Whether a step, after which the operation stepped waits on in the bulkhead's queue if
    /// `waits_on`, wakes an operation waiting there: if a slot is free for them under the
    /// configuration in force.
    ///
    /// Under one configuration, an operation that waited and finds no slot means none is free.
    /// One that started under an earlier configuration with fewer slots (see
    /// [`Dependency::reconfigure`]) finds none where the configuration in force sees one, for an
    /// operation started under it; it was woken for that slot, so it passes the wake-up on to the
    /// next in the queue (it waits on behind them). A step that wakes the queue otherwise allows
    /// a pass fewer than operations wait: each waiting operation is tried once, in the queue's
    /// order, and those that cannot take the slot do not wake each other in a loop for as long as
    /// they wait.
    #[inline(always)]
    pub(crate) fn wakes_waiter(&mut self, initial: &DependencyConfig<HZ>, waits_on: bool) -> bool {
        let (free, waiting) = {
            let (state, config) = self.with_config(initial);
            (state.slot_for_waiting(config), state.bulkhead_waiting())
        };
        if !free {
            return false;
        }
        if !waits_on {
            self.passes = waiting.saturating_sub(1);
            return true;
        }
        let passed = self.passes > 0;
        self.passes = self.passes.saturating_sub(1);
        passed
    }

    /// The state, and the configuration it runs under now: `initial` (the dependency's
    /// `Inner::config`) until it is reconfigured. The one place that rule is written.
    pub(crate) fn with_config<'a>(
        &'a mut self,
        initial: &'a DependencyConfig<HZ>,
    ) -> (&'a mut State, &'a DependencyConfig<HZ>) {
        (&mut self.state, self.reconfigured.as_deref().unwrap_or(initial))
    }

    /// Gives `op` the dependency's next id if its context set none, and counts it: the one place
    /// operations are numbered (an operation at its first step, a hedge as it starts).
    #[inline(always)]
    pub(crate) fn number<E>(&mut self, op: &mut relent_core::Operation<'_, HZ, E>) {
        if op.assign_id(self.next_id) {
            self.next_id = self.next_id.wrapping_add(1);
        }
    }
}

pub(crate) struct Inner {
    pub(crate) name: Arc<str>,
    /// The configuration it was made with: the one its operations run under until it is
    /// reconfigured (see `Inner::config_for`).
    pub(crate) config: DependencyConfig<HZ>,
    /// Whether it has been reconfigured (`Locked::reconfigured` is set): set once, never cleared.
    reconfigured: AtomicBool,
    pub(crate) clock: Clock,
    /// On lines of its own: see `OwnLines`.
    locked: OwnLines<Mutex<Locked>>,
    /// Wakes an operation waiting in the bulkhead's queue when a slot frees (see `step`). Only a
    /// dependency configured with a queue has one, set once, when it is first configured with one;
    /// boxed, so that the others are not 128 bytes larger (the fields before the lock fill their
    /// 256 bytes to within 8).
    pub(crate) slot_freed: OnceLock<Box<Notify>>,
}

/// Starts what it holds on a 128-byte boundary and pads it to one, so that the lock and the state
/// it guards, which every operation writes, share no cache line with what the threads only read
/// (the configuration, the clock's anchor, the name, the `Arc`'s counts). Sharing one made every
/// clock read of one thread wait for the line another thread's lock had just taken: with two
/// threads calling one dependency back to back, relent-adapter-bench's contended mode gave +159 to
/// +213 ns a call without this and +137 to +149 ns with it. 128, not 64: x86-64 fetches lines in
/// adjacent pairs, and some ARM cores have 128-byte lines. It costs 168 bytes per dependency.
#[repr(align(128))]
struct OwnLines<T>(T);

/// One downstream dependency, shared by every task that calls it. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Dependency {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Dependency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dependency").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

/// One random word per process, from the OS. Should the OS refuse, the time and the address of a
/// stack variable stand in: a poor seed, but a different one per process, never a constant.
fn process_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        getrandom::u64().unwrap_or_else(|_| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let here = 0u8;
            nanos
                ^ (std::ptr::from_ref(&here) as usize as u64).rotate_left(32)
                ^ u64::from(std::process::id())
        })
    })
}

/// FNV-1a: spreads the name over the seed so that dependencies of one process differ.
fn mix(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

impl Dependency {
    /// A dependency named `name` (it appears in every log line), configured by `config`, with its
    /// jitter seeded from OS entropy. Its clock starts now.
    pub fn new(name: impl Into<Arc<str>>, config: DependencyConfig<HZ>) -> Result<Self, ConfigError> {
        let name = name.into();
        let seed = process_seed() ^ mix(&name);
        Self::build(name, config, seed)
    }

    /// As [`Dependency::new`], with an explicit jitter seed: for tests and simulations only.
    pub fn with_seed(
        name: impl Into<Arc<str>>,
        config: DependencyConfig<HZ>,
        seed: u64,
    ) -> Result<Self, ConfigError> {
        Self::build(name.into(), config, seed)
    }

    fn build(name: Arc<str>, config: DependencyConfig<HZ>, seed: u64) -> Result<Self, ConfigError> {
        let state = State::new(&config, Instant::from_ticks(0))?;
        let locked = Locked {
            state,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            next_id: 1,
            hedges: (0, 0),
            reconfigured: None,
            passes: 0,
        };
        let inner = Inner {
            name,
            config,
            clock: Clock::starting_now(),
            reconfigured: AtomicBool::new(false),
            locked: OwnLines(Mutex::new(locked)),
            slot_freed: OnceLock::new(),
        };
        if config.bulkhead_queue_places().is_some() {
            let _ = inner.slot_freed.set(Box::new(Notify::new()));
        }
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The dependency's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Its configuration now: the one it was made with, or the one it was last reconfigured to
    /// ([`reconfigure`](Self::reconfigure)).
    pub fn config(&self) -> DependencyConfig<HZ> {
        *self.inner.lock().with_config(&self.inner.config).1
    }

    /// Reads the shared state at the current time, under the lock: counts, circuit, slots in
    /// flight, cooldown, budget. For dashboards and tests; keep `f` short, and do not call back
    /// into this dependency from it: the lock is not re-entrant (std's `Mutex` may deadlock or
    /// panic when the thread that holds it locks it again).
    ///
    /// A health endpoint's view of a dependency after an outage opened its circuit:
    ///
    /// ```
    /// use relent_tokio::core::{BreakerConfig, CircuitState, Classify, Context, DependencyConfig, ReplaySafety, RetryBudget, RetryPolicy, Verdict};
    /// use relent_tokio::{Dependency, Duration, HZ};
    ///
    /// #[derive(Debug)]
    /// struct Down;
    /// impl Classify<HZ> for Down {
    ///     fn classify(&self) -> Verdict<HZ> { Verdict::Retryable }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = DependencyConfig::new(Duration::from_secs(10))
    ///     .budget(RetryBudget::ratio(10, 5)?)
    ///     .breaker(BreakerConfig::consecutive_failures(3, Duration::from_secs(30)));
    /// let payrail = Dependency::new("payrail", config)?;
    /// let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1)).build()?;
    /// let read = Context::new(Duration::from_secs(5), ReplaySafety::replayable_read(Duration::from_secs(60)));
    /// let _ = payrail.execute(&policy, read, |_| async { Err::<(), _>(Down) }).await;
    ///
    /// let (circuit, failures, open_for) = payrail.inspect(|state, _config, now| {
    ///     let open_for = state.circuit_open_until(now).map(|until| (until - now).as_secs());
    ///     (state.circuit(now), state.counts(now).failures, open_for)
    /// });
    /// assert_eq!((circuit, failures), (CircuitState::Open, 3));
    /// assert_eq!(open_for, Some(30)); // seconds until it lets a probe through
    /// # Ok(()) }
    /// ```
    pub fn inspect<R>(&self, f: impl FnOnce(&mut State, &DependencyConfig<HZ>, Instant) -> R) -> R {
        let mut locked = self.inner.lock();
        let now = self.inner.clock.now();
        let (state, config) = locked.with_config(&self.inner.config);
        f(state, config, now)
    }

    /// Every gauge a dashboard shows for this dependency, read at once under its lock (the README's
    /// "Dashboards" scrapes them). For any other read of the state, [`inspect`](Self::inspect).
    ///
    /// ```
    /// use relent_tokio::core::{CircuitState, DependencyConfig, RetryBudget};
    /// use relent_tokio::{Dependency, Duration};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5)?);
    /// let gauges = Dependency::new("payrail", config)?.gauges();
    /// assert_eq!((gauges.circuit, gauges.in_flight, gauges.window.calls), (CircuitState::Closed, 0, 0));
    /// assert_eq!(gauges.retries_available, Some(5)); // the ratio budget's floor
    /// assert_eq!((gauges.break_left, gauges.cooldown_left, gauges.throttle_ppm), (None, None, None));
    /// # Ok(()) }
    /// ```
    pub fn gauges(&self) -> Gauges {
        let mut locked = self.inner.lock();
        let (hedges_sent, hedges_won) = locked.hedges;
        let now = self.inner.clock.now();
        let (state, config) = locked.with_config(&self.inner.config);
        let left = |until: Option<Instant>| {
            until.and_then(|t| t.checked_duration_since(now)).map(crate::clock::std_duration)
        };
        let latency = |state: &State, percent| {
            state.latency_percentile(config, percent).map(crate::clock::std_duration)
        };
        Gauges {
            circuit: state.circuit(now),
            break_left: left(state.circuit_open_until(now)),
            in_flight: state.in_flight(),
            bulkhead_limit: state.bulkhead_limit(config),
            waiting_for_slot: state.bulkhead_waiting(),
            window: state.counts(now),
            retries_available: state.retries_available(config, now),
            cooldown_left: left(state.cooldown_until(now)),
            throttle_ppm: state.throttle_ppm(config, now),
            latency_p50: latency(state, 50),
            latency_p90: latency(state, 90),
            latency_p99: latency(state, 99),
            hedges_sent,
            hedges_won,
        }
    }

    /// The current time on this dependency's clock.
    pub fn now(&self) -> Instant {
        self.inner.clock.now()
    }

    /// Isolates the dependency's circuit, for an operator in an incident: from now on every call is
    /// refused unsent with the problem `circuit_isolated` and no time to try again, whatever the
    /// counts say, until [`close_circuit`](Self::close_circuit). A retry waiting for its backoff
    /// is refused when it is due; a call in flight finishes, and an operation whose attempt then
    /// fails ends at once rather than waiting for a retry that could not go. Each change is logged
    /// at WARN as the breaker's own are (`relent: circuit changed`, `state="isolated"`), with
    /// `by="operator"`.
    ///
    /// Returns the change, `None` if the circuit was isolated already. A dependency configured
    /// without a breaker has no circuit: [`ConfigError::NoBreaker`], which says how to configure
    /// one. See `relent_core::Dependency::isolate_circuit`.
    ///
    /// An admin endpoint that takes a provider out during its maintenance window, and puts it back:
    ///
    /// ```
    /// use relent_tokio::core::{BreakerConfig, CircuitState, Context, DependencyConfig, Disposition};
    /// use relent_tokio::core::{ReplaySafety, RetryBudget, RetryPolicy};
    /// use relent_tokio::{Dependency, Duration};
    /// # use relent_tokio::{HZ, core::{Classify, Verdict}};
    /// # #[derive(Debug)]
    /// # struct Down;
    /// # impl std::fmt::Display for Down {
    /// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("down") }
    /// # }
    /// # impl std::error::Error for Down {}
    /// # impl Classify<HZ> for Down {
    /// #     fn classify(&self) -> Verdict<HZ> { Verdict::Retryable }
    /// # }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = DependencyConfig::new(Duration::from_secs(10))
    ///     .budget(RetryBudget::ratio(10, 5)?)
    ///     .breaker(BreakerConfig::consecutive_failures(5, Duration::from_secs(30)));
    /// let payrail = Dependency::new("payrail", config)?;
    /// let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1)).build()?;
    /// let read = || Context::new(Duration::from_secs(5), ReplaySafety::replayable_read(Duration::from_secs(60)));
    ///
    /// assert_eq!(payrail.isolate_circuit()?, Some(CircuitState::Isolated));
    /// let refused = payrail.execute(&policy, read(), |_| async { Ok::<_, Down>("sent") }).await;
    /// let Err(error) = refused else { panic!("sent while isolated") };
    /// assert_eq!((error.code(), error.retry_in()), ("circuit_isolated", None));
    /// let completion = error.completion().unwrap();
    /// assert_eq!((completion.disposition, completion.summary.dispatched), (Disposition::Rejected, 0));
    ///
    /// assert_eq!(payrail.close_circuit()?, Some(CircuitState::Closed));
    /// assert_eq!(payrail.execute(&policy, read(), |_| async { Ok::<_, Down>("sent") }).await?, "sent");
    /// # Ok(()) }
    /// ```
    pub fn isolate_circuit(&self) -> Result<Option<CircuitState>, ConfigError> {
        let change = {
            let mut locked = self.inner.lock();
            let (state, config) = locked.with_config(&self.inner.config);
            state.isolate_circuit(config)?
        };
        self.log_change(change);
        Ok(change)
    }

    /// Closes the dependency's circuit from any state (isolated, open, half-open), for an operator:
    /// calls go through at once, and the breaker's counts and the window's failures start afresh,
    /// as when probes close it. Ends an isolation, or overrides a break after what tripped it was
    /// fixed. Logged at WARN with `by="operator"` when it changes the state.
    ///
    /// Returns the change, `None` if the circuit was closed already (its counts are cleared all
    /// the same). [`ConfigError::NoBreaker`] without a breaker.
    pub fn close_circuit(&self) -> Result<Option<CircuitState>, ConfigError> {
        let change = {
            let mut locked = self.inner.lock();
            let (state, config) = locked.with_config(&self.inner.config);
            state.close_circuit(config)?
        };
        self.log_change(change);
        Ok(change)
    }

    /// Changes the dependency's configuration while it runs, keeping what its state knows: an
    /// open circuit and when its break ends, a cooldown a provider asked for, the attempts in
    /// flight, the window's counts, the budget's tokens. For an operator in an incident (a smaller
    /// budget, a lower rate, a longer break), or a configuration file reloaded
    /// (`config::DependencySettings`, feature `serde`). A restart
    /// would apply the change too, and forget all of that when it matters most.
    ///
    /// `config` is checked as [`Dependency::new`] checks one; refused, nothing changes, and the
    /// error says what to fix. Each part of the state is carried over as
    /// `relent_core::Dependency::reconfigure` says: what is a fact about the dependency stays, what
    /// the old numbers produced is carried into the new ones and never given more than they allow
    /// (tokens up to the new capacity, a rate debt cut to the new limit, a cooldown to the new
    /// longest), and a protection added or left out starts fresh. Operations already running go
    /// on under the configuration they started with, over the same state, until they end; those
    /// that start after this returns run under `config`, and so does a hedge sent after it for an
    /// operation from before. It never waits for them. An operation
    /// waiting in the bulkhead's queue waits for a slot under its own configuration too: a slot
    /// `config` adds goes to the operations started after the change, and one from before, woken
    /// for it, passes the wake-up on to the next in the queue. Logged at INFO
    /// (`relent: dependency reconfigured`), with the new configuration. From then on each operation
    /// takes the dependency's lock once more as it starts, for its share of the configuration
    /// (66 instructions on the production bench's success path); a dependency never reconfigured
    /// reads one flag instead (13).
    ///
    /// A `config` equal to the one in force (a file reloaded unchanged, by a watcher or on a
    /// timer) changes nothing, not even that: it is logged at DEBUG
    /// (`relent: dependency configuration unchanged`) and the dependency runs on as it was.
    ///
    /// A policy checked against the old configuration is checked again by each operation as it
    /// starts: a token bucket whose hold no longer outlasts a policy's attempt timeout refuses
    /// that policy's operations (`StartError::Budget`), so check the policies you run with
    /// [`RetryPolicy::check_budget`](relent_core::RetryPolicy::check_budget) before reconfiguring.
    ///
    /// In an incident, with the circuit open: a smaller retry budget and a rate limit at once, and
    /// the circuit still open for what is left of its break.
    ///
    /// ```
    /// use relent_tokio::core::{BreakerConfig, CircuitState, Context, DependencyConfig, RateLimit};
    /// use relent_tokio::core::{ReplaySafety, RetryBudget, RetryPolicy};
    /// use relent_tokio::{Dependency, Duration};
    /// # use relent_tokio::{HZ, core::{Classify, Verdict}};
    /// # #[derive(Debug)]
    /// # struct Down;
    /// # impl Classify<HZ> for Down {
    /// #     fn classify(&self) -> Verdict<HZ> { Verdict::Retryable }
    /// # }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let calm = DependencyConfig::new(Duration::from_secs(10))
    ///     .budget(RetryBudget::ratio(20, 10)?)
    ///     .breaker(BreakerConfig::consecutive_failures(3, Duration::from_secs(30)));
    /// let payrail = Dependency::new("payrail", calm)?;
    /// let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(1)).build()?;
    /// let read = Context::new(Duration::from_secs(5), ReplaySafety::replayable_read(Duration::from_secs(60)));
    /// let _ = payrail.execute(&policy, read, |_| async { Err::<(), _>(Down) }).await;
    /// let gauges = payrail.gauges();
    /// assert_eq!((gauges.circuit, gauges.retries_available), (CircuitState::Open, Some(10)));
    ///
    /// let incident = calm.budget(RetryBudget::ratio(5, 2)?).rate_limit(RateLimit::new(50, Duration::from_secs(1)));
    /// payrail.reconfigure(incident)?;
    /// // The window's counts stay: the 2 retries the outage took count against the new budget's 2.
    /// let gauges = payrail.gauges();
    /// assert_eq!((gauges.circuit, gauges.retries_available), (CircuitState::Open, Some(0)));
    /// assert_eq!(payrail.config(), incident);
    ///
    /// // Refused, with what to fix; the dependency runs on as it was.
    /// let error = payrail.reconfigure(incident.bulkhead(0)).unwrap_err();
    /// assert_eq!(error.as_str(), "zero_bulkhead");
    /// assert_eq!(payrail.config(), incident);
    /// # Ok(()) }
    /// ```
    pub fn reconfigure(&self, config: DependencyConfig<HZ>) -> Result<(), ConfigError> {
        // A queue's wake-ups are there before an operation can start under `config` and wait in
        // it (kept if `config` is refused: it only wakes operations that wait).
        if config.bulkhead_queue_places().is_some() {
            let _ = self.inner.slot_freed.get_or_init(|| Box::new(Notify::new()));
        }
        let wake = {
            let mut locked = self.inner.lock();
            let now = self.inner.clock.now();
            let (state, from) = locked.with_config(&self.inner.config);
            if *from == config {
                // Carrying the state over would change nothing (relent-core promises it, and
                // `tests/tests/equivalence.rs` checks it): the operations keep the path of a
                // dependency never reconfigured, if it was never.
                drop(locked);
                crate::trace::unchanged(&self.inner.name);
                return Ok(());
            }
            state.reconfigure(from, &config, now)?;
            locked.reconfigured = Some(Arc::new(config));
            // Under the lock: an operation that sees the flag finds the configuration set.
            self.inner.reconfigured.store(true, Ordering::Release);
            // A slot the change frees for the operations waiting (an adaptive limit raised to the
            // new floor) wakes them, as a step that frees one does.
            self.inner.slot_freed.get().is_some() && locked.wakes_waiter(&self.inner.config, false)
        };
        if let (true, Some(slot_freed)) = (wake, self.inner.slot_freed.get()) {
            slot_freed.notify_one();
        }
        crate::trace::reconfigured(&self.inner.name, &config);
        Ok(())
    }

    /// Logs an operator's change of the circuit, after the lock is released.
    fn log_change(&self, change: Option<CircuitState>) {
        if let Some(state) = change {
            crate::trace::circuit_changed_by_operator(&self.inner.name, state);
        }
    }
}

impl Inner {
    /// The lock. The core never panics, so a poisoned lock (a panic in a caller's observer) still
    /// guards consistent state: carry on.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Locked> {
        self.locked.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One step of an operation: `f` runs under the lock, with the state and an observer that
    /// keeps the step's events, and the events are logged after the lock is released (see
    /// `trace`). Every call an operation makes into the core goes through here.
    ///
    /// A step after which a bulkhead slot is free while operations wait in the queue for one (an
    /// attempt reported, a waiting operation refused or cancelled, a newcomer queued behind them)
    /// wakes one of them, the one that has waited longest. `Notify` keeps the wake-up if that
    /// operation is between its step and its wait, so none is lost; a wake-up that finds no room
    /// (another waiting operation took the slot first) only makes it wait on.
    ///
    /// `sheddable`: whether the operation is sheddable work, whose refusals are logged at INFO
    /// (see `trace`).
    #[inline(always)]
    pub(crate) fn step<R>(
        &self,
        sheddable: bool,
        f: impl FnOnce(&mut Locked, &mut Deferred<Trace<'_>>) -> R,
    ) -> R {
        self.step_passing(sheddable, |locked, events| (f(locked, events), false))
    }

    /// As [`step`](Self::step), for an operation polled again after a wait in the bulkhead's
    /// queue: `f` also says whether the operation waits on for a slot (see
    /// [`Locked::wakes_waiter`]).
    #[inline(always)]
    pub(crate) fn step_passing<R>(
        &self,
        sheddable: bool,
        f: impl FnOnce(&mut Locked, &mut Deferred<Trace<'_>>) -> (R, bool),
    ) -> R {
        let mut events = Deferred::new(Trace { dependency: &self.name, sheddable });
        let (result, wake) = {
            let mut locked = self.lock();
            let (result, waits_on) = f(&mut locked, &mut events);
            // A dependency never configured with a queue has no box, and reads nothing more.
            let queue = self.slot_freed.get().is_some();
            (result, queue && locked.wakes_waiter(&self.config, waits_on))
        };
        if let (true, Some(slot_freed)) = (wake, self.slot_freed.get()) {
            slot_freed.notify_one();
        }
        events.emit();
        result
    }

    /// The configuration an operation starting now runs under, for as long as `holder` lives: the
    /// one the dependency was made with, borrowed, until it is reconfigured; then a share of the
    /// one set last, kept in `holder`. So an operation goes on under the configuration it started
    /// with, and a reconfiguration never waits for the operations in flight. A dependency never
    /// reconfigured reads one flag here, and its operations take no lock for it and touch no
    /// reference count; a reconfigured one takes its lock once more per operation for the share.
    #[inline(always)]
    pub(crate) fn config_for<'o>(&'o self, holder: &'o mut Holder) -> &'o DependencyConfig<HZ> {
        if !self.reconfigured.load(Ordering::Acquire) {
            return &self.config;
        }
        self.share_config(holder)
    }

    #[cold]
    #[inline(never)]
    fn share_config<'o>(&'o self, holder: &'o mut Holder) -> &'o DependencyConfig<HZ> {
        match self.lock().reconfigured.clone() {
            Some(current) => holder.insert(current),
            None => &self.config,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::RngCore;

    const CHILD: &str = "RELENT_TEST_PRINT_PROCESS_SEED";

    #[test]
    fn the_lock_and_its_state_have_their_cache_lines_to_themselves() {
        // Fields never overlap, so a lock that starts and ends on 128-byte boundaries, in a
        // struct aligned to 128, shares no line with them.
        let start = std::mem::offset_of!(Inner, locked);
        let len = size_of::<OwnLines<Mutex<Locked>>>();
        assert_eq!((align_of::<Inner>(), start % 128, len % 128), (128, 0, 0));
    }

    #[test]
    fn the_name_mix_is_fnv_1a() {
        // The published FNV-1a 64-bit test vectors.
        assert_eq!(mix(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(mix("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(mix("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn dependencies_of_one_process_draw_different_jitter() {
        let config = DependencyConfig::new(crate::Duration::from_secs(10));
        let draw = |name| Dependency::new(name, config).unwrap().inner.lock().rng.next_u64();
        assert_ne!(draw("payrail"), draw("fraud"));
        assert_eq!(draw("payrail"), draw("payrail"), "one process seed, drawn once");
    }

    /// The seed comes from the OS once per process: two processes of one binary get different
    /// seeds, so a fleet started together does not retry in step. The test runs its own binary
    /// twice, as this one test, and compares what the children print.
    #[test]
    fn each_process_draws_its_own_seed() {
        if std::env::var_os(CHILD).is_some() {
            println!("process seed {}", process_seed());
            return;
        }
        let child = || {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "dependency::tests::each_process_draws_its_own_seed", "--nocapture"])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let stdout = String::from_utf8(out.stdout).unwrap();
            let seed = stdout.lines().find_map(|l| l.strip_prefix("process seed ")).map(str::to_owned);
            seed.unwrap_or_else(|| panic!("the child printed no seed: {stdout}"))
        };
        let (a, b) = (child(), child());
        assert_ne!(a, b);
        assert_ne!(a, process_seed().to_string());
    }

    /// A configuration equal to the one in force changes nothing: a dependency never reconfigured
    /// keeps its operations off the lock for their configuration, and a reconfigured one keeps
    /// the configuration it shares with the operations it started.
    #[test]
    fn a_configuration_reloaded_unchanged_changes_nothing_not_even_the_path() {
        let calm = DependencyConfig::new(crate::Duration::from_secs(10));
        let dep = Dependency::with_seed("payrail", calm, 7).unwrap();
        dep.reconfigure(calm).unwrap();
        assert!(!dep.inner.reconfigured.load(Ordering::Relaxed), "never reconfigured");
        assert!(dep.inner.lock().reconfigured.is_none());
        let incident = calm.bulkhead(4);
        dep.reconfigure(incident).unwrap();
        let shared = dep.inner.lock().reconfigured.clone().unwrap();
        dep.reconfigure(incident).unwrap();
        assert!(Arc::ptr_eq(&shared, dep.inner.lock().reconfigured.as_ref().unwrap()));
        assert_eq!(dep.config(), incident);
    }

    #[test]
    fn a_dependency_shows_its_name() {
        let dep = Dependency::with_seed("payrail", DependencyConfig::new(crate::Duration::from_secs(10)), 7)
            .unwrap();
        assert_eq!(dep.name(), "payrail");
        assert_eq!(format!("{dep:?}"), "Dependency { name: \"payrail\", .. }");
    }
}
