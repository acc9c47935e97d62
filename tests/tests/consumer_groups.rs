//! KIP-848 consumer groups over the wire: ConsumerGroupHeartbeat and ConsumerGroupDescribe at every
//! advertised version, a group following its topics (partitions added, a topic created that a
//! pattern matches) at the members' next heartbeats, the assigned topic's name from Metadata v12
//! by its id (and v10-11 refusing ids), and OffsetCommit / OffsetFetch v9 checked by member id and epoch. Real clients (Kafka's Java client, librdkafka) are in
//! `tests/clients/test_consumer_protocol.py`.

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use skiff_bench::client::Connection;
use skiff_protocol::requests::ConsumerGroupHeartbeatRequest;
use skiff_tests::{advertised, create_topic, topic_name, TestBroker};

const STALE_MEMBER_EPOCH: i16 = 113;
const UNSUPPORTED_VERSION: i16 = 35;
const GROUP_ID_NOT_FOUND: i16 = 69;
const UNKNOWN_TOPIC_ID: i16 = 100;
const INVALID_REQUEST: i16 = 42;

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// A first heartbeat: epoch 0, subscribed to `topics` (or to `regex`, v1), owning nothing.
fn join(
    group: &str,
    member_id: &str,
    topics: &[&str],
    regex: Option<&str>,
) -> ConsumerGroupHeartbeatRequest {
    let mut request = ConsumerGroupHeartbeatRequest::default();
    request.base = request
        .base
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member_id))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics.iter().map(|name| topic_name(name)).collect()))
        .with_topic_partitions(Some(Vec::new()));
    request.subscribed_topic_regex = regex.map(text);
    request
}

/// A later heartbeat at `epoch`, nothing changed but the partitions owned.
fn beat(
    group: &str,
    member_id: &str,
    epoch: i32,
    owned: &ConsumerGroupHeartbeatResponse,
) -> ConsumerGroupHeartbeatRequest {
    use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
    let owned = owned
        .assignment
        .iter()
        .flat_map(|assignment| &assignment.topic_partitions)
        .map(|topic| {
            TopicPartitions::default()
                .with_topic_id(topic.topic_id)
                .with_partitions(topic.partitions.clone())
        })
        .collect();
    let mut request = ConsumerGroupHeartbeatRequest::default();
    request.base = request
        .base
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member_id))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
        .with_topic_partitions(Some(owned));
    request
}

/// A broker started with `settings`, a client, topic `topic` and member `member` of `group`
/// joined to it through ConsumerGroupHeartbeat v1.
async fn broker_with_member(
    settings: &[&str],
    topic: &str,
    group: &str,
    member: &str,
) -> anyhow::Result<(TestBroker, Connection, ConsumerGroupHeartbeatResponse)> {
    let broker = TestBroker::start(settings).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, topic, &[]).await?;
    let joined = heartbeat(&mut client, 1, &join(group, member, &[topic], None)).await?;
    anyhow::ensure!(joined.error_code == 0, "joining: {joined:?}");
    Ok((broker, client, joined))
}

/// Sends a heartbeat at `version`. Its response's bytes are v0's at both versions, which is all
/// kafka-protocol 0.15.1 decodes.
async fn heartbeat(
    client: &mut Connection,
    version: i16,
    request: &ConsumerGroupHeartbeatRequest,
) -> anyhow::Result<ConsumerGroupHeartbeatResponse> {
    client
        .send(ApiKey::ConsumerGroupHeartbeat, version, request)
        .await?;
    let mut frame: Bytes = client.receive_frame().await?;
    // Correlation id and the (empty) tagged fields of response header v1.
    let _ = frame.split_to(5);
    ConsumerGroupHeartbeatResponse::decode(&mut frame, 0)
}

