//! Criticality on a virtual clock: sheddable work fills only its share of the bulkhead and of the
//! retry budget (both kinds), never waits in the bulkhead's queue, and hands the rest to critical
//! work; a hedge is as sheddable as what it hedges; without a reserve both classes see the same
//! limits; and, against a model over random traffic, who the bulkhead admits.

use proptest::prelude::*;
use relent_core::{
    Action, AdaptiveLimit, Attempt, ConfigError, Context, Criticality, DependencyConfig, Operation,
    ReplaySafety, RetryBudget, RetryPolicy,
};
use relent_tests::rng::Fixed;
use relent_tests::transcript::{D, Dep, Failure, HZ, Recorder, Step, T, TIMEOUT, run, valid};

const ONCE: RetryPolicy<HZ> = valid(RetryPolicy::single_attempt().build());
/// Two attempts, 100 ms apart.
const TWICE: RetryPolicy<HZ> =
    valid(RetryPolicy::constant(2, D::from_millis(100)).jitter(relent_core::Jitter::None).build());

fn context(id: u64, criticality: Criticality) -> Context<HZ> {
    Context::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_secs(60)))
        .id(id)
        .criticality(criticality)
}

fn t(ms: u64) -> T {
    T::from_ticks(ms)
}

use Criticality::{Critical, Sheddable};

/// Operations holding their attempts against one dependency.
struct Flight<'c> {
    config: &'c DependencyConfig<HZ>,
    held: Vec<(Operation<'c, HZ, Failure>, Attempt<HZ>)>,
    /// Those waiting in the bulkhead's queue.
    queued: Vec<Operation<'c, HZ, Failure>>,
    next_id: u64,
    rec: Recorder,
}

impl<'c> Flight<'c> {
    fn new(config: &'c DependencyConfig<HZ>) -> Self {
        Self { config, held: Vec::new(), queued: Vec::new(), next_id: 1, rec: Recorder::tagged() }
    }

    /// Starts one operation of one attempt at `ms`: "sent", "queued", or its refusal's code.
    fn send(&mut self, dep: &mut Dep, ms: u64, criticality: Criticality) -> &'static str {
        self.send_as(dep, ms, context(self.next_id, criticality))
    }

    /// [`Flight::send`] with a context of the caller's.
    fn send_as(&mut self, dep: &mut Dep, ms: u64, context: Context<HZ>) -> &'static str {
        let mut op = Operation::start(&ONCE, self.config, context, t(ms)).unwrap();
        self.next_id += 1;
        match op.poll(t(ms), &mut dep.state, &mut self.rec) {
            Action::Dispatch(attempt) => {
                self.held.push((op, attempt));
                "sent"
            }
            Action::Done => op.take_completion().unwrap().problem.unwrap().as_str(),
            Action::Wait { .. } => {
                assert!(op.waits_for_slot());
                self.queued.push(op);
                "queued"
            }
        }
    }

    /// Ends the oldest attempt in flight at `ms`, a success.
    fn end(&mut self, dep: &mut Dep, ms: u64) {
        let (mut op, attempt) = self.held.remove(0);
        op.on_success(attempt, t(ms), &mut dep.state, &mut self.rec);
    }
}

#[test]
fn sheddable_work_fills_only_its_share_of_the_bulkhead_and_critical_work_the_rest() {
    // Five slots, 40 % kept for critical work: sheddable work may fill three.
    let config = DependencyConfig::new(D::from_secs(10)).bulkhead(5).critical_reserve(40);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    let sent: Vec<_> = [Sheddable, Sheddable, Sheddable, Sheddable, Critical, Critical, Critical]
        .into_iter()
        .map(|c| flight.send(&mut dep, 0, c))
        .collect();
    assert_eq!(sent, ["sent", "sent", "sent", "bulkhead_full", "sent", "sent", "bulkhead_full"]);
    assert_eq!(dep.state.in_flight(), 5);
    // One slot frees: four taken, one more than sheddable work's share, so only critical work fits.
    flight.end(&mut dep, 10);
    assert_eq!(flight.send(&mut dep, 10, Sheddable), "bulkhead_full");
    assert_eq!(flight.send(&mut dep, 10, Critical), "sent");
    // Three end: two taken, and sheddable work fits again, once.
    for _ in 0..3 {
        flight.end(&mut dep, 20);
    }
    assert_eq!(flight.send(&mut dep, 20, Sheddable), "sent");
    assert_eq!(flight.send(&mut dep, 20, Sheddable), "bulkhead_full");
    // The refusal is the bulkhead's, as an event like any other.
    assert!(
        flight.rec.lines.contains(&"op11: 0.020 refused #1: bulkhead_full".to_string()),
        "{:#?}",
        flight.rec.lines
    );
}

