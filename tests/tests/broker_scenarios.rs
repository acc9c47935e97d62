//! Broker behaviours no real client exercises on purpose: shutdown while fetches long-poll,
//! `message.downconversion.enable=false`, retention by the background task, long polls woken by
//! appends, the record traffic counters, a long poll's wait left out of the Fetch service time.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;
use skiff_bench::client::{fetch_request, Connection};
use skiff_protocol::records::Compression;
use skiff_tests::{batch, create_topic, fetch, produce_records, topic_name, TestBroker};

fn name(text: &str) -> TopicName {
    topic_name(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_completes_while_fetches_long_poll() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "quiet", &[]).await?;
    let address = broker.bootstrap();
    let poller = tokio::spawn(async move {
        let mut connection = Connection::connect(&address).await?;
        // 30 s of long polling on an empty partition.
        let request = fetch_request("quiet", 0, 0, 1 << 20, 1 << 20, 30_000);
        fetch(&mut connection, 11, &request).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The shutdown must wake the poll rather than wait out its 30 s (or the 10 s drain timeout).
    tokio::time::timeout(Duration::from_secs(5), broker.stop())
        .await
        .map_err(|_| anyhow::anyhow!("shutdown waited for the long poll"))?;
    let response = poller.await??;
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_is_woken_by_an_append() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "wake", &[]).await?;
    let address = broker.bootstrap();
    let poller = tokio::spawn(async move {
        let mut connection = Connection::connect(&address).await?;
        let request = fetch_request("wake", 0, 0, 1 << 20, 1 << 20, 20_000);
        fetch(&mut connection, 4, &request).await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    client
        .produce("wake", 0, Bytes::from(batch(0, 5, 10, Compression::None)))
        .await?;
    let response = tokio::time::timeout(Duration::from_secs(10), poller)
        .await
        .map_err(|_| anyhow::anyhow!("the append did not wake the long poll"))???;
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.high_watermark, 5);
    assert!(partition
        .records
        .as_ref()
        .is_some_and(|records| !records.is_empty()));
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downconversion_disabled_refuses_legacy_consumers_only() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(
        &mut client,
        "modern-only",
        &[("message.downconversion.enable", "false")],
    )
    .await?;
    client
        .produce(
            "modern-only",
            0,
            Bytes::from(batch(0, 5, 10, Compression::None)),
        )
        .await?;
    let request = fetch_request("modern-only", 0, 0, 1 << 20, 1 << 20, 0);
    for version in 0..=3 {
        let response = fetch(&mut client, version, &request).await?;
        let partition = &response.responses[0].partitions[0];
        assert_eq!(partition.error_code, 35, "Fetch v{version}");
        assert!(partition
            .records
            .as_ref()
            .is_none_or(|records| records.is_empty()));
    }
    let response = fetch(&mut client, 4, &request).await?;
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_old_segments_in_the_background() -> anyhow::Result<()> {
    let broker = TestBroker::start(&["log.retention.check.interval.ms=100"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(
        &mut client,
        "short-lived",
        &[("retention.bytes", "4096"), ("segment.bytes", "4096")],
    )
    .await?;
    produce_records(&mut client, "short-lived", 400, 20, 100).await?;
    let earliest = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("short-lived"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-2)])]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let response: ListOffsetsResponse =
            client.request(ApiKey::ListOffsets, 1, &earliest).await?;
        let log_start = response.topics[0].partitions[0].offset;
        if log_start > 0 {
            // Everything before the log start is gone; a fetch there is out of range.
            let request = fetch_request("short-lived", 0, 0, 1 << 20, 1 << 20, 0);
            let response = fetch(&mut client, 4, &request).await?;
            assert_eq!(response.responses[0].partitions[0].error_code, 1);
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "retention never ran"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zstd_topics_refuse_fetches_below_v10() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "zstd-topic", &[("compression.type", "zstd")]).await?;
    client
        .produce(
            "zstd-topic",
            0,
            Bytes::from(batch(0, 5, 10, Compression::None)),
        )
        .await?;
    let request = fetch_request("zstd-topic", 0, 0, 1 << 20, 1 << 20, 0);
    for version in [0, 3, 4, 9] {
        let response = fetch(&mut client, version, &request).await?;
        assert_eq!(
            response.responses[0].partitions[0].error_code, 76,
            "Fetch v{version}"
        );
    }
    let response = fetch(&mut client, 10, &request).await?;
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert!(partition
        .records
        .as_ref()
        .is_some_and(|records| !records.is_empty()));
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converted_responses_count_in_the_bytes_out_figure() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "counted", &[]).await?;
    produce_records(&mut client, "counted", 512, 16, 1024).await?;
    let request = fetch_request("counted", 0, 0, 1 << 20, 1 << 20, 0);
    // Fetch v1 is converted to magic 0; Fetch v4 sends the stored batches.
    for version in [1, 4] {
        let before = broker.metrics.bytes_out_total();
        client.send(ApiKey::Fetch, version, &request).await?;
        let size = client.read_size().await?;
        client.read_body(size).await?;
        let counted = broker.metrics.bytes_out_total() - before;
        assert!(size > 256 * 1024, "Fetch v{version}: {size} bytes");
        let size = u64::try_from(size)?;
        assert!(
            (size..=size + 4).contains(&counted),
            "Fetch v{version}: {counted} bytes counted for a {size}-byte response"
        );
    }
    broker.stop().await;
    Ok(())
}

/// The broker's traffic totals once a load sample (every 5 s) has added up the partitions'
/// counters and they reach `done`; at most 15 s.
async fn traffic_totals_when(
    broker: &TestBroker,
    done: impl Fn(&skiff_cluster::traffic::TrafficCounts) -> bool,
) -> anyhow::Result<skiff_cluster::traffic::TrafficCounts> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let totals = broker.metrics.traffic_totals();
        if done(&totals) {
            return Ok(totals);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "traffic totals stuck at {totals:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of the Prometheus sample `series` (its name and labels, exactly as rendered), or
/// `None` when the broker has not rendered it.
fn sample(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_wait_is_left_out_of_the_fetch_service_time() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "waited", &[]).await?;
    // An empty partition: the Fetch waits its whole max_wait_ms of 500 ms for data.
    let request = fetch_request("waited", 0, 0, 1 << 20, 1 << 20, 500);
    let asked = tokio::time::Instant::now();
    fetch(&mut client, 11, &request).await?;
    assert!(asked.elapsed() >= Duration::from_millis(500));
    // The service time is recorded once the response is written, which may be just after the
    // client has read it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let text = loop {
        let text = broker.metrics.render_prometheus();
        if sample(&text, r#"skiff_request_service_time_us_count{api="Fetch"}"#) == Some(1) {
            break text;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "no Fetch service time:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // It waited 500 ms (the latency, waits included, says so) ...
    let latency_below_500 = r#"skiff_request_latency_ms_bucket{api="Fetch",le="250"}"#;
    assert_eq!(sample(&text, latency_below_500), Some(0), "{text}");
    // ... and its service time, the wait left out, is in a sub-millisecond bucket.
    let service_sub_ms = r#"skiff_request_service_time_us_bucket{api="Fetch",le="1000"}"#;
    assert_eq!(sample(&text, service_sub_ms), Some(1), "{text}");
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_traffic_counts_what_produce_stores_and_fetch_sends() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "traffic", &[]).await?;
    let mut stored = 0u64;
    for first in (0..64).step_by(16) {
        let records = batch(first, 16, 100, Compression::None);
        stored += u64::try_from(records.len())?;
        client.produce("traffic", 0, Bytes::from(records)).await?;
    }
    // Fetch v4 sends the stored batches: the records it carries are counted, nothing else.
    let request = fetch_request("traffic", 0, 0, 1 << 20, 1 << 20, 0);
    let response = fetch(&mut client, 4, &request).await?;
    let carried = response.responses[0].partitions[0]
        .records
        .as_ref()
        .map_or(0, |records| records.len());
    assert_eq!(u64::try_from(carried)?, stored);
    // Fetch v1 down-converts to magic 0 (byte 16 of a message): counted at the size the
    // converted set declares, which is what the response carries.
    let response = fetch(&mut client, 1, &request).await?;
    let converted = response.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default();
    assert_eq!(converted.get(16), Some(&0), "not converted to magic 0");
    let sent = stored + u64::try_from(converted.len())?;
    let totals =
        traffic_totals_when(&broker, |t| t.bytes_in >= stored && t.bytes_out >= sent).await?;
    assert_eq!(totals.bytes_in, stored);
    assert_eq!(totals.messages_in, 64);
    assert_eq!(totals.replication_bytes_in, 0);
    assert_eq!(totals.bytes_out, sent);
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_conversion_releases_what_it_held() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "abandoned", &[]).await?;
    produce_records(&mut client, "abandoned", 4096, 64, 1024).await?;
    for _ in 0..5 {
        let mut leaver = Connection::connect(&broker.bootstrap()).await?;
        let request = fetch_request("abandoned", 0, 0, 64 << 20, 64 << 20, 0);
        leaver.send(ApiKey::Fetch, 1, &request).await?;
        let size = leaver.read_size().await?;
        assert!(size > 4 << 20, "a large converted response ({size} bytes)");
        drop(leaver);
    }
    // The broker notices the closed sockets on its next write; then nothing stays held.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while broker.metrics.converted_bytes_in_flight() != 0 {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "converted bytes still held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // And the broker still serves.
    let response = fetch(
        &mut client,
        1,
        &fetch_request("abandoned", 0, 4000, 1 << 20, 1 << 20, 0),
    )
    .await?;
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_by_time_and_max_timestamp() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "timed", &[]).await?;
    produce_records(&mut client, "timed", 30, 10, 10).await?;
    let lookup = |timestamp: i64| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name("timed"))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(timestamp)])])
    };
    // Every test batch carries the same timestamp: the first batch holds the maximum.
    let response: ListOffsetsResponse = client.request(ApiKey::ListOffsets, 7, &lookup(-3)).await?;
    let partition = &response.topics[0].partitions[0];
    assert_eq!((partition.error_code, partition.offset), (0, 0));
    assert_eq!(partition.timestamp, 1_700_000_000_000);
    let response: ListOffsetsResponse = client
        .request(ApiKey::ListOffsets, 7, &lookup(1_800_000_000_000))
        .await?;
    assert_eq!(
        response.topics[0].partitions[0].offset, -1,
        "nothing that new"
    );
    let response: ListOffsetsResponse = client
        .request(ApiKey::ListOffsets, 1, &lookup(1_600_000_000_000))
        .await?;
    assert_eq!(response.topics[0].partitions[0].offset, 0);
    broker.stop().await;
    Ok(())
}

