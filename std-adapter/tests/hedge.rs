//! `Dependency::execute_hedged` on tokio's paused clock: when the hedge goes, which answer wins,
//! what the loser gives back, and what the dependency counted. The hedge's rules are the core's
//! (tests/tests/hedge.rs); these check that the adapter races the two loops as documented.

use std::sync::Mutex;
use std::time::Duration as Std;

use relent_tokio::core::{
    BreakerConfig, CircuitState, Classify, Context, Counts, DependencyConfig, HedgeDelay, Jitter, Problem,
    ReplaySafety, RetryBudget, RetryPolicy, StartError, Verdict,
};
use relent_tokio::{AttemptInfo, Dependency, Duration, Error, HZ};
use tokio::time::{Instant, sleep};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuoteError {
    Busy,
    NotFound,
}

impl Classify<HZ> for QuoteError {
    fn classify(&self) -> Verdict<HZ> {
        match self {
            Self::Busy => Verdict::Retryable,
            Self::NotFound => Verdict::NotRetryable,
        }
    }
}

impl std::fmt::Display for QuoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for QuoteError {}

const fn valid<V: Copy>(r: Result<V, relent_tokio::core::ConfigError>) -> V {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{}", e.message()),
    }
}

/// 3 attempts, 100 ms then 200 ms of backoff, 1 s each.
const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(Duration::from_secs(1))
        .build(),
);

fn budgeted() -> DependencyConfig<HZ> {
    DependencyConfig::new(Duration::from_secs(10)).budget(valid(RetryBudget::ratio(50, 5)))
}

fn quotes(config: DependencyConfig<HZ>) -> Dependency {
    Dependency::with_seed("quotes", config, 7).unwrap()
}

fn read() -> Context<HZ> {
    Context::new(Duration::from_secs(5), ReplaySafety::replayable_read(Duration::from_secs(60)))
}

const HEDGE_AFTER: Std = Std::from_millis(200);

/// What each attempt does, by the order the calls are made in: take `ms`, then give `outcome`
/// (`None`: never answer). Each call is logged as (attempt number, ms since `t0` it was made).
struct Script {
    t0: Instant,
    steps: Vec<(u64, Option<Result<u32, QuoteError>>)>,
    calls: Mutex<Vec<(u8, u64)>>,
}

impl Script {
    fn new(steps: &[(u64, Option<Result<u32, QuoteError>>)]) -> Self {
        Self { t0: Instant::now(), steps: steps.to_vec(), calls: Mutex::new(Vec::new()) }
    }

    fn call(&self, attempt: AttemptInfo) -> impl Future<Output = Result<u32, QuoteError>> + use<> {
        let mut calls = self.calls.lock().unwrap();
        let (ms, outcome) = self.steps[calls.len()];
        calls.push((attempt.number(), self.ms()));
        async move {
            sleep(Std::from_millis(ms)).await;
            match outcome {
                Some(outcome) => outcome,
                None => std::future::pending().await,
            }
        }
    }

    fn ms(&self) -> u64 {
        u64::try_from(self.t0.elapsed().as_millis()).unwrap()
    }

    fn calls(&self) -> Vec<(u8, u64)> {
        self.calls.lock().unwrap().clone()
    }
}

