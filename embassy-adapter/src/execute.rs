//! `execute`: one operation through a dependency's pipeline with embassy-time's timers.
//!
//! The house-style loop: lock, report what the last step did and ask the core what to do at `now`,
//! unlock, act (run the attempt under `with_deadline`, or `Timer::at` the instant the core names),
//! and again. One lock and one clock read per step, at one site. An attempt that runs past its
//! timeout is dropped and reported as [`AttemptError::TimedOut`]. If the future of `execute` is
//! dropped, a guard gives back the attempt's bulkhead slot and half-open probe, or the rate unit
//! and airtime reserved for the attempt it was waiting to send (`Operation::abandon`).
//!
//! Jitter draws from the caller's `rand_core::RngCore`: the hardware RNG, or a PRNG seeded from it
//! or from a unique device id. Never the same fixed seed on every device: a fleet that draws the
//! same "random" delays retries in step, the synchronised wave jitter exists to break (seed 000).

use core::future::Future;

use embassy_sync::blocking_mutex::raw::RawMutex;
use rand_core::RngCore;
use relent_core::{
    Action, Attempt, Classify, Completion, Context, Dependency, Observer, Operation, RetryPolicy, StartError,
};

use crate::epoch::Epoch;
use crate::log::{Both, Log};
use crate::shared::SharedDependency;
use crate::{AttemptError, Duration, HZ, Instant};

/// What an attempt is told, so it can set its own radio or modem timeouts: its number, its timeout,
/// the instant that timeout expires and the operation's deadline, on embassy-time's clock.
///
/// Methods, as on the core's [`Attempt`] and on relent-tokio's `AttemptInfo`, rather than fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AttemptInfo {
    number: u8,
    timeout: embassy_time::Duration,
    expires: embassy_time::Instant,
    deadline: embassy_time::Instant,
}

impl AttemptInfo {
    /// What `attempt`, dispatched in `epoch`, tells the caller's operation.
    fn of(attempt: Attempt<HZ>, epoch: Epoch) -> Self {
        Self {
            number: attempt.number(),
            timeout: crate::epoch::span(attempt.timeout()),
            expires: epoch.to_embassy(attempt.expires()),
            deadline: epoch.to_embassy(attempt.deadline()),
        }
    }

    /// 1 for the first attempt.
    pub fn number(&self) -> u8 {
        self.number
    }

    /// How long this attempt may run; it is dropped after that.
    pub fn timeout(&self) -> embassy_time::Duration {
        self.timeout
    }

    /// When its timeout expires.
    pub fn expires(&self) -> embassy_time::Instant {
        self.expires
    }

    /// The operation's overall deadline.
    pub fn deadline(&self) -> embassy_time::Instant {
        self.deadline
    }

    /// `context`, for an operation started inside this attempt: that operation ends by this
    /// attempt's expiry whatever deadline `context` gives it. Pass it to `execute` in the
    /// attempt's future, as the `context`:
    /// `modem.execute(&AT, attempt.bound(command), rng, |_| ..).await?.into_result()`.
    ///
    /// Why (seed 000, "Where the Retry Lives", and "Retries and the Deadline"): an inner operation
    /// still running when this attempt times out is dropped mid-retry, with no completion of its
    /// own, and the outer operation sees a timeout, which is retryable: three attempts of three,
    /// 9 calls to a far side that hangs. Bounded, it ends on its own, its last attempt cut to fit
    /// (with a deadline's problem code, such as `retry_delay_exceeds_deadline`, or its attempts
    /// spent), and its [`Error`](crate::Error) tells the outer operation not to retry it again.
    ///
    /// The cut is made on the clock read that starts the inner operation, to the tick, so its
    /// deadline is never after this attempt's expiry and needs no margin. Embassy's
    /// `with_deadline` polls the attempt before its timer, so at that instant the inner operation's
    /// timer fires and it ends before this attempt's timer drops it.
    pub fn bound(&self, context: Context<HZ>) -> Bounded {
        Bounded::until(context, self.expires)
    }
}

/// An operation's context, and the instant it must end by, if any: what `execute` takes. A
/// [`Context`] converts into one with no such instant; [`AttemptInfo::bound`] makes one that ends
/// by an attempt's expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Bounded {
    context: Context<HZ>,
    ends_by: Option<embassy_time::Instant>,
}

impl From<Context<HZ>> for Bounded {
    fn from(context: Context<HZ>) -> Self {
        Self { context, ends_by: None }
    }
}

