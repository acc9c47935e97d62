//! The lazy chunked down-converter (KIP-283, docs/design/downconversion.md §3): serves a Fetch
//! v0–v3 partition from a slice of stored v2 batches as magic 0 or 1, fed in bounded pieces,
//! sans-IO.
//!
//! The broker never maps or loads the whole slice. A [`DownConverter`] tells it which byte range of
//! the slice it needs next ([`SourceRange`], relative to the slice start: whole batches, about
//! `chunk_bytes` of them, at least one batch; while preparing, a few KiB or exactly the one batch
//! those showed), the broker preads exactly that range and passes it to
//! [`DownConverter::feed`], and the converter yields converted output. Two phases:
//!
//! * **prepare** ([`DownConverter::prepare_step`]): converts one source batch at a time until the
//!   first one that converts to something, keeps that output, and fixes the declared size
//!   `max(slice bytes, first converted batch)` (§3.2). A zstd or corrupt first batch is an error
//!   ([`RecordError::error_code`] gives 76 or 2).
//! * **write** ([`DownConverter::write_step`]): converts chunks of whole batches, about
//!   `chunk_bytes` of source each (at least one batch), read `read_bytes` at a time (cut to whole
//!   batches once a batch's length is known) and appended to one output buffer, yielded when the
//!   next batch would not fit; the output is cut at the declared size, then padded with the
//!   overflow entries of §3.5 byte for byte, in pieces of at most [`OVERFLOW_PIECE_BYTES`]. Exactly
//!   `declared` bytes come out in total. The caller may hand a written chunk's buffer back
//!   ([`DownConverter::reuse_buffer`]) so chunks after the first allocate nothing.
//!
//! Memory: the converter needs at most one fed source piece (at most `max(read_bytes, one batch)`
//! bytes, a batch bounded by `batch_bytes_max`) plus the chunk of output being built (about
//! `chunk_bytes`, and at most `chunk_bytes` plus one batch's output; for a compressed batch also
//! its decompressed records); [`Stats`] records the largest of each so tests can check. A prepared
//! partition waiting for its turn on the wire can be [`DownConverter::park`]ed: about a hundred
//! bytes instead of the converter's few hundred. The prepare phase depends only on the slice's
//! bytes, so a caller may also drop the prepared converter, keep only the declared size, and
//! prepare a new one at the partition's turn: it fixes the same size and writes the same bytes
//! (the broker does so, keeping nothing of the converter while a partition waits).
//!
//! Choices where Kafka is wrong or unhelpful (§3.7), each tested below:
//!
//! * **D1** (duplicate delivery): after the prepare phase the source resumes right after the batch
//!   that produced the kept output, so batches that converted to nothing are never re-read and the
//!   kept batch is never sent twice.
//! * **D2/D3** (everything in the slice converts to nothing: only control batches, or compacted
//!   records all below the fetch offset): the declared size is **0**, an empty record set, not
//!   Kafka's 12 bytes of padding. Every old client treats an empty set as "no data yet" and fetches
//!   the same offset again, which is right for a consumer sitting on a trailing marker; 12 bytes
//!   make 0.10.0/0.10.2 Java throw. The broker should treat such a partition as having no data for
//!   `min_bytes`/long-poll purposes ([`Prepared::dropped_bytes`] says how much was skipped), so the
//!   re-fetch waits instead of spinning; once data follows, D1's fix delivers it.
//! * **D4** (first batch larger than `partition_max_bytes`, so the slice holds no complete batch):
//!   with [`DownConvertConfig::serve_oversized_first_batch`] (the default), the converter asks for
//!   the whole batch even past the slice end (bounded by `batch_bytes_max`; the only request that
//!   may pass `slice_bytes`) and serves it, like KIP-74's min-one-message does for Fetch v3+. An
//!   old client then makes progress instead of throwing (Kafka 2.x) or re-fetching forever (3.x).
//!   If the broker feeds fewer bytes than asked (log end), the batch is treated as absent.
//! * **zstd later in the slice**: batches before it are converted and sent, then padding (Kafka
//!   drops the whole chunk that holds it); the next fetch starts at the zstd batch and gets 76.
//! * **D7** (v2 timestamps below −1): written as −1 in v1 instead of failing the fetch.
//! * Corrupt batches after the first: padding from there on, like a zstd batch.
//!
//! Legacy read_committed ([`DownConverter::read_committed`], §3.8): an [`AbortedFilter`] built
//! from the range's aborted transactions is fed every source batch in order and the data batches
//! of aborted transactions are left out like control batches; its state travels with the
//! converter (parked too), so the memory bound above holds.
//!
//! Stats carry records converted, temporary bytes (source bytes converted plus uncompressed bytes
//! built, as Kafka counts them) and the largest pieces; time is measured by the broker (no clock
//! here).
//!
//! Must never: read a file, socket or clock; hold more than one source piece and its conversion;
//! allocate by a length read from the source before checking it against `batch_bytes_max`.

mod aborted;

pub use aborted::AbortedFilter;

use crate::records::compression::Compressor;
use crate::records::legacy::{self, DeepOptions, LegacySetBuilder};
use crate::records::record::batch_records;
use crate::records::v2::{BatchHeader, BATCH_HEADER_BYTES};
use crate::records::{Compression, Magic, RecordError, LOG_OVERHEAD_BYTES, MAGIC_OFFSET};

pub use crate::limits::{
    DOWN_CONVERT_BATCH_BYTES_MAX, DOWN_CONVERT_CHUNK_BYTES, DOWN_CONVERT_READ_BYTES,
};

