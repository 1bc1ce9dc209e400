//! relent-tokio beside backon and tower as a service's release build runs them: tokio without its
//! `test-util` feature (no dev-dependency of this crate brings it), on the real clock. Only the
//! two paths that never sleep run here; the retry path's 100 ms backoff needs the paused clock of
//! relent-tests' `alternatives` bench, which runs all three with the same contenders.
//!
//! Then relent-tokio's `RetryLayer` beside tower's `Retry` with an HTTP policy, over an in-process
//! HTTP service, on the same two paths (see `layers`).
//!
//! Then the contended mode: the same paths with one thread a core (two at least), each on a runtime
//! of its own, all calling one shared dependency (and one shared tower budget) back to back, as the
//! worker threads of a busy service do.
//!
//! Run: `cargo bench -p relent-adapter-bench --bench production` (the paired and contended modes,
//! under a minute); `-- --count PATH/CONTENDER N` runs one contender `N` times for callgrind (see
//! `count`), and `-- --count http/PATH/CONTENDER N` one of the HTTP layers (see `layers::count`).

use relent_adapter_bench::{Adapters, PATHS_ON_THE_REAL_CLOCK, count, layers, paired};

fn main() {
    assert!(
        PATHS_ON_THE_REAL_CLOCK.iter().all(|p| !p.fails_first),
        "a path with a backoff sleep on the real clock"
    );
    let adapters = Adapters::new(runtime());
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--count") {
        let usage = "usage: --count PATH/CONTENDER N, or --count http/PATH/CONTENDER N";
        let what = args.get(at + 1).expect(usage);
        let n = args.get(at + 2).and_then(|n| n.parse().ok()).expect(usage);
        let counted = if what.starts_with("http/") {
            layers::count(&layers::Layers::new(runtime()), &PATHS_ON_THE_REAL_CLOCK, what, n)
        } else {
            count(&adapters, &PATHS_ON_THE_REAL_CLOCK, what, n)
        };
        if let Err(why) = counted {
            eprintln!("{why}");
            std::process::exit(2);
        }
        return;
    }
    // `cargo bench` passes `--bench`; the paired mode is this bench's only mode.
    println!(
        "production build (tokio without test-util, the real clock), paired mode: {} rounds after {} of \
         warm-up, {} calls per contender per round",
        paired::ROUNDS,
        paired::ROUNDS,
        paired::BATCH
    );
    paired::adapters(&adapters, &PATHS_ON_THE_REAL_CLOCK);
    // The HTTP layers, relent's and tower's, over one in-process HTTP service, the same way.
    println!(
        "\nHTTP layers over an in-process service, paired mode as above, one keyed JSON POST an operation"
    );
    layers::compare(&layers::Layers::new(runtime()), &PATHS_ON_THE_REAL_CLOCK);
    // The same paths with as many threads as the machine has cores (two at least), each on its own
    // current-thread runtime, all sharing the first one's dependency and tower's budget.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    println!(
        "\ncontended mode: {cores} threads, {} rounds after {} of warm-up, {} calls per thread per contender \
         per round",
        paired::CONTENDED_ROUNDS,
        paired::CONTENDED_ROUNDS,
        paired::CONTENDED_CALLS
    );
    for path in PATHS_ON_THE_REAL_CLOCK {
        paired::contended(&adapters, cores, runtime, path);
    }
}

/// A current-thread runtime on the real clock.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime")
}
