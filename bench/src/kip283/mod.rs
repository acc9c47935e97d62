//! KIP-283's memory and throughput tests, run against any Kafka-compatible broker by address (or a
//! `skiff` this module spawns itself with a fresh data directory), and the report that shows them.
//!
//! Owns: the data layout both tests produce and verify ([`record_key`], [`value_byte`]), broker
//! spawning, RSS sampling, the raw loopback baseline, and the markdown/SVG report.
//! Must never: talk to anything but 127.0.0.1, run without a time cap, or hold unbounded data (every
//! size here is a named constant or a command-line option with a default).

pub mod baseline;
pub mod broker;
pub mod consume;
pub mod machine;
pub mod memory;
pub mod produce;
pub mod report;
pub mod rss;
pub mod stats;
pub mod throughput;

/// KIP-283's message size: 1 kB values.
pub const RECORD_VALUE_BYTES: usize = 1024;

/// KIP-283's consumer `max.partition.fetch.bytes`.
pub const PARTITION_MAX_BYTES: i32 = 1024 * 1024;

/// KIP-283's consumer `fetch.max.bytes` (250 MB).
pub const FETCH_MAX_BYTES: i32 = 250 * 1000 * 1000;

/// The key of the record at `offset` of any partition: lets a reader check that every converted
/// message sits at the offset it claims.
pub fn record_key(offset: i64) -> String {
    format!("k{offset}")
}

/// Every byte of the value at `offset` (a letter that changes with the offset, so a response that
/// repeats or shifts records fails verification).
pub fn value_byte(offset: i64) -> u8 {
    b'a' + u8::try_from(offset.rem_euclid(26)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_offsets_have_different_values_and_keys() {
        for offset in 0..100 {
            assert_ne!(value_byte(offset), value_byte(offset + 1));
            assert_ne!(record_key(offset), record_key(offset + 1));
        }
        assert_eq!(record_key(42), "k42");
    }
}
