//! AlterConfigs (key 33) request decoding, versions 0–2 (flexible from 2): each resource's whole
//! set of overrides, replacing the old set.

use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{AlterConfigsRequest, ApiKey};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::CONFIGS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<AlterConfigsRequest, DecodeError> {
    let c = flexible(ApiKey::AlterConfigs, version);
    let mut m = AlterConfigsRequest::default();
    // resource type int8, name, configs array
    let resource_bytes_min = 1 + string_bytes_min(c) + array_bytes_min(c);
    m.resources = array(s, c, resource_bytes_min, CONFIGS_PER_REQUEST_MAX, |s| {
        let mut resource = AlterConfigsResource::default();
        resource.resource_type = s.i8()?;
        resource.resource_name = s.string(c)?;
        let config_bytes_min = 2 * string_bytes_min(c);
        resource.configs = array(s, c, config_bytes_min, CONFIGS_PER_REQUEST_MAX, |s| {
            let mut config = AlterableConfig::default();
            config.name = s.string(c)?;
            config.value = s.nullable_string(c)?;
            if c {
                config.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(config)
        })?;
        if c {
            resource.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(resource)
    })?;
    m.validate_only = s.bool()?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
