//! Hedged requests in relent-core: an operation and its hedge, driven by hand on a virtual clock
//! as an adapter drives them, with every event of both in one transcript (`op1` the operation,
//! `op2` its hedge).

use relent_core::{
    Action, BreakerConfig, CircuitState, Context, Counts, DependencyConfig, Disposition, Jitter, Operation,
    Problem, ReplaySafety, RetryBudget, RetryPolicy, StartError, Verdict,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, Dep, Failure, HZ, Recorder, T, valid};

type State = relent_core::Dependency<HZ, 10, 8>;

fn state(config: DependencyConfig<HZ>) -> State {
    Dep::new(config).state
}

const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(D::from_secs(1))
        .min_remaining(D::from_millis(50))
        .build(),
);

const REFUSED: Failure = Failure { name: "refused", verdict: Verdict::Retryable };
const NOT_FOUND: Failure = Failure { name: "404", verdict: Verdict::NotRetryable };

/// `capacity` tokens, one more a minute, each held 5 s until its attempt's outcome is reported.
fn tokens(capacity: u32) -> DependencyConfig<HZ> {
    let budget = valid(RetryBudget::token_bucket(capacity, 1, D::from_secs(60), D::from_secs(5)));
    DependencyConfig::new(D::from_secs(10)).budget(budget)
}

fn read(deadline_ms: u64, valid_ms: u64) -> Context<HZ> {
    Context::new(D::from_millis(deadline_ms), ReplaySafety::replayable_read(D::from_millis(valid_ms)))
}

fn at(ms: u64) -> T {
    T::from_ticks(ms)
}

/// The operation started at 0 with its first attempt out, its hedge started at `hedge_ms` (ids 1
/// and 2, as an adapter numbers them) and polled once: what it did then.
struct Race<'p> {
    op: Operation<'p, HZ, Failure>,
    hedge: Operation<'p, HZ, Failure>,
    first: relent_core::Attempt<HZ>,
    hedged: Action<HZ>,
}

fn race<'p>(
    policy: &'p RetryPolicy<HZ>,
    config: &'p DependencyConfig<HZ>,
    state: &mut State,
    context: Context<HZ>,
    hedge_ms: u64,
    rec: &mut Recorder,
) -> Race<'p> {
    let mut op = Operation::start(policy, config, context.id(1), at(0)).unwrap();
    let plan = op.hedge_plan().unwrap();
    let Action::Dispatch(first) = op.poll(at(0), state, rec) else { panic!("{:?}", rec.lines) };
    let mut hedge = Operation::start_hedge(policy, config, plan, at(hedge_ms));
    assert!(hedge.is_hedge() && !op.is_hedge());
    assert!(hedge.assign_id(2));
    let hedged = hedge.poll(at(hedge_ms), state, rec);
    Race { op, hedge, first, hedged }
}

#[test]
fn a_hedge_is_sent_as_attempt_2_paid_for_as_a_retry_and_its_success_ends_the_race() {
    let config = tokens(2);
    let mut dep = state(config);
    let mut rec = Recorder::tagged();
    let Race { mut op, mut hedge, first, hedged } =
        race(&POLICY, &config, &mut dep, read(5_000, 60_000), 200, &mut rec);
    let Action::Dispatch(second) = hedged else { panic!("{:?}", rec.lines) };
    assert!(second.is_retry());
    // The hedge answers at 250 ms; the first attempt, still out, is cancelled.
    hedge.on_success(second, at(250), &mut dep, &mut rec);
    assert_eq!(hedge.poll(at(250), &mut dep, &mut rec), Action::Done);
    op.abandon(at(250), &mut dep, &mut rec);
    drop(first);
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op2: 0.200 dispatch #2 timeout 1.000",
            "op2: 0.250 #2 succeeded",
            "op2: 0.250 done: succeeded after 1 dispatched",
            "op1: 0.250 done: failed, cancelled after 1 dispatched",
        ]
    );
    let won = hedge.take_completion().unwrap();
    assert_eq!(
        (won.disposition, won.summary.dispatched, won.summary.retries, won.summary.elapsed),
        (Disposition::Succeeded, 1, 1, D::from_millis(50)),
        "one attempt sent, and it was a repeat"
    );
    assert_eq!(op.take_completion().unwrap().problem, Some(Problem::Cancelled));
    // Two calls, one of them a retry; the cancelled attempt is no failure; one token spent.
    assert_eq!(dep.counts(at(250)), Counts { calls: 2, retries: 1, failures: 0, ..Counts::default() });
    assert_eq!(dep.retries_available(&config, at(250)), Some(1));
}

