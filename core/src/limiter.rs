//! The rate limiter: GCRA (the generic cell rate algorithm) in exact integer ticks.
//!
//! Every attempt, retries included, costs a unit (seed 003: "Every retry also costs a rate-limit
//! unit"), so a retry storm cannot exceed the rate a dependency was promised. GCRA keeps one instant,
//! the theoretical arrival time (TAT) of the next unit: a unit may go at `now` when
//! `TAT - tolerance <= now`, and taking it moves the TAT on by one emission interval. With `count`
//! units per `period` and a `burst`, the interval is `period / count` and the tolerance
//! `(burst - 1) × interval`, so in any span of `L` ticks at most `burst + L × count / period` units
//! are admitted.
//!
//! The interval is rarely a whole number of ticks (3 per second at 1 kHz is 333.3 ticks), so the
//! TAT is kept as whole ticks plus a remainder in `1 / count` of a tick: no drift, no rounding, no
//! floats. The configuration splits the interval and the burst tolerance into whole ticks and
//! remainders once, when it is built, so deciding and charging a unit are additions and
//! comparisons: no division on the hot path.
//!
//! Because GCRA knows when the next unit is due, the limiter can say when to try again, and with a
//! `max_wait` an attempt may reserve a unit that is due soon and wait for it (holding nothing else)
//! instead of being refused.

use crate::time::{Duration, Ticks, Wide};

/// A rate limit's configuration: `count` units per `period`, bursts of up to `burst`, and how long
/// an attempt may wait for a unit.
///
/// Every attempt, retries included, takes a unit. Three reads started together against 2 a second
/// with bursts of 2: two go at once, and the third is refused with the instant its unit is due
/// (with [`max_wait`](Self::max_wait) of at least 500 ms it would wait for it instead):
///
/// ```
/// use relent_core::{
///     Action, Context, Dependency, DependencyConfig, Disposition, Duration, Instant, Operation, Problem, RateLimit,
///     ReplaySafety, RetryPolicy, Verdict,
/// };
/// type D = Duration<1_000>;
///
/// let config = DependencyConfig::new(D::from_secs(10)).rate_limit(RateLimit::new(2, D::from_secs(1)).burst(2));
/// let once = RetryPolicy::<1_000>::single_attempt().build()?;
/// let now = Instant::from_ticks(0);
/// let mut quotes = Dependency::<1_000, 10>::new(&config, now)?;
/// let read = Context::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_secs(60)));
///
/// let mut ops = [0, 1, 2].map(|_| Operation::<1_000, Verdict<1_000>>::start(&once, &config, read, now));
/// let [Ok(a), Ok(b), Ok(c)] = &mut ops else { unreachable!("a single attempt starts") };
/// assert!(matches!(a.poll(now, &mut quotes, &mut ()), Action::Dispatch(_)));
/// assert!(matches!(b.poll(now, &mut quotes, &mut ()), Action::Dispatch(_)));
/// assert_eq!(c.poll(now, &mut quotes, &mut ()), Action::Done);
///
/// let refused = c.take_completion().unwrap();
/// assert_eq!((refused.disposition, refused.problem), (Disposition::Rejected, Some(Problem::RateLimited)));
/// assert_eq!(refused.not_before, Some(Instant::from_ticks(500)));
/// assert_eq!(quotes.next_rate_unit(&config, now), Instant::from_ticks(500));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RateLimit<const HZ: u64> {
    pub(crate) count: u32,
    pub(crate) period: Duration<HZ>,
    pub(crate) burst: u32,
    pub(crate) max_wait: Duration<HZ>,
    /// `period / count`: the emission interval.
    interval: Split,
    /// `(burst - 1) × period / count`: how far ahead of time the TAT may run.
    tolerance: Split,
}

/// A number of ticks as whole ticks plus `frac / count` of a tick, `frac < count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
struct Split {
    whole: Ticks,
    frac: u32,
}

