//! The README's overload claims, checked on a reduced run (300 first attempts a second instead of
//! 3,000) so that CI can afford them in a debug build. `cargo run --release -p relent-tests --bin
//! evidence` prints the full tables.

use relent_core::Jitter;
use relent_tests::evidence::overload::{Budget, Outcome, Scenario, run};

fn reduced(s: Scenario) -> Outcome {
    run(&Scenario { rate: 300, ..s })
}

#[test]
fn without_a_budget_three_attempts_triple_the_load_during_an_outage() {
    let o = reduced(Scenario::seed_000(1, Budget::Unlimited, Jitter::Full));
    let a = o.amplification(2_000, 7_000);
    assert!((2.7..=3.0).contains(&a), "{a}");
}

#[test]
fn the_ratio_budget_keeps_amplification_near_its_share() {
    // 10 % of the calls in a 10 s window that also holds the 2 s before the outage: at most
    // (15 000 + 2 333) / 15 000 = 1.156 calls per first attempt, plus one bucket of slack.
    let o = reduced(Scenario::seed_000(1, Budget::Ratio, Jitter::Full));
    let a = o.amplification(2_000, 7_000);
    assert!(a <= 1.17, "{a}");
    assert!(o.amplification(7_000, 15_000) <= 1.02, "recovered: one attempt each");
}

#[test]
fn the_ratio_budget_passes_a_burst_as_the_outage_starts_then_holds_every_second_to_its_share() {
    // The window holds 2 s of healthy calls when the outage starts: 10 % of them is credit, spent in
    // the first few hundred milliseconds (the bump in the README's plots). From then on retries are
    // at most 10 % of all calls, 1/9 of the first attempts: 1.11 calls per first attempt, measured
    // here a second at a time (a reduced run has 30 first attempts per 100 ms, too few to measure
    // a ratio to the hundredth).
    let o = reduced(Scenario::seed_000(1, Budget::Ratio, Jitter::Full));
    let burst = o.amplification_over_time(2_500).iter().map(|p| p.1).fold(0.0, f64::max);
    assert!(burst >= 2.0, "the most in any 100 ms before 2.5 s: {burst} calls per first attempt");
    for second in 3..7 {
        let held = o.amplification(second * 1_000, (second + 1) * 1_000);
        assert!(held <= 1.15, "{held} calls per first attempt from {second} s to {} s", second + 1);
    }
    assert_eq!(o.amplification(0, 2_000), 1.0, "before the outage, one call per first attempt");
}

#[test]
fn the_token_bucket_keeps_amplification_near_its_size() {
    let o = reduced(Scenario::seed_000(1, Budget::Tokens, Jitter::Full));
    let a = o.amplification(2_000, 7_000);
    // A tenth of a second's first attempts, refilled each second: near 1.1, and not held far below.
    assert!((1.05..=1.15).contains(&a), "{a}");
}

/// A scenario small enough to follow by hand: 10 first attempts a second for 1 s (one each 100
/// ms), 5 ms calls, the dependency down over `outage_ms`, no jitter (the first retry 100 ms after a
/// failure, the second 200 ms), no budget.
fn by_hand(outage_ms: (u64, u64)) -> Scenario {
    Scenario {
        rate: 10,
        duration_ms: 1_000,
        outage_ms,
        call_ms: 5,
        layers: 1,
        budget: Budget::Unlimited,
        jitter: Jitter::None,
        seed: 1,
        capacity: None,
        throttle: None,
        critical_one_in: 1,
        reserve: None,
    }
}

/// Every number of a small outage, worked out by hand, the dependency down from 300 ms to 500 ms.
/// The call at 300 ms fails at 305 and is
/// retried at 405; that fails at 410 (still down) and is retried at 610. The call at 400 ms fails at
/// 405 and is retried at 505, after the outage. The call at 500 ms is the first one up.
#[test]
fn a_small_outage_without_jitter_makes_the_calls_worked_out_by_hand() {
    let o = run(&by_hand((300, 500)));
    assert_eq!(o.first.iter().sum::<u64>(), 10, "first attempts while they arrive, none at 1 s");
    assert_eq!(o.first[..10], [1; 10]);
    assert_eq!(o.calls[..10], [1, 1, 1, 1, 2, 2, 2, 1, 1, 1], "calls per 100 ms");
    assert_eq!(o.calls.iter().sum::<u64>(), 13, "the 10 first attempts and 3 retries");
    assert_eq!((o.succeeded, o.failed), (10, 0));
    // 400 and 405 share one 10 ms slot, as do 500 and 505.
    assert_eq!(o.peak_per_10ms, 2);
    assert_eq!(o.calls_per_10ms_from(400, 30), [(0, 2), (10, 0), (20, 0)]);
    assert_eq!(o.calls_per_10ms_from(600, 20), [(0, 1), (10, 1)]);
    assert_eq!(o.amplification(300, 700), 7.0 / 4.0);
    assert_eq!(
        o.amplification_over_time(700),
        [(0.0, 1.0), (0.1, 1.0), (0.2, 1.0), (0.3, 1.0), (0.4, 2.0), (0.5, 2.0), (0.6, 2.0)]
    );
    assert_eq!(o.calls_per_second(500), [(0.0, 10.0), (0.1, 10.0), (0.2, 10.0), (0.3, 10.0), (0.4, 20.0)]);
    assert_eq!(o.first_attempts_per_second(300), [(0.0, 10.0), (0.1, 10.0), (0.2, 10.0)]);
}

