//! Issue 39 item 7: a topic whose replication factor is below its min.insync.replicas is created,
//! as Kafka creates it, but an acks=all Produce to it is answered NOT_ENOUGH_REPLICAS with an
//! `error_message` naming the replication factor and min.insync.replicas (Produce v8+), while
//! acks=1 still appends.

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use skiff_bench::client::Connection;
use skiff_protocol::error_code;
use skiff_protocol::records::Compression;
use skiff_tests::{batch, create_topic, topic_name, TestBroker};

fn produce(topic: &str, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(2000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(bytes::Bytes::from(batch(
                    0,
                    1,
                    10,
                    Compression::None,
                ))))])])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_below_min_isr_names_both_numbers() -> anyhow::Result<()> {
    let broker = TestBroker::start(&["min.insync.replicas=2"]).await?;
    let mut client = Connection::connect(&broker.bootstrap()).await?;
    // Replication factor 1 (create_topic's), below the broker's min.insync.replicas of 2.
    create_topic(&mut client, "lonely", &[]).await?;
    let response: ProduceResponse = client
        .request(ApiKey::Produce, 9, &produce("lonely", -1))
        .await?;
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(partition.error_code, error_code::NOT_ENOUGH_REPLICAS);
    let message = partition
        .error_message
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(message.contains("min.insync.replicas=2"), "{message}");
    assert!(message.contains("replication factor 1"), "{message}");
    assert!(
        message.contains("no acks=all write can ever succeed"),
        "{message}"
    );
    // Before v8 there is no message field; acks=1 appends.
    let response: ProduceResponse = client
        .request(ApiKey::Produce, 7, &produce("lonely", -1))
        .await?;
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(partition.error_code, error_code::NOT_ENOUGH_REPLICAS);
    let response: ProduceResponse = client
        .request(ApiKey::Produce, 9, &produce("lonely", 1))
        .await?;
    assert_eq!(
        response.responses[0].partition_responses[0].error_code,
        error_code::NONE
    );
    broker.stop().await;
    Ok(())
}
