//! Kafka's ACL and SCRAM admin APIs on a single node (the embedded store), end to end through the
//! wire: CreateAcls, DescribeAcls (MATCH filter) and DeleteAcls as Kafka answers them, a host ACL
//! matched against the client's real address, the checks taking effect at once, the file imported
//! at start and listed, AlterUserScramCredentials and DescribeUserScramCredentials, and
//! DescribeCluster.

use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skiff_bench::client::Connection;
use skiff_protocol::error_code;
use skiff_tests::{create_topic, TestBroker};

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// Describe (code 8) ALLOW (3) or DENY (2) for ANONYMOUS on the literal (3) topic (2) `topic`.
fn creation(topic: &str, host: &str, permission: i8) -> AclCreation {
    AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(text(topic))
        .with_resource_pattern_type(3)
        .with_principal(text("User:ANONYMOUS"))
        .with_host(text(host))
        .with_operation(8)
        .with_permission_type(permission)
}

async fn describe_code(client: &mut Connection, topic: &str) -> anyhow::Result<i16> {
    let request =
        MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(TopicName(text(topic))))]));
    let response: MetadataResponse = client.request(ApiKey::Metadata, 9, &request).await?;
    Ok(response.topics.first().map_or(-1, |topic| topic.error_code))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_through_the_api_apply_at_once_with_hosts() -> anyhow::Result<()> {
    let directory = tempfile::tempdir()?;
    let acl_path = directory.path().join("acls.txt");
    std::fs::write(&acl_path, "allow User:ANONYMOUS create cluster\n")?;
    let file = format!("skiff.acl.file={}", acl_path.display());
    let reload = "skiff.acl.reload.interval.ms=100";
    let broker = TestBroker::start(&[file.as_str(), reload]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    // Listing ACLs needs Describe on the cluster, creating them Alter (which implies Describe).
    // kafka-protocol's defaults of the string filters are "" (an empty name), not null (any).
    let describe_all = DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    let response: DescribeAclsResponse = client
        .request(ApiKey::DescribeAcls, 3, &describe_all)
        .await?;
    assert_eq!(
        response.error_code,
        error_code::CLUSTER_AUTHORIZATION_FAILED
    );
    let describe_cluster = creation("kafka-cluster", "*", 3).with_resource_type(4);
    let create = CreateAclsRequest::default().with_creations(vec![describe_cluster]);
    let response: CreateAclsResponse = client.request(ApiKey::CreateAcls, 3, &create).await?;
    assert_eq!(
        response.results[0].error_code,
        error_code::CLUSTER_AUTHORIZATION_FAILED
    );
    // Until the first API change the store follows the importing broker's file.
    std::fs::write(&acl_path, "allow User:ANONYMOUS create,alter cluster\n")?;
    let mut created = false;
    for _ in 0..100 {
        let response: CreateAclsResponse = client.request(ApiKey::CreateAcls, 3, &create).await?;
        if response.results[0].error_code == error_code::NONE {
            created = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(created, "the rewritten file never applied");
    // From the first API change on, the file is ignored.
    std::fs::write(&acl_path, "# nothing\n")?;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let response: DescribeAclsResponse = client
        .request(ApiKey::DescribeAcls, 3, &describe_all)
        .await?;
    assert_eq!(response.error_code, error_code::NONE);
    create_topic(&mut client, "hosted", &[]).await?;
    assert_eq!(
        describe_code(&mut client, "hosted").await?,
        error_code::TOPIC_AUTHORIZATION_FAILED
    );

    // Allowed from another address only: still refused; then from any host: allowed.
    let create = CreateAclsRequest::default().with_creations(vec![
        creation("hosted", "10.9.9.9", 3),
        creation("hosted", "*", 3).with_resource_type(1),
    ]);
    let response: CreateAclsResponse = client.request(ApiKey::CreateAcls, 3, &create).await?;
    let codes: Vec<i16> = response.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [error_code::NONE, error_code::INVALID_REQUEST]);
    assert_eq!(
        describe_code(&mut client, "hosted").await?,
        error_code::TOPIC_AUTHORIZATION_FAILED
    );
    let create =
        CreateAclsRequest::default().with_creations(vec![creation("hosted", "127.0.0.1", 3)]);
    let response: CreateAclsResponse = client.request(ApiKey::CreateAcls, 3, &create).await?;
    assert_eq!(response.results[0].error_code, error_code::NONE);
    assert_eq!(
        describe_code(&mut client, "hosted").await?,
        error_code::NONE
    );

    // MATCH lists every pattern that applies to the name, the file's cluster ACLs excluded.
    let describe = describe_all
        .clone()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(text("hosted")))
        .with_pattern_type_filter(2)
        .with_operation(1)
        .with_permission_type(1);
    let response: DescribeAclsResponse = client.request(ApiKey::DescribeAcls, 3, &describe).await?;
    assert_eq!(response.error_code, error_code::NONE);
    let mut hosts: Vec<String> = response
        .resources
        .iter()
        .flat_map(|resource| resource.acls.iter().map(|acl| acl.host.to_string()))
        .collect();
    hosts.sort();
    assert_eq!(hosts, ["10.9.9.9", "127.0.0.1"], "{response:?}");
    let response: DescribeAclsResponse = client
        .request(ApiKey::DescribeAcls, 3, &describe_all)
        .await?;
    // The topic's resource and the cluster's (two ACLs from the file, one from the API).
    assert_eq!(response.resources.len(), 2, "{response:?}");

    // Deleting the local-host ACL refuses again at once; each ACL is listed once.
    let delete = DeleteAclsRequest::default().with_filters(vec![
        DeleteAclsFilter::default()
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_resource_type_filter(2)
            .with_pattern_type_filter(1)
            .with_host_filter(Some(text("127.0.0.1")))
            .with_operation(1)
            .with_permission_type(1),
        DeleteAclsFilter::default()
            .with_resource_type_filter(2)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(0),
    ]);
    let response: DeleteAclsResponse = client.request(ApiKey::DeleteAcls, 3, &delete).await?;
    assert_eq!(response.filter_results[0].error_code, error_code::NONE);
    assert_eq!(response.filter_results[0].matching_acls.len(), 1);
    assert_eq!(
        response.filter_results[1].error_code,
        error_code::INVALID_REQUEST
    );
    assert_eq!(
        describe_code(&mut client, "hosted").await?,
        error_code::TOPIC_AUTHORIZATION_FAILED
    );
    broker.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_users_and_describe_cluster() -> anyhow::Result<()> {
    let broker = TestBroker::start(&[]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let alter = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(text("alice"))
            .with_mechanism(2)
            .with_iterations(8192)
            .with_salt(bytes::Bytes::from_static(b"0123456789abcdef"))
            .with_salted_password(bytes::Bytes::from_static(&[1; 64])),
    ]);
    let response: AlterUserScramCredentialsResponse = client
        .request(ApiKey::AlterUserScramCredentials, 0, &alter)
        .await?;
    assert_eq!(response.results[0].error_code, error_code::NONE);
    let response: DescribeUserScramCredentialsResponse = client
        .request(
            ApiKey::DescribeUserScramCredentials,
            0,
            &DescribeUserScramCredentialsRequest::default(),
        )
        .await?;
    assert_eq!(response.results.len(), 1);
    assert_eq!(response.results[0].credential_infos[0].iterations, 8192);
    // No authorizer: the ACL APIs are disabled, as Kafka's.
    let response: DescribeAclsResponse = client
        .request(ApiKey::DescribeAcls, 3, &DescribeAclsRequest::default())
        .await?;
    assert_eq!(response.error_code, error_code::SECURITY_DISABLED);

    let request =
        DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let response: DescribeClusterResponse =
        client.request(ApiKey::DescribeCluster, 1, &request).await?;
    assert_eq!(response.error_code, error_code::NONE);
    assert_eq!(response.brokers.len(), 1);
    assert!(!response.cluster_id.is_empty());
    // Without an authorizer every cluster operation is allowed: CREATE (5) … DESCRIBE (8) etc.
    assert_eq!(
        response.cluster_authorized_operations,
        (1 << 5) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12) | (1 << 7) | (1 << 8)
    );
    let controller = request.with_endpoint_type(2);
    let response: DescribeClusterResponse = client
        .request(ApiKey::DescribeCluster, 1, &controller)
        .await?;
    assert_eq!(response.error_code, 114);
    broker.stop().await;
    Ok(())
}

