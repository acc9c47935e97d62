//! The embedded store's on-disk encoding of [`Change`]s and [`Snapshot`]s: little-endian
//! integers and length-prefixed byte strings. The decoder trusts nothing it reads: every length
//! is checked against the bytes left and the store's limits before anything is allocated, and
//! every error is a [`DecodeError`] (the caller names the file).
//!
//! Hand-written rather than serde: values are arbitrary bytes (JSON would inflate them), the
//! format is tiny and frozen, and a bounded decoder is easier to audit than a generic one.

use crate::core::{Change, Snapshot, Write};
use crate::limits;
use crate::types::{KeyValue, Lease};

const TAG_REVISION: u8 = 1;
const TAG_LEASE_GRANT: u8 = 2;
const TAG_LEASE_REVOKE: u8 = 3;
const TAG_COMPACT: u8 = 4;
const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;

/// Smallest encoded write (tag + empty-length key), to bound counts by the bytes left.
const WRITE_BYTES_MIN: usize = 1 + 4;
/// Smallest encoded key-value in a snapshot.
const KV_BYTES_MIN: usize = 4 + 4 + 8 * 4;
/// Encoded lease in a snapshot.
const LEASE_BYTES: usize = 16;

/// Why encoded bytes are not a change or a snapshot; the caller reports it with the file's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A write of a revision starts with a tag no writer produces.
    #[error("unknown write tag {0}")]
    UnknownWriteTag(u8),
    /// A change starts with a tag no writer produces.
    #[error("unknown change tag {0}")]
    UnknownChangeTag(u8),
    /// A snapshot lists more leases than the store holds.
    #[error("{count} leases, at most {max}", max = limits::LEASES_MAX)]
    TooManyLeases {
        /// Leases listed.
        count: usize,
    },
    /// A snapshot lists more keys than the store holds.
    #[error("{count} keys, at most {max}", max = limits::KEYS_MAX)]
    TooManyKeys {
        /// Keys listed.
        count: usize,
    },
    /// The bytes end inside a fixed-size field.
    #[error("truncated: {needed} bytes needed, {left} left")]
    Truncated {
        /// Bytes the field takes.
        needed: usize,
        /// Bytes left.
        left: usize,
    },
    /// A count of items whose smallest encoding does not fit in the bytes left.
    #[error("count {count} does not fit in {left} bytes")]
    CountTooLarge {
        /// The count read.
        count: usize,
        /// Bytes left.
        left: usize,
    },
    /// A byte string longer than its limit or than the bytes left.
    #[error("length {length} over {max} or {left} bytes left")]
    LengthTooLarge {
        /// The length read.
        length: usize,
        /// The limit of this field, in bytes.
        max: usize,
        /// Bytes left.
        left: usize,
    },
    /// Bytes after the last field.
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
}

pub(crate) fn encode_change(change: &Change, out: &mut Vec<u8>) {
    match change {
        Change::Revision { revision, writes } => {
            out.push(TAG_REVISION);
            put_i64(out, *revision);
            put_u32(out, writes.len());
            for write in writes {
                match write {
                    Write::Put { key, value, lease } => {
                        out.push(TAG_PUT);
                        put_bytes(out, key);
                        put_bytes(out, value);
                        put_i64(out, *lease);
                    }
                    Write::Delete { key } => {
                        out.push(TAG_DELETE);
                        put_bytes(out, key);
                    }
                }
            }
        }
        Change::LeaseGrant(lease) => {
            out.push(TAG_LEASE_GRANT);
            put_i64(out, lease.id);
            put_i64(out, lease.ttl_secs);
        }
        Change::LeaseRevoke(id) => {
            out.push(TAG_LEASE_REVOKE);
            put_i64(out, *id);
        }
        Change::Compact(revision) => {
            out.push(TAG_COMPACT);
            put_i64(out, *revision);
        }
    }
}

pub(crate) fn decode_change(bytes: &[u8]) -> Result<Change, DecodeError> {
    let mut input = Decoder { bytes };
    let change = match input.u8()? {
        TAG_REVISION => {
            let revision = input.i64()?;
            let count = input.count(WRITE_BYTES_MIN)?;
            let mut writes = Vec::new();
            for _ in 0..count {
                writes.push(match input.u8()? {
                    TAG_PUT => Write::Put {
                        key: input.bytes(limits::KEY_BYTES_MAX)?,
                        value: input.bytes(limits::VALUE_BYTES_MAX)?,
                        lease: input.i64()?,
                    },
                    TAG_DELETE => Write::Delete {
                        key: input.bytes(limits::KEY_BYTES_MAX)?,
                    },
                    tag => return Err(DecodeError::UnknownWriteTag(tag)),
                });
            }
            Change::Revision { revision, writes }
        }
        TAG_LEASE_GRANT => Change::LeaseGrant(Lease {
            id: input.i64()?,
            ttl_secs: input.i64()?,
        }),
        TAG_LEASE_REVOKE => Change::LeaseRevoke(input.i64()?),
        TAG_COMPACT => Change::Compact(input.i64()?),
        tag => return Err(DecodeError::UnknownChangeTag(tag)),
    };
    input.finish()?;
    Ok(change)
}

pub fn encode_snapshot(snapshot: &Snapshot, out: &mut Vec<u8>) {
    put_i64(out, snapshot.revision);
    put_i64(out, snapshot.next_lease_id);
    put_u32(out, snapshot.leases.len());
    for lease in &snapshot.leases {
        put_i64(out, lease.id);
        put_i64(out, lease.ttl_secs);
    }
    put_u32(out, snapshot.kvs.len());
    for kv in &snapshot.kvs {
        put_bytes(out, &kv.key);
        put_bytes(out, &kv.value);
        put_i64(out, kv.create_revision);
        put_i64(out, kv.mod_revision);
        put_i64(out, kv.version);
        put_i64(out, kv.lease);
    }
}

