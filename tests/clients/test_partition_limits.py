"""Partition admission under limits (issue 20 item 3 and 4), with confluent-kafka's AdminClient.

`test_file_limit`: a broker started under `prlimit --nofile=512` takes topics until the open-file
limit would leave too little for connections and reads; then CreateTopics and CreatePartitions
answer POLICY_VIOLATION with a message naming RLIMIT_NOFILE, while the partitions already there
keep taking produces and serving fetches, and new clients still connect. Each partition holds one
descriptor (its active segment's log), so about 512 - 128 reserved - the broker's own files fit.

`test_partition_count_limit`: `max.broker.partitions` refuses what would pass it, naming the key.
"""

import re
import shutil
import tempfile

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from confluent_kafka.error import KafkaException

from clients import ck_consume, ck_produce
from conftest import Broker, messages

TIMEOUT_S = 30
FILE_LIMIT = 512
PARTITIONS_PER_TOPIC = 40
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def create(admin, name, partitions):
    """Creates `name`; None on success, else the KafkaError."""
    future = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name]
    try:
        future.result(TIMEOUT_S)
        return None
    except KafkaException as error:
        return error.args[0]


def grow(admin, name, partitions):
    future = admin.create_partitions([NewPartitions(name, partitions)])[name]
    try:
        future.result(TIMEOUT_S)
        return None
    except KafkaException as error:
        return error.args[0]


@pytest.fixture
def limited_broker():
    data_dir = tempfile.mkdtemp(prefix="skiff-test-")
    broker = Broker(
        data_dir,
        command_prefix=["prlimit", f"--nofile={FILE_LIMIT}:{FILE_LIMIT}"],
    ).start()
    yield broker
    alive = broker.alive()
    code = broker.stop()
    if alive and code not in (0, None):
        print("".join(broker.log_lines[-50:]))
    shutil.rmtree(data_dir, ignore_errors=True)


def test_file_limit(limited_broker):
    broker = limited_broker
    plain = [ANSI.sub("", line) for line in broker.log_lines]
    assert any(f"soft={FILE_LIMIT}" in line and "RLIMIT_NOFILE" in line for line in plain), \
        "the limit in force is logged"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert create(admin, "kept", 1) is None
    sent = messages(20, prefix="before")
    ck_produce(broker.bootstrap, "kept", sent)

    created, refusal = 0, None
    for index in range(FILE_LIMIT // PARTITIONS_PER_TOPIC + 2):
        refusal = create(admin, f"filler-{index}", PARTITIONS_PER_TOPIC)
        if refusal is not None:
            break
        created += PARTITIONS_PER_TOPIC
    assert refusal is not None, "the file limit must stop creation"
    assert refusal.code() == KafkaError.POLICY_VIOLATION, refusal
    assert "RLIMIT_NOFILE" in refusal.str(), refusal.str()
    # One descriptor per partition: most of the limit went to partitions, not a third of it.
    assert created >= 240, f"only {created} partitions fit under {FILE_LIMIT} files"

    # Growing a topic is refused the same way, and nothing half-made is left behind.
    grown = grow(admin, "kept", PARTITIONS_PER_TOPIC + 1)
    assert grown is not None and grown.code() == KafkaError.POLICY_VIOLATION, grown
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    assert len(topics["kept"].partitions) == 1
    assert f"filler-{created // PARTITIONS_PER_TOPIC}" not in topics

    # The existing partitions keep serving, to new clients too.
    more = messages(20, prefix="after")
    ck_produce(broker.bootstrap, "kept", more)
    ck_produce(broker.bootstrap, "filler-0", more, partition=PARTITIONS_PER_TOPIC - 1)
    seen, errors = ck_consume(broker.bootstrap, "kept", len(sent) + len(more))
    assert not errors, errors
    assert [(key, value) for _, key, value in seen] == sent + more
    seen, errors = ck_consume(broker.bootstrap, "filler-0", len(more), partition=PARTITIONS_PER_TOPIC - 1)
    assert not errors and len(seen) == len(more), (seen, errors)
    assert broker.alive()


def test_partition_count_limit(broker_factory):
    broker = broker_factory("max.broker.partitions=20")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert create(admin, "ten", 10) is None
    refusal = create(admin, "fifteen", 15)
    assert refusal is not None and refusal.code() == KafkaError.POLICY_VIOLATION, refusal
    assert "max.broker.partitions" in refusal.str(), refusal.str()
    refusal = grow(admin, "ten", 30)
    assert refusal is not None and refusal.code() == KafkaError.POLICY_VIOLATION, refusal
    assert grow(admin, "ten", 12) is None
    ck_produce(broker.bootstrap, "ten", messages(5), partition=11)
    seen, errors = ck_consume(broker.bootstrap, "ten", 5, partition=11)
    assert not errors and len(seen) == 5
