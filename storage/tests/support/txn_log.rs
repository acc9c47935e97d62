//! Test-only helpers for transactional compacted logs (tests include this file with `#[path]`):
//! a seeded writer of committed, aborted, open and non-transactional keyed batches with their
//! markers and aborted-transaction entries, the ground truth it wrote, a read_committed reader
//! (Kafka's consumer algorithm over the log and its index), and the checks a cleaning must pass.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_protocol::limits::DECOMPRESSED_BYTES_MAX;
use skiff_protocol::records::record::{batch_records, BatchBuilder, NewRecord};
use skiff_protocol::records::txn::{AbortedTxn, EndTxnMarker, MarkerType};
use skiff_protocol::records::v2::BatchHeader;
use skiff_protocol::records::Compression;
use skiff_storage::Log;

/// Keys the writer draws from (few, so most records are superseded).
pub const KEYS: usize = 8;
/// Producers writing transactions (ids 1..=TXN_PRODUCERS).
pub const TXN_PRODUCERS: i64 = 3;

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Not transactional.
    Plain,
    Committed,
    Aborted,
    /// No marker yet (at or past the last stable offset).
    Open,
}

/// A transaction the writer ended.
#[derive(Debug, Clone)]
pub struct Ended {
    pub producer_id: i64,
    pub marker_offset: i64,
    pub commit: bool,
    /// Offsets of its data records.
    pub records: Vec<i64>,
}

/// What the writer wrote.
#[derive(Debug, Default)]
pub struct Truth {
    /// Every data record: offset → (key, value, fate).
    pub records: BTreeMap<i64, (Vec<u8>, Vec<u8>, Fate)>,
    pub ended: Vec<Ended>,
    /// Each producer's open transaction: first offset and its records.
    pub open: BTreeMap<i64, (i64, Vec<i64>)>,
    /// Each producer's last batch's last offset (data or marker).
    pub last_batches: BTreeMap<i64, i64>,
    values: u64,
}

impl Truth {
    /// The last stable offset: the first offset of the earliest open transaction, or `end`.
    pub fn last_stable_offset(&self, end: i64) -> i64 {
        self.open
            .values()
            .map(|(first, _)| *first)
            .min()
            .unwrap_or(end)
    }

    /// What a read_committed reader sees below `bound` as the latest value of each key.
    pub fn committed_latest(&self, bound: i64) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut latest = BTreeMap::new();
        for (offset, (key, value, fate)) in &self.records {
            if *offset < bound && matches!(fate, Fate::Plain | Fate::Committed) {
                latest.insert(key.clone(), value.clone());
            }
        }
        latest
    }
}

fn batch(producer_id: i64, transactional: bool, records: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.producer_id = producer_id;
    builder.producer_epoch = if producer_id >= 0 { 0 } else { -1 };
    builder.base_sequence = if producer_id >= 0 { 0 } else { -1 };
    builder.transactional = transactional;
    for (index, (key, value)) in records.iter().enumerate() {
        builder
            .push(&NewRecord {
                offset_delta: index as i32,
                timestamp: 1_000,
                key: Some(key),
                value: Some(value),
                headers: &[],
            })
            .unwrap();
    }
    builder.build().unwrap()
}

/// A seeded writer of a transactional keyed log.
pub struct Writer {
    rng: ChaCha8Rng,
    pub truth: Truth,
}

