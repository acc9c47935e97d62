//! The broker's side of lazy down-conversion: it plans a legacy (Fetch v0–v3) response's record
//! sets without converting them, then, when each one's turn on the wire comes, owns its file
//! slice, preads exactly the source ranges the sans-IO [`DownConverter`] asks for, hands each
//! converted chunk to the writer, and accounts what it holds in the converted-bytes-in-flight
//! gauge. The eager mode (benchmarks only) converts the whole response before it is sent.
//!
//! A legacy response declares every record set's size (and the frame's) before its first byte, so
//! each partition's prepare phase runs when the response is planned ([`declared_size`]: reads
//! the first batches and converts the first one that yields output), and its converter is then
//! dropped. What waits for its turn is a [`PlannedSet`]: the slice, the fetch offset, the declared
//! size and where it goes among the response's header bytes, 96 bytes; the header bytes of the
//! whole response are one buffer ([`LegacyResponse`]), about 18 bytes a partition. At its turn
//! the partition's converter is built and prepared again (the stored bytes of a slice do not
//! change, so the size comes out the same; if it did not, the connection closes, as for any
//! conversion error after the size was declared), and the response's one [`ConversionBuffers`]
//! holds the chunk being written, reused for the next chunk and the next partition. So a
//! response holds about 114 bytes per partition plus one chunk; the source bytes read for a chunk
//! live only while that chunk is converted, never while the socket is slow
//! (`bench/reports/kip283-findings.md`, sessions 4 and 5, has the measured accounting).
//!
//! Must never: read more source than the converter asked for, keep a converted piece after the
//! socket has taken it (beyond reusing its buffer), hold source bytes across an await, or keep a
//! converter for a partition that is not being written.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use skiff_protocol::down_convert::{
    AbortedFilter, DownConvertConfig, DownConverter, Prepare, SourceRange, Write,
};
use skiff_protocol::records::{Magic, RecordError};
use skiff_storage::FetchSlice;

use crate::config::DownConversionMode;
use crate::metrics::Metrics;
use crate::partition::topics::Topic;

/// Why a record set could not be converted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConversionError {
    /// The first batch to convert is zstd: UNSUPPORTED_COMPRESSION_TYPE (76).
    #[error("zstd batches cannot be served to Fetch v0-v3")]
    UnsupportedCompression,
    /// Corrupt stored data.
    #[error("corrupt stored batch: {0}")]
    Corrupt(RecordError),
    /// The segment could not be read.
    #[error("reading the segment: {0}")]
    Storage(skiff_storage::Error),
    /// A record set prepared again at its turn on the wire came to another size than the one
    /// planned (and declared); the stored bytes of a slice never change, so this is a bug.
    #[error("record set planned at {planned} bytes, prepared at {prepared}")]
    SizeChanged {
        /// The size declared in the response.
        planned: u64,
        /// The size the second prepare phase fixed.
        prepared: u64,
    },
    /// A record set larger than a Fetch response can declare (an `INT32` size).
    #[error("record set of {0} bytes is larger than a response can declare")]
    TooLarge(u64),
}

impl From<RecordError> for ConversionError {
    fn from(error: RecordError) -> Self {
        if error.error_code() == 76 {
            Self::UnsupportedCompression
        } else {
            Self::Corrupt(error)
        }
    }
}

/// The broker's down-conversion settings, read from the config once per fetch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConversionSettings {
    /// Source bytes converted per chunk (`skiff.down.conversion.chunk.bytes`).
    pub(crate) chunk_bytes: usize,
    /// Most source bytes per read while writing (`skiff.down.conversion.read.bytes`).
    pub(crate) read_bytes: usize,
    /// Lazy (the default) or eager (benchmarks only).
    pub(crate) mode: DownConversionMode,
}

impl ConversionSettings {
    fn converter_config(&self) -> DownConvertConfig {
        DownConvertConfig {
            chunk_bytes: self.chunk_bytes,
            read_bytes: self.read_bytes,
            ..DownConvertConfig::default()
        }
    }
}

/// Reads `range` of the slice into `buffer` (grown to the largest range asked for and reused while
/// one chunk is built) and returns the bytes present: the converter may ask past the slice end for
/// an oversized first batch; the slice caps what is read, and the converter then treats that batch
/// as absent.
fn read_range<'a>(
    slice: &FetchSlice,
    range: SourceRange,
    buffer: &'a mut Vec<u8>,
) -> Result<&'a [u8], ConversionError> {
    if buffer.len() < range.len {
        buffer.resize(range.len, 0);
    }
    let target = buffer.get_mut(..range.len).unwrap_or_default();
    let read = slice
        .read_at(range.start, target)
        .map_err(ConversionError::Storage)?;
    Ok(buffer.get(..read).unwrap_or_default())
}

