//! Scripts of calls into relent-core, decoded from arbitrary bytes, with checks after every call:
//! the input of the fuzz target `operations` (`fuzz_targets/operations.rs`), and of relent-tests'
//! `tests/tests/scripts.rs`, which runs the same scripts on stable.
//!
//! Why a fuzz target beside the property tests in `tests/`: relent-core promises never to panic,
//! on any input. The properties check the rules over valid configurations and callers that keep
//! the call-order contract. A script is any caller. Its configurations reach the ends of the tick
//! range and the edges of every validation. Some of its steps drive an operation as an adapter does
//! (report each attempt, sleep out each wait), so that it retries and spends its policy; its other
//! steps are one call each, in any order. Its `now` goes backwards at times. It reports attempts
//! twice, reports another operation's attempt, drops operations without abandoning them, rebases by
//! any amount, isolates and closes the circuit as an operator would, states operations sheddable
//! against a critical reserve (from bits the script already drew: an odd id, a window divisible by
//! three), starts hedges of running operations (for a context of id 2), and restores snapshots whose bytes are arbitrary but carry a valid CRC (what a flash
//! page written by another firmware could hold). libFuzzer steers the bytes toward branches no
//! input has taken yet.
//!
//! Each check is an `assert!`. A failed check, or a panic in the core, is a crash for libFuzzer and
//! a failed test for `tests/tests/scripts.rs`. The checks are the contract's promises that hold for
//! every caller; the rules themselves (delays, budgets, breaker) are the property tests' business.
//!
//! `seeds/` holds inputs that together reach every branch libFuzzer reached in longer runs, with
//! both tick widths: each run's corpus reduced to the inputs that add an edge, by libFuzzer's merge
//! into an empty directory (`operations -merge=1 -use_counters=0 NEW CORPUS`, with the fuzz
//! target's binary from `target/`), one build after another into the same directory. An edge
//! does not tell an operation that spent three attempts from one that spent its only one, so the
//! ten smallest inputs of a run's corpus that spend a policy of several attempts (`Reached::spent`)
//! are kept as well, and the five smallest that dispatch after a wait in the bulkhead's queue, that
//! the client throttle refuses and that a bulkhead refuses below its size (its adaptive limit;
//! `examples/reach.rs` lists what each input reaches), those of a run that retry an operation
//! stated safe until an attempt arrives (with a few of their one-byte variants: no edge is new
//! to such a retry, so libFuzzer keeps few), twelve one-byte variants of kept seeds whose backoff
//! byte's high half now gives an exponential backoff a multiplier other than 2 and that retry
//! under it (added with the multiplier, whose byte the seeds already held), and
//! `tests/tests/scripts.rs` checks that the seeds do. A change to how
//! scripts are decoded changes what every seed does: fuzz from them for a few minutes per tick
//! width, and reduce again.
//!
//! A second target, `reconfigure` ([`run_reconfigure`], its module's docs), decodes two
//! configurations as this one decodes one and switches a dependency between them while its
//! operations run; its seeds are in `seeds-reconfigure/`, reduced the same way.

#![forbid(unsafe_code)]

use arbitrary::{Result, Unstructured};
use rand_core::RngCore;
use relent_core::{
    Action, Attempt, ConfigError, Context, Dependency, DependencyConfig, Disposition, Event, Instant, Jitter,
    MAX_EVENTS_PER_CALL, MAX_SPAN, Observer, Operation, ReplaySafety, RetryBudget, RetryPolicy, Ticks,
    Verdict,
};

mod reconfigure;

pub use reconfigure::{Reconfigured, run_reconfigure};

/// Counts the events of one call into the core, and keeps what it said of the bulkhead's limit.
#[derive(Default)]
struct Events {
    count: usize,
    /// Each move of the adaptive limit the call announced, from and to; more than one is a bug.
    limit_moves: usize,
    limit_move: Option<(u16, u16)>,
    /// Whether the call reserved a rate unit and airtime for a later instant (a wait for either).
    reserved: bool,
}

impl<const HZ: u64> Observer<HZ> for Events {
    fn on_event(&mut self, event: &Event<HZ>) {
        self.count += 1;
        if let Event::BulkheadLimitChanged { from, to, .. } = *event {
            self.limit_moves += 1;
            self.limit_move = Some((from, to));
        }
        if matches!(event, Event::WaitingForRateLimit { .. } | Event::WaitingForAirtime { .. }) {
            self.reserved = true;
        }
    }
}

impl Events {
    /// The core's bound on the events of one call, which an observer that keeps them relies on.
    fn within_bound(&self) {
        assert!(
            self.count <= MAX_EVENTS_PER_CALL,
            "one call made {} events (MAX_EVENTS_PER_CALL is {MAX_EVENTS_PER_CALL})",
            self.count
        );
    }

    /// The call's events said how the bulkhead's limit moved from `before` to `after`: one event
    /// with both for a move, none otherwise.
    fn said_limit(&self, before: Option<u16>, after: Option<u16>) {
        match (before, after) {
            (Some(from), Some(to)) if from != to => {
                assert_eq!((self.limit_moves, self.limit_move), (1, Some((from, to))), "a move of the limit")
            }
            _ => assert_eq!(self.limit_moves, 0, "a limit said to move from {before:?} that stayed"),
        }
    }
}

/// Whether `op` is a hedge of another (never, where hedges are compiled out).
fn is_hedge<const HZ: u64, E>(op: &Operation<'_, HZ, E>) -> bool {
    #[cfg(feature = "hedge")]
    return op.is_hedge();
    #[cfg(not(feature = "hedge"))]
    return {
        let _ = op;
        false
    };
}

/// Buckets in the dependency's window, and entries in its airtime log: small, so that scripts fill
/// them.
const BUCKETS: usize = 4;
const LOG: usize = 4;
/// Operations a script runs at once on its dependency.
const SLOTS: usize = 4;
/// Calls into the core one `drive` step makes at most: enough for an operation of three attempts
/// to be dispatched, fail, wait and end.
const DRIVE_CALLS: usize = 12;
/// At most this many calls per script: a longer input adds nothing but time.
const STEPS: usize = 256;
/// Room for any snapshot of the dependency (`Dependency::SNAPSHOT_LEN`, which a generic tick rate
/// cannot size an array with).
const SNAPSHOT_ROOM: usize = 1024;

type State<const HZ: u64> = Dependency<HZ, BUCKETS, LOG>;
type Duration<const HZ: u64> = relent_core::Duration<HZ>;

/// What scripts reached, added up over the scripts run with one `Reached`: a test on random
/// inputs checks that they reach the paths worth checking, not only refusals of their
/// configuration.
#[derive(Debug, Default, Clone, Copy)]
pub struct Reached {
    /// Scripts whose policy and dependency were accepted.
    pub dependencies: u32,
    /// Attempts dispatched.
    pub dispatched: u32,
    /// Of those, retries.
    pub retries: u32,
    /// Waits the core asked for.
    pub waits: u32,
    /// Completions taken.
    pub completions: u32,
    /// Of those, successes.
    pub successes: u32,
    /// Of those, operations that retried until their policy's attempts were spent.
    pub spent: u32,
    /// Reports of an attempt not out, which the core ignored.
    pub ignored_reports: u32,
    /// Snapshots restored.
    pub restored: u32,
    /// Snapshots refused (edited, cut short).
    pub refused_snapshots: u32,
    /// An operator's isolations and closes that changed the circuit.
    pub operator_changes: u32,
    /// Completions refused by an isolated circuit.
    pub isolated_refusals: u32,
    /// Completions refused by the client throttle.
    pub throttled_refusals: u32,
    /// Completions refused by a bulkhead whose adaptive limit was below its size.
    pub adaptive_refusals: u32,
    /// Reads of the dependency's state whose latency log knew its median.
    pub learnt_percentiles: u32,
    /// Polls after which an operation waited in the bulkhead's queue.
    pub queued: u32,
    /// Completions of sheddable work refused by a bulkhead with room left in its critical reserve.
    pub shed_refusals: u32,
    /// Attempts dispatched by an operation that had waited in the queue for a slot.
    pub dispatched_from_queue: u32,
    /// First attempts that went once every wait had passed, at a script's end.
    pub alive: u32,
    /// Hedges started (feature `hedge`).
    pub hedges: u32,
    /// Attempts dispatched by hedges.
    pub hedges_dispatched: u32,
    /// Retries of operations stated safe until an attempt arrives (feature `until-arrived`).
    pub until_arrived_retries: u32,
    /// Retries under an exponential backoff whose multiplier is not 2 (feature
    /// `backoff-multiplier`).
    pub multiplied_retries: u32,
}

