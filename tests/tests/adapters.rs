//! One core, two adapters, the same decisions: a scripted day of a dependency (successes, a hang,
//! Retry-After waited and one too long, a cooldown, a circuit that opens and closes, a failure not
//! worth retrying, a deadline that cuts the last attempt) run through relent-tokio on tokio's paused
//! clock and through relent-embassy on its test clock, with full jitter from the same seeded
//! generator. Each attempt must be dispatched at the same microsecond with the same timeout, and
//! each operation must end with the same completion, field for field. A property test does the same
//! for any day.
//!
//! Both clocks count microseconds from the dependency's creation (relent-embassy's less the history
//! its core clock keeps before the boot: `on_embassy` says how), and both wake a sleeper on a
//! millisecond: tokio's timer wheel rounds each deadline up to its next millisecond, and the test
//! clock here is moved a millisecond at a time (`test_clock::advance`), as firmware's 1 kHz tick
//! would be. A jittered backoff therefore ends at the same instant on both, and the next decision
//! reads the same `now`.
//! What the adapters add around the core (the lock, the clock reads, the timers, the attempt's
//! timeout, the deferral's wait) must then add nothing different, which is the point.

use core::cell::RefCell;
use core::future::Future;
use core::pin::pin;
use core::task::{Context as TaskContext, Poll, Waker};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Wake;

use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use proptest::prelude::*;
use relent_core::{
    AttemptError, BreakerConfig, Classify, Completion, Context, Dependency, DependencyConfig, Disposition,
    Problem, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_embassy::SharedDependency;
use relent_embassy::test_clock;
use relent_tests::transcript::valid;

const HZ: u64 = relent_tokio::HZ;
const _: () = assert!(relent_embassy::HZ == HZ, "both adapters count microseconds");
type D = relent_core::Duration<HZ>;

/// What the far side answers, as the caller's error type says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// A refused connection: worth another attempt.
    Refused,
    /// "Busy, try again in N s".
    Busy(u32),
    /// A request the far side will never accept.
    Invalid,
}

impl Classify<HZ> for Fault {
    fn classify(&self) -> Verdict<HZ> {
        match self {
            Self::Refused => Verdict::Retryable,
            Self::Busy(s) => Verdict::retryable_after_secs(*s),
            Self::Invalid => Verdict::NotRetryable,
        }
    }
}

/// One attempt's behaviour: answer after some milliseconds, or never.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Ok(u64),
    Err(u64, Fault),
    Hang,
}

impl Answer {
    /// The attempt's future, sleeping on the adapter's own timer.
    async fn play<S: Future<Output = ()>>(self, sleep: impl FnOnce(u64) -> S) -> Result<(), Fault> {
        match self {
            Self::Ok(ms) => sleep(ms).await,
            Self::Err(ms, fault) => {
                sleep(ms).await;
                return Err(fault);
            }
            Self::Hang => core::future::pending().await,
        }
        Ok(())
    }
}

/// An operation: how long after the previous one ended it starts, its deadline, and its attempts'
/// answers in order.
#[derive(Debug, Clone)]
struct Step<'a> {
    after_ms: u64,
    deadline_ms: u64,
    answers: &'a [Answer],
}

/// 3 attempts, 100 ms doubling to 2 s with full jitter, 500 ms an attempt, and a Retry-After
/// spread by up to 50 ms: every wait draws from the generator.
const POLICY: RetryPolicy<HZ> = valid(
    RetryPolicy::exponential(3, D::from_millis(100), D::from_secs(2))
        .attempt_timeout(D::from_millis(500))
        .retry_after_spread(D::from_millis(50))
        .build(),
);

/// A ratio budget, a breaker that opens for 2 s after 3 failures in a row, and a cooldown.
const CONFIG: DependencyConfig<HZ> = DependencyConfig::new(D::from_secs(10))
    .budget(valid(RetryBudget::ratio(10, 5)))
    .breaker(BreakerConfig::consecutive_failures(3, D::from_secs(2)))
    .cooldown(D::from_secs(30));

/// The same with a tight budget (10 % and one retry a window), which refuses retries often.
const TIGHT: DependencyConfig<HZ> = CONFIG.budget(valid(RetryBudget::ratio(10, 1)));

const SEED: u64 = 2_026;

