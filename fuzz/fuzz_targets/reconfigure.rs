//! The fuzz target for changes of configuration: each input is a script of operations on a
//! dependency switched between two configurations while they run (see
//! `relent_fuzz::run_reconfigure`).
//!
//! `cargo +nightly fuzz run reconfigure` from `fuzz/`; add `--features ticks-u32` for firmware's
//! 32-bit ticks.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| relent_fuzz::run_reconfigure(
    data,
    &mut relent_fuzz::Reconfigured::default()
));
