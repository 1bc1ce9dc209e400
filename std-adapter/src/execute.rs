//! `execute`: one operation through a dependency's pipeline, on tokio's clock.
//!
//! The loop is the house style's and nothing more: take the dependency's lock, ask the core what to
//! do at `now`, release the lock, act (run the attempt under its timeout, or sleep until an
//! instant, both on the operation's one timer, see `timer`), take the lock again to report. No
//! retry rule lives here. An attempt that runs past its timeout is dropped (its future is
//! cancelled) and reported as [`AttemptError::TimedOut`]. If the future returned by `execute` is
//! itself dropped, a guard gives back what the attempt in flight holds (its bulkhead slot, its
//! half-open probe), or the rate unit reserved for the attempt it was waiting to send, through
//! `Operation::abandon`.

use std::future::Future;
use std::pin::pin;

use relent_core::{Action, Attempt, Classify, Context, Operation, OperationId, RetryPolicy};

use crate::bound;
use crate::clock::{Clock, Duration, HZ, Instant, std_duration};
use crate::dependency::{Dependency, Holder, Inner};
use crate::error::{AttemptError, Detailed, Error};
use crate::timer;

/// What an attempt is told, so it can set its own socket timeouts: its number, its timeout, the
/// instant that timeout expires, the operation's deadline and its id.
///
/// Methods, as on the core's [`Attempt`], rather than fields: the instants are converted from the
/// core's ticks to tokio's clock only when asked. An attempt that reads only its number pays for
/// no conversion; the two instants were 120 of relent-tokio's 1,343 instructions per successful
/// operation while they were computed for every attempt (docs/performance.md).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AttemptInfo {
    number: u8,
    timeout: Duration,
    expires: Instant,
    deadline: Instant,
    operation: OperationId,
    clock: Clock,
}

impl AttemptInfo {
    fn of(attempt: Attempt<HZ>, operation: OperationId, clock: Clock) -> Self {
        Self {
            number: attempt.number(),
            timeout: attempt.timeout(),
            expires: attempt.expires(),
            deadline: attempt.deadline(),
            operation,
            clock,
        }
    }

    /// 1 for the first attempt.
    pub fn number(&self) -> u8 {
        self.number
    }

    /// How long this attempt may run; it is dropped after that.
    pub fn timeout(&self) -> std::time::Duration {
        std_duration(self.timeout)
    }

    /// When its timeout expires, on tokio's clock.
    pub fn expires(&self) -> tokio::time::Instant {
        self.clock.instant(self.expires)
    }

    /// The operation's overall deadline, on tokio's clock.
    pub fn deadline(&self) -> tokio::time::Instant {
        self.clock.instant(self.deadline)
    }

    /// The operation's id, as in the logs.
    pub fn operation(&self) -> OperationId {
        self.operation
    }
}

/// What the methods give, not the ticks they are computed from.
impl std::fmt::Debug for AttemptInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttemptInfo")
            .field("number", &self.number)
            .field("timeout", &self.timeout())
            .field("expires", &self.expires())
            .field("deadline", &self.deadline())
            .field("operation", &self.operation)
            .finish()
    }
}

/// Abandons the operation if the future running it is dropped before it ends.
struct Running<'a, E> {
    op: Operation<'a, HZ, AttemptError<E>>,
    inner: &'a Inner,
}

impl<E> Drop for Running<'_, E> {
    /// The check inlined, where an operation that ended pays only for it; the abandonment out of
    /// line.
    #[inline(always)]
    fn drop(&mut self) {
        if !self.op.is_done() {
            self.abandon();
        }
    }
}

impl<E> Running<'_, E> {
    #[cold]
    #[inline(never)]
    fn abandon(&mut self) {
        let (op, inner) = (&mut self.op, self.inner);
        inner.step(sheddable(op), |locked, events| op.abandon(inner.clock.now(), &mut locked.state, events));
    }
}

