//! The scenarios of the two reference documents, as exact transcripts on a virtual clock.
//!
//! Seed 000 is the chapter on retries (the Stagedoor checkout calling Payrail); seed 003 is the
//! Reqtide documentation whose model Relent adopts. Every line below is what the core decided;
//! the harness only plays the script.

use relent_core::{
    ConfigError, Context, DependencyConfig, Disposition, Jitter, Problem, ReplaySafety, RetryBudget,
    RetryPolicy, StartError, Verdict,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, Dep, Failure, HZ, Step, T, TIMEOUT, run, valid};

/// Seed 000's checkout policy: 3 attempts, 100 ms doubling to 2 s, full jitter, 3 s per attempt.
const CHECKOUT: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2))
        .jitter(Jitter::Full)
        .attempt_timeout(D::from_secs(3))
        .build(),
);

/// Seed 000's budget: retries at most 10 % of calls over 10 s (floor 10 so a test's single
/// operation can retry).
fn payrail() -> Dep {
    Dep::new(DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(10, 10))))
}

fn read(deadline: D) -> Context<HZ> {
    Context::new(deadline, ReplaySafety::replayable_read(D::from_secs(3600)))
}

#[test]
fn seed_000_checkout_cuts_nothing_when_three_attempts_fit_in_ten_seconds() {
    // The checkout's 10 s budget started at 0; the order was placed by 0.1 s, so 9.9 s remain.
    // Payrail hangs on every attempt; full jitter drawn at the top of its window (Fixed::top())
    // waits the nominal 100 ms and 200 ms.
    let (lines, done) =
        run(&CHECKOUT, read(D::from_millis(9_900)), &mut payrail(), 100, &[Step::Hang], &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "0.100 dispatch #1 timeout 3.000",
            "3.100 #1 failed (retryable): retry",
            "wait 0.100 (backoff 0.100) until 3.200 for #2",
            // 6.8 s remain: the attempt still gets its full 3 s.
            "3.200 dispatch #2 timeout 3.000",
            "6.200 #2 failed (retryable): retry",
            "wait 0.200 (backoff 0.200) until 6.400 for #3",
            // 3.6 s remain: still 3 s. (Seed 000 counts 6.7 and 3.5 s here: its seat hold spends
            // another 100 ms between attempts, which this script does not.)
            "6.400 dispatch #3 timeout 3.000",
            "9.400 #3 failed (retryable): stop: attempts_exhausted",
            "9.400 done: failed, attempts_exhausted after 3 dispatched",
        ]
    );
    assert_eq!(done.disposition, Disposition::Failed);
    assert_eq!(done.problem, Some(Problem::AttemptsExhausted));
    assert_eq!(done.last_failure, Some(TIMEOUT));
    assert_eq!(done.summary.dispatched, 3);
    assert_eq!(done.summary.retries, 2);
    assert_eq!(done.summary.waited, D::from_millis(300));
    assert_eq!(done.summary.elapsed, D::from_millis(9_300));
}

#[test]
fn seed_000_checkout_cuts_the_third_attempt_to_what_remains_when_the_seat_hold_ran_long() {
    // "Had the seat hold taken longer ... the third attempt would have been made with less than a
    // second and given less than a second." The seat hold took 2.5 s: 7.5 s remain at the start.
    let (lines, done) =
        run(&CHECKOUT, read(D::from_millis(7_500)), &mut payrail(), 2_500, &[Step::Hang], &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "2.500 dispatch #1 timeout 3.000",
            "5.500 #1 failed (retryable): retry",
            "wait 0.100 (backoff 0.100) until 5.600 for #2",
            "5.600 dispatch #2 timeout 3.000",
            "8.600 #2 failed (retryable): retry",
            "wait 0.200 (backoff 0.200) until 8.800 for #3",
            "8.800 dispatch #3 timeout 1.200",
            "10.000 #3 failed (retryable): stop: attempts_exhausted",
            "10.000 done: failed, attempts_exhausted after 3 dispatched",
        ]
    );
    assert_eq!(done.summary.elapsed, D::from_millis(7_500));
}

