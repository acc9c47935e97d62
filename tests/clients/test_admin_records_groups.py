"""The admin APIs for records, groups and log dirs (issue 14 item 4) through confluent-kafka's and
kafka-python's admin clients: DeleteRecords raises the log start (ListOffsets, consumers and a
restart see it), DeleteGroups and OffsetDelete refuse live groups and subscribed topics with Kafka's
errors, DescribeLogDirs shows the one log dir with partition sizes, ListPartitionReassignments lists
none on one node."""

import os

import pytest

from clients import (ck_consume, ck_group_consumer, ck_group_poll, kp_group_consumer, kp_group_poll,
                     kp_produce)
from conftest import messages

RECORDS = 50
TIMEOUT_S = 30


def produce(broker, topic, count=RECORDS):
    kp_produce(broker.bootstrap, topic, messages(count, prefix=topic))


def kp_admin(broker):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)


def ck_admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def ck_earliest(admin, topic):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(TIMEOUT_S).offset


def commit_and_leave(broker, topic, group):
    """A kafka-python group member that consumes, commits and leaves: the group is Empty."""
    consumer = kp_group_consumer(broker.bootstrap, topic, group)
    try:
        assert kp_group_poll(consumer, 1), "consumed nothing"
        consumer.commit()
    finally:
        consumer.close()


def live_member(broker, topic, group):
    """A confluent-kafka member that stays in `group`, subscribed to `topic`, with a commit."""
    consumer = ck_group_consumer(broker.bootstrap, topic, group)
    assert ck_group_poll(consumer, 1), "consumed nothing"
    consumer.commit(asynchronous=False)
    return consumer


# --- DeleteRecords ------------------------------------------------------------------------------

def test_confluent_delete_records_raises_the_log_start_for_good(broker):
    from confluent_kafka import KafkaException, TopicPartition

    produce(broker, "ck-trim")
    admin = ck_admin(broker)
    tp = TopicPartition("ck-trim", 0, 20)
    deleted = admin.delete_records([tp])[tp].result(TIMEOUT_S)
    assert deleted.low_watermark == 20
    assert ck_earliest(admin, "ck-trim") == 20
    seen, errors = ck_consume(broker.bootstrap, "ck-trim", RECORDS - 20, offset=-2)
    assert not errors
    assert [offset for offset, _, _ in seen] == list(range(20, RECORDS))
    # Past the high watermark: OFFSET_OUT_OF_RANGE, and nothing moves.
    beyond = TopicPartition("ck-trim", 0, RECORDS + 1)
    with pytest.raises(KafkaException, match="OFFSET_OUT_OF_RANGE"):
        admin.delete_records([beyond])[beyond].result(TIMEOUT_S)
    # -1 (librdkafka's OFFSET_END): everything up to the high watermark.
    end = TopicPartition("ck-trim", 0, -1)
    assert admin.delete_records([end])[end].result(TIMEOUT_S).low_watermark == RECORDS
    broker.restart()
    assert ck_earliest(ck_admin(broker), "ck-trim") == RECORDS


def test_kafka_python_delete_records(broker):
    from kafka import TopicPartition

    produce(broker, "kp-trim")
    admin = kp_admin(broker)
    try:
        tp = TopicPartition("kp-trim", 0)
        answer = admin.delete_records({tp: 7})
        assert answer[tp]["low_watermark"] == 7, answer
    finally:
        admin.close()


# --- DeleteGroups and OffsetDelete --------------------------------------------------------------

def test_confluent_delete_consumer_groups(broker):
    from confluent_kafka import KafkaException

    produce(broker, "ck-groups")
    commit_and_leave(broker, "ck-groups", "ck-idle")
    live = live_member(broker, "ck-groups", "ck-live")
    try:
        admin = ck_admin(broker)
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups(["ck-live"])["ck-live"].result(TIMEOUT_S)
        admin.delete_consumer_groups(["ck-idle"])["ck-idle"].result(TIMEOUT_S)
        listed = admin.list_consumer_groups().result(TIMEOUT_S)
        ids = {group.group_id for group in listed.valid}
        assert "ck-idle" not in ids and "ck-live" in ids, ids
        with pytest.raises(KafkaException, match="GROUP_ID_NOT_FOUND"):
            admin.delete_consumer_groups(["ck-idle"])["ck-idle"].result(TIMEOUT_S)
    finally:
        live.close()


def test_kafka_python_delete_groups_and_group_offsets(broker):
    from kafka import TopicPartition
    from kafka.errors import (GroupIdNotFoundError, GroupSubscribedToTopicError, NoError,
                              NonEmptyGroupError)

    produce(broker, "kp-groups")
    produce(broker, "kp-other")
    commit_and_leave(broker, "kp-other", "kp-live")  # an offset on a topic nobody consumes
    commit_and_leave(broker, "kp-groups", "kp-idle")
    live = live_member(broker, "kp-groups", "kp-live")
    admin = kp_admin(broker)
    try:
        # kafka-python names each group's outcome: "OK" or the error class's name.
        groups = dict(admin.delete_groups(["kp-live", "kp-unknown"]))
        assert groups == {"kp-live": NonEmptyGroupError.__name__,
                          "kp-unknown": GroupIdNotFoundError.__name__}, groups

        subscribed, other = TopicPartition("kp-groups", 0), TopicPartition("kp-other", 0)
        answer = admin.delete_group_offsets("kp-live", [subscribed, other])
        assert answer == {subscribed: GroupSubscribedToTopicError, other: NoError}, answer
        left = admin.list_group_offsets({"kp-live": None})["kp-live"]
        assert other not in left and subscribed in left, left

        assert dict(admin.delete_groups(["kp-idle"])) == {"kp-idle": "OK"}
        assert "kp-idle" not in repr(admin.list_groups())
        assert "kp-live" in repr(admin.list_groups())
    finally:
        admin.close()
        live.close()


# --- DescribeLogDirs and ListPartitionReassignments ---------------------------------------------

def test_kafka_python_describe_log_dirs(broker):
    produce(broker, "kp-dirs")
    admin = kp_admin(broker)
    try:
        described = admin.describe_log_dirs()
    finally:
        admin.close()
    (one_broker,) = described
    (log_dir,) = one_broker["log_dirs"]
    assert log_dir["error_code"] == 0, log_dir
    assert log_dir["log_dir"] == os.path.realpath(broker.data_dir), log_dir
    assert 0 <= log_dir["usable_bytes"] <= log_dir["total_bytes"], log_dir
    (topic,) = [topic for topic in log_dir["topics"] if topic["name"] == "kp-dirs"]
    (partition,) = topic["partitions"]
    assert partition["partition_index"] == 0 and partition["partition_size"] > 0, partition
    assert partition["offset_lag"] == 0 and partition["is_future_key"] is False, partition


def test_kafka_python_list_partition_reassignments_is_empty(broker):
    produce(broker, "kp-moves", count=1)
    admin = kp_admin(broker)
    try:
        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments({"kp-moves": [0]}) == {}
    finally:
        admin.close()
