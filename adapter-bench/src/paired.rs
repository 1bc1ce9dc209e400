//! The paired mode: the contenders of a comparison timed in turn, `BATCH` calls each, round after
//! round, with a ratio taken within each round. A machine shared with other work drifts between
//! criterion's benchmarks, which run one after another for seconds each; drift between the parts
//! of one round is small, so the median of the rounds' ratios is steady within a run. Between runs
//! the machine's state still shows (docs/performance.md has the figures).

use std::time::{Duration as Std, Instant};

use crate::contenders::{Adapters, Contender, Path};

/// Rounds of the paired mode, each preceded by as many rounds of warm-up.
pub const ROUNDS: usize = 3_000;

/// Calls per contender per round (and inputs per timed pass of relent-tests' `batched`): few
/// enough that the inputs stay in the first-level cache.
pub const BATCH: usize = 64;

/// Some calls timed: how long they took together, and how many they were. Whoever makes the calls
/// counts them, so that a figure per call cannot divide by a count other than the calls timed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timed {
    /// The calls' wall time.
    pub took: Std,
    /// The calls made in it.
    pub calls: usize,
}

impl Timed {
    /// The time per call, in ns.
    fn per_call_ns(self) -> f64 {
        self.took.as_secs_f64() * 1e9 / self.calls as f64
    }
}

/// What one thread or task of a round timed itself doing: its first call's start, its last call's
/// end, and its calls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    /// When its first call began.
    pub began: Instant,
    /// When its last call ended.
    pub ended: Instant,
    /// Its calls.
    pub calls: usize,
}

/// A block of rounds of [`rotate_blocks`]: `block[i][r]` is contender `i`'s time per call in round
/// `r`, in ns.
pub type Block = Vec<Vec<f64>>;

/// Times `n` contenders in turn (`time(i)` makes and times some calls of contender `i`), once each
/// per round in an order that rotates each round, and returns each one's time per call in each
/// round, in ns.
pub fn rotate(n: usize, time: impl FnMut(usize) -> Timed) -> Vec<Vec<f64>> {
    rotate_rounds(ROUNDS, n, time)
}

/// As [`rotate`], for `rounds` rounds after as many of warm-up: one block of [`rotate_blocks`].
pub fn rotate_rounds(rounds: usize, n: usize, time: impl FnMut(usize) -> Timed) -> Vec<Vec<f64>> {
    rotate_blocks(rounds, rounds, Std::ZERO, n, time).swap_remove(0)
}

/// As [`rotate`], round after round for `span` after `warm_up` rounds, the rounds kept in blocks
/// of `block` rounds (one block at least; `block` must not be 0): `blocks[b][i][r]` is contender
/// `i`'s time per call in round `r` of block `b`.
/// A run of [`rotate`] lasts milliseconds for a cheap call, and on a shared machine it then
/// catches one state of the machine; blocks over seconds catch the states as they come and go.
pub fn rotate_blocks(
    warm_up: usize,
    block: usize,
    span: Std,
    n: usize,
    mut time: impl FnMut(usize) -> Timed,
) -> Vec<Block> {
    for round in 0..warm_up {
        for k in 0..n {
            time((round + k) % n);
        }
    }
    let started = Instant::now();
    let mut blocks = Vec::new();
    while blocks.is_empty() || started.elapsed() < span {
        let mut per_round = vec![Vec::with_capacity(block); n];
        for round in 0..block {
            for k in 0..n {
                let i = (round + k) % n;
                per_round[i].push(time(i).per_call_ns());
            }
        }
        blocks.push(per_round);
    }
    blocks
}

/// The median and quartiles of `xs` (not empty): the order statistics at a quarter, a half and
/// three quarters of the way, rounding down (the lower median for an even count).
pub fn quartiles(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    let at = |q: usize| xs[(xs.len() - 1) * q / 4];
    (at(2), at(1), at(3))
}

/// Prints the median over rounds of `ratio(round)`, with its quartiles.
pub fn ratio_line(what: &str, rounds: usize, ratio: impl Fn(usize) -> f64) {
    println!("{}", ratio_text(what, rounds, ratio));
}

