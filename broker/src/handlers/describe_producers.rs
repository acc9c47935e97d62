//! DescribeProducers (v0, KIP-664): per requested partition, the producers its leader tracks
//! (id, epoch, last sequence, last timestamp, coordinator epoch of the last marker, first offset of
//! the open transaction), as `kafka-transactions.sh describe-producers` and `find-hanging` read
//! them. Answered by the partition's leader only (NOT_LEADER_OR_FOLLOWER elsewhere), as Kafka's
//! `Partition.activeProducerState`. Authorization: Read on the topic (TOPIC_AUTHORIZATION_FAILED),
//! checked before existence as Kafka checks it.
//!
//! Must never: answer from a follower's state, or reveal whether a refused topic exists.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId, RequestHeader,
};

use super::common::leadership::{led_partition, unserved_partition};
use super::error_code;
use crate::context::Ctx;
use crate::partition::producer_state::DescribedProducer;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let access = ctx.access(session, header.request_api_key);
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let readable = access.allows(Operation::Read, ResourceType::Topic, name);
            let found = ctx.topics.get(name);
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| {
                    let producers = match (&found, readable) {
                        (_, false) => Err(error_code::TOPIC_AUTHORIZATION_FAILED),
                        (None, true) => Err(unserved_partition(ctx, name, index)),
                        (Some(topic), true) => led_partition(ctx, topic, index)
                            .map(|partition| partition.describe_producers()),
                    };
                    partition_response(index, producers)
                })
                .collect();
            TopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

/// One partition's answer: its producers, or the error.
fn partition_response(
    index: i32,
    producers: Result<Vec<DescribedProducer>, i16>,
) -> PartitionResponse {
    let response = PartitionResponse::default().with_partition_index(index);
    match producers {
        Err(code) => response.with_error_code(code),
        Ok(producers) => response.with_active_producers(
            producers
                .into_iter()
                .map(|producer| {
                    ProducerState::default()
                        .with_producer_id(ProducerId(producer.producer_id))
                        .with_producer_epoch(i32::from(producer.producer_epoch))
                        .with_last_sequence(producer.last_sequence)
                        .with_last_timestamp(producer.last_timestamp)
                        .with_coordinator_epoch(producer.coordinator_epoch)
                        .with_current_txn_start_offset(producer.current_txn_start_offset)
                })
                .collect(),
        ),
    }
}
