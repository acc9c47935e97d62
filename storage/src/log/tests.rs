//! Tests of [`Log`] as a whole: appends, reads, rolls, flushes, recovery after crashes and faults,
//! truncation, retention and the leader-epoch cache, over real and fault-injecting file systems.

use std::sync::atomic::Ordering;

use skiff_protocol::records::v2::{self, BatchHeader};

use super::*;
use crate::config::PersistMode;
use crate::fs;
use crate::io::faulty::FaultyIo;
use crate::leader_epoch::EpochEntry;
use crate::log_dir::LogDir;
use crate::testing::{batch, batch_with, record_times};
use crate::testing_temp::temp_dir;
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::Compression;

/// A data directory over the fault-injecting file system.
fn open_faulty(path: &Path, config: LogConfig, io: &Arc<FaultyIo>) -> LogDir {
    LogDir::open_with_io(path, config, crate::DirConfig::default(), io.clone()).unwrap()
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        batch_bytes_max: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// The stored bytes of the batch that starts at `offset`.
fn batch_at(log: &Log, offset: i64) -> Vec<u8> {
    let slice = log.read(offset, 0, true).unwrap();
    slice.bytes().unwrap().to_vec()
}

fn expected(mut bytes: Vec<u8>, base_offset: i64) -> Vec<u8> {
    v2::set_base_offset(&mut bytes, base_offset).unwrap();
    bytes
}

#[test]
fn append_assigns_offsets_rolls_and_reads_back() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let mut appended = Vec::new();
    for index in 0..120i32 {
        let records = index % 4 + 1;
        let original = batch(999, records, (index as usize * 7) % 90);
        let info = log.append(&mut original.clone(), 5_000).unwrap();
        assert_eq!(info.last_offset - info.base_offset + 1, i64::from(records));
        appended.push((info.base_offset, info.last_offset, original));
    }
    assert!(
        log.segment_count().unwrap() > 3,
        "segment_bytes forces rolls"
    );
    for (base, last, original) in &appended {
        let want = expected(original.clone(), *base);
        for offset in *base..=*last {
            assert_eq!(batch_at(&log, offset), want, "offset {offset}");
        }
    }
    let end = log.log_end_offset().unwrap();
    assert!(log.read(end, 100, true).unwrap().is_empty());
    assert!(matches!(
        log.read(end + 1, 100, true),
        Err(Error::OffsetOutOfRange { .. })
    ));
    // Without min_one_batch, a small max_bytes cuts inside the batch, as Kafka does.
    assert_eq!(log.read(0, 10, false).unwrap().len(), 10);
    assert_eq!(log.read(0, 0, false).unwrap().len(), 0);

    // Clean close and reopen keep everything and the offsets.
    data.close().unwrap();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(log.log_end_offset().unwrap(), end);
    for (base, _, original) in &appended {
        assert_eq!(batch_at(&log, *base), expected(original.clone(), *base));
    }
    let info = log.append(&mut batch(0, 1, 5), 6_000).unwrap();
    assert_eq!(info.base_offset, end);
}

/// The leading whole batches of `bytes` (a read may end inside a batch, as Kafka's fetch
/// does; a follower appends the whole ones and fetches the rest again).
fn whole_batches(bytes: &[u8]) -> Vec<u8> {
    let mut end = 0usize;
    while let Ok(header) = BatchHeader::parse(&bytes[end..]) {
        if end + header.total_bytes() > bytes.len() {
            break;
        }
        end += header.total_bytes();
    }
    bytes[..end].to_vec()
}

/// Every file of the log directory `dir` but its checkpoint, by name, with its bytes.
fn segment_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.file_name().unwrap() != fs::CHECKPOINT_FILE)
        .map(|path| {
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect()
}

/// A leader's log: single and grouped appends over several leader epochs and segments.
fn leader_log(data: &LogDir) -> Arc<Log> {
    let leader = data.create("leader", 0, None).unwrap();
    leader.append(&mut batch(0, 2, 30), 0).unwrap(); // no epoch
    for index in 0..60i32 {
        let epoch = 1 + index / 15 * 2;
        let mut input = batch(0, index % 3 + 1, (index as usize * 13) % 300);
        if index % 4 == 0 {
            input.extend(batch(0, 2, 40));
        }
        leader.append_with_epoch(&mut input, epoch, 0).unwrap();
    }
    assert!(leader.segment_count().unwrap() > 4, "rolls");
    leader
}

#[test]
fn replicated_appends_copy_a_leader_log_byte_for_byte() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let leader = leader_log(&data);
    let leader_end = leader.log_end_offset().unwrap();
    // A follower that fetches up to a whole segment at a time, one that fetches one batch at
    // a time, and one that fetches 700 bytes at a time (reads that end inside a batch).
    for (partition, max_bytes) in [(0, 1 << 20), (1, 0), (2, 700)] {
        let follower = data.create("follower", partition, None).unwrap();
        while follower.log_end_offset().unwrap() < leader_end {
            let offset = follower.log_end_offset().unwrap();
            let slice = leader.read(offset, max_bytes, true).unwrap();
            let fetched = whole_batches(&slice.bytes().unwrap());
            let copy = fetched.clone();
            let info = follower.append_replicated(&fetched, 0).unwrap();
            assert_eq!(fetched, copy, "the batches are not modified");
            assert_eq!(info.base_offset, offset);
        }
        assert_eq!(follower.log_end_offset().unwrap(), leader_end);
        assert_eq!(
            follower.epoch_entries().unwrap(),
            leader.epoch_entries().unwrap()
        );
        let mut offset = 0;
        while offset < leader_end {
            let want = leader.read(offset, 0, true).unwrap().bytes().unwrap();
            let got = follower.read(offset, 0, true).unwrap().bytes().unwrap();
            assert_eq!(got, want, "batch at {offset}");
            offset = BatchHeader::parse(&want).unwrap().last_offset() + 1;
        }
    }
    // Fetching whole segments, the follower rolls where the leader did: its files (logs,
    // indexes, leader-epoch checkpoint) are the leader's, byte for byte.
    let leader_files = segment_files(&dir.path().join("leader-0"));
    assert!(leader_files.len() > 12);
    assert_eq!(segment_files(&dir.path().join("follower-0")), leader_files);
    // And a restart finds the follower's epochs from its checkpoint.
    drop((leader, data));
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let (leader, follower) = (
        data.log("leader", 0).unwrap().unwrap(),
        data.log("follower", 0).unwrap().unwrap(),
    );
    assert_eq!(
        follower.epoch_entries().unwrap(),
        leader.epoch_entries().unwrap()
    );
}

