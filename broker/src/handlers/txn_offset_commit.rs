//! TxnOffsetCommit, v0–v5 (a transactional producer's `sendOffsetsToTransaction`): Write on the
//! TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), then Read on
//! the group (else GROUP_AUTHORIZATION_FAILED), then Read on each topic (else
//! TOPIC_AUTHORIZATION_FAILED for its partitions), in Kafka's order. The authorized topics go to
//! the group coordinator task, which checks the group (KIP-447's fencing from v3), keeps the
//! offsets pending for the producer, and answers once their transactional records are durable
//! in the group's `__consumer_offsets` partition; the producer's marker there later makes them
//! visible (COMMIT) or drops them (ABORT).
//!
//! KIP-890: before the coordinator task sees the commit, the transactional id's coordinator
//! confirms the group's offsets partition is in the producer's transaction (v0–v4:
//! AddPartitionsToTxn v4, verify only) or adds it (v5, transaction version 2, whose clients send no
//! AddOffsetsToTxn), unless the producer already has a transaction open there at that epoch;
//! `transaction.partition.verification.enable=false` skips the check as it does for Produce.
//!
//! Must never: acknowledge a commit itself (only the coordinator's reply does, after the flush
//! and replication).

use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{RequestHeader, TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::error_code;
use crate::context::Ctx;
use crate::group::driver::OFFSETS_TOPIC;
use crate::group::driver::{GroupReply, GroupRequest};
use crate::group::Response;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;
use crate::txn_verify;
use crate::txn_verify::client::VERIFY_TIMEOUT_MAX;
use crate::txn_verify::plan::{
    produce_version_of_txn_offset_commit, txn_offset_commit_error, Verification,
};

/// Every partition of `topics`, answered with `code`.
fn answer(topics: &[TxnOffsetCommitRequestTopic], code: i16) -> Vec<TxnOffsetCommitResponseTopic> {
    topics
        .iter()
        .map(|topic| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|partition| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(partition.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    mut request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let access = ctx.access(session, header.request_api_key);
    let refused_with =
        |code| TxnOffsetCommitResponse::default().with_topics(answer(&request.topics, code));
    if !access.allows(
        Operation::Write,
        ResourceType::TransactionalId,
        request.transactional_id.as_str(),
    ) {
        return refused_with(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    }
    if !access.allows(
        Operation::Read,
        ResourceType::Group,
        request.group_id.as_str(),
    ) {
        return refused_with(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|topic| {
            access.allows(Operation::Read, ResourceType::Topic, topic.name.as_str())
        });
    let refused = answer(&refused, error_code::TOPIC_AUTHORIZATION_FAILED);
    if allowed.is_empty() && !refused.is_empty() {
        return TxnOffsetCommitResponse::default().with_topics(refused);
    }
    // KIP-890, for the authorized topics only (Kafka checks the ACLs first).
    let verified = verify_offsets_partition(ctx, header.request_api_version, &request).await;
    if verified != error_code::NONE {
        let mut topics = answer(&allowed, verified);
        topics.extend(refused);
        return TxnOffsetCommitResponse::default().with_topics(topics);
    }
    // Kept for the fallback, which must name every partition (no top-level error code).
    let asked = answer(&allowed, error_code::COORDINATOR_NOT_AVAILABLE);
    request.topics = allowed;
    let mut response = match super::common::leadership::group_call(
        ctx,
        header,
        GroupRequest::TxnOffsetCommit(request),
    )
    .await
    {
        Some(GroupReply::Group(Response::TxnOffsetCommit(response))) => response,
        _ => TxnOffsetCommitResponse::default().with_topics(asked),
    };
    response.topics.extend(refused);
    response
}

/// KIP-890 for the group's `__consumer_offsets` partition: 0 once the transactional id's
/// coordinator confirmed (or, from v5, added) it in the producer's transaction, or when there is
/// nothing to ask (verification off; the offsets topic not there yet, which the coordinator task
/// answers; the producer's transaction already open there at this epoch); else the error every
/// partition of the commit gets.
async fn verify_offsets_partition(
    ctx: &Ctx,
    version: i16,
    request: &TxnOffsetCommitRequest,
) -> i16 {
    if !ctx.config.transaction_partition_verification_enable {
        return error_code::NONE;
    }
    let (partitions, _) = ctx.cluster.led_partitions(OFFSETS_TOPIC);
    if partitions <= 0 {
        return error_code::NONE;
    }
    let partition = skiff_group::coordinator_partition(request.group_id.as_str(), partitions);
    let producer = (request.producer_id.0, request.producer_epoch);
    let produce_version = produce_version_of_txn_offset_commit(version);
    let mut verification =
        Verification::new(request.transactional_id.as_str(), producer, produce_version);
    let open = ctx.topics.get(OFFSETS_TOPIC).and_then(|topic| {
        topic
            .partition(partition)
            .and_then(|led| led.open_transaction(producer.0))
    });
    if !verification.needs(open) {
        return error_code::NONE;
    }
    verification.push(OFFSETS_TOPIC, partition);
    let verified =
        txn_verify::client::verify(ctx, &verification, produce_version, VERIFY_TIMEOUT_MAX).await;
    verified
        .values()
        .copied()
        .find(|code| *code != error_code::NONE)
        .map_or(error_code::NONE, txn_offset_commit_error)
}
