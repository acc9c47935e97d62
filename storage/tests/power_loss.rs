//! Simulated power loss (issue 19): random appends, rolls, retention, DeleteRecords, truncation,
//! flushes and clean closes over [`SimIo`], with power cut at random points (between operations,
//! and inside one: after a failed fsync or a stopped machine), then a reopen. After every reopen:
//! every batch that a durability call reported synced is there; the log is a prefix of what was
//! written, byte for byte; the offset and time indexes agree with the log; recovery returned (a
//! panic fails the seed); the leader-epoch cache names exactly the epochs of the surviving
//! batches (appends stamp a leader epoch that rises now and then); the log start lies between
//! the last one made durable (by a periodic checkpoint, a clean close, a recovery or a reset)
//! and the one before the cut (retention and DeleteRecords move it in memory only, so a cut may
//! undo a move since the last checkpoint, never one before it, and never loses a record at or
//! above the start before the cut); and once an fsync has failed, no append reports success.
//!
//! A follower's operations run beside them, drawn from a stream of their own: some appends are
//! a follower's ([`Log::append_replicated`], the batch at the log end with its epoch kept, and
//! now and then first one at the wrong offset, which must be refused with nothing written);
//! now and then the log is reset ([`Log::truncate_fully_and_start_at`]), after which recovery
//! must find the old log, a prefix of it or the new empty log (never a checkpoint above the
//! data: reopening fails then); and the directory's high-watermark checkpoint is written, which
//! after a cut must read back as the last value acknowledged or the one being written.
//!
//! Between operations, drawn from a stream of their own, the directory's periodic recovery-point
//! checkpoint runs ([`LogDir::checkpoint_recovery_points`]: it syncs the log if it has unsynced
//! data, by `fdatasync` or, on half the seeds, by `syncfs`, and writes `skiff-offset-checkpoint`);
//! once it returns, everything appended before it must survive. A failure of it (the log's sync
//! poisons the log; the checkpoint's own write does not) ends the cycle as a power cut would.
//!
//! Cleanings (the log cleaner, `Log::clean`) get a test of their own: on a compacted log (keyed
//! records, tombstones, keyless records, a first cleaning already done on some seeds, so gaps,
//! merged segments and delete horizons are there), power is cut at every step of one cleaning
//! (every file operation, or a sample of them when there are many); after the reopen the log
//! holds only records it held before, byte for byte at their offsets; every key's latest record
//! is there unless it was a tombstone past its delete horizon (and then no older record of the
//! key came back); nothing at or past the cleaned range and nothing above the log start is
//! lost; the indexes agree; and a new cleaning completes and keeps all of that.
//!
//! CI runs [`CI_SEEDS`] seeds ([`CI_CLEANING_SEEDS`] for cleanings); `SKIFF_POWER_SEEDS=N` runs N
//! of each, `SKIFF_SEED=<seed>` replays one. A failing seed prints itself.

// Test code: a failed unwrap, expect or index is the report. The workspace's lint wall is for
// library code; clippy.toml exempts #[test] functions but not the helpers beside them.
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
#[path = "support/batch.rs"]
mod support;
#[path = "support/temp.rs"]
mod temp;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_protocol::records::v2::{self, BatchHeader};
use skiff_storage::sim::{self, CutMode, SimIo};
use skiff_storage::{DirConfig, Error, HighWatermark, Log, LogConfig, LogDir, PersistMode};
use support::{batch_with, record_times};
use temp::temp_dir;

/// Seeds a plain `cargo test` runs.
const CI_SEEDS: u64 = 300;
/// Seeds of the cleaning test CI runs (each cuts at up to [`CLEANING_CUTS_MAX`] steps).
const CI_CLEANING_SEEDS: u64 = 6;
/// Most cuts per cleaning seed: every step of the cleaning if it has fewer, else evenly spread.
const CLEANING_CUTS_MAX: u64 = 30;
/// Seeds that found bugs, run on every `cargo test` whatever the seed count: 1 (a time lookup
/// answered from a batch below the log start), 12 (`flushed: true` under `PersistMode::Buffer`),
/// 390 (a log start lowered by recovery was not checkpointed, and came back after the next cut),
/// 2509 (a truncation below the log start lowered the checkpointed start before the cut, and a
/// cut in between left the whole log under that start with the leader-epoch cache still moved
/// to the old one: the first batches had no epoch entry).
const REGRESSION_SEEDS: [u64; 4] = [1, 12, 390, 2509];
/// Power cycles (open, operations, cut) per seed.
const CYCLES_MAX: u32 = 6;
/// Operations per cycle, at most.
const OPS_MAX: u32 = 40;

/// One batch as written, with its assigned offsets.
#[derive(Debug, Clone)]
struct Written {
    base_offset: i64,
    next_offset: i64,
    max_timestamp_ms: i64,
    bytes: Vec<u8>,
}

/// What the test knows the log must be.
#[derive(Debug, Default)]
struct Model {
    /// Every batch written, in offset order (after truncations, only those kept).
    batches: Vec<Written>,
    /// Every offset below this was reported synced.
    durable_end: i64,
    /// The log start offset last made durable (by a periodic checkpoint, a clean close, a
    /// recovery or a reset); recovery may not go below it. A start moved since (retention,
    /// DeleteRecords) lives in memory until the next checkpoint, and a cut may undo it.
    start_floor: i64,
    /// The greatest log start offset set since the last recovery (acknowledged or attempted):
    /// the start before the cut, as starts only fall by a truncation to below them.
    start_ceiling: i64,
    /// Where the log ends while it holds no batch: 0, or where a reset started it.
    base: i64,
    /// The offset of a reset that failed part way (recovery may find the log empty there) and
    /// the log start before it (or a prefix of the old log, which starts no later).
    reset_pending: Option<(i64, i64)>,
    /// The high watermark last acknowledged by `write_high_watermarks`.
    high_watermark: Option<i64>,
    /// One whose write failed: after a cut, it may be there instead.
    high_watermark_pending: Option<i64>,
}