/// Largest overflow buffer (Kafka's padding buffers are capped at 128 KiB, §3.5).
pub const OVERFLOW_PIECE_BYTES: usize = 128 * 1024;
/// Smallest length field an overflow entry carries: at least `RECORD_OVERHEAD_V0` (14) so 0.10.x
/// Java readers see a partial entry rather than a corrupt one, and the v2 batch minimum (61).
pub const OVERFLOW_LENGTH_MIN: i32 = 61;

/// Smallest entry in any format: a v0 message with null key and value (12 + 14 bytes).
const ENTRY_BYTES_MIN: usize = LOG_OVERHEAD_BYTES + legacy::RECORD_OVERHEAD_V0_BYTES;

/// Most source bytes one prepare-phase read asks for. The prepare phase converts only the first
/// batch that yields output, and the write phase reads again from that batch; a whole chunk read
/// here was read twice for every partition of every legacy response (about 11 % more reads with
/// 1 MB partitions, and 250 × 128 KiB for a 250-partition response before its first byte). A
/// small read takes a small batch whole and tells a larger one's length, which is then read
/// exactly (Kafka, too, prepares one batch at a time).
const PREPARE_READ_BYTES_MAX: u64 = 4 * 1024;

/// Knobs of one conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownConvertConfig {
    /// Source bytes per chunk (at least one batch is always taken).
    pub chunk_bytes: usize,
    /// Most source bytes per read while writing (at least one batch); capped at `chunk_bytes`.
    pub read_bytes: usize,
    /// Largest source batch accepted.
    pub batch_bytes_max: usize,
    /// Cap on one batch's decompressed records.
    pub decompressed_bytes_max: usize,
    /// D4: serve a first batch that extends past the slice end (see the module doc).
    pub serve_oversized_first_batch: bool,
}

impl Default for DownConvertConfig {
    fn default() -> Self {
        Self {
            chunk_bytes: DOWN_CONVERT_CHUNK_BYTES,
            read_bytes: DOWN_CONVERT_READ_BYTES,
            batch_bytes_max: DOWN_CONVERT_BATCH_BYTES_MAX,
            decompressed_bytes_max: crate::records::compression::DECOMPRESSED_BYTES_MAX,
            serve_oversized_first_batch: true,
        }
    }
}

/// Counts of one conversion, for the broker's metrics (`FetchMessageConversionsPerSec`,
/// `TemporaryMemoryBytes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records re-encoded (verbatim legacy batches count 0).
    pub records_converted: u64,
    /// Source bytes of converted batches plus uncompressed bytes built.
    pub temporary_bytes: u64,
    /// Source bytes fed by the broker.
    pub source_bytes_fed: u64,
    /// Largest source piece fed at once.
    pub largest_source_piece_bytes: usize,
    /// Largest converted output held at once (a chunk being built, or the kept first batch).
    pub largest_output_piece_bytes: usize,
    /// Records of aborted transactions left out (legacy read_committed, [`AbortedFilter`]).
    pub aborted_records_skipped: u64,
}

/// A byte range of the slice, relative to its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRange {
    /// First byte.
    pub start: u64,
    /// Bytes to read.
    pub len: usize,
}

/// Outcome of the prepare phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepared {
    /// The record-set size to write in the response; exactly this many bytes will be yielded.
    pub declared_bytes: u64,
    /// Source bytes skipped because they converted to nothing (control batches, records below the
    /// fetch offset) before the first converted batch, or in total when nothing converted.
    pub dropped_bytes: u64,
}

/// What the prepare phase needs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prepare {
    /// Read this range of the slice and pass it to [`DownConverter::feed`].
    Read(SourceRange),
    /// The declared size is fixed.
    Ready(Prepared),
}

/// What the write phase needs or yields next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Read this range of the slice and pass it to [`DownConverter::feed`].
    Read(SourceRange),
    /// Write these bytes to the client (in order).
    Output(Vec<u8>),
    /// Every declared byte has been yielded.
    Done,
}

#[derive(Debug)]
enum Source {
    /// More source may follow at `position`.
    Open,
    /// No more source will be converted (end, partial tail, zstd or corrupt batch): pad.
    Exhausted,
}

/// The lazy converter for one partition of one Fetch v0–v3 response.
#[derive(Debug)]
pub struct DownConverter {
    config: DownConvertConfig,
    target: Magic,
    fetch_offset: i64,
    /// End of the source (the slice length, or the end of an oversized first batch, D4).
    source_end: u64,
    /// Next unconverted source byte.
    position: u64,
    requested: Option<SourceRange>,
    source: Source,
    prepared: Option<Prepared>,
    dropped_bytes: u64,
    /// Converted bytes waiting to be yielded: the chunk being built.
    ready: Option<Vec<u8>>,
    /// Source bytes converted into `ready` so far.
    chunk_source_bytes: u64,
    /// Length of the entry at `position`, when the last piece showed its header: the next read
    /// then covers whole batches instead of cutting one (which would be read twice).
    next_entry_bytes: Option<u64>,
    /// An output buffer the caller handed back ([`DownConverter::reuse_buffer`]): the next chunk
    /// is built in it.
    spare: Vec<u8>,
    /// Source position and length of the batch whose conversion the prepare phase kept in `ready`.
    kept: Option<(u64, u64)>,
    yielded_bytes: u64,
    stats: Stats,
    /// Legacy read_committed: the aborted-transaction filter, fed every source entry once in
    /// order (the kept first batch twice, which changes nothing).
    filter: Option<Box<AbortedFilter>>,
    /// Decompressed records (dropped after each piece) and the compressor, which is reused from
    /// batch to batch while this partition is written and dropped after the prepare phase and at
    /// the end, so a response's many prepared-but-waiting partitions hold none (the memory rule of
    /// the module doc).
    workspace: Workspace,
}

