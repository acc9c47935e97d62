"""A legacy 0.10 consumer downstream of transactions (issue 38, beyond Kafka): kafka-python
pinned to api_version (0, 10, 1) (Fetch v3, no isolation level, magic 1 down-converted) reads a
topic written by a transactional producer (committed, aborted, committed, then one left open).

With the topic's `skiff.legacy.isolation.level=read_uncommitted` (the default, Kafka's behaviour)
it reads every transaction's records, the aborted and the open one too (down-conversion drops only
the control batches). With `read_committed` it reads only the committed records and stops at the
last stable offset, so the open transaction appears once it commits.

Skiff-only: Kafka 4 serves no Fetch v0-v3 and has no such topic config, so with
SKIFF_ECO_KAFKA_LIBS set (the Kafka check run of ecosystem.py) this file is skipped; on Skiff
nothing is skipped."""

import os
import time

import pytest
from confluent_kafka import Producer

from ecosystem import ON_KAFKA, SingleNode, create_topic, topic_configs

pytestmark = pytest.mark.skipif(ON_KAFKA, reason="Skiff-only: Kafka 4 serves no Fetch v0-v3 nor skiff.legacy.isolation.level")

PER_TXN = 15
LEGACY_API = (0, 10, 1)
READ_TIMEOUT_S = 30
# After the expected records, a legacy read keeps polling this long to show that nothing more comes.
QUIET_S = 2.0
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def target():
    node = SingleNode()
    yield node
    node.stop()


def tagged(*tags):
    return [f"{tag}-{index}" for tag in tags for index in range(PER_TXN)]


def write_transactions(bootstrap, topic):
    """Committed c1, aborted a1, committed c2, then `open` sent and flushed but not ended; returns
    the producer holding the open transaction."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{os.getpid()}",
                         "transaction.timeout.ms": 120_000})
    producer.init_transactions(TIMEOUT_S)
    for tag, end in (("c1", "commit"), ("a1", "abort"), ("c2", "commit"), ("open", None)):
        producer.begin_transaction()
        for index in range(PER_TXN):
            producer.produce(topic, key=f"{tag}-{index}".encode(), value=f"{tag}-{index}".encode(), partition=0)
        producer.flush(TIMEOUT_S)
        if end == "commit":
            producer.commit_transaction(TIMEOUT_S)
        elif end == "abort":
            producer.abort_transaction(TIMEOUT_S)
    return producer


def legacy_read(bootstrap, topic, expected_count):
    """The values a 0.10.1 consumer reads from offset 0: until `expected_count` arrived and then
    QUIET_S more (anything beyond would show), or READ_TIMEOUT_S."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=LEGACY_API, enable_auto_commit=False,
                             group_id=None)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    seen = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                seen.extend(record.value.decode() for record in records)
            if len(seen) >= expected_count:
                quiet_until = quiet_until or time.monotonic() + QUIET_S
                if time.monotonic() >= quiet_until:
                    break
    finally:
        consumer.close()
    return seen


@pytest.mark.parametrize("level", ["read_uncommitted", "read_committed"])
def test_legacy_consumer_reads_transactions_by_the_topic_isolation_level(target, level):
    bootstrap, topic = target.bootstrap, f"legacy-txn-{level.replace('_', '-')}"
    create_topic(bootstrap, topic, config={"skiff.legacy.isolation.level": level})
    assert topic_configs(bootstrap, topic)["skiff.legacy.isolation.level"][0] == level
    producer = write_transactions(bootstrap, topic)
    if level == "read_uncommitted":
        # Kafka's behaviour for a consumer with no isolation level: every data record.
        assert legacy_read(bootstrap, topic, 4 * PER_TXN) == tagged("c1", "a1", "c2", "open")
        producer.commit_transaction(TIMEOUT_S)
        return
    committed = tagged("c1", "c2")
    assert legacy_read(bootstrap, topic, len(committed)) == committed, "read_committed passed the LSO or kept an abort"
    producer.commit_transaction(TIMEOUT_S)
    started = time.monotonic()
    while True:
        seen = legacy_read(bootstrap, topic, len(committed) + PER_TXN)
        if seen == tagged("c1", "c2", "open") or time.monotonic() - started > TIMEOUT_S:
            break
    assert seen == tagged("c1", "c2", "open"), "the committed transaction after the LSO moved"