impl Model {
    fn end(&self) -> i64 {
        self.batches
            .last()
            .map_or(self.base, |batch| batch.next_offset)
    }

    /// The first offset the model holds (the log's first segment starts at or after it).
    fn first(&self) -> i64 {
        self.batches
            .first()
            .map_or(self.base, |batch| batch.base_offset)
    }

    /// The log is empty at `offset` (a reset, or recovery left nothing).
    fn reset(&mut self, offset: i64) {
        self.batches.clear();
        self.base = offset;
        self.durable_end = offset;
        self.start_floor = offset;
        self.start_ceiling = self.start_ceiling.max(offset);
    }

    fn holding(&self, offset: i64) -> Option<&Written> {
        self.batches
            .iter()
            .find(|batch| batch.base_offset <= offset && offset < batch.next_offset)
    }

    /// The base offset of the batch that truncation to `offset` would keep as the new end.
    fn truncation_end(&self, offset: i64) -> i64 {
        self.holding(offset)
            .map_or(self.end().min(offset), |batch| batch.base_offset)
    }

    fn truncate(&mut self, end: i64) {
        self.batches.retain(|batch| batch.base_offset < end);
        if self.batches.is_empty() {
            self.base = self.base.min(end);
        }
        assert_eq!(self.end(), end, "truncation ends at a batch boundary");
    }
}

fn random_config(rng: &mut ChaCha8Rng) -> LogConfig {
    let persist_mode = match rng.gen_range(0..6) {
        0 => PersistMode::Buffer,
        1 | 2 => PersistMode::SyncAll,
        _ => PersistMode::SyncData,
    };
    LogConfig {
        segment_bytes: rng.gen_range(3_500..12_000),
        segment_ms: rng.gen_range(100..2_000),
        retention_bytes: rng.gen_bool(0.5).then(|| rng.gen_range(4_000..40_000)),
        retention_ms: Some(rng.gen_range(500..5_000)),
        index_interval_bytes: rng.gen_range(1..1_024),
        index_bytes_max: rng.gen_range(8..64) * 24,
        batch_bytes_max: 3_500,
        flush_messages_interval: match rng.gen_range(0..4) {
            0 => Some(1),
            1 => Some(rng.gen_range(2..20)),
            _ => None,
        },
        flush_ms: rng.gen_bool(0.2).then(|| rng.gen_range(10..500)),
        persist_mode,
        ..LogConfig::default()
    }
}

/// Checks the reopened log against the model, then makes the model what survived.
fn check_recovered(log: &Log, model: &mut Model, rng: &mut ChaCha8Rng) {
    let start = log.log_start_offset().unwrap();
    let end = log.log_end_offset().unwrap();
    if tracing() {
        eprintln!(
            "recovered [{start}, {end}), epochs {:?}",
            log.epoch_entries().unwrap()
        );
    }
    if let Some((offset, old_start)) = model.reset_pending.take() {
        // A reset stopped part way: the new empty log, or (checked below) a prefix of the old.
        if (start, end) == (offset, offset) {
            count(&RESETS_RECOVERED_NEW);
            model.reset(offset);
        } else {
            assert!(
                start <= old_start,
                "a reset cut short left the log at [{start}, {end}), not a prefix of the old \
                 one (which started at {old_start})"
            );
        }
    }
    if start < model.start_ceiling {
        count(&STARTS_UNDONE);
    }
    // A log that lost unsynced batches up to past its start is empty at its (lower) end.
    assert!(
        start >= model.start_floor.min(end),
        "log start {start} below the acknowledged {}",
        model.start_floor
    );
    assert!(
        start <= model.start_ceiling.max(0),
        "log start {start} above any start set ({})",
        model.start_ceiling
    );
    assert!(
        end >= model.durable_end || start >= model.durable_end,
        "log ends at {end} but offsets below {} were reported synced",
        model.durable_end
    );
    assert!(end <= model.end(), "log ends at {end}, past all written");
    assert!(
        end == start || model.batches.iter().any(|batch| batch.next_offset == end),
        "log end {end} is not a batch boundary of what was written"
    );
    // Walk the log batch by batch through the offset index (read) and compare bytes.
    let mut offset = start;
    while offset < end {
        let want = model
            .holding(offset)
            .unwrap_or_else(|| panic!("offset {offset} was never written"))
            .clone();
        let probe = rng.gen_range(offset.max(want.base_offset)..want.next_offset);
        for at in [offset, probe] {
            let slice = log.read(at, 0, true).unwrap();
            let got = slice.bytes().unwrap();
            assert_eq!(
                &got[..],
                &want.bytes[..],
                "batch holding offset {at} differs from what was written"
            );
        }
        offset = want.next_offset;
    }
    assert!(log.read(end, 1, true).unwrap().is_empty());
    // Time lookups against a linear scan of the surviving batches.
    let surviving: Vec<&Written> = model
        .batches
        .iter()
        .filter(|batch| batch.next_offset > start && batch.next_offset <= end)
        .collect();
    let mut targets: Vec<i64> = surviving.iter().map(|b| b.max_timestamp_ms).collect();
    targets.extend([-1, 0, i64::MAX]);
    for _ in 0..4 {
        targets.push(rng.gen_range(0..200_000));
    }
    for target in targets {
        // The first record at or after the log start with a timestamp at or after the target.
        let want = surviving
            .iter()
            .flat_map(|batch| record_times(&batch.bytes))
            .find(|(offset, timestamp)| *offset >= start && *timestamp >= target);
        let got = log
            .offset_for_timestamp(target)
            .unwrap()
            .map(|found| (found.offset, found.timestamp_ms));
        assert_eq!(got, want, "offset for timestamp {target}");
    }
    log.verify_indexes().unwrap();
    // The leader-epoch cache, against the epochs the batches up to the end carry, cut at the
    // log start as Kafka's truncateFromStart does: the epoch covering the start is kept, moved to
    // start there.
    let mut want_epochs: Vec<(i32, i64)> = Vec::new();
    for batch in model
        .batches
        .iter()
        .filter(|batch| batch.next_offset <= end)
    {
        let epoch = BatchHeader::parse(&batch.bytes)
            .unwrap()
            .partition_leader_epoch;
        if want_epochs.last().is_none_or(|(last, _)| *last != epoch) {
            want_epochs.push((epoch, batch.base_offset));
        }
    }
    if let Some(covering) = want_epochs.iter().rposition(|(_, first)| *first <= start) {
        want_epochs.drain(..covering);
        want_epochs[0].1 = start;
    }
    // And at the end, as recovery trims (an entry starting at the end names no batch).
    want_epochs.retain(|(_, first)| *first < end);
    let got_epochs: Vec<(i32, i64)> = log
        .epoch_entries()
        .unwrap()
        .iter()
        .map(|entry| (entry.epoch, entry.start_offset))
        .collect();
    assert_eq!(got_epochs, want_epochs, "leader-epoch cache after recovery");
    if start == end {
        // Empty, possibly at a log start inside a batch (a reset cut short): appends go on there.
        model.reset(end);
    } else {
        model.truncate(end);
    }
    model.durable_end = end;
    model.start_floor = start;
    model.start_ceiling = start;
}