/// The line [`ratio_line`] prints: a median of the rounds' ratios, not a ratio of medians, so that
/// each ratio compares two figures of one round.
fn ratio_text(what: &str, rounds: usize, ratio: impl Fn(usize) -> f64) -> String {
    let (median, q1, q3) = quartiles((0..rounds).map(ratio).collect());
    format!("{what}: ratio {median:.2} (quartiles {q1:.2} to {q3:.2})")
}

/// A block of [`rotate_blocks`] is in the fastest state of its run when its baseline's median is
/// within this factor of the fastest blocks' (the first percentile of the blocks' medians). On the
/// development machine the states' baselines differ by a fifth or more, and a state's blocks by a
/// few percent.
pub const SAME_STATE: f64 = 1.05;

/// The blocks of a run of [`rotate_blocks`] in the fastest state seen, and the others: a block is
/// in the fastest state when contender `baseline`'s median in it is within [`SAME_STATE`] of its
/// fastest blocks' (the first percentile of its blocks' medians, so that one fluke block does not
/// set it). The one rule for [`state_lines`] and [`state_table`].
pub fn split_states(blocks: &[Block], baseline: usize) -> (Vec<&Block>, Vec<&Block>) {
    let medians: Vec<f64> = blocks.iter().map(|b| quartiles(b[baseline].clone()).0).collect();
    let mut sorted = medians.clone();
    sorted.sort_by(f64::total_cmp);
    let fastest = sorted[(sorted.len() - 1) / 100];
    let (fast, slow): (Vec<_>, Vec<_>) =
        blocks.iter().zip(&medians).partition(|&(_, &m)| m <= fastest * SAME_STATE);
    (fast.into_iter().map(|(b, _)| b).collect(), slow.into_iter().map(|(b, _)| b).collect())
}

/// A markdown table of every contender of a run of [`rotate_blocks`] (named `names`, in order):
/// its median time per call in the fastest state seen and in the other blocks (split by contender
/// `baseline`, see [`split_states`]), and how many times slower the other blocks are. A table with
/// no other blocks says so in its last two columns.
pub fn state_table(names: &[&str], baseline: usize, blocks: &[Block]) -> Vec<String> {
    let (fast, slow) = split_states(blocks, baseline);
    let median =
        |chosen: &[&Block], i: usize| quartiles(chosen.iter().flat_map(|b| b[i].iter().copied()).collect()).0;
    let mut lines = vec![
        format!(
            "| call | the fastest state ({} blocks), ns | the other blocks ({}), ns | slowdown |",
            fast.len(),
            slow.len()
        ),
        "|---|---|---|---|".to_string(),
    ];
    for (i, name) in names.iter().enumerate() {
        let f = median(&fast, i);
        lines.push(if slow.is_empty() {
            format!("| {name} | {f:.1} | (none) | (none) |")
        } else {
            let o = median(&slow, i);
            format!("| {name} | {f:.1} | {o:.1} | {:.2}x |", o / f)
        });
    }
    lines
}

/// The lines of a comparison timed in blocks ([`rotate_blocks`]) of contender 0 (the subject)
/// against contender 1 (the baseline), named `names`: their medians over all rounds, and the median of the
/// rounds' ratios with its quartiles; then the same in the blocks of the fastest state seen (see
/// [`SAME_STATE`]), and in the other blocks, if any. A block's state is read from the baseline
/// alone, so which blocks count does not depend on the subject's times.
pub fn state_lines(what: &str, names: [&str; 2], blocks: &[Block]) -> Vec<String> {
    let median = |xs: Vec<f64>| quartiles(xs).0;
    let summary = |chosen: &[&Block]| {
        let side = |i: usize| median(chosen.iter().flat_map(|b| b[i].iter().copied()).collect());
        let ratios: Vec<f64> =
            chosen.iter().flat_map(|b| b[0].iter().zip(&b[1]).map(|(s, b)| s / b)).collect();
        let (m, q1, q3) = quartiles(ratios);
        (side(0), side(1), format!("ratio {m:.2} (quartiles {q1:.2} to {q3:.2})"))
    };
    let share = |n: usize| 100.0 * n as f64 / blocks.len() as f64;
    let [subject, base] = names;
    let all: Vec<&Block> = blocks.iter().collect();
    let (s, b, ratio) = summary(&all);
    let rounds = blocks[0][0].len();
    let mut lines = vec![
        format!(
            "{what}: {subject} {s:.1} ns, {base} {b:.1} ns (medians of {} blocks of {rounds} rounds)",
            blocks.len()
        ),
        format!("{what}: {subject} / {base}: {ratio}"),
    ];
    let (fast, slow) = split_states(blocks, 1);
    let (s, b, ratio) = summary(&fast);
    lines.push(format!(
        "{what}, the fastest state ({:.0} % of the blocks: {base} within {:.0} % of its fastest blocks'): {subject} {s:.1} ns, {base} {b:.1} ns, {ratio}",
        share(fast.len()),
        (SAME_STATE - 1.0) * 100.0
    ));
    if !slow.is_empty() {
        let (s, b, ratio) = summary(&slow);
        lines.push(format!(
            "{what}, the other blocks ({:.0} %): {subject} {s:.1} ns, {base} {b:.1} ns, {ratio}",
            share(slow.len())
        ));
    }
    lines
}

