//! `size_of` of the public state types, printed for the README and guarded against regressions.
//!
//! Run `cargo test -p relent-tests --test sizes -- --nocapture` to print the table. The bounds are
//! for 64-bit hosts; the README also lists the 32-bit (thumbv6m) figures.

use std::mem::size_of;

use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;

use relent_core::{
    Attempt, CallWindow, Completion, Context, Dependency, DependencyConfig, Event, Operation, RetryBudget,
    RetryPolicy, Verdict,
};

const HZ: u64 = 1_000_000;

/// relent-embassy's `SharedDependency` with 4 buckets, at embassy-time's tick rate.
const SHARED: usize = 488;

#[test]
fn state_types_stay_small() {
    let rows: [(&str, usize, usize); 19] = [
        ("RetryPolicy<HZ>", size_of::<RetryPolicy<HZ>>(), 56),
        ("RetryBudget<HZ>", size_of::<RetryBudget<HZ>>(), 32),
        (
            "DependencyConfig<HZ> (everything on; a const, in flash on firmware)",
            size_of::<DependencyConfig<HZ>>(),
            248,
        ),
        ("CallWindow<10>", size_of::<CallWindow<10>>(), 200),
        (
            "Dependency<HZ, 10> (window, budget, breaker, throttle, limiter, bulkhead and its adaptive limit, cooldown, latency log)",
            size_of::<Dependency<HZ, 10>>(),
            568,
        ),
        (
            "Dependency<HZ, 10, 8> (the same, and an airtime log of 8 for a duty cycle)",
            size_of::<Dependency<HZ, 10, 8>>(),
            664,
        ),
        ("Operation<'_, HZ, Verdict<HZ>>", size_of::<Operation<'static, HZ, Verdict<HZ>>>(), 144),
        ("Operation<'_, HZ, ()> (error type of size 0)", size_of::<Operation<'static, HZ, ()>>(), 128),
        // What a caller states of an operation: deadline, replay safety, id, airtime, criticality.
        ("Context<HZ>", size_of::<Context<HZ>>(), 48),
        ("Attempt<HZ>", size_of::<Attempt<HZ>>(), 40),
        ("Completion<HZ, ()>", size_of::<Completion<HZ, ()>>(), 72),
        // What an observer that keeps a call's events needs room for, MAX_EVENTS_PER_CALL times.
        ("Event<HZ>", size_of::<Event<HZ>>(), 48),
        ("relent_tokio::RetryReport", size_of::<relent_tokio::RetryReport>(), 112),
        // The completion and the value, and the epoch `retry_at` reads: in their padding.
        ("relent_embassy::Done<(), ()>", size_of::<relent_embassy::Done<(), ()>>(), 96),
        // An operation's end as the failure of an outer attempt, which the outer completion keeps.
        ("relent_embassy::Error<()>", size_of::<relent_embassy::Error<()>>(), 104),
        // What `execute` takes: the context, and the instant an operation inside an attempt ends by.
        // 56 without criticality, whose one byte costs the context 8 of padding.
        ("relent_embassy::Bounded", size_of::<relent_embassy::Bounded>(), 64),
        // The generator (8 bytes here) and its borrow flag: one per firmware, shared by its operations.
        (
            "relent_embassy::SharedRng<CriticalSectionRawMutex, Xoroshiro64Star>",
            size_of::<relent_embassy::SharedRng<CriticalSectionRawMutex, rand_xoshiro::Xoroshiro64Star>>(),
            16,
        ),
        // A firmware's shared dependency: the state (4 buckets, every protection), its borrow flag,
        // the configuration in force, the restart of the core's clock it was last used in, and
        // room for the wakers of operations waiting in its queue (none by default, two words each).
        (
            "relent_embassy::SharedDependency<'_, CriticalSectionRawMutex, 4>",
            size_of::<relent_embassy::SharedDependency<'static, CriticalSectionRawMutex, 4>>(),
            SHARED,
        ),
        (
            "relent_embassy::SharedDependency<'_, CriticalSectionRawMutex, 4, 0, 2> (wakers for two waiting)",
            size_of::<relent_embassy::SharedDependency<'static, CriticalSectionRawMutex, 4, 0, 2>>(),
            SHARED + 32,
        ),
    ];
    println!("| type | bytes (64-bit host) |\n|---|---|");
    let mut grown = Vec::new();
    for (name, size, bound) in rows {
        println!("| `{name}` | {size} |");
        if size > bound {
            grown.push(format!("{name} grew to {size} bytes (bound {bound})"));
        }
    }
    assert!(grown.is_empty(), "{grown:#?}");
}