impl Split {
    /// `scaled / count` ticks, where `scaled` is in `1 / count` of a tick.
    #[allow(clippy::cast_possible_truncation)] // each value is checked against its bound first
    const fn of(scaled: Wide, count: u32) -> Self {
        let count = if count == 0 { 1 } else { count as Wide };
        let whole = match scaled.checked_div(count) {
            Some(w) => w,
            None => 0,
        };
        let frac = match scaled.checked_rem(count) {
            Some(f) => f,
            None => 0,
        };
        Self {
            whole: if whole > Ticks::MAX as Wide { Ticks::MAX } else { whole as Ticks },
            // frac < count <= u32::MAX
            frac: if frac > u32::MAX as Wide { u32::MAX } else { frac as u32 },
        }
    }
}

impl<const HZ: u64> RateLimit<HZ> {
    /// `count` attempts per `period`, no burst beyond one unit, and no waiting: an attempt with no
    /// unit available is refused (`rate_limited`) with the instant the next unit is due.
    pub const fn new(count: u32, period: Duration<HZ>) -> Self {
        Self {
            count,
            period,
            burst: 1,
            max_wait: Duration::<HZ>::from_ticks(0),
            interval: Split::of(period.as_ticks() as Wide, count),
            tolerance: Split { whole: 0, frac: 0 },
        }
    }

    /// Allows bursts of up to `burst` attempts at once.
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        let extra = (burst as Wide).saturating_sub(1);
        self.tolerance = Split::of(extra.saturating_mul(self.period.as_ticks() as Wide), self.count);
        self
    }

    /// Lets an attempt reserve a unit due within `max_wait` and wait for it instead of being
    /// refused (the wait must also fit before the operation's deadline).
    #[must_use = "this returns the changed value and changes nothing in place"]
    pub const fn max_wait(mut self, max_wait: Duration<HZ>) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// Units per period.
    pub const fn count(&self) -> u32 {
        self.count
    }
    /// The period.
    pub const fn period(&self) -> Duration<HZ> {
        self.period
    }
    /// The largest burst.
    pub const fn burst_size(&self) -> u32 {
        self.burst
    }
    /// The longest an attempt may wait for a unit instead of being refused
    /// ([`max_wait`](Self::max_wait)); zero by default.
    pub const fn max_wait_time(&self) -> Duration<HZ> {
        self.max_wait
    }
}

/// The limiter's state: the TAT as whole ticks plus `frac / count` of a tick, and what it was
/// before the last unit was taken, for [`Limiter::give_back`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Limiter {
    tat: Ticks,
    frac: u32,
    /// The TAT before the last unit taken, while that take is the last change to it but for a
    /// give-back (and moved with it by a rebase); `Ticks::MAX` after a restore, or a new limit that
    /// moves the TAT or changes the unit of its fraction. A unit reserved ahead (for an attempt
    /// that waits for it, or for airtime) moves the TAT to its instant: without this, giving it
    /// back could only move the TAT back to that instant, and the limit stayed spent until then
    /// for a unit that never went.
    before: Ticks,
    before_frac: u32,
}

impl Limiter {
    pub(crate) const fn new() -> Self {
        Self { tat: 0, frac: 0, before: Ticks::MAX, before_frac: 0 }
    }

    /// Moves the theoretical arrival time `by` ticks earlier. One before the new clock's start is
    /// in the past either way, and a past arrival time allows a unit at once.
    pub(crate) fn rebase(&mut self, by: Ticks) {
        if self.tat < by {
            (self.tat, self.frac) = (0, 0);
        } else {
            self.tat = crate::time::earlier(self.tat, by);
        }
        // What the last take started from moves with it, where it is known.
        if self.before != Ticks::MAX {
            if self.before < by {
                (self.before, self.before_frac) = (0, 0);
            } else {
                self.before = crate::time::earlier(self.before, by);
            }
        }
    }

    /// The earliest tick at or after `now` at which a unit may go: the TAT less the tolerance,
    /// rounded up to a whole tick (a unit is never taken a fraction of a tick early).
    pub(crate) fn next_at<const HZ: u64>(&self, limit: &RateLimit<HZ>, now: Ticks) -> Ticks {
        let tol = limit.tolerance;
        // (tat, frac) - (tol.whole, tol.frac), borrowing a tick when the remainder runs short.
        let (whole, frac) = match self.frac.checked_sub(tol.frac) {
            Some(frac) => (self.tat.checked_sub(tol.whole), frac),
            None => (
                self.tat.checked_sub(tol.whole).and_then(|w| w.checked_sub(1)),
                self.frac.saturating_add(limit.count.max(1).saturating_sub(tol.frac)),
            ),
        };
        let Some(whole) = whole else {
            return now; // earlier than tick 0
        };
        let earliest = if frac > 0 { whole.saturating_add(1) } else { whole };
        earliest.max(now)
    }

