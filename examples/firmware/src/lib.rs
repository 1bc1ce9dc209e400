//! What the firmware binaries share: a time driver for embassy-time on the board's timer, a
//! simulated modem link, a measure of the RAM taken (statics and the peak stack), the uplinks'
//! retry policy, and the instruction counting of the `cost` binaries.
//!
//! The board follows the target (`build.rs`): `thumbv6m-none-eabi` is the BBC micro:bit (nRF51822,
//! Cortex-M0 with 16 KiB of RAM), any other the lm3s6965evb (Cortex-M3); QEMU emulates both.
#![no_std]

pub mod count;
pub mod link;
pub mod time;

use relent_core::RetryPolicy;
use relent_embassy::{Duration, HZ};

/// Any panic ends the emulator with a failure code, after saying where.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    cortex_m_semihosting::hprintln!("panic: {}", info);
    cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}

/// Ends the emulator with `ok` as the exit code (0 when true).
pub fn exit(ok: bool) -> ! {
    use cortex_m_semihosting::debug;
    debug::exit(if ok { debug::EXIT_SUCCESS } else { debug::EXIT_FAILURE });
    loop {
        cortex_m::asm::wfi();
    }
}

/// What the firmware takes of the RAM there is, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// `.data`, `.bss` and the retained region: statics, the executor's task futures among them.
    pub statics: usize,
    /// The deepest the stack has reached since boot, interrupts included.
    pub peak_stack: usize,
    /// The board's RAM.
    pub ram: usize,
}

impl Memory {
    /// Measures what is taken now. cortex-m-rt's `paint-stack` fills the stack with
    /// `STACK_PAINT_VALUE` at boot; the peak is where that paint was last overwritten, found by
    /// scanning up from the stack's lowest address. A stack that had grown into the statics would
    /// show as all of the stack used.
    pub fn now() -> Memory {
        unsafe extern "C" {
            static _ram_start: u32;
            static _stack_end: u32;
            static _stack_start: u32;
        }
        let start = (&raw const _ram_start) as usize;
        let end = (&raw const _stack_end) as usize;
        let top = (&raw const _stack_start) as usize;
        let mut deepest = end;
        while deepest < top {
            // SAFETY: the words from the end of the statics to the top of RAM are the stack's, all
            // initialised by the paint; reading them races nothing (one core, and the word read
            // is below the stack pointer or the caller's own frame).
            if unsafe { core::ptr::read_volatile(deepest as *const u32) } != cortex_m_rt::STACK_PAINT_VALUE {
                break;
            }
            deepest += 4;
        }
        Memory { statics: end - start, peak_stack: top - deepest, ram: top - start }
    }
}

/// Prints [`Memory::now`] as one line. Not inlined, so that measuring adds the same one call to
/// every firmware's task, and its flash comparisons stay those of the code it measures.
#[inline(never)]
pub fn print_memory() {
    cortex_m_semihosting::hprintln!("{}", Memory::now());
}

impl core::fmt::Display for Memory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "RAM: statics {} bytes, peak stack {} bytes, of {} bytes",
            self.statics, self.peak_stack, self.ram
        )
    }
}

/// The uplinks' retry policy, which `cost` measures too: 4 attempts, 500 ms doubling to 8 s with
/// full jitter, 2 s per attempt.
pub const POLICY: RetryPolicy<HZ> =
    match RetryPolicy::exponential(4, Duration::from_millis(500), Duration::from_secs(8))
        .attempt_timeout(Duration::from_secs(2))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };

/// Uplinks the uplinks and baseline firmware send, one every [`GAP_S`] seconds.
pub const UPLINKS: u32 = 40;

/// Seconds between the end of one uplink and the start of the next.
pub const GAP_S: u64 = 3;
