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

use crate::time::Instant;

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
}

impl Counts {
    const ZERO: Self = Self {
        calls: 0,
        retries: 0,
        failures: 0,
    };

    fn plus(self, other: Self) -> Self {
        Self {
            calls: self.calls.saturating_add(other.calls),
            retries: self.retries.saturating_add(other.retries),
            failures: self.failures.saturating_add(other.failures),
        }
    }
}

/// A sliding window of [`Counts`] in `N` buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CallWindow<const N: usize> {
    /// Ticks per bucket, at least 1.
    width: u64,
    /// The absolute index (ticks / width) of the newest bucket.
    head: u64,
    buckets: [Counts; N],
}

impl<const N: usize> CallWindow<N> {
    /// `N` as u64, and a build error for `N == 0` (there is no window without a bucket).
    const SLOTS: u64 = {
        assert!(N > 0, "a CallWindow needs at least one bucket");
        N as u64
    };

    /// A window of `N` buckets, `width` ticks each, starting empty at `now`.
    pub(crate) const fn new<const HZ: u64>(width: u64, now: Instant<HZ>) -> Self {
        let width = if width == 0 { 1 } else { width };
        let head = match now.as_ticks().checked_div(width) {
            Some(h) => h,
            None => 0,
        };
        Self {
            width,
            head,
            buckets: [Counts::ZERO; N],
        }
    }

    /// Ticks per bucket.
    pub const fn bucket_width(&self) -> u64 {
        self.width
    }

    /// The first tick the window covers once it has been advanced to `now`.
    pub fn start<const HZ: u64>(&self, now: Instant<HZ>) -> u64 {
        let head = self.index(now).max(self.head);
        head.saturating_sub(Self::SLOTS.saturating_sub(1))
            .saturating_mul(self.width)
    }

    fn index<const HZ: u64>(&self, now: Instant<HZ>) -> u64 {
        now.as_ticks().checked_div(self.width).unwrap_or(0)
    }

    fn slot(&self, index: u64) -> usize {
        // index % N < N <= usize::MAX, so the conversion cannot fail.
        usize::try_from(index.checked_rem(Self::SLOTS).unwrap_or(0)).unwrap_or(0)
    }

    /// Moves the window to `now`, clearing buckets that fell out of it. An earlier `now` than
    /// one already seen counts as the newest bucket.
    fn advance<const HZ: u64>(&mut self, now: Instant<HZ>) {
        let index = self.index(now);
        let gap = index.saturating_sub(self.head);
        if gap == 0 {
            return;
        }
        if gap >= Self::SLOTS {
            self.buckets = [Counts::ZERO; N];
        } else {
            for step in 1..=gap {
                let slot = self.slot(self.head.saturating_add(step));
                if let Some(b) = self.buckets.get_mut(slot) {
                    *b = Counts::ZERO;
                }
            }
        }
        self.head = index;
    }

    /// Applies `f` to the newest bucket (the slot is always in range: it is an index modulo `N`).
    fn update_newest(&mut self, f: impl FnOnce(&mut Counts)) {
        let slot = self.slot(self.head);
        if let Some(b) = self.buckets.get_mut(slot) {
            f(b);
        }
    }

    /// The counts over the window at `now`.
    pub fn totals<const HZ: u64>(&mut self, now: Instant<HZ>) -> Counts {
        self.advance(now);
        self.buckets
            .iter()
            .fold(Counts::ZERO, |acc, b| acc.plus(*b))
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

    /// Counts one failed attempt.
    pub(crate) fn record_failure<const HZ: u64>(&mut self, now: Instant<HZ>) {
        self.advance(now);
        self.update_newest(|b| b.failures = b.failures.saturating_add(1));
    }
}
