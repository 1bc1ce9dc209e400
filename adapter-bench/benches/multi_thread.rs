//! relent-tokio beside backon and tower on tokio's multi-threaded runtime, the runtime a service's
//! `#[tokio::main]` builds, in a production build (no `test-util`, the real clock): the contenders'
//! operations in tasks, awaited where a service awaits them rather than each under a `block_on`,
//! all through one dependency and one tower budget (see `paired::on_workers`). On one worker thread,
//! then on one a core (two at least), where the tasks' calls meet at what they share. The paths
//! that never sleep, as in the `production` bench.
//!
//! Run: `cargo bench -p relent-adapter-bench --features multi-thread --bench multi_thread` (about a
//! minute). The feature builds tokio with its multi-threaded runtime, which the `production` bench
//! is built without.

use relent_adapter_bench::{Adapters, PATHS_ON_THE_REAL_CLOCK, paired};

fn main() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    println!(
        "multi-threaded runtime, production build (tokio without test-util, the real clock): {} tasks a \
         worker a round, {} calls a task, {} rounds after {} of warm-up",
        paired::TASKS_PER_WORKER,
        paired::TASK_CALLS,
        paired::WORKER_ROUNDS,
        paired::WORKER_ROUNDS
    );
    for workers in [1, cores] {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_time()
            .build()
            .expect("a multi-threaded runtime");
        let adapters = Adapters::new(runtime);
        for path in PATHS_ON_THE_REAL_CLOCK {
            paired::on_workers(&adapters, workers, path);
        }
    }
}
