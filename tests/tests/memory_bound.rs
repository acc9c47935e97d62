//! The down-conversion memory bound, counted in bytes (not time): 20 concurrent legacy fetches of
//! at least 50 MB each, by clients that read slowly, never hold more than 20 × (chunk + largest
//! batch) of converted data in the broker at once: over a plain listener and over TLS (where every
//! chunk is encrypted in user space before the next is converted). And a legacy fetch of 1,000
//! partitions is answered whole while its response's plan and one chunk stay within 256 KiB.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, FetchRequest};
use skiff_bench::client::{fetch_request, fetch_request_partitions, Connection, Security};
use skiff_bench::tls::RunCertificate;
use skiff_protocol::records::legacy::{deep_records, DeepOptions};
use skiff_protocol::records::{Compression, Magic};
use skiff_tests::{batch, TestBroker};

const CONSUMERS: usize = 20;
const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: usize = 16;
const TOTAL_BYTES: usize = 56 * 1024 * 1024;
/// The broker's default chunk, which the test broker runs with.
const CHUNK_BYTES: usize = skiff_broker::config::DOWN_CONVERSION_CHUNK_BYTES_DEFAULT;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_slow_legacy_fetches_hold_at_most_one_chunk_each() -> anyhow::Result<()> {
    slow_legacy_fetches_stay_bounded(false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_slow_legacy_fetches_over_tls_hold_at_most_one_chunk_each() -> anyhow::Result<()> {
    slow_legacy_fetches_stay_bounded(true).await
}

async fn slow_legacy_fetches_stay_bounded(tls: bool) -> anyhow::Result<()> {
    let keystore_dir = tempfile::tempdir()?;
    let certificate = RunCertificate::generate()?;
    let keystore = certificate.write_keystore(keystore_dir.path())?;
    let broker = TestBroker::start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        &format!("ssl.keystore.location={}", keystore.display()),
    ])
    .await?;
    let (consumer_address, security) = if tls {
        (
            broker.listener("SSL").to_string(),
            Security::Tls(certificate.client_config()?),
        )
    } else {
        (broker.bootstrap(), Security::Plaintext)
    };
    let mut producer = Connection::connect(&broker.bootstrap()).await?;
    producer.metadata(&["bulk"]).await?;
    let batch_bytes = RECORDS_PER_BATCH * RECORD_BYTES;
    let batches_per_request = 32;
    let mut produced = 0usize;
    let mut largest_batch = 0usize;
    while produced < TOTAL_BYTES {
        let mut request = Vec::with_capacity(batches_per_request * (batch_bytes + 512));
        for _ in 0..batches_per_request {
            let one = batch(
                produced / RECORD_BYTES,
                RECORDS_PER_BATCH,
                RECORD_BYTES,
                Compression::None,
            );
            largest_batch = largest_batch.max(one.len());
            produced += RECORDS_PER_BATCH * RECORD_BYTES;
            request.extend_from_slice(&one);
        }
        producer.produce("bulk", 0, Bytes::from(request)).await?;
    }

    let mut consumers = Vec::new();
    for index in 0..CONSUMERS {
        let address = consumer_address.clone();
        let security = security.clone();
        consumers.push(tokio::spawn(async move {
            let mut connection = Connection::connect_with(&address, &security).await?;
            // Fetch v1 (magic 0) and v2 (magic 1) alternate; 100 MB limits, so one response is the
            // whole partition, converted.
            let version = if index % 2 == 0 { 1 } else { 2 };
            let request = fetch_request("bulk", 0, 0, 100 << 20, 100 << 20, 100);
            connection.send(ApiKey::Fetch, version, &request).await?;
            let size = connection.read_size().await?;
            connection
                .drain_slowly(size, 64 * 1024, Duration::from_millis(1))
                .await?;
            anyhow::Ok(size)
        }));
    }
    for consumer in consumers {
        let size = consumer.await??;
        assert!(
            size >= 50 * 1024 * 1024,
            "response of {size} bytes is too small for this test"
        );
    }
    let peak = broker.metrics.converted_bytes_in_flight_peak();
    let bound = CONSUMERS * (CHUNK_BYTES + largest_batch);
    println!("converted bytes in flight (tls: {tls}): peak {peak}, bound {bound}");
    assert!(peak > 0, "no conversion was counted");
    assert!(
        usize::try_from(peak).unwrap_or(usize::MAX) <= bound,
        "peak {peak} above the bound {bound}"
    );
    assert_eq!(broker.metrics.converted_bytes_in_flight(), 0);
    broker.stop().await;
    Ok(())
}

/// The per-response bound of a legacy response (docs/design/downconversion.md §3): its plan (header
/// bytes and planned record sets) and one chunk.
const LEGACY_RESPONSE_BYTES_MAX: u64 = 256 * 1024;
/// Four topics of 250 partitions (one CreateTopics of 1,000 partitions takes longer than its
/// timeout in a debug build on a loaded machine), fetched in one request.
const WIDE_TOPICS: i32 = 4;
const WIDE_TOPIC_PARTITIONS: i32 = 250;
const WIDE_PARTITIONS: i32 = WIDE_TOPICS * WIDE_TOPIC_PARTITIONS;
/// Records per partition, in two batches of three; partition `p`'s record at offset `o` has the
/// key `k<100 p + o>`.
const WIDE_RECORDS: i64 = 6;