/// A converter for `slice`, through its prepare phase: the declared size is fixed.
fn prepared_converter(
    settings: &ConversionSettings,
    (slice, target, fetch_offset): (&FetchSlice, Magic, i64),
    read_committed: Option<AbortedFilter>,
    spare: Vec<u8>,
) -> Result<(DownConverter, u64), ConversionError> {
    let mut converter = DownConverter::new(
        slice.len(),
        target,
        fetch_offset,
        settings.converter_config(),
    )?;
    if let Some(filter) = read_committed {
        converter = converter.read_committed(filter);
    }
    converter.reuse_buffer(spare);
    let mut source_buffer = Vec::new();
    loop {
        match converter.prepare_step()? {
            Prepare::Read(range) => {
                converter.feed(read_range(slice, range, &mut source_buffer)?)?;
            }
            Prepare::Ready(prepared) => return Ok((converter, prepared.declared_bytes)),
        }
    }
}

/// The size a partition's converted record set declares in the response: the prepare phase run
/// on its own (the first batches read, the first that yields output converted), its converter
/// and buffers dropped. `read_committed`: a legacy read_committed fetch's aborted-transaction
/// filter (its slice already ends at the last stable offset).
pub(crate) fn declared_size(
    settings: &ConversionSettings,
    source: (&FetchSlice, Magic, i64),
    read_committed: Option<&AbortedFilter>,
) -> Result<u32, ConversionError> {
    let (_, declared) = prepared_converter(settings, source, read_committed.cloned(), Vec::new())?;
    declared_u32(declared)
}

/// A declared size as the response's `INT32` field takes it.
fn declared_u32(declared: u64) -> Result<u32, ConversionError> {
    u32::try_from(declared)
        .ok()
        .filter(|&bytes| i32::try_from(bytes).is_ok())
        .ok_or(ConversionError::TooLarge(declared))
}

/// One partition's record set in a planned legacy response, until its turn on the wire: what
/// its converter is built from then, and where it goes. 96 bytes (tested), most of them the
/// slice's (its file stays open even if retention deletes the segment).
pub(crate) struct PlannedSet {
    slice: FetchSlice,
    fetch_offset: i64,
    /// For the per-topic conversion counters (shared, not a copy of the name per partition).
    topic: Arc<Topic>,
    /// Legacy read_committed: the aborted transactions the converter leaves out.
    read_committed: Option<Box<AbortedFilter>>,
    declared_bytes: u32,
    /// The record set goes after this many of the response's header bytes.
    header_end: u32,
}

impl PlannedSet {
    /// A record set of `declared_bytes` (from [`declared_size`]).
    pub(crate) fn new(
        (slice, fetch_offset, declared_bytes): (FetchSlice, i64, u32),
        topic: &Arc<Topic>,
        read_committed: Option<AbortedFilter>,
    ) -> Self {
        Self {
            slice,
            fetch_offset,
            topic: topic.clone(),
            read_committed: read_committed.map(Box::new),
            declared_bytes,
            header_end: 0,
        }
    }

    /// Bytes this record set puts on the wire.
    pub(crate) fn declared_len(&self) -> usize {
        usize::try_from(self.declared_bytes).unwrap_or(usize::MAX)
    }

    /// Bytes this planned set holds besides its slot in the plan (a read_committed filter).
    fn heap_bytes(&self) -> usize {
        self.read_committed
            .as_deref()
            .map_or(0, AbortedFilter::held_bytes)
    }