/// A batch as a leader stored it: `records` records from `base_offset`, at `epoch`.
fn leader_batch(base_offset: i64, records: i32, epoch: i32) -> Vec<u8> {
    let mut bytes = batch(base_offset, records, 20);
    v2::set_partition_leader_epoch(&mut bytes, epoch).unwrap();
    bytes
}

#[test]
fn replicated_appends_that_do_not_continue_the_log_write_nothing() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    log.append_replicated(&leader_batch(0, 3, 2), 0).unwrap();
    let mut two = leader_batch(3, 2, 2);
    two.extend(leader_batch(5, 1, 4));
    log.append_replicated(&two, 0).unwrap();
    // A batch without an epoch is taken and stays out of the cache.
    log.append_replicated(&leader_batch(6, 1, -1), 0).unwrap();
    assert_eq!(
        log.epoch_entries().unwrap(),
        [
            EpochEntry {
                epoch: 2,
                start_offset: 0
            },
            EpochEntry {
                epoch: 4,
                start_offset: 5
            }
        ]
    );
    // Fill the active segment so that the next append would roll: a refused one must not.
    while log.size_bytes().unwrap() + 2 * leader_batch(0, 1, 4).len() as u64 <= 4096 {
        let end = log.log_end_offset().unwrap();
        log.append_replicated(&leader_batch(end, 1, 4), 0).unwrap();
    }
    let end = log.log_end_offset().unwrap();
    let before = (
        log.log_end_offset().unwrap(),
        log.size_bytes().unwrap(),
        log.segment_count().unwrap(),
        log.epoch_entries().unwrap(),
        segment_files(&dir.path().join("t-0")),
    );
    // A batch ahead of the end, or a gap between two, is a compacted leader's gap: taken
    // (`replicated_appends_take_a_compacted_leaders_gaps`).
    let mut overlap = leader_batch(end, 2, 4);
    overlap.extend(leader_batch(end + 1, 1, 4));
    let mut falling = leader_batch(end, 1, 6);
    falling.extend(leader_batch(end + 1, 1, 5));
    let mut bad_crc = leader_batch(end, 1, 4);
    *bad_crc.last_mut().unwrap() ^= 1;
    let unexpected = |expected: i64, found: i64| {
        format!("UnexpectedAppendOffset {{ expected: {expected}, found: {found} }}")
    };
    let cases = [
        (
            "behind",
            leader_batch(end - 1, 1, 4),
            unexpected(end, end - 1),
        ),
        ("overlap", overlap, unexpected(end + 2, end + 1)),
        (
            "below the cache",
            leader_batch(end, 1, 3),
            "EpochBelowLatest { epoch: 3, latest: 4 }".to_owned(),
        ),
        (
            "falling inside",
            falling,
            "EpochBelowLatest { epoch: 5, latest: 6 }".to_owned(),
        ),
        ("crc", bad_crc, "InvalidBatch(".to_owned()),
    ];
    for (name, input, expected_error) in cases {
        let copy = input.clone();
        let refused = log.append_replicated(&input, 0).unwrap_err();
        let refused = format!("{refused:?}");
        assert!(refused.starts_with(&expected_error), "{name}: {refused}");
        assert_eq!(input, copy, "{name}: input untouched");
        let after = (
            log.log_end_offset().unwrap(),
            log.size_bytes().unwrap(),
            log.segment_count().unwrap(),
            log.epoch_entries().unwrap(),
            segment_files(&dir.path().join("t-0")),
        );
        assert_eq!(after, before, "{name}: nothing written");
    }
    assert!(!log.is_poisoned());
    // The right batch is still taken, and rolls as `append` would.
    let info = log.append_replicated(&leader_batch(end, 1, 4), 0).unwrap();
    assert_eq!(info.base_offset, end);
    let info = log
        .append_replicated(&leader_batch(end + 1, 1, 4), 0)
        .unwrap();
    assert_eq!(info.segment_base_offset, end + 1, "rolled");
}

#[test]
fn replicated_appends_take_a_compacted_leaders_gaps() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    log.append_replicated(&leader_batch(0, 3, 2), 0).unwrap();
    // Ahead of the end, then a gap between two batches of one append.
    let info = log.append_replicated(&leader_batch(5, 1, 2), 0).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (5, 5));
    let mut gap = leader_batch(6, 1, 2);
    gap.extend(leader_batch(9, 2, 3));
    let info = log.append_replicated(&gap, 0).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (6, 10));
    // A compacted batch: fewer records than offsets (its last offset kept), or none at all.
    let mut compacted = leader_batch(11, 1, 3);
    let header = BatchHeader::parse(&compacted).unwrap();
    assert_eq!(header.records_count, 1);
    compacted[23..27].copy_from_slice(&4i32.to_be_bytes()); // last offset delta
    let crc = v2::compute_crc(&compacted);
    compacted[17..21].copy_from_slice(&crc.to_be_bytes());
    let info = log.append_replicated(&compacted, 0).unwrap();
    assert_eq!(info.last_offset, 15);
    assert_eq!(log.log_end_offset().unwrap(), 16);
    // Reads from inside a gap get the next batch.
    assert_eq!(
        BatchHeader::parse(&batch_at(&log, 3)).unwrap().base_offset,
        5
    );
    assert_eq!(
        BatchHeader::parse(&batch_at(&log, 7)).unwrap().base_offset,
        9
    );
    // Behind the end is still refused, and producers' appends still need whole batches.
    assert!(matches!(
        log.append_replicated(&leader_batch(15, 1, 3), 0),
        Err(Error::UnexpectedAppendOffset {
            expected: 16,
            found: 15
        })
    ));
    let mut short = leader_batch(0, 1, 3);
    short[23..27].copy_from_slice(&4i32.to_be_bytes());
    let crc = v2::compute_crc(&short);
    short[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        log.append(&mut short, 0),
        Err(Error::InvalidBatchLayout(_))
    ));
}

