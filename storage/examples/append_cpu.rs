//! CPU time per append, user and system apart and retention's share apart, for the append
//! benchmark's workload (16 KiB batches of 1 KiB records, 64 MiB segments, 256 MiB retention, no
//! fsync): a figure that a shared, loaded machine disturbs far less than criterion's wall-clock
//! time, and that shows how much of an append is the kernel's.
//!
//! Run with `cargo run --release -p skiff-storage --example append_cpu [dir] [appends]`
//! (default: a temporary directory on tmpfs if there is one, 40,000 appends).

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

#[path = "../tests/support/batch.rs"]
mod support;
#[path = "../tests/support/temp.rs"]
mod temp;

use skiff_storage::{LogConfig, LogDir};

/// The append benchmark's batch: 16 records of 1000-byte values.
const RECORDS_PER_BATCH: i32 = 16;
const VALUE_BYTES: usize = 1000;
/// Appends between two retention passes, as in the benchmark.
const APPENDS_PER_RETENTION: u64 = 1024;

/// (user, system) CPU seconds of this process so far.
fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage writes one `rusage` into the zeroed struct we own and reads nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (seconds(usage.ru_utime), seconds(usage.ru_stime))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temp = temp::temp_dir();
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .map_or_else(|| temp.path().to_owned(), Into::into);
    let appends: u64 = args.next().map_or(Ok(40_000), |n| n.parse())?;
    let config = LogConfig {
        segment_bytes: 64 << 20,
        retention_bytes: Some(256 << 20),
        ..LogConfig::default()
    };
    let data = LogDir::open(&path, config)?;
    let log = data.create("cpu", 0, None)?;
    let mut batch = support::batch(0, RECORDS_PER_BATCH, VALUE_BYTES);
    // Warm up: fill the retention window once, so the measured loop is the steady state in which
    // every appended page is eventually freed again.
    let warm_up = (256u64 << 20) / batch.len() as u64 + 1;
    for appended in 1..=warm_up {
        log.append(&mut batch, 0)?;
        if appended % APPENDS_PER_RETENTION == 0 {
            log.enforce_retention(0)?;
        }
    }
    // Retention's share is counted apart: closing a deleted segment frees its page cache, which
    // the benchmark's loop pays for but a broker's retention task pays on its own thread.
    let mut retention_seconds = 0.0;
    let (user_start, system_start) = cpu_seconds();
    for appended in 1..=appends {
        log.append(&mut batch, 0)?;
        if appended % APPENDS_PER_RETENTION == 0 {
            let (user_before, system_before) = cpu_seconds();
            log.enforce_retention(0)?;
            let (user_after, system_after) = cpu_seconds();
            retention_seconds += user_after - user_before + system_after - system_before;
        }
    }
    let (user_end, system_end) = cpu_seconds();
    let per_append_us = |seconds: f64| seconds / appends as f64 * 1e6;
    let user_us = per_append_us(user_end - user_start);
    let system_us = per_append_us(system_end - system_start);
    let total_us = user_us + system_us;
    let retention_us = per_append_us(retention_seconds);
    let mb_per_s = |us: f64| batch.len() as f64 / us;
    println!(
        "{appends} appends of {} bytes, CPU per append: {user_us:.2} µs user + {system_us:.2} µs \
         system = {total_us:.2} µs ({:.0} MB/s); of which retention {retention_us:.2} µs, \
         appends alone {:.2} µs ({:.0} MB/s)",
        batch.len(),
        mb_per_s(total_us),
        total_us - retention_us,
        mb_per_s(total_us - retention_us),
    );
    Ok(())
}
