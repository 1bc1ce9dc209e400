//! The one window of counts a dependency keeps.
//!
//! Seed 000 ("The Retry Budget"): "the breaker is the same observation made formally, and the two
//! share a metric". So a dependency keeps a single sliding window of calls, retries and failures,
//! and every protection that needs a rate reads it: the ratio retry budget now, the circuit breaker
//! later. Two sets of counts would drift apart; one cannot.
//!
//! The window is time-based, in `N` fixed buckets of `window / N` ticks each (fixed memory, integer
//! math). It covers the current, partly elapsed bucket and the `N - 1` before it, so it slides in
//! steps of one bucket. Counts saturate instead of overflowing.
//!
//! Every retry decision and every breaker check reads the totals, so they are kept beside the
//! buckets and updated with them: reading is O(1), and the O(N) sum is redone only when the window
//! slides to a new bucket (once per bucket width at most). The kept totals are always exactly the
//! saturating sum of the buckets.

use crate::time::{Instant, Ticks};

/// Counts in one bucket or summed over the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Counts {
    /// Attempts dispatched, first attempts and retries alike.
    pub calls: u32,
    /// Of those, retries.
    pub retries: u32,
    /// Attempts reported as failed.
    pub failures: u32,
    /// Attempts the client throttle refused, which the dependency never saw (feature `throttle`):
    /// the throttle's requests are `calls + throttled`, its accepts `calls - failures`.
    #[cfg(feature = "throttle")]
    pub throttled: u32,
}

impl Counts {
    /// Calls, retries and failures, none refused by the throttle: a test's expected counts.
    #[cfg(test)]
    pub(crate) const fn of(calls: u32, retries: u32, failures: u32) -> Self {
        Self {
            calls,
            retries,
            failures,
            #[cfg(feature = "throttle")]
            throttled: 0,
        }
    }

    const ZERO: Self = Self {
        calls: 0,
        retries: 0,
        failures: 0,
        #[cfg(feature = "throttle")]
        throttled: 0,
    };

    fn plus(self, other: Self) -> Self {
        Self {
            calls: self.calls.saturating_add(other.calls),
            retries: self.retries.saturating_add(other.retries),
            failures: self.failures.saturating_add(other.failures),
            #[cfg(feature = "throttle")]
            throttled: self.throttled.saturating_add(other.throttled),
        }
    }
}

/// A sliding window of [`Counts`] in `N` buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CallWindow<const N: usize> {
    /// Ticks per bucket, at least 1.
    width: Ticks,
    /// The instant the newest bucket began: a multiple of `width` on the clock the window started
    /// on, and kept relative (not an absolute index) so that [`CallWindow::rebase`] is exact.
    head_start: Ticks,
    /// Where the newest bucket is in `buckets`, always below `N`.
    head_slot: u16,
    buckets: [Counts; N],
    /// The saturating sum of `buckets`.
    total: Counts,
}

impl<const N: usize> CallWindow<N> {
    /// `N` as [`Ticks`], and a build error for `N == 0` (there is no window without a bucket)
    /// or for more buckets than ticks can count.
    #[allow(clippy::cast_possible_truncation)]
    pub(crate) const SLOTS: Ticks = {
        assert!(N > 0, "a CallWindow needs at least one bucket");
        assert!(N <= u16::MAX as usize, "a CallWindow has at most 65,535 buckets");
        N as Ticks
    };

    /// A window of `N` buckets, `width` ticks each, starting empty at `now`.
    pub(crate) const fn new<const HZ: u64>(width: Ticks, now: Instant<HZ>) -> Self {
        Self::starting(width, now.as_ticks())
    }

    /// A window of `N` buckets, `width` ticks each, starting empty at tick `now`, its buckets
    /// aligned on multiples of `width`.
    const fn starting(width: Ticks, now: Ticks) -> Self {
        let width = if width == 0 { 1 } else { width };
        let head_start = match now.checked_rem(width) {
            Some(r) => now.saturating_sub(r),
            None => 0,
        };
        Self { width, head_start, head_slot: 0, buckets: [Counts::ZERO; N], total: Counts::ZERO }
    }