#[test]
fn a_hedge_the_budget_cannot_pay_for_is_not_sent_and_the_operation_goes_on() {
    // A ratio budget with no share and no floor: no retry, and so no hedge, is ever paid for.
    let config = DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(0, 0)));
    let mut dep = state(config);
    let mut rec = Recorder::tagged();
    let Race { mut op, mut hedge, first, hedged } =
        race(&POLICY, &config, &mut dep, read(5_000, 60_000), 200, &mut rec);
    assert_eq!(hedged, Action::Done);
    op.on_success(first, at(400), &mut dep, &mut rec);
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op2: 0.200 refused #2: retry_budget_exhausted",
            "op2: 0.200 done: failed, retry_budget_exhausted after 0 dispatched",
            "op1: 0.400 #1 succeeded",
            "op1: 0.400 done: succeeded after 1 dispatched",
        ]
    );
    let refused = hedge.take_completion().unwrap();
    assert_eq!((refused.summary.dispatched, refused.summary.retries), (0, 0));
    assert_eq!(dep.counts(at(400)), Counts { calls: 1, retries: 0, failures: 0, ..Counts::default() });
}

#[test]
fn a_hedge_after_the_replay_statement_expired_is_not_sent() {
    let config = tokens(2);
    let mut dep = state(config);
    let mut rec = Recorder::tagged();
    // Repeats are safe for 200 ms: a hedge at 199 ms goes, one at 200 ms does not.
    let Race { hedged, .. } = race(&POLICY, &config, &mut dep, read(5_000, 200), 199, &mut rec);
    assert!(matches!(hedged, Action::Dispatch(_)));
    let config = tokens(2);
    let mut dep = state(config);
    let mut rec = Recorder::tagged();
    let Race { hedged, .. } = race(&POLICY, &config, &mut dep, read(5_000, 200), 200, &mut rec);
    assert_eq!(hedged, Action::Done);
    assert_eq!(rec.lines[1..], ["op2: 0.200 done: failed, replay_statement_expired after 0 dispatched"]);
    assert_eq!(dep.retries_available(&config, at(200)), Some(2), "nothing charged");
}

#[test]
fn a_hedge_gets_what_is_left_of_the_deadline_and_needs_the_policy_s_minimum_remaining() {
    // 700 ms to the deadline: a hedge at 200 ms is cut to 500 ms.
    let config = tokens(2);
    let mut dep = state(config);
    let mut rec = Recorder::tagged();
    let Race { hedged, .. } = race(&POLICY, &config, &mut dep, read(700, 60_000), 200, &mut rec);
    let Action::Dispatch(second) = hedged else { panic!() };
    assert_eq!((second.timeout(), second.deadline()), (D::from_millis(500), at(700)));
    // With exactly the 50 ms minimum left it goes; with less it does not.
    let config = tokens(2);
    let mut dep = state(config);
    let Race { hedged, .. } =
        race(&POLICY, &config, &mut dep, read(700, 60_000), 650, &mut Recorder::tagged());
    let Action::Dispatch(second) = hedged else { panic!() };
    assert_eq!(second.timeout(), D::from_millis(50));
    let config = tokens(2);
    let mut dep = state(config);
    let mut rec = Recorder::tagged();
    let Race { hedged, .. } = race(&POLICY, &config, &mut dep, read(700, 60_000), 651, &mut rec);
    assert_eq!(hedged, Action::Done);
    assert_eq!(rec.lines[1..], ["op2: 0.651 done: failed, deadline_exceeded after 0 dispatched"]);
}

