//! Transactional offset commits over the wire: TxnOffsetCommit at every advertised version leaves
//! the offsets pending (OffsetFetch `require_stable` answers UNSTABLE_OFFSET_COMMIT, a plain
//! fetch the old offset); the transaction's COMMIT marker, appended through the broker's own
//! WriteTxnMarkers to the group's `__consumer_offsets` partition, makes them visible; an ABORT
//! marker drops them; and after a restart the replayed log gives the same answers (a transaction
//! without a marker is still pending). The ACLs are checked in Kafka's order: Write on the
//! TransactionalId, Read on the group, Read on each topic.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::Connection;
use skiff_tests::{advertised, create_topic, topic_name, TestBroker};

const GROUP: &str = "txn-offsets-group";
const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// `offsets.topic.num.partitions`' default.
const OFFSETS_PARTITIONS: i32 = 50;
const UNSTABLE_OFFSET_COMMIT: i16 = 88;
/// KIP-890's check off: the test's producer has no transaction at a coordinator (the markers are
/// this test's own WriteTxnMarkers), so nothing could confirm the offsets partition is in it.
const NO_VERIFICATION: &str = "transaction.partition.verification.enable=false";
/// Errors a client retries while the coordinator starts (load in progress, not available, not
/// the coordinator yet).
const RETRIABLE: [i16; 3] = [14, 15, 16];

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// TxnOffsetCommit of `offset` for partition 0 of `topic`, retried while the coordinator starts;
/// the partition's error.
async fn txn_commit(
    client: &mut Connection,
    version: i16,
    producer: (i64, i16),
    topic: &str,
    offset: i64,
) -> anyhow::Result<i16> {
    let ids = ("txn-offsets-test", GROUP);
    txn_commit_as(client, version, ids, producer, (topic, offset)).await
}