impl Bounded {
    /// `context`, for an operation that must end by `instant` on embassy-time's clock whatever
    /// deadline `context` gives it: before the radio's receive window closes, or the device goes to
    /// sleep. Its deadline is cut to what is left until `instant` when it starts, to the tick; an
    /// operation started at or after `instant` ends at once, failed with `deadline_exceeded`,
    /// sending nothing. [`AttemptInfo::bound`] is this with the attempt's expiry.
    pub const fn until(context: Context<HZ>, instant: embassy_time::Instant) -> Self {
        Self { context, ends_by: Some(instant) }
    }

    /// The context of an operation started at `now`, read in `epoch`: its deadline cut to what is
    /// left until `ends_by`.
    #[inline]
    fn at(self, now: Instant, epoch: Epoch) -> Context<HZ> {
        match self.ends_by {
            None => self.context,
            Some(by) => {
                self.context.deadline_within(wait_ticks(by.saturating_duration_since(epoch.to_embassy(now))))
            }
        }
    }
}

/// An embassy duration as the core's; with 32-bit ticks, one too long to fit saturates (a wait
/// that long defers, a deadline that long is cut by the context's own).
#[allow(clippy::useless_conversion)] // A conversion only with 32-bit ticks.
pub(crate) fn wait_ticks(d: embassy_time::Duration) -> Duration {
    Duration::from_ticks(d.as_ticks().try_into().unwrap_or(relent_core::Ticks::MAX))
}

/// The value, if an attempt succeeded, and how the operation went.
#[non_exhaustive]
pub struct Done<T, E> {
    /// The value of the attempt that succeeded.
    pub value: Option<T>,
    /// Disposition, problem code, attempts, time waited and used, last failure.
    pub completion: Completion<HZ, AttemptError<E>>,
    /// The restart of the core's clock the completion's instants were read in (see
    /// [`Done::retry_at`]); nothing with 64-bit ticks.
    epoch: Epoch,
}

/// The value and the completion; the epoch is how `retry_at` reads the completion, not part of it.
impl<T: core::fmt::Debug, E: core::fmt::Debug> core::fmt::Debug for Done<T, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Done")
            .field("value", &self.value)
            .field("completion", &self.completion)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "defmt")]
impl<T: defmt::Format, E: defmt::Format> defmt::Format for Done<T, E> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Done {{ value: {}, completion: {}, .. }}", self.value, self.completion)
    }
}

impl<T, E> Done<T, E> {
    /// For a deferred or rejected operation, the earliest instant to try again on embassy-time's
    /// clock, where known: the completion's `not_before` (a Retry-After or a "busy, retry in N s"
    /// beyond the policy's patience, the cooldown it started, the duty cycle's next free airtime),
    /// ready for `embassy_time::Timer::at`.
    ///
    /// Right however long the `Done` is kept: with 32-bit ticks the core's clock restarts every
    /// 2^30 ticks (17.9 minutes at embassy-time's default 1 MHz), and `not_before` is on the clock
    /// as it was when the operation ended, so converting it later with
    /// [`to_embassy`](crate::to_embassy), after a restart, would be 2^30 ticks late. This converts
    /// it through the restart it was read in. (relent-tokio gives the same as a wait from the
    /// operation's end, `retry_in`, which a service passes on, in a Retry-After header for one;
    /// firmware waits for an instant, with `Timer::at`.)
    pub fn retry_at(&self) -> Option<embassy_time::Instant> {
        self.completion.not_before.map(|t| self.epoch.to_embassy(t))
    }
}

/// The operation being run: abandoned if the future running it is dropped before it ends.
struct Running<'a, 'c, M: RawMutex, const N: usize, const L: usize, const W: usize, E, B: Observer<HZ>> {
    op: Operation<'a, HZ, AttemptError<E>>,
    shared: &'a SharedDependency<'c, M, N, L, W>,
    observer: B,
    /// The restart of the core's clock the operation was last used in (32-bit ticks).
    epoch: Epoch,
}

