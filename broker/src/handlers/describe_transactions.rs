//! DescribeTransactions (KIP-664): the state of each transactional id coordinated here, handed to
//! the transaction coordinator's task.
//!
//! Authorization as Kafka: Describe on each transactional id
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for that id).
//!
//! Must never: describe an id the client may not see.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, RequestHeader,
    TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use skiff_txn::{Response, TxnDescription};

use super::common::txn::call;
use super::error_code;
use crate::context::Ctx;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;
use crate::txn::driver::TxnRequest;

fn error_state(id: &str, code: i16) -> TransactionState {
    TransactionState::default()
        .with_error_code(code)
        .with_transactional_id(TransactionalId(StrBytes::from_string(id.to_owned())))
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

fn described(description: TxnDescription) -> TransactionState {
    let Some(meta) = description.metadata else {
        return error_state(&description.transactional_id, description.error.code());
    };
    let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in &meta.partitions {
        topics
            .entry(tp.topic.clone())
            .or_default()
            .push(tp.partition);
    }
    TransactionState::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            description.transactional_id,
        )))
        .with_transaction_state(StrBytes::from_string(description.state))
        .with_transaction_timeout_ms(meta.timeout_ms)
        .with_transaction_start_time_ms(meta.start_ms)
        .with_producer_id(ProducerId(meta.producer_id))
        .with_producer_epoch(meta.producer_epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    TopicData::default()
                        .with_topic(TopicName(StrBytes::from_string(topic)))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let access = ctx.access(session, header.request_api_key);
    let ids: Vec<String> = request
        .transactional_ids
        .iter()
        .map(|id| id.to_string())
        .collect();
    let allowed: Vec<String> = ids
        .iter()
        .filter(|id| access.allows(Operation::Describe, ResourceType::TransactionalId, id))
        .cloned()
        .collect();
    let mut answers: BTreeMap<String, TransactionState> = BTreeMap::new();
    if !allowed.is_empty() {
        let asked = TxnRequest::Describe(allowed.clone());
        match call(ctx, header.request_api_version, asked).await {
            Some(Response::DescribeTransactions(descriptions)) => {
                for description in descriptions {
                    answers.insert(description.transactional_id.clone(), described(description));
                }
            }
            _ => {
                for id in &allowed {
                    let code = error_code::COORDINATOR_NOT_AVAILABLE;
                    answers.insert(id.clone(), error_state(id, code));
                }
            }
        }
    }
    let states = ids
        .iter()
        .map(|id| {
            answers.get(id).cloned().unwrap_or_else(|| {
                error_state(id, error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            })
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