#[test]
fn replicated_appends_flush_and_poison_as_appends_do() {
    let dir = temp_dir();
    let io = Arc::new(FaultyIo::default());
    let config = LogConfig {
        flush_messages_interval: Some(2),
        ..small_config()
    };
    let data = open_faulty(dir.path(), config, &io);
    let log = data.create("t", 0, None).unwrap();
    let info = log.append_replicated(&leader_batch(0, 1, 1), 0).unwrap();
    assert!(
        !info.flushed,
        "one record of the two flush.messages asks for"
    );
    let info = log.append_replicated(&leader_batch(1, 1, 1), 0).unwrap();
    assert!(info.flushed);
    assert_eq!(log.flushed_offset().unwrap(), 2);
    io.fail_sync.store(true, Ordering::SeqCst);
    log.append_replicated(&leader_batch(2, 1, 1), 0).unwrap();
    let failed = log.append_replicated(&leader_batch(3, 1, 1), 0);
    assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
    assert!(log.is_poisoned());
    io.fail_sync.store(false, Ordering::SeqCst);
    let end = log.log_end_offset().unwrap();
    assert!(matches!(
        log.append_replicated(&leader_batch(end, 1, 1), 0),
        Err(Error::Poisoned)
    ));
    assert!(matches!(
        log.truncate_fully_and_start_at(100),
        Err(Error::Poisoned)
    ));
}

#[test]
fn truncate_fully_and_start_at_leaves_an_empty_log_at_the_offset() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = leader_log(&data);
    log.delete_records_before(5).unwrap();
    let held = log.read(10, 1 << 20, true).unwrap();
    let held_bytes = held.bytes().unwrap().to_vec();
    let log_dir = dir.path().join("leader-0");
    for offset in [1_000, 1_000, 3] {
        log.truncate_fully_and_start_at(offset).unwrap();
        assert_eq!(log.log_start_offset().unwrap(), offset);
        assert_eq!(log.log_end_offset().unwrap(), offset);
        assert_eq!(log.flushed_offset().unwrap(), offset);
        assert_eq!(log.segment_count().unwrap(), 1);
        assert_eq!(log.epoch_entries().unwrap(), []);
        assert_eq!(log.latest_epoch().unwrap(), None);
        assert!(log.read(offset, 1 << 20, true).unwrap().is_empty());
        assert!(matches!(
            log.read(offset - 1, 1, true),
            Err(Error::OffsetOutOfRange { .. })
        ));
        let names: Vec<String> = segment_files(&log_dir).into_keys().collect();
        let base = format!("{offset:020}");
        assert_eq!(
            names,
            [
                format!("{base}.index"),
                format!("{base}.log"),
                format!("{base}.timeindex"),
                "leader-epoch-checkpoint".to_owned()
            ]
        );
        assert_eq!(
            std::fs::read_to_string(log_dir.join("leader-epoch-checkpoint")).unwrap(),
            "0\n0\n"
        );
        assert_eq!(
            dir_checkpoint_of(log_dir.parent().unwrap(), "leader"),
            Some(Checkpoint {
                log_start_offset: offset,
                recovery_point: offset
            })
        );
    }
    assert_eq!(
        held.bytes().unwrap().to_vec(),
        held_bytes,
        "slices stay valid"
    );
    assert!(matches!(
        log.truncate_fully_and_start_at(-1),
        Err(Error::NegativeOffset(-1))
    ));
    // The follower goes on from there, and a crash (no close) keeps it all.
    log.append_replicated(&leader_batch(3, 2, 7), 0).unwrap();
    drop((log, data));
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.log("leader", 0).unwrap().unwrap();
    assert_eq!(
        (
            log.log_start_offset().unwrap(),
            log.log_end_offset().unwrap()
        ),
        (3, 5)
    );
    assert_eq!(
        log.epoch_entries().unwrap(),
        [EpochEntry {
            epoch: 7,
            start_offset: 3
        }]
    );
    assert_eq!(batch_at(&log, 4), leader_batch(3, 2, 7));
}

