//! Retry budgets: what a dependency lets all of its callers spend on retries, together.
//!
//! A per-operation attempt limit bounds what one request does to a dependency; it does not bound
//! what the service does. At 100 requests a second a limit of 3 is up to 300 calls a second
//! against a provider that was already failing at 100 (seed 000, "The Retry Budget"). A budget is
//! the service-wide view, and a policy that allows retries must have one (seed 003: "retries must
//! be paid for so a failing dependency is not hammered"). Two shapes are offered, one from each
//! seed:
//!
//! - **Ratio** (seed 000, after the Google SRE book, ch. 21): retries may be at most `percent` of
//!   all calls to the dependency over its counting window (10 % over 10 s in seed 000), plus a
//!   `floor` of retries per window so a quiet dependency, with too few calls for 10 % to be even
//!   one, can still retry. A retry is allowed when, counting itself as a call,
//!   `retries + 1 <= floor + percent × (calls + 1) / 100`. With no floor, retries can never exceed
//!   `percent` of calls, so calls per first attempt stay at or under `100 / (100 - percent)`
//!   (1.11× for 10 %).
//! - **Token bucket** (seed 003): an absolute pool of `capacity` tokens refilled by `refill` every
//!   `period`, exactly, in integer ticks. A retry takes a *reservation* when it is dispatched; the
//!   reservation is settled (the token spent) when the attempt's outcome is reported. A
//!   reservation whose attempt is never reported (its future was dropped) lapses after `hold`, and
//!   its token returns. Seed 003's rule, that the hold exceed the attempt timeout by more than 1 s,
//!   keeps a reservation from lapsing while its attempt is still running (which would let two
//!   retries spend one token); it is checked by
//!   [`RetryPolicy::check_budget`](crate::RetryPolicy::check_budget) and by
//!   [`Operation::start`](crate::Operation::start).
//!
//! When the budget refuses, the attempt in hand is the last one, and the operation completes with
//! `retry_budget_exhausted`.

use crate::error::ConfigError;
use crate::packed::U64;
use crate::time::{Duration, Ticks, wide};
use crate::window::Counts;

/// A retry budget's configuration. The state it governs lives in a
/// [`Dependency`](crate::Dependency).
///
/// A policy of more than one attempt needs one: retries must be paid for, so a failing
/// dependency is not hammered. Two shapes, one from each seed:
///
/// ```
/// use relent_core::{BudgetKind, ConfigError, Duration, RetryBudget, RetryPolicy};
/// type D = Duration<1_000>;
///
/// // Seed 000: retries at most 10 % of the calls in the dependency's window, plus 5 per window
/// // so that a quiet dependency can still retry.
/// let ratio = RetryBudget::<1_000>::ratio(10, 5)?;
/// assert_eq!(ratio.kind(), BudgetKind::Ratio { percent: 10, floor: 5 });
///
/// // Seed 003: a pool of 10 tokens, 10 more a minute. A dispatched retry reserves a token, spent
/// // when its outcome is reported; one never reported (its future dropped) returns after 10 s.
/// let bucket = RetryBudget::<1_000>::token_bucket(10, 10, D::from_secs(60), D::from_secs(10))?;
/// assert_eq!(bucket.hold(), Some(D::from_secs(10)));
///
/// // The hold must outlast an attempt by more than 1 s (seed 003), or a reservation could lapse
/// // while its attempt still runs, and two retries spend one token. Checked at start too.
/// let slow = RetryPolicy::<1_000>::exponential(3, D::from_millis(100), D::from_secs(2))
///     .attempt_timeout(D::from_secs(9))
///     .build()?;
/// assert_eq!(slow.check_budget(&bucket), Err(ConfigError::BudgetHoldTooShort));
/// assert_eq!(slow.check_budget(&ratio), Ok(()));
///
/// assert_eq!(RetryBudget::<1_000>::ratio(110, 0), Err(ConfigError::BudgetPercentOutOfRange));
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RetryBudget<const HZ: u64> {
    kind: BudgetKind<HZ>,
}