    /// Builds and prepares this record set's converter (its turn on the wire has come): the
    /// chunk buffer of `buffers` goes to the converter, reserved for the first chunk.
    fn start(
        self,
        target: Magic,
        settings: &ConversionSettings,
        metrics: &Arc<Metrics>,
        buffers: &mut ConversionBuffers,
    ) -> Result<ConvertingSet, ConversionError> {
        let started = crate::clock::instant();
        let mut spare = std::mem::take(&mut buffers.output);
        spare.clear();
        // The first chunk is built in one allocation (`DownConverter`'s rule of a quarter more
        // than the source), later ones in this same buffer.
        let first_chunk = self.declared_len().min(settings.chunk_bytes);
        spare.reserve(first_chunk + first_chunk / 4);
        let filter = self.read_committed.map(|filter| *filter);
        let (converter, declared) = prepared_converter(
            settings,
            (&self.slice, target, self.fetch_offset),
            filter,
            spare,
        )?;
        if declared != u64::from(self.declared_bytes) {
            return Err(ConversionError::SizeChanged {
                planned: u64::from(self.declared_bytes),
                prepared: declared,
            });
        }
        Ok(ConvertingSet {
            slice: self.slice,
            converter: Box::new(converter),
            held_bytes: 0,
            metrics: metrics.clone(),
            started,
            topic: self.topic,
            done: false,
        })
    }
}

/// One partition's record set being written: its converter, built at its turn on the wire.
pub(crate) struct ConvertingSet {
    slice: FetchSlice,
    converter: Box<DownConverter>,
    /// Bytes the gauge counts for the chunk in the socket's hands right now.
    held_bytes: usize,
    metrics: Arc<Metrics>,
    started: Instant,
    topic: Arc<Topic>,
    /// Every declared byte has been produced.
    done: bool,
}

/// What a response's legacy record sets share while it is written: the buffer of the chunk in
/// the socket's hands, kept for the next chunk (of this partition or the next) so that only the
/// first chunk of a response allocates one. One response is written at a time per connection.
#[derive(Default)]
pub(crate) struct ConversionBuffers {
    output: Vec<u8>,
}

impl ConversionBuffers {
    /// Keeps `buffer` for the next chunk if it is the larger one.
    fn keep(&mut self, buffer: Vec<u8>) {
        if buffer.capacity() > self.output.capacity() {
            self.output = buffer;
        }
    }
}

impl ConvertingSet {
    /// The next chunk, or `None` when every declared byte has been produced. Called only after
    /// the previous chunk was written and handed back ([`ConvertingSet::chunk_sent`]). The source
    /// bytes read for the chunk are dropped before it returns, so a response whose client is slow
    /// holds only the chunk.
    pub(crate) fn next_chunk(
        &mut self,
        buffers: &mut ConversionBuffers,
    ) -> Result<Option<Vec<u8>>, ConversionError> {
        if self.done {
            return Ok(None);
        }
        let converter = &mut self.converter;
        converter.reuse_buffer(std::mem::take(&mut buffers.output));
        // Only while this chunk is built: at most one read's bytes, or one batch.
        let mut source = Vec::new();
        loop {
            match converter.write_step()? {
                Write::Read(range) => {
                    let bytes = read_range(&self.slice, range, &mut source)?;
                    converter.feed(bytes)?;
                }
                Write::Output(piece) => {
                    self.held_bytes = piece.len();
                    self.metrics.converted_bytes_acquired(piece.len());
                    return Ok(Some(piece));
                }
                Write::Done => {
                    buffers.keep(converter.take_buffer());
                    let stats = converter.stats();
                    let nanos =
                        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    self.metrics.conversion_done(
                        &self.topic.name,
                        stats.records_converted,
                        stats.temporary_bytes,
                        nanos,
                    );
                    tracing::trace!(topic = %self.topic.name, records = stats.records_converted, "converted");
                    self.done = true;
                    return Ok(None);
                }
            }
        }
    }

    /// The socket has taken `chunk`: it no longer counts as held, and its buffer is kept for the
    /// next chunk.
    pub(crate) fn chunk_sent(&mut self, chunk: Vec<u8>, buffers: &mut ConversionBuffers) {
        self.metrics.converted_bytes_released(self.held_bytes);
        self.held_bytes = 0;
        buffers.keep(chunk);
    }
}

impl Drop for ConvertingSet {
    fn drop(&mut self) {
        // A response abandoned mid-way (client gone) still releases what it held.
        if self.held_bytes > 0 {
            self.metrics.converted_bytes_released(self.held_bytes);
        }
    }
}

/// A legacy (Fetch v0–v3) response planned for writing: every byte that is not a record set, in
/// order, in one buffer, and the record sets in the order they go, each converted only at its
/// turn. Eager mode (benchmarks only): the whole response, converted, in `header`.
pub(crate) struct LegacyResponse {
    header: Bytes,
    /// Header bytes already handed to the writer.
    written: usize,
    /// Record sets not yet handed to the writer, the next one last.
    sets: Vec<PlannedSet>,
    target: Magic,
    settings: ConversionSettings,
    metrics: Arc<Metrics>,
    /// Eager mode: converted bytes the gauge counts until the response is dropped.
    eager_bytes: usize,
}

