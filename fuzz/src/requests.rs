//! Fuzz bodies for framing and request decoding.
//!
//! `frame`: [`check`] never panics and its answer agrees with the bytes (a ready frame is all
//! there and within the limit, an over-limit or negative size is reported as such).
//! `request`: [`decode_request`] never panics or over-allocates; whatever it accepts re-encodes
//! with kafka-protocol's encoder and decodes again to the same value (a round trip), and any error
//! past the 8-byte header start carries the peer's correlation id.

use bytes::Bytes;
use skiff_protocol::error::RequestError;
use skiff_protocol::frame::{body, check, FrameCheck};
use skiff_protocol::requests::{decode_body, decode_request};

/// Targets of this module.
pub const TARGETS: &[crate::Target] = &[("frame", frame), ("request", request)];

/// Frame check invariants, for a limit taken from the input so small limits are explored too.
pub fn frame(data: &[u8]) {
    let Some((&limit_byte, buf)) = data.split_first() else {
        return;
    };
    let request_bytes_max = usize::from(limit_byte) * 16;
    let declared = buf
        .get(..4)
        .map(|prefix| i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]));
    match check(buf, request_bytes_max) {
        FrameCheck::NeedMore { frame_bytes } => match (declared, frame_bytes) {
            (None, None) => assert!(buf.len() < 4),
            (Some(size), Some(frame_bytes)) => {
                assert_eq!(frame_bytes, size as usize + 4);
                assert!(buf.len() < frame_bytes && size as usize <= request_bytes_max);
            }
            other => panic!("NeedMore disagrees with the prefix: {other:?}"),
        },
        FrameCheck::TooLarge { body_bytes, .. } => {
            assert_eq!(Some(body_bytes as i32), declared);
            assert!(body_bytes > request_bytes_max);
        }
        FrameCheck::Negative { size } => {
            assert_eq!(Some(size), declared);
            assert!(size < 0);
        }
        FrameCheck::Ready { body_bytes } => {
            assert_eq!(Some(body_bytes as i32), declared);
            assert!(body_bytes <= request_bytes_max && buf.len() >= 4 + body_bytes);
            assert_eq!(body(buf, request_bytes_max), buf.get(4..4 + body_bytes));
        }
    }
}

/// Request decoding round trip and error invariants; `data` is a frame body (after the prefix).
pub fn request(data: &[u8]) {
    let frame = Bytes::copy_from_slice(data);
    match decode_request(&frame) {
        Ok((header, request)) => {
            let version = header.request_api_version;
            let body = request
                .encode_body(version)
                .unwrap_or_else(|error| panic!("accepted {request:?} does not re-encode: {error}"))
                .freeze();
            let again = decode_body(request.api_key(), version, &body)
                .unwrap_or_else(|error| panic!("re-encoded {request:?} does not decode: {error}"));
            assert_eq!(again, request);
        }
        Err(RequestError::Header { .. }) => assert!(data.len() < 8),
        Err(error) => {
            let correlation_id = data
                .get(4..8)
                .map(|raw| i32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]));
            assert_eq!(error.correlation_id(), correlation_id);
        }
    }
}
