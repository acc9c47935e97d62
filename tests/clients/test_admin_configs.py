"""Partition and config admin APIs (issue 14 item 4) with the Python admin clients: confluent-kafka's
AdminClient (create_partitions, incremental_alter_configs, alter_configs, describe_configs of a
topic and of the broker) and kafka-python's KafkaAdminClient (create_partitions, alter_configs).
Each change must show in Metadata or DescribeConfigs at once and still be there after a restart."""

import pytest

from clients import ck_consume, ck_produce, expected
from conftest import messages

TIMEOUT_S = 15


def ck_admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def ck_create_topic(admin, topic, partitions=1):
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(TIMEOUT_S)


def ck_partitions(admin, topic):
    return len(admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions)


def ck_topic_configs(admin, topic):
    from confluent_kafka.admin import ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(TIMEOUT_S)


def source_of(entry):
    """The entry's ConfigSource as its number (the C extension may give the enum or an int)."""
    return int(getattr(entry.source, "value", entry.source))


def kafka_error_code(excinfo):
    return excinfo.value.args[0].code()


def test_confluent_create_partitions(broker):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewPartitions

    admin = ck_admin(broker)
    ck_create_topic(admin, "ck-grow")
    admin.create_partitions([NewPartitions("ck-grow", 3)], validate_only=True)["ck-grow"].result(TIMEOUT_S)
    assert ck_partitions(admin, "ck-grow") == 1
    admin.create_partitions([NewPartitions("ck-grow", 3)])["ck-grow"].result(TIMEOUT_S)
    assert ck_partitions(admin, "ck-grow") == 3
    with pytest.raises(KafkaException) as refused:
        admin.create_partitions([NewPartitions("ck-grow", 2)])["ck-grow"].result(TIMEOUT_S)
    assert kafka_error_code(refused) == KafkaError.INVALID_PARTITIONS
    with pytest.raises(KafkaException) as refused:
        admin.create_partitions([NewPartitions("ck-grow", 4, replica_assignment=[[99]])])["ck-grow"].result(TIMEOUT_S)
    assert kafka_error_code(refused) == KafkaError.INVALID_REPLICA_ASSIGNMENT

    # The new partitions take records (the producer spreads keyed messages over all three) and
    # survive a restart.
    msgs = messages(300, prefix="grow")
    ck_produce(broker.bootstrap, "ck-grow", msgs)
    broker.restart()
    admin = ck_admin(broker)
    assert ck_partitions(admin, "ck-grow") == 3
    seen, errors = ck_consume(broker.bootstrap, "ck-grow", 300)
    assert not errors
    assert sorted(seen) == sorted(expected(msgs))


def test_confluent_incremental_alter_configs(broker):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

    admin = ck_admin(broker)
    ck_create_topic(admin, "ck-tuned")

    def change(name, value, op):
        resource = ConfigResource(ResourceType.TOPIC, "ck-tuned", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op)])
        return admin.incremental_alter_configs([resource])[resource]

    change("retention.ms", "7200000", AlterConfigOpType.SET).result(TIMEOUT_S)
    entry = ck_topic_configs(admin, "ck-tuned")["retention.ms"]
    assert entry.value == "7200000"
    assert source_of(entry) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # Synonyms as Kafka lists them: the override, then the broker key it defaults to.
    assert list(entry.synonyms) == ["retention.ms", "log.retention.ms"]

    with pytest.raises(KafkaException) as refused:
        change("cleanup.policy", "shred", AlterConfigOpType.SET).result(TIMEOUT_S)
    assert kafka_error_code(refused) == KafkaError.INVALID_CONFIG
    with pytest.raises(KafkaException) as refused:
        change("retention.ms", "1", AlterConfigOpType.APPEND).result(TIMEOUT_S)
    assert kafka_error_code(refused) == KafkaError.INVALID_CONFIG

    broker.restart()
    admin = ck_admin(broker)
    assert ck_topic_configs(admin, "ck-tuned")["retention.ms"].value == "7200000"
    change("retention.ms", None, AlterConfigOpType.DELETE).result(TIMEOUT_S)
    entry = ck_topic_configs(admin, "ck-tuned")["retention.ms"]
    assert source_of(entry) == ConfigSource.DEFAULT_CONFIG.value
    assert entry.value == str(7 * 24 * 3600 * 1000)


