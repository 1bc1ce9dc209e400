//! A link-time proof that relent-core keeps no panic path.
//!
//! relent-core promises never to panic, on any input. Clippy denies the panicking constructs in its
//! own code (`unwrap`, indexing, plain arithmetic, ...), and the fuzz target and the property tests
//! find the panics that inputs reach. Neither sees a panic path the compiler keeps in the binary: a
//! library call that panics on some argument, which the code never passes but the compiler cannot
//! prove it. There was one: `copy_within` in the duty cycle's log, whose panic and formatting code
//! was linked into every firmware with a duty cycle (0.6 KiB of flash).
//!
//! This firmware calls relent-core's public API, every call but the `Display` and `Debug` impls,
//! in an order and with values the optimiser cannot see through (`core::hint::black_box`), and its
//! panic handler calls a function that exists nowhere.
//! If any path to a panic survives optimisation, the handler is kept and the link fails with
//! `undefined symbol: relent_core_kept_a_panic_path`. The build succeeding is the proof, for the
//! target, features and compiler it was built with. Nothing runs it.
//!
//! It links at `opt-level` 1, 2, 3, `"s"` and `"z"`, with LTO and without. Only an unoptimised
//! build (`opt-level = 0`) keeps panic paths, the standard library's own among them. `.ci/run`
//! builds it for the Cortex-M3 and the Cortex-M0, with 64-bit and 32-bit ticks, with every
//! protection and with none. It also lists each build's symbols for soft-float routines: neither
//! core has an FPU, so any float in relent-core, or in what it calls, would link one.
//!
//! To see which call kept a panic path when the link fails, link anyway (`RUSTFLAGS="-C
//! link-arg=--unresolved-symbols=ignore-all"`) and look for the callers of the panic functions in
//! `arm-none-eabi-objdump -d -C`.

#![no_std]
#![no_main]

use core::hint::black_box as opaque;

use rand_core::RngCore;
use relent_core::{
    Action, Attempt, Context, Dependency, DependencyConfig, Ended, Event, Instant, Jitter, Operation,
    ReplaySafety, RetryBudget, RetryPolicy, Ticks, Verdict,
};
#[cfg(feature = "every-protection")]
use relent_core::{BreakerConfig, DutyCycle, RateLimit};

const HZ: u64 = 1_000;
type D = relent_core::Duration<HZ>;
type T = Instant<HZ>;
/// Buckets in the window, entries in the airtime log.
const N: usize = 4;
const L: usize = 4;

/// Values the optimiser cannot predict.
struct Opaque(u64);

impl Opaque {
    fn u64(&mut self) -> u64 {
        self.0 = opaque(self.0).wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        opaque(self.0)
    }
    fn u32(&mut self) -> u32 {
        self.u64() as u32
    }
    fn u16(&mut self) -> u16 {
        self.u64() as u16
    }
    fn u8(&mut self) -> u8 {
        self.u64() as u8
    }
    fn bool(&mut self) -> bool {
        self.u64() & 1 == 1
    }
    fn ticks(&mut self) -> Ticks {
        self.u64() as Ticks
    }
    fn duration(&mut self) -> D {
        D::from_ticks(self.ticks())
    }
    fn instant(&mut self) -> T {
        T::from_ticks(self.ticks())
    }
    fn verdict(&mut self) -> Verdict<HZ> {
        let verdict = match self.u8() % 5 {
            0 => Verdict::Retryable,
            1 => Verdict::RetryableAfter(self.duration()),
            2 => Verdict::retryable_after_secs(self.u32()),
            3 => Verdict::NeverArrived,
            _ => Verdict::NotRetryable,
        };
        opaque((verdict.is_retryable(), verdict.retry_after(), verdict.never_arrived()));
        verdict
    }
}