/// What converting a batch needs besides its bytes, kept by the caller from batch to batch: room
/// for the decompressed records of a compressed source batch, and the compression state for a
/// compressed target (see [`Compressor`]).
#[derive(Debug, Default)]
pub struct Workspace {
    scratch: Vec<u8>,
    compressor: Compressor,
}

/// How the entries at the start of a fed piece divide up.
enum Entries {
    /// The first `n` bytes are whole entries (at least one).
    Whole(usize),
    /// The first entry is cut; it needs this many bytes in total.
    Cut(u64),
    /// Fewer than 12 bytes: not even an entry header (only at the end of the source).
    NoHeader,
}

/// Splits `bytes` into whole entries of at most `max_bytes` (but at least one).
fn whole_entries(bytes: &[u8], max_bytes: usize) -> Result<Entries, RecordError> {
    let mut used = 0usize;
    loop {
        let rest = bytes.get(used..).unwrap_or_default();
        // A bad entry after good ones ends the piece there; it is the first entry of the next
        // piece and reported then (as an error in prepare, as padding while writing).
        let total = match legacy::entry_bytes(rest) {
            Ok(Some(total)) if total >= ENTRY_BYTES_MIN => total,
            Ok(None) => break,
            Ok(Some(_)) if used == 0 => {
                return Err(RecordError::Corrupt {
                    reason: "entry smaller than any message",
                })
            }
            Err(error) if used == 0 => return Err(error),
            Ok(Some(_)) | Err(_) => break,
        };
        if total > rest.len() || (used > 0 && used + total > max_bytes) {
            if used == 0 {
                return Ok(Entries::Cut(u64::try_from(total).unwrap_or(u64::MAX)));
            }
            break;
        }
        used += total;
    }
    if used == 0 {
        return Ok(Entries::NoHeader);
    }
    Ok(Entries::Whole(used))
}

impl DownConverter {
    /// A converter for a slice of `slice_bytes` stored bytes, converting to `target` (V0 or V1) for
    /// a fetch at `fetch_offset`.
    pub fn new(
        slice_bytes: u64,
        target: Magic,
        fetch_offset: i64,
        config: DownConvertConfig,
    ) -> Result<Self, RecordError> {
        if target == Magic::V2 {
            return Err(RecordError::UnknownMagic { magic: 2 });
        }
        Ok(Self {
            config: normalized(config),
            target,
            fetch_offset,
            source_end: slice_bytes,
            position: 0,
            requested: None,
            source: Source::Open,
            prepared: None,
            dropped_bytes: 0,
            ready: None,
            chunk_source_bytes: 0,
            next_entry_bytes: None,
            spare: Vec::new(),
            kept: None,
            yielded_bytes: 0,
            stats: Stats::default(),
            filter: None,
            workspace: Workspace::default(),
        })
    }

    /// This converter for a legacy read_committed fetch: the records of aborted transactions
    /// (as `filter` tells them) are left out like control batches. Call before the first step.
    #[must_use]
    pub fn read_committed(mut self, filter: AbortedFilter) -> Self {
        debug_assert!(self.position == 0 && self.prepared.is_none());
        self.filter = Some(Box::new(filter));
        self
    }

    /// Counts so far (complete once [`Write::Done`] was returned).
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The declared size, once prepared.
    pub fn declared_bytes(&self) -> Option<u64> {
        self.prepared.map(|prepared| prepared.declared_bytes)
    }

    fn request(&mut self, len: u64) -> SourceRange {
        let len = len.min(self.source_end.saturating_sub(self.position));
        let range = SourceRange {
            start: self.position,
            len: usize::try_from(len).unwrap_or(usize::MAX),
        };
        self.requested = Some(range);
        range
    }

    fn chunk_request_len(&self) -> u64 {
        u64::try_from(self.config.chunk_bytes.max(BATCH_HEADER_BYTES)).unwrap_or(u64::MAX)
    }

    /// Advances the prepare phase.
    pub fn prepare_step(&mut self) -> Result<Prepare, RecordError> {
        if let Some(prepared) = self.prepared {
            return Ok(Prepare::Ready(prepared));
        }
        if let Some(range) = self.requested {
            return Ok(Prepare::Read(range));
        }
        if self.ready.is_some()
            || matches!(self.source, Source::Exhausted)
            || self.position >= self.source_end
        {
            let prepared = match &self.ready {
                Some(first) => Prepared {
                    declared_bytes: self
                        .source_end
                        .max(u64::try_from(first.len()).unwrap_or(u64::MAX)),
                    dropped_bytes: self.dropped_bytes,
                },
                None => Prepared {
                    declared_bytes: 0,
                    dropped_bytes: self.dropped_bytes,
                },
            };
            self.prepared = Some(prepared);
            return Ok(Prepare::Ready(prepared));
        }
        let len = self.chunk_request_len().min(PREPARE_READ_BYTES_MAX);
        Ok(Prepare::Read(self.request(len)))
    }

