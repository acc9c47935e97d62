//! Simulated power loss (issue 38) over the aborted-transaction index: transactional batches of a
//! few producers, COMMIT and ABORT markers each followed by its index entry (now and then not:
//! the power goes between the two), flushes, periodic checkpoints, rolls, truncation,
//! DeleteRecords, producer snapshots and clean closes over [`SimIo`], with power cut at random
//! points (between operations and, by failed fsyncs or a stopped machine, inside one), then a
//! reopen. After every reopen: recovery returned; the index holds exactly one entry per ABORT
//! marker the log holds from its start on, with the marker's producer, in order (never an entry
//! without its marker, never a marker without its entry); every ABORT marker that a flush after
//! its entry reported synced is still there; and every producer snapshot left lies within the
//! log and reads back whole.
//!
//! A cleaning (the log cleaner's swap carrying the cleaned segment's `.txnindex`) gets a test of
//! its own: the power is cut at steps spread over one cleaning; after the reopen the same ABORT
//! markers are there, each with its entry, and a new cleaning completes and keeps that.
//!
//! CI runs [`CI_SEEDS`] seeds ([`CI_CLEANING_SEEDS`] for cleanings); `SKIFF_POWER_SEEDS=N` runs
//! N of each, `SKIFF_SEED=<seed>` replays one. A failing seed prints itself.

// Test code: a failed unwrap, expect or index is the report.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

#[path = "support/keyed.rs"]
mod keyed;
#[path = "support/temp.rs"]
mod temp;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::txn::{AbortedTxn, EndTxnMarker, MarkerType};
use skiff_protocol::records::v2::BatchHeader;
use skiff_protocol::records::Compression;
use skiff_storage::sim::{self, CutMode, SimIo};
use skiff_storage::{
    Cleaner, CleanupPolicy, DirConfig, Log, LogConfig, LogDir, NoHooks, PersistMode,
};
use temp::temp_dir;

/// Seeds CI runs.
const CI_SEEDS: u64 = 25;
/// Seeds of the cleaning test CI runs (each cuts the power at up to [`CLEANING_CUTS_MAX`]
/// steps of one cleaning; some 4 s each on a loaded 2-core machine).
const CI_CLEANING_SEEDS: u64 = 1;
/// Most cuts per cleaning seed: evenly spread over its file operations.
const CLEANING_CUTS_MAX: u64 = 12;
/// Power cycles per seed.
const CYCLES_MAX: u32 = 5;
/// Operations per cycle, at most.
const OPS_MAX: u32 = 40;
/// Producers writing transactions.
const PRODUCERS: i64 = 3;

fn txn_batch(producer_id: i64, value_bytes: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.producer_id = producer_id;
    builder.producer_epoch = 0;
    builder.base_sequence = 0;
    builder.transactional = true;
    let value = vec![0x5A; value_bytes];
    builder
        .push(&NewRecord {
            offset_delta: 0,
            timestamp: 1_000,
            key: None,
            value: Some(&value),
            headers: &[],
        })
        .unwrap();
    builder.build().unwrap()
}

fn marker(producer_id: i64, marker_type: MarkerType) -> Vec<u8> {
    EndTxnMarker {
        producer_id,
        producer_epoch: 0,
        coordinator_epoch: 0,
        marker_type,
    }
    .encode_batch(1_000)
    .unwrap()
}

/// The ABORT markers the log holds from its start on, as (offset, producer id).
fn abort_markers(log: &Log) -> Vec<(i64, i64)> {
    let mut markers = Vec::new();
    let mut offset = log.log_start_offset().unwrap();
    let end = log.log_end_offset().unwrap();
    while offset < end {
        let slice = log.read(offset, 1 << 20, true).unwrap();
        let bytes = slice.bytes().unwrap().to_vec();
        if bytes.is_empty() {
            break;
        }
        let mut at = 0;
        while at < bytes.len() {
            let header = BatchHeader::parse(&bytes[at..]).unwrap();
            let batch = &bytes[at..at + header.total_bytes()];
            if header.is_control() && header.base_offset >= offset {
                let decoded = EndTxnMarker::decode_batch(batch).unwrap();
                if decoded.marker_type == MarkerType::Abort {
                    markers.push((header.base_offset, header.producer_id));
                }
            }
            offset = offset.max(header.next_offset());
            at += header.total_bytes();
        }
    }
    markers
}