impl Dependency {
    /// Runs `operation` through this dependency's pipeline under `policy`, and returns its value, or
    /// an [`Error`] with the completion. `operation` is called once per attempt with the attempt's
    /// [`AttemptInfo`]. A context whose id is 0 gets the next id of this dependency.
    ///
    /// An attempt that hangs is dropped at its timeout and retried (tokio's paused clock here, as
    /// in a test, so the times are exact):
    ///
    /// ```
    /// use std::time::Duration as Std;
    /// use relent_tokio::core::{Classify, Context, DependencyConfig, Jitter, ReplaySafety, RetryBudget, RetryPolicy, Verdict};
    /// use relent_tokio::{Dependency, Duration, HZ};
    ///
    /// #[derive(Debug)]
    /// struct Unavailable;
    /// impl Classify<HZ> for Unavailable {
    ///     fn classify(&self) -> Verdict<HZ> { Verdict::Retryable }
    /// }
    /// # impl std::fmt::Display for Unavailable {
    /// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("unavailable") }
    /// # }
    /// # impl std::error::Error for Unavailable {}
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
    ///     .jitter(Jitter::None)
    ///     .attempt_timeout(Duration::from_secs(1))
    ///     .build()?;
    /// let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5)?);
    /// let quotes = Dependency::new("quotes", config)?;
    /// let read = Context::new(Duration::from_secs(5), ReplaySafety::replayable_read(Duration::from_secs(60)));
    ///
    /// let t0 = tokio::time::Instant::now();
    /// let quote = quotes
    ///     .execute(&policy, read, |attempt| async move {
    ///         assert_eq!(attempt.timeout(), Std::from_secs(1)); // for your own socket timeouts
    ///         if attempt.number() == 1 {
    ///             std::future::pending::<()>().await; // the first node hangs
    ///         }
    ///         Ok::<_, Unavailable>(1_250)
    ///     })
    ///     .await?;
    /// assert_eq!(quote, 1_250);
    /// assert_eq!(t0.elapsed(), Std::from_millis(1_100)); // the 1 s timeout, then 100 ms of backoff
    /// # Ok(()) }
    /// ```
    pub fn execute<T, E, F, Fut>(
        &self,
        policy: &RetryPolicy<HZ>,
        context: Context<HZ>,
        operation: F,
    ) -> impl Future<Output = Result<T, Error<E>>>
    where
        F: FnMut(AttemptInfo) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify<HZ>,
    {
        run(
            &self.inner,
            policy,
            context,
            || None,
            operation,
            |ran, inner| match ran {
                // The name is cloned only for an error: the success path touches no reference count.
                Ok(detailed) => detailed.into_result_with(|| inner.name.clone()),
                Err(e) => Err(Error::Start(e)),
            },
        )
    }

    /// As [`Dependency::execute`], returning the value with the whole completion (disposition,
    /// problem code, attempts, time waited and used, last failure), as seed 003's
    /// `executeDetailed`. Refuses, before anything is sent, a policy and context that cannot run
    /// together (see `Operation::start`).
    pub fn execute_detailed<T, E, F, Fut>(
        &self,
        policy: &RetryPolicy<HZ>,
        context: Context<HZ>,
        operation: F,
    ) -> impl Future<Output = Result<Detailed<T, E>, relent_core::StartError>>
    where
        F: FnMut(AttemptInfo) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify<HZ>,
    {
        run(&self.inner, policy, context, || None, operation, |ran, _| ran)
    }
}