/// The share of each limit an operation started with `context` may not
/// use (the rule `Criticality` documents): the dependency's critical reserve if it is sheddable.
fn held_back<const HZ: u64>(config: &DependencyConfig<HZ>, context: &Context<HZ>) -> u8 {
    #[cfg(feature = "criticality")]
    if context.operation_criticality() == relent_core::Criticality::Sheddable {
        return config.critical_reserve_percent().unwrap_or(0);
    }
    let _ = (config, context);
    0
}

/// The slots of a bulkhead of `limit` that work held back by `held_back` percent may fill: the
/// rest of it, rounded down, one at least (written here from the docs, not taken from the core).
fn share(limit: u16, held_back: u8) -> u32 {
    let limit = u32::from(limit);
    if held_back == 0 {
        return limit;
    }
    (limit * (100 - u32::from(held_back)) / 100).max(1).min(limit)
}

/// Ticks as a 64-bit number, whatever their width.
#[allow(clippy::useless_conversion)] // With 64-bit ticks, already a u64.
fn wide(ticks: relent_core::Ticks) -> u64 {
    u64::from(ticks)
}

/// The airtime a frame of `cost` held back by `held_back` percent may find on air, of an
/// allowance of `allowance`: the rest, rounded down, one tick at least, and never below its own
/// cost (written here from the docs, not taken from the core).
fn airtime_share(allowance: u64, held_back: u8, cost: u64) -> u64 {
    (allowance.saturating_mul(100 - u64::from(held_back)) / 100).max(1).min(allowance).max(cost)
}

/// Runs the script that `data` encodes. Running out of bytes ends it early, which is not a
/// failure; a broken promise of the core panics.
pub fn run(data: &[u8]) {
    run_counting(data, &mut Reached::default());
}

/// As [`run`], adding what the script reached to `reached`.
pub fn run_counting(data: &[u8], reached: &mut Reached) {
    let mut u = Unstructured::new(data);
    // The tick rates of the adapters: a 1 kHz SysTick, a 32,768 Hz RTC, tokio's microseconds.
    let _ended_early = match u.int_in_range(0..=2u8) {
        Ok(0) => run_at::<1_000>(&mut u, reached),
        Ok(1) => run_at::<32_768>(&mut u, reached),
        _ => run_at::<1_000_000>(&mut u, reached),
    };
}

/// A tick count, biased toward the values where arithmetic goes wrong: zero, a few ticks, the end
/// of the tick range, the longest span the core accepts, and powers of ten.
fn ticks(u: &mut Unstructured) -> Result<Ticks> {
    Ok(match u.int_in_range(0..=7u8)? {
        0 => 0,
        1 => u.int_in_range(1..=64)?,
        2 => u.int_in_range(0..=100_000)?,
        3 => Ticks::MAX - u.int_in_range(0..=64)?,
        4 => MAX_SPAN.saturating_sub(64).saturating_add(u.int_in_range(0..=128)?),
        5 => Ticks::saturating_pow(10, u.int_in_range(0..=19)?),
        _ => u.arbitrary()?,
    })
}

/// `t + d`, saturating at the end of time, as the core adds.
fn after<const HZ: u64>(t: Instant<HZ>, d: Duration<HZ>) -> Instant<HZ> {
    Instant::<HZ>::from_ticks(t.as_ticks().saturating_add(d.as_ticks()))
}

fn duration<const HZ: u64>(u: &mut Unstructured) -> Result<Duration<HZ>> {
    Ok(Duration::<HZ>::from_ticks(ticks(u)?))
}

/// A count (attempts, calls, slots, tokens): mostly small, at times anything.
fn count<T: From<u8> + for<'a> arbitrary::Arbitrary<'a>>(u: &mut Unstructured) -> Result<T> {
    if u.ratio(1u8, 6)? { u.arbitrary() } else { Ok(T::from(u.int_in_range(0..=8u8)?)) }
}

/// `then(value)` if the script says so, `value` otherwise: an optional builder call.
fn maybe<T>(
    u: &mut Unstructured,
    value: T,
    then: impl FnOnce(T, &mut Unstructured) -> Result<T>,
) -> Result<T> {
    if u.arbitrary()? { then(value, u) } else { Ok(value) }
}

/// The value of a constructor, or `None` when it refuses: its error must say what is wrong.
fn accepted<T, E: core::fmt::Display>(made: core::result::Result<T, E>) -> Option<T> {
    match made {
        Ok(t) => Some(t),
        Err(e) => {
            let said = e.to_string();
            assert!(!said.is_empty(), "an error that says nothing");
            None
        }
    }
}

fn policy<const HZ: u64>(u: &mut Unstructured) -> Result<Option<RetryPolicy<HZ>>> {
    let attempts = count(u)?;
    // The backoff's byte, read whole: its rest by 3 is the kind, as `int_in_range(0..=2)` reads
    // it, so the kept seeds decode as they did; its high half gives an exponential backoff a
    // multiplier other than 2 (106 to 360 hundredths), with `backoff-multiplier`.
    let backoff: u8 = u.arbitrary()?;
    let mut builder = match backoff % 3 {
        0 => RetryPolicy::exponential(attempts, duration(u)?, duration(u)?),
        1 => RetryPolicy::constant(attempts, duration(u)?),
        _ => RetryPolicy::single_attempt(),
    };
    #[cfg(feature = "backoff-multiplier")]
    if backoff % 3 == 0 && backoff >= 128 {
        builder = builder.multiplier_percent(u16::from(backoff) * 2 - 150);
    }
    builder = builder.jitter(match u.int_in_range(0..=3u8)? {
        0 => Jitter::None,
        1 => Jitter::Full,
        2 => Jitter::Equal,
        _ => Jitter::Decorrelated,
    });
    builder = maybe(u, builder, |b, u| Ok(b.max_delay(duration(u)?)))?;
    builder = maybe(u, builder, |b, u| Ok(b.attempt_timeout(duration(u)?)))?;
    builder = maybe(u, builder, |b, u| Ok(b.min_remaining(duration(u)?)))?;
    builder = maybe(u, builder, |b, u| Ok(b.retry_after_spread(duration(u)?)))?;
    Ok(accepted(builder.build()))
}