    /// Gives back the unit [taken](Self::take) at `at` for an attempt that will not go out (its
    /// operation ended while it waited for it), when it is the last unit taken: the arrival time
    /// is then exactly where that take left it, from one no later than `at`, and goes back to what
    /// it was before the take. Where that is no longer known (another unit was given back since,
    /// or the limiter was restored or given a new limit), it goes back to `at`, never earlier than
    /// it was. After a later take the unit stays spent: moving the arrival time back then could let
    /// two units go closer together than the limit allows, so the rate errs low instead.
    pub(crate) fn give_back<const HZ: u64>(&mut self, limit: &RateLimit<HZ>, at: Ticks) {
        let mut taken = Self::new();
        taken.take(limit, at);
        // Matched, the arrival time before the take was no later than `at`: one recorded later is
        // not that one (a give-back since left `before` where the arrival time is now, past `at`).
        if (self.tat, self.frac) == (taken.tat, taken.frac) {
            (self.tat, self.frac) = if (self.before, self.before_frac) <= (at, 0) {
                (self.before, self.before_frac)
            } else {
                (at, 0)
            };
        }
    }

    /// Takes the unit due at `next_at(limit, now)`: the TAT moves on by one interval from itself,
    /// or from `now` if it had fallen behind.
    pub(crate) fn take<const HZ: u64>(&mut self, limit: &RateLimit<HZ>, now: Ticks) {
        (self.before, self.before_frac) = (self.tat, self.frac);
        if self.tat < now {
            (self.tat, self.frac) = (now, 0);
        }
        let count = limit.count.max(1);
        let frac = self.frac.saturating_add(limit.interval.frac);
        let (carry, frac) = if frac >= count { (1, frac.saturating_sub(count)) } else { (0, frac) };
        self.tat = self.tat.saturating_add(limit.interval.whole).saturating_add(carry);
        self.frac = frac;
    }
}

impl Limiter {
    /// The limiter carried from `from`'s limit to `to`'s at `now` (a reconfigured rate limit, see
    /// [`crate::Dependency::reconfigure`]). Its arrival time stays, so the units already taken
    /// count against the new limit, cut to the latest that units taken under `to` could have left
    /// it at `now` (its longest wait for a reserved unit, its tolerance and one interval ahead): a
    /// raised limit is not held to the debt the old one ran up. A unit reserved further ahead than
    /// that (for an attempt that waits for a duty cycle's airtime, whose wait is the policy's) is
    /// forgotten by the limiter; its attempt still goes at its instant. With another count, a
    /// fraction of a tick in the arrival time is rounded up to a whole tick, never down.
    pub(crate) fn carry<const HZ: u64>(&mut self, from: &RateLimit<HZ>, to: &RateLimit<HZ>, now: Ticks) {
        // What the last take started from stays for a give-back to restore while the arrival time
        // stays, and its fraction, if it has one, stays in the same unit.
        let was = (self.tat, self.frac);
        if from.count != to.count && self.frac > 0 {
            (self.tat, self.frac) = (self.tat.saturating_add(1), 0);
        }
        // Each fraction is below the count, so their sum carries at most one tick.
        let count = to.count.max(1);
        let frac = to.tolerance.frac.saturating_add(to.interval.frac);
        let (carry, frac) = if frac >= count { (1, frac.saturating_sub(count)) } else { (0, frac) };
        let latest = now
            .saturating_add(to.max_wait.as_ticks())
            .saturating_add(to.tolerance.whole)
            .saturating_add(to.interval.whole)
            .saturating_add(carry);
        if (self.tat, self.frac) > (latest, frac) {
            (self.tat, self.frac) = (latest, frac);
        }
        if (self.tat, self.frac) != was || (from.count != to.count && self.before_frac > 0) {
            self.before = Ticks::MAX;
        }
    }
}

