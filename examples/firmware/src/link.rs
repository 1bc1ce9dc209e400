//! A simulated modem link, seeded and deterministic: it drops packets, answers "busy, try again in
//! N s", and goes dark for a stretch, by real time (which, unlike the tick counter, goes on across a
//! device reset).
//!
//! | from | state |
//! |---|---|
//! | 0 s | fair: 25 % of packets lost (no answer: the attempt times out) |
//! | 20 s | congested: the network answers "busy, retry in 2 s" to 40 % of packets |
//! | 30 s | the operator asks for 45 s of silence: "busy, retry in 45 s", once |
//! | 80 s | dark: no packet gets through |
//! | 105 s | fair again |
//!
//! The network also sends commands, each with the first acknowledgement from its time on: from 20 s
//! "use the quiet profile" (it is congested), from 105 s "back to the normal profile". They are
//! the application's own (a backend's "back off" command is of this kind, as is LoRaWAN's
//! `DutyCycleReq` at the MAC layer); the firmware may ignore them, as the baseline does.

use core::cell::Cell;

use embassy_time::{Duration, Instant, Timer};

/// A frame's time on air, in ms: what every attempt costs against a duty cycle, whether it is
/// acknowledged or not.
pub const AIRTIME_MS: u64 = 120;

/// Why an uplink attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkError {
    /// No acknowledgement: the attempt runs until its timeout.
    NoAck,
    /// The network said "busy, try again in this many seconds".
    Busy(u32),
}

/// A profile the network asks the device to use, in a command that comes with an acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// What the device starts with.
    Normal,
    /// Fewer retries, a circuit that opens sooner: for a congested network.
    Quiet,
}

impl Profile {
    /// The profile's name, as the firmware prints it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Profile::Normal => "normal",
            Profile::Quiet => "quiet",
        }
    }
}

/// The part of the simulated world that outlives a device reset (the network and real time go on
/// while the device sleeps), as plain data the firmware keeps in retained RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct World {
    /// Real time at the device's last boot, in ms.
    pub epoch_ms: u64,
    /// The loss generator's state.
    pub state: u64,
    /// Until when the network asked for silence, in real seconds.
    pub silence_until: u64,
    /// Frames put on the air.
    pub sent: u32,
    /// Frames put on the air while the network had asked for silence.
    pub sent_in_silence: u32,
    /// 1 once the network has asked for silence.
    pub silence_asked: u8,
    /// The commands the network has sent: 0, 1 (quiet) or 2 (quiet, or not, then normal).
    pub commands_sent: u8,
    /// The command sent and not yet read by the firmware: 0 for none, else `commands_sent`'s.
    pub command_unread: u8,
    /// When the last frames went on the air (real ms, a ring), to measure the busiest minute.
    pub recent: [u32; RECENT],
    /// The most airtime in any minute so far, in ms.
    pub busiest_minute_ms: u32,
}

/// Frames remembered to measure the busiest minute: more than any minute holds in this run.
pub const RECENT: usize = 32;