impl Writer {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            truth: Truth::default(),
        }
    }

    fn records(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let count = self.rng.gen_range(1..4);
        (0..count)
            .map(|_| {
                self.truth.values += 1;
                let key = format!("k{}", self.rng.gen_range(0..KEYS));
                (
                    key.into_bytes(),
                    format!("v{}", self.truth.values).into_bytes(),
                )
            })
            .collect()
    }

    /// Appends `steps` random steps: non-transactional batches, transactional batches (a
    /// producer's first starts its transaction) and markers (one in three an ABORT, with its
    /// index entry).
    pub fn write(&mut self, log: &Log, steps: usize) {
        for _ in 0..steps {
            let producer_id = self.rng.gen_range(1..=TXN_PRODUCERS);
            match self.rng.gen_range(0..10) {
                0..=2 => self.plain(log),
                3..=7 => self.transactional(log, producer_id),
                _ => {
                    let commit = self.rng.gen_range(0..3) != 0;
                    self.end(log, producer_id, commit);
                }
            }
        }
    }

    pub fn plain(&mut self, log: &Log) {
        let records = self.records();
        let info = log.append(&mut batch(-1, false, &records), 1_000).unwrap();
        for (index, (key, value)) in records.into_iter().enumerate() {
            let offset = info.base_offset + index as i64;
            self.truth.records.insert(offset, (key, value, Fate::Plain));
        }
    }

    pub fn transactional(&mut self, log: &Log, producer_id: i64) {
        let records = self.records();
        let info = log
            .append(&mut batch(producer_id, true, &records), 1_000)
            .unwrap();
        let (_, open) = self
            .truth
            .open
            .entry(producer_id)
            .or_insert((info.base_offset, Vec::new()));
        for (index, (key, value)) in records.into_iter().enumerate() {
            let offset = info.base_offset + index as i64;
            open.push(offset);
            self.truth.records.insert(offset, (key, value, Fate::Open));
        }
        self.truth
            .last_batches
            .insert(producer_id, info.last_offset);
    }

    /// Ends `producer_id`'s open transaction, if any.
    pub fn end(&mut self, log: &Log, producer_id: i64, commit: bool) {
        let Some((first_offset, records)) = self.truth.open.remove(&producer_id) else {
            return;
        };
        let marker_type = if commit {
            MarkerType::Commit
        } else {
            MarkerType::Abort
        };
        let mut marker = EndTxnMarker {
            producer_id,
            producer_epoch: 0,
            coordinator_epoch: 0,
            marker_type,
        }
        .encode_batch(1_000)
        .unwrap();
        let marker_offset = log.append(&mut marker, 1_000).unwrap().base_offset;
        if !commit {
            let last_stable_offset = self.truth.last_stable_offset(marker_offset + 1);
            log.append_aborted_txn(AbortedTxn {
                producer_id,
                first_offset,
                last_offset: marker_offset,
                last_stable_offset,
            })
            .unwrap();
        }
        let fate = if commit {
            Fate::Committed
        } else {
            Fate::Aborted
        };
        for offset in &records {
            if let Some(record) = self.truth.records.get_mut(offset) {
                record.2 = fate;
            }
        }
        self.truth.ended.push(Ended {
            producer_id,
            marker_offset,
            commit,
            records,
        });
        self.truth.last_batches.insert(producer_id, marker_offset);
    }
}

/// One record as read back: offset, key, value.
pub type ReadRecord = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// One batch of the log as read back.
#[derive(Debug, Clone)]
pub struct ReadBatch {
    pub header: BatchHeader,
    /// Offset, key, value of each record (a marker's control record included).
    pub records: Vec<ReadRecord>,
}

/// Every batch of `log` from its start to its end.
pub fn read_batches(log: &Log) -> Vec<ReadBatch> {
    let mut batches = Vec::new();
    let mut offset = log.log_start_offset().unwrap();
    let end = log.log_end_offset().unwrap();
    let mut scratch = Vec::new();
    while offset < end {
        let slice = log.read(offset, 1 << 20, true).unwrap();
        let bytes = slice.bytes().unwrap();
        if bytes.is_empty() {
            break;
        }
        let mut at = 0;
        while at + 61 <= bytes.len() {
            let header = BatchHeader::parse(&bytes[at..]).unwrap();
            if at + header.total_bytes() > bytes.len() {
                break;
            }
            let bytes = &bytes[at..at + header.total_bytes()];
            skiff_protocol::records::v2::validate(bytes).unwrap();
            let records = batch_records(bytes, &header, &mut scratch, DECOMPRESSED_BYTES_MAX)
                .unwrap()
                .map(|record| {
                    let record = record.unwrap();
                    (
                        record.offset,
                        record.key.map(<[u8]>::to_vec),
                        record.value.map(<[u8]>::to_vec),
                    )
                })
                .collect();
            offset = offset.max(header.next_offset());
            at += header.total_bytes();
            if header.last_offset() >= log.log_start_offset().unwrap() {
                batches.push(ReadBatch { header, records });
            }
        }
    }
    batches
}