/// ConsumerGroupDescribe of `group` at `version` (its response bytes are v0's at both versions).
async fn describe(
    client: &mut Connection,
    version: i16,
    group: &str,
) -> anyhow::Result<ConsumerGroupDescribeResponse> {
    let request =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]);
    client
        .send(ApiKey::ConsumerGroupDescribe, version, &request)
        .await?;
    let mut frame: Bytes = client.receive_frame().await?;
    let _ = frame.split_to(5);
    ConsumerGroupDescribeResponse::decode(&mut frame, 0)
}

/// The partitions assigned, sorted.
fn partitions(response: &ConsumerGroupHeartbeatResponse) -> Vec<i32> {
    let mut out: Vec<i32> = response
        .assignment
        .iter()
        .flat_map(|assignment| &assignment.topic_partitions)
        .flat_map(|topic| topic.partitions.iter().copied())
        .collect();
    out.sort_unstable();
    out
}

/// Heartbeats until the member's assignment is `wanted` (a member moves to a new target one step
/// per heartbeat); returns the last response.
/// Heartbeats `beat_until` sends back to back before pausing between them, how long it pauses,
/// and how many it sends in all (15 s of pauses: past the coordinator's 10 s pattern refresh).
const BEATS_AT_ONCE: usize = 10;
const BEAT_PAUSE: std::time::Duration = std::time::Duration::from_millis(250);
const BEATS_MAX: usize = BEATS_AT_ONCE + 60;

