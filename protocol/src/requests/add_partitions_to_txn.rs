//! AddPartitionsToTxn (key 24) request decoding, versions 0–5 (v3+ flexible). v0–v3 are the
//! client's form (one transaction: id, producer id and epoch, topics); v4–v5 the broker's batched
//! form (KIP-890: a partition leader asks the coordinator for many transactions at once, each
//! either adding its partitions or, with `verify_only`, only checking them).

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, ProducerId, TopicName, TransactionalId,
};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{
    PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX, TRANSACTIONS_PER_REQUEST_MAX,
};

/// First version of the batched (broker-to-coordinator) form.
const BATCHED_VERSION_MIN: i16 = 4;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<AddPartitionsToTxnRequest, DecodeError> {
    let c = flexible(ApiKey::AddPartitionsToTxn, version);
    let mut m = AddPartitionsToTxnRequest::default();
    if version >= BATCHED_VERSION_MIN {
        // id, producer id int64, epoch int16, verify_only bool, topics
        let transaction_bytes_min = string_bytes_min(c) + 11 + array_bytes_min(c);
        m.transactions = array(
            s,
            c,
            transaction_bytes_min,
            TRANSACTIONS_PER_REQUEST_MAX,
            |s| {
                let mut transaction = AddPartitionsToTxnTransaction::default();
                transaction.transactional_id = TransactionalId(s.string(c)?);
                transaction.producer_id = ProducerId(s.i64()?);
                transaction.producer_epoch = s.i16()?;
                transaction.verify_only = s.bool()?;
                transaction.topics = topics(s, c)?;
                if c {
                    transaction.unknown_tagged_fields = s.unknown_tagged_fields()?;
                }
                Ok(transaction)
            },
        )?;
    } else {
        m.v3_and_below_transactional_id = TransactionalId(s.string(c)?);
        m.v3_and_below_producer_id = ProducerId(s.i64()?);
        m.v3_and_below_producer_epoch = s.i16()?;
        m.v3_and_below_topics = topics(s, c)?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}

/// The topics of one transaction: a name and its partition indexes each.
fn topics<S: Source>(s: &mut S, c: bool) -> Result<Vec<AddPartitionsToTxnTopic>, DecodeError> {
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = AddPartitionsToTxnTopic::default();
        topic.name = TopicName(s.string(c)?);
        topic.partitions = array(s, c, 4, PARTITIONS_PER_TOPIC_MAX, |s| s.i32())?;
        if c {
            topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(topic)
    })
}
