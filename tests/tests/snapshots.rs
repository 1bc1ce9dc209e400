//! Snapshots across a deep sleep: the state survives as bytes, time is rebased onto the restarted
//! clock, and nothing malformed is trusted.

use relent_core::{
    Action, BreakerConfig, CircuitState, Context, Dependency, DependencyConfig, DutyCycle, Operation,
    RateLimit, ReplaySafety, RetryBudget, RetryPolicy, SnapshotError, Verdict,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, HZ, T, valid};

const CONFIG: DependencyConfig<HZ> = DependencyConfig::new(D::from_secs(60))
    .budget(valid(RetryBudget::token_bucket(5, 5, D::from_secs(60), D::from_secs(5))))
    .breaker(BreakerConfig::consecutive_failures(2, D::from_secs(30)))
    .rate_limit(RateLimit::new(10, D::from_secs(1)).burst(5))
    .duty_cycle(DutyCycle::per_mille(100, D::from_secs(60)))
    .cooldown(D::from_secs(900));

const ONCE: RetryPolicy<HZ> = valid(RetryPolicy::single_attempt().attempt_timeout(D::from_secs(2)).build());
const RETRYING: RetryPolicy<HZ> =
    valid(RetryPolicy::constant(2, D::from_millis(10)).attempt_timeout(D::from_secs(2)).build());

type Dep = Dependency<HZ, 4, 4>;
const LEN: usize = Dep::SNAPSHOT_LEN;

fn context() -> Context<HZ> {
    Context::new(D::from_secs(10), ReplaySafety::replayable_read(D::from_secs(3600)))
        .airtime(D::from_millis(400))
}

/// Runs one operation at `at` ms whose attempts fail with `verdicts`, in order, and returns how
/// many attempts it made.
fn failing_op(dep: &mut Dep, policy: &RetryPolicy<HZ>, at: u64, verdicts: &[Verdict<HZ>]) -> usize {
    let mut now = T::from_ticks(at);
    let mut op = Operation::start(policy, &CONFIG, context(), now).unwrap();
    let mut verdicts = verdicts.iter().copied();
    let mut attempts = 0;
    loop {
        match op.poll(now, dep, &mut ()) {
            Action::Dispatch(a) => {
                attempts += 1;
                let verdict = verdicts.next().unwrap_or(Verdict::Retryable);
                op.on_failure(a, now, dep, &mut Fixed::top(), verdict, &mut ());
            }
            Action::Wait { until } => now = until,
            Action::Done => return attempts,
        }
    }
}

/// A dependency with something in every part: counts, a spent token, rate units taken, airtime
/// spent (two 400 ms frames, at 10 s and 10.01 s), an open circuit (two failures in a row at 10 s,
/// open until 40.01 s) and a 600 s cooldown (the second failure said "retry after 600 s"). Saved
/// at 20 s.
fn busy_dependency() -> (Dep, [u8; LEN]) {
    let mut dep = Dep::new(&CONFIG, T::from_ticks(0)).unwrap();
    let attempts = failing_op(
        &mut dep,
        &RETRYING,
        10_000,
        &[Verdict::Retryable, Verdict::RetryableAfter(D::from_secs(600))],
    );
    assert_eq!(attempts, 2);
    assert_eq!(dep.circuit(T::from_ticks(20_000)), CircuitState::Open);
    assert_eq!(dep.cooldown_until(T::from_ticks(20_000)), Some(T::from_ticks(610_010)));
    let mut bytes = [0u8; LEN];
    assert_eq!(dep.save(T::from_ticks(20_000), &mut bytes), Ok(LEN));
    (dep, bytes)
}

#[test]
fn the_snapshot_size_is_a_compile_time_constant() {
    const SIZE: usize = Dependency::<1_000, 4>::SNAPSHOT_LEN;
    assert_eq!(SIZE, 164);
    assert_eq!(
        Dependency::<1_000, 10>::SNAPSHOT_LEN,
        164 + 6 * 16,
        "16 bytes a bucket: calls, retries, failures and the throttle's refusals"
    );
    assert_eq!(Dependency::<1_000, 4, 8>::SNAPSHOT_LEN, 164 + 8 * 12, "12 bytes an airtime entry");
}

