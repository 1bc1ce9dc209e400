//! Regenerates the README's evidence: tables on stdout and in `evidence/tables.md` (the README's,
//! as it shows them), CSV and SVG plots in `evidence/`; with `--benchmarks`, also the performance
//! tables (criterion: relent-core's decision path, the
//! comparison with backon, tower and governor, and relent-tokio's overhead), then the same
//! comparisons in the alternatives bench's paired mode, and the adapters' again in the production
//! build (relent-adapter-bench's `production` bench) and on tokio's multi-threaded runtime (its
//! `multi_thread` bench): the ratios the README reports; and the alternatives bench's states mode,
//! the decision and probes of the core's parts in the machine's fastest state and in its others.
//!
//! `--benchmarks` ends with the instruction counts the README gives beside the timings, counted by
//! callgrind (repeatable, unlike time on a shared machine) when valgrind is installed, and on the
//! firmware's boards by QEMU's `-icount` when qemu-system-arm is; `--instructions` prints those
//! alone (about a minute).
//!
//! `cargo run --release -p relent-tests --bin evidence -- --benchmarks` (8 minutes on 2 cores from a
//! fresh clone, every build included, 5 once built; without the flag, about 10 seconds).

use std::fmt::Write as _;
use std::path::Path;

use relent_core::Jitter;
use relent_tests::evidence::aws::{self, Algorithm};
use relent_tests::evidence::hedging::{self, Hedging};
use relent_tests::evidence::overload::{self, Budget, Outcome, Scenario};
use relent_tests::evidence::plot::{Legend, Series, lines};

const USAGE: &str =
    "usage: cargo run --release -p relent-tests --bin evidence [-- --benchmarks | -- --instructions]
  (no flag)       the simulations: tables on stdout and in evidence/tables.md, CSV and SVG plots
                  in evidence/ (about 10 s)
  --benchmarks    the same, then the benchmark suites, the paired mode and the instruction counts
                  (5 to 8 minutes)
  --instructions  the instruction counts alone: under callgrind (needs valgrind), and on the
                  firmware's boards under QEMU (needs qemu-system-arm; about 1 minute)
environment: EVIDENCE_RUNS=N seeded runs per point of the AWS experiment (default 100, the paper's)";

/// What a run of the binary does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Simulations,
    Benchmarks,
    Instructions,
}

/// The mode its arguments ask for (the program's name excluded), or what is wrong with them.
fn mode(args: &[String]) -> Result<Mode, String> {
    match args {
        [] => Ok(Mode::Simulations),
        [one] if one == "--benchmarks" => Ok(Mode::Benchmarks),
        [one] if one == "--instructions" => Ok(Mode::Instructions),
        [one] if one == "--help" || one == "-h" => Err(String::new()),
        [one] => Err(format!("evidence: unknown flag {one:?}")),
        _ => Err(format!("evidence: {args:?}: it takes at most one flag")),
    }
}

/// Seeded runs per point of the AWS experiment: `EVIDENCE_RUNS`, or the paper's 100.
fn runs() -> Result<u64, String> {
    match std::env::var("EVIDENCE_RUNS") {
        Err(_) => Ok(100),
        Ok(v) => match v.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "evidence: EVIDENCE_RUNS={v:?} is not a number of runs (a whole number, 1 or more)"
            )),
        },
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, runs) = match (mode(&args), runs()) {
        (Ok(mode), Ok(runs)) => (mode, runs),
        (Err(why), _) | (_, Err(why)) => {
            if !why.is_empty() {
                eprintln!("{why}\n");
            }
            eprintln!("{USAGE}");
            std::process::exit(if why.is_empty() { 0 } else { 2 });
        }
    };
    if mode == Mode::Instructions {
        instructions();
        firmware_instructions();
        return;
    }
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../evidence");
    std::fs::create_dir_all(&out).expect("the evidence directory can be created");
    let mut tables = Tables::default();
    aws_experiment(&out, runs, &mut tables);
    overload(&out, &mut tables);
    throttling(&out, &mut tables);
    hedging(&mut tables);
    adaptive_limit(&out, &mut tables);
    criticality(&mut tables);
    airtime(&mut tables);
    let tables_md = out.join(Tables::FILE);
    std::fs::write(&tables_md, tables.markdown(runs)).expect("tables.md is written");
    if mode == Mode::Benchmarks {
        benchmarks();
        instructions();
        firmware_instructions();
    }
}

/// The boards the firmware example runs on in QEMU, by target: the README's columns.
const BOARDS: [(&str, &str); 2] =
    [("thumbv7m-none-eabi", "Cortex-M3 (lm3s6965evb)"), ("thumbv6m-none-eabi", "Cortex-M0 (micro:bit)")];

