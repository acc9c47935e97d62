//! DescribeCluster (key 60) request decoding, versions 0–1 (flexible). Kafka 4.1 also has v2
//! (`include_fenced_brokers`, KIP-1073); kafka-protocol 0.15.1, which encodes the responses, stops
//! at v1, so v2 is not advertised and clients negotiate v1.

use kafka_protocol::messages::{ApiKey, DescribeClusterRequest};

use super::flexible;
use super::source::Source;
use crate::error::DecodeError;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeClusterRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeCluster, version);
    let mut m = DescribeClusterRequest::default();
    m.include_cluster_authorized_operations = s.bool()?;
    if version >= 1 {
        m.endpoint_type = s.i8()?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