#[test]
fn seed_000_checkout_makes_no_attempt_that_cannot_start_before_the_deadline() {
    // "had the cap on backoff been 2 seconds and the waits actually reached it ... if nothing
    // remained at all it would not have been made." Waits of 2 s: 0.1 + 3 + 2 + 3 + 2 > 10.
    let policy = valid(
        RetryPolicy::exponential(3, D::from_secs(2), D::from_secs(2))
            .attempt_timeout(D::from_secs(3))
            .build(),
    );
    let (lines, done) =
        run(&policy, read(D::from_millis(9_900)), &mut payrail(), 100, &[Step::Hang], &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "0.100 dispatch #1 timeout 3.000",
            "3.100 #1 failed (retryable): retry",
            "wait 2.000 (backoff 2.000) until 5.100 for #2",
            "5.100 dispatch #2 timeout 3.000",
            "8.100 #2 failed (retryable): stop: retry_delay_exceeds_deadline",
            "8.100 done: failed, retry_delay_exceeds_deadline after 2 dispatched",
        ]
    );
    assert_eq!(done.problem, Some(Problem::RetryDelayExceedsDeadline));
    assert_eq!(done.last_failure, Some(TIMEOUT));
}

#[test]
fn seed_000_a_read_timeout_on_a_keyless_post_is_sent_once() {
    // The keyless POST makes no replay statement, so it gets a single-attempt policy; its read
    // timeout is the caller's failure, returned as it is after one attempt.
    const ONCE: RetryPolicy<HZ> =
        valid(RetryPolicy::single_attempt().attempt_timeout(D::from_secs(3)).build());
    let context = Context::new(D::from_secs(10), ReplaySafety::Unsafe);
    let (lines, done) = run(&ONCE, context, &mut payrail(), 0, &[Step::Hang], &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 3.000",
            "3.000 #1 failed (retryable): stop: attempts_exhausted",
            "3.000 done: failed, attempts_exhausted after 1 dispatched",
        ]
    );
    assert_eq!(done.last_failure, Some(TIMEOUT));
}

#[test]
fn seed_000_a_500_is_returned_as_it_is_without_a_retry() {
    let error_500 = Failure { name: "500", verdict: Verdict::NotRetryable };
    let (lines, done) = run(
        &CHECKOUT,
        read(D::from_secs(10)),
        &mut payrail(),
        0,
        &[Step::Fail(40, error_500)],
        &mut Fixed::top(),
    );
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 3.000",
            "0.040 #1 failed (not retryable): returned as it is",
            "0.040 done: failed after 1 dispatched",
        ]
    );
    assert_eq!(done.problem, None);
    assert_eq!(done.last_failure, Some(error_500));
}

#[test]
fn seed_000_a_503_with_retry_after_sleeps_exactly_the_stated_wait() {
    // "When the far side sends Retry-After, the wrapper sleeps that many seconds instead of the
    // computed wait." 1 s is within the 2 s maximum delay.
    let busy = Failure { name: "503", verdict: Verdict::RetryableAfter(D::from_secs(1)) };
    let (lines, done) = run(
        &CHECKOUT,
        read(D::from_secs(10)),
        &mut payrail(),
        0,
        &[Step::Fail(30, busy), Step::Ok(50)],
        &mut Fixed::top(),
    );
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 3.000",
            "0.030 #1 failed (retryable after 1.000): retry",
            "wait 1.000 (retry-after 1.000) until 1.030 for #2",
            "1.030 dispatch #2 timeout 3.000",
            "1.080 #2 succeeded",
            "1.080 done: succeeded after 2 dispatched",
        ]
    );
    assert!(done.is_success());
    assert_eq!(done.last_failure, Some(busy), "the failure before the success is kept too");
}

