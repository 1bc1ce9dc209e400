//! One dependency's state shared by two threads under heavy interleaving, as an adapter shares it:
//! the lock is taken for one call into the core at a time, never across a wait or an attempt.
//!
//! Two shapes of lock, one driver: a `std::sync::Mutex` per dependency (the server shape; no
//! process-wide lock), and a `static` behind `critical_section::Mutex<RefCell<_>>` initialised by
//! the `const fn` constructor (the firmware shape, which needs no atomic compare-and-swap; here with
//! critical-section's std implementation). The invariants are the properties' own: slots never
//! exceed the bulkhead and never leak, half-open never admits more than its probes, the limiter never
//! exceeds its rate plus burst, the cooldown never moves earlier, every operation ends once.
//!
//! A third run gives three threads one bulkhead slot and a queue of two places: a thread's attempt
//! finds another's holding the slot, and waits for it. There the invariants are the queue's: no more wait
//! than its places, no place or slot leaks, and no operation that did not wait takes a slot ahead of
//! one that waits.

use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rand_core::RngCore;
use relent_core::{
    Action, Attempt, BreakerConfig, CircuitState, Context, Dependency, DependencyConfig, Event, Instant,
    Operation, RateLimit, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tests::rng::seeded;
use relent_tests::transcript::{D, Failure, HZ};

const CONFIG: DependencyConfig<HZ> = DependencyConfig::new(D::from_secs(10))
    .budget(match RetryBudget::ratio(20, 3) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    })
    .breaker(BreakerConfig::consecutive_failures(4, D::from_millis(300)).probes(2))
    .bulkhead(3)
    .rate_limit(RateLimit::new(40, D::from_secs(1)).burst(4).max_wait(D::from_millis(50)))
    .cooldown(D::from_millis(500));

/// One slot, and a queue of two places: with three threads, an attempt often finds the slot taken,
/// and two may wait for it.
const QUEUED: DependencyConfig<HZ> = DependencyConfig::new(D::from_secs(10))
    .budget(match RetryBudget::ratio(20, 3) {
        Ok(b) => b,
        Err(e) => panic!("{}", e.message()),
    })
    .bulkhead(1)
    .bulkhead_queue(2, D::from_millis(40));

const POLICY: RetryPolicy<HZ> = match RetryPolicy::exponential(3, D::from_millis(20), D::from_millis(200))
    .attempt_timeout(D::from_millis(100))
    .build()
{
    Ok(p) => p,
    Err(e) => panic!("{}", e.message()),
};

/// What sits behind the lock: the dependency and the log of what the core decided.
struct Shared {
    config: &'static DependencyConfig<HZ>,
    dependency: Dependency<HZ, 10>,
    /// The virtual clock; read and advanced under the lock, so `now` never goes backwards.
    clock: u64,
    events: Vec<Event<HZ>>,
    dispatches: Vec<u64>,
    max_in_flight: u16,
    max_waiting: u16,
}

impl Shared {
    const fn new(config: &'static DependencyConfig<HZ>) -> Self {
        let dependency = match Dependency::new(config, Instant::<HZ>::from_ticks(0)) {
            Ok(d) => d,
            Err(e) => panic!("{}", e.message()),
        };
        Self {
            config,
            dependency,
            clock: 0,
            events: Vec::new(),
            dispatches: Vec::new(),
            max_in_flight: 0,
            max_waiting: 0,
        }
    }

    /// Keeps the highest slots in flight and places taken seen after any call.
    fn note_peaks(&mut self) {
        self.max_in_flight = self.max_in_flight.max(self.dependency.in_flight());
        self.max_waiting = self.max_waiting.max(self.dependency.bulkhead_waiting());
    }
}

/// A lock around [`Shared`]: the adapter's choice.
trait Lock: Sync {
    fn with<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R;
}

impl Lock for Mutex<Shared> {
    fn with<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        f(&mut self.lock().unwrap())
    }
}

impl Lock for critical_section::Mutex<RefCell<Shared>> {
    fn with<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        critical_section::with(|cs| f(&mut self.borrow_ref_mut(cs)))
    }
}

const OPS_PER_THREAD: u64 = 1_500;

