//! The bulkhead: at most `max` attempts in flight to one dependency, and, if it has a queue, at
//! most `places` operations waiting for a slot.
//!
//! A slow dependency holds a task and a connection for every call in flight (seed 000: "each retry
//! holds a task and a connection for another 3 seconds"); the bulkhead bounds how much of the
//! caller one dependency can hold. A slot is taken when an attempt is dispatched and travels inside
//! its [`Attempt`](crate::Attempt), which the caller must hand back; it is released when the
//! attempt is reported (or abandoned) and is never held during a retry delay.
//!
//! Why a queue: a server's calls arrive in bursts, and a full bulkhead refuses the burst's tail at
//! once although a slot frees within milliseconds (resilience4j's `maxWaitDuration`, Polly's
//! queued actions). With a queue, an attempt that finds the bulkhead full waits for a slot, for a
//! bounded time that fits its deadline, holding a place and nothing else. The core cannot know when
//! a slot frees, so the adapter wakes a waiting operation when
//! [`Dependency::slot_for_waiting`](crate::Dependency::slot_for_waiting) says one is free; a
//! waiting operation that is never woken tries once more at the end of its wait. Waiting
//! operations go first: an attempt that did not wait finds no room while any does, so a freed slot
//! goes to one that waited, not to whichever call arrives next.

/// Slots in use, and operations waiting for one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Bulkhead {
    in_flight: u16,
    waiting: u16,
    // The adaptive limit's state (`crate::adaptive`, which reads and writes it), read only if one
    // is configured; beside the counts rather than in a struct of its own, whose padding would
    // make the bulkhead 24 bytes instead of 16.
    /// The limit; 0 until the first decrease, meaning the bulkhead's slots.
    #[cfg(feature = "bulkhead-adaptive")]
    pub(crate) limit: u16,
    /// Fast successes since the limit last changed.
    #[cfg(feature = "bulkhead-adaptive")]
    pub(crate) steps: u16,
    /// When the limit was last lowered: a sign from an attempt dispatched before it is ignored.
    #[cfg(feature = "bulkhead-adaptive")]
    pub(crate) lowered_at: crate::time::Ticks,
}

impl Bulkhead {
    pub(crate) const fn new() -> Self {
        Self {
            in_flight: 0,
            waiting: 0,
            #[cfg(feature = "bulkhead-adaptive")]
            limit: 0,
            #[cfg(feature = "bulkhead-adaptive")]
            steps: 0,
            #[cfg(feature = "bulkhead-adaptive")]
            lowered_at: 0,
        }
    }

    pub(crate) const fn in_flight(&self) -> u16 {
        self.in_flight
    }

    pub(crate) const fn waiting(&self) -> u16 {
        self.waiting
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

    /// An operation starts waiting for a slot.
    pub(crate) fn join(&mut self) {
        self.waiting = self.waiting.saturating_add(1);
    }

    /// An operation stops waiting: it got a slot, was refused, or gave up.
    pub(crate) fn leave(&mut self) {
        self.waiting = self.waiting.saturating_sub(1);
    }
}

/// A bulkhead's queue, as configured: how many operations may wait for a slot at once, and for how
/// long at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Queue<const HZ: u64> {
    pub(crate) places: u16,
    pub(crate) max_wait: crate::time::Duration<HZ>,
}
