//! Every bound of the storage engine, with its reason and default, and the compile-time relations
//! between them. Owns the numbers; must never hold logic beyond constant checks.

/// Largest segment: positions in `.index` are 4-byte unsigned, so a segment cannot pass `u32::MAX`.
pub(crate) const SEGMENT_BYTES_MAX: u64 = u32::MAX as u64;
/// Default `segment_bytes` (Kafka's `segment.bytes`): 1 GiB.
pub(crate) const SEGMENT_BYTES_DEFAULT: u64 = 1 << 30;
/// Smallest `segment_bytes`: one header must fit, and tiny segments only make sense in tests.
pub(crate) const SEGMENT_BYTES_MIN: u64 = 128;
/// Default `segment_ms` (Kafka's `segment.ms`): 7 days.
pub(crate) const SEGMENT_MS_DEFAULT: i64 = 7 * 24 * 60 * 60 * 1000;
/// Default `index_interval_bytes` (Kafka's `index.interval.bytes`): one entry per 4 KiB of log.
pub(crate) const INDEX_INTERVAL_BYTES_DEFAULT: u32 = 4096;
/// Default `index_bytes_max` (Kafka's `segment.index.bytes`): 10 MiB, preallocated (sparse) per
/// active segment; a full index rolls the segment.
pub(crate) const INDEX_BYTES_MAX_DEFAULT: u32 = 10 * 1024 * 1024;
/// Smallest `index_bytes_max`: room for a few entries of either index.
pub(crate) const INDEX_BYTES_MIN: u32 = 64;
/// Default `batch_bytes_max` (Kafka's `max.message.bytes`: 1 MiB plus the 12-byte log overhead).
pub const BATCH_BYTES_MAX_DEFAULT: u32 = 1024 * 1024 + 12;
/// Default `LogConfig::min_cleanable_dirty_ratio` (Kafka's `min.cleanable.dirty.ratio`).
pub(crate) const MIN_CLEANABLE_DIRTY_RATIO_DEFAULT: f64 = 0.5;
/// Default `LogConfig::delete_retention_ms` (Kafka's `delete.retention.ms`): 1 day.
pub(crate) const DELETE_RETENTION_MS_DEFAULT: i64 = 24 * 60 * 60 * 1000;
/// Smallest cleaner offset map (`cleaner::OffsetMap::with_memory`): a few dozen keys, for tests.
pub(crate) const OFFSET_MAP_BYTES_MIN: usize = 1024;
/// Largest cleaner offset map: Kafka caps each cleaner's dedupe buffer at 2 GiB too.
pub const OFFSET_MAP_BYTES_MAX: usize = 2 << 30;
/// Smallest cleaner I/O buffer (`cleaner::Cleaner::new`): one batch header and then some.
pub(crate) const CLEANER_IO_BUFFER_BYTES_MIN: usize = 4096;
/// Largest cleaner I/O buffer to start at (Kafka's `log.cleaner.io.buffer.size` default is
/// 512 KiB; more buys nothing once reads are sequential).
pub const CLEANER_IO_BUFFER_BYTES_MAX: usize = 64 << 20;
/// Largest swap manifest read back: a group's base offsets (a few thousand segments at most)
/// and four short lines.
pub(crate) const SWAP_MANIFEST_BYTES_MAX: u64 = 1 << 20;
/// Most ABORT markers a log holds whose aborted-transaction entry is not written yet
/// (`Log::append_aborted_txn`): the partition writes each entry right after its marker, so a
/// handful is the most that is ever pending; more means a caller never writes them, and the
/// recovery point would stay behind, so further ABORT markers are refused.
pub(crate) const UNINDEXED_ABORTS_MAX: usize = 1024;
/// Bytes of an offset-index entry: relative offset (u32) and position (u32).
pub(crate) const OFFSET_INDEX_ENTRY_BYTES: usize = 8;
/// Bytes of a time-index entry: timestamp (i64) and relative offset (u32).
pub(crate) const TIME_INDEX_ENTRY_BYTES: usize = 12;
/// Tail of an index searched first: recent lookups (consumers at the head) then touch only the
/// last pages, which stay resident, instead of the pages a full binary search would fault in.
/// 8 KiB is two pages on most systems: enough for the tail of the log at the default interval
/// (8 KiB of entries cover 4 MiB of log), small enough to stay hot.
pub(crate) const INDEX_WARM_BYTES: usize = 8192;
/// Largest checkpoint file read back: a few short lines; anything longer is not ours.
pub(crate) const CHECKPOINT_BYTES_MAX: u64 = 256;
/// Largest leader-epoch checkpoint read back: one short line per leader epoch that wrote to the
/// log (retention trims them), so 1 MiB holds tens of thousands of leader changes.
pub(crate) const LEADER_EPOCH_CHECKPOINT_BYTES_MAX: u64 = 1 << 20;
/// Most partitions a data directory's high-watermark checkpoint (`replication-offset-checkpoint`)
/// holds: ten times `LOGS_MAX_DEFAULT`, so any broker within a sane `max.broker.partitions` fits
/// (Kafka's guidance is a few thousand partitions per broker); the bound keeps a damaged file
/// from making the reader hold millions of entries.
pub(crate) const HIGH_WATERMARK_ENTRIES_MAX: usize = 200_000;
/// Longest line of that checkpoint: a topic name, a space, an `i32` partition (10 digits), a
/// space, an `i64` offset (19 digits), the newline.
const HIGH_WATERMARK_LINE_BYTES_MAX: u64 =
    skiff_protocol::topic_name::TOPIC_NAME_BYTES_MAX as u64 + 1 + 10 + 1 + 19 + 1;
