//! LeaveGroup (key 13) request decoding, versions 0–5. v0–v2 name one member; v3+ a batch.

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{ApiKey, GroupId, LeaveGroupRequest};

use super::source::{array, Source};
use super::{flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::GROUP_MEMBERS_MAX;

pub(crate) fn decode<S: Source>(s: &mut S, version: i16) -> Result<LeaveGroupRequest, DecodeError> {
    let c = flexible(ApiKey::LeaveGroup, version);
    let mut m = LeaveGroupRequest::default();
    m.group_id = GroupId(s.string(c)?);
    if version <= 2 {
        m.member_id = s.string(c)?;
    }
    if version >= 3 {
        let member_bytes_min = 2 * string_bytes_min(c);
        m.members = array(s, c, member_bytes_min, GROUP_MEMBERS_MAX, |s| {
            let mut member = MemberIdentity::default();
            member.member_id = s.string(c)?;
            member.group_instance_id = s.nullable_string(c)?;
            if version >= 5 {
                member.reason = s.nullable_string(c)?;
            }
            if c {
                member.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(member)
        })?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