#[test]
fn a_failed_truncate_fully_poisons_and_recovers_to_a_prefix_or_the_new_log() {
    // Each sync in turn fails: whatever step it stopped at, reopening finds the old log
    // whole, a prefix of it, or the new empty log.
    let mut prefix_ends = Vec::new();
    let mut old_end = 0;
    for syncs_before_failure in 0.. {
        let dir = temp_dir();
        let io = Arc::new(FaultyIo::default());
        let data = open_faulty(dir.path(), small_config(), &io);
        let log = leader_log(&data);
        log.flush().unwrap();
        let end = log.log_end_offset().unwrap();
        old_end = end;
        let mut old = Vec::new();
        let mut offset = 0;
        while offset < end {
            let bytes = batch_at(&log, offset);
            let next = BatchHeader::parse(&bytes).unwrap().last_offset() + 1;
            old.push((offset, next, bytes));
            offset = next;
        }
        io.fail_sync_after
            .store(syncs_before_failure, Ordering::SeqCst);
        io.fail_sync.store(true, Ordering::SeqCst);
        let result = log.truncate_fully_and_start_at(end + 100);
        io.fail_sync.store(false, Ordering::SeqCst);
        assert_eq!(result.is_err(), log.is_poisoned());
        drop((log, data));
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.log("leader", 0).unwrap().unwrap();
        let (start, recovered_end) = (
            log.log_start_offset().unwrap(),
            log.log_end_offset().unwrap(),
        );
        if recovered_end == end + 100 {
            assert_eq!(start, end + 100, "the new log");
            assert_eq!(log.epoch_entries().unwrap(), []);
            if result.is_ok() {
                assert!(syncs_before_failure > 8, "every step was reached");
                break;
            }
            continue;
        }
        assert!(
            result.is_err(),
            "{syncs_before_failure}: done, yet not the new log"
        );
        assert!(recovered_end <= end, "{syncs_before_failure}: a prefix");
        prefix_ends.push(recovered_end);
        for (base, next, bytes) in &old {
            if *next <= recovered_end && *next > start {
                assert_eq!(&batch_at(&log, *base.max(&start)), bytes);
            }
        }
    }
    // Each kind of outcome was seen: the old log whole, shorter prefixes, the empty one.
    assert_eq!(prefix_ends.first(), Some(&old_end));
    assert!(prefix_ends.iter().any(|end| (1..old_end).contains(end)));
    assert_eq!(prefix_ends.last(), Some(&0));
}

#[test]
fn read_below_returns_only_whole_batches_under_the_bound() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    // Batches of 3 records: [0,2] [3,5] … across several segments.
    let mut bases = Vec::new();
    for index in 0..60 {
        let info = log.append(&mut batch(1, 3, index % 50), 5_000).unwrap();
        bases.push(info.base_offset);
    }
    assert!(log.segment_count().unwrap() > 2);
    let end = log.log_end_offset().unwrap();
    for fetch_offset in [0, 1, 3, 40, end - 3] {
        for bound in [0, 3, 6, 7, 42, end - 3, end, i64::MAX] {
            let capped = log.read_below(fetch_offset, bound, 1 << 20, true).unwrap();
            let whole = log.read(fetch_offset, 1 << 20, true).unwrap();
            let bytes = capped.bytes().unwrap();
            let mut last = None;
            let mut covered = 0;
            for item in v2::batch_positions(&bytes) {
                let (position, header) = item.unwrap();
                last = Some(header.last_offset());
                covered = position + header.total_bytes();
            }
            assert_eq!(covered, bytes.len(), "whole batches only");
            if fetch_offset >= bound {
                assert!(capped.is_empty(), "{fetch_offset} {bound}");
                continue;
            }
            let limit = bound.min(end);
            // Every batch returned lies below the bound, and the read stops only at the bound
            // or where the uncapped read (one segment) stops.
            assert!(
                last.is_none_or(|last| last < limit),
                "{fetch_offset} {bound}"
            );
            let next = last.map_or(fetch_offset, |last| last + 1);
            let whole_bytes = whole.bytes().unwrap();
            assert!(
                next + 3 > limit || bytes.len() == whole_bytes.len(),
                "{fetch_offset} {bound}: stopped at {next}"
            );
            assert_eq!(&whole_bytes[..bytes.len()], &bytes[..]);
        }
    }
    assert!(matches!(
        log.read_below(end + 1, i64::MAX, 100, true),
        Err(Error::OffsetOutOfRange { .. })
    ));
}

#[test]
fn append_may_block_says_when_the_next_append_rolls_or_flushes() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    // Empty active segment, no flush policy: a plain page-cache append.
    assert!(!log.append_may_block(100, 1, 1_000).unwrap());
    log.append(&mut batch(0, 1, 100), 1_000).unwrap();
    assert!(!log.append_may_block(100, 1, 1_000).unwrap());
    // Past segment_bytes (4 KiB) the append rolls first.
    assert!(log.append_may_block(4096, 1, 1_000).unwrap());
    // segment.ms elapsed since the first append: a roll.
    let old = log.config().unwrap().segment_ms;
    assert!(log.append_may_block(100, 1, 1_000 + old).unwrap());
    // flush.messages = 3 with one record unflushed: two more records reach it, one does not.
    log.set_config(LogConfig {
        flush_messages_interval: Some(3),
        ..small_config()
    })
    .unwrap();
    assert!(!log.append_may_block(100, 1, 1_000).unwrap());
    assert!(log.append_may_block(100, 2, 1_000).unwrap());
    let info = log.append(&mut batch(0, 2, 100), 1_000).unwrap();
    assert!(info.flushed, "the hint and the append agree");
    assert!(!log.append_may_block(100, 1, 1_000).unwrap());
}

#[test]
fn headers_past_the_active_view_are_read_from_the_file() {
    // The active segment's `.log` view covers `segment_bytes` (here 4 KiB) as configured when
    // it was mapped; raising `segment_bytes` lets the segment grow past it, and lookups there
    // must fall back to `pread` and still find every batch.
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    log.set_config(LogConfig {
        segment_bytes: 1 << 20,
        ..small_config()
    })
    .unwrap();
    let mut appended = Vec::new();
    while log.size_bytes().unwrap() < 3 * 4096 {
        let original = batch(0, 3, 100);
        let info = log.append(&mut original.clone(), 0).unwrap();
        appended.push((info.base_offset, info.last_offset, original));
    }
    assert_eq!(log.segment_count().unwrap(), 1);
    for (base, last, original) in &appended {
        let want = expected(original.clone(), *base);
        for offset in *base..=*last {
            assert_eq!(batch_at(&log, offset), want, "offset {offset}");
        }
    }
}

