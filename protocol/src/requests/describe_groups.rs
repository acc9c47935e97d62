//! DescribeGroups (key 15) request decoding, versions 0–5.

use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, GroupId};

use super::source::{array, Source};
use super::{flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::GROUPS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeGroupsRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeGroups, version);
    let mut m = DescribeGroupsRequest::default();
    m.groups = array(s, c, string_bytes_min(c), GROUPS_PER_REQUEST_MAX, |s| {
        Ok(GroupId(s.string(c)?))
    })?;
    if version >= 3 {
        m.include_authorized_operations = s.bool()?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
