//! The paired mode: the contenders of a comparison timed in turn, `BATCH` calls each, round after
//! round, with a ratio taken within each round. A machine shared with other work drifts between
//! criterion's benchmarks, which run one after another for seconds each; drift between the parts
//! of one round is small, so the median of the rounds' ratios is steady within a run. Between runs
//! the machine's state still shows (docs/performance.md has the figures).

use std::time::Duration as Std;

use crate::contenders::{Adapters, Contender, Path};

/// Rounds of the paired mode, each preceded by as many rounds of warm-up.
pub const ROUNDS: usize = 3_000;

/// Calls per contender per round (and inputs per timed pass of relent-tests' `batched`): few
/// enough that the inputs stay in the first-level cache.
pub const BATCH: usize = 64;

/// Times `n` contenders in turn (`time(i)` times `BATCH` calls of contender `i`), once each per
/// round in an order that rotates each round, and returns each one's time per call in each round,
/// in ns.
pub fn rotate(n: usize, mut time: impl FnMut(usize) -> Std) -> Vec<Vec<f64>> {
    let mut per_round = vec![Vec::with_capacity(ROUNDS); n];
    for round in 0..2 * ROUNDS {
        for k in 0..n {
            let i = (round + k) % n;
            let t = time(i).as_secs_f64() * 1e9 / BATCH as f64;
            if round >= ROUNDS {
                per_round[i].push(t);
            }
        }
    }
    per_round
}

/// The median and quartiles of `xs`.
pub fn quartiles(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    let at = |q: usize| xs[(xs.len() - 1) * q / 4];
    (at(2), at(1), at(3))
}

/// Prints the median over rounds of `ratio(round)`, with its quartiles.
pub fn ratio_line(what: &str, rounds: usize, ratio: impl Fn(usize) -> f64) {
    let (median, q1, q3) = quartiles((0..rounds).map(ratio).collect());
    println!("{what}: ratio {median:.2} (quartiles {q1:.2} to {q3:.2})");
}

/// The adapters on each of `paths`: every contender's overhead over the bare call of the same
/// round (medians), and relent-tokio's over tower's with a budget, without and with `Timeout`.
pub fn adapters(a: &Adapters, paths: &[Path]) {
    a.check(paths);
    for &path in paths {
        let t = rotate(Contender::ALL.len(), |i| {
            let started = std::time::Instant::now();
            for _ in 0..BATCH {
                a.run(Contender::ALL[i], path);
            }
            started.elapsed()
        });
        // `ALL` lists the contenders in declaration order: a contender's index is its discriminant.
        let at = |who: Contender| who as usize;
        let over = |who: Contender, r: usize| t[at(who)][r] - t[at(Contender::BareCall)][r];
        let medians: Vec<String> = Contender::ALL
            .iter()
            .skip(1)
            .map(|&who| {
                format!("{} +{:.0} ns", who.name(), quartiles((0..ROUNDS).map(|r| over(who, r)).collect()).0)
            })
            .collect();
        println!(
            "{}: overhead over the bare call ({:.0} ns), medians: {}",
            path.name,
            quartiles(t[0].clone()).0,
            medians.join(", ")
        );
        for other in [Contender::TowerRetryWithBudget, Contender::TowerRetryWithBudgetAndAttemptTimeout] {
            ratio_line(&format!("{}: relent_tokio / {} (overheads)", path.name, other.name()), ROUNDS, |r| {
                over(Contender::RelentTokio, r) / over(other, r)
            });
        }
    }
}