/// A longer outage, by hand, from 305 ms to 800 ms. The call at 300 ms ends at 305, as the
/// dependency goes down: it was not in flight, and succeeds. The call at 400 ms fails three times
/// (at 405, 510 and 715) and ends failed; those at 500, 600 and 700 ms fail until their retries at
/// 810, 910 and 805 find the dependency up.
#[test]
fn a_longer_outage_without_jitter_fails_one_operation_after_its_three_attempts() {
    let o = run(&by_hand((305, 800)));
    assert_eq!(o.calls[..10], [1, 1, 1, 1, 1, 2, 2, 3, 3, 2], "calls per 100 ms");
    assert_eq!(o.calls.iter().sum::<u64>(), 17, "the 10 first attempts and 7 retries");
    assert_eq!((o.succeeded, o.failed), (9, 1));
}

/// tower's budget, deposited for each call that succeeds (as its documentation's policy does), pays
/// for retries with the 2 s of successes before the outage: a tenth of them (59 in the reduced run:
/// 599 successes, the call in flight at 2 s failing), spent as the outage starts; then no retry
/// goes out until calls succeed again.
#[test]
fn towers_budget_spends_what_succeeded_before_the_outage_then_sends_no_retry() {
    let o = reduced(Scenario::seed_000(1, Budget::Tower, Jitter::Full));
    let retries = |from_ms: u64, to_ms: u64| -> u64 {
        let (from, to) = ((from_ms / 100) as usize, (to_ms / 100) as usize);
        o.calls[from..to].iter().sum::<u64>() - o.first[from..to].iter().sum::<u64>()
    };
    assert_eq!(retries(0, 2_000), 0, "nothing fails before the outage");
    let succeeded_before: u64 = o.accepted[..20].iter().sum();
    assert_eq!(succeeded_before, 599);
    assert_eq!(retries(2_000, 3_000), succeeded_before / 10, "a tenth of the successes before it");
    assert_eq!(retries(3_000, 7_000), 0, "nothing succeeds during it");
    let a = o.amplification(2_000, 7_000);
    assert!((1.03..=1.05).contains(&a), "{a}");
}

/// The names the README's tables and the plots' legends show.
#[test]
fn the_scenarios_are_named_as_the_readme_names_them() {
    use relent_tests::evidence::aws::Algorithm;
    assert_eq!(
        Algorithm::ALL.map(Algorithm::name),
        ["no backoff", "exponential", "full jitter", "equal jitter", "decorrelated jitter"]
    );
    let budgets = [Budget::Unlimited, Budget::Ratio, Budget::Tokens, Budget::Tower];
    assert_eq!(
        budgets.map(Budget::short_name),
        ["no budget", "ratio budget", "token bucket", "tower's budget"]
    );
    assert_eq!(
        budgets.map(Budget::name),
        [
            "no budget",
            "ratio budget (10 % of calls over 10 s)",
            "token bucket (10 % of a second's first attempts, refilled each second)",
            "tower's TpsBudget (10 % of the calls that succeeded over 10 s, no reserve)"
        ]
    );
}