/// The README's firmware counts: the firmware example's `cost`, `cost-embassy`, `cost-backon` and
/// `cost-backon-embassy` binaries on each board in QEMU, with the runner its `.cargo/config.toml`
/// gives (`-icount`), which count in instructions relent-core's paths, relent-embassy's, and each
/// beside backon's (see `examples/firmware/src/count.rs`).
/// Needs `qemu-system-arm` and the two targets; says what is missing otherwise.
fn firmware_instructions() {
    println!("\n## Instructions on the firmware's boards (QEMU -icount; the same on every run of a build)\n");
    if std::process::Command::new("qemu-system-arm").arg("--version").output().is_err() {
        println!(
            "qemu-system-arm is not installed, so nothing was counted (Debian: `apt-get install \
             qemu-system-arm`; and `rustup target add thumbv7m-none-eabi thumbv6m-none-eabi`)."
        );
        return;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let firmware = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/firmware");
    for (target, board) in BOARDS {
        for bin in ["cost", "cost-embassy", "cost-backon", "cost-backon-embassy"] {
            firmware_count(&cargo, &firmware, bin, target, board);
        }
    }
    // A core with a floating-point unit, where backon's step is hardware floats: its own board, for
    // the decision's comparison alone.
    firmware_count(&cargo, &firmware, "cost-backon", M4F.0, M4F.1);
}

/// The Cortex-M4F build's target and the board QEMU runs it on (the firmware's
/// `.cargo/config.toml`).
const M4F: (&str, &str) = ("thumbv7em-none-eabihf", "Cortex-M4F (mps2-an386)");

/// One of the firmware example's counting binaries, `bin`, run on one board, its lines as bullets.
fn firmware_count(cargo: &str, firmware: &Path, bin: &str, target: &str, board: &str) {
    println!("`cargo run --release --bin {bin} --target {target}` in examples/firmware, {board}:\n");
    let output = std::process::Command::new(cargo)
        .args(["run", "-q", "--release", "--bin", bin, "--target", target])
        .current_dir(firmware)
        .output();
    match output {
        Ok(output) => {
            print_bullets(&output.stdout);
            if !output.status.success() {
                println!("- (failed: {})", String::from_utf8_lossy(&output.stderr).trim());
            }
        }
        Err(e) => println!("- (could not run cargo: {e})"),
    }
    println!();
}

/// Operations per callgrind run of the count mode; each count runs `OPS` and `2 * OPS`.
const OPS: u64 = 5_000;

/// The README's instruction counts: relent-core's decision and backon's step, and each adapter
/// path's instructions per operation less the bare call's, on the paused clock (the alternatives
/// bench) and in the production build (the production bench, the paths that never sleep). Each
/// figure is the difference between callgrind runs of a bench's count mode for `OPS` and `2 * OPS`
/// operations, divided by `OPS`, so that setup and first-use costs cancel; only the named functions
/// are counted (`--toggle-collect`).
fn instructions() {
    println!(
        "\n## Instructions (callgrind; they repeat to within about 20 per operation on the paused clock, 70 in the production build)\n"
    );
    if std::process::Command::new("valgrind").arg("--version").output().is_err() {
        println!("valgrind is not installed, so nothing was counted (Debian: `apt-get install valgrind`).");
        return;
    }
    let Some(alternatives) = bench_executable("relent-tests", "alternatives") else {
        println!("the alternatives bench did not build, so nothing was counted.");
        return;
    };
    let decision = per_op(&alternatives, "retry_decision/relent_core_on_failure", "*on_failure*");
    let step = per_op(&alternatives, "retry_decision/backon_step", "*ExponentialBackoff*next*");
    println!(
        "relent-core's decision after a failure (`on_failure`): {}; backon's step (`ExponentialBackoff::next`): {}\n",
        show(decision),
        show(step)
    );
    println!("Instructions per `block_on` less those of the bare call, on the paused clock:\n");
    adapter_counts(&alternatives, &["success", "success_after_a_wait", "one_retry"]);
    println!("\nThe same in the production build (tokio without test-util, the real clock):\n");
    let Some(production) = bench_executable("relent-adapter-bench", "production") else {
        println!("the production bench did not build, so nothing was counted.");
        return;
    };
    adapter_counts(&production, &["success", "success_after_a_wait"]);
    println!("\nThe HTTP layers in the production build, per `block_on` less the bare service's:\n");
    counts_table(&production, "http/", &["success", "success_after_a_wait"], "bare_service", &HTTP_LAYERS);
}

/// The adapter contenders of the count tables: each bench's name, and the table's title for it.
const ADAPTERS: [(&str, &str); 5] = [
    ("relent_tokio", "relent-tokio"),
    ("backon", "backon"),
    ("backon_with_attempt_timeout", "backon + timeout"),
    ("tower_retry_with_budget", "tower + budget"),
    ("tower_retry_with_budget_and_attempt_timeout", "tower + budget + `Timeout`"),
];

/// The HTTP layers' contenders (relent-adapter-bench's `layers`), the same way.
const HTTP_LAYERS: [(&str, &str); 3] = [
    ("relent_layer", "relent-tokio's `RetryLayer`"),
    ("tower_retry_with_budget", "tower `Retry` + budget"),
    ("tower_retry_with_budget_and_attempt_timeout", "tower `Retry` + budget + `Timeout`"),
];

/// A count as printed, or `(failed)`.
fn show(n: Option<u64>) -> String {
    n.map_or_else(|| "(failed)".to_string(), |n| n.to_string())
}

/// A table of each adapter contender's instructions per operation on `paths`, less the bare
/// call's, counted in `bench`'s count mode.
fn adapter_counts(bench: &Path, paths: &[&str]) {
    counts_table(bench, "", paths, "bare_call", &ADAPTERS);
}

/// A table of each of `contenders`' instructions per operation on `paths` (bench names
/// `{prefix}{path}/{contender}`), less those of `bare`, counted in `bench`'s count mode. A row is
/// named for its path with the prefix's words, `http success` for `http/success`.
fn counts_table(bench: &Path, prefix: &str, paths: &[&str], bare: &str, contenders: &[(&str, &str)]) {
    let titles: Vec<&str> = contenders.iter().map(|(_, title)| *title).collect();
    println!("| path | {} | {} |", bare.replace('_', " "), titles.join(" | "));
    println!("|---|---|{}", "---|".repeat(contenders.len()));
    for path in paths {
        let block_on = "tokio::runtime::runtime::Runtime::block_on*";
        let base = per_op(bench, &format!("{prefix}{path}/{bare}"), block_on);
        let cells: Vec<String> = contenders
            .iter()
            .map(|(name, _)| match (per_op(bench, &format!("{prefix}{path}/{name}"), block_on), base) {
                (Some(n), Some(base)) => format!("{}", n.saturating_sub(base)),
                _ => "(failed)".to_string(),
            })
            .collect();
        println!("| {}{path} | {} | {} |", prefix.replace('/', " "), show(base), cells.join(" | "));
    }
}

/// Instructions per operation of `what` in `bench`'s count mode, counting only inside functions
/// matching `toggle`: callgrind runs of `OPS` and `2 * OPS` operations, differenced. `None` if
/// either run failed.
fn per_op(bench: &Path, what: &str, toggle: &str) -> Option<u64> {
    let total = |n: u64| -> Option<u64> {
        let file = std::env::temp_dir().join(format!("relent-callgrind-{}-{n}", std::process::id()));
        let status = std::process::Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!("--toggle-collect={toggle}"))
            .arg(format!("--callgrind-out-file={}", file.display()))
            .arg(bench)
            .args(["--count", what, &n.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        let text = std::fs::read_to_string(&file).ok();
        let _ = std::fs::remove_file(&file);
        if !status.success() {
            return None;
        }
        text?.lines().find_map(|l| l.strip_prefix("totals:")).and_then(|t| t.trim().parse().ok())
    };
    let (one, two) = (total(OPS)?, total(2 * OPS)?);
    Some(two.saturating_sub(one) / OPS)
}

/// A bench's executable, built (in release, as `cargo bench` builds it) by the cargo that runs
/// this binary, on its own: `cargo bench -p PACKAGE`, so that the package's features are its own
/// (the production bench's tokio has no test-util).
fn bench_executable(package: &str, bench: &str) -> Option<std::path::PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args(["bench", "-q", "-p", package, "--bench", bench, "--no-run"])
        .args(["--message-format=json-render-diagnostics"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .ok()?;
    // One JSON message per line; the bench's artifact names its executable. No JSON parser for
    // one field: the key and its string value are found by hand.
    let name = format!("\"name\":\"{bench}\"");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains(&name))
        .find_map(|l| {
            let rest = l.split_once("\"executable\":\"")?.1;
            Some(std::path::PathBuf::from(rest.split_once('"')?.0))
        })
}

/// Runs the benchmark suites with the cargo that runs this binary, and prints each result line.
fn benchmarks() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let core_groups = core_groups_filter();
    let suites: [&[&str]; 3] = [
        &["bench", "-p", "relent-tests", "--bench", "decision"],
        // Criterion's figures for the core comparisons only: the adapters' come from the paired
        // modes below, and timing their 18 benchmarks one after another as well took 3 minutes.
        &["bench", "-p", "relent-tests", "--bench", "alternatives", "--", &core_groups],
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
    // The ratios the README reports: the same comparisons timed in turn, round after round, on
    // the paused clock and then in the production build.
    let paired: [&[&str]; 3] = [
        &["bench", "-p", "relent-tests", "--bench", "alternatives", "--", "--paired"],
        &["bench", "-p", "relent-adapter-bench", "--bench", "production"],
        &["bench", "-p", "relent-adapter-bench", "--features", "multi-thread", "--bench", "multi_thread"],
    ];
    for args in paired {
        println!("`cargo {}`\n", args.join(" "));
        match std::process::Command::new(&cargo).args(args).output() {
            Ok(output) => print_bullets(&output.stdout),
            Err(e) => eprintln!("could not run cargo {}: {e}", args.join(" ")),
        }
        println!();
    }
    // What the machine's slower state takes away from the decision (docs/performance.md): a
    // markdown table, printed as it comes.
    let states = ["bench", "-p", "relent-tests", "--bench", "alternatives", "--", "--states"];
    println!("`cargo {}`\n", states.join(" "));
    match std::process::Command::new(&cargo).args(states).output() {
        Ok(output) => println!("{}", String::from_utf8_lossy(&output.stdout).trim()),
        Err(e) => eprintln!("could not run cargo {}: {e}", states.join(" ")),
    }
    println!();
}

/// Prints a command's output a line a bullet, its blank lines left out.
fn print_bullets(stdout: &[u8]) {
    for line in String::from_utf8_lossy(stdout).lines().filter(|l| !l.trim().is_empty()) {
        println!("- {}", line.trim());
    }
}

/// The alternatives bench's groups of synchronous core comparisons, whose criterion figures the
/// README's table gives beside the paired ones. Its other groups, one for each adapter path, are
/// named by the path; the README's adapter tables come from the paired modes.
const CORE_GROUPS: [&str; 5] =
    ["backoff_step", "decision_from_scratch", "retry_decision", "budget", "rate_limit"];

/// Criterion's filter (a regular expression on each benchmark's `group/name`) that selects the
/// [`CORE_GROUPS`].
fn core_groups_filter() -> String {
    format!("^({})/", CORE_GROUPS.join("|"))
}

/// The tables the README shows, each exactly as the README has it: printed on stdout as they are
/// made, and written together to `evidence/tables.md`. A test checks that the README holds every
/// row of that file, and CI that a fresh run writes it (and the CSVs and plots) unchanged, so a
/// change to what the simulations show cannot leave the README behind.
#[derive(Default)]
struct Tables(String);

impl Tables {
    /// The file, in `evidence/`.
    const FILE: &str = "tables.md";

    /// Adds a table under `title`: its header's cells, then its rows' cells.
    fn add(&mut self, title: &str, header: &[&str], rows: &[Vec<String>]) {
        fn line<'a>(cells: impl Iterator<Item = &'a str>) -> String {
            cells.fold(String::from("|"), |l, c| l + " " + c + " |")
        }
        let mut table = format!("### {title}\n\n{}\n|", line(header.iter().copied()));
        table.push_str(&"---|".repeat(header.len()));
        for row in rows {
            let _ = write!(table, "\n{}", line(row.iter().map(String::as_str)));
        }
        println!("\n{table}\n");
        let _ = write!(self.0, "\n{table}\n");
    }

    /// The file's text.
    fn markdown(&self, runs: u64) -> String {
        format!(
            "# The README's evidence tables\n\nWritten by `cargo run --release -p relent-tests --bin evidence` \
             ({runs} runs per point of the AWS experiment); the README shows each table as it is here.\n{}",
            self.0
        )
    }
}

/// `n` with a comma between each group of three digits, as the README writes numbers.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// The client throttle against a dependency over capacity: what it is sent, accepts and rejects
/// while overloaded, with no throttle and with the SRE book's K = 2 and K = 1.1, and what the
/// throttle still refuses after it recovers. The plot: what the dependency is sent and accepts each
/// second, over the whole run.
fn throttling(out: &Path, tables: &mut Tables) {
    /// The first attempts end at 45 s.
    const UNTIL_MS: u64 = 45_000;
    println!(
        "## Client-side throttling: 3,000 first attempts/s, the dependency accepts 1,000 calls/s from 5 s to 35 s"
    );
    let mut sent: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut accepted_per_second = Vec::new();
    let rows: Vec<Vec<String>> = [None, Some(2_000), Some(1_100)]
        .into_iter()
        .map(|k| {
            let o = overload::run(&Scenario::over_capacity(k.map(relent_core::ClientThrottle::new)));
            let legend =
                k.map_or("sent, no throttle".to_owned(), |k| format!("sent, K = {}", k as f64 / 1_000.0));
            sent.push((legend, o.calls_per_second(UNTIL_MS)));
            // The same in every run, within a call or two.
            accepted_per_second = o.accepted_per_second(UNTIL_MS);
            // The overload's steady part, once the window (10 s) holds none of the time before it:
            // two windows, over which the ratio budget's retries average out.
            let (calls, accepted, throttled) = o.rates(15_000, 35_000);
            let refused_after: u64 = o.throttled.iter().skip(350).sum();
            let name = k.map_or("none".to_owned(), |k| format!("K = {}", k as f64 / 1_000.0));
            let after = o.last_throttled_ms().map_or("-".to_owned(), |end| {
                format!("{:.1} s", end.saturating_sub(35_000) as f64 / 1_000.0)
            });
            vec![
                name,
                thousands(calls.round() as u64),
                thousands(accepted.round() as u64),
                thousands((calls - accepted).round() as u64),
                thousands(throttled.round() as u64),
                format!("{:.2}", calls / accepted.max(1.0)),
                thousands(refused_after),
                after,
            ]
        })
        .collect();
    tables.add(
        "Client-side throttling",
        &[
            "client throttle",
            "calls/s sent while over capacity (15 to 35 s)",
            "accepted/s",
            "rejected/s",
            "refused by the client/s",
            "sent per accepted",
            "attempts refused after it recovers (35 s)",
            "over",
        ],
        &rows,
    );
    let mut series: Vec<Series> =
        sent.iter().map(|(name, points)| Series { name, points: points.clone() }).collect();
    series.push(Series { name: "accepted, K = 1.1", points: accepted_per_second });
    let title = "Calls per second a dependency over capacity is sent and accepts (1,000/s from 5 s to 35 s)";
    if let Err(e) = lines(
        &out.join("throttle.svg"),
        title,
        ("seconds", "calls per second"),
        &series,
        false,
        Legend::UpperRight,
    ) {
        eprintln!("throttle.svg: {e}");
    }
}

/// The bulkhead's adaptive limit against two fixed bulkheads, through two slowdowns of the
/// dependency: requests answered in time, their latency, the timeouts, the dependency's work for
/// callers that had gone, and how long after the second slowdown everything is answered again.
fn adaptive_limit(out: &Path, tables: &mut Tables) {
    use relent_tests::evidence::adaptive::{self, Bulkhead, Scenario};
    println!(
        "## Adaptive limit: 1,000 requests/s, 300 ms timeouts; the dependency serves 500/s from 5 s to 15 s, 167/s from 20 s to 30 s"
    );
    let mut answered: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut limit = Vec::new();
    let rows: Vec<Vec<String>> = Bulkhead::ALL
        .iter()
        .map(|&b| {
            let o = adaptive::run(&Scenario::slowdowns(b));
            answered.push((format!("answered in time, {}", b.name()), o.answered_points()));
            if b == Bulkhead::Adaptive(200, 500) {
                limit = o.limit_points();
            }
            // Each slowdown's second half, once every bulkhead has settled.
            let (first, second) = ((10_000, 15_000), (25_000, 30_000));
            let per_s = |v: f64| thousands(v.round() as u64);
            let p99 = |(from, to)| {
                o.percentile_ms(from, to, 990).map_or("-".to_owned(), |ms| format!("{ms:.0} ms"))
            };
            vec![
                b.name(),
                per_s(o.answered_per_second(first.0, first.1)),
                p99(first),
                per_s(o.answered_per_second(second.0, second.1)),
                p99(second),
                per_s(o.timed_out_per_second(second.0, second.1)),
                per_s(o.refused_per_second(second.0, second.1)),
                format!("{:.0} %", o.wasted_percent()),
                format!("{:.1} s", o.back_to_normal_after_ms(30_000, 40_000) as f64 / 1_000.0),
            ]
        })
        .collect();
    tables.add(
        "Adaptive limit",
        &[
            "bulkhead",
            "answered in time/s, dependency at 500/s (10 to 15 s)",
            "their p99",
            "answered in time/s, dependency at 167/s (25 to 30 s)",
            "their p99",
            "timed out/s (25 to 30 s)",
            "refused/s (25 to 30 s)",
            "dependency's work for callers that had gone",
            "all answered again after (30 s)",
        ],
        &rows,
    );
    let mut series: Vec<Series> =
        answered.iter().map(|(name, points)| Series { name, points: points.clone() }).collect();
    series.push(Series { name: "the adaptive limit's slots (the default)", points: limit });
    let title =
        "Requests answered in time per second, and the adaptive limit (slowdowns at 5-15 s and 20-30 s)";
    if let Err(e) = lines(
        &out.join("adaptive.svg"),
        title,
        ("seconds", "requests per second; slots"),
        &series,
        false,
        Legend::UpperRight,
    ) {
        eprintln!("adaptive.svg: {e}");
    }
}

/// Criticality: the adaptive limit's scenario with one request in ten critical and the rest
/// sheddable, each bulkhead with and without a critical reserve: the share of the critical
/// requests answered in time in each slowdown, and what the sheddable ones got.
fn criticality(tables: &mut Tables) {
    use relent_tests::evidence::adaptive::{self, Bulkhead, Scenario};
    println!(
        "## Criticality: the adaptive limit's scenario, one request in ten critical (100/s), the rest sheddable"
    );
    let cases = [
        (Bulkhead::Adaptive(200, 500), None),
        (Bulkhead::Adaptive(200, 500), Some(20)),
        (Bulkhead::Fixed(60), None),
        (Bulkhead::Fixed(60), Some(20)),
        (Bulkhead::Fixed(200), None),
        (Bulkhead::Fixed(200), Some(50)),
    ];
    let rows: Vec<Vec<String>> = cases
        .iter()
        .map(|&(b, reserve)| {
            let o = adaptive::run(&Scenario::mixed(b, reserve));
            let (first, second) = ((10_000, 15_000), (25_000, 30_000));
            let per_s = |v: f64| thousands(v.round() as u64);
            let share = |(from, to)| format!("{:.0} %", o.critical(from, to).0);
            let (_, timed_out, refused) = o.critical(second.0, second.1);
            vec![
                b.name(),
                reserve.map_or("none".to_owned(), |r| format!("{r} %")),
                share(first),
                per_s(o.sheddable_answered_per_second(first.0, first.1)),
                share(second),
                per_s(timed_out),
                per_s(refused),
                per_s(o.sheddable_answered_per_second(second.0, second.1)),
            ]
        })
        .collect();
    tables.add(
        "Criticality",
        &[
            "bulkhead",
            "critical reserve",
            "critical answered in time, dependency at 500/s (10 to 15 s)",
            "sheddable answered in time/s",
            "critical answered in time, dependency at 167/s (25 to 30 s)",
            "critical timed out/s",
            "critical refused/s",
            "sheddable answered in time/s",
        ],
        &rows,
    );
    println!(
        "## Criticality through the client throttle (K = 2): the throttle's scenario, one first attempt in four critical"
    );
    let rows: Vec<Vec<String>> = [None, Some(20)]
        .into_iter()
        .map(|reserve| {
            let o = relent_tests::evidence::overload::run(
                &relent_tests::evidence::overload::Scenario::over_capacity_mixed(reserve),
            );
            let (critical, sheddable) = o.succeeded_by_class(15_000, 35_000);
            let share = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0} %"));
            let (calls, accepted, throttled) = o.rates(15_000, 35_000);
            vec![
                reserve.map_or("none".to_owned(), |r| format!("{r} %")),
                share(critical),
                share(sheddable),
                thousands(calls.round() as u64),
                thousands(accepted.round() as u64),
                thousands(throttled.round() as u64),
            ]
        })
        .collect();
    tables.add(
        "Criticality through the client throttle",
        &[
            "critical reserve",
            "critical requests that succeeded (arrived 15 to 35 s)",
            "sheddable requests that succeeded",
            "calls/s sent",
            "accepted/s",
            "refused by the client/s",
        ],
        &rows,
    );
}