    /// Passes the bytes of the last requested range (fewer bytes mean the source ended there).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), RecordError> {
        let Some(range) = self.requested.take() else {
            return Err(RecordError::InvalidRecord {
                reason: "down-converter fed without a request",
            });
        };
        let bytes = bytes.get(..range.len).unwrap_or(bytes);
        self.stats.source_bytes_fed += u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        self.stats.largest_source_piece_bytes =
            self.stats.largest_source_piece_bytes.max(bytes.len());
        let preparing = self.prepared.is_none();
        let entries = match whole_entries(bytes, self.config.chunk_bytes) {
            Ok(entries) => entries,
            Err(error) if preparing => return Err(error),
            Err(_) => {
                self.source = Source::Exhausted;
                return Ok(());
            }
        };
        let used = match entries {
            Entries::Whole(used) => used,
            Entries::NoHeader => {
                // Requests are at least a header long unless the source ends: a partial tail.
                self.source = Source::Exhausted;
                return Ok(());
            }
            Entries::Cut(total) => {
                let end = self.position.saturating_add(total);
                let batch_bytes_max =
                    u64::try_from(self.config.batch_bytes_max).unwrap_or(u64::MAX);
                if total > batch_bytes_max {
                    if preparing {
                        return Err(RecordError::BatchTooLarge {
                            batch_bytes: total,
                            batch_bytes_max,
                        });
                    }
                    self.source = Source::Exhausted;
                } else if bytes.len() < range.len {
                    // The broker had fewer bytes than it was asked for: the source ends here.
                    self.source = Source::Exhausted;
                } else if end <= self.source_end {
                    self.next_entry_bytes = Some(total);
                    self.request(total);
                } else if preparing && self.config.serve_oversized_first_batch {
                    // D4: extend the source to this batch's end (see the module doc).
                    self.source_end = end;
                    self.next_entry_bytes = Some(total);
                    self.request(total);
                } else {
                    self.source = Source::Exhausted;
                }
                return Ok(());
            }
        };
        // One allocation for the chunk in the common case: v0/v1 entries are a few percent larger
        // than v2 records of 1 KiB; `convert_entry` still reserves exactly per batch when a batch
        // of tiny records grows more than this.
        let mut out = match self.ready.take() {
            Some(out) => out,
            None => self.output_buffer(used, preparing),
        };
        let mut converted = 0usize;
        let mut failure = None;
        for entry in EntrySlices::new(bytes.get(..used).unwrap_or_default()) {
            let before = out.len();
            if let Err(error) = self.convert_one(entry, &mut out) {
                failure = Some(error);
                break;
            }
            converted += entry.len();
            if preparing {
                if out.len() > before {
                    let kept_start = self
                        .position
                        .saturating_add(u64::try_from(converted - entry.len()).unwrap_or(0));
                    self.kept = Some((kept_start, u64::try_from(entry.len()).unwrap_or(0)));
                    break;
                }
                self.dropped_bytes += u64::try_from(entry.len()).unwrap_or(0);
            }
        }
        self.position += u64::try_from(converted).unwrap_or(0);
        self.chunk_source_bytes += u64::try_from(converted).unwrap_or(0);
        self.next_entry_bytes = match failure {
            None => self.entry_bytes_at(bytes.get(converted..).unwrap_or_default()),
            Some(_) => None,
        };
        if preparing {
            self.workspace = Workspace::default();
        } else {
            self.workspace.scratch = Vec::new();
        }
        if let Some(error) = failure {
            if preparing && out.is_empty() {
                return Err(error);
            }
            self.source = Source::Exhausted;
        }
        if out.is_empty() {
            // Nothing converted yet (control batches, records below the fetch offset): no chunk
            // is being built, and the buffer waits for the next piece.
            self.chunk_source_bytes = 0;
            self.spare = out;
        } else {
            self.stats.largest_output_piece_bytes =
                self.stats.largest_output_piece_bytes.max(out.len());
            self.ready = Some(out);
        }
        Ok(())
    }

    /// Converts one whole entry into `out`, or leaves it out (a read_committed filter's aborted
    /// batch converts to nothing, like a control batch).
    fn convert_one(&mut self, entry: &[u8], out: &mut Vec<u8>) -> Result<(), RecordError> {
        if skips_aborted(self.filter.as_deref_mut(), entry, &mut self.stats) {
            return Ok(());
        }
        convert_entry(
            entry,
            self.target,
            self.fetch_offset,
            &self.config,
            &mut self.workspace,
            out,
            &mut self.stats,
        )
    }

    /// The length of the entry `rest` starts with, if its header is there and the length is one a
    /// read may ask for (a bad length is reported when that entry is fed).
    fn entry_bytes_at(&self, rest: &[u8]) -> Option<u64> {
        match legacy::entry_bytes(rest) {
            Ok(Some(total)) if (ENTRY_BYTES_MIN..=self.config.batch_bytes_max).contains(&total) => {
                u64::try_from(total).ok()
            }
            _ => None,
        }
    }

    /// The buffer a new chunk (or the prepare phase's first batch) is built in: the one the caller
    /// handed back, or a new one, with room for the output expected. v0/v1 entries are a few
    /// percent larger than v2 records of 1 KiB, so a quarter more than the source is one allocation
    /// in the common case; `convert_entry` still reserves per batch when a batch of tiny records
    /// grows more. While writing, the room is for the whole chunk (or what is left of the source),
    /// so the reads that fill it do not grow it step by step.
    fn output_buffer(&mut self, piece_bytes: usize, preparing: bool) -> Vec<u8> {
        let expected = if preparing {
            piece_bytes
        } else {
            let left = self.source_end.saturating_sub(self.position);
            usize::try_from(left)
                .unwrap_or(usize::MAX)
                .min(self.config.chunk_bytes)
                .max(piece_bytes)
        };
        let mut buffer = std::mem::take(&mut self.spare);
        buffer.clear();
        buffer.reserve(expected.saturating_add(expected / 4));
        buffer
    }

    /// Whether more source may be converted.
    fn source_open(&self) -> bool {
        matches!(self.source, Source::Open) && self.position < self.source_end
    }

    /// Whether the chunk being built goes out now: it covers the declared size, the source has
    /// nothing more, its output has reached `chunk_bytes`, or the next batch (when its length is
    /// known) would take its source past `chunk_bytes`.
    fn chunk_is_due(&self, remaining: u64) -> bool {
        let built = u64::try_from(self.ready.as_ref().map_or(0, Vec::len)).unwrap_or(u64::MAX);
        let chunk = u64::try_from(self.config.chunk_bytes).unwrap_or(u64::MAX);
        built >= remaining
            || built >= chunk
            || !self.source_open()
            || self
                .chunk_source_bytes
                .saturating_add(self.next_entry_bytes.unwrap_or(1))
                > chunk
    }

    /// Bytes to ask for next while writing: when the next batch's length is known, as many whole
    /// batches of that length as fit in `read_bytes` and in what is left of the chunk (at least
    /// that one), plus the next entry's header when it fits too, so the read after knows its
    /// length; otherwise `read_bytes` (at least a batch header, so a length is always learnt).
    /// Reading whole batches matters: a read that cuts a batch reads its start twice.
    fn write_request_len(&self) -> u64 {
        let read = u64::try_from(self.config.read_bytes).unwrap_or(u64::MAX);
        let chunk = u64::try_from(self.config.chunk_bytes).unwrap_or(u64::MAX);
        let room = read.min(chunk.saturating_sub(self.chunk_source_bytes));
        let header = u64::try_from(LOG_OVERHEAD_BYTES).unwrap_or(12);
        match self.next_entry_bytes {
            Some(entry) if entry > 0 => {
                let batches = (room / entry).max(1);
                let len = batches.saturating_mul(entry);
                if len.saturating_add(header) <= room {
                    len + header
                } else {
                    len
                }
            }
            _ => room.max(u64::try_from(BATCH_HEADER_BYTES).unwrap_or(61)),
        }
    }

    /// Hands back the buffer of a [`Write::Output`] the caller has written: the next chunk is built
    /// in it (cleared, capacity kept) instead of a new allocation. The larger of it and a buffer
    /// already held is kept.
    pub fn reuse_buffer(&mut self, buffer: Vec<u8>) {
        if buffer.capacity() > self.spare.capacity() {
            self.spare = buffer;
        }
    }

    /// Takes the buffer handed back with [`DownConverter::reuse_buffer`] and not used since (after
    /// [`Write::Done`], for the next partition's converter); empty if there is none.
    pub fn take_buffer(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.spare)
    }

    /// Reduces a prepared converter that has not written yet to what its write phase needs (the
    /// kept first batch released, as [`DownConverter::release_prepared_output`] does): what a
    /// response keeps for each partition until its turn on the wire, about a hundred bytes instead
    /// of the converter (a few hundred) and the buffers it may hold. [`DownConverter::resume`]
    /// continues it with no byte changed.
    pub fn park(mut self) -> Result<Parked, RecordError> {
        self.release_prepared_output();
        let Some(prepared) = self.prepared else {
            return Err(RecordError::InvalidRecord {
                reason: "down-converter parked before it was prepared",
            });
        };
        if self.yielded_bytes > 0 || self.requested.is_some() || self.ready.is_some() {
            return Err(RecordError::InvalidRecord {
                reason: "down-converter parked while writing",
            });
        }
        Ok(Parked {
            target: self.target,
            exhausted: matches!(self.source, Source::Exhausted),
            fetch_offset: self.fetch_offset,
            source_end: self.source_end,
            position: self.position,
            next_entry_bytes: self.next_entry_bytes.unwrap_or(0),
            prepared,
            stats: self.stats,
            filter: self.filter,
        })
    }

    /// A converter that continues a [`Parked`] one (with the same `config` it was prepared with).
    pub fn resume(parked: Parked, config: DownConvertConfig) -> Self {
        Self {
            config: normalized(config),
            target: parked.target,
            fetch_offset: parked.fetch_offset,
            source_end: parked.source_end,
            position: parked.position,
            requested: None,
            source: if parked.exhausted {
                Source::Exhausted
            } else {
                Source::Open
            },
            prepared: Some(parked.prepared),
            dropped_bytes: parked.prepared.dropped_bytes,
            ready: None,
            chunk_source_bytes: 0,
            next_entry_bytes: (parked.next_entry_bytes > 0).then_some(parked.next_entry_bytes),
            spare: Vec::new(),
            kept: None,
            yielded_bytes: 0,
            stats: parked.stats,
            filter: parked.filter,
            workspace: Workspace::default(),
        }
    }

    /// Drops the converted batch the prepare phase kept, so that a prepared converter holds no
    /// converted bytes until its turn on the wire; the write phase converts that batch again. A
    /// response with many partitions would otherwise hold one converted batch per partition from
    /// the moment it is built (what Kafka's LazyDownConversionRecords does), instead of one chunk.
    /// Costs one batch converted twice (counted twice in [`Stats`]). Call it after
    /// [`Prepare::Ready`] and before the first [`DownConverter::write_step`]; otherwise it does
    /// nothing.
    pub fn release_prepared_output(&mut self) {
        if self.prepared.is_some() && self.yielded_bytes == 0 && self.requested.is_none() {
            if let (Some(_), Some((start, len))) = (self.ready.take(), self.kept.take()) {
                self.position = start;
                self.source = Source::Open;
                self.next_entry_bytes = Some(len);
                self.chunk_source_bytes = 0;
            }
        }
    }

    /// Advances the write phase (runs the prepare phase first if it was not run).
    pub fn write_step(&mut self) -> Result<Write, RecordError> {
        let declared = match self.prepare_step()? {
            Prepare::Read(range) => return Ok(Write::Read(range)),
            Prepare::Ready(prepared) => prepared.declared_bytes,
        };
        let remaining = declared.saturating_sub(self.yielded_bytes);
        if remaining == 0 {
            // A buffer handed back stays for `take_buffer`; nothing else is held.
            self.ready = None;
            self.workspace = Workspace::default();
            return Ok(Write::Done);
        }
        if self.chunk_is_due(remaining) {
            if let Some(mut output) = self.ready.take() {
                let len = u64::try_from(output.len()).unwrap_or(u64::MAX);
                if len > remaining {
                    output.truncate(usize::try_from(remaining).unwrap_or(usize::MAX));
                }
                self.yielded_bytes += u64::try_from(output.len()).unwrap_or(0);
                self.chunk_source_bytes = 0;
                return Ok(Write::Output(output));
            }
        }
        if let Some(range) = self.requested {
            return Ok(Write::Read(range));
        }
        if self.source_open() {
            let len = self.write_request_len();
            return Ok(Write::Read(self.request(len)));
        }
        let piece = overflow_piece(remaining);
        self.yielded_bytes += u64::try_from(piece.len()).unwrap_or(0);
        Ok(Write::Output(piece))
    }
}

