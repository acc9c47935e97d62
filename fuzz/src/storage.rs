//! Fuzz bodies for the storage engine, through its public API on a real (tmpfs when present)
//! directory.
//!
//! `recovery_scan`: the input is written as the only segment of a partition log with no clean
//! shutdown marker and no checkpoint, and the data directory is opened (recovery). Recovery must
//! succeed, the recovered `.log` must be a prefix of the input made of valid batches with
//! increasing offsets, and reading the log back from its start must return exactly those bytes.
//!
//! `leader_epoch_checkpoint`: a fixed, valid log whose batches carry leader epochs is closed
//! cleanly; the input then replaces its `leader-epoch-checkpoint`. Opening must succeed (a
//! corrupt checkpoint is rebuilt from the batches); the cache must be strictly increasing in
//! epoch and start offset with every start inside the log; an input that is not a checkpoint (or
//! none at all) gives exactly the cache the batches imply.
//!
//! `high_watermark_checkpoint`: the input is a data directory's `replication-offset-checkpoint`.
//! Opening the directory must succeed (the file is not a log); reading it must give entries or
//! `Error::Corrupt`, nothing else; accepted entries are valid (a topic that can name a log,
//! partition and offset ≥ 0, no partition twice), and written back they read back equal, in a
//! text no longer than the input (the writer's is the shortest form).
//!
//! `offset_checkpoint`: two fixed, valid logs are written and closed cleanly; the input then
//! replaces the directory's `skiff-offset-checkpoint`. Opening either succeeds or refuses with
//! `Error::Corrupt` (a file that claims a log durable past its end); a file that is not a
//! checkpoint at all is reported as damage and every log is recovered whole. Once open, every
//! log ends where it was written, starts within it and reads back the written bytes from its
//! start; a periodic checkpoint and a close write a file that opens again to the same offsets.
//!
//! `offset_index`: a fixed, valid log is written and closed cleanly; the input then replaces its
//! `.index` and/or `.timeindex` files. Opening must succeed (an index is a cache) and every
//! offset and timestamp lookup must equal a linear scan of the batches appended.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use skiff_protocol::records::v2::{self, BatchHeader, BATCH_HEADER_BYTES};
use skiff_storage::{DirConfig, Error, LogConfig, LogDir};

#[path = "../../storage/tests/support/batch.rs"]
mod batch_support;

/// Targets of this module.
pub const TARGETS: &[crate::Target] = &[
    ("high_watermark_checkpoint", high_watermark_checkpoint),
    ("leader_epoch_checkpoint", leader_epoch_checkpoint),
    ("offset_checkpoint", offset_checkpoint),
    ("offset_index", offset_index),
    ("recovery_scan", recovery_scan),
];