/// The two shapes of budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BudgetKind<const HZ: u64> {
    /// Retries at most `percent` of all calls over the dependency's window, plus `floor`.
    Ratio {
        /// 0..=100.
        percent: u8,
        /// Retries allowed per window whatever the ratio says.
        floor: u32,
    },
    /// An absolute pool of tokens.
    TokenBucket {
        /// Most tokens held.
        capacity: u32,
        /// Tokens added per `period`.
        refill: u32,
        /// The refill period.
        period: Duration<HZ>,
        /// How long a reservation is held before it lapses.
        hold: Duration<HZ>,
    },
}

impl<const HZ: u64> RetryBudget<HZ> {
    /// Retries at most `percent` of all calls over the dependency's window, plus `floor` retries
    /// per window. Seed 000: `ratio(10, floor)` with a 10 s window.
    pub const fn ratio(percent: u8, floor: u32) -> Result<Self, ConfigError> {
        if percent > 100 {
            return Err(ConfigError::BudgetPercentOutOfRange);
        }
        Ok(Self { kind: BudgetKind::Ratio { percent, floor } })
    }

    /// A pool of `capacity` tokens, `refill` more every `period`, reservations held for `hold`.
    /// Seed 003: `token_bucket(10, 10, 60 s, 10 s)`.
    #[cfg(feature = "token-bucket")]
    pub const fn token_bucket(
        capacity: u32,
        refill: u32,
        period: Duration<HZ>,
        hold: Duration<HZ>,
    ) -> Result<Self, ConfigError> {
        if capacity == 0 {
            return Err(ConfigError::ZeroBudgetCapacity);
        }
        if refill == 0 {
            return Err(ConfigError::ZeroBudgetRefill);
        }
        if period.as_ticks() == 0 {
            return Err(ConfigError::ZeroBudgetPeriod);
        }
        if (capacity as u64).checked_mul(wide(period.as_ticks())).is_none() {
            return Err(ConfigError::BudgetTooLargeForTickRate);
        }
        Ok(Self { kind: BudgetKind::TokenBucket { capacity, refill, period, hold } })
    }

    /// The budget's shape and numbers.
    pub const fn kind(&self) -> BudgetKind<HZ> {
        self.kind
    }

    /// The reservation hold of a token bucket; `None` for a ratio budget.
    pub const fn hold(&self) -> Option<Duration<HZ>> {
        match self.kind {
            BudgetKind::TokenBucket { hold, .. } => Some(hold),
            BudgetKind::Ratio { .. } => None,
        }
    }
}

/// Whether a ratio budget allows one more retry given the window's counts (see the module doc).
pub(crate) const fn ratio_allows(counts: Counts, percent: u8, floor: u32) -> bool {
    // Without a 32 × 32 → 64-bit multiply (a Cortex-M0 calls a 64 × 64 routine for each of the three
    // products below), counts that fit are compared in 32-bit words.
    if crate::mul::NO_WIDE_MULTIPLY {
        if let Some(allows) = ratio_allows_small(counts, percent, floor) {
            return allows;
        }
    }
    let retries = (counts.retries as u64).saturating_add(1);
    let calls = (counts.calls as u64).saturating_add(1);
    let allowance = (floor as u64).saturating_mul(100).saturating_add((percent as u64).saturating_mul(calls));
    retries.saturating_mul(100) <= allowance
}

/// [`ratio_allows`] for an attempt held back from `held_back` percent of the budget (sheddable
/// work, [`crate::Criticality`]): the retries, this one included, must stay within `100 -
/// held_back` percent of the allowance, exactly (`100 × 100 × retries <= (100 - held_back) ×
/// allowance`, in 64 bits). The whole allowance for `held_back` 0.
#[inline(always)]
pub(crate) const fn ratio_allows_share(counts: Counts, percent: u8, floor: u32, held_back: u8) -> bool {
    if held_back == 0 {
        return ratio_allows(counts, percent, floor);
    }
    let retries = (counts.retries as u64).saturating_add(1);
    let calls = (counts.calls as u64).saturating_add(1);
    let allowance = (floor as u64).saturating_mul(100).saturating_add((percent as u64).saturating_mul(calls));
    let kept = 100u64.saturating_sub(held_back as u64);
    retries.saturating_mul(100 * 100) <= allowance.saturating_mul(kept)
}

