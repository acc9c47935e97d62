//! SaslHandshake (key 17, versions 0–1) and SaslAuthenticate (key 36, versions 0–2) request
//! decoding. Decoding only: Skiff does not authenticate yet; the broker answers these with an
//! error until it does.

use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslHandshakeRequest};

use super::flexible;
use super::source::Source;
use crate::error::DecodeError;

pub(crate) fn decode_handshake<S: Source>(
    s: &mut S,
    _version: i16,
) -> Result<SaslHandshakeRequest, DecodeError> {
    let mut m = SaslHandshakeRequest::default();
    m.mechanism = s.string(false)?;
    Ok(m)
}

pub(crate) fn decode_authenticate<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<SaslAuthenticateRequest, DecodeError> {
    let c = flexible(ApiKey::SaslAuthenticate, version);
    let mut m = SaslAuthenticateRequest::default();
    m.auth_bytes = s.bytes(c)?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
