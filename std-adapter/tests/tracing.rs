//! Every core event as a `tracing` event with the dependency's name and the operation's id.
//!
//! Its own test binary, on purpose: tracing caches each callsite's interest process-wide, and a
//! test running in parallel with no subscriber would register the callsites first and have them
//! cached as uninteresting before this test's thread-local subscriber exists.

use std::sync::{Arc, Mutex};
use std::time::Duration as Std;

use relent_tokio::core::{
    AdaptiveLimit, BreakerConfig, Classify, Context, DependencyConfig, DutyCycle, Jitter, RateLimit,
    ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tokio::{Dependency, Duration, HZ};
use tracing::Level;

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

/// Sends this thread's tracing events up to `max` to `writer` from here on, one line each, without
/// the time.
fn install<W>(max: Level, writer: W) -> tracing::subscriber::DefaultGuard
where
    W: std::io::Write + Clone + Send + Sync + 'static,
{
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(max)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    guard
}

/// Captures this thread's tracing events up to `max` from here on, as lines without the time and
/// the module.
fn capture(max: Level) -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let guard = install(max, captured.clone());
    (captured, guard)
}

/// The lines of a DEBUG transcript that a subscriber up to `max` sees. relent-tokio keeps a step's
/// events to log after the lock only if their level is enabled: a transcript at INFO or WARN that
/// lacks one of these lines is an event dropped at the wrong level.
fn seen_up_to(max: Level, debug_transcript: &[&str]) -> Vec<String> {
    let level = |line: &str| line.split(' ').next().unwrap().parse::<Level>().unwrap();
    debug_transcript.iter().filter(|line| level(line) <= max).map(|line| line.to_string()).collect()
}

impl Captured {
    fn lines(&self) -> Vec<String> {
        let out = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        out.lines().map(|l| l.trim_start().replacen("relent_tokio::trace: ", "", 1)).collect()
    }
}

#[tokio::test(start_paused = true)]
async fn every_decision_is_a_tracing_event_with_the_dependency_and_the_operation() {
    retry_after_a_wait(Level::DEBUG).await;
}

#[tokio::test(start_paused = true)]
async fn at_info_a_retry_logs_only_its_schedule() {
    retry_after_a_wait(Level::INFO).await;
}

#[tokio::test(start_paused = true)]
async fn at_warn_a_retry_that_succeeds_logs_nothing() {
    retry_after_a_wait(Level::WARN).await;
}

async fn retry_after_a_wait(max: Level) {
    let (captured, _guard) = capture(max);
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 10).unwrap());
    let dep = Dependency::with_seed("payrail", config, 7).unwrap();
    let context = Context::new(
        relent_tokio::ticks(Std::from_secs(10)),
        ReplaySafety::replayable_read(Duration::from_secs(3600)),
    );
    let _ = dep
        .execute(&CHECKOUT, context.id(42), |info| async move {
            if info.number() == 1 { Err(Busy) } else { Ok(()) }
        })
        .await;
    assert_eq!(
        captured.lines(),
        seen_up_to(
            max,
            &[
                "DEBUG relent: attempt dispatched dependency=\"payrail\" operation=42 attempt=1 timeout_us=3000000",
                "DEBUG relent: attempt failed dependency=\"payrail\" operation=42 attempt=1 verdict=\"retryable_after\" then=\"retry\"",
                "INFO relent: retry scheduled dependency=\"payrail\" operation=42 attempt=2 delay_us=1000000 source=\"retry_after\" stated_us=1000000",
                "DEBUG relent: attempt dispatched dependency=\"payrail\" operation=42 attempt=2 timeout_us=3000000",
                "DEBUG relent: attempt succeeded dependency=\"payrail\" operation=42 attempt=2",
                "DEBUG relent: operation succeeded dependency=\"payrail\" operation=42 dispatched=2",
            ]
        )
    );
}

/// A failure the caller's classification does not retry.
#[derive(Debug)]
struct Rejected;

impl Classify<HZ> for Rejected {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::NotRetryable
    }
}