/// The directory's high-watermark checkpoint holds what was acknowledged, or the value whose
/// write failed; then the model takes what it holds.
fn check_high_watermark(data: &LogDir, model: &mut Model) {
    let read = data
        .read_high_watermarks()
        .unwrap_or_else(|error| panic!("high-watermark checkpoint unreadable: {error}"));
    let got = match read.as_slice() {
        [] => None,
        [HighWatermark {
            topic,
            partition: 0,
            offset,
        }] if topic == "t" => Some(*offset),
        other => panic!("high-watermark checkpoint holds {other:?}"),
    };
    let pending = model.high_watermark_pending.take();
    assert!(
        got == model.high_watermark || (got.is_some() && got == pending),
        "high watermark {got:?}, but {:?} was acknowledged (and {pending:?} written)",
        model.high_watermark
    );
    model.high_watermark = got;
}

/// After a failure, the log must refuse every append.
fn assert_refuses_appends(log: &Log, now_ms: i64) {
    for _ in 0..3 {
        let result = log.append(&mut batch_with(0, 1, 10, now_ms, 1), now_ms);
        assert!(
            result.is_err(),
            "append succeeded after a failure: {result:?}"
        );
    }
}

/// Operations that failed under an injected fault (each then checked for poisoning).
static FAILED_OPS: AtomicU64 = AtomicU64::new(0);
/// Follower appends that succeeded.
static REPLICATED_APPENDS: AtomicU64 = AtomicU64::new(0);
/// Resets that succeeded, and those that failed part way.
static RESETS: AtomicU64 = AtomicU64::new(0);
static RESETS_FAILED: AtomicU64 = AtomicU64::new(0);
/// Resets cut short after which recovery found the new empty log (the others: a prefix).
static RESETS_RECOVERED_NEW: AtomicU64 = AtomicU64::new(0);
/// High-watermark checkpoints written, and those whose write failed.
static HIGH_WATERMARK_WRITES: AtomicU64 = AtomicU64::new(0);
static HIGH_WATERMARK_FAILED: AtomicU64 = AtomicU64::new(0);
/// Periodic recovery-point checkpoints that returned, and those that failed.
static CHECKPOINTS: AtomicU64 = AtomicU64::new(0);
static CHECKPOINTS_FAILED: AtomicU64 = AtomicU64::new(0);
/// Recoveries that found the log start below the one before the cut (a retention or
/// DeleteRecords since the last checkpoint undone, as Kafka allows).
static STARTS_UNDONE: AtomicU64 = AtomicU64::new(0);

fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Whether to print every step (`SKIFF_POWER_TRACE=1`), for debugging a failing seed.
fn tracing() -> bool {
    std::env::var_os("SKIFF_POWER_TRACE").is_some()
}

macro_rules! trace {
    ($($arg:tt)*) => {
        if tracing() {
            eprintln!($($arg)*);
        }
    };
}

