"""Placement wiring: topic creation asks placement for replicas and bundles, and the operator
endpoint shows the bundles (ranges, owners, load) as JSON."""

import json

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

    head, body = scrape(broker, "/placement/bundles")
    assert head.startswith("HTTP/1.1 200"), head
    bundles = json.loads(body)["bundles"]
    orders = [bundle for bundle in bundles if bundle["namespace"] == "orders"]
    # Pulsar's default layout: 4 bundles covering the whole hash range, all owned by this node.
    assert len(orders) == 4
    assert orders[0]["hash_lo"] == 0 and orders[-1]["hash_hi"] >= 0xFFFFFFFF
    assert all(bundle["owner"] == 1 for bundle in orders)
    assert not [bundle for bundle in bundles if bundle["namespace"] == "too-many-replicas"]

    # The bundles are rebuilt from the topics after a restart.
    broker.log_lines.clear()  # the restarted broker prints its new metrics address
    broker.restart()
    _, body = scrape(broker, "/placement/bundles")
    assert len([b for b in json.loads(body)["bundles"] if b["namespace"] == "orders"]) == 4