#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    log.append(&mut batch(0, 2, 10), 0).unwrap();
    let good = batch(0, 1, 10);
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    let mut torn = good.clone();
    torn.extend_from_slice(&good[..40]);
    let mut trailing_header = good.clone();
    trailing_header.extend_from_slice(&good[..70]);
    let mut wrong_count = good.clone();
    wrong_count[23..27].copy_from_slice(&5i32.to_be_bytes()); // last offset delta
    let mut large = batch(0, 1, 5000);
    let mut empty = Vec::new();
    let cases: Vec<(&str, &mut Vec<u8>)> = vec![
        ("empty", &mut empty),
        ("crc", &mut flipped),
        ("torn", &mut torn),
        ("trailing", &mut trailing_header),
        ("count", &mut wrong_count),
        ("large", &mut large),
    ];
    for (name, input) in cases {
        let result = log.append(input, 0);
        assert!(
            matches!(
                result,
                Err(Error::InvalidBatch(_)
                    | Error::InvalidBatchLayout(_)
                    | Error::BatchTooLarge { .. })
            ),
            "{name}: {result:?}"
        );
    }
    assert_eq!(log.log_end_offset().unwrap(), 2);
    assert_eq!(log.size_bytes().unwrap(), batch(0, 2, 10).len() as u64);
}

#[test]
fn fsync_error_poisons_log() {
    let dir = temp_dir();
    let io = Arc::new(FaultyIo::default());
    let config = LogConfig {
        flush_messages_interval: Some(1),
        ..small_config()
    };
    let data = open_faulty(dir.path(), config.clone(), &io);
    let log = data.create("t", 0, None).unwrap();
    let info = log.append(&mut batch(0, 1, 10), 0).unwrap();
    assert!(info.flushed);
    assert_eq!(log.flushed_offset().unwrap(), 1);
    io.fail_sync.store(true, Ordering::SeqCst);
    let failed = log.append(&mut batch(0, 1, 10), 0);
    assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
    assert!(log.is_poisoned());
    io.fail_sync.store(false, Ordering::SeqCst);
    // Even with the disk healthy again, the log does not pretend.
    for _ in 0..3 {
        assert!(matches!(
            log.append(&mut batch(0, 1, 10), 0),
            Err(Error::Poisoned)
        ));
    }
    assert!(matches!(log.flush(), Err(Error::Poisoned)));
    assert!(matches!(log.truncate_to(0), Err(Error::Poisoned)));
    assert_eq!(log.flushed_offset().unwrap(), 1);
    // Reads still work, and close refuses to write a clean marker.
    assert_eq!(batch_at(&log, 0), batch(0, 1, 10));
    assert!(data.close().is_err());
    assert!(!dir.path().join(fs::CLEAN_SHUTDOWN_FILE).exists());
    // Reopening recovers: the flushed batch is there.
    let data = LogDir::open(dir.path(), config).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert!(log.log_end_offset().unwrap() >= 1);
    assert_eq!(batch_at(&log, 0), batch(0, 1, 10));
}

#[test]
fn reads_go_on_while_an_append_writes_and_see_it_only_once_written() {
    let dir = temp_dir();
    let io = Arc::new(FaultyIo::default());
    let data = open_faulty(dir.path(), small_config(), &io);
    let log = data.create("t", 0, None).unwrap();
    log.append(&mut batch(0, 2, 10), 0).unwrap();
    let size_bytes = log.size_bytes().unwrap();
    io.hold_writes.store(true, Ordering::SeqCst);
    let appender = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || log.append(&mut batch(0, 3, 10), 0))
    };
    while io.writes_held.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    // The append is inside its write. A reader must neither wait for it (the state lock is
    // free) nor see its bytes. Run in a thread so that a regression fails instead of hanging.
    let (sender, receiver) = std::sync::mpsc::channel();
    let reader = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            let seen = (
                log.log_end_offset().unwrap(),
                log.size_bytes().unwrap(),
                log.read(2, 1 << 20, true).unwrap().len(),
                batch_at(&log, 1),
            );
            sender.send(seen).unwrap();
        })
    };
    let seen = receiver.recv_timeout(std::time::Duration::from_secs(60));
    io.hold_writes.store(false, Ordering::SeqCst);
    let (log_end, size_during, tail_len, first) =
        seen.expect("a read waited for an append's write");
    reader.join().unwrap();
    assert_eq!((log_end, size_during, tail_len), (2, size_bytes, 0));
    assert_eq!(first, batch(0, 2, 10));
    let info = appender.join().unwrap().unwrap();
    assert_eq!((info.base_offset, info.position), (2, size_bytes));
    assert_eq!(batch_at(&log, 4), expected(batch(0, 3, 10), 2));
}

#[test]
fn torn_write_poisons_and_recovery_cuts_the_tail() {
    let dir = temp_dir();
    let io = Arc::new(FaultyIo::default());
    let data = open_faulty(dir.path(), small_config(), &io);
    let log = data.create("t", 0, None).unwrap();
    log.append(&mut batch(0, 3, 10), 0).unwrap();
    io.torn_write_bytes.store(40, Ordering::SeqCst);
    assert!(matches!(
        log.append(&mut batch(0, 1, 10), 0),
        Err(Error::Io { .. })
    ));
    assert!(matches!(
        log.append(&mut batch(0, 1, 10), 0),
        Err(Error::Poisoned)
    ));
    drop(log);
    drop(data);
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(log.log_end_offset().unwrap(), 3);
    assert_eq!(log.size_bytes().unwrap(), batch(0, 3, 10).len() as u64);
    assert_eq!(log.append(&mut batch(0, 1, 10), 0).unwrap().base_offset, 3);
}