/// A failure not retried says so on its own line, and the operation's end, at INFO, has no code:
/// nothing stopped a retry that would have been made.
#[tokio::test(start_paused = true)]
async fn a_failure_that_is_not_retryable_logs_that_and_an_end_without_a_code() {
    let (captured, _guard) = capture(Level::DEBUG);
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 10).unwrap());
    let dep = Dependency::with_seed("payrail", config, 7).unwrap();
    let context =
        Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(3600)));
    let _ = dep.execute(&CHECKOUT, context.id(7), |_| async { Err::<(), _>(Rejected) }).await;
    assert_eq!(
        captured.lines(),
        [
            "DEBUG relent: attempt dispatched dependency=\"payrail\" operation=7 attempt=1 timeout_us=3000000",
            "DEBUG relent: attempt failed dependency=\"payrail\" operation=7 attempt=1 verdict=\"not_retryable\" then=\"not_retryable\"",
            "INFO relent: operation ended dependency=\"payrail\" operation=7 dispatched=1 disposition=\"failed\" code=\"\"",
        ]
    );
}

const ONCE: RetryPolicy<HZ> = CHECKOUT.without_retries();

/// Each protection's decisions, at the level a dashboard needs them: the waits at DEBUG, a
/// circuit change and a cooldown at WARN, with the refusal they cause.
#[tokio::test(start_paused = true)]
async fn each_protection_logs_its_decisions_at_their_levels() {
    each_protection(Level::DEBUG).await;
}

#[tokio::test(start_paused = true)]
async fn at_info_each_protection_logs_its_retries_refusals_and_ends() {
    each_protection(Level::INFO).await;
}

#[tokio::test(start_paused = true)]
async fn at_warn_each_protection_logs_its_refusals_circuits_cooldowns_and_lowered_limits() {
    each_protection(Level::WARN).await;
}

