//! relent-tokio's overhead per operation, against calling the same future directly, in one run on
//! a current-thread runtime with paused time (sleeps complete at once, so only the work is timed).
//!
//! - success path: one attempt that succeeds; baseline: the future awaited directly.
//! - one-retry path: a retryable failure, a backoff sleep, a success; baseline: the same two
//!   futures with a `tokio::time::sleep` of the nominal delay between them, written by hand.
//!
//! Run: `cargo bench -p relent-tokio --bench overhead`

use std::hint::black_box;
use std::time::Duration as Std;

use criterion::{Criterion, criterion_group, criterion_main};
use relent_tokio::core::{
    Classify, Context, DependencyConfig, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tokio::{Dependency, Duration, HZ};

#[derive(Debug)]
struct Refused;

impl Classify<HZ> for Refused {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

const POLICY: RetryPolicy<HZ> =
    match RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
        .attempt_timeout(Duration::from_secs(3))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };

async fn call(fail: bool) -> Result<u32, Refused> {
    if black_box(fail) { Err(Refused) } else { Ok(7) }
}

fn overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(100, 0).unwrap());
    let dep = rt.block_on(async { Dependency::with_seed("payrail", config, 1).unwrap() });
    let context =
        Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(3600)));

    let mut g = c.benchmark_group("relent_tokio");
    g.bench_function("success/direct", |b| b.iter(|| rt.block_on(call(false))));
    g.bench_function("success/relent_execute", |b| {
        b.iter(|| rt.block_on(dep.execute(&POLICY, context, |_| call(false))))
    });
    g.bench_function("one_retry/hand_written", |b| {
        b.iter(|| {
            rt.block_on(async {
                match call(true).await {
                    Ok(v) => Ok(v),
                    Err(_) => {
                        tokio::time::sleep(Std::from_millis(100)).await;
                        call(false).await
                    }
                }
            })
        })
    });
    g.bench_function("one_retry/relent_execute", |b| {
        b.iter(|| rt.block_on(dep.execute(&POLICY, context, |info| call(info.number() == 1))))
    });
    g.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
