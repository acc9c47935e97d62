//! Writing a response plan to a connection: in-memory parts are written as they are, stored batches
//! go from the segment file to a plain socket with `sendfile(2)` (no copy through user space) or,
//! over TLS, through one bounded buffer (TLS encrypts in user space, so zero-copy is impossible),
//! and legacy record sets are converted one chunk at a time, each only after the connection has
//! taken the one before, in one buffer the response reuses ([`ConversionBuffers`]).
//!
//! Must never: hold more than one converted chunk (or one TLS file piece) per response, or wait
//! forever on a client that has stopped reading (every write is bounded by the idle timeout).

use std::os::fd::AsRawFd;
use std::time::Duration;

use skiff_storage::FetchSlice;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::response::conversion::{ConversionBuffers, ConversionError, ConvertingSet, LegacyPiece};
use crate::response::ResponsePart;

/// A connection's byte stream: a plain TCP socket, or TLS over one.
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin + Send {
    /// The socket itself when bytes reach it unchanged, so files can be sent with sendfile(2).
    fn plain_socket(&self) -> Option<&TcpStream>;
}

impl Transport for TcpStream {
    fn plain_socket(&self) -> Option<&TcpStream> {
        Some(self)
    }
}

impl Transport for tokio_rustls::server::TlsStream<TcpStream> {
    fn plain_socket(&self) -> Option<&TcpStream> {
        None
    }
}

/// Bytes of a stored batch read into user space at a time when TLS rules out sendfile: the one
/// buffer a TLS response holds besides rustls's own (which caps its pending output at 64 KiB).
pub(crate) const TLS_FILE_PIECE_BYTES: usize = 64 * 1024;

/// Why a response could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// The socket failed or the peer went away.
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
    /// The client took nothing for the whole idle timeout.
    #[error("client stopped reading for {0:?}")]
    Stalled(Duration),
    /// The stored bytes were shorter than planned (the log was truncated under the response).
    #[error("segment file ended {missing_bytes} bytes early")]
    FileShort {
        /// Bytes the plan still expected.
        missing_bytes: u64,
    },
    /// The TLS path could not read the stored bytes.
    #[error("reading the segment: {0}")]
    Storage(skiff_storage::Error),
    /// Conversion failed after the size was declared; the connection must close.
    #[error("down-conversion failed mid-response: {0}")]
    Conversion(#[source] ConversionError),
}

/// Small parts are gathered up to this size before a write, so a response with many partitions
/// costs a few syscalls rather than one per field.
const COALESCE_BYTES_MAX: usize = 64 * 1024;

/// Writes every part of a response in order.
pub(crate) async fn write_response<S: Transport>(
    stream: &mut S,
    parts: Vec<ResponsePart>,
    stall_timeout: Duration,
) -> Result<(), SendError> {
    let mut pending: Vec<u8> = Vec::new();
    // The TLS path's one file buffer for the whole response, allocated at its first file part.
    let mut file_piece: Vec<u8> = Vec::new();
    // The legacy record sets' chunk buffer, allocated at the first converted chunk.
    let mut conversion_buffers = ConversionBuffers::default();
    for part in parts {
        match part {
            ResponsePart::Bytes(bytes) => {
                coalesce(stream, &mut pending, &bytes, stall_timeout).await?;
            }
            ResponsePart::File(slice) => {
                flush_pending(stream, &mut pending, stall_timeout).await?;
                match stream.plain_socket() {
                    Some(socket) => send_file(socket, &slice, stall_timeout).await?,
                    None => copy_file(stream, &mut file_piece, &slice, stall_timeout).await?,
                }
            }
            ResponsePart::Legacy(mut response) => {
                while let Some(piece) = response.next_piece() {
                    match piece {
                        LegacyPiece::Bytes(bytes) => {
                            coalesce(stream, &mut pending, &bytes, stall_timeout).await?;
                        }
                        LegacyPiece::Records(set) => {
                            flush_pending(stream, &mut pending, stall_timeout).await?;
                            let mut records = response
                                .start(set, &mut conversion_buffers)
                                .map_err(SendError::Conversion)?;
                            write_converted(
                                stream,
                                &mut records,
                                &mut conversion_buffers,
                                stall_timeout,
                            )
                            .await?;
                        }
                    }
                }
            }
        }
    }
    flush_pending(stream, &mut pending, stall_timeout).await?;
    flush(stream, stall_timeout).await
}

/// Adds `bytes` to the small writes gathered in `pending`, or writes them (after `pending`) when
/// they would take it past [`COALESCE_BYTES_MAX`].
async fn coalesce<S: Transport>(
    stream: &mut S,
    pending: &mut Vec<u8>,
    bytes: &[u8],
    stall_timeout: Duration,
) -> Result<(), SendError> {
    if pending.len() + bytes.len() <= COALESCE_BYTES_MAX {
        pending.extend_from_slice(bytes);
        Ok(())
    } else {
        flush_pending(stream, pending, stall_timeout).await?;
        write_bytes(stream, bytes, stall_timeout).await
    }
}

