//! CreateAcls (key 30), DescribeAcls (key 29) and DeleteAcls (key 31) request decoding, versions
//! 1–3 (flexible from 2), the versions Kafka 4.1.1 serves (KIP-896 removed v0, which had no
//! pattern type).

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};

use super::source::{array, Source};
use super::{flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::ACLS_PER_REQUEST_MAX;

/// Fewest bytes of one ACL creation or filter: four int8 codes, three strings' prefixes and (in
/// flexible versions) the tagged-field count.
fn acl_bytes_min(compact: bool) -> usize {
    4 + 3 * string_bytes_min(compact) + usize::from(compact)
}

pub(crate) fn decode_create<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<CreateAclsRequest, DecodeError> {
    let c = flexible(ApiKey::CreateAcls, version);
    let mut m = CreateAclsRequest::default();
    m.creations = array(s, c, acl_bytes_min(c), ACLS_PER_REQUEST_MAX, |s| {
        let mut creation = AclCreation::default();
        creation.resource_type = s.i8()?;
        creation.resource_name = s.string(c)?;
        creation.resource_pattern_type = s.i8()?;
        creation.principal = s.string(c)?;
        creation.host = s.string(c)?;
        creation.operation = s.i8()?;
        creation.permission_type = s.i8()?;
        if c {
            creation.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(creation)
    })?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}

pub(crate) fn decode_describe<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeAclsRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeAcls, version);
    let mut m = DescribeAclsRequest::default();
    m.resource_type_filter = s.i8()?;
    m.resource_name_filter = s.nullable_string(c)?;
    m.pattern_type_filter = s.i8()?;
    m.principal_filter = s.nullable_string(c)?;
    m.host_filter = s.nullable_string(c)?;
    m.operation = s.i8()?;
    m.permission_type = s.i8()?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}

pub(crate) fn decode_delete<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DeleteAclsRequest, DecodeError> {
    let c = flexible(ApiKey::DeleteAcls, version);
    let mut m = DeleteAclsRequest::default();
    m.filters = array(s, c, acl_bytes_min(c), ACLS_PER_REQUEST_MAX, |s| {
        let mut filter = DeleteAclsFilter::default();
        filter.resource_type_filter = s.i8()?;
        filter.resource_name_filter = s.nullable_string(c)?;
        filter.pattern_type_filter = s.i8()?;
        filter.principal_filter = s.nullable_string(c)?;
        filter.host_filter = s.nullable_string(c)?;
        filter.operation = s.i8()?;
        filter.permission_type = s.i8()?;
        if c {
            filter.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(filter)
    })?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
