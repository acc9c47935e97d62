//! kill -9 at random moments: a child process appends with a flush on every batch and prints
//! each acknowledged offset; the parent kills it, reopens the directory (recovery, no clean
//! marker) and checks that every acknowledged batch is present and byte-identical. Prints its
//! seed; `SKIFF_SEED=<n>` replays the kill timings.

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

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_protocol::records::v2;
use skiff_storage::{LogConfig, LogDir};
use support::batch_with;
use temp::temp_dir;

/// Set in the child's environment to the data directory; absent in a normal test run.
const CHILD_DIR_ENV: &str = "SKIFF_CRASH_CHILD_DIR";
/// The child's cycle number, which selects its payloads.
const CHILD_CYCLE_ENV: &str = "SKIFF_CRASH_CHILD_CYCLE";
const CYCLES: u64 = 24;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 * 1024,
        batch_bytes_max: 8 * 1024,
        flush_messages_interval: Some(1),
        ..LogConfig::default()
    }
}

/// The batch a child of `cycle` appends as its `index`-th, before the log assigns its offset.
fn payload(cycle: u64, index: u64) -> Vec<u8> {
    batch_with(
        0,
        1 + (index % 3) as i32,
        ((index * 13) % 300) as usize,
        index as i64,
        (cycle * 31 + index) as u8,
    )
}

/// The child's body: runs only when the parent re-invokes this test binary with the env set.
#[test]
fn crash_child_appends_until_killed() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return; // A normal run: this entry point belongs to the kill -9 test below.
    };
    let cycle: u64 = std::env::var(CHILD_CYCLE_ENV).unwrap().parse().unwrap();
    let data = LogDir::open(&dir, config()).unwrap();
    let log = match data.log("t", 0).unwrap() {
        Some(log) => log,
        None => data.create("t", 0, None).unwrap(),
    };
    let mut stdout = std::io::stdout().lock();
    for index in 0.. {
        let info = log.append(&mut payload(cycle, index), 0).unwrap();
        assert!(info.flushed);
        writeln!(stdout, "ACK {cycle} {index} {}", info.base_offset).unwrap();
        stdout.flush().unwrap();
    }
}

#[test]
fn kill_9_loses_no_acknowledged_batch() {
    let seed: u64 = std::env::var("SKIFF_SEED")
        .map(|text| text.parse().expect("SKIFF_SEED is a number"))
        .unwrap_or_else(|_| u64::from(std::process::id()) * 7919);
    println!("SKIFF_SEED={seed}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = temp_dir();
    let exe = std::env::current_exe().unwrap();
    let mut acknowledged: Vec<(u64, u64, i64)> = Vec::new();
    for cycle in 0..CYCLES {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child_appends_until_killed", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(CHILD_DIR_ENV, dir.path())
            .env(CHILD_CYCLE_ENV, cycle.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut acks = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let fields: Vec<&str> = line.split_whitespace().collect();
                if let ["ACK", cycle, index, offset] = fields[..] {
                    acks.push((
                        cycle.parse().unwrap(),
                        index.parse().unwrap(),
                        offset.parse().unwrap(),
                    ));
                }
            }
            acks
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(30..250)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acks = reader.join().unwrap();
        let fresh = acks.len();
        acknowledged.extend(acks);

        // Every acknowledgement of this cycle, and a sample of older ones (all are checked at
        // the end, after the last recovery).
        let mut check: Vec<(u64, u64, i64)> = acknowledged[acknowledged.len() - fresh..].to_vec();
        for _ in 0..20.min(acknowledged.len()) {
            check.push(acknowledged[rng.gen_range(0..acknowledged.len())]);
        }
        verify(&dir, &check, &format!("seed {seed} cycle {cycle}"));
    }
    verify(&dir, &acknowledged, &format!("seed {seed} final"));
    let offsets: Vec<i64> = acknowledged.iter().map(|ack| ack.2).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "seed {seed}: offsets increase"
    );
    assert!(
        acknowledged.len() >= CYCLES as usize,
        "seed {seed}: only {} acknowledgements; the children barely ran",
        acknowledged.len()
    );
    println!("{} acknowledged batches verified", acknowledged.len());
}

/// Reopens the directory (recovery) and checks each acknowledged batch byte for byte.
fn verify(dir: &tempfile::TempDir, acks: &[(u64, u64, i64)], context: &str) {
    let data = LogDir::open(dir.path(), config()).unwrap();
    let Some(log) = data.log("t", 0).unwrap() else {
        assert!(acks.is_empty(), "{context}: acknowledged but no log");
        return;
    };
    let log_end = log.log_end_offset().unwrap();
    for &(ack_cycle, index, offset) in acks {
        let context = format!("{context}: ack {ack_cycle}/{index} @{offset}");
        assert!(offset < log_end, "{context}: log end {log_end}");
        let mut want = payload(ack_cycle, index);
        v2::set_base_offset(&mut want, offset).unwrap();
        let slice = log.read(offset, 1, true).unwrap();
        let mut got = vec![0u8; slice.len() as usize];
        assert_eq!(slice.read_at(0, &mut got).unwrap(), got.len());
        assert_eq!(got, want, "{context}");
    }
}
