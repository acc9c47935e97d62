"""Apache Flink's KafkaSink with DeliveryGuarantee.EXACTLY_ONCE (issue 38), a MiniCluster job
(tests/clients/java/flink/src/skiff/flink/ExactlyOnceJob.java) in one JVM: flink-connector-kafka
4.0.0-2.0 on Flink 2.0.0, whose kafka-clients 3.9.0 uses request versions a Kafka 4.x broker still
serves, and the first transaction protocol (no KIP-890 epoch bump per transaction: Produce <= v11,
EndTxn <= v4, so a broker verifies each partition with its coordinator). The job writes 0..N-1, fails once
half-way and restarts from its last checkpoint; read with read_committed the topic holds every
number exactly once (read_uncommitted also shows the aborted attempt's records).

In CI (about 40 s with a one-node Kafka 4.1.1; Flink's jars, 80 MB, are resolved by
scripts/install-clients.sh into tests/clients/java/target/classpath-flink.txt). Against Apache
Kafka 4.1.1 (SKIFF_ECO_KAFKA_LIBS, as ecosystem.py says), from the repository root:

    SKIFF_ECO_KAFKA_LIBS=/tmp/kafka-4.1.1/libs python3 -m pytest tests/clients/test_transactions_flink.py -q

On Apache Kafka 4.1.1 it passes (40,000 records, one injected failure, each record once)."""

import os
import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from conftest import SUMMARY_LINES
from ecosystem import TARGET_NAME, SingleNode, create_topic
from java_programs import JAVA_DIR, classpath, javac, run_java

TOPIC = "flink-exactly-once"
RECORDS = 40_000
READ_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def flink_classes(tmp_path_factory):
    return javac(sorted((JAVA_DIR / "flink" / "src").rglob("*.java")), classpath("classpath-flink.txt"),
                 tmp_path_factory.mktemp("flink-classes"))


def values(bootstrap, isolation):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"flink-{isolation}", "isolation.level": isolation,
                         "enable.auto.commit": False, "enable.partition.eof": True})
    seen = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return seen
                raise AssertionError(message.error())
            seen.append(int(message.value()))
        raise AssertionError(f"reading {TOPIC} ({isolation}) took over {READ_TIMEOUT_S} s")
    finally:
        consumer.close()


def test_flink_kafka_sink_exactly_once(flink_classes):
    target = SingleNode()
    try:
        create_topic(target.bootstrap, TOPIC)
        started = time.monotonic()
        code, stdout, stderr = run_java(flink_classes, classpath("classpath-flink.txt"), "skiff.flink.ExactlyOnceJob",
                                        target.bootstrap, TOPIC, RECORDS, f"skiff-flink-{os.getpid()}")
        took = time.monotonic() - started
        assert code == 0 and "JOB FINISHED failed-once=true" in stdout, f"exit {code}\n{stdout}\n{stderr[-6000:]}"
        committed = values(target.bootstrap, "read_committed")
        assert sorted(committed) == list(range(RECORDS)), (
            f"{len(committed)} records, {len(set(committed))} distinct, of {RECORDS}")
        everything = values(target.bootstrap, "read_uncommitted")
        SUMMARY_LINES.append(f"flink EXACTLY_ONCE on {TARGET_NAME}: {RECORDS} records each once read_committed "
                             f"({len(everything)} read_uncommitted, the aborted attempt's included), job {took:.0f} s")
    finally:
        target.stop()


