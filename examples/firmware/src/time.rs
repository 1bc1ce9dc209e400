//! An embassy-time driver on a periodic 1 kHz tick.
//!
//! Each tick advances the 64-bit tick count and wakes the timers that are due (embassy's generic
//! timer queue); the driver's tick rate is embassy-time's `tick-hz-1_000`. Simple and portable to
//! any Cortex-M, M0 included (no atomics: a critical section guards the count). A tickless driver
//! that arms a hardware timer at the next deadline would wake the core far less often; this one
//! favours being obviously right.
//!
//! What ticks depends on the board (`build.rs` picks it from the target):
//! - lm3s6965evb (Cortex-M3): SysTick, counting its 1 MHz external reference clock, reload 1 000.
//! - BBC micro:bit (nRF51822, Cortex-M0): the nRF51 has no SysTick, so TIMER0 counts at 1 MHz
//!   (16 MHz over a prescaler of 2^4) and clears itself on reaching 1 000. On a real board TIMER0
//!   keeps the 16 MHz clock running; a battery-powered one would tick on RTC1 from the 32 kHz clock
//!   instead, as embassy-nrf's driver does, but QEMU does not model the nRF51's RTC.

use core::cell::{Cell, RefCell};
use core::task::Waker;

use critical_section::Mutex;
use embassy_time_driver::Driver;
use embassy_time_queue_utils::Queue;

pub use board::start;

struct TickDriver {
    ticks: Mutex<Cell<u64>>,
    queue: Mutex<RefCell<Queue>>,
}

embassy_time_driver::time_driver_impl!(static DRIVER: TickDriver = TickDriver {
    ticks: Mutex::new(Cell::new(0)),
    queue: Mutex::new(RefCell::new(Queue::new())),
});

impl Driver for TickDriver {
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

/// One millisecond has passed: called from the board's tick interrupt.
fn tick() {
    critical_section::with(|cs| {
        let ticks = DRIVER.ticks.borrow(cs);
        ticks.set(ticks.get() + 1);
        DRIVER.queue.borrow_ref_mut(cs).next_expiration(ticks.get());
    });
}

#[cfg(board = "lm3s6965evb")]
mod board {
    use cortex_m::peripheral::SYST;
    use cortex_m::peripheral::syst::SystClkSource;
    use cortex_m_rt::exception;

    /// Starts SysTick at 1 kHz from the 1 MHz reference clock. Call once, at boot.
    pub fn start() {
        let Some(core) = cortex_m::Peripherals::take() else { panic!("time::start called twice") };
        let mut syst: SYST = core.SYST;
        syst.set_clock_source(SystClkSource::External);
        syst.set_reload(1_000 - 1);
        syst.clear_current();
        syst.enable_interrupt();
        syst.enable_counter();
    }

    #[exception]
    fn SysTick() {
        super::tick();
    }
}

#[cfg(board = "microbit")]
mod board {
    use nrf51_pac::{Interrupt, NVIC, TIMER0, interrupt};

    /// Starts TIMER0 at 1 MHz, cleared by its compare 0 at 1 000: an interrupt per millisecond.
    /// Call once, at boot.
    pub fn start() {
        let Some(p) = nrf51_pac::Peripherals::take() else { panic!("time::start called twice") };
        let timer = p.TIMER0;
        timer.bitmode.write(|w| w.bitmode()._32bit());
        // SAFETY (here and below): the values are in the fields' documented ranges (a prescaler of
        // at most 9, any 32-bit compare value, 1 to trigger a task, 0 to clear an event).
        timer.prescaler.write(|w| unsafe { w.prescaler().bits(4) });
        timer.cc[0].write(|w| unsafe { w.bits(1_000) });
        timer.shorts.write(|w| w.compare0_clear().enabled());
        timer.intenset.write(|w| w.compare0().set());
        timer.tasks_start.write(|w| unsafe { w.bits(1) });
        // SAFETY: the handler below is ready, and it takes the driver's critical section itself.
        unsafe { NVIC::unmask(Interrupt::TIMER0) };
    }

    #[interrupt]
    fn TIMER0() {
        // SAFETY: this handler only clears the event it was raised for; `start` configured the
        // timer once, before unmasking this interrupt, and nothing else touches TIMER0.
        let timer = unsafe { &*TIMER0::ptr() };
        timer.events_compare[0].write(|w| unsafe { w.bits(0) });
        super::tick();
    }
}
