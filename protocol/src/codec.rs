//! The one bounded primitive reader every Skiff decoder is built on: big-endian integers, Kafka's
//! varints, length-prefixed bytes and strings, and the single place where a count read from a peer
//! or a file may become an allocation size ([`capacity_for`]).
//!
//! Must never: allocate, panic on any input, or trust a length before comparing it with the bytes
//! that remain.

use crate::error::DecodeError;

/// A cursor over untrusted bytes. Every read checks the bytes remaining first.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    position: usize,
}

macro_rules! read_be {
    ($name:ident, $ty:ty) => {
        #[doc = concat!("Reads a big-endian `", stringify!($ty), "`.")]
        pub fn $name(&mut self) -> Result<$ty, DecodeError> {
            let raw = self.take(std::mem::size_of::<$ty>())?;
            let mut array = [0u8; std::mem::size_of::<$ty>()];
            array.copy_from_slice(raw);
            Ok(<$ty>::from_be_bytes(array))
        }
    };
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, position: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.position
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The unread bytes, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.position..).unwrap_or_default()
    }

    /// Takes the next `len` bytes, or fails with [`DecodeError::Truncated`].
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .position
            .checked_add(len)
            .filter(|end| *end <= self.buf.len())
            .ok_or(DecodeError::Truncated {
                needed_bytes: len,
                remaining_bytes: self.remaining(),
            })?;
        let taken = self
            .buf
            .get(self.position..end)
            .ok_or(DecodeError::Truncated {
                needed_bytes: len,
                remaining_bytes: self.remaining(),
            })?;
        self.position = end;
        Ok(taken)
    }

    /// Skips `len` bytes.
    pub fn skip(&mut self, len: usize) -> Result<(), DecodeError> {
        self.take(len).map(|_| ())
    }

    read_be!(i8, i8);
    read_be!(u8, u8);
    read_be!(i16, i16);
    read_be!(u16, u16);
    read_be!(i32, i32);
    read_be!(u32, u32);
    read_be!(i64, i64);
    read_be!(f64, f64);

    /// Reads a boolean (any non-zero byte is true, as Kafka reads it).
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.u8()? != 0)
    }

    /// Reads an unsigned LEB128 varint of at most 5 bytes (Kafka's `UNSIGNED_VARINT`).
    pub fn unsigned_varint(&mut self) -> Result<u32, DecodeError> {
        let mut value: u32 = 0;
        for index in 0..5u32 {
            let byte = self.u8()?;
            let bits = u32::from(byte & 0x7f);
            if index == 4 && bits > 0x0f {
                return Err(DecodeError::VarintOverflow);
            }
            value |= bits << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintOverflow)
    }

    /// Reads an unsigned LEB128 varlong of at most 10 bytes.
    pub fn unsigned_varlong(&mut self) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for index in 0..10u32 {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            if index == 9 && bits > 0x01 {
                return Err(DecodeError::VarintOverflow);
            }
            value |= bits << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintOverflow)
    }

    /// Reads a zig-zag varint (Kafka's `VARINT`, used inside v2 records).
    pub fn varint(&mut self) -> Result<i32, DecodeError> {
        let raw = self.unsigned_varint()?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// Reads a zig-zag varlong (Kafka's `VARLONG`).
    pub fn varlong(&mut self) -> Result<i64, DecodeError> {
        let raw = self.unsigned_varlong()?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// Reads an int32-length-prefixed byte field; `None` for length −1.
    pub fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        let len = self.i32()?;
        self.length_prefixed(i64::from(len))
    }

    /// Reads an int16-length-prefixed string; `None` for length −1.
    pub fn nullable_string(&mut self) -> Result<Option<&'a str>, DecodeError> {
        let len = self.i16()?;
        self.length_prefixed(i64::from(len))?.map(utf8).transpose()
    }

    /// Reads an int16-length-prefixed string that must not be null.
    pub fn string(&mut self) -> Result<&'a str, DecodeError> {
        self.nullable_string()?.ok_or(DecodeError::UnexpectedNull)
    }

    /// Reads a compact (unsigned varint length + 1) string; `None` for the null encoding 0.
    pub fn compact_nullable_string(&mut self) -> Result<Option<&'a str>, DecodeError> {
        self.compact_nullable_bytes()?.map(utf8).transpose()
    }

    /// Reads a compact string that must not be null.
    pub fn compact_string(&mut self) -> Result<&'a str, DecodeError> {
        self.compact_nullable_string()?
            .ok_or(DecodeError::UnexpectedNull)
    }

    /// Reads compact bytes (unsigned varint length + 1); `None` for 0.
    pub fn compact_nullable_bytes(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        let len_plus_one = self.unsigned_varint()?;
        self.length_prefixed(i64::from(len_plus_one) - 1)
    }

    /// Reads a zig-zag-varint-length-prefixed field as v2 records carry keys, values and headers.
    pub fn varint_bytes(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        let len = self.varint()?;
        self.length_prefixed(i64::from(len))
    }

    fn length_prefixed(&mut self, len: i64) -> Result<Option<&'a [u8]>, DecodeError> {
        match len {
            -1 => Ok(None),
            len if len < -1 => Err(DecodeError::NegativeLength { length: len }),
            len => {
                let len = usize::try_from(len)
                    .map_err(|_| DecodeError::NegativeLength { length: len })?;
                self.take(len).map(Some)
            }
        }
    }

    /// Reads an int32 array count (−1 = null) for elements of at least `element_bytes_min` bytes,
    /// rejecting counts above `count_max` or above what the remaining bytes could hold.
    pub fn array_len(
        &mut self,
        element_bytes_min: usize,
        count_max: usize,
    ) -> Result<Option<usize>, DecodeError> {
        let count = self.i32()?;
        self.checked_count(i64::from(count), element_bytes_min, count_max)
    }

    /// Reads a compact array count (unsigned varint count + 1; 0 = null), checked like
    /// [`Reader::array_len`].
    pub fn compact_array_len(
        &mut self,
        element_bytes_min: usize,
        count_max: usize,
    ) -> Result<Option<usize>, DecodeError> {
        let count_plus_one = self.unsigned_varint()?;
        self.checked_count(i64::from(count_plus_one) - 1, element_bytes_min, count_max)
    }

    fn checked_count(
        &self,
        count: i64,
        element_bytes_min: usize,
        count_max: usize,
    ) -> Result<Option<usize>, DecodeError> {
        match count {
            -1 => Ok(None),
            count if count < -1 => Err(DecodeError::NegativeLength { length: count }),
            count => {
                let count = usize::try_from(count)
                    .map_err(|_| DecodeError::NegativeLength { length: count })?;
                check_count(count, self.remaining(), element_bytes_min, count_max).map(Some)
            }
        }
    }

    /// Reads a tagged-field section (flexible versions), bounded by `tagged_fields_max`, handing
    /// each field to `visit` as (tag, bytes) in the order sent.
    ///
    /// As lenient as Kafka's generated readers (`MessageDataGenerator`: a loop of tag, size,
    /// `switch`): tags may come in any order and may repeat; the caller decides (a later
    /// occurrence replaces an earlier one, as a repeated known tag does in Kafka). The count and
    /// every size are still checked against the bytes that remain before anything is read.
    pub fn tagged_fields(
        &mut self,
        tagged_fields_max: usize,
        mut visit: impl FnMut(u32, &'a [u8]) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        let count = self.unsigned_varint()? as usize;
        check_count(count, self.remaining(), 2, tagged_fields_max)?;
        for _ in 0..count {
            let tag = self.unsigned_varint()?;
            let len = self.unsigned_varint()? as usize;
            let data = self.take(len)?;
            visit(tag, data)?;
        }
        Ok(())
    }

    /// Fails unless every byte has been read (garbage after a message is an error).
    pub fn expect_end(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            trailing_bytes => Err(DecodeError::TrailingBytes { trailing_bytes }),
        }
    }
}

