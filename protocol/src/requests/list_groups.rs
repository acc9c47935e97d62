//! ListGroups (key 16) request decoding, versions 0–5. v0–v3 have an empty body (plus tags from v3);
//! v4 adds a state filter, v5 a type filter.

use kafka_protocol::messages::{ApiKey, ListGroupsRequest};

use super::source::{array, Source};
use super::{flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::GROUPS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(s: &mut S, version: i16) -> Result<ListGroupsRequest, DecodeError> {
    let c = flexible(ApiKey::ListGroups, version);
    let mut m = ListGroupsRequest::default();
    if version >= 4 {
        m.states_filter = array(s, c, string_bytes_min(c), GROUPS_PER_REQUEST_MAX, |s| {
            s.string(c)
        })?;
    }
    if version >= 5 {
        m.types_filter = array(s, c, string_bytes_min(c), GROUPS_PER_REQUEST_MAX, |s| {
            s.string(c)
        })?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