/// The test clock is one clock for this test binary: one test at a time uses it.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const DAY: &[Step<'static>] = &[
    // A success at once.
    Step { after_ms: 0, deadline_ms: 5_000, answers: &[Answer::Ok(20)] },
    // A refusal, a hang cut at 500 ms, then a success: two jittered backoffs.
    Step {
        after_ms: 100,
        deadline_ms: 5_000,
        answers: &[Answer::Err(10, Fault::Refused), Answer::Hang, Answer::Ok(30)],
    },
    // Busy for 1 s: waited, with up to 50 ms of spread, then a success.
    Step { after_ms: 0, deadline_ms: 5_000, answers: &[Answer::Err(5, Fault::Busy(1)), Answer::Ok(5)] },
    // Busy for 5 s, beyond the 2 s maximum delay: deferred, and the cooldown starts.
    Step { after_ms: 0, deadline_ms: 5_000, answers: &[Answer::Err(5, Fault::Busy(5))] },
    // At once: deferred by the cooldown until it ends, nothing sent.
    Step { after_ms: 0, deadline_ms: 5_000, answers: &[Answer::Ok(5)] },
    // At the cooldown's end: two refusals, which with the busy answer before them are three
    // failures in a row. The circuit opens, and refuses the third attempt.
    Step {
        after_ms: 5_000,
        deadline_ms: 5_000,
        answers: &[
            Answer::Err(10, Fault::Refused),
            Answer::Err(10, Fault::Refused),
            Answer::Err(10, Fault::Refused),
        ],
    },
    // At once: refused by the open circuit.
    Step { after_ms: 0, deadline_ms: 5_000, answers: &[Answer::Ok(5)] },
    // After 2 s: the probe succeeds and the circuit closes.
    Step { after_ms: 2_000, deadline_ms: 5_000, answers: &[Answer::Ok(10)] },
    // A failure not worth retrying is returned as it is.
    Step { after_ms: 0, deadline_ms: 5_000, answers: &[Answer::Err(10, Fault::Invalid)] },
    // A hang with 700 ms to live: the first attempt times out at 500 ms, and the backoff leaves no
    // room for a second.
    Step { after_ms: 0, deadline_ms: 700, answers: &[Answer::Hang, Answer::Hang] },
];

/// What one adapter did: each attempt (operation, number, dispatched at, timeout, in
/// microseconds since the dependency was made) and each operation's completion.
#[derive(Debug, Default, PartialEq)]
struct Transcript {
    attempts: Vec<(u64, u8, u64, u64)>,
    completions: Vec<Completion<HZ, AttemptError<HZ, Fault>>>,
}

impl Transcript {
    /// Records an attempt of operation `id` and gives the next of its answers.
    fn dispatched(
        &mut self,
        id: u64,
        number: u8,
        at: u64,
        timeout: u64,
        answers: &mut VecDeque<Answer>,
    ) -> Answer {
        self.attempts.push((id, number, at, timeout));
        answers.pop_front().expect("an answer for every attempt")
    }
}

fn context(id: u64, step: &Step<'_>) -> Context<HZ> {
    Context::new(D::from_millis(step.deadline_ms), ReplaySafety::replayable_read(D::from_secs(3_600))).id(id)
}

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap()
}

fn on_tokio(config: &'static DependencyConfig<HZ>, day: &[Step<'_>], seed: u64) -> Transcript {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    runtime.block_on(async {
        let t0 = tokio::time::Instant::now();
        let dependency = relent_tokio::Dependency::with_seed("link", *config, seed).unwrap();
        let transcript = RefCell::new(Transcript::default());
        for (id, step) in (1..).zip(day) {
            tokio::time::sleep(std::time::Duration::from_millis(step.after_ms)).await;
            let answers = RefCell::new(step.answers.iter().copied().collect::<VecDeque<_>>());
            let done = dependency
                .execute_detailed(&POLICY, context(id, step), |info| {
                    let (at, timeout) = (micros(t0.elapsed()), micros(info.timeout()));
                    let answer = transcript.borrow_mut().dispatched(
                        id,
                        info.number(),
                        at,
                        timeout,
                        &mut answers.borrow_mut(),
                    );
                    answer.play(|ms| tokio::time::sleep(std::time::Duration::from_millis(ms)))
                })
                .await
                .unwrap();
            transcript.borrow_mut().completions.push(done.completion);
        }
        transcript.into_inner()
    })
}

