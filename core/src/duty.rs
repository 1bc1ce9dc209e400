//! The duty-cycle limiter: attempts that cost airtime, at most a share of any rolling window.
//!
//! Radio links are limited by law, not by politeness: in the EU868 band a LoRaWAN device may
//! transmit at most 1 % of the time per sub-band, so 1.5 s on air buys about 150 s of silence.
//! Every attempt, retries included, costs the airtime the caller states for it
//! ([`Context::airtime`](crate::Context::airtime), computed by the caller from payload and data
//! rate); the limiter keeps the airtime inside any window of `window` ticks at or below `airtime`.
//! The log is the dependency's, whatever channel a frame went out on: a limit per sub-band is a
//! state per sub-band, or one state under the strictest sub-band's limit (conservative).
//!
//! ## The rule, and why it holds
//!
//! A transmission of cost `c` starting at `t` occupies `[t, t + c)`. The log keeps, for each
//! transmission that may still matter, its cost and when it stops counting (its end plus the
//! window). A new one may start at `t` when
//!
//! > `c + Σ { cᵢ : endᵢ > t − window } ≤ airtime`
//!
//! This bounds every window: take any window `[a, a + window)` and the transmission `j` admitted
//! last among those overlapping it. Each other one overlapping the window ends after `a`, and `a >
//! startⱼ − window` because `j` overlaps it too, so each was in `j`'s sum when `j` was admitted; the
//! airtime inside the window is at most their whole costs, which `j`'s check kept within the limit.
//! The argument does not care about admission order, so airtime reserved for a later start (an
//! attempt that waits for its turn) is sound too. The price of the rule is that a cost is held for
//! `window` after its transmission *ends* rather than starts: 1.5 s in an hour.
//!
//! Exact integers throughout: costs and sums in ticks, no ratios, no floats.
//!
//! ## Fixed memory
//!
//! The log holds `L` entries (the dependency's third const parameter) in order of departure. When
//! it is full, two neighbours are merged into one with the later departure and the sum of the
//! costs: the pair whose merge holds the least airtime for the least extra time. Merging is
//! conservative (the merged entry counts wherever either would have) and exact again once the
//! merged airtime has left, so a small log only delays the release of some airtime by the gap it
//! merged across. Entries that have left are dropped.
//! Costs are stored as `u32` ticks (the allowance is checked to fit), departures as `Ticks`: 12 bytes
//! an entry.

use crate::error::ConfigError;
use crate::time::{Duration, Ticks, Wide};

/// A duty cycle: at most `airtime` of transmission inside any window of `window`.
///
/// EU868's 1 % of any hour is 36 s on air. Each attempt, retries included, costs the airtime its
/// [`Context::airtime`](crate::Context::airtime) states; the dependency says when the next frame
/// may go:
///
/// ```
/// use relent_core::{Dependency, DependencyConfig, Duration, DutyCycle, Instant, RetryBudget};
/// type D = Duration<1_000>;
///
/// let radio = DutyCycle::per_mille(10, D::from_secs(3_600));
/// assert_eq!(radio.airtime(), D::from_secs(36));
///
/// let config = DependencyConfig::new(D::from_secs(60)).budget(RetryBudget::ratio(25, 4)?).duty_cycle(radio);
/// // 4 buckets in the window of counts, and an 8-entry airtime log (12 bytes each).
/// let link = Dependency::<1_000, 4, 8>::new(&config, Instant::from_ticks(0))?;
/// let frame = D::from_millis(1_483); // 51 bytes at SF10/125 kHz
/// assert_eq!(link.next_airtime(&config, Instant::from_ticks(0), frame), Some(Instant::from_ticks(0)));
/// // A frame longer than a whole window allows can never go.
/// assert_eq!(link.next_airtime(&config, Instant::from_ticks(0), D::from_secs(40)), None);
/// # Ok::<(), relent_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DutyCycle<const HZ: u64> {
    pub(crate) airtime: Duration<HZ>,
    pub(crate) window: Duration<HZ>,
}

impl<const HZ: u64> DutyCycle<HZ> {
    /// At most `airtime` on air inside any window of `window` (for example 36 s per hour).
    pub const fn new(airtime: Duration<HZ>, window: Duration<HZ>) -> Self {
        Self { airtime, window }
    }