#[test]
fn second_open_is_locked() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    assert!(matches!(
        LogDir::open(dir.path(), small_config()),
        Err(Error::Locked { .. })
    ));
    drop(data);
    LogDir::open(dir.path(), small_config()).unwrap();
}

#[test]
fn roll_by_time_retention_and_delete_records() {
    let dir = temp_dir();
    let config = LogConfig {
        segment_ms: 1_000,
        retention_ms: Some(10_000),
        segment_bytes: 1 << 20,
        ..small_config()
    };
    let data = LogDir::open(dir.path(), config.clone()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    // Five segments, one per second of caller time, with timestamps 1000 apart.
    for second in 0..5i64 {
        let now_ms = second * 1_000;
        let mut input = batch_with(0, 2, 20, now_ms, 1);
        log.append(&mut input, now_ms).unwrap();
    }
    assert_eq!(log.segment_count().unwrap(), 5);
    assert!(!log.roll_if_needed(4_500).unwrap());
    assert!(log.roll_if_needed(5_000).unwrap());
    assert_eq!(log.segment_count().unwrap(), 6);
    assert!(
        !log.roll_if_needed(5_000).unwrap(),
        "empty active never rolls"
    );

    // Time: segments whose newest timestamp is older than now − 10 s go, oldest first.
    assert_eq!(log.enforce_retention(10_500).unwrap(), 1);
    assert_eq!(log.log_start_offset().unwrap(), 2);
    assert!(matches!(
        log.read(0, 100, true),
        Err(Error::OffsetOutOfRange { .. })
    ));
    // Size: keep at most two segments' worth of bytes.
    let segment_bytes = batch(0, 2, 20).len() as u64;
    log.set_config(LogConfig {
        retention_bytes: Some(2 * segment_bytes),
        ..config.clone()
    })
    .unwrap();
    assert_eq!(log.enforce_retention(10_500).unwrap(), 2);
    assert_eq!(log.log_start_offset().unwrap(), 6);
    assert_eq!(log.size_bytes().unwrap(), 2 * segment_bytes);
    // DeleteRecords moves the start inside a segment, then past it.
    assert_eq!(log.delete_records_before(7).unwrap(), 7);
    assert_eq!(log.segment_count().unwrap(), 3);
    assert_eq!(log.read(7, 1, true).unwrap().position(), 0);
    assert_eq!(log.delete_records_before(8).unwrap(), 8);
    assert_eq!(log.segment_count().unwrap(), 2);
    assert!(log.delete_records_before(11).is_err());
    // The start offset survives a crash (no close).
    drop(log);
    drop(data);
    let data = LogDir::open(dir.path(), config).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(log.log_start_offset().unwrap(), 8);
    assert_eq!(log.log_end_offset().unwrap(), 10);
}

#[test]
fn compact_alone_never_deletes_by_time_or_size_and_the_policy_switches_live() {
    let dir = temp_dir();
    let config = LogConfig {
        segment_ms: 1_000,
        retention_ms: Some(10_000),
        retention_bytes: Some(1),
        segment_bytes: 1 << 20,
        cleanup_policy: crate::CleanupPolicy::Compact,
        ..small_config()
    };
    let data = LogDir::open(dir.path(), config.clone()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    for second in 0..5i64 {
        let now_ms = second * 1_000;
        log.append(&mut batch_with(0, 2, 20, now_ms, 1), now_ms)
            .unwrap();
    }
    assert!(log.roll_if_needed(5_000).unwrap());
    assert_eq!(
        log.enforce_retention(1_000_000).unwrap(),
        0,
        "compact keeps old data"
    );
    assert_eq!(log.segment_count().unwrap(), 6);
    // The log start still drops what lies below it (DeleteRecords on compact,delete).
    assert_eq!(log.delete_records_before(2).unwrap(), 2);
    assert_eq!(log.segment_count().unwrap(), 5);
    // compact,delete: retention applies again, live.
    log.set_config(LogConfig {
        cleanup_policy: crate::CleanupPolicy::CompactDelete,
        ..config.clone()
    })
    .unwrap();
    assert_eq!(log.enforce_retention(1_000_000).unwrap(), 4);
    assert_eq!(log.log_start_offset().unwrap(), 10);
}

#[test]
fn offset_for_timestamp_matches_a_linear_scan() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let mut records = Vec::new();
    for index in 0..80i64 {
        // Timestamps mostly rise, with some going back (producers' clocks differ).
        let timestamp = 1_000 + index * 100 - if index % 7 == 0 { 450 } else { 0 };
        let mut bytes = batch_with(0, 2, 30, timestamp, 2);
        log.append(&mut bytes, 0).unwrap();
        records.extend(record_times(&bytes));
    }
    for target in (-600..8_200).step_by(37) {
        let want = records
            .iter()
            .find(|(_, timestamp)| *timestamp >= target)
            .map(|(offset, timestamp)| TimestampOffset {
                offset: *offset,
                timestamp_ms: *timestamp,
            });
        assert_eq!(log.offset_for_timestamp(target).unwrap(), want, "{target}");
    }
    let (max_offset, max_timestamp_ms) = records
        .iter()
        .copied()
        .reduce(|best, next| if next.1 > best.1 { next } else { best })
        .unwrap();
    assert_eq!(
        log.max_timestamp().unwrap(),
        Some(TimestampOffset {
            offset: max_offset,
            timestamp_ms: max_timestamp_ms,
        })
    );
}

/// One batch whose records carry `timestamps` (any order), compressed with `compression`.
fn batch_of_times(timestamps: &[i64], compression: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, compression);
    for (delta, timestamp) in timestamps.iter().enumerate() {
        builder
            .push(&NewRecord {
                offset_delta: i32::try_from(delta).unwrap(),
                timestamp: *timestamp,
                key: None,
                value: Some(b"value"),
                headers: &[],
            })
            .unwrap();
    }
    builder.build().unwrap()
}