/// What the test knows: the first transactional offset of each producer's open transaction, and
/// the ABORT markers that must survive (entry written, then synced).
#[derive(Debug, Default)]
struct Model {
    open: [Option<i64>; PRODUCERS as usize],
    durable_aborts: Vec<(i64, i64)>,
    /// ABORT markers whose entry was written, not yet known synced.
    indexed: Vec<(i64, i64)>,
}

fn check_recovered(log: &Log, model: &mut Model) {
    let start = log.log_start_offset().unwrap();
    let markers = abort_markers(log);
    let entries: Vec<(i64, i64)> = log
        .aborted_transactions(start, i64::MAX)
        .unwrap()
        .into_iter()
        .map(|entry| (entry.last_offset, entry.producer_id))
        .collect();
    assert_eq!(
        entries, markers,
        "index entries against the log's ABORT markers"
    );
    for durable in &model.durable_aborts {
        if durable.0 >= start {
            assert!(
                markers.contains(durable),
                "synced ABORT marker {durable:?} lost"
            );
        }
    }
    let end = log.log_end_offset().unwrap();
    for offset in log.producer_snapshot_offsets().unwrap() {
        assert!(offset <= end, "snapshot at {offset} past the log end {end}");
    }
    if let Some(snapshot) = log.latest_producer_snapshot().unwrap() {
        assert_eq!(snapshot.bytes, snapshot.offset.to_be_bytes());
    }
    // Transactions open at the crash are forgotten (the partition rebuilds them from the log).
    model.open = Default::default();
    model.durable_aborts.retain(|(offset, _)| *offset >= start);
    model.indexed.clear();
}

/// One operation; returns whether it failed (then the power goes).
fn step(log: &Log, model: &mut Model, rng: &mut ChaCha8Rng, now_ms: i64) -> bool {
    let producer = rng.gen_range(0..PRODUCERS);
    let choice = rng.gen_range(0..100);
    if std::env::var_os("SKIFF_TRACE").is_some() {
        eprintln!(
            "op {choice} producer {producer} end {:?} flushed {:?} durable {:?}",
            log.log_end_offset(),
            log.flushed_offset(),
            model.durable_aborts
        );
    }
    match choice {
        0..=44 => match log.append(&mut txn_batch(producer, rng.gen_range(0..300)), now_ms) {
            Ok(info) => {
                model.open[producer as usize].get_or_insert(info.base_offset);
                false
            }
            Err(_) => true,
        },
        45..=69 => {
            let abort = rng.gen_bool(0.6);
            let kind = if abort {
                MarkerType::Abort
            } else {
                MarkerType::Commit
            };
            let Ok(info) = log.append(&mut marker(producer, kind), now_ms) else {
                return true;
            };
            let first = model.open[producer as usize].take();
            if !abort {
                return false;
            }
            if rng.gen_bool(0.08) {
                // The power goes between the marker and its entry.
                return true;
            }
            let entry = AbortedTxn {
                producer_id: producer,
                first_offset: first.unwrap_or(info.base_offset),
                last_offset: info.base_offset,
                last_stable_offset: first.unwrap_or(info.base_offset),
            };
            if log.append_aborted_txn(entry).is_err() {
                return true;
            }
            model.indexed.push((info.base_offset, producer));
            false
        }
        70..=79 => {
            let synced = log.sync().is_ok();
            if synced {
                model.durable_aborts.append(&mut model.indexed);
            }
            !synced
        }
        80..=84 => {
            let end = log.log_end_offset().unwrap();
            log.write_producer_snapshot(end, &end.to_be_bytes())
                .is_err()
        }
        85..=89 => {
            let end = log.log_end_offset().unwrap();
            let start = log.log_start_offset().unwrap();
            let to = rng.gen_range(start..=end);
            // Every batch holds one offset here, so the cut lands at `to`; a failed truncation
            // may have cut as far before the power went.
            let result = log.truncate_to(to);
            if result.is_err() {
                model.durable_aborts.retain(|(offset, _)| *offset < to);
            }
            match result {
                Ok(new_end) => {
                    model.durable_aborts.retain(|(offset, _)| *offset < new_end);
                    model.indexed.retain(|(offset, _)| *offset < new_end);
                    for open in &mut model.open {
                        if open.is_some_and(|first| first >= new_end) {
                            *open = None;
                        }
                    }
                    false
                }
                Err(_) => true,
            }
        }
        90..=93 => {
            let end = log.log_end_offset().unwrap();
            let start = log.log_start_offset().unwrap();
            log.delete_records_before(rng.gen_range(start..=end))
                .is_err()
        }
        _ => log.roll_if_needed(i64::MAX / 2).is_err(),
    }
}