/// A dependency's configuration, with the protections compiled in (a build without one cannot
/// configure it).
fn config<const HZ: u64>(u: &mut Unstructured) -> Result<DependencyConfig<HZ>> {
    let mut config = DependencyConfig::new(duration(u)?);
    // A budget most of the time: a policy with retries needs one.
    if u.ratio(3u8, 4)? {
        let budget = if u.arbitrary()? {
            RetryBudget::ratio(u.int_in_range(0..=110)?, count(u)?)
        } else {
            token_bucket(u)?
        };
        if let Some(budget) = accepted(budget) {
            config = config.budget(budget);
        }
    }
    #[cfg(feature = "breaker")]
    {
        config = maybe(u, config, |config, u| {
            let breaker = breaker(u)?;
            let breaker = maybe(u, breaker, |b, u| Ok(b.probes(count(u)?)))?;
            let breaker = maybe(u, breaker, |b, u| Ok(b.slow_calls(duration(u)?)))?;
            Ok(config.breaker(breaker))
        })?;
    }
    #[cfg(feature = "bulkhead")]
    {
        config = maybe(u, config, |c, u| {
            let c = c.bulkhead(count(u)?);
            let c = maybe(u, c, |c, u| Ok(c.bulkhead_queue(count(u)?, duration(u)?)))?;
            #[cfg(feature = "bulkhead-adaptive")]
            let c = maybe(u, c, |c, u| {
                let limit = relent_core::AdaptiveLimit::new(duration(u)?).min_slots(count(u)?);
                Ok(c.adaptive_limit(limit.decrease_to_permille(u.arbitrary()?)))
            })?;
            Ok(c)
        })?;
    }
    #[cfg(feature = "rate-limit")]
    {
        config = maybe(u, config, |config, u| {
            let limit = relent_core::RateLimit::new(count(u)?, duration(u)?);
            let limit = maybe(u, limit, |l, u| Ok(l.burst(count(u)?)))?;
            let limit = maybe(u, limit, |l, u| Ok(l.max_wait(duration(u)?)))?;
            Ok(config.rate_limit(limit))
        })?;
    }
    #[cfg(feature = "duty-cycle")]
    {
        use relent_core::DutyCycle;
        config = maybe(u, config, |c, u| {
            Ok(c.duty_cycle(if u.arbitrary()? {
                DutyCycle::new(duration(u)?, duration(u)?)
            } else {
                DutyCycle::per_mille(u.int_in_range(0..=1_100)?, duration(u)?)
            }))
        })?;
    }
    #[cfg(feature = "cooldown")]
    {
        config = maybe(u, config, |c, u| Ok(c.cooldown(duration(u)?)))?;
    }
    #[cfg(feature = "throttle")]
    {
        config =
            maybe(u, config, |c, u| Ok(c.client_throttle(relent_core::ClientThrottle::new(u.arbitrary()?))))?;
    }
    // A latency log for half the windows, its size from the window's: no input byte of its own, so
    // that the kept seeds decode as they did before it.
    #[cfg(feature = "latency")]
    {
        let window = config.window().as_ticks();
        if window % 2 == 1 {
            config = config.latency_samples(20 + u16::try_from(window % 64).unwrap_or(0));
        }
    }
    // A critical reserve for a third of the windows, also with no input byte of its own.
    #[cfg(feature = "criticality")]
    {
        let window = config.window().as_ticks();
        if window % 3 == 0 {
            config = config.critical_reserve(1 + u8::try_from((window / 3) % 90).unwrap_or(0));
        }
    }
    Ok(config)
}

/// A token bucket; a ratio budget where token buckets are compiled out.
fn token_bucket<const HZ: u64>(
    u: &mut Unstructured,
) -> Result<core::result::Result<RetryBudget<HZ>, ConfigError>> {
    #[cfg(feature = "token-bucket")]
    return Ok(RetryBudget::token_bucket(count(u)?, count(u)?, duration(u)?, duration(u)?));
    #[cfg(not(feature = "token-bucket"))]
    return Ok(RetryBudget::ratio(u.int_in_range(0..=110)?, count(u)?));
}

/// A breaker on one of the trip rules compiled in (consecutive failures always are).
#[cfg(feature = "breaker")]
fn breaker<const HZ: u64>(u: &mut Unstructured) -> Result<relent_core::BreakerConfig<HZ>> {
    use relent_core::BreakerConfig;
    Ok(match u.int_in_range(0..=2u8)? {
        #[cfg(feature = "breaker-failure-ratio")]
        0 => BreakerConfig::failure_ratio(u.int_in_range(0..=110)?, count(u)?, duration(u)?),
        #[cfg(feature = "breaker-count-window")]
        1 => BreakerConfig::count_window(count(u)?, u.int_in_range(0..=110)?, count(u)?, duration(u)?),
        _ => BreakerConfig::consecutive_failures(count(u)?, duration(u)?),
    })
}

fn context<const HZ: u64>(u: &mut Unstructured) -> Result<Context<HZ>> {
    let safety = match u.int_in_range(0..=2u8)? {
        0 => ReplaySafety::Unsafe,
        1 => ReplaySafety::replayable_read(duration(u)?),
        _ => ReplaySafety::provider_idempotent_mutation(duration(u)?),
    };
    let deadline = duration(u)?;
    let mut context = Context::new(deadline, safety);
    context = maybe(u, context, |c, u| Ok(c.airtime(duration(u)?)))?;
    // Ids from a small range collide at times, as ids a caller sets by hand may.
    let id = if u.arbitrary()? { u.int_in_range(0..=3)? } else { u.arbitrary()? };
    // Safe until an attempt arrives, instead of a keyed mutation, for an odd id: no input byte of
    // its own, so the kept seeds decode as before.
    #[cfg(feature = "until-arrived")]
    if let (ReplaySafety::ProviderIdempotentMutation { .. }, 1) = (safety, id % 2) {
        context = Context::new(deadline, ReplaySafety::UntilArrived).airtime(context.attempt_airtime());
    }
    // Sheddable when its id is odd: no input byte of its own, so the kept seeds decode as before.
    #[cfg(feature = "criticality")]
    if id % 2 == 1 {
        context = context.criticality(relent_core::Criticality::Sheddable);
    }
    Ok(context.id(id))
}

/// Whether `safety` is `UntilArrived` (never, without the statement compiled in).
fn until_arrived<const HZ: u64>(safety: ReplaySafety<HZ>) -> bool {
    #[cfg(feature = "until-arrived")]
    return matches!(safety, ReplaySafety::UntilArrived);
    #[cfg(not(feature = "until-arrived"))]
    return {
        let _ = safety;
        false
    };
}

/// Whether `problem` is `may_have_arrived` (never, without the statement compiled in).
fn may_have_arrived(problem: Option<relent_core::Problem>) -> bool {
    #[cfg(feature = "until-arrived")]
    return problem == Some(relent_core::Problem::MayHaveArrived);
    #[cfg(not(feature = "until-arrived"))]
    return {
        let _ = problem;
        false
    };
}

/// A verdict on a failure reported at `now`: plain retryable ones never arrived when `now` is an
/// odd tick (no input byte of its own, so the kept seeds decode as before).
fn verdict<const HZ: u64>(u: &mut Unstructured, now: Instant<HZ>) -> Result<Verdict<HZ>> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 if now.as_ticks() % 2 == 1 => Verdict::NeverArrived,
        0 => Verdict::Retryable,
        1 => Verdict::RetryableAfter(duration(u)?),
        2 => Verdict::retryable_after_secs(u.arbitrary()?),
        _ => Verdict::NotRetryable,
    })
}

/// The jitter's random words, chosen by the script: the ends of the range are where a draw is
/// most likely to go wrong.
struct Words {
    words: [u64; 4],
    next: usize,
}

impl Words {
    fn new(u: &mut Unstructured) -> Result<Self> {
        let mut words = [0; 4];
        for w in &mut words {
            *w = match u.int_in_range(0..=2u8)? {
                0 => 0,
                1 => u64::MAX,
                _ => u.arbitrary()?,
            };
        }
        Ok(Self { words, next: 0 })
    }
}

impl RngCore for Words {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    fn next_u64(&mut self) -> u64 {
        let word = self.words[self.next % self.words.len()];
        self.next = self.next.wrapping_add(1);
        word
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        rand_core::impls::fill_bytes_via_next(self, dst);
    }
}