/// Every version of the security admin APIs that ApiVersions advertises answers a well-formed
/// response (what `every_version.rs` asks of each advertised API): on a broker with an ACL file
/// the ACL APIs serve, and the SCRAM and DescribeCluster APIs answer as above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_version_of_the_security_apis_answers() -> anyhow::Result<()> {
    let directory = tempfile::tempdir()?;
    let acl_path = directory.path().join("acls.txt");
    std::fs::write(&acl_path, "allow User:ANONYMOUS all cluster\n")?;
    let file = format!("skiff.acl.file={}", acl_path.display());
    let broker = TestBroker::start(&[file.as_str()]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    let versions: ApiVersionsResponse = client
        .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .await?;
    let range = |key: ApiKey| {
        let entry = versions
            .api_keys
            .iter()
            .find(|entry| entry.api_key == key as i16)
            .unwrap_or_else(|| panic!("{key:?} is not advertised"));
        entry.min_version..=entry.max_version
    };
    let any_filter = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    for version in range(ApiKey::DescribeAcls) {
        let response: DescribeAclsResponse = client
            .request(ApiKey::DescribeAcls, version, &any_filter)
            .await?;
        assert_eq!(response.error_code, 0, "DescribeAcls v{version}");
    }
    for version in range(ApiKey::CreateAcls) {
        let create = CreateAclsRequest::default().with_creations(vec![creation("v", "*", 3)]);
        let response: CreateAclsResponse =
            client.request(ApiKey::CreateAcls, version, &create).await?;
        assert_eq!(response.results[0].error_code, 0, "CreateAcls v{version}");
    }
    for version in range(ApiKey::DeleteAcls) {
        let delete = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(2)
            .with_resource_name_filter(Some(text("v")))
            .with_pattern_type_filter(3)
            .with_operation(1)
            .with_permission_type(1)]);
        let response: DeleteAclsResponse =
            client.request(ApiKey::DeleteAcls, version, &delete).await?;
        assert_eq!(
            response.filter_results[0].error_code, 0,
            "DeleteAcls v{version}"
        );
    }
    for version in range(ApiKey::DescribeUserScramCredentials) {
        let response: DescribeUserScramCredentialsResponse = client
            .request(
                ApiKey::DescribeUserScramCredentials,
                version,
                &DescribeUserScramCredentialsRequest::default(),
            )
            .await?;
        assert_eq!(
            response.error_code, 0,
            "DescribeUserScramCredentials v{version}"
        );
    }
    for version in range(ApiKey::AlterUserScramCredentials) {
        let response: AlterUserScramCredentialsResponse = client
            .request(
                ApiKey::AlterUserScramCredentials,
                version,
                &AlterUserScramCredentialsRequest::default(),
            )
            .await?;
        assert!(
            response.results.is_empty(),
            "AlterUserScramCredentials v{version}"
        );
    }
    // Skiff's own DescribeCluster types: kafka-protocol 0.15.1 stops at v1.
    for version in range(ApiKey::DescribeCluster) {
        let response: skiff_protocol::responses::describe_cluster::DescribeClusterResponse = client
            .request(
                ApiKey::DescribeCluster,
                version,
                &skiff_protocol::requests::DescribeClusterRequest::default(),
            )
            .await?;
        assert_eq!(response.base.error_code, 0, "DescribeCluster v{version}");
        assert!(
            !response.base.brokers.is_empty(),
            "DescribeCluster v{version}"
        );
    }
    // v2 with include_fenced_brokers: the live brokers, none fenced (a Skiff broker that stops
    // renewing its session is unregistered, not fenced).
    let with_fenced = skiff_protocol::requests::DescribeClusterRequest {
        include_fenced_brokers: true,
        ..Default::default()
    };
    let response: skiff_protocol::responses::describe_cluster::DescribeClusterResponse = client
        .request(ApiKey::DescribeCluster, 2, &with_fenced)
        .await?;
    assert_eq!(response.base.brokers.len(), 1);
    assert!(response.fenced.is_empty());
    broker.stop().await;
    Ok(())
}
