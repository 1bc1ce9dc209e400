//! What each input in a directory reaches, one line each: its size, then the operations that spent
//! their policy's attempts, the attempts dispatched after a wait in the bulkhead's queue, the
//! operations the client throttle refused, those a bulkhead refused below its size (its adaptive
//! limit), the attempts hedges dispatched and the retries of operations stated safe until an
//! attempt arrives, then its path. The seeds are made with it (the crate
//! doc): the smallest inputs of a run's corpus that reach each of these are kept beside libFuzzer's
//! merge, which counts edges and not these.
//!
//! `cargo run --release --example reach --no-default-features --features every-protection[,ticks-u32] -- DIR`

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: reach DIR");
        std::process::exit(2);
    };
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut r = relent_fuzz::Reached::default();
        relent_fuzz::run_counting(&data, &mut r);
        println!(
            "{} {} {} {} {} {} {} {}",
            data.len(),
            r.spent,
            r.dispatched_from_queue,
            r.throttled_refusals,
            r.adaptive_refusals,
            r.hedges_dispatched,
            r.until_arrived_retries,
            path.display()
        );
    }
}