#[test]
fn a_snapshot_restored_with_no_sleep_behaves_as_the_original() {
    let (mut original, bytes) = busy_dependency();
    let now = T::from_ticks(20_000);
    let mut restored = Dep::restore(&CONFIG, &bytes, now, D::from_ticks(0)).unwrap();
    for at in [20_000, 25_000, 49_999, 50_000, 70_000] {
        let t = T::from_ticks(at);
        assert_eq!(restored.counts(t), original.counts(t), "counts at {at}");
        assert_eq!(restored.circuit(t), original.circuit(t), "circuit at {at}");
        assert_eq!(restored.cooldown_until(t), original.cooldown_until(t), "cooldown at {at}");
        assert_eq!(restored.next_rate_unit(&CONFIG, t), original.next_rate_unit(&CONFIG, t), "rate at {at}");
        assert_eq!(restored.airtime_used(&CONFIG, t), original.airtime_used(&CONFIG, t), "airtime at {at}");
        let frame = D::from_millis(5_500);
        assert_eq!(
            restored.next_airtime(&CONFIG, t, frame),
            original.next_airtime(&CONFIG, t, frame),
            "next airtime at {at}"
        );
        assert_eq!(
            restored.retries_available(&CONFIG, t),
            original.retries_available(&CONFIG, t),
            "budget at {at}"
        );
    }
}

#[test]
fn after_a_deep_sleep_what_should_still_hold_holds_and_what_ended_has_ended() {
    let (_, bytes) = busy_dependency();
    // The tick counter restarts at 0; the RTC says 400 s passed. 590.01 s of cooldown were left at
    // the save: 190.01 s remain. The circuit's break ended during the sleep.
    let woke = T::from_ticks(50);
    let mut dep = Dep::restore(&CONFIG, &bytes, woke, D::from_secs(400)).unwrap();
    assert_eq!(dep.cooldown_until(woke), Some(T::from_ticks(50 + 190_010)));
    assert_eq!(dep.circuit(woke), CircuitState::HalfOpen);
    // The next uplink is deferred for what remains, without being sent.
    let mut op = Operation::<HZ, Verdict<HZ>>::start(&ONCE, &CONFIG, context(), woke).unwrap();
    assert_eq!(op.poll(woke, &mut dep, &mut ()), Action::Done);
    let done = op.take_completion().unwrap();
    assert_eq!((done.code(), done.summary.dispatched), ("cooldown_active", 0));
    assert_eq!(done.not_before, Some(T::from_ticks(190_060)));

    // Slept 700 s: the cooldown ended during the sleep too.
    let dep = Dep::restore(&CONFIG, &bytes, woke, D::from_secs(700)).unwrap();
    assert_eq!(dep.cooldown_until(woke), None);
}

#[test]
fn an_open_circuit_still_open_after_a_short_sleep_stays_open_for_what_remains() {
    let mut dep = Dep::new(&CONFIG, T::from_ticks(0)).unwrap();
    failing_op(&mut dep, &RETRYING, 1_000, &[]); // two failures: opens at 1.01 s, until 31.01 s
    let mut bytes = [0u8; LEN];
    dep.save(T::from_ticks(11_010), &mut bytes).unwrap(); // 20 s of the break remain
    let woke = T::from_ticks(0);
    let dep = Dep::restore(&CONFIG, &bytes, woke, D::from_secs(5)).unwrap();
    assert_eq!(dep.circuit_open_until(woke), Some(T::from_ticks(15_000)));
}

