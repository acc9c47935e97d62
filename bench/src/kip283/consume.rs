//! One consumer reading a topic start to end at one Fetch version, as KIP-283's throughput test
//! did: every partition in each request, until each reaches the offset the producer ended at.
//! [`scan`] is the sans-IO part: it finds the next offset in a partition's records and, when asked,
//! verifies every message (offset, magic, key, value), so a fast wrong answer cannot pass.
//!
//! Must never: loop without progress (a round in which no partition advances is an error), or run
//! past its deadline.

use std::time::Instant;

use anyhow::{bail, Context};
use bytes::BytesMut;
use kafka_protocol::messages::ApiKey;
use serde::{Deserialize, Serialize};
use skiff_protocol::records::legacy;
use skiff_protocol::records::{v2, Compression, Magic};

use super::{record_key, value_byte, RECORD_VALUE_BYTES};
use crate::client::{decode_fetch, fetch_request_partitions, Connection};

/// The first Fetch version that gets v2 batches as stored (no down-conversion).
pub const MODERN_FETCH_VERSION_MIN: i16 = 4;

/// The Fetch `max_wait_ms` (data is always there, so the broker never waits).
const MAX_WAIT_MS: i32 = 500;

/// What a partition's records held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// Records (messages) found.
    pub record_count: u64,
    /// The offset to fetch next.
    pub next_offset: i64,
}

/// The message format a Fetch `version` delivers, `None` for v2 batches as stored.
pub fn legacy_magic(version: i16) -> Option<Magic> {
    match version {
        0 | 1 => Some(Magic::V0),
        2 | 3 => Some(Magic::V1),
        _ => None,
    }
}

/// Scans the records of one partition fetched at `fetch_offset` with Fetch `version`. With
/// `verify`, every message must be the one the producer wrote at its offset, in the format the
/// version calls for, offsets contiguous from `fetch_offset`.
pub fn scan(records: &[u8], version: i16, fetch_offset: i64, verify: bool) -> anyhow::Result<Scan> {
    let mut scanned = Scan {
        record_count: 0,
        next_offset: fetch_offset,
    };
    match legacy_magic(version) {
        Some(magic) => {
            for entry in legacy::entries(records) {
                let entry = entry?;
                if verify {
                    verify_legacy(&entry, magic, scanned.next_offset)?;
                }
                scanned.record_count += 1;
                scanned.next_offset = entry.offset + 1;
            }
        }
        None => {
            for item in v2::batch_positions(records) {
                let (_, header) = item?;
                if verify && header.base_offset != scanned.next_offset {
                    bail!(
                        "batch at {} where {} was expected",
                        header.base_offset,
                        scanned.next_offset
                    );
                }
                scanned.record_count += u64::try_from(header.records_count)?;
                scanned.next_offset = header.next_offset();
            }
        }
    }
    Ok(scanned)
}

fn verify_legacy(
    entry: &legacy::LegacyMessage<'_>,
    magic: Magic,
    expected: i64,
) -> anyhow::Result<()> {
    if entry.offset != expected {
        bail!("message at {} where {expected} was expected", entry.offset);
    }
    if entry.magic != magic {
        bail!(
            "message {expected} has magic {:?}, expected {magic:?}",
            entry.magic
        );
    }
    if entry.compression()? != Compression::None {
        bail!("message {expected} is compressed; the producer wrote none");
    }
    entry.check_crc()?;
    if entry.key != Some(record_key(expected).as_bytes()) {
        bail!("message {expected} has the wrong key");
    }
    let value = entry.value.context("null value")?;
    if value.len() != RECORD_VALUE_BYTES || value.iter().any(|byte| *byte != value_byte(expected)) {
        bail!("message {expected} has the wrong value");
    }
    Ok(())
}

/// How one consumer reads.
#[derive(Debug, Clone)]
pub struct FetchSpec {
    /// Topic.
    pub topic: String,
    /// Partitions 0..count, all in every request.
    pub partition_count: i32,
    /// Fetch version.
    pub version: i16,
    /// Per-partition limit.
    pub partition_max_bytes: i32,
    /// Response limit (v3+).
    pub max_bytes: i32,
}

/// One start-to-end read.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PassOutcome {
    /// Messages read.
    pub record_count: u64,
    /// Response bytes on the wire (size prefixes included).
    pub response_bytes: u64,
    /// Wall time.
    pub seconds: f64,
}

impl PassOutcome {
    /// Response bytes per second.
    pub fn bytes_per_second(&self) -> f64 {
        self.response_bytes as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }
}