impl Limiter {
    /// Bounds a limiter restored from a snapshot by `limit`, at `now`, for a snapshot saved under
    /// another limit (or bytes that pass the checksum but no limit wrote): a part of a tick that
    /// is not a part of `limit`'s count is rounded up to a whole tick, and the debt is cut as
    /// [`Limiter::carry`] cuts it. A limiter saved under `limit` itself is within both bounds.
    pub(crate) fn bound<const HZ: u64>(&mut self, limit: &RateLimit<HZ>, now: Ticks) {
        if self.frac >= limit.count {
            (self.tat, self.frac) = (self.tat.saturating_add(1), 0);
        }
        self.carry(limit, limit, now);
    }
}

impl Limiter {
    /// Bytes of a limiter in a snapshot: how far ahead its next arrival time was, and the remainder.
    pub(crate) const SNAPSHOT_LEN: usize = 12;

    /// How far the arrival time is ahead of `now`, with its fraction of a tick; none when it is
    /// behind `now`, where every arrival time allows a unit at once. An arrival time at `now` with
    /// a fraction is ahead, by the fraction.
    pub(crate) fn save(&self, w: &mut crate::snapshot::Writer<'_>, now: Ticks) {
        w.ticks(self.tat.saturating_sub(now));
        w.u32(if self.tat < now { 0 } else { self.frac });
    }