fn run_seed(seed: u64) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let temp = temp_dir();
    let root = temp.path().join("data");
    std::fs::create_dir_all(&root).unwrap();
    let sim = Arc::new(SimIo::new(temp.path()).unwrap());
    let config = random_config(&mut rng);
    let mut model = Model::default();
    let mut now_ms: i64 = 100_000;
    let mut cuts = 0;
    // Its own stream, so the seeds above replay the operations they were found with.
    let mut epoch_rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5EED_E90C);
    let mut leader_epoch = 0i32;
    // The follower's operations draw from a third stream, so the seeds above replay their
    // operations up to the first follower step (the first change of the log they make).
    let mut follower_rng = ChaCha8Rng::seed_from_u64(seed ^ 0xF011_0BE5);
    let mut high_watermark_next = 0i64;
    // The periodic checkpoints draw from a fourth stream, so the seeds above replay their
    // operations up to the first checkpoint.
    let mut checkpoint_rng = ChaCha8Rng::seed_from_u64(seed ^ 0xC4EC_4901);
    let dir_config = DirConfig {
        // 0: every checkpoint and close syncs by `syncfs`, as with thousands of dirty logs.
        sync_each_dirty_logs_max: if checkpoint_rng.gen_bool(0.5) { 0 } else { 512 },
        ..DirConfig::default()
    };
    for cycle in 0..rng.gen_range(2..=CYCLES_MAX) {
        let data = LogDir::open_simulated_with(
            &root,
            config.clone(),
            dir_config.clone(),
            Arc::clone(&sim),
        )
        .unwrap_or_else(|error| panic!("reopen (cycle {cycle}) failed: {error}"));
        check_high_watermark(&data, &mut model);
        let log = match data.log("t", 0).unwrap() {
            Some(log) => {
                check_recovered(&log, &mut model, &mut rng);
                log
            }
            None => {
                assert_eq!(model.durable_end, 0, "the log vanished");
                model = Model::default();
                data.create("t", 0, None).unwrap()
            }
        };
        trace!("cycle {cycle}: config {config:?}");
        match rng.gen_range(0..10) {
            0 | 1 => sim.fail_syncs_after(rng.gen_range(0..6)),
            2 | 3 => sim.crash_after_ops(rng.gen_range(0..300)),
            _ => {}
        }
        let mut closed = false;
        // Set when a high-watermark write failed: the log itself saw no failure.
        let mut high_watermark_failed = false;
        // Set when a periodic checkpoint failed without poisoning the log (its own write).
        let mut checkpoint_failed = false;
        for _ in 0..rng.gen_range(1..=OPS_MAX) {
            now_ms += rng.gen_range(0..60);
            let end = model.end();
            let choice = rng.gen_range(0..100);
            let failed_syncs_before = sim.failed_syncs();
            trace!("op {choice} at end {end}, durable {}", model.durable_end);
            let failed = match choice {
                0..=59 => {
                    let records = rng.gen_range(1..=4);
                    let timestamp = now_ms - rng.gen_range(0..30);
                    let fill = rng.gen();
                    let mut bytes = batch_with(0, records, rng.gen_range(0..700), timestamp, fill);
                    if epoch_rng.gen_bool(0.15) {
                        leader_epoch += epoch_rng.gen_range(1..3);
                    }
                    v2::set_partition_leader_epoch(&mut bytes, leader_epoch).unwrap();
                    let appended = if follower_rng.gen_bool(0.3) {
                        // A follower's copy of the leader's batch: at the log end, epoch kept.
                        // A batch behind the end is refused; one past it is a compacted
                        // leader's gap, which a follower takes (tests/compaction.rs), so that
                        // draw tries nothing here.
                        let behind =
                            follower_rng.gen_bool(0.2) && end > 0 && follower_rng.gen_bool(0.5);
                        if behind {
                            let wrong = end - 1;
                            let misplaced = with_base(bytes.clone(), wrong);
                            let size_bytes = log.size_bytes().unwrap();
                            let refused = log.append_replicated(&misplaced, now_ms);
                            assert!(
                                matches!(
                                    refused,
                                    Err(Error::UnexpectedAppendOffset { expected, found })
                                        if expected == end && found == wrong
                                ),
                                "a batch at {wrong} appended at {end}: {refused:?}"
                            );
                            assert_eq!(log.log_end_offset().unwrap(), end);
                            assert_eq!(log.size_bytes().unwrap(), size_bytes);
                        }
                        bytes = with_base(bytes, end);
                        let appended = log.append_replicated(&bytes, now_ms);
                        if appended.is_ok() {
                            count(&REPLICATED_APPENDS);
                        }
                        appended
                    } else {
                        log.append_with_epoch(&mut bytes, leader_epoch, now_ms)
                    };
                    match appended {
                        Ok(info) => {
                            assert_eq!(info.base_offset, end);
                            let header = BatchHeader::parse(&bytes).unwrap();
                            model.batches.push(Written {
                                base_offset: info.base_offset,
                                next_offset: info.last_offset + 1,
                                max_timestamp_ms: header.max_timestamp,
                                bytes: bytes.clone(),
                            });
                            if info.flushed {
                                model.durable_end = info.last_offset + 1;
                            }
                            false
                        }
                        Err(_) => {
                            // A failed append may have reached the disk before what failed
                            // (say, the checkpoint after its fsync): it may survive, with the
                            // offsets it was to get, but nothing promises it.
                            let header = BatchHeader::parse(&bytes).unwrap();
                            model.batches.push(Written {
                                base_offset: end,
                                next_offset: end + i64::from(records),
                                max_timestamp_ms: header.max_timestamp,
                                bytes: with_base(bytes.clone(), end),
                            });
                            true
                        }
                    }
                }
                60..=71 => match log.flush() {
                    Ok(()) => {
                        if config.persist_mode != PersistMode::Buffer {
                            model.durable_end = end;
                        }
                        false
                    }
                    Err(_) => true,
                },
                72..=79 => log.roll_if_needed(now_ms).is_err(),
                80..=86 => log.enforce_retention(now_ms).is_err(),
                87..=90 => {
                    let start = log.log_start_offset().unwrap();
                    let offset = rng.gen_range(start..=end);
                    trace!("delete_records_before({offset})");
                    log.delete_records_before(offset).is_err()
                }
                91..=96 => {
                    let start = log.log_start_offset().unwrap();
                    let offset = rng.gen_range(start..=end);
                    let new_end = model.truncation_end(offset);
                    trace!("truncate_to({offset}) -> {new_end}, start {start}");
                    match log.truncate_to(offset) {
                        Ok(got) => {
                            assert_eq!(got, new_end, "truncate_to({offset})");
                            model.truncate(new_end);
                            model.durable_end = model.durable_end.min(new_end);
                            model.start_floor = model.start_floor.min(new_end);
                            false
                        }
                        Err(_) => {
                            // Done or not: either way nothing at or past `new_end` is promised.
                            model.durable_end = model.durable_end.min(new_end);
                            model.start_floor = model.start_floor.min(new_end);
                            true
                        }
                    }
                }
                _ => {
                    closed = true;
                    break;
                }
            };
            let failed = failed
                || follower_step(
                    &mut follower_rng,
                    &data,
                    &log,
                    &mut model,
                    &mut high_watermark_next,
                    &mut high_watermark_failed,
                );
            let failed = failed
                || (checkpoint_rng.gen_bool(0.12) && {
                    let end = model.end();
                    trace!("checkpoint_recovery_points at end {end}");
                    match data.checkpoint_recovery_points() {
                        Ok(()) => {
                            count(&CHECKPOINTS);
                            model.durable_end = end;
                            model.start_floor = log.log_start_offset().unwrap();
                            false
                        }
                        Err(_) => {
                            count(&CHECKPOINTS_FAILED);
                            // The log's sync failed (it is poisoned: handled as any failed
                            // operation), or the checkpoint's own write (the log is fine: stop
                            // here, as after a failed high-watermark write).
                            checkpoint_failed = !log.is_poisoned();
                            log.is_poisoned()
                        }
                    }
                });
            model.start_ceiling = model.start_ceiling.max(log.log_start_offset().unwrap());
            if failed {
                FAILED_OPS.fetch_add(1, Ordering::Relaxed);
                assert!(
                    sim.has_failed(),
                    "an operation failed with no fault injected (seed {seed})"
                );
                if sim.failed_syncs() > failed_syncs_before {
                    // A failed fsync (this operation saw it) poisons the log.
                    assert!(log.is_poisoned(), "a failed fsync did not poison the log");
                }
                // Poisoned, or the machine stopped: nothing more succeeds.
                assert_refuses_appends(&log, now_ms);
                break;
            }
            let flushed = log.flushed_offset().unwrap();
            model.durable_end = model.durable_end.max(flushed);
            if high_watermark_failed || checkpoint_failed {
                // The directory's disk failed under the checkpoint (after the operation, which
                // the model above took in): stop here, cut the power.
                break;
            }
        }
        if sim.failed_syncs() > 0
            && !log.is_poisoned()
            && sim.has_failed()
            && !high_watermark_failed
            && !checkpoint_failed
        {
            assert_refuses_appends(&log, now_ms);
        }
        let start = log.log_start_offset().unwrap();
        drop(log);
        if closed {
            let end = model.end();
            if data.close().is_ok() {
                model.durable_end = end;
                model.start_floor = start;
            }
        } else {
            drop(data);
        }
        let mode = match rng.gen_range(0..3) {
            0 => CutMode::DropUnsynced,
            1 => CutMode::TearLastWrite,
            _ => CutMode::RandomPages,
        };
        trace!("power cut {mode:?} (closed {closed})");
        sim.power_cut(mode, rng.gen()).unwrap();
        cuts += 1;
    }
    // The last cut's recovery.
    let data =
        LogDir::open_simulated_with(&root, config.clone(), dir_config, Arc::clone(&sim)).unwrap();
    check_high_watermark(&data, &mut model);
    if let Some(log) = data.log("t", 0).unwrap() {
        check_recovered(&log, &mut model, &mut rng);
    } else {
        assert_eq!(model.durable_end, 0, "the log vanished");
    }
    cuts
}