/// One operation of the script, and what the script knows of it.
struct Slot<'p, const HZ: u64> {
    op: Operation<'p, HZ, Verdict<HZ>>,
    /// The attempt dispatched and not reported yet.
    out: Option<Attempt<HZ>>,
    /// The last attempt reported, or dropped at the deadline: reporting it again must change nothing.
    stale: Option<Attempt<HZ>>,
    /// The latest `now` this operation was given, which is the time it acts at.
    seen: Instant<HZ>,
    /// Whether its completion was taken.
    taken: bool,
    /// The share of each limit, in percent, it may not use: the critical
    /// reserve for sheddable work, 0 otherwise.
    held_back: u8,
    /// What each attempt costs against a duty cycle.
    airtime: Duration<HZ>,
    /// Whether its last poll reserved airtime (and a rate unit) for the instant it waits until: its
    /// share was checked then, and critical frames may have gone since.
    reserved: bool,
    /// Until when a retry may start: the replay-safety statement's end (seed 003), from the start
    /// for an operation with no statement, which may not be repeated at all.
    safe_until: Instant<HZ>,
    /// The earliest start of the next retry, after a failure that said how long to wait (a
    /// Retry-After is a lower bound, never clamped down: seeds 000 and 003).
    not_before: Option<Instant<HZ>>,
    /// For an operation stated safe until an attempt arrives: whether one may have (a failure
    /// reported with a verdict other than `NeverArrived`), after which it is never repeated.
    arrived: bool,
    /// Whether its statement is `UntilArrived`.
    until_arrived: bool,
}

impl<'p, const HZ: u64> Slot<'p, HZ> {
    /// An operation just started at `now`, with what the script knows of it from its context.
    fn started(
        op: Operation<'p, HZ, Verdict<HZ>>,
        now: Instant<HZ>,
        safe_until: Instant<HZ>,
        until_arrived: bool,
        held_back: u8,
        airtime: Duration<HZ>,
    ) -> Self {
        Self {
            op,
            out: None,
            stale: None,
            seen: now,
            taken: false,
            held_back,
            airtime,
            reserved: false,
            safe_until,
            not_before: None,
            arrived: false,
            until_arrived,
        }
    }
}

/// The script's world: the policy, the dependency, its operations and the clock.
struct World<'p, const HZ: u64> {
    policy: &'p RetryPolicy<HZ>,
    config: &'p DependencyConfig<HZ>,
    state: State<HZ>,
    slots: [Option<Slot<'p, HZ>>; SLOTS],
    now: Instant<HZ>,
    rng: Words,
    /// Slot counts can no longer be checked: an operation was dropped holding a slot, or a snapshot
    /// was restored while attempts were out (neither a caller keeping the contract does).
    uncounted: bool,
    /// The latest instant the script's clock has shown (it may go back), rebased as the state is.
    latest: Instant<HZ>,
    /// The latest instant it has shown, not rebased: an instant past it that saturated at the end
    /// of time stays there through a rebase (see `first_attempt_goes`).
    highest: Instant<HZ>,
    reached: &'p mut Reached,
}

fn run_at<const HZ: u64>(u: &mut Unstructured, reached: &mut Reached) -> Result<()> {
    let (Some(policy), config) = (policy::<HZ>(u)?, config::<HZ>(u)?) else {
        return Ok(());
    };
    let now = Instant::<HZ>::from_ticks(ticks(u)?);
    let Some(state) = accepted(State::<HZ>::new(&config, now)) else {
        return Ok(());
    };
    let rng = Words::new(u)?;
    reached.dependencies += 1;
    let mut world = World {
        policy: &policy,
        config: &config,
        state,
        slots: Default::default(),
        now,
        rng,
        uncounted: false,
        latest: now,
        highest: now,
        reached,
    };
    let mut steps = 0;
    while !u.is_empty() && steps < STEPS {
        steps += 1;
        world.step(u)?;
    }
    world.end();
    Ok(())
}

impl<'p, const HZ: u64> World<'p, HZ> {
    fn step(&mut self, u: &mut Unstructured) -> Result<()> {
        // Most steps act on the first operation, so that one operation often goes a long way.
        let k = *u.choose(&[0, 0, 0, 0, 0, 1, 2, 3])?;
        match u.int_in_range(0..=13u8)? {
            0 => self.start(u, k)?,
            1 => {
                self.poll(k);
            }
            2 => self.drive(u, k)?,
            3 => self.report(k, None),
            4 => {
                let failure = verdict(u, self.now)?;
                self.report(k, Some(failure));
            }
            5 => self.report_again(u, k)?,
            6 => self.abandon(k),
            7 => self.take(k),
            8 => self.now = after(self.now, Duration::<HZ>::from_ticks(ticks(u)?)),
            // A caller whose clock went backwards: the core reads it as the latest `now` it saw.
            9 => self.now = Instant::<HZ>::from_ticks(self.now.as_ticks().saturating_sub(ticks(u)?)),
            10 => self.inspect(),
            11 => self.rebase(duration(u)?),
            12 => self.operator(u)?,
            _ => self.snapshot(u)?,
        }
        self.latest = self.latest.max(self.now);
        self.highest = self.highest.max(self.now);
        Ok(())
    }

    fn start(&mut self, u: &mut Unstructured, k: usize) -> Result<()> {
        let context = context::<HZ>(u)?;
        if self.slots[k].as_ref().is_some_and(|s| !s.op.is_done()) {
            if u.arbitrary()? {
                self.abandon(k);
            } else {
                // Dropped while running, without `abandon`: what it holds is never given back.
                self.uncounted = true;
            }
        }
        // A hedge of another operation still running instead, for a context of id 2: no input
        // byte of its own, so the kept seeds decode as before.
        #[cfg(feature = "hedge")]
        if context.operation_id().0 == 2 && self.hedge(k) {
            return Ok(());
        }
        let now = self.now;
        let safe_until = match (context.safety().valid_for(), context.safety()) {
            (Some(d), _) => after(now, d),
            // Repeats are safe by the failure, not by time: `arrived` stops them.
            #[cfg(feature = "until-arrived")]
            (None, ReplaySafety::UntilArrived) => Instant::<HZ>::from_ticks(Ticks::MAX),
            (None, _) => Instant::<HZ>::from_ticks(0),
        };
        let (held_back, airtime) = (held_back(self.config, &context), context.attempt_airtime());
        self.slots[k] = accepted(Operation::start(self.policy, self.config, context, now)).map(|op| {
            Slot::started(op, now, safe_until, until_arrived(context.safety()), held_back, airtime)
        });
        if let Some(slot) = &self.slots[k] {
            assert!(!slot.op.is_done() && slot.op.dispatched() == 0 && slot.op.attempt().is_none());
        }
        Ok(())
    }

    /// Starts in slot `k` a hedge of the first other operation still running that may be hedged,
    /// from the plan it gives now, and says whether there was one. The hedge inherits what the
    /// script knows of its operation: its replay statement's end, its share held back, its
    /// airtime. The caller of a hedge abandons the loser when one wins; a script need not.
    #[cfg(feature = "hedge")]
    fn hedge(&mut self, k: usize) -> bool {
        let now = self.now;
        let found = self.slots.iter().enumerate().filter(|&(j, _)| j != k).find_map(|(_, s)| {
            let s = s.as_ref().filter(|s| !s.op.is_done())?;
            let plan = s.op.hedge_plan().ok()?;
            assert_eq!(plan.deadline(), s.op.deadline(), "a hedge's deadline is its operation's");
            Some((plan, s.safe_until, s.held_back, s.airtime))
        });
        let Some((plan, safe_until, held_back, airtime)) = found else { return false };
        let op = Operation::start_hedge(self.policy, self.config, plan, now);
        assert!(op.is_hedge() && !op.is_done() && op.attempt().is_none());
        assert_eq!((op.dispatched(), op.deadline()), (0, plan.deadline()));
        // A hedge's statement is a read's.
        self.slots[k] = Some(Slot::started(op, now, safe_until, false, held_back, airtime));
        self.reached.hedges += 1;
        true
    }

