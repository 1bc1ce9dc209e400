//! `ReplaySafety::UntilArrived`: an operation that must not be repeated once it has reached the far
//! side (a POST without an idempotency key) is repeated after failures that never did, and ends at
//! the first failure that may have (seed 000, "Which Failures to Retry": "a connection refused or a
//! connect timeout means the request never arrived: the far side's state is unchanged and a retry
//! is safe"; "a read timeout on a POST that has no idempotency key is the unknown outcome").

use relent_core::{
    Context, DependencyConfig, Disposition, Jitter, Operation, Problem, ReplaySafety, RetryBudget,
    RetryPolicy, StartError, Verdict,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, Dep, Failure, HZ, Step, T, run, valid};

const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(4, D::from_millis(100), D::from_secs(2))
        .jitter(Jitter::None)
        .attempt_timeout(D::from_secs(1))
        .build(),
);

fn payrail() -> Dep {
    Dep::new(DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(10, 10))))
}

/// A POST without an idempotency key, stated safe to repeat until an attempt arrives.
fn keyless_post() -> Context<HZ> {
    Context::new(D::from_secs(10), ReplaySafety::UntilArrived)
}

const REFUSED: Failure = Failure { name: "connection refused", verdict: Verdict::NeverArrived };
const RESET: Failure = Failure { name: "connection reset", verdict: Verdict::Retryable };
const UNPROCESSABLE: Failure = Failure { name: "422", verdict: Verdict::NotRetryable };

#[test]
fn a_keyless_post_is_sent_again_after_refused_connections_and_succeeds() {
    let (lines, done) = run(
        &POLICY,
        keyless_post(),
        &mut payrail(),
        0,
        &[Step::Fail(2, REFUSED), Step::Fail(2, REFUSED), Step::Ok(40)],
        &mut Fixed::top(),
    );
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 1.000",
            "0.002 #1 failed (never arrived): retry",
            "wait 0.100 (backoff 0.100) until 0.102 for #2",
            "0.102 dispatch #2 timeout 1.000",
            "0.104 #2 failed (never arrived): retry",
            "wait 0.200 (backoff 0.200) until 0.304 for #3",
            "0.304 dispatch #3 timeout 1.000",
            "0.344 #3 succeeded",
            "0.344 done: succeeded after 3 dispatched",
        ]
    );
    assert_eq!(done.summary.retries, 2);
}

#[test]
fn a_keyless_post_whose_attempt_timed_out_after_a_refused_connection_is_not_sent_again() {
    // The second attempt connected and ran past its timeout: the charge may have been made.
    let (lines, done) = run(
        &POLICY,
        keyless_post(),
        &mut payrail(),
        0,
        &[Step::Fail(2, REFUSED), Step::Hang],
        &mut Fixed::top(),
    );
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 1.000",
            "0.002 #1 failed (never arrived): retry",
            "wait 0.100 (backoff 0.100) until 0.102 for #2",
            "0.102 dispatch #2 timeout 1.000",
            "1.102 #2 failed (retryable): stop: may_have_arrived",
            "1.102 done: failed, may_have_arrived after 2 dispatched",
        ]
    );
    assert_eq!((done.disposition, done.problem), (Disposition::Failed, Some(Problem::MayHaveArrived)));
    assert_eq!(done.last_failure.map(|f| f.name), Some("timeout"));
    // It repeated attempts that never arrived: the retrying layer, whose caller does not retry it.
    assert_eq!(done.outer_verdict(None), Verdict::NotRetryable);
}

#[test]
fn a_keyless_posts_first_failure_that_may_have_arrived_ends_it_with_its_failure_kept() {
    let (lines, done) =
        run(&POLICY, keyless_post(), &mut payrail(), 0, &[Step::Fail(30, RESET)], &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 1.000",
            "0.030 #1 failed (retryable): stop: may_have_arrived",
            "0.030 done: failed, may_have_arrived after 1 dispatched"
        ]
    );
    assert_eq!(done.last_failure, Some(RESET));
    // It repeated nothing: a caller whose own statement allows a repeat may make it.
    assert_eq!(done.outer_verdict(None), Verdict::Retryable);
}

#[test]
fn a_server_stated_wait_arrived_and_is_not_waited_for_by_a_keyless_post() {
    // A 503 with Retry-After is the far side's answer: the request reached it. The wait is kept
    // in the completion for the caller.
    let busy = Failure { name: "503", verdict: Verdict::RetryableAfter(D::from_secs(1)) };
    let (lines, done) =
        run(&POLICY, keyless_post(), &mut payrail(), 0, &[Step::Fail(5, busy)], &mut Fixed::top());
    assert_eq!(
        lines[1..],
        [
            "0.005 #1 failed (retryable after 1.000): stop: may_have_arrived",
            "0.005 done: failed, may_have_arrived after 1 dispatched"
        ]
    );
    assert_eq!(done.retry_after, Some(D::from_secs(1)));
}