#[test]
fn an_isolated_circuit_stays_isolated_after_any_sleep_until_the_operator_closes_it() {
    let mut dep = Dep::new(&CONFIG, T::from_ticks(0)).unwrap();
    dep.isolate_circuit(&CONFIG).unwrap();
    let mut bytes = [0u8; LEN];
    dep.save(T::from_ticks(1_000), &mut bytes).unwrap();
    let woke = T::from_ticks(0);
    let mut dep = Dep::restore(&CONFIG, &bytes, woke, D::from_secs(30 * 24 * 3600)).unwrap();
    assert_eq!((dep.circuit(woke), dep.circuit_open_until(woke)), (CircuitState::Isolated, None));
    assert_eq!(failing_op(&mut dep, &ONCE, 0, &[]), 0, "refused unsent");
    assert_eq!(dep.close_circuit(&CONFIG), Ok(Some(CircuitState::Closed)));
    assert_eq!(failing_op(&mut dep, &ONCE, 0, &[]), 1);
}

/// A fresh dependency after `n` frames of 400 ms sent back to back from 0, each acknowledged.
fn frames_back_to_back(n: u64) -> Dep {
    let mut dep = Dep::new(&CONFIG, T::from_ticks(0)).unwrap();
    for i in 0..n {
        let at = T::from_ticks(i * 400);
        let mut op = Operation::<HZ, Verdict<HZ>>::start(&ONCE, &CONFIG, context(), at).unwrap();
        let Action::Dispatch(a) = op.poll(at, &mut dep, &mut ()) else { panic!("frame {i} not sent") };
        op.on_success(a, T::from_ticks(i * 400 + 400), &mut dep, &mut ());
    }
    dep
}

#[test]
fn airtime_spent_before_a_sleep_still_counts_after_it_for_what_remains_of_its_window() {
    // 15 frames of 400 ms back to back from 0 to 6 s: the whole 6 s a minute. The first stops
    // counting at 60.4 s, the last at 66 s.
    let dep = frames_back_to_back(15);
    let saved_at = T::from_ticks(10_000);
    assert_eq!(dep.airtime_used(&CONFIG, saved_at), D::from_secs(6));
    // Exact, the next 400 ms could go at 60.4 s; the log keeps 4 entries, so the 15 frames were
    // merged (conservatively) and it goes a little later, never earlier, and never after the last
    // frame has left at 66 s.
    let next = dep.next_airtime(&CONFIG, saved_at, D::from_millis(400)).unwrap().as_ticks();
    assert!((60_400..=66_000).contains(&next), "{next}");
    let mut bytes = [0u8; LEN];
    dep.save(saved_at, &mut bytes).unwrap();
    // Slept 20 s and woke on a clock restarted at 0: every departure is 30 s closer than at the
    // save (10 s of it on the old clock, 20 s asleep), on the new clock.
    let woke = T::from_ticks(50);
    let restored = Dep::restore(&CONFIG, &bytes, woke, D::from_secs(20)).unwrap();
    assert_eq!(restored.airtime_used(&CONFIG, woke), D::from_secs(6));
    for ms in [400, 800, 2_000, 6_000] {
        let frame = D::from_millis(ms);
        let before = dep.next_airtime(&CONFIG, saved_at, frame).unwrap().as_ticks();
        let after = restored.next_airtime(&CONFIG, woke, frame).unwrap().as_ticks();
        assert_eq!(after, before - 10_000 - 20_000 + 50, "a {ms} ms frame: the same instant, rebased");
    }
    // Slept past the last frame's window: nothing counts any more.
    let restored = Dep::restore(&CONFIG, &bytes, woke, D::from_secs(57)).unwrap();
    assert_eq!(restored.airtime_used(&CONFIG, woke), D::from_ticks(0));
}