async fn each_protection(max: Level) {
    let (captured, _guard) = capture(max);
    let read = |id| {
        Context::new(Duration::from_secs(60), ReplaySafety::replayable_read(Duration::from_secs(3600))).id(id)
    };
    let ok = |_| async { Ok::<_, Busy>(()) };
    let window = || DependencyConfig::new(Duration::from_secs(10));

    // Two calls at once through a limit of one a second: the second waits for its unit.
    let limit = RateLimit::new(1, Duration::from_secs(1)).max_wait(Duration::from_secs(2));
    let quotes = Dependency::with_seed("quotes", window().rate_limit(limit), 7).unwrap();
    let (a, b) = tokio::join!(quotes.execute(&ONCE, read(1), ok), quotes.execute(&ONCE, read(2), ok));
    assert!(a.is_ok() && b.is_ok(), "{a:?} {b:?}");

    // 600 ms of airtime twice, with 1 s allowed in any 10 s: the second waits for the first to
    // leave the window, at 10.6 s.
    let duty = DutyCycle::new(Duration::from_secs(1), Duration::from_secs(10));
    let modem = Dependency::with_seed("modem", window().duty_cycle(duty), 7).unwrap();
    let patient = RetryPolicy::single_attempt().max_delay(Duration::from_secs(20)).build().unwrap();
    for id in [3, 4] {
        modem.execute(&patient, read(id).airtime(Duration::from_millis(600)), ok).await.unwrap();
    }

    // A failure with a Retry-After opens a one-failure circuit and extends the cooldown; the next
    // call is refused.
    let breaker = BreakerConfig::consecutive_failures(1, Duration::from_secs(30));
    let payrail =
        Dependency::with_seed("payrail", window().breaker(breaker).cooldown(Duration::from_secs(60)), 7);
    let payrail = payrail.unwrap();
    let _ = payrail.execute(&ONCE, read(5), |_| async { Err::<(), _>(Busy) }).await;
    let _ = payrail.execute(&ONCE, read(6), ok).await;

    // A success that took the adaptive limit's 250 ms halves it from 4 slots to 2; two fast ones
    // raise it a slot, at DEBUG.
    let limit = AdaptiveLimit::new(Duration::from_millis(250));
    let ledger = Dependency::with_seed("ledger", window().bulkhead(4).adaptive_limit(limit), 7).unwrap();
    let slow = |_| async {
        tokio::time::sleep(Std::from_millis(300)).await;
        Ok::<_, Busy>(())
    };
    ledger.execute(&ONCE, read(7), slow).await.unwrap();
    for id in [8, 9] {
        ledger.execute(&ONCE, read(id), ok).await.unwrap();
    }

    assert_eq!(
        captured.lines(),
        seen_up_to(
            max,
            &[
                "DEBUG relent: attempt dispatched dependency=\"quotes\" operation=1 attempt=1 timeout_us=3000000",
                "DEBUG relent: attempt succeeded dependency=\"quotes\" operation=1 attempt=1",
                "DEBUG relent: operation succeeded dependency=\"quotes\" operation=1 dispatched=1",
                "DEBUG relent: waiting for a rate-limit unit dependency=\"quotes\" operation=2 attempt=1 until_us=1000000",
                "DEBUG relent: attempt dispatched dependency=\"quotes\" operation=2 attempt=1 timeout_us=3000000",
                "DEBUG relent: attempt succeeded dependency=\"quotes\" operation=2 attempt=1",
                "DEBUG relent: operation succeeded dependency=\"quotes\" operation=2 dispatched=1",
                "DEBUG relent: attempt dispatched dependency=\"modem\" operation=3 attempt=1 timeout_us=60000000",
                "DEBUG relent: attempt succeeded dependency=\"modem\" operation=3 attempt=1",
                "DEBUG relent: operation succeeded dependency=\"modem\" operation=3 dispatched=1",
                "DEBUG relent: waiting for airtime (duty cycle) dependency=\"modem\" operation=4 attempt=1 until_us=10600000",
                // What is left of the 60 s deadline after the 10.6 s wait.
                "DEBUG relent: attempt dispatched dependency=\"modem\" operation=4 attempt=1 timeout_us=49400000",
                "DEBUG relent: attempt succeeded dependency=\"modem\" operation=4 attempt=1",
                "DEBUG relent: operation succeeded dependency=\"modem\" operation=4 dispatched=1",
                "DEBUG relent: attempt dispatched dependency=\"payrail\" operation=5 attempt=1 timeout_us=3000000",
                "DEBUG relent: attempt failed dependency=\"payrail\" operation=5 attempt=1 verdict=\"retryable_after\" then=\"attempts_exhausted\"",
                "WARN relent: circuit changed dependency=\"payrail\" operation=5 state=\"open\"",
                // payrail's clock starts when it is made, at 10.6 s: the Retry-After of 1 s ends at 1 s.
                "WARN relent: cooldown extended dependency=\"payrail\" operation=5 until_us=1000000 for_us=1000000",
                "INFO relent: operation ended dependency=\"payrail\" operation=5 dispatched=1 disposition=\"failed\" code=\"attempts_exhausted\"",
                // The cooldown is checked before the circuit, and defers rather than rejects.
                "WARN relent: attempt refused dependency=\"payrail\" operation=6 attempt=1 code=\"cooldown_active\" retry_in_us=1000000",
                "INFO relent: operation ended dependency=\"payrail\" operation=6 dispatched=0 disposition=\"deferred\" code=\"cooldown_active\"",
                "DEBUG relent: attempt dispatched dependency=\"ledger\" operation=7 attempt=1 timeout_us=3000000",
                "DEBUG relent: attempt succeeded dependency=\"ledger\" operation=7 attempt=1",
                "WARN relent: bulkhead limit lowered dependency=\"ledger\" operation=7 from=4 to=2",
                "DEBUG relent: operation succeeded dependency=\"ledger\" operation=7 dispatched=1",
                "DEBUG relent: attempt dispatched dependency=\"ledger\" operation=8 attempt=1 timeout_us=3000000",
                "DEBUG relent: attempt succeeded dependency=\"ledger\" operation=8 attempt=1",
                "DEBUG relent: operation succeeded dependency=\"ledger\" operation=8 dispatched=1",
                "DEBUG relent: attempt dispatched dependency=\"ledger\" operation=9 attempt=1 timeout_us=3000000",
                "DEBUG relent: attempt succeeded dependency=\"ledger\" operation=9 attempt=1",
                "DEBUG relent: bulkhead limit raised dependency=\"ledger\" operation=9 from=2 to=3",
                "DEBUG relent: operation succeeded dependency=\"ledger\" operation=9 dispatched=1",
            ]
        )
    );
}

/// A writer that, at each line it is given, asks another thread to take `dependency`'s lock and
/// records whether it could: the lock must be free whenever relent logs.
#[derive(Clone)]
struct LockProbe {
    dependency: Dependency,
    lines: Captured,
    free: Arc<Mutex<Vec<bool>>>,
}

