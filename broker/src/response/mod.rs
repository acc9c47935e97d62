//! The plan of a response: the parts a handler answers with, in wire order ([`ResponsePart`]):
//! bytes it encoded, stored batches sent from their segment file, and legacy responses whose
//! record sets are converted while they are sent ([`conversion`]). Handlers build plans; the connection's writer
//! (`net::send`) carries them out, so both import this module and neither imports the other.
//!
//! Must never: touch a socket (writing is the connection's), or decide what a request means.

pub(crate) mod conversion;

use bytes::Bytes;
use skiff_storage::FetchSlice;

use conversion::LegacyResponse;

/// One piece of a response, written in order.
pub(crate) enum ResponsePart {
    /// Header fields, partition headers, small responses.
    Bytes(Bytes),
    /// Stored v2 batches sent as they are (modern fetch): the slice keeps its segment file open
    /// even if retention deletes it. Boxed so that a part is 40 bytes, not 72 (a `FetchSlice` is
    /// 64): a modern response keeps two parts per partition (its header bytes and its records)
    /// until they are written. Measured for issue 41 (a 1,000-partition plan built and dropped):
    /// the box costs about 34 ns per partition (38 boxed, 4 inline), a twentieth of one 1 KiB
    /// `pread` from the page cache (about 680 ns), and each partition's part costs at least one
    /// `sendfile`; inline would add 64 bytes per partition to every response. Kept boxed.
    File(Box<FetchSlice>),
    /// A whole legacy (Fetch v0–v3) response: its header bytes and its record sets, each
    /// converted at its turn on the wire (about 114 bytes per partition until then, not two
    /// parts and a prepared converter).
    Legacy(Box<LegacyResponse>),
}

impl ResponsePart {
    /// Bytes this part puts on the wire.
    pub(crate) fn wire_len(&self) -> usize {
        match self {
            Self::Bytes(bytes) => bytes.len(),
            Self::File(slice) => usize::try_from(slice.len()).unwrap_or(usize::MAX),
            Self::Legacy(response) => response.wire_len(),
        }
    }
}
