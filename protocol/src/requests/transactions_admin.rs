//! The transaction admin requests (`kafka-transactions.sh`): DescribeTransactions (key 65) v0,
//! ListTransactions (key 66) v0–v2 (v1 adds the duration filter, v2 the transactional-id
//! pattern, past kafka-protocol 0.15.1: the request is [`ListTransactionsRequest`], the crate's
//! message and the pattern), DescribeProducers (key 61) v0. All flexible from v0.

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use std::collections::BTreeMap;

use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeTransactionsRequest, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::source::{array, Source};
use super::{
    flexible, string_bytes_min, topic_partition_indexes, topic_partition_indexes_bytes_min,
};
use crate::error::DecodeError;
use crate::limits::{TOPICS_PER_REQUEST_MAX, TRANSACTIONS_PER_REQUEST_MAX};
use crate::past_crate::{encode_extended, extended_size, put_compact_nullable_string};

/// First version with the transactional-id pattern (KIP-1152).
pub const ID_PATTERN_VERSION_MIN: i16 = 2;

/// Newest version kafka-protocol 0.15.1 encodes; v2 is v1 with the pattern appended.
const CRATE_VERSION_MAX: i16 = 1;

/// A ListTransactions request at any version 0–2: kafka-protocol's message (every field up to
/// v1) and v2's transactional-id pattern, `None` at older versions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListTransactionsRequest {
    /// The fields of versions 0–1.
    pub base: kafka_protocol::messages::ListTransactionsRequest,
    /// v2+: only transactional ids this regular expression matches whole (null or empty: all).
    pub transactional_id_pattern: Option<StrBytes>,
}

impl ListTransactionsRequest {
    /// v1's message without tagged fields, for [`encode_extended`].
    fn without_tags(&self) -> kafka_protocol::messages::ListTransactionsRequest {
        self.base
            .clone()
            .with_unknown_tagged_fields(BTreeMap::new())
    }

    fn pattern_bytes(&self) -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        put_compact_nullable_string(&mut out, self.transactional_id_pattern.as_deref())?;
        Ok(out)
    }
}

impl Encodable for ListTransactionsRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        if version < ID_PATTERN_VERSION_MIN {
            anyhow::ensure!(
                self.transactional_id_pattern.is_none(),
                "ListTransactions v{version} has no transactional-id pattern"
            );
            return self.base.encode(buf, version);
        }
        anyhow::ensure!(
            version == ID_PATTERN_VERSION_MIN,
            "ListTransactions v{version} is not encoded"
        );
        let tags = &self.base.unknown_tagged_fields;
        let pattern = self.pattern_bytes()?;
        encode_extended(&self.without_tags(), CRATE_VERSION_MAX, &pattern, tags, buf)
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        if version < ID_PATTERN_VERSION_MIN {
            return self.base.compute_size(version);
        }
        let tags = &self.base.unknown_tagged_fields;
        let pattern_bytes = self.pattern_bytes()?.len();
        extended_size(&self.without_tags(), CRATE_VERSION_MAX, pattern_bytes, tags)
    }
}

pub(crate) fn decode_describe<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeTransactionsRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeTransactions, version);
    let mut m = DescribeTransactionsRequest::default();
    m.transactional_ids = array(
        s,
        c,
        string_bytes_min(c),
        TRANSACTIONS_PER_REQUEST_MAX,
        |s| Ok(TransactionalId(s.string(c)?)),
    )?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}

pub(crate) fn decode_list<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<ListTransactionsRequest, DecodeError> {
    let c = flexible(ApiKey::ListTransactions, version);
    let mut request = ListTransactionsRequest::default();
    let m = &mut request.base;
    m.state_filters = array(
        s,
        c,
        string_bytes_min(c),
        TRANSACTIONS_PER_REQUEST_MAX,
        |s| s.string(c),
    )?;
    m.producer_id_filters = array(s, c, 8, TRANSACTIONS_PER_REQUEST_MAX, |s| {
        Ok(ProducerId(s.i64()?))
    })?;
    if version >= 1 {
        m.duration_filter = s.i64()?;
    }
    if version >= ID_PATTERN_VERSION_MIN {
        request.transactional_id_pattern = s.nullable_string(c)?;
    }
    if c {
        request.base.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(request)
}

pub(crate) fn decode_describe_producers<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeProducersRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeProducers, version);
    let mut m = DescribeProducersRequest::default();
    let topic_bytes_min = topic_partition_indexes_bytes_min(c);
    m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let (name, partition_indexes, tags) = topic_partition_indexes(s, c)?;
        let mut topic = TopicRequest::default();
        topic.name = name;
        topic.partition_indexes = partition_indexes;
        topic.unknown_tagged_fields = tags;
        Ok(topic)
    })?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