/// The adapters on each of `paths`: every contender's overhead over the bare call of the same
/// round (medians), and relent-tokio's over tower's with a budget, without and with `Timeout`.
pub fn adapters(a: &Adapters, paths: &[Path]) {
    a.check(paths);
    for &path in paths {
        let t = rotate(Contender::ALL.len(), |i| {
            let started = Instant::now();
            for _ in 0..BATCH {
                a.run(Contender::ALL[i], path);
            }
            Timed { took: started.elapsed(), calls: BATCH }
        });
        report(path.name, "", &t);
    }
}

/// Rounds of the contended mode, each preceded by as many rounds of warm-up.
pub const CONTENDED_ROUNDS: usize = 200;

/// Calls per thread per round of the contended mode: enough that the threads' wake-ups at the start
/// of a round (tens of µs apart on a virtual machine) are a small part of it.
pub const CONTENDED_CALLS: usize = 10_000;

/// The adapters with `n` threads, each on a runtime of its own made by `runtime` on that thread
/// but sharing `first`'s dependency and tower budget ([`Adapters::sharing`]), calling on `path`
/// back to back: the contenders timed in turn, `CONTENDED_CALLS` calls a thread a round, from the
/// first thread's first call to the last thread's last. Each figure is wall time per call, all
/// threads' calls counted: the cost of one dependency shared by as many cores as call it, its state
/// moving between their caches.
pub fn contended(
    first: &Adapters,
    n: usize,
    runtime: impl Fn() -> tokio::runtime::Runtime + Sync,
    path: Path,
) {
    let t = contended_rounds(first, n, runtime, path, CONTENDED_ROUNDS, CONTENDED_CALLS);
    report(path.name, &format!(", {n} threads sharing one dependency (wall time per call)"), &t);
}

/// [`contended`]'s rounds, `rounds` after as many of warm-up, `calls` calls a thread a round: each
/// contender's time per call in each round, in ns.
fn contended_rounds(
    first: &Adapters,
    n: usize,
    runtime: impl Fn() -> tokio::runtime::Runtime + Sync,
    path: Path,
    rounds: usize,
    calls: usize,
) -> Vec<Vec<f64>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
    use std::sync::{Barrier, Mutex};

    // Checked here, before any thread waits at a barrier: a thread that panicked would leave the
    // others waiting for it.
    first.check(&[path]);
    let (start, end) = (Barrier::new(n + 1), Barrier::new(n + 1));
    let (who, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
    // Each thread's first and last instant in the round: the threads time themselves, so that
    // waking the thread that reads the times is not in them.
    let spans: Mutex<Vec<Span>> = Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|scope| {
        for _ in 0..n {
            let (start, end, who, stop, spans, runtime) = (&start, &end, &who, &stop, &spans, &runtime);
            scope.spawn(move || {
                // Made here, so that what the thread's runtime allocates is the thread's own.
                let a = first.sharing(runtime());
                loop {
                    start.wait();
                    if stop.load(Relaxed) {
                        return;
                    }
                    let contender = Contender::ALL[who.load(Relaxed)];
                    let began = Instant::now();
                    for _ in 0..calls {
                        a.run(contender, path);
                    }
                    let ended = Instant::now();
                    spans.lock().unwrap().push(Span { began, ended, calls });
                    end.wait();
                }
            });
        }
        let t = rotate_rounds(rounds, Contender::ALL.len(), |i| {
            // The barriers order this store before the threads' loads, and their spans before
            // the reads below.
            who.store(i, Relaxed);
            start.wait();
            end.wait();
            let mut spans = spans.lock().unwrap();
            let timed = round(&spans);
            spans.clear();
            timed
        });
        stop.store(true, Relaxed);
        start.wait();
        t
    })
}

