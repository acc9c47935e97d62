//! OffsetsForLeaderEpoch (key 23), v0–v4: for each partition, where the asked leader epoch ended
//! in this leader's log (the leader-epoch cache's `end_offset_for_epoch`, Kafka's `endOffsetFor`):
//! clients after a leader change (KIP-320) and followers that cannot use Fetch's diverging epoch
//! ask it to find where their log diverged.
//!
//! As Kafka's `handleOffsetForLeaderEpochRequest`: a topic needs Describe, or the principal
//! ClusterAction on the cluster (TOPIC_AUTHORIZATION_FAILED otherwise); an unknown topic or
//! partition is UNKNOWN_TOPIC_OR_PARTITION; a partition this broker does not lead is
//! NOT_LEADER_OR_FOLLOWER (followers answer no one: `fetchOnlyFromLeader`); on the leader, from v2,
//! a `current_leader_epoch` (not −1) older than its epoch is FENCED_LEADER_EPOCH, a newer one
//! UNKNOWN_LEADER_EPOCH. (Kafka fences before the leader check on a follower too; here the role
//! carries the epoch only for a leader, so a follower answers NOT_LEADER_OR_FOLLOWER, which the
//! client also retries after a metadata refresh.) Every error answers epoch and offset −1. The v3+
//! `replica_id` changes nothing in the answer (Kafka only reads it to tell followers from
//! consumers).
//!
//! Must never: answer from a log this broker does not lead, or without the leader's current
//! epoch in the cache (it is recorded first, as becoming leader at that epoch records it).

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, RequestHeader,
};
use skiff_storage::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};

use super::common::errors::storage_error_code;
use super::error_code;
use crate::cluster::roles::Role;
use crate::context::Ctx;
use crate::partition::topics::Partition;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

/// `current_leader_epoch` when the asker gives none (v0/v1, or −1).
const NO_CURRENT_LEADER_EPOCH: i32 = -1;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let access = ctx.access(session, header.request_api_key);
    let cluster_action = access.may(
        Operation::ClusterAction,
        ResourceType::Cluster,
        crate::security::acl::model::CLUSTER_NAME,
    );
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.topic.0.as_str();
        let allowed =
            cluster_action || access.allows(Operation::Describe, ResourceType::Topic, name);
        let found = ctx.topics.get(name);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for asked in topic.partitions {
            let answer = EpochEndOffset::default()
                .with_partition(asked.partition)
                .with_leader_epoch(UNDEFINED_EPOCH)
                .with_end_offset(UNDEFINED_EPOCH_OFFSET);
            let outcome = match &found {
                _ if !allowed => Err(error_code::TOPIC_AUTHORIZATION_FAILED),
                None => Err(super::common::leadership::unserved_partition(
                    ctx,
                    name,
                    asked.partition,
                )),
                Some(topic) if !topic.has_partition(asked.partition) => {
                    Err(error_code::UNKNOWN_TOPIC_OR_PARTITION)
                }
                Some(topic) => {
                    let role = ctx.cluster.role(&topic.name, asked.partition);
                    match led(
                        topic.partition(asked.partition),
                        role,
                        asked.current_leader_epoch,
                    ) {
                        Ok((partition, leader_epoch)) => {
                            end_offset(partition, leader_epoch, asked.leader_epoch).await
                        }
                        Err(code) => Err(code),
                    }
                }
            };
            partitions.push(match outcome {
                Ok(found) => answer
                    .with_leader_epoch(found.epoch)
                    .with_end_offset(found.end_offset),
                Err(code) => answer.with_error_code(code),
            });
        }
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions),
        );
    }
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

/// The led partition and its epoch, or the error code: the asker's epoch is checked first
/// (Kafka's `checkCurrentLeaderEpoch`), against the epoch this broker leads at.
fn led(
    partition: Option<&std::sync::Arc<Partition>>,
    role: Role,
    current_leader_epoch: i32,
) -> Result<(&std::sync::Arc<Partition>, i32), i16> {
    let Role::Leader { leader_epoch } = role else {
        return Err(error_code::NOT_LEADER_OR_FOLLOWER);
    };
    fence(leader_epoch, current_leader_epoch)?;
    let partition = partition.ok_or(error_code::NOT_LEADER_OR_FOLLOWER)?;
    Ok((partition, leader_epoch))
}

/// Kafka's epoch fencing of a request's `current_leader_epoch` against the partition's.
pub(crate) fn fence(leader_epoch: i32, current_leader_epoch: i32) -> Result<(), i16> {
    if current_leader_epoch == NO_CURRENT_LEADER_EPOCH {
        Ok(())
    } else if current_leader_epoch < leader_epoch {
        Err(error_code::FENCED_LEADER_EPOCH)
    } else if current_leader_epoch > leader_epoch {
        Err(error_code::UNKNOWN_LEADER_EPOCH)
    } else {
        Ok(())
    }
}

/// The cache's answer for `asked`, once the cache holds `leader_epoch` (recorded at the log end
/// on a blocking thread the first time: its checkpoint fsyncs).
async fn end_offset(
    partition: &std::sync::Arc<Partition>,
    leader_epoch: i32,
    asked: i32,
) -> Result<skiff_storage::EpochEndOffset, i16> {
    let log = partition.log().clone();
    let latest = log
        .latest_epoch()
        .map_err(|error| storage_error_code(&error))?;
    if latest.is_none_or(|latest| latest < leader_epoch) {
        let log = log.clone();
        tokio::task::spawn_blocking(move || log.assign_epoch(leader_epoch))
            .await
            .map_err(|_| error_code::KAFKA_STORAGE_ERROR)?
            .map_err(|error| storage_error_code(&error))?;
    }
    log.end_offset_for_epoch(asked)
        .map_err(|error| storage_error_code(&error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fencing_follows_kafka() {
        assert_eq!(fence(5, -1), Ok(()));
        assert_eq!(fence(5, 5), Ok(()));
        assert_eq!(fence(5, 4), Err(error_code::FENCED_LEADER_EPOCH));
        assert_eq!(fence(5, 6), Err(error_code::UNKNOWN_LEADER_EPOCH));
    }
}
