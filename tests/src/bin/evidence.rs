//! Regenerates the README's evidence: tables on stdout, CSV and SVG plots in `evidence/`.
//!
//! `cargo run --release -p relent-tests --bin evidence`

use relent_core::Jitter;
use relent_tests::evidence::overload::{self, Budget, Scenario};

fn main() {
    println!("## Overload: 3,000 first attempts/s, every call fails from 2 s to 7 s, 3 attempts each\n");
    println!(
        "| layers | budget | calls per first attempt during the outage | after it (7-15 s) | peak calls per 10 ms |"
    );
    println!("|---|---|---|---|---|");
    for layers in [1, 3] {
        for budget in [Budget::Unlimited, Budget::Ratio, Budget::Tokens] {
            let o = overload::run(&Scenario::seed_000(layers, budget, Jitter::Full));
            println!(
                "| {layers} | {} | {:.2} | {:.2} | {} |",
                budget.name(),
                o.amplification(2_000, 7_000),
                o.amplification(7_000, 15_000),
                o.peak_per_10ms
            );
        }
    }
    println!(
        "\n## Jitter when a node drops: 300 ms calls, ~900 in flight fail at once (1 layer, no budget)\n"
    );
    println!("| jitter | peak calls per 10 ms | calls per first attempt during the outage |");
    println!("|---|---|---|");
    for jitter in [Jitter::None, Jitter::Full] {
        let o = overload::run(&Scenario::node_drop(jitter));
        println!("| {} | {} | {:.2} |", jitter.as_str(), o.peak_per_10ms, o.amplification(2_000, 7_000));
    }
}
