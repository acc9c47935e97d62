//! The broker's side of lazy down-conversion: it owns the file slice, preads exactly the source
//! ranges the sans-IO [`DownConverter`] asks for, hands each converted piece to the writer, and
//! accounts what it holds in the converted-bytes-in-flight gauge. The eager mode (benchmarks only)
//! converts the whole record set before the response is sent.
//!
//! Must never: read more source than the converter asked for, or keep a converted piece after the
//! socket has taken it.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use skiff_protocol::down_convert::{DownConvertConfig, DownConverter, Prepare, SourceRange, Write};
use skiff_protocol::records::{Magic, RecordError};
use skiff_storage::FetchSlice;

use crate::config::DownConversionMode;
use crate::ops::metrics::Metrics;

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
    /// Lazy (the default) or eager (benchmarks only).
    pub(crate) mode: DownConversionMode,
}

/// Where converted bytes come from: the lazy state machine, or (eager mode) a finished buffer.
enum Pieces {
    Lazy(Box<DownConverter>),
    Eager(Option<Bytes>),
}

/// One partition's converted record set, produced while it is sent.
pub(crate) struct LazyRecords {
    slice: FetchSlice,
    pieces: Pieces,
    declared_bytes: usize,
    /// Bytes the gauge counts for the piece in the socket's hands right now.
    held_bytes: usize,
    /// Source bytes read for the converter, reused from chunk to chunk.
    source_buffer: Vec<u8>,
    metrics: Arc<Metrics>,
    started: Instant,
    topic: String,
}

/// Reads `range` of the slice into `buffer` (grown to the largest range asked for and reused, so
/// each chunk costs a pread and no fresh zeroed allocation) and returns the bytes present: the
/// converter may ask past the slice end for an oversized first batch; the slice caps what is read,
/// and the converter then treats that batch as absent.
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
    pub(crate) fn prepare(
        settings: ConversionSettings,
        metrics: &Arc<Metrics>,
        topic: &str,
        slice: FetchSlice,
        target: Magic,
        fetch_offset: i64,
    ) -> Result<Self, ConversionError> {
        let config = DownConvertConfig {
            chunk_bytes: settings.chunk_bytes,
            ..DownConvertConfig::default()
        };
        let started = crate::clock::instant();
        let mut converter = DownConverter::new(slice.len(), target, fetch_offset, config)?;
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
            DownConversionMode::Lazy => {
                // Hold nothing converted until this partition's turn on the wire: a response with
                // many partitions would otherwise keep one converted batch per partition.
                converter.release_prepared_output();
                Pieces::Lazy(Box::new(converter))
            }
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
                    topic,
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
            declared_bytes,
            held_bytes,
            // Kept only while writing; what prepare read is not needed any more.
            source_buffer: Vec::new(),
            metrics: metrics.clone(),
            started,
            topic: topic.to_owned(),
        })
    }

    /// Bytes this record set puts on the wire.
    pub(crate) fn declared_len(&self) -> usize {
        self.declared_bytes
    }

    /// The next converted piece, or `None` when every declared byte has been produced. Called only
    /// after the previous piece was written ([`LazyRecords::chunk_sent`]).
    pub(crate) fn next_chunk(&mut self) -> Result<Option<Bytes>, String> {
        match &mut self.pieces {
            Pieces::Eager(whole) => Ok(whole.take()),
            Pieces::Lazy(converter) => loop {
                match converter.write_step().map_err(|error| error.to_string())? {
                    Write::Read(range) => {
                        let bytes = read_range(&self.slice, range, &mut self.source_buffer)
                            .map_err(|error| error.to_string())?;
                        converter.feed(bytes).map_err(|error| error.to_string())?;
                    }
                    Write::Output(piece) => {
                        self.held_bytes = piece.len();
                        self.metrics.converted_bytes_acquired(piece.len());
                        return Ok(Some(Bytes::from(piece)));
                    }
                    Write::Done => {
                        let stats = converter.stats();
                        let nanos =
                            u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        self.metrics.conversion_done(
                            &self.topic,
                            stats.records_converted,
                            stats.temporary_bytes,
                            nanos,
                        );
                        tracing::trace!(topic = %self.topic, records = stats.records_converted, "converted");
                        return Ok(None);
                    }
                }
            },
        }
    }

    /// The socket has taken the last piece: it no longer counts as held.
    pub(crate) fn chunk_sent(&mut self, _bytes: usize) {
        self.metrics.converted_bytes_released(self.held_bytes);
        self.held_bytes = 0;
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
