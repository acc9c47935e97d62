//! DescribeClientQuotas (key 48) and AlterClientQuotas (key 49) request decoding, versions 0–1
//! (flexible from 1): a filter over quota entities, and per-entity quota operations.
//!
//! A quota value is a float64 on the wire; a NaN is refused here (no tool sends one, and it could
//! not be stored, compared or enforced), any other value is left to the broker to validate.

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, ApiKey, DescribeClientQuotasRequest};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::QUOTA_ENTRIES_PER_REQUEST_MAX;

pub(crate) fn decode_describe<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeClientQuotasRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeClientQuotas, version);
    let mut m = DescribeClientQuotasRequest::default();
    // entity type, match type int8, nullable match
    let component_bytes_min = 2 * string_bytes_min(c) + 1;
    m.components = array(
        s,
        c,
        component_bytes_min,
        QUOTA_ENTRIES_PER_REQUEST_MAX,
        |s| {
            let mut component = ComponentData::default();
            component.entity_type = s.string(c)?;
            component.match_type = s.i8()?;
            component._match = s.nullable_string(c)?;
            if c {
                component.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(component)
        },
    )?;
    m.strict = s.bool()?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}

pub(crate) fn decode_alter<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<AlterClientQuotasRequest, DecodeError> {
    let c = flexible(ApiKey::AlterClientQuotas, version);
    let mut m = AlterClientQuotasRequest::default();
    // entity array, ops array
    let entry_bytes_min = 2 * array_bytes_min(c);
    m.entries = array(s, c, entry_bytes_min, QUOTA_ENTRIES_PER_REQUEST_MAX, |s| {
        let mut entry = EntryData::default();
        let entity_bytes_min = 2 * string_bytes_min(c);
        entry.entity = array(s, c, entity_bytes_min, QUOTA_ENTRIES_PER_REQUEST_MAX, |s| {
            let mut entity = EntityData::default();
            entity.entity_type = s.string(c)?;
            entity.entity_name = s.nullable_string(c)?;
            if c {
                entity.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(entity)
        })?;
        // key, float64 value, remove bool
        let op_bytes_min = string_bytes_min(c) + 8 + 1;
        entry.ops = array(s, c, op_bytes_min, QUOTA_ENTRIES_PER_REQUEST_MAX, |s| {
            let mut op = OpData::default();
            op.key = s.string(c)?;
            op.value = float64(s)?;
            op.remove = s.bool()?;
            if c {
                op.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(op)
        })?;
        if c {
            entry.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(entry)
    })?;
    m.validate_only = s.bool()?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}

/// A big-endian IEEE 754 double: the eight bytes of an int64, reinterpreted.
fn float64<S: Source>(s: &mut S) -> Result<f64, DecodeError> {
    let value = f64::from_bits(u64::from_be_bytes(s.i64()?.to_be_bytes()));
    if value.is_nan() {
        return Err(DecodeError::Invalid {
            reason: "quota value is NaN",
        });
    }
    Ok(value)
}
