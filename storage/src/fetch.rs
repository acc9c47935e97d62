//! [`FetchSlice`]: a byte range of one segment file that a read returned, for the broker to send
//! zero-copy (`sendfile` from [`FetchSlice::file`]), to read in bounded chunks
//! ([`FetchSlice::read_at`]) or to borrow whole through a memory map ([`FetchSlice::bytes`]).
//! Owns nothing but the range and a shared handle; must never grow past the bytes that existed
//! when the read was made.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::io::FileIo;
use crate::mmap;

/// Bytes of one segment, from `position`, `len` long, as a read found them.
///
/// Validity: the slice holds the segment's `File` by `Arc`, so deletion by retention or truncation
/// only unlinks the name and the inode with its bytes lives as long as the slice. The engine never
/// shortens or rewrites a file while a slice of it exists (`truncate_to` copies the kept prefix to
/// a new file when a slice is outstanding), and appends only add bytes after the slice. So the
/// bytes seen through `file`, `read_at` and `bytes` are exactly those the read found, for as long
/// as the slice lives. The slice may end inside a batch (Kafka's fetch semantics: the consumer
/// drops a partial batch at the end) unless `min_one_batch` made it whole.
#[derive(Debug, Clone)]
pub struct FetchSlice {
    file: Arc<File>,
    path: Arc<Path>,
    io: Arc<dyn FileIo>,
    position: u64,
    len: u64,
    /// The offset after the last record of the segment the slice was read from, when it was read.
    segment_end_offset: i64,
}

impl FetchSlice {
    pub(crate) fn new(
        file: Arc<File>,
        path: Arc<Path>,
        io: Arc<dyn FileIo>,
        (position, len): (u64, u64),
        segment_end_offset: i64,
    ) -> Self {
        Self {
            file,
            path,
            io,
            position,
            len,
            segment_end_offset,
        }
    }

    /// The offset after the last record of the segment the slice lies in, as it was when read (a
    /// slice never spans segments): no record of the slice is at or past it, which bounds the
    /// aborted transactions a read_committed fetch of it must report (Kafka's next segment base).
    pub fn segment_end_offset(&self) -> i64 {
        self.segment_end_offset
    }

    /// The segment file, for `sendfile` from [`FetchSlice::position`] for [`FetchSlice::len`]
    /// bytes.
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// Byte position of the slice in the file.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Length of the slice in bytes (0 when the fetch offset is the log end offset).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the slice is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies bytes of the slice from `slice_offset` into `buf` (one `pread`), as many as fit and
    /// remain; returns how many. A bounded way to feed a converter without mapping the slice.
    pub fn read_at(&self, slice_offset: u64, buf: &mut [u8]) -> Result<usize> {
        let remaining = self.len.saturating_sub(slice_offset);
        let count = usize::try_from(remaining)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let Some(target) = buf.get_mut(..count) else {
            return Ok(0);
        };
        if count == 0 {
            return Ok(0);
        }
        self.io
            .read_exact_at(&self.file, target, self.position + slice_offset)
            .map_err(|error| Error::io(&*self.path, error))?;
        Ok(count)
    }

    /// The slice's bytes, borrowed from a read-only memory map of the file (no copy). The mapping
    /// covers exactly the slice, which lies within bytes the file already had.
    pub fn bytes(&self) -> Result<Bytes> {
        if self.len == 0 {
            return Ok(Bytes::new());
        }
        let len = usize::try_from(self.len)
            .map_err(|_| Error::corrupt(&*self.path, self.position, "slice too large to map"))?;
        let map = mmap::map_read(&self.file, self.position, len)
            .map_err(|error| Error::io(&*self.path, error))?;
        Ok(Bytes::from_owner(map))
    }
}