/// Criticality on a radio link's duty cycle: alarms beside telemetry that wants twice the airtime
/// the hour allows, with and without a critical reserve.
fn airtime(tables: &mut Tables) {
    use relent_tests::evidence::airtime::{self, Scenario};
    println!(
        "## Criticality on a duty cycle: 1 % of any hour, 1.2 s frames, telemetry a minute (sheddable), alarms about every 37 minutes (critical), a day"
    );
    let rows: Vec<Vec<String>> = [None, Some(10), Some(20)]
        .into_iter()
        .map(|reserve| {
            let o = airtime::run(&Scenario::day(reserve));
            let wait = |per_mille| {
                let s = o.alarm_wait_s(per_mille);
                if s == 0.0 { "0".to_owned() } else { format!("{:.0} min", s / 60.0) }
            };
            vec![
                reserve.map_or("none".to_owned(), |r| format!("{r} %")),
                thousands(o.alarm_waits_us.len() as u64),
                format!("{:.0} %", o.alarms_at_once_percent()),
                wait(900),
                wait(1_000),
                thousands(o.telemetry.0),
                thousands(o.telemetry.1),
            ]
        })
        .collect();
    tables.add(
        "Criticality on a duty cycle",
        &[
            "critical reserve",
            "alarms",
            "sent at once",
            "90th percentile of their wait",
            "longest wait",
            "telemetry readings sent",
            "dropped for want of airtime",
        ],
        &rows,
    );
}

