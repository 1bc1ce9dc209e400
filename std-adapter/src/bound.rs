//! `bound`: the expiry of the attempt that code runs in, which every operation started inside that
//! attempt ends by.
//!
//! Why (seed 000, "Retries and the Deadline" and "Where the Retry Lives"): an attempt whose answer
//! nobody will read should not be made, and exactly one layer retries an operation. An operation
//! started inside another's attempt (a client that retries on its own, called from an attempt of
//! a service's own operation) is dropped when that attempt times out, wherever it is, mid-attempt
//! or mid-backoff. Dropped, it ends with no completion of its own, and its caller sees a timeout,
//! which is retryable: the retries multiply (three attempts of three, 9 calls to a far side that
//! hangs, where the rule allows 3).
//!
//! So each attempt's future is polled with the attempt's expiry in a thread-local (as tokio's
//! task-locals are: set for the poll, put back after it), and an operation that starts inside it
//! (`execute`, `execute_detailed`, a `RetryLayer` request) cuts its deadline to that instant, on
//! the same clock read as its start. It ends by that instant on its own, with a completion that
//! says so, and its caller's `Classify` impls do not retry it again. The cut is exact to the
//! microsecond, rounded down, so the inner deadline is never after the outer expiry and no margin
//! is needed. A request's `RequestDeadline` is applied on that clock read too, for the same reason.
//!
//! Ending first needs the inner operation's timer to fire no later than the outer attempt's. Set
//! to the same instant, they fire in the same pass of tokio's timer driver, but on a
//! multi-threaded runtime a worker may poll the task between two batches of that pass's wakers,
//! with the outer timer fired and the inner one not yet. So an operation started inside an attempt
//! also reads the clock when its attempt or wait and its timer are all pending (`timer::passed`),
//! and ends by the clock: the outer attempt then finds it done, never waiting.
//!
//! What it does not reach: a task spawned from the attempt (`tokio::spawn`), which the attempt's
//! timeout does not drop either, so it keeps its own deadlines; and the attempt's closure body,
//! which runs before the attempt's future is first polled (`AttemptInfo::expires` is there).
//!
//! A handler's own deadline is a bound of the same kind ([`RequestDeadline::scope`]): seed 000's
//! `ctx.remaining()`, given once for the whole handler instead of to each call. Its future is
//! polled with the sooner of the deadline and the bound it runs in (a scope never extends the
//! attempt it runs in), and every operation started inside it ends by that, as inside an attempt.
//!
//! [`RequestDeadline::scope`]: crate::RequestDeadline::scope
//!
//! The attempt's expiry is kept as the core's ticks and its dependency's clock, both already in the
//! operation's future, and converted to tokio's clock only when an operation inside reads it.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use relent_core::Context;

use crate::clock::{Clock, Duration, HZ, Instant};

/// An attempt's expiry, in the ticks of the dependency that dispatched it; or a scope's deadline
/// (tick 0 of a clock anchored at it).
#[derive(Clone, Copy)]
struct Expiry {
    clock: Clock,
    at: Instant,
    scope: bool,
}

impl Expiry {
    fn instant(self) -> tokio::time::Instant {
        self.clock.instant(self.at)
    }

    /// What the bound is, as the `relent: deadline cut` line says it.
    fn by(self) -> &'static str {
        if self.scope { "scope" } else { "attempt" }
    }
}

// A thread-local set for each poll of an attempt and put back after it, as tokio's `task_local!`
// does, written here because tokio's cost 139 instructions on the ready success path (its
// `RefCell` borrowed twice a poll, an `Option` of the value and a static reference in the future,
// 48 bytes more per operation, copied by `block_on`); a `Cell` of a `Copy` value set and put back
// costs a few moves. No destructor: the slot is never torn down, so reading it cannot fail.
thread_local! {
    static EXPIRY: Cell<Option<Expiry>> = const { Cell::new(None) };
}

/// Puts back the expiry that was set before a poll, even if the poll panics.
struct Restore(Option<Expiry>);

impl Drop for Restore {
    #[inline(always)]
    fn drop(&mut self) {
        EXPIRY.set(self.0);
    }
}

/// Polls `attempt` with its expiry (`at` on `clock`) as the bound of every operation started inside
/// it, and puts back the bound it runs in after. The expiry is made at each poll from the clock and
/// ticks the operation's future already holds for the attempt's timer.
#[inline(always)]
pub(crate) fn poll_within<F: Future>(
    clock: &Clock,
    at: Instant,
    attempt: Pin<&mut F>,
    cx: &mut std::task::Context<'_>,
) -> Poll<F::Output> {
    let _restore = Restore(EXPIRY.replace(Some(Expiry { clock: *clock, at, scope: false })));
    attempt.poll(cx)
}

