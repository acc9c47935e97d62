"""Load reports and placement at creation on 3 brokers and the shared etcd (issue 17, items 1, 2
and 5): a partition produced to shows its bytes in in its leader's `R/load/<id>` and its
replication bytes in in each follower's within seconds; the partitions of one bundle of a new
topic share their preferred leader, and the bundle records the controller writes name it as the
owner."""

import json
import time
import zlib

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import SUMMARY_LINES
from test_cluster import SkiffCluster, metrics, wait_for
from test_replication import REPLICA_SETTINGS, describe, ready
from test_replication_faults import etcdctl

# Reports go out every 5 s once traffic is known (two readings of the counters), so a partition
# produced to from the start shows in the first or second report.
REPORT_BOUND_S = 15
RECORD_BYTES = 1024
HASH_SPACE = 1 << 32
DEFAULT_BUNDLES = 4


@pytest.fixture(scope="module")
def cluster3(etcd):
    cluster = SkiffCluster(etcd, 3, REPLICA_SETTINGS).start()
    try:
        yield ready(cluster)
    finally:
        cluster.stop()


def stored(cluster, key):
    """The JSON value of `key` below the cluster's root, or None."""
    value = etcdctl(cluster.etcd, "get", f"/skiff/{cluster.name}/v1/{key}", "--print-value-only").strip()
    return json.loads(value) if value else None


def create(bootstrap, new_topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([new_topic])[new_topic.topic].result(30)


def traffic_of(cluster, broker, topic, partition):
    """The partition's entry in `broker`'s load report, or None."""
    report = stored(cluster, f"load/{broker}")
    for entry in (report or {}).get("traffic", {}).get("partitions", []):
        if (entry["topic"], entry["partition"]) == (topic, partition):
            return entry
    return None


def test_a_produced_partition_shows_in_its_leaders_and_followers_load_reports(cluster3):
    topic = "loaded"
    bootstrap = cluster3.brokers[0].bootstrap
    create(bootstrap, NewTopic(topic, 1, 3))
    wait_for(lambda: (lambda p: p[0] if p and p[0][0] >= 0 and p[0][2] == [0, 1, 2] else None)(
        describe(bootstrap, topic)), 15, "partition 0 led with a full ISR")
    leader = describe(bootstrap, topic)[0][0]
    followers = [b for b in range(3) if b != leader]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    started = time.monotonic()
    seen = {}
    while len(seen) < 3 and time.monotonic() < started + REPORT_BOUND_S + 5:
        for _ in range(100):
            producer.produce(topic, b"x" * RECORD_BYTES, partition=0)
        producer.flush(10)
        entry = traffic_of(cluster3, leader, topic, 0)
        if leader not in seen and entry and entry["bytes_in_per_second"] > 0 and entry["messages_in_per_second"] > 0:
            seen[leader] = time.monotonic() - started
        for follower in followers:
            entry = traffic_of(cluster3, follower, topic, 0)
            if follower not in seen and entry and entry["replication_bytes_in_per_second"] > 0:
                seen[follower] = time.monotonic() - started
        time.sleep(0.2)
    SUMMARY_LINES.append(f"load reports: produced partition seen after {seen} s (leader {leader})")
    assert set(seen) == {0, 1, 2}, (leader, seen)
    assert all(delay <= REPORT_BOUND_S for delay in seen.values()), seen
    # The leader's totals cover the partition's; its followers took no client bytes for it.
    report = stored(cluster3, f"load/{leader}")
    assert report["traffic"]["bytes_in_per_second"] >= traffic_of(cluster3, leader, topic, 0)["bytes_in_per_second"]
    for follower in followers:
        assert (traffic_of(cluster3, follower, topic, 0) or {}).get("bytes_in_per_second", 0) == 0
    # The same counters as metrics: the leader took the bytes in and sent them to its followers.
    figures = {broker: metrics(cluster3.brokers[broker]) for broker in range(3)}
    assert figures[leader]["skiff_broker_bytes_in_total"] >= 100 * RECORD_BYTES, figures[leader]
    assert figures[leader]["skiff_broker_bytes_out_total"] > 0
    for follower in followers:
        assert figures[follower]["skiff_broker_replication_bytes_in_total"] >= 100 * RECORD_BYTES


def test_the_partitions_of_a_new_bundle_share_a_preferred_leader_which_owns_the_bundle(cluster3):
    topic = "bundled"
    partitions = 16
    bootstrap = cluster3.brokers[1].bootstrap
    create(bootstrap, NewTopic(topic, partitions, 2))
    replicas = wait_for(lambda: (stored(cluster3, f"topics/{topic}") or {}).get("replicas"), 15, "the topic record")
    width = HASH_SPACE // DEFAULT_BUNDLES
    owners = {}
    for partition, assigned in enumerate(replicas):
        bundle = min(zlib.crc32(f"{topic}-{partition}".encode()) // width, DEFAULT_BUNDLES - 1)
        owners.setdefault(bundle, set()).add(assigned[0])
    # (Which brokers own them depends on the load each reported: BP-65 leaves out a broker whose
    # figures are unknown or busy, so how far they spread is the placement unit tests' to check.)
    assert len(owners) > 1 and all(len(leaders) == 1 for leaders in owners.values()), owners

    def records():
        found = {}
        for bundle in range(DEFAULT_BUNDLES):
            hi = min((bundle + 1) * width, HASH_SPACE - 1)
            record = stored(cluster3, f"bundles/{topic}/0x{bundle * width:08x}_0x{hi:08x}")
            if record is None:
                return None
            found[bundle] = record["owner"]
        return found
    recorded = wait_for(records, 15, "the controller's bundle records of the topic")
    for bundle, leaders in owners.items():
        assert recorded[bundle] in leaders, (bundle, recorded, owners)