/// Hedged requests: the latency's tail of the steady state, the calls it costs, and the calls per
/// request while every call is slow, with no hedge, with hedges nothing bounds, and with hedges
/// the retry budget pays for.
fn hedging(tables: &mut Tables) {
    println!(
        "## Hedged requests: 1,000 requests/s, one call in twenty slow, every call slow from 8 s to 13 s"
    );
    let rows: Vec<Vec<String>> = Hedging::ALL
        .iter()
        .map(|&h| {
            let o = hedging::run(&hedging::Scenario::tail(h));
            let ms = |per_mille| format!("{:.0} ms", o.percentile_ms(per_mille));
            vec![
                h.name().to_owned(),
                ms(500),
                ms(950),
                ms(990),
                ms(999),
                format!("{:.3}", o.steady_calls_per_request()),
                format!("{:.2}", o.slowdown_calls_per_request()),
                format!("{} ({} answered first)", thousands(o.hedges.0), thousands(o.hedges.1)),
                thousands(o.hedges.2),
            ]
        })
        .collect();
    tables.add(
        "Hedged requests",
        &[
            "hedging",
            "p50",
            "p95",
            "p99",
            "p99.9",
            "calls per request",
            "calls per request while every call is slow",
            "hedges sent",
            "hedges refused",
        ],
        &rows,
    );
}