/// Rounds of the multi-threaded mode, each preceded by as many rounds of warm-up.
pub const WORKER_ROUNDS: usize = 100;

/// Tasks a worker thread of the multi-threaded mode, spawned each round: a service's worker runs
/// many requests' tasks, and more tasks than workers let the runtime spread them.
pub const TASKS_PER_WORKER: usize = 8;

/// Calls per task per round of the multi-threaded mode: `CONTENDED_CALLS` a worker, as each thread
/// of the contended mode makes.
pub const TASK_CALLS: usize = CONTENDED_CALLS / TASKS_PER_WORKER;

/// The adapters on `a`'s runtime, multi-threaded with `workers` worker threads, as a service runs
/// them: each round, each contender in turn is `TASKS_PER_WORKER` tasks a worker, spawned
/// together, each making `TASK_CALLS` calls on `path` back to back, all through `a`'s one
/// dependency and one tower budget. The tasks time themselves; each figure is the wall time from the
/// first task's first call to the last one's last, per call, all tasks' calls counted. The runtime's
/// scheduling (tasks stolen between workers, wake-ups, a timer's registration from whichever worker
/// runs it) is in every figure, the bare call's included.
pub fn on_workers(a: &Adapters, workers: usize, path: Path) {
    let tasks = TASKS_PER_WORKER * workers;
    let t = on_workers_rounds(a, tasks, path, WORKER_ROUNDS, TASK_CALLS);
    report(
        path.name,
        &format!(
            ", {tasks} tasks on {workers} worker thread{} sharing one dependency (wall time per call)",
            if workers == 1 { "" } else { "s" }
        ),
        &t,
    );
}

/// [`on_workers`]'s rounds, `rounds` after as many of warm-up, `tasks` tasks a round making `calls`
/// calls each: each contender's time per call in each round, in ns.
fn on_workers_rounds(a: &Adapters, tasks: usize, path: Path, rounds: usize, calls: usize) -> Vec<Vec<f64>> {
    a.check(&[path]);
    rotate_rounds(rounds, Contender::ALL.len(), |i| {
        let spans = a.block_on(async {
            let handles: Vec<_> = (0..tasks).map(|_| a.spawn(Contender::ALL[i], path, calls)).collect();
            let mut spans = Vec::with_capacity(tasks);
            for handle in handles {
                spans.push(handle.await.expect("a task that ran to its end"));
            }
            spans
        });
        round(&spans)
    })
}

/// A round from the spans its threads or tasks timed themselves: its wall time, from the first
/// one's start to the last one's end, and all their calls.
fn round(spans: &[Span]) -> Timed {
    let began = spans.iter().map(|s| s.began).min().expect("a span from each thread or task");
    let ended = spans.iter().map(|s| s.ended).max().expect("a span from each thread or task");
    Timed { took: ended - began, calls: spans.iter().map(|s| s.calls).sum() }
}

/// Prints each contender's overhead over the bare call of the same round (medians over the rounds
/// of `t`, one row a contender in `Contender::ALL`'s order), and relent-tokio's over tower's with a
/// budget, without and with `Timeout`.
fn report(path: &str, how: &str, t: &[Vec<f64>]) {
    for line in report_lines(path, how, t) {
        println!("{line}");
    }
}

