//! The fuzz target: each input is a script of calls into relent-core (see `relent_fuzz::run`).
//!
//! `cargo +nightly fuzz run operations` from `fuzz/`; add `--features ticks-u32` for firmware's
//! 32-bit ticks.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| relent_fuzz::run(data));
