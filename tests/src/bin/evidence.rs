//! Regenerates the README's evidence: tables on stdout, CSV and SVG plots in `evidence/`; with
//! `--benchmarks`, also the performance tables (criterion: relent-core's decision path, the
//! comparison with backon, tower and governor, and relent-tokio's overhead), then the same
//! comparisons in the alternatives bench's paired mode, whose ratios the README reports.
//!
//! `cargo run --release -p relent-tests --bin evidence -- --benchmarks` (about 6 minutes on 2 cores;
//! without the flag, about 10 seconds).

use std::fmt::Write as _;
use std::path::Path;

use relent_core::Jitter;
use relent_tests::evidence::aws::{self, Algorithm};
use relent_tests::evidence::overload::{self, Budget, Scenario};
use relent_tests::evidence::plot::{Series, lines};

/// Seeded runs per point of the AWS experiment (the paper's 100). `EVIDENCE_RUNS` overrides it.
fn runs() -> u64 {
    std::env::var("EVIDENCE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(100)
}

fn main() {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../evidence");
    std::fs::create_dir_all(&out).expect("the evidence directory can be created");
    aws_experiment(&out);
    overload_tables();
    if std::env::args().any(|a| a == "--benchmarks") {
        benchmarks();
    }
}

/// Runs the benchmark suites with the cargo that runs this binary, and prints each result line.
fn benchmarks() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let suites: [&[&str]; 3] = [
        &["bench", "-p", "relent-tests", "--bench", "decision"],
        &["bench", "-p", "relent-tests", "--bench", "alternatives"],
        &["bench", "-p", "relent-tokio", "--bench", "overhead"],
    ];
    println!("\n## Benchmarks (criterion; compare within a suite, not across machines)\n");
    for args in suites {
        println!("`cargo {}`\n", args.join(" "));
        let output = std::process::Command::new(&cargo).args(args).output();
        let Ok(output) = output else {
            eprintln!("could not run cargo {}", args.join(" "));
            continue;
        };
        let text = String::from_utf8_lossy(&output.stdout);
        let mut name = "";
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some((n, rest)) = trimmed.split_once(" time:") {
                println!("- {n}: {}", rest.trim());
            } else if trimmed.starts_with("time:") {
                println!("- {name}: {}", trimmed.trim_start_matches("time:").trim());
            } else if !trimmed.is_empty() && !trimmed.contains(' ') && trimmed.contains('/') {
                name = trimmed;
            }
        }
        println!();
    }
    // The ratios the README reports: the same comparisons timed in turn, round after round.
    let args = ["bench", "-p", "relent-tests", "--bench", "alternatives", "--", "--paired"];
    println!("`cargo {}`\n", args.join(" "));
    match std::process::Command::new(&cargo).args(args).output() {
        Ok(output) => {
            for line in String::from_utf8_lossy(&output.stdout).lines().filter(|l| !l.trim().is_empty()) {
                println!("- {}", line.trim());
            }
        }
        Err(e) => eprintln!("could not run cargo {}: {e}", args.join(" ")),
    }
}

fn aws_experiment(out: &Path) {
    let runs = runs();
    println!("## The AWS experiment: n clients, one row, optimistic concurrency ({runs} runs per point)\n");
    let mut csv = String::from("clients,algorithm,mean_write_calls,mean_completion_ms\n");
    let mut calls: Vec<Series> =
        Algorithm::ALL.iter().map(|a| Series { name: a.name(), points: Vec::new() }).collect();
    let mut times: Vec<Series> =
        Algorithm::ALL.iter().map(|a| Series { name: a.name(), points: Vec::new() }).collect();
    println!("| clients | {} |", Algorithm::ALL.map(|a| format!("{} calls / ms", a.name())).join(" | "));
    println!("|---|{}", "---|".repeat(Algorithm::ALL.len()));
    for n in (10..=190).step_by(10) {
        let mut row = format!("| {n} |");
        for (i, a) in Algorithm::ALL.iter().enumerate() {
            let (w, t) = aws::mean(*a, n, runs);
            let _ = writeln!(csv, "{n},{},{w:.1},{t:.1}", a.name());
            calls[i].points.push((n as f64, w));
            times[i].points.push((n as f64, t));
            let _ = write!(row, " {w:.0} / {t:.0} |");
        }
        println!("{row}");
    }
    std::fs::write(out.join("aws.csv"), csv).expect("aws.csv is written");
    let plots = [
        ("aws-calls.svg", "Write calls until every client succeeds", "write calls", &calls, false),
        ("aws-completion.svg", "Time until the last client succeeds (log scale)", "ms", &times, true),
    ];
    for (file, title, y, series, log_y) in plots {
        if let Err(e) = lines(&out.join(file), title, ("clients", y), series, log_y) {
            eprintln!("{file}: {e}");
        }
    }
    println!("\n(CSV and SVG plots in evidence/)\n");
}

fn overload_tables() {
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