/// Reads every partition from offset 0 to `end_offset` on `connection`; `buffer` is reused across
/// responses (and passes).
pub async fn read_pass(
    connection: &mut Connection,
    spec: &FetchSpec,
    end_offset: i64,
    verify: bool,
    deadline: Instant,
    buffer: &mut BytesMut,
) -> anyhow::Result<PassOutcome> {
    let started = Instant::now();
    let mut offsets = vec![0i64; usize::try_from(spec.partition_count)?];
    let mut outcome = PassOutcome {
        record_count: 0,
        response_bytes: 0,
        seconds: 0.0,
    };
    loop {
        let wanted: Vec<(i32, i64)> = (0..spec.partition_count)
            .zip(offsets.iter().copied())
            .filter(|(_, offset)| *offset < end_offset)
            .collect();
        if wanted.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            bail!("pass did not finish before its deadline");
        }
        let request = fetch_request_partitions(
            &spec.topic,
            &wanted,
            spec.partition_max_bytes,
            spec.max_bytes,
            MAX_WAIT_MS,
        );
        let correlation_id = connection
            .send(ApiKey::Fetch, spec.version, &request)
            .await?;
        let size = connection.read_size().await?;
        let body = connection.read_body_reusing(size, buffer).await?;
        outcome.response_bytes += u64::try_from(size + 4)?;
        if body.get(..4) != Some(&correlation_id.to_be_bytes()[..]) {
            bail!("fetch response with the wrong correlation id");
        }
        let response = decode_fetch(body, spec.version)?;
        let mut progressed = false;
        for topic in &response.responses {
            for partition in &topic.partitions {
                if partition.error_code != 0 {
                    bail!(
                        "partition {} answered error {}",
                        partition.partition_index,
                        partition.error_code
                    );
                }
                let slot = offsets
                    .get_mut(usize::try_from(partition.partition_index)?)
                    .context("a partition that was not asked for")?;
                let records = partition.records.as_deref().unwrap_or_default();
                let scanned = scan(records, spec.version, *slot, verify)
                    .with_context(|| format!("partition {}", partition.partition_index))?;
                progressed |= scanned.next_offset > *slot;
                outcome.record_count += scanned.record_count;
                *slot = scanned.next_offset;
            }
        }
        if !progressed {
            bail!("a fetch round advanced no partition (offsets {offsets:?})");
        }
    }
    outcome.seconds = started.elapsed().as_secs_f64();
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kip283::produce::batch;

    fn legacy_set(magic: Magic, offsets: std::ops::Range<i64>, corrupt: Option<i64>) -> Vec<u8> {
        let mut builder = legacy::LegacySetBuilder::new(magic, Compression::None, None).unwrap();
        for offset in offsets {
            let mut value = vec![value_byte(offset); RECORD_VALUE_BYTES];
            if corrupt == Some(offset) {
                value[7] ^= 1;
            }
            builder
                .append(offset, 0, Some(record_key(offset).as_bytes()), Some(&value))
                .unwrap();
        }
        builder.finish().unwrap();
        builder.into_buffer()
    }

    #[test]
    fn verified_legacy_scan_counts_and_advances() {
        let set = legacy_set(Magic::V1, 5..9, None);
        let scanned = scan(&set, 2, 5, true).unwrap();
        assert_eq!(
            scanned,
            Scan {
                record_count: 4,
                next_offset: 9
            }
        );
        // A partial tail is ignored, not an error.
        let cut = &set[..set.len() - 10];
        assert_eq!(scan(cut, 3, 5, true).unwrap().next_offset, 8);
    }

    #[test]
    fn verification_catches_wrong_magic_value_and_gaps() {
        let v0 = legacy_set(Magic::V0, 0..3, None);
        assert!(scan(&v0, 2, 0, true).is_err(), "v2 fetch must get magic 1");
        assert!(scan(&v0, 0, 0, true).is_ok());
        assert!(
            scan(&v0, 0, 1, true).is_err(),
            "offsets must start at the fetch offset"
        );
        let flipped = legacy_set(Magic::V0, 0..3, Some(1));
        assert!(scan(&flipped, 0, 0, true).is_err());
        // Unverified scans only follow offsets.
        assert_eq!(scan(&flipped, 0, 0, false).unwrap().next_offset, 3);
    }

    #[test]
    fn modern_scan_follows_batches() {
        let mut records = batch(0, 4).unwrap();
        let mut second = batch(4, 3).unwrap();
        v2::set_base_offset(&mut second, 4).unwrap();
        records.extend_from_slice(&second);
        assert_eq!(
            scan(&records, 4, 0, true).unwrap(),
            Scan {
                record_count: 7,
                next_offset: 7
            }
        );
        assert!(scan(&records, 4, 1, true).is_err());
    }
}