/// CRC-32/IEEE, written here independently of the core's, to forge snapshots whose checksum is
/// right and whose contents are not.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = u32::MAX;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn an_airtime_log_that_save_could_not_have_written_is_refused_even_with_a_valid_checksum() {
    // Four frames, one log entry each, saved at 2 s.
    let dep = frames_back_to_back(4);
    let mut bytes = [0u8; LEN];
    dep.save(T::from_ticks(2_000), &mut bytes).unwrap();
    // The log is the 4 entries of 12 bytes (remaining u64, cost u32) before the cooldown and CRC.
    let log = LEN - 4 - 8 - 4 * 12;
    let entry = |b: &[u8; LEN], k: usize| {
        let at = log + 12 * k;
        (
            u64::from_le_bytes(b[at..at + 8].try_into().unwrap()),
            u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()),
        )
    };
    assert_eq!(entry(&bytes, 0), (58_400, 400), "the first frame ended at 0.4 s and counts until 60.4 s");
    assert_eq!(entry(&bytes, 3), (59_600, 400));
    let forge = |edit: &dyn Fn(&mut [u8; LEN])| {
        let mut forged = bytes;
        edit(&mut forged);
        let crc = crc32(&forged[..LEN - 4]).to_le_bytes();
        forged[LEN - 4..].copy_from_slice(&crc);
        Dep::restore(&CONFIG, &forged, T::from_ticks(0), D::from_ticks(0)).err()
    };
    assert_eq!(forge(&|_| {}), None, "the forging itself is sound: unchanged, it restores");
    // Out of order: the first two entries swapped.
    assert_eq!(
        forge(&|b| {
            let (first, second) = (log, log + 12);
            let tmp: [u8; 12] = b[first..first + 12].try_into().unwrap();
            b.copy_within(second..second + 12, first);
            b[second..second + 12].copy_from_slice(&tmp);
        }),
        Some(SnapshotError::Corrupted)
    );
    // An entry in use after one that is not.
    assert_eq!(forge(&|b| b[log + 12..log + 24].fill(0)), Some(SnapshotError::Corrupted));
    // Time still to count with no cost, and a cost with no time.
    assert_eq!(forge(&|b| b[log + 36 + 8..log + 48].fill(0)), Some(SnapshotError::Corrupted));
    assert_eq!(forge(&|b| b[log + 36..log + 44].fill(0)), Some(SnapshotError::Corrupted));
    // The same at the first entry, where order alone would not refuse it.
    assert_eq!(forge(&|b| b[log..log + 8].fill(0)), Some(SnapshotError::Corrupted));
}

#[test]
fn every_single_byte_corruption_is_refused() {
    let (_, bytes) = busy_dependency();
    let now = T::from_ticks(0);
    let mut refused = 0;
    for i in 0..LEN {
        for flip in 1..=255u8 {
            let mut bad = bytes;
            bad[i] ^= flip;
            assert!(
                Dep::restore(&CONFIG, &bad, now, D::from_ticks(0)).is_err(),
                "byte {i} xor {flip:#04x} was accepted"
            );
            refused += 1;
        }
    }
    assert_eq!(refused, LEN * 255);
}

