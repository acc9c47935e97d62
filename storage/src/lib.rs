//! Skiff's storage engine: an embeddable, Kafka-shaped log of v2 record batches.
//!
//! ```
//! use skiff_protocol::records::record::{BatchBuilder, NewRecord};
//! use skiff_protocol::records::Compression;
//! use skiff_storage::{LogConfig, LogDir};
//!
//! // A producer's v2 batch: one record with value "hi" (the base offset is the log's to assign).
//! fn batch() -> Vec<u8> {
//!     let mut builder = BatchBuilder::new(0, Compression::None);
//!     let record = NewRecord {
//!         offset_delta: 0,
//!         timestamp: 1_000,
//!         key: None,
//!         value: Some(b"hi"),
//!         headers: &[],
//!     };
//!     builder.push(&record).expect("record fits");
//!     builder.build().expect("batch builds")
//! }
//!
//! # fn main() -> Result<(), skiff_storage::Error> {
//! let dir = tempfile::tempdir().expect("temp dir");
//! let data = LogDir::open(dir.path(), LogConfig::default())?;
//! let log = data.create("orders", 0, None)?;
//! let now_ms = 1_700_000_000_000; // storage never reads a clock: time is an argument
//! let info = log.append(&mut batch(), now_ms)?;
//! assert_eq!((info.base_offset, info.last_offset), (0, 0));
//! log.append(&mut batch(), now_ms)?; // offsets are assigned by the log
//! data.close()?; // flush, checkpoint, clean-shutdown marker
//!
//! let data = LogDir::open(dir.path(), LogConfig::default())?;
//! let log = data.log("orders", 0)?.expect("log exists");
//! assert_eq!(log.log_end_offset()?, 2);
//! let slice = log.read(1, 1 << 20, true)?; // (file, position, len) for sendfile
//! let bytes = slice.bytes()?; // or borrow the bytes through a memory map
//! assert_eq!(&bytes[..8], &1i64.to_be_bytes()); // the second batch, base offset 1
//! # Ok(())
//! # }
//! ```
//!
//! # Model
//!
//! A [`LogDir`] is a data directory with one [`Log`] per partition (`<topic>-<partition>/`). A log
//! is a sequence of segments named by their 20-digit base offset: `.log` holds the v2 batches
//! exactly as producers sent them (only the base offset is rewritten on append), `.index` maps
//! offsets to positions (sparse, memory-mapped), `.timeindex` maps timestamps to offsets. The
//! directory's `skiff-offset-checkpoint` holds every log's log start offset and recovery point
//! (written by [`LogDir::checkpoint_recovery_points`], which the embedder calls periodically,
//! and at close; at once only when a truncation or a recovery lowers one; a start moved by
//! retention or DeleteRecords waits for the next periodic write, as in Kafka, so a crash may
//! undo such a move since the last one; a per-log `checkpoint` file of an older Skiff is still
//! read); indexes are caches that
//! recovery rebuilds from the log, which is the truth. `leader-epoch-checkpoint` (Kafka's format)
//! holds the leader-epoch cache: where each leader epoch's batches start
//! ([`Log::append_with_epoch`] stamps the epoch on each batch, [`Log::end_offset_for_epoch`]
//! answers OffsetsForLeaderEpoch); recovery trims it to the recovered log, or rebuilds it from the
//! batch headers if it is missing or corrupt.
//!
//! # Transactions
//!
//! Each segment may have a `.txnindex` (Kafka's aborted-transaction index: 34-byte entries,
//! producer id, first offset, ABORT marker offset, last stable offset). The partition writes an
//! entry with [`Log::append_aborted_txn`] right after each ABORT marker it appends, leader and
//! follower alike; [`Log::aborted_transactions`] answers a read_committed fetch's
//! `aborted_transactions` (bounded by [`ABORTED_TXNS_PER_READ_MAX`]). The recovery point never
//! passes an ABORT marker whose entry is not written, a flush syncs the index with the log, and
//! recovery checks unsynced entries against the log's markers (cutting a marker the crash left
//! without its entry); truncation, retention, DeleteRecords and the cleaner's swap take the file
//! with its segment. [`Log::write_producer_snapshot`] keeps the partition's producer state as
//! opaque, CRC-checked `<offset>.snapshot` files, so that an open replays only the batches after
//! [`Log::latest_producer_snapshot`]. [`LogDir::set_transactional_guard`] runs the embedder's
//! hook once before the first transactional batch is written (the broker marks the directory so
//! that the previous release refuses it).
//!
//! A follower replica writes its log with three calls of its own. [`Log::append_replicated`]
//! appends its leader's batches as they are, offsets and epochs kept (Kafka's
//! `appendAsFollower`): they must continue the log ([`Error::UnexpectedAppendOffset`]) and carry
//! no epoch below the latest ([`Error::EpochBelowLatest`]), so the follower's segments hold the
//! leader's bytes. [`Log::truncate_to`] cuts a diverged tail. [`Log::truncate_fully_and_start_at`]
//! deletes every segment and starts the log empty at the leader's start (Kafka's
//! `truncateFullyAndStartAt`), in an order of writes after which a crash leaves the old log, a
//! prefix of it, or the new empty log. The data directory holds the replicas' high watermarks in
//! `replication-offset-checkpoint` (Kafka's format: version `0`, a count, `topic partition
//! offset` lines), written whole and atomically by [`LogDir::write_high_watermarks`] when the
//! embedder says; [`LogDir::read_high_watermarks`] reads it strictly (damage is
//! [`Error::Corrupt`]; its doc says why starting from the log start instead is safe).
//!
//! # Compaction
//!
//! A log whose [`LogConfig::cleanup_policy`] compacts ([`CleanupPolicy::Compact`] or
//! [`CleanupPolicy::CompactDelete`]; retention by time and size applies only when it deletes) is
//! cleaned as Kafka's log cleaner does, driven by the embedder, which owns the threads, the
//! schedule and the clock:
//! - [`Log::cleaning_plan`] (upper bound: the high watermark or last stable offset, and the
//!   time) answers a [`CleanPlan`]: the cleanable range (never the active segment, nothing
//!   newer than `min_compaction_lag_ms`, nothing at or past the bound), the dirty ratio and the
//!   compaction delay (`max_compaction_lag_ms`); [`choose_filthiest`] picks among many logs;
//! - a [`Cleaner`] (one per cleaner thread) holds the bounded key map ([`OffsetMap`]: 20-byte
//!   slots, memory and load factor given) and the I/O buffers;
//! - [`Log::clean`] maps the dirty section's keys (in passes if they do not fit), recopies the
//!   log from its start keeping each key's latest record at its own offset (so a compacted log
//!   has gaps), drops keyless records and tombstones past their delete horizon (written into
//!   the batch's base timestamp on the first cleaning that passes them, KIP-534), keeps the
//!   last batch of each live idempotent producer, merges small segments, and swaps the result in
//!   crash-safely while appends and reads go on; [`CleanHooks`] throttles it
//!   ([`throttle_pause`]) or stops it; [`CleanError`] tells a retryable abort (a truncation, a
//!   moved log start) from a failure (mark the log uncleanable). [`CleanStats`] carries the
//!   figures of Kafka's log lines and metrics.
//!
//! Each log's first dirty offset lives in the directory's `cleaner-offset-checkpoint` (Kafka's
//! file), lowered by truncation and dropped with the log. Reads, time lookups, the time index
//! and [`Log::append_replicated`] (a follower of a compacted leader) accept the gaps; a record's
//! timestamp is always base timestamp + delta.
//!
//! # Limits
//!
//! - A segment is at most `u32::MAX` bytes (`segment_bytes`, default 1 GiB): index positions are
//!   4 bytes, and so are offsets relative to a segment's base.
//! - One batch is at most `batch_bytes_max` (default 1 MiB + 12, Kafka's `max.message.bytes`).
//! - The high-watermark checkpoint holds at most 200,000 partitions (ten times the default
//!   `logs_max`) and is read back only up to 64 MiB.
//! - Topic names: ASCII letters, digits, `.`, `_`, `-`, at most 249 bytes.
//! - Durability is what [`PersistMode`] and the flush policy in [`LogConfig`] say; a failed write
//!   or fsync poisons the log ([`Error::Poisoned`]) until the directory is reopened.
//! - One process (and one [`LogDir`]) per directory, enforced by a lock file.
//! - A log holds no descriptor of its own (indexes and the active `.log` view are mapped; a mapping
//!   needs none) and three memory maps, plus two maps per sealed segment; every segment's `.log`
//!   descriptor comes from a set bounded by [`DirConfig::log_files_max`]. A directory holds at most
//!   [`DirConfig::logs_max`] logs, and [`LogDir::check_room`] refuses logs the open-file limit or
//!   `vm.max_map_count` cannot hold ([`Error::LimitReached`]).
//! - Storage never reads a clock: times are arguments (`append`, `roll_if_needed`,
//!   `enforce_retention`, `cleaning_plan`, `clean`).
//! - A cleaner's key map is 1 KiB to 2 GiB; its I/O buffers 4 KiB to 64 MiB each (a larger
//!   batch grows the read buffer to its size, up to the log's `batch_bytes_max`, for one pass).
//!
//! # Layout
//!
//! `log_dir` (data directory), `log` (one partition), `segment` (one base offset),
//! `offset_index`/`time_index` (entry types) over `sparse_index` (their shared shape) over
//! `index_file` (mapped entries), `txn_index` (the `.txnindex` file), `producer_snapshot` (the
//! `.snapshot` framing), `downgrade_guard` (the hook before the first transactional batch),
//! `recovery` (the batch scan),
//! `leader_epoch` (the leader-epoch cache and its `leader-epoch-checkpoint` file),
//! `high_watermark` (the text of the data directory's `replication-offset-checkpoint`),
//! `fetch` ([`FetchSlice`]), `log_files` (the bounded open descriptors of segment files),
//! `resources` (the process's open-file and mapping limits), `cleaner` (the log cleaner's pure
//! planning, key map, batch filter and throttle arithmetic, its checkpoint and swap manifest;
//! the pass itself is `log/clean.rs`), `config`, `limits`, `fs` (names and atomic files), `io`
//! (every file operation, injectable), `mmap` (the only `unsafe`), `error`.

