//! Scripts that change a dependency's configuration while its operations run: the input of the
//! fuzz target `reconfigure` (`fuzz_targets/reconfigure.rs`), and of relent-tests'
//! `tests/tests/scripts.rs`, which runs the same scripts on stable.
//!
//! Why a target of its own beside `operations`: that one's checks read one configuration for the
//! whole script, and a script here has two, decoded as `operations` decodes one (the ends of the
//! tick range, the edges of every validation, either one possibly invalid), and switches the
//! dependency between them while operations started under either run on, and hedges of them
//! started under the configuration in force. `tests/tests/reconfigure.rs`
//! checks the rules over two valid configurations of moderate numbers; this reaches the extremes.
//!
//! After every call the script checks what holds for any two configurations: the slots and queue
//! places match the operations holding them (whichever configuration each started under); a
//! configuration the state cannot run under is refused, changes nothing and says why; carrying the
//! state to the configuration it has changes nothing; the state carried to a new configuration is
//! within its limits (a cooldown no longer than its longest, a token bucket no fuller than its
//! capacity, a learnt limit no higher than its slots, a changed rate limit's debt no further ahead
//! than it allows); an operation woken for a slot free for it (`Operation::slot_free`) takes it or
//! leaves the queue; and once every operation is abandoned, nothing is held, and once every wait
//! either configuration names has passed, a first attempt goes (nothing is stuck).

use arbitrary::{Result, Unstructured};
use relent_core::{Action, Attempt, DependencyConfig, Instant, Operation, RetryPolicy, Verdict};

use crate::{Duration, SLOTS, STEPS, State, Words, accepted, after, config, context, policy, ticks, verdict};

/// What reconfiguring scripts reached, added up over the scripts run with one value: a test on
/// random inputs checks that they reach the paths worth checking.
#[derive(Debug, Default, Clone, Copy)]
pub struct Reconfigured {
    /// Changes to the other configuration, accepted.
    pub changes: u32,
    /// Changes refused, the configuration unfit for the state.
    pub refused: u32,
    /// Changes made while an operation started under the configuration left was still running.
    pub changes_under_running: u32,
    /// Attempts dispatched to an operation woken for a slot free for it.
    pub woken_dispatched: u32,
    /// Woken operations that found no slot under their own configuration where the one in force
    /// saw one for the operations started under it.
    pub woken_without_slot: u32,
    /// First attempts that went once every wait had passed, at a script's end.
    pub alive: u32,
    /// Hedges started (feature `hedge`).
    pub hedges: u32,
}

/// Runs the reconfiguring script that `data` encodes, adding what it reached to `reached`.
/// Running out of bytes ends it early, which is not a failure; a broken promise panics.
pub fn run_reconfigure(data: &[u8], reached: &mut Reconfigured) {
    let mut u = Unstructured::new(data);
    let _ended_early = match u.int_in_range(0..=2u8) {
        Ok(0) => run_at::<1_000>(&mut u, reached),
        Ok(1) => run_at::<32_768>(&mut u, reached),
        _ => run_at::<1_000_000>(&mut u, reached),
    };
}

/// An operation of the script: the configuration it started under, and its attempt out.
struct Running<'p, const HZ: u64> {
    on: usize,
    op: Operation<'p, HZ, Verdict<HZ>>,
    out: Option<Attempt<HZ>>,
}

struct World<'p, 'r, const HZ: u64> {
    policy: &'p RetryPolicy<HZ>,
    configs: &'p [DependencyConfig<HZ>; 2],
    /// The configuration in force.
    current: usize,
    state: State<HZ>,
    running: [Option<Running<'p, HZ>>; SLOTS],
    now: Instant<HZ>,
    rng: Words,
    reached: &'r mut Reconfigured,
}

fn run_at<const HZ: u64>(u: &mut Unstructured, reached: &mut Reconfigured) -> Result<()> {
    let (Some(policy), first, second) = (policy::<HZ>(u)?, config::<HZ>(u)?, config::<HZ>(u)?) else {
        return Ok(());
    };
    let configs = [first, second];
    let now = Instant::<HZ>::from_ticks(ticks(u)?);
    let Some(state) = accepted(State::<HZ>::new(&configs[0], now)) else {
        return Ok(());
    };
    let rng = Words::new(u)?;
    let mut world = World {
        policy: &policy,
        configs: &configs,
        current: 0,
        state,
        running: Default::default(),
        now,
        rng,
        reached,
    };
    let mut steps = 0;
    while !u.is_empty() && steps < STEPS {
        steps += 1;
        world.step(u)?;
        world.check_held();
    }
    world.end();
    Ok(())
}

impl<'p, const HZ: u64> World<'p, '_, HZ> {
    fn step(&mut self, u: &mut Unstructured) -> Result<()> {
        let k = *u.choose(&[0, 0, 0, 1, 2, 3])?;
        match u.int_in_range(0..=8u8)? {
            0 => self.start(u, k)?,
            1 => self.poll(k),
            2 => self.report(k, None),
            3 => {
                let failure = verdict(u, self.now)?;
                self.report(k, Some(failure));
            }
            4 => self.abandon(k),
            5 => self.now = after(self.now, Duration::<HZ>::from_ticks(ticks(u)?)),
            6 => self.change(),
            7 => self.same(),
            _ => self.wake(),
        }
        Ok(())
    }

