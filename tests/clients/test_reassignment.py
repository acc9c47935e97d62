"""Partition reassignment (KIP-455) on 3 brokers and the shared etcd, with Apache Kafka's own
`kafka-reassign-partitions` tool (ReassignPartitionsCommand). An RF 2 partition written by acks=all
producers throughout is moved to the third broker and its follower, away from its leader: the tool's
--execute starts it, ListPartitionReassignments shows it in progress (the new replica catches up
under `skiff.reassignment.throttle.bytes.per.second`, so it takes at least the time that rate
allows), --verify says "still in progress", then "completed"; the partition ends with the
replicas, ISR and leader asked for, the new leader serves every acknowledged record, and the
removed broker's log directory for the partition is gone. A second reassignment cancelled with the
tool's --cancel goes back to the replicas it started from (and its added replica's log goes too);
a cancellation with nothing in progress is NO_REASSIGNMENT_IN_PROGRESS (85), and naming a broker
that is not registered is INVALID_REPLICA_ASSIGNMENT (39)."""

import json
import os
import struct
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from java_programs import run_tools, temp_dir
from test_cluster import wait_for
from test_replication_hw import Reader, exchange
from test_replication import (REPLICA_SETTINGS, TOPIC, Producers, describe, read_all,
                              replicated_cluster)

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
NO_REASSIGNMENT_IN_PROGRESS = 85
INVALID_REPLICA_ASSIGNMENT = 39
THROTTLE_BYTES_PER_SECOND = 1024 * 1024
# Written before the reassignment, so that the new replica needs a few seconds at the throttle's
# rate: the reassignment is seen in progress, and a cancellation finds it still running.
BULK_BYTES = 4 * 1024 * 1024
BULK_RECORD_BYTES = 16 * 1024


@pytest.fixture
def reassigning3(etcd):
    yield from replicated_cluster(
        etcd, REPLICA_SETTINGS + (f"skiff.reassignment.throttle.bytes.per.second={THROTTLE_BYTES_PER_SECOND}",))


def varint(value):
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


class CompactReader(Reader):
    """Reads a flexible response body: varints, compact strings and arrays, tagged fields."""

    def uvarint(self):
        shift = value = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    def compact_string(self):
        length = self.uvarint() - 1
        value = self.data[self.at:self.at + max(length, 0)]
        self.at += max(length, 0)
        return value.decode() if length >= 0 else None

    def array(self, element):
        return [element() for _ in range(self.uvarint() - 1)]

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.at += self.uvarint()


def flexible_exchange(broker, api_key, body):
    """One v0 request of a flexible API (request header v2: no tags) to exactly `broker`; a
    CompactReader of the response body (after response header v1's tags)."""
    answer = exchange(broker, api_key, 0, b"\x00" + body, timeout_s=40)
    reader = CompactReader(answer.data)
    reader.at = answer.at
    reader.tags()
    return reader


def list_reassignments(broker):
    """ListPartitionReassignments v0 for every partition: {(topic, partition): (replicas, adding,
    removing)}."""
    answer = flexible_exchange(broker, 46, struct.pack(">i", 10000) + b"\x00" + b"\x00")
    _throttle, error = answer.take(">ih")
    answer.compact_string()
    assert error == 0, error
    listed = {}

    def ids():
        return answer.array(lambda: answer.take(">i"))

    def partition(topic):
        index = answer.take(">i")
        listed[(topic, index)] = (ids(), ids(), ids())
        answer.tags()

    def topic():
        name = answer.compact_string()
        answer.array(lambda: partition(name))
        answer.tags()

    answer.array(topic)
    return listed


def alter_reassignment(broker, partition, replicas):
    """AlterPartitionReassignments v0 of one partition of TOPIC (`replicas` None cancels): (top-level
    error, partition error)."""
    name = TOPIC.encode()
    if replicas is None:
        replica_bytes = b"\x00"
    else:
        replica_bytes = varint(len(replicas) + 1) + b"".join(struct.pack(">i", r) for r in replicas)
    body = struct.pack(">i", 10000) + varint(2) + varint(len(name) + 1) + name + varint(2)
    body += struct.pack(">i", partition) + replica_bytes + b"\x00" + b"\x00" + b"\x00"
    answer = flexible_exchange(broker, 45, body)
    _throttle, error = answer.take(">ih")
    answer.compact_string()
    results = []

    def partition_result():
        index, code = answer.take(">ih")
        answer.compact_string()
        answer.tags()
        results.append((index, code))

    def topic():
        answer.compact_string()
        answer.array(partition_result)
        answer.tags()

    answer.array(topic)
    assert [index for index, _ in results] == [partition], results
    return error, results[0][1]


