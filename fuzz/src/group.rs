//! Fuzz bodies for the group coordinator's decoders (skiff-group): the offsets log, read back
//! from disk at every leadership change.
//!
//! `offsets_log`: the input is read as a slice of the offsets log (v2 batches) and as a bare key
//! and value. Decoded batches consume no more than the input; every decoded entry re-encodes into
//! a batch that decodes to the same entry; a decoded key or value re-encodes to exactly its bytes.

use skiff_group::offsets_log::{
    decode_batches, decode_key, decode_value, encode_batches, encode_key, encode_value,
};
use skiff_group::OffsetLogEntry;

/// Targets of this module.
pub const TARGETS: &[crate::Target] = &[("offsets_log", offsets_log)];

pub fn offsets_log(data: &[u8]) {
    let mut entries: Vec<OffsetLogEntry> = Vec::new();
    if let Ok(consumed) = decode_batches(data, &mut |entry| entries.push(entry)) {
        assert!(consumed <= data.len());
        if consumed == 0 {
            assert!(entries.is_empty());
        }
    }
    // Whatever was decoded (even before an error) re-encodes and decodes to itself.
    if !entries.is_empty() {
        let batches = encode_batches(&entries, 1).expect("decoded entries re-encode");
        let mut again = Vec::new();
        for batch in &batches {
            let consumed = decode_batches(batch, &mut |entry| again.push(entry))
                .expect("an encoded batch decodes");
            assert_eq!(consumed, batch.len());
        }
        assert_eq!(again, entries);
    }
    // The input also as one key and one value, split where its first byte says.
    let split = usize::from(data.first().copied().unwrap_or(0)).min(data.len());
    let (key_bytes, value_bytes) = data.split_at(split);
    if let Ok(key) = decode_key(key_bytes) {
        assert_eq!(encode_key(&key).expect("key re-encodes"), key_bytes);
    }
    if let Ok(value) = decode_value(value_bytes) {
        assert_eq!(encode_value(&value).expect("value re-encodes"), value_bytes);
    }
}
