"""confluent-kafka's (librdkafka's) transactional API (issue 38) on one node: init_transactions,
begin, produce, commit and abort, read exactly by read_committed and read_uncommitted confluent
consumers; an open transaction holds read_committed at the last stable offset; and a
consume-transform-produce loop with send_offsets_to_transaction, whose group offsets and output
move only with the commit.

With SKIFF_ECO_KAFKA_LIBS set to Apache Kafka 4.1.1's jars the same test runs against Kafka
(ecosystem.py), the check of the test itself."""

import os
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from ecosystem import SingleNode, create_topic, wait_for

PER_TXN = 20
CTP_RECORDS = 40
TIMEOUT_S = 30
# The coordinator writes the markers after EndTxn answered: a read right after a commit waits for them.
SETTLE_S = 15


@pytest.fixture(scope="module")
def target():
    node = SingleNode()
    yield node
    node.stop()


def txn_producer(bootstrap, transactional_id):
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{transactional_id}-{os.getpid()}",
                         "transaction.timeout.ms": 60_000})
    producer.init_transactions(TIMEOUT_S)
    return producer


def send(producer, topic, tag, count=PER_TXN, partition=0):
    for index in range(count):
        producer.produce(topic, key=f"{tag}-{index}".encode(), value=f"{tag}-{index}".encode(), partition=partition)
    producer.flush(TIMEOUT_S)


def values(bootstrap, topic, isolation, partitions=1):
    """Every value of `topic` to the end offsets of `isolation` (the LSO for read_committed), per
    partition in order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}", "isolation.level": isolation,
                         "enable.auto.commit": False, "enable.partition.eof": True})
    seen = []
    try:
        for partition in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, 0)])
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                assert time.monotonic() < deadline, f"reading {topic}/{partition} ({isolation})"
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise AssertionError(f"reading {topic}: {message.error()}")
                seen.append(message.value().decode())
    finally:
        consumer.close()
    return seen


def end_offsets(bootstrap, topic, isolation, partitions):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks", "isolation.level": isolation})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def await_stable(bootstrap, topic, partitions):
    """Until no transaction is open on `topic`: its last stable offsets (ListOffsets read_committed)
    reached its high watermarks."""
    wait_for(lambda: end_offsets(bootstrap, topic, "read_committed", partitions)
             == end_offsets(bootstrap, topic, "read_uncommitted", partitions), SETTLE_S, f"{topic} stable")


def tagged(*tags, count=PER_TXN):
    return [f"{tag}-{index}" for tag in tags for index in range(count)]


def settled(expected, read, what):
    wait_for(lambda: read() == expected, SETTLE_S, what)


def test_commit_abort_and_the_last_stable_offset(target):
    bootstrap, topic = target.bootstrap, "ck-txn"
    create_topic(bootstrap, topic)
    producer = txn_producer(bootstrap, "ck-commit-abort")
    for tag, commit in (("c1", True), ("a1", False), ("c2", True)):
        producer.begin_transaction()
        send(producer, topic, tag)
        producer.commit_transaction(TIMEOUT_S) if commit else producer.abort_transaction(TIMEOUT_S)
    settled(tagged("c1", "c2"), lambda: values(bootstrap, topic, "read_committed"), "read_committed: the commits")
    assert values(bootstrap, topic, "read_uncommitted") == tagged("c1", "a1", "c2")

    producer.begin_transaction()
    send(producer, topic, "open")
    assert values(bootstrap, topic, "read_committed") == tagged("c1", "c2"), "read_committed passed an open transaction"
    assert values(bootstrap, topic, "read_uncommitted") == tagged("c1", "a1", "c2", "open")
    producer.commit_transaction(TIMEOUT_S)
    settled(tagged("c1", "c2", "open"), lambda: values(bootstrap, topic, "read_committed"), "the open one committed")


def committed_offsets(bootstrap, group, topic, partitions):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    finally:
        consumer.close()


def test_consume_transform_produce_with_send_offsets(target):
    bootstrap, source, sink, group = target.bootstrap, "ck-ctp-in", "ck-ctp-out", "ck-ctp"
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, sink, partitions=2)
    plain = Producer({"bootstrap.servers": bootstrap})
    for index in range(CTP_RECORDS):
        plain.produce(source, value=f"in-{index}".encode(), partition=index % 2)
    assert plain.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([source])
    producer = txn_producer(bootstrap, "ck-ctp")
    try:
        for commit in (False, True):
            batch = poll_records(consumer, CTP_RECORDS)
            producer.begin_transaction()
            for message in batch:
                producer.produce(sink, value=message.value().replace(b"in-", b"out-"), partition=message.partition())
            # Delivered before the abort: librdkafka's abort_transaction purges what it has not sent
            # yet, and the aborted round must be in the log for read_committed to have to hide it.
            assert producer.flush(TIMEOUT_S) == 0
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT_S)
            if commit:
                producer.commit_transaction(TIMEOUT_S)
                break
            producer.abort_transaction(TIMEOUT_S)
            # Once the abort markers are in (no transaction open), neither the group's offsets (read
            # with require_stable, librdkafka's default under read_committed) nor the output moved.
            await_stable(bootstrap, sink, 2)
            assert committed_offsets(bootstrap, group, source, 2) == {}
            assert values(bootstrap, sink, "read_committed", 2) == []
            for tp in consumer.assignment():
                consumer.seek(TopicPartition(source, tp.partition, 0))
        want = {0: CTP_RECORDS // 2, 1: CTP_RECORDS // 2}
        wait_for(lambda: committed_offsets(bootstrap, group, source, 2) == want, SETTLE_S, "the group's offsets")
        expected = sorted(f"out-{index}" for index in range(CTP_RECORDS))
        settled(expected, lambda: sorted(values(bootstrap, sink, "read_committed", 2)), "the output, each record once")
        assert len(values(bootstrap, sink, "read_uncommitted", 2)) == 2 * CTP_RECORDS
    finally:
        consumer.close()


def poll_records(consumer, count):
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"polled {len(got)} of {count}"
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert not message.error(), message.error()
        got.append(message)
    return got