/// The link's state and its seeded loss.
pub struct Link {
    epoch_ms: Cell<u64>,
    state: Cell<u64>,
    silence_asked: Cell<bool>,
    commands_sent: Cell<u8>,
    command_unread: Cell<u8>,
    /// Frames put on the air.
    sent: Cell<u32>,
    /// Until when the network asked for silence, in seconds since boot.
    silence_until: Cell<u64>,
    /// Frames put on the air while the network had asked for silence.
    sent_in_silence: Cell<u32>,
    recent: Cell<[u32; RECENT]>,
    busiest_minute_ms: Cell<u32>,
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
            epoch_ms: Cell::new(0),
            state: Cell::new(0x2545_f491_4f6c_dd1d),
            silence_asked: Cell::new(false),
            commands_sent: Cell::new(0),
            command_unread: Cell::new(0),
            sent: Cell::new(0),
            silence_until: Cell::new(0),
            sent_in_silence: Cell::new(0),
            recent: Cell::new([u32::MAX; RECENT]),
            busiest_minute_ms: Cell::new(0),
        }
    }

    /// The world as it is now, to keep across a reset that lasts `slept_ms` of real time.
    pub fn world_after(&self, slept_ms: u64) -> World {
        World {
            epoch_ms: self.real_ms().saturating_add(slept_ms),
            state: self.state.get(),
            silence_until: self.silence_until.get(),
            sent: self.sent.get(),
            sent_in_silence: self.sent_in_silence.get(),
            silence_asked: u8::from(self.silence_asked.get()),
            commands_sent: self.commands_sent.get(),
            command_unread: self.command_unread.get(),
            recent: self.recent.get(),
            busiest_minute_ms: self.busiest_minute_ms.get(),
        }
    }

    /// The link in a world kept across a reset.
    pub fn in_world(world: World) -> Self {
        Self {
            epoch_ms: Cell::new(world.epoch_ms),
            state: Cell::new(world.state),
            silence_asked: Cell::new(world.silence_asked == 1),
            commands_sent: Cell::new(world.commands_sent),
            command_unread: Cell::new(world.command_unread),
            sent: Cell::new(world.sent),
            silence_until: Cell::new(world.silence_until),
            sent_in_silence: Cell::new(world.sent_in_silence),
            recent: Cell::new(world.recent),
            busiest_minute_ms: Cell::new(world.busiest_minute_ms),
        }
    }

    /// Real time: the tick counter restarts at every boot, the world's clock does not.
    pub fn real_ms(&self) -> u64 {
        self.epoch_ms.get() + Instant::now().as_millis()
    }

    /// Frames put on the air so far.
    pub fn sent(&self) -> u32 {
        self.sent.get()
    }

    /// Frames put on the air while the network had asked for silence.
    pub fn sent_in_silence(&self) -> u32 {
        self.sent_in_silence.get()
    }

    /// The most airtime in any minute so far, in ms: the most frames that went on the air within 60
    /// s of each other, times their 120 ms.
    pub fn busiest_minute_ms(&self) -> u32 {
        self.busiest_minute_ms.get()
    }

    /// Notes a frame going on the air now: the minute ending with it holds every frame that
    /// started less than a minute before it ended.
    fn note_on_air(&self) {
        let start = self.real_ms() as u32;
        let mut recent = self.recent.get();
        recent.rotate_right(1);
        recent[0] = start;
        self.recent.set(recent);
        let end = start.saturating_add(AIRTIME_MS as u32);
        let in_minute = recent.iter().filter(|&&s| s != u32::MAX && s.saturating_add(60_000) > end).count();
        let airtime = in_minute as u32 * AIRTIME_MS as u32;
        self.busiest_minute_ms.set(self.busiest_minute_ms.get().max(airtime));
    }

    /// The profile the network's last acknowledgement asked for, if it asked for one not read yet.
    pub fn command(&self) -> Option<Profile> {
        let unread = self.command_unread.replace(0);
        match unread {
            1 => Some(Profile::Quiet),
            2 => Some(Profile::Normal),
            _ => None,
        }
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
        self.note_on_air();
        if self.real_ms() / 1_000 < self.silence_until.get() {
            self.sent_in_silence.set(self.sent_in_silence.get() + 1);
        }
        Timer::after(Duration::from_millis(AIRTIME_MS)).await;
        let at = self.real_ms() / 1_000;
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
        // A command due and not sent yet comes with this acknowledgement.
        let due = match at {
            105.. => 2,
            20.. => 1,
            _ => 0,
        };
        if outcome.is_ok() && due > self.commands_sent.get() {
            self.commands_sent.set(due);
            self.command_unread.set(due);
        }
        if outcome == Err(LinkError::NoAck) {
            core::future::pending::<()>().await;
        }
        outcome
    }
}