    /// Gives operation `k` the current time, as every call with `now` does.
    fn at(&mut self, k: usize) -> Instant<HZ> {
        let now = self.now;
        if let Some(slot) = &mut self.slots[k] {
            slot.seen = slot.seen.max(now);
        }
        now
    }

    /// Polls operation `k`, returning the end of the wait it was told, if it was told to wait.
    fn poll(&mut self, k: usize) -> Option<Instant<HZ>> {
        let now = self.at(k);
        let (policy, config, uncounted) = (self.policy, self.config, self.uncounted);
        let max_in_flight = config.bulkhead_slots();
        let Some(slot) = &mut self.slots[k] else { return None };
        let was_done = slot.op.is_done();
        let isolated = isolated(&self.state, now);
        let was_queued = slot.op.waits_for_slot();
        let (waiting, slot_free) = (self.state.bulkhead_waiting(), self.state.slot_for_waiting(config));
        let mut events = Events::default();
        let limit = self.state.bulkhead_limit(config);
        // The airtime log before the call, for a sheddable frame's reservation: recording it may
        // merge two entries of a full log, holding airtime longer than it was when the core
        // checked the frame's share.
        let before = (config.duty().is_some() && slot.held_back > 0).then(|| self.state.clone());
        let action = slot.op.poll(now, &mut self.state, &mut events);
        events.within_bound();
        events.said_limit(limit, self.state.bulkhead_limit(config));
        if !uncounted {
            let places = config.bulkhead_queue_places().unwrap_or(0);
            assert!(
                self.state.bulkhead_waiting() <= places,
                "more operations waiting than the queue has places"
            );
            if was_queued && slot_free {
                assert!(!slot.op.waits_for_slot(), "a waiting operation polled with a slot free waits on");
            }
            if !was_queued && waiting > 0 {
                assert!(
                    !matches!(action, Action::Dispatch(_)),
                    "an attempt that did not wait took a slot while {waiting} operations waited for one"
                );
            }
        }
        if slot.op.waits_for_slot() {
            assert!(matches!(action, Action::Wait { .. }), "{action:?} from an operation waiting for a slot");
            assert_eq!(slot.held_back, 0, "sheddable work waits in the bulkhead's queue");
            self.reached.queued += 1;
        }
        if was_queued && matches!(action, Action::Dispatch(_)) {
            self.reached.dispatched_from_queue += 1;
        }
        match action {
            Action::Dispatch(attempt) => {
                assert!(!was_done, "an ended operation dispatched {attempt:?}");
                assert!(!isolated, "{attempt:?} dispatched through an isolated circuit");
                assert!(slot.out.is_none(), "a second attempt dispatched while {:?} was out", slot.out);
                // A hedge's one attempt is numbered 2, after its operation's first.
                assert_eq!(attempt.number(), slot.op.dispatched() + u8::from(is_hedge(&slot.op)));
                assert!(attempt.number() >= 1 && attempt.number() <= policy.max_attempts().max(1));
                assert_eq!(attempt.started(), slot.seen, "an attempt dispatched at another time than now");
                assert_eq!(attempt.deadline(), slot.op.deadline());
                assert!(
                    attempt.started() < attempt.deadline(),
                    "an attempt dispatched at or after the deadline"
                );
                assert!(attempt.expires() <= attempt.deadline(), "an attempt that may run past the deadline");
                if let Some(ceiling) = policy.attempt_timeout() {
                    assert!(attempt.timeout() <= ceiling, "an attempt timeout above the policy's ceiling");
                }
                assert_eq!(slot.op.attempt().as_ref(), Some(&attempt));
                if let (Some(max), false) = (max_in_flight, uncounted) {
                    assert!(
                        self.state.in_flight() <= max,
                        "more attempts in flight than the bulkhead allows"
                    );
                }
                // Dispatched only below the limit as it stood (an adaptive one's, learnt from how
                // attempts ended, none of which this dispatch changed).
                if let (Some(limit), false) = (self.state.bulkhead_limit(config), uncounted) {
                    assert!(
                        self.state.in_flight() <= limit,
                        "an attempt dispatched beyond the bulkhead's limit"
                    );
                    // Sheddable work within its share of the limit, every attempt in flight counted.
                    assert!(
                        u32::from(self.state.in_flight()) <= share(limit, slot.held_back),
                        "sheddable work dispatched into the critical reserve"
                    );
                }
                // A sheddable frame on air within its share of the airtime (its own at least), when
                // it goes without having reserved its airtime (checked at the reservation if so).
                if let (Some(duty), false, true, false) =
                    (config.duty(), uncounted, slot.held_back > 0, slot.reserved)
                {
                    assert!(
                        wide(self.state.airtime_used(config, slot.seen).as_ticks())
                            <= airtime_share(
                                wide(duty.airtime().as_ticks()),
                                slot.held_back,
                                wide(slot.airtime.as_ticks())
                            ),
                        "a sheddable frame sent into the duty cycle's critical reserve: {:?} on air of {:?}",
                        self.state.airtime_used(config, slot.seen),
                        duty.airtime()
                    );
                }
                if attempt.is_retry() {
                    assert!(
                        attempt.started() < slot.safe_until,
                        "a retry after the replay statement expired"
                    );
                    assert!(
                        !slot.arrived,
                        "a retry of an operation safe until arrival, after an attempt that may have arrived"
                    );
                    self.reached.until_arrived_retries += u32::from(slot.until_arrived);
                    if let Some(t) = slot.not_before.take() {
                        assert!(
                            attempt.started() >= t,
                            "a retry at {:?}, before Retry-After's {t:?}",
                            attempt.started()
                        );
                    }
                }
                self.reached.dispatched += 1;
                self.reached.retries += u32::from(attempt.is_retry());
                #[cfg(feature = "backoff-multiplier")]
                if let relent_core::Backoff::Multiplied { .. } = self.policy.backoff() {
                    self.reached.multiplied_retries += u32::from(attempt.is_retry());
                }
                #[cfg(feature = "hedge")]
                if slot.op.is_hedge() {
                    assert_eq!(attempt.number(), 2, "a hedge sends one attempt, numbered 2");
                    assert!(attempt.is_retry(), "a hedge is paid for as a retry");
                    self.reached.hedges_dispatched += 1;
                }
                slot.out = Some(attempt);
                slot.reserved = false;
                None
            }
            Action::Wait { until } => {
                assert!(!slot.op.is_done());
                assert!(until > slot.seen, "a wait until {until:?}, not after now ({:?})", slot.seen);
                self.reached.waits += 1;
                // Airtime reserved for a sheddable frame at `until`: within its share then, by the
                // log the core read.
                if let (Some(duty), false, true, Some(before)) =
                    (config.duty(), uncounted, events.reserved, &before)
                {
                    assert!(
                        wide(before.airtime_used(config, until).as_ticks())
                            .saturating_add(wide(slot.airtime.as_ticks()))
                            <= airtime_share(
                                wide(duty.airtime().as_ticks()),
                                slot.held_back,
                                wide(slot.airtime.as_ticks())
                            ),
                        "airtime reserved for a sheddable frame in the duty cycle's critical reserve"
                    );
                }
                slot.reserved |= events.reserved;
                Some(until)
            }
            Action::Done => {
                assert!(slot.op.is_done());
                // An attempt still out when the deadline ended the operation: given up.
                if let Some(given_up) = slot.out.take() {
                    slot.stale = Some(given_up);
                }
                None
            }
        }
    }

