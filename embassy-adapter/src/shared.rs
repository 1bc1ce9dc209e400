//! A dependency shared by tasks and interrupt handlers: its configuration and its state behind a
//! blocking mutex.
//!
//! The configuration in force is under the lock with the state, so that
//! [`SharedDependency::reconfigure`] changes both at once: operations started before keep the
//! configuration they started with (each holds its own reference, for its life), new ones read the
//! new one. It is a `Cell` of its own beside the state's `RefCell`, read without borrowing the
//! state: [`SharedDependency::config`] and `{:?}` work inside [`SharedDependency::lock`]'s closure.
//!
//! The lock is embassy-sync's blocking mutex over any `RawMutex`: `CriticalSectionRawMutex` to share
//! between tasks and interrupts (it works on `thumbv6m-none-eabi`, which has no atomic
//! compare-and-swap: the core's state is plain data that needs none), `ThreadModeRawMutex` or
//! `NoopRawMutex` when one executor owns it. It is held for one call into the core at a time, never
//! across an await. `SharedDependency::new` is a `const fn`, so the whole thing is a `static`:
//!
//! ```
//! use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
//! use relent_embassy::core::{BreakerConfig, Dependency, DependencyConfig, RetryBudget};
//! use relent_embassy::{Duration, Instant, SharedDependency};
//!
//! const UPLINK: DependencyConfig<{ relent_embassy::HZ }> = DependencyConfig::new(Duration::from_secs(60))
//!     .budget(match RetryBudget::ratio(20, 3) { Ok(b) => b, Err(e) => panic!("{}", e.message()) })
//!     .breaker(BreakerConfig::consecutive_failures(5, Duration::from_secs(120)));
//!
//! static LINK: SharedDependency<'static, CriticalSectionRawMutex, 4> =
//!     match Dependency::new(&UPLINK, Instant::from_ticks(0)) {
//!         Ok(state) => SharedDependency::new(&UPLINK, state),
//!         Err(e) => panic!("{}", e.message()),
//!     };
//! # fn main() { let _ = &LINK; }
//! ```

use core::cell::{Cell, RefCell};
use core::task::{Poll, Waker};

use embassy_sync::blocking_mutex::Mutex;
use embassy_sync::blocking_mutex::raw::RawMutex;
use relent_core::{CircuitState, ConfigError, Dependency, DependencyConfig, Operation, SnapshotError};

use crate::epoch::Epoch;
use crate::{Duration, HZ, Instant};

/// The state and the restart of the core's clock it was last used in (32-bit ticks), and the
/// wakers of operations waiting in the bulkhead's queue (none with `W` of 0: no bytes either).
struct Held<const N: usize, const L: usize, const W: usize> {
    state: Dependency<HZ, N, L>,
    epoch: Epoch,
    waiting: [Option<Waker>; W],
}

impl<const N: usize, const L: usize, const W: usize> Held<N, L, W> {
    /// The core's `now` and its epoch, with the state rebased to that epoch if it was last used in
    /// an earlier one. One function for every caller (not inlined into each lock) with 32-bit ticks.
    #[cfg_attr(feature = "ticks-u32", inline(never))]
    fn catch_up(&mut self) -> (Instant, Epoch) {
        let (now, epoch) = Epoch::now();
        if let Some(by) = epoch.since(self.epoch) {
            self.state.rebase(by);
            self.epoch = epoch;
        }
        (now, epoch)
    }
}

/// The configuration in force and the state: what the lock guards.
struct Guarded<'c, const N: usize, const L: usize, const W: usize> {
    config: Cell<&'c DependencyConfig<HZ>>,
    held: RefCell<Held<N, L, W>>,
}