impl std::io::Write for LockProbe {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (tx, rx) = std::sync::mpsc::channel();
        let dependency = self.dependency.clone();
        std::thread::spawn(move || {
            dependency.inspect(|_, _, _| ());
            let _ = tx.send(());
        });
        // Free: at once. Held: until this write returns and the step releases it, so no answer.
        let free = rx.recv_timeout(Std::from_secs(5)).is_ok();
        self.free.lock().unwrap().push(free);
        self.lines.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A subscriber that writes to a file or a socket can take far longer than the core's work, and
/// in an outage every caller logs a refusal at WARN: events are logged after the step that made
/// them has released the dependency's lock. Covered: a dispatch, a success, a failure that opens
/// the circuit and extends the cooldown, a refusal, and an operation dropped with its attempt out.
#[tokio::test(start_paused = true)]
async fn no_event_is_logged_while_the_dependency_is_locked() {
    let breaker = BreakerConfig::consecutive_failures(1, Duration::from_secs(30));
    let config =
        DependencyConfig::new(Duration::from_secs(10)).breaker(breaker).cooldown(Duration::from_secs(60));
    let dependency = Dependency::with_seed("payrail", config, 7).unwrap();
    let probe =
        LockProbe { dependency: dependency.clone(), lines: Captured::default(), free: Default::default() };
    let _guard = install(Level::DEBUG, probe.clone());
    let read = |id| {
        Context::new(Duration::from_secs(60), ReplaySafety::replayable_read(Duration::from_secs(3600))).id(id)
    };

    dependency.execute(&ONCE, read(1), |_| async { Ok::<_, Busy>(()) }).await.unwrap();
    let never = dependency.execute(&ONCE, read(2), |_| std::future::pending::<Result<(), Busy>>());
    assert!(tokio::time::timeout(Std::from_secs(1), never).await.is_err());
    let _ = dependency.execute(&ONCE, read(3), |_| async { Err::<(), _>(Busy) }).await;
    let _ = dependency.execute(&ONCE, read(4), |_| async { Ok::<_, Busy>(()) }).await;

    assert_eq!(
        probe.lines.lines(),
        [
            "DEBUG relent: attempt dispatched dependency=\"payrail\" operation=1 attempt=1 timeout_us=3000000",
            "DEBUG relent: attempt succeeded dependency=\"payrail\" operation=1 attempt=1",
            "DEBUG relent: operation succeeded dependency=\"payrail\" operation=1 dispatched=1",
            "DEBUG relent: attempt dispatched dependency=\"payrail\" operation=2 attempt=1 timeout_us=3000000",
            "INFO relent: operation ended dependency=\"payrail\" operation=2 dispatched=1 disposition=\"failed\" code=\"cancelled\"",
            "DEBUG relent: attempt dispatched dependency=\"payrail\" operation=3 attempt=1 timeout_us=3000000",
            "DEBUG relent: attempt failed dependency=\"payrail\" operation=3 attempt=1 verdict=\"retryable_after\" then=\"attempts_exhausted\"",
            "WARN relent: circuit changed dependency=\"payrail\" operation=3 state=\"open\"",
            "WARN relent: cooldown extended dependency=\"payrail\" operation=3 until_us=2000000 for_us=1000000",
            "INFO relent: operation ended dependency=\"payrail\" operation=3 dispatched=1 disposition=\"failed\" code=\"attempts_exhausted\"",
            "WARN relent: attempt refused dependency=\"payrail\" operation=4 attempt=1 code=\"cooldown_active\" retry_in_us=1000000",
            "INFO relent: operation ended dependency=\"payrail\" operation=4 dispatched=0 disposition=\"deferred\" code=\"cooldown_active\"",
        ]
    );
    assert_eq!(*probe.free.lock().unwrap(), [true; 12], "false: that line was logged under the lock");
}

/// A writer that panics on the first line that contains `at`, and writes every other line.
#[derive(Clone, Default)]
struct PanicsOnce {
    lines: Captured,
    at: &'static str,
    panicked: Arc<std::sync::atomic::AtomicBool>,
}

impl std::io::Write for PanicsOnce {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = String::from_utf8_lossy(buf);
        if line.contains(self.at) && !self.panicked.swap(true, std::sync::atomic::Ordering::Relaxed) {
            panic!("the subscriber's writer failed");
        }
        self.lines.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A subscriber that panics while the operation's first step is logged (its dispatch) unwinds the
/// task that runs the operation. The attempt was admitted by then, and holds the bulkhead's one
/// slot: the operation gives it back as it is dropped, so the next operation is let through.
#[tokio::test(start_paused = true)]
async fn a_subscriber_that_panics_at_the_first_dispatch_loses_no_bulkhead_slot() {
    let dependency =
        Dependency::with_seed("payrail", DependencyConfig::new(Duration::from_secs(10)).bulkhead(1), 7)
            .unwrap();
    let writer = PanicsOnce { at: "attempt dispatched", ..PanicsOnce::default() };
    let _guard = install(Level::DEBUG, writer.clone());
    let read = |id| {
        Context::new(Duration::from_secs(60), ReplaySafety::replayable_read(Duration::from_secs(3600))).id(id)
    };

    let first = dependency.clone();
    let ran =
        tokio::spawn(async move { first.execute(&ONCE, read(1), |_| async { Ok::<_, Busy>(()) }).await });
    assert!(ran.await.unwrap_err().is_panic(), "the writer's panic reached the task");
    assert_eq!(dependency.inspect(|state, _, _| state.in_flight()), 0, "the slot was given back");
    dependency.execute(&ONCE, read(2), |_| async { Ok::<_, Busy>(()) }).await.unwrap();

    // tracing-subscriber's fmt layer keeps the line whose write panicked in its buffer, and writes
    // it with the next line: what may come before these is not relent-tokio's.
    let lines = writer.lines.lines();
    let ends = [
        "INFO relent: operation ended dependency=\"payrail\" operation=1 dispatched=1 disposition=\"failed\" code=\"cancelled\"",
        "DEBUG relent: attempt dispatched dependency=\"payrail\" operation=2 attempt=1 timeout_us=3000000",
        "DEBUG relent: attempt succeeded dependency=\"payrail\" operation=2 attempt=1",
        "DEBUG relent: operation succeeded dependency=\"payrail\" operation=2 dispatched=1",
    ];
    assert!(lines.ends_with(&ends.map(String::from)), "{lines:#?}");
}

/// A refusal logs when to try again if that is known (above: the cooldown's end), and nothing in
/// its place when it is not: a full bulkhead frees a slot when a call ends, not at an instant.
#[tokio::test(start_paused = true)]
async fn a_refusal_with_no_known_end_logs_no_wait() {
    let dependency =
        Dependency::with_seed("payrail", DependencyConfig::new(Duration::from_secs(10)).bulkhead(1), 7)
            .unwrap();
    let read = |id| {
        Context::new(Duration::from_secs(60), ReplaySafety::replayable_read(Duration::from_secs(3600))).id(id)
    };
    let (captured, _guard) = capture(Level::WARN);
    // The first call holds the one slot until the second has been refused.
    let gate = tokio::sync::Notify::new();
    let first = dependency.execute(&ONCE, read(1), |_| async {
        gate.notified().await;
        Ok::<_, Busy>(())
    });
    let second = async {
        tokio::task::yield_now().await;
        let refused = dependency.execute(&ONCE, read(2), |_| async { Ok::<_, Busy>(()) }).await;
        gate.notify_one();
        refused
    };
    let (first, second) = tokio::join!(first, second);
    first.unwrap();
    assert_eq!(second.unwrap_err().code(), "bulkhead_full");
    assert_eq!(
        captured.lines(),
        ["WARN relent: attempt refused dependency=\"payrail\" operation=2 attempt=1 code=\"bulkhead_full\""]
    );
}

/// Work stated sheddable is refused at INFO, with `criticality="sheddable"`: shedding it is what it
/// was stated for, and at WARN it would bury the refusals of critical work, which stay there.
#[tokio::test(start_paused = true)]
async fn a_refusal_of_sheddable_work_is_logged_at_info_and_of_critical_work_at_warn() {
    use relent_tokio::core::Criticality;
    let config = DependencyConfig::new(Duration::from_secs(10)).bulkhead(2).critical_reserve(50);
    let dependency = Dependency::with_seed("payrail", config, 7).unwrap();
    let read = |id, criticality| {
        Context::new(Duration::from_secs(60), ReplaySafety::replayable_read(Duration::from_secs(3600)))
            .id(id)
            .criticality(criticality)
    };
    let (captured, _guard) = capture(Level::INFO);
    // The first call holds the one slot sheddable work may use, the second the reserve's, until
    // the third and fourth have been refused.
    let gate = tokio::sync::Notify::new();
    let held = |id, criticality| {
        let gate = &gate;
        dependency.execute(&ONCE, read(id, criticality), move |_| async move {
            gate.notified().await;
            Ok::<_, Busy>(())
        })
    };
    let (first, second) = (held(1, Criticality::Sheddable), held(2, Criticality::Critical));
    let refused = async {
        tokio::task::yield_now().await;
        let ok = |_| async { Ok::<_, Busy>(()) };
        let shed = dependency.execute(&ONCE, read(3, Criticality::Sheddable), ok).await;
        let full = dependency.execute(&ONCE, read(4, Criticality::Critical), ok).await;
        gate.notify_waiters();
        (shed, full)
    };
    let (first, second, (shed, full)) = tokio::join!(first, second, refused);
    first.unwrap();
    second.unwrap();
    assert_eq!((shed.unwrap_err().code(), full.unwrap_err().code()), ("bulkhead_full", "bulkhead_full"));
    let refusals: Vec<_> = captured.lines().into_iter().filter(|l| l.contains("refused")).collect();
    assert_eq!(
        refusals,
        [
            "INFO relent: attempt refused dependency=\"payrail\" operation=3 attempt=1 code=\"bulkhead_full\" criticality=\"sheddable\"",
            "WARN relent: attempt refused dependency=\"payrail\" operation=4 attempt=1 code=\"bulkhead_full\"",
        ]
    );
}

/// A refusal of sheddable work with a known end (here the rate limit's next unit) keeps its wait
/// at INFO, as a critical one's does at WARN.
#[tokio::test(start_paused = true)]
async fn a_refusal_of_sheddable_work_with_a_known_end_logs_its_wait_at_info() {
    use relent_tokio::core::Criticality;
    let config =
        DependencyConfig::new(Duration::from_secs(10)).rate_limit(RateLimit::new(1, Duration::from_secs(1)));
    let dependency = Dependency::with_seed("payrail", config, 7).unwrap();
    let read = |id| {
        Context::new(Duration::from_secs(60), ReplaySafety::replayable_read(Duration::from_secs(3600)))
            .id(id)
            .criticality(Criticality::Sheddable)
    };
    let (captured, _guard) = capture(Level::INFO);
    let ok = |_| async { Ok::<_, Busy>(()) };
    dependency.execute(&ONCE, read(1), ok).await.unwrap();
    tokio::time::advance(Std::from_millis(250)).await;
    let refused = dependency.execute(&ONCE, read(2), ok).await.unwrap_err();
    assert_eq!((refused.code(), refused.retry_in()), ("rate_limited", Some(Std::from_millis(750))));
    let refusals: Vec<_> = captured.lines().into_iter().filter(|l| l.contains("refused")).collect();
    assert_eq!(
        refusals,
        [
            "INFO relent: attempt refused dependency=\"payrail\" operation=2 attempt=1 code=\"rate_limited\" criticality=\"sheddable\" retry_in_us=750000"
        ]
    );
}

/// An operation whose deadline is cut, by the attempt it runs in, by a request's own deadline or by
/// the scope it runs in, says so at DEBUG, with what it asked for: why it ended sooner than its
/// context said. One whose deadline is already the sooner logs nothing.
#[tokio::test(start_paused = true)]
async fn a_deadline_cut_by_the_enclosing_attempt_or_the_request_is_logged_with_what_was_asked() {
    use tower::{Layer, ServiceExt};
    let (captured, _guard) = capture(Level::DEBUG);
    let budget =
        || DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 10).unwrap());
    let checkout = Dependency::with_seed("checkout", budget(), 7).unwrap();
    let ledger = Dependency::with_seed("ledger", budget(), 7).unwrap();
    let read =
        |s| Context::new(Duration::from_secs(s), ReplaySafety::replayable_read(Duration::from_secs(3600)));
    // The ledger asks for 30 s inside the checkout's 3 s attempt, then for 2 s.
    for asked in [30, 2] {
        checkout
            .execute(&CHECKOUT, read(60), |_| {
                ledger.execute(&CHECKOUT, read(asked), |_| async { Ok::<_, Busy>(()) })
            })
            .await
            .unwrap();
    }
    // Requests through a layer whose own deadline is 10 s: one with 2 s left, alone; then inside
    // the checkout's 3 s attempt, with 2 s left, with 5 s, and with the attempt's own expiry (the
    // same limit twice: the attempt's is named).
    let ok = tower::service_fn(|_: http::Request<String>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    });
    let layer = relent_tokio::RetryLayer::new(ledger, CHECKOUT, Std::from_secs(10)).layer(ok);
    let request = |until| {
        let mut request = http::Request::get("/quote").body(String::new()).unwrap();
        request.extensions_mut().insert(until);
        request
    };
    let within = relent_tokio::RequestDeadline::within;
    layer.clone().oneshot(request(within(Std::from_secs(2)))).await.unwrap();
    for left in [Some(2), Some(5), None] {
        checkout
            .execute(&CHECKOUT, read(60), |attempt| {
                let until = left.map_or(relent_tokio::RequestDeadline::at(attempt.expires()), |s| {
                    within(Std::from_secs(s))
                });
                layer.clone().oneshot(request(until))
            })
            .await
            .unwrap();
    }
    // In a handler's scope of 4 s: a request (the layer's 10 s) and an operation asking for 2 s.
    let ledger = Dependency::with_seed("ledger", budget(), 7).unwrap();
    within(Std::from_secs(4))
        .scope(async {
            let plain = http::Request::get("/quote").body(String::new()).unwrap();
            layer.clone().oneshot(plain).await.unwrap();
            ledger.execute(&CHECKOUT, read(2), |_| async { Ok::<_, Busy>(()) }).await.unwrap();
        })
        .await;
    let cuts: Vec<String> = captured.lines().into_iter().filter(|l| l.contains("deadline cut")).collect();
    let cut = |deadline_s: u64, asked_s: u64, by: &str| {
        format!(
            "DEBUG relent: deadline cut dependency=\"ledger\" deadline_us={}000000 asked_us={}000000 by=\"{by}\"",
            deadline_s, asked_s
        )
    };
    assert_eq!(
        cuts,
        [
            cut(3, 30, "attempt"),
            cut(2, 10, "request_deadline"),
            cut(2, 10, "request_deadline"),
            cut(3, 10, "attempt"),
            cut(3, 10, "attempt"),
            cut(4, 10, "scope"),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_operator_s_isolation_and_close_are_logged_at_warn_beside_the_refusals_they_cause() {
    let (captured, _guard) = capture(Level::INFO);
    let config = DependencyConfig::new(Duration::from_secs(10))
        .budget(RetryBudget::ratio(10, 10).unwrap())
        .breaker(BreakerConfig::consecutive_failures(5, Duration::from_secs(30)));
    let dep = Dependency::with_seed("payrail", config, 7).unwrap();
    let context = || {
        Context::new(
            relent_tokio::ticks(Std::from_secs(10)),
            ReplaySafety::replayable_read(Duration::from_secs(3600)),
        )
    };
    assert!(dep.isolate_circuit().unwrap().is_some());
    assert_eq!(dep.isolate_circuit().unwrap(), None, "no change, no line");
    let refused = dep.execute(&CHECKOUT, context().id(7), |_| async { Ok::<_, Busy>(()) }).await;
    assert_eq!(refused.unwrap_err().code(), "circuit_isolated");
    assert!(dep.close_circuit().unwrap().is_some());
    assert_eq!(dep.close_circuit().unwrap(), None);
    dep.execute(&CHECKOUT, context().id(8), |_| async { Ok::<_, Busy>(()) }).await.unwrap();
    assert_eq!(
        captured.lines(),
        [
            "WARN relent: circuit changed dependency=\"payrail\" state=\"isolated\" by=\"operator\"",
            "WARN relent: attempt refused dependency=\"payrail\" operation=7 attempt=1 code=\"circuit_isolated\"",
            "INFO relent: operation ended dependency=\"payrail\" operation=7 dispatched=0 disposition=\"rejected\" code=\"circuit_isolated\"",
            "WARN relent: circuit changed dependency=\"payrail\" state=\"closed\" by=\"operator\"",
        ]
    );
}

/// A reconfiguration is logged at INFO with the configuration the dependency runs with from then
/// on; a refused one logs nothing (its error says what is wrong), and one to the configuration in
/// force (a file reloaded unchanged) only says so at DEBUG.
#[tokio::test(start_paused = true)]
async fn a_reconfiguration_is_logged_at_info_with_the_new_configuration() {
    let (captured, _guard) = capture(Level::DEBUG);
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 10).unwrap());
    let dep = Dependency::with_seed("payrail", config, 7).unwrap();
    let smaller = config.budget(RetryBudget::ratio(5, 2).unwrap());
    dep.reconfigure(smaller).unwrap();
    assert!(dep.reconfigure(smaller.bulkhead(0)).is_err());
    dep.reconfigure(smaller).unwrap();
    assert_eq!(
        captured.lines(),
        [
            format!("INFO relent: dependency reconfigured dependency=\"payrail\" config={smaller:?}"),
            "DEBUG relent: dependency configuration unchanged dependency=\"payrail\"".to_owned(),
        ]
    );
}