#[test]
fn truncated_other_version_other_shape_and_other_config_snapshots_are_refused_with_their_errors() {
    let (_, bytes) = busy_dependency();
    let now = T::from_ticks(0);
    let zero = D::from_ticks(0);
    for len in 0..LEN {
        assert_eq!(
            Dep::restore(&CONFIG, &bytes[..len], now, zero).err(),
            Some(SnapshotError::TooShort),
            "{len} bytes"
        );
    }
    // The header is read field by field: one that does not match names the mismatch even when the
    // bytes after it are missing.
    let mut other_rate = bytes;
    other_rate[5] ^= 1;
    assert_eq!(
        Dep::restore(&CONFIG, &other_rate[..13], now, zero).err(),
        Some(SnapshotError::OtherShape),
        "another tick rate, the header cut short after it"
    );
    assert_eq!(Dep::restore(&CONFIG, &other_rate[..12], now, zero).err(), Some(SnapshotError::TooShort));
    let mut other_version = bytes;
    other_version[4] = 1;
    assert_eq!(
        Dep::restore(&CONFIG, &other_version, now, zero).err(),
        Some(SnapshotError::OtherVersion { found: 1 })
    );
    assert_eq!(Dep::restore(&CONFIG, &[0u8; LEN], now, zero).err(), Some(SnapshotError::NotASnapshot));
    assert_eq!(
        Dependency::<HZ, 8, 4>::restore(&CONFIG, &bytes, now, zero).err(),
        Some(SnapshotError::OtherShape)
    );
    assert_eq!(
        Dependency::<HZ, 4, 8>::restore(&CONFIG, &bytes, now, zero).err(),
        Some(SnapshotError::OtherShape),
        "another airtime-log length"
    );
    let mut other_parts = bytes;
    other_parts[17] ^= 0b0100; // written by a build without the rate limiter
    assert_eq!(
        Dep::restore(&CONFIG, &other_parts, now, zero).err(),
        Some(SnapshotError::OtherShape),
        "another set of protections compiled in"
    );
    let other_window = DependencyConfig::new(D::from_secs(120)).budget(valid(RetryBudget::ratio(10, 1)));
    assert_eq!(Dep::restore(&other_window, &bytes, now, zero).err(), Some(SnapshotError::OtherConfig));
    // Too short for the checksum after the state, or for the state itself.
    for len in [LEN - 1, LEN / 2, 0] {
        let mut small = vec![0u8; len];
        assert_eq!(
            Dep::new(&CONFIG, now).unwrap().save(now, &mut small),
            Err(SnapshotError::TooShort),
            "{len}"
        );
    }
    assert_eq!(
        SnapshotError::OtherVersion { found: 1 }.to_string(),
        "the snapshot was written by format version 1, this build reads version 2: starting fresh"
    );
}

#[test]
fn a_refused_snapshot_starts_the_dependency_fresh_and_says_why() {
    let (dep, err) = Dep::restore_or_new(&CONFIG, &[0xAB; LEN], T::from_ticks(0), D::from_ticks(0)).unwrap();
    assert_eq!(err, Some(SnapshotError::NotASnapshot));
    assert_eq!(dep, Dep::new(&CONFIG, T::from_ticks(0)).unwrap());
}

#[test]
fn a_valid_snapshot_restores_through_restore_or_new_with_no_error() {
    let (_, bytes) = busy_dependency();
    let (now, slept) = (T::from_ticks(0), D::from_secs(3));
    let (dep, err) = Dep::restore_or_new(&CONFIG, &bytes, now, slept).unwrap();
    assert_eq!(err, None);
    assert_eq!(dep, Dep::restore(&CONFIG, &bytes, now, slept).unwrap());
    assert_ne!(dep, Dep::new(&CONFIG, now).unwrap(), "the busy state came back, not a fresh one");
}

/// CONFIG's shape (the same 60 s window) with shorter limits: a 2-token bucket, a 5 s break, a
/// duty cycle of 1 s in 10 s and a cooldown of at most 60 s. What a firmware update that changed
/// the configuration would restore its predecessor's snapshot under.
const SHORT: DependencyConfig<HZ> = DependencyConfig::new(D::from_secs(60))
    .budget(valid(RetryBudget::token_bucket(2, 2, D::from_secs(60), D::from_secs(5))))
    .breaker(BreakerConfig::consecutive_failures(2, D::from_secs(5)))
    .rate_limit(RateLimit::new(10, D::from_secs(1)).burst(5))
    .duty_cycle(DutyCycle::per_mille(100, D::from_secs(10)))
    .cooldown(D::from_secs(60));

/// CONFIG's window and nothing else.
const BARE: DependencyConfig<HZ> = DependencyConfig::new(D::from_secs(60));

