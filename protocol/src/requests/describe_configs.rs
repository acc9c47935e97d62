//! DescribeConfigs (key 32) request decoding, versions 0–4.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest};

use super::source::{array, nullable_array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::CONFIGS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeConfigsRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeConfigs, version);
    let mut m = DescribeConfigsRequest::default();
    // resource type int8, name, keys array
    let resource_bytes_min = 1 + string_bytes_min(c) + array_bytes_min(c);
    m.resources = array(s, c, resource_bytes_min, CONFIGS_PER_REQUEST_MAX, |s| {
        let mut resource = DescribeConfigsResource::default();
        resource.resource_type = s.i8()?;
        resource.resource_name = s.string(c)?;
        resource.configuration_keys =
            nullable_array(s, c, string_bytes_min(c), CONFIGS_PER_REQUEST_MAX, |s| {
                s.string(c)
            })?;
        if c {
            resource.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(resource)
    })?;
    if version >= 1 {
        m.include_synonyms = s.bool()?;
    }
    if version >= 3 {
        m.include_documentation = s.bool()?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
