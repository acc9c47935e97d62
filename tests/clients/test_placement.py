"""Placement wiring: topic creation asks placement for replicas, the controller writes each new
topic's bundle records, and the operator endpoint shows the bundles (ranges, owners, load) as JSON."""

import json
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import InvalidReplicationFactorError

from test_metrics import scrape


def test_created_topics_appear_as_bundles_owned_by_this_node(broker_factory):
    broker = broker_factory("skiff.metrics.listener=127.0.0.1:0")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("orders", num_partitions=8, replication_factor=1)])
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics([NewTopic("too-many-replicas", num_partitions=1, replication_factor=3)])
    admin.close()

    # The controller writes the topic's bundle records after the topic itself: wait for them.
    deadline = time.monotonic() + 10
    while True:
        head, body = scrape(broker, "/placement/bundles")
        assert head.startswith("HTTP/1.1 200"), head
        bundles = json.loads(body)["bundles"]
        orders = [bundle for bundle in bundles if bundle["namespace"] == "orders"]
        if orders or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    # Pulsar's default layout: 4 bundles covering the whole hash range, all owned by this node.
    assert len(orders) == 4
    assert orders[0]["hash_lo"] == 0 and orders[-1]["hash_hi"] >= 0xFFFFFFFF
    assert all(bundle["owner"] == 1 for bundle in orders)
    assert not [bundle for bundle in bundles if bundle["namespace"] == "too-many-replicas"]

    # The bundle records are kept in the metadata store across a restart.
    broker.log_lines.clear()  # the restarted broker prints its new metrics address
    broker.restart()
    _, body = scrape(broker, "/placement/bundles")
    assert len([b for b in json.loads(body)["bundles"] if b["namespace"] == "orders"]) == 4


def test_create_topics_takes_a_manual_replica_assignment_and_checks_it(broker_factory):
    """CreateTopics with replica assignments (Kafka's rules): partitions 0..n each once, brokers
    registered, none twice, one replica count; the count and factor fields must then be -1."""
    from kafka.errors import InvalidReplicationAssignmentError, InvalidRequestError

    broker = broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("assigned", num_partitions=-1, replication_factor=-1,
                                  replica_assignments={0: [1], 1: [1], 2: [1]})])
    described = admin.describe_topics(["assigned"])[0]
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
    assert all(p["replica_nodes"] == [1] and p["leader_id"] == 1 for p in described["partitions"])
    for assignments in ({0: [99]}, {0: [1, 1]}, {1: [1]}, {0: []}):
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_topics([NewTopic("misfit", num_partitions=-1, replication_factor=-1,
                                          replica_assignments=assignments)])
    with pytest.raises(InvalidRequestError):
        admin.create_topics([NewTopic("both", num_partitions=1, replication_factor=-1,
                                      replica_assignments={0: [1]})])
    admin.close()