/// A prepared converter waiting for its turn on the wire ([`DownConverter::park`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parked {
    target: Magic,
    exhausted: bool,
    fetch_offset: i64,
    source_end: u64,
    position: u64,
    /// 0 when unknown.
    next_entry_bytes: u64,
    prepared: Prepared,
    stats: Stats,
    /// The read_committed filter's state, carried to the write phase.
    filter: Option<Box<AbortedFilter>>,
}

impl Parked {
    /// The declared size fixed by the prepare phase.
    pub fn declared_bytes(&self) -> u64 {
        self.prepared.declared_bytes
    }
}

/// `config` with its sizes brought into range: a chunk of at least one byte, reads of at most a
/// chunk.
fn normalized(config: DownConvertConfig) -> DownConvertConfig {
    let chunk_bytes = config.chunk_bytes.max(1);
    DownConvertConfig {
        chunk_bytes,
        read_bytes: config.read_bytes.clamp(1, chunk_bytes),
        ..config
    }
}

/// Iterates the whole entries of a buffer already split by [`whole_entries`].
struct EntrySlices<'a> {
    rest: &'a [u8],
}

impl<'a> EntrySlices<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }
}

impl<'a> Iterator for EntrySlices<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let total = legacy::entry_bytes(self.rest).ok()??;
        let entry = self.rest.get(..total)?;
        self.rest = self.rest.get(total..).unwrap_or_default();
        Some(entry)
    }
}