fn utf8(raw: &[u8]) -> Result<&str, DecodeError> {
    std::str::from_utf8(raw).map_err(|_| DecodeError::InvalidUtf8)
}

/// Checks a count read from a peer or a file against the bytes that remain (each element takes at
/// least `element_bytes_min`) and a named maximum. The only sanctioned path from an untrusted count to
/// an allocation size: use its result with `Vec::with_capacity`.
pub fn check_count(
    count: usize,
    remaining_bytes: usize,
    element_bytes_min: usize,
    count_max: usize,
) -> Result<usize, DecodeError> {
    if count > count_max {
        return Err(DecodeError::CountTooLarge { count, count_max });
    }
    let needed_bytes = count.saturating_mul(element_bytes_min.max(1));
    if needed_bytes > remaining_bytes {
        return Err(DecodeError::Truncated {
            needed_bytes,
            remaining_bytes,
        });
    }
    Ok(count)
}

/// Allocation size for `count` elements read from a peer: [`check_count`], then capped at
/// `count_max`. Use this, never a raw count, for `Vec::with_capacity`.
pub fn capacity_for(
    count: usize,
    remaining_bytes: usize,
    element_bytes_min: usize,
    count_max: usize,
) -> Result<usize, DecodeError> {
    check_count(count, remaining_bytes, element_bytes_min, count_max)
}

