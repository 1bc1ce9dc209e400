//! One operation's whole decision path through relent-core (start, dispatch, a retryable failure,
//! the jittered backoff, the budget check and charge, the retry, the success, the completion),
//! against a hand-written baseline that does the same arithmetic with none of the rules: the loop a
//! person writes first. All run in the same process; the README reports the ratios.
//!
//! Run: `cargo bench -p relent-tests --bench decision`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use rand_core::RngCore;
use relent_core::{
    Action, BreakerConfig, Context, Dependency, DependencyConfig, Operation, RateLimit, ReplaySafety,
    RetryBudget, RetryPolicy, Verdict,
};
use relent_tests::rng::seeded;
use relent_tests::transcript::valid;

const HZ: u64 = 1_000_000;
type D = relent_core::Duration<HZ>;
type T = relent_core::Instant<HZ>;

const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2))
        .attempt_timeout(D::from_secs(3))
        .build(),
);

/// 100 %: every retry is allowed, so every iteration takes the same path; the window is still read
/// and written on each call.
const RATIO: DependencyConfig<HZ> =
    DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(100, 0)));

const TOKENS: DependencyConfig<HZ> = DependencyConfig::new(D::from_secs(10))
    .budget(valid(RetryBudget::token_bucket(u32::MAX / 4, u32::MAX / 4, D::from_secs(1), D::from_secs(5))));

/// Every protection on, sized so that none refuses: each is consulted and charged on every attempt.
const PIPELINE: DependencyConfig<HZ> = DependencyConfig::new(D::from_secs(10))
    .budget(valid(RetryBudget::ratio(100, 0)))
    .breaker(BreakerConfig::failure_ratio(90, 1_000_000, D::from_secs(30)).slow_calls(D::from_secs(2)))
    .bulkhead(64)
    .rate_limit(RateLimit::new(1_000_000, D::from_secs(1)).burst(1_000))
    .cooldown(D::from_secs(60));

/// One operation through the core: attempt 1 fails (retryable), attempt 2 succeeds.
fn relent(
    config: &DependencyConfig<HZ>,
    dep: &mut Dependency<HZ, 10>,
    rng: &mut impl RngCore,
    clock: &mut u64,
) -> u8 {
    let context = Context::new(D::from_secs(10), ReplaySafety::replayable_read(D::from_secs(3600)));
    let mut now = T::from_ticks(*clock);
    let mut op = Operation::<HZ, Verdict<HZ>>::start(&POLICY, config, context, now).unwrap();
    let mut failed = false;
    loop {
        match op.poll(now, dep, &mut ()) {
            Action::Dispatch(attempt) => {
                now = T::from_ticks(now.as_ticks() + 1_000);
                if failed {
                    op.on_success(attempt, now, dep, &mut ());
                } else {
                    failed = true;
                    op.on_failure(attempt, now, dep, rng, black_box(Verdict::Retryable), &mut ());
                }
            }
            Action::Wait { until } => now = until,
            Action::Done => break,
        }
    }
    *clock = now.as_ticks();
    op.take_completion().unwrap().summary.dispatched
}

/// The baseline: the same attempt limit, exponential backoff with full jitter, and deadline check,
/// written inline, with no budget, replay statement, classification, protections or events.
fn hand_written(rng: &mut impl RngCore, clock: &mut u64) -> u8 {
    let deadline = *clock + 10_000_000;
    let mut now = *clock;
    let mut attempts = 0u8;
    loop {
        attempts += 1;
        now += 1_000;
        let failed = black_box(attempts == 1);
        if !failed || attempts >= 3 {
            break;
        }
        let nominal = (100_000u64 << (attempts - 1)).min(2_000_000);
        let delay = rng.next_u64() % (nominal + 1);
        if now + delay >= deadline {
            break;
        }
        now += delay;
    }
    *clock = now;
    attempts
}

fn decision(c: &mut Criterion) {
    let mut g = c.benchmark_group("fail_retry_succeed");
    g.bench_function("hand_written_baseline", |b| {
        let (mut rng, mut clock) = (seeded(1), 0);
        b.iter(|| hand_written(&mut rng, &mut clock))
    });
    for (name, config) in [
        ("relent_core_token_budget", &TOKENS),
        ("relent_core_ratio_budget", &RATIO),
        ("relent_core_whole_pipeline", &PIPELINE),
    ] {
        g.bench_function(name, |b| {
            let mut dep = Dependency::new(config, T::from_ticks(0)).unwrap();
            let (mut rng, mut clock) = (seeded(1), 0);
            b.iter(|| relent(config, &mut dep, &mut rng, &mut clock))
        });
    }
    g.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);
