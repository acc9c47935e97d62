//! IncrementalAlterConfigs (key 44) request decoding, versions 0–1 (flexible from 1): per-key
//! operations (SET, DELETE, APPEND, SUBTRACT) on each resource's overrides.

use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{ApiKey, IncrementalAlterConfigsRequest};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::CONFIGS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<IncrementalAlterConfigsRequest, DecodeError> {
    let c = flexible(ApiKey::IncrementalAlterConfigs, version);
    let mut m = IncrementalAlterConfigsRequest::default();
    // resource type int8, name, configs array
    let resource_bytes_min = 1 + string_bytes_min(c) + array_bytes_min(c);
    m.resources = array(s, c, resource_bytes_min, CONFIGS_PER_REQUEST_MAX, |s| {
        let mut resource = AlterConfigsResource::default();
        resource.resource_type = s.i8()?;
        resource.resource_name = s.string(c)?;
        // name, operation int8, nullable value
        let config_bytes_min = 2 * string_bytes_min(c) + 1;
        resource.configs = array(s, c, config_bytes_min, CONFIGS_PER_REQUEST_MAX, |s| {
            let mut config = AlterableConfig::default();
            config.name = s.string(c)?;
            config.config_operation = s.i8()?;
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