    /// Ticks per bucket.
    pub const fn bucket_width(&self) -> Ticks {
        self.width
    }

    /// The slot `back` buckets before the newest (always in range: an index modulo `N`).
    fn slot_back(&self, back: Ticks) -> usize {
        let n = Self::SLOTS;
        let back = back.checked_rem(n).unwrap_or(0);
        let head = Ticks::from(self.head_slot);
        // head < n and back < n, so head + n - back < 2n and the result is below n.
        let slot = head.saturating_add(n).saturating_sub(back).checked_rem(n).unwrap_or(0);
        usize::try_from(slot).unwrap_or(0)
    }

    /// Moves the window to `now`, clearing buckets that fell out of it. An earlier `now` than
    /// one already seen counts as the newest bucket.
    // On a host, this check is inlined at each caller and the slide stays out of line (it runs
    // once per bucket width). On bare metal the compiler chooses: forcing that split there cost
    // 0.6 KiB of flash on a Cortex-M3.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn advance<const HZ: u64>(&mut self, now: Instant<HZ>) {
        // Within the newest bucket (or earlier): nothing moves. The common case.
        let since = now.as_ticks().saturating_sub(self.head_start);
        if since < self.width {
            return;
        }
        self.slide(since);
    }

    /// Slides the window forward by the whole buckets in `since` ticks past the newest's start.
    #[cfg_attr(not(target_os = "none"), inline(never))]
    fn slide(&mut self, since: Ticks) {
        let gap = since.checked_div(self.width).unwrap_or(0);
        // The buckets after the newest are the oldest: the window slides onto them one at a time,
        // clearing each, all N of them at most. Past N every bucket is clear, so where the newest
        // then sits changes nothing (one loop, no division: on a Cortex-M, clearing the whole array
        // at once links a memset of its own).
        let mut slot = self.head_slot;
        for _ in 0..gap.min(Self::SLOTS) {
            // Below N <= u16::MAX before the step, so the step cannot wrap.
            slot = slot.wrapping_add(1);
            if usize::from(slot) >= N {
                slot = 0;
            }
            if let Some(b) = self.buckets.get_mut(usize::from(slot)) {
                *b = Counts::ZERO;
            }
        }
        self.head_slot = slot;
        // gap × width <= since = now - head_start, so neither operation can wrap, and the newest
        // bucket begins at or before now.
        self.head_start = self.head_start.wrapping_add(gap.wrapping_mul(self.width));
        self.total = self.sum();
    }

    /// Counts on in buckets `width` ticks wide from `now` (a window reconfigured to another length,
    /// see [`crate::Dependency::reconfigure`]). The window first slides to `now` at its old width,
    /// dropping what fell out of it; the counts left stay in their buckets, the newest bucket now
    /// beginning at `now`'s multiple of the new width, and each older one ageing out a new width
    /// after the one after it. So a lengthened window keeps what it counted for longer, and a
    /// shortened one forgets it sooner, and the totals do not change at the moment of the change.
    pub(crate) fn resize<const HZ: u64>(&mut self, width: Ticks, now: Instant<HZ>) {
        self.advance(now);
        let aligned = Self::starting(width, now.as_ticks());
        (self.width, self.head_start) = (aligned.width, aligned.head_start);
    }

    /// Moves every instant the window holds `by` ticks earlier (see [`crate::Dependency::rebase`]).
    /// A newest bucket that began more than `by` ticks ago begins at tick 0 instead: it is older
    /// than any window the core accepts once `now` is at least a window past `by`.
    pub(crate) fn rebase(&mut self, by: Ticks) {
        self.head_start = crate::time::earlier(self.head_start, by);
    }

    fn sum(&self) -> Counts {
        self.buckets.iter().fold(Counts::ZERO, |acc, b| acc.plus(*b))
    }

    /// Applies `f` to the newest bucket (the slot is always in range: it is an index modulo `N`).
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn update_newest(&mut self, f: impl Fn(&mut Counts)) {
        if let Some(b) = self.buckets.get_mut(usize::from(self.head_slot)) {
            f(b);
            // A saturating increment of the sum is the sum of the incremented buckets.
            f(&mut self.total);
        }
    }

    /// The counts over the window at `now`.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn totals<const HZ: u64>(&mut self, now: Instant<HZ>) -> Counts {
        self.advance(now);
        self.total
    }

    /// The counts over the window at `now`, for a caller that has just moved it there by counting
    /// at `now`: read without checking the newest bucket's start again (the decision after a
    /// failure did that three times).
    pub(crate) fn totals_as_moved<const HZ: u64>(&self, now: Instant<HZ>) -> Counts {
        debug_assert!(
            now.as_ticks().saturating_sub(self.head_start) < self.width,
            "the window was not moved to this instant"
        );
        self.total
    }

    /// Counts one dispatched attempt.
    pub(crate) fn record_call<const HZ: u64>(&mut self, now: Instant<HZ>, retry: bool) {
        self.advance(now);
        self.update_newest(|b| {
            b.calls = b.calls.saturating_add(1);
            if retry {
                b.retries = b.retries.saturating_add(1);
            }
        });
    }

    /// Forgets every failure in the window (calls and retries stay): a circuit that closes starts
    /// afresh instead of re-opening on the failures that opened it.
    pub(crate) fn clear_failures(&mut self) {
        for b in &mut self.buckets {
            b.failures = 0;
        }
        self.total.failures = 0;
    }

    /// Counts one attempt the client throttle refused.
    #[cfg(feature = "throttle")]
    pub(crate) fn record_throttled<const HZ: u64>(&mut self, now: Instant<HZ>) {
        self.advance(now);
        self.update_newest(|b| b.throttled = b.throttled.saturating_add(1));
    }

    /// Counts one failed attempt, and returns the counts over the window at `now` with it.
    pub(crate) fn record_failure<const HZ: u64>(&mut self, now: Instant<HZ>) -> Counts {
        self.advance(now);
        self.update_newest(|b| b.failures = b.failures.saturating_add(1));
        self.total
    }
}

