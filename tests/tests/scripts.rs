//! The fuzz target's scripts (`fuzz/`, see `relent_fuzz`) on stable, in the workspace's tests: the
//! inputs kept in `fuzz/seeds/`, and many seeded random ones. Each runs every check of
//! `relent_fuzz` after every call into relent-core.
//!
//! libFuzzer (nightly: `cargo +nightly fuzz run operations` in `fuzz/`) steers its inputs toward
//! branches not taken yet, and CI runs it too; these tests need neither nightly nor a C++ compiler.

use rand_core::{RngCore, SeedableRng};
use relent_fuzz::Reached;

#[test]
fn the_kept_seeds_keep_every_promise() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds");
    let mut reached = Reached::default();
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds exists") {
        relent_fuzz::run_counting(&std::fs::read(entry.unwrap().path()).unwrap(), &mut reached);
        seeds += 1;
    }
    eprintln!("{seeds} seeds replayed: {reached:?}");
    // The seeds reach what is worth checking, not only refused configurations. A change to how
    // scripts are decoded changes what each seed does: if this fails after one, make the seeds
    // again (see the `relent_fuzz` crate doc).
    let Reached {
        dispatched,
        retries,
        waits,
        successes,
        spent,
        ignored_reports,
        restored,
        refused_snapshots,
        operator_changes,
        isolated_refusals,
        throttled_refusals,
        adaptive_refusals,
        learnt_percentiles,
        queued,
        shed_refusals,
        dispatched_from_queue,
        alive,
        hedges_dispatched,
        until_arrived_retries,
        multiplied_retries,
        ..
    } = reached;
    for (what, n) in [
        ("attempts dispatched", dispatched),
        ("retries", retries),
        ("waits", waits),
        ("successes", successes),
        ("operations that spent their policy's attempts", spent),
        ("reports of attempts not out", ignored_reports),
        ("snapshots restored", restored),
        ("snapshots refused", refused_snapshots),
        ("changes of the circuit by an operator", operator_changes),
        ("operations refused by an isolated circuit", isolated_refusals),
        ("operations refused by the client throttle", throttled_refusals),
        ("operations refused by a bulkhead's adaptive limit", adaptive_refusals),
        ("reads of a latency log that knew its median", learnt_percentiles),
        ("waits in a bulkhead's queue", queued),
        ("sheddable operations refused by a bulkhead with its reserve free", shed_refusals),
        ("attempts dispatched after a wait in the queue", dispatched_from_queue),
        ("first attempts that went once every wait had passed", alive),
        ("attempts dispatched by hedges", hedges_dispatched),
        ("retries of operations safe until an attempt arrives", until_arrived_retries),
        ("retries under a backoff multiplier other than 2", multiplied_retries),
    ] {
        assert!(n >= 10, "the seeds reach {n} {what}: make them again");
    }
}

#[test]
fn seeded_random_scripts_keep_every_promise() {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0x5eed);
    let mut data = vec![0u8; 2048];
    let mut reached = Reached::default();
    for _ in 0..20_000 {
        let len = (rng.next_u32() % 2048) as usize;
        rng.fill_bytes(&mut data[..len]);
        relent_fuzz::run_counting(&data[..len], &mut reached);
    }
    eprintln!("{reached:?}");
    assert!(
        reached.dispatched > 0 && reached.restored > 0 && reached.alive > 0,
        "random scripts reach nothing: {reached:?}"
    );
}

/// The reconfiguring scripts (`relent_fuzz::run_reconfigure`, the fuzz target `reconfigure`): the
/// inputs kept in `fuzz/seeds-reconfigure/` change configurations under running operations, are
/// refused, and wake operations waiting in a queue both with and without a slot under their own
/// configuration.
#[test]
fn the_kept_reconfiguring_seeds_keep_every_promise() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds-reconfigure");
    let mut reached = relent_fuzz::Reconfigured::default();
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds-reconfigure exists") {
        relent_fuzz::run_reconfigure(&std::fs::read(entry.unwrap().path()).unwrap(), &mut reached);
    }
    eprintln!("{reached:?}");
    let relent_fuzz::Reconfigured {
        changes,
        refused,
        changes_under_running,
        woken_dispatched,
        woken_without_slot,
        alive,
        hedges,
    } = reached;
    for (what, n) in [
        ("changes", changes),
        ("refused changes", refused),
        ("changes under running operations", changes_under_running),
        ("woken operations dispatched", woken_dispatched),
        ("woken operations without a slot of their own", woken_without_slot),
        ("first attempts that went once every wait had passed", alive),
        ("hedges started", hedges),
    ] {
        assert!(n >= 5, "the seeds reach {n} {what}: make them again");
    }
}

/// The same scripts from seeded random bytes.
#[test]
fn seeded_random_reconfiguring_scripts_keep_every_promise() {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0x5eed_c0f1);
    let mut data = vec![0u8; 2048];
    let mut reached = relent_fuzz::Reconfigured::default();
    for _ in 0..20_000 {
        let len = (rng.next_u32() % 2048) as usize;
        rng.fill_bytes(&mut data[..len]);
        relent_fuzz::run_reconfigure(&data[..len], &mut reached);
    }
    eprintln!("{reached:?}");
    assert!(
        reached.changes > 0 && reached.changes_under_running > 0 && reached.alive > 0,
        "random scripts reach nothing: {reached:?}"
    );
}