/// The README shows the tables the evidence binary writes to `evidence/tables.md`, every row as it
/// is there (CI checks that a fresh run of the binary writes that file unchanged): a change to what
/// the simulations show cannot leave the README's tables behind.
#[test]
fn the_readme_holds_every_row_of_the_tables_the_evidence_binary_wrote() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read =
        |path: &str| std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (tables, readme) = (read("evidence/tables.md"), read("README.md"));
    let readme: std::collections::HashSet<&str> = readme.lines().collect();
    let rows: Vec<&str> = tables.lines().filter(|l| l.starts_with('|')).collect();
    // Nine tables: the AWS experiment's 5 algorithms, the budgets' 8 rows (tower's among them),
    // the jitter's 5, the client throttle's 3, the hedges' 5, the bulkheads' 4, the critical
    // reserve's 6, 2 and 3, each with its header and separator.
    assert_eq!(rows.len(), 7 + 10 + 7 + 5 + 7 + 6 + 8 + 4 + 5, "{tables}");
    let missing: Vec<&str> = rows.into_iter().filter(|row| !readme.contains(row)).collect();
    assert!(
        missing.is_empty(),
        "README.md lacks these rows of evidence/tables.md (rerun `cargo run --release -p relent-tests --bin \
         evidence` and copy its tables into the README):\n{}",
        missing.join("\n")
    );
}

/// The reduced runs' rate, counted: 300 first attempts a second, for the scenario's 15 s.
#[test]
fn first_attempts_arrive_at_the_scenarios_rate_for_its_duration() {
    let o = reduced(Scenario::seed_000(1, Budget::Ratio, Jitter::Full));
    assert_eq!(o.first.iter().sum::<u64>(), 300 * 15);
    assert!(o.first[..150].iter().all(|&n| n == 30), "30 in every 100 ms: {:?}", &o.first[..150]);
}

#[test]
fn three_layers_multiply_without_budgets_and_stay_near_the_share_with_them() {
    let none = reduced(Scenario::seed_000(3, Budget::Unlimited, Jitter::Full)).amplification(2_000, 7_000);
    let ratio = reduced(Scenario::seed_000(3, Budget::Ratio, Jitter::Full)).amplification(2_000, 7_000);
    assert!(none >= 10.0, "{none}");
    assert!(ratio <= 1.6, "{ratio}");
}

#[test]
fn without_jitter_the_dropped_calls_come_back_in_waves_at_the_backoff_delays() {
    // The calls in flight fail together when the node drops; without jitter their first retries
    // all land 100 ms later (the base delay), fail together when their 300 ms call ends (the node is
    // still down), and their second retries land 200 ms after that: 600 ms after the drop.
    let s = Scenario::node_drop(Jitter::None);
    let o = reduced(s);
    let mut slots: Vec<(u64, u64)> =
        o.calls_per_10ms_from(s.outage_ms.0, 1_500).into_iter().map(|(ms, calls)| (calls, ms)).collect();
    slots.sort_unstable_by(|a, b| b.cmp(a));
    let mut waves: Vec<u64> = slots.iter().take(2).map(|&(_, ms)| ms).collect();
    waves.sort_unstable();
    assert_eq!(waves, [100, 600], "ms after the drop of the two tallest 10 ms slots");
}

#[test]
fn full_jitter_flattens_the_wave_when_a_node_drops() {
    let none = reduced(Scenario::node_drop(Jitter::None)).peak_per_10ms;
    let full = reduced(Scenario::node_drop(Jitter::Full)).peak_per_10ms;
    assert!(full * 3 < none, "peak per 10 ms: {none} without jitter, {full} with full jitter");
}

/// Seed 000's outage fails its calls one by one as they arrive (3 every 10 ms in a reduced run),
/// not together. Without jitter each call's retries follow it by exactly 105 and 310 ms (5 ms calls,
/// waits of 100 and 200 ms), so from 310 ms into the outage to its end every 10 ms slot holds 3
/// first attempts, 3 second and 3 third: a steady 9, three calls per first attempt, and never more.
/// Full jitter draws each wait at random, and random draws bunch: its tallest slot is taller.
#[test]
fn without_jitter_calls_failing_as_they_arrive_are_retried_as_a_steady_stream_and_full_jitter_bunches_them() {
    let none = reduced(Scenario::seed_000(1, Budget::Unlimited, Jitter::None));
    let steady = none.calls_per_10ms_from(2_310, 4_690);
    assert_eq!(steady.len(), 469);
    assert!(steady.iter().all(|&(_, calls)| calls == 9), "{steady:?}");
    assert_eq!(none.peak_per_10ms, 9);
    assert_eq!(none.amplification(2_400, 7_000), 3.0);
    let full = reduced(Scenario::seed_000(1, Budget::Unlimited, Jitter::Full));
    assert!(full.peak_per_10ms > 9, "full jitter's tallest 10 ms: {}", full.peak_per_10ms);
}