#[test]
fn work_is_critical_unless_its_context_says_sheddable() {
    let plain = Context::<HZ>::new(D::from_secs(5), ReplaySafety::replayable_read(D::from_secs(60)));
    assert_eq!(plain.operation_criticality(), Critical);
    assert_eq!(plain.criticality(Sheddable).operation_criticality(), Sheddable);
    assert_eq!(context(1, Sheddable).criticality(Critical).operation_criticality(), Critical);
}

#[test]
fn without_a_reserve_sheddable_work_sees_the_whole_limit() {
    let config = DependencyConfig::new(D::from_secs(10)).bulkhead(3);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    let sent: Vec<_> = (0..4).map(|_| flight.send(&mut dep, 0, Sheddable)).collect();
    assert_eq!(sent, ["sent", "sent", "sent", "bulkhead_full"]);
}

#[test]
fn a_one_slot_bulkhead_keeps_no_reserve() {
    // A share rounds down to one slot at least: the configuration alone never shuts work out.
    let config = DependencyConfig::new(D::from_secs(10)).bulkhead(1).critical_reserve(90);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    assert_eq!(flight.send(&mut dep, 0, Sheddable), "sent");
    assert_eq!(flight.send(&mut dep, 0, Critical), "bulkhead_full");
}

#[test]
fn a_sheddable_attempt_never_waits_in_the_bulkheads_queue() {
    // Two slots, one for sheddable work, and a queue of four places for up to 1 s.
    let config = DependencyConfig::new(D::from_secs(10))
        .bulkhead(2)
        .bulkhead_queue(4, D::from_secs(1))
        .critical_reserve(50);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    let sent: Vec<_> = [Sheddable, Sheddable, Critical, Critical, Sheddable]
        .into_iter()
        .map(|c| flight.send(&mut dep, 0, c))
        .collect();
    // The second sheddable attempt finds its share full and is refused at once; the second critical
    // one waits; the last sheddable one is refused, as any that did not wait is while one does.
    assert_eq!(sent, ["sent", "bulkhead_full", "sent", "queued", "bulkhead_full"]);
    assert_eq!(dep.state.bulkhead_waiting(), 1);
    assert_eq!(
        flight.rec.lines,
        [
            "op1: 0.000 dispatch #1 timeout 5.000",
            "op2: 0.000 refused #1: bulkhead_full",
            "op2: 0.000 done: rejected, bulkhead_full after 0 dispatched",
            "op3: 0.000 dispatch #1 timeout 5.000",
            "op4: wait for a bulkhead slot until 1.000 for #1",
            "op5: 0.000 refused #1: bulkhead_full",
            "op5: 0.000 done: rejected, bulkhead_full after 0 dispatched",
        ]
    );
}

#[test]
fn sheddable_work_gets_its_share_of_an_adaptive_limit() {
    // Ten slots learnt down to five by a round of timeouts: sheddable work, 20 % held back, may
    // fill four of the five.
    let config = DependencyConfig::new(D::from_secs(10))
        .bulkhead(10)
        .adaptive_limit(AdaptiveLimit::new(D::from_millis(250)).min_slots(2))
        .critical_reserve(20);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    for _ in 0..8 {
        assert_eq!(flight.send(&mut dep, 0, Sheddable), "sent");
    }
    assert_eq!(flight.send(&mut dep, 0, Sheddable), "bulkhead_full");
    for (mut op, attempt) in flight.held.drain(..) {
        op.on_failure(attempt, t(300), &mut dep.state, &mut Fixed::top(), TIMEOUT, &mut Recorder::default());
    }
    assert_eq!(dep.state.bulkhead_limit(&config), Some(5));
    let sent: Vec<_> = [Sheddable; 5].into_iter().map(|c| flight.send(&mut dep, 400, c)).collect();
    assert_eq!(sent, ["sent", "sent", "sent", "sent", "bulkhead_full"]);
    assert_eq!(flight.send(&mut dep, 400, Critical), "sent");
    assert_eq!(flight.send(&mut dep, 400, Critical), "bulkhead_full");
}

