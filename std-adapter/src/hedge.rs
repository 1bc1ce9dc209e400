//! `hedge`: an operation and, if it is still running after a delay, a second copy of its call
//! raced against it (`Dependency::execute_hedged`).
//!
//! Why: a retry helps a call that failed, and does nothing for one that is only slow. A backend's
//! latency has a tail (a garbage collection, a cold cache, a slow node behind the balancer), and a
//! caller that sends the same read again once the first copy has taken longer than most do gets
//! whichever answer comes first (Dean and Barroso, "The Tail at Scale", 2013). Hedging is also how
//! a careless client doubles its dependency's load, so the rules are the core's, as for a retry
//! (`relent_core::HedgePlan`): a policy that allows a repeat and a read's statement that repeating
//! is safe, checked before anything is sent; the retry budget pays for each hedge; the bulkhead, the rate
//! limit and the breaker admit it as any attempt; it ends by the operation's deadline.
//!
//! The loop is `execute`'s, twice: the operation's own, started at once, and its hedge's, started
//! when the delay has passed if the operation is still running then. The first success is the
//! answer, and the other loop is dropped, which abandons its operation (its attempt's slot and
//! probe given back, no failure counted). A hedge that fails ends: the operation goes on with its
//! own retries. An operation that ends without success while its hedge is out waits for the hedge;
//! if neither succeeds, the error is the operation's own (its completion tells its retries; the
//! hedge's failure is logged).

use std::future::Future;
use std::pin::pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use relent_core::{
    Classify, Context, HedgeDelay, HedgePlan, Operation, OperationId, RetryPolicy, StartError,
};

use crate::clock::{HZ, Instant, std_duration, ticks};
use crate::dependency::{Dependency, Holder, Inner};
use crate::error::{Detailed, Error};
use crate::execute::{AttemptInfo, Fresh, Start, drive};

/// When a hedge goes: a fixed `std::time::Duration` after the operation's start, or a
/// [`HedgeDelay`], which can be a percentile of the dependency's own latency
/// (`HedgeDelay::percentile(95)`, with the dependency's
/// [`latency_samples`](relent_core::DependencyConfig::latency_samples)).
pub trait IntoHedgeDelay {
    /// The delay, in the core's terms.
    fn into_hedge_delay(self) -> HedgeDelay<HZ>;
}

impl IntoHedgeDelay for std::time::Duration {
    fn into_hedge_delay(self) -> HedgeDelay<HZ> {
        HedgeDelay::after(ticks(self))
    }
}

impl IntoHedgeDelay for HedgeDelay<HZ> {
    fn into_hedge_delay(self) -> HedgeDelay<HZ> {
        self
    }
}

/// What the hedge takes from the operation it repeats: its plan, and whether the operation runs
/// inside another's attempt (the hedge's waits then read the clock too, see `bound`).
#[derive(Clone, Copy)]
struct Plan {
    plan: HedgePlan<HZ>,
    bounded: bool,
}

/// The operation: a new one, whose plan for a hedge is kept in `plan` as it starts. A policy that
/// allows no repeat refuses to start here, before anything is sent.
struct Primary<'c, U> {
    fresh: Fresh<U>,
    plan: &'c OnceLock<Plan>,
}

impl<U: FnOnce() -> Option<tokio::time::Instant>> Start for Primary<'_, U> {
    fn start<'o, E>(
        self,
        policy: &'o RetryPolicy<HZ>,
        inner: &'o Inner,
        holder: &'o mut Holder,
        now: Instant,
    ) -> (Result<Operation<'o, HZ, E>, StartError>, bool) {
        let (op, bounded) = self.fresh.start(policy, inner, holder, now);
        let op = op.and_then(|op| {
            let _ = self.plan.set(Plan { plan: op.hedge_plan()?, bounded });
            Ok(op)
        });
        (op, bounded)
    }
}

/// The hedge, started from the operation's plan, for the operation numbered `of`.
struct Hedge {
    plan: Plan,
    of: OperationId,
}

impl Start for Hedge {
    /// Numbered here, under a lock of its own, rather than in its first step as an operation is:
    /// so that the line that names both ids comes before the hedge's own. One lock more for each
    /// hedge, none for an operation that is not hedged.
    fn start<'o, E>(
        self,
        policy: &'o RetryPolicy<HZ>,
        inner: &'o Inner,
        holder: &'o mut Holder,
        now: Instant,
    ) -> (Result<Operation<'o, HZ, E>, StartError>, bool) {
        // The dependency's configuration as the hedge starts: its operation's, unless the
        // dependency was reconfigured since.
        let mut op = Operation::start_hedge(policy, inner.config_for(holder), self.plan.plan, now);
        inner.lock().number(&mut op);
        crate::trace::hedge_started(&inner.name, self.of, op.id());
        (Ok(op), self.plan.bounded)
    }
}