/// Three layers without budgets, no jitter, worked out by hand: each layer's attempt timeout is
/// 500 ms, and an inner operation's deadline is its parent's attempt timeout. The innermost
/// operation calls at 0, 105 and 310 ms and ends at 315. The middle one waits 100 ms after it, and
/// its second attempt starts at 415 ms with 85 ms left: one call, and then neither layer has time
/// for its next wait (100 and 200 ms), so it ends at 420 ms with 4 calls. The outer operation's 3
/// attempts make 4 each: 12 calls per first attempt once the outage is 1.6 s old (its third attempts
/// have begun). Full jitter's waits are half as long on average, so more of them fit inside each
/// parent's attempt timeout, and it makes more calls, not fewer: jitter spreads failures that
/// happen together; it does not bound the multiplication, which budgets do.
#[test]
fn three_layers_without_jitter_make_twelve_calls_per_first_attempt_and_full_jitter_more() {
    let none = reduced(Scenario::seed_000(3, Budget::Unlimited, Jitter::None));
    assert_eq!(none.amplification(3_600, 7_000), 12.0);
    assert!(none.amplification_over_time(7_000)[36..].iter().all(|&(_, a)| a == 12.0));
    let full = reduced(Scenario::seed_000(3, Budget::Unlimited, Jitter::Full));
    let (n, f) = (none.amplification(2_000, 7_000), full.amplification(2_000, 7_000));
    assert!(
        f > n * 1.5,
        "calls per first attempt during the outage: {n} without jitter, {f} with full jitter"
    );
}

/// The SRE book's client-side throttling, on a reduced run: 300 first attempts a second, and a
/// dependency that accepts 100 calls a second (one in each 10 ms) from 5 s to 35 s.
mod throttling {
    use relent_core::ClientThrottle;
    use relent_tests::evidence::overload::{Outcome, Scenario, run};

    fn reduced(k: Option<u16>) -> Outcome {
        let s = Scenario::over_capacity(k.map(ClientThrottle::new));
        run(&Scenario { rate: 300, capacity: Some(100), ..s })
    }

    #[test]
    fn without_a_throttle_the_dependency_is_sent_three_attempts_and_the_budgets_share_per_call_it_accepts() {
        let (calls, accepted, throttled) = reduced(None).rates(15_000, 35_000);
        assert_eq!((accepted, throttled), (100.0, 0.0));
        // 300 first attempts and retries up to 10 % of all calls: 333 a second.
        assert!((3.2..=3.4).contains(&(calls / accepted)), "{calls} sent for {accepted} accepted");
    }

    #[test]
    fn the_throttle_sends_about_k_times_what_the_dependency_accepts() {
        for (k, sent) in [(2_000, 1.9..=2.15), (1_100, 1.0..=1.2)] {
            let (calls, accepted, throttled) = reduced(Some(k)).rates(15_000, 35_000);
            assert!(sent.contains(&(calls / accepted)), "K = {k}: {calls} sent for {accepted} accepted");
            assert!((99.0..=100.0).contains(&accepted), "K = {k}: it accepts as much as without");
            assert!(throttled > 0.0);
        }
    }

    #[test]
    fn after_the_dependency_recovers_the_throttle_refuses_until_its_window_forgets() {
        // K = 2 stops refusing some seconds after the recovery at 35 s; K = 1.1 only once the
        // window (10 s) holds none of the overload.
        let stops = |k| reduced(Some(k)).last_throttled_ms().unwrap();
        let k2 = stops(2_000);
        assert!((36_000..=40_000).contains(&k2), "{k2}");
        assert!(stops(1_100) > k2);
        assert!(stops(1_100) <= 45_000);
        assert_eq!(reduced(None).last_throttled_ms(), None);
    }
}

mod adaptive_limit {
    use relent_tests::evidence::adaptive::{Bulkhead, Outcome, Scenario, run};

    /// The README's scenario at a tenth of its rate and with 2 workers: 100 requests a second, the
    /// dependency serving 50 a second in the first slowdown and 16.7 in the second.
    fn reduced(b: Bulkhead) -> Outcome {
        run(&Scenario { rate: 100, workers: 2, ..Scenario::slowdowns(b) })
    }

    const FIRST: (u64, u64) = (10_000, 15_000);
    const SECOND: (u64, u64) = (25_000, 30_000);

    /// A fixed bulkhead larger than what the dependency can serve within the timeout lets its
    /// queue fill with calls whose callers time out: nothing answered in time, most of its work
    /// for nobody, and its backlog outlasts the slowdown.
    #[test]
    fn a_fixed_bulkhead_too_large_for_the_slowed_dependency_answers_nothing_in_time() {
        let o = reduced(Bulkhead::Fixed(20));
        for (from, to) in [FIRST, SECOND] {
            assert_eq!(o.answered_per_second(from, to), 0.0, "{from} to {to} ms");
        }
        assert!(o.wasted_percent() > 50.0, "{} %", o.wasted_percent());
        assert!(o.back_to_normal_after_ms(30_000, 40_000) > 1_000);
    }

