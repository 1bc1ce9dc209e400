//! The same uplinks over the same link with what firmware often does instead: a hand-written loop
//! of 3 attempts with a fixed 1 s delay, no jitter, budget, breaker or Retry-After. It exists to
//! measure what Relent costs in flash and RAM (`examples/firmware/size.sh`).
#![no_std]
#![no_main]

use cortex_m_semihosting::hprintln;
use embassy_executor::Spawner;
use embassy_time::{Duration, Instant, Timer, with_timeout};
use relent_firmware::link::Link;
use relent_firmware::{GAP_S, UPLINKS};

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    relent_firmware::time::start();
    let link = Link::new();
    let (mut delivered, mut failed) = (0u32, 0u32);
    for n in 0..UPLINKS {
        let frame = n.to_le_bytes();
        let at = Instant::now().as_millis();
        let mut attempts = 0;
        let mut waited = 0u64;
        let mut ok = false;
        while attempts < 3 && !ok {
            attempts += 1;
            ok = matches!(with_timeout(Duration::from_secs(2), link.send(&frame)).await, Ok(Ok(())));
            if !ok {
                Timer::after(Duration::from_secs(1)).await;
                waited += 1_000;
            }
        }
        if ok {
            delivered += 1
        } else {
            failed += 1
        }
        // The same line as the Relent firmware's, so that printing is not counted as Relent's cost.
        hprintln!(
            "uplink {:02} at {:>6} ms: {}{}{} | attempts {} | waited {} ms{}{}",
            n,
            at,
            if ok { "succeeded" } else { "failed" },
            "",
            "",
            attempts,
            waited,
            "",
            ""
        );
        Timer::after(Duration::from_secs(GAP_S)).await;
    }
    relent_firmware::print_memory();
    hprintln!(
        "summary: {} uplinks: delivered {}, failed {} | {} transmissions, {} while asked for silence | busiest minute on air: {} ms",
        UPLINKS,
        delivered,
        failed,
        link.sent(),
        link.sent_in_silence(),
        link.busiest_minute_ms()
    );
    relent_firmware::exit(delivered + failed == UPLINKS);
}
