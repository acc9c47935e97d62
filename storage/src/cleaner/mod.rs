//! The log cleaner's storage side (Kafka's `Cleaner`, `LogCleanerManager.cleanableOffsets` and
//! `SkimpyOffsetMap`): planning which range of a compacted log to clean (`plan`, pure), the
//! bounded key map (`offset_map`), the rule for each batch (`filter`, pure), the transaction
//! rules (`txn`, pure: aborted batches, markers, the cleaned segment's aborted-index entries),
//! the I/O throttle's arithmetic (`throttle`, pure), the data directory's first-dirty offsets
//! (`checkpoint`) and the swap manifest (`swap`). The clean pass itself is `Log::clean` (`log/clean.rs`), which reads
//! and writes the files. Owns no thread, no clock and no schedule: the embedder (the broker's
//! cleaner threads) decides which log to clean and when, with [`choose_filthiest`].
//!
//! # Crash safety of a cleaning
//!
//! A cleaning rewrites the segments from the log start to the end of its mapped dirty section in
//! groups (Kafka's `groupSegmentsBySize`); each group becomes one segment named by the group's
//! first base offset, swapped in alone and in order, so after any crash the swapped groups form
//! a prefix. Why a prefix is enough: a record is dropped only for a later record of its key
//! (which is in the same or a later group, swapped or not), and a tombstone only after the
//! older records of its key, which lie in earlier groups, are gone. Each group's swap:
//! 1. the new segment's `.log` is written as `<base>.log.cleaned`, fsynced, its name fsynced;
//! 2. the manifest `cleaner-swap` (the group's old base offsets, the new file's length and
//!    CRC32C, the group's end offset) is written atomically: the commit point;
//! 3. the old first segment's indexes are removed and `<base>.log.cleaned` is renamed over
//!    `<base>.log`; the directory is fsynced;
//! 4. only then the group's other old segments are removed; the directory is fsynced;
//! 5. the log's recovery point rises to the group's end (everything below it is now in fsynced
//!    files) and the directory's offset checkpoint is written;
//! 6. the manifest is removed.
//!
//! Recovery at open (`log/load.rs`): no manifest: any `.cleaned` file is removed (roll back).
//! A manifest: if `<base>.log.cleaned` is there, steps 3–5 are redone; if not, `<base>.log` is
//! the new file if its length and CRC32C match the manifest (steps 4–5 are redone), else the
//! rename was lost before its fsync, nothing old was removed yet, and the group stays as it was.
//! Indexes are rebuilt from the log. A cleaned segment may end before the next one begins (its
//! last records were compacted away); recovery accepts such a gap below the recovery point of a
//! log that compacts or was ever cleaned (it has a cleaner checkpoint entry), which step 5 and
//! the entry written before the first swap guarantee.

mod checkpoint;
mod filter;
mod offset_map;
mod plan;
mod swap;
mod throttle;
mod txn;

pub(crate) use checkpoint::CleanerCheckpoints;
pub(crate) use filter::{filter_batch, FilterCounts, FilterRules, Filtered};
pub use offset_map::{OffsetMap, OFFSET_MAP_SLOT_BYTES};
pub use plan::{choose_filthiest, CleanPlan};
pub(crate) use plan::{plan, LogOffsets, SegmentSummary};
pub(crate) use swap::{SwapManifest, SWAP_MANIFEST_FILE};
pub use throttle::throttle_pause;
pub(crate) use txn::CleanedTxns;

use crate::error::{Error, Result};
use crate::limits;

/// What a clean pass calls back into its embedder for.
pub trait CleanHooks {
    /// `bytes` were just read or written. May sleep: the broker's I/O throttle
    /// (`log.cleaner.io.max.bytes.per.second`, with [`throttle_pause`]).
    fn on_io(&mut self, bytes: u64);

    /// Asked between batches of work; `false` aborts the pass ([`CleanError::Aborted`]), for a
    /// shutdown or a deleted topic. Default: go on.
    fn keep_going(&mut self) -> bool {
        true
    }
}

/// Hooks that neither throttle nor abort.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl CleanHooks for NoHooks {
    fn on_io(&mut self, _bytes: u64) {}
}