/// One piece of overflow padding for `remaining` undelivered declared bytes (§3.5): a buffer of
/// `max(12, min(remaining + 1, 128 KiB))` bytes starting with offset −1 and length
/// `max(remaining + 1, 61)`, zeros after, of which only `min(buffer, remaining)` bytes are kept.
pub fn overflow_piece(remaining: u64) -> Vec<u8> {
    let buffer_bytes = remaining
        .saturating_add(1)
        .min(u64::try_from(OVERFLOW_PIECE_BYTES).unwrap_or(u64::MAX))
        .max(u64::try_from(LOG_OVERHEAD_BYTES).unwrap_or(12));
    let kept = usize::try_from(buffer_bytes.min(remaining)).unwrap_or(OVERFLOW_PIECE_BYTES);
    let length = i32::try_from(remaining.saturating_add(1))
        .unwrap_or(i32::MAX)
        .max(OVERFLOW_LENGTH_MIN);
    let mut header = [0u8; LOG_OVERHEAD_BYTES];
    if let Some(offset) = header.get_mut(..8) {
        offset.copy_from_slice(&(-1i64).to_be_bytes());
    }
    if let Some(field) = header.get_mut(8..12) {
        field.copy_from_slice(&length.to_be_bytes());
    }
    let mut piece = vec![0u8; kept];
    let head = kept.min(LOG_OVERHEAD_BYTES);
    if let (Some(dst), Some(src)) = (piece.get_mut(..head), header.get(..head)) {
        dst.copy_from_slice(src);
    }
    piece
}

/// Whether `entry` is a v2 data batch of an aborted transaction that `filter` (legacy
/// read_committed; none: read_uncommitted) leaves out; counts its records. A batch whose header
/// does not parse is not skipped here: its conversion reports it.
fn skips_aborted(filter: Option<&mut AbortedFilter>, entry: &[u8], stats: &mut Stats) -> bool {
    let Some(filter) = filter else {
        return false;
    };
    if entry.get(MAGIC_OFFSET).copied() != Some(2) {
        return false;
    }
    let Ok(header) = BatchHeader::parse(entry) else {
        return false;
    };
    if header.total_bytes() != entry.len() || !filter.skips(entry, &header) {
        return false;
    }
    stats.aborted_records_skipped += u64::from(header.records_count.unsigned_abs());
    true
}