#[test]
fn restored_under_shorter_limits_a_break_a_cooldown_and_a_token_bucket_hold_no_more_than_they_allow() {
    let (_, bytes) = busy_dependency();
    let now = T::from_ticks(0);
    // Under the configuration that saved it: open for 20.01 s more, cooling down for 590.01 s.
    let mut same = Dep::restore(&CONFIG, &bytes, now, D::from_ticks(0)).unwrap();
    assert_eq!(same.circuit_open_until(now), Some(T::from_ticks(20_010)));
    assert_eq!(same.cooldown_until(now), Some(T::from_ticks(590_010)));
    assert_eq!(same.retries_available(&CONFIG, now), Some(4));
    // Under SHORT: the break and the cooldown end at SHORT's longest, the bucket holds its capacity.
    let mut short = Dep::restore(&SHORT, &bytes, now, D::from_ticks(0)).unwrap();
    assert_eq!(short.circuit_open_until(now), Some(T::from_ticks(5_000)));
    assert_eq!(short.cooldown_until(now), Some(T::from_ticks(60_000)));
    assert_eq!(short.retries_available(&SHORT, now), Some(2));
    // Under a configuration without them, none of them holds anything.
    let bare = Dep::restore(&BARE, &bytes, now, D::from_ticks(0)).unwrap();
    assert_eq!((bare.circuit(now), bare.circuit_open_until(now)), (CircuitState::Closed, None));
    assert_eq!(bare.cooldown_until(now), None);
}

#[test]
fn restored_under_a_shorter_duty_cycle_airtime_counts_no_longer_than_its_window_and_allowance() {
    // 6 s of frames from 0 to 6 s, saved at 10 s: under CONFIG they count until 60.4 to 66 s.
    let mut bytes = [0u8; LEN];
    frames_back_to_back(15).save(T::from_ticks(10_000), &mut bytes).unwrap();
    let woke = T::from_ticks(50);
    let short = Dep::restore(&SHORT, &bytes, woke, D::from_ticks(0)).unwrap();
    // Under 1 s in 10 s, all 6 s still count, and no longer than 11 s (window and allowance).
    assert_eq!(short.airtime_used(&SHORT, woke), D::from_secs(6));
    assert_eq!(short.next_airtime(&SHORT, woke, D::from_millis(400)), Some(T::from_ticks(11_050)));
    assert_eq!(short.airtime_used(&SHORT, T::from_ticks(11_050)), D::from_ticks(0));
}

#[test]
fn restored_under_a_faster_rate_limit_the_debt_of_the_slower_one_is_cut_to_the_new_burst() {
    // One unit a minute: the unit taken at 0 leaves the next due at 60 s.
    const SLOW: DependencyConfig<HZ> = CONFIG.rate_limit(RateLimit::new(1, D::from_secs(60)));
    let mut dep = Dep::new(&SLOW, T::from_ticks(0)).unwrap();
    let now = T::from_ticks(0);
    let mut op = Operation::<HZ, Verdict<HZ>>::start(&ONCE, &SLOW, context(), now).unwrap();
    let Action::Dispatch(a) = op.poll(now, &mut dep, &mut ()) else { panic!("not sent") };
    op.on_success(a, T::from_ticks(400), &mut dep, &mut ());
    let mut bytes = [0u8; LEN];
    dep.save(T::from_ticks(400), &mut bytes).unwrap();
    let woke = T::from_ticks(1_000);
    let same = Dep::restore(&SLOW, &bytes, woke, D::from_ticks(0)).unwrap();
    assert_eq!(same.next_rate_unit(&SLOW, woke), T::from_ticks(60_600));
    // Under 10 a second in bursts of 5 (CONFIG), no more debt than five units taken at once leave:
    // the next unit 100 ms on.
    let fast = Dep::restore(&CONFIG, &bytes, woke, D::from_ticks(0)).unwrap();
    assert_eq!(fast.next_rate_unit(&CONFIG, woke), T::from_ticks(1_100));
}

