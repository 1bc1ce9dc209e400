//! `timer`: one tokio timer per operation, armed only when something has to wait.
//!
//! `tokio::time::timeout` builds a `Sleep` for every attempt before the attempt is first polled,
//! and a backoff builds another: each takes a reference to the runtime's timer driver and is
//! dropped after one use. An operation here keeps one `Sleep` for its whole life instead, and
//! creates it the first time it has to wait: when an attempt is not ready at its first poll (its
//! timeout starts to matter) or when the core says to wait. After that it is moved with
//! `Sleep::reset`, so a retried operation registers one timer, not one per attempt and backoff, and
//! an attempt that completes at its first poll (a cache hit, a refusal from a local service, a
//! test double) costs no timer at all.
//!
//! The attempt is always polled before its timer, as `tokio::time::timeout` does: an attempt that
//! is ready wins over a timeout that expired at the same time. And as there, when the task's
//! cooperative budget is used up, the timer is still polled outside that budget, so an attempt
//! that always exhausts the budget cannot keep its own timeout from firing.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};

use crate::bound;
use crate::clock::{Clock, Instant as Ticks};

/// An operation's timer: nothing until the first wait, one `Sleep` after.
pub(crate) type Timer = Option<Sleep>;

/// Polls `timer`. `arm` gives the instant this wait is for until its first poll, which sets the
/// timer to it (creating the `Sleep` if there is none yet) and takes it; the later polls of the
/// same wait only poll the timer.
fn poll_timer(
    mut timer: Pin<&mut Timer>,
    arm: &mut Option<impl FnOnce() -> Instant>,
    cx: &mut Context<'_>,
) -> Poll<()> {
    if let Some(at) = arm.take().map(|at| at()) {
        match timer.as_mut().as_pin_mut() {
            Some(sleep) => sleep.reset(at),
            None => timer.set(Some(tokio::time::sleep_until(at))),
        }
    }
    match timer.as_pin_mut() {
        Some(sleep) => sleep.poll(cx),
        // Not reachable: a wait's first poll sets the timer. Were it absent, waiting would hang;
        // ending the wait as expired does not.
        None => Poll::Ready(()),
    }
}

/// Races `attempt` against the timer set to its expiry (`expires` on `clock`), converted to tokio's
/// clock only if the attempt is pending at its first poll: `Some(output)` if the attempt finished
/// first, `None` if its timeout expired first. Both are borrowed, pinned where the caller holds
/// them, so the operation's future holds the attempt's future once. The attempt is polled with its
/// expiry as the bound of the operations started inside it (see `bound`): one expiry serves both.
///
/// A `bounded` operation (one started inside another's attempt) also reads the clock when its
/// attempt and its timer are both pending: see [`passed`].
pub(crate) fn race<'a, F: Future>(
    mut attempt: Pin<&'a mut F>,
    mut timer: Pin<&'a mut Timer>,
    clock: &'a Clock,
    expires: Ticks,
    bounded: bool,
) -> impl Future<Output = Option<F::Output>> + 'a {
    let mut armed = false;
    std::future::poll_fn(move |cx| {
        if let Poll::Ready(output) = bound::poll_within(clock, expires, attempt.as_mut(), cx) {
            return Poll::Ready(Some(output));
        }
        let mut arm = (!armed).then_some(|| clock.instant(expires));
        armed = true;
        let expired = if !tokio::task::coop::has_budget_remaining() {
            // The budget is used up (by the attempt, most likely): poll the timer outside it, as
            // tokio's timeout does, so the attempt cannot starve its own timeout. Unlike tokio's,
            // this does not first ask whether the budget was there before the attempt's poll: an
            // attempt that is ready at once then reads no thread-local at all, and a timeout that
            // fires although the task was out of budget before is still a correct timeout.
            let mut unconstrained = tokio::task::unconstrained(std::future::poll_fn(|cx| {
                poll_timer(timer.as_mut(), &mut arm, cx)
            }));
            Pin::new(&mut unconstrained).poll(cx)
        } else {
            poll_timer(timer.as_mut(), &mut arm, cx)
        };
        match expired {
            Poll::Pending if bounded && passed(clock.instant(expires)) => Poll::Ready(None),
            expired => expired.map(|()| None),
        }
    })
}

/// Waits until `at` on the timer; a `bounded` operation's wait also ends when the clock says `at`
/// has passed (see [`passed`]).
pub(crate) fn wait_until(
    mut timer: Pin<&mut Timer>,
    at: Instant,
    bounded: bool,
) -> impl Future<Output = ()> + '_ {
    let mut arm = Some(move || at);
    std::future::poll_fn(move |cx| match poll_timer(timer.as_mut(), &mut arm, cx) {
        Poll::Pending if bounded && passed(at) => Poll::Ready(()),
        ready => ready,
    })
}

/// As [`wait_until`], ending sooner if `woken` does (an operation in the bulkhead's queue, woken
/// when a slot frees).
pub(crate) fn wait_until_woken<'a>(
    timer: Pin<&'a mut Timer>,
    at: Instant,
    bounded: bool,
    mut woken: Pin<Box<impl Future<Output = ()> + 'a>>,
) -> impl Future<Output = ()> + 'a {
    let mut waited = wait_until(timer, at, bounded);
    std::future::poll_fn(move |cx| {
        if woken.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        // `wait_until`'s future holds only the pinned borrow of the timer: it is `Unpin`.
        Pin::new(&mut waited).poll(cx)
    })
}