/// The core's randomness, opaque too. Written here rather than taken from rand_xoshiro: its
/// seeding keeps panic paths of its own at some optimisation levels, which would fail the link for
/// something relent-core does not do.
impl RngCore for Opaque {
    fn next_u32(&mut self) -> u32 {
        (self.u64() >> 32) as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for byte in dest {
            *byte = self.u8();
        }
    }
}

/// Every event, looked at.
fn observe(event: &Event<HZ>) {
    opaque((event, event.operation()));
}

fn policy(x: &mut Opaque) -> Option<RetryPolicy<HZ>> {
    let builder = match x.u8() % 3 {
        0 => RetryPolicy::exponential(x.u8(), x.duration(), x.duration()),
        1 => RetryPolicy::constant(x.u8(), x.duration()),
        _ => RetryPolicy::single_attempt(),
    };
    let jitter = match x.u8() % 4 {
        0 => Jitter::None,
        1 => Jitter::Full,
        2 => Jitter::Equal,
        _ => Jitter::Decorrelated,
    };
    let mut builder = builder.jitter(jitter).max_delay(x.duration()).min_remaining(x.duration());
    if x.bool() {
        builder = builder.attempt_timeout(x.duration());
    }
    if x.bool() {
        builder = builder.retry_after_spread(x.duration());
    }
    // Any multiplier, on any backoff: its arithmetic is linked with the build's.
    #[cfg(feature = "every-protection")]
    if x.bool() {
        builder = builder.multiplier_percent(x.u16());
    }
    match builder.build() {
        Ok(policy) => Some(if x.bool() { policy.without_retries() } else { policy }),
        Err(e) => {
            opaque((e.message(), e.as_str(), jitter.as_str()));
            None
        }
    }
}

fn budget(x: &mut Opaque) -> Option<RetryBudget<HZ>> {
    let budget = if x.bool() {
        RetryBudget::ratio(x.u8(), x.u32())
    } else {
        #[cfg(feature = "every-protection")]
        {
            RetryBudget::token_bucket(x.u32(), x.u32(), x.duration(), x.duration())
        }
        #[cfg(not(feature = "every-protection"))]
        RetryBudget::ratio(x.u8(), x.u32())
    };
    budget.map_err(|e| opaque(e.message())).ok()
}

fn config(x: &mut Opaque) -> DependencyConfig<HZ> {
    let mut config = DependencyConfig::new(x.duration());
    if let Some(budget) = budget(x) {
        config = config.budget(budget);
    }
    #[cfg(feature = "every-protection")]
    {
        let mut breaker = match x.u8() % 3 {
            0 => BreakerConfig::consecutive_failures(x.u32(), x.duration()),
            1 => BreakerConfig::failure_ratio(x.u8(), x.u32(), x.duration()),
            _ => BreakerConfig::count_window(x.u8(), x.u8(), x.u8(), x.duration()),
        };
        breaker = breaker.probes(x.u8());
        if x.bool() {
            breaker = breaker.slow_calls(x.duration());
        }
        if x.bool() {
            config = config.breaker(breaker);
        }
        if x.bool() {
            config = config.bulkhead(x.u16());
        }
        if x.bool() {
            let limit = RateLimit::new(x.u32(), x.duration()).burst(x.u32()).max_wait(x.duration());
            config = config.rate_limit(limit);
        }
        if x.bool() {
            let duty = if x.bool() {
                DutyCycle::new(x.duration(), x.duration())
            } else {
                DutyCycle::per_mille(x.u16(), x.duration())
            };
            config = config.duty_cycle(duty);
        }
        if x.bool() {
            config = config.cooldown(x.duration());
        }
        if x.bool() {
            config = config.client_throttle(relent_core::ClientThrottle::new(x.u16()));
        }
        if x.bool() {
            let limit = relent_core::AdaptiveLimit::new(x.duration()).min_slots(x.u16());
            config = config.adaptive_limit(limit.decrease_to_permille(x.u16()));
        }
        if x.bool() {
            config = config.latency_samples(x.u16());
        }
    }
    opaque(config.validate().map_err(|e| e.message()))
        .ok()
        .map_or(DependencyConfig::new(D::from_ticks(1)), |()| config)
}