pub fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
    let mut input = Decoder { bytes };
    let revision = input.i64()?;
    let next_lease_id = input.i64()?;
    let lease_count = input.count(LEASE_BYTES)?;
    if lease_count > limits::LEASES_MAX {
        return Err(DecodeError::TooManyLeases { count: lease_count });
    }
    let mut leases = Vec::new();
    for _ in 0..lease_count {
        leases.push(Lease {
            id: input.i64()?,
            ttl_secs: input.i64()?,
        });
    }
    let kv_count = input.count(KV_BYTES_MIN)?;
    if kv_count > limits::KEYS_MAX {
        return Err(DecodeError::TooManyKeys { count: kv_count });
    }
    let mut kvs = Vec::new();
    for _ in 0..kv_count {
        kvs.push(KeyValue {
            key: input.bytes(limits::KEY_BYTES_MAX)?,
            value: input.bytes(limits::VALUE_BYTES_MAX)?,
            create_revision: input.i64()?,
            mod_revision: input.i64()?,
            version: input.i64()?,
            lease: input.i64()?,
        });
    }
    input.finish()?;
    Ok(Snapshot {
        revision,
        next_lease_id,
        leases,
        kvs,
    })
}

fn put_i64(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, value: usize) {
    // INVARIANT: every count and length is bounded by a limit of `limits` far below 4 GiB,
    // checked before a change is applied (and so before it is encoded).
    #[allow(clippy::expect_used)]
    let value = u32::try_from(value).expect("counts and lengths are bounded far below 4 GiB");
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len());
    out.extend_from_slice(bytes);
}

struct Decoder<'a> {
    bytes: &'a [u8],
}

impl Decoder<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, rest) = self
            .bytes
            .split_first_chunk::<N>()
            .ok_or(DecodeError::Truncated {
                needed: N,
                left: self.bytes.len(),
            })?;
        self.bytes = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.take()?))
    }

    fn u32(&mut self) -> Result<usize, DecodeError> {
        Ok(u32::from_le_bytes(self.take()?) as usize)
    }

    /// A count of items of at least `item_bytes_min` each, which the bytes left must hold.
    fn count(&mut self, item_bytes_min: usize) -> Result<usize, DecodeError> {
        let count = self.u32()?;
        if count.saturating_mul(item_bytes_min) > self.bytes.len() {
            return Err(DecodeError::CountTooLarge {
                count,
                left: self.bytes.len(),
            });
        }
        Ok(count)
    }

    fn bytes(&mut self, max: usize) -> Result<Vec<u8>, DecodeError> {
        let length = self.u32()?;
        if length > max || length > self.bytes.len() {
            return Err(DecodeError::LengthTooLarge {
                length,
                max,
                left: self.bytes.len(),
            });
        }
        let (head, rest) = self.bytes.split_at(length);
        self.bytes = rest;
        Ok(head.to_vec())
    }

    fn finish(&self) -> Result<(), DecodeError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes(self.bytes.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..12)
    }

    fn change() -> impl Strategy<Value = Change> {
        let write = prop_oneof![
            (bytes(), bytes(), any::<i64>()).prop_map(|(key, value, lease)| Write::Put {
                key,
                value,
                lease
            }),
            bytes().prop_map(|key| Write::Delete { key }),
        ];
        prop_oneof![
            (any::<i64>(), proptest::collection::vec(write, 0..5))
                .prop_map(|(revision, writes)| Change::Revision { revision, writes }),
            (any::<i64>(), any::<i64>())
                .prop_map(|(id, ttl_secs)| Change::LeaseGrant(Lease { id, ttl_secs })),
            any::<i64>().prop_map(Change::LeaseRevoke),
            any::<i64>().prop_map(Change::Compact),
        ]
    }

    proptest! {
        #[test]
        fn changes_round_trip(change in change()) {
            let mut encoded = Vec::new();
            encode_change(&change, &mut encoded);
            prop_assert_eq!(decode_change(&encoded).unwrap(), change);
        }

        #[test]
        fn any_bytes_decode_to_an_answer_never_a_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_change(&data);
            let _ = decode_snapshot(&data);
        }

        #[test]
        fn every_truncation_of_a_change_is_an_error(change in change()) {
            let mut encoded = Vec::new();
            encode_change(&change, &mut encoded);
            for cut in 0..encoded.len() {
                prop_assert!(decode_change(&encoded[..cut]).is_err());
            }
        }
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        let mut encoded = vec![TAG_REVISION];
        encoded.extend_from_slice(&5i64.to_le_bytes());
        encoded.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_change(&encoded)
            .unwrap_err()
            .to_string()
            .contains("does not fit"));
        let mut snapshot = Vec::new();
        snapshot.extend_from_slice(&[0; 16]);
        snapshot.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_snapshot(&snapshot).is_err());
    }

    #[test]
    fn snapshots_round_trip() {
        let snapshot = Snapshot {
            revision: 9,
            next_lease_id: 3,
            leases: vec![Lease {
                id: 2,
                ttl_secs: 10,
            }],
            kvs: vec![KeyValue {
                key: b"a".to_vec(),
                value: b"v".to_vec(),
                create_revision: 2,
                mod_revision: 9,
                version: 4,
                lease: 2,
            }],
        };
        let mut encoded = Vec::new();
        encode_snapshot(&snapshot, &mut encoded);
        assert_eq!(decode_snapshot(&encoded).unwrap(), snapshot);
    }
}