impl<'a, M: RawMutex, const N: usize, const L: usize, const W: usize, E, B: Observer<HZ>>
    Running<'a, '_, M, N, L, W, E, B>
{
    /// Runs `f` on the operation and the dependency's state under the dependency's lock, with the
    /// `now` read under it, and returns the epoch of that `now` (to convert the instants `f`
    /// returns). With 32-bit ticks, an operation last used in an earlier epoch is rebased first.
    fn with<R>(
        &mut self,
        f: impl FnOnce(&mut Operation<'a, HZ, AttemptError<E>>, &mut Dependency<HZ, N, L>, Instant, &mut B) -> R,
    ) -> (R, Epoch) {
        let Running { op, shared, observer, epoch } = self;
        shared.lock_in(|_, state, now, current| {
            catch_up(op, epoch, current);
            (f(op, state, now, observer), current)
        })
    }
}

/// Waits until `until`; for an operation in the bulkhead's queue (`until` the end of its wait),
/// `queue` is the operation, and the wait ends sooner when a slot is free for it (see
/// [`SharedDependency::poll_slot`]); if its wait ends first, it leaves the queue
/// ([`SharedDependency::leave_queue`]). One future for both waits, and one reference: a second await
/// point in the loop cost the firmware 144 bytes of flash with `W` of 0, and a reference beside a
/// flag, or the dependency's beside the operation's, made the operation's future 8 bytes larger.
fn wait<'s, M: RawMutex, const N: usize, const L: usize, const W: usize, E, B: Observer<HZ>>(
    until: embassy_time::Instant,
    queue: Option<&'s Running<'_, '_, M, N, L, W, E, B>>,
) -> impl Future<Output = ()> + 's {
    let mut timer = embassy_time::Timer::at(until);
    core::future::poll_fn(move |cx| {
        // With no room for wakers (`W` of 0), compiled out.
        let queue = queue.filter(|_| W > 0);
        if core::pin::Pin::new(&mut timer).poll(cx).is_ready() {
            if let Some(running) = queue {
                running.shared.leave_queue();
            }
            return core::task::Poll::Ready(());
        }
        match queue {
            Some(running) => running.shared.poll_slot(&running.op, cx),
            None => core::task::Poll::Pending,
        }
    })
}

/// Rebases `op`, last used in epoch `mine`, to epoch `current` if that is later. The check is
/// inlined at the loop's lock (an epoch lasts 2^30 ticks, so nearly every step finds it unchanged);
/// the rebase is out of line with 32-bit ticks, and the drop's lock calls it alone.
#[inline]
fn catch_up<E>(op: &mut Operation<'_, HZ, AttemptError<E>>, mine: &mut Epoch, current: Epoch) {
    if current != *mine {
        rebase(op, mine, current);
    }
}

/// [`catch_up`]'s rebase, once the epochs differ.
#[cfg_attr(feature = "ticks-u32", inline(never))]
fn rebase<E>(op: &mut Operation<'_, HZ, AttemptError<E>>, mine: &mut Epoch, current: Epoch) {
    if let Some(by) = current.since(*mine) {
        op.rebase(by);
        *mine = current;
    }
}

impl<M: RawMutex, const N: usize, const L: usize, const W: usize, E, B: Observer<HZ>> Drop
    for Running<'_, '_, M, N, L, W, E, B>
{
    fn drop(&mut self) {
        if !self.op.is_done() {
            // Not `with`: a future dropped mid-operation is rare, and the rebase's call in full
            // here is smaller than the check inlined for the loop's steps.
            let Running { op, shared, observer, epoch } = self;
            let queued = W > 0 && op.waits_for_slot();
            shared.lock_in(|_, state, now, current| {
                rebase(op, epoch, current);
                op.abandon(now, state, observer);
            });
            if queued {
                shared.leave_queue();
            }
        }
    }
}