/// A count-window breaker of 8 outcomes and 3 probes, on CONFIG's other protections.
const WINDOWED: DependencyConfig<HZ> =
    CONFIG.breaker(BreakerConfig::count_window(8, 50, 4, D::from_secs(10)).probes(3));

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config {
        cases: relent_tests::cases(512),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    })]

    /// Bytes that pass the checksum but that no configuration wrote (a busy dependency's snapshot
    /// with up to 12 bytes of its body rewritten, the CRC made right), restored under CONFIG or
    /// under another configuration: refused as corrupted or of another window, or restored holding
    /// no more than the configuration allows (a break, a cooldown, a rate debt, airtime, tokens),
    /// and never stuck: an hour on, a first attempt goes, unless an operator's isolation came
    /// through (which only the operator ends).
    #[test]
    fn a_forged_snapshot_is_refused_or_restores_within_the_configuration_and_never_stuck(
        edits in proptest::collection::vec((18..LEN - 4, proptest::prelude::any::<u8>()), 1..12),
        phase in proptest::option::of((0u8..4, proptest::prelude::any::<u8>())),
        under in 0usize..4,
        slept in 0u64..100_000,
    ) {
        let config = [CONFIG, SHORT, WINDOWED, BARE][under];
        let (_, mut bytes) = busy_dependency();
        // The breaker's phase (1, open, for 20.01 s more) and, after the 8 bytes of what remains
        // of its break, its half-open successes: before the limiter, the airtime log, the
        // cooldown and the CRC.
        let breaker = LEN - 4 - 8 - 4 * 12 - 12 - 26;
        assert_eq!((bytes[breaker], &bytes[breaker + 1..breaker + 9]), (1, &20_010u64.to_le_bytes()[..]));
        // Some cases set another phase (closed, open, half-open, isolated) and any count of successes.
        if let Some((tag, successes)) = phase {
            (bytes[breaker], bytes[breaker + 9]) = (tag, successes);
        }
        for (at, value) in edits {
            bytes[at] = value;
        }
        let crc = crc32(&bytes[..LEN - 4]).to_le_bytes();
        bytes[LEN - 4..].copy_from_slice(&crc);
        let now = T::from_ticks(1_000);
        let mut dep = match Dep::restore(&config, &bytes, now, D::from_ticks(slept)) {
            Ok(dep) => dep,
            Err(e) => {
                proptest::prop_assert!(matches!(e, SnapshotError::Corrupted | SnapshotError::OtherConfig), "{e:?}");
                return Ok(());
            }
        };
        let within = |d: D| T::from_ticks(now.as_ticks() + d.as_ticks());
        match config.circuit_breaker() {
            Some(b) => proptest::prop_assert!(dep.circuit_open_until(now) <= Some(within(b.break_for()))),
            None => proptest::prop_assert_eq!(dep.circuit(now), CircuitState::Closed),
        }
        proptest::prop_assert!(dep.cooldown_until(now) <= config.cooldown_max().map(within));
        if let Some(limit) = config.rate() {
            let interval = limit.period().as_ticks().div_ceil(u64::from(limit.count()));
            let latest = limit.max_wait_time().as_ticks() + u64::from(limit.burst_size()) * interval + 1;
            proptest::prop_assert!(dep.next_rate_unit(&config, now) <= within(D::from_ticks(latest)));
        }
        if let Some(duty) = config.duty() {
            let free = dep.next_airtime(&config, now, D::from_millis(400));
            proptest::prop_assert!(free <= Some(within(duty.window() + duty.airtime())));
        }
        if let Some(relent_core::BudgetKind::TokenBucket { capacity, .. }) = config.retry_budget().map(|b| b.kind()) {
            proptest::prop_assert!(dep.retries_available(&config, now).unwrap() <= capacity);
        }
        let later = T::from_ticks(now.as_ticks() + 3_600_000);
        if dep.circuit(later) != CircuitState::Isolated {
            let mut op = Operation::<HZ, Verdict<HZ>>::start(&ONCE, &config, context(), later).unwrap();
            let action = op.poll(later, &mut dep, &mut ());
            proptest::prop_assert!(matches!(action, Action::Dispatch(_)), "refused an hour on: {:?}", op.take_completion());
        }
    }
}
