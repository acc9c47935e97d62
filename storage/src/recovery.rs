//! The batch scan behind recovery and index rebuilds: walks the bytes of one segment and accepts
//! each batch only if its length, magic, CRC32C and offsets check out, stopping at the first one
//! that does not. Pure over a byte slice (the caller maps the file), so it is fuzzed directly.
//! Owns the acceptance rules for stored batches; must never allocate by a length read from the
//! bytes, nor decide whether a stop is a torn tail or corruption (the segment knows the flushed
//! point; see `Segment::recover`).

use skiff_protocol::records::v2::{self, BatchHeader, BATCH_HEADER_BYTES};

use crate::limits;

/// Where and why a scan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanEnd {
    /// Bytes from the start of the segment up to the end of the last accepted batch.
    pub(crate) valid_bytes: u64,
    /// Offset after the last accepted batch (or the expected offset if none was accepted).
    pub(crate) next_offset: i64,
    /// Why the scan stopped before the end of the bytes; `None` if it consumed them all.
    pub(crate) problem: Option<String>,
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
    let end = |position: u64, next_offset: i64, problem: Option<String>| ScanEnd {
        valid_bytes: position,
        next_offset,
        problem,
    };
    loop {
        let Some(rest) = usize::try_from(position)
            .ok()
            .and_then(|start| bytes.get(start..))
        else {
            return end(
                position,
                next_offset,
                Some("start beyond the data".to_owned()),
            );
        };
        if rest.is_empty() {
            return end(position, next_offset, None);
        }
        match accept(rest, position, next_offset, base_offset) {
            Ok(header) => {
                // `accept` checked position + size ≤ SEGMENT_BYTES_MAX, so both fit u32.
                let Ok(position_u32) = u32::try_from(position) else {
                    return end(position, next_offset, Some("position overflow".to_owned()));
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
) -> Result<BatchHeader, String> {
    if rest.len() < BATCH_HEADER_BYTES {
        return Err(format!("torn batch header ({} bytes)", rest.len()));
    }
    let header = BatchHeader::parse(rest).map_err(|error| error.to_string())?;
    let size_bytes = header.total_bytes();
    let Some(batch) = rest.get(..size_bytes) else {
        return Err(format!(
            "torn batch: {size_bytes} bytes declared, {} present",
            rest.len()
        ));
    };
    if position + size_bytes as u64 > limits::SEGMENT_BYTES_MAX {
        return Err("batch extends past the largest segment".to_owned());
    }
    v2::validate(batch).map_err(|error| error.to_string())?;
    if header.base_offset < expected_offset {
        return Err(format!(
            "base offset {} below expected {expected_offset}",
            header.base_offset
        ));
    }
    if header.last_offset_delta < 0 {
        return Err(format!(
            "negative last offset delta {}",
            header.last_offset_delta
        ));
    }
    let relative_last = header.last_offset().checked_sub(base_offset);
    if relative_last.is_none_or(|relative| relative > i64::from(u32::MAX)) {
        return Err("offset does not fit the segment's 4-byte relative offsets".to_owned());
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
        assert!(end.problem.unwrap().contains("below expected"));
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