    /// At most `per_mille` thousandths of any window of `window` (EU868: 10 ‰ is 1 %, 1 ‰ is
    /// 0.1 %). The allowance is rounded down to a whole tick, so the limit is never exceeded.
    pub const fn per_mille(per_mille: u16, window: Duration<HZ>) -> Self {
        // window × per_mille / 1000 ≤ window × 65.535, computed without overflow as whole thousandths
        // plus the rest.
        let w = window.as_ticks();
        let pm = per_mille as Ticks;
        let airtime = (w / 1_000).saturating_mul(pm).saturating_add((w % 1_000).saturating_mul(pm) / 1_000);
        Self { airtime: Duration::<HZ>::from_ticks(airtime), window }
    }

    /// The airtime allowed in any window.
    pub const fn airtime(&self) -> Duration<HZ> {
        self.airtime
    }
    /// The window's length.
    pub const fn window(&self) -> Duration<HZ> {
        self.window
    }

    /// Checks the duty cycle.
    pub const fn validate(&self) -> Result<(), ConfigError> {
        if self.window.as_ticks() == 0 {
            return Err(ConfigError::ZeroDutyCycleWindow);
        }
        if self.airtime.as_ticks() == 0 {
            return Err(ConfigError::ZeroDutyCycleAirtime);
        }
        if self.airtime.as_ticks() > self.window.as_ticks() {
            return Err(ConfigError::DutyCycleAboveWindow);
        }
        if self.airtime.as_ticks() > u32::MAX as Ticks {
            return Err(ConfigError::DutyCycleAirtimeTooLarge);
        }
        Ok(())
    }
}

/// The transmissions that may still count, each kept as the instant its cost stops counting (its
/// end plus the window: always in the future while it matters, which keeps the arithmetic and the
/// snapshot's rebasing simple) and its cost, sorted by that instant. Every recorded cost is at least
/// one tick, so the entries in use are the prefix of non-zero costs: no length field, and a log of
/// `L = 0` takes no memory at all.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct AirtimeLog<const L: usize> {
    leaves: [Ticks; L],
    costs: [u32; L],
}

/// The log entry of a transmission of `cost` ticks starting at `start`: when it leaves the window
/// (at its end, plus the window), and its cost as the log keeps it. The one rule for both
/// [`AirtimeLog::record`] and [`AirtimeLog::give_back`], which must find what `record` wrote.
#[inline(always)]
fn entry<const HZ: u64>(duty: &DutyCycle<HZ>, start: Ticks, cost: Ticks) -> (Ticks, u32) {
    let leave = start.saturating_add(cost).saturating_add(duty.window.as_ticks());
    #[allow(clippy::useless_conversion)] // With 32-bit ticks, already a u32.
    (leave, u32::try_from(cost).unwrap_or(u32::MAX))
}

impl<const L: usize> AirtimeLog<L> {
    /// An empty log.
    pub(crate) const fn new() -> Self {
        Self { leaves: [0; L], costs: [0; L] }
    }

    /// Moves every transmission's departure from the window `by` ticks earlier: one that left
    /// before the new clock's start leaves at tick 0, which counts against nothing.
    pub(crate) fn rebase(&mut self, by: Ticks) {
        for leave in &mut self.leaves {
            *leave = crate::time::earlier(*leave, by);
        }
    }

    /// Bounds a log restored from a snapshot by `duty`, at `now`: no airtime counts for longer
    /// than `duty`'s window and whole allowance from now. A transmission under way or over when
    /// the snapshot was saved never counts longer than that under the configuration that saved
    /// it: what is cut is airtime reserved ahead for an attempt still waiting then (which the
    /// reset ended), and what a snapshot saved under a longer window or allowance holds. The
    /// entries stay in order.
    pub(crate) fn bound<const HZ: u64>(&mut self, duty: &DutyCycle<HZ>, now: Ticks) {
        let latest = now.saturating_add(duty.window.as_ticks()).saturating_add(duty.airtime.as_ticks());
        for leave in &mut self.leaves {
            *leave = (*leave).min(latest);
        }
    }

    fn live(&self) -> usize {
        self.costs.iter().take_while(|&&c| c > 0).count()
    }