/// Largest high-watermark checkpoint read back: `HIGH_WATERMARK_ENTRIES_MAX` of the longest
/// lines and the two header lines fit (56 MiB at most; a typical broker's file is tens of KiB,
/// 30-odd bytes a partition). Anything larger is not one we wrote, and is refused unread.
pub(crate) const HIGH_WATERMARK_CHECKPOINT_BYTES_MAX: u64 = 64 << 20;
/// Most logs the directory's offset checkpoint (`skiff-offset-checkpoint`) holds: as many as the
/// high-watermark checkpoint, for the same reason (any sane `max.broker.partitions` fits; a
/// damaged count cannot make the reader hold millions).
pub(crate) const OFFSET_CHECKPOINT_ENTRIES_MAX: usize = HIGH_WATERMARK_ENTRIES_MAX;
/// Longest line of the offset checkpoint: a topic name, a space, an `i32` partition, a space,
/// two `i64` offsets each after a space, the newline.
const OFFSET_CHECKPOINT_LINE_BYTES_MAX: u64 =
    skiff_protocol::topic_name::TOPIC_NAME_BYTES_MAX as u64 + 1 + 10 + 1 + 19 + 1 + 19 + 1;
/// Largest offset checkpoint read back: `OFFSET_CHECKPOINT_ENTRIES_MAX` of the longest lines and
/// the two header lines fit (about 60 MiB; 10,000 partitions of 20-byte names write ~400 KiB).
pub(crate) const OFFSET_CHECKPOINT_BYTES_MAX: u64 = 64 << 20;
/// Most dirty logs a periodic checkpoint or a clean close makes durable with one `fdatasync`
/// each (on `DirConfig::recovery_threads` threads); above it, one `syncfs(2)` of the whole file
/// system does. Why 512: the journal serializes the per-log syncs at about 1.3 ms each on the
/// measured disk (bench/reports/partition-scale.md), so 512 cost about 0.7 s whatever else the
/// machine writes, while one `syncfs` also waits for every other process's dirty pages on the
/// file system (53 s with 270 MiB of theirs). Past a few hundred logs the per-log syncs cost
/// more than a `syncfs` on a quiet machine, so the file-system sync wins there.
pub(crate) const FSYNC_PER_LOG_DIRTY_LOGS_MAX: usize = 512;
/// Bytes read per `pread` when a batch header is inspected on the read path.
pub(crate) const HEADER_READ_BYTES: usize = skiff_protocol::records::v2::BATCH_HEADER_BYTES;
/// Default `DirConfig::logs_max`: what the default open-file limit of a typical server (20,000
/// here) holds at one descriptor per log, with room left for connections only if the limit is
/// raised; the broker sets it from `max.broker.partitions`.
pub(crate) const LOGS_MAX_DEFAULT: usize = 20_000;
/// Default `DirConfig::log_files_max`: segment descriptors kept open (active and sealed). Holds
/// the active segments of 4,096 busy partitions without a reopen, and leaves 10,000 connections
/// room within a 20,000-file limit; a miss costs one `open`.
pub(crate) const LOG_FILES_MAX_DEFAULT: usize = 4096;
/// Default `DirConfig::recovery_threads`.
pub(crate) const RECOVERY_THREADS_DEFAULT: usize = 4;
/// Most `DirConfig::recovery_threads`: past this, threads only add contention for the disk.
pub(crate) const RECOVERY_THREADS_MAX: usize = 256;
/// Default `DirConfig::files_reserved`.
pub(crate) const FILES_RESERVED_DEFAULT: u64 = 1024;
/// Descriptors one new log can add to the open ones: its active segment's `.log`, while it is
/// among the `DirConfig::log_files_max` most recently used (indexes and views are mapped and
/// hold none).
pub(crate) const FILES_PER_LOG: u64 = 1;
/// Memory maps one idle log holds: its active segment's two indexes and `.log` view (each
/// sealed segment adds two, its indexes). Counted against `vm.max_map_count`.
pub(crate) const MAPS_PER_LOG: u64 = 3;

const _: () = assert!(SEGMENT_BYTES_DEFAULT <= SEGMENT_BYTES_MAX);
const _: () = assert!(SEGMENT_BYTES_MIN <= SEGMENT_BYTES_DEFAULT);
const _: () = assert!((BATCH_BYTES_MAX_DEFAULT as u64) <= SEGMENT_BYTES_DEFAULT);
const _: () = assert!(INDEX_BYTES_MIN as usize >= 4 * TIME_INDEX_ENTRY_BYTES);
const _: () = assert!(INDEX_WARM_BYTES % OFFSET_INDEX_ENTRY_BYTES == 0);
const _: () = assert!(HEADER_READ_BYTES as u64 <= SEGMENT_BYTES_MIN);
const _: () = assert!(LOGS_MAX_DEFAULT <= HIGH_WATERMARK_ENTRIES_MAX);
const _: () = assert!(LOGS_MAX_DEFAULT <= OFFSET_CHECKPOINT_ENTRIES_MAX);
const _: () = assert!(
    OFFSET_CHECKPOINT_ENTRIES_MAX as u64 * OFFSET_CHECKPOINT_LINE_BYTES_MAX + 64
        <= OFFSET_CHECKPOINT_BYTES_MAX
);
const _: () = assert!(
    HIGH_WATERMARK_ENTRIES_MAX as u64 * HIGH_WATERMARK_LINE_BYTES_MAX + 2 + 7
        <= HIGH_WATERMARK_CHECKPOINT_BYTES_MAX
);