    /// Runs operation `k` for a few calls as an adapter does: each attempt reported after a
    /// moment, a failure with the script's verdict or a success, each wait slept out to its end,
    /// the completion taken at the end. The steps one at a time rarely line up like this, so
    /// without it scripts seldom retry more than once, or spend a policy's attempts.
    fn drive(&mut self, u: &mut Unstructured, k: usize) -> Result<()> {
        for _ in 0..DRIVE_CALLS {
            let Some(slot) = &self.slots[k] else { return Ok(()) };
            if slot.op.is_done() {
                self.take(k);
                return Ok(());
            }
            if slot.out.is_some() {
                self.now = after(self.now, Duration::<HZ>::from_ticks(u.int_in_range(0..=64)?));
                let failure = if u.ratio(1u8, 4)? { None } else { Some(verdict(u, self.now)?) };
                self.report(k, failure);
            } else if let Some(until) = self.poll(k) {
                self.now = until;
            }
        }
        Ok(())
    }

    /// Reports the attempt out of operation `k`: a success, or a failure with its verdict.
    fn report(&mut self, k: usize, failure: Option<Verdict<HZ>>) {
        if self.slots[k].as_ref().is_none_or(|s| s.out.is_none()) {
            return;
        }
        let now = self.at(k);
        let Some(slot) = &mut self.slots[k] else { return };
        let Some(attempt) = slot.out.take() else { return };
        // `Attempt` is not `Clone`: the operation gives out a second value of the one it has out.
        let again = slot.op.attempt();
        let mut events = Events::default();
        let limit = self.state.bulkhead_limit(self.config);
        match failure {
            None => slot.op.on_success(attempt, now, &mut self.state, &mut events),
            Some(f) => slot.op.on_failure(attempt, now, &mut self.state, &mut self.rng, f, &mut events),
        }
        events.within_bound();
        events.said_limit(limit, self.state.bulkhead_limit(self.config));
        slot.not_before = failure.and_then(|f| f.retry_after()).map(|d| after(slot.seen, d));
        if slot.until_arrived && failure.is_some_and(|f| !f.never_arrived()) {
            slot.arrived = true;
        }
        assert!(slot.op.attempt().is_none(), "the attempt is still out after its report");
        if failure.is_none() {
            assert!(slot.op.is_done(), "a success did not end the operation");
        }
        slot.stale = again;
    }

    /// Reports to operation `k` an attempt it does not have out: its own, already reported, or the
    /// one another operation has out. Either must change nothing.
    fn report_again(&mut self, u: &mut Unstructured, k: usize) -> Result<()> {
        let from = u.int_in_range(0..=SLOTS - 1)?;
        let theirs = match &mut self.slots[from] {
            Some(s) if from == k => s.stale.take().map(|a| (a, s.op.id())),
            Some(s) => s.op.attempt().or_else(|| s.stale.take()).map(|a| (a, s.op.id())),
            None => None,
        };
        let failure = if u.arbitrary()? { Some(verdict(u, self.now)?) } else { None };
        let now = self.now;
        let Some(slot) = &mut self.slots[k] else { return Ok(()) };
        let Some((attempt, owner)) = theirs else { return Ok(()) };
        // Ids are the caller's: an attempt of another operation with the same id and number cannot
        // be told apart from the one this operation has out.
        if owner == slot.op.id() && slot.op.attempt().is_some_and(|a| a.number() == attempt.number()) {
            return Ok(());
        }
        let before = (slot.op.is_done(), slot.op.dispatched(), slot.op.attempt(), self.state.in_flight());
        let counts = self.state.counts(now);
        let mut events = Events::default();
        match failure {
            None => slot.op.on_success(attempt, now, &mut self.state, &mut events),
            Some(f) => slot.op.on_failure(attempt, now, &mut self.state, &mut self.rng, f, &mut events),
        }
        assert_eq!(events.count, 0, "a report of an attempt not out made an event");
        let after = (slot.op.is_done(), slot.op.dispatched(), slot.op.attempt(), self.state.in_flight());
        assert_eq!(before, after, "a report of an attempt not out changed the operation");
        assert_eq!(counts, self.state.counts(now), "a report of an attempt not out was counted");
        self.reached.ignored_reports += 1;
        Ok(())
    }

    fn abandon(&mut self, k: usize) {
        let now = self.at(k);
        let Some(slot) = &mut self.slots[k] else { return };
        let mut events = Events::default();
        let limit = self.state.bulkhead_limit(self.config);
        slot.op.abandon(now, &mut self.state, &mut events);
        events.within_bound();
        events.said_limit(limit, self.state.bulkhead_limit(self.config));
        assert!(slot.op.is_done() && slot.op.attempt().is_none());
        if let Some(given_up) = slot.out.take() {
            slot.stale = Some(given_up);
        }
    }

    fn take(&mut self, k: usize) {
        let (policy, now) = (self.policy, self.now);
        let Some(slot) = &mut self.slots[k] else { return };
        let completion = slot.op.take_completion();
        if !slot.op.is_done() || slot.taken {
            assert!(completion.is_none(), "a completion before the end, or a second one");
            return;
        }
        slot.taken = true;
        self.reached.completions += 1;
        let c = completion.expect("an ended operation has its completion");
        assert_eq!(c.operation, slot.op.id());
        assert_eq!(c.summary.dispatched, slot.op.dispatched());
        if is_hedge(&slot.op) {
            // Its one attempt, if sent, counted as a retry.
            assert!(c.summary.dispatched <= 1);
            assert_eq!(c.summary.retries, c.summary.dispatched);
        } else {
            assert_eq!(c.summary.retries, c.summary.dispatched.saturating_sub(1));
        }
        assert!(c.summary.dispatched <= policy.max_attempts().max(1));
        match c.disposition {
            Disposition::Succeeded => assert!(c.problem.is_none() && c.summary.dispatched >= 1),
            _ => assert!(c.problem.is_some() || c.last_failure.is_some_and(|f| !f.is_retryable())),
        }
        assert_eq!(c.code(), c.problem.map_or("", |p| p.as_str()));
        if c.code() == "circuit_isolated" {
            // Someone's decision, not the breaker's: there is no end to wait for.
            assert_eq!((c.disposition, c.not_before), (Disposition::Rejected, None), "{c:?}");
            self.reached.isolated_refusals += 1;
        }
        if c.code() == "client_throttled" {
            // A share of the requests, not an instant: nothing says when to try again.
            assert_eq!((c.disposition, c.not_before), (Disposition::Rejected, None), "{c:?}");
            self.reached.throttled_refusals += 1;
        }
        if c.code() == "bulkhead_full"
            && self.state.bulkhead_limit(self.config) < self.config.bulkhead_slots()
        {
            self.reached.adaptive_refusals += 1;
        }
        if c.code() == "bulkhead_full"
            && slot.held_back > 0
            && self.state.bulkhead_limit(self.config).is_some_and(|limit| self.state.in_flight() < limit)
        {
            self.reached.shed_refusals += 1;
        }
        // How an operation that ran this one inside an attempt judges its end, with the wait the
        // adapters give it (seed 000: exactly one layer retries). It retries only an operation
        // whose policy allowed it a single attempt, or that ended its first attempt because that
        // attempt may have arrived, by that attempt's own verdict; it waits out a deferral or
        // refusal whose wait is known, exactly that wait; anything else is final.
        let retry_in =
            c.not_before.map(|at| Duration::<HZ>::from_ticks(at.as_ticks().saturating_sub(now.as_ticks())));
        let outer = c.outer_verdict(retry_in);
        match c.disposition {
            Disposition::Deferred | Disposition::Rejected => {
                assert_eq!(outer, retry_in.map_or(Verdict::NotRetryable, Verdict::RetryableAfter));
            }
            Disposition::Failed if outer.is_retryable() => {
                assert_eq!(c.summary.dispatched, 1, "{outer:?} for {c:?}");
                assert!(policy.max_attempts() == 1 || may_have_arrived(c.problem), "{outer:?} for {c:?}");
                assert_eq!(Some(outer), c.last_failure);
            }
            _ => assert_eq!(outer, Verdict::NotRetryable, "{c:?}"),
        }
        assert!(slot.op.take_completion().is_none(), "a second completion");
        self.reached.successes += u32::from(c.is_success());
        self.reached.spent +=
            u32::from(c.problem == Some(relent_core::Problem::AttemptsExhausted) && c.summary.dispatched > 1);
    }