#[test]
fn sheddable_work_takes_only_its_share_of_a_rate_limit_s_burst() {
    // One unit a second in bursts of five, 40 % kept for critical work: sheddable work may take
    // three of a full burst.
    let config = DependencyConfig::new(D::from_secs(10))
        .rate_limit(relent_core::RateLimit::new(1, D::from_secs(1)).burst(5))
        .critical_reserve(40);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    let sent: Vec<_> = [Sheddable, Sheddable, Sheddable, Sheddable, Critical, Critical, Critical]
        .into_iter()
        .map(|c| flight.send(&mut dep, 0, c))
        .collect();
    assert_eq!(sent, ["sent", "sent", "sent", "rate_limited", "sent", "sent", "rate_limited"]);
    // Each refusal says when its class's next unit is due: a second on, when one unit of the burst
    // is back for sheddable work after three taken, and for critical work after five.
    let refusals: Vec<_> = flight.rec.lines.iter().filter(|l| l.contains("refused")).collect();
    assert_eq!(
        refusals,
        [
            "op4: 0.000 refused #1: rate_limited (retry at 1.000)",
            "op7: 0.000 refused #1: rate_limited (retry at 1.000)"
        ]
    );
    // At 1 s one unit is back, and the reserve is two: sheddable work is refused until three are
    // back (at 3 s), and critical work takes it.
    let later: Vec<_> =
        [Sheddable, Sheddable, Critical].into_iter().map(|c| flight.send(&mut dep, 1_000, c)).collect();
    assert_eq!(later, ["rate_limited", "rate_limited", "sent"]);
    assert_eq!(flight.send(&mut dep, 3_000, Sheddable), "rate_limited", "two back at 3 s, after six taken");
    assert_eq!(flight.send(&mut dep, 4_000, Sheddable), "sent", "three back at 4 s");
}

#[test]
fn sheddable_frames_leave_the_duty_cycle_s_reserve_to_critical_ones() {
    // 1 s on air a minute, 30 % kept for critical frames: sheddable frames of 300 ms may use 700 ms.
    let config = DependencyConfig::new(D::from_secs(10))
        .duty_cycle(relent_core::DutyCycle::new(D::from_secs(1), D::from_secs(60)))
        .critical_reserve(30);
    let mut dep = Dep::new(config);
    let mut flight = Flight::new(&config);
    let frame = |id: u64, c| context(id, c).airtime(D::from_millis(300));
    let sent: Vec<_> = [(1, Sheddable), (2, Sheddable), (3, Sheddable), (4, Critical), (5, Critical)]
        .into_iter()
        .map(|(id, c)| flight.send_as(&mut dep, 0, frame(id, c)))
        .collect();
    assert_eq!(sent, ["sent", "sent", "duty_cycle_exceeded", "sent", "duty_cycle_exceeded"]);
    // A frame longer than the share still goes when the airtime it needs is free: a share is one
    // frame at least.
    let mut fresh = Dep::new(config);
    let long = context(9, Sheddable).airtime(D::from_millis(900));
    assert_eq!(Flight::new(&config).send_as(&mut fresh, 0, long), "sent");
}

/// Refusals by the client throttle (K = 1) of a stream of requests, three sheddable to one
/// critical: 40 that succeed, then 100 that fail, each run to its end, with and without a reserve.
/// (critical refused, sheddable refused).
fn throttled(reserve: Option<u8>) -> (u32, u32) {
    let config =
        DependencyConfig::new(D::from_secs(10)).client_throttle(relent_core::ClientThrottle::new(1_000));
    let config = reserve.map_or(config, |r| config.critical_reserve(r));
    let mut dep = Dep::new(config);
    let (mut critical, mut sheddable) = (0, 0);
    for i in 0..140u64 {
        let class = if i % 4 == 3 { Critical } else { Sheddable };
        let step = if i < 40 {
            Step::Ok(1)
        } else {
            Step::Fail(1, Failure { name: "503", verdict: relent_core::Verdict::NotRetryable })
        };
        let (_, done) = run(&ONCE, context(i, class), &mut dep, i * 10, &[step], &mut Fixed::top());
        if done.problem == Some(relent_core::Problem::ClientThrottled) {
            match class {
                Critical => critical += 1,
                Sheddable => sheddable += 1,
            }
        }
    }
    (critical, sheddable)
}

