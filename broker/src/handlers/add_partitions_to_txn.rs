//! AddPartitionsToTxn: the client's form (v0-3: one transaction, its partitions added before it
//! produces to them) and a broker's batched form (v4-5, KIP-890: many transactions, each either
//! verify-only — is the partition in the open transaction? — or, v5, an add on the client's
//! behalf), handed to the transaction coordinator's task.
//!
//! Authorization as Kafka: the client form needs Write on the transactional id
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition) and Write on each topic; a
//! partition of a topic refused (TOPIC_AUTHORIZATION_FAILED) or unknown
//! (UNKNOWN_TOPIC_OR_PARTITION) fails the request, the others then get OPERATION_NOT_ATTEMPTED.
//! The broker form needs ClusterAction on the cluster (CLUSTER_AUTHORIZATION_FAILED).
//!
//! Must never: add a partition the coordinator did not accept, or answer a partition twice.

use std::collections::BTreeMap;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use skiff_txn::{AddPartitions, Response, TopicPartition};

use super::common::txn::{call, for_version};
use super::error_code;
use crate::context::Ctx;
use crate::security::acl::{Access, Operation, ResourceType};
use crate::security::session::Session;
use crate::txn::driver::TxnRequest;

/// First version of the broker's batched form.
const BATCHED_VERSION_MIN: i16 = 4;
/// First version whose clients know PRODUCER_FENCED.
const PRODUCER_FENCED_VERSION_MIN: i16 = 2;
/// First version of the v5 add on a client's behalf (transaction version 2).
const ADD_FOR_CLIENT_VERSION: i16 = 5;

/// The requested partitions, in request order.
fn partitions_of(topics: &[AddPartitionsToTxnTopic]) -> Vec<TopicPartition> {
    topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|partition| TopicPartition::new(topic.name.as_str(), *partition))
        })
        .collect()
}

/// The per-topic results of `results`, grouped in order.
fn topic_results(results: Vec<(TopicPartition, i16)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut by_topic: BTreeMap<String, Vec<AddPartitionsToTxnPartitionResult>> = BTreeMap::new();
    for (tp, code) in results {
        by_topic.entry(tp.topic).or_default().push(
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(tp.partition)
                .with_partition_error_code(code),
        );
    }
    by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(StrBytes::from_string(topic)))
                .with_results_by_partition(partitions)
        })
        .collect()
}

/// The error of each partition refused before the coordinator is asked (authorization, unknown
/// topic or partition), or `None` if none is.
fn refused_partitions(
    ctx: &Ctx,
    access: &Access,
    partitions: &[TopicPartition],
) -> Option<Vec<(TopicPartition, i16)>> {
    let verdicts: Vec<(TopicPartition, Option<i16>)> = partitions
        .iter()
        .map(|tp| {
            let refused = if !access.allows(Operation::Write, ResourceType::Topic, &tp.topic) {
                Some(error_code::TOPIC_AUTHORIZATION_FAILED)
            } else if !ctx
                .cluster
                .partition_states(&tp.topic)
                .iter()
                .any(|(partition, _)| *partition == tp.partition)
            {
                Some(error_code::UNKNOWN_TOPIC_OR_PARTITION)
            } else {
                None
            };
            (tp.clone(), refused)
        })
        .collect();
    verdicts
        .iter()
        .any(|(_, refused)| refused.is_some())
        .then(|| {
            verdicts
                .into_iter()
                .map(|(tp, refused)| (tp, refused.unwrap_or(error_code::OPERATION_NOT_ATTEMPTED)))
                .collect()
        })
}

/// Asks the coordinator; every partition gets `fallback` when its task is gone.
async fn ask(
    ctx: &Ctx,
    version: i16,
    request: TxnRequest,
    partitions: &[TopicPartition],
) -> Vec<(TopicPartition, i16)> {
    match call(ctx, version, request).await {
        Some(Response::AddPartitions { results }) => results
            .into_iter()
            .map(|(tp, code)| (tp, for_version(code, version, PRODUCER_FENCED_VERSION_MIN)))
            .collect(),
        _ => partitions
            .iter()
            .map(|tp| (tp.clone(), error_code::COORDINATOR_NOT_AVAILABLE))
            .collect(),
    }
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    if version >= BATCHED_VERSION_MIN {
        if !access.allows_cluster(Operation::ClusterAction) {
            return AddPartitionsToTxnResponse::default()
                .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED);
        }
        let mut results = Vec::with_capacity(request.transactions.len());
        for transaction in request.transactions {
            results.push(batched(ctx, version, transaction).await);
        }
        return AddPartitionsToTxnResponse::default().with_results_by_transaction(results);
    }
    let transactional_id = request.v3_and_below_transactional_id.to_string();
    let partitions = partitions_of(&request.v3_and_below_topics);
    let results = if !access.allows(
        Operation::Write,
        ResourceType::TransactionalId,
        &transactional_id,
    ) {
        let code = error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        partitions.iter().map(|tp| (tp.clone(), code)).collect()
    } else if let Some(refused) = refused_partitions(ctx, &access, &partitions) {
        refused
    } else {
        let add = AddPartitions {
            transactional_id,
            producer_id: request.v3_and_below_producer_id.0,
            producer_epoch: request.v3_and_below_producer_epoch,
            partitions: partitions.clone(),
            client_tv: 1,
        };
        ask(ctx, version, TxnRequest::AddPartitions(add), &partitions).await
    };
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topic_results(results))
}

/// One transaction of the broker's batched form.
async fn batched(
    ctx: &Ctx,
    version: i16,
    transaction: AddPartitionsToTxnTransaction,
) -> AddPartitionsToTxnResult {
    let partitions = partitions_of(&transaction.topics);
    let add = AddPartitions {
        transactional_id: transaction.transactional_id.to_string(),
        producer_id: transaction.producer_id.0,
        producer_epoch: transaction.producer_epoch,
        partitions: partitions.clone(),
        client_tv: if version >= ADD_FOR_CLIENT_VERSION {
            2
        } else {
            1
        },
    };
    let asked = if transaction.verify_only {
        TxnRequest::VerifyPartitions(add)
    } else {
        TxnRequest::AddPartitions(add)
    };
    let results = ask(ctx, version, asked, &partitions).await;
    AddPartitionsToTxnResult::default()
        .with_transactional_id(transaction.transactional_id)
        .with_topic_results(topic_results(results))
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_protocol::error_code::ErrorCode;

    #[test]
    fn results_are_grouped_by_topic() {
        let results = vec![
            (TopicPartition::new("b", 1), 0),
            (
                TopicPartition::new("a", 0),
                ErrorCode::CONCURRENT_TRANSACTIONS.code(),
            ),
            (TopicPartition::new("b", 0), 0),
        ];
        let grouped = topic_results(results);
        assert_eq!(grouped.len(), 2);
        assert_eq!(grouped[0].name.as_str(), "a");
        assert_eq!(grouped[1].results_by_partition.len(), 2);
    }
}
