//! Relent beside the crates users would pick instead, in one run on one machine. The README reports
//! ratios, not absolute times.
//!
//! Core, synchronous. Where a call needs an input built first (a fresh backoff, an operation with an
//! attempt out), `batched` builds them untimed and times only the calls:
//! - `backoff_step`: one jittered exponential backoff step: backon's `ExponentialBackoff::next`
//!   against relent-core's `RetryPolicy::delay` (full jitter).
//! - `retry_decision`: relent-core's whole decision after a failed attempt (`on_failure`:
//!   classification, deadline and replay checks, the ratio budget, the breaker, jitter), against
//!   backon's bare step: issue 6's goal is a ratio of at most 1.
//! - `decision_from_scratch`: a plain loop on both sides: relent-core starts, admits and decides;
//!   backon builds and steps.
//! - `budget`: tower's `TpsBudget` deposit + withdraw, against relent-core's ratio budget read over
//!   its window (`Dependency::retries_available`).
//! - `rate_limit`: governor's `check`, against relent-core's `next_rate_unit` (GCRA), and against
//!   relent-core's start of an operation with its attempt's admission, which takes the rate unit.
//!
//! Adapters, on a current-thread tokio runtime with paused time (each figure includes `block_on`):
//! - `success` (an attempt ready at its first poll), `success_after_a_wait` (an attempt pending
//!   once, as a call that waits for the network is, so that an attempt timeout arms its timer) and
//!   `one_retry` (a failure, a 100 ms backoff sleep, a success): relent-tokio's `execute` (ratio
//!   budget), backon's `Retryable::retry` with tokio sleep, tower's `Retry` with a `TpsBudget`
//!   policy, each of those two with an attempt timeout as well, and the bare call.
//! - The contenders and paths are relent-adapter-bench's, whose own `production` bench runs the
//!   first two paths in a production build (tokio without `test-util`, the real clock).
//!
//! Run: `cargo bench -p relent-tests --bench alternatives`; with `-- --paired`, the same
//! comparisons timed in turn, round after round, with the median of the rounds' ratios (see
//! `paired`): the figures the README's ratios come from. With `-- --states`, relent-core's decision
//! and backon's step beside probes of the core's parts, in the machine's fastest state and in the
//! others (see `states`).

use std::hint::black_box;
use std::time::Duration as Std;

use backon::{BackoffBuilder, ExponentialBuilder};
use criterion::{BatchSize, Criterion, criterion_group};
use relent_adapter_bench::paired::{self, BATCH, ROUNDS, Timed, rotate_blocks, state_lines};
use relent_adapter_bench::probes;
use relent_adapter_bench::{Adapters, CONTEXT, Contender, PATHS};
use relent_core::{
    Action, BreakerConfig, Dependency, DependencyConfig, Jitter, Operation, RateLimit, RetryBudget,
    RetryPolicy, Verdict,
};
use relent_tests::rng::seeded;
use relent_tests::transcript::valid;
use tower::retry::budget::{Budget, TpsBudget};

const HZ: u64 = 1_000_000;
type D = relent_core::Duration<HZ>;
type T = relent_core::Instant<HZ>;

const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2))
        .jitter(Jitter::Full)
        .attempt_timeout(D::from_secs(3))
        .build(),
);

const CONFIG: DependencyConfig<HZ> = DependencyConfig::new(D::from_secs(10))
    .budget(valid(RetryBudget::ratio(100, 0)))
    .breaker(BreakerConfig::failure_ratio(90, 1_000_000, D::from_secs(30)))
    .rate_limit(RateLimit::new(1_000_000, D::from_secs(1)).burst(1_000));

/// backon's equivalent of `POLICY`: 3 attempts, 100 ms doubling to 2 s, with jitter.
fn backon_policy() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Std::from_millis(100))
        .with_max_delay(Std::from_secs(2))
        .with_max_times(3)
        .with_jitter()
}

