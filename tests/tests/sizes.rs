//! `size_of` of the public state types, printed for the README and guarded against regressions.
//!
//! Run `cargo test -p relent-tests --test sizes -- --nocapture` to print the table. The bounds are
//! for 64-bit hosts; the README also lists the 32-bit (thumbv6m) figures.

use std::mem::size_of;

use relent_core::{
    Attempt, CallWindow, Completion, Dependency, Operation, RetryBudget, RetryPolicy, Verdict,
};

const HZ: u64 = 1_000_000;

#[test]
fn state_types_stay_small() {
    let rows: [(&str, usize, usize); 8] = [
        ("RetryPolicy<HZ>", size_of::<RetryPolicy<HZ>>(), 80),
        ("RetryBudget<HZ>", size_of::<RetryBudget<HZ>>(), 40),
        ("CallWindow<10>", size_of::<CallWindow<10>>(), 136),
        (
            "Dependency<HZ, 10> (window + either budget)",
            size_of::<Dependency<HZ, 10>>(),
            200,
        ),
        (
            "Operation<'_, HZ, Verdict<HZ>>",
            size_of::<Operation<'static, HZ, Verdict<HZ>>>(),
            160,
        ),
        (
            "Operation<'_, HZ, ()> (error type of size 0)",
            size_of::<Operation<'static, HZ, ()>>(),
            144,
        ),
        ("Attempt<HZ>", size_of::<Attempt<HZ>>(), 48),
        ("Completion<HZ, ()>", size_of::<Completion<HZ, ()>>(), 96),
    ];
    println!("| type | bytes (64-bit host) |\n|---|---|");
    for (name, size, bound) in rows {
        println!("| `{name}` | {size} |");
        assert!(size <= bound, "{name} grew to {size} bytes (bound {bound})");
    }
}
