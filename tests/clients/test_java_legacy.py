"""Old Apache Kafka Java clients, the population KIP-283 was written for, against Skiff: for each
kafka-clients release in tests/clients/java/legacy/versions.txt, a producer per codec and a group
consumer that reads exactly, commits, and resumes from the commit in a second member. The topic
also holds records a modern client wrote first (magic 2, lz4), so these consumers (Fetch v1 with
magic 0 for 0.9, Fetch v2/v3 with magic 1 for 0.10.x, Fetch v5+ for later ones) read down-converted
data."""

import pytest

from clients import ck_produce
from conftest import messages
from java_programs import LEGACY_VERSIONS, legacy_classpath, results, run_java

PRE_RECORDS = 10
PER_CODEC = 5
PARTITIONS = 2
# lz4 with magic 0 uses the pre-KAFKA-3160 frame checksum: the 0.9 producer exercises exactly that.
CODECS = "none,gzip,snappy,lz4"


def create_topic(bootstrap, topic):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_legacy_java_client(broker_factory, legacy_classes, version):
    broker = broker_factory("group.initial.rebalance.delay.ms=0")
    topic = f"legacy-{version}"
    create_topic(broker.bootstrap, topic)
    for partition in range(PARTITIONS):
        ck_produce(broker.bootstrap, topic, messages(PRE_RECORDS, prefix=f"pre-p{partition}"),
                   partition=partition, **{"compression.type": "lz4"})
    code, stdout, stderr = run_java(
        legacy_classes(version), legacy_classpath(version), "skiff.legacy.LegacyClient",
        broker.bootstrap, topic, f"legacy-group-{version}", PRE_RECORDS, PER_CODEC, CODECS,
    )
    status, detail = results(stdout).get("legacy", ("MISSING", "no RESULT line"))
    assert code == 0 and status == "PASS", f"kafka-clients {version}: {status} {detail}\n{stdout}\n{stderr[-6000:]}"