/// Sets its flag when woken.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Polls `fut` to completion. When it is pending and nothing woke it, the test clock moves 1 ms
/// forward, as a 1 kHz tick would; a future woken at once (embassy's `Timer` yields once even when
/// already due) is polled again at the same instant, as an executor would.
fn run_in_ms_ticks<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = TaskContext::from_waker(&waker);
    for _ in 0..100_000_000 {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        if !flag.0.swap(false, Ordering::SeqCst) {
            test_clock::advance(embassy_time::Duration::from_millis(1));
        }
    }
    panic!("the day did not end in 100 000 s of test time");
}

fn on_embassy(config: &'static DependencyConfig<HZ>, day: &[Step<'_>], seed: u64) -> Transcript {
    test_clock::reset();
    // relent-embassy's core clock runs ahead of embassy's by the history it keeps before the boot;
    // relent-tokio's starts at 0 when the dependency is made. The test clock starts where the core's
    // is a whole number of the window's buckets, so that both adapters' buckets begin at the same
    // instants, and the core's instants are read less that number.
    let width = config.window().as_ticks() / relent_tokio::BUCKETS as u64;
    let ahead = relent_embassy::now().as_ticks();
    let start = (width - ahead % width) % width;
    test_clock::advance(embassy_time::Duration::from_micros(start));
    let origin = relent_embassy::now().as_ticks();
    assert_eq!(origin % width, 0);
    let t0 = embassy_time::Instant::now();
    let state = Dependency::new(config, relent_embassy::now()).unwrap();
    let link: SharedDependency<'static, CriticalSectionRawMutex, { relent_tokio::BUCKETS }> =
        SharedDependency::new(config, state);
    let mut rng: rand_xoshiro::Xoshiro256PlusPlus = rand_core::SeedableRng::seed_from_u64(seed);
    let transcript = RefCell::new(Transcript::default());
    run_in_ms_ticks(async {
        for (id, step) in (1..).zip(day) {
            embassy_time::Timer::after_millis(step.after_ms).await;
            let answers = RefCell::new(step.answers.iter().copied().collect::<VecDeque<_>>());
            let done = link
                .execute(&POLICY, context(id, step), &mut rng, |info| {
                    let (at, timeout) =
                        ((embassy_time::Instant::now() - t0).as_micros(), info.timeout().as_micros());
                    let answer = transcript.borrow_mut().dispatched(
                        id,
                        info.number(),
                        at,
                        timeout,
                        &mut answers.borrow_mut(),
                    );
                    answer.play(embassy_time::Timer::after_millis)
                })
                .await
                .unwrap();
            let mut completion = done.completion;
            completion.not_before =
                completion.not_before.map(|t| relent_core::Instant::from_ticks(t.as_ticks() - origin));
            transcript.borrow_mut().completions.push(completion);
        }
    });
    transcript.into_inner()
}

/// The attempts, one by one, then the completions: the first difference is the one reported.
fn assert_alike(tokio: &Transcript, embassy: &Transcript) {
    for (i, (t, e)) in tokio.attempts.iter().zip(&embassy.attempts).enumerate() {
        assert_eq!(t, e, "attempt {i}: (operation, number, at, timeout), tokio then embassy");
    }
    assert_eq!(tokio.attempts.len(), embassy.attempts.len(), "attempts dispatched");
    for (i, (t, e)) in tokio.completions.iter().zip(&embassy.completions).enumerate() {
        assert_eq!(t, e, "operation {}'s completion, tokio then embassy", i + 1);
    }
    assert_eq!(tokio.completions.len(), embassy.completions.len(), "operations ended");
}

