//! Where request decoders get their field values from. [`Source`] is the set of primitive reads a
//! Kafka message schema is made of; [`BytesSource`] implements it over an untrusted frame body with
//! every count and length bounded (zero-copy for strings and byte fields), and the test-only
//! sample source implements it with generated values, so that one decoder per API both parses the
//! wire and produces version-correct sample messages for the round-trip tests.
//!
//! Must never: allocate by a count before [`crate::codec::check_count`] has compared it with the
//! bytes remaining and a named maximum, or copy a byte field out of the frame.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::codec::{capacity_for, Reader};
use crate::error::DecodeError;
use crate::limits::{ELEMENTS_PER_REQUEST_MAX, STRING_BYTES_MAX, TAGGED_FIELDS_MAX};

/// Unknown tagged fields as kafka-protocol's structs keep them.
pub type TaggedFields = BTreeMap<i32, Bytes>;

/// The primitive reads of Kafka's message schemas. `compact` selects the flexible encoding
/// (varint lengths) for strings, bytes and arrays.
pub trait Source {
    /// Reads an int8.
    fn i8(&mut self) -> Result<i8, DecodeError>;
    /// Reads an int16.
    fn i16(&mut self) -> Result<i16, DecodeError>;
    /// Reads an int32.
    fn i32(&mut self) -> Result<i32, DecodeError>;
    /// Reads an int64.
    fn i64(&mut self) -> Result<i64, DecodeError>;
    /// Reads a boolean.
    fn bool(&mut self) -> Result<bool, DecodeError>;
    /// Reads a UUID.
    fn uuid(&mut self) -> Result<Uuid, DecodeError>;
    /// Reads a nullable string.
    fn nullable_string(&mut self, compact: bool) -> Result<Option<StrBytes>, DecodeError>;
    /// Reads nullable bytes (zero-copy where the source is a frame).
    fn nullable_bytes(&mut self, compact: bool) -> Result<Option<Bytes>, DecodeError>;
    /// Reads an array count (`None` = null), checked against the remaining bytes (each element
    /// takes at least `element_bytes_min`) and `count_max`.
    fn array_len(
        &mut self,
        compact: bool,
        element_bytes_min: usize,
        count_max: usize,
    ) -> Result<Option<usize>, DecodeError>;
    /// Reads a tagged-field section as (tag, bytes) pairs in the order sent (any order, repeats
    /// allowed, as Kafka reads them).
    fn tagged_fields(&mut self) -> Result<Vec<(u32, Bytes)>, DecodeError>;

    /// Reads a string that must not be null.
    fn string(&mut self, compact: bool) -> Result<StrBytes, DecodeError> {
        self.nullable_string(compact)?
            .ok_or(DecodeError::UnexpectedNull)
    }

    /// Reads bytes that must not be null.
    fn bytes(&mut self, compact: bool) -> Result<Bytes, DecodeError> {
        self.nullable_bytes(compact)?
            .ok_or(DecodeError::UnexpectedNull)
    }

    /// Reads the count of an array that must not be null, checked like [`Source::array_len`].
    fn non_null_array_len(
        &mut self,
        compact: bool,
        element_bytes_min: usize,
        count_max: usize,
    ) -> Result<usize, DecodeError> {
        self.array_len(compact, element_bytes_min, count_max)?
            .ok_or(DecodeError::UnexpectedNull)
    }

    /// Reads a tagged-field section in which the message defines no known tag. Unknown tags are
    /// skipped as Kafka skips them (kept aside, never interpreted); a repeated tag keeps its last
    /// value.
    fn unknown_tagged_fields(&mut self) -> Result<TaggedFields, DecodeError> {
        Ok(self
            .tagged_fields()?
            .into_iter()
            .filter_map(|(tag, data)| Some((tag_key(tag)?, data)))
            .collect())
    }
}

/// kafka-protocol keys tags by `i32`. A tag above `i32::MAX` cannot come from any schema; Kafka
/// keeps it as an unknown field (a negative Java `int`), kafka-protocol's encoder cannot hold it,
/// so it is skipped here (`None`) like any other field nobody reads.
fn tag_key(tag: u32) -> Option<i32> {
    i32::try_from(tag).ok()
}

/// Reads a non-null array whose elements each take at least `element_bytes_min` bytes.
pub fn array<S: Source, T>(
    source: &mut S,
    compact: bool,
    element_bytes_min: usize,
    count_max: usize,
    element: impl FnMut(&mut S) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let count = source.non_null_array_len(compact, element_bytes_min, count_max)?;
    elements(source, count, element)
}

fn elements<S: Source, T>(
    source: &mut S,
    count: usize,
    mut element: impl FnMut(&mut S) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    // `count` was checked by `array_len` against the bytes remaining and a named maximum; this
    // is the only place a peer's count reaches `Vec::with_capacity`.
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        items.push(element(source)?);
    }
    Ok(items)
}

/// Reads a nullable array (`None` for the null encoding).
pub fn nullable_array<S: Source, T>(
    source: &mut S,
    compact: bool,
    element_bytes_min: usize,
    count_max: usize,
    element: impl FnMut(&mut S) -> Result<T, DecodeError>,
) -> Result<Option<Vec<T>>, DecodeError> {
    match source.array_len(compact, element_bytes_min, count_max)? {
        None => Ok(None),
        Some(count) => elements(source, count, element).map(Some),
    }
}