/// Converts one complete source entry (a v2 batch, or a legacy v0/v1 entry of a mixed log) to
/// `target`, appending to `out` (§3.4 for one batch), with `workspace` kept from batch to batch.
pub fn convert_entry(
    entry: &[u8],
    target: Magic,
    fetch_offset: i64,
    config: &DownConvertConfig,
    workspace: &mut Workspace,
    out: &mut Vec<u8>,
    stats: &mut Stats,
) -> Result<(), RecordError> {
    let magic_byte = entry
        .get(MAGIC_OFFSET)
        .copied()
        .ok_or(RecordError::Corrupt {
            reason: "entry too short for a magic byte",
        })?;
    let magic = Magic::from_byte(i8::from_be_bytes([magic_byte]))?;
    let entry_bytes = u64::try_from(entry.len()).unwrap_or(u64::MAX);
    if magic <= target {
        // Old-format data in a mixed log is copied verbatim and not filtered by the fetch offset.
        out.extend_from_slice(entry);
        stats.temporary_bytes += entry_bytes;
        return Ok(());
    }
    if magic == Magic::V1 {
        return convert_legacy_entry(
            entry,
            target,
            fetch_offset,
            config,
            &mut workspace.compressor,
            out,
            stats,
        );
    }
    let header = BatchHeader::parse(entry)?;
    if header.total_bytes() != entry.len() {
        return Err(RecordError::InvalidBatchLength {
            batch_length: header.batch_length,
        });
    }
    if header.is_control() {
        return Ok(());
    }
    let codec = header.compression()?;
    if codec == Compression::Zstd {
        return Err(RecordError::UnsupportedCompression { codec });
    }
    let log_append_time = header.is_log_append_time().then_some(header.max_timestamp);
    let Workspace {
        scratch,
        compressor,
    } = workspace;
    let records = batch_records(entry, &header, scratch, config.decompressed_bytes_max)?;
    // The hot path (uncompressed v2 → v1/v0): one pass over the records, writing each message
    // straight into the output (no per-record allocation; crc32fast does the IEEE CRC). The room
    // reserved up front is an upper bound, not an exact size: every v2 record spends at least its
    // key and value bytes, so a legacy entry adds at most its fixed overhead on top, and the record
    // count was already checked against the bytes present. Sizing exactly took a second pass over
    // every varint. Compressed batches keep every record (§3.4 rule 4).
    let room_bytes = records.records_bytes().saturating_add(
        records
            .remaining_count()
            .saturating_mul(LOG_OVERHEAD_BYTES + legacy::message_bytes(target, 0, 0)),
    );
    let keep = |offset: i64| codec != Compression::None || offset >= fetch_offset;
    let start = out.len();
    let mut builder =
        LegacySetBuilder::new(target, codec, log_append_time)?.appending_to(std::mem::take(out));
    builder.reserve(room_bytes);
    let result = records
        .filter(|record| record.as_ref().map_or(true, |record| keep(record.offset)))
        .try_for_each(|record| {
            let record = record?;
            builder.append(record.offset, record.timestamp, record.key, record.value)
        })
        .and_then(|()| builder.finish_with(compressor));
    let converted = builder.len();
    let built = builder.uncompressed_bytes();
    *out = builder.into_buffer();
    if let Err(error) = result {
        // Never leave half a batch behind: callers pad after the last whole batch.
        out.truncate(start);
        return Err(error);
    }
    stats.records_converted += u64::try_from(converted).unwrap_or(0);
    stats.temporary_bytes += entry_bytes + u64::try_from(built).unwrap_or(0);
    Ok(())
}

/// A v1 entry of a mixed log converted to v0: decoded deeply, re-encoded with its own codec.
fn convert_legacy_entry(
    entry: &[u8],
    target: Magic,
    fetch_offset: i64,
    config: &DownConvertConfig,
    compressor: &mut Compressor,
    out: &mut Vec<u8>,
    stats: &mut Stats,
) -> Result<(), RecordError> {
    let message = legacy::parse_entry(entry)?.ok_or(RecordError::Corrupt {
        reason: "cut legacy entry",
    })?;
    let codec = message.compression()?;
    let mut records = Vec::new();
    let options = DeepOptions {
        verify_crc: false,
        decompressed_bytes_max: config.decompressed_bytes_max,
    };
    legacy::deep_entry(&message, &options, &mut records)?;
    let start = out.len();
    let mut builder = LegacySetBuilder::new(target, codec, None)?.appending_to(std::mem::take(out));
    let result = records
        .iter()
        .filter(|record| codec != Compression::None || record.offset >= fetch_offset)
        .try_for_each(|record| {
            builder.append(
                record.offset,
                record.timestamp,
                record.key.as_deref(),
                record.value.as_deref(),
            )
        })
        .and_then(|()| builder.finish_with(compressor));
    let converted = builder.len();
    let built = builder.uncompressed_bytes();
    *out = builder.into_buffer();
    if let Err(error) = result {
        out.truncate(start);
        return Err(error);
    }
    stats.records_converted += u64::try_from(converted).unwrap_or(0);
    stats.temporary_bytes +=
        u64::try_from(entry.len()).unwrap_or(0) + u64::try_from(built).unwrap_or(0);
    Ok(())
}

/// The eager reference: converts a whole in-memory slice at once and returns exactly the declared
/// bytes (or the prepare error). Used by the property test "any chunk size gives the eager bytes"
/// and by the benchmark's eager mode; the broker uses [`DownConverter`]. Written independently of
/// the state machine (sharing only the per-batch conversion and the padding layout) so the
/// comparison means something.
pub fn down_convert_eager(
    slice: &[u8],
    target: Magic,
    fetch_offset: i64,
    config: &DownConvertConfig,
) -> Result<(Vec<u8>, Stats), RecordError> {
    down_convert_eager_with(slice, target, fetch_offset, config, None)
}

