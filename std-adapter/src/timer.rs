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
pub(crate) fn race<'a, F: Future>(
    mut attempt: Pin<&'a mut F>,
    mut timer: Pin<&'a mut Timer>,
    clock: &'a Clock,
    expires: Ticks,
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
        expired.map(|()| None)
    })
}

/// Waits until `at` on the timer.
pub(crate) fn wait_until(mut timer: Pin<&mut Timer>, at: Instant) -> impl Future<Output = ()> + '_ {
    let mut arm = Some(move || at);
    std::future::poll_fn(move |cx| poll_timer(timer.as_mut(), &mut arm, cx))
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
        assert_eq!(race(attempt, timer.as_mut(), &clock, tick(Duration::from_secs(1))).await, Some(7));
        assert!(timer.is_none(), "a timer was created for an attempt that never waited");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pending_attempt_times_out_exactly_at_its_expiry() {
        let (clock, start) = (Clock::starting_now(), Instant::now());
        let mut timer = pin!(None);
        let attempt = pin!(std::future::pending::<u8>());
        assert_eq!(race(attempt, timer.as_mut(), &clock, tick(Duration::from_millis(2_500))).await, None);
        assert_eq!(Instant::now() - start, Duration::from_millis(2_500));
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
        assert_eq!(race(slow, timer.as_mut(), &clock, tick(Duration::from_secs(3))).await, Some("answered"));
        assert!(timer.is_some());
        // A backoff on the same timer ends at its own instant, not at the old 3 s.
        wait_until(timer.as_mut(), start + Duration::from_millis(1_200)).await;
        assert_eq!(Instant::now() - start, Duration::from_millis(1_200));
        // And the next attempt's timeout at its own expiry, earlier than the first one's.
        let hung = pin!(std::future::pending::<&str>());
        assert_eq!(race(hung, timer.as_mut(), &clock, tick(Duration::from_millis(2_000))).await, None);
        assert_eq!(Instant::now() - start, Duration::from_millis(2_000));
        // A wait for an instant already past ends at once.
        wait_until(timer.as_mut(), start).await;
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
        let raced =
            tokio::time::timeout(Duration::from_secs(60), race(greedy, timer.as_mut(), &clock, expires));
        assert_eq!(raced.await, Ok(None), "the attempt's timeout never fired");
        mover.await.unwrap();
    }
}