/// Times `routine` over `iters` inputs, built untimed by `setup` `BATCH` at a time into a reused
/// buffer, then run in one timed pass. Both take `state` in turn (relent's dependency and clock).
/// Unlike criterion's batched inputs (a fresh vector per batch, whose page faults and cache misses
/// the figures then include), both sides of a comparison run on inputs in cache.
fn batched<S, I, O>(
    iters: u64,
    state: &mut S,
    mut setup: impl FnMut(&mut S) -> I,
    mut routine: impl FnMut(&mut S, &mut I) -> O,
) -> Std {
    let mut inputs = Vec::with_capacity(BATCH);
    let mut timed = Std::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH as u64);
        left -= n;
        inputs.clear();
        inputs.extend((0..n).map(|_| setup(state)));
        let started = std::time::Instant::now();
        for input in &mut inputs {
            black_box(routine(state, input));
        }
        timed += started.elapsed();
    }
    timed
}

/// An operation started at `clock` with its first attempt out, and when that attempt fails: one
/// input of the `retry_decision` benches.
type OutForFailure = (Operation<'static, HZ, Verdict<HZ>>, Option<relent_core::Attempt<HZ>>, T);

fn attempt_out(dep: &mut Dependency<HZ, 10>, clock: u64) -> OutForFailure {
    let now = T::from_ticks(clock);
    let mut op = Operation::<HZ, Verdict<HZ>>::start(&POLICY, &CONFIG, CONTEXT, now).unwrap();
    let Action::Dispatch(attempt) = op.poll(now, dep, &mut ()) else { unreachable!() };
    (op, Some(attempt), T::from_ticks(clock + 500))
}

/// The measured call: the attempt's failure, reported once. The verdict is opaque, as a
/// `Classify::classify` result is: a constant lets the compiler drop the other verdicts' paths
/// when the bench is built as one codegen unit (191 instructions instead of 219; at cargo's default
/// of 16 units, 227 either way).
fn fail(
    dep: &mut Dependency<HZ, 10>,
    rng: &mut rand_xoshiro::Xoshiro256PlusPlus,
    (op, attempt, at): &mut OutForFailure,
) {
    let attempt = attempt.take().unwrap();
    op.on_failure(attempt, *at, dep, rng, black_box(Verdict::Retryable), &mut ());
}

/// A decision from nothing at `clock`: an operation starts, its first attempt is admitted and fails
/// 0.5 ms later. Returns whether the operation ended (it does not: a retry is scheduled).
fn from_scratch(
    dep: &mut Dependency<HZ, 10>,
    rng: &mut rand_xoshiro::Xoshiro256PlusPlus,
    clock: u64,
) -> bool {
    let now = T::from_ticks(clock);
    let mut op = Operation::<HZ, Verdict<HZ>>::start(&POLICY, &CONFIG, CONTEXT, now).unwrap();
    let Action::Dispatch(attempt) = op.poll(now, dep, &mut ()) else { unreachable!() };
    op.on_failure(attempt, T::from_ticks(clock + 500), dep, rng, black_box(Verdict::Retryable), &mut ());
    op.is_done()
}

fn core(c: &mut Criterion) {
    let mut g = c.benchmark_group("backoff_step");
    g.bench_function("backon", |b| {
        b.iter_custom(|iters| {
            batched(iters, &mut (), |_| backon_policy().build(), |_, backoff| backoff.next())
        })
    });
    g.bench_function("relent_core", |b| {
        let mut rng = seeded(1);
        b.iter(|| POLICY.delay(black_box(2), D::from_millis(100), &mut rng))
    });
    g.finish();

    // A whole decision from nothing, in a plain loop on both sides (no batched inputs, whose
    // memory traffic the batched figures below include): relent-core starts an operation, admits
    // its first attempt and decides what to do after its failure (budget, breaker, deadline,
    // replay statement, jitter); backon builds its backoff and takes one step.
    let mut g = c.benchmark_group("decision_from_scratch");
    g.bench_function("backon_build_and_step", |b| b.iter(|| backon_policy().build().next()));
    g.bench_function("relent_core_start_admit_fail", |b| {
        let mut dep = Dependency::<HZ, 10>::new(&CONFIG, T::from_ticks(0)).unwrap();
        let mut rng = seeded(1);
        let mut t = 0;
        b.iter(|| {
            t += 1_000;
            from_scratch(&mut dep, &mut rng, t)
        })
    });
    g.finish();

    // The goal's comparison, both sides in `batched`.
    let mut g = c.benchmark_group("retry_decision");
    g.bench_function("backon_step", |b| {
        b.iter_custom(|iters| {
            batched(iters, &mut (), |_| backon_policy().build(), |_, backoff| backoff.next())
        })
    });
    g.bench_function("relent_core_on_failure", |b| {
        let dep = Dependency::<HZ, 10>::new(&CONFIG, T::from_ticks(0)).unwrap();
        // The dependency, the RNG and the clock, which advances 1 ms per operation.
        let mut state = (dep, seeded(1), 0u64);
        b.iter_custom(|iters| {
            batched(
                iters,
                &mut state,
                |(dep, _, clock)| {
                    *clock += 1_000;
                    attempt_out(dep, *clock)
                },
                |(dep, rng, _), input| fail(dep, rng, input),
            )
        })
    });
    // The same two in criterion's `iter_batched` (a fresh vector of inputs per batch): its page
    // faults and cache misses weigh on both sides, so the ratio differs from the one above.
    g.bench_function("backon_step_criterion_batches", |b| {
        b.iter_batched(|| backon_policy().build(), |mut backoff| backoff.next(), BatchSize::SmallInput)
    });
    g.bench_function("relent_core_on_failure_criterion_batches", |b| {
        // Setup and measured call take turns with the dependency and the clock.
        let dep = std::cell::RefCell::new(Dependency::<HZ, 10>::new(&CONFIG, T::from_ticks(0)).unwrap());
        let clock = std::cell::Cell::new(0u64);
        let mut rng = seeded(1);
        b.iter_batched_ref(
            || {
                clock.set(clock.get() + 1_000);
                attempt_out(&mut dep.borrow_mut(), clock.get())
            },
            |input| fail(&mut dep.borrow_mut(), &mut rng, input),
            BatchSize::SmallInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("budget");
    g.bench_function("tower_tps_budget_deposit_withdraw", |b| {
        let budget = TpsBudget::new(Std::from_secs(10), 10, 0.1);
        b.iter(|| {
            budget.deposit();
            budget.withdraw()
        })
    });
    g.bench_function("relent_core_ratio_budget_read", |b| {
        let config = DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(10, 10)));
        let mut dep: Dependency<HZ, 10> = Dependency::new(&config, T::from_ticks(0)).unwrap();
        let mut clock = 0u64;
        b.iter(|| {
            clock += 100;
            dep.retries_available(&config, T::from_ticks(clock))
        })
    });
    g.finish();

    let mut g = c.benchmark_group("rate_limit");
    g.bench_function("governor_check", |b| {
        let limiter = governor::RateLimiter::direct(governor::Quota::per_second(
            std::num::NonZeroU32::new(1_000_000).unwrap(),
        ));
        b.iter(|| limiter.check().is_ok())
    });
    g.bench_function("relent_core_next_rate_unit", |b| {
        let dep: Dependency<HZ, 10> = Dependency::new(&CONFIG, T::from_ticks(0)).unwrap();
        let mut clock = 0u64;
        b.iter(|| {
            clock += 1;
            dep.next_rate_unit(&CONFIG, T::from_ticks(clock))
        })
    });
    // What governor's check does and more: an operation starts and its attempt is admitted, which
    // takes a rate unit and counts the call in the ratio budget's window (no lock: the adapters
    // hold their own around it). One unit a microsecond, one operation a microsecond: never a wait.
    g.bench_function("relent_core_start_and_admission_taking_a_rate_unit", |b| {
        let config = DependencyConfig::new(D::from_secs(10))
            .budget(valid(RetryBudget::ratio(10, 0)))
            .rate_limit(RateLimit::new(1_000_000, D::from_secs(1)).burst(1_000));
        let mut dep: Dependency<HZ, 10> = Dependency::new(&config, T::from_ticks(0)).unwrap();
        let (mut clock, mut not_dispatched) = (0u64, 0u64);
        b.iter(|| {
            clock += 1;
            let now = T::from_ticks(clock);
            let mut op = Operation::<HZ, Verdict<HZ>>::start(&POLICY, &config, CONTEXT, now).unwrap();
            let dispatched = matches!(op.poll(now, &mut dep, &mut ()), Action::Dispatch(_));
            not_dispatched += u64::from(!dispatched);
            dispatched
        });
        // Every admission took its unit: none waited or was refused.
        assert_eq!(not_dispatched, 0, "admissions that did not dispatch");
    });
    g.finish();
}

/// The adapter benches on a paused current-thread runtime: every path, the retry's 100 ms backoff
/// included, completes at once.
fn paused_adapters() -> Adapters {
    Adapters::new(
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap(),
    )
}

fn adapters(c: &mut Criterion) {
    let a = paused_adapters();
    a.check(&PATHS);
    for path in PATHS {
        let mut g = c.benchmark_group(path.name);
        for who in Contender::ALL {
            g.bench_function(who.name(), |b| b.iter(|| a.run(who, path)));
        }
        g.finish();
    }
}

/// How long the paired mode times relent-core's decision against backon's step, and the same from
/// nothing. Each side takes some 15 to 25 ns a call, so [`ROUNDS`] rounds take some 20 ms, and on
/// the development machine a run that short caught one state of the machine: the states come and
/// go in milliseconds (docs/performance.md), the ratio differs between them, and single runs gave
/// either ratio. Over seconds, a run meets the states as they come, and reports their ratios.
const DECISION_SPAN: Std = Std::from_secs(5);

/// Rounds per block of those comparisons: about 1.3 ms for the decision's, short against a state's
/// spell.
const DECISION_BLOCK: usize = 200;

/// relent-core's decision after a failure and backon's bare step, timed `BATCH` calls at a time on
/// inputs in cache, as the paired and states modes compare them: the dependency, generator and
/// clock that the decision's inputs are built from, kept from one timing to the next.
struct Decisions(Dependency<HZ, 10>, rand_xoshiro::Xoshiro256PlusPlus, u64);

impl Decisions {
    fn new() -> Self {
        Self(Dependency::new(&CONFIG, T::from_ticks(0)).unwrap(), seeded(1), 0)
    }

    /// Times `BATCH` of relent-core's decisions (`which` 0), each on an operation started a
    /// millisecond after the last, or `BATCH` of backon's steps (any other).
    fn time(&mut self, which: usize) -> Timed {
        let took = match which {
            0 => batched(
                BATCH as u64,
                self,
                |Self(dep, _, clock)| {
                    *clock += 1_000;
                    attempt_out(dep, *clock)
                },
                |Self(dep, rng, _), input| fail(dep, rng, input),
            ),
            _ => batched(BATCH as u64, &mut (), |_| backon_policy().build(), |_, backoff| backoff.next()),
        };
        Timed { took, calls: BATCH }
    }
}

/// The paired mode (`cargo bench -p relent-tests --bench alternatives -- --paired`): the same
/// comparisons as criterion's, with the contenders timed in turn, `BATCH` calls each, round after
/// round, and a ratio taken within each round. A machine shared with other work drifts between
/// criterion's benchmarks, which run one after another for seconds each; drift between the halves
/// of one round is small, so the median of the rounds' ratios is steady within a run. The
/// machine's state still shows: on the development machine, its states give relent-core's
/// decision different ratios to backon's step, so the two comparisons of relent-core run for
/// [`DECISION_SPAN`] each and report the fastest state's ratio as well as the whole run's (the
/// README has the figures).
fn paired() {
    println!(
        "paired mode: {ROUNDS} rounds after {ROUNDS} of warm-up, {BATCH} calls per contender per round; \
         the decisions' comparisons for {} s after the warm-up, in blocks of {DECISION_BLOCK} rounds",
        DECISION_SPAN.as_secs()
    );
    // relent-core's decision after a failure against backon's bare step, inputs in cache: for
    // `DECISION_SPAN`, in blocks (see `DECISION_BLOCK`).
    let mut state = Decisions::new();
    let blocks = rotate_blocks(ROUNDS, DECISION_BLOCK, DECISION_SPAN, 2, |i| state.time(i));
    for line in state_lines("retry_decision", ["relent_core_on_failure", "backon_step"], &blocks) {
        println!("{line}");
    }

    // From nothing, in plain loops: as cheap, so timed the same way.
    let mut dep = Dependency::<HZ, 10>::new(&CONFIG, T::from_ticks(0)).unwrap();
    let mut rng = seeded(1);
    let mut clock = 0u64;
    let blocks = rotate_blocks(ROUNDS, DECISION_BLOCK, DECISION_SPAN, 2, |i| {
        let started = std::time::Instant::now();
        for _ in 0..BATCH {
            if i == 0 {
                clock += 1_000;
                black_box(from_scratch(&mut dep, &mut rng, clock));
            } else {
                black_box(backon_policy().build().next());
            }
        }
        Timed { took: started.elapsed(), calls: BATCH }
    });
    let names = ["relent_core_start_admit_fail", "backon_build_and_step"];
    for line in state_lines("decision_from_scratch", names, &blocks) {
        println!("{line}");
    }

    // The adapters: overheads over the bare call of the same round.
    paired::adapters(&paused_adapters(), &PATHS);
}

/// The states mode (`--states`): relent-core's decision and backon's step timed in blocks, as in the
/// paired mode, beside probes that each lean on one part of the core (relent-adapter-bench's
/// `probes`), and each call's median in the fastest state seen and in the other blocks (read from
/// backon's step, as the paired mode reads them). A call slows in the other blocks as much as it
/// needs what they take away (docs/performance.md has the figures).
fn states() {
    const PROBES: [&str; 7] = [
        "relent-core's decision",
        "backon's step",
        "issue width: 230 instructions in 4 chains",
        "latency: 230 instructions in 1 chain",
        "float latency: 6 rounds of mul, add, min, div",
        "cache: a word of each of 12 lines",
        "branches: 40 not taken",
    ];
    println!(
        "states mode: {} s after {ROUNDS} rounds of warm-up, in blocks of {DECISION_BLOCK} rounds, {BATCH} calls per call per round\n",
        2 * DECISION_SPAN.as_secs()
    );
    let mut decisions = Decisions::new();
    let mut lines = [probes::Line([1; 8]); 12];
    let values = [9u64; 40];
    let blocks = rotate_blocks(ROUNDS, DECISION_BLOCK, 2 * DECISION_SPAN, PROBES.len(), |i| {
        let took = match i {
            0 | 1 => return decisions.time(i),
            2 => batched(BATCH as u64, &mut (), |_| 12_345, |_, x| probes::issue_width(*x)),
            3 => batched(BATCH as u64, &mut (), |_| 3, |_, x| probes::latency_chain(*x)),
            4 => batched(BATCH as u64, &mut (), |_| 1.5, |_, x| probes::float_chain(*x)),
            5 => batched(BATCH as u64, &mut lines, |_| 7, |lines, x| probes::cache_lines(lines, *x)),
            _ => batched(BATCH as u64, &mut (), |_| (), |_, ()| probes::branches(&values)),
        };
        Timed { took, calls: BATCH }
    });
    for line in paired::state_table(&PROBES, 1, &blocks) {
        println!("{line}");
    }
}

/// The count mode (`--count WHAT N`): runs WHAT `n` times and nothing else, so that callgrind
/// counts its instructions without criterion's loop around them. The evidence binary runs it twice
/// under callgrind, for `n` and `2n`, and takes the difference, so setup and first-use costs cancel
/// (see `instructions` in `src/bin/evidence.rs`). WHAT is `retry_decision/relent_core_on_failure`,
/// `retry_decision/backon_step`, or a path and a contender of the adapter benches as criterion names
/// them (`success/relent_tokio`).
fn count(what: &str, n: u64) {
    match what {
        "retry_decision/relent_core_on_failure" => {
            // The paired mode's inputs: one operation per millisecond, its first attempt failing.
            let mut dep = Dependency::<HZ, 10>::new(&CONFIG, T::from_ticks(0)).unwrap();
            let mut rng = seeded(1);
            for i in 1..=n {
                let mut input = attempt_out(&mut dep, i * 1_000);
                fail(&mut dep, &mut rng, &mut input);
                black_box(&input);
            }
        }
        "retry_decision/backon_step" => {
            for _ in 0..n {
                black_box(backon_policy().build().next());
            }
        }
        _ => {
            if let Err(why) = relent_adapter_bench::count(&paused_adapters(), &PATHS, what, n) {
                panic!("{why}; or retry_decision/relent_core_on_failure, or retry_decision/backon_step")
            }
        }
    }
}

criterion_group!(benches, core, adapters);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--paired") {
        paired();
        return;
    }
    if args.iter().any(|a| a == "--states") {
        states();
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--count") {
        let usage = "usage: --count WHAT N (see `count` in benches/alternatives.rs)";
        let what = args.get(at + 1).expect(usage);
        let n = args.get(at + 2).and_then(|n| n.parse().ok()).expect(usage);
        count(what, n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
