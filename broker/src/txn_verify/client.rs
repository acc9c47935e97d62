//! The IO edge of KIP-890's check: one AddPartitionsToTxn (v4 verify-only, or v5 add) per Produce
//! request to the transactional id's coordinator over the inter-broker client, its answer read
//! with the protocol crate's bounded decoder and turned into each partition's Produce error.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::responses::txn_peer::decode_add_partitions_to_txn_response;

use super::plan::{produce_error, Verification};
use crate::cluster::roles::GroupCoordinator;
use crate::context::Ctx;

/// Bytes of the coordinator's answer read at most (a few bytes per partition; a Produce request
/// names far fewer partitions than this allows).
pub const VERIFY_RESPONSE_BYTES_MAX: usize = 1 << 20;
/// How long a verification may take before its partitions answer NOT_ENOUGH_REPLICAS (which the
/// producer retries): the Produce's own timeout, at most this.
pub const VERIFY_TIMEOUT_MAX: Duration = Duration::from_secs(30);

/// Each partition of `verification` with its Produce error (0: verified, append it).
pub type Verified = BTreeMap<(String, i32), i16>;

/// First pause before asking again when the coordinator answers CONCURRENT_TRANSACTIONS: the
/// producer's previous transaction is still writing its markers (a millisecond or two here), and
/// the producer already sends the next one's records (transaction version 2). Retried here, within
/// the Produce's timeout, as Kafka's brokers retry it, rather than answered to the client, whose
/// own retry backoff (100 ms by default) would stall every such transaction.
pub const CONCURRENT_RETRY_BACKOFF: Duration = Duration::from_millis(2);
/// The longest pause between those retries (the backoff doubles up to it).
pub const CONCURRENT_RETRY_BACKOFF_MAX: Duration = Duration::from_millis(50);

/// Asks the coordinator about every partition of `verification`, within `timeout` (capped at
/// [`VERIFY_TIMEOUT_MAX`]), for a Produce of `produce_version`; CONCURRENT_TRANSACTIONS is asked
/// again after a backoff while the time lasts.
pub(crate) async fn verify(
    ctx: &Ctx,
    verification: &Verification,
    produce_version: i16,
    timeout: Duration,
) -> Verified {
    let deadline = tokio::time::Instant::now() + timeout.min(VERIFY_TIMEOUT_MAX);
    let mut backoff = CONCURRENT_RETRY_BACKOFF;
    loop {
        let answer = match ctx
            .cluster
            .transaction_coordinator_of(&verification.transactional_id)
        {
            GroupCoordinator::Broker(broker) => {
                let call = ask(ctx, broker.node_id, verification);
                tokio::time::timeout_at(deadline, call)
                    .await
                    .unwrap_or(Err(ErrorCode::REQUEST_TIMED_OUT.code()))
            }
            _ => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE.code()),
        };
        if is_concurrent(&answer) && tokio::time::Instant::now() + backoff < deadline {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(CONCURRENT_RETRY_BACKOFF_MAX);
            continue;
        }
        return outcome(verification, answer, produce_version);
    }
}

/// Whether the coordinator answered CONCURRENT_TRANSACTIONS (for the request or any partition).
fn is_concurrent(answer: &Result<AddPartitionsToTxnResponse, i16>) -> bool {
    let concurrent = ErrorCode::CONCURRENT_TRANSACTIONS.code();
    let Ok(response) = answer else {
        return false;
    };
    response.error_code == concurrent
        || response
            .results_by_transaction
            .iter()
            .flat_map(|result| result.topic_results.iter())
            .flat_map(|topic| topic.results_by_partition.iter())
            .any(|partition| partition.partition_error_code == concurrent)
}

