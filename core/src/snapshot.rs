//! Snapshots: a dependency's state as bytes, to survive a deep sleep or a reset.
//!
//! Battery devices sleep between uplinks and lose RAM, except a small retained region or flash,
//! and their monotonic tick counter starts again from zero on waking while real time went on. A
//! device that forgets it was told "busy, retry after 600 s", or that its link's breaker was open,
//! wakes and hammers the network again. So a [`Dependency`] can be written to a fixed number of bytes
//! ([`Dependency::SNAPSHOT_LEN`], a compile-time constant) and read back after the reset.
//!
//! Time is rebased, not copied: every instant is stored relative to the moment of saving (what
//! remains of a future deadline, how long ago a past one was), and restoring takes the new `now` and
//! how long the device slept (from an RTC, or real time at save and at restore). A cooldown or an
//! open circuit that should still hold after waking still holds; one that ended during the sleep
//! has ended; counts age by the time slept.
//!
//! What is not saved: slots, probes and budget reservations of attempts in flight, which did not
//! survive the reset either; and what the dependency relearns within a few calls: an adaptive
//! bulkhead limit (restored at the bulkhead's size), the latency log, and the client throttle's
//! fraction of a request and its share of sheddable work. Everything else is restored to the tick:
//! on a clock that counted through the sleep, or one that reads whole windows ahead of it, a
//! restored state decides as the one saved would have, left idle that long
//! (`tests/tests/equivalence.rs`).
//!
//! The format: magic `RLNT`, a version byte, the tick rate, bucket count, airtime-log length and
//! set of protections compiled in that it was written for, the state (only the parts compiled in), and a CRC-32 (IEEE) of all of it. A truncated, corrupted, other-version or mismatched
//! snapshot is refused with a [`SnapshotError`]; nothing is trusted that does not check out, and
//! [`Dependency::restore_or_new`] starts fresh instead. What checks out is still bounded by the
//! configuration it is restored under, which need not be the one that saved it (a firmware update
//! may have changed it): no part holds more than that configuration allows. Every single-byte corruption changes the
//! CRC-32, so none is accepted. (The CRC is written here rather than taken from a crate because
//! relent-core depends on nothing but its five chosen crates.)

use core::fmt;

use crate::breaker::Breaker;
use crate::budget::TokenBucket;
use crate::cooldown::Cooldown;
use crate::dependency::{
    BREAKER, COOLDOWN, Dependency, DependencyConfig, RATE_LIMIT, THROTTLE, TOKEN_BUCKET,
};
use crate::duty::AirtimeLog;
use crate::limiter::Limiter;
use crate::time::{Duration, Instant, Ticks};
use crate::window::CallWindow;

const MAGIC: [u8; 4] = *b"RLNT";

/// The snapshot format's version.
pub const SNAPSHOT_VERSION: u8 = 2;

/// Why a snapshot was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SnapshotError {
    /// Fewer bytes than a snapshot of this dependency takes (or a buffer too small to write one).
    TooShort,
    /// Not a Relent snapshot.
    NotASnapshot,
    /// Written by another version of the format.
    OtherVersion {
        /// The version found.
        found: u8,
    },
    /// Written for another tick rate, number of buckets, airtime-log length or set of protections
    /// compiled in.
    OtherShape,
    /// Written for a dependency configured differently (another window).
    OtherConfig,
    /// The checksum does not match: the bytes were corrupted.
    Corrupted,
}

impl SnapshotError {
    /// The stable snake_case code.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::TooShort => "snapshot_too_short",
            Self::NotASnapshot => "not_a_snapshot",
            Self::OtherVersion { .. } => "snapshot_other_version",
            Self::OtherShape => "snapshot_other_shape",
            Self::OtherConfig => "snapshot_other_config",
            Self::Corrupted => "snapshot_corrupted",
        }
    }
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort => f.write_str(
                "the snapshot is shorter than Dependency::SNAPSHOT_LEN: it was truncated, or the buffer is too small",
            ),
            Self::NotASnapshot => f.write_str("these bytes are not a Relent snapshot (wrong magic): starting fresh"),
            Self::OtherVersion { found } => write!(
                f,
                "the snapshot was written by format version {found}, this build reads version {SNAPSHOT_VERSION}: starting fresh"
            ),
            Self::OtherShape => f.write_str(
                "the snapshot was written for another tick rate, number of buckets, airtime-log length or set of protections: starting fresh",
            ),
            Self::OtherConfig => f.write_str(
                "the snapshot was written for a dependency with another counting window: starting fresh",
            ),
            Self::Corrupted => f.write_str("the snapshot's checksum does not match: the bytes were corrupted"),
        }
    }
}

