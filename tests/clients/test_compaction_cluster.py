"""A compacted topic on 3 brokers: every replica cleans its own log (leader and followers alike,
each up to its own high watermark), so their bytes may differ, but every offset two replicas both
hold carries the same key, value, headers and timestamp; after the leader is killed, the new
leader serves every key's latest value, and the killed broker catches up on a compacted leader's
log (offsets with gaps) when it returns."""

import glob
import os
import signal
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from test_cluster import SESSION_MS, dump_logs, metrics, wait_for
from test_replication import LAG_MS, REPLICA_SETTINGS, describe, ready, start_replicated

TOPIC = "compacted-rf3"
KEYS = 40
VERSIONS = 12
CLEANER_SETTINGS = REPLICA_SETTINGS + ("log.cleaner.backoff.ms=100", "log.retention.check.interval.ms=200")


@pytest.fixture
def compacting3(etcd):
    cluster = ready(start_replicated(etcd, CLEANER_SETTINGS))
    yield cluster
    for broker in cluster.running():
        broker.process.send_signal(signal.SIGCONT)
    dump_logs(cluster)
    cluster.stop()


def varint(data, position):
    """A zig-zag varint of a v2 record at `position`: (value, next position)."""
    shift = result = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7


def records_on_disk(data_dir):
    """{offset: (timestamp, key, value, headers)} of every record in the replica's segments
    (uncompressed batches: the producer here sends none compressed). A segment the cleaner swaps
    out between the listing and the read starts the listing again."""
    for _ in range(50):
        try:
            return read_segments(sorted(glob.glob(os.path.join(data_dir, f"{TOPIC}-0", "*.log"))))
        except FileNotFoundError:
            time.sleep(0.05)
    raise AssertionError(f"the segments of {data_dir} kept changing under the read")


def read_segments(paths):
    found = {}
    for path in paths:
        with open(path, "rb") as segment:
            data = segment.read()
        position = 0
        while position + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, position)
            if length <= 0 or position + 12 + length > len(data):
                break
            attributes, = struct.unpack_from(">h", data, position + 21)
            assert attributes & 0x07 == 0, "uncompressed batches only"
            base_timestamp, = struct.unpack_from(">q", data, position + 27)
            count, = struct.unpack_from(">i", data, position + 57)
            cursor = position + 61
            for _ in range(count):
                size, cursor = varint(data, cursor)
                end = cursor + size
                cursor += 1  # record attributes
                timestamp_delta, cursor = varint(data, cursor)
                offset_delta, cursor = varint(data, cursor)
                fields = []
                for _ in range(2):
                    field_length, cursor = varint(data, cursor)
                    fields.append(None if field_length < 0 else data[cursor:cursor + field_length])
                    cursor += max(field_length, 0)
                headers = data[cursor:end]
                found[base + offset_delta] = (base_timestamp + timestamp_delta, fields[0], fields[1], headers)
                cursor = end
            position += 12 + length
    return found


def produce_versions(bootstrap):
    """KEYS keys x VERSIONS versions with acks=all; the latest value of each key."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "compression.type": "none", "enable.idempotence": True})
    latest = {}
    for version in range(VERSIONS):
        for key in range(KEYS):
            value = f"k{key}-v{version}".encode()
            producer.produce(TOPIC, key=f"k{key}".encode(), value=value, partition=0,
                             headers=[("version", str(version).encode())])
            latest[f"k{key}".encode()] = value
        producer.flush(30)
    assert producer.flush(30) == 0
    return latest


def latest_per_key(bootstrap):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    high = None
    for _ in range(150):
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
            break
        except KafkaException as error:
            # A new leader answers OFFSET_NOT_AVAILABLE until its HW reaches its epoch's start
            # (KIP-207), and NOT_LEADER_OR_FOLLOWER until it has applied its leadership (its
            # metadata may name it a moment earlier, as Kafka's may); clients retry both.
            retriable = (KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
                         KafkaError.LEADER_NOT_AVAILABLE)
            if error.args[0].code() not in retriable:
                raise
            time.sleep(0.1)
    assert high is not None, "the high watermark never became available"
    seen, last_offset = {}, -1
    deadline_polls = 600
    while last_offset < high - 1 and deadline_polls:
        deadline_polls -= 1
        message = consumer.poll(0.2)
        if message is None or message.error():
            continue
        assert message.offset() > last_offset, "offsets only grow, gaps and all"
        last_offset = message.offset()
        seen[message.key()] = message.value()
    consumer.close()
    return seen


def cleanings(broker):
    return metrics(broker).get("skiff_log_cleaner_cleanings_total", 0)


def test_replicas_clean_their_own_logs_and_agree_on_every_offset_they_both_hold(compacting3):
    cluster = compacting3
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "300",
              "min.cleanable.dirty.ratio": "0.01", "min.insync.replicas": "2"}
    admin.create_topics([NewTopic(TOPIC, 1, 3, config=config)])[TOPIC].result(30)
    wait_for(lambda: describe(cluster.brokers[0].bootstrap, TOPIC)[0][2] == [0, 1, 2], 15, "a full ISR")
    truth = produce_versions(cluster.brokers[0].bootstrap)
    written = KEYS * VERSIONS
    # Every replica compacts its own log: each ends up far below what was written.
    wait_for(lambda: all(cleanings(b) > 0 for b in cluster.brokers), 30, "a cleaning on every broker")
    wait_for(lambda: all(len(records_on_disk(b.data_dir)) < written // 2 for b in cluster.brokers),
             30, "every replica compacted")
    figures = metrics(cluster.brokers[0])
    for name in ("max_dirty_percent", "recopy_percent", "max_clean_time_secs", "max_compaction_delay_secs",
                 "max_buffer_utilization_percent", "uncleanable_partitions_count"):
        assert f"skiff_log_cleaner_{name}" in figures, name
    assert figures["skiff_log_cleaner_uncleanable_partitions_count"] == 0
    replicas = [records_on_disk(b.data_dir) for b in cluster.brokers]
    for i in range(3):
        for j in range(i + 1, 3):
            common = replicas[i].keys() & replicas[j].keys()
            assert common, (i, j)
            for offset in common:
                assert replicas[i][offset] == replicas[j][offset], (i, j, offset)
    assert latest_per_key(cluster.brokers[0].bootstrap) == truth

    # The leader dies: the new one serves every key's latest value.
    leader = describe(cluster.brokers[0].bootstrap, TOPIC)[0][0]
    assert leader >= 0
    victim = cluster.brokers[leader]
    port = victim.port
    victim.stop(signal.SIGKILL)
    survivor = cluster.brokers[(leader + 1) % 3]
    wait_for(lambda: describe(survivor.bootstrap, TOPIC)[0][0] not in (-1, leader),
             SESSION_MS / 1000 + 15, "a new leader")
    assert latest_per_key(survivor.bootstrap) == truth
    # More versions while it is down, then it returns and follows the compacted leader.
    more = produce_versions(survivor.bootstrap)
    victim.start(port=port)
    wait_for(lambda: describe(survivor.bootstrap, TOPIC)[0][2] == [0, 1, 2],
             LAG_MS / 1000 + 30, "the killed broker back in the ISR")
    assert latest_per_key(survivor.bootstrap) == more
    replicas = [records_on_disk(b.data_dir) for b in cluster.brokers]
    for i in range(3):
        for j in range(i + 1, 3):
            for offset in replicas[i].keys() & replicas[j].keys():
                assert replicas[i][offset] == replicas[j][offset], (i, j, offset)