#![deny(missing_docs, unreachable_pub)]
// The workspace's lint wall (root Cargo.toml) holds for library code; test code is exempt.
// clippy.toml lets tests unwrap, expect, panic and index; clippy has no such setting for casts,
// so the test build (whose library code the non-test build lints anyway) allows those two.
#![cfg_attr(test, allow(clippy::cast_possible_truncation, clippy::cast_sign_loss))]

mod cleaner;
mod config;
mod downgrade_guard;
mod error;
mod fetch;
mod fs;
mod high_watermark;
mod index_file;
mod io;
mod leader_epoch;
mod limits;
mod log;
mod log_dir;
mod log_files;
mod mmap;
mod offset_checkpoint;
mod offset_index;
mod producer_snapshot;
mod recovery;
mod resources;
mod segment;
mod sparse_index;
mod time_index;
mod txn_index;

#[cfg(test)]
#[path = "../tests/support/batch.rs"]
mod testing;
#[cfg(test)]
#[path = "../tests/support/temp.rs"]
mod testing_temp;

pub use cleaner::{
    choose_filthiest, throttle_pause, CleanError, CleanHooks, CleanPlan, CleanStats, Cleaner,
    NoHooks, OffsetMap, OFFSET_MAP_SLOT_BYTES,
};
pub use config::{CleanupPolicy, DirConfig, LogConfig, PersistMode, Ratio};
pub use downgrade_guard::TransactionalHook;
pub use error::{Error, Result};
pub use fetch::FetchSlice;
pub use fs::{write_file_atomically, AppendFile, DurableFiles};
pub use high_watermark::HighWatermark;
pub use leader_epoch::{
    EpochCache, EpochEndOffset, EpochEntry, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET,
};
pub use limits::{BATCH_BYTES_MAX_DEFAULT, CLEANER_IO_BUFFER_BYTES_MAX, OFFSET_MAP_BYTES_MAX};
pub use log::{AppendInfo, Log, TimestampOffset, ABORTED_TXNS_PER_READ_MAX};
pub use log_dir::LogDir;
pub use producer_snapshot::{ProducerSnapshot, PRODUCER_SNAPSHOT_BYTES_MAX};
/// What [`Log::verify_indexes`] reports (feature `power-sim`).
#[cfg(feature = "power-sim")]
pub use segment::IndexMismatch;

/// The simulated power cut for tests (feature `power-sim`): see [`sim::SimIo`].
#[cfg(feature = "power-sim")]
pub use io::sim;