/// A call that waits in the bulkhead's queue logs its wait at DEBUG, once, with its end on the
/// dependency's clock, and goes when the slot frees.
#[tokio::test(start_paused = true)]
async fn a_call_waiting_in_the_bulkhead_s_queue_logs_its_wait() {
    let (captured, _guard) = capture(Level::DEBUG);
    let config = DependencyConfig::new(Duration::from_secs(10))
        .budget(RetryBudget::ratio(10, 10).unwrap())
        .bulkhead(1)
        .bulkhead_queue(1, Duration::from_millis(500));
    let dep = Dependency::with_seed("payrail", config, 7).unwrap();
    let context = |id| {
        Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(3600))).id(id)
    };
    let holder = dep.execute(&ONCE, context(1), |_| async {
        tokio::time::sleep(Std::from_millis(100)).await;
        Ok::<_, Busy>(())
    });
    let waiter = dep.execute(&ONCE, context(2), |_| async { Ok::<_, Busy>(()) });
    let (a, b) = tokio::join!(holder, waiter);
    assert!(a.is_ok() && b.is_ok());
    let lines = captured.lines();
    let waits: Vec<_> = lines.iter().filter(|l| l.contains("slot")).collect();
    assert_eq!(
        waits,
        [
            "DEBUG relent: waiting for a bulkhead slot dependency=\"payrail\" operation=2 attempt=1 until_us=500000"
        ]
    );
}

