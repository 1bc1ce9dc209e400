//! Logging shim (embassy's `fmt.rs` pattern): with the `defmt` feature every core event is one defmt
//! line; without it, logging costs nothing.

use relent_core::{Event, Observer};

use crate::HZ;

/// An observer that logs every event with defmt (feature `defmt`), and otherwise does nothing.
#[derive(Debug, Clone, Copy, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Log;

impl Observer<HZ> for Log {
    #[inline]
    fn on_event(&mut self, event: &Event<HZ>) {
        #[cfg(feature = "defmt")]
        defmt::info!("relent: {}", event);
        #[cfg(not(feature = "defmt"))]
        let _ = event;
    }
}

/// Logs, then hands the event to the caller's observer.
pub(crate) struct Both<'a, O: ?Sized>(pub(crate) &'a mut O);

impl<O: Observer<HZ> + ?Sized> Observer<HZ> for Both<'_, O> {
    #[inline]
    fn on_event(&mut self, event: &Event<HZ>) {
        Log.on_event(event);
        self.0.on_event(event);
    }
}