/// Now and then, after an operation, a follower's step: reset the log (Kafka's
/// `truncateFullyAndStartAt`, to an offset past its end or inside it) or checkpoint a high
/// watermark. Returns whether the log's operation failed (as the operations above do); a failed
/// high-watermark write sets `high_watermark_failed` instead.
fn follower_step(
    rng: &mut ChaCha8Rng,
    data: &LogDir,
    log: &Log,
    model: &mut Model,
    high_watermark_next: &mut i64,
    high_watermark_failed: &mut bool,
) -> bool {
    let end = model.end();
    match rng.gen_range(0..100) {
        0..=3 => {
            let offset = if rng.gen_bool(0.7) {
                end + rng.gen_range(0..300)
            } else {
                rng.gen_range(0..=end)
            };
            trace!("truncate_fully_and_start_at({offset}) at end {end}");
            model.start_ceiling = model.start_ceiling.max(offset);
            let old_start = log.log_start_offset().unwrap();
            match log.truncate_fully_and_start_at(offset) {
                Ok(()) => {
                    assert_eq!(log.log_start_offset().unwrap(), offset);
                    assert_eq!(log.log_end_offset().unwrap(), offset);
                    assert_eq!(log.flushed_offset().unwrap(), offset);
                    assert!(log.epoch_entries().unwrap().is_empty());
                    count(&RESETS);
                    model.reset(offset);
                    false
                }
                Err(_) => {
                    // Any prefix of the old log may be what recovery finds, or the new log.
                    count(&RESETS_FAILED);
                    model.reset_pending = Some((offset, old_start));
                    model.durable_end = model.durable_end.min(model.first());
                    true
                }
            }
        }
        4..=9 => {
            *high_watermark_next += rng.gen_range(1..100);
            let offset = *high_watermark_next;
            let entry = HighWatermark {
                topic: "t".to_owned(),
                partition: 0,
                offset,
            };
            match data.write_high_watermarks(&[entry]) {
                Ok(()) => {
                    count(&HIGH_WATERMARK_WRITES);
                    model.high_watermark = Some(offset);
                    model.high_watermark_pending = None;
                }
                Err(_) => {
                    count(&HIGH_WATERMARK_FAILED);
                    model.high_watermark_pending = Some(offset);
                    *high_watermark_failed = true;
                }
            }
            false
        }
        _ => false,
    }
}

#[test]
fn power_loss_keeps_synced_batches_and_a_valid_prefix() {
    let mut cuts = 0;
    let seeds = sim::seeds(CI_SEEDS, &REGRESSION_SEEDS);
    for seed in &seeds {
        let result = catch_unwind(AssertUnwindSafe(|| run_seed(*seed)));
        match result {
            Ok(count) => cuts += count,
            Err(panic) => {
                eprintln!("power_loss: seed {seed} failed; replay with SKIFF_SEED={seed}");
                std::panic::resume_unwind(panic);
            }
        }
    }
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    eprintln!(
        "power_loss: {} seeds, {cuts} power cuts, {} operations failed under injected faults; \
         {} follower appends, {} resets ({} failed part way, {} of those recovered as the new \
         log), {} high-watermark checkpoints ({} failed), {} recovery-point checkpoints ({} \
         failed), {} recoveries below the start before the cut",
        seeds.len(),
        load(&FAILED_OPS),
        load(&REPLICATED_APPENDS),
        load(&RESETS),
        load(&RESETS_FAILED),
        load(&RESETS_RECOVERED_NEW),
        load(&HIGH_WATERMARK_WRITES),
        load(&HIGH_WATERMARK_FAILED),
        load(&CHECKPOINTS),
        load(&CHECKPOINTS_FAILED),
        load(&STARTS_UNDONE),
    );
}

