//! What both firmware binaries share: a time driver for embassy-time on the Cortex-M SysTick, and a
//! simulated modem link.
#![no_std]

pub mod link;
pub mod time;

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

/// Uplinks both binaries send, one every [`GAP_S`] seconds.
pub const UPLINKS: u32 = 40;

/// Seconds between the end of one uplink and the start of the next.
pub const GAP_S: u64 = 3;