/// [`txn_commit`] for `transactional_id` and `group`.
async fn txn_commit_as(
    client: &mut Connection,
    version: i16,
    (transactional_id, group): (&str, &str),
    (producer_id, producer_epoch): (i64, i16),
    (topic, offset): (&str, i64),
) -> anyhow::Result<i16> {
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s(transactional_id)))
        .with_group_id(GroupId(s(group)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_metadata(Some(s("txn")))])]);
    for _ in 0..200 {
        let response: TxnOffsetCommitResponse = client
            .request(ApiKey::TxnOffsetCommit, version, &request)
            .await?;
        let error = response.topics[0].partitions[0].error_code;
        if !RETRIABLE.contains(&error) {
            return Ok(error);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    anyhow::bail!("TxnOffsetCommit v{version} never got past the coordinator's start")
}

/// OffsetFetch v7 of partition 0 of `topic`: (offset, error).
async fn fetch(client: &mut Connection, topic: &str, stable: bool) -> anyhow::Result<(i64, i16)> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_require_stable(stable)
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(vec![0])]));
    for _ in 0..200 {
        let response: OffsetFetchResponse =
            client.request(ApiKey::OffsetFetch, 7, &request).await?;
        if !RETRIABLE.contains(&response.error_code) {
            anyhow::ensure!(response.error_code == 0, "OffsetFetch: {response:?}");
            let partition = &response.topics[0].partitions[0];
            return Ok((partition.committed_offset, partition.error_code));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    anyhow::bail!("OffsetFetch never got past the coordinator's start")
}

/// The transaction coordinator's marker for `producer_id` (TV2: at the bumped epoch) on the
/// group's offsets partition, through WriteTxnMarkers v1; the partition's error.
async fn marker(
    client: &mut Connection,
    (producer_id, producer_epoch): (i64, i16),
    commit: bool,
) -> anyhow::Result<i16> {
    let partition = skiff_group::coordinator_partition(GROUP, OFFSETS_PARTITIONS);
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_transaction_result(commit)
            .with_coordinator_epoch(0)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(topic_name(OFFSETS_TOPIC))
                .with_partition_indexes(vec![partition])])]);
    let response: WriteTxnMarkersResponse =
        client.request(ApiKey::WriteTxnMarkers, 1, &request).await?;
    Ok(response.markers[0].topics[0].partitions[0].error_code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn txn_offsets_become_visible_at_their_commit_marker_and_survive_a_restart(
) -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let broker = TestBroker::start_in(data.path(), &[NO_VERIFICATION]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    create_topic(&mut client, "txn-in", &[]).await?;
    create_topic(&mut client, "txn-open", &[]).await?;

    // Every advertised version: pending until the COMMIT marker, then visible.
    let mut offset = 100;
    for (index, version) in advertised(&versions, ApiKey::TxnOffsetCommit).enumerate() {
        let producer_id = 7_000 + i64::try_from(index)?;
        offset += 10;
        let before = fetch(&mut client, "txn-in", false).await?.0;
        let error = txn_commit(&mut client, version, (producer_id, 0), "txn-in", offset).await?;
        assert_eq!(error, 0, "TxnOffsetCommit v{version}");
        assert_eq!(
            fetch(&mut client, "txn-in", true).await?,
            (-1, UNSTABLE_OFFSET_COMMIT),
            "v{version}: pending for a require_stable fetch"
        );
        assert_eq!(fetch(&mut client, "txn-in", false).await?, (before, 0));
        assert_eq!(marker(&mut client, (producer_id, 1), true).await?, 0);
        assert_eq!(fetch(&mut client, "txn-in", true).await?, (offset, 0));
    }
    let committed = offset;

    // An aborted transaction's offset never shows.
    let error = txn_commit(&mut client, 3, (8_000, 0), "txn-in", committed + 500).await?;
    assert_eq!(error, 0);
    assert_eq!(marker(&mut client, (8_000, 1), false).await?, 0);
    assert_eq!(fetch(&mut client, "txn-in", true).await?, (committed, 0));

    // A transaction without a marker stays pending, across a restart too.
    let error = txn_commit(&mut client, 3, (9_000, 0), "txn-open", 5).await?;
    assert_eq!(error, 0);
    drop(client);
    broker.stop().await;
    let broker = TestBroker::start_in(data.path(), &[NO_VERIFICATION]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    assert_eq!(fetch(&mut client, "txn-in", true).await?, (committed, 0));
    assert_eq!(
        fetch(&mut client, "txn-open", true).await?,
        (-1, UNSTABLE_OFFSET_COMMIT)
    );
    assert_eq!(marker(&mut client, (9_000, 1), true).await?, 0);
    assert_eq!(fetch(&mut client, "txn-open", true).await?, (5, 0));
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn txn_offset_commit_checks_kafkas_acls_in_order() -> anyhow::Result<()> {
    let directory = tempfile::tempdir()?;
    let acl_path = directory.path().join("acls.txt");
    std::fs::write(
        &acl_path,
        "allow User:ANONYMOUS create cluster\n\
         allow User:ANONYMOUS write transactional-id:tx-ok\n\
         allow User:ANONYMOUS read group:g-ok\n\
         allow User:ANONYMOUS read topic:t-ok\n",
    )?;
    let file = format!("skiff.acl.file={}", acl_path.display());
    let broker = TestBroker::start(&[file.as_str()]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "t-ok", &[]).await?;
    create_topic(&mut client, "t-no", &[]).await?;
    let producer = (1, 0);
    let cases = [
        // TRANSACTIONAL_ID_AUTHORIZATION_FAILED before the group is looked at.
        (("tx-no", "g-no"), "t-ok", 53),
        // GROUP_AUTHORIZATION_FAILED before the topics.
        (("tx-ok", "g-no"), "t-no", 30),
        // TOPIC_AUTHORIZATION_FAILED for the topic.
        (("tx-ok", "g-ok"), "t-no", 29),
        (("tx-ok", "g-ok"), "t-ok", 0),
    ];
    for (ids, topic, code) in cases {
        let error = txn_commit_as(&mut client, 3, ids, producer, (topic, 1)).await?;
        assert_eq!(error, code, "{ids:?} {topic}");
    }
    broker.stop().await;
    Ok(())
}