/// A scratch directory removed on drop (the fuzz crate has no `tempfile`).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let shm = Path::new("/dev/shm");
        let root = if shm.is_dir() {
            shm.to_owned()
        } else {
            std::env::temp_dir()
        };
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = root.join(format!("skiff-fuzz-{}-{count}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("scratch dir");
        Self(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens the directory at `path` recovering and closing its logs on the calling thread. With the
/// default of several recovery threads, every open and close of a directory holding two logs
/// spawned and joined two threads: `offset_checkpoint` ran 83 executions a second on 43 % of a
/// core, the rest waiting for them.
fn open_dir(path: &Path, config: LogConfig) -> skiff_storage::Result<LogDir> {
    let one_thread = DirConfig {
        recovery_threads: 1,
        ..DirConfig::default()
    };
    LogDir::open_with(path, config, one_thread)
}

const SEGMENT: &str = "t-0/00000000000000000000";

/// Recovery over arbitrary segment bytes keeps exactly a valid prefix.
pub fn recovery_scan(data: &[u8]) {
    let scratch = Scratch::new();
    let log_dir = scratch.0.join("t-0");
    std::fs::create_dir_all(&log_dir).expect("log dir");
    let log_path = scratch.0.join(format!("{SEGMENT}.log"));
    std::fs::write(&log_path, data).expect("write segment");
    let dir = open_dir(&scratch.0, LogConfig::default())
        .expect("recovery with no flushed point never fails on bad bytes");
    let log = dir.log("t", 0).expect("lock").expect("log found");
    let recovered = std::fs::read(&log_path).expect("read segment");
    assert!(
        data.starts_with(&recovered),
        "recovered log is a prefix of the input"
    );
    // The prefix is whole valid batches with increasing offsets.
    let mut position = 0usize;
    let mut next_offset = 0i64;
    let mut first_offset = None;
    while position < recovered.len() {
        let header = BatchHeader::parse(&recovered[position..]).expect("header");
        let end = position + header.total_bytes();
        v2::validate(&recovered[position..end]).expect("valid batch");
        assert!(header.base_offset >= next_offset, "offsets increase");
        first_offset.get_or_insert(header.base_offset);
        next_offset = header.next_offset();
        position = end;
    }
    assert_eq!(position, recovered.len());
    assert_eq!(log.log_end_offset().expect("end"), next_offset);
    // Reading from the start returns exactly the recovered bytes.
    if let Some(first_offset) = first_offset {
        let slice = log.read(first_offset, u64::MAX, true).expect("read");
        assert_eq!(slice.position(), 0);
        assert_eq!(&slice.bytes().expect("map")[..], &recovered[..]);
    }
    // The recovered log accepts appends.
    let mut batch = batch_support::batch(0, 1, 3);
    let info = log.append(&mut batch, 0).expect("append after recovery");
    assert_eq!(info.base_offset, next_offset);
    if info.segment_base_offset == 0 {
        assert_eq!(info.position, recovered.len() as u64);
    } else {
        // The recovered segment's offsets reach the 4-byte relative limit (found by fuzzing: a
        // batch at base offset 2^32 - 2): the append rolls to a new segment at the log end.
        assert_eq!(info.segment_base_offset, next_offset);
        assert_eq!(info.position, 0);
    }
}

/// Batches of the fixed log: (records, value bytes, first timestamp).
fn fixed_batches() -> Vec<Vec<u8>> {
    (0..48i32)
        .map(|index| {
            let records = index % 4 + 1;
            // Strictly increasing batch timestamps: then every real (timestamp, offset) pair is
            // a true time-index entry, and a lookup may trust any entry it can verify.
            let timestamp = 1_000 + i64::from(index) * 10;
            batch_support::batch_with(0, records, (index as usize * 11) % 70, timestamp, 0xAB)
        })
        .collect()
}

/// The leader epochs of [`fixed_batches`] (one per batch, rising every few batches) and the cache
/// they imply: (epoch, start offset) of the first batch of each epoch.
fn fixed_epochs() -> Vec<i32> {
    (0..48i32).map(|index| index / 7 * 2 + 1).collect()
}

/// Whether `text` is a checkpoint as Kafka writes it: version `0`, a count, that many
/// `epoch start` lines. (Only a rough filter: order and range are checked on the cache.)
fn looks_like_checkpoint(text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else {
        return false;
    };
    let mut lines = text.lines();
    lines.next() == Some("0")
        && lines
            .next()
            .is_some_and(|count| count.parse::<usize>().is_ok())
}

/// A damaged leader-epoch checkpoint never stops the log from opening, and never leaves a cache
/// the log cannot hold.
pub fn leader_epoch_checkpoint(data: &[u8]) {
    let scratch = Scratch::new();
    let config = LogConfig {
        segment_bytes: 2048,
        batch_bytes_max: 1024,
        ..LogConfig::default()
    };
    let mut implied: Vec<(i32, i64)> = Vec::new();
    let log_end = {
        let dir = open_dir(&scratch.0, config.clone()).expect("open");
        let log = dir.create("t", 0, None).expect("create");
        for (mut batch, epoch) in fixed_batches().into_iter().zip(fixed_epochs()) {
            let info = log.append_with_epoch(&mut batch, epoch, 0).expect("append");
            if implied.last().is_none_or(|(last, _)| *last != epoch) {
                implied.push((epoch, info.base_offset));
            }
        }
        let log_end = log.log_end_offset().expect("end");
        dir.close().expect("clean close");
        log_end
    };
    std::fs::write(scratch.0.join("t-0/leader-epoch-checkpoint"), data).expect("checkpoint");
    let dir = open_dir(&scratch.0, config).expect("a checkpoint is rebuilt: open succeeds");
    let log = dir.log("t", 0).expect("lock").expect("log found");
    let cache: Vec<(i32, i64)> = log
        .epoch_entries()
        .expect("entries")
        .iter()
        .map(|entry| (entry.epoch, entry.start_offset))
        .collect();
    assert!(
        cache
            .windows(2)
            .all(|pair| pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1),
        "cache out of order: {cache:?}"
    );
    assert!(
        cache
            .iter()
            .all(|(epoch, start)| *epoch >= 0 && (0..log_end).contains(start)),
        "cache entry outside the log: {cache:?}"
    );
    if !looks_like_checkpoint(data) {
        assert_eq!(
            cache, implied,
            "a non-checkpoint is rebuilt from the batches"
        );
    }
    // Answers never panic, and the latest epoch ends at the log end.
    for epoch in -1..20 {
        let answer = log.end_offset_for_epoch(epoch).expect("answer");
        assert!(answer.end_offset <= log_end);
    }
    if let Some((latest, _)) = cache.last() {
        assert_eq!(
            log.end_offset_for_epoch(*latest)
                .expect("answer")
                .end_offset,
            log_end
        );
    }
}

/// A damaged high-watermark checkpoint is refused as corrupt, and what is accepted is valid and
/// round-trips.
pub fn high_watermark_checkpoint(data: &[u8]) {
    const FILE: &str = "replication-offset-checkpoint";
    let scratch = Scratch::new();
    std::fs::write(scratch.0.join(FILE), data).expect("checkpoint");
    let dir = open_dir(&scratch.0, LogConfig::default()).expect("the file is not a log");
    assert!(dir.list().expect("list").is_empty());
    let entries = match dir.read_high_watermarks() {
        Ok(entries) => entries,
        Err(Error::Corrupt { .. }) => return,
        Err(other) => panic!("damage must be Corrupt, not {other:?}"),
    };
    let mut seen = std::collections::BTreeSet::new();
    for entry in &entries {
        assert!(entry.partition >= 0 && entry.offset >= 0, "{entry:?}");
        assert!(
            skiff_protocol::topic_name::validate_topic_name(&entry.topic).is_ok(),
            "{entry:?}"
        );
        assert!(
            seen.insert((&entry.topic, entry.partition)),
            "twice: {entry:?}"
        );
    }
    dir.write_high_watermarks(&entries)
        .expect("accepted entries are written back");
    let written = std::fs::read(scratch.0.join(FILE)).expect("read back");
    assert!(
        written.len() <= data.len(),
        "the writer's text is the shortest"
    );
    assert_eq!(dir.read_high_watermarks().expect("reads back"), entries);
}

/// A damaged or lying offset checkpoint never loses a written batch, never panics, and is
/// replaced by one that reads back.
pub fn offset_checkpoint(data: &[u8]) {
    const FILE: &str = "skiff-offset-checkpoint";
    const HEADER: &[u8] = b"skiff-offset-checkpoint 1\n";
    let scratch = Scratch::new();
    let config = LogConfig {
        segment_bytes: 2048,
        batch_bytes_max: 1024,
        ..LogConfig::default()
    };
    // Per log: its end and the bytes of every batch from offset 0.
    let mut written: Vec<(i32, i64, Vec<u8>)> = Vec::new();
    {
        let dir = open_dir(&scratch.0, config.clone()).expect("open");
        for partition in 0..2 {
            let log = dir.create("t", partition, None).expect("create");
            let mut bytes = Vec::new();
            for mut batch in fixed_batches()
                .into_iter()
                .take(12 + partition as usize * 5)
            {
                log.append(&mut batch, 0).expect("append");
                bytes.extend_from_slice(&batch);
            }
            written.push((partition, log.log_end_offset().expect("end"), bytes));
        }
        dir.close().expect("clean close");
    }
    std::fs::write(scratch.0.join(FILE), data).expect("checkpoint");
    let dir = match open_dir(&scratch.0, config.clone()) {
        Ok(dir) => dir,
        Err(Error::Corrupt { .. }) => {
            assert!(
                data.starts_with(HEADER),
                "only a checkpoint's claims can make recovery refuse a log"
            );
            return;
        }
        Err(other) => panic!("a bad checkpoint must open or be Corrupt, not {other:?}"),
    };
    if !data.starts_with(HEADER) {
        assert!(
            dir.checkpoint_damage().is_some(),
            "not a checkpoint: damage"
        );
    }
    let mut offsets = Vec::new();
    for (partition, end, bytes) in &written {
        let log = dir.log("t", *partition).expect("lock").expect("log found");
        assert_eq!(
            log.log_end_offset().expect("end"),
            *end,
            "nothing written is lost"
        );
        let start = log.log_start_offset().expect("start");
        assert!(
            (0..=*end).contains(&start),
            "start {start} outside 0..={end}"
        );
        assert!(log.flushed_offset().expect("flushed") <= *end);
        // From its start the log reads back exactly what was written there, segment after
        // segment (a raised start hides a prefix from consumers, never changes a byte).
        let mut read = Vec::new();
        let mut offset = start;
        while offset < *end {
            let slice = log
                .read(offset, u64::MAX, true)
                .expect("read within the log");
            let piece = slice.bytes().expect("map");
            let mut position = 0;
            while position < piece.len() {
                let header = BatchHeader::parse(&piece[position..]).expect("header");
                if header.next_offset() > start {
                    read.extend_from_slice(&piece[position..position + header.total_bytes()]);
                }
                offset = header.next_offset();
                position += header.total_bytes();
            }
            assert!(position > 0, "a read within the log returns a batch");
        }
        assert!(
            bytes.ends_with(&read),
            "the bytes from the start are the written ones"
        );
        offsets.push((start, *end));
    }
    dir.checkpoint_recovery_points()
        .expect("periodic checkpoint");
    dir.close().expect("clean close");
    let dir = open_dir(&scratch.0, config).expect("the written checkpoint opens");
    assert!(
        dir.checkpoint_damage().is_none(),
        "the written checkpoint reads back"
    );
    for ((partition, _, _), (start, end)) in written.iter().zip(&offsets) {
        let log = dir.log("t", *partition).expect("lock").expect("log found");
        assert_eq!(log.log_start_offset().expect("start"), *start);
        assert_eq!(log.log_end_offset().expect("end"), *end);
    }
}

/// Damaged index files never change what a lookup returns.
pub fn offset_index(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let scratch = Scratch::new();
    let config = LogConfig {
        index_interval_bytes: 64,
        ..LogConfig::default()
    };
    // (base offset, last offset, position, max timestamp) per batch, as appended, and
    // (offset, timestamp) per record.
    let mut expected = Vec::new();
    let mut records = Vec::new();
    {
        let dir = open_dir(&scratch.0, config.clone()).expect("open");
        let log = dir.create("t", 0, None).expect("create");
        for mut batch in fixed_batches() {
            let info = log.append(&mut batch, 0).expect("append");
            records.extend(batch_support::record_times(&batch));
            expected.push((
                info.base_offset,
                info.last_offset,
                info.position,
                info.max_timestamp_ms,
            ));
        }
        dir.close().expect("clean close");
    }
    let (index_bytes, time_bytes) = rest.split_at(rest.len() / 2);
    if selector & 1 != 0 {
        std::fs::write(scratch.0.join(format!("{SEGMENT}.index")), index_bytes).expect("index");
    }
    if selector & 2 != 0 {
        std::fs::write(scratch.0.join(format!("{SEGMENT}.timeindex")), time_bytes)
            .expect("timeindex");
    }
    let dir = open_dir(&scratch.0, config).expect("an index is a cache: open succeeds");
    let log = dir.log("t", 0).expect("lock").expect("log found");
    for &(base_offset, last_offset, position, _) in &expected {
        for offset in base_offset..=last_offset {
            let slice = log.read(offset, 1, true).expect("read");
            assert_eq!(slice.position(), position, "offset {offset}");
            let bytes = slice.bytes().expect("map");
            let header = BatchHeader::parse(&bytes).expect("header");
            assert_eq!(header.base_offset, base_offset);
            assert!(bytes.len() >= BATCH_HEADER_BYTES);
        }
    }
    let mut targets: Vec<i64> = expected.iter().map(|e| e.3).collect();
    targets.extend([i64::MIN, 0, 999, 5_000]);
    for target in targets {
        // The first record at or after the target, as Kafka answers ListOffsets.
        let want = records
            .iter()
            .copied()
            .find(|(_, timestamp)| *timestamp >= target);
        let got = log
            .offset_for_timestamp(target)
            .expect("time lookup")
            .map(|found| (found.offset, found.timestamp_ms));
        assert_eq!(got, want, "timestamp {target}");
    }
}