/// The same for a gRPC server: a `grpc-timeout` not in gRPC's format, refused by
/// `grpc::DeadlineLayer` with INVALID_ARGUMENT, is logged with its value at INFO.
#[cfg(feature = "tonic")]
#[tokio::test(start_paused = true)]
async fn a_grpc_timeout_refused_by_the_server_is_logged_with_its_value() {
    use tower::{Layer, ServiceExt};
    let (captured, _guard) = capture(Level::INFO);
    let routes = tower::service_fn(|_: http::Request<String>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    });
    let server = relent_tokio::grpc::DeadlineLayer::new(Std::from_secs(10)).layer(routes);
    for value in ["250m", "2.5S"] {
        let request = http::Request::post("/pricing.Pricing/Quote")
            .header("grpc-timeout", value)
            .body(String::new())
            .unwrap();
        let response = server.clone().oneshot(request).await.unwrap();
        assert_eq!(
            response.headers().get("grpc-status").map(|s| s.to_str().unwrap()),
            (value == "2.5S").then_some("3")
        );
    }
    assert_eq!(
        captured.lines(),
        ["INFO relent: timeout header refused header=\"grpc-timeout\" value=\"2.5S\""]
    );
}

/// A request whose timeout header is not a timeout is refused with a 400 by `DeadlineLayer`, and
/// the server's log says which header held what, at INFO.
#[tokio::test(start_paused = true)]
async fn a_timeout_header_refused_by_the_server_is_logged_with_its_value() {
    use tower::{Layer, ServiceExt};
    let (captured, _guard) = capture(Level::INFO);
    let header = http::HeaderName::from_static("x-request-timeout-ms");
    let handler = tower::service_fn(|_: http::Request<String>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    });
    let server = relent_tokio::DeadlineLayer::new(header.clone(), Std::from_secs(10)).layer(handler);
    for value in ["250", "2.5s"] {
        let request = http::Request::get("/quote").header(&header, value).body(String::new()).unwrap();
        server.clone().oneshot(request).await.unwrap();
    }
    assert_eq!(
        captured.lines(),
        ["INFO relent: timeout header refused header=\"x-request-timeout-ms\" value=\"2.5s\""]
    );
}

