//! Time of a clean close of many logs, each with one fresh batch (issue 20's shutdown target at
//! the storage level, without the broker): creates `logs` logs in `dir` (ext4 here; tmpfs would
//! show nothing), appends one 100-byte record to each, closes the directory and prints the time;
//! then reopens it (the clean path) and closes it again idle.
//!
//! Run with `cargo run --release -p skiff-storage --example close_many DIR [logs]` (default
//! 10,000 logs; DIR must not exist or be empty, and is removed afterwards).

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
// A measurement outside the engine: the clock rule is the engine's (time comes in as an argument).
#![allow(clippy::disallowed_methods)]

#[path = "../tests/support/batch.rs"]
mod support;

use std::time::Instant;

use skiff_storage::{LogConfig, LogDir};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path: std::path::PathBuf = args.next().ok_or("usage: close_many DIR [logs]")?.into();
    let logs: i32 = args.next().map_or(Ok(10_000), |n| n.parse())?;
    let data = LogDir::open(&path, LogConfig::default())?;
    let started = Instant::now();
    for partition in 0..logs {
        data.create("close", partition, None)?;
    }
    println!(
        "create {logs} logs: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    data.close()?;
    let data = LogDir::open(&path, LogConfig::default())?;
    assert!(data.opened_clean());
    let mut batch = support::batch(0, 1, 100);
    let started = Instant::now();
    for partition in 0..logs {
        let log = data.log("close", partition)?.ok_or("log missing")?;
        log.append(&mut batch, 0)?;
    }
    println!(
        "append one batch to each: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    data.close()?;
    println!(
        "close after a batch to every log: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let data = LogDir::open(&path, LogConfig::default())?;
    println!(
        "clean open: {:.2} s (clean: {})",
        started.elapsed().as_secs_f64(),
        data.opened_clean()
    );
    let started = Instant::now();
    data.close()?;
    println!(
        "close idle (nothing appended since the open): {:.2} s",
        started.elapsed().as_secs_f64()
    );
    std::fs::remove_dir_all(&path)?;
    Ok(())
}