/// What a read_committed consumer sees below `bound` as the latest value of each key: Kafka's
/// consumer algorithm over the log's batches and the aborted transactions its index answers.
pub fn read_committed_latest(log: &Log, bound: i64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let start = log.log_start_offset().unwrap();
    let mut aborted = log.aborted_transactions(start, bound).unwrap();
    aborted.sort_by_key(|txn| txn.first_offset);
    let mut aborted = aborted.into_iter().peekable();
    let mut producers = BTreeSet::new();
    let mut latest = BTreeMap::new();
    for batch in read_batches(log) {
        let header = batch.header;
        if header.base_offset >= bound {
            break;
        }
        while let Some(txn) = aborted.next_if(|txn| txn.first_offset <= header.last_offset()) {
            producers.insert(txn.producer_id);
        }
        if header.is_control() {
            let abort = batch
                .records
                .first()
                .is_some_and(|(_, key, _)| key.as_deref() == Some(&[0, 0, 0, 0][..]));
            if abort {
                producers.remove(&header.producer_id);
            }
            continue;
        }
        if header.is_transactional() && producers.contains(&header.producer_id) {
            continue;
        }
        for (_, key, value) in batch.records {
            latest.insert(key.unwrap(), value.unwrap());
        }
    }
    latest
}

/// The checks that hold after any prefix of a cleaning's swaps (a power cut in the middle): every
/// marker whose transaction still has a record in the log is there, every aborted-transaction
/// entry has its marker (and each ABORT marker its entry), and a read_committed reader sees
/// what the writer wrote.
pub fn check_partly_cleaned(log: &Log, truth: &Truth, bound: i64) {
    check_cleaned(log, truth, i64::MIN, bound);
}

/// The checks of a cleaning that ended at `cleaned_end` (below `bound`, the LSO it was given):
/// no aborted record below it survives; every marker whose transaction still has a record in
/// the log is there; the index holds one entry per ABORT marker the log keeps; and a read_committed reader
/// sees each key's latest committed value as the writer wrote it.
pub fn check_cleaned(log: &Log, truth: &Truth, cleaned_end: i64, bound: i64) {
    let batches = read_batches(log);
    let offsets: BTreeSet<i64> = batches
        .iter()
        .filter(|batch| !batch.header.is_control())
        .flat_map(|batch| batch.records.iter().map(|record| record.0))
        .collect();
    let markers: BTreeSet<i64> = batches
        .iter()
        .filter(|batch| batch.header.is_control())
        .map(|batch| batch.header.base_offset)
        .collect();
    for (offset, (_, _, fate)) in &truth.records {
        if *fate == Fate::Aborted && *offset < cleaned_end {
            assert!(
                !offsets.contains(offset),
                "aborted record {offset} survived"
            );
        }
    }
    for ended in &truth.ended {
        if ended.records.iter().any(|offset| offsets.contains(offset)) {
            assert!(
                markers.contains(&ended.marker_offset),
                "marker {} went while its transaction has data",
                ended.marker_offset
            );
        }
    }
    let start = log.log_start_offset().unwrap();
    let entries: BTreeSet<i64> = log
        .aborted_transactions(start, i64::MAX)
        .unwrap()
        .iter()
        .map(|entry| entry.last_offset)
        .collect();
    let aborts: BTreeSet<i64> = truth
        .ended
        .iter()
        .filter(|ended| !ended.commit && markers.contains(&ended.marker_offset))
        .map(|ended| ended.marker_offset)
        .collect();
    assert_eq!(entries, aborts, "one entry per ABORT marker the log keeps");
    assert_eq!(
        read_committed_latest(log, bound),
        truth.committed_latest(bound),
        "read_committed view"
    );
}

/// The markers of `log`.
pub fn marker_offsets(log: &Log) -> BTreeSet<i64> {
    read_batches(log)
        .iter()
        .filter(|batch| batch.header.is_control())
        .map(|batch| batch.header.base_offset)
        .collect()
}