    /// The arrival time as far ahead of the new clock as it was of the old, less the sleep, to the
    /// fraction; one the sleep outlasted is behind, as it would have been without a snapshot.
    pub(crate) fn restore(r: &mut crate::snapshot::Reader<'_>, rebase: crate::snapshot::Rebase) -> Self {
        let (ahead, frac) = (r.ticks(), r.u32());
        match ahead.checked_sub(rebase.slept) {
            Some(left) if left > 0 || frac > 0 => {
                Self { tat: rebase.now.saturating_add(left), frac, ..Self::new() }
            }
            _ => Self::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 1_000;

    fn admitted_in_first_second(limit: RateLimit<HZ>) -> Vec<Ticks> {
        let mut l = Limiter::new();
        let mut admitted = Vec::new();
        for t in 0..1_000 {
            while l.next_at(&limit, t) == t {
                l.take(&limit, t);
                admitted.push(t);
            }
        }
        admitted
    }

    extern crate std;
    use std::vec::Vec;

    #[test]
    fn three_per_second_are_spaced_at_least_a_third_of_a_second_apart_in_whole_ticks() {
        let limit = RateLimit::<HZ>::new(3, Duration::<HZ>::from_secs(1));
        // The second unit is due at 333.33, so at tick 334 (never early); taken there, the third is
        // due 333.33 later, at 667.33, so at tick 668.
        assert_eq!(admitted_in_first_second(limit), [0, 334, 668]);
    }

    #[test]
    fn a_burst_is_admitted_at_once_then_the_rate_applies() {
        let limit = RateLimit::<HZ>::new(2, Duration::<HZ>::from_secs(1)).burst(3);
        assert_eq!(admitted_in_first_second(limit), [0, 0, 0, 500]);
    }

    #[test]
    fn the_limiter_says_when_the_next_unit_is_due() {
        let limit = RateLimit::<HZ>::new(1, Duration::<HZ>::from_secs(10));
        let mut l = Limiter::new();
        l.take(&limit, 5);
        assert_eq!(l.next_at(&limit, 6), 10_005);
        assert_eq!(l.next_at(&limit, 20_000), 20_000);
    }

    #[test]
    fn a_rebase_moves_every_due_time_earlier_by_its_ticks_fractions_included() {
        // The clock restarts `by` ticks on: whatever unit was due at `t + by` is due at `t` after
        // it, whether the arrival time is past the new start (its fraction kept), exactly at it,
        // or before it (forgotten: a unit is due at once).
        for limit in [
            RateLimit::<HZ>::new(3, Duration::<HZ>::from_ticks(10)),
            RateLimit::<HZ>::new(3, Duration::<HZ>::from_ticks(10)).burst(2),
        ] {
            for taken in 1..=4 {
                let mut before = Limiter::new();
                for _ in 0..taken {
                    before.take(&limit, 0);
                }
                for by in 0..=15 {
                    let mut after = before.clone();
                    after.rebase(by);
                    for t in 0..=15 {
                        assert_eq!(
                            after.next_at(&limit, t),
                            before.next_at(&limit, t + by) - by,
                            "{taken} taken at 0 ({before:?}), rebased by {by}, asked at {t}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_burst_whose_tolerance_passes_the_tick_range_saturates_and_lets_the_burst_through() {
        // (burst - 1) x period is far past `Ticks::MAX` here: the tolerance is the whole range,
        // not what is left of it after a wrap, so the burst goes at once.
        let limit = RateLimit::<HZ>::new(1, Duration::<HZ>::from_ticks(Ticks::MAX)).burst(u32::MAX);
        assert_eq!((limit.tolerance.whole, limit.tolerance.frac), (Ticks::MAX, 0));
        let mut l = Limiter::new();
        for _ in 0..3 {
            assert_eq!(l.next_at(&limit, 0), 0);
            l.take(&limit, 0);
        }
    }

    #[test]
    fn a_unit_taken_exactly_at_the_whole_tick_of_its_arrival_time_keeps_the_fraction() {
        // 3 per 10 ticks (3 1/3 apart), a burst of 2 (tolerance 3 1/3). Two at tick 0 put the
        // arrival time at 6 2/3. A third taken at tick 6 is within the burst, and the arrival time
        // moves on from 6 2/3, not from 6: to 10, so the next is due at 10 - 3 1/3, tick 7.
        let limit = RateLimit::<HZ>::new(3, Duration::<HZ>::from_ticks(10)).burst(2);
        let mut l = Limiter::new();
        l.take(&limit, 0);
        l.take(&limit, 0);
        assert_eq!(l.next_at(&limit, 0), 4);
        l.take(&limit, 6);
        assert_eq!(l.next_at(&limit, 6), 7);
    }

    #[test]
    fn a_snapshot_keeps_the_fraction_of_an_arrival_time_still_ahead() {
        use crate::snapshot::{Reader, Rebase, Writer};
        let limit = RateLimit::<HZ>::new(3, Duration::<HZ>::from_ticks(10));
        let mut l = Limiter::new();
        l.take(&limit, 0); // arrival time 3 1/3
        let mut buf = [0u8; Limiter::SNAPSHOT_LEN];
        l.save(&mut Writer::new(&mut buf), 1);
        let restored = Limiter::restore(&mut Reader::new(&buf), Rebase { now: 1, slept: 0 });
        assert_eq!((restored.tat, restored.frac), (l.tat, l.frac));
        assert_eq!(restored.next_at(&limit, 1), 4, "3 1/3, rounded up: not 3");
        // Saved once the arrival time has passed, there is nothing ahead, and no fraction either.
        l.save(&mut Writer::new(&mut buf), 5);
        let restored = Limiter::restore(&mut Reader::new(&buf), Rebase { now: 5, slept: 0 });
        assert_eq!((restored.tat, restored.frac), (0, 0));
    }

    #[test]
    // 65,000 steps, a minute and a half under miri, three times in CI; the same steps are checked
    // for overflow natively, and this code has no `unsafe` for miri to find fault with.
    #[cfg_attr(miri, ignore = "exhaustive over ticks: slow under miri, and checks no unsafe code")]
    fn a_snapshot_keeps_every_due_time_across_any_sleep_fractions_included() {
        // Saved at `saved`, restored `slept` later on a clock that reads `woke` then: every unit
        // is due as long after waking as it was due after `saved + slept` without the snapshot,
        // and each one taken after leaves the next due alike. Before this test, an arrival time
        // exactly at the save with a fraction of a tick was saved as none (a unit a tick early),
        // and one that the sleep outlasted kept its fraction (the next unit a tick late).
        use crate::snapshot::{Reader, Rebase, Writer};
        for limit in [
            RateLimit::<HZ>::new(3, Duration::<HZ>::from_ticks(10)),
            RateLimit::<HZ>::new(3, Duration::<HZ>::from_ticks(10)).burst(2),
        ] {
            // Arrival times at 3 1/3, 6 2/3, 10 and 13 1/3 ticks, saved before, at and after each,
            // and restored after sleeps shorter and longer than what remains of them.
            for taken in 1..=4 {
                let mut original = Limiter::new();
                for _ in 0..taken {
                    original.take(&limit, 0);
                }
                for (saved, slept, woke) in
                    (0..=15).flat_map(|s| (0..=15).flat_map(move |z| [(s, z, s + z), (s, z, 40)]))
                {
                    let mut buf = [0u8; Limiter::SNAPSHOT_LEN];
                    original.save(&mut Writer::new(&mut buf), saved);
                    let rebase = Rebase { now: woke, slept };
                    let mut restored = Limiter::restore(&mut Reader::new(&buf), rebase);
                    let mut before = original.clone();
                    let at = |t: Ticks| saved + slept + (t - woke);
                    for t in woke..=woke + 15 {
                        let case = || {
                            std::format!(
                                "{taken} taken at 0, saved at {saved}, slept {slept}, woke at {woke}, asked at {t}"
                            )
                        };
                        assert_eq!(
                            restored.next_at(&limit, t) - woke,
                            before.next_at(&limit, at(t)) - at(woke),
                            "{}",
                            case()
                        );
                        if t % 4 == 0 && restored.next_at(&limit, t) == t {
                            restored.take(&limit, t);
                            before.take(&limit, at(t));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_unit_reserved_ahead_and_given_back_leaves_the_limit_as_it_was() {
        // One unit per 100 ticks. A unit at 0; then, at 200, a unit reserved for 5,000 (an attempt
        // that waits for airtime until then).
        let limit = RateLimit::<HZ>::new(1, Duration::<HZ>::from_ticks(100));
        let mut l = Limiter::new();
        l.take(&limit, 0);
        l.take(&limit, 5_000);
        assert_eq!(l.next_at(&limit, 200), 5_100);
        // Its operation ends at 200 without it: a unit is due at once, as before the reservation.
        l.give_back(&limit, 5_000);
        assert_eq!((l.tat, l.frac, l.next_at(&limit, 200)), (100, 0, 200));
        // Given back twice, nothing moves: the unit taken at 0 is not the one reserved.
        l.give_back(&limit, 5_000);
        assert_eq!(l.tat, 100);
    }

    #[test]
    fn reservations_given_back_in_any_order_never_free_a_unit_taken_since() {
        let limit = RateLimit::<HZ>::new(1, Duration::<HZ>::from_ticks(100));
        let two = || {
            let mut l = Limiter::new();
            l.take(&limit, 0);
            l.take(&limit, 5_000); // reserved by a
            l.take(&limit, 9_000); // reserved by b
            l
        };
        // The later given back first goes back whole, to the arrival time a's left. a's then goes
        // back to its own instant: what it started from is no longer known, so the limit errs low
        // (a unit due at 5,000 rather than at once), and never stays spent past it.
        let mut l = two();
        l.give_back(&limit, 9_000);
        assert_eq!(l.next_at(&limit, 200), 5_100);
        l.give_back(&limit, 5_000);
        assert_eq!(l.next_at(&limit, 200), 5_000);
        // In the order taken, a's is not the last unit and stays spent; b's goes back to a's.
        let mut l = two();
        l.give_back(&limit, 5_000);
        assert_eq!(l.next_at(&limit, 200), 9_100);
        l.give_back(&limit, 9_000);
        assert_eq!(l.next_at(&limit, 200), 5_100);
        // A unit taken after a reservation keeps it spent: giving it back could let two go closer
        // together than the limit allows.
        let mut l = Limiter::new();
        l.take(&limit, 5_000);
        l.take(&limit, 200);
        l.give_back(&limit, 5_000);
        assert_eq!(l.next_at(&limit, 200), 5_200);
    }

    #[test]
    fn a_reservation_given_back_after_a_rebase_or_a_new_count_never_frees_more_than_it_took() {
        // A rebase moves what the last take started from with the arrival time; a new count whose
        // rounding moved the arrival time forgets it. (Units may be waited for up to 100 ticks,
        // so that no change cuts the reservation.)
        let limit =
            RateLimit::<HZ>::new(3, Duration::<HZ>::from_ticks(10)).max_wait(Duration::<HZ>::from_ticks(100));
        let mut l = Limiter::new();
        l.take(&limit, 0); // 3 1/3
        l.take(&limit, 50); // reserved for 50: 53 1/3
        let mut rebased = l.clone();
        rebased.rebase(2);
        rebased.give_back(&limit, 48);
        assert_eq!((rebased.tat, rebased.frac), (1, 1), "3 1/3, 2 ticks earlier");
        // Rebased past it, what it started from is as long ago as anything: tick 0.
        let mut rebased = l.clone();
        rebased.rebase(20);
        rebased.give_back(&limit, 30);
        assert_eq!((rebased.tat, rebased.frac), (0, 0));
        let four =
            RateLimit::<HZ>::new(4, Duration::<HZ>::from_ticks(10)).max_wait(Duration::<HZ>::from_ticks(100));
        let mut recounted = l.clone();
        recounted.carry(&limit, &four, 0);
        // 53 1/3 in thirds is rounded up to 54 in quarters: not what a take at 50 leaves, so the
        // unit stays spent.
        recounted.give_back(&four, 50);
        assert_eq!((recounted.tat, recounted.frac), (54, 0));
        // With the same count, the arrival time it started from is still known.
        let mut same = l.clone();
        same.carry(&limit, &limit, 0);
        same.give_back(&limit, 50);
        assert_eq!((same.tat, same.frac), (3, 1));
    }

    /// What the last take started from is kept only while it means what it meant: moved exactly to
    /// the new clock's start by a rebase, its fraction is kept, as the arrival time's is; and a
    /// change of limit that moves the arrival time (a debt cut), or that changes the count while
    /// it holds a fraction (thirds are not quarters), forgets it, so that a give-back goes back
    /// to the unit's instant instead.
    #[test]
    fn what_the_last_take_started_from_is_kept_only_while_it_means_what_it_meant() {
        let at = |tat, frac, before, before_frac| Limiter { tat, frac, before, before_frac };
        let mut rebased = at(300, 0, 100, 2);
        rebased.rebase(100);
        assert_eq!((rebased.before, rebased.before_frac), (0, 2));

        let thirds = RateLimit::<HZ>::new(3, Duration::<HZ>::from_ticks(1_000));
        let quarters = RateLimit::<HZ>::new(4, Duration::<HZ>::from_ticks(1_000))
            .max_wait(Duration::<HZ>::from_ticks(2_000));
        let mut recounted = at(1_000, 0, 600, 2);
        recounted.carry(&thirds, &quarters, 0);
        assert_eq!((recounted.tat, recounted.frac, recounted.before), (1_000, 0, Ticks::MAX));
        // A unit a quarter-second interval took at 750 is given back to 750, not to 600 and two
        // thirds read as two quarters.
        recounted.give_back(&quarters, 750);
        assert_eq!((recounted.tat, recounted.frac), (750, 0));

        let patient = RateLimit::<HZ>::new(20, Duration::<HZ>::from_ticks(1_000))
            .max_wait(Duration::<HZ>::from_ticks(1_000));
        let strict = RateLimit::<HZ>::new(20, Duration::<HZ>::from_ticks(1_000));
        let mut cut = at(250, 0, 0, 0);
        cut.carry(&patient, &strict, 100);
        assert_eq!((cut.tat, cut.before), (150, Ticks::MAX), "the debt cut to one interval ahead");
        cut.give_back(&strict, 100);
        assert_eq!((cut.tat, cut.frac), (100, 0));
    }

    #[test]
    fn the_end_of_time_saturates() {
        let limit = RateLimit::<HZ>::new(1, Duration::<HZ>::from_secs(10));
        let mut l = Limiter::new();
        l.take(&limit, Ticks::MAX - 1);
        assert_eq!(l.next_at(&limit, Ticks::MAX), Ticks::MAX);
    }
}