#[test]
fn with_a_reserve_the_throttle_refuses_sheddable_requests_first() {
    // The throttle refuses about as much either way (the share its formula says, of all requests:
    // 49 and 51, as each refusal moves the counts the formula reads); with a reserve, three in
    // four of the requests being sheddable, none of its refusals falls on a critical one.
    let (alike, first) = (throttled(None), throttled(Some(20)));
    assert_eq!(alike, (11, 38));
    assert_eq!(first, (0, 51));
}

/// A dependency with a ratio budget of 20 % and no floor, 50 % of it kept for critical work, after
/// `successes` single calls that succeeded.
fn ratio_after(successes: u64) -> Dep {
    let config =
        DependencyConfig::new(D::from_secs(10)).budget(valid(RetryBudget::ratio(20, 0))).critical_reserve(50);
    let mut dep = Dep::new(config);
    for i in 0..successes {
        run(&ONCE, context(100 + i, Critical), &mut dep, 0, &[Step::Ok(1)], &mut Fixed::top());
    }
    dep
}

#[test]
fn a_sheddable_retry_stays_within_its_share_of_the_ratio_budget() {
    // A retry is allowed while 100 × (retries + 1) <= 20 × (calls + 1) (the budget's rule), and a
    // sheddable one while it holds for half the budget: 100 × (retries + 1) <= 10 × (calls + 1).
    // After four calls and a failed first attempt (five calls, no retry) critical work may retry
    // (100 <= 120) and sheddable work may not (100 > 60); after nine and one (ten calls), both may.
    let script = [Step::Fail(10, TIMEOUT), Step::Ok(10)];
    let critical = run(&TWICE, context(1, Critical), &mut ratio_after(4), 1, &script, &mut Fixed::top());
    assert_eq!(
        critical.0,
        [
            "0.001 dispatch #1 timeout 5.000",
            "0.011 #1 failed (retryable): retry",
            "wait 0.100 (backoff 0.100) until 0.111 for #2",
            "0.111 dispatch #2 timeout 4.890",
            "0.121 #2 succeeded",
            "0.121 done: succeeded after 2 dispatched",
        ]
    );
    let sheddable = run(&TWICE, context(1, Sheddable), &mut ratio_after(4), 1, &script, &mut Fixed::top());
    assert_eq!(
        sheddable.0,
        [
            "0.001 dispatch #1 timeout 5.000",
            "0.011 #1 failed (retryable): stop: retry_budget_exhausted",
            "0.011 refused #2: retry_budget_exhausted",
            "0.011 done: failed, retry_budget_exhausted after 1 dispatched",
        ]
    );
    assert_eq!(sheddable.1.last_failure, Some(TIMEOUT), "the failure is kept");
    let later = run(&TWICE, context(1, Sheddable), &mut ratio_after(9), 1, &script, &mut Fixed::top());
    assert_eq!(later.1.problem, None, "{:#?}", later.0);
    assert_eq!(later.1.summary.dispatched, 2);
}

#[test]
fn a_sheddable_retry_leaves_the_token_buckets_reserve_to_critical_work() {
    // Ten tokens, 30 % kept for critical work: sheddable retries may take seven, critical ones the
    // other three. Each operation fails once and succeeds on its retry.
    let config = DependencyConfig::new(D::from_secs(10))
        .budget(valid(RetryBudget::token_bucket(10, 1, D::from_secs(3_600), D::from_secs(10))))
        .critical_reserve(30);
    let mut dep = Dep::new(config);
    let script = [Step::Fail(10, TIMEOUT), Step::Ok(10)];
    let retried = |dep: &mut Dep, id: u64, c: Criticality| {
        let (_, done) = run(&TWICE, context(id, c), dep, 0, &script, &mut Fixed::top());
        match done.problem {
            None => "retried",
            Some(p) => p.as_str(),
        }
    };
    let sheddable: Vec<_> = (1..=8).map(|id| retried(&mut dep, id, Sheddable)).collect();
    assert_eq!(sheddable[..7], ["retried"; 7]);
    assert_eq!(sheddable[7], "retry_budget_exhausted");
    let critical: Vec<_> = (9..=11).map(|id| retried(&mut dep, id, Critical)).collect();
    assert_eq!(critical, ["retried"; 3]);
    // The bucket empty, a failure ends the operation at once, with no backoff waited for a retry
    // that could not go: the decision after the failure reads the tokens as admission would.
    for class in [Critical, Sheddable] {
        let (lines, _) = run(&TWICE, context(12, class), &mut dep, 0, &script, &mut Fixed::top());
        assert_eq!(
            lines,
            [
                "0.000 dispatch #1 timeout 5.000",
                "0.010 #1 failed (retryable): stop: retry_budget_exhausted",
                "0.010 refused #2: retry_budget_exhausted",
                "0.010 done: failed, retry_budget_exhausted after 1 dispatched",
            ],
            "{class:?}"
        );
    }
}