    /// One right for the first slowdown is wrong for the second.
    #[test]
    fn a_fixed_bulkhead_right_for_one_slowdown_collapses_in_a_deeper_one() {
        let o = reduced(Bulkhead::Fixed(6));
        assert!(o.answered_per_second(FIRST.0, FIRST.1) >= 45.0);
        assert!(o.answered_per_second(SECOND.0, SECOND.1) < 2.0);
    }

    /// The adaptive limit (by default, halved on a sign of overload) answers about what the
    /// dependency can serve in both, within the timeout, with no timeouts once it has come down,
    /// little work for nobody, and everything answered again soon after.
    #[test]
    fn the_adaptive_limit_answers_what_the_dependency_can_serve_in_both_slowdowns() {
        let o = reduced(Bulkhead::Adaptive(20, 500));
        assert!(o.answered_per_second(FIRST.0, FIRST.1) >= 45.0);
        assert!(o.answered_per_second(SECOND.0, SECOND.1) >= 15.0);
        for (from, to) in [FIRST, SECOND] {
            assert_eq!(o.timed_out_per_second(from, to), 0.0, "{from} to {to} ms");
            assert!(o.percentile_ms(from, to, 990).unwrap() < 300.0, "{from} to {to} ms");
        }
        assert!(o.wasted_percent() < 10.0, "{} %", o.wasted_percent());
        assert!(o.back_to_normal_after_ms(30_000, 40_000) <= 500);
    }

    /// Halving comes down in a round; keeping 0.9 (Netflix's factor) takes several rounds, of
    /// timeouts whose calls the dependency serves for nobody.
    #[test]
    fn halving_wastes_less_of_the_dependencys_work_than_keeping_nine_tenths() {
        let (half, nine_tenths) =
            (reduced(Bulkhead::Adaptive(20, 500)), reduced(Bulkhead::Adaptive(20, 900)));
        assert!(
            half.wasted_percent() * 3.0 < nine_tenths.wasted_percent(),
            "{} % against {} %",
            half.wasted_percent(),
            nine_tenths.wasted_percent()
        );
    }
}

mod criticality {
    use relent_tests::evidence::adaptive::{Bulkhead, Outcome, Scenario, run};

    /// The adaptive limit's reduced scenario (100 requests a second, 2 workers), one request in
    /// ten critical: 10 a second, within the 16.7 the dependency serves in its second slowdown.
    fn reduced(b: Bulkhead, reserve: Option<u8>) -> Outcome {
        run(&Scenario { rate: 100, workers: 2, ..Scenario::mixed(b, reserve) })
    }

    const FIRST: (u64, u64) = (10_000, 15_000);
    const SECOND: (u64, u64) = (25_000, 30_000);

    /// Without a reserve, the bulkhead serves whichever request comes first: nine in ten are
    /// sheddable, and critical requests are refused as often as they are (about half in the first
    /// slowdown, most in the second). With a fifth kept for them, nearly all are answered in time,
    /// and the sheddable ones get what the dependency has left.
    #[test]
    fn a_reserve_answers_the_critical_requests_that_the_adaptive_limit_alone_refuses() {
        let share = |o: &Outcome, (from, to): (u64, u64)| o.critical(from, to).0;
        let alone = reduced(Bulkhead::Adaptive(20, 500), None);
        assert!(share(&alone, FIRST) < 60.0, "{} %", share(&alone, FIRST));
        assert!(share(&alone, SECOND) < 30.0, "{} %", share(&alone, SECOND));
        let reserved = reduced(Bulkhead::Adaptive(20, 500), Some(20));
        for window in [FIRST, SECOND] {
            assert!(share(&reserved, window) >= 95.0, "{window:?}: {} %", share(&reserved, window));
            assert_eq!(reserved.critical(window.0, window.1).1, 0.0, "{window:?}: none timed out");
        }
        assert!(reserved.sheddable_answered_per_second(FIRST.0, FIRST.1) >= 35.0);
        assert!(reserved.sheddable_answered_per_second(SECOND.0, SECOND.1) >= 5.0);
    }

