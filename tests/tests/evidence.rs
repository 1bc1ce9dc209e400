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
fn the_token_bucket_keeps_amplification_near_its_size() {
    let o = reduced(Scenario::seed_000(1, Budget::Tokens, Jitter::Full));
    let a = o.amplification(2_000, 7_000);
    assert!(a <= 1.15, "{a}");
}

#[test]
fn three_layers_multiply_without_budgets_and_stay_near_the_share_with_them() {
    let none = reduced(Scenario::seed_000(3, Budget::Unlimited, Jitter::Full)).amplification(2_000, 7_000);
    let ratio = reduced(Scenario::seed_000(3, Budget::Ratio, Jitter::Full)).amplification(2_000, 7_000);
    assert!(none >= 10.0, "{none}");
    assert!(ratio <= 1.6, "{ratio}");
}

#[test]
fn full_jitter_flattens_the_wave_when_a_node_drops() {
    let none = reduced(Scenario::node_drop(Jitter::None)).peak_per_10ms;
    let full = reduced(Scenario::node_drop(Jitter::Full)).peak_per_10ms;
    assert!(full * 3 < none, "peak per 10 ms: {none} without jitter, {full} with full jitter");
}