/// What to write next for a [`LegacyResponse`].
pub(crate) enum LegacyPiece {
    /// Header bytes (or, eager, the whole converted response).
    Bytes(Bytes),
    /// A record set: start it ([`LegacyResponse::start`]) once the bytes before it are written,
    /// then write its chunks.
    Records(PlannedSet),
}

/// Builds a [`LegacyResponse`] from the response's layout, in wire order.
pub(crate) struct LegacyResponseBuilder {
    header: Vec<u8>,
    sets: Vec<PlannedSet>,
    target: Magic,
    settings: ConversionSettings,
    metrics: Arc<Metrics>,
}

impl LegacyResponseBuilder {
    /// A builder for a response converting to `target`, of `header_bytes` and `sets` record sets.
    pub(crate) fn new(
        (target, settings, metrics): (Magic, ConversionSettings, &Arc<Metrics>),
        header_bytes: usize,
        sets: usize,
    ) -> Self {
        Self {
            header: Vec::with_capacity(header_bytes),
            sets: Vec::with_capacity(sets),
            target,
            settings,
            metrics: metrics.clone(),
        }
    }

    /// The next header bytes.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.header.extend_from_slice(bytes);
    }

    /// The next record set (after the header bytes so far).
    pub(crate) fn records(&mut self, mut set: PlannedSet) {
        set.header_end = u32::try_from(self.header.len()).unwrap_or(u32::MAX);
        self.sets.push(set);
    }

    /// The planned response; in eager mode every record set converted now.
    pub(crate) fn finish(mut self) -> Result<LegacyResponse, ConversionError> {
        self.sets.reverse();
        let mut response = LegacyResponse {
            header: Bytes::from(self.header),
            written: 0,
            sets: self.sets,
            target: self.target,
            settings: self.settings,
            metrics: self.metrics,
            eager_bytes: 0,
        };
        if let DownConversionMode::Eager = response.settings.mode {
            response.convert_all()?;
        }
        Ok(response)
    }
}

impl LegacyResponse {
    /// What to write next, `None` at the end.
    pub(crate) fn next_piece(&mut self) -> Option<LegacyPiece> {
        let header_end = self.sets.last().map_or(self.header.len(), |set| {
            usize::try_from(set.header_end).unwrap_or(usize::MAX)
        });
        if self.written < header_end {
            let bytes = self.header.slice(self.written..header_end);
            self.written = header_end;
            return Some(LegacyPiece::Bytes(bytes));
        }
        self.sets.pop().map(LegacyPiece::Records)
    }

    /// Builds and prepares `set`'s converter: its turn on the wire has come (the bytes before it
    /// are written, so what the prepare phase converts is not held across their write).
    pub(crate) fn start(
        &self,
        set: PlannedSet,
        buffers: &mut ConversionBuffers,
    ) -> Result<ConvertingSet, ConversionError> {
        set.start(self.target, &self.settings, &self.metrics, buffers)
    }

    /// Bytes this response still puts on the wire.
    pub(crate) fn wire_len(&self) -> usize {
        self.header.len().saturating_sub(self.written)
            + self
                .sets
                .iter()
                .map(PlannedSet::declared_len)
                .sum::<usize>()
    }

    /// Bytes this response holds until it is written: its own fields, the planned record sets'
    /// slots and filters, and the header bytes (the chunk being written is the
    /// [`ConversionBuffers`]', counted by the gauge).
    pub(crate) fn held_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.sets.capacity() * std::mem::size_of::<PlannedSet>()
            + self.sets.iter().map(PlannedSet::heap_bytes).sum::<usize>()
            + self.header.len()
    }

    /// Eager mode: converts every record set now, the whole response into one buffer.
    fn convert_all(&mut self) -> Result<(), ConversionError> {
        let total = self.header.len()
            + self
                .sets
                .iter()
                .map(PlannedSet::declared_len)
                .sum::<usize>();
        let mut whole = Vec::with_capacity(total);
        let mut buffers = ConversionBuffers::default();
        while let Some(piece) = self.next_piece() {
            match piece {
                LegacyPiece::Bytes(bytes) => whole.extend_from_slice(&bytes),
                LegacyPiece::Records(set) => {
                    let mut set = self.start(set, &mut buffers)?;
                    while let Some(chunk) = set.next_chunk(&mut buffers)? {
                        whole.extend_from_slice(&chunk);
                        set.chunk_sent(chunk, &mut buffers);
                    }
                }
            }
        }
        self.eager_bytes = whole.len() - self.header.len();
        self.metrics.converted_bytes_acquired(self.eager_bytes);
        self.header = Bytes::from(whole);
        self.written = 0;
        Ok(())
    }
}

