//! Dynamic broker configs end to end on one broker: IncrementalAlterConfigs and AlterConfigs on
//! the cluster default (empty name) and on the broker itself, stored in the metadata store and
//! applied live (`max.connections` refuses a second client at once when set to 1, and takes it
//! again when deleted); DescribeConfigs shows each value's source and synonyms as Kafka does; a
//! key that cannot change live is refused naming it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource as WholeResource, AlterableConfig as WholeConfig,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::Connection;
use skiff_tests::TestBroker;

const BROKER: i8 = 4;
const SET: i8 = 0;
const DELETE: i8 = 1;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const STATIC_BROKER_CONFIG: i8 = 4;

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

async fn alter(
    client: &mut Connection,
    name: &str,
    changes: &[(&str, i8, Option<&str>)],
) -> anyhow::Result<(i16, Option<String>)> {
    let configs = changes
        .iter()
        .map(|(key, op, value)| {
            AlterableConfig::default()
                .with_name(text(key))
                .with_config_operation(*op)
                .with_value(value.map(text))
        })
        .collect();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(text(name))
            .with_configs(configs),
    ]);
    let response: IncrementalAlterConfigsResponse = client
        .request(ApiKey::IncrementalAlterConfigs, 1, &request)
        .await?;
    let result = &response.responses[0];
    Ok((
        result.error_code,
        result.error_message.as_ref().map(|m| m.to_string()),
    ))
}

async fn describe(
    client: &mut Connection,
    name: &str,
) -> anyhow::Result<BTreeMap<String, DescribeConfigsResourceResult>> {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(text(name))
            .with_configuration_keys(None)]);
    let response: DescribeConfigsResponse =
        client.request(ApiKey::DescribeConfigs, 4, &request).await?;
    let result = &response.results[0];
    anyhow::ensure!(
        result.error_code == 0,
        "describe {name}: {}",
        result.error_code
    );
    Ok(result
        .configs
        .iter()
        .map(|config| (config.name.to_string(), config.clone()))
        .collect())
}

/// Waits until this broker's described `max.connections` is `value` (the store's watch applied it).
async fn until_applied(client: &mut Connection, value: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let configs = describe(client, "1").await?;
        if configs["max.connections"].value.as_deref() == Some(value) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "max.connections never became {value}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a new connection is served (ApiVersions answered) or closed at once.
async fn served(address: &str) -> bool {
    let Ok(mut client) = Connection::connect(address).await else {
        return false;
    };
    let answer: anyhow::Result<ApiVersionsResponse> = tokio::time::timeout(
        Duration::from_secs(2),
        client.request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()),
    )
    .await
    .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer")));
    answer.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_configs_change_live_with_kafkas_sources() -> anyhow::Result<()> {
    let broker = TestBroker::start(&["node.id=1", "max.connections=50"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let configs = describe(&mut client, "1").await?;
    let max = &configs["max.connections"];
    assert_eq!(
        (max.value.as_deref(), max.config_source),
        (Some("50"), STATIC_BROKER_CONFIG)
    );
    assert!(!max.read_only);
    assert!(configs["log.dirs"].read_only);

    // The cluster default, then this broker's own value over it.
    assert_eq!(
        alter(&mut client, "", &[("max.connections", SET, Some("40"))]).await?,
        (0, None)
    );
    until_applied(&mut client, "40").await?;
    assert_eq!(
        alter(&mut client, "1", &[("max.connections", SET, Some("30"))]).await?,
        (0, None)
    );
    until_applied(&mut client, "30").await?;
    let configs = describe(&mut client, "1").await?;
    let max = &configs["max.connections"];
    assert_eq!(max.config_source, DYNAMIC_BROKER_CONFIG);
    let synonyms: Vec<(String, Option<String>, i8)> = max
        .synonyms
        .iter()
        .map(|s| {
            (
                s.name.to_string(),
                s.value.as_ref().map(|v| v.to_string()),
                s.source,
            )
        })
        .collect();
    assert_eq!(
        synonyms,
        vec![
            (
                "max.connections".to_owned(),
                Some("30".to_owned()),
                DYNAMIC_BROKER_CONFIG
            ),
            (
                "max.connections".to_owned(),
                Some("40".to_owned()),
                DYNAMIC_DEFAULT_BROKER_CONFIG
            ),
            (
                "max.connections".to_owned(),
                Some("50".to_owned()),
                STATIC_BROKER_CONFIG
            ),
        ]
    );
    let defaults = describe(&mut client, "").await?;
    assert_eq!(defaults.len(), 1);
    assert_eq!(
        defaults["max.connections"].config_source,
        DYNAMIC_DEFAULT_BROKER_CONFIG
    );

    // Applied live: at 1 connection a second client is closed at once (the first is busy).
    assert_eq!(
        alter(&mut client, "1", &[("max.connections", SET, Some("1"))]).await?,
        (0, None)
    );
    until_applied(&mut client, "1").await?;
    assert!(
        !served(&broker.bootstrap()).await,
        "a second connection was served at max.connections=1"
    );
    assert_eq!(
        alter(&mut client, "1", &[("max.connections", DELETE, None)]).await?,
        (0, None)
    );
    until_applied(&mut client, "40").await?;
    assert!(served(&broker.bootstrap()).await);

    // Keys that cannot change live, unknown keys, bad values.
    let (code, message) = alter(&mut client, "1", &[("log.dirs", SET, Some("/elsewhere"))]).await?;
    assert_eq!(code, 42);
    assert!(message.unwrap_or_default().contains("log.dirs"));
    assert_eq!(
        alter(&mut client, "", &[("no.such.key", SET, Some("1"))])
            .await?
            .0,
        40
    );
    assert_eq!(
        alter(&mut client, "", &[("max.connections", SET, Some("0"))])
            .await?
            .0,
        40
    );
    assert_eq!(
        alter(&mut client, "7", &[("max.connections", SET, Some("9"))])
            .await?
            .0,
        42
    );

    // The legacy AlterConfigs replaces the whole set of the resource.
    let request = AlterConfigsRequest::default().with_resources(vec![WholeResource::default()
        .with_resource_type(BROKER)
        .with_resource_name(text(""))
        .with_configs(vec![WholeConfig::default()
            .with_name(text("skiff.reassignment.throttle.bytes.per.second"))
            .with_value(Some(text("1048576")))])]);
    let response: AlterConfigsResponse = client.request(ApiKey::AlterConfigs, 1, &request).await?;
    assert_eq!(response.responses[0].error_code, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let defaults = describe(&mut client, "").await?;
        if defaults.len() == 1
            && defaults.contains_key("skiff.reassignment.throttle.bytes.per.second")
        {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "default not replaced: {:?}",
            defaults.keys()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    broker.stop().await;
    Ok(())
}
