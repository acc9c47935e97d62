//! DeleteGroups (key 42) request decoding, versions 0–2 (v2 flexible).

use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, GroupId};

use super::source::{array, Source};
use super::{flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::GROUPS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DeleteGroupsRequest, DecodeError> {
    let c = flexible(ApiKey::DeleteGroups, version);
    let mut m = DeleteGroupsRequest::default();
    m.groups_names = array(s, c, string_bytes_min(c), GROUPS_PER_REQUEST_MAX, |s| {
        Ok(GroupId(s.string(c)?))
    })?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
