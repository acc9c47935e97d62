//! The high-watermark checkpoint of a data directory, `replication-offset-checkpoint`, in Kafka's
//! format (its `OffsetCheckpointFile`): a version line `0`, a count line, then one
//! `topic partition offset` line per partition. Owns the file's text, both ways, and its bounds;
//! [`crate::LogDir`] decides where it lives and writes it through its [`crate::DurableFiles`].
//! Must never accept a line it would not write itself (every number and name is checked), nor
//! read more than [`limits::HIGH_WATERMARK_CHECKPOINT_BYTES_MAX`] bytes or hold more than
//! [`limits::HIGH_WATERMARK_ENTRIES_MAX`] entries, nor panic on any bytes.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::fs;
use crate::limits;

/// Name of the checkpoint file in the data directory (Kafka's).
pub(crate) const HIGH_WATERMARK_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";
/// Version line of the format (Kafka's).
const VERSION: &str = "0";

/// One partition's checkpointed high watermark.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HighWatermark {
    /// The topic.
    pub topic: String,
    /// The partition (≥ 0).
    pub partition: i32,
    /// The high watermark: every offset below it was replicated to the whole ISR (≥ 0).
    pub offset: i64,
}

/// The checkpoint text of `entries`, in their order. Refuses (writing nothing) a name that
/// cannot name a log ([`Error::InvalidName`]; this also keeps spaces and newlines out of the
/// text), a negative offset ([`Error::NegativeOffset`]), a partition listed twice
/// ([`Error::InvalidName`]), and more than [`limits::HIGH_WATERMARK_ENTRIES_MAX`] entries
/// ([`Error::LimitReached`]): the reader would refuse each of them.
pub(crate) fn to_text(entries: &[HighWatermark]) -> Result<String> {
    if entries.len() > limits::HIGH_WATERMARK_ENTRIES_MAX {
        return Err(Error::LimitReached(format!(
            "{} high watermarks to checkpoint, more than the {} a checkpoint holds",
            entries.len(),
            limits::HIGH_WATERMARK_ENTRIES_MAX
        )));
    }
    let mut seen = BTreeSet::new();
    let mut text = format!("{VERSION}\n{}\n", entries.len());
    for entry in entries {
        let name = fs::log_dir_name(&entry.topic, entry.partition)?;
        if entry.offset < 0 {
            return Err(Error::NegativeOffset(entry.offset));
        }
        if !seen.insert((entry.topic.as_str(), entry.partition)) {
            return Err(Error::InvalidName(format!(
                "{name} (its high watermark is listed twice)"
            )));
        }
        text.push_str(&format!(
            "{} {} {}\n",
            entry.topic, entry.partition, entry.offset
        ));
    }
    Ok(text)
}

/// A non-negative decimal number of ASCII digits only (no sign, no spaces: `str::parse` would
/// take a `+`), or why not.
fn number<T: std::str::FromStr>(field: &str) -> std::result::Result<T, &'static str> {
    if field.is_empty() || !field.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err("a number is not decimal digits");
    }
    field.parse().map_err(|_| "a number is out of range")
}