/// Calls, retries and failures in the dependency's window, and attempts in flight.
fn counted(dep: &Dependency) -> (Counts, u16) {
    dep.inspect(|state, _, now| (state.counts(now), state.in_flight()))
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_call_is_hedged_at_the_delay_and_the_hedge_s_answer_wins() {
    let dep = quotes(budgeted());
    let script = Script::new(&[(800, Some(Ok(1))), (30, Some(Ok(2)))]);
    let got = dep.execute_hedged(&POLICY, read(), HEDGE_AFTER, |a| script.call(a)).await;
    assert_eq!((got.unwrap(), script.ms()), (2, 230));
    assert_eq!(script.calls(), [(1, 0), (2, 200)]);
    // Two calls, the hedge counted as a retry; the first, cancelled, is no failure and holds nothing.
    assert_eq!(counted(&dep), (Counts { calls: 2, retries: 1, failures: 0, ..Counts::default() }, 0));
}

#[tokio::test(start_paused = true)]
async fn a_call_that_answers_before_the_delay_is_never_hedged() {
    let dep = quotes(budgeted());
    let script = Script::new(&[(199, Some(Ok(1)))]);
    let got = dep.execute_hedged(&POLICY, read(), HEDGE_AFTER, |a| script.call(a)).await;
    assert_eq!((got.unwrap(), script.ms()), (1, 199));
    assert_eq!(script.calls(), [(1, 0)]);
    // Nor after it: nothing more is sent once the answer is in.
    sleep(Std::from_secs(2)).await;
    assert_eq!(counted(&dep), (Counts { calls: 1, retries: 0, failures: 0, ..Counts::default() }, 0));
}

#[tokio::test(start_paused = true)]
async fn the_first_call_s_answer_wins_over_a_hedge_still_out() {
    let dep = quotes(budgeted());
    let script = Script::new(&[(250, Some(Ok(1))), (500, Some(Ok(2)))]);
    let got = dep.execute_hedged(&POLICY, read(), HEDGE_AFTER, |a| script.call(a)).await;
    assert_eq!((got.unwrap(), script.ms()), (1, 250));
    assert_eq!(script.calls(), [(1, 0), (2, 200)]);
    assert_eq!(counted(&dep), (Counts { calls: 2, retries: 1, failures: 0, ..Counts::default() }, 0));
}

#[tokio::test(start_paused = true)]
async fn a_failed_hedge_ends_and_the_operation_goes_on_with_its_own_retries() {
    let dep = quotes(budgeted());
    // The first call fails at 400 ms and is retried 100 ms later; the hedge failed at 250 ms.
    let script = Script::new(&[
        (400, Some(Err(QuoteError::Busy))),
        (50, Some(Err(QuoteError::Busy))),
        (20, Some(Ok(3))),
    ]);
    let got = dep.execute_hedged(&POLICY, read(), HEDGE_AFTER, |a| script.call(a)).await;
    assert_eq!((got.unwrap(), script.ms()), (3, 520));
    assert_eq!(script.calls(), [(1, 0), (2, 200), (2, 500)]);
    assert_eq!(counted(&dep), (Counts { calls: 3, retries: 2, failures: 2, ..Counts::default() }, 0));
}

#[tokio::test(start_paused = true)]
async fn an_operation_that_fails_while_its_hedge_is_out_waits_for_the_hedge() {
    let dep = quotes(budgeted());
    // Not found at 300 ms, which is not retried; the hedge, out since 200 ms, answers at 350.
    let script = Script::new(&[(300, Some(Err(QuoteError::NotFound))), (150, Some(Ok(2)))]);
    let got = dep.execute_hedged(&POLICY, read(), HEDGE_AFTER, |a| script.call(a)).await;
    assert_eq!((got.unwrap(), script.ms()), (2, 350));

    // When neither succeeds, the error is the operation's own.
    let dep = quotes(budgeted());
    let script = Script::new(&[(300, Some(Err(QuoteError::NotFound))), (150, Some(Err(QuoteError::Busy)))]);
    let got = dep.execute_hedged(&POLICY, read(), HEDGE_AFTER, |a| script.call(a)).await;
    let Err(e) = got else { panic!("{got:?}") };
    assert_eq!(script.ms(), 350, "the hedge's answer was waited for");
    let completion = e.completion().unwrap();
    assert_eq!((e.code(), completion.summary.dispatched), ("", 1));
    assert_eq!(e.into_last_failure(), Some(QuoteError::NotFound));
}

#[tokio::test(start_paused = true)]
async fn an_operation_that_fails_before_the_delay_is_not_hedged() {
    let dep = quotes(budgeted());
    let script = Script::new(&[(100, Some(Err(QuoteError::NotFound)))]);
    let got = dep.execute_hedged(&POLICY, read(), HEDGE_AFTER, |a| script.call(a)).await;
    assert_eq!(got.unwrap_err().into_last_failure(), Some(QuoteError::NotFound));
    assert_eq!((script.ms(), script.calls()), (100, vec![(1, 0)]));
}

#[tokio::test(start_paused = true)]
async fn a_hedge_the_budget_refuses_is_not_sent() {
    // No share and no floor: no retry, and so no hedge, is ever paid for.
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(valid(RetryBudget::ratio(0, 0)));
    let dep = quotes(config);
    let script = Script::new(&[(800, Some(Ok(1)))]);
    let got = dep.execute_hedged_detailed(&POLICY, read(), HEDGE_AFTER, |a| script.call(a)).await.unwrap();
    assert_eq!((got.value, script.ms()), (Some(1), 800));
    assert_eq!(script.calls(), [(1, 0)]);
    assert_eq!((got.hedge, got.hedge_sent), (false, false), "refused, so not sent");
}

/// A hedge starts as an operation does: under the configuration in force when it starts. Here the
/// dependency loses its retry budget's share between the operation's start and the hedge's delay,
/// so the hedge, paid as a retry, is refused by the new budget, while the operation goes on.
#[tokio::test(start_paused = true)]
async fn a_hedge_due_after_a_reconfiguration_runs_under_the_new_configuration() {
    let dep = quotes(budgeted());
    let script = Script::new(&[(800, Some(Ok(1))), (30, Some(Ok(2)))]);
    let hedged = dep.execute_hedged_detailed(&POLICY, read(), HEDGE_AFTER, |a| script.call(a));
    let change = async {
        sleep(Std::from_millis(100)).await;
        dep.reconfigure(budgeted().budget(valid(RetryBudget::ratio(0, 0)))).unwrap();
    };
    let (got, ()) = tokio::join!(hedged, change);
    let got = got.unwrap();
    assert_eq!((got.value, script.ms(), got.hedge_sent), (Some(1), 800, false));
    assert_eq!(script.calls(), [(1, 0)]);

    // The same, reconfigured to the numbers it had: the hedge goes at 200 ms and wins.
    let dep = quotes(budgeted());
    let script = Script::new(&[(800, Some(Ok(1))), (30, Some(Ok(2)))]);
    let hedged = dep.execute_hedged_detailed(&POLICY, read(), HEDGE_AFTER, |a| script.call(a));
    let change = async {
        sleep(Std::from_millis(100)).await;
        dep.reconfigure(budgeted()).unwrap();
    };
    let (got, ()) = tokio::join!(hedged, change);
    let got = got.unwrap();
    assert_eq!((got.value, script.ms(), got.hedge, got.hedge_sent), (Some(2), 230, true, true));
    assert_eq!(script.calls(), [(1, 0), (2, 200)]);
}

#[tokio::test(start_paused = true)]
async fn a_hedge_s_attempt_gets_what_is_left_of_the_deadline() {
    let dep = quotes(budgeted());
    let timeouts = Mutex::new(Vec::new());
    let short =
        Context::new(Duration::from_millis(700), ReplaySafety::replayable_read(Duration::from_secs(60)));
    let got = dep
        .execute_hedged(&POLICY, short, HEDGE_AFTER, |a| {
            timeouts.lock().unwrap().push((a.number(), a.timeout()));
            std::future::pending::<Result<u32, QuoteError>>()
        })
        .await;
    // Both time out at the deadline; the error is the operation's, whose retry has no time left.
    assert_eq!(got.unwrap_err().code(), Problem::RetryDelayExceedsDeadline.as_str());
    assert_eq!(*timeouts.lock().unwrap(), [(1, Std::from_millis(700)), (2, Std::from_millis(500))]);
    assert_eq!(counted(&dep).1, 0, "nothing left in flight");
}

#[tokio::test(start_paused = true)]
async fn only_an_operation_that_may_be_repeated_is_hedged_and_nothing_is_sent_otherwise() {
    let dep = quotes(budgeted());
    let script = Script::new(&[(10, Some(Ok(1)))]);
    let once = POLICY.without_retries();
    let got = dep.execute_hedged(&once, read(), HEDGE_AFTER, |a| script.call(a)).await;
    assert!(matches!(got, Err(Error::Start(StartError::HedgeWithoutRetries))), "{got:?}");
    let charge = Context::new(Duration::from_secs(5), ReplaySafety::Unsafe);
    let got = dep.execute_hedged(&POLICY, charge, HEDGE_AFTER, |a| script.call(a)).await;
    assert!(matches!(got, Err(Error::Start(StartError::UnsafeWithRetries { max_attempts: 3 }))), "{got:?}");
    // A keyed mutation may be retried, not hedged: its key protects a repeat, not a copy in flight.
    let keyed = Context::new(
        Duration::from_secs(5),
        ReplaySafety::provider_idempotent_mutation(Duration::from_secs(60)),
    );
    let got = dep.execute_hedged(&POLICY, keyed, HEDGE_AFTER, |a| script.call(a)).await;
    assert!(matches!(got, Err(Error::Start(StartError::HedgeOfMutation))), "{got:?}");
    assert!(script.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn dropping_a_hedged_operation_cancels_both_and_leaves_nothing_held() {
    // One failure opens the circuit: the two cancellations must not count as failures.
    let config =
        budgeted().bulkhead(4).breaker(BreakerConfig::consecutive_failures(1, Duration::from_secs(5)));
    let dep = quotes(config);
    let script = Script::new(&[(5_000, None), (5_000, None)]);
    let hedged = dep.execute_hedged(&POLICY, read(), HEDGE_AFTER, |a| script.call(a));
    assert!(tokio::time::timeout(Std::from_millis(300), hedged).await.is_err());
    assert_eq!(script.calls(), [(1, 0), (2, 200)]);
    let (counts, in_flight) = counted(&dep);
    assert_eq!((counts.failures, in_flight), (0, 0));
    assert_eq!(dep.inspect(|state, _, now| state.circuit(now)), CircuitState::Closed);
}

/// `n` calls of 10 ms each, through `dep`, to teach its latency log.
async fn calls_of_10_ms(dep: &Dependency, n: usize) {
    for _ in 0..n {
        let ten = |_| async {
            sleep(Std::from_millis(10)).await;
            Ok::<_, QuoteError>(0)
        };
        dep.execute(&POLICY, read(), ten).await.unwrap();
    }
}

/// A hedge at the dependency's 95th percentile goes at the largest value of the bucket the
/// percentile falls in (10 ms falls in 8.192 to 10.239 ms), read as the operation starts.
#[tokio::test(start_paused = true)]
async fn a_hedge_at_the_learnt_95th_percentile_goes_there() {
    let dep = quotes(budgeted().latency_samples(100));
    calls_of_10_ms(&dep, 20).await;
    assert_eq!(
        dep.inspect(|state, config, _| state.latency_percentile(config, 95)),
        Some(Duration::from_micros(10_239))
    );
    let t0 = Instant::now();
    let script = Script::new(&[(800, None), (10, Some(Ok(2)))]);
    let got = dep.execute_hedged(&POLICY, read(), HedgeDelay::percentile(95), |a| script.call(a)).await;
    // tokio's timers fire on whole milliseconds: the hedge due at 10.239 ms goes at 11.
    assert_eq!((got.unwrap(), t0.elapsed()), (2, Std::from_millis(21)));
    assert_eq!(script.calls(), [(1, 0), (2, 11)]);
}

/// Before the log holds one attempt above the percentile (20 for the 95th), a learnt hedge is not
/// sent, or goes at the delay given until then; never sooner than its floor.
#[tokio::test(start_paused = true)]
async fn a_learnt_hedge_waits_for_the_log_and_never_goes_before_its_floor() {
    let dep = quotes(budgeted().latency_samples(100));
    let p95 = HedgeDelay::percentile(95);
    let script = Script::new(&[(300, Some(Ok(1)))]);
    assert_eq!(dep.execute_hedged(&POLICY, read(), p95, |a| script.call(a)).await.unwrap(), 1);
    assert_eq!(script.calls(), [(1, 0)]);
    let script = Script::new(&[(300, None), (10, Some(Ok(2)))]);
    let until = p95.until_learnt(Duration::from_millis(50));
    assert_eq!(dep.execute_hedged(&POLICY, read(), until, |a| script.call(a)).await.unwrap(), 2);
    assert_eq!(script.calls(), [(1, 0), (2, 50)]);
    // The loser's 60 ms counted (as a time it took at least): with 20 more of 10 ms, the 95th
    // percentile of 23 attempts is in its bucket, 57.344 to 65.535 ms.
    calls_of_10_ms(&dep, 20).await;
    let p95_now = || dep.inspect(|state, config, _| state.latency_percentile(config, 95));
    assert_eq!(p95_now(), Some(Duration::from_micros(65_535)));
    // With 20 more, 10.239 ms, and floored at 25.
    calls_of_10_ms(&dep, 20).await;
    assert_eq!(p95_now(), Some(Duration::from_micros(10_239)));
    let script = Script::new(&[(300, None), (10, Some(Ok(2)))]);
    let floored = p95.at_least(Duration::from_millis(25));
    assert_eq!(dep.execute_hedged(&POLICY, read(), floored, |a| script.call(a)).await.unwrap(), 2);
    assert_eq!(script.calls(), [(1, 0), (2, 25)]);
}

/// A learnt hedge on a dependency that keeps no latency log, or at a percentile that is not one,
/// is refused before anything is sent, with what to do about it.
#[tokio::test(start_paused = true)]
async fn a_learnt_hedge_without_a_log_or_at_no_percentile_is_refused_before_anything_is_sent() {
    let script = Script::new(&[(10, Some(Ok(1)))]);
    let got = quotes(budgeted())
        .execute_hedged(&POLICY, read(), HedgeDelay::percentile(95), |a| script.call(a))
        .await;
    let Err(Error::Start(e)) = got else { panic!("{got:?}") };
    assert_eq!(e, StartError::HedgeWithoutLatencyLog);
    assert!(e.to_string().contains("DependencyConfig::latency_samples"), "{e}");
    let logged = quotes(budgeted().latency_samples(100));
    let got = logged.execute_hedged(&POLICY, read(), HedgeDelay::percentile(100), |a| script.call(a)).await;
    assert!(
        matches!(got, Err(Error::Start(StartError::HedgePercentileOutOfRange { percent: 100 }))),
        "{got:?}"
    );
    assert!(script.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_hedge_delay_too_long_to_reach_never_hedges() {
    let dep = quotes(budgeted());
    let script = Script::new(&[(800, Some(Ok(1)))]);
    let got = dep.execute_hedged(&POLICY, read(), Std::MAX, |a| script.call(a)).await;
    assert_eq!((got.unwrap(), script.calls()), (1, vec![(1, 0)]));
}

#[tokio::test(start_paused = true)]
async fn the_detailed_answer_is_the_hedge_s_completion_when_the_hedge_wins_and_says_so() {
    let dep = quotes(budgeted());
    let script = Script::new(&[(800, Some(Ok(1))), (30, Some(Ok(2)))]);
    let won =
        dep.execute_hedged_detailed(&POLICY, read().id(40), HEDGE_AFTER, |a| script.call(a)).await.unwrap();
    let s = won.completion.summary;
    assert_eq!((won.value, won.hedge, won.hedge_sent, s.dispatched, s.retries), (Some(2), true, true, 1, 1));
    assert_ne!(won.completion.operation.0, 40, "the hedge's own id");
    assert_eq!(won.deadline, Std::from_millis(4_800), "what was left of the deadline when it started");

    let script = Script::new(&[(250, Some(Ok(1))), (500, Some(Ok(2)))]);
    let first =
        dep.execute_hedged_detailed(&POLICY, read().id(41), HEDGE_AFTER, |a| script.call(a)).await.unwrap();
    let s = first.completion.summary;
    assert_eq!(
        (first.value, first.hedge, first.hedge_sent, s.dispatched, first.completion.operation.0),
        (Some(1), false, true, 1, 41)
    );
    // Answered before the delay: no hedge sent.
    let script = Script::new(&[(150, Some(Ok(1)))]);
    let alone = dep.execute_hedged_detailed(&POLICY, read(), HEDGE_AFTER, |a| script.call(a)).await.unwrap();
    assert_eq!((alone.hedge, alone.hedge_sent), (false, false));

    let once = POLICY.without_retries();
    let refused = dep.execute_hedged_detailed(&once, read(), HEDGE_AFTER, |a| script.call(a)).await;
    assert_eq!(refused.unwrap_err(), StartError::HedgeWithoutRetries);
    // The dependency counts them for a dashboard: two hedges sent, the first of them answered first.
    let gauges = dep.gauges();
    assert_eq!((gauges.hedges_sent, gauges.hedges_won), (2, 1));
}

/// The race against a model of it, over any two latencies, two outcomes and a delay: the answer,
/// when it comes, and how many calls were made. The model (the module doc of `hedge`): a hedge goes
/// only if the operation has not answered by the delay (at the same instant, the operation's answer
/// is taken first); the first success wins, the operation's on a tie; if neither succeeds, the
/// operation's error comes when both have ended.
#[test]
fn the_race_gives_what_its_model_gives_for_any_latencies_outcomes_and_delay() {
    use proptest::prelude::*;
    let config = ProptestConfig { cases: 1_000, ..ProptestConfig::default() };
    // On a 50 ms grid, so that answers and the delay often fall on the same instant.
    let ms = |n: u64| (0..n).prop_map(|k| k * 50);
    proptest!(config, |(p in ms(18), p_ok in any::<bool>(), h in ms(18), h_ok in any::<bool>(), after in ms(12))| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        let (got, elapsed, calls) = runtime.block_on(async {
            let dep = quotes(budgeted());
            let outcome = |ok, value| Some(if ok { Ok(value) } else { Err(QuoteError::NotFound) });
            let script = Script::new(&[(p, outcome(p_ok, 1)), (h, outcome(h_ok, 2))]);
            let got = dep.execute_hedged(&POLICY, read(), Std::from_millis(after), |a| script.call(a)).await;
            (got.map_err(|e| e.into_last_failure()), script.ms(), script.calls().len())
        });
        let hedged = p > after;
        let expected = if !hedged {
            (if p_ok { Ok(1) } else { Err(Some(QuoteError::NotFound)) }, p, 1)
        } else {
            let hedge_at = after + h;
            match (p_ok, h_ok) {
                (true, _) if p <= hedge_at || !h_ok => (Ok(1), p, 2),
                (_, true) => (Ok(2), hedge_at, 2),
                _ => (Err(Some(QuoteError::NotFound)), p.max(hedge_at), 2),
            }
        };
        prop_assert_eq!((got, elapsed, calls), expected);
    });
}
