//! Fuzz bodies for responses a broker reads from a peer broker.
//!
//! `fetch_response`: [`decode_fetch_response`] (a follower reading its leader's Fetch answer)
//! never panics or over-allocates for any version it takes; whatever it accepts, encoded again by
//! the one layout writer ([`encode_fetch_response`], holes filled with the record sets read), reads
//! back to the same response, and every record set lies inside the input.

use skiff_protocol::responses::fetch::{encode_fetch_response, FetchPart};
use skiff_protocol::responses::fetch_reader::{decode_fetch_response, FETCH_READER_VERSION_MIN};

/// Targets of this module.
pub const TARGETS: &[crate::Target] = &[("fetch_response", fetch_response)];

/// The first byte picks the version (4–13); the rest is the frame after its size prefix.
pub fn fetch_response(data: &[u8]) {
    let Some((&selector, frame)) = data.split_first() else {
        return;
    };
    let version = FETCH_READER_VERSION_MIN + i16::from(selector % 10);
    let Ok(view) = decode_fetch_response(frame, version) else {
        return;
    };
    let input = frame.as_ptr_range();
    for topic in &view.topics {
        for partition in &topic.partitions {
            let records = partition.records.as_ptr_range();
            assert!(
                partition.records.is_empty()
                    || (input.start <= records.start && records.end <= input.end),
                "a record set is a slice of the input"
            );
            assert_eq!(partition.records.len(), partition.fields.records_bytes);
        }
    }
    let shape = view.shape();
    let parts =
        encode_fetch_response(version, view.correlation_id, &shape).expect("a read shape encodes");
    let mut wire = Vec::new();
    for part in &parts {
        match part {
            FetchPart::Bytes(bytes) => wire.extend_from_slice(bytes),
            FetchPart::Records {
                topic_index,
                partition_index,
                len,
            } => {
                let records = view.topics[*topic_index].partitions[*partition_index].records;
                assert_eq!(records.len(), *len);
                wire.extend_from_slice(records);
            }
        }
    }
    let again = decode_fetch_response(&wire[4..], version).expect("re-encoded response reads");
    assert_eq!(again, view);
}