/// A legacy fetch of 1,000 partitions over the wire: every partition's records come back whole,
/// at their offsets, from each partition's fetch offset on, in the magic of each legacy version;
/// and the largest response plan the broker held, plus one chunk, stays within 256 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_partition_legacy_fetch_is_whole_and_its_plan_bounded() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let topics: Vec<String> = (0..WIDE_TOPICS)
        .map(|topic| format!("wide{topic}"))
        .collect();
    for topic in &topics {
        client.create_topic(topic, WIDE_TOPIC_PARTITIONS).await?;
        client
            .await_partitions_ready(topic, WIDE_TOPIC_PARTITIONS)
            .await?;
        for partition in 0..WIDE_TOPIC_PARTITIONS {
            for first in [0, 3] {
                let key_base = usize::try_from(partition)? * 100 + first;
                let records = batch(key_base, 3, 100, Compression::None);
                client
                    .produce(topic, partition, Bytes::from(records))
                    .await?;
            }
        }
    }
    for version in [0, 1, 2, 3] {
        // Fetch offsets 0, 1, 2, 3, 4, 5 in turn: the converter leaves out what lies below them.
        let starts: Vec<i64> = (0..WIDE_TOPIC_PARTITIONS)
            .map(|partition| i64::from(partition) % WIDE_RECORDS)
            .collect();
        let mut got: Vec<Vec<Vec<(i64, String)>>> =
            vec![vec![Vec::new(); starts.len()]; topics.len()];
        // A v1 message is larger than its v2 record: the record set is cut at its declared size
        // (the stored slice's) and the client fetches again after its last whole message.
        for round in 0..WIDE_RECORDS {
            let next = |topic: usize, partition: usize| {
                got[topic][partition]
                    .last()
                    .map_or(starts[partition], |(offset, _)| offset + 1)
            };
            let mut request: Option<FetchRequest> = None;
            for (index, topic) in topics.iter().enumerate() {
                let wanted: Vec<(i32, i64)> = (0..WIDE_TOPIC_PARTITIONS)
                    .map(|partition| {
                        (
                            partition,
                            next(index, usize::try_from(partition).unwrap_or(0)),
                        )
                    })
                    .collect();
                let more = fetch_request_partitions(topic, &wanted, 1 << 20, 64 << 20, 0);
                match request.as_mut() {
                    Some(request) => request.topics.extend(more.topics),
                    None => request = Some(more),
                }
            }
            let request = request.unwrap_or_default();
            let response = skiff_tests::fetch(&mut client, version, &request).await?;
            assert_eq!(response.responses.len(), topics.len(), "Fetch v{version}");
            for (index, topic) in response.responses.iter().enumerate() {
                assert_eq!(topic.partitions.len(), starts.len(), "Fetch v{version}");
                for (partition, answer) in topic.partitions.iter().enumerate() {
                    let at = format!("Fetch v{version} {}-{partition}", topic.topic.0.as_str());
                    let records = legacy_records(answer, version, &at)?;
                    if round == 0 {
                        assert!(!records.is_empty(), "{at}: no record");
                    }
                    got[index][partition].extend(records);
                }
            }
        }
        for (index, topic) in got.iter().enumerate() {
            for (partition, records) in topic.iter().enumerate() {
                let key_base = i64::try_from(partition)? * 100;
                let expected: Vec<(i64, String)> = (starts[partition]..WIDE_RECORDS)
                    .map(|offset| (offset, format!("k{}", key_base + offset)))
                    .collect();
                assert_eq!(
                    records, &expected,
                    "Fetch v{version} wide{index}-{partition}"
                );
            }
        }
    }
    let plan = broker.metrics.legacy_plan_bytes_peak();
    let chunk = u64::try_from(CHUNK_BYTES)?;
    println!(
        "largest 1,000-partition legacy plan: {plan} bytes, {} per partition",
        plan / u64::try_from(WIDE_PARTITIONS)?
    );
    assert!(plan > 0, "no legacy plan was counted");
    assert!(
        plan + chunk <= LEGACY_RESPONSE_BYTES_MAX,
        "plan {plan} + chunk {chunk} above {LEGACY_RESPONSE_BYTES_MAX}"
    );
    assert_eq!(broker.metrics.converted_bytes_in_flight(), 0);
    broker.stop().await;
    Ok(())
}

/// The (offset, key) of every whole message of a legacy partition answer, checking its error,
/// high watermark and magic.
fn legacy_records(
    answer: &kafka_protocol::messages::fetch_response::PartitionData,
    version: i16,
    at: &str,
) -> anyhow::Result<Vec<(i64, String)>> {
    assert_eq!(answer.error_code, 0, "{at}");
    assert_eq!(answer.high_watermark, WIDE_RECORDS, "{at}");
    let magic = if version < 2 { Magic::V0 } else { Magic::V1 };
    let bytes = answer.records.clone().unwrap_or_default();
    Ok(deep_records(&bytes, &DeepOptions::default())?
        .into_iter()
        .map(|record| {
            assert_eq!(record.magic, magic, "{at}");
            let key = record.key.unwrap_or_default();
            (record.offset, String::from_utf8_lossy(&key).into_owned())
        })
        .collect())
}