impl<'c, M: RawMutex, const N: usize, const L: usize, const W: usize> SharedDependency<'c, M, N, L, W> {
    /// Runs `operation` through this dependency under `policy`, logging every event with defmt
    /// when that feature is on. `operation` is called once per attempt.
    ///
    /// The operation starts when `execute` is called (its deadline runs from then, as
    /// `embassy_time::with_timeout`'s does); the policy and context are checked then too, and a
    /// refusal is the future's output. Nothing is sent until the future is polled.
    ///
    /// `context` is a [`Context`], or, for an operation started inside another's attempt,
    /// [`AttemptInfo::bound`]`(context)`, which ends it by that attempt's expiry; its
    /// [`Done::into_result`] then gives the outer attempt an [`Error`](crate::Error) to return,
    /// which the outer operation does not retry again if this one could retry.
    ///
    /// An uplink whose first attempt never hears back (dropped at its 2 s timeout) and whose second
    /// gets no acknowledgement, each followed by its backoff, and whose third goes through; on
    /// the test clock (feature `test-clock`, `test_clock::run`), so the times are exact:
    ///
    /// ```
    /// use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
    /// use embassy_time::Instant as Clock;
    /// use relent_embassy::core::{Classify, Context, Dependency, DependencyConfig, Disposition, Jitter, ReplaySafety, RetryBudget, RetryPolicy, Verdict};
    /// use relent_embassy::{AttemptError, Duration, HZ, SharedDependency};
    /// # use rand_core::SeedableRng;
    /// # use relent_embassy::test_clock::run as block_on; // the host's executor, on the test clock
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct NoAck;
    /// impl Classify<HZ> for NoAck {
    ///     fn classify(&self) -> Verdict<HZ> { Verdict::Retryable }
    /// }
    ///
    /// const POLICY: RetryPolicy<HZ> = match RetryPolicy::exponential(4, Duration::from_millis(500), Duration::from_secs(8))
    ///     .jitter(Jitter::None) // exact times for the example; firmware sharing a channel keeps the default, full jitter
    ///     .attempt_timeout(Duration::from_secs(2))
    ///     .build()
    /// {
    ///     Ok(p) => p,
    ///     Err(e) => panic!("{}", e.message()),
    /// };
    /// const UPLINK: DependencyConfig<HZ> = DependencyConfig::new(Duration::from_secs(60))
    ///     .budget(match RetryBudget::ratio(25, 4) { Ok(b) => b, Err(e) => panic!("{}", e.message()) });
    ///
    /// # fn main() {
    /// let link: SharedDependency<'_, CriticalSectionRawMutex, 4> =
    ///     SharedDependency::new(&UPLINK, Dependency::new(&UPLINK, relent_embassy::now()).unwrap());
    /// let mut rng = rand_xoshiro::Xoroshiro64Star::seed_from_u64(7); // or the chip's RNG
    /// let frame = Context::new(Duration::from_secs(20), ReplaySafety::provider_idempotent_mutation(Duration::from_secs(3_600)));
    ///
    /// let t0 = Clock::now();
    /// let mut sent_at_ms = Vec::new();
    /// let done = block_on(link.execute(&POLICY, frame, &mut rng, |attempt| {
    ///     sent_at_ms.push(t0.elapsed().as_millis());
    ///     async move {
    ///         assert_eq!(attempt.timeout(), embassy_time::Duration::from_secs(2)); // for the radio's own timeout
    ///         match attempt.number() {
    ///             1 => core::future::pending().await, // no answer at all
    ///             2 => Err(NoAck),
    ///             _ => Ok(17u8), // the network server's acknowledgement
    ///         }
    ///     }
    /// }))
    /// .expect("a valid policy and context");
    ///
    /// // Sent at 0; timed out at 2 s, then 500 ms of backoff; no ack at once, then 1 s of backoff.
    /// assert_eq!(sent_at_ms, [0, 2_500, 3_500]);
    /// assert_eq!(done.value, Some(17));
    /// assert_eq!(done.completion.disposition, Disposition::Succeeded);
    /// assert_eq!(done.completion.summary.dispatched, 3);
    /// assert_eq!(done.completion.summary.waited, Duration::from_millis(1_500));
    /// assert_eq!(done.completion.last_failure, Some(AttemptError::Failed(NoAck)));
    /// # }
    /// ```
    pub fn execute<'a, T, E, F, Fut, R>(
        &'a self,
        policy: &'a RetryPolicy<HZ>,
        context: impl Into<Bounded>,
        rng: &'a mut R,
        operation: F,
    ) -> impl Future<Output = Result<Done<T, E>, StartError>>
    where
        F: FnMut(AttemptInfo) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify<HZ>,
        R: RngCore + ?Sized,
    {
        run(self.begin(policy, context.into(), Log), rng, operation)
    }

    /// As [`SharedDependency::execute`], also handing every event to `observer`. The observer runs
    /// under the dependency's lock, as each decision is made: keep it short (on firmware the lock
    /// is usually a critical section), and do not call back into this dependency from it. Its
    /// state is borrowed then, and a nested `lock` panics on the borrow. Where panics unwind (a host
    /// test), the operation dropped by the unwinding reports its end to the same observer, which
    /// panics again and aborts the process. To act on an event (light an LED, count refusals),
    /// record it and act after `execute_with` returns.
    pub fn execute_with<'a, T, E, F, Fut, R, O>(
        &'a self,
        policy: &'a RetryPolicy<HZ>,
        context: impl Into<Bounded>,
        rng: &'a mut R,
        observer: &'a mut O,
        operation: F,
    ) -> impl Future<Output = Result<Done<T, E>, StartError>>
    where
        F: FnMut(AttemptInfo) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify<HZ>,
        R: RngCore + ?Sized,
        O: Observer<HZ> + ?Sized,
    {
        run(self.begin(policy, context.into(), Both(observer)), rng, operation)
    }

    /// Starts the operation now: what the future of `run` holds from its first poll to its end.
    fn begin<'a, E, B: Observer<HZ>>(
        &'a self,
        policy: &'a RetryPolicy<HZ>,
        context: Bounded,
        observer: B,
    ) -> Result<Running<'a, 'c, M, N, L, W, E, B>, StartError> {
        let (now, epoch) = Epoch::now();
        let op = Operation::start(policy, self.config(), context.at(now, epoch), now)?;
        Ok(Running { op, shared: self, observer, epoch })
    }
}