/// The three lines [`report`] prints.
fn report_lines(path: &str, how: &str, t: &[Vec<f64>]) -> [String; 3] {
    // `ALL` lists the contenders in declaration order: a contender's index is its discriminant.
    let names = Contender::ALL.map(Contender::name);
    let ratios = [Contender::TowerRetryWithBudget, Contender::TowerRetryWithBudgetAndAttemptTimeout]
        .map(|other| (Contender::RelentTokio as usize, other as usize));
    let [overheads, a, b] = comparison_lines(&format!("{path}{how}"), &names, t, &ratios)
        .try_into()
        .expect("a line of overheads and one a ratio");
    [overheads, a, b]
}

/// A comparison's lines: each contender's median overhead over the bare call of the same round
/// (the bare call is `names[0]` and `t[0]`), then for each `(a, b)` of `ratios` the median over
/// rounds of `a`'s overhead over `b`'s.
pub fn comparison_lines(
    what: &str,
    names: &[&str],
    t: &[Vec<f64>],
    ratios: &[(usize, usize)],
) -> Vec<String> {
    let rounds = t[0].len();
    let over = |who: usize, r: usize| t[who][r] - t[0][r];
    let medians: Vec<String> = (1..names.len())
        .map(|who| {
            format!("{} +{:.0} ns", names[who], quartiles((0..rounds).map(|r| over(who, r)).collect()).0)
        })
        .collect();
    let mut lines = vec![format!(
        "{what}: overhead over the bare call ({:.0} ns), medians: {}",
        quartiles(t[0].clone()).0,
        medians.join(", ")
    )];
    lines.extend(ratios.iter().map(|&(a, b)| {
        ratio_text(&format!("{what}: {} / {} (overheads)", names[a], names[b]), rounds, |r| {
            over(a, r) / over(b, r)
        })
    }));
    lines
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Each round times every contender once, starting one further along each round; the warm-up
    /// rounds are timed and dropped; each figure is the time over the calls that timing counted.
    #[test]
    fn rotate_rounds_rotates_the_order_drops_the_warm_up_and_divides_by_the_calls_counted() {
        let mut order = Vec::new();
        let t = rotate_rounds(3, 3, |i| {
            order.push(i);
            // A time that names its place: the call's index in the run, times 100, plus the
            // contender; contender `i` makes 2^i calls.
            Timed { took: Std::from_nanos(100 * (order.len() as u64 - 1) + i as u64), calls: 1 << i }
        });
        assert_eq!(
            order,
            [0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1, 2, 1, 2, 0, 2, 0, 1],
            "3 rounds of warm-up, then 3"
        );
        // The kept rounds are calls 9 to 17: contender 0 was timed at calls 9, 14 and 16 (1 call
        // each), 1 at 10, 12 and 17 (2 calls), 2 at 11, 13 and 15 (4 calls).
        assert_eq!(t, [vec![900.0, 1400.0, 1600.0], vec![500.5, 600.5, 850.5], vec![275.5, 325.5, 375.5]]);
    }

    #[test]
    fn rotate_blocks_warms_up_once_then_keeps_whole_blocks_until_the_span_has_passed() {
        let mut order = Vec::new();
        let blocks = rotate_blocks(4, 3, Std::ZERO, 2, |i| {
            order.push(i);
            Timed { took: Std::from_nanos(10 * (i as u64 + 1)), calls: 1 }
        });
        // A span of zero still keeps one block: 4 rounds of warm-up and 3 kept, 2 contenders each,
        // who goes first rotating from round to round, the warm-up's included.
        assert_eq!(order, [0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1]);
        assert_eq!(blocks, vec![vec![vec![10.0; 3], vec![20.0; 3]]]);
        // Blocks until 20 ms have passed, each whole: every call is in a block.
        let (started, mut calls) = (Instant::now(), 0);
        let blocks = rotate_blocks(0, 2, Std::from_millis(20), 1, |_| {
            calls += 1;
            std::thread::sleep(Std::from_millis(1));
            Timed { took: Std::from_nanos(5), calls: 1 }
        });
        assert!(started.elapsed() >= Std::from_millis(20));
        assert_eq!(calls, 2 * blocks.len());
        assert!(blocks.iter().all(|b| b.len() == 1 && b[0] == [5.0, 5.0]));
    }

    #[test]
    fn state_lines_split_the_blocks_by_the_baseline_s_state_and_give_each_state_s_ratio() {
        // Two blocks in a fast state (baseline 10 and 10.4: within 5 % of 10), one in a slow one
        // (baseline 16), whose subject is slower still.
        let block = |subject: [f64; 2], baseline: [f64; 2]| vec![subject.to_vec(), baseline.to_vec()];
        let blocks = [
            block([10.0, 10.0], [10.0, 10.0]),
            block([9.36, 9.36], [10.4, 10.4]),
            block([24.0, 24.0], [16.0, 16.0]),
        ];
        let lines = state_lines("d", ["s", "b"], &blocks);
        assert_eq!(
            lines,
            [
                "d: s 10.0 ns, b 10.4 ns (medians of 3 blocks of 2 rounds)",
                "d: s / b: ratio 1.00 (quartiles 0.90 to 1.00)",
                "d, the fastest state (67 % of the blocks: b within 5 % of its fastest blocks'): s 9.4 ns, b 10.0 ns, ratio 0.90 (quartiles 0.90 to 1.00)",
                "d, the other blocks (33 %): s 24.0 ns, b 16.0 ns, ratio 1.50 (quartiles 1.50 to 1.50)",
            ]
        );
        // One state only: no line for the others.
        assert_eq!(state_lines("d", ["s", "b"], &blocks[..2]).len(), 3);
    }

    #[test]
    fn the_fastest_state_is_within_five_percent_of_the_baseline_s_first_percentile() {
        let block = |baseline: f64| vec![vec![baseline], vec![baseline]];
        let share = |lines: &[String]| {
            lines[2].split(" % of").next().unwrap().rsplit('(').next().unwrap().to_string()
        };
        // Within 5 %: 104 of 100 is in the fastest state, 106 is not.
        let lines = state_lines("d", ["s", "b"], &[block(100.0), block(104.0), block(106.0)]);
        assert_eq!(share(&lines), "67");
        // Of 200 blocks, the first percentile is the second fastest: the fastest alone may be a
        // fluke. Here the second is a fluke too, so only the two are within 5 % of it.
        let mut blocks = vec![block(50.0), block(90.0)];
        blocks.extend(std::iter::repeat_with(|| block(100.0)).take(198));
        let lines = state_lines("d", ["s", "b"], &blocks);
        assert_eq!(share(&lines), "1");
        assert!(lines[3].starts_with("d, the other blocks (99 %)"), "{}", lines[3]);
    }

    #[test]
    fn state_table_gives_each_call_s_median_in_each_state_and_its_slowdown() {
        // Contender 1 sets the state: its blocks at 10 and 10.4 are the fastest state, at 16 not.
        // Contender 0 is 10 and 12 in the fast state (median of the four rounds: the lower, 10),
        // 25 in the other; contender 2 is 4 throughout.
        let block = |a: [f64; 2], base: f64| vec![a.to_vec(), vec![base; 2], vec![4.0; 2]];
        let blocks = [block([10.0, 10.0], 10.0), block([12.0, 12.0], 10.4), block([25.0, 25.0], 16.0)];
        assert_eq!(
            state_table(&["decision", "step", "probe"], 1, &blocks),
            [
                "| call | the fastest state (2 blocks), ns | the other blocks (1), ns | slowdown |",
                "|---|---|---|---|",
                "| decision | 10.0 | 25.0 | 2.50x |",
                "| step | 10.0 | 16.0 | 1.60x |",
                "| probe | 4.0 | 4.0 | 1.00x |",
            ]
        );
        // Read from contender 2 instead, every block is in the fastest state.
        assert_eq!(
            state_table(&["decision", "step", "probe"], 2, &blocks)[2],
            "| decision | 12.0 | (none) | (none) |"
        );
    }

    #[test]
    fn quartiles_are_the_order_statistics_at_a_quarter_a_half_and_three_quarters() {
        assert_eq!(quartiles(vec![9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0]), (5.0, 3.0, 7.0));
        assert_eq!(quartiles(vec![4.0, 1.0, 3.0, 2.0]), (2.0, 1.0, 3.0), "the lower median of an even count");
        assert_eq!(quartiles(vec![6.5]), (6.5, 6.5, 6.5));
    }

    /// Overheads are taken over the bare call of the same round, and a ratio is the median of the
    /// rounds' ratios: here 2.00, where the ratio of the median overheads would be 200 / 50 = 4.
    #[test]
    fn report_gives_median_overheads_over_each_rounds_bare_call_and_the_median_of_the_rounds_ratios() {
        let t = [
            vec![100.0, 110.0, 90.0],  // bare call
            vec![200.0, 310.0, 390.0], // relent-tokio: +100, +200, +300
            vec![140.0, 150.0, 130.0], // backon: +40 each
            vec![150.0, 210.0, 100.0], // tower with a budget: +50, +100, +10
            vec![160.0, 170.0, 150.0], // backon with a timeout: +60 each
            vec![300.0, 310.0, 290.0], // tower with `Timeout`: +200 each
        ];
        assert_eq!(
            report_lines("success", ", 2 threads", &t),
            [
                "success, 2 threads: overhead over the bare call (100 ns), medians: relent_tokio +200 ns, \
                 backon +40 ns, tower_retry_with_budget +50 ns, backon_with_attempt_timeout +60 ns, \
                 tower_retry_with_budget_and_attempt_timeout +200 ns",
                "success, 2 threads: relent_tokio / tower_retry_with_budget (overheads): ratio 2.00 \
                 (quartiles 2.00 to 2.00)",
                "success, 2 threads: relent_tokio / tower_retry_with_budget_and_attempt_timeout \
                 (overheads): ratio 1.00 (quartiles 0.50 to 1.00)",
            ]
        );
    }

    /// A round of several threads or tasks: its wall time from the first one's start to the last
    /// one's end (not from the first listed, not the longest span), and all their calls.
    #[test]
    fn a_round_spans_from_the_first_start_to_the_last_end_and_counts_every_call() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Std::from_micros(us);
        let span = |began, ended, calls| Span { began: at(began), ended: at(ended), calls };
        assert_eq!(
            round(&[span(5, 40, 10), span(2, 30, 20), span(9, 41, 30)]),
            Timed { took: Std::from_micros(39), calls: 60 }
        );
        assert_eq!(round(&[span(3, 8, 7)]), Timed { took: Std::from_micros(5), calls: 7 });
        assert_eq!(Timed { took: Std::from_micros(39), calls: 60 }.per_call_ns(), 650.0);
    }

    /// The contended mode's driver, small: the path checked once (one relent-tokio call), then
    /// `n` threads each make `calls` calls a round of each contender, warm-up rounds included;
    /// every contender gets a figure in each kept round.
    #[test]
    fn the_contended_mode_runs_each_thread_s_calls_each_round_through_the_shared_dependency() {
        let first = Adapters::on_the_real_clock();
        let runtime = || tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let t = contended_rounds(&first, 3, runtime, crate::PATHS[0], 2, 5);
        assert_eq!(first.relent_calls(), 1 + 3 * 2 * 2 * 5, "a check, then 3 threads × 4 rounds × 5 calls");
        assert_eq!(t.len(), Contender::ALL.len());
        assert!(t.iter().all(|c| c.len() == 2 && c.iter().all(|&ns| ns > 0.0)), "{t:?}");
    }

    /// The multi-threaded mode's driver, small (on a current-thread runtime: the test builds
    /// without the `multi-thread` feature): one check, then `tasks` tasks a round of each contender
    /// making `calls` calls each, warm-up rounds included.
    #[test]
    fn the_multi_threaded_mode_spawns_its_tasks_each_round_through_the_shared_dependency() {
        let a = Adapters::on_the_real_clock();
        let t = on_workers_rounds(&a, 4, crate::PATHS[0], 3, 2);
        assert_eq!(a.relent_calls(), 1 + 4 * 6 * 2, "a check, then 4 tasks × 6 rounds × 2 calls");
        assert_eq!(t.len(), Contender::ALL.len());
        assert!(t.iter().all(|c| c.len() == 3 && c.iter().all(|&ns| ns > 0.0)), "{t:?}");
    }
}