/// Seed 003's base pipeline: a token budget of 10, refilled 10 per minute, reservations held 10 s
/// (so attempts may take at most 9 s: the policies below use 3 s).
fn reqtide_dependency() -> Dep {
    let budget = valid(RetryBudget::token_bucket(10, 10, D::from_secs(60), D::from_secs(10)));
    Dep::new(DependencyConfig::new(D::from_secs(10)).budget(budget))
}

fn get_order() -> Context<HZ> {
    Context::new(D::from_secs(30), ReplaySafety::replayable_read(D::from_secs(3600))).id(4)
}

#[test]
fn seed_003_example_5_a_retryable_timeout_with_two_attempts_ends_attempts_exhausted() {
    // retry(2, Constant, 5 ms, 5 ms, None); the callable always throws UpstreamTimeout.
    let policy = valid(
        RetryPolicy::constant(2, D::from_millis(5))
            .jitter(Jitter::None)
            .attempt_timeout(D::from_secs(3))
            .build(),
    );
    let upstream_timeout = Failure { name: "UpstreamTimeout", verdict: Verdict::Retryable };
    let mut dep = reqtide_dependency();
    let (lines, done) =
        run(&policy, get_order(), &mut dep, 0, &[Step::Fail(1, upstream_timeout)], &mut Fixed::top());
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 3.000",
            "0.001 #1 failed (retryable): retry",
            "wait 0.005 (backoff 0.005) until 0.006 for #2",
            "0.006 dispatch #2 timeout 3.000",
            "0.007 #2 failed (retryable): stop: attempts_exhausted",
            "0.007 done: failed, attempts_exhausted after 2 dispatched",
        ]
    );
    // disposition: failed / dispatched: 2 / problem code: attempts_exhausted /
    // last business failure: UpstreamTimeout
    assert_eq!(done.disposition.as_str(), "failed");
    assert_eq!(done.summary.dispatched, 2);
    assert_eq!(done.code(), "attempts_exhausted");
    assert_eq!(done.last_failure.map(|f| f.name), Some("UpstreamTimeout"));
    assert_eq!(done.operation.0, 4);
    // The one retry spent one token.
    assert_eq!(dep.state.retries_available(&dep.config, T::from_ticks(7)), Some(9));
}

#[test]
fn seed_003_example_4_a_retry_after_longer_than_the_maximum_delay_is_deferred_not_slept() {
    // retry(3, Constant, 5 ms, 100 ms, None); the server says "retry after 60 seconds".
    let policy = valid(
        RetryPolicy::constant(3, D::from_millis(5))
            .max_delay(D::from_millis(100))
            .jitter(Jitter::None)
            .attempt_timeout(D::from_secs(3))
            .build(),
    );
    let throttled = Failure { name: "Throttled", verdict: Verdict::RetryableAfter(D::from_secs(60)) };
    let (lines, done) = run(
        &policy,
        get_order(),
        &mut reqtide_dependency(),
        0,
        &[Step::Fail(2, throttled)],
        &mut Fixed::top(),
    );
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 3.000",
            "0.002 #1 failed (retryable after 60.000): stop: retry_after_exceeds_maximum_delay",
            "0.002 done: deferred, retry_after_exceeds_maximum_delay after 1 dispatched",
        ]
    );
    // deferred with retry_after_exceeds_maximum_delay; wait hint present: yes;
    // the throttling exception is kept as previous: yes
    assert_eq!(done.disposition, Disposition::Deferred);
    assert_eq!(done.problem, Some(Problem::RetryAfterExceedsMaximumDelay));
    assert_eq!(done.retry_after, Some(D::from_secs(60)));
    assert_eq!(done.not_before, Some(T::from_ticks(60_002)));
    assert_eq!(done.last_failure, Some(throttled));
}

