//! Request headers v0/v1/v2 (decoding) and response headers v0/v1 (encoding). The header version
//! of each (api, version) comes from [`crate::api::SupportedApi`].
//!
//! Must never: read the client id as a compact string (it stays int16-length-prefixed even in
//! header v2, so that any broker can read the client id of any request), or allocate by a length
//! read from the peer.

use bytes::{BufMut, Bytes};
pub use kafka_protocol::messages::{RequestHeader, ResponseHeader};

use crate::api::{self, ApiKey, SupportedApi};
use crate::error::{DecodeError, RequestError};
use crate::requests::source::{BytesSource, Source};

/// The fixed start of every request header: api key, api version, correlation id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderStart {
    /// Raw api key.
    pub api_key: i16,
    /// Raw api version.
    pub api_version: i16,
    /// Correlation id to echo.
    pub correlation_id: i32,
}

/// Reads the header at the start of `frame` (a frame body, after the size prefix), checks the
/// api key and version against [`api::SUPPORTED_APIS`], and leaves `source` at the request body.
pub fn decode_request_header<'a>(
    source: &mut BytesSource<'a>,
) -> Result<(RequestHeader, &'static SupportedApi), RequestError> {
    let start = read_start(source).map_err(|source| RequestError::Header { source })?;
    let row = ApiKey::try_from(start.api_key)
        .ok()
        .and_then(api::supported)
        .ok_or(RequestError::UnknownApiKey {
            api_key: start.api_key,
            api_version: start.api_version,
            correlation_id: start.correlation_id,
        })?;
    if !row.supports(start.api_version) {
        return Err(RequestError::UnsupportedVersion {
            api_key: start.api_key,
            api_version: start.api_version,
            correlation_id: start.correlation_id,
        });
    }
    let body_error = |source| RequestError::Body {
        api_key: start.api_key,
        api_version: start.api_version,
        correlation_id: start.correlation_id,
        source,
    };
    // Header v1+ carries the client id; header v2 adds a tagged-field section.
    let client_id = source.nullable_string(false).map_err(body_error)?;
    let unknown_tagged_fields = if row.request_header_version(start.api_version) >= 2 {
        source.unknown_tagged_fields().map_err(body_error)?
    } else {
        Default::default()
    };
    let header = RequestHeader::default()
        .with_request_api_key(start.api_key)
        .with_request_api_version(start.api_version)
        .with_correlation_id(start.correlation_id)
        .with_client_id(client_id)
        .with_unknown_tagged_fields(unknown_tagged_fields);
    Ok((header, row))
}

/// Reads only api key, version and correlation id, e.g. to answer a request whose rest is
/// unreadable.
pub fn peek_start(frame: &Bytes) -> Result<HeaderStart, DecodeError> {
    read_start(&mut BytesSource::new(frame))
}

/// The client id of a request (header v1 and later), without checking the api key or version:
/// for naming a frame that may not decode (the frame capture).
pub fn peek_client_id(
    frame: &Bytes,
) -> Result<Option<kafka_protocol::protocol::StrBytes>, DecodeError> {
    let mut source = BytesSource::new(frame);
    read_start(&mut source)?;
    source.nullable_string(false)
}

fn read_start(source: &mut BytesSource<'_>) -> Result<HeaderStart, DecodeError> {
    Ok(HeaderStart {
        api_key: source.i16()?,
        api_version: source.i16()?,
        correlation_id: source.i32()?,
    })
}

/// Appends a response header: v0 is the correlation id, v1 adds an empty tagged-field section.
pub fn put_response_header(out: &mut impl BufMut, header_version: i16, correlation_id: i32) {
    out.put_i32(correlation_id);
    if header_version >= 1 {
        // An empty tagged-field section: the varint count 0.
        out.put_u8(0);
    }
}

/// Bytes of a response header of `header_version`.
pub fn response_header_bytes(header_version: i16) -> usize {
    if header_version >= 1 {
        5
    } else {
        4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::protocol::Encodable;

    fn encode_header(header: &RequestHeader, version: i16) -> Bytes {
        let mut out = BytesMut::new();
        header.encode(&mut out, version).unwrap();
        out.freeze()
    }

    #[test]
    fn header_v1_and_v2_round_trip() {
        for (key, version, header_version) in [
            (ApiKey::Metadata, 1i16, 1i16),
            (ApiKey::Metadata, 9, 2),
            (ApiKey::Fetch, 0, 1),
            (ApiKey::ApiVersions, 3, 2),
        ] {
            for client_id in [None, Some("skiff-test")] {
                let header = RequestHeader::default()
                    .with_request_api_key(key as i16)
                    .with_request_api_version(version)
                    .with_correlation_id(77)
                    .with_client_id(client_id.map(Into::into));
                let frame = encode_header(&header, header_version);
                let mut source = BytesSource::new(&frame);
                let (decoded, row) = decode_request_header(&mut source).unwrap();
                assert_eq!(decoded, header);
                assert_eq!(row.api_key, key);
                source.finish().unwrap();
            }
        }
    }

    #[test]
    fn unknown_key_and_unsupported_version_carry_the_correlation_id() {
        let frame = Bytes::from_static(&[0x7f, 0x00, 0, 0, 0, 0, 0, 9, 0xff, 0xff]);
        assert_eq!(
            decode_request_header(&mut BytesSource::new(&frame)).unwrap_err(),
            RequestError::UnknownApiKey {
                api_key: 0x7f00,
                api_version: 0,
                correlation_id: 9
            }
        );
        let frame = Bytes::from_static(&[0, 18, 0, 99, 0, 0, 0, 5, 0xff, 0xff]);
        assert_eq!(
            decode_request_header(&mut BytesSource::new(&frame)).unwrap_err(),
            RequestError::UnsupportedVersion {
                api_key: 18,
                api_version: 99,
                correlation_id: 5
            }
        );
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        // Client id length 0x7fff with nothing behind it; tagged-field count 2^28 in header v2.
        let frame = Bytes::from_static(&[0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff]);
        assert!(matches!(
            decode_request_header(&mut BytesSource::new(&frame)),
            Err(RequestError::Body {
                source: DecodeError::Truncated { .. },
                ..
            })
        ));
        let frame =
            Bytes::from_static(&[0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert!(matches!(
            decode_request_header(&mut BytesSource::new(&frame)),
            Err(RequestError::Body { .. })
        ));
        assert!(matches!(
            decode_request_header(&mut BytesSource::new(&Bytes::from_static(&[0, 3]))),
            Err(RequestError::Header { .. })
        ));
    }

    #[test]
    fn response_headers() {
        let mut out = Vec::new();
        put_response_header(&mut out, 0, 42);
        assert_eq!(out, [0, 0, 0, 42]);
        out.clear();
        put_response_header(&mut out, 1, 42);
        assert_eq!(out, [0, 0, 0, 42, 0]);
        assert_eq!(out.len(), response_header_bytes(1));
    }
}