/// Whether tokio's clock has reached `at`, whatever its timer says. For an operation started inside
/// another's attempt, whose last instant is that attempt's expiry: tokio fires the timers of a
/// millisecond under its driver's lock, and wakes their tasks 32 at a time with the lock released.
/// The outer attempt's timer may fire in one batch and the inner operation's, set to the same
/// instant, in the next; a worker that polls the task in between would see the outer attempt
/// expired and the inner operation still waiting, and time the outer attempt out, which is
/// retryable. Read here, the clock ends the inner operation first. Only such operations read it,
/// and only on a poll that finds both their attempt (or wait) and their timer pending.
fn passed(at: Instant) -> bool {
    Instant::now() >= at
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::time::Duration;

    use super::*;

    /// `d` after `clock`'s anchor, in ticks.
    fn tick(d: Duration) -> Ticks {
        Ticks::from_ticks(u64::try_from(d.as_micros()).unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_ready_at_its_first_poll_arms_no_timer() {
        let clock = Clock::starting_now();
        let mut timer = pin!(None);
        let attempt = pin!(std::future::ready(7));
        assert_eq!(race(attempt, timer.as_mut(), &clock, tick(Duration::from_secs(1)), false).await, Some(7));
        assert!(timer.is_none(), "a timer was created for an attempt that never waited");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pending_attempt_times_out_exactly_at_its_expiry() {
        let (clock, start) = (Clock::starting_now(), Instant::now());
        let mut timer = pin!(None);
        let attempt = pin!(std::future::pending::<u8>());
        assert_eq!(
            race(attempt, timer.as_mut(), &clock, tick(Duration::from_millis(2_500)), false).await,
            None
        );
        assert_eq!(Instant::now() - start, Duration::from_millis(2_500));
    }

    /// Polls `fut` once, from the task's own poll: no timer is processed in between.
    async fn poll_once<F: Future>(mut fut: Pin<&mut F>) -> Poll<F::Output> {
        std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
    }

    /// On the real clock, with the thread blocked past the expiry so that tokio's driver has not
    /// fired the timer yet: a bounded race and wait end by the clock at their next poll, and
    /// unbounded ones wait for their timer, as tokio's own timeout does.
    #[test]
    fn a_bounded_race_or_wait_ends_by_the_clock_before_its_timer_fires() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            for bounded in [false, true] {
                let (clock, start) = (Clock::starting_now(), Instant::now());
                let mut timer = pin!(None);
                let attempt = pin!(std::future::pending::<u8>());
                let mut raced =
                    pin!(race(attempt, timer.as_mut(), &clock, tick(Duration::from_millis(5)), bounded));
                assert!(poll_once(raced.as_mut()).await.is_pending(), "at first");
                std::thread::sleep(Duration::from_millis(10));
                let expected = if bounded { Poll::Ready(None) } else { Poll::Pending };
                assert_eq!(poll_once(raced.as_mut()).await, expected, "race, bounded: {bounded}");

                let mut timer = pin!(None);
                let mut waited = pin!(wait_until(timer.as_mut(), start + Duration::from_millis(15), bounded));
                assert!(poll_once(waited.as_mut()).await.is_pending(), "at first");
                std::thread::sleep(Duration::from_millis(10));
                let expected = if bounded { Poll::Ready(()) } else { Poll::Pending };
                assert_eq!(poll_once(waited.as_mut()).await, expected, "wait, bounded: {bounded}");
            }
        });
    }

    #[tokio::test(start_paused = true)]
    async fn one_timer_serves_an_attempt_a_backoff_and_the_next_attempt() {
        let (clock, start) = (Clock::starting_now(), Instant::now());
        let mut timer = pin!(None);
        // An attempt that answers after 1 s, under a 3 s timeout: it wins, and the timer it armed
        // (for 3 s) stays behind.
        let slow = pin!(async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            "answered"
        });
        assert_eq!(
            race(slow, timer.as_mut(), &clock, tick(Duration::from_secs(3)), false).await,
            Some("answered")
        );
        assert!(timer.is_some());
        // A backoff on the same timer ends at its own instant, not at the old 3 s.
        wait_until(timer.as_mut(), start + Duration::from_millis(1_200), false).await;
        assert_eq!(Instant::now() - start, Duration::from_millis(1_200));
        // And the next attempt's timeout at its own expiry, earlier than the first one's.
        let hung = pin!(std::future::pending::<&str>());
        assert_eq!(race(hung, timer.as_mut(), &clock, tick(Duration::from_millis(2_000)), false).await, None);
        assert_eq!(Instant::now() - start, Duration::from_millis(2_000));
        // A wait for an instant already past ends at once.
        wait_until(timer.as_mut(), start, false).await;
        assert_eq!(Instant::now() - start, Duration::from_millis(2_000));
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_uses_up_the_coop_budget_still_times_out() {
        // Every poll of this attempt spends the task's whole budget and wakes itself: a timer polled
        // within the budget would never see its expiry.
        let greedy = pin!(async {
            loop {
                tokio::task::consume_budget().await;
            }
        });
        let clock = Clock::starting_now();
        let mut timer = pin!(None);
        let expires = tick(Duration::from_millis(500));
        let mover = tokio::spawn(async {
            // The runtime is never idle while the attempt spins, so paused time does not advance by
            // itself: move it past the expiry, and past the guard's 60 s, which fires instead if
            // the attempt's timeout does not.
            tokio::time::advance(Duration::from_secs(61)).await;
        });
        let raced = tokio::time::timeout(
            Duration::from_secs(60),
            race(greedy, timer.as_mut(), &clock, expires, false),
        );
        assert_eq!(raced.await, Ok(None), "the attempt's timeout never fired");
        mover.await.unwrap();
    }
}