#[test]
fn time_lookups_answer_the_matching_record_not_its_batch() {
    // Found by Kafka's Java client: ListOffsets by timestamp and MAX_TIMESTAMP answered the
    // batch's base offset and max timestamp. Kafka answers the first record with a timestamp
    // at or after the target (its own offset and timestamp), and for the max timestamp the
    // record holding it.
    for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        log.append(
            &mut batch_of_times(&[100, 300, 200, 500, 400], compression),
            0,
        )
        .unwrap();
        log.append(&mut batch_of_times(&[600, 700], compression), 0)
            .unwrap();
        let at = |target| {
            log.offset_for_timestamp(target)
                .unwrap()
                .map(|found| (found.offset, found.timestamp_ms))
        };
        assert_eq!(at(0), Some((0, 100)), "{compression:?}");
        assert_eq!(at(150), Some((1, 300)), "{compression:?}");
        assert_eq!(at(301), Some((3, 500)), "{compression:?}");
        assert_eq!(at(450), Some((3, 500)), "{compression:?}");
        assert_eq!(at(501), Some((5, 600)), "{compression:?}");
        assert_eq!(at(701), None, "{compression:?}");
        let max = log.max_timestamp().unwrap().unwrap();
        assert_eq!((max.offset, max.timestamp_ms), (6, 700), "{compression:?}");
        // The maximum in the middle of a batch: that record's offset.
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        log.append(&mut batch_of_times(&[10, 90, 30], compression), 0)
            .unwrap();
        let max = log.max_timestamp().unwrap().unwrap();
        assert_eq!((max.offset, max.timestamp_ms), (1, 90), "{compression:?}");
    }
}

#[test]
fn time_lookups_skip_records_below_a_log_start_inside_a_batch() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    log.append(
        &mut batch_of_times(&[100, 900, 200, 300], Compression::None),
        0,
    )
    .unwrap();
    assert_eq!(log.delete_records_before(2).unwrap(), 2);
    let found = log.offset_for_timestamp(0).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp_ms), (2, 200));
    // The record with the batch's max timestamp is gone: nothing at or after 900 remains.
    assert_eq!(log.offset_for_timestamp(500).unwrap(), None);
}

#[test]
fn a_log_append_time_batch_answers_its_first_record_at_the_append_time() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.log_append_time_ms = Some(5_000);
    for delta in 0..3 {
        builder
            .push(&NewRecord {
                offset_delta: delta,
                timestamp: 10,
                key: None,
                value: None,
                headers: &[],
            })
            .unwrap();
    }
    log.append(&mut builder.build().unwrap(), 0).unwrap();
    let found = log.offset_for_timestamp(4_000).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp_ms), (0, 5_000));
    let max = log.max_timestamp().unwrap().unwrap();
    assert_eq!((max.offset, max.timestamp_ms), (0, 5_000));
}

#[test]
fn an_append_flushed_in_buffer_mode_is_not_reported_flushed() {
    // Found by tests/power_loss.rs (seed 12): with `persist_mode = Buffer` and a flush policy,
    // appends said `flushed: true` though nothing was synced, and a power cut lost them.
    let dir = temp_dir();
    let config = LogConfig {
        flush_messages_interval: Some(1),
        persist_mode: PersistMode::Buffer,
        ..small_config()
    };
    let data = LogDir::open(dir.path(), config).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let info = log.append(&mut batch(0, 1, 10), 0).unwrap();
    assert!(!info.flushed);
    assert_eq!(log.flushed_offset().unwrap(), 0);
}

#[test]
fn offset_for_timestamp_skips_batches_below_the_log_start() {
    // Found by tests/power_loss.rs (seed 1): DeleteRecords inside a segment left its older
    // batches in place, and a time lookup answered with one of them (its timestamp, with the
    // offset clamped to the log start), as Kafka does not.
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    for timestamp in [3_000, 1_000, 2_000] {
        log.append(&mut batch_with(0, 1, 10, timestamp, 1), 0)
            .unwrap();
    }
    assert_eq!(log.delete_records_before(1).unwrap(), 1);
    assert_eq!(log.segment_count().unwrap(), 1);
    let found = log.offset_for_timestamp(0).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp_ms), (1, 1_000));
    let found = log.offset_for_timestamp(1_500).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp_ms), (2, 2_000));
}

#[test]
fn truncate_keeps_outstanding_slices_intact() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    for _ in 0..40 {
        log.append(&mut batch(0, 2, 50), 0).unwrap();
    }
    let end = log.log_end_offset().unwrap();
    // A slice of the active segment, held while truncation runs.
    let held = log.read(end - 2, 1 << 20, true).unwrap();
    let held_bytes = held.bytes().unwrap();
    let copy = held_bytes.to_vec();
    let new_end = log.truncate_to(end - 3).unwrap();
    assert_eq!(new_end, end - 4, "the straddling batch goes whole");
    assert_eq!(log.log_end_offset().unwrap(), new_end);
    let info = log.append(&mut batch(0, 2, 90), 0).unwrap();
    assert_eq!(info.base_offset, new_end);
    assert_eq!(held_bytes.to_vec(), copy, "mapping unchanged");
    let mut reread = vec![0u8; copy.len()];
    assert_eq!(held.read_at(0, &mut reread).unwrap(), copy.len());
    assert_eq!(reread, copy, "file unchanged");
    // Truncation into an earlier segment, without readers: in place.
    drop((held, held_bytes));
    // Read first, so its descriptor sits in the set of recent files: that is not a reader.
    log.read(0, 1 << 20, true).unwrap();
    let first = dir.path().join("t-0/00000000000000000000.log");
    let inode =
        |path: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap());
    let inode_before = inode(&first);
    assert_eq!(log.truncate_to(5).unwrap(), 4);
    assert_eq!(inode(&first), inode_before, "cut in place, not copied");
    assert_eq!(log.segment_count().unwrap(), 1);
    assert_eq!(log.append(&mut batch(0, 1, 5), 0).unwrap().base_offset, 4);
    // And it holds after a crash.
    drop(log);
    drop(data);
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(log.log_end_offset().unwrap(), 5);
    assert_eq!(batch_at(&log, 4), expected(batch(0, 1, 5), 4));
}