/// Parses checkpoint bytes: the entries in file order, or why they are not a checkpoint. Only
/// what [`to_text`] could write is accepted, but for leading zeros: every line ends in `\n`, the
/// count matches the entries, each entry names a valid topic and partition at most once with an
/// offset ≥ 0, fields are split by one space, and nothing follows the last entry.
pub(crate) fn parse(bytes: &[u8]) -> std::result::Result<Vec<HighWatermark>, &'static str> {
    if bytes.len() as u64 > limits::HIGH_WATERMARK_CHECKPOINT_BYTES_MAX {
        return Err("high-watermark checkpoint too large");
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8")?;
    // Lines end in `\n`, the last one too, as the writer ends them (no `\r`, no torn last line).
    let body = text.strip_suffix('\n').ok_or("the last line has no end")?;
    let mut lines = body.split('\n');
    if lines.next() != Some(VERSION) {
        return Err("unknown high-watermark checkpoint version");
    }
    let count: usize = lines.next().ok_or("no entry count").and_then(number)?;
    if count > limits::HIGH_WATERMARK_ENTRIES_MAX {
        return Err("more entries than a checkpoint holds");
    }
    let mut seen = BTreeSet::new();
    let mut entries = Vec::new();
    for line in lines {
        if entries.len() == count {
            return Err("lines after the counted entries");
        }
        let mut fields = line.split(' ');
        let (Some(topic), Some(partition), Some(offset), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err("an entry is not `topic partition offset`");
        };
        let partition: i32 = number(partition)?;
        let offset: i64 = number(offset)?;
        fs::log_dir_name(topic, partition).map_err(|_| "an invalid topic name")?;
        if !seen.insert((topic, partition)) {
            return Err("a partition is listed twice");
        }
        entries.push(HighWatermark {
            topic: topic.to_owned(),
            partition,
            offset,
        });
    }
    if entries.len() != count {
        return Err("fewer entries than counted");
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn entry(topic: &str, partition: i32, offset: i64) -> HighWatermark {
        HighWatermark {
            topic: topic.to_owned(),
            partition,
            offset,
        }
    }

    #[test]
    fn the_text_is_kafkas_and_round_trips() {
        let entries = [entry("orders", 0, 17), entry("my-topic.x_y", 12, 0)];
        let text = to_text(&entries).unwrap();
        assert_eq!(text, "0\n2\norders 0 17\nmy-topic.x_y 12 0\n");
        assert_eq!(parse(text.as_bytes()).unwrap(), entries);
        assert_eq!(to_text(&[]).unwrap(), "0\n0\n");
        assert_eq!(parse(b"0\n0\n").unwrap(), []);
    }

    #[test]
    fn the_writer_refuses_what_the_reader_would() {
        for (entries, what) in [
            (vec![entry("a b", 0, 1)], "space in the name"),
            (vec![entry("a\n1", 0, 1)], "newline in the name"),
            (vec![entry("", 0, 1)], "empty name"),
            (vec![entry("t", -1, 1)], "negative partition"),
            (vec![entry("t", 0, -1)], "negative offset"),
            (vec![entry("t", 0, 1), entry("t", 0, 2)], "listed twice"),
        ] {
            let refused = to_text(&entries);
            assert!(
                matches!(
                    refused,
                    Err(Error::InvalidName(_) | Error::NegativeOffset(_))
                ),
                "{what}: {refused:?}"
            );
        }
        let many: Vec<HighWatermark> = (0..=limits::HIGH_WATERMARK_ENTRIES_MAX)
            .map(|index| entry("t", i32::try_from(index).unwrap(), 0))
            .collect();
        assert!(matches!(to_text(&many), Err(Error::LimitReached(_))));
        assert!(to_text(&many[1..]).is_ok());
    }

    #[test]
    fn malformed_text_is_refused_with_a_reason() {
        for text in [
            "",
            "1\n0\n",
            "0\n",
            "0\nx\n",
            "0\n-0\n",
            "0\n+1\nt 0 1\n",
            "0\n1\n",
            "0\n1\nt 0\n",
            "0\n1\nt 0 1 2\n",
            "0\n1\nt  0 1\n",
            "0\n1\nt 0 +1\n",
            "0\n1\nt 0 -1\n",
            "0\n1\nt -1 1\n",
            "0\n1\nt 2147483648 1\n",
            "0\n1\nt 0 9223372036854775808\n",
            "0\n1\na/b 0 1\n",
            "0\n1\n.. 0 1\n",
            "0\n2\nt 0 1\nt 0 2\n",
            "0\n1\nt 0 1\nu 0 2\n",
            "0\n1\nt 0 1\n\n",
            "0\n2\nt 0 1\n",
            "0\n99999999999999999999\n",
            "0\r\n0\r\n",
            "0\n1\nt 0 1",
            "0\n1\nt 0 1\r\n",
        ] {
            assert!(parse(text.as_bytes()).is_err(), "{text:?}");
        }
        let too_many = format!("0\n{}\n", limits::HIGH_WATERMARK_ENTRIES_MAX + 1);
        assert_eq!(
            parse(too_many.as_bytes()),
            Err("more entries than a checkpoint holds")
        );
        assert!(parse(&[0xff, 0xfe]).is_err());
        let oversized =
            vec![b'0'; usize::try_from(limits::HIGH_WATERMARK_CHECKPOINT_BYTES_MAX).unwrap() + 1];
        assert_eq!(
            parse(&oversized),
            Err("high-watermark checkpoint too large")
        );
    }

    fn topic() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._-]{1,40}".prop_filter("a valid topic name", |name| {
            fs::log_dir_name(name, 0).is_ok()
        })
    }

    proptest! {
        /// Whatever the writer accepts reads back equal.
        #[test]
        fn write_then_read_round_trips(
            raw in proptest::collection::vec((topic(), 0i32..=i32::MAX, 0i64..=i64::MAX), 0..40),
        ) {
            let mut seen = BTreeSet::new();
            let entries: Vec<HighWatermark> = raw
                .into_iter()
                .filter(|(topic, partition, _)| seen.insert((topic.clone(), *partition)))
                .map(|(topic, partition, offset)| HighWatermark { topic, partition, offset })
                .collect();
            let text = to_text(&entries).unwrap();
            prop_assert_eq!(parse(text.as_bytes()).unwrap(), entries);
        }

        /// Arbitrary bytes never panic, and what parses is written back no longer than it was
        /// (the writer's text is the shortest form: no leading zeros, `\n` line ends) and reads
        /// back equal.
        #[test]
        fn arbitrary_bytes_parse_or_are_refused(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            if let Ok(entries) = parse(&bytes) {
                let text = to_text(&entries).unwrap();
                prop_assert!(text.len() <= bytes.len());
                prop_assert_eq!(parse(text.as_bytes()).unwrap(), entries);
            }
        }

        /// Damage to a valid text (one byte changed, or the text cut) parses to a valid
        /// checkpoint or is refused, never panics.
        #[test]
        fn damaged_text_parses_or_is_refused(
            offsets in proptest::collection::vec(0i64..1_000_000, 1..8),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in any::<bool>(),
        ) {
            let entries: Vec<HighWatermark> = offsets
                .iter()
                .enumerate()
                .map(|(index, offset)| entry("t", i32::try_from(index).unwrap(), *offset))
                .collect();
            let mut bytes = to_text(&entries).unwrap().into_bytes();
            let at = at.index(bytes.len());
            if cut {
                bytes.truncate(at);
            } else {
                bytes[at] = byte;
            }
            if let Ok(parsed) = parse(&bytes) {
                prop_assert!(parsed.iter().all(|entry| entry.offset >= 0 && entry.partition >= 0));
            }
        }
    }
}