/// `Broker::start` and every request path work on a current-thread runtime: disk work that may
/// block (topic creation and deletion, an append that fsyncs or rolls, offsets-log and producer-id
/// writes) goes to blocking threads instead of `block_in_place`, which panics there.
#[tokio::test(flavor = "current_thread")]
async fn a_current_thread_runtime_serves_every_blocking_path() -> anyhow::Result<()> {
    use kafka_protocol::messages::{
        ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, InitProducerIdRequest,
        InitProducerIdResponse,
    };
    let broker =
        TestBroker::start(&["log.flush.interval.messages=1", "log.segment.bytes=1048576"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut client, "current", &[]).await?;
    // Every append fsyncs (flush.interval.messages = 1), and 1.5 MiB rolls a 1 MiB segment.
    for first in 0..24 {
        client
            .produce(
                "current",
                0,
                Bytes::from(batch(first * 4, 4, 16 * 1024, Compression::None)),
            )
            .await?;
    }
    let request = fetch_request("current", 0, 0, 1 << 20, 1 << 20, 0);
    let response = fetch(&mut client, 4, &request).await?;
    assert_eq!(response.responses[0].partitions[0].high_watermark, 96);
    let init: InitProducerIdResponse = client
        .request(
            ApiKey::InitProducerId,
            1,
            &InitProducerIdRequest::default().with_transaction_timeout_ms(-1),
        )
        .await?;
    assert_eq!(init.error_code, 0);
    assert!(init.producer_id.0 >= 0);
    let deleted: DeleteTopicsResponse = client
        .request(
            ApiKey::DeleteTopics,
            4,
            &DeleteTopicsRequest::default()
                .with_topic_names(vec![name("current")])
                .with_timeout_ms(5000),
        )
        .await?;
    assert_eq!(deleted.responses[0].error_code, 0);
    broker.stop().await;
    Ok(())
}