impl<const N: usize> CallWindow<N> {
    /// Bytes of the window in a snapshot: its bucket width (a snapshot read with another window is
    /// refused), how long ago the newest bucket began, then each bucket's counts, newest first
    /// (calls, retries, failures, and with feature `throttle` the attempts it refused).
    pub(crate) const SNAPSHOT_LEN: usize = 16 + N * Self::BUCKET_LEN;
    const BUCKET_LEN: usize = if cfg!(feature = "throttle") { 16 } else { 12 };

    pub(crate) fn save(&self, w: &mut crate::snapshot::Writer<'_>, now: Ticks) {
        w.ticks(self.width);
        w.ticks(now.saturating_sub(self.head_start));
        for back in 0..Self::SLOTS {
            let counts = self.buckets.get(self.slot_back(back)).copied().unwrap_or(Counts::ZERO);
            w.u32(counts.calls);
            w.u32(counts.retries);
            w.u32(counts.failures);
            #[cfg(feature = "throttle")]
            w.u32(counts.throttled);
        }
    }

    /// Places each saved bucket where its start falls on the new clock. Buckets that began before
    /// the new clock's tick 0 (a device that slept and restarted its counter) cannot be placed and
    /// are dropped: the window forgets some history, never invents any.
    pub(crate) fn restore(
        r: &mut crate::snapshot::Reader<'_>,
        rebase: crate::snapshot::Rebase,
        width: Ticks,
    ) -> Result<Self, crate::snapshot::SnapshotError> {
        if r.ticks() != width {
            return Err(crate::snapshot::SnapshotError::OtherConfig);
        }
        let newest_age = r.ticks();
        let mut window = Self::starting(width, rebase.now);
        let head = rebase.now.checked_div(width).unwrap_or(0);
        for back in 0..Self::SLOTS {
            let counts = Counts {
                calls: r.u32(),
                retries: r.u32(),
                failures: r.u32(),
                #[cfg(feature = "throttle")]
                throttled: r.u32(),
            };
            let age = newest_age.saturating_add(back.saturating_mul(width)).saturating_add(rebase.slept);
            let Some(start) = rebase.now.checked_sub(age) else { continue };
            // How many buckets before the newest this one began.
            let behind = head.saturating_sub(start.checked_div(width).unwrap_or(0));
            if behind >= Self::SLOTS {
                continue;
            }
            let slot = window.slot_back(behind);
            if let Some(b) = window.buckets.get_mut(slot) {
                *b = b.plus(counts);
            }
        }
        window.total = window.sum();
        Ok(window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type I = Instant<1_000>;

    fn window() -> CallWindow<4> {
        // 4 buckets of 1 s: a 4 s window.
        CallWindow::new(1_000, I::from_ticks(0))
    }

    #[test]
    fn counts_stay_while_their_bucket_is_in_the_window_and_leave_with_it() {
        let mut w = window();
        w.record_call(I::from_ticks(100), false);
        w.record_call(I::from_ticks(1_500), true);
        w.record_failure(I::from_ticks(1_600));
        assert_eq!(w.totals(I::from_ticks(3_999)), Counts::of(2, 1, 1));
        // At 4.0 s the bucket [0, 1) has slid out; [1, 2) is still in.
        assert_eq!(w.totals(I::from_ticks(4_000)), Counts::of(1, 1, 1));
        assert_eq!(w.totals(I::from_ticks(5_000)), Counts::ZERO);
    }

    #[test]
    fn the_kept_totals_are_always_the_sum_of_the_buckets() {
        let mut w = window();
        let mut t = 0;
        // A quarter of the steps under miri (CI runs it on three targets), still past 4 clears.
        let steps: u16 = if cfg!(miri) { 500 } else { 2_000 };
        for step in 0..Ticks::from(steps) {
            t += (step * 7_919) % 1_300;
            match step % 5 {
                0 | 1 => w.record_call(I::from_ticks(t), step % 2 == 0),
                2 => {
                    w.record_failure(I::from_ticks(t));
                }
                3 if step % 97 == 0 => w.clear_failures(),
                #[cfg(feature = "throttle")]
                4 => w.record_throttled(I::from_ticks(t)),
                _ => {}
            }
            let kept = w.totals(I::from_ticks(t));
            assert_eq!(kept, w.sum(), "at step {step}, t = {t}");
            assert_eq!(kept, w.buckets.iter().fold(Counts::ZERO, |a, b| a.plus(*b)));
        }
    }

    #[test]
    fn a_gap_longer_than_the_window_clears_every_bucket() {
        let mut w = window();
        for t in [0, 1_000, 2_000, 3_000] {
            w.record_call(I::from_ticks(t), false);
        }
        assert_eq!(w.totals(I::from_ticks(3_000)).calls, 4);
        assert_eq!(w.totals(I::from_ticks(1_000_000)).calls, 0);
    }

    #[test]
    fn an_earlier_now_counts_in_the_newest_bucket() {
        let mut w = window();
        w.record_call(I::from_ticks(3_500), false);
        w.record_call(I::from_ticks(10), false);
        assert_eq!(w.totals(I::from_ticks(3_600)).calls, 2);
        assert_eq!(w.totals(I::from_ticks(7_000)).calls, 0);
    }

    #[test]
    fn the_window_works_at_the_end_of_time() {
        let mut w: CallWindow<4> = CallWindow::new(1_000, I::from_ticks(Ticks::MAX - 5_000));
        w.record_call(I::from_ticks(Ticks::MAX - 10), true);
        w.record_call(I::from_ticks(Ticks::MAX), false);
        assert_eq!(w.totals(I::from_ticks(Ticks::MAX)), Counts::of(2, 1, 0));
    }

    #[test]
    fn counts_saturate_instead_of_overflowing() {
        let mut w = window();
        w.update_newest(|b| b.calls = u32::MAX);
        w.record_call(I::from_ticks(0), false);
        assert_eq!(w.totals(I::from_ticks(0)).calls, u32::MAX);
    }
}
