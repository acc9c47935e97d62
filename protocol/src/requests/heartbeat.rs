//! Heartbeat (key 12) request decoding, versions 0–4.

use kafka_protocol::messages::{ApiKey, GroupId, HeartbeatRequest};

use super::flexible;
use super::source::Source;
use crate::error::DecodeError;

pub(crate) fn decode<S: Source>(s: &mut S, version: i16) -> Result<HeartbeatRequest, DecodeError> {
    let c = flexible(ApiKey::Heartbeat, version);
    let mut m = HeartbeatRequest::default();
    m.group_id = GroupId(s.string(c)?);
    m.generation_id = s.i32()?;
    m.member_id = s.string(c)?;
    if version >= 3 {
        m.group_instance_id = s.nullable_string(c)?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