/// The loop, and `finish` applied to its outcome. The operation ends by what `until` gives and by
/// the expiry of the attempt it runs in, if it runs in one, when either is sooner than its
/// context's deadline (see `bound`); `until` is a closure so that the entry points without one hold
/// nothing for it. An `async` block rather than an `async fn` (an `async fn` copies each argument
/// into a local of its own, so its future holds it twice), and one for every entry point, the
/// layer's included (awaiting one future from another would hold both): the future holds the
/// arguments, the operation and the attempt's own future once each, and not the attempt in flight
/// (the operation gives it back when it is reported).
#[inline(always)]
pub(crate) fn run<T, E, F, Fut, Out, Fin>(
    inner: &Inner,
    policy: &RetryPolicy<HZ>,
    context: Context<HZ>,
    until: impl FnOnce() -> Option<tokio::time::Instant>,
    operation: F,
    finish: Fin,
) -> impl Future<Output = Out>
where
    F: FnMut(AttemptInfo) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Classify<HZ>,
    Fin: FnOnce(Result<Detailed<T, E>, relent_core::StartError>, &Inner) -> Out,
{
    drive(inner, policy, Fresh { context, until }, |_| {}, operation, finish)
}

/// How `drive` starts its operation, at the instant given, and whether the operation runs inside
/// another's attempt (see `bound`). The operation borrows the dependency's configuration, which
/// `holder` keeps for its life once the dependency has been reconfigured (see
/// `Inner::config_for`). A trait rather than a closure: the operation borrows the policy and the
/// configuration for a lifetime of the loop's own, which a closure's type would name.
pub(crate) trait Start {
    fn start<'o, E>(
        self,
        policy: &'o RetryPolicy<HZ>,
        inner: &'o Inner,
        holder: &'o mut Holder,
        now: Instant,
    ) -> (Result<Operation<'o, HZ, E>, relent_core::StartError>, bool);
}

/// A new operation: its context cut to what `until` gives and to the attempt it runs in.
pub(crate) struct Fresh<U> {
    pub(crate) context: Context<HZ>,
    pub(crate) until: U,
}

impl<U: FnOnce() -> Option<tokio::time::Instant>> Start for Fresh<U> {
    #[inline(always)]
    fn start<'o, E>(
        self,
        policy: &'o RetryPolicy<HZ>,
        inner: &'o Inner,
        holder: &'o mut Holder,
        now: Instant,
    ) -> (Result<Operation<'o, HZ, E>, relent_core::StartError>, bool) {
        let (context, bounded) = bound::cut(self.context, (self.until)(), &inner.name, &inner.clock, now);
        (Operation::start(policy, inner.config_for(holder), context, now), bounded)
    }
}

