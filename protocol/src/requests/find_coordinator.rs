//! FindCoordinator (key 10, "GroupCoordinator" in 0.9/0.10) request decoding, versions 0–6.
//! v4 replaces the single key by a list of keys; v5 and v6 read as v4 (they widen the answers
//! and key types, not the layout).

use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest};

use super::source::{array, Source};
use super::{flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::GROUPS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<FindCoordinatorRequest, DecodeError> {
    let c = flexible(ApiKey::FindCoordinator, version);
    let mut m = FindCoordinatorRequest::default();
    if version <= 3 {
        m.key = s.string(c)?;
    }
    if version >= 1 {
        m.key_type = s.i8()?;
    }
    if version >= 4 {
        m.coordinator_keys = array(s, c, string_bytes_min(c), GROUPS_PER_REQUEST_MAX, |s| {
            s.string(c)
        })?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