/// [`ratio_allows`] in 32-bit words, when the counts and the floor are below 2^23 (8 million, far
/// more than a window holds at thousands of calls a second); `None` otherwise.
#[inline(always)]
pub(crate) const fn ratio_allows_small(counts: Counts, percent: u8, floor: u32) -> Option<bool> {
    const SMALL: u32 = 1 << 23;
    if counts.retries | counts.calls | floor >= SMALL {
        return None;
    }
    // 100 × 2^23 + 255 × 2^23 < 2^32: no product or sum below wraps.
    let retries = counts.retries.wrapping_add(1).wrapping_mul(100);
    let allowance =
        floor.wrapping_mul(100).wrapping_add((percent as u32).wrapping_mul(counts.calls.wrapping_add(1)));
    Some(retries <= allowance)
}

/// How many retries in a row [`ratio_allows`] would admit, each also counted as a call: the
/// largest `k` with `100 × (retries + k) <= 100 × floor + percent × (calls + k)`.
pub(crate) fn ratio_headroom(counts: Counts, percent: u8, floor: u32) -> u32 {
    let room = ((floor as u64).saturating_mul(100))
        .saturating_add((percent as u64).saturating_mul(counts.calls as u64));
    let used = (counts.retries as u64).saturating_mul(100);
    let Some(slack) = room.checked_sub(used) else {
        return 0;
    };
    // Each further retry costs 100 - percent of slack; at 100 % it costs nothing.
    let per_retry = 100u64.saturating_sub(percent as u64);
    let k = slack.checked_div(per_retry).unwrap_or(u64::MAX);
    u32::try_from(k).unwrap_or(u32::MAX)
}

/// A token held by a dispatched retry until its outcome is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Reservation {
    epoch: u32,
}

impl Reservation {
    /// The epoch it was taken in (a ticket carries it packed).
    pub(crate) const fn epoch(self) -> u32 {
        self.epoch
    }
    pub(crate) const fn of_epoch(epoch: u32) -> Self {
        Self { epoch }
    }
}

/// A token bucket's numbers, in ticks, as its state's methods read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    capacity: u32,
    refill: u32,
    period: Ticks,
    hold: Ticks,
}

impl Bucket {
    /// The tokens an attempt held back by `held_back` percent may not use: the capacity less its
    /// share ([`crate::Criticality`]); none for critical work.
    #[inline(always)]
    pub(crate) fn held_back_tokens(&self, held_back: u8) -> u32 {
        #[cfg(feature = "criticality")]
        if held_back > 0 {
            return self.capacity.saturating_sub(crate::criticality::share(self.capacity, held_back));
        }
        let _ = held_back;
        0
    }
}

impl<const HZ: u64> RetryBudget<HZ> {
    /// The token bucket's numbers, or `None` for a ratio budget.
    pub(crate) const fn bucket(&self) -> Option<Bucket> {
        if !cfg!(feature = "token-bucket") {
            return None;
        }
        match self.kind {
            BudgetKind::TokenBucket { capacity, refill, period, hold } => {
                Some(Bucket { capacity, refill, period: period.as_ticks(), hold: hold.as_ticks() })
            }
            BudgetKind::Ratio { .. } => None,
        }
    }
}

/// A token bucket's state, in exact integer "credit": one token is `period` credit, and every
/// elapsed tick adds `refill` credit, so refill never drifts or rounds. The numbers that do not
/// change live in the configuration ([`Bucket`]), not here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct TokenBucket {
    /// Wide enough for `capacity × period` at any tick width.
    credit: U64,
    updated: Ticks,
    lapse_at: Ticks,
    reserved: u32,
    epoch: u32,
}

impl TokenBucket {
    /// A full bucket at tick `now` (an empty one, for a ratio budget, which never reads it).
    #[cfg_attr(not(feature = "token-bucket"), allow(dead_code))]
    pub(crate) const fn new(bucket: Option<Bucket>, now: Ticks) -> Self {
        let credit = match bucket {
            Some(b) => (b.capacity as u64).saturating_mul(wide(b.period)),
            None => 0,
        };
        Self { credit: U64::of(credit), updated: now, lapse_at: 0, reserved: 0, epoch: 0 }
    }