    /// Starts operation `k` under the configuration in force (abandoning the one there, as a
    /// caller keeping the contract does), and polls it.
    fn start(&mut self, u: &mut Unstructured, k: usize) -> Result<()> {
        let context = context::<HZ>(u)?;
        self.abandon(k);
        let on = self.current;
        // For a context of id 2, a hedge of the first other operation running that may be hedged,
        // under the configuration in force, as relent-tokio starts one (no input byte of its own).
        #[cfg(feature = "hedge")]
        if context.operation_id().0 == 2 {
            let plan = self.running.iter().flatten().find_map(|r| r.op.hedge_plan().ok());
            if let Some(plan) = plan {
                let op = Operation::start_hedge(self.policy, &self.configs[on], plan, self.now);
                self.running[k] = Some(Running { on, op, out: None });
                self.reached.hedges += 1;
                self.poll(k);
                return Ok(());
            }
        }
        if let Some(op) = accepted(Operation::start(self.policy, &self.configs[on], context, self.now)) {
            self.running[k] = Some(Running { on, op, out: None });
            self.poll(k);
        }
        Ok(())
    }

    /// Polls operation `k` if it has no attempt out: files its attempt, or drops it once done.
    fn poll(&mut self, k: usize) {
        let Some(running) = self.running[k].as_mut().filter(|r| r.out.is_none()) else {
            return;
        };
        match running.op.poll(self.now, &mut self.state, &mut ()) {
            Action::Dispatch(attempt) => running.out = Some(attempt),
            Action::Wait { .. } => {}
            Action::Done => self.running[k] = None,
        }
    }

    /// Reports operation `k`'s attempt: a success, or a failure with `failure`'s verdict.
    fn report(&mut self, k: usize, failure: Option<Verdict<HZ>>) {
        let Some(running) = self.running[k].as_mut() else {
            return;
        };
        let Some(attempt) = running.out.take() else {
            return;
        };
        match failure {
            None => running.op.on_success(attempt, self.now, &mut self.state, &mut ()),
            Some(f) => running.op.on_failure(attempt, self.now, &mut self.state, &mut self.rng, f, &mut ()),
        }
        self.poll(k);
    }

    fn abandon(&mut self, k: usize) {
        if let Some(mut running) = self.running[k].take() {
            running.op.abandon(self.now, &mut self.state, &mut ());
        }
    }

    /// Changes to the other configuration: accepted, the state is within its limits; refused,
    /// nothing changed and the error says why.
    fn change(&mut self) {
        let configs = self.configs;
        let (from, to) = (&configs[self.current], &configs[1 - self.current]);
        let before = self.state.clone();
        match self.state.reconfigure(from, to, self.now) {
            Ok(()) => {
                self.reached.changes += 1;
                if self.running.iter().flatten().any(|r| r.on == self.current) {
                    self.reached.changes_under_running += 1;
                }
                self.check_within(from, to);
                self.current = 1 - self.current;
            }
            Err(e) => {
                self.reached.refused += 1;
                assert!(!e.message().is_empty(), "a refusal that says nothing");
                assert!(self.state == before, "a refused configuration changed the state");
            }
        }
    }

    /// Carries the state over to the configuration it has: nothing changes.
    fn same(&mut self) {
        let configs = self.configs;
        let config = &configs[self.current];
        let before = self.state.clone();
        assert!(
            self.state.reconfigure(config, config, self.now).is_ok(),
            "the configuration in force refused"
        );
        assert!(self.state == before, "a change to the same configuration changed the state");
    }