    /// Over capacity, the dependency accepts a third of what it is sent whoever sent it: a
    /// throttle that refuses sheddable requests first sends every critical one, and more of them
    /// succeed (about a third without a reserve, three fifths with one), the sheddable ones paying
    /// for it; the throttle sends as much either way.
    #[test]
    fn over_capacity_a_throttle_with_a_reserve_sends_the_critical_requests_first() {
        use relent_tests::evidence::overload::{Scenario, run};
        let reduced = |reserve| {
            run(&Scenario { rate: 300, capacity: Some(100), ..Scenario::over_capacity_mixed(reserve) })
        };
        let (alike, first) = (reduced(None), reduced(Some(20)));
        let ((c0, s0), (c1, s1)) =
            (alike.succeeded_by_class(15_000, 35_000), first.succeeded_by_class(15_000, 35_000));
        let (c0, s0, c1, s1) = (c0.unwrap(), s0.unwrap(), c1.unwrap(), s1.unwrap());
        assert!((25.0..=45.0).contains(&c0) && (25.0..=45.0).contains(&s0), "{c0} % and {s0} %");
        assert!(c1 >= 55.0 && s1 < s0, "{c1} % and {s1} %");
        let (sent0, sent1) = (alike.rates(15_000, 35_000).0, first.rates(15_000, 35_000).0);
        assert!((sent0 - sent1).abs() <= sent0 * 0.05, "{sent0} and {sent1} calls a second");
    }

    /// Telemetry that wants twice the hour's airtime leaves an alarm waiting, often for many
    /// minutes, until airtime frees; with a tenth of the airtime kept for critical frames every
    /// alarm goes at once, and telemetry sends about a tenth fewer readings.
    #[test]
    fn a_reserve_of_airtime_sends_every_alarm_at_once() {
        use relent_tests::evidence::airtime::{Scenario, run};
        let (alike, reserved) = (run(&Scenario::day(None)), run(&Scenario::day(Some(10))));
        assert_eq!(alike.alarm_waits_us.len(), reserved.alarm_waits_us.len(), "the same alarms");
        assert!(alike.alarms_at_once_percent() < 80.0, "{} %", alike.alarms_at_once_percent());
        assert!(alike.alarm_wait_s(1_000) > 600.0, "{} s", alike.alarm_wait_s(1_000));
        assert_eq!(reserved.alarms_at_once_percent(), 100.0);
        let (sent, sent_reserved) = (alike.telemetry.0 as f64, reserved.telemetry.0 as f64);
        assert!((0.85..0.95).contains(&(sent_reserved / sent)), "{sent_reserved} of {sent}");
    }

    /// A reserve keeps room in the caller's bulkhead, not in the dependency's queue: a bulkhead
    /// too large for the slowed dependency lets the sheddable requests alone fill that queue, and
    /// the critical ones time out behind them.
    #[test]
    fn a_reserve_cannot_help_a_bulkhead_too_large_for_the_dependency() {
        let o = reduced(Bulkhead::Fixed(20), Some(50));
        let (share, timed_out, _) = o.critical(SECOND.0, SECOND.1);
        assert!(share < 10.0, "{share} %");
        assert!(timed_out >= 9.0, "{timed_out}/s");
    }
}

mod aws {
    use relent_tests::evidence::aws::{Algorithm, mean, run};

    /// 100 clients, 10 seeded runs (the README's table uses 100 runs per point).
    fn at_100(a: Algorithm) -> (f64, f64) {
        mean(a, 100, 10)
    }

    /// Nothing to collide with: one write, which lands four hops of about 10 ms after the start
    /// (the read there and back, the write there and back).
    #[test]
    fn a_lone_client_writes_once_four_hops_after_it_starts() {
        for a in Algorithm::ALL {
            let (writes, ms) = mean(a, 1, 200);
            assert_eq!(writes, 1.0, "{}", a.name());
            assert!((39.0..=41.0).contains(&ms), "{}: {ms} ms", a.name());
        }
        let one = run(Algorithm::FullJitter, 1, 7);
        assert_eq!(one.writes, 1);
        assert!((25.0..=55.0).contains(&one.completion_ms), "{} ms", one.completion_ms);
    }

    /// Two clients read the same version (their reads land about 10 ms in, their writes about 30):
    /// one write lands, the other fails and is answered about 10 ms later, and without jitter its
    /// retry starts the base delay, 5 ms, after that and takes four more hops. Three writes, and
    /// the last lands about 30 + 10 + 5 + 40 = 85 ms in (a little more: the loser is the later of
    /// two writes).
    #[test]
    fn two_clients_without_jitter_collide_once_and_the_loser_retries_after_the_base_delay() {
        let (writes, ms) = mean(Algorithm::Exponential, 2, 200);
        assert_eq!(writes, 3.0);
        assert!((85.0..=90.0).contains(&ms), "{ms} ms");
        let (_, at_once) = mean(Algorithm::NoBackoff, 2, 200);
        assert!((80.0..=85.0).contains(&at_once), "retrying at once saves the 5 ms: {at_once} ms");
    }