    fn catch_up(&mut self, b: &Bucket, now: Ticks) {
        let elapsed = now.saturating_sub(self.updated);
        let full = u64::from(b.capacity).saturating_mul(wide(b.period));
        let credit = self.credit.get().saturating_add(wide(elapsed).saturating_mul(u64::from(b.refill)));
        self.credit = U64::of(credit.min(full));
        self.updated = self.updated.max(now);
        if self.reserved > 0 && now >= self.lapse_at {
            // Every outstanding reservation was made with an expiry at or before lapse_at, so all
            // of them have lapsed: their tokens return. A late settle still spends its token.
            self.reserved = 0;
            self.epoch = self.epoch.wrapping_add(1);
        }
    }

    /// Moves the bucket's instants `by` ticks earlier. A bucket last brought up to date before the
    /// new clock's start counts its refill from tick 0: it may hold less credit than it earned,
    /// never more (only a bucket idle for longer than `by` ticks, which has refilled anyway unless
    /// its refill takes longer than that).
    pub(crate) fn rebase(&mut self, by: Ticks) {
        self.updated = crate::time::earlier(self.updated, by);
        self.lapse_at = crate::time::earlier(self.lapse_at, by);
    }

    /// Whole tokens neither spent nor reserved at `now`.
    pub(crate) fn available(&mut self, b: &Bucket, now: Ticks) -> u32 {
        self.catch_up(b, now);
        let whole = self.credit.get().checked_div(wide(b.period)).unwrap_or(0);
        u32::try_from(whole).unwrap_or(u32::MAX).saturating_sub(self.reserved)
    }

    /// Reserves a token for a retry if more than `keep` are available (`keep`: the tokens the
    /// attempt may not use, [`Bucket::held_back_tokens`]).
    pub(crate) fn reserve(&mut self, b: &Bucket, now: Ticks, keep: u32) -> Option<Reservation> {
        if self.available(b, now) <= keep {
            return None;
        }
        self.reserved = self.reserved.saturating_add(1);
        self.lapse_at = self.lapse_at.max(now.saturating_add(b.hold));
        Some(Reservation { epoch: self.epoch })
    }

    /// The bucket carried from `from`'s numbers to `to`'s at `now` (a reconfigured budget, see
    /// [`crate::Dependency::reconfigure`]): the whole tokens it held, at most `to`'s capacity; a
    /// part of a token earned towards the next is dropped, never rounded up. Reservations of
    /// attempts in flight stay reserved, and lapse when they would have.
    pub(crate) fn carry(&mut self, from: &Bucket, to: &Bucket, now: Ticks) {
        self.catch_up(from, now);
        let whole = self.credit.get().checked_div(wide(from.period)).unwrap_or(0);
        let whole = whole.min(u64::from(to.capacity));
        self.credit = U64::of(whole.saturating_mul(wide(to.period)));
    }

    pub(crate) fn settle(&mut self, b: &Bucket, reservation: Reservation, now: Ticks) {
        self.catch_up(b, now);
        if reservation.epoch == self.epoch {
            self.reserved = self.reserved.saturating_sub(1);
        }
        self.credit = U64::of(self.credit.get().saturating_sub(wide(b.period)));
    }
}

impl TokenBucket {
    /// Bytes of a token bucket in a snapshot: its credit and how long ago it was last brought up
    /// to date. Reservations of attempts in flight are not saved.
    pub(crate) const SNAPSHOT_LEN: usize = 16;

    pub(crate) fn save(&self, w: &mut crate::snapshot::Writer<'_>, now: Ticks) {
        w.u64(self.credit.get());
        w.ticks(now.saturating_sub(self.updated));
    }