fn aws_experiment(out: &Path, runs: u64, tables: &mut Tables) {
    println!("## The AWS experiment: n clients, one row, optimistic concurrency ({runs} runs per point)\n");
    let mut csv = String::from("clients,algorithm,mean_write_calls,mean_completion_ms\n");
    let mut calls: Vec<Series> =
        Algorithm::ALL.iter().map(|a| Series { name: a.name(), points: Vec::new() }).collect();
    let mut times: Vec<Series> =
        Algorithm::ALL.iter().map(|a| Series { name: a.name(), points: Vec::new() }).collect();
    println!("| clients | {} |", Algorithm::ALL.map(|a| format!("{} calls / ms", a.name())).join(" | "));
    println!("|---|{}", "---|".repeat(Algorithm::ALL.len()));
    /// The README's table is of this many clients.
    const README_CLIENTS: usize = 100;
    let mut at_readme = Vec::new();
    for n in (10..=190).step_by(10) {
        let mut row = format!("| {n} |");
        for (i, a) in Algorithm::ALL.iter().enumerate() {
            let (w, t) = aws::mean(*a, n, runs);
            if n == README_CLIENTS {
                at_readme.push(vec![
                    a.name().to_owned(),
                    thousands(w.round() as u64),
                    format!("{:.1} s", t / 1_000.0),
                ]);
            }
            let _ = writeln!(csv, "{n},{},{w:.1},{t:.1}", a.name());
            calls[i].points.push((n as f64, w));
            times[i].points.push((n as f64, t));
            let _ = write!(row, " {w:.0} / {t:.0} |");
        }
        println!("{row}");
    }
    tables.add(
        "The AWS backoff experiment",
        &["100 clients", "write calls", "time until the last succeeds"],
        &at_readme,
    );
    std::fs::write(out.join("aws.csv"), csv).expect("aws.csv is written");
    let plots = [
        ("aws-calls.svg", "Write calls until every client succeeds", "write calls", &calls, false),
        ("aws-completion.svg", "Time until the last client succeeds (log scale)", "ms", &times, true),
    ];
    for (file, title, y, series, log_y) in plots {
        if let Err(e) = lines(&out.join(file), title, ("clients", y), series, log_y, Legend::UpperLeft) {
            eprintln!("{file}: {e}");
        }
    }
    println!("\n(CSV and SVG plots in evidence/)\n");
}