impl Drop for LegacyResponse {
    fn drop(&mut self) {
        if self.eager_bytes > 0 {
            self.metrics.converted_bytes_released(self.eager_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use skiff_protocol::records::record::{BatchBuilder, NewRecord};
    use skiff_protocol::records::Compression;
    use skiff_storage::{LogConfig, LogDir};

    use super::*;
    use crate::config::{Config, DOWN_CONVERSION_CHUNK_BYTES_DEFAULT};
    use crate::partition::materialized::TopicRecord;
    use crate::partition::topic_config::TopicConfig;
    use crate::response::ResponsePart;

    /// The per-response bound a legacy response keeps (docs/design/downconversion.md §3).
    const LEGACY_RESPONSE_BYTES_MAX: usize = 256 * 1024;
    /// A Fetch v0–v3 partition header: index, error, high watermark, record-set size.
    const LEGACY_PARTITION_HEADER_BYTES: usize = 4 + 2 + 8 + 4;

    fn settings() -> ConversionSettings {
        ConversionSettings {
            chunk_bytes: DOWN_CONVERSION_CHUNK_BYTES_DEFAULT,
            read_bytes: skiff_protocol::down_convert::DOWN_CONVERT_READ_BYTES,
            mode: DownConversionMode::Lazy,
        }
    }

    fn topic() -> Arc<Topic> {
        let config = TopicConfig::resolve(&Config::default(), &BTreeMap::new()).expect("config");
        Arc::new(Topic {
            name: "wide".to_owned(),
            topic_id: [7; 16],
            config,
            record: TopicRecord {
                name: "wide".to_owned(),
                topic_id: "07".repeat(16),
                replicas: Vec::new(),
                configs: BTreeMap::new(),
            },
            partitions: Vec::new(),
        })
    }

    /// A batch of `count` records of 100-byte values from offset `first` (keys `k<offset>`).
    fn batch(first: i64, count: i32) -> Vec<u8> {
        let mut builder = BatchBuilder::new(first, Compression::None);
        let value = [b'v'; 100];
        for delta in 0..count {
            let key = format!("k{}", first + i64::from(delta));
            builder
                .push(&NewRecord {
                    offset_delta: delta,
                    timestamp: 1_700_000_000_000,
                    key: Some(key.as_bytes()),
                    value: Some(&value),
                    headers: &[],
                })
                .expect("record fits");
        }
        builder.build().expect("batch")
    }

    /// What a legacy response keeps per partition until the partition's turn on the wire: a
    /// planned set (the slice and four numbers) and its header bytes; no converter, no part.
    #[test]
    fn a_waiting_partition_is_its_slice_and_a_few_numbers() {
        assert_eq!(std::mem::size_of::<PlannedSet>(), 96);
        assert_eq!(std::mem::size_of::<ResponsePart>(), 40);
        // What each waiting partition held before (a parked converter in a record set, 224 bytes,
        // and two 40-byte parts) is now built only at its turn.
        assert!(std::mem::size_of::<DownConverter>() > std::mem::size_of::<PlannedSet>());
    }

    /// A log of two three-record batches (offsets 0–5).
    fn six_record_log(dir: &std::path::Path) -> Arc<skiff_storage::Log> {
        let log_dir = LogDir::open(dir, LogConfig::default()).expect("log dir");
        let log = log_dir.create("wide", 0, None).expect("log");
        for first in [0, 3] {
            let mut bytes = batch(first, 3);
            log.append(&mut bytes, 1_700_000_000_000).expect("append");
        }
        log
    }

    /// A planned response of `partitions` record sets of `log` (fetched at offsets 0–5 in turn),
    /// each after a partition header, and their declared sizes.
    fn plan_of(
        log: &skiff_storage::Log,
        metrics: &Arc<Metrics>,
        mode: DownConversionMode,
        partitions: usize,
    ) -> (LegacyResponse, Vec<usize>) {
        let settings = ConversionSettings { mode, ..settings() };
        let topic = topic();
        let mut builder = LegacyResponseBuilder::new(
            (Magic::V1, settings, metrics),
            partitions * LEGACY_PARTITION_HEADER_BYTES + 32,
            partitions,
        );
        builder.bytes(&[0; 32]);
        let mut declared = Vec::new();
        for partition in 0..partitions {
            let fetch_offset = i64::try_from(partition % 6).expect("offset");
            let slice = log.read(fetch_offset, 1 << 20, true).expect("slice");
            let size =
                declared_size(&settings, (&slice, Magic::V1, fetch_offset), None).expect("size");
            builder.bytes(&[1; LEGACY_PARTITION_HEADER_BYTES]);
            builder.records(PlannedSet::new((slice, fetch_offset, size), &topic, None));
            declared.push(usize::try_from(size).expect("size"));
        }
        (builder.finish().expect("plan"), declared)
    }

    /// Writes `response` as the connection does: its pieces, and for each record set (true in
    /// the second list) how many bytes its chunks held.
    fn written(response: &mut LegacyResponse) -> (Vec<u8>, Vec<(bool, usize)>) {
        let mut buffers = ConversionBuffers::default();
        let (mut bytes, mut pieces) = (Vec::new(), Vec::new());
        while let Some(piece) = response.next_piece() {
            match piece {
                LegacyPiece::Bytes(header) => {
                    bytes.extend_from_slice(&header);
                    pieces.push((false, header.len()));
                }
                LegacyPiece::Records(set) => {
                    let mut set = response.start(set, &mut buffers).expect("start");
                    let mut written = 0;
                    while let Some(chunk) = set.next_chunk(&mut buffers).expect("chunk") {
                        written += chunk.len();
                        bytes.extend_from_slice(&chunk);
                        set.chunk_sent(chunk, &mut buffers);
                    }
                    pieces.push((true, written));
                }
            }
        }
        (bytes, pieces)
    }

    /// The plan of a 1,000-partition legacy response, with real slices: what it accounts, plus
    /// one chunk, stays within the 256 KiB per-response bound, at most 120 bytes a partition;
    /// and every record set comes out at its declared size, in order, between its header bytes.
    #[test]
    fn a_thousand_partition_plan_and_one_chunk_fit_the_response_bound() {
        let dir = tempfile::tempdir().expect("dir");
        let log = six_record_log(dir.path());
        let metrics = Arc::new(Metrics::default());
        let partitions = 1000;
        let (mut response, declared) =
            plan_of(&log, &metrics, DownConversionMode::Lazy, partitions);
        let held = response.held_bytes();
        println!(
            "1,000-partition legacy plan: {held} bytes, {} per partition",
            held / partitions
        );
        assert!(held / partitions <= 120, "{held}");
        assert!(held + DOWN_CONVERSION_CHUNK_BYTES_DEFAULT <= LEGACY_RESPONSE_BYTES_MAX);
        let (_, pieces) = written(&mut response);
        let mut expected = vec![(false, 32 + LEGACY_PARTITION_HEADER_BYTES)];
        for (index, size) in declared.iter().enumerate() {
            expected.push((true, *size));
            if index + 1 < partitions {
                expected.push((false, LEGACY_PARTITION_HEADER_BYTES));
            }
        }
        assert_eq!(pieces, expected);
        assert_eq!(metrics.converted_bytes_in_flight(), 0);
    }

    /// Eager mode (benchmarks) writes the same bytes as lazy mode, all converted before the first
    /// is written and counted by the gauge until the response is dropped.
    #[test]
    fn eager_mode_writes_the_lazy_bytes_converted_up_front() {
        let dir = tempfile::tempdir().expect("dir");
        let log = six_record_log(dir.path());
        let metrics = Arc::new(Metrics::default());
        let (mut lazy, declared) = plan_of(&log, &metrics, DownConversionMode::Lazy, 12);
        let (lazy_bytes, _) = written(&mut lazy);
        let (mut eager, _) = plan_of(&log, &metrics, DownConversionMode::Eager, 12);
        let converted: usize = declared.iter().sum();
        assert_eq!(
            metrics.converted_bytes_in_flight(),
            i64::try_from(converted).expect("bytes")
        );
        let (eager_bytes, pieces) = written(&mut eager);
        assert_eq!(pieces, vec![(false, lazy_bytes.len())]);
        assert_eq!(eager_bytes, lazy_bytes);
        drop(eager);
        assert_eq!(metrics.converted_bytes_in_flight(), 0);
    }
}
