//! `skiff-bench latency`: produce-ack and end-to-end latency percentiles of any Kafka-compatible
//! broker at fixed fractions (10, 50, 90 %) of its measured maximum produce rate, 1 kB messages,
//! acks=1 or acks=all, with a long-polling consumer on its own thread.
//!
//! Every latency is measured from the message's *intended* send time on a fixed schedule
//! ([`schedule`]), never from when it was actually sent, so a stalled producer or broker cannot
//! hide its stall (no coordinated omission). The intended time travels in the record value
//! ([`stamp`]), which is how the consumer measures end to end.
//!
//! Owns: the schedule, the histograms, the timed producer/consumer threads ([`run`]), the sweep over
//! acks settings and rates, the broker's own service time per API read from the broker
//! ([`service_time`]), and its JSON/markdown/SVG report ([`report`]).
//! Must never: talk to anything but 127.0.0.1, run without a deadline, decode a response with
//! kafka-protocol (see [`crate::responses`]), or keep more than the configured requests in flight.

pub mod histogram;
pub mod report;
pub mod run;
pub mod schedule;
pub mod service_time;
pub mod sweep;

/// Bytes of every message value (the 1 kB messages).
pub const MESSAGE_VALUE_BYTES: usize = 1024;

/// Marks a value written by this benchmark (and its layout version).
const STAMP_MARKER: [u8; 8] = *b"skflat01";

/// Bytes of the stamp at the start of a value: marker, sequence number, intended send time.
const STAMP_BYTES: usize = 8 + 8 + 8;

/// Byte that fills the rest of a value.
const FILL_BYTE: u8 = b'x';

/// What a message value carries besides its filler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Position in the phase (the offset it must get in a fresh topic).
    pub sequence: u64,
    /// Intended send time, nanoseconds since the phase started.
    pub intended_nanos: u64,
}

/// Writes `stamp` at the start of a [`MESSAGE_VALUE_BYTES`] value into `value` (which it resizes).
pub fn write_value(stamp: Stamp, value: &mut Vec<u8>) {
    value.clear();
    value.extend_from_slice(&STAMP_MARKER);
    value.extend_from_slice(&stamp.sequence.to_be_bytes());
    value.extend_from_slice(&stamp.intended_nanos.to_be_bytes());
    value.resize(MESSAGE_VALUE_BYTES, FILL_BYTE);
}

/// Reads the stamp of a value this benchmark wrote; `None` for any other value.
pub fn read_value(value: &[u8]) -> Option<Stamp> {
    let stamp = value.get(..STAMP_BYTES)?;
    let (marker, rest) = stamp.split_at(8);
    if marker != STAMP_MARKER {
        return None;
    }
    let (sequence, intended) = rest.split_at(8);
    Some(Stamp {
        sequence: u64::from_be_bytes(sequence.try_into().ok()?),
        intended_nanos: u64::from_be_bytes(intended.try_into().ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_round_trips_and_foreign_values_have_none() {
        let stamp = Stamp {
            sequence: 7,
            intended_nanos: 123_456_789,
        };
        let mut value = Vec::new();
        write_value(stamp, &mut value);
        assert_eq!(value.len(), MESSAGE_VALUE_BYTES);
        assert_eq!(read_value(&value), Some(stamp));
        assert_eq!(read_value(b"short"), None);
        assert_eq!(read_value(&[b'x'; 64]), None);
    }
}
