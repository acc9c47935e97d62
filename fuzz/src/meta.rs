//! Fuzz bodies for the metadata store's on-disk decoders (skiff-meta).
//!
//! `meta_journal`: the input is read as a journal file. The scan either reports damage at an
//! offset inside the input, or returns records whose re-encoding reproduces exactly the valid
//! prefix it claims (so nothing is invented or silently altered); the input is also read as a
//! snapshot body, and a snapshot that decodes re-encodes to the same bytes.

use skiff_meta::fuzzing::{
    decode_snapshot, encode_record, encode_snapshot, scan_journal, JOURNAL_MAGIC,
};

/// Targets of this module.
pub const TARGETS: &[crate::Target] = &[("meta_journal", meta_journal)];

pub fn meta_journal(data: &[u8]) {
    match scan_journal(data) {
        Ok(scan) => {
            assert!(
                scan.valid_bytes <= data.len(),
                "valid prefix inside the input"
            );
            if scan.valid_bytes == 0 {
                assert!(scan.records.is_empty());
            } else {
                let mut rebuilt = JOURNAL_MAGIC.to_vec();
                for (index, change) in &scan.records {
                    encode_record(*index, change, &mut rebuilt);
                }
                assert_eq!(
                    rebuilt,
                    &data[..scan.valid_bytes],
                    "records re-encode to the prefix"
                );
            }
        }
        Err((offset, _reason)) => assert!(offset as usize <= data.len()),
    }
    if let Ok(snapshot) = decode_snapshot(data) {
        let mut rebuilt = Vec::new();
        encode_snapshot(&snapshot, &mut rebuilt);
        assert_eq!(rebuilt, data, "a decoded snapshot re-encodes to its bytes");
    }
}