    /// Entries in use, as (leaves the window at, cost).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (Ticks, u32)> + '_ {
        self.leaves.iter().copied().zip(self.costs.iter().copied()).take(self.live())
    }

    /// Moves the entries in `from` to start at index `to`, as `copy_within` on both arrays would,
    /// but with no panic path: `copy_within` panics on a range out of bounds, which the callers
    /// never pass but the compiler cannot see, so its panic code was linked into every firmware
    /// with a duty cycle. Here an index out of bounds is skipped.
    fn shift(&mut self, from: core::ops::Range<usize>, to: usize) {
        let n = from.end.saturating_sub(from.start);
        let right = to > from.start;
        for i in 0..n {
            // Moving right, the last entry first, so that none is overwritten before it moves.
            let k = if right { n.wrapping_sub(1).wrapping_sub(i) } else { i };
            let (Some(src), Some(dst)) = (from.start.checked_add(k), to.checked_add(k)) else { continue };
            if let (Some(&leave), Some(&cost)) = (self.leaves.get(src), self.costs.get(src)) {
                if let (Some(e), Some(c)) = (self.leaves.get_mut(dst), self.costs.get_mut(dst)) {
                    (*e, *c) = (leave, cost);
                }
            }
        }
    }

    /// Forgets the entries from `k` on.
    fn truncate(&mut self, k: usize) {
        for (e, c) in self.leaves.iter_mut().zip(self.costs.iter_mut()).skip(k) {
            (*e, *c) = (0, 0);
        }
    }

    /// Drops the entries that no longer count at `now` (nor, since `now` never goes back, later).
    pub(crate) fn prune(&mut self, now: Ticks) {
        let live = self.live();
        let stale = self.leaves.iter().take(live).take_while(|&&leave| leave <= now).count();
        if stale > 0 {
            self.shift(stale..live, 0);
            self.truncate(live.saturating_sub(stale));
        }
    }

    /// Airtime that counts against a transmission starting at `t`.
    pub(crate) fn load(&self, t: Ticks) -> Ticks {
        self.entries()
            .filter(|&(leave, _)| leave > t)
            .fold(Ticks::MIN, |sum, (_, cost)| sum.saturating_add(Ticks::from(cost)))
    }

    /// The earliest instant at or after `now` at which a transmission of `cost` ticks may start, or
    /// `None` if it never can (it costs more than the whole allowance).
    pub(crate) fn next_at<const HZ: u64>(
        &self,
        duty: &DutyCycle<HZ>,
        now: Ticks,
        cost: Ticks,
    ) -> Option<Ticks> {
        let room = duty.airtime.as_ticks().checked_sub(cost)?;
        if self.load(now) <= room {
            return Some(now);
        }
        // The load only falls as entries leave, in order: stop at the first departure that leaves
        // room. (Among equal departures the last one's running sum is exact, at the same instant.)
        let mut remaining = self.load(0);
        for (leave, c) in self.entries() {
            remaining = remaining.saturating_sub(Ticks::from(c));
            if leave >= now && remaining <= room {
                return Some(leave);
            }
        }
        // Not reached (once every entry has left, the load is zero), but never trust a loop.
        Some(self.entries().last().map_or(now, |(leave, _)| leave).max(now))
    }

    /// Gives back airtime [recorded](Self::record) for a transmission of `cost` ticks at `start`
    /// that will not go out (its operation ended while it waited for it): `cost` comes off an
    /// entry that leaves when that transmission's would, and one left with no cost goes. Entries
    /// only ever merge into the later of two, so that transmission's airtime is held by an entry
    /// that leaves then or later: taken off one that leaves then, the load at any instant is what
    /// it would be without it, or more for a while where it was merged into a later one. With no
    /// entry that leaves then holding that much (all of it merged into later ones), nothing is
    /// given back: the log errs high, as its merges do.
    pub(crate) fn give_back<const HZ: u64>(&mut self, duty: &DutyCycle<HZ>, start: Ticks, cost: Ticks) {
        let (leave, cost) = entry(duty, start, cost);
        let live = self.live();
        let Some(k) = (0..live)
            .find(|&k| self.leaves.get(k) == Some(&leave) && self.costs.get(k).is_some_and(|&c| c >= cost))
        else {
            return;
        };
        if let Some(c) = self.costs.get_mut(k) {
            *c = c.saturating_sub(cost);
            if *c == 0 {
                self.shift(k.saturating_add(1)..live, k);
                self.truncate(live.saturating_sub(1));
            }
        }
    }

    /// Records a transmission of `cost` ticks starting at `start` (nothing for a cost of zero).
    pub(crate) fn record<const HZ: u64>(&mut self, duty: &DutyCycle<HZ>, start: Ticks, cost: Ticks) {
        let (leave, cost) = entry(duty, start, cost);
        if cost == 0 || L == 0 {
            return;
        }
        let live = self.live();
        let pos = self.leaves.iter().take(live).take_while(|&&e| e <= leave).count();
        if live < L {
            self.insert(pos, leave, cost);
            return;
        }
        // Full: merge two neighbours, the new one among the candidates. Merging holds the earlier
        // one's airtime until the later one leaves, so pick the merge that holds the least airtime
        // for the least extra time (gap × cost held), the latest on a tie: old airtime, about to
        // leave, is the last that should be held back.
        let mut best: Option<(Wide, Merge)> = None;
        let mut consider = |gap: Ticks, held: u32, merge: Merge| {
            let harm = Wide::from(gap).saturating_mul(Wide::from(held));
            if best.is_none_or(|(h, _)| harm <= h) {
                best = Some((harm, merge));
            }
        };
        for k in 1..live {
            let (Some(&a), Some(&b), Some(&held)) =
                (self.leaves.get(k.wrapping_sub(1)), self.leaves.get(k), self.costs.get(k.wrapping_sub(1)))
            else {
                continue;
            };
            consider(b.saturating_sub(a), held, Merge::Pair(k));
        }
        let before = pos.checked_sub(1).and_then(|p| Some((p, *self.leaves.get(p)?, *self.costs.get(p)?)));
        if let Some((p, at, held)) = before {
            consider(leave.saturating_sub(at), held, Merge::IntoBefore(p));
        }
        if let Some(&after) = self.leaves.get(pos).filter(|_| pos < live) {
            consider(after.saturating_sub(leave), cost, Merge::IntoAfter(pos));
        }
        match best.map(|(_, m)| m) {
            Some(Merge::IntoBefore(p)) => {
                // The earlier entry now leaves when the new one does: still in order.
                if let (Some(e), Some(c)) = (self.leaves.get_mut(p), self.costs.get_mut(p)) {
                    *e = leave;
                    *c = c.saturating_add(cost);
                }
            }
            Some(Merge::IntoAfter(p)) => {
                if let Some(c) = self.costs.get_mut(p) {
                    *c = c.saturating_add(cost);
                }
            }
            Some(Merge::Pair(k)) => {
                // Entry k - 1 folds into entry k (the later departure), then the new one goes in.
                let folded = self.costs.get(k.wrapping_sub(1)).copied().unwrap_or(0);
                if let Some(c) = self.costs.get_mut(k) {
                    *c = c.saturating_add(folded);
                }
                self.shift(k..live, k.wrapping_sub(1));
                self.truncate(live.saturating_sub(1));
                let live = self.live();
                let pos = self.leaves.iter().take(live).take_while(|&&e| e <= leave).count();
                self.insert(pos, leave, cost);
            }
            None => {
                // Not reached with L >= 1 (the new entry has a neighbour), kept conservative.
                if let (Some(e), Some(c)) = (self.leaves.get_mut(0), self.costs.get_mut(0)) {
                    *e = (*e).max(leave);
                    *c = c.saturating_add(cost);
                }
            }
        }
    }

    fn insert(&mut self, pos: usize, leave: Ticks, cost: u32) {
        let live = self.live();
        if live >= L || pos > live {
            return;
        }
        self.shift(pos..live, pos.saturating_add(1));
        if let (Some(e), Some(c)) = (self.leaves.get_mut(pos), self.costs.get_mut(pos)) {
            *e = leave;
            *c = cost;
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Merge {
    /// Entries `k - 1` and `k`.
    Pair(usize),
    /// The new entry into the one before it.
    IntoBefore(usize),
    /// The new entry into the one after it.
    IntoAfter(usize),
}

impl<const L: usize> AirtimeLog<L> {
    /// Bytes of the log in a snapshot: for each entry, how long it still counts and its cost (both
    /// 0 for an entry not in use).
    pub(crate) const SNAPSHOT_LEN: usize = L * (8 + 4);

    pub(crate) fn save(&self, w: &mut crate::snapshot::Writer<'_>, now: Ticks) {
        // Entries that no longer count are not saved, so the ones written all count.
        let counting = self.entries().filter(|&(leave, _)| leave > now);
        let mut written = 0usize;
        for (leave, cost) in counting {
            w.ticks(leave.saturating_sub(now));
            w.u32(cost);
            written = written.saturating_add(1);
        }
        for _ in written..L {
            w.ticks(0);
            w.u32(0);
        }
    }

    pub(crate) fn restore(
        r: &mut crate::snapshot::Reader<'_>,
        rebase: crate::snapshot::Rebase,
    ) -> Result<Self, crate::snapshot::SnapshotError> {
        let mut log = Self::new();
        let mut kept = 0usize;
        let (mut previous, mut ended) = (Ticks::MIN, false);
        for _ in 0..L {
            let (remaining, cost) = (r.ticks(), r.u32());
            // What `save` writes: entries in use first, in order of departure, then zeros.
            let in_use = remaining > 0 && cost > 0;
            if (in_use && (ended || remaining < previous)) || (!in_use && (remaining, cost) != (0, 0)) {
                return Err(crate::snapshot::SnapshotError::Corrupted);
            }
            ended |= !in_use;
            previous = remaining;
            // Airtime that stopped counting during the sleep is dropped; the rest counts for what
            // remains of it.
            if in_use && remaining > rebase.slept {
                if let (Some(e), Some(c)) = (log.leaves.get_mut(kept), log.costs.get_mut(kept)) {
                    *e = rebase.until(remaining);
                    *c = cost;
                }
                kept = kept.saturating_add(1);
            }
        }
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern crate std;
    use std::vec::Vec;

    const HZ: u64 = 1_000;

    fn duty(airtime: Ticks, window: Ticks) -> DutyCycle<HZ> {
        DutyCycle::new(Duration::<HZ>::from_ticks(airtime), Duration::<HZ>::from_ticks(window))
    }

    #[test]
    fn shifting_entries_matches_copy_within_and_skips_what_falls_outside() {
        const L: usize = 5;
        let fresh = || AirtimeLog::<L> { leaves: [1, 2, 3, 4, 5], costs: [10, 20, 30, 40, 50] };
        // Every move that stays in bounds, left, right and overlapping: as `copy_within`.
        for start in 0..=L {
            for end in start..=L {
                for to in 0..=L - (end - start) {
                    let mut log = fresh();
                    log.shift(start..end, to);
                    let (mut leaves, mut costs) = (fresh().leaves, fresh().costs);
                    leaves.copy_within(start..end, to);
                    costs.copy_within(start..end, to);
                    assert_eq!((log.leaves, log.costs), (leaves, costs), "{start}..{end} to {to}");
                }
            }
        }
        // Past the end: what would land outside is skipped, and nothing panics.
        let mut log = fresh();
        log.shift(3..5, 4);
        assert_eq!((log.leaves, log.costs), ([1, 2, 3, 4, 4], [10, 20, 30, 40, 40]));
        log.shift(3..9, 0);
        assert_eq!((log.leaves, log.costs), ([4, 4, 3, 4, 4], [40, 40, 30, 40, 40]));
        let mut log = fresh();
        log.shift(0..2, usize::MAX);
        assert_eq!(
            (log.leaves, log.costs),
            (fresh().leaves, fresh().costs),
            "an index past usize::MAX does not wrap to 0"
        );
    }

    #[test]
    fn per_mille_rounds_down_to_a_whole_tick_over_any_window() {
        // 50 % of 1,999 ticks is 999.5: 999, the thousands and the rest each counted.
        let half = DutyCycle::<HZ>::per_mille(500, Duration::<HZ>::from_ticks(1_999));
        assert_eq!(half.airtime().as_ticks(), 999);
        assert_eq!(
            DutyCycle::<HZ>::per_mille(10, Duration::<HZ>::from_ticks(3_600_999)).airtime().as_ticks(),
            36_009
        );
    }

    #[test]
    fn an_allowance_of_the_whole_window_is_valid_and_one_tick_more_is_not() {
        assert_eq!(duty(60_000, 60_000).validate(), Ok(()));
        assert_eq!(duty(60_001, 60_000).validate(), Err(ConfigError::DutyCycleAboveWindow));
    }

    #[test]
    fn a_transmission_of_no_airtime_takes_no_place_in_the_log() {
        let mut log = AirtimeLog::<3>::new();
        log.record(&duty(100, 1_000), 500, 50);
        log.record(&duty(100, 1_000), 0, 0);
        assert_eq!(log.entries().collect::<Vec<_>>(), [(1_550, 50)], "nor hides the entries after it");
    }

    #[test]
    fn a_full_log_merges_a_short_new_entry_into_the_one_that_leaves_just_after_it() {
        // Entries leaving at 1,100 and 2,000 (50 ticks each). A 1-tick frame leaving at 1,990:
        // merged into the later entry it costs 10 ticks × 1; into the earlier one 890 × 50.
        let d = duty(500, 1_000);
        let mut log = AirtimeLog::<2>::new();
        log.record(&d, 50, 50);
        log.record(&d, 950, 50);
        log.record(&d, 989, 1);
        assert_eq!(log.entries().collect::<Vec<_>>(), [(1_100, 50), (2_000, 51)]);
    }

    #[test]
    fn one_percent_of_an_hour_after_a_full_allowance_waits_for_the_window() {
        let d = DutyCycle::<HZ>::per_mille(10, Duration::<HZ>::from_ticks(3_600_000));
        assert_eq!(d.airtime().as_ticks(), 36_000);
        let mut log = AirtimeLog::<4>::new();
        assert_eq!(log.next_at(&d, 0, 36_000), Some(0));
        log.record(&d, 0, 36_000);
        // The whole allowance went at once: nothing more until it has left the window.
        assert_eq!(log.next_at(&d, 36_000, 1), Some(3_636_000));
        assert_eq!(log.next_at(&d, 3_636_000, 36_000), Some(3_636_000));
    }

    #[test]
    fn airtime_leaves_the_window_entry_by_entry() {
        let d = duty(100, 1_000);
        let mut log = AirtimeLog::<4>::new();
        log.record(&d, 0, 40);
        log.record(&d, 100, 40);
        // 80 used: 20 left, so a 30 waits until the first entry (ending at 40) has left.
        assert_eq!(log.next_at(&d, 200, 20), Some(200));
        assert_eq!(log.next_at(&d, 200, 30), Some(1_040));
        // A 70 needs both gone.
        assert_eq!(log.next_at(&d, 200, 70), Some(1_140));
        assert_eq!(log.next_at(&d, 200, 101), None, "more than the allowance never fits");
        assert_eq!((log.load(1_039), log.load(1_040), log.load(1_140)), (80, 40, 0));
    }

    #[test]
    fn a_full_log_merges_the_closest_departures_conservatively() {
        let d = duty(1_000, 10_000);
        let mut log = AirtimeLog::<2>::new();
        log.record(&d, 0, 10); // leaves at 10_010
        log.record(&d, 5_000, 10); // leaves at 15_010
        log.record(&d, 5_100, 10); // leaves at 15_110: closest to 15_010, merged into it
        let entries: Vec<_> = log.entries().collect();
        assert_eq!(entries, [(10_010, 10), (15_110, 20)]);
        // The first entry leaves at 10_010; the merged one only at 15_110.
        assert_eq!(log.next_at(&d, 10_000, 980), Some(10_010));
        assert_eq!(log.next_at(&d, 10_000, 1_000), Some(15_110));
        // A log of one entry folds everything into it.
        let mut one = AirtimeLog::<1>::new();
        one.record(&d, 0, 10);
        one.record(&d, 50, 10);
        assert_eq!(one.entries().collect::<Vec<_>>(), [(10_060, 20)]);
        // A log of none records nothing (the dependency refuses a duty cycle without a log).
        let mut none = AirtimeLog::<0>::new();
        none.record(&d, 0, 10);
        assert_eq!(none.load(0), 0);
    }

    #[test]
    fn pruning_drops_only_what_no_longer_counts() {
        let d = duty(100, 1_000);
        let mut log = AirtimeLog::<4>::new();
        log.record(&d, 0, 10);
        log.record(&d, 500, 10);
        log.prune(1_010);
        assert_eq!(log.entries().collect::<Vec<_>>(), [(1_510, 10)]);
        log.prune(1_509);
        assert_eq!(log.entries().count(), 1);
        log.prune(1_510);
        assert_eq!(log.entries().count(), 0);
    }

    #[test]
    fn bad_duty_cycles_are_refused() {
        assert_eq!(duty(0, 10).validate(), Err(ConfigError::ZeroDutyCycleAirtime));
        assert_eq!(duty(1, 0).validate(), Err(ConfigError::ZeroDutyCycleWindow));
        assert_eq!(duty(11, 10).validate(), Err(ConfigError::DutyCycleAboveWindow));
        // Airtime is counted in 32 bits: only 64-bit ticks can state more.
        #[cfg(not(feature = "ticks-u32"))]
        assert_eq!(duty(1 << 33, 1 << 40).validate(), Err(ConfigError::DutyCycleAirtimeTooLarge));
        #[cfg(not(feature = "ticks-u32"))]
        assert_eq!(
            duty(Ticks::from(u32::MAX) + 1, 1 << 40).validate(),
            Err(ConfigError::DutyCycleAirtimeTooLarge),
            "one tick more than 32 bits hold"
        );
        assert_eq!(duty(Ticks::from(u32::MAX), Ticks::MAX).validate(), Ok(()), "all that 32 bits hold");
        assert_eq!(duty(10, 10).validate(), Ok(()));
    }
}