    /// An operator's control of the circuit: isolate it, or close it from any state. Only a
    /// dependency with a breaker has a circuit; each call says whether it changed the state.
    fn operator(&mut self, u: &mut Unstructured) -> Result<()> {
        let (config, now) = (self.config, self.now);
        let was = self.state.circuit(now);
        let isolate = cfg!(feature = "breaker-isolate") && u.arbitrary()?;
        let (made, changed) = if isolate {
            #[cfg(feature = "breaker-isolate")]
            {
                (relent_core::CircuitState::Isolated, self.state.isolate_circuit(config))
            }
            #[cfg(not(feature = "breaker-isolate"))]
            unreachable!()
        } else {
            (relent_core::CircuitState::Closed, self.state.close_circuit(config))
        };
        match changed {
            Ok(changed) => {
                assert!(config.circuit_breaker().is_some(), "a circuit without a breaker");
                assert_eq!(self.state.circuit(now), made);
                assert_eq!(self.state.circuit_open_until(now), None);
                assert_eq!(changed, (was != made).then_some(made), "{was:?} to {made:?}");
                self.reached.operator_changes += u32::from(changed.is_some());
                if !isolate {
                    assert_eq!(self.state.counts(now).failures, 0, "closed with its failures still counted");
                }
            }
            Err(e) => {
                assert_eq!(e, ConfigError::NoBreaker);
                assert!(config.circuit_breaker().is_none(), "a breaker whose circuit could not be reached");
            }
        }
        Ok(())
    }

    /// Every read of the dependency's state, at the current time.
    fn inspect(&mut self) {
        let (config, now) = (self.config, self.now);
        // Carried over to the configuration it runs under, a state does not change
        // (`Dependency::reconfigure`), whatever the script has done to it.
        let before = self.state.clone();
        assert_eq!(self.state.reconfigure(config, config, now), Ok(()));
        assert!(self.state == before, "carried over to its own configuration, the state changed");
        let _ = self.state.counts(now);
        let _ = self.state.retries_available(config, now);
        let _ = self.state.circuit(now).as_str();
        let _ = self.state.circuit_open_until(now);
        if let (Some(max), false) = (config.bulkhead_slots(), self.uncounted) {
            assert!(self.state.in_flight() <= max);
        }
        // An adaptive limit stays between its floor and the bulkhead's size.
        if let Some(limit) = self.state.bulkhead_limit(config) {
            assert!(Some(limit) <= config.bulkhead_slots(), "a limit of {limit} above the bulkhead's size");
            #[cfg(feature = "bulkhead-adaptive")]
            if let Some(adaptive) = config.adaptive() {
                assert!(limit >= adaptive.floor().max(1), "a limit of {limit} below its floor");
            }
        }
        if let Some(until) = self.state.cooldown_until(now) {
            assert!(until > now, "a cooldown said active at {now:?} that ended at {until:?}");
        }
        // A latency log's percentiles rise with the percent, and a higher one is known only when
        // the lower ones are.
        #[cfg(feature = "latency")]
        {
            let percentiles = [1, 50, 90, 95, 99].map(|p| self.state.latency_percentile(config, p));
            for pair in percentiles.windows(2) {
                match (pair[0], pair[1]) {
                    (Some(lower), Some(higher)) => assert!(lower <= higher, "{percentiles:?}"),
                    (None, Some(_)) => panic!("a percentile known above one that is not: {percentiles:?}"),
                    _ => {}
                }
            }
            if config.latency_log_samples().is_none() {
                assert_eq!(percentiles, [None; 5], "percentiles without a latency log");
            } else if percentiles[1].is_some() {
                self.reached.learnt_percentiles += 1;
            }
            for out_of_range in [0, 100] {
                assert_eq!(self.state.latency_percentile(config, out_of_range), None);
            }
            // A hedge's delay at a percentile is the log's, never below its floor; refused out of
            // range or without a log (written here from the docs).
            let floor = Duration::<HZ>::from_ticks(3);
            for (percent, learnt) in [(0, None), (50, percentiles[1]), (99, percentiles[4]), (100, None)] {
                let delay = relent_core::HedgeDelay::percentile(percent).at_least(floor);
                let expected = match (percent, config.latency_log_samples()) {
                    (0 | 100, _) => Err(relent_core::StartError::HedgePercentileOutOfRange { percent }),
                    (_, None) => Err(relent_core::StartError::HedgeWithoutLatencyLog),
                    _ => Ok(learnt.map(|d| d.max(floor))),
                };
                assert_eq!(self.state.hedge_delay(config, delay), expected, "at the {percent}th percentile");
                // The same with a delay until it is learnt: that delay where the log knows nothing.
                let fallback = Duration::<HZ>::from_ticks(7);
                let expected = expected.map(|chosen| chosen.or(Some(fallback.max(floor))));
                let delay = delay.until_learnt(fallback);
                assert_eq!(
                    self.state.hedge_delay(config, delay),
                    expected,
                    "until the {percent}th is learnt"
                );
            }
            // A fixed delay reads nothing, and is never below its floor either.
            for fixed in [0, 3, 50] {
                let delay = relent_core::HedgeDelay::after(Duration::<HZ>::from_ticks(fixed)).at_least(floor);
                assert_eq!(
                    self.state.hedge_delay(config, delay),
                    Ok(Some(Duration::<HZ>::from_ticks(fixed.max(3))))
                );
            }
        }
        assert!(self.state.next_rate_unit(config, now) >= now);
        for airtime in [Duration::<HZ>::from_ticks(1), slot_airtime(config)] {
            if let Some(t) = self.state.next_airtime(config, now, airtime) {
                assert!(t >= now, "airtime free at {t:?}, before now ({now:?})");
            }
        }
        let _ = self.state.airtime_used(config, now);
        // The throttle never refuses every request: the accepts that say the dependency recovered
        // must keep coming in.
        #[cfg(feature = "throttle")]
        if let Some(ppm) = self.state.throttle_ppm(config, now) {
            assert!(ppm < 1_000_000, "the throttle would refuse every request: {ppm} ppm");
        }
    }

    /// Moves everything's clock `by` ticks back, as after a reset of the tick counter.
    fn rebase(&mut self, by: Duration<HZ>) {
        // As the core rebases: the end of time stays where it is.
        let earlier = |t: Instant<HZ>| match t.as_ticks() {
            Ticks::MAX => t,
            t => Instant::<HZ>::from_ticks(t.saturating_sub(by.as_ticks())),
        };
        self.state.rebase(by);
        for slot in self.slots.iter_mut().flatten() {
            slot.op.rebase(by);
            slot.seen = earlier(slot.seen);
            slot.safe_until = earlier(slot.safe_until);
            slot.not_before = slot.not_before.map(earlier);
            // The attempt out, with its instants rebased (reports match by operation and number).
            slot.out = slot.op.attempt().filter(|_| slot.out.is_some());
        }
        self.now = earlier(self.now);
        self.latest = earlier(self.latest);
    }