/// Seed 000's overload scenario at one and three layers with each budget, then no jitter against
/// full jitter on it and on a node drop: the tables, the time series in `overload.csv` and
/// `node-drop.csv`, and their plots.
fn overload(out: &Path, tables: &mut Tables) {
    /// The span the time series cover: the first attempts stop at 15 s, their retries a little later.
    const UNTIL_MS: u64 = 16_000;
    println!("## Overload: 3,000 first attempts/s, every call fails from 2 s to 7 s, 3 attempts each");
    let mut rows = Vec::new();
    let mut csv = String::from("layers,budget,t_ms,calls,first_attempts\n");
    let mut per_second: Vec<Series> = Vec::new();
    // Each line's legend and points; the series borrow the legends once all are made.
    let mut amplification: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut first_attempts = Vec::new();
    // Each run, for the jitter table to take its full-jitter rows from rather than run them again.
    let mut ran: Vec<(Scenario, Outcome)> = Vec::new();
    for layers in [1, 3] {
        for budget in [Budget::Unlimited, Budget::Ratio, Budget::Tokens, Budget::Tower] {
            let scenario = Scenario::seed_000(layers, budget, Jitter::Full);
            let o = overload::run(&scenario);
            rows.push(vec![
                layers.to_string(),
                budget.name().to_owned(),
                format!("{:.2}", o.amplification(2_000, 7_000)),
                format!("{:.2}", o.amplification(7_000, 15_000)),
                o.peak_per_10ms.to_string(),
            ]);
            for (i, (calls, first)) in
                o.calls.iter().zip(&o.first).take((UNTIL_MS / 100) as usize).enumerate()
            {
                let _ = writeln!(csv, "{layers},{},{},{calls},{first}", budget.short_name(), i * 100);
            }
            // tower's budget is in the table and the CSV file; the plots keep Relent's budgets,
            // one colour each.
            if layers == 1 && budget != Budget::Tower {
                per_second.push(Series { name: budget.short_name(), points: o.calls_per_second(UNTIL_MS) });
                // The same in every run.
                first_attempts = o.first_attempts_per_second(UNTIL_MS);
            }
            if budget != Budget::Tower {
                let plural = if layers == 1 { "" } else { "s" };
                let name = format!("{layers} layer{plural}, {}", budget.short_name());
                amplification.push((name, o.amplification_over_time(15_000)));
            }
            ran.push((scenario, o));
        }
    }
    tables.add(
        "What a budget does to an outage",
        &[
            "layers",
            "budget at each layer",
            "calls per first attempt during the outage",
            "after it (7 to 15 s)",
            "peak calls per 10 ms",
        ],
        &rows,
    );
    per_second.push(Series { name: "first attempts", points: first_attempts });
    let (names, points): (Vec<String>, Vec<_>) = amplification.into_iter().unzip();
    let amplification: Vec<Series> =
        names.iter().zip(points).map(|(name, points)| Series { name, points }).collect();
    std::fs::write(out.join("overload.csv"), csv).expect("overload.csv is written");
    jitter_table(tables, &mut ran);
    let mut csv = String::from("jitter,t_ms,calls\n");
    let mut wave: Vec<Series> = Vec::new();
    for jitter in [Jitter::None, Jitter::Full] {
        let s = Scenario::node_drop(jitter);
        let o = outcome(&mut ran, s);
        // From the drop to 1.5 s after it, per 10 ms.
        let mut points = Vec::new();
        for (ms, calls) in o.calls_per_10ms_from(s.outage_ms.0, 1_500) {
            let _ = writeln!(csv, "{},{ms},{calls}", jitter.as_str());
            points.push((ms as f64, calls as f64));
        }
        wave.push(Series { name: if jitter == Jitter::None { "no jitter" } else { "full jitter" }, points });
    }
    std::fs::write(out.join("node-drop.csv"), csv).expect("node-drop.csv is written");
    let plots = [
        (
            "overload-calls.svg",
            "Calls per second reaching the dependency (one layer; down from 2 s to 7 s)",
            ("seconds", "calls per second"),
            &per_second,
            false,
        ),
        (
            "overload-amplification.svg",
            "Calls per first attempt, per 100 ms (log scale; down from 2 s to 7 s)",
            ("seconds", "calls per first attempt"),
            &amplification,
            true,
        ),
        (
            "node-drop.svg",
            "Calls per 10 ms after a node drops with ~900 calls in flight",
            ("ms after the drop", "calls per 10 ms"),
            &wave,
            false,
        ),
    ];
    // The lines of these three end low: the legend goes top right.
    for (file, title, labels, series, log_y) in plots {
        if let Err(e) = lines(&out.join(file), title, labels, series, log_y, Legend::UpperRight) {
            eprintln!("{file}: {e}");
        }
    }
}