/// `bytes` with the base offset the log would have given it.
fn with_base(mut bytes: Vec<u8>, base_offset: i64) -> Vec<u8> {
    v2::set_base_offset(&mut bytes, base_offset).unwrap();
    bytes
}

/// The simulation itself: each kind of cut and failure does what the module docs say, over the
/// engine's real operations (a checkpoint's atomic rename, appends and their flush).
#[test]
fn sim_cuts_and_failures_do_what_they_say() {
    let config = LogConfig {
        persist_mode: PersistMode::SyncData,
        ..LogConfig::default()
    };
    let append = |log: &Log, count: usize| {
        for _ in 0..count {
            log.append(&mut batch_with(0, 1, 2_000, 1_000, 7), 1_000)
                .unwrap();
        }
    };
    let reopen = |sim: &Arc<SimIo>, root: &std::path::Path| {
        let data = LogDir::open_simulated(root, config.clone(), Arc::clone(sim)).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        (data, log)
    };
    let temp = temp_dir();
    let root = temp.path().join("data");
    std::fs::create_dir_all(&root).unwrap();
    let sim = Arc::new(SimIo::new(temp.path()).unwrap());
    {
        let data = LogDir::open_simulated(&root, config.clone(), Arc::clone(&sim)).unwrap();
        let log = data.create("t", 0, None).unwrap();
        append(&log, 2);
        log.flush().unwrap();
        append(&log, 3);
    }
    // Nothing unsynced survives: the two flushed batches do, the three after them do not.
    sim.power_cut(CutMode::DropUnsynced, 1).unwrap();
    let (data, log) = reopen(&sim, &root);
    assert_eq!(log.log_end_offset().unwrap(), 2);
    append(&log, 1);
    drop((data, log));
    // Tearing: the unsynced append (one ~2 KiB write) is cut at a sector boundary, so it is
    // never whole (the synced part stays).
    for seed in 0..8 {
        sim.power_cut(CutMode::TearLastWrite, seed).unwrap();
        let (data, log) = reopen(&sim, &root);
        assert_eq!(log.log_end_offset().unwrap(), 2, "seed {seed}");
        let segment = root.join("t-0/00000000000000000000.log");
        assert_eq!(
            std::fs::metadata(&segment).unwrap().len(),
            log.size_bytes().unwrap()
        );
        append(&log, 1);
        drop((data, log));
    }
    // A failed fsync poisons the log, and what it did not sync is gone after the cut.
    let (data, log) = reopen(&sim, &root);
    sim.fail_syncs_after(0);
    append(&log, 1);
    assert!(log.flush().is_err());
    assert!(log.is_poisoned());
    assert!(log.append(&mut batch_with(0, 1, 1, 1, 1), 1).is_err());
    assert_eq!(sim.failed_syncs(), 1);
    drop((data, log));
    sim.power_cut(CutMode::DropUnsynced, 2).unwrap();
    let (data, log) = reopen(&sim, &root);
    assert_eq!(log.log_end_offset().unwrap(), 2);
    drop((data, log));
    // A rename without a directory fsync is lost: a file renamed under the root by hand (the
    // engine always fsyncs the directory) comes back under its old name.
    let before = temp.path().join("before");
    let after = temp.path().join("after");
    std::fs::write(&before, b"synced").unwrap();
    let sim = SimIo::new(temp.path()).unwrap();
    std::fs::rename(&before, &after).unwrap();
    sim.power_cut(CutMode::DropUnsynced, 3).unwrap();
    assert_eq!(std::fs::read(&before).unwrap(), b"synced");
    assert!(!after.exists());
}

/// A DeleteRecords that deletes several segments at once, stopped after each of its file
/// operations and then cut: the log reopens with a prefix of the deletions kept (never a hole
/// among the segments, which recovery would read as flushed data lost), every record from the
/// new start on, and a start between the checkpointed one and the new one. One that returned
/// has made its deletions durable but not its start (the periodic checkpoint writes that): the
/// log then starts at the first kept segment, below the start it answered. After a
/// checkpoint, the start survives the cut.
#[test]
fn a_cut_during_a_multi_segment_deletion_keeps_a_prefix_of_it() {
    let config = LogConfig {
        segment_bytes: 4_096,
        batch_bytes_max: 4_096,
        index_bytes_max: 24 * 16,
        persist_mode: PersistMode::SyncData,
        ..LogConfig::default()
    };
    // A directory of one log of six segments of two 1.8 KiB batches each (the last is active),
    // checkpointed; then the DeleteRecords, stopped after `crash_after` file operations.
    // Returns what it answered, how many operations it took and the directory.
    let run = |root: &std::path::Path, sim: &Arc<SimIo>, crash_after: Option<u64>| {
        let data = LogDir::open_simulated(root, config.clone(), Arc::clone(sim)).unwrap();
        let log = data.create("t", 0, None).unwrap();
        for _ in 0..12 {
            log.append(&mut batch_with(0, 1, 1_800, 1_000, 7), 1_000)
                .unwrap();
        }
        data.checkpoint_recovery_points().unwrap();
        assert_eq!(log.segment_count().unwrap(), 6);
        if let Some(ops) = crash_after {
            sim.crash_after_ops(ops);
        }
        let before = sim.ops();
        let deleted = log.delete_records_before(9);
        (deleted, sim.ops() - before, data)
    };
    let temp = temp_dir();
    let root = temp.path().join("data");
    let sim = Arc::new(SimIo::new(temp.path()).unwrap());
    let (deleted, ops, data) = run(&root, &sim, None);
    assert_eq!(deleted.unwrap(), 9);
    data.checkpoint_recovery_points().unwrap();
    drop(data);
    sim.power_cut(CutMode::RandomPages, 0).unwrap();
    let data = LogDir::open_simulated(&root, config.clone(), Arc::clone(&sim)).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(log.log_start_offset().unwrap(), 9, "a checkpointed start");
    drop((log, data));
    let mut returned = 0;
    for crash_after in 0..=ops {
        for seed in 0..3u64 {
            let temp = temp_dir();
            let root = temp.path().join("data");
            let sim = Arc::new(SimIo::new(temp.path()).unwrap());
            let (deleted, _, data) = run(&root, &sim, Some(crash_after));
            drop(data);
            sim.power_cut(CutMode::RandomPages, seed).unwrap();
            let data = LogDir::open_simulated(&root, config.clone(), Arc::clone(&sim))
                .unwrap_or_else(|error| {
                    panic!("reopen after a cut at op {crash_after} (seed {seed}): {error}")
                });
            let log = data.log("t", 0).unwrap().unwrap();
            let start = log.log_start_offset().unwrap();
            // The checkpointed start was 0; segments start at even offsets.
            assert!([0, 2, 4, 6, 8].contains(&start), "start {start}");
            assert_eq!(log.log_end_offset().unwrap(), 12);
            for offset in start..12 {
                assert!(!log.read(offset, 1, true).unwrap().is_empty(), "{offset}");
            }
            if deleted.is_ok() {
                assert_eq!(
                    start, 8,
                    "the first kept segment, not the unwritten start 9"
                );
                returned += 1;
            }
        }
    }
    assert!(returned > 0);
}

