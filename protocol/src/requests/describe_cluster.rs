//! DescribeCluster (key 60) request decoding, versions 0–2 (flexible). v2 (KIP-1073) appends
//! `include_fenced_brokers`, past kafka-protocol 0.15.1, so the request is
//! [`DescribeClusterRequest`]: the crate's message and that flag.

use std::collections::BTreeMap;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

use super::flexible;
use super::source::Source;
use crate::error::DecodeError;
use crate::past_crate::{encode_extended, extended_size};

/// First version with `include_fenced_brokers` (and the response's `is_fenced`).
pub const FENCED_BROKERS_VERSION_MIN: i16 = 2;

/// Newest version kafka-protocol 0.15.1 encodes; v2's request is v1's with the flag appended.
const CRATE_VERSION_MAX: i16 = 1;

/// A DescribeCluster request at any version 0–2: kafka-protocol's message (every field up to v1)
/// and v2's flag, false at older versions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DescribeClusterRequest {
    /// The fields of versions 0–1.
    pub base: kafka_protocol::messages::DescribeClusterRequest,
    /// v2+: list fenced brokers too, each marked.
    pub include_fenced_brokers: bool,
}

impl DescribeClusterRequest {
    /// v1's message without tagged fields, for [`encode_extended`].
    fn without_tags(&self) -> kafka_protocol::messages::DescribeClusterRequest {
        self.base
            .clone()
            .with_unknown_tagged_fields(BTreeMap::new())
    }
}

impl Encodable for DescribeClusterRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        if version < FENCED_BROKERS_VERSION_MIN {
            anyhow::ensure!(
                !self.include_fenced_brokers,
                "DescribeCluster v{version} has no include_fenced_brokers"
            );
            return self.base.encode(buf, version);
        }
        anyhow::ensure!(
            version == FENCED_BROKERS_VERSION_MIN,
            "DescribeCluster v{version} is not encoded"
        );
        let flag = [u8::from(self.include_fenced_brokers)];
        let tags = &self.base.unknown_tagged_fields;
        encode_extended(&self.without_tags(), CRATE_VERSION_MAX, &flag, tags, buf)
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        if version < FENCED_BROKERS_VERSION_MIN {
            return self.base.compute_size(version);
        }
        let tags = &self.base.unknown_tagged_fields;
        extended_size(&self.without_tags(), CRATE_VERSION_MAX, 1, tags)
    }
}

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeClusterRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeCluster, version);
    let mut request = DescribeClusterRequest::default();
    request.base.include_cluster_authorized_operations = s.bool()?;
    if version >= 1 {
        request.base.endpoint_type = s.i8()?;
    }
    if version >= FENCED_BROKERS_VERSION_MIN {
        request.include_fenced_brokers = s.bool()?;
    }
    if c {
        request.base.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(request)
}