/// One dependency's configuration and shared state, with `N` buckets in its window, `L` entries
/// in its airtime log (for a duty cycle; none by default), and room for the wakers of `W`
/// operations waiting in its bulkhead's queue (none by default).
///
/// With a bulkhead queue ([`DependencyConfig::bulkhead_queue`]), give `W` the queue's places: an
/// operation waiting for a slot is woken when one frees, and goes then (all the waiting ones are
/// woken, and the first to ask takes it; the others wait on). One that leaves the queue otherwise
/// (dropped by its task, at the end of its wait, or taking a slot when polled for something else)
/// wakes them all too, and those still waiting register again: so its waker keeps no place from
/// them. Each place costs a waker's two words. An operation that finds no room for its waker (more
/// waiting than `W`) still goes, at the end of its wait, if a slot is free by then: the core keeps
/// a freed slot for the operations that wait, so leaving `W` at 0 with a queue leaves slots idle.
/// With feature `defmt` each such wait is logged at WARN, with what to change.
pub struct SharedDependency<'c, M: RawMutex, const N: usize, const L: usize = 0, const W: usize = 0> {
    guarded: Mutex<M, Guarded<'c, N, L, W>>,
}

/// Shows the configuration, not the state: reading the state takes the lock, and a `{:?}` inside
/// [`SharedDependency::lock`]'s closure would then find it borrowed.
impl<M: RawMutex, const N: usize, const L: usize, const W: usize> core::fmt::Debug
    for SharedDependency<'_, M, N, L, W>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SharedDependency").field("config", &self.config()).finish_non_exhaustive()
    }
}

impl<'c, M: RawMutex, const N: usize, const L: usize, const W: usize> SharedDependency<'c, M, N, L, W> {
    /// Shares `state`, built from `config` at the core's tick 0 or later. A `const fn`: usable in
    /// a `static`.
    pub const fn new(config: &'c DependencyConfig<HZ>, state: Dependency<HZ, N, L>) -> Self {
        let waiting = [const { None }; W];
        let held = RefCell::new(Held { state, epoch: Epoch::START, waiting });
        Self { guarded: Mutex::new(Guarded { config: Cell::new(config), held }) }
    }