#[test]
fn relent_tokio_and_relent_embassy_make_the_same_attempts_at_the_same_instants_and_end_alike() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (tokio, embassy) = (on_tokio(&CONFIG, DAY, SEED), on_embassy(&CONFIG, DAY, SEED));
    assert_alike(&tokio, &embassy);

    // And the day went as it should, to the microsecond. A backoff wakes on the millisecond after
    // its jittered end, on both clocks; `waited` sums the jittered delays themselves.
    assert_eq!(
        tokio.attempts,
        [
            (1, 1, 0, 500_000),
            // 100 ms after the first ended: refused after 10 ms, then up to 100 ms of backoff...
            (2, 1, 120_000, 500_000),
            // ...and a hang, cut by its 500 ms timeout, then up to 200 ms...
            (2, 2, 173_000, 500_000),
            (2, 3, 796_000, 500_000),
            // Busy for 1 s at 831 ms: 1 s and up to 50 ms of spread.
            (3, 1, 826_000, 500_000),
            (3, 2, 1_868_000, 500_000),
            // Busy for 5 s: deferred. The cooldown defers the fifth operation, with nothing sent.
            (4, 1, 1_873_000, 500_000),
            // At the cooldown's end (1,878 ms + 5 s): two refusals, and with the busy answer before
            // them, three failures in a row. The circuit opens, and refuses the third attempt.
            (6, 1, 6_878_000, 500_000),
            (6, 2, 6_975_000, 500_000),
            // The seventh is refused by the open circuit; the eighth, 2 s after it opened, probes.
            (8, 1, 8_985_000, 500_000),
            (9, 1, 8_995_000, 500_000),
            // 700 ms to live: a 500 ms timeout, a backoff, and the second attempt's timeout cut to
            // the 108 ms left.
            (10, 1, 9_005_000, 500_000),
            (10, 2, 9_597_000, 108_000),
        ]
    );
    let ends: Vec<_> = tokio
        .completions
        .iter()
        .map(|c| {
            let s = c.summary;
            let not_before = c.not_before.map(|t| t.as_ticks());
            (c.disposition, c.problem, s.dispatched, s.waited.as_ticks(), s.elapsed.as_ticks(), not_before)
        })
        .collect();
    let (ok, failed, deferred, rejected) =
        (Disposition::Succeeded, Disposition::Failed, Disposition::Deferred, Disposition::Rejected);
    assert_eq!(
        ends,
        [
            (ok, None, 1, 0, 20_000, None),
            (ok, None, 3, 165_518, 706_000, None),
            (ok, None, 2, 1_036_098, 1_047_000, None),
            (deferred, Some(Problem::RetryAfterExceedsMaximumDelay), 1, 0, 5_000, Some(6_878_000)),
            (deferred, Some(Problem::CooldownActive), 0, 0, 0, Some(6_878_000)),
            (rejected, Some(Problem::CircuitOpen), 2, 86_412, 107_000, Some(8_985_000)),
            (rejected, Some(Problem::CircuitOpen), 0, 0, 0, Some(8_985_000)),
            (ok, None, 1, 0, 10_000, None),
            (failed, None, 1, 0, 10_000, None),
            (failed, Some(Problem::RetryDelayExceedsDeadline), 2, 91_521, 700_000, None),
        ]
    );
}

fn answer() -> impl Strategy<Value = Answer> {
    let fault = prop_oneof![Just(Fault::Refused), (0..4u32).prop_map(Fault::Busy), Just(Fault::Invalid)];
    prop_oneof![
        (0..600u64).prop_map(Answer::Ok),
        (0..600u64, fault).prop_map(|(ms, fault)| Answer::Err(ms, fault)),
        Just(Answer::Hang),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: relent_tests::cases(128), ..ProptestConfig::default() })]

    /// Any day: operations at any spacing, with any deadline, whose attempts answer at any time
    /// (before their 500 ms timeout, at it, after it, or never), retryably, with a wait, or not at
    /// all, any seed, and the budget of the day above or a tight one. The adapters make the same
    /// attempts at the same instants and end every operation alike.
    #[test]
    fn on_any_day_the_two_adapters_decide_alike(
        steps in proptest::collection::vec((0..3_000u64, 100..6_000u64, proptest::collection::vec(answer(), 3)), 1..10),
        seed in any::<u64>(),
        tight in any::<bool>(),
    ) {
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let day: Vec<Step<'_>> = steps
            .iter()
            .map(|(after_ms, deadline_ms, answers)| Step { after_ms: *after_ms, deadline_ms: *deadline_ms, answers })
            .collect();
        let config = if tight { &TIGHT } else { &CONFIG };
        assert_alike(&on_tokio(config, &day, seed), &on_embassy(config, &day, seed));
    }
}
