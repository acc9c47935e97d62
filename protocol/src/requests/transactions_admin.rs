//! The transaction admin requests (`kafka-transactions.sh`): DescribeTransactions (key 65) v0,
//! ListTransactions (key 66) v0–v1 (v1 adds the duration filter), DescribeProducers (key 61) v0.
//! All flexible from v0.

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest,
    ProducerId, TransactionalId,
};

use super::source::{array, Source};
use super::{
    flexible, string_bytes_min, topic_partition_indexes, topic_partition_indexes_bytes_min,
};
use crate::error::DecodeError;
use crate::limits::{TOPICS_PER_REQUEST_MAX, TRANSACTIONS_PER_REQUEST_MAX};

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
    let mut m = ListTransactionsRequest::default();
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
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
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