    /// The configuration in force: the one it was made with, or the one it was last
    /// [reconfigured](Self::reconfigure) to. Read under the lock (a critical section with
    /// `CriticalSectionRawMutex`); callable inside [`lock`](Self::lock)'s closure.
    pub fn config(&self) -> &'c DependencyConfig<HZ> {
        self.guarded.lock(|g| g.config.get())
    }

    /// Runs this dependency under `to` from now on, keeping its state: an open circuit stays open
    /// to its end, a cooldown to its end (cut to `to`'s longest), the attempts in flight keep their
    /// slots, the window its counts, the airtime on record counts against `to`'s duty cycle; each
    /// count and limit is carried into `to`'s numbers and never more than they allow (see
    /// `relent_core::Dependency::reconfigure` for each rule). Operations already running finish
    /// under the configuration they started with; operations started after this call run under
    /// `to`. Operations waiting in the bulkhead's queue are woken if `to` frees a slot for them.
    ///
    /// For a configuration the firmware switches to (the duty cycle the network sets, the
    /// backend's "back off" command, a battery-saving mode): each is a `const` in flash, or a
    /// `static` built once from stored settings, as the first one is. The airtime on record counts
    /// against `to`'s duty cycle, so a switch does not give a radio another sub-band's allowance:
    /// keep a dependency per sub-band for that.
    ///
    /// `Err` (and nothing changed) if `to` is invalid or does not fit this dependency's `N` window
    /// buckets or `L` airtime-log entries, as for `Dependency::new`; the error says what to fix.
    /// Logged with defmt (feature `defmt`). A deep-sleep snapshot is restored with the
    /// configuration in force when it was saved: keep which one that was beside it, and on waking
    /// [`restore`](Self::restore) under it, which makes it the configuration in force. The firmware
    /// example (`examples/firmware`, its `uplinks` binary) does both with the profiles its simulated
    /// network asks for.
    pub fn reconfigure(&self, to: &'c DependencyConfig<HZ>) -> Result<(), ConfigError> {
        self.lock_in(|config, state, now, _| {
            state.reconfigure(config.get(), to, now)?;
            config.set(to);
            Ok(())
        })?;
        #[cfg(feature = "defmt")]
        defmt::info!("relent: dependency reconfigured: {}", to);
        Ok(())
    }

    /// Saves the state into `out` for a deep sleep (at least `Dependency::SNAPSHOT_LEN` bytes, in a
    /// retained RAM region or flash), read at the core's `now` under the lock, and returns the
    /// bytes written. Keep which configuration is in force beside it ([`config`](Self::config) is
    /// one of the firmware's `const`s): the snapshot holds the state, not its configuration. See
    /// `relent_core::Dependency::save`.
    pub fn save(&self, out: &mut [u8]) -> Result<usize, SnapshotError> {
        self.lock(|state, now| state.save(now, out))
    }

    /// On waking from a deep sleep, before any operation runs: restores the state
    /// [saved](Self::save) into `snapshot`, rebased by the time `slept` (from the RTC), under `config`,
    /// the configuration in force when it was saved, which becomes this dependency's: the restored
    /// state and its configuration change together, in one step under the lock. (Restored under
    /// another, the state is bounded by `config`: see `relent_core::Dependency::restore`.)
    ///
    /// A snapshot that is refused (truncated, corrupted, from another build's shape or version, or
    /// saved under a configuration whose window's buckets have another width) leaves the state as
    /// it was (at the boot, the fresh one the `static` was made with), carried over to `config` as
    /// [`reconfigure`](Self::reconfigure) does, and the reason is returned: `Ok(Some(reason))`.
    /// `Err` (and nothing changed) only if `config` does not fit this dependency, as for
    /// `reconfigure`. See `relent_core::Dependency::restore`.
    pub fn restore(
        &self,
        config: &'c DependencyConfig<HZ>,
        snapshot: &[u8],
        slept: Duration,
    ) -> Result<Option<SnapshotError>, ConfigError> {
        let refused =
            self.lock_in(|in_force, state, now, _| match Dependency::restore(config, snapshot, now, slept) {
                Ok(restored) => {
                    *state = restored;
                    in_force.set(config);
                    None
                }
                Err(why) => Some(why),
            });
        // Outside the lock, through `reconfigure` itself: a second copy of it inlined here took 72
        // bytes more of the firmware example's peak stack on a Cortex-M3, and a fresh state built
        // beside the one in place 80.
        if refused.is_some() {
            self.reconfigure(config)?;
        }
        Ok(refused)
    }

    /// Runs `f` under the lock on the state and the core's `now`, read under the lock: give the
    /// state that `now` (and build any replacement state at it). Keep `f` short, and do not call
    /// back into this dependency from inside it (the state is borrowed).
    pub fn lock<R>(&self, f: impl FnOnce(&mut Dependency<HZ, N, L>, Instant) -> R) -> R {
        self.lock_in(|_, state, now, _| f(state, now))
    }

    /// Isolates the circuit: every attempt is refused unsent with `circuit_isolated`, and no
    /// instant to try again, until [`close_circuit`](Self::close_circuit). For a command from the
    /// backend ("stay off the modem link") or a mode of the firmware's own (a firmware update on
    /// the same radio). The isolation outlives a deep sleep in the dependency's snapshot. Returns
    /// the change (`None` if it was isolated already), logged with defmt (feature `defmt`); a
    /// dependency without a breaker has no circuit to isolate (`ConfigError::NoBreaker`). Feature
    /// `breaker-isolate`. See `relent_core::Dependency::isolate_circuit`.
    #[cfg(feature = "breaker-isolate")]
    pub fn isolate_circuit(&self) -> Result<Option<CircuitState>, ConfigError> {
        let change = self.lock_in(|config, state, _, _| state.isolate_circuit(config.get()))?;
        log_change(change);
        Ok(change)
    }

    /// Closes the circuit from any state, with its counts started afresh: calls go through at
    /// once. Ends an isolation, or overrides a break. Returns the change (`None` if it was closed
    /// already), logged with defmt (feature `defmt`); `ConfigError::NoBreaker` without a breaker.
    pub fn close_circuit(&self) -> Result<Option<CircuitState>, ConfigError> {
        let change = self.lock_in(|config, state, _, _| state.close_circuit(config.get()))?;
        log_change(change);
        Ok(change)
    }

    /// As [`lock`](Self::lock), also giving the configuration in force and the epoch `now` was
    /// read in. With 32-bit ticks, a state last used in an earlier epoch is rebased first.
    pub(crate) fn lock_in<R>(
        &self,
        f: impl FnOnce(&Cell<&'c DependencyConfig<HZ>>, &mut Dependency<HZ, N, L>, Instant, Epoch) -> R,
    ) -> R {
        self.guarded.lock(|Guarded { config, held }| {
            let held = &mut *held.borrow_mut();
            let (now, epoch) = held.catch_up();
            let result = f(config, &mut held.state, now, epoch);
            // A slot free while operations wait for one (an attempt reported, a waiting operation
            // refused or cancelled, a newcomer queued behind them): wake them all. The first to
            // poll takes it; the others find none and wait on.
            if W > 0 && held.state.slot_for_waiting(config.get()) {
                wake_all(&mut held.waiting);
            }
            result
        })
    }

    /// For `op`, waiting in the bulkhead's queue: ready if a slot is free for it
    /// (`Operation::slot_free`: under the configuration it started with, which after a
    /// [`reconfigure`](Self::reconfigure) to more slots may see none where the configuration in
    /// force, which wakes the waiting operations, sees one; it waits on, and no wake-up loops);
    /// else its waker is registered, if there is room, and it is pending. Read under the lock
    /// that a step which frees a slot wakes the registered wakers under, so no wake-up is lost
    /// between the operation's step and its wait.
    pub(crate) fn poll_slot<E>(
        &self,
        op: &Operation<'_, HZ, E>,
        cx: &mut core::task::Context<'_>,
    ) -> Poll<()> {
        // `None` if a slot is free for it; else whether it found no room for its waker.
        let pending = self.guarded.lock(|Guarded { held, .. }| {
            let held = &mut *held.borrow_mut();
            let registered = held.waiting.iter().flatten().any(|w| w.will_wake(cx.waker()));
            if op.slot_free(&held.state) {
                // Polled for something else than a free slot (which takes every waker), it may
                // leave its waker behind: as `leave_queue`.
                if registered {
                    wake_all(&mut held.waiting);
                }
                return None;
            }
            match (registered, held.waiting.iter_mut().find(|w| w.is_none())) {
                (false, Some(free)) => *free = Some(cx.waker().clone()),
                (false, None) => return Some(true),
                _ => {}
            }
            Some(false)
        });
        #[cfg(feature = "defmt")]
        if pending == Some(true) {
            warn_no_room_for_waker(W);
        }
        if pending.is_none() { Poll::Ready(()) } else { Poll::Pending }
    }

    /// For an operation leaving the bulkhead's queue otherwise than by taking a slot it was woken
    /// for (dropped, or its wait ended by its timer): its waker, if registered, would keep a place
    /// another operation that waits needs, and that one would then not be woken when a slot
    /// frees, leaving the slot idle until the end of its wait. So every registered waker is taken
    /// and woken: the operations still waiting register again when polled (a task's waker may be
    /// the waker of more than one operation, so one is not taken alone). Both ways of leaving are
    /// rare, and asking first whether its waker is among them cost 36 bytes of Cortex-M3 flash.
    pub(crate) fn leave_queue(&self) {
        self.guarded.lock(|Guarded { held, .. }| wake_all(&mut held.borrow_mut().waiting));
    }
}

/// Takes every registered waker and wakes it: the operations still waiting register again when
/// polled.
fn wake_all(waiting: &mut [Option<Waker>]) {
    for waker in waiting.iter_mut().filter_map(Option::take) {
        waker.wake();
    }
}

/// Warns with defmt, outside the lock (feature `defmt`), that an operation waits in the
/// bulkhead's queue with no room for its waker among `w`: it goes when its wait ends, not when a
/// slot frees, and the slot idles meanwhile. Give `SharedDependency` the queue's places as `W`.
#[cfg(feature = "defmt")]
pub(crate) fn warn_no_room_for_waker(w: usize) {
    defmt::warn!(
        "relent: an operation waits in the bulkhead's queue with no room for its waker (W = {}), so it goes at the end of its wait, not when a slot frees: give SharedDependency the queue's places as W",
        w
    );
}

/// Logs an operator's change of the circuit with defmt, outside the lock (feature `defmt`).
fn log_change(change: Option<CircuitState>) {
    #[cfg(feature = "defmt")]
    if let Some(state) = change {
        defmt::warn!("relent: circuit {} by the firmware's command", state);
    }
    #[cfg(not(feature = "defmt"))]
    let _ = change;
}