fn context(x: &mut Opaque) -> Context<HZ> {
    let safety = match x.u8() % 4 {
        0 => ReplaySafety::replayable_read(x.duration()),
        1 => ReplaySafety::provider_idempotent_mutation(x.duration()),
        #[cfg(feature = "every-protection")]
        2 => ReplaySafety::UntilArrived,
        _ => ReplaySafety::Unsafe,
    };
    opaque((safety.as_str(), safety.valid_for()));
    Context::new(x.duration(), safety).id(x.u64()).airtime(x.duration()).deadline_within(x.duration())
}

/// One run: a dependency and two operations, driven by a script of opaque calls.
fn run(x: &mut Opaque) {
    let Some(policy) = policy(x) else { return };
    let config = config(x);
    if let Some(budget) = config.retry_budget() {
        let _ = opaque(policy.check_budget(&budget).map_err(|e| e.message()));
    }
    let mut dep = match Dependency::<HZ, N, L>::new(&config, x.instant()) {
        Ok(dep) => dep,
        Err(e) => {
            opaque(e.message());
            return;
        }
    };
    let mut rng = Opaque(x.u64());
    let mut ops: [Option<(Operation<'_, HZ, Verdict<HZ>>, Option<Attempt<HZ>>)>; 2] = [None, None];
    let mut snapshot = [0u8; Dependency::<HZ, N, L>::SNAPSHOT_LEN];
    // What a hedge of each slot's operation would need, taken as it starts.
    #[cfg(feature = "every-protection")]
    let mut plans: [Option<relent_core::HedgePlan<HZ>>; 2] = [None, None];
    for _ in 0..opaque(64) {
        let now = x.instant();
        let i = usize::from(x.bool());
        let slot = &mut ops[i];
        match x.u8() % 12 {
            // A hedge of the other slot's operation.
            #[cfg(feature = "every-protection")]
            0 if x.bool() => {
                if let Some(mut plan) = plans[1 - i] {
                    plan.rebase(x.duration());
                    let hedge = Operation::start_hedge(&policy, &config, plan, now);
                    opaque((hedge.is_hedge(), plan.deadline()));
                    *slot = Some((hedge, None));
                }
            }
            0 => match Operation::start(&policy, &config, context(x), now) {
                Ok(op) => {
                    #[cfg(feature = "every-protection")]
                    {
                        plans[i] = op.hedge_plan().map_err(|e| opaque(e.as_str())).ok();
                    }
                    *slot = Some((op, None));
                }
                Err(e) => {
                    opaque(e.as_str());
                }
            },
            1 => {
                if let Some((op, attempt)) = slot {
                    match op.poll(now, &mut dep, &mut observe) {
                        Action::Dispatch(a) => {
                            opaque((
                                a.number(),
                                a.timeout(),
                                a.started(),
                                a.expires(),
                                a.deadline(),
                                a.is_retry(),
                            ));
                            *attempt = Some(a);
                        }
                        Action::Wait { until } => {
                            opaque(until);
                        }
                        Action::Done => {}
                    }
                }
            }
            2 => {
                if let Some((op, attempt)) = slot {
                    if let Some(a) = attempt.take().or_else(|| op.attempt()) {
                        op.on_success(a, now, &mut dep, &mut observe);
                    }
                }
            }
            3 => {
                if let Some((op, attempt)) = slot {
                    if let Some(a) = attempt.take().or_else(|| op.attempt()) {
                        let verdict = x.verdict();
                        op.on_failure(a, now, &mut dep, &mut rng, verdict, &mut observe);
                    }
                }
            }
            4 => {
                if let Some((op, _)) = slot {
                    op.abandon(now, &mut dep, &mut observe);
                }
            }
            5 => {
                if let Some((op, _)) = slot {
                    if let Some(done) = op.take_completion() {
                        opaque((done.code(), done.problem.map(|p| p.as_str()), done.disposition.as_str()));
                        opaque(done.is_success());
                        // How an operation running this one in an attempt judges its end.
                        let retry_in = opaque(x.bool()).then(|| x.duration());
                        opaque(done.outer_verdict(retry_in));
                        opaque(Ended::of(&done, retry_in).verdict(|| x.verdict()));
                        opaque(done);
                    }
                    opaque((op.assign_id(x.u64()), op.id(), op.deadline(), op.dispatched(), op.is_done()));
                }
            }
            6 => {
                if let Ok(len) = dep.save(now, &mut snapshot) {
                    opaque(len);
                }
                // Arbitrary bytes, as a flash page written by other firmware could hold.
                if x.bool() {
                    let at = usize::from(x.u8()) % snapshot.len();
                    snapshot[at] = x.u8();
                }
                let bytes = &snapshot[..usize::from(x.u16()) % (snapshot.len() + 1)];
                match Dependency::<HZ, N, L>::restore_or_new(&config, bytes, now, x.duration()) {
                    Ok((restored, refused)) => {
                        opaque(refused.map(|e| e.as_str()));
                        dep = restored;
                    }
                    Err(e) => {
                        opaque(e.message());
                    }
                }
            }
            7 => {
                let by = x.duration();
                dep.rebase(by);
                if let Some((op, _)) = slot {
                    op.rebase(by);
                }
            }
            8 => {
                opaque(dep.counts(now));
                opaque(dep.retries_available(&config, now));
                opaque(dep.circuit(now).as_str());
                opaque(dep.circuit_open_until(now));
                opaque(dep.in_flight());
                opaque(dep.cooldown_until(now));
                opaque(dep.next_rate_unit(&config, now));
                opaque(dep.next_airtime(&config, now, x.duration()));
                opaque(dep.airtime_used(&config, now));
                #[cfg(feature = "every-protection")]
                opaque(dep.throttle_ppm(&config, now));
                opaque(dep.bulkhead_limit(&config));
                opaque(dep.latency_percentile(&config, x.u8()));
                #[cfg(feature = "every-protection")]
                {
                    let delay = if x.bool() {
                        relent_core::HedgeDelay::percentile(x.u8()).until_learnt(x.duration())
                    } else {
                        relent_core::HedgeDelay::after(x.duration())
                    };
                    let _ = opaque(
                        dep.hedge_delay(&config, delay.at_least(x.duration())).map_err(|e| e.as_str()),
                    );
                }
                // An operator's control of the circuit.
                #[cfg(feature = "every-protection")]
                if x.bool() {
                    match dep.isolate_circuit(&config) {
                        Ok(change) => drop(opaque(change.map(|c| c.as_str()))),
                        Err(e) => drop(opaque(e.message())),
                    }
                }
                match dep.close_circuit(&config) {
                    Ok(change) => drop(opaque(change.map(|c| c.as_str()))),
                    Err(e) => drop(opaque(e.message())),
                }
            }
            9 => {
                opaque(policy.delay(x.u8(), x.duration(), &mut rng));
                opaque(policy.nominal_delay(x.u8()));
            }
            10 => {
                if let Some((op, attempt)) = slot {
                    opaque((op.attempt(), attempt.as_ref()));
                }
            }
            _ => *slot = None,
        }
    }
}

/// The entry point the linker looks for. Nothing runs this firmware: it only has to link.
#[unsafe(no_mangle)]
pub extern "C" fn _start() -> ! {
    let mut x = Opaque(opaque(0));
    loop {
        run(&mut x);
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    unsafe extern "Rust" {
        /// Defined nowhere: a call to it that survives optimisation fails the link.
        safe fn relent_core_kept_a_panic_path() -> !;
    }
    relent_core_kept_a_panic_path()
}