def write_bulk(bootstrap):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": 256 * 1024, "compression.type": "none"})
    value = os.urandom(BULK_RECORD_BYTES)  # incompressible: the bytes on the wire are these
    for _ in range(BULK_BYTES // BULK_RECORD_BYTES):
        producer.produce(TOPIC, value=value, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0


def reassignment_file(directory, name, replicas):
    path = directory / name
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": replicas}]}))
    return str(path)


def test_kafkas_tool_moves_a_partition_off_its_leader_and_nothing_is_lost(reassigning3, java_classes):
    cluster = reassigning3
    started = time.monotonic()
    bootstrap = cluster.brokers[0].bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 2)])[TOPIC].result(30)

    def led_with_full_isr():
        leader_id, replicas, isr = describe(bootstrap)[0]
        return leader_id >= 0 and len(isr) == 2 and isr == replicas

    wait_for(led_with_full_isr, 15, "the partition led with a full ISR")
    metadata = admin.list_topics(TOPIC, timeout=10)
    leader, follower = metadata.topics[TOPIC].partitions[0].replicas
    third = ({0, 1, 2} - {leader, follower}).pop()
    assert metadata.topics[TOPIC].partitions[0].leader == leader
    write_bulk(bootstrap)
    producers = Producers(cluster)
    files = temp_dir("skiff-reassign-")
    move = reassignment_file(files, "move.json", [third, follower])
    via_broker = cluster.brokers[follower]  # any broker takes it: not the controller's job
    via = via_broker.bootstrap
    try:
        wait_for(lambda: producers.count() > 50, 30, "first acknowledgements")
        executed_at = time.monotonic()
        execute, verify_early = run_tools(java_classes, [
            [REASSIGN, "--bootstrap-server", via, "--reassignment-json-file", move, "--execute"],
            [REASSIGN, "--bootstrap-server", via, "--reassignment-json-file", move, "--verify"],
        ])
        status, out, err = execute
        assert status == 0, (out, err)
        assert f"Successfully started partition reassignment for {TOPIC}-0" in out, out
        listed = list_reassignments(cluster.brokers[leader])
        assert listed == {} or listed[(TOPIC, 0)][1:] == ([third], [leader]), listed
        status, out, err = verify_early
        assert f"Reassignment of partition {TOPIC}-0 is still in progress." in out, (status, out, err)
        wait_for(lambda: list_reassignments(via_broker) == {}, 40, "the reassignment finished")
        took = time.monotonic() - executed_at
        # The new replica fetched BULK_BYTES at the throttle's rate (a second's worth at once, and
        # a response may pass what it asked for by one batch).
        assert took >= (BULK_BYTES - THROTTLE_BYTES_PER_SECOND) / THROTTLE_BYTES_PER_SECOND * 0.8, took
        wait_for(lambda: all(describe(b.bootstrap)[0] == (third, sorted([third, follower]), sorted([third, follower]))
                             for b in cluster.brokers), 10, "every broker seeing the new replicas, ISR and leader")
        order = AdminClient({"bootstrap.servers": via}).list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
        assert list(order.replicas) == [third, follower], order.replicas
        acked_before = producers.count()
        wait_for(lambda: producers.count() > acked_before + 50, 30, "acknowledgements from the new leader")
    finally:
        producers.stop()
    acked = {**producers.idempotent, **producers.legacy}
    seen = read_all(cluster.brokers[third].bootstrap, max(acked) + 1, legacy=False)
    missing = [offset for offset, value in acked.items() if seen.get(offset) != value]
    assert not missing, missing[:10]
    removed = os.path.join(cluster.dirs[leader], f"{TOPIC}-0")
    wait_for(lambda: not os.path.exists(removed), 10, f"{removed} deleted")

    # A move back to the old leader, cancelled while it catches up: back where it started.
    back = reassignment_file(files, "back.json", [leader, third])
    verify_done, move_back, cancel = run_tools(java_classes, [
        [REASSIGN, "--bootstrap-server", via, "--reassignment-json-file", move, "--verify"],
        [REASSIGN, "--bootstrap-server", via, "--reassignment-json-file", back, "--execute"],
        [REASSIGN, "--bootstrap-server", via, "--reassignment-json-file", back, "--cancel"],
    ])
    status, out, err = verify_done
    assert status == 0 and f"Reassignment of partition {TOPIC}-0 is completed." in out, (out, err)
    assert move_back[0] == 0, move_back
    status, out, err = cancel
    assert status == 0 and f"Successfully cancelled partition reassignment for: {TOPIC}-0" in out, (out, err)
    wait_for(lambda: list_reassignments(via_broker) == {}, 10, "nothing in progress after the cancellation")
    wait_for(lambda: describe(via)[0][1] == sorted([third, follower]), 10, "the replicas it started from")
    order = AdminClient({"bootstrap.servers": via}).list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
    assert list(order.replicas) == [third, follower], order.replicas
    wait_for(lambda: not os.path.exists(removed), 10, f"{removed} deleted again after the cancellation")
    assert alter_reassignment(via_broker, 0, None) == (0, NO_REASSIGNMENT_IN_PROGRESS)
    assert alter_reassignment(via_broker, 0, [third, 9]) == (0, INVALID_REPLICA_ASSIGNMENT)
    assert time.monotonic() - started < 90
