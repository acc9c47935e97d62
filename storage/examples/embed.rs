//! Embedding skiff-storage without a broker: create a log, append producer batches, restart, and
//! read everything back.
//!
//! Run with `cargo run -p skiff-storage --example embed [data-dir]` (default: a temp directory).

// Example code: a failed unwrap, expect or index is the report. The workspace's lint wall is for
// library code; clippy.toml's test exemptions do not reach examples.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use skiff_protocol::records::record::{BatchBuilder, NewRecord, RecordIter};
use skiff_protocol::records::v2::{BatchHeader, BATCH_HEADER_BYTES};
use skiff_protocol::records::Compression;
use skiff_storage::{LogConfig, LogDir, PersistMode};

/// A v2 batch of `values` as a producer would send it (base offset 0: the log assigns offsets).
fn batch(values: &[&str], timestamp_ms: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    for (delta, value) in values.iter().enumerate() {
        let record = NewRecord {
            offset_delta: i32::try_from(delta).expect("few records"),
            timestamp: timestamp_ms,
            key: None,
            value: Some(value.as_bytes()),
            headers: &[],
        };
        builder.push(&record).expect("record fits");
    }
    builder.build().expect("batch builds")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temp = tempfile::tempdir()?;
    let path = std::env::args()
        .nth(1)
        .map_or_else(|| temp.path().to_owned(), Into::into);
    // Fsync every append: what a producer with acks=all on a single node would want.
    let config = LogConfig {
        flush_messages_interval: Some(1),
        persist_mode: PersistMode::SyncData,
        ..LogConfig::default()
    };

    // 1. Create a log and append. The caller supplies the time; storage never reads a clock.
    let now_ms = 1_700_000_000_000;
    let data = LogDir::open(&path, config.clone())?;
    let log = match data.log("greetings", 0)? {
        Some(log) => log,
        None => data.create("greetings", 0, None)?,
    };
    for (index, values) in [
        &["hello", "world"][..],
        &["bonjour"],
        &["hallo", "hola", "ciao"],
    ]
    .iter()
    .enumerate()
    {
        let info = log.append(&mut batch(values, now_ms + index as i64), now_ms)?;
        println!(
            "appended offsets {}..={} at byte {} (flushed: {})",
            info.base_offset, info.last_offset, info.position, info.flushed
        );
    }

    // 2. Restart: a clean close writes the clean-shutdown marker; reopening skips recovery.
    drop(log);
    data.close()?;
    let data = LogDir::open(&path, config)?;
    println!("logs after restart: {:?}", data.list()?);
    let log = data
        .log("greetings", 0)?
        .ok_or("log missing after restart")?;
    println!(
        "log start {}, log end {}, flushed below {}",
        log.log_start_offset()?,
        log.log_end_offset()?,
        log.flushed_offset()?
    );

    // 3. Read back from offset 0: a slice of the segment file (what a broker would sendfile),
    // borrowed here through a memory map and decoded batch by batch.
    let mut offset = log.log_start_offset()?;
    while offset < log.log_end_offset()? {
        let slice = log.read(offset, 1024 * 1024, true)?;
        let bytes = slice.bytes()?;
        let mut at = 0;
        while let Some(rest) = bytes.get(at..).filter(|rest| !rest.is_empty()) {
            let header = BatchHeader::parse(rest)?;
            let batch = rest.get(..header.total_bytes()).ok_or("partial batch")?;
            let records = batch.get(BATCH_HEADER_BYTES..).ok_or("short batch")?;
            for record in RecordIter::new(records, &header)? {
                let record = record?;
                let value = record.value.map(String::from_utf8_lossy);
                println!("offset {}: {}", record.offset, value.unwrap_or_default());
            }
            offset = header.next_offset();
            at += header.total_bytes();
        }
    }
    data.close()?;
    Ok(())
}