impl Dependency {
    /// As [`Dependency::execute`], with a hedge: if the operation is still running `after` its
    /// start, a second copy of its call is sent (as attempt 2, paid for by the retry budget), and
    /// the first success of either is the answer; the other is cancelled. Set `after` near the
    /// dependency's 95th percentile of latency: about one call in twenty is then sent twice. Or
    /// pass a [`HedgeDelay`]: `HedgeDelay::percentile(90)` is read from the dependency's latency
    /// log ([`latency_samples`](relent_core::DependencyConfig::latency_samples)) as the operation
    /// starts, and follows the dependency; refused with
    /// [`StartError::HedgeWithoutLatencyLog`] on a dependency that keeps none.
    ///
    /// A hedge repeats the call, so it needs what a retry needs: a policy of at least two
    /// attempts, and with it a replay-safety statement and a retry budget, refused before anything
    /// is sent ([`StartError::HedgeWithoutRetries`] for a policy of one attempt); and the statement
    /// must be a read's ([`StartError::HedgeOfMutation`] otherwise: a provider's idempotency key
    /// protects a repeat, not a copy in flight). The statement must
    /// still hold when the hedge goes out, the budget must allow it, and it passes the
    /// dependency's protections as any attempt; refused, it is not sent, and the operation goes on
    /// alone. Its attempt's timeout is the policy's, cut to what is left of the operation's
    /// deadline. A hedge that fails ends, and the operation goes on with its own retries; if the
    /// operation ends without success while its hedge is out, the hedge's answer is waited for.
    /// If neither succeeds, the error is the operation's. `operation` is called for each attempt
    /// of either, possibly while another of its futures is running: `Fn`, not `FnMut`.
    ///
    /// The hedge is an operation of its own, with the dependency's next id; `relent: hedge
    /// started` (DEBUG) names it and the operation's, before the hedge's own lines.
    ///
    /// A read whose first copy hangs (tokio's paused clock, so the times are exact):
    ///
    /// ```
    /// use std::time::Duration as Std;
    /// use relent_tokio::core::{Classify, Context, DependencyConfig, ReplaySafety, RetryBudget, RetryPolicy, Verdict};
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
    ///     .attempt_timeout(Duration::from_secs(1))
    ///     .build()?;
    /// let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5)?);
    /// let quotes = Dependency::new("quotes", config)?;
    /// let read = Context::new(Duration::from_secs(5), ReplaySafety::replayable_read(Duration::from_secs(60)));
    ///
    /// let t0 = tokio::time::Instant::now();
    /// let quote = quotes
    ///     .execute_hedged(&policy, read, Std::from_millis(50), |attempt| async move {
    ///         if attempt.number() == 1 {
    ///             std::future::pending::<()>().await; // a slow node
    ///         }
    ///         tokio::time::sleep(Std::from_millis(10)).await;
    ///         Ok::<_, Unavailable>(1_250)
    ///     })
    ///     .await?;
    /// assert_eq!(quote, 1_250);
    /// assert_eq!(t0.elapsed(), Std::from_millis(60)); // the hedge at 50 ms, its answer 10 ms later
    /// # Ok(()) }
    /// ```
    pub fn execute_hedged<T, E, F, Fut>(
        &self,
        policy: &RetryPolicy<HZ>,
        context: Context<HZ>,
        after: impl IntoHedgeDelay,
        operation: F,
    ) -> impl Future<Output = Result<T, Error<E>>>
    where
        F: Fn(AttemptInfo) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify<HZ>,
    {
        let fresh = Fresh { context, until: || None };
        race(&self.inner, policy, fresh, after.into_hedge_delay(), operation, |raced, inner| match raced {
            Ok(detailed) => detailed.into_result_with(|| inner.name.clone()),
            Err(e) => Err(Error::Start(e)),
        })
    }

    /// As [`Dependency::execute_hedged`], returning the value with the whole completion, as
    /// [`Dependency::execute_detailed`] does: the hedge's when the hedge succeeded first
    /// ([`Detailed::hedge`]), the operation's otherwise. Refuses, before anything is sent, what
    /// `execute_hedged` refuses.
    pub fn execute_hedged_detailed<T, E, F, Fut>(
        &self,
        policy: &RetryPolicy<HZ>,
        context: Context<HZ>,
        after: impl IntoHedgeDelay,
        operation: F,
    ) -> impl Future<Output = Result<Detailed<T, E>, StartError>>
    where
        F: Fn(AttemptInfo) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Classify<HZ>,
    {
        let fresh = Fresh { context, until: || None };
        race(&self.inner, policy, fresh, after.into_hedge_delay(), operation, |raced, _| raced)
    }
}

