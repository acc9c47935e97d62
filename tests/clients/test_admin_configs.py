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


def test_confluent_describe_broker_configs(broker_factory):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

    broker = broker_factory("node.id=3", "log.retention.ms=3600000")
    admin = ck_admin(broker)
    resource = ConfigResource(ResourceType.BROKER, "3")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    retention = configs["log.retention.ms"]
    assert (retention.value, source_of(retention)) == ("3600000", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert retention.is_read_only
    assert source_of(configs["num.partitions"]) == ConfigSource.DEFAULT_CONFIG.value

    # Skiff changes no broker config at runtime: a clear refusal, as Kafka gives for a static key.
    change = ConfigResource(ResourceType.BROKER, "3", incremental_configs=[
        ConfigEntry("log.retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([change])[change].result(TIMEOUT_S)
    assert "log.retention.ms" in refused.value.args[0].str()


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