/// One cleaner thread's working memory (Kafka's `Cleaner`): the offset map and the read and
/// write buffers, reused across cleanings.
#[derive(Debug)]
pub struct Cleaner {
    pub(crate) map: OffsetMap,
    /// Bytes each of the read and write buffers starts at (Kafka's
    /// `log.cleaner.io.buffer.size`); a larger batch grows the read buffer to its size, up to
    /// the log's `batch_bytes_max`.
    pub(crate) io_buffer_bytes: usize,
    pub(crate) read_buffer: Vec<u8>,
    pub(crate) write_buffer: Vec<u8>,
    pub(crate) scratch: Vec<u8>,
}

impl Cleaner {
    /// A cleaner with an offset map of `map_bytes` at `load_factor` (see
    /// [`OffsetMap::with_memory`]) and I/O buffers of `io_buffer_bytes` each (in
    /// `[CLEANER_IO_BUFFER_BYTES_MIN, CLEANER_IO_BUFFER_BYTES_MAX]`).
    pub fn new(map_bytes: usize, load_factor: f64, io_buffer_bytes: usize) -> Result<Self> {
        if !(limits::CLEANER_IO_BUFFER_BYTES_MIN..=limits::CLEANER_IO_BUFFER_BYTES_MAX)
            .contains(&io_buffer_bytes)
        {
            return Err(Error::InvalidConfig(format!(
                "cleaner I/O buffer of {io_buffer_bytes} bytes not in [{}, {}]",
                limits::CLEANER_IO_BUFFER_BYTES_MIN,
                limits::CLEANER_IO_BUFFER_BYTES_MAX
            )));
        }
        Ok(Self {
            map: OffsetMap::with_memory(map_bytes, load_factor)?,
            io_buffer_bytes,
            read_buffer: vec![0; io_buffer_bytes],
            write_buffer: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// Shrinks the buffers back to `io_buffer_bytes` after a pass that grew them for a large
    /// batch (Kafka's `restoreBuffers`), so an idle cleaner holds its configured memory only.
    pub(crate) fn restore_buffers(&mut self) {
        self.read_buffer.truncate(self.io_buffer_bytes);
        self.read_buffer.shrink_to_fit();
        self.write_buffer.clear();
        self.write_buffer.shrink_to(self.io_buffer_bytes);
        self.scratch.clear();
        self.scratch.shrink_to(self.io_buffer_bytes);
    }

    /// The offset map (its utilization after a pass is Kafka's "Buffer utilization").
    pub fn map(&self) -> &OffsetMap {
        &self.map
    }
}

/// What one clean pass did: the figures of Kafka's cleaner log lines and metrics.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct CleanStats {
    /// The dirty section mapped: `[first_dirty_offset, end_offset)` (Kafka's "dirty section").
    pub first_dirty_offset: i64,
    /// End of the mapped dirty section; the log's new first dirty offset.
    pub end_offset: i64,
    /// Whether the map held the whole cleanable range (if not, the next pass goes on from
    /// `end_offset`).
    pub complete: bool,
    /// Bytes read building the map.
    pub map_bytes_read: u64,
    /// Records read building the map.
    pub map_records_read: u64,
    /// Bytes read recopying segments.
    pub bytes_read: u64,
    /// Bytes written to the cleaned segments.
    pub bytes_written: u64,
    /// Records read recopying.
    pub records_read: u64,
    /// Records written.
    pub records_written: u64,
    /// Records without a key dropped (Kafka's "invalid messages").
    pub invalid_records: u64,
    /// Tombstones dropped past their delete horizon.
    pub tombstones_dropped: u64,
    /// Records of aborted transactions dropped.
    pub aborted_records_dropped: u64,
    /// Transaction markers dropped past their delete horizon.
    pub markers_dropped: u64,
    /// The offset map's utilization after mapping (0 to 1).
    pub map_utilization: f64,
    /// Segments rewritten, and the segments they became.
    pub segments_before: usize,
    /// Segments the groups became.
    pub segments_after: usize,
}

/// Why a clean pass did not complete.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// The log changed under the pass (truncated, its start moved, deleted, closed, its policy
    /// no longer compacts) or the hooks asked to stop: nothing of the unfinished group was
    /// swapped in and its files are gone. Retry later.
    #[error("cleaning aborted: {0}")]
    Aborted(&'static str),
    /// The pass failed (I/O, a batch the cleaner cannot read, an offset map too small for one
    /// batch): the embedder marks the log uncleanable, as Kafka does. The log still serves.
    #[error("cleaning failed: {0}")]
    Failed(#[from] Error),
}