/// Runs operations one after another against the shared dependency, releasing the lock between
/// every step so the other thread interleaves. An operation waiting in the bulkhead's queue is
/// polled again at its thread's next step, as the core allows (an adapter polls it when a slot
/// frees); any other wait moves the shared clock to its end.
fn worker(lock: &impl Lock, thread: u64, yields: &AtomicU64) {
    let mut rng = seeded(thread);
    let context = Context::new(D::from_secs(2), ReplaySafety::replayable_read(D::from_secs(3600)));
    for n in 0..OPS_PER_THREAD {
        let id = thread * 1_000_000 + n;
        let mut op = lock.with(|s| {
            Operation::start(&POLICY, s.config, context.id(id), Instant::from_ticks(s.clock)).unwrap()
        });
        let mut out: Option<(Attempt<HZ>, u64)> = None;
        loop {
            std::thread::yield_now();
            yields.fetch_add(1, Ordering::Relaxed);
            let roll = rng.next_u32();
            let step = lock.with(|s| {
                s.clock += u64::from(roll % 7);
                let now = Instant::<HZ>::from_ticks(s.clock);
                let Shared { dependency, events, dispatches, .. } = s;
                let mut record = |e: &Event<HZ>| events.push(*e);
                if let Some((attempt, ends)) = out.take() {
                    if s.clock < ends {
                        out = Some((attempt, ends));
                        return true;
                    }
                    match roll % 10 {
                        0..=5 => op.on_success(attempt, now, dependency, &mut record),
                        6..=7 => {
                            let failure = Failure { name: "f", verdict: Verdict::Retryable };
                            op.on_failure(
                                attempt,
                                now,
                                dependency,
                                &mut seeded(u64::from(roll)),
                                failure,
                                &mut record,
                            )
                        }
                        8 => {
                            let wait = D::from_ticks(u64::from(roll % 300));
                            let failure = Failure { name: "busy", verdict: Verdict::RetryableAfter(wait) };
                            op.on_failure(
                                attempt,
                                now,
                                dependency,
                                &mut seeded(u64::from(roll)),
                                failure,
                                &mut record,
                            )
                        }
                        _ => op.abandon(now, dependency, &mut record),
                    }
                    s.note_peaks();
                    return true;
                }
                let go_on = match op.poll(now, dependency, &mut record) {
                    Action::Dispatch(attempt) => {
                        dispatches.push(s.clock);
                        let ends = s.clock + u64::from(roll % 60);
                        out = Some((attempt, ends));
                        true
                    }
                    // A slot may free at the other thread's next step: poll again then.
                    Action::Wait { .. } if op.waits_for_slot() => true,
                    // Jump the shared clock forward when this operation would wait: no sleeping.
                    Action::Wait { until } => {
                        s.clock = s.clock.max(until.as_ticks());
                        true
                    }
                    Action::Done => false,
                };
                s.note_peaks();
                go_on
            });
            if !step {
                break;
            }
        }
        // Some time passes before this thread's next operation.
        let pause = u64::from(rng.next_u32() % 40);
        lock.with(|s| s.clock += pause);
    }
}

fn check(shared: &mut Shared) {
    let events = &shared.events;
    let completed = events.iter().filter(|e| matches!(e, Event::Completed { .. })).count();
    assert_eq!(completed as u64, 2 * OPS_PER_THREAD, "every operation ends exactly once");
    assert!(shared.max_in_flight <= 3, "the bulkhead was exceeded: {}", shared.max_in_flight);
    assert_eq!(shared.dependency.in_flight(), 0, "a slot leaked");
    // Half-open admits at most its 2 probes per episode (none of these probes is cancelled: a
    // cancelled probe gives its place back, which the property test covers).
    let mut probes_out: Option<usize> = None;
    let mut cooldown = 0;
    for e in events {
        match *e {
            Event::CircuitChanged { state, .. } => {
                probes_out = (state == CircuitState::HalfOpen).then_some(0)
            }
            Event::AttemptDispatched { .. } => {
                if let Some(n) = probes_out.as_mut() {
                    *n += 1;
                }
            }
            Event::Completed { problem: Some(relent_core::Problem::Cancelled), .. } => {
                if let Some(n) = probes_out.as_mut() {
                    *n = n.saturating_sub(1);
                }
            }
            Event::CooldownExtended { until, .. } => {
                assert!(until.as_ticks() > cooldown, "the cooldown moved earlier");
                cooldown = until.as_ticks();
            }
            _ => {}
        }
        assert!(probes_out.unwrap_or(0) <= 2, "half-open admitted more than its probes");
    }
    // 40 per second with bursts of 4: in any span, at most 4 + span × 40 / 1000 dispatches.
    let d = &shared.dispatches;
    for i in 0..d.len() {
        for j in i..(i + 200).min(d.len()) {
            let n = (j - i + 1) as u64;
            assert!(
                n.saturating_sub(4) * 1_000 <= (d[j] - d[i]) * 40,
                "{n} dispatches in [{}, {}]",
                d[i],
                d[j]
            );
        }
    }
    let refusals = events.iter().filter(|e| matches!(e, Event::Refused { .. })).count();
    let half_opens = events
        .iter()
        .filter(|e| matches!(e, Event::CircuitChanged { state: CircuitState::HalfOpen, .. }))
        .count();
    assert!(
        d.len() > 1_000 && refusals > 100 && half_opens > 5,
        "{} dispatches, {refusals} refusals, {half_opens} half-opens",
        d.len()
    );
}