    pub(crate) fn restore(r: &mut crate::snapshot::Reader<'_>, rebase: crate::snapshot::Rebase) -> Self {
        let credit = U64::of(r.u64());
        let updated = rebase.ago(r.ticks());
        Self { credit, updated, lapse_at: 0, reserved: 0, epoch: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 1_000;
    #[cfg(feature = "token-bucket")]
    type D = Duration<HZ>;

    #[cfg(feature = "token-bucket")]
    fn bucket(capacity: u32, refill: u32, period_s: Ticks, hold_s: Ticks) -> (Bucket, TokenBucket) {
        let budget =
            RetryBudget::<HZ>::token_bucket(capacity, refill, D::from_secs(period_s), D::from_secs(hold_s));
        let b = budget.unwrap().bucket().unwrap();
        (b, TokenBucket::new(Some(b), 0))
    }

    #[cfg(feature = "token-bucket")]
    #[test]
    fn a_new_bucket_is_full() {
        let (p, mut b) = bucket(10, 10, 60, 10);
        assert_eq!(b.available(&p, 0), 10);
    }

    #[cfg(feature = "token-bucket")]
    #[test]
    fn a_settled_reservation_spends_its_token_and_refill_is_exact() {
        let (p, mut b) = bucket(10, 10, 60, 10);
        for _ in 0..10 {
            let r = b.reserve(&p, 0, 0).unwrap();
            b.settle(&p, r, 0);
        }
        assert_eq!(b.available(&p, 0), 0);
        assert!(b.reserve(&p, 0, 0).is_none());
        // 10 tokens per 60 s: one every 6 s, not a tick sooner.
        assert_eq!(b.available(&p, 5_999), 0);
        assert_eq!(b.available(&p, 6_000), 1);
        assert_eq!(b.available(&p, 60_000), 10);
        assert_eq!(b.available(&p, 600_000), 10, "never above capacity");
    }

    #[cfg(feature = "token-bucket")]
    #[test]
    fn a_reservation_holds_its_token_until_it_lapses() {
        let (p, mut b) = bucket(1, 1, 60, 10);
        let _lost = b.reserve(&p, 0, 0).unwrap();
        assert_eq!(b.available(&p, 9_999), 0);
        assert_eq!(b.available(&p, 10_000), 1, "the unreported reservation lapsed and its token returned");
    }

    #[cfg(feature = "token-bucket")]
    #[test]
    fn a_late_settle_still_spends_the_token_once() {
        let (p, mut b) = bucket(2, 1, 60, 10);
        let r = b.reserve(&p, 0, 0).unwrap();
        assert_eq!(b.available(&p, 10_000), 2);
        b.settle(&p, r, 10_000);
        assert_eq!(b.available(&p, 10_000), 1);
    }

    #[test]
    fn bad_buckets_are_refused_with_their_codes() {
        #[cfg(feature = "token-bucket")]
        {
            let d = D::from_secs(1);
            assert_eq!(RetryBudget::<HZ>::token_bucket(0, 1, d, d), Err(ConfigError::ZeroBudgetCapacity));
            assert_eq!(RetryBudget::<HZ>::token_bucket(1, 0, d, d), Err(ConfigError::ZeroBudgetRefill));
            assert_eq!(
                RetryBudget::<HZ>::token_bucket(1, 1, D::from_ticks(0), d),
                Err(ConfigError::ZeroBudgetPeriod)
            );
            // Credit is counted in 64 bits: only 64-bit ticks can overflow it.
            #[cfg(not(feature = "ticks-u32"))]
            assert_eq!(
                RetryBudget::<HZ>::token_bucket(u32::MAX, 1, D::from_ticks(Ticks::MAX / 2), d),
                Err(ConfigError::BudgetTooLargeForTickRate)
            );
        }
        assert_eq!(RetryBudget::<HZ>::ratio(101, 0), Err(ConfigError::BudgetPercentOutOfRange));
    }

    #[test]
    fn the_ratio_allows_retries_up_to_its_share_plus_the_floor() {
        let c = |calls, retries| Counts::of(calls, retries, 0);
        // 10 %, no floor: with 89 calls and 8 retries a 9th retry makes 9 of 90: allowed.
        assert!(ratio_allows(c(89, 8), 10, 0));
        // A 10th retry would make 10 of 91: refused.
        assert!(!ratio_allows(c(90, 9), 10, 0));
        // A quiet dependency: one call, no retries, floor 2 allows the first two retries.
        assert!(ratio_allows(c(1, 0), 10, 2));
        assert!(ratio_allows(c(2, 1), 10, 2));
        assert!(!ratio_allows(c(3, 2), 10, 2));
    }

    /// A share of the ratio budget (sheddable work's, `crate::Criticality`): none held back is the
    /// budget itself, and holding back more never allows a retry that holding back less refuses.
    /// With 10 % and no floor, 9 calls counted, a first retry (1 call of 10) is within the budget
    /// but not within a share that holds back 20 % of it (8 %); with 12 counted, 1 of 13 is
    /// within both.
    #[test]
    fn a_share_of_the_ratio_budget_holds_back_what_it_says_and_never_more_for_less() {
        let c = |calls, retries| Counts::of(calls, retries, 0);
        assert!(!ratio_allows_share(c(9, 0), 10, 0, 20) && ratio_allows_share(c(9, 0), 10, 0, 0));
        assert!(ratio_allows_share(c(12, 0), 10, 0, 20));
        // Every seventh count of retries under miri, which CI runs on three targets (56 s of its
        // emulated time each with all of them, nearly half of all the unit tests').
        for retries in (0..30u32).step_by(if cfg!(miri) { 7 } else { 1 }) {
            for calls in retries..retries + 60 {
                for (percent, floor) in [(0, 0), (0, 2), (10, 0), (10, 3), (50, 1), (100, 0)] {
                    let k = c(calls, retries);
                    let allows = |held| ratio_allows_share(k, percent, floor, held);
                    assert_eq!(allows(0), ratio_allows(k, percent, floor));
                    let mut before = allows(0);
                    for held in [1, 20, 50, 90] {
                        let now = allows(held);
                        assert!(!now || before, "{k:?} {percent} % + {floor}: held {held} allows more");
                        // Exactly: the retry, counted, within (100 - held) % of the allowance.
                        let allowance = u64::from(floor) * 100 + u64::from(percent) * u64::from(calls + 1);
                        let exact = u64::from(retries + 1) * 10_000 <= allowance * u64::from(100 - held);
                        assert_eq!(now, exact, "{k:?} {percent} % + {floor}, held {held}");
                        before = now;
                    }
                }
            }
        }
    }

    #[test]
    fn the_ratio_in_32_bit_words_agrees_with_64_bit_arithmetic_wherever_it_answers() {
        let c = |calls, retries| Counts::of(calls, retries, 0);
        // The rule in 64 bits, written out independently of both versions.
        let exact = |k: Counts, percent: u8, floor: u32| {
            100 * (u64::from(k.retries) + 1)
                <= 100 * u64::from(floor) + u64::from(percent) * (u64::from(k.calls) + 1)
        };
        let edges = [0, 1, 9, 10, 11, 99, 100, 1_000, (1 << 23) - 2, (1 << 23) - 1, 1 << 23, u32::MAX];
        // Fewer under miri, which CI runs on three targets (17 s each with all of them).
        let percents: &[u8] = if cfg!(miri) { &[10, u8::MAX] } else { &[0, 1, 10, 50, 99, 100, u8::MAX] };
        for calls in edges {
            for retries in edges {
                for floor in edges {
                    for &percent in percents {
                        let k = c(calls, retries);
                        let small = ratio_allows_small(k, percent, floor);
                        let fits = calls < 1 << 23 && retries < 1 << 23 && floor < 1 << 23;
                        assert_eq!(small.is_some(), fits, "{k:?} {percent} {floor}");
                        assert_eq!(
                            small.unwrap_or(exact(k, percent, floor)),
                            exact(k, percent, floor),
                            "{k:?}"
                        );
                        assert_eq!(ratio_allows(k, percent, floor), exact(k, percent, floor), "{k:?}");
                    }
                }
            }
        }
        // Where the two sides meet: 10 % of 89 + 1 calls is 9 retries, not 10.
        assert_eq!(ratio_allows_small(c(89, 8), 10, 0), Some(true));
        assert_eq!(ratio_allows_small(c(90, 9), 10, 0), Some(false));
    }

    #[test]
    fn the_headroom_is_the_number_of_retries_the_ratio_would_admit_in_a_row() {
        let c = |calls, retries| Counts::of(calls, retries, 0);
        for (calls, retries, percent, floor) in
            [(89, 8, 10, 0), (90, 9, 10, 0), (1, 0, 10, 2), (1000, 3, 25, 1), (0, 0, 0, 0), (5, 9, 50, 0)]
        {
            let mut counts = c(calls, retries);
            let mut admitted = 0;
            while ratio_allows(counts, percent, floor) {
                admitted += 1;
                counts.calls += 1;
                counts.retries += 1;
            }
            assert_eq!(
                ratio_headroom(c(calls, retries), percent, floor),
                admitted,
                "{calls} {retries} {percent} {floor}"
            );
        }
        assert_eq!(ratio_headroom(c(1, 0), 100, 0), u32::MAX);
    }
}
