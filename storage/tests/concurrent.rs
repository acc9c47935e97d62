//! Reads concurrent with appends, rolls and retention: every slice a reader gets starts at the
//! batch holding its offset, holds only valid batches (CRC32C checked) with increasing offsets,
//! and stays readable after retention deletes its segment.

// Test code: a failed unwrap, expect or index is the report. The workspace's lint wall is for
// library code; clippy.toml exempts #[test] functions but not the helpers beside them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

#[path = "support/batch.rs"]
mod support;
#[path = "support/temp.rs"]
mod temp;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_protocol::records::v2::{self, BatchHeader};
use skiff_storage::{Error, LogConfig, LogDir};
use support::batch_with;
use temp::temp_dir;

const BATCHES: usize = 3000;
const READERS: u64 = 2;

#[test]
fn readers_see_whole_valid_batches_while_appends_roll_and_retention_deletes() {
    let dir = temp_dir();
    let config = LogConfig {
        segment_bytes: 16 * 1024,
        batch_bytes_max: 16 * 1024,
        index_interval_bytes: 512,
        retention_bytes: Some(64 * 1024),
        ..LogConfig::default()
    };
    let data = LogDir::open(dir.path(), config).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..READERS)
        .map(|reader| {
            let log = Arc::clone(&log);
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(reader);
                let mut reads = 0u64;
                while !done.load(Ordering::SeqCst) || reads < 100 {
                    let start = log.log_start_offset().unwrap();
                    let end = log.log_end_offset().unwrap();
                    if end == start {
                        continue;
                    }
                    let offset = rng.gen_range(start..end);
                    let slice = match log.read(offset, rng.gen_range(1..8192), true) {
                        Ok(slice) => slice,
                        // Retention moved the start between our two calls.
                        Err(Error::OffsetOutOfRange { log_start, .. }) if log_start > offset => {
                            continue
                        }
                        Err(error) => panic!("read {offset}: {error}"),
                    };
                    let bytes = slice.bytes().unwrap();
                    let mut at = 0usize;
                    let mut previous_last = None;
                    while at + v2::BATCH_HEADER_BYTES <= bytes.len() {
                        let header = BatchHeader::parse(&bytes[at..]).unwrap();
                        let end = at + header.total_bytes();
                        if end > bytes.len() {
                            break; // a partial batch at the end of a max_bytes-bounded slice
                        }
                        v2::validate(&bytes[at..end]).unwrap();
                        if at == 0 {
                            assert!(header.base_offset <= offset && offset <= header.last_offset());
                        }
                        if let Some(last) = previous_last {
                            assert!(header.base_offset > last);
                        }
                        previous_last = Some(header.last_offset());
                        at = end;
                    }
                    assert!(previous_last.is_some(), "min_one_batch gives a whole batch");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for index in 0..BATCHES {
        let mut input = batch_with(
            0,
            rng.gen_range(1..6),
            rng.gen_range(0..400),
            0,
            index as u8,
        );
        log.append(&mut input, 0).unwrap();
        if index % 100 == 0 {
            log.enforce_retention(0).unwrap();
        }
    }
    done.store(true, Ordering::SeqCst);
    for reader in readers {
        assert!(reader.join().unwrap() >= 100);
    }
    assert!(log.log_start_offset().unwrap() > 0, "retention ran");
}