/// The race of an operation (started as `fresh` says) and its hedge, sent `after` the operation's
/// start if it is still running then, and `finish` applied to its outcome: the first success
/// (`Detailed::hedge` set when it is the hedge's), or the operation's own outcome when neither
/// succeeds (see the module doc). For `execute_hedged` and the layers. `finish` is applied
/// inside, as `execute::run` applies its own: a future awaiting this one would hold it twice.
#[allow(clippy::manual_async_fn)]
pub(crate) fn race<T, E, F, Fut, U, Out>(
    inner: &Inner,
    policy: &RetryPolicy<HZ>,
    fresh: Fresh<U>,
    after: HedgeDelay<HZ>,
    operation: F,
    finish: impl FnOnce(Result<Detailed<T, E>, StartError>, &Inner) -> Out,
) -> impl Future<Output = Out>
where
    F: Fn(AttemptInfo) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Classify<HZ>,
    U: FnOnce() -> Option<tokio::time::Instant>,
{
    async move {
        // Read when the operation starts: a percentile as the dependency's latency log has it now
        // (under the lock); a fixed delay reads nothing, and takes no lock. An instant too far to
        // represent is never reached: no hedge, as for none learnt.
        let due = {
            let delay = match after.fixed() {
                Some(fixed) => Ok(Some(fixed)),
                None => {
                    let mut locked = inner.lock();
                    let (state, config) = locked.with_config(&inner.config);
                    state.hedge_delay(config, after)
                }
            };
            match delay {
                Err(e) => return finish(Err(e), inner),
                Ok(delay) => delay.and_then(|d| tokio::time::Instant::now().checked_add(std_duration(d))),
            }
        };
        // Set once each, and read on the same task: a lock and atomics rather than cells only so
        // that the future is `Send`, as `execute`'s is.
        let (plan, id, hedged) = (OnceLock::new(), OnceLock::new(), AtomicBool::new(false));
        // Set when the hedge's attempt is sent (admitted by the dependency, its call made).
        let sent = AtomicBool::new(false);
        let primary = Primary { fresh, plan: &plan };
        let primary = drive(
            inner,
            policy,
            primary,
            |n| {
                let _ = id.set(n);
            },
            &operation,
            |ran, _| ran,
        );
        let hedge = async {
            match due {
                Some(due) => tokio::time::sleep_until(due).await,
                None => std::future::pending().await,
            }
            // Polled only after the operation has started, and only while it runs.
            let Some(&plan) = plan.get() else { return std::future::pending().await };
            hedged.store(true, Ordering::Relaxed);
            let hedge = Hedge { plan, of: id.get().copied().unwrap_or(OperationId(0)) };
            let send = |info| {
                sent.store(true, Ordering::Relaxed);
                operation(info)
            };
            drive(inner, policy, hedge, |_| {}, send, |ran, _| ran).await
        };
        let (mut primary, mut hedge) = (pin!(primary), pin!(hedge));
        let mut ended: Option<Result<Detailed<T, E>, StartError>> = None;
        let mut racing = true;
        let mut answer = std::future::poll_fn(|cx| {
            if ended.is_none() {
                if let Poll::Ready(out) = primary.as_mut().poll(cx) {
                    if succeeded(&out) {
                        return Poll::Ready(out);
                    }
                    ended = Some(out);
                }
            }
            if racing {
                if ended.is_some() && !hedged.load(Ordering::Relaxed) {
                    // Ended before its hedge was due: there is none.
                    racing = false;
                } else if let Poll::Ready(mut out) = hedge.as_mut().poll(cx) {
                    if let (true, Ok(detailed)) = (succeeded(&out), &mut out) {
                        detailed.hedge = true;
                        return Poll::Ready(out);
                    }
                    racing = false;
                }
            }
            match ended.take() {
                Some(out) if !racing => Poll::Ready(out),
                out => {
                    ended = out;
                    Poll::Pending
                }
            }
        })
        .await;
        if let Ok(detailed) = &mut answer {
            detailed.hedge_sent = sent.load(Ordering::Relaxed);
        }
        if sent.load(Ordering::Relaxed) {
            let won = matches!(&answer, Ok(detailed) if detailed.hedge);
            let hedges = &mut inner.lock().hedges;
            *hedges = (hedges.0.wrapping_add(1), hedges.1.wrapping_add(u64::from(won)));
        }
        finish(answer, inner)
    }
}

/// Whether a loop's outcome is a success, the answer of the race.
fn succeeded<T, E>(out: &Result<Detailed<T, E>, StartError>) -> bool {
    matches!(out, Ok(detailed) if detailed.value.is_some())
}
