//! The bulkhead: at most `max` attempts in flight to one dependency.
//!
//! A slow dependency holds a task and a connection for every call in flight (seed 000: "each retry
//! holds a task and a connection for another 3 seconds"); the bulkhead bounds how much of the
//! caller one dependency can hold. A slot is taken when an attempt is dispatched and travels inside
//! its [`Attempt`](crate::Attempt), which the caller must hand back; it is released when the
//! attempt is reported (or abandoned) and is never held during a retry delay.

/// Slots in use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Bulkhead {
    in_flight: u16,
}

impl Bulkhead {
    pub(crate) const fn new() -> Self {
        Self { in_flight: 0 }
    }

    pub(crate) const fn in_flight(&self) -> u16 {
        self.in_flight
    }

    pub(crate) const fn has_room(&self, max: u16) -> bool {
        self.in_flight < max
    }

    pub(crate) fn take(&mut self) {
        self.in_flight = self.in_flight.saturating_add(1);
    }

    pub(crate) fn release(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }
}