/// Appends Kafka's unsigned varint encoding of `value`.
pub fn put_unsigned_varint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        let [low, ..] = value.to_le_bytes();
        out.push(low | 0x80);
        value >>= 7;
    }
    let [low, ..] = value.to_le_bytes();
    out.push(low);
}

/// Appends Kafka's unsigned varlong encoding of `value`.
pub fn put_unsigned_varlong(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        let [low, ..] = value.to_le_bytes();
        out.push(low | 0x80);
        value >>= 7;
    }
    let [low, ..] = value.to_le_bytes();
    out.push(low);
}

/// Zig-zag mapping of a signed 32-bit value (small magnitudes become small unsigned values).
fn zigzag32(value: i32) -> u32 {
    u32::from_ne_bytes(((value << 1) ^ (value >> 31)).to_ne_bytes())
}

/// Zig-zag mapping of a signed 64-bit value.
fn zigzag64(value: i64) -> u64 {
    u64::from_ne_bytes(((value << 1) ^ (value >> 63)).to_ne_bytes())
}

/// Appends a zig-zag varint.
pub fn put_varint(out: &mut Vec<u8>, value: i32) {
    put_unsigned_varint(out, zigzag32(value));
}

/// Appends a zig-zag varlong.
pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    put_unsigned_varlong(out, zigzag64(value));
}

/// Bytes the zig-zag varint encoding of `value` takes.
pub fn varint_len(value: i32) -> usize {
    unsigned_varint_len(zigzag32(value))
}

/// Bytes the zig-zag varlong encoding of `value` takes.
pub fn varlong_len(value: i64) -> usize {
    let mut raw = zigzag64(value);
    let mut len = 1;
    while raw >= 0x80 {
        raw >>= 7;
        len += 1;
    }
    len
}

/// Bytes the unsigned varint encoding of `value` takes.
pub fn unsigned_varint_len(mut value: u32) -> usize {
    let mut len = 1;
    while value >= 0x80 {
        value >>= 7;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn truncated_reads_are_errors() {
        let mut reader = Reader::new(&[0, 1]);
        assert!(matches!(reader.i32(), Err(DecodeError::Truncated { .. })));
        assert_eq!(reader.i16().ok(), Some(1));
        reader.expect_end().ok();
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        let mut reader = Reader::new(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(reader.array_len(1, usize::MAX).is_err());
        let mut reader = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(reader.compact_array_len(1, usize::MAX).is_err());
        let mut reader = Reader::new(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(reader.nullable_bytes().is_err());
        let mut reader = Reader::new(&[0x05]);
        assert!(matches!(
            reader.tagged_fields(64, |_, _| Ok(())),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn varint_overflow_is_an_error() {
        let mut reader = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(reader.unsigned_varint(), Err(DecodeError::VarintOverflow));
    }

    proptest! {
        #[test]
        fn varints_round_trip(value: i32, long: i64, unsigned: u32) {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            put_varlong(&mut out, long);
            put_unsigned_varint(&mut out, unsigned);
            prop_assert_eq!(out.len(), varint_len(value) + varlong_len(long) + unsigned_varint_len(unsigned));
            let mut reader = Reader::new(&out);
            prop_assert_eq!(reader.varint()?, value);
            prop_assert_eq!(reader.varlong()?, long);
            prop_assert_eq!(reader.unsigned_varint()?, unsigned);
            prop_assert!(reader.expect_end().is_ok());
        }

        #[test]
        fn reader_never_panics(bytes: Vec<u8>) {
            let mut reader = Reader::new(&bytes);
            let _ = reader.compact_array_len(1, 1000);
            let _ = reader.varlong();
            let _ = reader.nullable_string();
            let _ = reader.tagged_fields(16, |_, _| Ok(()));
        }
    }
}