#[test]
fn a_failed_hedge_ends_and_the_operation_it_hedges_retries_on_its_own() {
    let config = tokens(3);
    let mut dep = state(config);
    let mut rec = Recorder::tagged();
    let Race { mut op, mut hedge, first, hedged } =
        race(&POLICY, &config, &mut dep, read(5_000, 60_000), 200, &mut rec);
    let Action::Dispatch(second) = hedged else { panic!() };
    hedge.on_failure(second, at(300), &mut dep, &mut Fixed::top(), REFUSED, &mut rec);
    assert_eq!(hedge.poll(at(300), &mut dep, &mut rec), Action::Done);
    op.on_failure(first, at(400), &mut dep, &mut Fixed::top(), REFUSED, &mut rec);
    let Action::Wait { until } = op.poll(at(400), &mut dep, &mut rec) else { panic!() };
    let Action::Dispatch(retry) = op.poll(until, &mut dep, &mut rec) else { panic!() };
    op.on_success(retry, at(520), &mut dep, &mut rec);
    assert_eq!(
        rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 1.000",
            "op2: 0.200 dispatch #2 timeout 1.000",
            "op2: 0.300 #2 failed (retryable): stop: attempts_exhausted",
            "op2: 0.300 done: failed, attempts_exhausted after 1 dispatched",
            "op1: 0.400 #1 failed (retryable): retry",
            "wait 0.100 (backoff 0.100) until 0.500 for #2",
            "op1: 0.500 dispatch #2 timeout 1.000",
            "op1: 0.520 #2 succeeded",
            "op1: 0.520 done: succeeded after 2 dispatched",
        ]
        .map(|l| if l.starts_with("wait") { format!("op1: {l}") } else { l.to_string() })
    );
    let ended = hedge.take_completion().unwrap();
    assert_eq!(ended.last_failure, Some(REFUSED), "its failure is kept");
    // Its one attempt was a repeat, under a policy of 3: it was the retrying layer, and an operation
    // that ran it inside an attempt does not retry it again (seed 000: exactly one layer retries).
    assert_eq!(ended.outer_verdict(None), Verdict::NotRetryable);
    // A non-retryable failure of a hedge ends it the same way, returned as it is.
    let config = tokens(3);
    let mut dep = state(config);
    let Race { mut hedge, hedged, .. } =
        race(&POLICY, &config, &mut dep, read(5_000, 60_000), 200, &mut Recorder::tagged());
    let Action::Dispatch(second) = hedged else { panic!() };
    hedge.on_failure(second, at(300), &mut dep, &mut Fixed::top(), NOT_FOUND, &mut ());
    let ended = hedge.take_completion().unwrap();
    assert_eq!(
        (ended.disposition, ended.problem, ended.last_failure),
        (Disposition::Failed, None, Some(NOT_FOUND))
    );
}

#[test]
fn a_hedge_passes_the_bulkhead_and_the_loser_s_cancellation_is_no_failure_to_the_breaker() {
    // One slot: the hedge finds it taken by the first attempt.
    let config = tokens(2).bulkhead(1);
    let mut dep = state(config);
    let mut rec = Recorder::tagged();
    let Race { mut op, hedged, first, .. } =
        race(&POLICY, &config, &mut dep, read(5_000, 60_000), 200, &mut rec);
    assert_eq!(hedged, Action::Done);
    assert_eq!(
        rec.lines[1..],
        [
            "op2: 0.200 refused #2: bulkhead_full",
            "op2: 0.200 done: rejected, bulkhead_full after 0 dispatched",
        ]
    );
    op.on_success(first, at(300), &mut dep, &mut ());
    assert_eq!(dep.in_flight(), 0);

    // A breaker that opens on one failure: the first attempt, cancelled when the hedge wins, does
    // not open it, and gives back its slot.
    let config = tokens(2).bulkhead(2).breaker(BreakerConfig::consecutive_failures(1, D::from_secs(5)));
    let mut dep = state(config);
    let Race { mut op, mut hedge, hedged, first } =
        race(&POLICY, &config, &mut dep, read(5_000, 60_000), 200, &mut Recorder::tagged());
    let Action::Dispatch(second) = hedged else { panic!() };
    assert_eq!(dep.in_flight(), 2);
    hedge.on_success(second, at(250), &mut dep, &mut ());
    op.abandon(at(250), &mut dep, &mut ());
    drop(first);
    assert_eq!((dep.in_flight(), dep.circuit(at(250))), (0, CircuitState::Closed));
}

