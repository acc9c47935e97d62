//! Simulated power loss during a cleaning of a transactional compacted log (issue 38, part 4;
//! `power_loss.rs`'s pattern): a seeded log of committed, aborted, open and non-transactional
//! keyed batches with its markers and aborted-transaction entries (`support/txn_log.rs`), made
//! durable, cleaned up to its last stable offset with power cut at every step of the cleaning
//! (every file operation, or an even sample of them), each cut one of the three ways the
//! simulator cuts. After each reopen: the log's start and end are unchanged, every marker whose
//! transaction still has a record is there, the index holds one entry per ABORT marker, and a
//! read_committed reader sees each key's latest committed value as written; then a new cleaning
//! completes and leaves no aborted record below its end.
//!
//! Seed 0 found the cleaner reading the aborted-transaction index over ranges that skipped the
//! gap a cleaned segment leaves before the next one (a transaction whose first batches had gone
//! was then missed, and its aborted records entered the key map on the next cleaning).
//!
//! CI runs [`CI_SEEDS`] seeds; `SKIFF_POWER_SEEDS=N` runs N, `SKIFF_SEED=<seed>` replays one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

#[path = "support/temp.rs"]
mod temp;
#[path = "support/txn_log.rs"]
mod txn_log;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use skiff_storage::sim::{self, CutMode, SimIo};
use skiff_storage::{Cleaner, CleanupPolicy, Log, LogConfig, LogDir, NoHooks};
use temp::temp_dir;
use txn_log::{check_cleaned, check_partly_cleaned, Writer};

/// Seeds a plain `cargo test` runs.
const CI_SEEDS: u64 = 3;
/// Most cuts per seed: every step of the cleaning if it has fewer, else evenly spread.
const CUTS_MAX: u64 = 10;
/// When the cleanings run: past the horizon a first cleaning gave its markers on some seeds.
const NOW_MS: i64 = 20_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        batch_bytes_max: 1024,
        index_interval_bytes: 128,
        cleanup_policy: CleanupPolicy::Compact,
        delete_retention_ms: 1_000,
        ..LogConfig::default()
    }
}

/// Builds the seed's log (the same every time for a seed), cleaned once first on odd seeds so
/// markers with horizons and emptied groups are there, and durable. Returns the directory, the
/// log, the writer (its truth) and the bound (the last stable offset).
fn setup(seed: u64, root: &std::path::Path, sim: &Arc<SimIo>) -> (LogDir, Arc<Log>, Writer, i64) {
    let data = LogDir::open_simulated(root, config(), Arc::clone(sim)).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let mut writer = Writer::new(seed);
    writer.write(&log, 100);
    if seed % 2 == 1 {
        log.roll_if_needed(i64::MAX / 2).unwrap();
        let bound = writer
            .truth
            .last_stable_offset(log.log_end_offset().unwrap());
        let plan = log.cleaning_plan(bound, 10_000).unwrap().unwrap();
        let mut cleaner = Cleaner::new(64 * 1024, 0.9, 4096).unwrap();
        let producers = writer.truth.last_batches.clone();
        log.clean(&plan, &mut cleaner, &producers, &mut NoHooks, 10_000)
            .unwrap();
        writer.write(&log, 40);
    }
    log.roll_if_needed(i64::MAX / 2).unwrap();
    data.checkpoint_recovery_points().unwrap();
    let bound = writer
        .truth
        .last_stable_offset(log.log_end_offset().unwrap());
    (data, log, writer, bound)
}

fn clean(log: &Log, writer: &Writer, bound: i64) -> skiff_storage::CleanStats {
    let plan = log.cleaning_plan(bound, NOW_MS).unwrap().unwrap();
    let mut cleaner = Cleaner::new(64 * 1024, 0.9, 4096).unwrap();
    let producers = writer.truth.last_batches.clone();
    log.clean(&plan, &mut cleaner, &producers, &mut NoHooks, NOW_MS)
        .unwrap_or_else(|error| panic!("the cleaning failed: {error}"))
}

/// Cuts power after `crash_at` operations of the cleaning, reopens and checks.
fn cut(seed: u64, crash_at: u64) {
    let temp = temp_dir();
    let root = temp.path().join("data");
    std::fs::create_dir_all(&root).unwrap();
    let sim = Arc::new(SimIo::new(temp.path()).unwrap());
    let (data, log, writer, bound) = setup(seed, &root, &sim);
    let (start, end) = (
        log.log_start_offset().unwrap(),
        log.log_end_offset().unwrap(),
    );
    let plan = log.cleaning_plan(bound, NOW_MS).unwrap().unwrap();
    let mut cleaner = Cleaner::new(64 * 1024, 0.9, 4096).unwrap();
    let producers = writer.truth.last_batches.clone();
    sim.crash_after_ops(crash_at);
    let _ = log.clean(&plan, &mut cleaner, &producers, &mut NoHooks, NOW_MS);
    drop(log);
    drop(data);
    let modes = [
        CutMode::DropUnsynced,
        CutMode::TearLastWrite,
        CutMode::RandomPages,
    ];
    sim.power_cut(modes[(crash_at % 3) as usize], seed ^ crash_at)
        .unwrap();
    let data = LogDir::open_simulated(&root, config(), Arc::clone(&sim))
        .unwrap_or_else(|error| panic!("crash after {crash_at} ops: reopen failed: {error}"));
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(
        (
            log.log_start_offset().unwrap(),
            log.log_end_offset().unwrap()
        ),
        (start, end),
        "crash after {crash_at} ops"
    );
    check_partly_cleaned(&log, &writer.truth, bound);
    let stats = clean(&log, &writer, bound);
    check_cleaned(&log, &writer.truth, stats.end_offset, bound);
}

/// One seed: counts the cleaning's steps, then cuts at each (or a sample). Returns the cuts.
fn run_seed(seed: u64) -> u64 {
    let steps = {
        let temp = temp_dir();
        let root = temp.path().join("data");
        std::fs::create_dir_all(&root).unwrap();
        let sim = Arc::new(SimIo::new(temp.path()).unwrap());
        let (_data, log, writer, bound) = setup(seed, &root, &sim);
        let before = sim.ops();
        let stats = clean(&log, &writer, bound);
        check_cleaned(&log, &writer.truth, stats.end_offset, bound);
        sim.ops() - before
    };
    let stride = steps.div_ceil(CUTS_MAX).max(1);
    let mut cuts = 0;
    let mut crash_at = seed % stride;
    while crash_at <= steps {
        cut(seed, crash_at);
        cuts += 1;
        crash_at += stride;
    }
    cuts
}

#[test]
fn power_loss_during_a_transactional_cleaning_keeps_what_read_committed_readers_see() {
    let mut cuts = 0;
    let seeds = sim::seeds(CI_SEEDS, &[]);
    for seed in &seeds {
        match catch_unwind(AssertUnwindSafe(|| run_seed(*seed))) {
            Ok(count) => cuts += count,
            Err(panic) => {
                eprintln!(
                    "power_loss_txn_clean: seed {seed} failed; replay with SKIFF_SEED={seed}"
                );
                std::panic::resume_unwind(panic);
            }
        }
    }
    assert!(cuts > 0);
    eprintln!(
        "power_loss_txn_clean: {} seeds, {cuts} power cuts during cleanings",
        seeds.len()
    );
}
