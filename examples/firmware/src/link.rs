//! A simulated modem link, seeded and deterministic: it drops packets, answers "busy, try again in
//! N s", and goes dark for a stretch, by time since boot.
//!
//! | from | state |
//! |---|---|
//! | 0 s | fair: 25 % of packets lost (no answer: the attempt times out) |
//! | 20 s | congested: the network answers "busy, retry in 2 s" to 40 % of packets |
//! | 30 s | the operator asks for 45 s of silence: "busy, retry in 45 s", once |
//! | 80 s | dark: no packet gets through |
//! | 105 s | fair again |

use core::cell::Cell;

use embassy_time::{Duration, Instant, Timer};

/// Why an uplink attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkError {
    /// No acknowledgement: the attempt runs until its timeout.
    NoAck,
    /// The network said "busy, try again in this many seconds".
    Busy(u64),
}

/// The link's state and its seeded loss.
pub struct Link {
    state: Cell<u64>,
    silence_asked: Cell<bool>,
    /// Frames put on the air.
    sent: Cell<u32>,
    /// Until when the network asked for silence, in seconds since boot.
    silence_until: Cell<u64>,
    /// Frames put on the air while the network had asked for silence.
    sent_in_silence: Cell<u32>,
}

impl Default for Link {
    fn default() -> Self {
        Self::new()
    }
}

impl Link {
    /// A link with its fixed seed (the emulator has no RNG; the simulation is meant to repeat).
    pub const fn new() -> Self {
        Self {
            state: Cell::new(0x2545_f491_4f6c_dd1d),
            silence_asked: Cell::new(false),
            sent: Cell::new(0),
            silence_until: Cell::new(0),
            sent_in_silence: Cell::new(0),
        }
    }

    /// Frames put on the air so far.
    pub fn sent(&self) -> u32 {
        self.sent.get()
    }

    /// Frames put on the air while the network had asked for silence.
    pub fn sent_in_silence(&self) -> u32 {
        self.sent_in_silence.get()
    }

    fn draw(&self) -> u64 {
        // xorshift64*
        let mut x = self.state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) % 100
    }

    /// Sends one frame: 120 ms on air, then an acknowledgement, a "busy", or nothing at all (the
    /// future never completes: the caller's timeout ends it).
    pub async fn send(&self, _frame: &[u8]) -> Result<(), LinkError> {
        self.sent.set(self.sent.get() + 1);
        if Instant::now().as_secs() < self.silence_until.get() {
            self.sent_in_silence.set(self.sent_in_silence.get() + 1);
        }
        Timer::after(Duration::from_millis(120)).await;
        let at = Instant::now().as_secs();
        let draw = self.draw();
        let outcome = match at {
            0..20 if draw < 25 => Err(LinkError::NoAck),
            20..30 if draw < 40 => Err(LinkError::Busy(2)),
            30..80 if !self.silence_asked.get() => {
                self.silence_asked.set(true);
                self.silence_until.set(at + 45);
                Err(LinkError::Busy(45))
            }
            80..105 => Err(LinkError::NoAck),
            _ if at >= 105 && draw < 25 => Err(LinkError::NoAck),
            _ => Ok(()),
        };
        if outcome == Err(LinkError::NoAck) {
            core::future::pending::<()>().await;
        }
        outcome
    }
}
