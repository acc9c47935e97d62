//! Kafka's connection framing: a big-endian int32 size, then that many bytes of request or response.
//! [`check`] looks at the prefix only, so the broker knows whether to read more, reject, or take a
//! whole frame — before it sizes any buffer by the peer's number.
//!
//! Must never: allocate, or accept a negative or over-limit size.

use crate::limits::FRAME_PREFIX_BYTES;

/// What the bytes buffered so far hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameCheck {
    /// The prefix or the body is incomplete; read more. `frame_bytes` is the whole frame size
    /// (prefix included) once the prefix is known, so the reader can reserve exactly that.
    NeedMore {
        /// Prefix plus body, when the prefix has arrived.
        frame_bytes: Option<usize>,
    },
    /// The declared size is above the limit; close the connection without reading the body.
    TooLarge {
        /// The body size the peer declared.
        body_bytes: usize,
        /// The limit it broke.
        request_bytes_max: usize,
    },
    /// The declared size is negative: the peer is not speaking Kafka.
    Negative {
        /// The value read.
        size: i32,
    },
    /// A whole frame is buffered: the body is `buf[FRAME_PREFIX_BYTES..FRAME_PREFIX_BYTES + body_bytes]`.
    Ready {
        /// Body bytes (after the prefix).
        body_bytes: usize,
    },
}

/// Checks the frame at the start of `buf` against `request_bytes_max` (body bytes, e.g.
/// [`crate::limits::REQUEST_BYTES_MAX_DEFAULT`]).
pub fn check(buf: &[u8], request_bytes_max: usize) -> FrameCheck {
    let Some(prefix) = buf.get(..FRAME_PREFIX_BYTES) else {
        return FrameCheck::NeedMore { frame_bytes: None };
    };
    let mut raw = [0u8; FRAME_PREFIX_BYTES];
    raw.copy_from_slice(prefix);
    let size = i32::from_be_bytes(raw);
    let Ok(body_bytes) = usize::try_from(size) else {
        return FrameCheck::Negative { size };
    };
    if body_bytes > request_bytes_max {
        return FrameCheck::TooLarge {
            body_bytes,
            request_bytes_max,
        };
    }
    let frame_bytes = FRAME_PREFIX_BYTES.saturating_add(body_bytes);
    if buf.len() < frame_bytes {
        FrameCheck::NeedMore {
            frame_bytes: Some(frame_bytes),
        }
    } else {
        FrameCheck::Ready { body_bytes }
    }
}

/// The body of the frame at the start of `buf`, if [`check`] says it is ready.
pub fn body(buf: &[u8], request_bytes_max: usize) -> Option<&[u8]> {
    match check(buf, request_bytes_max) {
        FrameCheck::Ready { body_bytes } => {
            buf.get(FRAME_PREFIX_BYTES..FRAME_PREFIX_BYTES.checked_add(body_bytes)?)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefix_states() {
        assert_eq!(check(&[], 10), FrameCheck::NeedMore { frame_bytes: None });
        assert_eq!(
            check(&[0, 0, 0], 10),
            FrameCheck::NeedMore { frame_bytes: None }
        );
        assert_eq!(
            check(&[0, 0, 0, 2, 9], 10),
            FrameCheck::NeedMore {
                frame_bytes: Some(6)
            }
        );
        assert_eq!(
            check(&[0, 0, 0, 2, 9, 9, 7], 10),
            FrameCheck::Ready { body_bytes: 2 }
        );
        assert_eq!(body(&[0, 0, 0, 2, 9, 8, 7], 10), Some(&[9u8, 8][..]));
        assert_eq!(
            check(&[0, 0, 0, 0], 10),
            FrameCheck::Ready { body_bytes: 0 }
        );
    }

    #[test]
    fn over_limit_is_rejected_before_the_body_arrives() {
        assert_eq!(
            check(&[0, 0, 0, 11], 10),
            FrameCheck::TooLarge {
                body_bytes: 11,
                request_bytes_max: 10
            }
        );
        assert_eq!(
            check(
                &[0x7f, 0xff, 0xff, 0xff],
                crate::limits::REQUEST_BYTES_MAX_DEFAULT
            ),
            FrameCheck::TooLarge {
                body_bytes: 0x7fff_ffff,
                request_bytes_max: crate::limits::REQUEST_BYTES_MAX_DEFAULT
            }
        );
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        assert_eq!(
            check(&[0xff, 0xff, 0xff, 0xff], usize::MAX),
            FrameCheck::Negative { size: -1 }
        );
        assert_eq!(
            check(&[0x80, 0, 0, 0], usize::MAX),
            FrameCheck::Negative { size: i32::MIN }
        );
    }

    proptest! {
        #[test]
        fn ready_means_the_whole_frame_is_there(buf: Vec<u8>, max in 0usize..512) {
            match check(&buf, max) {
                FrameCheck::Ready { body_bytes } => {
                    prop_assert!(body_bytes <= max);
                    prop_assert!(buf.len() >= 4 + body_bytes);
                    prop_assert_eq!(body(&buf, max).map(<[u8]>::len), Some(body_bytes));
                }
                FrameCheck::NeedMore { frame_bytes } => {
                    prop_assert!(frame_bytes.is_none_or(|f| f > buf.len()));
                }
                FrameCheck::TooLarge { body_bytes, .. } => prop_assert!(body_bytes > max),
                FrameCheck::Negative { size } => prop_assert!(size < 0),
            }
        }
    }
}