/// What `scenario` came to: from `ran` if it was run before (the simulations are seeded, so a rerun
/// gives the same), or run now and kept there.
fn outcome(ran: &mut Vec<(Scenario, Outcome)>, scenario: Scenario) -> Outcome {
    if let Some((_, o)) = ran.iter().find(|(s, _)| *s == scenario) {
        return o.clone();
    }
    let o = overload::run(&scenario);
    ran.push((scenario, o.clone()));
    o
}

/// No jitter against full jitter, on seed 000's outage itself (failures spread out as the first
/// attempts arrive, at one and three layers, without and with the ratio budget) and on a node drop
/// (the failures of ~900 calls in flight at one instant): the tallest 10 ms slot of calls reaching
/// the dependency, and calls per first attempt during the outage.
fn jitter_table(tables: &mut Tables, ran: &mut Vec<(Scenario, Outcome)>) {
    const SPREAD: &str = "seed 000's: 5 ms calls fail as they arrive";
    /// A row's outage, and its scenario with the given jitter.
    type Case = (&'static str, fn(Jitter) -> Scenario);
    let cases: [Case; 5] = [
        (SPREAD, |j| Scenario::seed_000(1, Budget::Unlimited, j)),
        (SPREAD, |j| Scenario::seed_000(1, Budget::Ratio, j)),
        (SPREAD, |j| Scenario::seed_000(3, Budget::Unlimited, j)),
        (SPREAD, |j| Scenario::seed_000(3, Budget::Ratio, j)),
        ("a node drop: ~900 calls of 300 ms in flight fail at once", Scenario::node_drop),
    ];
    let rows: Vec<Vec<String>> = cases
        .into_iter()
        .map(|(outage, scenario)| {
            let s = scenario(Jitter::None);
            let none = outcome(ran, s);
            let full = outcome(ran, scenario(Jitter::Full));
            vec![
                outage.to_owned(),
                s.layers.to_string(),
                s.budget.short_name().to_owned(),
                none.peak_per_10ms.to_string(),
                full.peak_per_10ms.to_string(),
                format!("{:.2}", none.amplification(2_000, 7_000)),
                format!("{:.2}", full.amplification(2_000, 7_000)),
            ]
        })
        .collect();
    tables.add(
        "No jitter against full jitter, on the same outages",
        &[
            "outage",
            "layers",
            "budget",
            "peak calls per 10 ms, no jitter",
            "full jitter",
            "calls per first attempt during the outage, no jitter",
            "full jitter",
        ],
        &rows,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn numbers_get_a_comma_between_each_group_of_three_digits() {
        assert_eq!(
            [0, 7, 999, 1_000, 2_423, 99_999, 123_456, 1_234_567, u64::MAX].map(thousands),
            [
                "0",
                "7",
                "999",
                "1,000",
                "2,423",
                "99,999",
                "123,456",
                "1,234,567",
                "18,446,744,073,709,551,615"
            ]
        );
    }

    #[test]
    fn a_table_is_markdown_under_its_title_in_the_file_and_each_row_has_its_cells() {
        let mut tables = Tables::default();
        tables.add("Two", &["a", "b"], &[vec!["1".into(), "2,000".into()], vec!["x y".into(), "z".into()]]);
        tables.add("One", &["c"], &[]);
        assert_eq!(
            tables.markdown(7),
            "# The README's evidence tables\n\nWritten by `cargo run --release -p relent-tests --bin evidence` \
             (7 runs per point of the AWS experiment); the README shows each table as it is here.\n\
             \n### Two\n\n| a | b |\n|---|---|\n| 1 | 2,000 |\n| x y | z |\n\
             \n### One\n\n| c |\n|---|\n"
        );
    }

    #[test]
    fn the_criterion_filter_selects_every_core_group_of_the_alternatives_bench_and_no_adapter_path() {
        // The bench's groups named by a literal are its core comparisons; the adapters' groups
        // are named by their paths.
        let source = include_str!("../../benches/alternatives.rs");
        let mut literal: Vec<&str> = source
            .split("benchmark_group(\"")
            .skip(1)
            .filter_map(|rest| rest.split_once('"').map(|(name, _)| name))
            .collect();
        literal.sort_unstable();
        let mut core = CORE_GROUPS.to_vec();
        core.sort_unstable();
        assert_eq!(literal, core, "a new core group in benches/alternatives.rs belongs in CORE_GROUPS");
        assert!(
            source.contains("benchmark_group(path.name)"),
            "the adapters' groups are named by their paths"
        );
        for path in relent_adapter_bench::PATHS {
            assert!(!CORE_GROUPS.contains(&path.name), "{} is an adapter path", path.name);
        }
        assert_eq!(
            core_groups_filter(),
            "^(backoff_step|decision_from_scratch|retry_decision|budget|rate_limit)/"
        );
    }

    #[test]
    fn each_flag_selects_its_mode_and_anything_else_is_refused_by_name() {
        assert_eq!(mode(&args(&[])), Ok(Mode::Simulations));
        assert_eq!(mode(&args(&["--benchmarks"])), Ok(Mode::Benchmarks));
        assert_eq!(mode(&args(&["--instructions"])), Ok(Mode::Instructions));
        assert_eq!(mode(&args(&["--help"])), Err(String::new()), "help: the usage alone");
        assert_eq!(mode(&args(&["--benchmark"])), Err("evidence: unknown flag \"--benchmark\"".to_owned()));
        assert!(
            mode(&args(&["--benchmarks", "--instructions"])).is_err_and(|e| e.contains("at most one flag"))
        );
    }
}