impl core::error::Error for SnapshotError {}

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), bit by bit: small, and fast enough for a
/// few hundred bytes once per sleep.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = u32::MAX;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// Writes little-endian fields into a buffer, refusing to run past its end.
///
/// Every field goes through one out-of-line [`Writer::word`], at most 32 bits at a time (what a
/// 32-bit core handles in one register): a call per field instead of a bounds check, a copy and an
/// overflow flag inlined at each of them, which had made `save` 1.5 KiB of a firmware's flash.
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
    pub(crate) overflow: bool,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, at: 0, overflow: false }
    }

    /// The `width` (at most 4) low bytes of `v`, least significant first.
    #[inline(never)]
    fn word(&mut self, v: u32, width: u8) {
        let mut rest = v;
        for _ in 0..width {
            let Some(byte) = self.buf.get_mut(self.at) else {
                self.overflow = true;
                return;
            };
            [*byte, ..] = rest.to_le_bytes();
            self.at = self.at.saturating_add(1);
            rest = rest.wrapping_shr(8);
        }
    }

    pub(crate) fn u8(&mut self, v: u8) {
        self.word(u32::from(v), 1);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.word(u32::from(v), 2);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.word(v, 4);
    }
    pub(crate) fn u64(&mut self, v: u64) {
        let [a, b, c, d, e, f, g, h] = v.to_le_bytes();
        self.word(u32::from_le_bytes([a, b, c, d]), 4);
        self.word(u32::from_le_bytes([e, f, g, h]), 4);
    }
    /// A tick count, in 8 bytes at any tick width: a snapshot reads the same on either.
    pub(crate) fn ticks(&mut self, v: Ticks) {
        self.u64(crate::time::wide(v));
    }

    pub(crate) fn written(&self) -> usize {
        self.at
    }
}

/// Reads little-endian fields, through one out-of-line [`Reader::word`] as [`Writer`] writes them.
///
/// A read past the end gives zero and sets `short`. The header is read with [`Reader::checked`],
/// which says so. The body is read only after [`Dependency::restore`] has checked that all
/// [`Dependency::SNAPSHOT_LEN`] bytes are there, so its reads cannot run short and need no check
/// each. On firmware this matters: a `Result` per field, checked and passed up through every part's
/// `restore`, and a copy per field width, were most of the restore code.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    short: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, at: 0, short: false }
    }

    /// The next `width` (at most 4) bytes as a little-endian integer; zero, nothing consumed and
    /// `short` set when fewer are left.
    #[inline(never)]
    fn word(&mut self, width: u8) -> u32 {
        let end = self.at.saturating_add(usize::from(width));
        let Some(bytes) = self.buf.get(self.at..end) else {
            self.short = true;
            return 0;
        };
        self.at = end;
        bytes.iter().rev().fold(0, |v, &b| v.wrapping_shl(8) | u32::from(b))
    }

    /// `read`'s field, or `None` if the bytes ran out before its end (or before).
    fn checked<T>(&mut self, read: fn(&mut Self) -> T) -> Option<T> {
        let v = read(self);
        (!self.short).then_some(v)
    }

    pub(crate) fn u8(&mut self) -> u8 {
        let [b, ..] = self.word(1).to_le_bytes();
        b
    }
    pub(crate) fn u16(&mut self) -> u16 {
        let [a, b, ..] = self.word(2).to_le_bytes();
        u16::from_le_bytes([a, b])
    }
    pub(crate) fn u32(&mut self) -> u32 {
        self.word(4)
    }
    pub(crate) fn u64(&mut self) -> u64 {
        let low = self.word(4);
        u64::from(low) | u64::from(self.word(4)).wrapping_shl(32)
    }
    /// A tick count saved with [`Writer::ticks`]; with 32-bit ticks, one too large for them
    /// saturates (a wait that long is as good as forever, an age that long as the start of time).
    #[allow(clippy::useless_conversion)]
    pub(crate) fn ticks(&mut self) -> Ticks {
        Ticks::try_from(self.u64()).unwrap_or(Ticks::MAX)
    }

    /// Bytes read so far.
    #[cfg(test)]
    pub(crate) fn position(&self) -> usize {
        self.at
    }
}

/// How instants move across a sleep: saved relative to `saved_at`, restored relative to `now`,
/// `slept` later in real time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rebase {
    pub(crate) now: Ticks,
    pub(crate) slept: Ticks,
}