/// A compacted log's configuration for the cleaning seeds: small segments so a cleaning has
/// several groups and swaps.
fn cleaning_config(rng: &mut ChaCha8Rng) -> LogConfig {
    LogConfig {
        segment_bytes: rng.gen_range(1_200..4_000),
        batch_bytes_max: 1_200,
        index_interval_bytes: rng.gen_range(1..512),
        index_bytes_max: rng.gen_range(8..64) * 24,
        cleanup_policy: skiff_storage::CleanupPolicy::Compact,
        delete_retention_ms: 1_000,
        persist_mode: PersistMode::SyncData,
        ..LogConfig::default()
    }
}

/// A record's key and value, owned.
type OwnedKeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Appends `batches` batches of keyed records (keys from a small set, some tombstones, now and
/// then a keyless record), then rolls, so everything is cleanable.
fn fill_keyed(log: &Log, rng: &mut ChaCha8Rng, batches: usize, keys: u32, now_ms: i64) {
    use skiff_protocol::records::Compression;
    for _ in 0..batches {
        let count = rng.gen_range(1..6);
        let values: Vec<OwnedKeyValue> = (0..count)
            .map(|_| {
                let key = (!rng.gen_bool(0.05))
                    .then(|| format!("key{}", rng.gen_range(0..keys)).into_bytes());
                let value = (!rng.gen_bool(0.1)).then(|| vec![b'v'; rng.gen_range(1..60)]);
                (key, value)
            })
            .collect();
        let records: Vec<keyed::KeyValue<'_>> = values
            .iter()
            .map(|(key, value)| (key.as_deref(), value.as_deref()))
            .collect();
        let compression =
            [Compression::None, Compression::Lz4, Compression::Gzip][rng.gen_range(0..3)];
        let mut batch = keyed::keyed_batch(&records, now_ms - 500, compression);
        log.append(&mut batch, now_ms).unwrap();
    }
    log.roll_if_needed(i64::MAX / 2).unwrap();
}

/// The delete horizon of the batch holding `offset`, if it has one.
fn horizon_of(headers: &[BatchHeader], offset: i64) -> Option<i64> {
    headers
        .iter()
        .find(|header| header.base_offset <= offset && offset <= header.last_offset())
        .and_then(BatchHeader::delete_horizon_ms)
}

/// What a cleaning at `now_ms` may leave of `before` (records with the batch headers they were
/// read with): see the module doc. `cleaned_end`: the plan's first uncleanable offset.
fn check_cleaned(
    before: &(Vec<keyed::Read>, Vec<BatchHeader>),
    log: &Log,
    now_ms: i64,
    cleaned_end: i64,
) {
    let (before, before_headers) = before;
    let (after, _) = keyed::read_all(log);
    let by_offset: std::collections::BTreeMap<i64, &keyed::Read> = before
        .iter()
        .map(|record| (record.offset, record))
        .collect();
    for record in &after {
        assert_eq!(
            by_offset.get(&record.offset),
            Some(&record),
            "a record changed or appeared"
        );
    }
    let kept: std::collections::BTreeSet<i64> = after.iter().map(|record| record.offset).collect();
    for record in before.iter().filter(|record| record.offset >= cleaned_end) {
        assert!(
            kept.contains(&record.offset),
            "offset {} past the cleaned range lost",
            record.offset
        );
    }
    for (key, latest) in keyed::latest_per_key(before) {
        if kept.contains(&latest.offset) {
            continue;
        }
        let expired = latest.value.is_none()
            && horizon_of(before_headers, latest.offset).is_some_and(|horizon| now_ms >= horizon);
        assert!(
            expired,
            "key {key:?}: its latest record (offset {}) is lost",
            latest.offset
        );
        assert!(
            after
                .iter()
                .all(|record| record.key.as_deref() != Some(&key[..])),
            "key {key:?}: an older record came back after its tombstone went"
        );
    }
    log.verify_indexes().unwrap();
}

/// Builds the seed's log (the same every time for a seed): fills it, cleans it once on some
/// seeds and fills more, and makes it all durable. Returns the open directory and log, and the
/// time of the cleaning to cut.
fn cleaning_setup(
    seed: u64,
    root: &std::path::Path,
    sim: &Arc<SimIo>,
) -> (LogDir, Arc<Log>, i64, LogConfig) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xC1EA_0000);
    let config = cleaning_config(&mut rng);
    let data = LogDir::open_simulated(root, config.clone(), Arc::clone(sim)).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let keys = rng.gen_range(8..200);
    let batches = rng.gen_range(20..80);
    fill_keyed(&log, &mut rng, batches, keys, 5_000);
    let mut cleaner = skiff_storage::Cleaner::new(rng.gen_range(1_024..8_192), 0.9, 4_096).unwrap();
    if rng.gen_bool(0.6) {
        // A first cleaning: gaps, merged segments, horizons (at 6,000 + 1,000).
        let plan = log.cleaning_plan(i64::MAX, 6_000).unwrap().unwrap();
        let _ = log.clean(
            &plan,
            &mut cleaner,
            &std::collections::BTreeMap::new(),
            &mut skiff_storage::NoHooks,
            6_000,
        );
        let batches = rng.gen_range(5..40);
        fill_keyed(&log, &mut rng, batches, keys, 8_000);
    }
    data.checkpoint_recovery_points().unwrap();
    // Before or past the first cleaning's horizons.
    let now_ms = if rng.gen_bool(0.5) { 6_500 } else { 9_000 };
    (data, log, now_ms, config)
}