#[test]
fn a_hedge_of_sheddable_work_is_sheddable() {
    // A hedge is paid for as a retry: with four calls counted, the budget lets a critical
    // operation's hedge go and refuses a sheddable one's.
    for (criticality, expected) in [(Critical, "hedge sent"), (Sheddable, "retry_budget_exhausted")] {
        let mut dep = ratio_after(4);
        let Dep { config, state } = &mut dep;
        let mut op: Operation<'_, HZ, Failure> =
            Operation::start(&TWICE, config, context(1, criticality), t(1)).unwrap();
        let plan = op.hedge_plan().unwrap();
        let Action::Dispatch(_first) = op.poll(t(1), state, &mut Recorder::default()) else {
            panic!("the first attempt goes")
        };
        let mut hedge: Operation<'_, HZ, Failure> = Operation::start_hedge(&TWICE, config, plan, t(50));
        let got = match hedge.poll(t(50), state, &mut Recorder::default()) {
            Action::Dispatch(_) => "hedge sent",
            Action::Done => hedge.take_completion().unwrap().problem.unwrap().as_str(),
            Action::Wait { .. } => panic!("nothing waits here"),
        };
        assert_eq!(got, expected, "{criticality:?}");
    }
}

#[test]
fn each_mistake_in_a_critical_reserve_is_refused_with_its_code() {
    let window = DependencyConfig::<HZ>::new(D::from_secs(10)).bulkhead(4);
    for (percent, expected) in [
        (0, Err(ConfigError::CriticalReserveOutOfRange)),
        (1, Ok(())),
        (90, Ok(())),
        (91, Err(ConfigError::CriticalReserveOutOfRange)),
    ] {
        assert_eq!(window.critical_reserve(percent).validate(), expected, "{percent}");
    }
    assert_eq!(ConfigError::CriticalReserveOutOfRange.as_str(), "critical_reserve_out_of_range");
    assert_eq!(window.critical_reserve(20).critical_reserve_percent(), Some(20));
    assert_eq!(window.critical_reserve_percent(), None);
}

proptest! {
    /// Over random traffic of both classes against a bulkhead with a reserve: each attempt is
    /// admitted exactly when the model says (critical work below the slots, sheddable work below
    /// its share), whatever came before.
    #[test]
    fn the_bulkhead_admits_each_class_as_the_model_says(
        slots in 1u16..12,
        reserve in 1u8..=90,
        traffic in prop::collection::vec((any::<bool>(), any::<bool>()), 1..80),
    ) {
        let config = DependencyConfig::new(D::from_secs(10)).bulkhead(slots).critical_reserve(reserve);
        let mut dep = Dep::new(config);
        let mut flight = Flight::new(&config);
        let share = (u32::from(slots) * (100 - u32::from(reserve)) / 100).max(1);
        for (i, (send, sheddable)) in traffic.into_iter().enumerate() {
            let ms = i as u64;
            let in_flight = flight.held.len() as u32;
            if send || in_flight == 0 {
                let (criticality, limit) =
                    if sheddable { (Sheddable, share) } else { (Critical, u32::from(slots)) };
                let expected = if in_flight < limit { "sent" } else { "bulkhead_full" };
                prop_assert_eq!(flight.send(&mut dep, ms, criticality), expected);
            } else {
                flight.end(&mut dep, ms);
            }
            prop_assert_eq!(u32::from(dep.state.in_flight()), flight.held.len() as u32);
        }
    }
}
