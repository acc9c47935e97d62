//! TxnOffsetCommit, v0–v5 (a transactional producer's `sendOffsetsToTransaction`): Write on the
//! TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), then Read on
//! the group (else GROUP_AUTHORIZATION_FAILED), then Read on each topic (else
//! TOPIC_AUTHORIZATION_FAILED for its partitions), in Kafka's order. The authorized topics go to
//! the group coordinator task, which checks the group (KIP-447's fencing from v3), keeps the
//! offsets pending for the producer, and answers once their transactional records are durable
//! in the group's `__consumer_offsets` partition; the producer's marker there later makes them
//! visible (COMMIT) or drops them (ABORT).
//!
//! Not done yet: KIP-890's check that the producer's transaction holds the group's offsets
//! partition (v0–v4: verify with AddPartitionsToTxn v4; v5: add it with v5), which waits for the
//! transaction-verification client (`txn_verify`); until then the commit is trusted to belong to
//! the producer's ongoing transaction, as Kafka before 3.6 trusted it.
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
use crate::group::driver::{GroupReply, GroupRequest};
use crate::group::Response;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

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
