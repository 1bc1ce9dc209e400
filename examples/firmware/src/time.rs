//! An embassy-time driver on SysTick.
//!
//! On lm3s6965evb SysTick counts its 1 MHz external reference clock; a reload of 1 000 gives one
//! interrupt per millisecond, and the driver's tick rate is embassy-time's `tick-hz-1_000`. Each
//! interrupt advances the 64-bit tick count and wakes the timers that are due (embassy's generic
//! timer queue). Simple and portable to any Cortex-M, M0 included (no atomics: a critical section
//! guards the count). A tickless driver that arms a hardware timer at the next deadline would wake
//! the core far less often; this one favours being obviously right.

use core::cell::{Cell, RefCell};
use core::task::Waker;

use cortex_m::peripheral::SYST;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::exception;
use critical_section::Mutex;
use embassy_time_driver::Driver;
use embassy_time_queue_utils::Queue;

struct SysTickDriver {
    ticks: Mutex<Cell<u64>>,
    queue: Mutex<RefCell<Queue>>,
}

embassy_time_driver::time_driver_impl!(static DRIVER: SysTickDriver = SysTickDriver {
    ticks: Mutex::new(Cell::new(0)),
    queue: Mutex::new(RefCell::new(Queue::new())),
});

impl Driver for SysTickDriver {
    fn now(&self) -> u64 {
        critical_section::with(|cs| self.ticks.borrow(cs).get())
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let mut queue = self.queue.borrow_ref_mut(cs);
            queue.schedule_wake(at, waker);
            // A deadline already past is woken at once.
            queue.next_expiration(self.ticks.borrow(cs).get());
        });
    }
}

/// Starts SysTick at 1 kHz from the 1 MHz reference clock.
pub fn start(mut syst: SYST) {
    syst.set_clock_source(SystClkSource::External);
    syst.set_reload(1_000 - 1);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

#[exception]
fn SysTick() {
    critical_section::with(|cs| {
        let ticks = DRIVER.ticks.borrow(cs);
        ticks.set(ticks.get() + 1);
        DRIVER.queue.borrow_ref_mut(cs).next_expiration(ticks.get());
    });
}
