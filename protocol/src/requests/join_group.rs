//! JoinGroup (key 11) request decoding, versions 0–9. v0 has no rebalance timeout (the broker
//! uses the session timeout).

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::{ApiKey, GroupId, JoinGroupRequest};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::GROUP_PROTOCOLS_MAX;

pub(crate) fn decode<S: Source>(s: &mut S, version: i16) -> Result<JoinGroupRequest, DecodeError> {
    let c = flexible(ApiKey::JoinGroup, version);
    let mut m = JoinGroupRequest::default();
    m.group_id = GroupId(s.string(c)?);
    m.session_timeout_ms = s.i32()?;
    if version >= 1 {
        m.rebalance_timeout_ms = s.i32()?;
    }
    m.member_id = s.string(c)?;
    if version >= 5 {
        m.group_instance_id = s.nullable_string(c)?;
    }
    m.protocol_type = s.string(c)?;
    let protocol_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.protocols = array(s, c, protocol_bytes_min, GROUP_PROTOCOLS_MAX, |s| {
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = s.string(c)?;
        protocol.metadata = s.bytes(c)?;
        if c {
            protocol.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(protocol)
    })?;
    if version >= 8 {
        m.reason = s.nullable_string(c)?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