/// `run`'s loop for an operation that `how` starts when the loop is first polled (a new one, or a
/// hedge of one: see `hedge`). `numbered` is told the id the operation gets, after its first step.
#[allow(clippy::manual_async_fn)]
#[inline(always)]
pub(crate) fn drive<T, E, F, Fut, Out, Fin>(
    inner: &Inner,
    policy: &RetryPolicy<HZ>,
    how: impl Start,
    numbered: impl FnOnce(OperationId),
    mut operation: F,
    finish: Fin,
) -> impl Future<Output = Out>
where
    F: FnMut(AttemptInfo) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Classify<HZ>,
    Fin: FnOnce(Result<Detailed<T, E>, relent_core::StartError>, &Inner) -> Out,
{
    async move {
        let started = inner.clock.now();
        let mut holder = None;
        let (op, bounded) = match how.start(policy, inner, &mut holder, started) {
            (Ok(op), bounded) => (op, bounded),
            (Err(e), _) => return finish(Err(e), inner),
        };
        let mut running = Running { op, inner };
        let mut value = None;
        let mut timer = pin!(None);
        // One lock and one clock read per step: a report and the next poll share them. The step's
        // events are logged after the lock is released.
        let mut action = {
            // A copy for the closure to borrow: a borrow of `started` would keep it in the future.
            let now = started;
            inner.step(sheddable(&running.op), |locked, events| {
                // An operation without an id gets the dependency's next, counted under this lock.
                locked.number(&mut running.op);
                running.op.poll(now, &mut locked.state, events)
            })
        };
        numbered(running.op.id());
        loop {
            action = match action {
                Action::Dispatch(attempt) => {
                    // The attempt itself is not held while it runs: the operation gives it back.
                    let result = {
                        let info = AttemptInfo::of(attempt, running.op.id(), inner.clock);
                        // In ticks: converted to tokio's clock only if the attempt is pending and
                        // its timer is armed, or if an operation started inside it reads it as its
                        // bound (see `bound`). (A field read, not a borrow of `info` or of the
                        // attempt, which the future would then hold across the await.)
                        let expires = info.expires;
                        let call = pin!(operation(info));
                        timer::race(call, timer.as_mut(), &inner.clock, expires, bounded).await
                    };
                    report(inner, &mut running.op, result, &mut value)
                }
                // Holding nothing: the lock was released above.
                Action::Wait { until } => {
                    let at = inner.clock.instant(until);
                    if let (true, Some(slot_freed)) = (running.op.waits_for_slot(), inner.slot_freed.get()) {
                        // In the bulkhead's queue: until the end of the wait, or sooner when a
                        // slot frees. Boxed, so that this rare wait makes every operation's
                        // future 8 bytes larger, not 56.
                        let woken = Box::pin(slot_freed.notified());
                        timer::wait_until_woken(timer.as_mut(), at, bounded, woken).await;
                    } else {
                        timer::wait_until(timer.as_mut(), at, bounded).await;
                    }
                    let op = &mut running.op;
                    inner.step_passing(sheddable(op), |locked, events| {
                        let action = op.poll(inner.clock.now(), &mut locked.state, events);
                        (action, op.waits_for_slot())
                    })
                }
                Action::Done => break,
            };
        }
        let completion = running.op.take_completion().expect("the core has a completion once poll says Done");
        let op = &running.op;
        let deadline = Duration::from_ticks(op.deadline().as_ticks().saturating_sub(op.started().as_ticks()));
        finish(Ok(Detailed::new(value, completion, deadline, || inner.clock.now())), inner)
    }
}

/// Whether `op` is work its caller stated sheddable, whose refusals are logged at INFO (see
/// `trace`).
#[inline(always)]
fn sheddable<E>(op: &Operation<'_, HZ, E>) -> bool {
    op.criticality() == relent_core::Criticality::Sheddable
}

/// What attempt `number` of an operation whose policy allows `last` sends of `original` (a
/// request, its body, the service that takes it), for both tower layers: a copy made by `copy` for
/// an attempt that a retry may follow, and the original itself for the last one, so that a request
/// that gets one attempt is never copied. After the last there is none: the core never dispatches
/// such an attempt.
#[inline]
pub(crate) fn for_attempt<T>(
    number: u8,
    last: u8,
    original: &mut Option<T>,
    copy: impl FnOnce(&T) -> Option<T>,
) -> Option<T> {
    if number >= last { original.take() } else { original.as_ref().and_then(copy) }
}

/// Reports what the attempt in flight came to (its value, its error, or `None` for a timeout) and
/// asks the core what to do next: one step, under one lock and at one clock read.
fn report<T, E: Classify<HZ>>(
    inner: &Inner,
    op: &mut Operation<'_, HZ, AttemptError<E>>,
    result: Option<Result<T, E>>,
    value: &mut Option<T>,
) -> Action<HZ> {
    inner.step(sheddable(op), |locked, events| {
        let now = inner.clock.now();
        if let Some(attempt) = op.attempt() {
            let failure = match result {
                Some(Ok(v)) => {
                    *value = Some(v);
                    None
                }
                Some(Err(e)) => Some(AttemptError::Failed(e)),
                None => Some(AttemptError::TimedOut { after: attempt.timeout() }),
            };
            let state = &mut locked.state;
            match failure {
                None => op.on_success(attempt, now, state, events),
                Some(f) => op.on_failure(attempt, now, state, &mut locked.rng, f, events),
            }
        }
        op.poll(now, &mut locked.state, events)
    })
}