fn run_seed(seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let temp = temp_dir();
    let root = temp.path().join("data");
    std::fs::create_dir_all(&root).unwrap();
    let sim = Arc::new(SimIo::new(temp.path()).unwrap());
    let config = LogConfig {
        segment_bytes: rng.gen_range(600..3000),
        batch_bytes_max: 512,
        index_interval_bytes: 256,
        persist_mode: PersistMode::SyncData,
        flush_messages_interval: rng.gen_bool(0.2).then_some(1),
        ..LogConfig::default()
    };
    let mut model = Model::default();
    let mut now_ms = 100_000;
    for cycle in 0..rng.gen_range(2..=CYCLES_MAX) {
        let data = LogDir::open_simulated_with(
            &root,
            config.clone(),
            DirConfig::default(),
            Arc::clone(&sim),
        )
        .unwrap_or_else(|error| panic!("reopen (cycle {cycle}) failed: {error}"));
        let log = match data.log("t", 0).unwrap() {
            Some(log) => {
                check_recovered(&log, &mut model);
                log
            }
            None => data.create("t", 0, None).unwrap(),
        };
        match rng.gen_range(0..10) {
            0 | 1 => sim.fail_syncs_after(rng.gen_range(0..8)),
            2 | 3 => sim.crash_after_ops(rng.gen_range(0..300)),
            _ => {}
        }
        let mut failed = false;
        for _ in 0..rng.gen_range(1..=OPS_MAX) {
            now_ms += 10;
            if step(&log, &mut model, &mut rng, now_ms) {
                failed = true;
                break;
            }
            if rng.gen_bool(0.05) && data.checkpoint_recovery_points().is_ok() {
                // Synced up to the recovery point, which never passes an unindexed marker.
                let flushed = log.flushed_offset().unwrap();
                let (synced, pending): (Vec<_>, Vec<_>) = model
                    .indexed
                    .iter()
                    .partition(|(offset, _)| *offset < flushed);
                model.durable_aborts.extend(synced);
                model.indexed = pending;
            }
        }
        drop(log);
        if !failed && rng.gen_bool(0.3) {
            if data.close().is_ok() {
                model.durable_aborts.append(&mut model.indexed);
            }
        } else {
            drop(data); // no clean close: recovery at the next open
        }
        let mode = match rng.gen_range(0..3) {
            0 => CutMode::DropUnsynced,
            1 => CutMode::TearLastWrite,
            _ => CutMode::RandomPages,
        };
        if std::env::var_os("SKIFF_TRACE").is_some() {
            eprintln!("power cut {mode:?}, failed {failed}");
        }
        sim.power_cut(mode, rng.gen()).unwrap();
    }
    let data =
        LogDir::open_simulated_with(&root, config, DirConfig::default(), Arc::clone(&sim)).unwrap();
    if let Some(log) = data.log("t", 0).unwrap() {
        check_recovered(&log, &mut model);
    }
}

#[test]
fn power_loss_keeps_each_abort_marker_with_its_index_entry() {
    for seed in sim::seeds(CI_SEEDS, &[]) {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| run_seed(seed))) {
            eprintln!("power_loss_txn: seed {seed} failed (replay with SKIFF_SEED={seed})");
            std::panic::resume_unwind(panic);
        }
    }
}

