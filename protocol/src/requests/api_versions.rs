//! ApiVersions (key 18) request decoding, versions 0–3. v0–v2 have an empty body; v3 carries the
//! client software name and version.

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};

use super::flexible;
use super::source::Source;
use crate::error::DecodeError;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<ApiVersionsRequest, DecodeError> {
    let c = flexible(ApiKey::ApiVersions, version);
    let mut m = ApiVersionsRequest::default();
    if version >= 3 {
        m.client_software_name = s.string(c)?;
        m.client_software_version = s.string(c)?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