async fn beat_until(
    client: &mut Connection,
    group: &str,
    mut last: ConsumerGroupHeartbeatResponse,
    wanted: &[i32],
) -> anyhow::Result<ConsumerGroupHeartbeatResponse> {
    let member_id = last.member_id.clone().unwrap_or_default().to_string();
    let mut owned = last.clone();
    // A pattern's new topic waits for the coordinator's next refresh, at most 10 s after its
    // last one (Kafka's batch interval): the member keeps heartbeating, as a client would.
    for attempt in 0..BEATS_MAX {
        if attempt >= BEATS_AT_ONCE {
            tokio::time::sleep(BEAT_PAUSE).await;
        }
        let response = heartbeat(
            client,
            1,
            &beat(group, &member_id, last.member_epoch, &owned),
        )
        .await?;
        anyhow::ensure!(response.error_code == 0, "heartbeat: {response:?}");
        if response.assignment.is_some() {
            owned = response.clone();
        }
        last = response;
        if partitions(&owned) == wanted {
            return Ok(owned.with_member_epoch(last.member_epoch));
        }
    }
    anyhow::bail!("assignment {:?}, wanted {wanted:?}", partitions(&owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_version_of_the_consumer_group_apis_answers() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await?;
    create_topic(&mut client, "cg", &[]).await?;
    for version in advertised(&versions, ApiKey::ConsumerGroupHeartbeat) {
        let group = format!("cg-v{version}");
        // v0: the coordinator makes the member id; from v1 the client does (KIP-1082).
        let member_id = if version == 0 { "" } else { "member-v1" };
        let response = heartbeat(
            &mut client,
            version,
            &join(&group, member_id, &["cg"], None),
        )
        .await?;
        assert_eq!(response.error_code, 0, "v{version}: {response:?}");
        assert_eq!(response.member_epoch, 1, "v{version}");
        assert!(!response.member_id.as_deref().unwrap_or_default().is_empty());
        assert_eq!(partitions(&response), vec![0], "v{version}");
    }
    for version in advertised(&versions, ApiKey::ConsumerGroupDescribe) {
        // v1 adds each member's type; with no member (an unknown group) the bytes are v0's,
        // which kafka-protocol decodes (the member type's bytes are checked against Kafka 4.1.1's
        // in the protocol crate, and Kafka's Admin client reads them in the real-client tests).
        let (group, code) = if version == 0 {
            ("cg-v0", 0)
        } else {
            ("cg-unknown", GROUP_ID_NOT_FOUND)
        };
        let response = describe(&mut client, version, group).await?;
        let described = &response.groups[0];
        assert_eq!(described.error_code, code, "v{version}: {described:?}");
        if code == 0 {
            assert_eq!(described.group_state.as_str(), "Stable");
            assert_eq!(described.members.len(), 1);
            assert_eq!(
                described.members[0].assignment.topic_partitions[0].partitions,
                vec![0]
            );
        }
    }
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_follows_partitions_added_and_topics_its_pattern_matches() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "grow", &[]).await?;
    let first = heartbeat(&mut client, 1, &join("g-grow", "m-grow", &["grow"], None)).await?;
    assert_eq!((first.error_code, partitions(&first)), (0, vec![0]));
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name("grow"))
            .with_count(3)
            .with_assignments(None)]);
    let created: CreatePartitionsResponse = client
        .request(ApiKey::CreatePartitions, 3, &request)
        .await?;
    assert_eq!(created.results[0].error_code, 0);
    let grown = beat_until(&mut client, "g-grow", first.clone(), &[0, 1, 2]).await?;
    assert!(
        grown.member_epoch > first.member_epoch,
        "a new epoch for the new target"
    );

    // A pattern that matches nothing yet: the member joins owning nothing.
    let joined = heartbeat(&mut client, 1, &join("g-rx", "m-rx", &[], Some("later-.*"))).await?;
    assert_eq!((joined.error_code, partitions(&joined)), (0, vec![]));
    create_topic(&mut client, "later-1", &[]).await?;
    let matched = beat_until(&mut client, "g-rx", joined, &[0]).await?;
    // The assignment names the topic by id only; Kafka's consumer asks Metadata v12 for its name.
    let topic_id = matched
        .assignment
        .as_ref()
        .expect("assignment")
        .topic_partitions[0]
        .topic_id;
    let unknown = uuid::Uuid::from_bytes([7; 16]);
    let by_id = MetadataRequest::default().with_topics(Some(
        [topic_id, unknown]
            .into_iter()
            .map(|id| {
                MetadataRequestTopic::default()
                    .with_topic_id(id)
                    .with_name(None)
            })
            .collect(),
    ));
    let metadata: MetadataResponse = client.request(ApiKey::Metadata, 12, &by_id).await?;
    let found: Vec<(i16, Option<String>, uuid::Uuid)> = metadata
        .topics
        .iter()
        .map(|topic| {
            (
                topic.error_code,
                topic.name.as_ref().map(|name| name.0.to_string()),
                topic.topic_id,
            )
        })
        .collect();
    assert_eq!(
        found,
        vec![
            (0, Some("later-1".to_owned()), topic_id),
            (UNKNOWN_TOPIC_ID, None, unknown)
        ]
    );
    // Before v12 a topic named by id (or by no name) is INVALID_REQUEST, as Kafka 4.1.1 answers.
    for version in [10, 11] {
        let refused: MetadataResponse = client.request(ApiKey::Metadata, version, &by_id).await?;
        let codes: Vec<(i16, uuid::Uuid)> = refused
            .topics
            .iter()
            .map(|topic| (topic.error_code, topic.topic_id))
            .collect();
        assert_eq!(
            codes,
            vec![(INVALID_REQUEST, topic_id), (INVALID_REQUEST, unknown)],
            "v{version}"
        );
        assert!(refused.brokers.is_empty(), "v{version}");
    }
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_commit_and_fetch_v9_check_the_member_epoch() -> anyhow::Result<()> {
    let (broker, mut client, joined) =
        broker_with_member(&[], "epochs", "g-epochs", "m-epochs").await?;
    let commit = |version: i16, epoch: i32, offset: i64| {
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text("g-epochs")))
            .with_member_id(text("m-epochs"))
            .with_generation_id_or_member_epoch(epoch)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name("epochs"))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset)])]);
        (version, request)
    };
    for ((version, request), expected) in [
        (commit(9, joined.member_epoch, 7), 0),
        (commit(9, joined.member_epoch - 1, 8), STALE_MEMBER_EPOCH),
        // A consumer group member must commit with v9 or later (Kafka 4.1.1's
        // `ConsumerGroup.validateOffsetCommit`).
        (commit(8, joined.member_epoch, 9), UNSUPPORTED_VERSION),
    ] {
        let response: OffsetCommitResponse = client
            .request(ApiKey::OffsetCommit, version, &request)
            .await?;
        let code = response.topics[0].partitions[0].error_code;
        assert_eq!(
            code, expected,
            "OffsetCommit v{version} epoch {}",
            request.generation_id_or_member_epoch
        );
    }
    let fetch = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(text("g-epochs")))
        .with_member_id(Some(text("m-epochs")))
        .with_member_epoch(joined.member_epoch)
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(topic_name("epochs"))
            .with_partition_indexes(vec![0])]))]);
    let fetched: OffsetFetchResponse = client.request(ApiKey::OffsetFetch, 9, &fetch).await?;
    let group = &fetched.groups[0];
    assert_eq!(group.error_code, 0, "{group:?}");
    assert_eq!(group.topics[0].partitions[0].committed_offset, 7);
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_consumer_assignors_decides_the_default_and_what_members_may_ask_for(
) -> anyhow::Result<()> {
    const UNSUPPORTED_ASSIGNOR: i16 = 112;
    let (broker, mut client, _joined) = broker_with_member(
        &["group.consumer.assignors=range"],
        "assigned",
        "g-range",
        "m-range",
    )
    .await?;
    let mut uniform = join("g-range", "m-uniform", &["assigned"], None);
    uniform.base.server_assignor = Some(text("uniform"));
    let refused = heartbeat(&mut client, 1, &uniform).await?;
    assert_eq!(refused.error_code, UNSUPPORTED_ASSIGNOR);
    assert_eq!(
        refused
            .error_message
            .as_deref()
            .map(|message| message.to_string()),
        Some("ServerAssignor uniform is not supported. Supported assignors: range.".to_owned())
    );
    let described = describe(&mut client, 0, "g-range").await?;
    assert_eq!(described.groups[0].assignor_name.as_str(), "range");
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_groups_deletes_an_empty_consumer_group_with_its_offsets() -> anyhow::Result<()> {
    const NON_EMPTY_GROUP: i16 = 68;
    let (broker, mut client, joined) = broker_with_member(&[], "deleted", "g-del", "m-del").await?;
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(text("g-del")))
        .with_member_id(text("m-del"))
        .with_generation_id_or_member_epoch(joined.member_epoch)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name("deleted"))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(3)])]);
    let committed: OffsetCommitResponse = client.request(ApiKey::OffsetCommit, 9, &commit).await?;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text("g-del"))]);
    let refused: DeleteGroupsResponse = client.request(ApiKey::DeleteGroups, 2, &delete).await?;
    assert_eq!(refused.results[0].error_code, NON_EMPTY_GROUP);
    let mut leave = beat("g-del", "m-del", -1, &joined);
    leave.base.topic_partitions = None;
    assert_eq!(heartbeat(&mut client, 1, &leave).await?.error_code, 0);
    let deleted: DeleteGroupsResponse = client.request(ApiKey::DeleteGroups, 2, &delete).await?;
    assert_eq!(deleted.results[0].error_code, 0);
    // Gone with its offsets: describe does not find it, and the offset is no more.
    let described = describe(&mut client, 0, "g-del").await?;
    assert_eq!(described.groups[0].error_code, GROUP_ID_NOT_FOUND);
    let fetch = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(text("g-del")))
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(topic_name("deleted"))
            .with_partition_indexes(vec![0])]))]);
    let fetched: OffsetFetchResponse = client.request(ApiKey::OffsetFetch, 9, &fetch).await?;
    assert_eq!(
        fetched.groups[0].topics[0].partitions[0].committed_offset,
        -1
    );
    broker.stop().await;
    Ok(())
}
