//! The batch scan behind recovery and index rebuilds: walks the bytes of one segment and accepts
//! each batch only if its length, magic, CRC32C and offsets check out, stopping at the first one
//! that does not. Pure over a byte slice (the caller maps the file), so it is fuzzed directly.
//! Owns the acceptance rules for stored batches; must never allocate by a length read from the
//! bytes, nor decide whether a stop is a torn tail or corruption (the segment knows the flushed
//! point; see `Segment::recover`).

use skiff_protocol::records::v2::{self, BatchHeader, BATCH_HEADER_BYTES};
use skiff_protocol::records::RecordError;

use crate::limits;

/// Why a scan stopped before the end of the bytes (recovery decides whether it is a torn tail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScanProblem {
    /// The position to start from lies beyond the bytes.
    #[error("start beyond the data")]
    StartBeyondData,
    /// The offset index names a position past the end of the log file.
    #[error("index points past the end of the log")]
    IndexPastEnd,
    /// An accepted batch's position does not fit the index's 4-byte positions.
    #[error("position overflow")]
    PositionOverflow,
    /// Fewer bytes left than a batch header takes.
    #[error("torn batch header ({0} bytes)")]
    TornHeader(usize),
    /// The header or the batch does not check out (length, magic, CRC).
    #[error(transparent)]
    Record(#[from] RecordError),
    /// Fewer bytes left than the header declares.
    #[error("torn batch: {declared} bytes declared, {present} present")]
    TornBatch {
        /// The batch's declared size, in bytes.
        declared: usize,
        /// Bytes left in the segment.
        present: usize,
    },
    /// The batch would end past the largest segment.
    #[error("batch extends past the largest segment")]
    PastLargestSegment,
    /// The batch's base offset is below the offset the log expects next.
    #[error("base offset {base_offset} below expected {expected}")]
    OffsetBelowExpected {
        /// The batch's base offset.
        base_offset: i64,
        /// The offset expected next.
        expected: i64,
    },
    /// The batch's last offset delta is negative.
    #[error("negative last offset delta {0}")]
    NegativeLastOffsetDelta(i32),
    /// The batch's last offset does not fit the segment's 4-byte relative offsets.
    #[error("offset does not fit the segment's 4-byte relative offsets")]
    RelativeOffsetOverflow,
}

/// Where and why a scan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanEnd {
    /// Bytes from the start of the segment up to the end of the last accepted batch.
    pub(crate) valid_bytes: u64,
    /// Offset after the last accepted batch (or the expected offset if none was accepted).
    pub(crate) next_offset: i64,
    /// Why the scan stopped before the end of the bytes; `None` if it consumed them all.
    pub(crate) problem: Option<ScanProblem>,
}

/// Scans `bytes` (a whole segment) from `start_position`, where a batch with base offset ≥
/// `expected_offset` must begin, in a segment whose base offset is `base_offset`. Calls
/// `on_batch(position, header)` for each accepted batch, in order.
pub(crate) fn scan(
    bytes: &[u8],
    start_position: u64,
    expected_offset: i64,
    base_offset: i64,
    mut on_batch: impl FnMut(u32, &BatchHeader),
) -> ScanEnd {
    let mut position = start_position;
    let mut next_offset = expected_offset;
    let end = |position: u64, next_offset: i64, problem: Option<ScanProblem>| ScanEnd {
        valid_bytes: position,
        next_offset,
        problem,
    };
    loop {
        let Some(rest) = usize::try_from(position)
            .ok()
            .and_then(|start| bytes.get(start..))
        else {
            return end(position, next_offset, Some(ScanProblem::StartBeyondData));
        };
        if rest.is_empty() {
            return end(position, next_offset, None);
        }
        match accept(rest, position, next_offset, base_offset) {
            Ok(header) => {
                // `accept` checked position + size ≤ SEGMENT_BYTES_MAX, so both fit u32.
                let Ok(position_u32) = u32::try_from(position) else {
                    return end(position, next_offset, Some(ScanProblem::PositionOverflow));
                };
                on_batch(position_u32, &header);
                position += header.total_bytes() as u64;
                next_offset = header.next_offset();
            }
            Err(problem) => return end(position, next_offset, Some(problem)),
        }
    }
}

/// Checks the batch at the start of `rest` (found at `position`).
fn accept(
    rest: &[u8],
    position: u64,
    expected_offset: i64,
    base_offset: i64,
) -> Result<BatchHeader, ScanProblem> {
    if rest.len() < BATCH_HEADER_BYTES {
        return Err(ScanProblem::TornHeader(rest.len()));
    }
    let header = BatchHeader::parse(rest)?;
    let size_bytes = header.total_bytes();
    let Some(batch) = rest.get(..size_bytes) else {
        return Err(ScanProblem::TornBatch {
            declared: size_bytes,
            present: rest.len(),
        });
    };
    if position + size_bytes as u64 > limits::SEGMENT_BYTES_MAX {
        return Err(ScanProblem::PastLargestSegment);
    }
    v2::validate(batch)?;
    if header.base_offset < expected_offset {
        return Err(ScanProblem::OffsetBelowExpected {
            base_offset: header.base_offset,
            expected: expected_offset,
        });
    }
    if header.last_offset_delta < 0 {
        return Err(ScanProblem::NegativeLastOffsetDelta(
            header.last_offset_delta,
        ));
    }
    let relative_last = header.last_offset().checked_sub(base_offset);
    if relative_last.is_none_or(|relative| relative > i64::from(u32::MAX)) {
        return Err(ScanProblem::RelativeOffsetOverflow);
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::batch;

    #[test]
    fn scan_accepts_valid_and_stops_at_the_first_bad_batch() {
        let mut bytes = batch(0, 3, 100);
        let first_len = bytes.len() as u64;
        bytes.extend(batch(3, 2, 50));
        let two_len = bytes.len() as u64;
        let mut seen = Vec::new();
        let end = scan(&bytes, 0, 0, 0, |position, header| {
            seen.push((position, header.base_offset))
        });
        assert_eq!(end.valid_bytes, two_len);
        assert_eq!(end.next_offset, 5);
        assert_eq!(end.problem, None);
        assert_eq!(seen, vec![(0, 0), (first_len as u32, 3)]);

        // A torn third batch, a flipped byte and a repeated offset each stop the scan.
        let mut torn = bytes.clone();
        torn.extend_from_slice(&batch(5, 1, 10)[..30]);
        let end = scan(&torn, 0, 0, 0, |_, _| {});
        assert_eq!((end.valid_bytes, end.next_offset), (two_len, 5));
        assert!(end.problem.is_some());

        let mut flipped = bytes.clone();
        flipped[first_len as usize + 70] ^= 1;
        let end = scan(&flipped, 0, 0, 0, |_, _| {});
        assert_eq!((end.valid_bytes, end.next_offset), (first_len, 3));

        let mut repeated = bytes.clone();
        repeated.extend(batch(4, 1, 10));
        let end = scan(&repeated, 0, 0, 0, |_, _| {});
        assert_eq!(end.valid_bytes, two_len);
        assert!(end.problem.unwrap().to_string().contains("below expected"));
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        let mut bytes = batch(0, 1, 10);
        bytes[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        let end = scan(&bytes, 0, 0, 0, |_, _| panic!("accepted"));
        assert_eq!(end.valid_bytes, 0);
        assert!(end.problem.is_some());
    }
}