fn interleaves(yields: &AtomicU64) {
    assert!(yields.load(Ordering::Relaxed) > 2 * OPS_PER_THREAD, "the threads did not step");
}

#[test]
fn two_threads_share_one_dependency_behind_its_own_std_mutex() {
    let lock = Mutex::new(Shared::new(&CONFIG));
    let yields = AtomicU64::new(0);
    std::thread::scope(|s| {
        for thread in 1..=2 {
            let (lock, yields) = (&lock, &yields);
            s.spawn(move || worker(lock, thread, yields));
        }
    });
    interleaves(&yields);
    check(&mut lock.lock().unwrap());
}

/// Firmware shape: the state is a `static`, initialised at compile time.
static FIRMWARE_STYLE: critical_section::Mutex<RefCell<Shared>> =
    critical_section::Mutex::new(RefCell::new(Shared::new(&CONFIG)));

#[test]
fn two_threads_share_one_dependency_in_a_static_behind_a_critical_section() {
    let yields = AtomicU64::new(0);
    std::thread::scope(|s| {
        for thread in 3..=4 {
            let yields = &yields;
            s.spawn(move || worker(&FIRMWARE_STYLE, thread, yields));
        }
    });
    interleaves(&yields);
    critical_section::with(|cs| check(&mut FIRMWARE_STYLE.borrow_ref_mut(cs)));
}

/// The queue's invariants over one run of [`QUEUED`]: its places never exceeded, nothing held at the
/// end, and the slot never taken by an operation that did not wait while another waited.
fn check_queue(shared: &mut Shared, threads: u64) {
    let events = &shared.events;
    let completed = events.iter().filter(|e| matches!(e, Event::Completed { .. })).count();
    assert_eq!(completed as u64, threads * OPS_PER_THREAD, "every operation ends exactly once");
    assert_eq!(shared.max_in_flight, 1, "the bulkhead was exceeded, or never used");
    assert_eq!(shared.max_waiting, 2, "the queue held more than its places, or never filled");
    assert_eq!(shared.dependency.in_flight(), 0, "a slot leaked");
    assert_eq!(shared.dependency.bulkhead_waiting(), 0, "a place in the queue leaked");
    // In the order the core made them (the log is kept under the lock): which operations wait.
    let mut waiting: Vec<u64> = Vec::new();
    let (mut waits, mut from_queue, mut refused_in_queue) = (0, 0, 0);
    for e in events {
        match *e {
            Event::WaitingForSlot { operation, .. } => {
                assert!(!waiting.contains(&operation.0), "{operation:?} queued twice");
                waiting.push(operation.0);
                waits += 1;
            }
            Event::AttemptDispatched { operation, at, .. } => {
                let id = operation.0;
                if let Some(i) = waiting.iter().position(|w| *w == id) {
                    waiting.remove(i);
                    from_queue += 1;
                } else {
                    assert!(
                        waiting.is_empty(),
                        "{operation:?} took the slot at {at:?} ahead of {waiting:?}, which wait"
                    );
                }
            }
            // At the end of its wait, or by a protection after the bulkhead (a retry's budget).
            Event::Refused { operation, problem, .. } => {
                if let Some(i) = waiting.iter().position(|w| *w == operation.0) {
                    waiting.remove(i);
                    refused_in_queue += usize::from(problem == relent_core::Problem::BulkheadFull);
                }
            }
            Event::Completed { operation, .. } => waiting.retain(|w| *w != operation.0),
            _ => {}
        }
    }
    assert!(
        waits > 300 && from_queue > 200 && refused_in_queue > 10,
        "{waits} waits, {from_queue} dispatched from the queue, {refused_in_queue} refused at the end of their wait"
    );
}

#[test]
fn three_threads_take_turns_at_one_bulkhead_slot_through_its_queue() {
    let lock = Mutex::new(Shared::new(&QUEUED));
    let yields = AtomicU64::new(0);
    std::thread::scope(|s| {
        for thread in 5..=7 {
            let (lock, yields) = (&lock, &yields);
            s.spawn(move || worker(lock, thread, yields));
        }
    });
    interleaves(&yields);
    check_queue(&mut lock.lock().unwrap(), 3);
}
