//! Client quotas end to end on one broker: AlterClientQuotas and DescribeClientQuotas at every
//! advertised version (Kafka's filters and refusals), then enforcement: a producer over its
//! `producer_byte_rate` is answered with `throttle_time_ms` and its connection reads nothing for
//! that long (a legacy Produce v2 too), a client within its quota sees 0, and
//! `controller_mutation_rate` refuses CreateTopics v6+ with THROTTLING_QUOTA_EXCEEDED while it
//! only throttles older versions.

use std::time::{Duration, Instant};

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::{produce_request, Connection};
use skiff_protocol::error_code;
use skiff_protocol::records::Compression;
use skiff_tests::{advertised, batch, create_topic, topic_name, TestBroker};

/// The client id every `Connection` sends.
const CLIENT_ID: &str = "skiff-bench";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

fn entity(parts: &[(&str, Option<&str>)]) -> Vec<EntityData> {
    parts
        .iter()
        .map(|(kind, name)| {
            EntityData::default()
                .with_entity_type(text(kind))
                .with_entity_name(name.map(text))
        })
        .collect()
}

async fn alter(
    client: &mut Connection,
    version: i16,
    parts: &[(&str, Option<&str>)],
    ops: &[(&str, f64, bool)],
) -> anyhow::Result<(i16, Option<String>)> {
    let request = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
        .with_entity(entity(parts))
        .with_ops(
            ops.iter()
                .map(|(key, value, remove)| {
                    OpData::default()
                        .with_key(text(key))
                        .with_value(*value)
                        .with_remove(*remove)
                })
                .collect(),
        )]);
    let response: AlterClientQuotasResponse = client
        .request(ApiKey::AlterClientQuotas, version, &request)
        .await?;
    let entry = &response.entries[0];
    Ok((
        entry.error_code,
        entry.error_message.as_ref().map(|m| m.to_string()),
    ))
}