#[test]
fn a_failure_not_worth_repeating_is_returned_as_it_is_whatever_the_statement() {
    let (lines, done) =
        run(&POLICY, keyless_post(), &mut payrail(), 0, &[Step::Fail(5, UNPROCESSABLE)], &mut Fixed::top());
    assert_eq!(
        lines[1..],
        ["0.005 #1 failed (not retryable): returned as it is", "0.005 done: failed after 1 dispatched"]
    );
    assert_eq!((done.problem, done.last_failure), (None, Some(UNPROCESSABLE)));
}

#[test]
fn never_arrived_attempts_still_spend_the_policys_attempts_and_the_budget() {
    // Refused every time: four attempts, then attempts_exhausted, as for any retryable failure.
    let (lines, done) =
        run(&POLICY, keyless_post(), &mut payrail(), 0, &[Step::Fail(2, REFUSED)], &mut Fixed::top());
    assert_eq!(lines.last().unwrap(), "0.708 done: failed, attempts_exhausted after 4 dispatched");
    assert_eq!(done.problem, Some(Problem::AttemptsExhausted));
    // A budget with no share and no floor refuses the first retry of a refused connection too.
    let mut broke = Dep::new(DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(0, 0))));
    let (lines, _) =
        run(&POLICY, keyless_post(), &mut broke, 0, &[Step::Fail(2, REFUSED)], &mut Fixed::top());
    assert_eq!(lines.last().unwrap(), "0.002 done: failed, retry_budget_exhausted after 1 dispatched");
}

#[test]
fn for_a_statement_of_time_never_arrived_is_retried_as_retryable_is() {
    let read = Context::new(D::from_secs(10), ReplaySafety::replayable_read(D::from_secs(60)));
    let (refused, _) =
        run(&POLICY, read, &mut payrail(), 0, &[Step::Fail(2, REFUSED), Step::Ok(5)], &mut Fixed::top());
    let (reset, _) =
        run(&POLICY, read, &mut payrail(), 0, &[Step::Fail(2, RESET), Step::Ok(5)], &mut Fixed::top());
    assert_eq!(refused.iter().map(|l| l.replace("never arrived", "retryable")).collect::<Vec<_>>(), reset);
    assert_eq!(refused.last().unwrap(), "0.107 done: succeeded after 2 dispatched");
}

#[test]
fn the_statement_still_needs_a_budget_and_is_never_hedged() {
    let config = DependencyConfig::new(D::from_secs(10));
    let now = T::from_ticks(0);
    assert_eq!(
        Operation::<HZ, Failure>::start(&POLICY, &config, keyless_post(), now).err(),
        Some(StartError::RetryWithoutBudget { max_attempts: 4 })
    );
    // Unsafe, without a statement, still gets no retry at all.
    let budgeted = DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(10, 10)));
    let unsafe_ = Context::new(D::from_secs(10), ReplaySafety::Unsafe);
    assert_eq!(
        Operation::<HZ, Failure>::start(&POLICY, &budgeted, unsafe_, now).err(),
        Some(StartError::UnsafeWithRetries { max_attempts: 4 })
    );
    let op = Operation::<HZ, Failure>::start(&POLICY, &budgeted, keyless_post(), now).unwrap();
    assert_eq!(op.hedge_plan().unwrap_err(), StartError::HedgeOfMutation);
    assert_eq!(ReplaySafety::<HZ>::UntilArrived.as_str(), "until_arrived");
    assert_eq!(ReplaySafety::<HZ>::UntilArrived.valid_for(), None);
}

#[test]
fn an_operation_older_than_any_statement_of_time_still_repeats_what_never_arrived() {
    // No time limit: with the deadline an hour away, refused connections for most of it are
    // still retried (a constant 10 min backoff), where a read stated safe for 30 min stops.
    let policy = valid(
        RetryPolicy::constant(8, D::from_secs(600))
            .jitter(Jitter::None)
            .attempt_timeout(D::from_secs(1))
            .build(),
    );
    let long = |safety| Context::new(D::from_secs(3_600), safety);
    let (lines, done) = run(
        &policy,
        long(ReplaySafety::UntilArrived),
        &mut payrail(),
        0,
        &[Step::Fail(0, REFUSED)],
        &mut Fixed::top(),
    );
    assert_eq!(done.summary.dispatched, 6, "{lines:#?}");
    assert_eq!(done.problem, Some(Problem::RetryDelayExceedsDeadline));
    let read = ReplaySafety::replayable_read(D::from_secs(1_800));
    let (_, done) = run(&policy, long(read), &mut payrail(), 0, &[Step::Fail(0, REFUSED)], &mut Fixed::top());
    assert_eq!((done.summary.dispatched, done.problem), (3, Some(Problem::ReplayStatementExpired)));
}