    #[test]
    fn full_jitter_makes_fewer_calls_and_finishes_sooner_than_exponential_without_jitter() {
        let (exp_calls, exp_ms) = at_100(Algorithm::Exponential);
        let (full_calls, full_ms) = at_100(Algorithm::FullJitter);
        assert!(full_calls * 1.5 < exp_calls, "calls: full {full_calls}, exponential {exp_calls}");
        assert!(full_ms * 5.0 < exp_ms, "time: full {full_ms} ms, exponential {exp_ms} ms");
    }

    #[test]
    fn equal_jitter_takes_longer_than_full_jitter_and_decorrelated_does_more_work() {
        let (full_calls, full_ms) = at_100(Algorithm::FullJitter);
        let (_, equal_ms) = at_100(Algorithm::EqualJitter);
        let (decorrelated_calls, _) = at_100(Algorithm::Decorrelated);
        assert!(equal_ms > full_ms, "equal {equal_ms} ms, full {full_ms} ms");
        assert!(decorrelated_calls > full_calls, "decorrelated {decorrelated_calls}, full {full_calls}");
    }

    #[test]
    fn without_backoff_the_work_grows_with_the_square_of_the_clients() {
        let (c50, _) = mean(Algorithm::NoBackoff, 50, 10);
        let (c100, _) = mean(Algorithm::NoBackoff, 100, 10);
        assert!(c100 > 3.0 * c50, "{c50} -> {c100}");
    }
}

mod hedging {
    //! The README's claims about hedged requests, on the full run (20,000 requests, a few
    //! milliseconds in a debug build).

    use relent_tests::evidence::hedging::{Hedging, Outcome, Scenario, run};

    #[test]
    fn a_percentile_is_the_sample_at_its_rank_rounded_up_in_milliseconds() {
        let o =
            Outcome { steady_latency_us: (1..=1_000).map(|ms| ms * 1_000).collect(), ..Outcome::default() };
        let got = [500, 950, 990, 999, 1_000].map(|p| o.percentile_ms(p));
        assert_eq!(got, [500.0, 950.0, 990.0, 999.0, 1_000.0]);
        let three = Outcome { steady_latency_us: vec![10_500, 20_000, 30_000], ..Outcome::default() };
        assert_eq!([1, 500, 999].map(|p| three.percentile_ms(p)), [10.5, 20.0, 30.0]);
        assert_eq!(Outcome::default().percentile_ms(990), 0.0, "no sample");
    }

    #[test]
    fn the_steady_state_leaves_out_the_slowdown_and_the_second_after_it() {
        let s = Scenario::tail(Hedging::Off);
        let at = [0, 7_999, 8_000, 12_999, 13_000, 13_999, 14_000, 19_999];
        assert_eq!(at.map(|ms| s.in_slowdown(ms)), [false, false, true, true, false, false, false, false]);
        assert_eq!(at.map(|ms| s.steady(ms)), [true, true, false, false, false, false, true, true]);
        let o = run(&s);
        assert_eq!((o.steady.0, o.slowdown.0), (14_000, 5_000));
        assert_eq!(o.steady_latency_us.len(), 14_000);
    }

    /// Every call is a request's first or a hedge, and a hedge that answered first was sent.
    #[test]
    fn the_calls_are_the_requests_and_their_hedges() {
        for hedging in Hedging::ALL {
            let o = run(&Scenario::tail(hedging));
            assert_eq!(o.total, (20_000, 20_000 + o.hedges.0), "{hedging:?}");
            assert!(o.hedges.1 <= o.hedges.0, "{hedging:?}: {:?}", o.hedges);
            let (sent, won, refused) = o.hedges;
            match hedging {
                Hedging::Off => assert_eq!((sent, won, refused), (0, 0, 0)),
                // The steady state's stragglers (one request in twenty) and every slow request.
                Hedging::Unbounded => assert!(sent > 5_000 && won > 1_000 && refused == 0, "{:?}", o.hedges),
                Hedging::Budgeted | Hedging::Learnt(_) => {
                    assert!(sent > 1_000 && won > 500, "{:?}", o.hedges)
                }
            }
        }
    }

