//! Every core event as a `tracing` event with the dependency's name and the operation's id.
//!
//! Its own test binary, on purpose: tracing caches each callsite's interest process-wide, and a
//! test running in parallel with no subscriber would register the callsites first and have them
//! cached as uninteresting before this test's thread-local subscriber exists.

use std::sync::{Arc, Mutex};
use std::time::Duration as Std;

use relent_tokio::core::{
    Classify, Context, DependencyConfig, Jitter, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tokio::{Dependency, Duration, HZ};

#[derive(Debug)]
struct Busy;

impl Classify<HZ> for Busy {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::RetryableAfter(Duration::from_secs(1))
    }
}

const CHECKOUT: RetryPolicy<HZ> =
    match RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(Duration::from_secs(3))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };

/// A writer the test subscriber appends to.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Self;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test(start_paused = true)]
async fn every_decision_is_a_tracing_event_with_the_dependency_and_the_operation() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(captured.clone())
        .with_ansi(false)
        .without_time()
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 10).unwrap());
    let dep = Dependency::with_seed("payrail", config, 7).unwrap();
    let context = Context::new(
        relent_tokio::ticks(Std::from_secs(10)),
        ReplaySafety::replayable_read(Duration::from_secs(3600)),
    );
    let _ = dep
        .execute(&CHECKOUT, context.id(42), |info| async move {
            if info.number == 1 { Err(Busy) } else { Ok(()) }
        })
        .await;
    let out = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> =
        out.lines().map(|l| l.split_once("relent_tokio::trace: ").map_or(l, |(_, r)| r)).collect();
    assert_eq!(
        lines,
        [
            "relent: attempt dispatched dependency=\"payrail\" operation=42 attempt=1 timeout_us=3000000",
            "relent: attempt failed dependency=\"payrail\" operation=42 attempt=1 then=\"retry\"",
            "relent: retry scheduled dependency=\"payrail\" operation=42 attempt=2 delay_us=1000000 source=\"retry_after\" stated_us=1000000",
            "relent: attempt dispatched dependency=\"payrail\" operation=42 attempt=2 timeout_us=3000000",
            "relent: attempt succeeded dependency=\"payrail\" operation=42 attempt=2",
            "relent: operation succeeded dependency=\"payrail\" operation=42 dispatched=2",
        ],
        "{out}"
    );
}
