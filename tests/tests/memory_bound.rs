//! The down-conversion memory bound, counted in bytes (not time): 20 concurrent legacy fetches of
//! at least 50 MB each, by clients that read slowly, never hold more than 20 × (chunk + largest
//! batch) of converted data in the broker at once: over a plain listener and over TLS (where every
//! chunk is encrypted in user space before the next is converted).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use skiff_bench::client::{fetch_request, Connection, Security};
use skiff_bench::tls::RunCertificate;
use skiff_protocol::records::Compression;
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