impl Rebase {
    /// A future instant saved as what remained of it: what remains now, after the sleep.
    pub(crate) const fn until(&self, remaining: Ticks) -> Ticks {
        if remaining == 0 {
            return 0;
        }
        self.now.saturating_add(remaining.saturating_sub(self.slept))
    }

    /// A past instant saved as its age: that instant on the new clock (0 when it is older than the
    /// new clock's start).
    pub(crate) const fn ago(&self, age: Ticks) -> Ticks {
        self.now.saturating_sub(age.saturating_add(self.slept))
    }
}

impl<const HZ: u64, const N: usize, const L: usize> Dependency<HZ, N, L> {
    /// Bytes a snapshot of this dependency takes.
    pub const SNAPSHOT_LEN: usize = 4 + 1 + 8 + 2 + 2 + 1 // magic, version, tick rate, buckets, log, parts
        + CallWindow::<N>::SNAPSHOT_LEN
        + TOKEN_BUCKET * TokenBucket::SNAPSHOT_LEN
        + BREAKER * Breaker::SNAPSHOT_LEN
        + RATE_LIMIT * Limiter::SNAPSHOT_LEN
        + AirtimeLog::<L>::SNAPSHOT_LEN
        + COOLDOWN * Cooldown::SNAPSHOT_LEN
        + 4; // CRC-32

    /// Which parts' state this build keeps (the protections compiled in), one bit each: a snapshot
    /// from a build with other parts has another layout.
    const PARTS: u8 = ((TOKEN_BUCKET == 1) as u8)
        | ((BREAKER == 1) as u8) << 1
        | ((RATE_LIMIT == 1) as u8) << 2
        | ((COOLDOWN == 1) as u8) << 3
        // The window's buckets count the throttle's refusals too.
        | ((THROTTLE == 1) as u8) << 4;