/// Sends the request and decodes the answer; `Err` with the code every partition gets when there
/// is no usable answer.
async fn ask(
    ctx: &Ctx,
    node: i32,
    verification: &Verification,
) -> Result<AddPartitionsToTxnResponse, i16> {
    let topics = verification
        .partitions
        .iter()
        .map(|(topic, partitions)| {
            AddPartitionsToTxnTopic::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_string(
                    topic.clone(),
                )))
                .with_partitions(partitions.clone())
        })
        .collect();
    let transaction = AddPartitionsToTxnTransaction::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            verification.transactional_id.clone(),
        )))
        .with_producer_id(ProducerId(verification.producer_id))
        .with_producer_epoch(verification.producer_epoch)
        .with_verify_only(!verification.add)
        .with_topics(topics);
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![transaction]);
    let version = verification.version();
    let body = ctx
        .interbroker
        .call(
            node,
            ApiKey::AddPartitionsToTxn,
            version,
            &request,
            VERIFY_RESPONSE_BYTES_MAX,
        )
        .await
        .map_err(|error| {
            tracing::debug!(%error, node, "KIP-890 verification: no answer from the coordinator");
            ErrorCode::NETWORK_EXCEPTION.code()
        })?;
    decode_add_partitions_to_txn_response(&body, version).map_err(|error| {
        tracing::warn!(%error, node, "KIP-890 verification: the coordinator's answer is undecodable");
        ErrorCode::NETWORK_EXCEPTION.code()
    })
}

/// Each partition's Produce error from the coordinator's answer: its own result, the answer's
/// top-level error, or NOT_ENOUGH_REPLICAS (retried) for a partition the answer left out.
fn outcome(
    verification: &Verification,
    answer: Result<AddPartitionsToTxnResponse, i16>,
    produce_version: i16,
) -> Verified {
    let mut answered: BTreeMap<(String, i32), i16> = BTreeMap::new();
    let top_level = match &answer {
        Err(code) => *code,
        Ok(response) => {
            let results = response.results_by_transaction.iter();
            for topic in results.flat_map(|result| result.topic_results.iter()) {
                for partition in &topic.results_by_partition {
                    let key = (topic.name.0.to_string(), partition.partition_index);
                    answered.insert(key, partition.partition_error_code);
                }
            }
            response.error_code
        }
    };
    let mut verified = Verified::new();
    for (topic, partitions) in &verification.partitions {
        for &partition in partitions {
            let key = (topic.clone(), partition);
            let code = match answered.get(&key) {
                _ if top_level != 0 => top_level,
                Some(code) => *code,
                None => ErrorCode::NOT_ENOUGH_REPLICAS.code(),
            };
            verified.insert(key, produce_error(code, produce_version));
        }
    }
    verified
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
    };

    fn verification() -> Verification {
        let mut verification = Verification::new("tx", (7, 1), 11);
        verification.push("a", 0);
        verification.push("a", 1);
        verification.push("b", 0);
        verification
    }

    #[test]
    fn each_partition_gets_its_answer_and_a_missing_one_is_retried() {
        let partition = |index, code| {
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(index)
                .with_partition_error_code(code)
        };
        let response = AddPartitionsToTxnResponse::default().with_results_by_transaction(vec![
            AddPartitionsToTxnResult::default().with_topic_results(vec![
                AddPartitionsToTxnTopicResult::default()
                    .with_name(kafka_protocol::messages::TopicName(
                        StrBytes::from_static_str("a"),
                    ))
                    .with_results_by_partition(vec![
                        partition(0, 0),
                        partition(1, ErrorCode::INVALID_TXN_STATE.code()),
                    ]),
            ]),
        ]);
        let verified = outcome(&verification(), Ok(response), 11);
        assert_eq!(verified[&("a".to_owned(), 0)], 0);
        assert_eq!(
            verified[&("a".to_owned(), 1)],
            ErrorCode::INVALID_TXN_STATE.code()
        );
        assert_eq!(
            verified[&("b".to_owned(), 0)],
            ErrorCode::NOT_ENOUGH_REPLICAS.code()
        );
    }

    #[test]
    fn no_answer_or_a_top_level_error_reaches_every_partition() {
        let verified = outcome(&verification(), Err(ErrorCode::NETWORK_EXCEPTION.code()), 9);
        assert!(verified
            .values()
            .all(|code| *code == ErrorCode::NOT_ENOUGH_REPLICAS.code()));
        assert_eq!(verified.len(), 3);
        let fenced = AddPartitionsToTxnResponse::default()
            .with_error_code(ErrorCode::PRODUCER_FENCED.code());
        let verified = outcome(&verification(), Ok(fenced), 9);
        assert!(verified
            .values()
            .all(|code| *code == ErrorCode::INVALID_PRODUCER_EPOCH.code()));
    }
}