#[test]
fn truncation_below_the_log_start_lowers_the_start_only_after_the_cut() {
    // Found by tests/power_loss.rs (seed 2509): the start was lowered in the checkpoint
    // written before the cut, so a crash in between brought back the whole log under a start
    // the leader-epoch cache (moved to the old start) did not cover.
    let dir = temp_dir();
    let io = Arc::new(FaultyIo::default());
    let data = open_faulty(dir.path(), small_config(), &io);
    let log = data.create("t", 0, None).unwrap();
    log.append_with_epoch(&mut batch(0, 2, 10), 3, 0).unwrap();
    log.append_with_epoch(&mut batch(0, 4, 10), 5, 0).unwrap();
    log.flush().unwrap();
    log.delete_records_before(4).unwrap();
    let epochs = log.epoch_entries().unwrap();
    assert_eq!(
        epochs,
        [EpochEntry {
            epoch: 5,
            start_offset: 4
        }]
    );
    // The cut goes to 2, below the start: the checkpoint (two syncs) is written, then the
    // segment's sync fails.
    io.fail_sync_after.store(2, Ordering::SeqCst);
    io.fail_sync.store(true, Ordering::SeqCst);
    assert!(log.truncate_to(5).is_err());
    io.fail_sync.store(false, Ordering::SeqCst);
    let checkpoint = dir_checkpoint(dir.path()).unwrap();
    assert_eq!(
        checkpoint,
        Checkpoint {
            log_start_offset: 4,
            recovery_point: 2
        },
        "before the cut only the recovery point drops"
    );
    drop((log, data));
    // The cut itself reached the file (only its sync failed): the log is empty at 2.
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(
        (
            log.log_start_offset().unwrap(),
            log.log_end_offset().unwrap()
        ),
        (2, 2)
    );
    assert_eq!(log.epoch_entries().unwrap(), []);
    // Without a failure the start drops to the new end at once.
    log.append_with_epoch(&mut batch(0, 4, 10), 6, 0).unwrap();
    log.delete_records_before(4).unwrap();
    assert_eq!(log.truncate_to(3).unwrap(), 2);
    assert_eq!(log.log_start_offset().unwrap(), 2);
    assert_eq!(
        dir_checkpoint(dir.path()),
        Some(Checkpoint {
            log_start_offset: 2,
            recovery_point: 2
        })
    );
}

#[test]
fn slices_survive_retention_deleting_their_segment() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    for _ in 0..40 {
        log.append(&mut batch(0, 2, 50), 0).unwrap();
    }
    let held = log.read(0, 1 << 20, true).unwrap();
    let before = held.bytes().unwrap().to_vec();
    log.delete_records_before(60).unwrap();
    assert!(!dir.path().join("t-0/00000000000000000000.log").exists());
    assert_eq!(held.bytes().unwrap().to_vec(), before);
    data.delete("t", 0).unwrap();
    assert_eq!(held.bytes().unwrap().to_vec(), before);
    assert!(matches!(
        log.append(&mut batch(0, 1, 1), 0),
        Err(Error::Closed)
    ));
    assert!(data.list().unwrap().is_empty());
}

/// The entry of `t-0` in the offset checkpoint of the data directory `data_dir`.
fn dir_checkpoint(data_dir: &Path) -> Option<Checkpoint> {
    dir_checkpoint_of(data_dir, "t")
}

/// The entry of partition 0 of `topic` in the offset checkpoint of `data_dir`.
fn dir_checkpoint_of(data_dir: &Path, topic: &str) -> Option<Checkpoint> {
    let path = data_dir.join(crate::offset_checkpoint::OFFSET_CHECKPOINT_FILE);
    let bytes = std::fs::read(path).ok()?;
    let entries = crate::offset_checkpoint::parse(&bytes).unwrap();
    entries.get(&(topic.to_owned(), 0)).copied()
}

#[test]
fn flushes_publish_the_recovery_point_at_the_next_directory_checkpoint() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), small_config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let read_checkpoint = || dir_checkpoint(dir.path());
    log.append(&mut batch(0, 1, 10), 0).unwrap();
    log.flush().unwrap();
    // A flush only updates the table: no checkpoint write on the append path.
    assert_eq!(log.flushed_offset().unwrap(), 1);
    assert!(read_checkpoint().is_none_or(|c| c.recovery_point == 0));
    // Nor does retention that deletes nothing (it runs often; the write would fsync), nor
    // a roll.
    assert_eq!(log.enforce_retention(0).unwrap(), 0);
    while log.segment_count().unwrap() < 3 {
        log.append(&mut batch(0, 2, 200), 0).unwrap();
    }
    assert!(read_checkpoint().is_none_or(|c| c.recovery_point == 0));
    log.flush().unwrap();
    let end = log.log_end_offset().unwrap();
    data.checkpoint_recovery_points().unwrap();
    assert_eq!(read_checkpoint().unwrap().recovery_point, end);
    // Unsynced appends are synced by the checkpoint itself.
    log.append(&mut batch(0, 2, 10), 0).unwrap();
    data.checkpoint_recovery_points().unwrap();
    assert_eq!(read_checkpoint().unwrap().recovery_point, end + 2);
    assert_eq!(log.flushed_offset().unwrap(), end + 2);
}