    /// Saves the dependency's state (at times into a buffer too small, which must be refused),
    /// edits the bytes as the script says (resealing the CRC or not, cutting them short or not), and
    /// restores it, with `restore` or with `restore_or_new`.
    fn snapshot(&mut self, u: &mut Unstructured) -> Result<()> {
        let mut bytes = [0u8; SNAPSHOT_ROOM];
        let len = State::<HZ>::SNAPSHOT_LEN;
        assert!(len <= SNAPSHOT_ROOM);
        if u.ratio(1u8, 16)? {
            let room = u.int_in_range(0..=len - 1)?;
            let saved = self.state.save(self.now, &mut bytes[..room]);
            assert!(saved.is_err(), "a snapshot saved into {room} bytes, {len} needed");
            return Ok(());
        }
        let saved =
            self.state.save(self.now, &mut bytes).expect("a buffer of SNAPSHOT_LEN bytes holds a snapshot");
        assert_eq!(saved, len);
        let edits = u.int_in_range(0..=4u8)?;
        for _ in 0..edits {
            let at = u.int_in_range(0..=len - 1)?;
            bytes[at] = u.arbitrary()?;
        }
        if edits > 0 && u.arbitrary()? {
            let crc = crc32fast::hash(&bytes[..len - 4]);
            bytes[len - 4..len].copy_from_slice(&crc.to_le_bytes());
        }
        let cut = if u.ratio(1u8, 8)? { u.int_in_range(0..=len)? } else { len };
        let (now, slept) = (self.now, duration::<HZ>(u)?);
        let restored = if u.arbitrary()? {
            State::<HZ>::restore(self.config, &bytes[..cut], now, slept)
        } else {
            // The configuration was accepted, so a refused snapshot falls back to a fresh state.
            match State::<HZ>::restore_or_new(self.config, &bytes[..cut], now, slept) {
                Ok((state, None)) => Ok(state),
                Ok((fresh, Some(why))) => {
                    assert_eq!(fresh.in_flight(), 0);
                    Err(why)
                }
                Err(e) => panic!("restore_or_new refused a configuration new accepted: {e}"),
            }
        };
        if edits == 0 && cut == len {
            assert!(restored.is_ok(), "a snapshot as saved was refused: {restored:?}");
        }
        self.reached.restored += u32::from(restored.is_ok());
        self.reached.refused_snapshots += u32::from(restored.is_err());
        if let Some(state) = accepted(restored) {
            // What the operations hold (slots, places in the queue) is not in a snapshot.
            if self.slots.iter().flatten().any(|s| s.out.is_some() || s.op.waits_for_slot()) {
                self.uncounted = true;
            }
            self.state = state;
        }
        Ok(())
    }

    /// Ends every operation still running, takes every completion, and checks that nothing was
    /// kept: no bulkhead slot or place in its queue is held once every operation has ended.
    fn end(&mut self) {
        for k in 0..SLOTS {
            self.abandon(k);
            self.take(k);
        }
        if !self.uncounted {
            assert_eq!(self.state.in_flight(), 0, "bulkhead slots held after every operation ended");
            assert_eq!(
                self.state.bulkhead_waiting(),
                0,
                "places in the queue held after every operation ended"
            );
        }
        // Nothing is left stuck, but by an operator's isolation, which only the operator ends, or by
        // an operation dropped without `abandon` (a probe it held is never given back).
        let configs = core::slice::from_ref(self.config);
        if !self.uncounted
            && !isolated(&self.state, self.latest)
            && first_attempt_goes(
                &mut self.state,
                self.config,
                configs,
                self.policy,
                self.latest,
                self.highest,
            )
        {
            self.reached.alive = self.reached.alive.saturating_add(1);
        }
    }
}

/// Checks that nothing is stuck: a single attempt, critical, started under `config` once every
/// wait that any of `configs` names has passed since `latest` (a window, a break, a cooldown, a
/// rate debt, airtime), and `policy`'s longest delay (how far ahead an operation cancelled while it
/// waited may have reserved a rate unit and airtime that stay spent), goes at once. No state a
/// script left (a half-open circuit whose probe count changed, a debt carried across a change, a
/// snapshot whose bytes passed the checksum but that no configuration wrote) may refuse it for
/// ever. `latest` is the latest instant the dependency has seen; `highest` the latest before any
/// rebase. Returns whether the check ran: not where twice the span past either is past the clock's
/// end (a wait that saturated there ends at the end of time, which a rebase leaves where it is:
/// adapters rebase long before their clocks come near it), or where `config` cannot start such an
/// operation (its duty cycle's allowance is zero).
fn first_attempt_goes<const HZ: u64>(
    state: &mut State<HZ>,
    config: &DependencyConfig<HZ>,
    configs: &[DependencyConfig<HZ>],
    policy: &RetryPolicy<HZ>,
    latest: Instant<HZ>,
    highest: Instant<HZ>,
) -> bool {
    let waits = configs.iter().try_fold(1, |sum: Ticks, c| sum.checked_add(longest_wait(c)?));
    let Some(span) = waits.and_then(|w| w.checked_add(policy.max_delay().as_ticks())) else {
        return false;
    };
    let Some(later) = latest.as_ticks().checked_add(span) else {
        return false;
    };
    if later.checked_add(span).is_none()
        || highest.as_ticks().checked_add(span).and_then(|t| t.checked_add(span)).is_none()
    {
        return false;
    }
    let later = Instant::<HZ>::from_ticks(later);
    let Some(policy) = accepted(RetryPolicy::<HZ>::single_attempt().build()) else {
        return false;
    };
    let mut context = Context::new(Duration::<HZ>::from_ticks(span), ReplaySafety::Unsafe);
    if config.duty().is_some() {
        context = context.airtime(Duration::<HZ>::from_ticks(1));
    }
    let Some(mut op) = accepted(Operation::<HZ, Verdict<HZ>>::start(&policy, config, context, later)) else {
        return false;
    };
    match op.poll(later, state, &mut ()) {
        Action::Dispatch(attempt) => {
            op.on_success(attempt, later, state, &mut ());
            true
        }
        action => {
            panic!("{action:?} for a first attempt after every wait has passed: {:?}", op.take_completion())
        }
    }
}

/// The longest that anything `config` names can hold a first attempt back, added up: its window
/// (what a client throttle reads), a break, a cooldown, a rate limit's longest debt (its wait, its
/// burst and an interval), and a duty cycle's window and allowance. `None` past the clock's end.
fn longest_wait<const HZ: u64>(config: &DependencyConfig<HZ>) -> Option<Ticks> {
    let mut sum = config.window().as_ticks();
    if let Some(b) = config.circuit_breaker() {
        sum = sum.checked_add(b.break_for().as_ticks())?;
    }
    if let Some(max) = config.cooldown_max() {
        sum = sum.checked_add(max.as_ticks())?;
    }
    if let Some(limit) = config.rate() {
        let interval = limit.period().as_ticks().div_ceil(Ticks::from(limit.count().max(1)));
        let burst = Ticks::from(limit.burst_size()).checked_mul(interval)?;
        sum = sum.checked_add(limit.max_wait_time().as_ticks())?.checked_add(burst)?.checked_add(1)?;
    }
    if let Some(duty) = config.duty() {
        sum = sum.checked_add(duty.window().as_ticks())?.checked_add(duty.airtime().as_ticks())?;
    }
    Some(sum)
}

/// Whether an operator isolated the dependency's circuit (never, without `breaker-isolate`).
fn isolated<const HZ: u64>(state: &State<HZ>, now: Instant<HZ>) -> bool {
    isolated_state(state.circuit(now))
}

fn isolated_state(circuit: relent_core::CircuitState) -> bool {
    #[cfg(feature = "breaker-isolate")]
    return circuit == relent_core::CircuitState::Isolated;
    #[cfg(not(feature = "breaker-isolate"))]
    {
        let _ = circuit;
        false
    }
}

fn slot_airtime<const HZ: u64>(config: &DependencyConfig<HZ>) -> Duration<HZ> {
    config.duty().map_or(Duration::<HZ>::from_ticks(0), |d| d.airtime())
}