/// Entities (as `type=name` strings, sorted) and their values, for a filter.
async fn describe(
    client: &mut Connection,
    version: i16,
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> anyhow::Result<(i16, Vec<(String, Vec<(String, f64)>)>)> {
    let request = DescribeClientQuotasRequest::default()
        .with_strict(strict)
        .with_components(
            components
                .iter()
                .map(|(kind, match_type, name)| {
                    ComponentData::default()
                        .with_entity_type(text(kind))
                        .with_match_type(*match_type)
                        .with_match(name.map(text))
                })
                .collect(),
        );
    let response: DescribeClientQuotasResponse = client
        .request(ApiKey::DescribeClientQuotas, version, &request)
        .await?;
    let mut entries: Vec<(String, Vec<(String, f64)>)> = response
        .entries
        .unwrap_or_default()
        .iter()
        .map(|entry| {
            let mut parts: Vec<String> = entry
                .entity
                .iter()
                .map(|part| {
                    let name = part
                        .entity_name
                        .as_ref()
                        .map_or("<default>".to_owned(), |n| n.to_string());
                    format!("{}={name}", part.entity_type)
                })
                .collect();
            parts.sort();
            let values = entry
                .values
                .iter()
                .map(|value| (value.key.to_string(), value.value))
                .collect();
            (parts.join(","), values)
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((response.error_code, entries))
}

async fn versions(client: &mut Connection) -> anyhow::Result<ApiVersionsResponse> {
    client
        .request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_are_altered_and_described_at_every_version() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let offered = versions(&mut client).await?;
    assert_eq!(advertised(&offered, ApiKey::AlterClientQuotas), 0..=1);
    assert_eq!(advertised(&offered, ApiKey::DescribeClientQuotas), 0..=1);
    for version in 0..=1 {
        let user = format!("alice-{version}");
        let ok = (error_code::NONE, None);
        assert_eq!(
            alter(
                &mut client,
                version,
                &[("user", Some(&user))],
                &[("producer_byte_rate", 1024.0, false)]
            )
            .await?,
            ok
        );
        assert_eq!(
            alter(
                &mut client,
                version,
                &[("user", Some(&user)), ("client-id", None)],
                &[("request_percentage", 12.5, false)]
            )
            .await?,
            ok
        );
        // Non-strict: the user alone and with any client; strict: the user alone.
        let (code, entries) =
            describe(&mut client, version, &[("user", 0, Some(&user))], false).await?;
        assert_eq!(code, error_code::NONE);
        assert_eq!(
            entries,
            vec![
                (
                    format!("client-id=<default>,user={user}"),
                    vec![("request_percentage".to_owned(), 12.5)]
                ),
                (
                    format!("user={user}"),
                    vec![("producer_byte_rate".to_owned(), 1024.0)]
                ),
            ]
        );
        let (_, strict) = describe(&mut client, version, &[("user", 0, Some(&user))], true).await?;
        assert_eq!(strict.len(), 1);
        let (_, by_default_client) = describe(
            &mut client,
            version,
            &[("user", 2, None), ("client-id", 1, None)],
            true,
        )
        .await?;
        let expected = format!("client-id=<default>,user={user}");
        assert!(
            by_default_client.iter().any(|(name, _)| *name == expected),
            "{by_default_client:?}"
        );
        assert!(by_default_client
            .iter()
            .all(|(name, _)| name.starts_with("client-id=<default>,user=")));
        // Removing the last key removes the entity.
        assert_eq!(
            alter(
                &mut client,
                version,
                &[("user", Some(&user))],
                &[("producer_byte_rate", 0.0, true)]
            )
            .await?,
            ok
        );
        let (_, strict) = describe(&mut client, version, &[("user", 0, Some(&user))], true).await?;
        assert!(strict.is_empty());
        // Kafka's refusals.
        for (parts, ops) in [
            (
                vec![("user", Some("u"))],
                vec![("producer_byte_rate", 1.5, false)],
            ),
            (
                vec![("user", Some("u"))],
                vec![("consumer_byte_rate", -1.0, false)],
            ),
            (
                vec![("user", Some("u"))],
                vec![("no_such_quota", 1.0, false)],
            ),
            (
                vec![("group", Some("g"))],
                vec![("producer_byte_rate", 1.0, false)],
            ),
            (vec![], vec![("producer_byte_rate", 1.0, false)]),
        ] {
            let (code, message) = alter(&mut client, version, &parts, &ops).await?;
            assert_eq!(code, error_code::INVALID_REQUEST, "{parts:?} {ops:?}");
            assert!(message.is_some());
        }
        let (code, _) = describe(&mut client, version, &[("user", 0, None)], false).await?;
        assert_eq!(code, error_code::INVALID_REQUEST);
    }
    broker.stop().await;
    Ok(())
}

/// Produces one batch of `bytes` to partition 0 of `topic` at `version` and returns the
/// response's throttle and how long the answer took.
async fn produce(
    client: &mut Connection,
    version: i16,
    topic: &str,
    bytes: usize,
) -> anyhow::Result<(i32, Duration)> {
    let compression = Compression::None;
    let magic_v2 = batch(0, 1, bytes, compression);
    let records = if version <= 2 {
        legacy_message_set(bytes)
    } else {
        magic_v2
    };
    let request = produce_request(topic, 1, &[(0, bytes::Bytes::from(records))]);
    let started = Instant::now();
    let response: ProduceResponse = client.request(ApiKey::Produce, version, &request).await?;
    let partition = &response.responses[0].partition_responses[0];
    anyhow::ensure!(
        partition.error_code == 0,
        "produce error {}",
        partition.error_code
    );
    Ok((response.throttle_time_ms, started.elapsed()))
}

/// One uncompressed magic-1 message of `value_bytes` (a Produce v2 message set).
fn legacy_message_set(value_bytes: usize) -> Vec<u8> {
    let value = vec![b'x'; value_bytes];
    let mut message = Vec::new();
    message.push(1u8); // magic
    message.push(0u8); // attributes
    message.extend_from_slice(&0i64.to_be_bytes()); // timestamp
    message.extend_from_slice(&(-1i32).to_be_bytes()); // null key
    message.extend_from_slice(&i32::try_from(value.len()).expect("small").to_be_bytes());
    message.extend_from_slice(&value);
    let mut set = Vec::new();
    set.extend_from_slice(&0i64.to_be_bytes()); // offset
    set.extend_from_slice(
        &i32::try_from(message.len() + 4)
            .expect("small")
            .to_be_bytes(),
    );
    set.extend_from_slice(&[0; 4]); // crc, computed below
    set.extend_from_slice(&message);
    let crc = skiff_protocol::records::legacy::parse_entry(&set)
        .expect("a message")
        .expect("whole")
        .computed_crc();
    set[12..16].copy_from_slice(&crc.to_be_bytes());
    set
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_over_its_quota_is_answered_then_muted() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut admin = Connection::connect(&broker.bootstrap()).await?;
    create_topic(&mut admin, "quota-topic", &[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    // Nothing is throttled without a quota.
    for _ in 0..5 {
        assert_eq!(produce(&mut client, 8, "quota-topic", 100_000).await?.0, 0);
    }
    alter(
        &mut admin,
        1,
        &[("client-id", Some(CLIENT_ID))],
        &[("producer_byte_rate", 20_000.0, false)],
    )
    .await?;
    // The quota comes from the store's watch: within a moment every request counts against it.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (throttle, _) = produce(&mut client, 8, "quota-topic", 100_000).await?;
        if throttle > 0 {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "never throttled");
    }
    // 50 kB more, over a 10 s window already at the quota: 2.5 s of throttle, during which the
    // connection reads nothing, whatever the next request's version.
    let (throttle, _) = produce(&mut client, 8, "quota-topic", 50_000).await?;
    assert!(throttle > 2000, "throttle {throttle}");
    let (_, waited) = produce(&mut client, 2, "quota-topic", 10).await?;
    assert!(
        waited
            >= Duration::from_millis(u64::try_from(throttle).unwrap()) - Duration::from_millis(100),
        "answered after {waited:?}, throttle {throttle} ms"
    );
    // Another client id on the same broker is not slowed.
    let started = Instant::now();
    let other_throttle = produce_as(&broker.bootstrap(), "polite", "quota-topic").await?;
    assert_eq!(other_throttle, 0);
    assert!(started.elapsed() < Duration::from_millis(500));
    broker.stop().await;
    Ok(())
}

/// One Produce v8 of a small batch on a fresh connection whose requests carry `client_id`;
/// returns the response's throttle.
async fn produce_as(address: &str, client_id: &str, topic: &str) -> anyhow::Result<i32> {
    use bytes::{Buf, BytesMut};
    use kafka_protocol::protocol::{Decodable, Encodable};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = produce_request(
        topic,
        1,
        &[(0, bytes::Bytes::from(batch(0, 1, 10, Compression::None)))],
    );
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(8)
        .with_correlation_id(1)
        .with_client_id(Some(text(client_id)));
    let mut frame = BytesMut::from(&[0u8; 4][..]);
    header.encode(&mut frame, 1)?;
    request.encode(&mut frame, 8)?;
    let size = i32::try_from(frame.len() - 4)?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream.write_all(&frame).await?;
    let size = usize::try_from(stream.read_i32().await?)?;
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body).await?;
    let mut body = bytes::Bytes::from(body);
    body.advance(4); // correlation id (response header v0)
    let response = ProduceResponse::decode(&mut body, 8)?;
    Ok(response.throttle_time_ms)
}

async fn create_topics(
    client: &mut Connection,
    version: i16,
    name: &str,
    partitions: i32,
) -> anyhow::Result<(i16, i32)> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let response: CreateTopicsResponse = client
        .request(ApiKey::CreateTopics, version, &request)
        .await?;
    Ok((response.topics[0].error_code, response.throttle_time_ms))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mutation_quota_refuses_new_clients_and_throttles_old_ones() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut admin = Connection::connect(&broker.bootstrap()).await?;
    alter(
        &mut admin,
        1,
        &[("user", None)],
        &[("controller_mutation_rate", 1.0, false)],
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A burst of 10 s at 1 partition/s: 12 partitions overdraw the bucket by 2.
    let mut first = Connection::connect(&broker.bootstrap()).await?;
    let (code, throttle) = create_topics(&mut first, 7, "mutation-a", 12).await?;
    assert_eq!(
        (code, throttle > 0),
        (error_code::NONE, true),
        "throttle {throttle}"
    );
    // A new connection (the first is muted): v7 is refused, v5 goes ahead and is throttled.
    let mut second = Connection::connect(&broker.bootstrap()).await?;
    let (code, throttle) = create_topics(&mut second, 7, "mutation-b", 1).await?;
    assert_eq!(code, error_code::THROTTLING_QUOTA_EXCEEDED);
    assert!(throttle > 0);
    let mut third = Connection::connect(&broker.bootstrap()).await?;
    let (code, throttle) = create_topics(&mut third, 5, "mutation-c", 1).await?;
    assert_eq!(code, error_code::NONE);
    assert!(throttle > 0);
    broker.stop().await;
    Ok(())
}
