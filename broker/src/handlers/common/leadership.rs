//! What this broker serves, in one place: a partition only while it leads it (by its image, with
//! its session provably alive, and by its replica machine at that epoch) and has its log
//! (Produce, Fetch, ListOffsets, DeleteRecords); a
//! group only where `__consumer_offsets` says (the group APIs, through [`group_call`]).
//!
//! Must never: serve a partition on the log alone: a broker that lost its leadership (a stale
//! watch, a lapsed session) still has the log.

use std::sync::Arc;

use kafka_protocol::messages::RequestHeader;

use super::super::error_code;
use crate::cluster::roles::Role;
use crate::context::Ctx;
use crate::group::driver::{GroupReply, GroupRequest};
use crate::partition::topics::{Partition, Topic};

/// Partition `index` of `topic` if this broker leads it, or the error Kafka answers:
/// UNKNOWN_TOPIC_OR_PARTITION for an index the topic lacks, NOT_LEADER_OR_FOLLOWER (retriable:
/// the client refreshes its metadata) when another broker leads it, nobody does, this broker's
/// session may have lapsed, its log is not open here yet, or its replica has not applied the
/// leadership yet.
pub(crate) fn led_partition<'t>(
    ctx: &Ctx,
    topic: &'t Topic,
    index: i32,
) -> Result<&'t Arc<Partition>, i16> {
    led_partition_at(ctx, topic, index).map(|(partition, _)| partition)
}

/// [`led_partition`] with the leader epoch it is led at: Produce stamps it on every batch.
pub(crate) fn led_partition_at<'t>(
    ctx: &Ctx,
    topic: &'t Topic,
    index: i32,
) -> Result<(&'t Arc<Partition>, i32), i16> {
    if !topic.has_partition(index) {
        return Err(error_code::UNKNOWN_TOPIC_OR_PARTITION);
    }
    match ctx.cluster.role(&topic.name, index) {
        // The replica must lead at that epoch too: the image can name this broker leader before
        // its machine has applied that state, and until then the machine is still a follower,
        // whose HW and lack of an epoch start would answer a consumer as a leader must not
        // (KIP-207: a ListOffsets right after a failover got the follower's HW, below what the
        // old leader had answered). A Kafka broker serves nothing before it applied the
        // leadership. (An atomic read, not the machine's lock: every fetched and produced
        // partition comes here; Produce's own admission then checks the role.)
        Role::Leader { leader_epoch } => topic
            .partition(index)
            .filter(|partition| partition.led_epoch() == Some(leader_epoch))
            .map(|partition| (partition, leader_epoch))
            .ok_or(error_code::NOT_LEADER_OR_FOLLOWER),
        Role::NotLeader | Role::Unknown => Err(error_code::NOT_LEADER_OR_FOLLOWER),
    }
}

/// The error for partition `index` of a topic this broker does not serve, by Kafka's rule
/// (`ReplicaManager.getPartitionOrException`): NOT_LEADER_OR_FOLLOWER when the metadata names
/// the partition (it lives elsewhere, or this broker's logs have not followed the image yet), so
/// the client refreshes and retries; UNKNOWN_TOPIC_OR_PARTITION otherwise.
pub(crate) fn unserved_partition(ctx: &Ctx, topic: &str, index: i32) -> i16 {
    if ctx.cluster.knows_partition(topic, index) {
        error_code::NOT_LEADER_OR_FOLLOWER
    } else {
        error_code::UNKNOWN_TOPIC_OR_PARTITION
    }
}

/// Hands a group request to the coordinator task, which answers NOT_COORDINATOR for groups whose
/// offsets partition another broker leads. While `__consumer_offsets` does not exist (a client
/// that skipped FindCoordinator, or an admin tool), it is created first, as FindCoordinator would:
/// otherwise no broker coordinates anything.
pub(crate) async fn group_call(
    ctx: &Ctx,
    header: &RequestHeader,
    request: GroupRequest,
) -> Option<GroupReply> {
    if !ctx.cluster.has_offsets_topic() {
        if let Err(error) = ctx.topic_creation().ensure_offsets_topic().await {
            tracing::warn!(%error, "creating __consumer_offsets for a group request");
        }
    }
    ctx.groups.call(header, request).await
}
