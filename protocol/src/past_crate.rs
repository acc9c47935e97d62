//! Encoding a flexible message one version past kafka-protocol 0.15.1 whose new fields all come
//! after the crate's last field (the DescribeCluster v2 and ListTransactions v2 requests): the crate encodes the
//! older version with no tagged fields, that encoding's empty tagged-field section (one zero
//! byte) is dropped, the new fields are appended, then the tagged-field section is written.
//! Kafka 4.1.1's schemas put the new fields of these versions last, so the bytes are Kafka's
//! (checked against its own classes in `txn_fixtures` and `responses::describe_cluster`). The
//! tagged-field, compact-string and compact-array writers are shared with the messages written
//! field by field (EndTxn v5, DescribeCluster v2, the ConsumerGroupHeartbeat request and both
//! KIP-848 responses, whose later versions add fields between older ones).
//!
//! Must never: be used for a message whose new fields sit between older ones, or for a
//! non-flexible version (there is no tagged-field section to move).

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

use crate::codec::{put_unsigned_varint, unsigned_varint_len};

/// The empty tagged-field section a flexible encoding ends with: a zero count.
const EMPTY_TAGGED_SECTION: u8 = 0;

/// `older` (its unknown tagged fields already cleared) encoded by the crate at `crate_version`,
/// then `appended`, then `tags` as the tagged-field section, into `buf`.
pub(crate) fn encode_extended<M: Encodable, B: ByteBufMut>(
    older: &M,
    crate_version: i16,
    appended: &[u8],
    tags: &BTreeMap<i32, Bytes>,
    buf: &mut B,
) -> anyhow::Result<()> {
    let mut body = Vec::with_capacity(older.compute_size(crate_version)? + appended.len());
    older.encode(&mut body, crate_version)?;
    anyhow::ensure!(
        body.pop() == Some(EMPTY_TAGGED_SECTION),
        "the older version's encoding does not end with an empty tagged-field section"
    );
    body.extend_from_slice(appended);
    put_tagged_fields(&mut body, tags)?;
    buf.put_slice(&body);
    Ok(())
}

/// The size [`encode_extended`] writes.
pub(crate) fn extended_size<M: Encodable>(
    older: &M,
    crate_version: i16,
    appended_bytes: usize,
    tags: &BTreeMap<i32, Bytes>,
) -> anyhow::Result<usize> {
    let older_bytes = older.compute_size(crate_version)?;
    Ok(older_bytes - 1 + appended_bytes + tagged_fields_size(tags)?)
}

/// Appends a tagged-field section: the count, then each tag, length and data in ascending tag
/// order (as Kafka writes and requires; a `BTreeMap` iterates in order).
pub(crate) fn put_tagged_fields(
    out: &mut Vec<u8>,
    tags: &BTreeMap<i32, Bytes>,
) -> anyhow::Result<()> {
    put_unsigned_varint(out, varint_u32(tags.len())?);
    for (tag, data) in tags {
        put_unsigned_varint(out, varint_u32(*tag)?);
        put_unsigned_varint(out, varint_u32(data.len())?);
        out.extend_from_slice(data);
    }
    Ok(())
}

/// The bytes [`put_tagged_fields`] writes.
pub(crate) fn tagged_fields_size(tags: &BTreeMap<i32, Bytes>) -> anyhow::Result<usize> {
    let mut size = unsigned_varint_len(varint_u32(tags.len())?);
    for (tag, data) in tags {
        size += unsigned_varint_len(varint_u32(*tag)?)
            + unsigned_varint_len(varint_u32(data.len())?)
            + data.len();
    }
    Ok(size)
}

/// Appends a compact nullable string: its length plus one as an unsigned varint (0 for null),
/// then its bytes.
pub(crate) fn put_compact_nullable_string(
    out: &mut Vec<u8>,
    value: Option<&str>,
) -> anyhow::Result<()> {
    match value {
        None => put_unsigned_varint(out, 0),
        Some(text) => {
            put_unsigned_varint(out, varint_u32(text.len() + 1)?);
            out.extend_from_slice(text.as_bytes());
        }
    }
    Ok(())
}

/// Appends a compact (non-null) string.
pub(crate) fn put_compact_string(out: &mut Vec<u8>, value: &str) -> anyhow::Result<()> {
    put_compact_nullable_string(out, Some(value))
}

/// Appends a compact array's count: the number of elements plus one (0 for null), as an unsigned
/// varint.
pub(crate) fn put_compact_array_len(out: &mut Vec<u8>, len: Option<usize>) -> anyhow::Result<()> {
    let encoded = match len {
        None => 0,
        Some(len) => varint_u32(len.saturating_add(1))?,
    };
    put_unsigned_varint(out, encoded);
    Ok(())
}

/// A count, tag or length as the unsigned varint Kafka writes.
fn varint_u32<T: TryInto<u32>>(value: T) -> anyhow::Result<u32> {
    value
        .try_into()
        .map_err(|_| anyhow::anyhow!("value out of the unsigned varint range"))
}
