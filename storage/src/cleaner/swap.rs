//! The swap manifest of a cleaning (`cleaner-swap` in a log's directory): which group of old
//! segments the cleaned segment replaces, and how to recognise the new file. Owns its text, both
//! ways; its presence is the commit point of one group's swap (see the module doc of
//! `cleaner`). Must never accept text it would not write.

/// Name of the manifest in the log's directory.
pub(crate) const SWAP_MANIFEST_FILE: &str = "cleaner-swap";
/// First line: name and format version.
const HEADER: &str = "skiff-cleaner-swap 1";

/// One group's swap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SwapManifest {
    /// Base offsets of the old segments the group replaces, in order; the first names the new
    /// segment.
    pub(crate) old_bases: Vec<i64>,
    /// Length of the new `.log`.
    pub(crate) log_bytes: u64,
    /// CRC32C of the new `.log`'s bytes.
    pub(crate) crc: u32,
    /// The group's end: the next segment's base offset (every offset below it is in fsynced
    /// files once the swap is done).
    pub(crate) end_offset: i64,
    /// Entries of the new segment's aborted-transaction index (`<base>.txnindex.cleaned` until
    /// the swap; none: the group's first `.txnindex` is removed). A manifest of a Skiff before
    /// transactions has no such line: none.
    pub(crate) txn_entries: u64,
}

impl SwapManifest {
    /// Base offset of the new segment.
    pub(crate) fn base_offset(&self) -> Option<i64> {
        self.old_bases.first().copied()
    }

    pub(crate) fn to_text(&self) -> String {
        let bases: Vec<String> = self.old_bases.iter().map(i64::to_string).collect();
        let mut text = format!(
            "{HEADER}\nold {}\nbytes {}\ncrc {}\nend {}\n",
            bases.join(" "),
            self.log_bytes,
            self.crc,
            self.end_offset
        );
        if self.txn_entries > 0 {
            text.push_str(&format!("txn {}\n", self.txn_entries));
        }
        text
    }

    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, &'static str> {
        let text = std::str::from_utf8(bytes).map_err(|_| "swap manifest is not UTF-8")?;
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err("swap manifest header missing");
        }
        let mut field = |name: &str| -> Result<&str, &'static str> {
            let line = lines.next().ok_or("swap manifest truncated")?;
            line.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(' '))
                .ok_or("swap manifest field out of order")
        };
        let old_bases = field("old")?
            .split(' ')
            .map(|base| base.parse::<i64>().map_err(|_| "bad base offset"))
            .collect::<Result<Vec<_>, _>>()?;
        let log_bytes = field("bytes")?.parse().map_err(|_| "bad length")?;
        let crc = field("crc")?.parse().map_err(|_| "bad crc")?;
        let end_offset = field("end")?.parse().map_err(|_| "bad end offset")?;
        let txn_entries = match lines.next() {
            None => 0,
            Some(line) => line
                .strip_prefix("txn ")
                .and_then(|count| count.parse::<u64>().ok())
                .filter(|count| *count > 0)
                .ok_or("swap manifest has trailing lines")?,
        };
        if lines.next().is_some() {
            return Err("swap manifest has trailing lines");
        }
        let manifest = Self {
            old_bases,
            log_bytes,
            crc,
            end_offset,
            txn_entries,
        };
        let ordered = manifest
            .old_bases
            .windows(2)
            .all(|pair| matches!(pair, [a, b] if a < b));
        if manifest.old_bases.is_empty()
            || !ordered
            || manifest
                .old_bases
                .iter()
                .any(|base| *base < 0 || *base >= end_offset)
        {
            return Err("swap manifest offsets out of order");
        }
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let manifest = SwapManifest {
            old_bases: vec![0, 100, 250],
            log_bytes: 4096,
            crc: 0xdead_beef,
            end_offset: 300,
            txn_entries: 0,
        };
        assert_eq!(
            SwapManifest::parse(manifest.to_text().as_bytes()),
            Ok(manifest.clone())
        );
        assert_eq!(manifest.base_offset(), Some(0));
        let with_txn = SwapManifest {
            txn_entries: 3,
            ..manifest.clone()
        };
        assert!(with_txn.to_text().ends_with("end 300\ntxn 3\n"));
        assert_eq!(
            SwapManifest::parse(with_txn.to_text().as_bytes()),
            Ok(with_txn)
        );
        let text = manifest.to_text();
        for bad in [
            &text[..text.len() - 5],
            "",
            "skiff-cleaner-swap 1\nold 5 3\nbytes 1\ncrc 1\nend 9\n",
            "skiff-cleaner-swap 1\nold 5\nbytes 1\ncrc 1\nend 5\n",
            "skiff-cleaner-swap 1\nold \nbytes 1\ncrc 1\nend 5\n",
            "skiff-cleaner-swap 1\nold 1\nbytes 1\ncrc 1\nend 5\ntxn 0\n",
            "skiff-cleaner-swap 1\nold 1\nbytes 1\ncrc 1\nend 5\ntxn 2\nx\n",
        ] {
            assert!(SwapManifest::parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }
}