    /// Writes the state at `now` into `out`, which must hold [`Self::SNAPSHOT_LEN`] bytes.
    ///
    /// Before a deep sleep, into retained RAM or flash; after it, [`Dependency::restore_or_new`]
    /// with the time slept. Here a failure opened the circuit for 10 minutes, the device saved its
    /// state 42 s after boot and slept 5 minutes, and it woke with its tick counter back at zero:
    ///
    /// ```
    /// use relent_core::{
    ///     Action, BreakerConfig, Context, Dependency, DependencyConfig, Duration, Instant, Operation, ReplaySafety,
    ///     RetryBudget, RetryPolicy, SnapshotError, Verdict,
    /// };
    /// type D = Duration<1_000>;
    /// type Link = Dependency<1_000, 4>;
    ///
    /// const UPLINK: DependencyConfig<1_000> = DependencyConfig::new(D::from_secs(60))
    ///     .budget(match RetryBudget::ratio(25, 4) { Ok(b) => b, Err(e) => panic!("{}", e.message()) })
    ///     .breaker(BreakerConfig::consecutive_failures(1, D::from_secs(600)));
    /// let mut link = Link::new(&UPLINK, Instant::from_ticks(0))?;
    /// # let policy = RetryPolicy::<1_000>::single_attempt().build()?;
    /// # let context = Context::new(D::from_secs(5), ReplaySafety::Unsafe);
    /// # let mut op = Operation::<1_000, Verdict<1_000>>::start(&policy, &UPLINK, context, Instant::from_ticks(0))?;
    /// # let Action::Dispatch(attempt) = op.poll(Instant::from_ticks(0), &mut link, &mut ()) else { unreachable!() };
    /// # struct NoDraws;
    /// # impl relent_core::rand_core::RngCore for NoDraws {
    /// #     fn next_u32(&mut self) -> u32 { unreachable!("a single attempt draws no delay") }
    /// #     fn next_u64(&mut self) -> u64 { unreachable!("a single attempt draws no delay") }
    /// #     fn fill_bytes(&mut self, _: &mut [u8]) { unreachable!("a single attempt draws no delay") }
    /// # }
    /// # op.on_failure(attempt, Instant::from_ticks(20), &mut link, &mut NoDraws, Verdict::Retryable, &mut ());
    /// // An uplink failed at 20 ms (the operation is hidden here): the circuit is open for 10 min.
    /// assert_eq!(link.circuit_open_until(Instant::from_ticks(20)), Some(Instant::from_ticks(600_020)));
    ///
    /// let mut retained = [0u8; Link::SNAPSHOT_LEN];
    /// link.save(Instant::from_ticks(42_000), &mut retained)?;
    ///
    /// // The reset: ticks restart near zero, and the RTC says 300 s passed.
    /// let now = Instant::from_ticks(5);
    /// let (link, refused) = Link::restore_or_new(&UPLINK, &retained, now, D::from_secs(300))?;
    /// assert_eq!(refused, None);
    /// // Still open, for what was left of the break: 600,020 - 42,000 - 300,000 ms from now.
    /// assert_eq!(link.circuit_open_until(now), Some(Instant::from_ticks(5 + 258_020)));
    ///
    /// // A corrupted snapshot is refused, with why, and the link starts fresh.
    /// retained[20] ^= 0x40;
    /// let (link, refused) = Link::restore_or_new(&UPLINK, &retained, now, D::from_secs(300))?;
    /// assert_eq!((refused, link.circuit_open_until(now)), (Some(SnapshotError::Corrupted), None));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn save(&self, now: Instant<HZ>, out: &mut [u8]) -> Result<usize, SnapshotError> {
        let now = now.as_ticks();
        let mut w = Writer::new(out);
        w.u32(u32::from_le_bytes(MAGIC));
        w.u8(SNAPSHOT_VERSION);
        w.u64(HZ);
        w.u16(u16::try_from(N).unwrap_or(u16::MAX));
        w.u16(u16::try_from(L).unwrap_or(u16::MAX));
        w.u8(Self::PARTS);
        let (window, tokens, breaker, limiter, airtime, cooldown) = self.parts();
        window.save(&mut w, now);
        tokens.0.iter().for_each(|p| p.save(&mut w, now));
        breaker.0.iter().for_each(|p| p.save(&mut w, now));
        limiter.0.iter().for_each(|p| p.save(&mut w, now));
        airtime.save(&mut w, now);
        cooldown.0.iter().for_each(|p| p.save(&mut w, now));
        let body = w.written();
        if w.overflow {
            return Err(SnapshotError::TooShort);
        }
        let crc = crc32(out.get(..body).unwrap_or(&[]));
        let mut w = Writer::new(out.get_mut(body..).unwrap_or(&mut []));
        w.u32(crc);
        if w.overflow {
            return Err(SnapshotError::TooShort);
        }
        Ok(body.saturating_add(4))
    }

    /// Reads a snapshot written by [`Dependency::save`] for `config`, rebasing its time onto `now`
    /// after a sleep of `slept` (real time, from an RTC; zero if none passed).
    ///
    /// What happened before the sleep keeps its place on the new clock as far as the clock can name
    /// it: a window's count from before `now`'s tick 0 is dropped. A clock that restarts at 0 at
    /// each boot should start a window or more ahead (relent-embassy's core clock runs 2^40 ticks
    /// ahead of embassy's, 2^30 with 32-bit ticks).
    ///
    /// Restore under the configuration the snapshot was saved under. Restored under another (a
    /// firmware update changed it, or the device kept the wrong one), the state holds nothing
    /// `config` would not allow: a break, a cooldown, a rate limit's debt and the airtime on record
    /// end no later than `config`'s own would, a token bucket holds at most its capacity, a count
    /// window its rule could not have filled is forgotten, and what `config` leaves out is
    /// dropped. To carry a state over to new numbers exactly, as a running dependency is, restore it
    /// under the old configuration and [`reconfigure`](Dependency::reconfigure) it to the new one.
    pub fn restore(
        config: &DependencyConfig<HZ>,
        bytes: &[u8],
        now: Instant<HZ>,
        slept: Duration<HZ>,
    ) -> Result<Self, SnapshotError> {
        // The header first, so that a snapshot of another version or shape is called that, not
        // "truncated" or "corrupted".
        let mut r = Reader::new(bytes);
        let short = SnapshotError::TooShort;
        if r.checked(Reader::u32).ok_or(short)? != u32::from_le_bytes(MAGIC) {
            return Err(SnapshotError::NotASnapshot);
        }
        let version = r.checked(Reader::u8).ok_or(short)?;
        if version != SNAPSHOT_VERSION {
            return Err(SnapshotError::OtherVersion { found: version });
        }
        let shape = |r: &mut Reader<'_>| -> Option<bool> {
            Some(
                r.checked(Reader::u64)? == HZ
                    && usize::from(r.checked(Reader::u16)?) == N
                    && usize::from(r.checked(Reader::u16)?) == L
                    && r.checked(Reader::u8)? == Self::PARTS,
            )
        };
        // A field that does not match is another shape even when the bytes after it are missing.
        if !shape(&mut r).ok_or(short)? {
            return Err(SnapshotError::OtherShape);
        }
        let len = Self::SNAPSHOT_LEN;
        let body_len = len.saturating_sub(4);
        let (Some(body), Some(tail)) = (bytes.get(..body_len), bytes.get(body_len..len)) else {
            return Err(short);
        };
        if Reader::new(tail).u32() != crc32(body) {
            return Err(SnapshotError::Corrupted);
        }
        // From here every field is there: the body's reads cannot run short.
        let fresh = Self::new(config, now).map_err(|_| SnapshotError::OtherConfig)?;
        let rebase = Rebase { now: now.as_ticks(), slept: slept.as_ticks() };
        let window = CallWindow::<N>::restore(&mut r, rebase, fresh.parts().0.bucket_width())?;
        let (_, tokens, breaker, limiter, _, cooldown) = fresh.parts();
        let (mut tokens, mut breaker, mut limiter, mut cooldown) =
            (tokens.clone(), breaker.clone(), limiter.clone(), cooldown.clone());
        for p in &mut tokens.0 {
            *p = TokenBucket::restore(&mut r, rebase);
        }
        for p in &mut breaker.0 {
            *p = Breaker::restore(&mut r, rebase)?;
        }
        for p in &mut limiter.0 {
            *p = Limiter::restore(&mut r, rebase);
        }
        let airtime = AirtimeLog::<L>::restore(&mut r, rebase)?;
        for p in &mut cooldown.0 {
            *p = Cooldown::restore(&mut r, rebase);
        }
        let mut restored = Self::from_parts(window, tokens, breaker, limiter, airtime, cooldown);
        restored.bound_restored(config, now);
        Ok(restored)
    }

    /// As [`Dependency::restore`], falling back to a fresh state (and saying why) when the snapshot
    /// is refused. `Err` only when `config` itself is invalid.
    pub fn restore_or_new(
        config: &DependencyConfig<HZ>,
        bytes: &[u8],
        now: Instant<HZ>,
        slept: Duration<HZ>,
    ) -> Result<(Self, Option<SnapshotError>), crate::ConfigError> {
        match Self::restore(config, bytes, now, slept) {
            Ok(d) => Ok((d, None)),
            Err(e) => Self::new(config, now).map(|d| (d, Some(e))),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    #[test]
    fn a_snapshot_starts_with_its_header_and_one_bit_per_part_compiled_in() {
        let config = DependencyConfig::<1_000>::new(Duration::<1_000>::from_secs(10));
        let dep = Dependency::<1_000, 4, 2>::new(&config, Instant::<1_000>::from_ticks(0)).unwrap();
        let mut out = [0u8; Dependency::<1_000, 4, 2>::SNAPSHOT_LEN];
        dep.save(Instant::<1_000>::from_ticks(0), &mut out).unwrap();
        // Magic, version, tick rate, buckets, airtime log entries, then the parts: the token bucket,
        // the breaker, the rate limit and the cooldown, bits 0 to 3, and the throttle's counts in
        // the window, bit 4.
        assert_eq!(out[..4], *b"RLNT");
        assert_eq!(out[4], SNAPSHOT_VERSION);
        assert_eq!(out[5..13], 1_000u64.to_le_bytes());
        assert_eq!(out[13..17], [4, 0, 2, 0]);
        let parts = u8::from(cfg!(feature = "token-bucket"))
            | u8::from(cfg!(feature = "breaker")) << 1
            | u8::from(cfg!(feature = "rate-limit")) << 2
            | u8::from(cfg!(feature = "cooldown")) << 3
            | u8::from(cfg!(feature = "throttle")) << 4;
        assert_eq!(out[17], parts);
    }

    /// `restore` reads the body without checking each field, because it checked the length once:
    /// that holds only if every part reads back exactly the bytes it wrote, `SNAPSHOT_LEN` of them.
    #[test]
    fn every_part_reads_back_exactly_the_bytes_it_wrote() {
        const N: usize = 4;
        const L: usize = 3;
        let config = DependencyConfig::<1_000>::new(Duration::<1_000>::from_secs(8));
        let dep = Dependency::<1_000, N, L>::new(&config, Instant::<1_000>::from_ticks(0)).unwrap();
        let (window, tokens, breaker, limiter, airtime, cooldown) = dep.parts();
        let rebase = Rebase { now: 0, slept: 0 };
        let mut buf = [0u8; Dependency::<1_000, N, L>::SNAPSHOT_LEN];
        let mut check =
            |name: &str, save: &dyn Fn(&mut Writer<'_>), restore: &dyn Fn(&mut Reader<'_>), len| {
                let mut w = Writer::new(&mut buf);
                save(&mut w);
                let written = w.written();
                let mut r = Reader::new(&buf);
                restore(&mut r);
                let read = r.position();
                assert_eq!(
                    (written, read),
                    (len, len),
                    "{name}: wrote {written} bytes and read {read}, of {len}"
                );
            };
        check(
            "window",
            &|w| window.save(w, 0),
            &|r| drop(CallWindow::<N>::restore(r, rebase, window.bucket_width())),
            CallWindow::<N>::SNAPSHOT_LEN,
        );
        check(
            "airtime",
            &|w| airtime.save(w, 0),
            &|r| drop(AirtimeLog::<L>::restore(r, rebase)),
            AirtimeLog::<L>::SNAPSHOT_LEN,
        );
        if let Some(p) = tokens.get() {
            check(
                "token bucket",
                &|w| p.save(w, 0),
                &|r| _ = TokenBucket::restore(r, rebase),
                TokenBucket::SNAPSHOT_LEN,
            );
        }
        if let Some(p) = breaker.get() {
            check(
                "breaker",
                &|w| p.save(w, 0),
                &|r| drop(Breaker::restore(r, rebase)),
                Breaker::SNAPSHOT_LEN,
            );
        }
        if let Some(p) = limiter.get() {
            check(
                "rate limit",
                &|w| p.save(w, 0),
                &|r| _ = Limiter::restore(r, rebase),
                Limiter::SNAPSHOT_LEN,
            );
        }
        if let Some(p) = cooldown.get() {
            check(
                "cooldown",
                &|w| p.save(w, 0),
                &|r| _ = Cooldown::restore(r, rebase),
                Cooldown::SNAPSHOT_LEN,
            );
        }
        assert_eq!(CallWindow::<N>::SNAPSHOT_LEN, 16 + N * if cfg!(feature = "throttle") { 16 } else { 12 });
        assert_eq!(AirtimeLog::<L>::SNAPSHOT_LEN, L * 12);
    }

    #[test]
    fn every_refusal_has_its_stable_code() {
        let codes = [
            SnapshotError::TooShort,
            SnapshotError::NotASnapshot,
            SnapshotError::OtherVersion { found: 1 },
            SnapshotError::OtherShape,
            SnapshotError::OtherConfig,
            SnapshotError::Corrupted,
        ]
        .map(SnapshotError::as_str);
        assert_eq!(
            codes,
            [
                "snapshot_too_short",
                "not_a_snapshot",
                "snapshot_other_version",
                "snapshot_other_shape",
                "snapshot_other_config",
                "snapshot_corrupted"
            ]
        );
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        // The CRC-32/IEEE check value of "123456789".
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    /// The snapshot's bytes, fixed for two feature sets: every protection compiled in, and none. CI
    /// runs both with 64-bit and with 32-bit ticks, which must write the same bytes, and the first
    /// under miri on a big-endian target too (`cargo +nightly miri test -p relent-core --lib
    /// --target powerpc-unknown-linux-gnu`).
    #[cfg(any(
        all(
            feature = "token-bucket",
            feature = "breaker",
            feature = "rate-limit",
            feature = "duty-cycle",
            feature = "cooldown",
            feature = "throttle"
        ),
        not(any(
            feature = "token-bucket",
            feature = "breaker",
            feature = "rate-limit",
            feature = "duty-cycle",
            feature = "cooldown",
            feature = "throttle"
        ))
    ))]
    mod golden {
        use super::*;

        /// What [`golden_snapshot`] saves with every protection compiled in. (This module is built
        /// with every protection or with none, so one feature tells which.)
        #[cfg(feature = "breaker")]
        const GOLDEN: &str = concat!(
            // magic RLNT, version, tick rate, buckets, airtime entries, parts compiled in (bit 4: the
            // window counts the throttle's refusals)
            "524c4e5402e803000000000000040002001f",
            // the window: its width, the newest bucket's age (5 s), then each bucket's calls,
            // retries, failures and refusals by the throttle, newest first
            "983a0000000000008813000000000000",
            "00000000000000000000000001000000",
            "03000000010000000200000000000000",
            "0000000000000000000000000000000000000000000000000000000000000000",
            // the token bucket
            "80a90300000000000627000000000000",
            // the breaker
            "012a4e0000000000000000000000000000000000000000000000",
            // the rate limit
            "401901000000000000000000",
            // the airtime log
            "a0a500000000000090010000eac400000000000020030000",
            // the cooldown
            "ba00090000000000",
            // CRC-32
            "b414afa3",
        );

        /// What the same build saved before the throttle's counts (commit ac32aba, the same version
        /// of the format): a device updated in the field with the throttle compiled in must refuse
        /// it as another shape, which the parts byte says, not misread it.
        #[cfg(feature = "breaker")]
        const BEFORE_THROTTLE: &str = concat!(
            "524c4e5402e803000000000000040002000f",
            "983a000000000000204e00000000000003000000010000000200000000000000000000000000000000000000",
            "0000000000000000000000000000000000000000",
            "80a90300000000000627000000000000",
            "012a4e0000000000000000000000000000000000000000000000",
            "401901000000000000000000",
            "a0a500000000000090010000eac400000000000020030000",
            "ba00090000000000",
            "e5a8d64c",
        );

        #[cfg(feature = "breaker")]
        #[test]
        fn a_snapshot_saved_before_the_throttles_counts_is_another_shape() {
            let bytes: std::vec::Vec<u8> = (0..BEFORE_THROTTLE.len() / 2)
                .map(|i| u8::from_str_radix(&BEFORE_THROTTLE[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            let (config, _, _) = golden_snapshot();
            let restored = Dependency::<1_000, 4, 2>::restore(
                &config,
                &bytes,
                Instant::from_ticks(0),
                Duration::from_ticks(0),
            );
            assert_eq!(restored.err(), Some(SnapshotError::OtherShape));
        }

        /// The same with no protection compiled in: the header, the window and the (unused) airtime log.
        #[cfg(not(feature = "breaker"))]
        const GOLDEN: &str = concat!(
            // magic RLNT, version, tick rate, buckets, airtime entries, parts compiled in
            "524c4e5402e8030000000000000400020000",
            // the window
            "983a000000000000204e00000000000003000000010000000200000000000000000000000000000000000000",
            "0000000000000000000000000000000000000000",
            // the airtime log
            "000000000000000000000000000000000000000000000000",
            // CRC-32
            "79e40c8a",
        );

        /// A dependency with something in every part compiled in, saved at 20 s: a window with counts,
        /// spent tokens, rate units owed, two 400 ms frames of airtime, an open circuit and a cooldown
        /// (a success at 2 s, then two failures in a row at 10 s, the second saying "retry after
        /// 600 s").
        fn golden_snapshot()
        -> (DependencyConfig<1_000>, Dependency<1_000, 4, 2>, [u8; Dependency::<1_000, 4, 2>::SNAPSHOT_LEN])
        {
            use crate::budget::RetryBudget;
            use crate::classify::Verdict;
            use crate::operation::{Action, Context, Operation};
            use crate::policy::RetryPolicy;
            use crate::safety::ReplaySafety;
            type D = Duration<1_000>;
            type I = Instant<1_000>;

            /// Every draw at the top of its interval.
            struct Top;
            impl rand_core::RngCore for Top {
                fn next_u32(&mut self) -> u32 {
                    u32::MAX
                }
                fn next_u64(&mut self) -> u64 {
                    u64::MAX
                }
                fn fill_bytes(&mut self, dst: &mut [u8]) {
                    dst.fill(u8::MAX);
                }
            }

            let config = DependencyConfig::new(D::from_secs(60));
            #[cfg(feature = "token-bucket")]
            let config =
                config.budget(RetryBudget::token_bucket(5, 5, D::from_secs(60), D::from_secs(5)).unwrap());
            #[cfg(not(feature = "token-bucket"))]
            let config = config.budget(RetryBudget::ratio(20, 5).unwrap());
            #[cfg(feature = "breaker")]
            let config =
                config.breaker(crate::breaker::BreakerConfig::consecutive_failures(2, D::from_secs(30)));
            #[cfg(feature = "rate-limit")]
            let config = config.rate_limit(crate::limiter::RateLimit::new(1, D::from_secs(30)).burst(3));
            #[cfg(feature = "duty-cycle")]
            let config = config.duty_cycle(crate::duty::DutyCycle::per_mille(100, D::from_secs(60)));
            #[cfg(feature = "cooldown")]
            let config = config.cooldown(D::from_secs(900));
            #[cfg(feature = "throttle")]
            let config = config.client_throttle(crate::ClientThrottle::K2);
            let policy = RetryPolicy::constant(2, D::from_millis(10))
                .attempt_timeout(D::from_secs(2))
                .build()
                .unwrap();
            let context = Context::new(D::from_secs(10), ReplaySafety::replayable_read(D::from_secs(3_600)))
                .airtime(D::from_millis(400));

            let mut dep = Dependency::<1_000, 4, 2>::new(&config, I::from_ticks(0)).unwrap();
            // A success at 2 s, then the two failures at 10 s.
            let mut op: Operation<'_, 1_000, Verdict<1_000>> =
                Operation::start(&policy, &config, context, I::from_ticks(2_000)).unwrap();
            let Action::Dispatch(a) = op.poll(I::from_ticks(2_000), &mut dep, &mut ()) else { panic!() };
            op.on_success(a, I::from_ticks(2_150), &mut dep, &mut ());
            let mut now = I::from_ticks(10_000);
            let mut op = Operation::start(&policy, &config, context, now).unwrap();
            let mut verdicts = [Verdict::Retryable, Verdict::RetryableAfter(D::from_secs(600))].into_iter();
            loop {
                match op.poll(now, &mut dep, &mut ()) {
                    Action::Dispatch(a) => {
                        let verdict = verdicts.next().unwrap();
                        op.on_failure(a, now, &mut dep, &mut Top, verdict, &mut ());
                    }
                    Action::Wait { until } => now = until,
                    Action::Done => break,
                }
            }
            // An attempt the client throttle refused at 15 s, counted as one would be (here the
            // cooldown refuses every attempt before the throttle is asked).
            #[cfg(feature = "throttle")]
            dep.window.record_throttled(I::from_ticks(15_000));
            let now = I::from_ticks(20_000);
            #[cfg(feature = "breaker")]
            assert_eq!(dep.circuit_open_until(now), Some(I::from_ticks(40_010)));
            #[cfg(feature = "cooldown")]
            assert_eq!(dep.cooldown_until(now), Some(I::from_ticks(610_010)));
            #[cfg(feature = "rate-limit")]
            assert_eq!(
                dep.next_rate_unit(&config, now),
                I::from_ticks(32_000),
                "three units taken at one per 30 s, a burst of 3: the next at 32 s"
            );
            let mut bytes = [0u8; Dependency::<1_000, 4, 2>::SNAPSHOT_LEN];
            assert_eq!(dep.save(now, &mut bytes), Ok(bytes.len()));
            (config, dep, bytes)
        }

        fn hex(bytes: &[u8]) -> std::string::String {
            use core::fmt::Write;
            let mut s = std::string::String::new();
            for b in bytes {
                write!(s, "{b:02x}").unwrap();
            }
            s
        }

        /// A device updated in the field restores what the build before it saved. Bytes of another
        /// layout under the same version would pass every check, the CRC included, and be misread; so
        /// the layout changes only with [`SNAPSHOT_VERSION`], and then the old bytes are refused.
        #[test]
        fn the_snapshot_layout_changes_only_with_its_version() {
            let (config, mut original, bytes) = golden_snapshot();
            assert_eq!(
                hex(&bytes),
                GOLDEN,
                "the snapshot's bytes changed. If the layout changed on purpose, bump SNAPSHOT_VERSION (a \
                 device must refuse what an older build saved, not misread it) and replace GOLDEN with \
                 the `left` bytes"
            );
            // And the bytes mean what was saved. Restored at 50 s after a sleep of 15 s (a bucket of
            // the window: ignoring the sleep would misplace the counts by one), the dependency reads
            // out as the original does 15 s earlier (its 50 s is the original's 35 s: 20 s saved,
            // then 15 s slept), from the instant of saving to after the cooldown.
            let (later, at) = (15_000, Instant::<1_000>::from_ticks);
            let mut restored =
                Dependency::<1_000, 4, 2>::restore(&config, &bytes, at(50_000), Duration::from_ticks(15_000))
                    .unwrap();
            for t in
                [20_000, 31_999, 32_000, 40_009, 40_010, 44_999, 45_000, 59_999, 60_000, 610_009, 610_010]
            {
                let read = |d: &mut Dependency<1_000, 4, 2>, shift: Ticks| {
                    let now = at(t + shift);
                    let back = |i: Instant<1_000>| i.as_ticks() - shift;
                    (
                        d.counts(now),
                        d.retries_available(&config, now),
                        (d.circuit(now), d.circuit_open_until(now).map(back)),
                        d.cooldown_until(now).map(back),
                        back(d.next_rate_unit(&config, now)),
                        d.next_airtime(&config, now, Duration::from_millis(400)).map(back),
                        d.airtime_used(&config, now),
                    )
                };
                assert_eq!(read(&mut restored, later), read(&mut original, 0), "at {t} ms");
            }
        }
    }

    #[test]
    fn rebasing_moves_future_instants_closer_and_past_ones_further() {
        let r = Rebase { now: 1_000, slept: 300 };
        assert_eq!(r.until(500), 1_200, "500 remained, 300 slept: 200 remain");
        assert_eq!(r.until(200), 1_000, "ended during the sleep: now");
        assert_eq!(r.until(0), 0, "there was none");
        assert_eq!(r.ago(100), 600);
        assert_eq!(r.ago(5_000), 0);
    }
}
