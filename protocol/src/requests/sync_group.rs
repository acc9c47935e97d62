//! SyncGroup (key 14) request decoding, versions 0–5.

use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{ApiKey, GroupId, SyncGroupRequest};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::GROUP_MEMBERS_MAX;

pub(crate) fn decode<S: Source>(s: &mut S, version: i16) -> Result<SyncGroupRequest, DecodeError> {
    let c = flexible(ApiKey::SyncGroup, version);
    let mut m = SyncGroupRequest::default();
    m.group_id = GroupId(s.string(c)?);
    m.generation_id = s.i32()?;
    m.member_id = s.string(c)?;
    if version >= 3 {
        m.group_instance_id = s.nullable_string(c)?;
    }
    if version >= 5 {
        m.protocol_type = s.nullable_string(c)?;
        m.protocol_name = s.nullable_string(c)?;
    }
    let assignment_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.assignments = array(s, c, assignment_bytes_min, GROUP_MEMBERS_MAX, |s| {
        let mut assignment = SyncGroupRequestAssignment::default();
        assignment.member_id = s.string(c)?;
        assignment.assignment = s.bytes(c)?;
        if c {
            assignment.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(assignment)
    })?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
