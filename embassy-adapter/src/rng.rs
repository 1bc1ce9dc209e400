//! `SharedRng`: one random number generator for every operation that draws jitter.
//!
//! Why: `execute` borrows its RNG mutably for the whole operation, as the core draws from it at
//! each retry. Firmware usually has one source (the chip's RNG, or a PRNG seeded from it or from
//! the device's unique id), and more than one operation at a time wants it: tasks with operations
//! of their own, and an operation started inside another's attempt (a modem driver's retries
//! inside an uplink's), whose outer operation holds the borrow. A `RefCell` borrowed for the inner
//! operation would be held across its awaits. `SharedRng` puts the generator behind a blocking
//! mutex, as [`SharedDependency`](crate::SharedDependency) does a dependency's state, and takes it
//! for one draw at a time (each retry's draw is already made under the dependency's lock, so with
//! `CriticalSectionRawMutex` it nests in that critical section for a few instructions). Each
//! operation is handed its own `&SharedRng`, which is an `RngCore`.

use core::cell::RefCell;

use embassy_sync::blocking_mutex::Mutex;
use embassy_sync::blocking_mutex::raw::RawMutex;
use rand_core::RngCore;

/// A random number generator shared by several operations; `&SharedRng` is an `RngCore` that
/// takes the mutex for each draw. `new` is a `const fn`, for a `static` where the generator's own
/// constructor is one too; a PRNG seeded at boot goes in a local of `main`, or a `StaticCell` for
/// tasks to share:
///
/// ```
/// use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
/// use rand_core::{RngCore, SeedableRng};
/// use relent_embassy::SharedRng;
///
/// // Seeded from the chip's RNG or its unique id at boot; never one seed for a whole fleet.
/// let rng: SharedRng<CriticalSectionRawMutex, _> =
///     SharedRng::new(rand_xoshiro::Xoroshiro64Star::from_seed(*b"per-chip"));
///
/// let (mut uplink, mut modem) = (&rng, &rng); // one for each operation running at once
/// let (a, b) = (uplink.next_u32(), modem.next_u32());
/// // Two draws in turn from the one generator: its first two words.
/// let mut alone = rand_xoshiro::Xoroshiro64Star::from_seed(*b"per-chip");
/// assert_eq!((a, b), (alone.next_u32(), alone.next_u32()));
/// ```
pub struct SharedRng<M: RawMutex, R> {
    rng: Mutex<M, RefCell<R>>,
}

impl<M: RawMutex, R> SharedRng<M, R> {
    /// Shares `rng`.
    pub const fn new(rng: R) -> Self {
        Self { rng: Mutex::new(RefCell::new(rng)) }
    }

    fn draw<T>(&self, f: impl FnOnce(&mut R) -> T) -> T {
        self.rng.lock(|rng| f(&mut rng.borrow_mut()))
    }
}

/// Shows nothing of the generator's state, which is the secret its draws come from.
impl<M: RawMutex, R> core::fmt::Debug for SharedRng<M, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SharedRng").finish_non_exhaustive()
    }
}

impl<M: RawMutex, R: RngCore> RngCore for &SharedRng<M, R> {
    fn next_u32(&mut self) -> u32 {
        self.draw(|rng| rng.next_u32())
    }

    fn next_u64(&mut self) -> u64 {
        self.draw(|rng| rng.next_u64())
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.draw(|rng| rng.fill_bytes(dst))
    }
}