/// A compacted log with keyed records and aborted and committed transactions over several
/// segments, every entry written and synced: what the cleaning test cuts the power under.
fn fill_compacted(log: &Log, rng: &mut ChaCha8Rng) {
    for round in 0..12 {
        let producer = rng.gen_range(0..PRODUCERS);
        let first = log
            .append(&mut txn_batch(producer, 40), 1_000)
            .unwrap()
            .base_offset;
        for key in 0..3 {
            let key = format!("k{key}");
            let value = format!("v{round}");
            let records = [(Some(key.as_bytes()), Some(value.as_bytes()))];
            let mut batch = keyed::keyed_batch(&records, 1_000, Compression::None);
            log.append(&mut batch, 1_000).unwrap();
        }
        let abort = rng.gen_bool(0.6);
        let kind = if abort {
            MarkerType::Abort
        } else {
            MarkerType::Commit
        };
        let last = log
            .append(&mut marker(producer, kind), 1_000)
            .unwrap()
            .base_offset;
        if abort {
            let entry = AbortedTxn {
                producer_id: producer,
                first_offset: first,
                last_offset: last,
                last_stable_offset: first,
            };
            log.append_aborted_txn(entry).unwrap();
        }
    }
    log.sync().unwrap();
}

/// One cleaning with the machine stopped after `crash_at` file operations (or not at all), then
/// a cut of the power and a reopen: the index still pairs every ABORT marker with its entry, and
/// a cleaning of the reopened log completes and keeps that.
fn cut_cleaning(seed: u64, crash_at: Option<u64>) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let temp = temp_dir();
    let root = temp.path().join("data");
    std::fs::create_dir_all(&root).unwrap();
    let sim = Arc::new(SimIo::new(temp.path()).unwrap());
    let config = LogConfig {
        segment_bytes: rng.gen_range(400..1200),
        batch_bytes_max: 400,
        index_interval_bytes: 128,
        cleanup_policy: CleanupPolicy::Compact,
        ..LogConfig::default()
    };
    let open = || {
        LogDir::open_simulated_with(
            &root,
            config.clone(),
            DirConfig::default(),
            Arc::clone(&sim),
        )
        .unwrap()
    };
    let data = open();
    let log = data.create("t", 0, None).unwrap();
    fill_compacted(&log, &mut rng);
    let before = abort_markers(&log);
    assert!(log.txn_index_bytes().unwrap() > 0);
    let mut cleaner = Cleaner::new(64 * 1024, 0.9, 4096).unwrap();
    let plan = log.cleaning_plan(i64::MAX, 10_000).unwrap().unwrap();
    let ops_before = sim.ops();
    if let Some(crash_at) = crash_at {
        sim.crash_after_ops(crash_at);
    }
    let cleaned = log.clean(
        &plan,
        &mut cleaner,
        &Default::default(),
        &mut NoHooks,
        10_000,
    );
    let steps = sim.ops() - ops_before;
    if crash_at.is_none() {
        cleaned.unwrap();
        // The current cleaner keeps every control batch, so every entry is carried.
        assert_eq!(abort_markers(&log), before);
        let entries: Vec<(i64, i64)> = log
            .aborted_transactions(0, i64::MAX)
            .unwrap()
            .iter()
            .map(|entry| (entry.last_offset, entry.producer_id))
            .collect();
        assert_eq!(entries, before);
    }
    drop(log);
    drop(data);
    sim.power_cut(CutMode::RandomPages, rng.gen()).unwrap();
    let data = open();
    let log = data.log("t", 0).unwrap().unwrap();
    let mut model = Model::default();
    check_recovered(&log, &mut model);
    assert_eq!(
        abort_markers(&log),
        before,
        "a cleaning lost or added an ABORT marker"
    );
    let plan = log.cleaning_plan(i64::MAX, 20_000).unwrap();
    if let Some(plan) = plan {
        log.clean(
            &plan,
            &mut cleaner,
            &Default::default(),
            &mut NoHooks,
            20_000,
        )
        .unwrap();
    }
    check_recovered(&log, &mut model);
    steps
}

#[test]
fn power_loss_during_a_cleaning_keeps_each_abort_marker_with_its_entry() {
    for seed in sim::seeds(CI_CLEANING_SEEDS, &[]) {
        let steps = cut_cleaning(seed, None);
        for crash_at in (0..steps).step_by((steps / CLEANING_CUTS_MAX).max(1) as usize) {
            if let Err(panic) =
                catch_unwind(AssertUnwindSafe(|| cut_cleaning(seed, Some(crash_at))))
            {
                eprintln!("power_loss_txn cleaning: seed {seed}, crash after {crash_at} ops");
                std::panic::resume_unwind(panic);
            }
        }
    }
}