#[test]
fn only_a_policy_that_allows_a_repeat_can_be_hedged() {
    let config = tokens(2);
    let once = POLICY.without_retries();
    // Sent once, an unsafe operation starts; its hedge is refused before anything is sent.
    let charge = Context::new(D::from_secs(5), ReplaySafety::Unsafe);
    let op = Operation::<HZ, Failure>::start(&once, &config, charge, at(0)).unwrap();
    let refused = op.hedge_plan().unwrap_err();
    assert_eq!(refused, StartError::HedgeWithoutRetries);
    assert_eq!(refused.as_str(), "hedge_without_retries");
    assert!(refused.to_string().contains("Give the policy at least 2 attempts"), "{refused}");
    // A keyed mutation may be retried but not hedged: the provider's key protects a repeat, not a
    // copy in flight.
    let keyed = Context::new(D::from_secs(5), ReplaySafety::provider_idempotent_mutation(D::from_secs(60)));
    let op = Operation::<HZ, Failure>::start(&POLICY, &config, keyed, at(0)).unwrap();
    assert_eq!(op.hedge_plan().unwrap_err(), StartError::HedgeOfMutation);
    assert!(!keyed.safety().may_hedge() && read(5_000, 60_000).safety().may_hedge());
    // With retries and a read's statement (and the budget `start` requires) a hedge may go: two
    // attempts are enough.
    let op = Operation::<HZ, Failure>::start(&POLICY, &config, read(5_000, 60_000), at(0)).unwrap();
    assert_eq!(op.hedge_plan().unwrap().deadline(), at(5_000));
    let twice = valid(
        RetryPolicy::exponential(2, D::from_millis(100), D::from_secs(2))
            .attempt_timeout(D::from_secs(1))
            .build(),
    );
    let op = Operation::<HZ, Failure>::start(&twice, &config, read(5_000, 60_000), at(0)).unwrap();
    assert!(op.hedge_plan().is_ok());
}

/// A plan taken before the clock restarted (`Dependency::rebase`, after a deep sleep) is rebased
/// with it: its deadline and its statement's end move with the clock, so a hedge started from it
/// on the new clock is cut and refused exactly as on the old one.
#[test]
fn a_rebased_plan_keeps_its_deadline_and_its_statement_on_the_new_clock() {
    let config = tokens(2);
    let op = Operation::<HZ, Failure>::start(&POLICY, &config, read(700, 400), at(10_000)).unwrap();
    let mut plan = op.hedge_plan().unwrap();
    plan.rebase(D::from_millis(9_000));
    assert_eq!(plan.deadline(), at(1_700));
    // On the new clock, 200 ms after the start: cut to the 500 ms left.
    let mut dep = state(config);
    let mut hedge = Operation::<HZ, Failure>::start_hedge(&POLICY, &config, plan, at(1_200));
    let Action::Dispatch(second) = hedge.poll(at(1_200), &mut dep, &mut ()) else { panic!() };
    assert_eq!(second.timeout(), D::from_millis(500));
    // 400 ms after the start the statement has ended.
    let mut late = Operation::<HZ, Failure>::start_hedge(&POLICY, &config, plan, at(1_400));
    assert_eq!(late.poll(at(1_400), &mut dep, &mut ()), Action::Done);
    assert_eq!(late.take_completion().unwrap().problem, Some(Problem::ReplayStatementExpired));
}