/// A hedge is an operation of its own, with the dependency's next id, and the line that starts it
/// names both; the operation it beat is logged as cancelled.
#[tokio::test(start_paused = true)]
async fn a_hedge_logs_its_start_with_both_ids_and_the_loser_s_cancellation() {
    let (captured, _guard) = capture(Level::DEBUG);
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 10).unwrap());
    let dep = Dependency::with_seed("payrail", config, 7).unwrap();
    let context =
        Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(3600)));
    let got = dep
        .execute_hedged(&CHECKOUT, context.id(7), Std::from_millis(200), |attempt| async move {
            let ms = if attempt.number() == 1 { 1_000 } else { 10 };
            tokio::time::sleep(Std::from_millis(ms)).await;
            Ok::<_, Rejected>(attempt.number())
        })
        .await;
    assert_eq!(got.unwrap(), 2);
    assert_eq!(
        captured.lines(),
        [
            "DEBUG relent: attempt dispatched dependency=\"payrail\" operation=7 attempt=1 timeout_us=3000000",
            "DEBUG relent: hedge started dependency=\"payrail\" operation=7 hedge=1",
            "DEBUG relent: attempt dispatched dependency=\"payrail\" operation=1 attempt=2 timeout_us=3000000",
            "DEBUG relent: attempt succeeded dependency=\"payrail\" operation=1 attempt=2",
            "DEBUG relent: operation succeeded dependency=\"payrail\" operation=1 dispatched=1",
            "INFO relent: operation ended dependency=\"payrail\" operation=7 dispatched=1 disposition=\"failed\" code=\"cancelled\"",
        ]
    );
}