def test_confluent_alter_configs_and_max_message_bytes(broker):
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    admin = ck_admin(broker)
    ck_create_topic(admin, "ck-small")
    resource = ConfigResource(ResourceType.TOPIC, "ck-small", set_config={"max.message.bytes": "1000"})
    admin.alter_configs([resource])[resource].result(TIMEOUT_S)
    entry = ck_topic_configs(admin, "ck-small")["max.message.bytes"]
    assert (entry.value, source_of(entry)) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    # The new limit holds for the next produce, without a restart.
    outcomes = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.codec": "none", "linger.ms": 0})
    producer.produce("ck-small", value=b"x" * 5000, on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(TIMEOUT_S)
    assert len(outcomes) == 1 and outcomes[0] is not None
    assert outcomes[0].code() == KafkaError.MSG_SIZE_TOO_LARGE

    bad = ConfigResource(ResourceType.TOPIC, "ck-small", set_config={"cleanup.policy": "shred"})
    with pytest.raises(KafkaException) as refused:
        admin.alter_configs([bad])[bad].result(TIMEOUT_S)
    assert kafka_error_code(refused) == KafkaError.INVALID_CONFIG


def test_confluent_dynamic_log_defaults_and_cleaner_threads(broker_factory):
    """The broker defaults of topic configs change live (Kafka's DynamicLogConfig): a new
    log.retention.ms for this broker reaches the topic without its own retention (its old
    segments go) and not the one with it; DescribeConfigs shows the value and its synonyms; a new
    log.cleaner.threads restarts the cleaner with that many threads, within Kafka's half-to-double
    rule; a static key is refused naming it."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                       NewTopic, ResourceType)
    from test_cluster import metrics, wait_for

    broker = broker_factory("node.id=3", "log.retention.ms=3600000", "log.segment.bytes=8192",
                            "log.retention.check.interval.ms=200", "skiff.metrics.listener=127.0.0.1:0")
    admin = ck_admin(broker)
    resource = ConfigResource(ResourceType.BROKER, "3")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    retention = configs["log.retention.ms"]
    assert (retention.value, source_of(retention)) == ("3600000", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert not retention.is_read_only and configs["log.dirs"].is_read_only
    assert source_of(configs["num.partitions"]) == ConfigSource.DEFAULT_CONFIG.value

    topics = [NewTopic("dyn-default", 1, 1), NewTopic("dyn-own", 1, 1, config={"retention.ms": "3600000"})]
    for future in admin.create_topics(topics).values():
        future.result(TIMEOUT_S)
    # Ten batches of 20 records (about 3 KB each) in segments of 8 KiB: a few closed segments.
    for topic in ("dyn-default", "dyn-own"):
        for batch in range(10):
            ck_produce(broker.bootstrap, topic, messages(20, prefix=f"{topic}-{batch}"))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dyn-unused"})

    def log_start(topic):
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)[0]

    def alter(key, value):
        change = ConfigResource(ResourceType.BROKER, "3", incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
        return admin.incremental_alter_configs([change])[change].result(TIMEOUT_S)

    assert log_start("dyn-default") == 0
    alter("log.retention.ms", "1")
    wait_for(lambda: log_start("dyn-default") > 0, 10, "old segments of the topic without its own retention deleted")
    assert log_start("dyn-own") == 0, "a topic's own retention.ms wins"
    entry = ck_topic_configs(admin, "dyn-default")["retention.ms"]
    assert (entry.value, source_of(entry)) == ("1", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # (confluent-kafka keys synonyms by name: the dynamic and static log.retention.ms are one.)
    assert list(entry.synonyms) == ["log.retention.ms"]

    assert metrics(broker)["skiff_log_cleaner_threads"] == 1
    alter("log.cleaner.threads", "2")
    wait_for(lambda: metrics(broker)["skiff_log_cleaner_threads"] == 2, 5, "two cleaner threads")
    with pytest.raises(KafkaException) as refused:
        alter("log.cleaner.threads", "5")
    assert "more than double the current value 2" in refused.value.args[0].str()
    with pytest.raises(KafkaException) as refused:
        alter("log.dirs", "/elsewhere")
    assert "log.dirs" in refused.value.args[0].str()
    with pytest.raises(KafkaException) as refused:
        alter("log.segment.bytes", "0")
    assert "log.segment.bytes" in refused.value.args[0].str()
    consumer.close()


def test_kafka_python_create_partitions_and_alter_configs(broker):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import InvalidPartitionsError

    def topic_configs(admin):
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
        return described["topic"]["kp-admin"]

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("kp-admin", 1, 1)])
        admin.create_partitions({"kp-admin": 4})
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"kp-admin": 2})
        # IncrementalAlterConfigs (kafka-python's choice when the broker has it), then the legacy
        # AlterConfigs, to which kafka-python adds the other modified keys itself.
        resource = ConfigResource(ConfigResourceType.TOPIC, "kp-admin", configs={"retention.ms": "7200000"})
        assert admin.alter_configs([resource]) == {"topic": {"kp-admin": "OK"}}
        resource = ConfigResource(ConfigResourceType.TOPIC, "kp-admin", configs={"segment.ms": "600000"})
        assert admin.alter_configs([resource], incremental=False) == {"topic": {"kp-admin": "OK"}}
        bad = ConfigResource(ConfigResourceType.TOPIC, "kp-admin", configs={"cleanup.policy": "shred"})
        refused = admin.alter_configs([bad])["topic"]["kp-admin"]
        assert "InvalidConfigurationError" in refused, refused
    finally:
        admin.close()
    broker.restart()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        (described,) = admin.describe_topics(["kp-admin"])
        assert len(described["partitions"]) == 4
        modified = topic_configs(admin)
        assert {key: entry["value"] for key, entry in modified.items()} == {
            "retention.ms": "7200000", "segment.ms": "600000"}
        assert {entry["config_source"] for entry in modified.values()} == {"DYNAMIC_TOPIC_CONFIG"}
    finally:
        admin.close()