/// [`down_convert_eager`] with the legacy read_committed filter when `filter` is given.
pub fn down_convert_eager_with(
    slice: &[u8],
    target: Magic,
    fetch_offset: i64,
    config: &DownConvertConfig,
    filter: Option<AbortedFilter>,
) -> Result<(Vec<u8>, Stats), RecordError> {
    let mut eager = Eager {
        target,
        fetch_offset,
        config,
        filter,
        stats: Stats::default(),
        workspace: Workspace::default(),
        out: Vec::new(),
    };
    let Some((first_bytes, mut position)) = eager.first(slice)? else {
        return Ok((Vec::new(), eager.stats));
    };
    // The source ends at the slice, or past it at the end of an oversized first batch (D4).
    let declared = position.max(slice.len()).max(first_bytes);
    // Write: everything else, stopping at the first batch that fails (zstd, corrupt) or is cut.
    while eager.out.len() < declared {
        let rest = slice.get(position..).unwrap_or_default();
        let Ok(Some(total)) = legacy::entry_bytes(rest) else {
            break;
        };
        if total > rest.len() || total > config.batch_bytes_max || total < ENTRY_BYTES_MIN {
            break;
        }
        if !eager.convert(rest.get(..total).unwrap_or_default()) {
            break;
        }
        position += total;
    }
    let Eager { mut out, stats, .. } = eager;
    out.truncate(declared);
    while out.len() < declared {
        let remaining = u64::try_from(declared - out.len()).unwrap_or(u64::MAX);
        out.extend_from_slice(&overflow_piece(remaining));
    }
    Ok((out, stats))
}

/// The eager reference's state: what it converts to, with what, and what it built.
struct Eager<'a> {
    target: Magic,
    fetch_offset: i64,
    config: &'a DownConvertConfig,
    filter: Option<AbortedFilter>,
    stats: Stats,
    workspace: Workspace,
    out: Vec<u8>,
}

impl Eager<'_> {
    /// The prepare phase: converts entries until the first that yields output. Returns its
    /// output's length and the source position after it, or `None` if nothing converts.
    fn first(&mut self, slice: &[u8]) -> Result<Option<(usize, usize)>, RecordError> {
        let mut position = 0usize;
        loop {
            let rest = slice.get(position..).unwrap_or_default();
            let Some(total) = legacy::entry_bytes(rest)? else {
                return Ok(None);
            };
            if total < ENTRY_BYTES_MIN {
                return Err(RecordError::Corrupt {
                    reason: "entry smaller than any message",
                });
            }
            if total > self.config.batch_bytes_max {
                return Err(RecordError::BatchTooLarge {
                    batch_bytes: u64::try_from(total).unwrap_or(u64::MAX),
                    batch_bytes_max: u64::try_from(self.config.batch_bytes_max).unwrap_or(u64::MAX),
                });
            }
            if total > rest.len() {
                return Ok(None);
            }
            let entry = rest.get(..total).unwrap_or_default();
            position += total;
            if skips_aborted(self.filter.as_mut(), entry, &mut self.stats) {
                continue;
            }
            convert_entry(
                entry,
                self.target,
                self.fetch_offset,
                self.config,
                &mut self.workspace,
                &mut self.out,
                &mut self.stats,
            )?;
            if !self.out.is_empty() {
                return Ok(Some((self.out.len(), position)));
            }
        }
    }

    /// Converts (or leaves out) one later entry; `false` if it failed (nothing of it is kept).
    fn convert(&mut self, entry: &[u8]) -> bool {
        if skips_aborted(self.filter.as_mut(), entry, &mut self.stats) {
            return true;
        }
        let before = self.out.len();
        let converted = convert_entry(
            entry,
            self.target,
            self.fetch_offset,
            self.config,
            &mut self.workspace,
            &mut self.out,
            &mut self.stats,
        );
        if converted.is_err() {
            self.out.truncate(before);
        }
        converted.is_ok()
    }
}

/// Runs a [`DownConverter`] over an in-memory slice (tests, fuzzing, benchmarks): returns the
/// declared size, every output piece concatenated, and the stats.
pub fn down_convert_lazy(
    slice: &[u8],
    target: Magic,
    fetch_offset: i64,
    config: DownConvertConfig,
) -> Result<(u64, Vec<u8>, Stats), RecordError> {
    down_convert_lazy_with(slice, target, fetch_offset, config, None)
}

/// [`down_convert_lazy`] with the legacy read_committed filter when `filter` is given.
pub fn down_convert_lazy_with(
    slice: &[u8],
    target: Magic,
    fetch_offset: i64,
    config: DownConvertConfig,
    filter: Option<AbortedFilter>,
) -> Result<(u64, Vec<u8>, Stats), RecordError> {
    let mut converter = DownConverter::new(
        u64::try_from(slice.len()).unwrap_or(u64::MAX),
        target,
        fetch_offset,
        config,
    )?;
    if let Some(filter) = filter {
        converter = converter.read_committed(filter);
    }
    let read = |range: SourceRange| {
        let start = usize::try_from(range.start).unwrap_or(usize::MAX);
        let end = start.saturating_add(range.len).min(slice.len());
        slice.get(start.min(end)..end).unwrap_or_default()
    };
    let declared = loop {
        match converter.prepare_step()? {
            Prepare::Read(range) => converter.feed(read(range))?,
            Prepare::Ready(prepared) => break prepared.declared_bytes,
        }
    };
    let mut out = Vec::new();
    loop {
        match converter.write_step()? {
            Write::Read(range) => converter.feed(read(range))?,
            Write::Output(piece) => out.extend_from_slice(&piece),
            Write::Done => break,
        }
    }
    Ok((declared, out, converter.stats()))
}

#[cfg(test)]
mod tests;