#[test]
fn seed_003_a_retry_after_that_does_not_fit_the_deadline_is_deferred() {
    let policy = valid(
        RetryPolicy::constant(3, D::from_millis(5))
            .max_delay(D::from_secs(60))
            .attempt_timeout(D::from_secs(3))
            .build(),
    );
    let throttled = Failure { name: "Throttled", verdict: Verdict::RetryableAfter(D::from_secs(45)) };
    let (lines, done) = run(
        &policy,
        get_order(),
        &mut reqtide_dependency(),
        0,
        &[Step::Fail(2, throttled)],
        &mut Fixed::top(),
    );
    assert_eq!(
        lines,
        [
            "0.000 dispatch #1 timeout 3.000",
            "0.002 #1 failed (retryable after 45.000): stop: retry_after_exceeds_deadline",
            "0.002 done: deferred, retry_after_exceeds_deadline after 1 dispatched",
        ]
    );
    assert_eq!(done.not_before, Some(T::from_ticks(45_002)));
}

#[test]
fn seed_003_retry_without_a_budget_is_refused_before_anything_is_sent() {
    let no_budget = DependencyConfig::<HZ>::new(D::from_secs(10));
    let err =
        relent_core::Operation::<HZ, Failure>::start(&CHECKOUT, &no_budget, get_order(), T::from_ticks(0))
            .unwrap_err();
    assert_eq!(err, StartError::RetryWithoutBudget { max_attempts: 3 });
    assert_eq!(
        err.to_string(),
        "max_attempts = 3 requires a retry budget: retries must be paid for so a failing dependency is not hammered. \
         Give the dependency a RetryBudget (RetryBudget::ratio or RetryBudget::token_bucket), or use a policy of 1 attempt"
    );
}

#[test]
fn seed_003_a_retrying_policy_refuses_an_unsafe_operation_before_anything_is_sent() {
    let unsafe_op = Context::new(D::from_secs(30), ReplaySafety::Unsafe);
    let err = relent_core::Operation::<HZ, Failure>::start(
        &CHECKOUT,
        &payrail().config,
        unsafe_op,
        T::from_ticks(0),
    )
    .unwrap_err();
    assert_eq!(err, StartError::UnsafeWithRetries { max_attempts: 3 });
    assert_eq!(err.as_str(), "unsafe_with_retries");
    // Seed 003: "maxAttempts greater than one requires an explicit replay-safety contract; the
    // operation is Unsafe."
    assert!(err.to_string().starts_with(
        "max_attempts = 3 (greater than one) requires an explicit replay-safety statement; the operation is Unsafe."
    ));
}

#[test]
fn seed_003_a_hold_that_does_not_exceed_the_attempt_timeout_by_more_than_a_second_is_refused() {
    let policy = valid(RetryPolicy::constant(2, D::from_millis(5)).attempt_timeout(D::from_secs(9)).build());
    let err = relent_core::Operation::<HZ, Failure>::start(
        &policy,
        &reqtide_dependency().config,
        get_order(),
        T::from_ticks(0),
    )
    .unwrap_err();
    assert_eq!(err, StartError::Budget(ConfigError::BudgetHoldTooShort));
    // The same pair, checked in a const.
    const POLICY: RetryPolicy<HZ> =
        valid(RetryPolicy::constant(2, D::from_millis(5)).attempt_timeout(D::from_millis(8_999)).build());
    const CHECKED: Result<(), ConfigError> =
        POLICY.check_budget(&valid(RetryBudget::token_bucket(10, 10, D::from_secs(60), D::from_secs(10))));
    assert_eq!(CHECKED, Ok(()));
    // Without an attempt timeout the hold rule cannot hold for every attempt.
    let unbounded = valid(RetryPolicy::constant(2, D::from_millis(5)).build());
    let budget = valid(RetryBudget::token_bucket(10, 10, D::from_secs(60), D::from_secs(10)));
    assert_eq!(unbounded.check_budget(&budget), Err(ConfigError::BudgetNeedsAttemptTimeout));
}