    /// What an adapter does when a slot is free for the operations waiting in the bulkhead's
    /// queue: polls each that `Operation::slot_free` says has one. None is left waiting with a
    /// slot free for it: an adapter would poll it again at once, in a loop.
    fn wake(&mut self) {
        let in_force = &self.configs[self.current];
        let free = self.state.slot_for_waiting(in_force);
        for k in 0..SLOTS {
            let Some(running) = self.running[k].as_ref() else { continue };
            if !running.op.waits_for_slot() {
                continue;
            }
            if !running.op.slot_free(&self.state) {
                if free {
                    self.reached.woken_without_slot += 1;
                }
                continue;
            }
            self.poll(k);
            if self.running[k].as_ref().is_some_and(|r| r.out.is_some()) {
                self.reached.woken_dispatched += 1;
            }
        }
        for running in self.running.iter().flatten() {
            assert!(!running.op.slot_free(&self.state), "an operation left waiting for a slot free for it");
        }
    }

    /// The slots and queue places against the operations: an attempt out holds a slot exactly when
    /// its operation's configuration has a bulkhead, and the queue holds those waiting in it.
    fn check_held(&self) {
        let slots = self
            .running
            .iter()
            .flatten()
            .filter(|r| r.out.is_some() && self.configs[r.on].bulkhead_slots().is_some())
            .count();
        let waiting = self.running.iter().flatten().filter(|r| r.op.waits_for_slot()).count();
        assert_eq!(usize::from(self.state.in_flight()), slots, "slots held against attempts out");
        assert_eq!(
            usize::from(self.state.bulkhead_waiting()),
            waiting,
            "queue places against waiting operations"
        );
    }

    /// What a state carried over from `from` to `to` may hold at most.
    fn check_within(&mut self, from: &DependencyConfig<HZ>, to: &DependencyConfig<HZ>) {
        let now = self.now;
        #[cfg(feature = "rate-limit")]
        if let (Some(limit), true) = (to.rate(), from.rate() != to.rate()) {
            // Its longest wait, its burst and one interval past `now` (the tick a part of an
            // interval rounds up to, one more).
            let interval = limit.period().as_ticks().div_ceil(relent_core::Ticks::from(limit.count().max(1)));
            let latest = now
                .as_ticks()
                .saturating_add(limit.max_wait_time().as_ticks())
                .saturating_add(
                    relent_core::Ticks::from(limit.burst_size().saturating_sub(1)).saturating_mul(interval),
                )
                .saturating_add(interval)
                .saturating_add(1);
            assert!(
                self.state.next_rate_unit(to, now).as_ticks() <= latest,
                "a rate debt beyond the new limit's"
            );
        }
        if let (Some(max), Some(until)) = (to.cooldown_max(), self.state.cooldown_until(now)) {
            assert!(
                until.as_ticks() <= now.as_ticks().saturating_add(max.as_ticks()),
                "a cooldown beyond the new longest"
            );
        }
        if let Some(relent_core::BudgetKind::TokenBucket { capacity, .. }) =
            to.retry_budget().map(|b| b.kind())
        {
            let available = self.state.retries_available(to, now);
            assert!(available.is_some_and(|n| n <= capacity), "tokens beyond the new capacity");
        }
        if let (Some(slots), Some(limit)) = (to.bulkhead_slots(), self.state.bulkhead_limit(to)) {
            assert!(limit <= slots, "a learnt limit above the bulkhead");
        }
        let _ = from;
    }

    /// Abandons every operation: nothing is left held. And nothing is left stuck: once every
    /// wait that either configuration could name has passed, a first attempt goes.
    fn end(&mut self) {
        for k in 0..SLOTS {
            self.abandon(k);
        }
        assert_eq!(self.state.in_flight(), 0, "bulkhead slots held after every operation ended");
        assert_eq!(self.state.bulkhead_waiting(), 0, "places in the queue held after every operation ended");
        self.alive();
    }

    /// Nothing is left stuck by a change of configuration (see [`crate::first_attempt_goes`]).
    fn alive(&mut self) {
        let config = &self.configs[self.current];
        if crate::first_attempt_goes(&mut self.state, config, self.configs, self.policy, self.now, self.now) {
            self.reached.alive = self.reached.alive.saturating_add(1);
        }
    }
}