/// One cleaning seed: counts the cleaning's steps, then for each cut point rebuilds the log,
/// stops the machine after that many operations of the cleaning, cuts power, reopens and
/// checks. Returns the cuts made.
fn run_cleaning_seed(seed: u64) -> u64 {
    let steps = {
        let temp = temp_dir();
        let root = temp.path().join("data");
        std::fs::create_dir_all(&root).unwrap();
        let sim = Arc::new(SimIo::new(temp.path()).unwrap());
        let (_data, log, now_ms, _) = cleaning_setup(seed, &root, &sim);
        let before = sim.ops();
        let plan = log.cleaning_plan(i64::MAX, now_ms).unwrap().unwrap();
        let mut cleaner = skiff_storage::Cleaner::new(4_096, 0.9, 4_096).unwrap();
        let _ = log.clean(
            &plan,
            &mut cleaner,
            &std::collections::BTreeMap::new(),
            &mut skiff_storage::NoHooks,
            now_ms,
        );
        sim.ops() - before
    };
    let stride = steps.div_ceil(CLEANING_CUTS_MAX).max(1);
    let mut cuts = 0;
    let mut crash_at = seed % stride;
    while crash_at <= steps {
        // A stop inside a swap (its manifest on disk) is cut several ways: which unsynced
        // directory changes survive decides between rolling forward and back.
        let mut variant = 0;
        let mut variants = 1;
        while variant < variants {
            let in_swap = cut_cleaning(seed, crash_at, steps, variant);
            if variant == 0 && in_swap {
                variants = SWAP_CUT_VARIANTS;
            }
            cuts += 1;
            variant += 1;
        }
        crash_at += stride;
    }
    cuts
}

/// Cuts of one stop inside a swap: the first as the crash point's mode says, the others with
/// random surviving directory changes.
const SWAP_CUT_VARIANTS: u64 = 2;

/// Rebuilds the seed's log, stops the machine after `crash_at` operations of a cleaning, cuts
/// power (`variant` picks how), reopens, checks, and checks a new cleaning. Returns whether the
/// stop came inside a swap.
fn cut_cleaning(seed: u64, crash_at: u64, steps: u64, variant: u64) -> bool {
    let temp = temp_dir();
    let root = temp.path().join("data");
    std::fs::create_dir_all(&root).unwrap();
    let sim = Arc::new(SimIo::new(temp.path()).unwrap());
    let (data, log, now_ms, config) = cleaning_setup(seed, &root, &sim);
    let before = keyed::read_all(&log);
    let (start, end) = (
        log.log_start_offset().unwrap(),
        log.log_end_offset().unwrap(),
    );
    let plan = log.cleaning_plan(i64::MAX, now_ms).unwrap().unwrap();
    let mut cleaner = skiff_storage::Cleaner::new(4_096, 0.9, 4_096).unwrap();
    let producers = std::collections::BTreeMap::new();
    let mut hooks = skiff_storage::NoHooks;
    sim.crash_after_ops(crash_at);
    let result = log.clean(&plan, &mut cleaner, &producers, &mut hooks, now_ms);
    trace!("seed {seed}: crash after {crash_at} of {steps} ops (variant {variant}): {result:?}");
    let in_swap = root.join("t-0").join("cleaner-swap").exists();
    drop(log);
    drop(data);
    let modes = [
        CutMode::DropUnsynced,
        CutMode::TearLastWrite,
        CutMode::RandomPages,
    ];
    let mode = if variant == 0 {
        modes[(crash_at % 3) as usize]
    } else {
        CutMode::RandomPages
    };
    sim.power_cut(mode, seed ^ crash_at ^ (variant << 40))
        .unwrap();
    let data = LogDir::open_simulated(&root, config, Arc::clone(&sim))
        .unwrap_or_else(|error| panic!("crash after {crash_at} ops: reopen failed: {error}"));
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(log.log_start_offset().unwrap(), start);
    assert_eq!(log.log_end_offset().unwrap(), end);
    check_cleaned(&before, &log, now_ms, plan.first_uncleanable_offset);
    // The log cleans again, from wherever the cut left it.
    let plan = log.cleaning_plan(i64::MAX, now_ms).unwrap().unwrap();
    log.clean(&plan, &mut cleaner, &producers, &mut hooks, now_ms)
        .unwrap_or_else(|error| {
            panic!("crash after {crash_at} ops: the next cleaning failed: {error}")
        });
    check_cleaned(&before, &log, now_ms, plan.first_uncleanable_offset);
    in_swap
}

#[test]
fn power_loss_during_a_cleaning_leaves_every_latest_record() {
    let mut cuts = 0;
    let seeds = sim::seeds(CI_CLEANING_SEEDS, &[]);
    for seed in &seeds {
        let result = catch_unwind(AssertUnwindSafe(|| run_cleaning_seed(*seed)));
        match result {
            Ok(count) => cuts += count,
            Err(panic) => {
                eprintln!(
                    "power_loss (cleaning): seed {seed} failed; replay with SKIFF_SEED={seed}"
                );
                std::panic::resume_unwind(panic);
            }
        }
    }
    eprintln!(
        "power_loss (cleaning): {} seeds, {cuts} power cuts during cleanings",
        seeds.len()
    );
}