/// Polls `future` with `deadline` as the bound of every operation started inside it, or with the
/// bound it already runs in when that is sooner, and puts that bound back after.
pub(crate) fn poll_scoped<F: Future>(
    deadline: tokio::time::Instant,
    future: Pin<&mut F>,
    cx: &mut std::task::Context<'_>,
) -> Poll<F::Output> {
    let outer = EXPIRY.get();
    let bound = match outer {
        Some(e) if e.instant() <= deadline => e,
        _ => Expiry { clock: Clock::anchored(deadline), at: Instant::from_ticks(0), scope: true },
    };
    let _restore = Restore(EXPIRY.replace(Some(bound)));
    future.poll(cx)
}

/// When the attempt that the calling code runs in expires, on tokio's clock: `None` outside any
/// attempt of relent-tokio's (and in a task spawned from one, or in the closure that builds an
/// attempt's future, before the future runs). Inside a [`RequestDeadline::scope`] and no attempt,
/// the scope's deadline (or the sooner bound the scope runs in).
///
/// What code deep inside an attempt, which was not handed its [`AttemptInfo`], can cap its own
/// timeouts at: seed 000's "every attempt's timeout is the smaller of the ceiling and the
/// request's remaining budget". Operations of relent-tokio started inside an attempt already end
/// by it on their own.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration as Std;
/// use relent_tokio::core::{Context, DependencyConfig, ReplaySafety, RetryPolicy, Verdict};
/// use relent_tokio::{Dependency, Duration, HZ, attempt_expiry};
///
/// let db = Dependency::new("db", DependencyConfig::new(Duration::from_secs(10)))?;
/// let once = RetryPolicy::single_attempt().attempt_timeout(Duration::from_millis(300)).build()?;
/// let read = Context::new(Duration::from_secs(2), ReplaySafety::Unsafe);
///
/// assert_eq!(attempt_expiry(), None);
/// let detailed = db
///     .execute_detailed(&once, read, |_| async {
///         let expires = attempt_expiry().expect("inside an attempt");
///         Ok::<_, Verdict<HZ>>(expires - tokio::time::Instant::now())
///     })
///     .await?;
/// assert_eq!(detailed.value, Some(Std::from_millis(300)));
/// # Ok(()) }
/// ```
///
/// [`AttemptInfo`]: crate::AttemptInfo
/// [`RequestDeadline::scope`]: crate::RequestDeadline::scope
pub fn attempt_expiry() -> Option<tokio::time::Instant> {
    EXPIRY.get().map(Expiry::instant)
}

/// `context` cut to end by the enclosing attempt's expiry and by `until` (a request's own
/// deadline), whichever is sooner, for an operation of `dependency` starting at `now` on `clock`,
/// and whether the operation runs inside an attempt (its waits then also read the clock: see
/// `timer::passed`). Each limit is counted to the microsecond below it, so the operation never
/// outlasts it. Inlined for the usual case, with neither limit, which reads the thread-local and
/// changes nothing.
#[inline(always)]
pub(crate) fn cut(
    context: Context<HZ>,
    until: Option<tokio::time::Instant>,
    dependency: &str,
    clock: &Clock,
    now: Instant,
) -> (Context<HZ>, bool) {
    let enclosing = EXPIRY.get();
    if enclosing.is_none() && until.is_none() {
        return (context, false);
    }
    (cut_to(context, enclosing, until, dependency, clock, now), enclosing.is_some())
}

/// `cut` with a limit, out of line. A deadline it shortens is logged at DEBUG, with what was asked
/// and what cut it: the answer to "why did this end so soon?".
#[inline(never)]
fn cut_to(
    context: Context<HZ>,
    enclosing: Option<Expiry>,
    until: Option<tokio::time::Instant>,
    dependency: &str,
    clock: &Clock,
    now: Instant,
) -> Context<HZ> {
    let (limit, by) = match (enclosing, until) {
        // Not reached: `cut` returns the context as it is first.
        (None, None) => return context,
        // The attempt's own dependency: the same ticks, no conversion.
        (Some(e), None) if e.clock == *clock => (e.at, e.by()),
        (Some(e), None) => (clock.floor(e.instant()), e.by()),
        (None, Some(u)) => (clock.floor(u), "request_deadline"),
        (Some(e), Some(u)) => {
            let expires = e.instant();
            if u < expires { (clock.floor(u), "request_deadline") } else { (clock.floor(expires), e.by()) }
        }
    };
    let cut = context.deadline_within(Duration::from_ticks(limit.as_ticks().saturating_sub(now.as_ticks())));
    if cut.deadline() < context.deadline() {
        crate::trace::deadline_cut(dependency, cut.deadline(), context.deadline(), by);
    }
    cut
}
