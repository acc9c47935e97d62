//! The broker's side of lazy down-conversion: it owns the file slice, preads exactly the source
//! ranges the sans-IO [`DownConverter`] asks for, hands each converted chunk to the writer, and
//! accounts what it holds in the converted-bytes-in-flight gauge. The eager mode (benchmarks only)
//! converts the whole record set before the response is sent.
//!
//! Memory of one legacy response (`bench/reports/kip283-findings.md`, session 4, has the measured
//! accounting): each partition waiting for its turn holds a [`LazyRecords`] with the converter
//! parked ([`Parked`], about a hundred bytes) and no buffer; the partition being written holds the
//! converter; and the response holds one [`ConversionBuffers`]: the chunk being written, reused for
//! the next chunk and the next partition. The source bytes read for a chunk live only while that
//! chunk is converted, never while the socket is slow.
//!
//! Must never: read more source than the converter asked for, keep a converted piece after the
//! socket has taken it (beyond reusing its buffer), or hold source bytes across an await.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use skiff_protocol::down_convert::{
    AbortedFilter, DownConvertConfig, DownConverter, Parked, Prepare, SourceRange, Write,
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

/// Where converted bytes come from.
enum Pieces {
    /// Prepared and waiting for its turn on the wire.
    Parked(Parked),
    /// Being written.
    Lazy(Box<DownConverter>),
    /// Eager mode: the whole converted record set.
    Eager(Option<Bytes>),
    /// Every byte has been produced.
    Done,
}

/// One partition's converted record set, produced while it is sent.
pub(crate) struct LazyRecords {
    slice: FetchSlice,
    pieces: Pieces,
    settings: ConversionSettings,
    declared_bytes: usize,
    /// Bytes the gauge counts for the chunk in the socket's hands right now.
    held_bytes: usize,
    metrics: Arc<Metrics>,
    started: Instant,
    /// For the per-topic conversion counters (shared, not a copy of the name per partition).
    topic: Arc<Topic>,
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

/// A chunk to write: converted bytes in a buffer to hand back with [`LazyRecords::chunk_sent`], or
/// (eager mode) the whole record set.
pub(crate) enum Chunk {
    /// One converted chunk.
    Converted(Vec<u8>),
    /// An eager record set.
    Whole(Bytes),
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        match self {
            Self::Converted(bytes) => bytes,
            Self::Whole(bytes) => bytes,
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

impl LazyRecords {
    /// Runs the prepare phase (reading only the first batches) and fixes the declared size.
    /// `read_committed`: a legacy read_committed fetch's aborted-transaction filter (its slice
    /// already ends at the last stable offset).
    pub(crate) fn prepare(
        settings: ConversionSettings,
        metrics: &Arc<Metrics>,
        topic: &Arc<Topic>,
        (slice, target, fetch_offset): (FetchSlice, Magic, i64),
        read_committed: Option<AbortedFilter>,
    ) -> Result<Self, ConversionError> {
        let started = crate::clock::instant();
        let mut converter = DownConverter::new(
            slice.len(),
            target,
            fetch_offset,
            settings.converter_config(),
        )?;
        if let Some(filter) = read_committed {
            converter = converter.read_committed(filter);
        }
        let mut source_buffer = Vec::new();
        let prepared = loop {
            match converter.prepare_step()? {
                Prepare::Read(range) => {
                    converter.feed(read_range(&slice, range, &mut source_buffer)?)?;
                }
                Prepare::Ready(prepared) => break prepared,
            }
        };
        let declared_bytes = usize::try_from(prepared.declared_bytes).unwrap_or(usize::MAX);
        let pieces = match settings.mode {
            // Hold nothing converted, and not the converter, until this partition's turn on the
            // wire: a response with many partitions would otherwise keep one converted batch and
            // one converter (a few hundred bytes) per partition.
            DownConversionMode::Lazy => Pieces::Parked(converter.park()?),
            DownConversionMode::Eager => {
                let mut whole = Vec::with_capacity(declared_bytes);
                loop {
                    match converter.write_step()? {
                        Write::Read(range) => {
                            converter.feed(read_range(&slice, range, &mut source_buffer)?)?;
                        }
                        Write::Output(piece) => whole.extend_from_slice(&piece),
                        Write::Done => break,
                    }
                }
                metrics.converted_bytes_acquired(whole.len());
                let stats = converter.stats();
                let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                metrics.conversion_done(
                    &topic.name,
                    stats.records_converted,
                    stats.temporary_bytes,
                    nanos,
                );
                Pieces::Eager(Some(Bytes::from(whole)))
            }
        };
        let held_bytes = match &pieces {
            Pieces::Eager(Some(bytes)) => bytes.len(),
            _ => 0,
        };
        Ok(Self {
            slice,
            pieces,
            settings,
            declared_bytes,
            held_bytes,
            metrics: metrics.clone(),
            started,
            topic: topic.clone(),
        })
    }

    /// Bytes this record set puts on the wire.
    pub(crate) fn declared_len(&self) -> usize {
        self.declared_bytes
    }

    /// The next chunk, or `None` when every declared byte has been produced. Called only after
    /// the previous chunk was written and handed back ([`LazyRecords::chunk_sent`]). The source
    /// bytes read for the chunk are dropped before it returns, so a response whose client is slow
    /// holds only the chunk.
    pub(crate) fn next_chunk(
        &mut self,
        buffers: &mut ConversionBuffers,
    ) -> Result<Option<Chunk>, ConversionError> {
        self.pieces = match std::mem::replace(&mut self.pieces, Pieces::Done) {
            Pieces::Parked(parked) => Pieces::Lazy(Box::new(DownConverter::resume(
                parked,
                self.settings.converter_config(),
            ))),
            other => other,
        };
        let converter = match &mut self.pieces {
            Pieces::Parked(_) | Pieces::Done => return Ok(None),
            Pieces::Eager(whole) => return Ok(whole.take().map(Chunk::Whole)),
            Pieces::Lazy(converter) => converter,
        };
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
                    return Ok(Some(Chunk::Converted(piece)));
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
                    self.pieces = Pieces::Done;
                    return Ok(None);
                }
            }
        }
    }

    /// The socket has taken `chunk`: it no longer counts as held, and its buffer is kept for the
    /// next chunk.
    pub(crate) fn chunk_sent(&mut self, chunk: Chunk, buffers: &mut ConversionBuffers) {
        self.metrics.converted_bytes_released(self.held_bytes);
        self.held_bytes = 0;
        if let Chunk::Converted(buffer) = chunk {
            buffers.keep(buffer);
        }
    }
}

impl Drop for LazyRecords {
    fn drop(&mut self) {
        // A response abandoned mid-way (client gone) still releases what it held.
        if self.held_bytes > 0 {
            self.metrics.converted_bytes_released(self.held_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::ResponsePart;

    /// What a legacy response keeps per partition until the partition's turn on the wire: its
    /// record set (boxed, with the converter parked in it: 224 bytes when written) and two 40-byte
    /// parts (header bytes and records). 250 partitions × 100 slow responses multiply these; the
    /// measured accounting is in `bench/reports/kip283-findings.md` (session 4).
    #[test]
    fn a_waiting_partition_costs_a_few_hundred_bytes() {
        assert!(
            std::mem::size_of::<LazyRecords>() <= 256,
            "{}",
            std::mem::size_of::<LazyRecords>()
        );
        assert_eq!(std::mem::size_of::<ResponsePart>(), 40);
        // The converter itself (312 bytes when written) is built only when the partition is sent.
        assert!(std::mem::size_of::<DownConverter>() > std::mem::size_of::<Parked>());
    }
}