/// Splits a tagged section into the value of one known `tag` (parsed by `known`) and the rest
/// (see [`Source::unknown_tagged_fields`]). A repeated known tag is parsed each time and the last
/// value wins, as in Kafka's generated readers. Unlike Kafka, which reads a known field from the
/// stream and never compares what it read with the declared size, the value must fill its declared
/// bytes exactly: a mismatch would make Kafka misread everything after it.
pub fn tagged_with<T>(
    fields: Vec<(u32, Bytes)>,
    tag: i32,
    mut known: impl FnMut(&mut BytesSource) -> Result<T, DecodeError>,
) -> Result<(Option<T>, TaggedFields), DecodeError> {
    let mut value = None;
    let mut unknown = TaggedFields::new();
    for (field_tag, data) in fields {
        let Some(field_tag) = tag_key(field_tag) else {
            continue;
        };
        if field_tag == tag {
            let mut source = BytesSource::new(&data);
            value = Some(known(&mut source)?);
            source.finish()?;
        } else {
            unknown.insert(field_tag, data);
        }
    }
    Ok((value, unknown))
}

/// [`Source`] over an untrusted frame body. Strings and byte fields are `Bytes::slice_ref`s of the
/// frame, so a Produce request's record sets are never copied.
#[derive(Debug)]
pub struct BytesSource<'a> {
    frame: &'a Bytes,
    reader: Reader<'a>,
    /// Array elements announced so far, against [`ELEMENTS_PER_REQUEST_MAX`].
    elements_count: usize,
}

impl<'a> BytesSource<'a> {
    /// A source at the start of `frame`.
    pub fn new(frame: &'a Bytes) -> Self {
        Self {
            frame,
            reader: Reader::new(frame),
            elements_count: 0,
        }
    }

    /// The bounded reader underneath (for header fields that stay classic in flexible versions).
    pub fn reader(&mut self) -> &mut Reader<'a> {
        &mut self.reader
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.reader.position()
    }

    /// Fails if any byte is left (garbage after a valid message).
    pub fn finish(&self) -> Result<(), DecodeError> {
        self.reader.expect_end()
    }

    fn share(&self, slice: &[u8]) -> Bytes {
        if slice.is_empty() {
            Bytes::new()
        } else {
            self.frame.slice_ref(slice)
        }
    }

    fn share_string(&self, slice: &[u8]) -> Result<StrBytes, DecodeError> {
        if slice.len() > STRING_BYTES_MAX {
            return Err(DecodeError::CountTooLarge {
                count: slice.len(),
                count_max: STRING_BYTES_MAX,
            });
        }
        StrBytes::from_utf8(self.share(slice)).map_err(|_| DecodeError::InvalidUtf8)
    }
}

impl Source for BytesSource<'_> {
    fn i8(&mut self) -> Result<i8, DecodeError> {
        self.reader.i8()
    }
    fn i16(&mut self) -> Result<i16, DecodeError> {
        self.reader.i16()
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        self.reader.i32()
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        self.reader.i64()
    }
    fn bool(&mut self) -> Result<bool, DecodeError> {
        self.reader.bool()
    }
    fn uuid(&mut self) -> Result<Uuid, DecodeError> {
        let raw = self.reader.take(16)?;
        Uuid::from_slice(raw).map_err(|_| DecodeError::Invalid { reason: "uuid" })
    }
    fn nullable_string(&mut self, compact: bool) -> Result<Option<StrBytes>, DecodeError> {
        let raw = if compact {
            self.reader.compact_nullable_bytes()?
        } else {
            let len = self.reader.i16()?;
            match len {
                -1 => None,
                len => {
                    let len = usize::try_from(len).map_err(|_| DecodeError::NegativeLength {
                        length: i64::from(len),
                    })?;
                    Some(self.reader.take(len)?)
                }
            }
        };
        raw.map(|slice| self.share_string(slice)).transpose()
    }
    fn nullable_bytes(&mut self, compact: bool) -> Result<Option<Bytes>, DecodeError> {
        let raw = if compact {
            self.reader.compact_nullable_bytes()?
        } else {
            self.reader.nullable_bytes()?
        };
        Ok(raw.map(|slice| self.share(slice)))
    }
    fn array_len(
        &mut self,
        compact: bool,
        element_bytes_min: usize,
        count_max: usize,
    ) -> Result<Option<usize>, DecodeError> {
        let count = if compact {
            self.reader
                .compact_array_len(element_bytes_min, count_max)?
        } else {
            self.reader.array_len(element_bytes_min, count_max)?
        };
        let elements_count = self.elements_count.saturating_add(count.unwrap_or(0));
        if elements_count > ELEMENTS_PER_REQUEST_MAX {
            return Err(DecodeError::CountTooLarge {
                count: elements_count,
                count_max: ELEMENTS_PER_REQUEST_MAX,
            });
        }
        self.elements_count = elements_count;
        Ok(count)
    }
    fn tagged_fields(&mut self) -> Result<Vec<(u32, Bytes)>, DecodeError> {
        let mut peek = self.reader.clone();
        let count = peek.unsigned_varint()?;
        let count = usize::try_from(count).map_err(|_| DecodeError::CountTooLarge {
            count: usize::MAX,
            count_max: TAGGED_FIELDS_MAX,
        })?;
        // Each tagged field takes at least 2 bytes (tag and length varints).
        let mut fields =
            Vec::with_capacity(capacity_for(count, peek.remaining(), 2, TAGGED_FIELDS_MAX)?);
        let frame = self.frame;
        self.reader.tagged_fields(TAGGED_FIELDS_MAX, |tag, data| {
            let shared = if data.is_empty() {
                Bytes::new()
            } else {
                frame.slice_ref(data)
            };
            fields.push((tag, shared));
            Ok(())
        })?;
        Ok(fields)
    }
}