/// Writes a legacy record set one converted chunk at a time, each converted only once the
/// connection has taken the one before.
async fn write_converted<S: Transport>(
    stream: &mut S,
    records: &mut ConvertingSet,
    buffers: &mut ConversionBuffers,
    stall_timeout: Duration,
) -> Result<(), SendError> {
    while let Some(chunk) = records.next_chunk(buffers).map_err(SendError::Conversion)? {
        write_bytes(stream, &chunk, stall_timeout).await?;
        // Over TLS, the chunk is only gone once rustls has handed it to the socket.
        flush(stream, stall_timeout).await?;
        records.chunk_sent(chunk, buffers);
    }
    Ok(())
}

/// Pushes out what a TLS stream still buffers (a no-op on a plain socket).
async fn flush<S: Transport>(stream: &mut S, stall_timeout: Duration) -> Result<(), SendError> {
    tokio::time::timeout(stall_timeout, stream.flush())
        .await
        .map_err(|_| SendError::Stalled(stall_timeout))?
        .map_err(SendError::Io)
}

/// Sends `slice` through user space, one bounded piece at a time in `piece` (the TLS path; the
/// plain path uses [`send_file`]).
async fn copy_file<S: Transport>(
    stream: &mut S,
    piece: &mut Vec<u8>,
    slice: &FetchSlice,
    stall_timeout: Duration,
) -> Result<(), SendError> {
    if piece.is_empty() {
        piece.resize(TLS_FILE_PIECE_BYTES, 0);
    }
    let mut done = 0u64;
    while done < slice.len() {
        // A page-cache read, like the conversion path's: the same bytes sendfile would copy.
        let read = slice.read_at(done, piece).map_err(SendError::Storage)?;
        write_bytes(stream, piece.get(..read).unwrap_or_default(), stall_timeout).await?;
        done += read as u64;
    }
    Ok(())
}

async fn flush_pending<S: Transport>(
    stream: &mut S,
    pending: &mut Vec<u8>,
    stall_timeout: Duration,
) -> Result<(), SendError> {
    if !pending.is_empty() {
        write_bytes(stream, pending, stall_timeout).await?;
        pending.clear();
    }
    Ok(())
}

async fn write_bytes<S: Transport>(
    stream: &mut S,
    bytes: &[u8],
    stall_timeout: Duration,
) -> Result<(), SendError> {
    let mut written = 0;
    while written < bytes.len() {
        let remaining = bytes.get(written..).unwrap_or_default();
        match tokio::time::timeout(stall_timeout, stream.write(remaining)).await {
            Err(_) => return Err(SendError::Stalled(stall_timeout)),
            Ok(Ok(0)) => return Err(SendError::Io(std::io::ErrorKind::WriteZero.into())),
            Ok(Ok(count)) => written += count,
            Ok(Err(error)) => return Err(error.into()),
        }
    }
    Ok(())
}

/// Largest count one sendfile call is asked for (Linux caps a call near 2 GiB anyway).
const SENDFILE_CALL_BYTES_MAX: u64 = 1 << 30;

/// Sends `slice` with sendfile(2), waiting for writability between calls.
async fn send_file(
    stream: &TcpStream,
    slice: &FetchSlice,
    stall_timeout: Duration,
) -> Result<(), SendError> {
    let socket_fd = stream.as_raw_fd();
    let file_fd = slice.file().as_raw_fd();
    let mut offset = libc::off_t::try_from(slice.position())
        .map_err(|_| SendError::Io(std::io::ErrorKind::InvalidInput.into()))?;
    let mut remaining = slice.len();
    while remaining > 0 {
        tokio::time::timeout(stall_timeout, stream.writable())
            .await
            .map_err(|_| SendError::Stalled(stall_timeout))??;
        let count = usize::try_from(remaining.min(SENDFILE_CALL_BYTES_MAX)).unwrap_or(usize::MAX);
        let result = stream.try_io(Interest::WRITABLE, || {
            // SAFETY: both descriptors are open for the duration of the call (the stream and the
            // slice, which holds its file, are borrowed), and `offset` is a valid pointer to an
            // off_t we own.
            let sent = unsafe { libc::sendfile(socket_fd, file_fd, &mut offset, count) };
            if sent < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(sent.unsigned_abs())
            }
        });
        match result {
            Ok(0) => {
                return Err(SendError::FileShort {
                    missing_bytes: remaining,
                })
            }
            Ok(sent) => remaining -= (sent as u64).min(remaining),
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}