    #[test]
    fn each_mode_is_named_as_the_readme_shows_it() {
        assert_eq!(
            Hedging::ALL.map(Hedging::name),
            [
                "no hedge",
                "hedge after 50 ms, nothing bounding it",
                "hedge after 50 ms, paid for by a 10 % ratio budget",
                "hedge at the learnt 95th percentile, paid for by the same budget",
                "hedge at the learnt 90th percentile, paid for by the same budget",
            ]
        );
    }

    #[test]
    fn a_hedge_after_the_95th_percentile_cuts_the_99th_by_four_for_five_percent_more_calls() {
        let (off, on) = (run(&Scenario::tail(Hedging::Off)), run(&Scenario::tail(Hedging::Budgeted)));
        assert!(off.percentile_ms(990) >= 300.0, "{}", off.percentile_ms(990));
        assert!(on.percentile_ms(990) <= 80.0, "{}", on.percentile_ms(990));
        assert!((off.percentile_ms(500) - on.percentile_ms(500)).abs() < 1.0, "the median unchanged");
        assert_eq!(off.steady_calls_per_request(), 1.0);
        let extra = on.steady_calls_per_request();
        assert!((1.03..=1.06).contains(&extra), "{extra}");
    }

    /// The learnt 90th percentile: the calls' (28.7 to 32.8 ms in the log's buckets) in the
    /// steady state, their 393 ms when every call is slow, so that hedging stops by itself then
    /// and the budget is still there after; a shorter tail than the fixed 50 ms for more calls.
    #[test]
    fn a_hedge_at_the_learnt_90th_percentile_follows_the_calls_and_backs_off_when_all_are_slow() {
        let (fixed, learnt) =
            (run(&Scenario::tail(Hedging::Budgeted)), run(&Scenario::tail(Hedging::Learnt(90))));
        let [steady, slowdown] = learnt.delays_us.map(Option::unwrap);
        assert_eq!(steady.0, 28_671, "the fast calls' bucket: {steady:?}");
        assert!(slowdown.1 >= 390_000, "the slow calls' percentile: {slowdown:?}");
        assert_eq!(learnt.hedges.2, 0, "no hedge refused: {:?}", learnt.hedges);
        assert!(learnt.percentile_ms(990) < fixed.percentile_ms(990) - 10.0);
        assert!(learnt.percentile_ms(999) < fixed.percentile_ms(999) - 30.0);
        assert!(learnt.slowdown_calls_per_request() < fixed.slowdown_calls_per_request());
        assert!(
            (1.05..=1.08).contains(&learnt.steady_calls_per_request()),
            "{}",
            learnt.steady_calls_per_request()
        );
    }

    /// A log of 1,000 attempts remembers the slowdown for seconds after it, and hedges late then.
    #[test]
    fn a_log_that_forgets_slowly_hedges_late_after_a_slowdown() {
        let slow = |p| run(&Scenario { latency_samples: 1_000, ..Scenario::tail(Hedging::Learnt(p)) });
        let (ninety, ninety_five) = (slow(90), slow(95));
        assert!(ninety.percentile_ms(990) > 200.0, "{}", ninety.percentile_ms(990));
        assert!(ninety_five.percentile_ms(990) > 250.0, "{}", ninety_five.percentile_ms(990));
    }

    /// With one call in twenty slow, the 95th percentile of the calls is the edge between the fast
    /// ones and the slow: the learnt delay jumps between them, and the tail is no shorter than the
    /// fixed delay's.
    #[test]
    fn the_learnt_95th_percentile_sits_on_the_edge_of_the_slow_calls() {
        let (fixed, learnt) =
            (run(&Scenario::tail(Hedging::Budgeted)), run(&Scenario::tail(Hedging::Learnt(95))));
        let steady = learnt.delays_us[0].unwrap();
        assert!(steady.0 < 35_000 && steady.1 > 300_000, "{steady:?}");
        assert!(learnt.percentile_ms(990) >= fixed.percentile_ms(990), "{}", learnt.percentile_ms(990));
    }

    #[test]
    fn when_every_call_is_slow_unbounded_hedges_double_the_load_and_the_budget_holds_them() {
        let unbounded = run(&Scenario::tail(Hedging::Unbounded)).slowdown_calls_per_request();
        let budgeted = run(&Scenario::tail(Hedging::Budgeted));
        assert!(unbounded >= 1.99, "{unbounded}");
        assert!(budgeted.slowdown_calls_per_request() <= 1.2, "{}", budgeted.slowdown_calls_per_request());
        assert!(budgeted.hedges.2 > 3_000, "the budget refused the slowdown's hedges: {:?}", budgeted.hedges);
    }
}