/// The loop. An `async` block rather than an `async fn`: an `async fn` moves each argument into a
/// local of its own, so its future would hold the started operation twice. This one holds it once,
/// in place, beside the attempt's own future (a test checks it); the attempt in flight is given
/// back by the operation when it is reported, so it is not held either.
#[allow(clippy::manual_async_fn)]
fn run<M: RawMutex, const N: usize, const L: usize, const W: usize, T, E, F, Fut, R, B>(
    mut started: Result<Running<'_, '_, M, N, L, W, E, B>, StartError>,
    rng: &mut R,
    mut operation: F,
) -> impl Future<Output = Result<Done<T, E>, StartError>>
where
    F: FnMut(AttemptInfo) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Classify<HZ>,
    R: RngCore + ?Sized,
    B: Observer<HZ>,
{
    async move {
        let running = match &mut started {
            Ok(running) => running,
            Err(e) => return Err(*e),
        };
        let mut value = None;
        // What the last step left to report: nothing at first and after a wait.
        let mut ran = None;
        loop {
            // One lock and one clock read per step: a report and the next poll share them, and the
            // loop has one lock site (on a Cortex-M each site inlines the lock and the clock).
            let (action, epoch) = running.with(|op, state, now, observer| {
                if let (Some(result), Some(attempt)) = (ran, op.attempt()) {
                    match result {
                        Ok(Ok(v)) => {
                            value = Some(v);
                            op.on_success(attempt, now, state, observer);
                        }
                        Ok(Err(e)) => {
                            op.on_failure(attempt, now, state, rng, AttemptError::Failed(e), observer)
                        }
                        Err(embassy_time::TimeoutError) => {
                            let after = attempt.timeout();
                            let failure = AttemptError::TimedOut { after };
                            op.on_failure(attempt, now, state, rng, failure, observer)
                        }
                    }
                }
                op.poll(now, state, observer)
            });
            ran = match action {
                Action::Dispatch(attempt) => {
                    // The attempt itself is not held while it runs: the operation gives it back.
                    let info = AttemptInfo::of(attempt, epoch);
                    // A field read, not a borrow of `info` (through its method), which the future
                    // would then hold across the await.
                    let expires = info.expires;
                    Some(embassy_time::with_deadline(expires, operation(info)).await)
                }
                // Holding nothing: the lock was released above.
                Action::Wait { until } => {
                    // In the bulkhead's queue, the wait also ends when a slot frees (see
                    // `wait`).
                    let queue = (W > 0 && running.op.waits_for_slot()).then_some(&*running);
                    #[cfg(feature = "defmt")]
                    if W == 0 && running.op.waits_for_slot() {
                        crate::shared::warn_no_room_for_waker(W);
                    }
                    wait(epoch.to_embassy(until), queue).await;
                    None
                }
                Action::Done => break,
            };
        }
        match running.op.take_completion() {
            // The operation's epoch is the last step's (`with` moved it on): the completion's.
            Some(completion) => Ok(Done { value, completion, epoch: running.epoch }),
            // The core's contract: once poll has said Done, the completion is there. No message:
            // on a Cortex-M its formatting cost 36 bytes of flash for a line that cannot print.
            None => unreachable!(),
        }
    }
}
