//! A fixed amount of down-conversion work for instruction counting (criterion's wall-clock figures
//! swing several times on a loaded machine; callgrind's counts do not):
//!
//! ```sh
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/deps/convert_instructions-* <none|gzip|snappy|lz4> <v1|v0> <chunk KiB> <runs>
//! ```
//!
//! Run it with 1 and with N runs: (Ir(N) − Ir(1)) / (N − 1) is the instruction count of one lazy
//! conversion of the benches' 1 MiB slice, without the slice generation. Without arguments (as
//! `cargo bench` runs it) it converts every codec once to both targets and prints the bytes
//! written.

// Benchmark code: a failed unwrap, expect or index is the report. The workspace's lint wall is for
// library code; clippy.toml's test exemptions do not reach benchmarks.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use skiff_protocol::records::{Compression, Magic};

mod support;
use support::{lazy, with_cut_tail, SLICE_BYTES};

fn codec(name: &str) -> Option<Compression> {
    match name {
        "none" => Some(Compression::None),
        "gzip" => Some(Compression::Gzip),
        "snappy" => Some(Compression::Snappy),
        "lz4" => Some(Compression::Lz4),
        _ => None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let chosen = (|| {
        let codec = codec(args.first()?)?;
        let target = match args.get(1)?.as_str() {
            "v1" => Magic::V1,
            "v0" => Magic::V0,
            _ => return None,
        };
        let chunk_bytes = args.get(2)?.parse::<usize>().ok()? * 1024;
        let runs = args.get(3)?.parse::<usize>().ok()?;
        Some((codec, target, chunk_bytes, runs))
    })();
    match chosen {
        Some((codec, target, chunk_bytes, runs)) => {
            let slice = with_cut_tail(support::slice(SLICE_BYTES, codec));
            let written: u64 = (0..runs).map(|_| lazy(&slice, target, chunk_bytes)).sum();
            println!(
                "{codec:?} to {target:?}, chunk {chunk_bytes} B, {runs} runs: {written} bytes"
            );
        }
        None => {
            for codec in [
                Compression::None,
                Compression::Gzip,
                Compression::Snappy,
                Compression::Lz4,
            ] {
                let slice = with_cut_tail(support::slice(SLICE_BYTES / 16, codec));
                for target in [Magic::V1, Magic::V0] {
                    let written = lazy(&slice, target, 128 * 1024);
                    println!("{codec:?} to {target:?}: {written} bytes");
                }
            }
        }
    }
}
